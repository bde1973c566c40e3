// SPDX-License-Identifier: GPL-2.0 OR Linux-OpenIB

//! Posting work requests: the producer side of send, receive and SRQ
//! rings. `ibv_post_recv` and `ibv_post_srq_recv` never enter the kernel;
//! `ibv_post_send` enters it only to ring the doorbell, and only when the
//! kernel's sender is not already draining the send queue.
//!
//! Each queue has one lock around its producer side (rxe's queue locks),
//! so threads may post to one queue concurrently. Under it a list of work
//! requests is validated and written, one slot each (`rxud_abi::wqe`: a
//! `SendWqe` or `RecvWqe` header, then `Sge`s or inline data), and
//! published with one release store of the producer index. The first work
//! request that fails stops the list: those before it are published, it
//! and those after it are not, and `*bad_wr` names it. Errors: `EINVAL`
//! for a request the queue cannot take (see `check_send_wr`, `send_wqe`,
//! `check_recv_wr`), `ENOMEM` when the ring is full, `EIO` when the
//! kernel's consumer index is impossible (a broken ring).
//!
//! The send doorbell. After publishing, a full fence, then the ring's
//! `consumer_flags`: if `SENDER_ACTIVE` is clear, the poster (after
//! releasing the lock) writes a POST_SEND command with no work requests
//! on the context's command fd, as rdma-core's rxe provider does
//! (`ib_uverbs_post_send` then calls the driver's `post_send` with an
//! empty list). What the kernel must do in return:
//!
//! - Its sender sets `SENDER_ACTIVE` while it drains the send ring, and
//!   before it stops clears it, issues a full barrier and reads the
//!   producer index again, going on if there are new entries (see
//!   `rxud_abi::ring_flags`). So a poster that finds the flag set may skip
//!   the doorbell: the sender will see its entries.
//! - On the doorbell (`post_send` with no work requests for a user QP) it
//!   makes sure the sender runs over the ring. An error it returns (e.g.
//!   `EINVAL` for a QP whose state does not allow sending) is what
//!   `ibv_post_send` returns; the entries stay published (they cannot be
//!   taken back) and `*bad_wr` is NULL unless a work request also failed.
//! - It reads a slot only after acquiring the producer index, copies it
//!   out before checking it, never writes a slot, and releases the consumer
//!   index (one past the slots it has copied, never beyond the producer
//!   index) so they can be reused.
//! - It checks every entry again (user space is untrusted): opcode for the
//!   QP type, flags, `num_sge` and `inline_len` against the granted
//!   capacities, atomics, `ah_num`, the remote QPN, the message length
//!   (which librxud does not check).
//! - The QP state is the kernel's to enforce. librxud refuses only what
//!   libibverbs' cached `ibv_qp.state` already shows to be wrong (sends
//!   before RTS, receives in RESET; `qp.rs`), which the kernel's own
//!   transitions cannot make stale: they only move a QP to SQE or ERR.
//!
//! Receive and SRQ rings have no doorbell: the kernel reads them when a
//! message arrives.

use crate::mmap::MappedRing;
use crate::ring::{ProduceError, Producer, RingMemory, SlotOverflow};
use crate::sys::*;
use core::ffi::c_int;
use core::mem::size_of;
use core::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use rxud_abi::{
    opcode, send_flags, xud, AtomicOp, BindMwOp, FlushOp, RdmaOp, RecvWqe, SendWqe, Sge, UdOp,
    XudOp, RECV_WQE_HEADER_SIZE, SEND_WQE_HEADER_SIZE, SGE_SIZE,
};
use std::sync::{Mutex, MutexGuard, PoisonError};

/// The QP types rxud makes, which post sends.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum QpType {
    Rc,
    Uc,
    Ud,
    /// `IBV_QPT_DRIVER` made by `rxudv_create_qp` (never by
    /// `ibv_create_qp`, so [`QpType::from_ibv`] does not return it).
    Xud,
}

impl QpType {
    /// The type of a QP `ibv_create_qp` made.
    pub(crate) fn from_ibv(qp_type: ibv_enum) -> Option<Self> {
        match qp_type {
            IBV_QPT_RC => Some(Self::Rc),
            IBV_QPT_UC => Some(Self::Uc),
            IBV_QPT_UD => Some(Self::Ud),
            _ => None,
        }
    }

    /// Whether a QP of this type can post `op`. UC has no RDMA READ, no
    /// atomics, no local invalidation (as rxe) and no SEND with invalidate
    /// (the wire has no UC opcode for it), but binds memory windows; UD
    /// only sends; XUD sends and writes (a WRITE only through the
    /// `ibv_wr_*` interface, see [`PostWr`]), and never reads.
    fn allows(self, op: u32) -> bool {
        use opcode::*;
        match self {
            Self::Rc => matches!(
                op,
                SEND | SEND_WITH_IMM
                    | SEND_WITH_INV
                    | RDMA_WRITE
                    | RDMA_WRITE_WITH_IMM
                    | RDMA_READ
                    | ATOMIC_CMP_AND_SWP
                    | ATOMIC_FETCH_AND_ADD
                    | ATOMIC_WRITE
                    | FLUSH
                    | LOCAL_INV
                    | BIND_MW
            ),
            Self::Uc => matches!(
                op,
                SEND | SEND_WITH_IMM | RDMA_WRITE | RDMA_WRITE_WITH_IMM | BIND_MW
            ),
            Self::Ud => matches!(op, SEND | SEND_WITH_IMM),
            Self::Xud => matches!(op, SEND | SEND_WITH_IMM | RDMA_WRITE | RDMA_WRITE_WITH_IMM),
        }
    }

    /// Whether requests name their destination by AH (`wr.ud`).
    fn addressed(self) -> bool {
        matches!(self, Self::Ud | Self::Xud)
    }
}

/// A send request of the `ibv_wr_*` interface: the `ibv_send_wr` that
/// `ibv_post_send` would take, and the remote address and rkey an RDMA
/// builder (`ibv_wr_rdma_write*`, `ibv_wr_rdma_read`) gave. The `wr` union
/// of an `ibv_send_wr` holds either a UD address or RDMA operands; an XUD
/// WRITE has both (`ibv_wr_set_ud_addr` after `ibv_wr_rdma_write`), so the
/// RDMA operands travel here and the union holds only a UD address (none
/// without `ibv_wr_set_ud_addr`). Through `ibv_post_send` an XUD WRITE
/// cannot have both, and is refused (`EINVAL`).
/// A FLUSH's operands have no room in an `ibv_send_wr` at all: they
/// travel in `flush` (`rxudv_wr_flush`), and `ibv_post_send` refuses a
/// FLUSH (`EINVAL`).
#[derive(Clone, Copy)]
pub(crate) struct PostWr {
    pub wr: ibv_send_wr,
    pub rdma: Option<ibv_send_wr_rdma>,
    pub flush: Option<FlushOp>,
}

/// Whether a QP in `state` (libibverbs' `ibv_qp.state`) may post sends:
/// not before RTS. Values librxud does not know are the kernel's to judge.
pub(crate) fn send_state_allows(state: ibv_enum) -> bool {
    !matches!(state, IBV_QPS_RESET | IBV_QPS_INIT | IBV_QPS_RTR)
}

/// Whether a QP in `state` may post receives: not in RESET.
pub(crate) fn recv_state_allows(state: ibv_enum) -> bool {
    state != IBV_QPS_RESET
}

/// What a send queue was granted (`ibv_qp_cap`) and for which QP type.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct SendCaps {
    pub qp_type: QpType,
    pub max_sge: u32,
    pub max_inline: u32,
}

/// How a send queue tells the kernel it has new entries.
pub(crate) trait Doorbell {
    /// Rings the doorbell; fails with an errno.
    fn ring(&self) -> Result<(), c_int>;
}

/// The doorbell of a QP: a POST_SEND command without work requests on the
/// context's command fd.
#[derive(Clone, Copy, Debug)]
pub(crate) struct CmdDoorbell {
    pub fd: c_int,
    /// The QP's uverbs handle (`ibv_qp.handle`).
    pub qp_handle: u32,
}

const POST_SEND_WORDS: u16 = (size_of::<ibv_post_send>() / 4) as u16;
const POST_SEND_RESP_WORDS: u16 = (size_of::<ib_uverbs_post_send_resp>() / 4) as u16;
const _: () = assert!(
    size_of::<ibv_post_send>().is_multiple_of(4)
        && size_of::<ib_uverbs_post_send_resp>().is_multiple_of(4)
        && size_of::<ibv_post_send>() / 4 <= u16::MAX as usize
);
const _: () = assert!(size_of::<ibv_send_wr>() <= u32::MAX as usize);

