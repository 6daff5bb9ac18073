import com.google.common.collect.HashBasedTable;
import com.google.common.collect.Table;
import java.util.concurrent.ThreadLocalRandom;

// A cache service built the way real ones are: a Guava HashBasedTable
// (Debian's libguava-java) of prices by store and item, filled at start-up
// and held by a static field, then served lookups and row scans.
//
// Arguments: stores, items per store, seconds to run. Prints "ready",
// then "ops N" each second (lookups so far).
public class GuavaService {
    static Table<Integer, Integer, Long> prices;

    public static void main(String[] args) throws Exception {
        int stores = Integer.parseInt(args[0]), items = Integer.parseInt(args[1]);
        long secs = Long.parseLong(args[2]);
        prices = HashBasedTable.create();
        for (int s = 0; s < stores; s++) {
            for (int i = 0; i < items; i++) {
                prices.put(s, i * 31, (long) s * items + i);
            }
        }
        System.gc(); // start-up is over: the data is old
        System.out.println("ready");
        System.out.flush();
        ThreadLocalRandom rnd = ThreadLocalRandom.current();
        long end = System.nanoTime() + secs * 1_000_000_000L, next = System.nanoTime() + 1_000_000_000L;
        long ops = 0, sum = 0;
        while (System.nanoTime() < end) {
            int s = rnd.nextInt(stores);
            if (ops % 100 == 99) {
                for (long v : prices.row(s).values()) {
                    sum += v;
                }
            } else {
                Long v = prices.get(s, rnd.nextInt(items) * 31);
                sum += v == null ? 0 : v;
            }
            ops++;
            if (System.nanoTime() > next) {
                System.out.println("ops " + ops);
                next += 1_000_000_000L;
            }
        }
        System.out.println("sum " + sum);
    }
}
