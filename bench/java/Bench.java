// Bench runs one workload's main method and then prints what the harness
// (bench/cmd/djxbench) measures, read by the JVM itself just before it exits:
//
//   bench elapsed_ns=N vmhwm_kb=N vmrss_kb=N cpu_ms=N gc_ms=N gc_n=N
//
// elapsed_ns is the wall time of the workload's main (a fixed amount of work
// for the drivers in this directory); vmhwm_kb is the process's peak RSS
// (VmHWM in /proc/self/status), cpu_ms its user+system CPU time
// (/proc/self/stat); gc_ms and gc_n are the collectors' pause time and
// count (their MXBeans; the concurrent cycles of G1 and ZGC left out).
// Reading them in the JVM works the same in every mode:
// unprofiled, attached to, or launched by djx-bpf (where the JVM is
// djx-bpf's child and the harness cannot wait for it).
//
// Usage: java -cp ... Bench [--gate] CLASS [ARGS...]
// With --gate it prints "gate" and waits for a line on standard input before
// it starts, so that the harness can attach a profiler to an idle JVM first.
import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.lang.management.GarbageCollectorMXBean;
import java.lang.management.ManagementFactory;
import java.lang.reflect.Method;
import java.nio.file.Files;
import java.nio.file.Paths;

public class Bench {
    public static void main(String[] args) throws Exception {
        int i = 0;
        boolean gate = false;
        if (args.length > 0 && args[0].equals("--gate")) {
            gate = true;
            i++;
        }
        if (i >= args.length) {
            System.err.println("usage: Bench [--gate] CLASS [ARGS...]");
            System.exit(2);
        }
        Method m = Class.forName(args[i]).getMethod("main", String[].class);
        String[] rest = new String[args.length - i - 1];
        System.arraycopy(args, i + 1, rest, 0, rest.length);
        if (gate) {
            System.out.println("gate");
            System.out.flush();
            new BufferedReader(new InputStreamReader(System.in)).readLine();
        }
        long t0 = System.nanoTime();
        m.invoke(null, (Object) rest);
        long t1 = System.nanoTime();
        long hwm = -1, rss = -1;
        for (String l : Files.readAllLines(Paths.get("/proc/self/status"))) {
            if (l.startsWith("VmHWM:")) hwm = kb(l);
            if (l.startsWith("VmRSS:")) rss = kb(l);
        }
        String stat = new String(Files.readAllBytes(Paths.get("/proc/self/stat")));
        String[] f = stat.substring(stat.lastIndexOf(')') + 2).split(" ");
        // fields 14 and 15 (utime, stime) are 11 and 12 after the comm; clock ticks (USER_HZ = 100)
        long cpuMs = (Long.parseLong(f[11]) + Long.parseLong(f[12])) * 10;
        long gcMs = 0, gcN = 0;
        for (GarbageCollectorMXBean gc : ManagementFactory.getGarbageCollectorMXBeans()) {
            String n = gc.getName();
            if (n.contains("Concurrent") || n.contains("Cycles")) continue;
            gcMs += Math.max(0, gc.getCollectionTime());
            gcN += Math.max(0, gc.getCollectionCount());
        }
        System.out.println("bench elapsed_ns=" + (t1 - t0) + " vmhwm_kb=" + hwm + " vmrss_kb=" + rss + " cpu_ms=" + cpuMs
            + " gc_ms=" + gcMs + " gc_n=" + gcN);
        System.out.flush();
        System.exit(0);
    }

    static long kb(String line) {
        return Long.parseLong(line.replaceAll("[^0-9]", ""));
    }
}
