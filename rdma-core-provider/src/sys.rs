// SPDX-License-Identifier: GPL-2.0 OR Linux-OpenIB

//! The provider interface of libibverbs (rdma-core 44, private ABI
//! `IBVERBS_PRIVATE_34`), declared by hand.
//!
//! Debian installs only the public verbs headers; the provider interface
//! (`driver.h`) is not installed. The structures below declare what librxud
//! touches, and treat the rest as opaque bytes of the right size. Sizes and
//! offsets were read off rdma-core 44 on x86_64 and are asserted at the end
//! of this file, so a mismatch cannot go unnoticed. `tools/check-layout.sh`
//! recomputes them from an rdma-core source tree (tag v44.0) and checks
//! that every one is asserted here.

#![allow(non_camel_case_types)]

use core::ffi::{c_char, c_int, c_void};

/// `struct ibv_device`: only passed through.
#[repr(C)]
pub struct ibv_device {
    _opaque: [u8; 0],
}

/// `struct ibv_context`: the last member of `verbs_context`, at
/// [`VERBS_CONTEXT_IBV_OFFSET`]. librxud reads only `cmd_fd`, the uverbs
/// file its rings are mapped from.
#[repr(C)]
pub struct ibv_context {
    pub device: *mut ibv_device,
    /// `struct ibv_context_ops`: libibverbs' legacy ops table.
    _ops: [*mut c_void; 32],
    pub cmd_fd: c_int,
    pub async_fd: c_int,
    pub num_comp_vectors: c_int,
    mutex: pthread_mutex_t,
    abi_compat: *mut c_void,
}

/// `pthread_mutex_t` (glibc, x86_64): only embedded; all-zero is
/// `PTHREAD_MUTEX_INITIALIZER`.
#[repr(C)]
pub struct pthread_mutex_t {
    _opaque: [u64; 5],
}

/// `pthread_cond_t` (glibc, x86_64): only embedded; all-zero is
/// `PTHREAD_COND_INITIALIZER`.
#[repr(C)]
pub struct pthread_cond_t {
    _opaque: [u64; 6],
}

/// `struct ibv_comp_channel`: only passed through.
#[repr(C)]
pub struct ibv_comp_channel {
    _opaque: [u8; 0],
}

/// `struct ibv_cq`.
#[repr(C)]
pub struct ibv_cq {
    pub context: *mut ibv_context,
    pub channel: *mut ibv_comp_channel,
    pub cq_context: *mut c_void,
    pub handle: u32,
    /// The capacity the kernel granted (set by `ibv_cmd_create_cq` and
    /// `ibv_cmd_resize_cq`).
    pub cqe: c_int,
    pub mutex: pthread_mutex_t,
    pub cond: pthread_cond_t,
    pub comp_events_completed: u32,
    pub async_events_completed: u32,
}

/// `struct ibv_poll_cq_attr`.
#[repr(C)]
pub struct ibv_poll_cq_attr {
    pub comp_mask: u32,
}

/// A `read_*` callback of `ibv_cq_ex` returning `T`.
pub type CqRead<T> = Option<unsafe extern "C" fn(*mut ibv_cq_ex) -> T>;

/// `struct ibv_cq_ex`: the fields of `ibv_cq` (declared here as one
/// `ibv_cq`, whose layout they are), then the extended CQ's state and
/// callbacks. `status` and `wr_id` describe the completion `start_poll` or
/// `next_poll` moved to; the application reads them directly.
#[repr(C)]
pub struct ibv_cq_ex {
    pub cq: ibv_cq,
    pub comp_mask: u32,
    /// `enum ibv_wc_status`.
    pub status: ibv_enum,
    pub wr_id: u64,
    pub start_poll: Option<unsafe extern "C" fn(*mut ibv_cq_ex, *mut ibv_poll_cq_attr) -> c_int>,
    pub next_poll: Option<unsafe extern "C" fn(*mut ibv_cq_ex) -> c_int>,
    pub end_poll: Option<unsafe extern "C" fn(*mut ibv_cq_ex)>,
    /// Returns `enum ibv_wc_opcode`.
    pub read_opcode: CqRead<ibv_enum>,
    pub read_vendor_err: CqRead<u32>,
    pub read_byte_len: CqRead<u32>,
    /// Returns `__be32`.
    pub read_imm_data: CqRead<u32>,
    pub read_qp_num: CqRead<u32>,
    pub read_src_qp: CqRead<u32>,
    /// Returns `unsigned int`.
    pub read_wc_flags: CqRead<u32>,
    pub read_slid: CqRead<u32>,
    pub read_sl: CqRead<u8>,
    pub read_dlid_path_bits: CqRead<u8>,
    pub read_completion_ts: Unused,
    pub read_cvlan: Unused,
    pub read_flow_tag: Unused,
    pub read_tm_info: Unused,
    pub read_completion_wallclock_ns: Unused,
}

/// `struct verbs_cq`: a union of `ibv_cq` and the larger `ibv_cq_ex`, which
/// starts with `ibv_cq`'s fields; declared as the larger one.
#[repr(C)]
pub struct verbs_cq {
    pub cq_ex: ibv_cq_ex,
}

/// `struct ibv_cq_init_attr_ex`.
#[repr(C)]
pub struct ibv_cq_init_attr_ex {
    pub cqe: u32,
    pub cq_context: *mut c_void,
    pub channel: *mut ibv_comp_channel,
    pub comp_vector: u32,
    /// `enum ibv_create_cq_wc_flags` bits.
    pub wc_flags: u64,
    /// `enum ibv_cq_init_attr_mask` bits.
    pub comp_mask: u32,
    /// `enum ibv_create_cq_attr_flags` bits.
    pub flags: u32,
    pub parent_domain: *mut ibv_pd,
}

/// `enum ibv_create_cq_wc_flags`: what `ibv_create_cq_ex` may ask the
/// `read_*` callbacks for.
pub const IBV_WC_EX_WITH_BYTE_LEN: u64 = 1;
pub const IBV_WC_EX_WITH_IMM: u64 = 2;
pub const IBV_WC_EX_WITH_QP_NUM: u64 = 4;
pub const IBV_WC_EX_WITH_SRC_QP: u64 = 8;
pub const IBV_WC_EX_WITH_SLID: u64 = 16;
pub const IBV_WC_EX_WITH_SL: u64 = 32;
pub const IBV_WC_EX_WITH_DLID_PATH_BITS: u64 = 64;
/// The fields of `ibv_wc` (`IBV_WC_STANDARD_FLAGS`).
pub const IBV_WC_STANDARD_FLAGS: u64 = 0x7f;
/// `enum ibv_cq_init_attr_mask`.
pub const IBV_CQ_INIT_ATTR_MASK_FLAGS: u32 = 1;
pub const IBV_CQ_INIT_ATTR_MASK_PD: u32 = 2;
/// `enum ibv_create_cq_attr_flags`.
pub const IBV_CREATE_CQ_ATTR_SINGLE_THREADED: u32 = 1;
pub const IBV_CREATE_CQ_ATTR_IGNORE_OVERRUN: u32 = 2;
/// `ENOENT`: `start_poll` and `next_poll` found no completion.
pub const ENOENT: c_int = 2;

/// `enum ibv_qp_state`, `enum ibv_qp_type`: C enums, `unsigned int` here
/// so that no value the C side stores can be invalid in Rust.
pub type ibv_enum = u32;

/// `struct ibv_qp`.
#[repr(C)]
pub struct ibv_qp {
    pub context: *mut ibv_context,
    pub qp_context: *mut c_void,
    pub pd: *mut ibv_pd,
    pub send_cq: *mut ibv_cq,
    pub recv_cq: *mut ibv_cq,
    pub srq: *mut ibv_srq,
    pub handle: u32,
    pub qp_num: u32,
    pub state: ibv_enum,
    pub qp_type: ibv_enum,
    pub mutex: pthread_mutex_t,
    pub cond: pthread_cond_t,
    pub events_completed: u32,
}

