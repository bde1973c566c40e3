// SPDX-License-Identifier: GPL-2.0 OR Linux-OpenIB
/*
 * data-test: data integrity over one RC connection, in TAP. Two RC QPs, A
 * and B (on one device, or on two with -D), connected to each other, run a
 * pseudo-random sequence of operations both ways: SEND and SEND_WITH_IMM,
 * RDMA WRITE and WRITE_WITH_IMM, RDMA READ, compare-and-swap and
 * fetch-and-add, with random sizes (1 byte to -m, several path MTUs), random
 * byte offsets into the registered buffers, 1 to 4 SGEs on both the gather
 * and the scatter side, inline data for small SENDs and WRITEs, some work
 * requests unsignaled, and up to 8 operations in flight at once.
 *
 * Every operation's bytes are a pattern derived from (seed, operation
 * index); after each batch both ends' buffers are compared byte for byte
 * with what they must hold (the data where it belongs, the background
 * everywhere else: nothing written past a message or between SGEs), and
 * every completion is checked in order on its CQ: status, opcode, wr_id,
 * byte_len (receives, READs, atomics), immediate data and its flag, QP
 * number. Atomics' returned old values and the final remote words are
 * checked too. One TAP check per kind of operation for its completions and
 * one for its data, then a summary. The sequence depends only on the seed
 * and -n/-m, so a seed replays on any device: rxe is the reference.
 *
 *   data-test -d DEV -g GIDINDEX [-D DEV2 -G GIDINDEX2] [-s SEED] [-n OPS]
 *             [-m MAXLEN] [-v]
 *   -s SEED    the PRNG seed (default: from the clock; printed either way)
 *   -n OPS     operations to run (default 300)
 *   -m MAXLEN  largest message (default 65536, at most 65536)
 *   -v         print every operation as it is posted
 */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>
#include <infiniband/verbs.h>
#include "tap.h"
#include "util.h"

#define ALL_ACCESS (IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | \
		    IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC)

/*
 * Each side's buffer is MAX_BATCH slots; operation i of a batch uses slot i
 * on both sides (the requester's for its local SGEs, the responder's for its
 * receive or its remote range), so operations in flight never share bytes.
 * Each slot is an MR of its own, so the operations in flight name different
 * keys: a device that took one key's MR for another's would refuse or
 * misplace them.
 */
#define MAX_BATCH	8
#define MAX_SGE		4
#define MAX_LEN		65536
#define GAP_MAX		2048	/* bytes left between SGEs, at most */
#define SLOT		(96 * 1024)	/* >= MAX_LEN + (MAX_SGE + 1) * GAP_MAX */
#define BUF_LEN		(MAX_BATCH * SLOT)
#define INLINE_LEN	128	/* inline data asked for, and used up to */
#define PATH_MTU	IBV_MTU_1024
#define POLL_MS		20000	/* without any completion: the run is stuck */
#define RECV_TAG	(1ULL << 40)	/* receive wr_ids: RECV_TAG | op index */

/* --- PRNG and patterns --- */

static uint64_t rng;

static uint64_t mix(uint64_t x)
{
	x += 0x9e3779b97f4a7c15ULL;
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
	x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
	return x ^ (x >> 31);
}

static uint64_t next(void)
{
	return mix(rng++);
}

/* 0 .. n - 1 */
static uint32_t rnd(uint32_t n)
{
	return (uint32_t)(next() % n);
}

static uint64_t seed;

/* The key of operation @k's pattern. */
static uint64_t op_key(int k)
{
	return mix(seed ^ ((uint64_t)(k + 1) * 0xd1b54a32d192ed03ULL));
}

/* Writes bytes @from .. @from + @len of the pattern of @key to @dst. */
static void pat_fill(uint8_t *dst, uint64_t key, size_t from, size_t len)
{
	uint64_t w = mix(key + (from >> 3));

	for (size_t i = from; i < from + len; i++) {
		if (!(i & 7))
			w = mix(key + (i >> 3));
		*dst++ = (uint8_t)(w >> ((i & 7) * 8));
	}
}

/* --- Operations --- */

enum kind { K_SEND, K_SEND_IMM, K_WRITE, K_WRITE_IMM, K_READ, K_CAS, K_FAA, NKINDS };

static const char *const kind_name[NKINDS] = {
	"SEND", "SEND_WITH_IMM", "RDMA_WRITE", "RDMA_WRITE_WITH_IMM", "RDMA_READ",
	"ATOMIC_CMP_AND_SWP", "ATOMIC_FETCH_AND_ADD",
};

