// SPDX-License-Identifier: GPL-2.0

//! Network namespaces: a held reference to a `struct net`.

use super::NetDevice;
use crate::ffi::bindings;
use core::ptr::NonNull;

/// A reference on a network namespace (`get_net`): the namespace, and what
/// rxud keeps in it (the UDP socket), stay valid while it is held.
///
/// # Invariants
///
/// `ptr` is a live `struct net` on which we hold one `get_net` reference.
pub(crate) struct NetNsRef {
    ptr: NonNull<bindings::net>,
}

// SAFETY: a namespace reference may be dropped from any thread (`put_net`
// is thread-safe), and `&NetNsRef` only exposes the address.
unsafe impl Send for NetNsRef {}
// SAFETY: as above.
unsafe impl Sync for NetNsRef {}

impl NetNsRef {
    /// The namespace `ndev` belongs to, held.
    pub(crate) fn of(ndev: &NetDevice) -> Self {
        // SAFETY: the device is alive for the borrow, so its namespace is;
        // `get_net` takes a reference on it, which we own.
        let ptr = unsafe { bindings::rxud_get_net(bindings::rxud_dev_net(ndev.as_raw())) };
        // SAFETY: `dev_net` of a live device is never NULL.
        let ptr = unsafe { NonNull::new_unchecked(ptr) };
        // INVARIANT: `ptr` is the live namespace of a live device, and the
        // reference `get_net` took on it above passes to the new value.
        Self { ptr }
    }

    /// Whether both refer to the same namespace.
    pub(crate) fn same(&self, other: &Self) -> bool {
        self.ptr == other.ptr
    }

    pub(super) fn as_raw(&self) -> *mut bindings::net {
        self.ptr.as_ptr()
    }
}

impl Drop for NetNsRef {
    fn drop(&mut self) {
        // SAFETY: we own one reference (type invariant).
        unsafe { bindings::rxud_put_net(self.ptr.as_ptr()) };
    }
}
