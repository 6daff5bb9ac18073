#!/bin/sh
# Regenerates the decode oracle corpus.
#   1. jit.txt: machine code of hot C2/C1 methods, dumped from live JVMs
#      (needs root or the JVM's uid, java 17 and, if present, Temurin 25).
#   2. corpus.txt: objdump listings of synth.s (assembled by llvm-mc) and of
#      jit.txt, read by TestOracle.
# Pass --no-jit to keep jit.txt and only redo step 2.
set -eu
cd "$(dirname "$0")"
if [ "${1:-}" != "--no-jit" ]; then
	rm -f jit.txt
	M='Hot\.|HashMap\.get|HashMap\.hash|Integer\.|arraycopy'
	(cd jitdump &&
		go run . -label jdk17 -jdk /usr/lib/jvm/java-17-openjdk-amd64 -o ../jit.txt -match "$M" &&
		go run . -label jdk17-sse -jdk /usr/lib/jvm/java-17-openjdk-amd64 -jflags "-XX:UseAVX=0" \
			-o ../jit.txt -match 'Hot\.(sumLong|addInt|scale|bytesXor)' &&
		if [ -d /usr/lib/jvm/temurin-25-jdk-amd64 ]; then
			go run . -label jdk25 -jdk /usr/lib/jvm/temurin-25-jdk-amd64 -o ../jit.txt -match "$M"
		fi)
fi
cd ../.. && go test ./decode -run TestOracle -update
