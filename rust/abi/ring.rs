// SPDX-License-Identifier: GPL-2.0 OR Linux-OpenIB

//! Ring geometry and slot sizes, defined once for the kernel module and
//! librxud.
//!
//! A ring is a control block ([`RingControl`](super::RingControl)) and then
//! `slot_count` slots of `slot_size` bytes. Indices run freely and wrap at
//! 2^32; the number of entries is `producer - consumer`. One side of every
//! ring is untrusted, so occupancy is checked rather than assumed.
//!
//! The kernel makes a ring with [`RingGeometry::new`] and describes it in a
//! [`RingInfo`]; librxud checks that description with
//! [`RingGeometry::from_info`]. Both size the slots of a queue with the
//! same functions: [`send_wqe_slot_size`], [`recv_wqe_slot_size`] and
//! [`CQ_SLOT_SIZE`].
//!
//! Nothing here panics: sizes that do not fit saturate or are errors.

use super::{
    RingInfo, CQE_SIZE, RECV_WQE_HEADER_SIZE, RING_SLOTS_OFFSET, SEND_WQE_HEADER_SIZE, SGE_SIZE,
};

/// Slot sizes are multiples of this many bytes.
pub const SLOT_SIZE_ALIGN: u32 = 16;

/// Bytes of a CQ ring slot: one CQE.
pub const CQ_SLOT_SIZE: u32 = CQE_SIZE;

/// Bytes of a send queue slot for a QP with room for `max_sge`
/// scatter/gather elements or `max_inline` bytes of inline data: the
/// header, then the larger of the two, rounded up to [`SLOT_SIZE_ALIGN`].
///
/// `max_sge` 0 counts as 1: every slot has room for one element, so the
/// kernel always grants at least one.
///
/// Saturates at `u32::MAX` if the size does not fit in a `u32` (never for
/// the kernel's limits). That is no multiple of [`SLOT_SIZE_ALIGN`], so no
/// ring is made or accepted with it.
pub const fn send_wqe_slot_size(max_sge: u32, max_inline: u32) -> u32 {
    let sges = if max_sge == 0 { 1 } else { max_sge };
    let Some(sge_bytes) = sges.checked_mul(SGE_SIZE) else {
        return u32::MAX;
    };
    let body = if sge_bytes > max_inline {
        sge_bytes
    } else {
        max_inline
    };
    let Some(body) = body.checked_next_multiple_of(SLOT_SIZE_ALIGN) else {
        return u32::MAX;
    };
    match SEND_WQE_HEADER_SIZE.checked_add(body) {
        Some(size) => size,
        None => u32::MAX,
    }
}

/// Bytes of a receive queue (or SRQ) slot with room for `max_sge`
/// scatter/gather elements: the header, then the elements. A multiple of
/// [`SLOT_SIZE_ALIGN`], as header and elements are.
///
/// `max_sge` 0 counts as 1, as for [`send_wqe_slot_size`]; and the size
/// saturates at `u32::MAX` in the same way.
pub const fn recv_wqe_slot_size(max_sge: u32) -> u32 {
    let sges = if max_sge == 0 { 1 } else { max_sge };
    let Some(sge_bytes) = sges.checked_mul(SGE_SIZE) else {
        return u32::MAX;
    };
    match RECV_WQE_HEADER_SIZE.checked_add(sge_bytes) {
        Some(size) => size,
        None => u32::MAX,
    }
}

/// Slot count and size of one ring, and where its slots start.
///
/// Invariants, established by the constructors: `slot_count` is a power of
/// two (so at least 1), `slot_size` a non-zero multiple of
/// [`SLOT_SIZE_ALIGN`], and the ring's [`bytes`](Self::bytes) fit in a
/// `usize`.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct RingGeometry {
    slot_count: u32,
    slot_size: u32,
    slots_offset: u32,
}

/// Why a ring cannot be made ([`RingGeometry::new`]).
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum GeometryError {
    /// No entries asked for, or more than the limit.
    BadCount,
    /// Slot size zero or not a multiple of 16.
    BadSlotSize,
    /// The ring would not fit in the address space.
    TooLarge,
}

