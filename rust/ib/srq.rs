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
    /// Bits neither of the above.
    pub(crate) unknown: u32,
}

impl SrqAttr {
    fn from_raw(a: &bindings::ib_srq_attr) -> Self {
        Self { max_wr: a.max_wr, max_sge: a.max_sge, srq_limit: a.srq_limit }
    }

    fn to_raw(self, a: &mut bindings::ib_srq_attr) {
        a.max_wr = self.max_wr;
        a.max_sge = self.max_sge;
        a.srq_limit = self.srq_limit;
    }
}

impl<T: DeviceOps> Adapter<T> {
    pub(super) unsafe extern "C" fn create_srq(
        srq: *mut bindings::ib_srq,
        init: *mut bindings::ib_srq_init_attr,
        udata: *mut bindings::ib_udata,
    ) -> kernel::ffi::c_int {
        // SAFETY: ib_core passes a zeroed SRQ object of `size_ib_srq`
        // bytes with `device` and `pd` set, the init attributes and the
        // call's udata.
        unsafe {
            let dev = Device::<T>::from_raw((*srq).device);
            let pd = Object::<bindings::ib_pd, T::Pd>::data_of((*srq).pd);
            let i = &mut *init;
            let r = if i.srq_type != bindings::IB_SRQT_BASIC {
                Err(super::eopnotsupp())
            } else {
                T::create_srq(dev, pd, &SrqAttr::from_raw(&i.attr), &UData::from_raw(udata)).map(|(data, granted)| {
                    // ib_core reports the granted sizes to the creator.
                    granted.to_raw(&mut i.attr);
                    data
                })
            };
            Object::<_, T::Srq>::init(srq, r)
        }
    }

    pub(super) unsafe extern "C" fn destroy_srq(srq: *mut bindings::ib_srq, _udata: *mut bindings::ib_udata) -> kernel::ffi::c_int {
        // SAFETY: ib_core calls this once, on an SRQ `create_srq`
        // initialised and no QP uses any more.
        unsafe { Object::<_, T::Srq>::drop_data(srq) };
        0
    }

    pub(super) unsafe extern "C" fn modify_srq(
        srq: *mut bindings::ib_srq,
        attr: *mut bindings::ib_srq_attr,
        mask: bindings::ib_srq_attr_mask,
        udata: *mut bindings::ib_udata,
    ) -> kernel::ffi::c_int {
        let m = SrqModify {
            resize: mask & bindings::IB_SRQ_MAX_WR != 0,
            limit: mask & bindings::IB_SRQ_LIMIT != 0,
            unknown: mask & !(bindings::IB_SRQ_MAX_WR | bindings::IB_SRQ_LIMIT),
        };
        // SAFETY: ib_core passes a live SRQ of ours, valid attributes and
        // the call's udata.
        unsafe {
            let dev = Device::<T>::from_raw((*srq).device);
            let data = Object::<bindings::ib_srq, T::Srq>::data_of(srq);
            to_c(T::modify_srq(dev, data, &SrqAttr::from_raw(&*attr), m, &UData::from_raw(udata)))
        }
    }

    pub(super) unsafe extern "C" fn query_srq(srq: *mut bindings::ib_srq, attr: *mut bindings::ib_srq_attr) -> kernel::ffi::c_int {
        // SAFETY: ib_core passes a live SRQ of ours and a struct to fill.
        unsafe {
            let data = Object::<bindings::ib_srq, T::Srq>::data_of(srq);
            match T::query_srq(data) {
                Ok(a) => {
                    a.to_raw(&mut *attr);
                    0
                }
                Err(e) => e.to_errno(),
            }
        }
    }
}
