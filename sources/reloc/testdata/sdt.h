// sdt.h: the USDT probe macro of the fake libjvm.so builds.
#ifndef FAKE_SDT_H
#define FAKE_SDT_H

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

#endif