/* Relative frequencies. */
static const int kind_weight[NKINDS] = { 20, 10, 20, 10, 20, 10, 10 };

struct piece {
	uint32_t off, len;
};

struct op {
	int k;			/* index in the run */
	enum kind kind;
	int req;		/* the requester: 0 (A) or 1 (B) */
	int slot;
	uint32_t len;		/* message length (8 for atomics) */
	int nl;			/* the requester's SGEs */
	struct piece l[MAX_SGE];
	int nr;			/* the responder's receive SGEs */
	struct piece r[MAX_SGE];
	uint32_t roff;		/* WRITE, READ, atomics: into the responder's slot */
	int inl, signaled;
	uint32_t imm;
	uint64_t old, operand, swap, final;	/* atomics */
};

static int is_atomic(enum kind k) { return k == K_CAS || k == K_FAA; }
static int has_imm(enum kind k) { return k == K_SEND_IMM || k == K_WRITE_IMM; }
/* The operation consumes one of the responder's receives. */
static int takes_recv(enum kind k) { return k == K_SEND || k == K_SEND_IMM || k == K_WRITE_IMM; }

static uint32_t rand_len(uint32_t max)
{
	uint32_t r = rnd(100), m;

	if (r < 35)
		return 1 + rnd(max < 256 ? max : 256);
	if (r < 45) {	/* around a multiple of the path MTU */
		m = 1024 * (1 + rnd(max / 1024 ? max / 1024 : 1));
		m = m - 1 + rnd(3);
		return m < 1 ? 1 : m > max ? max : m;
	}
	if (r < 75)
		return 1 + rnd(max < 4096 ? max : 4096);
	return 1 + rnd(max);
}

/*
 * Splits @total bytes into 1..MAX_SGE pieces (no more than @total) laid out
 * in order in a slot, with random gaps (sometimes none) before, between and
 * after them.
 */
static int split(uint32_t total, struct piece *p)
{
	uint32_t cut[MAX_SGE + 1], off, t;
	int n = 1 + (int)rnd(MAX_SGE);

	if ((uint32_t)n > total)
		n = (int)total;
	cut[0] = 0;
	cut[n] = total;
	for (int i = 1; i < n; i++) {
		do {
			cut[i] = 1 + rnd(total - 1);
			for (int j = 1; j < i; j++)
				if (cut[j] == cut[i])
					cut[i] = 0;
		} while (!cut[i]);
	}
	for (int i = 1; i < n; i++)	/* sort cut[1..n-1] */
		for (int j = i; j > 1 && cut[j - 1] > cut[j]; j--)
			t = cut[j], cut[j] = cut[j - 1], cut[j - 1] = t;
	off = rnd(4) ? rnd(GAP_MAX + 1) : 0;
	for (int i = 0; i < n; i++) {
		p[i].off = off;
		p[i].len = cut[i + 1] - cut[i];
		off += p[i].len + (rnd(4) ? rnd(GAP_MAX + 1) : 0);
	}
	return n;
}

static void gen_op(struct op *o, int k, int slot, uint32_t max_len)
{
	uint64_t key = op_key(k);
	int w = 0, r;

	memset(o, 0, sizeof(*o));
	o->k = k;
	o->slot = slot;
	for (int i = 0; i < NKINDS; i++)
		w += kind_weight[i];
	r = (int)rnd((uint32_t)w);
	for (o->kind = 0; r >= kind_weight[o->kind]; o->kind++)
		r -= kind_weight[o->kind];
	o->req = (int)rnd(2);
	o->signaled = rnd(4) != 0;
	o->imm = (uint32_t)mix(key ^ 3);
	if (is_atomic(o->kind)) {
		o->len = 8;
		o->nl = 1;
		o->l[0].off = rnd(SLOT - 8);	/* local: any alignment */
		o->l[0].len = 8;
		o->roff = 8 * rnd(SLOT / 8);	/* remote: 8-byte aligned */
		o->old = mix(key ^ 1);
		if (o->kind == K_FAA) {
			o->operand = mix(key ^ 2);
			o->final = o->old + o->operand;
		} else if (rnd(2)) {
			o->operand = o->old;	/* equal: swapped */
			o->swap = mix(key ^ 2);
			o->final = o->swap;
		} else {
			o->operand = o->old ^ (1ULL << rnd(64));
			o->swap = mix(key ^ 2);
			o->final = o->old;
		}
		return;
	}
	o->len = rand_len(max_len);
	o->nl = split(o->len, o->l);
	o->inl = o->kind != K_READ && o->len <= INLINE_LEN && rnd(2);
	if (o->kind != K_SEND && o->kind != K_SEND_IMM)
		o->roff = rnd(SLOT - o->len + 1);
	if (o->kind == K_SEND || o->kind == K_SEND_IMM) {
		/* A receive as large as the message or a little larger. */
		o->nr = split(o->len + (rnd(3) ? rnd(200) : 0), o->r);
	} else if (o->kind == K_WRITE_IMM) {
		/* A receive the data must not go to: 0..4 small SGEs. */
		o->nr = (int)rnd(MAX_SGE + 1);
		for (int i = 0; i < o->nr; i++) {
			o->r[i].len = 1 + rnd(256);
			o->r[i].off = rnd(SLOT - o->r[i].len + 1);
		}
	}
}

