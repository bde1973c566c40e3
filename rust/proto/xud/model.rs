// SPDX-License-Identifier: GPL-2.0

//! Model tests: XUD QPs, each with a sending and a receiving half per
//! peer, connected by a network that loses, duplicates, reorders and
//! delays packets (up to [`LIFETIME_NS`]), driven the way the driver
//! drives the state machines (rule 1's stale check, the peer table with
//! rules 2 and 3, check/claim/place/commit, delayed ACKs, the reclaim
//! timer). Every run asserts:
//!
//! - no packet payload is placed twice;
//! - a SEND or WRITE_IMM that completes with success at the sender
//!   produced exactly one successful receive completion, with the
//!   message's bytes; a WRITE that succeeds had every byte placed once;
//! - a message that fails was delivered at most once;
//! - every receive a message claimed completes (success or error) by the
//!   end, and every posted message completes at its sender.

use std::collections::{BTreeMap, VecDeque};
use std::vec::Vec;

use super::super::psn::Psn;
use super::cookie::{Binding, Cookie, CookieKey};
use super::receiver::{self, Admission, Check, DataPacket, RecvStream};
use super::sender::{self, Answer, Message, Nak, SendMsg, SendStream, TimerOutcome};
use super::*;

use super::super::wire::testutil::Rng;

/// The model's draws on top of the shared generator.
trait Draw {
    fn draw(&mut self, n: u64) -> u64;
    fn chance(&mut self, per_mille: u64) -> bool;
}

impl Draw for Rng {
    fn draw(&mut self, n: u64) -> u64 {
        self.next_u64() % n.max(1)
    }
    fn chance(&mut self, per_mille: u64) -> bool {
        self.draw(1000) < per_mille
    }
}

const MTU: u32 = 256;
const STEP_NS: u64 = 100_000;

#[derive(Clone, Copy, Debug)]
enum Payload {
    Data {
        pkt: DataPacket,
        /// Which message (the model's id) and the chunk's offset.
        id: usize,
        offset: u32,
        /// A copy the network held back for up to [`Net::replay_max_ns`].
        replayed: bool,
    },
    Answer(Answer),
    /// A receiver's challenge: the stream and incarnation answered, the
    /// cookie it gives.
    Challenge {
        stream: u64,
        inc: u32,
        cookie: Cookie,
    },
}

#[derive(Clone, Copy, Debug)]
struct Wire {
    src: usize,
    dst: usize,
    payload: Payload,
}

#[derive(Clone, Debug)]
struct Msg {
    src: usize,
    dst: usize,
    op: Op,
    len: u32,
    /// A WRITE whose rkey the receiver refuses.
    bad_rkey: bool,
    /// Completion at the sender.
    status: Option<SendStatus>,
    /// Successful receive completions, and failed ones.
    delivered: u32,
    recv_failed: u32,
    /// Times each chunk was placed.
    placed: Vec<u32>,
}

struct Recv {
    buf: Vec<u8>,
    /// Message the receive was claimed by (model id).
    claimed_by: Option<usize>,
}

struct Node {
    inc: u32,
    /// The QP's cookie key (a re-created QP draws another).
    key: CookieKey,
    /// Incarnations so far (each re-creation draws a new one).
    generation: u32,
    send: BTreeMap<usize, SendStream>,
    /// The QP's message table, at the model's message ids (the WQE
    /// handles here).
    msgs: Vec<SendMsg>,
    /// Messages queued per destination beyond the stream's sixteen.
    queued: BTreeMap<usize, VecDeque<usize>>,
    recv: BTreeMap<usize, RecvStream>,
    /// Posted receives not yet claimed, and all receives by handle.
    rq: VecDeque<u32>,
    recvs: BTreeMap<u32, Recv>,
    next_recv: u32,
    /// Deaf: drops everything it receives (a dead peer).
    deaf: bool,
    max_peers: usize,
    /// Map from this node's stream-scoped message numbers to model ids,
    /// per destination: (stream, msg_seq) -> id.
    ids: BTreeMap<(u64, u32), usize>,
}

struct Net {
    rng: Rng,
    loss: u64,
    dup: u64,
    /// Delay: uniform up to this, and rarely up to LIFETIME.
    delay_ns: u64,
    long_delay: u64,
    /// Added to every packet's delay (the goodput runs' link).
    base_ns: u64,
    /// Whether `loss` and `dup` hit answers too, or data packets only
    /// (netem on the data's way, as `make bench` has it).
    lossy_answers: bool,
    /// Per mille of data packets of which the network keeps a copy and
    /// delivers it up to `replay_max_ns` later: far beyond [`LIFETIME_NS`],
    /// as a link that lost track of a packet (or an attacker on the path
    /// that recorded it) would.
    replay: u64,
    replay_max_ns: u64,
    in_flight: Vec<(u64, Wire)>,
}

impl Net {
    fn send(&mut self, now: u64, w: Wire) {
        let exposed = self.lossy_answers || matches!(w.payload, Payload::Data { .. });
        if exposed && self.rng.chance(self.loss) {
            return;
        }
        let copies = if exposed && self.rng.chance(self.dup) {
            2
        } else {
            1
        };
        for _ in 0..copies {
            let delay = if self.rng.chance(self.long_delay) {
                self.rng.draw(LIFETIME_NS)
            } else {
                self.rng.draw(self.delay_ns.max(1))
            };
            self.in_flight.push((now + self.base_ns + delay, w));
        }
        if let Payload::Data {
            pkt, id, offset, ..
        } = w.payload
        {
            if self.rng.chance(self.replay) {
                let late = Wire {
                    payload: Payload::Data {
                        pkt,
                        id,
                        offset,
                        replayed: true,
                    },
                    ..w
                };
                let delay = self.rng.draw(self.replay_max_ns);
                self.in_flight.push((now + delay, late));
            }
        }
    }
}

struct Model {
    now: u64,
    nodes: Vec<Node>,
    msgs: Vec<Msg>,
    net: Net,
    stream_seed: u64,
    cfg: sender::Config,
    ack_every: u32,
    /// Counters the tests look at.
    stale_naks: u32,
    peer_limit_drops: u32,
    reclaimed: u32,
    /// Park every stream at rest at each timer tick, and take it back at
    /// once: what the driver does lazily (it parks idle streams and takes
    /// one back when it is used), so any state parking lost shows here.
    parking: bool,
    parked: u32,
    /// Data packets the senders may send per second together (0: no
    /// limit): a sender whose CPU is the bottleneck, as in the VMs.
    rate_pps: u64,
    /// Sending time saved up, in ns (at most two steps' worth).
    rate_credit_ns: u64,
    /// How long an owed ACK waits (the driver's ACK delay).
    ack_delay_ns: u64,
    /// Data packets sent again, and retransmit timeouts.
    retransmitted: u64,
    timeouts: u64,
    /// Challenges sent, and data packets dropped for a cookie that was
    /// absent, forged or older than their window's.
    challenges: u32,
    bad_cookies: u32,
    /// Held-back copies that arrived where the receiver had no state for
    /// their source (reclaimed, or never made).
    replays_after_reclaim: u32,
}

/// What node `dst`'s cookies for `src`'s stream bind (a node's GID is its
/// index).
fn binding(src: usize, dst: usize, stream: u64) -> Binding {
    let mut src_gid = [0u8; 16];
    src_gid[15] = src as u8;
    Binding {
        src_gid,
        src_qpn: src as u32,
        dst_qpn: dst as u32,
        stream,
    }
}

fn pattern(id: usize, offset: u32) -> u8 {
    (id as u32).wrapping_mul(31).wrapping_add(offset) as u8
}

impl Model {
    fn new(nodes: usize, seed: u64) -> Self {
        let mut rng = Rng::new(seed);
        let nodes = (0..nodes)
            .map(|_| Node {
                inc: (rng.next_u64() as u32) | 1,
                key: CookieKey::new(rng.next_u64(), rng.next_u64()),
                generation: 0,
                send: BTreeMap::new(),
                msgs: Vec::new(),
                queued: BTreeMap::new(),
                recv: BTreeMap::new(),
                rq: VecDeque::new(),
                recvs: BTreeMap::new(),
                next_recv: 0,
                deaf: false,
                max_peers: 64,
                ids: BTreeMap::new(),
            })
            .collect();
        Model {
            now: 1_000_000_000,
            nodes,
            msgs: Vec::new(),
            net: Net {
                rng,
                loss: 0,
                dup: 0,
                delay_ns: 200_000,
                long_delay: 0,
                base_ns: 0,
                lossy_answers: true,
                replay: 0,
                replay_max_ns: 0,
                in_flight: Vec::new(),
            },
            stream_seed: seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1,
            cfg: sender::Config::DEFAULT,
            ack_every: 16,
            stale_naks: 0,
            peer_limit_drops: 0,
            reclaimed: 0,
            parking: false,
            parked: 0,
            rate_pps: 0,
            rate_credit_ns: 0,
            ack_delay_ns: 0,
            retransmitted: 0,
            timeouts: 0,
            replays_after_reclaim: 0,
            challenges: 0,
            bad_cookies: 0,
        }
    }

