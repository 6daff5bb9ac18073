import java.nio.ByteBuffer;

// Ground truth for djx-bpf's off-heap attribution: a 64 MiB direct
// ByteBuffer held by a static field takes 4 of 5 random reads (getLong in the
// default big-endian order, so C2 emits a load then a bswap), an 8 MiB long[]
// held by another static takes 1 of 5. Both are allocated at start-up.
// Usage: java DirectBuf [seconds (0: forever)]; prints "ready", then "ops N" a second.
public class DirectBuf {
    static final int BUF = 64 << 20, ARR = 1 << 20;
    static ByteBuffer slab; // the buffer's holder
    static long[] table;

    static long seed = 0x9E3779B97F4A7C15L;

    static long work(int iters) {
        ByteBuffer b = slab;
        long[] t = table;
        long s = seed, sum = 0;
        for (int i = 0; i < iters; i += 5) {
            s = s * 6364136223846793005L + 1442695040888963407L;
            sum += b.getLong((int) (((s >>> 40) * (BUF / 8)) >>> 24) << 3);
            s = s * 6364136223846793005L + 1442695040888963407L;
            sum += b.getLong((int) (((s >>> 40) * (BUF / 8)) >>> 24) << 3);
            s = s * 6364136223846793005L + 1442695040888963407L;
            sum += t[(int) (((s >>> 40) * ARR) >>> 24)];
            s = s * 6364136223846793005L + 1442695040888963407L;
            sum += b.getLong((int) (((s >>> 40) * (BUF / 8)) >>> 24) << 3);
            s = s * 6364136223846793005L + 1442695040888963407L;
            sum += b.getLong((int) (((s >>> 40) * (BUF / 8)) >>> 24) << 3);
        }
        seed = s;
        return sum;
    }

    public static void main(String[] args) {
        int secs = args.length > 0 ? Integer.parseInt(args[0]) : 0;
        slab = ByteBuffer.allocateDirect(BUF);
        table = new long[ARR];
        for (int i = 0; i < BUF; i += 8) slab.putLong(i, i * 0x9E3779B97F4A7C15L);
        for (int i = 0; i < ARR; i++) table[i] = i;
        System.out.println("ready");
        long end = secs == 0 ? Long.MAX_VALUE : System.nanoTime() + secs * 1_000_000_000L;
        long sink = 0, ops = 0, next = System.nanoTime() + 1_000_000_000L;
        while (System.nanoTime() < end) {
            sink += work(1 << 16);
            ops += 1 << 16;
            if (System.nanoTime() >= next) {
                System.out.println("ops " + ops);
                ops = 0;
                next += 1_000_000_000L;
            }
        }
        System.out.println("sink " + sink);
    }
}
