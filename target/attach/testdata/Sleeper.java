// Sleeper is the target JVM for the attach integration tests: it prints
// "ready" once main runs and then idles until killed or stdin closes.
public class Sleeper {
    public static void main(String[] args) throws Exception {
        System.out.println("ready");
        System.out.flush();
        // Exit when the test closes stdin, so a crashed test leaves no JVM behind.
        while (System.in.read() != -1) {
        }
    }
}
