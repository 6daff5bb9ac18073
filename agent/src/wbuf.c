/* Little-endian record builder. */
#include <stdlib.h>
#include <string.h>

#include "djx.h"
#include "wbuf.h"

void put_u32(uint8_t *p, uint32_t v)
{
	for (int i = 0; i < 4; i++)
		p[i] = (uint8_t)(v >> (8 * i));
}

void put_u64(uint8_t *p, uint64_t v)
{
	for (int i = 0; i < 8; i++)
		p[i] = (uint8_t)(v >> (8 * i));
}

void wb_init(struct wbuf *w, uint8_t *mem, size_t cap, int fixed)
{
	w->p = mem;
	w->len = 0;
	w->cap = cap;
	w->fixed = fixed;
	w->heap = 0;
	w->err = 0;
}

void wb_free(struct wbuf *w)
{
	if (w->heap)
		free(w->p);
	w->p = NULL;
	w->heap = 0;
}

/* Returns a pointer to n writable bytes, or NULL (and sets err). */
static uint8_t *wb_grow(struct wbuf *w, size_t n)
{
	if (w->err)
		return NULL;
	if (w->cap - w->len < n) {
		size_t ncap = w->cap ? w->cap : 256;
		uint8_t *np;
		if (w->fixed)
			goto fail;
		while (ncap - w->len < n) {
			if (ncap > (SIZE_MAX >> 2))
				goto fail;
			ncap *= 2;
		}
		if (w->heap) {
			np = realloc(w->p, ncap);
		} else {
			np = malloc(ncap);
			if (np != NULL && w->len > 0)
				memcpy(np, w->p, w->len);
		}
		if (np == NULL)
			goto fail;
		w->p = np;
		w->cap = ncap;
		w->heap = 1;
	}
	w->len += n;
	return w->p + w->len - n;
fail:
	w->err = 1;
	return NULL;
}

void wb_u32(struct wbuf *w, uint32_t v)
{
	uint8_t *p = wb_grow(w, 4);
	if (p)
		put_u32(p, v);
}

void wb_u64(struct wbuf *w, uint64_t v)
{
	uint8_t *p = wb_grow(w, 8);
	if (p)
		put_u64(p, v);
}

void wb_str(struct wbuf *w, const char *s)
{
	size_t n = s ? strlen(s) : 0;
	uint8_t *p;
	if (n > 0xffff)
		n = 0xffff; /* JVM names are far shorter; keep records bounded */
	wb_u32(w, (uint32_t)n);
	p = wb_grow(w, n);
	if (p && n)
		memcpy(p, s, n);
}

/* Record header: u32 body_len (patched by wb_end), u16 type, u16 reserved. */
size_t wb_begin(struct wbuf *w, uint16_t type)
{
	size_t start = w->len;
	uint8_t *p = wb_grow(w, DJX_REC_HDR);
	if (p) {
		put_u32(p, 0);
		p[4] = (uint8_t)type;
		p[5] = (uint8_t)(type >> 8);
		p[6] = p[7] = 0;
	}
	return start;
}

void wb_end(struct wbuf *w, size_t start)
{
	if (!w->err)
		put_u32(w->p + start, (uint32_t)(w->len - start - DJX_REC_HDR));
}

/* A record header for records built without a wbuf (fixed-size records in
 * callbacks that must not allocate). */
void put_rec_hdr(uint8_t *p, uint16_t type, uint32_t body_len)
{
	put_u32(p, body_len);
	p[4] = (uint8_t)type;
	p[5] = (uint8_t)(type >> 8);
	p[6] = p[7] = 0;
}
