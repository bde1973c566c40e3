// SPDX-License-Identifier: GPL-2.0

//! Model tests: one [`Requester`] and one [`Responder`] connected by a
//! simulated network that loses, duplicates and reorders packets both
//! ways, with simulated time and timers, driven the way the kernel will
//! drive them (post, transmit until `None`, deliver a batch, pull
//! responses, poll completions, sleep until the next packet or deadline).
//!
//! Packets carry, besides what the wire would, a tag the checks use (the
//! message and byte offset the requester meant), so the responder side
//! can check that what its plans place is exactly what was sent. Checked:
//!
//! - every SEND/WRITE byte range is placed exactly once, in order (each
//!   commit continues where the previous one of that message stopped, at
//!   the offset and address the requester sent it from);
//! - receive WQEs are consumed exactly once, in posting order;
//! - READ data is placed exactly once, in order, from the right remote
//!   address;
//! - atomics execute exactly once (the target's final value and every
//!   returned original value equal a sequential execution's);
//! - every work request completes exactly once, in posting order: with
//!   success when the link works, else a retry/RNR/remote error on the
//!   first failing one and `Flushed` on the rest;
//! - the simulation ends (no deadlock, bounded steps).

use super::requester::{Incoming, Message, Outcome, PostError, Requester, Slot, TxPacket};
use super::responder::{Action, Request, Resource, Responder, Response};
use super::{feth, reth, AckSyndrome, Config, IbMtu, MsgKind, NakCode, Opcode, Psn, Status};
use std::collections::{BTreeSet, BinaryHeap, VecDeque};
use std::vec;
use std::vec::Vec;

/// splitmix64: small, deterministic, good enough for test schedules.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    fn below(&mut self, n: u64) -> u64 {
        if n == 0 {
            0
        } else {
            self.next() % n
        }
    }

    /// True with probability `ppm` parts per million.
    fn chance(&mut self, ppm: u32) -> bool {
        self.below(1_000_000) < u64::from(ppm)
    }
}

/// What the network does to packets.
#[derive(Clone, Copy, Debug)]
struct NetCfg {
    loss_ppm: u32,
    dup_ppm: u32,
    reorder_ppm: u32,
    latency: u64,
    jitter: u64,
    /// From this time on every packet is lost.
    cut_at: Option<u64>,
    /// Link serialisation: a packet leaves at least this long after the
    /// one before it in the same direction (0: no limit).
    gap: u64,
    /// Responses the responder may have waiting for the link at once
    /// (0: no limit): the kernel's transmit budget, which paces a long
    /// READ's answer so that requests arriving meanwhile change what is
    /// sent next.
    resp_queue: usize,
    /// After a loss, packets in the same direction are lost for this
    /// long too (a socket buffer overflowing).
    burst: u64,
}

impl NetCfg {
    fn lossy(loss_ppm: u32, dup_ppm: u32, reorder_ppm: u32) -> Self {
        NetCfg {
            loss_ppm,
            dup_ppm,
            reorder_ppm,
            latency: 2_000,
            jitter: 10_000,
            cut_at: None,
            gap: 0,
            resp_queue: 0,
            burst: 0,
        }
    }
}

#[derive(Clone, Debug)]
struct ReqPkt {
    req: Request,
    /// What the requester meant (not on the wire).
    tx: TxPacket,
}

#[derive(Clone, Debug)]
struct RespPkt {
    inc: Incoming,
    /// ATOMIC ACK's original value.
    orig: u64,
    /// Remote address a READ response's payload was read from, and its
    /// offset in the READ, as the responder says.
    read_va: u64,
    read_off: u32,
}

#[derive(Clone, Debug)]
enum Wire {
    Req(ReqPkt),
    Resp(RespPkt),
}

struct Ev {
    t: u64,
    seq: u64,
    w: Wire,
}

impl PartialEq for Ev {
    fn eq(&self, o: &Self) -> bool {
        (self.t, self.seq) == (o.t, o.seq)
    }
}
impl Eq for Ev {}
impl PartialOrd for Ev {
    fn partial_cmp(&self, o: &Self) -> Option<core::cmp::Ordering> {
        Some(self.cmp(o))
    }
}
impl Ord for Ev {
    /// Reversed: `BinaryHeap` pops the earliest.
    fn cmp(&self, o: &Self) -> core::cmp::Ordering {
        (o.t, o.seq).cmp(&(self.t, self.seq))
    }
}

/// A work request and what the model expects of it.
#[derive(Clone, Debug)]
struct Msg {
    kind: MsgKind,
    len: u32,
    remote_va: u64,
    rkey: u32,
    add_or_swap: u64,
    compare: u64,
    /// The value a sequential execution returns (atomics).
    expect_orig: u64,
    /// IBV_SEND_FENCE.
    fence: bool,
    /// Posted without IBV_SEND_SIGNALED: its end may leave its ACK to a
    /// later message's.
    unsignaled: bool,
}

/// The remote (responder) side's memory and receive queue.
struct Target {
    counter: u64,
    /// Receive WQEs available; `None`: unlimited.
    recv_avail: Option<u32>,
    refill_at: Option<u64>,
    /// Message ids whose receive WQE completed, in order.
    recv_done: Vec<u32>,
    /// Per message: bytes placed so far (SEND/WRITE).
    placed: Vec<u32>,
    /// Executions per message (READ/atomic), to see "exactly once".
    executed: Vec<u32>,
    /// Reject the first packet of this message with a remote access
    /// error.
    reject: Option<u32>,
    rnr_naks: u32,
}

/// Per message, on the requester side.
#[derive(Clone, Debug, Default)]
struct Local {
    read_placed: u32,
    atomic: Option<u64>,
    completed: Option<Status>,
    /// The PSN of a SEND/WRITE's last packet, once transmitted.
    end_psn: Option<Psn>,
}

