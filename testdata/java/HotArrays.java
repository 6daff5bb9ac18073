// Ground truth for djx-bpf: four arrays allocated at distinct sites; the loop
// spends 13/16 of its loads on the one allocHot() returns and 1/16 on each of
// the others, reading 13 times as many of its lines, so every line read is read
// equally often and the cost split follows the load split under any cache
// pressure. It is 13 MiB, the others 1 MiB. -Dsmallhot makes it the smallest (8
// MiB; 24 MiB each, read in their first 630 KiB): 13/16 of the cost, 1/10 of the bytes.
// Usage: java [-Dsmallhot] HotArrays [seconds (0: forever)] [round-ms (500; 0: once, into statics)]; prints "ready", then "ops N" a second.
public class HotArrays {
    static final boolean SMALL = System.getProperty("smallhot") != null;
    static final int COLD = SMALL ? 3 << 20 : 1 << 17, HOT = SMALL ? 1 << 20 : 13 * COLD, READ = SMALL ? HOT / 13 : COLD;
    static long[] allocHot() {
        return new long[HOT]; // HOT-SITE
    }

    static long[] allocCold1() {
        return new long[COLD]; // COLD-SITE-1
    }

    static long[] allocCold2() {
        return new long[COLD]; // COLD-SITE-2
    }

    static double[] allocCold3() {
        return new double[COLD]; // COLD-SITE-3
    }

    static long seed = 0x9E3779B97F4A7C15L;

    // Sixteen loads in straight-line code, each at a uniformly random index
    // (the top 24 bits of an LCG step, scaled to the length): no branch to
    // mispredict and no load waits for another, so the misses of all four
    // arrays overlap alike.
    static long work(long[] hot, long[] c1, long[] c2, double[] c3, int iters) {
        long s = seed, sum = 0;
        for (int i = 0; i < iters; i += 16) {
            s = s * 6364136223846793005L + 1442695040888963407L;
            sum += hot[(int) (((s >>> 40) * HOT) >>> 24)];
            s = s * 6364136223846793005L + 1442695040888963407L;
            sum += hot[(int) (((s >>> 40) * HOT) >>> 24)];
            s = s * 6364136223846793005L + 1442695040888963407L;
            sum += hot[(int) (((s >>> 40) * HOT) >>> 24)];
            s = s * 6364136223846793005L + 1442695040888963407L;
            sum += hot[(int) (((s >>> 40) * HOT) >>> 24)];
            s = s * 6364136223846793005L + 1442695040888963407L;
            sum += c1[(int) (((s >>> 40) * READ) >>> 24)];
            s = s * 6364136223846793005L + 1442695040888963407L;
            sum += hot[(int) (((s >>> 40) * HOT) >>> 24)];
            s = s * 6364136223846793005L + 1442695040888963407L;
            sum += hot[(int) (((s >>> 40) * HOT) >>> 24)];
            s = s * 6364136223846793005L + 1442695040888963407L;
            sum += hot[(int) (((s >>> 40) * HOT) >>> 24)];
            s = s * 6364136223846793005L + 1442695040888963407L;
            sum += hot[(int) (((s >>> 40) * HOT) >>> 24)];
            s = s * 6364136223846793005L + 1442695040888963407L;
            sum += c2[(int) (((s >>> 40) * READ) >>> 24)];
            s = s * 6364136223846793005L + 1442695040888963407L;
            sum += hot[(int) (((s >>> 40) * HOT) >>> 24)];
            s = s * 6364136223846793005L + 1442695040888963407L;
            sum += hot[(int) (((s >>> 40) * HOT) >>> 24)];
            s = s * 6364136223846793005L + 1442695040888963407L;
            sum += hot[(int) (((s >>> 40) * HOT) >>> 24)];
            s = s * 6364136223846793005L + 1442695040888963407L;
            sum += hot[(int) (((s >>> 40) * HOT) >>> 24)];
            s = s * 6364136223846793005L + 1442695040888963407L;
            sum += (long) c3[(int) (((s >>> 40) * READ) >>> 24)];
            s = s * 6364136223846793005L + 1442695040888963407L;
            sum += hot[(int) (((s >>> 40) * HOT) >>> 24)];
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
        if (roundMs == 0) {
            hot = allocHot();
            c1 = allocCold1();
            c2 = allocCold2();
            c3 = allocCold3();
        }
        System.out.println("ready");
        System.out.flush();
        while (System.nanoTime() < end) {
            if (roundMs > 0) {
                hot = allocHot();
                c1 = allocCold1();
                c2 = allocCold2();
                c3 = allocCold3();
            }
            long roundEnd = roundMs > 0 ? System.nanoTime() + roundMs * 1_000_000L : end;
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

    // The arrays in use, held as a service holds its tables.
    static long[] hot, c1, c2;
    static double[] c3;
}
