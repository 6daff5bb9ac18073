// A hostile target for root's memory: two static methods whose names the
// test makes 60,000 characters long (it replaces every "pingLONGNAME" and
// "pongLONGNAME" in this file; javac takes names up to 65,535 bytes) call
// each other at random about DEPTH deep, and the innermost one reads and
// allocates arrays. Every sample's stack is then about DEPTH frames of
// those two names, in an order no other sample repeats.
//
// Usage: java LongNames [seconds (0 = forever)]
// Prints "ready" once, and "done" at the end.
public class LongNames {
    static final int DEPTH = 100;
    static final long[] data = new long[1 << 16]; // 512 KiB, read at the bottom
    static long seed = 0x9E3779B97F4A7C15L;
    static long sink;
    static Object keep;

    static boolean coin() {
        seed ^= seed << 13;
        seed ^= seed >>> 7;
        seed ^= seed << 17;
        return (seed & 1) != 0;
    }

    static long bottom() {
        long s = 0;
        for (int i = 0; i < data.length; i += 8) {
            s += data[i];
        }
        keep = new long[1024];
        return s;
    }

    static long pingLONGNAME(int d) {
        if (d == 0) {
            return bottom();
        }
        return coin() ? pingLONGNAME(d - 1) + 1 : pongLONGNAME(d - 1) + 1;
    }

    static long pongLONGNAME(int d) {
        if (d == 0) {
            return bottom();
        }
        return coin() ? pongLONGNAME(d - 1) + 2 : pingLONGNAME(d - 1) + 2;
    }

    public static void main(String[] args) {
        int seconds = args.length > 0 ? Integer.parseInt(args[0]) : 0;
        for (int i = 0; i < data.length; i++) {
            data[i] = i;
        }
        System.out.println("ready");
        long end = System.nanoTime() + seconds * 1_000_000_000L;
        while (seconds == 0 || System.nanoTime() < end) {
            sink += pingLONGNAME(DEPTH - 1 - (int) (seed & 7));
        }
        System.out.println("done " + sink);
    }
}
