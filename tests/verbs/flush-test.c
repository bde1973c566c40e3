// SPDX-License-Identifier: GPL-2.0 OR Linux-OpenIB
/*
 * flush-test: FLUSH (IBTA 1.5, Annex A19) between two RC QPs of one rxud
 * device, connected to each other over its own GID, in TAP. rdma-core 44
 * has no ibv_wr_flush: librxud's rxudv_wr_flush (rxudv.h) stages it in an
 * ibv_wr_* batch.
 *
 * What a FLUSH must do, and refuse:
 * - an RDMA WRITE, then a FLUSH of its range for global visibility: both
 *   complete with success (the FLUSH as IBV_WC_FLUSH, after the target
 *   answered it), the data is there; a FLUSH of the whole MR (selectivity
 *   level 1) whatever the range it names;
 * - the target's MR or QP without IBV_ACCESS_FLUSH_GLOBAL, a range past
 *   the MR, a FLUSH for persistence (rxud has no persistent memory):
 *   remote access error, and nothing else completes with success after it;
 * - reserved placement types or selectivity levels: a local QP operation
 *   error, nothing sent;
 * - creation: RXUDV_QP_EX_WITH_FLUSH for an RC QP, not a UC or UD one;
 *   registration: an MR with IBV_ACCESS_FLUSH_PERSISTENT is refused
 *   (EOPNOTSUPP: the device does not offer it), one with FLUSH_GLOBAL taken.
 *
 *   flush-test -d DEV -g GIDINDEX
 *
 * Every completion is waited for at most POLL_MS.
 */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>
#include <infiniband/verbs.h>
#include <infiniband/rxudv.h>
#include "tap.h"
#include "util.h"

#define BUF_LEN 65536
#define POLL_MS 10000
#define WRITE_LEN 4096
/* rdma-core 45's IBV_ACCESS_FLUSH_PERSISTENT (rdma-core 44 names neither). */
#define ACCESS_FLUSH_PERSISTENT (1u << 9)
#define BASE_ACCESS (IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ)
#define OPS (IBV_QP_EX_WITH_RDMA_WRITE | RXUDV_QP_EX_WITH_FLUSH)

static struct ibv_context *ctx;
static struct ibv_pd *pd;
static union ibv_gid gid;
static int gid_idx = -1;
static uint8_t *buf_a, *buf_b;
static struct ibv_mr *mr_a, *mr_b, *mr_noflush;

/* Two RC QPs, A (the requester, its ibv_qp_ex in x) and B, each on a CQ. */
struct pair {
	struct ibv_cq *cq[2];
	struct ibv_qp *qp[2];
	struct ibv_qp_ex *x;
};

static struct ibv_qp *make_qp(struct ibv_cq *cq, enum ibv_qp_type type, uint64_t ops)
{
	struct ibv_qp_init_attr_ex a = {
		.send_cq = cq,
		.recv_cq = cq,
		.qp_type = type,
		.cap = { .max_send_wr = 16, .max_recv_wr = 4, .max_send_sge = 1, .max_recv_sge = 1 },
		.comp_mask = IBV_QP_INIT_ATTR_PD | IBV_QP_INIT_ATTR_SEND_OPS_FLAGS,
		.pd = pd,
		.send_ops_flags = ops,
	};

	errno = 0;
	return ibv_create_qp_ex(ctx, &a);
}

/*
 * RC QP @qp connected to @dest_qpn of this device (util.h's rc_connect,
 * which grants REMOTE_WRITE), then granting @access instead (RTS to RTS).
 */
static int connect_rc(struct ibv_qp *qp, uint32_t dest_qpn, unsigned int access)
{
	struct ibv_qp_attr a = { .qp_state = IBV_QPS_RTS, .qp_access_flags = access };

	if (rc_connect(qp, gid_idx, &gid, dest_qpn))
		return errno;
	return ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_ACCESS_FLAGS);
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