struct Sim {
    rng: Rng,
    net: NetCfg,
    now: u64,
    seq: u64,
    heap: BinaryHeap<Ev>,
    msgs: Vec<Msg>,
    local: Vec<Local>,
    target: Target,
    req: Requester<Vec<Slot>>,
    resp: Responder<Vec<Resource>>,
    posted: usize,
    completed: usize,
    /// Request packets transmitted, and of those retransmissions.
    sent: u64,
    resent: u64,
    /// Hook: drop this request packet (by PSN) the first time it is sent.
    drop_once: Option<Psn>,
    /// Hook: this message fails locally (as a bad lkey does in the
    /// kernel) the first time one of its packets is to be built.
    local_fail: Option<u32>,
    /// Every PSN before this one was acknowledged by a response the
    /// requester received (the responder executed it): the bound a
    /// SEND/WRITE's completion with success must be within.
    heard: Option<Psn>,
    /// Per direction (requests, responses): when the link is next free.
    link_free: [u64; 2],
    /// Per direction: the end of the current loss burst.
    burst_until: [u64; 2],
    /// When each response waiting for the link leaves (`resp_queue`).
    resp_departs: VecDeque<u64>,
    /// Packets the network lost, per direction (requests, responses).
    lost: [u64; 2],
    /// Response packets the requester took, and of those the ones it
    /// ignored (duplicates, or out of order after a loss).
    resp_in: u64,
    resp_ignored: u64,
    /// Every request packet transmitted, when recording.
    log: Option<Vec<TxPacket>>,
    /// Print every event (debugging a failing seed).
    trace: bool,
    /// PSNs of the READs and atomics the responder executed: no plain
    /// ACK may name one (rxe's requester would complete the READ or
    /// atomic on it, without its data).
    rd_atomic_psns: BTreeSet<u32>,
    mtu: u32,
}

const REMOTE_READ_BASE: u64 = 0x10_0000_0000;
const REMOTE_WRITE_BASE: u64 = 0x20_0000_0000;

impl Sim {
    #[allow(clippy::too_many_arguments)]
    fn new(
        seed: u64,
        cfg: Config,
        start: Psn,
        ring: usize,
        resources: usize,
        msgs: Vec<Msg>,
        net: NetCfg,
        target: Target,
    ) -> Self {
        let n = msgs.len();
        Sim {
            rng: Rng(seed ^ 0x5eed),
            net,
            now: 0,
            seq: 0,
            heap: BinaryHeap::new(),
            local: vec![Local::default(); n],
            target: Target {
                placed: vec![0; n],
                executed: vec![0; n],
                ..target
            },
            msgs,
            req: Requester::new(&cfg, start, vec![Slot::EMPTY; ring]),
            resp: Responder::new(&cfg, start, vec![Resource::EMPTY; resources]),
            posted: 0,
            completed: 0,
            sent: 0,
            resent: 0,
            drop_once: None,
            local_fail: None,
            heard: None,
            link_free: [0; 2],
            burst_until: [0; 2],
            resp_departs: VecDeque::new(),
            lost: [0; 2],
            resp_in: 0,
            resp_ignored: 0,
            log: None,
            trace: std::env::var_os("RC_MODEL_TRACE").is_some(),
            rd_atomic_psns: BTreeSet::new(),
            mtu: cfg.mtu.bytes(),
        }
    }

    fn send(&mut self, w: Wire) {
        let dir = usize::from(matches!(w, Wire::Resp(_)));
        let mut depart = self.now;
        if self.net.gap > 0 {
            depart = depart.max(self.link_free[dir]) + self.net.gap;
            self.link_free[dir] = depart;
        }
        if dir == 1 && self.net.resp_queue > 0 {
            self.resp_departs.push_back(depart);
        }
        if depart < self.burst_until[dir] {
            self.lost[dir] += 1;
            return;
        }
        if self.net.cut_at.is_some_and(|t| self.now >= t) || self.rng.chance(self.net.loss_ppm) {
            self.burst_until[dir] = depart + self.net.burst;
            self.lost[dir] += 1;
            return;
        }
        let mut delay = self.net.latency + (depart - self.now);
        if self.rng.chance(self.net.reorder_ppm) {
            delay += self.rng.below(self.net.jitter);
        }
        if self.rng.chance(self.net.dup_ppm) {
            let extra = self.rng.below(self.net.jitter * 2);
            self.push(delay + extra, w.clone());
        }
        self.push(delay, w);
    }

    fn push(&mut self, delay: u64, w: Wire) {
        self.seq += 1;
        self.heap.push(Ev {
            t: self.now + delay,
            seq: self.seq,
            w,
        });
    }

    fn transmit(&mut self) {
        while let Some(tx) = self.req.next_packet(self.now) {
            self.sent += 1;
            if tx.retransmit {
                self.resent += 1;
            }
            if let Some(log) = &mut self.log {
                log.push(tx);
            }
            if self.trace {
                std::println!("{} TX {tx:?}", self.now);
            }
            if self.local_fail == Some(tx.id) {
                self.local_fail = None;
                self.req.fail_wqe(tx.wqe, Status::LocalProtection).unwrap();
                continue;
            }
            let m = &self.msgs[tx.id as usize];
            if m.kind.carries_payload() && tx.offset + tx.len == m.len {
                self.local[tx.id as usize].end_psn = Some(tx.psn);
            }
            if m.fence && tx.offset == 0 && !tx.retransmit {
                // Every READ and atomic before it is answered.
                for (j, e) in self.msgs[..tx.id as usize].iter().enumerate() {
                    let l = &self.local[j];
                    match e.kind {
                        MsgKind::Read => {
                            assert_eq!(l.read_placed, e.len, "fence {}: READ {j}", tx.id)
                        }
                        k if k.is_atomic() => {
                            assert!(l.atomic.is_some(), "fence {}: atomic {j}", tx.id)
                        }
                        _ => {}
                    }
                }
            }
            let m = &self.msgs[tx.id as usize];
            let info = tx.opcode.info().unwrap();
            let reth = info.has(super::ExtHeader::Reth).then_some(reth::Repr {
                va: m.remote_va + u64::from(tx.offset),
                rkey: m.rkey,
                dma_len: tx.dma_len,
            });
            let req = Request {
                psn: tx.psn,
                opcode: tx.opcode,
                ack_req: tx.ack_req,
                payload_len: tx.len * u32::from(info.operation.carries_payload()),
                reth,
                feth: info.has(super::ExtHeader::Feth).then_some(feth::Repr {
                    placement_type: 1,
                    selectivity_level: 0,
                }),
            };
            if self.drop_once == Some(tx.psn) {
                self.drop_once = None;
                continue;
            }
            self.send(Wire::Req(ReqPkt { req, tx }));
        }
    }

