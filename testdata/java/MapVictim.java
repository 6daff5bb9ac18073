import java.io.RandomAccessFile;
import java.lang.reflect.Field;
import java.nio.MappedByteBuffer;
import java.nio.channels.FileChannel;
import sun.misc.Unsafe;

// MapVictim maps the file args[0] without touching its contents, and holds
// one Victim reachable from a static field only (no thread's frame, no
// JNI handle: nothing the JVM reads unless it collects the old
// generation). It prints "ready VICTIM_ADDRESS" (hex) and waits for its
// stdin to end. Run it with -XX:-UseCompressedOops
// -XX:-UseCompressedClassPointers, so that a reference is the object's
// address and the klass word is the 8 bytes after the mark word: a test
// may then point the Victim's klass word into the mapping.
public class MapVictim {
    static class Victim {
        long value = 42;
    }

    static final Object[] HOLDER = new Object[1];

    public static void main(String[] args) throws Exception {
        RandomAccessFile f = new RandomAccessFile(args[0], "r");
        MappedByteBuffer m = f.getChannel().map(FileChannel.MapMode.READ_ONLY, 0, f.length());
        HOLDER[0] = new Victim();
        System.gc(); // into the old generation: no young GC moves it later
        Field uf = Unsafe.class.getDeclaredField("theUnsafe");
        uf.setAccessible(true);
        Unsafe u = (Unsafe) uf.get(null);
        long addr = u.getLong(HOLDER, (long) Unsafe.ARRAY_OBJECT_BASE_OFFSET);
        System.out.println("ready " + Long.toHexString(addr));
        System.out.flush();
        while (System.in.read() >= 0) {
        }
        System.out.println(m.capacity());
    }
}
