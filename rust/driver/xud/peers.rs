// SPDX-License-Identifier: GPL-2.0

//! The peer table's entries. A peer is the other end's GID and QP
//! number ([`PeerKey`]); its entry ([`Peer`]) holds both directions: the
//! sending stream with the queue of posts not yet admitted to it, and the
//! receiving stream's window, each in use or parked, and where answers
//! to the peer go. [`find_or_add`] makes entries; the [`BusyList`] names
//! the peers at work, so that the passes over the send side walk those
//! alone. The tree itself is [`XudState`](super::XudState)'s.
//!
//! Apart because every other file finds its peers here, and an entry's
//! size is held to xud.rst's memory budget (the assertion below).

use super::pool::Fifo;
use super::timers::PARK_AFTER_NS;
use crate::driver::{counters::RxCounter, qp::QpCore};
use crate::ib::{AddressVector, NetworkType};
use crate::proto::xud::{
    receiver::{Held, ParkedRecv, RecvStream},
    sender::{self, ParkedSend, SendStream},
};
use kernel::{prelude::*, rbtree::RBTree};

/// A peer: the other end's address and QP number, and the address of
/// ours its streams run to and from. A host with several addresses is a
/// peer per address pair: a sender's stream is to the GID it targets, and
/// the answers it takes come from that GID alone, so the receiver keeps
/// one state per address of its own that was targeted and answers from it
/// (xud.rst, "Addresses").
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(super) struct PeerKey {
    pub(super) gid: [u8; 16],
    pub(super) qpn: u32,
    /// Our GID: a sending stream's source (its AH's SGID), a receiving
    /// stream's destination (the address its packets were sent to).
    pub(super) local: [u8; 16],
}

/// One direction of a peer: the whole stream in an allocation of its own
/// while it is in use; parked while at rest, in a few bytes of the peer
/// entry (the stream's message table is most of its size). An idle peer
/// costs its entry alone (xud.rst, "Memory").
pub(super) enum Side<A, P> {
    Active(KBox<A>),
    Parked(P),
}

/// Where answers to a peer go: the part of an address vector that
/// building an IP/UDP header reads (`tx::finish`) and that the peer's
/// key does not already hold (both GIDs). The MACs, VLAN and port are IP
/// routing's business; dropping them and the GIDs makes 8 bytes of 64,
/// and keeps a whole peer entry in kmalloc-192 (below).
#[derive(Clone, Copy)]
pub(super) struct ReplyPath {
    pub(super) flow_label: u32,
    pub(super) network: NetworkType,
    pub(super) hop_limit: u8,
    pub(super) traffic_class: u8,
}

impl ReplyPath {
    pub(super) fn of(av: &AddressVector) -> Self {
        Self {
            flow_label: av.flow_label,
            network: av.network,
            hop_limit: av.hop_limit,
            traffic_class: av.traffic_class,
        }
    }