    fn post_recvs(&mut self, node: usize, n: u32, len: u32) {
        let nd = &mut self.nodes[node];
        for _ in 0..n {
            let h = nd.next_recv;
            nd.next_recv += 1;
            nd.recvs.insert(
                h,
                Recv {
                    buf: std::vec![0; len as usize],
                    claimed_by: None,
                },
            );
            nd.rq.push_back(h);
        }
    }

    fn post(&mut self, src: usize, dst: usize, op: Op, len: u32, bad_rkey: bool) -> usize {
        let id = self.msgs.len();
        self.msgs.push(Msg {
            src,
            dst,
            op,
            len,
            bad_rkey,
            status: None,
            delivered: 0,
            recv_failed: 0,
            placed: std::vec![0; (len.max(1) as usize).div_ceil(MTU as usize)],
        });
        self.nodes[src].queued.entry(dst).or_default().push_back(id);
        self.admit(src, dst);
        id
    }

    /// Moves queued messages into the destination's stream while it has
    /// room, creating the stream on first use.
    fn admit(&mut self, src: usize, dst: usize) {
        loop {
            let now = self.now;
            let nd = &mut self.nodes[src];
            let Some(&id) = nd.queued.get(&dst).and_then(|q| q.front()) else {
                return;
            };
            if let std::collections::btree_map::Entry::Vacant(e) = nd.send.entry(dst) {
                self.stream_seed = self
                    .stream_seed
                    .wrapping_mul(6364136223846793005)
                    .wrapping_add(1442695040888963407);
                let stream = self.stream_seed | 1;
                let first = Psn::new((self.stream_seed >> 40) as u32);
                e.insert(SendStream::new(stream, first, self.cfg, now));
            }
            let s = nd.send.get_mut(&dst).unwrap();
            let m = Message {
                wqe: id as u32,
                len: self.msgs[id].len,
                mtu: MTU,
            };
            if nd.msgs.len() <= id {
                nd.msgs.resize(id + 1, SendMsg::FREE);
            }
            let Some(seq) = s.post(&mut nd.msgs, m, now) else {
                return;
            };
            let stream = s.stream();
            nd.ids.insert((stream, seq), id);
            nd.queued.get_mut(&dst).unwrap().pop_front();
        }
    }

    /// Sending time one data packet costs (0: no rate limit).
    fn packet_cost_ns(&self) -> u64 {
        1_000_000_000u64.checked_div(self.rate_pps).unwrap_or(0)
    }

    fn transmit(&mut self) {
        if self.rate_pps != 0 {
            self.rate_credit_ns = (self.rate_credit_ns + STEP_NS).min(2 * STEP_NS);
        }
        for src in 0..self.nodes.len() {
            let dsts: Vec<usize> = self.nodes[src].send.keys().copied().collect();
            for dst in dsts {
                for _ in 0..64 {
                    let cost = self.packet_cost_ns();
                    if self.rate_credit_ns < cost {
                        break;
                    }
                    let now = self.now;
                    let nd = &mut self.nodes[src];
                    let s = nd.send.get_mut(&dst).unwrap();
                    let Some(tx) = s.next_packet(&mut nd.msgs, now) else {
                        break;
                    };
                    self.rate_credit_ns -= cost;
                    self.retransmitted += u64::from(tx.retransmit);
                    let stream = s.stream();
                    let id = tx.wqe as usize;
                    let msg = &self.msgs[id];
                    debug_assert_eq!(
                        self.nodes[src].ids.get(&(stream, tx.xeth.msg_seq)),
                        Some(&id)
                    );
                    let pkt = DataPacket {
                        psn: tx.psn,
                        xeth: tx.xeth,
                        op: msg.op,
                        offset: u64::from(tx.offset),
                        dma_len: tx.msg_len,
                        len: tx.len,
                        ack_req: tx.ack_req,
                        cookie: tx.cookie,
                    };
                    self.net.send(
                        now,
                        Wire {
                            src,
                            dst,
                            payload: Payload::Data {
                                pkt,
                                id,
                                offset: tx.offset,
                                replayed: false,
                            },
                        },
                    );
                }
                self.complete_sends(src, dst);
            }
        }
    }

    fn complete_sends(&mut self, src: usize, dst: usize) {
        while let Some((wqe, status)) = {
            let nd = &mut self.nodes[src];
            nd.send
                .get_mut(&dst)
                .and_then(|s| s.next_completion(&mut nd.msgs))
        } {
            let m = &mut self.msgs[wqe as usize];
            assert_eq!((m.src, m.dst), (src, dst));
            assert!(m.status.is_none(), "message {wqe} completed twice");
            m.status = Some(status);
        }
        self.admit(src, dst);
    }

    fn answer(&mut self, from: usize, to: usize, a: Answer) {
        let now = self.now;
        self.net.send(
            now,
            Wire {
                src: from,
                dst: to,
                payload: Payload::Answer(a),
            },
        );
    }

    fn ack(&mut self, node: usize, src: usize, nak: Option<(Nak, Psn)>) {
        let inc = self.nodes[node].inc;
        let Some(r) = self.nodes[node].recv.get_mut(&src) else {
            return;
        };
        let info = r.ack();
        self.answer(
            node,
            src,
            Answer {
                stream: info.stream,
                inc,
                base: info.base,
                sack: info.sack,
                nak,
            },
        );
    }

    fn drain_recv_done(&mut self, node: usize, src: usize) {
        while let Some(done) = self.nodes[node]
            .recv
            .get_mut(&src)
            .and_then(|r| r.next_done())
        {
            self.finish_recv(node, done);
        }
    }

    fn finish_recv(&mut self, node: usize, done: receiver::RecvDone) {
        let r = self.nodes[node]
            .recvs
            .remove(&done.recv)
            .expect("receive completed twice");
        let id = r.claimed_by.expect("completed receive was claimed");
        let m = &mut self.msgs[id];
        assert_eq!(m.dst, node);
        if done.status == RecvStatus::Success {
            m.delivered += 1;
            assert_eq!(done.len, m.len);
            if m.op.is_send() {
                for i in 0..m.len {
                    assert_eq!(
                        r.buf[(GRH_LEN + i) as usize],
                        pattern(id, i),
                        "message {id} byte {i}"
                    );
                }
            }
        } else {
            m.recv_failed += 1;
        }
    }

    fn on_data(&mut self, node: usize, src: usize, pkt: DataPacket, id: usize, offset: u32) {
        let now = self.now;
        let inc = self.nodes[node].inc;
        if !pkt.is_well_formed(MAX_MSG_LEN) {
            return;
        }
        if receiver::is_stale(pkt.xeth.peer_inc, inc) {
            self.stale_naks += 1;
            self.answer(
                node,
                src,
                Answer {
                    stream: pkt.xeth.stream,
                    inc,
                    base: Psn::new(0),
                    sack: 0,
                    nak: Some((Nak::StaleIncarnation, pkt.psn)),
                },
            );
            return;
        }
        // Rules 2 and 3, with the stream cookie.
        let binding = binding(src, node, pkt.xeth.stream);
        let key = self.nodes[node].key;
        let valid = key.verify(&binding, &pkt.cookie);
        let held = self.nodes[node].recv.get(&src).map(|r| r.held(now));
        match receiver::admit(held, &pkt, valid, now) {
            Admission::Held => {}
            Admission::Open if held.is_some() => {
                self.reclaim_recv(node, src);
                self.nodes[node]
                    .recv
                    .insert(src, RecvStream::new(&pkt, now));
            }
            Admission::Open => {
                if self.nodes[node].recv.len() >= self.nodes[node].max_peers {
                    self.peer_limit_drops += 1;
                    return;
                }
                self.nodes[node]
                    .recv
                    .insert(src, RecvStream::new(&pkt, now));
            }
            Admission::OtherStream => return,
            Admission::Challenge => {
                self.challenges += 1;
                let cookie = key.issue(&binding, now);
                let now = self.now;
                self.net.send(
                    now,
                    Wire {
                        src: node,
                        dst: src,
                        payload: Payload::Challenge {
                            stream: pkt.xeth.stream,
                            inc,
                            cookie,
                        },
                    },
                );
                return;
            }
            Admission::BadCookie => {
                self.bad_cookies += 1;
                return;
            }
        }
        let check = self.nodes[node]
            .recv
            .get_mut(&src)
            .unwrap()
            .check(&pkt, now);
        self.drain_recv_done(node, src);
        let mut plan = match check {
            Check::Duplicate => return self.ack(node, src, None),
            Check::BeyondWindow | Check::Inconsistent => return,
            Check::Refuse(r) => return self.nak(node, src, r, pkt.psn),
            Check::Place(plan) => plan,
        };
        let msg_bad_rkey = self.msgs[id].bad_rkey;
        // Step 5 before 6: a WRITE's access is checked before it claims.
        if !pkt.op.is_send() && msg_bad_rkey {
            self.nodes[node]
                .recv
                .get_mut(&src)
                .unwrap()
                .refuse(&plan, Refusal::RemoteAccess);
            self.drain_recv_done(node, src);
            return self.nak(node, src, Refusal::RemoteAccess, pkt.psn);
        }
        if plan.claim {
            let Some(h) = self.nodes[node].rq.pop_front() else {
                self.nodes[node]
                    .recv
                    .get_mut(&src)
                    .unwrap()
                    .refuse(&plan, Refusal::ReceiverNotReady);
                return self.nak(node, src, Refusal::ReceiverNotReady, pkt.psn);
            };
            let len = self.nodes[node].recvs[&h].buf.len() as u32;
            self.nodes[node].recvs.get_mut(&h).unwrap().claimed_by = Some(id);
            let r = self.nodes[node]
                .recv
                .get_mut(&src)
                .unwrap()
                .claimed(&mut plan, &pkt, h, len);
            if let Err(why) = r {
                self.drain_recv_done(node, src);
                return self.nak(node, src, why, pkt.psn);
            }
        }
        // Place.
        let chunk = (offset / MTU) as usize;
        self.msgs[id].placed[chunk] += 1;
        assert_eq!(
            self.msgs[id].placed[chunk], 1,
            "message {id} chunk {chunk} placed twice"
        );
        if pkt.op.is_send() {
            let buf = &mut self.nodes[node].recvs.get_mut(&plan.recv).unwrap().buf;
            for i in 0..pkt.len {
                buf[(plan.recv_offset + i) as usize] = pattern(id, offset + i);
            }
        }
        let ack_every = self.ack_every;
        let r = self.nodes[node].recv.get_mut(&src).unwrap();
        let c = r.commit(&plan, ack_every);
        assert!(c.committed);
        if pkt.ack_req {
            r.note_ack_request(pkt.psn);
        }
        if c.ack_now || pkt.ack_req {
            self.ack(node, src, None);
        } else {
            r.owe_ack(now);
        }
        self.drain_recv_done(node, src);
    }

