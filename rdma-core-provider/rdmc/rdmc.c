// SPDX-License-Identifier: GPL-2.0 OR Linux-OpenIB
/*
 * RDMC over XUD (rdmc.h; Documentation/xud.rst, "RDMC over XUD").
 *
 * One XUD QP per context carries everything. Control messages are SENDs
 * of one struct wire_msg (JOIN at group creation, BEGIN/READY/DONE around
 * each transfer, FAIL notices, heartbeats, BYE); blocks are RDMA WRITEs
 * WITH IMMEDIATE into the member's registered buffer, the immediate
 * naming group, transfer and block. XUD delivers each message once and
 * completes a WRITE_IMM at the receiver only when every byte of it is
 * placed, so a block's receive completion means the block is there; and
 * it completes a send in error when the destination does not
 * acknowledge, which is how a failed member is found.
 *
 * A member's copy is protected from the other members twice over. Its
 * buffer takes remote writes only while a transfer it has not finished
 * is under way (the MR is re-registered without remote write access once
 * every block is in, and with it again at the next BEGIN); and the
 * root's BEGIN carries the object's BLAKE2s-256 digest, which a member
 * checks once its buffer is closed, before its callback: a copy that
 * does not match is never delivered, and the member reports itself
 * failed to every member (a relay may alter what it passes on, and a
 * member holding the key may write anywhere in the buffer while it is
 * open; neither can make a member take a wrong object).
 */
#include <arpa/inet.h>
#include <endian.h>
#include <errno.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <infiniband/verbs.h>
#include <infiniband/rxudv.h>
#include "blake2s.h"
#include "rdmc.h"

#define QKEY		0x52444d43	/* "RDMC" */
#define MAGIC		0x52444d31	/* "RDM1" */
#define GRH		40
/* A receive slot holds a SEND's GRH and one message; send slots alike. */
#define SLOT		128
#define RECVS		512
#define CTRL_SLOTS	512
/*
 * Block WRITEs in flight, per context: with CTRL_SLOTS they make the
 * send queue, which therefore never overflows.
 */
#define CTX_BLOCKS	512
#define SQ_DEPTH	(CTRL_SLOTS + CTX_BLOCKS)
/*
 * XUD may complete twice the send queue's depth (WQEs leave the ring when
 * admitted, xud.rst "Send resources"), and every receive completes.
 */
#define CQ_DEPTH	(2 * SQ_DEPTH + RECVS + 64)
/*
 * Block WRITEs in flight to one member: XUD lets one source hold four
 * receives with unfinished multi-packet WRITE_IMMs at a receiver
 * (CLAIMS_PROVEN, xud.rst "Receive resources"); more would only be
 * refused with RNR NAKs and resent.
 */
#define WINDOW_PEER	4
/* ... and from one member in all. */
#define WINDOW_GROUP	16
/* JOINs kept for groups this context has not made yet. */
#define STASH		256
#define HEARTBEAT_MS	250

enum msg_type {
	M_JOIN = 1,
	M_BEGIN,
	M_READY,
	M_DONE,
	M_FAIL,
	M_HEARTBEAT,
	M_BYE,
};

/* A control message, big-endian on the wire. */
struct wire_msg {
	uint32_t magic;
	uint8_t type;
	uint8_t group;
	uint16_t from;		/* the sender's rank */
	uint32_t seq;		/* BEGIN, READY, DONE: the transfer; FAIL: the failed
				 * rank; BYE: the last transfer completed here */
	uint32_t rkey;		/* JOIN: the sender's buffer, for those who write to it */
	uint64_t addr;
	uint64_t len;		/* JOIN: the buffer's length; BEGIN: the object's */
	uint64_t params;	/* JOIN: hash of the group's attributes */
	uint8_t digest[BLAKE2S_OUT];	/* BEGIN: the object's BLAKE2s-256 */
};

/*
 * A send's wr_id: what it was, for whom. Control slots return to the
 * context whatever became of the group; the group's generation tells a
 * completion of a destroyed group from one of a new group with its id.
 */
enum send_kind { K_CTRL = 1, K_BLOCK, K_HEARTBEAT };

static uint64_t wr_id_of(int kind, uint8_t id, uint8_t gen, unsigned int rank, uint32_t index)
{
	return (uint64_t)kind << 56 | (uint64_t)rank << 48 | (uint64_t)gen << 40 |
	       (uint64_t)id << 32 | index;
}

#define WR_KIND(w)	((int)((w) >> 56))
#define WR_RANK(w)	((unsigned int)((w) >> 48) & 0xff)
#define WR_GEN(w)	((uint8_t)((w) >> 40))
#define WR_ID(w)	((uint8_t)((w) >> 32))
#define WR_INDEX(w)	((uint32_t)(w))

/* The immediate of a block: group, transfer (its low 4 bits), block. */
static uint32_t imm_of(uint8_t id, uint32_t seq, uint32_t block)
{
	return (uint32_t)id << 24 | (seq & 0xf) << 20 | block;
}

enum peer_state { S_LIVE, S_FAILED, S_LEFT };

struct peer {
	union ibv_gid gid;
	uint32_t qpn;
	struct ibv_ah *ah;
	/* Its buffer, from its JOIN: rkey 0 unless we may write to it. */
	uint64_t addr, len;
	uint32_t rkey;
	int joined;
	enum peer_state state;
	int hb_out;
	long long hb_next;
	unsigned int sends_out, blocks_out;
	uint32_t ready, done;		/* the transfer it said READY / DONE for */
};

enum phase {
	P_IDLE,
	P_BEGUN,	/* root: BEGIN sent, READYs awaited */
	P_RUNNING,	/* blocks move */
	P_DONE,		/* member: complete, its callback (then DONE) due */
};

struct rdmc_group {
	struct rdmc_ctx *ctx;
	uint8_t id, gen;
	unsigned int n, rank, root;
	enum rdmc_algorithm alg;
	uint32_t bs;
	uint8_t *buf;
	size_t len;
	struct ibv_mr *mr;
	uint32_t rkey;		/* the key our JOINs gave (the MR's, re-registered or not) */
	int open;		/* the buffer takes remote writes */
	unsigned int hb_ms;
	rdmc_complete_fn complete;
	rdmc_failed_fn failed_cb;
	void *arg;
	uint64_t params;
	struct peer *peers;
	int failed, self_failed, mismatch, destroying;

	/* The transfer: the latest, or the one under way. */
	uint32_t seq, last_done;
	uint64_t size;
	uint8_t digest[BLAKE2S_OUT];	/* the object's, from the root */
	enum phase phase;
	struct rdmc_plan plan;
	uint8_t *have;
	uint32_t received, next_send, sends_done;
	unsigned int blocks_out, n_ready, n_done;
	struct rdmc_stats st;
};

enum event_type { EV_COMPLETE, EV_FAILED };

struct event {
	enum event_type type;
	uint8_t id, gen;
	uint32_t seq;		/* EV_COMPLETE: the transfer; EV_FAILED: the rank */
	uint64_t size;
};

/* A control message waiting for a send slot. */
struct pending {
	struct pending *next;
	uint8_t id, gen;
	unsigned int to;
	int kind;
	struct wire_msg m;
};

struct stashed {
	union ibv_gid gid;
	uint32_t qpn;
	struct wire_msg m;
};

