#!/bin/sh
# gen.sh captures HotSpot heap-geometry fixtures: for every JDK found and every
# case below it starts an idle JVM with the case's flags and saves, next to
# this script,
#
#   <jdk>-<case>.vminfo    `jcmd <pid> VM.info`, trimmed: the full output is
#                          ~12000 lines (mostly /proc/cpuinfo and the memory
#                          map); only the header, SUMMARY and the PROCESS
#                          section up to the end of its "Heap:" block are kept
#   <jdk>-<case>.heapinfo  `jcmd <pid> GC.heap_info`
#   <jdk>-<case>.coops     the JVM's own startup log of its choice
#                          (-Xlog:gc+heap+coops=debug), the independent view
#   <jdk>-<case>.flags     the flags the case used
#
# jcmd's "<pid>:" header line is dropped. Then run `go test ./heap/ -update`
# to refresh the .golden files.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
work=$(mktemp -d)
pids=""
cleanup() {
	for p in $pids; do kill "$p" 2>/dev/null || true; done
	rm -rf "$work"
}
trap cleanup EXIT INT TERM

cat >"$work/Idle.java" <<'JAVA'
public class Idle {
    public static void main(String[] args) throws Exception {
        System.out.println("ready");
        System.out.flush();
        Thread.sleep(60_000);
    }
}
JAVA
for jh in /usr/lib/jvm/java-17-openjdk-amd64 /usr/lib/jvm/temurin-25-jdk-amd64; do
	if [ -x "$jh/bin/javac" ]; then
		"$jh/bin/javac" --release 17 -d "$work" "$work/Idle.java"
		break
	fi
done

run() { # run <label> <java_home> <case> <flags...>
	label=$1 jh=$2 case=$3
	shift 3
	out=$here/$label-$case
	# Level and tags only: no uptime, so fixtures are stable.
	"$jh/bin/java" "$@" -Xlog:gc+heap+coops=debug:stdout:level,tags -cp "$work" Idle >"$work/out" 2>&1 &
	pid=$!
	pids="$pids $pid"
	i=0
	until grep -q '^ready' "$work/out" 2>/dev/null; do
		i=$((i + 1))
		[ $i -lt 100 ] || { echo "$label-$case: JVM did not start" >&2; cat "$work/out" >&2; return 1; }
		sleep 0.1
	done
	echo "$*" >"$out.flags"
	grep 'gc,heap,coops' "$work/out" >"$out.coops" || true
	"$jh/bin/jcmd" "$pid" VM.info | sed 1d |
		awk '/^---------------  [A-Z] / && /T H R E A D|S Y S T E M/ {exit}
		     /^Heap:$/ {h = 1}
		     {print}
		     h && /^$/ {exit}' >"$out.vminfo"
	"$jh/bin/jcmd" "$pid" GC.heap_info | sed 1d >"$out.heapinfo"
	kill "$pid"
	wait "$pid" 2>/dev/null || true
	echo "wrote $label-$case.*" >&2
}

for jdk in jdk17:/usr/lib/jvm/java-17-openjdk-amd64 jdk25:/usr/lib/jvm/temurin-25-jdk-amd64; do
	label=${jdk%%:*} jh=${jdk#*:}
	[ -x "$jh/bin/java" ] || { echo "skip $label: $jh not installed" >&2; continue; }
	run "$label" "$jh" xmx64m -Xmx64m                     # unscaled (32-bit)
	run "$label" "$jh" xmx2g -Xmx2g                       # unscaled, ends at 4 GiB
	run "$label" "$jh" xmx4g -Xmx4g                       # zero based, shift 3
	run "$label" "$jh" xmx31g -Xmx31g                     # disjoint base here
	run "$label" "$jh" xmx40g -Xmx40g                     # too big: no compressed oops
	run "$label" "$jh" xmx40g-align16 -Xmx40g -XX:ObjectAlignmentInBytes=16 # zero based, shift 4
	run "$label" "$jh" base36g -Xmx2g -XX:HeapBaseMinAddress=36g # heap based
	run "$label" "$jh" nocoops -Xmx2g -XX:-UseCompressedOops
	run "$label" "$jh" parallel-xmx2g -Xmx2g -XX:+UseParallelGC
	run "$label" "$jh" zgc -Xmx1g -XX:+UseZGC            # no compressed oops, no addresses
done
