// SPDX-License-Identifier: GPL-2.0 OR Linux-OpenIB
/*
 * xud-test: XUD's control path through librxud's direct verb
 * (infiniband/rxudv.h) and the ordinary verbs, in TAP. rxudv_create_qp on an
 * rxud device (defaults, limits, an SRQ, the ibv_wr_* interface), its
 * refusals (EOPNOTSUPP on another provider's context, EINVAL for a
 * comp_mask bit, max_peers or ack_every out of range, a short inlen and
 * attr_ex fields XUD cannot take), ibv_query_qp (type IBV_QPT_DRIVER, caps,
 * the retransmission defaults), ibv_modify_qp RESET -> INIT -> RTR -> RTS
 * with UD's attributes and XUD's optional ones and the values and masks
 * refused, ibv_post_send's refusals (WRITE, READ, atomics, invalidation,
 * a message over RXUDV_MAX_MSG_SZ, no AH), an RDMA WRITE built with
 * ibv_wr_rdma_write + ibv_wr_set_ud_addr, ibv_destroy_qp, and the device's
 * QP count in ib_core's resource tracking back where it was (XUD QPs are
 * driver-defined QPs, which RDMA netlink lists only when asked for driver
 * details: see qp_count()).
 *
 *   xud-test -d DEV -g GIDINDEX [-r OTHERDEV]
 *     DEV an rxud device, GIDINDEX a RoCE v2 GID of its port 1 (the AH of
 *     the posts); OTHERDEV a device of another provider (rxe), for
 *     EOPNOTSUPP.
 *   xud-test -d DEV -n
 *     prints DEV's QP count (driver-defined QPs included) and exits.
 *
 * Sends here go to a QP that does not exist (traffic between XUD QPs:
 * xud-data); they fail with IBV_WC_RETRY_EXC_ERR within the retry budget.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <linux/netlink.h>
#include <rdma/rdma_netlink.h>
#include <sys/socket.h>
#include <infiniband/verbs.h>
#include <infiniband/rxudv.h>
#include "tap.h"
#include "util.h"

#define POLL_MS 12000
#define QKEY 0x11111111
#define BUF_LEN 4096
/*
 * RDMA_NLDEV_ATTR_DRIVER_DETAILS of Linux 6.12's rdma_netlink.h (the
 * host's uapi headers, Linux 6.1's, predate it).
 */
#define NLDEV_ATTR_DRIVER_DETAILS 97
#define XUD_OPS (IBV_QP_EX_WITH_SEND | IBV_QP_EX_WITH_SEND_WITH_IMM | \
		 IBV_QP_EX_WITH_RDMA_WRITE | IBV_QP_EX_WITH_RDMA_WRITE_WITH_IMM)

/* rxudv.h's struct, as librxud reads it. */
_Static_assert(sizeof(struct rxudv_qp_init_attr) == 16, "rxudv_qp_init_attr size");
_Static_assert(offsetof(struct rxudv_qp_init_attr, max_peers) == 8, "max_peers");
_Static_assert(offsetof(struct rxudv_qp_init_attr, ack_every) == 12, "ack_every");

static const char *dev_name;
static struct ibv_context *ctx;
static struct ibv_pd *pd;
static struct ibv_cq *cq;
static union ibv_gid gid;
static int gid_idx = -1;

/* --- Helpers --- */

/* The attributes of an XUD QP on cq with the ibv_wr_* operations @ops. */
static struct ibv_qp_init_attr_ex xud_attr(uint64_t ops)
{
	struct ibv_qp_init_attr_ex a = {
		.send_cq = cq,
		.recv_cq = cq,
		.qp_type = IBV_QPT_DRIVER,
		.cap = { .max_send_wr = 16, .max_recv_wr = 16, .max_send_sge = 2,
			 .max_recv_sge = 2, .max_inline_data = 64 },
		.comp_mask = IBV_QP_INIT_ATTR_PD | (ops ? IBV_QP_INIT_ATTR_SEND_OPS_FLAGS : 0),
		.pd = pd,
		.send_ops_flags = ops,
	};

	return a;
}

/* rxudv_create_qp; errno 0 on success. */
static struct ibv_qp *create(struct ibv_context *c, struct ibv_qp_init_attr_ex *a,
			     struct rxudv_qp_init_attr *x, uint32_t inlen)
{
	errno = 0;
	return rxudv_create_qp(c, a, x, inlen);
}

/* rxudv_create_qp must fail with @want. */
static void create_fails(struct ibv_context *c, struct ibv_qp_init_attr_ex *a,
			 struct rxudv_qp_init_attr *x, uint32_t inlen, int want, const char *what)
{
	struct ibv_qp *qp = create(c, a, x, inlen);
	int err = qp ? 0 : errno;

