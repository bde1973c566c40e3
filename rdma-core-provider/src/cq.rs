// SPDX-License-Identifier: GPL-2.0 OR Linux-OpenIB

//! Completion queues: the kernel produces CQEs into a ring librxud maps;
//! `poll_cq` consumes them without entering the kernel.

use crate::mmap::{map_ring, MappedRing};
use crate::ring;
use crate::ring::RingMemory;
use crate::sys::*;
use crate::{create_object_with_rings, destroy_object, set_errno};
use core::ffi::c_int;
use core::mem::{offset_of, size_of, MaybeUninit};
use rxud_abi::{CreateCqReq, CreateCqResp, ResizeCqReq, ResizeCqResp, RingInfo, CQ_SLOT_SIZE};
use std::sync::{Condvar, Mutex, MutexGuard, PoisonError};

/// librxud's CQ, made by `ibv_create_cq` or `ibv_create_cq_ex` (which
/// fills in the `ibv_cq_ex` callbacks). All-zero is valid (what
/// `create_object_with_rings` starts from).
#[repr(C)]
pub(crate) struct Cq {
    vcq: verbs_cq,
    /// Set once the kernel CQ exists and its ring is mapped.
    shared: Option<Box<CqShared>>,
}

/// What the threads polling a CQ share: its ring and the extended CQ's
/// polling session, behind one lock.
///
/// `ibv_start_poll` opens a session and `ibv_end_poll` closes it; in
/// between, the thread that opened it moves through completions with
/// `ibv_next_poll` and reads the one it is at with the `read_*` callbacks.
/// Each completion is consumed from the ring (the same consumer as
/// `ibv_poll_cq`'s, one entry at a time) when the session moves to it, and
/// copied into the session, so its slot is free for the kernel at once.
/// While a session is open, other threads' `start_poll`, `poll_cq` and
/// `resize_cq` wait for it to end: the verbs make the session a critical
/// section.
pub(crate) struct CqShared<M = MappedRing> {
    state: Mutex<CqState<M>>,
    /// Signalled when a session ends.
    idle: Condvar,
}

struct CqState<M> {
    /// The ring, `None` after a resize whose new ring could not be mapped
    /// (then polling fails until a resize succeeds).
    ring: Option<M>,
    /// Whether a `start_poll` .. `end_poll` session is open.
    polling: bool,
    /// The completion the session is at.
    current: ibv_wc,
}

impl<M: RingMemory> CqShared<M> {
    fn new(ring: M) -> Self {
        Self {
            state: Mutex::new(CqState {
                ring: Some(ring),
                polling: false,
                current: ibv_wc::default(),
            }),
            idle: Condvar::new(),
        }
    }

