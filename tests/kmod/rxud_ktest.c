// SPDX-License-Identifier: GPL-2.0
/*
 * rxud_ktest: drives the verbs only kernel ULPs can reach (DMA MRs through
 * ib_alloc_pd, fast-registration MRs and ib_map_mr_sg; kernel QPs moving
 * data: ib_post_send/ib_post_recv/ib_poll_cq over RC, REG_MR, LOCAL_INV,
 * SEND with invalidate, flush in the error state, ib_drain_qp of a QP on an
 * SRQ) on one RDMA device,
 * and the verbs ib_core lets ULPs call in atomic context from that context
 * (AHs with interrupts off and in softirq, ib_map_mr_sg in softirq,
 * ib_req_notify_cq in hard irq), and prints TAP to the kernel log:
 *
 *	insmod rxud_ktest.ko dev=rxud0
 *
 * Every line starts with "rxud_ktest: "; the module always loads and
 * unloads cleanly (the results are in the log), and frees everything it
 * allocated before init returns.
 */
#include <linux/completion.h>
#include <linux/debug_locks.h>
#include <linux/delay.h>
#include <linux/etherdevice.h>
#include <linux/hrtimer.h>
#include <linux/module.h>
#include <net/ipv6.h>
#include <linux/scatterlist.h>
#include <linux/slab.h>
#include <linux/timer.h>
#include <rdma/ib_cache.h>
#include <rdma/ib_verbs.h>
#include "rxud_kernel.h"

static char *dev = "rxud0";
module_param(dev, charp, 0444);
MODULE_PARM_DESC(dev, "RDMA device to test");
static bool atomic = true;
module_param(atomic, bool, 0444);
MODULE_PARM_DESC(atomic, "Also call verbs from atomic contexts (last checks)");
static bool xud = true;
module_param(xud, bool, 0444);
MODULE_PARM_DESC(xud, "Also create an rxud XUD QP (IB_QPT_DRIVER; after the atomic checks)");
static bool handlers = true;
module_param(handlers, bool, 0444);
MODULE_PARM_DESC(handlers, "Also drive QPs from completion handlers that poll and post (last)");

static int n_checks, n_failed;

#define check(ok, fmt, ...) do {						\
	bool __ok = (ok);							\
	n_checks++;								\
	if (!__ok)								\
		n_failed++;							\
	pr_info("rxud_ktest: %s %d - " fmt "\n", __ok ? "ok" : "not ok",	\
		n_checks, ##__VA_ARGS__);					\
} while (0)

/* ERR_PTR-returning verb must fail with @want. */
#define check_err_ptr(p, want, what) \
	check(IS_ERR(p) && PTR_ERR(p) == (want), "%s fails with %d (got %ld)", \
	      what, want, IS_ERR(p) ? PTR_ERR(p) : 0L)

static void pd_checks(struct ib_device *ibdev)
{
	struct ib_pd *pd, *pd2;

	/* Without IBK_LOCAL_DMA_LKEY, ib_alloc_pd asks the driver for a DMA MR. */
	pd = ib_alloc_pd(ibdev, 0);
	check(!IS_ERR(pd), "ib_alloc_pd (creates a local DMA MR)");
	if (IS_ERR(pd))
		return;
	check(pd->local_dma_lkey != 0, "PD has a non-zero local_dma_lkey");
	pd2 = ib_alloc_pd(ibdev, IB_PD_UNSAFE_GLOBAL_RKEY);
	check(!IS_ERR(pd2), "ib_alloc_pd with an unsafe global rkey");
	if (!IS_ERR(pd2)) {
		check(pd2->unsafe_global_rkey != 0, "global rkey is non-zero");
		check(pd2->local_dma_lkey != pd->local_dma_lkey, "each PD has its own DMA MR key");
		ib_dealloc_pd(pd2);
	}
	ib_dealloc_pd(pd);
}

static void fast_reg_checks(struct ib_device *ibdev)
{
	u32 max = ibdev->attrs.max_fast_reg_page_list_len;
	struct scatterlist sg[4];
	struct ib_mr *mr, *bad;
	struct page *pages[4] = {};
	struct ib_pd *pd;
	int i, n, nents;

	check(max > 0, "max_fast_reg_page_list_len %u > 0", max);
	pd = ib_alloc_pd(ibdev, 0);
	if (IS_ERR(pd))
		return;

	bad = ib_alloc_mr(pd, IB_MR_TYPE_MEM_REG, max + 1);
	check_err_ptr(bad, -EINVAL, "ib_alloc_mr above max_fast_reg_page_list_len");
	if (!IS_ERR(bad))
		ib_dereg_mr(bad);
	bad = ib_alloc_mr(pd, IB_MR_TYPE_SG_GAPS, 4);
	check_err_ptr(bad, -EINVAL, "ib_alloc_mr of SG_GAPS type (not offered)");
	if (!IS_ERR(bad))
		ib_dereg_mr(bad);

	mr = ib_alloc_mr(pd, IB_MR_TYPE_MEM_REG, 3);
	check(!IS_ERR(mr), "ib_alloc_mr for 3 pages");
	if (IS_ERR(mr))
		goto out_pd;
	check(mr->lkey != 0 && mr->lkey == mr->rkey, "fast-reg MR has a key (lkey == rkey)");

	for (i = 0; i < 4; i++)
		if (!(pages[i] = alloc_page(GFP_KERNEL)))
			goto out_mr;
	sg_init_table(sg, 4);
	for (i = 0; i < 4; i++)
		sg_set_page(&sg[i], pages[i], PAGE_SIZE, 0);
	nents = ib_dma_map_sg(ibdev, sg, 4, DMA_BIDIRECTIONAL);
	check(nents == 4, "ib_dma_map_sg of 4 pages (%d)", nents);
	if (nents != 4)
		goto out_pages;

	n = ib_map_mr_sg(mr, sg, 2, NULL, PAGE_SIZE);
	check(n == 2, "ib_map_mr_sg maps 2 pages (%d)", n);
	check(mr->length == 2 * PAGE_SIZE, "MR length is 2 pages (%llu)", mr->length);
	check(mr->iova == sg_dma_address(&sg[0]), "MR iova is the first page's DMA address");

	/* Remapping starts over; a list longer than the MR maps partially. */
	n = ib_map_mr_sg(mr, sg, 4, NULL, PAGE_SIZE);
	check(n == 3, "ib_map_mr_sg of 4 pages into a 3-page MR maps 3 (%d)", n);
	check(mr->length == 3 * PAGE_SIZE, "MR length is 3 pages (%llu)", mr->length);

	n = ib_map_mr_sg(mr, sg, 1, NULL, PAGE_SIZE);
	check(n == 1 && mr->length == PAGE_SIZE, "remapping 1 page starts over");

	ib_dma_unmap_sg(ibdev, sg, 4, DMA_BIDIRECTIONAL);
out_pages:
	for (i = 0; i < 4; i++)
		if (pages[i])
			__free_page(pages[i]);
out_mr:
	check(ib_dereg_mr(mr) == 0, "ib_dereg_mr");
out_pd:
	ib_dealloc_pd(pd);
}

/*
 * Calling contexts. With lockdep (PROVE_LOCKING) and DEBUG_ATOMIC_SLEEP in
 * the test kernel, a driver lock taken here and also in process context
 * without disabling interrupts, or a sleeping call, leaves a splat in the
 * log, which the test runner fails on; the checks below also verify the
 * results.
 */
struct ctx_test {
	struct ib_pd *pd;
	struct rdma_ah_attr ah_attr;
	struct ib_mr *mr;
	struct scatterlist *sg;
	struct ib_cq *cq;
	struct timer_list timer;
	struct hrtimer hrtimer;
	struct completion done;
	bool in_softirq, in_hardirq;
	int ah_ret, map_ret, notify_ret;
};

/* Creates and destroys an AH without sleeping; 0 or the error. */
static int ah_atomic(struct ctx_test *t)
{
	struct ib_ah *ah = rdma_create_ah(t->pd, &t->ah_attr, 0);

	if (IS_ERR(ah))
		return PTR_ERR(ah);
	return rdma_destroy_ah_user(ah, 0, NULL);
}

static void ctx_softirq(struct timer_list *timer)
{
	struct ctx_test *t = from_timer(t, timer, timer);

	t->in_softirq = in_softirq();
	t->ah_ret = ah_atomic(t);
	t->map_ret = t->mr ? ib_map_mr_sg(t->mr, t->sg, 1, NULL, PAGE_SIZE) : -ENODEV;
	complete(&t->done);
}

static enum hrtimer_restart ctx_hardirq(struct hrtimer *timer)
{
	struct ctx_test *t = container_of(timer, struct ctx_test, hrtimer);

	t->in_hardirq = in_hardirq();
	t->notify_ret = ib_req_notify_cq(t->cq, IB_CQ_NEXT_COMP | IB_CQ_REPORT_MISSED_EVENTS);
	complete(&t->done);
	return HRTIMER_NORESTART;
}

/*
 * A RoCE v2 GID of port 1 for a loopback AH, an IPv4 one if there is one
 * (an IPv6 link-local GID may still be tentative, DAD running, right after
 * its netdev came up: IP drops packets to it); -ENOENT if none.
 */
static int roce_v2_ah_attr(struct ib_device *ibdev, struct rdma_ah_attr *attr)
{
	const struct ib_gid_attr *gattr;
	union ib_gid gid;
	int pass;
	u32 i;

	for (pass = 0; pass < 2; pass++) {
		/* Past the end of the table, the lookup fails with EINVAL. */
		for (i = 0; i < 4096; i++) {
			gattr = rdma_get_gid_attr(ibdev, 1, i);
			if (IS_ERR(gattr)) {
				if (PTR_ERR(gattr) == -EINVAL)
					break;
				continue;
			}
			if (gattr->gid_type == IB_GID_TYPE_ROCE_UDP_ENCAP &&
			    (pass || ipv6_addr_v4mapped((struct in6_addr *)gattr->gid.raw))) {
				memset(attr, 0, sizeof(*attr));
				attr->type = RDMA_AH_ATTR_TYPE_ROCE;
				rdma_ah_set_port_num(attr, 1);
				gid = gattr->gid;
				rdma_ah_set_grh(attr, &gid, 0, i, 64, 0);
				if (gattr->ndev)
					ether_addr_copy(attr->roce.dmac, gattr->ndev->dev_addr);
				rdma_put_gid_attr(gattr);
				return 0;
			}
			rdma_put_gid_attr(gattr);
		}
	}
	return -ENOENT;
}

