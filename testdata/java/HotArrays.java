// Ground truth for djx-bpf: four equally sized arrays allocated at distinct
// sites; the random-access loop spends 13/16 of its loads on the one that
// allocHot() returns, 1/16 on each of the others. Every round reallocates the
// arrays so that a profiler attached mid-run sees fresh allocations.
//
// Usage: java HotArrays [seconds (0 = forever)] [round-ms]
// Prints "ready" once, then "ops N" each second (loads done in that second).
public class HotArrays {
    static final int N = 1 << 20; // 8 MiB per long[]

    static long[] allocHot() {
        return new long[N]; // HOT-SITE
    }

    static long[] allocCold1() {
        return new long[N]; // COLD-SITE-1
    }

    static long[] allocCold2() {
        return new long[N]; // COLD-SITE-2
    }

    static double[] allocCold3() {
        return new double[N]; // COLD-SITE-3
    }

    static long seed = 0x9E3779B97F4A7C15L;

    static long work(long[] hot, long[] c1, long[] c2, double[] c3, int iters) {
        long s = seed, sum = 0;
        final int mask = N - 1;
        for (int i = 0; i < iters; i++) {
            s = s * 6364136223846793005L + 1442695040888963407L;
            int idx = (int) (s >>> 40) & mask;
            // A fixed pattern, so that branch prediction costs the same
            // for every array and the cost split follows the load split.
            int sel = i & 15;
            if (sel < 13) {
                sum += hot[idx];
            } else if (sel == 13) {
                sum += c1[idx];
            } else if (sel == 14) {
                sum += c2[idx];
            } else {
                sum += (long) c3[idx];
            }
        }
        seed = s;
        return sum;
    }

    public static void main(String[] args) throws Exception {
        double seconds = args.length > 0 ? Double.parseDouble(args[0]) : 0;
        long roundMs = args.length > 1 ? Long.parseLong(args[1]) : 500;
        long start = System.nanoTime();
        long end = seconds > 0 ? start + (long) (seconds * 1e9) : Long.MAX_VALUE;
        long nextReport = start + 1_000_000_000L;
        long ops = 0, sink = 0;
        System.out.println("ready");
        System.out.flush();
        while (System.nanoTime() < end) {
            long[] hot = allocHot();
            long[] c1 = allocCold1();
            long[] c2 = allocCold2();
            double[] c3 = allocCold3();
            long roundEnd = System.nanoTime() + roundMs * 1_000_000L;
            long now;
            while ((now = System.nanoTime()) < roundEnd && now < end) {
                sink += work(hot, c1, c2, c3, 100_000);
                ops += 100_000;
                if (now >= nextReport) {
                    System.out.println("ops " + ops);
                    System.out.flush();
                    ops = 0;
                    nextReport += 1_000_000_000L;
                }
            }
        }
        System.out.println("done " + (sink == 42 ? "!" : ""));
    }
}
