// Hot is the JVM the vmcode tests read: outer runs hot in a loop, so that
// C2 compiles it with mid and leaf inlined (the JVM is started with
// -XX:CompileCommand=inline for them and dontinline for sink), and the
// call to sink in leaf is a call site whose PcDesc holds the whole chain
// leaf ← mid ← outer. The MARK comments name the lines the tests expect;
// keep them on the lines they describe. The thread "parked" sleeps in
// waitHere, which the tests keep interpreted (CompileCommand=exclude):
// its interpreter frame's bcp is at the call to sleep. It prints "ready"
// once warm and exits when its stdin closes.
public class Hot {
    static volatile long sinkValue;

    static void sink(long v) {
        sinkValue += v;
    }

    static long leaf(long x) {
        long y = x * 31 + (x >>> 3);
        sink(y); // MARK leaf-call
        return y;
    }

    static long mid(long x) {
        long a = leaf(x); // MARK mid-call
        return a ^ (x << 1);
    }

    static long outer(int n) {
        long acc = 0;
        for (int i = 0; i < n; i++) {
            acc += mid(i); // MARK outer-call
        }
        return acc;
    }

    static void waitHere() throws InterruptedException {
        while (true) {
            Thread.sleep(100000); // MARK park-call
        }
    }

    public static void main(String[] args) throws Exception {
        Thread parked = new Thread(() -> {
            try {
                waitHere();
            } catch (InterruptedException e) {
            }
        }, "parked");
        parked.setDaemon(true);
        parked.start();
        Thread spin = new Thread(() -> {
            long total = 0;
            while (true) {
                total += outer(1000); // MARK spin-call
                if (total == 42) {
                    System.out.println(total);
                }
            }
        }, "spin");
        spin.setDaemon(true);
        spin.start();
        Thread.sleep(Long.parseLong(args.length > 0 ? args[0] : "1500"));
        System.out.println("ready");
        System.out.flush();
        while (System.in.read() >= 0) {
        }
    }
}
