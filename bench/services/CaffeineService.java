import com.github.benmanes.caffeine.cache.Cache;
import com.github.benmanes.caffeine.cache.Caffeine;
import java.util.concurrent.ThreadLocalRandom;

// A cache service built the way real ones are: a bounded Caffeine cache
// (Debian's libcaffeine-java) of user sessions by id, filled at start-up
// and held by a static field, then served lookups, a few of them misses
// that load and evict.
//
// Arguments: entries, seconds to run. Prints "ready", then "ops N" each
// second (lookups so far).
public class CaffeineService {
    static final class Session {
        final long id;
        final String user;
        final long[] recent = new long[4];
        long hits;

        Session(long id) {
            this.id = id;
            this.user = "user-" + id;
        }
    }

    static Cache<Long, Session> sessions;

    public static void main(String[] args) throws Exception {
        int n = Integer.parseInt(args[0]);
        long secs = Long.parseLong(args[1]);
        sessions = Caffeine.newBuilder().maximumSize(n).build();
        for (long i = 0; i < n; i++) {
            sessions.put(i, new Session(i));
        }
        System.gc(); // start-up is over: the data is old
        System.out.println("ready");
        System.out.flush();
        ThreadLocalRandom rnd = ThreadLocalRandom.current();
        long end = System.nanoTime() + secs * 1_000_000_000L, next = System.nanoTime() + 1_000_000_000L;
        long ops = 0, sum = 0;
        while (System.nanoTime() < end) {
            // One lookup in a thousand misses: a new session evicts an old one.
            long id = ops % 1000 == 999 ? n + rnd.nextLong(n) : rnd.nextLong(n);
            Session s = sessions.get(id, Session::new);
            s.hits++;
            s.recent[(int) (s.hits & 3)] = ops;
            sum += s.id;
            ops++;
            if (System.nanoTime() > next) {
                System.out.println("ops " + ops);
                next += 1_000_000_000L;
            }
        }
        System.out.println("sum " + sum);
    }
}
