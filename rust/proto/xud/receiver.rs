// SPDX-License-Identifier: GPL-2.0

//! The receiving half of an XUD peer: one [`RecvStream`] per source (GID,
//! QPN) that has sent to the QP, created by the source's first accepted
//! packet (rule 2) and dropped by the driver once [`RecvStream::is_quiet`]
//! (rule 3, reclaim).
//!
//! A data packet goes through [`RecvStream::check`] (rule 4, then the
//! window and the message, marking nothing), the driver's own checks
//! (claim a receive, rkey and bounds), then [`RecvStream::commit`] once
//! its payload is in place. A packet refused between the two is reported
//! with [`RecvStream::refuse`] and stays new: its retransmission is
//! placed. The driver holds the peer's lock from `check` to `commit`.

use super::super::congestion::CnpPacer;
use super::super::psn::Psn;
use super::super::window::{Arrival, RecvWindow, RestingWindow};
use super::super::wire::xeth;
use super::cookie::Cookie;
use super::{
    seq_before, Op, RecvStatus, Refusal, CLAIMS_PROVEN, CLAIMS_UNPROVEN, GRH_LEN, MAX_MSGS,
    QUIET_NS, UNPROVEN_HOLD_NS, WINDOW, WINDOW_WORDS,
};

/// What the receiver needs of a data packet, decoded and validated by the
/// driver (headers, ICRC, Q_Key, rule 1's `peer_inc`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DataPacket {
    pub psn: Psn,
    pub xeth: xeth::Repr,
    pub op: Op,
    /// SEND: the payload's offset in the message (RETH `va`). WRITE: not
    /// used here (the RETH addresses memory; the driver checks it).
    pub offset: u64,
    /// The message length (RETH `dma_len`).
    pub dma_len: u32,
    /// Payload bytes in this packet.
    pub len: u32,
    /// BTH AckReq.
    pub ack_req: bool,
    /// The stream cookie it echoes (XCK; [`Cookie::NONE`] if none).
    pub cookie: Cookie,
}

impl DataPacket {
    /// Step 1's length rules: the message fits `max_msg_len`, the payload
    /// fits the message (for a SEND, at its offset). A packet that fails
    /// is malformed: dropped and counted.
    pub fn is_well_formed(&self, max_msg_len: u32) -> bool {
        if self.dma_len > max_msg_len || self.len > self.dma_len {
            return false;
        }
        if self.op.is_send() {
            return self
                .offset
                .checked_add(u64::from(self.len))
                .is_some_and(|end| end <= u64::from(self.dma_len));
        }
        true
    }
}

/// Rule 1: a packet addressed to an earlier incarnation of this QP (a
/// `peer_inc` that is neither 0 nor `inc`) is stale: keep nothing, answer
/// with a stale-incarnation NAK.
pub const fn is_stale(peer_inc: u32, inc: u32) -> bool {
    peer_inc != 0 && peer_inc != inc
}

/// What a receiver holds for a packet's source, as [`admit`] needs it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Held {
    pub stream: u64,
    /// [`RecvStream::is_quiet`].
    pub quiet: bool,
    /// The time of the cookie that opened the window.
    pub cookie_time: u32,
}

/// Whether a data packet may use or open a window (rules 2 and 3 with
/// the stream cookie, xud.rst "Stream cookies").
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Admission {
    /// The window held is the packet's stream's: check it there.
    Held,
    /// No window for the stream (none held, or the one held is another
    /// stream's and quiet): open one ([`RecvStream::new`], within the peer
    /// limit; a quiet one held goes first).
    Open,
    /// Another stream's window is held and not quiet (rule 3): drop.
    OtherStream,
    /// No window for the stream and no fresh cookie for it: answer with a
    /// challenge (a new cookie), keep nothing, place nothing.
    Challenge,
    /// The stream's window is held but the packet's cookie is missing, not
    /// this QP's for this stream and source, or older than the cookie that
    /// opened the window: drop (never challenged while the window lives,
    /// so no cookie is issued between a window's opening and its reclaim).
    BadCookie,
}

