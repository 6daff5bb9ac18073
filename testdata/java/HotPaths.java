// Ground truth for access paths: one hot long[] (allocHot) read by two
// methods, scanA with 3/4 of its loads and scanB with 1/4, and a cold
// double[] read by scanCold. The hot object's heaviest access path must be
// scanA's load (ACCESS-A), called from run (CALL-A); the second scanB's.
// Each load and its use are on one line (C2 folds them into one
// instruction, `add mem, reg`, whose debug information names that line);
// when C2 inlines the scans into run, the access stacks still name them.
//
// Usage: java HotPaths [seconds (0 = forever)]
// Prints "ready" once, and "done" at the end.
public class HotPaths {
    static final int N = 1 << 20; // 8 MiB per long[]

    static long[] allocHot() {
        return new long[N]; // HOT-SITE
    }

    static double[] allocCold() {
        return new double[N]; // COLD-SITE
    }

    static long seedA = 0x9E3779B97F4A7C15L, seedB = 0x12345678ABCDEFL, seedC = 0x5DEECE66DL;

    static long scanA(long[] a, int iters) {
        long s = seedA, sum = 0;
        for (int i = 0; i < iters; i++) {
            s = s * 6364136223846793005L + 1442695040888963407L;
            sum += a[(int) (s >>> 40) & (N - 1)]; // ACCESS-A
        }
        seedA = s;
        return sum;
    }

    static long scanB(long[] a, int iters) {
        long s = seedB, sum = 0;
        for (int i = 0; i < iters; i++) {
            s = s * 6364136223846793005L + 1442695040888963407L;
            sum += a[(int) (s >>> 40) & (N - 1)]; // ACCESS-B
        }
        seedB = s;
        return sum;
    }

    static long scanCold(double[] c, int iters) {
        long s = seedC, sum = 0;
        for (int i = 0; i < iters; i++) {
            s = s * 6364136223846793005L + 1442695040888963407L;
            sum += (long) c[(int) (s >>> 40) & (N - 1)]; // ACCESS-COLD
        }
        seedC = s;
        return sum;
    }

    static long run(long[] hot, double[] cold) {
        long sink = 0;
        sink += scanA(hot, 30_000); // CALL-A
        sink += scanB(hot, 10_000); // CALL-B
        sink += scanCold(cold, 5_000); // CALL-COLD
        return sink;
    }

    public static void main(String[] args) throws Exception {
        double seconds = args.length > 0 ? Double.parseDouble(args[0]) : 0;
        long end = seconds > 0 ? System.nanoTime() + (long) (seconds * 1e9) : Long.MAX_VALUE;
        long sink = 0;
        System.out.println("ready");
        System.out.flush();
        while (System.nanoTime() < end) {
            long[] hot = allocHot();
            double[] cold = allocCold();
            long roundEnd = System.nanoTime() + 500_000_000L;
            long now;
            while ((now = System.nanoTime()) < roundEnd && now < end) {
                sink += run(hot, cold); // CALL-RUN
            }
        }
        System.out.println("done " + (sink == 42 ? "!" : ""));
    }
}