/// `struct ibv_qp_ex`: `ibv_qp`, then the `ibv_wr_*` interface: `wr_id`
/// and `wr_flags`, which the application sets before each builder, and
/// the builders, setters and batch callbacks. Typed where librxud sets
/// them.
#[repr(C)]
pub struct ibv_qp_ex {
    pub qp_base: ibv_qp,
    pub comp_mask: u64,
    pub wr_id: u64,
    /// `enum ibv_send_flags` bits.
    pub wr_flags: u32,
    pub wr_atomic_cmp_swp: Option<unsafe extern "C" fn(*mut ibv_qp_ex, u32, u64, u64, u64)>,
    pub wr_atomic_fetch_add: Option<unsafe extern "C" fn(*mut ibv_qp_ex, u32, u64, u64)>,
    pub wr_bind_mw:
        Option<unsafe extern "C" fn(*mut ibv_qp_ex, *mut ibv_mw, u32, *const ibv_mw_bind_info)>,
    pub wr_local_inv: Option<unsafe extern "C" fn(*mut ibv_qp_ex, u32)>,
    pub wr_rdma_read: Option<unsafe extern "C" fn(*mut ibv_qp_ex, u32, u64)>,
    pub wr_rdma_write: Option<unsafe extern "C" fn(*mut ibv_qp_ex, u32, u64)>,
    pub wr_rdma_write_imm: Option<unsafe extern "C" fn(*mut ibv_qp_ex, u32, u64, u32)>,
    pub wr_send: Option<unsafe extern "C" fn(*mut ibv_qp_ex)>,
    pub wr_send_imm: Option<unsafe extern "C" fn(*mut ibv_qp_ex, u32)>,
    pub wr_send_inv: Option<unsafe extern "C" fn(*mut ibv_qp_ex, u32)>,
    pub wr_send_tso: Unused,
    pub wr_set_ud_addr: Option<unsafe extern "C" fn(*mut ibv_qp_ex, *mut ibv_ah, u32, u32)>,
    pub wr_set_xrc_srqn: Unused,
    pub wr_set_inline_data: Option<unsafe extern "C" fn(*mut ibv_qp_ex, *mut c_void, usize)>,
    pub wr_set_inline_data_list:
        Option<unsafe extern "C" fn(*mut ibv_qp_ex, usize, *const ibv_data_buf)>,
    pub wr_set_sge: Option<unsafe extern "C" fn(*mut ibv_qp_ex, u32, u64, u32)>,
    pub wr_set_sge_list: Option<unsafe extern "C" fn(*mut ibv_qp_ex, usize, *const ibv_sge)>,
    pub wr_start: Option<unsafe extern "C" fn(*mut ibv_qp_ex)>,
    pub wr_complete: Option<unsafe extern "C" fn(*mut ibv_qp_ex) -> c_int>,
    pub wr_abort: Option<unsafe extern "C" fn(*mut ibv_qp_ex)>,
    pub wr_atomic_write: Option<unsafe extern "C" fn(*mut ibv_qp_ex, u32, u64, *const c_void)>,
}

/// `struct ibv_data_buf`: one buffer of `ibv_wr_set_inline_data_list`.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct ibv_data_buf {
    pub addr: *mut c_void,
    pub length: usize,
}

/// `struct verbs_qp` of rdma-core 44: a union of `ibv_qp` and the larger
/// `ibv_qp_ex` (352 bytes, declared as the larger one), then `comp_mask`
/// and `xrcd`. (Newer rdma-core releases changed this layout; 44's is what
/// Debian 12 ships.)
#[repr(C)]
pub struct verbs_qp {
    pub qp_ex: ibv_qp_ex,
    /// `VERBS_QP_XRCD`, `VERBS_QP_EX`: librxud sets `VERBS_QP_EX` on QPs
    /// with the `ibv_wr_*` interface (what `ibv_qp_to_qp_ex` looks at).
    pub comp_mask: u32,
    /// `struct verbs_xrcd *`; unused (no XRC).
    pub xrcd: *mut c_void,
}

/// `VERBS_QP_EX` of `enum verbs_qp_mask`.
pub const VERBS_QP_EX: u32 = 2;

/// `struct ibv_qp_init_attr_ex`.
#[repr(C)]
pub struct ibv_qp_init_attr_ex {
    pub qp_context: *mut c_void,
    pub send_cq: *mut ibv_cq,
    pub recv_cq: *mut ibv_cq,
    pub srq: *mut ibv_srq,
    pub cap: ibv_qp_cap,
    pub qp_type: ibv_enum,
    pub sq_sig_all: c_int,
    /// `enum ibv_qp_init_attr_mask` bits.
    pub comp_mask: u32,
    pub pd: *mut ibv_pd,
    pub xrcd: *mut c_void,
    pub create_flags: u32,
    pub max_tso_header: u16,
    pub rwq_ind_tbl: *mut c_void,
    /// `struct ibv_rx_hash_conf`: function, key length, key, fields.
    _rx_hash_conf: [u64; 3],
    pub source_qpn: u32,
    /// `enum ibv_qp_create_send_ops_flags` bits.
    pub send_ops_flags: u64,
}

/// `enum ibv_qp_init_attr_mask`.
pub const IBV_QP_INIT_ATTR_PD: u32 = 1;
pub const IBV_QP_INIT_ATTR_CREATE_FLAGS: u32 = 4;
pub const IBV_QP_INIT_ATTR_SEND_OPS_FLAGS: u32 = 64;

/// `enum ibv_qp_create_send_ops_flags`.
pub const IBV_QP_EX_WITH_RDMA_WRITE: u64 = 1;
pub const IBV_QP_EX_WITH_RDMA_WRITE_WITH_IMM: u64 = 2;
pub const IBV_QP_EX_WITH_SEND: u64 = 4;
pub const IBV_QP_EX_WITH_SEND_WITH_IMM: u64 = 8;
pub const IBV_QP_EX_WITH_RDMA_READ: u64 = 16;
pub const IBV_QP_EX_WITH_ATOMIC_CMP_AND_SWP: u64 = 32;
pub const IBV_QP_EX_WITH_ATOMIC_FETCH_AND_ADD: u64 = 64;
pub const IBV_QP_EX_WITH_LOCAL_INV: u64 = 1 << 7;
pub const IBV_QP_EX_WITH_BIND_MW: u64 = 1 << 8;
pub const IBV_QP_EX_WITH_SEND_WITH_INV: u64 = 1 << 9;
pub const IBV_QP_EX_WITH_ATOMIC_WRITE: u64 = 1 << 12;
/// `IBV_QP_EX_WITH_FLUSH` of rdma-core 45 and later (rxudv.h's
/// `RXUDV_QP_EX_WITH_FLUSH` for rdma-core 44, whose `ibv_qp_ex` has no
/// `wr_flush`: librxud's `rxudv_wr_flush` builds the request).
pub const IBV_QP_EX_WITH_FLUSH: u64 = 1 << 11;
/// `IBV_ACCESS_ZERO_BASED`.
pub const IBV_ACCESS_ZERO_BASED: u32 = 1 << 5;

/// `struct ibv_qp_cap`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ibv_qp_cap {
    pub max_send_wr: u32,
    pub max_recv_wr: u32,
    pub max_send_sge: u32,
    pub max_recv_sge: u32,
    pub max_inline_data: u32,
}

/// `struct ibv_qp_init_attr`.
#[repr(C)]
pub struct ibv_qp_init_attr {
    pub qp_context: *mut c_void,
    pub send_cq: *mut ibv_cq,
    pub recv_cq: *mut ibv_cq,
    pub srq: *mut ibv_srq,
    pub cap: ibv_qp_cap,
    pub qp_type: ibv_enum,
    pub sq_sig_all: c_int,
}

/// `struct ibv_qp_attr`: passed through to libibverbs' helpers; the state
/// (its first member) is read for a move to RESET. Only ever behind a
/// pointer, so the rest stays opaque.
#[repr(C)]
pub struct ibv_qp_attr {
    pub qp_state: ibv_enum,
    _opaque: [u8; 0],
}

/// `struct ibv_srq`.
#[repr(C)]
pub struct ibv_srq {
    pub context: *mut ibv_context,
    pub srq_context: *mut c_void,
    pub pd: *mut ibv_pd,
    pub handle: u32,
    pub mutex: pthread_mutex_t,
    pub cond: pthread_cond_t,
    pub events_completed: u32,
}

/// `struct verbs_srq`.
#[repr(C)]
pub struct verbs_srq {
    pub srq: ibv_srq,
    /// `enum ibv_srq_type`; 0 (`IBV_SRQT_BASIC`) for librxud's SRQs.
    pub srq_type: ibv_enum,
    /// `struct verbs_xrcd *`; unused (no XRC).
    pub xrcd: *mut c_void,
    pub cq: *mut ibv_cq,
    pub srq_num: u32,
}

/// `struct ibv_srq_attr`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ibv_srq_attr {
    pub max_wr: u32,
    pub max_sge: u32,
    pub srq_limit: u32,
}

/// `struct ibv_srq_init_attr`.
#[repr(C)]
pub struct ibv_srq_init_attr {
    pub srq_context: *mut c_void,
    pub attr: ibv_srq_attr,
}

/// `union ibv_gid`: 16 bytes, aligned as its `__be64` view.
#[repr(C, align(8))]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ibv_gid {
    pub raw: [u8; 16],
}

/// `struct ibv_global_route`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ibv_global_route {
    pub dgid: ibv_gid,
    pub flow_label: u32,
    pub sgid_index: u8,
    pub hop_limit: u8,
    pub traffic_class: u8,
}

/// `struct ibv_ah_attr`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ibv_ah_attr {
    pub grh: ibv_global_route,
    pub dlid: u16,
    pub sl: u8,
    pub src_path_bits: u8,
    pub static_rate: u8,
    pub is_global: u8,
    pub port_num: u8,
}

/// `struct ibv_ah`.
#[repr(C)]
pub struct ibv_ah {
    pub context: *mut ibv_context,
    pub pd: *mut ibv_pd,
    pub handle: u32,
}

/// `struct ibv_wc`. The enumerations (`status`, `opcode`) and flags are
/// plain integers here: their values come from the kernel's CQEs.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ibv_wc {
    pub wr_id: u64,
    /// `enum ibv_wc_status`.
    pub status: ibv_enum,
    /// `enum ibv_wc_opcode`.
    pub opcode: ibv_enum,
    pub vendor_err: u32,
    pub byte_len: u32,
    /// Union of `imm_data` (network byte order) and `invalidated_rkey`.
    pub imm_data: u32,
    pub qp_num: u32,
    pub src_qp: u32,
    /// `enum ibv_wc_flags` bits.
    pub wc_flags: u32,
    pub pkey_index: u16,
    pub slid: u16,
    pub sl: u8,
    pub dlid_path_bits: u8,
}

