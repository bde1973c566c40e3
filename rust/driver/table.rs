// SPDX-License-Identifier: GPL-2.0

//! Numbered objects: QP numbers and AH numbers name objects on the wire and
//! in user work requests, and the data path looks objects up by them. An
//! [`IndexTable`] hands out numbers in `[base, base + max)` and maps them
//! back to the objects.
//!
//! A number is reserved first and filled later, so an object can be built
//! knowing its own number. Which number comes next is
//! [`crate::proto::numbers`]'s policy: round robin, not lowest-free, so a
//! number freed now is reused as late as possible and late packets for a
//! destroyed QP do not reach its successor; a number removed with
//! [`IndexTable::remove_held`] is not handed out again before a deadline
//! (XUD's QPs, xud.rst rule 5); a table made with [`Start::Random`] starts
//! at a random number.
//!
//! Lookups take the table's lock, or none in a table made with
//! [`IndexTable::new_rcu`] (QPs and MRs, looked up for every packet):
//! there the objects are also published under RCU ([`RcuSlots`]), and
//! removing one waits for a grace period.

use crate::kext::rcu::RcuSlots;
use crate::kext::sync::{new_spinlock_irq, SpinLockIrq};
use crate::kext::timer::now_ns;
use crate::proto::numbers;
use kernel::{prelude::*, sync::Arc};

enum Slot<T> {
    Free,
    /// Free, but not to be handed out before this time (`now_ns`).
    Held(u64),
    Reserved,
    Used(Arc<T>),
}

impl<T> Slot<T> {
    fn policy(&self) -> numbers::Slot {
        match self {
            Slot::Free => numbers::Slot::Free,
            Slot::Held(until_ns) => numbers::Slot::Held {
                until_ns: *until_ns,
            },
            Slot::Reserved | Slot::Used(_) => numbers::Slot::Taken,
        }
    }
}

/// Where a table's numbers start.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum Start {
    /// At the base, counting up.
    Base,
    /// At a random number (QPNs: a reloaded module rarely hands out a
    /// number a peer still holds state for).
    Random,
}

struct Slots<T> {
    /// Allocated for `max` entries up front, so that reserving never
    /// allocates (and works in atomic context).
    entries: KVVec<Slot<T>>,
    /// Where the next search starts.
    cursor: usize,
    /// Reserved or used slots (held ones are not counted: they are free
    /// once their time is up).
    taken: u32,
}

/// Every operation is safe in any context (the lock disables interrupts:
/// AHs are created and destroyed in atomic context, and the data path
/// looks numbers up in softirq; nothing under it allocates or frees),
/// except [`IndexTable::remove`] in an RCU table, which sleeps.
#[pin_data]
pub(crate) struct IndexTable<T> {
    #[pin]
    slots: SpinLockIrq<Slots<T>>,
    /// With `new_rcu`: the objects again, for lookups without the lock.
    published: Option<RcuSlots<T>>,
    base: u32,
    max: u32,
}

/// A reserved number; dropping it without [`Reservation::fill`] frees it.
pub(crate) struct Reservation<'a, T: Send + Sync> {
    table: &'a IndexTable<T>,
    index: usize,
}

impl<T: Send + Sync> IndexTable<T> {
    /// A table whose lookups take its lock. Context: process.
    pub(crate) fn new(base: u32, max: u32) -> Result<Arc<Self>> {
        Self::with(base, max, None, Start::Base)
    }

    /// A table whose lookups take no lock (RCU); removing an object from
    /// it sleeps. Context: process.
    pub(crate) fn new_rcu(base: u32, max: u32, start: Start) -> Result<Arc<Self>> {
        Self::with(base, max, Some(RcuSlots::new(max as usize)?), start)
    }

    fn with(
        base: u32,
        max: u32,
        published: Option<RcuSlots<T>>,
        start: Start,
    ) -> Result<Arc<Self>> {
        let mut entries = KVVec::with_capacity(max as usize, GFP_KERNEL)?;
        let mut cursor = 0;
        if start == Start::Random && max > 0 {
            // Every slot exists from the start, so the search can begin
            // anywhere (the capacity is there already: no allocation).
            for _ in 0..max {
                entries.push(Slot::Free, GFP_KERNEL)?;
            }
            cursor = (crate::kext::random::u64() % u64::from(max)) as usize;
        }
        Arc::pin_init(
            pin_init!(Self {
                slots <- new_spinlock_irq!(Slots { entries, cursor, taken: 0 }, "rxud:index_table"),
                published,
                base,
                max,
            }),
            GFP_KERNEL,
        )
    }

    /// Most objects the table holds at once.
    pub(crate) fn max(&self) -> u32 {
        self.max
    }

