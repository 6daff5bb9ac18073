// Idle is the target JVM for the live geometry test: it prints "ready"
// once main runs, then idles until stdin closes or it is killed.
public class Idle {
    public static void main(String[] args) throws Exception {
        System.out.println("ready");
        System.out.flush();
        while (System.in.read() != -1) {
        }
    }
}