    /// The responder may queue another response for the link.
    fn resp_room(&mut self) -> bool {
        while self.resp_departs.front().is_some_and(|&t| t <= self.now) {
            self.resp_departs.pop_front();
        }
        self.net.resp_queue == 0 || self.resp_departs.len() < self.net.resp_queue
    }

    fn pull_responses(&mut self) {
        while self.resp_room() {
            // The driver skips its pass over the QP after a request that
            // leaves has_response false: it must never hide a response.
            let due = self.resp.has_response();
            let Some(r) = self.resp.next_response() else {
                break;
            };
            assert!(due, "has_response false with {r:?} due");
            if self.trace {
                std::println!("{} RESP {r:?}", self.now);
            }
            let (inc, orig, read_va, read_off) = match r {
                Response::Ack { psn, aeth } => {
                    if matches!(aeth.syndrome, AckSyndrome::RnrNak { .. }) {
                        self.target.rnr_naks += 1;
                    }
                    if matches!(aeth.syndrome, AckSyndrome::Ack { .. }) {
                        assert!(
                            !self.rd_atomic_psns.contains(&psn.value()),
                            "a plain ACK names READ/atomic PSN {}",
                            psn.value()
                        );
                    }
                    (
                        Incoming {
                            psn,
                            opcode: Opcode::RC_ACKNOWLEDGE,
                            aeth: Some(aeth),
                            payload_len: 0,
                        },
                        0,
                        0,
                        0,
                    )
                }
                Response::ReadData {
                    psn,
                    opcode,
                    aeth,
                    va,
                    len,
                    rkey,
                    offset,
                } => {
                    // An ATOMIC WRITE's answer names no memory.
                    assert!(rkey == 0x1234 || len == 0);
                    (
                        Incoming {
                            psn,
                            opcode,
                            aeth,
                            payload_len: len,
                        },
                        0,
                        va,
                        offset,
                    )
                }
                Response::AtomicAck { psn, aeth, orig } => (
                    Incoming {
                        psn,
                        opcode: Opcode::RC_ATOMIC_ACKNOWLEDGE,
                        aeth: Some(aeth),
                        payload_len: 0,
                    },
                    orig,
                    0,
                    0,
                ),
            };
            self.send(Wire::Resp(RespPkt {
                inc,
                orig,
                read_va,
                read_off,
            }));
        }
    }

    /// The responder side: what the kernel's receive path will do.
    fn on_request(&mut self, p: ReqPkt) {
        let action = self.resp.on_request(&p.req);
        if self.trace {
            std::println!(
                "{} REQ-IN {} {:?} -> {action:?}",
                self.now,
                p.req.psn.value(),
                p.req.opcode
            );
        }
        let plan = match action {
            Action::Execute(plan) => plan,
            Action::Duplicate | Action::OutOfSequence | Action::Drop => return,
            Action::Error(code) => panic!("responder error {code:?} on {p:?}"),
        };
        let id = p.tx.id;
        let i = id as usize;
        let m = self.msgs[i].clone();
        assert_eq!(plan.psn(), p.tx.psn);
        if m.kind.carries_payload() {
            assert_eq!((plan.offset, plan.len), (p.tx.offset, p.tx.len), "{p:?}");
        }
        if m.kind.class() == super::Class::Write {
            assert_eq!(plan.va, m.remote_va + u64::from(p.tx.offset));
            assert_eq!(plan.rkey, m.rkey);
        }
        if m.kind == MsgKind::Read {
            assert_eq!(
                (plan.va, plan.len),
                (m.remote_va + u64::from(p.tx.offset), p.tx.len)
            );
        }
        if self.target.reject == Some(id) {
            self.resp.reject(&plan, NakCode::RemoteAccessError).unwrap();
            return;
        }
        if plan.needs_recv {
            match &mut self.target.recv_avail {
                Some(0) => {
                    self.resp.rnr(&plan).unwrap();
                    return;
                }
                Some(n) => *n -= 1,
                None => {}
            }
        }
        let mut orig = 0;
        if m.kind.carries_payload() {
            // Exactly once, in order: each placement continues the last.
            assert_eq!(self.target.placed[i], plan.offset, "msg {id}: {p:?}");
            self.target.placed[i] += plan.len;
            if plan.position.ends_message() {
                assert_eq!(self.target.placed[i], m.len, "msg {id} complete");
            }
        } else if m.kind == MsgKind::Read {
            // A READ may be requested in segments: each executed once, in
            // order (the count is of bytes requested so far).
            assert_eq!(
                self.target.executed[i], p.tx.offset,
                "msg {id}: READ segments in order, once"
            );
            self.target.executed[i] += p.tx.len;
            assert!(
                self.target.executed[i] <= m.len,
                "msg {id}: READ within its length"
            );
        } else {
            self.target.executed[i] += 1;
            assert_eq!(self.target.executed[i], 1, "msg {id} executed once");
            if m.kind.is_atomic() {
                orig = self.target.counter;
                self.target.counter = match m.kind {
                    MsgKind::FetchAdd => orig.wrapping_add(m.add_or_swap),
                    _ if orig == m.compare => m.add_or_swap,
                    _ => orig,
                };
            }
        }
        if plan.completes_recv {
            self.target.recv_done.push(id);
        }
        if !m.kind.carries_payload() {
            let n = super::packets(m.kind, plan.len, self.mtu);
            for k in 0..n {
                self.rd_atomic_psns.insert(plan.psn().add(k).value());
            }
        }
        self.resp.commit(&plan, orig).unwrap();
    }