/// Decides [`Admission`] for `pkt` given what is held for its source;
/// `cookie_valid` is the QP key's verdict on `pkt.cookie` for this source
/// and stream ([`super::cookie::CookieKey::verify`]).
pub fn admit(held: Option<Held>, pkt: &DataPacket, cookie_valid: bool, now: u64) -> Admission {
    match held {
        Some(h) if h.stream == pkt.xeth.stream => {
            if cookie_valid && !seq_before(pkt.cookie.time(), h.cookie_time) {
                Admission::Held
            } else {
                Admission::BadCookie
            }
        }
        Some(h) if !h.quiet => Admission::OtherStream,
        _ if cookie_valid && pkt.cookie.is_fresh(now) => Admission::Open,
        _ => Admission::Challenge,
    }
}

/// A message in progress at the receiver: a SEND or WRITE_IMM that has
/// claimed a receive. Plain WRITEs keep no state: the window is all they
/// need.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct RecvMsg {
    seq: u32,
    op: Op,
    dma_len: u32,
    /// Payload bytes committed so far.
    placed: u32,
    /// The driver's handle of the claimed receive, and its total length.
    recv: u32,
    recv_len: u32,
    state: MsgState,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum MsgState {
    Free,
    Open,
    /// Finished; its receive completion not yet handed to the driver.
    /// With a refusal, the message stays failed once reported.
    Done(RecvStatus, Option<Refusal>),
    /// Failed and reported: its later packets get the same NAK until the
    /// sender's `oldest_msg` passes it.
    Failed(Refusal),
}

impl RecvMsg {
    const FREE: RecvMsg = RecvMsg {
        seq: 0,
        op: Op::Write,
        dma_len: 0,
        placed: 0,
        recv: 0,
        recv_len: 0,
        state: MsgState::Free,
    };
}

/// What to do with a data packet after [`RecvStream::check`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Check {
    /// Placed before (or below the base): ACK again, place nothing.
    Duplicate,
    /// `W` or more past the base: drop and count.
    BeyondWindow,
    /// Contradicts the stream (its PSN is not within `W` of its own
    /// `oldest_psn`, or its message was finished): drop and count.
    Inconsistent,
    /// Its message has failed here: NAK again.
    Refuse(Refusal),
    /// New: check and place it as planned, then [`RecvStream::commit`].
    Place(Plan),
}

/// How to place a new packet.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Plan {
    pub psn: Psn,
    pub msg_seq: u32,
    pub op: Op,
    /// The message needs a receive claimed before this packet is placed
    /// (its first packet to arrive): the driver claims one and calls
    /// [`RecvStream::claimed`], or [`RecvStream::refuse`] with
    /// [`Refusal::ReceiverNotReady`].
    pub claim: bool,
    /// The claim would outlast this packet (it does not carry the whole
    /// message): it counts against the source's and the QP's budgets of
    /// receives held by unfinished messages ([`RecvStream::may_hold_claim`]).
    pub held: bool,
    /// SEND: where the payload goes in the receive buffer (after the GRH).
    pub recv_offset: u32,
    /// SEND: the claimed receive to place into (valid once claimed).
    pub recv: u32,
    pub len: u32,
}

/// A receive completion for the driver to write.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RecvDone {
    /// The receive's handle, as given to [`RecvStream::claimed`].
    pub recv: u32,
    pub status: RecvStatus,
    pub op: Op,
    pub msg_seq: u32,
    /// The message length (the driver adds the GRH for a SEND).
    pub len: u32,
}

/// What the receiver sends back: the window's base and the placed PSNs
/// after it (the XACK `sack`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AckInfo {
    pub stream: u64,
    pub base: Psn,
    pub sack: u128,
}

/// One source's stream at the receiver.
#[derive(Clone, Debug)]
pub struct RecvStream {
    stream: u64,
    /// The time of the cookie that opened the window: packets with older
    /// cookies are not taken ([`admit`]).
    cookie_time: u32,
    window: RecvWindow<WINDOW_WORDS>,
    /// Messages before it were finished or given up by the sender.
    oldest_msg: u32,
    last_accepted: u64,
    /// Packets committed since the last ACK.
    unanswered: u32,
    /// Since when a packet waits for an ACK (the delayed ACK).
    ack_owed: Option<u64>,
    /// CNPs to the sender for packets that arrived CE-marked.
    cnps: CnpPacer,
    /// The highest AckReq PSN answered while a hole lay below it: when the
    /// base passes it, the sender's completion waits on an ACK.
    pending_req: Option<Psn>,
    /// A message of the stream has completed here: the source has shown
    /// it finishes what it starts ([`CLAIMS_PROVEN`]).
    proven: bool,
    msgs: [RecvMsg; MAX_MSGS as usize],
}

