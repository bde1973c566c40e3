/* SPDX-License-Identifier: GPL-2.0 OR Linux-OpenIB */
/*
 * rxudv.h: librxud's direct verbs, for rxud devices (soft RoCE in Rust).
 *
 * XUD is a QP type that is connectionless like UD (one QP sends to and
 * receives from every peer; each work request names its destination by an
 * AH, a remote QPN and a Q_Key) and reliable like RC (each message is
 * delivered at most once, and a send completes successfully only once
 * every byte was placed). See Documentation/xud.rst in rxud's sources.
 *
 * rxudv_create_qp() makes an XUD QP: an IBV_QPT_DRIVER QP, used with the
 * ordinary verbs afterwards: ibv_modify_qp (UD's states and attributes;
 * also, optional, IBV_QP_MIN_RNR_TIMER at INIT->RTR and IBV_QP_TIMEOUT,
 * IBV_QP_RETRY_CNT, IBV_QP_RNR_RETRY at RTR->RTS, defaults 12, 14, 7, 7),
 * ibv_query_qp, ibv_destroy_qp, ibv_post_recv (receives as UD's: 40 bytes
 * of GRH first), ibv_post_send (IBV_WR_SEND and IBV_WR_SEND_WITH_IMM with
 * wr.ud) and, when attr_ex asks for send_ops_flags, the ibv_wr_* interface
 * (ibv_qp_to_qp_ex): ibv_wr_send, ibv_wr_send_imm, ibv_wr_rdma_write and
 * ibv_wr_rdma_write_imm, each followed by ibv_wr_set_ud_addr. An RDMA WRITE
 * needs both a remote address and a UD address, which one ibv_send_wr
 * cannot carry: ibv_post_send refuses it (EINVAL), as it refuses RDMA READ,
 * atomics, invalidation and messages longer than RXUDV_MAX_MSG_SZ.
 *
 * Link with librxud (-l:librxud-rdmav34.so, in libibverbs' provider
 * directory) besides libibverbs.
 */
#ifndef RXUDV_H
#define RXUDV_H

#include <stddef.h>
#include <stdint.h>
#include <infiniband/verbs.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Largest XUD message, in bytes (16 MiB). */
#define RXUDV_MAX_MSG_SZ 16777216u
/* max_peers: 0 for RXUDV_MAX_PEERS_DEFAULT, else 1 to RXUDV_MAX_PEERS_MAX. */
#define RXUDV_MAX_PEERS_MAX 65536u
#define RXUDV_MAX_PEERS_DEFAULT 4096u
/*
 * ack_every: 0 for RXUDV_ACK_EVERY_DEFAULT, else 1 (an ACK for every
 * packet) to RXUDV_ACK_EVERY_MAX (the most packets a stream has out
 * unanswered).
 */
#define RXUDV_ACK_EVERY_MAX 128u
#define RXUDV_ACK_EVERY_DEFAULT 16u

/*
 * XUD's creation attributes. comp_mask: no extension is defined yet (0).
 * max_peers: per-peer state entries (each side); a new peer beyond them is
 * refused, no live one is evicted. ack_every: the sender asks for an
 * acknowledgement every this many packets of a stream.
 */
struct rxudv_qp_init_attr {
	uint64_t comp_mask;
	uint32_t max_peers;
	uint32_t ack_every;
};

/*
 * Creates an XUD QP on an rxud device's context. attr_ex as for
 * ibv_create_qp_ex, with qp_type IBV_QPT_DRIVER, IBV_QP_INIT_ATTR_PD (a PD
 * of ibvctx), send and receive CQs and optionally an SRQ; comp_mask may
 * also have IBV_QP_INIT_ATTR_SEND_OPS_FLAGS (SEND, SEND_WITH_IMM,
 * RDMA_WRITE, RDMA_WRITE_WITH_IMM) and IBV_QP_INIT_ATTR_CREATE_FLAGS with no
 * flag. attr_ex->cap is updated to what was granted. inlen is
 * sizeof(*xattr) as the caller's header has it.
 *
 * Returns the QP, or NULL with errno: EOPNOTSUPP if ibvctx is not an rxud
 * device's; EINVAL for an unknown comp_mask bit, max_peers or ack_every
 * out of range, inlen too small (or larger with non-zero bytes beyond the
 * fields this library knows), or attr_ex asking for what XUD cannot do;
 * the kernel's errno otherwise.
 */
struct ibv_qp *rxudv_create_qp(struct ibv_context *ibvctx,
				struct ibv_qp_init_attr_ex *attr_ex,
				struct rxudv_qp_init_attr *xattr,
				uint32_t inlen);

/*
 * FLUSH (IBTA 1.5, Annex A19) on an RC QP, for rdma-core 44, whose
 * struct ibv_qp_ex has no wr_flush (rdma-core 45 added ibv_wr_flush, with
 * these arguments and values). Create the QP with ibv_create_qp_ex and
 * RXUDV_QP_EX_WITH_FLUSH in send_ops_flags, then, between ibv_wr_start
 * and ibv_wr_complete, rxudv_wr_flush(qpx, ...) stages a FLUSH with the
 * qp_ex's wr_id and wr_flags: make [remote_addr, remote_addr + len) under
 * rkey (level RXUDV_FLUSH_RANGE) or the whole MR rkey names
 * (RXUDV_FLUSH_MR) globally visible (type RXUDV_FLUSH_GLOBAL; rxud offers
 * no persistent memory, so RXUDV_FLUSH_PERSISTENT is answered with a
 * remote access error). The target's MR (and QP) must grant
 * RXUDV_ACCESS_FLUSH_GLOBAL. It completes as IBV_WC_FLUSH (8) once the
 * target has answered. A qpx of another provider: errno EOPNOTSUPP,
 * nothing staged; len beyond 2^31: ibv_wr_complete fails with EINVAL.
 * rxe 6.12 computes a FLUSH's ICRC over its headers twice: rxud drops
 * rxe's FLUSH packets and rxe rxud's (Documentation/design.rst).
 */
#define RXUDV_QP_EX_WITH_FLUSH 2048u /* 1 << 11 */
#define RXUDV_ACCESS_FLUSH_GLOBAL 256u /* 1 << 8 */
#define RXUDV_FLUSH_GLOBAL 1u
#define RXUDV_FLUSH_PERSISTENT 2u
#define RXUDV_FLUSH_RANGE 0u
#define RXUDV_FLUSH_MR 1u
#define RXUDV_WC_FLUSH 8

void rxudv_wr_flush(struct ibv_qp_ex *qpx, uint32_t rkey,
		    uint64_t remote_addr, size_t len, uint8_t type,
		    uint8_t level);

#ifdef __cplusplus
}
#endif

#endif /* RXUDV_H */
