// Ground truth for frees and memory reuse: phase 1 reads an 8 MiB array from
// allocOld(), then drops it and collects; phase 2 reads a 4 MiB array from
// allocNew(), which the collector places in the freed memory (G1 reuses the
// humongous regions). Both phases last the same time.
//
// Usage: java Reuse [seconds per phase]
public class Reuse {
    static long[] allocOld() {
        return new long[1 << 20]; // OLD-SITE
    }

    static long[] allocNew() {
        return new long[1 << 19]; // NEW-SITE
    }

    static long read(long[] a, double seconds) {
        long end = System.nanoTime() + (long) (seconds * 1e9), s = 0x9E3779B97F4A7C15L, sum = 0;
        int mask = a.length - 1;
        while (System.nanoTime() < end) {
            for (int i = 0; i < 100_000; i++) {
                s = s * 6364136223846793005L + 1442695040888963407L;
                sum += a[(int) (s >>> 40) & mask];
            }
        }
        return sum;
    }

    public static void main(String[] args) {
        double seconds = args.length > 0 ? Double.parseDouble(args[0]) : 2;
        System.out.println("ready");
        long[] a = allocOld();
        long sum = read(a, seconds);
        a = null;
        System.gc();
        System.gc();
        long[] b = allocNew();
        sum += read(b, seconds);
        System.out.println("done " + (sum == 42 ? "!" : ""));
    }
}
