// SPDX-License-Identifier: GPL-2.0 OR Linux-OpenIB
/*
 * xud-sink: an XUD QP for something else to send to (tests/xud-forge's
 * forged packets), reporting what it received (Documentation/xud.rst).
 *
 *   xud-sink -d DEV [-p MAX_PEERS] [-k QKEY] [-r RECVS]
 *            [-g GIDINDEX -t DGID -q QPN [-n SENDS]]
 *
 * Creates an XUD QP on DEV (max_peers MAX_PEERS, 0 for the provider's
 * default) at RTS with Q_Key QKEY (0x11111111), a 64 KiB buffer
 * registered for local and remote write, and RECVS receives of 256 bytes
 * from that buffer (0 to 192; default 0). Then prints one line
 *
 *   qpn 0x... rkey 0x... va 0x... qkey 0x...
 *
 * and waits for EOF on stdin, so that a script can send meanwhile and
 * end it by closing the pipe. At EOF it polls the CQ once over (no
 * waiting), prints
 *
 *   sink: N receive completions, M with status success
 *   sink: K bytes not zero in the last quarter
 *
 * (the buffer's last 16 KiB, which no receive uses: where a test aims
 * RDMA WRITEs that must not land) and exits 0 after destroying
 * everything. Errors: a message on stderr, exit 1.
 *
 * With -t, first a sender too (tests/guest/21-rxe-xud.sh): SENDS (default
 * 8) SENDs of 64 bytes from GID GIDINDEX to QPN at DGID (an IPv6 address,
 * ::ffff:a.b.c.d for IPv4) with Q_Key QKEY, the QP at timeout 12 and
 * retry_cnt 2 (three tries a SEND, about 0.12 s), then
 *
 *   sent: N send completions, M RETRY_EXC_ERR, F failed
 *
 * (F: completions with any error status; to a peer that never answers,
 * the SENDs beyond what XUD lets such a destination hold fail
 * IBV_WC_LOC_QP_OP_ERR without a packet, Documentation/xud.rst, "Send
 * resources")
 *
 * once all have completed (or after 30 s).
 */
#include <arpa/inet.h>
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <infiniband/verbs.h>
#include <infiniband/rxudv.h>
#include "util.h"

#define BUF_LEN		(64 * 1024)
#define RECV_LEN	256
#define MAX_RECVS	(BUF_LEN / RECV_LEN)
/* The last quarter: receives (-r 192 at most) stay below it. */
#define GUARD_OFF	(BUF_LEN / 4 * 3)

/* @err: an errno value (verbs that return NULL set errno instead). */
static void die(const char *what, int err)
{
	fprintf(stderr, "xud-sink: %s: %s\n", what, err ? strerror(err) : "failed");
	exit(1);
}

/* -t: @n SENDs to @qpn at @dgid, each failing or not; reports them. */
static void send_to(struct ibv_pd *pd, struct ibv_cq *cq, struct ibv_qp *qp,
		    struct ibv_mr *mr, uint8_t *buf, int gid_idx, const char *dgid,
		    uint32_t qpn, uint32_t qkey, int n)
{
	struct ibv_ah_attr av = { .is_global = 1, .port_num = 1,
		.grh = { .sgid_index = gid_idx, .hop_limit = 64 } };
	struct ibv_sge sge = { .addr = (uintptr_t)buf, .length = 64, .lkey = mr->lkey };
	struct ibv_send_wr wr = { .sg_list = &sge, .num_sge = 1, .opcode = IBV_WR_SEND,
				  .send_flags = IBV_SEND_SIGNALED }, *bad;
	struct ibv_ah *ah;
	long long deadline = now_ms() + 30000;
	int done = 0, retry_exc = 0, failed = 0, err;

	if (inet_pton(AF_INET6, dgid, av.grh.dgid.raw) != 1)
		die("-t: not an IPv6 address", EINVAL);
	ah = ibv_create_ah(pd, &av);
	if (!ah)
		die("ibv_create_ah", errno);
	wr.wr.ud.ah = ah;
	wr.wr.ud.remote_qpn = qpn;
	wr.wr.ud.remote_qkey = qkey;
	for (int i = 0; i < n; i++) {
		wr.wr_id = 1000 + i;
		err = ibv_post_send(qp, &wr, &bad);
		if (err)
			die("ibv_post_send", err);
	}
	while (done < n && now_ms() < deadline) {
		struct ibv_wc wc;
		int got = ibv_poll_cq(cq, 1, &wc);

		if (got < 0)
			die("ibv_poll_cq", EIO);
		if (!got) {
			usleep(1000);
			continue;
		}
		if (wc.wr_id < 1000)
			continue;
		done++;
		retry_exc += wc.status == IBV_WC_RETRY_EXC_ERR;
		failed += wc.status != IBV_WC_SUCCESS;
	}
	printf("sent: %d send completions, %d RETRY_EXC_ERR, %d failed\n", done, retry_exc, failed);
	fflush(stdout);
	ibv_destroy_ah(ah);
}

