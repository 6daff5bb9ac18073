#!/bin/sh
# Starts the demo JVM, attaches djx-bpf to it for 8 seconds, prints the
# report, then stops the JVM it started.
set -u
BIN=$1 JAVA=$2 CP=$3
if [ "$(id -u)" != 0 ]; then
	echo "demo: djx-bpf needs root for BPF; run: sudo make demo" >&2
	exit 1
fi
LOG=$(mktemp)
"$JAVA" -Xmx1g -cp "$CP" HotArrays 0 0 >"$LOG" 2>&1 &
JPID=$!
for i in $(seq 100); do grep -q ready "$LOG" && break; sleep 0.1; done
echo "demo: HotArrays running as pid $JPID; its data is allocated at start-up; the hot object is the long[] in HotArrays.hot"
echo "demo: djx-bpf profile --pid $JPID --duration 8s"
"$BIN" profile --pid "$JPID" --duration 8s
rc=$?
kill "$JPID" 2>/dev/null
wait "$JPID" 2>/dev/null
rm -f "$LOG"
exit $rc