	check_err(err, want, "rxudv_create_qp %s", what);
	if (qp)
		ibv_destroy_qp(qp);
}

/*
 * The QPs of the open device as ib_core's resource tracking lists them
 * (RDMA netlink, RDMA_NLDEV_CMD_RES_QP_GET) with driver details, which
 * driver-defined QPs such as XUD's need: without them ib_core leaves those
 * out, and Debian 12's `rdma resource show` (iproute2 6.1) never asks for
 * them. -1 on error.
 */
static int qp_count(void)
{
	struct {
		struct nlmsghdr h;
		struct nlattr dev_attr;
		uint32_t dev;
		struct nlattr dd_attr;
		uint8_t dd[4];
	} req = {
		.h = { .nlmsg_len = sizeof(req),
		       .nlmsg_type = RDMA_NL_GET_TYPE(RDMA_NL_NLDEV, RDMA_NLDEV_CMD_RES_QP_GET),
		       .nlmsg_flags = NLM_F_REQUEST | NLM_F_DUMP, .nlmsg_seq = 1 },
		.dev_attr = { .nla_len = NLA_HDRLEN + 4, .nla_type = RDMA_NLDEV_ATTR_DEV_INDEX },
		.dev = (uint32_t)ibv_get_device_index(ctx->device),
		.dd_attr = { .nla_len = NLA_HDRLEN + 1, .nla_type = NLDEV_ATTR_DRIVER_DETAILS },
		.dd = { 1 },
	};
	struct sockaddr_nl kernel = { .nl_family = AF_NETLINK };
	static char buf[65536];
	int fd = socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, NETLINK_RDMA);
	int n = 0, done = 0;

	if (fd < 0)
		return -1;
	if (sendto(fd, &req, sizeof(req), 0, (struct sockaddr *)&kernel, sizeof(kernel)) < 0)
		n = -1;
	while (n >= 0 && !done) {
		ssize_t len = recv(fd, buf, sizeof(buf), 0);
		struct nlmsghdr *h = (struct nlmsghdr *)buf;

		if (len < 0) {
			n = -1;
			break;
		}
		for (; NLMSG_OK(h, len); h = NLMSG_NEXT(h, len)) {
			struct nlattr *a = NLMSG_DATA(h);
			int left = h->nlmsg_len - NLMSG_HDRLEN;

			if (h->nlmsg_type == NLMSG_DONE) {
				done = 1;
				break;
			}
			if (h->nlmsg_type == NLMSG_ERROR) {
				n = -1;
				break;
			}
			/* The QP table: one nested entry per QP. */
			for (; left >= NLA_HDRLEN && a->nla_len >= NLA_HDRLEN && a->nla_len <= left;
			     left -= NLA_ALIGN(a->nla_len),
			     a = (struct nlattr *)((char *)a + NLA_ALIGN(a->nla_len))) {
				struct nlattr *e = (struct nlattr *)((char *)a + NLA_HDRLEN);
				int in = a->nla_len - NLA_HDRLEN;

				if ((a->nla_type & NLA_TYPE_MASK) != RDMA_NLDEV_ATTR_RES_QP)
					continue;
				for (; in >= NLA_HDRLEN && e->nla_len >= NLA_HDRLEN && e->nla_len <= in;
				     in -= NLA_ALIGN(e->nla_len),
				     e = (struct nlattr *)((char *)e + NLA_ALIGN(e->nla_len)))
					if ((e->nla_type & NLA_TYPE_MASK) == RDMA_NLDEV_ATTR_RES_QP_ENTRY)
						n++;
			}
		}
	}
	close(fd);
	return n;
}

static int modify(struct ibv_qp *qp, struct ibv_qp_attr *a, int mask)
{
	return ibv_modify_qp(qp, a, mask);
}

static int to_init(struct ibv_qp *qp)
{
	struct ibv_qp_attr a = { .qp_state = IBV_QPS_INIT, .port_num = 1, .qkey = QKEY };

	return modify(qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_QKEY);
}

static int to_rtr(struct ibv_qp *qp)
{
	struct ibv_qp_attr a = { .qp_state = IBV_QPS_RTR };

	return modify(qp, &a, IBV_QP_STATE);
}

static int to_rts(struct ibv_qp *qp)
{
	struct ibv_qp_attr a = { .qp_state = IBV_QPS_RTS, .sq_psn = 0 };

	return modify(qp, &a, IBV_QP_STATE | IBV_QP_SQ_PSN);
}