static void describe(const struct op *o, const char *why)
{
	char s[256];
	int n;

	n = snprintf(s, sizeof(s), "op %d: %s %c->%c, %u bytes, slot %d, local", o->k,
		     kind_name[o->kind], "AB"[o->req], "AB"[1 - o->req], o->len, o->slot);
	for (int i = 0; i < o->nl && n < (int)sizeof(s); i++)
		n += snprintf(s + n, sizeof(s) - n, " %u+%u", o->l[i].off, o->l[i].len);
	if (o->nr && n < (int)sizeof(s)) {
		n += snprintf(s + n, sizeof(s) - n, ", recv");
		for (int i = 0; i < o->nr && n < (int)sizeof(s); i++)
			n += snprintf(s + n, sizeof(s) - n, " %u+%u", o->r[i].off, o->r[i].len);
	}
	if (o->kind != K_SEND && o->kind != K_SEND_IMM && n < (int)sizeof(s))
		n += snprintf(s + n, sizeof(s) - n, ", remote %u", o->roff);
	if (n < (int)sizeof(s))
		snprintf(s + n, sizeof(s) - n, "%s%s", o->inl ? ", inline" : "",
			 o->signaled ? "" : ", unsignaled");
	printf("# %s%s%s\n", why ? why : "", why ? ": " : "", s);
}

/* --- Devices, QPs --- */

static struct ibv_context *ctx[2];
static struct ibv_pd *pd[2];
static union ibv_gid gid[2];
static int gid_idx[2] = { -1, -1 };
static uint8_t *buf[2], *expect;
static struct ibv_mr *mr[2][MAX_BATCH];
static struct ibv_cq *scq[2], *rcq[2];
static struct ibv_qp *qp[2];

static int connect_qp(int i, uint32_t sq_psn, uint32_t rq_psn)
{
	struct ibv_qp_attr a;
	int err;

	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_INIT;
	a.port_num = 1;
	a.qp_access_flags = IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ |
			    IBV_ACCESS_REMOTE_ATOMIC;
	err = ibv_modify_qp(qp[i], &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT |
			    IBV_QP_ACCESS_FLAGS);
	if (err)
		return err;

	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTR;
	a.ah_attr = (struct ibv_ah_attr){
		.is_global = 1,
		.port_num = 1,
		.grh = { .dgid = gid[1 - i], .sgid_index = gid_idx[i], .hop_limit = 64 },
	};
	a.path_mtu = PATH_MTU;
	a.dest_qp_num = qp[1 - i]->qp_num;
	a.rq_psn = rq_psn;
	a.max_dest_rd_atomic = 4;
	a.min_rnr_timer = 1;
	err = ibv_modify_qp(qp[i], &a, IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU |
			    IBV_QP_DEST_QPN | IBV_QP_RQ_PSN | IBV_QP_MAX_DEST_RD_ATOMIC |
			    IBV_QP_MIN_RNR_TIMER);
	if (err)
		return err;

	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTS;
	a.sq_psn = sq_psn;
	/*
	 * 537 ms, about 4 s with the retries: what is checked here is that
	 * every operation is delivered exactly once with the right data. A
	 * guest starved by a loaded host (TCG) can go longer than 67 ms
	 * (perftest's 14) without running, which once spent all retries.
	 */
	a.timeout = 17;
	a.retry_cnt = 7;
	a.rnr_retry = 7;
	a.max_rd_atomic = 4;
	return ibv_modify_qp(qp[i], &a, IBV_QP_STATE | IBV_QP_SQ_PSN | IBV_QP_TIMEOUT |
			     IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY | IBV_QP_MAX_QP_RD_ATOMIC);
}

