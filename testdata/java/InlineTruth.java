// Ground truth for C2-inlined code: a join of a stream of keys against an
// open-addressing hash map (long to long), written as such maps are, with
// small accessors. C2 inlines get, slot, mix and keyAt into the hot loop
// of countMatches, so the loads of the map's 16 MiB of keys (KEY) and
// values (VALUE) sit in one compiled method; the debug information at
// each load gives the inlined chain, which is the known path:
//
//   LongMap.keyAt:KEY <- LongMap.slot:CALL-KEYAT <- LongMap.get:CALL-SLOT <- countMatches:CALL-GET <- main:CALL-JOIN
//   LongMap.get:VALUE <- countMatches:CALL-GET <- main:CALL-JOIN
//
// Usage: java InlineTruth [seconds (0 = forever)]
// Prints "ready" once, and "done" at the end.
public class InlineTruth {
    static final class LongMap {
        final long[] keys, values; // key 0 marks a free slot
        final int mask;

        LongMap(int capacity) {
            keys = new long[capacity];
            values = new long[capacity];
            mask = capacity - 1;
        }

        static int mix(long key) {
            long h = key * 0x9E3779B97F4A7C15L;
            return (int) (h ^ (h >>> 32));
        }

        long keyAt(int i) {
            return keys[i]; // KEY
        }

        // slot is the index of key, or of the free slot where it would go.
        int slot(long key) {
            int i = mix(key) & mask; // CALL-MIX
            long k;
            while ((k = keyAt(i)) != 0 && k != key) { // CALL-KEYAT
                i = (i + 1) & mask;
            }
            return i;
        }

        void put(long key, long value) {
            int i = slot(key);
            keys[i] = key;
            values[i] = value;
        }

        long get(long key, long missing) {
            int i = slot(key); // CALL-SLOT
            return keys[i] == key ? values[i] : missing; // VALUE
        }
    }

    static long seed = 0x12345678ABCDEFL;

    // countMatches looks up n pseudo-random keys, half of them present.
    static long countMatches(LongMap m, int n, int present) {
        long s = seed, sum = 0;
        for (int j = 0; j < n; j++) {
            s = s * 6364136223846793005L + 1442695040888963407L;
            long key = 1 + ((s >>> 33) % (2L * present));
            sum += m.get(key, -1); // CALL-GET
        }
        seed = s;
        return sum;
    }

    public static void main(String[] args) throws Exception {
        double seconds = args.length > 0 ? Double.parseDouble(args[0]) : 0;
        long end = seconds > 0 ? System.nanoTime() + (long) (seconds * 1e9) : Long.MAX_VALUE;
        int capacity = 1 << 20, present = capacity / 2;
        LongMap m = new LongMap(capacity);
        for (int k = 1; k <= present; k++) {
            m.put(k, 7L * k);
        }
        long sink = 0;
        System.out.println("ready");
        System.out.flush();
        while (System.nanoTime() < end) {
            sink += countMatches(m, 50_000, present); // CALL-JOIN
        }
        System.out.println("done " + (sink == 42 ? "!" : ""));
    }
}
