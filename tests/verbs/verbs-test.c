// SPDX-License-Identifier: GPL-2.0 OR Linux-OpenIB
/*
 * verbs-test: drives the control verbs of one RDMA device through
 * libibverbs and prints TAP. Run against rxud and against rxe on the same
 * netdev, it must give the same results where rxe supports a verb.
 *
 *   verbs-test -d DEV              run the checks
 *   verbs-test -d DEV -s           run only rxud-specific checks: limits the
 *                                  IB spec sets and rxe does not enforce, and
 *                                  ibv_rereg_mr, which rxe does not offer
 *   verbs-test -d DEV -H SECONDS   open DEV, allocate 3 PDs, an MR, 2 CQs,
 *                                  an RC QP, an SRQ and an AH, print "ready"
 *                                  if all succeeded, then sleep (for the
 *                                  resource cleanup test, which kills it)
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>
#include <infiniband/verbs.h>
#include "tap.h"

/*
 * A verb that creates an object (NULL and errno on failure): @created says
 * whether it did, @err is errno just after the call. @want is 0 when it must
 * succeed.
 */
__attribute__((format(printf, 4, 5)))
static void check_create(int created, int err, int want, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vcheck_err(created ? 0 : (err ? err : -1), want, fmt, ap);
	va_end(ap);
}

#define NPDS 64

/* ibv_reg_mr must fail with @want in errno. */
static void check_reg_fails(struct ibv_pd *pd, void *addr, size_t len, int access, int want,
			    const char *what)
{
	struct ibv_mr *mr;

	errno = 0;
	mr = ibv_reg_mr(pd, addr, len, access);
	check(!mr && errno == want, "%s: %s (got %s)", what, strerror(want),
	      mr ? "success" : strerror(errno));
	if (mr)
		ibv_dereg_mr(mr);
}

