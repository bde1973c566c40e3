// SPDX-License-Identifier: GPL-2.0 OR Linux-OpenIB
/*
 * ex-test: the extended verbs on one RDMA device through libibverbs, in TAP.
 * Extended CQs (ibv_create_cq_ex, ibv_start_poll/ibv_next_poll/ibv_end_poll
 * and every ibv_wc_read_* the CQ was asked for) and QPs made with
 * ibv_create_qp_ex and IBV_QP_INIT_ATTR_SEND_OPS_FLAGS, posting with the
 * ibv_wr_* builders and setters: between two RC QPs of the device (connected
 * to each other over its own GID) SEND, SEND with immediate, inline data (one
 * buffer and a list), SGE lists, RDMA WRITE (with immediate, and unsignaled),
 * RDMA READ, compare-and-swap and fetch-and-add, a batch that ibv_wr_abort
 * drops, a batch whose error makes ibv_wr_complete post nothing, several
 * completions walked with ibv_next_poll; between two UD QPs a SEND with
 * immediate addressed by ibv_wr_set_ud_addr. Creation refusals: wc_flags and
 * send_ops_flags the provider cannot honour. Run against rxud and against
 * rxe, it must pass on both.
 *
 *   ex-test -d DEV -g GIDINDEX   run the checks; GIDINDEX is a RoCE v2 GID
 *                                of port 1
 *   -q   DEV is rdma-core 44's rxe: skip the checks its provider fails
 *        (ibv_wr_set_inline_data_list sends nothing, and ibv_end_poll after
 *        ibv_next_poll's ENOENT moves the consumer index past the producer:
 *        fixed upstream by rdma-core 1e8ed0aff and b78b414e0)
 *   -s   also the check where rxud departs from rxe on purpose: it refuses
 *        a UD request without ibv_wr_set_ud_addr at ibv_wr_complete
 *
 * rdma-core 44's rxe also sums an SGE list's lengths wrongly unless they are
 * equal (fixed upstream by 406cd2ad0): the lists here have equal lengths.
 * Every completion is waited for at most POLL_MS.
 */
#include <arpa/inet.h>
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

#define BUF_LEN 65536
#define ALL_ACCESS (IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | \
		    IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC)
#define INLINE_LEN 64
#define POLL_MS 10000
#define QUIET_MS 300
#define QKEY 0x11111111

/* Offsets into the buffers. */
#define RECV_OFF	0	/* receives, 4096 bytes */
#define WRITE_OFF	8192	/* RDMA WRITE from an SGE list, 3000 bytes */
#define WIMM_OFF	16384	/* RDMA WRITE with immediate, 2000 bytes */
#define READ_OFF	24576	/* RDMA READ, 1500 bytes */
#define ATOMIC_OFF	40960	/* B's atomic word; A's results at +8 and +16 */

static struct ibv_context *ctx;
static struct ibv_pd *pd;
static union ibv_gid gid;
static int gid_idx = -1, rxe_quirks, strict;
static uint8_t *buf_a, *buf_b;
static struct ibv_mr *mr_a, *mr_b;

static void skip(const char *what)
{
	check(1, "%s # SKIP rdma-core 44's rxe provider gets this wrong", what);
}

/* --- Extended completions --- */

/* A completion as the extended CQ (made with IBV_WC_STANDARD_FLAGS) reads it. */
struct got {
	uint64_t wr_id;
	int status;
	int opcode;
	uint32_t vendor_err, byte_len, imm, qp_num, src_qp, wc_flags, slid;
	uint8_t sl, dlid_path_bits;
};

static void read_cur(struct ibv_cq_ex *cq, struct got *g)
{
	g->wr_id = cq->wr_id;
	g->status = cq->status;
	g->opcode = ibv_wc_read_opcode(cq);
	g->vendor_err = ibv_wc_read_vendor_err(cq);
	g->byte_len = ibv_wc_read_byte_len(cq);
	g->imm = ntohl(ibv_wc_read_imm_data(cq));
	g->qp_num = ibv_wc_read_qp_num(cq);
	g->src_qp = ibv_wc_read_src_qp(cq);
	g->wc_flags = ibv_wc_read_wc_flags(cq);
	g->slid = ibv_wc_read_slid(cq);
	g->sl = ibv_wc_read_sl(cq);
	g->dlid_path_bits = ibv_wc_read_dlid_path_bits(cq);
}

/*
 * One completion of @cq into @g, waiting at most @ms: start_poll, the
 * read_* callbacks, end_poll. 1 if one came.
 */
static int poll_ex(struct ibv_cq_ex *cq, struct got *g, int ms)
{
	struct ibv_poll_cq_attr attr = {};
	long long deadline = now_ms() + ms;

	memset(g, 0, sizeof(*g));
	for (int i = 0;; i++) {
		int ret = ibv_start_poll(cq, &attr);

		if (!ret) {
			read_cur(cq, g);
			ibv_end_poll(cq);
			return 1;
		}
		if (ret != ENOENT || now_ms() >= deadline)
			return 0;
		if (i > 10)
			usleep(200);
	}
}