impl Doorbell for CmdDoorbell {
    fn ring(&self) -> Result<(), c_int> {
        let mut resp = ib_uverbs_post_send_resp::default();
        let cmd = ibv_post_send {
            hdr: ib_uverbs_cmd_hdr {
                command: IB_USER_VERBS_CMD_POST_SEND,
                in_words: POST_SEND_WORDS,
                out_words: POST_SEND_RESP_WORDS,
            },
            response: (&raw mut resp).expose_provenance() as u64,
            qp_handle: self.qp_handle,
            wr_count: 0,
            sge_count: 0,
            // What the kernel checks `wqe_size` against is smaller; rxe
            // sends the size of `ibv_send_wr` too.
            wqe_size: size_of::<ibv_send_wr>() as u32,
        };
        loop {
            // SAFETY: `cmd` is a live, initialised command of the size
            // given; the kernel writes at most `out_words` words to
            // `response`, which is `resp`, live until the call returns.
            let n = unsafe { write(self.fd, (&raw const cmd).cast(), size_of::<ibv_post_send>()) };
            if n == size_of::<ibv_post_send>() as isize {
                return Ok(());
            }
            if n >= 0 {
                // uverbs takes a command whole or fails it: not uverbs?
                return Err(EIO);
            }
            let err = std::io::Error::last_os_error()
                .raw_os_error()
                .unwrap_or(EIO);
            // The doorbell has no effect but to wake the sender: again.
            if err != EINTR {
                return Err(err);
            }
        }
    }
}

/// How often a send queue posted, for measuring system calls per work
/// request.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct SendCounters {
    /// Work requests published.
    pub wrs_posted: u64,
    /// Doorbells rung (attempted).
    pub doorbells: u64,
}

/// A QP's send queue: its ring and the producer state, behind one lock.
pub(crate) struct SendQueue<M = MappedRing, D = CmdDoorbell> {
    ring: Mutex<M>,
    caps: SendCaps,
    doorbell: D,
    wrs_posted: AtomicU64,
    doorbells: AtomicU64,
}

/// A receive queue or SRQ: its ring, behind one lock, and the number of
/// scatter/gather elements it was granted.
pub(crate) struct RecvQueue<M = MappedRing> {
    ring: Mutex<M>,
    max_sge: u32,
    /// A resize replaced the kernel's ring but its successor could not be
    /// mapped: posting fails (`EIO`) rather than write where the kernel no
    /// longer reads.
    lost: AtomicBool,
}

// Any thread may post to a queue.
const _: fn() = || {
    fn shared<T: Send + Sync>() {}
    shared::<SendQueue>();
    shared::<RecvQueue>();
};

fn lock<M>(ring: &Mutex<M>) -> MutexGuard<'_, M> {
    // A panic aborts (panic = "abort"), so nothing is ever poisoned.
    ring.lock().unwrap_or_else(PoisonError::into_inner)
}

fn produce_errno(err: ProduceError) -> c_int {
    match err {
        ProduceError::Full => ENOMEM,
        ProduceError::Broken(_) => EIO,
    }
}

/// A WQE that would not fit in its slot: impossible for a ring checked
/// against the granted capacities and a request checked against them, but
/// an error rather than a panic.
fn overflow_errno(_: SlotOverflow) -> c_int {
    EIO
}

/// The `n` elements at `ptr`, in application memory.
///
/// # Safety
///
/// If `n` is not 0, `ptr` points to `n` initialised `T`s that stay
/// unchanged while the slice is used.
pub(crate) unsafe fn app_slice<'w, T>(ptr: *const T, n: usize) -> &'w [T] {
    if n == 0 {
        return &[];
    }
    // SAFETY: per the caller.
    unsafe { core::slice::from_raw_parts(ptr, n) }
}

// Members of the `wr` union of a send work request. Every member is
// integers and a pointer, so reading one is sound whichever one the
// application wrote; each is read only for the opcodes that use it.
fn rdma_of(wr: &ibv_send_wr) -> ibv_send_wr_rdma {
    // SAFETY: see above.
    unsafe { wr.wr.rdma }
}

fn atomic_of(wr: &ibv_send_wr) -> ibv_send_wr_atomic {
    // SAFETY: see above.
    unsafe { wr.wr.atomic }
}

fn ud_of(wr: &ibv_send_wr) -> ibv_send_wr_ud {
    // SAFETY: see above.
    unsafe { wr.wr.ud }
}

/// Checks what can be checked of a send work request before its
/// scatter/gather list is read, and returns the list's length: opcode for
/// the QP type, flags, number of elements, and for UD and XUD an AH. An
/// XUD WRITE needs its RDMA operands apart (`has_rdma`, see [`PostWr`]):
/// without them its `wr` union holds no AH, and is not read as one.
fn check_send_wr(wr: &ibv_send_wr, caps: &SendCaps, has_rdma: bool) -> Result<usize, c_int> {
    if !caps.qp_type.allows(wr.opcode) || wr.send_flags & !send_flags::KNOWN != 0 {
        return Err(EINVAL);
    }
    let write = matches!(wr.opcode, opcode::RDMA_WRITE | opcode::RDMA_WRITE_WITH_IMM);
    if caps.qp_type == QpType::Xud && write && !has_rdma {
        return Err(EINVAL);
    }
    let n = u32::try_from(wr.num_sge)
        .ok()
        .filter(|&n| n <= caps.max_sge)
        .ok_or(EINVAL)?;
    if n > 0 && wr.sg_list.is_null() {
        return Err(EINVAL);
    }
    if caps.qp_type.addressed() && ud_of(wr).ah.is_null() {
        return Err(EINVAL);
    }
    usize::try_from(n).map_err(|_| EINVAL)
}

/// What follows a send WQE's header.
#[derive(Debug, PartialEq, Eq)]
enum Body<'w> {
    Nothing,
    Sges(&'w [ibv_sge]),
    /// The bytes the elements point to, one after the other.
    Inline(&'w [ibv_sge]),
}

/// Builds the WQE of a send work request that passed `check_send_wr`,
/// whose scatter/gather list is `sges`, checking what depends on the list:
/// an atomic takes one 8-byte element and an 8-byte aligned remote
/// address; inline data goes only with SENDs and RDMA WRITEs and fits in
/// `max_inline`; an XUD message is at most `xud::MAX_MSG_SZ` bytes.
/// `ah_num` is the number of the AH of a UD or XUD request; `rdma` the
/// operands of an `ibv_wr_*` RDMA builder, `flush` those of
/// `rxudv_wr_flush` (see [`PostWr`]).
fn send_wqe<'w>(
    wr: &ibv_send_wr,
    sges: &'w [ibv_sge],
    caps: &SendCaps,
    ah_num: u32,
    rdma: Option<ibv_send_wr_rdma>,
    flush: Option<FlushOp>,
) -> Result<(SendWqe, Body<'w>), c_int> {
    use opcode::*;
    let op = wr.opcode;
    let mut wqe = SendWqe {
        wr_id: wr.wr_id,
        opcode: op,
        send_flags: wr.send_flags,
        ..SendWqe::default()
    };
    if op == FLUSH {
        // Nothing local to gather or carry; the kernel checks the
        // operands as the responder checks a FETH.
        let f = flush.ok_or(EINVAL)?;
        if !sges.is_empty() || wr.send_flags & send_flags::INLINE != 0 {
            return Err(EINVAL);
        }
        wqe.op = f.encode();
        return Ok((wqe, Body::Nothing));
    }
    // ATOMIC WRITE's 8 bytes ride as inline data, whatever `max_inline`
    // (rust/abi).
    let atomic_write = op == ATOMIC_WRITE;
    if atomic_write && wr.send_flags & send_flags::INLINE == 0 {
        return Err(EINVAL);
    }
    let body = if wr.send_flags & send_flags::INLINE != 0 {
        if !matches!(
            op,
            SEND | SEND_WITH_IMM | SEND_WITH_INV | RDMA_WRITE | RDMA_WRITE_WITH_IMM | ATOMIC_WRITE
        ) {
            return Err(EINVAL);
        }
        let mut len = 0u64;
        for sge in sges {
            if sge.addr == 0 && sge.length != 0 {
                return Err(EINVAL);
            }
            len += u64::from(sge.length);
        }
        if if atomic_write {
            len != 8
        } else {
            len > u64::from(caps.max_inline)
        } {
            return Err(EINVAL);
        }
        wqe.inline_len = u32::try_from(len).map_err(|_| EINVAL)?;
        Body::Inline(sges)
    } else if matches!(op, LOCAL_INV | BIND_MW) {
        // Nothing to gather: the list is ignored.
        Body::Nothing
    } else {
        wqe.num_sge = u32::try_from(sges.len()).map_err(|_| EINVAL)?;
        Body::Sges(sges)
    };
    wqe.imm_or_inv = match op {
        SEND_WITH_IMM | RDMA_WRITE_WITH_IMM | SEND_WITH_INV | LOCAL_INV => wr.imm_data,
        _ => 0,
    };
    if caps.qp_type == QpType::Xud {
        let len = sges.iter().map(|sge| u64::from(sge.length)).sum::<u64>();
        if len > u64::from(xud::MAX_MSG_SZ) {
            return Err(EINVAL);
        }
        wqe.op = xud_op(wr, ah_num, rdma)?;
        return Ok((wqe, body));
    }
    wqe.op = match op {
        RDMA_WRITE | RDMA_WRITE_WITH_IMM | RDMA_READ | ATOMIC_WRITE => {
            let rdma = rdma.unwrap_or_else(|| rdma_of(wr));
            RdmaOp {
                remote_addr: rdma.remote_addr,
                rkey: rdma.rkey,
            }
            .encode()
        }
        ATOMIC_CMP_AND_SWP | ATOMIC_FETCH_AND_ADD => {
            let atomic = atomic_of(wr);
            if !matches!(sges, [sge] if sge.length == 8) || !atomic.remote_addr.is_multiple_of(8) {
                return Err(EINVAL);
            }
            AtomicOp {
                remote_addr: atomic.remote_addr,
                compare_add: atomic.compare_add,
                swap: atomic.swap,
                rkey: atomic.rkey,
            }
            .encode()
        }
        // SAFETY: the verbs contract: the window and MR a BIND_MW names
        // stay valid while it is posted.
        BIND_MW => unsafe { bind_op(wr) }?.encode(),
        _ if caps.qp_type == QpType::Ud => {
            let ud = ud_of(wr);
            UdOp {
                ah_num,
                remote_qpn: ud.remote_qpn,
                remote_qkey: ud.remote_qkey,
            }
            .encode()
        }
        _ => [0; 32],
    };
    Ok((wqe, body))
}

