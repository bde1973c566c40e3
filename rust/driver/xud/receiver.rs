// SPDX-License-Identifier: GPL-2.0

//! The receiving half, the driver's side of
//! [`crate::proto::xud::receiver`]: a data packet through rule 1 (a stale
//! incarnation is NAKed from no state), its stream cookie checked (a
//! stream with no window and no fresh cookie is challenged from no
//! state), its peer's receiving stream found or made (rules 2 and 3,
//! within `max_peers`), the stream's check, the
//! claim of a receive WQE into the QP's pool, the payload placed (in an
//! MR or the receive's SGEs), commit and answer; the receive completions
//! written.

use super::answers::{build_answer, build_challenge, ReplyTo};
use super::peers::{find_or_add, PeerKey, ReplyPath, Side};
use super::pool::Pool;
use super::{now, RxPacket, XudState};
use crate::abi::{network, status, wc_flags, wc_opcode, Cqe, RecvWqe, RECV_WQE_HEADER_SIZE};
use crate::driver::{
    cnp,
    counters::RxCounter,
    mr::{MrError, MrMemo},
    qp::{HeldCqs, QpCore},
    sgl::Sgl,
    tx,
};
use crate::ib::{AccessFlags, NetworkType};
use crate::proto::{
    psn::Psn,
    wire::{
        aeth::{AckSyndrome, NakCode},
        immdt,
        opcode::Opcode,
        reth, xck, xeth,
    },
    xud::{
        self,
        cookie::Binding,
        receiver::{self, Admission, Check, DataPacket, RecvStream},
        Op, RecvStatus, Refusal,
    },
};
use kernel::prelude::*;

/// The hop limit of ACKs to a peer known only from its packets.
const DEFAULT_TTL: u8 = 64;

