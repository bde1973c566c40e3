// SPDX-License-Identifier: GPL-2.0

//! Work items on the BH workqueue (`system_bh_wq`) that call back an
//! object in an [`Arc`]: deferred work that runs in softirq context on the
//! queuing CPU, as soon as the current softirq or interrupt ends. 6.12's
//! `kernel::workqueue` has neither the BH queue nor a way to cancel.
//!
//! This is for work that must not run where it is noticed but should run
//! promptly: a transmit skb's destructor may run under a qdisc lock, where
//! sending the next packets would take that lock again, and a timer would
//! wait for the next jiffy.
//!
//! Ownership is [`crate::kext::timer`]'s: a [`BhWork`] is a field of its
//! owner `T`, which names it in safe code ([`HasBhWork::bh_work`], checked
//! to lie inside the owner by [`super::embedded`]); while queued it
//! holds one reference to the owner, given to the callback as an
//! `Arc<T>`. Owners call [`BhWork::shutdown`] before their last reference
//! can go from process context: after it no callback runs, and later
//! [`BhWork::queue`] calls do nothing (their reference is given back at
//! once), so nothing of the module runs from this work after `rmmod`.

use crate::ffi::bindings;
use core::sync::atomic::{AtomicPtr, Ordering};
use kernel::{prelude::*, sync::Arc, types::Opaque};

/// The object a [`BhWork`] calls back.
pub(crate) trait HasBhWork: Sized + Send + Sync {
    /// The work item field of `self`.
    fn bh_work(&self) -> &BhWork<Self>;

    /// The work runs. Context: softirq.
    fn bh_work_run(this: Arc<Self>);
}

/// A work item inside a `T` (see the module docs).
///
/// # Invariants
///
/// `owner` is null or the address of the `T` the work item lies in, as
/// `Arc::into_raw` gave it.
#[repr(C)]
#[pin_data]
pub(crate) struct BhWork<T: HasBhWork> {
    /// First, so that a `work_struct` pointer is a `BhWork` pointer.
    #[pin]
    raw: Opaque<bindings::work_struct>,
    /// The owner, for the callback: stored by [`BhWork::queue`] before the
    /// work is queued (the workqueue orders the store before the run).
    owner: AtomicPtr<T>,
}

// SAFETY: the work_struct is only touched through the workqueue API,
// which serialises on its own; the owner it refers to is `Send + Sync`.
unsafe impl<T: HasBhWork> Send for BhWork<T> {}
// SAFETY: as for `Send`.
unsafe impl<T: HasBhWork> Sync for BhWork<T> {}

impl<T: HasBhWork> BhWork<T> {
    /// An idle work item.
    pub(crate) fn new() -> impl PinInit<Self> {
        // INVARIANT: `owner` starts null.
        pin_init!(Self {
            // SAFETY: `INIT_WORK` initialises the whole work_struct in
            // place; the slot stays pinned with its owner.
            raw <- Opaque::ffi_init(|p: *mut bindings::work_struct| unsafe {
                bindings::rxud_bh_work_init(p, Some(Self::run))
            }),
            owner: AtomicPtr::new(core::ptr::null_mut()),
        })
    }

    /// Queues `owner`'s work unless it is queued already (or shut down).
    /// Any context but NMI.
    pub(crate) fn queue(owner: &Arc<T>) {
        let Some(work) = Self::of(owner) else {
            return;
        };
        let held = Arc::into_raw(owner.clone());
        // INVARIANT: the work item lies inside `*held` (`of`), and every
        // queueing of it stores this same address.
        work.owner.store(held.cast_mut(), Ordering::Relaxed);
        // SAFETY: the work_struct was set up by `new` and lives as long as
        // its owner, which `owner` keeps alive.
        let queued = unsafe { bindings::rxud_bh_work_queue(work.raw.get()) };
        if !queued {
            // Already queued (holding a reference of its own) or
            // disabled: ours goes.
            // SAFETY: `held` came from `into_raw` just above.
            drop(unsafe { Arc::from_raw(held) });
        }
    }

    /// Cancels the work for good and waits for a running callback; gives
    /// back the reference a queued work held. Context: process.
    pub(crate) fn shutdown(owner: &Arc<T>) {
        let Some(work) = Self::of(owner) else {
            return;
        };
        // SAFETY: the work_struct was set up by `new`; sleeping is allowed
        // (process context).
        let was_queued = unsafe { bindings::rxud_bh_work_disable_sync(work.raw.get()) };
        if was_queued {
            // SAFETY: a queued work holds one reference, taken by `queue`
            // with `into_raw`; cancelled, it is ours to give back.
            drop(unsafe { Arc::from_raw(&**owner as *const T) });
        }
    }

    /// The work item inside `owner`, if the one [`HasBhWork::bh_work`]
    /// names lies inside it (otherwise a driver bug, logged).
    fn of(owner: &T) -> Option<&Self> {
        let work = owner.bh_work();
        if super::embedded::lies_within(work, owner) {
            Some(work)
        } else {
            pr_err!("a BH work item outside its owner is ignored\n");
            None
        }
    }

    /// The work_struct callback. Context: softirq (the BH workqueue).
    ///
    /// # Safety
    ///
    /// `raw` is the `work_struct` of a `BhWork<T>` inside a `T` in an
    /// `Arc`, queued by [`BhWork::queue`] (so it holds a reference).
    unsafe extern "C" fn run(raw: *mut bindings::work_struct) {
        // SAFETY: `BhWork` is `repr(C)` with the work_struct first (and
        // `Opaque` is transparent), so `raw` is the `BhWork<T>`; it lies
        // in its owner, which the queued work kept alive.
        let work = unsafe { &*raw.cast::<Self>() };
        let owner = work.owner.load(Ordering::Relaxed);
        // SAFETY: `queue` stored the owner's `into_raw` address before
        // queueing (type invariant), and the queued work held that
        // reference; running hands it to us.
        let this = unsafe { Arc::from_raw(owner) };
        T::bh_work_run(this);
    }
}