    /// The state, locked.
    fn lock(&self) -> MutexGuard<'_, CqState<M>> {
        // A panic aborts (panic = "abort"), so nothing is ever poisoned.
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The state, locked once no session is open.
    fn lock_idle(&self) -> MutexGuard<'_, CqState<M>> {
        let mut state = self.lock();
        while state.polling {
            state = self
                .idle
                .wait(state)
                .unwrap_or_else(PoisonError::into_inner);
        }
        state
    }

    /// `ibv_poll_cq`: up to `out.len()` completions; their number, or
    /// `-EIO` for a broken or missing ring.
    fn poll(&self, out: &mut [MaybeUninit<ibv_wc>]) -> c_int {
        let state = self.lock_idle();
        let Some(ring) = state.ring.as_ref() else {
            return -EIO;
        };
        match ring::poll_cq(&ring.ring(), out) {
            // At most `out.len()`, which came from a `c_int`.
            Ok(n) => n as c_int,
            Err(_) => -EIO,
        }
    }

    /// Moves the session to the next completion, consuming it: `ENOENT` if
    /// there is none, `EIO` for a broken or missing ring.
    fn advance(state: &mut CqState<M>) -> Result<ibv_wc, c_int> {
        let ring = state.ring.as_ref().ok_or(EIO)?;
        let mut one = [MaybeUninit::uninit()];
        match ring::poll_cq(&ring.ring(), &mut one) {
            Ok(1) => {
                // SAFETY: `poll_cq` initialised the one entry it returned.
                let wc = unsafe { one[0].assume_init() };
                state.current = wc;
                Ok(wc)
            }
            Ok(_) => Err(ENOENT),
            Err(_) => Err(EIO),
        }
    }

    /// `ibv_start_poll`: opens a session at the oldest completion. If there
    /// is none (`ENOENT`) or the ring is broken (`EIO`), no session is
    /// opened (and `end_poll` must not be called).
    fn start_poll(&self) -> Result<ibv_wc, c_int> {
        let mut state = self.lock_idle();
        let wc = Self::advance(&mut state)?;
        state.polling = true;
        Ok(wc)
    }

    /// `ibv_next_poll`: moves the open session to the next completion;
    /// `ENOENT` if there is none (the session stays open until
    /// `end_poll`). Outside a session, `EINVAL`.
    fn next_poll(&self) -> Result<ibv_wc, c_int> {
        let mut state = self.lock();
        if !state.polling {
            return Err(EINVAL);
        }
        Self::advance(&mut state)
    }

    /// `ibv_end_poll`: closes the session. Its completions were consumed
    /// as it moved to them.
    fn end_poll(&self) {
        let mut state = self.lock();
        state.polling = false;
        drop(state);
        self.idle.notify_one();
    }

    /// Removes the unpolled completions of QP `qp_num` (its move to RESET:
    /// [`ring::clean_cq`]); waits for an open session to end first. A
    /// missing or broken ring is left alone (polling reports it).
    fn clean(&self, qp_num: u32) -> u32 {
        let state = self.lock_idle();
        state
            .ring
            .as_ref()
            .and_then(|ring| ring::clean_cq(&ring.ring(), qp_num).ok())
            .unwrap_or(0)
    }

    /// What a `read_*` callback reads: the completion the session is at.
    fn current(&self) -> ibv_wc {
        self.lock().current
    }
}

const _: () = assert!(
    offset_of!(Cq, vcq) == 0 && offset_of!(verbs_cq, cq_ex) == 0 && offset_of!(ibv_cq_ex, cq) == 0
);

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

