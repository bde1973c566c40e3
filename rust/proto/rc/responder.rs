// SPDX-License-Identifier: GPL-2.0

//! The RC responder: the receive side of reliability.
//!
//! # Two phases
//!
//! [`Responder::on_request`] classifies a request packet without
//! changing what the responder expects next:
//!
//! - [`Action::Execute`]: the packet is the expected one and well formed.
//!   The [`Plan`] says what to do (place `len` bytes at `offset` of the
//!   current receive WQE or at `va` under `rkey`, take a new receive WQE,
//!   read or execute an atomic). The caller does it and then calls exactly
//!   one of [`Responder::commit`] (done: the expected PSN and MSN move
//!   on), [`Responder::rnr`] (no receive WQE: RNR NAK, nothing moves) or
//!   [`Responder::reject`] (bad R_Key or bounds, a receive WQE too short:
//!   NAK, and the QP is in error). A packet that could not be placed thus
//!   never advances the expected PSN.
//! - [`Action::Duplicate`]: already executed. SEND/WRITE: an ACK is owed
//!   again (the first one may have been lost). READ/atomic: the answer is
//!   replayed from the saved resource (a READ from the PSN asked for,
//!   which may be mid-READ; an atomic with the original value it
//!   returned, without executing it again). A duplicate READ/atomic whose
//!   resource is gone is dropped (IBTA class D), as in rxe.
//! - [`Action::OutOfSequence`]: a PSN beyond the expected one; the first
//!   after a gap queues a sequence NAK, later ones are dropped until the
//!   expected PSN arrives ([`Action::Drop`]). After an RNR NAK the same
//!   silence holds, so the requester's RNR wait is not cut short.
//! - [`Action::Error`]: malformed in sequence (opcode sequence, lengths,
//!   missing RETH, too many READ/atomics outstanding): NAK invalid
//!   request, QP in error.
//!
//! # Responses are pulled
//!
//! Responses (ACK/NAK, READ response packets, atomic ACKs) are not
//! returned by `on_request`; the caller pulls them with
//! [`Responder::next_response`], typically at the end of a receive batch.
//! The responder keeps them in PSN order: replays (oldest first), then
//! the answers of new READs and atomics, then a NAK, then one coalesced
//! ACK for everything accepted (skipped when a READ response or NAK
//! already covered it). A long READ's response packets can thus be paced
//! by the caller (pull some, continue from a workqueue) without
//! reordering them with later ACKs, and a batch of duplicates costs one
//! ACK.
//!
//! # Resources
//!
//! One [`Resource`] per READ/atomic in caller-provided storage (a ring:
//! its largest power-of-two prefix is used, so give it a power of two at
//! least `max_dest_rd_atomic` long), the oldest replaced first. At most
//! `max_dest_rd_atomic` may be unanswered (answer not yet pulled) at
//! once; a requester whose `max_rd_atomic` does not exceed it never
//! breaks that rule (it only sends a READ beyond its limit once an older
//! one is completely answered), and never finds a READ it still waits
//! for replaced. Each resource also holds its own replay cursor, so
//! several duplicate READs in one batch (a requester re-requesting
//! everything from its oldest unanswered PSN) are all answered, in PSN
//! order. Finding a resource for a duplicate and picking the next replay
//! scan the resources: O(`max_dest_rd_atomic`), on duplicates only.

use super::{
    aeth, chunk, feth, packets, position, psn_in, reth, ring_capacity, AckSyndrome, Class, Config,
    MsgKind, NakCode, Opcode, Position, Psn, Transport, MAX_MSG_LEN,
};
use super::{Direction, Operation};

/// A request packet as the kernel parsed it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Request {
    /// BTH PSN.
    pub psn: Psn,
    /// BTH opcode.
    pub opcode: Opcode,
    /// BTH AckReq.
    pub ack_req: bool,
    /// Payload bytes.
    pub payload_len: u32,
    /// The RETH, if the opcode has one.
    pub reth: Option<reth::Repr>,
    /// The FETH, if the opcode has one (FLUSH).
    pub feth: Option<feth::Repr>,
}

/// What a FLUSH asks for, its FETH checked (IBTA 1.5 A19: the other
/// values are reserved, and such a FLUSH is an invalid request).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Flush {
    /// Make the data globally visible (placement type bit 0).
    pub global: bool,
    /// Make the data persistent (placement type bit 1).
    pub persistent: bool,
    /// The whole MR the R_Key names (selectivity level 1), not the
    /// RETH's range (level 0).
    pub whole_mr: bool,
}

impl Flush {
    /// Placement type bits rxud knows.
    const PLACEMENT_TYPES: u8 = 0b11;

    /// The FLUSH a FETH asks for; `None` for reserved values.
    pub fn of(f: feth::Repr) -> Option<Self> {
        if f.placement_type & !Self::PLACEMENT_TYPES != 0 || f.selectivity_level > 1 {
            return None;
        }
        Some(Self {
            global: f.placement_type & 1 != 0,
            persistent: f.placement_type & 2 != 0,
            whole_mr: f.selectivity_level == 1,
        })
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum ResKind {
    Empty,
    Read {
        va: u64,
        rkey: u32,
        len: u32,
    },
    Atomic {
        orig: u64,
    },
    /// An ATOMIC WRITE: answered by a READ response without data.
    AtomicWrite,
    /// A FLUSH: answered by a READ response without data.
    Flush,
}

/// A saved READ or atomic, for answering it and replaying it. Storage for
/// it is the caller's (`[Resource::EMPTY; N]` or an allocation).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Resource {
    first: Psn,
    npkts: u32,
    kind: ResKind,
    /// A duplicate asked for the answer again from this PSN on.
    replay: Option<Psn>,
}

impl Resource {
    /// An unused resource.
    pub const EMPTY: Resource = Resource {
        first: Psn::new(0),
        npkts: 1,
        kind: ResKind::Empty,
        replay: None,
    };

    fn end(&self) -> Psn {
        self.first.add(self.npkts)
    }
}

/// What to do with an in-sequence request (see the module docs).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Plan {
    psn: Psn,
    npkts: u32,
    base_va: u64,
    dma_len: u32,
    ack_req: bool,
    /// The packet's kind (FIRST/MIDDLE SEND/WRITE packets report plain
    /// `Send`/`Write`).
    pub kind: MsgKind,
    /// Where the packet sits in its message.
    pub position: Position,
    /// SEND/WRITE: byte offset of the payload in the message (for a
    /// SEND, in the receive WQE's buffer). 0 for READ/atomic.
    pub offset: u32,
    /// SEND/WRITE: payload bytes; READ: bytes to read; atomic and
    /// ATOMIC WRITE: 8; FLUSH: the bytes of its range.
    pub len: u32,
    /// WRITE: where this packet's payload goes (RETH VA + offset); READ
    /// and ATOMIC WRITE: the RETH VA. 0 for SEND; atomics take theirs
    /// from the AtomicETH.
    pub va: u64,
    /// WRITE/READ/ATOMIC WRITE/FLUSH: the R_Key to check `va..va + len`
    /// against (a FLUSH of the whole MR: the R_Key alone).
    pub rkey: u32,
    /// FLUSH: what it asks for (`va`, `len`: the RETH's range).
    pub flush: Option<Flush>,
    /// Take a new receive WQE first (SEND FIRST/ONLY, WRITE with
    /// immediate LAST/ONLY); none available: call [`Responder::rnr`].
    pub needs_recv: bool,
    /// The message ends here and completes the receive WQE (SEND
    /// LAST/ONLY, WRITE with immediate LAST/ONLY).
    pub completes_recv: bool,
}

