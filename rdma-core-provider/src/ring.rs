// SPDX-License-Identifier: GPL-2.0 OR Linux-OpenIB

//! Shared rings (see `rxud_abi::RingControl`): the CQ consumer
//! (`poll_cq`) and the producer of send, receive and SRQ rings
//! ([`Producer`]). Geometry, its checks and index arithmetic are the ABI's
//! (`rxud_abi::RingGeometry`, shared with the kernel), as are slot sizes
//! (`rxud_abi::send_wqe_slot_size` and the like). The only unsafe code is
//! [`Ring::new`], whose contract makes the ring's memory valid, and the
//! accesses that rely on it (atomic indices and flags, slot reads and
//! writes); the rest is safe and works on any memory laid out as a ring, so
//! the host tests run it over ordinary memory.
//!
//! A ring whose producer claims more entries than it has slots (or fewer
//! than none: producer behind consumer) is *broken*: polling consumes
//! nothing and reports [`Overrun`], every time, as the kernel does for the
//! rings user space produces. `ibv_poll_cq` then returns a negative value.
//! Nothing is delivered from a broken ring, because nothing in it can be
//! trusted to be a completion. Likewise a producer finds a ring broken when
//! the consumer index is ahead of the published producer index or more than
//! a ring's worth behind it; it then queues nothing.
//!
//! Producing: [`Producer`] writes entries into the free slots from the
//! producer index on, re-reading the consumer index (acquire) only when the
//! ring looks full, and publishes all of them with one release store of the
//! producer index ([`Producer::publish`]). [`Ring::consumer_active`] then
//! tells whether the consumer announced that it is draining the ring
//! (`rxud_abi::ring_flags::SENDER_ACTIVE`), with the full fence the
//! protocol needs between publishing and reading the flag.

use crate::sys::ibv_wc;
use core::marker::PhantomData;
use core::mem::{offset_of, size_of, MaybeUninit};
use core::ptr::NonNull;
use core::sync::atomic::{fence, AtomicU32, Ordering};
use rxud_abi::{ring_flags, Cqe, RecvWqe, RingControl, RingGeometry, SendWqe, Sge};

/// A ring whose indices claim an impossible number of entries.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Overrun {
    pub producer: u32,
    pub consumer: u32,
}

/// One ring's memory, shared with the kernel, for the lifetime `'a` of its
/// mapping.
pub(crate) struct Ring<'a> {
    base: NonNull<u8>,
    geo: RingGeometry,
    _mem: PhantomData<&'a [u8]>,
}

impl<'a> Ring<'a> {
    /// # Safety
    ///
    /// `geo` is from `RingGeometry::from_info`, so its slots start at
    /// `RING_SLOTS_OFFSET`, after the `RingControl`. `base` points to
    /// `geo.bytes()` bytes that stay mapped, readable and writable for
    /// `'a`. Whoever else uses them (the kernel, or a test playing it)
    /// follows the ring protocol: it accesses the indices and flags only
    /// atomically; on a ring this side consumes, it writes no slot between
    /// the consumer and producer indices, which is this side's to read; on
    /// a ring this side produces, it writes no slot at all (it copies
    /// published entries out).
    ///
    /// # Panics
    ///
    /// If `base` is not aligned to 64 bytes (mappings are page aligned).
    pub(crate) unsafe fn new(base: NonNull<u8>, geo: RingGeometry) -> Self {
        assert!(
            (base.as_ptr() as usize).is_multiple_of(64),
            "ring memory must be 64-byte aligned"
        );
        Self {
            base,
            geo,
            _mem: PhantomData,
        }
    }

    pub(crate) fn geometry(&self) -> &RingGeometry {
        &self.geo
    }

    fn index(&self, offset: usize) -> &AtomicU32 {
        // SAFETY: `offset` is that of an index in `RingControl`, which per
        // `new` lies inside the ring's `bytes()`, before the slots; the base
        // is 64-byte aligned and so the index 4-byte aligned; per `new`,
        // everyone accesses the indices atomically while the mapping lives.
        unsafe { AtomicU32::from_ptr(self.base.as_ptr().add(offset).cast()) }
    }

    /// The index the producer advances after writing slots.
    pub(crate) fn producer(&self) -> &AtomicU32 {
        self.index(offset_of!(RingControl, producer))
    }

    /// The index the consumer advances after reading slots.
    pub(crate) fn consumer(&self) -> &AtomicU32 {
        self.index(offset_of!(RingControl, consumer))
    }

    /// The consumer's flags (`rxud_abi::ring_flags`), next to its index.
    pub(crate) fn consumer_flags(&self) -> &AtomicU32 {
        self.index(offset_of!(RingControl, consumer_flags))
    }

    /// Whether the consumer (the kernel's sender) says it is draining the
    /// ring, and so will see entries published before this call without a
    /// doorbell. Call it after publishing: the full fence orders the
    /// producer index store before the flag load, pairing with the
    /// consumer's fence between clearing the flag and re-reading the
    /// producer index; so either the consumer sees the new entries or this
    /// returns `false` and the caller rings the doorbell.
    pub(crate) fn consumer_active(&self) -> bool {
        fence(Ordering::SeqCst);
        self.consumer_flags().load(Ordering::Relaxed) & ring_flags::SENDER_ACTIVE != 0
    }

    /// Copies `bytes` into the slot `index` names, `at` bytes into it, or
    /// writes nothing if they would not fit in the slot.
    fn write_slot(&self, index: u32, at: usize, bytes: &[u8]) -> Result<(), SlotOverflow> {
        let end = at
            .checked_add(bytes.len())
            .filter(|&end| end <= self.geo.slot_size() as usize)
            .ok_or(SlotOverflow)?;
        let offset = self.geo.slot_offset(index);
        // Holds by the geometry's invariants; checked so that no geometry
        // lets a write leave the ring.
        if offset.checked_add(end).is_none_or(|e| e > self.geo.bytes()) {
            return Err(SlotOverflow);
        }
        // SAFETY: `offset + at .. offset + end` lies inside the ring's
        // memory (checked above), writable per `new`. The producer writes
        // only unpublished slots, which per `new` the other side does not
        // write, and does not read before they are published. `ptr::copy`
        // allows `bytes` to overlap the ring (an application may point an
        // inline SGE anywhere).
        unsafe {
            core::ptr::copy(
                bytes.as_ptr(),
                self.base.as_ptr().add(offset + at),
                bytes.len(),
            )
        };
        Ok(())
    }

