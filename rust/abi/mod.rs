// SPDX-License-Identifier: GPL-2.0 OR Linux-OpenIB

// The user ABI of rxud: everything the kernel module and librxud exchange,
// defined once. The module declares this as `mod abi`; librxud uses it
// through the host crate `rxud-abi` (`rust/abi/lib.rs`). Only `repr(C)`
// structs of fixed-size integers, with explicit padding fields, so that
// every byte is defined; `layout` below checks sizes and offsets at compile
// time in both builds.
//
// Evolution rules: a struct only grows at its end; a new field is valid
// only if its `comp_mask` bit (or a size check) says so; the kernel copies
// `min(sizeof, user len)` both ways and rejects requests whose unknown tail
// is not zero. Incompatible changes bump `UVERBS_ABI_VERSION`.

/// `ib_device_ops.uverbs_abi_ver` of rxud devices; librxud accepts exactly
/// this version.
pub const UVERBS_ABI_VERSION: u32 = 1;

/// Name of the sysfs attribute of every rxud ib_device
/// (`/sys/class/infiniband/<dev>/rxud_abi_version`). librxud matches
/// devices by its presence: rxud registers with `RDMA_DRIVER_UNKNOWN`, so
/// no driver id can identify it.
pub const SYSFS_ABI_ATTR: &str = "rxud_abi_version";

/// Driver part of `ibv_get_context` (alloc_ucontext) request.
#[repr(C)]
#[derive(Clone, Copy, Default, Debug, PartialEq, Eq)]
pub struct AllocContextReq {
    /// Request extensions the caller uses; none are defined yet.
    pub comp_mask: u64,
}

/// Driver part of the `ibv_get_context` response.
#[repr(C)]
#[derive(Clone, Copy, Default, Debug, PartialEq, Eq)]
pub struct AllocContextResp {
    /// Response extensions the kernel filled in; none are defined yet.
    pub comp_mask: u64,
    /// `UVERBS_ABI_VERSION` of the kernel, repeated for the provider's own
    /// check.
    pub abi_version: u32,
    pub reserved: u32,
}

/// Layout checks, evaluated at compile time wherever this file is built.
mod layout {
    use super::*;
    use core::mem::{offset_of, size_of};

    const _: () = assert!(size_of::<AllocContextReq>() == 8);
    const _: () = assert!(size_of::<AllocContextResp>() == 16);
    const _: () = assert!(offset_of!(AllocContextResp, abi_version) == 8);
}
