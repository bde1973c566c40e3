// SPDX-License-Identifier: GPL-2.0

//! RC on the wire: the kernel side of [`crate::proto::rc`]. The state
//! machines decide; this module moves bytes between packets, memory
//! regions, rings and completion queues, and keeps the timer.
//!
//! # Contexts and locking
//!
//! One QP's RC state ([`RcState`]) is driven from the doorbell (process
//! context), the receive softirq (requests and responses) and the
//! retransmit timer (softirq), under the QP's `rc` lock, a bottom-half
//! lock: no hard-irq context takes it, and routing, which may disable and
//! re-enable softirqs itself (IPv6 does), runs under it. Packets are built
//! under the lock (the state machines say what goes in them) into the
//! QP's small transmit queue, and handed to IP after the lock is dropped,
//! so the lock is never held across the IP stack. One context at a time
//! sends a QP's queue (`RcState::sending`); a context that finds another
//! sending leaves its packets to it. So packets leave in the order they
//! were built, which is PSN order.
//!
//! # Per packet
//!
//! Request out: WQE slot already copied into the QP's saved-WQE array at
//! posting (the ring slot may be reused once consumed), headers from
//! `wire::packet::Repr`, payload copied once from the MR pages (or the
//! inline bytes) into the skb, IP/UDP pushed, ICRC. Request in: headers
//! parsed once in `rx.rs`, the responder plan checked against the MR or
//! the receive WQE, payload copied once from the skb into the pages,
//! commit; responses (coalesced ACKs, READ data, atomic ACKs) built at the
//! end of the packet. Response in: READ data copied from the skb into
//! the READ's SGEs, completions written to the send CQ.
//!
//! The netdev the QP sends on is held from RTR until the QP leaves the
//! connected states or the netdev goes away ([`RcState::detach`]).

use super::counters::RxCounter;
use super::local;
use super::mr::{self, MrError, MrMemo};
use super::qp::QpCore;
use super::ring::{MAX_RECV_SLOT, MAX_SEND_SLOT};
use super::sgl::{Sgl, SglError};
use super::tx;
use super::txq::{self, TxQueue};
use crate::abi::{
    opcode, send_flags, status, wc_flags, wc_opcode, AtomicOp, Cqe, RdmaOp, RecvWqe, SendWqe,
    RECV_WQE_HEADER_SIZE, SEND_WQE_HEADER_SIZE,
};
use crate::ib::{AccessFlags, AddressVector};
use crate::net::{
    skb::{SkBuff, TxSkb},
    NetDevice, NetDeviceRef, RouteCache,
};
use crate::proto::{
    mtu::IbMtu,
    psn::Psn,
    rc::{
        Action, Completion, Config, Incoming, Message, MsgKind, Outcome, Plan, PostError, Request,
        Requester, Resource, Responder, Response, Slot, Status, TxPacket, WqeRef,
    },
    uc,
    wire::{
        aeth::{self, AckSyndrome, NakCode},
        atomic, bth, ieth, immdt,
        opcode::{ExtHeader, Opcode},
        packet, reth,
    },
};
use kernel::{prelude::*, sync::Arc};

/// Caller-provided storage for the state machines.
struct Store<T>(KVVec<T>);

impl<T> AsRef<[T]> for Store<T> {
    fn as_ref(&self) -> &[T] {
        &self.0
    }
}

impl<T> AsMut<[T]> for Store<T> {
    fn as_mut(&mut self) -> &mut [T] {
        &mut self.0
    }
}

impl<T: Clone> Store<T> {
    /// `n` copies of `v`, `n` rounded up to a power of two (the state
    /// machines use the largest power-of-two prefix).
    fn new(v: T, n: u32) -> Result<Self> {
        let n = n.max(1).checked_next_power_of_two().ok_or(EINVAL)? as usize;
        Ok(Self(KVVec::from_elem(v, n, GFP_KERNEL)?))
    }
}

