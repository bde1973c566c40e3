// SPDX-License-Identifier: GPL-2.0

//! The send path: work requests from a QP's send ring to packets, in the
//! poster's context (the doorbell system call).
//!
//! One sender drains a send queue at a time (`Datagram::try_start_sending`,
//! an atomic swap), and while it is held the ring's consumer flags say
//! `SENDER_ACTIVE`, so librxud posts without a doorbell. Having given up
//! the queue the sender settles the flag (`WorkQueue::settle_sender`), so
//! an entry published in between is either seen here or answered by a
//! doorbell: never stranded.
//!
//! Per UD packet: WQE copied out of the ring and checked, AH looked up,
//! one linear skb (headroom for IP and UDP), BTH and DETH written in place,
//! payload copied once from the MR pages into the skb, IP and UDP headers
//! (IPv4 or IPv6) pushed along the AH's cached route (looked up only when
//! the cache is empty or its route stale), ICRC over the datagram,
//! `ip_local_out`.

use super::ah::Destination;
use super::counters::RxCounter;
use super::local;
use super::mr::MrMemo;
use super::qp::QpCore;
use super::ring::MAX_SEND_SLOT;
use super::sgl::{Sgl, SglError};
use crate::abi::{
    opcode, send_flags, status, wc_opcode, Cqe, SendWqe, Sge, UdOp, SEND_WQE_HEADER_SIZE, SGE_SIZE,
};
use crate::ib::{AddressVector, NetworkType, QpType};
use crate::kext::timer::Timer;
use crate::net::{
    skb::{Ipv4Fields, Ipv6Flow, TxSkb},
    NetDevice, RouteCache,
};
use crate::proto::{
    mtu::IbMtu,
    psn::Psn,
    wire::{bth, cnp::Ecn, deth, icrc, immdt, opcode::Opcode},
};
use kernel::sync::Arc;

/// Hop limit when the address vector leaves it 0.
const DEFAULT_TTL: u8 = 64;

/// Rings `qp`'s doorbell: sends what was posted, in the caller's context
/// where packets can be sent from there (process context, or softirq for
/// kernel consumers posting from their completion handlers); from hard
/// irq, or with interrupts off, the QP's timer does it at once, in
/// softirq. Any context.
pub(crate) fn doorbell(qp: &Arc<QpCore>) {
    qp.port.counters.add(RxCounter::Doorbells, 1);
    if !crate::kext::sync::may_send_inline() {
        Timer::arm(qp, 0);
        return;
    }
    match qp.qp_type() {
        QpType::Rc | QpType::Uc => super::rc::doorbell(qp),
        QpType::Ud | QpType::Gsi => send_queued(qp),
        QpType::Xud => super::xud::post_send(qp),
    }
}

/// Runs the sender of a UD or GSI QP until its send queue is empty, unless
/// another sender is already at it. Context: process or softirq.
pub(crate) fn send_queued(qp: &Arc<QpCore>) {
    let Some(dgram) = qp.datagram() else {
        return;
    };
    loop {
        if !dgram.try_start_sending() {
            // The running sender will see what was posted.
            return;
        }
        qp.sq.ring().set_sender_active(true);
        drain(qp);
        // Given up before the flag settles, so that a doorbell for a WQE
        // the last look misses finds the queue free. The flag may then
        // be cleared while another sender holds the queue: a poster rings
        // a doorbell it did not need, which that sender's own settling
        // makes harmless.
        dgram.stop_sending();
        if !qp.sq.settle_sender(false) {
            return;
        }
    }
}

fn drain(qp: &QpCore) {
    let ndev = qp.ud_netdev();
    let mut slot = [0u8; MAX_SEND_SLOT];
    while let Ok(true) = qp.sq.pop(&mut slot) {
        let wqe = SendWqe::decode(&slot);
        if local::is_local(wqe.opcode) {
            local::complete(qp, &wqe, local::execute(qp, &wqe));
            continue;
        }
        let (st, len) = match &ndev {
            Some(ndev) if qp.live.can_send() => send_ud(qp, ndev, &wqe, &slot),
            // Not (or no longer) RTS, or the netdev is going away.
            _ => (status::WR_FLUSH_ERR, 0),
        };
        let signaled = qp.sq_sig_all() || wqe.send_flags & send_flags::SIGNALED != 0;
        if signaled || st != status::SUCCESS {
            let cqe = Cqe {
                wr_id: wqe.wr_id,
                status: st,
                opcode: wc_opcode::SEND,
                byte_len: len,
                qp_num: qp.qpn(),
                ..Default::default()
            };
            // A full CQ loses the completion (the CQ's owner gets an
            // overflow event).
            let _ = qp.send_cq.push(&cqe, false);
        }
    }
}

