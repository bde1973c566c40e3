// SPDX-License-Identifier: GPL-2.0

//! The RC requester on the wire: WQEs admitted from the send ring into
//! [`crate::proto::rc::Requester`] (a copy of each kept for
//! retransmission), request packets built from them (also UC's, which
//! share the layout), responses (ACK/NAK, READ data, atomic ACKs) taken
//! back, and send completions written.

use super::responder::ack_counter;
use super::{now, RcAttrs, RcDrop, RcState, RxPacket, Store};
use crate::abi::{
    opcode, send_flags, status, wc_opcode, AtomicOp, Cqe, FlushOp, RdmaOp, SendWqe,
    SEND_WQE_HEADER_SIZE,
};
use crate::driver::counters::RxCounter;
use crate::driver::cq::CqFull;
use crate::driver::local;
use crate::driver::mr::MrMemo;
use crate::driver::qp::QpCore;
use crate::driver::ring::MAX_SEND_SLOT;
use crate::driver::sgl::Sgl;
use crate::ib::QpType;
use crate::net::{skb::TxSkb, NetDevice};
use crate::proto::{
    mtu::IbMtu,
    psn::Psn,
    rc::{
        Completion, Flush, Incoming, Message, MsgKind, Outcome, PostError, Requester, Slot, Status,
        TxPacket, WqeRef, MAX_MSG_LEN,
    },
    uc as proto_uc,
    wire::{
        atomic, feth, ieth, immdt,
        opcode::{ExtHeader, Opcode},
        packet, reth,
    },
};
use kernel::prelude::*;

/// The send side: the requester and a copy of each WQE it holds.
pub(crate) struct Sender {
    pub(super) req: Requester<Store<Slot>>,
    /// Send WQE slots by requester ring position (`slot_size` bytes
    /// each, as many as the requester's ring).
    pub(super) wqes: KVVec<u8>,
    pub(super) slot_size: usize,
}

impl Sender {
    /// A requester whose first PSN is `sq_psn`, with room for `depth`
    /// work requests of `slot_size` bytes. Context: process.
    pub(crate) fn new(a: &RcAttrs, depth: u32, slot_size: u32) -> Result<Self> {
        let slots = Store::new(Slot::EMPTY, depth)?;
        let bytes = slots
            .0
            .len()
            .checked_mul(slot_size as usize)
            .ok_or(EINVAL)?;
        Ok(Self {
            req: Requester::new(&a.config(), a.sq_psn, slots),
            wqes: KVVec::from_elem(0u8, bytes, GFP_KERNEL)?,
            slot_size: slot_size as usize,
        })
    }

    fn wqe(&self, w: WqeRef) -> &[u8] {
        let mask = self.req.capacity().wrapping_sub(1) as usize;
        let at = (w.0 as usize & mask) * self.slot_size;
        self.wqes.get(at..at + self.slot_size).unwrap_or(&[])
    }

    fn wqe_mut(&mut self, w: WqeRef) -> &mut [u8] {
        let mask = self.req.capacity().wrapping_sub(1) as usize;
        let at = (w.0 as usize & mask) * self.slot_size;
        self.wqes
            .get_mut(at..at + self.slot_size)
            .unwrap_or(&mut [])
    }
}

/// Builds the packets the requester has due into the queue.
pub(super) fn transmit(qp: &QpCore, st: &mut RcState, t: u64) {
    while !st.txq.is_full() {
        let Some(s) = st.sender.as_mut() else {
            break;
        };
        let Some(p) = s.req.next_packet(t) else {
            break;
        };
        if p.retransmit {
            qp.port.counters.add(RxCounter::RcRetransmits, 1);
        }
        let built = match st.sender.as_ref() {
            Some(s) => build_request(qp, st, s.wqe(p.wqe), &Out::from(&p)),
            None => Err(None),
        };
        match built {
            Ok(skb) => st.txq.push(skb),
            // Not built (no memory, no route): as if lost, the timer
            // resends it. A local fault fails the WQE.
            Err(Some(status)) => {
                if let Some(s) = st.sender.as_mut() {
                    let _ = s.req.fail_wqe(p.wqe, status);
                }
            }
            Err(None) => qp.port.counters.add(RxCounter::TxErrors, 1),
        }
    }
}

