// SPDX-License-Identifier: GPL-2.0

//! Locking primitives 6.12's `kernel::sync` lacks.
//!
//! [`SpinLockIrq`] is a `spinlock_t` taken with `spin_lock_irqsave`: the
//! lock for data that process context shares with softirq or hard-irq
//! context. ib_core calls some verbs from interrupt context
//! (`req_notify_cq`, `create_ah`/`destroy_ah` without the SLEEPABLE flag,
//! kernel ULPs posting work), and the data path's receive side runs in the
//! UDP socket's softirq. A plain [`kernel::sync::SpinLock`] taken there
//! and in process context with interrupts enabled can deadlock on one CPU,
//! which lockdep reports as an inconsistent lock state. Guards restore the
//! interrupt state they found, so nesting in any context is safe.
//!
//! It plugs into `kernel::sync::lock::Lock` as a [`Backend`], so guards,
//! lock classes and pin-init work as for the kernel's own locks.

use crate::ffi::bindings;
use kernel::sync::lock::{Backend, Lock};

/// A spinlock that disables local interrupts while held.
pub(crate) type SpinLockIrq<T> = Lock<T, SpinLockIrqBackend>;

/// Creates a [`SpinLockIrq`] initialiser with a lockdep class of its own
/// for each call site, named like `kernel::new_spinlock!`.
macro_rules! new_spinlock_irq {
    ($inner:expr, $name:literal) => {
        $crate::kext::sync::SpinLockIrq::new(
            $inner,
            ::kernel::c_str!($name),
            ::kernel::static_lock_class!(),
        )
    };
}
pub(crate) use new_spinlock_irq;

/// The `spin_lock_irqsave` backend of [`SpinLockIrq`].
pub(crate) struct SpinLockIrqBackend;

// SAFETY: a `spinlock_t` gives mutual exclusion between `lock` and
// `unlock`; `relock` is the default, which calls `lock` again (the same
// method). The saved flags travel in the guard, so every unlock restores
// the interrupt state of its own lock call.
unsafe impl Backend for SpinLockIrqBackend {
    type State = kernel::bindings::spinlock_t;
    type GuardState = kernel::ffi::c_ulong;

    unsafe fn init(
        ptr: *mut Self::State,
        name: *const kernel::ffi::c_char,
        key: *mut kernel::bindings::lock_class_key,
    ) {
        // SAFETY: per the trait, `ptr` is valid for writes and `name`/`key`
        // live forever: exactly what `__spin_lock_init` needs.
        unsafe { kernel::bindings::__spin_lock_init(ptr, name, key) }
    }

    unsafe fn lock(ptr: *mut Self::State) -> Self::GuardState {
        // SAFETY: per the trait, `ptr` is an initialised lock. Our bindings
        // and the kernel crate's describe the same C `spinlock_t`.
        unsafe { bindings::rxud_spin_lock_irqsave(ptr.cast()) }
    }

    unsafe fn unlock(ptr: *mut Self::State, flags: &Self::GuardState) {
        // SAFETY: per the trait, the caller owns the lock, and `flags` are
        // what the matching `lock` saved.
        unsafe { bindings::rxud_spin_unlock_irqrestore(ptr.cast(), *flags) }
    }
}

/// A spinlock that disables softirqs (bottom halves) on the local CPU
/// while held: for data process context shares with softirq context only
/// (the receive path, timers), when the holder must call code that
/// itself disables and re-enables softirqs, which is not allowed with
/// interrupts off (IPv6 route lookups do, for instance).
pub(crate) type SpinLockBh<T> = Lock<T, SpinLockBhBackend>;
/// A held [`SpinLockBh`].
pub(crate) type SpinLockBhGuard<'a, T> = kernel::sync::lock::Guard<'a, T, SpinLockBhBackend>;

/// Creates a [`SpinLockBh`] initialiser with a lockdep class of its own
/// for each call site.
macro_rules! new_spinlock_bh {
    ($inner:expr, $name:literal) => {
        $crate::kext::sync::SpinLockBh::new(
            $inner,
            ::kernel::c_str!($name),
            ::kernel::static_lock_class!(),
        )
    };
}
pub(crate) use new_spinlock_bh;

/// The `spin_lock_bh` backend of [`SpinLockBh`].
pub(crate) struct SpinLockBhBackend;

// SAFETY: a `spinlock_t` gives mutual exclusion between `lock` and
// `unlock`; `relock` is the default, which calls `lock` again. Softirqs
// stay disabled from `lock` to `unlock` on the same CPU (spinlocks do not
// migrate).
unsafe impl Backend for SpinLockBhBackend {
    type State = kernel::bindings::spinlock_t;
    type GuardState = ();

    unsafe fn init(
        ptr: *mut Self::State,
        name: *const kernel::ffi::c_char,
        key: *mut kernel::bindings::lock_class_key,
    ) {
        // SAFETY: as for `SpinLockIrqBackend::init`.
        unsafe { kernel::bindings::__spin_lock_init(ptr, name, key) }
    }

    unsafe fn lock(ptr: *mut Self::State) -> Self::GuardState {
        // SAFETY: per the trait, `ptr` is an initialised lock; our
        // bindings and the kernel crate's describe the same C type.
        unsafe { bindings::rxud_spin_lock_bh(ptr.cast()) }
    }

    unsafe fn unlock(ptr: *mut Self::State, _guard_state: &Self::GuardState) {
        // SAFETY: per the trait, the caller owns the lock.
        unsafe { bindings::rxud_spin_unlock_bh(ptr.cast()) }
    }
}

/// Waits until every RCU read-side critical section (softirq receive
/// paths among them) that began before the call has ended. Sleeps.
pub(crate) fn synchronize_rcu() {
    // SAFETY: callable from any sleepable context; no precondition.
    unsafe { bindings::synchronize_rcu() };
}

/// Whether the caller may send packets and take bottom-half locks: not in
/// hard irq or NMI, interrupts enabled. Kernel consumers may post work
/// requests from anywhere; where this is false, sending is deferred.
pub(crate) fn may_send_inline() -> bool {
    // SAFETY: reads the preempt count and interrupt flag; no precondition.
    unsafe { bindings::rxud_may_send_inline() }
}