    /// The requester side of a response.
    fn on_response(&mut self, p: RespPkt) {
        // What this response tells the requester the responder executed:
        // up to its PSN (a NAK, a READ response: the PSNs before it; an
        // ACK, an atomic ACK: its PSN too).
        let executed = match p.inc.opcode {
            Opcode::RC_ACKNOWLEDGE | Opcode::RC_ATOMIC_ACKNOWLEDGE
                if matches!(
                    p.inc.aeth.map(|a| a.syndrome),
                    Some(AckSyndrome::Ack { .. })
                ) =>
            {
                p.inc.psn.next()
            }
            _ => p.inc.psn,
        };
        if self.heard.is_none_or(|h| h.before(executed)) {
            self.heard = Some(executed);
        }
        let o = self.req.on_response(&p.inc, self.now);
        self.resp_in += 1;
        if o == Outcome::Ignored {
            self.resp_ignored += 1;
        }
        if self.trace {
            std::println!("{} RESP-IN {:?} -> {o:?}", self.now, p.inc);
        }
        match o {
            Outcome::ReadData {
                id, offset, len, ..
            } => {
                let m = &self.msgs[id as usize];
                let l = &mut self.local[id as usize];
                assert_eq!(m.kind, MsgKind::Read);
                assert_eq!(l.read_placed, offset, "READ {id} in order, once");
                // `read_off` counts from the start of the request that
                // this answers (a READ may be requested in segments);
                // the address is the data's own.
                assert!(p.read_off <= offset, "READ {id} offset");
                assert_eq!(p.read_va, m.remote_va + u64::from(offset), "READ {id} data");
                l.read_placed += len;
            }
            Outcome::AtomicResult { id, .. } => {
                let l = &mut self.local[id as usize];
                assert_eq!(l.atomic, None, "atomic {id} answered once");
                l.atomic = Some(p.orig);
            }
            Outcome::Handled | Outcome::Ignored => {}
        }
    }

    fn poll(&mut self) {
        while let Some(c) = self.req.next_completion() {
            assert_eq!(c.id as usize, self.completed, "completions in order");
            let m = &self.msgs[self.completed];
            let l = &mut self.local[self.completed];
            assert_eq!(
                (c.kind, c.len),
                (m.kind, if m.kind.is_eight_bytes() { 8 } else { m.len })
            );
            assert_eq!(l.completed, None);
            l.completed = Some(c.status);
            if c.status == Status::Success && m.kind.carries_payload() {
                // The invariant: a SEND/WRITE completes with success only
                // once the responder acknowledged its last packet.
                let end = l
                    .end_psn
                    .expect("completed with success, never transmitted whole");
                assert!(
                    self.heard.is_some_and(|h| end.before(h)),
                    "msg {}: success without an acknowledgement of PSN {}",
                    c.id,
                    end.value()
                );
            }
            if c.status == Status::Success {
                match m.kind {
                    MsgKind::Read => assert_eq!(l.read_placed, m.len, "READ {} whole", c.id),
                    MsgKind::CmpSwap | MsgKind::FetchAdd => {
                        assert_eq!(l.atomic, Some(m.expect_orig), "atomic {}", c.id)
                    }
                    MsgKind::AtomicWrite | MsgKind::Flush => {
                        let i = self.completed;
                        assert_eq!(self.target.executed[i], 1, "{:?} {}", m.kind, c.id)
                    }
                    _ => assert_eq!(self.target.placed[self.completed], m.len),
                }
            }
            self.completed += 1;
        }
    }

    fn run(&mut self) {
        let mut steps = 0u64;
        loop {
            steps += 1;
            assert!(steps < 2_000_000, "no end in sight at {}", self.now);
            // Post what fits, transmit, poll; completions free slots.
            loop {
                while self.posted < self.msgs.len() {
                    let m = &self.msgs[self.posted];
                    let msg = Message {
                        id: self.posted as u32,
                        kind: m.kind,
                        len: m.len,
                        fence: m.fence,
                        unsignaled: m.unsignaled,
                    };
                    match self.req.post(msg) {
                        Ok(_) => self.posted += 1,
                        Err(PostError::Full) => break,
                        Err(e) => panic!("{e:?}"),
                    }
                }
                self.transmit();
                let before = self.completed;
                self.poll();
                if self.completed == before {
                    break;
                }
            }
            if self.completed == self.msgs.len() {
                return;
            }
            let next = [
                self.heap.peek().map(|e| e.t),
                self.req.next_deadline(),
                self.target.refill_at,
                // The link took a queued response: the responder may
                // send more.
                (self.net.resp_queue > 0 && self.resp_departs.len() >= self.net.resp_queue)
                    .then(|| self.resp_departs.front().copied())
                    .flatten(),
            ]
            .into_iter()
            .flatten()
            .min();
            let Some(next) = next else {
                panic!(
                    "deadlock at {}: nothing in flight, no timer\n{:?}\n{:?}\ncompleted {} posted {}",
                    self.now, self.req, self.resp, self.completed, self.posted
                )
            };
            self.now = self.now.max(next);
            if self.target.refill_at.is_some_and(|t| t <= self.now) {
                self.target.refill_at = None;
                self.target.recv_avail = None;
            }
            if self.req.next_deadline().is_some_and(|d| d <= self.now) {
                let t = self.req.on_timeout(self.now);
                if self.trace {
                    std::println!("{} TIMER {t:?}", self.now);
                }
            }
            while self.heap.peek().is_some_and(|e| e.t <= self.now) {
                let ev = self.heap.pop().unwrap();
                match ev.w {
                    Wire::Req(p) => {
                        self.on_request(p);
                        // Sometimes answer per packet, else per batch.
                        if self.rng.chance(300_000) {
                            self.pull_responses();
                        }
                    }
                    Wire::Resp(p) => self.on_response(p),
                }
            }
            self.pull_responses();
        }
    }

