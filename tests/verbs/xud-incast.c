// SPDX-License-Identifier: GPL-2.0 OR Linux-OpenIB
/*
 * xud-incast: many XUD senders to one XUD QP (tests/guest/27-incast.sh,
 * Documentation/xud.rst, "Congestion control"), or with -c as many RC
 * senders to as many RC QPs of one receiver, for comparison.
 *
 *   receiver: xud-incast -d DEV -x GIDINDEX -r -n SOURCES [-c] [-s SIZE]
 *                        [-w WARMUP_MS] [-m MEASURE_MS]
 *   senders:  xud-incast -d DEV -x GIDINDEX [-d DEV -x GIDINDEX]...
 *                        -t SECONDS [-s SIZE] [-D DEPTH] ADDRESS/QPN
 *             xud-incast -c -d DEV -x GIDINDEX [-d DEV -x GIDINDEX]...
 *                        -t SECONDS [-s SIZE] [-D DEPTH] ADDRESS/QPN...
 *
 * The receiver prints "qpn N" once at RTS and counts the bytes of the
 * SENDs of SIZE bytes (default 16384) it receives, per source (its QP
 * number and address). WARMUP_MS (2000) after the first arrives it notes
 * each source's count, and MEASURE_MS (4000) later prints what each
 * received in between and the whole:
 *
 *   source ADDRESS/QPN bytes B
 *   goodput_kbit G sources K of SOURCES jain J
 *
 * (kbit = 1000 bits/s of payload; J: Jain's fairness index of the
 * SOURCES sources' bytes, a source not seen counting 0), then goes on
 * receiving until SIGTERM (or SIGINT), and prints "total B" (the
 * payload of the whole run). Without -r, one sender per device (an XUD
 * QP of its own), all in this process: once every QP is ready, each
 * sends SENDs of SIZE bytes to ADDRESS/QPN for SECONDS, at most DEPTH
 * (16) at once, the senders served in turn, then one line each:
 *
 *   sender DEV: sent N ok K failed F
 *
 * and, if F is not 0, "sender DEV: first failure STATUS at T ms" (T from
 * the start of sending).
 *
 * One process for all, so that they start together and the CPU is shared
 * among them by this loop, not by a loaded guest's scheduler (which, with
 * a process per sender on one vCPU, made the shares unfair by itself).
 *
 * RC (-c): the receiver makes SOURCES RC QPs on one shared receive queue
 * and prints "rcqpn QPN" for each, then reads one ADDRESS/QPN line per QP
 * from its standard input (the sender it connects to), connects them
 * (tests/verbs/util.h, rc_connect) and prints "ready"; a source is one of
 * its QPs. The senders get one ADDRESS/QPN per device (the receiver's QP
 * each connects to), print "rcqpn DEV QPN" for each once connected, and
 * start sending when a line comes on their standard input.
 *
 * Exit 1 on an error, or if a SEND failed.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <infiniband/verbs.h>
#include <infiniband/rxudv.h>
#include "util.h"
#include "xud-tool.h"

#define QKEY		0x1ca57ed
#define GRH		40
#define MAX_SIZE	(1 << 20)
#define RECVS		128
#define MAX_DEPTH	64
#define MAX_SOURCES	256
#define MAX_SENDERS	64

static struct xud_tool x;
static int gid_idx = -1, size = 16384;
/* RC instead of XUD (-c). */
static int rc;
/* What precedes a receive's payload: XUD's GRH, nothing for RC. */
static int hdr = GRH;
/* RC receiver: its QPs (one a source) and their shared receive queue. */
static struct ibv_qp *rc_qps[MAX_SENDERS];
static struct ibv_srq *srq;
/* Receives posted: RECVS, or for RC enough for every sender's default
 * depth (RNR NAKs would otherwise pace the senders, not the network). */
static int recvs = RECVS;
static volatile sig_atomic_t stop;

static void on_term(int sig)
{
	(void)sig;
	stop = 1;
}

static void die(const char *what)
{
	fprintf(stderr, "xud-incast: %s: %s\n", what, strerror(errno));
	exit(1);
}

static uint8_t *slot(int i) { return x.buf + (size_t)i * (hdr + size); }

static void post_recv(int i)
{
	struct ibv_sge sge = { (uintptr_t)slot(i), hdr + size, x.mr->lkey };
	struct ibv_recv_wr wr = { .wr_id = i, .sg_list = &sge, .num_sge = 1 }, *bad;

	errno = srq ? ibv_post_srq_recv(srq, &wr, &bad) : ibv_post_recv(x.qp, &wr, &bad);
	if (errno)
		die("ibv_post_recv");
}

