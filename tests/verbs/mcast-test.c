// SPDX-License-Identifier: GPL-2.0 OR Linux-OpenIB
/*
 * mcast-test: UD multicast on one device (issue 28 item 6).
 *
 *   mcast-test -d DEV -g GIDINDEX -i IFNAME [-6] [-s SENDDEV -G SENDGIDINDEX]
 *
 * Two UD QPs attach to the group 239.1.2.3 (its IPv4-mapped GID; with -6
 * the IPv6 group ff0e::1:2:3, GIDINDEX and SENDGIDINDEX then IPv6 GIDs);
 * the host joins the group on IFNAME (IP_ADD_MEMBERSHIP, an IGMP join, or
 * IPV6_JOIN_GROUP, an MLD one: the IP layer takes a group's datagrams
 * only once joined, what rdma_cm's join does); a
 * third QP sends datagrams to the group (QP number 0xFFFFFF), which IP
 * loops back to this host: each member receives each, with the GRH and
 * the sender's QP number (with -s, the sender is a QP of SENDDEV, another
 * device, rxe's for interop: its datagrams cross the link). Then one
 * member detaches: it receives no more,
 * the other still does. And attach's refusals: an RC QP, a GID that is no
 * group, a detach of what is not attached. TAP on stdout.
 *
 * Across machines, one side each (tests/guest-pair/01-link.sh):
 *   mcast-test -d DEV -g GIDINDEX -i IFNAME -r SECONDS
 *     the two members only: attach, join, post receives, print "# members
 *     ready", then each must receive the N datagrams of one remote sender
 *     within SECONDS (GRH, one source QPN, the data); detach
 *   mcast-test -d DEV -g GIDINDEX -i IFNAME -t
 *     the sender only: N SENDs to the group, each completing
 */
#include <arpa/inet.h>
#include <errno.h>
#include <getopt.h>
#include <net/if.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <unistd.h>
#include "tap.h"

#define QKEY 0x11111111
#define N 8
#define LEN 256
#define GRH 40

static struct ibv_context *ctx, *sctx;
static struct ibv_pd *pd, *spd;
static struct ibv_cq *cq[3];
static struct ibv_qp *qp[3];
static struct ibv_mr *mr, *smr;
static uint8_t buf[3][N * (LEN + GRH)];
/* The sender's QP number members must see: qp[2]'s, or (-r) the first seen. */
static uint32_t want_src;
/* The group: its GID and its name; IPv6 (-6) or IPv4. */
static union ibv_gid mgid = { .raw = { [10] = 0xff, [11] = 0xff, 239, 1, 2, 3 } };
static const char *gname = "239.1.2.3";
static int v6;

/* The host joins the group on @ifname (IGMP or MLD); the socket, or -1. */
static int join(const char *ifname)
{
	int sock = socket(v6 ? AF_INET6 : AF_INET, SOCK_DGRAM, 0);
	int ret;

	if (sock < 0)
		return -1;
	if (v6) {
		struct ipv6_mreq m = { .ipv6mr_interface = if_nametoindex(ifname) };

		memcpy(&m.ipv6mr_multiaddr, mgid.raw, 16);
		ret = setsockopt(sock, IPPROTO_IPV6, IPV6_JOIN_GROUP, &m, sizeof(m));
	} else {
		struct ip_mreqn m = { .imr_multiaddr.s_addr = htonl(0xef010203),
				      .imr_ifindex = if_nametoindex(ifname) };

		ret = setsockopt(sock, IPPROTO_IP, IP_ADD_MEMBERSHIP, &m, sizeof(m));
	}
	if (ret) {
		close(sock);
		return -1;
	}
	return sock;
}

static struct ibv_qp *ud_qp(struct ibv_pd *p, struct ibv_cq *c)
{
	struct ibv_qp_init_attr ia = { .send_cq = c, .recv_cq = c, .qp_type = IBV_QPT_UD,
				       .cap = { .max_send_wr = N, .max_recv_wr = N,
						.max_send_sge = 1, .max_recv_sge = 1 } };
	struct ibv_qp_attr a = { .qp_state = IBV_QPS_INIT, .port_num = 1, .qkey = QKEY };
	struct ibv_qp *q = ibv_create_qp(p, &ia);