pub(super) fn on_data(
    held: &HeldCqs,
    p: &RxPacket<'_>,
    key: PeerKey,
    qkey: u32,
    mrs: &mut MrMemo<'_>,
) -> core::result::Result<(), RxCounter> {
    let qp = held.qp();
    use crate::proto::wire::opcode::ExtHeader as H;
    let x = p.ext(H::Xeth).ok_or(RxCounter::DropMalformed)?;
    let x = xeth::Repr::parse(&xeth::Header::new_checked(x).map_err(|_| RxCounter::DropMalformed)?)
        .map_err(|_| RxCounter::DropMalformed)?;
    let c = p.ext(H::Xck).ok_or(RxCounter::DropMalformed)?;
    let c = xck::Repr::parse(&xck::Header::new_checked(c).map_err(|_| RxCounter::DropMalformed)?)
        .map_err(|_| RxCounter::DropMalformed)?;
    let r = p.ext(H::Reth).ok_or(RxCounter::DropMalformed)?;
    let r = reth::Repr::parse(&reth::Header::new_checked(r).map_err(|_| RxCounter::DropMalformed)?);
    let imm = p
        .ext(H::ImmDt)
        .and_then(|b| immdt::Header::new_checked(b).ok())
        .map(|h| u32::from_ne_bytes(h.imm_data()));
    let op = match p.opcode {
        Opcode::XUD_SEND => Op::Send,
        Opcode::XUD_SEND_WITH_IMMEDIATE => Op::SendImm,
        Opcode::XUD_RDMA_WRITE => Op::Write,
        Opcode::XUD_RDMA_WRITE_WITH_IMMEDIATE => Op::WriteImm,
        _ => return Err(RxCounter::DropUnsupported),
    };
    let pkt = DataPacket {
        psn: p.psn,
        xeth: x,
        op,
        offset: r.va,
        dma_len: r.dma_len,
        len: p.payload.len() as u32,
        ack_req: p.ack_req,
        cookie: c.cookie,
    };
    if !pkt.is_well_formed(crate::abi::xud::MAX_MSG_SZ) {
        return Err(RxCounter::DropMalformed);
    }
    let ndev = qp.ud_netdev();
    let mut g = qp.xud().ok_or(RxCounter::DropNoQp)?.lock(held);
    let st = g.as_deref_mut().ok_or(RxCounter::DropNoQp)?;
    let t = now();
    let inc = st.inc;
    if receiver::is_stale(x.peer_inc, inc) {
        // Rule 1: answered from no state (and counted by the caller, as
        // every drop).
        let path = reply_path(p).ok_or(RxCounter::DropMalformed)?;
        let to = ReplyTo {
            qpn: key.qpn,
            av: path.to(&key),
            inc,
            qkey,
        };
        let info = receiver::AckInfo {
            stream: x.stream,
            base: Psn::new(0),
            sack: 0,
        };
        let syn = AckSyndrome::Nak(NakCode::Reserved(xud::NAK_STALE_INCARNATION));
        if let Some(nd) = ndev.as_deref() {
            if let Some(skb) = build_answer(qp, nd, &to, &info, Some((syn, p.psn))) {
                st.txq.push(skb);
            }
        }
        return Err(RxCounter::XudStale);
    }
    // Rules 2 and 3 with the stream cookie, decided before any entry is
    // looked for or made: a challenge costs no state.
    let binding = Binding {
        src_gid: key.gid,
        src_qpn: key.qpn,
        dst_qpn: qp.qpn(),
        stream: x.stream,
    };
    let cookie_valid = st.cookie_key.verify(&binding, &pkt.cookie);
    let held = st.peers.get(&key).and_then(|p| p.recv_held(t));
    match receiver::admit(held, &pkt, cookie_valid, t) {
        Admission::Held | Admission::Open => {}
        Admission::OtherStream => return Err(RxCounter::XudStale),
        Admission::BadCookie => return Err(RxCounter::XudDropCookie),
        Admission::Challenge => {
            if !st.challenges.allow(t) {
                qp.port.counters.add(RxCounter::XudChallengesLimited, 1);
                return Err(RxCounter::XudDropCookie);
            }
            let path = reply_path(p).ok_or(RxCounter::DropMalformed)?;
            let to = ReplyTo {
                qpn: key.qpn,
                av: path.to(&key),
                inc,
                qkey,
            };
            let cookie = st.cookie_key.issue(&binding, t);
            if let Some(nd) = ndev.as_deref() {
                if let Some(skb) = build_challenge(qp, nd, &to, x.stream, p.psn, cookie) {
                    st.txq.push(skb);
                }
            }
            return Err(RxCounter::XudDropCookie);
        }
    }
    // A new receiving state only within max_peers: the entry is made only
    // then (a flood of new sources allocates nothing beyond the limit).
    let XudState {
        peers,
        recvs,
        txq,
        min_rnr_timer,
        params,
        recv_peers,
        busy,
        ..
    } = st;
    let has_recv = peers.get(&key).is_some_and(|p| p.recv.is_some());
    if !has_recv && *recv_peers >= params.max_peers {
        return Err(RxCounter::XudPeerLimit);
    }
    let path = reply_path(p).ok_or(RxCounter::DropMalformed)?;
    let peer = find_or_add(qp, peers, key, path).ok_or(RxCounter::XudPeerLimit)?;
    match peer.recv_stream().map(|s| s == x.stream) {
        Some(true) => {}
        Some(false) => {
            // Rule 3: the quiet state of an earlier stream gives way (the
            // admission above took the packet only if it is quiet).
            let fresh = KBox::new(RecvStream::new(&pkt, t), GFP_ATOMIC)
                .map_err(|_| RxCounter::DropNoMemory)?;
            if let Some(r) = peer.recv_active() {
                r.abandon_all();
                drain_recv_done(qp, r, recvs, &Origin::none(key.qpn));
            }
            peer.recv = Some(Side::Active(fresh));
        }
        None => {
            let fresh = KBox::new(RecvStream::new(&pkt, t), GFP_ATOMIC)
                .map_err(|_| RxCounter::DropNoMemory)?;
            peer.recv = Some(Side::Active(fresh));
            *recv_peers += 1;
        }
    }
    let Some(rs) = peer.wake_recv().map_err(|_| RxCounter::DropNoMemory)? else {
        return Err(RxCounter::DropNoQp);
    };
    let from = Origin {
        src_qp: key.qpn,
        network: if p.ip.len() == 48 {
            network::IPV6
        } else {
            network::IPV4
        },
        imm,
        solicited: p.solicited,
    };
    let check = rs.check(&pkt, t);
    drain_recv_done(qp, rs, recvs, &from);
    let mut answer: Option<Option<(AckSyndrome, Psn)>> = None;
    let verdict = match check {
        Check::Duplicate => {
            qp.port.counters.add(RxCounter::XudDuplicates, 1);
            answer = Some(None);
            Err(RxCounter::DropSequence)
        }
        Check::BeyondWindow | Check::Inconsistent => Err(RxCounter::DropSequence),
        Check::Refuse(why) => {
            answer = Some(Some(nak_of(why, *min_rnr_timer, p.psn)));
            Err(RxCounter::DropSequence)
        }
        Check::Place(mut plan) => match place(qp, p, mrs, rs, recvs, &pkt, &mut plan, r) {
            Ok(()) if rs.completes(&plan) && !qp.recv_cq.has_room() => {
                // Its receive completion has no room: neither committed
                // nor acknowledged. The RNR NAK holds the sender back; its
                // resend finds the message open, the receive still held.
                rs.refuse(&plan, Refusal::ReceiverNotReady);
                answer = Some(Some(nak_of(
                    Refusal::ReceiverNotReady,
                    *min_rnr_timer,
                    p.psn,
                )));
                Err(RxCounter::DropCqFull)
            }
            Ok(()) => {
                let c = rs.commit(&plan, params.ack_every);
                if p.ack_req {
                    rs.note_ack_request(p.psn);
                }
                if c.ack_now || p.ack_req {
                    answer = Some(None);
                } else {
                    rs.owe_ack(t);
                }
                Ok(())
            }
            Err(why) => {
                if why == Refusal::ReceiverNotReady {
                    qp.port.counters.add(RxCounter::XudRnrNaks, 1);
                }
                rs.refuse(&plan, why);
                answer = Some(Some(nak_of(why, *min_rnr_timer, p.psn)));
                Err(RxCounter::DropNoRecv)
            }
        },
    };
    drain_recv_done(qp, rs, recvs, &from);
    if answer.is_some() && txq.is_full() {
        // No room now: the ACK goes within the ACK delay (a NAK's news is
        // lost, and the sender's timer recovers it).
        rs.owe_ack(t);
        answer = None;
    }
    // A packet that met a congested queue: its sender hears of it (a CNP
    // to the QP that sent it, at most one per stream and interval), the
    // data itself taken or refused as any other.
    let cnp_due = p.ce && rs.cnp_due(t);
    if let (Some(nak), Some(nd)) = (answer, ndev.as_deref()) {
        let info = rs.ack();
        let to = ReplyTo {
            qpn: key.qpn,
            av: peer.reply.to(&key),
            inc,
            qkey,
        };
        if let Some(skb) = build_answer(qp, nd, &to, &info, nak) {
            txq.push(skb);
        }
    }
    if cnp_due && !txq.is_full() {
        if let Some(mut skb) = ndev.as_deref().and_then(|nd| cnp::build(nd, key.qpn)) {
            let av = peer.reply.to(&key);
            let sport = tx::source_port(qp.qpn());
            if tx::finish(&mut skb, &av, sport, None, qp.next_ip_id(), false).is_ok() {
                txq.push(skb);
                qp.port.counters.add(RxCounter::CnpsSent, 1);
            }
        }
    }
    if peer.is_busy() {
        // An ACK owed: the timer's deadline and the ACK pass see it.
        busy.add(key, peer);
    }
    verdict
}

