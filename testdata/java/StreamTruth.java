import java.util.stream.IntStream;

// Ground truth for lambdas and streams: a report over orders written with
// streams. Each order's price is looked up in an 8 MiB price table (one
// long[]) by a lambda in an IntStream pipeline (ACCESS), after a lambda
// that reads the order's item (ORDERS); the pipeline runs per region
// (CALL-SUM), for each region of total's loop (CALL-REGION), from main
// (CALL-REPORT). Between the program's frames run the JDK's stream frames
// (IntPipeline, ReduceOps, Spliterators, the lambdas' hidden classes),
// which the truth allows:
//
//   lambda (ACCESS) <- [JDK] <- revenue:CALL-SUM <- total:CALL-REGION <- main:CALL-REPORT
//
// Usage: java StreamTruth [seconds (0 = forever)]
// Prints "ready" once, and "done" at the end.
public class StreamTruth {
    static final int ITEMS = 1 << 20; // 8 MiB of long

    static long[] prices;
    static int[] orders; // item ids, in order of arrival

    static long revenue(int region, int regions) {
        int per = orders.length / regions, from = region * per;
        return IntStream.range(from, from + per)
                .map(i -> orders[i]) // ORDERS
                .mapToLong(item -> prices[item]) // ACCESS
                .sum(); // CALL-SUM
    }

    static long total(int regions) {
        long sum = 0;
        for (int r = 0; r < regions; r++) {
            sum += revenue(r, regions); // CALL-REGION
        }
        return sum;
    }

    public static void main(String[] args) throws Exception {
        double seconds = args.length > 0 ? Double.parseDouble(args[0]) : 0;
        long end = seconds > 0 ? System.nanoTime() + (long) (seconds * 1e9) : Long.MAX_VALUE;
        prices = new long[ITEMS];
        for (int i = 0; i < ITEMS; i++) {
            prices[i] = 100 + i % 900;
        }
        orders = new int[1 << 16];
        long s = 0x9E3779B97F4A7C15L;
        for (int i = 0; i < orders.length; i++) {
            s = s * 6364136223846793005L + 1442695040888963407L;
            orders[i] = (int) (s >>> 40) & (ITEMS - 1);
        }
        int regions = 8;
        long sink = 0;
        System.out.println("ready");
        System.out.flush();
        while (System.nanoTime() < end) {
            sink += total(regions); // CALL-REPORT
        }
        System.out.println("done " + (sink == 42 ? "!" : ""));
    }
}