/* The next completion of cq within POLL_MS into @wc; 1 if one came. */
static int poll_one(struct ibv_wc *wc)
{
	long long deadline = now_ms() + POLL_MS;

	memset(wc, 0, sizeof(*wc));
	do {
		int n = ibv_poll_cq(cq, 1, wc);

		if (n)
			return n == 1;
		usleep(200);
	} while (now_ms() < deadline);
	return 0;
}

/*
 * The AH points back at this device and QPN 0x11 is nobody's XUD QP there,
 * so nothing answers: the next completion must be work request @wr_id of
 * @opcode on @qp failing with IBV_WC_RETRY_EXC_ERR ("may have been
 * delivered"), within the retry budget (timeout 12, retry_cnt 2: 16.8,
 * 33.6 and 67 ms, about 0.12 s; XUD's 8 s retry span bounds any budget).
 */
static void expect_unanswered(struct ibv_qp *qp, uint64_t wr_id, int opcode, const char *what)
{
	struct ibv_wc wc;
	long long t = now_ms();
	int got = poll_one(&wc);

	check(got && wc.wr_id == wr_id && wc.status == IBV_WC_RETRY_EXC_ERR &&
	      (int)wc.opcode == opcode && wc.qp_num == qp->qp_num,
	      "%s to a QP that does not exist completes with RETRY_EXC_ERR in %lld ms "
	      "(got %s: wr_id %llu, %s, %s)", what, now_ms() - t, got ? "one" : "none",
	      (unsigned long long)wc.wr_id, ibv_wc_status_str(wc.status),
	      wc_opcode_name(wc.opcode));
}

/* --- Checks --- */