static void context_checks(struct ib_device *ibdev)
{
	struct ib_cq_init_attr cq_attr = { .cqe = 16 };
	struct ctx_test *t;
	struct scatterlist sg;
	struct page *page;
	unsigned long flags;
	struct ib_ah *ah;
	int ret;

	t = kzalloc(sizeof(*t), GFP_KERNEL);
	page = alloc_page(GFP_KERNEL);
	if (!t || !page)
		goto out_free;
	t->pd = ib_alloc_pd(ibdev, 0);
	check(!IS_ERR(t->pd), "ib_alloc_pd for the context checks");
	if (IS_ERR(t->pd))
		goto out_free;
	ret = roce_v2_ah_attr(ibdev, &t->ah_attr);
	check(ret == 0, "found a RoCE v2 GID (%d)", ret);
	if (ret)
		goto out_pd;

	/* Process context, sleepable. */
	ah = rdma_create_ah(t->pd, &t->ah_attr, RDMA_CREATE_AH_SLEEPABLE);
	check(!IS_ERR(ah), "rdma_create_ah, sleepable (%ld)", PTR_ERR_OR_ZERO(ah));
	if (!IS_ERR(ah))
		check(rdma_destroy_ah_user(ah, RDMA_DESTROY_AH_SLEEPABLE, NULL) == 0,
		      "rdma_destroy_ah, sleepable");

	/* Interrupts disabled. */
	local_irq_save(flags);
	ret = ah_atomic(t);
	local_irq_restore(flags);
	check(ret == 0, "AH create and destroy with interrupts disabled (%d)", ret);

	/* Softirq: an AH, and a fast-registration mapping as blk-mq does. */
	t->mr = ib_alloc_mr(t->pd, IB_MR_TYPE_MEM_REG, 1);
	if (IS_ERR(t->mr))
		t->mr = NULL;
	sg_init_table(&sg, 1);
	sg_set_page(&sg, page, PAGE_SIZE, 0);
	t->sg = &sg;
	if (ib_dma_map_sg(ibdev, &sg, 1, DMA_BIDIRECTIONAL) != 1)
		t->mr = NULL;
	init_completion(&t->done);
	timer_setup(&t->timer, ctx_softirq, 0);
	mod_timer(&t->timer, jiffies + 1);
	wait_for_completion(&t->done);
	del_timer_sync(&t->timer);
	check(t->in_softirq, "timer callback ran in softirq");
	check(t->ah_ret == 0, "AH create and destroy in softirq (%d)", t->ah_ret);
	check(t->map_ret == 1, "ib_map_mr_sg in softirq maps 1 page (%d)", t->map_ret);
	if (t->mr) {
		ib_dma_unmap_sg(ibdev, &sg, 1, DMA_BIDIRECTIONAL);
		ib_dereg_mr(t->mr);
	}

	/* CQ: resized in process context, armed in hard irq. */
	t->cq = ib_create_cq(ibdev, NULL, NULL, NULL, &cq_attr);
	check(!IS_ERR(t->cq), "ib_create_cq (%ld)", PTR_ERR_OR_ZERO(t->cq));
	if (IS_ERR(t->cq))
		goto out_pd;
	ret = ib_resize_cq(t->cq, 64);
	check(ret == 0 && t->cq->cqe >= 64, "ib_resize_cq to 64 (%d, cqe %d)", ret, t->cq->cqe);
	ret = ib_req_notify_cq(t->cq, IB_CQ_NEXT_COMP);
	check(ret == 0, "ib_req_notify_cq in process context (%d)", ret);
	reinit_completion(&t->done);
	hrtimer_init(&t->hrtimer, CLOCK_MONOTONIC, HRTIMER_MODE_REL_HARD);
	t->hrtimer.function = ctx_hardirq;
	hrtimer_start(&t->hrtimer, ns_to_ktime(100 * NSEC_PER_USEC), HRTIMER_MODE_REL_HARD);
	wait_for_completion(&t->done);
	hrtimer_cancel(&t->hrtimer);
	check(t->in_hardirq, "hrtimer callback ran in hard irq");
	check(t->notify_ret == 0, "ib_req_notify_cq in hard irq, empty CQ (%d)", t->notify_ret);
	ret = ib_resize_cq(t->cq, 16);
	check(ret == 0, "ib_resize_cq back down after arming (%d)", ret);
	ib_destroy_cq(t->cq);
out_pd:
	ib_dealloc_pd(t->pd);
out_free:
	if (page)
		__free_page(page);
	kfree(t);
}

/* --- Kernel QPs moving data (a ULP's view of the data path) ------------ */

#define DT_LEN 8192

struct dt {
	struct ib_pd *pd;
	struct ib_cq *acq, *bcq;
	struct ib_qp *a, *b;
	u8 *abuf, *bbuf;
	u64 adma, bdma;
	struct ib_mr *mr;
	struct scatterlist sg;
};

/* One completion from @cq within two seconds; 0 if none came. */
static int dt_poll(struct ib_cq *cq, struct ib_wc *wc)
{
	unsigned long end = jiffies + 2 * HZ;

	memset(wc, 0, sizeof(*wc));
	do {
		if (ib_poll_cq(cq, 1, wc) == 1)
			return 1;
		usleep_range(200, 400);
	} while (time_before(jiffies, end));
	return 0;
}

static struct ib_qp *dt_qp(struct ib_pd *pd, struct ib_cq *cq)
{
	struct ib_qp_init_attr a = {
		.send_cq = cq, .recv_cq = cq, .qp_type = IB_QPT_RC,
		.sq_sig_type = IB_SIGNAL_REQ_WR,
		.cap = { .max_send_wr = 16, .max_recv_wr = 16, .max_send_sge = 2,
			 .max_recv_sge = 2, .max_inline_data = 64 },
	};

	return ib_create_qp(pd, &a);
}

/* Connects @qp to QP @dest with @timeout and @retry_cnt. */
static int dt_connect_timed(struct ib_qp *qp, u32 dest, const struct rdma_ah_attr *ah,
			    u8 timeout, u8 retry_cnt)
{
	struct ib_qp_attr a = {};
	int ret;

	a.qp_state = IB_QPS_INIT;
	a.port_num = 1;
	a.qp_access_flags = IB_ACCESS_LOCAL_WRITE | IB_ACCESS_REMOTE_WRITE |
			    IB_ACCESS_REMOTE_READ;
	ret = ib_modify_qp(qp, &a, IB_QP_STATE | IB_QP_PKEY_INDEX | IB_QP_PORT |
			   IB_QP_ACCESS_FLAGS);
	if (ret)
		return ret;
	memset(&a, 0, sizeof(a));
	a.qp_state = IB_QPS_RTR;
	a.path_mtu = IB_MTU_1024;
	a.dest_qp_num = dest;
	a.rq_psn = 100;
	a.max_dest_rd_atomic = 4;
	a.min_rnr_timer = 1;
	a.ah_attr = *ah;
	ret = ib_modify_qp(qp, &a, IB_QP_STATE | IB_QP_AV | IB_QP_PATH_MTU |
			   IB_QP_DEST_QPN | IB_QP_RQ_PSN | IB_QP_MAX_DEST_RD_ATOMIC |
			   IB_QP_MIN_RNR_TIMER);
	if (ret)
		return ret;
	memset(&a, 0, sizeof(a));
	a.qp_state = IB_QPS_RTS;
	a.sq_psn = 100;
	a.timeout = timeout;
	a.retry_cnt = retry_cnt;
	a.rnr_retry = 7;
	a.max_rd_atomic = 4;
	return ib_modify_qp(qp, &a, IB_QP_STATE | IB_QP_SQ_PSN | IB_QP_TIMEOUT |
			    IB_QP_RETRY_CNT | IB_QP_RNR_RETRY | IB_QP_MAX_QP_RD_ATOMIC);
}

static int dt_connect(struct ib_qp *qp, u32 dest, const struct rdma_ah_attr *ah)
{
	/* About 1 s, as rdma_cm sets: a loaded TCG guest stalls for longer than 67 ms. */
	return dt_connect_timed(qp, dest, ah, 18, 7);
}

static int dt_recv(struct dt *t, u64 wr_id, u32 len)
{
	struct ib_sge sge = { .addr = t->bdma, .length = len, .lkey = t->pd->local_dma_lkey };
	struct ib_recv_wr wr = { .wr_id = wr_id, .sg_list = &sge, .num_sge = 1 };

	return ib_post_recv(t->b, &wr, NULL);
}

/* Posts @wr on @qp and waits for its completion on @cq. */
static int dt_send(struct ib_qp *qp, struct ib_cq *cq, struct ib_send_wr *wr,
		   struct ib_wc *wc)
{
	int ret = ib_post_send(qp, wr, NULL);

	if (ret)
		return ret;
	return dt_poll(cq, wc) ? 0 : -ETIMEDOUT;
}

static void dt_pattern(u8 *p, u32 len, u8 seed)
{
	u32 i;

	for (i = 0; i < len; i++)
		p[i] = (u8)(i * 7 + seed);
}

