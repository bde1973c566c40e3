// SPDX-License-Identifier: GPL-2.0 OR Linux-OpenIB
/*
 * rc-test: RC semantics on one RDMA device through libibverbs, in TAP. Two
 * RC QPs of the device, A (the requester of every check) and B (the
 * responder), are connected to each other (loopback over the device's own
 * GID) and exchange SENDs, RDMA WRITEs and READs, atomics and ATOMIC
 * WRITE (the ibv_wr_* interface: the one A is made with); errors (bad
 * rkey, out-of-bounds access, missing access rights, receive too small, RNR)
 * must complete with the statuses the IB spec sets and leave the QP in
 * error, where later work requests flush. Run against rxud and against rxe,
 * it must pass on both.
 *
 *   rc-test -d DEV -g GIDINDEX    run the checks; GIDINDEX is a RoCE v2 GID
 *                                 of port 1
 *   -D DEV2 -G GIDINDEX2          put QP B on DEV2 instead (two devices that
 *                                 reach each other: interoperation, and RC
 *                                 without loopback)
 *   -q                            B's device is rxe: expect rxe's statuses
 *                                 where it departs from the spec (see
 *                                 length_error_checks), and no async event
 *                                 from a responder's fatal error
 *   -e                            only the checks of errors that end the
 *                                 connection (access, invalid request, local
 *                                 failure, CQ overflow)
 *   -Q                            A's device is rxe: skip what rxe does
 *                                 otherwise (see local_failure_order_checks
 *                                 and cq_overflow_checks)
 *
 * Every completion is waited for at most POLL_MS: a check fails rather than
 * hang. Once one did not come, later waits are SHORT_MS, to keep a broken
 * device's run short.
 */
#include <errno.h>
#include <poll.h>
#include <stdarg.h>
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

/* --- Memory --- */

/*
 * Two buffers with an MR each and all access rights: A's (the requester's
 * local memory, on A's PD) and B's (the responder's, target of WRITEs,
 * source of READs, on B's PD). A third one of B's, registered without
 * remote write, for the access error.
 */
#define BUF_LEN 65536
#define ALL_ACCESS (IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | \
		    IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC)

/* The devices of A (0) and B (1), the same one unless -D. */
static struct ibv_context *ctx[2];
static struct ibv_pd *pd[2];
static union ibv_gid gid[2];
static int gid_idx[2] = { -1, -1 };
static int rxe_quirks;		/* -q */
static int rxe_requester;	/* -Q */
static int errors_only;		/* -e */
static uint8_t *buf_a, *buf_b, *buf_ro;
static struct ibv_mr *mr_a, *mr_b, *mr_ro;

/* Offsets into the buffers, one region per check. */
#define RECV_OFF	0	/* receives, up to 4096 bytes */
#define WRITE_OFF	8192	/* RDMA WRITE, 5000 bytes */
#define WIMM_OFF	16384	/* RDMA WRITE with immediate, 5000 bytes */
#define READ_OFF	24576	/* RDMA READ, 5000 bytes */
#define ATOMIC_OFF	40960	/* atomics, 8 bytes */

static int all_bytes(const uint8_t *p, size_t len, uint8_t v)
{
	for (size_t i = 0; i < len; i++)
		if (p[i] != v)
			return 0;
	return 1;
}

static struct ibv_sge sge(struct ibv_mr *mr, size_t off, uint32_t len)
{
	return (struct ibv_sge){ .addr = (uintptr_t)mr->addr + off, .length = len, .lkey = mr->lkey };
}

/* --- Completions --- */

#define POLL_MS 10000
#define SHORT_MS 1000

static int timed_out;	/* a completion did not come in POLL_MS */

/*
 * One completion of @cq into @wc, waiting at most @ms; 1 if one came. Polls,
 * sleeping a little between empty polls: under TCG a busy loop would starve
 * the kernel threads that make the completion.
 */
static int poll_wc(struct ibv_cq *cq, struct ibv_wc *wc, int ms)
{
	long long deadline = now_ms() + ms;
	int n;

	for (int i = 0;; i++) {
		n = ibv_poll_cq(cq, 1, wc);
		if (n)
			return n > 0;
		if (now_ms() >= deadline)
			return 0;
		if (i > 10)
			usleep(200);
	}
}

/*
 * The next completion of @cq must be that of work request @wr_id with
 * @status, and on success @opcode (the opcode of a failed completion is
 * undefined). @post_err is what posting the work request returned: if it
 * failed, so does the check, without waiting. Returns 1 if all matched, the
 * completion in @wc.
 */
__attribute__((format(printf, 7, 8)))
static int expect_wc(struct ibv_cq *cq, int post_err, uint64_t wr_id, enum ibv_wc_status status,
		     enum ibv_wc_opcode opcode, struct ibv_wc *wc, const char *fmt, ...)
{
	char what[256], got[160];
	struct ibv_wc tmp;
	va_list ap;
	int ok;

	if (!wc)
		wc = &tmp;
	memset(wc, 0, sizeof(*wc));
	va_start(ap, fmt);
	vsnprintf(what, sizeof(what), fmt, ap);
	va_end(ap);
	if (post_err) {
		snprintf(got, sizeof(got), "post failed: %s", strerror(post_err));
		ok = 0;
	} else if (!poll_wc(cq, wc, timed_out ? SHORT_MS : POLL_MS)) {
		snprintf(got, sizeof(got), "no completion in %d ms", timed_out ? SHORT_MS : POLL_MS);
		timed_out = 1;
		ok = 0;
	} else {
		snprintf(got, sizeof(got), "%s, %s, wr_id %llu", ibv_wc_status_str(wc->status),
			 wc->status == IBV_WC_SUCCESS ? wc_opcode_name(wc->opcode) : "-",
			 (unsigned long long)wc->wr_id);
		ok = wc->wr_id == wr_id && wc->status == status &&
		     (status != IBV_WC_SUCCESS || wc->opcode == opcode);
	}
	check(ok, "%s: %s%s%s (got %s)", what, ibv_wc_status_str(status),
	      status == IBV_WC_SUCCESS ? ", " : "",
	      status == IBV_WC_SUCCESS ? wc_opcode_name(opcode) : "", got);
	return ok;
}

/* No completion on @cq within @ms. */
static int cq_stays_empty(struct ibv_cq *cq, int ms)
{
	struct ibv_wc wc;

	return !poll_wc(cq, &wc, ms);
}

/* --- Posting --- */

static int post_recv(struct ibv_qp *qp, uint64_t wr_id, struct ibv_sge *sg, int n)
{
	struct ibv_recv_wr wr = { .wr_id = wr_id, .sg_list = sg, .num_sge = n }, *bad;

	return ibv_post_recv(qp, &wr, &bad);
}

/* Posts @wr (one work request; signaled unless @wr says otherwise). */
static int post_send(struct ibv_qp *qp, struct ibv_send_wr *wr)
{
	struct ibv_send_wr *bad;

	return ibv_post_send(qp, wr, &bad);
}

static struct ibv_send_wr send_wr(uint64_t wr_id, enum ibv_wr_opcode op, struct ibv_sge *sg, int n)
{
	return (struct ibv_send_wr){ .wr_id = wr_id, .opcode = op, .sg_list = sg, .num_sge = n,
				     .send_flags = IBV_SEND_SIGNALED };
}

static struct ibv_send_wr rdma_wr(uint64_t wr_id, enum ibv_wr_opcode op, struct ibv_sge *sg,
				  uint64_t raddr, uint32_t rkey)
{
	struct ibv_send_wr wr = send_wr(wr_id, op, sg, 1);

	wr.wr.rdma.remote_addr = raddr;
	wr.wr.rdma.rkey = rkey;
	return wr;
}

/* --- Connected QP pairs --- */

static const char *qps_name(int s)
{
	static const char *const n[] = { "RESET", "INIT", "RTR", "RTS", "SQD", "SQE", "ERR" };

	return s >= 0 && s < (int)ARRAY_SIZE(n) ? n[s] : "?";
}

/* The address vector of QP @i (0: A, 1: B) to the other one's GID. */
static struct ibv_ah_attr av_to_peer(int i)
{
	return (struct ibv_ah_attr){
		.is_global = 1,
		.port_num = 1,
		.grh = { .dgid = gid[1 - i], .sgid_index = gid_idx[i], .hop_limit = 64 },
	};
}

/*
 * QP A (qp[0], the requester of the checks) and QP B (qp[1], the
 * responder), each with a CQ of its own for both queues, connected to each
 * other.
 */
struct pair {
	struct ibv_cq *cq[2];
	struct ibv_qp *qp[2];
};

struct pair_opts {
	int rnr_retry;		/* of A (B always gets 7) */
	int min_rnr_timer;	/* of B (A always gets 1) */
	uint32_t psn;		/* A's first send PSN; B's is psn + 0x1000 */
	int cqe;		/* CQ entries asked for (0: 32) */
	int cqe_b;		/* B's CQ entries, if not as cqe */
	int one_cq;		/* A and B share A's CQ */
	struct ibv_srq *srq;	/* B's receives come from it, if set */
	int b_no_rd_atomic;	/* B's max_dest_rd_atomic is 0 (else 4) */
	int timeout, retry_cnt;	/* of A (0: 17 and 7) */
	uint64_t send_ops;	/* A made by ibv_create_qp_ex with these, if set */
};

