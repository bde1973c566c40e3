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
//! the QP's timer (softirq), under the QP's `xud` lock, a bottom-half
//! lock as RC's. Packets are built under it into the QP's transmit queue
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
//! packet carries BTH, DETH, XETH, RETH (and ImmDt), its payload copied
//! once from the MR pages. Receive: headers parsed once in `rx.rs`, rule
//! 1, the peer found or made (rules 2 and 3), the stream's check, a
//! receive claimed (copied out of the ring into the QP's pool of claimed
//! receives), the payload copied once from the skb to its place, commit,
//! ACK. Answers: the XACK's base and `sack` to the destination's stream.

use super::counters::RxCounter;
use super::mr::{MrError, MrMemo};
use super::qp::QpCore;
use super::ring::{MAX_RECV_SLOT, MAX_SEND_SLOT};
use super::sgl::Sgl;
use super::tx;
use super::txq::{self, TxQueue};
use crate::abi::{
    network, opcode, send_flags, status, wc_flags, wc_opcode, Cqe, RecvWqe, SendWqe, XudOp,
    XudParams, RECV_WQE_HEADER_SIZE, SEND_WQE_HEADER_SIZE,
};
use crate::ib::{AccessFlags, AddressVector, NetworkType};
use crate::net::skb::{SkBuff, TxSkb};
use crate::proto::{
    psn::Psn,
    wire::{
        aeth::{self, AckSyndrome, NakCode},
        bth, deth, immdt,
        opcode::Opcode,
        packet, reth, xack, xeth,
    },
    xud::{
        self,
        receiver::{self, Check, DataPacket, ParkedRecv, RecvStream},
        sender::{
            self, Answer, Message, MsgTable, Nak, ParkedSend, SendMsg, SendStream, TimerOutcome,
        },
        Op, RecvStatus, Refusal, SendStatus,
    },
};
use kernel::{prelude::*, rbtree::RBTree, sync::Arc};

/// How long an owed ACK may wait (xud.rst: one jiffy; 1 ms here).
const ACK_DELAY_NS: u64 = 1_000_000;
/// The reclaim scan's period.
const RECLAIM_PERIOD_NS: u64 = xud::QUIET_NS / 4;
/// How long a stream must have been at rest before the reclaim scan parks
/// it: long enough that a stream in use between two messages keeps its
/// table (parking and taking back cost an allocation each).
const PARK_AFTER_NS: u64 = 1_000_000_000;
/// The hop limit of ACKs to a peer known only from its packets.
const DEFAULT_TTL: u8 = 64;

/// A peer: the other end's address and QP number.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
struct PeerKey {
    gid: [u8; 16],
    qpn: u32,
}

/// One direction of a peer: the whole stream in an allocation of its own
/// while it is in use; parked while at rest, in a few bytes of the peer
/// entry (the stream's message table is most of its size). An idle peer
/// costs its entry alone (xud.rst, "Memory").
enum Side<A, P> {
    Active(KBox<A>),
    Parked(P),
}

/// Where answers to a peer go: the part of an address vector that
/// building an IP/UDP header reads (`tx::finish`) and that the peer's
/// key does not already hold (its GID). The MACs, VLAN and port are IP
/// routing's business; dropping them and the GID makes 24 bytes of 64,
/// and keeps a whole peer entry in kmalloc-192 (below).
#[derive(Clone, Copy)]
struct ReplyPath {
    sgid: [u8; 16],
    flow_label: u32,
    network: NetworkType,
    hop_limit: u8,
    traffic_class: u8,
}

impl ReplyPath {
    fn of(av: &AddressVector) -> Self {
        Self {
            sgid: av.sgid,
            flow_label: av.flow_label,
            network: av.network,
            hop_limit: av.hop_limit,
            traffic_class: av.traffic_class,
        }
    }

    /// The address vector of an answer to the peer whose GID is `dgid`.
    fn to(&self, dgid: [u8; 16]) -> AddressVector {
        AddressVector {
            port: 1,
            sgid_index: 0,
            sgid: self.sgid,
            network: self.network,
            vlan_id: None,
            smac: [0; 6],
            dgid,
            dmac: [0; 6],
            flow_label: self.flow_label,
            hop_limit: self.hop_limit,
            traffic_class: self.traffic_class,
            sl: 0,
            static_rate: 0,
        }
    }
}

