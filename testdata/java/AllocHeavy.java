// Allocation-heavy workload: mostly small short-lived objects plus some of
// 2 KiB, kept in a ring so that a few survive. Prints "ready", then
// "ops N" each second (allocations done in that second).
//
// Usage: java AllocHeavy [seconds (0 = forever)]
public class AllocHeavy {
    static Object[] keep = new Object[4096];

    public static void main(String[] args) {
        double seconds = args.length > 0 ? Double.parseDouble(args[0]) : 0;
        long start = System.nanoTime();
        long end = seconds > 0 ? start + (long) (seconds * 1e9) : Long.MAX_VALUE;
        long next = start + 1_000_000_000L, ops = 0;
        int k = 0;
        System.out.println("ready");
        System.out.flush();
        long now;
        while ((now = System.nanoTime()) < end) {
            for (int i = 0; i < 10_000; i++) {
                Object o = (i & 31) == 0 ? new byte[2048] : new byte[48];
                keep[k++ & 4095] = o;
            }
            ops += 10_000;
            if (now >= next) {
                System.out.println("ops " + ops);
                System.out.flush();
                ops = 0;
                next += 1_000_000_000L;
            }
        }
        System.out.println("done");
    }
}
