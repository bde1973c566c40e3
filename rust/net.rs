// SPDX-License-Identifier: GPL-2.0

//! Networking boundary: net_device handles, the netdev notifier, network
//! namespaces, socket buffers and UDP tunnel sockets.

pub(crate) mod netdev;
pub(crate) mod netns;
pub(crate) mod notifier;
pub(crate) mod route;
pub(crate) mod skb;
pub(crate) mod udp;

pub(crate) use netdev::{NetDevice, NetDeviceRef};
pub(crate) use route::RouteCache;

/// Whether `e` is `EADDRINUSE` (which 6.12's `kernel::error::code` lacks).
pub(crate) fn is_addr_in_use(e: kernel::error::Error) -> bool {
    e.to_errno() == -(crate::ffi::bindings::EADDRINUSE as i32)
}
