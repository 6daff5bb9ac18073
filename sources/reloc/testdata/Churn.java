import java.io.BufferedReader;
import java.io.InputStreamReader;

// Churn keeps one live 256 KiB long[] while short-lived garbage forces young
// GCs and System.gc() forces full (compacting) GCs. It prints "ready", waits
// for a line on stdin, runs `rounds` rounds, prints "done <checksum>" and
// exits 0, so a test can attach between ready and go.
public class Churn {
    static Object sink;

    public static void main(String[] args) throws Exception {
        int rounds = args.length > 0 ? Integer.parseInt(args[0]) : 10;
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in));
        // Garbage allocated before the array leaves holes below it, so that
        // compaction slides it down.
        Object[] pre = new Object[1000];
        for (int i = 0; i < pre.length; i++) {
            pre[i] = new long[64];
        }
        long[] live = new long[32768]; // 256 KiB
        for (int i = 0; i < live.length; i++) {
            live[i] = i;
        }
        pre = null;
        System.out.println("ready");
        System.out.flush();
        if (in.readLine() == null) {
            return;
        }
        long sum = 0;
        for (int r = 0; r < rounds; r++) {
            // ~64 MiB of small garbage per round: several young GCs.
            for (int i = 0; i < 64 * 1024; i++) {
                sink = new byte[1000];
            }
            for (int i = 0; i < live.length; i += 512) {
                sum += live[i];
            }
            if (r % 3 == 2) {
                System.gc();
            }
        }
        System.out.println("done " + sum);
        System.out.flush();
    }
}
