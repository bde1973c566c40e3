// SPDX-License-Identifier: GPL-2.0 OR Linux-OpenIB

//! Protection domains: kernel objects; librxud keeps only the handle.

use crate::set_errno;
use crate::sys::*;
use core::ffi::c_int;
use core::mem::size_of;

pub(crate) unsafe extern "C" fn alloc_pd(ctx: *mut ibv_context) -> *mut ibv_pd {
    // SAFETY: plain zeroed allocation, freed by `dealloc_pd` or below.
    let pd = unsafe { calloc(1, size_of::<ibv_pd>()) }.cast::<ibv_pd>();
    if pd.is_null() {
        return pd;
    }
    let mut cmd = ibv_alloc_pd::default();
    let mut resp = ib_uverbs_alloc_pd_resp::default();
    // SAFETY: `ctx` is a live context; the command and response are the
    // core structs with no driver data.
    let ret = unsafe {
        ibv_cmd_alloc_pd(ctx, pd, &mut cmd, size_of::<ibv_alloc_pd>(), &mut resp, size_of::<ib_uverbs_alloc_pd_resp>())
    };
    if ret != 0 {
        // SAFETY: allocated above, unknown to the kernel.
        unsafe { free(pd.cast()) };
        set_errno(ret);
        return core::ptr::null_mut();
    }
    pd
}

pub(crate) unsafe extern "C" fn dealloc_pd(pd: *mut ibv_pd) -> c_int {
    // SAFETY: `pd` came from `alloc_pd`; on failure (e.g. EBUSY while
    // objects use it) it stays valid for the caller.
    let ret = unsafe { ibv_cmd_dealloc_pd(pd) };
    if ret == 0 {
        // SAFETY: the kernel object is gone; nothing refers to `pd`.
        unsafe { free(pd.cast()) };
    }
    ret
}
