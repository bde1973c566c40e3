// SPDX-License-Identifier: GPL-2.0

//! The receive path: a datagram from the port's UDP socket, in softirq
//! context, to a completion. Everything is read from the skb in place
//! (headers copied out once, payload copied once, straight into the
//! receive buffer's pages); nothing is queued to a work item. Objects
//! found here (QP, MRs, CQ) are used only until this returns: their
//! destruction waits for an RCU grace period, which softirq processing
//! holds off.
//!
//! Per packet: headers out of the skb (one `skb_copy_bits` of <= 72
//! bytes), layout check, ICRC (IP/UDP/BTH headers masked in a copy, then
//! the rest read in place with the kernel's `crc32_le`, fragment by
//! fragment), QP lookup (an interrupt-safe spinlock), receive WQE
//! copied out of the ring, MR lookups and checks per SGE, payload copy,
//! CQE written, completion event if armed.

use super::counters::{RxCounter, RxCounters};
use super::mcast::McastGroups;
use super::mr::{MrCore, MrMemo, MrTable};
use super::qp::{HeldCqs, QpCore, QpTable};
use super::rc;
use super::ring::MAX_RECV_SLOT;
use crate::abi::{
    network, status, wc_flags, wc_opcode, Cqe, RecvWqe, Sge, RECV_WQE_HEADER_SIZE, SGE_SIZE,
};
use crate::ib::{AccessFlags, QpType};
use crate::kext::sync::{new_spinlock_irq, SpinLockIrq};
use crate::net::{skb::SkBuff, udp::Train};
use crate::proto::mcast;
use crate::proto::wire::{
    bth, cnp, deth,
    icrc::Icrc,
    immdt,
    opcode::{Direction, Opcode, OpcodeInfo, Transport},
    packet::Packet,
};
use kernel::{prelude::*, sync::Arc};

/// Longest transport header rxud reads before the payload: XUD's BTH
/// (12), DETH (8), XETH (20), XCK (12), RETH (16) and ImmDt (4); RC's
/// longest, BTH and AtomicETH, is 40.
const MAX_HEADERS: usize = 12 + 8 + 20 + 12 + 16 + 4;
/// Shortest RoCEv2 payload: a BTH and the ICRC.
const MIN_PACKET: usize = 12 + 4;
/// The GRH a UD receive buffer starts with.
const GRH_LEN: usize = 40;
/// The receive side of one rxud port.
#[pin_data]
pub(crate) struct RxPort {
    pub(crate) counters: RxCounters,
    /// Serialises the atomic operations peers execute on this device's
    /// memory (IB atomics are atomic with respect to each other).
    #[pin]
    atomics: SpinLockIrq<()>,
    qps: Arc<QpTable>,
    mrs: Arc<MrTable>,
    mcast: Arc<McastGroups>,
}

/// What happens to a datagram: delivered, or dropped and counted.
type Verdict = core::result::Result<(), RxCounter>;

/// What a run of datagrams to one QP shares: those of a GRO train received
/// back to back (or a datagram alone). The QP is looked up once for the
/// run (a train is one flow: mostly one QP's), which is no looser than a
/// lookup per datagram: the train is received within one softirq, whose
/// RCU read side a destroyed QP's teardown waits for as it would for a
/// lookup made at the first datagram, and each datagram checks the QP's
/// state again. The QP's CQs are held while the run lasts ([`HeldCqs`];
/// RC and XUD take the QP's lock with that hold): the completions the run
/// writes (a train of small messages, or ACKs that finish several
/// requests) reach the CQs' owner together, with one store of each CQ's
/// producer index and at most one event each, when the run ends (another
/// QP's datagram, the train's end; a datagram alone is a run of one),
/// with no lock held. The MRs the datagrams place into are looked up through
/// one [`MrMemo`] for the whole train, so a run of packets into one MR
/// looks it up once (each packet's access still checked whole).
struct Run<'a> {
    port: &'a RxPort,
    /// The QP, its CQs held.
    qp: Option<HeldCqs>,
    mrs: MrMemo<'a>,
    /// A train's datagrams (counted as CQ batches), not a datagram alone.
    batch: bool,
}

impl<'a> Run<'a> {
    fn new(port: &'a RxPort, batch: bool) -> Self {
        Self {
            port,
            qp: None,
            mrs: MrMemo::new(&port.mrs),
            batch,
        }
    }

