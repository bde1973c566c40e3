// SPDX-License-Identifier: GPL-2.0 OR Linux-OpenIB

//! The provider interface of libibverbs (rdma-core 44, private ABI
//! `IBVERBS_PRIVATE_34`), declared by hand.
//!
//! Debian installs only the public verbs headers; the provider interface
//! (`driver.h`) is not installed. The structures below declare what librxud
//! touches, and treat the rest as opaque bytes of the right size. Sizes and
//! offsets were read off rdma-core 44 on x86_64 and are asserted at the end
//! of this file, so a mismatch cannot go unnoticed.

#![allow(non_camel_case_types)]

use core::ffi::{c_char, c_int, c_void};

/// `struct ibv_device`: only passed through.
#[repr(C)]
pub struct ibv_device {
    _opaque: [u8; 0],
}

/// `struct ibv_context`: only passed through; found at a fixed offset in
/// `verbs_context`.
#[repr(C)]
pub struct ibv_context {
    _opaque: [u8; 0],
}

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
/// libibverbs.
#[repr(C)]
pub struct verbs_device {
    _opaque: [u64; 89],
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
    pub alloc_context: Option<unsafe extern "C" fn(*mut ibv_device, c_int, *mut c_void) -> *mut verbs_context>,
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
    pub alloc_mw: Unused,
    pub alloc_null_mr: Unused,
    pub alloc_parent_domain: Unused,
    pub alloc_pd: Option<unsafe extern "C" fn(*mut ibv_context) -> *mut ibv_pd>,
    pub alloc_td: Unused,
    pub async_event: Unused,
    pub attach_counters_point_flow: Unused,
    pub attach_mcast: Unused,
    pub bind_mw: Unused,
    pub close_xrcd: Unused,
    pub cq_event: Unused,
    pub create_ah: Unused,
    pub create_counters: Unused,
    pub create_cq: Unused,
    pub create_cq_ex: Unused,
    pub create_flow: Unused,
    pub create_flow_action_esp: Unused,
    pub create_qp: Unused,
    pub create_qp_ex: Unused,
    pub create_rwq_ind_table: Unused,
    pub create_srq: Unused,
    pub create_srq_ex: Unused,
    pub create_wq: Unused,
    pub dealloc_mw: Unused,
    pub dealloc_pd: Option<unsafe extern "C" fn(*mut ibv_pd) -> c_int>,
    pub dealloc_td: Unused,
    pub dereg_mr: Option<unsafe extern "C" fn(*mut verbs_mr) -> c_int>,
    pub destroy_ah: Unused,
    pub destroy_counters: Unused,
    pub destroy_cq: Unused,
    pub destroy_flow: Unused,
    pub destroy_flow_action: Unused,
    pub destroy_qp: Unused,
    pub destroy_rwq_ind_table: Unused,
    pub destroy_srq: Unused,
    pub destroy_wq: Unused,
    pub detach_mcast: Unused,
    pub free_context: Option<unsafe extern "C" fn(*mut ibv_context)>,
    pub free_dm: Unused,
    pub get_srq_num: Unused,
    pub import_dm: Unused,
    pub import_mr: Unused,
    pub import_pd: Unused,
    pub modify_cq: Unused,
    pub modify_flow_action_esp: Unused,
    pub modify_qp: Unused,
    pub modify_qp_rate_limit: Unused,
    pub modify_srq: Unused,
    pub modify_wq: Unused,
    pub open_qp: Unused,
    pub open_xrcd: Unused,
    pub poll_cq: Unused,
    pub post_recv: Unused,
    pub post_send: Unused,
    pub post_srq_ops: Unused,
    pub post_srq_recv: Unused,
    pub query_device_ex:
        Option<unsafe extern "C" fn(*mut ibv_context, *const c_void, *mut c_void, usize) -> c_int>,
    pub query_ece: Unused,
    pub query_port: Option<unsafe extern "C" fn(*mut ibv_context, u8, *mut c_void) -> c_int>,
    pub query_qp: Unused,
    pub query_qp_data_in_order: Unused,
    pub query_rt_values: Unused,
    pub query_srq: Unused,
    pub read_counters: Unused,
    pub reg_dm_mr: Unused,
    pub reg_dmabuf_mr: Unused,
    pub reg_mr: Option<unsafe extern "C" fn(*mut ibv_pd, *mut c_void, usize, u64, c_int) -> *mut ibv_mr>,
    pub req_notify_cq: Unused,
    pub rereg_mr: Unused,
    pub resize_cq: Unused,
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
    pub fn ibv_cmd_query_port(
        context: *mut ibv_context,
        port_num: u8,
        port_attr: *mut c_void,
        cmd: *mut ibv_query_port,
        cmd_size: usize,
    ) -> c_int;
}

/// `EPROTO` (Linux, all architectures).
pub const EPROTO: core::ffi::c_int = 71;

extern "C" {
    pub fn calloc(n: usize, size: usize) -> *mut c_void;
    pub fn free(ptr: *mut c_void);
    pub fn __errno_location() -> *mut c_int;
}

/// Sizes and offsets of rdma-core 44 on x86_64.
mod layout {
    use super::*;
    use core::mem::{offset_of, size_of};

    const _: () = assert!(size_of::<verbs_match_ent>() == 24);
    const _: () = assert!(size_of::<verbs_device_ops>() == 72);
    const _: () = assert!(offset_of!(verbs_device_ops, alloc_context) == 40);
    const _: () = assert!(offset_of!(verbs_device_ops, alloc_device) == 56);
    const _: () = assert!(size_of::<verbs_sysfs_dev>() == 992);
    const _: () = assert!(offset_of!(verbs_sysfs_dev, ibdev_path) == 176);
    const _: () = assert!(offset_of!(verbs_sysfs_dev, abi_ver) == 968);
    const _: () = assert!(size_of::<verbs_device>() == 712);
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
    const _: () = assert!(offset_of!(verbs_context_ops, reg_mr) == 544);
    const _: () = assert!(offset_of!(verbs_context_ops, dereg_mr) == 224);
    const _: () = assert!(size_of::<ibv_alloc_pd>() == 16);
    const _: () = assert!(offset_of!(verbs_context_ops, alloc_pd) == 40);
    const _: () = assert!(offset_of!(verbs_context_ops, dealloc_pd) == 208);
}
