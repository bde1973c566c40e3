// SPDX-License-Identifier: GPL-2.0 OR Linux-OpenIB
/*
 * xud-bounds: what a dead peer or a full completion queue may cost an XUD
 * QP (Documentation/xud.rst, "Send resources" and "Receive resources"),
 * in TAP. One XUD QP S on DEV sends to QPs on DEV2.
 *
 *   xud-bounds -d DEV -g GIDINDEX -D DEV2 -G GIDINDEX2 -t cq|dead
 *
 * -t cq: the receiver R (on DEV2) has a receive CQ of a few entries and 64
 * receives posted, and does not poll its CQ for a second while S sends it
 * more SENDs than that CQ holds (one- and three-packet ones). Checked: no
 * more of S's SENDs succeed meanwhile than R's CQ holds (R acknowledges no
 * message whose completion it could not write); once R polls, every SEND
 * succeeds and R receives each exactly once, with its bytes.
 *
 * -t dead: S sends 1 KB SENDs to a live QP L on DEV2 (16 in flight,
 * reposted as they complete) while it also posts to 0, 4 and then 16
 * dead peers (QP numbers on DEV2 that no QP has: nothing answers):
 * DEAD_POSTS each at first, then TOPUP_POSTS more every TOPUP_MS as
 * their posts complete (an application that backs off from a peer whose
 * sends fail, rather than spin on it). S's send queue holds
 * SQ_DEPTH. Checked: the dead peers stall (each holds less than half
 * what a fresh one holds: its stalled share and top-ups not yet refused)
 * within STALL_WAVE_MS per
 * wave: until its stall a fresh dead peer holds its share of the queue
 * and its stream (FRESH_HOLD), so the queue holds SQ_DEPTH / FRESH_HOLD
 * of them at a time and the rest get their posts in, and stall, a second
 * later each (xud.rst, "Send resources"). And L's rate (its SENDs
 * completed per second, measured over MEASURE_MS from SETTLE_MS after
 * the last dead peer stalled) with 4 and with 16 dead peers is at least
 * LIVE_FRACTION of its rate with none (the mean of the phases alone just
 * before and after). Without the bounds the rate is 0 and no peer
 * stalls: the dead peers hold the whole send queue for the retry span. (XUD completes each message
 * on its own, out of posting order: a live peer's completions never wait
 * for a dead peer's, so its rate is what its own messages get through.)
 */
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <infiniband/verbs.h>
#include <infiniband/rxudv.h>
#include "tap.h"
#include "util.h"

#define QKEY		0x11119999
#define GRH		40
#define MSG		1024
#define RECV_LEN	(GRH + 3 * MSG)
#define NRECV		64
#define SQ_DEPTH	128
#define LIVE_WINDOW	16
#define DEAD_POSTS	48	/* more than a destination's share + its stream (32 + 16) */
#define MAX_DEAD	16
#define TOPUP_MS	250
#define TOPUP_POSTS	4	/* per dead peer and round, after DEAD_POSTS at first */
#define WARMUP_MS	500	/* alone: the live flow at its pace */
#define SETTLE_MS	250	/* after the last stall: its failed WQEs polled */
#define STALL_WAVE_MS	2500	/* four timeouts, about 1 s unloaded */
#define FRESH_HOLD	(SQ_DEPTH / 4 + 2)	/* a fresh dead peer's share and stream */
/* What a stalled peer may be seen holding: its share (2) and the top-ups
 * the kernel has not yet refused. A refusal is written when the kernel's
 * pass takes the post from the ring, which waits while the pool is full
 * of fresh peers' WQEs: on a loaded host peers were seen holding 10 and
 * 14 (two and three rounds). Half what a fresh peer holds (FRESH_HOLD,
 * 34) tells the two apart whatever the lag. */