/// `struct ibv_sge`: one scatter/gather element of a work request.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ibv_sge {
    pub addr: u64,
    pub length: u32,
    pub lkey: u32,
}

/// `wr.rdma` of `struct ibv_send_wr`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ibv_send_wr_rdma {
    pub remote_addr: u64,
    pub rkey: u32,
}

/// `wr.atomic` of `struct ibv_send_wr`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ibv_send_wr_atomic {
    pub remote_addr: u64,
    pub compare_add: u64,
    pub swap: u64,
    pub rkey: u32,
}

/// `wr.ud` of `struct ibv_send_wr`.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct ibv_send_wr_ud {
    pub ah: *mut ibv_ah,
    pub remote_qpn: u32,
    pub remote_qkey: u32,
}

/// The `wr` union of `struct ibv_send_wr`. Every member is integers and a
/// pointer, so any bytes are a valid value of each: reading a member is
/// sound whichever one the application wrote.
#[repr(C)]
#[derive(Clone, Copy)]
pub union ibv_send_wr_wr {
    pub rdma: ibv_send_wr_rdma,
    pub atomic: ibv_send_wr_atomic,
    pub ud: ibv_send_wr_ud,
}

/// `struct ibv_send_wr`. `opcode` and `send_flags` are plain integers: the
/// application may store any value there.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct ibv_send_wr {
    pub wr_id: u64,
    pub next: *mut ibv_send_wr,
    pub sg_list: *mut ibv_sge,
    pub num_sge: c_int,
    /// `enum ibv_wr_opcode`.
    pub opcode: ibv_enum,
    /// `enum ibv_send_flags` bits.
    pub send_flags: u32,
    /// Union of `imm_data` (network byte order) and `invalidate_rkey`.
    pub imm_data: u32,
    pub wr: ibv_send_wr_wr,
    /// `qp_type.xrc.remote_srqn`; unused (no XRC).
    pub qp_type: u32,
    /// The `bind_mw` and `tso` union.
    pub tail: ibv_send_wr_tail,
}

/// `struct ibv_mw`.
#[repr(C)]
pub struct ibv_mw {
    pub context: *mut ibv_context,
    pub pd: *mut ibv_pd,
    pub rkey: u32,
    pub handle: u32,
    /// `enum ibv_mw_type`.
    pub type_: ibv_enum,
}

/// `struct ibv_mw_bind_info`.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct ibv_mw_bind_info {
    pub mr: *mut ibv_mr,
    pub addr: u64,
    pub length: u64,
    /// `IBV_ACCESS_*` bits.
    pub mw_access_flags: u32,
}

/// `struct ibv_mw_bind` (`ibv_bind_mw`'s request).
#[repr(C)]
pub struct ibv_mw_bind {
    pub wr_id: u64,
    /// `enum ibv_send_flags` bits.
    pub send_flags: u32,
    pub bind_info: ibv_mw_bind_info,
}

/// `bind_mw` of `struct ibv_send_wr`.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct ibv_send_wr_bind_mw {
    pub mw: *mut ibv_mw,
    pub rkey: u32,
    pub bind_info: ibv_mw_bind_info,
}

/// The last union of `struct ibv_send_wr`: `bind_mw` or `tso`. Integers
/// and pointers only, so any bytes are a valid value of each member.
#[repr(C)]
#[derive(Clone, Copy)]
pub union ibv_send_wr_tail {
    pub bind_mw: ibv_send_wr_bind_mw,
    /// `tso` (unsupported), as the union's size.
    pub tso: [u64; 6],
}

impl Default for ibv_send_wr {
    /// All zero, NULL pointers.
    fn default() -> Self {
        Self {
            wr_id: 0,
            next: core::ptr::null_mut(),
            sg_list: core::ptr::null_mut(),
            num_sge: 0,
            opcode: 0,
            send_flags: 0,
            imm_data: 0,
            wr: ibv_send_wr_wr {
                atomic: ibv_send_wr_atomic::default(),
            },
            qp_type: 0,
            tail: ibv_send_wr_tail { tso: [0; 6] },
        }
    }
}

/// `struct ibv_recv_wr`.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct ibv_recv_wr {
    pub wr_id: u64,
    pub next: *mut ibv_recv_wr,
    pub sg_list: *mut ibv_sge,
    pub num_sge: c_int,
}

impl Default for ibv_recv_wr {
    /// All zero, NULL pointers.
    fn default() -> Self {
        Self {
            wr_id: 0,
            next: core::ptr::null_mut(),
            sg_list: core::ptr::null_mut(),
            num_sge: 0,
        }
    }
}

/// `enum ibv_qp_type` values of the QPs rxud makes.
pub const IBV_QPT_RC: ibv_enum = 2;
pub const IBV_QPT_UC: ibv_enum = 3;
pub const IBV_QPT_UD: ibv_enum = 4;
/// A driver-defined QP: rxud's XUD (`rxudv_create_qp`).
pub const IBV_QPT_DRIVER: ibv_enum = 255;

/// `enum ibv_qp_state` values before a QP can send.
pub const IBV_QPS_RESET: ibv_enum = 0;
pub const IBV_QPS_INIT: ibv_enum = 1;
pub const IBV_QPS_RTR: ibv_enum = 2;

/// `enum ibv_qp_attr_mask`: `ibv_modify_qp` changes the state.
pub const IBV_QP_STATE: c_int = 1;

/// `struct ibv_pd`.
#[repr(C)]
pub struct ibv_pd {
    pub context: *mut ibv_context,
    pub handle: u32,
}

/// `struct ibv_alloc_pd`.
#[repr(C)]
#[derive(Default)]
pub struct ibv_alloc_pd {
    pub hdr: ib_uverbs_cmd_hdr,
    pub response: u64,
}

/// `struct ib_uverbs_alloc_pd_resp`.
#[repr(C)]
#[derive(Default)]
pub struct ib_uverbs_alloc_pd_resp {
    pub pd_handle: u32,
}

/// `struct ibv_mr`.
#[repr(C)]
pub struct ibv_mr {
    pub context: *mut ibv_context,
    pub pd: *mut ibv_pd,
    pub addr: *mut c_void,
    pub length: usize,
    pub handle: u32,
    pub lkey: u32,
    pub rkey: u32,
}

/// `struct verbs_mr`: `ibv_mr` plus what libibverbs keeps about it.
#[repr(C)]
pub struct verbs_mr {
    pub ibv_mr: ibv_mr,
    pub mr_type: u32,
    pub access: c_int,
}

/// `struct ibv_alloc_mw`.
#[repr(C)]
#[derive(Default)]
pub struct ibv_alloc_mw {
    pub hdr: ib_uverbs_cmd_hdr,
    pub response: u64,
    pub pd_handle: u32,
    pub mw_type: u8,
    pub reserved: [u8; 3],
}

/// `struct ib_uverbs_alloc_mw_resp`.
#[repr(C)]
#[derive(Default)]
pub struct ib_uverbs_alloc_mw_resp {
    pub mw_handle: u32,
    pub rkey: u32,
}

/// `struct ibv_reg_mr`.
#[repr(C)]
#[derive(Default)]
pub struct ibv_reg_mr {
    pub hdr: ib_uverbs_cmd_hdr,
    pub response: u64,
    pub start: u64,
    pub length: u64,
    pub hca_va: u64,
    pub pd_handle: u32,
    pub access_flags: u32,
}

/// `struct ib_uverbs_reg_mr_resp`.
#[repr(C)]
#[derive(Default)]
pub struct ib_uverbs_reg_mr_resp {
    pub mr_handle: u32,
    pub lkey: u32,
    pub rkey: u32,
}

/// `struct ibv_rereg_mr`.
#[repr(C)]
#[derive(Default)]
pub struct ibv_rereg_mr {
    pub hdr: ib_uverbs_cmd_hdr,
    pub response: u64,
    pub mr_handle: u32,
    pub flags: u32,
    pub start: u64,
    pub length: u64,
    pub hca_va: u64,
    pub pd_handle: u32,
    pub access_flags: u32,
}

/// `struct ib_uverbs_rereg_mr_resp` (8-aligned: its driver data is
/// `__aligned_u64[]`).
#[repr(C, align(8))]
#[derive(Default)]
pub struct ib_uverbs_rereg_mr_resp {
    pub lkey: u32,
    pub rkey: u32,
}

/// `struct verbs_sysfs_dev`: what libibverbs knows about a device before a
/// provider claims it.
#[repr(C)]
pub struct verbs_sysfs_dev {
    _align: [u64; 0],
    _before_path: [u8; 176],
    /// `/sys/class/infiniband/<name>`, NUL-terminated.
    pub ibdev_path: [c_char; 256],
    _before_abi: [u8; 536],
    /// The device's `uverbs_abi_ver`.
    pub abi_ver: u32,
    _rest: [u8; 20],
}

/// `struct verbs_device`: allocated by the provider, zeroed, filled by
/// libibverbs. It starts with the `struct ibv_device` every context's
/// `device` points to; `ops` is the provider's table, by which librxud's
/// direct verbs tell its devices from other providers'.
#[repr(C)]
pub struct verbs_device {
    /// `struct ibv_device`.
    _device: [u64; 83],
    pub ops: *const verbs_device_ops,
    _rest: [u64; 5],
}

/// `struct verbs_context`: the extended context; `struct ibv_context` is its
/// last member.
#[repr(C)]
pub struct verbs_context {
    _opaque: [u64; 81],
}