/// Why a ring the kernel described is refused
/// ([`RingGeometry::from_info`]): the kernel and user space disagree about
/// the ABI.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum RingInfoError {
    /// The description is all zero: there is no ring.
    Absent,
    /// The slot count is not a power of two.
    SlotCount,
    /// The slot size is zero or not a multiple of [`SLOT_SIZE_ALIGN`].
    SlotSize,
    /// Fewer slots than the queue must hold entries.
    TooFewSlots,
    /// Slots smaller than the queue's entries.
    SlotsTooSmall,
    /// The mapping does not cover the control block and every slot.
    MappingTooSmall,
    /// The mapping is larger than the address space.
    MappingTooLarge,
}

impl RingInfoError {
    /// What is wrong, for a log message.
    pub const fn message(self) -> &'static str {
        match self {
            Self::Absent => "no ring",
            Self::SlotCount => "slot count not a power of two",
            Self::SlotSize => "slot size not a non-zero multiple of 16",
            Self::TooFewSlots => "fewer slots than the queue's capacity",
            Self::SlotsTooSmall => "slots smaller than the queue's entries",
            Self::MappingTooSmall => "mapping smaller than control block and slots",
            Self::MappingTooLarge => "mapping too large",
        }
    }
}

impl core::fmt::Display for RingInfoError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str(self.message())
    }
}

/// Whether `slot_size` is a non-zero multiple of [`SLOT_SIZE_ALIGN`].
// `u32::is_multiple_of` needs Rust 1.87; the kernel supports older ones.
#[allow(clippy::manual_is_multiple_of)]
const fn slot_size_ok(slot_size: u32) -> bool {
    slot_size != 0 && slot_size % SLOT_SIZE_ALIGN == 0
}

/// `RING_SLOTS_OFFSET` as the `slots_offset` of [`RingGeometry`].
const SLOTS_OFFSET: u32 = RING_SLOTS_OFFSET as u32;
const _: () = assert!(SLOTS_OFFSET as usize == RING_SLOTS_OFFSET);

impl RingGeometry {
    /// A ring with room for at least `entries` (at most `max_entries`,
    /// itself a power of two) slots of `slot_size` bytes after a control
    /// block of `slots_offset` bytes. The slot count is rounded up to a
    /// power of two, so the capacity may exceed the request.
    pub fn new(
        entries: u32,
        max_entries: u32,
        slot_size: u32,
        slots_offset: u32,
    ) -> Result<Self, GeometryError> {
        if entries == 0 || entries > max_entries {
            return Err(GeometryError::BadCount);
        }
        if !slot_size_ok(slot_size) {
            return Err(GeometryError::BadSlotSize);
        }
        let slot_count = entries
            .checked_next_power_of_two()
            .ok_or(GeometryError::BadCount)?;
        // The byte size must be representable (it is, for u32 inputs, on
        // 64-bit hosts; the check keeps 32-bit builds honest).
        (slot_count as usize)
            .checked_mul(slot_size as usize)
            .and_then(|b| b.checked_add(slots_offset as usize))
            .ok_or(GeometryError::TooLarge)?;
        Ok(Self {
            slot_count,
            slot_size,
            slots_offset,
        })
    }

    /// The geometry of the ring `info` describes, checked for a queue of
    /// `entries` entries of `entry_size` bytes each (a slot size above, or
    /// [`CQ_SLOT_SIZE`]). Its slots start at [`RING_SLOTS_OFFSET`]. On
    /// success `info.mmap_size` covers [`bytes`](Self::bytes) and fits in a
    /// `usize`.
    pub fn from_info(
        info: &RingInfo,
        entries: u32,
        entry_size: u32,
    ) -> Result<Self, RingInfoError> {
        if !info.is_present() {
            return Err(RingInfoError::Absent);
        }
        if !info.slot_count.is_power_of_two() {
            return Err(RingInfoError::SlotCount);
        }
        if !slot_size_ok(info.slot_size) {
            return Err(RingInfoError::SlotSize);
        }
        if info.slot_count < entries {
            return Err(RingInfoError::TooFewSlots);
        }
        if info.slot_size < entry_size {
            return Err(RingInfoError::SlotsTooSmall);
        }
        // Cannot saturate: both factors are below 2^32.
        let needed = u64::from(info.slot_count)
            .saturating_mul(u64::from(info.slot_size))
            .saturating_add(u64::from(SLOTS_OFFSET));
        if info.mmap_size < needed {
            return Err(RingInfoError::MappingTooSmall);
        }
        if usize::try_from(info.mmap_size).is_err() {
            return Err(RingInfoError::MappingTooLarge);
        }
        Ok(Self {
            slot_count: info.slot_count,
            slot_size: info.slot_size,
            slots_offset: SLOTS_OFFSET,
        })
    }