/// Creates a CQ of at least `cqe` entries and maps its ring (the body of
/// `create_cq` and `create_cq_ex`); NULL with `errno` set on failure.
///
/// # Safety
///
/// `ctx` is a live context of librxud's and `channel` NULL or one of its
/// completion channels.
unsafe fn create(
    ctx: *mut ibv_context,
    cqe: c_int,
    channel: *mut ibv_comp_channel,
    comp_vector: c_int,
    verb: &str,
) -> *mut Cq {
    // SAFETY: `Cq` is valid zeroed; `ctx` and `channel` come from
    // libibverbs; command and response are laid out as libibverbs expects.
    // The CQ state is set only once its ring is mapped, and `destroy`
    // destroys the kernel CQ `create` made.
    unsafe {
        create_object_with_rings(
            |cq: *mut Cq| {
                let mut cmd = CreateCqCmd::default();
                let mut resp = CreateCqRespBuf::default();
                let ret = ibv_cmd_create_cq(
                    ctx,
                    cqe,
                    channel,
                    comp_vector,
                    &raw mut (*cq).vcq.cq_ex.cq,
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
                let ring = map_cq_ring(ctx, verb, &resp.ring, (*cq).vcq.cq_ex.cq.cqe)?;
                (*cq).shared = Some(Box::new(CqShared::new(ring)));
                Ok(())
            },
            |cq| ibv_cmd_destroy_cq(&raw mut (*cq).vcq.cq_ex.cq),
        )
    }
}

pub(crate) unsafe extern "C" fn create_cq(
    ctx: *mut ibv_context,
    cqe: c_int,
    channel: *mut ibv_comp_channel,
    comp_vector: c_int,
) -> *mut ibv_cq {
    // SAFETY: arguments from libibverbs.
    let cq = unsafe { create(ctx, cqe, channel, comp_vector, "create_cq") };
    if cq.is_null() {
        return core::ptr::null_mut();
    }
    // SAFETY: `cq` is live.
    unsafe { &raw mut (*cq).vcq.cq_ex.cq }
}

/// The `wc_flags` `ibv_create_cq_ex` may ask for: every field of `ibv_wc`
/// (`IBV_WC_STANDARD_FLAGS`). Timestamps, VLAN, flow tag and tag matching
/// information are not available (`EOPNOTSUPP`).
const SUPPORTED_WC_FLAGS: u64 = IBV_WC_STANDARD_FLAGS;

/// Checks what `ibv_create_cq_ex` asks for beyond a classic CQ. `EOPNOTSUPP`
/// for `wc_flags` librxud cannot provide, for `comp_mask` bits it does not
/// know, for parent domains (librxud has none) and for creation flags
/// other than `IBV_CREATE_CQ_ATTR_SINGLE_THREADED` (a hint, which it takes:
/// the CQ stays thread-safe); `EINVAL` for more entries than a `c_int`
/// holds or a completion vector beyond one.
fn check_cq_init_attr_ex(attr: &ibv_cq_init_attr_ex) -> Result<(c_int, c_int), c_int> {
    if attr.wc_flags & !SUPPORTED_WC_FLAGS != 0
        || attr.comp_mask & !(IBV_CQ_INIT_ATTR_MASK_FLAGS | IBV_CQ_INIT_ATTR_MASK_PD) != 0
        || attr.comp_mask & IBV_CQ_INIT_ATTR_MASK_PD != 0
    {
        return Err(EOPNOTSUPP);
    }
    // Overruns are reported (an `IBV_EVENT_CQ_ERR`), never ignored.
    let refused = IBV_CREATE_CQ_ATTR_IGNORE_OVERRUN | !IBV_CREATE_CQ_ATTR_SINGLE_THREADED;
    if attr.comp_mask & IBV_CQ_INIT_ATTR_MASK_FLAGS != 0 && attr.flags & refused != 0 {
        return Err(EOPNOTSUPP);
    }
    let cqe = c_int::try_from(attr.cqe).map_err(|_| EINVAL)?;
    let comp_vector = c_int::try_from(attr.comp_vector).map_err(|_| EINVAL)?;
    Ok((cqe, comp_vector))
}

/// Fills in the extended CQ's callbacks: polling, and the `read_*`
/// callbacks of the fields `wc_flags` asked for (the others stay NULL, as
/// the verbs allow).
fn set_cq_ex_ops(cq: &mut ibv_cq_ex, wc_flags: u64) {
    let with = |flag: u64| wc_flags & flag != 0;
    cq.start_poll = Some(start_poll);
    cq.next_poll = Some(next_poll);
    cq.end_poll = Some(end_poll);
    cq.read_opcode = Some(read_opcode);
    cq.read_vendor_err = Some(read_vendor_err);
    cq.read_wc_flags = Some(read_wc_flags);
    cq.read_byte_len = with(IBV_WC_EX_WITH_BYTE_LEN).then_some(read_byte_len);
    cq.read_imm_data = with(IBV_WC_EX_WITH_IMM).then_some(read_imm_data);
    cq.read_qp_num = with(IBV_WC_EX_WITH_QP_NUM).then_some(read_qp_num);
    cq.read_src_qp = with(IBV_WC_EX_WITH_SRC_QP).then_some(read_src_qp);
    cq.read_slid = with(IBV_WC_EX_WITH_SLID).then_some(read_slid);
    cq.read_sl = with(IBV_WC_EX_WITH_SL).then_some(read_sl);
    cq.read_dlid_path_bits = with(IBV_WC_EX_WITH_DLID_PATH_BITS).then_some(read_dlid_path_bits);
}

/// `ibv_create_cq_ex`: the same CQ as `create_cq` (the same kernel command
/// and ring; `ibv_poll_cq` works on it too), with the extended callbacks.
/// libibverbs has already refused `wc_flags` it does not know, and sets
/// `cq_context` and `channel` afterwards (`verbs_init_cq`).
pub(crate) unsafe extern "C" fn create_cq_ex(
    ctx: *mut ibv_context,
    attr: *mut ibv_cq_init_attr_ex,
) -> *mut ibv_cq_ex {
    // SAFETY: libibverbs passes the application's attributes.
    let attr = unsafe { &*attr };
    let (cqe, comp_vector) = match check_cq_init_attr_ex(attr) {
        Ok(v) => v,
        Err(err) => {
            set_errno(err);
            return core::ptr::null_mut();
        }
    };
    // SAFETY: arguments from libibverbs.
    let cq = unsafe { create(ctx, cqe, attr.channel, comp_vector, "create_cq_ex") };
    if cq.is_null() {
        return core::ptr::null_mut();
    }
    // SAFETY: `cq` is live and not yet known to anyone else.
    unsafe {
        set_cq_ex_ops(&mut (*cq).vcq.cq_ex, attr.wc_flags);
        &raw mut (*cq).vcq.cq_ex
    }
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
    // `num_entries` work completions, which `poll` only writes.
    let (shared, out) = unsafe {
        (
            shared(ibcq),
            core::slice::from_raw_parts_mut(wc.cast::<MaybeUninit<ibv_wc>>(), len),
        )
    };
    shared.poll(out)
}

/// The state of a live extended CQ.
///
/// # Safety
///
/// `cq` was returned by `create_cq_ex` and is not destroyed during `'a`.
unsafe fn shared_ex<'a>(cq: *mut ibv_cq_ex) -> &'a CqShared {
    // SAFETY: per the caller; `ibv_cq` is at offset 0 of `ibv_cq_ex`.
    unsafe { shared(cq.cast()) }
}

/// Sets `status` and `wr_id` of the extended CQ, which the application
/// reads directly, to `wc`'s; returns 0, or the errno.
///
/// # Safety
///
/// `cq` is a live extended CQ, in a session of the calling thread.
unsafe fn moved_to(cq: *mut ibv_cq_ex, wc: Result<ibv_wc, c_int>) -> c_int {
    match wc {
        Ok(wc) => {
            // SAFETY: per the caller; the session's thread owns these
            // fields (the verbs define them as its to read).
            unsafe {
                (*cq).status = wc.status;
                (*cq).wr_id = wc.wr_id;
            }
            0
        }
        Err(err) => err,
    }
}

unsafe extern "C" fn start_poll(cq: *mut ibv_cq_ex, attr: *mut ibv_poll_cq_attr) -> c_int {
    // SAFETY: libibverbs passes `attr` from the application; NULL or valid.
    if let Some(attr) = unsafe { attr.as_ref() } {
        // No `ibv_poll_cq_attr` fields are defined.
        if attr.comp_mask != 0 {
            return EINVAL;
        }
    }
    // SAFETY: a live extended CQ of ours; a session opened here is this
    // thread's.
    unsafe { moved_to(cq, shared_ex(cq).start_poll()) }
}

unsafe extern "C" fn next_poll(cq: *mut ibv_cq_ex) -> c_int {
    // SAFETY: a live extended CQ of ours, in this thread's session.
    unsafe { moved_to(cq, shared_ex(cq).next_poll()) }
}

unsafe extern "C" fn end_poll(cq: *mut ibv_cq_ex) {
    // SAFETY: a live extended CQ of ours.
    unsafe { shared_ex(cq).end_poll() }
}

/// The completion the session of `cq` is at.
///
/// # Safety
///
/// `cq` is a live extended CQ of ours.
unsafe fn current(cq: *mut ibv_cq_ex) -> ibv_wc {
    // SAFETY: per the caller.
    unsafe { shared_ex(cq).current() }
}

/// The `read_*` callbacks: each reads a field of the completion the
/// session is at.
macro_rules! readers {
    ($($name:ident -> $ty:ty = |$wc:ident| $field:expr;)*) => {$(
        unsafe extern "C" fn $name(cq: *mut ibv_cq_ex) -> $ty {
            // SAFETY: libibverbs passes a live extended CQ of ours.
            let $wc = unsafe { current(cq) };
            $field
        }
    )*};
}

readers! {
    read_opcode -> ibv_enum = |wc| wc.opcode;
    read_vendor_err -> u32 = |wc| wc.vendor_err;
    read_byte_len -> u32 = |wc| wc.byte_len;
    read_imm_data -> u32 = |wc| wc.imm_data;
    read_qp_num -> u32 = |wc| wc.qp_num;
    read_src_qp -> u32 = |wc| wc.src_qp;
    read_wc_flags -> u32 = |wc| wc.wc_flags;
    read_slid -> u32 = |wc| u32::from(wc.slid);
    read_sl -> u8 = |wc| wc.sl;
    read_dlid_path_bits -> u8 = |wc| wc.dlid_path_bits;
}

/// Removes QP `qp_num`'s unpolled completions from `ibcq`, after the QP
/// moved to RESET; how many went.
///
/// # Safety
///
/// `ibcq` is a live CQ of ours.
pub(crate) unsafe fn clean_qp(ibcq: *mut ibv_cq, qp_num: u32) -> u32 {
    // SAFETY: per the caller.
    unsafe { shared(ibcq) }.clean(qp_num)
}

pub(crate) unsafe extern "C" fn req_notify_cq(ibcq: *mut ibv_cq, solicited_only: c_int) -> c_int {
    // SAFETY: a live CQ of ours, from libibverbs.
    unsafe { ibv_cmd_req_notify_cq(ibcq, solicited_only) }
}

pub(crate) unsafe extern "C" fn resize_cq(ibcq: *mut ibv_cq, cqe: c_int) -> c_int {
    // SAFETY: a live CQ of ours, from libibverbs.
    let shared = unsafe { shared(ibcq) };
    let mut guard = shared.lock_idle();
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
            guard.ring = Some(ring);
            0
        }
        Err(err) => {
            guard.ring = None;
            err
        }
    }
}

