// SPDX-License-Identifier: GPL-2.0

//! Shared receive queues: a ring of receive WQEs that several QPs consume,
//! replaced by a larger or smaller one when the owner resizes the SRQ.

use super::counter::Counted;
use super::device::{RxudDevice, MAX_SRQ_SGE, MAX_SRQ_WR};
use super::ring::{Ring, WorkQueue};
use crate::abi::{recv_wqe_slot_size, CreateSrqReq, CreateSrqResp, ModifySrqReq, ModifySrqResp};
use crate::ib::{SrqAttr, SrqEvents, SrqModify, UData};
use crate::kext::sync::{new_spinlock_irq, SpinLockIrq};
use core::sync::atomic::{AtomicU32, Ordering};
use kernel::{prelude::*, sync::Arc};

/// The part of an SRQ its QPs share.
#[pin_data]
pub(crate) struct SrqCore {
    /// The queue, replaced by a resize. Receives take from it in softirq
    /// context, kernel posts from any, a resize in process context: the
    /// lock is taken with interrupts disabled, around the queue's own.
    #[pin]
    queue: SpinLockIrq<Pin<KBox<WorkQueue>>>,
    max_sge: u32,
    /// Raise the SRQ limit event when fewer WQEs remain; 0 when
    /// disarmed (the event disarms it).
    limit: AtomicU32,
    events: SrqEvents,
}

pub(crate) struct RxudSrq {
    core: Arc<SrqCore>,
    _counted: Counted,
}

impl Drop for RxudSrq {
    fn drop(&mut self) {
        // QP cores still below IP may hold the SRQ's core past the user
        // context ib_core frees after this: the ring leaves it now (the
        // entry goes outside the lock).
        let unmapping = self.core.queue.lock().ring().unmap();
        drop(unmapping);
    }
}

impl RxudSrq {
    pub(crate) fn new(
        dev: &RxudDevice,
        attr: &SrqAttr,
        events: SrqEvents,
        udata: &UData,
    ) -> Result<(Self, SrqAttr)> {
        let req: CreateSrqReq = udata.read()?;
        if req.comp_mask != 0 {
            return Err(crate::ib::eopnotsupp());
        }
        if attr.max_wr > MAX_SRQ_WR || attr.max_sge > MAX_SRQ_SGE {
            return Err(EINVAL);
        }
        let counted = dev.srqs.take()?;
        let max_sge = attr.max_sge.max(1);
        // A zero max_wr is rejected by the ring.
        let ring = Ring::new(
            udata.ucontext(),
            attr.max_wr,
            MAX_SRQ_WR,
            recv_wqe_slot_size(max_sge),
        )?;
        udata.write(&CreateSrqResp {
            comp_mask: 0,
            ring: ring.info(),
        })?;
        // The limit is not set at creation (IBTA 11.2.3.1); modify arms it.
        let queue = KBox::pin_init(WorkQueue::new(ring), GFP_KERNEL)?;
        let core = Arc::pin_init(
            pin_init!(SrqCore {
                queue <- new_spinlock_irq!(queue, "rxud:srq_queue"),
                max_sge,
                limit: AtomicU32::new(0),
                events,
            }),
            GFP_KERNEL,
        )?;
        let granted = core.attr();
        Ok((
            Self {
                core,
                _counted: counted,
            },
            granted,
        ))
    }

    pub(crate) fn core(&self) -> &Arc<SrqCore> {
        &self.core
    }

    /// `modify_srq`: a resize (`max_wr`), then the limit (checked
    /// against the new size), as rxe orders them. Context: process.
    pub(crate) fn modify(&self, attr: &SrqAttr, what: SrqModify, udata: &UData) -> Result {
        if what.unknown {
            return Err(EINVAL);
        }
        if what.resize {
            self.resize(attr.max_wr, udata)?;
        }
        if what.limit {
            if attr.srq_limit > self.core.slot_count() {
                return Err(EINVAL);
            }
            self.core.limit.store(attr.srq_limit, Ordering::Relaxed);
        }
        Ok(())
    }

    /// Replaces the ring by one of at least `max_wr` slots holding the
    /// WQEs waiting in the old one, the oldest first. `EINVAL` for a size
    /// out of range, below the armed limit (as rxe) or below the WQEs
    /// waiting. MODIFY_SRQ has no response buffer: a user caller's
    /// request names where the new ring's description goes (written
    /// before the swap: an owner that cannot learn it keeps the old
    /// ring). Kernel SRQs resize as well, without one. Context: process
    /// (ib_core serialises the modifies of an SRQ).
    fn resize(&self, max_wr: u32, udata: &UData) -> Result {
        let req: ModifySrqReq = udata.read()?;
        if req.comp_mask != 0 {
            return Err(crate::ib::eopnotsupp());
        }
        let limit = self.core.limit.load(Ordering::Relaxed);
        if max_wr == 0 || max_wr > MAX_SRQ_WR || max_wr < limit {
            return Err(EINVAL);
        }
        let ring = Ring::new(
            udata.ucontext(),
            max_wr,
            MAX_SRQ_WR,
            recv_wqe_slot_size(self.core.max_sge),
        )?;
        if udata.ucontext().is_some() {
            udata.write_at(
                req.resp_addr,
                &ModifySrqResp {
                    comp_mask: 0,
                    ring: ring.info(),
                },
            )?;
        }
        let new = KBox::pin_init(WorkQueue::new(ring), GFP_KERNEL)?;
        let old = {
            let mut q = self.core.queue.lock();
            new.take_over(&q)?;
            core::mem::replace(&mut *q, new)
        };
        // The old ring's memory goes with its mmap entry, outside the
        // lock.
        drop(old.ring().unmap());
        drop(old);
        Ok(())
    }

    pub(crate) fn query(&self) -> SrqAttr {
        self.core.attr()
    }
}

impl SrqCore {
    /// Takes the oldest receive WQE (as `WorkQueue::pop`); if that leaves
    /// fewer than the armed limit, disarms it and raises the SRQ limit
    /// event (IBTA 10.2.9.4). Any context.
    pub(crate) fn pop(&self, out: &mut [u8]) -> Result<bool> {
        let (taken, left) = {
            let q = self.queue.lock();
            let taken = q.pop(out)?;
            (taken, q.len())
        };
        let limit = self.limit.load(Ordering::Relaxed);
        if taken
            && limit != 0
            && left < limit
            && self
                .limit
                .compare_exchange(limit, 0, Ordering::AcqRel, Ordering::Relaxed)
                .is_ok()
        {
            self.events.limit_reached();
        }
        Ok(taken)
    }

    /// Appends a kernel consumer's receive WQE (as `WorkQueue::push`).
    /// Any context.
    pub(crate) fn push(&self, entry: &[u8]) -> Result {
        self.queue.lock().push(entry)
    }

    /// Receive WQEs waiting. Any context.
    pub(crate) fn len(&self) -> u32 {
        self.queue.lock().len()
    }

    /// Slots of its ring (`max_wr`). Any context.
    pub(crate) fn slot_count(&self) -> u32 {
        self.queue.lock().ring().geometry().slot_count()
    }

    /// Most SGEs of one of its WQEs.
    pub(crate) fn max_sge(&self) -> u32 {
        self.max_sge
    }

    fn attr(&self) -> SrqAttr {
        SrqAttr {
            max_wr: self.slot_count(),
            max_sge: self.max_sge,
            srq_limit: self.limit.load(Ordering::Relaxed),
        }
    }
}
