// SPDX-License-Identifier: GPL-2.0

//! XUD on the wire (Documentation/xud.rst): the kernel side of
//! [`crate::proto::xud`]. The state machines decide; this module keeps
//! the per-peer table, moves bytes between packets, memory regions, rings
//! and completion queues, and keeps the QP's timer. Creation, the state
//! machine and the parameters are in `qp.rs`.
//!
//! # Contexts and locking
//!
//! One XUD QP's state ([`XudState`]: every peer, both directions) is
//! driven from the doorbell (process context), the receive softirq and
//! the QP's timer (softirq), under the QP's XUD lock (`QpCore::xud`), a
//! bottom-half lock as RC's. Packets are built under it into the QP's transmit queue
//! and handed to IP after it is dropped, one context at a time, as RC
//! does (`rc.rs`, "Contexts and locking"). xud.rst describes a lock per
//! peer; one per QP is what this first version takes: simpler, and the
//! same as RC's (a QP's packets are handled on one CPU at a time).
//!
//! # Per packet
//!
//! Send: the WQE is copied out of the ring into the QP's pool when it is
//! posted (the ring slot is free again at once), queued to its
//! destination, and cut into packets as its stream's window allows; each
//! packet carries BTH, DETH, XETH, XCK, RETH (and ImmDt), its payload copied
//! once from the MR pages. Receive: headers parsed once in `rx.rs`, rule
//! 1, the peer found or made (rules 2 and 3), the stream's check, a
//! receive claimed (copied out of the ring into the QP's pool of claimed
//! receives), the payload copied once from the skb to its place, commit,
//! ACK. Answers: the XACK's base and `sack` to the destination's stream.
//!
//! # Files
//!
//! Split by role, as `proto/xud/` is. This file holds [`XudState`], its
//! creation, and what the rest of the driver calls: the doorbell,
//! [`kick`] and the pump it runs, the timer's entry, [`receive`] with its
//! [`RxPacket`], and [`flush`]. In `xud/`:
//!
//! - `peers.rs`: the peer table's entries (both directions of each, in
//!   use or parked) and the list of the peers at work;
//! - `pool.rs`: the pools of saved send WQEs and claimed receives, and a
//!   destination's queue of posts, linked through the first;
//! - `sender.rs`: posts checked, queued and admitted to their streams,
//!   data packets built, send completions;
//! - `receiver.rs`: data packets checked, placed and committed, receives
//!   claimed and completed;
//! - `answers.rs`: ACKs and NAKs built, and those received taken;
//! - `timers.rs`: the QP's timer, its deadlines and the reclaim scan.

mod answers;
mod peers;
mod pool;
mod receiver;
mod sender;
mod timers;

use self::answers::{on_answer, on_challenge};
use self::peers::{BusyList, Peer, PeerKey};
use self::pool::Pool;
use self::receiver::{complete_recv_status, on_data};
use self::sender::{admit, transmit};
use self::timers::{arm, on_timer, RECLAIM_PERIOD_NS};
use super::counters::RxCounter;
use super::mr::MrMemo;
use super::qp::{HeldCqs, QpCore};
use super::ring::MAX_RECV_SLOT;
use super::txq::{self, TxQueue};
use crate::abi::{status, RecvWqe, SendWqe, XudParams};
use crate::net::skb::SkBuff;
use crate::proto::{
    psn::Psn,
    wire::{deth, opcode::Opcode},
    xud::{
        self,
        cookie::{ChallengeLimit, CookieKey},
        sender::SendMsg,
        SendStatus,
    },
};
use kernel::{prelude::*, rbtree::RBTree, sync::Arc};