static void data_steps(struct dt *t)
{
	struct ib_sge asge = { .addr = t->adma, .lkey = t->pd->local_dma_lkey };
	struct ib_send_wr swr = { .sg_list = &asge, .num_sge = 1,
				  .send_flags = IB_SEND_SIGNALED };
	struct ib_rdma_wr rwr = { .wr = swr };
	struct ib_reg_wr reg = { .wr = { .opcode = IB_WR_REG_MR,
					 .send_flags = IB_SEND_SIGNALED } };
	struct ib_send_wr inv = { .opcode = IB_WR_LOCAL_INV,
				  .send_flags = IB_SEND_SIGNALED };
	static const char msg[] = "inline data from a kernel stack buffer";
	struct ib_qp_attr err = { .qp_state = IB_QPS_ERR };
	struct ib_wc wc;
	u32 rkey;
	int ret, n;

	/* SEND of 4 KB (4 packets at MTU 1024) into a posted receive. */
	dt_pattern(t->abuf, DT_LEN, 1);
	memset(t->bbuf, 0, DT_LEN);
	ret = dt_recv(t, 11, DT_LEN);
	asge.length = 4096;
	swr.opcode = IB_WR_SEND;
	swr.wr_id = 1;
	ret = ret ?: dt_send(t->a, t->acq, &swr, &wc);
	check(ret == 0 && wc.status == IB_WC_SUCCESS && wc.opcode == IB_WC_SEND &&
	      wc.wr_id == 1 && wc.qp == t->a,
	      "kernel RC SEND 4 KB: sender's completion (%d, status %d)", ret, wc.status);
	n = dt_poll(t->bcq, &wc);
	check(n && wc.status == IB_WC_SUCCESS && wc.opcode == IB_WC_RECV &&
	      wc.wr_id == 11 && wc.byte_len == 4096 && wc.qp == t->b &&
	      !memcmp(t->abuf, t->bbuf, 4096),
	      "kernel RC SEND 4 KB: receive completion and data (status %d, len %u)",
	      wc.status, wc.byte_len);

	/* SEND with immediate, inline from the stack. */
	ret = dt_recv(t, 12, DT_LEN);
	asge.addr = (uintptr_t)msg;
	asge.length = sizeof(msg);
	swr.opcode = IB_WR_SEND_WITH_IMM;
	swr.ex.imm_data = cpu_to_be32(0x1234abcd);
	swr.send_flags = IB_SEND_SIGNALED | IB_SEND_INLINE;
	swr.wr_id = 2;
	ret = ret ?: dt_send(t->a, t->acq, &swr, &wc);
	check(ret == 0 && wc.status == IB_WC_SUCCESS, "inline SEND with immediate (%d, %d)",
	      ret, wc.status);
	n = dt_poll(t->bcq, &wc);
	check(n && wc.status == IB_WC_SUCCESS && (wc.wc_flags & IB_WC_WITH_IMM) &&
	      wc.ex.imm_data == cpu_to_be32(0x1234abcd) && wc.byte_len == sizeof(msg) &&
	      !memcmp(t->bbuf, msg, sizeof(msg)),
	      "inline SEND with immediate: data and immediate received");
	asge.addr = t->adma;
	swr.send_flags = IB_SEND_SIGNALED;

	/* Fast registration of b's buffer, then WRITE and READ through it. */
	t->mr = ib_alloc_mr(t->pd, IB_MR_TYPE_MEM_REG, DT_LEN / PAGE_SIZE);
	check(!IS_ERR(t->mr), "ib_alloc_mr for %d pages", DT_LEN / (int)PAGE_SIZE);
	if (IS_ERR(t->mr)) {
		t->mr = NULL;
		return;
	}
	sg_init_one(&t->sg, t->bbuf, DT_LEN);
	n = ib_dma_map_sg(t->a->device, &t->sg, 1, DMA_BIDIRECTIONAL);
	n = n == 1 ? ib_map_mr_sg(t->mr, &t->sg, 1, NULL, PAGE_SIZE) : -EIO;
	check(n == 1, "ib_map_mr_sg over the receive buffer (%d)", n);
	ib_update_fast_reg_key(t->mr, ib_inc_rkey(t->mr->rkey) & 0xff);
	reg.mr = t->mr;
	reg.key = t->mr->rkey;
	reg.access = IB_ACCESS_LOCAL_WRITE | IB_ACCESS_REMOTE_WRITE | IB_ACCESS_REMOTE_READ;
	reg.wr.wr_id = 3;
	ret = dt_send(t->b, t->bcq, &reg.wr, &wc);
	check(ret == 0 && wc.status == IB_WC_SUCCESS && wc.opcode == IB_WC_REG_MR,
	      "REG_MR work request completes (%d, status %d, opcode %d)", ret, wc.status,
	      wc.opcode);
	rkey = t->mr->rkey;

	dt_pattern(t->abuf, DT_LEN, 2);
	memset(t->bbuf, 0, DT_LEN);
	asge.length = DT_LEN;
	rwr.wr = swr;
	rwr.wr.opcode = IB_WR_RDMA_WRITE;
	rwr.wr.wr_id = 4;
	rwr.remote_addr = t->mr->iova;
	rwr.rkey = rkey;
	ret = dt_send(t->a, t->acq, &rwr.wr, &wc);
	check(ret == 0 && wc.status == IB_WC_SUCCESS && wc.opcode == IB_WC_RDMA_WRITE &&
	      !memcmp(t->abuf, t->bbuf, DT_LEN),
	      "RDMA WRITE 8 KB through the fast-registered rkey (%d, status %d)", ret,
	      wc.status);

	dt_pattern(t->bbuf, DT_LEN, 3);
	memset(t->abuf, 0, DT_LEN);
	rwr.wr.opcode = IB_WR_RDMA_READ;
	rwr.wr.wr_id = 5;
	ret = dt_send(t->a, t->acq, &rwr.wr, &wc);
	check(ret == 0 && wc.status == IB_WC_SUCCESS && wc.opcode == IB_WC_RDMA_READ &&
	      !memcmp(t->abuf, t->bbuf, DT_LEN),
	      "RDMA READ 8 KB through the fast-registered rkey (%d, status %d)", ret,
	      wc.status);

	/* SEND with invalidate: the receiver's MR is invalidated. */
	ret = dt_recv(t, 13, DT_LEN);
	asge.length = 64;
	swr.opcode = IB_WR_SEND_WITH_INV;
	swr.ex.invalidate_rkey = rkey;
	swr.wr_id = 6;
	ret = ret ?: dt_send(t->a, t->acq, &swr, &wc);
	check(ret == 0 && wc.status == IB_WC_SUCCESS, "SEND with invalidate completes (%d, %d)",
	      ret, wc.status);
	n = dt_poll(t->bcq, &wc);
	check(n && wc.status == IB_WC_SUCCESS && (wc.wc_flags & IB_WC_WITH_INVALIDATE) &&
	      wc.ex.invalidate_rkey == rkey,
	      "the receive reports the invalidated rkey (flags %#x)", wc.wc_flags);

	/*
	 * Registered again under a new key and at an address of the
	 * consumer's choosing: xprtrdma (frwr_map) puts its RPC's xid in the
	 * upper 32 bits of the iova ib_map_mr_sg set, keeping the low ones
	 * (the offset into the first page); its peer then addresses the MR
	 * there. Then invalidated locally.
	 */
	ib_update_fast_reg_key(t->mr, ib_inc_rkey(t->mr->rkey) & 0xff);
	t->mr->iova = (t->mr->iova & 0xffffffffULL) | (0x5a5a0001ULL << 32);
	reg.key = t->mr->rkey;
	reg.wr.wr_id = 7;
	ret = dt_send(t->b, t->bcq, &reg.wr, &wc);
	check(ret == 0 && wc.status == IB_WC_SUCCESS,
	      "REG_MR again under a new key, at an iova whose upper 32 bits the consumer chose "
	      "(%d, %d)", ret, wc.status);
	dt_pattern(t->abuf, DT_LEN, 4);
	memset(t->bbuf, 0, DT_LEN);
	rwr.wr.opcode = IB_WR_RDMA_WRITE;
	rwr.wr.wr_id = 71;
	rwr.remote_addr = t->mr->iova + 100;
	rwr.rkey = t->mr->rkey;
	asge.length = DT_LEN - 100;
	ret = dt_send(t->a, t->acq, &rwr.wr, &wc);
	check(ret == 0 && wc.status == IB_WC_SUCCESS &&
	      !memcmp(t->abuf, t->bbuf + 100, DT_LEN - 100) && !t->bbuf[99],
	      "RDMA WRITE at that iova + 100 lands at byte 100 of the buffer (%d, status %d)",
	      ret, wc.status);
	asge.length = DT_LEN;
	inv.ex.invalidate_rkey = t->mr->rkey;
	inv.wr_id = 8;
	ret = dt_send(t->b, t->bcq, &inv, &wc);
	check(ret == 0 && wc.status == IB_WC_SUCCESS && wc.opcode == IB_WC_LOCAL_INV,
	      "LOCAL_INV completes (%d, status %d, opcode %d)", ret, wc.status, wc.opcode);

	/*
	 * WRITE through the invalidated key, within the MR's range (so that
	 * nothing but the invalidation can refuse it: the whole range is
	 * checked at the first packet): remote access error.
	 */
	rwr.wr.opcode = IB_WR_RDMA_WRITE;
	rwr.wr.wr_id = 9;
	rwr.remote_addr = t->mr->iova;
	rwr.rkey = t->mr->rkey;
	ret = dt_send(t->a, t->acq, &rwr.wr, &wc);
	check(ret == 0 && wc.status == IB_WC_REM_ACCESS_ERR,
	      "RDMA WRITE through an invalidated rkey fails with REM_ACCESS_ERR (%d, %d)",
	      ret, wc.status);

	/* In the error state, what is posted completes flushed. */
	ret = ib_modify_qp(t->b, &err, IB_QP_STATE);
	ret = ret ?: dt_recv(t, 14, 64);
	n = ret ? 0 : dt_poll(t->bcq, &wc);
	check(n && wc.wr_id == 14 && wc.status == IB_WC_WR_FLUSH_ERR,
	      "a receive posted in the error state is flushed (%d, status %d)", ret, wc.status);
	swr.opcode = IB_WR_SEND;
	swr.wr_id = 10;
	ret = ib_modify_qp(t->a, &err, IB_QP_STATE);
	ret = ret ?: dt_send(t->a, t->acq, &swr, &wc);
	check(ret == 0 && wc.wr_id == 10 && wc.status == IB_WC_WR_FLUSH_ERR,
	      "a send posted in the error state is flushed (%d, status %d)", ret, wc.status);
}

/*
 * A failed local operation fails its QP (IBTA 10.3.1; rxe does the same):
 * a REG_MR of more bytes than its MR has mapped (a ULP's bad input)
 * completes LOC_PROT_ERR, the QP is in the error state, and a SEND posted
 * after it completes flushed.
 */
