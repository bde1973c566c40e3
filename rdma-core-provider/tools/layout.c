// SPDX-License-Identifier: GPL-2.0 OR Linux-OpenIB
//
// Prints, as the Rust expressions src/sys.rs asserts, the sizes, alignments
// and offsets of the rdma-core structures librxud declares by hand, and as
// the Rust declarations sys.rs makes, the values of the constants it copies.
// Built against an rdma-core source tree by check-layout.sh, which then
// checks that sys.rs contains every one of them.

#include <stddef.h>
#include <stdio.h>
#include <infiniband/driver.h>

#define SIZE(r, c) printf("size_of::<%s>() == %zu\n", #r, sizeof(c))
#define ALIGN(r, c) printf("align_of::<%s>() == %zu\n", #r, _Alignof(c))
#define OFF(r, c, f) printf("offset_of!(%s, %s) == %zu\n", #r, #f, offsetof(c, f))
#define S(n) SIZE(n, struct n)
#define SA(n) do { S(n); ALIGN(n, struct n); } while (0)
#define O(n, f) OFF(n, struct n, f)
#define OP(f) O(verbs_context_ops, f)
#define CONST(r, ty, c) printf("pub const %s: %s = %d;\n", #r, #ty, (int)(c))
#define C(ty, c) CONST(c, ty, c)

