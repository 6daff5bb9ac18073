// Ground truth for the BPF unwinder's depth: main calls down(DEPTH),
// which recurses DEPTH times and then scans an array, where nearly all of
// the time goes:
//
//   scan <- down x (DEPTH + 1) <- main
//
// Run with -XX:CompileCommand=dontinline,DeepStack::* so that every Java
// frame is a physical frame.
//
// Usage: java DeepStack DEPTH SECONDS
// Prints "ready" once warm, and "done" at the end.
public class DeepStack {
    static final long[] data = new long[1 << 16];
    static volatile long sink;

    static long scan() {
        long s = 0;
        for (int r = 0; r < 16; r++) {
            for (int i = 0; i < data.length; i++) {
                s += data[i];
            }
        }
        return s;
    }

    static long down(int d) {
        if (d == 0) {
            return scan();
        }
        return down(d - 1) + 1;
    }

    public static void main(String[] args) {
        int depth = Integer.parseInt(args[0]);
        long end = System.nanoTime() + Long.parseLong(args[1]) * 1_000_000_000L;
        for (int i = 0; i < data.length; i++) {
            data[i] = i;
        }
        for (int i = 0; i < 2000; i++) {
            sink += down(depth);
        }
        System.out.println("ready");
        while (System.nanoTime() < end) {
            sink += down(depth);
        }
        System.out.println("done");
    }
}
