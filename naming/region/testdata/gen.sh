#!/bin/sh
# gen.sh captures the region package's fixtures: for JDK 17 and Temurin 25
# (when installed), under G1 and Parallel, it starts RegionTruth.java with
# -XX:NativeMemoryTracking=detail and saves, next to this script,
#
#   <jdk>-<gc>.maps      /proc/PID/maps
#   <jdk>-<gc>.vminfo    `jcmd PID VM.info`, trimmed to the header and the
#                        PROCESS section up to "Dynamic libraries:" (the rest
#                        is a second copy of the maps, the environment and
#                        /proc/cpuinfo)
#   <jdk>-<gc>.nmt       `jcmd PID VM.native_memory detail`
#   <jdk>-<gc>.threads   `jcmd PID Thread.print`
#   <jdk>-<gc>.codelist  `jcmd PID Compiler.codelist`
#   <jdk>-<gc>.tasks     one line per thread: "TID<TAB>comm<TAB>/proc/PID/task/TID/syscall"
#   <jdk>-<gc>.truth     RegionTruth's output (its mapped file, direct buffer, thread)
#
# jcmd's "<pid>:" header line is dropped. Run as root (syscall needs it).
set -eu
here=$(cd "$(dirname "$0")" && pwd)
work=$(mktemp -d)
pids=""
cleanup() {
	for p in $pids; do kill "$p" 2>/dev/null || true; done
	rm -rf "$work"
}
trap cleanup EXIT INT TERM

/usr/lib/jvm/java-17-openjdk-amd64/bin/javac --add-exports java.base/sun.nio.ch=ALL-UNNAMED \
	-d "$work" "$here/RegionTruth.java" 2>/dev/null

run() { # run <label> <java_home> <gc> <flags...>
	label=$1 jh=$2 gc=$3
	shift 3
	out=$here/$label-$gc
	mkfifo "$work/in"
	"$jh/bin/java" --add-exports java.base/sun.nio.ch=ALL-UNNAMED -XX:NativeMemoryTracking=detail -Xmx256m "$@" \
		-cp "$work" RegionTruth "$work/region-truth.dat" <"$work/in" >"$work/out" 2>&1 &
	pid=$!
	pids="$pids $pid"
	exec 3>"$work/in"
	i=0
	until grep -q '^ready' "$work/out" 2>/dev/null; do
		i=$((i + 1))
		[ $i -lt 100 ] || { echo "$label-$gc: JVM did not start" >&2; cat "$work/out" >&2; return 1; }
		sleep 0.1
	done
	grep -v '^ready' "$work/out" >"$out.truth"
	# The first jcmd starts the Attach Listener thread: start it before
	# the maps are read, so that they hold its stack.
	"$jh/bin/jcmd" "$pid" VM.version >/dev/null
	cat /proc/$pid/maps >"$out.maps"
	"$jh/bin/jcmd" "$pid" VM.info | sed 1d | awk '/^Dynamic libraries:/ {exit} {print}' >"$out.vminfo"
	"$jh/bin/jcmd" "$pid" VM.native_memory detail | sed 1d >"$out.nmt"
	"$jh/bin/jcmd" "$pid" Thread.print | sed 1d >"$out.threads"
	"$jh/bin/jcmd" "$pid" Compiler.codelist | sed 1d >"$out.codelist"
	for t in /proc/$pid/task/*; do
		printf '%s\t%s\t%s\n' "${t##*/}" "$(cat "$t/comm")" "$(cat "$t/syscall")"
	done >"$out.tasks"
	exec 3>&-
	wait "$pid" 2>/dev/null || true
	rm -f "$work/in" "$work/region-truth.dat"
	echo "wrote $label-$gc.*" >&2
}

for jdk in jdk17:/usr/lib/jvm/java-17-openjdk-amd64 jdk25:/usr/lib/jvm/temurin-25-jdk-amd64; do
	label=${jdk%%:*} jh=${jdk#*:}
	[ -x "$jh/bin/java" ] || { echo "skip $label: $jh not installed" >&2; continue; }
	run "$label" "$jh" g1 -XX:+UseG1GC
	run "$label" "$jh" parallel -XX:+UseParallelGC
done
