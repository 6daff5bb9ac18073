import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;

// Ground truth for djx-bpf's off-heap attribution of FFM segments (JDK 22+):
// a 64 MiB native segment from the global arena, held by a static field and
// allocated at start-up, takes 4 of 5 random long reads, half of them through
// slices of it that the workers are handed (and a static array keeps); an
// 8 MiB long[] held by another static takes 1 of 5, and each batch leaves a
// little garbage on the heap.
// Usage: java SegmentTruth [seconds (0: forever)]; prints "ready", then "ops N" a second.
public class SegmentTruth {
    static final long SEG = 64L << 20;
    static final int SHARDS = 4, ARR = 1 << 20;
    static final long SHARD = SEG / SHARDS;
    static MemorySegment table; // the segment's holder
    static MemorySegment[] shards; // slices of table
    static long[] counts;
    static final String[] recent = new String[1024];

    static long seed = 0x9E3779B97F4A7C15L;

    // read takes 5 random longs: 2 in table, 2 in the slice, 1 in counts.
    static long read(MemorySegment whole, MemorySegment shard, long[] c, int iters) {
        long s = seed, sum = 0;
        for (int i = 0; i < iters; i += 5) {
            s = s * 6364136223846793005L + 1442695040888963407L;
            sum += whole.get(ValueLayout.JAVA_LONG, (((s >>> 40) * (SEG / 8)) >>> 24) << 3);
            s = s * 6364136223846793005L + 1442695040888963407L;
            sum += shard.get(ValueLayout.JAVA_LONG, (((s >>> 40) * (SHARD / 8)) >>> 24) << 3);
            s = s * 6364136223846793005L + 1442695040888963407L;
            sum += c[(int) (((s >>> 40) * ARR) >>> 24)];
            s = s * 6364136223846793005L + 1442695040888963407L;
            sum += shard.get(ValueLayout.JAVA_LONG, (((s >>> 40) * (SHARD / 8)) >>> 24) << 3);
            s = s * 6364136223846793005L + 1442695040888963407L;
            sum += whole.get(ValueLayout.JAVA_LONG, (((s >>> 40) * (SEG / 8)) >>> 24) << 3);
        }
        seed = s;
        return sum;
    }

    public static void main(String[] args) {
        int secs = args.length > 0 ? Integer.parseInt(args[0]) : 0;
        table = Arena.global().allocate(SEG, 8);
        shards = new MemorySegment[SHARDS];
        for (int i = 0; i < SHARDS; i++) shards[i] = table.asSlice(i * SHARD, SHARD);
        counts = new long[ARR];
        for (long i = 0; i < SEG; i += 8) table.set(ValueLayout.JAVA_LONG, i, i * 0x9E3779B97F4A7C15L);
        for (int i = 0; i < ARR; i++) counts[i] = i;
        System.out.println("ready");
        long end = secs == 0 ? Long.MAX_VALUE : System.nanoTime() + secs * 1_000_000_000L;
        long sink = 0, ops = 0, next = System.nanoTime() + 1_000_000_000L;
        for (int batch = 0; System.nanoTime() < end; batch++) {
            long sum = read(table, shards[batch % SHARDS], counts, 1 << 16);
            sink += sum;
            recent[batch % recent.length] = Long.toHexString(sum);
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
