// Ground truth for objects a concurrent collector moves. Each hot 256 KiB
// array is allocated between garbage arrays of its size, so the pages (ZGC)
// or regions (Shenandoah) holding it are mostly garbage and the collector
// relocates it; a full collection every 0.5 s and small garbage keep cycles
// coming. Random loads read the hot arrays only.
//
// Usage: java MovedHot [seconds (0 = forever)]
// Prints "ready", then "ops N" each second.
public class MovedHot {
    static final int N = 1 << 15; // 256 KiB per long[]
    static final int HOT = 32;
    static final int SPACER = 7; // garbage arrays allocated before each hot one

    static long[] allocHot() {
        return new long[N]; // HOT-SITE
    }

    static Object[] garbage = new Object[1024];

    public static void main(String[] args) {
        double seconds = args.length > 0 ? Double.parseDouble(args[0]) : 0;
        long start = System.nanoTime();
        long end = seconds > 0 ? start + (long) (seconds * 1e9) : Long.MAX_VALUE;
        long[][] hot = new long[HOT][];
        Object[] spacers = new Object[HOT * SPACER];
        for (int i = 0; i < HOT; i++) {
            for (int k = 0; k < SPACER; k++) {
                spacers[i * SPACER + k] = new long[N];
            }
            hot[i] = allocHot();
        }
        spacers = null;
        long s = 0x9E3779B97F4A7C15L, sum = 0, ops = 0;
        long nextReport = start + 1_000_000_000L, nextFull = start + 500_000_000L;
        int g = 0;
        System.out.println("ready");
        System.out.flush();
        long now;
        while ((now = System.nanoTime()) < end) {
            for (int i = 0; i < 200_000; i++) {
                s = s * 6364136223846793005L + 1442695040888963407L;
                sum += hot[(int) (s >>> 20) & (HOT - 1)][(int) (s >>> 40) & (N - 1)];
                if ((i & 63) == 0) {
                    garbage[g++ & 1023] = new byte[64];
                }
            }
            ops++;
            if (now > nextReport) {
                System.out.println("ops " + ops);
                nextReport += 1_000_000_000L;
            }
            if (now > nextFull) {
                System.gc();
                nextFull += 500_000_000L;
            }
        }
        System.out.println(sum == 42 ? "!" : "done");
    }
}