int main(void)
{
	/* Registration and matching. */
	S(verbs_match_ent);
	S(verbs_device_ops);
	O(verbs_device_ops, alloc_context);
	O(verbs_device_ops, alloc_device);
	S(verbs_sysfs_dev);
	O(verbs_sysfs_dev, ibdev_path);
	O(verbs_sysfs_dev, abi_ver);
	S(verbs_device);
	O(verbs_device, ops);

	/* Contexts. */
	S(verbs_context);
	S(ibv_context);
	O(ibv_context, cmd_fd);
	O(ibv_context, async_fd);
	O(ibv_context, mutex);
	O(ibv_context, abi_compat);
	SIZE(pthread_mutex_t, pthread_mutex_t);
	SIZE(pthread_cond_t, pthread_cond_t);
	S(ibv_get_context);
	S(ib_uverbs_get_context_resp);
	S(ibv_query_port);

	/* PDs and MRs. */
	S(ibv_pd);
	S(ibv_alloc_pd);
	S(ibv_mr);
	S(verbs_mr);
	S(ibv_reg_mr);
	S(ib_uverbs_reg_mr_resp);
	S(ibv_rereg_mr);
	O(ibv_rereg_mr, pd_handle);
	S(ib_uverbs_rereg_mr_resp);

	/* CQs. */
	S(ibv_cq);
	O(ibv_cq, handle);
	O(ibv_cq, cqe);
	O(ibv_cq, mutex);
	O(ibv_cq, cond);
	O(ibv_cq, comp_events_completed);
	O(ibv_cq, async_events_completed);
	S(verbs_cq);
	S(ibv_cq_ex);
	O(ibv_cq_ex, comp_mask);
	O(ibv_cq_ex, status);
	O(ibv_cq_ex, wr_id);
	O(ibv_cq_ex, start_poll);
	O(ibv_cq_ex, next_poll);
	O(ibv_cq_ex, end_poll);
	O(ibv_cq_ex, read_opcode);
	O(ibv_cq_ex, read_vendor_err);
	O(ibv_cq_ex, read_byte_len);
	O(ibv_cq_ex, read_imm_data);
	O(ibv_cq_ex, read_qp_num);
	O(ibv_cq_ex, read_src_qp);
	O(ibv_cq_ex, read_wc_flags);
	O(ibv_cq_ex, read_slid);
	O(ibv_cq_ex, read_sl);
	O(ibv_cq_ex, read_dlid_path_bits);
	O(ibv_cq_ex, read_completion_ts);
	O(ibv_cq_ex, read_completion_wallclock_ns);
	S(ibv_poll_cq_attr);
	S(ibv_cq_init_attr_ex);
	O(ibv_cq_init_attr_ex, cq_context);
	O(ibv_cq_init_attr_ex, channel);
	O(ibv_cq_init_attr_ex, comp_vector);
	O(ibv_cq_init_attr_ex, wc_flags);
	O(ibv_cq_init_attr_ex, comp_mask);
	O(ibv_cq_init_attr_ex, flags);
	O(ibv_cq_init_attr_ex, parent_domain);
	C(u64, IBV_WC_EX_WITH_BYTE_LEN);
	C(u64, IBV_WC_EX_WITH_IMM);
	C(u64, IBV_WC_EX_WITH_QP_NUM);
	C(u64, IBV_WC_EX_WITH_SRC_QP);
	C(u64, IBV_WC_EX_WITH_SLID);
	C(u64, IBV_WC_EX_WITH_SL);
	C(u64, IBV_WC_EX_WITH_DLID_PATH_BITS);
	printf("pub const IBV_WC_STANDARD_FLAGS: u64 = %#x;\n", IBV_WC_STANDARD_FLAGS);
	C(u32, IBV_CQ_INIT_ATTR_MASK_FLAGS);
	C(u32, IBV_CQ_INIT_ATTR_MASK_PD);
	C(u32, IBV_CREATE_CQ_ATTR_SINGLE_THREADED);
	C(u32, IBV_CREATE_CQ_ATTR_IGNORE_OVERRUN);
	S(ibv_wc);
	O(ibv_wc, status);
	O(ibv_wc, opcode);
	O(ibv_wc, vendor_err);
	O(ibv_wc, byte_len);
	O(ibv_wc, imm_data);
	O(ibv_wc, qp_num);
	O(ibv_wc, src_qp);
	O(ibv_wc, wc_flags);
	O(ibv_wc, pkey_index);
	O(ibv_wc, slid);
	O(ibv_wc, sl);
	O(ibv_wc, dlid_path_bits);
	SA(ibv_create_cq);
	O(ibv_create_cq, comp_channel);
	SA(ib_uverbs_create_cq_resp);
	SA(ibv_resize_cq);
	O(ibv_resize_cq, cq_handle);
	SA(ib_uverbs_resize_cq_resp);

	/* QPs. */
	S(ibv_qp);
	O(ibv_qp, srq);
	O(ibv_qp, handle);
	O(ibv_qp, qp_num);
	O(ibv_qp, state);
	O(ibv_qp, qp_type);
	O(ibv_qp, mutex);
	O(ibv_qp, cond);
	O(ibv_qp, events_completed);
	S(verbs_qp);
	O(verbs_qp, comp_mask);
	O(verbs_qp, xrcd);
	C(u32, VERBS_QP_EX);
	S(ibv_qp_ex);
	O(ibv_qp_ex, comp_mask);
	O(ibv_qp_ex, wr_id);
	O(ibv_qp_ex, wr_flags);
	O(ibv_qp_ex, wr_atomic_cmp_swp);
	O(ibv_qp_ex, wr_atomic_fetch_add);
	O(ibv_qp_ex, wr_bind_mw);
	O(ibv_qp_ex, wr_local_inv);
	O(ibv_qp_ex, wr_rdma_read);
	O(ibv_qp_ex, wr_rdma_write);
	O(ibv_qp_ex, wr_rdma_write_imm);
	O(ibv_qp_ex, wr_send);
	O(ibv_qp_ex, wr_send_imm);
	O(ibv_qp_ex, wr_send_inv);
	O(ibv_qp_ex, wr_send_tso);
	O(ibv_qp_ex, wr_set_ud_addr);
	O(ibv_qp_ex, wr_set_xrc_srqn);
	O(ibv_qp_ex, wr_set_inline_data);
	O(ibv_qp_ex, wr_set_inline_data_list);
	O(ibv_qp_ex, wr_set_sge);
	O(ibv_qp_ex, wr_set_sge_list);
	O(ibv_qp_ex, wr_start);
	O(ibv_qp_ex, wr_complete);
	O(ibv_qp_ex, wr_abort);
	O(ibv_qp_ex, wr_atomic_write);
	S(ibv_data_buf);
	S(ibv_qp_init_attr_ex);
	O(ibv_qp_init_attr_ex, comp_mask);
	O(ibv_qp_init_attr_ex, pd);
	O(ibv_qp_init_attr_ex, create_flags);
	O(ibv_qp_init_attr_ex, send_ops_flags);
	C(u32, IBV_QP_INIT_ATTR_PD);
	C(u32, IBV_QP_INIT_ATTR_CREATE_FLAGS);
	C(u32, IBV_QP_INIT_ATTR_SEND_OPS_FLAGS);
	C(u64, IBV_QP_EX_WITH_RDMA_WRITE);
	C(u64, IBV_QP_EX_WITH_RDMA_WRITE_WITH_IMM);
	C(u64, IBV_QP_EX_WITH_SEND);
	C(u64, IBV_QP_EX_WITH_SEND_WITH_IMM);
	C(u64, IBV_QP_EX_WITH_RDMA_READ);
	C(u64, IBV_QP_EX_WITH_ATOMIC_CMP_AND_SWP);
	C(u64, IBV_QP_EX_WITH_ATOMIC_FETCH_AND_ADD);
	S(ibv_qp_cap);
	O(ibv_qp_cap, max_inline_data);
	S(ibv_qp_init_attr);
	O(ibv_qp_init_attr, srq);
	O(ibv_qp_init_attr, cap);
	O(ibv_qp_init_attr, qp_type);
	O(ibv_qp_init_attr, sq_sig_all);
	SA(ibv_create_qp);
	O(ibv_create_qp, pd_handle);
	O(ibv_create_qp, max_send_wr);
	O(ibv_create_qp, max_inline_data);
	O(ibv_create_qp, reserved);
	SA(ib_uverbs_create_qp_resp);
	O(ib_uverbs_create_qp_resp, max_inline_data);
	SA(ibv_query_qp);
	O(ibv_query_qp, attr_mask);
	SA(ibv_modify_qp);

	/* SRQs. */
	S(ibv_srq);
	O(ibv_srq, handle);
	O(ibv_srq, mutex);
	O(ibv_srq, cond);
	O(ibv_srq, events_completed);
	S(verbs_srq);
	O(verbs_srq, srq_type);
	O(verbs_srq, xrcd);
	O(verbs_srq, cq);
	O(verbs_srq, srq_num);
	S(ibv_srq_attr);
	S(ibv_srq_init_attr);
	O(ibv_srq_init_attr, attr);
	SA(ibv_create_srq);
	O(ibv_create_srq, pd_handle);
	O(ibv_create_srq, srq_limit);
	SA(ib_uverbs_create_srq_resp);
	SA(ibv_modify_srq);
	O(ibv_modify_srq, srq_handle);
	O(ibv_modify_srq, srq_limit);
	SA(ibv_query_srq);
	O(ibv_query_srq, srq_handle);

	/* AHs. */
	S(ibv_ah);
	O(ibv_ah, handle);
	SIZE(ibv_gid, union ibv_gid);
	ALIGN(ibv_gid, union ibv_gid);
	S(ibv_global_route);
	O(ibv_global_route, flow_label);
	O(ibv_global_route, traffic_class);
	S(ibv_ah_attr);
	O(ibv_ah_attr, dlid);
	O(ibv_ah_attr, is_global);
	O(ibv_ah_attr, port_num);
	SA(ib_uverbs_create_ah_resp);

	/* Work requests and the send doorbell. */
	S(ibv_sge);
	SA(ibv_send_wr);
	O(ibv_send_wr, next);
	O(ibv_send_wr, sg_list);
	O(ibv_send_wr, num_sge);
	O(ibv_send_wr, opcode);
	O(ibv_send_wr, send_flags);
	O(ibv_send_wr, imm_data);
	O(ibv_send_wr, wr);
	O(ibv_send_wr, wr.rdma.remote_addr);
	O(ibv_send_wr, wr.rdma.rkey);
	O(ibv_send_wr, wr.atomic.remote_addr);
	O(ibv_send_wr, wr.atomic.compare_add);
	O(ibv_send_wr, wr.atomic.swap);
	O(ibv_send_wr, wr.atomic.rkey);
	O(ibv_send_wr, wr.ud.ah);
	O(ibv_send_wr, wr.ud.remote_qpn);
	O(ibv_send_wr, wr.ud.remote_qkey);
	O(ibv_send_wr, qp_type);
	SA(ibv_recv_wr);
	O(ibv_recv_wr, next);
	O(ibv_recv_wr, sg_list);
	O(ibv_recv_wr, num_sge);
	SA(ibv_post_send);
	O(ibv_post_send, response);
	O(ibv_post_send, qp_handle);
	O(ibv_post_send, wr_count);
	O(ibv_post_send, sge_count);
	O(ibv_post_send, wqe_size);
	SA(ib_uverbs_post_send_resp);
	C(u32, IB_USER_VERBS_CMD_POST_SEND);
	C(ibv_enum, IBV_QPT_RC);
	C(ibv_enum, IBV_QPT_UC);
	C(ibv_enum, IBV_QPT_UD);
	C(ibv_enum, IBV_QPT_DRIVER);
	C(ibv_enum, IBV_QPS_RESET);
	C(ibv_enum, IBV_QPS_INIT);
	C(ibv_enum, IBV_QPS_RTR);

	/* The callbacks librxud sets. */
	S(verbs_context_ops);
	OP(alloc_pd);
	OP(dealloc_pd);
	OP(reg_mr);
	OP(dereg_mr);
	OP(free_context);
	OP(query_device_ex);
	OP(query_port);
	OP(create_ah);
	OP(create_cq);
	OP(create_cq_ex);
	OP(create_qp_ex);
	OP(create_qp);
	OP(create_srq);
	OP(destroy_ah);
	OP(destroy_cq);
	OP(destroy_qp);
	OP(destroy_srq);
	OP(modify_qp);
	OP(modify_srq);
	OP(poll_cq);
	OP(post_recv);
	OP(post_send);
	OP(post_srq_recv);
	OP(query_qp);
	OP(query_srq);
	OP(req_notify_cq);
	OP(resize_cq);
	return 0;
}