static void create_checks(const char *other)
{
	struct rxudv_qp_init_attr x = {}, bad;
	struct ibv_qp_init_attr_ex a = xud_attr(0);
	struct ibv_qp_init_attr qia;
	struct ibv_qp_attr qa;
	struct ibv_srq_init_attr sa = { .attr = { .max_wr = 8, .max_sge = 1 } };
	struct ibv_srq *srq;
	struct ibv_qp *qp;
	uint8_t longer[24] = {};
	int ret;

	qp = create(ctx, &a, &x, sizeof(x));
	check(qp != NULL, "rxudv_create_qp on %s with the defaults (%s)", dev_name,
	      strerror(errno));
	if (!qp)
		return;
	check(qp->qp_type == IBV_QPT_DRIVER && qp->state == IBV_QPS_RESET,
	      "the QP is an IBV_QPT_DRIVER QP in RESET (type %d, state %d)", qp->qp_type,
	      qp->state);
	check(a.cap.max_send_wr >= 16 && a.cap.max_recv_wr >= 16 && a.cap.max_send_sge >= 2 &&
	      a.cap.max_recv_sge >= 2 && a.cap.max_inline_data >= 64,
	      "attr_ex.cap holds what was granted, at least what was asked (%u %u %u %u %u)",
	      a.cap.max_send_wr, a.cap.max_recv_wr, a.cap.max_send_sge, a.cap.max_recv_sge,
	      a.cap.max_inline_data);
	memset(&qia, 0, sizeof(qia));
	memset(&qa, 0, sizeof(qa));
	ret = ibv_query_qp(qp, &qa, IBV_QP_STATE | IBV_QP_CAP | IBV_QP_TIMEOUT |
			   IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY | IBV_QP_MIN_RNR_TIMER, &qia);
	check_err(ret, 0, "ibv_query_qp of the XUD QP");
	check(qia.qp_type == IBV_QPT_DRIVER && qa.qp_state == IBV_QPS_RESET,
	      "ibv_query_qp: type IBV_QPT_DRIVER, state RESET (type %d, state %d)", qia.qp_type,
	      qa.qp_state);
	check(!memcmp(&qia.cap, &a.cap, sizeof(a.cap)) && !memcmp(&qa.cap, &a.cap, sizeof(a.cap)),
	      "ibv_query_qp: the caps granted at creation (%u %u %u %u %u)", qia.cap.max_send_wr,
	      qia.cap.max_recv_wr, qia.cap.max_send_sge, qia.cap.max_recv_sge,
	      qia.cap.max_inline_data);
	check(qa.timeout == 14 && qa.retry_cnt == 7 && qa.rnr_retry == 7 && qa.min_rnr_timer == 12,
	      "ibv_query_qp: timeout 14, retry_cnt 7, rnr_retry 7, min_rnr_timer 12 by default "
	      "(%u, %u, %u, %u)", qa.timeout, qa.retry_cnt, qa.rnr_retry, qa.min_rnr_timer);
	check_err(ibv_destroy_qp(qp), 0, "ibv_destroy_qp of the XUD QP");

	/* The limits themselves are accepted. */
	x = (struct rxudv_qp_init_attr){ .max_peers = RXUDV_MAX_PEERS_MAX,
					 .ack_every = RXUDV_ACK_EVERY_MAX };
	a = xud_attr(0);
	qp = create(ctx, &a, &x, sizeof(x));
	check(qp != NULL, "rxudv_create_qp with max_peers %u and ack_every %u (%s)",
	      RXUDV_MAX_PEERS_MAX, RXUDV_ACK_EVERY_MAX, strerror(errno));
	if (qp)
		ibv_destroy_qp(qp);
	x = (struct rxudv_qp_init_attr){ .max_peers = 1, .ack_every = 1 };
	a = xud_attr(XUD_OPS);
	qp = create(ctx, &a, &x, sizeof(x));
	check(qp != NULL && ibv_qp_to_qp_ex(qp) != NULL,
	      "rxudv_create_qp with max_peers 1, ack_every 1 and the ibv_wr_* interface (%s)",
	      strerror(errno));
	if (qp)
		ibv_destroy_qp(qp);
	/* A newer caller's longer struct is fine if its new fields are zero. */
	memcpy(longer, &x, sizeof(x));
	a = xud_attr(0);
	qp = create(ctx, &a, (struct rxudv_qp_init_attr *)longer, sizeof(longer));
	check(qp != NULL, "rxudv_create_qp with a longer, zero-extended attribute struct (%s)",
	      strerror(errno));
	if (qp)
		ibv_destroy_qp(qp);
	/* On an SRQ, as a UD QP may be. */
	srq = ibv_create_srq(pd, &sa);
	a = xud_attr(0);
	a.srq = srq;
	a.cap.max_recv_wr = 0;
	a.cap.max_recv_sge = 0;
	x = (struct rxudv_qp_init_attr){};
	qp = srq ? create(ctx, &a, &x, sizeof(x)) : NULL;
	check(qp != NULL, "rxudv_create_qp on an SRQ (%s)", strerror(errno));
	if (qp)
		check_err(ibv_destroy_qp(qp), 0, "ibv_destroy_qp of the XUD QP on the SRQ");
	if (srq)
		ibv_destroy_srq(srq);

	/* Refusals. */
	if (other) {
		struct ibv_context *octx = open_dev(other);
		struct ibv_pd *opd = octx ? ibv_alloc_pd(octx) : NULL;
		struct ibv_cq *ocq = octx ? ibv_create_cq(octx, 4, NULL, NULL, 0) : NULL;

		check(opd && ocq, "a PD and a CQ on %s", other);
		a = xud_attr(0);
		a.pd = opd;
		a.send_cq = a.recv_cq = ocq;
		create_fails(octx, &a, &x, sizeof(x), EOPNOTSUPP, "on another provider's context");
		if (ocq)
			ibv_destroy_cq(ocq);
		if (opd)
			ibv_dealloc_pd(opd);
		if (octx)
			ibv_close_device(octx);
	}
	a = xud_attr(0);
	for (int bit = 0; bit < 64; bit += 21) {
		bad = (struct rxudv_qp_init_attr){ .comp_mask = 1ULL << bit };
		create_fails(ctx, &a, &bad, sizeof(bad), EINVAL, "with an unknown comp_mask bit");
	}
	bad = (struct rxudv_qp_init_attr){ .max_peers = RXUDV_MAX_PEERS_MAX + 1 };
	create_fails(ctx, &a, &bad, sizeof(bad), EINVAL, "with max_peers over the limit");
	bad = (struct rxudv_qp_init_attr){ .ack_every = RXUDV_ACK_EVERY_MAX + 1 };
	create_fails(ctx, &a, &bad, sizeof(bad), EINVAL, "with ack_every over 128");
	create_fails(ctx, &a, &x, 8, EINVAL, "with inlen 8 (too small)");
	create_fails(ctx, &a, &x, 0, EINVAL, "with inlen 0");
	longer[20] = 1;
	create_fails(ctx, &a, (struct rxudv_qp_init_attr *)longer, sizeof(longer), EINVAL,
		     "with a longer struct whose unknown part is not zero");
	a.qp_type = IBV_QPT_UD;
	create_fails(ctx, &a, &x, sizeof(x), EINVAL, "with qp_type UD");
	a = xud_attr(XUD_OPS | IBV_QP_EX_WITH_RDMA_READ);
	create_fails(ctx, &a, &x, sizeof(x), EINVAL, "with send_ops_flags RDMA_READ");
	a = xud_attr(XUD_OPS | IBV_QP_EX_WITH_ATOMIC_FETCH_AND_ADD);
	create_fails(ctx, &a, &x, sizeof(x), EINVAL, "with send_ops_flags ATOMIC_FETCH_AND_ADD");
	a = xud_attr(0);
	a.comp_mask |= IBV_QP_INIT_ATTR_CREATE_FLAGS;
	a.create_flags = IBV_QP_CREATE_SCATTER_FCS;
	create_fails(ctx, &a, &x, sizeof(x), EINVAL, "with a creation flag");
	a = xud_attr(0);
	a.comp_mask = 0;
	create_fails(ctx, &a, &x, sizeof(x), EINVAL, "without IBV_QP_INIT_ATTR_PD");
	/* Plain ibv_create_qp cannot make a driver QP: the kernel refuses it. */
	{
		struct ibv_qp_init_attr p = { .send_cq = cq, .recv_cq = cq,
			.cap = { .max_send_wr = 4, .max_recv_wr = 4, .max_send_sge = 1,
				 .max_recv_sge = 1 },
			.qp_type = IBV_QPT_DRIVER };

		errno = 0;
		qp = ibv_create_qp(pd, &p);
		check_err(qp ? 0 : errno, EINVAL, "ibv_create_qp of an IBV_QPT_DRIVER QP (no XUD request)");
		if (qp)
			ibv_destroy_qp(qp);
	}
}

