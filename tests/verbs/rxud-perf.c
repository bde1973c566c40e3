// SPDX-License-Identifier: GPL-2.0 OR Linux-OpenIB
/*
 * rxud-perf: perftest-shaped bandwidth and latency of XUD
 * (Documentation/xud.rst) between two hosts: one XUD QP at the client
 * sending to -q XUD QPs at the server (one QP, many peers: the shape of
 * the XUD paper's Table 4), out-of-band setup over TCP as perftest does.
 *
 *   server: rxud-perf -d DEV -x GIDINDEX [-q NQP] [-p PORT] [-S]
 *   client: rxud-perf -d DEV -x GIDINDEX [-t bw|lat|mem] [-o send|write]
 *                     [-s SIZE] [-n ITERS] [-D TX_DEPTH] [-a ACK_EVERY]
 *                     [-T TIMEOUT] [-p PORT] SERVER
 *
 * bw: the client posts -n messages of -s bytes round robin over the
 * server's QPs, at most -D at once, and reports as ib_send_bw does
 * (MB/s = 2^20 bytes/s). SEND needs the server's receives; WRITE goes to
 * each server QP's buffer. lat: SEND ping-pong with the server's first QP,
 * half the round trip reported as ib_send_lat does (usec). mem: the
 * shape of the paper's Table 4 (memory per peer): the client sends one
 * SEND of -s bytes to each server QP and each answers with one, so the
 * client's one QP holds a sending and a receiving state per peer. It
 * prints "ready" once set up and "exchanged N" after the exchange, each
 * time then waiting for a line on its standard input (the caller
 * measures the kernel's memory meanwhile). The server
 * checks the bytes of every SEND it receives and reports the count; a
 * message missing or received twice fails the run (exit 1). With -S it
 * checks only a SEND's message number and its first and last 64 bytes:
 * in a TCG guest a byte-by-byte check of 64 KB takes milliseconds, which
 * would make the server's check, not XUD, what a SEND bandwidth run
 * measures (perftest, which make bench sets beside it, checks nothing).
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>
#include <infiniband/verbs.h>
#include <infiniband/rxudv.h>

#define QKEY		0x5eed5eed
#define GRH		40
#define MAX_QP		4096
#define RECV_DEPTH	64
#define POLL_NS		30000000000LL	/* 30 s without a completion: stuck */

struct setup {		/* client -> server */
	uint32_t size, iters, op, lat;
	uint32_t qpn;
	uint8_t gid[16];
};

struct peer_info {	/* server -> client, per server QP */
	uint32_t qpn, rkey;
	uint64_t addr;
	uint8_t gid[16];
};

static struct ibv_context *ctx;
static struct ibv_pd *pd;
static struct ibv_cq *cq;
static int gid_idx, ack_every;
/* -T: the QPs' local ACK timeout attribute (4.096 us << T), for links
 * slower than the default's 67 ms (14); -1: the default. */
static int ack_timeout = -1;
static union ibv_gid my_gid;

static long long now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

static void die(const char *what)
{
	fprintf(stderr, "rxud-perf: %s: %s\n", what, strerror(errno));
	exit(1);
}

static void fill(uint8_t *p, size_t len, uint32_t seed)
{
	for (size_t i = 0; i < len; i++)
		p[i] = (uint8_t)(seed * 31 + i * 7);
}

/* Whether bytes @from..@len of @p are fill()'s for @seed. */
static int same(const uint8_t *p, size_t from, size_t len, uint32_t seed)
{
	for (size_t i = from; i < len; i++)
		if (p[i] != (uint8_t)(seed * 31 + i * 7))
			return 0;
	return 1;
}

/* -S: the server checks a SEND's ends only (see the top). */
static int spot_check;
#define SPOT		64

/* Whether the @len bytes of message @m at @p (its number first) are
 * right: all of them, or with -S those of its ends. */