fn nak_of(why: Refusal, min_rnr_timer: u8, psn: Psn) -> (AckSyndrome, Psn) {
    let s = match why {
        Refusal::ReceiverNotReady => AckSyndrome::RnrNak {
            timer_code: min_rnr_timer,
        },
        Refusal::RemoteAccess => AckSyndrome::Nak(NakCode::RemoteAccessError),
        Refusal::InvalidRequest => AckSyndrome::Nak(NakCode::InvalidRequest),
    };
    (s, psn)
}

/// Steps 5 and 6 and the copy of 7: access, the claim, the payload.
#[allow(clippy::too_many_arguments)]
fn place(
    qp: &QpCore,
    p: &RxPacket<'_>,
    mrs: &mut MrMemo<'_>,
    rs: &mut RecvStream,
    recvs: &mut Pool,
    pkt: &DataPacket,
    plan: &mut receiver::Plan,
    r: reth::Repr,
) -> core::result::Result<(), Refusal> {
    let n = p.payload.len();
    if !pkt.op.is_send() {
        // A WRITE's access before any claim (a refused WRITE_IMM leaves
        // the receive queue as it was).
        let write_to = if n > 0 {
            let mr = mrs.get(r.rkey).ok_or(Refusal::RemoteAccess)?;
            match mr.check(qp.pd, r.va, n, AccessFlags::REMOTE_WRITE) {
                Ok(off) => Some((mr, off)),
                Err(MrError::Protection | MrError::Bounds) => return Err(Refusal::RemoteAccess),
            }
        } else {
            None
        };
        if plan.claim {
            claim(qp, rs, recvs, pkt, plan)?;
        }
        if let Some((mr, off)) = write_to {
            let _timed = qp.port.counters.span(RxCounter::RxPlaceNs);
            mr.copy_from_skb(off, p.skb, p.payload.start, n)
                .map_err(|_| Refusal::RemoteAccess)?;
        }
        return Ok(());
    }
    if plan.claim {
        let h = claim(qp, rs, recvs, pkt, plan)?;
        // A SEND's receive starts with a 40-byte GRH, as UD's does: the
        // consumer learns the sender's address from it.
        recv_sgl(qp, recvs.get(h))
            .write(mrs, 0, &grh_of(p.ip))
            .map_err(|_| Refusal::InvalidRequest)?;
    }
    if n > 0 {
        let _timed = qp.port.counters.span(RxCounter::RxPlaceNs);
        recv_sgl(qp, recvs.get(plan.recv))
            .copy_from_skb(mrs, u64::from(plan.recv_offset), p.skb, p.payload.start, n)
            .map_err(|_| Refusal::InvalidRequest)?;
    }
    Ok(())
}

