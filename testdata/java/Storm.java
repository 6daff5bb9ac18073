// Stress workload: many threads and a GC storm. THREADS threads allocate
// (eight of them without pause, the rest in short bursts between sleeps)
// while one more calls System.gc() every 100 ms, so that collections,
// thread creation and the profiler's attach and detach overlap.
//
// Usage: java Storm THREADS [seconds (0 = forever)]
// Prints "ready" once every thread runs.
import java.util.concurrent.CountDownLatch;

public class Storm {
    static volatile Object sink;

    public static void main(String[] args) throws Exception {
        int threads = Integer.parseInt(args[0]);
        double seconds = args.length > 1 ? Double.parseDouble(args[1]) : 0;
        long end = seconds > 0 ? System.nanoTime() + (long) (seconds * 1e9) : Long.MAX_VALUE;
        CountDownLatch started = new CountDownLatch(threads);
        for (int i = 0; i < threads; i++) {
            final boolean busy = i < 8;
            Thread t = new Thread(() -> {
                started.countDown();
                Object[] keep = new Object[256];
                int k = 0;
                while (System.nanoTime() < end) {
                    for (int n = 0; n < (busy ? 10000 : 200); n++) {
                        keep[k++ & 255] = new byte[64 + (n & 1023)];
                    }
                    sink = keep;
                    if (!busy) {
                        try {
                            Thread.sleep(20);
                        } catch (InterruptedException e) {
                            return;
                        }
                    }
                }
            }, "storm-" + i);
            t.setDaemon(true);
            t.start();
        }
        started.await();
        System.out.println("ready");
        System.out.flush();
        while (System.nanoTime() < end) {
            System.gc();
            Thread.sleep(100);
        }
    }
}