static void mr_checks(struct ibv_context *ctx)
{
	const int rw = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ;
	size_t len = 1 << 20;
	struct ibv_mr *mr, *mr2;
	struct ibv_pd *pd;
	void *buf, *hole;

	pd = ibv_alloc_pd(ctx);
	check(pd != NULL, "alloc PD for MRs");
	buf = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (!pd || buf == MAP_FAILED)
		return;

	mr = ibv_reg_mr(pd, buf, len, rw);
	check(mr != NULL, "reg_mr 1 MiB, local+remote read/write");
	if (mr) {
		check(mr->addr == buf && mr->length == len, "MR reports its address and length");
		check(mr->lkey != 0 && mr->rkey != 0, "MR has non-zero keys");
	}
	mr2 = ibv_reg_mr(pd, buf, len, IBV_ACCESS_LOCAL_WRITE);
	check(mr2 != NULL, "a second MR over the same memory");
	if (mr && mr2)
		check(mr2->lkey != mr->lkey, "the two MRs have different lkeys");

	check_reg_fails(pd, buf, len, IBV_ACCESS_REMOTE_WRITE, EINVAL,
			"reg_mr remote write without local write");
	check_reg_fails(pd, buf, len, IBV_ACCESS_REMOTE_ATOMIC, EINVAL,
			"reg_mr remote atomic without local write");
	check_reg_fails(pd, buf, len, 1 << 30, EINVAL, "reg_mr with an unknown access flag");

	/* An address range with nothing mapped behind it. */
	hole = mmap(NULL, len, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (hole != MAP_FAILED) {
		munmap(hole, len);
		check_reg_fails(pd, hole, len, IBV_ACCESS_LOCAL_WRITE, EFAULT, "reg_mr over unmapped memory");
	}

	check_err(ibv_dealloc_pd(pd), EBUSY, "dealloc_pd while MRs use it");
	check_err(mr ? ibv_dereg_mr(mr) : -1, 0, "dereg_mr");
	check_err(mr2 ? ibv_dereg_mr(mr2) : -1, 0, "dereg_mr of the second MR");
	check_err(ibv_dealloc_pd(pd), 0, "dealloc_pd once unused");
	munmap(buf, len);
}

/* Device limits and the port-1 RoCEv2 GID the checks below build on. */
static struct ibv_device_attr dattr;
static struct ibv_port_attr pattr;
static int gid_idx = -1;	/* an IPv4-mapped RoCEv2 GID, or -1 */
static int unused_gid_idx = -1;	/* an empty GID table entry (sgid_index is 8 bits) */
static union ibv_gid own_gid;

static void find_gids(struct ibv_context *ctx)
{
	static const uint8_t v4_prefix[12] = { [10] = 0xff, [11] = 0xff };
	int n = pattr.gid_tbl_len < 256 ? pattr.gid_tbl_len : 256;
	struct ibv_gid_entry e;

	for (int i = 0; i < n; i++) {
		int ret = ibv_query_gid_ex(ctx, 1, i, &e, 0);

		if (ret == ENODATA && unused_gid_idx < 0)
			unused_gid_idx = i;
		if (ret)
			continue;
		if (gid_idx < 0 && e.gid_type == IBV_GID_TYPE_ROCE_V2 &&
		    !memcmp(e.gid.raw, v4_prefix, sizeof(v4_prefix))) {
			gid_idx = i;
			own_gid = e.gid;
		}
	}
}

/* An address vector to ourselves over the RoCEv2 GID. */
static struct ibv_ah_attr own_av(void)
{
	return (struct ibv_ah_attr){
		.is_global = 1,
		.port_num = 1,
		.grh = { .dgid = own_gid, .sgid_index = gid_idx, .hop_limit = 64 },
	};
}

/* --- CQ --- */

static void check_cq_fails(struct ibv_context *ctx, int cqe, int want, const char *what)
{
	struct ibv_cq *cq;
	int err;

	errno = 0;
	cq = ibv_create_cq(ctx, cqe, NULL, NULL, 0);
	err = errno;
	check_create(cq != NULL, err, want, "%s", what);
	if (cq)
		ibv_destroy_cq(cq);
}

static struct ibv_qp *create_qp(struct ibv_pd *pd, struct ibv_cq *cq, struct ibv_srq *srq,
				enum ibv_qp_type type)
{
	struct ibv_qp_init_attr ia = {
		.send_cq = cq,
		.recv_cq = cq,
		.srq = srq,
		.qp_type = type,
		.cap = { .max_send_wr = 16, .max_send_sge = 1,
			 .max_recv_wr = srq ? 0 : 16, .max_recv_sge = srq ? 0 : 1 },
	};

	return ibv_create_qp(pd, &ia);
}

static void cq_checks(struct ibv_context *ctx)
{
	struct ibv_cq *cq1, *cq;
	struct ibv_qp *qp = NULL;
	struct ibv_pd *pd;
	struct ibv_wc wc;
	int err;

	errno = 0;
	cq1 = ibv_create_cq(ctx, 1, NULL, NULL, 0);
	err = errno;
	check_create(cq1 != NULL, err, 0, "create_cq with cqe 1");
	if (cq1) {
		check(cq1->cqe >= 1, "CQ reports cqe %d >= 1", cq1->cqe);
		check_err(ibv_destroy_cq(cq1), 0, "destroy_cq of the 1-entry CQ");
	}

	errno = 0;
	cq = ibv_create_cq(ctx, 100, NULL, NULL, 0);
	err = errno;
	check_create(cq != NULL, err, 0, "create_cq with cqe 100");
	errno = 0;
	cq1 = ibv_create_cq(ctx, dattr.max_cqe, NULL, NULL, 0);
	err = errno;
	check_create(cq1 != NULL, err, 0, "create_cq with cqe max_cqe");
	if (cq1)
		ibv_destroy_cq(cq1);
	check_cq_fails(ctx, dattr.max_cqe + 1, EINVAL, "create_cq above max_cqe");
	check_cq_fails(ctx, 0, EINVAL, "create_cq with cqe 0");
	check_cq_fails(ctx, -1, EINVAL, "create_cq with cqe -1");
	errno = 0;
	cq1 = ibv_create_cq(ctx, 1, NULL, NULL, ctx->num_comp_vectors);
	err = errno;
	check_create(cq1 != NULL, err, EINVAL,
		     "create_cq on a completion vector beyond num_comp_vectors");
	if (cq1)
		ibv_destroy_cq(cq1);
	if (!cq)
		return;
	check(cq->cqe >= 100, "CQ reports cqe %d >= 100", cq->cqe);
	check_err(ibv_resize_cq(cq, 500), 0, "resize_cq to 500");
	check(cq->cqe >= 500, "resized CQ reports cqe %d >= 500", cq->cqe);
	check_err(ibv_resize_cq(cq, dattr.max_cqe + 1), EINVAL, "resize_cq above max_cqe");
	check_err(ibv_resize_cq(cq, 0), EINVAL, "resize_cq to 0");
	check(cq->cqe >= 500, "failed resizes leave cqe %d >= 500", cq->cqe);
	check_err(ibv_req_notify_cq(cq, 0), 0, "req_notify_cq, any completion");
	check_err(ibv_req_notify_cq(cq, 1), 0, "req_notify_cq, solicited only");
	check(ibv_poll_cq(cq, 1, &wc) == 0, "poll_cq on an empty CQ returns 0");

	pd = ibv_alloc_pd(ctx);
	check(pd != NULL, "alloc PD for a QP on the CQ");
	if (pd) {
		errno = 0;
		qp = create_qp(pd, cq, NULL, IBV_QPT_RC);
		err = errno;
		check_create(qp != NULL, err, 0, "create RC QP on the CQ");
	}
	if (qp) {
		err = ibv_destroy_cq(cq);
		check_err(err, EBUSY, "destroy_cq while a QP uses it");
		if (!err)
			cq = NULL;	/* gone after all: do not touch it again */
		check_err(ibv_destroy_qp(qp), 0, "destroy_qp");
	}
	if (pd)
		check_err(ibv_dealloc_pd(pd), 0, "dealloc_pd");
	check_err(cq ? ibv_destroy_cq(cq) : 0, 0, "destroy_cq once unused");
}

/* --- QP --- */

static const char *qpt_name(enum ibv_qp_type t)
{
	return t == IBV_QPT_RC ? "RC" : t == IBV_QPT_UC ? "UC" : t == IBV_QPT_UD ? "UD" : "?";
}

static const char *qps_name(int s)
{
	static const char *const n[] = { "RESET", "INIT", "RTR", "RTS", "SQD", "SQE", "ERR" };

	return s >= 0 && s < (int)ARRAY_SIZE(n) ? n[s] : "?";
}

/* ibv_create_qp with @ia must fail with @want. */
static void check_qp_fails(struct ibv_pd *pd, struct ibv_qp_init_attr ia, int want,
			   const char *what)
{
	struct ibv_qp *qp;
	int err;

	errno = 0;
	qp = ibv_create_qp(pd, &ia);
	err = errno;
	check_create(qp != NULL, err, want, "%s", what);
	if (qp)
		ibv_destroy_qp(qp);
}

#define QP_ALL_ATTRS (IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS | \
		      IBV_QP_QKEY | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | \
		      IBV_QP_RQ_PSN | IBV_QP_SQ_PSN | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | \
		      IBV_QP_RNR_RETRY | IBV_QP_MAX_QP_RD_ATOMIC | IBV_QP_MAX_DEST_RD_ATOMIC | \
		      IBV_QP_MIN_RNR_TIMER | IBV_QP_CAP)

/* query_qp into @a; returns the state, or -1. */
static int query_qp(struct ibv_qp *qp, struct ibv_qp_attr *a)
{
	struct ibv_qp_init_attr ia;

	memset(a, 0, sizeof(*a));
	if (ibv_query_qp(qp, a, QP_ALL_ATTRS, &ia))
		return -1;
	return a->qp_state;
}