/* A connected pair whose B grants @b_access; 0 on failure (checked). */
static int pair_make(struct pair *p, unsigned int b_access)
{
	int err = 0;

	memset(p, 0, sizeof(*p));
	for (int i = 0; i < 2 && !err; i++) {
		p->cq[i] = ibv_create_cq(ctx, 32, NULL, NULL, 0);
		p->qp[i] = p->cq[i] ? make_qp(p->cq[i], IBV_QPT_RC, OPS) : NULL;
		if (!p->qp[i])
			err = errno ? errno : EIO;
	}
	if (!err)
		err = connect_rc(p->qp[0], p->qp[1]->qp_num, BASE_ACCESS);
	if (!err)
		err = connect_rc(p->qp[1], p->qp[0]->qp_num, b_access);
	if (!err)
		p->x = ibv_qp_to_qp_ex(p->qp[0]);
	if (err || !p->x) {
		check(0, "RC pair made and connected (%s)", strerror(err));
		pair_destroy(p);
		return 0;
	}
	return 1;
}

/* The next completion of @cq within POLL_MS: 1 if there was one. */
static int poll_one(struct ibv_cq *cq, struct ibv_wc *wc)
{
	long long end = now_ms() + POLL_MS;

	do {
		int n = ibv_poll_cq(cq, 1, wc);

		if (n)
			return n > 0;
		usleep(1000);
	} while (now_ms() < end);
	return 0;
}

/* Stages a FLUSH with wr_id @id (signaled) in the open batch of @x. */
static void flush(struct ibv_qp_ex *x, uint64_t id, uint32_t rkey, uint64_t addr, size_t len,
		  uint8_t type, uint8_t level)
{
	x->wr_id = id;
	x->wr_flags = IBV_SEND_SIGNALED;
	rxudv_wr_flush(x, rkey, addr, len, type, level);
}

/* A's next completion is @id with @status (and, on success, @opcode). */
static void expect(struct pair *p, uint64_t id, enum ibv_wc_status status, int opcode,
		   const char *what)
{
	struct ibv_wc wc;

	if (!poll_one(p->cq[0], &wc)) {
		check(0, "%s: a completion of wr_id %llu (none)", what, (unsigned long long)id);
		return;
	}
	check(wc.wr_id == id && wc.status == status &&
	      (status != IBV_WC_SUCCESS || (int)wc.opcode == opcode),
	      "%s: wr_id %llu, %s%s%s (got wr_id %llu, %s, opcode %d)", what,
	      (unsigned long long)id, ibv_wc_status_str(status),
	      status == IBV_WC_SUCCESS ? ", opcode " : "",
	      status == IBV_WC_SUCCESS ? (opcode == RXUDV_WC_FLUSH ? "FLUSH" :
					  wc_opcode_name(opcode)) : "",
	      (unsigned long long)wc.wr_id, ibv_wc_status_str(wc.status), (int)wc.opcode);
}

static uint64_t addr_a(size_t off) { return (uintptr_t)buf_a + off; }
static uint64_t addr_b(size_t off) { return (uintptr_t)buf_b + off; }

static void creation_checks(void)
{
	struct ibv_cq *cq = ibv_create_cq(ctx, 4, NULL, NULL, 0);
	struct ibv_mr *mr;
	struct ibv_qp *qp;

	qp = cq ? make_qp(cq, IBV_QPT_RC, OPS) : NULL;
	check(qp != NULL, "create_qp_ex RC with RDMA_WRITE and RXUDV_QP_EX_WITH_FLUSH (%s)",
	      qp ? "ok" : strerror(errno));
	if (qp)
		ibv_destroy_qp(qp);
	for (int i = 0; i < 2; i++) {
		enum ibv_qp_type t = i ? IBV_QPT_UD : IBV_QPT_UC;

		qp = cq ? make_qp(cq, t, IBV_QP_EX_WITH_SEND | RXUDV_QP_EX_WITH_FLUSH) : NULL;
		check(!qp && errno == EOPNOTSUPP, "create_qp_ex %s with FLUSH: EOPNOTSUPP (got %s)",
		      i ? "UD" : "UC", qp ? "a QP" : strerror(errno));
		if (qp)
			ibv_destroy_qp(qp);
	}
	if (cq)
		ibv_destroy_cq(cq);
	errno = 0;
	mr = ibv_reg_mr(pd, buf_b, 4096, BASE_ACCESS | ACCESS_FLUSH_PERSISTENT);
	check(!mr && errno == EOPNOTSUPP, "reg_mr with FLUSH_PERSISTENT: EOPNOTSUPP (got %s)",
	      mr ? "an MR" : strerror(errno));
	if (mr)
		ibv_dereg_mr(mr);
}