/// The operands of a BIND_MW request: the window by its current rkey,
/// the MR (none for a zero-length bind) by its lkey. No window is
/// `EINVAL`; the kernel checks the rest.
///
/// # Safety
///
/// `wr.tail.bind_mw` was written by the application (`IBV_WR_BIND_MW`),
/// and its `mw` and `bind_info.mr`, where not NULL, are live.
unsafe fn bind_op(wr: &ibv_send_wr) -> Result<BindMwOp, c_int> {
    // SAFETY: every member of the union is integers and pointers; for
    // this opcode the application wrote `bind_mw`.
    let bind = unsafe { wr.tail.bind_mw };
    // SAFETY: per the caller.
    let mw = unsafe { bind.mw.as_ref() }.ok_or(EINVAL)?;
    // SAFETY: per the caller.
    let mr_lkey = unsafe { bind.bind_info.mr.as_ref() }.map_or(0, |mr| mr.lkey);
    Ok(BindMwOp {
        addr: bind.bind_info.addr,
        length: bind.bind_info.length,
        mw_rkey: mw.rkey,
        new_rkey: bind.rkey,
        mr_lkey,
        access: bind.bind_info.mw_access_flags,
    })
}

/// The operands of an XUD request: its destination (`wr.ud`) and, for a
/// WRITE, the remote address an `ibv_wr_*` builder gave (none: `EINVAL`,
/// as for a WRITE posted with `ibv_post_send`).
fn xud_op(
    wr: &ibv_send_wr,
    ah_num: u32,
    rdma: Option<ibv_send_wr_rdma>,
) -> Result<[u8; 32], c_int> {
    let ud = ud_of(wr);
    let remote = match wr.opcode {
        opcode::RDMA_WRITE | opcode::RDMA_WRITE_WITH_IMM => rdma.ok_or(EINVAL)?,
        _ => ibv_send_wr_rdma::default(),
    };
    Ok(XudOp {
        ah_num,
        remote_qpn: ud.remote_qpn,
        remote_qkey: ud.remote_qkey,
        rkey: remote.rkey,
        remote_addr: remote.remote_addr,
    }
    .encode())
}

fn abi_sge(sge: &ibv_sge) -> Sge {
    Sge {
        addr: sge.addr,
        length: sge.length,
        lkey: sge.lkey,
    }
}

/// Checks a receive work request's number of scatter/gather elements
/// against `max_sge` and returns it.
fn check_recv_wr(wr: &ibv_recv_wr, max_sge: u32) -> Result<usize, c_int> {
    let n = u32::try_from(wr.num_sge)
        .ok()
        .filter(|&n| n <= max_sge)
        .ok_or(EINVAL)?;
    if n > 0 && wr.sg_list.is_null() {
        return Err(EINVAL);
    }
    usize::try_from(n).map_err(|_| EINVAL)
}

const SEND_HEADER: usize = SEND_WQE_HEADER_SIZE as usize;
const RECV_HEADER: usize = RECV_WQE_HEADER_SIZE as usize;
const SGE_BYTES: usize = SGE_SIZE as usize;

impl<M: RingMemory, D: Doorbell> SendQueue<M, D> {
    pub(crate) fn new(ring: M, caps: SendCaps, doorbell: D) -> Self {
        Self {
            ring: Mutex::new(ring),
            caps,
            doorbell,
            wrs_posted: AtomicU64::new(0),
            doorbells: AtomicU64::new(0),
        }
    }

    #[cfg_attr(
        not(test),
        expect(dead_code, reason = "read by tests; measurements will read it")
    )]
    pub(crate) fn counters(&self) -> SendCounters {
        SendCounters {
            wrs_posted: self.wrs_posted.load(Ordering::Relaxed),
            doorbells: self.doorbells.load(Ordering::Relaxed),
        }
    }

    /// `ibv_post_send` on this queue: queues the list `head`, publishes
    /// what it queued, and rings the doorbell if the kernel's sender is not
    /// active. Returns 0 or an errno; `*bad_wr` is the first request not
    /// queued (NULL if all were).
    ///
    /// # Safety
    ///
    /// `head` is NULL or a list of send work requests as the verbs
    /// contract of `ibv_post_send` has it: linked by `next` up to a NULL;
    /// each `sg_list` holds `num_sge` elements; with `IBV_SEND_INLINE` each
    /// element's `addr` points to `length` readable bytes; on a UD QP each
    /// `wr.ud.ah` is NULL or a live AH of librxud's. Nothing of it changes
    /// during the call.
    pub(crate) unsafe fn post(
        &self,
        head: *mut ibv_send_wr,
        bad_wr: &mut *mut ibv_send_wr,
    ) -> c_int {
        *bad_wr = core::ptr::null_mut();
        if head.is_null() {
            return EINVAL;
        }
        let mut err = 0;
        let rung = self.produce(|producer| {
            let mut wr = head;
            while !wr.is_null() {
                // SAFETY: per the caller, a valid request, unchanged
                // during the call.
                let w = unsafe { &*wr };
                // SAFETY: per the caller.
                if let Err(e) = unsafe { self.queue(producer, w, None, None) } {
                    err = e;
                    *bad_wr = wr;
                    break;
                }
                wr = w.next;
            }
            // What was queued before a failure is published.
            true
        });
        match rung {
            Err(e) => e,
            Ok(()) => err,
        }
    }

    /// Queues every request of `wrs` (their `next` pointers are ignored)
    /// or none: if one fails, nothing of the batch is published and its
    /// errno is returned. Otherwise publishes them all and rings the
    /// doorbell as [`post`](Self::post) does. This is `ibv_wr_complete`,
    /// for which a failure aborts the whole batch. An empty batch publishes
    /// nothing and rings nothing. A doorbell's error is returned with the
    /// batch published, as `post` returns it.
    ///
    /// # Safety
    ///
    /// Each request is as [`post`](Self::post) requires.
    pub(crate) unsafe fn post_batch(&self, wrs: &[PostWr]) -> Result<(), c_int> {
        let mut err = Ok(());
        self.produce(|producer| {
            for w in wrs {
                // SAFETY: per the caller.
                if let Err(e) = unsafe { self.queue(producer, &w.wr, w.rdma, w.flush) } {
                    err = Err(e);
                    // The producer is dropped unpublished: the slots
                    // written so far stay free.
                    return false;
                }
            }
            true
        })?;
        err
    }

    /// Runs `fill` over a producer of the ring, under the queue's lock,
    /// and publishes what it committed if it returns `true`; then, outside
    /// the lock, rings the doorbell if something was published and the
    /// kernel's sender is not active. Fails with the doorbell's errno.
    fn produce(&self, fill: impl FnOnce(&mut Producer<'_, '_>) -> bool) -> Result<(), c_int> {
        let (published, doorbell) = {
            let mem = lock(&self.ring);
            let ring = mem.ring();
            let mut producer = Producer::new(&ring);
            let published = if fill(&mut producer) {
                producer.publish()
            } else {
                0
            };
            (published, published > 0 && !ring.consumer_active())
        };
        // Outside the lock: other posters need not wait for the kernel.
        // The entries are published, so the sender this wakes sees them.
        self.wrs_posted
            .fetch_add(u64::from(published), Ordering::Relaxed);
        if doorbell {
            self.doorbells.fetch_add(1, Ordering::Relaxed);
            self.doorbell.ring()?;
        }
        Ok(())
    }

    /// Checks `wr` (with the RDMA operands `rdma` of an `ibv_wr_*`
    /// builder or the FLUSH operands `flush`, see [`PostWr`]) and writes
    /// it into the next free slot.
    ///
    /// # Safety
    ///
    /// `wr` is a request as [`post`](Self::post) requires.
    unsafe fn queue(
        &self,
        producer: &mut Producer<'_, '_>,
        wr: &ibv_send_wr,
        rdma: Option<ibv_send_wr_rdma>,
        flush: Option<FlushOp>,
    ) -> Result<(), c_int> {
        let caps = &self.caps;
        let n = check_send_wr(wr, caps, rdma.is_some())?;
        // SAFETY: per the caller `sg_list` holds `num_sge` elements, which
        // is `n`; `check_send_wr` refused NULL with any.
        let sges = unsafe { app_slice(wr.sg_list.cast_const(), n) };
        let ah_num = match caps.qp_type {
            // SAFETY: per the caller NULL or a live AH of ours, and
            // `check_send_wr` refused NULL.
            QpType::Ud | QpType::Xud => unsafe { crate::ah::ah_num(ud_of(wr).ah) },
            QpType::Rc | QpType::Uc => 0,
        };
        let (wqe, body) = send_wqe(wr, sges, caps, ah_num, rdma, flush)?;
        let mut slot = producer.reserve().map_err(produce_errno)?;
        slot.put(0, &wqe).map_err(overflow_errno)?;
        let mut at = SEND_HEADER;
        match body {
            Body::Nothing => {}
            Body::Sges(sges) => {
                for sge in sges {
                    slot.put(at, &abi_sge(sge)).map_err(overflow_errno)?;
                    at += SGE_BYTES;
                }
            }
            Body::Inline(sges) => {
                for sge in sges {
                    let len = usize::try_from(sge.length).map_err(|_| EINVAL)?;
                    let addr = usize::try_from(sge.addr).map_err(|_| EINVAL)?;
                    // SAFETY: per the caller, with `IBV_SEND_INLINE` `addr`
                    // points to `length` readable bytes; `send_wqe` refused
                    // NULL with any.
                    let data =
                        unsafe { app_slice(core::ptr::with_exposed_provenance::<u8>(addr), len) };
                    slot.write(at, data).map_err(overflow_errno)?;
                    at += len;
                }
            }
        }
        slot.commit();
        Ok(())
    }
}

