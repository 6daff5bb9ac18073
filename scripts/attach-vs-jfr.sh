#!/bin/bash
# What a 10 s attach costs an HSQLDB service (bench/services/SqlService on
# Debian's hsqldb.jar, 400k rows, serving queries), djx-bpf at its defaults
# against JFR's `profile` settings, in alternating runs of fresh JVMs: the
# service's queries per second in the 10 s under the profiler against the
# mean of the 10 s before and after it (the slowdown; 1.05 = 5% slower).
# Usage (root; BIN=path/to/djx-bpf to use another build): scripts/attach-vs-jfr.sh [RUNS] [JAVA_HOME]
set -eu
cd "$(dirname "$0")/.."
RUNS=${1:-3} JH=${2:-/usr/lib/jvm/java-17-openjdk-amd64}
J=/usr/share/java
[ -f $J/hsqldb.jar ] || (apt-get update -qq && apt-get install -y -qq libhsqldb-java)
BIN=${BIN:-build/djx-bpf}
[ -x "$BIN" ] || make build
OUT=build/attach-vs-jfr
rm -rf $OUT && mkdir -p $OUT/classes
"$JH/bin/javac" -d $OUT/classes -cp $J/hsqldb.jar bench/services/SqlService.java
# rate LOG FROM TO: queries per second between two times of the stamped log.
rate() {
	awk -v a="$2" -v b="$3" '$2 == "ops" { if ($1 <= a) { oa = $3; ta = $1 } if ($1 <= b) { ob = $3; tb = $1 } }
		END { if (tb > ta) printf "%.0f", (ob - oa) / (tb - ta); else print "nan" }' "$1"
}
now() { date +%s.%N; }
jpid=
trap '[ -n "$jpid" ] && kill $jpid 2>/dev/null' EXIT
for r in $(seq "$RUNS"); do
	for mode in djx-bpf jfr; do
		log=$OUT/$mode-$r.log
		: >"$log"
		"$JH/bin/java" -Xmx1g -cp $OUT/classes:$J/hsqldb.jar SqlService jdbc:hsqldb:mem:svc 400000 80 > >(while IFS= read -r l; do echo "$(now) $l"; done >"$log") 2>&1 &
		jpid=$!
		until grep -q ready "$log"; do
			kill -0 $jpid 2>/dev/null || { cat "$log"; exit 1; }
			sleep 0.5
		done
		sleep 10 # warm-up
		t0=$(now); sleep 10; t1=$(now)
		if [ $mode = djx-bpf ]; then
			"$BIN" profile --pid $jpid --duration 10s --format json -o $OUT/$mode-$r.json 2>$OUT/$mode-$r.err
		else
			"$JH/bin/jcmd" $jpid JFR.start settings=profile name=side filename=$OUT/$mode-$r.jfr >/dev/null
			sleep 10
			"$JH/bin/jcmd" $jpid JFR.stop name=side >/dev/null
		fi
		t2=$(now); sleep 10; t3=$(now)
		b=$(rate "$log" $t0 $t1) d=$(rate "$log" $t1 $t2) a=$(rate "$log" $t2 $t3)
		echo "$mode run $r: $b/s before, $d/s under it, $a/s after: slowdown $(awk -v b=$b -v d=$d -v a=$a 'BEGIN { printf "%.3f", (b + a) / 2 / d }')"
		kill $jpid 2>/dev/null || true
		wait $jpid 2>/dev/null || true
		jpid=
	done
done
