// RegionTruth is the ground-truth target of the region package's live test
// and of testdata/gen.sh. It memory-maps a file, allocates a direct
// ByteBuffer, starts a named thread and makes a method hot enough to be
// JIT-compiled, then prints one line per fact, and idles until stdin closes:
//
//	mapped <address> <length> <path>
//	direct <address> <length>
//	thread <name>
//	ready
//
// Run with --add-exports java.base/sun.nio.ch=ALL-UNNAMED (for
// DirectBuffer.address). args[0] is the file to map (created, 1 MiB).
import java.io.RandomAccessFile;
import java.nio.ByteBuffer;
import java.nio.MappedByteBuffer;
import java.nio.channels.FileChannel;

public class RegionTruth {
    static final int LEN = 1 << 20;
    static volatile long sink;

    // hot is called often enough for C1 and C2 to compile it.
    static long hot(ByteBuffer b, int n) {
        long s = 0;
        for (int i = 0; i < n; i += 8) {
            s += b.getLong(i);
        }
        return s;
    }

    public static void main(String[] args) throws Exception {
        RandomAccessFile f = new RandomAccessFile(args[0], "rw");
        f.setLength(LEN);
        MappedByteBuffer mapped = f.getChannel().map(FileChannel.MapMode.READ_WRITE, 0, LEN);
        mapped.putLong(0, 42);
        ByteBuffer direct = ByteBuffer.allocateDirect(LEN);
        direct.putLong(0, 43);
        Thread t = new Thread(() -> {
            while (true) {
                sink += hot(direct, 4096);
                try {
                    Thread.sleep(1);
                } catch (InterruptedException e) {
                    return;
                }
            }
        }, "region-truth-worker");
        t.setDaemon(true);
        t.start();
        for (int i = 0; i < 20_000; i++) {
            sink += hot(mapped, 4096);
        }
        System.out.println("mapped 0x" + Long.toHexString(((sun.nio.ch.DirectBuffer) mapped).address()) + " " + LEN + " " + args[0]);
        System.out.println("direct 0x" + Long.toHexString(((sun.nio.ch.DirectBuffer) direct).address()) + " " + LEN);
        System.out.println("thread " + t.getName());
        System.out.println("ready");
        System.out.flush();
        while (System.in.read() != -1) {
        }
        f.close();
    }
}
