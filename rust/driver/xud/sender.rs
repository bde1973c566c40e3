// SPDX-License-Identifier: GPL-2.0

//! The sending half, the driver's side of [`crate::proto::xud::sender`]:
//! posted WQEs checked and copied out of the send ring into the WQE pool,
//! queued to their destinations and admitted into each one's
//! [`SendStream`] as its window allows; the data packets the streams
//! have due built, round robin over the busy peers and within the QP's
//! cap on packets in flight; the send completions written.

use super::peers::{find_or_add, Peer, PeerKey, ReplyPath, Side};
use super::pool::Pool;
use super::{nonzero_u64, XudState};
use crate::abi::{opcode, send_flags, status, SendWqe, XudOp, SEND_WQE_HEADER_SIZE};
use crate::driver::{
    counters::RxCounter, mr::MrMemo, qp::QpCore, ring::MAX_SEND_SLOT, sgl::Sgl, tx, txq,
};
use crate::ib::NetworkType;
use crate::net::skb::TxSkb;
use crate::proto::{
    psn::Psn,
    wire::{bth, deth, immdt, opcode::Opcode, packet, reth, xck},
    xud::{
        self,
        sender::{self, Message, MsgTable, SendStream},
        Op, SendStatus,
    },
};
use kernel::prelude::*;

/// What a send WQE asks of XUD, checked: the operation and length.
fn check_wqe(qp: &QpCore, w: &SendWqe, slot: &[u8]) -> core::result::Result<(Op, u32), u32> {
    let op = match w.opcode {
        opcode::SEND => Op::Send,
        opcode::SEND_WITH_IMM => Op::SendImm,
        opcode::RDMA_WRITE => Op::Write,
        opcode::RDMA_WRITE_WITH_IMM => Op::WriteImm,
        _ => return Err(status::LOC_QP_OP_ERR),
    };
    if w.send_flags & !send_flags::KNOWN != 0 {
        return Err(status::LOC_QP_OP_ERR);
    }
    let cap = qp.cap();
    let body = slot.get(SEND_WQE_HEADER_SIZE as usize..).unwrap_or(&[]);
    let len = if w.send_flags & send_flags::INLINE != 0 {
        if w.inline_len > cap.max_inline_data || w.inline_len as usize > body.len() {
            return Err(status::LOC_LEN_ERR);
        }
        u64::from(w.inline_len)
    } else {
        if w.num_sge > cap.max_send_sge {
            return Err(status::LOC_QP_OP_ERR);
        }
        Sgl::new(qp.pd, body, w.num_sge).total_len()
    };
    if len > u64::from(crate::abi::xud::MAX_MSG_SZ) {
        return Err(status::LOC_LEN_ERR);
    }
    Ok((op, len as u32))
}