struct rdmc_ctx {
	struct ibv_context *vctx;
	struct ibv_pd *pd;
	struct ibv_comp_channel *chan;
	struct ibv_cq *cq;
	struct ibv_qp *qp;
	struct ibv_qp_ex *qpx;
	union ibv_gid gid;
	int gid_index;
	uint8_t *slots;			/* RECVS receive slots, then CTRL_SLOTS send slots */
	struct ibv_mr *slots_mr;
	uint32_t free_slot[CTRL_SLOTS];
	unsigned int n_free;
	unsigned int blocks_out;
	struct pending *pend_head, *pend_tail;
	struct rdmc_group *groups[256];
	uint8_t gen;
	struct stashed stash[STASH];
	unsigned int n_stash;
	struct event *events;
	unsigned int n_events, cap_events, ev_head;
	int armed;
	int broken;			/* errno of what broke the QP, 0 if it works */
	unsigned int n_groups;
};

static long long now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1000LL + ts.tv_nsec / 1000000;
}

/* --- schedules --- */

static const char *const alg_names[] = {
	[RDMC_SEQUENTIAL] = "seq",
	[RDMC_CHAIN] = "chain",
	[RDMC_TREE] = "tree",
	[RDMC_PIPELINE] = "pipeline",
};

int rdmc_algorithm_parse(const char *name)
{
	for (int a = 0; a <= RDMC_PIPELINE; a++)
		if (!strcmp(name, alg_names[a]))
			return a;
	return -1;
}

const char *rdmc_algorithm_name(enum rdmc_algorithm a)
{
	return (unsigned int)a <= RDMC_PIPELINE ? alg_names[a] : "?";
}

static unsigned int ilog2(unsigned int v)
{
	return 31 - __builtin_clz(v);
}

struct edge {
	unsigned int from, to;
};

/* A transfer a pipeline step makes. */
struct pick {
	unsigned int s, r;
	uint32_t b;
};

/*
 * The pipeline's twin of hypercube vertex @v, or -1. With n members, not
 * a power of two, the hypercube has m = 2^floor(log2 n) vertices and the
 * n - m others are twins of the highest vertices (the root, vertex 0,
 * never has one): a vertex and its twin share the vertex's place.
 */
static int twin_of(unsigned int n, unsigned int v)
{
	unsigned int m = 1u << ilog2(n), extra = n - m;

	return v >= m - extra && v < m ? (int)(m + (m - 1 - v)) : -1;
}

/*
 * The binomial pipeline's transfers of step @t (virtual ranks: the root
 * is 0): each node sends at most one block and receives at most one.
 * Vertices pair up along dimension t mod d of the hypercube (the paper's
 * schedule: every node sends and receives a block each step). A pair
 * with a twin becomes a cycle through it (a pair with two, a cycle of
 * four), so that a twin sends and receives as often as its vertex. The
 * cycles keep one direction: flipping it every step cost up to 12% more
 * steps at 40 to 60 members; as it is, every group of 2 to 64 members
 * takes at most 4 steps more than nblocks + ceil(log2 n) - 1 (tried with
 * 1 to 1024 blocks; rxud-mcast -P). Writes @e, returns the count.
 */
static unsigned int pipe_edges(unsigned int n, uint32_t t, struct edge *e)
{
	unsigned int d = ilog2(n), m = 1u << d, k = t % d, c = 0;

#define EDGE(f, r) (e[c++] = (struct edge){ (unsigned int)(f), (unsigned int)(r) })
	for (unsigned int a = 0; a < m; a++) {
		unsigned int b = a ^ (1u << k);
		int x = twin_of(n, a), y = twin_of(n, b);

		if (b < a)
			continue;
		if (x < 0 && y < 0) {
			EDGE(a, b);
			EDGE(b, a);
		} else if (x >= 0 && y >= 0) {
			EDGE(a, b);
			EDGE(b, x);
			EDGE(x, y);
			EDGE(y, a);
		} else {
			/* u: the vertex with the twin w; v: the one without */
			unsigned int u = x >= 0 ? a : b, v = x >= 0 ? b : a;
			int w = x >= 0 ? x : y;

			EDGE(v, u);
			EDGE(u, w);
			EDGE(w, v);
		}
	}
#undef EDGE
	return c;
}

/* The newest block @s holds that @r lacks, or -1. */
static long newest_missing(const uint64_t *hs, const uint64_t *hr, uint32_t top_s)
{
	for (uint32_t w = (top_s + 63) / 64; w-- > 0;) {
		uint64_t m = hs[w] & ~hr[w];

		if (m)
			return (long)w * 64 + 63 - __builtin_clzll(m);
	}
	return -1;
}

/*
 * The binomial pipeline, computed by running its synchronous steps for
 * every node: the root sends block t at step t, every other node the
 * newest block it holds that its partner lacks. On a hypercube (n a power
 * of two) that takes nblocks + log2(n) - 1 steps, the least there can be
 * when each node receives one block a step. @me is virtual; so are the
 * ranks written to @p (the caller maps them).
 */
static int plan_pipeline(struct rdmc_plan *p, unsigned int n, unsigned int me, uint32_t nb)
{
	uint32_t words = (nb + 63) / 64, *cnt, *top, limit = nb + 8 * n + 64;
	uint64_t *have = calloc((size_t)n * words, sizeof(uint64_t));
	struct edge *e = malloc(2 * n * sizeof(*e));
	struct pick *pick = malloc(2 * n * sizeof(*pick));
	unsigned int left = n - 1;
	int ret = -1;

	cnt = calloc(n, sizeof(*cnt));
	top = calloc(n, sizeof(*top));
	p->sends = malloc((size_t)limit * sizeof(*p->sends));
	if (!have || !e || !pick || !cnt || !top || !p->sends) {
		errno = ENOMEM;
		goto out;
	}
	for (uint32_t b = 0; b < nb; b++)
		have[b / 64] |= 1ULL << (b % 64);
	cnt[0] = top[0] = nb;
	for (uint32_t t = 0; left; t++) {
		unsigned int ne = pipe_edges(n, t, e), np = 0;

		if (t >= limit) {
			/* A schedule that would not end: never seen (rxud-mcast -P). */
			errno = EDEADLK;
			goto out;
		}
		for (unsigned int i = 0; i < ne; i++) {
			uint64_t *hs = have + (size_t)e[i].from * words;
			uint64_t *hr = have + (size_t)e[i].to * words;
			long b;

			if (e[i].to == 0)
				continue;
			if (e[i].from == 0 && t < nb && !(hr[t / 64] & 1ULL << (t % 64)))
				b = t;
			else
				b = newest_missing(hs, hr, top[e[i].from]);
			if (b >= 0)
				pick[np++] = (struct pick){ e[i].from, e[i].to, (uint32_t)b };
		}
		for (unsigned int i = 0; i < np; i++) {
			uint64_t *hr = have + (size_t)pick[i].r * words;

			hr[pick[i].b / 64] |= 1ULL << (pick[i].b % 64);
			if (pick[i].b + 1 > top[pick[i].r])
				top[pick[i].r] = pick[i].b + 1;
			if (++cnt[pick[i].r] == nb)
				left--;
			if (pick[i].s == me) {
				p->sends[p->n_sends].to = pick[i].r;
				p->sends[p->n_sends++].block = pick[i].b;
			}
			if (pick[i].r == me)
				p->from[pick[i].b] = (int32_t)pick[i].s;
		}
		p->steps = t + 1;
	}
	ret = 0;
out:
	free(have);
	free(e);
	free(pick);
	free(cnt);
	free(top);
	return ret;
}

