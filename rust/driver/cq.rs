// SPDX-License-Identifier: GPL-2.0

//! Completion queues. A CQ is a ring of `Cqe`s (rust/abi) the kernel
//! produces and the owner consumes: user space through its mapping, kernel
//! ULPs through `poll_cq` once the data path exists.

use super::counter::Counted;
use super::device::{RxudDevice, MAX_CQE};
use super::ring::Ring;
use crate::abi::{
    Cqe, CreateCqReq, CreateCqResp, ResizeCqReq, ResizeCqResp, CQE_SIZE, CQ_SLOT_SIZE,
};
use crate::ib::{CqArm, CqEvents, CqInitAttr, UData};
use crate::kext::sync::{new_spinlock_irq, SpinLockIrq};
use core::sync::atomic::{AtomicBool, AtomicU32, AtomicU8, Ordering};
use kernel::{prelude::*, sync::Arc};

/// Arming state (`req_notify_cq`), read by the completer.
const DISARMED: u8 = 0;
const ARMED_SOLICITED: u8 = 1;
const ARMED_ANY: u8 = 2;

/// The part of a CQ its QPs share.
#[pin_data]
pub(crate) struct CqCore {
    /// The ring, replaced by resize. Producers (completers, in softirq
    /// context on receive), resize (process) and `req_notify_cq` (any
    /// context, hard irq included) serialise on this lock, which is
    /// therefore taken with interrupts disabled.
    #[pin]
    ring: SpinLockIrq<CqRing>,
    armed: AtomicU8,
    events: CqEvents,
    /// A completion found the CQ full; the owner has been told (once).
    overflowed: AtomicBool,
    /// Contexts holding the CQ's new entries back ([`CqCore::hold`]).
    /// Changed without the ring's lock, read under it by producers.
    holds: AtomicU32,
    /// Entries are held ([`CqRing::held`] is not 0, or was until a moment
    /// ago): set by a producer under the ring's lock, cleared by the
    /// publication under it, read without it by [`CqCore::release`], so
    /// that a release with nothing held takes no lock. A producer sets it
    /// and then looks at `holds` again; a release drops its hold and then
    /// looks at this (all sequentially consistent): of a producer and
    /// the last release of the hold it saw, one sees the other, and that
    /// one publishes the entry.
    held_pending: AtomicBool,
}

struct CqRing {
    ring: Ring,
    /// Next index to produce at; the ring's producer field, which the
    /// owner polls, mirrors it but for the entries held (`held`).
    producer: u32,
    /// Entries written while held, not yet published, and whether any of
    /// them asked for a solicited event.
    held: u32,
    held_solicited: bool,
}

pub(crate) struct RxudCq {
    core: Arc<CqCore>,
    _counted: Counted,
}

impl Drop for RxudCq {
    fn drop(&mut self) {
        // QP cores still below IP may hold the CQ's core past the user
        // context ib_core frees after this: the ring leaves it now (the
        // entry goes outside the lock).
        let unmapping = self.core.ring.lock().ring.unmap();
        drop(unmapping);
    }
}

impl RxudCq {
    pub(crate) fn new(
        dev: &RxudDevice,
        attr: &CqInitAttr,
        events: CqEvents,
        udata: &UData,
    ) -> Result<(Self, u32)> {
        let req: CreateCqReq = udata.read()?;
        if req.comp_mask != 0 || !attr.flags.is_empty() {
            return Err(crate::ib::eopnotsupp());
        }
        if attr.comp_vector != 0 {
            return Err(EINVAL);
        }
        let counted = dev.cqs.take()?;
        let ring = Ring::new(udata.ucontext(), attr.cqe, MAX_CQE, CQ_SLOT_SIZE)?;
        let cqe = ring.geometry().slot_count();
        udata.write(&CreateCqResp {
            comp_mask: 0,
            ring: ring.info(),
        })?;
        let core = Arc::pin_init(
            pin_init!(CqCore {
                ring <- new_spinlock_irq!(
                    CqRing {
                        ring,
                        producer: 0,
                        held: 0,
                        held_solicited: false,
                    },
                    "rxud:cq"
                ),
                armed: AtomicU8::new(DISARMED),
                overflowed: AtomicBool::new(false),
                holds: AtomicU32::new(0),
                held_pending: AtomicBool::new(false),
                events,
            }),
            GFP_KERNEL,
        )?;
        Ok((
            Self {
                core,
                _counted: counted,
            },
            cqe,
        ))
    }