    /// Completion statuses in order.
    fn statuses(&self) -> Vec<Status> {
        self.local.iter().map(|l| l.completed.unwrap()).collect()
    }

    /// Checks that hold whatever happened: completions are a run of
    /// successes, then possibly one error and flushes; atomics and
    /// receive WQEs match a sequential execution of the successful
    /// prefix.
    fn check_common(&self) {
        let st = self.statuses();
        let ok = st.iter().take_while(|s| **s == Status::Success).count();
        if ok < st.len() {
            assert_ne!(
                st[ok],
                Status::Flushed,
                "an error before the flushes: {st:?}"
            );
            assert!(st[ok + 1..].iter().all(|s| *s == Status::Flushed), "{st:?}");
        }
        // Receive WQEs: consumed once each, in posting order, and every
        // successful SEND (WRITE with immediate) has one.
        let recvs: Vec<u32> = (0..self.msgs.len() as u32)
            .filter(|&i| {
                matches!(
                    self.msgs[i as usize].kind,
                    MsgKind::Send | MsgKind::SendImm | MsgKind::SendInv | MsgKind::WriteImm
                )
            })
            .collect();
        let done = &self.target.recv_done;
        assert_eq!(&recvs[..done.len()], &done[..], "receives in order");
        let ok_recvs = recvs.iter().filter(|&&i| (i as usize) < ok).count();
        assert!(done.len() >= ok_recvs);
        // Atomics executed exactly once: replay the successful prefix.
        if ok == st.len() {
            let mut v = 0u64;
            for m in &self.msgs {
                v = match m.kind {
                    MsgKind::FetchAdd => v.wrapping_add(m.add_or_swap),
                    MsgKind::CmpSwap if v == m.compare => m.add_or_swap,
                    _ => v,
                };
            }
            assert_eq!(self.target.counter, v, "atomics executed once each");
        }
    }
}

/// A random mix of messages; atomics' expected results are those of
/// executing them in posting order.
fn messages(rng: &mut Rng, n: usize, mtu: u32) -> Vec<Msg> {
    let mut counter = 0u64;
    let mut write_at = REMOTE_WRITE_BASE;
    (0..n)
        .map(|_| {
            let kind = match rng.below(100) {
                0..=29 => MsgKind::Send,
                30..=34 => MsgKind::SendImm,
                35..=39 => MsgKind::SendInv,
                40..=59 => MsgKind::Write,
                60..=64 => MsgKind::WriteImm,
                65..=84 => MsgKind::Read,
                85..=92 => MsgKind::FetchAdd,
                93..=94 => MsgKind::AtomicWrite,
                95..=96 => MsgKind::Flush,
                _ => MsgKind::CmpSwap,
            };
            let len = match rng.below(10) {
                0 => 0,
                1 => mtu * (1 + rng.below(4) as u32),
                _ => 1 + rng.below(u64::from(4 * mtu)) as u32,
            };
            let remote_va = match kind {
                MsgKind::Read => REMOTE_READ_BASE + rng.below(1 << 20),
                _ => {
                    write_at += u64::from(len) + 64;
                    write_at
                }
            };
            let add_or_swap = rng.below(1000);
            let compare = if rng.chance(500_000) {
                counter
            } else {
                rng.below(1000)
            };
            let expect_orig = counter;
            counter = match kind {
                MsgKind::FetchAdd => counter.wrapping_add(add_or_swap),
                MsgKind::CmpSwap if counter == compare => add_or_swap,
                _ => counter,
            };
            Msg {
                kind,
                len: if kind.is_eight_bytes() { 8 } else { len },
                remote_va,
                rkey: 0x1234,
                add_or_swap,
                compare,
                expect_orig,
                fence: rng.chance(100_000),
                unsignaled: rng.chance(500_000),
            }
        })
        .collect()
}

fn target() -> Target {
    Target {
        counter: 0,
        recv_avail: None,
        refill_at: None,
        recv_done: Vec::new(),
        placed: Vec::new(),
        executed: Vec::new(),
        reject: None,
        rnr_naks: 0,
    }
}

/// A random configuration and starting PSN (often just before the
/// 24-bit wrap).
fn random_setup(rng: &mut Rng) -> (Config, Psn, usize, usize) {
    let mtu = [IbMtu::Mtu256, IbMtu::Mtu256, IbMtu::Mtu512, IbMtu::Mtu1024][rng.below(4) as usize];
    let max_rd_atomic = 1 + rng.below(4) as u8;
    let cfg = Config {
        mtu,
        retry_cnt: 7,
        rnr_retry: 7,
        timeout: 5,
        min_rnr_timer: 3,
        max_rd_atomic,
        max_dest_rd_atomic: max_rd_atomic + rng.below(2) as u8,
        ack_every: 1 + rng.below(8) as u32,
        window: 2 + rng.below(31) as u32,
    };
    let start = if rng.chance(500_000) {
        Psn::new(0xff_ff00 + rng.below(256) as u32)
    } else {
        Psn::new(rng.next() as u32)
    };
    let ring = [2, 4, 8, 16][rng.below(4) as usize];
    // Responder resources: just enough, or more than enough.
    let res = if rng.chance(500_000) {
        usize::from(cfg.max_dest_rd_atomic).next_power_of_two()
    } else {
        8
    };
    (cfg, start, ring, res)
}

/// `n` seeds from `base`, or as many as `RC_MODEL_SEEDS` says (a soak:
/// `RC_MODEL_SEEDS=100000 cargo test --release rc::model`), or only the
/// seed `RC_MODEL_SEED` names (with `RC_MODEL_TRACE=1`, traced).
fn seeds(base: u64, n: u64) -> core::ops::Range<u64> {
    let env = |k| std::env::var(k).ok().and_then(|s| s.parse::<u64>().ok());
    let n = env("RC_MODEL_SEEDS").unwrap_or(n);
    match env("RC_MODEL_SEED") {
        Some(s) if (base..base + n).contains(&s) => s..s + 1,
        Some(_) => 0..0,
        None => base..base + n,
    }
}

