// fakejvm.c is a stand-in for libjvm.so in tests: built as a shared
// library named libjvm.so (gcc -shared -fPIC -Wl,-z,now), it has the same
// GOT imports and USDT notes the reloc package looks for.

#include <string.h>
#include <stddef.h>

#include "sdt.h"

typedef void *(*copy_fn)(void *, const void *, size_t);

// Taking memcpy's address in PIC code goes through a GLOB_DAT GOT slot;
// memmove is called through the PLT (a JUMP_SLOT).
__attribute__((noinline)) copy_fn get_memcpy(void)
{
	return memcpy;
}

// fake_gc brackets one memmove and one memcpy of n bytes from src to dst
// with the probes HotSpot has.
void fake_gc(char *dst, const char *src, size_t n)
{
	PROBE("gc__begin", "1@$1");
	memmove(dst, src, n);
	get_memcpy()(dst + n, src, n);
	PROBE("gc__end", "");
}
