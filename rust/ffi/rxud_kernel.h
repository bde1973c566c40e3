/* SPDX-License-Identifier: GPL-2.0 */
/*
 * rxud's interface for kernel consumers beyond ib_core's: how a kernel ULP
 * creates an XUD QP (Documentation/xud.rst, "Creating one") and posts an
 * RDMA WRITE on it. rxud's own bindings are generated from this header
 * (wrapper.h), so the driver and its consumers read one definition.
 */
#ifndef RXUD_KERNEL_H
#define RXUD_KERNEL_H

#include <rdma/ib_verbs.h>

/*
 * ib_create_qp() with qp_type IB_QPT_DRIVER and this creation flag (the
 * first one ib_core leaves to drivers) makes an XUD QP.
 */
#define RXUD_QP_CREATE_XUD IB_QP_CREATE_RESERVED_START

/*
 * An RDMA WRITE (IB_WR_RDMA_WRITE or IB_WR_RDMA_WRITE_WITH_IMM) on an XUD
 * QP: UD's addressing (the AH, remote QPN and Q_Key of an ib_ud_wr) and
 * the remote memory of an ib_rdma_wr. Post &w.ud.wr: on an XUD QP rxud
 * reads a WRITE request as the ud.wr member of this struct, as drivers
 * read a UD QP's requests as the wr member of an ib_ud_wr. SENDs on an
 * XUD QP are plain ib_ud_wrs.
 */
struct rxud_xud_rdma_wr {
	struct ib_ud_wr ud;
	u64 remote_addr;
	u32 rkey;
};

#endif /* RXUD_KERNEL_H */
