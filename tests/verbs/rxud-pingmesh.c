// SPDX-License-Identifier: GPL-2.0 OR Linux-OpenIB
/*
 * rxud-pingmesh: RDMA pingmesh over one XUD QP (Documentation/xud.rst,
 * "Pingmesh"; seed 004's latency probes): a prober's one QP probes every
 * peer of a list, and each peer's responder answers each probe with one
 * of the same size.
 *
 *   responder: rxud-pingmesh -d DEV -x GIDINDEX -R [-s SIZE]
 *   prober:    rxud-pingmesh -d DEV -x GIDINDEX [-s SIZE] [-i INTERVAL_MS]
 *                            [-t SECONDS] [-w WAIT_MS] [-k DEAD_MS]
 *                            ADDRESS/QPN...
 *
 * The responder prints "qpn N" once its QP is at RTS, then answers until
 * SIGTERM (or SIGINT): a SEND back to the probe's source
 * QP and address (the GRH's), carrying the probe's bytes. The prober
 * sends a SEND of SIZE bytes (512; 64 at least) to every peer each
 * INTERVAL_MS (100) for SECONDS (10), waiting on its CQ's completion
 * channel in between (a pingmesh runs beside the work it watches: it must
 * not spin), from a line "probing ..." printed as it starts. A probe carries its number and the time it left; its RTT is
 * the time to its answer, on the prober's clock. A probe without an
 * answer after WAIT_MS (1000) is lost; a peer that answered nothing for
 * DEAD_MS (2000) while probed is dead (a line then, and again when it
 * answers: "alive again"). At the end, "rounds R" (the rounds of probes
 * sent: fewer than SECONDS * 1000 / INTERVAL_MS when the prober ran late)
 * and one line per peer:
 *
 *   peer ADDRESS/QPN: sent N answered A lost L late T rtt_us p50 X p99 Y p99.9 Z state alive|dead
 *
 * (late: answered after WAIT_MS, counted lost too; the percentiles of
 * the answered probes, "-" without one), and exit 0; 1 on an error. XUD
 * resends a probe lost on the wire, so the RTT of one that needed it
 * shows the resend: a pingmesh over a reliable transport measures the
 * latency applications see, and loss as probes that never came back.
 * Send completions that failed are counted per peer ("failed F" after
 * "lost"): a peer that stopped answering is stalled by XUD after about a
 * second, and probes beyond its small share are refused at once.
 */
#include <arpa/inet.h>
#include <errno.h>
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

#define QKEY		0x9196e5a1
#define GRH		40
#define MAX_PEERS	256
#define MAX_SIZE	4096
#define RECVS		256
#define SQ_DEPTH	512
#define MAGIC		0x72786d73	/* "rxms" */
/* Probes remembered per peer: their send times by number. */
#define WINDOW		1024

/* The start of every probe and answer. */
struct probe {
	uint32_t magic, peer, seq, pad;
	int64_t sent_ns;
};

struct peer {
	char name[64];
	union ibv_gid gid;
	uint32_t qpn;
	struct ibv_ah *ah;
	uint32_t next_seq, answered, late, failed;
	int64_t sent_at[WINDOW];	/* 0: answered or never sent */
	int64_t last_answer, first_sent;
	int dead;
	double *rtt_us;
	size_t n_rtt, cap_rtt;
};

static struct xud_tool x;
static int gid_idx = -1, size = 512;
static volatile sig_atomic_t stop;

static int64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

static void die(const char *what)
{
	fprintf(stderr, "rxud-pingmesh: %s: %s\n", what, strerror(errno));
	exit(1);
}

static void on_term(int sig)
{
	(void)sig;
	stop = 1;
}

/* Receive slot i of the buffer (after the send slots). */
static uint8_t *recv_slot(int i) { return x.buf + (size_t)(SQ_DEPTH + i) * (GRH + MAX_SIZE); }
static uint8_t *send_slot(int i) { return x.buf + (size_t)i * (GRH + MAX_SIZE); }

static void post_recv(int i)
{
	struct ibv_sge sge = { (uintptr_t)recv_slot(i), GRH + size, x.mr->lkey };
	struct ibv_recv_wr wr = { .wr_id = i, .sg_list = &sge, .num_sge = 1 }, *bad;

	errno = ibv_post_recv(x.qp, &wr, &bad);
	if (errno)
		die("ibv_post_recv");
}

