// Workload for TestReattachGCStorm: THREADS threads allocate garbage
// (some of it kept a while, so that objects survive a GC or two) with a
// small young generation, so that GCs follow each other every few ms.
//   java Churn THREADS
// Prints "READY <nanoTime>" once running; ends at stdin EOF or "exit".
import java.io.BufferedReader;
import java.io.InputStreamReader;

public class Churn {
    static volatile boolean done;

    public static void main(String[] args) throws Exception {
        int threads = Integer.parseInt(args[0]);
        for (int t = 0; t < threads; t++) {
            Thread th = new Thread(() -> {
                Object[] keep = new Object[4096];
                long i = 0;
                while (!done) {
                    keep[(int) (i++ & 4095)] = new byte[64 + (int) (i % 2048)];
                }
            });
            th.setDaemon(true);
            th.start();
        }
        System.out.println("READY " + System.nanoTime());
        System.out.flush();
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in));
        for (;;) {
            String line = in.readLine();
            if (line == null || line.equals("exit"))
                break;
        }
        done = true;
    }
}
