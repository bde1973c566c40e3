// SPDX-License-Identifier: GPL-2.0
/*
 * rxud_ktest: drives the verbs only kernel ULPs can reach (DMA MRs through
 * ib_alloc_pd, fast-registration MRs and ib_map_mr_sg) on one RDMA device
 * and prints TAP to the kernel log:
 *
 *	insmod rxud_ktest.ko dev=rxud0
 *
 * Every line starts with "rxud_ktest: "; the module always loads and
 * unloads cleanly (the results are in the log), and frees everything it
 * allocated before init returns.
 */
#include <linux/module.h>
#include <linux/scatterlist.h>
#include <linux/slab.h>
#include <rdma/ib_verbs.h>

static char *dev = "rxud0";
module_param(dev, charp, 0444);
MODULE_PARM_DESC(dev, "RDMA device to test");

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

static int __init rxud_ktest_init(void)
{
	struct ib_device *ibdev = ib_device_get_by_name(dev, RDMA_DRIVER_UNKNOWN);

	pr_info("rxud_ktest: TAP version 13\n");
	check(ibdev != NULL, "found device %s", dev);
	if (ibdev) {
		pd_checks(ibdev);
		fast_reg_checks(ibdev);
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