    fn nak(&mut self, node: usize, src: usize, why: Refusal, psn: Psn) {
        let nak = match why {
            Refusal::ReceiverNotReady => Nak::ReceiverNotReady(1),
            Refusal::RemoteAccess => Nak::RemoteAccess,
            Refusal::InvalidRequest => Nak::InvalidRequest,
        };
        self.ack(node, src, Some((nak, psn)));
    }

    fn reclaim_recv(&mut self, node: usize, src: usize) {
        if let Some(r) = self.nodes[node].recv.get_mut(&src) {
            r.abandon_all();
        }
        self.drain_recv_done(node, src);
        self.nodes[node].recv.remove(&src);
        self.reclaimed += 1;
    }

    fn deliver(&mut self) {
        let now = self.now;
        let mut due = Vec::new();
        self.net.in_flight.retain(|(t, w)| {
            if *t <= now {
                due.push(*w);
                false
            } else {
                true
            }
        });
        // Arrival order among the due ones is random too.
        for i in (1..due.len()).rev() {
            let j = self.net.rng.draw(i as u64 + 1) as usize;
            due.swap(i, j);
        }
        for w in due {
            if self.nodes[w.dst].deaf {
                continue;
            }
            match w.payload {
                Payload::Data {
                    pkt,
                    id,
                    offset,
                    replayed,
                } => {
                    if replayed && !self.nodes[w.dst].recv.contains_key(&w.src) {
                        self.replays_after_reclaim += 1;
                    }
                    self.on_data(w.dst, w.src, pkt, id, offset)
                }
                Payload::Answer(a) => {
                    let nd = &mut self.nodes[w.dst];
                    if let Some(s) = nd.send.get_mut(&w.src) {
                        s.on_answer(&mut nd.msgs, &a, now);
                    }
                    self.complete_sends(w.dst, w.src);
                }
                Payload::Challenge {
                    stream,
                    inc,
                    cookie,
                } => {
                    if let Some(s) = self.nodes[w.dst].send.get_mut(&w.src) {
                        s.on_challenge(stream, inc, cookie, now);
                    }
                }
            }
        }
    }

    fn timers(&mut self, tick: u64) {
        let now = self.now;
        for node in 0..self.nodes.len() {
            let dsts: Vec<usize> = self.nodes[node].send.keys().copied().collect();
            for dst in dsts {
                let nd = &mut self.nodes[node];
                let s = nd.send.get_mut(&dst).unwrap();
                let outcome = if s.next_deadline().is_some_and(|t| t <= now) {
                    s.on_timer(&mut nd.msgs, now)
                } else {
                    TimerOutcome::Idle
                };
                self.timeouts += u64::from(outcome == TimerOutcome::Probe);
                if outcome == TimerOutcome::DestinationFailed {
                    // The driver fails what it still queues for the
                    // destination.
                    let q: Vec<usize> = self.nodes[node]
                        .queued
                        .get_mut(&dst)
                        .map(|q| q.drain(..).collect())
                        .unwrap_or_default();
                    for id in q {
                        self.msgs[id].status = Some(SendStatus::RetryExceeded);
                    }
                }
                self.complete_sends(node, dst);
            }
            // Delayed ACKs.
            let srcs: Vec<usize> = self.nodes[node].recv.keys().copied().collect();
            for src in srcs {
                if self.nodes[node].recv[&src]
                    .ack_owed()
                    .is_some_and(|since| now >= since + self.ack_delay_ns)
                {
                    self.ack(node, src, None);
                }
            }
            if self.parking {
                self.park_round_trip(node);
            }
            // The reclaim timer, every QUIET / 4.
            if tick.is_multiple_of(QUIET_NS / 4 / STEP_NS) {
                let srcs: Vec<usize> = self.nodes[node].recv.keys().copied().collect();
                for src in srcs {
                    if self.nodes[node].recv[&src].is_quiet(now) {
                        self.reclaim_recv(node, src);
                    }
                }
                self.nodes[node].send.retain(|_, s| !s.is_idle(now));
            }
        }
    }

    /// Every stream of `node` at rest parked and taken back.
    fn park_round_trip(&mut self, node: usize) {
        let now = self.now;
        let cfg = self.cfg;
        let nd = &mut self.nodes[node];
        for s in nd.send.values_mut() {
            if let Some(p) = s.park(now, 0) {
                *s = p.unpark(cfg);
                self.parked += 1;
            }
        }
        for r in nd.recv.values_mut() {
            if let Some(p) = r.park(now, 0) {
                *r = p.unpark();
                self.parked += 1;
            }
        }
    }

    /// Destroys node's QP and creates one with the same number: all its
    /// state goes, its posted work fails, a new incarnation.
    fn recreate(&mut self, node: usize) {
        let nd = &mut self.nodes[node];
        for (_, s) in nd.send.iter_mut() {
            s.abort(&mut nd.msgs, SendStatus::RetryExceeded);
        }
        let dsts: Vec<usize> = nd.send.keys().copied().collect();
        for dst in dsts {
            while let Some((wqe, st)) = {
                let nd = &mut self.nodes[node];
                nd.send.get_mut(&dst).unwrap().next_completion(&mut nd.msgs)
            } {
                self.msgs[wqe as usize].status = Some(st);
            }
        }
        let nd = &mut self.nodes[node];
        for (_, q) in std::mem::take(&mut nd.queued) {
            for id in q {
                self.msgs[id].status = Some(SendStatus::RetryExceeded);
            }
        }
        let srcs: Vec<usize> = nd.recv.keys().copied().collect();
        for src in srcs {
            self.reclaim_recv(node, src);
        }
        let nd = &mut self.nodes[node];
        nd.send.clear();
        nd.generation += 1;
        nd.key = CookieKey::new(
            u64::from(nd.inc).wrapping_mul(0x9e37_79b9_7f4a_7c15),
            u64::from(nd.generation),
        );
        nd.inc = nd
            .inc
            .wrapping_mul(2_654_435_761)
            .wrapping_add(nd.generation)
            | 1;
        // Unclaimed receives are flushed with the QP.
        for h in std::mem::take(&mut nd.rq) {
            nd.recvs.remove(&h);
        }
        nd.ids.clear();
    }

    fn run_for(&mut self, ns: u64) {
        let ticks = ns / STEP_NS;
        for _ in 0..ticks {
            self.now += STEP_NS;
            let tick = self.now / STEP_NS;
            self.deliver();
            self.timers(tick);
            self.transmit();
        }
    }

    /// Runs for `ns` in steps of 10 ms: a stretch where nothing but late
    /// copies and timers happen (minutes of it at the fine step would
    /// make a slow test). The reclaim scan still runs every `QUIET / 4`.
    fn idle(&mut self, ns: u64) {
        const COARSE: u64 = 10_000_000;
        for _ in 0..ns / COARSE {
            self.now += COARSE;
            let tick = self.now / STEP_NS;
            self.deliver();
            self.timers(tick);
            self.transmit();
        }
    }