static void modify_checks(void)
{
	struct rxudv_qp_init_attr x = {};
	struct ibv_qp_init_attr_ex a = xud_attr(0);
	struct ibv_qp *qp = create(ctx, &a, &x, sizeof(x));
	struct ibv_qp *q2 = create(ctx, &a, &x, sizeof(x));
	struct ibv_qp_attr m, qa;
	struct ibv_qp_init_attr qia;
	int ret;

	check(qp && q2, "two XUD QPs for the state machine (%s)", strerror(errno));
	if (!qp || !q2)
		goto out;
	/* RESET -> INIT: UD's attributes; an RC one is refused. */
	m = (struct ibv_qp_attr){ .qp_state = IBV_QPS_INIT, .port_num = 1, .qkey = QKEY,
				  .qp_access_flags = IBV_ACCESS_REMOTE_WRITE };
	check_err(modify(q2, &m, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_QKEY |
			 IBV_QP_ACCESS_FLAGS), EINVAL, "RESET -> INIT with ACCESS_FLAGS (RC's)");
	check_err(modify(q2, &m, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT), EINVAL,
		  "RESET -> INIT without QKEY");
	check_err(to_init(qp), 0, "RESET -> INIT with P_Key index, port and Q_Key");
	check_err(to_init(q2), 0, "RESET -> INIT (second QP)");
	/* INIT -> RTR: min_rnr_timer optional, a 5-bit value. */
	m = (struct ibv_qp_attr){ .qp_state = IBV_QPS_RTR, .min_rnr_timer = 32 };
	check_err(modify(q2, &m, IBV_QP_STATE | IBV_QP_MIN_RNR_TIMER), EINVAL,
		  "INIT -> RTR with min_rnr_timer 32");
	m = (struct ibv_qp_attr){ .qp_state = IBV_QPS_RTR, .timeout = 10 };
	check_err(modify(q2, &m, IBV_QP_STATE | IBV_QP_TIMEOUT), EINVAL,
		  "INIT -> RTR with TIMEOUT (an RTS attribute)");
	m = (struct ibv_qp_attr){ .qp_state = IBV_QPS_RTR, .min_rnr_timer = 5 };
	check_err(modify(qp, &m, IBV_QP_STATE | IBV_QP_MIN_RNR_TIMER), 0,
		  "INIT -> RTR with min_rnr_timer 5");
	check_err(to_rtr(q2), 0, "INIT -> RTR without attributes");
	/* RTR -> RTS: timeout, retry_cnt, rnr_retry optional, in range. */
	m = (struct ibv_qp_attr){ .qp_state = IBV_QPS_RTS, .timeout = 32 };
	check_err(modify(q2, &m, IBV_QP_STATE | IBV_QP_SQ_PSN | IBV_QP_TIMEOUT), EINVAL,
		  "RTR -> RTS with timeout 32");
	m = (struct ibv_qp_attr){ .qp_state = IBV_QPS_RTS, .retry_cnt = 8 };
	check_err(modify(q2, &m, IBV_QP_STATE | IBV_QP_SQ_PSN | IBV_QP_RETRY_CNT), EINVAL,
		  "RTR -> RTS with retry_cnt 8");
	m = (struct ibv_qp_attr){ .qp_state = IBV_QPS_RTS, .rnr_retry = 8 };
	check_err(modify(q2, &m, IBV_QP_STATE | IBV_QP_SQ_PSN | IBV_QP_RNR_RETRY), EINVAL,
		  "RTR -> RTS with rnr_retry 8");
	m = (struct ibv_qp_attr){ .qp_state = IBV_QPS_RTS, .min_rnr_timer = 3 };
	check_err(modify(q2, &m, IBV_QP_STATE | IBV_QP_SQ_PSN | IBV_QP_MIN_RNR_TIMER), EINVAL,
		  "RTR -> RTS with MIN_RNR_TIMER (an RTR attribute)");
	m = (struct ibv_qp_attr){ .qp_state = IBV_QPS_RTS, .timeout = 18, .retry_cnt = 3,
				  .rnr_retry = 6 };
	check_err(modify(qp, &m, IBV_QP_STATE | IBV_QP_SQ_PSN | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT |
			 IBV_QP_RNR_RETRY), 0, "RTR -> RTS with timeout 18, retry_cnt 3, rnr_retry 6");
	check_err(to_rts(q2), 0, "RTR -> RTS with the SQ PSN alone");
	memset(&qa, 0, sizeof(qa));
	ret = ibv_query_qp(qp, &qa, IBV_QP_STATE, &qia);
	check(!ret && qa.qp_state == IBV_QPS_RTS && qa.qkey == QKEY && qa.port_num == 1 &&
	      qa.timeout == 18 && qa.retry_cnt == 3 && qa.rnr_retry == 6 &&
	      qa.min_rnr_timer == 5 && qia.qp_type == IBV_QPT_DRIVER,
	      "ibv_query_qp: RTS, the Q_Key, port 1, timeout 18, retry_cnt 3, rnr_retry 6, "
	      "min_rnr_timer 5 (%d: state %d, qkey %#x, port %u, %u, %u, %u, %u)", ret,
	      qa.qp_state, qa.qkey, qa.port_num, qa.timeout, qa.retry_cnt, qa.rnr_retry,
	      qa.min_rnr_timer);
	memset(&qa, 0, sizeof(qa));
	ret = ibv_query_qp(q2, &qa, IBV_QP_STATE, &qia);
	check(!ret && qa.timeout == 14 && qa.retry_cnt == 7 && qa.rnr_retry == 7 &&
	      qa.min_rnr_timer == 12, "ibv_query_qp: the defaults stay where none was set "
	      "(%u, %u, %u, %u)", qa.timeout, qa.retry_cnt, qa.rnr_retry, qa.min_rnr_timer);
	/* RTS -> RTS takes the Q_Key, as UD's; ERROR and RESET work. */
	m = (struct ibv_qp_attr){ .qp_state = IBV_QPS_RTS, .qkey = QKEY + 1 };
	check_err(modify(q2, &m, IBV_QP_STATE | IBV_QP_QKEY), 0, "RTS -> RTS with a new Q_Key");
	m = (struct ibv_qp_attr){ .qp_state = IBV_QPS_ERR };
	check_err(modify(q2, &m, IBV_QP_STATE), 0, "RTS -> ERROR");
	m = (struct ibv_qp_attr){ .qp_state = IBV_QPS_RESET };
	check_err(modify(q2, &m, IBV_QP_STATE), 0, "ERROR -> RESET");
	check_err(to_init(q2), 0, "RESET -> INIT again");
out:
	if (qp)
		ibv_destroy_qp(qp);
	if (q2)
		ibv_destroy_qp(q2);
}

