// SPDX-License-Identifier: GPL-2.0 OR Linux-OpenIB

//! The `ibv_wr_*` interface of a QP (`struct ibv_qp_ex`): the bookkeeping
//! of a batch of work requests, kept apart from libibverbs' structures so
//! that it is plain safe code with host tests.
//!
//! Between `ibv_wr_start` and `ibv_wr_complete` (or `ibv_wr_abort`) the
//! application builds work requests: a builder (`ibv_wr_send`,
//! `ibv_wr_rdma_write`, ...) starts one, with `wr_id` and `wr_flags` as
//! `ibv_qp_ex` holds them at that moment, and setters (`ibv_wr_set_sge`,
//! `ibv_wr_set_inline_data`, `ibv_wr_set_ud_addr`, ...) complete the last
//! one. [`Batch`] stages them as `ibv_send_wr`s, copying what the
//! application may reuse as soon as a setter returns (SGE lists, inline
//! data). `ibv_wr_complete` hands the staged requests to
//! `SendQueue::post_batch`, which checks and encodes them as it does
//! `ibv_post_send`'s (one WQE format, one set of rules) and publishes all
//! of them or, if one fails, none. Builders and setters cannot fail
//! visibly: the first error is kept and `ibv_wr_complete` returns it,
//! publishing nothing. `ibv_wr_abort` drops the batch.
//!
//! [`Session`] is the critical section the verbs promise between
//! `ibv_wr_start` and `ibv_wr_complete`/`ibv_wr_abort`: one thread at a time
//! per QP; another thread's `ibv_wr_start` waits.

use crate::post::PostWr;
use crate::sys::*;
use core::ffi::c_int;
use core::ops::Range;
use rxud_abi::{opcode, send_flags, FlushOp};
use std::sync::{Condvar, Mutex, MutexGuard, PoisonError};

/// Where a staged request's data is.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Data {
    /// None set: a zero-length message.
    Nothing,
    /// These elements of [`Batch::sges`].
    Sges(Range<usize>),
    /// These bytes of [`Batch::inline`].
    Inline(Range<usize>),
}

struct Staged {
    /// The request without its data: `next`, `sg_list` and `num_sge` are
    /// filled in when the batch is posted.
    wr: ibv_send_wr,
    /// What an RDMA builder put in `wr.wr.rdma`, kept apart: a later
    /// `ibv_wr_set_ud_addr` overwrites that union (an XUD WRITE has both).
    rdma: Option<ibv_send_wr_rdma>,
    /// What `rxudv_wr_flush` gave (an `ibv_send_wr` has no room for it).
    flush: Option<FlushOp>,
    data: Data,
}

/// The work requests built since `ibv_wr_start`.
pub(crate) struct Batch {
    /// What the send queue was granted: setters refuse more before copying.
    max_sge: u32,
    max_inline: u32,
    wrs: Vec<Staged>,
    sges: Vec<ibv_sge>,
    inline: Vec<u8>,
    /// The first error of a builder or setter.
    err: Option<c_int>,
}

// SAFETY: the only pointers in a batch are the staged requests' `next`
// and `sg_list` (NULL until posted) and the UD AHs the application gave,
// which are just values here: they are dereferenced only when the batch is
// posted, under `SendQueue::post_batch`'s contract, whatever the thread.
unsafe impl Send for Batch {}

impl Batch {
    pub(crate) fn new(max_sge: u32, max_inline: u32) -> Self {
        Self {
            max_sge,
            max_inline,
            wrs: Vec::new(),
            sges: Vec::new(),
            inline: Vec::new(),
            err: None,
        }
    }

    /// Empties the batch (keeping its memory for the next one).
    pub(crate) fn clear(&mut self) {
        self.wrs.clear();
        self.sges.clear();
        self.inline.clear();
        self.err = None;
    }

    /// How many requests are staged.
    pub(crate) fn len(&self) -> usize {
        self.wrs.len()
    }

    /// The first error a builder or setter met, if any.
    #[cfg(test)]
    pub(crate) fn error(&self) -> Option<c_int> {
        self.err
    }

    /// Records a builder's or setter's error (the first one counts).
    pub(crate) fn fail(&mut self, err: c_int) {
        self.err.get_or_insert(err);
    }

