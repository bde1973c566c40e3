// SPDX-License-Identifier: GPL-2.0 OR Linux-OpenIB

//! Queue pairs: kernel objects whose send queue (and receive queue, unless
//! the QP uses an SRQ) are rings librxud maps. Posting work requests is the
//! data path's, still to come: `post_send`/`post_recv` stay unset and
//! libibverbs answers `EOPNOTSUPP`.

use crate::mmap::{map_ring, MappedRing};
use crate::sys::*;
use crate::{create_object_with_rings, destroy_object};
use core::ffi::c_int;
use core::mem::{offset_of, size_of};
use rxud_abi::{recv_wqe_slot_size, send_wqe_slot_size, CreateQpReq, CreateQpResp};

/// librxud's QP. All-zero is valid (what `create_object_with_rings` starts
/// from).
#[repr(C)]
pub(crate) struct Qp {
    vqp: verbs_qp,
    /// Set once the kernel QP exists and its rings are mapped.
    rings: Option<Box<QpRings>>,
}

/// What the data path will post into.
#[expect(
    dead_code,
    reason = "read by post_send/post_recv, which come with the data path"
)]
struct QpRings {
    sq: MappedRing,
    /// `None` when the QP receives through an SRQ.
    rq: Option<MappedRing>,
    /// The capabilities the kernel granted; each ring holds them.
    cap: ibv_qp_cap,
}

const _: () = assert!(offset_of!(Qp, vqp) == 0 && offset_of!(verbs_qp, qp) == 0);

/// CREATE_QP with rxud's request and response payloads, contiguous after
/// the core parts as libibverbs requires.
#[repr(C)]
#[derive(Default)]
struct CreateQpCmd {
    core: ibv_create_qp,
    drv: CreateQpReq,
}

#[repr(C)]
#[derive(Default)]
struct CreateQpRespBuf {
    core: ib_uverbs_create_qp_resp,
    drv: CreateQpResp,
}

const _: () = assert!(offset_of!(CreateQpCmd, drv) == size_of::<ibv_create_qp>());
const _: () = assert!(offset_of!(CreateQpRespBuf, drv) == size_of::<ib_uverbs_create_qp_resp>());

/// The `Qp` of an `ibv_qp` libibverbs passes back.
///
/// # Safety
///
/// `ibqp` was returned by `create_qp`.
unsafe fn from_ibv(ibqp: *mut ibv_qp) -> *mut Qp {
    // `ibv_qp` is at offset 0 of `Qp` (asserted above).
    ibqp.cast()
}

/// Maps the rings the kernel describes, checked against the granted
/// capabilities `cap`.
///
/// # Safety
///
/// `ctx` is a live context of librxud's.
unsafe fn map_rings(
    ctx: *mut ibv_context,
    resp: &CreateQpResp,
    cap: &ibv_qp_cap,
) -> Result<QpRings, c_int> {
    // SAFETY: per the caller.
    unsafe {
        let send_size = send_wqe_slot_size(cap.max_send_sge, cap.max_inline_data);
        let sq = map_ring(
            ctx,
            "create_qp",
            "send",
            &resp.sq,
            cap.max_send_wr,
            send_size,
        )?;
        let rq = if resp.rq.is_present() {
            let recv_size = recv_wqe_slot_size(cap.max_recv_sge);
            Some(map_ring(
                ctx,
                "create_qp",
                "receive",
                &resp.rq,
                cap.max_recv_wr,
                recv_size,
            )?)
        } else {
            None
        };
        Ok(QpRings { sq, rq, cap: *cap })
    }
}

pub(crate) unsafe extern "C" fn create_qp(
    pd: *mut ibv_pd,
    attr: *mut ibv_qp_init_attr,
) -> *mut ibv_qp {
    // SAFETY: `Qp` is valid zeroed; `pd` and `attr` come from libibverbs;
    // command and response are laid out as libibverbs expects. The rings
    // are kept only once all are mapped, and `destroy` destroys the kernel
    // QP `create` made.
    let qp = unsafe {
        create_object_with_rings(
            |qp: *mut Qp| {
                let mut cmd = CreateQpCmd::default();
                let mut resp = CreateQpRespBuf::default();
                let ret = ibv_cmd_create_qp(
                    pd,
                    &raw mut (*qp).vqp.qp,
                    attr,
                    &raw mut cmd.core,
                    size_of::<CreateQpCmd>(),
                    &raw mut resp.core,
                    size_of::<CreateQpRespBuf>(),
                );
                if ret != 0 {
                    return Err(ret);
                }
                Ok(resp.drv)
            },
            |qp, resp: CreateQpResp| {
                // `ibv_cmd_create_qp` has put the capabilities the kernel
                // granted into `attr.cap`, on the ioctl path (where
                // `resp.core` stays empty) as on the write path: the caller
                // sees the real ones.
                let rings = map_rings((*pd).context, &resp, &(*attr).cap)?;
                (*qp).rings = Some(Box::new(rings));
                Ok(())
            },
            |qp| ibv_cmd_destroy_qp(&raw mut (*qp).vqp.qp),
        )
    };
    if qp.is_null() {
        return core::ptr::null_mut();
    }
    // SAFETY: `qp` is live.
    unsafe { &raw mut (*qp).vqp.qp }
}

pub(crate) unsafe extern "C" fn query_qp(
    qp: *mut ibv_qp,
    attr: *mut ibv_qp_attr,
    attr_mask: c_int,
    init_attr: *mut ibv_qp_init_attr,
) -> c_int {
    let mut cmd = ibv_query_qp::default();
    // SAFETY: arguments from libibverbs; `cmd` is the core command with no
    // driver data.
    unsafe {
        ibv_cmd_query_qp(
            qp,
            attr,
            attr_mask,
            init_attr,
            &mut cmd,
            size_of::<ibv_query_qp>(),
        )
    }
}

pub(crate) unsafe extern "C" fn modify_qp(
    qp: *mut ibv_qp,
    attr: *mut ibv_qp_attr,
    attr_mask: c_int,
) -> c_int {
    let mut cmd = ibv_modify_qp::default();
    // SAFETY: arguments from libibverbs; `cmd` is the core command with no
    // driver data.
    unsafe { ibv_cmd_modify_qp(qp, attr, attr_mask, &mut cmd, size_of::<ibv_modify_qp>()) }
}

pub(crate) unsafe extern "C" fn destroy_qp(ibqp: *mut ibv_qp) -> c_int {
    // SAFETY: a live QP of ours. After the kernel destroyed it, dropping
    // its rings unmaps them.
    unsafe {
        destroy_object(from_ibv(ibqp), |qp| {
            let ret = ibv_cmd_destroy_qp(&raw mut (*qp).vqp.qp);
            if ret == 0 {
                drop((*qp).rings.take());
            }
            ret
        })
    }
}