#define STALLED_HOLD	(FRESH_HOLD / 2)
#define MEASURE_MS	1500
#define LIVE_FRACTION	(1.0 / 3)	/* see xud.rst: adjacent phases alone differ up to 2x */
#define CQ_MSGS		16	/* SENDs at a receiver whose CQ holds fewer */
#define TAG_DEAD	(1ULL << 40)
/* S's CQ in -t dead: room for every completion the test can leave
 * unpolled (each dead peer's DEAD_POSTS and the live window), so that
 * none is lost. A lost one looked like a WQE the kernel still held: a
 * "dead peer that never stalled" (sessions 26 and 27). */
#define S_CQE		(MAX_DEAD * DEAD_POSTS + LIVE_WINDOW)

struct dev {
	struct ibv_context *ctx;
	struct ibv_pd *pd;
	union ibv_gid gid;
	int gid_idx;
	uint8_t *buf;
	size_t len;
	struct ibv_mr *mr;
};

static struct dev d[2];

static void fail(const char *what)
{
	fprintf(stderr, "xud-bounds: %s: %s\n", what, strerror(errno));
	printf("Bail out! %s\n", what);
	exit(1);
}

static void open_side(struct dev *x, const char *name, size_t len)
{
	x->ctx = open_dev(name);
	if (!x->ctx)
		fail(name);
	x->pd = ibv_alloc_pd(x->ctx);
	x->len = len;
	x->buf = calloc(1, len);
	if (!x->pd || !x->buf || ibv_query_gid(x->ctx, 1, x->gid_idx, &x->gid))
		fail("PD, buffer or GID");
	x->mr = ibv_reg_mr(x->pd, x->buf, len, IBV_ACCESS_LOCAL_WRITE);
	if (!x->mr)
		fail("ibv_reg_mr");
}

/* An XUD QP at RTS; min_rnr_timer @rnr (IB code). */
static struct ibv_qp *xud_qp(struct dev *x, struct ibv_cq *scq, struct ibv_cq *rcq,
			     int send_wr, int recv_wr, int rnr)
{
	struct ibv_qp_init_attr_ex a = {
		.qp_type = IBV_QPT_DRIVER,
		.comp_mask = IBV_QP_INIT_ATTR_PD,
		.pd = x->pd, .send_cq = scq, .recv_cq = rcq,
		.cap = { .max_send_wr = send_wr, .max_recv_wr = recv_wr, .max_send_sge = 1,
			 .max_recv_sge = 1 },
	};
	struct rxudv_qp_init_attr xa = { .comp_mask = 0 };
	struct ibv_qp_attr qa = { .qp_state = IBV_QPS_INIT, .pkey_index = 0, .port_num = 1,
				  .qkey = QKEY };
	struct ibv_qp *qp = rxudv_create_qp(x->ctx, &a, &xa, sizeof(xa));

	if (!qp)
		fail("rxudv_create_qp");
	if (ibv_modify_qp(qp, &qa, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_QKEY))
		fail("INIT");
	qa.qp_state = IBV_QPS_RTR;
	qa.min_rnr_timer = rnr;
	if (ibv_modify_qp(qp, &qa, IBV_QP_STATE | IBV_QP_MIN_RNR_TIMER))
		fail("RTR");
	qa.qp_state = IBV_QPS_RTS;
	qa.sq_psn = 0;
	if (ibv_modify_qp(qp, &qa, IBV_QP_STATE | IBV_QP_SQ_PSN))
		fail("RTS");
	return qp;
}

static struct ibv_ah *ah_to(struct dev *from, struct dev *to)
{
	struct ibv_ah_attr aa = {
		.is_global = 1, .port_num = 1,
		.grh = { .dgid = to->gid, .sgid_index = from->gid_idx, .hop_limit = 64 },
	};
	struct ibv_ah *ah = ibv_create_ah(from->pd, &aa);

	if (!ah)
		fail("ibv_create_ah");
	return ah;
}