static int add_sends(struct rdmc_plan *p, uint32_t to, uint32_t nb)
{
	struct rdmc_plan_send *s = realloc(p->sends, ((size_t)p->n_sends + nb) * sizeof(*s));

	if (!s) {
		errno = ENOMEM;
		return -1;
	}
	p->sends = s;
	for (uint32_t b = 0; b < nb; b++)
		p->sends[p->n_sends++] = (struct rdmc_plan_send){ to, b };
	return 0;
}

int rdmc_plan(struct rdmc_plan *p, enum rdmc_algorithm a, unsigned int n, unsigned int root,
	      unsigned int rank, uint32_t nb)
{
	unsigned int me = (rank + n - root) % n;
	int ret = 0;

	memset(p, 0, sizeof(*p));
	if (n < 2 || n > RDMC_MAX_MEMBERS || root >= n || rank >= n || nb < 1 ||
	    nb > RDMC_MAX_BLOCKS || (unsigned int)a > RDMC_PIPELINE) {
		errno = EINVAL;
		return -1;
	}
	p->nblocks = nb;
	p->from = malloc(nb * sizeof(*p->from));
	if (!p->from) {
		errno = ENOMEM;
		return -1;
	}
	for (uint32_t b = 0; b < nb; b++)
		p->from[b] = -1;
	switch (a) {
	case RDMC_SEQUENTIAL:
		for (unsigned int v = 1; me == 0 && v < n && !ret; v++)
			ret = add_sends(p, v, nb);
		for (uint32_t b = 0; me && b < nb; b++)
			p->from[b] = 0;
		break;
	case RDMC_CHAIN:
		if (me + 1 < n)
			ret = add_sends(p, me + 1, nb);
		for (uint32_t b = 0; me && b < nb; b++)
			p->from[b] = (int32_t)me - 1;
		break;
	case RDMC_TREE:
		/*
		 * Step j: every node that has the object sends all of it to
		 * the node 2^j above it; node v's parent is v less its top
		 * bit. A node forwards only once it has every block.
		 */
		p->whole_first = 1;
		for (unsigned int s = me ? 2u << ilog2(me) : 1; me + s < n && !ret; s <<= 1)
			ret = add_sends(p, me + s, nb);
		for (uint32_t b = 0; me && b < nb; b++)
			p->from[b] = (int32_t)(me - (1u << ilog2(me)));
		break;
	case RDMC_PIPELINE:
		ret = plan_pipeline(p, n, me, nb);
		break;
	}
	if (ret) {
		int e = errno;

		rdmc_plan_free(p);
		errno = e;
		return -1;
	}
	/* Virtual ranks to real ones. */
	for (uint32_t i = 0; i < p->n_sends; i++)
		p->sends[i].to = (p->sends[i].to + root) % n;
	for (uint32_t b = 0; b < nb; b++)
		if (p->from[b] >= 0)
			p->from[b] = (int32_t)(((unsigned int)p->from[b] + root) % n);
	return 0;
}

void rdmc_plan_free(struct rdmc_plan *p)
{
	free(p->from);
	free(p->sends);
	memset(p, 0, sizeof(*p));
}

/*
 * The members whose schedules may have them write into member @rank's
 * buffer, whatever the object's size: only they get its rkey. A mask of
 * ranks (RDMC_MAX_MEMBERS is 64).
 */
static uint64_t writers_of(enum rdmc_algorithm a, unsigned int n, unsigned int root,
			   unsigned int rank)
{
	unsigned int me = (rank + n - root) % n;
	uint64_t mask = 0, real = 0;

	if (!me)
		return 0;
	switch (a) {
	case RDMC_SEQUENTIAL:
		mask = 1ULL << 0;
		break;
	case RDMC_CHAIN:
		mask = 1ULL << (me - 1);
		break;
	case RDMC_TREE:
		mask = 1ULL << (me - (1u << ilog2(me)));
		break;
	case RDMC_PIPELINE: {
		/* The edges repeat every d steps. */
		struct edge e[2 * RDMC_MAX_MEMBERS];
		unsigned int d = ilog2(n);

		for (uint32_t t = 0; t < d; t++) {
			unsigned int ne = pipe_edges(n, t, e);

			for (unsigned int i = 0; i < ne; i++)
				if (e[i].to == me)
					mask |= 1ULL << e[i].from;
		}
		break;
	}
	}
	/* Virtual ranks to real ones. */
	for (unsigned int v = 0; v < n; v++)
		if (mask & 1ULL << v)
			real |= 1ULL << ((v + root) % n);
	return real;
}

/* --- the context --- */

static uint8_t *recv_slot(struct rdmc_ctx *c, uint32_t i)
{
	return c->slots + (size_t)i * SLOT;
}

static uint8_t *send_slot(struct rdmc_ctx *c, uint32_t i)
{
	return c->slots + (size_t)(RECVS + i) * SLOT;
}

static struct rdmc_group *group_of(struct rdmc_ctx *c, uint8_t id, uint8_t gen)
{
	struct rdmc_group *g = c->groups[id];

	return g && g->gen == gen ? g : NULL;
}

static int post_recv(struct rdmc_ctx *c, uint32_t i)
{
	struct ibv_sge sge = { (uintptr_t)recv_slot(c, i), SLOT, c->slots_mr->lkey };
	struct ibv_recv_wr wr = { .wr_id = i, .sg_list = &sge, .num_sge = 1 }, *bad;
	int err = ibv_post_recv(c->qp, &wr, &bad);

	if (err) {
		errno = err;
		return -1;
	}
	return 0;
}

static void push_event(struct rdmc_ctx *c, struct rdmc_group *g, enum event_type type,
		       uint32_t seq, uint64_t size)
{
	if (c->n_events == c->cap_events) {
		unsigned int cap = c->cap_events ? 2 * c->cap_events : 16;
		struct event *e = realloc(c->events, cap * sizeof(*e));

		if (!e) {
			/* No room to tell: the group is lost to this member. */
			c->broken = ENOMEM;
			return;
		}
		c->events = e;
		c->cap_events = cap;
	}
	c->events[c->n_events++] = (struct event){ type, g->id, g->gen, seq, size };
}

static void fail_member(struct rdmc_group *g, unsigned int r);

/* The QP broke (or memory ran out): every group fails here. */
static void break_ctx(struct rdmc_ctx *c, int err)
{
	if (!c->broken)
		c->broken = err;
	for (int i = 0; i < 256; i++)
		if (c->groups[i])
			fail_member(c->groups[i], c->groups[i]->rank);
}

static void msg_to_wire(struct wire_msg *w, const struct wire_msg *m)
{
	w->magic = htobe32(m->magic);
	w->type = m->type;
	w->group = m->group;
	w->from = htobe16(m->from);
	w->seq = htobe32(m->seq);
	w->rkey = htobe32(m->rkey);
	w->addr = htobe64(m->addr);
	w->len = htobe64(m->len);
	w->params = htobe64(m->params);
	memcpy(w->digest, m->digest, sizeof(w->digest));
}

static void msg_from_wire(struct wire_msg *m, const struct wire_msg *w)
{
	m->magic = be32toh(w->magic);
	m->type = w->type;
	m->group = w->group;
	m->from = be16toh(w->from);
	m->seq = be32toh(w->seq);
	m->rkey = be32toh(w->rkey);
	m->addr = be64toh(w->addr);
	m->len = be64toh(w->len);
	m->params = be64toh(w->params);
	memcpy(m->digest, w->digest, sizeof(m->digest));
}