fn run_lossy(seed: u64, loss_ppm: u32) -> (Sim, NetCfg) {
    let mut rng = Rng(seed);
    let (mut cfg, start, ring, res) = random_setup(&mut rng);
    if loss_ppm >= 100_000 {
        // Seven consecutive fruitless retries are likely somewhere in
        // hundreds of runs at 20% loss each way; this run checks
        // reliability, the retry limit has its own tests.
        cfg.retry_cnt = 40;
    }
    let dup = [0, 20_000][rng.below(2) as usize];
    let reorder = [0, 200_000][rng.below(2) as usize];
    let n = 40 + rng.below(80) as usize;
    let msgs = messages(&mut rng, n, cfg.mtu.bytes());
    let net = NetCfg::lossy(loss_ppm, dup, reorder);
    let mut sim = Sim::new(seed, cfg, start, ring, res, msgs, net, target());
    sim.run();
    sim.check_common();
    (sim, net)
}

/// Success everywhere under random loss, duplication and reordering.
fn lossy_seeds(loss_ppm: u32, seeds: core::ops::Range<u64>) {
    for seed in seeds {
        let (sim, net) = run_lossy(seed, loss_ppm);
        if std::env::var_os("RC_MODEL_STATS").is_some() {
            std::println!(
                "seed {seed} loss {loss_ppm} {net:?}: sent {} resent {} end {} us",
                sim.sent,
                sim.resent,
                sim.now / 1000
            );
        }
        let st = sim.statuses();
        assert!(
            st.iter().all(|s| *s == Status::Success),
            "seed {seed} loss {loss_ppm}: {st:?}"
        );
        if loss_ppm == 0 && net.reorder_ppm == 0 {
            assert_eq!(sim.resent, 0, "seed {seed}: no loss, no retransmission");
        }
    }
}

#[test]
fn model_no_loss() {
    lossy_seeds(0, seeds(0, 500));
}

#[test]
fn model_loss_1_percent() {
    lossy_seeds(10_000, seeds(1 << 32, 500));
}

#[test]
fn model_loss_5_percent() {
    lossy_seeds(50_000, seeds(2 << 32, 500));
}

#[test]
fn model_loss_20_percent() {
    lossy_seeds(200_000, seeds(3 << 32, 500));
}

/// The link is cut: the first unfinished work request fails with
/// RetryExceeded after `retry_cnt` retries, the rest are flushed.
#[test]
fn model_link_cut() {
    let mut failed = 0;
    let runs = seeds(4 << 32, 200);
    let n = runs.end - runs.start;
    for seed in runs {
        let mut rng = Rng(seed);
        let (mut cfg, start, ring, res) = random_setup(&mut rng);
        cfg.retry_cnt = rng.below(4) as u8;
        let msgs = messages(&mut rng, 40, cfg.mtu.bytes());
        let mut net = NetCfg::lossy(rng.below(50_000) as u32, 20_000, 200_000);
        net.cut_at = Some(rng.below(20_000));
        let mut sim = Sim::new(seed, cfg, start, ring, res, msgs, net, target());
        sim.run();
        sim.check_common();
        let st = sim.statuses();
        let ok = st.iter().take_while(|s| **s == Status::Success).count();
        if ok < st.len() {
            assert_eq!(st[ok], Status::RetryExceeded, "seed {seed}: {st:?}");
            failed += 1;
        }
    }
    assert!(
        failed >= n * 8 / 10,
        "only {failed} of {n} runs saw the cut"
    );
}

/// No receive WQE for a while: RNR NAKs, then everything succeeds once
/// buffers appear.
#[test]
fn model_rnr_then_success() {
    for seed in seeds(5 << 32, 200) {
        let mut rng = Rng(seed);
        let (cfg, start, ring, res) = random_setup(&mut rng);
        let mut msgs = messages(&mut rng, 30, cfg.mtu.bytes());
        msgs.insert(
            0,
            Msg {
                kind: MsgKind::Send,
                len: 10,
                ..msgs[0].clone()
            },
        );
        let net = NetCfg::lossy([0, 10_000, 50_000][rng.below(3) as usize], 10_000, 100_000);
        let t = Target {
            recv_avail: Some(rng.below(3) as u32),
            refill_at: Some(100_000 + rng.below(1_000_000)),
            ..target()
        };
        let mut sim = Sim::new(seed, cfg, start, ring, res, msgs, net, t);
        sim.run();
        sim.check_common();
        assert!(
            sim.statuses().iter().all(|s| *s == Status::Success),
            "seed {seed}"
        );
    }
}

/// Never a receive WQE and a small rnr_retry: the first message needing
/// one fails with RnrRetryExceeded; those before it succeed.
#[test]
fn model_rnr_retry_exceeded() {
    for seed in seeds(6 << 32, 200) {
        let mut rng = Rng(seed);
        let (mut cfg, start, ring, res) = random_setup(&mut rng);
        cfg.rnr_retry = rng.below(3) as u8;
        cfg.min_rnr_timer = 1;
        let msgs = messages(&mut rng, 30, cfg.mtu.bytes());
        let first_recv = msgs.iter().position(|m| {
            matches!(
                m.kind,
                MsgKind::Send | MsgKind::SendImm | MsgKind::SendInv | MsgKind::WriteImm
            )
        });
        let Some(first_recv) = first_recv else {
            continue;
        };
        let net = NetCfg::lossy(0, 0, 0);
        let t = Target {
            recv_avail: Some(0),
            ..target()
        };
        let mut sim = Sim::new(seed, cfg, start, ring, res, msgs, net, t);
        sim.run();
        sim.check_common();
        let st = sim.statuses();
        assert!(st[..first_recv].iter().all(|s| *s == Status::Success));
        assert_eq!(st[first_recv], Status::RnrRetryExceeded, "seed {seed}");
        assert_eq!(sim.target.rnr_naks, u32::from(cfg.rnr_retry) + 1);
    }
}

