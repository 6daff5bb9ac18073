/* ZGC's colored references, decoded in-process (types.c, roots.c). */
#ifndef DJX_ZADDR_H
#define DJX_ZADDR_H

#include <stdint.h>

/* 0: not ZGC, or ZGC with its layout read; -1: ZGC whose globals are
 * unreadable (why in err). Idempotent. */
int djx_z_init(char *err, unsigned errlen);
int djx_z_on(void); /* ZGC with its layout read */
/* A handle's or a field's reference as the address its object is read at
 * (offset | heap base, which JDK 17's views and 21+'s one view all map);
 * 0 for null, 1 for no reference. The identity when not ZGC. */
uint64_t djx_z_decode(uint64_t v);

#endif
