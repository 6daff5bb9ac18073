#!/bin/bash
# GC pause and throughput per relocation strategy on testdata/java/GcHot.java.
# Usage: scripts/gcbench.sh BIN JAVA CLASSDIR   (prints one line per GC and strategy)
set -u
BIN=$1 J=$2 CP=$3
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
for gc in Serial Parallel G1; do
	for st in none off rescan uprobe; do
		log=$tmp/gc.log out=$tmp/out
		if [ $st = none ]; then
			"$J" -XX:+Use${gc}GC -Xmx512m -Xmn32m -Xlog:gc:file=$log -cp "$CP" GcHot 10 >$out
		else
			"$BIN" profile --quiet --relocation $st -o /dev/null -- "$J" -XX:+Use${gc}GC -Xmx512m -Xmn32m -Xlog:gc:file=$log -cp "$CP" GcHot 10 >$out
		fi
		ops=$(awk '$1=="ops"{n++; if(n>=3&&n<=9){s+=$2;k++}} END{printf "%.1f", s/k/1e6}' $out)
		young=$(grep "Pause Young" $log | grep -oE "[0-9.]+ms" | awk '{gsub("ms","");s+=$1;n++} END{if(n) printf "%.2f", s/n}')
		full=$(grep "Pause Full" $log | grep -oE "[0-9.]+ms" | awk '{gsub("ms","");s+=$1;n++} END{if(n) printf "%.2f", s/n}')
		echo "$gc $st throughput=${ops}M/s young=${young}ms full=${full}ms"
	done
done