impl<M: RingMemory> RecvQueue<M> {
    pub(crate) fn new(ring: M, max_sge: u32) -> Self {
        Self {
            ring: Mutex::new(ring),
            max_sge,
            lost: AtomicBool::new(false),
        }
    }

    /// Scatter/gather elements a WQE may have.
    pub(crate) fn max_sge(&self) -> u32 {
        self.max_sge
    }

    /// An SRQ resize: `resize` runs with posting held off (the kernel
    /// moves the waiting WQEs into its new ring meanwhile) and gives
    /// `Err` if the kernel refused (nothing changed), `Ok(Err)` if the
    /// kernel swapped its rings but the new one could not be mapped
    /// (posting fails from then on), or the new ring, which replaces the
    /// old (unmapped once dropped, outside the lock). Returns 0 or the
    /// errno.
    pub(crate) fn replace_ring(
        &self,
        resize: impl FnOnce() -> Result<Result<M, c_int>, c_int>,
    ) -> c_int {
        let mut ring = lock(&self.ring);
        if self.lost.load(Ordering::Relaxed) {
            return EIO;
        }
        let old = match resize() {
            Err(err) => return err,
            Ok(Err(err)) => {
                self.lost.store(true, Ordering::Relaxed);
                return err;
            }
            Ok(Ok(new)) => core::mem::replace(&mut *ring, new),
        };
        drop(ring);
        drop(old);
        0
    }

    /// `ibv_post_recv` (or `ibv_post_srq_recv`) on this queue: queues the
    /// list `head` and publishes what it queued. Returns 0 or an errno;
    /// `*bad_wr` is the first request not queued (NULL if all were).
    ///
    /// # Safety
    ///
    /// `head` is NULL or a list of receive work requests as the verbs
    /// contract has it: linked by `next` up to a NULL; each `sg_list` holds
    /// `num_sge` elements. Nothing of it changes during the call.
    pub(crate) unsafe fn post(
        &self,
        head: *mut ibv_recv_wr,
        bad_wr: &mut *mut ibv_recv_wr,
    ) -> c_int {
        *bad_wr = core::ptr::null_mut();
        if head.is_null() {
            return EINVAL;
        }
        let mem = lock(&self.ring);
        if self.lost.load(Ordering::Relaxed) {
            *bad_wr = head;
            return EIO;
        }
        let ring = mem.ring();
        let mut producer = Producer::new(&ring);
        let mut err = 0;
        let mut wr = head;
        while !wr.is_null() {
            // SAFETY: per the caller, a valid request, unchanged during the
            // call.
            let w = unsafe { &*wr };
            // SAFETY: per the caller.
            if let Err(e) = unsafe { self.queue(&mut producer, w) } {
                err = e;
                *bad_wr = wr;
                break;
            }
            wr = w.next;
        }
        producer.publish();
        err
    }

    /// Checks `wr` and writes it into the next free slot.
    ///
    /// # Safety
    ///
    /// `wr` is a request as [`post`](Self::post) requires.
    unsafe fn queue(&self, producer: &mut Producer<'_, '_>, wr: &ibv_recv_wr) -> Result<(), c_int> {
        let n = check_recv_wr(wr, self.max_sge)?;
        // SAFETY: per the caller `sg_list` holds `num_sge` elements, which
        // is `n`; `check_recv_wr` refused NULL with any.
        let sges = unsafe { app_slice(wr.sg_list.cast_const(), n) };
        let wqe = RecvWqe {
            wr_id: wr.wr_id,
            num_sge: u32::try_from(n).map_err(|_| EINVAL)?,
            reserved: 0,
        };
        let mut slot = producer.reserve().map_err(produce_errno)?;
        slot.put(0, &wqe).map_err(overflow_errno)?;
        let mut at = RECV_HEADER;
        for sge in sges {
            slot.put(at, &abi_sge(sge)).map_err(overflow_errno)?;
            at += SGE_BYTES;
        }
        slot.commit();
        Ok(())
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::ah::Ah;
    use crate::ring::testing::TestRing;
    use core::sync::atomic::{fence, AtomicI32};
    use rxud_abi::{recv_wqe_slot_size, ring_flags, send_wqe_slot_size};
    use std::time::{Duration, Instant};

    /// A doorbell that counts its rings, and fails with `fail` unless 0.
    #[derive(Default)]
    pub(crate) struct FakeDoorbell {
        rings: AtomicU64,
        fail: AtomicI32,
    }

    impl Doorbell for FakeDoorbell {
        fn ring(&self) -> Result<(), c_int> {
            self.rings.fetch_add(1, Ordering::SeqCst);
            match self.fail.load(Ordering::Relaxed) {
                0 => Ok(()),
                err => Err(err),
            }
        }
    }

    type TestSq = SendQueue<TestRing, FakeDoorbell>;
    type TestRq = RecvQueue<TestRing>;

    const MAX_SGE: u32 = 3;
    const MAX_INLINE: u32 = 40;

    fn caps(qp_type: QpType) -> SendCaps {
        SendCaps {
            qp_type,
            max_sge: MAX_SGE,
            max_inline: MAX_INLINE,
        }
    }

    fn sq(qp_type: QpType, slots: u32) -> TestSq {
        let slot_size = send_wqe_slot_size(MAX_SGE, MAX_INLINE);
        SendQueue::new(
            TestRing::new(slots, slot_size),
            caps(qp_type),
            FakeDoorbell::default(),
        )
    }

    fn rq(slots: u32, max_sge: u32) -> TestRq {
        RecvQueue::new(TestRing::new(slots, recv_wqe_slot_size(max_sge)), max_sge)
    }

    impl TestSq {
        fn mem(&self) -> MutexGuard<'_, TestRing> {
            lock(&self.ring)
        }

        fn rings(&self) -> u64 {
            self.doorbell.rings.load(Ordering::SeqCst)
        }
    }