/* Sends @m to member @to from a free slot; 0, or -1 if the QP broke. */
static int send_now(struct rdmc_ctx *c, struct rdmc_group *g, unsigned int to, int kind,
		    const struct wire_msg *m)
{
	struct peer *p = &g->peers[to];
	uint32_t s = c->free_slot[--c->n_free];
	int err;

	msg_to_wire((struct wire_msg *)send_slot(c, s), m);
	ibv_wr_start(c->qpx);
	c->qpx->wr_id = wr_id_of(kind, g->id, g->gen, to, s);
	c->qpx->wr_flags = IBV_SEND_SIGNALED;
	ibv_wr_send(c->qpx);
	ibv_wr_set_ud_addr(c->qpx, p->ah, p->qpn, QKEY);
	ibv_wr_set_sge(c->qpx, c->slots_mr->lkey, (uintptr_t)send_slot(c, s), sizeof(*m));
	err = ibv_wr_complete(c->qpx);
	if (err) {
		c->free_slot[c->n_free++] = s;
		break_ctx(c, err);
		return -1;
	}
	p->sends_out++;
	if (kind == K_HEARTBEAT) {
		p->hb_out = 1;
		g->st.heartbeats++;
	}
	return 0;
}

/*
 * Sends control message @type to member @to (if it is live), from a free
 * slot, or queued until one frees.
 */
static void send_ctrl(struct rdmc_group *g, unsigned int to, int type, uint32_t seq)
{
	struct rdmc_ctx *c = g->ctx;
	struct wire_msg m = {
		.magic = MAGIC, .type = type, .group = g->id, .from = g->rank, .seq = seq,
	};
	struct pending *q;

	if (g->peers[to].state != S_LIVE || to == g->rank || c->broken)
		return;
	if (type == M_JOIN) {
		m.len = g->len;
		m.params = g->params;
		if (writers_of(g->alg, g->n, g->root, g->rank) & 1ULL << to) {
			m.addr = (uintptr_t)g->buf;
			m.rkey = g->rkey;
		}
	} else if (type == M_BEGIN) {
		m.len = g->size;
		memcpy(m.digest, g->digest, sizeof(m.digest));
	}
	if (c->n_free && !c->pend_head) {
		send_now(c, g, to, K_CTRL, &m);
		return;
	}
	q = malloc(sizeof(*q));
	if (!q) {
		break_ctx(c, ENOMEM);
		return;
	}
	*q = (struct pending){ NULL, g->id, g->gen, to, K_CTRL, m };
	if (c->pend_tail)
		c->pend_tail->next = q;
	else
		c->pend_head = q;
	c->pend_tail = q;
}

/* Sends what waited for slots, in order, while slots last. */
static void flush_pending(struct rdmc_ctx *c)
{
	while (c->pend_head && c->n_free && !c->broken) {
		struct pending *q = c->pend_head;
		struct rdmc_group *g = group_of(c, q->id, q->gen);

		c->pend_head = q->next;
		if (!c->pend_head)
			c->pend_tail = NULL;
		if (g && g->peers[q->to].state == S_LIVE)
			send_now(c, g, q->to, q->kind, &q->m);
		free(q);
	}
}

/*
 * Member @r failed (or, @r our own rank, this member did): the group
 * stops, the application hears of it, and so does every other live
 * member, each of which tells the others in turn (RDMC relays failure
 * notices: the one who saw it may die before its notices are out).
 */
static void fail_member(struct rdmc_group *g, unsigned int r)
{
	if (r == g->rank) {
		if (g->self_failed)
			return;
		g->self_failed = 1;
	} else {
		if (g->peers[r].state != S_LIVE)
			return;
		g->peers[r].state = S_FAILED;
	}
	g->failed = 1;
	push_event(g->ctx, g, EV_FAILED, r, 0);
	if (r == g->rank)
		return;
	for (unsigned int q = 0; q < g->n; q++)
		if (q != r)
			send_ctrl(g, q, M_FAIL, r);
}

/*
 * Gives the buffer remote write access (@open) or takes it away, keeping
 * its key: 0, or -1 if the provider cannot (the member then fails).
 */
static int set_open(struct rdmc_group *g, int open)
{
	int access = IBV_ACCESS_LOCAL_WRITE | (open ? IBV_ACCESS_REMOTE_WRITE : 0);

	if (g->open == open)
		return 0;
	if (ibv_rereg_mr(g->mr, IBV_REREG_MR_CHANGE_ACCESS, NULL, NULL, 0, access) ||
	    g->mr->rkey != g->rkey)
		return -1;
	g->open = open;
	return 0;
}

/*
 * This member cannot take the transfer (its copy is not the root's, or
 * its buffer would not open or close): every member hears that it
 * failed, and the group stops.
 */
static void refuse_transfer(struct rdmc_group *g)
{
	for (unsigned int q = 0; q < g->n; q++)
		send_ctrl(g, q, M_FAIL, g->rank);
	fail_member(g, g->rank);
}

/*
 * Every block is here: the buffer closes to remote writes, then the
 * copy must be the root's object, byte for byte, or it is refused.
 */
static void seal_copy(struct rdmc_group *g)
{
	uint8_t d[BLAKE2S_OUT];

	if (set_open(g, 0)) {
		refuse_transfer(g);
		return;
	}
	blake2s256(g->buf, g->size, d);
	if (memcmp(d, g->digest, sizeof(d))) {
		g->st.copies_refused++;
		refuse_transfer(g);
	}
}

/* The transfer is complete here: the callback, and at a member DONE after it. */
static void check_complete(struct rdmc_group *g)
{
	if (g->failed || g->phase != P_RUNNING || g->sends_done < g->plan.n_sends)
		return;
	if (g->rank == g->root) {
		if (g->n_done < g->n - 1)
			return;
		g->phase = P_IDLE;
		g->last_done = g->seq;
	} else {
		if (g->received < g->plan.nblocks)
			return;
		g->phase = P_DONE;
	}
	push_event(g->ctx, g, EV_COMPLETE, g->seq, g->size);
}

static uint32_t block_len(const struct rdmc_group *g, uint32_t b)
{
	uint64_t off = (uint64_t)b * g->bs;

	return (uint32_t)(g->size - off < g->bs ? g->size - off : g->bs);
}

/* Plans transfer @seq of @size bytes; 0, or -1 with errno. */
static int start_transfer(struct rdmc_group *g, uint32_t seq, uint64_t size)
{
	uint64_t nb = (size + g->bs - 1) / g->bs;

	if (!size || size > g->len || nb > RDMC_MAX_BLOCKS) {
		errno = EMSGSIZE;
		return -1;
	}
	rdmc_plan_free(&g->plan);
	if (rdmc_plan(&g->plan, g->alg, g->n, g->root, g->rank, (uint32_t)nb))
		return -1;
	free(g->have);
	g->have = calloc(nb, 1);
	if (!g->have) {
		errno = ENOMEM;
		return -1;
	}
	g->seq = seq;
	g->size = size;
	g->received = g->next_send = g->sends_done = 0;
	g->n_ready = g->n_done = 0;
	return 0;
}