/// Offset of `struct ibv_context` inside `struct verbs_context`.
pub const VERBS_CONTEXT_IBV_OFFSET: usize = 320;

/// A callback slot librxud does not fill (libibverbs then answers
/// `EOPNOTSUPP` itself).
pub type Unused = Option<unsafe extern "C" fn()>;

/// `struct verbs_match_ent`: one entry of a provider's match table.
#[repr(C)]
pub struct verbs_match_ent {
    pub driver_data: *const c_void,
    pub u: u64,
    pub vendor: u16,
    pub device: u16,
    /// `VERBS_MATCH_SENTINEL` (0) ends a table.
    pub kind: u8,
}

/// `struct verbs_device_ops`.
#[repr(C)]
pub struct verbs_device_ops {
    pub name: *const c_char,
    pub match_min_abi_version: u32,
    pub match_max_abi_version: u32,
    /// Never NULL: libibverbs walks it without checking when a device has
    /// a driver id (rdma-core 44, `match_driver_id`).
    pub match_table: *const verbs_match_ent,
    pub static_providers: *const *const verbs_device_ops,
    pub match_device: Option<unsafe extern "C" fn(*mut verbs_sysfs_dev) -> bool>,
    pub alloc_context:
        Option<unsafe extern "C" fn(*mut ibv_device, c_int, *mut c_void) -> *mut verbs_context>,
    pub import_context: Unused,
    pub alloc_device: Option<unsafe extern "C" fn(*mut verbs_sysfs_dev) -> *mut verbs_device>,
    pub uninit_device: Option<unsafe extern "C" fn(*mut verbs_device)>,
}

/// `struct verbs_context_ops`: 76 callbacks in alphabetical order; typed
/// where librxud sets them.
#[repr(C)]
#[derive(Default)]
pub struct verbs_context_ops {
    pub advise_mr: Unused,
    pub alloc_dm: Unused,
    pub alloc_mw: Option<unsafe extern "C" fn(*mut ibv_pd, ibv_enum) -> *mut ibv_mw>,
    pub alloc_null_mr: Unused,
    pub alloc_parent_domain: Unused,
    pub alloc_pd: Option<unsafe extern "C" fn(*mut ibv_context) -> *mut ibv_pd>,
    pub alloc_td: Unused,
    pub async_event: Unused,
    pub attach_counters_point_flow: Unused,
    pub attach_mcast: Option<unsafe extern "C" fn(*mut ibv_qp, *const ibv_gid, u16) -> c_int>,
    pub bind_mw: Option<unsafe extern "C" fn(*mut ibv_qp, *mut ibv_mw, *mut ibv_mw_bind) -> c_int>,
    pub close_xrcd: Unused,
    pub cq_event: Unused,
    pub create_ah: Option<unsafe extern "C" fn(*mut ibv_pd, *mut ibv_ah_attr) -> *mut ibv_ah>,
    pub create_counters: Unused,
    pub create_cq: Option<
        unsafe extern "C" fn(*mut ibv_context, c_int, *mut ibv_comp_channel, c_int) -> *mut ibv_cq,
    >,
    pub create_cq_ex:
        Option<unsafe extern "C" fn(*mut ibv_context, *mut ibv_cq_init_attr_ex) -> *mut ibv_cq_ex>,
    pub create_flow: Unused,
    pub create_flow_action_esp: Unused,
    pub create_qp: Option<unsafe extern "C" fn(*mut ibv_pd, *mut ibv_qp_init_attr) -> *mut ibv_qp>,
    pub create_qp_ex:
        Option<unsafe extern "C" fn(*mut ibv_context, *mut ibv_qp_init_attr_ex) -> *mut ibv_qp>,
    pub create_rwq_ind_table: Unused,
    pub create_srq:
        Option<unsafe extern "C" fn(*mut ibv_pd, *mut ibv_srq_init_attr) -> *mut ibv_srq>,
    pub create_srq_ex: Unused,
    pub create_wq: Unused,
    pub dealloc_mw: Option<unsafe extern "C" fn(*mut ibv_mw) -> c_int>,
    pub dealloc_pd: Option<unsafe extern "C" fn(*mut ibv_pd) -> c_int>,
    pub dealloc_td: Unused,
    pub dereg_mr: Option<unsafe extern "C" fn(*mut verbs_mr) -> c_int>,
    pub destroy_ah: Option<unsafe extern "C" fn(*mut ibv_ah) -> c_int>,
    pub destroy_counters: Unused,
    pub destroy_cq: Option<unsafe extern "C" fn(*mut ibv_cq) -> c_int>,
    pub destroy_flow: Unused,
    pub destroy_flow_action: Unused,
    pub destroy_qp: Option<unsafe extern "C" fn(*mut ibv_qp) -> c_int>,
    pub destroy_rwq_ind_table: Unused,
    pub destroy_srq: Option<unsafe extern "C" fn(*mut ibv_srq) -> c_int>,
    pub destroy_wq: Unused,
    pub detach_mcast: Option<unsafe extern "C" fn(*mut ibv_qp, *const ibv_gid, u16) -> c_int>,
    pub free_context: Option<unsafe extern "C" fn(*mut ibv_context)>,
    pub free_dm: Unused,
    pub get_srq_num: Unused,
    pub import_dm: Unused,
    pub import_mr: Unused,
    pub import_pd: Unused,
    pub modify_cq: Unused,
    pub modify_flow_action_esp: Unused,
    pub modify_qp: Option<unsafe extern "C" fn(*mut ibv_qp, *mut ibv_qp_attr, c_int) -> c_int>,
    pub modify_qp_rate_limit: Unused,
    pub modify_srq: Option<unsafe extern "C" fn(*mut ibv_srq, *mut ibv_srq_attr, c_int) -> c_int>,
    pub modify_wq: Unused,
    pub open_qp: Unused,
    pub open_xrcd: Unused,
    pub poll_cq: Option<unsafe extern "C" fn(*mut ibv_cq, c_int, *mut ibv_wc) -> c_int>,
    pub post_recv:
        Option<unsafe extern "C" fn(*mut ibv_qp, *mut ibv_recv_wr, *mut *mut ibv_recv_wr) -> c_int>,
    pub post_send:
        Option<unsafe extern "C" fn(*mut ibv_qp, *mut ibv_send_wr, *mut *mut ibv_send_wr) -> c_int>,
    pub post_srq_ops: Unused,
    pub post_srq_recv: Option<
        unsafe extern "C" fn(*mut ibv_srq, *mut ibv_recv_wr, *mut *mut ibv_recv_wr) -> c_int,
    >,
    pub query_device_ex:
        Option<unsafe extern "C" fn(*mut ibv_context, *const c_void, *mut c_void, usize) -> c_int>,
    pub query_ece: Unused,
    pub query_port: Option<unsafe extern "C" fn(*mut ibv_context, u8, *mut c_void) -> c_int>,
    pub query_qp: Option<
        unsafe extern "C" fn(*mut ibv_qp, *mut ibv_qp_attr, c_int, *mut ibv_qp_init_attr) -> c_int,
    >,
    pub query_qp_data_in_order: Unused,
    pub query_rt_values: Unused,
    pub query_srq: Option<unsafe extern "C" fn(*mut ibv_srq, *mut ibv_srq_attr) -> c_int>,
    pub read_counters: Unused,
    pub reg_dm_mr: Unused,
    pub reg_dmabuf_mr: Unused,
    pub reg_mr:
        Option<unsafe extern "C" fn(*mut ibv_pd, *mut c_void, usize, u64, c_int) -> *mut ibv_mr>,
    pub req_notify_cq: Option<unsafe extern "C" fn(*mut ibv_cq, c_int) -> c_int>,
    pub rereg_mr: Option<
        unsafe extern "C" fn(*mut verbs_mr, c_int, *mut ibv_pd, *mut c_void, usize, c_int) -> c_int,
    >,
    pub resize_cq: Option<unsafe extern "C" fn(*mut ibv_cq, c_int) -> c_int>,
    pub set_ece: Unused,
    pub unimport_dm: Unused,
    pub unimport_mr: Unused,
    pub unimport_pd: Unused,
}

/// `struct ib_uverbs_cmd_hdr`.
#[repr(C)]
#[derive(Default)]
pub struct ib_uverbs_cmd_hdr {
    pub command: u32,
    pub in_words: u16,
    pub out_words: u16,
}

/// `struct ibv_get_context`: header and core payload of GET_CONTEXT;
/// driver data follows it directly.
#[repr(C)]
#[derive(Default)]
pub struct ibv_get_context {
    pub hdr: ib_uverbs_cmd_hdr,
    pub response: u64,
}

/// `struct ib_uverbs_get_context_resp`; driver data follows it directly.
#[repr(C)]
#[derive(Default)]
pub struct ib_uverbs_get_context_resp {
    pub async_fd: u32,
    pub num_comp_vectors: u32,
}

/// `struct ibv_query_port`.
#[repr(C)]
#[derive(Default)]
pub struct ibv_query_port {
    pub hdr: ib_uverbs_cmd_hdr,
    pub response: u64,
    pub port_num: u8,
    pub reserved: [u8; 7],
}

/// `struct ibv_create_cq`: header and core payload of CREATE_CQ; driver
/// data follows it directly. libibverbs fills it in.
#[repr(C)]
#[derive(Default)]
pub struct ibv_create_cq {
    pub hdr: ib_uverbs_cmd_hdr,
    pub response: u64,
    pub user_handle: u64,
    pub cqe: u32,
    pub comp_vector: u32,
    pub comp_channel: i32,
    pub reserved: u32,
}