/* No completion on @cq within @ms (start_poll keeps answering ENOENT). */
static int stays_empty(struct ibv_cq_ex *cq, int ms)
{
	struct got g;

	return !poll_ex(cq, &g, ms);
}

/*
 * The next completion of @cq is work request @wr_id's, successful, with
 * @opcode, on QP @qpn, vendor_err 0, and no LID, SL or path bits (RoCE):
 * one check; the completion in @g. 1 if all matched.
 */
static int expect(struct ibv_cq_ex *cq, uint64_t wr_id, int opcode, uint32_t qpn, struct got *g,
		  const char *what)
{
	int ok;

	if (!poll_ex(cq, g, POLL_MS)) {
		check(0, "%s: %s of wr_id %llu (no completion)", what, wc_opcode_name(opcode),
		      (unsigned long long)wr_id);
		return 0;
	}
	ok = g->wr_id == wr_id && g->status == IBV_WC_SUCCESS && g->opcode == opcode &&
	     g->qp_num == qpn && !g->vendor_err && !g->slid && !g->sl && !g->dlid_path_bits;
	check(ok, "%s: %s of wr_id %llu on QPN %#x (got %s, %s, wr_id %llu, QPN %#x, "
	      "vendor_err %u, slid %u, sl %u, path bits %u)", what, wc_opcode_name(opcode),
	      (unsigned long long)wr_id, qpn, ibv_wc_status_str(g->status), wc_opcode_name(g->opcode),
	      (unsigned long long)g->wr_id, g->qp_num, g->vendor_err, g->slid, g->sl,
	      g->dlid_path_bits);
	return ok;
}

/* --- Objects --- */

static struct ibv_cq_ex *make_cq(uint64_t wc_flags, uint32_t comp_mask)
{
	struct ibv_cq_init_attr_ex a = { .cqe = 32, .wc_flags = wc_flags, .comp_mask = comp_mask };

	errno = 0;
	return ibv_create_cq_ex(ctx, &a);
}

#define RC_OPS (IBV_QP_EX_WITH_SEND | IBV_QP_EX_WITH_SEND_WITH_IMM | IBV_QP_EX_WITH_RDMA_WRITE | \
		IBV_QP_EX_WITH_RDMA_WRITE_WITH_IMM | IBV_QP_EX_WITH_RDMA_READ | \
		IBV_QP_EX_WITH_ATOMIC_CMP_AND_SWP | IBV_QP_EX_WITH_ATOMIC_FETCH_AND_ADD)
#define UD_OPS (IBV_QP_EX_WITH_SEND | IBV_QP_EX_WITH_SEND_WITH_IMM)

/* A QP of @type on @cq, with the ibv_wr_* operations @ops; its caps in @cap. */
static struct ibv_qp *make_qp(struct ibv_cq_ex *cq, enum ibv_qp_type type, uint64_t ops,
			      struct ibv_qp_cap *cap)
{
	struct ibv_qp_init_attr_ex a = {
		.send_cq = ibv_cq_ex_to_cq(cq),
		.recv_cq = ibv_cq_ex_to_cq(cq),
		.qp_type = type,
		.cap = { .max_send_wr = 16, .max_recv_wr = 16, .max_send_sge = 4,
			 .max_recv_sge = 4, .max_inline_data = INLINE_LEN },
		.comp_mask = IBV_QP_INIT_ATTR_PD | IBV_QP_INIT_ATTR_SEND_OPS_FLAGS,
		.pd = pd,
		.send_ops_flags = ops,
	};
	struct ibv_qp *qp;

	errno = 0;
	qp = ibv_create_qp_ex(ctx, &a);
	if (qp && cap)
		*cap = a.cap;
	return qp;
}

static int to_init(struct ibv_qp *qp)
{
	struct ibv_qp_attr a = { .qp_state = IBV_QPS_INIT, .port_num = 1 };
	int mask = IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT;

	if (qp->qp_type == IBV_QPT_UD) {
		a.qkey = QKEY;
		mask |= IBV_QP_QKEY;
	} else {
		a.qp_access_flags = IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ |
				    IBV_ACCESS_REMOTE_ATOMIC;
		mask |= IBV_QP_ACCESS_FLAGS;
	}
	return ibv_modify_qp(qp, &a, mask);
}

/* An RC QP from RESET to RTS, connected to @dest_qpn of this device. */
static int connect_rc(struct ibv_qp *qp, uint32_t dest_qpn, uint32_t sq_psn, uint32_t rq_psn)
{
	struct ibv_qp_attr a;
	int err = to_init(qp);

	if (err)
		return err;
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTR;
	a.ah_attr = (struct ibv_ah_attr){ .is_global = 1, .port_num = 1,
		.grh = { .dgid = gid, .sgid_index = gid_idx, .hop_limit = 64 } };
	a.path_mtu = IBV_MTU_1024;
	a.dest_qp_num = dest_qpn;
	a.rq_psn = rq_psn;
	a.max_dest_rd_atomic = 4;
	a.min_rnr_timer = 1;
	err = ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN |
			    IBV_QP_RQ_PSN | IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER);
	if (err)
		return err;
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTS;
	a.sq_psn = sq_psn;
	a.timeout = 17;	/* 537 ms: a starved TCG guest must not run out of retries */
	a.retry_cnt = 7;
	a.rnr_retry = 7;
	a.max_rd_atomic = 4;
	return ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_SQ_PSN | IBV_QP_TIMEOUT |
			     IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY | IBV_QP_MAX_QP_RD_ATOMIC);
}