    /// Runs until every message has completed at its sender (or `limit`
    /// passes), then long enough for the reclaim timers to fail any
    /// receive left claimed.
    fn settle(&mut self, limit: u64) {
        let end = self.now + limit;
        while self.now < end && self.msgs.iter().any(|m| m.status.is_none()) {
            self.run_for(10_000_000);
        }
        self.net.loss = 0;
        self.net.dup = 0;
        self.run_for(QUIET_NS + LIFETIME_NS + QUIET_NS / 2);
    }

    fn verify(&self) {
        for (id, m) in self.msgs.iter().enumerate() {
            let status = m
                .status
                .unwrap_or_else(|| panic!("message {id} {m:?} never completed"));
            let claims = m.op.claims_receive();
            match status {
                SendStatus::Success => {
                    if claims {
                        assert_eq!(m.delivered, 1, "message {id} {m:?}");
                    }
                    assert!(m.placed.iter().all(|&p| p == 1), "message {id} {m:?}");
                }
                _ => assert!(m.delivered <= 1, "message {id} {m:?}"),
            }
            assert!(
                m.delivered + m.recv_failed <= 1,
                "message {id} claimed twice: {m:?}"
            );
        }
        for (n, nd) in self.nodes.iter().enumerate() {
            for (h, r) in &nd.recvs {
                assert!(
                    r.claimed_by.is_none(),
                    "node {n} receive {h} claimed but never completed"
                );
            }
        }
    }
}

fn random_traffic(m: &mut Model, seed: u64, messages: usize, ops: &[Op]) {
    let mut rng = Rng::new(seed);
    let n = m.nodes.len();
    for i in 0..messages {
        let src = rng.draw(n as u64) as usize;
        let mut dst = rng.draw(n as u64 - 1) as usize;
        if dst >= src {
            dst += 1;
        }
        let op = ops[i % ops.len()];
        let len = match rng.draw(4) {
            0 => rng.draw(8) as u32,
            1 => rng.draw(MTU as u64 * 2) as u32,
            _ => rng.draw(MTU as u64 * 40) as u32,
        };
        m.post(src, dst, op, len, false);
        if rng.chance(100) {
            m.run_for(rng.draw(3_000_000));
        }
    }
}

fn lossy(seed: u64) -> Model {
    let mut m = Model::new(3, seed);
    m.net.loss = 50;
    m.net.dup = 50;
    m.net.delay_ns = 2_000_000;
    m.net.long_delay = 2;
    for n in 0..3 {
        m.post_recvs(n, 400, GRH_LEN + MTU * 40);
    }
    m
}

const ALL_OPS: [Op; 4] = [Op::Send, Op::Write, Op::SendImm, Op::WriteImm];

#[test]
fn lossless_delivers_every_message_once() {
    let mut m = Model::new(3, 7);
    for n in 0..3 {
        m.post_recvs(n, 200, GRH_LEN + MTU * 40);
    }
    random_traffic(&mut m, 11, 200, &ALL_OPS);
    m.settle(60_000_000_000);
    m.verify();
    assert!(m.msgs.iter().all(|x| x.status == Some(SendStatus::Success)));
}

#[test]
fn loss_duplication_and_reordering_deliver_exactly_once() {
    for seed in 1..=6u64 {
        let mut m = lossy(seed);
        random_traffic(&mut m, seed * 77, 150, &ALL_OPS);
        m.settle(120_000_000_000);
        m.verify();
        let ok = m
            .msgs
            .iter()
            .filter(|x| x.status == Some(SendStatus::Success))
            .count();
        assert_eq!(
            ok,
            m.msgs.len(),
            "seed {seed}: 5% loss must not exhaust retries"
        );
    }
}

#[test]
fn parked_streams_go_on_exactly_once() {
    for seed in 1..=3u64 {
        let mut m = lossy(seed);
        m.parking = true;
        random_traffic(&mut m, seed * 91, 150, &ALL_OPS);
        m.settle(120_000_000_000);
        m.verify();
        assert!(
            m.msgs.iter().all(|x| x.status == Some(SendStatus::Success)),
            "seed {seed}: parking lost a message"
        );
        assert!(m.parked > 100, "seed {seed}: only {} parks", m.parked);
    }
}

#[test]
fn parked_streams_are_small() {
    // Within a 192-byte peer entry (rust/driver/xud/peers.rs, whose static
    // assertions are the judge): the tree node, the key, where answers go,
    // the queue and both. The sending one grew by its 12-byte cookie
    // (xud.rst, "Stream cookies"); the receiving one by its cookie's time
    // and its source's proof (xud.rst, "Receive resources").
    assert!(core::mem::size_of::<receiver::ParkedRecv>() <= 56);
    assert!(core::mem::size_of::<sender::ParkedSend>() <= 40);
}

#[test]
fn streams_at_work_do_not_park() {
    let mut m = Model::new(2, 5);
    m.post_recvs(1, 10, GRH_LEN + MTU * 40);
    m.post(0, 1, Op::Send, MTU * 30, false);
    while !m.nodes[1].recv.contains_key(&0) {
        m.run_for(STEP_NS);
    }
    assert_eq!(m.msgs[0].status, None);
    let now = m.now;
    // A message in flight, and one being received.
    assert!(m.nodes[0].send[&1].park(now, 0).is_none());
    assert!(m.nodes[1].recv[&0].park(now, 0).is_none());
    m.run_for(2_000_000_000);
    assert_eq!(m.msgs[0].status, Some(SendStatus::Success));
    assert_eq!(m.msgs[0].delivered, 1);
    let now = m.now;
    // Done: at rest, but not idle for 20 s.
    assert!(m.nodes[0].send[&1].park(now, 0).is_some());
    assert!(m.nodes[1].recv[&0].park(now, 0).is_some());
    assert!(m.nodes[0].send[&1].park(now, 20_000_000_000).is_none());
    assert!(m.nodes[1].recv[&0].park(now, 20_000_000_000).is_none());
}

#[test]
fn receiver_not_ready_waits_for_receives() {
    let mut m = Model::new(2, 3);
    for i in 0..20 {
        m.post(
            0,
            1,
            if i % 2 == 0 { Op::Send } else { Op::WriteImm },
            700,
            false,
        );
    }
    m.run_for(5_000_000);
    assert!(
        m.msgs.iter().all(|x| x.status.is_none()),
        "nothing completes without receives"
    );
    m.post_recvs(1, 20, GRH_LEN + 1000);
    m.settle(20_000_000_000);
    m.verify();
    assert!(m.msgs.iter().all(|x| x.status == Some(SendStatus::Success)));
}

#[test]
fn receiver_not_ready_for_good_fails_rnr_retry_exceeded() {
    let mut m = Model::new(2, 4);
    m.cfg.rnr_retry = 2;
    let id = m.post(0, 1, Op::Send, 3000, false);
    m.settle(20_000_000_000);
    m.verify();
    assert_eq!(m.msgs[id].status, Some(SendStatus::RnrRetryExceeded));
}

/// `rnr_retry` 7 waits for a receive however many RNR NAKs it takes, as
/// RC's does, within the retry span.
#[test]
fn rnr_retry_seven_waits_for_a_late_receive_past_seven_naks() {
    let mut m = Model::new(2, 4);
    m.cfg.rnr_retry = 7;
    let id = m.post(0, 1, Op::Send, 3000, false);
    // Each RNR wait is 10 us (code 1): 2 s is many more than 7 of them.
    m.run_for(2_000_000_000);
    assert_eq!(m.msgs[id].status, None, "still waiting");
    m.post_recvs(1, 1, GRH_LEN + 3000);
    m.settle(20_000_000_000);
    m.verify();
    assert_eq!(m.msgs[id].status, Some(SendStatus::Success));
}

/// ... and fails once the retry span is over, not before.
#[test]
fn rnr_retry_seven_fails_at_the_retry_span() {
    let mut m = Model::new(2, 4);
    m.cfg.rnr_retry = 7;
    let id = m.post(0, 1, Op::Send, 3000, false);
    let t0 = m.now;
    while m.msgs[id].status.is_none() {
        m.run_for(100_000_000);
    }
    m.verify();
    assert_eq!(m.msgs[id].status, Some(SendStatus::RnrRetryExceeded));
    let took = m.now - t0;
    assert!(
        (RETRY_SPAN_NS..RETRY_SPAN_NS + 1_000_000_000).contains(&took),
        "{took}"
    );
}