    /// Copies the CQE in the slot that `index` names.
    ///
    /// # Panics
    ///
    /// If a CQE there would extend past the ring (a ring made for smaller
    /// slots): never for a ring checked with `rxud_abi::CQ_SLOT_SIZE`.
    fn read_cqe(&self, index: u32) -> Cqe {
        let offset = self.geo.slot_offset(index);
        assert!(
            offset + size_of::<Cqe>() <= self.geo.bytes(),
            "CQE outside the ring"
        );
        // SAFETY: inside the ring's memory (checked above); aligned, since
        // the base is 64-byte aligned, slots start at `RING_SLOTS_OFFSET`, a
        // multiple of 64, and slot sizes are multiples of 16; any bytes are
        // a valid `Cqe` (integers only). The caller reads only published
        // slots, which per `new` the other side does not write concurrently.
        unsafe { self.base.as_ptr().add(offset).cast::<Cqe>().read() }
    }

    /// Writes `cqe` into the slot that `index` names, on a CQ ring this
    /// side consumes: only for a slot between the consumer and producer
    /// indices (published, not yet consumed), which the kernel does not
    /// touch until the consumer index passes it.
    ///
    /// # Panics
    ///
    /// As [`Ring::read_cqe`].
    fn write_cqe(&self, index: u32, cqe: &Cqe) {
        let offset = self.geo.slot_offset(index);
        assert!(
            offset + size_of::<Cqe>() <= self.geo.bytes(),
            "CQE outside the ring"
        );
        // SAFETY: inside the ring's memory (checked above), aligned as in
        // `read_cqe`, writable per `new`; the caller writes only slots
        // between the consumer and producer indices, which per `new` the
        // other side does not write and no longer reads.
        unsafe { self.base.as_ptr().add(offset).cast::<Cqe>().write(*cqe) };
    }
}

/// Something memory of a ring's shape can be borrowed as a [`Ring`] from:
/// a mapping ([`crate::mmap::MappedRing`]), or ordinary memory in tests.
pub(crate) trait RingMemory {
    fn ring(&self) -> Ring<'_>;
}

/// A write that would not fit in its slot (or the ring).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct SlotOverflow;

/// Why [`Producer::reserve`] found no slot.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum ProduceError {
    /// Every slot holds an entry the consumer has not taken yet.
    Full,
    /// The consumer index is ahead of the published producer index, or
    /// more than a ring's worth behind it.
    Broken(Overrun),
}

/// Work-queue entry parts a slot is written with: their bytes are their
/// ABI encoding.
///
/// # Safety
///
/// The type is `repr(C)` and has no padding, so every byte of a value is
/// initialised.
pub(crate) unsafe trait Plain: Copy {
    fn as_bytes(&self) -> &[u8] {
        // SAFETY: per the trait's contract every byte of `*self` is
        // initialised; the slice covers exactly `*self`, borrowed with it.
        unsafe {
            core::slice::from_raw_parts((self as *const Self).cast::<u8>(), size_of::<Self>())
        }
    }
}

// SAFETY: `repr(C)`; `u64`, six `u32`s and `[u8; 32]`: no padding, as the
// size shows.
unsafe impl Plain for SendWqe {}
const _: () = assert!(size_of::<SendWqe>() == 8 + 6 * 4 + 32);
// SAFETY: `repr(C)`; `u64` and two `u32`s: no padding.
unsafe impl Plain for RecvWqe {}
const _: () = assert!(size_of::<RecvWqe>() == 8 + 2 * 4);
// SAFETY: `repr(C)`; `u64` and two `u32`s: no padding.
unsafe impl Plain for Sge {}
const _: () = assert!(size_of::<Sge>() == 8 + 2 * 4);

/// The producer side of a ring (SQ, RQ, SRQ) for one batch of entries:
/// [`reserve`](Self::reserve) a slot, write it, [`commit`](Slot::commit)
/// it; [`publish`](Self::publish) makes every committed entry visible to
/// the consumer at once. Nothing reaches the producer index before
/// `publish`, so an abandoned batch (or slot) publishes nothing.
///
/// One producer at a time per ring: `Ring` is neither `Send` nor `Sync`,
/// and threads reach a queue's ring only through its lock.
pub(crate) struct Producer<'r, 'a> {
    ring: &'r Ring<'a>,
    /// The producer index as published when the batch began.
    published: u32,
    /// The index of the next slot to fill.
    next: u32,
    /// The consumer index as last read.
    consumer: u32,
}

impl<'r, 'a> Producer<'r, 'a> {
    pub(crate) fn new(ring: &'r Ring<'a>) -> Self {
        // This side is the only writer of `producer`: relaxed reads back
        // the last value stored (by this thread, or by another one before
        // it released the queue's lock).
        let published = ring.producer().load(Ordering::Relaxed);
        // Acquire: the consumer copied the slots out before releasing them.
        let consumer = ring.consumer().load(Ordering::Acquire);
        Self {
            ring,
            published,
            next: published,
            consumer,
        }
    }

    /// Entries committed in this batch, not yet published.
    pub(crate) fn pending(&self) -> u32 {
        self.next.wrapping_sub(self.published)
    }

    /// Free slots by the consumer index last read.
    fn free(&self) -> Result<u32, ProduceError> {
        let broken = ProduceError::Broken(Overrun {
            producer: self.published,
            consumer: self.consumer,
        });
        let geo = self.ring.geometry();
        let queued = geo.occupancy(self.published, self.consumer).ok_or(broken)?;
        // The consumer moving backwards can make this underflow: broken too.
        geo.slot_count()
            .checked_sub(queued)
            .and_then(|free| free.checked_sub(self.pending()))
            .ok_or(broken)
    }