/// One XUD QP's state, from creation to destruction.
pub(crate) struct XudState {
    /// This QP's incarnation (rule 1).
    inc: u32,
    /// The key of this QP's stream cookies, random, and the bound on its
    /// challenges (xud.rst, "Stream cookies").
    cookie_key: CookieKey,
    challenges: ChallengeLimit,
    params: XudParams,
    cfg: xud::sender::Config,
    min_rnr_timer: u8,
    /// The peer entries, each in its tree node (one allocation).
    peers: RBTree<PeerKey, Peer>,
    /// Peers with a receiving state, and with a sending state: each at
    /// most `max_peers`.
    recv_peers: u32,
    send_peers: u32,
    /// The peers at work.
    busy: BusyList,
    /// Where in `busy` the last transmit pass stopped (round robin).
    rr_next: usize,
    wqes: Pool,
    /// The messages the streams are sending, at their WQEs' slots in
    /// `wqes`: one table per QP, not 16 messages per stream.
    msgs: KVVec<SendMsg>,
    recvs: Pool,
    txq: TxQueue,
    sending: bool,
    armed: Option<u64>,
    next_reclaim: u64,
    /// A stream could not be allocated for queued work: try again soon.
    starved: bool,
}

/// The current time for the state machines.
fn now() -> u64 {
    crate::kext::timer::now_ns()
}

/// A random non-zero 64-bit number (stream incarnations: the secret an
/// off-path forger must guess).
fn nonzero_u64() -> u64 {
    loop {
        let v = crate::kext::random::u64();
        if v != 0 {
            return v;
        }
    }
}

impl XudState {
    /// The state of a new XUD QP with `send_depth` send WQEs of
    /// `send_slot` bytes and `recv_depth` receives. Context: process.
    pub(crate) fn new(
        params: XudParams,
        send_depth: u32,
        send_slot: u32,
        recv_depth: u32,
    ) -> Result<KBox<Self>> {
        Ok(KBox::new(
            Self {
                inc: (nonzero_u64() as u32).max(1),
                cookie_key: CookieKey::new(crate::kext::random::u64(), crate::kext::random::u64()),
                challenges: ChallengeLimit::new(),
                params,
                cfg: xud::sender::Config {
                    ack_every: params.ack_every,
                    // The window law as `cc` is when the QP is made.
                    congestion: crate::kext::params::cc_enabled(),
                    ..xud::sender::Config::DEFAULT
                },
                min_rnr_timer: 12,
                peers: RBTree::new(),
                recv_peers: 0,
                send_peers: 0,
                busy: BusyList::new(),
                rr_next: 0,
                wqes: Pool::new(send_depth.max(1), send_slot as usize)?,
                msgs: KVVec::from_elem(SendMsg::FREE, send_depth.max(1) as usize, GFP_KERNEL)?,
                recvs: Pool::new(recv_depth.max(1), MAX_RECV_SLOT)?,
                txq: TxQueue::new(),
                sending: false,
                armed: None,
                next_reclaim: now() + RECLAIM_PERIOD_NS,
                starved: false,
            },
            GFP_KERNEL,
        )?)
    }

    /// modify_qp set the retransmission attributes.
    pub(crate) fn set_attrs(&mut self, timeout: u8, retry_cnt: u8, rnr_retry: u8, min_rnr: u8) {
        self.cfg.timeout = timeout;
        self.cfg.retry_cnt = retry_cnt;
        self.cfg.rnr_retry = rnr_retry;
        self.min_rnr_timer = min_rnr;
        let cfg = self.cfg;
        // Parked streams take the QP's configuration when taken back.
        for p in self.peers.values_mut() {
            if let Some(s) = p.send_active() {
                s.set_config(cfg);
            }
        }
    }
}

/// The doorbell of an XUD QP (and its timer, and the transmit budget's
/// wake-up). Any context but hard irq.
pub(crate) fn post_send(qp: &Arc<QpCore>) {
    kick(&qp.hold_cqs());
}

/// The QP's timer fired: retransmissions, RNR waits, owed ACKs, the
/// reclaim scan. Context: softirq.
pub(crate) fn timer_fired(qp: Arc<QpCore>) {
    let held = HeldCqs::new(qp);
    let qp = held.qp();
    if let Some(x) = qp.xud() {
        let mut g = x.lock(&held);
        if let Some(st) = g.as_deref_mut() {
            st.armed = None;
            on_timer(qp, st);
        }
    }
    kick(&held);
}

