// SPDX-License-Identifier: GPL-2.0 OR Linux-OpenIB
/*
 * xud-data: XUD messages between QPs on two rxud devices, data and
 * exactly-once checked, in TAP (Documentation/xud.rst).
 *
 * One XUD QP on each device (A and B), each sending to the other at once:
 * a seeded sequence of SEND, SEND_WITH_IMM, RDMA_WRITE and
 * RDMA_WRITE_WITH_IMM (the last two through ibv_wr_*, with
 * ibv_wr_set_ud_addr), sizes from 1 byte to -m (log-uniform, several path
 * MTUs), up to -k messages in flight per direction. Each message's bytes
 * are fill()'s pattern for its number; SENDs carry the number in their
 * first 4 bytes, the _WITH_IMM ones in the immediate data, WRITEs go to a
 * slot of the peer's buffer named by the number.
 *
 * Checked: every send completes with success (the link may lose,
 * duplicate and reorder: XUD recovers); every SEND, SEND_WITH_IMM and
 * WRITE_WITH_IMM produced exactly one receive completion at its peer, with
 * the right opcode, byte_len (40 + len for SENDs, as UD: a GRH first),
 * immediate data and bytes; every WRITE's bytes are in place when its send
 * completed; nothing else arrives afterwards (no duplicate delivery).
 *
 *   xud-data -d DEV -g GIDINDEX -D DEV2 -G GIDINDEX2 [-s SEED] [-n MSGS]
 *            [-m MAXLEN] [-k INFLIGHT] [-a ACK_EVERY] [-r DELAY_MS] [-x]
 *            [-T GIDINDEX3]
 *
 * -T: A's messages alternate between two of B's addresses, B's GID
 * GIDINDEX2 and B's GID GIDINDEX3 (B sends from GIDINDEX2 to A's
 * GIDINDEX): a host with several addresses (xud.rst, "Addresses"). B must
 * keep a stream per address of its own that A targets, and answer each
 * from the address it targeted, the only one A takes answers from.
 *
 * -r: both sides post their receives DELAY_MS after the start: the first
 * SENDs meet no receive and are RNR NAKed (the QPs' min_rnr_timer is 655
 * ms), then delivered. -x: every eighth message is an RDMA WRITE to the
 * rkey of an MR registered and deregistered at the start, and must fail
 * with IBV_WC_REM_ACCESS_ERR while every other message succeeds.
 *
 * -X: instead, an MR deregistered while RDMA WRITEs into it are under way
 * (xud.rst, "Error model"): A writes DEREG_MSGS messages of -m bytes
 * (at least 64 KB) into an MR of B's; as soon as the first of their bytes
 * shows in B's memory, B deregisters the MR. Checked: the dereg succeeds
 * with the WRITEs in flight; the first message was cut in the middle (some
 * of its bytes placed, not all; up to DEREG_ROUNDS rounds are tried, as
 * the poller can lose the race to a whole message); every WRITE completes
 * with success or IBV_WC_REM_ACCESS_ERR, and at least one with the latter;
 * no byte of the memory changes once ibv_dereg_mr has returned; and A's QP
 * still serves B afterwards (a SEND and a WRITE to B's other MR succeed).
 */
#include <arpa/inet.h>
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <infiniband/verbs.h>
#include <infiniband/rxudv.h>
#include "tap.h"
#include "util.h"

#define QKEY		0x11117777
#define GRH		40
#define POLL_MS		60000	/* without any completion: the run is stuck */
#define RECV_TAG	(1ULL << 40)

struct side {
	struct ibv_context *ctx;
	struct ibv_pd *pd;
	struct ibv_cq *cq;
	struct ibv_qp *qp;
	struct ibv_qp_ex *qpx;
	struct ibv_ah *ah;	/* to the other side */
	struct ibv_ah *ah2;	/* -T: to the other side's second address */
	union ibv_gid gid;
	int gid_idx;
	uint8_t *buf;		/* k send slots | k write slots | r receive slots */
	struct ibv_mr *mr;
	uint32_t dead_rkey;	/* of an MR registered and deregistered */
	size_t slot, rslot;
	int k, r;
	/* Messages this side sent: op, len, done; and those it received. */
	int sent, completed, in_flight;
	int *slot_msg;		/* send slot -> message number, -1 free */
	int failures;
};

