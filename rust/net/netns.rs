// SPDX-License-Identifier: GPL-2.0

//! Network namespaces: which one a netdev is in, and being told when one
//! ends.
//!
//! rxud holds no reference on a namespace. A counted one (`get_net`) kept
//! every namespace with an rxud device alive, so `ip netns del` freed
//! neither: the namespace's netdevs were never unregistered, so the
//! device never went. What rxud keeps in a namespace (its UDP socket) is
//! released instead when the namespace exits ([`NetnsExit`]), after its
//! netdevs are unregistered (which removes the devices on them) and
//! before it is freed.

use super::NetDevice;
use crate::ffi::bindings;
use core::ptr::NonNull;
use kernel::{prelude::*, sync::Arc};

/// A network namespace, not held: its identity (`net_cookie`, never
/// reused while the system runs), and its address for the calls that
/// need one while it is known to be alive.
#[derive(Clone, Copy)]
pub(crate) struct NetNs {
    ptr: NonNull<bindings::net>,
    cookie: u64,
}

// SAFETY: `NetNs` is an address and a number; the address is only
// dereferenced (by the kernel) through `as_raw`, whose callers know the
// namespace alive.
unsafe impl Send for NetNs {}
// SAFETY: as above.
unsafe impl Sync for NetNs {}

impl NetNs {
    /// The namespace `ndev` belongs to.
    pub(crate) fn of(ndev: &NetDevice) -> Self {
        // SAFETY: the device is alive for the borrow, so its namespace is.
        let ptr = unsafe { bindings::rxud_dev_net(ndev.as_raw()) };
        // SAFETY: `dev_net` of a live device is never NULL.
        let ptr = unsafe { NonNull::new_unchecked(ptr) };
        // SAFETY: the namespace is alive (above); its cookie is set when
        // it is made and never changes.
        let cookie = unsafe { bindings::rxud_net_cookie(ptr.as_ptr()) };
        Self { ptr, cookie }
    }

    /// The namespace's cookie: what [`NetnsExit::exit`] names it by.
    pub(crate) fn cookie(&self) -> u64 {
        self.cookie
    }

    /// The namespace's address. Valid while it lives: for calls made
    /// while a device of it is held, as [`NetNs::of`]'s borrow is.
    pub(super) fn as_raw(&self) -> *mut bindings::net {
        self.ptr.as_ptr()
    }
}

/// What is told of a namespace's end.
pub(crate) trait NetnsExit: Send + Sync {
    /// The namespace whose cookie is `cookie` is ending: its netdevs are
    /// unregistered, and what is kept in it must be released now.
    ///
    /// Context: process (the namespace cleanup work), may sleep.
    fn exit(&self, cookie: u64);
}

/// `T` registered to hear of namespaces' ends; unregistered on drop,
/// which tells `T` of every namespace still alive, as if each ended (the
/// kernel's unregistering calls the exit hook for each). One at a time
/// (the C side holds one registration).
pub(crate) struct NetnsExitRegistration<T: NetnsExit> {
    /// Keeps what the hook reads alive until it is unregistered.
    _handler: Arc<T>,
}

/// The exit hook's call into `T`.
///
/// # Safety
///
/// `ctx` is the `Arc<T>` pointer a live [`NetnsExitRegistration<T>`]
/// registered.
unsafe extern "C" fn exit_of<T: NetnsExit>(ctx: *mut kernel::ffi::c_void, cookie: u64) {
    // SAFETY: per the function's contract, the registration holds the
    // `Arc` for as long as the hook may run.
    let handler = unsafe { &*ctx.cast::<T>().cast_const() };
    handler.exit(cookie);
}

impl<T: NetnsExit> NetnsExitRegistration<T> {
    /// Registers `handler`. Sleeps.
    pub(crate) fn register(handler: Arc<T>) -> Result<Self> {
        let ctx = core::ptr::from_ref::<T>(&handler).cast_mut().cast();
        // SAFETY: `exit_of::<T>` reads `ctx` as a `T`, which the `Arc` the
        // returned registration holds keeps alive until `drop` has
        // unregistered the hook.
        kernel::error::to_result(unsafe {
            bindings::rxud_netns_exit_register(Some(exit_of::<T>), ctx)
        })?;
        Ok(Self { _handler: handler })
    }
}

impl<T: NetnsExit> Drop for NetnsExitRegistration<T> {
    fn drop(&mut self) {
        // SAFETY: registered by `register`; after this no hook runs, and
        // `_handler` goes after.
        unsafe { bindings::rxud_netns_exit_unregister() };
    }
}