/// Both directions with one peer.
struct Peer {
    /// Where answers to it go: from the AH of the last post to it, or (a
    /// peer that only sent to us) the addresses of its last packet. (Data
    /// packets go by their own work request's AH and Q_Key.)
    reply: ReplyPath,
    send: Option<Side<SendStream, ParkedSend>>,
    /// WQE handles posted to it and not yet admitted to its stream.
    queue: Fifo,
    recv: Option<Side<RecvStream, ParkedRecv>>,
    /// In the QP's [`BusyList`].
    busy: bool,
}

// An idle peer costs its red-black tree node alone: the links (24
// bytes), the key (20) and the peer. At most 144 bytes of peer keep the
// node in kmalloc-192, under the 256 bytes per idle peer of xud.rst's
// "Memory" (with the whole address vector it took kmalloc-256).
kernel::static_assert!(core::mem::size_of::<Peer>() <= 144);

impl Peer {
    /// Whether a pass over the send side has anything to do for it: posts
    /// queued, messages in its sending stream (packets, completions) or a
    /// timer of it, or an ACK owed. A stream with none of these waits for
    /// a post or an answer, which list the peer again.
    fn is_busy(&self) -> bool {
        !self.queue.is_empty()
            || self
                .send_ref()
                .is_some_and(|s| s.in_use() > 0 || s.next_deadline().is_some())
            || self.recv_ref().is_some_and(|r| r.ack_owed().is_some())
    }
    /// The sending stream, if one is in use (a parked one has nothing to
    /// send, time or complete).
    fn send_active(&mut self) -> Option<&mut SendStream> {
        match &mut self.send {
            Some(Side::Active(s)) => Some(s),
            _ => None,
        }
    }

    fn send_ref(&self) -> Option<&SendStream> {
        match &self.send {
            Some(Side::Active(s)) => Some(s),
            _ => None,
        }
    }

    /// The receiving stream, if one is in use (a parked one owes no ACK
    /// and holds no message).
    fn recv_active(&mut self) -> Option<&mut RecvStream> {
        match &mut self.recv {
            Some(Side::Active(r)) => Some(r),
            _ => None,
        }
    }

    fn recv_ref(&self) -> Option<&RecvStream> {
        match &self.recv {
            Some(Side::Active(r)) => Some(r),
            _ => None,
        }
    }

    /// The sending stream, taken back into use if parked; `Err` if that
    /// needs memory there is none of (softirq: atomic allocation).
    fn wake_send(&mut self, cfg: sender::Config) -> Result<Option<&mut SendStream>> {
        if let Some(Side::Parked(p)) = &self.send {
            self.send = Some(Side::Active(KBox::new(p.unpark(cfg), GFP_ATOMIC)?));
        }
        Ok(self.send_active())
    }

    /// The receiving stream, taken back into use if parked.
    fn wake_recv(&mut self) -> Result<Option<&mut RecvStream>> {
        if let Some(Side::Parked(p)) = &self.recv {
            self.recv = Some(Side::Active(KBox::new(p.unpark(), GFP_ATOMIC)?));
        }
        Ok(self.recv_active())
    }

    /// The incarnation of the receiving stream held, in use or parked.
    fn recv_stream(&self) -> Option<u64> {
        match &self.recv {
            Some(Side::Active(r)) => Some(r.stream()),
            Some(Side::Parked(p)) => Some(p.stream()),
            None => None,
        }
    }

    fn recv_is_quiet(&self, t: u64) -> bool {
        match &self.recv {
            Some(Side::Active(r)) => r.is_quiet(t),
            Some(Side::Parked(p)) => p.is_quiet(t),
            None => false,
        }
    }

    fn send_is_idle(&self, t: u64) -> bool {
        match &self.send {
            Some(Side::Active(s)) => s.is_idle(t),
            Some(Side::Parked(p)) => p.is_idle(t),
            None => false,
        }
    }

    /// Parks the streams that have been at rest for [`PARK_AFTER_NS`];
    /// returns how many it parked.
    fn park(&mut self, t: u64) -> u64 {
        let mut n = 0;
        if let Some(p) = self.send_ref().and_then(|s| s.park(t, PARK_AFTER_NS)) {
            self.send = Some(Side::Parked(p));
            n += 1;
        }
        if let Some(p) = self.recv_ref().and_then(|r| r.park(t, PARK_AFTER_NS)) {
            self.recv = Some(Side::Parked(p));
            n += 1;
        }
        n
    }
}