static void local_failure_checks(struct dt *t, const struct rdma_ah_attr *ah)
{
	struct ib_reg_wr reg = { .wr = { .opcode = IB_WR_REG_MR, .wr_id = 21,
					 .send_flags = IB_SEND_SIGNALED } };
	struct ib_sge sge = { .addr = t->adma, .length = 64, .lkey = t->pd->local_dma_lkey };
	struct ib_send_wr swr = { .opcode = IB_WR_SEND, .wr_id = 22, .sg_list = &sge,
				  .num_sge = 1, .send_flags = IB_SEND_SIGNALED };
	struct ib_qp_init_attr init;
	struct ib_qp_attr attr = {};
	struct scatterlist sg;
	struct ib_qp *q;
	struct ib_mr *mr;
	struct ib_wc wc;
	int ret, n, mapped = 0;

	q = dt_qp(t->pd, t->acq);
	mr = ib_alloc_mr(t->pd, IB_MR_TYPE_MEM_REG, 2);
	if (IS_ERR(q) || IS_ERR(mr)) {
		check(false, "a QP and an MR for the local failure checks");
		goto out;
	}
	sg_init_one(&sg, t->bbuf, PAGE_SIZE);
	mapped = ib_dma_map_sg(q->device, &sg, 1, DMA_BIDIRECTIONAL);
	n = mapped == 1 ? ib_map_mr_sg(mr, &sg, 1, NULL, PAGE_SIZE) : -EIO;
	ret = n == 1 ? dt_connect(q, q->qp_num, ah) : -EIO;
	/* One page mapped; the registration claims two. */
	mr->length = 2 * PAGE_SIZE;
	reg.mr = mr;
	reg.key = mr->rkey;
	reg.access = IB_ACCESS_LOCAL_WRITE;
	ret = ret ?: dt_send(q, t->acq, &reg.wr, &wc);
	check(ret == 0 && wc.wr_id == 21 && wc.status == IB_WC_LOC_PROT_ERR,
	      "local failure: REG_MR past the pages its MR has mapped fails LOC_PROT_ERR (%d, status %d)", ret,
	      wc.status);
	ret = ret ?: ib_query_qp(q, &attr, IB_QP_STATE, &init);
	check(ret == 0 && attr.qp_state == IB_QPS_ERR,
	      "local failure: the failed REG_MR put its QP in the error state (%d, state %d)", ret,
	      attr.qp_state);
	ret = ret ?: dt_send(q, t->acq, &swr, &wc);
	check(ret == 0 && wc.wr_id == 22 && wc.status == IB_WC_WR_FLUSH_ERR,
	      "local failure: a SEND posted after it completes flushed (%d, status %d)", ret, wc.status);
	if (mapped == 1)
		ib_dma_unmap_sg(q->device, &sg, 1, DMA_BIDIRECTIONAL);
out:
	if (!IS_ERR(q))
		ib_destroy_qp(q);
	if (!IS_ERR(mr))
		ib_dereg_mr(mr);
}

/*
 * A ULP's bad input gets the IBTA status and writes nothing: an RDMA WRITE
 * of two pages through a fast-registration MR of one (its first page in
 * bounds) fails REM_ACCESS_ERR with not a byte of the target changed (the
 * responder checks the RETH's whole range at the first packet); a
 * LOCAL_INV of another PD's MR fails LOC_PROT_ERR.
 */
static void bad_input_checks(struct dt *t, const struct rdma_ah_attr *ah)
{
	struct ib_reg_wr reg = { .wr = { .opcode = IB_WR_REG_MR, .wr_id = 31,
					 .send_flags = IB_SEND_SIGNALED } };
	struct ib_sge sge = { .addr = t->adma, .length = 2 * PAGE_SIZE,
			      .lkey = t->pd->local_dma_lkey };
	struct ib_rdma_wr wr = { .wr = { .opcode = IB_WR_RDMA_WRITE, .wr_id = 32, .sg_list = &sge,
					 .num_sge = 1, .send_flags = IB_SEND_SIGNALED } };
	struct ib_send_wr inv = { .opcode = IB_WR_LOCAL_INV, .wr_id = 33,
				  .send_flags = IB_SEND_SIGNALED };
	struct ib_pd *pd2 = ib_alloc_pd(t->pd->device, 0);
	struct ib_mr *mr = NULL, *mr2 = NULL;
	struct ib_qp *q = NULL, *qb = NULL, *q2 = NULL;
	struct scatterlist sg;
	struct ib_wc wc;
	int ret, n, mapped = 0;

	if (IS_ERR(pd2)) {
		check(false, "a second PD for the bad input checks");
		return;
	}
	/* A writes, B's MR is the target. */
	q = dt_qp(t->pd, t->acq);
	qb = dt_qp(t->pd, t->bcq);
	mr = ib_alloc_mr(t->pd, IB_MR_TYPE_MEM_REG, 1);
	mr2 = ib_alloc_mr(pd2, IB_MR_TYPE_MEM_REG, 1);
	if (IS_ERR(q) || IS_ERR(qb) || IS_ERR(mr) || IS_ERR(mr2)) {
		check(false, "QPs and MRs for the bad input checks");
		goto out;
	}
	sg_init_one(&sg, t->bbuf, PAGE_SIZE);
	mapped = ib_dma_map_sg(q->device, &sg, 1, DMA_BIDIRECTIONAL);
	n = mapped == 1 ? ib_map_mr_sg(mr, &sg, 1, NULL, PAGE_SIZE) : -EIO;
	ret = n == 1 ? dt_connect(q, qb->qp_num, ah) : -EIO;
	ret = ret ?: dt_connect(qb, q->qp_num, ah);
	reg.mr = mr;
	reg.key = mr->rkey;
	reg.access = IB_ACCESS_LOCAL_WRITE | IB_ACCESS_REMOTE_WRITE;
	ret = ret ?: dt_send(qb, t->bcq, &reg.wr, &wc);
	check(ret == 0 && wc.status == IB_WC_SUCCESS,
	      "bad input: REG_MR of one page for remote writes (%d, status %d)", ret, wc.status);
	dt_pattern(t->abuf, 2 * PAGE_SIZE, 9);
	memset(t->bbuf, 0, DT_LEN);
	wr.remote_addr = mr->iova;
	wr.rkey = mr->rkey;
	ret = ret ?: dt_send(q, t->acq, &wr.wr, &wc);
	check(ret == 0 && wc.wr_id == 32 && wc.status == IB_WC_REM_ACCESS_ERR &&
	      !memchr_inv(t->bbuf, 0, DT_LEN),
	      "bad input: an RDMA WRITE of 2 pages through a 1-page MR fails REM_ACCESS_ERR, "
	      "nothing written (%d, status %d, first byte changed at %td)", ret, wc.status,
	      memchr_inv(t->bbuf, 0, DT_LEN) ? (u8 *)memchr_inv(t->bbuf, 0, DT_LEN) - t->bbuf : -1);
	q2 = dt_qp(t->pd, t->acq);
	ret = IS_ERR(q2) ? PTR_ERR(q2) : dt_connect(q2, q2->qp_num, ah);
	inv.ex.invalidate_rkey = mr2->rkey;
	ret = ret ?: dt_send(q2, t->acq, &inv, &wc);
	check(ret == 0 && wc.wr_id == 33 && wc.status == IB_WC_LOC_PROT_ERR,
	      "bad input: LOCAL_INV of another PD's MR fails LOC_PROT_ERR (%d, status %d)", ret,
	      wc.status);
	if (mapped == 1)
		ib_dma_unmap_sg(q->device, &sg, 1, DMA_BIDIRECTIONAL);
out:
	if (!IS_ERR_OR_NULL(q2))
		ib_destroy_qp(q2);
	if (!IS_ERR_OR_NULL(qb))
		ib_destroy_qp(qb);
	if (!IS_ERR_OR_NULL(q))
		ib_destroy_qp(q);
	if (!IS_ERR_OR_NULL(mr))
		ib_dereg_mr(mr);
	if (!IS_ERR_OR_NULL(mr2))
		ib_dereg_mr(mr2);
	ib_dealloc_pd(pd2);
}

/*
 * ib_drain_qp of a QP that reached RTR but not RTS (rdma_cm's accept
 * moves it to RTR, then RTS, and a ULP drains it if the second step
 * fails): in the error state the drain's WR must complete flushed, though
 * the QP never had a send side.
 */
static void rtr_error_checks(struct dt *t, const struct rdma_ah_attr *ah)
{
	struct ib_sge sge = { .addr = t->adma, .length = 64, .lkey = t->pd->local_dma_lkey };
	struct ib_send_wr swr = { .opcode = IB_WR_SEND, .wr_id = 31, .sg_list = &sge,
				  .num_sge = 1, .send_flags = IB_SEND_SIGNALED };
	struct ib_qp_attr a = {};
	struct ib_qp *q = dt_qp(t->pd, t->acq);
	struct ib_wc wc;
	int ret;

	if (IS_ERR(q)) {
		check(false, "a QP for the RTR-to-error check");
		return;
	}
	a.qp_state = IB_QPS_INIT;
	a.port_num = 1;
	ret = ib_modify_qp(q, &a, IB_QP_STATE | IB_QP_PKEY_INDEX | IB_QP_PORT |
			   IB_QP_ACCESS_FLAGS);
	memset(&a, 0, sizeof(a));
	a.qp_state = IB_QPS_RTR;
	a.path_mtu = IB_MTU_1024;
	a.dest_qp_num = q->qp_num;
	a.rq_psn = 1;
	a.max_dest_rd_atomic = 1;
	a.min_rnr_timer = 1;
	a.ah_attr = *ah;
	ret = ret ?: ib_modify_qp(q, &a, IB_QP_STATE | IB_QP_AV | IB_QP_PATH_MTU |
				  IB_QP_DEST_QPN | IB_QP_RQ_PSN | IB_QP_MAX_DEST_RD_ATOMIC |
				  IB_QP_MIN_RNR_TIMER);
	memset(&a, 0, sizeof(a));
	a.qp_state = IB_QPS_ERR;
	ret = ret ?: ib_modify_qp(q, &a, IB_QP_STATE);
	ret = ret ?: dt_send(q, t->acq, &swr, &wc);
	check(ret == 0 && wc.wr_id == 31 && wc.status == IB_WC_WR_FLUSH_ERR,
	      "a SEND posted to a QP moved from RTR to error completes flushed (ib_drain_qp) "
	      "(%d, status %d)", ret, wc.status);
	ib_destroy_qp(q);
}

