// SPDX-License-Identifier: GPL-2.0 OR Linux-OpenIB

//! Completion queues: the kernel produces CQEs into a ring librxud maps;
//! `poll_cq` consumes them without entering the kernel.

use crate::mmap::{map_ring, MappedRing};
use crate::ring;
use crate::sys::*;
use crate::{create_object_with_rings, destroy_object};
use core::ffi::c_int;
use core::mem::{offset_of, size_of, MaybeUninit};
use rxud_abi::{CreateCqReq, CreateCqResp, ResizeCqReq, ResizeCqResp, RingInfo, CQ_SLOT_SIZE};
use std::sync::{Mutex, MutexGuard, PoisonError};

/// librxud's CQ. All-zero is valid (what `create_object_with_rings` starts
/// from).
#[repr(C)]
pub(crate) struct Cq {
    vcq: verbs_cq,
    /// Set once the kernel CQ exists and its ring is mapped.
    shared: Option<Box<CqShared>>,
}

/// What the threads polling a CQ share.
struct CqShared {
    /// The ring, `None` after a resize whose new ring could not be mapped
    /// (then polling fails until a resize succeeds). The lock makes one
    /// consumer at a time, and keeps `resize_cq` from swapping the ring
    /// under a poller.
    ring: Mutex<Option<MappedRing>>,
}

