/* SPDX-License-Identifier: GPL-2.0 OR Linux-OpenIB */
/*
 * What rxud's XUD tools share (rxud-pingmesh, xud-incast): a device
 * opened with a buffer, a CQ on a completion channel and an XUD QP at
 * RTS, the wait on that channel, and peers named ADDRESS/QPN on the
 * command line.
 */
#ifndef RXUD_TESTS_VERBS_XUD_TOOL_H
#define RXUD_TESTS_VERBS_XUD_TOOL_H

#include <arpa/inet.h>
#include <poll.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <infiniband/verbs.h>
#include <infiniband/rxudv.h>

/*
 * An XUD QP of @pd on port 1 with both queues on @cq, @send_wr and
 * @recv_wr deep with one SGE, the provider's default peers, moved to RTS
 * with Q_Key @qkey; NULL with errno set if a step failed.
 */
static inline struct ibv_qp *xud_qp_rts(struct ibv_context *ctx, struct ibv_pd *pd,
					struct ibv_cq *cq, int send_wr, int recv_wr,
					uint32_t qkey)
{
	struct ibv_qp_init_attr_ex a = {
		.qp_type = IBV_QPT_DRIVER,
		.comp_mask = IBV_QP_INIT_ATTR_PD,
		.pd = pd, .send_cq = cq, .recv_cq = cq,
		.cap = { .max_send_wr = send_wr, .max_recv_wr = recv_wr, .max_send_sge = 1,
			 .max_recv_sge = 1 },
	};
	struct rxudv_qp_init_attr xa = { .comp_mask = 0 };
	struct ibv_qp_attr qa = { .qp_state = IBV_QPS_INIT, .port_num = 1, .qkey = qkey };
	struct ibv_qp *qp = rxudv_create_qp(ctx, &a, &xa, sizeof(xa));

	if (!qp)
		return NULL;
	if (!ibv_modify_qp(qp, &qa, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_QKEY)) {
		qa.qp_state = IBV_QPS_RTR;
		if (!ibv_modify_qp(qp, &qa, IBV_QP_STATE)) {
			qa.qp_state = IBV_QPS_RTS;
			if (!ibv_modify_qp(qp, &qa, IBV_QP_STATE | IBV_QP_SQ_PSN))
				return qp;
		}
	}
	ibv_destroy_qp(qp);
	return NULL;
}

/* What a tool's one XUD QP needs. */
struct xud_tool {
	struct ibv_context *ctx;
	struct ibv_pd *pd;
	struct ibv_comp_channel *chan;
	struct ibv_cq *cq;
	struct ibv_qp *qp;
	struct ibv_mr *mr;
	uint8_t *buf;
};

/*
 * Opens device @dev and makes in @x a zeroed buffer of @len bytes
 * registered for local writes, a CQ of @cqe entries on a completion
 * channel, armed, and an XUD QP at RTS on it (xud_qp_rts; none if
 * @send_wr and @recv_wr are both 0: the caller makes its own QPs). NULL,
 * or the step that failed (errno set).
 */
static inline const char *xud_tool_open(struct xud_tool *x, const char *dev, size_t len,
					int cqe, int send_wr, int recv_wr, uint32_t qkey)
{
	struct ibv_device **list = ibv_get_device_list(NULL);

	memset(x, 0, sizeof(*x));
	for (int i = 0; list && list[i]; i++)
		if (!strcmp(ibv_get_device_name(list[i]), dev))
			x->ctx = ibv_open_device(list[i]);
	if (list)
		ibv_free_device_list(list);
	if (!x->ctx)
		return "no such device";
	x->buf = calloc(1, len);
	x->pd = ibv_alloc_pd(x->ctx);
	x->chan = ibv_create_comp_channel(x->ctx);
	if (!x->buf || !x->pd || !x->chan)
		return "allocation";
	x->cq = ibv_create_cq(x->ctx, cqe, NULL, x->chan, 0);
	x->mr = ibv_reg_mr(x->pd, x->buf, len, IBV_ACCESS_LOCAL_WRITE);
	if (!x->cq || !x->mr)
		return "ibv_create_cq/ibv_reg_mr";
	if (send_wr || recv_wr) {
		x->qp = xud_qp_rts(x->ctx, x->pd, x->cq, send_wr, recv_wr, qkey);
		if (!x->qp)
			return "an XUD QP at RTS";
	}
	if (ibv_req_notify_cq(x->cq, 0))
		return "ibv_req_notify_cq";
	return NULL;
}

/*
 * Waits at most @ms for @chan's next event (of @cq), takes it and arms
 * @cq again. 0, or -1 if the CQ could not be armed.
 */
static inline int wait_cq_event(struct ibv_comp_channel *chan, struct ibv_cq *cq, int ms)
{
	struct pollfd p = { .fd = chan->fd, .events = POLLIN };
	struct ibv_cq *ev_cq;
	void *ev_ctx;

	if (poll(&p, 1, ms < 0 ? 0 : ms) > 0 && !ibv_get_cq_event(chan, &ev_cq, &ev_ctx)) {
		ibv_ack_cq_events(ev_cq, 1);
		return ibv_req_notify_cq(cq, 0) ? -1 : 0;
	}
	return 0;
}

/*
 * A peer named ADDRESS/QPN (IPv4 or IPv6; an IPv4 address as its mapped
 * GID): its GID and QP number. 0, or -1 if @arg is not one.
 */
static inline int parse_peer_arg(const char *arg, union ibv_gid *gid, uint32_t *qpn)
{
	char addr[INET6_ADDRSTRLEN];
	const char *slash = strrchr(arg, '/');
	struct in_addr v4;
	char *end;

	if (!slash || slash - arg >= (long)sizeof(addr))
		return -1;
	memcpy(addr, arg, slash - arg);
	addr[slash - arg] = 0;
	*qpn = strtoul(slash + 1, &end, 0);
	if (*end || end == slash + 1 || *qpn > 0xffffff)
		return -1;
	memset(gid, 0, sizeof(*gid));
	if (inet_pton(AF_INET, addr, &v4) == 1) {
		gid->raw[10] = gid->raw[11] = 0xff;
		memcpy(&gid->raw[12], &v4, 4);
		return 0;
	}
	return inet_pton(AF_INET6, addr, gid->raw) == 1 ? 0 : -1;
}

#endif
