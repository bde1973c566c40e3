// SPDX-License-Identifier: GPL-2.0

//! Memory regions: user MRs (pinned user memory), DMA MRs (all of kernel
//! memory) and fast-registration MRs (a page list a kernel ULP maps with
//! `ib_map_mr_sg`). ib_core does not allocate `ib_mr`s for drivers: each
//! is a boxed `Object<ib_mr, T::Mr>` handed back to `dereg_mr`. Memory
//! windows (`ib_mw`) it does allocate, with room for the driver's data.
//!
//! rxud registers without a DMA device, so ib_core's "virtual DMA" applies:
//! DMA addresses of kernel ULPs are kernel virtual addresses.

use super::device::{err_ptr, to_c, Adapter, Device, DeviceOps, Object};
use super::flags::flag_set;
use super::udata::UData;
use crate::ffi::bindings;
use kernel::{prelude::*, types::Opaque};

flag_set! {
    /// Access rights (`IB_ACCESS_*`) of an MR, or those a QP grants to its
    /// peer.
    pub(crate) struct AccessFlags {
        const LOCAL_WRITE = bindings::IB_ACCESS_LOCAL_WRITE;
        const REMOTE_WRITE = bindings::IB_ACCESS_REMOTE_WRITE;
        const REMOTE_READ = bindings::IB_ACCESS_REMOTE_READ;
        const REMOTE_ATOMIC = bindings::IB_ACCESS_REMOTE_ATOMIC;
        /// FLUSH for global visibility (IBTA 1.5 A19).
        const FLUSH_GLOBAL = bindings::IB_ACCESS_FLUSH_GLOBAL;
        /// FLUSH for persistence: never granted (the device does not
        /// offer it, so ib_core refuses it at registration), named so
        /// that a FLUSH asking for it is checked against it.
        const FLUSH_PERSISTENT = bindings::IB_ACCESS_FLUSH_PERSISTENT;
        /// Memory windows may be bound to the MR.
        const MW_BIND = bindings::IB_ACCESS_MW_BIND;
        /// A memory window addressed from 0, not by virtual address.
        const ZERO_BASED = bindings::IB_ZERO_BASED;
        /// Hints a device may ignore (relaxed ordering and later ones).
        const OPTIONAL = bindings::IB_ACCESS_OPTIONAL;
    }
}

/// Memory window types (`enum ib_mw_type`; ib_core refuses others).
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) enum MwKind {
    /// Type 1: bound by `ibv_bind_mw`, not tied to a QP.
    Type1,
    /// Type 2 (2B): bound by a BIND_MW work request, usable through the
    /// binding QP only.
    Type2,
}

/// Kinds of fast-registration MR (`enum ib_mr_type`).
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) enum MrKind {
    /// Page lists of equal-sized pages (`IB_MR_TYPE_MEM_REG`).
    MemReg,
    /// Anything else (SG gaps, integrity, ...).
    Unsupported,
}

/// Where a user MR's memory is: the process's address range and rights
/// it was registered with (what `rereg_user_mr` keeps when it is not told
/// to change them).
#[derive(Clone, Copy, Debug)]
pub(crate) struct UserRange {
    pub(crate) start: u64,
    pub(crate) len: u64,
    pub(crate) access: AccessFlags,
}

/// Boxes `data` as an `ib_mr` with key `key` (lkey = rkey), or returns
/// the error as an ERR_PTR.
fn into_raw_mr<D>(r: Result<(D, u32)>) -> *mut bindings::ib_mr {
    into_raw_mr_at(r, 0, 0)
}

/// As [`into_raw_mr`], for an MR whose iova and length the driver must
/// set itself (ib_core does for new MRs, not for rereg's replacements).
fn into_raw_mr_at<D>(r: Result<(D, u32)>, iova: u64, length: u64) -> *mut bindings::ib_mr {
    let obj = r.and_then(|(data, key)| {
        let ib = bindings::ib_mr {
            lkey: key,
            rkey: key,
            iova,
            length,
            ..Default::default()
        };
        Ok(KBox::new(Object::new(Opaque::new(ib), data), GFP_KERNEL)?)
    });
    match obj {
        // ib_core fills in the rest of `ib_mr` and hands it back to
        // `dereg_mr`.
        Ok(obj) => KBox::into_raw(obj).cast(),
        Err(e) => err_ptr(e),
    }
}