/* Move @qp to @state with @mask (IBV_QP_STATE added) and check query_qp agrees. */
static int to_state(struct ibv_qp *qp, struct ibv_qp_attr *a, int mask, enum ibv_qp_state state,
		    const char *t, const char *from)
{
	struct ibv_qp_attr q;
	int err, got;

	a->qp_state = state;
	err = ibv_modify_qp(qp, a, mask | IBV_QP_STATE);
	check_err(err, 0, "%s QP %s->%s", t, from, qps_name(state));
	got = query_qp(qp, &q);
	check(got == (int)state, "query_qp: %s QP is in %s (got %s)", t, qps_name(state),
	      qps_name(got));
	return err;
}

/* Creation, numbering and limits (qp_type @type). */
static void qp_create_checks(struct ibv_pd *pd, struct ibv_cq *cq, enum ibv_qp_type type)
{
	const char *t = qpt_name(type);
	struct ibv_qp *qp, *qp2;
	struct ibv_qp_init_attr ia;
	struct ibv_qp_attr a;
	int err;

	errno = 0;
	qp = create_qp(pd, cq, NULL, type);
	err = errno;
	check_create(qp != NULL, err, 0, "create %s QP, 16 WRs, 1 SGE", t);
	if (!qp)
		return;
	check(qp->qp_num != 0 && qp->qp_num != 1, "%s QP number is neither 0 nor 1", t);
	check(qp->qp_type == type, "%s QP reports its type", t);
	memset(&a, 0, sizeof(a));
	check_err(ibv_query_qp(qp, &a, QP_ALL_ATTRS, &ia), 0, "query_qp of a new %s QP", t);
	check(a.qp_state == IBV_QPS_RESET, "new %s QP is in RESET (got %s)", t,
	      qps_name(a.qp_state));
	check(a.cap.max_send_wr >= 16 && a.cap.max_recv_wr >= 16 && a.cap.max_send_sge >= 1 &&
	      a.cap.max_recv_sge >= 1, "%s QP caps are at least those requested", t);
	check(ia.qp_type == type && ia.send_cq == cq && ia.recv_cq == cq,
	      "query_qp init attributes of the %s QP", t);
	errno = 0;
	qp2 = create_qp(pd, cq, NULL, type);
	err = errno;
	check_create(qp2 != NULL, err, 0, "create a second %s QP", t);
	if (qp2) {
		check(qp2->qp_num != qp->qp_num, "the two %s QPs have different numbers", t);
		check_err(ibv_destroy_qp(qp2), 0, "destroy_qp of the second %s QP", t);
	}
	check_err(ibv_destroy_qp(qp), 0, "destroy_qp of the %s QP", t);
}

static void qp_limit_checks(struct ibv_pd *pd, struct ibv_cq *cq)
{
	const struct ibv_qp_init_attr base = {
		.send_cq = cq,
		.recv_cq = cq,
		.qp_type = IBV_QPT_RC,
		.cap = { .max_send_wr = 16, .max_send_sge = 1,
			 .max_recv_wr = 16, .max_recv_sge = 1 },
	};
	struct ibv_qp_init_attr ia;

	ia = base;
	ia.cap.max_send_wr = dattr.max_qp_wr + 1;
	check_qp_fails(pd, ia, EINVAL, "create QP with max_send_wr above max_qp_wr");
	ia = base;
	ia.cap.max_recv_wr = dattr.max_qp_wr + 1;
	check_qp_fails(pd, ia, EINVAL, "create QP with max_recv_wr above max_qp_wr");
	ia = base;
	ia.cap.max_send_sge = dattr.max_sge + 1;
	check_qp_fails(pd, ia, EINVAL, "create QP with max_send_sge above max_sge");
	ia = base;
	ia.cap.max_recv_sge = dattr.max_sge + 1;
	check_qp_fails(pd, ia, EINVAL, "create QP with max_recv_sge above max_sge");
	ia = base;
	ia.cap.max_inline_data = 1 << 20;
	check_qp_fails(pd, ia, EINVAL, "create QP with 1 MiB of inline data");
	/* ib_core rejects qp_type values it does not know. */
	ia = base;
	ia.qp_type = 100;
	check_qp_fails(pd, ia, EINVAL, "create QP of an unknown type");
	/* Known to ib_core, not supported by a soft-RoCE device. */
	ia = base;
	ia.qp_type = IBV_QPT_XRC_SEND;
	check_qp_fails(pd, ia, EOPNOTSUPP, "create XRC send QP");
}

/*
 * The state machine, RESET->INIT->RTR->RTS->SQD->ERR->RESET, with the
 * attribute masks ib_modify_qp_is_ok() requires, and what it and the driver
 * reject on the way. A rejected modify leaves the QP as it was.
 *
 * Not checked, because rxe (Linux 6.12) gets them wrong and accepts them:
 * pkey_index beyond the P_Key table (only CONFIG_SECURITY_INFINIBAND checks
 * it); remote read or atomic access on a UC QP; path_mtu 0 (not an MTU) or
 * above the port's active_mtu (up to max_mtu); dest_qp_num above 24 bits
 * (stored as is); max_dest_rd_atomic above max_qp_init_rd_atom (it is
 * rounded up to a power of two in a u8: 255 becomes 0). Not checked either:
 * SQD->RTS, which rxe refuses until the send queue has drained, and that
 * races with its send task.
 */