static void post_blocks(struct rdmc_group *g)
{
	struct rdmc_ctx *c = g->ctx;

	while (!g->failed && !g->destroying && g->phase == P_RUNNING &&
	       g->next_send < g->plan.n_sends) {
		const struct rdmc_plan_send *s = &g->plan.sends[g->next_send];
		struct peer *p = &g->peers[s->to];
		uint64_t off = (uint64_t)s->block * g->bs;
		uint32_t len = block_len(g, s->block);
		int err;

		if (p->state != S_LIVE || g->blocks_out >= WINDOW_GROUP ||
		    p->blocks_out >= WINDOW_PEER || c->blocks_out >= CTX_BLOCKS)
			return;
		if (g->rank != g->root &&
		    (g->plan.whole_first ? g->received < g->plan.nblocks : !g->have[s->block]))
			return;
		if (!p->rkey || off + len > p->len) {
			/* Its JOIN gave us no room to write this block: a bug. */
			fail_member(g, g->rank);
			return;
		}
		ibv_wr_start(c->qpx);
		c->qpx->wr_id = wr_id_of(K_BLOCK, g->id, g->gen, s->to, s->block);
		c->qpx->wr_flags = IBV_SEND_SIGNALED;
		ibv_wr_rdma_write_imm(c->qpx, p->rkey, p->addr + off,
				      htonl(imm_of(g->id, g->seq, s->block)));
		ibv_wr_set_ud_addr(c->qpx, p->ah, p->qpn, QKEY);
		ibv_wr_set_sge(c->qpx, g->mr->lkey, (uintptr_t)(g->buf + off), len);
		err = ibv_wr_complete(c->qpx);
		if (err) {
			break_ctx(c, err);
			return;
		}
		g->next_send++;
		g->blocks_out++;
		p->blocks_out++;
		p->sends_out++;
		c->blocks_out++;
	}
}

/* The source GID of a SEND, from its GRH (UD's layout: an IPv4 header in
 * the last 20 bytes, or an IPv6 header in all 40). */
static void grh_source(const uint8_t *grh, union ibv_gid *gid)
{
	memset(gid, 0, sizeof(*gid));
	if (grh[0] >> 4 == 6) {
		memcpy(gid->raw, grh + 8, 16);
	} else {
		gid->raw[10] = gid->raw[11] = 0xff;
		memcpy(&gid->raw[12], grh + 20 + 12, 4);
	}
}

static void on_msg(struct rdmc_group *g, const struct wire_msg *m, const union ibv_gid *src,
		   uint32_t src_qp)
{
	struct peer *p;

	/* Only a member may speak for itself: its rank, GID and QP number. */
	if (m->from >= g->n || m->from == g->rank) {
		g->st.ctrl_refused++;
		return;
	}
	p = &g->peers[m->from];
	if (p->qpn != src_qp || memcmp(&p->gid, src, sizeof(*src))) {
		g->st.ctrl_refused++;
		return;
	}
	if (p->state == S_FAILED)
		return;
	/* A stopped group takes only news of members; what a member sent
	 * before it learnt of the failure is no one's fault. */
	if (g->failed && m->type != M_FAIL && m->type != M_BYE)
		return;
	switch (m->type) {
	case M_JOIN:
		if (m->params != g->params) {
			g->mismatch = 1;
			return;
		}
		p->addr = m->addr;
		p->rkey = m->rkey;
		p->len = m->len;
		p->joined = 1;
		break;
	case M_BEGIN:
		if (m->from != g->root || g->phase != P_IDLE ||
		    m->seq != g->last_done + 1 || start_transfer(g, m->seq, m->len)) {
			g->st.ctrl_refused++;
			return;
		}
		memcpy(g->digest, m->digest, sizeof(g->digest));
		if (set_open(g, 1)) {
			refuse_transfer(g);
			return;
		}
		g->phase = P_RUNNING;
		send_ctrl(g, g->root, M_READY, m->seq);
		break;
	case M_READY:
		if (g->rank != g->root || g->phase != P_BEGUN || m->seq != g->seq ||
		    p->ready == m->seq) {
			g->st.ctrl_refused++;
			return;
		}
		p->ready = m->seq;
		if (++g->n_ready == g->n - 1)
			g->phase = P_RUNNING;
		break;
	case M_DONE:
		if (g->rank != g->root || g->phase != P_RUNNING || m->seq != g->seq ||
		    p->done == m->seq) {
			g->st.ctrl_refused++;
			return;
		}
		p->done = m->seq;
		g->n_done++;
		check_complete(g);
		break;
	case M_FAIL:
		if (m->seq >= g->n) {
			g->st.ctrl_refused++;
			return;
		}
		fail_member(g, m->seq);
		break;
	case M_HEARTBEAT:
		break;
	case M_BYE:
		/*
		 * Leaving is fine between transfers, or once it completed the
		 * one under way (it holds every block, and its sends are all
		 * acknowledged: no one needs it). Else it is a failure.
		 */
		if (!g->failed && g->phase != P_IDLE && m->seq < g->seq)
			fail_member(g, m->from);
		else
			p->state = S_LEFT;
		break;
	default:
		g->st.ctrl_refused++;
	}
}

/* A JOIN for a group not made here yet: kept until it is. */
static void stash_join(struct rdmc_ctx *c, const struct wire_msg *m, const union ibv_gid *src,
		       uint32_t src_qp)
{
	unsigned int i;

	for (i = 0; i < c->n_stash; i++)
		if (c->stash[i].m.group == m->group && c->stash[i].m.from == m->from)
			break;
	if (i == STASH)
		return;
	if (i == c->n_stash)
		c->n_stash++;
	c->stash[i] = (struct stashed){ *src, src_qp, *m };
}

static void on_send_msg(struct rdmc_ctx *c, const struct ibv_wc *wc, const uint8_t *slot)
{
	struct wire_msg m;
	union ibv_gid src;
	struct rdmc_group *g;

	if (wc->byte_len != GRH + sizeof(m))
		return;
	msg_from_wire(&m, (const struct wire_msg *)(slot + GRH));
	if (m.magic != MAGIC)
		return;
	grh_source(slot, &src);
	g = c->groups[m.group];
	if (g && !g->destroying) {
		on_msg(g, &m, &src, wc->src_qp);
		return;
	}
	/* A JOIN may come before its group is made here, or while an old
	 * group of that number is still leaving. */
	if (m.type == M_JOIN)
		stash_join(c, &m, &src, wc->src_qp);
}

/*
 * A block arrived (XUD completes a WRITE_IMM only once all of it is
 * placed). Accepted only if it is the transfer under way, a block of it
 * not yet here, of its length, and from the member the schedule has
 * sending it here.
 */
static void on_block(struct rdmc_ctx *c, const struct ibv_wc *wc)
{
	uint32_t imm = ntohl(wc->imm_data), b = imm & 0xfffff;
	struct rdmc_group *g = c->groups[imm >> 24];
	int32_t from;

	/* After a failure, blocks still on their way are no one's fault. */
	if (!g || g->destroying || g->failed)
		return;
	if (!(wc->wc_flags & IBV_WC_WITH_IMM) || g->phase != P_RUNNING ||
	    g->rank == g->root || ((imm >> 20) & 0xf) != (g->seq & 0xf) ||
	    b >= g->plan.nblocks || g->have[b] || wc->byte_len != block_len(g, b)) {
		g->st.blocks_refused++;
		return;
	}
	from = g->plan.from[b];
	if (from < 0 || g->peers[from].qpn != wc->src_qp || g->peers[from].state != S_LIVE) {
		g->st.blocks_refused++;
		return;
	}
	g->have[b] = 1;
	g->received++;
	g->st.blocks_received++;
	if (g->received == g->plan.nblocks)
		seal_copy(g);
	check_complete(g);
}

