// SPDX-License-Identifier: GPL-2.0

//! Objects published to lock-free readers under RCU (6.12's `kernel` crate
//! has no RCU yet).
//!
//! [`RcuSlots`] is a fixed array of slots, each empty or holding a
//! reference (an [`Arc`]) to an object. A reader ([`RcuSlots::get`])
//! takes no lock: inside an RCU read-side critical section it loads the
//! slot and takes a reference of its own. A writer publishes into an empty
//! slot and unpublishes, which waits for a grace period before it hands
//! the slot's reference back: a reader that loaded the pointer before it
//! was cleared has taken its own reference by then, so the object cannot
//! go while a reader is between the load and the increment.
//!
//! This is what the data path looks QPs and MRs up with: one atomic load
//! and one reference count increment per packet, no lock shared between
//! CPUs (rxe takes a spinlock per lookup, as rxud's locked tables do).

use crate::ffi::bindings;
use core::marker::PhantomData;
use core::ptr;
use core::sync::atomic::{AtomicPtr, Ordering};
use kernel::prelude::*;
use kernel::sync::{Arc, ArcBorrow};

/// An RCU read-side critical section, from `new` until drop.
struct ReadGuard(PhantomData<*mut ()>);

impl ReadGuard {
    fn new() -> Self {
        // SAFETY: no precondition; it nests, in any context. The guard is
        // not `Send`, so the matching unlock runs on this CPU's context.
        unsafe { bindings::rxud_rcu_read_lock() };
        Self(PhantomData)
    }
}

impl Drop for ReadGuard {
    fn drop(&mut self) {
        // SAFETY: `new` entered the section this ends.
        unsafe { bindings::rxud_rcu_read_unlock() };
    }
}

/// Slots of RCU-published references to `T`.
///
/// # Invariants
///
/// A non-null slot holds a pointer from [`Arc::into_raw`] and owns that
/// reference. A pointer is cleared from its slot only by
/// [`RcuSlots::unpublish`], which gives the reference back only after a
/// grace period, or by `drop`, when no reader can exist.
pub(crate) struct RcuSlots<T> {
    slots: KVVec<AtomicPtr<T>>,
    /// The slots own references: `Send` and `Sync` follow `Arc<T>`'s.
    _owns: PhantomData<Arc<T>>,
}

impl<T: Send + Sync> RcuSlots<T> {
    /// `n` empty slots. Context: process (allocates).
    pub(crate) fn new(n: usize) -> Result<Self> {
        let mut slots = KVVec::with_capacity(n, GFP_KERNEL)?;
        for _ in 0..n {
            slots.push(AtomicPtr::new(ptr::null_mut()), GFP_KERNEL)?;
        }
        // INVARIANT: every slot is null, so none owns a reference yet.
        Ok(Self {
            slots,
            _owns: PhantomData,
        })
    }

    /// A reference to the object in slot `i`, if any. Any context; takes
    /// no lock.
    pub(crate) fn get(&self, i: usize) -> Option<Arc<T>> {
        let slot = self.slots.get(i)?;
        let _rcu = ReadGuard::new();
        let p = slot.load(Ordering::Acquire);
        if p.is_null() {
            return None;
        }
        // SAFETY: `p` came from `Arc::into_raw` and the slot owned that
        // reference when we loaded it (type invariant); the object cannot
        // be freed before our read-side section ends, because
        // `unpublish` waits for a grace period before giving the slot's
        // reference back. The borrow does not outlive the section: it is
        // turned into a reference of our own at once.
        let borrowed = unsafe { ArcBorrow::from_raw(p) };
        Some(Arc::from(borrowed))
    }

    /// Publishes `value` in slot `i`, which must be empty; otherwise (or
    /// if `i` is out of range) gives `value` back. Any context.
    pub(crate) fn publish(&self, i: usize, value: Arc<T>) -> core::result::Result<(), Arc<T>> {
        let Some(slot) = self.slots.get(i) else {
            return Err(value);
        };
        let p = Arc::into_raw(value).cast_mut();
        // INVARIANT: `p` is stored only into an empty slot, which then owns
        // the reference `into_raw` gave up; if the slot is taken, nothing is
        // stored and the reference goes back to the caller.
        match slot.compare_exchange(ptr::null_mut(), p, Ordering::Release, Ordering::Relaxed) {
            Ok(_) => Ok(()),
            // SAFETY: `p` is the reference `into_raw` just gave us, which
            // nobody else has seen.
            Err(_) => Err(unsafe { Arc::from_raw(p) }),
        }
    }

    /// Puts `new` in slot `i` in place of `old`, and returns the slot's
    /// reference to `old` once no reader can still be using it; gives `new`
    /// back if the slot does not hold `old`. Readers find one or the
    /// other, never neither. Context: process (waits for an RCU grace
    /// period).
    pub(crate) fn replace(
        &self,
        i: usize,
        old: &Arc<T>,
        new: Arc<T>,
    ) -> core::result::Result<Arc<T>, Arc<T>> {
        let Some(slot) = self.slots.get(i) else {
            return Err(new);
        };
        // The pointer `into_raw` gave for `old`: its contents' address.
        let expected = ptr::from_ref::<T>(old).cast_mut();
        let p = Arc::into_raw(new).cast_mut();
        // INVARIANT: the slot goes from one owned reference to another:
        // `p`'s, which `into_raw` gave up, replaces `old`'s, which is given
        // back below after a grace period.
        if slot
            .compare_exchange(expected, p, Ordering::AcqRel, Ordering::Relaxed)
            .is_err()
        {
            // SAFETY: `p` is the reference `into_raw` just gave us, which
            // nobody else has seen.
            return Err(unsafe { Arc::from_raw(p) });
        }
        crate::kext::sync::synchronize_rcu();
        // SAFETY: the slot owned this reference to `old` (type invariant)
        // and no longer names it; readers that loaded it before the
        // exchange have left their read-side sections.
        Ok(unsafe { Arc::from_raw(expected) })
    }

    /// Empties slot `i` and returns its reference once no reader can
    /// still be using the pointer. Context: process (waits for an RCU
    /// grace period).
    pub(crate) fn unpublish(&self, i: usize) -> Option<Arc<T>> {
        // INVARIANT: clearing the slot is `unpublish`'s to do; the reference
        // the slot owned is given back below, after a grace period.
        let p = self.slots.get(i)?.swap(ptr::null_mut(), Ordering::AcqRel);
        if p.is_null() {
            return None;
        }
        crate::kext::sync::synchronize_rcu();
        // SAFETY: the slot owned this reference (type invariant) and no
        // longer names it; readers that loaded it before the swap have
        // left their read-side sections (the grace period above).
        Some(unsafe { Arc::from_raw(p) })
    }
}

impl<T> Drop for RcuSlots<T> {
    fn drop(&mut self) {
        for slot in self.slots.iter_mut() {
            let p = *slot.get_mut();
            if !p.is_null() {
                // SAFETY: the slot owns this reference (type invariant);
                // `&mut self` means no reader holds the slots.
                drop(unsafe { Arc::from_raw(p) });
            }
        }
    }
}
