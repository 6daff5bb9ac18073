#!/bin/bash
# A busy host: HSQLDB's in-memory table, a JTS STRtree and a Caffeine
# cache (Debian's jars, bench/services), each on JDK 17 and on Temurin 25
# when it is there, beside three small programs, all serving at once; then
# one `djx-bpf scan` of every JVM. Prints, per JVM, the share of its
# in-heap samples in rows named by a holder, and its top row (djxbench
# scanheld); the report is build/scan6/scan.json.
# Usage (root; BIN=path/to/djx-bpf to use another build): scripts/scan6.sh [DURATION]
set -eu
DUR=${1:-10s}
J=/usr/share/java
JDK17=${JDK17:-/usr/lib/jvm/java-17-openjdk-amd64}
JDK25=${JDK25:-/usr/lib/jvm/temurin-25-jdk-amd64}
for p in hsqldb:libhsqldb-java jts-core:libjts-java caffeine:libcaffeine-java; do
	[ -f "$J/${p%%:*}.jar" ] || (apt-get update -qq && apt-get install -y -qq "${p#*:}")
done
BIN=${BIN:-build/djx-bpf}
[ -x "$BIN" ] || make build
go build -o build/djxbench ./bench/cmd/djxbench
OUT=build/scan6
rm -rf $OUT && mkdir -p $OUT/classes
CP="$OUT/classes:$J/hsqldb.jar:$J/jts-core.jar:$J/caffeine.jar"
"$JDK17/bin/javac" -d $OUT/classes -cp "$CP" bench/services/SqlService.java bench/services/JtsService.java \
	bench/services/CaffeineService.java testdata/java/HotArrays.java testdata/java/Reuse.java testdata/java/GcHot.java
homes=$JDK17
[ -x "$JDK25/bin/java" ] && homes="$JDK17 $JDK25"
pids=()
trap 'kill "${pids[@]}" 2>/dev/null' EXIT
# The scan profiles these JVMs only, not others the host runs.
MARK=-Ddjx.scan6=$$
start() { # log java java-args...
	local log=$OUT/$1 java=$2
	shift 2
	"$java" $MARK "$@" >"$log" 2>&1 &
	pids+=($!)
}
n=0
for h in $homes; do
	n=$((n + 1))
	start sql$n.log "$h/bin/java" -Xmx1g -cp "$CP" SqlService jdbc:hsqldb:mem:svc 400000 120
	start jts$n.log "$h/bin/java" -Xmx2g -cp "$CP" JtsService 1000000 120
	start caffeine$n.log "$h/bin/java" -Xmx1g -cp "$CP" CaffeineService 500000 120
done
start hot.log "$JDK17/bin/java" -Xmx256m -cp "$CP" HotArrays 120
start reuse.log "$JDK17/bin/java" -Xmx256m -cp "$CP" Reuse 120
start gchot.log "$JDK17/bin/java" -Xmx512m -Xmn32m -cp "$CP" GcHot 120
for f in $OUT/sql*.log $OUT/jts*.log $OUT/caffeine*.log; do
	until grep -q ready "$f"; do
		for p in "${pids[@]}"; do kill -0 "$p" 2>/dev/null || { echo "a JVM exited: $(cat "$f")" >&2; exit 1; }; done
		sleep 0.5
	done
done
sleep 3 # start-up is long over when a user scans
/usr/bin/time -f "djx-bpf: %e s wall, %U s user, %S s system, %M KiB peak RSS" \
	"$BIN" scan --duration "$DUR" --match "djx\\.scan6=$$\\b" --format json -o $OUT/scan.json
build/djxbench scanheld $OUT/scan.json
