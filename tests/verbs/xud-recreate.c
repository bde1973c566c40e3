// SPDX-License-Identifier: GPL-2.0 OR Linux-OpenIB
/*
 * xud-recreate: real XUD QPs destroyed and re-created with the same QP
 * number, on both ends of a stream, in TAP (Documentation/xud.rst, rules
 * 1, 3 and 5).
 *
 *   xud-recreate -d DEV_A -g GIDINDEX_A -D DEV_B -G GIDINDEX_B
 *
 * Both devices must have been created with the module parameter max_qp
 * at 2, so that a destroyed QP's number is the only one a new QP can get
 * once its hold is over. On A, QPs S and T; on B, QPs R and R2. S sends
 * to R, T to R2; then R and T are destroyed at once. Checked:
 *
 * - the devices report max_qp 2 and refuse a third QP (ENOMEM);
 * - while the numbers are held (xud::QPN_HOLD_NS, 12 s) a new QP is
 *   refused on either device, and then gets the old number: R' (B) and
 *   T' (A), not before 11.5 s;
 * - S keeps a stream to R's number over the hold (a SEND at a time to a
 *   QP that is gone: each fails IBV_WC_RETRY_EXC_ERR), so its state names
 *   R's incarnation when R' appears; then SENDs to R', one at a time:
 *   those before S learns R''s incarnation (a stale-incarnation NAK) fail
 *   IBV_WC_RETRY_EXC_ERR, none after; the last ones all succeed; R'
 *   receives exactly the SENDs that succeeded, each once, bytes right
 *   (the shell checks B's rx_drop_xud_stale moved: the NAK path ran);
 * - T' (T's number, a new stream) sends to R2, which held T's old
 *   stream: every SEND succeeds and R2 receives each once (the shell
 *   checks B reclaimed T's old stream).
 */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <infiniband/verbs.h>
#include <infiniband/rxudv.h>
#include "tap.h"
#include "util.h"

#define QKEY		0x11117777
#define GRH		40
#define MSG_LEN		1024
#define RECVS		16
#define MAX_QP		2
#define HOLD_MS		12000	/* xud::QPN_HOLD_NS */
#define HOLD_SLACK_MS	500	/* clocks: the guest's against the kernel's */
#define WAIT_MS		30000	/* for one completion */
#define AFTER_MSGS	8	/* SENDs to R' */
#define LAST_OK		4	/* the last of them that must all succeed */
#define T_MSGS		4	/* SENDs from T' to R2 */

/* One end of the test's streams: a QP with a CQ of its own (R and R'
 * share a number, so completions are told apart by their CQ). */
struct end {
	struct ibv_qp *qp;
	struct ibv_cq *cq;
	uint8_t *buf;		/* RECVS receive slots, then a send slot */
	struct ibv_mr *mr;
	int got[64];		/* receive completions per message number */
	int wrong;		/* receives not one of ours, or bytes wrong */
};

struct dev {
	struct ibv_context *ctx;
	struct ibv_pd *pd;
	struct ibv_ah *ah;	/* to the other device */
	union ibv_gid gid;
	int gid_idx;
};

static struct dev a, b;

static uint8_t *slot(struct end *e, int i) { return e->buf + (size_t)i * (GRH + MSG_LEN); }

static int post_recv(struct end *e, int i)
{
	struct ibv_sge sge = {
		.addr = (uintptr_t)slot(e, i), .length = GRH + MSG_LEN, .lkey = e->mr->lkey,
	};
	struct ibv_recv_wr wr = { .wr_id = i, .sg_list = &sge, .num_sge = 1 }, *bad;

	return ibv_post_recv(e->qp, &wr, &bad);
}

/* An XUD QP on @d at RTS with RECVS receives posted; 0, or an errno.
 * *@at_create (if given) says whether the error was the QP's creation's
 * (ENOMEM there: the device has no number to give). */