#[test]
fn a_receive_too_short_fails_both_sides() {
    let mut m = Model::new(2, 5);
    m.post_recvs(1, 1, GRH_LEN + 100);
    m.post_recvs(1, 1, GRH_LEN + 5000);
    let short = m.post(0, 1, Op::Send, 3000, false);
    m.run_for(50_000_000);
    let fits = m.post(0, 1, Op::Send, 3000, false);
    m.settle(20_000_000_000);
    m.verify();
    assert_eq!(m.msgs[short].status, Some(SendStatus::RemoteInvalidRequest));
    assert_eq!(m.msgs[short].recv_failed, 1);
    assert_eq!(m.msgs[fits].status, Some(SendStatus::Success));
}

#[test]
fn a_refused_rkey_fails_that_message_only() {
    let mut m = lossy(8);
    let bad = m.post(0, 1, Op::Write, 5000, true);
    let bad_imm = m.post(0, 1, Op::WriteImm, 5000, true);
    random_traffic(&mut m, 5, 60, &ALL_OPS);
    m.settle(60_000_000_000);
    m.verify();
    assert_eq!(m.msgs[bad].status, Some(SendStatus::RemoteAccess));
    assert_eq!(m.msgs[bad_imm].status, Some(SendStatus::RemoteAccess));
    let ok = m
        .msgs
        .iter()
        .filter(|x| x.status == Some(SendStatus::Success))
        .count();
    assert_eq!(ok, m.msgs.len() - 2);
}

#[test]
fn a_silent_peer_fails_retry_exceeded_while_a_live_one_is_served() {
    let mut m = Model::new(3, 9);
    m.post_recvs(1, 100, GRH_LEN + MTU * 40);
    m.nodes[2].deaf = true;
    let t0 = m.now;
    let mut dead = Vec::new();
    for i in 0..40 {
        dead.push(m.post(0, 2, ALL_OPS[i % 4], 4000, false));
        m.post(0, 1, ALL_OPS[i % 4], 4000, false);
    }
    m.run_for(RETRY_SPAN_NS + 1_000_000_000);
    for &id in &dead {
        assert_eq!(m.msgs[id].status, Some(SendStatus::RetryExceeded), "{id}");
    }
    assert!(m.now - t0 <= RETRY_SPAN_NS + 1_000_000_000);
    m.settle(10_000_000_000);
    m.verify();
    let ok = m
        .msgs
        .iter()
        .filter(|x| x.dst == 1 && x.status == Some(SendStatus::Success))
        .count();
    assert_eq!(ok, 40);
}

#[test]
fn a_recreated_peer_is_reached_by_later_messages() {
    for seed in 20..24 {
        let mut m = lossy(seed);
        random_traffic(&mut m, seed, 60, &ALL_OPS);
        m.run_for(20_000_000);
        m.recreate(1);
        m.post_recvs(1, 400, GRH_LEN + MTU * 40);
        // What node 0 has in flight to the old QP fails when the stale
        // NAK comes back (it may have reached the old QP); what it posts
        // once it knows the new incarnation gets through.
        // Forty packets: forty stale NAKs, the later ones arriving after
        // the first made node 0 adopt the new incarnation; they must not
        // fail what node 0 sends after that.
        let stale = m.post(0, 1, Op::Send, MTU * 40, false);
        while m.msgs[stale].status.is_none() {
            m.run_for(10_000_000);
        }
        assert!(m.stale_naks > 0);
        let later: Vec<usize> = (0..30)
            .map(|i| m.post(0, 1, ALL_OPS[i % 4], 2000, false))
            .collect();
        m.settle(60_000_000_000);
        m.verify();
        for id in later {
            assert_eq!(
                m.msgs[id].status,
                Some(SendStatus::Success),
                "seed {seed} message {id}"
            );
        }
    }
}

#[test]
fn reclaim_mid_stream_with_late_copies_delivers_no_duplicate() {
    for seed in 30..34 {
        let mut m = lossy(seed);
        m.net.long_delay = 100;
        random_traffic(&mut m, seed, 60, &ALL_OPS);
        m.settle(60_000_000_000);
        // The receivers have reclaimed their state; the senders' streams
        // are still there (SENDER_IDLE is longer). Late copies of old
        // packets are still in the network with the next messages.
        assert!(m.reclaimed > 0);
        random_traffic(&mut m, seed + 100, 60, &ALL_OPS);
        m.settle(60_000_000_000);
        m.verify();
        let ok = m
            .msgs
            .iter()
            .filter(|x| x.status == Some(SendStatus::Success))
            .count();
        assert_eq!(ok, m.msgs.len(), "seed {seed}");
    }
}

#[test]
fn the_peer_limit_refuses_new_peers_and_evicts_none() {
    let mut m = Model::new(3, 40);
    m.nodes[0].max_peers = 1;
    m.post_recvs(0, 100, GRH_LEN + MTU * 40);
    let first: Vec<usize> = (0..10)
        .map(|i| m.post(1, 0, ALL_OPS[i % 4], 3000, false))
        .collect();
    m.run_for(1_000_000);
    let second: Vec<usize> = (0..10)
        .map(|i| m.post(2, 0, ALL_OPS[i % 4], 3000, false))
        .collect();
    m.settle(60_000_000_000);
    m.verify();
    assert!(m.peer_limit_drops > 0);
    for id in first {
        assert_eq!(m.msgs[id].status, Some(SendStatus::Success));
    }
    // The second source got in only after the first went quiet, if at
    // all within its retry span: either way nothing was delivered twice.
    for id in second {
        assert!(m.msgs[id].status.is_some());
    }
}

#[test]
fn a_sender_gone_mid_message_fails_the_claimed_receive_in_time() {
    let mut m = Model::new(2, 50);
    m.post_recvs(1, 1, GRH_LEN + MTU * 40);
    let id = m.post(0, 1, Op::Send, MTU * 40, false);
    // Lose every fourth packet so the message stays open at the receiver.
    m.net.loss = 250;
    m.run_for(2_000_000);
    assert!(m.msgs[id].placed.contains(&1));
    m.recreate(0);
    let gone = m.now;
    m.net.loss = 0;
    while m.msgs[id].recv_failed == 0 && m.now - gone <= LIFETIME_NS + QUIET_NS * 5 / 4 {
        m.run_for(100_000_000);
    }
    assert_eq!(
        m.msgs[id].recv_failed, 1,
        "the claimed receive completes in error"
    );
    assert!(m.now - gone <= LIFETIME_NS + QUIET_NS * 5 / 4 + 100_000_000);
    m.verify();
}

#[test]
fn a_message_given_up_fails_its_receive_at_the_next_packet() {
    let mut m = Model::new(2, 60);
    m.post_recvs(1, 2, GRH_LEN + MTU * 40);
    let a = m.post(0, 1, Op::Send, MTU * 40, false);
    // The challenge's round trip first (lossless), then the message at
    // 25% loss: the loss starts as the challenge is on its way back.
    while m.challenges == 0 {
        m.run_for(STEP_NS);
    }
    m.net.loss = 250;
    m.run_for(600_000);
    assert!(m.msgs[a].placed.contains(&1));
    assert!(m.msgs[a].placed.contains(&0));
    // The receiver goes deaf until the sender gives the message up.
    m.nodes[1].deaf = true;
    m.net.loss = 0;
    while m.msgs[a].status.is_none() {
        m.run_for(100_000_000);
    }
    assert_eq!(m.msgs[a].status, Some(SendStatus::RetryExceeded));
    assert_eq!(m.msgs[a].recv_failed, 0, "not reclaimed yet");
    m.nodes[1].deaf = false;
    // Rule 4: the next message's packets carry the sender's oldest_msg,
    // and the abandoned receive fails at once, not after QUIET.
    let b = m.post(0, 1, Op::Send, 100, false);
    m.run_for(50_000_000);
    assert_eq!(m.msgs[b].status, Some(SendStatus::Success));
    assert_eq!(m.msgs[a].recv_failed, 1);
    m.settle(1_000_000_000);
    m.verify();
}

#[test]
fn answers_of_another_stream_or_past_the_sent_psns_are_ignored() {
    let first = Psn::new(0xff_fffe);
    let mut s = stream_of_one_message(first, 3);
    for _ in 0..3 {
        s.next_packet(0).unwrap();
    }
    let all = Answer {
        stream: 42,
        inc: 9,
        base: first.add(3),
        sack: 0,
        nak: None,
    };
    let forged = Answer { stream: 43, ..all };
    assert_eq!(s.on_answer(&forged, 1), sender::AnswerOutcome::Ignored);
    let beyond = Answer {
        base: first.add(4),
        ..all
    };
    assert_eq!(s.on_answer(&beyond, 1), sender::AnswerOutcome::Ignored);
    assert_eq!(s.next_completion(), None);
    assert_eq!(s.peer_inc(), 0, "nothing adopted from an ignored answer");
    assert_eq!(s.on_answer(&all, 1), sender::AnswerOutcome::Taken);
    assert_eq!(s.next_completion(), Some((1, SendStatus::Success)));
    assert_eq!(s.peer_inc(), 9);
}