/* An RC QP of @pd with both queues on @cq (and @srq's receives, if any). */
static struct ibv_qp *rc_qp(struct ibv_pd *pd, struct ibv_cq *cq, struct ibv_srq *s, int send_wr)
{
	struct ibv_qp_init_attr a = {
		.qp_type = IBV_QPT_RC, .send_cq = cq, .recv_cq = cq, .srq = s,
		.cap = { .max_send_wr = send_wr, .max_recv_wr = s ? 0 : 1, .max_send_sge = 1,
			 .max_recv_sge = 1 },
	};
	struct ibv_qp *qp = ibv_create_qp(pd, &a);

	if (!qp)
		die("ibv_create_qp (RC)");
	return qp;
}

/* Reads a line of ADDRESS/QPN from standard input and connects @qp of GID
 * index @sgid to it. */
static void rc_connect_line(struct ibv_qp *qp, int sgid)
{
	char line[128];
	union ibv_gid dgid;
	uint32_t qpn;

	if (!fgets(line, sizeof(line), stdin)) {
		errno = EPIPE;
		die("reading a peer");
	}
	line[strcspn(line, "\n")] = 0;
	if (parse_peer_arg(line, &dgid, &qpn)) {
		errno = EINVAL;
		die(line);
	}
	if (rc_connect(qp, sgid, &dgid, qpn))
		die("rc_connect");
}

static void setup(const char *dev, int depth, int sources)
{
	const char *failed;

	hdr = rc ? 0 : GRH;
	if (rc && sources * 16 > recvs)
		recvs = sources * 16;
	failed = xud_tool_open(&x, dev, (size_t)(depth > recvs ? depth : recvs) * (hdr + size),
			       2 * (recvs + MAX_DEPTH), rc ? 0 : MAX_DEPTH, rc ? 0 : RECVS, QKEY);
	if (failed)
		die(failed);
	if (!rc)
		return;
	struct ibv_srq_init_attr sa = { .attr = { .max_wr = recvs, .max_sge = 1 } };

	srq = ibv_create_srq(x.pd, &sa);
	if (!srq)
		die("ibv_create_srq");
	for (int i = 0; i < sources; i++) {
		rc_qps[i] = rc_qp(x.pd, x.cq, srq, 1);
		printf("rcqpn %u\n", rc_qps[i]->qp_num);
	}
	fflush(stdout);
	for (int i = 0; i < sources; i++)
		rc_connect_line(rc_qps[i], gid_idx);
}

/* Waits on the completion channel at most @ms. */
static void wait_cq(int ms)
{
	if (wait_cq_event(x.chan, x.cq, ms))
		die("ibv_req_notify_cq");
}

/* --- receiver --- */

struct source {
	uint32_t qpn;
	char addr[INET6_ADDRSTRLEN];
	unsigned long long bytes, at_start;
};

static struct source sources[MAX_SOURCES];
static int n_sources;

/* The source of the SEND whose GRH is @grh from @qpn: the IPv4 header in
 * the GRH's last 20 bytes (RoCEv2 over IPv4), else the GRH's SGID; for RC
 * (no GRH) the receiver's own QP @qpn, named "rc". */
static struct source *source_of(const uint8_t *grh, uint32_t qpn)
{
	char addr[INET6_ADDRSTRLEN];

	if (rc)
		strcpy(addr, "rc");
	else if ((grh[20] >> 4) == 4)
		inet_ntop(AF_INET, grh + 20 + 12, addr, sizeof(addr));
	else
		inet_ntop(AF_INET6, grh + 8, addr, sizeof(addr));
	for (int i = 0; i < n_sources; i++)
		if (sources[i].qpn == qpn && !strcmp(sources[i].addr, addr))
			return &sources[i];
	if (n_sources == MAX_SOURCES)
		return NULL;
	sources[n_sources].qpn = qpn;
	strcpy(sources[n_sources].addr, addr);
	return &sources[n_sources++];
}

