/* The session's configuration: the options and the JVMTI environment. The
 * entry points (agent.c) set it before the session starts; every other
 * module only reads it, through djx_cfg. */
#ifndef DJX_CONFIG_H
#define DJX_CONFIG_H

#include <jvmti.h>
#include <stddef.h>
#include <stdint.h>

struct djx_options {
	char sock[108]; /* sizeof(sockaddr_un.sun_path) */
	uint64_t interval;
	uint64_t minsize;
	uint64_t budget; /* max sampled-allocation callbacks per second; 0: no cap */
	int reconcile;   /* report tracked objects' moves after each GC */
	int stacks;      /* signal number of the stack handler; 0: off */
	int code;        /* CODE/CODE_UNLOAD/STUB records: 1 (default), 0 off, 2 off on HotSpot (BPF stacks) */
	int census;      /* 0 off, 1 without holders, 2 with holders (on 'C') */
	uint64_t census_budget_us; /* longest census pause; 0: no limit */
	uint64_t recensus_ms;      /* least time between censuses after GCs; 0: none */
	int types;                 /* TYPES_INFO and CLASS records (types.c) */
};

struct djx_config {
	jvmtiEnv *jvmti; /* the session's environment; NULL before setup */
	JavaVM *vm;
	const char *mode; /* "attach" | "launch" */
	struct djx_options opt;
};
extern const struct djx_config *const djx_cfg;

/* Entry points only. Parses "key=value,..." into the options: 0, or -1
 * with err set (a bad value; sock missing). */
int djx_config_parse(const char *options, const char *mode, char *err, size_t errlen);
void djx_config_set_env(JavaVM *vm, jvmtiEnv *j);

#endif