    /// The QP numbered `qpn`, its CQs held: the run's, if it is that QP
    /// (no lookup, no reference taken), else looked up and made the run's,
    /// after the one before it has released its CQs; with the train's MR
    /// memo.
    fn qp_for(&mut self, qpn: u32) -> Option<(&HeldCqs, &mut MrMemo<'a>)> {
        if self.qp.as_ref().is_some_and(|h| h.qp().qpn() == qpn) {
            self.port.counters.add(RxCounter::RxQpReused, 1);
        } else {
            let qp = self.port.qps.get(qpn)?;
            self.end();
            self.qp = Some(HeldCqs::new(qp));
        }
        Some((self.qp.as_ref()?, &mut self.mrs))
    }

    /// Ends the run of datagrams to the current QP: its CQs publish.
    fn end(&mut self) {
        if let Some(held) = self.qp.take() {
            let n = held.release();
            if n > 0 && self.batch {
                self.port.counters.add(RxCounter::RxCqBatches, 1);
                self.port
                    .counters
                    .add(RxCounter::RxCqBatchEntries, n.into());
            }
        }
    }
}

impl Drop for Run<'_> {
    fn drop(&mut self) {
        self.end();
        let n = self.mrs.reused();
        if n > 0 {
            self.port.counters.add(RxCounter::RxMrReused, n);
        }
    }
}

impl RxPort {
    pub(crate) fn new(
        qps: Arc<QpTable>,
        mrs: Arc<MrTable>,
        mcast: Arc<McastGroups>,
    ) -> Result<Arc<Self>> {
        Arc::pin_init(
            pin_init!(Self {
                counters: RxCounters::new(),
                atomics <- new_spinlock_irq!((), "rxud:atomics"),
                qps,
                mrs,
                mcast,
            }),
            GFP_KERNEL,
        )
    }

    /// One datagram for this port. Context: softirq.
    pub(crate) fn receive(&self, skb: SkBuff) {
        self.receive_one(skb, &mut Run::new(self, false));
    }

    /// One datagram, `run` what the datagrams before it in the same train
    /// left (its QP, whose CQs it holds).
    fn receive_one(&self, skb: SkBuff, run: &mut Run<'_>) {
        let _timed = self.counters.span(RxCounter::RxNs);
        self.counters.add(RxCounter::Packets, 1);
        self.counters.add(RxCounter::RxBytes, skb.len() as u64);
        if let Err(why) = self.deliver(&skb, run) {
            self.counters.add(why, 1);
        }
    }

    /// A train GRO linked (`rust/ffi/gro.c`), cut loose again: its
    /// datagrams one by one, in arrival order; `lost` more were dropped
    /// cutting them loose. Runs of datagrams to one QP share what [`Run`]
    /// keeps. Context: softirq.
    pub(crate) fn receive_train(&self, first: SkBuff, rest: Train, lost: u32) {
        let mut n = 1u64;
        let mut run = Run::new(self, true);
        self.receive_one(first, &mut run);
        for skb in rest {
            n += 1;
            self.receive_one(skb, &mut run);
        }
        drop(run);
        self.counters.add(RxCounter::RxTrains, 1);
        self.counters.add(RxCounter::RxTrainPackets, n);
        self.lost(lost.into(), RxCounter::DropNoMemory);
    }

    /// `n` datagrams that were lost before they could be received: counted
    /// as received and as dropped for `why`.
    pub(crate) fn lost(&self, n: u64, why: RxCounter) {
        if n > 0 {
            self.counters.add(RxCounter::Packets, n);
            self.counters.add(why, n);
        }
    }

