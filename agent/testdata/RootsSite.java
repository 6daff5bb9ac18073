// Workload for the roots and holder tests (roots_e2e_test.go,
// census_e2e_test.go): data main owns and passes down to a deeper frame,
// which holds it too, the way a service's entry point hands its data to
// the code that works on it.
//
//   java RootsSite [LIB]   main's local data holds a long[1 << 15] and
//                          passes it to hold, whose parameter d holds it
//                          too; main's local rows holds a double[2][4096],
//                          and hold's local r0 holds rows[0] directly;
//                          main's local nest holds an Object[] holding an
//                          Object[] holding a byte[40000], and hold's
//                          local n0 holds nest[0].
//                          With LIB (libRootsSite.so, from RootsSite.c) a
//                          JNI global holds an int[12345].
// hold prints READY, then per stdin line: "gc" runs System.gc() and
// prints "GCDONE"; EOF or "exit" returns to main, which prints DONE.
import java.io.BufferedReader;
import java.io.InputStreamReader;

public class RootsSite {
    static native void pin(Object o); // NewGlobalRef: held for good

    public static void main(String[] args) throws Exception {
        long[] data = new long[1 << 15];
        double[][] rows = new double[2][4096];
        Object[][] nest = {{new byte[40000]}};
        if (args.length > 0) {
            System.load(args[0]);
            pin(new int[12345]);
        }
        long n = hold(data, rows, nest); // SITE:call
        System.out.println("DONE " + (n + data.length + rows.length));
    }

    static long hold(long[] d, double[][] rows, Object[][] nest) throws Exception {
        double[] r0 = rows[0];
        Object[] n0 = nest[0];
        System.out.println("READY " + System.nanoTime());
        System.out.flush();
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in));
        for (;;) { // SITE:hold
            String line = in.readLine();
            if (line == null || line.equals("exit"))
                break;
            System.gc();
            System.out.println("GCDONE " + System.nanoTime());
            System.out.flush();
        }
        return d.length + r0.length + n0.length;
    }
}
