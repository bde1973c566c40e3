// SPDX-License-Identifier: GPL-2.0

//! RC on the wire: the kernel side of [`crate::proto::rc`]. The state
//! machines decide; this module moves bytes between packets, memory
//! regions, rings and completion queues, and keeps the timer.
//!
//! By role: this file holds a QP's connection state ([`RcState`]), the
//! error state, the doorbell, the timer and the pass over the QP
//! (`pump`), and the receive dispatch ([`receive`]); the requester is in
//! `rc/requester.rs`, the responder (where ACKs are built) in
//! `rc/responder.rs`, UC in `rc/uc.rs`.
//!
//! # Contexts and locking
//!
//! One QP's RC state ([`RcState`]) is driven from the doorbell (process
//! context), the receive softirq (requests and responses) and the
//! retransmit timer (softirq), under the QP's RC lock (`QpCore::rc`), a
//! bottom-half lock: no hard-irq context takes it, and routing, which may
//! disable and re-enable softirqs itself (IPv6 does), runs under it. Packets are built
//! under the lock (the state machines say what goes in them) into the
//! QP's small transmit queue, and handed to IP after the lock is dropped,
//! so the lock is never held across the IP stack. One context at a time
//! sends a QP's queue (`RcState::sending`); a context that finds another
//! sending leaves its packets to it. So packets leave in the order they
//! were built, which is PSN order. The lock is taken with the QP's CQs
//! held ([`HeldCqs`]): the completions written under it reach their
//! owner, and the CQ's completion handler is called, once it is dropped,
//! since a kernel consumer's handler may post to the QP, which takes the
//! lock again.
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

use super::cnp;
use super::counters::RxCounter;
use super::mr::MrMemo;
use super::qp::{HeldCqs, QpCore};
use super::ring::MAX_RECV_SLOT;
use super::tx;
use super::txq::{self, TxQueue};
use crate::abi::{status, wc_opcode, RecvWqe};
use crate::ib::{AccessFlags, AddressVector, QpEvent};
use crate::net::{
    skb::{SkBuff, TxSkb},
    NetDeviceRef, RouteCache,
};
use crate::proto::congestion::{CnpPacer, Window};
use crate::proto::{
    mtu::IbMtu,
    psn::Psn,
    rc::{Config, Resource, Responder},
    uc as proto_uc,
    wire::{
        aeth::{self},
        atomic, bth, feth, ieth, immdt,
        opcode::{ExtHeader, Opcode},
        reth,
    },
};
use kernel::{prelude::*, sync::Arc};

mod requester;
mod responder;
mod uc;

use requester::{admit_wqes, complete_sends, on_response, transmit, Sender};
use responder::{complete_recv, on_request, respond, Receiver};
use uc::{complete_uc, on_uc_packet, uc_pump, UcSide, UcTx};

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

/// The send side a QP gets at RTS. One per QP, mostly RC's: a UC QP
/// carrying RC's size costs a few hundred bytes once, where boxing RC's
/// would cost an indirection on every packet.
#[allow(clippy::large_enum_variant)]
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
                sender: proto_uc::Sender::new(a.sq_psn, a.mtu),
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
    /// CNPs to the peer for requests that arrived CE-marked.
    cnps: CnpPacer,
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

/// A request of the peer arrived CE-marked: a CNP to its QP, along the
/// connection's path, unless the peer had one within the interval.
fn answer_congestion(qp: &QpCore, st: &mut RcState) {
    if !st.cnps.due(now()) {
        return;
    }
    let Some(mut skb) = st
        .ndev
        .as_deref()
        .and_then(|n| cnp::build(n, st.path.dest_qpn))
    else {
        return;
    };
    if st.finish(qp, &mut skb, false).is_ok() {
        st.txq.push(skb);
        qp.port.counters.add(RxCounter::CnpsSent, 1);
    }
}