/* Work requests of the checks retry RNR a little, with the shortest wait. */
static const struct pair_opts default_opts = { .rnr_retry = 3, .min_rnr_timer = 1,
					       .psn = 0x100 };

#define INLINE_LEN 64

/* Takes QP @i of a pair (0: A, 1: B) from RESET to RTS. */
static int connect_qp(struct ibv_qp *qp, int i, uint32_t dest_qpn, uint32_t sq_psn,
		      uint32_t rq_psn, const struct pair_opts *o)
{
	/* A retries RNR as asked; B always 7 times. B waits as asked. */
	const int rnr_retry = i ? 7 : o->rnr_retry;
	const int min_rnr_timer = i ? o->min_rnr_timer : 1;
	struct ibv_qp_attr a;
	int err;

	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_INIT;
	a.pkey_index = 0;
	a.port_num = 1;
	a.qp_access_flags = IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ |
			    IBV_ACCESS_REMOTE_ATOMIC;
	err = ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT |
			    IBV_QP_ACCESS_FLAGS);
	if (err)
		return err;

	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTR;
	a.ah_attr = av_to_peer(i);
	a.path_mtu = IBV_MTU_1024;
	a.dest_qp_num = dest_qpn;
	a.rq_psn = rq_psn;
	a.max_dest_rd_atomic = i && o->b_no_rd_atomic ? 0 : 4;
	a.min_rnr_timer = min_rnr_timer;
	err = ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN |
			    IBV_QP_RQ_PSN | IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER);
	if (err)
		return err;

	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTS;
	a.sq_psn = sq_psn;
	/* 537 ms: a starved TCG guest must not run out of retries */
	a.timeout = !i && o->timeout ? o->timeout : 17;
	a.retry_cnt = !i && o->retry_cnt ? o->retry_cnt : 7;
	a.rnr_retry = rnr_retry;
	a.max_rd_atomic = 4;
	return ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_SQ_PSN | IBV_QP_TIMEOUT |
			     IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY | IBV_QP_MAX_QP_RD_ATOMIC);
}

static void pair_destroy(struct pair *p)
{
	for (int i = 0; i < 2; i++)
		if (p->qp[i])
			ibv_destroy_qp(p->qp[i]);
	for (int i = 0; i < 2; i++)
		if (p->cq[i])
			ibv_destroy_cq(p->cq[i]);
	memset(p, 0, sizeof(*p));
}

/* Creates and connects a pair (one check, named @name); 1 on success. */
static int pair_make(struct pair *p, const struct pair_opts *o, const char *name)
{
	const uint32_t psn[2] = { o->psn & 0xffffff, (o->psn + 0x1000) & 0xffffff };
	const char *step = "create CQs";
	int err = 0;

	memset(p, 0, sizeof(*p));
	for (int i = 0; i < 2; i++) {
		errno = 0;
		int cqe = i && o->cqe_b ? o->cqe_b : o->cqe;

		p->cq[i] = ibv_create_cq(ctx[i], cqe ? cqe : 32, NULL, NULL, 0);
		if (!p->cq[i]) {
			err = errno ? errno : -1;
			goto out;
		}
	}
	step = "create QPs";
	for (int i = 0; i < 2; i++) {
		struct ibv_qp_init_attr ia = {
			.send_cq = p->cq[o->one_cq ? 0 : i],
			.recv_cq = p->cq[o->one_cq ? 0 : i],
			.qp_type = IBV_QPT_RC,
			.sq_sig_all = 0,
			.cap = { .max_send_wr = 16, .max_recv_wr = 16, .max_send_sge = 4,
				 .max_recv_sge = 4, .max_inline_data = INLINE_LEN },
		};

		if (i == 1 && o->srq)
			ia.srq = o->srq;

		errno = 0;
		if (i == 0 && o->send_ops) {
			struct ibv_qp_init_attr_ex iax = {
				.send_cq = ia.send_cq, .recv_cq = ia.recv_cq,
				.qp_type = IBV_QPT_RC, .cap = ia.cap, .pd = pd[0],
				.comp_mask = IBV_QP_INIT_ATTR_PD | IBV_QP_INIT_ATTR_SEND_OPS_FLAGS,
				.send_ops_flags = o->send_ops,
			};

			p->qp[i] = ibv_create_qp_ex(ctx[0], &iax);
		} else {
			p->qp[i] = ibv_create_qp(pd[i], &ia);
		}
		if (!p->qp[i]) {
			err = errno ? errno : -1;
			goto out;
		}
	}
	step = "connect A";
	err = connect_qp(p->qp[0], 0, p->qp[1]->qp_num, psn[0], psn[1], o);
	if (err)
		goto out;
	step = "connect B";
	err = connect_qp(p->qp[1], 1, p->qp[0]->qp_num, psn[1], psn[0], o);
out:
	check(!err, "%s: QP pair created and connected (%s: %s)", name, step,
	      err ? strerror(err) : "success");
	if (err)
		pair_destroy(p);
	return !err;
}

/* --- The checks --- */

/* query_qp on a connected pair. */
static void query_checks(struct pair *p)
{
	struct ibv_qp_init_attr ia;
	struct ibv_qp_attr a;

	for (int i = 0; i < 2; i++) {
		memset(&a, 0, sizeof(a));
		a.qp_state = -1;
		check_err(ibv_query_qp(p->qp[i], &a, IBV_QP_STATE | IBV_QP_DEST_QPN | IBV_QP_PATH_MTU,
				       &ia), 0, "query_qp of connected QP %c", "AB"[i]);
		check(a.qp_state == IBV_QPS_RTS && a.dest_qp_num == p->qp[1 - i]->qp_num &&
		      a.path_mtu == IBV_MTU_1024,
		      "connected QP %c is in RTS, dest_qp_num the other's, path_mtu 1024 (got %s, %#x, %d)",
		      "AB"[i], qps_name(a.qp_state), a.dest_qp_num, a.path_mtu);
	}
}

