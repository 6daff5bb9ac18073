// Ground truth for deep stacks: a small expression interpreter that walks
// its syntax tree recursively. The tree is a left-leaning chain of DEPTH
// additions (((SUM(column) + 1) + 2) + ...), the shape a parser gives a
// long `a + b + c + ...` sum, with an aggregate over a column of 8 MiB at
// its bottom: SUM's loop reads the column (ACCESS) and holds nearly all of
// the time, at the bottom of DEPTH + 1 eval frames:
//
//   sum:ACCESS <- eval:CALL-SUM <- eval:CALL-LEFT x DEPTH <- query:CALL-EVAL <- main:CALL-QUERY
//
// C2 inlines one level of a recursive call, so the physical stack is about
// half as deep: still well beyond 32 frames.
//
// Usage: java DeepRecursion [seconds (0 = forever)]
// Prints "ready" once, and "done" at the end.
public class DeepRecursion {
    static final int DEPTH = 96;
    static final int ROWS = 1 << 20; // 8 MiB of long

    // The syntax tree, one node per index: an opcode, its children and a
    // constant.
    static final int ADD = 0, SUM = 1, CONST = 2;
    static int[] op = new int[0], left = new int[0], right = new int[0];
    static long[] value = new long[0];
    static int nodes;

    static long[] column; // the table's column that SUM aggregates
    static long seed = 0x9E3779B97F4A7C15L;

    static int node(int o, int l, int r, long v) {
        if (nodes == op.length) {
            int n = Math.max(16, 2 * nodes);
            op = java.util.Arrays.copyOf(op, n);
            left = java.util.Arrays.copyOf(left, n);
            right = java.util.Arrays.copyOf(right, n);
            value = java.util.Arrays.copyOf(value, n);
        }
        op[nodes] = o;
        left[nodes] = l;
        right[nodes] = r;
        value[nodes] = v;
        return nodes++;
    }

    // parse builds the tree of "SUM(rows) + 1 + 2 + ... + depth", left
    // associative, as a recursive descent parser would.
    static int parse(int depth, int rows) {
        int t = node(SUM, -1, -1, rows);
        for (int i = 1; i <= depth; i++) {
            t = node(ADD, t, node(CONST, -1, -1, i), 0);
        }
        return t;
    }

    static long eval(int n) {
        switch (op[n]) {
            case ADD: {
                long l = eval(left[n]); // CALL-LEFT
                long r = eval(right[n]); // CALL-RIGHT
                return l + r;
            }
            case SUM:
                return sum(column, (int) value[n]); // CALL-SUM
            default:
                return value[n];
        }
    }

    // sum aggregates rows sampled from the column.
    static long sum(long[] col, int rows) {
        long s = seed, acc = 0;
        for (int i = 0; i < rows; i++) {
            s = s * 6364136223846793005L + 1442695040888963407L;
            acc += col[(int) (s >>> 40) & (ROWS - 1)]; // ACCESS
        }
        seed = s;
        return acc;
    }

    static long query(int root) {
        return eval(root); // CALL-EVAL
    }

    public static void main(String[] args) throws Exception {
        double seconds = args.length > 0 ? Double.parseDouble(args[0]) : 0;
        long end = seconds > 0 ? System.nanoTime() + (long) (seconds * 1e9) : Long.MAX_VALUE;
        column = new long[ROWS];
        for (int i = 0; i < ROWS; i++) {
            column[i] = i * 31L;
        }
        int root = parse(DEPTH, 20_000);
        long sink = 0;
        System.out.println("ready");
        System.out.flush();
        while (System.nanoTime() < end) {
            sink += query(root); // CALL-QUERY
        }
        System.out.println("done " + (sink == 42 ? "!" : ""));
    }
}
