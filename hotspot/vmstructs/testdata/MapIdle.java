import java.io.RandomAccessFile;
import java.nio.MappedByteBuffer;
import java.nio.channels.FileChannel;

// MapIdle maps the file args[0] without touching its contents, says
// "ready" and waits for its stdin to end: a JVM holding a mapping whose
// reads a FUSE server may never answer.
public class MapIdle {
    public static void main(String[] args) throws Exception {
        RandomAccessFile f = new RandomAccessFile(args[0], "r");
        MappedByteBuffer m = f.getChannel().map(FileChannel.MapMode.READ_ONLY, 0, f.length());
        System.out.println("ready");
        System.out.flush();
        while (System.in.read() >= 0) {
        }
        System.out.println(m.capacity());
    }
}
