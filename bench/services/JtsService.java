import java.util.List;
import java.util.concurrent.ThreadLocalRandom;
import org.locationtech.jts.geom.Envelope;
import org.locationtech.jts.index.strtree.STRtree;

// A spatial index service built the way real ones are: a JTS STRtree
// (Debian's libjts-java) of boxes, built at start-up and held by a static
// field, then served window queries.
//
// Arguments: boxes, seconds to run. Prints "ready", then "ops N" each
// second (queries so far).
public class JtsService {
    static STRtree index;

    public static void main(String[] args) throws Exception {
        int n = Integer.parseInt(args[0]);
        long secs = Long.parseLong(args[1]);
        ThreadLocalRandom rnd = ThreadLocalRandom.current();
        index = new STRtree();
        for (int i = 0; i < n; i++) {
            double x = rnd.nextDouble(10_000), y = rnd.nextDouble(10_000);
            index.insert(new Envelope(x, x + rnd.nextDouble(5), y, y + rnd.nextDouble(5)), Integer.valueOf(i));
        }
        index.build();
        System.gc(); // start-up is over: the data is old
        System.out.println("ready");
        System.out.flush();
        long end = System.nanoTime() + secs * 1_000_000_000L, next = System.nanoTime() + 1_000_000_000L;
        long ops = 0, found = 0;
        while (System.nanoTime() < end) {
            double x = rnd.nextDouble(10_000), y = rnd.nextDouble(10_000);
            List<?> hits = index.query(new Envelope(x, x + 20, y, y + 20));
            found += hits.size();
            ops++;
            if (System.nanoTime() > next) {
                System.out.println("ops " + ops);
                next += 1_000_000_000L;
            }
        }
        System.out.println("found " + found);
    }
}
