import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.lang.management.GarbageCollectorMXBean;
import java.lang.management.ManagementFactory;
import java.lang.ref.WeakReference;
import java.lang.reflect.Field;
import java.lang.reflect.Modifier;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.TreeMap;

// The ground truth of heapwalk's live test: data built at start-up, the
// way services build theirs, held by statics. It prints the offsets of
// the reference fields the test names (the test's stand-in for the
// agent's field names), collects, says "ready", and exits when its
// stdin closes.
//
// Arguments: map entries, map value length, tree entries, list entries,
// list element length, table MiB, and "churn" for a thread that keeps
// replacing the map's values and making garbage, or "gcs": each line
// "young" of stdin runs a young collection, "full" a full one, and each
// is answered "done".
public class GroundTruth {
    static HashMap<Long, long[]> map;
    static TreeMap<Integer, Small> tree;
    static ArrayList<long[]> list;
    static WeakReference<long[]> weak;
    static long[] table;

    static final class Small {
        final int a;
        final long b;

        Small(int a) {
            this.a = a;
            this.b = a * 3L;
        }
    }

    public static void main(String[] args) throws Exception {
        int mapN = Integer.parseInt(args[0]), mapLen = Integer.parseInt(args[1]);
        int treeN = Integer.parseInt(args[2]);
        int listN = Integer.parseInt(args[3]), listLen = Integer.parseInt(args[4]);
        int tableMiB = Integer.parseInt(args[5]);

        map = new HashMap<>();
        for (int i = 0; i < mapN; i++) {
            map.put(1000L + i, new long[mapLen]); // keys past Long's cache
        }
        tree = new TreeMap<>();
        for (int i = 0; i < treeN; i++) {
            tree.put(1000 + i, new Small(i));
        }
        list = new ArrayList<>();
        for (int i = 0; i < listN; i++) {
            list.add(new long[listLen]);
        }
        weak = new WeakReference<>(new long[1_000_003]); // held by nothing else
        table = new long[tableMiB << 17]; // allocated last

        Field f = sun.misc.Unsafe.class.getDeclaredField("theUnsafe");
        f.setAccessible(true);
        sun.misc.Unsafe u = (sun.misc.Unsafe) f.get(null);
        for (Class<?> c : new Class<?>[] {GroundTruth.class, HashMap.class, Class.forName("java.util.HashMap$Node"),
                TreeMap.class, Class.forName("java.util.TreeMap$Entry"), ArrayList.class, WeakReference.class}) {
            for (Field fd : c.getDeclaredFields()) {
                if (fd.getType().isPrimitive()) {
                    continue;
                }
                boolean st = Modifier.isStatic(fd.getModifiers());
                long off = st ? u.staticFieldOffset(fd) : u.objectFieldOffset(fd);
                System.out.println("field " + c.getName() + " " + fd.getName() + " " + off + " " + (st ? "static" : "instance"));
            }
        }
        // A full collection, so that none the start-up left pending (G1's
        // mixed collections after a marking) runs during the walk.
        System.gc();
        if (args.length > 6 && args[6].equals("churn")) {
            // Keep changing the map and making garbage while the walk
            // runs.
            Thread churn = new Thread(() -> {
                long[] junk = null;
                for (long n = 0; ; n++) {
                    map.put(1000L + (n % mapN), new long[mapLen]);
                    for (int i = 0; i < 16; i++) {
                        junk = new long[64];
                    }
                    if (n % 10 == 0) { // about 90 MB/s: a young collection every few tenths of a second
                        try {
                            Thread.sleep(1);
                        } catch (InterruptedException e) {
                            return;
                        }
                    }
                    if (junk.length == 0) {
                        System.out.println();
                    }
                }
            });
            churn.setDaemon(true);
            churn.start();
        }
        System.out.println("ready " + ProcessHandle.current().pid());
        System.out.flush();
        if (args.length > 6 && args[6].equals("gcs")) {
            gcs();
            return;
        }
        while (System.in.read() >= 0) {
        }
    }

    static long[] junk;

    // gcs runs the collections stdin asks for.
    static void gcs() throws Exception {
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in));
        for (String line; (line = in.readLine()) != null; ) {
            if (line.equals("young")) {
                long n = youngCount();
                while (youngCount() == n) {
                    for (int i = 0; i < 1024; i++) {
                        junk = new long[64];
                    }
                }
            } else if (line.equals("full")) {
                System.gc();
            }
            System.out.println("done");
            System.out.flush();
        }
    }

    static long youngCount() {
        long n = 0;
        for (GarbageCollectorMXBean b : ManagementFactory.getGarbageCollectorMXBeans()) {
            String name = b.getName();
            if (name.equals("Copy") || name.equals("PS Scavenge") || name.equals("G1 Young Generation")) {
                n += b.getCollectionCount();
            }
        }
        return n;
    }
}
