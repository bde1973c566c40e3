// SPDX-License-Identifier: GPL-2.0 OR Linux-OpenIB

//! Memory regions: registered by the kernel, which pins the pages.

use crate::sys::*;
use crate::{create_object, destroy_object};
use core::ffi::{c_int, c_void};
use core::mem::size_of;

pub(crate) unsafe extern "C" fn reg_mr(
    pd: *mut ibv_pd,
    addr: *mut c_void,
    length: usize,
    hca_va: u64,
    access: c_int,
) -> *mut ibv_mr {
    // SAFETY: `verbs_mr` is valid zeroed; `pd` is a live PD of ours; the
    // command and response are the core structs with no driver data. The
    // kernel validates the range and the access flags.
    let vmr = unsafe {
        create_object(|vmr| {
            let mut cmd = ibv_reg_mr::default();
            let mut resp = ib_uverbs_reg_mr_resp::default();
            ibv_cmd_reg_mr(
                pd,
                addr,
                length,
                hca_va,
                access,
                vmr,
                &mut cmd,
                size_of::<ibv_reg_mr>(),
                &mut resp,
                size_of::<ib_uverbs_reg_mr_resp>(),
            )
        })
    };
    if vmr.is_null() {
        return core::ptr::null_mut();
    }
    // SAFETY: `ibv_mr` is the first field of `verbs_mr`.
    unsafe { &raw mut (*vmr).ibv_mr }
}

pub(crate) unsafe extern "C" fn dereg_mr(vmr: *mut verbs_mr) -> c_int {
    // SAFETY: `vmr` came from `reg_mr`.
    unsafe { destroy_object(vmr, |vmr| ibv_cmd_dereg_mr(vmr)) }
}

/// `ibv_rereg_mr`: the kernel registers a replacement (new translation, PD
/// and/or rights) under the same handle; libibverbs updates the MR's
/// address, length and PD, `ibv_cmd_rereg_mr` its keys.
pub(crate) unsafe extern "C" fn rereg_mr(
    vmr: *mut verbs_mr,
    flags: c_int,
    pd: *mut ibv_pd,
    addr: *mut c_void,
    length: usize,
    access: c_int,
) -> c_int {
    let mut cmd = ibv_rereg_mr::default();
    let mut resp = ib_uverbs_rereg_mr_resp::default();
    // SAFETY: `vmr` is a live MR of ours; `pd` is valid when the flags
    // say the PD changes; the command and response are the core structs
    // with no driver data. The kernel validates everything else.
    unsafe {
        ibv_cmd_rereg_mr(
            vmr,
            flags as u32,
            addr,
            length,
            addr as u64,
            access,
            pd,
            &mut cmd,
            size_of::<ibv_rereg_mr>(),
            &mut resp,
            size_of::<ib_uverbs_rereg_mr_resp>(),
        )
    }
}
