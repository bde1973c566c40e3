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
//! Ownership is [`crate::kext::timer`]'s: a [`BhWork`] is a field of its owner
//! `T` ([`HasBhWork`], written by [`impl_has_bh_work!`]); while queued it
//! holds one reference to the owner, given to the callback as an
//! `Arc<T>`. Owners call [`BhWork::shutdown`] before their last reference
//! can go from process context: after it no callback runs, and later
//! [`BhWork::queue`] calls do nothing (their reference is given back at
//! once), so nothing of the module runs from this work after `rmmod`.

use crate::ffi::bindings;
use core::marker::PhantomData;
use kernel::{prelude::*, sync::Arc, types::Opaque};

/// The object a [`BhWork`] calls back.
///
/// # Safety
///
/// `OFFSET` is the byte offset of a `BhWork<Self>` field inside `Self`.
pub(crate) unsafe trait HasBhWork: Sized + Send + Sync {
    /// Where the work item lies in `Self`.
    const OFFSET: usize;

    /// The work runs. Context: softirq.
    fn bh_work_run(this: Arc<Self>);
}

/// Implements [`HasBhWork`] for a type with a `BhWork<Self>` field,
/// calling `$handler(Arc<Self>)` when it runs.
macro_rules! impl_has_bh_work {
    ($ty:ty, $field:ident, $handler:path) => {
        // SAFETY: the offset is that of the named field, whose type the
        // function below checks to be `BhWork<$ty>`.
        unsafe impl $crate::kext::bh_work::HasBhWork for $ty {
            const OFFSET: usize = {
                const fn _field_is_bh_work(t: &$ty) -> &$crate::kext::bh_work::BhWork<$ty> {
                    &t.$field
                }
                ::core::mem::offset_of!($ty, $field)
            };

            fn bh_work_run(this: ::kernel::sync::Arc<Self>) {
                $handler(this)
            }
        }
    };
}
pub(crate) use impl_has_bh_work;

/// A work item inside a `T` (see the module docs).
#[repr(C)]
#[pin_data]
pub(crate) struct BhWork<T: HasBhWork> {
    /// First, so that a `work_struct` pointer is a `BhWork` pointer.
    #[pin]
    raw: Opaque<bindings::work_struct>,
    _owner: PhantomData<T>,
}

// SAFETY: the work_struct is only touched through the workqueue API,
// which serialises on its own; the owner it refers to is `Send + Sync`.
unsafe impl<T: HasBhWork> Send for BhWork<T> {}
// SAFETY: as for `Send`.
unsafe impl<T: HasBhWork> Sync for BhWork<T> {}

impl<T: HasBhWork> BhWork<T> {
    /// An idle work item.
    pub(crate) fn new() -> impl PinInit<Self> {
        pin_init!(Self {
            // SAFETY: `INIT_WORK` initialises the whole work_struct in
            // place; the slot stays pinned with its owner.
            raw <- Opaque::ffi_init(|p: *mut bindings::work_struct| unsafe {
                bindings::rxud_bh_work_init(p, Some(Self::run))
            }),
            _owner: PhantomData,
        })
    }

    /// Queues `owner`'s work unless it is queued already (or shut down).
    /// `owner` must be the object this work item is part of. Any context
    /// but NMI.
    pub(crate) fn queue(owner: &Arc<T>) {
        let work = Self::of(owner);
        let held = Arc::into_raw(owner.clone());
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
        let work = Self::of(owner);
        // SAFETY: the work_struct was set up by `new`; sleeping is allowed
        // (process context).
        let was_queued = unsafe { bindings::rxud_bh_work_disable_sync(work.raw.get()) };
        if was_queued {
            // SAFETY: a queued work holds one reference, taken by `queue`
            // with `into_raw`; cancelled, it is ours to give back.
            drop(unsafe { Arc::from_raw(&**owner as *const T) });
        }
    }

    /// The work item inside `owner`.
    fn of(owner: &T) -> &Self {
        let p = (owner as *const T).cast::<u8>();
        // SAFETY: `HasBhWork::OFFSET` is the offset of a `BhWork<T>` field
        // of `T`, so the result points into `owner` at a live `BhWork<T>`
        // borrowed for as long as `owner`.
        unsafe { &*p.add(T::OFFSET).cast::<Self>() }
    }

    /// The work_struct callback. Context: softirq (the BH workqueue).
    ///
    /// # Safety
    ///
    /// `raw` is the `work_struct` of a `BhWork<T>` inside a `T` in an
    /// `Arc`, queued by [`BhWork::queue`] (so it holds a reference).
    unsafe extern "C" fn run(raw: *mut bindings::work_struct) {
        // SAFETY: `BhWork` is `repr(C)` with the work_struct first (and
        // `Opaque` is transparent), so `raw` is the `BhWork<T>`; it lies at
        // `T::OFFSET` in its owner (`HasBhWork`).
        let owner = unsafe { raw.cast::<u8>().sub(T::OFFSET) }.cast::<T>();
        // SAFETY: the queued work held a reference taken with `into_raw`
        // (`queue`); running hands it to us.
        let this = unsafe { Arc::from_raw(owner) };
        T::bh_work_run(this);
    }
}