#[test]
fn a_nak_acknowledges_its_base_and_sack_never_its_own_psn() {
    let first = Psn::new(100);
    let mut s = Solo::new(42, first, sender::Config::DEFAULT, 0);
    for wqe in 0..2 {
        s.post(
            Message {
                wqe,
                len: MTU,
                mtu: MTU,
            },
            0,
        );
    }
    s.next_packet(0).unwrap();
    s.next_packet(0).unwrap();
    // The receiver placed PSN 101 (sack bit 0 after base 100) and has no
    // receive for 100.
    let rnr = Answer {
        stream: 42,
        inc: 9,
        base: first,
        sack: 1,
        nak: Some((Nak::ReceiverNotReady(1), first)),
    };
    s.on_answer(&rnr, 10);
    assert_eq!(s.next_completion(), Some((1, SendStatus::Success)));
    assert_eq!(s.next_completion(), None, "PSN 100 is not acknowledged");
    assert_eq!(s.next_packet(11), None, "the RNR wait runs");
    let again = s.next_packet(10 + 1_000_000).unwrap();
    assert_eq!((again.psn, again.retransmit), (first, true));
}

#[test]
fn the_retry_span_bounds_a_long_backoff() {
    let mut m = Model::new(2, 70);
    m.nodes[1].deaf = true;
    // 4.3 s timeouts doubling: the second expiry alone would be at 12.9 s.
    m.cfg.timeout = 20;
    let id = m.post(0, 1, Op::Send, 100, false);
    let t0 = m.now;
    while m.msgs[id].status.is_none() {
        m.run_for(100_000_000);
    }
    assert_eq!(m.msgs[id].status, Some(SendStatus::RetryExceeded));
    assert!(
        m.now - t0 <= RETRY_SPAN_NS + 200_000_000,
        "{} ns",
        m.now - t0
    );
}

#[test]
fn a_late_stale_nak_or_old_ack_does_not_touch_messages_of_the_new_incarnation() {
    let first = Psn::new(10);
    let mut s = Solo::new(42, first, sender::Config::DEFAULT, 0);
    let msg = |wqe| Message {
        wqe,
        len: 3 * MTU,
        mtu: MTU,
    };
    let answer = |inc, base: Psn, nak| Answer {
        stream: 42,
        inc,
        base,
        sack: 0,
        nak,
    };
    // The old incarnation (5) acknowledges nothing yet but is known.
    s.post(msg(1), 0);
    let p1 = s.next_packet(0).unwrap();
    assert_eq!(
        s.on_answer(&answer(5, first, None), 1),
        sender::AnswerOutcome::Taken
    );
    s.next_packet(1).unwrap();
    s.next_packet(1).unwrap();
    assert_eq!(p1.xeth.peer_inc, 0);
    // The QP was re-created (incarnation 9): the first stale NAK fails the
    // message that reached the old one.
    let stale = Some((Nak::StaleIncarnation, p1.psn));
    assert_eq!(
        s.on_answer(&answer(9, Psn::new(0), stale), 2),
        sender::AnswerOutcome::Taken
    );
    assert_eq!(s.next_completion(), Some((1, SendStatus::RetryExceeded)));
    assert_eq!(s.peer_inc(), 9);
    // The new QP's cookie key is another: the old cookie goes, and the
    // new QP's challenge gives the next.
    assert!(s.cookie().is_none());
    assert_eq!(
        s.s.on_challenge(42, 9, Cookie::new(2, 2), 3),
        sender::AnswerOutcome::Taken
    );
    s.post(msg(2), 3);
    let q = s.next_packet(3).unwrap();
    assert_eq!(q.xeth.peer_inc, 9);
    s.next_packet(3).unwrap();
    s.next_packet(3).unwrap();
    // The stale NAKs of the old message's other packets come late.
    let late = Some((Nak::StaleIncarnation, p1.psn.next()));
    assert_eq!(
        s.on_answer(&answer(9, Psn::new(0), late), 4),
        sender::AnswerOutcome::Ignored
    );
    // So does an ACK of the old incarnation, whatever it claims.
    assert_eq!(
        s.on_answer(&answer(5, q.psn.add(3), None), 4),
        sender::AnswerOutcome::Ignored
    );
    assert_eq!(
        s.next_completion(),
        None,
        "message 2 neither failed nor acknowledged"
    );
    assert_eq!(
        s.on_answer(&answer(9, q.psn.add(3), None), 6),
        sender::AnswerOutcome::Taken
    );
    assert_eq!(s.next_completion(), Some((2, SendStatus::Success)));
}

/// A stream with a message table of its own (WQE handles below 64), for
/// the tests that drive one by hand: the stream's calls, the table
/// passed for them.
struct Solo {
    s: SendStream,
    t: Vec<SendMsg>,
}

impl Solo {
    /// A stream that holds a cookie already (the challenge is the
    /// model's business, not these tests').
    fn new(stream: u64, first: Psn, cfg: sender::Config, now: u64) -> Self {
        let mut s = SendStream::new(stream, first, cfg, now);
        let taken = s.on_challenge(stream, 1, Cookie::new(1, 1), now);
        assert_eq!(taken, sender::AnswerOutcome::Taken);
        Solo {
            s,
            t: std::vec![SendMsg::FREE; 64],
        }
    }
    fn post(&mut self, m: Message, now: u64) -> Option<u32> {
        self.s.post(&mut self.t, m, now)
    }
    fn next_packet(&mut self, now: u64) -> Option<sender::TxPacket> {
        self.s.next_packet(&mut self.t, now)
    }
    fn next_packet_if(&mut self, now: u64, new_allowed: bool) -> Option<sender::TxPacket> {
        self.s.next_packet_if(&mut self.t, now, new_allowed)
    }
    fn on_answer(&mut self, a: &Answer, now: u64) -> sender::AnswerOutcome {
        self.s.on_answer(&mut self.t, a, now)
    }
    fn on_timer(&mut self, now: u64) -> TimerOutcome {
        self.s.on_timer(&mut self.t, now)
    }
    fn next_completion(&mut self) -> Option<(u32, SendStatus)> {
        self.s.next_completion(&mut self.t)
    }
    fn has_new(&self) -> bool {
        self.s.has_new(&self.t)
    }
}

impl core::ops::Deref for Solo {
    type Target = SendStream;
    fn deref(&self) -> &SendStream {
        &self.s
    }
}

/// Stream 42 from `first`, with one message (WQE 1) of `packets` MTUs
/// posted.
fn stream_of_one_message(first: Psn, packets: u32) -> Solo {
    // The whole pipe at once: these tests look at what it holds.
    let cfg = sender::Config {
        initial_window: super::PIPE,
        ..sender::Config::DEFAULT
    };
    let mut s = Solo::new(42, first, cfg, 0);
    s.post(
        Message {
            wqe: 1,
            len: packets * MTU,
            mtu: MTU,
        },
        0,
    );
    s
}

/// An ACK or NAK-free answer of stream 42's receiver (incarnation 9).
pub(super) fn answer_of(base: Psn, sack: u128) -> Answer {
    Answer {
        stream: 42,
        inc: 9,
        base,
        sack,
        nak: None,
    }
}

/// Sends `n` packets of `s` at `now`: their PSNs and whether each was a
/// resend.
fn send_n(s: &mut Solo, n: usize, now: u64) -> Vec<(Psn, bool)> {
    (0..n)
        .map(|_| s.next_packet(now).map(|p| (p.psn, p.retransmit)).unwrap())
        .collect()
}

/// The reorder rule: a hole is resent once PSNs `REORDER` past it are
/// acknowledged and the reorder delay has passed; when that resend is
/// lost too, packets sent after it pass it by `REORDER`, and it goes a
/// third time the same way, not after the retransmit timeout (which cost
/// `make bench`'s lossy runs nearly half their goodput).
#[test]
fn a_resend_lost_again_goes_again_once_later_packets_pass_it() {
    let first = Psn::new(1000);
    let mut s = stream_of_one_message(first, 100);
    let fresh = |from: u32, n: u32| {
        (from..from + n)
            .map(|i| (first.add(i), false))
            .collect::<Vec<_>>()
    };
    assert_eq!(send_n(&mut s, 4, 0), fresh(0, 4));
    // 1000 lost; 1001..=1003 placed: a hole, but not resent before the
    // reorder delay (a new packet goes instead).
    s.on_answer(&answer_of(first, 0b111), 1_000);
    assert_eq!(send_n(&mut s, 1, 1_000), fresh(4, 1));
    let due = s.next_deadline().unwrap();
    // The reorder delay (a 64th of the timeout), not the tail probe (four
    // of them) nor the timeout.
    assert!(due - 1_000 < 67_000_000 / 32, "the reorder delay: {due}");
    assert_eq!(s.on_timer(due), TimerOutcome::Resend);
    assert_eq!(send_n(&mut s, 1, due), [(first, true)]);
    // The resend is lost too. 1005..=1007 go after it, and an answer
    // shows 1001..=1007 placed: the resend was passed by REORDER.
    assert_eq!(send_n(&mut s, 3, due), fresh(5, 3));
    let t = due + 1_000;
    s.on_answer(&answer_of(first, 0b111_1111), t);
    assert_eq!(
        send_n(&mut s, 1, t),
        fresh(8, 1),
        "again after the reorder delay"
    );
    let due2 = s.next_deadline().unwrap();
    assert!(
        due2 - t < 67_000_000 / 32,
        "the reorder delay again: {}",
        due2 - t
    );
    assert_eq!(s.on_timer(due2), TimerOutcome::Resend);
    assert_eq!(send_n(&mut s, 1, due2), [(first, true)]);
    // Its ACK acknowledges all nine sent, without a timeout.
    s.on_answer(&answer_of(first.add(9), 0), due2 + 1_000);
    assert_eq!(s.in_flight(), 0);
}