    /// Reserves a fresh number. `ENOMEM` when the table is full. Does not
    /// sleep.
    pub(crate) fn reserve(&self) -> Result<Reservation<'_, T>> {
        let mut s = self.slots.lock();
        if s.taken >= self.max {
            return Err(ENOMEM);
        }
        let len = s.entries.len();
        let index = if (len as u32) < self.max {
            // Grow while below the limit, so that numbers keep moving
            // forward before any is reused. Never allocates: the capacity
            // is `max`.
            s.entries.push(Slot::Free, GFP_ATOMIC)?;
            len
        } else {
            let entries = &s.entries;
            numbers::next_free(len, s.cursor, now_ns(), |i| entries[i].policy()).ok_or(ENOMEM)?
        };
        s.entries[index] = Slot::Reserved;
        s.cursor = index + 1;
        s.taken += 1;
        Ok(Reservation { table: self, index })
    }

    /// Takes the object numbered `id` out of the table; the number is free
    /// again. In an RCU table, returns once no lookup can still find the
    /// object (after a grace period): context process.
    pub(crate) fn remove(&self, id: u32) -> Option<Arc<T>> {
        self.take_out(id, None, None)
    }

    /// [`IndexTable::remove`], if the object numbered `id` is `this` (it
    /// may have been replaced: [`IndexTable::replace`]).
    pub(crate) fn remove_this(&self, id: u32, this: &Arc<T>) -> Option<Arc<T>> {
        self.take_out(id, None, Some(this))
    }

    /// Puts `new` under number `id` in place of `old`, which must be there
    /// (`EINVAL` otherwise); the number stays taken, and a lookup finds
    /// one or the other. Returns once no lookup can still find `old`. In
    /// an RCU table: context process. Callers do not replace or remove one
    /// number concurrently (the object's owner does either, once at a
    /// time).
    pub(crate) fn replace(&self, id: u32, old: &Arc<T>, new: Arc<T>) -> Result {
        let index = id.checked_sub(self.base).ok_or(EINVAL)? as usize;
        {
            let mut s = self.slots.lock();
            let slot = s.entries.get_mut(index).ok_or(EINVAL)?;
            if !matches!(slot, Slot::Used(v) if Arc::ptr_eq(v, old)) {
                return Err(EINVAL);
            }
            *slot = Slot::Used(new.clone());
        }
        if let Some(p) = &self.published {
            // The slot held `old` (published with it by `fill` or an
            // earlier replace), and no one else changes this number now.
            if p.replace(index, old, new).is_err() {
                pr_err!(
                    "index table: slot {} did not hold the replaced object\n",
                    id
                );
            }
        }
        Ok(())
    }

    /// [`IndexTable::remove`], but the number is not handed out again for
    /// `hold_ns` nanoseconds.
    pub(crate) fn remove_held(&self, id: u32, hold_ns: u64) -> Option<Arc<T>> {
        self.take_out(id, Some(hold_ns), None)
    }

    fn take_out(&self, id: u32, hold_ns: Option<u64>, only: Option<&Arc<T>>) -> Option<Arc<T>> {
        let index = id.checked_sub(self.base)? as usize;
        let v = {
            let mut s = self.slots.lock();
            let slot = s.entries.get_mut(index)?;
            let Slot::Used(v) = slot else {
                // Free, or reserved by a creation still in progress.
                return None;
            };
            if only.is_some_and(|this| !Arc::ptr_eq(v, this)) {
                // Another object now: the one asked for was replaced.
                return None;
            }
            // Reserved while it is unpublished: the number cannot be
            // handed out again before its slot is empty.
            let Slot::Used(v) = core::mem::replace(slot, Slot::Reserved) else {
                return None;
            };
            v
        };
        if let Some(p) = &self.published {
            drop(p.unpublish(index));
        }
        let mut s = self.slots.lock();
        s.entries[index] = match hold_ns {
            Some(ns) => Slot::Held(now_ns().saturating_add(ns)),
            None => Slot::Free,
        };
        s.taken -= 1;
        // Dropped by the caller, outside the lock.
        Some(v)
    }

    /// Calls `f` on every object in the table, with the table's lock
    /// dropped (`f` may take locks of its own). Objects added meanwhile
    /// may be missed. Context: process (O(max) lock round trips).
    pub(crate) fn for_each(&self, mut f: impl FnMut(&Arc<T>)) {
        for id in self.base..self.base.saturating_add(self.max) {
            if let Some(v) = self.get(id) {
                f(&v);
            }
        }
    }

    /// The object numbered `id`, if any. (For the data path: packets and
    /// work requests name QPs, MRs and AHs by number.) Any context.
    pub(crate) fn get(&self, id: u32) -> Option<Arc<T>> {
        let index = id.checked_sub(self.base)? as usize;
        if let Some(p) = &self.published {
            return p.get(index);
        }
        match self.slots.lock().entries.get(index)? {
            Slot::Used(v) => Some(v.clone()),
            _ => None,
        }
    }
}

impl<T: Send + Sync> Reservation<'_, T> {
    /// The reserved number.
    pub(crate) fn id(&self) -> u32 {
        self.table.base + self.index as u32
    }

    /// Stores `value` under the reserved number.
    pub(crate) fn fill(self, value: Arc<T>) -> u32 {
        let id = self.id();
        if let Some(p) = &self.table.published {
            // The slot is empty: a number is reserved only when its slot
            // is free, and `remove` frees it once unpublished.
            if p.publish(self.index, value.clone()).is_err() {
                pr_err!("index table: slot {} was not empty\n", id);
            }
        }
        self.table.slots.lock().entries[self.index] = Slot::Used(value);
        core::mem::forget(self);
        id
    }
}

impl<T: Send + Sync> Drop for Reservation<'_, T> {
    fn drop(&mut self) {
        let mut s = self.table.slots.lock();
        s.entries[self.index] = Slot::Free;
        s.taken -= 1;
    }
}