static int post_recv(struct ibv_qp *qp, struct dev *x, int i)
{
	struct ibv_sge sge = {
		.addr = (uintptr_t)(x->buf + (size_t)i * RECV_LEN), .length = RECV_LEN,
		.lkey = x->mr->lkey,
	};
	struct ibv_recv_wr wr = { .wr_id = i, .sg_list = &sge, .num_sge = 1 }, *bad;

	return ibv_post_recv(qp, &wr, &bad);
}

/* A SEND of @len bytes from @x's buffer at @off, to @qpn through @ah. */
static int post_send(struct ibv_qp *qp, struct dev *x, size_t off, uint32_t len,
		     struct ibv_ah *ah, uint32_t qpn, uint64_t wr_id)
{
	struct ibv_sge sge = { .addr = (uintptr_t)(x->buf + off), .length = len,
			       .lkey = x->mr->lkey };
	struct ibv_send_wr wr = {
		.wr_id = wr_id, .sg_list = &sge, .num_sge = 1, .opcode = IBV_WR_SEND,
		.send_flags = IBV_SEND_SIGNALED,
		.wr.ud = { .ah = ah, .remote_qpn = qpn, .remote_qkey = QKEY },
	}, *bad;

	return ibv_post_send(qp, &wr, &bad);
}

/*
 * -t cq. Sizes alternate 1 and 3 packets (1 KB, 3 KB: the link's packets
 * carry at least 1024 bytes... and at most 1344 on a 1500-byte link, so
 * 3 KB is three packets). Message m's first 4 bytes are m, the rest
 * fill()'s pattern for m.
 */
static void run_cq(void)
{
	struct ibv_cq *s_cq = ibv_create_cq(d[0].ctx, 256, NULL, NULL, 0);
	struct ibv_cq *r_scq = ibv_create_cq(d[1].ctx, 16, NULL, NULL, 0);
	struct ibv_cq *r_rcq = ibv_create_cq(d[1].ctx, 4, NULL, NULL, 0);

	if (!s_cq || !r_scq || !r_rcq)
		fail("ibv_create_cq");
	int cap = r_rcq->cqe;	/* what the CQ holds, as the device sized it */
	int n = CQ_MSGS > cap + 8 ? CQ_MSGS : cap + 8;
	/* RNR waits of 40.96 ms (code 24): the sender retries while the
	 * receiver does not poll, without flooding. */
	struct ibv_qp *s = xud_qp(&d[0], s_cq, s_cq, 64, 1, 12);
	struct ibv_qp *r = xud_qp(&d[1], r_scq, r_rcq, 16, NRECV, 24);
	struct ibv_ah *ah = ah_to(&d[0], &d[1]);
	int got[64] = { 0 }, acked_early = 0, ok = 0, bad = 0, recvs = 0, wrong = 0;
	struct ibv_wc wc[16];

	if (n > 64)
		n = 64;
	for (int i = 0; i < NRECV; i++)
		if (post_recv(r, &d[1], i))
			fail("ibv_post_recv");
	for (int m = 0; m < n; m++) {
		size_t off = (size_t)m * 3 * MSG;
		uint32_t len = m % 2 ? 3 * MSG : MSG;

		fill(d[0].buf + off, len, m);
		memcpy(d[0].buf + off, &m, 4);
		if (post_send(s, &d[0], off, len, ah, r->qp_num, m))
			fail("ibv_post_send");
	}
	/* R does not poll for a second: what succeeds meanwhile was
	 * acknowledged, and must have its receive completion in R's CQ. */
	long long t0 = now_ms();
	while (now_ms() - t0 < 1000) {
		int k = ibv_poll_cq(s_cq, 16, wc);

		for (int i = 0; i < k; i++) {
			if (wc[i].status == IBV_WC_SUCCESS)
				acked_early++;
			else
				bad++;
			ok += wc[i].status == IBV_WC_SUCCESS;
		}
		usleep(1000);
	}
	check(acked_early <= cap,
	      "receive CQ of %d entries, not polled: %d of %d SENDs acknowledged (at most %d)",
	      cap, acked_early, n, cap);
	/* Now R polls: every SEND goes through, once. */
	t0 = now_ms();
	while ((ok + bad < n || recvs < n) && now_ms() - t0 < 15000) {
		int k = ibv_poll_cq(s_cq, 16, wc);

		for (int i = 0; i < k; i++) {
			ok += wc[i].status == IBV_WC_SUCCESS;
			bad += wc[i].status != IBV_WC_SUCCESS;
			if (wc[i].status != IBV_WC_SUCCESS)
				printf("# SEND %llu: %s\n", (unsigned long long)wc[i].wr_id,
				       ibv_wc_status_str(wc[i].status));
		}
		k = ibv_poll_cq(r_rcq, 16, wc);
		for (int i = 0; i < k; i++) {
			uint8_t *p = d[1].buf + (size_t)wc[i].wr_id * RECV_LEN + GRH;
			int m;

			recvs++;
			memcpy(&m, p, 4);
			if (wc[i].status != IBV_WC_SUCCESS || m < 0 || m >= n) {
				wrong++;
				continue;
			}
			uint32_t len = m % 2 ? 3 * MSG : MSG;

			got[m]++;
			p[0] = p[1] = p[2] = p[3] = 0;
			if (wc[i].byte_len != GRH + len)
				wrong++;
			else {
				uint8_t want[4];

				fill(want, 4, m);
				memcpy(p, want, 4);
				if (!same(p, len, m))
					wrong++;
			}
			if (post_recv(r, &d[1], wc[i].wr_id))
				fail("ibv_post_recv");
		}
		if (!k)
			usleep(1000);
	}
	int once = 1;

	for (int m = 0; m < n; m++)
		once &= got[m] == 1;
	check(ok == n && bad == 0,
	      "once the receiver polls, every SEND succeeds (%d of %d, %d failed)", ok, n, bad);
	check(recvs == n && once && !wrong,
	      "the receiver got each SEND exactly once with its bytes (%d completions, %d wrong)",
	      recvs, wrong);
	ibv_destroy_qp(s);
	ibv_destroy_qp(r);
	ibv_destroy_ah(ah);
	ibv_destroy_cq(s_cq);
	ibv_destroy_cq(r_scq);
	ibv_destroy_cq(r_rcq);
}