    pub(crate) fn core(&self) -> &Arc<CqCore> {
        &self.core
    }

    /// Moves the unconsumed entries to a new ring of at least `cqe`
    /// entries (first one at slot 0). `EINVAL` if they would not fit.
    pub(crate) fn resize(&self, cqe: u32, udata: &UData) -> Result<u32> {
        let req: ResizeCqReq = udata.read()?;
        if req.comp_mask != 0 {
            return Err(crate::ib::eopnotsupp());
        }
        let new = Ring::new(udata.ucontext(), cqe, MAX_CQE, CQ_SLOT_SIZE)?;
        let count = new.geometry().slot_count();
        // Before the swap: if the owner cannot learn the new ring, the
        // old one stays.
        udata.write(&ResizeCqResp {
            comp_mask: 0,
            ring: new.info(),
        })?;
        let old = {
            let mut r = self.core.ring.lock();
            let consumer = r.ring.consumer();
            // A consumer index beyond what was produced is the owner's
            // error; refuse rather than copy garbage.
            let pending = r
                .ring
                .geometry()
                .occupancy(r.producer, consumer)
                .ok_or(EINVAL)?;
            if pending > count {
                return Err(EINVAL);
            }
            let mut cqe_buf = [0u8; CQE_SIZE as usize];
            for i in 0..pending {
                r.ring.read_slot(consumer.wrapping_add(i), &mut cqe_buf)?;
                new.write_slot(i, &cqe_buf)?;
            }
            new.set_producer(pending);
            let old = core::mem::replace(&mut r.ring, new);
            r.producer = pending;
            old
        };
        // The old ring's memory goes with its mmap entry, outside the lock.
        drop(old);
        Ok(count)
    }

    /// Arms the CQ; tells whether entries are already waiting.
    pub(crate) fn arm(&self, arm: CqArm) -> bool {
        let level = match arm {
            CqArm::Solicited => ARMED_SOLICITED,
            CqArm::NextCompletion => ARMED_ANY,
        };
        // Arming for any completion supersedes arming for solicited ones,
        // never the reverse.
        self.core.armed.fetch_max(level, Ordering::AcqRel);
        self.core.has_entries()
    }
}

/// Why a completion could not be queued.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) enum CqFull {
    /// Every slot holds an unconsumed entry: the CQ overflowed.
    Overflow,
    /// The consumer index claims more than was produced.
    Broken,
}

impl CqCore {
    /// Queues `cqe` and raises a completion event if the CQ is armed for
    /// it (`solicited`: the completed message asked for one); while the
    /// CQ is held ([`CqCore::hold`]), the release publishes it and raises
    /// the event. Any context.
    pub(crate) fn push(&self, cqe: &Cqe, solicited: bool) -> core::result::Result<(), CqFull> {
        {
            let mut r = self.ring.lock();
            let consumer = r.ring.consumer();
            let geometry = *r.ring.geometry();
            let used = geometry
                .occupancy(r.producer, consumer)
                .ok_or(CqFull::Broken)?;
            if used >= geometry.slot_count() {
                drop(r);
                // The completion is lost: the owner hears of it once, as
                // an async event (IB_EVENT_CQ_ERR), as with rxe.
                if !self.overflowed.swap(true, Ordering::AcqRel) {
                    self.events.overflow();
                }
                return Err(CqFull::Overflow);
            }
            let at = r.producer;
            r.ring
                .write_slot(at, &cqe.to_bytes())
                .map_err(|_| CqFull::Broken)?;
            r.producer = at.wrapping_add(1);
            if self.holds.load(Ordering::SeqCst) > 0 {
                // Published, and its event raised, when the hold ends.
                r.held += 1;
                r.held_solicited |= solicited;
                self.held_pending.store(true, Ordering::SeqCst);
                drop(r);
                // The hold seen may have ended since, its release finding
                // nothing pending: then the entry is this producer's to
                // publish (see `held_pending`).
                if self.holds.load(Ordering::SeqCst) == 0 {
                    self.publish_held();
                }
                return Ok(());
            }
            r.ring.set_producer(r.producer);
        }
        self.notify(solicited);
        Ok(())
    }