static int receive(int expected, int warmup_ms, int measure_ms)
{
	long long first = 0, from = 0, to = 0;
	int reported = 0;

	for (int i = 0; i < recvs; i++)
		post_recv(i);
	if (rc)
		printf("ready\n");
	else
		printf("qpn %u\n", x.qp->qp_num);
	fflush(stdout);
	signal(SIGTERM, on_term);
	signal(SIGINT, on_term);
	while (!stop) {
		struct ibv_wc wc[32];
		int n;

		while ((n = ibv_poll_cq(x.cq, 32, wc)) > 0) {
			for (int k = 0; k < n; k++) {
				if (wc[k].status == IBV_WC_SUCCESS &&
				    wc[k].byte_len == (uint32_t)(hdr + size)) {
					struct source *s = source_of(slot(wc[k].wr_id),
								     rc ? wc[k].qp_num : wc[k].src_qp);

					if (s)
						s->bytes += size;
					if (!first) {
						first = now_ms();
						from = first + warmup_ms;
						to = from + measure_ms;
					}
				}
				post_recv(wc[k].wr_id);
			}
		}
		if (n < 0)
			die("ibv_poll_cq");
		long long t = now_ms();

		if (first && from && t >= from) {
			for (int i = 0; i < n_sources; i++)
				sources[i].at_start = sources[i].bytes;
			from = 0;
		}
		if (first && !from && !reported && t >= to) {
			double sum = 0, sq = 0, kbit;
			unsigned long long total = 0;

			for (int i = 0; i < n_sources; i++) {
				unsigned long long b = sources[i].bytes - sources[i].at_start;

				printf("source %s/%u bytes %llu\n", sources[i].addr, sources[i].qpn, b);
				total += b;
				sum += b;
				sq += (double)b * b;
			}
			kbit = total * 8.0 / measure_ms;
			printf("goodput_kbit %.0f sources %d of %d jain %.3f\n", kbit, n_sources,
			       expected, sq > 0 ? sum * sum / (expected * sq) : 0);
			fflush(stdout);
			reported = 1;
		}
		wait_cq(50);
	}
	unsigned long long total = 0;

	for (int i = 0; i < n_sources; i++)
		total += sources[i].bytes;
	printf("total %llu\n", total);
	return reported ? 0 : 1;
}

/* --- senders --- */

struct sender {
	const char *dev;
	int gid_idx;
	struct xud_tool t;
	struct ibv_ah *ah;
	/* RC: its QP (t.qp is XUD's) and the receiver's it is connected to. */
	struct ibv_qp *rc_qp;
	int out;
	unsigned long long sent, ok, failed;
	/* The first failed completion's status, and when (ms into the run). */
	enum ibv_wc_status first_error;
	long long first_error_ms;
};

static struct sender senders[MAX_SENDERS];
static int n_senders;
/* When the senders started (ms, now_ms()'s clock). */
static long long run_start;

/* Waits at most @ms for a completion event of any sender's CQ; takes the
 * events that came and arms those CQs again. */
static void wait_senders(int ms)
{
	struct pollfd p[MAX_SENDERS];

	for (int i = 0; i < n_senders; i++)
		p[i] = (struct pollfd){ .fd = senders[i].t.chan->fd, .events = POLLIN };
	if (poll(p, n_senders, ms) <= 0)
		return;
	for (int i = 0; i < n_senders; i++)
		if ((p[i].revents & POLLIN) &&
		    wait_cq_event(senders[i].t.chan, senders[i].t.cq, 0))
			die("ibv_req_notify_cq");
}

/* Posts @s's SENDs up to @depth (until @end) and takes its completions;
 * whether it did anything. */
static int serve(struct sender *s, int depth, uint32_t qpn, long long end)
{
	struct ibv_wc wc[32];
	int did = 0, n;

	while (s->out < depth && now_ms() < end) {
		struct ibv_sge sge = { (uintptr_t)(s->t.buf + (size_t)s->out * size), size,
				       s->t.mr->lkey };
		struct ibv_send_wr wr = {
			.wr_id = s->sent, .sg_list = &sge, .num_sge = 1,
			.opcode = IBV_WR_SEND, .send_flags = IBV_SEND_SIGNALED,
			.wr.ud = { .ah = s->ah, .remote_qpn = qpn, .remote_qkey = QKEY },
		}, *bad;

		if (ibv_post_send(s->rc_qp ? s->rc_qp : s->t.qp, &wr, &bad))
			break;
		s->out++;
		s->sent++;
		did = 1;
	}
	n = ibv_poll_cq(s->t.cq, 32, wc);
	if (n < 0)
		die("ibv_poll_cq");
	for (int k = 0; k < n; k++) {
		s->out--;
		if (wc[k].status == IBV_WC_SUCCESS) {
			s->ok++;
			continue;
		}
		if (!s->failed++) {
			s->first_error = wc[k].status;
			s->first_error_ms = now_ms() - run_start;
		}
	}
	return did || n > 0;
}

