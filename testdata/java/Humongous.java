// Ground truth for G1's humongous objects (run with -Xmx256m -Xmn16m: 1 MiB
// regions, so a 1 MiB long[] is humongous): each round allocates one from
// allocBig(), reads it, drops it and then allocates 16 MiB of small garbage,
// about one young GC. Young GCs reclaim dead humongous arrays eagerly, so
// the heap after each GC stays flat. A weak reference to them (a JVMTI tag)
// keeps them until a concurrent cycle, and the heap after GC climbs.
//
// Usage: java Humongous [seconds]
public class Humongous {
    static long[] allocBig() {
        return new long[1 << 17]; // BIG-SITE
    }

    public static void main(String[] args) {
        double seconds = args.length > 0 ? Double.parseDouble(args[0]) : 3;
        long end = System.nanoTime() + (long) (seconds * 1e9), sum = 0;
        Object[] junk = new Object[1024];
        int rounds = 0;
        System.out.println("ready");
        while (System.nanoTime() < end) {
            long[] a = allocBig();
            for (int i = 0; i < a.length; i += 8) {
                sum += a[i] + i;
            }
            a = null;
            for (int i = 0; i < 16 * 1024; i++) {
                junk[i & 1023] = new byte[1000];
            }
            rounds++;
        }
        System.out.println("done " + rounds + (sum == 42 ? "!" : ""));
    }
}
