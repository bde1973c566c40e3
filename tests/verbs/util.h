/* SPDX-License-Identifier: GPL-2.0 OR Linux-OpenIB */
/*
 * Helpers the libibverbs test programs share (rc-test, ex-test,
 * data-test, xud-sink, held-device, orphan-send): a monotonic clock, a
 * data pattern and its check, completion opcode names, opening a device by
 * name, connecting an RC QP.
 */
#ifndef RXUD_TESTS_VERBS_UTIL_H
#define RXUD_TESTS_VERBS_UTIL_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <time.h>
#include <infiniband/verbs.h>

/* Milliseconds on the monotonic clock. */
static inline long long now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1000LL + ts.tv_nsec / 1000000;
}

/* A byte pattern that differs per @seed and is not periodic in 256. */
static inline void fill(uint8_t *p, size_t len, unsigned int seed)
{
	for (size_t i = 0; i < len; i++)
		p[i] = (uint8_t)(seed + i * 7 + (i >> 8));
}

/* Whether @p holds fill()'s pattern for @seed. */
static inline int same(const uint8_t *p, size_t len, unsigned int seed)
{
	for (size_t i = 0; i < len; i++)
		if (p[i] != (uint8_t)(seed + i * 7 + (i >> 8)))
			return 0;
	return 1;
}

static inline const char *wc_opcode_name(int op)
{
	switch (op) {
	case IBV_WC_SEND: return "SEND";
	case IBV_WC_RDMA_WRITE: return "RDMA_WRITE";
	case IBV_WC_RDMA_READ: return "RDMA_READ";
	case IBV_WC_COMP_SWAP: return "COMP_SWAP";
	case IBV_WC_FETCH_ADD: return "FETCH_ADD";
	case IBV_WC_BIND_MW: return "BIND_MW";
	case IBV_WC_LOCAL_INV: return "LOCAL_INV";
	case IBV_WC_ATOMIC_WRITE: return "ATOMIC_WRITE";
	case IBV_WC_RECV: return "RECV";
	case IBV_WC_RECV_RDMA_WITH_IMM: return "RECV_RDMA_WITH_IMM";
	default: return "?";
	}
}

/* The device named NAME, opened; NULL if libibverbs lists none such. */
static inline struct ibv_context *open_dev(const char *name)
{
	struct ibv_device **list = ibv_get_device_list(NULL);
	struct ibv_context *ctx = NULL;

	if (!list)
		return NULL;
	for (int i = 0; list[i]; i++)
		if (!strcmp(ibv_get_device_name(list[i]), name))
			ctx = ibv_open_device(list[i]);
	ibv_free_device_list(list);
	return ctx;
}

/*
 * Moves RC QP @qp from RESET through INIT and RTR to RTS, connected to QP
 * @dest_qpn at @dgid from source GID index @sgid of port 1: 1 KB MTU,
 * PSNs 1, one READ/atomic each way, 7 retries. The remote write right is
 * granted. 0, or -1 with errno set by the failing ibv_modify_qp.
 */
static inline int rc_connect(struct ibv_qp *qp, int sgid, const union ibv_gid *dgid,
			     uint32_t dest_qpn)
{
	struct ibv_qp_attr a = {
		.qp_state = IBV_QPS_INIT,
		.port_num = 1,
		.qp_access_flags = IBV_ACCESS_REMOTE_WRITE,
	};

	if (ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS))
		return -1;
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTR;
	a.path_mtu = IBV_MTU_1024;
	a.dest_qp_num = dest_qpn;
	a.rq_psn = 1;
	a.max_dest_rd_atomic = 1;
	a.min_rnr_timer = 12;
	a.ah_attr.is_global = 1;
	a.ah_attr.port_num = 1;
	a.ah_attr.grh.dgid = *dgid;
	a.ah_attr.grh.sgid_index = sgid;
	a.ah_attr.grh.hop_limit = 64;
	if (ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN |
			  IBV_QP_RQ_PSN | IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER))
		return -1;
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTS;
	a.timeout = 14;
	a.retry_cnt = 7;
	a.rnr_retry = 7;
	a.sq_psn = 1;
	a.max_rd_atomic = 1;
	return ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT |
			     IBV_QP_RNR_RETRY | IBV_QP_SQ_PSN | IBV_QP_MAX_QP_RD_ATOMIC);
}

#endif
