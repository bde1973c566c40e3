// SPDX-License-Identifier: GPL-2.0

//! A queue's ring: shared memory laid out as rust/abi describes
//! (`RingControl`, then slots), with the geometry that indexes it.

use crate::abi::{RingControl, RingGeometry, RingInfo, RING_SLOTS_OFFSET};
use crate::ib::{SharedMem, UContext};
use core::mem::offset_of;
use kernel::prelude::*;

pub(crate) struct Ring {
    mem: SharedMem,
    geometry: RingGeometry,
}

const PRODUCER: usize = offset_of!(RingControl, producer);
const CONSUMER: usize = offset_of!(RingControl, consumer);

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

    // The data path's requester and responder consume SQ/RQ rings.
    #[allow(dead_code)]
    pub(crate) fn producer(&self) -> u32 {
        self.mem.load_acquire::<PRODUCER>()
    }

    pub(crate) fn consumer(&self) -> u32 {
        self.mem.load_acquire::<CONSUMER>()
    }

    pub(crate) fn set_producer(&self, index: u32) {
        self.mem.store_release::<PRODUCER>(index)
    }

    #[allow(dead_code)]
    pub(crate) fn set_consumer(&self, index: u32) {
        self.mem.store_release::<CONSUMER>(index)
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
