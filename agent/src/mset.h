/* An open-addressing set of nonzero 64-bit keys (jmethodIDs already
 * described, classes already sent). Not locked: its owner guards it. */
#ifndef DJX_MSET_H
#define DJX_MSET_H

#include <stddef.h>
#include <stdint.h>

struct mset {
	uint64_t *slots;
	size_t cap, n;
};
int mset_has(const struct mset *s, uint64_t id);
int mset_add(struct mset *s, uint64_t id); /* 0, or -1 out of memory (the caller resends later) */
void mset_free(struct mset *s);

#endif