/* CQs, QPs, connected: one check. */
static int setup_qps(void)
{
	const char *step = "create CQs";
	uint32_t psn[2];
	int err = 0;

	/* Start PSNs from the seed: some runs cross the 2^24 wrap. */
	psn[0] = rnd(1 << 24);
	psn[1] = rnd(1 << 24);
	for (int i = 0; i < 2 && !err; i++) {
		errno = 0;
		scq[i] = ibv_create_cq(ctx[i], 2 * MAX_BATCH, NULL, NULL, 0);
		rcq[i] = ibv_create_cq(ctx[i], 2 * MAX_BATCH, NULL, NULL, 0);
		if (!scq[i] || !rcq[i])
			err = errno ? errno : -1;
	}
	if (!err)
		step = "create QPs";
	for (int i = 0; i < 2 && !err; i++) {
		struct ibv_qp_init_attr ia = {
			.send_cq = scq[i],
			.recv_cq = rcq[i],
			.qp_type = IBV_QPT_RC,
			.sq_sig_all = 0,
			.cap = { .max_send_wr = 2 * MAX_BATCH, .max_recv_wr = 2 * MAX_BATCH,
				 .max_send_sge = MAX_SGE, .max_recv_sge = MAX_SGE,
				 .max_inline_data = INLINE_LEN },
		};

		errno = 0;
		qp[i] = ibv_create_qp(pd[i], &ia);
		if (!qp[i])
			err = errno ? errno : -1;
	}
	if (!err) {
		step = "connect A";
		err = connect_qp(0, psn[0], psn[1]);
	}
	if (!err) {
		step = "connect B";
		err = connect_qp(1, psn[1], psn[0]);
	}
	check(!err, "RC QPs A and B created (%d SGEs, %d bytes inline) and connected, PSNs %#x and %#x (%s: %s)",
	      MAX_SGE, INLINE_LEN, psn[0], psn[1], step, err > 0 ? strerror(err) : err ? "failed" : "success");
	return !err;
}

/* --- Posting --- */

static struct ibv_sge sge_of(int side, int slot, const struct piece *p)
{
	return (struct ibv_sge){ .addr = (uintptr_t)(buf[side] + slot * SLOT + p->off),
				 .length = p->len, .lkey = mr[side][slot]->lkey };
}

static int post_recv_of(const struct op *o)
{
	struct ibv_sge sg[MAX_SGE];
	struct ibv_recv_wr wr = { .wr_id = RECV_TAG | (uint64_t)o->k, .sg_list = sg,
				  .num_sge = o->nr }, *bad;
	int resp = 1 - o->req;

	for (int i = 0; i < o->nr; i++)
		sg[i] = sge_of(resp, o->slot, &o->r[i]);
	return ibv_post_recv(qp[resp], &wr, &bad);
}

static const enum ibv_wr_opcode wr_opcode[NKINDS] = {
	IBV_WR_SEND, IBV_WR_SEND_WITH_IMM, IBV_WR_RDMA_WRITE, IBV_WR_RDMA_WRITE_WITH_IMM,
	IBV_WR_RDMA_READ, IBV_WR_ATOMIC_CMP_AND_SWP, IBV_WR_ATOMIC_FETCH_AND_ADD,
};

static int post_send_of(const struct op *o)
{
	struct ibv_sge sg[MAX_SGE];
	struct ibv_send_wr wr = { .wr_id = (uint64_t)o->k + 1, .sg_list = sg, .num_sge = o->nl,
				  .opcode = wr_opcode[o->kind] }, *bad;
	uint64_t raddr = (uintptr_t)(buf[1 - o->req] + o->slot * SLOT + o->roff);

	for (int i = 0; i < o->nl; i++)
		sg[i] = sge_of(o->req, o->slot, &o->l[i]);
	if (o->signaled)
		wr.send_flags |= IBV_SEND_SIGNALED;
	if (o->inl)
		wr.send_flags |= IBV_SEND_INLINE;
	if (has_imm(o->kind))
		wr.imm_data = htobe32(o->imm);
	if (is_atomic(o->kind)) {
		wr.wr.atomic.remote_addr = raddr;
		wr.wr.atomic.rkey = mr[1 - o->req][o->slot]->rkey;
		wr.wr.atomic.compare_add = o->operand;
		wr.wr.atomic.swap = o->swap;
	} else if (o->kind != K_SEND && o->kind != K_SEND_IMM) {
		wr.wr.rdma.remote_addr = raddr;
		wr.wr.rdma.rkey = mr[1 - o->req][o->slot]->rkey;
	}
	return ibv_post_send(qp[o->req], &wr, &bad);
}

/* --- Memory images --- */