static void qp_modify_checks(struct ibv_pd *pd, struct ibv_cq *cq, enum ibv_qp_type type)
{
	const int rc = type == IBV_QPT_RC, conn = type != IBV_QPT_UD;
	const int init_mask = IBV_QP_PKEY_INDEX | IBV_QP_PORT |
			      (conn ? IBV_QP_ACCESS_FLAGS : IBV_QP_QKEY);
	const int rtr_mask = !conn ? 0 :
			     IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
			     (rc ? IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER : 0);
	const int rts_mask = IBV_QP_SQ_PSN |
			     (rc ? IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY |
				   IBV_QP_MAX_QP_RD_ATOMIC : 0);
	const unsigned int access = rc ? IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ :
				    IBV_ACCESS_REMOTE_WRITE;
	const char *t = qpt_name(type);
	struct ibv_qp_attr a, init, rtr, rts, q;
	struct ibv_qp *qp;
	int err;

	errno = 0;
	qp = create_qp(pd, cq, NULL, type);
	err = errno;
	check_create(qp != NULL, err, 0, "create %s QP for the state machine", t);
	if (!qp)
		return;

	memset(&init, 0, sizeof(init));
	init.pkey_index = 0;
	init.port_num = 1;
	init.qp_access_flags = access;
	init.qkey = 0x11111111;

	memset(&rtr, 0, sizeof(rtr));
	rtr.ah_attr = own_av();
	rtr.path_mtu = IBV_MTU_1024;
	rtr.dest_qp_num = qp->qp_num;
	rtr.rq_psn = 0x123456;
	rtr.max_dest_rd_atomic = 4;
	rtr.min_rnr_timer = 12;

	memset(&rts, 0, sizeof(rts));
	rts.sq_psn = 0x654321;
	rts.timeout = 14;
	rts.retry_cnt = 7;
	rts.rnr_retry = 7;
	rts.max_rd_atomic = 4;

	/* RESET */
	a = rtr;
	a.qp_state = IBV_QPS_RTR;
	check_err(ibv_modify_qp(qp, &a, IBV_QP_STATE | rtr_mask), EINVAL,
		  "%s QP RESET->RTR is illegal", t);
	a = rts;
	a.qp_state = IBV_QPS_RTS;
	check_err(ibv_modify_qp(qp, &a, IBV_QP_STATE | rts_mask), EINVAL,
		  "%s QP RESET->RTS is illegal", t);
	a = init;
	a.qp_state = IBV_QPS_INIT;
	check_err(ibv_modify_qp(qp, &a, IBV_QP_STATE | (init_mask & ~IBV_QP_PORT)), EINVAL,
		  "%s QP RESET->INIT without IBV_QP_PORT", t);
	check_err(ibv_modify_qp(qp, &a, IBV_QP_STATE | (init_mask & ~IBV_QP_PKEY_INDEX)), EINVAL,
		  "%s QP RESET->INIT without IBV_QP_PKEY_INDEX", t);
	if (conn)
		check_err(ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT),
			  EINVAL, "%s QP RESET->INIT without IBV_QP_ACCESS_FLAGS", t);
	else
		check_err(ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT),
			  EINVAL, "%s QP RESET->INIT without IBV_QP_QKEY", t);
	check_err(ibv_modify_qp(qp, &a, IBV_QP_STATE | init_mask | IBV_QP_SQ_PSN), EINVAL,
		  "%s QP RESET->INIT with IBV_QP_SQ_PSN", t);
	a.port_num = 2;
	check_err(ibv_modify_qp(qp, &a, IBV_QP_STATE | init_mask), EINVAL,
		  "%s QP RESET->INIT to port 2", t);
	a.port_num = 1;
	check_err(ibv_modify_qp(qp, &a, IBV_QP_STATE | init_mask | (1 << 30)), EOPNOTSUPP,
		  "%s QP RESET->INIT with an unknown attribute mask bit", t);
	if (conn) {
		a.qp_access_flags = 1 << 30;
		check_err(ibv_modify_qp(qp, &a, IBV_QP_STATE | init_mask), EINVAL,
			  "%s QP RESET->INIT with an unknown access flag", t);
	}
	a = init;
	if (to_state(qp, &a, init_mask, IBV_QPS_INIT, t, "RESET"))
		goto out;
	query_qp(qp, &q);
	check(q.port_num == 1 && q.pkey_index == 0, "%s QP in INIT reports port and pkey_index", t);
	if (conn)
		check(q.qp_access_flags == access, "%s QP in INIT reports its access flags", t);
	else
		check(q.qkey == init.qkey, "%s QP in INIT reports its Q_Key", t);

	/* INIT */
	a = rts;
	a.qp_state = IBV_QPS_RTS;
	check_err(ibv_modify_qp(qp, &a, IBV_QP_STATE | rts_mask), EINVAL,
		  "%s QP INIT->RTS is illegal", t);
	a = rtr;
	a.qp_state = IBV_QPS_RTR;
	if (conn) {
		check_err(ibv_modify_qp(qp, &a, IBV_QP_STATE | (rtr_mask & ~IBV_QP_AV)), EINVAL,
			  "%s QP INIT->RTR without IBV_QP_AV", t);
		check_err(ibv_modify_qp(qp, &a, IBV_QP_STATE | (rtr_mask & ~IBV_QP_DEST_QPN)),
			  EINVAL, "%s QP INIT->RTR without IBV_QP_DEST_QPN", t);
		a.path_mtu = pattr.max_mtu + 1;
		check_err(ibv_modify_qp(qp, &a, IBV_QP_STATE | rtr_mask), EINVAL,
			  "%s QP INIT->RTR with path_mtu above the port's max_mtu", t);
		a = rtr;
		a.qp_state = IBV_QPS_RTR;
		a.ah_attr.is_global = 0;
		check_err(ibv_modify_qp(qp, &a, IBV_QP_STATE | rtr_mask), EINVAL,
			  "%s QP INIT->RTR with an AV without GRH (RoCE needs one)", t);
		a.ah_attr = own_av();
		a.ah_attr.port_num = 2;
		check_err(ibv_modify_qp(qp, &a, IBV_QP_STATE | rtr_mask), EINVAL,
			  "%s QP INIT->RTR with an AV on port 2", t);
		a.ah_attr = own_av();
		a.ah_attr.grh.sgid_index = unused_gid_idx;
		check_err(ibv_modify_qp(qp, &a, IBV_QP_STATE | rtr_mask), ENODATA,
			  "%s QP INIT->RTR with sgid_index of an unused GID entry", t);
	} else {
		check_err(ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_AV), EINVAL,
			  "%s QP INIT->RTR with IBV_QP_AV", t);
	}
	a = rtr;
	if (to_state(qp, &a, rtr_mask, IBV_QPS_RTR, t, "INIT"))
		goto out;
	query_qp(qp, &q);
	if (conn) {
		check(q.path_mtu == rtr.path_mtu && q.dest_qp_num == rtr.dest_qp_num &&
		      q.rq_psn == rtr.rq_psn,
		      "%s QP in RTR reports path_mtu, dest_qp_num, rq_psn", t);
		check(q.ah_attr.is_global && q.ah_attr.port_num == 1 &&
		      q.ah_attr.grh.sgid_index == gid_idx &&
		      !memcmp(&q.ah_attr.grh.dgid, &own_gid, sizeof(own_gid)),
		      "%s QP in RTR reports its AV (GRH, port, sgid_index, dgid)", t);
	}
	if (rc)
		check(q.max_dest_rd_atomic == rtr.max_dest_rd_atomic &&
		      q.min_rnr_timer == rtr.min_rnr_timer,
		      "%s QP in RTR reports max_dest_rd_atomic, min_rnr_timer", t);

	/* RTR */
	a = rts;
	a.qp_state = IBV_QPS_RTS;
	check_err(ibv_modify_qp(qp, &a, IBV_QP_STATE | (rts_mask & ~IBV_QP_SQ_PSN)), EINVAL,
		  "%s QP RTR->RTS without IBV_QP_SQ_PSN", t);
	a.port_num = 1;
	check_err(ibv_modify_qp(qp, &a, IBV_QP_STATE | rts_mask | IBV_QP_PORT), EINVAL,
		  "%s QP RTR->RTS with IBV_QP_PORT", t);
	if (rc) {
		a = rts;
		a.qp_state = IBV_QPS_RTS;
		if (dattr.max_qp_rd_atom < 255) {
			a.max_rd_atomic = dattr.max_qp_rd_atom + 1;
			check_err(ibv_modify_qp(qp, &a, IBV_QP_STATE | rts_mask), EINVAL,
				  "%s QP RTR->RTS with max_rd_atomic above max_qp_rd_atom", t);
		}
		a = rts;
		a.qp_state = IBV_QPS_RTS;
		a.timeout = 32;
		check_err(ibv_modify_qp(qp, &a, IBV_QP_STATE | rts_mask), EINVAL,
			  "%s QP RTR->RTS with timeout 32 (5 bits)", t);
	}
	a = rts;
	if (to_state(qp, &a, rts_mask, IBV_QPS_RTS, t, "RTR"))
		goto out;
	query_qp(qp, &q);
	check(q.sq_psn == rts.sq_psn, "%s QP in RTS reports sq_psn", t);
	if (rc)
		check(q.timeout == rts.timeout && q.retry_cnt == rts.retry_cnt &&
		      q.rnr_retry == rts.rnr_retry && q.max_rd_atomic == rts.max_rd_atomic,
		      "%s QP in RTS reports timeout, retry_cnt, rnr_retry, max_rd_atomic", t);

	/* RTS and on */
	a = init;
	a.qp_state = IBV_QPS_INIT;
	check_err(ibv_modify_qp(qp, &a, IBV_QP_STATE | init_mask), EINVAL,
		  "%s QP RTS->INIT is illegal", t);
	memset(&a, 0, sizeof(a));
	if (to_state(qp, &a, 0, IBV_QPS_SQD, t, "RTS"))
		goto out;
	memset(&a, 0, sizeof(a));
	if (to_state(qp, &a, 0, IBV_QPS_ERR, t, "SQD"))
		goto out;
	a = rts;
	a.qp_state = IBV_QPS_RTS;
	check_err(ibv_modify_qp(qp, &a, IBV_QP_STATE | rts_mask), EINVAL,
		  "%s QP ERR->RTS is illegal", t);
	memset(&a, 0, sizeof(a));
	to_state(qp, &a, 0, IBV_QPS_RESET, t, "ERR");