impl Plan {
    /// The packet's PSN.
    pub fn psn(&self) -> Psn {
        self.psn
    }

    /// WRITE: the message's length, its RETH's DMA length (every packet
    /// of it knows it); 0 for other requests.
    pub fn write_len(&self) -> u32 {
        if self.kind.class() == Class::Write {
            self.dma_len
        } else {
            0
        }
    }
}

/// How [`Responder::on_request`] classified a request.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Action {
    /// Expected and well formed: carry out the plan, then commit, rnr or
    /// reject it.
    Execute(Plan),
    /// Executed before: an ACK or a replay is queued.
    Duplicate,
    /// Beyond the expected PSN: a sequence NAK is queued.
    OutOfSequence,
    /// Nothing to do (count it).
    Drop,
    /// Invalid request: a NAK with this code is queued and the QP is in
    /// error (complete the receive WQE in progress, if any, in error).
    Error(NakCode),
}

/// A response packet to build and send.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Response {
    /// RC_ACKNOWLEDGE: an ACK or a NAK.
    Ack {
        /// BTH PSN.
        psn: Psn,
        /// The AETH.
        aeth: aeth::Repr,
    },
    /// A READ response packet: `len` bytes read from `va` under `rkey`.
    ReadData {
        /// BTH PSN.
        psn: Psn,
        /// RC_RDMA_READ_RESPONSE_{FIRST,MIDDLE,LAST,ONLY}.
        opcode: Opcode,
        /// The AETH (all but MIDDLE).
        aeth: Option<aeth::Repr>,
        /// Where to read the payload from.
        va: u64,
        /// The READ's R_Key (re-check it: the MR may have changed since).
        rkey: u32,
        /// Byte offset in the READ.
        offset: u32,
        /// Payload bytes.
        len: u32,
    },
    /// RC_ATOMIC_ACKNOWLEDGE.
    AtomicAck {
        /// BTH PSN.
        psn: Psn,
        /// The AETH.
        aeth: aeth::Repr,
        /// The AtomicAckETH: the value the target held before.
        orig: u64,
    },
}

impl Response {
    /// The BTH PSN.
    pub fn psn(&self) -> Psn {
        match *self {
            Response::Ack { psn, .. }
            | Response::ReadData { psn, .. }
            | Response::AtomicAck { psn, .. } => psn,
        }
    }

    /// The BTH opcode.
    pub fn opcode(&self) -> Opcode {
        match *self {
            Response::Ack { .. } => Opcode::RC_ACKNOWLEDGE,
            Response::ReadData { opcode, .. } => opcode,
            Response::AtomicAck { .. } => Opcode::RC_ATOMIC_ACKNOWLEDGE,
        }
    }
}

/// The plan no longer matches the responder (another packet was
/// committed since, or the QP is in error).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct StalePlan;

/// The SEND or WRITE message in progress.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct InMsg {
    class: Class,
    /// Bytes received so far.
    offset: u32,
    va: u64,
    rkey: u32,
    dma_len: u32,
}

/// The responder of one RC QP. `S` is the resource storage.
#[derive(Clone, Debug)]
pub struct Responder<S> {
    res: S,
    cap: u32,

    mtu: u32,
    ack_every: u32,
    rnr_timer: u8,
    max_dest: u32,

    epsn: Psn,
    msn: u32,
    nak_sent: bool,
    error: bool,
    cur: Option<InMsg>,

    /// Resources allocated (counter); `res_answered..res_next` still owe
    /// their answer, the first of them from `answer_psn` on.
    res_next: u32,
    res_answered: u32,
    answer_psn: Psn,
    /// Resources with `replay` set.
    replays: u32,

    nak: Option<(Psn, AckSyndrome)>,
    ack_owed: bool,
    ack_force: bool,
    since_ack: u32,
    /// One past the newest PSN a sent response covered.
    acked_upto: Psn,
    /// The newest SEND/WRITE packet accepted and the MSN after it: what
    /// a plain ACK names. Never a READ's or atomic's PSN, which only
    /// their own responses may answer: rxe's requester completes a READ
    /// or atomic on a plain ACK with its last PSN, without its data.
    ackable: (Psn, u32),
}

const ACK: AckSyndrome = AckSyndrome::ACK_NO_CREDITS;

impl<S: AsRef<[Resource]> + AsMut<[Resource]>> Responder<S> {
    /// A responder expecting `start` (the QP's `rq_psn`) first, with its
    /// READ/atomic resources in `res`.
    pub fn new(cfg: &Config, start: Psn, res: S) -> Self {
        let cap = ring_capacity(res.as_ref().len());
        Self {
            res,
            cap,
            mtu: cfg.mtu.bytes(),
            ack_every: cfg.ack_every_clamped(),
            rnr_timer: cfg.min_rnr_timer,
            max_dest: u32::from(cfg.max_dest_rd_atomic).min(cap),
            epsn: start,
            msn: 0,
            nak_sent: false,
            error: false,
            cur: None,
            res_next: 0,
            res_answered: 0,
            answer_psn: start,
            replays: 0,
            nak: None,
            ack_owed: false,
            ack_force: false,
            since_ack: 0,
            acked_upto: start,
            ackable: (start.add(Psn::MASK), 0),
        }
    }

    /// The next PSN expected (`rq_psn` for query_qp).
    pub fn expected_psn(&self) -> Psn {
        self.epsn
    }

    /// Messages completed, modulo 2^24.
    pub fn msn(&self) -> u32 {
        self.msn
    }

    /// The QP is in the error state.
    pub fn is_error(&self) -> bool {
        self.error
    }

    /// A multi-packet SEND or WRITE is in progress (for a SEND, the
    /// caller holds its receive WQE).
    pub fn in_message(&self) -> bool {
        self.cur.is_some()
    }

    fn slot(&self, i: u32) -> Resource {
        let mask = self.cap.wrapping_sub(1);
        self.res
            .as_ref()
            .get((i & mask) as usize)
            .copied()
            .unwrap_or(Resource::EMPTY)
    }

    fn slot_mut(&mut self, i: u32) -> Option<&mut Resource> {
        let mask = self.cap.wrapping_sub(1);
        self.res.as_mut().get_mut((i & mask) as usize)
    }

    fn aeth(&self, syndrome: AckSyndrome) -> aeth::Repr {
        aeth::Repr {
            syndrome,
            msn: self.msn,
        }
    }