    fn deliver(&self, skb: &SkBuff, run: &mut Run<'_>) -> Verdict {
        let len = skb.len();
        if len < MIN_PACKET {
            return Err(RxCounter::DropMalformed);
        }
        let mut head = [0u8; MAX_HEADERS];
        let n = len.min(head.len());
        skb.copy_out(0, &mut head[..n])
            .map_err(|_| RxCounter::DropMalformed)?;
        let head = &head[..n];
        let mut ip_buf = [0u8; 48];
        let ip_len = skb
            .ip_udp_headers(&mut ip_buf)
            .map_err(|_| RxCounter::DropMalformed)?;
        let ip = ip_buf.get(..ip_len).ok_or(RxCounter::DropMalformed)?;
        // A CNP's opcode is no transport's: the opcode table refuses it.
        if head.first() == Some(&cnp::OPCODE.0) {
            return self.deliver_cnp(skb, run, ip, head, len);
        }
        let (info, pad) =
            Packet::<&[u8]>::check_layout(head, len).map_err(|_| RxCounter::DropMalformed)?;
        {
            let _timed = self.counters.span(RxCounter::RxIcrcNs);
            check_icrc(skb, ip, head, len)?;
        }
        let bth = bth::Header::new_checked(head).map_err(|_| RxCounter::DropMalformed)?;
        if bth.dest_qp() == mcast::MULTICAST_QPN {
            return self.deliver_multicast(skb, run, info, pad, ip, head);
        }
        let (held, mrs) = run.qp_for(bth.dest_qp()).ok_or(RxCounter::DropNoQp)?;
        let qp = held.qp();
        mrs.next_packet();
        let payload = info.header_len..len - pad - 4;
        let _timed = self.counters.span(RxCounter::RxTransportNs);
        match bth.opcode() {
            Opcode::UD_SEND_ONLY | Opcode::UD_SEND_ONLY_WITH_IMMEDIATE => {
                receive_ud(skb, qp, mrs, ip, head, bth.solicited(), payload)
            }
            op if matches!(op.transport(), Some(Transport::Rc | Transport::Uc)) => {
                let want = if op.transport() == Some(Transport::Rc) {
                    QpType::Rc
                } else {
                    QpType::Uc
                };
                if qp.qp_type() != want || !qp.live.can_receive() {
                    return Err(RxCounter::DropNoQp);
                }
                let p = rc::RxPacket {
                    skb,
                    src: source_gid(ip).ok_or(RxCounter::DropMalformed)?,
                    head,
                    opcode: op,
                    psn: bth.psn(),
                    ack_req: bth.ack_req(),
                    solicited: bth.solicited(),
                    payload,
                    ce: want == QpType::Rc && crate::driver::cnp::ce_marked(qp, ip),
                };
                rc::receive(held, &self.atomics, &p, mrs).map_err(|e| match e {
                    rc::RcDrop::NotConnected => RxCounter::DropNoQp,
                    rc::RcDrop::Malformed => RxCounter::DropMalformed,
                    rc::RcDrop::Sequence => RxCounter::DropSequence,
                    rc::RcDrop::NoRecv => RxCounter::DropNoRecv,
                })
            }
            op if op.transport() == Some(Transport::Xud) => {
                if qp.qp_type() != QpType::Xud {
                    return Err(RxCounter::DropNoQp);
                }
                let p = super::xud::RxPacket {
                    skb,
                    ip,
                    src: source_gid(ip).ok_or(RxCounter::DropMalformed)?,
                    dst: dest_gid(ip).ok_or(RxCounter::DropMalformed)?,
                    head,
                    opcode: op,
                    psn: bth.psn(),
                    ack_req: bth.ack_req(),
                    solicited: bth.solicited(),
                    payload,
                    ce: op.info().is_ok_and(|i| i.direction == Direction::Request)
                        && crate::driver::cnp::ce_marked(qp, ip),
                };
                super::xud::receive(held, &p, mrs)
            }
            _ => Err(RxCounter::DropUnsupported),
        }
    }
}

impl RxPort {
    /// A CNP (`proto::wire::cnp`): checked as any packet (its length and
    /// ICRC, a QP of this port), then its QP's transport takes it from
    /// the address it came from, if it sends there. rxe neither sends nor
    /// takes CNPs; with `cc` off rxud takes them and counts them, and cuts
    /// nothing.
    fn deliver_cnp(
        &self,
        skb: &SkBuff,
        run: &mut Run<'_>,
        ip: &[u8],
        head: &[u8],
        len: usize,
    ) -> Verdict {
        let qpn = cnp::check(head, len).map_err(|_| RxCounter::DropMalformed)?;
        {
            let _timed = self.counters.span(RxCounter::RxIcrcNs);
            check_icrc(skb, ip, head, len)?;
        }
        let (held, _) = run.qp_for(qpn).ok_or(RxCounter::DropNoQp)?;
        let src = source_gid(ip).ok_or(RxCounter::DropMalformed)?;
        match held.qp().qp_type() {
            QpType::Rc | QpType::Uc => rc::congestion_notified(held, &src),
            QpType::Xud => {
                let dst = dest_gid(ip).ok_or(RxCounter::DropMalformed)?;
                super::xud::congestion_notified(held, &src, &dst)
            }
            _ => Err(RxCounter::DropCnpStray),
        }
    }