/// Where a connected QP's packets go.
pub(crate) struct Path {
    pub(crate) av: AddressVector,
    pub(crate) dest_qpn: u32,
    pub(crate) sport: u16,
}

/// The send side: the requester and a copy of each WQE it holds.
pub(crate) struct Sender {
    req: Requester<Store<Slot>>,
    /// Send WQE slots by requester ring position (`slot_size` bytes
    /// each, as many as the requester's ring).
    wqes: KVVec<u8>,
    slot_size: usize,
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

/// The receive side: the responder and the receive WQE a SEND (or a
/// WRITE with immediate) is being placed into.
struct Receiver {
    resp: Responder<Store<Resource>>,
    recv: KVec<u8>,
    recv_held: bool,
}

/// The two halves of a UC QP.
struct UcSide {
    rx: uc::Receiver,
    /// From RTS on.
    tx: Option<UcTx>,
}

/// The UC send side: the message being cut into packets.
pub(crate) struct UcTx {
    sender: uc::Sender,
    /// The WQE of the message in progress.
    slot: KVec<u8>,
    /// That message and its next packet.
    cur: Option<(uc::Message, u32)>,
    /// An error completion moved the QP to ERROR: later WQEs flush.
    failed: bool,
}

/// The send side a QP gets at RTS.
pub(crate) enum SendSide {
    Rc(Sender),
    Uc(UcTx),
}

impl SendSide {
    /// The send side of an RC (or, with `uc`, a UC) QP, for `depth` work
    /// requests of `slot_size` bytes. Context: process.
    pub(crate) fn new(uc: bool, a: &RcAttrs, depth: u32, slot_size: u32) -> Result<Self> {
        if uc {
            let mut slot = KVec::with_capacity(slot_size as usize, GFP_KERNEL)?;
            slot.extend_with(slot_size as usize, 0, GFP_KERNEL)?;
            Ok(Self::Uc(UcTx {
                sender: uc::Sender::new(a.sq_psn, a.mtu),
                slot,
                cur: None,
                failed: false,
            }))
        } else {
            Ok(Self::Rc(Sender::new(a, depth, slot_size)?))
        }
    }
}

/// One RC QP's connection state (from RTR on).
pub(crate) struct RcState {
    path: Path,
    /// The route to the peer, kept between packets (revalidated on use).
    route: RouteCache,
    ndev: Option<NetDeviceRef>,
    mtu: IbMtu,
    /// Rights the QP grants its peer (modify_qp's access flags).
    access: AccessFlags,
    receiver: Receiver,
    /// From RTS on (RC).
    sender: Option<Sender>,
    /// UC's halves, for a UC QP (which then has no `sender`, and whose
    /// responder stays unused; the receive WQE buffer serves both).
    uc: Option<UcSide>,
    txq: TxQueue,
    sending: bool,
    /// The deadline the timer is armed for.
    armed: Option<u64>,
}

/// The QP attributes RC needs, from modify_qp.
pub(crate) struct RcAttrs {
    pub(crate) mtu: IbMtu,
    pub(crate) access: AccessFlags,
    pub(crate) sq_psn: Psn,
    pub(crate) rq_psn: Psn,
    pub(crate) retry_cnt: u8,
    pub(crate) rnr_retry: u8,
    pub(crate) timeout: u8,
    pub(crate) min_rnr_timer: u8,
    pub(crate) max_rd_atomic: u8,
    pub(crate) max_dest_rd_atomic: u8,
}

impl RcAttrs {
    fn config(&self) -> Config {
        Config {
            mtu: self.mtu,
            retry_cnt: self.retry_cnt,
            rnr_retry: self.rnr_retry,
            timeout: self.timeout,
            min_rnr_timer: self.min_rnr_timer,
            max_rd_atomic: self.max_rd_atomic,
            max_dest_rd_atomic: self.max_dest_rd_atomic,
            ..Config::DEFAULT
        }
    }
}

/// The current time for the state machines.
fn now() -> u64 {
    crate::kext::timer::now_ns()
}

impl RcState {
    /// Routes a packet of the connection (`tx::finish`) along its path,
    /// through its cached route, numbered in the QP's sequence.
    fn finish(&self, qp: &QpCore, skb: &mut TxSkb) -> core::result::Result<(), u32> {
        tx::finish(
            skb,
            &self.path.av,
            self.path.sport,
            Some(&self.route),
            qp.next_ip_id(),
        )
    }

