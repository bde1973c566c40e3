// SPDX-License-Identifier: GPL-2.0

//! Completion queues: the `create_cq`, `resize_cq`, `req_notify_cq` and
//! `destroy_cq` adapters.

use super::device::{to_c, Adapter, Device, DeviceOps, Object};
use super::flags::flag_set;
use super::udata::UData;
use crate::ffi::bindings;

flag_set! {
    /// Creation flags of a CQ (`IB_UVERBS_CQ_FLAGS_*`). rxud offers none
    /// yet; the driver refuses any it is given.
    pub(crate) struct CqCreateFlags {}
}

/// What the creator of a CQ asks for (`struct ib_cq_init_attr`).
#[derive(Clone, Copy, Debug)]
pub(crate) struct CqInitAttr {
    /// Entries requested; 0 and values beyond `i32::MAX` (negative ones from
    /// user space) arrive as they are, for the driver to reject.
    pub(crate) cqe: u32,
    pub(crate) comp_vector: u32,
    pub(crate) flags: CqCreateFlags,
}

/// Raises completion events on one CQ: calls its owner's completion
/// handler (uverbs wakes `ibv_get_cq_event`; kernel ULPs poll).
///
/// # Invariants
///
/// `cq` is the `ib_cq` the driver's CQ object belongs to; it is valid
/// while that object exists, and the driver only uses a `CqEvents` while
/// it does (its queue pairs, which ib_core destroys first, and receive
/// paths that end before a QP's destruction returns). The value itself
/// may outlive the CQ (in a core that a QP's packets still hold); dropping
/// it does not touch `cq`.
pub(crate) struct CqEvents {
    cq: core::ptr::NonNull<bindings::ib_cq>,
}

// SAFETY: the completion handler may be called from any context (ib_core's
// contract for `comp_handler`); the pointer is only passed to it.
unsafe impl Send for CqEvents {}
// SAFETY: as above.
unsafe impl Sync for CqEvents {}

impl CqEvents {
    /// Calls the CQ's completion handler. Any context.
    pub(crate) fn notify(&self) {
        // SAFETY: the CQ is live (type invariant).
        unsafe { bindings::rxud_ib_cq_event(self.cq.as_ptr()) };
    }

    /// Reports that the CQ overflowed (`IB_EVENT_CQ_ERR` to its event
    /// handler, if any). Any context.
    pub(crate) fn overflow(&self) {
        // SAFETY: the CQ is live (type invariant); ib_core's event
        // handlers may be called from any context.
        unsafe { bindings::rxud_ib_cq_overflow(self.cq.as_ptr()) };
    }
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
    /// `ib_device_ops.create_cq`.
    ///
    /// # Safety
    ///
    /// Called by ib_core in process context with a zeroed CQ object of
    /// `size_ib_cq` bytes whose `device` is set, valid init attributes,
    /// and the uverbs bundle of the call (NULL for kernel users).
    pub(super) unsafe extern "C" fn create_cq(
        cq: *mut bindings::ib_cq,
        attr: *const bindings::ib_cq_init_attr,
        attrs: *mut bindings::uverbs_attr_bundle,
    ) -> kernel::ffi::c_int {
        // SAFETY: per the function's contract.
        let (dev, a, udata) = unsafe {
            let a = &*attr;
            (
                Device::<T>::from_raw((*cq).device),
                CqInitAttr {
                    cqe: a.cqe,
                    comp_vector: a.comp_vector,
                    flags: CqCreateFlags::from_bits(a.flags),
                },
                UData::from_raw(bindings::rxud_attrs_udata(attrs)),
            )
        };
        // SAFETY: `cq` is a valid, non-NULL object pointer (contract).
        let cq_ptr = unsafe { core::ptr::NonNull::new_unchecked(cq) };
        // INVARIANT: `cq` is the CQ being created, whose object
        // `Object::init` fills below with the driver's CQ (if creation
        // fails, `events` is dropped unused); ib_core keeps it until
        // `destroy_cq`, which it calls only once no QP uses the CQ.
        let events = CqEvents { cq: cq_ptr };
        let r = T::create_cq(dev, &a, events, &udata).map(|(data, cqe)| {
            // SAFETY: the CQ object is ours to fill during the call.
            unsafe { (*cq).cqe = cqe as i32 };
            data
        });
        // SAFETY: the object has room for `Object<_, T::Cq>`, data not yet
        // initialised.
        unsafe { Object::<_, T::Cq>::init(cq, r) }
    }