/// Moves WQEs from the send ring into the requester while it has room.
///
/// A local operation (REG_MR, LOCAL_INV) waits at the head of the ring
/// until everything before it has completed, then runs and completes
/// there: it keeps its place in the completion order, and a LOCAL_INV
/// cannot pull an MR from under a request still being retransmitted.
/// An unsignaled REG_MR of a free MR runs at once instead
/// ([`local::execute_ahead`]).
pub(super) fn admit_wqes(qp: &QpCore, s: &mut Sender, mtu: IbMtu) {
    while s.req.len() < s.req.capacity() {
        let mut slot = [0u8; MAX_SEND_SLOT];
        let body = &mut slot[..s.slot_size.min(MAX_SEND_SLOT)];
        match qp.sq.peek(body) {
            Ok(true) => {}
            _ => return,
        }
        let hdr = SendWqe::decode(body);
        if local::is_local(hdr.opcode) && !s.req.is_empty() {
            if s.req.is_error() || !local::execute_ahead(qp, &hdr) {
                return;
            }
            // Done: taken off the ring, with no completion.
            qp.port.counters.add(RxCounter::RcRegMrAhead, 1);
            match qp.sq.pop(body) {
                Ok(true) => continue,
                _ => return,
            }
        }
        match qp.sq.pop(body) {
            Ok(true) => {}
            _ => return,
        }
        if local::is_local(hdr.opcode) {
            let code = if s.req.is_error() {
                status::WR_FLUSH_ERR
            } else {
                local::execute(qp, &hdr)
            };
            local::complete(qp, &hdr, code);
            if code != status::SUCCESS && !s.req.is_error() {
                // A failed local operation fails the QP as a failed
                // request does (IBTA 10.3.1; rxe too): what was posted
                // after it completes flushed. Its consumer (xprtrdma,
                // nvme-rdma) reconnects on that error anyway.
                s.req.flush();
                return;
            }
            continue;
        }
        let checked = check_wqe(qp, &hdr, body, mtu);
        let msg = match checked {
            Ok(m) => m,
            Err(_) => Message {
                id: 0,
                kind: MsgKind::Send,
                len: 0,
                fence: false,
                unsignaled: false,
            },
        };
        let w = match s.req.post(msg) {
            Ok(w) => w,
            Err(PostError::Full) => return,
            Err(_) => {
                // Too long or READ without max_rd_atomic: post an empty
                // stand-in to fail it in order.
                match s.req.post(Message {
                    id: 0,
                    kind: MsgKind::Send,
                    len: 0,
                    fence: false,
                    unsignaled: false,
                }) {
                    Ok(w) => {
                        let _ = s.req.fail_wqe(w, Status::LocalQpOperation);
                        w
                    }
                    Err(_) => return,
                }
            }
        };
        let dst = s.wqe_mut(w);
        let n = dst.len().min(body.len());
        dst[..n].copy_from_slice(&body[..n]);
        if let Err(status) = checked {
            let _ = s.req.fail_wqe(w, status);
        }
    }
}