static void data_checks(struct ib_device *ibdev)
{
	struct rdma_ah_attr ah;
	struct dt t = {};
	int ret;

	t.abuf = kmalloc(DT_LEN, GFP_KERNEL);
	t.bbuf = kmalloc(DT_LEN, GFP_KERNEL);
	t.pd = ib_alloc_pd(ibdev, 0);
	if (!t.abuf || !t.bbuf || IS_ERR(t.pd)) {
		check(false, "allocations for the data checks");
		goto out;
	}
	t.acq = ib_alloc_cq(ibdev, NULL, 32, 0, IB_POLL_DIRECT);
	t.bcq = ib_alloc_cq(ibdev, NULL, 32, 0, IB_POLL_DIRECT);
	if (IS_ERR(t.acq) || IS_ERR(t.bcq)) {
		check(false, "ib_alloc_cq for the data checks");
		goto out;
	}
	t.a = dt_qp(t.pd, t.acq);
	t.b = dt_qp(t.pd, t.bcq);
	check(!IS_ERR(t.a) && !IS_ERR(t.b), "two kernel RC QPs");
	if (IS_ERR(t.a) || IS_ERR(t.b))
		goto out;
	ret = roce_v2_ah_attr(ibdev, &ah);
	ret = ret ?: dt_connect(t.a, t.b->qp_num, &ah);
	ret = ret ?: dt_connect(t.b, t.a->qp_num, &ah);
	check(ret == 0, "kernel RC QPs connected to each other, loopback (%d)", ret);
	if (ret)
		goto out;
	t.adma = ib_dma_map_single(ibdev, t.abuf, DT_LEN, DMA_BIDIRECTIONAL);
	t.bdma = ib_dma_map_single(ibdev, t.bbuf, DT_LEN, DMA_BIDIRECTIONAL);
	data_steps(&t);
	local_failure_checks(&t, &ah);
	bad_input_checks(&t, &ah);
	rtr_error_checks(&t, &ah);
	if (t.mr) {
		ib_dma_unmap_sg(ibdev, &t.sg, 1, DMA_BIDIRECTIONAL);
		ib_dereg_mr(t.mr);
	}
	ib_dma_unmap_single(ibdev, t.adma, DT_LEN, DMA_BIDIRECTIONAL);
	ib_dma_unmap_single(ibdev, t.bdma, DT_LEN, DMA_BIDIRECTIONAL);
out:
	if (!IS_ERR_OR_NULL(t.a))
		ib_destroy_qp(t.a);
	if (!IS_ERR_OR_NULL(t.b))
		ib_destroy_qp(t.b);
	if (!IS_ERR_OR_NULL(t.acq))
		ib_free_cq(t.acq);
	if (!IS_ERR_OR_NULL(t.bcq))
		ib_free_cq(t.bcq);
	if (!IS_ERR_OR_NULL(t.pd))
		ib_dealloc_pd(t.pd);
	kfree(t.abuf);
	kfree(t.bbuf);
}

/* --- XUD: rxud's driver-defined QP type ----------------------------------- */

/*
 * rxud's XUD QP (Documentation/xud.rst, "Creating one") as a kernel consumer
 * makes it (rxud_kernel.h): IB_QPT_DRIVER with the first driver-reserved
 * creation flag, UD's states and attributes plus RC's retransmission ones,
 * SENDs addressed as UD's (ib_ud_wr), RDMA WRITEs as struct
 * rxud_xud_rdma_wr. rxud only (xud=0 elsewhere). The QP sends to itself
 * (through the device's UDP socket and back): a SEND, whose receive
 * completes with 40 bytes of GRH and the payload; an RDMA WRITE and a WRITE
 * with immediate (which claims a receive) through the PD's global rkey; a
 * WRITE with a wrong rkey, which fails IB_WC_REM_ACCESS_ERR and leaves the
 * QP serving.
 */
/* The loopback SEND: 40 bytes of GRH and 3056 of payload fill the receive. */
#define XUD_KLEN 3096
/* The buffer: what is sent, the receive, the WRITEs' target. */
#define XUD_KBUF (3 * XUD_KLEN)

/* Posts @w (an RDMA WRITE on the XUD QP) and polls for its completion
 * and, with @recv_id, that receive's: 0 when they came, with their status
 * in @ws and @wr. */
static int xud_write(struct ib_qp *qp, struct ib_cq *cq, struct rxud_xud_rdma_wr *w,
		     u64 recv_id, struct ib_wc *ws, struct ib_wc *wr)
{
	const struct ib_send_wr *bad;
	bool send = false, recv = !recv_id;
	struct ib_wc wc;
	int ret = ib_post_send(qp, &w->ud.wr, &bad);

	for (int i = 0; i < 2 && !ret && !(send && recv) && dt_poll(cq, &wc); i++) {
		if (wc.wr_id == w->ud.wr.wr_id) {
			*ws = wc;
			send = true;
		} else if (recv_id && wc.wr_id == recv_id) {
			*wr = wc;
			recv = true;
		}
	}
	return ret ?: (send && recv ? 0 : -ETIMEDOUT);
}