/// `struct ib_uverbs_create_cq_resp`; driver data follows it directly.
#[repr(C)]
#[derive(Default)]
pub struct ib_uverbs_create_cq_resp {
    /// C aligns it to 8 (`__aligned_u64 driver_data[]`).
    pub _align: [u64; 0],
    pub cq_handle: u32,
    pub cqe: u32,
}

/// `struct ibv_resize_cq`; driver data follows it directly.
#[repr(C)]
#[derive(Default)]
pub struct ibv_resize_cq {
    pub hdr: ib_uverbs_cmd_hdr,
    pub response: u64,
    pub cq_handle: u32,
    pub cqe: u32,
}

/// `struct ib_uverbs_resize_cq_resp`; driver data follows it directly.
#[repr(C)]
#[derive(Default)]
pub struct ib_uverbs_resize_cq_resp {
    pub _align: [u64; 0],
    pub cqe: u32,
    pub reserved: u32,
}

/// `struct ibv_create_qp`; driver data follows it directly.
#[repr(C)]
#[derive(Default)]
pub struct ibv_create_qp {
    pub hdr: ib_uverbs_cmd_hdr,
    pub response: u64,
    pub user_handle: u64,
    pub pd_handle: u32,
    pub send_cq_handle: u32,
    pub recv_cq_handle: u32,
    pub srq_handle: u32,
    pub max_send_wr: u32,
    pub max_recv_wr: u32,
    pub max_send_sge: u32,
    pub max_recv_sge: u32,
    pub max_inline_data: u32,
    pub sq_sig_all: u8,
    pub qp_type: u8,
    pub is_srq: u8,
    pub reserved: u8,
}

/// `struct ib_uverbs_create_qp_resp`; driver data follows it directly.
/// Only the `write()` path fills it: on the ioctl path (the one rdma-core 44
/// uses with a 6.12 kernel) the granted capabilities reach the caller's
/// `ibv_qp_init_attr.cap` through `ibv_cmd_create_qp` instead.
#[repr(C)]
#[derive(Default)]
pub struct ib_uverbs_create_qp_resp {
    pub qp_handle: u32,
    pub qpn: u32,
    pub max_send_wr: u32,
    pub max_recv_wr: u32,
    pub max_send_sge: u32,
    pub max_recv_sge: u32,
    pub max_inline_data: u32,
    pub reserved: u32,
}

/// `struct ibv_query_qp`.
#[repr(C)]
#[derive(Default)]
pub struct ibv_query_qp {
    pub hdr: ib_uverbs_cmd_hdr,
    pub response: u64,
    pub qp_handle: u32,
    pub attr_mask: u32,
}

/// `struct ibv_modify_qp`: libibverbs fills every field of the core
/// payload (`copy_modify_qp_fields`), so it is opaque here.
#[repr(C)]
#[derive(Default)]
pub struct ibv_modify_qp {
    pub hdr: ib_uverbs_cmd_hdr,
    /// `struct ib_uverbs_modify_qp` (two `ib_uverbs_qp_dest`, handle,
    /// mask, attributes).
    _core: [u64; 14],
}

/// `struct ibv_create_srq`; driver data follows it directly.
#[repr(C)]
#[derive(Default)]
pub struct ibv_create_srq {
    pub hdr: ib_uverbs_cmd_hdr,
    pub response: u64,
    pub user_handle: u64,
    pub pd_handle: u32,
    pub max_wr: u32,
    pub max_sge: u32,
    pub srq_limit: u32,
}

/// `struct ib_uverbs_create_srq_resp`; driver data follows it directly.
#[repr(C)]
#[derive(Default)]
pub struct ib_uverbs_create_srq_resp {
    pub srq_handle: u32,
    pub max_wr: u32,
    pub max_sge: u32,
    pub srqn: u32,
}

/// `struct ibv_modify_srq`.
#[repr(C)]
#[derive(Default)]
pub struct ibv_modify_srq {
    pub _align: [u64; 0],
    pub hdr: ib_uverbs_cmd_hdr,
    pub srq_handle: u32,
    pub attr_mask: u32,
    pub max_wr: u32,
    pub srq_limit: u32,
}

/// `struct ibv_query_srq`.
#[repr(C)]
#[derive(Default)]
pub struct ibv_query_srq {
    pub hdr: ib_uverbs_cmd_hdr,
    pub response: u64,
    pub srq_handle: u32,
    pub reserved: u32,
}

/// `struct ib_uverbs_create_ah_resp`: 4 bytes, and driver data follows it
/// directly, at offset 4 (the kernel puts the udata at `response +
/// sizeof(struct ib_uverbs_create_ah_resp)`).
#[repr(C)]
#[derive(Clone, Copy, Default)]
pub struct ib_uverbs_create_ah_resp {
    pub ah_handle: u32,
}

/// `IB_USER_VERBS_CMD_POST_SEND` of `enum ib_uverbs_write_cmds`.
pub const IB_USER_VERBS_CMD_POST_SEND: u32 = 28;

/// `struct ibv_post_send`: `struct ib_uverbs_cmd_hdr` and `struct
/// ib_uverbs_post_send` without work requests. With `wr_count` 0 it is a
/// doorbell (what rdma-core's rxe provider sends).
#[repr(C)]
#[derive(Default)]
pub struct ibv_post_send {
    pub hdr: ib_uverbs_cmd_hdr,
    /// Address of a `struct ib_uverbs_post_send_resp`.
    pub response: u64,
    pub qp_handle: u32,
    pub wr_count: u32,
    pub sge_count: u32,
    /// Bytes per work request in the (empty) list that would follow.
    pub wqe_size: u32,
}

/// `struct ib_uverbs_post_send_resp`.
#[repr(C)]
#[derive(Default)]
pub struct ib_uverbs_post_send_resp {
    /// How many work requests the kernel did not post.
    pub bad_wr: u32,
}