/* -t dead. */
static struct ibv_qp *S, *L;
static struct ibv_cq *s_cq, *l_cq;
static struct ibv_ah *to_l;
static int live_out, dead_out[MAX_DEAD], refused, dead_failed;
static long long live_done;

/* Polls S's and L's CQs once; reposts L's receives and live SENDs. */
static void pump(void)
{
	struct ibv_wc wc[32];
	int k = ibv_poll_cq(s_cq, 32, wc);

	for (int i = 0; i < k; i++) {
		if (wc[i].wr_id & TAG_DEAD) {
			int p = wc[i].wr_id & 0xff;

			dead_out[p]--;
			refused += wc[i].status == IBV_WC_LOC_QP_OP_ERR;
			dead_failed += wc[i].status == IBV_WC_RETRY_EXC_ERR;
			continue;
		}
		live_out--;
		if (wc[i].status == IBV_WC_SUCCESS)
			live_done++;
		else
			printf("# live SEND: %s\n", ibv_wc_status_str(wc[i].status));
	}
	k = ibv_poll_cq(l_cq, 32, wc);
	for (int i = 0; i < k; i++)
		if (!(wc[i].opcode & IBV_WC_RECV) || post_recv(L, &d[1], wc[i].wr_id))
			fail("L's receive");
	while (live_out < LIVE_WINDOW) {
		if (post_send(S, &d[0], 0, MSG, to_l, L->qp_num, 0))
			break;	/* the ring is full: later */
		live_out++;
	}
}

/* Whether each of the first @n dead peers, posted its first DEAD_POSTS
 * (@posted: this phase's posts), holds no more than a stalled destination
 * may (before its stall a fresh one holds its share of the queue, 32
 * here). */