static void on_recv(struct rdmc_ctx *c, const struct ibv_wc *wc)
{
	uint32_t slot = (uint32_t)wc->wr_id;

	if (wc->status == IBV_WC_SUCCESS) {
		if (wc->opcode == IBV_WC_RECV_RDMA_WITH_IMM)
			on_block(c, wc);
		else if (wc->opcode == IBV_WC_RECV)
			on_send_msg(c, wc, recv_slot(c, slot));
	}
	/* A receive in error (a WRITE_IMM its dead sender abandoned) is
	 * reposted as any: a dead sender is the heartbeats' to find. */
	if (post_recv(c, slot))
		break_ctx(c, errno);
}

static int remote_status(enum ibv_wc_status s)
{
	/*
	 * What XUD says of a destination that did not acknowledge
	 * (RETRY_EXC_ERR, RNR_RETRY_EXC_ERR), refused to take a block
	 * (REM_*: it left and deregistered its buffer), or stalled
	 * (LOC_QP_OP_ERR: posts beyond a stalled destination's share; RDMC
	 * keeps well below the shares of live ones). The rest is ours.
	 */
	switch (s) {
	case IBV_WC_RETRY_EXC_ERR:
	case IBV_WC_RNR_RETRY_EXC_ERR:
	case IBV_WC_REM_ACCESS_ERR:
	case IBV_WC_REM_INV_REQ_ERR:
	case IBV_WC_REM_OP_ERR:
	case IBV_WC_REM_ABORT_ERR:
	case IBV_WC_LOC_QP_OP_ERR:
		return 1;
	default:
		return 0;
	}
}

static void on_send_done(struct rdmc_ctx *c, const struct ibv_wc *wc)
{
	int kind = WR_KIND(wc->wr_id);
	struct rdmc_group *g = group_of(c, WR_ID(wc->wr_id), WR_GEN(wc->wr_id));
	unsigned int r = WR_RANK(wc->wr_id);
	struct peer *p;

	if (kind == K_BLOCK)
		c->blocks_out--;
	else
		c->free_slot[c->n_free++] = WR_INDEX(wc->wr_id);
	if (!g || r >= g->n)
		return;
	p = &g->peers[r];
	p->sends_out--;
	if (kind == K_HEARTBEAT)
		p->hb_out = 0;
	if (kind == K_BLOCK) {
		g->blocks_out--;
		p->blocks_out--;
	}
	if (wc->status == IBV_WC_SUCCESS) {
		if (kind == K_BLOCK) {
			g->sends_done++;
			g->st.blocks_sent++;
			check_complete(g);
		}
		return;
	}
	if (remote_status(wc->status))
		fail_member(g, r);
	else
		break_ctx(c, EIO);
}

/* Takes what the CQ has; the number of completions, or -1. */
static int drain(struct rdmc_ctx *c)
{
	struct ibv_wc wc[32];
	int n, total = 0;

	do {
		n = ibv_poll_cq(c->cq, 32, wc);
		if (n < 0) {
			break_ctx(c, EIO);
			return -1;
		}
		for (int i = 0; i < n; i++) {
			if (wc[i].opcode & IBV_WC_RECV)
				on_recv(c, &wc[i]);
			else
				on_send_done(c, &wc[i]);
		}
		total += n;
	} while (n == 32 && total < 1024);
	return total;
}

/* Heartbeats due, blocks that may go, queued control messages. */
static void service(struct rdmc_ctx *c)
{
	long long t = now_ms();

	flush_pending(c);
	for (int i = 0; i < 256 && !c->broken; i++) {
		struct rdmc_group *g = c->groups[i];

		if (!g)
			continue;
		if (!g->destroying) {
			for (unsigned int r = 0; r < g->n; r++) {
				struct peer *p = &g->peers[r];
				struct wire_msg m = {
					.magic = MAGIC, .type = M_HEARTBEAT, .group = g->id,
					.from = g->rank,
				};

				if (r == g->rank || p->state != S_LIVE || p->hb_out ||
				    t < p->hb_next)
					continue;
				/* One at a time to each: a dead member's fails alone. */
				if (!c->n_free || c->pend_head)
					break;
				p->hb_next = t + g->hb_ms;
				if (send_now(c, g, r, K_HEARTBEAT, &m))
					return;
			}
		}
		post_blocks(g);
	}
}

/* Milliseconds until the next heartbeat is due (at most @cap). */
static int next_due(struct rdmc_ctx *c, int cap)
{
	long long t = now_ms(), due = t + cap;

	for (int i = 0; i < 256; i++) {
		struct rdmc_group *g = c->groups[i];

		for (unsigned int r = 0; g && !g->destroying && r < g->n; r++) {
			struct peer *p = &g->peers[r];

			/* Without a free slot the next completion wakes us. */
			if (r != g->rank && p->state == S_LIVE && !p->hb_out && c->n_free &&
			    p->hb_next < due)
				due = p->hb_next;
		}
	}
	return due > t ? (int)(due - t) : 0;
}

/* Runs the callbacks of what happened; how many ran. */
static int deliver(struct rdmc_ctx *c)
{
	int ran = 0;

	while (c->ev_head < c->n_events) {
		struct event e = c->events[c->ev_head++];
		struct rdmc_group *g = group_of(c, e.id, e.gen);

		if (!g || g->destroying)
			continue;
		if (e.type == EV_FAILED) {
			if (g->failed_cb)
				g->failed_cb(g, e.seq, g->arg);
			ran++;
			continue;
		}
		if (g->complete)
			g->complete(g, e.seq, (size_t)e.size, g->arg);
		ran++;
		/* The buffer is the application's again: a member says DONE. */
		if (g->rank != g->root && !g->failed && g->phase == P_DONE && g->seq == e.seq) {
			g->phase = P_IDLE;
			g->last_done = g->seq;
			send_ctrl(g, g->root, M_DONE, g->seq);
		}
	}
	c->n_events = c->ev_head = 0;
	return ran;
}

/*
 * One round: completions, timers, callbacks; if none of it had anything
 * to do, sleeps on the completion channel up to @wait_ms (less if a
 * heartbeat is due sooner). The callbacks run, or -1 if the QP broke.
 */
static int run_once(struct rdmc_ctx *c, int wait_ms)
{
	struct pollfd pfd = { .fd = c->chan->fd, .events = POLLIN };
	int n, ran;

	n = drain(c);
	service(c);
	ran = deliver(c);
	if (c->broken) {
		errno = c->broken;
		return -1;
	}
	if (n || ran)
		return ran;
	if (!c->armed) {
		/* Arm, then look again: what came before the arming sends no event. */
		if (ibv_req_notify_cq(c->cq, 0)) {
			break_ctx(c, EIO);
			deliver(c);
			errno = EIO;
			return -1;
		}
		c->armed = 1;
		return 0;
	}
	wait_ms = next_due(c, wait_ms);
	if (poll(&pfd, 1, wait_ms) > 0) {
		struct ibv_cq *cq;
		void *cq_ctx;

		if (!ibv_get_cq_event(c->chan, &cq, &cq_ctx)) {
			ibv_ack_cq_events(cq, 1);
			c->armed = 0;
		}
	}
	return 0;
}