/// Checks a send WQE from the ring: what the requester is to do with it.
pub(super) fn check_wqe(
    qp: &QpCore,
    w: &SendWqe,
    slot: &[u8],
    _mtu: IbMtu,
) -> core::result::Result<Message, Status> {
    let kind = match w.opcode {
        opcode::SEND => MsgKind::Send,
        opcode::SEND_WITH_IMM => MsgKind::SendImm,
        opcode::SEND_WITH_INV => MsgKind::SendInv,
        opcode::RDMA_WRITE => MsgKind::Write,
        opcode::RDMA_WRITE_WITH_IMM => MsgKind::WriteImm,
        opcode::RDMA_READ => MsgKind::Read,
        opcode::ATOMIC_CMP_AND_SWP => MsgKind::CmpSwap,
        opcode::ATOMIC_FETCH_AND_ADD => MsgKind::FetchAdd,
        opcode::ATOMIC_WRITE if qp.qp_type() == QpType::Rc => MsgKind::AtomicWrite,
        opcode::FLUSH if qp.qp_type() == QpType::Rc => MsgKind::Flush,
        _ => return Err(Status::LocalQpOperation),
    };
    if w.send_flags & !send_flags::KNOWN != 0 {
        return Err(Status::LocalQpOperation);
    }
    if kind == MsgKind::Flush {
        // Nothing local: no SGE, no inline data; the range and what to
        // make of it are the operands, checked as the responder checks
        // the FETH (reserved values refused here, not sent).
        let f = FlushOp::decode(&w.op);
        let feth = feth::Repr {
            placement_type: f.placement_type,
            selectivity_level: f.selectivity_level,
        };
        if w.num_sge != 0
            || w.send_flags & send_flags::INLINE != 0
            || Flush::of(feth).is_none()
            || f.length > MAX_MSG_LEN
        {
            return Err(Status::LocalQpOperation);
        }
        return Ok(Message {
            id: 0,
            kind,
            len: f.length,
            fence: w.send_flags & send_flags::FENCE != 0,
            unsignaled: !signaled(qp, w),
        });
    }
    let cap = qp.cap();
    let inline = w.send_flags & send_flags::INLINE != 0;
    let body = slot.get(SEND_WQE_HEADER_SIZE as usize..).unwrap_or(&[]);
    if kind == MsgKind::AtomicWrite {
        // Its 8 bytes ride in the WQE as inline data (rust/abi), whatever
        // the QP's inline limit, to 8 aligned bytes.
        let r = RdmaOp::decode(&w.op);
        if !inline || w.inline_len != 8 || body.len() < 8 || r.remote_addr % 8 != 0 {
            return Err(Status::LocalQpOperation);
        }
    }
    let len = if inline {
        if !(kind.carries_payload() || kind == MsgKind::AtomicWrite)
            || (w.inline_len > cap.max_inline_data && kind != MsgKind::AtomicWrite)
            || w.inline_len as usize > body.len()
        {
            return Err(Status::LocalQpOperation);
        }
        u64::from(w.inline_len)
    } else {
        if w.num_sge > cap.max_send_sge {
            return Err(Status::LocalQpOperation);
        }
        Sgl::new(qp.pd, body, w.num_sge).total_len()
    };
    if kind.is_atomic() {
        let a = AtomicOp::decode(&w.op);
        // An atomic works on 8 aligned bytes at both ends.
        if len != 8 || a.remote_addr % 8 != 0 {
            return Err(Status::LocalQpOperation);
        }
    }
    let len = u32::try_from(len).map_err(|_| Status::LocalQpOperation)?;
    Ok(Message {
        id: 0,
        kind,
        len,
        fence: w.send_flags & send_flags::FENCE != 0,
        unsignaled: !signaled(qp, w),
    })
}

/// Whether `w` completes with a CQ entry on success.
fn signaled(qp: &QpCore, w: &SendWqe) -> bool {
    qp.sq_sig_all() || w.send_flags & send_flags::SIGNALED != 0
}

/// A request packet to build (from `rc::TxPacket` or `proto_uc::TxPacket`).
pub(super) struct Out {
    psn: Psn,
    opcode: Opcode,
    ack_req: bool,
    offset: u32,
    len: u32,
    dma_len: u32,
}

impl From<&TxPacket> for Out {
    fn from(p: &TxPacket) -> Self {
        Self {
            psn: p.psn,
            opcode: p.opcode,
            ack_req: p.ack_req,
            offset: p.offset,
            len: p.len,
            dma_len: p.dma_len,
        }
    }
}

impl From<&proto_uc::TxPacket> for Out {
    fn from(p: &proto_uc::TxPacket) -> Self {
        Self {
            psn: p.psn,
            opcode: p.opcode,
            ack_req: false,
            offset: p.offset,
            len: p.len,
            dma_len: p.dma_len,
        }
    }
}

