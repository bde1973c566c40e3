// SPDX-License-Identifier: GPL-2.0 OR Linux-OpenIB

//! Shared receive queues: a kernel object and its ring, which librxud maps.
//! `post_srq_recv` comes with the data path; until then libibverbs answers
//! `EOPNOTSUPP`.

use crate::mmap::{map_ring, MappedRing};
use crate::sys::*;
use crate::{create_object_with_rings, destroy_object};
use core::ffi::c_int;
use core::mem::{offset_of, size_of};
use rxud_abi::{recv_wqe_slot_size, CreateSrqReq, CreateSrqResp};

/// librxud's SRQ. All-zero is valid (what `create_object_with_rings`
/// starts from).
#[repr(C)]
pub(crate) struct Srq {
    vsrq: verbs_srq,
    /// Set once the kernel SRQ exists and its ring is mapped.
    ring: Option<Box<MappedRing>>,
}

const _: () = assert!(offset_of!(Srq, vsrq) == 0 && offset_of!(verbs_srq, srq) == 0);

/// CREATE_SRQ with rxud's request and response payloads, contiguous after
/// the core parts as libibverbs requires.
#[repr(C)]
#[derive(Default)]
struct CreateSrqCmd {
    core: ibv_create_srq,
    drv: CreateSrqReq,
}

#[repr(C)]
#[derive(Default)]
struct CreateSrqRespBuf {
    core: ib_uverbs_create_srq_resp,
    drv: CreateSrqResp,
}

const _: () = assert!(offset_of!(CreateSrqCmd, drv) == size_of::<ibv_create_srq>());
const _: () = assert!(offset_of!(CreateSrqRespBuf, drv) == size_of::<ib_uverbs_create_srq_resp>());

pub(crate) unsafe extern "C" fn create_srq(
    pd: *mut ibv_pd,
    attr: *mut ibv_srq_init_attr,
) -> *mut ibv_srq {
    // SAFETY: `Srq` is valid zeroed; `pd` and `attr` come from libibverbs;
    // command and response are laid out as libibverbs expects. The ring is
    // kept only once it is mapped, and `destroy` destroys the kernel SRQ
    // `create` made.
    let srq = unsafe {
        create_object_with_rings(
            |srq: *mut Srq| {
                let mut cmd = CreateSrqCmd::default();
                let mut resp = CreateSrqRespBuf::default();
                let ret = ibv_cmd_create_srq(
                    pd,
                    &raw mut (*srq).vsrq.srq,
                    attr,
                    &raw mut cmd.core,
                    size_of::<CreateSrqCmd>(),
                    &raw mut resp.core,
                    size_of::<CreateSrqRespBuf>(),
                );
                if ret != 0 {
                    return Err(ret);
                }
                Ok(resp.drv)
            },
            |srq, resp: CreateSrqResp| {
                // `ibv_cmd_create_srq` has put the granted `max_wr` and
                // `max_sge` into `attr.attr`.
                let granted = (*attr).attr;
                let ring = map_ring(
                    (*pd).context,
                    "create_srq",
                    "SRQ",
                    &resp.ring,
                    granted.max_wr,
                    recv_wqe_slot_size(granted.max_sge),
                )?;
                (*srq).ring = Some(Box::new(ring));
                Ok(())
            },
            |srq| ibv_cmd_destroy_srq(&raw mut (*srq).vsrq.srq),
        )
    };
    if srq.is_null() {
        return core::ptr::null_mut();
    }
    // SAFETY: `srq` is live.
    unsafe { &raw mut (*srq).vsrq.srq }
}

pub(crate) unsafe extern "C" fn modify_srq(
    srq: *mut ibv_srq,
    attr: *mut ibv_srq_attr,
    attr_mask: c_int,
) -> c_int {
    // Resizing would need a new ring, and MODIFY_SRQ has no driver
    // response to describe one: refuse rather than let the kernel and the
    // mapping disagree.
    if attr_mask & IBV_SRQ_MAX_WR != 0 {
        return EOPNOTSUPP;
    }
    let mut cmd = ibv_modify_srq::default();
    // SAFETY: arguments from libibverbs; `cmd` is the core command with no
    // driver data.
    unsafe { ibv_cmd_modify_srq(srq, attr, attr_mask, &mut cmd, size_of::<ibv_modify_srq>()) }
}

pub(crate) unsafe extern "C" fn query_srq(srq: *mut ibv_srq, attr: *mut ibv_srq_attr) -> c_int {
    let mut cmd = ibv_query_srq::default();
    // SAFETY: arguments from libibverbs; `cmd` is the core command with no
    // driver data.
    unsafe { ibv_cmd_query_srq(srq, attr, &mut cmd, size_of::<ibv_query_srq>()) }
}

pub(crate) unsafe extern "C" fn destroy_srq(ibsrq: *mut ibv_srq) -> c_int {
    // SAFETY: a live SRQ of ours (`ibv_srq` is at offset 0 of `Srq`). After
    // the kernel destroyed it, dropping its ring unmaps it.
    unsafe {
        destroy_object(ibsrq.cast::<Srq>(), |srq| {
            let ret = ibv_cmd_destroy_srq(&raw mut (*srq).vsrq.srq);
            if ret == 0 {
                drop((*srq).ring.take());
            }
            ret
        })
    }
}
