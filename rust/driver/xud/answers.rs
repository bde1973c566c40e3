// SPDX-License-Identifier: GPL-2.0

//! Answers, both ways: the ACKs and NAKs of a peer's receiving stream
//! built (at once on the receive path, or owed and sent by the timer),
//! and those received handed to the peer's sending stream, whose messages
//! their base and `sack` finish; likewise challenges, whose cookie the
//! sending stream then echoes.
//!
//! Apart from both halves because an answer joins them: the receive path
//! builds them and takes them, the timer sends the owed ones.

use super::peers::{PeerKey, Side};
use super::sender::complete_sends;
use super::{now, RxPacket, XudState};
use crate::driver::{
    counters::RxCounter,
    qp::{HeldCqs, QpCore},
    tx,
};
use crate::ib::AddressVector;
use crate::net::skb::TxSkb;
use crate::proto::{
    psn::Psn,
    wire::{
        aeth::{self, AckSyndrome, NakCode},
        bth, deth,
        opcode::Opcode,
        packet, xack, xck,
    },
    xud::{
        self,
        cookie::Cookie,
        receiver,
        sender::{self, Answer, Nak},
    },
};

/// Where an ACK or NAK goes, and from which incarnation.
pub(super) struct ReplyTo {
    pub(super) qpn: u32,
    pub(super) av: AddressVector,
    pub(super) inc: u32,
    /// The Q_Key of the data packet answered.
    pub(super) qkey: u32,
}

/// An ACK (or, with `nak`, a NAK) about the stream `info` describes.
pub(super) fn build_answer(
    qp: &QpCore,
    ndev: &crate::net::NetDevice,
    to: &ReplyTo,
    info: &receiver::AckInfo,
    nak: Option<(AckSyndrome, Psn)>,
) -> Option<TxSkb> {
    let mut repr = packet::Repr::new(bth::Repr {
        opcode: if nak.is_some() {
            Opcode::XUD_NAK
        } else {
            Opcode::XUD_ACKNOWLEDGE
        },
        solicited: false,
        mig_req: false,
        pad_count: 0,
        pkey: bth::DEFAULT_PKEY,
        fecn: false,
        becn: false,
        dest_qp: to.qpn,
        ack_req: false,
        psn: info.base,
    });
    repr.deth = Some(deth::Repr {
        qkey: to.qkey,
        src_qp: qp.qpn(),
    });
    repr.xack = Some(xack::Repr {
        stream: info.stream,
        inc: to.inc,
        sack: info.sack,
    });
    if let Some((syndrome, psn)) = nak {
        repr.aeth = Some(aeth::Repr {
            syndrome,
            msn: psn.value(),
        });
    }
    let total = repr.buffer_len(0).ok()?;
    let mut skb = TxSkb::new(ndev, total).ok()?;
    repr.emit(skb.payload_mut(), 0).ok()?;
    tx::finish(
        &mut skb,
        &to.av,
        tx::source_port(qp.qpn()),
        None,
        qp.next_ip_id(),
        false,
    )
    .ok()?;
    let which = if nak.is_some() {
        RxCounter::XudNaksSent
    } else {
        RxCounter::XudAcksSent
    };
    qp.port.counters.add(which, 1);
    Some(skb)
}

/// Sends the ACKs packets have been waiting for.
pub(super) fn flush_owed_acks(qp: &QpCore, st: &mut XudState) {
    let Some(ndev) = qp.ud_netdev() else {
        return;
    };
    let inc = st.inc;
    let XudState {
        peers, txq, busy, ..
    } = st;
    for i in 0..busy.len() {
        if txq.is_full() {
            return;
        }
        let Some((key, peer)) = busy.peer_mut(i, peers) else {
            continue;
        };
        let Some(r) = peer.recv_active() else {
            continue;
        };
        if r.ack_owed().is_none() {
            continue;
        }
        let info = r.ack();
        let to = ReplyTo {
            qpn: key.qpn,
            av: peer.reply.to(&key),
            inc,
            qkey: qp.live.qkey(),
        };
        if let Some(skb) = build_answer(qp, &ndev, &to, &info, None) {
            txq.push(skb);
        }
    }
}

