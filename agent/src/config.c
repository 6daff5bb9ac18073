/* The session's configuration and the option parser:
 * "sock=PATH,interval=BYTES,minsize=BYTES,budget=N,reconcile=0|1,
 * stacks=SIG,code=0|1|2,census=0|1|2,census_budget=US,recensus=MS,types=0|1". */
#include <stdio.h>
#include <string.h>

#include "config.h"

#define DEFAULT_INTERVAL 524288u /* JVMTI's own default */

static struct djx_config config;
const struct djx_config *const djx_cfg = &config;

void djx_config_set_env(JavaVM *vm, jvmtiEnv *j)
{
	config.vm = vm;
	config.jvmti = j;
}

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

enum kind {
	K_BYTES, /* uint64_t, at most max */
	K_DIGIT, /* int, one digit 0..max */
	K_SIGNAL, /* int, a signal number 1..64 or 0, plain decimal */
};

static const struct opt {
	const char *key;
	enum kind kind;
	size_t off;
	uint64_t max;
	const char *hint; /* after the bad value in the error */
} opts[] = {
	/* SetHeapSamplingInterval takes a jint; 0 samples every allocation. */
	{"interval", K_BYTES, offsetof(struct djx_options, interval), 0x7fffffff, ""},
	{"budget", K_BYTES, offsetof(struct djx_options, budget), UINT64_MAX, ""},
	{"reconcile", K_DIGIT, offsetof(struct djx_options, reconcile), 1, " (0 or 1)"},
	{"stacks", K_SIGNAL, offsetof(struct djx_options, stacks), 64, " (a signal number 1..64; 0: off)"},
	{"code", K_DIGIT, offsetof(struct djx_options, code), 2, " (0 off, 1 on, 2 off on HotSpot)"},
	{"types", K_DIGIT, offsetof(struct djx_options, types), 1, " (0 or 1)"},
	{"census", K_DIGIT, offsetof(struct djx_options, census), 2, " (0 off, 1 no holders, 2 holders)"},
	{"census_budget", K_BYTES, offsetof(struct djx_options, census_budget_us), UINT64_MAX, " (µs)"},
	{"recensus", K_BYTES, offsetof(struct djx_options, recensus_ms), UINT64_MAX, " (ms)"},
	{"minsize", K_BYTES, offsetof(struct djx_options, minsize), UINT64_MAX, ""},
};

static int keyis(const char *k, size_t klen, const char *want)
{
	return klen == strlen(want) && memcmp(k, want, klen) == 0;
}

/* Sets o's field from v: 0, or -1 when v is not a value of its kind. */
static int set_value(const struct opt *o, const char *v, size_t vlen, struct djx_options *to)
{
	char *field = (char *)to + o->off;
	uint64_t x;

	switch (o->kind) {
	case K_BYTES:
		if (parse_bytes(v, vlen, &x) != 0 || x > o->max)
			return -1;
		*(uint64_t *)field = x;
		return 0;
	case K_DIGIT:
		if (vlen != 1 || v[0] < '0' || (uint64_t)(v[0] - '0') > o->max)
			return -1;
		*(int *)field = v[0] - '0';
		return 0;
	case K_SIGNAL:
		/* No suffix and no leading zero: "8" or "40", never "08" or "1k". */
		if (parse_bytes(v, vlen, &x) != 0 || x > o->max || (vlen > 1 && v[0] == '0') ||
		    (v[vlen - 1] < '0' || v[vlen - 1] > '9'))
			return -1;
		*(int *)field = (int)x;
		return 0;
	}
	return -1;
}

static int set_sock(const char *v, size_t vlen, struct djx_options *o, char *err, size_t errlen)
{
	if (vlen == 0) {
		snprintf(err, errlen, "option sock: empty path");
		return -1;
	}
	if (vlen >= sizeof o->sock) {
		snprintf(err, errlen, "option sock: path longer than %zu bytes", sizeof o->sock - 1);
		return -1;
	}
	memcpy(o->sock, v, vlen);
	o->sock[vlen] = 0;
	return 0;
}

/* One "key=value" item of len bytes at p. Unknown keys and empty items are
 * ignored, for forward compatibility. */
static int parse_item(const char *p, size_t len, struct djx_options *o, char *err, size_t errlen)
{
	const char *eq = memchr(p, '=', len);
	size_t klen = eq ? (size_t)(eq - p) : len;
	const char *v = eq ? eq + 1 : p + len;
	size_t vlen = eq ? len - klen - 1 : 0;

	if (keyis(p, klen, "sock"))
		return set_sock(v, vlen, o, err, errlen);
	for (size_t i = 0; i < sizeof opts / sizeof opts[0]; i++) {
		if (!keyis(p, klen, opts[i].key))
			continue;
		if (set_value(&opts[i], v, vlen, o) == 0)
			return 0;
		snprintf(err, errlen, "option %s: bad value \"%.*s\"%s", opts[i].key, (int)vlen, v, opts[i].hint);
		return -1;
	}
	return 0;
}

int djx_config_parse(const char *s, const char *mode, char *err, size_t errlen)
{
	struct djx_options *o = &config.opt;

	memset(o, 0, sizeof *o);
	o->interval = DEFAULT_INTERVAL;
	o->code = 1;
	config.mode = mode;
	if (s == NULL)
		s = "";
	for (const char *p = s; *p;) {
		const char *comma = strchr(p, ',');
		size_t len = comma ? (size_t)(comma - p) : strlen(p);

		if (parse_item(p, len, o, err, errlen) != 0)
			return -1;
		p = comma ? comma + 1 : p + len;
	}
	if (o->sock[0] == 0) {
		snprintf(err, errlen, "missing option sock=PATH");
		return -1;
	}
	return 0;
}