    /// Classifies a request packet (see the module docs).
    pub fn on_request(&mut self, req: &Request) -> Action {
        if self.error {
            return Action::Drop;
        }
        let Some((kind, pos)) = MsgKind::of_request(req.opcode) else {
            let rc_request = req.opcode.info().is_ok_and(|i| {
                i.transport == Transport::Rc
                    && i.direction == Direction::Request
                    && i.operation != Operation::Acknowledge
            });
            if rc_request && req.psn == self.epsn {
                // An RC request opcode this core does not know.
                return self.fatal(NakCode::InvalidRequest);
            }
            return Action::Drop;
        };
        let d = req.psn.diff(self.epsn);
        if d > 0 {
            if self.nak_sent {
                return Action::Drop;
            }
            self.nak_sent = true;
            self.nak = Some((self.epsn, AckSyndrome::Nak(NakCode::PsnSequenceError)));
            return Action::OutOfSequence;
        }
        if d < 0 {
            return self.duplicate(req, kind);
        }
        match self.check(req, kind, pos) {
            Ok(plan) => Action::Execute(plan),
            Err(code) => self.fatal(code),
        }
    }

    fn fatal(&mut self, code: NakCode) -> Action {
        self.error = true;
        self.nak = Some((self.epsn, AckSyndrome::Nak(code)));
        self.ack_owed = false;
        self.cur = None;
        // Answers already queued (a replay, new READs and atomics before
        // this PSN) still go out, ahead of the NAK.
        Action::Error(code)
    }

    /// The slot of the resource `f` picks (O(resources): duplicates
    /// only).
    fn find(&self, f: impl Fn(&Resource) -> bool) -> Option<(u32, Resource)> {
        (0..self.cap)
            .map(|i| (i, self.slot(i)))
            .find(|(_, r)| r.kind != ResKind::Empty && f(r))
    }

    /// The oldest READ/atomic resource after `psn` (O(resources):
    /// duplicates only).
    fn oldest_after(&self, psn: Psn) -> Option<(u32, Resource)> {
        (0..self.cap)
            .map(|i| (i, self.slot(i)))
            .filter(|(_, r)| r.kind != ResKind::Empty && psn.before(r.first))
            .max_by_key(|(_, r)| self.epsn.diff(r.first))
    }

    /// Queues the answer of the resource in slot `i` again from `psn`.
    /// One still being answered for the first time is rewound instead
    /// (or left alone if its answer has not reached `psn` yet), so that
    /// answers stay in PSN order.
    fn replay(&mut self, i: u32, psn: Psn) {
        let mask = self.cap.wrapping_sub(1);
        let pending = self.res_next.wrapping_sub(self.res_answered);
        let d = i.wrapping_sub(self.res_answered) & mask;
        if d < pending {
            if d == 0 && psn.before(self.answer_psn) {
                self.answer_psn = psn;
            }
            return;
        }
        let Some(r) = self.slot_mut(i) else {
            return;
        };
        let was = r.replay.replace(psn);
        if was.is_none() {
            self.replays = self.replays.saturating_add(1);
        }
    }

    fn duplicate(&mut self, req: &Request, kind: MsgKind) -> Action {
        let psn = req.psn;
        match kind.class() {
            Class::Send | Class::Write => {
                // Acknowledged again (the first ACK may have been lost).
                // When a READ or atomic was accepted after it, the answer
                // of the first such is sent again instead: it
                // acknowledges this request implicitly, and a plain ACK
                // could reach the requester in the middle of that READ's
                // response, which rxe's requester mistakes for the end
                // of it (see `ackable`).
                let later = if self.ackable.0.next() == self.epsn {
                    None
                } else {
                    self.oldest_after(psn)
                };
                match later {
                    Some((i, r)) => self.replay(i, r.first),
                    None => {
                        self.ack_owed = true;
                        self.ack_force = true;
                    }
                }
                Action::Duplicate
            }
            Class::Read => {
                let Some(reth) = req.reth else {
                    return Action::Drop;
                };
                let mtu = self.mtu;
                let Some((i, res)) = self.find(|r| {
                    matches!(r.kind, ResKind::Read { .. }) && psn_in(psn, r.first, r.end())
                }) else {
                    return Action::Drop;
                };
                let ResKind::Read { va, rkey, len } = res.kind else {
                    return Action::Drop;
                };
                // The re-request must ask for the rest of the READ from
                // its PSN on: the same R_Key, the VA moved on by the
                // packets before, the length cut by as much.
                let (offset, _) = chunk(len, mtu, psn.diff(res.first) as u32);
                if reth.rkey != rkey
                    || reth.va != va.wrapping_add(u64::from(offset))
                    || reth.dma_len != len.saturating_sub(offset)
                {
                    return Action::Drop;
                }
                self.replay(i, psn);
                Action::Duplicate
            }
            Class::Atomic => {
                let Some((i, _)) = self.find(|r| {
                    r.first == psn
                        && match r.kind {
                            ResKind::Atomic { .. } => kind.is_atomic(),
                            ResKind::AtomicWrite => kind == MsgKind::AtomicWrite,
                            ResKind::Flush => kind == MsgKind::Flush,
                            _ => false,
                        }
                }) else {
                    return Action::Drop;
                };
                self.replay(i, psn);
                Action::Duplicate
            }
        }
    }

    fn resource_free(&self) -> bool {
        self.res_next.wrapping_sub(self.res_answered) < self.max_dest
    }

