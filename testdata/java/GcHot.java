// Ground truth for GC relocation tracking. Sixty-four mid-sized arrays from
// one site (256 KiB each: small enough for every collector to copy, 16 MiB
// together so that their loads miss the L2 and dominate the time) take 31/32
// of the random loads; an array from a second site, replaced every round,
// takes the rest and competes for freed memory. Garbage below the min size
// forces frequent young GCs, and System.gc() every 0.7 s forces full,
// compacting collections, so the hot arrays move again and again.
//
// Usage: java GcHot [seconds (0 = forever)]
// Prints "ready", then "ops N" each second.
public class GcHot {
    static final int N = 1 << 15; // 256 KiB per long[]
    static final int HOT = 64;

    static long[] allocHot() {
        return new long[N]; // HOT-SITE
    }

    static long[] allocCold() {
        return new long[N]; // COLD-SITE
    }

    static Object[] garbage = new Object[1024];

    public static void main(String[] args) {
        double seconds = args.length > 0 ? Double.parseDouble(args[0]) : 0;
        long start = System.nanoTime();
        long end = seconds > 0 ? start + (long) (seconds * 1e9) : Long.MAX_VALUE;
        long nextReport = start + 1_000_000_000L, nextFull = start + 700_000_000L;
        long[][] hot = new long[HOT][];
        for (int i = 0; i < HOT; i++) {
            hot[i] = allocHot();
        }
        long[] cold = allocCold();
        long s = 0x9E3779B97F4A7C15L, sum = 0, ops = 0;
        int g = 0;
        System.out.println("ready");
        System.out.flush();
        long now;
        while ((now = System.nanoTime()) < end) {
            for (int i = 0; i < 200_000; i++) {
                s = s * 6364136223846793005L + 1442695040888963407L;
                int idx = (int) (s >>> 40) & (N - 1);
                if ((i & 31) == 0) {
                    sum += cold[idx]; // COLD-READ
                } else {
                    sum += hot[(int) (s >>> 20) & (HOT - 1)][idx];
                }
                if ((i & 63) == 0) {
                    garbage[g++ & 1023] = new byte[64]; // GARBAGE-SITE
                }
            }
            ops += 200_000;
            cold = allocCold();
            if (now >= nextFull) {
                System.gc(); // full, compacting GC
                nextFull += 700_000_000L;
            }
            if (now >= nextReport) {
                System.out.println("ops " + ops);
                System.out.flush();
                ops = 0;
                nextReport += 1_000_000_000L;
            }
        }
        System.out.println("done " + (sum == 42 ? "!" : ""));
    }
}