    /// The most scatter/gather elements a request may have.
    pub(crate) fn max_sge(&self) -> u32 {
        self.max_sge
    }

    /// The most inline data a request may carry.
    pub(crate) fn max_inline(&self) -> u32 {
        self.max_inline
    }

    /// A builder: starts request `wr`, whose `wr_id`, `opcode`,
    /// `send_flags`, `imm_data` and operation fields (`wr.wr`) are set;
    /// until a data setter runs it carries no data. `IBV_SEND_INLINE` is
    /// the data setters' to decide (`ibv_wr_set_inline_data*` set it).
    /// The RDMA operands of an RDMA WRITE or READ move out of the union,
    /// where `ibv_wr_set_ud_addr` may put a UD address (see [`PostWr`]).
    pub(crate) fn build(&mut self, mut wr: ibv_send_wr) {
        wr.next = core::ptr::null_mut();
        wr.sg_list = core::ptr::null_mut();
        wr.num_sge = 0;
        wr.send_flags &= !send_flags::INLINE;
        let rdma = matches!(
            wr.opcode,
            opcode::RDMA_WRITE
                | opcode::RDMA_WRITE_WITH_IMM
                | opcode::RDMA_READ
                | opcode::ATOMIC_WRITE
        )
        // SAFETY: every member of the union is integers and a pointer;
        // for these opcodes the builder wrote `rdma`.
        .then(|| unsafe { wr.wr.rdma });
        if rdma.is_some() {
            // The union now holds only what `ibv_wr_set_ud_addr` writes: no
            // AH until then (the remote address is not one).
            wr.wr.ud = ibv_send_wr_ud {
                ah: core::ptr::null_mut(),
                remote_qpn: 0,
                remote_qkey: 0,
            };
        }
        self.wrs.push(Staged {
            wr,
            rdma,
            flush: None,
            data: Data::Nothing,
        });
    }

    /// `rxudv_wr_flush`: a FLUSH request with these operands, which no
    /// setter changes (it gathers nothing).
    pub(crate) fn build_flush(&mut self, wr: ibv_send_wr, op: FlushOp) {
        self.build(wr);
        if let Some(last) = self.wrs.last_mut() {
            last.flush = Some(op);
        }
    }

    /// The request the last builder started, for a setter; none is an
    /// error (a setter before any builder).
    fn last(&mut self) -> Option<&mut Staged> {
        if self.wrs.is_empty() {
            self.fail(EINVAL);
        }
        self.wrs.last_mut()
    }

    /// `ibv_wr_set_sge` / `ibv_wr_set_sge_list`: the last request gathers
    /// from (or, for a READ or an atomic, scatters to) `sges`, copied.
    pub(crate) fn set_sges(&mut self, sges: &[ibv_sge]) {
        if self.last().is_none() {
            return;
        }
        if u32::try_from(sges.len()).map_or(true, |n| n > self.max_sge) {
            self.fail(EINVAL);
            return;
        }
        let at = self.sges.len();
        self.sges.extend_from_slice(sges);
        let range = at..self.sges.len();
        if let Some(last) = self.wrs.last_mut() {
            last.wr.send_flags &= !send_flags::INLINE;
            last.data = Data::Sges(range);
        }
    }

    /// `ibv_wr_set_inline_data` / `ibv_wr_set_inline_data_list`: the last
    /// request carries the concatenation of `bufs`, copied now.
    pub(crate) fn set_inline(&mut self, bufs: &[&[u8]]) {
        if self.last().is_none() {
            return;
        }
        let total = bufs
            .iter()
            .try_fold(0usize, |sum, buf| sum.checked_add(buf.len()));
        if total.is_none_or(|total| total > self.max_inline as usize) {
            self.fail(EINVAL);
            return;
        }
        let at = self.inline.len();
        for buf in bufs {
            self.inline.extend_from_slice(buf);
        }
        let range = at..self.inline.len();
        if let Some(last) = self.wrs.last_mut() {
            last.wr.send_flags |= send_flags::INLINE;
            last.data = Data::Inline(range);
        }
    }

    /// `ibv_wr_atomic_write`'s 8 bytes: the last request carries them as
    /// inline data (rust/abi), copied now, whatever the inline limit.
    pub(crate) fn set_atomic_value(&mut self, value: &[u8; 8]) {
        if self.last().is_none() {
            return;
        }
        let at = self.inline.len();
        self.inline.extend_from_slice(value);
        let range = at..self.inline.len();
        if let Some(last) = self.wrs.last_mut() {
            last.wr.send_flags |= send_flags::INLINE;
            last.data = Data::Inline(range);
        }
    }

