#!/bin/sh
# Adds the machine code of the Lucene service's hot methods to jit.txt
# (sections lucene-jdk17, or lucene-jdk17-avx512 on an AVX-512 host) and
# redoes corpus.txt. These are the methods where the decode source found
# the fewest data addresses on bench/services/LuceneService.java
# (docs/benchmarks.md): TestOracle holds the look-back boundary on them.
# Needs Debian's liblucene8-java, java 17 and root (or the JVM's uid).
set -eu
cd "$(dirname "$0")"
label=lucene-jdk17
grep -qw avx512f /proc/cpuinfo && label=lucene-jdk17-avx512
jar=/usr/share/java/lucene-core-8.7.0.jar
[ -f $jar ] || (apt-get update -qq && apt-get install -y -qq liblucene8-java)
awk -v l="$label" '/^method /{skip = $2 == l} !skip' jit.txt >jit.tmp
mv jit.tmp jit.txt
M='StandardTokenizerImpl\.getNextToken|BytesRefHash\.findHash|FilteringTokenFilter\.incrementToken|PriorityQueue\.downHeap|ForUtil\.(decode\(int|expand16To32|prefixSum32|decodeAndPrefixSum|decode11)|PForUtil\.decode|Arrays\.fill\((long\[\], long|int\[\], int)\)|PushPostingsWriterBase\.writeTerm|DirectPackedReader20\.get|LZ4\.decompress'
cd jitdump
go run . -label $label -jdk /usr/lib/jvm/java-17-openjdk-amd64 -o ../jit.txt \
	-src ../../../../bench/services/LuceneService.java -cp $jar -args "300000 40" -settle 15s \
	-max 8192 -same 2 -match "$M"
cd ..
./gen.sh --no-jit