out:
	check_err(ibv_destroy_qp(qp), 0, "destroy_qp of the %s QP", t);
}

static void qp_checks(struct ibv_context *ctx)
{
	static const enum ibv_qp_type types[] = { IBV_QPT_RC, IBV_QPT_UC, IBV_QPT_UD };
	struct ibv_pd *pd;
	struct ibv_cq *cq;

	pd = ibv_alloc_pd(ctx);
	cq = ibv_create_cq(ctx, 64, NULL, NULL, 0);
	check(pd && cq, "alloc PD and CQ for QPs");
	if (pd && cq) {
		for (unsigned int i = 0; i < ARRAY_SIZE(types); i++)
			qp_create_checks(pd, cq, types[i]);
		qp_limit_checks(pd, cq);
		check(gid_idx >= 0 && unused_gid_idx >= 0,
		      "port 1 has an IPv4 RoCEv2 GID and an unused GID entry");
		if (gid_idx >= 0 && unused_gid_idx >= 0)
			for (unsigned int i = 0; i < ARRAY_SIZE(types); i++)
				qp_modify_checks(pd, cq, types[i]);
	}
	if (cq)
		ibv_destroy_cq(cq);
	if (pd)
		ibv_dealloc_pd(pd);
}

/* --- SRQ --- */

static void check_srq_fails(struct ibv_pd *pd, int max_wr, int max_sge, int want,
			    const char *what)
{
	struct ibv_srq_init_attr sa = { .attr = { .max_wr = max_wr, .max_sge = max_sge } };
	struct ibv_srq *srq;
	int err;

	errno = 0;
	srq = ibv_create_srq(pd, &sa);
	err = errno;
	check_create(srq != NULL, err, want, "%s", what);
	if (srq)
		ibv_destroy_srq(srq);
}