/// The peers the passes over the send side look at (transmit, admission,
/// timers, owed ACKs, the timer's deadline): those [`Peer::is_busy`], in
/// no order, each once ([`Peer::busy`]), so that a pass costs the peers at
/// work, not every peer the QP knows. A pass drops the peers it finds with
/// nothing to do. A peer the list could not take (no memory in softirq) is
/// taken by the reclaim scan, which walks every peer, within
/// [`RECLAIM_PERIOD_NS`].
struct BusyList {
    /// `keys[..len]` are the list; the rest is room from earlier growth
    /// (6.12's `KVec` cannot shrink).
    keys: KVec<PeerKey>,
    len: usize,
}

impl BusyList {
    fn new() -> Self {
        Self {
            keys: KVec::new(),
            len: 0,
        }
    }

    /// Lists `peer` (whose key is `key`) unless it is listed.
    fn add(&mut self, key: PeerKey, peer: &mut Peer) {
        if peer.busy {
            return;
        }
        if let Some(slot) = self.keys.get_mut(self.len) {
            *slot = key;
        } else if self.keys.push(key, GFP_ATOMIC).is_err() {
            return;
        }
        self.len += 1;
        peer.busy = true;
    }

    fn len(&self) -> usize {
        self.len
    }

    fn get(&self, i: usize) -> Option<PeerKey> {
        self.keys.get(..self.len)?.get(i).copied()
    }

    /// The `i`-th listed peer, if it is still in `peers`.
    fn peer<'a>(&self, i: usize, peers: &'a RBTree<PeerKey, Peer>) -> Option<&'a Peer> {
        peers.get(&self.get(i)?)
    }

    /// The `i`-th listed peer, to change, with its key.
    fn peer_mut<'a>(
        &self,
        i: usize,
        peers: &'a mut RBTree<PeerKey, Peer>,
    ) -> Option<(PeerKey, &'a mut Peer)> {
        let key = self.get(i)?;
        Some((key, peers.get_mut(&key)?))
    }

    /// Takes entry `i` out (the last one takes its place).
    fn remove(&mut self, i: usize) {
        if i >= self.len {
            return;
        }
        let last = self.len - 1;
        if let Some(k) = self.keys.get(last).copied() {
            if let Some(slot) = self.keys.get_mut(i) {
                *slot = k;
            }
        }
        self.len = last;
    }

    /// Drops the listed peers that have nothing to do, or are gone.
    fn prune(&mut self, peers: &mut RBTree<PeerKey, Peer>) {
        let mut i = 0;
        while let Some(key) = self.get(i) {
            match peers.get_mut(&key) {
                Some(p) if p.is_busy() => i += 1,
                Some(p) => {
                    p.busy = false;
                    self.remove(i);
                }
                None => self.remove(i),
            }
        }
    }
}

/// A pool of fixed-size byte slots (saved send WQEs, claimed receives),
/// handed out by index.
struct Pool {
    bytes: KVVec<u8>,
    slot: usize,
    /// `free[..nfree]` are the free indices.
    free: KVec<u32>,
    nfree: usize,
    /// Per slot: the next slot in its destination's queue ([`Fifo`]).
    link: KVec<u32>,
}

impl Pool {
    fn new(n: u32, slot: usize) -> Result<Self> {
        let len = (n as usize).checked_mul(slot).ok_or(EINVAL)?;
        let mut free = KVec::with_capacity(n as usize, GFP_KERNEL)?;
        for i in (0..n).rev() {
            free.push(i, GFP_KERNEL)?;
        }
        Ok(Self {
            bytes: KVVec::from_elem(0u8, len, GFP_KERNEL)?,
            slot,
            free,
            nfree: n as usize,
            link: KVec::from_elem(NO_SLOT, n as usize, GFP_KERNEL)?,
        })
    }

    fn take(&mut self) -> Option<u32> {
        let i = self.nfree.checked_sub(1)?;
        self.nfree = i;
        self.free.get(i).copied()
    }

