// SPDX-License-Identifier: GPL-2.0

//! The driver floor: rxud devices and what creates and removes them, in
//! safe Rust over the boundary (`ib`, `net`, `kext`). `unsafe` is
//! forbidden here: the build fails if any is added.

#![forbid(unsafe_code)]

pub(crate) mod ah;
pub(crate) mod cnp;
pub(crate) mod context;
pub(crate) mod counter;
pub(crate) mod counters;
pub(crate) mod cq;
pub(crate) mod device;
pub(crate) mod flight;
pub(crate) mod local;
pub(crate) mod mcast;
pub(crate) mod mr;
pub(crate) mod pd;
pub(crate) mod post;
pub(crate) mod qp;
pub(crate) mod rc;
pub(crate) mod registry;
pub(crate) mod ring;
pub(crate) mod rx;
pub(crate) mod sgl;
pub(crate) mod srq;
pub(crate) mod table;
pub(crate) mod transport;
pub(crate) mod tx;
pub(crate) mod txq;
pub(crate) mod xud;

pub(crate) use registry::Registry;