    /// The next free slot. When the ring looks full the consumer index is
    /// read again, as the consumer may have moved on.
    pub(crate) fn reserve(&mut self) -> Result<Slot<'_, 'r, 'a>, ProduceError> {
        if self.free()? == 0 {
            self.consumer = self.ring.consumer().load(Ordering::Acquire);
            if self.free()? == 0 {
                return Err(ProduceError::Full);
            }
        }
        Ok(Slot { producer: self })
    }

    /// Publishes the committed entries with one release store of the
    /// producer index (none if there are none) and returns how many.
    pub(crate) fn publish(self) -> u32 {
        let n = self.pending();
        if n > 0 {
            // Release: the slots are written before the consumer sees them.
            self.ring.producer().store(self.next, Ordering::Release);
        }
        n
    }
}

/// A free slot [`Producer::reserve`] handed out: written in place, it
/// becomes an entry once [`commit`](Self::commit)ted (and published).
pub(crate) struct Slot<'p, 'r, 'a> {
    producer: &'p mut Producer<'r, 'a>,
}

impl Slot<'_, '_, '_> {
    /// Copies `bytes` into the slot, `at` bytes into it.
    pub(crate) fn write(&mut self, at: usize, bytes: &[u8]) -> Result<(), SlotOverflow> {
        self.producer.ring.write_slot(self.producer.next, at, bytes)
    }

    /// Writes `value`'s encoding into the slot, `at` bytes into it.
    pub(crate) fn put<T: Plain>(&mut self, at: usize, value: &T) -> Result<(), SlotOverflow> {
        self.write(at, value.as_bytes())
    }

    /// Makes the slot part of the batch.
    pub(crate) fn commit(self) {
        self.producer.next = self.producer.next.wrapping_add(1);
    }
}

/// The work completion libibverbs reports for `cqe`. `ibv_wc` has no room
/// for the CQE's RoCE fields (`network_hdr_type`, `smac`, `vlan_id`); the
/// extended CQ reads the same `ibv_wc` (it offers no `read_cvlan`, as rxe).
pub(crate) fn cqe_to_wc(cqe: &Cqe) -> ibv_wc {
    ibv_wc {
        wr_id: cqe.wr_id,
        status: cqe.status,
        opcode: cqe.opcode,
        vendor_err: cqe.vendor_err,
        byte_len: cqe.byte_len,
        imm_data: cqe.imm_data,
        qp_num: cqe.qp_num,
        src_qp: cqe.src_qp,
        wc_flags: cqe.wc_flags,
        pkey_index: cqe.pkey_index,
        slid: cqe.slid,
        sl: cqe.sl,
        dlid_path_bits: cqe.dlid_path_bits,
    }
}

/// Consumes up to `out.len()` CQEs from a CQ ring into `out`, oldest
/// first, and returns how many. One consumer at a time: `Ring` is neither
/// `Send` nor `Sync`, and `MappedRing` not `Sync`, so threads reach a ring
/// only through its owner's lock (the CQ's).
/// The consumer index of a CQ ring this side consumes and how many
/// completions the kernel has published past it.
fn published(ring: &Ring<'_>) -> Result<(u32, u32), Overrun> {
    // This side is the only writer of `consumer`: relaxed reads back the
    // last value stored (by this thread, or by another one before it
    // released the CQ lock).
    let consumer = ring.consumer().load(Ordering::Relaxed);
    // Acquire: the slots up to `producer` were written before it.
    let producer = ring.producer().load(Ordering::Acquire);
    let ready = ring
        .geometry()
        .occupancy(producer, consumer)
        .ok_or(Overrun { producer, consumer })?;
    Ok((consumer, ready))
}

pub(crate) fn poll_cq(ring: &Ring<'_>, out: &mut [MaybeUninit<ibv_wc>]) -> Result<usize, Overrun> {
    let (consumer, ready) = published(ring)?;
    let n = out.len().min(ready as usize);
    for (i, wc) in (0u32..).zip(&mut out[..n]) {
        wc.write(cqe_to_wc(&ring.read_cqe(consumer.wrapping_add(i))));
    }
    if n > 0 {
        // Release: the slots are read before the producer may reuse them.
        // `n <= ready`, a `u32`.
        ring.consumer()
            .store(consumer.wrapping_add(n as u32), Ordering::Release);
    }
    Ok(n)
}

/// Removes from a CQ ring the completions of QP `qp_num` that have not been
/// polled yet, keeping the others in order, and returns how many went.
/// For a QP moved to RESET: its completions (flushes, most often) would
/// otherwise reach the application after it has restarted the QP, as if
/// they were the new connection's. Hardware providers do the same (mlx4,
/// mlx5: "cq_clean"). One consumer at a time, as [`poll_cq`]; the kernel
/// may go on producing other QPs' completions meanwhile: only the slots
/// published when this starts are touched.
///
/// From the newest to the oldest, each kept completion moves up by the
/// number removed before it (newer ones), so the kept ones end contiguous
/// at the producer's end; then the consumer index skips the freed slots.
pub(crate) fn clean_cq(ring: &Ring<'_>, qp_num: u32) -> Result<u32, Overrun> {
    let (consumer, ready) = published(ring)?;
    let mut removed = 0u32;
    for back in 1..=ready {
        let at = consumer.wrapping_add(ready - back);
        let cqe = ring.read_cqe(at);
        if cqe.qp_num == qp_num {
            removed += 1;
        } else if removed > 0 {
            ring.write_cqe(at.wrapping_add(removed), &cqe);
        }
    }
    if removed > 0 {
        // Release: the moved entries are written before the slots they
        // left are the kernel's again.
        ring.consumer()
            .store(consumer.wrapping_add(removed), Ordering::Release);
    }
    Ok(removed)
}

/// Rings over ordinary memory, with the kernel's side played by the test.
#[cfg(test)]
pub(crate) mod testing {
    use super::*;
    use rxud_abi::{RingInfo, RING_SLOTS_OFFSET};

    /// Ring memory in ordinary, suitably aligned heap memory.
    #[repr(C, align(64))]
    #[derive(Clone, Copy)]
    struct Line([u8; 64]);