#[link(name = "ibverbs")]
extern "C" {
    pub fn verbs_register_driver_34(ops: *const verbs_device_ops);
    pub fn _verbs_init_and_alloc_context(
        device: *mut ibv_device,
        cmd_fd: c_int,
        alloc_size: usize,
        context_offset: *mut verbs_context,
        driver_id: u32,
    ) -> *mut c_void;
    pub fn verbs_uninit_context(context: *mut verbs_context);
    pub fn verbs_set_ops(context: *mut verbs_context, ops: *const verbs_context_ops);
    pub fn ibv_cmd_get_context(
        context: *mut verbs_context,
        cmd: *mut ibv_get_context,
        cmd_size: usize,
        resp: *mut ib_uverbs_get_context_resp,
        resp_size: usize,
    ) -> c_int;
    pub fn ibv_cmd_query_device_any(
        context: *mut ibv_context,
        input: *const c_void,
        attr: *mut c_void,
        attr_size: usize,
        resp: *mut c_void,
        resp_size: *mut usize,
    ) -> c_int;
    pub fn ibv_cmd_alloc_pd(
        context: *mut ibv_context,
        pd: *mut ibv_pd,
        cmd: *mut ibv_alloc_pd,
        cmd_size: usize,
        resp: *mut ib_uverbs_alloc_pd_resp,
        resp_size: usize,
    ) -> c_int;
    pub fn ibv_cmd_dealloc_pd(pd: *mut ibv_pd) -> c_int;
    pub fn ibv_cmd_reg_mr(
        pd: *mut ibv_pd,
        addr: *mut c_void,
        length: usize,
        hca_va: u64,
        access: c_int,
        vmr: *mut verbs_mr,
        cmd: *mut ibv_reg_mr,
        cmd_size: usize,
        resp: *mut ib_uverbs_reg_mr_resp,
        resp_size: usize,
    ) -> c_int;
    pub fn ibv_cmd_dereg_mr(vmr: *mut verbs_mr) -> c_int;
    pub fn ibv_cmd_alloc_mw(
        pd: *mut ibv_pd,
        type_: ibv_enum,
        mw: *mut ibv_mw,
        cmd: *mut ibv_alloc_mw,
        cmd_size: usize,
        resp: *mut ib_uverbs_alloc_mw_resp,
        resp_size: usize,
    ) -> c_int;
    pub fn ibv_cmd_dealloc_mw(mw: *mut ibv_mw) -> c_int;
    pub fn ibv_cmd_rereg_mr(
        vmr: *mut verbs_mr,
        flags: u32,
        addr: *mut c_void,
        length: usize,
        hca_va: u64,
        access: c_int,
        pd: *mut ibv_pd,
        cmd: *mut ibv_rereg_mr,
        cmd_size: usize,
        resp: *mut ib_uverbs_rereg_mr_resp,
        resp_size: usize,
    ) -> c_int;
    pub fn ibv_cmd_query_port(
        context: *mut ibv_context,
        port_num: u8,
        port_attr: *mut c_void,
        cmd: *mut ibv_query_port,
        cmd_size: usize,
    ) -> c_int;
    pub fn ibv_cmd_create_cq(
        context: *mut ibv_context,
        cqe: c_int,
        channel: *mut ibv_comp_channel,
        comp_vector: c_int,
        cq: *mut ibv_cq,
        cmd: *mut ibv_create_cq,
        cmd_size: usize,
        resp: *mut ib_uverbs_create_cq_resp,
        resp_size: usize,
    ) -> c_int;
    pub fn ibv_cmd_req_notify_cq(cq: *mut ibv_cq, solicited_only: c_int) -> c_int;
    pub fn ibv_cmd_resize_cq(
        cq: *mut ibv_cq,
        cqe: c_int,
        cmd: *mut ibv_resize_cq,
        cmd_size: usize,
        resp: *mut ib_uverbs_resize_cq_resp,
        resp_size: usize,
    ) -> c_int;
    pub fn ibv_cmd_destroy_cq(cq: *mut ibv_cq) -> c_int;
    pub fn ibv_cmd_create_qp(
        pd: *mut ibv_pd,
        qp: *mut ibv_qp,
        attr: *mut ibv_qp_init_attr,
        cmd: *mut ibv_create_qp,
        cmd_size: usize,
        resp: *mut ib_uverbs_create_qp_resp,
        resp_size: usize,
    ) -> c_int;
    pub fn ibv_cmd_query_qp(
        qp: *mut ibv_qp,
        qp_attr: *mut ibv_qp_attr,
        attr_mask: c_int,
        qp_init_attr: *mut ibv_qp_init_attr,
        cmd: *mut ibv_query_qp,
        cmd_size: usize,
    ) -> c_int;
    pub fn ibv_cmd_modify_qp(
        qp: *mut ibv_qp,
        attr: *mut ibv_qp_attr,
        attr_mask: c_int,
        cmd: *mut ibv_modify_qp,
        cmd_size: usize,
    ) -> c_int;
    pub fn ibv_cmd_destroy_qp(qp: *mut ibv_qp) -> c_int;
    pub fn ibv_cmd_create_srq(
        pd: *mut ibv_pd,
        srq: *mut ibv_srq,
        attr: *mut ibv_srq_init_attr,
        cmd: *mut ibv_create_srq,
        cmd_size: usize,
        resp: *mut ib_uverbs_create_srq_resp,
        resp_size: usize,
    ) -> c_int;
    pub fn ibv_cmd_modify_srq(
        srq: *mut ibv_srq,
        srq_attr: *mut ibv_srq_attr,
        srq_attr_mask: c_int,
        cmd: *mut ibv_modify_srq,
        cmd_size: usize,
    ) -> c_int;
    pub fn ibv_cmd_query_srq(
        srq: *mut ibv_srq,
        srq_attr: *mut ibv_srq_attr,
        cmd: *mut ibv_query_srq,
        cmd_size: usize,
    ) -> c_int;
    pub fn ibv_cmd_destroy_srq(srq: *mut ibv_srq) -> c_int;
    /// rdma-core 44: no driver request, only a driver response after the
    /// core one (newer releases differ).
    pub fn ibv_cmd_create_ah(
        pd: *mut ibv_pd,
        ah: *mut ibv_ah,
        attr: *mut ibv_ah_attr,
        resp: *mut ib_uverbs_create_ah_resp,
        resp_size: usize,
    ) -> c_int;
    pub fn ibv_cmd_destroy_ah(ah: *mut ibv_ah) -> c_int;
    pub fn ibv_cmd_attach_mcast(qp: *mut ibv_qp, gid: *const ibv_gid, lid: u16) -> c_int;
    pub fn ibv_cmd_detach_mcast(qp: *mut ibv_qp, gid: *const ibv_gid, lid: u16) -> c_int;
    /// Prints (`vfprintf`) to libibverbs' log if `level` is at most the
    /// `VERBS_LOG_LEVEL` the user chose; keeps `errno`.
    pub fn __verbs_log(ctx: *mut verbs_context, level: u32, fmt: *const c_char, ...);
}

/// `VERBS_LOG_ERR`, the lowest level `__verbs_log` prints at.
pub const VERBS_LOG_ERR: u32 = 1;

/// `EPROTO` (Linux, all architectures).
pub const EPROTO: core::ffi::c_int = 71;
/// `EIO`.
pub const EIO: core::ffi::c_int = 5;
/// `EINVAL`.
pub const EINVAL: core::ffi::c_int = 22;
/// `EOPNOTSUPP`.
pub const EOPNOTSUPP: core::ffi::c_int = 95;
/// `ENOMEM`.
pub const ENOMEM: core::ffi::c_int = 12;
/// `EINTR`.
pub const EINTR: core::ffi::c_int = 4;

/// `IBV_SRQ_MAX_WR` of `enum ibv_srq_attr_mask`: resize the SRQ.
pub const IBV_SRQ_MAX_WR: c_int = 1;

/// `mmap` protections and flags (Linux, x86_64).
pub const PROT_READ: c_int = 1;
pub const PROT_WRITE: c_int = 2;
pub const MAP_SHARED: c_int = 1;
/// `MAP_FAILED`, `(void *)-1`.
pub const MAP_FAILED: *mut c_void = usize::MAX as *mut c_void;

extern "C" {
    pub fn calloc(n: usize, size: usize) -> *mut c_void;
    pub fn free(ptr: *mut c_void);
    pub fn __errno_location() -> *mut c_int;
    /// `off_t` is 64 bits on x86_64.
    pub fn mmap(
        addr: *mut c_void,
        len: usize,
        prot: c_int,
        flags: c_int,
        fd: c_int,
        offset: i64,
    ) -> *mut c_void;
    pub fn munmap(addr: *mut c_void, len: usize) -> c_int;
    pub fn write(fd: c_int, buf: *const c_void, count: usize) -> isize;
}

/// Sizes and offsets of rdma-core 44 on x86_64.
mod layout {
    use super::*;
    use core::mem::{align_of, offset_of, size_of};

    const _: () = assert!(size_of::<verbs_match_ent>() == 24);
    const _: () = assert!(size_of::<verbs_device_ops>() == 72);
    const _: () = assert!(offset_of!(verbs_device_ops, alloc_context) == 40);
    const _: () = assert!(offset_of!(verbs_device_ops, alloc_device) == 56);
    const _: () = assert!(size_of::<verbs_sysfs_dev>() == 992);
    const _: () = assert!(offset_of!(verbs_sysfs_dev, ibdev_path) == 176);
    const _: () = assert!(offset_of!(verbs_sysfs_dev, abi_ver) == 968);
    const _: () = assert!(size_of::<verbs_device>() == 712);
    const _: () = assert!(offset_of!(verbs_device, ops) == 664);
    const _: () = assert!(size_of::<verbs_context>() == 648);
    const _: () = assert!(size_of::<verbs_context_ops>() == 608);
    const _: () = assert!(offset_of!(verbs_context_ops, free_context) == 312);
    const _: () = assert!(offset_of!(verbs_context_ops, query_device_ex) == 464);
    const _: () = assert!(offset_of!(verbs_context_ops, query_port) == 480);
    const _: () = assert!(size_of::<ibv_get_context>() == 16);
    const _: () = assert!(size_of::<ib_uverbs_get_context_resp>() == 8);
    const _: () = assert!(size_of::<ibv_query_port>() == 24);
    const _: () = assert!(size_of::<ibv_pd>() == 16);
    const _: () = assert!(size_of::<ibv_mr>() == 48);
    const _: () = assert!(size_of::<verbs_mr>() == 56);
    const _: () = assert!(size_of::<ibv_reg_mr>() == 48);
    const _: () = assert!(size_of::<ib_uverbs_reg_mr_resp>() == 12);
    const _: () = assert!(size_of::<ibv_rereg_mr>() == 56);
    const _: () = assert!(offset_of!(ibv_rereg_mr, pd_handle) == 48);
    const _: () = assert!(size_of::<ib_uverbs_rereg_mr_resp>() == 8);
    const _: () = assert!(offset_of!(verbs_context_ops, reg_mr) == 544);
    const _: () = assert!(offset_of!(verbs_context_ops, dereg_mr) == 224);
    const _: () = assert!(size_of::<ibv_alloc_pd>() == 16);
    const _: () = assert!(offset_of!(verbs_context_ops, alloc_pd) == 40);
    const _: () = assert!(offset_of!(verbs_context_ops, dealloc_pd) == 208);

    // Contexts: `ibv_context` ends `verbs_context`.
    const _: () = assert!(size_of::<ibv_context>() == 328);
    const _: () =
        assert!(VERBS_CONTEXT_IBV_OFFSET + size_of::<ibv_context>() == size_of::<verbs_context>());
    const _: () = assert!(offset_of!(ibv_context, cmd_fd) == 264);
    const _: () = assert!(offset_of!(ibv_context, async_fd) == 268);
    const _: () = assert!(offset_of!(ibv_context, mutex) == 280);
    const _: () = assert!(offset_of!(ibv_context, abi_compat) == 320);
    const _: () = assert!(size_of::<pthread_mutex_t>() == 40);
    const _: () = assert!(size_of::<pthread_cond_t>() == 48);