impl RecvStream {
    /// Rule 2: the state a source's first accepted packet creates, the
    /// window's base at the packet's `oldest_psn` (never at its PSN: the
    /// sender may still be trying older ones).
    pub fn new(pkt: &DataPacket, now: u64) -> Self {
        Self {
            stream: pkt.xeth.stream,
            cookie_time: pkt.cookie.time(),
            window: RecvWindow::new(pkt.xeth.oldest_psn),
            oldest_msg: pkt.xeth.oldest_msg(),
            last_accepted: now,
            unanswered: 0,
            ack_owed: None,
            cnps: CnpPacer::NEW,
            pending_req: None,
            proven: false,
            msgs: [RecvMsg::FREE; MAX_MSGS as usize],
        }
    }

    /// A packet of the stream arrived marked Congestion Experienced at
    /// `now`: whether a CNP goes to its sender (one per
    /// `congestion::CNP_INTERVAL_NS`).
    pub fn cnp_due(&mut self, now: u64) -> bool {
        self.cnps.due(now)
    }

    /// The sender's incarnation of the stream held.
    pub fn stream(&self) -> u64 {
        self.stream
    }

    /// The first PSN not placed (nor given up).
    pub fn base(&self) -> Psn {
        self.window.expected()
    }

    /// No packet accepted for more than [`QUIET_NS`]: the state may go
    /// (reclaim), and a packet of another stream may replace it (rule 3).
    pub fn is_quiet(&self, now: u64) -> bool {
        now.saturating_sub(self.last_accepted) > QUIET_NS
    }

    /// What [`admit`] needs of it.
    pub fn held(&self, now: u64) -> Held {
        Held {
            stream: self.stream,
            quiet: self.is_quiet(now),
            cookie_time: self.cookie_time,
        }
    }

    /// Steps 3 and 4 (and the message part of 6) for a packet of this
    /// stream (the caller compared `stream`): rule 4, then the window,
    /// then its message. Marks nothing in the window; messages the sender
    /// gave up (rule 4) fail, their receives come out of
    /// [`Self::next_done`].
    pub fn check(&mut self, pkt: &DataPacket, now: u64) -> Check {
        let lead = pkt.psn.diff(pkt.xeth.oldest_psn);
        if lead < 0 || lead as u32 >= WINDOW {
            return Check::Inconsistent;
        }
        // Rule 4: only a packet the window's holder sent gets here.
        self.window.advance(pkt.xeth.oldest_psn);
        let oldest_msg = pkt.xeth.oldest_msg();
        if seq_before(self.oldest_msg, oldest_msg) {
            self.oldest_msg = oldest_msg;
            self.abandon_before(oldest_msg);
        }
        match self.window.check(pkt.psn) {
            Arrival::Duplicate => {
                self.last_accepted = now;
                return Check::Duplicate;
            }
            Arrival::BeyondWindow => return Check::BeyondWindow,
            Arrival::New => {}
        }
        self.last_accepted = now;
        let seq = pkt.xeth.msg_seq;
        if seq_before(seq, self.oldest_msg) {
            // A new PSN of a message the sender finished.
            return Check::Inconsistent;
        }
        let mut plan = Plan {
            psn: pkt.psn,
            msg_seq: seq,
            op: pkt.op,
            claim: false,
            held: false,
            recv_offset: 0,
            recv: 0,
            len: pkt.len,
        };
        if !pkt.op.claims_receive() {
            return Check::Place(plan);
        }
        let slot = &mut self.msgs[(seq % MAX_MSGS) as usize];
        match slot.state {
            MsgState::Free => {
                plan.claim = true;
                plan.held = pkt.len < pkt.dma_len;
                if pkt.op.is_send() {
                    plan.recv_offset = GRH_LEN + pkt.offset as u32;
                }
                Check::Place(plan)
            }
            // The slot's message is older or newer than the window of
            // sixteen allows (its report is still pending): a conforming
            // sender cannot get here.
            _ if slot.seq != seq => Check::Inconsistent,
            MsgState::Failed(r) | MsgState::Done(_, Some(r)) => Check::Refuse(r),
            MsgState::Done(_, None) => Check::Inconsistent,
            MsgState::Open => {
                if slot.op != pkt.op || slot.dma_len != pkt.dma_len {
                    slot.state =
                        MsgState::Done(RecvStatus::RemoteAbort, Some(Refusal::InvalidRequest));
                    return Check::Refuse(Refusal::InvalidRequest);
                }
                if let Some(r) = slot.fits(pkt) {
                    return Check::Refuse(r);
                }
                plan.recv = slot.recv;
                if pkt.op.is_send() {
                    plan.recv_offset = GRH_LEN + pkt.offset as u32;
                }
                Check::Place(plan)
            }
        }
    }