    /// A ring in heap memory, with helpers that play the kernel's side.
    pub(crate) struct TestRing {
        mem: Vec<Line>,
        pub(crate) geo: RingGeometry,
        /// The one pointer all accesses derive from.
        pub(crate) base: NonNull<u8>,
    }

    // SAFETY: the memory `base` points to is owned by `mem`, which moves
    // with the `TestRing`; nothing else refers to it.
    unsafe impl Send for TestRing {}

    /// What the kernel describes for a ring of `slot_count` slots of
    /// `slot_size` bytes: whole pages.
    pub(crate) fn info(slot_count: u32, slot_size: u32) -> RingInfo {
        let len = RING_SLOTS_OFFSET as u64 + u64::from(slot_count) * u64::from(slot_size);
        RingInfo {
            mmap_offset: 0,
            mmap_size: len.next_multiple_of(4096),
            slot_count,
            slot_size,
        }
    }

    impl TestRing {
        pub(crate) fn new(slot_count: u32, slot_size: u32) -> Self {
            let info = info(slot_count, slot_size);
            let geo = RingGeometry::from_info(&info, slot_count, slot_size).unwrap();
            // The whole mapping the kernel describes, as `map_ring` maps it.
            let mut mem = vec![Line([0xa5; 64]); info.mmap_size as usize / 64];
            let base = NonNull::new(mem.as_mut_ptr().cast::<u8>()).unwrap();
            let ring = Self { mem, geo, base };
            ring.set_indices(0, 0);
            ring.set_flags(0);
            ring
        }

        pub(crate) fn ring(&self) -> Ring<'_> {
            assert!(self.mem.len() * 64 >= self.geo.bytes());
            // SAFETY: `geo` is from `from_info`; `mem` covers its bytes and
            // lives as long as the borrow; the test's other side follows
            // the ring protocol.
            unsafe { Ring::new(self.base, self.geo) }
        }

        pub(crate) fn set_indices(&self, producer: u32, consumer: u32) {
            let ring = self.ring();
            ring.producer().store(producer, Ordering::Relaxed);
            ring.consumer().store(consumer, Ordering::Relaxed);
        }

        pub(crate) fn set_flags(&self, flags: u32) {
            self.ring().consumer_flags().store(flags, Ordering::Relaxed);
        }

        pub(crate) fn producer(&self) -> u32 {
            self.ring().producer().load(Ordering::Relaxed)
        }

        pub(crate) fn consumer(&self) -> u32 {
            self.ring().consumer().load(Ordering::Relaxed)
        }

        /// The kernel's side of a CQ: writes CQEs at the producer index,
        /// computing slot addresses independently of `RingGeometry`, then
        /// publishes them.
        pub(crate) fn produce(&self, cqes: &[Cqe]) {
            let ring = self.ring();
            let mut producer = ring.producer().load(Ordering::Relaxed);
            for cqe in cqes {
                let offset = self.slot_offset(producer);
                // SAFETY: in bounds and aligned; the slot is not published,
                // so the consumer does not read it.
                unsafe { self.base.as_ptr().add(offset).cast::<Cqe>().write(*cqe) };
                producer = producer.wrapping_add(1);
            }
            ring.producer().store(producer, Ordering::Release);
        }

        pub(crate) fn poll(&self, max: usize) -> Result<Vec<ibv_wc>, Overrun> {
            let mut out = vec![MaybeUninit::uninit(); max];
            let n = poll_cq(&self.ring(), &mut out)?;
            let wcs = out[..n].iter();
            // SAFETY: `poll_cq` initialised the first `n`.
            Ok(wcs.map(|wc| unsafe { wc.assume_init() }).collect())
        }

        /// Where the slot of `index` starts, computed independently of
        /// `RingGeometry`.
        fn slot_offset(&self, index: u32) -> usize {
            let slot = (index % self.geo.slot_count()) as usize;
            RING_SLOTS_OFFSET + slot * self.geo.slot_size() as usize
        }

        /// A copy of the slot of `index`.
        pub(crate) fn slot(&self, index: u32) -> Vec<u8> {
            self.kernel().slot(index)
        }

        /// The kernel's side of a work queue: copies out up to `max`
        /// published entries and releases their slots.
        pub(crate) fn consume(&self, max: u32) -> Vec<Vec<u8>> {
            self.kernel().consume(max)
        }

