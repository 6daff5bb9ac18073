/* G1 humongous objects, tracked without weak references (the loader's 'H'). */
#ifndef DJX_BIG_H
#define DJX_BIG_H

#include <stddef.h>
#include <stdint.h>

int djx_big_enable(uint64_t min); /* 'H': objects of min bytes or more; -1: /proc/self/mem unreadable */
int djx_big_wants(uint64_t size); /* track an object of this size here (any thread) */

/* Lock held. */
int djx_big_add_locked(uint64_t tag, uint64_t addr, uint64_t size); /* -1: out of memory */
int djx_big_pending_locked(void); /* a GC finished since the last check */
void djx_big_end_locked(void);    /* session end: the table and /proc/self/mem closed */
void djx_big_reset_locked(void);  /* session start: that, nothing checked yet */
size_t djx_big_count_locked(void);
size_t djx_big_addrs_locked(uint64_t *out, size_t max);

int djx_big_check(void); /* writer thread, after a GC: FREE for the gone; -1 if one was dropped */

#endif
