/* ZGC's colored references. JDK 17's non-generational ZGC colors a
 * reference with view bits above its offset (offset & ZAddressOffsetMask);
 * 21+'s generational ZGC stores references shifted left past their color
 * bits, by a load shift that one of four remapped bits (12..15) gives per
 * pointer (ZPointerLoadShiftTable in zAddress.cpp), while its JNI local
 * handles hold colorless addresses. Both map the heap at
 * offset | (mask + 1), where the agent reads objects; hotspot/heapwalk/zgc.go
 * decodes the same way from outside. */
#include <stdio.h>

#include "vmstructs.h"
#include "zaddr.h"

#define Z_REMAPPED_SHIFT 12

static struct {
	int done, on, generational;
	uint64_t mask;
	char why[120]; /* the first answer's, for every later session's */
} z;

int djx_z_init(char *err, unsigned errlen)
{
	uint64_t moff, soff;
	uint64_t **ip;
	const uint64_t *g, *mp;

	if (z.done) {
		if (z.why[0] == 0)
			return 0;
		snprintf(err, errlen, "%s", z.why);
		return -1;
	}
	/* Without vmStructs (OpenJ9) there is nothing to decode; ask again. */
	if (djx_vm_init(err, errlen) != 0)
		return 0;
	z.done = 1;
	if (djx_vm_flag("UseZGC") != 1)
		return 0;
	ip = djx_vm_static("ZGlobalsForVMStructs", "_instance_p");
	if (ip == NULL || *ip == NULL || djx_vm_offset("ZGlobalsForVMStructs", "_ZAddressOffsetMask", &moff) != 0) {
		snprintf(z.why, sizeof z.why, "vmStructs: no ZGlobalsForVMStructs::_ZAddressOffsetMask: ZGC's references not decoded");
		snprintf(err, errlen, "%s", z.why);
		return -1;
	}
	g = *ip;
	mp = *(const uint64_t *const *)((const char *)g + moff);
	if (mp == NULL || (*mp & (*mp + 1)) != 0 || *mp < (1ull << 32) - 1 || *mp > (1ull << 46) - 1) {
		snprintf(z.why, sizeof z.why, "ZGC: offset mask %#llx not known: references not decoded",
			 mp ? (unsigned long long)*mp : 0ull);
		snprintf(err, errlen, "%s", z.why);
		return -1;
	}
	z.mask = *mp;
	z.generational = djx_vm_offset("ZGlobalsForVMStructs", "_ZPointerLoadShift", &soff) == 0;
	z.on = 1;
	return 0;
}

int djx_z_on(void)
{
	return z.on;
}

uint64_t djx_z_decode(uint64_t v)
{
	uint64_t rm;
	int tz = 0;

	if (!z.on)
		return v;
	if (!z.generational)
		return v & z.mask ? (v & z.mask) | (z.mask + 1) : 0;
	/* Thread-local handles hold colorless addresses (heap base | offset);
	 * colored ones are shifted far above them. */
	if ((v & ~z.mask) == z.mask + 1)
		return v;
	if (v >> (Z_REMAPPED_SHIFT + 4) == 0)
		return 0; /* null keeps its color bits */
	rm = (v >> Z_REMAPPED_SHIFT) & 0xf;
	if (rm == 0 || (rm & (rm - 1)) != 0)
		return 1; /* not one remapped bit: no reference */
	while (!(rm & (1u << tz)))
		tz++;
	return ((v >> (Z_REMAPPED_SHIFT + 1 + tz)) & z.mask) | (z.mask + 1);
}