/* The background byte of a side's slots in a batch. */
static uint8_t bg(int batch, int side)
{
	return (uint8_t)(0x5a + batch * 2 + side * 0x81);
}

/* Writes the pattern bytes of @o into pieces @p (@n of them), up to @len. */
static void fill_pieces(uint8_t *slot, const struct op *o, const struct piece *p, int n,
			uint32_t len)
{
	uint32_t done = 0, l;

	for (int i = 0; i < n && done < len; i++) {
		l = p[i].len < len - done ? p[i].len : len - done;
		pat_fill(slot + p[i].off, op_key(o->k), done, l);
		done += l;
	}
}

/* Before posting: the background, and the data the operation moves. */
static void prepare(const struct op *o, int batch)
{
	uint8_t *ls = buf[o->req] + o->slot * SLOT, *rs = buf[1 - o->req] + o->slot * SLOT;

	memset(ls, bg(batch, o->req), SLOT);
	memset(rs, bg(batch, 1 - o->req), SLOT);
	if (is_atomic(o->kind))
		memcpy(rs + o->roff, &o->old, 8);
	else if (o->kind == K_READ)
		pat_fill(rs + o->roff, op_key(o->k), 0, o->len);
	else
		fill_pieces(ls, o, o->l, o->nl, o->len);
}

/* What side @side's slot must hold after the operation, into expect. */
static void expected(const struct op *o, int batch, int side)
{
	memset(expect, bg(batch, side), SLOT);
	if (side == o->req) {
		if (is_atomic(o->kind))
			memcpy(expect + o->l[0].off, &o->old, 8);
		else if (!o->inl)	/* inline sources were overwritten after the post */
			fill_pieces(expect, o, o->l, o->nl, o->len);
	} else {
		if (is_atomic(o->kind))
			memcpy(expect + o->roff, &o->final, 8);
		else if (o->kind == K_SEND || o->kind == K_SEND_IMM)
			fill_pieces(expect, o, o->r, o->nr, o->len);
		else
			pat_fill(expect + o->roff, op_key(o->k), 0, o->len);
	}
}

/* --- Completions --- */

static const enum ibv_wc_opcode wc_opcode[NKINDS] = {
	IBV_WC_SEND, IBV_WC_SEND, IBV_WC_RDMA_WRITE, IBV_WC_RDMA_WRITE, IBV_WC_RDMA_READ,
	IBV_WC_COMP_SWAP, IBV_WC_FETCH_ADD,
};

/* Per kind: operations run, inline, unsignaled, SGE counts, failures. */
static int n_ops[NKINDS], n_inline[NKINDS], n_unsig[NKINDS], n_multi[NKINDS];
static int comp_bad[NKINDS], data_bad[NKINDS];
static uint32_t len_min[NKINDS], len_max[NKINDS];
static int extra_wcs, reported;
static unsigned long long bytes_moved;

#define MAX_REPORTS 20	/* detailed mismatch reports, at most */

/* Is @wc the send completion of @o? Reports if not. */
static int check_send_wc(const struct op *o, const struct ibv_wc *wc)
{
	int ok = wc->status == IBV_WC_SUCCESS && wc->wr_id == (uint64_t)o->k + 1 &&
		 wc->opcode == wc_opcode[o->kind] && wc->qp_num == qp[o->req]->qp_num;

	if (ok && (o->kind == K_READ || is_atomic(o->kind)))
		ok = wc->byte_len == o->len;
	if (!ok && reported++ < MAX_REPORTS) {
		describe(o, "bad send completion");
		printf("#   want SUCCESS, %s, wr_id %d, QPN %#x%s; got %s, %s, wr_id %llu, QPN %#x, byte_len %u\n",
		       wc_opcode_name(wc_opcode[o->kind]), o->k + 1, qp[o->req]->qp_num,
		       o->kind == K_READ || is_atomic(o->kind) ? ", byte_len = length" : "",
		       ibv_wc_status_str(wc->status), wc_opcode_name(wc->opcode),
		       (unsigned long long)wc->wr_id, wc->qp_num, wc->byte_len);
	}
	return ok;
}