    /// `ib_device_ops.destroy_cq`.
    ///
    /// # Safety
    ///
    /// Called by ib_core once per CQ `create_cq` initialised, in process
    /// context, when no QP uses it any more.
    pub(super) unsafe extern "C" fn destroy_cq(
        cq: *mut bindings::ib_cq,
        _udata: *mut bindings::ib_udata,
    ) -> kernel::ffi::c_int {
        // SAFETY: per the function's contract.
        unsafe { Object::<_, T::Cq>::drop_data(cq) };
        0
    }

    /// `ib_device_ops.resize_cq`.
    ///
    /// # Safety
    ///
    /// Called by ib_core in process context with a live CQ of ours and the
    /// call's udata (or NULL).
    pub(super) unsafe extern "C" fn resize_cq(
        cq: *mut bindings::ib_cq,
        cqe: kernel::ffi::c_int,
        udata: *mut bindings::ib_udata,
    ) -> kernel::ffi::c_int {
        // SAFETY: per the function's contract.
        let (dev, data, udata) = unsafe {
            (
                Device::<T>::from_raw((*cq).device),
                Object::<bindings::ib_cq, T::Cq>::data_of(cq),
                UData::from_raw(udata),
            )
        };
        // A negative count is as invalid as a huge one.
        let want = u32::try_from(cqe).unwrap_or(u32::MAX);
        match T::resize_cq(dev, data, want, &udata) {
            Ok(n) => {
                // SAFETY: the CQ is live and ib_core serialises resizes.
                unsafe { (*cq).cqe = n as i32 };
                0
            }
            Err(e) => e.to_errno(),
        }
    }

    /// `ib_device_ops.req_notify_cq`.
    ///
    /// # Safety
    ///
    /// Called by ib_core (`ib_req_notify_cq`) with a live CQ of ours, from
    /// any context, hard interrupts included.
    pub(super) unsafe extern "C" fn req_notify_cq(
        cq: *mut bindings::ib_cq,
        flags: bindings::ib_cq_notify_flags,
    ) -> kernel::ffi::c_int {
        let arm = if flags & bindings::IB_CQ_SOLICITED_MASK == bindings::IB_CQ_SOLICITED {
            CqArm::Solicited
        } else {
            CqArm::NextCompletion
        };
        // SAFETY: per the function's contract.
        let data = unsafe { Object::<bindings::ib_cq, T::Cq>::data_of(cq) };
        let pending = T::req_notify_cq(data, arm);
        // With IB_CQ_REPORT_MISSED_EVENTS, 1 tells the caller to poll
        // again: completions may have arrived before the arming.
        match pending {
            Ok(true) if flags & bindings::IB_CQ_REPORT_MISSED_EVENTS != 0 => 1,
            r => to_c(r.map(|_| ())),
        }
    }

    /// `ib_device_ops.poll_cq`: up to `num` completions of a kernel CQ.
    ///
    /// # Safety
    ///
    /// Called by ib_core (`ib_poll_cq`) with a live CQ of ours and `wc`
    /// valid for `num` entries, from any context but hard irq (ULPs poll
    /// from softirq and process context).
    pub(super) unsafe extern "C" fn poll_cq(
        cq: *mut bindings::ib_cq,
        num: kernel::ffi::c_int,
        wc: *mut bindings::ib_wc,
    ) -> kernel::ffi::c_int {
        // SAFETY: per the function's contract.
        let (dev, data) = unsafe {
            (
                Device::<T>::from_raw((*cq).device),
                Object::<bindings::ib_cq, T::Cq>::data_of(cq),
            )
        };
        let max = usize::try_from(num).unwrap_or(0);
        let mut n = 0;
        while n < max {
            let Some(c) = T::poll_cq(dev, data) else {
                break;
            };
            // SAFETY: `wc` has room for `num` entries (contract) and
            // `n < num`; an `ib_wc` is plain data, every field written.
            let out = unsafe { &mut *wc.add(n) };
            super::wr::write_wc(&c, out);
            n += 1;
        }
        n as kernel::ffi::c_int
    }
}