/// Builds the request packet `p` of the WQE in `slot`. `Err(Some)`:
/// the WQE fails with that status; `Err(None)`: not sent now (resent
/// later).
pub(super) fn build_request(
    qp: &QpCore,
    st: &RcState,
    slot: &[u8],
    p: &Out,
) -> core::result::Result<TxSkb, Option<Status>> {
    let w = SendWqe::decode(slot);
    let info = p.opcode.info().map_err(|_| None)?;
    let ends = info.position.ends_message();
    let solicited = ends && w.send_flags & send_flags::SOLICITED != 0;
    let mut repr = packet::Repr::new(st.bth(p.opcode, p.psn, solicited, p.ack_req));
    if info.has(ExtHeader::Reth) {
        let op = RdmaOp::decode(&w.op);
        repr.reth = Some(reth::Repr {
            va: op.remote_addr.wrapping_add(u64::from(p.offset)),
            rkey: op.rkey,
            dma_len: p.dma_len,
        });
    }
    if info.has(ExtHeader::Feth) {
        let f = FlushOp::decode(&w.op);
        repr.feth = Some(feth::Repr {
            placement_type: f.placement_type,
            selectivity_level: f.selectivity_level,
        });
    }
    if info.has(ExtHeader::ImmDt) {
        repr.immdt = Some(immdt::Repr {
            imm_data: w.imm_or_inv.to_ne_bytes(),
        });
    }
    if info.has(ExtHeader::Ieth) {
        repr.ieth = Some(ieth::Repr { rkey: w.imm_or_inv });
    }
    if info.has(ExtHeader::AtomicEth) {
        let a = AtomicOp::decode(&w.op);
        repr.atomic_eth = Some(atomic::Repr {
            va: a.remote_addr,
            rkey: a.rkey,
            swap_add: if w.opcode == opcode::ATOMIC_CMP_AND_SWP {
                a.swap
            } else {
                a.compare_add
            },
            compare: a.compare_add,
        });
    }
    let payload = if info.payload { p.len as usize } else { 0 };
    let ndev = st.ndev.as_deref().ok_or(None)?;
    let mut skb = new_packet(ndev, &repr, payload).ok_or(None)?;
    {
        let Ok(mut pkt) = packet::Packet::new_checked(skb.payload_mut()) else {
            return Err(None);
        };
        let data = pkt.payload_mut();
        let data = data.get_mut(..payload).ok_or(None)?;
        if w.send_flags & send_flags::INLINE != 0 {
            let from = SEND_WQE_HEADER_SIZE as usize + p.offset as usize;
            let src = slot
                .get(from..from + payload)
                .ok_or(Some(Status::LocalQpOperation))?;
            data.copy_from_slice(src);
        } else if payload > 0 {
            let body = slot.get(SEND_WQE_HEADER_SIZE as usize..).unwrap_or(&[]);
            Sgl::new(qp.pd, body, w.num_sge.min(qp.cap().max_send_sge))
                .read(&mut MrMemo::new(&qp.mrs), u64::from(p.offset), data)
                .map_err(|_| Some(Status::LocalProtection))?;
        }
    }
    // RC's requests answer CNPs; UC's sender has no window to cut.
    let ect = st.uc.is_none() && crate::kext::params::cc_enabled();
    st.finish(qp, &mut skb, ect).map_err(|_| None)?;
    Ok(skb)
}

/// A packet of `repr` with `payload` bytes of (unwritten) payload: the
/// skb with the headers in place.
pub(super) fn new_packet(ndev: &NetDevice, repr: &packet::Repr, payload: usize) -> Option<TxSkb> {
    let total = repr.buffer_len(payload).ok()?;
    let mut skb = TxSkb::new(ndev, total).ok()?;
    repr.emit(skb.payload_mut(), payload).ok()?;
    Some(skb)
}

/// Writes the send CQ entries of the requester's finished WQEs.
///
/// `Err` if the send CQ could not take one (it overflowed, and raised
/// IB_EVENT_CQ_ERR): the QP must then enter the error state.
pub(super) fn complete_sends(qp: &QpCore, st: &mut RcState) -> core::result::Result<(), CqFull> {
    let Some(s) = st.sender.as_mut() else {
        return Ok(());
    };
    let mut lost = Ok(());
    while let Some(c) = s.req.next_completion() {
        let w = SendWqe::decode(s.wqe(c.wqe));
        let code = wc_status(c.status);
        let signaled = signaled(qp, &w);
        if signaled || code != status::SUCCESS {
            let cqe = Cqe {
                wr_id: w.wr_id,
                status: code,
                opcode: wc_opcode_of(&c),
                byte_len: c.len,
                qp_num: qp.qpn(),
                ..Default::default()
            };
            if let Err(e) = qp.send_cq.push(&cqe, false) {
                lost = Err(e);
            }
        }
    }
    lost
}