/* A send work request of @opcode from @buf (@len bytes) to @ah. */
static struct ibv_send_wr send_wr(uint64_t wr_id, enum ibv_wr_opcode opcode, struct ibv_sge *sge,
				  struct ibv_ah *ah)
{
	struct ibv_send_wr wr = { .wr_id = wr_id, .opcode = opcode, .sg_list = sge, .num_sge = 1,
				  .send_flags = IBV_SEND_SIGNALED };

	wr.wr.ud.ah = ah;
	wr.wr.ud.remote_qpn = 0x11;
	wr.wr.ud.remote_qkey = QKEY;
	return wr;
}

static void post_checks(void)
{
	static const struct { enum ibv_wr_opcode op; const char *name; } refused[] = {
		{ IBV_WR_RDMA_WRITE, "RDMA_WRITE" },
		{ IBV_WR_RDMA_WRITE_WITH_IMM, "RDMA_WRITE_WITH_IMM" },
		{ IBV_WR_RDMA_READ, "RDMA_READ" },
		{ IBV_WR_ATOMIC_CMP_AND_SWP, "ATOMIC_CMP_AND_SWP" },
		{ IBV_WR_ATOMIC_FETCH_AND_ADD, "ATOMIC_FETCH_AND_ADD" },
		{ IBV_WR_LOCAL_INV, "LOCAL_INV" },
		{ IBV_WR_SEND_WITH_INV, "SEND_WITH_INV" },
	};
	struct ibv_ah_attr av = { .is_global = 1, .port_num = 1,
		.grh = { .dgid = gid, .sgid_index = gid_idx, .hop_limit = 64 } };
	struct rxudv_qp_init_attr x = {};
	struct ibv_qp_init_attr_ex a = xud_attr(XUD_OPS);
	struct ibv_qp *qp = create(ctx, &a, &x, sizeof(x));
	uint8_t *buf = calloc(1, BUF_LEN);
	struct ibv_mr *mr = buf ? ibv_reg_mr(pd, buf, BUF_LEN, IBV_ACCESS_LOCAL_WRITE) : NULL;
	struct ibv_ah *ah = ibv_create_ah(pd, &av);
	struct ibv_sge sge = { .addr = (uintptr_t)buf, .length = 64, .lkey = mr ? mr->lkey : 0 };
	struct ibv_send_wr wr, *bad;
	struct ibv_qp_ex *qx;
	int err = 0;

	check(qp && mr && ah, "an XUD QP with the ibv_wr_* interface, an MR and an AH to GID %d",
	      gid_idx);
	if (!qp || !mr || !ah)
		goto out;
	err = to_init(qp);
	err = err ?: to_rtr(qp);
	if (!err) {
		/* Timeout 12 (16.8 ms), 2 retries: the sends below fail fast. */
		struct ibv_qp_attr a = { .qp_state = IBV_QPS_RTS, .sq_psn = 0, .timeout = 12,
					 .retry_cnt = 2 };

		err = modify(qp, &a, IBV_QP_STATE | IBV_QP_SQ_PSN | IBV_QP_TIMEOUT |
			     IBV_QP_RETRY_CNT);
	}
	check_err(err, 0, "the XUD QP to RTS (timeout 12, retry_cnt 2)");
	if (err)
		goto out;

	/* Refused by librxud: nothing reaches the kernel (no completion). */
	for (size_t i = 0; i < ARRAY_SIZE(refused); i++) {
		wr = send_wr(10 + i, refused[i].op, &sge, ah);
		wr.wr.rdma.remote_addr = (uintptr_t)buf;
		wr.wr.rdma.rkey = mr->rkey;
		if (refused[i].op == IBV_WR_ATOMIC_CMP_AND_SWP ||
		    refused[i].op == IBV_WR_ATOMIC_FETCH_AND_ADD)
			sge.length = 8;
		bad = NULL;
		err = ibv_post_send(qp, &wr, &bad);
		check(err == EINVAL && bad == &wr, "ibv_post_send refuses %s: EINVAL, bad_wr set "
		      "(got %s)", refused[i].name, err ? strerror(err) : "success");
		sge.length = 64;
	}
	{
		struct ibv_sge two[2] = {
			{ .addr = (uintptr_t)buf, .length = RXUDV_MAX_MSG_SZ, .lkey = mr->lkey },
			{ .addr = (uintptr_t)buf, .length = 1, .lkey = mr->lkey },
		};

		wr = send_wr(20, IBV_WR_SEND, two, ah);
		wr.num_sge = 2;
		bad = NULL;
		err = ibv_post_send(qp, &wr, &bad);
		check(err == EINVAL && bad == &wr, "ibv_post_send refuses a SEND of "
		      "RXUDV_MAX_MSG_SZ + 1 bytes (got %s)", err ? strerror(err) : "success");
	}
	wr = send_wr(21, IBV_WR_SEND, &sge, NULL);
	bad = NULL;
	err = ibv_post_send(qp, &wr, &bad);
	check(err == EINVAL && bad == &wr, "ibv_post_send refuses a SEND without an AH (got %s)",
	      err ? strerror(err) : "success");
	{
		struct ibv_wc wc;

		check(ibv_poll_cq(cq, 1, &wc) == 0, "the refused requests made no completion");
	}

	/* SEND through ibv_post_send reaches the kernel. */
	wr = send_wr(30, IBV_WR_SEND, &sge, ah);
	bad = NULL;
	check_err(ibv_post_send(qp, &wr, &bad), 0, "ibv_post_send of a SEND with wr.ud");
	expect_unanswered(qp, 30, IBV_WC_SEND, "the SEND");

	/* RDMA WRITE through ibv_wr_*: both addresses. */
	qx = ibv_qp_to_qp_ex(qp);
	check(qx != NULL, "ibv_qp_to_qp_ex of the XUD QP");
	if (!qx)
		goto out;
	ibv_wr_start(qx);
	qx->wr_id = 31;
	qx->wr_flags = IBV_SEND_SIGNALED;
	ibv_wr_rdma_write(qx, mr->rkey, (uintptr_t)buf + 1024);
	ibv_wr_set_ud_addr(qx, ah, 0x11, QKEY);
	ibv_wr_set_sge(qx, mr->lkey, (uintptr_t)buf, 64);
	qx->wr_id = 32;
	ibv_wr_rdma_write_imm(qx, mr->rkey, (uintptr_t)buf + 2048, htonl(0x1234));
	ibv_wr_set_ud_addr(qx, ah, 0x11, QKEY);
	ibv_wr_set_sge(qx, mr->lkey, (uintptr_t)buf, 64);
	check_err(ibv_wr_complete(qx), 0,
		  "ibv_wr_rdma_write(_imm) + ibv_wr_set_ud_addr + ibv_wr_set_sge up to ibv_wr_complete");
	expect_unanswered(qp, 31, IBV_WC_RDMA_WRITE, "the RDMA WRITE");
	expect_unanswered(qp, 32, IBV_WC_RDMA_WRITE, "the RDMA WRITE with immediate");
	/* A WRITE without its UD address cannot go. */
	ibv_wr_start(qx);
	qx->wr_id = 33;
	ibv_wr_rdma_write(qx, mr->rkey, (uintptr_t)buf);
	ibv_wr_set_sge(qx, mr->lkey, (uintptr_t)buf, 64);
	check_err(ibv_wr_complete(qx), EINVAL, "ibv_wr_complete of an RDMA WRITE without "
		  "ibv_wr_set_ud_addr");
	{
		struct ibv_wc wc;

		usleep(100000);
		check(ibv_poll_cq(cq, 1, &wc) == 0, "nothing more completed");
	}
out:
	if (qp)
		check_err(ibv_destroy_qp(qp), 0, "ibv_destroy_qp after posting");
	if (ah)
		ibv_destroy_ah(ah);
	if (mr)
		ibv_dereg_mr(mr);
	free(buf);
}

