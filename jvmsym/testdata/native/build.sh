#!/bin/sh
# Rebuilds the ELF fixtures of the native symbolizer tests from fixture.cpp.
# The outputs are committed so that tests need no compiler.
#
# The text segment is linked at 0x200000 so that file offsets and virtual
# addresses differ, as they do in many real libraries.
set -eu
cd "$(dirname "$0")"
if ! command -v g++ >/dev/null 2>&1; then
	apt-get update && apt-get install -y g++
fi
g++ -O1 -fPIC -shared -fno-asynchronous-unwind-tables \
	-Wl,-Ttext-segment=0x200000 -Wl,--build-id=none -Wl,-z,max-page-size=4096 \
	-o libfixture.so fixture.cpp
strip --strip-all -o libfixture-stripped.so libfixture.so
