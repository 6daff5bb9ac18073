/* Little-endian record builder. A fixed buffer sets err instead of
 * growing; a growable one starts in caller memory and moves to the heap.
 * Only the emitter (emit.c) and the writer (writer.c) build records. */
#ifndef DJX_WBUF_H
#define DJX_WBUF_H

#include <stddef.h>
#include <stdint.h>

struct wbuf {
	uint8_t *p;
	size_t len, cap;
	int fixed, heap, err;
};
void wb_init(struct wbuf *w, uint8_t *mem, size_t cap, int fixed);
void wb_free(struct wbuf *w);
void wb_u32(struct wbuf *w, uint32_t v);
void wb_u64(struct wbuf *w, uint64_t v);
void wb_str(struct wbuf *w, const char *s);
size_t wb_begin(struct wbuf *w, uint16_t type); /* a record header; returns its offset */
void wb_end(struct wbuf *w, size_t start);      /* patches the record's length */
void put_u32(uint8_t *p, uint32_t v);
void put_u64(uint8_t *p, uint64_t v);
void put_rec_hdr(uint8_t *p, uint16_t type, uint32_t body_len);

#endif