impl CqShared {
    fn lock(&self) -> MutexGuard<'_, Option<MappedRing>> {
        // A panic aborts (panic = "abort"), so nothing is ever poisoned.
        self.ring.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

const _: () = assert!(offset_of!(Cq, vcq) == 0 && offset_of!(verbs_cq, cq) == 0);

/// CREATE_CQ with rxud's request and response payloads, contiguous after
/// the core parts as libibverbs requires.
#[repr(C)]
#[derive(Default)]
struct CreateCqCmd {
    core: ibv_create_cq,
    drv: CreateCqReq,
}

#[repr(C)]
#[derive(Default)]
struct CreateCqRespBuf {
    core: ib_uverbs_create_cq_resp,
    drv: CreateCqResp,
}

#[repr(C)]
#[derive(Default)]
struct ResizeCqCmd {
    core: ibv_resize_cq,
    drv: ResizeCqReq,
}

#[repr(C)]
#[derive(Default)]
struct ResizeCqRespBuf {
    core: ib_uverbs_resize_cq_resp,
    drv: ResizeCqResp,
}

const _: () = assert!(offset_of!(CreateCqCmd, drv) == size_of::<ibv_create_cq>());
const _: () = assert!(offset_of!(CreateCqRespBuf, drv) == size_of::<ib_uverbs_create_cq_resp>());
const _: () = assert!(offset_of!(ResizeCqCmd, drv) == size_of::<ibv_resize_cq>());
const _: () = assert!(offset_of!(ResizeCqRespBuf, drv) == size_of::<ib_uverbs_resize_cq_resp>());

/// The `Cq` of an `ibv_cq` libibverbs passes back.
///
/// # Safety
///
/// `ibcq` was returned by `create_cq`.
unsafe fn from_ibv(ibcq: *mut ibv_cq) -> *mut Cq {
    // `ibv_cq` is at offset 0 of `Cq` (asserted above).
    ibcq.cast()
}

/// The state of a live CQ.
///
/// # Safety
///
/// `ibcq` was returned by `create_cq` and is not destroyed during `'a`.
unsafe fn shared<'a>(ibcq: *mut ibv_cq) -> &'a CqShared {
    // SAFETY: per the caller, a created CQ, whose `shared` is set before
    // `create_cq` returns and only taken by a successful `destroy_cq`.
    unsafe { (*from_ibv(ibcq)).shared.as_deref() }.expect("CQ without its ring state")
}

/// Maps a CQ ring that must hold the `cqe` entries the kernel granted.
///
/// # Safety
///
/// `ctx` is a live context of librxud's.
unsafe fn map_cq_ring(
    ctx: *mut ibv_context,
    verb: &str,
    info: &RingInfo,
    cqe: c_int,
) -> Result<MappedRing, c_int> {
    let entries = u32::try_from(cqe).map_err(|_| EPROTO)?;
    // SAFETY: per the caller.
    unsafe { map_ring(ctx, verb, "CQ", info, entries, CQ_SLOT_SIZE) }
}

pub(crate) unsafe extern "C" fn create_cq(
    ctx: *mut ibv_context,
    cqe: c_int,
    channel: *mut ibv_comp_channel,
    comp_vector: c_int,
) -> *mut ibv_cq {
    // SAFETY: `Cq` is valid zeroed; `ctx` and `channel` come from
    // libibverbs; command and response are laid out as libibverbs expects.
    // The CQ state is set only once its ring is mapped, and `destroy`
    // destroys the kernel CQ `create` made.
    let cq = unsafe {
        create_object_with_rings(
            |cq: *mut Cq| {
                let mut cmd = CreateCqCmd::default();
                let mut resp = CreateCqRespBuf::default();
                let ret = ibv_cmd_create_cq(
                    ctx,
                    cqe,
                    channel,
                    comp_vector,
                    &raw mut (*cq).vcq.cq,
                    &raw mut cmd.core,
                    size_of::<CreateCqCmd>(),
                    &raw mut resp.core,
                    size_of::<CreateCqRespBuf>(),
                );
                if ret != 0 {
                    return Err(ret);
                }
                Ok(resp.drv)
            },
            |cq, resp: CreateCqResp| {
                let ring = map_cq_ring(ctx, "create_cq", &resp.ring, (*cq).vcq.cq.cqe)?;
                (*cq).shared = Some(Box::new(CqShared {
                    ring: Mutex::new(Some(ring)),
                }));
                Ok(())
            },
            |cq| ibv_cmd_destroy_cq(&raw mut (*cq).vcq.cq),
        )
    };
    if cq.is_null() {
        return core::ptr::null_mut();
    }
    // SAFETY: `cq` is live.
    unsafe { &raw mut (*cq).vcq.cq }
}

pub(crate) unsafe extern "C" fn poll_cq(
    ibcq: *mut ibv_cq,
    num_entries: c_int,
    wc: *mut ibv_wc,
) -> c_int {
    let Ok(len) = usize::try_from(num_entries) else {
        return 0;
    };
    if len == 0 {
        return 0;
    }
    // SAFETY: libibverbs passes a live CQ of ours and an array of
    // `num_entries` work completions, which `poll_cq` only writes.
    let (shared, out) = unsafe {
        (
            shared(ibcq),
            core::slice::from_raw_parts_mut(wc.cast::<MaybeUninit<ibv_wc>>(), len),
        )
    };
    let guard = shared.lock();
    let Some(ring) = guard.as_ref() else {
        return -EIO;
    };
    match ring::poll_cq(&ring.ring(), out) {
        // At most `num_entries`.
        Ok(n) => n as c_int,
        Err(_) => -EIO,
    }
}

pub(crate) unsafe extern "C" fn req_notify_cq(ibcq: *mut ibv_cq, solicited_only: c_int) -> c_int {
    // SAFETY: a live CQ of ours, from libibverbs.
    unsafe { ibv_cmd_req_notify_cq(ibcq, solicited_only) }
}

pub(crate) unsafe extern "C" fn resize_cq(ibcq: *mut ibv_cq, cqe: c_int) -> c_int {
    // SAFETY: a live CQ of ours, from libibverbs.
    let shared = unsafe { shared(ibcq) };
    let mut guard = shared.lock();
    let mut cmd = ResizeCqCmd::default();
    let mut resp = ResizeCqRespBuf::default();
    // SAFETY: a live CQ; command and response laid out as libibverbs
    // expects. Holding the lock, no poller uses the old ring.
    let ret = unsafe {
        ibv_cmd_resize_cq(
            ibcq,
            cqe,
            &raw mut cmd.core,
            size_of::<ResizeCqCmd>(),
            &raw mut resp.core,
            size_of::<ResizeCqRespBuf>(),
        )
    };
    if ret != 0 {
        return ret;
    }
    // The kernel now produces into the new ring only, having moved the old
    // ring's unconsumed entries there. The old mapping is dropped (unmapped)
    // either way: if the new one cannot be mapped, polling fails rather
    // than silently returning nothing, until another resize succeeds.
    // SAFETY: the CQ's context is live; `ibv_cmd_resize_cq` updated `cqe`.
    let new = unsafe { map_cq_ring((*ibcq).context, "resize_cq", &resp.drv.ring, (*ibcq).cqe) };
    match new {
        Ok(ring) => {
            *guard = Some(ring);
            0
        }
        Err(err) => {
            *guard = None;
            err
        }
    }
}

pub(crate) unsafe extern "C" fn destroy_cq(ibcq: *mut ibv_cq) -> c_int {
    // SAFETY: a live CQ of ours; libibverbs' caller no longer polls it.
    // After the kernel destroyed it, dropping its state unmaps the ring.
    unsafe {
        destroy_object(from_ibv(ibcq), |cq| {
            let ret = ibv_cmd_destroy_cq(&raw mut (*cq).vcq.cq);
            if ret == 0 {
                drop((*cq).shared.take());
            }
            ret
        })
    }
}