static void xud_checks(struct ib_device *ibdev)
{
	struct ib_qp_init_attr qa = {
		.qp_type = IB_QPT_DRIVER,
		.create_flags = RXUD_QP_CREATE_XUD,
		.sq_sig_type = IB_SIGNAL_ALL_WR,
		.cap = { .max_send_wr = 4, .max_recv_wr = 4, .max_send_sge = 1,
			 .max_recv_sge = 1 },
	};
	struct ib_qp_init_attr qia = {};
	struct ib_qp_attr a = {};
	struct rdma_ah_attr ah_attr;
	struct ib_ud_wr wr = {};
	const struct ib_send_wr *bad;
	struct ib_ah *ah = NULL;
	bool got_send, got_recv;
	struct ib_sge sge;
	u8 *buf = NULL;
	u64 dma = 0;
	struct ib_qp *qp, *bad_qp;
	struct ib_cq *cq;
	struct ib_pd *pd;
	struct ib_wc wc;
	int ret;

	/* Its global rkey lets the QP write into the kernel buffer below. */
	pd = ib_alloc_pd(ibdev, IB_PD_UNSAFE_GLOBAL_RKEY);
	if (IS_ERR(pd)) {
		check(false, "ib_alloc_pd for XUD (%ld)", PTR_ERR(pd));
		return;
	}
	cq = ib_alloc_cq(ibdev, NULL, 16, 0, IB_POLL_DIRECT);
	if (IS_ERR(cq)) {
		check(false, "ib_alloc_cq for XUD (%ld)", PTR_ERR(cq));
		ib_dealloc_pd(pd);
		return;
	}
	qa.send_cq = cq;
	qa.recv_cq = cq;
	qa.create_flags = 0;
	bad_qp = ib_create_qp(pd, &qa);
	check_err_ptr(bad_qp, -EINVAL, "ib_create_qp of IB_QPT_DRIVER without the XUD flag");
	if (!IS_ERR(bad_qp))
		ib_destroy_qp(bad_qp);
	qa.qp_type = IB_QPT_UD;
	qa.create_flags = RXUD_QP_CREATE_XUD;
	bad_qp = ib_create_qp(pd, &qa);
	check_err_ptr(bad_qp, -EINVAL, "ib_create_qp of a UD QP with the XUD flag");
	if (!IS_ERR(bad_qp))
		ib_destroy_qp(bad_qp);
	qa.qp_type = IB_QPT_DRIVER;
	qp = ib_create_qp(pd, &qa);
	check(!IS_ERR(qp), "ib_create_qp of an XUD QP (IB_QPT_DRIVER, IB_QP_CREATE_RESERVED_START) "
	      "(%ld)", IS_ERR(qp) ? PTR_ERR(qp) : 0L);
	if (IS_ERR(qp))
		goto out;
	ret = ib_query_qp(qp, &a, IB_QP_STATE, &qia);
	check(!ret && qia.qp_type == IB_QPT_DRIVER && a.qp_state == IB_QPS_RESET &&
	      a.timeout == 14 && a.retry_cnt == 7 && a.rnr_retry == 7 && a.min_rnr_timer == 12,
	      "ib_query_qp of the XUD QP: IB_QPT_DRIVER, RESET, timeout 14, retry_cnt 7, "
	      "rnr_retry 7, min_rnr_timer 12 (%d: type %d, state %d, %u %u %u %u)", ret,
	      qia.qp_type, a.qp_state, a.timeout, a.retry_cnt, a.rnr_retry, a.min_rnr_timer);
	memset(&a, 0, sizeof(a));
	a.qp_state = IB_QPS_INIT;
	a.port_num = 1;
	a.qkey = 0x11111111;
	ret = ib_modify_qp(qp, &a, IB_QP_STATE | IB_QP_PKEY_INDEX | IB_QP_PORT | IB_QP_QKEY);
	if (!ret) {
		a.qp_state = IB_QPS_RTR;
		a.min_rnr_timer = 4;
		ret = ib_modify_qp(qp, &a, IB_QP_STATE | IB_QP_MIN_RNR_TIMER);
	}
	if (!ret) {
		a.qp_state = IB_QPS_RTS;
		a.sq_psn = 0;
		a.timeout = 16;
		ret = ib_modify_qp(qp, &a, IB_QP_STATE | IB_QP_SQ_PSN | IB_QP_TIMEOUT);
	}
	check(ret == 0, "the XUD QP to RTS with UD's attributes, min_rnr_timer and timeout (%d)",
	      ret);
	if (ret)
		goto out;
	ret = roce_v2_ah_attr(ibdev, &ah_attr);
	ah = ret ? ERR_PTR(ret) : rdma_create_ah(pd, &ah_attr, RDMA_CREATE_AH_SLEEPABLE);
	check(!IS_ERR(ah), "an AH for the XUD send (%ld)", IS_ERR(ah) ? PTR_ERR(ah) : 0L);
	if (IS_ERR(ah)) {
		ah = NULL;
		goto out;
	}
	wr.wr.opcode = IB_WR_RDMA_READ;
	wr.wr.wr_id = 1;
	wr.ah = ah;
	wr.remote_qpn = qp->qp_num;
	wr.remote_qkey = 0x11111111;
	ret = ib_post_send(qp, &wr.wr, &bad);
	check(ret == -EINVAL, "ib_post_send of an RDMA READ to the XUD QP fails with -EINVAL "
	      "(XUD has SEND and WRITE) (%d)", ret);
	buf = kzalloc(XUD_KBUF, GFP_KERNEL);
	dma = buf ? ib_dma_map_single(ibdev, buf, XUD_KBUF, DMA_BIDIRECTIONAL) : 0;
	if (!buf || ib_dma_mapping_error(ibdev, dma)) {
		check(false, "a DMA buffer for the XUD SEND");
		kfree(buf);
		buf = NULL;
		goto out;
	}
	for (int i = 0; i < XUD_KLEN - 40; i++)
		buf[i] = (u8)(i * 7 + 3);
	{
		struct ib_sge rsge = { .addr = dma + XUD_KLEN, .length = XUD_KLEN,
				       .lkey = pd->local_dma_lkey };
		struct ib_recv_wr rwr = { .wr_id = 3, .sg_list = &rsge, .num_sge = 1 };

		ret = ib_post_recv(qp, &rwr, NULL);
		check(ret == 0, "ib_post_recv on the XUD QP (%d)", ret);
	}
	sge.addr = dma;
	sge.length = XUD_KLEN - 40;
	sge.lkey = pd->local_dma_lkey;
	wr.wr.opcode = IB_WR_SEND;
	wr.wr.wr_id = 2;
	wr.wr.sg_list = &sge;
	wr.wr.num_sge = 1;
	ret = ib_post_send(qp, &wr.wr, &bad);
	check(ret == 0, "ib_post_send of a SEND (ib_ud_wr) from the XUD QP to itself (%d)", ret);
	got_send = got_recv = false;
	for (int i = 0; i < 2 && !ret && dt_poll(cq, &wc); i++) {
		if (wc.wr_id == 2)
			got_send = wc.status == IB_WC_SUCCESS && wc.opcode == IB_WC_SEND;
		if (wc.wr_id == 3)
			got_recv = wc.status == IB_WC_SUCCESS && wc.opcode == IB_WC_RECV &&
				   wc.byte_len == XUD_KLEN && (wc.wc_flags & IB_WC_GRH) &&
				   wc.src_qp == qp->qp_num;
	}
	check(got_send, "the SEND completes with success at the sender");
	ib_dma_sync_single_for_cpu(ibdev, dma, XUD_KBUF, DMA_BIDIRECTIONAL);
	check(got_recv && !memcmp(buf + XUD_KLEN + 40, buf, XUD_KLEN - 40),
	      "the receive completes once: byte_len 40 + %d, IB_WC_GRH, src_qp, the bytes sent",
	      XUD_KLEN - 40);
	check(!dt_poll(cq, &wc), "no other completion (no duplicate delivery)");
	{
		struct rxud_xud_rdma_wr w = { .ud = wr };
		struct ib_wc ws = {}, wrc = {};
		struct ib_sge rsge = { .addr = dma + XUD_KLEN, .length = XUD_KLEN,
				       .lkey = pd->local_dma_lkey };
		struct ib_recv_wr rwr = { .wr_id = 7, .sg_list = &rsge, .num_sge = 1 };
		u8 *target = buf + 2 * XUD_KLEN;

		w.ud.wr.opcode = IB_WR_RDMA_WRITE;
		w.ud.wr.wr_id = 4;
		w.remote_addr = dma + 2 * XUD_KLEN;
		w.rkey = pd->unsafe_global_rkey;
		ret = xud_write(qp, cq, &w, 0, &ws, NULL);
		ib_dma_sync_single_for_cpu(ibdev, dma, XUD_KBUF, DMA_BIDIRECTIONAL);
		check(!ret && ws.status == IB_WC_SUCCESS && ws.opcode == IB_WC_RDMA_WRITE &&
		      !memcmp(target, buf, XUD_KLEN - 40),
		      "an RDMA WRITE of %d bytes (struct rxud_xud_rdma_wr) through the global "
		      "rkey: success, the bytes in place (%d, status %d)", XUD_KLEN - 40, ret,
		      ws.status);
		for (int i = 0; i < XUD_KLEN - 40; i++)
			buf[i] = (u8)(i * 5 + 1);
		ib_dma_sync_single_for_device(ibdev, dma, XUD_KBUF, DMA_BIDIRECTIONAL);
		ret = ib_post_recv(qp, &rwr, NULL);
		w.ud.wr.opcode = IB_WR_RDMA_WRITE_WITH_IMM;
		w.ud.wr.ex.imm_data = cpu_to_be32(0x5eedf00d);
		w.ud.wr.wr_id = 5;
		ret = ret ?: xud_write(qp, cq, &w, 7, &ws, &wrc);
		ib_dma_sync_single_for_cpu(ibdev, dma, XUD_KBUF, DMA_BIDIRECTIONAL);
		check(!ret && ws.status == IB_WC_SUCCESS && wrc.status == IB_WC_SUCCESS &&
		      wrc.opcode == IB_WC_RECV_RDMA_WITH_IMM && (wrc.wc_flags & IB_WC_WITH_IMM) &&
		      wrc.ex.imm_data == cpu_to_be32(0x5eedf00d) && !memcmp(target, buf, XUD_KLEN - 40),
		      "an RDMA WRITE with immediate: success, the bytes in place, one receive "
		      "completes with the immediate (%d, status %d/%d, opcode %d)", ret, ws.status,
		      wrc.status, wrc.opcode);
		w.ud.wr.opcode = IB_WR_RDMA_WRITE;
		w.ud.wr.wr_id = 6;
		w.rkey = pd->unsafe_global_rkey ^ 0x80;
		ret = xud_write(qp, cq, &w, 0, &ws, NULL);
		check(!ret && ws.status == IB_WC_REM_ACCESS_ERR,
		      "an RDMA WRITE with a wrong rkey fails IB_WC_REM_ACCESS_ERR (%d, status %d)",
		      ret, ws.status);
		w.ud.wr.wr_id = 8;
		w.rkey = pd->unsafe_global_rkey;
		ret = xud_write(qp, cq, &w, 0, &ws, NULL);
		check(!ret && ws.status == IB_WC_SUCCESS && !dt_poll(cq, &wc),
		      "then the QP goes on: another WRITE succeeds, nothing else completes (%d, "
		      "status %d)", ret, ws.status);
	}
	ib_dma_unmap_single(ibdev, dma, XUD_KBUF, DMA_BIDIRECTIONAL);
out:
	kfree(buf);
	if (!IS_ERR(qp))
		check(ib_destroy_qp(qp) == 0, "ib_destroy_qp of the XUD QP");
	if (ah)
		rdma_destroy_ah(ah, RDMA_DESTROY_AH_SLEEPABLE);
	ib_free_cq(cq);
	ib_dealloc_pd(pd);
}

/* --- ib_drain_qp on a QP whose receives come from an SRQ ---------------- */

static atomic_t last_wqe_events;

static void srq_qp_event(struct ib_event *ev, void *ctx)
{
	if (ev->event == IB_EVENT_QP_LAST_WQE_REACHED)
		atomic_inc(&last_wqe_events);
}

/*
 * ib_drain_qp (as nvme-rdma, iSER and the other ULPs call it before
 * destroying a QP) moves a QP with an SRQ to the error state and waits for
 * IB_EVENT_QP_LAST_WQE_REACHED before polling its CQ: up to 60 s if the
 * provider never raises it. The QP need not be connected.
 */
static void srq_drain_checks(struct ib_device *ibdev)
{
	struct ib_srq_init_attr sa = {
		.attr = { .max_wr = 8, .max_sge = 1 },
		.srq_type = IB_SRQT_BASIC,
	};
	struct ib_qp_init_attr qa = {
		.event_handler = srq_qp_event,
		.qp_type = IB_QPT_RC,
		.sq_sig_type = IB_SIGNAL_REQ_WR,
		.cap = { .max_send_wr = 4, .max_send_sge = 1 },
	};
	struct ib_qp_attr init = {};
	struct ib_srq *srq = NULL;
	struct ib_qp *qp = NULL;
	struct ib_cq *cq = NULL;
	struct ib_pd *pd;
	unsigned long t0;
	int ret;

	pd = ib_alloc_pd(ibdev, 0);
	if (IS_ERR(pd)) {
		check(false, "ib_alloc_pd for the SRQ drain (%ld)", PTR_ERR(pd));
		return;
	}
	cq = ib_alloc_cq(ibdev, NULL, 16, 0, IB_POLL_DIRECT);
	srq = ib_create_srq(pd, &sa);
	check(!IS_ERR(cq) && !IS_ERR(srq), "a CQ and an SRQ for the drain (%ld, %ld)",
	      IS_ERR(cq) ? PTR_ERR(cq) : 0L, IS_ERR(srq) ? PTR_ERR(srq) : 0L);
	if (IS_ERR(cq) || IS_ERR(srq))
		goto out;
	qa.send_cq = cq;
	qa.recv_cq = cq;
	qa.srq = srq;
	qp = ib_create_qp(pd, &qa);
	check(!IS_ERR(qp), "an RC QP on the SRQ (%ld)", IS_ERR(qp) ? PTR_ERR(qp) : 0L);
	if (IS_ERR(qp))
		goto out;
	/* RESET -> ERROR is not a transition; INIT -> ERROR is. */
	init.qp_state = IB_QPS_INIT;
	init.port_num = 1;
	ret = ib_modify_qp(qp, &init, IB_QP_STATE | IB_QP_PKEY_INDEX | IB_QP_PORT |
			   IB_QP_ACCESS_FLAGS);
	check(ret == 0, "the QP on the SRQ to INIT (%d)", ret);
	if (ret)
		goto out;
	atomic_set(&last_wqe_events, 0);
	t0 = jiffies;
	ib_drain_qp(qp);
	check(atomic_read(&last_wqe_events) >= 1,
	      "ib_drain_qp of a QP on an SRQ: IB_EVENT_QP_LAST_WQE_REACHED came (%d, drain took %u ms)",
	      atomic_read(&last_wqe_events), jiffies_to_msecs(jiffies - t0));
out:
	if (!IS_ERR_OR_NULL(qp))
		ib_destroy_qp(qp);
	if (!IS_ERR_OR_NULL(srq))
		ib_destroy_srq(srq);
	if (!IS_ERR_OR_NULL(cq))
		ib_free_cq(cq);
	ib_dealloc_pd(pd);
}