static int ud_ready(struct ibv_qp *qp)
{
	struct ibv_qp_attr a = { .qp_state = IBV_QPS_RTR };
	int err = to_init(qp);

	if (!err)
		err = ibv_modify_qp(qp, &a, IBV_QP_STATE);
	if (!err) {
		a.qp_state = IBV_QPS_RTS;
		a.sq_psn = 0x22;
		err = ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_SQ_PSN);
	}
	return err;
}

static int post_recv(struct ibv_qp *qp, uint64_t wr_id, size_t off, uint32_t len)
{
	struct ibv_sge sg = { .addr = (uintptr_t)buf_b + off, .length = len, .lkey = mr_b->lkey };
	struct ibv_recv_wr wr = { .wr_id = wr_id, .sg_list = &sg, .num_sge = 1 }, *bad;

	return ibv_post_recv(qp, &wr, &bad);
}

static uint64_t addr_a(size_t off) { return (uintptr_t)buf_a + off; }
static uint64_t addr_b(size_t off) { return (uintptr_t)buf_b + off; }

/* --- The checks --- */

static void create_checks(void)
{
	struct ibv_cq_ex *cq, *bad;
	struct ibv_poll_cq_attr attr = {};
	struct ibv_qp *qp, *classic;
	struct ibv_qp_ex *qpx;

	cq = make_cq(IBV_WC_STANDARD_FLAGS, 0);
	check(cq != NULL, "create_cq_ex with IBV_WC_STANDARD_FLAGS (%s)", strerror(errno));
	if (!cq)
		return;
	check(ibv_start_poll(cq, &attr) == ENOENT, "start_poll on an empty CQ: ENOENT");
	bad = make_cq(IBV_WC_STANDARD_FLAGS | IBV_WC_EX_WITH_COMPLETION_TIMESTAMP, 0);
	check(!bad && errno == EOPNOTSUPP, "create_cq_ex with COMPLETION_TIMESTAMP: EOPNOTSUPP (got %s)",
	      bad ? "a CQ" : strerror(errno));
	if (bad)
		ibv_destroy_cq(ibv_cq_ex_to_cq(bad));
	bad = make_cq(IBV_WC_EX_WITH_BYTE_LEN | IBV_WC_EX_WITH_CVLAN, 0);
	check(!bad && errno == EOPNOTSUPP, "create_cq_ex with CVLAN: EOPNOTSUPP (got %s)",
	      bad ? "a CQ" : strerror(errno));
	if (bad)
		ibv_destroy_cq(ibv_cq_ex_to_cq(bad));
	bad = make_cq(IBV_WC_STANDARD_FLAGS, 1 << 7);
	check(!bad, "create_cq_ex with an unknown comp_mask bit: refused");
	if (bad)
		ibv_destroy_cq(ibv_cq_ex_to_cq(bad));

	qp = make_qp(cq, IBV_QPT_RC, RC_OPS, NULL);
	check(qp != NULL, "create_qp_ex RC with SEND, SEND_WITH_IMM, RDMA_WRITE (with immediate), "
	      "RDMA_READ and both atomics (%s)", strerror(errno));
	qpx = qp ? ibv_qp_to_qp_ex(qp) : NULL;
	check(qpx && &qpx->qp_base == qp, "ibv_qp_to_qp_ex gives the QP's ibv_qp_ex");
	if (qp)
		check_err(ibv_destroy_qp(qp), 0, "destroy_qp of an extended QP");
	{
		struct ibv_qp_init_attr ia = {
			.send_cq = ibv_cq_ex_to_cq(cq), .recv_cq = ibv_cq_ex_to_cq(cq),
			.qp_type = IBV_QPT_RC, .cap = { .max_send_wr = 4, .max_recv_wr = 4,
							.max_send_sge = 1, .max_recv_sge = 1 },
		};

		classic = ibv_create_qp(pd, &ia);
		check(classic && !ibv_qp_to_qp_ex(classic),
		      "ibv_qp_to_qp_ex of a QP from ibv_create_qp: NULL");
		if (classic)
			ibv_destroy_qp(classic);
	}
	qp = make_qp(cq, IBV_QPT_UD, IBV_QP_EX_WITH_SEND | IBV_QP_EX_WITH_RDMA_WRITE, NULL);
	check(!qp && errno == EOPNOTSUPP, "create_qp_ex UD with RDMA_WRITE: EOPNOTSUPP (got %s)",
	      qp ? "a QP" : strerror(errno));
	if (qp)
		ibv_destroy_qp(qp);
	for (int t = 0; t < 2; t++) {
		qp = make_qp(cq, t ? IBV_QPT_UD : IBV_QPT_RC,
			     IBV_QP_EX_WITH_SEND | IBV_QP_EX_WITH_TSO, NULL);
		check(!qp && errno == EOPNOTSUPP, "create_qp_ex %s with TSO: EOPNOTSUPP (got %s)",
		      t ? "UD" : "RC", qp ? "a QP" : strerror(errno));
		if (qp)
			ibv_destroy_qp(qp);
	}
	qp = make_qp(cq, IBV_QPT_RC, IBV_QP_EX_WITH_SEND | (1ULL << 40), NULL);
	check(!qp && errno == EOPNOTSUPP, "create_qp_ex with an unknown send_ops_flags bit: "
	      "EOPNOTSUPP (got %s)", qp ? "a QP" : strerror(errno));
	if (qp)
		ibv_destroy_qp(qp);
	check_err(ibv_destroy_cq(ibv_cq_ex_to_cq(cq)), 0, "destroy_cq of an extended CQ");
}

