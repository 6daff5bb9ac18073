/* Option parsing: "sock=PATH,interval=BYTES,minsize=BYTES,budget=N,
 * reconcile=0|1,stacks=SIG,code=0|1,census=0|1|2,census_budget=US,
 * recensus=MS,types=0|1". */
#include <stdio.h>
#include <string.h>

#include "djx.h"

/* Decimal with an optional binary k/m/g suffix; rejects overflow and junk. */
static int parse_bytes(const char *v, size_t n, uint64_t *out)
{
	uint64_t x = 0;
	size_t i = 0;
	for (; i < n && v[i] >= '0' && v[i] <= '9'; i++) {
		uint64_t d = (uint64_t)(v[i] - '0');
		if (x > (UINT64_MAX - d) / 10)
			return -1;
		x = x * 10 + d;
	}
	if (i == 0)
		return -1;
	if (i < n) {
		int shift;
		if (i + 1 != n)
			return -1;
		switch (v[i]) {
		case 'k': case 'K': shift = 10; break;
		case 'm': case 'M': shift = 20; break;
		case 'g': case 'G': shift = 30; break;
		default: return -1;
		}
		if (x > (UINT64_MAX >> shift))
			return -1;
		x <<= shift;
	}
	*out = x;
	return 0;
}

static int keyis(const char *k, size_t klen, const char *want)
{
	return klen == strlen(want) && memcmp(k, want, klen) == 0;
}

int djx_parse_options(const char *s, struct djx_options *o, char *err, size_t errlen)
{
	memset(o, 0, sizeof *o);
	o->interval = DJX_DEFAULT_INTERVAL;
	o->code = 1;
	if (s == NULL)
		s = "";
	for (const char *p = s; *p;) {
		const char *comma = strchr(p, ',');
		size_t len = comma ? (size_t)(comma - p) : strlen(p);
		const char *eq = memchr(p, '=', len);
		size_t klen = eq ? (size_t)(eq - p) : len;
		const char *v = eq ? eq + 1 : p + len;
		size_t vlen = eq ? len - klen - 1 : 0;

		if (keyis(p, klen, "sock")) {
			if (vlen == 0) {
				snprintf(err, errlen, "option sock: empty path");
				return -1;
			}
			if (vlen >= sizeof o->sock) {
				snprintf(err, errlen, "option sock: path longer than %zu bytes",
					 sizeof o->sock - 1);
				return -1;
			}
			memcpy(o->sock, v, vlen);
			o->sock[vlen] = 0;
		} else if (keyis(p, klen, "interval")) {
			/* SetHeapSamplingInterval takes a jint; 0 samples every allocation. */
			if (parse_bytes(v, vlen, &o->interval) != 0 || o->interval > 0x7fffffff) {
				snprintf(err, errlen, "option interval: bad value \"%.*s\"", (int)vlen, v);
				return -1;
			}
		} else if (keyis(p, klen, "budget")) {
			if (parse_bytes(v, vlen, &o->budget) != 0) {
				snprintf(err, errlen, "option budget: bad value \"%.*s\"", (int)vlen, v);
				return -1;
			}
		} else if (keyis(p, klen, "reconcile")) {
			if (vlen != 1 || (v[0] != '0' && v[0] != '1')) {
				snprintf(err, errlen, "option reconcile: bad value \"%.*s\" (0 or 1)", (int)vlen, v);
				return -1;
			}
			o->reconcile = v[0] == '1';
		} else if (keyis(p, klen, "stacks")) {
			uint64_t sig;
			if (parse_bytes(v, vlen, &sig) != 0 || sig > 64 || (vlen > 1 && v[0] == '0') ||
			    (v[vlen - 1] < '0' || v[vlen - 1] > '9')) {
				snprintf(err, errlen, "option stacks: bad value \"%.*s\" (a signal number 1..64; 0: off)",
					 (int)vlen, v);
				return -1;
			}
			o->stacks = (int)sig;
		} else if (keyis(p, klen, "code")) {
			if (vlen != 1 || (v[0] != '0' && v[0] != '1')) {
				snprintf(err, errlen, "option code: bad value \"%.*s\" (0 or 1)", (int)vlen, v);
				return -1;
			}
			o->code = v[0] == '1';
		} else if (keyis(p, klen, "types")) {
			if (vlen != 1 || (v[0] != '0' && v[0] != '1')) {
				snprintf(err, errlen, "option types: bad value \"%.*s\" (0 or 1)", (int)vlen, v);
				return -1;
			}
			o->types = v[0] == '1';
		} else if (keyis(p, klen, "census")) {
			if (vlen != 1 || v[0] < '0' || v[0] > '2') {
				snprintf(err, errlen, "option census: bad value \"%.*s\" (0 off, 1 no holders, 2 holders)",
					 (int)vlen, v);
				return -1;
			}
			o->census = v[0] - '0';
		} else if (keyis(p, klen, "census_budget")) {
			if (parse_bytes(v, vlen, &o->census_budget_us) != 0) {
				snprintf(err, errlen, "option census_budget: bad value \"%.*s\" (µs)", (int)vlen, v);
				return -1;
			}
		} else if (keyis(p, klen, "recensus")) {
			if (parse_bytes(v, vlen, &o->recensus_ms) != 0) {
				snprintf(err, errlen, "option recensus: bad value \"%.*s\" (ms)", (int)vlen, v);
				return -1;
			}
		} else if (keyis(p, klen, "minsize")) {
			if (parse_bytes(v, vlen, &o->minsize) != 0) {
				snprintf(err, errlen, "option minsize: bad value \"%.*s\"", (int)vlen, v);
				return -1;
			}
		}
		/* Unknown keys and empty items are ignored for forward compatibility. */
		p = comma ? comma + 1 : p + len;
	}
	if (o->sock[0] == 0) {
		snprintf(err, errlen, "missing option sock=PATH");
		return -1;
	}
	return 0;
}