pub(crate) unsafe extern "C" fn destroy_cq(ibcq: *mut ibv_cq) -> c_int {
    // SAFETY: a live CQ of ours; libibverbs' caller no longer polls it.
    // After the kernel destroyed it, dropping its state unmaps the ring.
    unsafe {
        destroy_object(from_ibv(ibcq), |cq| {
            let ret = ibv_cmd_destroy_cq(&raw mut (*cq).vcq.cq_ex.cq);
            if ret == 0 {
                drop((*cq).shared.take());
            }
            ret
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ring::testing::TestRing;
    use rxud_abi::Cqe;
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::time::Duration;

    fn cq(slots: u32) -> CqShared<TestRing> {
        CqShared::new(TestRing::new(slots, CQ_SLOT_SIZE))
    }

    /// The kernel's side: produces CQEs whose `wr_id`s are `ids`.
    fn produce(cq: &CqShared<TestRing>, ids: core::ops::Range<u64>) {
        let state = cq.lock();
        let cqes: Vec<Cqe> = ids
            .map(|wr_id| Cqe {
                wr_id,
                opcode: 128,
                byte_len: wr_id as u32 * 10,
                imm_data: 0x0102_0304,
                qp_num: 0x11,
                src_qp: 0x22,
                wc_flags: 2,
                slid: 3,
                sl: 4,
                dlid_path_bits: 5,
                ..Cqe::default()
            })
            .collect();
        state.ring.as_ref().unwrap().produce(&cqes);
    }

    fn indices(cq: &CqShared<TestRing>) -> (u32, u32) {
        let state = cq.lock();
        let ring = state.ring.as_ref().unwrap();
        (ring.producer(), ring.consumer())
    }

    #[test]
    fn cleaning_waits_for_the_session_and_keeps_other_qps() {
        let cq = cq(8);
        produce(&cq, 1..4);
        let first = cq.start_poll().unwrap();
        assert_eq!(first.wr_id, 1);
        let done = AtomicBool::new(false);
        std::thread::scope(|s| {
            s.spawn(|| {
                assert_eq!(cq.clean(0x11), 2, "the two left after the session's");
                done.store(true, Ordering::SeqCst);
            });
            std::thread::sleep(Duration::from_millis(50));
            assert!(!done.load(Ordering::SeqCst), "cleaned during a session");
            cq.end_poll();
        });
        assert_eq!(indices(&cq), (3, 3));
        assert_eq!(cq.start_poll().err(), Some(ENOENT));
    }

    #[test]
    fn a_session_walks_the_completions_and_consumes_each_once() {
        let cq = cq(4);
        assert_eq!(cq.start_poll().err(), Some(ENOENT), "empty: no session");
        assert_eq!(cq.next_poll().err(), Some(EINVAL), "no session to move");
        produce(&cq, 1..4);
        let first = cq.start_poll().unwrap();
        assert_eq!(first.wr_id, 1);
        let cur = cq.current();
        assert_eq!(
            (
                cur.wr_id,
                cur.opcode,
                cur.byte_len,
                cur.imm_data,
                cur.qp_num,
                cur.src_qp
            ),
            (1, 128, 10, 0x0102_0304, 0x11, 0x22)
        );
        assert_eq!(
            (cur.wc_flags, cur.slid, cur.sl, cur.dlid_path_bits),
            (2, 3, 4, 5)
        );
        // Consumed as the session moves to it: the slot is free already.
        assert_eq!(indices(&cq), (3, 1));
        assert_eq!(cq.next_poll().unwrap().wr_id, 2);
        assert_eq!(cq.current().byte_len, 20);
        assert_eq!(cq.next_poll().unwrap().wr_id, 3);
        assert_eq!(cq.next_poll().err(), Some(ENOENT));
        // The session stays at the last completion until it ends.
        assert_eq!(cq.current().wr_id, 3);
        cq.end_poll();
        // The consumer index is not past the producer's (rdma-core 44's
        // rxe moved it one further here).
        assert_eq!(indices(&cq), (3, 3));
        assert_eq!(cq.start_poll().err(), Some(ENOENT));
        produce(&cq, 4..5);
        assert_eq!(cq.start_poll().unwrap().wr_id, 4);
        cq.end_poll();
        // `ibv_poll_cq` shares the consumer.
        produce(&cq, 5..7);
        assert_eq!(cq.start_poll().unwrap().wr_id, 5);
        cq.end_poll();
        let mut out = [MaybeUninit::uninit(); 4];
        assert_eq!(cq.poll(&mut out), 1);
        // SAFETY: `poll` initialised the one entry it returned.
        assert_eq!(unsafe { out[0].assume_init() }.wr_id, 6);
        assert_eq!(indices(&cq), (6, 6));
    }

    #[test]
    fn a_broken_or_missing_ring_polls_eio() {
        let cq = cq(4);
        cq.lock().ring.as_ref().unwrap().set_indices(9, 0);
        assert_eq!(cq.start_poll().err(), Some(EIO));
        let mut out = [MaybeUninit::uninit(); 1];
        assert_eq!(cq.poll(&mut out), -EIO);
        cq.lock().ring = None;
        assert_eq!(cq.start_poll().err(), Some(EIO));
        assert_eq!(cq.poll(&mut out), -EIO);
    }

    #[test]
    fn other_pollers_wait_for_the_session() {
        let cq = cq(4);
        produce(&cq, 1..3);
        assert_eq!(cq.start_poll().unwrap().wr_id, 1);
        let polled = AtomicBool::new(false);
        std::thread::scope(|s| {
            s.spawn(|| {
                let mut out = [MaybeUninit::uninit(); 4];
                assert_eq!(cq.poll(&mut out), 1);
                // SAFETY: `poll` initialised the one entry it returned.
                assert_eq!(unsafe { out[0].assume_init() }.wr_id, 2);
                polled.store(true, Ordering::SeqCst);
                // And a second session waits for none.
                produce(&cq, 3..4);
                assert_eq!(cq.start_poll().unwrap().wr_id, 3);
                cq.end_poll();
            });
            std::thread::sleep(Duration::from_millis(50));
            assert!(!polled.load(Ordering::SeqCst), "poll_cq waits");
            // The session's reads are not disturbed meanwhile.
            assert_eq!(cq.current().wr_id, 1);
            cq.end_poll();
        });
        assert!(polled.load(Ordering::SeqCst));
    }

    fn attr(wc_flags: u64, comp_mask: u32, flags: u32) -> ibv_cq_init_attr_ex {
        ibv_cq_init_attr_ex {
            cqe: 16,
            cq_context: core::ptr::null_mut(),
            channel: core::ptr::null_mut(),
            comp_vector: 0,
            wc_flags,
            comp_mask,
            flags,
            parent_domain: core::ptr::null_mut(),
        }
    }

    #[test]
    fn create_cq_ex_refuses_what_it_cannot_do() {
        let std = IBV_WC_STANDARD_FLAGS;
        assert_eq!(check_cq_init_attr_ex(&attr(std, 0, 0)), Ok((16, 0)));
        assert_eq!(check_cq_init_attr_ex(&attr(0, 0, 0)), Ok((16, 0)));
        // Timestamps (both kinds), CVLAN, flow tag, tag matching.
        for flag in [7, 8, 9, 10, 11] {
            assert_eq!(
                check_cq_init_attr_ex(&attr(std | 1 << flag, 0, 0)),
                Err(EOPNOTSUPP),
                "wc_flags bit {flag}"
            );
        }
        let single = IBV_CREATE_CQ_ATTR_SINGLE_THREADED;
        let mask_flags = IBV_CQ_INIT_ATTR_MASK_FLAGS;
        assert_eq!(
            check_cq_init_attr_ex(&attr(std, mask_flags, single)),
            Ok((16, 0))
        );
        // Flags count only with their mask bit.
        assert_eq!(check_cq_init_attr_ex(&attr(std, 0, 0xff)), Ok((16, 0)));
        for flags in [IBV_CREATE_CQ_ATTR_IGNORE_OVERRUN, 1 << 2] {
            assert_eq!(
                check_cq_init_attr_ex(&attr(std, mask_flags, flags)),
                Err(EOPNOTSUPP)
            );
        }
        for mask in [IBV_CQ_INIT_ATTR_MASK_PD, 1 << 2, 1 << 31] {
            assert_eq!(check_cq_init_attr_ex(&attr(std, mask, 0)), Err(EOPNOTSUPP));
        }
        let mut big = attr(std, 0, 0);
        big.cqe = u32::MAX;
        assert_eq!(check_cq_init_attr_ex(&big), Err(EINVAL));
    }

    #[test]
    fn create_cq_ex_sets_the_callbacks_asked_for() {
        // SAFETY: all-zero is a valid `ibv_cq_ex` (integers, a zeroed
        // mutex and condition variable, NULL callbacks).
        let mut cq: Box<ibv_cq_ex> = Box::new(unsafe { core::mem::zeroed() });
        set_cq_ex_ops(&mut cq, IBV_WC_EX_WITH_BYTE_LEN | IBV_WC_EX_WITH_SL);
        assert!(cq.start_poll.is_some() && cq.next_poll.is_some() && cq.end_poll.is_some());
        assert!(cq.read_opcode.is_some() && cq.read_vendor_err.is_some());
        assert!(cq.read_wc_flags.is_some());
        assert!(cq.read_byte_len.is_some() && cq.read_sl.is_some());
        assert!(cq.read_imm_data.is_none() && cq.read_qp_num.is_none());
        assert!(cq.read_src_qp.is_none() && cq.read_slid.is_none());
        assert!(cq.read_dlid_path_bits.is_none() && cq.read_completion_ts.is_none());
        set_cq_ex_ops(&mut cq, IBV_WC_STANDARD_FLAGS);
        assert!(cq.read_imm_data.is_some() && cq.read_qp_num.is_some());
        assert!(cq.read_src_qp.is_some() && cq.read_slid.is_some());
        assert!(cq.read_dlid_path_bits.is_some() && cq.read_completion_ts.is_none());
    }
}