/// Generates what is due and sends the QP's queue unless another context
/// is at it (see [`txq::kick`]); `held` holds the QP's CQs. Any context
/// but hard irq.
pub(crate) fn kick(held: &HeldCqs) {
    if let Some(x) = held.qp().xud() {
        txq::kick(held, x);
    }
}

impl txq::Transmitter for XudState {
    fn generate(&mut self, qp: &Arc<QpCore>) {
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

/// Admits posted WQEs, builds due packets, writes completions, re-arms
/// the timer. Under the QP's XUD lock.
fn pump(qp: &Arc<QpCore>, st: &mut XudState) {
    let t = now();
    for last_look in [false, true] {
        // Busy only while the ring holds entries the WQE pool has no room
        // for: a completion frees a slot and comes back here. Work queued
        // to destinations does not hold up posts to others.
        let busy = admit(qp, st, t);
        transmit(qp, st, t);
        // Doorbells: `WorkQueue::settle_sender`. Only one more look: a
        // ring whose producer lies must not make this spin.
        if !qp.sq.settle_sender(busy) || last_look {
            break;
        }
    }
    st.busy.prune(&mut st.peers);
    arm(qp, st, t);
}

/// The QP is destroyed or reset: every message fails, posted and claimed
/// work completes flushed. Under the QP's XUD lock.
pub(crate) fn flush(qp: &QpCore, st: &mut XudState) {
    let XudState {
        peers,
        wqes,
        msgs,
        recvs,
        txq,
        ..
    } = st;
    for peer in peers.values_mut() {
        while let Some(h) = peer.queue.pop(wqes) {
            let w = SendWqe::decode(wqes.get(h));
            qp.complete_send(&w, status::WR_FLUSH_ERR, 0);
            wqes.give(h);
        }
        if let Some(s) = peer.send_active() {
            s.abort(msgs, SendStatus::RetryExceeded);
            while let Some((h, _)) = s.next_completion(msgs) {
                let w = SendWqe::decode(wqes.get(h));
                qp.complete_send(&w, status::WR_FLUSH_ERR, 0);
                wqes.give(h);
            }
        }
        if let Some(r) = peer.recv_active() {
            r.abandon_all();
            while let Some(d) = r.next_done() {
                let w = RecvWqe::decode(recvs.get(d.recv));
                complete_recv_status(qp, w.wr_id, status::WR_FLUSH_ERR);
                recvs.give(d.recv);
            }
        }
    }
    while txq.pop().is_some() {}
}

/// What `rx.rs` parsed of an XUD packet.
pub(crate) struct RxPacket<'a> {
    pub(crate) skb: &'a SkBuff,
    /// The IP and UDP headers as received.
    pub(crate) ip: &'a [u8],
    pub(crate) src: [u8; 16],
    /// The address it was sent to (ours), as a GID.
    pub(crate) dst: [u8; 16],
    pub(crate) head: &'a [u8],
    pub(crate) opcode: Opcode,
    pub(crate) psn: Psn,
    pub(crate) ack_req: bool,
    pub(crate) solicited: bool,
    pub(crate) payload: core::ops::Range<usize>,
    /// It arrived marked Congestion Experienced (`cnp::ce_marked`).
    pub(crate) ce: bool,
}

impl RxPacket<'_> {
    fn ext(&self, h: crate::proto::wire::opcode::ExtHeader) -> Option<&[u8]> {
        let info = self.opcode.info().ok()?;
        let at = info.offset_of(h)?;
        self.head.get(at..at + h.size())
    }
}

