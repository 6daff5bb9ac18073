/* The executor: a task that shares djx-bpf's memory and runs one system
 * call at a time for it, so that a call that never returns (a read of a
 * target's FUSE mapping) strands that task, not djx-bpf. */
#ifndef DJX_EXECUTOR_H
#define DJX_EXECUTOR_H

#include <stdint.h>

/* States of djx_exec.state, the futex word both sides wait on. */
enum {
	DJX_EX_IDLE = 0,      /* waiting for a request */
	DJX_EX_REQ = 1,       /* Go posted a request */
	DJX_EX_DONE = 2,      /* the executor stored its result */
	DJX_EX_EXIT = 3,      /* the executor exited, idle */
	DJX_EX_ABANDONED = 4, /* Go gave up waiting: exit after the call */
};

/* Requests. */
enum {
	DJX_OP_READV = 1,  /* process_vm_readv(a0 pid, a1 local, a2 nlocal, a3 remote, a4 nremote, 0) */
	DJX_OP_OPENAT = 2, /* openat(a0 dirfd, a1 path, a2 flags, 0) */
	DJX_OP_PREAD = 3,  /* pread64(a0 fd, a1 buf, a2 len, a3 off) */
	DJX_OP_FSTAT = 4,  /* fstat(a0 fd, a1 buf) */
	DJX_OP_CLOSE = 5,  /* close(a0 fd) */
	DJX_OP_OPENAT2 = 6, /* openat2(a0 dirfd, a1 path, a2 how, a3 size) */
};

#define DJX_EX_MAXIOV 1024
/* Reads land in the executor's own staging buffer, which outlives an
 * abandoned call, and are copied out from there. */
#define DJX_EX_STAGE (512 << 10)

struct djx_exec {
	uint32_t state;
	int32_t op;
	int32_t parent; /* getpid() of djx-bpf when started */
	int32_t idle_ms; /* exit after this long without a request */
	int32_t files;   /* shares djx-bpf's file table; else holds no file */
	int32_t pad;
	int64_t arg[6];
	int64_t ret; /* result, or -errno */
	uint64_t iov[2 * (1 + DJX_EX_MAXIOV)]; /* one local iovec, then the remote ones */
	unsigned char *stage;                   /* DJX_EX_STAGE bytes */
};

/* djx_exec_new maps an executor's shared block and stack; NULL on failure. */
struct djx_exec *djx_exec_new(void);
/* djx_exec_start starts the executor task; its pid, or -errno. With files
 * set it shares djx-bpf's file table (for the calls on files); else its
 * copy of the table is emptied first, so that a task stranded in a read
 * of memory keeps no file of djx-bpf's open (its stdout, its BPF links)
 * once djx-bpf has exited. */
int djx_exec_start(struct djx_exec *e, int files);
/* djx_exec_free unmaps what djx_exec_new mapped, once its task is reaped. */
void djx_exec_free(struct djx_exec *e);

#endif