/// Step 6, the claim: the message's receive WQE taken from the QP's
/// receive queue into `recvs`; its handle.
fn claim(
    qp: &QpCore,
    rs: &mut RecvStream,
    recvs: &mut Pool,
    pkt: &DataPacket,
    plan: &mut receiver::Plan,
) -> core::result::Result<u32, Refusal> {
    if plan.held && (!rs.may_hold_claim() || recvs.in_use() >= recvs_posted(qp)) {
        // A message this packet does not finish would hold the receive:
        // within the source's budget, and while unfinished messages hold
        // fewer receives than are still posted (at most half of them), so
        // that sources that do not finish their messages (forged first
        // packets) leave receives for the others.
        qp.port.counters.add(RxCounter::XudClaimsRefused, 1);
        return Err(Refusal::ReceiverNotReady);
    }
    let h = recvs.take().ok_or(Refusal::ReceiverNotReady)?;
    let slot = recvs.get_mut(h);
    if !matches!(qp.pop_recv(slot), Ok(true)) {
        recvs.give(h);
        return Err(Refusal::ReceiverNotReady);
    }
    let w = RecvWqe::decode(recvs.get(h));
    let max_sge = qp
        .cap()
        .max_recv_sge
        .max(qp.srq.as_ref().map(|s| s.max_sge()).unwrap_or(0));
    if w.num_sge > max_sge {
        // A receive no SGE list of the QP could hold (the ring is the
        // user's to write): it completes in error, unused, and the
        // message waits for the next one.
        complete_recv_status(qp, w.wr_id, status::LOC_QP_OP_ERR);
        recvs.give(h);
        return Err(Refusal::ReceiverNotReady);
    }
    let total = recv_len(qp, recvs.get(h));
    rs.claimed(plan, pkt, h, total)?;
    Ok(h)
}

/// Receives posted and not yet claimed: in the QP's receive queue, or its
/// SRQ's (which other QPs share).
fn recvs_posted(qp: &QpCore) -> u32 {
    match (&qp.rq, &qp.srq) {
        (Some(rq), _) => rq.len(),
        (None, Some(srq)) => srq.len(),
        (None, None) => 0,
    }
}