    /// A datagram to a multicast group (QP 0xFFFFFF): a copy into the next
    /// receive WQE of each UD QP attached to the group its destination
    /// address names. Delivered if one QP took it; each member that could
    /// not (no receive WQE, another Q_Key, a full CQ) is counted.
    fn deliver_multicast(
        &self,
        skb: &SkBuff,
        run: &mut Run<'_>,
        info: &OpcodeInfo,
        pad: usize,
        ip: &[u8],
        head: &[u8],
    ) -> Verdict {
        let bth = bth::Header::new_checked(head).map_err(|_| RxCounter::DropMalformed)?;
        if !matches!(
            bth.opcode(),
            Opcode::UD_SEND_ONLY | Opcode::UD_SEND_ONLY_WITH_IMMEDIATE
        ) {
            return Err(RxCounter::DropUnsupported);
        }
        let gid = dest_gid(ip).ok_or(RxCounter::DropMalformed)?;
        let mut qpns = [0u32; super::mcast::MAX_GROUP_QPS];
        let n = self.mcast.members(&gid, &mut qpns);
        let payload = info.header_len..skb.len() - pad - 4;
        let mut verdict = Err(RxCounter::DropNoQp);
        for &qpn in qpns.get(..n).unwrap_or(&[]) {
            let Some((held, mrs)) = run.qp_for(qpn) else {
                continue;
            };
            mrs.next_packet();
            match receive_ud(
                skb,
                held.qp(),
                mrs,
                ip,
                head,
                bth.solicited(),
                payload.clone(),
            ) {
                Ok(()) => verdict = Ok(()),
                Err(why) => self.counters.add(why, 1),
            }
        }
        verdict
    }
}

/// A UD SEND (to a UD QP or the GSI QP): into the next receive WQE,
/// after a 40-byte GRH.
fn receive_ud(
    skb: &SkBuff,
    qp: &QpCore,
    mrs: &mut MrMemo<'_>,
    ip: &[u8],
    head: &[u8],
    solicited: bool,
    payload: core::ops::Range<usize>,
) -> Verdict {
    if !matches!(qp.qp_type(), QpType::Ud | QpType::Gsi) || !qp.live.can_receive() {
        return Err(RxCounter::DropNoQp);
    }
    let deth = deth::Header::new_checked(head.get(bth::HEADER_LEN..).unwrap_or(&[]))
        .map_err(|_| RxCounter::DropMalformed)?;
    if deth.qkey() != qp.live.qkey() {
        return Err(RxCounter::DropQkey);
    }
    let imm = head
        .get(bth::HEADER_LEN + deth::HEADER_LEN..)
        .and_then(|b| immdt::Header::new_checked(b).ok())
        .map(|h| h.imm_data())
        .filter(|_| head.first() == Some(&Opcode::UD_SEND_ONLY_WITH_IMMEDIATE.0));
    let mut slot = [0u8; MAX_RECV_SLOT];
    // UD drops what finds no receive buffer.
    match qp.pop_recv(&mut slot) {
        Ok(true) => {}
        Ok(false) => return Err(RxCounter::DropNoRecv),
        Err(_) => return Err(RxCounter::DropNoRecv),
    }
    let wqe = RecvWqe::decode(&slot);
    let mut grh = [0u8; GRH_LEN];
    let (net, ip_len) = match ip.len() {
        28 => (network::IPV4, 20),
        48 => (network::IPV6, 40),
        _ => return Err(RxCounter::DropMalformed),
    };
    // As rxe and hardware do: an IPv4 header goes in the GRH's last
    // 20 bytes, an IPv6 header fills it.
    grh[GRH_LEN - ip_len..].copy_from_slice(&ip[..ip_len]);
    let status = place(qp, mrs, &slot, wqe.num_sge, &grh, skb, payload.clone());
    let mut cqe = Cqe {
        wr_id: wqe.wr_id,
        status,
        opcode: wc_opcode::RECV,
        byte_len: (GRH_LEN + payload.len()) as u32,
        qp_num: qp.qpn(),
        src_qp: deth.src_qp(),
        wc_flags: wc_flags::GRH,
        network_hdr_type: net,
        ..Default::default()
    };
    if let Some(imm) = imm {
        cqe.imm_data = u32::from_ne_bytes(imm);
        cqe.wc_flags |= wc_flags::WITH_IMM;
    }
    if qp.recv_cq.push(&cqe, solicited).is_err() {
        return Err(RxCounter::DropCqFull);
    }
    Ok(())
}

