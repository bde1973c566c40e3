// SPDX-License-Identifier: GPL-2.0

//! GRO's decision for `rust/ffi/gro.c`: which received datagram joins the
//! train held for its flow. The rules are the protocol core's
//! ([`crate::proto::wire::gro`]); the C gathers what they need from GRO's
//! state into plain values, calls [`rxud_gro_decide`] once per datagram,
//! and links the skbs as the answer says.

use crate::ffi::bindings;
use crate::proto::wire::gro::{self, Datagram, Train, Verdict};

/// `rxud_gro_decide` (`rust/ffi/helpers.h`): what `rxud_gro_receive` does
/// with the datagram `d`, given the train GRO holds for its flow (`t`)
/// and whether GRO trains are on (`enabled`). Plain values in and out: no
/// pointer, no allocation; any context.
#[no_mangle]
pub(crate) extern "C" fn rxud_gro_decide(
    enabled: bool,
    d: bindings::rxud_gro_dgram,
    t: bindings::rxud_gro_train,
) -> bindings::rxud_gro_action {
    let next = Datagram {
        payload_len: d.payload_len,
        udp_len: d.udp_len,
        len: d.len,
        flush: d.flush,
    };
    let held = t.held.then_some(Train {
        head_udp_len: t.head_udp_len,
        len: t.len,
        count: t.count,
    });
    match gro::decide(enabled, next, held) {
        Verdict::Alone(_) => bindings::RXUD_GRO_ALONE,
        Verdict::Head => bindings::RXUD_GRO_HEAD,
        Verdict::Split(_) => bindings::RXUD_GRO_SPLIT,
        Verdict::Join => bindings::RXUD_GRO_JOIN,
        Verdict::JoinLast(_) => bindings::RXUD_GRO_JOIN_LAST,
    }
}