struct rc {
	struct ibv_cq_ex *cq[2];
	struct ibv_qp *qp[2];
	struct ibv_qp_ex *x;	/* A's */
	struct ibv_qp_cap cap;	/* A's */
	uint64_t next_recv;
};

static int rc_make(struct rc *p)
{
	int err = 0;

	memset(p, 0, sizeof(*p));
	p->next_recv = 1000;
	for (int i = 0; i < 2 && !err; i++) {
		p->cq[i] = make_cq(IBV_WC_STANDARD_FLAGS, 0);
		p->qp[i] = p->cq[i] ? make_qp(p->cq[i], IBV_QPT_RC, RC_OPS, i ? NULL : &p->cap) : NULL;
		if (!p->qp[i])
			err = errno ? errno : EIO;
	}
	if (!err)
		err = connect_rc(p->qp[0], p->qp[1]->qp_num, 0x100, 0x1100);
	if (!err)
		err = connect_rc(p->qp[1], p->qp[0]->qp_num, 0x1100, 0x100);
	if (!err)
		p->x = ibv_qp_to_qp_ex(p->qp[0]);
	check(!err && p->x, "RC pair of extended CQs and QPs, connected (%s)", strerror(err));
	return !err && p->x;
}

static void rc_destroy(struct rc *p)
{
	for (int i = 0; i < 2; i++)
		if (p->qp[i])
			ibv_destroy_qp(p->qp[i]);
	for (int i = 0; i < 2; i++)
		if (p->cq[i])
			ibv_destroy_cq(ibv_cq_ex_to_cq(p->cq[i]));
}

/* B's receive of a message of @len bytes (or flush) with flags: one check. */
static int expect_recv(struct rc *p, uint64_t wr_id, int opcode, uint32_t len, int imm,
		       uint32_t imm_val, const char *what)
{
	struct got g;
	int ok;

	if (!expect(p->cq[1], wr_id, opcode, p->qp[1]->qp_num, &g, what))
		return 0;
	ok = g.byte_len == len && !!(g.wc_flags & IBV_WC_WITH_IMM) == imm &&
	     (!imm || g.imm == imm_val);
	check(ok, "%s: B's receive: byte_len %u, %s %#x (got %u, flags %#x, imm %#x)", what, len,
	      imm ? "immediate" : "no immediate", imm ? imm_val : 0, g.byte_len, g.wc_flags, g.imm);
	return ok;
}

