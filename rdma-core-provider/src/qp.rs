// SPDX-License-Identifier: GPL-2.0 OR Linux-OpenIB

//! Queue pairs: kernel objects whose send queue (and receive queue, unless
//! the QP uses an SRQ) are rings librxud maps and posts work requests into
//! (`post.rs`).

use crate::cq;
use crate::mmap::map_ring;
use crate::post::{
    recv_state_allows, send_state_allows, CmdDoorbell, QpType, RecvQueue, SendCaps, SendQueue,
};
use crate::sys::*;
use crate::wr::Session;
use crate::{create_object_with_rings, destroy_object, set_errno};
use core::ffi::{c_int, c_void};
use core::mem::{offset_of, size_of};
use rxud_abi::{create_qp, opcode, FlushOp};
use rxud_abi::{recv_wqe_slot_size, send_wqe_slot_size, CreateQpReq, CreateQpResp};

/// librxud's QP. All-zero is valid (what `create_object_with_rings` starts
/// from).
#[repr(C)]
pub(crate) struct Qp {
    vqp: verbs_qp,
    /// Set once the kernel QP exists and its rings are mapped.
    rings: Option<Box<QpRings>>,
}

/// What `post_send` and `post_recv` post into, with the capabilities the
/// kernel granted.
struct QpRings {
    sq: SendQueue,
    /// `None` when the QP receives through an SRQ.
    rq: Option<RecvQueue>,
    /// The `ibv_wr_*` batch (used if the QP was made with them).
    wr: Session,
}

const _: () = assert!(
    offset_of!(Qp, vqp) == 0
        && offset_of!(verbs_qp, qp_ex) == 0
        && offset_of!(ibv_qp_ex, qp_base) == 0
);

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
/// capabilities `cap`, for QP `qp` of type `qp_type`.
///
/// # Safety
///
/// `ctx` is a live context of librxud's and `qp` the `ibv_qp` that
/// `ibv_cmd_create_qp` filled in.
unsafe fn map_rings(
    ctx: *mut ibv_context,
    qp: *const ibv_qp,
    resp: &CreateQpResp,
    cap: &ibv_qp_cap,
    qp_type: QpType,
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
            let ring = map_ring(
                ctx,
                "create_qp",
                "receive",
                &resp.rq,
                cap.max_recv_wr,
                recv_size,
            )?;
            Some(RecvQueue::new(ring, cap.max_recv_sge))
        } else {
            None
        };
        let caps = SendCaps {
            qp_type,
            max_sge: cap.max_send_sge,
            max_inline: cap.max_inline_data,
        };
        let doorbell = CmdDoorbell {
            fd: (*ctx).cmd_fd,
            qp_handle: (*qp).handle,
        };
        Ok(QpRings {
            sq: SendQueue::new(sq, caps, doorbell),
            rq,
            wr: Session::new(cap.max_send_sge, cap.max_inline_data),
        })
    }
}

