import java.util.HashMap;

// Hot loops whose C2 code feeds the decode oracle corpus: a streaming sum,
// auto-vectorised int/double loops, a dependent linked-list walk and a
// HashMap lookup loop. It prints "ready" once the loops are hot, then waits
// for stdin to close so the dumper can read its code cache.
public class Hot {
    static final class Node {
        Node next;
        long val;
    }

    static long sumLong(long[] a) {
        long s = 0;
        for (int i = 0; i < a.length; i++) s += a[i];
        return s;
    }

    static void addInt(int[] a, int[] b, int[] c) {
        for (int i = 0; i < c.length; i++) c[i] = a[i] + b[i] * 3;
    }

    static void scale(double[] a, double k) {
        for (int i = 0; i < a.length; i++) a[i] = a[i] * k + 1.0;
    }

    static void bytesXor(byte[] a, byte[] b) {
        for (int i = 0; i < a.length; i++) a[i] ^= b[i];
    }

    static long walk(Node n) {
        long s = 0;
        while (n != null) {
            s += n.val;
            n = n.next;
        }
        return s;
    }

    static long gets(HashMap<Integer, Integer> m, int[] keys) {
        long s = 0;
        for (int k : keys) {
            Integer v = m.get(k);
            if (v != null) s += v;
        }
        return s;
    }

    public static void main(String[] args) throws Exception {
        long[] la = new long[1 << 16];
        int[] ia = new int[1 << 16], ib = new int[1 << 16], ic = new int[1 << 16];
        double[] da = new double[1 << 16];
        byte[] ba = new byte[1 << 16], bb = new byte[1 << 16];
        Node head = null;
        for (int i = 0; i < 100000; i++) {
            Node n = new Node();
            n.val = i;
            n.next = head;
            head = n;
        }
        HashMap<Integer, Integer> m = new HashMap<>();
        int[] keys = new int[4096];
        for (int i = 0; i < keys.length; i++) {
            keys[i] = i * 7;
            m.put(i * 3, i);
        }
        long s = 0;
        long end = System.nanoTime() + 6_000_000_000L;
        while (System.nanoTime() < end) {
            s += sumLong(la);
            addInt(ia, ib, ic);
            scale(da, 1.0001);
            bytesXor(ba, bb);
            s += walk(head);
            s += gets(m, keys);
            System.arraycopy(ia, 0, ic, 0, ia.length);
        }
        System.out.println("ready " + (s & 1));
        System.out.flush();
        System.in.read();
    }
}