    /// Number of slots, a power of two.
    pub fn slot_count(&self) -> u32 {
        self.slot_count
    }

    /// Bytes per slot, a non-zero multiple of [`SLOT_SIZE_ALIGN`].
    pub fn slot_size(&self) -> u32 {
        self.slot_size
    }

    /// Bytes of the whole ring: control block and slots.
    pub fn bytes(&self) -> usize {
        // Cannot saturate: the constructors checked the sum.
        (self.slot_count as usize)
            .saturating_mul(self.slot_size as usize)
            .saturating_add(self.slots_offset as usize)
    }

    /// Byte offset of the slot index `index` refers to.
    pub fn slot_offset(&self, index: u32) -> usize {
        let slot = index & self.slot_count.wrapping_sub(1);
        // Cannot saturate: below `bytes()`.
        (slot as usize)
            .saturating_mul(self.slot_size as usize)
            .saturating_add(self.slots_offset as usize)
    }

    /// Entries between `consumer` and `producer`, or `None` if the indices
    /// claim more than the ring holds (a broken or hostile peer).
    pub fn occupancy(&self, producer: u32, consumer: u32) -> Option<u32> {
        let n = producer.wrapping_sub(consumer);
        (n <= self.slot_count).then_some(n)
    }
}

// Slot sizes built from these are multiples of `SLOT_SIZE_ALIGN`.
#[allow(clippy::manual_is_multiple_of)]
const _: () = assert!(
    SLOT_SIZE_ALIGN.is_power_of_two()
        && SGE_SIZE % SLOT_SIZE_ALIGN == 0
        && SEND_WQE_HEADER_SIZE % SLOT_SIZE_ALIGN == 0
        && RECV_WQE_HEADER_SIZE % SLOT_SIZE_ALIGN == 0
        && CQ_SLOT_SIZE % SLOT_SIZE_ALIGN == 0
);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rounds_up_to_powers_of_two() {
        let g = RingGeometry::new(100, 1 << 16, 64, 128).unwrap();
        assert_eq!(g.slot_count(), 128);
        assert_eq!(g.slot_size(), 64);
        assert_eq!(g.bytes(), 128 + 128 * 64);
        assert_eq!(
            RingGeometry::new(1, 1 << 16, 64, 128).unwrap().slot_count(),
            1
        );
        assert_eq!(
            RingGeometry::new(1 << 16, 1 << 16, 64, 128)
                .unwrap()
                .slot_count(),
            1 << 16
        );
    }

    #[test]
    fn rejects_bad_requests() {
        assert_eq!(
            RingGeometry::new(0, 16, 64, 128),
            Err(GeometryError::BadCount)
        );
        assert_eq!(
            RingGeometry::new(17, 16, 64, 128),
            Err(GeometryError::BadCount)
        );
        assert_eq!(
            RingGeometry::new(u32::MAX, u32::MAX, 64, 128),
            Err(GeometryError::BadCount)
        );
        assert_eq!(
            RingGeometry::new(4, 16, 0, 128),
            Err(GeometryError::BadSlotSize)
        );
        assert_eq!(
            RingGeometry::new(4, 16, 24, 128),
            Err(GeometryError::BadSlotSize)
        );
        assert_eq!(
            RingGeometry::new(4, 16, u32::MAX, 128),
            Err(GeometryError::BadSlotSize)
        );
    }

    #[test]
    fn slots_wrap_with_the_index() {
        let g = RingGeometry::new(8, 8, 16, 128).unwrap();
        assert_eq!(g.slot_offset(0), 128);
        assert_eq!(g.slot_offset(7), 128 + 7 * 16);
        assert_eq!(g.slot_offset(8), 128);
        assert_eq!(g.slot_offset(u32::MAX), 128 + 7 * 16);
    }

    #[test]
    fn occupancy_survives_wraparound_and_catches_lies() {
        let g = RingGeometry::new(8, 8, 16, 128).unwrap();
        assert_eq!(g.occupancy(5, 5), Some(0));
        assert_eq!(g.occupancy(13, 5), Some(8));
        assert_eq!(g.occupancy(2, u32::MAX - 1), Some(4));
        assert_eq!(g.occupancy(14, 5), None);
        assert_eq!(g.occupancy(4, 5), None, "consumer ahead of producer");
    }

    /// A description of a ring of `slot_count` slots of `slot_size` bytes,
    /// mapped in whole pages, as the kernel makes it.
    fn info(slot_count: u32, slot_size: u32) -> RingInfo {
        let len = RING_SLOTS_OFFSET as u64 + u64::from(slot_count) * u64::from(slot_size);
        RingInfo {
            mmap_offset: 0,
            mmap_size: len.next_multiple_of(4096),
            slot_count,
            slot_size,
        }
    }

    #[test]
    fn what_the_kernel_makes_user_space_accepts() {
        for (entries, slot_size) in [(1, 16), (100, 64), (1 << 14, 592), (1 << 16, CQ_SLOT_SIZE)] {
            let made = RingGeometry::new(entries, 1 << 16, slot_size, SLOTS_OFFSET).unwrap();
            let i = info(made.slot_count(), made.slot_size());
            assert_eq!(RingGeometry::from_info(&i, entries, slot_size), Ok(made));
        }
    }

    #[test]
    fn from_info_checks() {
        let ok = info(8, 64);
        let g = RingGeometry::from_info(&ok, 8, 64).unwrap();
        assert_eq!((g.slot_count(), g.slot_size()), (8, 64));
        assert_eq!(g.bytes(), RING_SLOTS_OFFSET + 8 * 64);
        assert_eq!(g.slot_offset(9), RING_SLOTS_OFFSET + 64);
        assert_eq!(
            RingGeometry::from_info(&ok, 0, 0),
            Ok(g),
            "a queue of no entries fits"
        );
        let err = |info: &RingInfo, entries, entry_size| {
            RingGeometry::from_info(info, entries, entry_size).err()
        };
        assert_eq!(err(&RingInfo::default(), 0, 0), Some(RingInfoError::Absent));
        assert_eq!(
            err(
                &RingInfo {
                    slot_count: 6,
                    ..ok
                },
                1,
                64
            ),
            Some(RingInfoError::SlotCount)
        );
        assert_eq!(
            err(
                &RingInfo {
                    slot_count: 0,
                    ..ok
                },
                0,
                64
            ),
            Some(RingInfoError::SlotCount)
        );
        assert_eq!(
            err(
                &RingInfo {
                    slot_size: 72,
                    ..ok
                },
                8,
                64
            ),
            Some(RingInfoError::SlotSize)
        );
        assert_eq!(
            err(&RingInfo { slot_size: 0, ..ok }, 8, 0),
            Some(RingInfoError::SlotSize)
        );
        assert_eq!(err(&ok, 9, 64), Some(RingInfoError::TooFewSlots));
        assert_eq!(err(&ok, 8, 65), Some(RingInfoError::SlotsTooSmall));
        let tight = RING_SLOTS_OFFSET as u64 + 8 * 64;
        assert_eq!(
            err(
                &RingInfo {
                    mmap_size: tight,
                    ..ok
                },
                8,
                64
            ),
            None
        );
        assert_eq!(
            err(
                &RingInfo {
                    mmap_size: tight - 1,
                    ..ok
                },
                8,
                64
            ),
            Some(RingInfoError::MappingTooSmall)
        );
        // The largest description: the size check does not overflow.
        let huge = RingInfo {
            slot_count: 1 << 31,
            slot_size: 1 << 31,
            mmap_size: u64::MAX,
            mmap_offset: 0,
        };
        let too_large = if usize::BITS < 64 {
            Some(RingInfoError::MappingTooLarge)
        } else {
            None
        };
        assert_eq!(err(&huge, 1, 64), too_large);
        assert_eq!(
            err(
                &RingInfo {
                    mmap_size: u64::MAX - 1,
                    ..huge
                },
                1,
                64
            ),
            too_large
        );
        assert_eq!(
            err(
                &RingInfo {
                    mmap_size: 1 << 61,
                    ..huge
                },
                1,
                64
            ),
            Some(RingInfoError::MappingTooSmall)
        );
        if usize::BITS >= 64 {
            let g = RingGeometry::from_info(&huge, 1 << 31, 1 << 31).unwrap();
            assert_eq!(g.bytes(), RING_SLOTS_OFFSET + (1 << 62));
            assert_eq!(
                g.slot_offset(u32::MAX),
                RING_SLOTS_OFFSET + ((1 << 31) - 1) * (1 << 31)
            );
        }
    }

    #[test]
    fn messages() {
        assert_eq!(RingInfoError::Absent.message(), "no ring");
        assert_eq!(
            RingInfoError::SlotSize.message(),
            "slot size not a non-zero multiple of 16"
        );
        let mut buf = [0u8; 64];
        let mut w = Buf(&mut buf, 0);
        core::fmt::write(&mut w, format_args!("{}", RingInfoError::MappingTooLarge)).unwrap();
        let n = w.1;
        assert_eq!(&buf[..n], b"mapping too large");
    }

    /// A `core::fmt::Write` into a byte array.
    struct Buf<'a>(&'a mut [u8], usize);

    impl core::fmt::Write for Buf<'_> {
        fn write_str(&mut self, s: &str) -> core::fmt::Result {
            let end = self.1 + s.len();
            self.0
                .get_mut(self.1..end)
                .ok_or(core::fmt::Error)?
                .copy_from_slice(s.as_bytes());
            self.1 = end;
            Ok(())
        }
    }

    #[test]
    fn send_slots() {
        // Header plus the larger of SGEs and inline data, in 16-byte steps.
        assert_eq!(send_wqe_slot_size(1, 0), 64 + 16);
        assert_eq!(send_wqe_slot_size(4, 100), 64 + 112);
        assert_eq!(send_wqe_slot_size(8, 100), 64 + 128);
        assert_eq!(send_wqe_slot_size(4, 64), 64 + 64);
        assert_eq!(send_wqe_slot_size(1, 1), 64 + 16);
        assert_eq!(send_wqe_slot_size(32, 512), 64 + 512);
        // No SGEs count as one.
        assert_eq!(send_wqe_slot_size(0, 0), send_wqe_slot_size(1, 0));
        assert_eq!(send_wqe_slot_size(0, 40), 64 + 48);
    }

    /// The kernel's formula before the sizes moved here, over its whole
    /// input range (`MAX_SGE` 32, `MAX_INLINE_DATA` 32 SGEs): unchanged.
    #[test]
    fn send_slots_match_the_kernels_old_formula() {
        for sge in 0..=32u32 {
            for inline in 0..=32 * SGE_SIZE {
                let body = (sge.max(1) * SGE_SIZE).max(inline).div_ceil(16) * 16;
                assert_eq!(send_wqe_slot_size(sge, inline), SEND_WQE_HEADER_SIZE + body);
            }
        }
    }

    #[test]
    fn recv_slots() {
        assert_eq!(recv_wqe_slot_size(1), 16 + 16);
        assert_eq!(recv_wqe_slot_size(3), 16 + 48);
        assert_eq!(recv_wqe_slot_size(32), 16 + 512);
        assert_eq!(
            recv_wqe_slot_size(0),
            recv_wqe_slot_size(1),
            "no SGEs count as one"
        );
        for sge in 0..=32u32 {
            assert_eq!(
                recv_wqe_slot_size(sge),
                RECV_WQE_HEADER_SIZE + sge.max(1) * SGE_SIZE
            );
        }
    }

    #[test]
    fn oversized_slots_saturate_and_no_ring_takes_them() {
        let big = [
            send_wqe_slot_size(u32::MAX, 0),
            send_wqe_slot_size(1, u32::MAX),
            send_wqe_slot_size(1, u32::MAX - 15),
            send_wqe_slot_size(u32::MAX / SGE_SIZE, 0),
            recv_wqe_slot_size(u32::MAX),
            recv_wqe_slot_size(u32::MAX / SGE_SIZE),
        ];
        // The largest slots a kernel could describe.
        let largest = RingInfo {
            slot_size: !(SLOT_SIZE_ALIGN - 1),
            mmap_size: u64::MAX >> 1,
            ..info(1, 16)
        };
        for size in big {
            assert_eq!(size, u32::MAX);
            assert_eq!(
                RingGeometry::new(1, 1, size, SLOTS_OFFSET),
                Err(GeometryError::BadSlotSize)
            );
            assert_eq!(
                RingGeometry::from_info(&largest, 1, size),
                Err(RingInfoError::SlotsTooSmall)
            );
        }
        // The largest sizes that fit do not saturate.
        assert_eq!(send_wqe_slot_size(1, u32::MAX - 79), u32::MAX - 15);
        assert_eq!(recv_wqe_slot_size(u32::MAX / SGE_SIZE - 1), u32::MAX - 15);
    }

    #[test]
    fn cq_slots_hold_a_cqe() {
        assert_eq!(CQ_SLOT_SIZE as usize, core::mem::size_of::<crate::Cqe>());
    }
}
