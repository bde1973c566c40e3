// SPDX-License-Identifier: GPL-2.0

//! Completion queues: the `create_cq`, `resize_cq`, `req_notify_cq` and
//! `destroy_cq` adapters.

use super::device::{to_c, Adapter, Device, DeviceOps, Object};
use super::udata::UData;
use crate::ffi::bindings;


/// What the creator of a CQ asks for (`struct ib_cq_init_attr`).
#[derive(Clone, Copy, Debug)]
pub(crate) struct CqInitAttr {
    /// Entries requested; 0 and values beyond `i32::MAX` (negative ones from
    /// user space) arrive as they are, for the driver to reject.
    pub(crate) cqe: u32,
    pub(crate) comp_vector: u32,
    /// `IB_UVERBS_CQ_FLAGS_*`.
    pub(crate) flags: u32,
}

/// Which completions should raise the next completion event
/// (`ib_req_notify_cq`).
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) enum CqArm {
    /// Only solicited ones (and errors).
    Solicited,
    /// Any.
    NextCompletion,
}

impl<T: DeviceOps> Adapter<T> {
    pub(super) unsafe extern "C" fn create_cq(
        cq: *mut bindings::ib_cq,
        attr: *const bindings::ib_cq_init_attr,
        attrs: *mut bindings::uverbs_attr_bundle,
    ) -> kernel::ffi::c_int {
        // SAFETY: ib_core passes a zeroed CQ object of `size_ib_cq` bytes
        // with `device` set, valid init attributes, and the uverbs bundle of
        // the call (NULL for kernel users).
        unsafe {
            let dev = Device::<T>::from_raw((*cq).device);
            let a = CqInitAttr { cqe: (*attr).cqe, comp_vector: (*attr).comp_vector, flags: (*attr).flags };
            let udata = UData::from_raw(bindings::rxud_attrs_udata(attrs));
            let r = T::create_cq(dev, &a, &udata).map(|(data, cqe)| {
                (*cq).cqe = cqe as i32;
                data
            });
            Object::<_, T::Cq>::init(cq, r)
        }
    }

    pub(super) unsafe extern "C" fn destroy_cq(cq: *mut bindings::ib_cq, _udata: *mut bindings::ib_udata) -> kernel::ffi::c_int {
        // SAFETY: ib_core calls this once, on a CQ `create_cq` initialised
        // and no QP uses any more.
        unsafe { Object::<_, T::Cq>::drop_data(cq) };
        0
    }

    pub(super) unsafe extern "C" fn resize_cq(
        cq: *mut bindings::ib_cq,
        cqe: kernel::ffi::c_int,
        udata: *mut bindings::ib_udata,
    ) -> kernel::ffi::c_int {
        // SAFETY: ib_core passes a live CQ of ours and the call's udata.
        unsafe {
            let dev = Device::<T>::from_raw((*cq).device);
            let data = Object::<bindings::ib_cq, T::Cq>::data_of(cq);
            // A negative count is as invalid as a huge one.
            let want = u32::try_from(cqe).unwrap_or(u32::MAX);
            match T::resize_cq(dev, data, want, &UData::from_raw(udata)) {
                Ok(n) => {
                    (*cq).cqe = n as i32;
                    0
                }
                Err(e) => e.to_errno(),
            }
        }
    }

    /// May be called from any context, including hard interrupts.
    pub(super) unsafe extern "C" fn req_notify_cq(
        cq: *mut bindings::ib_cq,
        flags: bindings::ib_cq_notify_flags,
    ) -> kernel::ffi::c_int {
        let arm = if flags & bindings::IB_CQ_SOLICITED_MASK == bindings::IB_CQ_SOLICITED {
            CqArm::Solicited
        } else {
            CqArm::NextCompletion
        };
        // SAFETY: ib_core passes a live CQ of ours.
        let data = unsafe { Object::<bindings::ib_cq, T::Cq>::data_of(cq) };
        let pending = T::req_notify_cq(data, arm);
        // With IB_CQ_REPORT_MISSED_EVENTS, 1 tells the caller to poll
        // again: completions may have arrived before the arming.
        match pending {
            Ok(true) if flags & bindings::IB_CQ_REPORT_MISSED_EVENTS != 0 => 1,
            r => to_c(r.map(|_| ())),
        }
    }
}
