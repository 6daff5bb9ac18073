import java.util.ArrayList;
import java.util.TreeMap;
import java.util.concurrent.ThreadLocalRandom;

// A service built the way real ones are: its data allocated at start-up,
// long before any attach, then served. Statics hold a list of small
// arrays, a tree of small rows and a table allocated last; main's local
// holds a buffer that a deeper frame also holds while it serves.
//
// Arguments: list entries, tree entries, table MiB, seconds to run, and
// "gc" for a full collection every second (the data moves). Prints
// "ready", then "ops N" each second.
// Most loads hit the table, about a fifth the tree's nodes, keys and rows,
// a tenth main's buffer; the list is never read after start-up.
public class ServiceTruth {
    static ArrayList<long[]> list;
    static TreeMap<Integer, Row> tree;
    static long[] table;

    static final class Row {
        final int id;
        long hits;
        final long[] cols = new long[4];

        Row(int id) {
            this.id = id;
        }
    }

    public static void main(String[] args) throws Exception {
        int listN = Integer.parseInt(args[0]), treeN = Integer.parseInt(args[1]);
        int tableMiB = Integer.parseInt(args[2]);
        long secs = Long.parseLong(args[3]);
        boolean gc = args.length > 4 && args[4].equals("gc");
        list = new ArrayList<>(listN);
        for (int i = 0; i < listN; i++) {
            list.add(new long[2]);
        }
        tree = new TreeMap<>();
        for (int i = 0; i < treeN; i++) {
            tree.put(i * 7, new Row(i));
        }
        table = new long[tableMiB << 17]; // allocated last
        long[] buffer = new long[1 << 20]; // main's local, 8 MiB
        System.gc(); // start-up is over: the data is old
        System.out.println("ready");
        System.out.flush();
        long end = System.nanoTime() + secs * 1_000_000_000L;
        long sum = 0, nextGC = System.nanoTime() + 1_000_000_000L;
        long ops = 0, nextReport = System.nanoTime() + 1_000_000_000L;
        while (System.nanoTime() < end) {
            sum += serve(buffer, treeN);
            ops++;
            if (System.nanoTime() > nextReport) {
                System.out.println("ops " + ops); // serve calls so far, once a second
                nextReport += 1_000_000_000L;
            }
            if (gc && System.nanoTime() > nextGC) {
                System.gc();
                nextGC += 1_000_000_000L;
            }
        }
        System.out.println(sum == 42 ? "!" : "done");
    }

    // serve holds main's buffer too: the outer frame must name it.
    static long serve(long[] buf, int treeN) {
        ThreadLocalRandom r = ThreadLocalRandom.current();
        long s = 0;
        long[] t = table;
        for (int i = 0; i < 12000; i++) {
            s += t[r.nextInt(t.length)];
        }
        for (int i = 0; i < 100; i++) {
            Row row = tree.get(r.nextInt(treeN) * 7);
            if (row != null) {
                row.hits++;
                s += row.cols[i & 3] + row.id;
            }
        }
        for (int i = 0; i < 2000; i++) {
            s += buf[r.nextInt(buf.length)];
        }
        return s;
    }
}