/* SEND, SEND with immediate, gather and scatter lists, inline data. */
static void send_checks(struct pair *p)
{
	struct ibv_qp *qa = p->qp[0], *qb = p->qp[1];
	struct ibv_cq *ca = p->cq[0], *cb = p->cq[1];
	struct ibv_sge sa[3], sb[3];
	struct ibv_send_wr wr;
	uint8_t inl[INLINE_LEN], orig[INLINE_LEN];
	struct ibv_wc wc;
	int es, er;

	/* 3000 bytes: three packets at MTU 1024. */
	fill(buf_a, 3000, 1);
	memset(buf_b, 0, 4096);
	sb[0] = sge(mr_b, RECV_OFF, 4096);
	er = post_recv(qb, 1, sb, 1);
	sa[0] = sge(mr_a, 0, 3000);
	wr = send_wr(2, IBV_WR_SEND, sa, 1);
	es = post_send(qa, &wr);
	expect_wc(ca, es, 2, IBV_WC_SUCCESS, IBV_WC_SEND, NULL, "SEND of 3000 bytes: A completes");
	if (expect_wc(cb, er, 1, IBV_WC_SUCCESS, IBV_WC_RECV, &wc, "SEND of 3000 bytes: B's receive"))
		check(wc.byte_len == 3000 && !(wc.wc_flags & IBV_WC_WITH_IMM) &&
		      wc.qp_num == qb->qp_num,
		      "SEND of 3000 bytes: byte_len 3000, no immediate, B's QPN (got %u, %#x, %#x)",
		      wc.byte_len, wc.wc_flags, wc.qp_num);
	check(same(buf_b, 3000, 1) && all_bytes(buf_b + 3000, 1096, 0),
	      "SEND of 3000 bytes: the data arrived, nothing past it");

	/* With immediate data. */
	fill(buf_a, 100, 2);
	sb[0] = sge(mr_b, RECV_OFF, 4096);
	er = post_recv(qb, 3, sb, 1);
	sa[0] = sge(mr_a, 0, 100);
	wr = send_wr(4, IBV_WR_SEND_WITH_IMM, sa, 1);
	wr.imm_data = htobe32(0x12345678);
	es = post_send(qa, &wr);
	expect_wc(ca, es, 4, IBV_WC_SUCCESS, IBV_WC_SEND, NULL, "SEND_WITH_IMM: A completes");
	if (expect_wc(cb, er, 3, IBV_WC_SUCCESS, IBV_WC_RECV, &wc, "SEND_WITH_IMM: B's receive"))
		check((wc.wc_flags & IBV_WC_WITH_IMM) && wc.imm_data == htobe32(0x12345678) &&
		      wc.byte_len == 100,
		      "SEND_WITH_IMM: IBV_WC_WITH_IMM, immediate 0x12345678, byte_len 100 (got %#x, %#x, %u)",
		      wc.wc_flags, be32toh(wc.imm_data), wc.byte_len);
	check(same(buf_b, 100, 2), "SEND_WITH_IMM: the data arrived");

	/* A gather list of 3 SGEs into one contiguous receive. */
	fill(buf_a, 4096, 3);
	memset(buf_b, 0, 4096);
	sb[0] = sge(mr_b, RECV_OFF, 4096);
	er = post_recv(qb, 5, sb, 1);
	sa[0] = sge(mr_a, 0, 100);
	sa[1] = sge(mr_a, 1000, 200);
	sa[2] = sge(mr_a, 2000, 1300);
	wr = send_wr(6, IBV_WR_SEND, sa, 3);
	es = post_send(qa, &wr);
	expect_wc(ca, es, 6, IBV_WC_SUCCESS, IBV_WC_SEND, NULL, "SEND from 3 SGEs: A completes");
	if (expect_wc(cb, er, 5, IBV_WC_SUCCESS, IBV_WC_RECV, &wc, "SEND from 3 SGEs: B's receive"))
		check(wc.byte_len == 1600, "SEND from 3 SGEs: byte_len 1600 (got %u)", wc.byte_len);
	check(!memcmp(buf_b, buf_a, 100) && !memcmp(buf_b + 100, buf_a + 1000, 200) &&
	      !memcmp(buf_b + 300, buf_a + 2000, 1300) && all_bytes(buf_b + 1600, 100, 0),
	      "SEND from 3 SGEs: gathered in order");

	/* One contiguous send scattered over a receive of 3 SGEs. */
	fill(buf_a, 1600, 4);
	memset(buf_b, 0xee, 4096);
	sb[0] = sge(mr_b, 0, 100);
	sb[1] = sge(mr_b, 1000, 200);
	sb[2] = sge(mr_b, 2000, 2000);
	er = post_recv(qb, 7, sb, 3);
	sa[0] = sge(mr_a, 0, 1600);
	wr = send_wr(8, IBV_WR_SEND, sa, 1);
	es = post_send(qa, &wr);
	expect_wc(ca, es, 8, IBV_WC_SUCCESS, IBV_WC_SEND, NULL, "SEND into 3 SGEs: A completes");
	if (expect_wc(cb, er, 7, IBV_WC_SUCCESS, IBV_WC_RECV, &wc, "SEND into 3 SGEs: B's receive"))
		check(wc.byte_len == 1600, "SEND into 3 SGEs: byte_len 1600 (got %u)", wc.byte_len);
	check(!memcmp(buf_b, buf_a, 100) && !memcmp(buf_b + 1000, buf_a + 100, 200) &&
	      !memcmp(buf_b + 2000, buf_a + 300, 1300) && all_bytes(buf_b + 100, 900, 0xee) &&
	      all_bytes(buf_b + 1200, 800, 0xee) && all_bytes(buf_b + 3300, 700, 0xee),
	      "SEND into 3 SGEs: scattered in order, nothing between or past them");

	/*
	 * Inline: the data is copied at post time, from memory outside any
	 * MR; changing it right after the post must not change what arrives.
	 */
	fill(orig, sizeof(inl), 5);
	memcpy(inl, orig, sizeof(inl));
	memset(buf_b, 0, 4096);
	sb[0] = sge(mr_b, RECV_OFF, 4096);
	er = post_recv(qb, 9, sb, 1);
	sa[0] = (struct ibv_sge){ .addr = (uintptr_t)inl, .length = 40, .lkey = 0 };
	wr = send_wr(10, IBV_WR_SEND, sa, 1);
	wr.send_flags |= IBV_SEND_INLINE;
	es = post_send(qa, &wr);
	memset(inl, 0, sizeof(inl));
	expect_wc(ca, es, 10, IBV_WC_SUCCESS, IBV_WC_SEND, NULL, "inline SEND of 40 bytes: A completes");
	if (expect_wc(cb, er, 9, IBV_WC_SUCCESS, IBV_WC_RECV, &wc, "inline SEND of 40 bytes: B's receive"))
		check(wc.byte_len == 40, "inline SEND: byte_len 40 (got %u)", wc.byte_len);
	check(!memcmp(buf_b, orig, 40) && all_bytes(buf_b + 40, 100, 0),
	      "inline SEND: the data as it was at post time arrived");
}

/* RDMA WRITE, WRITE with immediate, READ. */
static void rdma_checks(struct pair *p)
{
	struct ibv_qp *qa = p->qp[0], *qb = p->qp[1];
	struct ibv_cq *ca = p->cq[0], *cb = p->cq[1];
	uint64_t rb = (uintptr_t)buf_b;
	struct ibv_sge sa, sb;
	struct ibv_send_wr wr;
	struct ibv_wc wc;
	int es, er;

	/* A receive is posted: a plain WRITE must not consume it. */
	sb = sge(mr_b, RECV_OFF, 4096);
	er = post_recv(qb, 20, &sb, 1);

	fill(buf_a + WRITE_OFF, 5000, 6);
	memset(buf_b + WRITE_OFF, 0, 8192);
	sa = sge(mr_a, WRITE_OFF, 5000);
	wr = rdma_wr(21, IBV_WR_RDMA_WRITE, &sa, rb + WRITE_OFF, mr_b->rkey);
	es = post_send(qa, &wr);
	expect_wc(ca, es, 21, IBV_WC_SUCCESS, IBV_WC_RDMA_WRITE, NULL,
		  "RDMA WRITE of 5000 bytes: A completes");
	check(same(buf_b + WRITE_OFF, 5000, 6) && all_bytes(buf_b + WRITE_OFF + 5000, 100, 0),
	      "RDMA WRITE of 5000 bytes: the data landed in B's MR, nothing past it");
	check(cq_stays_empty(cb, 50), "RDMA WRITE: no completion on B (the receive stays posted)");

	fill(buf_a + WIMM_OFF, 5000, 7);
	memset(buf_b + WIMM_OFF, 0, 8192);
	sa = sge(mr_a, WIMM_OFF, 5000);
	wr = rdma_wr(22, IBV_WR_RDMA_WRITE_WITH_IMM, &sa, rb + WIMM_OFF, mr_b->rkey);
	wr.imm_data = htobe32(0xcafe0001);
	es = post_send(qa, &wr);
	expect_wc(ca, es, 22, IBV_WC_SUCCESS, IBV_WC_RDMA_WRITE, NULL,
		  "RDMA WRITE_WITH_IMM of 5000 bytes: A completes");
	if (expect_wc(cb, er, 20, IBV_WC_SUCCESS, IBV_WC_RECV_RDMA_WITH_IMM, &wc,
		      "RDMA WRITE_WITH_IMM: consumes B's receive"))
		check((wc.wc_flags & IBV_WC_WITH_IMM) && wc.imm_data == htobe32(0xcafe0001) &&
		      wc.byte_len == 5000,
		      "RDMA WRITE_WITH_IMM: IBV_WC_WITH_IMM, immediate 0xcafe0001, byte_len 5000 (got %#x, %#x, %u)",
		      wc.wc_flags, be32toh(wc.imm_data), wc.byte_len);
	check(same(buf_b + WIMM_OFF, 5000, 7) && all_bytes(buf_b + WIMM_OFF + 5000, 100, 0),
	      "RDMA WRITE_WITH_IMM: the data landed in B's MR, not in the receive buffer");

	fill(buf_b + READ_OFF, 5000, 8);
	memset(buf_a + READ_OFF, 0, 8192);
	sa = sge(mr_a, READ_OFF, 5000);
	wr = rdma_wr(23, IBV_WR_RDMA_READ, &sa, rb + READ_OFF, mr_b->rkey);
	es = post_send(qa, &wr);
	expect_wc(ca, es, 23, IBV_WC_SUCCESS, IBV_WC_RDMA_READ, &wc, "RDMA READ of 5000 bytes: A completes");
	check(same(buf_a + READ_OFF, 5000, 8) && all_bytes(buf_a + READ_OFF + 5000, 100, 0),
	      "RDMA READ of 5000 bytes: B's data arrived in A's buffer, nothing past it");
	check(cq_stays_empty(cb, 0), "RDMA READ: no completion on B");
}