/* @targets: one ADDRESS/QPN, or for RC one per sender. */
static int send_all(char **targets, int seconds, int depth)
{
	union ibv_gid dgid;
	uint32_t qpn = 0;
	unsigned long long failed = 0;

	for (int i = 0; i < n_senders; i++) {
		struct sender *s = &senders[i];
		const char *target = targets[rc ? i : 0];
		const char *step;

		if (parse_peer_arg(target, &dgid, &qpn)) {
			fprintf(stderr, "xud-incast: %s: not ADDRESS/QPN\n", target);
			return 2;
		}
		step = xud_tool_open(&s->t, s->dev, (size_t)depth * size, 2 * MAX_DEPTH,
				     rc ? 0 : MAX_DEPTH, rc ? 0 : 1, QKEY);
		if (step) {
			fprintf(stderr, "xud-incast: %s: %s: %s\n", s->dev, step, strerror(errno));
			return 1;
		}
		if (rc) {
			s->rc_qp = rc_qp(s->t.pd, s->t.cq, NULL, MAX_DEPTH);
			if (rc_connect(s->rc_qp, s->gid_idx, &dgid, qpn))
				die("rc_connect");
			printf("rcqpn %s %u\n", s->dev, s->rc_qp->qp_num);
			continue;
		}
		struct ibv_ah_attr ah_attr = { .is_global = 1, .port_num = 1,
					       .grh = { .dgid = dgid, .sgid_index = s->gid_idx,
							.hop_limit = 64 } };

		s->ah = ibv_create_ah(s->t.pd, &ah_attr);
		if (!s->ah)
			die("ibv_create_ah");
	}
	if (rc) {
		char line[16];

		/* The receiver connects its QPs to ours: go when told. */
		fflush(stdout);
		if (!fgets(line, sizeof(line), stdin)) {
			errno = EPIPE;
			die("waiting for the receiver");
		}
	}
	run_start = now_ms();
	long long end = run_start + seconds * 1000LL;
	int busy;

	do {
		int did = 0;

		busy = 0;
		for (int i = 0; i < n_senders; i++) {
			did |= serve(&senders[i], depth, qpn, end);
			busy |= senders[i].out > 0;
		}
		if (!did)
			wait_senders(10);
	} while (now_ms() < end || busy);
	for (int i = 0; i < n_senders; i++) {
		struct sender *s = &senders[i];

		printf("sender %s: sent %llu ok %llu failed %llu\n", s->dev, s->sent, s->ok,
		       s->failed);
		if (s->failed)
			printf("sender %s: first failure %s at %lld ms\n", s->dev,
			       ibv_wc_status_str(s->first_error), s->first_error_ms);
		failed += s->failed;
	}
	return failed ? 1 : 0;
}

int main(int argc, char **argv)
{
	int recv = 0, expected = 0, warmup = 2000, measure = 4000, seconds = 0, depth = 16, c;
	int n_gids = 0;

	while ((c = getopt(argc, argv, "d:x:rcn:s:w:m:t:D:")) != -1) {
		switch (c) {
		case 'd':
			if (n_senders == MAX_SENDERS)
				goto usage;
			senders[n_senders++].dev = optarg;
			break;
		case 'x':
			if (n_gids == MAX_SENDERS)
				goto usage;
			senders[n_gids++].gid_idx = atoi(optarg);
			break;
		case 'r': recv = 1; break;
		case 'c': rc = 1; break;
		case 'n': expected = atoi(optarg); break;
		case 's': size = atoi(optarg); break;
		case 'w': warmup = atoi(optarg); break;
		case 'm': measure = atoi(optarg); break;
		case 't': seconds = atoi(optarg); break;
		case 'D': depth = atoi(optarg); break;
		default: goto usage;
		}
	}
	if (n_senders < 1 || n_gids != n_senders || size < 1 || size > MAX_SIZE)
		goto usage;
	for (int i = 0; i < n_gids; i++)
		if (senders[i].gid_idx < 0)
			goto usage;
	if (recv) {
		if (n_senders != 1 || expected < 1 || expected > MAX_SOURCES || warmup < 0 ||
		    measure < 1 || optind != argc || (rc && expected > MAX_SENDERS))
			goto usage;
		gid_idx = senders[0].gid_idx;
		setup(senders[0].dev, 0, expected);
		return receive(expected, warmup, measure);
	}
	if (seconds < 1 || depth < 1 || depth > MAX_DEPTH ||
	    argc - optind != (rc ? n_senders : 1))
		goto usage;
	return send_all(argv + optind, seconds, depth);
usage:
	fprintf(stderr, "usage: %s -d DEV -x GIDINDEX -r -n SOURCES [-c] [-s SIZE] [-w WARMUP_MS] "
		"[-m MEASURE_MS]\n"
		"       %s -d DEV -x GIDINDEX [-d DEV -x GIDINDEX]... -t SECONDS [-s SIZE] "
		"[-D DEPTH] ADDRESS/QPN\n"
		"       %s -c -d DEV -x GIDINDEX [-d DEV -x GIDINDEX]... -t SECONDS [-s SIZE] "
		"[-D DEPTH] ADDRESS/QPN...\n",
		argv[0], argv[0], argv[0]);
	return 2;
}