static void send_checks(struct rc *p)
{
	struct ibv_qp_ex *x = p->x;
	uint32_t qa = p->qp[0]->qp_num;
	uint8_t inl[INLINE_LEN], part[3][20];
	struct ibv_data_buf list[3] = {
		{ part[0], 10 }, { part[1], 20 }, { part[2], 5 },
	};
	struct got g;
	int ret;

	/* SEND, one SGE. */
	fill(buf_a, 100, 1);
	memset(buf_b, 0, 4096);
	post_recv(p->qp[1], 101, RECV_OFF, 4096);
	ibv_wr_start(x);
	x->wr_id = 1;
	x->wr_flags = IBV_SEND_SIGNALED;
	ibv_wr_send(x);
	ibv_wr_set_sge(x, mr_a->lkey, addr_a(0), 100);
	check_err(ibv_wr_complete(x), 0, "SEND: wr_complete");
	if (expect(p->cq[0], 1, IBV_WC_SEND, qa, &g, "SEND"))
		check(g.byte_len == 100, "SEND: A's byte_len 100 (got %u)", g.byte_len);
	expect_recv(p, 101, IBV_WC_RECV, 100, 0, 0, "SEND");
	check(same(buf_b, 100, 1) && !buf_b[100], "SEND: the data arrived, nothing past it");

	/* SEND with immediate, inline: the buffer is reused before wr_complete. */
	fill(inl, 40, 2);
	post_recv(p->qp[1], 102, RECV_OFF, 4096);
	ibv_wr_start(x);
	x->wr_id = 2;
	x->wr_flags = IBV_SEND_SIGNALED | IBV_SEND_INLINE;
	ibv_wr_send_imm(x, htonl(0x01020304));
	ibv_wr_set_inline_data(x, inl, 40);
	memset(inl, 0xee, sizeof(inl));
	check_err(ibv_wr_complete(x), 0, "SEND with immediate, inline: wr_complete");
	expect(p->cq[0], 2, IBV_WC_SEND, qa, &g, "SEND with immediate, inline");
	expect_recv(p, 102, IBV_WC_RECV, 40, 1, 0x01020304, "SEND with immediate, inline");
	check(same(buf_b, 40, 2), "SEND with immediate, inline: the data as it was when set");

	/* SEND, inline list. */
	fill(part[0], 10, 3);
	fill(part[1], 20, 3 + 10 * 7);
	fill(part[2], 5, 3 + 30 * 7);
	post_recv(p->qp[1], 103, RECV_OFF, 4096);
	ibv_wr_start(x);
	x->wr_id = 3;
	x->wr_flags = IBV_SEND_SIGNALED | IBV_SEND_INLINE;
	ibv_wr_send(x);
	ibv_wr_set_inline_data_list(x, 3, list);
	check_err(ibv_wr_complete(x), 0, "SEND, inline list: wr_complete");
	expect(p->cq[0], 3, IBV_WC_SEND, qa, &g, "SEND, inline list");
	if (rxe_quirks) {
		poll_ex(p->cq[1], &g, POLL_MS);
		skip("SEND, inline list of 10+20+5 bytes: B's receive has the 35 bytes");
	} else if (expect_recv(p, 103, IBV_WC_RECV, 35, 0, 0, "SEND, inline list")) {
		/* fill() of the parts at their offsets makes one pattern. */
		int ok = 1;

		for (int i = 0; i < 35; i++)
			ok &= buf_b[i] == (i < 10 ? part[0][i] : i < 30 ? part[1][i - 10] :
					   part[2][i - 30]);
		check(ok, "SEND, inline list: the three buffers arrived one after the other");
	}

	/* Inline data too long: wr_complete fails, nothing of the batch goes. */
	post_recv(p->qp[1], 104, RECV_OFF, 4096);
	ibv_wr_start(x);
	x->wr_id = 4;
	x->wr_flags = IBV_SEND_SIGNALED;
	ibv_wr_send(x);
	ibv_wr_set_sge(x, mr_a->lkey, addr_a(0), 10);
	x->wr_id = 5;
	x->wr_flags = IBV_SEND_SIGNALED | IBV_SEND_INLINE;
	ibv_wr_send(x);
	ibv_wr_set_inline_data(x, buf_a, p->cap.max_inline_data + 1);
	ret = ibv_wr_complete(x);
	check(ret != 0, "a batch with inline data beyond max_inline_data (%u): wr_complete fails "
	      "(got %s)", p->cap.max_inline_data, ret ? strerror(ret) : "success");
	check(stays_empty(p->cq[0], QUIET_MS) && stays_empty(p->cq[1], QUIET_MS),
	      "the failed batch sent nothing, not even its valid first request");

	/* wr_abort: nothing is sent; then ibv_post_send and ibv_poll_cq on them. */
	ibv_wr_start(x);
	x->wr_id = 6;
	x->wr_flags = IBV_SEND_SIGNALED;
	ibv_wr_send(x);
	ibv_wr_set_sge(x, mr_a->lkey, addr_a(0), 77);
	ibv_wr_abort(x);
	check(stays_empty(p->cq[0], QUIET_MS) && stays_empty(p->cq[1], QUIET_MS),
	      "wr_abort: nothing sent, no completion");
	{
		struct ibv_sge sg = { .addr = addr_a(0), .length = 16, .lkey = mr_a->lkey };
		struct ibv_send_wr wr = { .wr_id = 7, .sg_list = &sg, .num_sge = 1,
					  .opcode = IBV_WR_SEND, .send_flags = IBV_SEND_SIGNALED };
		struct ibv_send_wr *bad;
		struct ibv_wc wc = {};
		long long deadline = now_ms() + POLL_MS;
		int n;

		check_err(ibv_post_send(p->qp[0], &wr, &bad), 0,
			  "ibv_post_send on a QP made by ibv_create_qp_ex");
		while (!(n = ibv_poll_cq(ibv_cq_ex_to_cq(p->cq[0]), 1, &wc)) &&
		       now_ms() < deadline)
			usleep(200);
		check(n == 1 && wc.wr_id == 7 && wc.status == IBV_WC_SUCCESS &&
		      wc.opcode == IBV_WC_SEND, "ibv_poll_cq on an extended CQ: the SEND's completion "
		      "(got %d, wr_id %llu, %s)", n, (unsigned long long)wc.wr_id,
		      ibv_wc_status_str(wc.status));
		expect_recv(p, 104, IBV_WC_RECV, 16, 0, 0, "SEND after the abort");
	}
}