/* Is @wc the receive completion of @o? Reports if not. */
static int check_recv_wc(const struct op *o, const struct ibv_wc *wc)
{
	int imm = has_imm(o->kind);
	int ok = wc->status == IBV_WC_SUCCESS && wc->wr_id == (RECV_TAG | (uint64_t)o->k) &&
		 wc->opcode == (o->kind == K_WRITE_IMM ? IBV_WC_RECV_RDMA_WITH_IMM : IBV_WC_RECV) &&
		 wc->byte_len == o->len && wc->qp_num == qp[1 - o->req]->qp_num &&
		 !!(wc->wc_flags & IBV_WC_WITH_IMM) == imm && (!imm || wc->imm_data == htobe32(o->imm));

	if (!ok && reported++ < MAX_REPORTS) {
		describe(o, "bad receive completion");
		printf("#   want SUCCESS, %s, wr_id %#llx, byte_len %u, QPN %#x, imm %s%#x; got %s, %s, wr_id %#llx, byte_len %u, QPN %#x, flags %#x, imm %#x\n",
		       o->kind == K_WRITE_IMM ? "RECV_RDMA_WITH_IMM" : "RECV",
		       (unsigned long long)(RECV_TAG | (uint64_t)o->k), o->len, qp[1 - o->req]->qp_num,
		       imm ? "" : "none, not ", o->imm, ibv_wc_status_str(wc->status),
		       wc_opcode_name(wc->opcode), (unsigned long long)wc->wr_id, wc->byte_len,
		       wc->qp_num, wc->wc_flags, be32toh(wc->imm_data));
	}
	return ok;
}

/*
 * Waits for the batch's completions: on each side's send CQ those of its
 * signaled work requests, on its receive CQ those of the receives its
 * peer's operations consume, each in posting order. Returns 0 if one did
 * not come or one failed (the QPs are then unusable), else 1.
 */
static int complete_batch(struct op *ops, int n)
{
	struct op *want[4][MAX_BATCH];
	struct ibv_cq *cq[4] = { scq[0], scq[1], rcq[0], rcq[1] };
	int nwant[4] = { 0 }, got[4] = { 0 }, fatal = 0;
	long long deadline = now_ms() + POLL_MS;
	struct ibv_wc wc;

	for (int i = 0; i < n; i++) {
		if (ops[i].signaled)
			want[ops[i].req][nwant[ops[i].req]++] = &ops[i];
		if (takes_recv(ops[i].kind))
			want[3 - ops[i].req][nwant[3 - ops[i].req]++] = &ops[i];
	}
	for (int idle = 0;;) {
		int progress = 0, left = 0;

		for (int c = 0; c < 4; c++) {
			if (got[c] == nwant[c])
				continue;
			left = 1;
			if (ibv_poll_cq(cq[c], 1, &wc) != 1)
				continue;
			progress = 1;
			struct op *o = want[c][got[c]++];
			int ok = c < 2 ? check_send_wc(o, &wc) : check_recv_wc(o, &wc);

			if (!ok)
				comp_bad[o->kind]++;
			if (wc.status != IBV_WC_SUCCESS)
				fatal = 1;
		}
		if (fatal)
			return 0;
		if (!left)
			break;
		if (progress) {
			idle = 0;
			deadline = now_ms() + POLL_MS;
			continue;
		}
		if (now_ms() >= deadline) {
			for (int c = 0; c < 4; c++)
				if (got[c] < nwant[c]) {
					struct op *o = want[c][got[c]];

					comp_bad[o->kind]++;
					describe(o, "no completion");
					printf("#   on %c's %s CQ, within %d ms\n", "ABAB"[c],
					       c < 2 ? "send" : "receive", POLL_MS);
				}
			return 0;
		}
		/* Under TCG a busy loop would starve the kernel's work. */
		if (++idle > 10)
			usleep(200);
	}
	/* Nothing else: no completion for an unsignaled one, none twice. */
	for (int c = 0; c < 4; c++)
		while (ibv_poll_cq(cq[c], 1, &wc) == 1) {
			extra_wcs++;
			printf("# unexpected completion on %c's %s CQ: %s, %s, wr_id %#llx\n", "ABAB"[c],
			       c < 2 ? "send" : "receive", ibv_wc_status_str(wc.status),
			       wc_opcode_name(wc.opcode), (unsigned long long)wc.wr_id);
		}
	return 1;
}

/* Compares side @side's slot of @o with what it must hold. */
static int check_side(const struct op *o, int batch, int side)
{
	const uint8_t *s = buf[side] + o->slot * SLOT;
	size_t first = 0, last = 0, bad = 0;

	expected(o, batch, side);
	if (!memcmp(s, expect, SLOT))
		return 1;
	for (size_t i = 0; i < SLOT; i++)
		if (s[i] != expect[i]) {
			if (!bad++)
				first = i;
			last = i;
		}
	if (reported++ < MAX_REPORTS) {
		describe(o, "bad data");
		printf("#   %s's slot (%s): %zu bytes differ, from offset %zu to %zu; at %zu: %#04x, want %#04x\n",
		       side ? "B" : "A", side == o->req ? "requester" : "responder", bad, first, last,
		       first, s[first], expect[first]);
		if (is_atomic(o->kind) && side == o->req) {
			uint64_t got;

			memcpy(&got, s + o->l[0].off, 8);
			printf("#   returned %#llx; the word held %#llx (operand %#llx, swap %#llx, final %#llx)\n",
			       (unsigned long long)got, (unsigned long long)o->old,
			       (unsigned long long)o->operand, (unsigned long long)o->swap,
			       (unsigned long long)o->final);
		}
	}
	return 0;
}

