// SPDX-License-Identifier: GPL-2.0

//! Memory regions: user MRs (pinned user memory), DMA MRs (all of kernel
//! memory) and fast-registration MRs (a page list a kernel ULP maps with
//! `ib_map_mr_sg`). ib_core does not allocate `ib_mr`s for drivers: each
//! is a boxed `Object<ib_mr, T::Mr>` handed back to `dereg_mr`.
//!
//! rxud registers without a DMA device, so ib_core's "virtual DMA" applies:
//! DMA addresses of kernel ULPs are kernel virtual addresses.

use super::device::{err_ptr, Adapter, Device, DeviceOps, Object};
use super::udata::UData;
use crate::ffi::bindings;
use kernel::{prelude::*, types::Opaque};

/// Kinds of fast-registration MR (`enum ib_mr_type`).
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) enum MrKind {
    /// Page lists of equal-sized pages (`IB_MR_TYPE_MEM_REG`).
    MemReg,
    /// Anything else (SG gaps, integrity, ...): the raw type.
    Other(u32),
}

/// Where a user MR's memory is: the process's address range and rights
/// it was registered with (what `rereg_user_mr` keeps when it is not told
/// to change them).
#[derive(Clone, Copy, Debug)]
pub(crate) struct UserRange {
    pub(crate) start: u64,
    pub(crate) len: u64,
    pub(crate) access: u32,
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
        let ib = bindings::ib_mr { lkey: key, rkey: key, iova, length, ..Default::default() };
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
    pub(super) unsafe extern "C" fn reg_user_mr(
        pd: *mut bindings::ib_pd,
        start: u64,
        length: u64,
        iova: u64,
        access: kernel::ffi::c_int,
        udata: *mut bindings::ib_udata,
    ) -> *mut bindings::ib_mr {
        // SAFETY: ib_core passes a live PD of ours (kept alive by its use
        // count while the MR exists) on a live device, from the
        // registering process's uverbs call.
        let r = unsafe {
            let dev = Device::<T>::from_raw((*pd).device);
            let pd_data = Object::<bindings::ib_pd, T::Pd>::data_of(pd);
            super::Umem::get(dev.as_raw(), start, length, access)
                .and_then(|umem| T::reg_user_mr(dev, pd_data, umem, iova, access as u32, &UData::from_raw(udata)))
        };
        into_raw_mr(r)
    }

    /// Re-registers a user MR by registering a replacement (ib_core swaps
    /// it in under the same handle and deregisters the old one): new
    /// translation, PD and/or rights, the rest as before. Re-pinning is the
    /// price of never changing a live MR under the data path's feet.
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
        // SAFETY: ib_core passes a live user MR of ours (held for write),
        // the PD the MR is to use (the old or a new live one), from the
        // owning process's uverbs call.
        unsafe {
            let dev = Device::<T>::from_raw((*pd).device);
            let old = Object::<bindings::ib_mr, T::Mr>::data_of(mr);
            let Some(range) = T::user_range(old) else {
                return err_ptr(EINVAL);
            };
            let (start, length, iova) = if flags & bindings::IB_MR_REREG_TRANS != 0 {
                (start, length, iova)
            } else {
                (range.start, range.len, (*mr).iova)
            };
            let access = if flags & bindings::IB_MR_REREG_ACCESS != 0 { access as u32 } else { range.access };
            let pd_data = Object::<bindings::ib_pd, T::Pd>::data_of(pd);
            let r = super::Umem::get(dev.as_raw(), start, length, access as i32)
                .and_then(|umem| T::reg_user_mr(dev, pd_data, umem, iova, access, &UData::from_raw(udata)));
            into_raw_mr_at(r, iova, length)
        }
    }

    pub(super) unsafe extern "C" fn get_dma_mr(pd: *mut bindings::ib_pd, access: kernel::ffi::c_int) -> *mut bindings::ib_mr {
        // SAFETY: as in `reg_user_mr`, from a kernel caller.
        let r = unsafe {
            let dev = Device::<T>::from_raw((*pd).device);
            T::get_dma_mr(dev, Object::<bindings::ib_pd, T::Pd>::data_of(pd), access as u32)
        };
        into_raw_mr(r)
    }

    pub(super) unsafe extern "C" fn alloc_mr(
        pd: *mut bindings::ib_pd,
        mr_type: bindings::ib_mr_type,
        max_num_sg: u32,
    ) -> *mut bindings::ib_mr {
        let kind = match mr_type {
            bindings::IB_MR_TYPE_MEM_REG => MrKind::MemReg,
            t => MrKind::Other(t),
        };
        // SAFETY: as in `get_dma_mr`.
        let r = unsafe {
            let dev = Device::<T>::from_raw((*pd).device);
            T::alloc_mr(dev, Object::<bindings::ib_pd, T::Pd>::data_of(pd), kind, max_num_sg)
        };
        into_raw_mr(r)
    }

    /// `ib_sg_to_pages`' callback: one page of the list being mapped.
    unsafe extern "C" fn set_page(mr: *mut bindings::ib_mr, addr: u64) -> kernel::ffi::c_int {
        // SAFETY: called from `map_mr_sg` below, on the MR it maps.
        let data = unsafe { Object::<bindings::ib_mr, T::Mr>::data_of(mr) };
        match T::mr_add_page(data, addr) {
            Ok(()) => 0,
            Err(e) => e.to_errno(),
        }
    }

    /// Maps a scatterlist onto a fast-registration MR; returns how many
    /// entries were mapped. ib_core's `ib_sg_to_pages` splits it into pages
    /// of `mr->page_size` and sets the MR's iova and length.
    pub(super) unsafe extern "C" fn map_mr_sg(
        mr: *mut bindings::ib_mr,
        sg: *mut bindings::scatterlist,
        sg_nents: kernel::ffi::c_int,
        sg_offset: *mut kernel::ffi::c_uint,
    ) -> kernel::ffi::c_int {
        // SAFETY: ib_core passes a live MR of ours (from `alloc_mr`), a
        // DMA-mapped scatterlist of `sg_nents` entries and an optional
        // offset into its first entry.
        unsafe {
            let data = Object::<bindings::ib_mr, T::Mr>::data_of(mr);
            if let Err(e) = T::mr_clear_pages(data) {
                return e.to_errno();
            }
            bindings::ib_sg_to_pages(mr, sg, sg_nents, sg_offset, Some(Self::set_page))
        }
    }

    pub(super) unsafe extern "C" fn dereg_mr(mr: *mut bindings::ib_mr, _udata: *mut bindings::ib_udata) -> kernel::ffi::c_int {
        // SAFETY: `mr` came from `KBox::into_raw` in `into_raw_mr` and
        // ib_core gives it back once.
        drop(unsafe { KBox::from_raw(mr.cast::<Object<bindings::ib_mr, T::Mr>>()) });
        0
    }
}