struct msg {
	int from;		/* 0: A to B, 1: B to A */
	enum ibv_wr_opcode op;
	uint32_t len;
	int slot;		/* sender's send slot; the peer's write slot */
	int send_done, recvs;	/* completions seen */
	int bad_rkey;		/* a WRITE to a deregistered MR */
};

static struct msg *msgs;
static struct side side[2];
static int n_msgs, max_len = 1 << 20, in_flight = 4, ack_every;
/* -r: receives posted this late (RNR NAKs meanwhile); -x: every eighth
 * message is a WRITE to a deregistered MR's rkey and must fail
 * REM_ACCESS_ERR. */
static int recv_delay_ms, bad_rkeys, refused, dereg_mid_write;
static unsigned int seed;

static const char *op_name(enum ibv_wr_opcode op)
{
	switch (op) {
	case IBV_WR_SEND: return "SEND";
	case IBV_WR_SEND_WITH_IMM: return "SEND_WITH_IMM";
	case IBV_WR_RDMA_WRITE: return "RDMA_WRITE";
	default: return "RDMA_WRITE_WITH_IMM";
	}
}

static uint32_t rnd(void)
{
	seed = seed * 1103515245 + 12345;
	return seed >> 8;
}

static uint8_t *send_slot(struct side *s, int i) { return s->buf + (size_t)i * s->slot; }
static uint8_t *write_slot(struct side *s, int i) { return s->buf + (size_t)(s->k + i) * s->slot; }
static uint8_t *recv_slot(struct side *s, int i)
{
	return s->buf + (size_t)2 * s->k * s->slot + (size_t)i * s->rslot;
}

static int post_recv(struct side *s, int i)
{
	struct ibv_sge sge = {
		.addr = (uintptr_t)recv_slot(s, i), .length = s->rslot, .lkey = s->mr->lkey,
	};
	struct ibv_recv_wr wr = { .wr_id = RECV_TAG | i, .sg_list = &sge, .num_sge = 1 }, *bad;

	return ibv_post_recv(s->qp, &wr, &bad);
}

