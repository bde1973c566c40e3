// SPDX-License-Identifier: GPL-2.0

//! Port counters (`rdma statistic show`, sysfs `hw_counters`): the
//! `alloc_hw_port_stats` and `get_hw_stats` adapters.

use super::device::{Adapter, Device, DeviceOps};
use crate::ffi::bindings;
use kernel::str::CStr;

/// The name of one counter, for a driver's static table
/// ([`DeviceOps::PORT_COUNTERS`]).
#[repr(transparent)]
pub(crate) struct CounterDesc(bindings::rdma_stat_desc);

// SAFETY: a description is a pointer to a static string and plain
// integers, never written after construction.
unsafe impl Sync for CounterDesc {}

impl CounterDesc {
    pub(crate) const fn new(name: &'static CStr) -> Self {
        Self(bindings::rdma_stat_desc {
            name: name.as_char_ptr(),
            flags: 0,
            priv_: core::ptr::null(),
        })
    }
}

impl<T: DeviceOps> Adapter<T> {
    /// `ib_device_ops.alloc_hw_port_stats`.
    ///
    /// # Safety
    ///
    /// Called by ib_core in process context (registration) for a port of
    /// a live device of ours.
    pub(super) unsafe extern "C" fn alloc_hw_port_stats(
        _ib: *mut bindings::ib_device,
        _port: u32,
    ) -> *mut bindings::rdma_hw_stats {
        let descs = T::PORT_COUNTERS;
        let Ok(n) = i32::try_from(descs.len()) else {
            return core::ptr::null_mut();
        };
        // SAFETY: `descs` is static and `CounterDesc` is a transparent
        // `rdma_stat_desc`, so the array outlives the stats that point to
        // it. The lifespan is ib_core's default (in milliseconds).
        unsafe { bindings::rdma_alloc_hw_stats_struct(descs.as_ptr().cast(), n, 10) }
    }

    /// `ib_device_ops.get_hw_stats`: every counter at once.
    ///
    /// # Safety
    ///
    /// Called by ib_core in process context, with the stats lock held, on
    /// stats `alloc_hw_port_stats` made for a live device of ours.
    pub(super) unsafe extern "C" fn get_hw_stats(
        ib: *mut bindings::ib_device,
        stats: *mut bindings::rdma_hw_stats,
        port: u32,
        _index: kernel::ffi::c_int,
    ) -> kernel::ffi::c_int {
        let mut n = 0;
        // SAFETY: per the function's contract; the values array has
        // `num_counters` entries, ours to write under the stats lock.
        let (dev, values) = unsafe {
            let values = bindings::rxud_hw_stats_values(stats, &mut n);
            let len = usize::try_from(n).unwrap_or(0);
            (
                Device::<T>::from_raw(ib),
                core::slice::from_raw_parts_mut(values, len),
            )
        };
        T::port_counters(dev, port, values);
        n
    }
}