/* A WRITE, then FLUSHes of its range and of the whole MR: all succeed. */
static void flush_checks(void)
{
	struct pair p;

	if (!pair_make(&p, BASE_ACCESS | RXUDV_ACCESS_FLUSH_GLOBAL))
		return;
	fill(buf_a, WRITE_LEN, 3);
	memset(buf_b, 0, WRITE_LEN);
	ibv_wr_start(p.x);
	p.x->wr_id = 1;
	p.x->wr_flags = IBV_SEND_SIGNALED;
	ibv_wr_rdma_write(p.x, mr_b->rkey, addr_b(0));
	ibv_wr_set_sge(p.x, mr_a->lkey, addr_a(0), WRITE_LEN);
	flush(p.x, 2, mr_b->rkey, addr_b(0), WRITE_LEN, RXUDV_FLUSH_GLOBAL, RXUDV_FLUSH_RANGE);
	check_err(ibv_wr_complete(p.x), 0, "RDMA WRITE of 4 KB, FLUSH of its range: wr_complete");
	expect(&p, 1, IBV_WC_SUCCESS, IBV_WC_RDMA_WRITE, "RDMA WRITE");
	expect(&p, 2, IBV_WC_SUCCESS, RXUDV_WC_FLUSH, "FLUSH (global visibility) of the range");
	check(same(buf_b, WRITE_LEN, 3), "the written data is in the target's memory");

	/* Level MR: the range it names does not matter, not even past the MR. */
	ibv_wr_start(p.x);
	flush(p.x, 3, mr_b->rkey, addr_b(BUF_LEN), 1u << 20, RXUDV_FLUSH_GLOBAL, RXUDV_FLUSH_MR);
	flush(p.x, 4, mr_b->rkey, addr_b(0), 0, RXUDV_FLUSH_GLOBAL, RXUDV_FLUSH_RANGE);
	check_err(ibv_wr_complete(p.x), 0, "FLUSH of the whole MR, FLUSH of 0 bytes: wr_complete");
	expect(&p, 3, IBV_WC_SUCCESS, RXUDV_WC_FLUSH, "FLUSH of the whole MR");
	expect(&p, 4, IBV_WC_SUCCESS, RXUDV_WC_FLUSH, "FLUSH of 0 bytes");

	/* Reserved values: refused before the wire, the QP in error. */
	ibv_wr_start(p.x);
	flush(p.x, 5, mr_b->rkey, addr_b(0), 64, 4, RXUDV_FLUSH_RANGE);
	check_err(ibv_wr_complete(p.x), 0, "FLUSH with placement type 4 (reserved): wr_complete");
	expect(&p, 5, IBV_WC_LOC_QP_OP_ERR, 0, "FLUSH with a reserved placement type");
	pair_destroy(&p);

	if (!pair_make(&p, BASE_ACCESS | RXUDV_ACCESS_FLUSH_GLOBAL))
		return;
	ibv_wr_start(p.x);
	flush(p.x, 6, mr_b->rkey, addr_b(0), 64, RXUDV_FLUSH_GLOBAL, 2);
	check_err(ibv_wr_complete(p.x), 0, "FLUSH with selectivity level 2 (reserved): wr_complete");
	expect(&p, 6, IBV_WC_LOC_QP_OP_ERR, 0, "FLUSH with a reserved selectivity level");
	pair_destroy(&p);
}

