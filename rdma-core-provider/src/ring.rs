// SPDX-License-Identifier: GPL-2.0 OR Linux-OpenIB

//! Shared rings (see `rxud_abi::RingControl`) and the CQ consumer
//! (`poll_cq`). Geometry, its checks and index arithmetic are the ABI's
//! (`rxud_abi::RingGeometry`, shared with the kernel), as are slot sizes
//! (`rxud_abi::send_wqe_slot_size` and the like). The only unsafe code is
//! [`Ring::new`], whose contract makes the ring's memory valid, and the two
//! accesses that rely on it (atomic indices, slot reads); the rest is safe
//! and works on any memory laid out as a ring, so the host tests run it over
//! ordinary memory.
//!
//! A ring whose producer claims more entries than it has slots (or fewer
//! than none: producer behind consumer) is *broken*: polling consumes
//! nothing and reports [`Overrun`], every time, as the kernel does for the
//! rings user space produces. `ibv_poll_cq` then returns a negative value.
//! Nothing is delivered from a broken ring, because nothing in it can be
//! trusted to be a completion.

use crate::sys::ibv_wc;
use core::marker::PhantomData;
use core::mem::{offset_of, size_of, MaybeUninit};
use core::ptr::NonNull;
use core::sync::atomic::{AtomicU32, Ordering};
use rxud_abi::{Cqe, RingControl, RingGeometry};

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
    /// `'a`. Whoever else uses them (the kernel, or a test's
    /// producer) follows the ring protocol: it accesses the indices only
    /// atomically and writes no slot between the consumer and producer
    /// indices, which is this side's to read.
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
}

/// The work completion libibverbs reports for `cqe`. `ibv_wc` has no room
/// for the CQE's RoCE fields (`network_hdr_type`, `smac`, `vlan_id`): they
/// are for the extended CQ, which librxud does not offer yet.
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
pub(crate) fn poll_cq(ring: &Ring<'_>, out: &mut [MaybeUninit<ibv_wc>]) -> Result<usize, Overrun> {
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sys::ibv_qp_cap;
    use rxud_abi::{
        recv_wqe_slot_size, send_wqe_slot_size, RingInfo, RingInfoError, CQ_SLOT_SIZE,
        RING_SLOTS_OFFSET,
    };

    /// Ring memory in ordinary, suitably aligned heap memory.
    #[repr(C, align(64))]
    #[derive(Clone, Copy)]
    struct Line([u8; 64]);

    /// A ring with a test-side producer playing the kernel.
    struct TestRing {
        mem: Vec<Line>,
        geo: RingGeometry,
        /// The one pointer all accesses derive from.
        base: NonNull<u8>,
    }

    fn info(slot_count: u32, slot_size: u32) -> RingInfo {
        let len = RING_SLOTS_OFFSET as u64 + u64::from(slot_count) * u64::from(slot_size);
        RingInfo {
            mmap_offset: 0,
            mmap_size: len.next_multiple_of(4096),
            slot_count,
            slot_size,
        }
    }

    impl TestRing {
        fn new(slot_count: u32, slot_size: u32) -> Self {
            let info = info(slot_count, slot_size);
            let geo = RingGeometry::from_info(&info, slot_count, CQ_SLOT_SIZE).unwrap();
            // The whole mapping the kernel describes, as `map_ring` maps it.
            let mut mem = vec![Line([0xa5; 64]); info.mmap_size as usize / 64];
            let base = NonNull::new(mem.as_mut_ptr().cast::<u8>()).unwrap();
            let ring = Self { mem, geo, base };
            ring.set_indices(0, 0);
            ring
        }

        fn ring(&self) -> Ring<'_> {
            assert!(self.mem.len() * 64 >= self.geo.bytes());
            // SAFETY: `geo` is from `from_info`; `mem` covers its bytes and
            // lives as long as the borrow; the test producer follows the
            // ring protocol.
            unsafe { Ring::new(self.base, self.geo) }
        }

        fn set_indices(&self, producer: u32, consumer: u32) {
            let ring = self.ring();
            ring.producer().store(producer, Ordering::Relaxed);
            ring.consumer().store(consumer, Ordering::Relaxed);
        }

        /// The kernel's side: writes CQEs at the producer index, computing
        /// slot addresses independently of `RingGeometry`, then publishes
        /// them.
        fn produce(&self, cqes: &[Cqe]) {
            let ring = self.ring();
            let mut producer = ring.producer().load(Ordering::Relaxed);
            for cqe in cqes {
                let slot = (producer % self.geo.slot_count()) as usize;
                let offset = RING_SLOTS_OFFSET + slot * self.geo.slot_size() as usize;
                // SAFETY: in bounds and aligned; the slot is not published,
                // so the consumer does not read it.
                unsafe { self.base.as_ptr().add(offset).cast::<Cqe>().write(*cqe) };
                producer = producer.wrapping_add(1);
            }
            ring.producer().store(producer, Ordering::Release);
        }

        fn consumer(&self) -> u32 {
            self.ring().consumer().load(Ordering::Relaxed)
        }

        fn poll(&self, max: usize) -> Result<Vec<ibv_wc>, Overrun> {
            let mut out = vec![MaybeUninit::uninit(); max];
            let n = poll_cq(&self.ring(), &mut out)?;
            let wcs = out[..n].iter();
            // SAFETY: `poll_cq` initialised the first `n`.
            Ok(wcs.map(|wc| unsafe { wc.assume_init() }).collect())
        }
    }

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
}