	if (!q)
		return NULL;
	if (ibv_modify_qp(q, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_QKEY))
		return NULL;
	a.qp_state = IBV_QPS_RTR;
	if (ibv_modify_qp(q, &a, IBV_QP_STATE))
		return NULL;
	a.qp_state = IBV_QPS_RTS;
	a.sq_psn = 1;
	if (ibv_modify_qp(q, &a, IBV_QP_STATE | IBV_QP_SQ_PSN))
		return NULL;
	return q;
}

static int post_recvs(int i)
{
	for (int k = 0; k < N; k++) {
		struct ibv_sge s = { .addr = (uintptr_t)&buf[i][k * (LEN + GRH)],
				     .length = LEN + GRH, .lkey = mr->lkey };
		struct ibv_recv_wr wr = { .wr_id = k, .sg_list = &s, .num_sge = 1 }, *bad;

		if (ibv_post_recv(qp[i], &wr, &bad))
			return -1;
	}
	return 0;
}

/* Receive completions on member @i within @ms: how many, each checked. */
static int received(int i, int want, int ms, int *good)
{
	long long end = now_ms() + ms;
	struct ibv_wc wc;
	int n = 0;

	*good = 0;
	while (n < want && now_ms() < end) {
		int r = ibv_poll_cq(cq[i], 1, &wc);

		if (r <= 0)
			continue;
		n++;
		uint8_t *p = &buf[i][wc.wr_id * (LEN + GRH)];
		if (!want_src)
			want_src = wc.src_qp;
		*good += wc.status == IBV_WC_SUCCESS && wc.opcode == IBV_WC_RECV &&
			 wc.byte_len == LEN + GRH && (wc.wc_flags & IBV_WC_GRH) &&
			 wc.src_qp == want_src && same(p + GRH, LEN, 7);
	}
	return n;
}

static int send_to_group(struct ibv_ah *ah)
{
	struct ibv_sge s = { .addr = (uintptr_t)buf[2], .length = LEN, .lkey = smr->lkey };
	struct ibv_send_wr wr = { .sg_list = &s, .num_sge = 1, .opcode = IBV_WR_SEND,
				  .send_flags = IBV_SEND_SIGNALED }, *bad;
	struct ibv_wc wc;
	int done = 0;

	wr.wr.ud.ah = ah;
	wr.wr.ud.remote_qpn = 0xffffff;
	wr.wr.ud.remote_qkey = QKEY;
	for (int k = 0; k < N; k++) {
		wr.wr_id = k;
		if (ibv_post_send(qp[2], &wr, &bad))
			return -1;
		long long end = now_ms() + 2000;
		while (now_ms() < end) {
			if (ibv_poll_cq(cq[2], 1, &wc) == 1) {
				done += wc.status == IBV_WC_SUCCESS;
				break;
			}
		}
		usleep(10000);
	}
	return done;
}

/* -r: the members of this machine, for a sender elsewhere. */
static int members_only(const char *ifname, int seconds)
{
	int sock, n, good;

	for (int i = 0; i < 2; i++) {
		cq[i] = ibv_create_cq(ctx, 2 * N, NULL, NULL, 0);
		qp[i] = cq[i] ? ud_qp(pd, cq[i]) : NULL;
	}
	check(qp[0] && qp[1] && !ibv_attach_mcast(qp[0], &mgid, 0) &&
	      !ibv_attach_mcast(qp[1], &mgid, 0), "two UD QPs attach to %s", gname);
	sock = join(ifname);
	check(sock >= 0, "the host joins %s on %s", gname, ifname);
	if (!qp[0] || !qp[1] || post_recvs(0) || post_recvs(1))
		return 1;
	printf("# members ready\n");
	fflush(stdout);
	n = received(0, N, seconds * 1000, &good);
	check(n == N && good == N, "member 1 receives each datagram of the remote sender, with "
	      "the GRH (%d, %d good, source QPN %#x)", n, good, want_src);
	n = received(1, N, 3000, &good);
	check(n == N && good == N, "member 2 receives each (%d, %d good)", n, good);
	check(!ibv_detach_mcast(qp[0], &mgid, 0) && !ibv_detach_mcast(qp[1], &mgid, 0),
	      "both detach");
	close(sock);
	for (int i = 0; i < 2; i++) {
		ibv_destroy_qp(qp[i]);
		ibv_destroy_cq(cq[i]);
	}
	return 0;
}