    impl TestRq {
        fn mem(&self) -> MutexGuard<'_, TestRing> {
            lock(&self.ring)
        }
    }

    fn le32(b: &[u8], at: usize) -> u32 {
        u32::from_le_bytes(b[at..at + 4].try_into().unwrap())
    }

    fn le64(b: &[u8], at: usize) -> u64 {
        u64::from_le_bytes(b[at..at + 8].try_into().unwrap())
    }

    /// A send WQE as the kernel would decode it from a slot.
    pub(crate) fn decode_send(b: &[u8]) -> SendWqe {
        SendWqe {
            wr_id: le64(b, 0),
            opcode: le32(b, 8),
            send_flags: le32(b, 12),
            num_sge: le32(b, 16),
            inline_len: le32(b, 20),
            imm_or_inv: le32(b, 24),
            reserved: le32(b, 28),
            op: b[32..64].try_into().unwrap(),
        }
    }

    pub(crate) fn decode_recv(b: &[u8]) -> RecvWqe {
        RecvWqe {
            wr_id: le64(b, 0),
            num_sge: le32(b, 8),
            reserved: le32(b, 12),
        }
    }

    pub(crate) fn decode_sge(b: &[u8], at: usize) -> Sge {
        Sge {
            addr: le64(b, at),
            length: le32(b, at + 8),
            lkey: le32(b, at + 12),
        }
    }

    pub(crate) fn sge(addr: u64, length: u32, lkey: u32) -> ibv_sge {
        ibv_sge { addr, length, lkey }
    }

    /// The address of `data`, as an application puts it in an SGE.
    fn addr_of(data: &[u8]) -> u64 {
        data.as_ptr().expose_provenance() as u64
    }

    /// A send request gathering from `sges` (which must outlive its use).
    pub(crate) fn send_wr(wr_id: u64, opcode: u32, sges: &[ibv_sge]) -> ibv_send_wr {
        ibv_send_wr {
            wr_id,
            opcode,
            num_sge: sges.len() as c_int,
            sg_list: sges.as_ptr().cast_mut(),
            ..ibv_send_wr::default()
        }
    }

    pub(crate) fn recv_wr(wr_id: u64, sges: &[ibv_sge]) -> ibv_recv_wr {
        ibv_recv_wr {
            wr_id,
            num_sge: sges.len() as c_int,
            sg_list: sges.as_ptr().cast_mut(),
            ..ibv_recv_wr::default()
        }
    }

    pub(crate) trait Linked {
        fn set_next(&mut self, next: *mut Self);
    }

    impl Linked for ibv_send_wr {
        fn set_next(&mut self, next: *mut Self) {
            self.next = next;
        }
    }

    impl Linked for ibv_recv_wr {
        fn set_next(&mut self, next: *mut Self) {
            self.next = next;
        }
    }

    /// Work requests linked into a list, in one allocation.
    pub(crate) struct List<W> {
        _wrs: Vec<W>,
        base: *mut W,
        len: usize,
    }

    impl<W: Linked> List<W> {
        pub(crate) fn new(mut wrs: Vec<W>) -> Self {
            let len = wrs.len();
            let base = wrs.as_mut_ptr();
            for i in 0..len {
                // SAFETY: `i` and `i + 1` are in (or one past) `wrs`; all
                // accesses go through `base`.
                unsafe {
                    let next = if i + 1 < len {
                        base.add(i + 1)
                    } else {
                        core::ptr::null_mut()
                    };
                    (*base.add(i)).set_next(next);
                }
            }
            Self {
                _wrs: wrs,
                base,
                len,
            }
        }

        pub(crate) fn head(&self) -> *mut W {
            if self.len == 0 {
                core::ptr::null_mut()
            } else {
                self.base
            }
        }

        /// The request `bad` points to, by its index (`None` for NULL).
        pub(crate) fn index_of(&self, bad: *mut W) -> Option<usize> {
            if bad.is_null() {
                return None;
            }
            // SAFETY: `post` sets `bad` to NULL or a request of the list.
            let i = unsafe { bad.offset_from(self.base) };
            assert!((0..self.len as isize).contains(&i), "bad_wr not in list");
            Some(i as usize)
        }
    }

    /// Posts `list`; returns the result and the index of `*bad_wr`.
    fn post(sq: &TestSq, list: &List<ibv_send_wr>) -> (c_int, Option<usize>) {
        let mut bad = core::ptr::null_mut();
        // SAFETY: a well-formed list whose SGEs, inline data and AHs the
        // tests keep alive.
        let ret = unsafe { sq.post(list.head(), &mut bad) };
        (ret, list.index_of(bad))
    }

    fn post_recv(rq: &TestRq, list: &List<ibv_recv_wr>) -> (c_int, Option<usize>) {
        let mut bad = core::ptr::null_mut();
        // SAFETY: a well-formed list whose SGEs the tests keep alive.
        let ret = unsafe { rq.post(list.head(), &mut bad) };
        (ret, list.index_of(bad))
    }

    fn counters(wrs_posted: u64, doorbells: u64) -> SendCounters {
        SendCounters {
            wrs_posted,
            doorbells,
        }
    }

    #[test]
    fn rc_requests_carry_their_operands_and_sges() {
        use opcode::*;
        let sq = sq(QpType::Rc, 8);
        let two = [sge(0x1000, 100, 0x11), sge(0x2000, 200, 0x22)];
        let one = [sge(0x3000, 300, 0x33)];
        let word = [sge(0x4000, 8, 0x44)];
        let flags = send_flags::SIGNALED | send_flags::SOLICITED | send_flags::FENCE;
        let mut write = send_wr(1, RDMA_WRITE_WITH_IMM, &two);
        write.send_flags = flags;
        write.imm_data = 0x1234_5678u32.to_be();
        write.wr.rdma = ibv_send_wr_rdma {
            remote_addr: 0xdead_0000,
            rkey: 0xabc,
        };
        let mut read = send_wr(2, RDMA_READ, &one);
        read.wr.rdma = ibv_send_wr_rdma {
            remote_addr: 0xbeef_0000,
            rkey: 0xdef,
        };
        // Not the operation's: not carried.
        read.imm_data = 0x99;
        let atomic = ibv_send_wr_atomic {
            remote_addr: 0x8008,
            compare_add: 5,
            swap: 6,
            rkey: 7,
        };
        let mut cas = send_wr(3, ATOMIC_CMP_AND_SWP, &word);
        cas.wr.atomic = atomic;
        let mut faa = send_wr(4, ATOMIC_FETCH_AND_ADD, &word);
        faa.wr.atomic = atomic;
        let mut inv = send_wr(5, SEND_WITH_INV, &one);
        inv.imm_data = 0x77;
        let mut local_inv = send_wr(6, LOCAL_INV, &one);
        local_inv.imm_data = 0x88;
        let send = send_wr(7, SEND, &two);
        let list = List::new(vec![write, read, cas, faa, inv, local_inv, send]);
        assert_eq!(post(&sq, &list), (0, None));
        assert_eq!(sq.counters(), counters(7, 1));
        assert_eq!(sq.rings(), 1);
        let mem = sq.mem();
        assert_eq!(mem.producer(), 7);
        let slot = mem.slot(0);
        assert_eq!(
            decode_send(&slot),
            SendWqe {
                wr_id: 1,
                opcode: RDMA_WRITE_WITH_IMM,
                send_flags: flags,
                num_sge: 2,
                inline_len: 0,
                imm_or_inv: 0x1234_5678u32.to_be(),
                reserved: 0,
                op: RdmaOp {
                    remote_addr: 0xdead_0000,
                    rkey: 0xabc
                }
                .encode(),
            }
        );
        assert_eq!(decode_sge(&slot, 64), abi_sge(&two[0]));
        assert_eq!(decode_sge(&slot, 80), abi_sge(&two[1]));
        let read = decode_send(&mem.slot(1));
        assert_eq!((read.num_sge, read.imm_or_inv), (1, 0));
        assert_eq!(
            RdmaOp::decode(&read.op),
            RdmaOp {
                remote_addr: 0xbeef_0000,
                rkey: 0xdef
            }
        );
        assert_eq!(decode_sge(&mem.slot(1), 64), abi_sge(&one[0]));
        for (i, op) in [(2, ATOMIC_CMP_AND_SWP), (3, ATOMIC_FETCH_AND_ADD)] {
            let slot = mem.slot(i);
            let wqe = decode_send(&slot);
            assert_eq!((wqe.opcode, wqe.num_sge), (op, 1));
            assert_eq!(
                AtomicOp::decode(&wqe.op),
                AtomicOp {
                    remote_addr: 0x8008,
                    compare_add: 5,
                    swap: 6,
                    rkey: 7
                }
            );
            assert_eq!(decode_sge(&slot, 64), abi_sge(&word[0]));
        }
        let inv = decode_send(&mem.slot(4));
        assert_eq!(
            (inv.opcode, inv.num_sge, inv.imm_or_inv),
            (SEND_WITH_INV, 1, 0x77)
        );
        assert_eq!(inv.op, [0; 32]);
        let local_inv = decode_send(&mem.slot(5));
        assert_eq!(
            (local_inv.opcode, local_inv.num_sge, local_inv.imm_or_inv),
            (LOCAL_INV, 0, 0x88),
            "nothing to gather"
        );
        let send = decode_send(&mem.slot(6));
        assert_eq!((send.wr_id, send.opcode, send.num_sge), (7, SEND, 2));
        assert_eq!((send.imm_or_inv, send.op), (0, [0; 32]));
    }

    #[test]
    fn ud_sends_name_their_ah_by_number() {
        let sq = sq(QpType::Ud, 4);
        let mut ah = Ah::for_test(42);
        let one = [sge(0x5000, 64, 9)];
        let ud = ibv_send_wr_ud {
            ah: ah.as_ibv(),
            remote_qpn: 0x12_3456,
            remote_qkey: 0x8001_0000,
        };
        let mut imm = send_wr(1, opcode::SEND_WITH_IMM, &one);
        imm.imm_data = 0xcafe;
        imm.wr.ud = ud;
        let mut plain = send_wr(2, opcode::SEND, &[]);
        plain.wr.ud = ud;
        let list = List::new(vec![imm, plain]);
        assert_eq!(post(&sq, &list), (0, None));
        let mem = sq.mem();
        let dest = UdOp {
            ah_num: 42,
            remote_qpn: 0x12_3456,
            remote_qkey: 0x8001_0000,
        };
        let wqe = decode_send(&mem.slot(0));
        assert_eq!((wqe.num_sge, wqe.imm_or_inv), (1, 0xcafe));
        assert_eq!(UdOp::decode(&wqe.op), dest);
        assert_eq!(decode_sge(&mem.slot(0), 64), abi_sge(&one[0]));
        let wqe = decode_send(&mem.slot(1));
        assert_eq!((wqe.num_sge, wqe.imm_or_inv), (0, 0));
        assert_eq!(UdOp::decode(&wqe.op), dest);
    }

    #[test]
    fn inline_data_is_copied_into_the_slot() {
        let sq = sq(QpType::Rc, 4);
        let hello = b"hello".to_vec();
        let world = b" world".to_vec();
        let parts = [
            sge(addr_of(&hello), 5, 1),
            // Empty: its address is never read.
            sge(0, 0, 0),
            sge(addr_of(&world), 6, 2),
        ];
        let mut send = send_wr(1, opcode::SEND, &parts);
        send.send_flags = send_flags::INLINE | send_flags::SIGNALED;
        let full = vec![0x5a; MAX_INLINE as usize];
        let whole = [sge(addr_of(&full), MAX_INLINE, 0)];
        let mut write = send_wr(2, opcode::RDMA_WRITE, &whole);
        write.send_flags = send_flags::INLINE;
        write.wr.rdma = ibv_send_wr_rdma {
            remote_addr: 0x100,
            rkey: 3,
        };
        let mut empty = send_wr(3, opcode::SEND_WITH_IMM, &[]);
        empty.send_flags = send_flags::INLINE;
        let list = List::new(vec![send, write, empty]);
        assert_eq!(post(&sq, &list), (0, None));
        let mem = sq.mem();
        let slot = mem.slot(0);
        let wqe = decode_send(&slot);
        assert_eq!(
            (wqe.send_flags, wqe.num_sge, wqe.inline_len),
            (send_flags::INLINE | send_flags::SIGNALED, 0, 11)
        );
        assert_eq!(&slot[64..75], b"hello world");
        let slot = mem.slot(1);
        let wqe = decode_send(&slot);
        assert_eq!((wqe.num_sge, wqe.inline_len), (0, MAX_INLINE));
        assert_eq!(
            RdmaOp::decode(&wqe.op),
            RdmaOp {
                remote_addr: 0x100,
                rkey: 3
            }
        );
        assert_eq!(slot[64..104], full[..]);
        let wqe = decode_send(&mem.slot(2));
        assert_eq!((wqe.num_sge, wqe.inline_len), (0, 0));
    }

    /// A request that `qp_type` takes if it allows `op`.
    fn request_for(op: u32, word: &[ibv_sge; 1], ah: *mut ibv_ah) -> ibv_send_wr {
        let mut wr = send_wr(op.into(), op, word);
        match op {
            opcode::ATOMIC_CMP_AND_SWP | opcode::ATOMIC_FETCH_AND_ADD => {
                wr.wr.atomic = ibv_send_wr_atomic {
                    remote_addr: 0x1000,
                    ..Default::default()
                };
            }
            opcode::SEND | opcode::SEND_WITH_IMM => {
                wr.wr.ud = ibv_send_wr_ud {
                    ah,
                    remote_qpn: 1,
                    remote_qkey: 2,
                };
            }
            _ => {}
        }
        wr
    }

    /// A FLUSH from `rxudv_wr_flush`: its operands encoded, nothing
    /// gathered; on a UC QP, with data, or without its operands (as
    /// `ibv_post_send` would give it): refused, nothing published.
    #[test]
    fn a_flush_carries_its_operands_only() {
        let f = FlushOp {
            remote_addr: 0x4000,
            rkey: 0x55,
            length: 4096,
            placement_type: 1,
            selectivity_level: 0,
        };
        let flush = |sges: &[ibv_sge], op| PostWr {
            wr: send_wr(9, opcode::FLUSH, sges),
            rdma: None,
            flush: op,
        };
        let rc = sq(QpType::Rc, 4);
        // SAFETY: no SGE is read.
        assert_eq!(unsafe { rc.post_batch(&[flush(&[], Some(f))]) }, Ok(()));
        let w = decode_send(&rc.mem().slot(0));
        assert_eq!(
            (w.wr_id, w.opcode, w.num_sge, w.inline_len),
            (9, opcode::FLUSH, 0, 0)
        );
        assert_eq!(FlushOp::decode(&w.op), f);
        let word = [sge(0x2000, 8, 1)];
        for (qp_type, wr) in [
            (QpType::Uc, flush(&[], Some(f))),
            (QpType::Rc, flush(&word, Some(f))),
            (QpType::Rc, flush(&[], None)),
        ] {
            let sq = sq(qp_type, 4);
            // SAFETY: `word` outlives the call.
            assert_eq!(unsafe { sq.post_batch(&[wr]) }, Err(EINVAL), "{qp_type:?}");
            assert_eq!(sq.mem().producer(), 0);
        }
    }

    #[test]
    fn each_qp_type_takes_its_opcodes_only() {
        use opcode::*;
        let rc = [
            SEND,
            SEND_WITH_IMM,
            SEND_WITH_INV,
            RDMA_WRITE,
            RDMA_WRITE_WITH_IMM,
            RDMA_READ,
            ATOMIC_CMP_AND_SWP,
            ATOMIC_FETCH_AND_ADD,
            LOCAL_INV,
        ];
        let uc = [SEND, SEND_WITH_IMM, RDMA_WRITE, RDMA_WRITE_WITH_IMM];
        let ud = [SEND, SEND_WITH_IMM];
        let mut ah = Ah::for_test(1);
        let word = [sge(0x2000, 8, 1)];
        for (qp_type, allowed) in [(QpType::Rc, &rc[..]), (QpType::Uc, &uc), (QpType::Ud, &ud)] {
            // BIND_MW (8), TSO (10), DRIVER1 (11), FLUSH (14: its
            // operands come through rxudv_wr_flush only), ATOMIC_WRITE
            // (15) and unknown values are refused everywhere.
            for op in (0..=16).chain([100, u32::MAX]) {
                let sq = sq(qp_type, 4);
                let list = List::new(vec![request_for(op, &word, ah.as_ibv())]);
                let expect = if allowed.contains(&op) {
                    (0, None)
                } else {
                    (EINVAL, Some(0))
                };
                assert_eq!(post(&sq, &list), expect, "{qp_type:?} opcode {op}");
                let published = u32::from(expect.0 == 0);
                assert_eq!(sq.mem().producer(), published);
                assert_eq!(sq.rings(), u64::from(published));
            }
        }
    }

    #[test]
    fn invalid_requests_stop_the_list_after_the_valid_ones() {
        use opcode::*;
        let data = vec![0u8; 64];
        let word = [sge(addr_of(&data), 8, 1)];
        let four = [sge(0x1000, 1, 1); 4];
        let long = [sge(addr_of(&data), 20, 1), sge(addr_of(&data), 21, 1)];
        let null_data = [sge(0, 4, 1)];
        let half = [sge(0x1000, 4, 1)];
        let double = [sge(0x1000, 16, 1)];
        let two_words = [sge(0x1000, 8, 1), sge(0x1008, 8, 1)];
        let inline = send_flags::INLINE;
        type Mutate<'a> = Box<dyn Fn(&mut ibv_send_wr) + 'a>;
        let cases: Vec<(&str, QpType, Mutate)> = vec![
            (
                "IP_CSUM flag",
                QpType::Rc,
                Box::new(|w| w.send_flags = 1 << 4),
            ),
            (
                "high flag",
                QpType::Rc,
                Box::new(|w| w.send_flags = 1 << 31),
            ),
            ("negative num_sge", QpType::Rc, Box::new(|w| w.num_sge = -1)),
            (
                "more SGEs than granted",
                QpType::Rc,
                Box::new(|w| *w = send_wr(1, SEND, &four)),
            ),
            (
                "NULL sg_list",
                QpType::Rc,
                Box::new(|w| w.sg_list = core::ptr::null_mut()),
            ),
            (
                "inline READ",
                QpType::Rc,
                Box::new(|w| {
                    w.opcode = RDMA_READ;
                    w.send_flags = inline;
                }),
            ),
            (
                "inline atomic",
                QpType::Rc,
                Box::new(|w| {
                    w.opcode = ATOMIC_FETCH_AND_ADD;
                    w.send_flags = inline;
                }),
            ),
            (
                "inline LOCAL_INV",
                QpType::Rc,
                Box::new(|w| {
                    w.opcode = LOCAL_INV;
                    w.send_flags = inline;
                }),
            ),
            (
                "inline longer than granted",
                QpType::Rc,
                Box::new(|w| {
                    *w = send_wr(1, SEND, &long);
                    w.send_flags = inline;
                }),
            ),
            (
                "inline from NULL",
                QpType::Rc,
                Box::new(|w| {
                    *w = send_wr(1, RDMA_WRITE, &null_data);
                    w.send_flags = inline;
                }),
            ),
            (
                "atomic without SGE",
                QpType::Rc,
                Box::new(|w| *w = send_wr(1, ATOMIC_CMP_AND_SWP, &[])),
            ),
            (
                "atomic with two SGEs",
                QpType::Rc,
                Box::new(|w| *w = send_wr(1, ATOMIC_CMP_AND_SWP, &two_words)),
            ),
            (
                "atomic of 4 bytes",
                QpType::Rc,
                Box::new(|w| *w = send_wr(1, ATOMIC_FETCH_AND_ADD, &half)),
            ),
            (
                "atomic of 16 bytes",
                QpType::Rc,
                Box::new(|w| *w = send_wr(1, ATOMIC_FETCH_AND_ADD, &double)),
            ),
            (
                "misaligned CMP_AND_SWP",
                QpType::Rc,
                Box::new(|w| {
                    *w = send_wr(1, ATOMIC_CMP_AND_SWP, &word);
                    w.wr.atomic.remote_addr = 0x1004;
                }),
            ),
            (
                "misaligned FETCH_AND_ADD",
                QpType::Rc,
                Box::new(|w| {
                    *w = send_wr(1, ATOMIC_FETCH_AND_ADD, &word);
                    w.wr.atomic.remote_addr = 0x1001;
                }),
            ),
            (
                "UD without AH",
                QpType::Ud,
                Box::new(|w| w.wr.ud.ah = core::ptr::null_mut()),
            ),
            ("UD WRITE", QpType::Ud, Box::new(|w| w.opcode = RDMA_WRITE)),
            ("UC READ", QpType::Uc, Box::new(|w| w.opcode = RDMA_READ)),
        ];
        let mut ah = Ah::for_test(3);
        let ah = ah.as_ibv();
        for (what, qp_type, mutate) in cases {
            let sq = sq(qp_type, 8);
            // Valid as it is: a SEND (with an AH, for UD).
            let valid = || {
                let mut w = send_wr(1, SEND, &word);
                w.wr.ud = ibv_send_wr_ud {
                    ah,
                    remote_qpn: 1,
                    remote_qkey: 1,
                };
                w
            };
            let mut bad = valid();
            mutate(&mut bad);
            let list = List::new(vec![valid(), bad, valid()]);
            assert_eq!(post(&sq, &list), (EINVAL, Some(1)), "{what}");
            assert_eq!(sq.mem().producer(), 1, "{what}: the first is posted");
            assert_eq!(sq.counters(), counters(1, 1), "{what}");
            assert_eq!(decode_send(&sq.mem().slot(0)).wr_id, 1);
        }
    }

    #[test]
    fn an_empty_list_is_refused() {
        let sq = sq(QpType::Rc, 4);
        let list = List::<ibv_send_wr>::new(vec![]);
        assert_eq!(post(&sq, &list), (EINVAL, None));
        assert_eq!(sq.counters(), counters(0, 0));
        let rq = rq(4, 1);
        let list = List::<ibv_recv_wr>::new(vec![]);
        assert_eq!(post_recv(&rq, &list), (EINVAL, None));
    }

    fn sends(ids: core::ops::Range<u64>) -> List<ibv_send_wr> {
        List::new(ids.map(|id| send_wr(id, opcode::SEND, &[])).collect())
    }

    fn sent_ids(entries: &[Vec<u8>]) -> Vec<u64> {
        entries.iter().map(|e| decode_send(e).wr_id).collect()
    }

    #[test]
    fn a_full_ring_refuses_with_enomem() {
        let sq = sq(QpType::Rc, 4);
        assert_eq!(post(&sq, &sends(0..6)), (ENOMEM, Some(4)));
        assert_eq!(sq.mem().producer(), 4);
        assert_eq!(sq.counters(), counters(4, 1));
        // Nothing queued: no doorbell.
        assert_eq!(post(&sq, &sends(6..7)), (ENOMEM, Some(0)));
        assert_eq!(sq.counters(), counters(4, 1));
        assert_eq!(sent_ids(&sq.mem().consume(2)), [0, 1]);
        assert_eq!(post(&sq, &sends(4..7)), (ENOMEM, Some(2)));
        assert_eq!(sq.counters(), counters(6, 2));
        assert_eq!(sent_ids(&sq.mem().consume(8)), [2, 3, 4, 5]);
    }

    #[test]
    fn a_broken_ring_refuses_with_eio() {
        let sq = sq(QpType::Rc, 4);
        // Consumer ahead of the producer.
        sq.mem().set_indices(0, 1);
        assert_eq!(post(&sq, &sends(0..2)), (EIO, Some(0)));
        // More than a ring's worth behind.
        sq.mem().set_indices(9, 4);
        assert_eq!(post(&sq, &sends(0..2)), (EIO, Some(0)));
        assert_eq!(sq.mem().producer(), 9);
        assert_eq!(sq.counters(), counters(0, 0));
        let rq = rq(4, 1);
        rq.mem().set_indices(9, 4);
        let list = List::new(vec![recv_wr(1, &[])]);
        assert_eq!(post_recv(&rq, &list), (EIO, Some(0)));
        assert_eq!(rq.mem().producer(), 9);
    }

    #[test]
    fn send_indices_wrap_at_2_pow_32() {
        let sq = sq(QpType::Rc, 4);
        let start = u32::MAX - 2;
        sq.mem().set_indices(start, start);
        for round in 0..4u64 {
            let ids = round * 3..round * 3 + 3;
            assert_eq!(post(&sq, &sends(ids.clone())), (0, None));
            assert_eq!(sent_ids(&sq.mem().consume(8)), ids.collect::<Vec<_>>());
        }
        assert_eq!(sq.mem().producer(), start.wrapping_add(12));
        assert_eq!(sq.mem().producer(), 9);
        assert_eq!(sq.counters(), counters(12, 4));
    }

    #[test]
    fn an_active_sender_needs_no_doorbell() {
        let sq = sq(QpType::Rc, 8);
        sq.mem().set_flags(ring_flags::SENDER_ACTIVE);
        for id in 0..3 {
            assert_eq!(post(&sq, &sends(id..id + 1)), (0, None));
        }
        assert_eq!(sq.counters(), counters(3, 0));
        assert_eq!(sq.rings(), 0);
        sq.mem().set_flags(0);
        // One doorbell per call, not per request.
        assert_eq!(post(&sq, &sends(3..6)), (0, None));
        assert_eq!(sq.counters(), counters(6, 1));
        assert_eq!(post(&sq, &sends(6..7)), (0, None));
        assert_eq!(sq.counters(), counters(7, 2));
        assert_eq!(sq.rings(), 2);
        assert_eq!(sent_ids(&sq.mem().consume(8)), [0, 1, 2, 3, 4, 5, 6]);
    }

    #[test]
    fn doorbell_errors_are_returned_and_the_requests_stay_queued() {
        const EBADF: c_int = 9;
        let sq = sq(QpType::Rc, 8);
        sq.doorbell.fail.store(EBADF, Ordering::Relaxed);
        assert_eq!(post(&sq, &sends(0..2)), (EBADF, None));
        assert_eq!(sq.mem().producer(), 2);
        // A request that fails as well is still named.
        let mut bad = send_wr(3, opcode::SEND, &[]);
        bad.num_sge = -1;
        let list = List::new(vec![send_wr(2, opcode::SEND, &[]), bad]);
        assert_eq!(post(&sq, &list), (EBADF, Some(1)));
        assert_eq!(sq.mem().producer(), 3);
        assert_eq!(sq.counters(), counters(3, 2));
        assert_eq!(sent_ids(&sq.mem().consume(8)), [0, 1, 2]);
    }

    #[test]
    fn the_doorbell_is_a_post_send_without_requests() {
        let path = std::env::temp_dir().join(format!("rxud-doorbell-{}", std::process::id()));
        let file = std::fs::File::create(&path).unwrap();
        let doorbell = CmdDoorbell {
            fd: std::os::fd::AsRawFd::as_raw_fd(&file),
            qp_handle: 0x1234,
        };
        assert_eq!(doorbell.ring(), Ok(()));
        drop(file);
        let cmd = std::fs::read(&path).unwrap();
        std::fs::remove_file(&path).unwrap();
        assert_eq!(cmd.len(), 32);
        assert_eq!(le32(&cmd, 0), 28, "IB_USER_VERBS_CMD_POST_SEND");
        assert_eq!(le32(&cmd, 4), 8 | 1 << 16, "in_words 8, out_words 1");
        assert_ne!(le64(&cmd, 8), 0, "a response buffer");
        assert_eq!(le32(&cmd, 16), 0x1234, "qp_handle");
        assert_eq!((le32(&cmd, 20), le32(&cmd, 24)), (0, 0), "no WRs, no SGEs");
        assert_eq!(le32(&cmd, 28), 128, "wqe_size: sizeof(struct ibv_send_wr)");
        let closed = CmdDoorbell {
            fd: -1,
            qp_handle: 0,
        };
        assert_eq!(closed.ring(), Err(9), "EBADF");
    }

    #[test]
    fn receive_requests_carry_their_sges() {
        let rq = rq(4, 2);
        let two = [sge(0x1000, 100, 1), sge(0x2000, 200, 2)];
        let list = List::new(vec![recv_wr(7, &two), recv_wr(8, &[])]);
        assert_eq!(post_recv(&rq, &list), (0, None));
        let mem = rq.mem();
        assert_eq!(mem.producer(), 2);
        let slot = mem.slot(0);
        assert_eq!(
            decode_recv(&slot),
            RecvWqe {
                wr_id: 7,
                num_sge: 2,
                reserved: 0
            }
        );
        assert_eq!(decode_sge(&slot, 16), abi_sge(&two[0]));
        assert_eq!(decode_sge(&slot, 32), abi_sge(&two[1]));
        assert_eq!(
            decode_recv(&mem.slot(1)),
            RecvWqe {
                wr_id: 8,
                num_sge: 0,
                reserved: 0
            }
        );
    }

    #[test]
    fn receive_refusals() {
        let three = [sge(0x1000, 1, 1); 3];
        let one = [sge(0x1000, 1, 1)];
        let rq = rq(2, 2);
        let mut negative = recv_wr(2, &one);
        negative.num_sge = -1;
        let mut null = recv_wr(2, &one);
        null.sg_list = core::ptr::null_mut();
        for bad in [recv_wr(2, &three), negative, null] {
            let list = List::new(vec![recv_wr(1, &one), bad]);
            assert_eq!(post_recv(&rq, &list), (EINVAL, Some(1)));
            assert_eq!(rq.mem().consume(8).len(), 1);
        }
        let list = List::new((0..3).map(|id| recv_wr(id, &one)).collect());
        assert_eq!(post_recv(&rq, &list), (ENOMEM, Some(2)));
        let ids: Vec<u64> = rq
            .mem()
            .consume(8)
            .iter()
            .map(|e| decode_recv(e).wr_id)
            .collect();
        assert_eq!(ids, [0, 1]);
    }

    #[test]
    fn state_checks() {
        for state in [IBV_QPS_RESET, IBV_QPS_INIT, IBV_QPS_RTR] {
            assert!(!send_state_allows(state));
        }
        // RTS, SQD, SQE, ERR; unknown values are the kernel's to judge.
        for state in [3, 4, 5, 6, 7, 100] {
            assert!(send_state_allows(state));
        }
        assert!(!recv_state_allows(IBV_QPS_RESET));
        for state in [IBV_QPS_INIT, IBV_QPS_RTR, 3, 4, 5, 6, 7] {
            assert!(recv_state_allows(state));
        }
        assert_eq!(QpType::from_ibv(IBV_QPT_RC), Some(QpType::Rc));
        assert_eq!(QpType::from_ibv(IBV_QPT_UC), Some(QpType::Uc));
        assert_eq!(QpType::from_ibv(IBV_QPT_UD), Some(QpType::Ud));
        assert_eq!(QpType::from_ibv(8), None, "RAW_PACKET");
    }

    /// The kernel's sender as the ring protocol has it, for `total`
    /// requests: it sleeps until a doorbell, then drains with
    /// `SENDER_ACTIVE` set; before sleeping again it clears the flag, then
    /// (after a full fence) reads the producer index once more. `check`
    /// sees every entry. Fails if it sleeps past `deadline`.
    fn run_sender(sq: &TestSq, total: u64, deadline: Instant, mut check: impl FnMut(&[u8])) {
        let kernel = sq.mem().kernel();
        let mut handled = 0;
        let mut received = 0;
        while received < total {
            let rung = sq.rings();
            if rung == handled {
                assert!(Instant::now() < deadline, "sender asleep: lost doorbell");
                std::thread::yield_now();
                continue;
            }
            handled = rung;
            kernel
                .flags()
                .store(ring_flags::SENDER_ACTIVE, Ordering::Relaxed);
            loop {
                for entry in kernel.consume(u32::MAX) {
                    check(&entry);
                    received += 1;
                }
                kernel.flags().store(0, Ordering::Relaxed);
                fence(Ordering::SeqCst);
                let producer = kernel.producer().load(Ordering::Acquire);
                if producer == kernel.consumer().load(Ordering::Relaxed) {
                    break;
                }
                kernel
                    .flags()
                    .store(ring_flags::SENDER_ACTIVE, Ordering::Relaxed);
            }
        }
    }

    /// One poster in lockstep with the sender: each request is posted
    /// right when the previous one was consumed, often while the sender is
    /// stopping, and must be consumed without any later post's help. A
    /// poster that skipped the doorbell on a stale flag would wait for
    /// ever.
    #[test]
    fn lockstep_poster_and_a_stopping_sender() {
        const TOTAL: u64 = 200_000;
        let sq = sq(QpType::Rc, 4);
        let kernel = sq.mem().kernel();
        let deadline = Instant::now() + Duration::from_secs(120);
        std::thread::scope(|s| {
            let sq = &sq;
            s.spawn(move || {
                for id in 0..TOTAL {
                    assert_eq!(post(sq, &sends(id..id + 1)), (0, None));
                    let posted = id as u32 + 1;
                    // Spin briefly (to post again while the sender is
                    // stopping), then let a busy machine run the sender.
                    let mut spins = 0u32;
                    while kernel.consumer().load(Ordering::Acquire) != posted {
                        assert!(Instant::now() < deadline, "request {id} never consumed");
                        spins += 1;
                        if spins < 1000 {
                            std::hint::spin_loop();
                        } else {
                            std::thread::yield_now();
                        }
                    }
                }
            });
            let mut next = 0;
            run_sender(sq, TOTAL, deadline, |entry| {
                assert_eq!(decode_send(entry).wr_id, next);
                next += 1;
            });
        });
        let c = sq.counters();
        assert_eq!(c.wrs_posted, TOTAL);
        assert!(c.doorbells >= 1 && c.doorbells <= TOTAL);
    }

    /// Posters on two threads and a kernel sender on a third, through a
    /// ring of 8 slots whose indices cross 2^32. The sender runs only when
    /// a doorbell wakes it and drains with `SENDER_ACTIVE` set, clearing it
    /// (then a full fence and the producer index again) before it sleeps;
    /// posters that see it set skip the doorbell. Every request arrives
    /// once, in each poster's order, intact; a lost wakeup would leave
    /// requests in the ring with the sender asleep and trip the deadline.
    #[test]
    fn concurrent_posters_and_a_draining_sender() {
        const POSTERS: u64 = 2;
        const EACH: u64 = 20_000;
        let sq = sq(QpType::Rc, 8);
        let start = u32::MAX - 1000;
        sq.mem().set_indices(start, start);
        let deadline = Instant::now() + Duration::from_secs(120);
        std::thread::scope(|s| {
            for poster in 0..POSTERS {
                let sq = &sq;
                s.spawn(move || {
                    let mut seq = 0;
                    while seq < EACH {
                        let n = (1 + seq % 3).min(EACH - seq);
                        let id = |i: u64| poster << 32 | (seq + i);
                        let sges: Vec<[ibv_sge; 1]> = (0..n)
                            .map(|i| [sge(id(i), (seq + i) as u32, poster as u32)])
                            .collect();
                        let wrs = (0..n)
                            .map(|i| send_wr(id(i), opcode::SEND, &sges[i as usize]))
                            .collect();
                        match post(sq, &List::new(wrs)) {
                            (0, None) => seq += n,
                            (ENOMEM, Some(i)) => {
                                seq += i as u64;
                                assert!(Instant::now() < deadline, "posters starved");
                                std::thread::yield_now();
                            }
                            other => panic!("post failed: {other:?}"),
                        }
                    }
                });
            }
            let mut next = [0u64; POSTERS as usize];
            run_sender(&sq, POSTERS * EACH, deadline, |entry| {
                let wqe = decode_send(entry);
                let poster = (wqe.wr_id >> 32) as usize;
                let seq = wqe.wr_id & 0xffff_ffff;
                assert_eq!(seq, next[poster], "order of poster {poster}");
                assert_eq!((wqe.opcode, wqe.num_sge), (opcode::SEND, 1));
                assert_eq!(
                    decode_sge(entry, 64),
                    Sge {
                        addr: wqe.wr_id,
                        length: seq as u32,
                        lkey: poster as u32
                    }
                );
                next[poster] += 1;
            });
        });
        let c = sq.counters();
        assert_eq!(c.wrs_posted, POSTERS * EACH);
        assert_eq!(c.doorbells, sq.rings());
        assert!(c.doorbells >= 1 && c.doorbells <= c.wrs_posted);
        assert_eq!(sq.mem().consume(8), Vec::<Vec<u8>>::new());
    }
}
