// SPDX-License-Identifier: GPL-2.0

//! The RC responder on the wire: requests checked against
//! [`crate::proto::rc::Responder`]'s plan, payloads placed into the
//! receive WQE or the MR an rkey names, READs and atomics executed, and
//! the answers (coalesced ACKs, NAKs, READ data, atomic ACKs) built into
//! the QP's queue; receive completions written.

use super::requester::new_packet;
use super::{fail, RcDrop, RcState, RxPacket, Store};
use crate::abi::{status, wc_flags, wc_opcode, Cqe, RecvWqe, RECV_WQE_HEADER_SIZE};
use crate::driver::counters::RxCounter;
use crate::driver::cq::CqFull;
use crate::driver::mr::{MrError, MrMemo, Remote};
use crate::driver::qp::QpCore;
use crate::driver::sgl::{Sgl, SglError};
use crate::ib::{AccessFlags, QpEvent};
use crate::net::skb::TxSkb;
use crate::proto::{
    rc::{Action, MsgKind, Plan, Request, Resource, Responder, Response},
    wire::{
        aeth::{self, AckSyndrome, NakCode},
        atomic, packet,
    },
};
use kernel::prelude::*;

/// The receive side: the responder and the receive WQE a SEND (or a
/// WRITE with immediate) is being placed into.
pub(super) struct Receiver {
    pub(super) resp: Responder<Store<Resource>>,
    pub(super) recv: KVec<u8>,
    pub(super) recv_held: bool,
}

/// A receive completion on the QP's receive CQ.
pub(super) fn complete_recv(
    qp: &QpCore,
    wr_id: u64,
    st: u32,
    op: u32,
    len: u32,
    extra: Option<(u32, u32)>,
) {
    let mut cqe = Cqe {
        wr_id,
        status: st,
        opcode: op,
        byte_len: len,
        qp_num: qp.qpn(),
        ..Default::default()
    };
    if let Some((flags, imm)) = extra {
        cqe.wc_flags = flags;
        cqe.imm_data = imm;
    }
    let _ = qp.recv_cq.push(&cqe, false);
}

/// A request for the responder.
pub(super) fn on_request(
    qp: &QpCore,
    st: &mut RcState,
    atomics: &crate::kext::sync::SpinLockIrq<()>,
    p: &RxPacket<'_>,
    mrs: &mut MrMemo<'_>,
) -> core::result::Result<(), RcDrop> {
    let req = Request {
        psn: p.psn,
        opcode: p.opcode,
        ack_req: p.ack_req,
        payload_len: p.payload.len() as u32,
        reth: p.reth(),
        feth: p.feth(),
    };
    let plan = match st.receiver.resp.on_request(&req) {
        Action::Execute(plan) => plan,
        Action::Duplicate => {
            qp.port.counters.add(RxCounter::RcDuplicates, 1);
            return Err(RcDrop::Sequence);
        }
        Action::OutOfSequence | Action::Drop => {
            return Err(RcDrop::Sequence);
        }
        Action::Error(code) => {
            // The NAK is queued; the whole QP follows the responder.
            fail(qp, st, Some(event_of(code)));
            return Err(RcDrop::Malformed);
        }
    };
    match execute(qp, st, atomics, p, mrs, &plan) {
        Ok(orig) => {
            // The receive completion is written before the request is
            // committed (which owes its ACK): a message whose completion
            // the CQ cannot take is never acknowledged, and the QP fails.
            if plan.completes_recv
                && finish_recv(qp, st, p, plan.kind, plan.offset + plan.len).is_err()
            {
                fail(qp, st, Some(QpEvent::Fatal));
                return Ok(());
            }
            let _ = st.receiver.resp.commit(&plan, orig);
        }
        Err(Refuse::Rnr) => {
            qp.port.counters.add(RxCounter::RcRnrNaks, 1);
            let _ = st.receiver.resp.rnr(&plan);
        }
        Err(Refuse::Nak(code)) => {
            let _ = st.receiver.resp.reject(&plan, code);
            fail_recv(qp, st, code);
            // The whole QP, not only its responder.
            let event = event_of(code);
            fail(qp, st, Some(event));
        }
    }
    Ok(())
}

/// The async event of a QP whose responder refused a request with `code`
/// (IBTA 11.6.3.2: the responder's affiliated errors).
fn event_of(code: NakCode) -> QpEvent {
    match code {
        NakCode::RemoteAccessError => QpEvent::AccessViolation,
        NakCode::InvalidRequest => QpEvent::InvalidRequest,
        _ => QpEvent::Fatal,
    }
}

pub(super) enum Refuse {
    Rnr,
    Nak(NakCode),
}

