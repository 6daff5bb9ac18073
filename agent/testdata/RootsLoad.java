// Workload for BenchmarkRootsPause (roots_e2e_test.go): many threads with
// deep stacks, each frame holding objects of its own in locals, over a heap
// of many small objects.
//   java RootsLoad THREADS DEPTH SMALL
// THREADS threads each recurse DEPTH frames, every frame holding an
// Object[] and a String of its own, and park; RootsLoad.table holds
// SMALL/2 nodes, each with an item (SMALL small objects). Prints
// "READY <nanoTime>"; EOF or "exit" on stdin prints "DONE <n>" and ends.
import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.util.concurrent.CountDownLatch;

public class RootsLoad {
    static final class Item {
        long a;
    }

    static final class Node {
        Node next;
        Item item;
    }

    static Node[] table;
    static final CountDownLatch parked = new CountDownLatch(1), done = new CountDownLatch(1);
    static CountDownLatch started;

    static int down(int depth) throws InterruptedException {
        Object[] mine = new Object[] {depth};
        String name = "frame " + depth;
        if (depth > 0)
            return down(depth - 1) + mine.length + name.length();
        started.countDown();
        done.await();
        return mine.length + name.length();
    }

    public static void main(String[] args) throws Exception {
        int threads = Integer.parseInt(args[0]), depth = Integer.parseInt(args[1]), small = Integer.parseInt(args[2]);
        table = new Node[small / 2];
        for (int i = 0; i < table.length; i++) {
            Node n = new Node();
            n.item = new Item();
            table[i] = n;
        }
        started = new CountDownLatch(threads);
        Thread[] ts = new Thread[threads];
        for (int i = 0; i < threads; i++) {
            ts[i] = new Thread(() -> {
                try {
                    down(depth);
                } catch (InterruptedException e) {
                }
            }, "deep-" + i);
            ts[i].setDaemon(true);
            ts[i].start();
        }
        started.await();
        System.gc(); // what remains is the service's steady heap
        System.out.println("READY " + System.nanoTime());
        System.out.flush();
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in));
        for (String line; (line = in.readLine()) != null && !line.equals("exit");)
            ;
        done.countDown();
        System.out.println("DONE " + table.length);
    }
}