static int right_bytes(const uint8_t *p, size_t len, uint32_t m)
{
	if (!spot_check || len <= 2 * SPOT)
		return same(p, 4, len, m);
	return same(p, 4, SPOT, m) && same(p, len - SPOT, len, m);
}

static void open_dev(const char *name)
{
	struct ibv_device **list = ibv_get_device_list(NULL);

	for (int i = 0; list && list[i]; i++)
		if (!strcmp(ibv_get_device_name(list[i]), name))
			ctx = ibv_open_device(list[i]);
	ibv_free_device_list(list);
	if (!ctx)
		die(name);
	pd = ibv_alloc_pd(ctx);
	cq = ibv_create_cq(ctx, 4096, NULL, NULL, 0);
	if (!pd || !cq || ibv_query_gid(ctx, 1, gid_idx, &my_gid))
		die("PD, CQ or GID");
}

static struct ibv_qp *xud_qp(int depth, int recv_depth)
{
	struct ibv_qp_init_attr_ex a = {
		.qp_type = IBV_QPT_DRIVER,
		.comp_mask = IBV_QP_INIT_ATTR_PD | IBV_QP_INIT_ATTR_SEND_OPS_FLAGS,
		.send_ops_flags = IBV_QP_EX_WITH_SEND | IBV_QP_EX_WITH_RDMA_WRITE,
		.pd = pd, .send_cq = cq, .recv_cq = cq,
		.cap = { .max_send_wr = depth, .max_recv_wr = recv_depth, .max_send_sge = 1,
			 .max_recv_sge = 1 },
	};
	struct rxudv_qp_init_attr x = { .ack_every = ack_every };
	struct ibv_qp_attr qa = { .qp_state = IBV_QPS_INIT, .port_num = 1, .qkey = QKEY };
	struct ibv_qp *qp = rxudv_create_qp(ctx, &a, &x, sizeof(x));

	if (!qp)
		die("rxudv_create_qp");
	if (ibv_modify_qp(qp, &qa, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_QKEY))
		die("modify INIT");
	qa.qp_state = IBV_QPS_RTR;
	if (ibv_modify_qp(qp, &qa, IBV_QP_STATE))
		die("modify RTR");
	qa.qp_state = IBV_QPS_RTS;
	qa.timeout = ack_timeout < 0 ? 0 : ack_timeout;
	if (ibv_modify_qp(qp, &qa, IBV_QP_STATE | IBV_QP_SQ_PSN |
			  (ack_timeout < 0 ? 0 : IBV_QP_TIMEOUT)))
		die("modify RTS");
	return qp;
}

static struct ibv_ah *ah_to(const uint8_t *gid)
{
	struct ibv_ah_attr a = { .is_global = 1, .port_num = 1,
				 .grh = { .sgid_index = gid_idx, .hop_limit = 64 } };
	struct ibv_ah *ah;

	memcpy(a.grh.dgid.raw, gid, 16);
	ah = ibv_create_ah(pd, &a);
	if (!ah)
		die("ibv_create_ah");
	return ah;
}

static void post_recv(struct ibv_qp *qp, uint8_t *buf, uint32_t len, struct ibv_mr *mr,
		      uint64_t id)
{
	struct ibv_sge sge = { .addr = (uintptr_t)buf, .length = len, .lkey = mr->lkey };
	struct ibv_recv_wr wr = { .wr_id = id, .sg_list = &sge, .num_sge = 1 }, *bad;

	if (ibv_post_recv(qp, &wr, &bad))
		die("ibv_post_recv");
}

static void xfer(int fd, void *p, size_t n, int out)
{
	while (n) {
		ssize_t r = out ? write(fd, p, n) : read(fd, p, n);

		if (r <= 0)
			die(out ? "write to peer" : "read from peer");
		p = (char *)p + r;
		n -= r;
	}
}