/* --- Completion handlers that poll and post (krping-style) --------------- */

/*
 * A kernel consumer's completion handler (ib_create_cq's, as krping's) may
 * re-arm its CQ, poll it and post to the same QP from inside the handler,
 * in whatever context the driver calls it. rxud must therefore call
 * handlers with none of its own locks held: under the QP's lock the post
 * takes it again and the CPU spins for good. A spinning CPU is the whole
 * one-vCPU test guest, so each handler first looks at the locks lockdep
 * says its context holds (those taken in the handler's own irq context: a
 * softirq run on a process's stack does not hold the process's mutexes): a
 * lock of rxud's (lock classes named "rxud:...") is recorded and the
 * handler returns without polling or posting, so that the check fails
 * cleanly, by name, instead of freezing the guest (lockdep must still be
 * on: after its first report it tracks no more locks, which is why the
 * mutant lane runs its lockdep mutants first, and why handler_checks
 * refuses to run without it). lockcheck=0 skips that
 * look, to see the deadlock itself. rxud only: rxe (6.12) calls handlers
 * under its CQ lock, which its poll_cq and req_notify_cq take.
 *
 * Handlers arm first, then poll (as krping does), so a completion written
 * while one polls raises another event, run nested when it comes from the
 * handler's own post. The checks: ping-pongs of HP_ROUNDS round trips
 * driven entirely from handlers, RC, UD and XUD (receive completions post
 * the answer, the doorbell path and ACKs complete the sends); an RC QP
 * moved to the error state whose handler posts more while flushing
 * (each post flushed at once, from the doorbell); an RC QP whose peer does
 * not exist, failed by its retransmit timer (softirq), whose handler posts
 * again to the failed QP.
 */
#define HP_ROUNDS 32
#define HP_LEN 256
/* The receive buffer (a UD or XUD receive starts with 40 bytes of GRH). */
#define HP_RECV_LEN (HP_LEN + 40)
#define HP_SEND_OFF 1024
#define HP_QKEY 0x22222222
#define HP_FLUSH_POSTS 4
#define HP_WAIT (10 * HZ)

static bool lockcheck = true;
module_param(lockcheck, bool, 0444);
MODULE_PARM_DESC(lockcheck, "Handler checks: a handler called under an rxud lock returns at once "
		 "(0: it polls and posts anyway, and deadlocks)");

enum hp_phase { HP_PINGPONG, HP_FLUSH, HP_TIMEOUT, HP_STOP };

struct hp;

struct hp_end {
	struct hp *t;
	struct ib_cq *cq;
	struct ib_qp *qp;
	u8 *buf;
	u64 dma;
	/* The other end's QP number (UD and XUD address each send). */
	u32 peer_qpn;
};

struct hp {
	struct ib_device *ibdev;
	struct ib_pd *pd;
	struct ib_ah *ah;
	enum ib_qp_type type;
	struct hp_end a, b;
	enum hp_phase phase;
	atomic_t rounds, sends, events, flushed, flush_posts, timeouts, errors;
	/* The first completion status nothing expected, or a post's error. */
	int bad;
	/* The first rxud lock a handler found held. */
	const char *under_lock;
	struct completion done;
};

/* An rxud lock the caller's context holds (see above), or NULL. */
static const char *hp_rxud_lock_held(void)
{
#ifdef CONFIG_LOCKDEP
	unsigned int ctx = (in_serving_softirq() ? 1 : 0) | (in_hardirq() ? 2 : 0);
	int i;

	for (i = 0; i < current->lockdep_depth; i++) {
		struct held_lock *hl = &current->held_locks[i];
		const char *name = hl->instance ? hl->instance->name : NULL;

		if (hl->irq_context == ctx && name && !strncmp(name, "rxud:", 5))
			return name;
	}
#endif
	return NULL;
}

static void hp_fail(struct hp *t, int why)
{
	cmpxchg(&t->bad, 0, why);
	complete(&t->done);
}

static void hp_post_recv(struct hp_end *e, u64 wr_id)
{
	struct ib_sge sge = { .addr = e->dma, .length = HP_RECV_LEN,
			      .lkey = e->t->pd->local_dma_lkey };
	struct ib_recv_wr wr = { .wr_id = wr_id, .sg_list = &sge, .num_sge = 1 };
	int ret = ib_post_recv(e->qp, &wr, NULL);

	if (ret)
		hp_fail(e->t, ret);
}

static void hp_post_send(struct hp_end *e, u64 wr_id)
{
	struct hp *t = e->t;
	struct ib_sge sge = { .addr = e->dma + HP_SEND_OFF, .length = HP_LEN,
			      .lkey = t->pd->local_dma_lkey };
	struct ib_ud_wr wr = {
		.wr = { .wr_id = wr_id, .opcode = IB_WR_SEND, .send_flags = IB_SEND_SIGNALED,
			.sg_list = &sge, .num_sge = 1 },
		.ah = t->ah, .remote_qpn = e->peer_qpn, .remote_qkey = HP_QKEY,
	};
	int ret = ib_post_send(e->qp, &wr.wr, NULL);

	if (ret)
		hp_fail(t, ret);
}

static void hp_completion(struct hp_end *e, const struct ib_wc *wc)
{
	struct hp *t = e->t;
	u32 len = t->type == IB_QPT_RC ? HP_LEN : HP_RECV_LEN;

	switch (t->phase) {
	case HP_PINGPONG:
		if (wc->status != IB_WC_SUCCESS) {
			hp_fail(t, 1000 + wc->status);
		} else if (wc->opcode == IB_WC_SEND) {
			atomic_inc(&t->sends);
		} else if (wc->opcode != IB_WC_RECV || wc->byte_len != len) {
			hp_fail(t, 2000 + wc->opcode);
		} else if (e == &t->b) {
			/* The pong: the next receive first, then the answer. */
			hp_post_recv(e, wc->wr_id + 1);
			hp_post_send(e, wc->wr_id + 1);
		} else if (atomic_inc_return(&t->rounds) < HP_ROUNDS) {
			hp_post_recv(e, wc->wr_id + 1);
			hp_post_send(e, wc->wr_id + 1);
		} else {
			complete(&t->done);
		}
		break;
	case HP_FLUSH:
		if (wc->status != IB_WC_WR_FLUSH_ERR) {
			hp_fail(t, 3000 + wc->status);
			break;
		}
		/* Each of the first flushes posts a send and a receive, which
		 * must come back flushed too. */
		if (atomic_inc_return(&t->flush_posts) <= HP_FLUSH_POSTS) {
			hp_post_send(e, 100);
			hp_post_recv(e, 101);
		}
		if (atomic_inc_return(&t->flushed) == 1 + 2 * HP_FLUSH_POSTS)
			complete(&t->done);
		break;
	case HP_TIMEOUT:
		if (wc->status == IB_WC_RETRY_EXC_ERR) {
			/* From the retransmit timer; the QP has failed: what
			 * is posted now flushes. */
			atomic_inc(&t->timeouts);
			hp_post_send(e, 200);
		} else if (wc->status == IB_WC_WR_FLUSH_ERR && wc->wr_id == 200) {
			atomic_inc(&t->flushed);
			complete(&t->done);
		} else {
			hp_fail(t, 4000 + wc->status);
		}
		break;
	case HP_STOP:
		break;
	}
}

static void hp_handler(struct ib_cq *cq, void *ctx)
{
	struct hp_end *e = ctx;
	struct hp *t = e->t;
	const char *lock = lockcheck ? hp_rxud_lock_held() : NULL;
	struct ib_wc wc;

	atomic_inc(&t->events);
	if (lock) {
		cmpxchg(&t->under_lock, NULL, lock);
		complete(&t->done);
		return;
	}
	ib_req_notify_cq(cq, IB_CQ_NEXT_COMP);
	while (ib_poll_cq(cq, 1, &wc) == 1)
		hp_completion(e, &wc);
}

/* A UD or XUD QP through INIT and RTR to RTS. */
static int hp_datagram_rts(struct ib_qp *qp, bool xud)
{
	struct ib_qp_attr a = { .qp_state = IB_QPS_INIT, .port_num = 1, .qkey = HP_QKEY };
	int ret;

	ret = ib_modify_qp(qp, &a, IB_QP_STATE | IB_QP_PKEY_INDEX | IB_QP_PORT | IB_QP_QKEY);
	if (ret)
		return ret;
	memset(&a, 0, sizeof(a));
	a.qp_state = IB_QPS_RTR;
	ret = ib_modify_qp(qp, &a, IB_QP_STATE);
	if (ret)
		return ret;
	a.qp_state = IB_QPS_RTS;
	a.sq_psn = 0;
	a.timeout = 16;
	return ib_modify_qp(qp, &a, IB_QP_STATE | IB_QP_SQ_PSN | (xud ? IB_QP_TIMEOUT : 0));
}