/// Creates a QP and maps its rings (the body of `create_qp`,
/// `create_qp_ex` and `rxudv_create_qp`); NULL with `errno` set on
/// failure. `req` is the driver part of the request: an XUD QP's has
/// `create_qp::XUD` (and `attr.qp_type` is `IBV_QPT_DRIVER`). The
/// capabilities the kernel granted are put into `attr.cap`.
///
/// # Safety
///
/// `pd` is a live PD of librxud's and `attr` the attributes to create with.
pub(crate) unsafe fn create(
    pd: *mut ibv_pd,
    attr: *mut ibv_qp_init_attr,
    req: CreateQpReq,
) -> *mut Qp {
    // SAFETY: `Qp` is valid zeroed; `pd` and `attr` come from libibverbs;
    // command and response are laid out as libibverbs expects. The rings
    // are kept only once all are mapped, and `destroy` destroys the kernel
    // QP `create` made.
    unsafe {
        create_object_with_rings(
            |qp: *mut Qp| {
                let mut cmd = CreateQpCmd {
                    drv: req,
                    ..Default::default()
                };
                let mut resp = CreateQpRespBuf::default();
                let ret = ibv_cmd_create_qp(
                    pd,
                    &raw mut (*qp).vqp.qp_ex.qp_base,
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
                // sees the real ones. The kernel makes no other types.
                let qp_type = if req.comp_mask & create_qp::XUD != 0 {
                    QpType::Xud
                } else {
                    QpType::from_ibv((*attr).qp_type).ok_or(EPROTO)?
                };
                let rings = map_rings(
                    (*pd).context,
                    &raw const (*qp).vqp.qp_ex.qp_base,
                    &resp,
                    &(*attr).cap,
                    qp_type,
                )?;
                (*qp).rings = Some(Box::new(rings));
                Ok(())
            },
            |qp| ibv_cmd_destroy_qp(&raw mut (*qp).vqp.qp_ex.qp_base),
        )
    }
}

pub(crate) unsafe extern "C" fn create_qp(
    pd: *mut ibv_pd,
    attr: *mut ibv_qp_init_attr,
) -> *mut ibv_qp {
    // SAFETY: arguments from libibverbs.
    let qp = unsafe { create(pd, attr, CreateQpReq::default()) };
    if qp.is_null() {
        return core::ptr::null_mut();
    }
    // SAFETY: `qp` is live.
    unsafe { &raw mut (*qp).vqp.qp_ex.qp_base }
}

/// The `ibv_wr_*` operations a QP of `qp_type` can be made with (as
/// `ibv_post_send` allows them, and ATOMIC WRITE, which only this
/// interface can post).
fn supported_send_ops(qp_type: ibv_enum) -> Option<u64> {
    let send = IBV_QP_EX_WITH_SEND | IBV_QP_EX_WITH_SEND_WITH_IMM;
    let write = IBV_QP_EX_WITH_RDMA_WRITE | IBV_QP_EX_WITH_RDMA_WRITE_WITH_IMM;
    match qp_type {
        IBV_QPT_RC => Some(
            send | write
                | IBV_QP_EX_WITH_RDMA_READ
                | IBV_QP_EX_WITH_ATOMIC_CMP_AND_SWP
                | IBV_QP_EX_WITH_ATOMIC_FETCH_AND_ADD
                | IBV_QP_EX_WITH_ATOMIC_WRITE
                | IBV_QP_EX_WITH_FLUSH
                | IBV_QP_EX_WITH_LOCAL_INV
                | IBV_QP_EX_WITH_SEND_WITH_INV
                | IBV_QP_EX_WITH_BIND_MW,
        ),
        IBV_QPT_UC => Some(send | write | IBV_QP_EX_WITH_BIND_MW),
        IBV_QPT_UD => Some(send),
        _ => None,
    }
}

/// Checks what `ibv_create_qp_ex` asks for beyond `ibv_create_qp`: a PD
/// (`EINVAL` without), no creation flags, and `send_ops_flags` the QP type
/// supports; anything else (other `comp_mask` bits: XRC, TSO, RSS, ...;
/// operations such as TSO) is `EOPNOTSUPP`.
fn check_qp_init_attr_ex(
    comp_mask: u32,
    create_flags: u32,
    qp_type: ibv_enum,
    send_ops_flags: u64,
) -> Result<(), c_int> {
    let known =
        IBV_QP_INIT_ATTR_PD | IBV_QP_INIT_ATTR_CREATE_FLAGS | IBV_QP_INIT_ATTR_SEND_OPS_FLAGS;
    if comp_mask & !known != 0 {
        return Err(EOPNOTSUPP);
    }
    if comp_mask & IBV_QP_INIT_ATTR_PD == 0 {
        return Err(EINVAL);
    }
    if comp_mask & IBV_QP_INIT_ATTR_CREATE_FLAGS != 0 && create_flags != 0 {
        return Err(EOPNOTSUPP);
    }
    if comp_mask & IBV_QP_INIT_ATTR_SEND_OPS_FLAGS != 0 {
        let supported = supported_send_ops(qp_type).ok_or(EOPNOTSUPP)?;
        if send_ops_flags & !supported != 0 {
            return Err(EOPNOTSUPP);
        }
    }
    Ok(())
}

/// Fills in the `ibv_wr_*` callbacks: the builders of the operations
/// `send_ops_flags` asked for, every setter, and the batch callbacks.
fn set_qp_ex_ops(qpx: &mut ibv_qp_ex, send_ops_flags: u64) {
    let with = |flag: u64| send_ops_flags & flag != 0;
    qpx.wr_send = with(IBV_QP_EX_WITH_SEND).then_some(wr_send);
    qpx.wr_send_imm = with(IBV_QP_EX_WITH_SEND_WITH_IMM).then_some(wr_send_imm);
    qpx.wr_rdma_write = with(IBV_QP_EX_WITH_RDMA_WRITE).then_some(wr_rdma_write);
    qpx.wr_rdma_write_imm = with(IBV_QP_EX_WITH_RDMA_WRITE_WITH_IMM).then_some(wr_rdma_write_imm);
    qpx.wr_rdma_read = with(IBV_QP_EX_WITH_RDMA_READ).then_some(wr_rdma_read);
    qpx.wr_atomic_cmp_swp = with(IBV_QP_EX_WITH_ATOMIC_CMP_AND_SWP).then_some(wr_atomic_cmp_swp);
    qpx.wr_atomic_fetch_add =
        with(IBV_QP_EX_WITH_ATOMIC_FETCH_AND_ADD).then_some(wr_atomic_fetch_add);
    qpx.wr_atomic_write = with(IBV_QP_EX_WITH_ATOMIC_WRITE).then_some(wr_atomic_write);
    qpx.wr_local_inv = with(IBV_QP_EX_WITH_LOCAL_INV).then_some(wr_local_inv);
    qpx.wr_send_inv = with(IBV_QP_EX_WITH_SEND_WITH_INV).then_some(wr_send_inv);
    qpx.wr_bind_mw = with(IBV_QP_EX_WITH_BIND_MW).then_some(wr_bind_mw);
    qpx.wr_set_ud_addr = Some(wr_set_ud_addr);
    qpx.wr_set_inline_data = Some(wr_set_inline_data);
    qpx.wr_set_inline_data_list = Some(wr_set_inline_data_list);
    qpx.wr_set_sge = Some(wr_set_sge);
    qpx.wr_set_sge_list = Some(wr_set_sge_list);
    qpx.wr_start = Some(wr_start);
    qpx.wr_complete = Some(wr_complete);
    qpx.wr_abort = Some(wr_abort);
}

/// `ibv_create_qp_ex` (libibverbs calls `ibv_create_qp` itself when only a
/// PD is given): the same QP as `create_qp`, and with
/// `IBV_QP_INIT_ATTR_SEND_OPS_FLAGS` the `ibv_wr_*` interface, which
/// `ibv_qp_to_qp_ex` then returns (`VERBS_QP_EX`).
pub(crate) unsafe extern "C" fn create_qp_ex(
    _ctx: *mut ibv_context,
    attr: *mut ibv_qp_init_attr_ex,
) -> *mut ibv_qp {
    // SAFETY: libibverbs passes the application's attributes.
    let attr = unsafe { &mut *attr };
    if let Err(err) = check_qp_init_attr_ex(
        attr.comp_mask,
        attr.create_flags,
        attr.qp_type,
        attr.send_ops_flags,
    ) {
        set_errno(err);
        return core::ptr::null_mut();
    }
    // SAFETY: the application's PD (checked present) and attributes.
    unsafe { create_ex(attr, CreateQpReq::default()) }
}

/// The body of `create_qp_ex` and `rxudv_create_qp` once `attr` is
/// checked: creates the QP (`req`: see [`create`]) and, with
/// `IBV_QP_INIT_ATTR_SEND_OPS_FLAGS`, gives it the `ibv_wr_*` interface;
/// NULL with `errno` set on failure. The granted capabilities are put into
/// `attr.cap`.
///
/// # Safety
///
/// `attr` holds a live PD of librxud's and the attributes to create with.
pub(crate) unsafe fn create_ex(attr: &mut ibv_qp_init_attr_ex, req: CreateQpReq) -> *mut ibv_qp {
    let mut init = ibv_qp_init_attr {
        qp_context: attr.qp_context,
        send_cq: attr.send_cq,
        recv_cq: attr.recv_cq,
        srq: attr.srq,
        cap: attr.cap,
        qp_type: attr.qp_type,
        sq_sig_all: attr.sq_sig_all,
    };
    // SAFETY: per the caller.
    let qp = unsafe { create(attr.pd, &mut init, req) };
    if qp.is_null() {
        return core::ptr::null_mut();
    }
    attr.cap = init.cap;
    // SAFETY: `qp` is live and not yet known to anyone else.
    unsafe {
        if attr.comp_mask & IBV_QP_INIT_ATTR_SEND_OPS_FLAGS != 0 {
            set_qp_ex_ops(&mut (*qp).vqp.qp_ex, attr.send_ops_flags);
            (*qp).vqp.comp_mask |= VERBS_QP_EX;
        }
        &raw mut (*qp).vqp.qp_ex.qp_base
    }
}

/// `ibv_attach_mcast`: the kernel keeps the group's members (a UD QP
/// only); nothing of it lives in the process.
pub(crate) unsafe extern "C" fn attach_mcast(
    qp: *mut ibv_qp,
    gid: *const ibv_gid,
    lid: u16,
) -> c_int {
    // SAFETY: arguments from libibverbs, passed on as they came.
    unsafe { ibv_cmd_attach_mcast(qp, gid, lid) }
}

/// `ibv_detach_mcast`.
pub(crate) unsafe extern "C" fn detach_mcast(
    qp: *mut ibv_qp,
    gid: *const ibv_gid,
    lid: u16,
) -> c_int {
    // SAFETY: arguments from libibverbs, passed on as they came.
    unsafe { ibv_cmd_detach_mcast(qp, gid, lid) }
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
    let ret =
        unsafe { ibv_cmd_modify_qp(qp, attr, attr_mask, &mut cmd, size_of::<ibv_modify_qp>()) };
    // SAFETY: `attr` is the caller's, read as ibv_cmd_modify_qp just did.
    let to_reset = attr_mask & IBV_QP_STATE != 0 && unsafe { (*attr).qp_state } == IBV_QPS_RESET;
    if ret == 0 && to_reset {
        // The QP starts over: completions it left unpolled (the flushes
        // of its move to ERR) must not reach the application as the new
        // connection's. The kernel makes none for a QP in RESET.
        // SAFETY: a live QP of ours, whose CQs live at least as long.
        unsafe {
            let (send_cq, recv_cq, qpn) = ((*qp).send_cq, (*qp).recv_cq, (*qp).qp_num);
            for cq in [send_cq, recv_cq] {
                if !cq.is_null() {
                    cq::clean_qp(cq, qpn);
                }
            }
        }
    }
    ret
}

pub(crate) unsafe extern "C" fn destroy_qp(ibqp: *mut ibv_qp) -> c_int {
    // SAFETY: a live QP of ours. After the kernel destroyed it, dropping
    // its rings unmaps them.
    unsafe {
        destroy_object(from_ibv(ibqp), |qp| {
            let ret = ibv_cmd_destroy_qp(&raw mut (*qp).vqp.qp_ex.qp_base);
            if ret == 0 {
                drop((*qp).rings.take());
            }
            ret
        })
    }
}

/// The rings of a live QP of ours, or `None` if it has none (never once
/// `create_qp` returned it).
///
/// # Safety
///
/// `ibqp` was returned by `create_qp` and is not destroyed during `'a`.
unsafe fn rings<'a>(ibqp: *mut ibv_qp) -> Option<&'a QpRings> {
    // SAFETY: per the caller.
    unsafe { (*from_ibv(ibqp)).rings.as_deref() }
}

/// libibverbs' cached state of `ibqp`: RESET from `ibv_cmd_create_qp`,
/// then what `ibv_modify_qp` and `ibv_query_qp` store, possibly in another
/// thread (hence a volatile read of the whole, aligned `u32`).
///
/// # Safety
///
/// `ibqp` is a live QP.
unsafe fn cached_state(ibqp: *const ibv_qp) -> ibv_enum {
    // SAFETY: per the caller, a live `ibv_qp`; `state` is aligned.
    unsafe { core::ptr::read_volatile(&raw const (*ibqp).state) }
}

pub(crate) unsafe extern "C" fn post_send(
    ibqp: *mut ibv_qp,
    wr: *mut ibv_send_wr,
    bad_wr: *mut *mut ibv_send_wr,
) -> c_int {
    // SAFETY: libibverbs passes `bad_wr` from the application, which may
    // be NULL but otherwise points to a writable pointer.
    let Some(bad_wr) = (unsafe { bad_wr.as_mut() }) else {
        return EINVAL;
    };
    *bad_wr = core::ptr::null_mut();
    // SAFETY: a live QP of ours, from libibverbs.
    let (Some(rings), state) = (unsafe { (rings(ibqp), cached_state(ibqp)) }) else {
        return EINVAL;
    };
    if !wr.is_null() && !send_state_allows(state) {
        *bad_wr = wr;
        return EINVAL;
    }
    // SAFETY: the verbs contract of `ibv_post_send` is the one
    // `SendQueue::post` requires.
    unsafe { rings.sq.post(wr, bad_wr) }
}

pub(crate) unsafe extern "C" fn post_recv(
    ibqp: *mut ibv_qp,
    wr: *mut ibv_recv_wr,
    bad_wr: *mut *mut ibv_recv_wr,
) -> c_int {
    // SAFETY: as in `post_send`.
    let Some(bad_wr) = (unsafe { bad_wr.as_mut() }) else {
        return EINVAL;
    };
    *bad_wr = core::ptr::null_mut();
    // SAFETY: a live QP of ours, from libibverbs.
    let (rings, state) = unsafe { (rings(ibqp), cached_state(ibqp)) };
    // A QP on an SRQ has no receive queue of its own.
    let Some(rq) = rings.and_then(|rings| rings.rq.as_ref()) else {
        *bad_wr = wr;
        return EINVAL;
    };
    if !wr.is_null() && !recv_state_allows(state) {
        *bad_wr = wr;
        return EINVAL;
    }
    // SAFETY: the verbs contract of `ibv_post_recv` is the one
    // `RecvQueue::post` requires.
    unsafe { rq.post(wr, bad_wr) }
}

/// The rings of the QP whose `ibv_qp_ex` libibverbs passes back.
///
/// # Safety
///
/// `qpx` is the `ibv_qp_ex` of a live QP made by `create_qp_ex`.
unsafe fn rings_ex<'a>(qpx: *mut ibv_qp_ex) -> Option<&'a QpRings> {
    // SAFETY: per the caller; `ibv_qp` is at offset 0 of `ibv_qp_ex`.
    unsafe { rings(qpx.cast()) }
}

/// A builder: stages a request of `opcode` with the QP's current `wr_id`
/// and `wr_flags`, immediate data `imm` and the operation fields `op`
/// writes.
///
/// # Safety
///
/// `qpx` is the `ibv_qp_ex` of a live QP made by `create_qp_ex`.
unsafe fn build(qpx: *mut ibv_qp_ex, opcode: u32, imm: u32, op: impl FnOnce(&mut ibv_send_wr)) {
    // SAFETY: per the caller; `wr_id` and `wr_flags` are the application's
    // to set between calls, in the thread that builds.
    let (wr_id, send_flags) = unsafe { ((*qpx).wr_id, (*qpx).wr_flags) };
    let mut wr = ibv_send_wr {
        wr_id,
        opcode,
        send_flags,
        imm_data: imm,
        ..Default::default()
    };
    op(&mut wr);
    // SAFETY: per the caller.
    if let Some(rings) = unsafe { rings_ex(qpx) } {
        rings.wr.with_batch(|batch| batch.build(wr));
    }
}

/// A setter: `f` on the QP's open batch.
///
/// # Safety
///
/// `qpx` is the `ibv_qp_ex` of a live QP made by `create_qp_ex`.
unsafe fn with_batch(qpx: *mut ibv_qp_ex, f: impl FnOnce(&mut crate::wr::Batch)) {
    // SAFETY: per the caller.
    if let Some(rings) = unsafe { rings_ex(qpx) } {
        rings.wr.with_batch(f);
    }
}

fn rdma(remote_addr: u64, rkey: u32) -> impl FnOnce(&mut ibv_send_wr) {
    move |wr| wr.wr.rdma = ibv_send_wr_rdma { remote_addr, rkey }
}

// The `ibv_qp_ex` callbacks. SAFETY (each): libibverbs' inline wrappers
// pass the `ibv_qp_ex` of a live QP made by `create_qp_ex` (the
// application got it from `ibv_qp_to_qp_ex`), with the application's
// arguments.
unsafe extern "C" fn wr_send(qpx: *mut ibv_qp_ex) {
    // SAFETY: see above.
    unsafe { build(qpx, opcode::SEND, 0, |_| {}) }
}

unsafe extern "C" fn wr_send_imm(qpx: *mut ibv_qp_ex, imm: u32) {
    // SAFETY: see above.
    unsafe { build(qpx, opcode::SEND_WITH_IMM, imm, |_| {}) }
}

unsafe extern "C" fn wr_rdma_write(qpx: *mut ibv_qp_ex, rkey: u32, remote_addr: u64) {
    // SAFETY: see above.
    unsafe { build(qpx, opcode::RDMA_WRITE, 0, rdma(remote_addr, rkey)) }
}

unsafe extern "C" fn wr_rdma_write_imm(qpx: *mut ibv_qp_ex, rkey: u32, remote_addr: u64, imm: u32) {
    // SAFETY: see above.
    unsafe {
        build(
            qpx,
            opcode::RDMA_WRITE_WITH_IMM,
            imm,
            rdma(remote_addr, rkey),
        )
    }
}

unsafe extern "C" fn wr_rdma_read(qpx: *mut ibv_qp_ex, rkey: u32, remote_addr: u64) {
    // SAFETY: see above.
    unsafe { build(qpx, opcode::RDMA_READ, 0, rdma(remote_addr, rkey)) }
}

fn atomic(
    remote_addr: u64,
    rkey: u32,
    compare_add: u64,
    swap: u64,
) -> impl FnOnce(&mut ibv_send_wr) {
    move |wr| {
        wr.wr.atomic = ibv_send_wr_atomic {
            remote_addr,
            compare_add,
            swap,
            rkey,
        }
    }
}

unsafe extern "C" fn wr_atomic_cmp_swp(
    qpx: *mut ibv_qp_ex,
    rkey: u32,
    remote_addr: u64,
    compare: u64,
    swap: u64,
) {
    let op = atomic(remote_addr, rkey, compare, swap);
    // SAFETY: see above.
    unsafe { build(qpx, opcode::ATOMIC_CMP_AND_SWP, 0, op) }
}

unsafe extern "C" fn wr_atomic_fetch_add(
    qpx: *mut ibv_qp_ex,
    rkey: u32,
    remote_addr: u64,
    add: u64,
) {
    // SAFETY: see above.
    unsafe {
        build(
            qpx,
            opcode::ATOMIC_FETCH_AND_ADD,
            0,
            atomic(remote_addr, rkey, add, 0),
        )
    }
}

unsafe extern "C" fn wr_atomic_write(
    qpx: *mut ibv_qp_ex,
    rkey: u32,
    remote_addr: u64,
    value: *const c_void,
) {
    // SAFETY: see above; `value` points to the 8 bytes to write, read now.
    unsafe {
        build(qpx, opcode::ATOMIC_WRITE, 0, rdma(remote_addr, rkey));
        let value = value.cast::<[u8; 8]>().read_unaligned();
        with_batch(qpx, |b| b.set_atomic_value(&value));
    }
}

/// `rxudv_wr_flush` (rxudv.h): a FLUSH in the open `ibv_wr_*` batch of an
/// RC QP of librxud's (rdma-core 44's `ibv_qp_ex` has no `wr_flush`, which
/// later rdma-core calls with the same arguments). A QP that is not
/// librxud's is left alone and reported by `errno` `EOPNOTSUPP`; a length
/// beyond 2^31 fails the batch (`EINVAL` from `ibv_wr_complete`), as do a
/// QP type without FLUSH and reserved `type` or `level` values (the
/// kernel's `IBV_WC_LOC_QP_OP_ERR` completion for the latter).
///
/// # Safety
///
/// `qpx` is NULL or an `ibv_qp_ex` of a live QP of libibverbs' (one
/// `ibv_qp_to_qp_ex` returned).
#[no_mangle]
pub unsafe extern "C" fn rxudv_wr_flush(
    qpx: *mut ibv_qp_ex,
    rkey: u32,
    remote_addr: u64,
    len: usize,
    placement_type: u8,
    selectivity_level: u8,
) {
    // SAFETY: per the caller NULL or a live `ibv_qp_ex`, whose callbacks
    // libibverbs' provider (maybe another than librxud) set.
    let ours = unsafe { qpx.as_ref() }
        .and_then(|q| q.wr_start)
        .is_some_and(|f| f as *const () == wr_start as *const ());
    if !ours {
        set_errno(EOPNOTSUPP);
        return;
    }
    let Some(length) = u32::try_from(len).ok().filter(|&l| l <= 1 << 31) else {
        // SAFETY: librxud's `ibv_qp_ex` (its `wr_start`), live per the
        // caller.
        unsafe { with_batch(qpx, |b| b.fail(EINVAL)) };
        return;
    };
    let op = FlushOp {
        remote_addr,
        rkey,
        length,
        placement_type,
        selectivity_level,
    };
    // SAFETY: librxud's `ibv_qp_ex` (its `wr_start`), live per the caller.
    let (wr_id, send_flags) = unsafe { ((*qpx).wr_id, (*qpx).wr_flags) };
    let wr = ibv_send_wr {
        wr_id,
        opcode: opcode::FLUSH,
        send_flags,
        ..Default::default()
    };
    // SAFETY: as above.
    unsafe { with_batch(qpx, |b| b.build_flush(wr, op)) }
}

unsafe extern "C" fn wr_local_inv(qpx: *mut ibv_qp_ex, invalidate_rkey: u32) {
    // SAFETY: see above.
    unsafe { build(qpx, opcode::LOCAL_INV, invalidate_rkey, |_| {}) }
}

unsafe extern "C" fn wr_send_inv(qpx: *mut ibv_qp_ex, invalidate_rkey: u32) {
    // SAFETY: see above.
    unsafe { build(qpx, opcode::SEND_WITH_INV, invalidate_rkey, |_| {}) }
}

/// `ibv_wr_bind_mw`: binds `mw` as `info` says under `rkey` (the window's
/// rkey is the application's to update, as with rxe).
unsafe extern "C" fn wr_bind_mw(
    qpx: *mut ibv_qp_ex,
    mw: *mut ibv_mw,
    rkey: u32,
    info: *const ibv_mw_bind_info,
) {
    // SAFETY: see above; `info` is read now, `mw` (and the MR `info`
    // names) when the batch is posted, before which the application keeps
    // them alive.
    unsafe {
        let Some(&bind_info) = info.as_ref() else {
            with_batch(qpx, |b| b.fail(EINVAL));
            return;
        };
        build(qpx, opcode::BIND_MW, 0, |wr| {
            wr.tail = ibv_send_wr_tail {
                bind_mw: ibv_send_wr_bind_mw {
                    mw,
                    rkey,
                    bind_info,
                },
            }
        })
    }
}

unsafe extern "C" fn wr_set_ud_addr(
    qpx: *mut ibv_qp_ex,
    ah: *mut ibv_ah,
    remote_qpn: u32,
    remote_qkey: u32,
) {
    // SAFETY: see above. The AH is looked up when the batch is posted
    // (`ibv_wr_complete`), before which the application keeps it alive.
    unsafe { with_batch(qpx, |b| b.set_ud_addr(ah, remote_qpn, remote_qkey)) }
}

unsafe extern "C" fn wr_set_sge(qpx: *mut ibv_qp_ex, lkey: u32, addr: u64, length: u32) {
    // SAFETY: see above.
    unsafe { with_batch(qpx, |b| b.set_sges(&[ibv_sge { addr, length, lkey }])) }
}

unsafe extern "C" fn wr_set_sge_list(qpx: *mut ibv_qp_ex, num_sge: usize, sg_list: *const ibv_sge) {
    // SAFETY: see above.
    unsafe {
        with_batch(qpx, |b| {
            // Refused before the list is looked at.
            if num_sge > b.max_sge() as usize || (num_sge > 0 && sg_list.is_null()) {
                b.fail(EINVAL);
                return;
            }
            // SAFETY: the application's `num_sge` elements at `sg_list`,
            // copied before this returns.
            b.set_sges(crate::post::app_slice(sg_list, num_sge));
        })
    }
}

/// `length` bytes at `addr`, or `None` (NULL with bytes) if they cannot
/// be.
///
/// # Safety
///
/// Unless NULL, `addr` points to `length` readable bytes.
unsafe fn app_bytes<'a>(addr: *const c_void, length: usize) -> Option<&'a [u8]> {
    if length > 0 && addr.is_null() {
        return None;
    }
    // SAFETY: per the caller.
    Some(unsafe { crate::post::app_slice(addr.cast::<u8>(), length) })
}

unsafe extern "C" fn wr_set_inline_data(qpx: *mut ibv_qp_ex, addr: *mut c_void, length: usize) {
    // SAFETY: see above.
    unsafe {
        with_batch(qpx, |b| {
            // Refused before the data is looked at.
            if length > b.max_inline() as usize {
                b.fail(EINVAL);
                return;
            }
            // SAFETY: the application's `length` bytes, copied before this
            // returns.
            match app_bytes(addr, length) {
                Some(data) => b.set_inline(&[data]),
                None => b.fail(EINVAL),
            }
        })
    }
}

unsafe extern "C" fn wr_set_inline_data_list(
    qpx: *mut ibv_qp_ex,
    num_buf: usize,
    buf_list: *const ibv_data_buf,
) {
    // SAFETY: see above.
    unsafe {
        with_batch(qpx, |b| {
            if num_buf > 0 && buf_list.is_null() {
                b.fail(EINVAL);
                return;
            }
            // SAFETY: the application's `num_buf` buffers.
            let list = crate::post::app_slice(buf_list, num_buf);
            let mut total = 0usize;
            let mut bufs = Vec::with_capacity(list.len());
            for buf in list {
                total = total.saturating_add(buf.length);
                // Refused before the data is looked at.
                if total > b.max_inline() as usize {
                    b.fail(EINVAL);
                    return;
                }
                // SAFETY: each buffer's `length` bytes, copied before this
                // returns.
                match app_bytes(buf.addr, buf.length) {
                    Some(data) => bufs.push(data),
                    None => {
                        b.fail(EINVAL);
                        return;
                    }
                }
            }
            b.set_inline(&bufs);
        })
    }
}

unsafe extern "C" fn wr_start(qpx: *mut ibv_qp_ex) {
    // SAFETY: see above.
    if let Some(rings) = unsafe { rings_ex(qpx) } {
        rings.wr.start();
    }
}

/// Posts the batch into the send ring, all of it or (on any error of its
/// builders and setters, or of the checks `ibv_post_send` makes) none,
/// ringing the doorbell as `ibv_post_send` does. As there, sends before RTS
/// are refused (`EINVAL`) by libibverbs' cached QP state.
unsafe extern "C" fn wr_complete(qpx: *mut ibv_qp_ex) -> c_int {
    // SAFETY: see above.
    let Some(rings) = (unsafe { rings_ex(qpx) }) else {
        return EINVAL;
    };
    // SAFETY: see above.
    let state = unsafe { cached_state(qpx.cast()) };
    let ret = rings.wr.finish(|batch| {
        if batch.len() > 0 && !send_state_allows(state) {
            return Err(EINVAL);
        }
        // SAFETY: the staged requests point into the batch; AHs are the
        // application's, live until this returns.
        batch.with_requests(|wrs| unsafe { rings.sq.post_batch(wrs) })
    });
    match ret {
        Ok(()) => 0,
        Err(err) => err,
    }
}

unsafe extern "C" fn wr_abort(qpx: *mut ibv_qp_ex) {
    // SAFETY: see above.
    if let Some(rings) = unsafe { rings_ex(qpx) } {
        // Nothing to report: an abort without a start does nothing.
        let _ = rings.wr.finish(|_| Ok(()));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mmap::testing::FakeDevice;
    use crate::post::tests::{decode_recv, decode_send, decode_sge, recv_wr, send_wr, sge, List};
    use rxud_abi::{
        ring_flags, send_flags, AtomicOp, RdmaOp, RingInfo, UdOp, XudOp, RING_SLOTS_OFFSET,
    };

    const SQ_AT: u64 = 4096;
    const RQ_AT: u64 = 2 * 4096;
    const SEND_SLOT: u32 = 128;
    const RECV_SLOT: u32 = 48;

    /// A QP of `qp_type` on `dev` as `create_qp` leaves it: handle 77,
    /// RESET, rings mapped from the device's fd (its first page is where
    /// doorbells go).
    fn qp(dev: &mut FakeDevice, qp_type: ibv_enum, on_srq: bool) -> Result<Box<Qp>, c_int> {
        let cap = ibv_qp_cap {
            max_send_wr: 4,
            max_recv_wr: if on_srq { 0 } else { 4 },
            max_send_sge: 2,
            max_recv_sge: if on_srq { 0 } else { 2 },
            max_inline_data: 32,
        };
        let ring = |mmap_offset, slot_size| RingInfo {
            mmap_offset,
            mmap_size: 4096,
            slot_count: 4,
            slot_size,
        };
        let resp = CreateQpResp {
            comp_mask: 0,
            sq: ring(SQ_AT, SEND_SLOT),
            rq: if on_srq {
                RingInfo::default()
            } else {
                ring(RQ_AT, RECV_SLOT)
            },
        };
        let mut qp = Box::new(Qp {
            // SAFETY: all-zero is a valid `verbs_qp`.
            vqp: unsafe { core::mem::zeroed() },
            rings: None,
        });
        qp.vqp.qp_ex.qp_base.handle = 77;
        qp.vqp.qp_ex.qp_base.qp_type = qp_type;
        // As `create` resolves it: `rxudv_create_qp` makes the only
        // driver QPs.
        let ty = match qp_type {
            IBV_QPT_DRIVER => QpType::Xud,
            _ => QpType::from_ibv(qp_type).ok_or(EPROTO)?,
        };
        qp.vqp.qp_ex.qp_base.state = IBV_QPS_RESET;
        // SAFETY: the fake device's context; the QP's `ibv_qp` filled in as
        // `ibv_cmd_create_qp` would.
        let rings =
            unsafe { map_rings(dev.ctx(), &raw const qp.vqp.qp_ex.qp_base, &resp, &cap, ty)? };
        qp.rings = Some(Box::new(rings));
        Ok(qp)
    }

    fn producer(dev: &FakeDevice, ring_at: u64) -> u32 {
        u32::from_le_bytes(dev.read(ring_at, 4).try_into().unwrap())
    }

    fn slot(dev: &FakeDevice, ring_at: u64, slot_size: u32, index: u64) -> Vec<u8> {
        let at = ring_at + RING_SLOTS_OFFSET as u64 + index * u64::from(slot_size);
        dev.read(at, slot_size as usize)
    }

    fn post_send_list(qp: &mut Qp, list: &List<ibv_send_wr>) -> (c_int, Option<usize>) {
        let mut bad = core::ptr::null_mut();
        // SAFETY: a QP as `create_qp` makes it; a well-formed list.
        let ret = unsafe { post_send(&raw mut qp.vqp.qp_ex.qp_base, list.head(), &mut bad) };
        (ret, list.index_of(bad))
    }

    fn post_recv_list(qp: &mut Qp, list: &List<ibv_recv_wr>) -> (c_int, Option<usize>) {
        let mut bad = core::ptr::null_mut();
        // SAFETY: as above.
        let ret = unsafe { post_recv(&raw mut qp.vqp.qp_ex.qp_base, list.head(), &mut bad) };
        (ret, list.index_of(bad))
    }

    #[test]
    fn post_send_queues_in_the_mapped_ring_and_rings_the_doorbell() {
        let mut dev = FakeDevice::new("qp-send", 3);
        let mut qp = qp(&mut dev, IBV_QPT_RC, false).unwrap();
        let one = [sge(0x1000, 10, 5)];
        let list = List::new(vec![
            send_wr(1, opcode::SEND, &one),
            send_wr(2, opcode::SEND, &[]),
        ]);
        // Not before RTS, and then not even the first is queued.
        for state in [IBV_QPS_RESET, IBV_QPS_INIT, IBV_QPS_RTR] {
            qp.vqp.qp_ex.qp_base.state = state;
            assert_eq!(post_send_list(&mut qp, &list), (EINVAL, Some(0)));
        }
        assert_eq!(producer(&dev, SQ_AT), 0);
        assert_eq!(dev.read(0, 32), [0; 32], "no doorbell");
        qp.vqp.qp_ex.qp_base.state = 3; // RTS
        assert_eq!(post_send_list(&mut qp, &list), (0, None));
        assert_eq!(producer(&dev, SQ_AT), 2);
        let first = slot(&dev, SQ_AT, SEND_SLOT, 0);
        assert_eq!(decode_send(&first).wr_id, 1);
        assert_eq!(decode_sge(&first, 64).lkey, 5);
        assert_eq!(decode_send(&slot(&dev, SQ_AT, SEND_SLOT, 1)).wr_id, 2);
        // The doorbell: POST_SEND for handle 77, without requests.
        let cmd = dev.read(0, 32);
        assert_eq!(cmd[..8], [28, 0, 0, 0, 8, 0, 1, 0]);
        assert_eq!(
            cmd[16..],
            [77, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 128, 0, 0, 0]
        );
        // The kernel's sender is draining: no doorbell.
        dev.write(SQ_AT + 68, &ring_flags::SENDER_ACTIVE.to_le_bytes());
        let list = List::new(vec![send_wr(3, opcode::SEND, &[])]);
        assert_eq!(post_send_list(&mut qp, &list), (0, None));
        assert_eq!(producer(&dev, SQ_AT), 3);
        assert_eq!(dev.read(32, 32), [0; 32]);
        // SQE and ERR still post (the kernel flushes).
        dev.write(SQ_AT + 68, &0u32.to_le_bytes());
        qp.vqp.qp_ex.qp_base.state = 6; // ERR
        assert_eq!(post_send_list(&mut qp, &list), (0, None));
        assert_eq!(dev.read(32, 8), [28, 0, 0, 0, 8, 0, 1, 0]);
        let counters = qp.rings.as_ref().unwrap().sq.counters();
        assert_eq!((counters.wrs_posted, counters.doorbells), (4, 2));
    }

    #[test]
    fn post_recv_stays_in_user_space() {
        let mut dev = FakeDevice::new("qp-recv", 3);
        let mut qp = qp(&mut dev, IBV_QPT_UD, false).unwrap();
        let two = [sge(0x1000, 10, 5), sge(0x2000, 20, 6)];
        let list = List::new(vec![recv_wr(9, &two)]);
        assert_eq!(post_recv_list(&mut qp, &list), (EINVAL, Some(0)), "RESET");
        qp.vqp.qp_ex.qp_base.state = IBV_QPS_INIT;
        assert_eq!(post_recv_list(&mut qp, &list), (0, None));
        assert_eq!(producer(&dev, RQ_AT), 1);
        let first = slot(&dev, RQ_AT, RECV_SLOT, 0);
        assert_eq!(
            (decode_recv(&first).wr_id, decode_recv(&first).num_sge),
            (9, 2)
        );
        assert_eq!(decode_sge(&first, 32).addr, 0x2000);
        assert_eq!(dev.read(0, 4096), [0; 4096], "no command");
        // More SGEs than granted.
        let three = [sge(0, 0, 0); 3];
        let list = List::new(vec![recv_wr(10, &three)]);
        assert_eq!(post_recv_list(&mut qp, &list), (EINVAL, Some(0)));
    }

    #[test]
    fn a_qp_on_an_srq_has_no_receive_queue() {
        let mut dev = FakeDevice::new("qp-srq", 3);
        let mut qp = qp(&mut dev, IBV_QPT_RC, true).unwrap();
        qp.vqp.qp_ex.qp_base.state = IBV_QPS_INIT;
        let list = List::new(vec![recv_wr(1, &[])]);
        assert_eq!(post_recv_list(&mut qp, &list), (EINVAL, Some(0)));
    }

    #[test]
    fn posting_needs_somewhere_to_report_the_bad_request() {
        let mut dev = FakeDevice::new("qp-null", 3);
        let mut qp = qp(&mut dev, IBV_QPT_RC, false).unwrap();
        qp.vqp.qp_ex.qp_base.state = 3;
        let list = List::new(vec![send_wr(1, opcode::SEND, &[])]);
        // SAFETY: a QP as `create_qp` makes it; a well-formed list.
        let ret = unsafe {
            post_send(
                &raw mut qp.vqp.qp_ex.qp_base,
                list.head(),
                core::ptr::null_mut(),
            )
        };
        assert_eq!(ret, EINVAL);
        let list = List::new(vec![recv_wr(1, &[])]);
        // SAFETY: as above.
        let ret = unsafe {
            post_recv(
                &raw mut qp.vqp.qp_ex.qp_base,
                list.head(),
                core::ptr::null_mut(),
            )
        };
        assert_eq!(ret, EINVAL);
        assert_eq!(producer(&dev, SQ_AT), 0);
        assert_eq!(producer(&dev, RQ_AT), 0);
    }

    #[test]
    fn only_known_qp_types_get_rings() {
        let mut dev = FakeDevice::new("qp-type", 3);
        for qp_type in [IBV_QPT_RC, IBV_QPT_UC, IBV_QPT_UD] {
            assert!(qp(&mut dev, qp_type, false).is_ok());
        }
        // RAW_PACKET, XRC: rxud makes none.
        for qp_type in [8, 9, 10] {
            assert_eq!(qp(&mut dev, qp_type, false).err(), Some(EPROTO));
        }
    }

    /// Calls `ibv_qp_ex` callbacks as libibverbs' inline wrappers do.
    struct Wr(*mut ibv_qp_ex);

    impl Wr {
        fn of(qp: &mut Qp, ops: u64) -> Self {
            set_qp_ex_ops(&mut qp.vqp.qp_ex, ops);
            Self(&raw mut qp.vqp.qp_ex)
        }

        /// The callbacks, as the application reaches them.
        fn x(&self) -> &ibv_qp_ex {
            // SAFETY: the QP outlives the test's `Wr`; nothing changes it
            // while the reference is used (the callbacks called through it
            // touch librxud's state, not the `ibv_qp_ex`).
            unsafe { &*self.0 }
        }

        /// Sets `wr_id`, as the application does before a builder.
        fn wr_id(&self, wr_id: u64) {
            // SAFETY: as above; no reference to the field is live.
            unsafe { (*self.0).wr_id = wr_id };
        }

        /// Sets `wr_flags`, as the application does before a builder.
        fn wr_flags(&self, flags: u32) {
            // SAFETY: as above.
            unsafe { (*self.0).wr_flags = flags };
        }

        fn start(&self) {
            // SAFETY: a QP as `create_qp_ex` makes it.
            unsafe { self.x().wr_start.unwrap()(self.0) }
        }

        fn complete(&self) -> c_int {
            // SAFETY: as above.
            unsafe { self.x().wr_complete.unwrap()(self.0) }
        }

        fn abort(&self) {
            // SAFETY: as above.
            unsafe { self.x().wr_abort.unwrap()(self.0) }
        }

        fn send(&self, wr_id: u64, flags: u32) {
            self.wr_id(wr_id);
            self.wr_flags(flags);
            // SAFETY: as above.
            unsafe { self.x().wr_send.unwrap()(self.0) }
        }

        fn sge(&self, lkey: u32, addr: u64, length: u32) {
            // SAFETY: as above.
            unsafe { self.x().wr_set_sge.unwrap()(self.0, lkey, addr, length) }
        }
    }

    #[test]
    fn wr_batches_go_into_the_send_ring_as_post_send_writes_them() {
        let mut dev = FakeDevice::new("qp-wr", 3);
        let mut qp = qp(&mut dev, IBV_QPT_RC, false).unwrap();
        qp.vqp.qp_ex.qp_base.state = 3; // RTS
        let all = supported_send_ops(IBV_QPT_RC).unwrap();
        let w = Wr::of(&mut qp, all);
        w.start();
        w.wr_id(5);
        w.wr_flags(send_flags::SIGNALED);
        // SAFETY: a QP as `create_qp_ex` makes it; valid arguments.
        unsafe { w.x().wr_rdma_write.unwrap()(w.0, 9, 0x1000) };
        let list = [sge(0x2000, 10, 1), sge(0x3000, 20, 2)];
        // SAFETY: as above; `list` holds two elements.
        unsafe { w.x().wr_set_sge_list.unwrap()(w.0, 2, list.as_ptr()) };
        w.wr_id(6);
        w.wr_flags(send_flags::SOLICITED);
        // SAFETY: as above.
        unsafe { w.x().wr_send_imm.unwrap()(w.0, 0x0a0b_0c0d) };
        let mut data = *b"hi!";
        let bufs = [
            ibv_data_buf {
                addr: data.as_mut_ptr().cast(),
                length: 2,
            },
            ibv_data_buf {
                addr: data[2..].as_mut_ptr().cast(),
                length: 1,
            },
        ];
        // SAFETY: as above; two buffers of those lengths.
        unsafe { w.x().wr_set_inline_data_list.unwrap()(w.0, 2, bufs.as_ptr()) };
        data.fill(0);
        w.wr_id(7);
        // SAFETY: as above.
        unsafe { w.x().wr_atomic_fetch_add.unwrap()(w.0, 3, 0x4000, 1) };
        w.sge(4, 0x5000, 8);
        assert_eq!(producer(&dev, SQ_AT), 0, "nothing before wr_complete");
        assert_eq!(w.complete(), 0);
        assert_eq!(producer(&dev, SQ_AT), 3);
        let s0 = slot(&dev, SQ_AT, SEND_SLOT, 0);
        let (w0, rdma) = (decode_send(&s0), RdmaOp::decode(&decode_send(&s0).op));
        assert_eq!(
            (w0.wr_id, w0.opcode, w0.num_sge),
            (5, opcode::RDMA_WRITE, 2)
        );
        assert_eq!(
            (w0.send_flags, rdma.remote_addr, rdma.rkey),
            (send_flags::SIGNALED, 0x1000, 9)
        );
        assert_eq!(decode_sge(&s0, 64).addr, 0x2000);
        assert_eq!(decode_sge(&s0, 80).lkey, 2);
        let s1 = slot(&dev, SQ_AT, SEND_SLOT, 1);
        let w1 = decode_send(&s1);
        assert_eq!(
            (w1.wr_id, w1.opcode, w1.imm_or_inv),
            (6, opcode::SEND_WITH_IMM, 0x0a0b_0c0d)
        );
        assert_eq!(w1.send_flags, send_flags::SOLICITED | send_flags::INLINE);
        assert_eq!((w1.inline_len, &s1[64..67]), (3, &b"hi!"[..]));
        let s2 = slot(&dev, SQ_AT, SEND_SLOT, 2);
        let (w2, atomic) = (decode_send(&s2), AtomicOp::decode(&decode_send(&s2).op));
        // `wr_flags` stays as the application last set it.
        let flags = send_flags::SOLICITED;
        assert_eq!(
            (w2.wr_id, w2.opcode, w2.send_flags),
            (7, opcode::ATOMIC_FETCH_AND_ADD, flags)
        );
        assert_eq!(
            (atomic.remote_addr, atomic.compare_add, atomic.rkey),
            (0x4000, 1, 3)
        );
        // One doorbell for the batch: POST_SEND for handle 77.
        assert_eq!(dev.read(0, 8), [28, 0, 0, 0, 8, 0, 1, 0]);
        assert_eq!(dev.read(16, 4), [77, 0, 0, 0]);
        assert_eq!(dev.read(32, 8), [0; 8]);
    }

    #[test]
    fn aborted_and_failed_batches_publish_nothing() {
        let mut dev = FakeDevice::new("qp-wr-fail", 3);
        let mut qp = qp(&mut dev, IBV_QPT_RC, false).unwrap();
        qp.vqp.qp_ex.qp_base.state = 3; // RTS
        let w = Wr::of(&mut qp, IBV_QP_EX_WITH_SEND);
        assert_eq!(w.complete(), EINVAL, "no wr_start");
        w.start();
        w.send(1, 0);
        w.abort();
        w.start();
        w.send(2, 0);
        // More elements than granted (2).
        let list = [sge(0, 0, 0); 3];
        // SAFETY: a QP as `create_qp_ex` makes it; three elements.
        unsafe { w.x().wr_set_sge_list.unwrap()(w.0, 3, list.as_ptr()) };
        assert_eq!(w.complete(), EINVAL);
        w.start();
        w.send(3, 0);
        // Inline data longer than granted (32).
        let long = [0u8; 33];
        // SAFETY: as above; 33 readable bytes.
        unsafe { w.x().wr_set_inline_data.unwrap()(w.0, long.as_ptr().cast_mut().cast(), 33) };
        assert_eq!(w.complete(), EINVAL);
        // A setter before a builder.
        w.start();
        w.sge(1, 2, 3);
        w.send(4, 0);
        assert_eq!(w.complete(), EINVAL);
        // More than the ring's 4 slots: none of the five.
        w.start();
        for id in 10..15 {
            w.send(id, 0);
        }
        assert_eq!(w.complete(), ENOMEM);
        // A request `ibv_post_send` would refuse: an atomic without its
        // 8-byte element (the QP does not offer atomics; checked anyway).
        w.start();
        w.send(20, 0);
        w.sge(1, 0x1000, 8);
        w.wr_id(21);
        // SAFETY: as above.
        unsafe { wr_atomic_cmp_swp(w.0, 1, 0x2000, 1, 2) };
        assert_eq!(w.complete(), EINVAL);
        assert_eq!(producer(&dev, SQ_AT), 0);
        assert_eq!(dev.read(0, 32), [0; 32], "no doorbell");
        // Empty batches are fine and ring nothing.
        w.start();
        assert_eq!(w.complete(), 0);
        assert_eq!(dev.read(0, 32), [0; 32]);
        // Before RTS, by libibverbs' cached state, as `ibv_post_send`.
        qp.vqp.qp_ex.qp_base.state = IBV_QPS_RTR;
        w.start();
        w.send(30, 0);
        assert_eq!(w.complete(), EINVAL);
        assert_eq!(producer(&dev, SQ_AT), 0);
        // And the ring still takes a good batch.
        qp.vqp.qp_ex.qp_base.state = 3;
        w.start();
        w.send(31, 0);
        assert_eq!(w.complete(), 0);
        assert_eq!(producer(&dev, SQ_AT), 1);
        assert_eq!(decode_send(&slot(&dev, SQ_AT, SEND_SLOT, 0)).wr_id, 31);
    }

    #[test]
    fn ud_requests_need_an_address() {
        let mut dev = FakeDevice::new("qp-wr-ud", 3);
        let mut qp = qp(&mut dev, IBV_QPT_UD, false).unwrap();
        qp.vqp.qp_ex.qp_base.state = 3;
        let w = Wr::of(&mut qp, supported_send_ops(IBV_QPT_UD).unwrap());
        assert!(w.x().wr_rdma_write.is_none() && w.x().wr_atomic_cmp_swp.is_none());
        w.start();
        w.send(1, 0);
        assert_eq!(w.complete(), EINVAL, "no wr_set_ud_addr");
        let mut ah = crate::ah::Ah::for_test(42);
        w.start();
        w.send(2, 0);
        // SAFETY: a QP as `create_qp_ex` makes it; a live AH of ours.
        unsafe { w.x().wr_set_ud_addr.unwrap()(w.0, ah.as_ibv(), 0x33, 0x44) };
        assert_eq!(w.complete(), 0);
        let wqe = decode_send(&slot(&dev, SQ_AT, SEND_SLOT, 0));
        let ud = UdOp::decode(&wqe.op);
        assert_eq!(
            (wqe.wr_id, ud.ah_num, ud.remote_qpn, ud.remote_qkey),
            (2, 42, 0x33, 0x44)
        );
    }

    #[test]
    fn xud_posts_sends_and_refuses_the_rest() {
        let mut dev = FakeDevice::new("qp-xud", 3);
        let mut qp = qp(&mut dev, IBV_QPT_DRIVER, false).unwrap();
        qp.vqp.qp_ex.qp_base.state = 3; // RTS
        let mut ah = crate::ah::Ah::for_test(9);
        let to = |mut wr: ibv_send_wr, ah: *mut ibv_ah| {
            wr.wr.ud = ibv_send_wr_ud {
                ah,
                remote_qpn: 0x55,
                remote_qkey: 0x66,
            };
            wr
        };
        let one = [sge(0x1000, 100, 5)];
        // SEND and SEND with immediate, addressed as UD.
        let mut imm = send_wr(2, opcode::SEND_WITH_IMM, &one);
        imm.imm_data = 0x0102_0304;
        let list = List::new(vec![
            to(send_wr(1, opcode::SEND, &one), ah.as_ibv()),
            to(imm, ah.as_ibv()),
        ]);
        assert_eq!(post_send_list(&mut qp, &list), (0, None));
        let w0 = decode_send(&slot(&dev, SQ_AT, SEND_SLOT, 0));
        let x0 = XudOp::decode(&w0.op);
        assert_eq!((w0.wr_id, w0.opcode, w0.num_sge), (1, opcode::SEND, 1));
        assert_eq!(
            x0,
            XudOp {
                ah_num: 9,
                remote_qpn: 0x55,
                remote_qkey: 0x66,
                rkey: 0,
                remote_addr: 0
            }
        );
        let w1 = decode_send(&slot(&dev, SQ_AT, SEND_SLOT, 1));
        assert_eq!(
            (w1.opcode, w1.imm_or_inv),
            (opcode::SEND_WITH_IMM, 0x0102_0304)
        );
        // Without an AH; a WRITE (ibv_post_send has no room for its
        // remote address beside the AH), READ, atomics, invalidation; a
        // message longer than XUD's limit: refused, nothing queued.
        let mut refused = vec![to(send_wr(3, opcode::SEND, &one), core::ptr::null_mut())];
        for op in [
            opcode::RDMA_WRITE,
            opcode::RDMA_WRITE_WITH_IMM,
            opcode::RDMA_READ,
            opcode::ATOMIC_CMP_AND_SWP,
            opcode::ATOMIC_FETCH_AND_ADD,
            opcode::LOCAL_INV,
            opcode::SEND_WITH_INV,
        ] {
            let sges = [sge(0x1000, 8, 5)];
            refused.push(to(send_wr(4, op, &sges), ah.as_ibv()));
        }
        // A WRITE whose union holds its RDMA operands, as on an RC QP:
        // refused before the remote address could be taken for an AH.
        let mut write = send_wr(4, opcode::RDMA_WRITE, &one);
        write.wr.rdma = ibv_send_wr_rdma {
            remote_addr: 0x10,
            rkey: 1,
        };
        refused.push(write);
        let max = rxud_abi::xud::MAX_MSG_SZ;
        let long = [sge(0x1000, max, 5), sge(0x2000, 1, 5)];
        refused.push(to(send_wr(5, opcode::SEND, &long), ah.as_ibv()));
        for wr in refused {
            let list = List::new(vec![wr]);
            assert_eq!(post_send_list(&mut qp, &list), (EINVAL, Some(0)));
        }
        assert_eq!(producer(&dev, SQ_AT), 2);
        // Exactly the limit is fine.
        let full = [sge(0x1000, max - 1, 5), sge(0x2000, 1, 5)];
        let list = List::new(vec![to(send_wr(6, opcode::SEND, &full), ah.as_ibv())]);
        assert_eq!(post_send_list(&mut qp, &list), (0, None));
        assert_eq!(producer(&dev, SQ_AT), 3);
    }

    #[test]
    fn xud_writes_go_through_the_wr_interface_with_both_addresses() {
        let mut dev = FakeDevice::new("qp-xud-wr", 3);
        let mut qp = qp(&mut dev, IBV_QPT_DRIVER, false).unwrap();
        qp.vqp.qp_ex.qp_base.state = 3; // RTS
        let w = Wr::of(&mut qp, crate::xud::XUD_SEND_OPS);
        assert!(w.x().wr_rdma_read.is_none() && w.x().wr_atomic_fetch_add.is_none());
        let mut ah = crate::ah::Ah::for_test(7);
        w.start();
        w.wr_id(1);
        // SAFETY: a QP as `rxudv_create_qp` makes it; valid arguments.
        unsafe {
            w.x().wr_rdma_write.unwrap()(w.0, 0x1234, 0xdead_0000);
            w.x().wr_set_ud_addr.unwrap()(w.0, ah.as_ibv(), 0x21, 0x22);
        }
        w.sge(5, 0x1000, 64);
        w.wr_id(2);
        // SAFETY: as above.
        unsafe {
            w.x().wr_rdma_write_imm.unwrap()(w.0, 0x99, 0xbeef_0000, 0x0a0b_0c0d);
            w.x().wr_set_ud_addr.unwrap()(w.0, ah.as_ibv(), 0x31, 0x32);
        }
        w.send(3, 0);
        // SAFETY: as above.
        unsafe { w.x().wr_set_ud_addr.unwrap()(w.0, ah.as_ibv(), 0x41, 0x42) };
        assert_eq!(w.complete(), 0);
        assert_eq!(producer(&dev, SQ_AT), 3);
        let wqe = |i| decode_send(&slot(&dev, SQ_AT, SEND_SLOT, i));
        let (w0, w1, w2) = (wqe(0), wqe(1), wqe(2));
        assert_eq!(
            (w0.wr_id, w0.opcode, w0.num_sge),
            (1, opcode::RDMA_WRITE, 1)
        );
        assert_eq!(
            XudOp::decode(&w0.op),
            XudOp {
                ah_num: 7,
                remote_qpn: 0x21,
                remote_qkey: 0x22,
                rkey: 0x1234,
                remote_addr: 0xdead_0000
            }
        );
        assert_eq!(
            (w1.opcode, w1.imm_or_inv),
            (opcode::RDMA_WRITE_WITH_IMM, 0x0a0b_0c0d)
        );
        let x1 = XudOp::decode(&w1.op);
        assert_eq!(
            (x1.remote_qpn, x1.rkey, x1.remote_addr),
            (0x31, 0x99, 0xbeef_0000)
        );
        let x2 = XudOp::decode(&w2.op);
        assert_eq!((w2.opcode, x2.remote_qpn, x2.rkey), (opcode::SEND, 0x41, 0));
        // A WRITE without its UD address: the batch fails whole.
        w.start();
        w.send(4, 0);
        // SAFETY: as above.
        unsafe { w.x().wr_set_ud_addr.unwrap()(w.0, ah.as_ibv(), 0x41, 0x42) };
        // SAFETY: as above.
        unsafe { w.x().wr_rdma_write.unwrap()(w.0, 1, 0x1000) };
        assert_eq!(w.complete(), EINVAL);
        assert_eq!(producer(&dev, SQ_AT), 3);
    }

    #[test]
    fn create_qp_ex_refuses_what_it_cannot_do() {
        let pd = IBV_QP_INIT_ATTR_PD;
        let ops = IBV_QP_INIT_ATTR_SEND_OPS_FLAGS;
        let check = check_qp_init_attr_ex;
        assert_eq!(check(pd, 0, IBV_QPT_RC, 0), Ok(()));
        assert_eq!(
            check(pd | IBV_QP_INIT_ATTR_CREATE_FLAGS, 0, IBV_QPT_RC, 0),
            Ok(())
        );
        assert_eq!(check(0, 0, IBV_QPT_RC, 0), Err(EINVAL), "no PD");
        assert_eq!(
            check(pd | IBV_QP_INIT_ATTR_CREATE_FLAGS, 1, IBV_QPT_RC, 0),
            Err(EOPNOTSUPP)
        );
        // XRCD, TSO header, RSS, hash.
        for bit in [1, 3, 4, 5, 7] {
            assert_eq!(check(pd | 1 << bit, 0, IBV_QPT_RC, 0), Err(EOPNOTSUPP));
        }
        for qp_type in [IBV_QPT_RC, IBV_QPT_UC, IBV_QPT_UD] {
            let all = supported_send_ops(qp_type).unwrap();
            assert_eq!(check(pd | ops, 0, qp_type, all), Ok(()));
            // TSO, unknown.
            for bit in [10, 13, 40] {
                assert_eq!(check(pd | ops, 0, qp_type, all | 1 << bit), Err(EOPNOTSUPP));
            }
        }
        // UC: no LOCAL_INV, SEND_WITH_INV, FLUSH or ATOMIC_WRITE (rxe's
        // rules); UD: no memory windows either.
        for (qp_type, bits) in [(IBV_QPT_UC, [7, 9, 11, 12]), (IBV_QPT_UD, [7, 8, 11, 12])] {
            let all = supported_send_ops(qp_type).unwrap();
            for bit in bits {
                assert_eq!(check(pd | ops, 0, qp_type, all | 1 << bit), Err(EOPNOTSUPP));
            }
        }
        assert_eq!(supported_send_ops(IBV_QPT_UC), Some(0b1_0000_1111));
        assert_eq!(supported_send_ops(IBV_QPT_UD), Some(0b1100));
        assert_eq!(supported_send_ops(IBV_QPT_RC), Some(0b1_1011_1111_1111));
        // Send operations for a type rxud does not make (RAW_PACKET).
        assert_eq!(check(pd | ops, 0, 8, IBV_QP_EX_WITH_SEND), Err(EOPNOTSUPP));
        assert_eq!(check(pd, 0, 8, 0), Ok(()), "the kernel's to refuse");
    }
}
