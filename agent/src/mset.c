/* Open-addressing set of 64-bit keys (0 marks an empty slot: jmethodIDs and
 * the types' keys are never 0). Its owner holds the lock that guards it. */
#include <stdlib.h>

#include "mset.h"

static size_t slot(uint64_t id, size_t cap)
{
	id ^= id >> 33;
	id *= 0xff51afd7ed558ccdull;
	id ^= id >> 33;
	return (size_t)id & (cap - 1);
}

int mset_has(const struct mset *s, uint64_t id)
{
	if (s->cap == 0)
		return 0;
	for (size_t i = slot(id, s->cap);; i = (i + 1) & (s->cap - 1)) {
		if (s->slots[i] == id)
			return 1;
		if (s->slots[i] == 0)
			return 0;
	}
}

static void insert(uint64_t *slots, size_t cap, uint64_t id)
{
	size_t i = slot(id, cap);
	while (slots[i] != 0 && slots[i] != id)
		i = (i + 1) & (cap - 1);
	slots[i] = id;
}

/* Returns 0, or -1 when out of memory (the caller just resends later). */
int mset_add(struct mset *s, uint64_t id)
{
	if (id == 0 || mset_has(s, id))
		return 0;
	if ((s->n + 1) * 2 > s->cap) {
		size_t ncap = s->cap ? s->cap * 2 : 4096;
		uint64_t *ns = calloc(ncap, sizeof *ns);
		if (ns == NULL)
			return -1;
		for (size_t i = 0; i < s->cap; i++)
			if (s->slots[i])
				insert(ns, ncap, s->slots[i]);
		free(s->slots);
		s->slots = ns;
		s->cap = ncap;
	}
	insert(s->slots, s->cap, id);
	s->n++;
	return 0;
}

void mset_free(struct mset *s)
{
	free(s->slots);
	s->slots = NULL;
	s->cap = s->n = 0;
}