/// A CNP for this QP from `src`: its requests met a congested queue. Only
/// the connection's peer speaks for its path; another sender's CNP is
/// stray (as any packet of a third party to a connected QP is). Context:
/// softirq.
pub(crate) fn congestion_notified(
    held: &HeldCqs,
    src: &[u8; 16],
) -> core::result::Result<(), RxCounter> {
    let qp = held.qp();
    let mut g = qp.rc().ok_or(RxCounter::DropCnpStray)?.lock(held);
    let st = g.as_deref_mut().ok_or(RxCounter::DropCnpStray)?;
    if *src != st.path.av.dgid {
        return Err(RxCounter::DropCnpStray);
    }
    // UC has no window to cut: a CNP for a UC QP is taken and counted.
    if let Some(s) = st.sender.as_mut() {
        if crate::kext::params::cc_enabled() && s.req.congestion_notified() {
            qp.port.counters.add(RxCounter::CcCnpCuts, 1);
        }
    }
    qp.port.counters.add(RxCounter::CnpsReceived, 1);
    Ok(())
}

/// The requester's congestion window, for `rdma resource show qp -d`:
/// none for UC (no window) or a QP not yet in RTR.
pub(crate) fn window(held: &HeldCqs) -> Option<Window> {
    let g = held.qp().rc()?.lock(held);
    let st = g.as_deref()?;
    st.sender.as_ref().map(|s| *s.req.congestion())
}

/// The current time for the state machines.
fn now() -> u64 {
    crate::kext::timer::now_ns()
}

impl RcState {
    /// Routes a packet of the connection (`tx::finish`) along its path,
    /// through its cached route, numbered in the QP's sequence; `ect`: as
    /// an ECN-capable one (the requester's, with congestion control on).
    fn finish(&self, qp: &QpCore, skb: &mut TxSkb, ect: bool) -> core::result::Result<(), u32> {
        tx::finish(
            skb,
            &self.path.av,
            self.path.sport,
            Some(&self.route),
            qp.next_ip_id(),
            ect,
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
                    rx: proto_uc::Receiver::new(a.rq_psn, a.mtu),
                    tx: None,
                }),
                txq: TxQueue::new(),
                sending: false,
                armed: None,
                cnps: CnpPacer::NEW,
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