        /// A handle for a thread playing the kernel.
        pub(crate) fn kernel(&self) -> Kernel {
            Kernel {
                base: self.base,
                geo: self.geo,
            }
        }
    }

    /// The kernel's view of a `TestRing`, usable from another thread while
    /// the ring lives.
    #[derive(Clone, Copy)]
    pub(crate) struct Kernel {
        base: NonNull<u8>,
        geo: RingGeometry,
    }

    // SAFETY: only atomic index accesses and reads of published slots,
    // which the producer does not write (the ring protocol).
    unsafe impl Send for Kernel {}

    impl Kernel {
        fn index(&self, offset: usize) -> &AtomicU32 {
            // SAFETY: as `Ring::index`; the memory outlives the handle (the
            // tests keep the `TestRing` alive while they use it).
            unsafe { AtomicU32::from_ptr(self.base.as_ptr().add(offset).cast()) }
        }

        pub(crate) fn producer(&self) -> &AtomicU32 {
            self.index(core::mem::offset_of!(RingControl, producer))
        }

        pub(crate) fn consumer(&self) -> &AtomicU32 {
            self.index(core::mem::offset_of!(RingControl, consumer))
        }

        pub(crate) fn flags(&self) -> &AtomicU32 {
            self.index(core::mem::offset_of!(RingControl, consumer_flags))
        }

        pub(crate) fn slot(&self, index: u32) -> Vec<u8> {
            let slot = (index % self.geo.slot_count()) as usize;
            let size = self.geo.slot_size() as usize;
            let offset = RING_SLOTS_OFFSET + slot * size;
            let mut out = vec![0; size];
            // SAFETY: in bounds; a published slot (or, between batches, one
            // nobody writes).
            unsafe {
                core::ptr::copy_nonoverlapping(
                    self.base.as_ptr().add(offset),
                    out.as_mut_ptr(),
                    size,
                )
            };
            out
        }

        /// Copies out up to `max` published entries, as the kernel does,
        /// and releases their slots.
        pub(crate) fn consume(&self, max: u32) -> Vec<Vec<u8>> {
            let consumer = self.consumer().load(Ordering::Relaxed);
            let producer = self.producer().load(Ordering::Acquire);
            let ready = self
                .geo
                .occupancy(producer, consumer)
                .expect("producer broke the ring");
            let n = ready.min(max);
            let entries = (0..n)
                .map(|i| self.slot(consumer.wrapping_add(i)))
                .collect();
            self.consumer()
                .store(consumer.wrapping_add(n), Ordering::Release);
            entries
        }
    }

    impl RingMemory for TestRing {
        fn ring(&self) -> Ring<'_> {
            TestRing::ring(self)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::testing::{info, TestRing};
    use super::*;
    use crate::sys::ibv_qp_cap;
    use rxud_abi::{
        recv_wqe_slot_size, send_wqe_slot_size, RingInfo, RingInfoError, RING_SLOTS_OFFSET,
    };

    fn cqe(wr_id: u64) -> Cqe {
        Cqe {
            wr_id,
            qp_num: 7,
            byte_len: wr_id as u32 * 10,
            ..Cqe::default()
        }
    }

    fn cqes(ids: core::ops::Range<u64>) -> Vec<Cqe> {
        ids.map(cqe).collect()
    }

    fn ids(wcs: &[ibv_wc]) -> Vec<u64> {
        wcs.iter().map(|wc| wc.wr_id).collect()
    }

    #[test]
    fn empty_ring_polls_nothing() {
        let r = TestRing::new(8, 64);
        assert_eq!(r.poll(4).unwrap(), vec![]);
        assert_eq!(r.consumer(), 0);
    }

    #[test]
    fn zero_capacity_poll_consumes_nothing() {
        let r = TestRing::new(8, 64);
        r.produce(&cqes(0..3));
        assert_eq!(r.poll(0).unwrap(), vec![]);
        assert_eq!(r.consumer(), 0);
        assert_eq!(ids(&r.poll(8).unwrap()), [0, 1, 2]);
    }

    #[test]
    fn partial_batches_in_order() {
        let r = TestRing::new(8, 64);
        r.produce(&cqes(0..5));
        assert_eq!(ids(&r.poll(3).unwrap()), [0, 1, 2]);
        assert_eq!(r.consumer(), 3);
        r.produce(&cqes(5..7));
        assert_eq!(ids(&r.poll(8).unwrap()), [3, 4, 5, 6]);
        assert_eq!(r.consumer(), 7);
        assert_eq!(r.poll(8).unwrap(), vec![]);
    }

    fn cqe_of(qp_num: u32, wr_id: u64) -> Cqe {
        Cqe {
            wr_id,
            qp_num,
            ..Cqe::default()
        }
    }

    fn ids_qps(wcs: &[ibv_wc]) -> Vec<(u32, u64)> {
        wcs.iter().map(|wc| (wc.qp_num, wc.wr_id)).collect()
    }

    #[test]
    fn cleaning_removes_one_qps_completions_and_keeps_the_order() {
        let r = TestRing::new(8, 64);
        // Across the wrap: 5 consumed first.
        r.set_indices(5, 5);
        let mixed = [(1, 10), (2, 20), (1, 11), (1, 12), (3, 30), (2, 21)];
        r.produce(&mixed.map(|(q, id)| cqe_of(q, id)));
        assert_eq!(clean_cq(&r.ring(), 1), Ok(3));
        assert_eq!((r.producer(), r.consumer()), (11, 8));
        assert_eq!(ids_qps(&r.poll(8).unwrap()), [(2, 20), (3, 30), (2, 21)]);
        // The kernel goes on producing after the kept ones.
        r.produce(&[cqe_of(1, 13), cqe_of(4, 40)]);
        assert_eq!(ids_qps(&r.poll(8).unwrap()), [(1, 13), (4, 40)]);
    }

    #[test]
    fn cleaning_a_qp_without_completions_changes_nothing() {
        let r = TestRing::new(4, 64);
        assert_eq!(clean_cq(&r.ring(), 1), Ok(0), "empty");
        r.produce(&[cqe_of(2, 1), cqe_of(3, 2)]);
        assert_eq!(clean_cq(&r.ring(), 1), Ok(0));
        assert_eq!((r.producer(), r.consumer()), (2, 0));
        r.produce(&[cqe_of(1, 3), cqe_of(1, 4)]);
        assert_eq!(clean_cq(&r.ring(), 1), Ok(2), "the newest only");
        assert_eq!(ids_qps(&r.poll(4).unwrap()), [(2, 1), (3, 2)]);
        r.produce(&[cqe_of(1, 5), cqe_of(1, 6)]);
        assert_eq!(clean_cq(&r.ring(), 1), Ok(2), "all of them");
        assert_eq!(r.producer(), r.consumer());
    }

    #[test]
    fn cleaning_a_broken_ring_touches_nothing() {
        let r = TestRing::new(4, 64);
        r.set_indices(1, 9);
        assert_eq!(
            clean_cq(&r.ring(), 1),
            Err(Overrun {
                producer: 1,
                consumer: 9
            })
        );
        assert_eq!(r.consumer(), 9);
    }

    #[test]
    fn full_ring_is_not_an_overrun() {
        let r = TestRing::new(4, 64);
        r.produce(&cqes(0..4));
        assert_eq!(ids(&r.poll(16).unwrap()), [0, 1, 2, 3]);
    }

    #[test]
    fn indices_wrap_at_2_pow_32() {
        let r = TestRing::new(4, 64);
        let start = u32::MAX - 2;
        r.set_indices(start, start);
        r.produce(&cqes(0..4));
        assert_eq!(ids(&r.poll(3).unwrap()), [0, 1, 2]);
        assert_eq!(r.consumer(), 0);
        r.produce(&cqes(4..7));
        assert_eq!(ids(&r.poll(8).unwrap()), [3, 4, 5, 6]);
        assert_eq!(r.consumer(), 4);
    }

    #[test]
    fn larger_slots_hold_the_cqe_at_their_start() {
        let r = TestRing::new(4, 128);
        r.produce(&cqes(0..6).split_off(2));
        assert_eq!(r.geo.slot_offset(5), RING_SLOTS_OFFSET + 128);
        assert_eq!(ids(&r.poll(8).unwrap()), [2, 3, 4, 5]);
    }

    #[test]
    fn overrun_consumes_nothing_and_persists() {
        let r = TestRing::new(4, 64);
        r.produce(&cqes(0..2));
        r.set_indices(5, 0);
        assert_eq!(
            r.poll(8),
            Err(Overrun {
                producer: 5,
                consumer: 0
            })
        );
        assert_eq!(
            r.poll(8),
            Err(Overrun {
                producer: 5,
                consumer: 0
            })
        );
        assert_eq!(r.consumer(), 0);
        // Producer behind the consumer: as many entries as 2^32 - 1.
        r.set_indices(u32::MAX, 0);
        assert!(r.poll(8).is_err());
        r.set_indices(3, 4);
        assert_eq!(
            r.poll(8),
            Err(Overrun {
                producer: 3,
                consumer: 4
            })
        );
        assert_eq!(r.consumer(), 4);
    }

    #[test]
    fn overrun_across_the_wrap() {
        let r = TestRing::new(4, 64);
        r.set_indices(3, u32::MAX - 1);
        assert_eq!(
            r.poll(8),
            Err(Overrun {
                producer: 3,
                consumer: u32::MAX - 1
            })
        );
        r.set_indices(2, u32::MAX - 1);
        assert_eq!(r.poll(8).unwrap().len(), 4);
    }

    #[test]
    fn cqe_fields_reach_the_wc() {
        let cqe = Cqe {
            wr_id: 0x0123_4567_89ab_cdef,
            status: 12,
            opcode: 129,
            vendor_err: 3,
            byte_len: 4096,
            imm_data: 0x1122_3344,
            qp_num: 0x12_3456,
            src_qp: 0x65_4321,
            wc_flags: 3,
            pkey_index: 2,
            slid: 0xbeef,
            sl: 5,
            dlid_path_bits: 6,
            network_hdr_type: 2,
            reserved0: 0,
            smac: [1, 2, 3, 4, 5, 6],
            vlan_id: 100,
            reserved1: 0,
        };
        let wc = ibv_wc {
            wr_id: 0x0123_4567_89ab_cdef,
            status: 12,
            opcode: 129,
            vendor_err: 3,
            byte_len: 4096,
            imm_data: 0x1122_3344,
            qp_num: 0x12_3456,
            src_qp: 0x65_4321,
            wc_flags: 3,
            pkey_index: 2,
            slid: 0xbeef,
            sl: 5,
            dlid_path_bits: 6,
        };
        assert_eq!(cqe_to_wc(&cqe), wc);
        let r = TestRing::new(2, 64);
        r.produce(&[cqe]);
        assert_eq!(r.poll(1).unwrap(), [wc]);
    }

    /// What `map_ring` accepts, and the reason it logs for what it refuses.
    #[test]
    fn geometry_checks() {
        let check = |info: &RingInfo, entries, entry_size| {
            RingGeometry::from_info(info, entries, entry_size).map_err(|e| e.message())
        };
        let ok = info(8, 64);
        assert_eq!(
            check(&ok, 8, 64).unwrap().bytes(),
            RING_SLOTS_OFFSET + 8 * 64
        );
        assert_eq!(check(&RingInfo::default(), 0, 0), Err("no ring"));
        assert_eq!(
            check(
                &RingInfo {
                    slot_count: 6,
                    ..ok
                },
                1,
                64
            ),
            Err("slot count not a power of two")
        );
        assert_eq!(
            check(
                &RingInfo {
                    slot_count: 0,
                    ..ok
                },
                0,
                64
            ),
            Err("slot count not a power of two")
        );
        let bad_size = Err("slot size not a non-zero multiple of 16");
        assert_eq!(
            check(
                &RingInfo {
                    slot_size: 72,
                    ..ok
                },
                8,
                64
            ),
            bad_size
        );
        assert_eq!(check(&RingInfo { slot_size: 0, ..ok }, 8, 0), bad_size);
        assert_eq!(
            check(&ok, 9, 64),
            Err("fewer slots than the queue's capacity")
        );
        assert_eq!(
            check(&ok, 8, 65),
            Err("slots smaller than the queue's entries")
        );
        let tight = RING_SLOTS_OFFSET as u64 + 8 * 64;
        assert!(check(
            &RingInfo {
                mmap_size: tight,
                ..ok
            },
            8,
            64
        )
        .is_ok());
        let short = RingInfo {
            mmap_size: tight - 1,
            ..ok
        };
        assert_eq!(
            check(&short, 8, 64),
            Err("mapping smaller than control block and slots")
        );
        let huge = RingInfo {
            slot_count: 1 << 31,
            slot_size: 1 << 31,
            mmap_size: u64::MAX,
            mmap_offset: 0,
        };
        assert!(check(&huge, 1, 64).is_ok(), "no overflow in the size check");
        assert!(check(
            &RingInfo {
                mmap_size: u64::MAX - 1,
                ..huge
            },
            1,
            64
        )
        .is_ok());
        assert!(check(
            &RingInfo {
                mmap_size: 1 << 61,
                ..huge
            },
            1,
            64
        )
        .is_err());
        assert_eq!(
            RingInfoError::MappingTooLarge.to_string(),
            "mapping too large"
        );
    }

    #[test]
    fn slot_offsets_and_fill() {
        let geo = RingGeometry::from_info(&info(8, 32), 8, 32).unwrap();
        assert_eq!(geo.slot_offset(0), RING_SLOTS_OFFSET);
        assert_eq!(geo.slot_offset(7), RING_SLOTS_OFFSET + 7 * 32);
        assert_eq!(geo.slot_offset(8), RING_SLOTS_OFFSET);
        assert_eq!(geo.slot_offset(u32::MAX), RING_SLOTS_OFFSET + 7 * 32);
        assert_eq!(geo.occupancy(0, 0), Some(0));
        assert_eq!(geo.occupancy(8, 0), Some(8));
        assert_eq!(geo.occupancy(9, 0), None);
        assert_eq!(geo.occupancy(2, u32::MAX - 1), Some(4));
        assert_eq!(geo.occupancy(0, 1), None);
    }

    /// The entry sizes `create_qp` and `create_srq` check rings against.
    /// Slots are multiples of 16 bytes, so rounding the send size up to 16
    /// refuses no ring that the unrounded size would accept.
    #[test]
    fn wqe_sizes() {
        let cap = ibv_qp_cap {
            max_send_sge: 4,
            max_inline_data: 100,
            ..Default::default()
        };
        assert_eq!(
            send_wqe_slot_size(cap.max_send_sge, cap.max_inline_data),
            64 + 112
        );
        let cap = ibv_qp_cap {
            max_send_sge: 8,
            max_inline_data: 100,
            ..Default::default()
        };
        assert_eq!(
            send_wqe_slot_size(cap.max_send_sge, cap.max_inline_data),
            64 + 128
        );
        assert_eq!(
            recv_wqe_slot_size(0),
            16 + 16,
            "the kernel makes room for one SGE at least"
        );
        assert_eq!(recv_wqe_slot_size(3), 16 + 48);
        // Too large for any ring: no description passes the check.
        assert_eq!(recv_wqe_slot_size(u32::MAX), u32::MAX);
        let largest = RingInfo {
            slot_size: u32::MAX - 15,
            mmap_size: u64::MAX >> 1,
            ..info(1, 16)
        };
        assert!(RingGeometry::from_info(&largest, 1, recv_wqe_slot_size(u32::MAX)).is_err());
        assert!(
            RingGeometry::from_info(&largest, 1, recv_wqe_slot_size(u32::MAX / 16 - 1)).is_ok()
        );
    }

    /// A producer thread and a consumer exchanging many entries through a
    /// small ring: every entry arrives once, in order, and the producer
    /// never overwrites an unconsumed slot (it waits on `consumer`).
    #[test]
    fn concurrent_producer_and_consumer() {
        const TOTAL: u64 = 100_000;
        let r = TestRing::new(8, 64);
        r.set_indices(u32::MAX - 1000, u32::MAX - 1000);
        struct Shared(NonNull<u8>, RingGeometry);
        // SAFETY: the memory outlives the scope; both threads follow the
        // ring protocol.
        unsafe impl Send for Shared {}
        let shared = Shared(r.base, r.geo);
        std::thread::scope(|s| {
            s.spawn(move || {
                let shared = shared;
                // SAFETY: as for `TestRing::ring`.
                let ring = unsafe { Ring::new(shared.0, shared.1) };
                let mut next = 0;
                while next < TOTAL {
                    let producer = ring.producer().load(Ordering::Relaxed);
                    let consumer = ring.consumer().load(Ordering::Acquire);
                    if ring.geometry().occupancy(producer, consumer) == Some(8) {
                        std::hint::spin_loop();
                        continue;
                    }
                    let offset = ring.geometry().slot_offset(producer);
                    // SAFETY: an unpublished slot, in bounds and aligned.
                    unsafe { shared.0.as_ptr().add(offset).cast::<Cqe>().write(cqe(next)) };
                    ring.producer()
                        .store(producer.wrapping_add(1), Ordering::Release);
                    next += 1;
                }
            });
            let mut expect = 0;
            while expect < TOTAL {
                for wc in r.poll(5).unwrap() {
                    assert_eq!(wc.wr_id, expect);
                    assert_eq!(wc.byte_len, expect as u32 * 10);
                    expect += 1;
                }
            }
        });
        assert_eq!(r.poll(5).unwrap(), vec![]);
    }

    /// Writes `byte` over a reserved slot's first 16 bytes and commits it.
    fn fill(p: &mut Producer<'_, '_>, byte: u8) -> Result<(), ProduceError> {
        let mut slot = p.reserve()?;
        slot.write(0, &[byte; 16]).unwrap();
        slot.commit();
        Ok(())
    }

    fn first_bytes(entries: &[Vec<u8>]) -> Vec<u8> {
        entries.iter().map(|e| e[0]).collect()
    }

    #[test]
    fn a_batch_is_published_once_at_its_end() {
        let r = TestRing::new(8, 64);
        let ring = r.ring();
        let mut p = Producer::new(&ring);
        for byte in 1..=3 {
            fill(&mut p, byte).unwrap();
            assert_eq!(r.producer(), 0, "nothing is published before the end");
        }
        assert_eq!(p.pending(), 3);
        assert_eq!(p.publish(), 3);
        assert_eq!(r.producer(), 3);
        assert_eq!(first_bytes(&r.consume(8)), [1, 2, 3]);
        assert_eq!(r.consumer(), 3);
        // The slot holds exactly what was written; the rest is untouched.
        let slot = r.slot(2);
        assert_eq!(slot[..16], [3; 16]);
        assert_eq!(slot[16..], [0xa5; 48]);
    }

    #[test]
    fn uncommitted_slots_and_empty_batches_publish_nothing() {
        let r = TestRing::new(8, 64);
        let ring = r.ring();
        let mut p = Producer::new(&ring);
        {
            let mut slot = p.reserve().unwrap();
            slot.write(0, &[9; 16]).unwrap();
            // Not committed.
        }
        assert_eq!(p.pending(), 0);
        assert_eq!(p.publish(), 0);
        assert_eq!(r.producer(), 0);
        // The abandoned slot is the next batch's first.
        let mut p = Producer::new(&ring);
        fill(&mut p, 4).unwrap();
        assert_eq!(p.publish(), 1);
        assert_eq!(first_bytes(&r.consume(8)), [4]);
    }

    #[test]
    fn a_full_ring_takes_no_more() {
        let r = TestRing::new(4, 64);
        let ring = r.ring();
        let mut p = Producer::new(&ring);
        for byte in 0..4 {
            fill(&mut p, byte).unwrap();
        }
        assert_eq!(fill(&mut p, 4), Err(ProduceError::Full));
        assert_eq!(p.publish(), 4);
        let mut p = Producer::new(&ring);
        assert_eq!(fill(&mut p, 4), Err(ProduceError::Full));
        assert_eq!(p.publish(), 0);
        assert_eq!(first_bytes(&r.consume(2)), [0, 1]);
        let mut p = Producer::new(&ring);
        fill(&mut p, 4).unwrap();
        fill(&mut p, 5).unwrap();
        assert_eq!(fill(&mut p, 6), Err(ProduceError::Full));
        assert_eq!(p.publish(), 2);
        assert_eq!(first_bytes(&r.consume(8)), [2, 3, 4, 5]);
    }

    #[test]
    fn a_full_ring_reads_the_consumer_again() {
        let r = TestRing::new(4, 64);
        r.set_indices(4, 0);
        let ring = r.ring();
        let mut p = Producer::new(&ring);
        // The kernel consumes after the batch began.
        assert_eq!(r.consume(1).len(), 1);
        fill(&mut p, 7).unwrap();
        assert_eq!(fill(&mut p, 8), Err(ProduceError::Full));
        assert_eq!(p.publish(), 1);
        assert_eq!(r.producer(), 5);
    }

    #[test]
    fn producer_indices_wrap_at_2_pow_32() {
        let r = TestRing::new(4, 64);
        let start = u32::MAX - 5;
        r.set_indices(start, start);
        let ring = r.ring();
        let mut byte = 0;
        for _ in 0..5 {
            let mut p = Producer::new(&ring);
            for _ in 0..3 {
                fill(&mut p, byte).unwrap();
                byte += 1;
            }
            assert_eq!(p.publish(), 3);
            let got = first_bytes(&r.consume(8));
            assert_eq!(got, [byte - 3, byte - 2, byte - 1]);
        }
        assert_eq!(r.producer(), start.wrapping_add(15));
        assert_eq!(r.producer(), 9);
        assert_eq!(r.consumer(), 9);
        // The slot of index u32::MAX is the last, then index 0 the first.
        assert_eq!(
            ring.geometry().slot_offset(u32::MAX),
            RING_SLOTS_OFFSET + 3 * 64
        );
    }

    #[test]
    fn a_broken_consumer_index_queues_nothing() {
        let r = TestRing::new(4, 64);
        let ring = r.ring();
        let broken = |producer, consumer| Err(ProduceError::Broken(Overrun { producer, consumer }));
        // Consumer ahead of the producer.
        r.set_indices(2, 3);
        let mut p = Producer::new(&ring);
        assert_eq!(fill(&mut p, 0), broken(2, 3));
        assert_eq!(p.publish(), 0);
        assert_eq!(r.producer(), 2);
        // More than a ring's worth behind, also across the wrap.
        r.set_indices(10, 5);
        assert_eq!(fill(&mut Producer::new(&ring), 0), broken(10, 5));
        r.set_indices(1, u32::MAX - 3);
        assert_eq!(fill(&mut Producer::new(&ring), 0), broken(1, u32::MAX - 3));
        // A ring's worth behind is merely full.
        r.set_indices(1, u32::MAX - 2);
        assert_eq!(fill(&mut Producer::new(&ring), 0), Err(ProduceError::Full));
        // The consumer moving backwards during a batch.
        r.set_indices(4, 2);
        let mut p = Producer::new(&ring);
        fill(&mut p, 0).unwrap();
        fill(&mut p, 1).unwrap();
        r.ring().consumer().store(0, Ordering::Relaxed);
        assert_eq!(fill(&mut p, 2), broken(4, 0));
        // What was committed before can still be published.
        assert_eq!(p.publish(), 2);
        assert_eq!(r.producer(), 6);
    }

    #[test]
    fn slot_writes_stay_in_their_slot() {
        let r = TestRing::new(4, 32);
        let ring = r.ring();
        let mut p = Producer::new(&ring);
        let mut slot = p.reserve().unwrap();
        slot.write(16, &[1; 16]).unwrap();
        slot.write(32, &[]).unwrap();
        assert_eq!(slot.write(17, &[2; 16]), Err(SlotOverflow));
        assert_eq!(slot.write(0, &[2; 33]), Err(SlotOverflow));
        assert_eq!(slot.write(33, &[]), Err(SlotOverflow));
        assert_eq!(slot.write(usize::MAX, &[2]), Err(SlotOverflow));
        slot.commit();
        p.publish();
        assert_eq!(r.slot(0)[..16], [0xa5; 16]);
        assert_eq!(r.slot(0)[16..], [1; 16]);
        assert_eq!(r.slot(1), [0xa5; 32], "the next slot is untouched");
    }

    #[test]
    fn consumer_activity_is_the_sender_active_flag() {
        let r = TestRing::new(4, 64);
        assert!(!r.ring().consumer_active());
        r.set_flags(ring_flags::SENDER_ACTIVE);
        assert!(r.ring().consumer_active());
        r.set_flags(!ring_flags::SENDER_ACTIVE);
        assert!(!r.ring().consumer_active(), "other bits mean nothing");
    }

    #[test]
    fn entry_parts_encode_little_endian() {
        let sge = Sge {
            addr: 0x0102_0304_0506_0708,
            length: 0x1112_1314,
            lkey: 0x2122_2324,
        };
        assert_eq!(
            sge.as_bytes(),
            [8, 7, 6, 5, 4, 3, 2, 1, 0x14, 0x13, 0x12, 0x11, 0x24, 0x23, 0x22, 0x21]
        );
        let wqe = RecvWqe {
            wr_id: 1,
            num_sge: 2,
            reserved: 0,
        };
        assert_eq!(
            wqe.as_bytes(),
            [1, 0, 0, 0, 0, 0, 0, 0, 2, 0, 0, 0, 0, 0, 0, 0]
        );
        assert_eq!(SendWqe::default().as_bytes(), [0; 64]);
    }
}