    fn give(&mut self, i: u32) {
        if let Some(f) = self.free.get_mut(self.nfree) {
            *f = i;
            self.nfree += 1;
        }
    }

    fn get(&self, i: u32) -> &[u8] {
        let at = i as usize * self.slot;
        self.bytes.get(at..at + self.slot).unwrap_or(&[])
    }

    fn get_mut(&mut self, i: u32) -> &mut [u8] {
        let at = i as usize * self.slot;
        self.bytes.get_mut(at..at + self.slot).unwrap_or(&mut [])
    }
}

/// No slot (the end of a [`Fifo`]).
const NO_SLOT: u32 = u32::MAX;

/// A destination's queue of posted WQE handles, first in first out,
/// linked through the WQE pool (no memory of its own), bounded by the
/// destination's share of the send queue.
struct Fifo {
    head: u32,
    tail: u32,
    len: u32,
}

impl Fifo {
    const fn new() -> Self {
        Self {
            head: NO_SLOT,
            tail: NO_SLOT,
            len: 0,
        }
    }

    fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Appends `h`; false if the queue holds `cap` entries already.
    fn push(&mut self, pool: &mut Pool, h: u32, cap: u32) -> bool {
        if self.len >= cap {
            return false;
        }
        if let Some(l) = pool.link.get_mut(h as usize) {
            *l = NO_SLOT;
        }
        match pool.link.get_mut(self.tail as usize) {
            Some(l) if self.len > 0 => *l = h,
            _ => self.head = h,
        }
        self.tail = h;
        self.len += 1;
        true
    }

    fn front(&self) -> Option<u32> {
        (self.len > 0).then_some(self.head)
    }

    fn pop(&mut self, pool: &Pool) -> Option<u32> {
        let h = self.front()?;
        self.head = pool.link.get(h as usize).copied().unwrap_or(NO_SLOT);
        self.len -= 1;
        if self.len == 0 {
            self.head = NO_SLOT;
            self.tail = NO_SLOT;
        }
        Some(h)
    }
}