/// Carries out an in-sequence request; the atomic's original value.
pub(super) fn execute(
    qp: &QpCore,
    st: &mut RcState,
    atomics: &crate::kext::sync::SpinLockIrq<()>,
    p: &RxPacket<'_>,
    mrs: &mut MrMemo<'_>,
    plan: &Plan,
) -> core::result::Result<u64, Refuse> {
    if plan.needs_recv {
        take_recv(qp, st)?;
    }
    match plan.kind {
        MsgKind::SendInv => {
            // The last packet of a SEND with invalidate: placed, then the
            // key its IETH names is invalidated (a fast-registration MR
            // of the QP's PD, or a type 2 window bound through this QP;
            // anything else is an invalid request).
            place_send(qp, st, p, mrs, plan.offset)?;
            let rkey = p.ieth().ok_or(Refuse::Nak(NakCode::InvalidRequest))?;
            mrs.get(rkey)
                .ok_or(Refuse::Nak(NakCode::InvalidRequest))?
                .invalidate(qp.qpn(), qp.pd, rkey)
                .map_err(|_| Refuse::Nak(NakCode::InvalidRequest))?;
            Ok(0)
        }
        MsgKind::Send | MsgKind::SendImm => place_send(qp, st, p, mrs, plan.offset).map(|()| 0),
        MsgKind::Write | MsgKind::WriteImm => {
            if plan.position.starts_message() && plan.write_len() > plan.len {
                check_write(qp, st, mrs, plan.rkey, plan.va, plan.write_len())?;
            }
            place_write(qp, st, p, mrs, plan.va, plan.rkey).map(|()| 0)
        }
        MsgKind::Read => {
            // Checked whole now; each response packet checks its piece
            // again (the MR may go meanwhile).
            if plan.len > 0 {
                remote_mr(
                    qp,
                    st,
                    mrs,
                    plan.rkey,
                    plan.va,
                    plan.len as usize,
                    AccessFlags::REMOTE_READ,
                )?;
            } else if !st.access.contains(AccessFlags::REMOTE_READ) {
                return Err(Refuse::Nak(NakCode::RemoteAccessError));
            }
            Ok(0)
        }
        MsgKind::CmpSwap | MsgKind::FetchAdd => {
            let a = p.atomic_eth().ok_or(Refuse::Nak(NakCode::InvalidRequest))?;
            if a.va % 8 != 0 {
                return Err(Refuse::Nak(NakCode::InvalidRequest));
            }
            let (mr, off) = remote_mr(qp, st, mrs, a.rkey, a.va, 8, AccessFlags::REMOTE_ATOMIC)?;
            // Atomic with respect to every other atomic of the device.
            let _g = atomics.lock();
            let mut v = [0u8; 8];
            mr.read(off, &mut v)
                .map_err(|_| Refuse::Nak(NakCode::RemoteAccessError))?;
            let orig = u64::from_ne_bytes(v);
            let new = if plan.kind == MsgKind::CmpSwap {
                if orig == a.compare {
                    a.swap_add
                } else {
                    orig
                }
            } else {
                orig.wrapping_add(a.swap_add)
            };
            mr.write(off, &new.to_ne_bytes())
                .map_err(|_| Refuse::Nak(NakCode::RemoteAccessError))?;
            Ok(orig)
        }
        MsgKind::AtomicWrite => {
            // The proto checked its 8 bytes carried and named; the
            // target is 8 aligned bytes of memory the peer may write.
            let mut value = [0u8; 8];
            if p.payload.len() != value.len()
                || p.skb.copy_out(p.payload.start, &mut value).is_err()
                || plan.va % 8 != 0
            {
                return Err(Refuse::Nak(NakCode::InvalidRequest));
            }
            let (mr, off) = remote_mr(
                qp,
                st,
                mrs,
                plan.rkey,
                plan.va,
                8,
                AccessFlags::REMOTE_WRITE,
            )?;
            // Whole with respect to every atomic of the device.
            let _g = atomics.lock();
            mr.write(off, &value)
                .map_err(|_| Refuse::Nak(NakCode::RemoteAccessError))?;
            Ok(0)
        }
        MsgKind::Flush => {
            // The proto checked the FETH; the key must grant what it
            // asks for, over the RETH's range or (selectivity level 1)
            // whatever the range, as rxe checks it. Persistence is never
            // granted (no MR of rxud is persistent memory).
            let f = plan.flush.ok_or(Refuse::Nak(NakCode::InvalidRequest))?;
            let mut rights = AccessFlags::EMPTY;
            if f.global {
                rights = rights.union(AccessFlags::FLUSH_GLOBAL);
            }
            if f.persistent {
                rights = rights.union(AccessFlags::FLUSH_PERSISTENT);
            }
            if f.whole_mr {
                if !st.access.contains(rights) {
                    return Err(Refuse::Nak(NakCode::RemoteAccessError));
                }
                let table = mrs.table();
                mrs.get(plan.rkey)
                    .ok_or(Refuse::Nak(NakCode::RemoteAccessError))?
                    .check_remote_key(table, qp.qpn(), qp.pd, rights)
                    .map_err(|_| Refuse::Nak(NakCode::RemoteAccessError))?;
            } else {
                remote_mr(qp, st, mrs, plan.rkey, plan.va, plan.len as usize, rights)?;
            }
            // What the QP placed before the FLUSH is in memory already
            // (its packets were executed before this one, by CPU copies):
            // the fence orders those stores before the response that
            // says so.
            core::sync::atomic::fence(core::sync::atomic::Ordering::SeqCst);
            Ok(0)
        }
    }
}