    /// The driver claimed receive `recv` (of `recv_len` bytes in all) for
    /// the message of `plan` (which asked for a claim). A SEND too long
    /// for it fails the message at once (the receive completes
    /// [`RecvStatus::LocalLength`], from [`Self::next_done`]) and the
    /// packet is refused.
    pub fn claimed(
        &mut self,
        plan: &mut Plan,
        pkt: &DataPacket,
        recv: u32,
        recv_len: u32,
    ) -> Result<(), Refusal> {
        let slot = &mut self.msgs[(plan.msg_seq % MAX_MSGS) as usize];
        *slot = RecvMsg {
            seq: plan.msg_seq,
            op: plan.op,
            dma_len: pkt.dma_len,
            placed: 0,
            recv,
            recv_len,
            state: MsgState::Open,
        };
        plan.claim = false;
        plan.recv = recv;
        if pkt.op.is_send() && u64::from(GRH_LEN) + u64::from(pkt.dma_len) > u64::from(recv_len) {
            slot.state = MsgState::Done(RecvStatus::LocalLength, Some(Refusal::InvalidRequest));
            return Err(Refusal::InvalidRequest);
        }
        Ok(())
    }

    /// The driver refused `plan`'s packet: nothing of it is recorded, so
    /// its retransmission is new again. An access error in a WRITE_IMM
    /// message that holds a receive fails that message (its receive
    /// completes [`RecvStatus::RemoteAbort`]); a message refused RNR was
    /// never opened.
    pub fn refuse(&mut self, plan: &Plan, why: Refusal) {
        if why == Refusal::ReceiverNotReady || !plan.op.claims_receive() {
            return;
        }
        let slot = &mut self.msgs[(plan.msg_seq % MAX_MSGS) as usize];
        if slot.seq == plan.msg_seq && slot.state == MsgState::Open {
            slot.state = MsgState::Done(RecvStatus::RemoteAbort, Some(why));
        }
    }

    /// Step 7, after the payload is in place: records the PSN and counts
    /// its bytes. Returns whether to ACK at once (else the ACK is owed,
    /// [`Self::ack_owed`], and goes within the ACK delay). False from
    /// `committed` means the PSN was committed already (a stale plan):
    /// nothing was counted.
    pub fn commit(&mut self, plan: &Plan, ack_every: u32) -> Committed {
        if !self.window.commit(plan.psn) {
            return Committed {
                committed: false,
                ack_now: true,
            };
        }
        if plan.op.claims_receive() {
            let slot = &mut self.msgs[(plan.msg_seq % MAX_MSGS) as usize];
            if slot.seq == plan.msg_seq && slot.state == MsgState::Open {
                slot.placed = slot.placed.saturating_add(plan.len);
                if slot.placed >= slot.dma_len {
                    slot.state = MsgState::Done(RecvStatus::Success, None);
                    self.proven = true;
                }
            }
        }
        self.unanswered += 1;
        let mut ack_now = self.unanswered >= ack_every.max(1);
        if let Some(req) = self.pending_req {
            if !self.window.expected().before(req.next()) {
                // The hole below an answered AckReq filled.
                self.pending_req = None;
                ack_now = true;
            }
        }
        Committed {
            committed: true,
            ack_now,
        }
    }

    /// Whether committing `plan`'s packet finishes its message, so that
    /// the commit writes a receive completion: the driver commits (and
    /// ACKs) such a packet only when the receive CQ has room for it, and
    /// refuses it (RNR) otherwise, so that no message is acknowledged
    /// whose completion could not be written.
    pub fn completes(&self, plan: &Plan) -> bool {
        if !plan.op.claims_receive() {
            return false;
        }
        let slot = &self.msgs[(plan.msg_seq % MAX_MSGS) as usize];
        slot.seq == plan.msg_seq
            && slot.state == MsgState::Open
            && slot.placed.saturating_add(plan.len) >= slot.dma_len
    }

