// SPDX-License-Identifier: GPL-2.0

//! The QP's containers of fixed size, allocated when it is created: a
//! [`Pool`] of byte slots handed out by index (the saved send WQEs, the
//! claimed receives), and a destination's [`Fifo`] of posted WQEs,
//! linked through the WQE pool.
//!
//! Apart because both halves use them and neither needs their insides:
//! taking a slot, giving it back and queueing allocate nothing, in any
//! context.

use kernel::prelude::*;

/// A pool of fixed-size byte slots (saved send WQEs, claimed receives),
/// handed out by index.
pub(super) struct Pool {
    bytes: KVVec<u8>,
    pub(super) slot: usize,
    /// `free[..nfree]` are the free indices.
    free: KVec<u32>,
    nfree: usize,
    /// Per slot: the next slot in its destination's queue ([`Fifo`]).
    link: KVec<u32>,
}

impl Pool {
    pub(super) fn new(n: u32, slot: usize) -> Result<Self> {
        let len = (n as usize).checked_mul(slot).ok_or(EINVAL)?;
        let mut free = KVec::with_capacity(n as usize, GFP_KERNEL)?;
        for i in (0..n).rev() {
            free.push(i, GFP_KERNEL)?;
        }
        Ok(Self {
            bytes: KVVec::from_elem(0u8, len, GFP_KERNEL)?,
            slot,
            free,
            nfree: n as usize,
            link: KVec::from_elem(NO_SLOT, n as usize, GFP_KERNEL)?,
        })
    }

    pub(super) fn take(&mut self) -> Option<u32> {
        let i = self.nfree.checked_sub(1)?;
        self.nfree = i;
        self.free.get(i).copied()
    }

    pub(super) fn give(&mut self, i: u32) {
        if let Some(f) = self.free.get_mut(self.nfree) {
            *f = i;
            self.nfree += 1;
        }
    }

    /// Slots handed out and not given back.
    pub(super) fn in_use(&self) -> u32 {
        (self.free.len() - self.nfree) as u32
    }

    pub(super) fn get(&self, i: u32) -> &[u8] {
        let at = i as usize * self.slot;
        self.bytes.get(at..at + self.slot).unwrap_or(&[])
    }

    pub(super) fn get_mut(&mut self, i: u32) -> &mut [u8] {
        let at = i as usize * self.slot;
        self.bytes.get_mut(at..at + self.slot).unwrap_or(&mut [])
    }
}

/// No slot (the end of a [`Fifo`]).
const NO_SLOT: u32 = u32::MAX;

/// A destination's queue of posted WQE handles, first in first out,
/// linked through the WQE pool (no memory of its own), bounded by the
/// destination's share of the send queue.
pub(super) struct Fifo {
    head: u32,
    tail: u32,
    len: u32,
}

impl Fifo {
    pub(super) const fn new() -> Self {
        Self {
            head: NO_SLOT,
            tail: NO_SLOT,
            len: 0,
        }
    }

    pub(super) fn is_empty(&self) -> bool {
        self.len == 0
    }

    pub(super) fn len(&self) -> u32 {
        self.len
    }

    /// Appends `h`; false if the queue holds `cap` entries already.
    pub(super) fn push(&mut self, pool: &mut Pool, h: u32, cap: u32) -> bool {
        if self.len >= cap {
            return false;
        }
        if let Some(l) = pool.link.get_mut(h as usize) {
            *l = NO_SLOT;
        }
        match pool.link.get_mut(self.tail as usize) {
            Some(l) if self.len > 0 => *l = h,
            _ => self.head = h,
        }
        self.tail = h;
        self.len += 1;
        true
    }

    pub(super) fn front(&self) -> Option<u32> {
        (self.len > 0).then_some(self.head)
    }

    pub(super) fn pop(&mut self, pool: &Pool) -> Option<u32> {
        let h = self.front()?;
        self.head = pool.link.get(h as usize).copied().unwrap_or(NO_SLOT);
        self.len -= 1;
        if self.len == 0 {
            self.head = NO_SLOT;
            self.tail = NO_SLOT;
        }
        Some(h)
    }
}
