import java.io.BufferedReader;
import java.io.InputStreamReader;

// Burst builds 64 arrays of 256 KiB at once, as a program builds its
// tables at start-up, then forces young GCs (which copy them to a
// survivor space or promote them to the old generation) and one full GC.
// Same protocol as Churn: "ready", a line on stdin, "done", exit 0 once
// stdin closes.
public class Burst {
    static long[][] hot = new long[64][];
    static Object sink;

    public static void main(String[] args) throws Exception {
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in));
        System.out.println("ready");
        System.out.flush();
        if (in.readLine() == null) {
            return;
        }
        for (int i = 0; i < hot.length; i++) {
            hot[i] = new long[1 << 15];
        }
        for (int i = 0; i < 600_000; i++) {
            sink = new byte[64];
        }
        for (int i = 0; i < 300_000; i++) {
            sink = new byte[1000];
        }
        System.gc();
        System.out.println("done " + hot.length);
        System.out.flush();
        in.readLine();
    }
}
