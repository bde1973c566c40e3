// SPDX-License-Identifier: GPL-2.0

//! Pinned user memory (`struct ib_umem`).

use crate::ffi::bindings;
use core::ptr::NonNull;
use kernel::{error::from_err_ptr, prelude::*};

/// User pages pinned by `ib_umem_get`, unpinned on drop.
///
/// # Invariants
///
/// `ptr` is a umem returned by `ib_umem_get` and not yet released.
pub(crate) struct Umem {
    ptr: NonNull<bindings::ib_umem>,
    /// The user address range pinned.
    start: u64,
    len: u64,
}

// SAFETY: a umem is plain pinned memory bookkeeping; ib_core releases it
// from any context that may sleep.
unsafe impl Send for Umem {}
// SAFETY: `&Umem` only reads immutable fields.
unsafe impl Sync for Umem {}

impl Umem {
    /// Pins `len` bytes of the calling process's memory at `addr` for the
    /// accesses in `access`. Fails with `EFAULT` if the
    /// range is not mapped so, `ENOMEM` past the pinning limit.
    ///
    /// # Safety
    ///
    /// `dev` is a live, registered ib_device; called in the context of the
    /// process that owns the memory (a uverbs command).
    pub(super) unsafe fn get(
        dev: *mut bindings::ib_device,
        addr: u64,
        len: u64,
        access: super::AccessFlags,
    ) -> Result<Self> {
        let (start, size) = (addr, len);
        let addr = usize::try_from(addr).map_err(|_| EINVAL)?;
        let len = usize::try_from(len).map_err(|_| EINVAL)?;
        // SAFETY: per the caller; `ib_umem_get` validates the range itself
        // and returns a umem or an ERR_PTR.
        let ptr = from_err_ptr(unsafe {
            bindings::ib_umem_get(dev, addr as _, len, access.bits() as i32)
        })?;
        Ok(Self {
            ptr: NonNull::new(ptr).ok_or(ENOMEM)?,
            start,
            len: size,
        })
    }

    /// Start address and length of the pinned user range.
    pub(crate) fn range(&self) -> (u64, u64) {
        (self.start, self.len)
    }
}

impl Drop for Umem {
    fn drop(&mut self) {
        // SAFETY: ours to release (type invariant).
        unsafe { bindings::ib_umem_release(self.ptr.as_ptr()) };
    }
}