/* One completion into @wc; dies after POLL_NS without one. */
static void poll_one(struct ibv_wc *wc)
{
	long long end = now_ns() + POLL_NS;

	while (ibv_poll_cq(cq, 1, wc) == 0)
		if (now_ns() > end) {
			errno = ETIMEDOUT;
			die("waiting for a completion");
		}
	if (wc->status != IBV_WC_SUCCESS) {
		fprintf(stderr, "rxud-perf: wr_id %llu completed with %s\n",
			(unsigned long long)wc->wr_id, ibv_wc_status_str(wc->status));
		exit(1);
	}
}

static void post_send(struct ibv_qp *qp, struct ibv_ah *ah, uint32_t qpn, int write,
		      uint64_t raddr, uint32_t rkey, uint8_t *buf, uint32_t len,
		      struct ibv_mr *mr, uint64_t id)
{
	struct ibv_qp_ex *qx = ibv_qp_to_qp_ex(qp);

	ibv_wr_start(qx);
	qx->wr_id = id;
	qx->wr_flags = IBV_SEND_SIGNALED;
	if (write)
		ibv_wr_rdma_write(qx, rkey, raddr);
	else
		ibv_wr_send(qx);
	ibv_wr_set_ud_addr(qx, ah, qpn, QKEY);
	ibv_wr_set_sge(qx, mr->lkey, (uintptr_t)buf, len);
	if (ibv_wr_complete(qx))
		die("ibv_wr_complete");
}