/// Moves WQEs from the send ring to their destinations' queues, then into
/// their streams as room allows. Returns whether the ring still holds
/// entries (the WQE pool is full): then the sender stays flagged busy.
pub(super) fn admit(qp: &QpCore, st: &mut XudState, t: u64) -> bool {
    let mut slot = [0u8; MAX_SEND_SLOT];
    let share = (qp.cap().max_send_wr / 4).max(16);
    // What stalled destinations hold: together at most half the pool.
    let mut stalled = Stalled {
        held: (0..st.busy.len())
            .filter_map(|i| st.busy.peer(i, &st.peers))
            .filter(|p| p.send_ref().is_some_and(SendStream::is_stalled))
            .map(Peer::held)
            .sum(),
        most: (qp.cap().max_send_wr / 2).max(xud::STALLED_SHARE),
    };
    let ring_left = loop {
        let Some(h) = st.wqes.take() else {
            break qp.sq.has_entries();
        };
        let n = st.wqes.slot.min(slot.len());
        let body = &mut slot[..n];
        if !matches!(qp.sq.pop(body), Ok(true)) {
            st.wqes.give(h);
            break false;
        }
        let w = SendWqe::decode(body);
        let code = if !qp.live.can_send() {
            status::WR_FLUSH_ERR
        } else {
            match queue_wqe(qp, st, h, &w, body, share, &mut stalled) {
                Ok(()) => continue,
                Err(code) => code,
            }
        };
        qp.complete_send(&w, code, 0);
        st.wqes.give(h);
    };
    // Into the streams.
    let ndev = qp.ud_netdev();
    let cfg = st.cfg;
    let max_peers = st.params.max_peers;
    let XudState {
        peers,
        wqes,
        msgs,
        send_peers,
        starved,
        busy,
        ..
    } = st;
    *starved = false;
    for i in 0..busy.len() {
        let Some((key, peer)) = busy.peer_mut(i, peers) else {
            continue;
        };
        // The route is looked up once per peer and pass, when its queue
        // holds a post.
        let mut peer_mtu = None;
        while let Some(h) = peer.queue.front() {
            let mtu =
                *peer_mtu.get_or_insert_with(|| xud_payload(ndev.as_deref(), &key.local, &key.gid));
            if peer.send.is_none() {
                if *send_peers >= max_peers {
                    // The table of sending states is full: the posts to a
                    // new destination fail (none is evicted).
                    while let Some(h) = peer.queue.pop(wqes) {
                        let w = SendWqe::decode(wqes.get(h));
                        qp.complete_send(&w, status::LOC_QP_OP_ERR, 0);
                        wqes.give(h);
                    }
                    break;
                }
                let stream = SendStream::new(
                    nonzero_u64(),
                    Psn::new(crate::kext::random::u64() as u32),
                    cfg,
                    t,
                );
                let Ok(stream) = KBox::new(stream, GFP_ATOMIC) else {
                    // The posts wait in the queue; the timer tries again.
                    *starved = true;
                    break;
                };
                *send_peers += 1;
                peer.send = Some(Side::Active(stream));
            }
            let Ok(Some(s)) = peer.wake_send(cfg) else {
                *starved = true;
                break;
            };
            let w = SendWqe::decode(wqes.get(h));
            let len = check_wqe(qp, &w, wqes.get(h)).map(|(_, l)| l).unwrap_or(0);
            let m = Message { wqe: h, len, mtu };
            if s.post(msgs, m, t).is_none() {
                break;
            }
            peer.queue.pop(wqes);
        }
    }
    ring_left
}

/// Send WQEs held by stalled destinations ([`SendStream::is_stalled`]),
/// and the most they may hold together.
struct Stalled {
    held: u32,
    most: u32,
}

/// Checks a posted WQE and queues it (already popped into slot `h`) to
/// its destination; the completion status of a refusal.
fn queue_wqe(
    qp: &QpCore,
    st: &mut XudState,
    h: u32,
    w: &SendWqe,
    body: &[u8],
    share: u32,
    stalled: &mut Stalled,
) -> core::result::Result<(), u32> {
    check_wqe(qp, w, body)?;
    let x = XudOp::decode(&w.op);
    let to = qp.ahs.get(x.ah_num).ok_or(status::LOC_QP_OP_ERR)?;
    if to.av.network == NetworkType::RoceV1 {
        return Err(status::LOC_QP_OP_ERR);
    }
    let key = PeerKey {
        gid: to.av.dgid,
        qpn: x.remote_qpn & crate::proto::wire::QPN_MASK,
        local: to.av.sgid,
    };
    let XudState {
        peers, wqes, busy, ..
    } = st;
    let n = body.len().min(wqes.slot);
    if let (Some(dst), Some(src)) = (wqes.get_mut(h).get_mut(..n), body.get(..n)) {
        dst.copy_from_slice(src);
    }
    let reply = ReplyPath::of(&to.av);
    let peer = find_or_add(qp, peers, key, reply).ok_or(status::LOC_QP_OP_ERR)?;
    peer.reply = reply;
    if peer.send_ref().is_some_and(SendStream::is_stalled) {
        // A destination that does not answer: a small share, and
        // stalled ones together at most half the send queue.
        if peer.held() >= xud::STALLED_SHARE || stalled.held >= stalled.most {
            qp.port.counters.add(RxCounter::XudStalledRefused, 1);
            return Err(status::LOC_QP_OP_ERR);
        }
        stalled.held += 1;
    }
    if peer.queue.push(wqes, h, share) {
        busy.add(key, peer);
        Ok(())
    } else {
        // Beyond the destination's share of the send queue.
        Err(status::LOC_QP_OP_ERR)
    }
}

