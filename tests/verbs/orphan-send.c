// SPDX-License-Identifier: GPL-2.0 OR Linux-OpenIB
/*
 * A process that leaves packets behind (tests/guest/24-device-removal.sh):
 * an RC QP connected to an IPv4 address nobody answers ARP for sends a
 * few messages, and the process exits at once, destroying nothing. The
 * packets wait in the neighbour's queue for some 3 s, each holding the
 * QP's core (RC packets are charged to their QP until freed), past the
 * QP's destroy (which waits 1 s for them) and past the freeing of the
 * process's user context, which must not find the QP's rings still in it
 * (the soak's first find).
 *
 * Connecting the QP resolves the address, so the caller gives it a static
 * neighbour entry first: the program says "ready" once the QP is in RTS
 * and waits for SIGUSR1, by when the caller has deleted the entry.
 *
 *   orphan-send -d DEV -g GID_INDEX -a IPV4
 */
#include <arpa/inet.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <infiniband/verbs.h>
#include "util.h"

static volatile sig_atomic_t go;

static void on_usr1(int sig)
{
	(void)sig;
	go = 1;
}

int main(int argc, char **argv)
{
	const char *dev = NULL, *addr = NULL;
	int gid = 0, opt;
	static char buf[4096];

	while ((opt = getopt(argc, argv, "d:g:a:")) != -1) {
		switch (opt) {
		case 'd': dev = optarg; break;
		case 'g': gid = atoi(optarg); break;
		case 'a': addr = optarg; break;
		default: goto usage;
		}
	}
	if (!dev || !addr)
		goto usage;
	union ibv_gid dgid = { .raw = { [10] = 0xff, [11] = 0xff } };

	if (inet_pton(AF_INET, addr, &dgid.raw[12]) != 1)
		goto usage;
	signal(SIGUSR1, on_usr1);

	struct ibv_context *ctx = open_dev(dev);
	struct ibv_pd *pd = ctx ? ibv_alloc_pd(ctx) : NULL;
	struct ibv_mr *mr = pd ? ibv_reg_mr(pd, buf, sizeof(buf), IBV_ACCESS_LOCAL_WRITE) : NULL;
	struct ibv_cq *cq = ctx ? ibv_create_cq(ctx, 16, NULL, NULL, 0) : NULL;
	struct ibv_qp_init_attr qa = {
		.send_cq = cq, .recv_cq = cq, .qp_type = IBV_QPT_RC,
		.cap = { .max_send_wr = 8, .max_recv_wr = 1, .max_send_sge = 1, .max_recv_sge = 1 },
	};
	struct ibv_qp *qp = pd && cq ? ibv_create_qp(pd, &qa) : NULL;
	if (!qp || !mr || rc_connect(qp, gid, &dgid, 0x11))
		goto fail;
	printf("ready: RC QP %u in RTS, connected to %s\n", qp->qp_num, addr);
	fflush(stdout);
	while (!go)
		pause();
	for (int i = 0; i < 4; i++) {
		struct ibv_sge sge = { .addr = (uintptr_t)buf, .length = 256, .lkey = mr->lkey };
		struct ibv_send_wr wr = {
			.wr_id = i, .sg_list = &sge, .num_sge = 1, .opcode = IBV_WR_SEND,
			.send_flags = IBV_SEND_SIGNALED,
		}, *bad;

		if (ibv_post_send(qp, &wr, &bad))
			goto fail;
	}
	/* Long enough for the sender to hand them to IP, not for ARP to fail. */
	usleep(200 * 1000);
	printf("4 SENDs to %s posted; exiting without destroying anything\n", addr);
	return 0;
fail:
	perror("orphan-send: setting up");
	return 1;
usage:
	fprintf(stderr, "usage: orphan-send -d DEV -g GID_INDEX -a IPV4\n");
	return 2;
}