/// One XUD QP's state, from creation to destruction.
pub(crate) struct XudState {
    /// This QP's incarnation (rule 1).
    inc: u32,
    params: XudParams,
    cfg: sender::Config,
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
                params,
                cfg: sender::Config {
                    ack_every: params.ack_every,
                    ..sender::Config::DEFAULT
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
    kick(qp);
}

/// The QP's timer fired: retransmissions, RNR waits, owed ACKs, the
/// reclaim scan. Context: softirq.
pub(crate) fn timer_fired(qp: Arc<QpCore>) {
    {
        let mut g = qp.xud.lock();
        if let Some(st) = g.as_deref_mut() {
            st.armed = None;
            on_timer(&qp, st);
        }
    }
    kick(&qp);
}

/// Generates what is due and sends the QP's queue unless another context
/// is at it (see [`txq::kick`]). Any context but hard irq.
pub(crate) fn kick(qp: &Arc<QpCore>) {
    txq::kick(qp, &qp.xud);
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
/// the timer. Under the `xud` lock.
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

/// Arms the QP's timer for the earliest thing due.
fn arm(qp: &Arc<QpCore>, st: &mut XudState, t: u64) {
    let mut due = st.next_reclaim;
    if st.starved {
        due = due.min(t + ACK_DELAY_NS);
    }
    for i in 0..st.busy.len() {
        let Some(p) = st.busy.peer(i, &st.peers) else {
            continue;
        };
        if let Some(d) = p.send_ref().and_then(|s| s.next_deadline()) {
            due = due.min(d);
        }
        if let Some(since) = p.recv_ref().and_then(|r| r.ack_owed()) {
            due = due.min(since + ACK_DELAY_NS);
        }
    }
    if st.armed != Some(due) {
        st.armed = Some(due);
        crate::kext::timer::Timer::arm(qp, due.saturating_sub(t));
    }
}

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
fn admit(qp: &QpCore, st: &mut XudState, t: u64) -> bool {
    let mut slot = [0u8; MAX_SEND_SLOT];
    let share = (qp.cap().max_send_wr / 4).max(16);
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
            match queue_wqe(qp, st, h, &w, body, share) {
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
            let sgid = peer.reply.sgid;
            let mtu =
                *peer_mtu.get_or_insert_with(|| xud_payload(ndev.as_deref(), &sgid, &key.gid));
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
                let stream =
                    SendStream::new(nonzero_u64(), Psn::new(crate::kext::random::u64() as u32), cfg, t);
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

/// Checks a posted WQE and queues it (already popped into slot `h`) to
/// its destination; the completion status of a refusal.
fn queue_wqe(
    qp: &QpCore,
    st: &mut XudState,
    h: u32,
    w: &SendWqe,
    body: &[u8],
    share: u32,
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

/// The peer `key`, made if new.
fn find_or_add<'a>(
    qp: &QpCore,
    peers: &'a mut RBTree<PeerKey, Peer>,
    key: PeerKey,
    reply: ReplyPath,
) -> Option<&'a mut Peer> {
    if peers.get(&key).is_none() {
        let peer = Peer {
            reply,
            send: None,
            queue: Fifo::new(),
            recv: None,
            busy: false,
        };
        peers.try_create_and_insert(key, peer, GFP_ATOMIC).ok()?;
        qp.port.counters.add(RxCounter::XudPeersAdded, 1);
    }
    peers.get_mut(&key)
}

/// Builds the packets the streams have due: round robin over the peers,
/// starting after the one the last pass stopped at, at most
/// `ack_every` packets (and at most a queue's worth) each. New packets
/// only while the QP's packets in flight are below
/// [`xud::MAX_QP_IN_FLIGHT`]; resends and probes always.
fn transmit(qp: &QpCore, st: &mut XudState, t: u64) {
    let Some(ndev) = qp.ud_netdev() else {
        return;
    };
    let burst_max = st.cfg.ack_every.clamp(1, super::txq::TXQ_LEN as u32);
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
fn complete_sends(qp: &QpCore, peer: &mut Peer, wqes: &mut Pool, msgs: &mut MsgTable) {
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
    ) {
        Ok(()) => Ok(skb),
        Err(code) if code == status::LOC_QP_OP_ERR => Err(Some(SendStatus::LocalQpOperation)),
        Err(_) => Err(None),
    }
}

/// Where an ACK or NAK goes, and from which incarnation.
struct ReplyTo {
    qpn: u32,
    av: AddressVector,
    inc: u32,
    /// The Q_Key of the data packet answered.
    qkey: u32,
}

/// An ACK (or, with `nak`, a NAK) about the stream `info` describes.
fn build_answer(
    qp: &QpCore,
    ndev: &crate::net::NetDevice,
    to: &ReplyTo,
    info: &receiver::AckInfo,
    nak: Option<(AckSyndrome, Psn)>,
) -> Option<TxSkb> {
    let mut repr = packet::Repr::new(bth::Repr {
        opcode: if nak.is_some() {
            Opcode::XUD_NAK
        } else {
            Opcode::XUD_ACKNOWLEDGE
        },
        solicited: false,
        mig_req: false,
        pad_count: 0,
        pkey: bth::DEFAULT_PKEY,
        fecn: false,
        becn: false,
        dest_qp: to.qpn,
        ack_req: false,
        psn: info.base,
    });
    repr.deth = Some(deth::Repr {
        qkey: to.qkey,
        src_qp: qp.qpn(),
    });
    repr.xack = Some(xack::Repr {
        stream: info.stream,
        inc: to.inc,
        sack: info.sack,
    });
    if let Some((syndrome, psn)) = nak {
        repr.aeth = Some(aeth::Repr {
            syndrome,
            msn: psn.value(),
        });
    }
    let total = repr.buffer_len(0).ok()?;
    let mut skb = TxSkb::new(ndev, total).ok()?;
    repr.emit(skb.payload_mut(), 0).ok()?;
    tx::finish(
        &mut skb,
        &to.av,
        tx::source_port(qp.qpn()),
        None,
        qp.next_ip_id(),
    )
    .ok()?;
    let which = if nak.is_some() {
        RxCounter::XudNaksSent
    } else {
        RxCounter::XudAcksSent
    };
    qp.port.counters.add(which, 1);
    Some(skb)
}

/// The timer's work: streams' deadlines, owed ACKs, the reclaim scan.
fn on_timer(qp: &Arc<QpCore>, st: &mut XudState) {
    let t = now();
    let XudState {
        peers,
        wqes,
        msgs,
        busy,
        ..
    } = st;
    for i in 0..busy.len() {
        let Some((_, peer)) = busy.peer_mut(i, peers) else {
            continue;
        };
        let Some(s) = peer.send_active() else {
            continue;
        };
        if s.next_deadline().is_some_and(|d| d <= t) {
            match s.on_timer(msgs, t) {
                TimerOutcome::Probe => qp.port.counters.add(RxCounter::XudTimeouts, 1),
                TimerOutcome::Resend => {}
                TimerOutcome::DestinationFailed => {
                    // What is still queued for it fails the same way.
                    while let Some(h) = peer.queue.pop(wqes) {
                        let w = SendWqe::decode(wqes.get(h));
                        qp.complete_send(&w, status::RETRY_EXC_ERR, 0);
                        wqes.give(h);
                    }
                }
                TimerOutcome::Idle => {}
            }
        }
        complete_sends(qp, peer, wqes, msgs);
    }
    flush_owed_acks(qp, st);
    if t >= st.next_reclaim {
        st.next_reclaim = t + RECLAIM_PERIOD_NS;
        reclaim(qp, st, t);
    }
}

/// Sends the ACKs packets have been waiting for.
fn flush_owed_acks(qp: &QpCore, st: &mut XudState) {
    let Some(ndev) = qp.ud_netdev() else {
        return;
    };
    let inc = st.inc;
    let XudState {
        peers, txq, busy, ..
    } = st;
    for i in 0..busy.len() {
        if txq.is_full() {
            return;
        }
        let Some((key, peer)) = busy.peer_mut(i, peers) else {
            continue;
        };
        let Some(r) = peer.recv_active() else {
            continue;
        };
        if r.ack_owed().is_none() {
            continue;
        }
        let info = r.ack();
        let to = ReplyTo {
            qpn: key.qpn,
            av: peer.reply.to(key.gid),
            inc,
            qkey: qp.live.qkey(),
        };
        if let Some(skb) = build_answer(qp, &ndev, &to, &info, None) {
            txq.push(skb);
        }
    }
}

/// Frees what has been quiet long enough: receive states after
/// [`xud::QUIET_NS`] (their open messages fail), send states idle for
/// [`xud::SENDER_IDLE_NS`], peers with neither. Parks the streams at
/// rest for [`PARK_AFTER_NS`].
fn reclaim(qp: &QpCore, st: &mut XudState, t: u64) {
    let XudState {
        peers,
        recvs,
        recv_peers,
        send_peers,
        busy,
        ..
    } = st;
    let mut gone = KVec::<PeerKey>::new();
    let mut parked = 0;
    for (key, peer) in peers.iter_mut() {
        if peer.recv_is_quiet(t) {
            if let Some(r) = peer.recv_active() {
                r.abandon_all();
                drain_recv_done(qp, r, recvs, &Origin::none(key.qpn));
            }
            peer.recv = None;
            *recv_peers = recv_peers.saturating_sub(1);
        }
        if peer.send_is_idle(t) && peer.queue.is_empty() {
            peer.send = None;
            *send_peers = send_peers.saturating_sub(1);
        }
        if peer.send.is_none() && peer.recv.is_none() && peer.queue.is_empty() {
            let _ = gone.push(*key, GFP_ATOMIC);
        } else {
            parked += peer.park(t);
            // One the list could not take when it became busy.
            if peer.is_busy() {
                busy.add(*key, peer);
            }
        }
    }
    qp.port.counters.add(RxCounter::XudStreamsParked, parked);
    for key in gone.iter() {
        // Its entry in `busy`, if any, goes at the next prune.
        peers.remove(key);
    }
    qp.port
        .counters
        .add(RxCounter::XudPeersReclaimed, gone.len() as u64);
}

/// The QP is destroyed or reset: every message fails, posted and claimed
/// work completes flushed. Under the `xud` lock.
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

fn complete_recv_status(qp: &QpCore, wr_id: u64, code: u32) {
    let cqe = Cqe {
        wr_id,
        status: code,
        opcode: wc_opcode::RECV,
        qp_num: qp.qpn(),
        ..Default::default()
    };
    let _ = qp.recv_cq.push(&cqe, false);
}

/// What `rx.rs` parsed of an XUD packet.
pub(crate) struct RxPacket<'a> {
    pub(crate) skb: &'a SkBuff,
    /// The IP and UDP headers as received.
    pub(crate) ip: &'a [u8],
    pub(crate) src: [u8; 16],
    pub(crate) head: &'a [u8],
    pub(crate) opcode: Opcode,
    pub(crate) psn: Psn,
    pub(crate) ack_req: bool,
    pub(crate) solicited: bool,
    pub(crate) payload: core::ops::Range<usize>,
}

impl RxPacket<'_> {
    fn ext(&self, h: crate::proto::wire::opcode::ExtHeader) -> Option<&[u8]> {
        let info = self.opcode.info().ok()?;
        let at = info.offset_of(h)?;
        self.head.get(at..at + h.size())
    }
}

/// An XUD packet for `qp`. Context: softirq.
pub(crate) fn receive(
    qp: &Arc<QpCore>,
    p: &RxPacket<'_>,
    mrs: &mut MrMemo<'_>,
) -> core::result::Result<(), RxCounter> {
    use crate::proto::wire::opcode::ExtHeader as H;
    if !qp.live.can_receive() {
        return Err(RxCounter::DropNoQp);
    }
    let d = p.ext(H::Deth).ok_or(RxCounter::DropMalformed)?;
    let d = deth::Repr::parse(&deth::Header::new_checked(d).map_err(|_| RxCounter::DropMalformed)?);
    let key = PeerKey {
        gid: p.src,
        qpn: d.src_qp,
    };
    let r = match p.opcode {
        Opcode::XUD_ACKNOWLEDGE | Opcode::XUD_NAK => on_answer(qp, p, key),
        _ => {
            if d.qkey != qp.live.qkey() {
                return Err(RxCounter::DropQkey);
            }
            on_data(qp, p, key, d.qkey, mrs)
        }
    };
    // Only a packet that was taken (or answered) can have made work: a
    // dropped one, forged ones included, costs no pass over the peers.
    if r.is_ok() || qp.xud.lock().as_deref().is_some_and(|st| st.txq.len() > 0) {
        kick(qp);
    }
    r
}

fn on_answer(qp: &QpCore, p: &RxPacket<'_>, key: PeerKey) -> core::result::Result<(), RxCounter> {
    use crate::proto::wire::opcode::ExtHeader as H;
    let x = p.ext(H::Xack).ok_or(RxCounter::DropMalformed)?;
    let x = xack::Repr::parse(&xack::Header::new_checked(x).map_err(|_| RxCounter::DropMalformed)?)
        .map_err(|_| RxCounter::DropMalformed)?;
    let nak = match p.ext(H::Aeth) {
        Some(a) => {
            let a = aeth::Repr::parse(
                &aeth::Header::new_checked(a).map_err(|_| RxCounter::DropMalformed)?,
            );
            let psn = Psn::new(a.msn);
            let n = match a.syndrome {
                AckSyndrome::RnrNak { timer_code } => Nak::ReceiverNotReady(timer_code),
                AckSyndrome::Nak(NakCode::RemoteAccessError) => Nak::RemoteAccess,
                AckSyndrome::Nak(NakCode::Reserved(c)) if c == xud::NAK_STALE_INCARNATION => {
                    Nak::StaleIncarnation
                }
                AckSyndrome::Nak(_) => Nak::InvalidRequest,
                _ => return Err(RxCounter::DropMalformed),
            };
            Some((n, psn))
        }
        None => None,
    };
    let a = Answer {
        stream: x.stream,
        inc: x.inc,
        base: p.psn,
        sack: x.sack,
        nak,
    };
    let mut g = qp.xud.lock();
    let st = g.as_deref_mut().ok_or(RxCounter::DropNoQp)?;
    let cfg = st.cfg;
    let XudState {
        peers,
        wqes,
        msgs,
        busy,
        ..
    } = st;
    let peer = peers.get_mut(&key).ok_or(RxCounter::DropSequence)?;
    if let Some(Side::Parked(p)) = &peer.send {
        // Nothing is in flight: only a (late) answer of this stream can
        // matter, and only a stale-incarnation NAK changes it.
        if p.stream() != a.stream {
            return Err(RxCounter::DropSequence);
        }
    }
    peer.wake_send(cfg)
        .map_err(|_| RxCounter::DropNoMemory)?
        .ok_or(RxCounter::DropSequence)?;
    // Taken back into use: its timers and completions are the passes'.
    busy.add(key, peer);
    let s = peer.send_active().ok_or(RxCounter::DropSequence)?;
    let outcome = s.on_answer(msgs, &a, now());
    complete_sends(qp, peer, wqes, msgs);
    match outcome {
        sender::AnswerOutcome::Taken => {
            let which = if a.nak.is_some() {
                RxCounter::XudNaksReceived
            } else {
                RxCounter::XudAcksReceived
            };
            qp.port.counters.add(which, 1);
            Ok(())
        }
        sender::AnswerOutcome::Ignored => Err(RxCounter::DropSequence),
    }
}

fn on_data(
    qp: &QpCore,
    p: &RxPacket<'_>,
    key: PeerKey,
    qkey: u32,
    mrs: &mut MrMemo<'_>,
) -> core::result::Result<(), RxCounter> {
    use crate::proto::wire::opcode::ExtHeader as H;
    let x = p.ext(H::Xeth).ok_or(RxCounter::DropMalformed)?;
    let x = xeth::Repr::parse(&xeth::Header::new_checked(x).map_err(|_| RxCounter::DropMalformed)?)
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
    };
    if !pkt.is_well_formed(crate::abi::xud::MAX_MSG_SZ) {
        return Err(RxCounter::DropMalformed);
    }
    let ndev = qp.ud_netdev();
    let mut g = qp.xud.lock();
    let st = g.as_deref_mut().ok_or(RxCounter::DropNoQp)?;
    let t = now();
    let inc = st.inc;
    if receiver::is_stale(x.peer_inc, inc) {
        // Rule 1: answered from no state (and counted by the caller, as
        // every drop).
        let path = reply_path(p).ok_or(RxCounter::DropMalformed)?;
        let to = ReplyTo {
            qpn: key.qpn,
            av: path.to(key.gid),
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
    // Rules 2 and 3. A new receiving state only within max_peers: the
    // entry is made only then (a flood of new sources allocates nothing
    // beyond the limit).
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
        Some(false) if peer.recv_is_quiet(t) => {
            // Rule 3: the quiet state of an earlier stream gives way.
            let fresh = KBox::new(RecvStream::new(&pkt, t), GFP_ATOMIC)
                .map_err(|_| RxCounter::DropNoMemory)?;
            if let Some(r) = peer.recv_active() {
                r.abandon_all();
                drain_recv_done(qp, r, recvs, &Origin::none(key.qpn));
            }
            peer.recv = Some(Side::Active(fresh));
        }
        Some(false) => return Err(RxCounter::XudStale),
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
    if let (Some(nak), Some(nd)) = (answer, ndev.as_deref()) {
        let info = rs.ack();
        let to = ReplyTo {
            qpn: key.qpn,
            av: peer.reply.to(key.gid),
            inc,
            qkey,
        };
        if let Some(skb) = build_answer(qp, nd, &to, &info, nak) {
            txq.push(skb);
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
struct Origin {
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
    fn none(src_qp: u32) -> Self {
        Self {
            src_qp,
            network: network::IPV4,
            imm: None,
            solicited: false,
        }
    }
}

/// Writes the receive completions the stream has ready.
fn drain_recv_done(qp: &QpCore, rs: &mut RecvStream, recvs: &mut Pool, from: &Origin) {
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

/// Where answers to the sender of `p` go: back along its IP addresses.
fn reply_path(p: &RxPacket<'_>) -> Option<ReplyPath> {
    let (network, sgid) = match p.ip.len() {
        28 => {
            let mut g = [0u8; 16];
            g[10] = 0xff;
            g[11] = 0xff;
            g[12..].copy_from_slice(p.ip.get(16..20)?);
            (NetworkType::Ipv4, g)
        }
        48 => {
            let mut g = [0u8; 16];
            g.copy_from_slice(p.ip.get(24..40)?);
            (NetworkType::Ipv6, g)
        }
        _ => return None,
    };
    Some(ReplyPath {
        sgid,
        flow_label: 0,
        network,
        hop_limit: DEFAULT_TTL,
        traffic_class: 0,
    })
}