static int make_end(struct dev *d, struct end *e, int *at_create)
{
	struct ibv_qp_init_attr_ex at = {
		.qp_type = IBV_QPT_DRIVER,
		.comp_mask = IBV_QP_INIT_ATTR_PD,
		.cap = { .max_send_wr = 16, .max_recv_wr = RECVS, .max_send_sge = 1,
			 .max_recv_sge = 1 },
	};
	struct rxudv_qp_init_attr x = { 0 };
	struct ibv_qp_attr qa = { .qp_state = IBV_QPS_INIT, .port_num = 1, .qkey = QKEY };
	int err;

	size_t len = (size_t)(RECVS + 1) * (GRH + MSG_LEN);

	if (at_create)
		*at_create = 0;
	/* Each piece once; one that failed is tried again next time. */
	if (!e->cq)
		e->cq = ibv_create_cq(d->ctx, 64, NULL, NULL, 0);
	if (!e->buf)
		e->buf = calloc(1, len);
	if (!e->mr && e->buf)
		e->mr = ibv_reg_mr(d->pd, e->buf, len, IBV_ACCESS_LOCAL_WRITE);
	if (!e->cq || !e->mr)
		return errno ? errno : ENOMEM;
	at.pd = d->pd;
	at.send_cq = e->cq;
	at.recv_cq = e->cq;
	e->qp = rxudv_create_qp(d->ctx, &at, &x, sizeof(x));
	if (!e->qp) {
		if (at_create)
			*at_create = 1;
		return errno;
	}
	err = ibv_modify_qp(e->qp, &qa, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT |
			    IBV_QP_QKEY);
	qa.qp_state = IBV_QPS_RTR;
	err = err ? err : ibv_modify_qp(e->qp, &qa, IBV_QP_STATE);
	qa.qp_state = IBV_QPS_RTS;
	err = err ? err : ibv_modify_qp(e->qp, &qa, IBV_QP_STATE | IBV_QP_SQ_PSN);
	for (int i = 0; i < RECVS && !err; i++)
		err = post_recv(e, i);
	return err;
}

static int open_side(struct dev *d, const char *name)
{
	d->ctx = open_dev(name);
	d->pd = d->ctx ? ibv_alloc_pd(d->ctx) : NULL;
	return d->pd && !ibv_query_gid(d->ctx, 1, d->gid_idx, &d->gid) ? 0 : -1;
}

static int make_ah(struct dev *d, struct dev *to)
{
	struct ibv_ah_attr ah = {
		.is_global = 1, .port_num = 1,
		.grh = { .dgid = to->gid, .sgid_index = d->gid_idx, .hop_limit = 64 },
	};

	d->ah = ibv_create_ah(d->pd, &ah);
	return d->ah ? 0 : -1;
}

/* Takes every receive completion of @e (a receiving end: it posts no
 * sends): each names its message in its first 4 bytes, fill()'s pattern
 * for that number follows. Reposts the receive. */
static void take_recvs(struct end *e)
{
	struct ibv_wc wc;

	while (ibv_poll_cq(e->cq, 1, &wc) == 1) {
		uint8_t *p = slot(e, wc.wr_id);
		uint32_t m = UINT32_MAX;

		if (wc.status == IBV_WC_SUCCESS)
			memcpy(&m, p + GRH, 4);
		if (wc.status != IBV_WC_SUCCESS || wc.opcode != IBV_WC_RECV ||
		    wc.byte_len != GRH + MSG_LEN || m >= ARRAY_SIZE(e->got) ||
		    !same(p + GRH + 4, MSG_LEN - 4, m)) {
			printf("# receive %llu wrong: %s, %u B, message %d\n",
			       (unsigned long long)wc.wr_id, ibv_wc_status_str(wc.status),
			       wc.byte_len, (int)m);
			e->wrong++;
			continue;
		}
		e->got[m]++;
		if (post_recv(e, wc.wr_id))
			e->wrong++;
	}
}

