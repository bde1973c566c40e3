// SPDX-License-Identifier: GPL-2.0

//! Kernel extensions: what the driver needs of the kernel that 6.12's
//! `kernel` crate does not offer (interrupt- and bottom-half-safe locks,
//! timers, BH work, RCU-published pointers, module parameters, random
//! numbers), each a thin safe type over the C API. With `ib` and `net`
//! this is the boundary floor: every `unsafe` block of the module is in
//! one of the three (or in `ffi`'s bindings).

pub(crate) mod bh_work;
pub(crate) mod embedded;
pub(crate) mod params;
pub(crate) mod random;
pub(crate) mod rcu;
pub(crate) mod sync;
pub(crate) mod timer;