    /// Receives its unfinished messages hold.
    pub fn held_claims(&self) -> u32 {
        self.msgs
            .iter()
            .filter(|m| m.state == MsgState::Open)
            .count() as u32
    }

    /// Whether the source may take another receive for a message its
    /// packet does not finish ([`Plan::held`]): [`CLAIMS_UNPROVEN`] until a
    /// message of the stream has completed, [`CLAIMS_PROVEN`] after. The
    /// driver refuses the claim (RNR) otherwise.
    pub fn may_hold_claim(&self) -> bool {
        let budget = if self.proven {
            CLAIMS_PROVEN
        } else {
            CLAIMS_UNPROVEN
        };
        self.held_claims() < budget
    }

    /// A source that has never completed a message and has sent nothing
    /// for [`UNPROVEN_HOLD_NS`] loses the receives it holds: its open
    /// messages fail (the receives complete [`RecvStatus::RemoteAbort`],
    /// from [`Self::next_done`]) and stay failed, so that their later
    /// packets are refused ([`Refusal::InvalidRequest`]) rather than
    /// acknowledged into a receive that completed. Returns how many.
    pub fn drop_unproven_claims(&mut self, now: u64) -> u32 {
        if self.proven || now.saturating_sub(self.last_accepted) <= UNPROVEN_HOLD_NS {
            return 0;
        }
        let mut n = 0;
        for slot in self.msgs.iter_mut() {
            if slot.state == MsgState::Open {
                slot.state = MsgState::Done(RecvStatus::RemoteAbort, Some(Refusal::InvalidRequest));
                n += 1;
            }
        }
        n
    }

    /// The packet asked for an ACK (AckReq) and gets one now; remembers it
    /// if a hole lies below it, so that filling the hole is answered too.
    pub fn note_ack_request(&mut self, psn: Psn) {
        if self.window.expected().before(psn.next()) {
            // Not all of it and before it is in: the base stops short.
            let newer = match self.pending_req {
                Some(p) => p.before(psn),
                None => true,
            };
            if newer {
                self.pending_req = Some(psn);
            }
        }
    }

    /// Since when a packet has been waiting for an ACK, if one is.
    pub fn ack_owed(&self) -> Option<u64> {
        self.ack_owed
    }

    /// Marks an ACK as owed (sent within the ACK delay of the first packet
    /// that waits for it).
    pub fn owe_ack(&mut self, now: u64) {
        if self.ack_owed.is_none() {
            self.ack_owed = Some(now);
        }
    }

    /// The ACK to send now: clears what was owed.
    pub fn ack(&mut self) -> AckInfo {
        self.ack_owed = None;
        self.unanswered = 0;
        let base = self.window.expected();
        let sack = self.window.received_after_base();
        AckInfo {
            stream: self.stream,
            base,
            sack,
        }
    }

    /// The next receive completion the driver is to write: messages
    /// finished, failed or abandoned. Each comes out once.
    pub fn next_done(&mut self) -> Option<RecvDone> {
        for slot in self.msgs.iter_mut() {
            if let MsgState::Done(status, refusal) = slot.state {
                slot.state = match refusal {
                    Some(r) => MsgState::Failed(r),
                    None => MsgState::Free,
                };
                return Some(RecvDone {
                    recv: slot.recv,
                    status,
                    op: slot.op,
                    msg_seq: slot.seq,
                    len: slot.dma_len,
                });
            }
        }
        None
    }

    /// Reclaim: every message still open fails
    /// ([`RecvStatus::RemoteAbort`]); drain them with [`Self::next_done`]
    /// before dropping the state.
    pub fn abandon_all(&mut self) {
        for slot in self.msgs.iter_mut() {
            match slot.state {
                MsgState::Open => slot.state = MsgState::Done(RecvStatus::RemoteAbort, None),
                MsgState::Failed(_) => slot.state = MsgState::Free,
                _ => {}
            }
        }
    }