static int unstalled(int n, const int *posted)
{
	int k = 0;

	for (int p = 0; p < n; p++)
		k += posted[p] < DEAD_POSTS || dead_out[p] > STALLED_HOLD;
	return k;
}

/* How long @fresh new dead peers may take to stall: a wave per queue's
 * worth of them. */
static long long stall_limit_ms(int fresh)
{
	return STALL_WAVE_MS * ((fresh * FRESH_HOLD + SQ_DEPTH - 1) / SQ_DEPTH);
}

/* L's SENDs completed per second with @n dead peers being posted to, @fresh
 * of them new; *@stall_ms: when the last of them stalled (ms into the
 * phase; -1 if one did not within its limit and a second). */
static double live_rate(int n, int fresh, struct ibv_ah *to_dead, long long *stall_ms)
{
	long long t0 = now_ms(), last_topup = 0, from = 0, start = 0, stalled = -1;
	long long warmup_max = stall_limit_ms(fresh) + 1000;
	int budget[MAX_DEAD] = { 0 }, posted[MAX_DEAD] = { 0 };

	while (!start || now_ms() - start < MEASURE_MS) {
		long long t = now_ms();

		if (t - last_topup >= TOPUP_MS) {
			/* First DEAD_POSTS each, then a few more per round. */
			for (int p = 0; p < n; p++) {
				int more = last_topup ? TOPUP_POSTS : DEAD_POSTS;

				if (dead_out[p] + budget[p] + more > DEAD_POSTS)
					more = DEAD_POSTS - dead_out[p] - budget[p];
				budget[p] += more > 0 ? more : 0;
			}
			last_topup = t;
		}
		for (int p = 0; p < n; p++)
			while (budget[p] > 0) {
				uint32_t qpn = (L->qp_num + 0x100000 + p) & 0xffffff;

				if (post_send(S, &d[0], MSG, MSG, to_dead, qpn, TAG_DEAD | p))
					break;	/* the ring is full: later */
				dead_out[p]++;
				posted[p]++;
				budget[p]--;
			}
		if (n && stalled < 0 && !unstalled(n, posted))
			stalled = t - t0;
		if (!start && (n ? (stalled >= 0 && t - t0 >= stalled + SETTLE_MS) ||
					   t - t0 >= warmup_max
				 : t - t0 >= WARMUP_MS)) {
			start = t;
			from = live_done;
		}
		pump();
	}
	if (n && unstalled(n, posted) > 0) {
		/* Which of them did not stall: what each holds and was posted. */
		printf("# %d not stalled after %lld ms; per dead peer, held/posted:",
		       unstalled(n, posted), now_ms() - t0);
		for (int p = 0; p < n; p++)
			printf(" %d/%d", dead_out[p], posted[p]);
		printf("\n");
	}
	if (stall_ms)
		*stall_ms = stalled;
	return (live_done - from) * 1000.0 / (now_ms() - start);
}

/* Whether @ctx reported a CQ overflow (IBV_EVENT_CQ_ERR: its lost
 * completions would count as WQEs still held). Reads the events queued so
 * far without waiting. */
static int cq_overflowed(struct ibv_context *ctx)
{
	struct ibv_async_event ev;
	int flags = fcntl(ctx->async_fd, F_GETFL), seen = 0;

	if (flags < 0 || fcntl(ctx->async_fd, F_SETFL, flags | O_NONBLOCK))
		fail("fcntl");
	while (!ibv_get_async_event(ctx, &ev)) {
		seen |= ev.event_type == IBV_EVENT_CQ_ERR;
		ibv_ack_async_event(&ev);
	}
	return seen;
}