int main(int argc, char **argv)
{
	const char *dev = NULL;
	uint32_t qkey = 0x11111111, max_peers = 0;
	int c, err, recvs = 0, n_wc = 0, n_ok = 0;
	char line[256];
	const char *dgid = NULL;
	int gid_idx = 0, sends = 8;
	uint32_t dqpn = 0;

	while ((c = getopt(argc, argv, "d:p:k:r:g:t:q:n:")) != -1) {
		switch (c) {
		case 'd': dev = optarg; break;
		case 'p': max_peers = strtoul(optarg, NULL, 0); break;
		case 'k': qkey = strtoul(optarg, NULL, 0); break;
		case 'r': recvs = atoi(optarg); break;
		case 'g': gid_idx = atoi(optarg); break;
		case 't': dgid = optarg; break;
		case 'q': dqpn = strtoul(optarg, NULL, 0); break;
		case 'n': sends = atoi(optarg); break;
		default:
			fprintf(stderr, "usage: %s -d DEV [-p MAX_PEERS] [-k QKEY] [-r RECVS]\n",
				argv[0]);
			return 1;
		}
	}
	if (!dev || recvs < 0 || recvs > GUARD_OFF / RECV_LEN || sends < 1 || sends > 16) {
		fprintf(stderr, "xud-sink: -d DEV is required; -r takes 0 to %d, -n 1 to 16\n",
			GUARD_OFF / RECV_LEN);
		return 1;
	}

	struct ibv_context *ctx = open_dev(dev);
	if (!ctx)
		die(dev, errno ? errno : ENODEV);
	struct ibv_pd *pd = ibv_alloc_pd(ctx);
	struct ibv_cq *cq = ibv_create_cq(ctx, MAX_RECVS + 16, NULL, NULL, 0);
	uint8_t *buf = calloc(1, BUF_LEN);
	if (!pd || !cq || !buf)
		die("PD, CQ or buffer", errno);
	struct ibv_mr *mr = ibv_reg_mr(pd, buf, BUF_LEN,
				       IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
	if (!mr)
		die("ibv_reg_mr", errno);

	struct ibv_qp_init_attr_ex a = {
		.qp_type = IBV_QPT_DRIVER,
		.comp_mask = IBV_QP_INIT_ATTR_PD,
		.pd = pd, .send_cq = cq, .recv_cq = cq,
		.cap = { .max_send_wr = 16, .max_recv_wr = MAX_RECVS, .max_send_sge = 1,
			 .max_recv_sge = 1 },
	};
	struct rxudv_qp_init_attr x = { .max_peers = max_peers };
	struct ibv_qp *qp = rxudv_create_qp(ctx, &a, &x, sizeof(x));
	if (!qp)
		die("rxudv_create_qp", errno);
	struct ibv_qp_attr qa = { .qp_state = IBV_QPS_INIT, .pkey_index = 0, .port_num = 1,
				  .qkey = qkey };
	err = ibv_modify_qp(qp, &qa, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_QKEY);
	if (err)
		die("modify to INIT", err);
	qa.qp_state = IBV_QPS_RTR;
	err = ibv_modify_qp(qp, &qa, IBV_QP_STATE);
	if (err)
		die("modify to RTR", err);
	qa.qp_state = IBV_QPS_RTS;
	qa.sq_psn = 0;
	qa.timeout = 12;
	qa.retry_cnt = 2;
	err = ibv_modify_qp(qp, &qa, IBV_QP_STATE | IBV_QP_SQ_PSN |
			    (dgid ? IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT : 0));
	if (err)
		die("modify to RTS", err);
	if (dgid)
		send_to(pd, cq, qp, mr, buf, gid_idx, dgid, dqpn, qkey, sends);
	for (int i = 0; i < recvs; i++) {
		struct ibv_sge sge = {
			.addr = (uintptr_t)(buf + i * RECV_LEN), .length = RECV_LEN,
			.lkey = mr->lkey,
		};
		struct ibv_recv_wr wr = { .wr_id = i, .sg_list = &sge, .num_sge = 1 }, *bad;

		err = ibv_post_recv(qp, &wr, &bad);
		if (err)
			die("ibv_post_recv", err);
	}

	printf("qpn 0x%x rkey 0x%x va 0x%llx qkey 0x%x\n", qp->qp_num, mr->rkey,
	       (unsigned long long)(uintptr_t)buf, qkey);
	fflush(stdout);
	/* Until the sender's side closes the pipe. */
	while (fgets(line, sizeof(line), stdin))
		;

	for (;;) {
		struct ibv_wc wc[16];
		int n = ibv_poll_cq(cq, 16, wc);

		if (n < 0)
			die("ibv_poll_cq", EIO);
		if (!n)
			break;
		for (int i = 0; i < n; i++)
			n_ok += wc[i].status == IBV_WC_SUCCESS;
		n_wc += n;
	}
	printf("sink: %d receive completions, %d with status success\n", n_wc, n_ok);
	int guard = 0;
	for (int i = GUARD_OFF; i < BUF_LEN; i++)
		guard += buf[i] != 0;
	printf("sink: %d bytes not zero in the last quarter\n", guard);
	fflush(stdout);

	err = ibv_destroy_qp(qp);
	err = err ? err : ibv_dereg_mr(mr);
	err = err ? err : ibv_destroy_cq(cq);
	err = err ? err : ibv_dealloc_pd(pd);
	if (err)
		die("tear down", err);
	ibv_close_device(ctx);
	free(buf);
	return 0;
}
