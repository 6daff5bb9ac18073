// Workload for the census tests in census_e2e_test.go: data built before
// the census, held the ways services hold it.
//
//   java CensusSite N LEN   CensusSite.table maps N keys to long[LEN];
//                           CensusSite.holder is a Sub whose fields data
//                           (declared in Base) and more (in Sub) hold
//                           byte[49152] and byte[32768]; main's local big
//                           holds a long[1 << 17]. Prints "READY".
// Then, per stdin line: "gc" runs System.gc() and prints "GCDONE"; EOF or
// "exit" ends the program.
import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.util.HashMap;
import java.util.Map;

public class CensusSite {
    interface Konst {
        int K = 1; // a field of an interface: JVMTI counts it first
    }

    static class Base {
        int a;
        Object pad;
        byte[] data = new byte[49152];
    }

    static class Sub extends Base implements Konst {
        long x;
        static int count;
        byte[] more = new byte[32768];
    }

    static Map<Integer, long[]> table = new HashMap<>();
    static Sub holder;

    public static void main(String[] args) throws Exception {
        int n = Integer.parseInt(args[0]), len = Integer.parseInt(args[1]);
        for (int i = 0; i < n; i++)
            table.put(i, new long[len]);
        holder = new Sub();
        long[] big = new long[1 << 17];
        System.out.println("READY " + System.nanoTime());
        System.out.flush();
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in));
        for (;;) {
            String line = in.readLine();
            if (line == null || line.equals("exit"))
                break;
            System.gc();
            System.out.println("GCDONE " + System.nanoTime());
            System.out.flush();
        }
        System.out.println("DONE " + (big.length + table.size()));
    }
}
