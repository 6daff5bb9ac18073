// Ground truth for allocation stacks: objects above djx-bpf's min size
// (1 KiB) allocated all the time at known sites, each reached by one known
// path, in compiled and interpreted code and through a native method:
//   SITE-A  makeA's long[512]      <- loopA <- run <- main   (3 of 6 calls)
//   SITE-B  makeB's byte[4096]     <- deep x20 <- loopB <- run <- main (2 of 6)
//   SITE-C  makeC's Array.newInstance(long.class, 600), a native method
//           (java.lang.reflect.Array.newArray) <- loopC <- run <- main (1 of 6)
// A ring keeps the last objects alive for a while, as a cache would.
// Usage: java AllocPaths [seconds (0 = forever)]
// Prints "ready" once, and "done" at the end.
import java.lang.reflect.Array;

public class AllocPaths {
    static final Object[] ring = new Object[4096];
    static int next;

    static void keep(Object o) {
        ring[next] = o;
        next = (next + 1) & (ring.length - 1);
    }

    static long[] makeA() {
        return new long[512]; // SITE-A
    }

    static byte[] makeB() {
        return new byte[4096]; // SITE-B
    }

    static long[] makeC() {
        return (long[]) Array.newInstance(long.class, 600); // SITE-C
    }

    static void loopA() {
        keep(makeA()); // CALL-A
    }

    static void deep(int n) {
        if (n == 0) {
            keep(makeB()); // CALL-B
            return;
        }
        deep(n - 1); // DEEP
    }

    static void loopB() {
        deep(20); // LOOP-B
    }

    static void loopC() {
        keep(makeC()); // CALL-C
    }

    static void run(int i) {
        switch (i % 6) {
            case 0, 2, 4 -> loopA(); // RUN-A
            case 1, 3 -> loopB(); // RUN-B
            default -> loopC(); // RUN-C
        }
    }

    public static void main(String[] args) throws Exception {
        double seconds = args.length > 0 ? Double.parseDouble(args[0]) : 0;
        long end = seconds > 0 ? System.nanoTime() + (long) (seconds * 1e9) : Long.MAX_VALUE;
        System.out.println("ready");
        System.out.flush();
        for (int i = 0; System.nanoTime() < end; i++) {
            run(i); // MAIN
            if ((i & 255) == 0) {
                Thread.sleep(1); // a service's pace, not a churn loop
            }
        }
        System.out.println("done");
    }
}
