// SPDX-License-Identifier: GPL-2.0

//! A queue's ring: shared memory laid out as rust/abi describes
//! (`RingControl`, then slots), with the geometry that indexes it; the
//! largest slots rxud grants; and the doorbell protocol of a send queue
//! ([`WorkQueue::settle_sender`]).

use super::device::{MAX_INLINE_DATA, MAX_SGE};
use crate::abi::{
    recv_wqe_slot_size, send_wqe_slot_size, RingControl, RingGeometry, RingInfo, RING_SLOTS_OFFSET,
};
use crate::ib::{SharedMem, UContext, Unmapping};
use crate::kext::sync::{new_spinlock_irq, SpinLockIrq};
use core::mem::offset_of;
use kernel::prelude::*;

/// Bytes of the largest send slot rxud grants (`MAX_SGE` elements or
/// `MAX_INLINE_DATA` bytes): a buffer this size holds any send WQE.
pub(crate) const MAX_SEND_SLOT: usize = send_wqe_slot_size(MAX_SGE, MAX_INLINE_DATA) as usize;
/// Bytes of the largest receive slot rxud grants (`MAX_SGE` elements).
pub(crate) const MAX_RECV_SLOT: usize = recv_wqe_slot_size(MAX_SGE) as usize;

pub(crate) struct Ring {
    mem: SharedMem,
    geometry: RingGeometry,
}

const PRODUCER: usize = offset_of!(RingControl, producer);
const CONSUMER: usize = offset_of!(RingControl, consumer);
const CONSUMER_FLAGS: usize = offset_of!(RingControl, consumer_flags);

impl Ring {
    /// A ring with room for at least `entries` (at most `max`) slots of
    /// `slot_size` bytes; `EINVAL` for counts out of range. Mappable by
    /// `ucontext` if given.
    pub(crate) fn new(
        ucontext: Option<UContext<'_>>,
        entries: u32,
        max: u32,
        slot_size: u32,
    ) -> Result<Self> {
        let geometry = RingGeometry::new(entries, max, slot_size, RING_SLOTS_OFFSET as u32)
            .map_err(|_| EINVAL)?;
        let mem = SharedMem::new(ucontext, geometry.bytes())?;
        Ok(Self { mem, geometry })
    }

    pub(crate) fn geometry(&self) -> &RingGeometry {
        &self.geometry
    }

    /// Takes the ring out of the process's reach for new mappings (see
    /// [`SharedMem::unmap`]): the destroy of the QP, CQ or SRQ it belongs
    /// to calls this, since the kernel may hold the ring past the user
    /// context. The entry goes when the result is dropped (process
    /// context, no spinlock held).
    pub(crate) fn unmap(&self) -> Unmapping {
        self.mem.unmap()
    }

    /// How user space finds the ring (all zero for a kernel-only ring).
    pub(crate) fn info(&self) -> RingInfo {
        match self.mem.mmap_offset() {
            Some(offset) => RingInfo {
                mmap_offset: offset,
                mmap_size: self.mem.len() as u64,
                slot_count: self.geometry.slot_count(),
                slot_size: self.geometry.slot_size(),
            },
            None => RingInfo::default(),
        }
    }

    pub(crate) fn producer(&self) -> u32 {
        self.mem.load_acquire::<PRODUCER>()
    }

    pub(crate) fn consumer(&self) -> u32 {
        self.mem.load_acquire::<CONSUMER>()
    }

    pub(crate) fn set_producer(&self, index: u32) {
        self.mem.store_release::<PRODUCER>(index)
    }

    pub(crate) fn set_consumer(&self, index: u32) {
        self.mem.store_release::<CONSUMER>(index)
    }

    /// Says whether the kernel's sender is draining this (send) ring
    /// ([`crate::abi::ring_flags::SENDER_ACTIVE`]).
    pub(crate) fn set_sender_active(&self, active: bool) {
        let flags = if active {
            crate::abi::ring_flags::SENDER_ACTIVE
        } else {
            0
        };
        self.mem.store_release::<CONSUMER_FLAGS>(flags)
    }

