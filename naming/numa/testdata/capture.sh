#!/bin/sh
# capture.sh OUT: copy the NUMA topology numa.LoadTopology reads from the
# running machine (node online list, each node's cpulist and distance row,
# online CPUs) into the fixture tree OUT.
set -eu
out=${1:?usage: capture.sh OUTDIR}
src=/sys/devices/system/node
mkdir -p "$out/sys/devices/system/cpu"
cat /sys/devices/system/cpu/online >"$out/sys/devices/system/cpu/online"
[ -d "$src" ] || exit 0
mkdir -p "$out$src"
for f in online possible has_cpu has_memory; do
	[ -r "$src/$f" ] && cat "$src/$f" >"$out$src/$f"
done
for n in "$src"/node[0-9]*; do
	mkdir -p "$out$n"
	cat "$n/cpulist" >"$out$n/cpulist"
	cat "$n/distance" >"$out$n/distance"
done