/* SRQ resize (IBV_SRQ_MAX_WR) is checked with traffic by rc-test. */
static void srq_checks(struct ibv_context *ctx)
{
	struct ibv_srq_init_attr sa = { .attr = { .max_wr = 16, .max_sge = 1 } };
	struct ibv_srq_attr a, q;
	struct ibv_srq *srq = NULL;
	struct ibv_qp *qp = NULL;
	struct ibv_pd *pd;
	struct ibv_cq *cq;
	int err;

	pd = ibv_alloc_pd(ctx);
	cq = ibv_create_cq(ctx, 16, NULL, NULL, 0);
	check(pd && cq, "alloc PD and CQ for SRQs");
	if (!pd || !cq)
		goto out;

	errno = 0;
	srq = ibv_create_srq(pd, &sa);
	err = errno;
	check_create(srq != NULL, err, 0, "create_srq, 16 WRs, 1 SGE");
	check_srq_fails(pd, dattr.max_srq_wr + 1, 1, EINVAL, "create_srq above max_srq_wr");
	check_srq_fails(pd, 16, dattr.max_srq_sge + 1, EINVAL, "create_srq above max_srq_sge");
	check_srq_fails(pd, 0, 1, EINVAL, "create_srq with 0 WRs");
	if (!srq)
		goto out;

	memset(&q, 0, sizeof(q));
	check_err(ibv_query_srq(srq, &q), 0, "query_srq");
	check(q.max_wr >= 16 && q.max_sge >= 1, "SRQ reports max_wr %u >= 16 and max_sge",
	      q.max_wr);
	check(q.srq_limit == 0, "new SRQ has srq_limit 0 (%u)", q.srq_limit);

	memset(&a, 0, sizeof(a));
	a.srq_limit = 8;
	check_err(ibv_modify_srq(srq, &a, IBV_SRQ_LIMIT), 0, "modify_srq srq_limit 8");
	memset(&q, 0, sizeof(q));
	check_err(ibv_query_srq(srq, &q), 0, "query_srq after modify");
	check(q.srq_limit == 8, "SRQ reports srq_limit 8 (%u)", q.srq_limit);
	a.srq_limit = q.max_wr + 1;
	check_err(ibv_modify_srq(srq, &a, IBV_SRQ_LIMIT), EINVAL, "modify_srq srq_limit above max_wr");
	memset(&q, 0, sizeof(q));
	ibv_query_srq(srq, &q);
	check(q.srq_limit == 8, "failed modify_srq leaves srq_limit (%u)", q.srq_limit);

	errno = 0;
	qp = create_qp(pd, cq, srq, IBV_QPT_RC);
	err = errno;
	check_create(qp != NULL, err, 0, "create RC QP on the SRQ");
	if (qp) {
		err = ibv_destroy_srq(srq);
		check_err(err, EBUSY, "destroy_srq while a QP uses it");
		if (!err)
			srq = NULL;	/* gone after all: do not touch it again */
		check_err(ibv_destroy_qp(qp), 0, "destroy_qp of the QP on the SRQ");
	}
	check_err(srq ? ibv_destroy_srq(srq) : 0, 0, "destroy_srq once unused");
out:
	if (cq)
		ibv_destroy_cq(cq);
	if (pd)
		ibv_dealloc_pd(pd);
}

/* --- AH --- */

static void check_ah_fails(struct ibv_pd *pd, struct ibv_ah_attr av, int want, const char *what)
{
	struct ibv_ah *ah;
	int err;

	errno = 0;
	ah = ibv_create_ah(pd, &av);
	err = errno;
	check_create(ah != NULL, err, want, "%s", what);
	if (ah)
		ibv_destroy_ah(ah);
}

static void ah_checks(struct ibv_context *ctx)
{
	struct ibv_ah_attr av;
	struct ibv_ah *ah;
	struct ibv_pd *pd;
	int err;

	pd = ibv_alloc_pd(ctx);
	check(pd != NULL, "alloc PD for AHs");
	if (!pd)
		return;
	if (gid_idx < 0 || unused_gid_idx < 0) {
		check(0, "port 1 has an IPv4 RoCEv2 GID and an unused GID entry");
		ibv_dealloc_pd(pd);
		return;
	}

	av = own_av();
	errno = 0;
	ah = ibv_create_ah(pd, &av);
	err = errno;
	check_create(ah != NULL, err, 0, "create_ah to the own RoCEv2 GID");

	av = own_av();
	av.is_global = 0;
	check_ah_fails(pd, av, EINVAL, "create_ah without GRH (RoCE needs one)");
	av = own_av();
	av.port_num = 2;
	check_ah_fails(pd, av, EINVAL, "create_ah on port 2");
	av = own_av();
	av.port_num = 0;
	check_ah_fails(pd, av, EINVAL, "create_ah on port 0");
	av = own_av();
	av.grh.sgid_index = unused_gid_idx;
	check_ah_fails(pd, av, ENODATA, "create_ah with sgid_index of an unused GID entry");

	if (ah) {
		err = ibv_dealloc_pd(pd);
		check_err(err, EBUSY, "dealloc_pd while an AH uses it");
		if (!err)
			pd = NULL;	/* gone after all: do not touch it again */
		check_err(ibv_destroy_ah(ah), 0, "destroy_ah");
	}
	check_err(pd ? ibv_dealloc_pd(pd) : 0, 0, "dealloc_pd once no AH uses it");
}

/*
 * Hold mode: 3 PDs, an MR, 2 CQs, an RC QP, an SRQ and an AH, then "ready"
 * and sleep. Killed by the test, so nothing is released here.
 */