/// Takes a receive WQE for a SEND (or a WRITE with immediate), unless one
/// is held already (a SEND in progress, or one UC abandoned).
pub(super) fn take_recv(qp: &QpCore, st: &mut RcState) -> core::result::Result<(), Refuse> {
    if st.receiver.recv_held {
        return Ok(());
    }
    match qp.pop_recv(&mut st.receiver.recv) {
        Ok(true) => {
            st.receiver.recv_held = true;
            Ok(())
        }
        _ => Err(Refuse::Rnr),
    }
}

/// Copies a SEND packet's payload into the held receive WQE at `offset`.
pub(super) fn place_send(
    qp: &QpCore,
    st: &RcState,
    p: &RxPacket<'_>,
    mrs: &mut MrMemo<'_>,
    offset: u32,
) -> core::result::Result<(), Refuse> {
    let w = RecvWqe::decode(&st.receiver.recv);
    let max = qp
        .cap()
        .max_recv_sge
        .max(qp.srq.as_ref().map(|s| s.max_sge()).unwrap_or(0));
    if w.num_sge > max {
        return Err(Refuse::Nak(NakCode::RemoteOperationalError));
    }
    let body = st
        .receiver
        .recv
        .get(RECV_WQE_HEADER_SIZE as usize..)
        .unwrap_or(&[]);
    let _timed = qp.port.counters.span(RxCounter::RxPlaceNs);
    Sgl::new(qp.pd, body, w.num_sge)
        .copy_from_skb(
            mrs,
            u64::from(offset),
            p.skb,
            p.payload.start,
            p.payload.len(),
        )
        .map_err(|e| match e {
            SglError::Length => Refuse::Nak(NakCode::InvalidRequest),
            SglError::Protection => Refuse::Nak(NakCode::RemoteOperationalError),
        })
}

/// Checks a WRITE's whole range, `len` bytes at `va` under `rkey`, at its
/// first packet, as rxe's check_rkey does: a WRITE running past its MR
/// then writes nothing, not its first packets.
pub(super) fn check_write(
    qp: &QpCore,
    st: &RcState,
    mrs: &mut MrMemo<'_>,
    rkey: u32,
    va: u64,
    len: u32,
) -> core::result::Result<(), Refuse> {
    remote_mr(
        qp,
        st,
        mrs,
        rkey,
        va,
        len as usize,
        AccessFlags::REMOTE_WRITE,
    )
    .map(|_| ())
}

/// Copies a WRITE packet's payload to `va` under `rkey`.
pub(super) fn place_write(
    qp: &QpCore,
    st: &RcState,
    p: &RxPacket<'_>,
    mrs: &mut MrMemo<'_>,
    va: u64,
    rkey: u32,
) -> core::result::Result<(), Refuse> {
    let n = p.payload.len();
    if n == 0 {
        return if st.access.contains(AccessFlags::REMOTE_WRITE) {
            Ok(())
        } else {
            Err(Refuse::Nak(NakCode::RemoteAccessError))
        };
    }
    let (mr, off) = remote_mr(qp, st, mrs, rkey, va, n, AccessFlags::REMOTE_WRITE)?;
    let _timed = qp.port.counters.span(RxCounter::RxPlaceNs);
    mr.copy_from_skb(off, p.skb, p.payload.start, n)
        .map_err(|_| Refuse::Nak(NakCode::RemoteAccessError))
}

/// The memory `rkey` names (looked up through `mrs`: an MR, or the MR
/// of a memory window), checked for `len` bytes at `va` with `rights`
/// (and the QP granting them); its offset.
fn remote_mr<'m>(
    qp: &QpCore,
    st: &RcState,
    mrs: &'m mut MrMemo<'_>,
    rkey: u32,
    va: u64,
    len: usize,
    rights: AccessFlags,
) -> core::result::Result<(Remote<'m>, u64), Refuse> {
    if !st.access.contains(rights) {
        return Err(Refuse::Nak(NakCode::RemoteAccessError));
    }
    let table = mrs.table();
    let mr = mrs
        .get(rkey)
        .ok_or(Refuse::Nak(NakCode::RemoteAccessError))?;
    mr.check_remote(table, qp.qpn(), qp.pd, va, len, rights)
        .map_err(|(MrError::Protection | MrError::Bounds)| Refuse::Nak(NakCode::RemoteAccessError))
}

