// SPDX-License-Identifier: GPL-2.0

//! Networking boundary: net_device handles, the netdev notifier, network
//! namespaces, socket buffers, UDP tunnel sockets and their GRO decision.

pub(crate) mod gro;
pub(crate) mod netdev;
pub(crate) mod netns;
pub(crate) mod notifier;
pub(crate) mod route;
pub(crate) mod skb;
pub(crate) mod udp;

pub(crate) use netdev::{NetDevice, NetDeviceRef};
pub(crate) use route::RouteCache;

/// Advances the raw CRC-32 register `crc` (crc32_le's: no inversion,
/// reflected, as the ICRC runs it) over `data` with the kernel's CRC-32
/// library. Any context.
pub(crate) fn crc32_le(crc: u32, data: &[u8]) -> u32 {
    // SAFETY: `data` is valid for reads of `data.len()` bytes, which is all
    // the helper reads.
    unsafe { crate::ffi::bindings::rxud_crc32_le(crc, data.as_ptr(), data.len()) }
}

/// Whether `e` is `EADDRINUSE` (which 6.12's `kernel::error::code` lacks).
pub(crate) fn is_addr_in_use(e: kernel::error::Error) -> bool {
    e.to_errno() == -(crate::ffi::bindings::EADDRINUSE as i32)
}