/// The responder rejects one WRITE (bad R_Key): that work request fails
/// with a remote access error, those before succeed, the rest flush.
/// With loss the NAK itself may be lost, and the responder in error
/// answers nothing more: then RetryExceeded, possibly on an earlier READ
/// or atomic whose answer was lost, is right too.
#[test]
fn model_remote_access_error() {
    for seed in seeds(7 << 32, 200) {
        let mut rng = Rng(seed);
        let (mut cfg, start, ring, res) = random_setup(&mut rng);
        cfg.retry_cnt = 3;
        let msgs = messages(&mut rng, 30, cfg.mtu.bytes());
        let Some(bad) = msgs.iter().position(|m| m.kind == MsgKind::Write) else {
            continue;
        };
        // Without loss or reordering the outcome is exact. With them, a
        // READ answer lost or late (answers are taken in order) may need
        // a replay the responder, now in error, no longer gives.
        let (loss, reorder) = [(0, 0), (0, 100_000), (20_000, 100_000)][rng.below(3) as usize];
        let net = NetCfg::lossy(loss, 0, reorder);
        let t = Target {
            reject: Some(bad as u32),
            ..target()
        };
        let mut sim = Sim::new(seed, cfg, start, ring, res, msgs, net, t);
        sim.run();
        sim.check_common();
        let st = sim.statuses();
        let ok = st.iter().take_while(|s| **s == Status::Success).count();
        if loss == 0 && reorder == 0 {
            assert_eq!(ok, bad, "seed {seed}: {st:?}");
            assert_eq!(st[bad], Status::RemoteAccess, "seed {seed}");
        } else {
            assert!(ok <= bad, "seed {seed}: {st:?}");
            assert!(
                st[ok] == Status::RetryExceeded || (ok == bad && st[ok] == Status::RemoteAccess),
                "seed {seed}: {st:?}"
            );
        }
    }
}

/// One work request fails locally when its first packet is built (a
/// stale lkey): those before it succeed once acknowledged (the model
/// checks each success against the acknowledgements the requester
/// heard), it completes with the local error, the rest flush. With loss,
/// an earlier one may exhaust its retries first: then it carries the
/// retry error and the local failure is flushed.
#[test]
fn model_local_failure_waits_for_earlier_acks() {
    for seed in seeds(11 << 32, 200) {
        let mut rng = Rng(seed);
        let (mut cfg, start, ring, res) = random_setup(&mut rng);
        cfg.retry_cnt = 3;
        let msgs = messages(&mut rng, 20, cfg.mtu.bytes());
        let bad = 1 + rng.below(19) as u32;
        let (loss, reorder) = [(0, 0), (0, 100_000), (20_000, 100_000)][rng.below(3) as usize];
        let net = NetCfg::lossy(loss, 0, reorder);
        let mut sim = Sim::new(seed, cfg, start, ring, res, msgs, net, target());
        sim.local_fail = Some(bad);
        sim.run();
        sim.check_common();
        let st = sim.statuses();
        let ok = st.iter().take_while(|s| **s == Status::Success).count();
        assert!(ok <= bad as usize, "seed {seed}: {st:?}");
        if loss == 0 {
            assert_eq!(ok, bad as usize, "seed {seed}: {st:?}");
        }
        assert!(
            (ok == bad as usize && st[ok] == Status::LocalProtection)
                || st[ok] == Status::RetryExceeded,
            "seed {seed}: {st:?}"
        );
    }
}

/// The scenario of issue 27: SEND A's only packet is lost, then SEND B
/// fails locally. A is resent and completes with success when it is
/// acknowledged; B then completes with its error.
#[test]
fn lost_send_before_a_local_failure_is_resent() {
    let cfg = Config::DEFAULT;
    let start = Psn::new(100);
    let msg = |kind| Msg {
        kind,
        len: 64,
        remote_va: REMOTE_WRITE_BASE,
        rkey: 1,
        add_or_swap: 0,
        compare: 0,
        expect_orig: 0,
        fence: false,
        unsignaled: false,
    };
    let msgs = vec![msg(MsgKind::Send), msg(MsgKind::Send)];
    let mut sim = Sim::new(1, cfg, start, 4, 4, msgs, NetCfg::lossy(0, 0, 0), target());
    sim.drop_once = Some(start);
    sim.local_fail = Some(1);
    sim.run();
    sim.check_common();
    assert_eq!(sim.statuses(), [Status::Success, Status::LocalProtection]);
    assert_eq!(sim.target.recv_done, [0], "A arrived");
    assert_eq!(sim.resent, 1, "A was resent");
}

fn one_write(len_pkts: u32, cfg: Config, start: Psn) -> Sim {
    let msgs = vec![Msg {
        kind: MsgKind::Write,
        len: len_pkts * cfg.mtu.bytes(),
        remote_va: REMOTE_WRITE_BASE,
        rkey: 1,
        add_or_swap: 0,
        compare: 0,
        expect_orig: 0,
        fence: false,
        unsignaled: false,
    }];
    let mut sim = Sim::new(1, cfg, start, 4, 4, msgs, NetCfg::lossy(0, 0, 0), target());
    sim.log = Some(Vec::new());
    sim
}

/// Never go-back-0: a packet lost in the middle of a long WRITE is
/// resent from its own PSN (detected by the sequence NAK), with a MIDDLE
/// opcode, and nothing before it is resent.
#[test]
fn lost_packet_mid_message_resends_from_it() {
    let cfg = Config {
        mtu: IbMtu::Mtu256,
        window: 64,
        ack_every: 4,
        ..Config::DEFAULT
    };
    let start = Psn::new(0xff_fff8);
    let mut sim = one_write(20, cfg, start);
    sim.drop_once = Some(start.add(9));
    sim.run();
    sim.check_common();
    let log = sim.log.take().unwrap();
    let again: Vec<&TxPacket> = log.iter().filter(|p| p.retransmit).collect();
    assert_eq!(again[0].psn, start.add(9));
    assert_eq!(again[0].opcode, Opcode::RC_RDMA_WRITE_MIDDLE);
    assert_eq!(again[0].offset, 9 * 256);
    assert!(again.iter().all(|p| !p.psn.before(start.add(9))));
    assert_eq!(again.len(), 11, "go-back-N from the lost packet: {again:?}");
    assert_eq!(sim.statuses(), [Status::Success]);
}

