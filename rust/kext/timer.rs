// SPDX-License-Identifier: GPL-2.0

//! One-shot kernel timers (`struct timer_list`) that call back an object
//! in an [`Arc`]; 6.12's `kernel` crate has none.
//!
//! A [`Timer`] is a field of its owner `T`, which names it in safe code
//! ([`HasTimer::timer`]); the field is checked to lie inside the owner
//! whenever the timer is armed or shut down ([`super::embedded`]), so a
//! wrong implementation cannot make the callback find another object.
//! While the timer is pending it holds one reference to the owner, so the
//! callback always finds the owner alive, whoever dropped their references
//! meanwhile: arming takes a reference unless the timer was already
//! pending (then the one it holds is kept), the callback gets it as an
//! `Arc<T>`, and [`Timer::shutdown`] gives back the reference of a pending
//! timer.
//!
//! Owners call [`Timer::shutdown`] before their last reference can go
//! from process context (e.g. when the object is destroyed): after it, no
//! callback runs or will run, so nothing of the module runs from a timer
//! after `rmmod` can start. The timer does not shut itself down on drop:
//! the owner may be dropped by the callback itself (its reference was the
//! last), where waiting for the callback would wait for itself.
//!
//! Timers fire in softirq context, with jiffy resolution (a delay is
//! rounded up to the next jiffy).

use crate::ffi::bindings;
use core::sync::atomic::{AtomicPtr, Ordering};
use kernel::{prelude::*, sync::Arc, types::Opaque};

/// The object a [`Timer`] calls back.
pub(crate) trait HasTimer: Sized + Send + Sync {
    /// The timer field of `self`.
    fn timer(&self) -> &Timer<Self>;

    /// The timer fired. Context: softirq.
    fn timer_fired(this: Arc<Self>);
}

/// A one-shot timer inside a `T` (see the module docs).
///
/// # Invariants
///
/// `owner` is null or the address of the `T` the timer lies in, as
/// `Arc::into_raw` gave it.
#[repr(C)]
#[pin_data]
pub(crate) struct Timer<T: HasTimer> {
    /// First, so that a `timer_list` pointer is a `Timer` pointer.
    #[pin]
    raw: Opaque<bindings::timer_list>,
    /// The owner, for the callback: stored by [`Timer::arm`] before the
    /// timer is queued (the timer base lock orders the store before the
    /// callback's load).
    owner: AtomicPtr<T>,
}

// SAFETY: the timer_list is only touched through the kernel's timer API,
// which serialises on the timer base lock; the owner it refers to is
// `Send + Sync`.
unsafe impl<T: HasTimer> Send for Timer<T> {}
// SAFETY: as for `Send`.
unsafe impl<T: HasTimer> Sync for Timer<T> {}

impl<T: HasTimer> Timer<T> {
    /// An idle timer.
    pub(crate) fn new() -> impl PinInit<Self> {
        // INVARIANT: `owner` starts null.
        pin_init!(Self {
            // SAFETY: `timer_setup` initialises the whole timer_list in
            // place; the slot stays pinned with its owner.
            raw <- Opaque::ffi_init(|p: *mut bindings::timer_list| unsafe {
                bindings::rxud_timer_setup(p, Some(Self::fire))
            }),
            owner: AtomicPtr::new(core::ptr::null_mut()),
        })
    }

    /// Fires `owner`'s timer `delay_ns` from now (re-arming it if it is
    /// pending). Any context.
    pub(crate) fn arm(owner: &Arc<T>, delay_ns: u64) {
        let Some(timer) = Self::of(owner) else {
            return;
        };
        let held = Arc::into_raw(owner.clone());
        // INVARIANT: the timer lies inside `*held` (`of`), and every arm
        // of it stores this same address.
        timer.owner.store(held.cast_mut(), Ordering::Relaxed);
        // SAFETY: the timer_list was set up by `new` and lives as long as
        // its owner, which `owner` keeps alive.
        let was_pending = unsafe { bindings::rxud_timer_arm_ns(timer.raw.get(), delay_ns) };
        if was_pending != 0 {
            // The pending timer holds a reference already; ours goes.
            // SAFETY: `held` came from `into_raw` just above.
            drop(unsafe { Arc::from_raw(held) });
        }
    }

    /// Stops the timer for good and waits for a running callback; gives
    /// back the reference a pending timer held. Later `arm`s are ignored
    /// (and leak their reference: do not arm after this). Context:
    /// process.
    pub(crate) fn shutdown(owner: &Arc<T>) {
        let Some(timer) = Self::of(owner) else {
            return;
        };
        // SAFETY: the timer_list was set up by `new`; sleeping is allowed
        // (process context).
        let was_pending = unsafe { bindings::timer_shutdown_sync(timer.raw.get()) };
        if was_pending != 0 {
            // SAFETY: a pending timer holds one reference, taken by `arm`
            // with `into_raw`; deactivated, it is ours to give back.
            drop(unsafe { Arc::from_raw(&**owner as *const T) });
        }
    }

    /// The timer inside `owner`, if the one [`HasTimer::timer`] names
    /// lies inside it (otherwise a driver bug, logged).
    fn of(owner: &T) -> Option<&Self> {
        let timer = owner.timer();
        if super::embedded::lies_within(timer, owner) {
            Some(timer)
        } else {
            pr_err!("a timer outside its owner is ignored\n");
            None
        }
    }

    /// The timer_list callback. Context: softirq.
    ///
    /// # Safety
    ///
    /// `raw` is the `timer_list` of a `Timer<T>` inside a `T` in an
    /// `Arc`, armed by [`Timer::arm`] (so it holds a reference).
    unsafe extern "C" fn fire(raw: *mut bindings::timer_list) {
        // SAFETY: `Timer` is `repr(C)` with the timer_list first (and
        // `Opaque` is transparent), so `raw` is the `Timer<T>`; it lies in
        // its owner, which the pending timer kept alive.
        let timer = unsafe { &*raw.cast::<Self>() };
        let owner = timer.owner.load(Ordering::Relaxed);
        // SAFETY: `arm` stored the owner's `into_raw` address before
        // queueing the timer (type invariant), and the pending timer held
        // that reference; firing hands it to us.
        let this = unsafe { Arc::from_raw(owner) };
        T::timer_fired(this);
    }
}

/// Monotonic time in nanoseconds (`ktime_get_ns`). Any context.
pub(crate) fn now_ns() -> u64 {
    // SAFETY: no precondition; callable in any context.
    unsafe { bindings::rxud_now_ns() }
}

/// Whether the module parameter `timing` asks for the time of rxud's
/// steps to be counted (`driver::counters::Span`). Any context.
pub(crate) fn timing_enabled() -> bool {
    // SAFETY: no precondition; reads a module parameter.
    unsafe { bindings::rxud_timing() }
}

/// Sleeps for about `ms` milliseconds (`msleep`). Context: process.
pub(crate) fn sleep_ms(ms: u32) {
    // SAFETY: no precondition beyond a sleepable context, which callers
    // guarantee (documented).
    unsafe { bindings::rxud_msleep(ms) };
}
