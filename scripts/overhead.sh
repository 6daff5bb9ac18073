#!/bin/bash
# Measures the runtime overhead of a 10-second attach-mode profile on the
# ground-truth workload: work done per second (HotArrays' "ops" lines) while
# profiled vs. in the same window of an unprofiled run; alternating runs.
# Usage: scripts/overhead.sh BIN JAVA CLASSDIR [RUNS] [extra djx-bpf flags...]
set -eu
BIN=$1 JAVA=$2 CP=$3 RUNS=${4:-3}
shift 4 2>/dev/null || shift $#
mean() { awk -v a="$1" -v b="$2" 'NR>=a && NR<=b && $1=="ops" {s+=$2; n++} END {printf "%.0f", s/n}'; }
for i in $(seq "$RUNS"); do
	for mode in base prof; do
		log=$(mktemp)
		"$JAVA" -Xmx1g -cp "$CP" HotArrays 15 >"$log" 2>&1 &
		jpid=$!
		sleep 3
		if [ $mode = prof ]; then
			"$BIN" profile --pid $jpid --duration 10s --quiet "$@" >/dev/null
		fi
		wait $jpid
		# lines: ready, ops@1s ... : seconds 5..12 lie inside the profile
		echo "$mode $(mean 6 13 <"$log")"
		rm -f "$log"
	done
done | awk '{s[$1]+=$2; n[$1]++; print} END {b=s["base"]/n["base"]; p=s["prof"]/n["prof"]; printf "base %.0f ops/s, profiled %.0f ops/s, ratio %.3f (overhead %.1f%%)\n", b, p, p/b, 100*(1-p/b)}'
