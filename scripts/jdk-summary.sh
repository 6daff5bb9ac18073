#!/bin/sh
# Prints, as `make test`'s last line, whether JDK 25's tests ran: they run
# whenever a Temurin 25 is installed, and are never required.
# Usage: jdk-summary.sh LOG TEMURIN25_HOME (LOG: testenv.JDKLogEnv's file).
log=$1 home=$2
if [ ! -x "$home/bin/java" ]; then
	echo "JDK 25 tests: skipped: no Temurin 25 on this machine (none at $home)"
	exit 0
fi
version=$(sed -n 's/^IMPLEMENTOR_VERSION="\(.*\)"$/\1/p' "$home/release" 2>/dev/null | sed 's/^Temurin-/Temurin /')
[ -n "$version" ] || version=$("$home/bin/java" -version 2>&1 | head -1)
tests=0 pkgs=0
if [ -s "$log" ]; then
	tests=$(awk '$3 == "jdk25" { print $1, $2 }' "$log" | sort -u | wc -l)
	pkgs=$(awk '$3 == "jdk25" { print $1 }' "$log" | sort -u | wc -l)
fi
if [ "$tests" -gt 0 ]; then
	echo "JDK 25 tests: ran ($version): $tests tests in $pkgs packages ($(awk '$3 == "jdk25" { print $1 }' "$log" | sort -u | tr '\n' ' ' | sed 's/ $//'))"
else
	echo "JDK 25 tests: none ran, though $version is installed at $home (were the end-to-end tests skipped? see the output above)"
fi