/// The same when the last packet is lost: no later packet makes the
/// responder NAK, the timeout fires and only the last packet is resent
/// (the rest was ACKed on the way).
#[test]
fn lost_last_packet_resends_only_it_after_timeout() {
    let cfg = Config {
        mtu: IbMtu::Mtu256,
        window: 64,
        ack_every: 1,
        timeout: 5,
        ..Config::DEFAULT
    };
    let start = Psn::new(100);
    let mut sim = one_write(10, cfg, start);
    sim.drop_once = Some(start.add(9));
    sim.run();
    let log = sim.log.take().unwrap();
    let again: Vec<&TxPacket> = log.iter().filter(|p| p.retransmit).collect();
    assert_eq!(again.len(), 1, "{again:?}");
    assert_eq!(
        (again[0].psn, again[0].opcode, again[0].offset),
        (start.add(9), Opcode::RC_RDMA_WRITE_LAST, 9 * 256)
    );
    assert!(sim.now >= super::local_ack_timeout_ns(5).unwrap());
}

/// A long run across the PSN wrap with loss, with the biggest ring.
#[test]
fn model_long_run_across_the_wrap() {
    let mut rng = Rng(77);
    let cfg = Config {
        mtu: IbMtu::Mtu256,
        window: 32,
        ack_every: 8,
        timeout: 5,
        max_rd_atomic: 4,
        max_dest_rd_atomic: 4,
        ..Config::DEFAULT
    };
    let msgs = messages(&mut rng, 1500, 256);
    let net = NetCfg::lossy(20_000, 10_000, 100_000);
    let start = Psn::new(0xff_fc00);
    let mut sim = Sim::new(77, cfg, start, 32, 8, msgs, net, target());
    sim.run();
    sim.check_common();
    assert!(sim.statuses().iter().all(|s| *s == Status::Success));
    assert!(sim.req.next_psn().value() < start.value(), "wrapped");
}

/// `n` READs of `pkts` packets each, as `ib_read_bw` posts them (one QP,
/// rxe's defaults: MTU 1024, window 128, 16 READs outstanding), over a
/// link that carries one packet per 100 us each way, with the responder's
/// answers held back by a transmit budget of 64 packets (the kernel's
/// 64 KB): a long READ is answered over milliseconds, during which
/// re-requests arrive and replays overtake answers still to be sent.
fn read_stream(seed: u64, n: usize, pkts: u32, loss_ppm: u32, burst: u64) -> Sim {
    let cfg = Config::DEFAULT;
    let mtu = cfg.mtu.bytes();
    let msgs = (0..n)
        .map(|i| Msg {
            kind: MsgKind::Read,
            len: pkts * mtu,
            remote_va: REMOTE_READ_BASE + (i as u64) * u64::from(pkts * mtu),
            rkey: 0x1234,
            add_or_swap: 0,
            compare: 0,
            expect_orig: 0,
            fence: false,
            unsignaled: false,
        })
        .collect();
    let net = NetCfg {
        latency: 50_000,
        jitter: 0,
        gap: 100_000,
        resp_queue: 64,
        burst,
        ..NetCfg::lossy(loss_ppm, 0, 0)
    };
    let mut sim = Sim::new(seed, cfg, Psn::new(0xff_f000), 16, 16, msgs, net, target());
    sim.run();
    sim.check_common();
    sim
}

/// A deep pipeline of 1 MB READs under uniform and bursty loss (a host
/// socket buffer overflowing drops a run of packets): every READ
/// completes with its data, each loss costs about one go-back pass (a
/// response arriving past a gap while the gap's re-request is on its way
/// does not start another), and goodput stays within go-back-N's cost.
#[test]
fn a_deep_read_pipeline_completes_under_loss() {
    let lossless = read_stream(1, 16, 1024, 0, 0);
    assert_eq!(lossless.resent, 0);
    assert_eq!(lossless.resp_ignored, 0);
    // (loss, burst, least share of the lossless rate): go-back-N with a
    // 64-packet responder queue throws away about that queue per loss,
    // some 60 packets in 100 at 1% (0.50 to 0.56 measured).
    for (loss, burst, share) in [
        (10_000, 0, 0.45),
        (2_000, 400_000, 0.7),
        (5_000, 800_000, 0.5),
        (20_000, 0, 0.25),
    ] {
        for seed in seeds(9 << 32, 3) {
            let sim = read_stream(seed, 16, 1024, loss, burst);
            let st = sim.statuses();
            assert!(
                st.iter().all(|s| *s == Status::Success),
                "seed {seed} loss {loss} burst {burst}: {st:?}"
            );
            let losses = sim.lost[0] + sim.lost[1];
            let rate = lossless.now as f64 / sim.now as f64;
            if std::env::var_os("RC_MODEL_STATS").is_some() {
                std::println!(
                    "seed {seed} loss {loss} burst {burst}: {rate:.2} of lossless, lost {:?}, re-requests {}, responses {} ignored {}",
                    sim.lost,
                    sim.resent,
                    sim.resp_in,
                    sim.resp_ignored
                );
            }
            // A lost response is re-requested from its PSN to its
            // segment's end, and the next segment again (2 requests);
            // a lost request is resent with what follows it.
            assert!(
                sim.resent <= 3 * losses,
                "seed {seed} loss {loss} burst {burst}: {} re-requests for {losses} losses",
                sim.resent
            );
            assert!(
                rate >= share,
                "seed {seed} loss {loss} burst {burst}: {rate:.2} of the lossless rate"
            );
        }
    }
}
