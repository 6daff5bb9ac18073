/* Set of live object tags: issued by SampledObjectAlloc, removed by
 * ObjectFree, read by the reconciliation. Open addressing with linear
 * probing (0 marks an empty slot; tags start at 1) and backward-shift
 * deletion, so that deletes leave no tombstones and never allocate: the
 * ObjectFree callback may not block for long. Called with djx.mu held. */
#include <stdlib.h>

#include "djx.h"

static size_t slot(uint64_t tag, size_t cap)
{
	tag ^= tag >> 33;
	tag *= 0xff51afd7ed558ccdull;
	tag ^= tag >> 33;
	return (size_t)tag & (cap - 1);
}

static size_t find(const struct tset *s, uint64_t tag)
{
	size_t i = slot(tag, s->cap);
	while (s->slots[i] != 0 && s->slots[i] != tag)
		i = (i + 1) & (s->cap - 1);
	return i;
}

/* Returns 0, or -1 when out of memory (the tag is then not reconciled). */
int tset_add(struct tset *s, uint64_t tag)
{
	if (tag == 0)
		return 0;
	if ((s->n + 1) * 2 > s->cap) {
		size_t ncap = s->cap ? s->cap * 2 : 1024;
		uint64_t *ns = calloc(ncap, sizeof *ns);
		struct tset t = {ns, ncap, 0};
		if (ns == NULL)
			return -1;
		for (size_t i = 0; i < s->cap; i++)
			if (s->slots[i] != 0)
				t.slots[find(&t, s->slots[i])] = s->slots[i];
		free(s->slots);
		s->slots = ns;
		s->cap = ncap;
	}
	size_t i = find(s, tag);
	if (s->slots[i] == 0) {
		s->slots[i] = tag;
		s->n++;
	}
	return 0;
}

/* Returns 1 if tag was in the set. */
int tset_del(struct tset *s, uint64_t tag)
{
	size_t mask = s->cap - 1, i, j;

	if (s->cap == 0 || tag == 0)
		return 0;
	i = find(s, tag);
	if (s->slots[i] == 0)
		return 0;
	/* Shift later members of the probe run back over the hole when their
	 * home slot is not cyclically within (i, j]. */
	for (j = (i + 1) & mask; s->slots[j] != 0; j = (j + 1) & mask) {
		size_t h = slot(s->slots[j], s->cap);
		if (((j - h) & mask) >= ((j - i) & mask)) {
			s->slots[i] = s->slots[j];
			i = j;
		}
	}
	s->slots[i] = 0;
	s->n--;
	return 1;
}

/* Copies up to max members to out, starting at slot *cursor and wrapping,
 * so that successive reconciliations limited to max tags take turns over
 * a larger set. Returns the number copied and advances *cursor. */
size_t tset_copy(const struct tset *s, uint64_t *out, size_t max, size_t *cursor)
{
	size_t n = 0, i;

	if (s->cap == 0)
		return 0;
	i = *cursor & (s->cap - 1);
	for (size_t k = 0; k < s->cap && n < max; k++, i = (i + 1) & (s->cap - 1))
		if (s->slots[i] != 0)
			out[n++] = s->slots[i];
	*cursor = i;
	return n;
}

void tset_free(struct tset *s)
{
	free(s->slots);
	s->slots = NULL;
	s->cap = s->n = 0;
}