    // CQs.
    const _: () = assert!(size_of::<ibv_cq>() == 128);
    const _: () = assert!(offset_of!(ibv_cq, handle) == 24);
    const _: () = assert!(offset_of!(ibv_cq, cqe) == 28);
    const _: () = assert!(offset_of!(ibv_cq, mutex) == 32);
    const _: () = assert!(offset_of!(ibv_cq, cond) == 72);
    const _: () = assert!(offset_of!(ibv_cq, comp_events_completed) == 120);
    const _: () = assert!(offset_of!(ibv_cq, async_events_completed) == 124);
    const _: () = assert!(size_of::<verbs_cq>() == 288);
    const _: () = assert!(size_of::<ibv_cq_ex>() == 288);
    const _: () = assert!(offset_of!(ibv_cq_ex, comp_mask) == 128);
    const _: () = assert!(offset_of!(ibv_cq_ex, status) == 132);
    const _: () = assert!(offset_of!(ibv_cq_ex, wr_id) == 136);
    const _: () = assert!(offset_of!(ibv_cq_ex, start_poll) == 144);
    const _: () = assert!(offset_of!(ibv_cq_ex, next_poll) == 152);
    const _: () = assert!(offset_of!(ibv_cq_ex, end_poll) == 160);
    const _: () = assert!(offset_of!(ibv_cq_ex, read_opcode) == 168);
    const _: () = assert!(offset_of!(ibv_cq_ex, read_vendor_err) == 176);
    const _: () = assert!(offset_of!(ibv_cq_ex, read_byte_len) == 184);
    const _: () = assert!(offset_of!(ibv_cq_ex, read_imm_data) == 192);
    const _: () = assert!(offset_of!(ibv_cq_ex, read_qp_num) == 200);
    const _: () = assert!(offset_of!(ibv_cq_ex, read_src_qp) == 208);
    const _: () = assert!(offset_of!(ibv_cq_ex, read_wc_flags) == 216);
    const _: () = assert!(offset_of!(ibv_cq_ex, read_slid) == 224);
    const _: () = assert!(offset_of!(ibv_cq_ex, read_sl) == 232);
    const _: () = assert!(offset_of!(ibv_cq_ex, read_dlid_path_bits) == 240);
    const _: () = assert!(offset_of!(ibv_cq_ex, read_completion_ts) == 248);
    const _: () = assert!(offset_of!(ibv_cq_ex, read_completion_wallclock_ns) == 280);
    const _: () = assert!(size_of::<ibv_poll_cq_attr>() == 4);
    const _: () = assert!(size_of::<ibv_cq_init_attr_ex>() == 56);
    const _: () = assert!(offset_of!(ibv_cq_init_attr_ex, cq_context) == 8);
    const _: () = assert!(offset_of!(ibv_cq_init_attr_ex, channel) == 16);
    const _: () = assert!(offset_of!(ibv_cq_init_attr_ex, comp_vector) == 24);
    const _: () = assert!(offset_of!(ibv_cq_init_attr_ex, wc_flags) == 32);
    const _: () = assert!(offset_of!(ibv_cq_init_attr_ex, comp_mask) == 40);
    const _: () = assert!(offset_of!(ibv_cq_init_attr_ex, flags) == 44);
    const _: () = assert!(offset_of!(ibv_cq_init_attr_ex, parent_domain) == 48);
    const _: () = assert!(size_of::<ibv_wc>() == 48);
    const _: () = assert!(offset_of!(ibv_wc, status) == 8);
    const _: () = assert!(offset_of!(ibv_wc, opcode) == 12);
    const _: () = assert!(offset_of!(ibv_wc, vendor_err) == 16);
    const _: () = assert!(offset_of!(ibv_wc, byte_len) == 20);
    const _: () = assert!(offset_of!(ibv_wc, imm_data) == 24);
    const _: () = assert!(offset_of!(ibv_wc, qp_num) == 28);
    const _: () = assert!(offset_of!(ibv_wc, src_qp) == 32);
    const _: () = assert!(offset_of!(ibv_wc, wc_flags) == 36);
    const _: () = assert!(offset_of!(ibv_wc, pkey_index) == 40);
    const _: () = assert!(offset_of!(ibv_wc, slid) == 42);
    const _: () = assert!(offset_of!(ibv_wc, sl) == 44);
    const _: () = assert!(offset_of!(ibv_wc, dlid_path_bits) == 45);
    const _: () = assert!(size_of::<ibv_create_cq>() == 40 && align_of::<ibv_create_cq>() == 8);
    const _: () = assert!(offset_of!(ibv_create_cq, comp_channel) == 32);
    const _: () = assert!(
        size_of::<ib_uverbs_create_cq_resp>() == 8 && align_of::<ib_uverbs_create_cq_resp>() == 8
    );
    const _: () = assert!(size_of::<ibv_resize_cq>() == 24 && align_of::<ibv_resize_cq>() == 8);
    const _: () = assert!(offset_of!(ibv_resize_cq, cq_handle) == 16);
    const _: () = assert!(
        size_of::<ib_uverbs_resize_cq_resp>() == 8 && align_of::<ib_uverbs_resize_cq_resp>() == 8
    );

    // QPs.
    const _: () = assert!(size_of::<ibv_qp>() == 160);
    const _: () = assert!(offset_of!(ibv_qp, srq) == 40);
    const _: () = assert!(offset_of!(ibv_qp, handle) == 48);
    const _: () = assert!(offset_of!(ibv_qp, qp_num) == 52);
    const _: () = assert!(offset_of!(ibv_qp_attr, qp_state) == 0);
    const _: () = assert!(offset_of!(ibv_qp, state) == 56);
    const _: () = assert!(offset_of!(ibv_qp, qp_type) == 60);
    const _: () = assert!(offset_of!(ibv_qp, mutex) == 64);
    const _: () = assert!(offset_of!(ibv_qp, cond) == 104);
    const _: () = assert!(offset_of!(ibv_qp, events_completed) == 152);
    const _: () = assert!(size_of::<verbs_qp>() == 368);
    const _: () = assert!(size_of::<ibv_qp_ex>() == 352);
    const _: () = assert!(offset_of!(ibv_qp_ex, comp_mask) == 160);
    const _: () = assert!(offset_of!(ibv_qp_ex, wr_id) == 168);
    const _: () = assert!(offset_of!(ibv_qp_ex, wr_flags) == 176);
    const _: () = assert!(offset_of!(ibv_qp_ex, wr_atomic_cmp_swp) == 184);
    const _: () = assert!(offset_of!(ibv_qp_ex, wr_atomic_fetch_add) == 192);
    const _: () = assert!(offset_of!(ibv_qp_ex, wr_bind_mw) == 200);
    const _: () = assert!(offset_of!(ibv_qp_ex, wr_local_inv) == 208);
    const _: () = assert!(offset_of!(ibv_qp_ex, wr_rdma_read) == 216);
    const _: () = assert!(offset_of!(ibv_qp_ex, wr_rdma_write) == 224);
    const _: () = assert!(offset_of!(ibv_qp_ex, wr_rdma_write_imm) == 232);
    const _: () = assert!(offset_of!(ibv_qp_ex, wr_send) == 240);
    const _: () = assert!(offset_of!(ibv_qp_ex, wr_send_imm) == 248);
    const _: () = assert!(offset_of!(ibv_qp_ex, wr_send_inv) == 256);
    const _: () = assert!(offset_of!(ibv_qp_ex, wr_send_tso) == 264);
    const _: () = assert!(offset_of!(ibv_qp_ex, wr_set_ud_addr) == 272);
    const _: () = assert!(offset_of!(ibv_qp_ex, wr_set_xrc_srqn) == 280);
    const _: () = assert!(offset_of!(ibv_qp_ex, wr_set_inline_data) == 288);
    const _: () = assert!(offset_of!(ibv_qp_ex, wr_set_inline_data_list) == 296);
    const _: () = assert!(offset_of!(ibv_qp_ex, wr_set_sge) == 304);
    const _: () = assert!(offset_of!(ibv_qp_ex, wr_set_sge_list) == 312);
    const _: () = assert!(offset_of!(ibv_qp_ex, wr_start) == 320);
    const _: () = assert!(offset_of!(ibv_qp_ex, wr_complete) == 328);
    const _: () = assert!(offset_of!(ibv_qp_ex, wr_abort) == 336);
    const _: () = assert!(offset_of!(ibv_qp_ex, wr_atomic_write) == 344);
    const _: () = assert!(size_of::<ibv_data_buf>() == 16);
    // Memory windows.
    const _: () = assert!(size_of::<ibv_mw>() == 32);
    const _: () = assert!(offset_of!(ibv_mw, rkey) == 16);
    const _: () = assert!(offset_of!(ibv_mw, type_) == 24);
    const _: () = assert!(size_of::<ibv_mw_bind_info>() == 32);
    const _: () = assert!(size_of::<ibv_mw_bind>() == 48);
    const _: () = assert!(offset_of!(ibv_mw_bind, bind_info) == 16);
    const _: () = assert!(size_of::<ibv_send_wr_bind_mw>() == 48);
    const _: () = assert!(offset_of!(ibv_send_wr_bind_mw, bind_info) == 16);
    const _: () = assert!(size_of::<ibv_alloc_mw>() == 24);
    const _: () = assert!(size_of::<ibv_qp_init_attr_ex>() == 136);
    const _: () = assert!(offset_of!(ibv_qp_init_attr_ex, comp_mask) == 60);
    const _: () = assert!(offset_of!(ibv_qp_init_attr_ex, pd) == 64);
    const _: () = assert!(offset_of!(ibv_qp_init_attr_ex, create_flags) == 80);
    const _: () = assert!(offset_of!(ibv_qp_init_attr_ex, send_ops_flags) == 128);
    const _: () = assert!(offset_of!(verbs_qp, comp_mask) == 352);
    const _: () = assert!(offset_of!(verbs_qp, xrcd) == 360);
    const _: () = assert!(size_of::<ibv_qp_cap>() == 20);
    const _: () = assert!(offset_of!(ibv_qp_cap, max_inline_data) == 16);
    const _: () = assert!(size_of::<ibv_qp_init_attr>() == 64);
    const _: () = assert!(offset_of!(ibv_qp_init_attr, srq) == 24);
    const _: () = assert!(offset_of!(ibv_qp_init_attr, cap) == 32);
    const _: () = assert!(offset_of!(ibv_qp_init_attr, qp_type) == 52);
    const _: () = assert!(offset_of!(ibv_qp_init_attr, sq_sig_all) == 56);
    const _: () = assert!(size_of::<ibv_create_qp>() == 64 && align_of::<ibv_create_qp>() == 8);
    const _: () = assert!(offset_of!(ibv_create_qp, pd_handle) == 24);
    const _: () = assert!(offset_of!(ibv_create_qp, max_send_wr) == 40);
    const _: () = assert!(offset_of!(ibv_create_qp, max_inline_data) == 56);
    const _: () = assert!(offset_of!(ibv_create_qp, reserved) == 63);
    const _: () = assert!(
        size_of::<ib_uverbs_create_qp_resp>() == 32 && align_of::<ib_uverbs_create_qp_resp>() == 4
    );
    const _: () = assert!(offset_of!(ib_uverbs_create_qp_resp, max_inline_data) == 24);
    const _: () = assert!(size_of::<ibv_query_qp>() == 24 && align_of::<ibv_query_qp>() == 8);
    const _: () = assert!(offset_of!(ibv_query_qp, attr_mask) == 20);
    const _: () = assert!(size_of::<ibv_modify_qp>() == 120 && align_of::<ibv_modify_qp>() == 8);