/* FETCH_AND_ADD and CMP_AND_SWP on an 8-byte aligned word of B's MR. */
static void atomic_checks(struct pair *p)
{
	volatile uint64_t *rv = (uint64_t *)(buf_b + ATOMIC_OFF);
	volatile uint64_t *lv = (uint64_t *)(buf_a + ATOMIC_OFF);
	uint64_t raddr = (uintptr_t)rv;
	struct ibv_sge sa = sge(mr_a, ATOMIC_OFF, 8);
	struct ibv_send_wr wr;
	int es;

	*rv = 0x100000000ULL + 100;
	*lv = 0xdeadbeef;
	wr = send_wr(30, IBV_WR_ATOMIC_FETCH_AND_ADD, &sa, 1);
	wr.wr.atomic.remote_addr = raddr;
	wr.wr.atomic.rkey = mr_b->rkey;
	wr.wr.atomic.compare_add = 5;
	es = post_send(p->qp[0], &wr);
	expect_wc(p->cq[0], es, 30, IBV_WC_SUCCESS, IBV_WC_FETCH_ADD, NULL, "FETCH_AND_ADD: A completes");
	check(*lv == 0x100000000ULL + 100 && *rv == 0x100000000ULL + 105,
	      "FETCH_AND_ADD 5: returns the old value, memory holds the sum (got %#llx, %#llx)",
	      (unsigned long long)*lv, (unsigned long long)*rv);

	*lv = 0xdeadbeef;
	wr = send_wr(31, IBV_WR_ATOMIC_CMP_AND_SWP, &sa, 1);
	wr.wr.atomic.remote_addr = raddr;
	wr.wr.atomic.rkey = mr_b->rkey;
	wr.wr.atomic.compare_add = 0x100000000ULL + 105;
	wr.wr.atomic.swap = 0x700000007ULL;
	es = post_send(p->qp[0], &wr);
	expect_wc(p->cq[0], es, 31, IBV_WC_SUCCESS, IBV_WC_COMP_SWAP, NULL,
		  "CMP_AND_SWP, equal: A completes");
	check(*lv == 0x100000000ULL + 105 && *rv == 0x700000007ULL,
	      "CMP_AND_SWP, equal: returns the old value, memory swapped (got %#llx, %#llx)",
	      (unsigned long long)*lv, (unsigned long long)*rv);

	*lv = 0xdeadbeef;
	wr = send_wr(32, IBV_WR_ATOMIC_CMP_AND_SWP, &sa, 1);
	wr.wr.atomic.remote_addr = raddr;
	wr.wr.atomic.rkey = mr_b->rkey;
	wr.wr.atomic.compare_add = 0x700000008ULL;
	wr.wr.atomic.swap = 1;
	es = post_send(p->qp[0], &wr);
	expect_wc(p->cq[0], es, 32, IBV_WC_SUCCESS, IBV_WC_COMP_SWAP, NULL,
		  "CMP_AND_SWP, different: A completes");
	check(*lv == 0x700000007ULL && *rv == 0x700000007ULL,
	      "CMP_AND_SWP, different: returns the old value, memory unchanged (got %#llx, %#llx)",
	      (unsigned long long)*lv, (unsigned long long)*rv);
}

/*
 * ATOMIC WRITE (ibv_wr_atomic_write): B's 8 aligned bytes take A's value
 * whole, and A's work request completes as IBV_WC_ATOMIC_WRITE: between
 * rxe and rxud, that both speak its wire format (a RETH naming 8 bytes,
 * the bytes as payload, an empty READ response as the answer).
 */
static void atomic_write_checks(void)
{
	struct pair_opts o = default_opts;
	volatile uint64_t *rv = (uint64_t *)(buf_b + ATOMIC_OFF + 8);
	const uint64_t value = 0x0123456789abcdefULL;
	struct ibv_qp_ex *qpx;
	struct pair p;
	int es;

	o.send_ops = IBV_QP_EX_WITH_ATOMIC_WRITE;
	if (!pair_make(&p, &o, "ATOMIC_WRITE"))
		return;
	*rv = 0;
	qpx = ibv_qp_to_qp_ex(p.qp[0]);
	ibv_wr_start(qpx);
	qpx->wr_id = 40;
	qpx->wr_flags = IBV_SEND_SIGNALED;
	ibv_wr_atomic_write(qpx, mr_b->rkey, (uintptr_t)rv, &value);
	es = ibv_wr_complete(qpx);
	expect_wc(p.cq[0], es, 40, IBV_WC_SUCCESS, IBV_WC_ATOMIC_WRITE, NULL,
		  "ATOMIC_WRITE: A completes");
	check(*rv == value, "ATOMIC_WRITE: B's 8 bytes hold A's value (got %#llx)",
	      (unsigned long long)*rv);
	pair_destroy(&p);
}

/*
 * After an error completion, A is in ERR, as query_qp must report (rxe
 * does), and a work request posted then completes with IBV_WC_WR_FLUSH_ERR
 * (@what names the error case).
 */
static void check_flushed(struct pair *p, uint64_t wr_id, const char *what)
{
	struct ibv_qp_attr a;
	struct ibv_qp_init_attr ia;
	struct ibv_sge sa = sge(mr_a, WRITE_OFF, 64);
	struct ibv_send_wr wr = rdma_wr(wr_id, IBV_WR_RDMA_WRITE, &sa, (uintptr_t)buf_b + WRITE_OFF,
					mr_b->rkey);
	int es;

	memset(&a, 0, sizeof(a));
	a.qp_state = -1;
	ibv_query_qp(p->qp[0], &a, IBV_QP_STATE, &ia);
	check(a.qp_state == IBV_QPS_ERR, "%s: A is in ERR (got %s)", what, qps_name(a.qp_state));
	es = post_send(p->qp[0], &wr);
	expect_wc(p->cq[0], es, wr_id, IBV_WC_WR_FLUSH_ERR, 0, NULL,
		  "%s: the next WRITE, a valid one, is flushed", what);
}


/* --- Errors that end the connection (IBTA 10.3.1, 11.6.3) --- */

/* Async event @type of @qp on @c within @ms (other events are looked past). */
static int got_qp_event(struct ibv_context *c, struct ibv_qp *qp, enum ibv_event_type type, int ms)
{
	struct pollfd pfd = { .fd = c->async_fd, .events = POLLIN };
	struct ibv_async_event ev;
	int got = 0;

	for (long long end = now_ms() + ms; !got && now_ms() < end;) {
		if (poll(&pfd, 1, (int)(end - now_ms())) != 1 || ibv_get_async_event(c, &ev))
			break;
		got = ev.event_type == type && ev.element.qp == qp;
		ibv_ack_async_event(&ev);
	}
	return got;
}

/*
 * B's responder found A's request fatal: the whole of B is in the error
 * state on its own (no modify_qp): in ERR, the receive it had posted
 * (@recv_id) flushed, a SEND posted now flushed, and B's owner told why
 * (@event).
 */
static void responder_failed_checks(struct pair *p, uint64_t recv_id, enum ibv_event_type event,
				    const char *what)
{
	struct ibv_sge sb = sge(mr_b, WRITE_OFF, 8);
	struct ibv_send_wr wr = send_wr(recv_id + 1, IBV_WR_SEND, &sb, 1);
	struct ibv_qp_init_attr ia;
	struct ibv_qp_attr a;
	int es;

	memset(&a, 0, sizeof(a));
	a.qp_state = -1;
	ibv_query_qp(p->qp[1], &a, IBV_QP_STATE, &ia);
	check(a.qp_state == IBV_QPS_ERR, "%s: B, the responder, is in ERR (got %s)", what,
	      qps_name(a.qp_state));
	expect_wc(p->cq[1], 0, recv_id, IBV_WC_WR_FLUSH_ERR, 0, NULL,
		  "%s: B's posted receive is flushed", what);
	es = post_send(p->qp[1], &wr);
	expect_wc(p->cq[1], es, recv_id + 1, IBV_WC_WR_FLUSH_ERR, 0, NULL,
		  "%s: B's send side is stopped: a SEND posted now is flushed", what);
	/* rxe 6.12 moves the QP to ERR without telling its owner. */
	if (!rxe_quirks)
		check(got_qp_event(ctx[1], p->qp[1], event, POLL_MS),
		      "%s: B's owner gets %s within %d ms", what, ibv_event_type_str(event),
		      POLL_MS);
}

/*
 * A request the responder cannot carry out (a READ to a QP that takes
 * none: max_dest_rd_atomic 0) is NAKed as an invalid request: A's READ
 * fails REM_INV_REQ_ERR at once (without the NAK it would retry until
 * RETRY_EXC_ERR), and B is in error.
 */
static void invalid_request_checks(void)
{
	struct pair_opts o = default_opts;
	struct ibv_sge sa = sge(mr_a, READ_OFF, 64), sb = sge(mr_b, RECV_OFF, 64);
	struct ibv_send_wr wr;
	struct pair p;
	int es, er;

	o.b_no_rd_atomic = 1;
	if (!pair_make(&p, &o, "invalid request"))
		return;
	er = post_recv(p.qp[1], 120, &sb, 1);
	check(!er, "invalid request: B posts a receive (%s)", strerror(er));
	wr = rdma_wr(121, IBV_WR_RDMA_READ, &sa, (uintptr_t)buf_b + READ_OFF, mr_b->rkey);
	es = post_send(p.qp[0], &wr);
	expect_wc(p.cq[0], es, 121, IBV_WC_REM_INV_REQ_ERR, 0, NULL,
		  "invalid request: A's READ to B, which takes no READs, fails REM_INV_REQ_ERR");
	check_flushed(&p, 122, "invalid request");
	responder_failed_checks(&p, 120, IBV_EVENT_QP_REQ_ERR, "invalid request");
	pair_destroy(&p);
}

/*
 * A work request that fails locally (a stale lkey) does not make the ones
 * before it complete with success before they are acknowledged: SEND 130
 * waits for B's receive (RNR, retried for ever), the WRITE after it names a
 * deregistered MR. SEND 130 completes with success only once B has its data,
 * then the WRITE with LOC_PROT_ERR. (rxe 6.12 as A completes the WRITE
 * flushed and not SEND 130 first: -Q skips this.)
 */