int main(int argc, char **argv)
{
	const char *other = NULL;
	int opt, before, during, count_only = 0;

	while ((opt = getopt(argc, argv, "d:g:nr:")) != -1) {
		if (opt == 'd')
			dev_name = optarg;
		else if (opt == 'n')
			count_only = 1;
		else if (opt == 'g')
			gid_idx = atoi(optarg);
		else if (opt == 'r')
			other = optarg;
		else
			return 2;
	}
	if (!dev_name || (gid_idx < 0 && !count_only)) {
		fprintf(stderr, "usage: %s -d DEV -g GIDINDEX [-r OTHERDEV] | -d DEV -n\n", argv[0]);
		return 2;
	}
	ctx = open_dev(dev_name);
	if (count_only) {
		before = ctx ? qp_count() : -1;
		printf("%d\n", before);
		if (ctx)
			ibv_close_device(ctx);
		return before < 0;
	}
	check(ctx != NULL, "open %s", dev_name);
	if (!ctx)
		goto done;
	check_err(ibv_query_gid(ctx, 1, gid_idx, &gid), 0, "query_gid 1/%d", gid_idx);
	pd = ibv_alloc_pd(ctx);
	cq = ibv_create_cq(ctx, 64, NULL, NULL, 0);
	check(pd && cq, "a PD and a CQ");
	if (!pd || !cq)
		goto close;
	before = qp_count();
	check(before >= 0, "ib_core's resource tracking lists %s's QPs (%d)", dev_name, before);

	create_checks(other);
	modify_checks();
	post_checks();

	{
		struct rxudv_qp_init_attr x = {};
		struct ibv_qp_init_attr_ex a = xud_attr(0);
		struct ibv_qp *q[3];

		for (int i = 0; i < 3; i++)
			q[i] = create(ctx, &a, &x, sizeof(x));
		during = qp_count();
		check(q[0] && q[1] && q[2] && during == before + 3,
		      "ib_core's resource tracking lists three XUD QPs more (%d, was %d)", during,
		      before);
		for (int i = 0; i < 3; i++)
			if (q[i])
				ibv_destroy_qp(q[i]);
	}
	check(qp_count() == before, "after ibv_destroy_qp the QP count is back to %d (%d)", before,
	      qp_count());
close:
	if (cq)
		ibv_destroy_cq(cq);
	if (pd)
		ibv_dealloc_pd(pd);
	ibv_close_device(ctx);
done:
	printf("1..%d\n", n_checks);
	return n_failed ? 1 : 0;
}