impl<T: DeviceOps> Adapter<T> {
    /// `ib_device_ops.reg_user_mr`.
    ///
    /// # Safety
    ///
    /// Called by ib_core in process context (the registering process's
    /// uverbs call) with a live PD of ours on a live device, kept alive by
    /// its use count while the MR exists, and the call's udata.
    pub(super) unsafe extern "C" fn reg_user_mr(
        pd: *mut bindings::ib_pd,
        start: u64,
        length: u64,
        iova: u64,
        access: kernel::ffi::c_int,
        udata: *mut bindings::ib_udata,
    ) -> *mut bindings::ib_mr {
        // SAFETY: per the function's contract.
        let (dev, pd_data, udata) = unsafe {
            (
                Device::<T>::from_raw((*pd).device),
                Object::<bindings::ib_pd, T::Pd>::data_of(pd),
                UData::from_raw(udata),
            )
        };
        let access = AccessFlags::from_bits(access as u32);
        // SAFETY: the device is live and this is the registering process's
        // uverbs call (contract above).
        let umem = unsafe { super::Umem::get(dev.as_raw(), start, length, access) };
        let r = umem.and_then(|umem| T::reg_user_mr(dev, pd_data, umem, iova, access, &udata));
        into_raw_mr(r)
    }

    /// `ib_device_ops.rereg_user_mr`: re-registers a user MR by registering
    /// a replacement (ib_core swaps it in under the same handle and
    /// deregisters the old one): new translation, PD and/or rights, the
    /// rest as before. Re-pinning is the price of never changing a live MR
    /// under the data path's feet.
    ///
    /// # Safety
    ///
    /// Called by ib_core in process context (the owning process's uverbs
    /// call) with a live user MR of ours (held for write), the PD the MR is
    /// to use (the old or a new live one) and the call's udata.
    pub(super) unsafe extern "C" fn rereg_user_mr(
        mr: *mut bindings::ib_mr,
        flags: kernel::ffi::c_int,
        start: u64,
        length: u64,
        iova: u64,
        access: kernel::ffi::c_int,
        pd: *mut bindings::ib_pd,
        udata: *mut bindings::ib_udata,
    ) -> *mut bindings::ib_mr {
        let flags = flags as u32;
        // SAFETY: per the function's contract.
        let (dev, old, old_iova, pd_data, udata) = unsafe {
            (
                Device::<T>::from_raw((*pd).device),
                Object::<bindings::ib_mr, T::Mr>::data_of(mr),
                (*mr).iova,
                Object::<bindings::ib_pd, T::Pd>::data_of(pd),
                UData::from_raw(udata),
            )
        };
        let Some(range) = T::user_range(old) else {
            return err_ptr(EINVAL);
        };
        let (start, length, iova) = if flags & bindings::IB_MR_REREG_TRANS != 0 {
            (start, length, iova)
        } else {
            (range.start, range.len, old_iova)
        };
        let access = if flags & bindings::IB_MR_REREG_ACCESS != 0 {
            AccessFlags::from_bits(access as u32)
        } else {
            range.access
        };
        // SAFETY: the device is live and this is the owning process's
        // uverbs call (contract above).
        let umem = unsafe { super::Umem::get(dev.as_raw(), start, length, access) };
        let r =
            umem.and_then(|umem| T::rereg_user_mr(dev, old, pd_data, umem, iova, access, &udata));
        into_raw_mr_at(r, iova, length)
    }

    /// `ib_device_ops.get_dma_mr`.
    ///
    /// # Safety
    ///
    /// Called by ib_core (`ib_alloc_pd`) in process context with a live PD
    /// of ours on a live device.
    pub(super) unsafe extern "C" fn get_dma_mr(
        pd: *mut bindings::ib_pd,
        access: kernel::ffi::c_int,
    ) -> *mut bindings::ib_mr {
        // SAFETY: per the function's contract.
        let (dev, pd_data) = unsafe {
            (
                Device::<T>::from_raw((*pd).device),
                Object::<bindings::ib_pd, T::Pd>::data_of(pd),
            )
        };
        into_raw_mr(T::get_dma_mr(
            dev,
            pd_data,
            AccessFlags::from_bits(access as u32),
        ))
    }

    /// `ib_device_ops.alloc_mr`.
    ///
    /// # Safety
    ///
    /// As [`Self::get_dma_mr`] (`ib_alloc_mr`).
    pub(super) unsafe extern "C" fn alloc_mr(
        pd: *mut bindings::ib_pd,
        mr_type: bindings::ib_mr_type,
        max_num_sg: u32,
    ) -> *mut bindings::ib_mr {
        let kind = match mr_type {
            bindings::IB_MR_TYPE_MEM_REG => MrKind::MemReg,
            _ => MrKind::Unsupported,
        };
        // SAFETY: per the function's contract.
        let (dev, pd_data) = unsafe {
            (
                Device::<T>::from_raw((*pd).device),
                Object::<bindings::ib_pd, T::Pd>::data_of(pd),
            )
        };
        into_raw_mr(T::alloc_mr(dev, pd_data, kind, max_num_sg))
    }

