// fakejvm.c is a stand-in for libjvm.so in tests: built as a shared
// library named libjvm.so (gcc -shared -fPIC -Wl,-z,now), it has the same
// GOT imports and USDT notes the reloc package looks for.

#include <string.h>
#include <stddef.h>

// A minimal SystemTap SDT note, as <sys/sdt.h> emits it (the header is not
// installed here): a nop at the site, the note in .note.stapsdt and the
// .stapsdt.base anchor.
#define PROBE(name, args) __asm__ __volatile__ ( \
	"990: nop\n" \
	".pushsection .note.stapsdt,\"\",\"note\"\n" \
	".balign 4\n" \
	".4byte 992f-991f, 994f-993f, 3\n" \
	"991: .asciz \"stapsdt\"\n" \
	"992: .balign 4\n" \
	"993: .8byte 990b\n" \
	".8byte _.stapsdt.base\n" \
	".8byte 0\n" \
	".asciz \"hotspot\"\n" \
	".asciz \"" name "\"\n" \
	".asciz \"" args "\"\n" \
	"994: .balign 4\n" \
	".popsection\n" \
	".ifndef _.stapsdt.base\n" \
	".pushsection .stapsdt.base,\"aG\",\"progbits\",.stapsdt.base,comdat\n" \
	".weak _.stapsdt.base\n" \
	".hidden _.stapsdt.base\n" \
	"_.stapsdt.base: .space 1\n" \
	".size _.stapsdt.base, 1\n" \
	".popsection\n" \
	".endif\n")

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