static void rdma_checks(struct rc *p)
{
	struct ibv_qp_ex *x = p->x;
	uint32_t qa = p->qp[0]->qp_num, rkey = mr_b->rkey;
	struct ibv_sge sgl[3];
	uint64_t *word = (uint64_t *)(buf_b + ATOMIC_OFF);
	uint64_t *old1 = (uint64_t *)(buf_a + ATOMIC_OFF + 8);
	uint64_t *old2 = (uint64_t *)(buf_a + ATOMIC_OFF + 16);
	struct got g;

	/* An unsignaled RDMA WRITE from a list of three SGEs, then a SEND. */
	fill(buf_a + WRITE_OFF, 3000, 4);
	memset(buf_b + WRITE_OFF, 0, 3000);
	for (int i = 0; i < 3; i++)
		sgl[i] = (struct ibv_sge){ .addr = addr_a(WRITE_OFF + 1000 * (2 - i)),
					   .length = 1000, .lkey = mr_a->lkey };
	post_recv(p->qp[1], 201, RECV_OFF, 4096);
	ibv_wr_start(x);
	x->wr_id = 10;
	x->wr_flags = 0;
	ibv_wr_rdma_write(x, rkey, addr_b(WRITE_OFF));
	ibv_wr_set_sge_list(x, 3, sgl);
	memset(sgl, 0, sizeof(sgl));
	x->wr_id = 11;
	x->wr_flags = IBV_SEND_SIGNALED;
	ibv_wr_send(x);
	check_err(ibv_wr_complete(x), 0, "unsignaled RDMA WRITE of an SGE list, then a SEND: "
		  "wr_complete");
	expect(p->cq[0], 11, IBV_WC_SEND, qa, &g, "RDMA WRITE, then SEND: only the SEND completes");
	expect_recv(p, 201, IBV_WC_RECV, 0, 0, 0, "RDMA WRITE, then a zero-length SEND");
	check(!memcmp(buf_b + WRITE_OFF, buf_a + WRITE_OFF + 2000, 1000) &&
	      !memcmp(buf_b + WRITE_OFF + 1000, buf_a + WRITE_OFF + 1000, 1000) &&
	      !memcmp(buf_b + WRITE_OFF + 2000, buf_a + WRITE_OFF, 1000),
	      "RDMA WRITE of an SGE list: the three pieces, in list order");

	/* RDMA WRITE with immediate. */
	fill(buf_a + WIMM_OFF, 2000, 5);
	memset(buf_b + WIMM_OFF, 0, 2000);
	post_recv(p->qp[1], 202, RECV_OFF, 4096);
	ibv_wr_start(x);
	x->wr_id = 12;
	x->wr_flags = IBV_SEND_SIGNALED;
	ibv_wr_rdma_write_imm(x, rkey, addr_b(WIMM_OFF), htonl(0xa1b2c3d4));
	ibv_wr_set_sge(x, mr_a->lkey, addr_a(WIMM_OFF), 2000);
	check_err(ibv_wr_complete(x), 0, "RDMA WRITE with immediate: wr_complete");
	if (expect(p->cq[0], 12, IBV_WC_RDMA_WRITE, qa, &g, "RDMA WRITE with immediate"))
		check(g.byte_len == 2000, "RDMA WRITE with immediate: A's byte_len 2000 (got %u)",
		      g.byte_len);
	expect_recv(p, 202, IBV_WC_RECV_RDMA_WITH_IMM, 2000, 1, 0xa1b2c3d4,
		    "RDMA WRITE with immediate");
	check(same(buf_b + WIMM_OFF, 2000, 5), "RDMA WRITE with immediate: the data arrived");

	/* RDMA READ. */
	fill(buf_b + READ_OFF, 1500, 6);
	memset(buf_a + READ_OFF, 0, 1500);
	ibv_wr_start(x);
	x->wr_id = 13;
	x->wr_flags = IBV_SEND_SIGNALED;
	ibv_wr_rdma_read(x, rkey, addr_b(READ_OFF));
	ibv_wr_set_sge(x, mr_a->lkey, addr_a(READ_OFF), 1500);
	check_err(ibv_wr_complete(x), 0, "RDMA READ: wr_complete");
	if (expect(p->cq[0], 13, IBV_WC_RDMA_READ, qa, &g, "RDMA READ"))
		check(g.byte_len == 1500, "RDMA READ: byte_len 1500 (got %u)", g.byte_len);
	check(same(buf_a + READ_OFF, 1500, 6), "RDMA READ: the data arrived");

	/* Compare-and-swap, then fetch-and-add, in one batch. */
	*word = 0x1111;
	*old1 = *old2 = 0;
	ibv_wr_start(x);
	x->wr_id = 14;
	x->wr_flags = IBV_SEND_SIGNALED;
	ibv_wr_atomic_cmp_swp(x, rkey, addr_b(ATOMIC_OFF), 0x1111, 0x2222);
	ibv_wr_set_sge(x, mr_a->lkey, addr_a(ATOMIC_OFF + 8), 8);
	x->wr_id = 15;
	ibv_wr_atomic_fetch_add(x, rkey, addr_b(ATOMIC_OFF), 5);
	ibv_wr_set_sge(x, mr_a->lkey, addr_a(ATOMIC_OFF + 16), 8);
	check_err(ibv_wr_complete(x), 0, "compare-and-swap, fetch-and-add: wr_complete");
	if (expect(p->cq[0], 14, IBV_WC_COMP_SWAP, qa, &g, "compare-and-swap"))
		check(g.byte_len == 8, "compare-and-swap: byte_len 8 (got %u)", g.byte_len);
	if (expect(p->cq[0], 15, IBV_WC_FETCH_ADD, qa, &g, "fetch-and-add"))
		check(g.byte_len == 8, "fetch-and-add: byte_len 8 (got %u)", g.byte_len);
	check(*old1 == 0x1111 && *old2 == 0x2222 && *word == 0x2227,
	      "atomics: original values 0x1111 and 0x2222 returned, 0x2227 left (got %#llx, "
	      "%#llx, %#llx)", (unsigned long long)*old1, (unsigned long long)*old2,
	      (unsigned long long)*word);
}