    /// The state of a QP entering RTR: a responder expecting `rq_psn`
    /// (with `uc`, UC's receiver). Context: process (allocates).
    pub(crate) fn new(path: Path, ndev: NetDeviceRef, a: &RcAttrs, uc: bool) -> Result<KBox<Self>> {
        let rd = if uc {
            0
        } else {
            u32::from(a.max_dest_rd_atomic)
        };
        let res = Store::new(Resource::EMPTY, rd)?;
        let mut recv = KVec::with_capacity(MAX_RECV_SLOT, GFP_KERNEL)?;
        recv.extend_with(MAX_RECV_SLOT, 0, GFP_KERNEL)?;
        Ok(KBox::new(
            Self {
                path,
                route: RouteCache::new(true)?,
                ndev: Some(ndev),
                mtu: a.mtu,
                access: a.access,
                receiver: Receiver {
                    resp: Responder::new(&a.config(), a.rq_psn, res),
                    recv,
                    recv_held: false,
                },
                sender: None,
                uc: uc.then(|| UcSide {
                    rx: uc::Receiver::new(a.rq_psn, a.mtu),
                    tx: None,
                }),
                txq: TxQueue::new(),
                sending: false,
                armed: None,
            },
            GFP_KERNEL,
        )?)
    }

    /// Entering RTS: the send side starts.
    pub(crate) fn start_sending(&mut self, s: SendSide) {
        match (s, self.uc.as_mut()) {
            (SendSide::Rc(s), None) if self.sender.is_none() => self.sender = Some(s),
            (SendSide::Uc(t), Some(u)) if u.tx.is_none() => u.tx = Some(t),
            _ => {}
        }
    }

    /// modify_qp changed the rights granted to the peer.
    pub(crate) fn set_access(&mut self, access: AccessFlags) {
        self.access = access;
    }

    /// An error completion or a fatal request moved the QP to the error
    /// state on its own (query_qp reports ERR).
    pub(crate) fn is_error(&self) -> bool {
        self.receiver.resp.is_error()
            || self.sender.as_ref().is_some_and(|s| s.req.is_error())
            || self.uc_tx().is_some_and(|t| t.failed)
    }

    fn uc_tx(&self) -> Option<&UcTx> {
        self.uc.as_ref().and_then(|u| u.tx.as_ref())
    }

    fn uc_tx_mut(&mut self) -> Option<&mut UcTx> {
        self.uc.as_mut().and_then(|u| u.tx.as_mut())
    }

    /// The next PSNs, for query_qp: (sq_psn, rq_psn).
    pub(crate) fn psns(&self) -> (Option<Psn>, Psn) {
        match &self.uc {
            Some(u) => (
                u.tx.as_ref().map(|t| t.sender.next_psn()),
                u.rx.expected_psn(),
            ),
            None => (
                self.sender.as_ref().map(|s| s.req.next_psn()),
                self.receiver.resp.expected_psn(),
            ),
        }
    }

    /// The BTH of a packet to the peer QP (the pad count is set by
    /// `packet::Repr::emit`).
    fn bth(&self, opcode: Opcode, psn: Psn, solicited: bool, ack_req: bool) -> bth::Repr {
        bth::Repr {
            opcode,
            solicited,
            mig_req: false,
            pad_count: 0,
            pkey: bth::DEFAULT_PKEY,
            fecn: false,
            becn: false,
            dest_qp: self.path.dest_qpn,
            ack_req,
            psn,
        }
    }

