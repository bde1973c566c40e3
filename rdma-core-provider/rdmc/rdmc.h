/* SPDX-License-Identifier: GPL-2.0 OR Linux-OpenIB */
/*
 * rdmc.h: RDMC, reliable multicast of large objects (seed 001: Cornell's
 * RDMC, Derecho's data plane), over one XUD QP per process
 * (Documentation/xud.rst, "RDMC over XUD").
 *
 * A group is a static list of members (each an XUD QP: GID and QP
 * number), one of which, the root, sends objects to all the others. An
 * object is the first SIZE bytes of the root's group buffer; it is cut
 * into blocks of the group's block size, and each block travels as an
 * RDMA WRITE WITH IMMEDIATE into the same offset of a member's group
 * buffer, the immediate naming the group, the transfer and the block.
 * Which member sends which block to whom is the algorithm's schedule,
 * computed by every member alike: sequential send, chain, binomial tree
 * or binomial pipeline.
 *
 * A member accepts a block only from the member its schedule names; its
 * buffer takes remote writes only while a transfer is under way and not
 * yet all here; and the root's BEGIN carries the object's BLAKE2s-256
 * digest, which a member checks before its callback. A copy that another
 * member altered is therefore never delivered: its holder reports itself
 * failed instead (and counts it in copies_refused).
 *
 * Every member calls rdmc_create_group() with the same attributes but
 * its own rank and buffer; it returns once every member has joined. The
 * root calls rdmc_send(); every member's complete callback runs once the
 * whole object is in its buffer and its own part of the relaying is done
 * (the buffer is the application's again), the root's once every member
 * has reported that. If any member fails (a send to it is not
 * acknowledged, or it leaves in the middle of a transfer), every
 * surviving member's failed callback names it, and the group carries no
 * more transfers: destroy it and make a new one of the survivors.
 *
 * One struct rdmc_ctx per process (its XUD QP carries every group's
 * blocks and control messages). Not thread-safe: one thread calls into a
 * context and its groups; callbacks run inside rdmc_progress() (and the
 * waits of rdmc_create_group() and rdmc_destroy_group()), and may call
 * rdmc_send() but not rdmc_destroy_group() or rdmc_close().
 *
 * Link with libibverbs and librxud (-l:librxud-rdmav34.so).
 */
#ifndef RDMC_H
#define RDMC_H

#include <stddef.h>
#include <stdint.h>
#include <infiniband/verbs.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Most members in a group, and most blocks in one object. */
#define RDMC_MAX_MEMBERS 64
#define RDMC_MAX_BLOCKS 65536
/* A block is one XUD message: at most RXUDV_MAX_MSG_SZ (16 MiB). */
#define RDMC_MAX_BLOCK_SIZE 16777216u

enum rdmc_algorithm {
	RDMC_SEQUENTIAL,	/* the root sends every block to each member in turn */
	RDMC_CHAIN,		/* each member relays each block to the next */
	RDMC_TREE,		/* binomial tree of whole objects */
	RDMC_PIPELINE,		/* binomial pipeline (hypercube, a block a step) */
};

/* A member: its XUD QP's GID and number. */
struct rdmc_member {
	union ibv_gid gid;
	uint32_t qpn;
};

struct rdmc_ctx;
struct rdmc_group;

/*
 * Options of rdmc_open(); NULL or zeroes for the defaults. timeout and
 * retry_cnt are the XUD QP's (ibv_modify_qp's IBV_QP_TIMEOUT and
 * IBV_QP_RETRY_CNT): a send not acknowledged after retry_cnt doubling
 * timeouts completes IBV_WC_RETRY_EXC_ERR, and RDMC takes its
 * destination for failed. Defaults 14 (67 ms) and 4: a dead member is
 * found about 2 s after a send to it (67 ms * (2^5 - 1)).
 */
struct rdmc_ctx_attr {
	uint8_t timeout;
	uint8_t retry_cnt;
};

/*
 * Opens @device, makes the context's XUD QP (source GID @gid_index of
 * port 1) and posts its receives. NULL with errno on failure.
 */
struct rdmc_ctx *rdmc_open(const char *device, int gid_index, const struct rdmc_ctx_attr *attr);
/* The context's QP number and GID: what the other members need. */
uint32_t rdmc_qpn(const struct rdmc_ctx *ctx);
const union ibv_gid *rdmc_gid(const struct rdmc_ctx *ctx);
/* 0, or -1 with errno EBUSY while a group exists (destroy it first). */
int rdmc_close(struct rdmc_ctx *ctx);

/*
 * Runs the context for at most @timeout_ms (0: what is ready now):
 * completions, control messages, heartbeats, the next blocks, callbacks.
 * Sleeps on the CQ's completion channel, never spins. Returns once a
 * callback has run or the time is up: the number of callbacks run, or -1
 * with errno if the context broke (its QP failed).
 */
