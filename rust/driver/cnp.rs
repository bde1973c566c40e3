// SPDX-License-Identifier: GPL-2.0

//! Congestion notification, the receiver's half (`proto::congestion` is
//! the sender's law): a packet of a flow that answers CNPs (an RC request,
//! an XUD data packet) that arrives marked Congestion Experienced is
//! answered with a CNP to the QP that sent it, at most one per flow per
//! `proto::congestion::CNP_INTERVAL_NS` (`CnpPacer`), as the RoCEv2 annex
//! asks. The transports send it along the flow's own path (`rc.rs`,
//! `xud/answers.rs`) and take the CNPs that come back (`rx.rs` finds them
//! by opcode, the transports check who sent them).

use super::counters::RxCounter;
use super::qp::QpCore;
use crate::net::{skb::TxSkb, NetDevice};
use crate::proto::wire::{bth, cnp};

/// Whether a packet whose IP header starts `ip` arrived marked CE, with
/// congestion control on (off, rxud neither marks nor answers). Counts it.
pub(crate) fn ce_marked(qp: &QpCore, ip: &[u8]) -> bool {
    let ce = crate::kext::params::cc_enabled() && cnp::Ecn::of_ip(ip) == Some(cnp::Ecn::Ce);
    if ce {
        qp.port.counters.add(RxCounter::EcnCeReceived, 1);
    }
    ce
}

/// A CNP for QP `dest_qpn` of the peer, without its IP header and ICRC
/// (the flow's `tx::finish` routes it and fills them in).
pub(crate) fn build(ndev: &NetDevice, dest_qpn: u32) -> Option<TxSkb> {
    let mut skb = TxSkb::new(ndev, cnp::PACKET_LEN).ok()?;
    cnp::emit(skb.payload_mut(), dest_qpn, bth::DEFAULT_PKEY).ok()?;
    Some(skb)
}