/// The payload bytes an XUD packet from `sgid` to `dgid` carries at most
/// on `ndev` ([`xud::payload_per_packet`]: as much as the link and the
/// route take, not an IB MTU). The route's MTU counts where it is smaller
/// than the link's (`ip route ... mtu`, a path MTU learnt from ICMP): IP
/// drops a larger packet, as RoCE's carry the don't-fragment bit.
fn xud_payload(ndev: Option<&crate::net::NetDevice>, sgid: &[u8; 16], dgid: &[u8; 16]) -> u32 {
    ndev.and_then(|n| {
        let link = n.mtu();
        let mtu = n.route_mtu(sgid, dgid).map_or(link, |r| r.min(link));
        xud::payload_per_packet(mtu)
    })
    .unwrap_or(xud::MIN_PAYLOAD)
}

/// Builds the packets the streams have due: round robin over the peers,
/// starting after the one the last pass stopped at, at most
/// `ack_every` packets (and at most a queue's worth) each. New packets
/// only while the QP's packets in flight are below
/// [`xud::MAX_QP_IN_FLIGHT`]; resends and probes always.
pub(super) fn transmit(qp: &QpCore, st: &mut XudState, t: u64) {
    let Some(ndev) = qp.ud_netdev() else {
        return;
    };
    let burst_max = st.cfg.ack_every.clamp(1, txq::TXQ_LEN as u32);
    let XudState {
        peers,
        wqes,
        msgs,
        txq,
        busy,
        rr_next,
        ..
    } = st;
    let n = busy.len();
    let mut in_flight: u32 = (0..n)
        .filter_map(|i| busy.peer(i, peers))
        .filter_map(Peer::send_ref)
        .map(SendStream::in_network)
        .sum();
    let mut capped = false;
    // From the one after the last served, round the list once.
    let start = if n == 0 { 0 } else { *rr_next % n };
    for j in 0..n {
        let i = (start + j) % n;
        let Some((key, peer)) = busy.peer_mut(i, peers) else {
            continue;
        };
        if txq.is_full() {
            return;
        }
        let mut burst = 0;
        while !txq.is_full() && burst < burst_max {
            let Some(s) = peer.send_active() else {
                break;
            };
            let room = in_flight < xud::MAX_QP_IN_FLIGHT;
            let Some(p) = s.next_packet_if(msgs, t, room) else {
                capped |= !room && s.has_new(msgs);
                break;
            };
            if !p.retransmit {
                in_flight += 1;
            }
            burst += 1;
            if p.retransmit {
                qp.port.counters.add(RxCounter::XudRetransmits, 1);
            }
            match build_data(qp, &ndev, key.qpn, wqes.get(p.wqe), &p) {
                Ok(skb) => txq.push(skb),
                // Not built (no memory): as if lost, resent later.
                Err(None) => qp.port.counters.add(RxCounter::TxErrors, 1),
                // The work request itself cannot go: it fails alone.
                Err(Some(st)) => s.fail_local(msgs, p.wqe, st),
            }
        }
        if burst > 0 {
            *rr_next = i + 1;
        }
        complete_sends(qp, peer, wqes, msgs);
    }
    if capped {
        qp.port.counters.add(RxCounter::XudQpCapWaits, 1);
    }
}

/// Writes the completions of a destination's finished messages and frees
/// their WQEs.
pub(super) fn complete_sends(qp: &QpCore, peer: &mut Peer, wqes: &mut Pool, msgs: &mut MsgTable) {
    let Some(s) = peer.send_active() else {
        return;
    };
    while let Some((h, st)) = s.next_completion(msgs) {
        let w = SendWqe::decode(wqes.get(h));
        let len = check_wqe(qp, &w, wqes.get(h)).map(|(_, l)| l).unwrap_or(0);
        qp.complete_send(&w, send_status(st), len);
        wqes.give(h);
    }
}

fn send_status(s: SendStatus) -> u32 {
    match s {
        SendStatus::Success => status::SUCCESS,
        SendStatus::RetryExceeded => status::RETRY_EXC_ERR,
        SendStatus::RnrRetryExceeded => status::RNR_RETRY_EXC_ERR,
        SendStatus::RemoteAccess => status::REM_ACCESS_ERR,
        SendStatus::RemoteInvalidRequest => status::REM_INV_REQ_ERR,
        SendStatus::LocalProtection => status::LOC_PROT_ERR,
        SendStatus::LocalQpOperation => status::LOC_QP_OP_ERR,
    }
}

