// SPDX-License-Identifier: GPL-2.0 OR Linux-OpenIB
/*
 * A process that holds an RDMA device while it is taken away
 * (tests/guest/24-device-removal.sh): it opens the device, makes a PD, an
 * MR, a CQ, an SRQ and an RC QP in RTS (their rings mapped by the
 * provider), says "ready", and waits for an async event. When the device
 * goes (rdma link delete, the netdev's removal, rmmod) it must get
 * IBV_EVENT_DEVICE_FATAL promptly (other events before it are passed
 * over); then every verb must fail cleanly, with
 * no crash: a post, a poll (of a ring the kernel no longer fills), a
 * registration, a query, and the destroys. With -w it then waits for
 * SIGUSR1 before it tears down and exits, so that the test can unload the
 * module while the process still holds its file and mappings.
 *
 *   held-device -d DEV [-g GID_INDEX] [-t SECONDS] [-w]
 *
 * Prints what each step did; exits 0 if the event came and the verbs that
 * need the kernel failed with EIO (or ENODEV), 1 if not.
 */
#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <infiniband/verbs.h>
#include "util.h"

static volatile sig_atomic_t go_on;

static void on_usr1(int sig)
{
	(void)sig;
	go_on = 1;
}

/* Whether @err says the device is gone. */
static int gone(int err)
{
	return err == EIO || err == ENODEV;
}

int main(int argc, char **argv)
{
	const char *dev = NULL;
	int seconds = 60, wait_usr1 = 0, gid = 0, opt, ok = 1, err;
	static char buf[65536];

	while ((opt = getopt(argc, argv, "d:g:t:w")) != -1) {
		switch (opt) {
		case 'd': dev = optarg; break;
		case 'g': gid = atoi(optarg); break;
		case 't': seconds = atoi(optarg); break;
		case 'w': wait_usr1 = 1; break;
		default: goto usage;
		}
	}
	if (!dev)
		goto usage;
	signal(SIGUSR1, on_usr1);

	struct ibv_context *ctx = open_dev(dev);
	struct ibv_pd *pd = ctx ? ibv_alloc_pd(ctx) : NULL;
	struct ibv_mr *mr = pd ? ibv_reg_mr(pd, buf, sizeof(buf), IBV_ACCESS_LOCAL_WRITE |
					    IBV_ACCESS_REMOTE_WRITE) : NULL;
	struct ibv_cq *cq = ctx ? ibv_create_cq(ctx, 64, NULL, NULL, 0) : NULL;
	struct ibv_srq_init_attr sa = { .attr = { .max_wr = 16, .max_sge = 1 } };
	struct ibv_srq *srq = pd ? ibv_create_srq(pd, &sa) : NULL;
	struct ibv_qp_init_attr qa = {
		.send_cq = cq, .recv_cq = cq, .qp_type = IBV_QPT_RC,
		.cap = { .max_send_wr = 16, .max_recv_wr = 16, .max_send_sge = 1, .max_recv_sge = 1 },
	};
	struct ibv_qp *qp = pd && cq ? ibv_create_qp(pd, &qa) : NULL;

	union ibv_gid own;

	/* Connected to itself: nothing is sent, the QP only has to exist. */
	if (!ctx || !pd || !mr || !cq || !srq || !qp || ibv_query_gid(ctx, 1, gid, &own) ||
	    rc_connect(qp, gid, &own, qp->qp_num)) {
		fprintf(stderr, "held-device: setting up on %s failed: %s\n", dev, strerror(errno));
		return 2;
	}
	struct ibv_sge sge = { .addr = (uintptr_t)buf, .length = 64, .lkey = mr->lkey };
	struct ibv_recv_wr rwr = { .wr_id = 1, .sg_list = &sge, .num_sge = 1 }, *bad_rwr;

	if (ibv_post_recv(qp, &rwr, &bad_rwr)) {
		fprintf(stderr, "held-device: post_recv failed\n");
		return 2;
	}
	printf("ready: pd, mr, cq, srq and qp %u in RTS on %s\n", qp->qp_num, dev);
	fflush(stdout);

	/*
	 * DEVICE_FATAL within the time allowed; events before it (a GID table
	 * change as the netdev goes down, port events) are printed and
	 * passed over.
	 */
	struct pollfd pfd = { .fd = ctx->async_fd, .events = POLLIN };
	long long t0 = now_ms(), left;
	struct ibv_async_event ev = { .event_type = IBV_EVENT_COMM_EST };
	int n;

	while (ev.event_type != IBV_EVENT_DEVICE_FATAL) {
		left = seconds * 1000LL - (now_ms() - t0);
		if (left <= 0 || poll(&pfd, 1, (int)left) != 1) {
			printf("no IBV_EVENT_DEVICE_FATAL in %d s\n", seconds);
			return 1;
		}
		if (ibv_get_async_event(ctx, &ev)) {
			printf("ibv_get_async_event failed: %s\n", strerror(errno));
			return 1;
		}
		printf("event: %s%s after %lld ms\n", ibv_event_type_str(ev.event_type),
		       ev.event_type == IBV_EVENT_DEVICE_FATAL ? " (IBV_EVENT_DEVICE_FATAL)" : "",
		       now_ms() - t0);
		ibv_ack_async_event(&ev);
	}

	/* The verbs that need the kernel fail; the others do not crash. */
	struct ibv_device_attr da;

	err = ibv_query_device(ctx, &da);
	printf("query_device: %s\n", err ? strerror(err) : "succeeded");
	ok &= gone(err);
	struct ibv_mr *mr2 = ibv_reg_mr(pd, buf + 4096, 4096, IBV_ACCESS_LOCAL_WRITE);

	err = errno;
	printf("reg_mr: %s\n", mr2 ? "succeeded" : strerror(err));
	ok &= !mr2 && gone(err);
	struct ibv_send_wr swr = {
		.wr_id = 2, .sg_list = &sge, .num_sge = 1, .opcode = IBV_WR_SEND,
		.send_flags = IBV_SEND_SIGNALED,
	}, *bad_swr;

	err = ibv_post_send(qp, &swr, &bad_swr);
	printf("post_send: %s\n", err ? strerror(err) : "accepted (nothing will come of it)");
	struct ibv_wc wc[4];

	n = ibv_poll_cq(cq, 4, wc);
	printf("poll_cq: %d\n", n);
	err = ibv_req_notify_cq(cq, 0);
	printf("req_notify_cq: %s\n", err ? strerror(err) : "succeeded");

	if (wait_usr1) {
		printf("waiting for SIGUSR1\n");
		fflush(stdout);
		while (!go_on)
			pause();
		/* The mappings still read (pages of their own now). */
		n = ibv_poll_cq(cq, 4, wc);
		printf("poll_cq after the wait: %d\n", n);
	}
	/* Destroys succeed or fail cleanly: the objects are gone already. */
	printf("destroy qp %d, srq %d, cq %d, dereg mr %d, dealloc pd %d, close %d\n",
	       ibv_destroy_qp(qp), ibv_destroy_srq(srq), ibv_destroy_cq(cq), ibv_dereg_mr(mr),
	       ibv_dealloc_pd(pd), ibv_close_device(ctx));
	printf("%s\n", ok ? "all as expected" : "NOT as expected");
	return ok ? 0 : 1;
usage:
	fprintf(stderr, "usage: held-device -d DEV [-g GID_INDEX] [-t SECONDS] [-w]\n");
	return 2;
}