    /// `ibv_wr_set_ud_addr`: the last request's destination.
    pub(crate) fn set_ud_addr(&mut self, ah: *mut ibv_ah, remote_qpn: u32, remote_qkey: u32) {
        if let Some(last) = self.last() {
            last.wr.wr.ud = ibv_send_wr_ud {
                ah,
                remote_qpn,
                remote_qkey,
            };
        }
    }

    /// Runs `post` over the staged requests as `ibv_send_wr`s whose
    /// `sg_list`s point into this batch (inline data as one element per
    /// request pointing at the copied bytes, with `IBV_SEND_INLINE`), valid
    /// during the call, each with its RDMA operands. Fails with the first
    /// builder or setter error instead, without calling `post`.
    pub(crate) fn with_requests<R>(
        &self,
        post: impl FnOnce(&[PostWr]) -> Result<R, c_int>,
    ) -> Result<R, c_int> {
        if let Some(err) = self.err {
            return Err(err);
        }
        let inline_sges: Vec<ibv_sge> = self
            .wrs
            .iter()
            .map(|s| match &s.data {
                Data::Inline(range) => ibv_sge {
                    addr: self.inline[range.clone()].as_ptr().expose_provenance() as u64,
                    length: range.len() as u32,
                    lkey: 0,
                },
                _ => ibv_sge::default(),
            })
            .collect();
        let mut wrs = Vec::with_capacity(self.wrs.len());
        for (staged, inline) in self.wrs.iter().zip(&inline_sges) {
            let mut wr = staged.wr;
            match &staged.data {
                Data::Nothing => {}
                Data::Sges(range) => {
                    let sges = &self.sges[range.clone()];
                    wr.sg_list = sges.as_ptr().cast_mut();
                    wr.num_sge = c_int::try_from(sges.len()).map_err(|_| EINVAL)?;
                }
                Data::Inline(_) => {
                    wr.sg_list = (inline as *const ibv_sge).cast_mut();
                    wr.num_sge = 1;
                }
            }
            wrs.push(PostWr {
                wr,
                rdma: staged.rdma,
                flush: staged.flush,
            });
        }
        post(&wrs)
    }
}

/// The per-QP critical section of the `ibv_wr_*` interface, around its
/// [`Batch`].
pub(crate) struct Session {
    state: Mutex<SessionState>,
    /// Signalled when a session ends.
    idle: Condvar,
}

struct SessionState {
    open: bool,
    batch: Batch,
}

impl Session {
    pub(crate) fn new(max_sge: u32, max_inline: u32) -> Self {
        Self {
            state: Mutex::new(SessionState {
                open: false,
                batch: Batch::new(max_sge, max_inline),
            }),
            idle: Condvar::new(),
        }
    }

    fn lock(&self) -> MutexGuard<'_, SessionState> {
        // A panic aborts (panic = "abort"), so nothing is ever poisoned.
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// `ibv_wr_start`: waits until no other session is open, then opens
    /// one with an empty batch.
    pub(crate) fn start(&self) {
        let mut state = self.lock();
        while state.open {
            state = self
                .idle
                .wait(state)
                .unwrap_or_else(PoisonError::into_inner);
        }
        state.open = true;
        state.batch.clear();
    }

    /// A builder or setter: `f` on the open session's batch. Outside a
    /// session (a misuse nothing can report) it does nothing.
    pub(crate) fn with_batch(&self, f: impl FnOnce(&mut Batch)) {
        let mut state = self.lock();
        if state.open {
            f(&mut state.batch);
        }
    }

