// SPDX-License-Identifier: GPL-2.0 OR Linux-OpenIB
/*
 * qp-mem: holds N RC QPs of one device so that a script can read what they
 * cost the kernel (qemu/bench-guest.sh reads /proc/meminfo). A benchmark
 * helper, not a test: it checks nothing but that the verbs succeed.
 *
 *   qp-mem -d DEV -g GIDINDEX [-n N] [-w WRS]
 *
 * Opens DEV, allocates a PD and one CQ that every QP shares (so the QPs'
 * figure holds no CQ), prints "ready" and waits for a line on stdin; then
 * creates N RC QPs (default 100) of WRS send and WRS receive work requests
 * (default 32) and one SGE each, moves each to RTS connected to itself
 * (loopback over the RoCE v2 GID GIDINDEX of port 1: RTR and RTS are where
 * a driver may allocate its connection state), prints "created N" and waits
 * for another line; then destroys everything and exits 0. Any failure: a
 * message on stderr and exit 1.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <infiniband/verbs.h>

static void die(const char *what, int err)
{
	fprintf(stderr, "qp-mem: %s: %s\n", what, strerror(err));
	exit(1);
}

/* Blocks until the script says go on (a line, or end of input). */
static void wait_line(void)
{
	char line[64];

	if (!fgets(line, sizeof(line), stdin) && ferror(stdin))
		die("reading stdin", errno);
}

static void to_rts(struct ibv_qp *qp, int gid_idx, const union ibv_gid *gid)
{
	struct ibv_qp_attr a;
	int err;

	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_INIT;
	a.port_num = 1;
	a.qp_access_flags = IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ |
			    IBV_ACCESS_REMOTE_ATOMIC;
	err = ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX |
			    IBV_QP_PORT | IBV_QP_ACCESS_FLAGS);
	if (err)
		die("modify_qp to INIT", err);

	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTR;
	a.path_mtu = IBV_MTU_1024;
	a.dest_qp_num = qp->qp_num;
	a.rq_psn = 0;
	a.max_dest_rd_atomic = 1;
	a.min_rnr_timer = 12;
	a.ah_attr.is_global = 1;
	a.ah_attr.grh.dgid = *gid;
	a.ah_attr.grh.sgid_index = gid_idx;
	a.ah_attr.grh.hop_limit = 64;
	a.ah_attr.port_num = 1;
	err = ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU |
			    IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
			    IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER);
	if (err)
		die("modify_qp to RTR", err);

	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTS;
	a.timeout = 14;
	a.retry_cnt = 7;
	a.rnr_retry = 7;
	a.sq_psn = 0;
	a.max_rd_atomic = 1;
	err = ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_TIMEOUT |
			    IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY | IBV_QP_SQ_PSN |
			    IBV_QP_MAX_QP_RD_ATOMIC);
	if (err)
		die("modify_qp to RTS", err);
}

int main(int argc, char **argv)
{
	const char *dev_name = NULL;
	int gid_idx = -1, n = 100, wrs = 32, opt, num, i;
	struct ibv_device **list;
	struct ibv_context *ctx = NULL;
	struct ibv_qp **qps;
	struct ibv_pd *pd;
	struct ibv_cq *cq;
	union ibv_gid gid;
	int err;

	while ((opt = getopt(argc, argv, "d:g:n:w:")) != -1) {
		switch (opt) {
		case 'd': dev_name = optarg; break;
		case 'g': gid_idx = atoi(optarg); break;
		case 'n': n = atoi(optarg); break;
		case 'w': wrs = atoi(optarg); break;
		default:
			fprintf(stderr, "usage: qp-mem -d DEV -g GIDINDEX [-n N] [-w WRS]\n");
			return 2;
		}
	}
	if (!dev_name || gid_idx < 0 || n < 1 || wrs < 1) {
		fprintf(stderr, "usage: qp-mem -d DEV -g GIDINDEX [-n N] [-w WRS]\n");
		return 2;
	}

	list = ibv_get_device_list(&num);
	if (!list)
		die("ibv_get_device_list", errno);
	for (i = 0; i < num && !ctx; i++)
		if (!strcmp(ibv_get_device_name(list[i]), dev_name))
			ctx = ibv_open_device(list[i]);
	if (!ctx)
		die(dev_name, ENODEV);
	err = ibv_query_gid(ctx, 1, gid_idx, &gid);
	if (err)
		die("ibv_query_gid", err < 0 ? errno : err);
	pd = ibv_alloc_pd(ctx);
	if (!pd)
		die("ibv_alloc_pd", errno);
	cq = ibv_create_cq(ctx, 2 * wrs, NULL, NULL, 0);
	if (!cq)
		die("ibv_create_cq", errno);
	qps = calloc(n, sizeof(*qps));
	if (!qps)
		die("calloc", ENOMEM);

	printf("ready\n");
	fflush(stdout);
	wait_line();

	for (i = 0; i < n; i++) {
		struct ibv_qp_init_attr ia = {
			.send_cq = cq,
			.recv_cq = cq,
			.qp_type = IBV_QPT_RC,
			.cap = {
				.max_send_wr = wrs,
				.max_recv_wr = wrs,
				.max_send_sge = 1,
				.max_recv_sge = 1,
			},
		};

		qps[i] = ibv_create_qp(pd, &ia);
		if (!qps[i])
			die("ibv_create_qp", errno);
		to_rts(qps[i], gid_idx, &gid);
	}
	printf("created %d\n", n);
	fflush(stdout);
	wait_line();

	for (i = 0; i < n; i++) {
		err = ibv_destroy_qp(qps[i]);
		if (err)
			die("ibv_destroy_qp", err);
	}
	free(qps);
	if (ibv_destroy_cq(cq))
		die("ibv_destroy_cq", errno);
	if (ibv_dealloc_pd(pd))
		die("ibv_dealloc_pd", errno);
	ibv_close_device(ctx);
	ibv_free_device_list(list);
	return 0;
}