int rdmc_progress(struct rdmc_ctx *ctx, int timeout_ms);

/*
 * @seq: the transfer's number in the group (1, 2, ...); @size: the
 * object's. At a member the object is in its buffer, at the root every
 * member has it; either way the buffer may be written again.
 */
typedef void (*rdmc_complete_fn)(struct rdmc_group *g, uint32_t seq, size_t size, void *arg);
/*
 * Member @member (its rank) failed: once per failed member, at every
 * surviving member. @member is the caller's own rank if the others took
 * it for failed or if its own QP broke.
 */
typedef void (*rdmc_failed_fn)(struct rdmc_group *g, unsigned int member, void *arg);

struct rdmc_group_attr {
	uint8_t id;			/* the group's number, the same at every member */
	unsigned int n_members;		/* 2 to RDMC_MAX_MEMBERS */
	const struct rdmc_member *members;
	unsigned int rank;		/* the caller's index in members */
	unsigned int root;		/* the sender's index in members */
	enum rdmc_algorithm algorithm;
	uint32_t block_size;		/* 1 to RDMC_MAX_BLOCK_SIZE */
	void *buffer;			/* objects are sent from / received into it */
	size_t buffer_len;
	unsigned int heartbeat_ms;	/* 0: 250 */
	rdmc_complete_fn complete;
	rdmc_failed_fn failed;
	void *arg;			/* the callbacks' last argument */
};

/*
 * Joins group @attr->id: registers the buffer (no remote access until a
 * transfer begins; the root's never), sends every other member a JOIN with its
 * address and key (only to members the algorithm has writing to it) and
 * waits up to @timeout_ms for every member's. NULL with errno: EINVAL
 * for bad attributes (or ones another member's JOIN contradicts), EEXIST
 * if the context has group @id already, ETIMEDOUT if not all joined,
 * EHOSTDOWN if a member failed meanwhile (its failed callback has run).
 */
struct rdmc_group *rdmc_create_group(struct rdmc_ctx *ctx, const struct rdmc_group_attr *attr,
				     int timeout_ms);

/*
 * Root only: sends the first @size bytes of the buffer to every member;
 * the complete callback says when they have it. 0, or -1 with errno:
 * EPERM (not the root), EBUSY (a transfer is under way), EPIPE (the
 * group failed or a member left), EMSGSIZE (@size is 0, exceeds a
 * member's buffer, or makes more than RDMC_MAX_BLOCKS blocks).
 */
int rdmc_send(struct rdmc_group *g, size_t size);

/*
 * Leaves the group: waits up to @timeout_ms for this member's sends to
 * complete, tells the others (BYE, so they do not take its going for a
 * failure), deregisters the buffer and frees the group. No callback of
 * the group runs once this is called. 0, or -1 with errno ETIMEDOUT if
 * sends were still outstanding when it gave up (the group is freed all
 * the same).
 */
int rdmc_destroy_group(struct rdmc_group *g, int timeout_ms);

struct rdmc_stats {
	uint64_t blocks_sent;		/* WRITEs of blocks completed successfully */
	uint64_t blocks_received;	/* blocks accepted */
	uint64_t blocks_refused;	/* WRITE_IMM completions refused: see xud.rst */
	uint64_t ctrl_refused;		/* control messages refused */
	uint64_t heartbeats;		/* heartbeats sent */
	uint64_t copies_refused;	/* objects whose digest was not the root's */
};
void rdmc_group_stats(const struct rdmc_group *g, struct rdmc_stats *s);

/* "seq", "chain", "tree", "pipeline"; -1 for another name. */
int rdmc_algorithm_parse(const char *name);
const char *rdmc_algorithm_name(enum rdmc_algorithm a);

/*
 * The schedule of one transfer as member @rank sees it: every member
 * computes it alike from the algorithm, the group's size, the root and
 * the number of blocks. from[b]: the rank that sends block b here (-1 at
 * the root); sends: what this member sends, in order, each once it holds
 * the block (or, with whole_first, once it holds every block). steps:
 * the pipeline's synchronous steps (0 for the other algorithms).
 */
struct rdmc_plan_send {
	uint32_t to;
	uint32_t block;
};

struct rdmc_plan {
	uint32_t nblocks;
	uint32_t steps;
	int whole_first;
	int32_t *from;
	struct rdmc_plan_send *sends;
	uint32_t n_sends;
};

/* 0, or -1 with errno (EINVAL, ENOMEM). */
int rdmc_plan(struct rdmc_plan *p, enum rdmc_algorithm a, unsigned int n_members,
	      unsigned int root, unsigned int rank, uint32_t nblocks);
void rdmc_plan_free(struct rdmc_plan *p);

#ifdef __cplusplus
}
#endif

#endif /* RDMC_H */
