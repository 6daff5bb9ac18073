// Workload for the frees/GC/reconciliation tests in agent_e2e_test.go. The
// test finds the allocation sites by the SITE markers below, so keep each
// marker on the line of its `new`.
//
//   java FreeSite frees N      allocate N long[32768] (256 KiB) arrays, one
//                              at the keep site and one at the drop site in
//                              turn, keep the first kind and drop the
//                              second, print "ALLOCATED <System.nanoTime()>".
//   java FreeSite keep N LEN   allocate and keep N long[LEN], print
//                              "ALLOCATED <nanoTime>".
// Then, per stdin line: "gc" runs System.gc() twice, "gc1" once; both sleep
// 500 ms and print "GCDONE <nanoTime>". EOF or "exit" ends the program.
import java.io.BufferedReader;
import java.io.InputStreamReader;

public class FreeSite {
    static Object[] keep;

    static long[] allocKeep() {
        return new long[32768]; // SITE:keep
    }

    static long[] allocDrop() {
        return new long[32768]; // SITE:drop
    }

    static void frees(int n) {
        keep = new Object[n / 2];
        Object[] drop = new Object[n / 2];
        for (int i = 0; i < n / 2; i++) {
            keep[i] = allocKeep();
            drop[i] = allocDrop();
        }
        drop = null; // unreachable from here on
    }

    static void keepMany(int n, int len) {
        keep = new Object[n];
        for (int i = 0; i < n; i++) {
            keep[i] = new long[len];
        }
    }

    public static void main(String[] args) throws Exception {
        if (args[0].equals("frees")) {
            frees(Integer.parseInt(args[1]));
        } else {
            keepMany(Integer.parseInt(args[1]), Integer.parseInt(args[2]));
        }
        System.out.println("ALLOCATED " + System.nanoTime());
        System.out.flush();
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in));
        for (;;) {
            String line = in.readLine();
            if (line == null || line.equals("exit")) {
                return;
            }
            System.gc();
            if (line.equals("gc")) {
                System.gc();
            }
            Thread.sleep(500);
            System.out.println("GCDONE " + System.nanoTime());
            System.out.flush();
        }
    }
}