    /// The netdev is going away (or the QP leaves the connected states):
    /// no more packets; gives back the netdev.
    pub(crate) fn detach(&mut self) -> Option<NetDeviceRef> {
        while self.txq.pop().is_some() {}
        // The cached route refers to the netdev too.
        self.route.reset();
        self.ndev.take()
    }
}

/// The QP entered the error state: every outstanding send WQE completes
/// flushed, the receive in progress too, nothing more is accepted.
/// Context: any (under the QP's `rc` lock).
pub(crate) fn enter_error(qp: &QpCore, st: &mut RcState) {
    st.receiver.resp.set_error();
    if st.receiver.recv_held {
        st.receiver.recv_held = false;
        let w = RecvWqe::decode(&st.receiver.recv);
        complete_recv(qp, w.wr_id, status::WR_FLUSH_ERR, wc_opcode::RECV, 0, None);
    }
    if let Some(s) = &mut st.sender {
        s.req.flush();
    }
    if let Some(t) = st.uc_tx_mut() {
        t.failed = true;
        if t.cur.take().is_some() {
            complete_uc(qp, &t.slot, status::WR_FLUSH_ERR, 0);
        }
    }
    complete_sends(qp, st);
}

/// Rings the doorbell of an RC QP: admits posted WQEs, transmits what the
/// window allows. Context: process.
pub(crate) fn doorbell(qp: &Arc<QpCore>) {
    kick(qp);
    // In ERROR without connection state (it never reached RTR), nothing
    // consumes the send queue: flush what was posted, as IB requires.
    if qp.live.in_error() && qp.rc.lock().is_none() {
        qp.flush();
    }
}

/// The retransmit/RNR timer of `qp` fired. Context: softirq.
pub(crate) fn timer_fired(qp: Arc<QpCore>) {
    {
        let mut g = qp.rc.lock();
        if let Some(st) = g.as_deref_mut() {
            st.armed = None;
            if let Some(s) = &mut st.sender {
                if matches!(
                    s.req.on_timeout(now()),
                    crate::proto::rc::TimerOutcome::Retransmit
                ) {
                    qp.port.counters.add(RxCounter::RcTimeouts, 1);
                }
            }
        }
    }
    kick(&qp);
}

/// Generates what is due (WQEs from the ring, packets the window allows,
/// completions), then sends the QP's queue unless another context is at
/// it. Any context.
pub(super) fn kick(qp: &Arc<QpCore>) {
    txq::kick(qp, &qp.rc);
}

impl txq::Transmitter for RcState {
    fn generate(&mut self, qp: &Arc<QpCore>) {
        // Responses first (READ data may exceed one queue's worth), then
        // what the requester has due.
        respond(qp, self);
        pump(qp, self);
    }

    fn txq(&mut self) -> &mut TxQueue {
        &mut self.txq
    }

    fn sending(&mut self) -> &mut bool {
        &mut self.sending
    }

