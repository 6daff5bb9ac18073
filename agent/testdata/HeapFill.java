// Workload for BenchmarkCensusPause: a heap of a chosen size and object
// count, built before the census. HeapFill.table holds SMALL/2 nodes, each
// with a small item (SMALL small objects, a service's map entries);
// HeapFill.keep holds BIG arrays of 1 KiB (the objects the census tracks);
// HeapFill.pad holds PAD arrays of 1 MiB (the rest of the heap).
//   java HeapFill SMALL BIG PAD
// Prints "READY <nanoTime>"; then per stdin line: "gc" runs System.gc()
// and prints "GCDONE <nanoTime>"; EOF or "exit" prints "DONE <n>" and ends.
import java.io.BufferedReader;
import java.io.InputStreamReader;

public class HeapFill {
    static final class Item {
        long a;
    }

    static final class Node {
        Node next;
        Item item;
    }

    static Node[] table;
    static Object[] keep, pad;

    public static void main(String[] args) throws Exception {
        int small = Integer.parseInt(args[0]), big = Integer.parseInt(args[1]), npad = Integer.parseInt(args[2]);
        table = new Node[small / 2];
        for (int i = 0; i < table.length; i++) {
            Node n = new Node();
            n.item = new Item();
            table[i] = n;
        }
        keep = new Object[big];
        for (int i = 0; i < big; i++)
            keep[i] = new long[126];
        pad = new Object[npad];
        for (int i = 0; i < npad; i++)
            pad[i] = new long[131070];
        System.gc(); // what remains is the service's steady heap
        System.out.println("READY " + System.nanoTime());
        System.out.flush();
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in));
        for (;;) {
            String line = in.readLine();
            if (line == null || line.equals("exit"))
                break;
            System.gc();
            System.out.println("GCDONE " + System.nanoTime());
            System.out.flush();
        }
        System.out.println("DONE " + (table.length + keep.length + pad.length));
    }
}
