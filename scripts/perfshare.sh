#!/bin/bash
# Puts djx-bpf and JFR side by side by perf: each workload of make bench
# runs unprofiled, launched under djx-bpf (its defaults, and with the agent's
# stacks: djx-agent), and with JFR's profile and default settings
# (PERFSHARE_MODES picks among base djx djx-agent jfr jfr-default), under
# `perf record -a -g`; bench/cmd/perfshare tells each run's share of the
# JVM's CPU samples by class. Run `make bench` once first (it
# builds djx-bpf and the workloads). As root.
# Usage: scripts/perfshare.sh [RUNS] [WORKLOAD...]   (default: 2 h2 hsqldb xalan fft;
# the workloads are djxbench's; `djxbench cmdline` prints their command lines)
set -eu
cd "$(dirname "$0")/.."
RUNS=${1:-2}
shift || true
WORKLOADS=${*:-h2 hsqldb xalan fft}
JAVA=${JAVA_HOME:-/usr/lib/jvm/java-17-openjdk-amd64}/bin/java
J=/usr/share/java
CP=build/bench/java:$J/h2.jar:$J/hsqldb.jar:$J/xalan2.jar:$J/serializer.jar:$J/commons-math3.jar
OUT=${PERFSHARE_OUT:-build/perfshare-runs}
[ "$(id -u)" = 0 ] || { echo "perfshare.sh: run as root (perf -a and djx-bpf need it)"; exit 1; }
[ -x build/djx-bpf ] && [ -d build/bench/java ] || { echo "perfshare.sh: run make bench first"; exit 1; }
command -v perf >/dev/null || apt-get install -y -qq linux-perf
go build -o build/perfshare ./bench/cmd/perfshare
go build -o build/djxbench ./bench/cmd/djxbench
mkdir -p "$OUT"
for r in $(seq "$RUNS"); do
	for wl in $WORKLOADS; do
		for mode in ${PERFSHARE_MODES:-base djx djx-agent jfr jfr-default}; do
			o=$OUT/$wl-$mode-$r
			flags=
			case $mode in
			jfr) flags="-XX:StartFlightRecording=settings=profile,filename=$o.jfr" ;;
			jfr-default) flags="-XX:StartFlightRecording=settings=default,filename=$o.jfr" ;;
			esac
			cmd=$(build/djxbench cmdline -java "$JAVA" -cp "$CP" -jvm-flags "$flags" "$wl")
			case $mode in
			djx) cmd="build/djx-bpf profile --quiet --format json -o $o.json -- $cmd" ;;
			djx-agent) cmd="build/djx-bpf profile --stacks agent --quiet --format json -o $o.json -- $cmd" ;;
			esac
			perf record -q -a -g -F 1999 -o "$o.data" -- $cmd >"$o.out" 2>&1
			perf script -i "$o.data" -F comm,pid,tid,ip,sym,dso 2>/dev/null |
				build/perfshare -agent agent/lib/libdjxagent.so >"$o.share"
			rm -f "$o.data" "$o.jfr"
			echo "$wl $mode round $r: $(grep -h 'bench elapsed' "$o.out" | head -1)"
			grep ' all ' "$o.share" || true
		done
	done
done
