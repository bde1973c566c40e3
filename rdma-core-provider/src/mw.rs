// SPDX-License-Identifier: GPL-2.0 OR Linux-OpenIB

//! Memory windows: kernel objects (librxud keeps the handle and the rkey
//! the kernel gave). A type 2 window is bound by a BIND_MW work request
//! (`IBV_WR_BIND_MW`, `ibv_wr_bind_mw`); `ibv_bind_mw` binds a type 1
//! window the same way, under the next rkey (as rxe's provider does).

use crate::sys::*;
use crate::{create_object, destroy_object};
use core::ffi::c_int;
use core::mem::size_of;
use rxud_abi::opcode;

pub(crate) unsafe extern "C" fn alloc_mw(pd: *mut ibv_pd, type_: ibv_enum) -> *mut ibv_mw {
    // SAFETY: `ibv_mw` is valid zeroed; `pd` is a live PD of ours; the
    // command and response are the core structs with no driver data. The
    // kernel checks the type (`EINVAL` for any but 1 and 2).
    unsafe {
        create_object(|mw| {
            let mut cmd = ibv_alloc_mw::default();
            let mut resp = ib_uverbs_alloc_mw_resp::default();
            ibv_cmd_alloc_mw(
                pd,
                type_,
                mw,
                &mut cmd,
                size_of::<ibv_alloc_mw>(),
                &mut resp,
                size_of::<ib_uverbs_alloc_mw_resp>(),
            )
        })
    }
}

pub(crate) unsafe extern "C" fn dealloc_mw(mw: *mut ibv_mw) -> c_int {
    // SAFETY: `mw` came from `alloc_mw`; on failure it stays valid.
    unsafe { destroy_object(mw, |mw| ibv_cmd_dealloc_mw(mw)) }
}

/// The rkey a bind gives a window now named by `rkey`: the next value of
/// its low 8 bits (libibverbs' `ibv_inc_rkey`).
pub(crate) fn next_rkey(rkey: u32) -> u32 {
    (rkey & !0xff) | (rkey.wrapping_add(1) & 0xff)
}

/// `ibv_bind_mw` (type 1; libibverbs checked the type and the MR's
/// context): posts a BIND_MW work request under the window's next rkey,
/// which the window takes if posting succeeds (an error completion leaves
/// the application to undo it, as with rxe). A zero-based type 1 window is
/// `EINVAL` (o10-36.2.2).
pub(crate) unsafe extern "C" fn bind_mw(
    qp: *mut ibv_qp,
    mw: *mut ibv_mw,
    bind: *mut ibv_mw_bind,
) -> c_int {
    // SAFETY: libibverbs passes the application's live window and bind
    // request.
    let (mw, bind) = unsafe { (&mut *mw, &*bind) };
    if bind.bind_info.mw_access_flags & IBV_ACCESS_ZERO_BASED != 0 {
        return EINVAL;
    }
    let rkey = next_rkey(mw.rkey);
    let mut wr = ibv_send_wr {
        wr_id: bind.wr_id,
        opcode: opcode::BIND_MW,
        send_flags: bind.send_flags,
        tail: ibv_send_wr_tail {
            bind_mw: ibv_send_wr_bind_mw {
                mw,
                rkey,
                bind_info: bind.bind_info,
            },
        },
        ..Default::default()
    };
    let mut bad = core::ptr::null_mut();
    // SAFETY: a live QP of ours and one well-formed request.
    let ret = unsafe { crate::qp::post_send(qp, &mut wr, &mut bad) };
    if ret == 0 {
        mw.rkey = rkey;
    }
    ret
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_bind_moves_the_low_byte_of_the_rkey_only() {
        assert_eq!(next_rkey(0x0001_0203), 0x0001_0204);
        assert_eq!(next_rkey(0x0001_02ff), 0x0001_0200);
        assert_eq!(next_rkey(0xffff_ffff), 0xffff_ff00);
    }
}