/* -s: ibv_rereg_mr, which rxe's provider does not offer. */
static void rereg_checks(struct ibv_context *ctx)
{
	const size_t len = 1 << 20;
	struct ibv_pd *pd1, *pd2;
	void *buf1, *buf2, *hole;
	struct ibv_mr *mr;
	uint32_t key;
	int ret;

	pd1 = ibv_alloc_pd(ctx);
	pd2 = ibv_alloc_pd(ctx);
	buf1 = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	buf2 = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	mr = pd1 && pd2 && buf1 != MAP_FAILED && buf2 != MAP_FAILED ?
	     ibv_reg_mr(pd1, buf1, len, IBV_ACCESS_LOCAL_WRITE) : NULL;
	check(mr != NULL, "rereg: MR registered");
	if (!mr)
		goto out;
	key = mr->lkey;
	check_err(ibv_rereg_mr(mr, IBV_REREG_MR_CHANGE_ACCESS, NULL, NULL, 0,
			       IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_READ), 0, "rereg: new access rights");
	check(mr->lkey == key && mr->rkey == key, "rereg: the MR keeps its keys (peers hold the rkey)");
	check_err(ibv_rereg_mr(mr, IBV_REREG_MR_CHANGE_TRANSLATION, NULL, buf2, len / 2, 0), 0,
		  "rereg: new address range");
	check(mr->addr == buf2 && mr->length == len / 2, "rereg: the MR reports its new range");
	check_err(ibv_rereg_mr(mr, IBV_REREG_MR_CHANGE_PD, pd2, NULL, 0, 0), 0, "rereg: new PD");
	check(mr->pd == pd2, "rereg: the MR reports its new PD");
	check_err(ibv_dealloc_pd(pd2), EBUSY, "rereg: the new PD is in use");
	check_err(ibv_dealloc_pd(pd1), 0, "rereg: the old PD is free");
	pd1 = NULL;
	errno = 0;
	ret = ibv_rereg_mr(mr, IBV_REREG_MR_CHANGE_ACCESS, NULL, NULL, 0, IBV_ACCESS_REMOTE_WRITE);
	check(ret == IBV_REREG_MR_ERR_CMD && errno == EINVAL,
	      "rereg: remote write without local write: Invalid argument (got %d, %s)", ret, strerror(errno));
	hole = mmap(NULL, len, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (hole != MAP_FAILED) {
		munmap(hole, len);
		errno = 0;
		ret = ibv_rereg_mr(mr, IBV_REREG_MR_CHANGE_TRANSLATION, NULL, hole, len, 0);
		check(ret < 0 && errno == EFAULT, "rereg: onto unmapped memory: Bad address (got %d, %s)",
		      ret, strerror(errno));
	}
	check(mr->addr == buf2 && mr->length == len / 2, "rereg: a failed rereg leaves the MR as it was");
	check_err(ibv_dereg_mr(mr), 0, "rereg: dereg");
out:
	if (pd1)
		ibv_dealloc_pd(pd1);
	if (pd2)
		ibv_dealloc_pd(pd2);
	if (buf1 != MAP_FAILED)
		munmap(buf1, len);
	if (buf2 != MAP_FAILED)
		munmap(buf2, len);
}

/*
 * -s: checks of values the IB spec bounds but rxe accepts (see the list of
 * rxe bugs above): P_Key index beyond the table, path MTU 0, a 25-bit
 * destination QPN, more responder resources than the device has, 4-bit
 * retry counts. Run on rxud only.
 */
static void strict_checks(struct ibv_context *ctx)
{
	struct ibv_qp_attr a, q;
	struct ibv_cq *cq;
	struct ibv_pd *pd;
	struct ibv_qp *qp;
	const int init_mask = IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS;
	const int rtr_mask = IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN |
			     IBV_QP_RQ_PSN | IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER;

	void *map;

	/* Only offsets the kernel handed out (in create responses) map. */
	errno = 0;
	map = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED, ctx->cmd_fd, 1ULL << 40);
	check(map == MAP_FAILED && errno == EINVAL, "strict: mmap of an offset never handed out: %s (got %s)",
	      strerror(EINVAL), map == MAP_FAILED ? strerror(errno) : "success");
	if (map != MAP_FAILED)
		munmap(map, 4096);

	pd = ibv_alloc_pd(ctx);
	cq = ibv_create_cq(ctx, 16, NULL, NULL, 0);
	qp = pd && cq ? create_qp(pd, cq, NULL, IBV_QPT_RC) : NULL;
	check(qp != NULL, "strict: RC QP created");
	if (!qp)
		goto out;
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_INIT;
	a.port_num = 1;
	a.pkey_index = 5;
	check_err(ibv_modify_qp(qp, &a, init_mask), EINVAL, "strict: RESET->INIT with P_Key index 5 (table of 1)");
	a.pkey_index = 0;
	check_err(ibv_modify_qp(qp, &a, init_mask), 0, "strict: RESET->INIT");

	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTR;
	a.ah_attr = own_av();
	a.path_mtu = IBV_MTU_1024;
	a.dest_qp_num = qp->qp_num;
	a.max_dest_rd_atomic = 4;
	a.path_mtu = 0;
	check_err(ibv_modify_qp(qp, &a, rtr_mask), EINVAL, "strict: INIT->RTR with path MTU 0");
	a.path_mtu = IBV_MTU_1024;
	a.dest_qp_num = 1 << 24;
	check_err(ibv_modify_qp(qp, &a, rtr_mask), EINVAL, "strict: INIT->RTR with a 25-bit destination QPN");
	a.dest_qp_num = qp->qp_num;
	a.max_dest_rd_atomic = 255;
	check_err(ibv_modify_qp(qp, &a, rtr_mask), EINVAL,
		  "strict: INIT->RTR with max_dest_rd_atomic above max_qp_rd_atom");
	a.max_dest_rd_atomic = 4;
	a.min_rnr_timer = 32;
	check_err(ibv_modify_qp(qp, &a, rtr_mask), EINVAL, "strict: INIT->RTR with a 6-bit RNR timer");
	a.min_rnr_timer = 12;
	check_err(ibv_modify_qp(qp, &a, rtr_mask), 0, "strict: INIT->RTR");
	query_qp(qp, &q);
	check(q.qp_state == IBV_QPS_RTR && q.path_mtu == IBV_MTU_1024 && q.max_dest_rd_atomic == 4,
	      "strict: rejected attempts changed nothing");

	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTS;
	a.timeout = 14;
	a.retry_cnt = 8;
	a.rnr_retry = 7;
	a.max_rd_atomic = 4;
	check_err(ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_SQ_PSN | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT |
				IBV_QP_RNR_RETRY | IBV_QP_MAX_QP_RD_ATOMIC),
		  EINVAL, "strict: RTR->RTS with a 4-bit retry count");
	check_err(ibv_destroy_qp(qp), 0, "strict: destroy QP");