/// Sends one UD WQE; returns the completion status and byte count.
fn send_ud(qp: &QpCore, ndev: &NetDevice, wqe: &SendWqe, slot: &[u8]) -> (u32, u32) {
    let imm = match wqe.opcode {
        opcode::SEND => None,
        opcode::SEND_WITH_IMM => Some(wqe.imm_or_inv),
        _ => return (status::LOC_QP_OP_ERR, 0),
    };
    if wqe.send_flags & !send_flags::KNOWN != 0 {
        return (status::LOC_QP_OP_ERR, 0);
    }
    let inline = wqe.send_flags & send_flags::INLINE != 0;
    let cap = qp.cap();
    let body = slot.get(SEND_WQE_HEADER_SIZE as usize..).unwrap_or(&[]);
    let len = if inline {
        if wqe.inline_len > cap.max_inline_data || wqe.inline_len as usize > body.len() {
            return (status::LOC_LEN_ERR, 0);
        }
        wqe.inline_len as usize
    } else {
        if wqe.num_sge > cap.max_send_sge {
            return (status::LOC_QP_OP_ERR, 0);
        }
        let mut total = 0usize;
        for i in 0..wqe.num_sge as usize {
            let sge = Sge::decode(body.get(i * SGE_SIZE as usize..).unwrap_or(&[]));
            total = total.saturating_add(sge.length as usize);
        }
        total
    };
    let mtu = IbMtu::for_link_mtu(ndev.mtu())
        .map(IbMtu::bytes)
        .unwrap_or(0) as usize;
    if len > mtu {
        return (status::LOC_LEN_ERR, 0);
    }
    let dest = UdOp::decode(&wqe.op);
    let Some(to) = qp.ahs.get(dest.ah_num) else {
        return (status::LOC_QP_OP_ERR, 0);
    };
    // A Q_Key with the high bit set means "the QP's own" (IBTA 10.2.5).
    let qkey = if dest.remote_qkey & 0x8000_0000 != 0 {
        qp.live.qkey()
    } else {
        dest.remote_qkey
    };
    let st = build_and_send(
        qp,
        ndev,
        &to,
        wqe,
        body,
        inline,
        len,
        imm,
        dest.remote_qpn,
        qkey,
    );
    (st, len as u32)
}

#[allow(clippy::too_many_arguments)]
fn build_and_send(
    qp: &QpCore,
    ndev: &NetDevice,
    to: &Destination,
    wqe: &SendWqe,
    body: &[u8],
    inline: bool,
    len: usize,
    imm: Option<u32>,
    dest_qpn: u32,
    qkey: u32,
) -> u32 {
    let av = &to.av;
    if av.network == NetworkType::RoceV1 {
        return status::LOC_QP_OP_ERR;
    }
    let pad = (4 - len % 4) % 4;
    let hdr =
        bth::HEADER_LEN + deth::HEADER_LEN + if imm.is_some() { immdt::HEADER_LEN } else { 0 };
    let Ok(mut skb) = TxSkb::new(ndev, hdr + len + pad + icrc::ICRC_LEN) else {
        return status::GENERAL_ERR;
    };
    let p = skb.payload_mut();
    p.fill(0);
    let psn = Psn::new(qp.datagram().map_or(0, |d| d.next_psn()));
    let bth_repr = bth::Repr {
        opcode: if imm.is_some() {
            Opcode::UD_SEND_ONLY_WITH_IMMEDIATE
        } else {
            Opcode::UD_SEND_ONLY
        },
        solicited: wqe.send_flags & send_flags::SOLICITED != 0,
        mig_req: false,
        pad_count: pad as u8,
        pkey: bth::DEFAULT_PKEY,
        fecn: false,
        becn: false,
        dest_qp: dest_qpn,
        ack_req: false,
        psn,
    };
    let Ok(mut h) = bth::Header::new_checked(&mut p[..]) else {
        return status::GENERAL_ERR;
    };
    bth_repr.emit(&mut h);
    let Ok(mut d) = deth::Header::new_checked(&mut p[bth::HEADER_LEN..]) else {
        return status::GENERAL_ERR;
    };
    deth::Repr {
        qkey,
        src_qp: qp.qpn(),
    }
    .emit(&mut d);
    if let Some(imm) = imm {
        let Ok(mut i) = immdt::Header::new_checked(&mut p[bth::HEADER_LEN + deth::HEADER_LEN..])
        else {
            return status::GENERAL_ERR;
        };
        i.set_imm_data(imm.to_ne_bytes());
    }
    let data = &mut p[hdr..hdr + len];
    if inline {
        data.copy_from_slice(&body[..len]);
    } else if let Err(e) =
        Sgl::new(qp.pd, body, wqe.num_sge).read(&mut MrMemo::new(&qp.mrs), 0, data)
    {
        return match e {
            SglError::Protection => status::LOC_PROT_ERR,
            SglError::Length => status::LOC_LEN_ERR,
        };
    }
    if let Err(st) = finish(
        &mut skb,
        av,
        source_port(qp.qpn()),
        to.route.as_ref(),
        qp.next_ip_id(),
        false,
    ) {
        return st;
    }
    // UD is unreliable: handed to IP, the send is complete.
    super::txq::count_tx(qp, &skb);
    match skb.send() {
        Ok(()) => status::SUCCESS,
        Err(_) => status::GENERAL_ERR,
    }
}

