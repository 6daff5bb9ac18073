// Ground truth for large objects the budget-limited heap sampler misses:
// the program churns small garbage from the start (the agent raises the
// sampling interval to stay within its budget), and after 1 s allocates
// its hot array, 256 KiB, which it then reads at random while churning on.
// Usage: java LateBig [seconds (0 = forever)]
// Prints "ready" once, "hot" when the array exists, then "ops N" each second.
public class LateBig {
    static long[] hot;
    static volatile Object junk;
    static long seed = 0x9E3779B97F4A7C15L;

    static long read(long[] a) {
        long s = seed, sum = 0;
        for (int i = 0; i < 20_000; i++) {
            s = s * 6364136223846793005L + 1442695040888963407L;
            sum += a[(int) (((s >>> 40) * a.length) >>> 24)];
        }
        seed = s;
        return sum;
    }

    public static void main(String[] args) {
        double seconds = args.length > 0 ? Double.parseDouble(args[0]) : 0;
        long start = System.nanoTime(), end = seconds > 0 ? start + (long) (seconds * 1e9) : Long.MAX_VALUE;
        long next = start + 1_000_000_000L, ops = 0, sink = 0;
        System.out.println("ready");
        System.out.flush();
        long now;
        while ((now = System.nanoTime()) < end) {
            for (int i = 0; i < 2_000; i++)
                junk = new byte[64];
            if (hot == null && now - start > 1_000_000_000L) {
                hot = new long[32768]; // HOT-SITE
                System.out.println("hot");
            }
            if (hot != null)
                sink += read(hot);
            ops++;
            if (now >= next) {
                System.out.println("ops " + ops);
                System.out.flush();
                ops = 0;
                next += 1_000_000_000L;
            }
        }
        System.out.println("done " + (sink == 42 ? "!" : ""));
    }
}