pub(super) fn on_answer(
    held: &HeldCqs,
    p: &RxPacket<'_>,
    key: PeerKey,
) -> core::result::Result<(), RxCounter> {
    let qp = held.qp();
    use crate::proto::wire::opcode::ExtHeader as H;
    let x = p.ext(H::Xack).ok_or(RxCounter::DropMalformed)?;
    let x = xack::Repr::parse(&xack::Header::new_checked(x).map_err(|_| RxCounter::DropMalformed)?)
        .map_err(|_| RxCounter::DropMalformed)?;
    let nak = match p.ext(H::Aeth) {
        Some(a) => {
            let a = aeth::Repr::parse(
                &aeth::Header::new_checked(a).map_err(|_| RxCounter::DropMalformed)?,
            );
            let psn = Psn::new(a.msn);
            let n = match a.syndrome {
                AckSyndrome::RnrNak { timer_code } => Nak::ReceiverNotReady(timer_code),
                AckSyndrome::Nak(NakCode::RemoteAccessError) => Nak::RemoteAccess,
                AckSyndrome::Nak(NakCode::Reserved(c)) if c == xud::NAK_STALE_INCARNATION => {
                    Nak::StaleIncarnation
                }
                AckSyndrome::Nak(_) => Nak::InvalidRequest,
                _ => return Err(RxCounter::DropMalformed),
            };
            Some((n, psn))
        }
        None => None,
    };
    let a = Answer {
        stream: x.stream,
        inc: x.inc,
        base: p.psn,
        sack: x.sack,
        nak,
    };
    let mut g = qp.xud().ok_or(RxCounter::DropNoQp)?.lock(held);
    let st = g.as_deref_mut().ok_or(RxCounter::DropNoQp)?;
    let cfg = st.cfg;
    let XudState {
        peers,
        wqes,
        msgs,
        busy,
        ..
    } = st;
    let peer = peers.get_mut(&key).ok_or(RxCounter::DropSequence)?;
    if let Some(Side::Parked(p)) = &peer.send {
        // Nothing is in flight: only a (late) answer of this stream can
        // matter, and only a stale-incarnation NAK changes it.
        if p.stream() != a.stream {
            return Err(RxCounter::DropSequence);
        }
    }
    peer.wake_send(cfg)
        .map_err(|_| RxCounter::DropNoMemory)?
        .ok_or(RxCounter::DropSequence)?;
    // Taken back into use: its timers and completions are the passes'.
    busy.add(key, peer);
    let s = peer.send_active().ok_or(RxCounter::DropSequence)?;
    let outcome = s.on_answer(msgs, &a, now());
    complete_sends(qp, peer, wqes, msgs);
    match outcome {
        sender::AnswerOutcome::Taken => {
            let which = if a.nak.is_some() {
                RxCounter::XudNaksReceived
            } else {
                RxCounter::XudAcksReceived
            };
            qp.port.counters.add(which, 1);
            Ok(())
        }
        sender::AnswerOutcome::Ignored => Err(RxCounter::DropSequence),
    }
}

/// A challenge (xud.rst, "Stream cookies") to the sender of the data
/// packet `psn` of `stream`, which found no window here and carried no
/// fresh cookie: the cookie to echo. Built from the packet alone, as a
/// stale-incarnation NAK is: nothing is kept for its sender.
pub(super) fn build_challenge(
    qp: &QpCore,
    ndev: &crate::net::NetDevice,
    to: &ReplyTo,
    stream: u64,
    psn: Psn,
    cookie: Cookie,
) -> Option<TxSkb> {
    let mut repr = packet::Repr::new(bth::Repr {
        opcode: Opcode::XUD_CHALLENGE,
        solicited: false,
        mig_req: false,
        pad_count: 0,
        pkey: bth::DEFAULT_PKEY,
        fecn: false,
        becn: false,
        dest_qp: to.qpn,
        ack_req: false,
        psn,
    });
    repr.deth = Some(deth::Repr {
        qkey: to.qkey,
        src_qp: qp.qpn(),
    });
    repr.xack = Some(xack::Repr {
        stream,
        inc: to.inc,
        sack: 0,
    });
    repr.xck = Some(xck::Repr { cookie });
    let total = repr.buffer_len(0).ok()?;
    let mut skb = TxSkb::new(ndev, total).ok()?;
    repr.emit(skb.payload_mut(), 0).ok()?;
    tx::finish(
        &mut skb,
        &to.av,
        tx::source_port(qp.qpn()),
        None,
        qp.next_ip_id(),
        false,
    )
    .ok()?;
    qp.port.counters.add(RxCounter::XudChallengesSent, 1);
    Some(skb)
}

/// A challenge received: the sending stream it names takes its cookie
/// (if newer than its own) and sends again what it had in flight.
pub(super) fn on_challenge(
    held: &HeldCqs,
    p: &RxPacket<'_>,
    key: PeerKey,
) -> core::result::Result<(), RxCounter> {
    let qp = held.qp();
    use crate::proto::wire::opcode::ExtHeader as H;
    let x = p.ext(H::Xack).ok_or(RxCounter::DropMalformed)?;
    let x = xack::Repr::parse(&xack::Header::new_checked(x).map_err(|_| RxCounter::DropMalformed)?)
        .map_err(|_| RxCounter::DropMalformed)?;
    let c = p.ext(H::Xck).ok_or(RxCounter::DropMalformed)?;
    let c = xck::Repr::parse(&xck::Header::new_checked(c).map_err(|_| RxCounter::DropMalformed)?)
        .map_err(|_| RxCounter::DropMalformed)?;
    let mut g = qp.xud().ok_or(RxCounter::DropNoQp)?.lock(held);
    let st = g.as_deref_mut().ok_or(RxCounter::DropNoQp)?;
    let cfg = st.cfg;
    let XudState { peers, busy, .. } = st;
    let peer = peers.get_mut(&key).ok_or(RxCounter::DropSequence)?;
    let sends_it = match &peer.send {
        Some(Side::Parked(p)) => p.stream() == x.stream,
        Some(Side::Active(s)) => s.stream() == x.stream,
        None => false,
    };
    if !sends_it {
        // Not a stream this QP sends (a forger's, sent to us as the
        // address it claimed): nothing to take, nothing woken.
        return Err(RxCounter::DropSequence);
    }
    peer.wake_send(cfg)
        .map_err(|_| RxCounter::DropNoMemory)?
        .ok_or(RxCounter::DropSequence)?;
    let s = peer.send_active().ok_or(RxCounter::DropSequence)?;
    match s.on_challenge(x.stream, x.inc, c.cookie, now()) {
        sender::AnswerOutcome::Taken => {
            // Its resends are the passes' to send.
            busy.add(key, peer);
            qp.port.counters.add(RxCounter::XudChallengesReceived, 1);
            Ok(())
        }
        sender::AnswerOutcome::Ignored => Err(RxCounter::DropSequence),
    }
}