/* --- The run --- */

static int run(int n_total, uint32_t max_len, int verbose)
{
	struct op ops[MAX_BATCH];
	int done = 0, batch = 0, err;

	while (done < n_total) {
		int n = 1 + (int)rnd(MAX_BATCH), last[2] = { -1, -1 };

		if (n > n_total - done)
			n = n_total - done;
		for (int i = 0; i < n; i++) {
			gen_op(&ops[i], done + i, i, max_len);
			last[ops[i].req] = i;
		}
		/* Each side's last work request of the batch is signaled. */
		for (int s = 0; s < 2; s++)
			if (last[s] >= 0)
				ops[last[s]].signaled = 1;
		for (int i = 0; i < n; i++) {
			struct op *o = &ops[i];

			prepare(o, batch);
			n_ops[o->kind]++;
			bytes_moved += o->len;
			n_inline[o->kind] += o->inl;
			n_unsig[o->kind] += !o->signaled;
			n_multi[o->kind] += o->nl > 1 || o->nr > 1;
			if (!len_min[o->kind] || o->len < len_min[o->kind])
				len_min[o->kind] = o->len;
			if (o->len > len_max[o->kind])
				len_max[o->kind] = o->len;
			if (verbose)
				describe(o, NULL);
		}
		/* Receives first, in the order their operations are posted. */
		for (int i = 0; i < n; i++)
			if (takes_recv(ops[i].kind) && (err = post_recv_of(&ops[i]))) {
				describe(&ops[i], "post_recv failed");
				printf("#   %s\n", strerror(err));
				comp_bad[ops[i].kind]++;
				return done;
			}
		for (int i = 0; i < n; i++) {
			if ((err = post_send_of(&ops[i]))) {
				describe(&ops[i], "post_send failed");
				printf("#   %s\n", strerror(err));
				comp_bad[ops[i].kind]++;
				return done;
			}
			/* Inline data is the bytes as they were at post time. */
			if (ops[i].inl)
				for (int j = 0; j < ops[i].nl; j++)
					memset(buf[ops[i].req] + ops[i].slot * SLOT + ops[i].l[j].off,
					       bg(batch, ops[i].req), ops[i].l[j].len);
		}
		if (!complete_batch(ops, n))
			return done;
		for (int i = 0; i < n; i++) {
			int ok = check_side(&ops[i], batch, 0);

			ok &= check_side(&ops[i], batch, 1);
			if (!ok)
				data_bad[ops[i].kind]++;
		}
		done += n;
		batch++;
	}
	return done;
}

static void *map(size_t len)
{
	void *p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

	return p == MAP_FAILED ? NULL : p;
}

/* Registers side @i's slots, an MR each; whether all were registered. */
static int reg_slots(int i)
{
	if (!pd[i] || !buf[i])
		return 0;
	for (int j = 0; j < MAX_BATCH; j++) {
		mr[i][j] = ibv_reg_mr(pd[i], buf[i] + j * SLOT, SLOT, ALL_ACCESS);
		if (!mr[i][j])
			return 0;
	}
	return 1;
}

static int open_side(int i, const char *dev)
{
	int ok;

	ctx[i] = open_dev(dev);
	check(ctx[i] != NULL, "open %s", dev);
	if (!ctx[i])
		return 0;
	check_err(ibv_query_gid(ctx[i], 1, gid_idx[i], &gid[i]), 0, "query_gid 1/%d of %s",
		  gid_idx[i], dev);
	pd[i] = ibv_alloc_pd(ctx[i]);
	buf[i] = map(BUF_LEN);
	ok = reg_slots(i);
	check(ok, "PD and %d MRs of %d KB, one for each slot, with all access rights on %s",
	      MAX_BATCH, SLOT / 1024, dev);
	return ok;
}