int rdmc_progress(struct rdmc_ctx *c, int timeout_ms)
{
	long long end = now_ms() + (timeout_ms > 0 ? timeout_ms : 0);

	for (;;) {
		long long left = end - now_ms();
		int ran = run_once(c, left > 0 ? (int)left : 0);

		if (ran || left <= 0)
			return ran;
	}
}

static struct ibv_qp *xud_qp(struct rdmc_ctx *c, const struct rdmc_ctx_attr *attr)
{
	struct ibv_qp_init_attr_ex a = {
		.qp_type = IBV_QPT_DRIVER,
		.comp_mask = IBV_QP_INIT_ATTR_PD | IBV_QP_INIT_ATTR_SEND_OPS_FLAGS,
		.pd = c->pd, .send_cq = c->cq, .recv_cq = c->cq,
		.cap = { .max_send_wr = SQ_DEPTH, .max_recv_wr = RECVS, .max_send_sge = 1,
			 .max_recv_sge = 1 },
		.send_ops_flags = IBV_QP_EX_WITH_SEND | IBV_QP_EX_WITH_RDMA_WRITE_WITH_IMM,
	};
	struct rxudv_qp_init_attr xa = { .comp_mask = 0 };
	struct ibv_qp_attr qa = { .qp_state = IBV_QPS_INIT, .port_num = 1, .qkey = QKEY };
	struct ibv_qp *qp = rxudv_create_qp(c->vctx, &a, &xa, sizeof(xa));
	int err;

	if (!qp)
		return NULL;
	err = ibv_modify_qp(qp, &qa, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_QKEY);
	if (!err) {
		qa.qp_state = IBV_QPS_RTR;
		err = ibv_modify_qp(qp, &qa, IBV_QP_STATE);
	}
	if (!err) {
		qa.qp_state = IBV_QPS_RTS;
		qa.timeout = attr && attr->timeout ? attr->timeout : 14;
		qa.retry_cnt = attr && attr->retry_cnt ? attr->retry_cnt : 4;
		err = ibv_modify_qp(qp, &qa, IBV_QP_STATE | IBV_QP_SQ_PSN | IBV_QP_TIMEOUT |
				    IBV_QP_RETRY_CNT);
	}
	if (err) {
		ibv_destroy_qp(qp);
		errno = err;
		return NULL;
	}
	return qp;
}

static void ctx_free(struct rdmc_ctx *c)
{
	if (c->qp)
		ibv_destroy_qp(c->qp);
	if (c->cq)
		ibv_destroy_cq(c->cq);
	if (c->chan)
		ibv_destroy_comp_channel(c->chan);
	if (c->slots_mr)
		ibv_dereg_mr(c->slots_mr);
	if (c->pd)
		ibv_dealloc_pd(c->pd);
	if (c->vctx)
		ibv_close_device(c->vctx);
	while (c->pend_head) {
		struct pending *q = c->pend_head;

		c->pend_head = q->next;
		free(q);
	}
	free(c->slots);
	free(c->events);
	free(c);
}

/* errno of the call that just failed, EIO if it left none. */
static int failed_errno(void)
{
	return errno ? errno : EIO;
}

struct rdmc_ctx *rdmc_open(const char *device, int gid_index, const struct rdmc_ctx_attr *attr)
{
	struct rdmc_ctx *c = calloc(1, sizeof(*c));
	struct ibv_device **list;
	int err = 0;

	if (!c) {
		errno = ENOMEM;
		return NULL;
	}
	list = ibv_get_device_list(NULL);
	for (int i = 0; list && list[i] && !c->vctx; i++) {
		if (strcmp(ibv_get_device_name(list[i]), device))
			continue;
		errno = 0;
		c->vctx = ibv_open_device(list[i]);
		if (!c->vctx)
			err = failed_errno();
	}
	if (list)
		ibv_free_device_list(list);
	if (!c->vctx) {
		err = err ? err : ENODEV;
		goto fail;
	}
	c->gid_index = gid_index;
	errno = 0;
	if (ibv_query_gid(c->vctx, 1, gid_index, &c->gid)) {
		err = failed_errno();
		goto fail;
	}
	c->slots = calloc(RECVS + CTRL_SLOTS, SLOT);
	if (!c->slots) {
		err = ENOMEM;
		goto fail;
	}
	errno = 0;
	c->pd = ibv_alloc_pd(c->vctx);
	if (c->pd)
		c->chan = ibv_create_comp_channel(c->vctx);
	if (c->chan)
		c->cq = ibv_create_cq(c->vctx, CQ_DEPTH, NULL, c->chan, 0);
	if (c->cq)
		c->slots_mr = ibv_reg_mr(c->pd, c->slots, (size_t)(RECVS + CTRL_SLOTS) * SLOT,
					 IBV_ACCESS_LOCAL_WRITE);
	if (c->slots_mr)
		c->qp = xud_qp(c, attr);
	if (c->qp)
		c->qpx = ibv_qp_to_qp_ex(c->qp);
	if (!c->qpx) {
		err = failed_errno();
		goto fail;
	}
	for (uint32_t i = 0; i < RECVS; i++) {
		if (post_recv(c, i)) {
			err = failed_errno();
			goto fail;
		}
	}
	for (uint32_t i = 0; i < CTRL_SLOTS; i++)
		c->free_slot[c->n_free++] = CTRL_SLOTS - 1 - i;
	return c;
fail:
	ctx_free(c);
	errno = err;
	return NULL;
}

uint32_t rdmc_qpn(const struct rdmc_ctx *c)
{
	return c->qp->qp_num;
}

const union ibv_gid *rdmc_gid(const struct rdmc_ctx *c)
{
	return &c->gid;
}

int rdmc_close(struct rdmc_ctx *c)
{
	if (c->n_groups) {
		errno = EBUSY;
		return -1;
	}
	ctx_free(c);
	return 0;
}

/* --- groups --- */

/* FNV-1a over what every member must agree on. */
static uint64_t params_of(const struct rdmc_group_attr *a)
{
	uint64_t h = 0xcbf29ce484222325ULL;
	uint32_t v[5] = { a->id, a->n_members, a->root, a->algorithm, a->block_size };

#define MIX(p, len)							\
	do {								\
		for (size_t i_ = 0; i_ < (len); i_++)			\
			h = (h ^ ((const uint8_t *)(p))[i_]) * 0x100000001b3ULL; \
	} while (0)
	MIX(v, sizeof(v));
	for (unsigned int i = 0; i < a->n_members; i++) {
		MIX(a->members[i].gid.raw, 16);
		MIX(&a->members[i].qpn, 4);
	}
#undef MIX
	return h;
}

static void group_free(struct rdmc_group *g)
{
	for (unsigned int r = 0; g->peers && r < g->n; r++)
		if (g->peers[r].ah)
			ibv_destroy_ah(g->peers[r].ah);
	if (g->mr)
		ibv_dereg_mr(g->mr);
	rdmc_plan_free(&g->plan);
	free(g->have);
	free(g->peers);
	free(g);
}

/*
 * Our sends not completed, to members not failed. Those to a failed
 * member are not waited for (XUD fails them only after its retries): the
 * MR and AHs may go under them, since rxud looks keys and AHs up as it
 * uses them and fails such a send alone, and its completion then finds
 * no group.
 */