    /// The checks of an in-sequence request (rxe: check_op_seq,
    /// check_op_valid, check_length).
    fn check(&self, req: &Request, kind: MsgKind, pos: Position) -> Result<Plan, NakCode> {
        const BAD: NakCode = NakCode::InvalidRequest;
        let class = kind.class();
        match self.cur {
            Some(m) if m.class != class || pos.starts_message() => return Err(BAD),
            None if !pos.starts_message() => return Err(BAD),
            _ => {}
        }
        let mut plan = Plan {
            psn: req.psn,
            npkts: 1,
            base_va: 0,
            dma_len: 0,
            ack_req: req.ack_req,
            kind,
            position: pos,
            offset: 0,
            len: req.payload_len,
            va: 0,
            rkey: 0,
            flush: None,
            needs_recv: false,
            completes_recv: false,
        };
        match class {
            Class::Send | Class::Write => {
                let (mtu, len) = (self.mtu, req.payload_len);
                let ok = match pos {
                    Position::First | Position::Middle => len == mtu,
                    Position::Last => len >= 1 && len <= mtu,
                    Position::Only => len <= mtu,
                };
                if !ok {
                    return Err(BAD);
                }
                if let Some(m) = self.cur {
                    plan.offset = m.offset;
                    plan.base_va = m.va;
                    plan.rkey = m.rkey;
                    plan.dma_len = m.dma_len;
                } else if class == Class::Write {
                    let r = req.reth.ok_or(BAD)?;
                    if r.dma_len > MAX_MSG_LEN {
                        return Err(BAD);
                    }
                    plan.base_va = r.va;
                    plan.rkey = r.rkey;
                    plan.dma_len = r.dma_len;
                }
                let end = plan.offset.checked_add(len).ok_or(BAD)?;
                if class == Class::Write {
                    if end > plan.dma_len || (pos.ends_message() && end != plan.dma_len) {
                        return Err(BAD);
                    }
                    plan.va = plan.base_va.wrapping_add(u64::from(plan.offset));
                    plan.needs_recv = kind == MsgKind::WriteImm;
                    plan.completes_recv = kind == MsgKind::WriteImm;
                } else {
                    if end > MAX_MSG_LEN {
                        return Err(BAD);
                    }
                    plan.needs_recv = pos.starts_message();
                    plan.completes_recv = pos.ends_message();
                }
            }
            Class::Read | Class::Atomic => {
                // ATOMIC WRITE carries exactly its 8 bytes (IBTA oA19-28),
                // READs and atomics nothing.
                let carried = if kind == MsgKind::AtomicWrite { 8 } else { 0 };
                if req.payload_len != carried || !self.resource_free() {
                    return Err(BAD);
                }
                if kind == MsgKind::AtomicWrite {
                    let r = req.reth.ok_or(BAD)?;
                    if r.dma_len != 8 {
                        return Err(BAD);
                    }
                    plan.va = r.va;
                    plan.rkey = r.rkey;
                    plan.len = 8;
                } else if kind == MsgKind::Flush {
                    let r = req.reth.ok_or(BAD)?;
                    let f = req.feth.and_then(Flush::of).ok_or(BAD)?;
                    if r.dma_len > MAX_MSG_LEN {
                        return Err(BAD);
                    }
                    plan.va = r.va;
                    plan.rkey = r.rkey;
                    plan.len = r.dma_len;
                    plan.flush = Some(f);
                } else if class == Class::Read {
                    let r = req.reth.ok_or(BAD)?;
                    if r.dma_len > MAX_MSG_LEN {
                        return Err(BAD);
                    }
                    plan.va = r.va;
                    plan.rkey = r.rkey;
                    plan.len = r.dma_len;
                    plan.npkts = packets(kind, r.dma_len, self.mtu);
                } else {
                    plan.len = 8;
                }
            }
        }
        Ok(plan)
    }

    fn check_plan(&self, plan: &Plan) -> Result<(), StalePlan> {
        if self.error || plan.psn != self.epsn {
            return Err(StalePlan);
        }
        Ok(())
    }

    /// The plan was carried out: accept the packet. `atomic_orig` is the
    /// value an atomic found at its target (ignored for other requests);
    /// it is saved to answer replays.
    pub fn commit(&mut self, plan: &Plan, atomic_orig: u64) -> Result<(), StalePlan> {
        self.check_plan(plan)?;
        self.nak_sent = false;
        self.nak = None;
        let ends = plan.position.ends_message();
        match plan.kind.class() {
            Class::Send | Class::Write => {
                self.epsn = self.epsn.next();
                self.since_ack = self.since_ack.saturating_add(1);
                let msn = if ends {
                    self.msn.wrapping_add(1) & Psn::MASK
                } else {
                    self.msn
                };
                self.ackable = (plan.psn, msn);
                self.cur = if ends {
                    None
                } else {
                    Some(InMsg {
                        class: plan.kind.class(),
                        offset: plan.offset.saturating_add(plan.len),
                        va: plan.base_va,
                        rkey: plan.rkey,
                        dma_len: plan.dma_len,
                    })
                };
                // ACKed when asked (AckReq), or every `ack_every` packets
                // in case the requester never asks; a message end that
                // does not ask needs no ACK of its own (its requester
                // leaves it to a later request's, as rxud's does for an
                // unsignaled message; rxe's responder, too, answers
                // AckReq only).
                if plan.ack_req || self.since_ack >= self.ack_every {
                    self.ack_owed = true;
                }
            }
            Class::Read => self.alloc(Resource {
                first: plan.psn,
                npkts: plan.npkts,
                kind: ResKind::Read {
                    va: plan.va,
                    rkey: plan.rkey,
                    len: plan.len,
                },
                replay: None,
            }),
            Class::Atomic => self.alloc(Resource {
                first: plan.psn,
                npkts: 1,
                kind: match plan.kind {
                    MsgKind::AtomicWrite => ResKind::AtomicWrite,
                    MsgKind::Flush => ResKind::Flush,
                    _ => ResKind::Atomic { orig: atomic_orig },
                },
                replay: None,
            }),
        }
        if ends {
            self.msn = self.msn.wrapping_add(1) & Psn::MASK;
        }
        Ok(())
    }

    fn alloc(&mut self, r: Resource) {
        if self.res_answered == self.res_next {
            self.answer_psn = r.first;
        }
        let mut dropped_replay = false;
        if let Some(x) = self.slot_mut(self.res_next) {
            dropped_replay = x.replay.is_some();
            *x = r;
        }
        if dropped_replay {
            self.replays = self.replays.saturating_sub(1);
        }
        self.res_next = self.res_next.wrapping_add(1);
        self.epsn = r.end();
    }

    /// No receive WQE for a plan that needs one: queue an RNR NAK
    /// (`min_rnr_timer`); the PSN is expected again.
    pub fn rnr(&mut self, plan: &Plan) -> Result<(), StalePlan> {
        self.check_plan(plan)?;
        if !plan.needs_recv {
            return Err(StalePlan);
        }
        self.nak = Some((
            plan.psn,
            AckSyndrome::RnrNak {
                timer_code: self.rnr_timer,
            },
        ));
        self.nak_sent = true;
        self.ack_owed = false;
        Ok(())
    }

    /// The plan cannot be carried out (R_Key or bounds violation: NAK
    /// remote access error; receive WQE too short: invalid request;
    /// ...): queue the NAK; the QP is in error.
    pub fn reject(&mut self, plan: &Plan, code: NakCode) -> Result<(), StalePlan> {
        self.check_plan(plan)?;
        self.fatal(code);
        Ok(())
    }

    /// The QP moved to the error state: nothing more is accepted or sent.
    pub fn set_error(&mut self) {
        self.error = true;
        self.cur = None;
        for i in 0..self.cap {
            if let Some(r) = self.slot_mut(i) {
                r.replay = None;
            }
        }
        self.replays = 0;
        self.res_answered = self.res_next;
        self.nak = None;
        self.ack_owed = false;
    }