static void local_failure_order_checks(void)
{
	struct pair_opts o = default_opts;
	struct ibv_sge sa = sge(mr_a, 0, 100), sb = sge(mr_b, RECV_OFF, 4096), stale;
	struct ibv_send_wr wr;
	struct ibv_wc wc;
	struct ibv_mr *gone;
	struct pair p;
	int es, es2, er, err;

	if (rxe_requester)
		return;
	o.rnr_retry = 7;
	if (!pair_make(&p, &o, "local failure"))
		return;
	gone = ibv_reg_mr(pd[0], buf_a, BUF_LEN, ALL_ACCESS);
	check(gone != NULL, "local failure: an MR over A's buffer is registered");
	if (!gone) {
		pair_destroy(&p);
		return;
	}
	stale = (struct ibv_sge){ .addr = (uintptr_t)buf_a, .length = 64, .lkey = gone->lkey };
	err = ibv_dereg_mr(gone);
	check(err == 0, "local failure: and deregistered (%s)", strerror(err));
	fill(buf_a, 100, 30);
	memset(buf_b, 0, 4096);
	wr = send_wr(130, IBV_WR_SEND, &sa, 1);
	es = post_send(p.qp[0], &wr);
	wr = rdma_wr(131, IBV_WR_RDMA_WRITE, &stale, (uintptr_t)buf_b + WRITE_OFF, mr_b->rkey);
	es2 = post_send(p.qp[0], &wr);
	check(!es && !es2, "local failure: SEND and WRITE with a stale lkey posted");
	check(cq_stays_empty(p.cq[0], 300),
	      "local failure: nothing completes in 300 ms while B has no receive (SEND unacknowledged)");
	er = post_recv(p.qp[1], 132, &sb, 1);
	expect_wc(p.cq[0], es, 130, IBV_WC_SUCCESS, IBV_WC_SEND, NULL,
		  "local failure: SEND 130 completes with success once B posted a receive");
	if (expect_wc(p.cq[1], er, 132, IBV_WC_SUCCESS, IBV_WC_RECV, &wc,
		      "local failure: B received SEND 130"))
		check(wc.byte_len == 100 && same(buf_b, 100, 30),
		      "local failure: SEND 130's 100 bytes arrived (got %u)", wc.byte_len);
	expect_wc(p.cq[0], es2, 131, IBV_WC_LOC_PROT_ERR, 0, NULL,
		  "local failure: then the WRITE with the stale lkey fails LOC_PROT_ERR");
	check_flushed(&p, 133, "local failure");
	pair_destroy(&p);
}

/*
 * IBV_SEND_FENCE: a fenced WRITE to the bytes a READ before it reads waits
 * for the READ's data, so the READ returns the bytes from before the WRITE
 * (unfenced, the responder may take the WRITE while still answering the
 * READ).
 */