static int server(int port, int nqp)
{
	struct sockaddr_in sa = { .sin_family = AF_INET, .sin_port = htons(port) };
	struct peer_info *info = calloc(nqp, sizeof(*info));
	struct ibv_qp **qps = calloc(nqp, sizeof(*qps));
	struct setup su;
	int one = 1, lfd = socket(AF_INET, SOCK_STREAM, 0), fd;

	setsockopt(lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (lfd < 0 || bind(lfd, (struct sockaddr *)&sa, sizeof(sa)) || listen(lfd, 1))
		die("listen");
	fd = accept(lfd, NULL, NULL);
	if (fd < 0)
		die("accept");
	xfer(fd, &su, sizeof(su), 0);
	/* mem: one message from and to each QP. */
	int posts = su.iters ? RECV_DEPTH : 1;

	if (!su.iters)
		su.iters = nqp;
	if (!info || !qps)
		die("memory");
	size_t slot = GRH + (size_t)su.size;
	size_t len = (size_t)nqp * RECV_DEPTH * slot;
	uint8_t *buf = calloc(1, len);
	struct ibv_mr *mr = buf ? ibv_reg_mr(pd, buf, len, IBV_ACCESS_LOCAL_WRITE |
					     IBV_ACCESS_REMOTE_WRITE) : NULL;

	if (!mr)
		die("buffer");
	for (int q = 0; q < nqp; q++) {
		qps[q] = xud_qp(RECV_DEPTH, RECV_DEPTH);
		info[q] = (struct peer_info){ .qpn = qps[q]->qp_num, .rkey = mr->rkey,
					      .addr = (uintptr_t)(buf + q * RECV_DEPTH * slot) };
		memcpy(info[q].gid, my_gid.raw, 16);
		for (int i = 0; i < posts; i++)
			post_recv(qps[q], buf + ((size_t)q * RECV_DEPTH + i) * slot, slot, mr,
				  (uint64_t)q << 32 | i);
	}
	uint32_t n32 = nqp;

	xfer(fd, &n32, sizeof(n32), 1);
	xfer(fd, info, sizeof(info[0]) * nqp, 1);
	struct ibv_ah *back = ah_to(su.gid);
	uint32_t got = 0, bad = 0;
	uint8_t *seen = calloc(su.iters, 1);

	if (su.op == 0 || su.lat) {
		/* SENDs: count, check, repost; in lat mode answer each. */
		while (got < su.iters) {
			struct ibv_wc wc;

			poll_one(&wc);
			if (wc.opcode != IBV_WC_RECV)
				continue;
			int q = wc.wr_id >> 32, i = wc.wr_id & 0xffffffff;
			uint8_t *p = buf + ((size_t)q * RECV_DEPTH + i) * slot + GRH;
			uint32_t m;

			memcpy(&m, p, 4);
			if (wc.byte_len != GRH + su.size || m >= su.iters || seen[m] ||
			    !right_bytes(p, su.size, m))
				bad++;
			else
				seen[m] = 1;
			got++;
			post_recv(qps[q], p - GRH, slot, mr, wc.wr_id);
			if (su.lat)
				post_send(qps[q], back, su.qpn, 0, 0, 0, p, su.size, mr, 1);
		}
	}
	/* Done when the client says so (its WRITEs complete at its end). */
	xfer(fd, &got, sizeof(got), 1);
	uint32_t fin;

	xfer(fd, &fin, sizeof(fin), 0);
	if (su.op == 0 || su.lat)
		printf(" server: %u messages received, %u wrong or duplicate\n", got, bad);
	return bad ? 1 : 0;
}

/* Modes of the client (-t). */
enum { BW, LAT, MEM };

/* mem: see the comment at the top. */
static void exchange_one_each(struct ibv_qp *qp, struct ibv_ah **ah, struct peer_info *info,
			      int nqp, uint8_t *buf, size_t slot, struct ibv_mr *mr, uint32_t size,
			      int depth)
{
	uint32_t *free_slot = calloc(depth, sizeof(*free_slot));
	uint32_t posted = 0, sent = 0, recvd = 0, bad = 0, nfree = depth;
	char line[64];
	long long t0;

	if (!free_slot)
		die("memory");
	for (int i = 0; i < depth; i++)
		free_slot[i] = i;
	for (int i = 0; i < nqp; i++)
		post_recv(qp, buf + (size_t)(depth + i) * slot, slot, mr, i);
	printf("ready\n");
	fflush(stdout);
	if (!fgets(line, sizeof(line), stdin))
		die("standard input");
	t0 = now_ns();
	while (sent < (uint32_t)nqp || recvd < (uint32_t)nqp) {
		while (posted < (uint32_t)nqp && nfree) {
			uint32_t b = free_slot[--nfree];
			uint8_t *p = buf + b * slot;

			fill(p, size, posted);
			memcpy(p, &posted, 4);
			post_send(qp, ah[posted], info[posted].qpn, 0, 0, 0, p, size, mr,
				  (uint64_t)b << 32 | posted);
			posted++;
		}
		struct ibv_wc wc;

		poll_one(&wc);
		if (wc.opcode == IBV_WC_RECV) {
			uint8_t *p = buf + (size_t)(depth + wc.wr_id) * slot + GRH;
			uint32_t m;

			memcpy(&m, p, 4);
			bad += wc.byte_len != GRH + size || m >= (uint32_t)nqp || !right_bytes(p, size, m);
			recvd++;
		} else {
			free_slot[nfree++] = wc.wr_id >> 32;
			sent++;
		}
	}
	printf("exchanged %d in %.3f s, %u answers wrong\n", nqp, (now_ns() - t0) / 1e9, bad);
	fflush(stdout);
	if (bad)
		exit(1);
	if (!fgets(line, sizeof(line), stdin))
		die("standard input");
	free(free_slot);
}

static int client(const char *host, int port, int mode, int write, uint32_t size,
		  uint32_t iters, int depth)
{
	int lat = mode == LAT;
	struct addrinfo *ai, hints = { .ai_family = AF_INET, .ai_socktype = SOCK_STREAM };
	char ps[16];
	int fd = socket(AF_INET, SOCK_STREAM, 0);

	snprintf(ps, sizeof(ps), "%d", port);
	if (getaddrinfo(host, ps, &hints, &ai))
		die(host);
	for (int tries = 0; connect(fd, ai->ai_addr, ai->ai_addrlen); tries++) {
		if (tries > 100)
			die("connect");
		usleep(100000);
	}
	/*
	 * XUD gives one destination at most a quarter of the send queue
	 * (xud.rst, "Admission"): four times the depth lets all of it go to
	 * one peer.
	 */
	int nrecv = mode == MEM ? MAX_QP : RECV_DEPTH;
	struct ibv_qp *qp = xud_qp(4 * depth, nrecv);
	/* The server answers each SEND in lat and mem; iters 0: one each. */
	struct setup su = { .size = size, .iters = mode == MEM ? 0 : iters, .op = write,
			    .lat = mode != BW, .qpn = qp->qp_num };
	struct peer_info *info = calloc(MAX_QP, sizeof(*info));
	struct ibv_ah **ah = calloc(MAX_QP, sizeof(*ah));
	uint32_t got;

	if (!info || !ah)
		die("memory");

	memcpy(su.gid, my_gid.raw, 16);
	xfer(fd, &su, sizeof(su), 1);
	uint32_t n32;

	xfer(fd, &n32, sizeof(n32), 0);
	if (n32 < 1 || n32 > MAX_QP) {
		errno = EPROTO;
		die("the server's QP count");
	}
	int nqp = n32;

	xfer(fd, info, sizeof(info[0]) * nqp, 0);
	/* One AH per GID (the server's QPs share one). */
	for (int q = 0; q < nqp; q++)
		ah[q] = q && !memcmp(info[q].gid, info[0].gid, 16) ? ah[0] : ah_to(info[q].gid);
	size_t slot = GRH + (size_t)size;
	uint8_t *buf = calloc(depth + nrecv, slot);
	struct ibv_mr *mr = buf ? ibv_reg_mr(pd, buf, (depth + nrecv) * slot,
					     IBV_ACCESS_LOCAL_WRITE) : NULL;

	if (!mr)
		die("buffer");
	printf("---------------------------------------------------------------------------------------\n");
	printf("                    XUD %s %s Test (rxud-perf)\n", write ? "RDMA Write" : "Send",
	       mode == LAT ? "Latency" : mode == MEM ? "Memory" : "BW");
	printf(" Device: %s  Server QPs: %d  Message size: %u  Iterations: %u  TX depth: %d\n",
	       ibv_get_device_name(ctx->device), nqp, size, mode == MEM ? (uint32_t)nqp : iters,
	       lat ? 1 : depth);
	printf("---------------------------------------------------------------------------------------\n");
	if (mode == MEM) {
		exchange_one_each(qp, ah, info, nqp, buf, slot, mr, size, depth);
	} else if (lat) {
		long long *t = calloc(iters, sizeof(*t));

		for (int i = 0; i < RECV_DEPTH; i++)
			post_recv(qp, buf + (depth + i) * slot, slot, mr, 1000 + i);
		for (uint32_t m = 0; m < iters; m++) {
			uint8_t *p = buf;
			struct ibv_wc wc;
			int recv = 0, sent = 0;
			long long t0 = now_ns();

			fill(p, size, m);
			memcpy(p, &m, 4);
			post_send(qp, ah[0], info[0].qpn, 0, 0, 0, p, size, mr, m);
			while (!recv || !sent) {
				poll_one(&wc);
				if (wc.opcode == IBV_WC_RECV) {
					recv = 1;
					post_recv(qp, buf + (depth + wc.wr_id - 1000) * slot, slot,
						  mr, wc.wr_id);
				} else {
					sent = 1;
				}
			}
			t[m] = (now_ns() - t0) / 2;
		}
		long long sum = 0, min = t[0], max = t[0];

		for (uint32_t m = 0; m < iters; m++) {
			sum += t[m];
			min = t[m] < min ? t[m] : min;
			max = t[m] > max ? t[m] : max;
		}
		for (uint32_t a = 0; a < iters; a++)	/* median: a short sort */
			for (uint32_t b = a + 1; b < iters; b++)
				if (t[b] < t[a]) {
					long long x = t[a];

					t[a] = t[b];
					t[b] = x;
				}
		printf(" #bytes #iterations    t_min[usec]    t_max[usec]  t_typical[usec]    t_avg[usec]\n");
		printf(" %-6u %-10u         %-8.2f       %-8.2f     %-8.2f           %-8.2f\n", size,
		       iters, min / 1e3, max / 1e3, t[iters / 2] / 1e3, sum / 1e3 / iters);
	} else {
		uint32_t posted = 0, done = 0, nfree = depth;
		/*
		 * XUD completes out of order: a send buffer is reused only once
		 * its own message completed (a retransmission reads it again).
		 */
		uint32_t *free_slot = calloc(depth, sizeof(*free_slot));
		long long t0 = now_ns();

		for (int i = 0; i < depth; i++)
			free_slot[i] = i;
		while (done < iters) {
			while (posted < iters && nfree) {
				int q = posted % nqp;
				uint32_t b = free_slot[--nfree];
				uint8_t *p = buf + b * slot;

				fill(p, size, posted);
				memcpy(p, &posted, 4);
				post_send(qp, ah[q], info[q].qpn, write,
					  info[q].addr + (posted % RECV_DEPTH) * slot, info[q].rkey,
					  p, size, mr, (uint64_t)b << 32 | posted);
				posted++;
			}
			struct ibv_wc wc;

			poll_one(&wc);
			free_slot[nfree++] = wc.wr_id >> 32;
			done++;
		}
		double s = (now_ns() - t0) / 1e9;
		double mb = (double)size * iters / s / (1 << 20);

		printf(" #bytes     #iterations    BW peak[MB/sec]    BW average[MB/sec]   MsgRate[Mpps]\n");
		printf(" %-10u %-14u %-18.2f %-20.2f %.6f\n", size, iters, mb, mb, iters / s / 1e6);
	}
	printf("---------------------------------------------------------------------------------------\n");
	xfer(fd, &got, sizeof(got), 0);
	xfer(fd, &got, sizeof(got), 1);
	return 0;
}

int main(int argc, char **argv)
{
	const char *dev = NULL;
	int c, port = 18515, nqp = 1, mode = BW, write = 0, depth = 64;
	uint32_t size = 65536, iters = 1000;

	while ((c = getopt(argc, argv, "d:x:q:p:t:o:s:n:D:a:T:S")) != -1) {
		switch (c) {
		case 'd': dev = optarg; break;
		case 'x': gid_idx = atoi(optarg); break;
		case 'q': nqp = atoi(optarg); break;
		case 'p': port = atoi(optarg); break;
		case 't': mode = !strcmp(optarg, "lat") ? LAT : !strcmp(optarg, "mem") ? MEM : BW; break;
		case 'o': write = !strcmp(optarg, "write"); break;
		case 's': size = strtoul(optarg, NULL, 0); break;
		case 'n': iters = strtoul(optarg, NULL, 0); break;
		case 'D': depth = atoi(optarg); break;
		case 'a': ack_every = atoi(optarg); break;
		case 'T': ack_timeout = atoi(optarg); break;
		case 'S': spot_check = 1; break;
		default:
			fprintf(stderr, "usage: %s -d DEV -x GID [-q NQP] [-p PORT] [-S] (server)\n"
				"       %s -d DEV -x GID [-t bw|lat|mem] [-o send|write] [-s SIZE] "
				"[-n ITERS] [-D DEPTH] [-a ACK_EVERY] [-T TIMEOUT] [-p PORT] SERVER\n",
				argv[0], argv[0]);
			return 2;
		}
	}
	if (!dev || nqp < 1 || nqp > MAX_QP || size < 4 || size > RXUDV_MAX_MSG_SZ || !iters ||
	    depth < 1 || depth > 1024 || (mode != BW && write) || ack_timeout > 31) {
		fprintf(stderr, "rxud-perf: needs -d; -q 1 to %d, -s 4 (the message number each "
			"message carries) to %u, -n 1 or more, -D 1 to 1024, -T 0 to 31, no -o write "
			"with -t lat or mem\n",
			MAX_QP, RXUDV_MAX_MSG_SZ);
		return 2;
	}
	open_dev(dev);
	return optind < argc ? client(argv[optind], port, mode, write, size, iters, depth)
			     : server(port, nqp);
}