/* -t: the sender, for members elsewhere. */
static int sender_only(int gidx)
{
	struct ibv_ah_attr aa = { .is_global = 1, .port_num = 1,
				  .grh = { .dgid = mgid, .sgid_index = gidx, .hop_limit = 1 } };
	struct ibv_ah *ah;
	int n;

	cq[2] = ibv_create_cq(ctx, 2 * N, NULL, NULL, 0);
	qp[2] = cq[2] ? ud_qp(pd, cq[2]) : NULL;
	ah = qp[2] ? ibv_create_ah(pd, &aa) : NULL;
	check(ah != NULL, "a UD QP and an AH to the group");
	if (!ah)
		return 1;
	fill(buf[2], LEN, 7);
	n = send_to_group(ah);
	check(n == N, "%d SENDs to QP 0xFFFFFF of the group complete (%d), from QPN %#x", N, n,
	      qp[2]->qp_num);
	ibv_destroy_ah(ah);
	ibv_destroy_qp(qp[2]);
	ibv_destroy_cq(cq[2]);
	return 0;
}

int main(int argc, char **argv)
{
	const char *dev = NULL, *ifname = NULL, *sdev = NULL;
	int gidx = -1, sgidx = -1, c, n, good, role = 0, seconds = 0;
	union ibv_gid unicast = { .raw = { [10] = 0xff, [11] = 0xff, 10, 1, 2, 3 } };
	struct ibv_ah_attr aa = { .is_global = 1, .port_num = 1 };
	struct ibv_ah *ah;
	int sock;

	while ((c = getopt(argc, argv, "d:g:i:s:G:r:t6")) != -1) {
		switch (c) {
		case 'd': dev = optarg; break;
		case 'g': gidx = atoi(optarg); break;
		case 'i': ifname = optarg; break;
		case 's': sdev = optarg; break;
		case 'G': sgidx = atoi(optarg); break;
		case 'r': role = 'r'; seconds = atoi(optarg); break;
		case 't': role = 't'; break;
		case '6':
			v6 = 1;
			mgid = (union ibv_gid){ .raw = { 0xff, 0x0e, [13] = 1, [14] = 2, [15] = 3 } };
			gname = "ff0e::1:2:3";
			break;
		default: return 2;
		}
	}
	if (!dev || gidx < 0 || !ifname || (sdev && sgidx < 0)) {
		fprintf(stderr, "usage: %s -d DEV -g GIDINDEX -i IFNAME "
			"[-s SENDDEV -G SENDGIDINDEX | -r SECONDS | -t]\n", argv[0]);
		return 2;
	}
	ctx = open_dev(dev);
	pd = ctx ? ibv_alloc_pd(ctx) : NULL;
	mr = pd ? ibv_reg_mr(pd, buf, sizeof(buf), IBV_ACCESS_LOCAL_WRITE) : NULL;
	if (role) {
		int err;

		check(mr != NULL, "%s opened, a PD and an MR", dev);
		smr = mr;
		err = !mr || (role == 'r' ? members_only(ifname, seconds) : sender_only(gidx));
		if (mr)
			ibv_dereg_mr(mr);
		if (pd)
			ibv_dealloc_pd(pd);
		if (ctx)
			ibv_close_device(ctx);
		printf("1..%d\n", n_checks);
		return err || n_failed != 0;
	}
	if (sdev) {
		sctx = open_dev(sdev);
		spd = sctx ? ibv_alloc_pd(sctx) : NULL;
		smr = spd ? ibv_reg_mr(spd, buf, sizeof(buf), IBV_ACCESS_LOCAL_WRITE) : NULL;
	} else {
		sctx = ctx, spd = pd, smr = mr, sgidx = gidx;
	}
	for (int i = 0; mr && smr && i < 3; i++) {
		cq[i] = ibv_create_cq(i == 2 ? sctx : ctx, 2 * N, NULL, NULL, 0);
		qp[i] = cq[i] ? ud_qp(i == 2 ? spd : pd, cq[i]) : NULL;
	}
	if (!mr || !smr || !qp[0] || !qp[1] || !qp[2]) {
		check(0, "devices, PDs, MRs, three UD QPs");
		printf("1..%d\n", n_checks);
		return 1;
	}
	struct ibv_device_attr da = {};
	int ret = ibv_query_device(ctx, &da);
	check(!ret && da.max_mcast_grp > 0 && da.max_mcast_qp_attach >= 2,
	      "the device reports multicast groups (max_mcast_grp %d, max_mcast_qp_attach %d)",
	      da.max_mcast_grp, da.max_mcast_qp_attach);

	/* Refusals. */
	struct ibv_qp_init_attr rc = { .send_cq = cq[0], .recv_cq = cq[0], .qp_type = IBV_QPT_RC,
				       .cap = { .max_send_wr = 1, .max_recv_wr = 1,
						.max_send_sge = 1, .max_recv_sge = 1 } };
	struct ibv_qp *rcqp = ibv_create_qp(pd, &rc);
	ret = rcqp ? ibv_attach_mcast(rcqp, &mgid, 0) : -1;
	check(ret == EINVAL, "an RC QP cannot attach to a group (%s)", strerror(ret));
	if (rcqp)
		ibv_destroy_qp(rcqp);
	ret = ibv_attach_mcast(qp[0], &unicast, 0);
	check(ret == EINVAL, "a GID that is no group cannot be attached to (%s)", strerror(ret));
	ret = ibv_detach_mcast(qp[0], &mgid, 0);
	check(ret == EINVAL, "a detach of what is not attached fails (%s)", strerror(ret));

	/* Both members, the host joined. */
	check(!ibv_attach_mcast(qp[0], &mgid, 0) && !ibv_attach_mcast(qp[1], &mgid, 0),
	      "two UD QPs attach to %s", gname);
	check(!ibv_attach_mcast(qp[0], &mgid, 0), "attaching again is one attachment");
	sock = join(ifname);
	check(sock >= 0, "the host joins %s on %s", gname, ifname);
	aa.grh.dgid = mgid;
	aa.grh.sgid_index = sgidx;
	aa.grh.hop_limit = 1;
	ah = ibv_create_ah(spd, &aa);
	check(ah != NULL, "an AH to the group, on %s", sdev ? sdev : dev);
	fill(buf[2], LEN, 7);
	if (!ah || post_recvs(0) || post_recvs(1)) {
		printf("1..%d\n", n_checks);
		return 1;
	}
	n = send_to_group(ah);
	check(n == N, "%d SENDs to QP 0xFFFFFF of the group complete (%d)", N, n);
	n = received(0, N, 3000, &good);
	check(n == N && good == N, "member 1 receives each, with the GRH and the sender's QPN (%d, %d good)",
	      n, good);
	n = received(1, N, 3000, &good);
	check(n == N && good == N, "member 2 receives each (%d, %d good)", n, good);

	/* One leaves. */
	check(!ibv_detach_mcast(qp[0], &mgid, 0), "member 1 detaches");
	post_recvs(0);
	post_recvs(1);
	send_to_group(ah);
	n = received(0, N, 1000, &good);
	check(n == 0, "member 1 receives nothing more (%d)", n);
	n = received(1, N, 3000, &good);
	check(n == N && good == N, "member 2 still receives each (%d, %d good)", n, good);
	check(!ibv_detach_mcast(qp[1], &mgid, 0), "member 2 detaches");

	ibv_destroy_ah(ah);
	if (sock >= 0)
		close(sock);
	for (int i = 0; i < 3; i++) {
		ibv_destroy_qp(qp[i]);
		ibv_destroy_cq(cq[i]);
	}
	if (sdev) {
		ibv_dereg_mr(smr);
		ibv_dealloc_pd(spd);
		ibv_close_device(sctx);
	}
	ibv_dereg_mr(mr);
	ibv_dealloc_pd(pd);
	ibv_close_device(ctx);
	printf("1..%d\n", n_checks);
	return n_failed != 0;
}