    /// Copies the slot `index` refers to into `out` (at most a slot).
    pub(crate) fn read_slot(&self, index: u32, out: &mut [u8]) -> Result {
        let n = out.len().min(self.geometry.slot_size() as usize);
        self.mem
            .read(self.geometry.slot_offset(index), &mut out[..n])
    }

    /// Copies `data` (at most a slot) into the slot `index` refers to.
    pub(crate) fn write_slot(&self, index: u32, data: &[u8]) -> Result {
        let n = data.len().min(self.geometry.slot_size() as usize);
        self.mem.write(self.geometry.slot_offset(index), &data[..n])
    }
}

/// A ring of work requests the kernel consumes (SQ, RQ, SRQ), produced
/// by a user process through its mapping or, for kernel consumers, by
/// [`WorkQueue::push`]. The kernel's consumer index lives here; the ring's
/// copy is only published for the producer, so a process cannot rewind
/// the kernel.
#[pin_data]
pub(crate) struct WorkQueue {
    ring: Ring,
    /// Next index to consume. Receives consume in softirq, flushes and
    /// sends in process context: interrupt-safe.
    #[pin]
    consumer: SpinLockIrq<u32>,
    /// Next index to produce at, for kernel consumers' posts (which may
    /// come from any context, several at once). Unused for user rings.
    #[pin]
    producer: SpinLockIrq<u32>,
}

impl WorkQueue {
    pub(crate) fn new(ring: Ring) -> impl PinInit<Self> {
        pin_init!(Self {
            ring,
            consumer <- new_spinlock_irq!(0, "rxud:wq_consumer"),
            producer <- new_spinlock_irq!(0, "rxud:wq_producer"),
        })
    }

    /// Appends `entry` (at most a slot) for a kernel consumer; `ENOMEM`
    /// if the queue is full, as ib_post_send/recv report it. Any context.
    pub(crate) fn push(&self, entry: &[u8]) -> Result {
        let mut producer = self.producer.lock();
        let consumer = self.ring.consumer();
        let geometry = self.ring.geometry();
        match geometry.occupancy(*producer, consumer) {
            Some(n) if n < geometry.slot_count() => {}
            _ => return Err(ENOMEM),
        }
        self.ring.write_slot(*producer, entry)?;
        *producer = producer.wrapping_add(1);
        // Publishes the slot with it (release).
        self.ring.set_producer(*producer);
        Ok(())
    }

    /// Copies the oldest entry into `out` without taking it; `Ok(false)`
    /// if the queue is empty, `EIO` if it is broken. Any context.
    pub(crate) fn peek(&self, out: &mut [u8]) -> Result<bool> {
        let consumer = self.consumer.lock();
        match self
            .ring
            .geometry()
            .occupancy(self.ring.producer(), *consumer)
        {
            None => Err(EIO),
            Some(0) => Ok(false),
            Some(_) => {
                self.ring.read_slot(*consumer, out)?;
                Ok(true)
            }
        }
    }

    pub(crate) fn ring(&self) -> &Ring {
        &self.ring
    }

    /// Takes the oldest entry: copies its slot into `out` (at most a slot)
    /// and publishes the new consumer index. `Ok(false)` if the queue is
    /// empty; `EIO` if the producer index claims more entries than the
    /// ring holds (a broken queue). Any context.
    pub(crate) fn pop(&self, out: &mut [u8]) -> Result<bool> {
        let mut consumer = self.consumer.lock();
        let producer = self.ring.producer();
        match self.ring.geometry().occupancy(producer, *consumer) {
            None => Err(EIO),
            Some(0) => Ok(false),
            Some(_) => {
                self.ring.read_slot(*consumer, out)?;
                *consumer = consumer.wrapping_add(1);
                self.ring.set_consumer(*consumer);
                Ok(true)
            }
        }
    }

