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

static int dt_connect(struct ib_qp *qp, u32 dest, const struct rdma_ah_attr *ah)
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
	/* About 1 s, as rdma_cm sets: a loaded TCG guest stalls for longer than 67 ms. */
	a.timeout = 18;
	a.retry_cnt = 7;
	a.rnr_retry = 7;
	a.max_rd_atomic = 4;
	return ib_modify_qp(qp, &a, IB_QP_STATE | IB_QP_SQ_PSN | IB_QP_TIMEOUT |
			    IB_QP_RETRY_CNT | IB_QP_RNR_RETRY | IB_QP_MAX_QP_RD_ATOMIC);
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

	/* Registered again under a new key, then invalidated locally. */
	ib_update_fast_reg_key(t->mr, ib_inc_rkey(t->mr->rkey) & 0xff);
	reg.key = t->mr->rkey;
	reg.wr.wr_id = 7;
	ret = dt_send(t->b, t->bcq, &reg.wr, &wc);
	check(ret == 0 && wc.status == IB_WC_SUCCESS, "REG_MR again under a new key (%d, %d)",
	      ret, wc.status);
	inv.ex.invalidate_rkey = t->mr->rkey;
	inv.wr_id = 8;
	ret = dt_send(t->b, t->bcq, &inv, &wc);
	check(ret == 0 && wc.status == IB_WC_SUCCESS && wc.opcode == IB_WC_LOCAL_INV,
	      "LOCAL_INV completes (%d, status %d, opcode %d)", ret, wc.status, wc.opcode);

	/* WRITE through the invalidated key: remote access error. */
	rwr.wr.opcode = IB_WR_RDMA_WRITE;
	rwr.wr.wr_id = 9;
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