    /// Rule 4's second half: messages before `oldest` were finished or
    /// given up by the sender.
    fn abandon_before(&mut self, oldest: u32) {
        for slot in self.msgs.iter_mut() {
            if slot.state == MsgState::Free || !seq_before(slot.seq, oldest) {
                continue;
            }
            match slot.state {
                MsgState::Open => slot.state = MsgState::Done(RecvStatus::RemoteAbort, None),
                MsgState::Failed(_) => slot.state = MsgState::Free,
                // A report still pending stays until drained.
                _ => {}
            }
        }
    }
}

/// A receiving stream at rest, without its message table: what the window
/// needs to go on exactly as before (its base and the PSNs placed beyond
/// it, the oldest message the sender still tries) and when it last
/// accepted a packet. The driver keeps this in the peer entry and frees
/// the full [`RecvStream`] (most of which is the table of
/// [`MAX_MSGS`] messages) while the source sends nothing: an idle peer
/// costs the entry alone.
#[derive(Clone, Debug)]
pub struct ParkedRecv {
    stream: u64,
    cookie_time: u32,
    /// The window in the room of a 128-PSN one (a stream whose window
    /// holds PSNs further on does not park).
    window: RestingWindow,
    oldest_msg: u32,
    proven: bool,
    last_accepted: u64,
}

impl ParkedRecv {
    /// The sender's incarnation of the stream held.
    pub fn stream(&self) -> u64 {
        self.stream
    }

    /// As [`RecvStream::is_quiet`].
    pub fn is_quiet(&self, now: u64) -> bool {
        now.saturating_sub(self.last_accepted) > QUIET_NS
    }

    /// As [`RecvStream::held`].
    pub fn held(&self, now: u64) -> Held {
        Held {
            stream: self.stream,
            quiet: self.is_quiet(now),
            cookie_time: self.cookie_time,
        }
    }

    /// The stream in full again, exactly as it was parked.
    pub fn unpark(&self) -> RecvStream {
        RecvStream {
            stream: self.stream,
            cookie_time: self.cookie_time,
            window: RecvWindow::wake(&self.window),
            oldest_msg: self.oldest_msg,
            last_accepted: self.last_accepted,
            unanswered: 0,
            ack_owed: None,
            // Parked after a quiet spell longer than the CNP interval.
            cnps: CnpPacer::NEW,
            pending_req: None,
            proven: self.proven,
            msgs: [RecvMsg::FREE; MAX_MSGS as usize],
        }
    }
}

impl RecvStream {
    /// The stream's parked form if it has accepted nothing for `idle_ns`
    /// and holds nothing but its window: no message open, finished,
    /// failed or unreported, and no ACK owed. `None` otherwise (it stays
    /// as it is).
    pub fn park(&self, now: u64, idle_ns: u64) -> Option<ParkedRecv> {
        let at_rest = now.saturating_sub(self.last_accepted) >= idle_ns
            && self.ack_owed.is_none()
            && self.pending_req.is_none()
            && self.msgs.iter().all(|m| m.state == MsgState::Free);
        if !at_rest {
            return None;
        }
        Some(ParkedRecv {
            stream: self.stream,
            cookie_time: self.cookie_time,
            window: self.window.rest()?,
            oldest_msg: self.oldest_msg,
            proven: self.proven,
            last_accepted: self.last_accepted,
        })
    }
}

/// What [`RecvStream::commit`] did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Committed {
    pub committed: bool,
    pub ack_now: bool,
}