    // SRQs.
    const _: () = assert!(size_of::<ibv_srq>() == 128);
    const _: () = assert!(offset_of!(ibv_srq, handle) == 24);
    const _: () = assert!(offset_of!(ibv_srq, mutex) == 32);
    const _: () = assert!(offset_of!(ibv_srq, cond) == 72);
    const _: () = assert!(offset_of!(ibv_srq, events_completed) == 120);
    const _: () = assert!(size_of::<verbs_srq>() == 160);
    const _: () = assert!(offset_of!(verbs_srq, srq_type) == 128);
    const _: () = assert!(offset_of!(verbs_srq, xrcd) == 136);
    const _: () = assert!(offset_of!(verbs_srq, cq) == 144);
    const _: () = assert!(offset_of!(verbs_srq, srq_num) == 152);
    const _: () = assert!(size_of::<ibv_srq_attr>() == 12);
    const _: () = assert!(size_of::<ibv_srq_init_attr>() == 24);
    const _: () = assert!(offset_of!(ibv_srq_init_attr, attr) == 8);
    const _: () = assert!(size_of::<ibv_create_srq>() == 40 && align_of::<ibv_create_srq>() == 8);
    const _: () = assert!(offset_of!(ibv_create_srq, pd_handle) == 24);
    const _: () = assert!(offset_of!(ibv_create_srq, srq_limit) == 36);
    const _: () = assert!(
        size_of::<ib_uverbs_create_srq_resp>() == 16
            && align_of::<ib_uverbs_create_srq_resp>() == 4
    );
    const _: () = assert!(size_of::<ibv_modify_srq>() == 24 && align_of::<ibv_modify_srq>() == 8);
    const _: () = assert!(offset_of!(ibv_modify_srq, srq_handle) == 8);
    const _: () = assert!(offset_of!(ibv_modify_srq, srq_limit) == 20);
    const _: () = assert!(size_of::<ibv_query_srq>() == 24 && align_of::<ibv_query_srq>() == 8);
    const _: () = assert!(offset_of!(ibv_query_srq, srq_handle) == 16);

    // AHs.
    const _: () = assert!(size_of::<ibv_ah>() == 24);
    const _: () = assert!(offset_of!(ibv_ah, handle) == 16);
    const _: () = assert!(size_of::<ibv_gid>() == 16 && align_of::<ibv_gid>() == 8);
    const _: () = assert!(size_of::<ibv_global_route>() == 24);
    const _: () = assert!(offset_of!(ibv_global_route, flow_label) == 16);
    const _: () = assert!(offset_of!(ibv_global_route, traffic_class) == 22);
    const _: () = assert!(size_of::<ibv_ah_attr>() == 32);
    const _: () = assert!(offset_of!(ibv_ah_attr, dlid) == 24);
    const _: () = assert!(offset_of!(ibv_ah_attr, is_global) == 29);
    const _: () = assert!(offset_of!(ibv_ah_attr, port_num) == 30);
    const _: () = assert!(
        size_of::<ib_uverbs_create_ah_resp>() == 4 && align_of::<ib_uverbs_create_ah_resp>() == 4
    );

    // Work requests and the send doorbell.
    const _: () = assert!(size_of::<ibv_sge>() == 16);
    const _: () = assert!(size_of::<ibv_send_wr>() == 128 && align_of::<ibv_send_wr>() == 8);
    const _: () = assert!(offset_of!(ibv_send_wr, next) == 8);
    const _: () = assert!(offset_of!(ibv_send_wr, sg_list) == 16);
    const _: () = assert!(offset_of!(ibv_send_wr, num_sge) == 24);
    const _: () = assert!(offset_of!(ibv_send_wr, opcode) == 28);
    const _: () = assert!(offset_of!(ibv_send_wr, send_flags) == 32);
    const _: () = assert!(offset_of!(ibv_send_wr, imm_data) == 36);
    const _: () = assert!(offset_of!(ibv_send_wr, wr) == 40);
    const _: () = assert!(offset_of!(ibv_send_wr, tail) == 80);
    const _: () = assert!(offset_of!(ibv_send_wr, wr.rdma.remote_addr) == 40);
    const _: () = assert!(offset_of!(ibv_send_wr, wr.rdma.rkey) == 48);
    const _: () = assert!(offset_of!(ibv_send_wr, wr.atomic.remote_addr) == 40);
    const _: () = assert!(offset_of!(ibv_send_wr, wr.atomic.compare_add) == 48);
    const _: () = assert!(offset_of!(ibv_send_wr, wr.atomic.swap) == 56);
    const _: () = assert!(offset_of!(ibv_send_wr, wr.atomic.rkey) == 64);
    const _: () = assert!(offset_of!(ibv_send_wr, wr.ud.ah) == 40);
    const _: () = assert!(offset_of!(ibv_send_wr, wr.ud.remote_qpn) == 48);
    const _: () = assert!(offset_of!(ibv_send_wr, wr.ud.remote_qkey) == 52);
    const _: () = assert!(offset_of!(ibv_send_wr, qp_type) == 72);
    const _: () = assert!(size_of::<ibv_recv_wr>() == 32 && align_of::<ibv_recv_wr>() == 8);
    const _: () = assert!(offset_of!(ibv_recv_wr, next) == 8);
    const _: () = assert!(offset_of!(ibv_recv_wr, sg_list) == 16);
    const _: () = assert!(offset_of!(ibv_recv_wr, num_sge) == 24);
    const _: () = assert!(size_of::<ibv_post_send>() == 32 && align_of::<ibv_post_send>() == 8);
    const _: () = assert!(offset_of!(ibv_post_send, response) == 8);
    const _: () = assert!(offset_of!(ibv_post_send, qp_handle) == 16);
    const _: () = assert!(offset_of!(ibv_post_send, wr_count) == 20);
    const _: () = assert!(offset_of!(ibv_post_send, sge_count) == 24);
    const _: () = assert!(offset_of!(ibv_post_send, wqe_size) == 28);
    const _: () = assert!(
        size_of::<ib_uverbs_post_send_resp>() == 4 && align_of::<ib_uverbs_post_send_resp>() == 4
    );

    // The callbacks librxud sets.
    const _: () = assert!(offset_of!(verbs_context_ops, create_ah) == 104);
    const _: () = assert!(offset_of!(verbs_context_ops, create_cq) == 120);
    const _: () = assert!(offset_of!(verbs_context_ops, create_cq_ex) == 128);
    const _: () = assert!(offset_of!(verbs_context_ops, create_qp_ex) == 160);
    const _: () = assert!(offset_of!(verbs_context_ops, create_qp) == 152);
    const _: () = assert!(offset_of!(verbs_context_ops, create_srq) == 176);
    const _: () = assert!(offset_of!(verbs_context_ops, destroy_ah) == 232);
    const _: () = assert!(offset_of!(verbs_context_ops, destroy_cq) == 248);
    const _: () = assert!(offset_of!(verbs_context_ops, destroy_qp) == 272);
    const _: () = assert!(offset_of!(verbs_context_ops, destroy_srq) == 288);
    const _: () = assert!(offset_of!(verbs_context_ops, modify_qp) == 376);
    const _: () = assert!(offset_of!(verbs_context_ops, modify_srq) == 392);
    const _: () = assert!(offset_of!(verbs_context_ops, poll_cq) == 424);
    const _: () = assert!(offset_of!(verbs_context_ops, post_recv) == 432);
    const _: () = assert!(offset_of!(verbs_context_ops, post_send) == 440);
    const _: () = assert!(offset_of!(verbs_context_ops, post_srq_recv) == 456);
    const _: () = assert!(offset_of!(verbs_context_ops, query_qp) == 488);
    const _: () = assert!(offset_of!(verbs_context_ops, query_srq) == 512);
    const _: () = assert!(offset_of!(verbs_context_ops, req_notify_cq) == 552);
    const _: () = assert!(offset_of!(verbs_context_ops, resize_cq) == 568);
}