static void run_dead(void)
{
	s_cq = ibv_create_cq(d[0].ctx, S_CQE, NULL, NULL, 0);
	l_cq = ibv_create_cq(d[1].ctx, 4 * 256, NULL, NULL, 0);
	if (!s_cq || !l_cq)
		fail("ibv_create_cq");
	S = xud_qp(&d[0], s_cq, s_cq, SQ_DEPTH, 1, 12);
	L = xud_qp(&d[1], l_cq, l_cq, 16, 256, 12);
	to_l = ah_to(&d[0], &d[1]);
	for (int i = 0; i < 256; i++)
		if (post_recv(L, &d[1], i))
			fail("ibv_post_recv");
	/* Each dead phase against the mean of the rates alone just before
	 * and after it: a shared machine's speed drifts within seconds.
	 * (The dead peers of one phase stay dead in the next: posted to no
	 * more, they hold what they held until they fail RETRY_EXC_ERR.) */
	long long s4, s16;
	double a0 = live_rate(0, 0, to_l, NULL);
	double r4 = live_rate(4, 4, to_l, &s4);
	double a1 = live_rate(0, 0, to_l, NULL);
	double r16 = live_rate(16, 12, to_l, &s16);
	double a2 = live_rate(0, 0, to_l, NULL);
	double b4 = (a0 + a1) / 2, b16 = (a1 + a2) / 2;

	printf("# live SENDs/s: %.0f alone, %.0f beside 4 dead peers, %.0f alone, %.0f beside 16, "
	       "%.0f alone; posts to dead peers refused at once: %d; failed RETRY_EXC_ERR: %d\n",
	       a0, r4, a1, r16, a2, refused, dead_failed);
	int lost = cq_overflowed(d[0].ctx);

	check(s4 >= 0 && s4 <= stall_limit_ms(4) && s16 >= 0 && s16 <= stall_limit_ms(12) && !lost,
	      "the dead peers stall in time: 4 new in %lld ms (at most %lld), 12 more in %lld ms "
	      "(at most %lld; -1: not stalled), no completion lost (%s)",
	      s4, stall_limit_ms(4), s16, stall_limit_ms(12),
	      lost ? "S's CQ overflowed" : "no CQ error");
	check(a0 > 0 && a1 > 0 && a2 > 0, "the live peer alone: %.0f, %.0f, %.0f SENDs/s",
	      a0, a1, a2);
	check(r4 >= LIVE_FRACTION * b4,
	      "beside 4 dead peers the live peer keeps at least %.0f%% of its rate (%.0f%%)",
	      100 * LIVE_FRACTION, b4 > 0 ? 100 * r4 / b4 : 0);
	check(r16 >= LIVE_FRACTION * b16,
	      "beside 16 dead peers the live peer keeps at least %.0f%% of its rate (%.0f%%)",
	      100 * LIVE_FRACTION, b16 > 0 ? 100 * r16 / b16 : 0);
	/* Destroying S completes what it holds (flushed): not waited for. */
	ibv_destroy_qp(S);
	ibv_destroy_qp(L);
	ibv_destroy_ah(to_l);
	ibv_destroy_cq(s_cq);
	ibv_destroy_cq(l_cq);
}

int main(int argc, char **argv)
{
	const char *dev[2] = { NULL, NULL }, *test = NULL;
	int c;

	while ((c = getopt(argc, argv, "d:g:D:G:t:")) != -1) {
		switch (c) {
		case 'd': dev[0] = optarg; break;
		case 'g': d[0].gid_idx = atoi(optarg); break;
		case 'D': dev[1] = optarg; break;
		case 'G': d[1].gid_idx = atoi(optarg); break;
		case 't': test = optarg; break;
		default: test = NULL; dev[0] = NULL; break;
		}
	}
	if (!dev[0] || !dev[1] || !test || (strcmp(test, "cq") && strcmp(test, "dead"))) {
		fprintf(stderr, "usage: %s -d DEV -g GIDX -D DEV2 -G GIDX2 -t cq|dead\n", argv[0]);
		return 2;
	}
	open_side(&d[0], dev[0], 64 * 3 * MSG);
	open_side(&d[1], dev[1], 256 * RECV_LEN);
	if (!strcmp(test, "cq"))
		run_cq();
	else
		run_dead();
	printf("1..%d\n", n_checks);
	return n_failed ? 1 : 0;
}