static void fence_checks(struct pair *p)
{
	/* Several READ segments (rxud asks for 64 packets at a time). */
	const uint32_t len = 256 * 1024;
	uint8_t *la = mmap(NULL, 2 * len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	uint8_t *rb = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	struct ibv_mr *ma = NULL, *mb = NULL;
	struct ibv_sge sr, sw;
	struct ibv_send_wr rd, wrt, *bad;
	int es;

	if (la != MAP_FAILED)
		ma = ibv_reg_mr(pd[0], la, 2 * len, ALL_ACCESS);
	if (rb != MAP_FAILED)
		mb = ibv_reg_mr(pd[1], rb, len, ALL_ACCESS);
	check(ma && mb, "fence: 512 KB of A's and 256 KB of B's registered");
	if (!ma || !mb)
		goto out;
	fill(rb, len, 40);
	fill(la + len, len, 41);
	memset(la, 0, len);
	sr = sge(ma, 0, len);
	sw = sge(ma, len, len);
	rd = rdma_wr(140, IBV_WR_RDMA_READ, &sr, (uintptr_t)rb, mb->rkey);
	wrt = rdma_wr(141, IBV_WR_RDMA_WRITE, &sw, (uintptr_t)rb, mb->rkey);
	wrt.send_flags |= IBV_SEND_FENCE;
	rd.next = &wrt;
	es = ibv_post_send(p->qp[0], &rd, &bad);
	expect_wc(p->cq[0], es, 140, IBV_WC_SUCCESS, IBV_WC_RDMA_READ, NULL,
		  "fence: READ of 256 KB completes");
	expect_wc(p->cq[0], es, 141, IBV_WC_SUCCESS, IBV_WC_RDMA_WRITE, NULL,
		  "fence: the fenced WRITE to the same bytes completes");
	check(same(la, len, 40), "fence: the READ returned the bytes from before the fenced WRITE");
	check(same(rb, len, 41), "fence: the WRITE's bytes are in B's memory");
out:
	if (ma)
		ibv_dereg_mr(ma);
	if (mb)
		ibv_dereg_mr(mb);
	if (la != MAP_FAILED)
		munmap(la, 2 * len);
	if (rb != MAP_FAILED)
		munmap(rb, len);
}

/* Remote access errors, each on a fresh pair. */
static void access_error_checks(void)
{
	const struct {
		const char *what;
		int ro;			/* to mr_ro, else to mr_b */
		uint64_t off;		/* into the MR's buffer */
		uint32_t in_mr;		/* of the 200 bytes, those inside the MR */
		int bad_rkey;
		int deregistered;	/* the rkey of an MR over B's buffer, gone */
	} cases[] = {
		{ "WRITE with a wrong rkey", 0, WRITE_OFF, 200, 1, 0 },
		{ "WRITE past the end of the MR", 0, BUF_LEN - 100, 100, 0, 0 },
		{ "WRITE to an MR without remote write", 1, WRITE_OFF, 200, 0, 0 },
		{ "WRITE through the rkey of a deregistered MR", 0, WRITE_OFF, 200, 0, 1 },
	};
	struct ibv_sge sa = sge(mr_a, WRITE_OFF, 200), sb;
	struct ibv_send_wr wr;
	struct pair p;
	int es, er;

	for (unsigned int i = 0; i < ARRAY_SIZE(cases); i++) {
		struct ibv_mr *mr = cases[i].ro ? mr_ro : mr_b;
		uint8_t *buf = mr->addr;
		/* Not a key of this device's: another index, another key byte. */
		uint32_t rkey = cases[i].bad_rkey ? mr->rkey ^ 0x5a5a5aa5 : mr->rkey;

		if (cases[i].deregistered) {
			/* A second MR over B's buffer, whose key must die with it
			 * (B's own MR stays). */
			struct ibv_mr *gone = ibv_reg_mr(pd[1], buf_b, BUF_LEN, ALL_ACCESS);
			int err;

			check(gone != NULL, "%s: the MR is registered", cases[i].what);
			if (!gone)
				continue;
			rkey = gone->rkey;
			err = ibv_dereg_mr(gone);
			check(err == 0, "%s: and deregistered (%s)", cases[i].what, strerror(err));
			if (err)
				continue;
		}

		if (!pair_make(&p, &default_opts, cases[i].what))
			continue;
		fill(buf_a + WRITE_OFF, 200, 9);
		memset(buf + cases[i].off, 0x77, cases[i].in_mr);
		sb = sge(mr_b, RECV_OFF, 64);
		er = post_recv(p.qp[1], 42, &sb, 1);
		check(!er, "%s: B posts a receive (%s)", cases[i].what, strerror(er));
		wr = rdma_wr(40, IBV_WR_RDMA_WRITE, &sa, (uintptr_t)buf + cases[i].off, rkey);
		es = post_send(p.qp[0], &wr);
		expect_wc(p.cq[0], es, 40, IBV_WC_REM_ACCESS_ERR, 0, NULL, "%s: A completes",
			  cases[i].what);
		check(all_bytes(buf + cases[i].off, cases[i].in_mr, 0x77),
		      "%s: B's memory is untouched", cases[i].what);
		check_flushed(&p, 41, cases[i].what);
		responder_failed_checks(&p, 42, IBV_EVENT_QP_ACCESS_ERR, cases[i].what);
		pair_destroy(&p);
	}
}

/* Receiver not ready. */
static void rnr_checks(void)
{
	struct pair_opts o = default_opts;
	struct ibv_send_wr wr;
	struct ibv_sge sa, sb;
	struct ibv_wc wc;
	struct pair p;
	int es, er;

	/* No retries: the first RNR NAK ends the SEND. */
	o.rnr_retry = 0;
	if (pair_make(&p, &o, "RNR, rnr_retry 0")) {
		sa = sge(mr_a, 0, 100);
		wr = send_wr(50, IBV_WR_SEND, &sa, 1);
		es = post_send(p.qp[0], &wr);
		expect_wc(p.cq[0], es, 50, IBV_WC_RNR_RETRY_EXC_ERR, 0, NULL,
			  "RNR, rnr_retry 0: SEND with no receive posted on B fails");
		check_flushed(&p, 51, "RNR, rnr_retry 0");
		pair_destroy(&p);
	}

	/* Retries forever (7), 0.01 ms apart: a receive posted late is found. */
	o.rnr_retry = 7;
	o.min_rnr_timer = 1;
	if (pair_make(&p, &o, "RNR, rnr_retry 7")) {
		fill(buf_a, 2000, 10);
		memset(buf_b, 0, 4096);
		sa = sge(mr_a, 0, 2000);
		wr = send_wr(52, IBV_WR_SEND, &sa, 1);
		es = post_send(p.qp[0], &wr);
		usleep(50000);
		check(cq_stays_empty(p.cq[0], 0), "RNR, rnr_retry 7: SEND still pending after 50 ms");
		sb = sge(mr_b, RECV_OFF, 4096);
		er = post_recv(p.qp[1], 53, &sb, 1);
		expect_wc(p.cq[0], es, 52, IBV_WC_SUCCESS, IBV_WC_SEND, NULL,
			  "RNR, rnr_retry 7: SEND completes once B posts a receive");
		if (expect_wc(p.cq[1], er, 53, IBV_WC_SUCCESS, IBV_WC_RECV, &wc,
			      "RNR, rnr_retry 7: B's late receive"))
			check(wc.byte_len == 2000, "RNR, rnr_retry 7: byte_len 2000 (got %u)", wc.byte_len);
		check(same(buf_b, 2000, 10), "RNR, rnr_retry 7: the data arrived");
		pair_destroy(&p);
	}
}

/* Unsignaled sends (sq_sig_all 0) make no completion; receives do. */
/*
 * A receive CQ that overflows raises IBV_EVENT_CQ_ERR on the device's
 * async event queue (both rxe and rxud drop the completion that did not
 * fit): B's CQ is made as small as the device allows, and gets more
 * receive completions than it holds, none of them polled.
 */
static void cq_overflow_checks(void)
{
	struct pair_opts o = default_opts;
	struct ibv_async_event ev;
	struct ibv_send_wr wr;
	struct ibv_sge sa, sb;
	struct pollfd pfd;
	struct pair p;
	int n, err = 0, got = 0;

	o.cqe = 1;
	/* A gives up on the SEND B cannot complete in about a second. */
	o.timeout = 16;
	o.retry_cnt = 2;
	if (!pair_make(&p, &o, "CQ overflow"))
		return;
	/* One more than the CQ holds (A's sends are unsignaled: A's CQ stays empty). */
	n = p.cq[1]->cqe + 1;
	if (n > 16) {
		check(0, "CQ overflow: B's CQ of 1 entry holds %d (more than the test's 15)", n - 1);
		pair_destroy(&p);
		return;
	}
	sa = sge(mr_a, 0, 8);
	sb = sge(mr_b, RECV_OFF, 8);
	for (int i = 0; i < n && !err; i++)
		err = post_recv(p.qp[1], 100 + i, &sb, 1);
	for (int i = 0; i < n && !err; i++) {
		wr = send_wr(200 + i, IBV_WR_SEND, &sa, 1);
		wr.send_flags = 0;
		err = post_send(p.qp[0], &wr);
	}
	check(!err, "CQ overflow: %d receives and %d unsignaled SENDs posted (%s)", n, n,
	      err ? strerror(err) : "success");
	/* Other events (of other objects) may come first: look past them. */
	pfd = (struct pollfd){ .fd = ctx[1]->async_fd, .events = POLLIN };
	for (long long end = now_ms() + POLL_MS; !err && !got && now_ms() < end;) {
		if (poll(&pfd, 1, (int)(end - now_ms())) != 1 || ibv_get_async_event(ctx[1], &ev))
			break;
		got = ev.event_type == IBV_EVENT_CQ_ERR && ev.element.cq == p.cq[1];
		ibv_ack_async_event(&ev);
	}
	check(got, "CQ overflow: B's device reports IBV_EVENT_CQ_ERR for B's CQ within %d ms", POLL_MS);
	/*
	 * The SEND whose receive completion B could not write is never
	 * acknowledged: A retries it, then fails it (an error completion,
	 * unsignaled or not). B's QP is in error.
	 */
	expect_wc(p.cq[0], err, 200 + n - 1, IBV_WC_RETRY_EXC_ERR, 0, NULL,
		  "CQ overflow: A's SEND whose completion B lost is not acknowledged (RETRY_EXC_ERR)");
	{
		struct ibv_qp_init_attr ia;
		struct ibv_qp_attr a = { .qp_state = -1 };

		ibv_query_qp(p.qp[1], &a, IBV_QP_STATE, &ia);
		check(a.qp_state == IBV_QPS_ERR, "CQ overflow: B's QP is in ERR (got %s)",
		      qps_name(a.qp_state));
	}
	pair_destroy(&p);

	/*
	 * A CQ shared by A and B, overflowed by B's receive completions: A,
	 * which lost nothing, is in error too (its CQ is), as soon as the CQ
	 * reports the overflow. One device only (a CQ serves its own).
	 */
	o = default_opts;
	o.cqe = 1;
	o.one_cq = 1;
	if (!rxe_requester && ctx[0] == ctx[1] && pair_make(&p, &o, "shared CQ overflow")) {
		struct ibv_qp_init_attr ia;
		struct ibv_qp_attr a = { .qp_state = -1 };

		n = p.cq[0]->cqe + 1;
		err = n > 16;
		for (int i = 0; i < n && !err; i++)
			err = post_recv(p.qp[1], 500 + i, &sb, 1);
		for (int i = 0; i < n && !err; i++) {
			wr = send_wr(600 + i, IBV_WR_SEND, &sa, 1);
			wr.send_flags = 0;
			err = post_send(p.qp[0], &wr);
		}
		pfd = (struct pollfd){ .fd = ctx[0]->async_fd, .events = POLLIN };
		got = 0;
		for (long long end = now_ms() + POLL_MS; !err && !got && now_ms() < end;) {
			if (poll(&pfd, 1, (int)(end - now_ms())) != 1 ||
			    ibv_get_async_event(ctx[0], &ev))
				break;
			got = ev.event_type == IBV_EVENT_CQ_ERR && ev.element.cq == p.cq[0];
			ibv_ack_async_event(&ev);
		}
		check(got, "shared CQ overflow: IBV_EVENT_CQ_ERR within %d ms", POLL_MS);
		ibv_query_qp(p.qp[0], &a, IBV_QP_STATE, &ia);
		check(a.qp_state == IBV_QPS_ERR, "shared CQ overflow: A, which lost nothing, is in ERR (got %s)",
		      qps_name(a.qp_state));
		pair_destroy(&p);
	}

	/*
	 * The send side: A's CQ overflows with A's own signaled SENDs (rxe
	 * 6.12 as A reports the overflow but keeps the QP in RTS: -Q skips
	 * that check).
	 */
	o = default_opts;
	o.cqe = 1;
	o.cqe_b = 64;
	if (!pair_make(&p, &o, "send CQ overflow"))
		return;
	n = p.cq[0]->cqe + 1;
	err = n > 16;
	for (int i = 0; i < n && !err; i++)
		err = post_recv(p.qp[1], 300 + i, &sb, 1);
	for (int i = 0; i < n && !err; i++) {
		wr = send_wr(400 + i, IBV_WR_SEND, &sa, 1);
		err = post_send(p.qp[0], &wr);
	}
	check(!err, "send CQ overflow: %d signaled SENDs posted", n);
	pfd = (struct pollfd){ .fd = ctx[0]->async_fd, .events = POLLIN };
	got = 0;
	for (long long end = now_ms() + POLL_MS; !err && !got && now_ms() < end;) {
		if (poll(&pfd, 1, (int)(end - now_ms())) != 1 || ibv_get_async_event(ctx[0], &ev))
			break;
		got = ev.event_type == IBV_EVENT_CQ_ERR && ev.element.cq == p.cq[0];
		ibv_ack_async_event(&ev);
	}
	check(got, "send CQ overflow: IBV_EVENT_CQ_ERR for A's CQ within %d ms", POLL_MS);
	{
		struct ibv_qp_init_attr ia;
		struct ibv_qp_attr a = { .qp_state = -1 };

		ibv_query_qp(p.qp[0], &a, IBV_QP_STATE, &ia);
		if (!rxe_requester)
			check(a.qp_state == IBV_QPS_ERR, "send CQ overflow: A's QP is in ERR (got %s)",
			      qps_name(a.qp_state));
	}
	pair_destroy(&p);
}

/*
 * An armed SRQ limit: once a SEND leaves fewer receives in the SRQ than
 * the limit, IBV_EVENT_SRQ_LIMIT_REACHED comes, and the limit is disarmed
 * (query_srq reports 0).
 */
static void srq_limit_checks(void)
{
	struct ibv_srq_init_attr sia = { .attr = { .max_wr = 16, .max_sge = 1 } };
	struct pair_opts o = default_opts;
	struct ibv_srq_attr sa_attr = { .srq_limit = 2 };
	struct ibv_qp_attr qa;
	struct ibv_async_event ev;
	struct ibv_send_wr wr;
	struct ibv_recv_wr rwr, *bad;
	struct ibv_sge sa, sb;
	struct ibv_wc wc;
	struct pollfd pfd;
	struct pair p;
	int err = 0, got = 0;

	o.srq = ibv_create_srq(pd[1], &sia);
	check(o.srq != NULL, "SRQ limit: SRQ created on B's device");
	if (!o.srq)
		return;
	if (!pair_make(&p, &o, "SRQ limit")) {
		ibv_destroy_srq(o.srq);
		return;
	}
	sa = sge(mr_a, 0, 8);
	sb = sge(mr_b, RECV_OFF, 8);
	for (int i = 0; i < 4 && !err; i++) {
		rwr = (struct ibv_recv_wr){ .wr_id = 300 + i, .sg_list = &sb, .num_sge = 1 };
		err = ibv_post_srq_recv(o.srq, &rwr, &bad);
	}
	check_err(err ? err : ibv_modify_srq(o.srq, &sa_attr, IBV_SRQ_LIMIT), 0,
		  "SRQ limit: 4 receives posted, limit 2 armed");
	/* 4 - 3 = 1 left, below 2: the third SEND raises the event. */
	for (int i = 0; i < 3 && !err; i++) {
		wr = send_wr(400 + i, IBV_WR_SEND, &sa, 1);
		err = post_send(p.qp[0], &wr) ||
		      !expect_wc(p.cq[1], 0, 300 + i, IBV_WC_SUCCESS, IBV_WC_RECV, NULL,
				 "SRQ limit: SEND %d lands in the SRQ's receive %d", i, i);
	}
	while (ibv_poll_cq(p.cq[0], 1, &wc) > 0)
		;
	pfd = (struct pollfd){ .fd = ctx[1]->async_fd, .events = POLLIN };
	for (long long end = now_ms() + POLL_MS; !err && !got && now_ms() < end;) {
		if (poll(&pfd, 1, (int)(end - now_ms())) != 1 || ibv_get_async_event(ctx[1], &ev))
			break;
		got = ev.event_type == IBV_EVENT_SRQ_LIMIT_REACHED && ev.element.srq == o.srq;
		ibv_ack_async_event(&ev);
	}
	check(got, "SRQ limit: IBV_EVENT_SRQ_LIMIT_REACHED for the SRQ within %d ms", POLL_MS);
	memset(&sa_attr, 0xff, sizeof(sa_attr));
	err = ibv_query_srq(o.srq, &sa_attr);
	check(!err && sa_attr.srq_limit == 0, "SRQ limit: disarmed after the event (query_srq: %s, limit %u)",
	      err ? strerror(err) : "success", sa_attr.srq_limit);
	/*
	 * In the error state a QP takes nothing more from its SRQ, and says
	 * so: IBV_EVENT_QP_LAST_WQE_REACHED (the kernel's ib_drain_qp waits
	 * for it before it polls).
	 */
	qa = (struct ibv_qp_attr){ .qp_state = IBV_QPS_ERR };
	err = ibv_modify_qp(p.qp[1], &qa, IBV_QP_STATE);
	got = 0;
	for (long long end = now_ms() + POLL_MS; !err && !got && now_ms() < end;) {
		if (poll(&pfd, 1, (int)(end - now_ms())) != 1 || ibv_get_async_event(ctx[1], &ev))
			break;
		got = ev.event_type == IBV_EVENT_QP_LAST_WQE_REACHED && ev.element.qp == p.qp[1];
		ibv_ack_async_event(&ev);
	}
	check(got, "SRQ: IBV_EVENT_QP_LAST_WQE_REACHED for B's QP once moved to ERROR (modify_qp: %s)",
	      err ? strerror(err) : "success");
	pair_destroy(&p);
	ibv_destroy_srq(o.srq);
}

/*
 * SRQ resize (IBV_SRQ_MAX_WR): a full SRQ grows with its receives
 * waiting, takes more, and SENDs land in all of them, the older first; a
 * resize below the receives waiting fails and leaves the SRQ as it was.
 */
static void srq_resize_checks(void)
{
	struct ibv_srq_init_attr sia = { .attr = { .max_wr = 4, .max_sge = 1 } };
	struct pair_opts o = default_opts;
	struct ibv_srq_attr a = {};
	struct ibv_send_wr wr;
	struct ibv_recv_wr rwr, *bad;
	struct ibv_sge sa, sb;
	struct ibv_wc wc;
	struct pair p;
	int err = 0, n0, n, landed = 0;

	o.srq = ibv_create_srq(pd[1], &sia);
	check(o.srq != NULL, "SRQ resize: SRQ of 4 WRs on B's device");
	if (!o.srq)
		return;
	if (!pair_make(&p, &o, "SRQ resize")) {
		ibv_destroy_srq(o.srq);
		return;
	}
	sa = sge(mr_a, 0, 8);
	sb = sge(mr_b, RECV_OFF, 8);
	ibv_query_srq(o.srq, &a);
	n0 = (int)a.max_wr;
	for (n = 0; n < n0 && !err; n++) {
		rwr = (struct ibv_recv_wr){ .wr_id = 600 + n, .sg_list = &sb, .num_sge = 1 };
		err = ibv_post_srq_recv(o.srq, &rwr, &bad);
	}
	rwr.wr_id = 999;
	check(!err && ibv_post_srq_recv(o.srq, &rwr, &bad) == ENOMEM,
	      "SRQ resize: %d receives fill the SRQ, one more is ENOMEM", n0);
	a.max_wr = 64;
	check_err(ibv_modify_srq(o.srq, &a, IBV_SRQ_MAX_WR), 0,
		  "SRQ resize: modify_srq max_wr 64 with %d receives waiting", n0);
	memset(&a, 0, sizeof(a));
	err = ibv_query_srq(o.srq, &a);
	check(!err && a.max_wr >= 64, "SRQ resize: query_srq reports max_wr %u >= 64", a.max_wr);
	for (n = n0; n < 64 && !err; n++) {
		rwr = (struct ibv_recv_wr){ .wr_id = 600 + n, .sg_list = &sb, .num_sge = 1 };
		err = ibv_post_srq_recv(o.srq, &rwr, &bad);
	}
	check_err(err, 0, "SRQ resize: %d more receives posted (64 in all)", 64 - n0);
	for (n = 0; n < 64 && !err; n++) {
		wr = send_wr(800 + n, IBV_WR_SEND, &sa, 1);
		err = post_send(p.qp[0], &wr);
		if (!err && poll_wc(p.cq[1], &wc, POLL_MS))
			landed += wc.status == IBV_WC_SUCCESS && wc.opcode == IBV_WC_RECV &&
				  wc.wr_id == 600u + n;
		while (ibv_poll_cq(p.cq[0], 1, &wc) > 0)
			;
	}
	check(landed == 64, "SRQ resize: 64 SENDs land in the 64 receives in order, the %d from "
	      "before the resize first (%d did)", n0, landed);
	for (n = 0; n < 10 && !err; n++) {
		rwr = (struct ibv_recv_wr){ .wr_id = 700 + n, .sg_list = &sb, .num_sge = 1 };
		err = ibv_post_srq_recv(o.srq, &rwr, &bad);
	}
	a.max_wr = 4;
	err = err ? err : ibv_modify_srq(o.srq, &a, IBV_SRQ_MAX_WR);
	check(err == EINVAL, "SRQ resize: to 4 with 10 receives waiting: EINVAL (got %s)",
	      err ? strerror(err) : "success");
	wr = send_wr(900, IBV_WR_SEND, &sa, 1);
	expect_wc(p.cq[1], post_send(p.qp[0], &wr), 700, IBV_WC_SUCCESS, IBV_WC_RECV, NULL,
		  "SRQ resize: after the refused resize the next SEND lands in the oldest receive");
	pair_destroy(&p);
	ibv_destroy_srq(o.srq);
}

static void unsignaled_checks(void)
{
	struct ibv_send_wr wr;
	struct ibv_sge sa[4], sb[4];
	struct ibv_wc wc;
	struct pair p;
	int es = 0, er = 0, n = 0, others = 0, ok;

	if (!pair_make(&p, &default_opts, "unsignaled"))
		return;
	for (int i = 0; i < 4; i++) {
		sb[i] = sge(mr_b, i * 1024, 1024);
		er = er ? er : post_recv(p.qp[1], 60 + i, &sb[i], 1);
	}
	for (int i = 0; i < 4; i++) {
		fill(buf_a + i * 1024, 10 * (i + 1), 11 + i);
		sa[i] = sge(mr_a, i * 1024, 10 * (i + 1));
		wr = send_wr(70 + i, IBV_WR_SEND, &sa[i], 1);
		if (i < 3)
			wr.send_flags = 0;
		es = es ? es : post_send(p.qp[0], &wr);
	}
	/* The receives, in order, each with its send's length and data. */
	ok = !er && !es;
	for (int i = 0; i < 4 && ok; i++) {
		memset(&wc, 0, sizeof(wc));
		if (!poll_wc(p.cq[1], &wc, timed_out ? SHORT_MS : POLL_MS)) {
			printf("# receive %d: no completion\n", i);
			timed_out = 1;
			ok = 0;
			break;
		}
		ok = wc.status == IBV_WC_SUCCESS &&
		     wc.opcode == IBV_WC_RECV && wc.wr_id == (uint64_t)(60 + i) &&
		     wc.byte_len == (uint32_t)(10 * (i + 1)) && same(buf_b + i * 1024, 10 * (i + 1), 11 + i);
		if (!ok)
			printf("# receive %d: %s, %s, wr_id %llu, byte_len %u\n", i,
			       ibv_wc_status_str(wc.status), wc_opcode_name(wc.opcode),
			       (unsigned long long)wc.wr_id, wc.byte_len);
	}
	check(ok, "3 unsignaled SENDs and a signaled one: B's 4 receives complete in order, with their data");
	/* A: the signaled send's completion, nothing for the others. */
	while (poll_wc(p.cq[0], &wc, n || timed_out ? 50 : POLL_MS)) {
		if (wc.wr_id == 73 && wc.status == IBV_WC_SUCCESS && wc.opcode == IBV_WC_SEND)
			n++;
		else
			others++;
	}
	check(!es && n == 1 && others == 0,
	      "3 unsignaled SENDs and a signaled one: exactly one send completion, the signaled one's (got %d, %d others)",
	      n, others);
	pair_destroy(&p);
}

/*
 * A receive too small for the SEND. The responder NAKs it as an invalid
 * request and completes the receive with a local length error (IBA
 * responder error class C). rxe (Linux 6.12) does not: its copy_data() fails with EINVAL,
 * not the ENOSPC send_data_in() maps to a length error, so it takes the
 * receive for a malformed WQE: a local QP operation error on B and a remote
 * operation error NAK to A. -q expects that.
 */
static void length_error_checks(void)
{
	const enum ibv_wc_status a_status = rxe_quirks ? IBV_WC_REM_OP_ERR : IBV_WC_REM_INV_REQ_ERR;
	const enum ibv_wc_status b_status = rxe_quirks ? IBV_WC_LOC_QP_OP_ERR : IBV_WC_LOC_LEN_ERR;
	struct ibv_send_wr wr;
	struct ibv_sge sa, sb;
	struct ibv_wc wc;
	struct pair p;
	int es, er;

	if (!pair_make(&p, &default_opts, "receive too small"))
		return;
	sb = sge(mr_b, RECV_OFF, 100);
	er = post_recv(p.qp[1], 80, &sb, 1);
	sa = sge(mr_a, 0, 200);
	wr = send_wr(81, IBV_WR_SEND, &sa, 1);
	es = post_send(p.qp[0], &wr);
	expect_wc(p.cq[0], es, 81, a_status, 0, NULL,
		  "SEND of 200 bytes into a receive of 100: A completes%s",
		  rxe_quirks ? " (rxe's status)" : "");
	expect_wc(p.cq[1], er, 80, b_status, 0, &wc,
		  "SEND of 200 bytes into a receive of 100: B's receive%s",
		  rxe_quirks ? " (rxe's status)" : "");
	check_flushed(&p, 82, "receive too small");
	pair_destroy(&p);
}

/* Messages whose PSNs wrap from 2^24 - 1 to 0. */
static void psn_wrap_checks(void)
{
	struct pair_opts o = default_opts;
	struct ibv_send_wr wr;
	struct ibv_sge sa, sb;
	struct ibv_wc wc;
	struct pair p;
	int es, er;

	o.psn = 0xfffffe;
	if (!pair_make(&p, &o, "PSN wrap"))
		return;
	for (int i = 0; i < 2; i++) {
		fill(buf_a, 3000, 20 + i);
		memset(buf_b, 0, 4096);
		sb = sge(mr_b, RECV_OFF, 4096);
		er = post_recv(p.qp[1], 90 + i, &sb, 1);
		sa = sge(mr_a, 0, 3000);
		wr = send_wr(92 + i, IBV_WR_SEND, &sa, 1);
		es = post_send(p.qp[0], &wr);
		expect_wc(p.cq[0], es, 92 + i, IBV_WC_SUCCESS, IBV_WC_SEND, NULL,
			  "PSN wrap: SEND %d of 3000 bytes from PSN %#x: A completes", i + 1,
			  (0xfffffe + 3 * i) & 0xffffff);
		if (expect_wc(p.cq[1], er, 90 + i, IBV_WC_SUCCESS, IBV_WC_RECV, &wc,
			      "PSN wrap: SEND %d: B's receive", i + 1))
			check(wc.byte_len == 3000 && same(buf_b, 3000, 20 + i),
			      "PSN wrap: SEND %d: 3000 bytes arrived (got %u)", i + 1, wc.byte_len);
	}
	pair_destroy(&p);
}

static void *map(size_t len)
{
	void *p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

	return p == MAP_FAILED ? NULL : p;
}

/* Opens device @i (0: A's, 1: B's) and allocates its PD; 1 on success. */
static int open_side(int i, const char *dev)
{
	struct ibv_device_attr dattr;

	ctx[i] = open_dev(dev);
	check(ctx[i] != NULL, "open %s", dev);
	if (!ctx[i])
		return 0;
	check_err(ibv_query_gid(ctx[i], 1, gid_idx[i], &gid[i]), 0, "query_gid 1/%d of %s",
		  gid_idx[i], dev);
	check_err(ibv_query_device(ctx[i], &dattr), 0, "query_device of %s", dev);
	check(dattr.atomic_cap != IBV_ATOMIC_NONE, "%s reports atomics (atomic_cap %d)", dev,
	      dattr.atomic_cap);
	pd[i] = ibv_alloc_pd(ctx[i]);
	check(pd[i] != NULL, "alloc_pd on %s", dev);
	return pd[i] != NULL;
}

int main(int argc, char **argv)
{
	const char *dev[2] = { NULL, NULL };
	struct pair p;
	int opt;

	while ((opt = getopt(argc, argv, "d:g:D:G:qQe")) != -1) {
		if (opt == 'd')
			dev[0] = optarg;
		else if (opt == 'g')
			gid_idx[0] = atoi(optarg);
		else if (opt == 'D')
			dev[1] = optarg;
		else if (opt == 'G')
			gid_idx[1] = atoi(optarg);
		else if (opt == 'q')
			rxe_quirks = 1;
		else if (opt == 'Q')
			rxe_requester = 1;
		else if (opt == 'e')
			errors_only = 1;
		else
			return 2;
	}
	if (!dev[0] || gid_idx[0] < 0 || (!dev[1] != (gid_idx[1] < 0))) {
		fprintf(stderr, "usage: %s -d DEV -g GIDINDEX [-D DEV2 -G GIDINDEX2] [-q]\n", argv[0]);
		return 2;
	}

	printf("TAP version 13\n");
	if (!open_side(0, dev[0]))
		goto close;
	if (dev[1]) {
		if (!open_side(1, dev[1]))
			goto close;
	} else {
		ctx[1] = ctx[0];
		pd[1] = pd[0];
		gid[1] = gid[0];
		gid_idx[1] = gid_idx[0];
	}
	buf_a = map(BUF_LEN);
	buf_b = map(BUF_LEN);
	buf_ro = map(BUF_LEN);
	mr_a = buf_a ? ibv_reg_mr(pd[0], buf_a, BUF_LEN, ALL_ACCESS) : NULL;
	mr_b = buf_b ? ibv_reg_mr(pd[1], buf_b, BUF_LEN, ALL_ACCESS) : NULL;
	mr_ro = buf_ro ? ibv_reg_mr(pd[1], buf_ro, BUF_LEN,
				    IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_READ) : NULL;
	check(mr_a && mr_b && mr_ro, "MRs: A's and B's with all access rights, one of B's without remote write");
	if (!mr_a || !mr_b || !mr_ro)
		goto close;

	if (errors_only) {
		access_error_checks();
		invalid_request_checks();
		local_failure_order_checks();
		cq_overflow_checks();
		goto close;
	}
	if (pair_make(&p, &default_opts, "main")) {
		query_checks(&p);
		send_checks(&p);
		rdma_checks(&p);
		atomic_checks(&p);
		fence_checks(&p);
		pair_destroy(&p);
	}
	atomic_write_checks();
	access_error_checks();
	invalid_request_checks();
	local_failure_order_checks();
	rnr_checks();
	unsignaled_checks();
	cq_overflow_checks();
	srq_limit_checks();
	srq_resize_checks();
	length_error_checks();
	psn_wrap_checks();

close:
	if (mr_a)
		ibv_dereg_mr(mr_a);
	if (mr_b)
		ibv_dereg_mr(mr_b);
	if (mr_ro)
		ibv_dereg_mr(mr_ro);
	for (int i = 0; i < (dev[1] ? 2 : 1); i++) {
		if (pd[i])
			check_err(ibv_dealloc_pd(pd[i]), 0, "dealloc_pd on %s once everything is gone",
				  dev[i]);
		if (ctx[i])
			check_err(ibv_close_device(ctx[i]), 0, "close_device %s", dev[i]);
	}
	printf("1..%d\n", n_checks);
	return n_failed ? 1 : 0;
}