    /// `ib_sg_to_pages`' callback: one page of the list being mapped.
    ///
    /// # Safety
    ///
    /// Called only from `ib_sg_to_pages` in [`Self::map_mr_sg`], on the
    /// live MR it maps.
    unsafe extern "C" fn set_page(mr: *mut bindings::ib_mr, addr: u64) -> kernel::ffi::c_int {
        // SAFETY: per the function's contract.
        let data = unsafe { Object::<bindings::ib_mr, T::Mr>::data_of(mr) };
        to_c(T::mr_add_page(data, addr))
    }

    /// `ib_device_ops.map_mr_sg`: maps a scatterlist onto a
    /// fast-registration MR; returns how many entries were mapped. ib_core's
    /// `ib_sg_to_pages` splits it into pages of `mr->page_size` and sets the
    /// MR's iova and length.
    ///
    /// # Safety
    ///
    /// Called by ib_core (`ib_map_mr_sg`), possibly in atomic context, with
    /// a live MR of ours (from `alloc_mr`), a DMA-mapped scatterlist of
    /// `sg_nents` entries and an optional offset into its first entry.
    pub(super) unsafe extern "C" fn map_mr_sg(
        mr: *mut bindings::ib_mr,
        sg: *mut bindings::scatterlist,
        sg_nents: kernel::ffi::c_int,
        sg_offset: *mut kernel::ffi::c_uint,
    ) -> kernel::ffi::c_int {
        // SAFETY: per the function's contract.
        let data = unsafe { Object::<bindings::ib_mr, T::Mr>::data_of(mr) };
        if let Err(e) = T::mr_clear_pages(data) {
            return e.to_errno();
        }
        // SAFETY: per the function's contract; `set_page` is called back on
        // this same MR only.
        unsafe { bindings::ib_sg_to_pages(mr, sg, sg_nents, sg_offset, Some(Self::set_page)) }
    }

    /// `ib_device_ops.alloc_mw`.
    ///
    /// # Safety
    ///
    /// Called by ib_core (uverbs) in process context with a zeroed object
    /// of `size_ib_mw` bytes whose `device`, `pd` (live, of ours) and
    /// `type` it set, and the call's udata.
    pub(super) unsafe extern "C" fn alloc_mw(
        mw: *mut bindings::ib_mw,
        _udata: *mut bindings::ib_udata,
    ) -> kernel::ffi::c_int {
        // SAFETY: per the function's contract.
        let (dev, pd_data, kind) = unsafe {
            (
                Device::<T>::from_raw((*mw).device),
                Object::<bindings::ib_pd, T::Pd>::data_of((*mw).pd),
                (*mw).type_,
            )
        };
        let kind = match kind {
            bindings::IB_MW_TYPE_1 => MwKind::Type1,
            bindings::IB_MW_TYPE_2 => MwKind::Type2,
            _ => return EINVAL.to_errno(),
        };
        let r = T::alloc_mw(dev, pd_data, kind).map(|(data, rkey)| {
            // SAFETY: the object is ours to fill during the call.
            unsafe { (*mw).rkey = rkey };
            data
        });
        // SAFETY: the object has room for `Object<_, T::Mw>`, data not
        // yet initialised.
        unsafe { Object::<_, T::Mw>::init(mw, r) }
    }

    /// `ib_device_ops.dealloc_mw`.
    ///
    /// # Safety
    ///
    /// Called by ib_core once per window `alloc_mw` initialised, in
    /// process context, when nothing uses it any more.
    pub(super) unsafe extern "C" fn dealloc_mw(mw: *mut bindings::ib_mw) -> kernel::ffi::c_int {
        // SAFETY: per the function's contract.
        unsafe { Object::<_, T::Mw>::drop_data(mw) };
        0
    }

    /// `ib_device_ops.dereg_mr`.
    ///
    /// # Safety
    ///
    /// Called by ib_core once per MR one of the verbs above returned, in
    /// process context, when nothing uses it any more.
    pub(super) unsafe extern "C" fn dereg_mr(
        mr: *mut bindings::ib_mr,
        _udata: *mut bindings::ib_udata,
    ) -> kernel::ffi::c_int {
        // SAFETY: every MR we return came from `KBox::into_raw` in
        // `into_raw_mr_at`, and ib_core gives it back once.
        drop(unsafe { KBox::from_raw(mr.cast::<Object<bindings::ib_mr, T::Mr>>()) });
        0
    }
}
