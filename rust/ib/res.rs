// SPDX-License-Identifier: GPL-2.0

//! Resource tracking's driver details: what `rdma resource show qp -d`
//! prints after ib_core's own attributes of a QP (the
//! `fill_res_qp_entry` adapter), as named numbers in the netlink
//! message's `RDMA_NLDEV_ATTR_DRIVER` nest.

use super::device::{Adapter, Device, DeviceOps, Object};
use crate::ffi::bindings;
use kernel::{prelude::*, str::CStr};

/// The open driver nest of one entry's netlink message.
///
/// # Invariants
///
/// `msg` is a message ib_core is filling for this call, and `nest` an
/// open `RDMA_NLDEV_ATTR_DRIVER` nest in it.
pub(crate) struct Details {
    msg: *mut bindings::sk_buff,
    nest: *mut bindings::nlattr,
}

/// `EMSGSIZE`, which 6.12's `kernel::error::code` lacks: the message is
/// full.
fn emsgsize() -> Error {
    Error::from_errno(-(bindings::EMSGSIZE as i32))
}

impl Details {
    /// Adds `name = value`; `EMSGSIZE` if the message is full.
    pub(crate) fn u32(&mut self, name: &'static CStr, value: u32) -> Result {
        // SAFETY: `msg` is being filled for this call (type invariant);
        // `name` is a NUL-terminated static string.
        let ret = unsafe { bindings::rxud_nl_driver_u32(self.msg, name.as_char_ptr(), value) };
        if ret != 0 {
            return Err(emsgsize());
        }
        Ok(())
    }
}

impl<T: DeviceOps> Adapter<T> {
    /// `ib_device_ops.fill_res_qp_entry`: the driver's details of `qp`,
    /// all of them or none (a message without room is sent as it was, and
    /// netlink's dump goes on in the next one).
    ///
    /// # Safety
    ///
    /// Called by ib_core in process context (an `rdma resource` dump),
    /// with a message it is filling and a live QP of ours, held by the
    /// dump for the call.
    pub(super) unsafe extern "C" fn fill_res_qp_entry(
        msg: *mut bindings::sk_buff,
        qp: *mut bindings::ib_qp,
    ) -> kernel::ffi::c_int {
        // SAFETY: per the function's contract.
        let (dev, data) = unsafe {
            (
                Device::<T>::from_raw((*qp).device),
                Object::<bindings::ib_qp, T::Qp>::data_of(qp),
            )
        };
        // SAFETY: `msg` is being filled by ib_core for this call.
        let nest = unsafe { bindings::rxud_nl_driver_open(msg) };
        if nest.is_null() {
            return emsgsize().to_errno();
        }
        // INVARIANT: the message is ib_core's for this call; the nest was
        // just opened in it.
        let mut d = Details { msg, nest };
        match T::qp_details(dev, data, &mut d) {
            Ok(()) => {
                // SAFETY: the nest `d` holds is open in `msg`.
                unsafe { bindings::rxud_nl_driver_close(msg, d.nest) };
                0
            }
            Err(e) => {
                // SAFETY: as above; what the nest holds goes with it.
                unsafe { bindings::rxud_nl_driver_cancel(msg, d.nest) };
                e.to_errno()
            }
        }
    }
}
