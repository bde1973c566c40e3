// SPDX-License-Identifier: GPL-2.0

//! Shared receive queues: `struct ib_srq_attr` as a Rust value and the
//! `create_srq`, `modify_srq`, `query_srq` and `destroy_srq` adapters.

use super::device::{to_c, Adapter, Device, DeviceOps, Object};
use super::udata::UData;
use crate::ffi::bindings;

/// Sizes and limit of an SRQ (`struct ib_srq_attr`).
#[derive(Clone, Copy, Default, Debug, PartialEq, Eq)]
pub(crate) struct SrqAttr {
    pub(crate) max_wr: u32,
    pub(crate) max_sge: u32,
    /// The SRQ raises `IB_EVENT_SRQ_LIMIT_REACHED` when fewer WRs remain
    /// (0: disarmed).
    pub(crate) srq_limit: u32,
}

/// What `modify_srq` changes (`IB_SRQ_*`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct SrqModify {
    pub(crate) resize: bool,
    pub(crate) limit: bool,
    /// Anything else was asked for too.
    pub(crate) unknown: bool,
}

impl SrqAttr {
    fn from_raw(a: &bindings::ib_srq_attr) -> Self {
        Self {
            max_wr: a.max_wr,
            max_sge: a.max_sge,
            srq_limit: a.srq_limit,
        }
    }

    fn to_raw(self, a: &mut bindings::ib_srq_attr) {
        a.max_wr = self.max_wr;
        a.max_sge = self.max_sge;
        a.srq_limit = self.srq_limit;
    }
}

/// How the driver tells an SRQ's owner that the SRQ limit was reached.
///
/// # Invariants
///
/// `srq` is the `ib_srq` the driver's SRQ object belongs to; it is valid
/// while that object exists, and the driver only uses an `SrqEvents`
/// while it does (its QPs, destroyed first, and receive paths that end
/// before a QP's destruction returns). The value itself may outlive the
/// SRQ (in a core that a QP still holds); dropping it does not touch
/// `srq`.
pub(crate) struct SrqEvents {
    srq: core::ptr::NonNull<bindings::ib_srq>,
}

// SAFETY: ib_core's event handlers may be called from any context; the
// pointer is only passed to the handler.
unsafe impl Send for SrqEvents {}
// SAFETY: as above.
unsafe impl Sync for SrqEvents {}

impl SrqEvents {
    /// Reports `IB_EVENT_SRQ_LIMIT_REACHED`. Any context.
    pub(crate) fn limit_reached(&self) {
        // SAFETY: the SRQ is live (type invariant).
        unsafe { bindings::rxud_ib_srq_limit_reached(self.srq.as_ptr()) };
    }
}

impl<T: DeviceOps> Adapter<T> {
    /// `ib_device_ops.create_srq`.
    ///
    /// # Safety
    ///
    /// Called by ib_core in process context with a zeroed SRQ object of
    /// `size_ib_srq` bytes whose `device` and `pd` are set and live, the
    /// init attributes and the call's udata (or NULL).
    pub(super) unsafe extern "C" fn create_srq(
        srq: *mut bindings::ib_srq,
        init: *mut bindings::ib_srq_init_attr,
        udata: *mut bindings::ib_udata,
    ) -> kernel::ffi::c_int {
        // SAFETY: per the function's contract.
        let (dev, pd, i, udata) = unsafe {
            (
                Device::<T>::from_raw((*srq).device),
                Object::<bindings::ib_pd, T::Pd>::data_of((*srq).pd),
                &mut *init,
                UData::from_raw(udata),
            )
        };
        let r = if i.srq_type != bindings::IB_SRQT_BASIC {
            Err(super::eopnotsupp())
        } else {
            // SAFETY: `srq` is a valid, non-NULL object pointer (contract),
            // live as long as the object the driver's SRQ is part of.
            let srq_ptr = unsafe { core::ptr::NonNull::new_unchecked(srq) };
            // INVARIANT: `srq` is the SRQ being created, whose object
            // `Object::init` fills below with the driver's SRQ (if creation
            // fails, `events` is dropped unused); ib_core keeps it until
            // `destroy_srq`, which it calls only once no QP uses the SRQ.
            let events = SrqEvents { srq: srq_ptr };
            T::create_srq(dev, pd, &SrqAttr::from_raw(&i.attr), events, &udata).map(
                |(data, granted)| {
                    // ib_core reports the granted sizes to the creator.
                    granted.to_raw(&mut i.attr);
                    data
                },
            )
        };
        // SAFETY: the object has room for `Object<_, T::Srq>`, data not
        // yet initialised.
        unsafe { Object::<_, T::Srq>::init(srq, r) }
    }

