// SPDX-License-Identifier: GPL-2.0

//! ib_core boundary: devices, their verbs, attributes and the rdma link
//! type. Everything `unsafe` about ib_core lives under this module; the
//! driver floor implements [`device::DeviceOps`] with safe code.

pub(crate) mod attr;
pub(crate) mod device;
pub(crate) mod link;
pub(crate) mod udata;
pub(crate) mod umem;

pub(crate) use attr::{DeviceAttr, LinkLayer, PortAttr, PortImmutable, PortPhysState, PortState};
pub(crate) use device::{Device, DeviceHandle, DeviceInfo, DeviceOps, DeviceRef, NewDevice, PortEvent};
pub(crate) use udata::UData;
pub(crate) use umem::Umem;

use kernel::error::Error;

/// `EOPNOTSUPP`, which 6.12's `kernel::error::code` lacks: the errno
/// ib_core and users expect for "this device cannot do that".
pub(crate) fn eopnotsupp() -> Error {
    Error::from_errno(-(crate::ffi::bindings::EOPNOTSUPP as i32))
}