    /// Whether one more entry fits now. XUD's receiver asks before it
    /// commits (and acknowledges) a packet that completes a message, so
    /// that it never acknowledges a message whose completion it could not
    /// write. Another producer sharing the CQ may take the room first.
    /// Any context.
    pub(crate) fn has_room(&self) -> bool {
        let r = self.ring.lock();
        let geometry = *r.ring.geometry();
        geometry
            .occupancy(r.producer, r.ring.consumer())
            .is_some_and(|used| used < geometry.slot_count())
    }

    /// Raises the completion event if the CQ is armed for a completion
    /// (`solicited`: one asked for a solicited event), once per arming.
    fn notify(&self, solicited: bool) {
        let armed = self.armed.load(Ordering::Acquire);
        if armed == ARMED_ANY || (armed == ARMED_SOLICITED && solicited) {
            // One event per arming, however many completions race here.
            if self.armed.swap(DISARMED, Ordering::AcqRel) != DISARMED {
                self.events.notify();
            }
        }
    }

    /// Holds the entries written from now on back from the owner until
    /// [`CqCore::release`]: they go into the ring (a kernel consumer's
    /// `poll_cq` takes them at once), but the producer index a process
    /// polls is stored, and the completion event raised, once for all of
    /// them at the next release. A QP holds its CQs while it holds its
    /// transport's lock (`qp::HeldCqs`), so that no completion handler is
    /// called under that lock (a kernel consumer's handler may poll and
    /// post to the QP), and the receive path holds them for a GRO train's
    /// run of datagrams to one QP, so that a run that completes several
    /// messages publishes them together. Entries other producers write
    /// meanwhile wait for that release too (or for the release of another
    /// holder, whichever comes first), so no entry waits longer than one
    /// hold. Any context.
    pub(crate) fn hold(&self) {
        self.holds.fetch_add(1, Ordering::SeqCst);
    }

    /// Ends a [`CqCore::hold`]: publishes what is held, whoever wrote it
    /// (other holds may remain: publishing early is harmless), and raises
    /// the event it owes, calling the owner's completion handler: the
    /// caller holds no lock a handler could need. The number of entries
    /// it published.
    pub(crate) fn release(&self) -> u32 {
        // A release without its hold leaves the count at 0 rather than
        // wrapping it (which would hold the CQ for good).
        let _ = self
            .holds
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |h| h.checked_sub(1));
        if !self.held_pending.load(Ordering::SeqCst) {
            return 0;
        }
        self.publish_held()
    }

    /// Publishes the held entries and raises the event they owe; how
    /// many there were.
    fn publish_held(&self) -> u32 {
        let (n, solicited) = {
            let mut r = self.ring.lock();
            self.held_pending.store(false, Ordering::SeqCst);
            if r.held == 0 {
                return 0;
            }
            r.ring.set_producer(r.producer);
            let n = core::mem::replace(&mut r.held, 0);
            (n, core::mem::replace(&mut r.held_solicited, false))
        };
        self.notify(solicited);
        n
    }

    /// A completion was lost to an overflow: the CQ is in error, and so is
    /// every QP that completes into it (IBTA 11.4.2.1), each from its next
    /// step on. The CQ itself still takes the flushes that follow (a drain
    /// waits for them). Any context.
    pub(crate) fn overflowed(&self) -> bool {
        self.overflowed.load(Ordering::Acquire)
    }

    /// Takes the oldest entry, for a kernel consumer (`ib_poll_cq`; a
    /// user process consumes its mapping itself). `None` if there is
    /// none. Any context but hard irq.
    pub(crate) fn pop(&self) -> Option<Cqe> {
        let r = self.ring.lock();
        let consumer = r.ring.consumer();
        match r.ring.geometry().occupancy(r.producer, consumer) {
            Some(n) if n > 0 => {}
            _ => return None,
        }
        let mut b = [0u8; 64];
        r.ring.read_slot(consumer, &mut b).ok()?;
        r.ring.set_consumer(consumer.wrapping_add(1));
        Some(Cqe::from_bytes(&b))
    }

    /// Whether the CQ holds unconsumed entries (a snapshot: the owner may
    /// consume concurrently; it only advises a re-poll).
    fn has_entries(&self) -> bool {
        let r = self.ring.lock();
        r.ring.consumer() != r.producer
    }
}
