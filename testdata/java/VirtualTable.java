// Ground truth for virtual threads' stacks (JDK 21+): virtual threads read
// a static table and allocate, yielding often so that they unmount and
// migrate between carrier threads. Every access and allocation is made by
// a known chain of the task's own frames:
//   ACCESS  sweep's load of TABLE <- work (CALL-SWEEP) <- task (CALL-WORK)
//           <- lambda in main (SUBMIT)
//   SITE    chunk's long[256]      <- work (CALL-CHUNK) <- task (CALL-WORK)
//           <- lambda in main (SUBMIT)
// Below the lambda are the JDK's frames of a virtual thread, down to its
// entry (jdk.internal.vm.Continuation.enter); the carrier's frames
// (ForkJoinPool, Continuation.run) are not the virtual thread's.
// Usage: java VirtualTable [seconds (0 = forever)] [virtual threads]
// Prints "ready" once, and "done" at the end.
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;

public class VirtualTable {
    static final long[] TABLE = new long[1 << 15]; // 256 KiB
    static final Object[] ring = new Object[1024];
    static volatile long sink;

    static long sweep(int from) {
        long s = 0;
        for (int i = 0; i < 4096; i++) {
            s += TABLE[(from + i * 7) & (TABLE.length - 1)]; // ACCESS
        }
        return s;
    }

    static long[] chunk(int i) {
        return new long[256]; // SITE
    }

    static long work(int i) {
        long s = sweep(i * 4099); // CALL-SWEEP
        if ((i & 15) == 0) {
            ring[i & (ring.length - 1)] = chunk(i); // CALL-CHUNK
        }
        return s;
    }

    static void task(long end) {
        long s = 0;
        for (int i = 0; System.nanoTime() < end; i++) {
            s += work(i); // CALL-WORK
            if ((i & 7) == 0) {
                Thread.yield(); // unmounts: the next run may be on another carrier
            }
        }
        sink += s;
    }

    public static void main(String[] args) throws Exception {
        double seconds = args.length > 0 ? Double.parseDouble(args[0]) : 0;
        int threads = args.length > 1 ? Integer.parseInt(args[1]) : 8;
        long end = seconds > 0 ? System.nanoTime() + (long) (seconds * 1e9) : Long.MAX_VALUE;
        for (int i = 0; i < TABLE.length; i++) {
            TABLE[i] = i * 31L;
        }
        System.out.println("ready");
        System.out.flush();
        try (ExecutorService ex = Executors.newVirtualThreadPerTaskExecutor()) {
            for (int t = 0; t < threads; t++) {
                ex.submit(() -> task(end)); // SUBMIT
            }
        }
        System.out.println("done");
    }
}