static void setup(const char *dev)
{
	const char *failed = xud_tool_open(&x, dev, (size_t)(SQ_DEPTH + RECVS) * (GRH + MAX_SIZE),
					   2 * (SQ_DEPTH + RECVS), SQ_DEPTH, RECVS, QKEY);

	if (failed)
		die(failed);
	for (int i = 0; i < RECVS; i++)
		post_recv(i);
}

/* An AH to @gid from our GID, routable (hop limit 64). */
static struct ibv_ah *ah_to(const union ibv_gid *gid)
{
	struct ibv_ah_attr ah = {
		.is_global = 1, .port_num = 1,
		.grh = { .dgid = *gid, .sgid_index = gid_idx, .hop_limit = 64 },
	};
	struct ibv_ah *a = ibv_create_ah(x.pd, &ah);

	if (!a)
		die("ibv_create_ah");
	return a;
}

/* SEND slot @slot's first @size bytes to @qpn through @ah. */
static int post_send(int slot, struct ibv_ah *ah, uint32_t qpn, uint64_t wr_id)
{
	struct ibv_sge sge = { (uintptr_t)send_slot(slot), size, x.mr->lkey };
	struct ibv_send_wr wr = {
		.wr_id = wr_id, .sg_list = &sge, .num_sge = 1, .opcode = IBV_WR_SEND,
		.send_flags = IBV_SEND_SIGNALED,
		.wr.ud = { .ah = ah, .remote_qpn = qpn, .remote_qkey = QKEY },
	}, *bad;

	return ibv_post_send(x.qp, &wr, &bad);
}

/* Waits on the completion channel at most @ms. */
static void wait_cq(int ms)
{
	if (wait_cq_event(x.chan, x.cq, ms))
		die("ibv_req_notify_cq");
}

/* --- responder --- */

/* Answers' AHs, one per source and destination address seen. */
static struct { struct ibv_ah_attr attr; struct ibv_ah *ah; } known[MAX_PEERS];
static int n_known;

/* The AH back to where the probe of @wc came from, from the address it
 * was sent to (libibverbs reads both from its GRH, or for IPv4 from the
 * IP header in the GRH's last 20 bytes); NULL if there is none. */
static struct ibv_ah *answer_ah(struct ibv_wc *wc, struct ibv_grh *grh)
{
	struct ibv_ah_attr attr;

	if (ibv_init_ah_from_wc(x.ctx, 1, wc, grh, &attr))
		return NULL;
	for (int i = 0; i < n_known; i++)
		if (!memcmp(&known[i].attr.grh.dgid, &attr.grh.dgid, sizeof(attr.grh.dgid)) &&
		    known[i].attr.grh.sgid_index == attr.grh.sgid_index)
			return known[i].ah;
	if (n_known == MAX_PEERS)
		return NULL;
	known[n_known].attr = attr;
	known[n_known].ah = ibv_create_ah(x.pd, &attr);
	if (!known[n_known].ah)
		return NULL;
	return known[n_known++].ah;
}

static int respond(void)
{
	int free_slots[SQ_DEPTH], n_free = SQ_DEPTH;
	uint64_t answered = 0;

	for (int i = 0; i < SQ_DEPTH; i++)
		free_slots[i] = i;
	printf("qpn %u\n", x.qp->qp_num);
	fflush(stdout);
	while (!stop) {
		struct ibv_wc wc[32];
		int n;

		while ((n = ibv_poll_cq(x.cq, 32, wc)) > 0) {
			for (int k = 0; k < n; k++) {
				if (!(wc[k].opcode & IBV_WC_RECV)) {
					free_slots[n_free++] = wc[k].wr_id;
					continue;
				}
				int r = wc[k].wr_id;
				uint8_t *m = recv_slot(r);

				if (wc[k].status == IBV_WC_SUCCESS && n_free > 0 &&
				    wc[k].byte_len == (uint32_t)(GRH + size)) {
					struct ibv_ah *ah = answer_ah(&wc[k], (struct ibv_grh *)m);
					int s = free_slots[--n_free];

					memcpy(send_slot(s), m + GRH, size);
					if (!ah || post_send(s, ah, wc[k].src_qp, s))
						free_slots[n_free++] = s;
					else
						answered++;
				}
				post_recv(r);
			}
		}
		if (n < 0)
			die("ibv_poll_cq");
		wait_cq(100);
	}
	printf("answered %llu\n", (unsigned long long)answered);
	return 0;
}

