// Idle is the JVM whose vmStructs the tests read: it says it runs, then
// waits until its stdin closes (so it never outlives its test).
public class Idle {
    public static void main(String[] args) throws Exception {
        System.out.println("ready");
        System.out.flush();
        while (System.in.read() >= 0) {
        }
    }
}