/// A hole `REORDER_DEEP` (an ACK interval) behind the highest placed PSN
/// is lost whatever the reorder delay says: it goes at once, and again
/// at once if the resend is lost and as many pass it.
#[test]
fn a_deep_hole_goes_at_once() {
    let first = Psn::new(50);
    let mut s = stream_of_one_message(first, 100);
    send_n(&mut s, 20, 0);
    // 50 lost, 51..=69 placed: 19 behind the highest.
    s.on_answer(&answer_of(first, (1 << 19) - 1), 1_000);
    assert_eq!(send_n(&mut s, 1, 1_000), [(first, true)]);
    send_n(&mut s, 16, 1_000);
    // That resend lost; 70..=86 placed.
    s.on_answer(&answer_of(first, (1 << 36) - 1), 2_000);
    assert_eq!(send_n(&mut s, 1, 2_000), [(first, true)]);
    // 40 past a hole that is not deep yet: 90 lost, 91..=100 placed.
    send_n(&mut s, 14, 2_000);
    s.on_answer(&answer_of(first.add(40), (1 << 10) - 1), 3_000);
    assert!(!send_n(&mut s, 1, 3_000)[0].1, "a shallow hole waits");
}

/// A lost last packet has nothing after it to show the hole: it goes
/// again at the tail probe, four reorder delays after the last progress,
/// not at the retransmit timeout; once per stretch without progress
/// (then the timeout, as before).
#[test]
fn a_lost_tail_goes_again_at_the_tail_probe() {
    let first = Psn::new(7);
    let mut s = stream_of_one_message(first, 8);
    for _ in 0..8 {
        s.next_packet(0).unwrap();
    }
    // The first seven placed, the last lost.
    let t = 2_000_000;
    s.on_answer(&answer_of(first.add(7), 0), t);
    let due = s.next_deadline().unwrap();
    assert!(
        due > t && due - t < 67_000_000 / 8,
        "the tail probe, not the timeout: {}",
        due - t
    );
    assert_eq!(s.on_timer(due - 1), TimerOutcome::Idle);
    assert_eq!(s.on_timer(due), TimerOutcome::Resend);
    let p = s.next_packet(due).unwrap();
    assert_eq!((p.psn, p.retransmit, p.ack_req), (first.add(7), true, true));
    assert_eq!(s.next_packet(due), None);
    // That resend lost as well: the next deadline is the timeout.
    let rto = s.next_deadline().unwrap();
    assert!(
        rto - t >= 67_000_000,
        "one tail probe per stretch: {}",
        rto - t
    );
    assert_eq!(s.on_timer(rto), TimerOutcome::Probe);
    let p = s.next_packet(rto).unwrap();
    assert_eq!(p.psn, first.add(7));
    s.on_answer(&answer_of(first.add(8), 0), rto + 1);
    assert_eq!(s.in_flight(), 0);
    assert_eq!(s.next_completion(), Some((1, SendStatus::Success)));
}

/// The QP's cap on packets in flight (`MAX_QP_IN_FLIGHT`, applied by the
/// driver over all streams): with new packets not allowed, a stream gives
/// only resends; after a timeout it counts only its probe against the
/// cap.
#[test]
fn the_qp_cap_holds_back_new_packets_only() {
    let first = Psn::new(7);
    let mut s = stream_of_one_message(first, 8);
    assert!(s.has_new());
    assert_eq!(
        s.next_packet_if(0, false),
        None,
        "nothing to resend, nothing new"
    );
    for _ in 0..4 {
        assert!(!s.next_packet_if(0, true).unwrap().retransmit);
    }
    assert_eq!((s.in_flight(), s.in_network()), (4, 4));
    // Nothing answers: first the tail probe resends the oldest (a resend
    // goes at the cap), then the timeout makes it a probe.
    let tail = s.next_deadline().unwrap();
    assert_eq!(s.on_timer(tail), TimerOutcome::Resend);
    let resend = s.next_packet_if(tail, false).unwrap();
    assert_eq!(
        (resend.psn, resend.retransmit, resend.ack_req),
        (first, true, true)
    );
    assert_eq!(s.next_packet_if(tail, false), None);
    let deadline = s.next_deadline().unwrap();
    assert_eq!(s.on_timer(deadline), TimerOutcome::Probe);
    let probe = s.next_packet_if(deadline, false).unwrap();
    assert_eq!(
        (probe.psn, probe.retransmit),
        (first, true),
        "a resend goes at the cap"
    );
    assert_eq!(s.in_network(), 1, "only the probe counts while probing");
    assert_eq!(s.next_packet_if(deadline, false), None);
    // The probe's ACK ends the probing: the four are acknowledged, the
    // rest of the message may go when allowed.
    let ack = Answer {
        stream: 42,
        inc: 9,
        base: first.add(4),
        sack: 0,
        nak: None,
    };
    assert_eq!(
        s.on_answer(&ack, deadline + 1),
        sender::AnswerOutcome::Taken
    );
    assert_eq!(
        s.next_packet_if(deadline + 1, false),
        None,
        "held back at the cap"
    );
    assert!(s.has_new());
    let p = s.next_packet_if(deadline + 1, true).unwrap();
    assert_eq!((p.psn, p.retransmit), (first.add(4), false));
    for _ in 0..3 {
        s.next_packet(deadline + 1).unwrap();
    }
    assert!(!s.has_new(), "all 8 sent");
}

/// The link `make bench` measures XUD over, as the model sees it: a
/// sender whose CPU allows `RATE_PPS` data packets a second (rxud-perf's
/// 1 MB WRITE moves about 13 MB/s in 1 KB packets), a one-way delay of
/// `BASE_NS` plus up to `JITTER_NS`, the driver's 1 ms ACK delay, and
/// netem's loss on the data's way only.
const RATE_PPS: u64 = 13_000;
const BASE_NS: u64 = 400_000;
const JITTER_NS: u64 = 100_000;

/// Goodput in packets per second of `msgs` WRITEs of `packets` packets
/// each from one sender to one receiver, posted at once, with `loss`
/// per mille of the data packets lost; with the retransmissions the
/// sender made.
fn goodput(seed: u64, loss: u64, msgs: usize, packets: u32) -> (u64, u64, u64) {
    goodput_over(RATE_PPS, BASE_NS, seed, loss, msgs, packets)
}

/// [`goodput`] over a link of `rate_pps` and `base_ns` one way (plus
/// `JITTER_NS`).
fn goodput_over(
    rate_pps: u64,
    base_ns: u64,
    seed: u64,
    loss: u64,
    msgs: usize,
    packets: u32,
) -> (u64, u64, u64) {
    let mut m = Model::new(2, seed);
    m.rate_pps = rate_pps;
    m.ack_delay_ns = 1_000_000;
    m.net.base_ns = base_ns;
    m.net.delay_ns = JITTER_NS;
    m.net.loss = loss;
    m.net.lossy_answers = false;
    let start = m.now;
    for _ in 0..msgs {
        m.post(0, 1, Op::Write, packets * MTU, false);
    }
    while m.msgs.iter().any(|x| x.status.is_none()) && m.now - start < 600_000_000_000 {
        m.run_for(STEP_NS);
    }
    let took = m.now - start;
    assert!(
        m.msgs.iter().all(|x| x.status == Some(SendStatus::Success)),
        "every WRITE succeeds"
    );
    let total = msgs as u64 * u64::from(packets);
    (
        total * 1_000_000_000 / took.max(1),
        m.retransmitted,
        m.timeouts,
    )
}