    /// The answer packet of `res` at PSN `p`.
    fn answer(&self, res: &Resource, p: Psn) -> Option<Response> {
        let (va, rkey, len) = match res.kind {
            ResKind::Empty => return None,
            ResKind::Atomic { orig } => {
                return Some(Response::AtomicAck {
                    psn: res.first,
                    aeth: self.aeth(ACK),
                    orig,
                })
            }
            ResKind::AtomicWrite | ResKind::Flush => (0, 0, 0),
            ResKind::Read { va, rkey, len } => (va, rkey, len),
        };
        let k = p.diff(res.first) as u32;
        let (offset, n) = chunk(len, self.mtu, k);
        // Positions count from the READ's first PSN, also when replaying
        // from the middle (as rxe does: a requester mid-READ expects
        // MIDDLE or LAST).
        let pos = position(k, res.npkts);
        let opcode = match pos {
            Position::First => Opcode::RC_RDMA_READ_RESPONSE_FIRST,
            Position::Middle => Opcode::RC_RDMA_READ_RESPONSE_MIDDLE,
            Position::Last => Opcode::RC_RDMA_READ_RESPONSE_LAST,
            Position::Only => Opcode::RC_RDMA_READ_RESPONSE_ONLY,
        };
        Some(Response::ReadData {
            psn: p,
            opcode,
            aeth: (pos != Position::Middle).then_some(self.aeth(ACK)),
            va: va.wrapping_add(u64::from(offset)),
            rkey,
            offset,
            len: n,
        })
    }

    /// The next replay packet: from the oldest resource asked for again.
    fn next_replay(&mut self) -> Option<Response> {
        let mut best: Option<(u32, i32)> = None;
        for i in 0..self.cap {
            let r = self.slot(i);
            if r.replay.is_some() {
                let age = self.epsn.diff(r.first);
                if !matches!(best, Some((_, a)) if age <= a) {
                    best = Some((i, age));
                }
            }
        }
        let Some((i, _)) = best else {
            self.replays = 0;
            return None;
        };
        let r = self.slot(i);
        let p = r.replay.unwrap_or(r.first);
        let out = self.answer(&r, p);
        let n = p.next();
        let more = out.is_some() && psn_in(n, r.first, r.end());
        if let Some(x) = self.slot_mut(i) {
            x.replay = more.then_some(n);
        }
        if !more {
            self.replays = self.replays.saturating_sub(1);
        }
        out
    }

    /// Whether [`Responder::next_response`] may have a response to give:
    /// never false while one is due (it may be true with none, when an
    /// owed ACK turns out to acknowledge nothing new). A request that
    /// leaves this false (a WRITE's middle packet between coalesced ACKs)
    /// gives the driver nothing to send.
    pub fn has_response(&self) -> bool {
        self.replays > 0
            || self.res_answered != self.res_next
            || self.nak.is_some()
            || self.ack_owed
    }

