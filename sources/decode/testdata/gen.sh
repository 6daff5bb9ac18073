#!/bin/sh
# Regenerates the decode oracle corpus.
#   1. jit.txt: machine code of hot C2/C1 methods, dumped from live JVMs
#      (needs root or the JVM's uid, java 17 and, if present, Temurin 25).
#      C2 picks its encodings by CPU: on an AVX-512 host it emits EVEX
#      (labels *-avx512), elsewhere VEX and, with -XX:UseAVX=0, SSE. Only
#      the sections of this host's kind are replaced; the others are kept.
#   2. corpus.txt: objdump listings of synth.s (assembled by llvm-mc) and of
#      jit.txt, read by TestOracle.
# Pass --no-jit to keep jit.txt and only redo step 2. lucene.sh adds the
# Lucene service's methods (sections lucene-*).
set -eu
cd "$(dirname "$0")"
if [ "${1:-}" != "--no-jit" ]; then
	if grep -qw avx512f /proc/cpuinfo; then
		labels="jdk17-avx512 jdk25-avx512"
	else
		labels="jdk17 jdk17-sse jdk25"
	fi
	touch jit.txt
	# Drop this host's sections: a "method LABEL ..." line and its hex line.
	awk -v labels=" $labels " '/^method /{skip = index(labels, " " $2 " ") > 0} !skip' jit.txt >jit.tmp
	mv jit.tmp jit.txt
	M='Hot\.|HashMap\.get|HashMap\.hash|Integer\.|arraycopy'
	cd jitdump
	for l in $labels; do
		case $l in
		jdk17*) jdk=/usr/lib/jvm/java-17-openjdk-amd64 ;;
		jdk25*) jdk=/usr/lib/jvm/temurin-25-jdk-amd64 ;;
		esac
		[ -d "$jdk" ] || continue
		case $l in
		jdk17-sse) go run . -label $l -jdk $jdk -jflags "-XX:UseAVX=0" -o ../jit.txt -match 'Hot\.(sumLong|addInt|scale|bytesXor)' ;;
		*) go run . -label $l -jdk $jdk -o ../jit.txt -match "$M" ;;
		esac
	done
	cd ..
fi
cd ../../.. && go test ./sources/decode -run TestOracle -update