/// A data packet of the WQE in `slot`, to its work request's AH and Q_Key
/// (each packet, retransmissions included: the AH must live as long as
/// the work request, as for UD). `Err(Some)`: the work request fails with
/// that status; `Err(None)`: not built now (no memory), resent later.
fn build_data(
    qp: &QpCore,
    ndev: &crate::net::NetDevice,
    dest_qpn: u32,
    slot: &[u8],
    p: &sender::TxPacket,
) -> core::result::Result<TxSkb, Option<SendStatus>> {
    let w = SendWqe::decode(slot);
    let x = XudOp::decode(&w.op);
    let to = qp
        .ahs
        .get(x.ah_num)
        .ok_or(Some(SendStatus::LocalQpOperation))?;
    // A Q_Key with the high bit set means "the QP's own" (IBTA 10.2.5).
    let qkey = if x.remote_qkey & 0x8000_0000 != 0 {
        qp.live.qkey()
    } else {
        x.remote_qkey
    };
    let (opc, op) = match w.opcode {
        opcode::SEND => (Opcode::XUD_SEND, Op::Send),
        opcode::SEND_WITH_IMM => (Opcode::XUD_SEND_WITH_IMMEDIATE, Op::SendImm),
        opcode::RDMA_WRITE => (Opcode::XUD_RDMA_WRITE, Op::Write),
        _ => (Opcode::XUD_RDMA_WRITE_WITH_IMMEDIATE, Op::WriteImm),
    };
    let mut repr = packet::Repr::new(bth::Repr {
        opcode: opc,
        solicited: w.send_flags & send_flags::SOLICITED != 0,
        mig_req: false,
        pad_count: 0,
        pkey: bth::DEFAULT_PKEY,
        fecn: false,
        becn: false,
        dest_qp: dest_qpn,
        ack_req: p.ack_req,
        psn: p.psn,
    });
    repr.deth = Some(deth::Repr {
        qkey,
        src_qp: qp.qpn(),
    });
    repr.xeth = Some(p.xeth);
    repr.xck = Some(xck::Repr { cookie: p.cookie });
    repr.reth = Some(reth::Repr {
        va: if op.is_send() {
            u64::from(p.offset)
        } else {
            x.remote_addr.wrapping_add(u64::from(p.offset))
        },
        rkey: if op.is_send() { 0 } else { x.rkey },
        dma_len: p.msg_len,
    });
    if matches!(op, Op::SendImm | Op::WriteImm) {
        repr.immdt = Some(immdt::Repr {
            imm_data: w.imm_or_inv.to_ne_bytes(),
        });
    }
    let n = p.len as usize;
    let total = repr.buffer_len(n).map_err(|_| None)?;
    let mut skb = TxSkb::new(ndev, total).map_err(|_| None)?;
    {
        let mut pkt = repr.emit(skb.payload_mut(), n).map_err(|_| None)?;
        let data = pkt.payload_mut().get_mut(..n).ok_or(None)?;
        if w.send_flags & send_flags::INLINE != 0 {
            let from = SEND_WQE_HEADER_SIZE as usize + p.offset as usize;
            let src = slot
                .get(from..from + n)
                .ok_or(Some(SendStatus::LocalQpOperation))?;
            data.copy_from_slice(src);
        } else if n > 0 {
            let body = slot.get(SEND_WQE_HEADER_SIZE as usize..).unwrap_or(&[]);
            Sgl::new(qp.pd, body, w.num_sge.min(qp.cap().max_send_sge))
                .read(&mut MrMemo::new(&qp.mrs), u64::from(p.offset), data)
                .map_err(|_| Some(SendStatus::LocalProtection))?;
        }
    }
    match tx::finish(
        &mut skb,
        &to.av,
        tx::source_port(qp.qpn()),
        to.route.as_ref(),
        qp.next_ip_id(),
        crate::kext::params::cc_enabled(),
    ) {
        Ok(()) => Ok(skb),
        Err(code) if code == status::LOC_QP_OP_ERR => Err(Some(SendStatus::LocalQpOperation)),
        Err(_) => Err(None),
    }
}