    /// `ib_device_ops.destroy_srq`.
    ///
    /// # Safety
    ///
    /// Called by ib_core once per SRQ `create_srq` initialised, in process
    /// context, when no QP uses it any more.
    pub(super) unsafe extern "C" fn destroy_srq(
        srq: *mut bindings::ib_srq,
        _udata: *mut bindings::ib_udata,
    ) -> kernel::ffi::c_int {
        // SAFETY: per the function's contract.
        unsafe { Object::<_, T::Srq>::drop_data(srq) };
        0
    }

    /// `ib_device_ops.modify_srq`.
    ///
    /// # Safety
    ///
    /// Called by ib_core in process context with a live SRQ of ours, valid
    /// attributes and the call's udata (or NULL).
    pub(super) unsafe extern "C" fn modify_srq(
        srq: *mut bindings::ib_srq,
        attr: *mut bindings::ib_srq_attr,
        mask: bindings::ib_srq_attr_mask,
        udata: *mut bindings::ib_udata,
    ) -> kernel::ffi::c_int {
        let m = SrqModify {
            resize: mask & bindings::IB_SRQ_MAX_WR != 0,
            limit: mask & bindings::IB_SRQ_LIMIT != 0,
            unknown: mask & !(bindings::IB_SRQ_MAX_WR | bindings::IB_SRQ_LIMIT) != 0,
        };
        // SAFETY: per the function's contract.
        let (dev, data, a, udata) = unsafe {
            (
                Device::<T>::from_raw((*srq).device),
                Object::<bindings::ib_srq, T::Srq>::data_of(srq),
                SrqAttr::from_raw(&*attr),
                UData::from_raw(udata),
            )
        };
        to_c(T::modify_srq(dev, data, &a, m, &udata))
    }

    /// `ib_device_ops.query_srq`.
    ///
    /// # Safety
    ///
    /// Called by ib_core in process context with a live SRQ of ours and a
    /// struct to fill, exclusively ours for the call.
    pub(super) unsafe extern "C" fn query_srq(
        srq: *mut bindings::ib_srq,
        attr: *mut bindings::ib_srq_attr,
    ) -> kernel::ffi::c_int {
        // SAFETY: per the function's contract.
        let data = unsafe { Object::<bindings::ib_srq, T::Srq>::data_of(srq) };
        match T::query_srq(data) {
            Ok(a) => {
                // SAFETY: per the function's contract.
                a.to_raw(unsafe { &mut *attr });
                0
            }
            Err(e) => e.to_errno(),
        }
    }

    /// `ib_device_ops.post_srq_recv`: kernel consumers' receive lists.
    ///
    /// # Safety
    ///
    /// Called by ib_core with a live SRQ of ours, `wr` a list of valid
    /// receive work requests, and `bad_wr` NULL or valid for a write.
    pub(super) unsafe extern "C" fn post_srq_recv(
        srq: *mut bindings::ib_srq,
        wr: *const bindings::ib_recv_wr,
        bad_wr: *mut *const bindings::ib_recv_wr,
    ) -> kernel::ffi::c_int {
        // SAFETY: per the function's contract.
        let (data, user) = unsafe {
            (
                Object::<bindings::ib_srq, T::Srq>::data_of(srq),
                !(*srq).uobject.is_null(),
            )
        };
        // A user SRQ's receives are in its ring (see `qp::post_send`).
        if user {
            if !bad_wr.is_null() {
                // SAFETY: per the function's contract.
                unsafe { *bad_wr = wr };
            }
            return kernel::error::code::EINVAL.to_errno();
        }
        // SAFETY: per the function's contract.
        to_c(unsafe {
            super::wr::post_list(
                wr,
                bad_wr,
                |w| w.next,
                |w| T::post_srq_recv(data, &super::wr::RecvWr::from_raw(w)),
            )
        })
    }
}