    /// The address vector of an answer to the peer `key`: from our
    /// address its stream runs to, to its.
    pub(super) fn to(&self, key: &PeerKey) -> AddressVector {
        AddressVector {
            port: 1,
            sgid_index: 0,
            sgid: key.local,
            network: self.network,
            vlan_id: None,
            smac: [0; 6],
            dgid: key.gid,
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
pub(super) struct Peer {
    /// How answers to it go (from `local` to its GID, the key's): from
    /// the AH of the last post to it, or (a peer that only sent to us)
    /// defaults. (Data packets go by their own work request's AH and
    /// Q_Key.)
    pub(super) reply: ReplyPath,
    pub(super) send: Option<Side<SendStream, ParkedSend>>,
    /// WQE handles posted to it and not yet admitted to its stream.
    pub(super) queue: Fifo,
    pub(super) recv: Option<Side<RecvStream, ParkedRecv>>,
    /// In the QP's [`BusyList`].
    busy: bool,
}

// An idle peer costs its red-black tree node alone: the links (24
// bytes), the key (36) and the peer. At most 128 bytes of peer keep the
// node in kmalloc-192, under the 256 bytes per idle peer of xud.rst's
// "Memory" (with the whole address vector it took kmalloc-256).
kernel::static_assert!(core::mem::size_of::<PeerKey>() <= 36);
kernel::static_assert!(core::mem::size_of::<Peer>() <= 128);

impl Peer {
    /// Whether a pass over the send side has anything to do for it: posts
    /// queued, messages in its sending stream (packets, completions) or a
    /// timer of it, or an ACK owed. A stream with none of these waits for
    /// a post or an answer, which list the peer again.
    pub(super) fn is_busy(&self) -> bool {
        !self.queue.is_empty()
            || self
                .send_ref()
                .is_some_and(|s| s.in_use() > 0 || s.next_deadline().is_some())
            || self.recv_ref().is_some_and(|r| r.ack_owed().is_some())
    }

    /// Send WQEs it holds: queued, and in its sending stream.
    pub(super) fn held(&self) -> u32 {
        self.queue.len() + self.send_ref().map_or(0, SendStream::in_use)
    }

    /// The sending stream, if one is in use (a parked one has nothing to
    /// send, time or complete).
    pub(super) fn send_active(&mut self) -> Option<&mut SendStream> {
        match &mut self.send {
            Some(Side::Active(s)) => Some(s),
            _ => None,
        }
    }

    pub(super) fn send_ref(&self) -> Option<&SendStream> {
        match &self.send {
            Some(Side::Active(s)) => Some(s),
            _ => None,
        }
    }

    /// The receiving stream, if one is in use (a parked one owes no ACK
    /// and holds no message).
    pub(super) fn recv_active(&mut self) -> Option<&mut RecvStream> {
        match &mut self.recv {
            Some(Side::Active(r)) => Some(r),
            _ => None,
        }
    }

    pub(super) fn recv_ref(&self) -> Option<&RecvStream> {
        match &self.recv {
            Some(Side::Active(r)) => Some(r),
            _ => None,
        }
    }

    /// The sending stream, taken back into use if parked; `Err` if that
    /// needs memory there is none of (softirq: atomic allocation).
    pub(super) fn wake_send(&mut self, cfg: sender::Config) -> Result<Option<&mut SendStream>> {
        if let Some(Side::Parked(p)) = &self.send {
            self.send = Some(Side::Active(KBox::new(p.unpark(cfg), GFP_ATOMIC)?));
        }
        Ok(self.send_active())
    }

    /// The receiving stream, taken back into use if parked.
    pub(super) fn wake_recv(&mut self) -> Result<Option<&mut RecvStream>> {
        if let Some(Side::Parked(p)) = &self.recv {
            self.recv = Some(Side::Active(KBox::new(p.unpark(), GFP_ATOMIC)?));
        }
        Ok(self.recv_active())
    }

    /// The incarnation of the receiving stream held, in use or parked.
    pub(super) fn recv_stream(&self) -> Option<u64> {
        match &self.recv {
            Some(Side::Active(r)) => Some(r.stream()),
            Some(Side::Parked(p)) => Some(p.stream()),
            None => None,
        }
    }

    /// What the receiving stream held, in use or parked, is to
    /// [`crate::proto::xud::receiver::admit`].
    pub(super) fn recv_held(&self, t: u64) -> Option<Held> {
        match &self.recv {
            Some(Side::Active(r)) => Some(r.held(t)),
            Some(Side::Parked(p)) => Some(p.held(t)),
            None => None,
        }
    }

    pub(super) fn recv_is_quiet(&self, t: u64) -> bool {
        match &self.recv {
            Some(Side::Active(r)) => r.is_quiet(t),
            Some(Side::Parked(p)) => p.is_quiet(t),
            None => false,
        }
    }

    pub(super) fn send_is_idle(&self, t: u64) -> bool {
        match &self.send {
            Some(Side::Active(s)) => s.is_idle(t),
            Some(Side::Parked(p)) => p.is_idle(t),
            None => false,
        }
    }

    /// Parks the streams that have been at rest for [`PARK_AFTER_NS`];
    /// returns how many it parked.
    pub(super) fn park(&mut self, t: u64) -> u64 {
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

/// The peer `key`, made if new.
pub(super) fn find_or_add<'a>(
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

/// The peers the passes over the send side look at (transmit, admission,
/// timers, owed ACKs, the timer's deadline): those [`Peer::is_busy`], in
/// no order, each once ([`Peer::busy`]), so that a pass costs the peers at
/// work, not every peer the QP knows. A pass drops the peers it finds with
/// nothing to do. A peer the list could not take (no memory in softirq) is
/// taken by the reclaim scan, which walks every peer, within
/// [`RECLAIM_PERIOD_NS`](super::timers::RECLAIM_PERIOD_NS).
pub(super) struct BusyList {
    /// `keys[..len]` are the list; the rest is room from earlier growth
    /// (6.12's `KVec` cannot shrink).
    keys: KVec<PeerKey>,
    len: usize,
}

impl BusyList {
    pub(super) fn new() -> Self {
        Self {
            keys: KVec::new(),
            len: 0,
        }
    }

    /// Lists `peer` (whose key is `key`) unless it is listed.
    pub(super) fn add(&mut self, key: PeerKey, peer: &mut Peer) {
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

    pub(super) fn len(&self) -> usize {
        self.len
    }

    fn get(&self, i: usize) -> Option<PeerKey> {
        self.keys.get(..self.len)?.get(i).copied()
    }

    /// The `i`-th listed peer, if it is still in `peers`.
    pub(super) fn peer<'a>(&self, i: usize, peers: &'a RBTree<PeerKey, Peer>) -> Option<&'a Peer> {
        peers.get(&self.get(i)?)
    }

    /// The `i`-th listed peer, to change, with its key.
    pub(super) fn peer_mut<'a>(
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
    pub(super) fn prune(&mut self, peers: &mut RBTree<PeerKey, Peer>) {
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
