#!/bin/sh
# capture.sh OUT: copy what pmu.Detect reads from the running machine into
# the fixture tree OUT (a new directory under sources/pmu/testdata/machines/).
# Only regular attribute files are copied: type, cpus/cpumask, format/*,
# caps/*, events/* of every PMU, plus cpuinfo, perf_event_paranoid and the
# kernel release. Symlinks in /sys are resolved by reading through them.
set -eu
out=${1:?usage: capture.sh OUTDIR}
mkdir -p "$out/proc/sys/kernel" "$out/sys/bus/event_source/devices"
cp /proc/cpuinfo "$out/proc/cpuinfo"
cat /proc/sys/kernel/perf_event_paranoid >"$out/proc/sys/kernel/perf_event_paranoid"
cat /proc/sys/kernel/osrelease >"$out/proc/sys/kernel/osrelease"
for dev in /sys/bus/event_source/devices/*; do
	name=$(basename "$dev")
	dst="$out/sys/bus/event_source/devices/$name"
	mkdir -p "$dst"
	for f in type cpus cpumask; do
		[ -r "$dev/$f" ] && cat "$dev/$f" >"$dst/$f"
	done
	for sub in format caps events; do
		[ -d "$dev/$sub" ] || continue
		mkdir -p "$dst/$sub"
		for f in "$dev/$sub"/*; do
			[ -f "$f" ] && [ -r "$f" ] && cat "$f" >"$dst/$sub/$(basename "$f")" 2>/dev/null || true
		done
	done
done
