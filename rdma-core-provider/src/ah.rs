// SPDX-License-Identifier: GPL-2.0 OR Linux-OpenIB

//! Address handles: kernel objects named by an `ah_num` in UD send work
//! requests. librxud keeps the number and the attributes for the data path.

use crate::sys::*;
use crate::{create_object, destroy_object};
use core::ffi::c_int;
use core::mem::{offset_of, size_of};
use rxud_abi::CreateAhResp;

/// librxud's AH. All-zero is valid (what `create_object` starts from).
#[repr(C)]
pub(crate) struct Ah {
    ibv_ah: ibv_ah,
    /// Names the AH to the kernel in UD send work requests; never 0.
    ah_num: u32,
    /// The attributes it was created with.
    attr: ibv_ah_attr,
}

const _: () = assert!(offset_of!(Ah, ibv_ah) == 0);

/// The number that names `ibah` in UD send work requests.
///
/// # Safety
///
/// `ibah` was returned by `create_ah` and is not destroyed yet.
pub(crate) unsafe fn ah_num(ibah: *const ibv_ah) -> u32 {
    // SAFETY: per the caller, the `ibv_ah` at offset 0 of a live `Ah`.
    unsafe { (*ibah.cast::<Ah>()).ah_num }
}

#[cfg(test)]
impl Ah {
    /// An AH as `create_ah` leaves it, numbered `ah_num`, for tests of the
    /// verbs that use AHs.
    pub(crate) fn for_test(ah_num: u32) -> Box<Self> {
        Box::new(Self {
            // SAFETY: all-zero is a valid `ibv_ah` (pointers and integers).
            ibv_ah: unsafe { core::mem::zeroed() },
            ah_num,
            attr: ibv_ah_attr::default(),
        })
    }

    pub(crate) fn as_ibv(&mut self) -> *mut ibv_ah {
        &raw mut self.ibv_ah
    }
}

/// CREATE_AH response: the core part is 4 bytes and the kernel writes the
/// driver part right after it, at offset 4, although `CreateAhResp` is
/// 8-byte aligned; hence `packed(4)`.
#[repr(C, packed(4))]
#[derive(Default)]
struct CreateAhRespBuf {
    core: ib_uverbs_create_ah_resp,
    drv: CreateAhResp,
}

const _: () = assert!(offset_of!(CreateAhRespBuf, drv) == size_of::<ib_uverbs_create_ah_resp>());
const _: () = assert!(
    size_of::<CreateAhRespBuf>().is_multiple_of(4),
    "libibverbs sends the response size in words"
);

pub(crate) unsafe extern "C" fn create_ah(pd: *mut ibv_pd, attr: *mut ibv_ah_attr) -> *mut ibv_ah {
    // SAFETY: `Ah` is valid zeroed; `pd` and `attr` come from libibverbs;
    // the response is laid out as the kernel writes it. An AH without a
    // number is destroyed again before the error is returned.
    let ah = unsafe {
        create_object(|ah: *mut Ah| {
            let mut resp = CreateAhRespBuf::default();
            let ret = ibv_cmd_create_ah(
                pd,
                &raw mut (*ah).ibv_ah,
                attr,
                &raw mut resp.core,
                size_of::<CreateAhRespBuf>(),
            );
            if ret != 0 {
                return ret;
            }
            // A copy: the field is not aligned.
            let drv = resp.drv;
            if drv.ah_num == 0 {
                ibv_cmd_destroy_ah(&raw mut (*ah).ibv_ah);
                return EPROTO;
            }
            (*ah).ah_num = drv.ah_num;
            (*ah).attr = *attr;
            0
        })
    };
    if ah.is_null() {
        return core::ptr::null_mut();
    }
    // SAFETY: `ah` is live.
    unsafe { &raw mut (*ah).ibv_ah }
}

pub(crate) unsafe extern "C" fn destroy_ah(ibah: *mut ibv_ah) -> c_int {
    // SAFETY: a live AH of ours (`ibv_ah` is at offset 0 of `Ah`).
    unsafe {
        destroy_object(ibah.cast::<Ah>(), |ah| {
            ibv_cmd_destroy_ah(&raw mut (*ah).ibv_ah)
        })
    }
}
