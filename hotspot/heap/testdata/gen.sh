#!/bin/sh
# gen.sh regenerates the GC.heap_info golden inputs: for every JDK found and
# every collector it supports, start an idle JVM, run `jcmd <pid> GC.heap_info`
# and save the output as <jdk>-<gc>.txt next to this script. Then run
# `go test ./heap/ -update` to refresh the matching .golden files.
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
        byte[][] keep = new byte[64][];
        for (int i = 0; i < keep.length; i++) keep[i] = new byte[64 * 1024];
        System.out.println("ready");
        System.out.flush();
        Thread.sleep(60_000);
        System.out.println(keep.length);
    }
}
JAVA
# Compile once for release 17 so every JDK found can run it.
for jh in /usr/lib/jvm/java-17-openjdk-amd64 /usr/lib/jvm/temurin-25-jdk-amd64; do
	if [ -x "$jh/bin/javac" ]; then
		"$jh/bin/javac" --release 17 -d "$work" "$work/Idle.java"
		break
	fi
done

run() { # run <label> <java_home> <gc-name> <flags...>
	label=$1 jh=$2 gc=$3
	shift 3
	if ! "$jh/bin/java" "$@" -version >/dev/null 2>&1; then
		echo "skip $label-$gc: not supported" >&2
		return 0
	fi
	"$jh/bin/java" -Xms64m -Xmx256m "$@" -cp "$work" Idle >"$work/out" 2>&1 &
	pid=$!
	pids="$pids $pid"
	i=0
	until grep -q ready "$work/out" 2>/dev/null; do
		i=$((i + 1))
		[ $i -lt 100 ] || { echo "$label-$gc: JVM did not start" >&2; cat "$work/out" >&2; return 1; }
		sleep 0.1
	done
	# Drop jcmd's "<pid>:" header line so the fixture is the attach reply body.
	"$jh/bin/jcmd" "$pid" GC.heap_info | sed 1d >"$here/$label-$gc.txt"
	kill "$pid"
	wait "$pid" 2>/dev/null || true
	echo "wrote $label-$gc.txt" >&2
}

for jdk in jdk17:/usr/lib/jvm/java-17-openjdk-amd64 jdk25:/usr/lib/jvm/temurin-25-jdk-amd64; do
	label=${jdk%%:*} jh=${jdk#*:}
	[ -x "$jh/bin/java" ] || { echo "skip $label: $jh not installed" >&2; continue; }
	run "$label" "$jh" g1 -XX:+UseG1GC
	run "$label" "$jh" parallel -XX:+UseParallelGC
	run "$label" "$jh" serial -XX:+UseSerialGC
	run "$label" "$jh" z -XX:+UseZGC
	run "$label" "$jh" shenandoah -XX:+UseShenandoahGC
	run "$label" "$jh" epsilon -XX:+UnlockExperimentalVMOptions -XX:+UseEpsilonGC
done