/// Issue 10's target for XUD: at 1% loss at least 90% of the lossless
/// goodput. `make bench`'s "1%" run loses about 2% of the data packets:
/// the VM link drops some 1% by itself at full rate (the "lossless" 1 MB
/// WRITE resends 1 to 1.7% of its packets), so both are asserted, as
/// the mean over several seeds. A resend lost again used to wait for the
/// retransmit timeout (67 ms and doubling): 70% at 2%.
#[test]
fn one_and_two_percent_loss_keep_nine_tenths_of_the_goodput() {
    let (lossless, _, _) = goodput(1, 0, 40, 1024);
    for loss in [10, 20] {
        let seeds = 8;
        let (mut sum, mut timeouts) = (0, 0);
        for seed in 1..=seeds {
            let (g, rtx, tmo) = goodput(seed * 7919, loss, 40, 1024);
            std::println!(
                "{loss} per mille, seed {seed}: {g} packets/s ({rtx} resent, {tmo} timeouts), \
                 lossless {lossless}"
            );
            sum += g;
            timeouts += tmo;
        }
        let mean = sum / seeds;
        std::println!(
            "{loss} per mille: mean {mean} of {lossless} packets/s ({}%), {timeouts} timeouts",
            mean * 100 / lossless
        );
        assert!(
            mean * 10 >= lossless * 9,
            "{loss} per mille: {mean} of {lossless} packets/s"
        );
    }
}

/// The tap link's shape (session 16): the stream moves some 24,000
/// packets a second and the receiver's queue holds packets, so a round
/// trip under load is some 5 ms (120 packets). Recovering a hole takes
/// about two of them plus the reorder delay: with a window of 128 PSNs
/// the stream stalled at its edge on each loss (64% of lossless in the
/// model at 1%); the window of [`super::WINDOW`] with a pipe of
/// [`super::PIPE`] keeps sending past the hole.
#[test]
fn a_long_fast_path_keeps_nine_tenths_of_the_goodput_at_one_percent() {
    let (rate, base) = (24_000, 2_500_000);
    let (lossless, _, _) = goodput_over(rate, base, 1, 0, 40, 1024);
    let seeds = 6;
    let mut sum = 0;
    for seed in 1..=seeds {
        let (g, rtx, tmo) = goodput_over(rate, base, seed * 7919, 10, 40, 1024);
        std::println!("seed {seed}: {g} packets/s ({rtx} resent, {tmo} timeouts)");
        sum += g;
    }
    let mean = sum / seeds;
    std::println!(
        "1%: mean {mean} of {lossless} packets/s ({}%)",
        mean * 100 / lossless
    );
    assert!(mean * 10 >= lossless * 9, "{mean} of {lossless} packets/s");
}

/// With nothing answered a stream has [`super::PIPE`] packets out; once
/// an answer shows all but the oldest placed it sends on past that hole,
/// the placed ones no longer counted, up to the window (here the pipe
/// again fills with packets beyond what one `sack` can show), and the
/// hole goes again by the reorder rule.
#[test]
fn a_stream_sends_on_past_a_hole_within_its_window() {
    let first = Psn::new(0xff_fff0);
    let mut s = stream_of_one_message(first, 600);
    let mut sent = 0;
    while let Some(p) = s.next_packet(0) {
        assert_eq!((p.psn, p.retransmit), (first.add(sent), false));
        sent += 1;
    }
    assert_eq!(sent, super::PIPE, "the pipe holds the rest back");
    // The oldest was lost; the 127 after it were placed.
    s.on_answer(&answer_of(first, u128::MAX >> 1), 1_000);
    let mut resent = None;
    while let Some(p) = s.next_packet(1_000) {
        if p.retransmit {
            resent.get_or_insert(p.psn);
            continue;
        }
        assert_eq!(p.psn, first.add(sent));
        sent += 1;
    }
    assert_eq!(
        resent,
        Some(first),
        "a hole REORDER_DEEP behind the highest placed goes at once"
    );
    // 127 placed and out of the pipe: 127 more went, none past the window.
    assert_eq!(sent, super::PIPE + 127);
    assert!(sent < super::WINDOW);
    assert_eq!(s.in_flight(), sent);
    // The hole filled: every PSN the answer shows goes out of the window
    // and new packets go again.
    s.on_answer(&answer_of(first.add(128), 0), 2_000);
    assert_eq!(s.in_flight(), sent - 128);
    assert_eq!(s.next_packet(2_000).map(|p| p.psn), Some(first.add(sent)));
}

/// Copies of data packets held back by the network for up to three
/// minutes, far past [`LIFETIME_NS`], arrive after the receiver reclaimed
/// the quiet peer (and the sender its stream): none is placed again, and
/// every message that succeeded was placed exactly once (xud.rst, "Stream
/// cookies"). Without cookies such a copy opens a new window at its own
/// `oldest_psn` and is placed a second time.
#[test]
fn copies_delayed_minutes_past_reclaim_are_never_delivered_again() {
    for seed in 0..3u64 {
        let mut m = lossy(700 + seed);
        m.net.replay = 40;
        m.net.replay_max_ns = 180_000_000_000;
        let mut rng = Rng::new(seed);
        for round in 0..4 {
            m.net.loss = 50;
            m.net.dup = 50;
            random_traffic(&mut m, seed * 16 + round, 30, &ALL_OPS);
            m.settle(60_000_000_000);
            m.idle(rng.draw(30_000_000_000));
        }
        m.idle(m.net.replay_max_ns + QUIET_NS);
        assert!(m.net.in_flight.is_empty());
        m.verify();
        assert!(
            m.replays_after_reclaim > 0,
            "seed {seed}: no late copy met a reclaimed receiver"
        );
    }
}

/// An off-path forger (it never sees a challenge) that knows the source's
/// address and QPN, the Q_Key and even the stream and a PSN: its packets,
/// without a cookie or with a made-up one, place nothing, neither in the
/// stream's window nor in a new stream's; the challenges go to the real
/// source, which takes none for a stream it does not have.
#[test]
fn forged_packets_without_the_cookie_place_nothing() {
    let mut m = Model::new(2, 11);
    m.post_recvs(1, 10, GRH_LEN + MTU * 40);
    let real = m.post(0, 1, Op::Write, MTU * 2, false);
    m.run_for(50_000_000);
    assert_eq!(m.msgs[real].status, Some(SendStatus::Success));
    // What the forger aims at: a WRITE of its own (the model's id for
    // counting placements), in the live stream and in new ones.
    let s = &m.nodes[0].send[&1];
    let (stream, cookie) = (s.stream(), s.cookie());
    let base = m.nodes[1].recv[&0].base();
    let id = m.msgs.len();
    m.msgs.push(Msg {
        src: 0,
        dst: 1,
        op: Op::Write,
        len: MTU,
        bad_rkey: false,
        // Never sent: not a success for `verify`.
        status: Some(SendStatus::LocalQpOperation),
        delivered: 0,
        recv_failed: 0,
        placed: std::vec![0],
    });
    let forged = |stream, cookie| DataPacket {
        psn: base,
        xeth: xeth_of(stream, base),
        op: Op::Write,
        offset: 0,
        dma_len: MTU,
        len: MTU,
        ack_req: true,
        cookie,
    };
    let mut rng = Rng::new(5);
    let mut forge_all = |m: &mut Model| {
        for k in 0..200u64 {
            let made_up = Cookie::new(cookie.time().wrapping_add(k as u32 % 3), rng.next_u64());
            for pkt in [
                forged(stream, Cookie::NONE),
                forged(stream, made_up),
                forged(stream ^ (k + 1) << 8, Cookie::NONE),
                forged(stream ^ (k + 1) << 8, made_up),
            ] {
                m.on_data(1, 0, pkt, id, 0);
            }
            m.run_for(STEP_NS);
        }
    };
    // The window held: the stream's forgeries dropped for their cookie,
    // other streams' by rule 3; no challenge while the window lives.
    let (challenges, bad) = (m.challenges, m.bad_cookies);
    forge_all(&mut m);
    assert_eq!(m.msgs[id].placed, [0], "a forged packet was placed");
    assert_eq!(
        m.nodes[1].recv[&0].stream(),
        stream,
        "the held stream stays"
    );
    assert_eq!(m.nodes[1].recv[&0].base(), base);
    assert_eq!(m.bad_cookies - bad, 400, "the stream's forgeries dropped");
    assert_eq!(
        m.challenges, challenges,
        "no challenge while the window lives"
    );
    // The window reclaimed (quiet): every forgery is challenged, and
    // leaves no state.
    m.run_for(QUIET_NS + QUIET_NS / 2);
    assert!(!m.nodes[1].recv.contains_key(&0));
    let challenges = m.challenges;
    forge_all(&mut m);
    assert_eq!(m.msgs[id].placed, [0], "a forged packet was placed");
    assert!(!m.nodes[1].recv.contains_key(&0), "a forgery made state");
    assert_eq!(m.challenges - challenges, 800);
    // The real sender ignored the challenges of streams it does not have
    // (those of its own stream, if it still holds it, only gave it a
    // cookie it can use) and goes on.
    let next = m.post(0, 1, Op::Write, MTU, false);
    m.settle(100_000_000);
    assert_eq!(m.msgs[next].status, Some(SendStatus::Success));
    m.verify();
}

fn xeth_of(stream: u64, psn: Psn) -> super::super::wire::xeth::Repr {
    super::super::wire::xeth::Repr {
        stream,
        peer_inc: 0,
        msg_seq: 0,
        oldest_psn: psn,
        msg_lag: 0,
    }
}