static int setup(struct side *s, const char *dev)
{
	struct ibv_qp_init_attr_ex a = {
		.qp_type = IBV_QPT_DRIVER,
		.comp_mask = IBV_QP_INIT_ATTR_PD | IBV_QP_INIT_ATTR_SEND_OPS_FLAGS,
		.send_ops_flags = IBV_QP_EX_WITH_SEND | IBV_QP_EX_WITH_SEND_WITH_IMM |
				  IBV_QP_EX_WITH_RDMA_WRITE | IBV_QP_EX_WITH_RDMA_WRITE_WITH_IMM,
		.cap = { .max_send_wr = 64, .max_recv_wr = 64, .max_send_sge = 1,
			 .max_recv_sge = 1 },
	};
	struct rxudv_qp_init_attr x = { .ack_every = ack_every };
	struct ibv_qp_attr qa = { .qp_state = IBV_QPS_INIT, .pkey_index = 0, .port_num = 1,
				  .qkey = QKEY };

	s->ctx = open_dev(dev);
	if (!s->ctx)
		return -1;
	s->pd = ibv_alloc_pd(s->ctx);
	s->cq = ibv_create_cq(s->ctx, 256, NULL, NULL, 0);
	if (!s->pd || !s->cq || ibv_query_gid(s->ctx, 1, s->gid_idx, &s->gid))
		return -1;
	s->k = in_flight;
	s->r = 2 * in_flight;
	s->slot = max_len;
	s->rslot = GRH + max_len;
	s->slot_msg = calloc(s->k, sizeof(int));
	for (int i = 0; i < s->k; i++)
		s->slot_msg[i] = -1;
	size_t len = 2 * s->k * s->slot + s->r * s->rslot;
	s->buf = calloc(1, len);
	s->mr = ibv_reg_mr(s->pd, s->buf, len, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
	if (!s->buf || !s->mr)
		return -1;
	a.pd = s->pd;
	a.send_cq = s->cq;
	a.recv_cq = s->cq;
	s->qp = rxudv_create_qp(s->ctx, &a, &x, sizeof(x));
	if (!s->qp)
		return -1;
	s->qpx = ibv_qp_to_qp_ex(s->qp);
	if (ibv_modify_qp(s->qp, &qa, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_QKEY))
		return -1;
	qa.qp_state = IBV_QPS_RTR;
	/* With -r, RNR waits of 655 ms (code 0), 7 of them: late receives
	 * are waited for. */
	qa.min_rnr_timer = 0;
	if (ibv_modify_qp(s->qp, &qa, IBV_QP_STATE | (recv_delay_ms ? IBV_QP_MIN_RNR_TIMER : 0)))
		return -1;
	qa.qp_state = IBV_QPS_RTS;
	qa.sq_psn = 0;
	if (ibv_modify_qp(s->qp, &qa, IBV_QP_STATE | IBV_QP_SQ_PSN))
		return -1;
	{
		struct ibv_mr *dead = ibv_reg_mr(s->pd, s->buf, 4096, IBV_ACCESS_LOCAL_WRITE |
						 IBV_ACCESS_REMOTE_WRITE);

		if (!dead)
			return -1;
		s->dead_rkey = dead->rkey;
		if (ibv_dereg_mr(dead))
			return -1;
	}
	if (!recv_delay_ms)
		for (int i = 0; i < s->r; i++)
			if (post_recv(s, i))
				return -1;
	return 0;
}

static int make_ah(struct side *s, struct side *to)
{
	struct ibv_ah_attr ah = {
		.is_global = 1, .port_num = 1,
		.grh = { .dgid = to->gid, .sgid_index = s->gid_idx, .hop_limit = 64 },
	};

	s->ah = ibv_create_ah(s->pd, &ah);
	return s->ah ? 0 : -1;
}

/* -T: @s's second AH, to @to's GID @idx. */
static int make_ah2(struct side *s, struct side *to, int idx)
{
	struct ibv_ah_attr ah = {
		.is_global = 1, .port_num = 1,
		.grh = { .sgid_index = s->gid_idx, .hop_limit = 64 },
	};

	if (ibv_query_gid(to->ctx, 1, idx, &ah.grh.dgid))
		return -1;
	s->ah2 = ibv_create_ah(s->pd, &ah);
	return s->ah2 ? 0 : -1;
}

static int post_msg(struct side *s, struct side *to, int m)
{
	struct msg *g = &msgs[m];
	uint8_t *src = send_slot(s, g->slot);

	fill(src, g->len, m);
	if (g->op == IBV_WR_SEND && g->len >= 4)
		memcpy(src, &m, 4);
	ibv_wr_start(s->qpx);
	s->qpx->wr_id = m;
	s->qpx->wr_flags = IBV_SEND_SIGNALED;
	switch (g->op) {
	case IBV_WR_SEND:
		ibv_wr_send(s->qpx);
		break;
	case IBV_WR_SEND_WITH_IMM:
		ibv_wr_send_imm(s->qpx, htonl(m));
		break;
	case IBV_WR_RDMA_WRITE:
		ibv_wr_rdma_write(s->qpx, g->bad_rkey ? to->dead_rkey : to->mr->rkey,
				  (uintptr_t)write_slot(to, g->slot));
		break;
	default:
		ibv_wr_rdma_write_imm(s->qpx, to->mr->rkey, (uintptr_t)write_slot(to, g->slot),
				      htonl(m));
		break;
	}
	ibv_wr_set_ud_addr(s->qpx, s->ah2 && (m & 1) ? s->ah2 : s->ah, to->qp->qp_num, QKEY);
	ibv_wr_set_sge(s->qpx, s->mr->lkey, (uintptr_t)src, g->len);
	return ibv_wr_complete(s->qpx);
}

/* Whether @p holds message @m's bytes (what post_msg() sent). */
static int right_bytes(int m, const uint8_t *p)
{
	static uint8_t *want;
	static size_t want_len;
	struct msg *g = &msgs[m];

	if (want_len < g->len) {
		free(want);
		want = malloc(g->len);
		want_len = want ? g->len : 0;
		if (!want)
			return 0;
	}
	fill(want, g->len, m);
	if (g->op == IBV_WR_SEND && g->len >= 4)
		memcpy(want, &m, 4);
	return !memcmp(want, p, g->len);
}

static void release(struct side *s, struct msg *g);

/* One receive completion at @s from @peer. */
static void on_recv(struct side *s, int me, struct ibv_wc *wc)
{
	int i = wc->wr_id & 0xffff, m = -1;
	uint8_t *buf = recv_slot(s, i);

	if (wc->status != IBV_WC_SUCCESS) {
		printf("# receive %d completed with %s\n", i, ibv_wc_status_str(wc->status));
		s->failures++;
	} else if (wc->wc_flags & IBV_WC_WITH_IMM) {
		m = ntohl(wc->imm_data);
	} else if (wc->byte_len >= GRH + 4) {
		memcpy(&m, buf + GRH, 4);
	}
	if (m < 0 || m >= n_msgs || msgs[m].from == me) {
		if (wc->status == IBV_WC_SUCCESS) {
			printf("# receive %d names no message (%d)\n", i, m);
			s->failures++;
		}
	} else {
		struct msg *g = &msgs[m];
		int ok = 1;

		g->recvs++;
		if (g->op == IBV_WR_RDMA_WRITE_WITH_IMM)
			ok = wc->opcode == IBV_WC_RECV_RDMA_WITH_IMM && wc->byte_len == g->len &&
			     right_bytes(m, write_slot(s, g->slot));
		else
			ok = wc->opcode == IBV_WC_RECV && wc->byte_len == GRH + g->len &&
			     (wc->wc_flags & IBV_WC_GRH) && right_bytes(m, buf + GRH);
		if (g->send_done)
			release(&side[g->from], g);
		if (!ok) {
			printf("# message %d (%s, %u B): receive wrong: opcode %s byte_len %u flags %#x\n",
			       m, op_name(g->op), g->len,
			       wc_opcode_name(wc->opcode), wc->byte_len, wc->wc_flags);
			s->failures++;
		}
	}
	if (post_recv(s, i))
		s->failures++;
}

/* Message @g's slot at its sender @s is free again. */
static void release(struct side *s, struct msg *g)
{
	if (s->slot_msg[g->slot] == g - msgs) {
		s->slot_msg[g->slot] = -1;
		s->in_flight--;
	}
}

/* A send completion at @s: its message is done. */
static void on_send(struct side *s, struct side *to, struct ibv_wc *wc)
{
	int m = (int)wc->wr_id;
	struct msg *g;

	if (m < 0 || m >= n_msgs) {
		printf("# send completion with wr_id %llu\n", (unsigned long long)wc->wr_id);
		s->failures++;
		return;
	}
	g = &msgs[m];
	g->send_done++;
	s->completed++;
	/*
	 * The slot (the sender's buffer, and the peer's write slot of the same
	 * number) is reused once the peer's receive completion has been
	 * checked too: the send may complete first.
	 */
	if (wc->status != IBV_WC_SUCCESS || g->op == IBV_WR_RDMA_WRITE || g->recvs)
		release(s, g);
	if (g->bad_rkey) {
		refused += wc->status == IBV_WC_REM_ACCESS_ERR;
		if (wc->status != IBV_WC_REM_ACCESS_ERR) {
			printf("# message %d (RDMA_WRITE to a deregistered MR) completed with %s\n", m,
			       ibv_wc_status_str(wc->status));
			s->failures++;
		}
	} else if (wc->status != IBV_WC_SUCCESS) {
		printf("# message %d (%s, %u B) completed with %s\n", m, op_name(g->op), g->len,
		       ibv_wc_status_str(wc->status));
		s->failures++;
	} else if (g->op == IBV_WR_RDMA_WRITE && !right_bytes(m, write_slot(to, g->slot))) {
		printf("# message %d (RDMA_WRITE, %u B): bytes not in place\n", m, g->len);
		s->failures++;
	}
}

static int poll_side(struct side *side, int me, long long *last)
{
	struct side *s = &side[me], *peer = &side[!me];
	struct ibv_wc wc[16];
	int n = ibv_poll_cq(s->cq, 16, wc);

	if (n < 0)
		return -1;
	for (int i = 0; i < n; i++) {
		if (wc[i].wr_id & RECV_TAG)
			on_recv(s, me, &wc[i]);
		else
			on_send(s, peer, &wc[i]);
	}
	if (n > 0)
		*last = now_ms();
	return n;
}

static uint32_t pick_len(enum ibv_wr_opcode op)
{
	/* Log-uniform from 1 byte to max_len. */
	int bits = 0;

	while ((1 << bits) < max_len)
		bits++;
	uint32_t len = 1 + rnd() % (1u << (rnd() % (bits + 1)));

	if (len > (uint32_t)max_len)
		len = max_len;
	if (op == IBV_WR_SEND && len < 4)
		len = 4;
	return len;
}

#define DEREG_MSGS	6
#define UNTOUCHED	0xa5	/* the victim MR's bytes before any WRITE */
#define CHUNK		256	/* placed or not, counted by chunks of this */

/* Chunks of @p (@len bytes) that differ from UNTOUCHED. */
static size_t chunks_placed(const uint8_t *p, size_t len)
{
	size_t n = 0;

	for (size_t at = 0; at < len; at += CHUNK) {
		size_t end = at + CHUNK < len ? at + CHUNK : len;

		for (size_t i = at; i < end; i++)
			if (p[i] != UNTOUCHED) {
				n++;
				break;
			}
	}
	return n;
}

/* Polls @s's CQ for one completion until @deadline (now_ms()); 1 if one
 * came (in @wc), 0 at the deadline, -1 on a polling error. */
static int poll_one(struct side *s, struct ibv_wc *wc, long long deadline)
{
	while (now_ms() < deadline) {
		int n = ibv_poll_cq(s->cq, 1, wc);

		if (n)
			return n;
	}
	return 0;
}

/* Whether any byte of @p's first @len differs from UNTOUCHED, looked at
 * once per cache line: cheap enough to spin on while a message lands. */
static int any_placed(const uint8_t *p, size_t len)
{
	for (size_t i = 0; i < len; i += 64)
		if (p[i] != UNTOUCHED)
			return 1;
	return 0;
}

/* One -X round's outcome. */
struct dereg_round {
	int dereg_rc;		/* ibv_dereg_mr's */
	size_t placed, all;	/* chunks of the first WRITE placed at the dereg */
	int ok, refused, other, done;
	int changed;		/* bytes changed after the dereg returned */
};

/* Posts DEREG_MSGS WRITEs of @len bytes from @src_mr into a fresh MR of
 * B's and deregisters that MR as soon as any byte of the first one shows;
 * 0, or -1 when the round could not be set up or posted. */
static int dereg_round(struct side *a, struct side *b, struct ibv_mr *src_mr, size_t len,
		       struct dereg_round *r)
{
	size_t total = (size_t)DEREG_MSGS * len;
	uint8_t *victim = malloc(total), *snap = malloc(total);
	struct ibv_mr *victim_mr = NULL;
	struct ibv_wc wc;
	int ret = -1;
	long long t;

	memset(r, 0, sizeof(*r));
	if (!victim || !snap) {
		check(0, "memory for -X");
		goto out;
	}
	memset(victim, UNTOUCHED, total);
	victim_mr = ibv_reg_mr(b->pd, victim, total, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
	if (!victim_mr) {
		check(0, "register the target MR");
		goto out;
	}
	for (int i = 0; i < DEREG_MSGS; i++) {
		ibv_wr_start(a->qpx);
		a->qpx->wr_id = i;
		a->qpx->wr_flags = IBV_SEND_SIGNALED;
		ibv_wr_rdma_write(a->qpx, victim_mr->rkey, (uintptr_t)(victim + (size_t)i * len));
		ibv_wr_set_ud_addr(a->qpx, a->ah, b->qp->qp_num, QKEY);
		ibv_wr_set_sge(a->qpx, src_mr->lkey, (uintptr_t)src_mr->addr, len);
		if (ibv_wr_complete(a->qpx)) {
			check(0, "post RDMA WRITE %d of %zu bytes", i, len);
			goto out;
		}
	}
	/* Any byte of the first message, not just its first chunk: a lost
	 * first packet comes back only after a retransmission timeout, when
	 * the rest of the message has long landed. */
	t = now_ms();
	while (!any_placed(victim, len) && now_ms() - t < 20000)
		;
	r->dereg_rc = ibv_dereg_mr(victim_mr);
	if (!r->dereg_rc)
		victim_mr = NULL;
	memcpy(snap, victim, total);
	r->placed = chunks_placed(victim, len);
	r->all = (len + CHUNK - 1) / CHUNK;
	t = now_ms();
	while (r->done < DEREG_MSGS) {
		int n = poll_one(a, &wc, t + POLL_MS);

		if (n <= 0)
			break;
		r->done++;
		if (wc.status == IBV_WC_SUCCESS)
			r->ok++;
		else if (wc.status == IBV_WC_REM_ACCESS_ERR)
			r->refused++;
		else {
			r->other++;
			printf("# WRITE %llu completed with %s\n", (unsigned long long)wc.wr_id,
			       ibv_wc_status_str(wc.status));
		}
	}
	/* Late copies of packets would show now. */
	t = now_ms();
	while (now_ms() - t < 300)
		;
	r->changed = !!memcmp(snap, victim, total);
	printf("# round: %zu of %zu chunks of the first WRITE placed at the dereg; WRITEs: %d "
	       "succeeded, %d REM_ACCESS_ERR, %d otherwise; %s after the dereg\n", r->placed,
	       r->all, r->ok, r->refused, r->other, r->changed ? "bytes CHANGED" : "nothing changed");
	ret = 0;
out:
	if (victim_mr)
		ibv_dereg_mr(victim_mr);
	free(victim);
	free(snap);
	return ret;
}

/* Rounds tried until one deregisters the MR in the middle of the first
 * WRITE: the poller can lose the race to a whole message (a descheduled
 * vCPU); every round's other checks count. */
#define DEREG_ROUNDS	4

/* -X: see the comment at the top. */
static void run_dereg_mid_write(void)
{
	struct side *a = &side[0], *b = &side[1];
	size_t len = max_len;
	uint8_t *src = malloc(len);
	struct ibv_mr *src_mr = NULL;
	int rounds = 0, cut = 0, dereg_failed = 0, incomplete = 0, other = 0, changed = 0;
	int refused_when_cut = 0;
	struct dereg_round r = {0};
	struct ibv_wc wc;
	long long t;

	if (!src) {
		check(0, "memory for -X");
		goto out;
	}
	fill(src, len, 11);
	src_mr = ibv_reg_mr(a->pd, src, len, IBV_ACCESS_LOCAL_WRITE);
	if (!src_mr) {
		check(0, "register the source MR");
		goto out;
	}
	while (!cut && rounds < DEREG_ROUNDS) {
		if (dereg_round(a, b, src_mr, len, &r))
			goto out;
		rounds++;
		dereg_failed += r.dereg_rc != 0;
		incomplete += r.done != DEREG_MSGS;
		other += r.other;
		changed += r.changed;
		cut = r.placed > 0 && r.placed < r.all;
		if (cut)
			refused_when_cut = r.refused;
	}
	check(!dereg_failed, "ibv_dereg_mr of the target MR with %d WRITEs of %zu bytes under way: "
	      "success (%d rounds, %d failed)", DEREG_MSGS, len, rounds, dereg_failed);
	check(cut, "a round's first WRITE was cut in the middle (%d rounds; the last placed %zu "
	      "of its %zu chunks of %d bytes before the MR went)", rounds, r.placed, r.all, CHUNK);
	check(!incomplete && !other && (!cut || refused_when_cut > 0),
	      "every WRITE completed with success or REM_ACCESS_ERR, and in the cut round at least "
	      "one with the latter (%d rounds short of completions, %d other statuses)",
	      incomplete, other);
	check(!changed, "no byte of the MR's memory changed after ibv_dereg_mr returned (%d of %d "
	      "rounds changed)", changed, rounds);
	/* The peer is not wedged: a SEND (into a receive setup() posted) and
	 * a WRITE into B's other MR. */
	{
		int sent = 0, recvd = 0, bad = 0;

		fill(write_slot(a, 0), 4096, 12);
		ibv_wr_start(a->qpx);
		a->qpx->wr_id = 100;
		a->qpx->wr_flags = IBV_SEND_SIGNALED;
		ibv_wr_send(a->qpx);
		ibv_wr_set_ud_addr(a->qpx, a->ah, b->qp->qp_num, QKEY);
		ibv_wr_set_sge(a->qpx, a->mr->lkey, (uintptr_t)write_slot(a, 0), 4096);
		a->qpx->wr_id = 101;
		ibv_wr_rdma_write(a->qpx, b->mr->rkey, (uintptr_t)write_slot(b, 0));
		ibv_wr_set_ud_addr(a->qpx, a->ah, b->qp->qp_num, QKEY);
		ibv_wr_set_sge(a->qpx, a->mr->lkey, (uintptr_t)write_slot(a, 0), 4096);
		if (ibv_wr_complete(a->qpx)) {
			check(0, "post a SEND and a WRITE after the dereg");
			goto out;
		}
		t = now_ms();
		while ((sent < 2 || recvd < 1) && now_ms() - t < POLL_MS) {
			if (ibv_poll_cq(a->cq, 1, &wc) == 1) {
				sent++;
				bad += wc.status != IBV_WC_SUCCESS;
			}
			if (ibv_poll_cq(b->cq, 1, &wc) == 1) {
				recvd++;
				bad += wc.status != IBV_WC_SUCCESS || wc.byte_len != GRH + 4096 ||
				       !same(recv_slot(b, wc.wr_id & 0xffff) + GRH, 4096, 12);
			}
		}
		check(sent == 2 && recvd == 1 && !bad && same(write_slot(b, 0), 4096, 12),
		      "then a SEND and a WRITE to B's other MR succeed, data right (%d sends, %d "
		      "receives completed, %d wrong)", sent, recvd, bad);
	}
out:
	if (src_mr)
		ibv_dereg_mr(src_mr);
	free(src);
}

int main(int argc, char **argv)
{
	const char *dev[2] = { NULL, NULL };
	int c, total = 200, second_gid = -1;
	long long last;
	static const enum ibv_wr_opcode ops[] = {
		IBV_WR_SEND, IBV_WR_SEND_WITH_IMM, IBV_WR_RDMA_WRITE, IBV_WR_RDMA_WRITE_WITH_IMM,
	};

	seed = (unsigned int)time(NULL);
	while ((c = getopt(argc, argv, "d:g:D:G:s:n:m:k:a:r:xXT:")) != -1) {
		switch (c) {
		case 'd': dev[0] = optarg; break;
		case 'g': side[0].gid_idx = atoi(optarg); break;
		case 'D': dev[1] = optarg; break;
		case 'G': side[1].gid_idx = atoi(optarg); break;
		case 's': seed = strtoul(optarg, NULL, 0); break;
		case 'n': total = atoi(optarg); break;
		case 'm': max_len = atoi(optarg); break;
		case 'k': in_flight = atoi(optarg); break;
		case 'a': ack_every = atoi(optarg); break;
		case 'r': recv_delay_ms = atoi(optarg); break;
		case 'x': bad_rkeys = 1; break;
		case 'X': dereg_mid_write = 1; break;
		case 'T': second_gid = atoi(optarg); break;
		default:
			fprintf(stderr, "usage: %s -d DEV -g GID -D DEV2 -G GID2 [-s SEED] [-n MSGS] "
				"[-m MAXLEN] [-k INFLIGHT] [-a ACK_EVERY] [-r DELAY_MS] [-x | -X] "
				"[-T GID3]\n", argv[0]);
			return 2;
		}
	}
	if (!dev[0] || !dev[1] || max_len < 4 || in_flight < 1 || total < 1 ||
	    (dereg_mid_write && max_len < 65536))
		return 2;
	if (dereg_mid_write)
		printf("# %d RDMA WRITEs of %d bytes into an MR deregistered under way\n",
		       DEREG_MSGS, max_len);
	else
		printf("# seed %u, %d messages up to %d bytes, %d in flight each way\n", seed,
		       total, max_len, in_flight);
	for (int i = 0; i < 2; i++)
		if (setup(&side[i], dev[i])) {
			check(0, "set up an XUD QP on %s: %s", dev[i], strerror(errno));
			printf("1..%d\n", n_checks);
			return 1;
		}
	check(!make_ah(&side[0], &side[1]) && !make_ah(&side[1], &side[0]),
	      "AHs between %s and %s", dev[0], dev[1]);
	if (second_gid >= 0)
		check(!make_ah2(&side[0], &side[1], second_gid),
		      "a second AH from %s to %s's GID %d", dev[0], dev[1], second_gid);
	if (dereg_mid_write) {
		run_dereg_mid_write();
		total = 0;
		goto out;
	}
	n_msgs = total;
	msgs = calloc(total, sizeof(*msgs));
	for (int m = 0; m < total; m++) {
		msgs[m].from = rnd() % 2;
		msgs[m].op = ops[rnd() % 4];
		msgs[m].len = pick_len(msgs[m].op);
		if (bad_rkeys && m % 8 == 2) {
			msgs[m].op = IBV_WR_RDMA_WRITE;
			msgs[m].bad_rkey = 1;
		}
	}
	int next = 0, posted = 0, recvs_posted = !recv_delay_ms;
	long long t0 = now_ms();

	last = now_ms();
	while (side[0].completed + side[1].completed < total) {
		if (!recvs_posted && now_ms() - t0 >= recv_delay_ms) {
			/* -r: the receives come late; the senders waited (RNR). */
			for (int i = 0; i < 2; i++)
				for (int j = 0; j < side[i].r; j++)
					if (post_recv(&side[i], j))
						goto out;
			recvs_posted = 1;
		}
		/* Post the next message if its sender has a free slot. */
		while (next < total) {
			struct msg *g = &msgs[next];
			struct side *s = &side[g->from], *to = &side[!g->from];
			int slot = -1;

			for (int i = 0; i < s->k; i++)
				if (s->slot_msg[i] < 0) {
					slot = i;
					break;
				}
			if (slot < 0)
				break;
			g->slot = slot;
			if (post_msg(s, to, next)) {
				check(0, "post message %d (%s, %u B)", next, op_name(g->op), g->len);
				goto out;
			}
			s->slot_msg[slot] = next;
			s->in_flight++;
			s->sent++;
			next++;
			posted++;
		}
		int got = 0;

		for (int i = 0; i < 2; i++) {
			int n = poll_side(side, i, &last);

			if (n < 0)
				goto out;
			got += n;
		}
		if (!got && now_ms() - last > POLL_MS) {
			printf("# stuck: %d of %d messages completed\n",
			       side[0].completed + side[1].completed, total);
			break;
		}
	}
	long long ms = now_ms() - t0;
	uint64_t bytes = 0;

	for (int m = 0; m < total; m++)
		bytes += msgs[m].len;
	printf("# %d messages, %llu bytes in %lld ms\n", total, (unsigned long long)bytes, ms);
	/* Anything late would be a duplicate delivery. */
	last = now_ms();
	while (now_ms() - last < 500)
		for (int i = 0; i < 2; i++)
			poll_side(side, i, &(long long){ 0 });
out:;
	int sends_ok = 1, once = 1, done = 1;

	for (int m = 0; m < total; m++) {
		struct msg *g = &msgs[m];
		int claims = g->op != IBV_WR_RDMA_WRITE;

		if (g->send_done != 1)
			done = 0;
		if (claims && g->recvs != 1) {
			once = 0;
			printf("# message %d (%s, %u B) produced %d receive completions\n", m,
			       op_name(g->op), g->len, g->recvs);
		}
	}
	sends_ok = !side[0].failures && !side[1].failures;
	if (!dereg_mid_write) {
		check(done, "every one of the %d messages completed once at its sender", total);
		check(sends_ok, "every completion succeeded and every message's bytes are right "
		      "(%d failures)", side[0].failures + side[1].failures);
		check(once, "each SEND, SEND_WITH_IMM and RDMA_WRITE_WITH_IMM completed exactly "
		      "one receive at its peer");
	}
	if (bad_rkeys) {
		int bad = 0;

		for (int m = 0; m < total; m++)
			bad += msgs[m].bad_rkey;
		check(bad > 0 && refused == bad, "the %d RDMA WRITEs to a deregistered MR failed "
		      "with REM_ACCESS_ERR (%d did)", bad, refused);
	}
	for (int i = 0; i < 2; i++) {
		if (side[i].qp)
			ibv_destroy_qp(side[i].qp);
		if (side[i].ah)
			ibv_destroy_ah(side[i].ah);
		if (side[i].ah2)
			ibv_destroy_ah(side[i].ah2);
		if (side[i].mr)
			ibv_dereg_mr(side[i].mr);
		if (side[i].cq)
			ibv_destroy_cq(side[i].cq);
		if (side[i].pd)
			ibv_dealloc_pd(side[i].pd);
		if (side[i].ctx)
			ibv_close_device(side[i].ctx);
	}
	printf("1..%d\n", n_checks);
	return n_failed ? 1 : 0;
}