    /// The next response to send, in PSN order (see the module docs).
    /// Call until `None` after a batch of requests.
    pub fn next_response(&mut self) -> Option<Response> {
        while self.replays > 0 {
            if let Some(r) = self.next_replay() {
                return Some(r);
            }
        }
        while self.res_answered != self.res_next {
            let res = self.slot(self.res_answered);
            let p = self.answer_psn;
            let next = p.next();
            let done = !psn_in(next, res.first, res.end());
            let out = self.answer(&res, p);
            if done {
                self.res_answered = self.res_answered.wrapping_add(1);
                self.acked_upto = res.end();
                self.since_ack = 0;
                if self.res_answered != self.res_next {
                    self.answer_psn = self.slot(self.res_answered).first;
                }
            } else {
                self.answer_psn = next;
            }
            if out.is_some() {
                return out;
            }
        }
        if let Some((psn, syndrome)) = self.nak.take() {
            self.ack_owed = false;
            self.ack_force = false;
            self.acked_upto = psn;
            self.since_ack = 0;
            return Some(Response::Ack {
                psn,
                aeth: self.aeth(syndrome),
            });
        }
        if self.ack_owed {
            self.ack_owed = false;
            let force = core::mem::take(&mut self.ack_force);
            if force || self.acked_upto != self.epsn {
                self.acked_upto = self.epsn;
                self.since_ack = 0;
                let (psn, msn) = self.ackable;
                return Some(Response::Ack {
                    psn,
                    aeth: aeth::Repr { syndrome: ACK, msn },
                });
            }
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use super::super::IbMtu;
    use super::*;
    use std::vec::Vec;

    const MTU: u32 = 256;

    fn cfg() -> Config {
        Config {
            mtu: IbMtu::Mtu256,
            min_rnr_timer: 5,
            max_dest_rd_atomic: 2,
            ack_every: 3,
            ..Config::DEFAULT
        }
    }

    type Resp = Responder<[Resource; 4]>;

    fn resp(start: u32) -> Resp {
        Responder::new(&cfg(), Psn::new(start), [Resource::EMPTY; 4])
    }

    /// A request as requesters send them: AckReq at each message end.
    fn rq(psn: u32, opcode: Opcode, payload_len: u32) -> Request {
        Request {
            psn: Psn::new(psn),
            opcode,
            ack_req: opcode.info().is_ok_and(|i| i.position.ends_message()),
            payload_len,
            reth: None,
            feth: None,
        }
    }

    fn with_reth(mut r: Request, va: u64, rkey: u32, dma_len: u32) -> Request {
        r.reth = Some(reth::Repr { va, rkey, dma_len });
        r
    }

    fn plan(a: Action) -> Plan {
        match a {
            Action::Execute(p) => p,
            other => panic!("{other:?}"),
        }
    }

    fn responses(r: &mut Resp) -> Vec<Response> {
        core::iter::from_fn(|| r.next_response()).collect()
    }

    fn ack(psn: u32, msn: u32) -> Response {
        Response::Ack {
            psn: Psn::new(psn),
            aeth: aeth::Repr { syndrome: ACK, msn },
        }
    }

    fn nak(psn: u32, syndrome: AckSyndrome, msn: u32) -> Response {
        Response::Ack {
            psn: Psn::new(psn),
            aeth: aeth::Repr { syndrome, msn },
        }
    }

    #[test]
    fn multi_packet_send_in_order() {
        let mut r = resp(0xff_ffff);
        let ops = [
            (Opcode::RC_SEND_FIRST, MTU),
            (Opcode::RC_SEND_MIDDLE, MTU),
            (Opcode::RC_SEND_LAST_WITH_IMMEDIATE, 7),
        ];
        for (i, &(op, len)) in ops.iter().enumerate() {
            let psn = 0xff_ffffu32.wrapping_add(i as u32) & Psn::MASK;
            let p = plan(r.on_request(&rq(psn, op, len)));
            assert_eq!(p.offset, i as u32 * MTU);
            assert_eq!(p.len, len);
            assert_eq!(p.needs_recv, i == 0);
            assert_eq!(p.completes_recv, i == 2);
            assert_eq!(
                p.kind,
                if i == 2 {
                    MsgKind::SendImm
                } else {
                    MsgKind::Send
                }
            );
            r.commit(&p, 0).unwrap();
            assert_eq!(r.commit(&p, 0), Err(StalePlan), "committed once only");
            assert_eq!(r.in_message(), i < 2);
        }
        assert_eq!(r.expected_psn(), Psn::new(2));
        assert_eq!(r.msn(), 1);
        // One ACK for the batch, at the message end.
        assert_eq!(responses(&mut r), [ack(1, 1)]);
    }

    #[test]
    fn acks_are_coalesced_and_owed_every_n_packets() {
        let mut r = resp(0);
        let mut psn = 0;
        let mut cnt = 0;
        for k in 0..7u32 {
            let op = if k == 0 {
                Opcode::RC_SEND_FIRST
            } else {
                Opcode::RC_SEND_MIDDLE
            };
            let p = plan(r.on_request(&rq(psn, op, MTU)));
            r.commit(&p, 0).unwrap();
            psn += 1;
            let due = r.has_response();
            let n = responses(&mut r).len();
            // Between coalesced ACKs a packet leaves nothing to send, and
            // says so.
            assert_eq!(due, n > 0, "packet {k}");
            assert!(!r.has_response());
            cnt += n;
        }
        assert_eq!(cnt, 2, "ack_every 3: after packets 3 and 6");
        let mut x = rq(psn, Opcode::RC_SEND_MIDDLE, MTU);
        x.ack_req = true;
        let p = plan(r.on_request(&x));
        r.commit(&p, 0).unwrap();
        assert_eq!(responses(&mut r), [ack(7, 0)], "AckReq");
    }

    /// A message end that does not ask for an ACK gets none of its own
    /// (as rxe's responder): the next request that asks gets one ACK for
    /// both (its MSN counts both messages).
    #[test]
    fn an_end_without_ack_req_leaves_its_ack_to_the_next_request() {
        let mut r = resp(0);
        let mut w = with_reth(rq(0, Opcode::RC_RDMA_WRITE_ONLY, 8), 0x1000, 9, 8);
        w.ack_req = false;
        let p = plan(r.on_request(&w));
        r.commit(&p, 0).unwrap();
        assert!(!r.has_response());
        assert_eq!(responses(&mut r), []);
        let p = plan(r.on_request(&rq(1, Opcode::RC_SEND_ONLY, 8)));
        r.commit(&p, 0).unwrap();
        assert_eq!(responses(&mut r), [ack(1, 2)]);
    }

    #[test]
    fn one_sequence_nak_per_gap_then_silence() {
        let mut r = resp(10);
        assert_eq!(
            r.on_request(&rq(12, Opcode::RC_SEND_ONLY, 1)),
            Action::OutOfSequence
        );
        assert_eq!(r.on_request(&rq(13, Opcode::RC_SEND_ONLY, 1)), Action::Drop);
        let seq = AckSyndrome::Nak(NakCode::PsnSequenceError);
        assert_eq!(responses(&mut r), [nak(10, seq, 0)]);
        let p = plan(r.on_request(&rq(10, Opcode::RC_SEND_ONLY, 1)));
        r.commit(&p, 0).unwrap();
        // A new gap gets a new NAK.
        assert_eq!(
            r.on_request(&rq(13, Opcode::RC_SEND_ONLY, 1)),
            Action::OutOfSequence
        );
        // The NAK covers the ACK of 10.
        assert_eq!(responses(&mut r), [nak(11, seq, 1)]);
    }

    #[test]
    fn a_nak_made_stale_by_progress_is_not_sent() {
        let mut r = resp(0);
        assert_eq!(
            r.on_request(&rq(1, Opcode::RC_SEND_ONLY, 1)),
            Action::OutOfSequence
        );
        let p = plan(r.on_request(&rq(0, Opcode::RC_SEND_ONLY, 1)));
        r.commit(&p, 0).unwrap();
        assert_eq!(responses(&mut r), [ack(0, 1)]);
    }

    #[test]
    fn duplicate_send_is_re_acked_with_the_current_psn() {
        let mut r = resp(0);
        for psn in 0..3 {
            let p = plan(r.on_request(&rq(psn, Opcode::RC_SEND_ONLY, 1)));
            r.commit(&p, 0).unwrap();
        }
        assert_eq!(responses(&mut r), [ack(2, 3)]);
        assert_eq!(
            r.on_request(&rq(1, Opcode::RC_SEND_ONLY, 1)),
            Action::Duplicate
        );
        assert_eq!(
            r.on_request(&rq(0, Opcode::RC_SEND_ONLY, 1)),
            Action::Duplicate
        );
        assert_eq!(responses(&mut r), [ack(2, 3)], "one ACK per batch");
        assert_eq!(responses(&mut r), []);
    }

    #[test]
    fn write_places_by_reth_and_checks_lengths() {
        let mut r = resp(0);
        let first = with_reth(rq(0, Opcode::RC_RDMA_WRITE_FIRST, MTU), 0x1000, 9, MTU + 5);
        let p = plan(r.on_request(&first));
        assert_eq!((p.va, p.rkey, p.needs_recv), (0x1000, 9, false));
        r.commit(&p, 0).unwrap();
        let p = plan(r.on_request(&rq(1, Opcode::RC_RDMA_WRITE_LAST_WITH_IMMEDIATE, 5)));
        assert_eq!((p.va, p.offset, p.len), (0x1000 + 256, 256, 5));
        assert!(p.needs_recv && p.completes_recv);
        // No receive WQE for the immediate: RNR NAK, the PSN stays.
        r.rnr(&p).unwrap();
        assert_eq!(r.expected_psn(), Psn::new(1));
        let rnr = AckSyndrome::RnrNak { timer_code: 5 };
        assert_eq!(responses(&mut r), [nak(1, rnr, 0)]);
        // The retry arrives and is placed.
        let p = plan(r.on_request(&rq(1, Opcode::RC_RDMA_WRITE_LAST_WITH_IMMEDIATE, 5)));
        r.commit(&p, 0).unwrap();
        assert_eq!(responses(&mut r), [ack(1, 1)]);

        // Too long for the RETH: invalid request, QP in error.
        let mut r = resp(0);
        let x = with_reth(rq(0, Opcode::RC_RDMA_WRITE_ONLY, 10), 0, 1, 9);
        assert_eq!(r.on_request(&x), Action::Error(NakCode::InvalidRequest));
        assert!(r.is_error());
        let bad = AckSyndrome::Nak(NakCode::InvalidRequest);
        assert_eq!(responses(&mut r), [nak(0, bad, 0)]);
        assert_eq!(r.on_request(&x), Action::Drop);
    }

    #[test]
    fn rnr_silences_the_following_packets() {
        let mut r = resp(0);
        let p = plan(r.on_request(&rq(0, Opcode::RC_SEND_FIRST, MTU)));
        r.rnr(&p).unwrap();
        assert_eq!(r.on_request(&rq(1, Opcode::RC_SEND_LAST, 1)), Action::Drop);
        let rnr = AckSyndrome::RnrNak { timer_code: 5 };
        assert_eq!(responses(&mut r), [nak(0, rnr, 0)]);
        // rnr() on a plan that needs no receive WQE is refused.
        let mut r = resp(0);
        let w = with_reth(rq(0, Opcode::RC_RDMA_WRITE_ONLY, 1), 0, 1, 1);
        let p = plan(r.on_request(&w));
        assert_eq!(r.rnr(&p), Err(StalePlan));
    }

    #[test]
    fn opcode_sequence_errors() {
        let mut r = resp(0);
        assert_eq!(
            r.on_request(&rq(0, Opcode::RC_SEND_MIDDLE, MTU)),
            Action::Error(NakCode::InvalidRequest)
        );
        let mut r = resp(0);
        let p = plan(r.on_request(&rq(0, Opcode::RC_SEND_FIRST, MTU)));
        r.commit(&p, 0).unwrap();
        assert_eq!(
            r.on_request(&rq(1, Opcode::RC_RDMA_WRITE_MIDDLE, MTU)),
            Action::Error(NakCode::InvalidRequest)
        );
        let mut r = resp(0);
        assert_eq!(
            r.on_request(&rq(0, Opcode::RC_SEND_FIRST, MTU - 1)),
            Action::Error(NakCode::InvalidRequest),
            "FIRST must be a full MTU"
        );
        let mut r = resp(0);
        assert_eq!(r.on_request(&rq(0, Opcode::UD_SEND_ONLY, 0)), Action::Drop);
        assert_eq!(
            r.on_request(&rq(0, Opcode::RC_ACKNOWLEDGE, 0)),
            Action::Drop
        );
    }

    #[test]
    fn reject_naks_and_does_not_advance() {
        let mut r = resp(5);
        let w = with_reth(rq(5, Opcode::RC_RDMA_WRITE_ONLY, 1), 0, 1, 1);
        let p = plan(r.on_request(&w));
        r.reject(&p, NakCode::RemoteAccessError).unwrap();
        assert_eq!(r.expected_psn(), Psn::new(5));
        assert_eq!(r.commit(&p, 0), Err(StalePlan));
        let bad = AckSyndrome::Nak(NakCode::RemoteAccessError);
        assert_eq!(responses(&mut r), [nak(5, bad, 0)]);
    }

    #[test]
    fn read_responses_and_replay_from_the_middle() {
        let mut r = resp(0xff_fffe);
        let len = 3 * MTU + 1;
        let x = with_reth(
            rq(0xff_fffe, Opcode::RC_RDMA_READ_REQUEST, 0),
            0x5000,
            3,
            len,
        );
        let p = plan(r.on_request(&x));
        assert_eq!((p.va, p.len, p.rkey), (0x5000, len, 3));
        r.commit(&p, 0).unwrap();
        assert_eq!(r.expected_psn(), Psn::new(2), "4 PSNs");
        // A SEND after the READ: its ACK comes after the READ responses.
        let s = plan(r.on_request(&rq(2, Opcode::RC_SEND_ONLY, 1)));
        r.commit(&s, 0).unwrap();
        let out = responses(&mut r);
        let v: Vec<_> = out.iter().map(|x| (x.psn().value(), x.opcode())).collect();
        assert_eq!(
            v,
            [
                (0xff_fffe, Opcode::RC_RDMA_READ_RESPONSE_FIRST),
                (0xff_ffff, Opcode::RC_RDMA_READ_RESPONSE_MIDDLE),
                (0, Opcode::RC_RDMA_READ_RESPONSE_MIDDLE),
                (1, Opcode::RC_RDMA_READ_RESPONSE_LAST),
                (2, Opcode::RC_ACKNOWLEDGE),
            ]
        );
        assert!(matches!(
            out[3],
            Response::ReadData {
                va: 0x5300,
                offset: 0x300,
                len: 1,
                ..
            }
        ));
        // Re-request from the third packet.
        let again = with_reth(rq(0, Opcode::RC_RDMA_READ_REQUEST, 0), 0x5200, 3, MTU + 1);
        assert_eq!(r.on_request(&again), Action::Duplicate);
        let v: Vec<_> = responses(&mut r)
            .iter()
            .map(|x| (x.psn().value(), x.opcode()))
            .collect();
        assert_eq!(
            v,
            [
                (0, Opcode::RC_RDMA_READ_RESPONSE_MIDDLE),
                (1, Opcode::RC_RDMA_READ_RESPONSE_LAST)
            ]
        );
        // A re-request that does not match the resource is dropped.
        let wrong = with_reth(rq(0, Opcode::RC_RDMA_READ_REQUEST, 0), 0x5000, 3, len);
        assert_eq!(r.on_request(&wrong), Action::Drop);
    }

    /// A plain ACK after a READ or atomic names the newest SEND/WRITE
    /// before it, never the READ's or atomic's PSN: a requester such as
    /// rxe would take that ACK for the READ's or atomic's answer and
    /// complete it without its data (seen as wrong READ data and atomic
    /// values with rxe under loss and duplication).
    #[test]
    fn plain_acks_never_name_a_read_or_atomic() {
        let mut r = resp(0);
        let s = plan(r.on_request(&rq(0, Opcode::RC_SEND_ONLY, 8)));
        r.commit(&s, 0).unwrap();
        let a = plan(r.on_request(&rq(1, Opcode::RC_FETCH_ADD, 0)));
        r.commit(&a, 7).unwrap();
        let out = responses(&mut r);
        assert!(
            matches!(out[..], [Response::AtomicAck { psn, .. }] if psn == Psn::new(1)),
            "{out:?}"
        );
        // A duplicate of the SEND: the atomic's answer again (it covers
        // the SEND), no plain ACK, and certainly none for PSN 1.
        assert_eq!(
            r.on_request(&rq(0, Opcode::RC_SEND_ONLY, 8)),
            Action::Duplicate
        );
        let out = responses(&mut r);
        assert!(
            matches!(out[..], [Response::AtomicAck { psn, orig: 7, .. }] if psn == Psn::new(1)),
            "{out:?}"
        );
        // The same after a READ.
        let rd = plan(r.on_request(&with_reth(
            rq(2, Opcode::RC_RDMA_READ_REQUEST, 0),
            0x1000,
            3,
            2 * MTU,
        )));
        r.commit(&rd, 0).unwrap();
        assert_eq!(responses(&mut r).len(), 2);
        // Still the oldest answer after the duplicate: the atomic's.
        assert_eq!(
            r.on_request(&rq(0, Opcode::RC_SEND_ONLY, 8)),
            Action::Duplicate
        );
        assert!(matches!(
            responses(&mut r)[..],
            [Response::AtomicAck { .. }]
        ));
        // A SEND after them moves it on; its duplicate is ACKed again.
        let s = plan(r.on_request(&rq(4, Opcode::RC_SEND_ONLY, 8)));
        r.commit(&s, 0).unwrap();
        assert_eq!(responses(&mut r), [ack(4, 4)]);
        assert_eq!(
            r.on_request(&rq(4, Opcode::RC_SEND_ONLY, 8)),
            Action::Duplicate
        );
        assert_eq!(responses(&mut r), [ack(4, 4)]);
    }

    #[test]
    fn atomic_replay_returns_the_saved_value_without_executing() {
        let mut r = resp(0);
        let p = plan(r.on_request(&rq(0, Opcode::RC_FETCH_ADD, 0)));
        assert_eq!(p.len, 8);
        r.commit(&p, 41).unwrap();
        let out = responses(&mut r);
        assert!(matches!(
            out[..],
            [Response::AtomicAck { orig: 41, psn, .. }] if psn == Psn::new(0)
        ));
        assert_eq!(
            r.on_request(&rq(0, Opcode::RC_FETCH_ADD, 0)),
            Action::Duplicate
        );
        assert_eq!(responses(&mut r), out);
        // Never seen (PSN of no atomic): dropped.
        let p = plan(r.on_request(&rq(1, Opcode::RC_SEND_ONLY, 0)));
        r.commit(&p, 0).unwrap();
        responses(&mut r);
        assert_eq!(r.on_request(&rq(1, Opcode::RC_FETCH_ADD, 0)), Action::Drop);
    }

    /// ATOMIC WRITE: exactly 8 bytes named by its RETH and carried,
    /// executed once, answered (and replayed) by an empty READ response.
    #[test]
    fn atomic_write_is_checked_answered_and_replayed() {
        let aw =
            |psn, len, dma_len| with_reth(rq(psn, Opcode::RC_ATOMIC_WRITE, len), 64, 7, dma_len);
        for (len, dma_len) in [(4, 8), (8, 4), (0, 0), (16, 16)] {
            assert_eq!(
                resp(0).on_request(&aw(0, len, dma_len)),
                Action::Error(NakCode::InvalidRequest),
                "{len} bytes carried, {dma_len} named"
            );
        }
        let mut r = resp(0);
        let p = plan(r.on_request(&aw(0, 8, 8)));
        assert_eq!(
            (p.kind, p.va, p.rkey, p.len),
            (MsgKind::AtomicWrite, 64, 7, 8)
        );
        r.commit(&p, 0).unwrap();
        let out = responses(&mut r);
        assert!(matches!(
            out[..],
            [Response::ReadData { opcode: Opcode::RC_RDMA_READ_RESPONSE_ONLY, len: 0, aeth: Some(_), psn, .. }]
                if psn == Psn::new(0)
        ));
        assert_eq!(r.on_request(&aw(0, 8, 8)), Action::Duplicate);
        assert_eq!(responses(&mut r), out);
        // A duplicate atomic at its PSN is not it.
        assert_eq!(r.on_request(&rq(0, Opcode::RC_FETCH_ADD, 0)), Action::Drop);
    }

    /// FLUSH: its FETH and RETH checked (reserved placement types and
    /// selectivity levels are invalid requests, as is a payload), the
    /// plan names the range and what to make of it, answered and
    /// replayed (not executed again) by an empty READ response.
    #[test]
    fn flush_is_checked_answered_and_replayed() {
        let fl = |psn, plt, sel, len| {
            let mut r = with_reth(rq(psn, Opcode::RC_FLUSH, 0), 4096, 9, len);
            r.feth = Some(feth::Repr {
                placement_type: plt,
                selectivity_level: sel,
            });
            r
        };
        for (plt, sel) in [(4, 0), (8, 0), (1, 2), (1, 3)] {
            assert_eq!(
                resp(0).on_request(&fl(0, plt, sel, 64)),
                Action::Error(NakCode::InvalidRequest),
                "placement type {plt}, selectivity level {sel}"
            );
        }
        let mut no_feth = fl(0, 1, 0, 64);
        no_feth.feth = None;
        assert_eq!(
            resp(0).on_request(&no_feth),
            Action::Error(NakCode::InvalidRequest)
        );
        let mut carried = fl(0, 1, 0, 64);
        carried.payload_len = 8;
        assert_eq!(
            resp(0).on_request(&carried),
            Action::Error(NakCode::InvalidRequest)
        );
        let p = plan(resp(0).on_request(&fl(0, 3, 1, 0)));
        assert_eq!(
            p.flush,
            Some(Flush {
                global: true,
                persistent: true,
                whole_mr: true
            })
        );
        let mut r = resp(0);
        let p = plan(r.on_request(&fl(0, 1, 0, 64)));
        assert_eq!(
            (p.kind, p.va, p.rkey, p.len, p.flush),
            (
                MsgKind::Flush,
                4096,
                9,
                64,
                Some(Flush {
                    global: true,
                    persistent: false,
                    whole_mr: false
                })
            )
        );
        r.commit(&p, 0).unwrap();
        assert_eq!(r.expected_psn(), Psn::new(1));
        let out = responses(&mut r);
        assert!(matches!(
            out[..],
            [Response::ReadData { opcode: Opcode::RC_RDMA_READ_RESPONSE_ONLY, len: 0, aeth: Some(_), psn, .. }]
                if psn == Psn::new(0)
        ));
        assert_eq!(r.on_request(&fl(0, 1, 0, 64)), Action::Duplicate);
        assert_eq!(responses(&mut r), out);
        // An ATOMIC WRITE at its PSN is not it.
        let aw = with_reth(rq(0, Opcode::RC_ATOMIC_WRITE, 8), 64, 7, 8);
        assert_eq!(r.on_request(&aw), Action::Drop);
    }

    #[test]
    fn too_many_unanswered_reads_are_invalid() {
        let mut r = resp(0);
        for psn in 0..2 {
            let x = with_reth(rq(psn, Opcode::RC_RDMA_READ_REQUEST, 0), 0, 1, 1);
            let p = plan(r.on_request(&x));
            r.commit(&p, 0).unwrap();
        }
        let x = with_reth(rq(2, Opcode::RC_RDMA_READ_REQUEST, 0), 0, 1, 1);
        assert_eq!(
            r.clone().on_request(&x),
            Action::Error(NakCode::InvalidRequest)
        );
        // Once answered, the resources are free again.
        assert_eq!(responses(&mut r).len(), 2);
        assert!(matches!(r.on_request(&x), Action::Execute(_)));
        // Responses: no resources at all.
        let c = Config {
            max_dest_rd_atomic: 0,
            ..cfg()
        };
        let mut r = Responder::new(&c, Psn::new(0), [Resource::EMPTY; 4]);
        assert_eq!(
            r.on_request(&rq(0, Opcode::RC_FETCH_ADD, 0)),
            Action::Error(NakCode::InvalidRequest)
        );
    }

    #[test]
    fn resources_are_replaced_oldest_first() {
        let mut r = resp(0);
        for psn in 0..6 {
            let p = plan(r.on_request(&rq(psn, Opcode::RC_FETCH_ADD, 0)));
            r.commit(&p, u64::from(psn) * 10).unwrap();
            responses(&mut r);
        }
        assert_eq!(r.on_request(&rq(1, Opcode::RC_FETCH_ADD, 0)), Action::Drop);
        assert_eq!(
            r.on_request(&rq(2, Opcode::RC_FETCH_ADD, 0)),
            Action::Duplicate
        );
        assert!(matches!(
            responses(&mut r)[..],
            [Response::AtomicAck { orig: 20, .. }]
        ));
    }
}