/* Three SENDs in one batch; B walks their receives with next_poll. */
static void next_poll_checks(struct rc *p)
{
	struct ibv_qp_ex *x = p->x;
	struct ibv_poll_cq_attr attr = {};
	struct ibv_cq_ex *cb = p->cq[1];
	struct got g[3];
	int ret, n = 0, ok = 1;

	for (int i = 0; i < 3; i++)
		post_recv(p->qp[1], 301 + i, RECV_OFF + 1024 * i, 1024);
	ibv_wr_start(x);
	for (int i = 0; i < 3; i++) {
		x->wr_id = 21 + i;
		x->wr_flags = IBV_SEND_SIGNALED;
		ibv_wr_send(x);
		ibv_wr_set_sge(x, mr_a->lkey, addr_a(0), 8 + i);
	}
	check_err(ibv_wr_complete(x), 0, "three SENDs in one batch: wr_complete");
	/* RC completes a receive before it acknowledges the message. */
	for (int i = 0; i < 3; i++)
		ok &= poll_ex(p->cq[0], &g[0], POLL_MS) && g[0].wr_id == 21u + i &&
		      g[0].status == IBV_WC_SUCCESS;
	check(ok, "three SENDs in one batch: A's completions in order");
	ret = ibv_start_poll(cb, &attr);
	if (ret) {
		check(0, "start_poll with three receives waiting (got %s)", strerror(ret));
		return;
	}
	read_cur(cb, &g[n++]);
	while (n < 3 && !(ret = ibv_next_poll(cb)))
		read_cur(cb, &g[n++]);
	ok = n == 3;
	for (int i = 0; i < n; i++)
		ok &= g[i].wr_id == 301u + i && g[i].status == IBV_WC_SUCCESS &&
		      g[i].opcode == IBV_WC_RECV && g[i].byte_len == 8u + i &&
		      g[i].qp_num == p->qp[1]->qp_num;
	check(ok, "start_poll, next_poll, next_poll: the three receives in order, each read "
	      "(got %d)", n);
	ret = ibv_next_poll(cb);
	check(ret == ENOENT, "next_poll past the last one: ENOENT (got %s)",
	      ret ? strerror(ret) : "success");
	ibv_end_poll(cb);
	if (rxe_quirks) {
		skip("after next_poll's ENOENT and end_poll, the next completion is polled once");
		return;
	}
	post_recv(p->qp[1], 304, RECV_OFF, 1024);
	ibv_wr_start(x);
	x->wr_id = 24;
	ibv_wr_send(x);
	ibv_wr_set_sge(x, mr_a->lkey, addr_a(0), 11);
	check_err(ibv_wr_complete(x), 0, "one more SEND: wr_complete");
	expect(p->cq[0], 24, IBV_WC_SEND, p->qp[0]->qp_num, &g[0], "one more SEND");
	expect_recv(p, 304, IBV_WC_RECV, 11, 0, 0, "after next_poll's ENOENT and end_poll");
	check(stays_empty(cb, QUIET_MS), "and nothing after it (the consumer index did not "
	      "run past the producer)");
}

