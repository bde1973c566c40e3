// SPDX-License-Identifier: GPL-2.0 OR Linux-OpenIB

//! Protection domains: kernel objects; librxud keeps only the handle.

use crate::sys::*;
use crate::{create_object, destroy_object};
use core::ffi::c_int;
use core::mem::size_of;

pub(crate) unsafe extern "C" fn alloc_pd(ctx: *mut ibv_context) -> *mut ibv_pd {
    // SAFETY: `ibv_pd` is valid zeroed; `ctx` is a live context; the command
    // and response are the core structs with no driver data.
    unsafe {
        create_object(|pd| {
            let mut cmd = ibv_alloc_pd::default();
            let mut resp = ib_uverbs_alloc_pd_resp::default();
            ibv_cmd_alloc_pd(
                ctx,
                pd,
                &mut cmd,
                size_of::<ibv_alloc_pd>(),
                &mut resp,
                size_of::<ib_uverbs_alloc_pd_resp>(),
            )
        })
    }
}

pub(crate) unsafe extern "C" fn dealloc_pd(pd: *mut ibv_pd) -> c_int {
    // SAFETY: `pd` came from `alloc_pd`; on failure (e.g. EBUSY while
    // objects use it) it stays valid for the caller.
    unsafe { destroy_object(pd, |pd| ibv_cmd_dealloc_pd(pd)) }
}