fn wc_opcode_of(c: &Completion) -> u32 {
    match c.kind {
        MsgKind::Send | MsgKind::SendImm | MsgKind::SendInv => wc_opcode::SEND,
        MsgKind::Write | MsgKind::WriteImm => wc_opcode::RDMA_WRITE,
        MsgKind::Read => wc_opcode::RDMA_READ,
        MsgKind::CmpSwap => wc_opcode::COMP_SWAP,
        MsgKind::FetchAdd => wc_opcode::FETCH_ADD,
        MsgKind::AtomicWrite => wc_opcode::ATOMIC_WRITE,
        MsgKind::Flush => wc_opcode::FLUSH,
    }
}

pub(super) fn wc_status(s: Status) -> u32 {
    match s {
        Status::Success => status::SUCCESS,
        Status::RetryExceeded => status::RETRY_EXC_ERR,
        Status::RnrRetryExceeded => status::RNR_RETRY_EXC_ERR,
        Status::RemoteAccess => status::REM_ACCESS_ERR,
        Status::RemoteInvalidRequest => status::REM_INV_REQ_ERR,
        Status::RemoteOperational => status::REM_OP_ERR,
        Status::LocalProtection => status::LOC_PROT_ERR,
        Status::LocalQpOperation => status::LOC_QP_OP_ERR,
        Status::Flushed => status::WR_FLUSH_ERR,
    }
}

/// A response for the requester: ACK/NAK, READ data, atomic ACK.
pub(super) fn on_response(
    qp: &QpCore,
    st: &mut RcState,
    p: &RxPacket<'_>,
    mrs: &mut MrMemo<'_>,
) -> core::result::Result<(), RcDrop> {
    let s = st.sender.as_mut().ok_or(RcDrop::NotConnected)?;
    let incoming = Incoming {
        psn: p.psn,
        opcode: p.opcode,
        aeth: p.aeth(),
        payload_len: p.payload.len() as u32,
    };
    let outcome = s.req.on_response(&incoming, now());
    if let (Outcome::Handled, Opcode::RC_ACKNOWLEDGE, Some(a)) =
        (&outcome, p.opcode, &incoming.aeth)
    {
        qp.port.counters.add(ack_counter(a, false), 1);
    }
    match outcome {
        Outcome::Handled => Ok(()),
        Outcome::Ignored => Err(RcDrop::Sequence),
        Outcome::ReadData {
            wqe, offset, len, ..
        } => {
            let slot = s.wqe(wqe);
            let w = SendWqe::decode(slot);
            let body = slot.get(SEND_WQE_HEADER_SIZE as usize..).unwrap_or(&[]);
            let sgl = Sgl::new(qp.pd, body, w.num_sge.min(qp.cap().max_send_sge));
            let n = (len as usize).min(p.payload.len());
            let _timed = qp.port.counters.span(RxCounter::RxPlaceNs);
            if sgl
                .copy_from_skb(mrs, u64::from(offset), p.skb, p.payload.start, n)
                .is_err()
            {
                let _ = s.req.fail_wqe(wqe, Status::LocalProtection);
            }
            Ok(())
        }
        Outcome::AtomicResult { wqe, .. } => {
            let orig = p.atomic_orig().ok_or(RcDrop::Malformed)?;
            let slot = s.wqe(wqe);
            let w = SendWqe::decode(slot);
            let body = slot.get(SEND_WQE_HEADER_SIZE as usize..).unwrap_or(&[]);
            let sgl = Sgl::new(qp.pd, body, w.num_sge.min(qp.cap().max_send_sge));
            if sgl.write(mrs, 0, &orig.to_ne_bytes()).is_err() {
                let _ = s.req.fail_wqe(wqe, Status::LocalProtection);
            }
            Ok(())
        }
    }
}
