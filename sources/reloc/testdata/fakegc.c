// fakegc.c is a stand-in for a libjvm.so with symbols, in tests: built as
// a shared library named libjvm.so (gcc -O2 -shared -fPIC -Wl,-z,now), it
// has functions named (mangled) as HotSpot's collector copy functions, one
// per collector and phase, that copy with memcpy/memmove through the PLT,
// a mutator copy outside them, and the gc__begin/gc__end USDT notes.
// fakemain.c drives it.

#include <string.h>
#include <stddef.h>

#include "sdt.h"

#define GC_COPY(mangled, fn, copy) \
	__attribute__((noinline)) void fn(char *dst, const char *src, size_t n) __asm__(mangled); \
	__attribute__((noinline)) void fn(char *dst, const char *src, size_t n) \
	{ \
		copy(dst, src, n); \
		__asm__ __volatile__("" ::: "memory"); \
	}

GC_COPY("_ZN16DefNewGeneration22copy_to_survivor_spaceEP7oopDesc", serial_young, memcpy)
GC_COPY("_ZN16CompactibleSpace7compactEv", serial_full, memmove)
GC_COPY("_ZN18PSPromotionManager31copy_unmarked_to_survivor_spaceILb0EEEP7oopDescS2_8markWord", parallel_young, memcpy)
GC_COPY("_ZN17PSParallelCompact9copy_backEPP12HeapWordImplS2_", parallel_full, memmove)
GC_COPY("_ZN20G1ParScanThreadState22copy_to_survivor_spaceE16G1HeapRegionAttrP7oopDesc8markWord", g1_young, memcpy)
GC_COPY("_ZN19G1FullGCCompactTask27copy_object_to_new_locationEP7oopDesc", g1_full, memmove)

// A copy by the runtime on a Java thread, not by a collector.
__attribute__((noinline)) void mutator_copy(char *dst, const char *src, size_t n)
{
	memcpy(dst, src, n);
	__asm__ __volatile__("" ::: "memory");
}

// fake_gc copies n bytes from src to dst + n as the runtime would (outside
// a GC), then brackets a young copy (memcpy, to dst) and a full copy
// (memmove, to dst + n) with the probes HotSpot has.
void fake_gc(char *dst, const char *src, size_t n)
{
	mutator_copy(dst + n, src, n);
	PROBE("gc__begin", "1@$1");
	serial_young(dst, src, n);
	parallel_full(dst + n, src, n);
	PROBE("gc__end", "");
}