static void ud_checks(void)
{
	struct ibv_cq_ex *cq = make_cq(IBV_WC_STANDARD_FLAGS, 0);
	struct ibv_cq_ex *cb = make_cq(IBV_WC_STANDARD_FLAGS, 0);
	struct ibv_qp *qa = cq ? make_qp(cq, IBV_QPT_UD, UD_OPS, NULL) : NULL;
	struct ibv_qp *qb = cb ? make_qp(cb, IBV_QPT_UD, UD_OPS, NULL) : NULL;
	struct ibv_ah_attr av = { .is_global = 1, .port_num = 1,
		.grh = { .dgid = gid, .sgid_index = gid_idx, .hop_limit = 64 } };
	struct ibv_qp_ex *x;
	struct ibv_ah *ah = NULL;
	struct got g;
	int err = !qa || !qb ? (errno ? errno : EIO) : 0;

	if (!err)
		err = ud_ready(qa);
	if (!err)
		err = ud_ready(qb);
	if (!err && !(ah = ibv_create_ah(pd, &av)))
		err = errno ? errno : EIO;
	x = qa ? ibv_qp_to_qp_ex(qa) : NULL;
	check(!err && x, "two extended UD QPs and an AH to the device's GID (%s)", strerror(err));
	if (err || !x)
		goto out;

	fill(buf_a, 64, 7);
	memset(buf_b, 0, 4096);
	post_recv(qb, 401, RECV_OFF, 4096);
	ibv_wr_start(x);
	x->wr_id = 31;
	x->wr_flags = IBV_SEND_SIGNALED;
	ibv_wr_send_imm(x, htonl(0xfeedf00d));
	ibv_wr_set_ud_addr(x, ah, qb->qp_num, QKEY);
	ibv_wr_set_sge(x, mr_a->lkey, addr_a(0), 64);
	check_err(ibv_wr_complete(x), 0, "UD SEND with immediate: wr_complete");
	expect(cq, 31, IBV_WC_SEND, qa->qp_num, &g, "UD SEND with immediate");
	if (expect(cb, 401, IBV_WC_RECV, qb->qp_num, &g, "UD SEND with immediate: the receive"))
		check(g.byte_len == 40 + 64 && (g.wc_flags & IBV_WC_GRH) &&
		      (g.wc_flags & IBV_WC_WITH_IMM) && g.imm == 0xfeedf00d &&
		      g.src_qp == qa->qp_num,
		      "UD SEND with immediate: byte_len 40 + 64, GRH, immediate, src_qp A's (got %u, "
		      "flags %#x, imm %#x, src_qp %#x)", g.byte_len, g.wc_flags, g.imm, g.src_qp);
	check(same(buf_b + 40, 64, 7), "UD SEND with immediate: the data after the GRH");

	if (strict) {
		int ret;

		ibv_wr_start(x);
		x->wr_id = 32;
		ibv_wr_send(x);
		ibv_wr_set_sge(x, mr_a->lkey, addr_a(0), 8);
		ret = ibv_wr_complete(x);
		check(ret == EINVAL, "UD SEND without wr_set_ud_addr: wr_complete EINVAL (got %s)",
		      ret ? strerror(ret) : "success");
	}
out:
	if (ah)
		ibv_destroy_ah(ah);
	if (qa)
		ibv_destroy_qp(qa);
	if (qb)
		ibv_destroy_qp(qb);
	if (cq)
		ibv_destroy_cq(ibv_cq_ex_to_cq(cq));
	if (cb)
		ibv_destroy_cq(ibv_cq_ex_to_cq(cb));
}

static void *map(size_t len)
{
	void *p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

	return p == MAP_FAILED ? NULL : p;
}

int main(int argc, char **argv)
{
	const char *dev = NULL;
	struct rc p;
	int opt;

	while ((opt = getopt(argc, argv, "d:g:qs")) != -1) {
		if (opt == 'd')
			dev = optarg;
		else if (opt == 'g')
			gid_idx = atoi(optarg);
		else if (opt == 'q')
			rxe_quirks = 1;
		else if (opt == 's')
			strict = 1;
		else
			return 2;
	}
	if (!dev || gid_idx < 0) {
		fprintf(stderr, "usage: %s -d DEV -g GIDINDEX [-q] [-s]\n", argv[0]);
		return 2;
	}

	printf("TAP version 13\n");
	ctx = open_dev(dev);
	check(ctx != NULL, "open %s", dev);
	if (!ctx)
		goto done;
	check_err(ibv_query_gid(ctx, 1, gid_idx, &gid), 0, "query_gid 1/%d", gid_idx);
	pd = ibv_alloc_pd(ctx);
	buf_a = map(BUF_LEN);
	buf_b = map(BUF_LEN);
	mr_a = pd && buf_a ? ibv_reg_mr(pd, buf_a, BUF_LEN, ALL_ACCESS) : NULL;
	mr_b = pd && buf_b ? ibv_reg_mr(pd, buf_b, BUF_LEN, ALL_ACCESS) : NULL;
	check(mr_a && mr_b, "PD and two MRs with all access rights");
	if (!mr_a || !mr_b)
		goto close;

	create_checks();
	if (rc_make(&p)) {
		send_checks(&p);
		rdma_checks(&p);
		next_poll_checks(&p);
	}
	rc_destroy(&p);
	ud_checks();

close:
	if (mr_a)
		ibv_dereg_mr(mr_a);
	if (mr_b)
		ibv_dereg_mr(mr_b);
	if (pd)
		check_err(ibv_dealloc_pd(pd), 0, "dealloc_pd once everything is gone");
	check_err(ibv_close_device(ctx), 0, "close_device");
done:
	printf("1..%d\n", n_checks);
	return n_failed ? 1 : 0;
}
