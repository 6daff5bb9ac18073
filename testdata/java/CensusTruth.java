// Ground truth for the census: a service whose data is built at start-up,
// long before djx-bpf attaches. A static map holds 32 arrays of 64 KiB
// (CensusTruth.index → HashMap.table → [] → HashMap$Node.value) and main
// holds a 16 MiB array in a local (table). Each round does 12 loads from
// table for every 4 from the map's arrays, so table takes 3/4 of the loads
// and the map's values 1/4; both are read at random, so every cache line
// costs alike. With "gc" a System.gc() every 500 ms moves them; with
// "churn" the loop also allocates small garbage (young GCs).
// With "fill=N" it also keeps N million small objects (a census of them
// takes seconds). With "cache=N" it first builds a cache of N Ki entries,
// long[160] values under Long keys, each with eight small objects in a list
// beside it, as a service's start-up leaves them interleaved in the heap.
// Usage: java CensusTruth [seconds (0 = forever)] [gc] [churn] [fill=N] [cache=N]
// Prints "ready" once, then "ops N" each second.
import java.util.HashMap;
import java.util.Map;

public class CensusTruth {
    static final Map<Integer, long[]> index = new HashMap<>();
    static final int VALUES = 32, VLEN = 8 << 10, TLEN = 2 << 20;
    static long seed = 0x9E3779B97F4A7C15L;
    static volatile Object junk;
    static Object[] filler;
    static final Map<Long, long[]> cache = new HashMap<>();
    static final java.util.List<Object> beside = new java.util.ArrayList<>();

    static long round(long[] table, long[] v) {
        long s = seed, sum = 0;
        for (int i = 0; i < 4096; i++) {
            s = s * 6364136223846793005L + 1442695040888963407L;
            sum += table[(int) (((s >>> 40) * TLEN) >>> 24)];
            s = s * 6364136223846793005L + 1442695040888963407L;
            sum += table[(int) (((s >>> 40) * TLEN) >>> 24)];
            s = s * 6364136223846793005L + 1442695040888963407L;
            sum += table[(int) (((s >>> 40) * TLEN) >>> 24)];
            s = s * 6364136223846793005L + 1442695040888963407L;
            sum += v[(int) (((s >>> 40) * VLEN) >>> 24)];
        }
        seed = s;
        return sum;
    }

    public static void main(String[] args) throws Exception {
        double seconds = args.length > 0 ? Double.parseDouble(args[0]) : 0;
        boolean gc = false, churn = false;
        for (int i = 1; i < args.length; i++) {
            gc |= args[i].equals("gc");
            churn |= args[i].equals("churn");
            if (args[i].startsWith("fill=")) {
                filler = new Object[Integer.parseInt(args[i].substring(5)) << 20];
                for (int j = 0; j < filler.length; j++)
                    filler[j] = new Object[1];
            }
            if (args[i].startsWith("cache="))
                for (long j = Integer.parseInt(args[i].substring(6)) << 10; j > 0; j--) {
                    cache.put(j, new long[160]);
                    for (int b = 0; b < 8; b++)
                        beside.add(new Object[1]);
                }
        }
        for (int i = 0; i < VALUES; i++)
            index.put(i, new long[VLEN]);
        long[] table = new long[TLEN];
        long start = System.nanoTime(), end = seconds > 0 ? start + (long) (seconds * 1e9) : Long.MAX_VALUE;
        long nextReport = start + 1_000_000_000L, nextGC = start + 500_000_000L, ops = 0, sink = 0;
        System.out.println("ready");
        for (int k = 0;; k = (k + 1) % VALUES) {
            sink += round(table, index.get(k));
            ops += 4096 * 4;
            if (churn)
                for (int j = 0; j < 64; j++)
                    junk = new byte[96];
            long now = System.nanoTime();
            if (gc && now >= nextGC) {
                System.gc();
                nextGC = now + 500_000_000L;
            }
            if (now >= nextReport) {
                System.out.println("ops " + ops);
                ops = 0;
                nextReport += 1_000_000_000L;
            }
            if (now >= end)
                break;
        }
        System.out.println("done " + (sink == 42 ? 1 : 0));
    }
}
