// SPDX-License-Identifier: GPL-2.0

//! A flow's cached output route (`struct dst_cache`, as UDP tunnels keep
//! one): packets of a connected flow skip the routing lookup. Each use
//! revalidates the cached route (`dst_check`), so a route that changed or
//! a netdev that went down makes the next packet look it up again.

use crate::ffi::bindings;
use core::ptr::NonNull;
use kernel::prelude::*;

/// The cached route of one flow.
///
/// # Invariants
///
/// `ptr` is a live cache from `rxud_dst_cache_new`, ours alone, and is
/// freed only by `drop`.
pub(crate) struct RouteCache {
    ptr: NonNull<bindings::dst_cache>,
}

// SAFETY: a dst_cache is per-CPU state the networking core accesses with
// bottom halves disabled (the C helpers do so); it may be freed from any
// thread.
unsafe impl Send for RouteCache {}
// SAFETY: every access goes through the helpers, which disable bottom
// halves around the per-CPU slot they touch, so uses on several CPUs at
// once touch different slots (as UDP tunnels share one cache among their
// transmit queues); resets take `&mut self`.
unsafe impl Sync for RouteCache {}

impl RouteCache {
    /// An empty cache. Unless `sleepable`, allocates atomically (its
    /// per-CPU memory too), so it may be called in atomic context.
    pub(crate) fn new(sleepable: bool) -> Result<Self> {
        // SAFETY: no precondition; returns NULL on allocation failure.
        let ptr = unsafe { bindings::rxud_dst_cache_new(!sleepable) };
        // INVARIANT: `ptr` is the cache the helper just made (NULL is
        // turned into `ENOMEM`), which no one else has.
        Ok(Self {
            ptr: NonNull::new(ptr).ok_or(ENOMEM)?,
        })
    }

    /// Forgets the cached route (its netdev is going away). The caller
    /// holds the lock that serialises the flow's sends.
    pub(crate) fn reset(&mut self) {
        // SAFETY: the cache is live (type invariant); `&mut self` and the
        // caller's lock exclude concurrent use.
        unsafe { bindings::rxud_dst_cache_reset(self.ptr.as_ptr()) };
    }

    pub(super) fn as_raw(&self) -> *mut bindings::dst_cache {
        self.ptr.as_ptr()
    }
}

impl Drop for RouteCache {
    fn drop(&mut self) {
        // SAFETY: the cache is live and nobody else uses it (we own it).
        unsafe { bindings::rxud_dst_cache_free(self.ptr.as_ptr()) };
    }
}