/* --- prober --- */

static struct peer peers[MAX_PEERS];
static int n_peers;

static int parse_peer(struct peer *p, const char *arg)
{
	if (strlen(arg) >= sizeof(p->name) || parse_peer_arg(arg, &p->gid, &p->qpn))
		return -1;
	strcpy(p->name, arg);
	return 0;
}

static void add_rtt(struct peer *p, double us)
{
	if (p->n_rtt == p->cap_rtt) {
		p->cap_rtt = p->cap_rtt ? 2 * p->cap_rtt : 1024;
		p->rtt_us = realloc(p->rtt_us, p->cap_rtt * sizeof(double));
		if (!p->rtt_us)
			die("realloc");
	}
	p->rtt_us[p->n_rtt++] = us;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

/* The @q-th quantile (0..1) of the sorted @v[@n], nearest rank. */
static double quantile(const double *v, size_t n, double q)
{
	size_t i = (size_t)(q * n + 0.999999);

	return v[i == 0 ? 0 : (i > n ? n : i) - 1];
}

static void took_answer(const uint8_t *m, int64_t t, int64_t wait_ns, int64_t start)
{
	struct probe pr;

	memcpy(&pr, m, sizeof(pr));
	if (pr.magic != MAGIC || pr.peer >= (uint32_t)n_peers)
		return;
	struct peer *p = &peers[pr.peer];
	int64_t *sent = &p->sent_at[pr.seq % WINDOW];

	/* An answer of a probe forgotten (a window ago) or answered. */
	if (*sent != pr.sent_ns || pr.sent_ns == 0 || pr.seq >= p->next_seq)
		return;
	*sent = 0;
	if (t - pr.sent_ns > wait_ns)
		p->late++;
	else
		p->answered++;
	add_rtt(p, (t - pr.sent_ns) / 1e3);
	p->last_answer = t;
	if (p->dead) {
		p->dead = 0;
		printf("t=%lld ms: peer %s alive again\n", (long long)(t - start) / 1000000,
		       p->name);
		fflush(stdout);
	}
}

static int probe(int interval_ms, int seconds, int wait_ms, int dead_ms)
{
	int free_slots[SQ_DEPTH], n_free = SQ_DEPTH;
	unsigned int rounds = 0;

	for (int i = 0; i < SQ_DEPTH; i++)
		free_slots[i] = i;
	/* The AHs first (a routed peer's takes its neighbour's resolution):
	 * the run's time is the probing's. */
	for (int i = 0; i < n_peers; i++)
		peers[i].ah = ah_to(&peers[i].gid);

	int64_t start = now_ns(), end = start + seconds * 1000000000LL;
	int64_t wait_ns = wait_ms * 1000000LL, next = start;

	printf("probing %d peers every %d ms for %d s\n", n_peers, interval_ms, seconds);
	fflush(stdout);
	while (!stop) {
		int64_t t = now_ns();

		if (t >= end)
			break;
		if (t >= next) {
			for (int i = 0; i < n_peers; i++) {
				struct peer *p = &peers[i];
				struct probe pr = { MAGIC, i, p->next_seq, 0, t };
				int s;

				if (!n_free)
					break;	/* every slot out: this round skips the rest */
				s = free_slots[--n_free];
				memcpy(send_slot(s), &pr, sizeof(pr));
				if (post_send(s, p->ah, p->qpn, (uint64_t)i << 32 | s)) {
					free_slots[n_free++] = s;
					p->failed++;
					continue;
				}
				p->sent_at[p->next_seq % WINDOW] = t;
				p->next_seq++;
				if (!p->first_sent)
					p->first_sent = t;
			}
			next += interval_ms * 1000000LL;
			rounds++;
		}
		/* Dead: probed, and nothing answered for dead_ms. */
		for (int i = 0; i < n_peers; i++) {
			struct peer *p = &peers[i];
			int64_t since = p->last_answer ? p->last_answer : p->first_sent;

			if (!p->dead && p->first_sent && t - since > dead_ms * 1000000LL) {
				p->dead = 1;
				printf("t=%lld ms: peer %s dead: no answer for %lld ms\n",
				       (long long)(t - start) / 1000000, p->name,
				       (long long)(t - since) / 1000000);
				fflush(stdout);
			}
		}
		struct ibv_wc wc[32];
		int n;

		/* One completion at a time: each answer's own arrival time (a
		 * batch would give all its answers the time of its first). */
		while ((n = ibv_poll_cq(x.cq, 1, wc)) > 0) {
			for (int k = 0; k < n; k++) {
				if (wc[k].opcode & IBV_WC_RECV) {
					if (wc[k].status == IBV_WC_SUCCESS &&
					    wc[k].byte_len == (uint32_t)(GRH + size))
						took_answer(recv_slot(wc[k].wr_id) + GRH, now_ns(),
							    wait_ns, start);
					post_recv(wc[k].wr_id);
					continue;
				}
				free_slots[n_free++] = wc[k].wr_id & 0xffffffff;
				if (wc[k].status != IBV_WC_SUCCESS)
					peers[wc[k].wr_id >> 32].failed++;
			}
		}
		if (n < 0)
			die("ibv_poll_cq");
		t = now_ns();
		wait_cq((int)((next - t) / 1000000) + 1);
	}
	/* Probes still out after the wait are lost; the last wait_ms's are
	 * given their time first. */
	int64_t grace = now_ns() + wait_ns;

	while (now_ns() < grace) {
		struct ibv_wc wc[32];
		int n = ibv_poll_cq(x.cq, 32, wc);

		for (int k = 0; k < n; k++)
			if ((wc[k].opcode & IBV_WC_RECV) && wc[k].status == IBV_WC_SUCCESS &&
			    wc[k].byte_len == (uint32_t)(GRH + size))
				took_answer(recv_slot(wc[k].wr_id) + GRH, now_ns(), wait_ns, start);
		wait_cq(10);
	}
	printf("rounds %u\n", rounds);
	for (int i = 0; i < n_peers; i++) {
		struct peer *p = &peers[i];
		uint32_t lost = p->next_seq - p->answered;

		printf("peer %s: sent %u answered %u lost %u late %u failed %u rtt_us", p->name,
		       p->next_seq, p->answered, lost, p->late, p->failed);
		if (p->n_rtt) {
			qsort(p->rtt_us, p->n_rtt, sizeof(double), cmp_double);
			printf(" p50 %.0f p99 %.0f p99.9 %.0f", quantile(p->rtt_us, p->n_rtt, 0.5),
			       quantile(p->rtt_us, p->n_rtt, 0.99),
			       quantile(p->rtt_us, p->n_rtt, 0.999));
		} else {
			printf(" p50 - p99 - p99.9 -");
		}
		printf(" state %s\n", p->dead ? "dead" : "alive");
	}
	return 0;
}

int main(int argc, char **argv)
{
	const char *dev = NULL;
	int responder = 0, interval = 100, seconds = 10, wait_ms = 1000, dead_ms = 2000, c;

	while ((c = getopt(argc, argv, "d:x:Rs:i:t:w:k:")) != -1) {
		switch (c) {
		case 'd': dev = optarg; break;
		case 'x': gid_idx = atoi(optarg); break;
		case 'R': responder = 1; break;
		case 's': size = atoi(optarg); break;
		case 'i': interval = atoi(optarg); break;
		case 't': seconds = atoi(optarg); break;
		case 'w': wait_ms = atoi(optarg); break;
		case 'k': dead_ms = atoi(optarg); break;
		default: goto usage;
		}
	}
	if (!dev || gid_idx < 0 || size < (int)sizeof(struct probe) || size > MAX_SIZE ||
	    interval < 1 || seconds < 1 || wait_ms < 1 || dead_ms < 1 ||
	    (responder ? optind != argc : optind == argc || argc - optind > MAX_PEERS))
		goto usage;
	for (int i = optind; i < argc; i++)
		if (parse_peer(&peers[n_peers++], argv[i])) {
			fprintf(stderr, "rxud-pingmesh: %s: not ADDRESS/QPN\n", argv[i]);
			return 1;
		}
	signal(SIGTERM, on_term);
	signal(SIGINT, on_term);
	setup(dev);
	return responder ? respond() : probe(interval, seconds, wait_ms, dead_ms);
usage:
	fprintf(stderr, "usage: %s -d DEV -x GIDINDEX -R [-s SIZE]\n"
		"       %s -d DEV -x GIDINDEX [-s SIZE] [-i INTERVAL_MS] [-t SECONDS] [-w WAIT_MS] "
		"[-k DEAD_MS] ADDRESS/QPN...\n", argv[0], argv[0]);
	return 2;
}