out:
	if (cq)
		ibv_destroy_cq(cq);
	if (pd)
		ibv_dealloc_pd(pd);
}

static int hold(struct ibv_context *ctx, int seconds)
{
	struct ibv_srq_init_attr sa = { .attr = { .max_wr = 16, .max_sge = 1 } };
	struct ibv_ah_attr av;
	struct ibv_pd *pd[3];
	struct ibv_cq *cq[2];

	for (int i = 0; i < 3; i++)
		if (!(pd[i] = ibv_alloc_pd(ctx))) {
			perror("ibv_alloc_pd");
			return 1;
		}
	if (!ibv_reg_mr(pd[0], malloc(1 << 16), 1 << 16, IBV_ACCESS_LOCAL_WRITE)) {
		perror("ibv_reg_mr");
		return 1;
	}
	for (int i = 0; i < 2; i++) {
		cq[i] = ibv_create_cq(ctx, 16, NULL, NULL, 0);
		if (!cq[i]) {
			perror("ibv_create_cq");
			return 1;
		}
	}
	if (!create_qp(pd[1], cq[0], NULL, IBV_QPT_RC)) {
		perror("ibv_create_qp");
		return 1;
	}
	if (!ibv_create_srq(pd[2], &sa)) {
		perror("ibv_create_srq");
		return 1;
	}
	if (ibv_query_port(ctx, 1, &pattr)) {
		perror("ibv_query_port");
		return 1;
	}
	find_gids(ctx);
	if (gid_idx < 0) {
		fprintf(stderr, "no IPv4 RoCEv2 GID on port 1\n");
		return 1;
	}
	av = own_av();
	if (!ibv_create_ah(pd[0], &av)) {
		perror("ibv_create_ah");
		return 1;
	}
	printf("ready\n");
	fflush(stdout);
	sleep(seconds);
	return 0;
}

int main(int argc, char **argv)
{
	struct ibv_port_attr pa;
	struct ibv_pd *pds[NPDS];
	const char *dev = NULL;
	struct ibv_context *ctx;
	union ibv_gid gid;
	int hold_s = 0, strict = 0, opt, ok;
	__be16 pkey;

	while ((opt = getopt(argc, argv, "d:H:s")) != -1) {
		if (opt == 'd')
			dev = optarg;
		else if (opt == 's')
			strict = 1;
		else if (opt == 'H')
			hold_s = atoi(optarg);
		else
			return 2;
	}
	if (!dev) {
		fprintf(stderr, "usage: %s -d DEV [-s] [-H SECONDS]\n", argv[0]);
		return 2;
	}
	ctx = open_dev(dev);
	if (hold_s)
		return ctx ? hold(ctx, hold_s) : 1;

	printf("TAP version 13\n");
	check(ctx != NULL, "open %s", dev);
	if (!ctx) {
		printf("1..%d\n", n_checks);
		return 1;
	}

	check_err(ibv_query_device(ctx, &dattr), 0, "query_device");
	check(dattr.phys_port_cnt == 1, "one port (%d)", dattr.phys_port_cnt);
	check(dattr.max_pd >= NPDS, "max_pd %d >= %d", dattr.max_pd, NPDS);
	check(dattr.max_pkeys >= 1, "max_pkeys %d >= 1", dattr.max_pkeys);

	check_err(ibv_query_port(ctx, 1, &pattr), 0, "query_port 1");
	check(pattr.link_layer == IBV_LINK_LAYER_ETHERNET, "port 1 link layer is Ethernet");
	check(pattr.gid_tbl_len > 0 && pattr.pkey_tbl_len == 1, "gid_tbl_len %d > 0, pkey_tbl_len %d == 1",
	      pattr.gid_tbl_len, pattr.pkey_tbl_len);
	check_err(ibv_query_port(ctx, 2, &pa), EINVAL, "query_port 2 (no such port)");
	check_err(ibv_query_port(ctx, 0, &pa), EINVAL, "query_port 0 (ports count from 1)");

	check_err(ibv_query_gid(ctx, 1, 0, &gid), 0, "query_gid 1/0");
	check(gid.global.subnet_prefix == htobe64(0xfe80000000000000ULL), "GID 0 is the link-local one");
	check_err(ibv_query_pkey(ctx, 1, 0, &pkey), 0, "query_pkey 1/0");
	check(pkey == htobe16(0xffff), "P_Key 0 is 0xffff (%#x)", be16toh(pkey));

	ok = 1;
	for (int i = 0; i < NPDS; i++)
		ok &= (pds[i] = ibv_alloc_pd(ctx)) != NULL;
	check(ok, "alloc %d PDs", NPDS);
	ok = 1;
	for (int i = 0; i < NPDS; i++)
		ok &= pds[i] && ibv_dealloc_pd(pds[i]) == 0;
	check(ok, "dealloc %d PDs", NPDS);

	find_gids(ctx);
	if (strict) {
		strict_checks(ctx);
		rereg_checks(ctx);
	} else {
		mr_checks(ctx);
		cq_checks(ctx);
		qp_checks(ctx);
		srq_checks(ctx);
		ah_checks(ctx);
	}

	check_err(ibv_close_device(ctx), 0, "close_device");
	printf("1..%d\n", n_checks);
	return n_failed ? 1 : 0;
}
