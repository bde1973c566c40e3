// SPDX-License-Identifier: GPL-2.0

//! ib_core boundary: devices, their verbs, attributes and the rdma link
//! type. Everything `unsafe` about ib_core lives under this module; the
//! driver floor implements [`device::DeviceOps`] with safe code.

pub(crate) mod ah;
pub(crate) mod attr;
pub(crate) mod cq;
pub(crate) mod device;
mod flags;
pub(crate) mod kmem;
pub(crate) mod link;
pub(crate) mod mmap;
pub(crate) mod mr;
pub(crate) mod qp;
pub(crate) mod res;
pub(crate) mod srq;
pub(crate) mod stats;
pub(crate) mod udata;
pub(crate) mod umem;
pub(crate) mod wr;

pub(crate) use ah::{AddressVector, NetworkType};
pub(crate) use attr::{
    DeviceAttr, DeviceCapFlags, LinkLayer, PortAttr, PortCapFlags, PortImmutable, PortPhysState,
    PortState,
};
pub(crate) use cq::{CqArm, CqEvents, CqInitAttr};
pub(crate) use device::{
    Device, DeviceHandle, DeviceInfo, DeviceOps, DeviceRef, NewDevice, PortEvent,
};
pub(crate) use mmap::{SharedMem, Unmapping};
pub(crate) use mr::{AccessFlags, MrKind, MwKind, UserRange};
pub(crate) use qp::{
    QpAttr, QpAttrMask, QpCap, QpEvent, QpEvents, QpInitAttr, QpQuery, QpState, QpType,
};
pub(crate) use res::Details;
pub(crate) use srq::{SrqAttr, SrqEvents, SrqModify};
pub(crate) use stats::CounterDesc;
pub(crate) use udata::{UContext, UData};
pub(crate) use umem::Umem;
pub(crate) use wr::{Completion, QpHandle, RecvWr, Remote, SendFlags, SendOp, SendWr, SgeList};

use kernel::error::Error;

/// `EOPNOTSUPP`, which 6.12's `kernel::error::code` lacks: the errno
/// ib_core and users expect for "this device cannot do that".
pub(crate) fn eopnotsupp() -> Error {
    Error::from_errno(-(crate::ffi::bindings::EOPNOTSUPP as i32))
}