    fn defer(&mut self, qp: &Arc<QpCore>) {
        self.armed = None;
        crate::kext::timer::Timer::arm(qp, 0);
    }
}

/// Admits WQEs, builds packets into the queue, drains completions and
/// re-arms the timer. Under the `rc` lock.
///
/// Doorbells ([`super::ring::WorkQueue::settle_sender`]): the send ring
/// says `SENDER_ACTIVE` while the requester holds work, because an answer
/// or the timer will then come back here and admit whatever was posted
/// meanwhile; a stream of posts thus needs no system call.
fn pump(qp: &Arc<QpCore>, st: &mut RcState) {
    if st.uc.is_some() {
        uc_pump(qp, st);
        return;
    }
    let t = now();
    with_doorbell_flag(qp, st, |st| {
        let mtu = st.mtu;
        let Some(s) = st.sender.as_mut() else {
            return false;
        };
        admit_wqes(qp, s, mtu);
        transmit(qp, st, t);
        complete_sends(qp, st);
        st.sender.as_ref().is_some_and(|s| !s.req.is_empty())
    });
    let deadline = st.sender.as_ref().and_then(|s| s.req.next_deadline());
    if let Some(d) = deadline {
        if st.armed != Some(d) {
            st.armed = Some(d);
            crate::kext::timer::Timer::arm(qp, d.saturating_sub(t));
        }
    }
}

/// UC's sending: WQEs from the ring cut into packets while the queue has
/// room; a message completes once its last packet is queued. The flag
/// logic is RC's, with "holds work" meaning a message in progress (the
/// kick budget's timer comes back for the rest).
fn uc_pump(qp: &QpCore, st: &mut RcState) {
    with_doorbell_flag(qp, st, |st| {
        uc_transmit(qp, st);
        st.uc_tx().is_some_and(|t| t.cur.is_some())
    });
}

/// Runs `step`, which moves work from the send ring and says whether the
/// send side still holds work, and settles the doorbell flag on that;
/// once more if a WQE was posted while the flag was being cleared. Only
/// once more: a ring whose producer lies must not make this spin.
fn with_doorbell_flag(qp: &QpCore, st: &mut RcState, mut step: impl FnMut(&mut RcState) -> bool) {
    for last_look in [false, true] {
        let busy = step(st);
        if !qp.sq.settle_sender(busy) || last_look {
            break;
        }
    }
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
fn complete_uc(qp: &QpCore, slot: &[u8], code: u32, len: u32) {
    qp.complete_send(&SendWqe::decode(slot), code, len);
}

/// Builds the packets the requester has due into the queue.
fn transmit(qp: &QpCore, st: &mut RcState, t: u64) {
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
fn admit_wqes(qp: &QpCore, s: &mut Sender, mtu: IbMtu) {
    while s.req.len() < s.req.capacity() {
        let mut slot = [0u8; MAX_SEND_SLOT];
        let body = &mut slot[..s.slot_size.min(MAX_SEND_SLOT)];
        match qp.sq.peek(body) {
            Ok(true) => {}
            _ => return,
        }
        let hdr = SendWqe::decode(body);
        if local::is_local(hdr.opcode) && !s.req.is_empty() {
            return;
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
            continue;
        }
        let checked = check_wqe(qp, &hdr, body, mtu);
        let msg = match checked {
            Ok(m) => m,
            Err(_) => Message {
                id: 0,
                kind: MsgKind::Send,
                len: 0,
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
fn check_wqe(
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
        _ => return Err(Status::LocalQpOperation),
    };
    if w.send_flags & !send_flags::KNOWN != 0 {
        return Err(Status::LocalQpOperation);
    }
    let cap = qp.cap();
    let inline = w.send_flags & send_flags::INLINE != 0;
    let body = slot.get(SEND_WQE_HEADER_SIZE as usize..).unwrap_or(&[]);
    let len = if inline {
        if !kind.carries_payload()
            || w.inline_len > cap.max_inline_data
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
    Ok(Message { id: 0, kind, len })
}

/// A request packet to build (from `rc::TxPacket` or `uc::TxPacket`).
struct Out {
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

impl From<&uc::TxPacket> for Out {
    fn from(p: &uc::TxPacket) -> Self {
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
fn build_request(
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
    st.finish(qp, &mut skb).map_err(|_| None)?;
    Ok(skb)
}

/// A packet of `repr` with `payload` bytes of (unwritten) payload: the
/// skb with the headers in place.
fn new_packet(ndev: &NetDevice, repr: &packet::Repr, payload: usize) -> Option<TxSkb> {
    let total = repr.buffer_len(payload).ok()?;
    let mut skb = TxSkb::new(ndev, total).ok()?;
    repr.emit(skb.payload_mut(), payload).ok()?;
    Some(skb)
}

/// Writes the send CQ entries of the requester's finished WQEs.
fn complete_sends(qp: &QpCore, st: &mut RcState) {
    let Some(s) = st.sender.as_mut() else {
        return;
    };
    while let Some(c) = s.req.next_completion() {
        let w = SendWqe::decode(s.wqe(c.wqe));
        let code = wc_status(c.status);
        let signaled = qp.sq_sig_all() || w.send_flags & send_flags::SIGNALED != 0;
        if signaled || code != status::SUCCESS {
            let cqe = Cqe {
                wr_id: w.wr_id,
                status: code,
                opcode: wc_opcode_of(&c),
                byte_len: c.len,
                qp_num: qp.qpn(),
                ..Default::default()
            };
            // A full CQ loses the completion (reported as an overflow
            // event once that exists).
            let _ = qp.send_cq.push(&cqe, false);
        }
    }
}

fn wc_opcode_of(c: &Completion) -> u32 {
    match c.kind {
        MsgKind::Send | MsgKind::SendImm | MsgKind::SendInv => wc_opcode::SEND,
        MsgKind::Write | MsgKind::WriteImm => wc_opcode::RDMA_WRITE,
        MsgKind::Read => wc_opcode::RDMA_READ,
        MsgKind::CmpSwap => wc_opcode::COMP_SWAP,
        MsgKind::FetchAdd => wc_opcode::FETCH_ADD,
    }
}

fn wc_status(s: Status) -> u32 {
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

/// A receive completion on the QP's receive CQ.
fn complete_recv(qp: &QpCore, wr_id: u64, st: u32, op: u32, len: u32, extra: Option<(u32, u32)>) {
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

/// What `rx.rs` parsed of an RC packet.
pub(crate) struct RxPacket<'a> {
    pub(crate) skb: &'a SkBuff,
    /// The sender's IP address as a GID.
    pub(crate) src: [u8; 16],
    /// BTH and extension headers (at least `header_len` bytes).
    pub(crate) head: &'a [u8],
    pub(crate) opcode: Opcode,
    pub(crate) psn: Psn,
    pub(crate) ack_req: bool,
    pub(crate) solicited: bool,
    /// Payload bytes in the skb.
    pub(crate) payload: core::ops::Range<usize>,
}

impl RxPacket<'_> {
    fn ext(&self, h: ExtHeader) -> Option<&[u8]> {
        let info = self.opcode.info().ok()?;
        let at = info.offset_of(h)?;
        self.head.get(at..at + h.size())
    }

    fn reth(&self) -> Option<reth::Repr> {
        let b = self.ext(ExtHeader::Reth)?;
        Some(reth::Repr::parse(&reth::Header::new_checked(b).ok()?))
    }

    fn aeth(&self) -> Option<aeth::Repr> {
        let b = self.ext(ExtHeader::Aeth)?;
        Some(aeth::Repr::parse(&aeth::Header::new_checked(b).ok()?))
    }

    fn immdt(&self) -> Option<u32> {
        let b = self.ext(ExtHeader::ImmDt)?;
        let h = immdt::Header::new_checked(b).ok()?;
        Some(u32::from_ne_bytes(h.imm_data()))
    }

    fn ieth(&self) -> Option<u32> {
        let b = self.ext(ExtHeader::Ieth)?;
        Some(ieth::Repr::parse(&ieth::Header::new_checked(b).ok()?).rkey)
    }

    fn atomic_eth(&self) -> Option<atomic::Repr> {
        let b = self.ext(ExtHeader::AtomicEth)?;
        Some(atomic::Repr::parse(&atomic::Header::new_checked(b).ok()?))
    }

    fn atomic_orig(&self) -> Option<u64> {
        let b = self.ext(ExtHeader::AtomicAckEth)?;
        Some(atomic::AckRepr::parse(&atomic::AckHeader::new_checked(b).ok()?).orig)
    }
}

/// Why `rx.rs` counts an RC packet as dropped.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum RcDrop {
    /// The QP is not connected (or not RC).
    NotConnected,
    /// Malformed headers for the opcode.
    Malformed,
    /// A duplicate, stale or out-of-sequence packet (answered as the
    /// protocol says, but nothing delivered), or a UC packet of a lost
    /// message.
    Sequence,
    /// A UC SEND that found no receive WQE (UC has no RNR).
    NoRecv,
}

/// An RC packet for `qp`, whose keys are looked up through `mrs`.
/// Context: softirq.
pub(crate) fn receive(
    qp: &Arc<QpCore>,
    atomics: &crate::kext::sync::SpinLockIrq<()>,
    p: &RxPacket<'_>,
    mrs: &mut MrMemo<'_>,
) -> core::result::Result<(), RcDrop> {
    let info = p.opcode.info().map_err(|_| RcDrop::Malformed)?;
    let is_response = info.direction == crate::proto::wire::opcode::Direction::Response;
    let (r, pass_due) = {
        let mut g = qp.rc.lock();
        let st = g.as_deref_mut().ok_or(RcDrop::NotConnected)?;
        // A connected QP hears only its peer (as rxe checks): a third
        // party must not reach it by guessing a QPN and a PSN.
        if p.src != st.path.av.dgid {
            return Err(RcDrop::NotConnected);
        }
        if st.uc.is_some() {
            (on_uc_packet(qp, st, p, mrs), true)
        } else if is_response {
            (on_response(qp, st, p, mrs), true)
        } else {
            let r = on_request(qp, st, atomics, p, mrs);
            // A request that owes no answer (a WRITE's or SEND's packet
            // between coalesced ACKs, most of a message) leaves the pass
            // over the QP nothing to do: the requester side is driven by
            // its own answers, its timer and doorbells (`pump`), not by
            // the peer's requests. A QP in error, or one a fatal request
            // just put there (its requester flushed), needs the pass: it
            // clears the doorbell flag, so that what is posted from now on
            // is flushed at once.
            let due = st.receiver.resp.has_response()
                || st.txq.len() > 0
                || st.is_error()
                || qp.live.in_error();
            (r, due)
        }
    };
    if pass_due {
        kick(qp);
    } else {
        qp.port.counters.add(RxCounter::RcPassesSkipped, 1);
    }
    r
}

/// A UC packet: placed whole-message-or-nothing, never answered.
fn on_uc_packet(
    qp: &QpCore,
    st: &mut RcState,
    p: &RxPacket<'_>,
    mrs: &mut MrMemo<'_>,
) -> core::result::Result<(), RcDrop> {
    let req = uc::Request {
        psn: p.psn,
        opcode: p.opcode,
        payload_len: p.payload.len() as u32,
        reth: p.reth(),
    };
    let u = st.uc.as_mut().ok_or(RcDrop::NotConnected)?;
    let plan = match u.rx.on_packet(&req) {
        uc::Action::Execute(plan) => plan,
        uc::Action::Drop => return Err(RcDrop::Sequence),
    };
    let placed = if plan.needs_recv {
        take_recv(qp, st)
    } else {
        Ok(())
    }
    .and_then(|()| match plan.kind {
        MsgKind::Write | MsgKind::WriteImm => place_write(qp, st, p, mrs, plan.va, plan.rkey),
        _ => place_send(qp, st, p, mrs, plan.offset),
    });
    let u = st.uc.as_mut().ok_or(RcDrop::NotConnected)?;
    match placed {
        Ok(()) => {
            u.rx.commit(&plan);
            if plan.completes_recv {
                finish_recv(qp, st, p, plan.kind, plan.offset + plan.len);
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

/// A response for the requester: ACK/NAK, READ data, atomic ACK.
fn on_response(
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

/// A request for the responder.
fn on_request(
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
        Action::Error(_) => {
            enter_error(qp, st);
            return Err(RcDrop::Malformed);
        }
    };
    match execute(qp, st, atomics, p, mrs, &plan) {
        Ok(orig) => {
            let _ = st.receiver.resp.commit(&plan, orig);
            if plan.completes_recv {
                finish_recv(qp, st, p, plan.kind, plan.offset + plan.len);
            }
        }
        Err(Refuse::Rnr) => {
            qp.port.counters.add(RxCounter::RcRnrNaks, 1);
            let _ = st.receiver.resp.rnr(&plan);
        }
        Err(Refuse::Nak(code)) => {
            let _ = st.receiver.resp.reject(&plan, code);
            fail_recv(qp, st, code);
        }
    }
    Ok(())
}

enum Refuse {
    Rnr,
    Nak(NakCode),
}

/// Carries out an in-sequence request; the atomic's original value.
fn execute(
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
            // of the QP's PD; anything else is an invalid request).
            place_send(qp, st, p, mrs, plan.offset)?;
            let rkey = p.ieth().ok_or(Refuse::Nak(NakCode::InvalidRequest))?;
            mrs.get(rkey)
                .ok_or(Refuse::Nak(NakCode::InvalidRequest))?
                .invalidate(qp.pd, rkey)
                .map_err(|_| Refuse::Nak(NakCode::InvalidRequest))?;
            Ok(0)
        }
        MsgKind::Send | MsgKind::SendImm => place_send(qp, st, p, mrs, plan.offset).map(|()| 0),
        MsgKind::Write | MsgKind::WriteImm => {
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
    }
}

/// Takes a receive WQE for a SEND (or a WRITE with immediate), unless one
/// is held already (a SEND in progress, or one UC abandoned).
fn take_recv(qp: &QpCore, st: &mut RcState) -> core::result::Result<(), Refuse> {
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
fn place_send(
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

/// Copies a WRITE packet's payload to `va` under `rkey`.
fn place_write(
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

/// The MR `rkey` names (looked up through `mrs`), checked for `len`
/// bytes at `va` with `rights` (and the QP granting them); its offset.
fn remote_mr<'m>(
    qp: &QpCore,
    st: &RcState,
    mrs: &'m mut MrMemo<'_>,
    rkey: u32,
    va: u64,
    len: usize,
    rights: AccessFlags,
) -> core::result::Result<(&'m mr::MrCore, u64), Refuse> {
    if !st.access.contains(rights) {
        return Err(Refuse::Nak(NakCode::RemoteAccessError));
    }
    let mr = mrs
        .get(rkey)
        .ok_or(Refuse::Nak(NakCode::RemoteAccessError))?;
    match mr.check(qp.pd, va, len, rights) {
        Ok(off) => Ok((mr, off)),
        Err(MrError::Protection | MrError::Bounds) => Err(Refuse::Nak(NakCode::RemoteAccessError)),
    }
}

/// The last packet of a SEND or WRITE with immediate: the receive WQE
/// completes.
fn finish_recv(qp: &QpCore, st: &mut RcState, p: &RxPacket<'_>, kind: MsgKind, len: u32) {
    if !st.receiver.recv_held {
        return;
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
    let _ = qp.recv_cq.push(&cqe, p.solicited);
}

/// A NAK ended the message in progress: its receive WQE completes in
/// error.
fn fail_recv(qp: &QpCore, st: &mut RcState, code: NakCode) {
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
fn respond(qp: &QpCore, st: &mut RcState) {
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
fn ack_counter(aeth: &aeth::Repr, sent: bool) -> RxCounter {
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
            // The MR may have gone since the READ was accepted: then no
            // answer, and the requester's retries run out.
            let mut mrs = MrMemo::new(&qp.mrs);
            let (mr, off) =
                remote_mr(qp, st, &mut mrs, rkey, va, n, AccessFlags::REMOTE_READ).ok()?;
            let mut skb = new_packet(ndev, &repr, n)?;
            {
                let mut pkt = packet::Packet::new_checked(skb.payload_mut()).ok()?;
                let data = pkt.payload_mut().get_mut(..n)?;
                if n > 0 {
                    mr.read(off, data).ok()?;
                }
            }
            skb
        }
    };
    let mut skb = skb;
    st.finish(qp, &mut skb).ok()?;
    Some(skb)
}