static unsigned int sends_out(const struct rdmc_group *g)
{
	unsigned int n = 0;

	for (unsigned int r = 0; r < g->n; r++)
		if (g->peers[r].state != S_FAILED)
			n += g->peers[r].sends_out;
	return n;
}

static int pending_for(const struct rdmc_ctx *c, const struct rdmc_group *g)
{
	for (const struct pending *q = c->pend_head; q; q = q->next)
		if (q->id == g->id && q->gen == g->gen)
			return 1;
	return 0;
}

int rdmc_destroy_group(struct rdmc_group *g, int timeout_ms)
{
	struct rdmc_ctx *c = g->ctx;
	long long end = now_ms() + timeout_ms;
	int bye = 0, ret = 0;

	g->destroying = 1;
	/*
	 * Our sends first (a member's DONE must reach the root before its
	 * BYE, which XUD does not order), then BYE, then its completions.
	 */
	for (;;) {
		if (!sends_out(g) && !pending_for(c, g)) {
			if (bye || c->broken || g->self_failed)
				break;
			for (unsigned int r = 0; r < g->n; r++)
				send_ctrl(g, r, M_BYE, g->last_done);
			bye = 1;
			continue;
		}
		if (now_ms() >= end) {
			errno = ETIMEDOUT;
			ret = -1;
			break;
		}
		if (run_once(c, (int)(end - now_ms())) < 0)
			break;
	}
	c->groups[g->id] = NULL;
	c->n_groups--;
	group_free(g);
	return ret;
}

struct rdmc_group *rdmc_create_group(struct rdmc_ctx *c, const struct rdmc_group_attr *a,
				     int timeout_ms)
{
	long long end = now_ms() + timeout_ms;
	struct rdmc_group *g;
	int err = EINVAL;

	if (!a || a->n_members < 2 || a->n_members > RDMC_MAX_MEMBERS || !a->members ||
	    a->rank >= a->n_members || a->root >= a->n_members ||
	    (unsigned int)a->algorithm > RDMC_PIPELINE || !a->block_size ||
	    a->block_size > RDMC_MAX_BLOCK_SIZE || !a->buffer || !a->buffer_len) {
		errno = EINVAL;
		return NULL;
	}
	/* We are who the list says we are, and nobody is there twice. */
	if (a->members[a->rank].qpn != c->qp->qp_num ||
	    memcmp(&a->members[a->rank].gid, &c->gid, sizeof(c->gid))) {
		errno = EINVAL;
		return NULL;
	}
	for (unsigned int i = 0; i < a->n_members; i++)
		for (unsigned int j = 0; j < i; j++)
			if (a->members[i].qpn == a->members[j].qpn &&
			    !memcmp(&a->members[i].gid, &a->members[j].gid, sizeof(c->gid))) {
				errno = EINVAL;
				return NULL;
			}
	if (c->groups[a->id]) {
		errno = EEXIST;
		return NULL;
	}
	if (c->broken) {
		errno = c->broken;
		return NULL;
	}
	g = calloc(1, sizeof(*g));
	if (!g || !(g->peers = calloc(a->n_members, sizeof(*g->peers)))) {
		free(g);
		errno = ENOMEM;
		return NULL;
	}
	g->ctx = c;
	g->id = a->id;
	g->gen = ++c->gen;
	g->n = a->n_members;
	g->rank = a->rank;
	g->root = a->root;
	g->alg = a->algorithm;
	g->bs = a->block_size;
	g->buf = a->buffer;
	g->len = a->buffer_len;
	g->hb_ms = a->heartbeat_ms ? a->heartbeat_ms : HEARTBEAT_MS;
	g->complete = a->complete;
	g->failed_cb = a->failed;
	g->arg = a->arg;
	g->params = params_of(a);
	/*
	 * The root's copy is written by nobody; a member's buffer takes
	 * remote writes through an MR of the buffer alone, and only in a
	 * transfer (set_open()): closed until the first BEGIN.
	 */
	g->mr = ibv_reg_mr(c->pd, g->buf, g->len, IBV_ACCESS_LOCAL_WRITE);
	if (!g->mr) {
		err = errno;
		goto fail;
	}
	g->rkey = g->mr->rkey;
	for (unsigned int r = 0; r < g->n; r++) {
		struct peer *p = &g->peers[r];
		struct ibv_ah_attr ah = {
			.is_global = 1, .port_num = 1,
			.grh = { .dgid = a->members[r].gid, .sgid_index = c->gid_index,
				 .hop_limit = 64 },
		};

		p->gid = a->members[r].gid;
		p->qpn = a->members[r].qpn;
		p->state = S_LIVE;
		if (r == g->rank)
			continue;
		p->ah = ibv_create_ah(c->pd, &ah);
		if (!p->ah) {
			err = errno ? errno : EIO;
			goto fail;
		}
	}
	c->groups[g->id] = g;
	c->n_groups++;
	for (unsigned int r = 0; r < g->n; r++)
		send_ctrl(g, r, M_JOIN, 0);
	/* JOINs that came before the group was made here. */
	for (unsigned int i = 0; i < c->n_stash;) {
		struct stashed s = c->stash[i];

		if (s.m.group != g->id) {
			i++;
			continue;
		}
		c->stash[i] = c->stash[--c->n_stash];
		on_msg(g, &s.m, &s.gid, s.qpn);
	}
	for (;;) {
		unsigned int joined = 0;

		for (unsigned int r = 0; r < g->n; r++)
			joined += g->peers[r].joined;
		if (g->mismatch) {
			rdmc_destroy_group(g, 1000);
			errno = EINVAL;
			return NULL;
		}
		if (g->failed) {
			/* deliver() ran the failed callbacks. */
			rdmc_destroy_group(g, 1000);
			errno = EHOSTDOWN;
			return NULL;
		}
		if (joined == g->n - 1)
			return g;
		if (now_ms() >= end) {
			rdmc_destroy_group(g, 1000);
			errno = ETIMEDOUT;
			return NULL;
		}
		if (run_once(c, (int)(end - now_ms())) < 0 && !g->failed) {
			err = errno;
			rdmc_destroy_group(g, 0);
			errno = err;
			return NULL;
		}
	}
fail:
	group_free(g);
	errno = err;
	return NULL;
}

int rdmc_send(struct rdmc_group *g, size_t size)
{
	uint64_t room = g->len;

	if (g->rank != g->root) {
		errno = EPERM;
		return -1;
	}
	if (g->failed || g->ctx->broken) {
		errno = EPIPE;
		return -1;
	}
	if (g->phase != P_IDLE) {
		errno = EBUSY;
		return -1;
	}
	for (unsigned int r = 0; r < g->n; r++) {
		if (r == g->rank)
			continue;
		if (g->peers[r].state != S_LIVE) {
			errno = EPIPE;
			return -1;
		}
		if (g->peers[r].len < room)
			room = g->peers[r].len;
	}
	if (size > room) {
		errno = EMSGSIZE;
		return -1;
	}
	if (start_transfer(g, g->last_done + 1, size))
		return -1;
	blake2s256(g->buf, size, g->digest);
	/* Every member learns the size before any block can reach it. */
	g->phase = P_BEGUN;
	for (unsigned int r = 0; r < g->n; r++)
		send_ctrl(g, r, M_BEGIN, g->seq);
	return 0;
}

void rdmc_group_stats(const struct rdmc_group *g, struct rdmc_stats *s)
{
	*s = g->st;
}