/// The SGEs of the receive WQE in `slot`.
fn recv_sgl<'a>(qp: &QpCore, slot: &'a [u8]) -> Sgl<'a> {
    let w = RecvWqe::decode(slot);
    let body = slot.get(RECV_WQE_HEADER_SIZE as usize..).unwrap_or(&[]);
    Sgl::new(qp.pd, body, w.num_sge)
}

/// The total length of a receive WQE's SGEs.
fn recv_len(qp: &QpCore, slot: &[u8]) -> u32 {
    recv_sgl(qp, slot).total_len().min(u64::from(u32::MAX)) as u32
}

/// The 40-byte GRH of a received packet's IP header (UD's layout).
fn grh_of(ip: &[u8]) -> [u8; 40] {
    let mut grh = [0u8; 40];
    let n = match ip.len() {
        28 => 20,
        48 => 40,
        _ => 0,
    };
    if let Some(h) = ip.get(..n) {
        grh[40 - n..].copy_from_slice(h);
    }
    grh
}

/// What a receive completion reports of the packet that completed it.
pub(super) struct Origin {
    src_qp: u32,
    /// `network::IPV4` or `IPV6`.
    network: u8,
    /// The packet's immediate data (every packet of an `_IMM` message
    /// carries it).
    imm: Option<u32>,
    solicited: bool,
}

impl Origin {
    /// For completions no packet brought (reclaim, rule 4, flush).
    pub(super) fn none(src_qp: u32) -> Self {
        Self {
            src_qp,
            network: network::IPV4,
            imm: None,
            solicited: false,
        }
    }
}

/// Writes the receive completions the stream has ready.
pub(super) fn drain_recv_done(qp: &QpCore, rs: &mut RecvStream, recvs: &mut Pool, from: &Origin) {
    while let Some(d) = rs.next_done() {
        let w = RecvWqe::decode(recvs.get(d.recv));
        let code = match d.status {
            RecvStatus::Success => status::SUCCESS,
            RecvStatus::LocalLength => status::LOC_LEN_ERR,
            RecvStatus::RemoteAbort => status::REM_ABORT_ERR,
        };
        let mut cqe = Cqe {
            wr_id: w.wr_id,
            status: code,
            opcode: if d.op == Op::WriteImm {
                wc_opcode::RECV_RDMA_WITH_IMM
            } else {
                wc_opcode::RECV
            },
            byte_len: 0,
            qp_num: qp.qpn(),
            src_qp: from.src_qp,
            ..Default::default()
        };
        if code == status::SUCCESS {
            if d.op.is_send() {
                cqe.byte_len = xud::GRH_LEN + d.len;
                cqe.wc_flags |= wc_flags::GRH;
                cqe.network_hdr_type = from.network;
            } else {
                cqe.byte_len = d.len;
            }
            if matches!(d.op, Op::SendImm | Op::WriteImm) {
                if let Some(imm) = from.imm {
                    cqe.imm_data = imm;
                    cqe.wc_flags |= wc_flags::WITH_IMM;
                }
            }
        }
        let _ = qp.recv_cq.push(&cqe, from.solicited);
        recvs.give(d.recv);
    }
}

pub(super) fn complete_recv_status(qp: &QpCore, wr_id: u64, code: u32) {
    let cqe = Cqe {
        wr_id,
        status: code,
        opcode: wc_opcode::RECV,
        qp_num: qp.qpn(),
        ..Default::default()
    };
    let _ = qp.recv_cq.push(&cqe, false);
}

/// How answers to the sender of `p` go (back along its IP addresses,
/// which the peer's key holds).
fn reply_path(p: &RxPacket<'_>) -> Option<ReplyPath> {
    let network = match p.ip.len() {
        28 => NetworkType::Ipv4,
        48 => NetworkType::Ipv6,
        _ => return None,
    };
    Some(ReplyPath {
        flow_label: 0,
        network,
        hop_limit: DEFAULT_TTL,
        traffic_class: 0,
    })
}