/// The last packet of a SEND or WRITE with immediate: the receive WQE
/// completes.
pub(super) fn finish_recv(
    qp: &QpCore,
    st: &mut RcState,
    p: &RxPacket<'_>,
    kind: MsgKind,
    len: u32,
) -> core::result::Result<(), CqFull> {
    if !st.receiver.recv_held {
        return Ok(());
    }
    st.receiver.recv_held = false;
    let w = RecvWqe::decode(&st.receiver.recv);
    let imm = p.immdt();
    let op = match kind {
        MsgKind::WriteImm => wc_opcode::RECV_RDMA_WITH_IMM,
        _ => wc_opcode::RECV,
    };
    let mut cqe = Cqe {
        wr_id: w.wr_id,
        status: status::SUCCESS,
        opcode: op,
        byte_len: len,
        qp_num: qp.qpn(),
        ..Default::default()
    };
    if let Some(imm) = imm {
        cqe.imm_data = imm;
        cqe.wc_flags |= wc_flags::WITH_IMM;
    }
    if kind == MsgKind::SendInv {
        if let Some(rkey) = p.ieth() {
            cqe.imm_data = rkey;
            cqe.wc_flags |= wc_flags::WITH_INV;
        }
    }
    qp.recv_cq.push(&cqe, p.solicited)
}

/// A NAK ended the message in progress: its receive WQE completes in
/// error.
pub(super) fn fail_recv(qp: &QpCore, st: &mut RcState, code: NakCode) {
    if !st.receiver.recv_held {
        return;
    }
    st.receiver.recv_held = false;
    let w = RecvWqe::decode(&st.receiver.recv);
    let s = match code {
        NakCode::InvalidRequest => status::LOC_LEN_ERR,
        _ => status::LOC_PROT_ERR,
    };
    complete_recv(qp, w.wr_id, s, wc_opcode::RECV, 0, None);
}

/// Builds the responder's pending responses into the queue.
pub(super) fn respond(qp: &QpCore, st: &mut RcState) {
    while !st.txq.is_full() {
        let Some(r) = st.receiver.resp.next_response() else {
            break;
        };
        match build_response(qp, st, &r) {
            Some(skb) => {
                if let Response::Ack { aeth, .. } = r {
                    qp.port.counters.add(ack_counter(&aeth, true), 1);
                }
                st.txq.push(skb)
            }
            // Lost: the requester asks again.
            None => qp.port.counters.add(RxCounter::TxErrors, 1),
        }
    }
}

/// The counter of an RC ACK or NAK, `sent` or received.
pub(super) fn ack_counter(aeth: &aeth::Repr, sent: bool) -> RxCounter {
    match (matches!(aeth.syndrome, AckSyndrome::Ack { .. }), sent) {
        (true, true) => RxCounter::RcAcksSent,
        (false, true) => RxCounter::RcNaksSent,
        (true, false) => RxCounter::RcAcksReceived,
        (false, false) => RxCounter::RcNaksReceived,
    }
}

fn build_response(qp: &QpCore, st: &RcState, r: &Response) -> Option<TxSkb> {
    let mut repr = packet::Repr::new(st.bth(r.opcode(), r.psn(), false, false));
    let ndev = st.ndev.as_deref()?;
    let skb = match *r {
        Response::Ack { aeth, .. } => {
            repr.aeth = Some(aeth);
            new_packet(ndev, &repr, 0)?
        }
        Response::AtomicAck { aeth, orig, .. } => {
            repr.aeth = Some(aeth);
            repr.atomic_ack_eth = Some(atomic::AckRepr { orig });
            new_packet(ndev, &repr, 0)?
        }
        Response::ReadData {
            aeth,
            va,
            rkey,
            len,
            ..
        } => {
            repr.aeth = aeth;
            let n = len as usize;
            let mut skb = new_packet(ndev, &repr, n)?;
            // Without data (a zero-length READ, an ATOMIC WRITE's
            // answer) no memory is named. Else the MR may have gone since
            // the READ was accepted: then no answer, and the requester's
            // retries run out.
            if n > 0 {
                let mut mrs = MrMemo::new(&qp.mrs);
                let (mr, off) =
                    remote_mr(qp, st, &mut mrs, rkey, va, n, AccessFlags::REMOTE_READ).ok()?;
                let mut pkt = packet::Packet::new_checked(skb.payload_mut()).ok()?;
                let data = pkt.payload_mut().get_mut(..n)?;
                mr.read(off, data).ok()?;
            }
            skb
        }
    };
    let mut skb = skb;
    st.finish(qp, &mut skb, false).ok()?;
    Some(skb)
}
