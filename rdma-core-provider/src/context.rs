// SPDX-License-Identifier: GPL-2.0 OR Linux-OpenIB

//! A device context (`ibv_open_device`) and the verbs that need only it.

use crate::set_errno;
use crate::sys::*;
use core::ffi::{c_int, c_void};
use core::mem::{offset_of, size_of};
use rxud_abi::{AllocContextReq, AllocContextResp, UVERBS_ABI_VERSION};

/// librxud's context; libibverbs allocates it (zeroed) around the
/// `verbs_context` it manages.
#[repr(C)]
pub(crate) struct Context {
    vctx: verbs_context,
    /// The kernel's ABI version, from the GET_CONTEXT response.
    abi_version: u32,
}

/// GET_CONTEXT with rxud's request and response payloads, contiguous after
/// the core parts as libibverbs requires.
#[repr(C)]
#[derive(Default)]
struct GetContextCmd {
    core: ibv_get_context,
    drv: AllocContextReq,
}

#[repr(C)]
#[derive(Default)]
struct GetContextResp {
    core: ib_uverbs_get_context_resp,
    drv: AllocContextResp,
}

const _: () = assert!(offset_of!(GetContextCmd, drv) == size_of::<ibv_get_context>());
const _: () = assert!(offset_of!(GetContextResp, drv) == size_of::<ib_uverbs_get_context_resp>());

static CONTEXT_OPS: ContextOps = ContextOps(verbs_context_ops {
    free_context: Some(free_context),
    query_device_ex: Some(query_device_ex),
    query_port: Some(query_port),
    alloc_pd: Some(crate::pd::alloc_pd),
    dealloc_pd: Some(crate::pd::dealloc_pd),
    reg_mr: Some(crate::mr::reg_mr),
    dereg_mr: Some(crate::mr::dereg_mr),
    rereg_mr: Some(crate::mr::rereg_mr),
    alloc_mw: Some(crate::mw::alloc_mw),
    dealloc_mw: Some(crate::mw::dealloc_mw),
    bind_mw: Some(crate::mw::bind_mw),
    create_cq: Some(crate::cq::create_cq),
    create_cq_ex: Some(crate::cq::create_cq_ex),
    poll_cq: Some(crate::cq::poll_cq),
    req_notify_cq: Some(crate::cq::req_notify_cq),
    resize_cq: Some(crate::cq::resize_cq),
    destroy_cq: Some(crate::cq::destroy_cq),
    create_qp: Some(crate::qp::create_qp),
    create_qp_ex: Some(crate::qp::create_qp_ex),
    query_qp: Some(crate::qp::query_qp),
    attach_mcast: Some(crate::qp::attach_mcast),
    detach_mcast: Some(crate::qp::detach_mcast),
    modify_qp: Some(crate::qp::modify_qp),
    destroy_qp: Some(crate::qp::destroy_qp),
    post_send: Some(crate::qp::post_send),
    post_recv: Some(crate::qp::post_recv),
    create_srq: Some(crate::srq::create_srq),
    modify_srq: Some(crate::srq::modify_srq),
    query_srq: Some(crate::srq::query_srq),
    destroy_srq: Some(crate::srq::destroy_srq),
    post_srq_recv: Some(crate::srq::post_srq_recv),
    create_ah: Some(crate::ah::create_ah),
    destroy_ah: Some(crate::ah::destroy_ah),
    ..unsafe_default_ops()
});

struct ContextOps(verbs_context_ops);
// SAFETY: immutable table of function pointers.
unsafe impl Sync for ContextOps {}

/// All-NULL ops, usable in a `static` initialiser.
const fn unsafe_default_ops() -> verbs_context_ops {
    // SAFETY: every field is an `Option` of a function pointer, for which
    // all-zero is `None`.
    unsafe { core::mem::zeroed() }
}

pub(crate) unsafe extern "C" fn alloc_context(
    dev: *mut ibv_device,
    cmd_fd: c_int,
    _private_data: *mut c_void,
) -> *mut verbs_context {
    // SAFETY: the size and the offset describe `Context`, whose
    // `verbs_context` libibverbs initialises; it closes `cmd_fd` on failure.
    let ctx = unsafe {
        _verbs_init_and_alloc_context(
            dev,
            cmd_fd,
            size_of::<Context>(),
            offset_of!(Context, vctx) as *mut verbs_context,
            0,
        )
    }
    .cast::<Context>();
    if ctx.is_null() {
        return core::ptr::null_mut();
    }
    let mut cmd = GetContextCmd::default();
    let mut resp = GetContextResp::default();
    // SAFETY: `ctx` is a live context; `cmd` and `resp` are laid out as
    // libibverbs expects and sized accordingly.
    let ret = unsafe {
        ibv_cmd_get_context(
            &raw mut (*ctx).vctx,
            &raw mut cmd.core,
            size_of::<GetContextCmd>(),
            &raw mut resp.core,
            size_of::<GetContextResp>(),
        )
    };
    let err = if ret != 0 {
        ret
    } else if resp.drv.abi_version != UVERBS_ABI_VERSION {
        EPROTO
    } else {
        0
    };
    if err != 0 {
        // SAFETY: undoes `_verbs_init_and_alloc_context`.
        unsafe {
            verbs_uninit_context(&raw mut (*ctx).vctx);
            free(ctx.cast());
        }
        set_errno(err);
        return core::ptr::null_mut();
    }
    // SAFETY: `ctx` is ours until `free_context`.
    unsafe {
        (*ctx).abi_version = resp.drv.abi_version;
        verbs_set_ops(&raw mut (*ctx).vctx, &CONTEXT_OPS.0);
        &raw mut (*ctx).vctx
    }
}

/// The `Context` around an `ibv_context` libibverbs passes back.
///
/// # Safety
///
/// `ibctx` must be the `ibv_context` of a `Context` made by `alloc_context`.
unsafe fn from_ibv(ibctx: *mut ibv_context) -> *mut Context {
    // SAFETY: `ibv_context` sits at a fixed offset in `verbs_context`, which
    // is the first field of `Context`.
    unsafe {
        ibctx
            .cast::<u8>()
            .sub(VERBS_CONTEXT_IBV_OFFSET + offset_of!(Context, vctx))
            .cast()
    }
}

unsafe extern "C" fn free_context(ibctx: *mut ibv_context) {
    // SAFETY: called once by `ibv_close_device` on a context of ours.
    unsafe {
        let ctx = from_ibv(ibctx);
        verbs_uninit_context(&raw mut (*ctx).vctx);
        free(ctx.cast());
    }
}

unsafe extern "C" fn query_device_ex(
    ibctx: *mut ibv_context,
    input: *const c_void,
    attr: *mut c_void,
    attr_size: usize,
) -> c_int {
    // SAFETY: arguments come straight from libibverbs; the helper honours
    // `attr_size` (legacy `ibv_query_device` passes the smaller struct).
    unsafe {
        ibv_cmd_query_device_any(
            ibctx,
            input,
            attr,
            attr_size,
            core::ptr::null_mut(),
            core::ptr::null_mut(),
        )
    }
}

unsafe extern "C" fn query_port(ibctx: *mut ibv_context, port: u8, attr: *mut c_void) -> c_int {
    let mut cmd = ibv_query_port::default();
    // SAFETY: arguments come straight from libibverbs; `cmd` is a zeroed
    // core command with no driver data.
    unsafe { ibv_cmd_query_port(ibctx, port, attr, &mut cmd, size_of::<ibv_query_port>()) }
}
