// Workload for agent_e2e_test.go. The test finds the allocation sites by the
// SITE markers below, so keep each marker on the line of its `new`.
//
//   java AllocSite site N SMALL   allocate N long[512] (4 KiB) and N long[126]
//                                 (1 KiB) arrays plus SMALL int[2], keep them
//                                 all, print "READY <System.nanoTime()>", then
//                                 repeat per stdin line until EOF or "exit".
//   java AllocSite bench KIND SECS [RING]
//                                 allocate KIND ("kib" = long[126], "small" =
//                                 int[2], "big" = long[8192]) in a loop into a
//                                 ring of RING (4096) slots, print "RATE <allocs/s>".
import java.io.BufferedReader;
import java.io.InputStreamReader;

public class AllocSite {
    static Object[] keepBig, keepKib, keepSmall;

    static long[] allocBig() {
        return new long[512]; // SITE:big
    }

    static long[] allocKib() {
        return new long[126]; // SITE:kib
    }

    static void phase(int n, int small) {
        keepBig = new Object[n];
        keepKib = new Object[n];
        keepSmall = new Object[small];
        for (int i = 0; i < n; i++) {
            keepBig[i] = allocBig();
        }
        for (int i = 0; i < n; i++) {
            keepKib[i] = allocKib();
        }
        for (int i = 0; i < small; i++) {
            keepSmall[i] = new int[2];
        }
    }

    static long run(String kind, Object[] ring, double secs) {
        long deadline = System.nanoTime() + (long) (secs * 1e9);
        long n = 0;
        boolean kib = kind.equals("kib"), big = kind.equals("big");
        while (System.nanoTime() < deadline) {
            for (int i = 0; i < ring.length; i++) {
                ring[i] = kib ? new long[126] : big ? new long[8192] : new int[2];
            }
            n += ring.length;
        }
        return n;
    }

    public static void main(String[] args) throws Exception {
        if (args[0].equals("bench")) {
            String kind = args[1];
            double secs = Double.parseDouble(args[2]);
            Object[] ring = new Object[args.length > 3 ? Integer.parseInt(args[3]) : 4096];
            run(kind, ring, 1.0); // warm up: JIT
            long t0 = System.nanoTime();
            long n = run(kind, ring, secs);
            double rate = n / ((System.nanoTime() - t0) / 1e9);
            System.out.println("RATE " + (long) rate);
            return;
        }
        int n = Integer.parseInt(args[1]);
        int small = Integer.parseInt(args[2]);
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in));
        for (;;) {
            phase(n, small);
            System.out.println("READY " + System.nanoTime());
            System.out.flush();
            String line = in.readLine();
            if (line == null || line.equals("exit")) {
                return;
            }
        }
    }
}
