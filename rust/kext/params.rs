// SPDX-License-Identifier: GPL-2.0

//! rxud's module parameters that shape a device or its transports. They are C
//! (`rust/ffi/params.c`): the `module!` macro of 6.12 declares none.
//!
//! `max_qp` (`/sys/module/rxud/parameters/max_qp`, or `insmod rxud.ko
//! max_qp=N`): most QPs of each device created afterwards, its GSI QP
//! aside. The default is [`MAX_QP_LIMIT`]; a few make QP numbers come back
//! after as many creations, which tests of XUD's hold on a destroyed QP's
//! number use (Documentation/xud.rst, rule 5).
//!
//! `cc`: congestion control on (the default) or off, read as each packet
//! is built or taken (`proto::congestion`, Documentation/xud.rst,
//! "Congestion control").

use crate::ffi::bindings;

/// Most QPs a device can have besides its GSI QP: the size of its QP
/// number range, and `max_qp`'s default and largest value.
pub(crate) const MAX_QP_LIMIT: u32 = bindings::RXUD_MAX_QP;

/// `max_qp` now: from 1 to [`MAX_QP_LIMIT`]. Any context.
pub(crate) fn max_qp() -> u32 {
    // SAFETY: no precondition; reads a module parameter.
    let n = unsafe { bindings::rxud_max_qp() };
    // The parameter's setter refuses anything else; kept in range here
    // too, as the QP table's size depends on it.
    n.clamp(1, MAX_QP_LIMIT)
}

/// `cc` now (`/sys/module/rxud/parameters/cc`): whether congestion
/// control is on (`rust/ffi/params.c`). Any context.
pub(crate) fn cc_enabled() -> bool {
    // SAFETY: no precondition; reads a module parameter.
    unsafe { bindings::rxud_cc() }
}