int main(int argc, char **argv)
{
	const char *dev[2] = { NULL, NULL };
	uint32_t max_len = MAX_LEN;
	int opt, n_total = 300, verbose = 0, done = 0, all_ok, ok;
	int have_seed = 0;
	long long t0;

	while ((opt = getopt(argc, argv, "d:g:D:G:s:n:m:v")) != -1) {
		if (opt == 'd')
			dev[0] = optarg;
		else if (opt == 'g')
			gid_idx[0] = atoi(optarg);
		else if (opt == 'D')
			dev[1] = optarg;
		else if (opt == 'G')
			gid_idx[1] = atoi(optarg);
		else if (opt == 's')
			seed = strtoull(optarg, NULL, 0), have_seed = 1;
		else if (opt == 'n')
			n_total = atoi(optarg);
		else if (opt == 'm')
			max_len = (uint32_t)strtoul(optarg, NULL, 0);
		else if (opt == 'v')
			verbose = 1;
		else
			return 2;
	}
	if (!dev[0] || gid_idx[0] < 0 || (!dev[1] != (gid_idx[1] < 0)) || n_total < 1 ||
	    max_len < 1 || max_len > MAX_LEN) {
		fprintf(stderr, "usage: %s -d DEV -g GIDINDEX [-D DEV2 -G GIDINDEX2] [-s SEED] [-n OPS] [-m MAXLEN <= %d] [-v]\n",
			argv[0], MAX_LEN);
		return 2;
	}
	if (!have_seed)
		seed = (uint64_t)time(NULL) ^ ((uint64_t)getpid() << 16);
	/* Seeds next to each other give unrelated sequences. */
	rng = mix(seed ^ 0x6a09e667f3bcc909ULL);

	printf("TAP version 13\n");
	printf("# seed %llu: %d operations up to %u bytes (replay: -s %llu -n %d -m %u)\n",
	       (unsigned long long)seed, n_total, max_len, (unsigned long long)seed, n_total, max_len);
	fflush(stdout);
	expect = map(SLOT);
	if (!expect || !open_side(0, dev[0]))
		goto close;
	if (dev[1]) {
		if (!open_side(1, dev[1]))
			goto close;
	} else {
		/* Both QPs on one device, still a PD and MRs of its own each. */
		ctx[1] = ctx[0];
		gid[1] = gid[0];
		gid_idx[1] = gid_idx[0];
		pd[1] = ibv_alloc_pd(ctx[1]);
		buf[1] = map(BUF_LEN);
		ok = reg_slots(1);
		check(ok, "a second PD and %d MRs on %s for B", MAX_BATCH, dev[0]);
		if (!ok)
			goto close;
	}
	if (!setup_qps())
		goto close;

	t0 = now_ms();
	done = run(n_total, max_len, verbose);
	printf("# %d operations, %llu bytes, in %lld ms\n", done, bytes_moved, now_ms() - t0);
	for (int k = 0; k < NKINDS; k++) {
		check(!comp_bad[k] && (n_ops[k] || n_total < 100),
		      "%s: %d ops (%u..%u bytes, %d inline, %d unsignaled, %d with several SGEs): every completion as expected (%d wrong)",
		      kind_name[k], n_ops[k], len_min[k], len_max[k], n_inline[k], n_unsig[k],
		      n_multi[k], comp_bad[k]);
		check(!data_bad[k] && (n_ops[k] || n_total < 100),
		      "%s: data correct on both ends (%d of %d ops wrong)", kind_name[k], data_bad[k],
		      n_ops[k]);
	}
	check(!extra_wcs, "no unexpected completions (%d)", extra_wcs);
	all_ok = done == n_total && !extra_wcs;
	for (int k = 0; k < NKINDS; k++)
		all_ok = all_ok && !comp_bad[k] && !data_bad[k];
	check(all_ok, "all %d operations completed with correct data and completions (%d done; seed %llu)",
	      n_total, done, (unsigned long long)seed);

close:
	for (int i = 0; i < 2; i++) {
		if (qp[i])
			ibv_destroy_qp(qp[i]);
		if (scq[i])
			ibv_destroy_cq(scq[i]);
		if (rcq[i])
			ibv_destroy_cq(rcq[i]);
	}
	for (int i = 0; i < 2; i++) {
		for (int j = 0; j < MAX_BATCH; j++) {
			if (mr[i][j])
				ibv_dereg_mr(mr[i][j]);
		}
		if (pd[i])
			ibv_dealloc_pd(pd[i]);
	}
	for (int i = 0; i < (dev[1] ? 2 : 1); i++)
		if (ctx[i])
			ibv_close_device(ctx[i]);
	printf("1..%d\n", n_checks);
	return n_failed ? 1 : 0;
}