impl RecvMsg {
    /// Whether another packet of this open message fits: a SEND's bytes
    /// at its offset within the claimed receive, and no message takes
    /// more bytes than its length.
    fn fits(&self, pkt: &DataPacket) -> Option<Refusal> {
        if self.placed.saturating_add(pkt.len) > self.dma_len {
            return Some(Refusal::InvalidRequest);
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use super::super::cookie::{Binding, CookieKey, MAX_AGE_TICKS, TICK_NS};
    use super::*;

    const KEY: CookieKey = CookieKey::new(3, 4);
    const NOW: u64 = 3_600 * 1_000_000_000;

    fn packet(stream: u64, cookie: Cookie) -> DataPacket {
        DataPacket {
            psn: Psn::new(7),
            xeth: xeth::Repr {
                stream,
                peer_inc: 0,
                msg_seq: 0,
                oldest_psn: Psn::new(7),
                msg_lag: 0,
            },
            op: Op::Write,
            offset: 0,
            dma_len: 1,
            len: 1,
            ack_req: true,
            cookie,
        }
    }

    fn binding(stream: u64) -> Binding {
        Binding {
            src_gid: [1; 16],
            src_qpn: 2,
            dst_qpn: 3,
            stream,
        }
    }

    /// Rules 2 and 3 with the cookie, branch by branch (xud.rst, "Stream
    /// cookies").
    #[test]
    fn a_window_opens_for_a_fresh_cookie_only_and_takes_none_older() {
        let b = binding(9);
        let fresh = KEY.issue(&b, NOW);
        let admit_at = |held, c: Cookie, now| {
            let p = packet(9, c);
            admit(held, &p, KEY.verify(&b, &c), now)
        };
        // No window: a fresh cookie opens one; none, a forged one or a
        // stale one is challenged.
        assert_eq!(admit_at(None, fresh, NOW), Admission::Open);
        assert_eq!(admit_at(None, Cookie::NONE, NOW), Admission::Challenge);
        let forged = Cookie::new(fresh.time(), fresh.mac() ^ 0x100);
        assert_eq!(admit_at(None, forged, NOW), Admission::Challenge);
        let last = NOW + u64::from(MAX_AGE_TICKS) * TICK_NS;
        assert_eq!(admit_at(None, fresh, last), Admission::Open);
        assert_eq!(admit_at(None, fresh, last + TICK_NS), Admission::Challenge);
        assert_eq!(
            admit_at(None, KEY.issue(&binding(8), NOW), NOW),
            Admission::Challenge,
            "another stream's cookie"
        );
        // The stream's window held: any valid cookie no older than the one
        // that opened it, whatever its age; nothing else, and no challenge.
        let held = Some(Held {
            stream: 9,
            quiet: false,
            cookie_time: fresh.time(),
        });
        let much_later = NOW + 3_600 * 1_000_000_000;
        assert_eq!(admit_at(held, fresh, much_later), Admission::Held);
        let newer = KEY.issue(&b, NOW + 20 * TICK_NS);
        assert_eq!(admit_at(held, newer, much_later), Admission::Held);
        let older = KEY.issue(&b, NOW - TICK_NS);
        assert_eq!(admit_at(held, older, NOW), Admission::BadCookie);
        assert_eq!(admit_at(held, Cookie::NONE, NOW), Admission::BadCookie);
        assert_eq!(admit_at(held, forged, NOW), Admission::BadCookie);
        // Another stream's window: rule 3, unless it is quiet.
        let other = Held {
            stream: 8,
            quiet: false,
            cookie_time: fresh.time(),
        };
        assert_eq!(admit_at(Some(other), fresh, NOW), Admission::OtherStream);
        let quiet = Some(Held {
            quiet: true,
            ..other
        });
        assert_eq!(admit_at(quiet, fresh, NOW), Admission::Open);
        assert_eq!(admit_at(quiet, Cookie::NONE, NOW), Admission::Challenge);
    }

    /// Packet `k` (of 1000 bytes) of message `seq`, a SEND of `dma_len`
    /// bytes whose first packet is PSN `first` (one stream from PSN 0).
    fn send(seq: u32, first: u32, k: u32, dma_len: u32) -> DataPacket {
        DataPacket {
            psn: Psn::new(first + k),
            xeth: xeth::Repr {
                stream: 7,
                peer_inc: 0,
                msg_seq: seq,
                oldest_psn: Psn::new(0),
                msg_lag: seq as u8,
            },
            op: Op::Send,
            offset: u64::from(k * 1000),
            dma_len,
            len: (dma_len - k * 1000).min(1000),
            ack_req: false,
            cookie: Cookie::NONE,
        }
    }

    /// Checks and, if the stream allows a held claim, claims and commits
    /// `pkt`; whether it was placed.
    fn take(rs: &mut RecvStream, pkt: &DataPacket, recv: u32) -> bool {
        let Check::Place(mut plan) = rs.check(pkt, 0) else {
            return false;
        };
        if plan.claim {
            if plan.held && !rs.may_hold_claim() {
                rs.refuse(&plan, Refusal::ReceiverNotReady);
                return false;
            }
            rs.claimed(&mut plan, pkt, recv, 1 << 20).unwrap();
        }
        rs.commit(&plan, 16).committed
    }

    #[test]
    fn an_unproven_source_holds_one_receive_with_unfinished_messages() {
        let mut rs = RecvStream::new(&send(0, 0, 0, 3000), 0);
        // First packets of four 3-packet SENDs (PSNs 0, 3, 6, 9): only
        // the first claims a receive.
        let placed: std::vec::Vec<bool> = (0..4)
            .map(|m| take(&mut rs, &send(m, 3 * m, 0, 3000), m))
            .collect();
        assert_eq!(placed, [true, false, false, false]);
        assert_eq!(rs.held_claims(), 1);
        // A one-packet message is no held claim: it is not capped.
        let one = send(4, 12, 0, 500);
        let Check::Place(plan) = rs.check(&one, 0) else {
            panic!("a one-packet SEND is placed");
        };
        assert!(plan.claim && !plan.held);
    }

    #[test]
    fn a_source_that_completed_a_message_holds_more() {
        let mut rs = RecvStream::new(&send(0, 0, 0, 2000), 0);
        assert!(take(&mut rs, &send(0, 0, 0, 2000), 0));
        assert!(take(&mut rs, &send(0, 0, 1, 2000), 0));
        assert_eq!(rs.next_done().map(|d| d.status), Some(RecvStatus::Success));
        let placed = (1..=6)
            .filter(|&m| take(&mut rs, &send(m, 2 * m, 0, 2000), m))
            .count() as u32;
        assert_eq!(placed, CLAIMS_PROVEN);
        assert_eq!(rs.held_claims(), CLAIMS_PROVEN);
    }

    #[test]
    fn completes_names_the_packet_that_finishes_its_message() {
        let mut rs = RecvStream::new(&send(0, 0, 0, 2000), 0);
        assert!(take(&mut rs, &send(0, 0, 0, 2000), 0));
        let Check::Place(last) = rs.check(&send(0, 0, 1, 2000), 0) else {
            panic!("the second packet is placed");
        };
        assert!(rs.completes(&last));
        // Refused (RNR: the CQ is full), nothing is kept: the resend is
        // new and completes the message once.
        rs.refuse(&last, Refusal::ReceiverNotReady);
        assert_eq!(rs.next_done(), None);
        assert!(take(&mut rs, &send(0, 0, 1, 2000), 0));
        assert_eq!(rs.next_done().map(|d| d.status), Some(RecvStatus::Success));
    }

    #[test]
    fn an_unproven_source_loses_its_receives_after_the_short_hold() {
        let mut rs = RecvStream::new(&send(0, 0, 0, 3000), 0);
        assert!(take(&mut rs, &send(0, 0, 0, 3000), 5));
        assert_eq!(rs.drop_unproven_claims(UNPROVEN_HOLD_NS), 0);
        assert_eq!(rs.drop_unproven_claims(UNPROVEN_HOLD_NS + 1), 1);
        let d = rs.next_done().unwrap();
        assert_eq!((d.recv, d.status), (5, RecvStatus::RemoteAbort));
        // Its later packets are refused, never placed into a receive
        // that completed.
        assert_eq!(
            rs.check(&send(0, 0, 1, 3000), UNPROVEN_HOLD_NS + 2),
            Check::Refuse(Refusal::InvalidRequest)
        );
        // A proven source keeps them.
        let mut p = RecvStream::new(&send(0, 0, 0, 1000), 0);
        assert!(take(&mut p, &send(0, 0, 0, 1000), 0));
        assert!(p.next_done().is_some());
        assert!(take(&mut p, &send(1, 1, 0, 3000), 1));
        assert_eq!(p.drop_unproven_claims(QUIET_NS), 0);
    }

    #[test]
    fn a_parked_stream_stays_proven() {
        let mut rs = RecvStream::new(&send(0, 0, 0, 1000), 0);
        assert!(take(&mut rs, &send(0, 0, 0, 1000), 0));
        assert!(rs.next_done().is_some());
        rs.ack();
        let mut back = rs.park(10, 1).unwrap().unpark();
        let placed = (1..=3)
            .filter(|&m| take(&mut back, &send(m, 1 + 3 * (m - 1), 0, 3000), m))
            .count();
        assert_eq!(placed, 3);
    }
}