    /// A resize: moves the entries waiting in `old` (at most receive
    /// WQEs' slots) into this queue, fresh and empty, the oldest at slot
    /// 0, and returns how many. Under `old`'s consumer and producer locks,
    /// so no pop and no kernel post of `old` runs meanwhile; the caller
    /// keeps every other user off `old` (the SRQ's lock) and its user
    /// producer still (librxud's post lock). `EINVAL` if they do not fit
    /// or this queue is not fresh, `EIO` if `old`'s indices are broken.
    /// Any context.
    pub(crate) fn take_over(&self, old: &WorkQueue) -> Result<u32> {
        // This queue is fresh and no one else's yet: its locks are taken
        // after `old`'s are released (both are of one lockdep class).
        let pending = {
            let old_consumer = old.consumer.lock();
            let _old_producer = old.producer.lock();
            let pending = old
                .ring
                .geometry()
                .occupancy(old.ring.producer(), *old_consumer)
                .ok_or(EIO)?;
            if pending > self.ring.geometry().slot_count() || self.ring.producer() != 0 {
                return Err(EINVAL);
            }
            let mut slot = [0u8; MAX_RECV_SLOT];
            let n = (old.ring.geometry().slot_size() as usize).min(slot.len());
            for i in 0..pending {
                old.ring
                    .read_slot(old_consumer.wrapping_add(i), &mut slot[..n])?;
                self.ring.write_slot(i, &slot[..n])?;
            }
            pending
        };
        let mut consumer = self.consumer.lock();
        let mut producer = self.producer.lock();
        if *consumer != 0 || *producer != 0 {
            return Err(EINVAL);
        }
        *consumer = 0;
        *producer = pending;
        // Publishes the slots with it (release).
        self.ring.set_producer(pending);
        Ok(pending)
    }

    /// Entries waiting (0 for a broken queue). Any context.
    pub(crate) fn len(&self) -> u32 {
        let consumer = *self.consumer.lock();
        self.ring
            .geometry()
            .occupancy(self.ring.producer(), consumer)
            .unwrap_or(0)
    }

    /// Whether entries are waiting (none in a broken queue, as for
    /// [`Self::len`]: a producer index that claims more than the ring
    /// holds is no work, or a sender that looks again while entries are
    /// waiting would look for ever: tests/verbs/ring-storm hung the UD
    /// sender so). Any context.
    pub(crate) fn has_entries(&self) -> bool {
        let consumer = *self.consumer.lock();
        self.ring
            .geometry()
            .occupancy(self.ring.producer(), consumer)
            .is_some_and(|n| n > 0)
    }

    /// The doorbell protocol, sender's half: publishes whether the sender
    /// of this send queue still holds work (`busy`) as the ring's
    /// `SENDER_ACTIVE` flag, and, when it does not, says whether a WQE was
    /// posted while the flag was still up: then no doorbell announces it
    /// and the caller must take it. Any context.
    ///
    /// While the flag is up a poster (librxud, or `post.rs`) only
    /// publishes its WQE: the sender will come back (an answer, its timer
    /// or its own loop) and see it. The poster publishes the producer
    /// index, fences, then reads the flag; here the flag is cleared, then
    /// a full fence, then the producer index is read. Without the fences
    /// either side could read the other's old value (store-load
    /// reordering, which x86 allows too): the poster sees the flag up, the
    /// sender sees no WQE, and the WQE waits for the next doorbell,
    /// possibly for ever. With them, one of the two sees the other.
    pub(crate) fn settle_sender(&self, busy: bool) -> bool {
        self.ring.set_sender_active(busy);
        if busy {
            return false;
        }
        core::sync::atomic::fence(core::sync::atomic::Ordering::SeqCst);
        self.has_entries()
    }
}
