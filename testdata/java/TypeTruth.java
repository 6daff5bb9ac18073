// Ground truth for djx-bpf's data types and regions: a service that builds
// its data at start-up, prints "ready", and then only reads it, so that an
// attach long after start sees the same accesses as a launch.
// Usage: java TypeTruth MODE [seconds (0 = forever)] [size]
// Modes and the data every heap access of the read loop touches:
//   treemap  TreeMap<Long,Long> lookups: TreeMap$Entry (key, left, right), Long.value
//   hashmap  HashMap<Long,Long> lookups: HashMap$Node (hash, key, next, value),
//            HashMap$Node[] elements, Long.value
//   list     a linked list of TypeTruth$Node {long v; Node next}: Node.v, Node.next
//   objarray TypeTruth$Point[] of {double x, y}: Point[] elements, Point.x, Point.y
//   mmap     random longs of a memory-mapped file (the region "mapped file PATH");
//            PATH is printed as "file PATH"
//   direct   random longs of a direct ByteBuffer (native memory, not the heap)
//   spills   a long dependent computation whose state lives in stack slots
// Prints "ops N" each second.
import java.io.RandomAccessFile;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.MappedByteBuffer;
import java.nio.channels.FileChannel;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.HashMap;
import java.util.TreeMap;

public class TypeTruth {
    static final class Node {
        long v;
        Node next;
    }

    static final class Point {
        double x, y;

        Point(double x, double y) {
            this.x = x;
            this.y = y;
        }
    }

    // The data, held as a service holds its tables.
    static TreeMap<Long, Long> tree;
    static HashMap<Long, Long> hash;
    static Node[] listHeads;
    static Point[] points;
    static ByteBuffer buf;
    static long seed = 0x9E3779B97F4A7C15L;

    static int next(int bound) {
        seed = seed * 6364136223846793005L + 1442695040888963407L;
        return (int) (((seed >>> 33) * bound) >>> 31);
    }

    public static void main(String[] args) throws Exception {
        String mode = args[0];
        double seconds = args.length > 1 ? Double.parseDouble(args[1]) : 0;
        int n = args.length > 2 ? Integer.parseInt(args[2]) : 1 << 20;
        build(mode, n);
        System.out.println("ready");
        System.out.flush();
        long start = System.nanoTime();
        long end = seconds > 0 ? start + (long) (seconds * 1e9) : Long.MAX_VALUE;
        long nextReport = start + 1_000_000_000L, ops = 0, sink = 0;
        long now;
        while ((now = System.nanoTime()) < end) {
            sink += round(mode, n);
            ops += 10_000;
            if (now >= nextReport) {
                System.out.println("ops " + ops);
                System.out.flush();
                ops = 0;
                nextReport += 1_000_000_000L;
            }
        }
        System.out.println("done " + (sink == 42 ? "!" : ""));
    }

    static void build(String mode, int n) throws Exception {
        switch (mode) {
            case "treemap" -> {
                tree = new TreeMap<>();
                for (int i = 0; i < n; i++) tree.put((long) i * 7, (long) i);
            }
            case "hashmap" -> {
                hash = new HashMap<>();
                for (int i = 0; i < n; i++) hash.put((long) i * 7, (long) i);
            }
            case "list" -> {
                // 1024 lists whose nodes are allocated interleaved, so that
                // a walk misses the cache at every node.
                listHeads = new Node[1024];
                for (int i = 0; i < n; i++) {
                    Node x = new Node();
                    x.v = i;
                    x.next = listHeads[i & 1023];
                    listHeads[i & 1023] = x;
                }
            }
            case "objarray" -> {
                points = new Point[n];
                for (int i = 0; i < n; i++) points[i] = new Point(i, -i);
                // Shuffle so that the Points of neighbouring elements are far apart.
                for (int i = n - 1; i > 0; i--) {
                    int j = next(i + 1);
                    Point t = points[i];
                    points[i] = points[j];
                    points[j] = t;
                }
            }
            case "mmap" -> {
                Path f = Files.createTempFile("typetruth", ".dat");
                f.toFile().deleteOnExit();
                long size = (long) n * 64;
                try (RandomAccessFile raf = new RandomAccessFile(f.toFile(), "rw")) {
                    raf.setLength(size);
                    MappedByteBuffer m = raf.getChannel().map(FileChannel.MapMode.READ_WRITE, 0, size);
                    for (long i = 0; i < size; i += 4096) m.put((int) i, (byte) 1);
                    buf = m.order(ByteOrder.nativeOrder());
                }
                System.out.println("file " + f.toRealPath());
            }
            case "direct" -> {
                buf = ByteBuffer.allocateDirect(n * 64).order(ByteOrder.nativeOrder());
                for (int i = 0; i < n * 64; i += 4096) buf.put(i, (byte) 1);
            }
            case "spills" -> {
            }
            default -> throw new IllegalArgumentException("unknown mode " + mode);
        }
    }

    static long round(String mode, int n) {
        long s = 0;
        switch (mode) {
            case "treemap" -> {
                for (int i = 0; i < 10_000; i++) {
                    Long v = tree.get((long) next(n) * 7);
                    s += v;
                }
            }
            case "hashmap" -> {
                for (int i = 0; i < 10_000; i++) {
                    Long v = hash.get((long) next(n) * 7);
                    s += v;
                }
            }
            case "list" -> {
                Node x = listHeads[next(1024)];
                for (int i = 0; i < 10_000 && x != null; i++) {
                    s += x.v;
                    x = x.next;
                }
            }
            case "objarray" -> {
                for (int i = 0; i < 10_000; i++) {
                    Point p = points[next(n)];
                    s += (long) (p.x + p.y);
                }
            }
            case "mmap", "direct" -> {
                int limit = buf.capacity() / 8;
                for (int i = 0; i < 10_000; i++) s += buf.getLong(next(limit) * 8);
            }
            case "spills" -> s = spills(s);
        }
        return s;
    }

    // More live longs than x86-64 has registers, in a loop the JIT cannot
    // vectorise: C2 keeps some of them in stack slots.
    static long spills(long s) {
        long a = s, b = 1, c = 2, d = 3, e = 5, f = 7, g = 11, h = 13, i = 17, j = 19, k = 23, l = 29, m = 31, o = 37, p = 41, q = 43, r = 47, t = 53;
        for (int x = 0; x < 10_000; x++) {
            a = a * 31 + b; b = b * 37 + c; c = c * 41 + d; d = d * 43 + e;
            e = e * 47 + f; f = f * 53 + g; g = g * 59 + h; h = h * 61 + i;
            i = i * 67 + j; j = j * 71 + k; k = k * 73 + l; l = l * 79 + m;
            m = m * 83 + o; o = o * 89 + p; p = p * 97 + q; q = q * 101 + r;
            r = r * 103 + t; t = t * 107 + a;
        }
        return a ^ b ^ c ^ d ^ e ^ f ^ g ^ h ^ i ^ j ^ k ^ l ^ m ^ o ^ p ^ q ^ r ^ t;
    }
}