/*
 * One FLUSH the target refuses, on a new pair whose B grants @b_access:
 * remote access error, and the WRITE posted after it is flushed.
 */
static void refused(const char *what, unsigned int b_access, uint32_t rkey, uint64_t addr,
		    size_t len, uint8_t type, uint8_t level)
{
	struct pair p;

	if (!pair_make(&p, b_access))
		return;
	ibv_wr_start(p.x);
	flush(p.x, 10, rkey, addr, len, type, level);
	p.x->wr_id = 11;
	ibv_wr_rdma_write(p.x, mr_b->rkey, addr_b(0));
	ibv_wr_set_sge(p.x, mr_a->lkey, addr_a(0), 8);
	check_err(ibv_wr_complete(p.x), 0, "%s: wr_complete", what);
	expect(&p, 10, IBV_WC_REM_ACCESS_ERR, 0, what);
	expect(&p, 11, IBV_WC_WR_FLUSH_ERR, 0, "the WRITE after it");
	pair_destroy(&p);
}

int main(int argc, char **argv)
{
	const char *dev = NULL;
	const unsigned int fl = BASE_ACCESS | RXUDV_ACCESS_FLUSH_GLOBAL;
	int opt;

	while ((opt = getopt(argc, argv, "d:g:")) != -1) {
		if (opt == 'd')
			dev = optarg;
		else if (opt == 'g')
			gid_idx = atoi(optarg);
		else
			return 2;
	}
	if (!dev || gid_idx < 0) {
		fprintf(stderr, "usage: %s -d DEV -g GIDINDEX\n", argv[0]);
		return 2;
	}

	printf("TAP version 13\n");
	ctx = open_dev(dev);
	check(ctx != NULL, "open %s", dev);
	if (!ctx)
		goto done;
	check_err(ibv_query_gid(ctx, 1, gid_idx, &gid), 0, "query_gid 1/%d", gid_idx);
	pd = ibv_alloc_pd(ctx);
	buf_a = mmap(NULL, BUF_LEN, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	buf_b = mmap(NULL, BUF_LEN, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (buf_a == MAP_FAILED || buf_b == MAP_FAILED || !pd)
		goto close;
	mr_a = ibv_reg_mr(pd, buf_a, BUF_LEN, BASE_ACCESS);
	mr_b = ibv_reg_mr(pd, buf_b, BUF_LEN, fl);
	mr_noflush = ibv_reg_mr(pd, buf_b, BUF_LEN, BASE_ACCESS);
	check(mr_a && mr_b && mr_noflush, "PD and MRs, the target's with FLUSH_GLOBAL (%s)",
	      mr_b ? "ok" : strerror(errno));
	if (!mr_a || !mr_b || !mr_noflush)
		goto close;

	creation_checks();
	flush_checks();
	refused("FLUSH under an MR without FLUSH_GLOBAL", fl, mr_noflush->rkey, addr_b(0), 64,
		RXUDV_FLUSH_GLOBAL, RXUDV_FLUSH_RANGE);
	refused("FLUSH of the whole MR, without FLUSH_GLOBAL", fl, mr_noflush->rkey, addr_b(0), 0,
		RXUDV_FLUSH_GLOBAL, RXUDV_FLUSH_MR);
	refused("FLUSH to a QP that does not grant FLUSH_GLOBAL", BASE_ACCESS, mr_b->rkey,
		addr_b(0), 64, RXUDV_FLUSH_GLOBAL, RXUDV_FLUSH_RANGE);
	refused("FLUSH of a range past the MR", fl, mr_b->rkey, addr_b(BUF_LEN - 32), 64,
		RXUDV_FLUSH_GLOBAL, RXUDV_FLUSH_RANGE);
	refused("FLUSH for persistence (no persistent memory)", fl, mr_b->rkey, addr_b(0), 64,
		RXUDV_FLUSH_PERSISTENT, RXUDV_FLUSH_RANGE);

close:
	if (mr_noflush)
		ibv_dereg_mr(mr_noflush);
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
