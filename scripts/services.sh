#!/bin/bash
# Attaches djx-bpf to a service built on a real library from Debian's
# packages (bench/services: HSQLDB's and H2's in-memory tables, a JTS
# STRtree, a Guava HashBasedTable, a Lucene index over MMapDirectory), its
# data built at start-up, as a user would: the table of top objects, and
# the JSON report in build/services/NAME.json.
# Usage (root; BIN=path/to/djx-bpf to use another build): scripts/services.sh hsqldb|h2|jts|guava|lucene [JAVA_HOME] [GC] [HEAP] [SIZE]
set -eu
NAME=$1 JH=${2:-/usr/lib/jvm/java-17-openjdk-amd64} GC=${3:-G1} HEAP=${4:-}
J=/usr/share/java
case $NAME in
hsqldb) PKG=libhsqldb-java JAR=$J/hsqldb.jar MAIN=SqlService SIZE="jdbc:hsqldb:mem:svc ${5:-400000}" HEAP=${HEAP:-1g} ;;
h2) PKG=libh2-java JAR=$J/h2.jar MAIN=SqlService SIZE="jdbc:h2:mem:svc;DB_CLOSE_DELAY=-1 ${5:-400000}" HEAP=${HEAP:-1g} ;;
jts) PKG=libjts-java JAR=$J/jts-core.jar MAIN=JtsService SIZE=${5:-1000000} HEAP=${HEAP:-2g} ;;
guava) PKG=libguava-java JAR=$J/guava.jar MAIN=GuavaService SIZE=${5:-1000 500} HEAP=${HEAP:-1g} ;;
lucene) PKG=liblucene8-java JAR=/usr/share/maven-repo/org/apache/lucene/lucene-core/8.x/lucene-core-8.x.jar MAIN=LuceneService SIZE=${5:-1000000} HEAP=${HEAP:-1g} ;;
*) echo "services.sh: no service $NAME (hsqldb, h2, jts, guava or lucene)" >&2; exit 2 ;;
esac
[ -f "$JAR" ] || (apt-get update -qq && apt-get install -y -qq $PKG)
BIN=${BIN:-build/djx-bpf}
[ -x "$BIN" ] || make build
OUT=build/services
mkdir -p $OUT
"$JH/bin/javac" -d $OUT -cp "$JAR" bench/services/$MAIN.java
log=$OUT/$NAME.log
"$JH/bin/java" -Xmx$HEAP -XX:+Use${GC}GC -Xlog:safepoint:file=$OUT/$NAME-safepoint.log -cp "$OUT:$JAR" $MAIN $SIZE 60 >"$log" 2>&1 &
jpid=$!
trap 'kill $jpid 2>/dev/null' EXIT
until grep -q ready "$log"; do
	kill -0 $jpid 2>/dev/null || { cat "$log"; exit 1; }
	sleep 0.5
done
sleep 3 # start-up is long over when a user attaches
"$BIN" profile --pid $jpid --duration 8s --format json -o $OUT/$NAME.json
"$BIN" report --top 10 $OUT/$NAME.json
