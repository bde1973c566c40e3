// SPDX-License-Identifier: GPL-2.0

//! Shared receive queues: a ring of receive WQEs that several QPs consume.

use super::counter::Counted;
use super::device::{RxudDevice, MAX_SRQ_SGE, MAX_SRQ_WR};
use super::ring::{Ring, WorkQueue};
use crate::abi::{recv_wqe_slot_size, CreateSrqReq, CreateSrqResp};
use crate::ib::{SrqAttr, SrqEvents, SrqModify, UData};
use core::sync::atomic::{AtomicU32, Ordering};
use kernel::{prelude::*, sync::Arc};

/// The part of an SRQ its QPs share.
pub(crate) struct SrqCore {
    pub(super) queue: Pin<KBox<WorkQueue>>,
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
        let core = Arc::new(
            SrqCore {
                queue: KBox::pin_init(WorkQueue::new(ring), GFP_KERNEL)?,
                max_sge,
                limit: AtomicU32::new(0),
                events,
            },
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

    pub(crate) fn modify(&self, attr: &SrqAttr, what: SrqModify) -> Result {
        if what.unknown {
            return Err(EINVAL);
        }
        // Resizing is not offered (the SRQ resize capability is not reported).
        if what.resize {
            return Err(crate::ib::eopnotsupp());
        }
        if what.limit {
            if attr.srq_limit > self.core.queue.ring().geometry().slot_count() {
                return Err(EINVAL);
            }
            self.core.limit.store(attr.srq_limit, Ordering::Relaxed);
        }
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
        let taken = self.queue.pop(out)?;
        let limit = self.limit.load(Ordering::Relaxed);
        if taken
            && limit != 0
            && self.queue.len() < limit
            && self
                .limit
                .compare_exchange(limit, 0, Ordering::AcqRel, Ordering::Relaxed)
                .is_ok()
        {
            self.events.limit_reached();
        }
        Ok(taken)
    }

    /// Most SGEs of one of its WQEs.
    pub(crate) fn max_sge(&self) -> u32 {
        self.max_sge
    }

    fn attr(&self) -> SrqAttr {
        SrqAttr {
            max_wr: self.queue.ring().geometry().slot_count(),
            max_sge: self.max_sge,
            srq_limit: self.limit.load(Ordering::Relaxed),
        }
    }
}