/* Posts a SEND of message @m from @from (on @d) to QP number @qpn. */
static int post_msg(struct dev *d, struct end *from, uint32_t qpn, uint32_t m)
{
	uint8_t *src = slot(from, RECVS);
	struct ibv_sge sge = { .addr = (uintptr_t)src, .length = MSG_LEN, .lkey = from->mr->lkey };
	struct ibv_send_wr wr = {
		.wr_id = m, .sg_list = &sge, .num_sge = 1, .opcode = IBV_WR_SEND,
		.send_flags = IBV_SEND_SIGNALED,
		.wr.ud = { .ah = d->ah, .remote_qpn = qpn, .remote_qkey = QKEY },
	}, *bad;

	fill(src + 4, MSG_LEN - 4, m);
	memcpy(src, &m, 4);
	return ibv_post_send(from->qp, &wr, &bad);
}

/* SENDs message @m from @from to @to and waits for the send completion,
 * taking @to's receives meanwhile: the completion's status, or -1 if the
 * post failed or nothing came. (The only completions on @from's CQ are
 * its sends' and it has one at a time; a failed one's opcode is not
 * defined.) */
static int send_one(struct dev *d, struct end *from, struct end *to, uint32_t m)
{
	long long t = now_ms();
	struct ibv_wc wc;

	if (post_msg(d, from, to->qp->qp_num, m))
		return -1;
	while (now_ms() - t < WAIT_MS) {
		take_recvs(to);
		if (ibv_poll_cq(from->cq, 1, &wc) == 1) {
			/* The receive completes before the ACK that
			 * completes the send is sent: it is there by now. */
			take_recvs(to);
			return wc.wr_id == m ? (int)wc.status : -1;
		}
	}
	return -1;
}

/* One try at creating @e on @d while its number may be held: 1 when it
 * exists, 0 when the device still has no number for it (ENOMEM), -1 on
 * any other error (in *@err). */
static int try_create(struct dev *d, struct end *e, int *err)
{
	int at_create;

	*err = make_end(d, e, &at_create);
	if (!*err)
		return 1;
	if (e->qp) {
		ibv_destroy_qp(e->qp);
		e->qp = NULL;
	}
	return at_create && *err == ENOMEM ? 0 : -1;
}