    /// `ibv_wr_complete` (with `f` posting the batch) or `ibv_wr_abort`
    /// (`f` doing nothing): `f` on the batch, then the session ends and
    /// the batch is dropped. Outside a session `f` does not run and the
    /// result is `EINVAL`.
    pub(crate) fn finish(&self, f: impl FnOnce(&Batch) -> Result<(), c_int>) -> Result<(), c_int> {
        let mut state = self.lock();
        if !state.open {
            return Err(EINVAL);
        }
        let ret = f(&state.batch);
        state.batch.clear();
        state.open = false;
        drop(state);
        self.idle.notify_one();
        ret
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::time::Duration;

    fn wr(wr_id: u64, op: u32, flags: u32) -> ibv_send_wr {
        ibv_send_wr {
            wr_id,
            opcode: op,
            send_flags: flags,
            ..Default::default()
        }
    }

    fn sge(addr: u64, length: u32, lkey: u32) -> ibv_sge {
        ibv_sge { addr, length, lkey }
    }

    /// The requests `with_requests` would post, with their data read back
    /// through the pointers it set.
    /// A posted request, its elements and (if inline) its data.
    type Posted = (PostWr, Vec<ibv_sge>, Vec<u8>);

    fn posted(b: &Batch) -> Result<Vec<Posted>, c_int> {
        b.with_requests(|wrs| {
            Ok(wrs
                .iter()
                .map(|p| {
                    let w = &p.wr;
                    let n = w.num_sge as usize;
                    let sges = if n == 0 {
                        vec![]
                    } else {
                        // SAFETY: `with_requests` points `sg_list` at `n`
                        // elements it keeps alive during the call.
                        unsafe { core::slice::from_raw_parts(w.sg_list, n) }.to_vec()
                    };
                    let bytes = if w.send_flags & send_flags::INLINE != 0 {
                        let s = sges[0];
                        // SAFETY: inline elements point into the batch.
                        unsafe {
                            core::slice::from_raw_parts(
                                core::ptr::with_exposed_provenance::<u8>(s.addr as usize),
                                s.length as usize,
                            )
                        }
                        .to_vec()
                    } else {
                        vec![]
                    };
                    (*p, sges, bytes)
                })
                .collect())
        })
    }

    #[test]
    fn builders_and_setters_make_requests() {
        let mut b = Batch::new(3, 16);
        let mut w = wr(
            1,
            opcode::RDMA_WRITE,
            send_flags::SIGNALED | send_flags::INLINE,
        );
        w.wr.rdma = ibv_send_wr_rdma {
            remote_addr: 0x1000,
            rkey: 7,
        };
        b.build(w);
        let list = [sge(0x10, 1, 1), sge(0x20, 2, 2)];
        b.set_sges(&list);
        b.build(wr(2, opcode::SEND, 0));
        let mut data = *b"hello";
        b.set_inline(&[&data[..2], &data[2..]]);
        // The application may reuse its buffer once the setter returned.
        data.fill(0);
        b.build(wr(3, opcode::SEND_WITH_IMM, send_flags::SOLICITED));
        assert_eq!(b.len(), 3);
        let got = posted(&b).unwrap();
        let (p1, s1, _) = &got[0];
        let w1 = &p1.wr;
        assert_eq!(
            (w1.wr_id, w1.opcode, w1.num_sge),
            (1, opcode::RDMA_WRITE, 2)
        );
        assert_eq!(
            w1.send_flags,
            send_flags::SIGNALED,
            "INLINE is the setters'"
        );
        // The RDMA operands, kept apart; the union has no AH.
        assert_eq!(
            p1.rdma,
            Some(ibv_send_wr_rdma {
                remote_addr: 0x1000,
                rkey: 7
            })
        );
        // SAFETY: the builder cleared `ud`.
        assert!(unsafe { w1.wr.ud }.ah.is_null());
        assert_eq!(s1[..], list);
        let (p2, _, bytes) = &got[1];
        assert_eq!((p2.wr.num_sge, p2.wr.send_flags), (1, send_flags::INLINE));
        assert_eq!((bytes.as_slice(), p2.rdma), (&b"hello"[..], None));
        let (p3, s3, _) = &got[2];
        let w3 = &p3.wr;
        assert_eq!((w3.wr_id, w3.num_sge, s3.len()), (3, 0, 0));
        assert!(w3.next.is_null() && w3.sg_list.is_null());
    }

    #[test]
    fn the_last_data_setter_wins() {
        let mut b = Batch::new(2, 8);
        b.build(wr(1, opcode::SEND, 0));
        b.set_inline(&[b"abc"]);
        b.set_sges(&[sge(1, 2, 3)]);
        b.build(wr(2, opcode::SEND, 0));
        b.set_sges(&[sge(1, 2, 3)]);
        b.set_inline(&[b"xy"]);
        let got = posted(&b).unwrap();
        assert_eq!(got[0].0.wr.send_flags, 0);
        assert_eq!(got[0].1, [sge(1, 2, 3)]);
        assert_eq!(got[1].0.wr.send_flags, send_flags::INLINE);
        assert_eq!(got[1].2, b"xy");
    }

    #[test]
    fn ud_addresses_go_to_the_last_request() {
        let mut b = Batch::new(1, 0);
        let ah = 0x40 as *mut ibv_ah;
        b.build(wr(1, opcode::SEND, 0));
        b.build(wr(2, opcode::SEND, 0));
        b.set_ud_addr(ah, 0x11, 0x22);
        let got = posted(&b).unwrap();
        // SAFETY: `ud` is what the setter wrote, and all-zero otherwise.
        let (ud0, ud1) = unsafe { (got[0].0.wr.wr.ud, got[1].0.wr.wr.ud) };
        assert!(ud0.ah.is_null());
        assert_eq!((ud1.ah, ud1.remote_qpn, ud1.remote_qkey), (ah, 0x11, 0x22));
    }

    #[test]
    fn errors_are_kept_until_complete() {
        // A setter before any builder.
        let mut b = Batch::new(2, 4);
        b.set_sges(&[sge(1, 1, 1)]);
        b.build(wr(1, opcode::SEND, 0));
        assert_eq!(b.error(), Some(EINVAL));
        let mut called = false;
        let ret = b.with_requests(|_| {
            called = true;
            Ok(())
        });
        assert_eq!((ret, called), (Err(EINVAL), false));
        // Too many elements, too much inline data: nothing copied.
        for bad in [0, 1] {
            let mut b = Batch::new(2, 4);
            b.build(wr(1, opcode::SEND, 0));
            if bad == 0 {
                b.set_sges(&[sge(1, 1, 1); 3]);
            } else {
                b.set_inline(&[b"ab", b"cde"]);
            }
            assert_eq!(b.error(), Some(EINVAL));
            assert!(b.sges.is_empty() && b.inline.is_empty());
            // The first error is the one reported.
            b.fail(ENOMEM);
            assert_eq!(b.error(), Some(EINVAL));
        }
        // At the limits, fine.
        let mut b = Batch::new(2, 4);
        b.build(wr(1, opcode::SEND, 0));
        b.set_sges(&[sge(1, 1, 1); 2]);
        b.build(wr(2, opcode::SEND, 0));
        b.set_inline(&[b"ab", b"cd"]);
        assert_eq!(b.error(), None);
        b.clear();
        assert_eq!((b.len(), b.error()), (0, None));
        assert_eq!(posted(&b).unwrap().len(), 0);
    }

    #[test]
    fn a_session_is_a_critical_section() {
        let s = Session::new(1, 0);
        // complete or abort without start: refused, nothing runs.
        assert_eq!(s.finish(|_| panic!("no session")), Err(EINVAL));
        // Builders outside a session do nothing.
        s.with_batch(|b| b.build(wr(9, opcode::SEND, 0)));
        s.start();
        s.with_batch(|b| {
            assert_eq!(b.len(), 0);
            b.build(wr(1, opcode::SEND, 0));
        });
        let entered = AtomicBool::new(false);
        std::thread::scope(|scope| {
            scope.spawn(|| {
                s.start();
                entered.store(true, Ordering::SeqCst);
                // The batch the other session left behind is gone.
                s.with_batch(|b| assert_eq!(b.len(), 0));
                assert_eq!(s.finish(|_| Ok(())), Ok(()));
            });
            std::thread::sleep(Duration::from_millis(50));
            assert!(!entered.load(Ordering::SeqCst), "second start waits");
            assert_eq!(
                s.finish(|b| {
                    assert_eq!(b.len(), 1);
                    Err(ENOMEM)
                }),
                Err(ENOMEM)
            );
        });
        assert!(entered.load(Ordering::SeqCst));
        // Abort: the batch is dropped.
        s.start();
        s.with_batch(|b| b.build(wr(2, opcode::SEND, 0)));
        assert_eq!(s.finish(|_| Ok(())), Ok(()));
        s.start();
        s.with_batch(|b| assert_eq!(b.len(), 0));
        assert_eq!(s.finish(|_| Ok(())), Ok(()));
    }
}
