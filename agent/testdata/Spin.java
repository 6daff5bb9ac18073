// Workload for stacks_e2e_test.go: a thread named "djx-spin" spins in
// Spin.hot, whose whole body is on the line marked SITE:hot, so every bci of
// it maps to that line; outer calls it in a loop (and, once C2 compiles
// outer, inlines it).
//
//   java Spin   start the thread, print "READY <System.nanoTime()>", then per
//               stdin line: "count" prints "COUNT <calls of hot> <nanoTime>",
//               "gcs N" runs N System.gc() and prints "GCDONE <nanoTime>",
//               "exit" (or EOF) stops the thread and exits with status 3.
import java.io.BufferedReader;
import java.io.InputStreamReader;

public class Spin {
    static volatile long sink;
    static volatile long calls;
    static volatile boolean stop;

    static long hot(long n) {
        long x = 0; for (long i = 0; i < n; i++) { x = x * 6364136223846793005L + i; } return x; // SITE:hot
    }

    static void outer() {
        while (!stop) {
            sink += hot(20000);
            calls++;
        }
    }

    public static void main(String[] args) throws Exception {
        Thread t = new Thread(Spin::outer, "djx-spin");
        t.setDaemon(true);
        t.start();
        System.out.println("READY " + System.nanoTime());
        System.out.flush();
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in));
        for (;;) {
            String line = in.readLine();
            if (line == null || line.equals("exit")) {
                break;
            }
            if (line.startsWith("gcs ")) {
                int n = Integer.parseInt(line.substring(4));
                for (int i = 0; i < n; i++) {
                    System.gc();
                }
                System.out.println("GCDONE " + System.nanoTime());
                System.out.flush();
            }
            if (line.equals("count")) {
                long c = calls;
                System.out.println("COUNT " + c + " " + System.nanoTime());
                System.out.flush();
            }
        }
        stop = true;
        t.join();
        System.exit(3);
    }
}