int main(int argc, char **argv)
{
	const char *name_a = NULL, *name_b = NULL;
	struct end s = { 0 }, t = { 0 }, r = { 0 }, r2 = { 0 }, r_new = { 0 }, t_new = { 0 };
	struct end extra = { 0 };
	struct ibv_device_attr attr_a, attr_b;
	int c, err, err_a = 0, err_b = 0;

	while ((c = getopt(argc, argv, "d:g:D:G:")) != -1) {
		switch (c) {
		case 'd': name_a = optarg; break;
		case 'g': a.gid_idx = atoi(optarg); break;
		case 'D': name_b = optarg; break;
		case 'G': b.gid_idx = atoi(optarg); break;
		default:
			fprintf(stderr, "usage: %s -d DEV_A -g GID_A -D DEV_B -G GID_B\n", argv[0]);
			return 2;
		}
	}
	if (!name_a || !name_b)
		return 2;
	if (open_side(&a, name_a) || open_side(&b, name_b) || make_ah(&a, &b) ||
	    make_ah(&b, &a)) {
		check(0, "open %s and %s, PDs and AHs: %s", name_a, name_b, strerror(errno));
		goto out;
	}
	check(!ibv_query_device(a.ctx, &attr_a) && !ibv_query_device(b.ctx, &attr_b) &&
	      attr_a.max_qp == MAX_QP && attr_b.max_qp == MAX_QP,
	      "both devices report max_qp %d (the module parameter)", MAX_QP);
	err = make_end(&a, &s, NULL);
	err = err ? err : make_end(&a, &t, NULL);
	err = err ? err : make_end(&b, &r, NULL);
	err = err ? err : make_end(&b, &r2, NULL);
	if (err) {
		check(0, "XUD QPs S and T on %s, R and R2 on %s: %s", name_a, name_b, strerror(err));
		goto out;
	}
	err = make_end(&a, &extra, NULL);
	check(err == ENOMEM, "a third QP on %s is refused with ENOMEM (%s)", name_a,
	      strerror(err));

	/* Streams S -> R and T -> R2. */
	for (uint32_t m = 0; m < 4; m++) {
		err_a |= send_one(&a, &s, &r, m) != IBV_WC_SUCCESS;
		err_b |= send_one(&a, &t, &r2, 10 + m) != IBV_WC_SUCCESS;
	}
	check(!err_a && !err_b && !r.wrong && !r2.wrong && r.got[3] == 1 && r2.got[13] == 1,
	      "S -> R and T -> R2: 4 SENDs each, delivered");

	uint32_t r_qpn = r.qp->qp_num, t_qpn = t.qp->qp_num;
	long long t0, t0_t, r_ms = -1, t_ms = -1, next_try;
	int dead = 0, dead_failed = 0, dead_other = 0, in_flight = 0, fatal = 0;
	int create_b, create_a;

	/* Each hold starts within its destroy: timed from its return, the
	 * hold can only look shorter than it is. */
	ibv_destroy_qp(r.qp);
	t0 = now_ms();
	ibv_destroy_qp(t.qp);
	t0_t = now_ms();
	next_try = t0;
	r.qp = t.qp = NULL;
	err_b = make_end(&b, &r_new, &create_b);
	err_a = make_end(&a, &t_new, &create_a);
	check(err_b == ENOMEM && create_b && err_a == ENOMEM && create_a,
	      "just after R and T are destroyed, a new QP is refused with ENOMEM on both devices "
	      "(%s, %s): their numbers are held", strerror(err_b), strerror(err_a));
	if (r_new.qp)
		ibv_destroy_qp(r_new.qp);
	if (t_new.qp)
		ibv_destroy_qp(t_new.qp);
	r_new.qp = t_new.qp = NULL;

	/*
	 * Over the hold, S keeps a stream to R's number: one SEND after the
	 * other to a QP that is gone, each failing RETRY_EXC_ERR (the one in
	 * flight when R' appears fails too: S still names R's incarnation).
	 * R' and T' are tried every 100 ms until their devices allow them.
	 */
	while (!fatal && now_ms() - t0 < HOLD_MS + 10000 && (r_ms < 0 || t_ms < 0 || in_flight)) {
		struct ibv_wc wc;

		if (!in_flight && r_ms < 0 && dead < 20) {
			if (post_msg(&a, &s, r_qpn, 20 + dead)) {
				fatal = 1;
				break;
			}
			dead++;
			in_flight = 1;
		}
		if (ibv_poll_cq(s.cq, 1, &wc) == 1) {
			in_flight = 0;
			if (wc.status == IBV_WC_RETRY_EXC_ERR)
				dead_failed++;
			else
				dead_other++;
		}
		if (now_ms() >= next_try) {
			next_try += 100;
			if (r_ms < 0) {
				int ret = try_create(&b, &r_new, &err_b);

				fatal |= ret < 0;
				if (ret > 0)
					r_ms = now_ms() - t0;
			}
			if (t_ms < 0) {
				int ret = try_create(&a, &t_new, &err_a);

				fatal |= ret < 0;
				if (ret > 0)
					t_ms = now_ms() - t0_t;
			}
		}
	}
	if (fatal) {
		check(0, "over the hold, a SEND to R's number could not be posted or a QP "
		      "creation failed otherwise than ENOMEM (%s, %s)", strerror(err_b),
		      strerror(err_a));
		goto out;
	}
	check(dead > 0 && dead_failed == dead && !dead_other,
	      "the %d SENDs to R's number over the hold failed IBV_WC_RETRY_EXC_ERR (%d did, %d "
	      "otherwise)", dead, dead_failed, dead_other);
	if (r_ms < 0 || t_ms < 0) {
		check(0, "R and T re-created within %d ms of their destruction (%s, %s)",
		      HOLD_MS + 10000, strerror(err_b), strerror(err_a));
		goto out;
	}
	check(r_new.qp->qp_num == r_qpn && t_new.qp->qp_num == t_qpn &&
	      r_ms >= HOLD_MS - HOLD_SLACK_MS && t_ms >= HOLD_MS - HOLD_SLACK_MS,
	      "R' and T' get R's and T's numbers (%#x, %#x; were %#x, %#x), %lld and %lld ms "
	      "after their destruction", r_new.qp->qp_num, t_new.qp->qp_num, r_qpn, t_qpn,
	      r_ms, t_ms);

	/* S's stream meets R': failures only until S learns R''s incarnation. */
	{
		int st[AFTER_MSGS], ok = 0, failed = 0, late_fail = 0, other = 0, seen_ok = 0;
		int extra_recvs = 0, missing = 0;

		for (int i = 0; i < AFTER_MSGS; i++) {
			st[i] = send_one(&a, &s, &r_new, 40 + i);
			if (st[i] == IBV_WC_SUCCESS) {
				ok++;
				seen_ok = 1;
				missing += r_new.got[40 + i] != 1;
			} else if (st[i] == IBV_WC_RETRY_EXC_ERR) {
				failed++;
				late_fail += seen_ok;
				extra_recvs += r_new.got[40 + i] != 0;
			} else {
				other++;
			}
		}
		/* Anything late would be a duplicate. */
		usleep(300 * 1000);
		take_recvs(&r_new);
		for (int i = 0; i < AFTER_MSGS; i++)
			extra_recvs += r_new.got[40 + i] > 1;
		for (int m = 0; m < 40; m++)
			extra_recvs += r_new.got[m];
		check(!other && !late_fail && ok >= LAST_OK && st[AFTER_MSGS - 1] == IBV_WC_SUCCESS,
		      "S's %d SENDs to R': %d succeeded, %d failed RETRY_EXC_ERR, all failures "
		      "before the first success, the last %d succeeded", AFTER_MSGS, ok, failed,
		      LAST_OK);
		check(!missing && !extra_recvs && !r_new.wrong,
		      "R' received each SEND that succeeded once, bytes right, and nothing else "
		      "(%d missing, %d extra, %d wrong)", missing, extra_recvs, r_new.wrong);
	}

	/* T' (T's number, a new stream) to R2, which held T's old one. */
	{
		int ok = 0, missing = 0, extra_recvs = 0;

		for (uint32_t m = 0; m < T_MSGS; m++) {
			ok += send_one(&a, &t_new, &r2, 50 + m) == IBV_WC_SUCCESS;
			missing += r2.got[50 + m] != 1;
		}
		usleep(300 * 1000);
		take_recvs(&r2);
		for (uint32_t m = 0; m < ARRAY_SIZE(r2.got); m++)
			extra_recvs += r2.got[m] > 1;
		check(ok == T_MSGS && !missing && !extra_recvs && !r2.wrong,
		      "T' (T's number re-created) to R2: %d of %d SENDs succeeded, each received "
		      "once, bytes right (%d missing, %d duplicated, %d wrong)", ok, T_MSGS,
		      missing, extra_recvs, r2.wrong);
	}
out:
	{
		struct end *ends[] = { &s, &t, &r, &r2, &r_new, &t_new, &extra };

		for (size_t i = 0; i < ARRAY_SIZE(ends); i++) {
			if (ends[i]->qp)
				ibv_destroy_qp(ends[i]->qp);
			if (ends[i]->mr)
				ibv_dereg_mr(ends[i]->mr);
			if (ends[i]->cq)
				ibv_destroy_cq(ends[i]->cq);
			free(ends[i]->buf);
		}
	}
	if (a.ah)
		ibv_destroy_ah(a.ah);
	if (b.ah)
		ibv_destroy_ah(b.ah);
	if (a.pd)
		ibv_dealloc_pd(a.pd);
	if (b.pd)
		ibv_dealloc_pd(b.pd);
	if (a.ctx)
		ibv_close_device(a.ctx);
	if (b.ctx)
		ibv_close_device(b.ctx);
	printf("1..%d\n", n_checks);
	return n_failed ? 1 : 0;
}
