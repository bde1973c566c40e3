// SPDX-License-Identifier: GPL-2.0

//! Networking boundary: net_device handles and the netdev notifier.

pub(crate) mod netdev;
pub(crate) mod notifier;

pub(crate) use netdev::NetDevice;