    /// Whether the send side has started (RTS was reached): else nothing
    /// consumes the send queue.
    fn is_sending_side(&self) -> bool {
        self.sender.is_some() || self.uc_tx().is_some()
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
/// Context: any (under the QP's RC lock).
pub(crate) fn enter_error(qp: &QpCore, st: &mut RcState) {
    // A responder in error already (a fatal request) keeps the answers
    // it queued before that request and the NAK that reports it: they
    // tell the requester what was executed and why the rest was not
    // (without the NAK it would retry until RETRY_EXC_ERR). A modify to
    // ERROR or RESET then detaches the QP from the netdev, which drops
    // them.
    if !st.receiver.resp.is_error() {
        st.receiver.resp.set_error();
    }
    // The send side first: a WQE that failed (a NAK, retries exhausted)
    // completes with its error before any flush, so that a consumer
    // polling one CQ for both sides sees why the QP failed first, as on
    // rxe (rdma-core's tests poll for it).
    if let Some(s) = &mut st.sender {
        s.req.flush();
    }
    if let Some(t) = st.uc_tx_mut() {
        t.failed = true;
        if t.cur.take().is_some() {
            complete_uc(qp, &t.slot, status::WR_FLUSH_ERR, 0);
        }
    }
    // Completions the CQ cannot take are lost either way: the QP is
    // failing already.
    let _ = complete_sends(qp, st);
    if st.receiver.recv_held {
        st.receiver.recv_held = false;
        let w = RecvWqe::decode(&st.receiver.recv);
        complete_recv(qp, w.wr_id, status::WR_FLUSH_ERR, wc_opcode::RECV, 0, None);
    }
}

/// The data path found an error that ends the connection: a fatal
/// request (the responder's NAK is queued), a work request that failed
/// (its error completion is due), a completion the QP could not write.
/// The whole QP enters the error state at once (IBTA 10.3.1), not only the
/// side that failed: the send side stops, the work of both sides and
/// what is left in both rings completes flushed, and the owner gets the
/// affiliated async event (`event`; none for a failed work request, whose
/// error completion reports it). Once: a QP in error already is left as
/// it is. Context: any (under the QP's RC lock).
pub(crate) fn fail(qp: &QpCore, st: &mut RcState, event: Option<QpEvent>) {
    if qp.live.in_error() {
        return;
    }
    enter_error(qp, st);
    qp.fail(event);
}

/// A CQ of the QP lost a completion (its own or another QP's): the QP
/// enters the error state too.
fn fail_on_lost_completion(qp: &QpCore, st: &mut RcState) {
    if qp.send_cq.overflowed() || qp.recv_cq.overflowed() {
        fail(qp, st, Some(QpEvent::Fatal));
    }
}

/// Rings the doorbell of an RC QP: admits posted WQEs, transmits what the
/// window allows. Context: process.
pub(crate) fn doorbell(qp: &Arc<QpCore>) {
    let held = qp.hold_cqs();
    kick(&held);
    // In ERROR without a send side (it never reached RTS: ib_drain_qp's
    // WR to a QP whose RTR-to-RTS step failed, as rdma_cm's accept can),
    // nothing consumes the send queue: flush what was posted, as IB
    // requires, or the drain waits for ever.
    let unsent = qp.rc().map_or(true, |c| {
        c.lock(&held)
            .as_deref()
            .map_or(true, |st| !st.is_sending_side())
    });
    if qp.live.in_error() && unsent {
        qp.flush();
    }
}

/// The retransmit/RNR timer of `qp` fired. Context: softirq.
pub(crate) fn timer_fired(qp: Arc<QpCore>) {
    let held = HeldCqs::new(qp);
    let qp = held.qp();
    if let Some(c) = qp.rc() {
        let mut g = c.lock(&held);
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
    kick(&held);
}

/// Generates what is due (WQEs from the ring, packets the window allows,
/// completions), then sends the QP's queue unless another context is at
/// it; `held` holds the QP's CQs. Any context.
pub(super) fn kick(held: &HeldCqs) {
    if let Some(c) = held.qp().rc() {
        txq::kick(held, c);
    }
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

    /// RC: no; its packets leave on answers, doorbells and its timer, all
    /// of which kick. UC: yes (its sender has no answers to drive it).
    fn regenerate_after_send(&self) -> bool {
        self.uc.is_some()
    }
}

/// Admits WQEs, builds packets into the queue, drains completions and
/// re-arms the timer. Under the QP's RC lock.
///
/// Doorbells ([`super::ring::WorkQueue::settle_sender`]): the send ring
/// says `SENDER_ACTIVE` while the requester holds work, because an answer
/// or the timer will then come back here and admit whatever was posted
/// meanwhile; a stream of posts thus needs no system call.
fn pump(qp: &Arc<QpCore>, st: &mut RcState) {
    fail_on_lost_completion(qp, st);
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
        if complete_sends(qp, st).is_err() {
            fail(qp, st, Some(QpEvent::Fatal));
        } else if st.sender.as_ref().is_some_and(|s| s.req.is_error()) {
            // A work request failed: its error completion is written, and
            // the rest of the QP follows it into the error state.
            fail(qp, st, None);
        }
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
    /// It arrived marked Congestion Experienced (`cnp::ce_marked`).
    pub(crate) ce: bool,
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

    fn feth(&self) -> Option<feth::Repr> {
        let b = self.ext(ExtHeader::Feth)?;
        Some(feth::Repr::parse(&feth::Header::new_checked(b).ok()?))
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

/// An RC packet for the QP whose CQs `held` holds; keys are looked up
/// through `mrs`. Context: softirq.
pub(crate) fn receive(
    held: &HeldCqs,
    atomics: &crate::kext::sync::SpinLockIrq<()>,
    p: &RxPacket<'_>,
    mrs: &mut MrMemo<'_>,
) -> core::result::Result<(), RcDrop> {
    let qp = held.qp();
    let info = p.opcode.info().map_err(|_| RcDrop::Malformed)?;
    let is_response = info.direction == crate::proto::wire::opcode::Direction::Response;
    let (r, pass_due) = {
        let mut g = qp.rc().ok_or(RcDrop::NotConnected)?.lock(held);
        let st = g.as_deref_mut().ok_or(RcDrop::NotConnected)?;
        // A connected QP hears only its peer (as rxe checks): a third
        // party must not reach it by guessing a QPN and a PSN.
        if p.src != st.path.av.dgid {
            return Err(RcDrop::NotConnected);
        }
        fail_on_lost_completion(qp, st);
        if st.uc.is_some() {
            (on_uc_packet(qp, st, p, mrs), true)
        } else if is_response {
            (on_response(qp, st, p, mrs), true)
        } else {
            let r = on_request(qp, st, atomics, p, mrs);
            if p.ce {
                answer_congestion(qp, st);
            }
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
        kick(held);
    } else {
        qp.port.counters.add(RxCounter::RcPassesSkipped, 1);
    }
    r
}
