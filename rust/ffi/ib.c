// SPDX-License-Identifier: GPL-2.0
/*
 * The C half of rxud's verbs boundary (rust/ib/) beyond helpers.c's
 * forwarders:
 *
 * - the rxud_abi_version sysfs attribute of every rxud ib_device
 *   (ib_device_ops.device_group), whose value comes from Rust;
 * - asynchronous events reported to a CQ's, QP's or SRQ's owner (an
 *   ib_event built and the owner's handler called, if it set one) and a
 *   CQ's completion handler called;
 * - the pages of a user memory region, in order (rxud_umem_pages).
 *
 * Why C: DEVICE_ATTR_RO and for_each_sgtable_page are macros, and
 * sg_page_iter_page a static inline, which 6.12's Rust cannot reach. The
 * event reports are the exception: struct ib_event and the handler
 * fields they call through are in the generated bindings, so they could
 * be written in rust/ib/ (cq.rs, qp.rs, srq.rs, their callers); they are
 * C only because they were written so, and sit here, not among
 * helpers.c's forwarders, because they are more than one call.
 */

#include <linux/device.h>
#include <linux/sysfs.h>
#include <linux/scatterlist.h>
#include <rdma/ib_umem.h>
#include <rdma/ib_verbs.h>
#include "helpers.h"

/*
 * rxud_abi_version: librxud recognises rxud devices by this attribute (the
 * name is rust/abi's SYSFS_ABI_ATTR); the value comes from Rust.
 */
static ssize_t rxud_abi_version_show(struct device *dev,
				     struct device_attribute *attr, char *buf)
{
	return sysfs_emit(buf, "%u\n", rxud_uverbs_abi_version());
}
static DEVICE_ATTR_RO(rxud_abi_version);

static struct attribute *rxud_device_attrs[] = {
	&dev_attr_rxud_abi_version.attr,
	NULL,
};

const struct attribute_group rxud_device_attr_group = {
	.attrs = rxud_device_attrs,
};

/*
 * The pages of @umem, in order, into @pages: how many, or -EINVAL if
 * more than @max.
 */
int rxud_umem_pages(struct ib_umem *umem, struct page **pages, int max)
{
	struct sg_page_iter iter;
	int n = 0;

	for_each_sgtable_page(&umem->sgt_append.sgt, &iter, 0) {
		if (n == max)
			return -EINVAL;
		pages[n++] = sg_page_iter_page(&iter);
	}
	return n;
}

void rxud_ib_cq_event(struct ib_cq *cq)
{
	if (cq->comp_handler)
		cq->comp_handler(cq, cq->cq_context);
}

/* Fewer WQEs than the armed limit remain: IB_EVENT_SRQ_LIMIT_REACHED. */
void rxud_ib_srq_limit_reached(struct ib_srq *srq)
{
	struct ib_event ev = {
		.device = srq->device,
		.element.srq = srq,
		.event = IB_EVENT_SRQ_LIMIT_REACHED,
	};

	if (srq->event_handler)
		srq->event_handler(&ev, srq->srq_context);
}

/* The CQ overflowed: IB_EVENT_CQ_ERR to its owner (as rxe reports it). */
void rxud_ib_cq_overflow(struct ib_cq *cq)
{
	struct ib_event ev = {
		.device = cq->device,
		.element.cq = cq,
		.event = IB_EVENT_CQ_ERR,
	};

	if (cq->event_handler)
		cq->event_handler(&ev, cq->cq_context);
}

/*
 * The QP's data path put it in the error state (an invalid request, an
 * access violation, a completion it could not write): tell its owner,
 * as the affiliated asynchronous error events of IBTA 11.6.3.
 */
void rxud_ib_qp_event(struct ib_qp *qp, enum ib_event_type type)
{
	struct ib_event ev = {
		.device = qp->device,
		.element.qp = qp,
		.event = type,
	};

	if (qp->event_handler)
		qp->event_handler(&ev, qp->qp_context);
}

/*
 * A QP on an SRQ reached the error state: IB_EVENT_QP_LAST_WQE_REACHED to
 * its owner (ib_drain_qp waits for it before polling the CQ).
 */
void rxud_ib_qp_last_wqe_reached(struct ib_qp *qp)
{
	struct ib_event ev = {
		.device = qp->device,
		.element.qp = qp,
		.event = IB_EVENT_QP_LAST_WQE_REACHED,
	};

	if (qp->srq && qp->event_handler)
		qp->event_handler(&ev, qp->qp_context);
}
