// SPDX-License-Identifier: GPL-2.0

//! Geometry and index arithmetic of the rings shared with user space (the
//! layout is in rust/abi: a control block, then `slot_count` slots of
//! `slot_size` bytes). Indices run freely and wrap at 2^32; the number of
//! entries is `producer - consumer`. One side of every ring is untrusted,
//! so occupancy is checked rather than assumed.

/// Slot count and size of one ring.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct RingGeometry {
    slot_count: u32,
    slot_size: u32,
    slots_offset: u32,
}

/// Why a ring cannot be made.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum GeometryError {
    /// No entries asked for, or more than the limit.
    BadCount,
    /// Slot size zero or not a multiple of 16.
    BadSlotSize,
    /// The ring would not fit in the address space.
    TooLarge,
}

impl RingGeometry {
    /// A ring with room for at least `entries` (at most `max_entries`,
    /// itself a power of two) slots of `slot_size` bytes after a control
    /// block of `slots_offset` bytes. The slot count is rounded up to a
    /// power of two, so the capacity may exceed the request.
    pub fn new(entries: u32, max_entries: u32, slot_size: u32, slots_offset: u32) -> Result<Self, GeometryError> {
        if entries == 0 || entries > max_entries {
            return Err(GeometryError::BadCount);
        }
        if slot_size == 0 || slot_size % 16 != 0 {
            return Err(GeometryError::BadSlotSize);
        }
        let slot_count = entries.checked_next_power_of_two().ok_or(GeometryError::BadCount)?;
        let g = Self { slot_count, slot_size, slots_offset };
        // The byte size must be representable (it is, for u32 inputs, on
        // 64-bit hosts; the check keeps 32-bit builds honest).
        (slot_count as usize)
            .checked_mul(slot_size as usize)
            .and_then(|b| b.checked_add(slots_offset as usize))
            .ok_or(GeometryError::TooLarge)?;
        Ok(g)
    }

    pub fn slot_count(&self) -> u32 {
        self.slot_count
    }

    pub fn slot_size(&self) -> u32 {
        self.slot_size
    }

    /// Bytes of the whole ring: control block and slots.
    pub fn bytes(&self) -> usize {
        self.slots_offset as usize + self.slot_count as usize * self.slot_size as usize
    }

    /// Byte offset of the slot index `index` refers to.
    pub fn slot_offset(&self, index: u32) -> usize {
        self.slots_offset as usize + (index & (self.slot_count - 1)) as usize * self.slot_size as usize
    }

    /// Entries between `consumer` and `producer`, or `None` if the indices
    /// claim more than the ring holds (a broken or hostile peer).
    pub fn occupancy(&self, producer: u32, consumer: u32) -> Option<u32> {
        let n = producer.wrapping_sub(consumer);
        (n <= self.slot_count).then_some(n)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rounds_up_to_powers_of_two() {
        let g = RingGeometry::new(100, 1 << 16, 64, 128).unwrap();
        assert_eq!(g.slot_count(), 128);
        assert_eq!(g.bytes(), 128 + 128 * 64);
        assert_eq!(RingGeometry::new(1, 1 << 16, 64, 128).unwrap().slot_count(), 1);
        assert_eq!(RingGeometry::new(1 << 16, 1 << 16, 64, 128).unwrap().slot_count(), 1 << 16);
    }

    #[test]
    fn rejects_bad_requests() {
        assert_eq!(RingGeometry::new(0, 16, 64, 128), Err(GeometryError::BadCount));
        assert_eq!(RingGeometry::new(17, 16, 64, 128), Err(GeometryError::BadCount));
        assert_eq!(RingGeometry::new(u32::MAX, u32::MAX, 64, 128), Err(GeometryError::BadCount));
        assert_eq!(RingGeometry::new(4, 16, 0, 128), Err(GeometryError::BadSlotSize));
        assert_eq!(RingGeometry::new(4, 16, 24, 128), Err(GeometryError::BadSlotSize));
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
}
