// SPDX-License-Identifier: GPL-2.0

//! UC on the wire over [`crate::proto::uc`]: messages cut into packets
//! with no answer expected (a message completes once its last packet is
//! queued), and packets placed whole-message-or-nothing, never answered.
//! Shares RC's connection state, packet layout and placement.

use super::requester::{build_request, check_wqe, wc_status, Out};
use super::responder::{
    check_write, fail_recv, finish_recv, place_send, place_write, take_recv, Refuse,
};
use super::{with_doorbell_flag, RcDrop, RcState, RxPacket};
use crate::abi::{status, SendWqe};
use crate::driver::counters::RxCounter;
use crate::driver::local;
use crate::driver::mr::MrMemo;
use crate::driver::qp::QpCore;
use crate::proto::{
    rc::{MsgKind, Status},
    uc as proto_uc,
};
use kernel::prelude::*;

/// The two halves of a UC QP.
pub(super) struct UcSide {
    pub(super) rx: proto_uc::Receiver,
    /// From RTS on.
    pub(super) tx: Option<UcTx>,
}

/// The UC send side: the message being cut into packets.
pub(crate) struct UcTx {
    pub(super) sender: proto_uc::Sender,
    /// The WQE of the message in progress.
    pub(super) slot: KVec<u8>,
    /// That message and its next packet.
    pub(super) cur: Option<(proto_uc::Message, u32)>,
    /// An error completion moved the QP to ERROR: later WQEs flush.
    pub(super) failed: bool,
}

/// UC's sending: WQEs from the ring cut into packets while the queue has
/// room; a message completes once its last packet is queued. The flag
/// logic is RC's, with "holds work" meaning a message in progress (the
/// kick budget's timer comes back for the rest).
pub(super) fn uc_pump(qp: &QpCore, st: &mut RcState) {
    with_doorbell_flag(qp, st, |st| {
        uc_transmit(qp, st);
        st.uc_tx().is_some_and(|t| t.cur.is_some())
    });
}

fn uc_transmit(qp: &QpCore, st: &mut RcState) {
    let mtu = st.mtu;
    while !st.txq.is_full() {
        let Some(t) = st.uc_tx_mut() else {
            return;
        };
        if t.cur.is_none() {
            if !matches!(qp.sq.pop(&mut t.slot), Ok(true)) {
                return;
            }
            let w = SendWqe::decode(&t.slot);
            if local::is_local(w.opcode) {
                // Every earlier WQE has completed (UC completes a message
                // once its last packet is queued).
                let code = if t.failed {
                    status::WR_FLUSH_ERR
                } else {
                    local::execute(qp, &w)
                };
                local::complete(qp, &w, code);
                continue;
            }
            if t.failed {
                complete_uc(qp, &t.slot, status::WR_FLUSH_ERR, 0);
                continue;
            }
            let started = check_wqe(qp, &w, &t.slot, mtu).and_then(|m| {
                t.sender
                    .start(m.kind, m.len)
                    .map_err(|_| Status::LocalQpOperation)
            });
            match started {
                Ok(m) => t.cur = Some((m, 0)),
                Err(e) => {
                    t.failed = true;
                    complete_uc(qp, &t.slot, wc_status(e), 0);
                    continue;
                }
            }
        }
        let Some((m, k)) = t.cur else {
            return;
        };
        let p = m.packet(k);
        let slot = core::mem::take(&mut t.slot);
        let built = build_request(qp, st, &slot, &Out::from(&p));
        let Some(t) = st.uc_tx_mut() else {
            return;
        };
        t.slot = slot;
        t.cur = (!p.last).then_some((m, k + 1));
        let failed = match built {
            Ok(skb) => {
                st.txq.push(skb);
                None
            }
            // No memory or route: the packet is lost, as UC allows.
            Err(None) => {
                qp.port.counters.add(RxCounter::TxErrors, 1);
                None
            }
            Err(Some(e)) => Some(e),
        };
        let Some(t) = st.uc_tx_mut() else {
            return;
        };
        if let Some(e) = failed {
            t.cur = None;
            t.failed = true;
            complete_uc(qp, &t.slot, wc_status(e), 0);
        } else if p.last {
            complete_uc(qp, &t.slot, status::SUCCESS, p.offset + p.len);
        }
    }
}

/// The send completion of a UC WQE (if signaled, or failed).
pub(super) fn complete_uc(qp: &QpCore, slot: &[u8], code: u32, len: u32) {
    qp.complete_send(&SendWqe::decode(slot), code, len);
}

/// A UC packet: placed whole-message-or-nothing, never answered.
pub(super) fn on_uc_packet(
    qp: &QpCore,
    st: &mut RcState,
    p: &RxPacket<'_>,
    mrs: &mut MrMemo<'_>,
) -> core::result::Result<(), RcDrop> {
    let req = proto_uc::Request {
        psn: p.psn,
        opcode: p.opcode,
        payload_len: p.payload.len() as u32,
        reth: p.reth(),
    };
    let u = st.uc.as_mut().ok_or(RcDrop::NotConnected)?;
    let plan = match u.rx.on_packet(&req) {
        proto_uc::Action::Execute(plan) => plan,
        proto_uc::Action::Drop => return Err(RcDrop::Sequence),
    };
    let placed = if plan.needs_recv {
        take_recv(qp, st)
    } else {
        Ok(())
    }
    .and_then(|()| match plan.kind {
        MsgKind::Write | MsgKind::WriteImm => {
            // As RC: the whole range at the first packet.
            if plan.position.starts_message() && plan.write_len() > plan.len {
                check_write(qp, st, mrs, plan.rkey, plan.va, plan.write_len())?;
            }
            place_write(qp, st, p, mrs, plan.va, plan.rkey)
        }
        _ => place_send(qp, st, p, mrs, plan.offset),
    });
    let u = st.uc.as_mut().ok_or(RcDrop::NotConnected)?;
    match placed {
        Ok(()) => {
            u.rx.commit(&plan);
            // UC acknowledges nothing; a completion the CQ cannot take is
            // reported by the CQ's overflow event.
            if plan.completes_recv {
                let _ = finish_recv(qp, st, p, plan.kind, plan.offset + plan.len);
            }
            Ok(())
        }
        Err(Refuse::Rnr) => {
            u.rx.abandon(&plan);
            Err(RcDrop::NoRecv)
        }
        Err(Refuse::Nak(code)) => {
            u.rx.abandon(&plan);
            // A receive too short (or unusable) completes in error; the
            // message is lost either way.
            fail_recv(qp, st, code);
            Err(RcDrop::Sequence)
        }
    }
}