static int hp_end_make(struct hp *t, struct hp_end *e, bool xud)
{
	struct ib_cq_init_attr ca = { .cqe = 64 };
	struct ib_qp_init_attr qa = {
		.qp_type = xud ? IB_QPT_DRIVER : t->type,
		.create_flags = xud ? RXUD_QP_CREATE_XUD : 0,
		.sq_sig_type = IB_SIGNAL_REQ_WR,
		.cap = { .max_send_wr = 16, .max_recv_wr = 16, .max_send_sge = 1,
			 .max_recv_sge = 1 },
	};

	e->t = t;
	e->buf = kzalloc(PAGE_SIZE, GFP_KERNEL);
	if (!e->buf)
		return -ENOMEM;
	e->dma = ib_dma_map_single(t->ibdev, e->buf, PAGE_SIZE, DMA_BIDIRECTIONAL);
	e->cq = ib_create_cq(t->ibdev, hp_handler, NULL, e, &ca);
	if (IS_ERR(e->cq)) {
		int ret = PTR_ERR(e->cq);

		e->cq = NULL;
		return ret;
	}
	qa.send_cq = e->cq;
	qa.recv_cq = e->cq;
	e->qp = ib_create_qp(t->pd, &qa);
	if (IS_ERR(e->qp)) {
		int ret = PTR_ERR(e->qp);

		e->qp = NULL;
		return ret;
	}
	return 0;
}

static void hp_end_free(struct hp *t, struct hp_end *e)
{
	if (e->qp)
		ib_destroy_qp(e->qp);
	if (e->cq)
		ib_destroy_cq(e->cq);
	if (e->buf) {
		ib_dma_unmap_single(t->ibdev, e->dma, PAGE_SIZE, DMA_BIDIRECTIONAL);
		kfree(e->buf);
	}
}

/* Waits for the phase to end; false if it did not within HP_WAIT. */
static bool hp_wait(struct hp *t)
{
	return wait_for_completion_timeout(&t->done, HP_WAIT) != 0;
}

static const char *hp_lock_seen(struct hp *t)
{
	return t->under_lock ?: "none";
}

/*
 * Ping-pong between two QPs of @type (IB_QPT_DRIVER: XUD), driven from
 * the handlers; for RC, then the flush of B with more posted from its
 * handler.
 */
static void hp_pingpong(struct ib_device *ibdev, enum ib_qp_type type, const char *what)
{
	bool xud = type == IB_QPT_DRIVER;
	struct ib_qp_attr err = { .qp_state = IB_QPS_ERR };
	struct rdma_ah_attr ah_attr;
	struct hp *t;
	int ret;

	t = kzalloc(sizeof(*t), GFP_KERNEL);
	if (!t) {
		check(false, "%s: allocation", what);
		return;
	}
	init_completion(&t->done);
	t->ibdev = ibdev;
	t->type = xud ? IB_QPT_UD : type;
	t->pd = ib_alloc_pd(ibdev, 0);
	if (IS_ERR(t->pd)) {
		check(false, "%s: ib_alloc_pd (%ld)", what, PTR_ERR(t->pd));
		kfree(t);
		return;
	}
	ret = roce_v2_ah_attr(ibdev, &ah_attr);
	ret = ret ?: hp_end_make(t, &t->a, xud);
	ret = ret ?: hp_end_make(t, &t->b, xud);
	if (ret)
		goto out;
	t->a.peer_qpn = t->b.qp->qp_num;
	t->b.peer_qpn = t->a.qp->qp_num;
	if (type == IB_QPT_RC) {
		ret = dt_connect(t->a.qp, t->b.qp->qp_num, &ah_attr);
		ret = ret ?: dt_connect(t->b.qp, t->a.qp->qp_num, &ah_attr);
	} else {
		t->ah = rdma_create_ah(t->pd, &ah_attr, RDMA_CREATE_AH_SLEEPABLE);
		ret = IS_ERR(t->ah) ? PTR_ERR(t->ah) : 0;
		if (ret)
			t->ah = NULL;
		ret = ret ?: hp_datagram_rts(t->a.qp, xud);
		ret = ret ?: hp_datagram_rts(t->b.qp, xud);
	}
	if (ret)
		goto out;

	hp_post_recv(&t->a, 0);
	hp_post_recv(&t->b, 0);
	ib_req_notify_cq(t->a.cq, IB_CQ_NEXT_COMP);
	ib_req_notify_cq(t->b.cq, IB_CQ_NEXT_COMP);
	hp_post_send(&t->a, 0);
	hp_wait(t);
	/* B's last SEND completes on its ACK, after the last round. */
	for (int i = 0; i < 200 && atomic_read(&t->sends) < 2 * HP_ROUNDS; i++)
		msleep(10);
	check(!t->under_lock && !t->bad && atomic_read(&t->rounds) == HP_ROUNDS &&
	      atomic_read(&t->sends) == 2 * HP_ROUNDS,
	      "%s: %d round trips driven from completion handlers that re-arm, poll and post "
	      "(rounds %d, sends %d, events %d, error %d; a handler under an rxud lock: %s)",
	      what, HP_ROUNDS, atomic_read(&t->rounds), atomic_read(&t->sends),
	      atomic_read(&t->events), t->bad, hp_lock_seen(t));
	if (type != IB_QPT_RC || t->under_lock || t->bad)
		goto out;

	/* B's receive posted for a next ping is flushed; each of the first
	 * flushes posts more from the handler. */
	reinit_completion(&t->done);
	t->phase = HP_FLUSH;
	ret = ib_modify_qp(t->b.qp, &err, IB_QP_STATE);
	if (!ret)
		hp_wait(t);
	check(!ret && !t->under_lock && !t->bad &&
	      atomic_read(&t->flushed) == 1 + 2 * HP_FLUSH_POSTS,
	      "%s: the QP to ERROR: its handler posts %d sends and %d receives while flushing, "
	      "all flushed (%d, flushed %d of %d, error %d; a handler under an rxud lock: %s)",
	      what, HP_FLUSH_POSTS, HP_FLUSH_POSTS, ret, atomic_read(&t->flushed),
	      1 + 2 * HP_FLUSH_POSTS, t->bad, hp_lock_seen(t));
out:
	if (ret)
		check(false, "%s: setup (%d)", what, ret);
	t->phase = HP_STOP;
	hp_end_free(t, &t->a);
	hp_end_free(t, &t->b);
	if (t->ah)
		rdma_destroy_ah(t->ah, RDMA_DESTROY_AH_SLEEPABLE);
	ib_dealloc_pd(t->pd);
	kfree(t);
}

/*
 * An RC QP connected to a QP number nobody has: its SEND fails with
 * RETRY_EXC_ERR from the retransmit timer (softirq); the handler posts
 * another SEND to the failed QP, which completes flushed.
 */
static void hp_timeout(struct ib_device *ibdev)
{
	struct rdma_ah_attr ah_attr;
	struct hp *t;
	int ret;

	t = kzalloc(sizeof(*t), GFP_KERNEL);
	if (!t) {
		check(false, "handlers, RC timeout: allocation");
		return;
	}
	init_completion(&t->done);
	t->ibdev = ibdev;
	t->type = IB_QPT_RC;
	t->pd = ib_alloc_pd(ibdev, 0);
	if (IS_ERR(t->pd)) {
		check(false, "handlers, RC timeout: ib_alloc_pd (%ld)", PTR_ERR(t->pd));
		kfree(t);
		return;
	}
	ret = roce_v2_ah_attr(ibdev, &ah_attr);
	ret = ret ?: hp_end_make(t, &t->a, false);
	/* 4.096 us * 2^14, about 67 ms; one retry. */
	ret = ret ?: dt_connect_timed(t->a.qp, 0xfffff0, &ah_attr, 14, 1);
	if (ret) {
		check(false, "handlers, RC timeout: setup (%d)", ret);
		goto out;
	}
	t->phase = HP_TIMEOUT;
	ib_req_notify_cq(t->a.cq, IB_CQ_NEXT_COMP);
	hp_post_send(&t->a, 1);
	hp_wait(t);
	check(!t->under_lock && !t->bad && atomic_read(&t->timeouts) == 1 &&
	      atomic_read(&t->flushed) == 1,
	      "handlers, RC: a SEND to no peer fails RETRY_EXC_ERR from the retransmit timer; "
	      "the handler's next post is flushed (timeouts %d, flushed %d, error %d; a handler "
	      "under an rxud lock: %s)", atomic_read(&t->timeouts), atomic_read(&t->flushed),
	      t->bad, hp_lock_seen(t));
out:
	t->phase = HP_STOP;
	hp_end_free(t, &t->a);
	ib_dealloc_pd(t->pd);
	kfree(t);
}

static void handler_checks(struct ib_device *ibdev)
{
	/*
	 * The handlers name a held rxud lock only while lockdep tracks locks:
	 * after its first report, or a taint such as an oops, it tracks none,
	 * and a driver that calls handlers under its lock would freeze the
	 * guest here instead of failing by name (in a mutant lane an earlier
	 * mutant's report can do that). Fail, do not run.
	 */
	if (lockcheck && (!IS_ENABLED(CONFIG_LOCKDEP) || !debug_locks)) {
		check(false, "handlers: lockdep tracks no locks (%s), so a handler under an rxud "
		      "lock could not be named; not run",
		      IS_ENABLED(CONFIG_LOCKDEP) ? "off after an earlier report or taint" :
		      "not built in");
		return;
	}
	hp_pingpong(ibdev, IB_QPT_RC, "handlers, RC");
	hp_timeout(ibdev);
	hp_pingpong(ibdev, IB_QPT_UD, "handlers, UD");
	if (xud)
		hp_pingpong(ibdev, IB_QPT_DRIVER, "handlers, XUD");
}

static int __init rxud_ktest_init(void)
{
	struct ib_device *ibdev = ib_device_get_by_name(dev, RDMA_DRIVER_UNKNOWN);

	pr_info("rxud_ktest: TAP version 13\n");
	check(ibdev != NULL, "found device %s", dev);
	if (ibdev) {
		pd_checks(ibdev);
		fast_reg_checks(ibdev);
		data_checks(ibdev);
		srq_drain_checks(ibdev);
		if (atomic)
			context_checks(ibdev);
		if (xud)
			xud_checks(ibdev);
		if (handlers)
			handler_checks(ibdev);
		ib_device_put(ibdev);
	}
	pr_info("rxud_ktest: 1..%d\n", n_checks);
	pr_info("rxud_ktest: %d passed, %d failed\n", n_checks - n_failed, n_failed);
	return 0;
}

static void __exit rxud_ktest_exit(void)
{
}

module_init(rxud_ktest_init);
module_exit(rxud_ktest_exit);
MODULE_DESCRIPTION("rxud kernel-verbs test");
MODULE_LICENSE("GPL");