/// Copies the GRH and the payload into the receive WQE's SGEs (keys
/// looked up through `mrs`); the completion status.
fn place(
    qp: &QpCore,
    mrs: &mut MrMemo<'_>,
    slot: &[u8],
    num_sge: u32,
    grh: &[u8],
    skb: &SkBuff,
    payload: core::ops::Range<usize>,
) -> u32 {
    let max = qp
        .cap()
        .max_recv_sge
        .max(qp.srq.as_ref().map(|s| s.max_sge()).unwrap_or(0));
    if num_sge > max {
        return status::LOC_QP_OP_ERR;
    }
    let need = grh.len() + payload.len();
    let mut placed = 0usize;
    for i in 0..num_sge as usize {
        if placed == need {
            break;
        }
        let at = RECV_WQE_HEADER_SIZE as usize + i * SGE_SIZE as usize;
        let Some(sge) = slot.get(at..at + SGE_SIZE as usize).map(Sge::decode) else {
            return status::LOC_QP_OP_ERR;
        };
        let n = (sge.length as usize).min(need - placed);
        if n == 0 {
            continue;
        }
        let Some(mr) = mrs.get(sge.lkey) else {
            return status::LOC_PROT_ERR;
        };
        let Ok(off) = mr.check(qp.pd, sge.addr, n, AccessFlags::LOCAL_WRITE) else {
            return status::LOC_PROT_ERR;
        };
        let _timed = qp.port.counters.span(RxCounter::RxPlaceNs);
        if copy_piece(mr, off, grh, skb, &payload, placed, n).is_err() {
            return status::LOC_PROT_ERR;
        }
        placed += n;
    }
    if placed < need {
        return status::LOC_LEN_ERR;
    }
    status::SUCCESS
}

/// Copies bytes `[from, from + n)` of GRH-then-payload to offset `off` of
/// `mr`.
fn copy_piece(
    mr: &MrCore,
    off: u64,
    grh: &[u8],
    skb: &SkBuff,
    payload: &core::ops::Range<usize>,
    from: usize,
    n: usize,
) -> Result {
    let mut done = 0;
    if from < grh.len() {
        let k = (grh.len() - from).min(n);
        mr.write(off, grh.get(from..from + k).ok_or(EINVAL)?)?;
        done = k;
    }
    if done < n {
        let p = from + done - grh.len();
        mr.copy_from_skb(off + done as u64, skb, payload.start + p, n - done)?;
    }
    Ok(())
}

/// The sender's address as a GID (IPv4-mapped for IPv4), from the IP and
/// UDP headers as `SkBuff::ip_udp_headers` returns them.
fn source_gid(ip: &[u8]) -> Option<[u8; 16]> {
    address_gid(ip, 12, 8)
}

/// The destination address (ours) as a GID, from the same headers.
fn dest_gid(ip: &[u8]) -> Option<[u8; 16]> {
    address_gid(ip, 16, 24)
}

/// The address at byte `v4` of an IPv4 header or `v6` of an IPv6 one.
fn address_gid(ip: &[u8], v4: usize, v6: usize) -> Option<[u8; 16]> {
    let mut gid = [0u8; 16];
    match ip.len() {
        28 => {
            gid[10] = 0xff;
            gid[11] = 0xff;
            gid[12..].copy_from_slice(ip.get(v4..v4 + 4)?);
        }
        48 => gid.copy_from_slice(ip.get(v6..v6 + 16)?),
        _ => return None,
    }
    Some(gid)
}

/// Checks the ICRC of the datagram: its IP and UDP headers (as received),
/// the BTH, then everything up to the trailer.
fn check_icrc(skb: &SkBuff, ip: &[u8], head: &[u8], len: usize) -> Verdict {
    let mut hdrs = [0u8; 48 + bth::HEADER_LEN];
    let n = ip.len().min(48);
    hdrs[..n].copy_from_slice(&ip[..n]);
    hdrs[n..n + bth::HEADER_LEN].copy_from_slice(
        head.get(..bth::HEADER_LEN)
            .ok_or(RxCounter::DropMalformed)?,
    );
    let (mut icrc, _) =
        Icrc::begin(&hdrs[..n + bth::HEADER_LEN]).map_err(|_| RxCounter::DropMalformed)?;
    let end = len - 4;
    // The rest in place, fragment by fragment: no copy.
    icrc.try_update_with(|crc| skb.crc32(bth::HEADER_LEN, end - bth::HEADER_LEN, crc))
        .map_err(|_| RxCounter::DropMalformed)?;
    let mut trailer = [0u8; 4];
    skb.copy_out(end, &mut trailer)
        .map_err(|_| RxCounter::DropMalformed)?;
    if icrc.finish() == u32::from_le_bytes(trailer) {
        Ok(())
    } else {
        Err(RxCounter::DropBadIcrc)
    }
}
