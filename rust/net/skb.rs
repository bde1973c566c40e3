// SPDX-License-Identifier: GPL-2.0

//! Socket buffers: an owned `struct sk_buff` as the UDP tunnel hands it
//! over, read in place (linear part and page fragments alike) without
//! linearizing.

use super::netdev::NetDeviceId;
use crate::ffi::bindings;
use core::ptr::NonNull;
use kernel::prelude::*;

/// An owned socket buffer; dropping it frees it (`kfree_skb`: a drop).
///
/// # Invariants
///
/// `ptr` is a live `sk_buff` we own (no one else frees it), whose data
/// starts at the UDP payload: the tunnel's receive path pulled the IP and
/// UDP headers.
pub(crate) struct SkBuff {
    ptr: NonNull<bindings::sk_buff>,
}

// SAFETY: an owned skb may move between contexts and CPUs; the kernel
// does so freely (backlogs, work items).
unsafe impl Send for SkBuff {}

impl SkBuff {
    /// # Safety
    ///
    /// `ptr` is a live skb whose ownership passes to the result, with data
    /// at the UDP payload.
    pub(super) unsafe fn from_raw(ptr: NonNull<bindings::sk_buff>) -> Self {
        Self { ptr }
    }

    /// Bytes of data (the UDP payload), linear part and fragments.
    pub(crate) fn len(&self) -> usize {
        // SAFETY: the skb is live (type invariant).
        unsafe { bindings::rxud_skb_len(self.ptr.as_ptr()) as usize }
    }

    /// Copies `out.len()` bytes at `offset` into `out`, from wherever they
    /// lie (linear part or fragments); `EINVAL` past the end.
    pub(crate) fn copy_out(&self, offset: usize, out: &mut [u8]) -> Result {
        let end = offset.checked_add(out.len()).ok_or(EINVAL)?;
        if end > self.len() {
            return Err(EINVAL);
        }
        let (Ok(off), Ok(len)) = (i32::try_from(offset), i32::try_from(out.len())) else {
            return Err(EINVAL);
        };
        // SAFETY: the skb is live, the range is inside its data (checked)
        // and `out` has room for `len` bytes.
        let ret = unsafe {
            bindings::skb_copy_bits(self.ptr.as_ptr(), off, out.as_mut_ptr().cast(), len)
        };
        kernel::error::to_result(ret)
    }

    /// The device the packet arrived on, if any.
    pub(crate) fn ingress(&self) -> Option<NetDeviceId> {
        // SAFETY: the skb is live; `dev` is read, not dereferenced.
        let dev = unsafe { bindings::rxud_skb_dev(self.ptr.as_ptr()) };
        (!dev.is_null()).then(|| NetDeviceId::from_raw(dev))
    }
}

impl Drop for SkBuff {
    fn drop(&mut self) {
        // SAFETY: we own the skb (type invariant).
        unsafe { bindings::rxud_kfree_skb(self.ptr.as_ptr()) };
    }
}