/// Routes a built packet along `av` (UDP source port `sport`, IPv4
/// identification `ip_id`: the QP's [`QpCore::next_ip_id`]) and fills in
/// its ICRC: ready for IP. `ect`: the packet goes ECN-capable (ECT(0) in
/// the IP header, unless the address vector's traffic class sets an ECN
/// codepoint of its own), for a flow that answers CNPs (RC requests, XUD
/// data; `proto::congestion`). Returns the completion status of a
/// failure.
pub(crate) fn finish(
    skb: &mut TxSkb,
    av: &AddressVector,
    sport: u16,
    route: Option<&RouteCache>,
    ip_id: u16,
    ect: bool,
) -> core::result::Result<(), u32> {
    if av.network == NetworkType::RoceV1 {
        return Err(status::LOC_QP_OP_ERR);
    }
    let ttl = if av.hop_limit == 0 {
        DEFAULT_TTL
    } else {
        av.hop_limit
    };
    let pushed = match (ipv4_of(&av.sgid), ipv4_of(&av.dgid)) {
        (Some(saddr), Some(daddr)) => {
            let fields = Ipv4Fields {
                tos: Ecn::with_ect(av.traffic_class, ect),
                ttl,
                id: ip_id,
            };
            skb.push_udp4(route, saddr, daddr, sport, fields)
        }
        (None, None) => skb.push_udp6(
            route,
            av.sgid,
            av.dgid,
            sport,
            Ipv6Flow {
                tclass: Ecn::with_ect(av.traffic_class, ect),
                hop_limit: ttl,
                label: av.flow_label,
            },
        ),
        // One IPv4 end and one IPv6 end: no route between them.
        _ => return Err(status::LOC_QP_OP_ERR),
    };
    if pushed.is_err() {
        return Err(status::GENERAL_ERR);
    }
    let datagram = skb.datagram_mut().ok_or(status::GENERAL_ERR)?;
    if icrc::icrc_fill_with(datagram, crate::net::crc32_le).is_err() {
        return Err(status::GENERAL_ERR);
    }
    Ok(())
}

/// The IPv4 address of an IPv4-mapped GID (`::ffff:a.b.c.d`).
fn ipv4_of(gid: &[u8; 16]) -> Option<[u8; 4]> {
    let (prefix, addr) = gid.split_at(12);
    (prefix == [0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff])
        .then(|| [addr[0], addr[1], addr[2], addr[3]])
}

/// The UDP source port of a QP's packets: fixed per QP (a flow's packets
/// stay in order through ECMP) and spread over 49152-65535 across QPs, as
/// RoCEv2 recommends for entropy.
pub(crate) fn source_port(qpn: u32) -> u16 {
    0xc000 | ((qpn.wrapping_mul(0x9e37_79b1) >> 18) & 0x3fff) as u16
}