/// A CNP for this QP from `src` to our `dst`: the streams this QP sends
/// from `dst` to `src`'s QPs met a congested queue. A CNP does not name
/// the QP that sends it, so each of them takes it; streams to any other
/// address are not touched, which is all a forged CNP can reach (the
/// packet's checks are `rx.rs`'s, as any packet's: length, ICRC, QPN).
/// Context: softirq.
pub(crate) fn congestion_notified(
    held: &HeldCqs,
    src: &[u8; 16],
    dst: &[u8; 16],
) -> core::result::Result<(), RxCounter> {
    let qp = held.qp();
    let mut g = qp.xud().ok_or(RxCounter::DropCnpStray)?.lock(held);
    let st = g.as_deref_mut().ok_or(RxCounter::DropCnpStray)?;
    let from = PeerKey {
        gid: *src,
        qpn: 0,
        local: [0; 16],
    };
    // Keys order by address first: the peers at `src` are one run.
    let mut cursor = st.peers.cursor_lower_bound(&from);
    let (mut streams, mut cuts) = (0u64, 0u64);
    while let Some(mut c) = cursor {
        let (key, peer) = c.current_mut();
        if key.gid != *src {
            break;
        }
        if key.local == *dst {
            if let Some(s) = peer.send_active() {
                streams += 1;
                cuts += u64::from(s.congestion_notified());
            }
        }
        cursor = c.move_next();
    }
    if streams == 0 {
        return Err(RxCounter::DropCnpStray);
    }
    qp.port.counters.add(RxCounter::CnpsReceived, 1);
    qp.port.counters.add(RxCounter::CcCnpCuts, cuts);
    Ok(())
}

/// An XUD QP's sending streams at a glance, for `rdma resource show qp
/// -d`.
#[derive(Default)]
pub(crate) struct SendSummary {
    /// Sending streams in use (parked ones hold no window).
    pub(crate) streams: u32,
    /// Of those, the stalled ones
    /// ([`is_stalled`](crate::proto::xud::sender::SendStream::is_stalled)).
    pub(crate) stalled: u32,
    /// Packets in the network, all streams together.
    pub(crate) in_network: u32,
    /// The smallest and the largest of their congestion windows (packets;
    /// 0 without a stream).
    pub(crate) window_min: u32,
    pub(crate) window_max: u32,
}

/// The [`SendSummary`] of the XUD QP whose CQs `held` holds; none for
/// another QP type or one not yet in RTS.
pub(crate) fn send_summary(held: &HeldCqs) -> Option<SendSummary> {
    let g = held.qp().xud()?.lock(held);
    let st = g.as_deref()?;
    let mut sum = SendSummary::default();
    for s in st.peers.values().filter_map(Peer::send_ref) {
        let w = s.congestion().cwnd();
        sum.window_min = if sum.streams == 0 {
            w
        } else {
            sum.window_min.min(w)
        };
        sum.window_max = sum.window_max.max(w);
        sum.streams += 1;
        sum.stalled += u32::from(s.is_stalled());
        sum.in_network = sum.in_network.saturating_add(s.in_network());
    }
    Some(sum)
}

/// An XUD packet for the QP whose CQs `held` holds. Context: softirq.
pub(crate) fn receive(
    held: &HeldCqs,
    p: &RxPacket<'_>,
    mrs: &mut MrMemo<'_>,
) -> core::result::Result<(), RxCounter> {
    use crate::proto::wire::opcode::ExtHeader as H;
    let qp = held.qp();
    if !qp.live.can_receive() {
        return Err(RxCounter::DropNoQp);
    }
    let d = p.ext(H::Deth).ok_or(RxCounter::DropMalformed)?;
    let d = deth::Repr::parse(&deth::Header::new_checked(d).map_err(|_| RxCounter::DropMalformed)?);
    let key = PeerKey {
        gid: p.src,
        qpn: d.src_qp,
        // The address the packet was sent to: answers come from it.
        local: p.dst,
    };
    let r = match p.opcode {
        Opcode::XUD_ACKNOWLEDGE | Opcode::XUD_NAK => on_answer(held, p, key),
        Opcode::XUD_CHALLENGE => on_challenge(held, p, key),
        _ => {
            if d.qkey != qp.live.qkey() {
                return Err(RxCounter::DropQkey);
            }
            on_data(held, p, key, d.qkey, mrs)
        }
    };
    // Only a packet that was taken (or answered) can have made work: a
    // dropped one, forged ones included, costs no pass over the peers.
    if r.is_ok()
        || qp
            .xud()
            .is_some_and(|x| x.lock(held).as_deref().is_some_and(|st| st.txq.len() > 0))
    {
        kick(held);
    }
    r
}
