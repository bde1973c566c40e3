// SPDX-License-Identifier: GPL-2.0

//! The RC requester: the send queue's side of reliability.
//!
//! Work requests ([`Message`]) are posted into a ring of [`Slot`]s in
//! caller-provided storage. The requester hands out packets to transmit
//! ([`Requester::next_packet`]), digests responses
//! ([`Requester::on_response`]: ACKs, NAKs, READ responses, atomic ACKs),
//! fires its timers ([`Requester::on_timeout`] at
//! [`Requester::next_deadline`]) and hands back completions in posting
//! order ([`Requester::next_completion`]).
//!
//! # State
//!
//! Four free-running counters split the ring, oldest first:
//!
//! ```text
//!  head ........ una_idx ........ high_idx ........ tail
//!  done, not     oldest with a    first never       next free
//!  yet polled    PSN unanswered   transmitted       slot
//! ```
//!
//! and four PSNs describe the stream:
//!
//! - `una`: the oldest PSN whose answer is missing. SEND/WRITE packets are
//!   answered by any ACK at or after their PSN; READ response PSNs by
//!   that response; an atomic by its atomic ACK. Everything before `una`
//!   is settled, so work requests wholly before it are complete.
//! - `acked`: one past the newest PSN the responder is known to have
//!   executed (from ACK, NAK and response PSNs). Between `una` and
//!   `acked` lie only READs and atomics whose responses were lost (or
//!   are late): the responder executed them and will replay them.
//! - `cur_psn` (with `cur_idx`): the transmit cursor. Normally at
//!   `high_psn`; after a timeout or NAK it goes back to `una` and walks
//!   forward again, skipping SEND/WRITE packets before `acked` and
//!   re-requesting READs and atomics there.
//! - `high_psn`: one past the newest PSN ever transmitted.
//!
//! PSNs are assigned at first transmission (`high_idx` advances), not at
//! posting, so many posted large messages never need more PSN space than
//! the window plus one READ.
//!
//! # Responses are taken in order
//!
//! A responder answers in PSN order, so a READ response or atomic ACK is
//! placed only at `una`; anything past `una` while `una` waits for a
//! READ/atomic answer means that answer was lost (an "implied NAK",
//! IBTA 9.7.5.1.5), and the requester re-requests from `una` at once
//! rather than waiting for the timeout. With a reordering network this
//! may re-request data that was merely late; the duplicate answers are
//! ignored.

use super::super::congestion::{Loss, Window};
use super::super::rtt::Rtt;
use super::{
    aeth, chunk, local_ack_timeout_ns, packets, position, psn_in, ring_capacity, rnr_timeout_ns,
    AckSyndrome, Class, Config, Direction, MsgKind, NakCode, Opcode, Operation, Position, Psn,
    Status, Transport, MAX_MSG_LEN, RNR_RETRY_INFINITE,
};

/// The window after a retransmit timeout, in PSNs (see `Requester::cwnd`).
pub const RESTART_WINDOW: u32 = 2;

/// Doublings of the retransmit timeout a run of timeouts may add before a
/// round trip is measured again (`rtt`'s Karn backoff). Few: the verbs
/// promise a dead peer is found after `retry_cnt` timeouts of about the
/// QP's `timeout` (rxe waits exactly that), and applications size their
/// own timers by it; enough that a path up to four times slower than the
/// QP expects still gets a sample and, through it, a longer timeout.
pub const MAX_TIMEOUT_BACKOFF: u8 = 2;

/// The longest retransmit timeout a measured round trip may ask for.
pub const MEASURED_TIMEOUT_MAX_NS: u64 = 4_000_000_000;

/// Most response packets one READ request asks for. A larger READ is
/// requested in segments of this many packets (each a READ request of its
/// own to the responder, with its own responder resource): the window,
/// checked before each request, then paces the responder's bursts as it
/// paces the requester's own packets. One request for a whole 1 MB READ
/// is 1024 response packets in one burst, whatever the window.
pub const READ_SEGMENT: u32 = 64;

/// A work request as the requester sees it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Message {
    /// The caller's handle (e.g. its send queue index or `wr_id` slot),
    /// returned in packets and completions.
    pub id: u32,
    /// The operation.
    pub kind: MsgKind,
    /// Bytes to send, write or read (atomics: 8); FLUSH: the bytes of
    /// the range it names (none of them sent).
    pub len: u32,
    /// IBV_SEND_FENCE: not transmitted until every READ and atomic
    /// posted before it is answered (its data or result has arrived).
    pub fence: bool,
    /// Unsignaled (no IBV_SEND_SIGNALED, no sq_sig_all): a success
    /// completes it silently, so its end need not ask for an ACK of its
    /// own when a message after it will (see [`Requester::next_packet`]).
    pub unsignaled: bool,
}

/// Per-work-request state in the requester's ring. Storage for it is the
/// caller's (`[Slot::EMPTY; N]` or an allocation).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Slot {
    id: u32,
    kind: MsgKind,
    len: u32,
    npkts: u32,
    /// First PSN, once transmitted.
    first: Psn,
    /// [`Message::fence`].
    fence: bool,
    /// [`Message::unsignaled`].
    unsignaled: bool,
}

impl Slot {
    /// An unused slot.
    pub const EMPTY: Slot = Slot {
        id: 0,
        kind: MsgKind::Send,
        len: 0,
        npkts: 1,
        first: Psn::new(0),
        fence: false,
        unsignaled: false,
    };

    fn end(&self) -> Psn {
        self.first.add(self.npkts)
    }
}

/// A work request's position in the ring: a free-running counter, for
/// [`Requester::fail_wqe`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct WqeRef(pub u32);

/// Why [`Requester::post`] refused a work request.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PostError {
    /// Every slot is in use.
    Full,
    /// Longer than [`MAX_MSG_LEN`], or so many packets that PSNs would
    /// stop being comparable (only near 2^31 bytes at MTU 256).
    TooLong,
    /// A READ or atomic on a QP with `max_rd_atomic == 0`.
    NoRdAtomic,
}

/// One packet to transmit: the kernel builds it with `wire`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TxPacket {
    /// BTH PSN.
    pub psn: Psn,
    /// BTH opcode; its `info()` lists the extension headers to add.
    pub opcode: Opcode,
    /// BTH AckReq.
    pub ack_req: bool,
    /// The message's [`Message::id`].
    pub id: u32,
    /// The message's ring position.
    pub wqe: WqeRef,
    /// Byte offset in the message of this packet's payload (SEND, WRITE)
    /// or of the first byte requested (READ; the RETH VA is the remote
    /// address plus this offset).
    pub offset: u32,
    /// Payload bytes (SEND, WRITE); bytes requested (READ); 0 (atomics,
    /// FLUSH).
    pub len: u32,
    /// RETH DMA length when the opcode carries a RETH: the whole message
    /// for a WRITE (its FIRST or ONLY packet), the bytes requested for a
    /// READ, the range's for a FLUSH. 0 otherwise.
    pub dma_len: u32,
    /// Sent before (a retransmission), for counters.
    pub retransmit: bool,
}

/// A response packet as the kernel parsed it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Incoming {
    /// BTH PSN.
    pub psn: Psn,
    /// BTH opcode.
    pub opcode: Opcode,
    /// The AETH, if the opcode has one.
    pub aeth: Option<aeth::Repr>,
    /// Payload bytes (READ responses).
    pub payload_len: u32,
}

/// What [`Requester::on_response`] asks of the caller.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// State updated; poll completions and packets.
    Handled,
    /// Copy this READ response's payload into the message's local buffer
    /// at `offset` (`len` bytes). If that fails, call
    /// [`Requester::fail_wqe`] before polling completions.
    ReadData {
        /// The READ's ring position.
        wqe: WqeRef,
        /// Its [`Message::id`].
        id: u32,
        /// Byte offset in the READ.
        offset: u32,
        /// Payload bytes.
        len: u32,
    },
    /// Store the AtomicAckETH's original value in the atomic's local
    /// buffer (same failure rule as `ReadData`).
    AtomicResult {
        /// The atomic's ring position.
        wqe: WqeRef,
        /// Its [`Message::id`].
        id: u32,
    },
    /// Stale, duplicate, unexpected or malformed: nothing to do (count
    /// it).
    Ignored,
}

/// What [`Requester::on_timeout`] did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TimerOutcome {
    /// Nothing was due.
    Nothing,
    /// The retransmit timer expired: packets will be resent from the
    /// oldest unacknowledged PSN.
    Retransmit,
    /// The RNR wait ended: sending resumes.
    RnrResume,
    /// Retries exhausted: the QP is in the error state; drain completions.
    Failed,
}

/// A completed work request.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Completion {
    /// Its ring position.
    pub wqe: WqeRef,
    /// Its [`Message::id`].
    pub id: u32,
    /// Its kind.
    pub kind: MsgKind,
    /// Its length.
    pub len: u32,
    /// How it ended.
    pub status: Status,
}

/// The work request `fail_wqe` named is not in the ring.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct NotPosted;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Retry {
    Timeout,
    Nak,
    Implied,
}

/// The requester of one RC QP. `S` is the slot storage; its largest
/// power-of-two prefix is used.
#[derive(Clone, Debug)]
pub struct Requester<S> {
    slots: S,
    cap: u32,

    mtu: u32,
    window: u32,
    /// The congestion window in use, at most `window`, in PSNs
    /// (`congestion::Window`: a CNP cuts it by its congestion estimate; a
    /// retransmit timeout restarts it at [`RESTART_WINDOW`]; a sequence
    /// NAK or an implied NAK halves it for the go-back-N pass, and it
    /// slow-starts back toward where it was, all the way after quiet
    /// rounds). Losses here are mostly bursts (a host socket buffer
    /// overflowing), not a path's capacity: TCP Reno's regrowth, one per
    /// round trip, never got back between them (64 KB and 1 MB SENDs lost
    /// a quarter of their bandwidth in `make bench`), and not shrinking at
    /// all made the next burst the whole window again (4 KB WRITEs fell to
    /// 0.85 of rxe).
    cc: Window,
    ack_every: u32,
    max_rd_atomic: u32,
    retry_cnt: u8,
    rnr_retry: u8,
    timeout_ns: Option<u64>,

    head: u32,
    una_idx: u32,
    cur_idx: u32,
    high_idx: u32,
    tail: u32,

    una: Psn,
    acked: Psn,
    cur_psn: Psn,
    high_psn: Psn,

    /// READs/atomics transmitted and not answered (`una_idx..high_idx`).
    rd_atomic_out: u32,
    /// Packets sent since the last one with AckReq.
    since_ack_req: u32,
    /// The PSN after the last packet sent with AckReq: while `una` is
    /// before it, an ACK is on its way (or the packet was lost, which a
    /// NAK or the timer finds).
    ack_req_end: Psn,

    retry_left: u8,
    rnr_left: u8,
    /// `una` when the last retransmission pass started, until progress:
    /// NAKs for the same point do not start another pass.
    retry_mark: Option<Psn>,

    deadline: Option<u64>,
    rnr_until: Option<u64>,
    rnr_psn: Psn,
    /// The round trip, from a first transmission that asked for an answer
    /// to the answer that acknowledges it (a READ's: its last response,
    /// which makes the sample longer, never shorter): the
    /// retransmit timeout is the QP's, or the round trip and four
    /// deviations if that is longer (IBTA's timeout is a least wait). A
    /// queue of many senders (incast) or a loaded host can make the path
    /// slower than the QP's timeout; timing out before the answer can
    /// come resends the whole window (go back N) and, retry after retry,
    /// fails the QP.
    rtt: Rtt,
    /// The packet being timed and when it left: one at a time, dropped
    /// when a pass goes back over it (Karn).
    timing: Option<(Psn, u64)>,

    /// A fatal NAK or exhausted RNR retries at a PSN beyond `una`: the
    /// error takes effect once the READs/atomics before it are answered.
    pending_error: Option<(Psn, Status)>,
    /// A work request that failed locally ([`Self::fail_wqe`]: a bad
    /// lkey found while building its packet, a WQE the QP cannot carry
    /// out) at this ring position: nothing from it on is transmitted, and
    /// the error takes effect once every work request before it is
    /// answered or has failed, so that none of those completes with
    /// success unacknowledged.
    local_error: Option<(u32, Status)>,
    /// The error state: the work request at this ring position completes
    /// with this status, later ones with `Flushed`.
    error: Option<(u32, Status)>,
}

impl<S: AsRef<[Slot]> + AsMut<[Slot]>> Requester<S> {
    /// A requester whose first PSN will be `start` (the QP's `sq_psn`),
    /// with the ring in `slots`.
    pub fn new(cfg: &Config, start: Psn, slots: S) -> Self {
        let cap = ring_capacity(slots.as_ref().len());
        Self {
            slots,
            cap,
            mtu: cfg.mtu.bytes(),
            window: cfg.window_clamped(),
            cc: Window::new(RESTART_WINDOW, cfg.window_clamped()),
            ack_every: cfg.ack_every_clamped(),
            max_rd_atomic: u32::from(cfg.max_rd_atomic),
            retry_cnt: cfg.retry_cnt,
            rnr_retry: cfg.rnr_retry,
            timeout_ns: local_ack_timeout_ns(cfg.timeout),
            head: 0,
            una_idx: 0,
            cur_idx: 0,
            high_idx: 0,
            tail: 0,
            una: start,
            acked: start,
            cur_psn: start,
            high_psn: start,
            rd_atomic_out: 0,
            since_ack_req: 0,
            ack_req_end: start,
            retry_left: cfg.retry_cnt,
            rnr_left: cfg.rnr_retry,
            retry_mark: None,
            deadline: None,
            rnr_until: None,
            rnr_psn: start,
            rtt: Rtt::NEW,
            timing: None,
            pending_error: None,
            local_error: None,
            error: None,
        }
    }

    /// Work requests the ring holds at most.
    pub fn capacity(&self) -> u32 {
        self.cap
    }

    /// Work requests posted and not yet returned by `next_completion`.
    pub fn len(&self) -> u32 {
        self.tail.wrapping_sub(self.head)
    }

    /// No work request is outstanding.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The QP is in the error state (every remaining work request
    /// completes in error).
    pub fn is_error(&self) -> bool {
        self.error.is_some()
    }

    /// The next PSN a new packet will use (`sq_psn` for query_qp).
    pub fn next_psn(&self) -> Psn {
        self.high_psn
    }

    /// The oldest PSN not yet answered.
    pub fn oldest_unacked(&self) -> Psn {
        self.una
    }

    fn slot(&self, i: u32) -> Slot {
        let mask = self.cap.wrapping_sub(1);
        self.slots
            .as_ref()
            .get((i & mask) as usize)
            .copied()
            .unwrap_or(Slot::EMPTY)
    }

    fn set_slot(&mut self, i: u32, s: Slot) {
        let mask = self.cap.wrapping_sub(1);
        if let Some(x) = self.slots.as_mut().get_mut((i & mask) as usize) {
            *x = s;
        }
    }

    /// `a` comes before `b` among the ring counters (both within the
    /// `cap` entries from `head`).
    fn idx_before(&self, a: u32, b: u32) -> bool {
        a.wrapping_sub(self.head) < b.wrapping_sub(self.head)
    }

    /// Appends a work request. Allowed in the error state too (it will
    /// complete as `Flushed`), as IB allows posting to a QP in error.
    pub fn post(&mut self, msg: Message) -> Result<WqeRef, PostError> {
        if self.len() >= self.cap {
            return Err(PostError::Full);
        }
        if msg.kind.is_read_or_atomic() && self.max_rd_atomic == 0 {
            return Err(PostError::NoRdAtomic);
        }
        let len = if msg.kind.is_eight_bytes() {
            8
        } else {
            msg.len
        };
        if len > MAX_MSG_LEN {
            return Err(PostError::TooLong);
        }
        let npkts = packets(msg.kind, len, self.mtu);
        // One message plus the window must stay within half the PSN
        // space for serial comparisons to hold.
        if npkts >= Psn::HALF - self.window - 1 {
            return Err(PostError::TooLong);
        }
        let at = self.tail;
        self.set_slot(
            at,
            Slot {
                id: msg.id,
                kind: msg.kind,
                len,
                npkts,
                first: self.high_psn,
                fence: msg.fence,
                unsignaled: msg.unsignaled,
            },
        );
        self.tail = at.wrapping_add(1);
        Ok(WqeRef(at))
    }

    /// The next packet to transmit, if the window, `max_rd_atomic` and any
    /// RNR wait allow one. Call until `None` after posting, after
    /// responses and after timers; it arms the retransmit timer (see
    /// [`Self::next_deadline`]).
    pub fn next_packet(&mut self, now: u64) -> Option<TxPacket> {
        if self.error.is_some() {
            return None;
        }
        if let Some(t) = self.rnr_until {
            if now < t {
                return None;
            }
            self.rnr_until = None;
        }
        self.normalize_cursor();
        if self.cur_idx == self.tail {
            return None;
        }
        if let Some((p, _)) = self.pending_error {
            if !self.cur_psn.before(p) {
                return None;
            }
        }
        if let Some((at, _)) = self.local_error {
            if !self.idx_before(self.cur_idx, at) {
                return None;
            }
        }
        let ahead = self.cur_psn.diff(self.una);
        if ahead < 0 || !self.cc.allows(ahead as u32) {
            return None;
        }
        let fresh = self.cur_idx == self.high_idx;
        let mut w = self.slot(self.cur_idx);
        // A fenced work request waits for the answers of every READ and
        // atomic before it (all transmitted: the cursor is past them).
        // Retransmissions of it need no wait: it was sent after them once.
        if fresh && w.fence && self.rd_atomic_out > 0 {
            return None;
        }
        // Each READ segment and each atomic takes one of the responder's
        // resources when first requested (a READ's later segments are
        // new PSNs of a message already started).
        let new_request = w.kind.is_read_or_atomic() && !self.cur_psn.before(self.high_psn);
        if new_request {
            if self.rd_atomic_out >= self.max_rd_atomic {
                return None;
            }
            self.rd_atomic_out += 1;
        }
        if fresh {
            w.first = self.cur_psn;
            self.set_slot(self.cur_idx, w);
            self.high_idx = self.high_idx.wrapping_add(1);
        }
        let k = self.cur_psn.diff(w.first);
        if k < 0 || k as u32 >= w.npkts {
            // Cannot happen (the cursor always lies in its message);
            // resynchronise on the oldest unanswered PSN.
            self.go_back();
            return None;
        }
        let k = k as u32;
        let retransmit = self.cur_psn.before(self.high_psn);
        let psn = self.cur_psn;
        let wqe = WqeRef(self.cur_idx);
        let (pkt, next) = if w.kind.carries_payload() {
            let (offset, len) = chunk(w.len, self.mtu, k);
            let pos = position(k, w.npkts);
            let last = pos.ends_message();
            let next = psn.next();
            // AckReq at each message end (its completion waits for the
            // ACK) unless the end can wait for a later one's (below),
            // every `ack_every` packets but at least twice a window
            // (so a full window always holds a request for an ACK), and on
            // the packet that fills the window if no request is still
            // unanswered. Asking on every window-filling packet would
            // make each ACK that opens a few PSNs bring back an ACK for
            // those few: one ACK per handful of packets, for good.
            let spacing = self.ack_every.min((self.cc.cwnd() / 2).max(1));
            let fills = next.diff(self.una) as u32 >= self.cc.cwnd();
            let ack_req = (last && !self.end_covered_later(&w, retransmit))
                || self.since_ack_req.saturating_add(1) >= spacing
                || (fills && !self.una.before(self.ack_req_end));
            let dma_len = if w.kind.class() == Class::Write && pos.starts_message() {
                w.len
            } else {
                0
            };
            let pkt = TxPacket {
                psn,
                opcode: w.kind.opcode(pos),
                ack_req,
                id: w.id,
                wqe,
                offset,
                len,
                dma_len,
                retransmit,
            };
            if last {
                self.cur_idx = self.cur_idx.wrapping_add(1);
            }
            (pkt, next)
        } else {
            // A READ asks from packet k to the end of k's segment; an
            // atomic is one packet.
            let seg_end = if w.kind == MsgKind::Read {
                self.segment_end(&w, k)
            } else {
                w.npkts
            };
            // READ: the bytes asked for; ATOMIC WRITE: its 8 bytes,
            // carried; FLUSH: none carried, its range's length named
            // (dma_len); atomics: none (operands in the AtomicETH).
            let (offset, len, dma_len) = match w.kind {
                MsgKind::Read => {
                    let (offset, _) = chunk(w.len, self.mtu, k);
                    let end = seg_end.saturating_mul(self.mtu).min(w.len);
                    let len = end.saturating_sub(offset);
                    (offset, len, len)
                }
                MsgKind::AtomicWrite => (0, w.len, w.len),
                MsgKind::Flush => (0, 0, w.len),
                _ => (0, 0, 0),
            };
            let pkt = TxPacket {
                psn,
                opcode: w.kind.opcode(position(0, 1)),
                ack_req: true,
                id: w.id,
                wqe,
                offset,
                len,
                dma_len,
                retransmit,
            };
            if seg_end >= w.npkts {
                self.cur_idx = self.cur_idx.wrapping_add(1);
            }
            (pkt, w.first.add(seg_end))
        };
        if pkt.ack_req && !pkt.retransmit && self.timing.is_none() {
            self.timing = Some((pkt.psn, now));
        }
        if pkt.ack_req {
            self.since_ack_req = 0;
            self.ack_req_end = next;
        } else {
            self.since_ack_req = self.since_ack_req.saturating_add(1);
        }
        self.cur_psn = next;
        if self.high_psn.before(next) {
            self.high_psn = next;
        }
        if self.deadline.is_none() {
            self.deadline = self.retransmit_deadline(now);
        }
        Some(pkt)
    }

    /// Whether the end of `w`, the message at the cursor, may go without
    /// AckReq because the ACK a later message asks for will cover it (an
    /// ACK is cumulative): `w` is unsignaled, sent for the first time,
    /// and the message after it is already posted and due at once, with
    /// no error pending that could hold it back. nvme-rdma's target posts
    /// an unsignaled WRITE of the data and the signaled SEND of the
    /// response together: one ACK answers both, not one each. A
    /// retransmission always asks, so a resent end can never wait on a
    /// message that is not resent; a message after it that does not
    /// leave at once (fenced, beyond the READ/atomic limit, or the window
    /// full) waits on answers that come, or on the window-filling
    /// packet's own request.
    fn end_covered_later(&self, w: &Slot, retransmit: bool) -> bool {
        if !w.unsignaled || retransmit || self.pending_error.is_some() || self.local_error.is_some()
        {
            return false;
        }
        let next = self.cur_idx.wrapping_add(1);
        if next == self.tail {
            return false;
        }
        let n = self.slot(next);
        let fenced = n.fence && self.rd_atomic_out > 0;
        let over_limit = n.kind.is_read_or_atomic() && self.rd_atomic_out >= self.max_rd_atomic;
        !fenced && !over_limit
    }

    /// Moves the transmit cursor past what needs no transmission: PSNs
    /// before `una`, and SEND/WRITE packets the responder has ACKed.
    /// Amortised O(1): the work requests skipped are behind `acked` and
    /// are not walked again until the next retransmission pass.
    fn normalize_cursor(&mut self) {
        for _ in 0..=self.cap {
            if self.cur_idx == self.high_idx {
                return;
            }
            if self.cur_psn.before(self.una) {
                self.cur_idx = self.una_idx;
                self.cur_psn = self.una;
                continue;
            }
            if !self.cur_psn.before(self.acked) {
                return;
            }
            let w = self.slot(self.cur_idx);
            if w.kind.is_read_or_atomic() {
                // Executed but unanswered: re-request it.
                return;
            }
            let end = w.end();
            if self.acked.before(end) {
                self.cur_psn = self.acked;
                return;
            }
            self.cur_idx = self.cur_idx.wrapping_add(1);
            self.cur_psn = end;
        }
    }

    /// Restarts transmission at the oldest unanswered PSN.
    fn go_back(&mut self) {
        self.cur_idx = self.una_idx;
        self.cur_psn = self.una;
        // The timed packet, if not answered, goes again (Karn).
        self.timing = None;
        self.since_ack_req = 0;
        // Requests for ACKs beyond `una` may be among the lost.
        self.ack_req_end = self.una;
    }

    /// Something was sent and is not answered.
    fn outstanding(&self) -> bool {
        self.una.before(self.high_psn)
    }

    /// The earliest time [`Self::on_timeout`] has something to do:
    /// the end of an RNR wait, or the retransmit timer.
    pub fn next_deadline(&self) -> Option<u64> {
        if self.error.is_some() {
            return None;
        }
        self.rnr_until.or(self.deadline)
    }

    /// Runs the timers due at `now`.
    pub fn on_timeout(&mut self, now: u64) -> TimerOutcome {
        if self.error.is_some() {
            return TimerOutcome::Nothing;
        }
        if let Some(t) = self.rnr_until {
            if now < t {
                return TimerOutcome::Nothing;
            }
            self.rnr_until = None;
            return TimerOutcome::RnrResume;
        }
        match self.deadline {
            Some(d) if now >= d => {
                if !self.outstanding() {
                    self.deadline = None;
                    return TimerOutcome::Nothing;
                }
                self.retry(Retry::Timeout, now);
                if self.error.is_some() {
                    TimerOutcome::Failed
                } else {
                    TimerOutcome::Retransmit
                }
            }
            _ => TimerOutcome::Nothing,
        }
    }

    /// Starts a retransmission pass from `una`, or fails the QP when the
    /// retry budget is spent. NAK-triggered passes from a point already
    /// being retried are skipped.
    fn retry(&mut self, why: Retry, now: u64) {
        if self.error.is_some() {
            return;
        }
        if why != Retry::Timeout && self.retry_mark == Some(self.una) {
            return;
        }
        if self.retry_left == 0 {
            self.enter_error(self.una_idx, Status::RetryExceeded);
            return;
        }
        self.retry_left -= 1;
        self.shrink_window(why);
        self.go_back();
        self.retry_mark = Some(self.una);
        if why == Retry::Timeout && self.rtt.backoff() < MAX_TIMEOUT_BACKOFF {
            self.rtt.back_off();
        }
        self.deadline = self.retransmit_deadline(now);
    }

    /// When the retransmit timer fires if armed at `now`: the QP's
    /// timeout, or the measured round trip's if longer, backed off after
    /// timeouts until the next sample; `None` for the QP's infinite
    /// timeout (0).
    fn retransmit_deadline(&self, now: u64) -> Option<u64> {
        self.timeout_ns.map(|t| {
            let wait = self.rtt.timeout(t, MEASURED_TIMEOUT_MAX_NS.max(t));
            now.saturating_add(self.rtt.backed_off(wait, 0))
        })
    }

    /// A CNP for this QP came: its packets met a congested queue. Returns
    /// whether it cut the window (the first of a round does).
    pub fn congestion_notified(&mut self) -> bool {
        self.cc.on_cnp()
    }

    /// The congestion window, for counters and resource dumps.
    pub fn congestion(&self) -> &Window {
        &self.cc
    }

    /// A loss was detected: a timeout (the path or the peer stopped taking
    /// packets) or a sequence NAK or implied NAK (a packet lost while
    /// later ones arrive: the path still works). `congestion::Window`
    /// says what each does to the window.
    fn shrink_window(&mut self, why: Retry) {
        self.cc.on_loss(match why {
            Retry::Timeout => Loss::Timeout,
            Retry::Nak | Retry::Implied => Loss::Gap(1),
        });
    }

    fn enter_error(&mut self, at: u32, status: Status) {
        if self.error.is_none() {
            self.error = Some((at, status));
        }
        self.deadline = None;
        self.rnr_until = None;
        self.pending_error = None;
        self.local_error = None;
    }

    /// Records that the responder executed everything before `p`, if that
    /// is news and `p` was transmitted.
    fn raise_acked(&mut self, p: Psn) {
        if self.acked.before(p) && !self.high_psn.before(p) {
            self.acked = p;
        }
    }

    /// Moves `una` over SEND/WRITE packets before `acked`; stops at the
    /// first READ/atomic still waiting for its answer.
    fn advance_una(&mut self) {
        for _ in 0..=self.cap {
            if self.una_idx == self.high_idx {
                return;
            }
            let w = self.slot(self.una_idx);
            if w.kind.is_read_or_atomic() {
                return;
            }
            let end = w.end();
            if self.acked.before(end) {
                if self.una.before(self.acked) {
                    self.una = self.acked;
                }
                return;
            }
            self.una = end;
            self.una_idx = self.una_idx.wrapping_add(1);
        }
    }

    /// A READ response or atomic ACK at `x` tells that the responder
    /// executed every request before the READ/atomic it answers. Finds
    /// that work request from `una_idx` (stopping early at a READ/atomic
    /// with answers missing) and raises `acked` to its first PSN. The
    /// SEND/WRITEs walked over complete, so this is amortised O(1).
    fn ack_before_response(&mut self, x: Psn) {
        let mut i = self.una_idx;
        for _ in 0..=self.cap {
            if i == self.high_idx {
                return;
            }
            let w = self.slot(i);
            if w.kind.is_read_or_atomic() || psn_in(x, w.first, w.end()) {
                self.raise_acked(w.first);
                return;
            }
            i = i.wrapping_add(1);
        }
    }

    /// Common tail of response handling: progress bookkeeping, deferred
    /// errors and implied NAKs.
    fn settle(&mut self, x: Psn, accepted: bool, implied: bool, before: (Psn, Psn), now: u64) {
        self.advance_una();
        if self.acked.before(self.una) {
            self.acked = self.una;
        }
        if (self.una, self.acked) != before {
            let answered = self.una.diff(before.0).max(0) as u32;
            self.cc.on_answered(answered);
            self.retry_left = self.retry_cnt;
            // The RNR budget is per PSN: answers to earlier READs do not
            // restore it.
            if self.rnr_psn.before(self.una) {
                self.rnr_left = self.rnr_retry;
            }
            self.retry_mark = None;
            // Restart the retransmit timer, unless waiting out an RNR NAK
            // (sending resumes, and arms it, when the wait ends).
            if let Some((p, sent)) = self.timing {
                if p.before(self.una) {
                    self.timing = None;
                    self.rtt.sample(now.saturating_sub(sent));
                }
            }
            self.deadline = if self.outstanding() && self.rnr_until.is_none() {
                self.retransmit_deadline(now)
            } else {
                None
            };
        }
        if let Some((p, status)) = self.pending_error {
            if !self.una.before(p) {
                self.enter_error(self.una_idx, status);
                return;
            }
        }
        if self.local_error_due() {
            return;
        }
        if implied
            && !accepted
            && self.una_idx != self.high_idx
            && self.slot(self.una_idx).kind.is_read_or_atomic()
            && !x.before(self.una)
        {
            self.retry(Retry::Implied, now);
        }
    }

    /// Digests a response packet (ACK, NAK, READ response, atomic ACK).
    pub fn on_response(&mut self, r: &Incoming, now: u64) -> Outcome {
        if self.error.is_some() {
            return Outcome::Ignored;
        }
        let info = match r.opcode.info() {
            Ok(i) if i.transport == Transport::Rc && i.direction == Direction::Response => i,
            _ => return Outcome::Ignored,
        };
        let x = r.psn;
        // Only PSNs transmitted and not yet settled carry news.
        if !psn_in(x, self.una, self.high_psn) {
            return Outcome::Ignored;
        }
        let syndrome = r.aeth.map(|a| a.syndrome);
        // A NAK names the PSN the responder expected; one before a PSN
        // known to be executed is stale (late or duplicated).
        let nak = matches!(
            syndrome,
            Some(AckSyndrome::RnrNak { .. } | AckSyndrome::Nak(_))
        );
        if nak && x.before(self.acked) {
            return Outcome::Ignored;
        }
        let before = (self.una, self.acked);
        match info.operation {
            Operation::Acknowledge => match syndrome {
                Some(AckSyndrome::Ack { .. }) => {
                    self.raise_acked(x.next());
                    self.settle(x, false, true, before, now);
                    Outcome::Handled
                }
                Some(AckSyndrome::RnrNak { timer_code }) => self.on_rnr_nak(x, timer_code, now),
                Some(AckSyndrome::Nak(NakCode::PsnSequenceError)) => {
                    self.raise_acked(x);
                    self.settle(x, false, false, before, now);
                    self.retry(Retry::Nak, now);
                    Outcome::Handled
                }
                Some(AckSyndrome::Nak(code)) => {
                    self.raise_acked(x);
                    if self.pending_error.is_none() {
                        self.pending_error = Some((x, Status::of_nak(code)));
                    }
                    self.settle(x, false, true, before, now);
                    Outcome::Handled
                }
                Some(AckSyndrome::Reserved(_)) | None => Outcome::Ignored,
            },
            Operation::RdmaReadResponse => {
                if info.position != Position::Middle
                    && !matches!(syndrome, Some(AckSyndrome::Ack { .. }))
                {
                    return Outcome::Ignored;
                }
                self.on_read_response(x, info.position, r.payload_len, before, now)
            }
            Operation::AtomicAcknowledge => {
                if !matches!(syndrome, Some(AckSyndrome::Ack { .. })) {
                    return Outcome::Ignored;
                }
                self.ack_before_response(x);
                self.advance_una();
                let w = self.slot(self.una_idx);
                if self.una_idx != self.high_idx && x == self.una && w.kind.is_atomic() {
                    let wqe = WqeRef(self.una_idx);
                    self.answered_rd_atomic(w);
                    self.settle(x, true, true, before, now);
                    Outcome::AtomicResult { wqe, id: w.id }
                } else {
                    self.settle(x, false, true, before, now);
                    Outcome::Ignored
                }
            }
            _ => Outcome::Ignored,
        }
    }

    /// The READ/atomic at `una_idx` is fully answered.
    /// One past the last packet of the READ segment holding packet `k` of
    /// `w` (segments are [`READ_SEGMENT`] packets from the message's
    /// start, at most the window).
    fn segment_end(&self, w: &Slot, k: u32) -> u32 {
        let seg = READ_SEGMENT.min(self.window).max(1);
        (k / seg).saturating_add(1).saturating_mul(seg).min(w.npkts)
    }

    fn answered_rd_atomic(&mut self, w: Slot) {
        self.una = w.end();
        self.una_idx = self.una_idx.wrapping_add(1);
        self.rd_atomic_out = self.rd_atomic_out.saturating_sub(1);
    }

    fn on_read_response(
        &mut self,
        x: Psn,
        pos: Position,
        payload_len: u32,
        before: (Psn, Psn),
        now: u64,
    ) -> Outcome {
        self.ack_before_response(x);
        self.advance_una();
        let w = self.slot(self.una_idx);
        if self.una_idx != self.high_idx
            && x == self.una
            && w.kind.answered_without_data()
            && pos == Position::Only
            && payload_len == 0
        {
            // An ATOMIC WRITE's or FLUSH's answer: a READ response
            // without data.
            self.answered_rd_atomic(w);
            self.settle(x, true, true, before, now);
            return Outcome::Handled;
        }
        if self.una_idx == self.high_idx || x != self.una || w.kind != MsgKind::Read {
            self.settle(x, false, true, before, now);
            return Outcome::Ignored;
        }
        let k = x.diff(w.first) as u32;
        let (offset, len) = chunk(w.len, self.mtu, k);
        let last = k.saturating_add(1) >= w.npkts;
        // Each READ segment is a response message of its own.
        let ends_request = k.saturating_add(1) >= self.segment_end(&w, k);
        // A responder restarting mid-READ may use FIRST or MIDDLE (rxe
        // uses MIDDLE), so only the end of the message is checked.
        if pos.ends_message() != ends_request || payload_len != len {
            self.settle(x, false, true, before, now);
            return Outcome::Ignored;
        }
        let wqe = WqeRef(self.una_idx);
        if last {
            self.answered_rd_atomic(w);
        } else {
            if ends_request {
                // The segment's responder resource is free again.
                self.rd_atomic_out = self.rd_atomic_out.saturating_sub(1);
            }
            self.una = x.next();
        }
        self.settle(x, true, true, before, now);
        Outcome::ReadData {
            wqe,
            id: w.id,
            offset,
            len,
        }
    }

    fn on_rnr_nak(&mut self, p: Psn, timer_code: u8, now: u64) -> Outcome {
        let before = (self.una, self.acked);
        self.raise_acked(p);
        self.settle(p, false, false, before, now);
        if self.error.is_some() {
            return Outcome::Handled;
        }
        if self.rnr_until.is_some() && self.rnr_psn == p {
            // The same RNR NAK again (duplicated in the network).
            return Outcome::Ignored;
        }
        if self.rnr_left == 0 {
            if self.una.before(p) {
                if self.pending_error.is_none() {
                    self.pending_error = Some((p, Status::RnrRetryExceeded));
                }
            } else {
                self.enter_error(self.una_idx, Status::RnrRetryExceeded);
            }
            return Outcome::Handled;
        }
        if self.rnr_retry != RNR_RETRY_INFINITE {
            self.rnr_left -= 1;
        }
        self.rnr_until = Some(now.saturating_add(rnr_timeout_ns(timer_code)));
        self.rnr_psn = p;
        self.go_back();
        self.retry_mark = Some(self.una);
        self.deadline = None;
        Outcome::Handled
    }

    /// The next completion, in posting order, if the oldest work request
    /// is done (or the QP is in error).
    pub fn next_completion(&mut self) -> Option<Completion> {
        if self.head == self.tail {
            return None;
        }
        let status = match self.error {
            Some((at, status)) => {
                if self.idx_before(self.head, at) {
                    Status::Success
                } else {
                    // This one (at == head) or past it: everything after
                    // the failed one is flushed.
                    self.error = Some((self.head.wrapping_add(1), Status::Flushed));
                    if self.head == at {
                        status
                    } else {
                        Status::Flushed
                    }
                }
            }
            None => {
                if self.head == self.una_idx {
                    return None;
                }
                Status::Success
            }
        };
        let w = self.slot(self.head);
        let c = Completion {
            wqe: WqeRef(self.head),
            id: w.id,
            kind: w.kind,
            len: w.len,
            status,
        };
        self.head = self.head.wrapping_add(1);
        Some(c)
    }

    /// `wqe` failed locally: the caller could not build its packet (a
    /// bad lkey, a WQE the QP cannot carry out) or place its response
    /// (its local buffer is gone). It completes with `status`, everything
    /// after it with `Flushed`, and the QP is in error; but in order: the
    /// work requests before it that are still unanswered keep being
    /// retransmitted until they are answered (and complete with success)
    /// or fail (and `wqe` is flushed after them). Nothing from `wqe` on
    /// is transmitted meanwhile. Call before polling the completion of
    /// `wqe`.
    pub fn fail_wqe(&mut self, wqe: WqeRef, status: Status) -> Result<(), NotPosted> {
        if wqe.0.wrapping_sub(self.head) >= self.len() {
            return Err(NotPosted);
        }
        if self.error.is_some() {
            return Ok(());
        }
        // The earliest local failure is the one that counts.
        match self.local_error {
            Some((at, _)) if !self.idx_before(wqe.0, at) => {}
            _ => self.local_error = Some((wqe.0, status)),
        }
        self.local_error_due();
        Ok(())
    }

    /// The QP is in the error state, or a local failure waits (see
    /// [`Self::fail_wqe`]): the caller should not expect more progress
    /// from the work requests it posted after the failed one.
    pub fn is_failing(&self) -> bool {
        self.error.is_some() || self.local_error.is_some()
    }

    /// A local failure takes effect once nothing before it is
    /// unanswered (`una_idx` reached it, or passed it: a READ whose data
    /// could not be placed is answered already). Whether the QP is now in
    /// error.
    fn local_error_due(&mut self) -> bool {
        match self.local_error {
            Some((at, status)) if !self.idx_before(self.una_idx, at) => {
                self.enter_error(at, status);
                true
            }
            _ => false,
        }
    }

    /// The QP moved to the error state (modify_qp or a fatal event):
    /// every work request not yet done completes with `Flushed`.
    pub fn flush(&mut self) {
        self.enter_error(self.una_idx, Status::Flushed);
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
            retry_cnt: 3,
            rnr_retry: 2,
            timeout: 10,
            min_rnr_timer: 1,
            max_rd_atomic: 2,
            max_dest_rd_atomic: 2,
            ack_every: 4,
            window: 16,
        }
    }

    type Req = Requester<[Slot; 8]>;

    fn req(start: u32) -> Req {
        Requester::new(&cfg(), Psn::new(start), [Slot::EMPTY; 8])
    }

    fn msg(id: u32, kind: MsgKind, len: u32) -> Message {
        Message {
            unsignaled: false,
            id,
            kind,
            len,
            fence: false,
        }
    }

    fn drain(r: &mut Req, now: u64) -> Vec<TxPacket> {
        core::iter::from_fn(|| r.next_packet(now)).collect()
    }

    fn completions(r: &mut Req) -> Vec<(u32, Status)> {
        core::iter::from_fn(|| r.next_completion())
            .map(|c| (c.id, c.status))
            .collect()
    }

    fn ack(psn: Psn) -> Incoming {
        Incoming {
            psn,
            opcode: Opcode::RC_ACKNOWLEDGE,
            aeth: Some(aeth::Repr {
                syndrome: AckSyndrome::ACK_NO_CREDITS,
                msn: 0,
            }),
            payload_len: 0,
        }
    }

    fn nak(psn: Psn, syndrome: AckSyndrome) -> Incoming {
        Incoming {
            aeth: Some(aeth::Repr { syndrome, msn: 0 }),
            ..ack(psn)
        }
    }

    fn read_resp(psn: Psn, opcode: Opcode, len: u32) -> Incoming {
        let with_aeth = opcode != Opcode::RC_RDMA_READ_RESPONSE_MIDDLE;
        Incoming {
            psn,
            opcode,
            aeth: with_aeth.then_some(aeth::Repr {
                syndrome: AckSyndrome::ACK_NO_CREDITS,
                msn: 0,
            }),
            payload_len: len,
        }
    }

    /// An unsignaled WRITE with a SEND posted behind it leaves its ACK to
    /// the SEND's (nvme-rdma's target: data, then the response): one ACK
    /// for both; alone, or resent, it asks for its own; a signaled one
    /// always does.
    #[test]
    fn an_unsignaled_end_leaves_its_ack_to_the_next_message() {
        let quiet = |id, kind, len| Message {
            unsignaled: true,
            ..msg(id, kind, len)
        };
        let asks = |p: &[TxPacket]| p.iter().map(|p| p.ack_req).collect::<Vec<_>>();
        let mut r = req(100);
        r.post(quiet(1, MsgKind::Write, 2 * MTU)).unwrap();
        r.post(msg(2, MsgKind::Send, 10)).unwrap();
        let p = drain(&mut r, 0);
        assert_eq!(asks(&p), [false, false, true]);
        // The SEND's ACK completes both.
        r.on_response(&ack(Psn::new(102)), 1);
        assert_eq!(
            completions(&mut r),
            [(1, Status::Success), (2, Status::Success)]
        );

        // Alone, it asks.
        let mut r = req(100);
        r.post(quiet(1, MsgKind::Write, 2 * MTU)).unwrap();
        assert_eq!(asks(&drain(&mut r, 0)), [false, true]);

        // Resent (a sequence NAK for it), it asks, although the SEND
        // behind it is resent too and asks as well.
        let mut r = req(100);
        r.post(quiet(1, MsgKind::Write, 10)).unwrap();
        r.post(msg(2, MsgKind::Send, 10)).unwrap();
        assert_eq!(asks(&drain(&mut r, 0)), [false, true]);
        r.on_response(
            &nak(Psn::new(100), AckSyndrome::Nak(NakCode::PsnSequenceError)),
            1,
        );
        let p = drain(&mut r, 1);
        assert!(p.iter().all(|p| p.retransmit), "{p:?}");
        assert_eq!(asks(&p), [true, true]);

        // Signaled, it asks.
        let mut r = req(100);
        r.post(msg(1, MsgKind::Write, 2 * MTU)).unwrap();
        r.post(msg(2, MsgKind::Send, 10)).unwrap();
        assert_eq!(asks(&drain(&mut r, 0)), [false, true, true]);

        // A READ behind it beyond the READ limit cannot leave at once:
        // the WRITE asks.
        let mut r = Req::new(
            &Config {
                max_rd_atomic: 1,
                ..cfg()
            },
            Psn::new(100),
            [Slot::EMPTY; 8],
        );
        r.post(msg(1, MsgKind::Read, 10)).unwrap();
        r.post(quiet(2, MsgKind::Write, 10)).unwrap();
        r.post(msg(3, MsgKind::Read, 10)).unwrap();
        assert_eq!(asks(&drain(&mut r, 0)), [true, true]);
    }

    #[test]
    fn multi_packet_write_opcodes_offsets_and_ack_req() {
        let mut r = req(100);
        r.post(msg(7, MsgKind::WriteImm, 5 * MTU + 10)).unwrap();
        let p = drain(&mut r, 0);
        let ops: Vec<_> = p.iter().map(|p| p.opcode).collect();
        assert_eq!(
            ops,
            [
                Opcode::RC_RDMA_WRITE_FIRST,
                Opcode::RC_RDMA_WRITE_MIDDLE,
                Opcode::RC_RDMA_WRITE_MIDDLE,
                Opcode::RC_RDMA_WRITE_MIDDLE,
                Opcode::RC_RDMA_WRITE_MIDDLE,
                Opcode::RC_RDMA_WRITE_LAST_WITH_IMMEDIATE,
            ]
        );
        for (i, p) in p.iter().enumerate() {
            assert_eq!(p.psn, Psn::new(100 + i as u32));
            assert_eq!(p.offset, i as u32 * MTU);
            assert_eq!(p.len, if i == 5 { 10 } else { MTU });
            assert_eq!(p.dma_len, if i == 0 { 5 * MTU + 10 } else { 0 });
            assert_eq!(p.ack_req, i == 3 || i == 5, "packet {i}");
            assert_eq!(p.id, 7);
            assert!(!p.retransmit);
        }
        assert_eq!(r.next_psn(), Psn::new(106));
        assert!(r.next_deadline().is_some());
        assert_eq!(r.on_response(&ack(Psn::new(105)), 1), Outcome::Handled);
        assert_eq!(completions(&mut r), [(7, Status::Success)]);
        assert_eq!(r.next_deadline(), None);
    }

    #[test]
    fn coalesced_ack_completes_in_order() {
        let mut r = req(0);
        for i in 0..4 {
            r.post(msg(i, MsgKind::Send, 10)).unwrap();
        }
        assert_eq!(drain(&mut r, 0).len(), 4);
        assert_eq!(r.on_response(&ack(Psn::new(2)), 1), Outcome::Handled);
        assert_eq!(
            completions(&mut r),
            [
                (0, Status::Success),
                (1, Status::Success),
                (2, Status::Success)
            ]
        );
        // A stale ACK changes nothing.
        assert_eq!(r.on_response(&ack(Psn::new(1)), 2), Outcome::Ignored);
        // An ACK beyond anything sent is ignored.
        assert_eq!(r.on_response(&ack(Psn::new(9)), 2), Outcome::Ignored);
        assert_eq!(r.on_response(&ack(Psn::new(3)), 3), Outcome::Handled);
        assert_eq!(completions(&mut r), [(3, Status::Success)]);
        assert!(r.is_empty());
    }

    /// Never go-back-0: a sequence NAK in the middle of a message resumes
    /// at the NAK's PSN with a MIDDLE opcode and the matching offset.
    #[test]
    fn sequence_nak_goes_back_to_the_nak_psn_mid_message() {
        let mut r = req(0xff_fffc);
        r.post(msg(1, MsgKind::Send, 8 * MTU)).unwrap();
        let first = drain(&mut r, 0);
        assert_eq!(first.len(), 8);
        // Packet 5 was lost; the responder NAKs when 6 arrives.
        let p5 = Psn::new(0xff_fffc).add(5);
        let seq = AckSyndrome::Nak(NakCode::PsnSequenceError);
        assert_eq!(r.on_response(&nak(p5, seq), 1), Outcome::Handled);
        let again = drain(&mut r, 1);
        assert_eq!(again.len(), 3);
        assert_eq!(again[0].psn, p5);
        assert_eq!(again[0].opcode, Opcode::RC_SEND_MIDDLE);
        assert_eq!(again[0].offset, 5 * MTU);
        assert!(again[0].retransmit);
        assert_eq!(again[2].opcode, Opcode::RC_SEND_LAST);
        // The same NAK again (duplicated) does not start another pass.
        assert_eq!(r.on_response(&nak(p5, seq), 2), Outcome::Handled);
        assert!(drain(&mut r, 2).is_empty());
        assert_eq!(r.on_response(&ack(p5.add(2)), 3), Outcome::Handled);
        assert_eq!(completions(&mut r), [(1, Status::Success)]);
    }

    /// A timeout goes back to the oldest unacknowledged PSN (mid-message
    /// after a partial ACK), and skips what a later ACK covers.
    #[test]
    fn timeout_resends_from_oldest_unacked_and_skips_acked() {
        let mut r = req(0);
        r.post(msg(1, MsgKind::Write, 6 * MTU)).unwrap();
        r.post(msg(2, MsgKind::Send, 1)).unwrap();
        assert_eq!(drain(&mut r, 0).len(), 7);
        r.on_response(&ack(Psn::new(3)), 10);
        let d = r.next_deadline().unwrap();
        assert_eq!(r.on_timeout(d - 1), TimerOutcome::Nothing);
        assert_eq!(r.on_timeout(d), TimerOutcome::Retransmit);
        let p = r.next_packet(d).unwrap();
        assert_eq!(
            (p.psn, p.opcode, p.offset),
            (Psn::new(4), Opcode::RC_RDMA_WRITE_MIDDLE, 4 * MTU)
        );
        // The ACK of PSN 5 arrives mid-pass: the cursor skips to 6.
        r.on_response(&ack(Psn::new(5)), d + 1);
        let p = r.next_packet(d + 1).unwrap();
        assert_eq!((p.psn, p.opcode), (Psn::new(6), Opcode::RC_SEND_ONLY));
        assert_eq!(r.next_packet(d + 1), None);
    }

    #[test]
    fn retries_exhaust_then_everything_flushes() {
        let mut r = req(10);
        for i in 0..3 {
            r.post(msg(i, MsgKind::Send, 1)).unwrap();
        }
        drain(&mut r, 0);
        r.on_response(&ack(Psn::new(10)), 1);
        for _ in 0..3 {
            let now = r.next_deadline().unwrap();
            assert_eq!(r.on_timeout(now), TimerOutcome::Retransmit);
            let p = drain(&mut r, now);
            assert_eq!(p[0].psn, Psn::new(11));
        }
        let now = r.next_deadline().unwrap();
        assert_eq!(r.on_timeout(now), TimerOutcome::Failed);
        assert!(r.is_error());
        assert_eq!(r.next_packet(now), None);
        r.post(msg(9, MsgKind::Send, 1)).unwrap();
        assert_eq!(
            completions(&mut r),
            [
                (0, Status::Success),
                (1, Status::RetryExceeded),
                (2, Status::Flushed),
                (9, Status::Flushed)
            ]
        );
    }

    #[test]
    fn progress_restores_the_retry_budget() {
        let mut r = req(0);
        for i in 0..6 {
            r.post(msg(i, MsgKind::Send, 1)).unwrap();
        }
        drain(&mut r, 0);
        for i in 0..6 {
            for _ in 0..3 {
                let d = r.next_deadline().unwrap();
                assert_eq!(r.on_timeout(d), TimerOutcome::Retransmit);
                drain(&mut r, d);
            }
            r.on_response(&ack(Psn::new(i)), r.next_deadline().unwrap() - 1);
        }
        assert_eq!(completions(&mut r).len(), 6);
    }

    #[test]
    fn rnr_nak_waits_then_resends_and_counts() {
        let mut r = req(50);
        r.post(msg(1, MsgKind::Write, 1)).unwrap();
        r.post(msg(2, MsgKind::Send, 2 * MTU)).unwrap();
        drain(&mut r, 0);
        let rnr = AckSyndrome::RnrNak { timer_code: 1 };
        // RNR NAK for the SEND at 51 also ACKs the WRITE at 50.
        assert_eq!(
            r.on_response(&nak(Psn::new(51), rnr), 100),
            Outcome::Handled
        );
        assert_eq!(completions(&mut r), [(1, Status::Success)]);
        assert_eq!(r.next_packet(100), None);
        assert_eq!(r.next_deadline(), Some(100 + 10_000));
        // A sequence NAK for the same PSN does not cut the wait short.
        let seq = AckSyndrome::Nak(NakCode::PsnSequenceError);
        r.on_response(&nak(Psn::new(51), seq), 200);
        assert_eq!(r.next_packet(200), None);
        assert_eq!(r.on_timeout(10_100), TimerOutcome::RnrResume);
        let p = drain(&mut r, 10_100);
        assert_eq!(p.len(), 2);
        assert_eq!(
            (p[0].psn, p[0].opcode),
            (Psn::new(51), Opcode::RC_SEND_FIRST)
        );
        // rnr_retry 2: the first RNR NAK used one retry, a second one uses
        // the other, the third fails the SEND.
        assert_eq!(
            r.on_response(&nak(Psn::new(51), rnr), 20_000),
            Outcome::Handled
        );
        assert!(!r.is_error());
        assert_eq!(r.on_timeout(30_000), TimerOutcome::RnrResume);
        assert_eq!(drain(&mut r, 30_000).len(), 2);
        r.on_response(&nak(Psn::new(51), rnr), 40_000);
        assert!(r.is_error());
        assert_eq!(completions(&mut r), [(2, Status::RnrRetryExceeded)]);
    }

    #[test]
    fn read_responses_place_in_order_and_lost_ones_are_re_requested_mid_read() {
        let mut r = req(0xff_fffe);
        let start = Psn::new(0xff_fffe);
        r.post(msg(1, MsgKind::Read, 4 * MTU - 6)).unwrap();
        r.post(msg(2, MsgKind::Send, 5)).unwrap();
        let p = drain(&mut r, 0);
        assert_eq!(p.len(), 2);
        assert_eq!(
            (p[0].opcode, p[0].len, p[0].dma_len),
            (Opcode::RC_RDMA_READ_REQUEST, 4 * MTU - 6, 4 * MTU - 6)
        );
        assert_eq!(p[1].psn, start.add(4), "the READ takes 4 PSNs");
        let r0 = read_resp(start, Opcode::RC_RDMA_READ_RESPONSE_FIRST, MTU);
        assert_eq!(
            r.on_response(&r0, 1),
            Outcome::ReadData {
                wqe: WqeRef(0),
                id: 1,
                offset: 0,
                len: MTU
            }
        );
        assert_eq!(r.on_response(&r0, 1), Outcome::Ignored, "duplicate");
        // Response 1 is lost; 2 arrives: implied NAK, re-request from 1.
        let r2 = read_resp(start.add(2), Opcode::RC_RDMA_READ_RESPONSE_MIDDLE, MTU);
        assert_eq!(r.on_response(&r2, 2), Outcome::Ignored);
        let again = drain(&mut r, 2);
        assert_eq!(again.len(), 2);
        assert_eq!(
            (
                again[0].psn,
                again[0].offset,
                again[0].len,
                again[0].dma_len
            ),
            (start.add(1), MTU, 3 * MTU - 6, 3 * MTU - 6)
        );
        assert_eq!(again[1].psn, start.add(4));
        // The replay: MIDDLE, MIDDLE, LAST (rxe's convention).
        for k in 1..4 {
            let (op, len) = if k == 3 {
                (Opcode::RC_RDMA_READ_RESPONSE_LAST, MTU - 6)
            } else {
                (Opcode::RC_RDMA_READ_RESPONSE_MIDDLE, MTU)
            };
            let o = r.on_response(&read_resp(start.add(k), op, len), 3);
            assert!(matches!(o, Outcome::ReadData { offset, .. } if offset == k * MTU));
        }
        assert_eq!(completions(&mut r), [(1, Status::Success)]);
        r.on_response(&ack(start.add(4)), 4);
        assert_eq!(completions(&mut r), [(2, Status::Success)]);
    }

    #[test]
    fn ack_past_a_read_implies_its_responses_were_lost() {
        let mut r = req(0);
        r.post(msg(1, MsgKind::Send, 3)).unwrap();
        r.post(msg(2, MsgKind::Read, 2 * MTU)).unwrap();
        r.post(msg(3, MsgKind::Write, 3 * MTU)).unwrap();
        assert_eq!(drain(&mut r, 0).len(), 5);
        // ACK for the WRITE's last PSN (5): the SEND is done, the READ
        // (1..=2) executed but unanswered.
        r.on_response(&ack(Psn::new(5)), 1);
        assert_eq!(completions(&mut r), [(1, Status::Success)]);
        let p = drain(&mut r, 1);
        assert_eq!(p.len(), 1, "only the READ is re-requested: {p:?}");
        assert_eq!(
            (p[0].psn, p[0].opcode),
            (Psn::new(1), Opcode::RC_RDMA_READ_REQUEST)
        );
        r.on_response(
            &read_resp(Psn::new(1), Opcode::RC_RDMA_READ_RESPONSE_FIRST, MTU),
            2,
        );
        r.on_response(
            &read_resp(Psn::new(2), Opcode::RC_RDMA_READ_RESPONSE_LAST, MTU),
            2,
        );
        assert_eq!(
            completions(&mut r),
            [(2, Status::Success), (3, Status::Success)]
        );
    }

    /// A READ longer than the window is requested in segments of at most
    /// the window, each a response message of its own; each new segment
    /// takes one of `max_rd_atomic`'s resources, freed when the segment's
    /// last packet arrives.
    #[test]
    fn a_large_read_is_requested_in_window_sized_segments() {
        // Window 16 (cfg), max_rd_atomic 2: a 40-packet READ is segments
        // of 16, 16 and 8 packets; two may be outstanding.
        let mut r = req(0);
        r.post(msg(1, MsgKind::Read, 40 * MTU - 10)).unwrap();
        let p = drain(&mut r, 0);
        assert_eq!(
            p.iter()
                .map(|p| (p.psn.value(), p.offset, p.len))
                .collect::<Vec<_>>(),
            [(0, 0, 16 * MTU)],
            "the window holds one 16-packet segment"
        );
        // The segment answered: its end is a message end (LAST).
        for k in 0..16 {
            let op = match k {
                0 => Opcode::RC_RDMA_READ_RESPONSE_FIRST,
                15 => Opcode::RC_RDMA_READ_RESPONSE_LAST,
                _ => Opcode::RC_RDMA_READ_RESPONSE_MIDDLE,
            };
            let o = r.on_response(&read_resp(Psn::new(k), op, MTU), 1);
            assert!(matches!(o, Outcome::ReadData { .. }), "packet {k}: {o:?}");
        }
        // 16 answered: the window is full again with the next segment,
        // then the last one (8 packets, 6 bytes short of full).
        let p = drain(&mut r, 2);
        assert_eq!(
            p.iter()
                .map(|p| (p.psn.value(), p.offset, p.len))
                .collect::<Vec<_>>(),
            [(16, 16 * MTU, 16 * MTU)]
        );
        for k in 16..32 {
            let op = match k {
                16 => Opcode::RC_RDMA_READ_RESPONSE_FIRST,
                31 => Opcode::RC_RDMA_READ_RESPONSE_LAST,
                _ => Opcode::RC_RDMA_READ_RESPONSE_MIDDLE,
            };
            r.on_response(&read_resp(Psn::new(k), op, MTU), 3);
        }
        let p = drain(&mut r, 4);
        assert_eq!(
            p.iter()
                .map(|p| (p.psn.value(), p.offset, p.len))
                .collect::<Vec<_>>(),
            [(32, 32 * MTU, 8 * MTU - 10)]
        );
        // A LAST in the middle of a segment is not the responder's answer.
        let bad = r.on_response(
            &read_resp(Psn::new(32), Opcode::RC_RDMA_READ_RESPONSE_ONLY, MTU),
            5,
        );
        assert_eq!(bad, Outcome::Ignored);
        for k in 32..40 {
            let (op, len) = match k {
                32 => (Opcode::RC_RDMA_READ_RESPONSE_FIRST, MTU),
                39 => (Opcode::RC_RDMA_READ_RESPONSE_LAST, MTU - 10),
                _ => (Opcode::RC_RDMA_READ_RESPONSE_MIDDLE, MTU),
            };
            r.on_response(&read_resp(Psn::new(k), op, len), 6);
        }
        assert_eq!(completions(&mut r), [(1, Status::Success)]);
        // Every resource was given back: two single-packet READs go out
        // together (max_rd_atomic 2), a third waits.
        for id in 2..5 {
            r.post(msg(id, MsgKind::Read, 8)).unwrap();
        }
        assert_eq!(drain(&mut r, 7).len(), 2);
    }

    #[test]
    fn read_response_implicitly_acks_earlier_sends() {
        let mut r = req(0);
        r.post(msg(1, MsgKind::Send, 3)).unwrap();
        r.post(msg(2, MsgKind::Send, 3)).unwrap();
        r.post(msg(3, MsgKind::Read, 8)).unwrap();
        drain(&mut r, 0);
        let o = r.on_response(
            &read_resp(Psn::new(2), Opcode::RC_RDMA_READ_RESPONSE_ONLY, 8),
            1,
        );
        assert!(matches!(o, Outcome::ReadData { id: 3, .. }));
        assert_eq!(completions(&mut r).len(), 3);
    }

    #[test]
    fn atomics_and_the_rd_atomic_limit() {
        let mut r = req(0);
        r.post(msg(1, MsgKind::FetchAdd, 8)).unwrap();
        r.post(msg(2, MsgKind::CmpSwap, 8)).unwrap();
        r.post(msg(3, MsgKind::Read, 1)).unwrap();
        let p = drain(&mut r, 0);
        assert_eq!(p.len(), 2, "max_rd_atomic is 2");
        assert_eq!(p[0].opcode, Opcode::RC_FETCH_ADD);
        let aack = Incoming {
            opcode: Opcode::RC_ATOMIC_ACKNOWLEDGE,
            ..ack(Psn::new(0))
        };
        assert_eq!(
            r.on_response(&aack, 1),
            Outcome::AtomicResult {
                wqe: WqeRef(0),
                id: 1
            }
        );
        assert_eq!(r.on_response(&aack, 1), Outcome::Ignored);
        let p = drain(&mut r, 1);
        assert_eq!((p.len(), p[0].opcode), (1, Opcode::RC_RDMA_READ_REQUEST));
        assert_eq!(completions(&mut r), [(1, Status::Success)]);
    }

    /// ATOMIC WRITE (one packet with its 8 bytes and a RETH for them)
    /// and FLUSH (one packet whatever the range, a RETH naming it and
    /// nothing carried): held for their answer like a READ (a plain ACK
    /// past them does not complete them), completed by a READ response
    /// without data.
    #[test]
    fn atomic_write_and_flush_are_answered_by_an_empty_read_response() {
        for (kind, len, opcode, carried) in [
            (MsgKind::AtomicWrite, 8, Opcode::RC_ATOMIC_WRITE, 8),
            (MsgKind::Flush, 40 * MTU, Opcode::RC_FLUSH, 0),
        ] {
            let mut r = req(0);
            r.post(msg(1, kind, len)).unwrap();
            r.post(msg(2, MsgKind::Send, 4)).unwrap();
            let p = drain(&mut r, 0);
            assert_eq!(p.len(), 2, "{kind:?}");
            assert_eq!(p[0].opcode, opcode);
            assert_eq!((p[0].offset, p[0].len, p[0].dma_len), (0, carried, len));
            assert!(p[0].ack_req);
            assert_eq!(p[1].psn, Psn::new(1));
            r.on_response(&ack(Psn::new(1)), 1);
            assert_eq!(completions(&mut r), []);
            let data = |len| Incoming {
                opcode: Opcode::RC_RDMA_READ_RESPONSE_ONLY,
                payload_len: len,
                ..ack(Psn::new(0))
            };
            assert_eq!(r.on_response(&data(8), 1), Outcome::Ignored);
            assert_eq!(r.on_response(&data(0), 1), Outcome::Handled);
            assert_eq!(
                completions(&mut r),
                [(1, Status::Success), (2, Status::Success)]
            );
        }
    }

    #[test]
    fn window_limits_psns_in_flight() {
        let mut r = req(0);
        r.post(msg(1, MsgKind::Write, 40 * MTU)).unwrap();
        let p = drain(&mut r, 0);
        assert_eq!(p.len(), 16);
        assert!(
            p[15].ack_req,
            "the packet filling the window asks for an ACK"
        );
        r.on_response(&ack(Psn::new(9)), 1);
        assert_eq!(drain(&mut r, 1).len(), 10);
    }

    /// A window-limited stream asks for about two ACKs a window, however
    /// often the responder answers on its own: an ACK that opens a few
    /// PSNs does not make the packet filling them ask for another.
    /// Packets cross a wire in order; the responder answers each packet
    /// that asks and, unasked, every 5th.
    #[test]
    fn a_window_limited_stream_asks_for_two_acks_a_window() {
        let c = Config {
            ack_every: 64,
            ..cfg()
        };
        let mut r = Requester::new(&c, Psn::new(0), [Slot::EMPTY; 8]);
        const N: u32 = 400;
        r.post(msg(1, MsgKind::Write, N * MTU)).unwrap();
        let mut wire = std::collections::VecDeque::new();
        let (mut asked, mut acks, mut now) = (0u32, 0u32, 0u64);
        loop {
            wire.extend(drain(&mut r, now));
            let Some(p) = wire.pop_front() else { break };
            now += 1;
            asked += u32::from(p.ack_req);
            if p.ack_req || p.psn.value() % 5 == 4 {
                acks += 1;
                r.on_response(&ack(p.psn), now);
            }
        }
        let done = r.next_completion().map(|c| (c.id, c.status));
        assert_eq!(done, Some((1, Status::Success)), "the message completes");
        // Window 16: AckReq every 8 packets, the last packet too.
        assert!(asked <= N / 8 + 1, "{asked} packets asked for an ACK");
        assert!(acks <= N / 8 + N / 5 + 1, "{acks} ACKs");
    }

    /// After a retransmit timeout the requester resends RESTART_WINDOW
    /// packets (the last asking for an ACK), not the whole window; the
    /// window grows back by one per PSN answered up to half the window
    /// that was lost, then by one per window's worth.
    #[test]
    fn a_timeout_restarts_from_a_small_window_that_grows_back() {
        let mut r = req(0);
        r.post(msg(1, MsgKind::Write, 40 * MTU)).unwrap();
        assert_eq!(drain(&mut r, 0).len(), 16);
        let d = r.next_deadline().unwrap();
        assert_eq!(r.on_timeout(d), TimerOutcome::Retransmit);
        let p = drain(&mut r, d);
        assert_eq!(p.len(), RESTART_WINDOW as usize);
        assert!(p.iter().all(|p| p.retransmit));
        assert!(
            p[1].ack_req,
            "the packet filling the window asks for an ACK"
        );
        // Both answered: the window is 4, two of its PSNs already sent.
        r.on_response(&ack(Psn::new(1)), d + 1);
        let p = drain(&mut r, d + 1);
        assert_eq!(
            p.iter().map(|p| p.psn.value()).collect::<Vec<_>>(),
            [2, 3, 4, 5]
        );
        // 14 more answered: 4 of them take the window to the threshold
        // (8, half of the 16 lost), the other 10 to 9 (one window's
        // worth, 8, grows it by one).
        r.on_response(&ack(Psn::new(15)), d + 2);
        let p = drain(&mut r, d + 2);
        assert_eq!(p.first().map(|p| p.psn.value()), Some(16));
        assert_eq!(p.len(), 9);
    }

    /// A path slower than the QP's timeout (a queue of many senders): the
    /// first timeouts go back N and back off, a packet is then timed whole,
    /// and the timeout becomes the measured round trip's, so the timeouts
    /// stop. (With the QP's timeout alone every round timed out and went
    /// back N until the retries ran out.)
    #[test]
    fn a_path_slower_than_the_timeout_gets_a_longer_one() {
        // The QP's timeout: 4.096 us * 2^10, 4.2 ms; the path: 10 ms.
        const SLOW: u64 = 10_000_000;
        const STEP: u64 = 100_000;
        let mut r = req(0);
        r.post(msg(1, MsgKind::Write, 4000 * MTU)).unwrap();
        // Each packet that asks is answered SLOW after it left, the ACK
        // acknowledging it and everything before it (a FIFO path, no
        // loss: a resent copy is answered again).
        let mut path: std::collections::VecDeque<(u64, Psn)> = Default::default();
        let (mut early, mut late) = (0, 0);
        let mut now = 0;
        for step in 0..4_000u64 {
            now += STEP;
            while path.front().is_some_and(|&(at, _)| at <= now) {
                let (_, psn) = path.pop_front().unwrap();
                r.on_response(&ack(psn), now);
            }
            if r.next_deadline().is_some_and(|d| d <= now)
                && r.on_timeout(now) == TimerOutcome::Retransmit
            {
                if step < 2_000 {
                    early += 1;
                } else {
                    late += 1;
                }
            }
            for p in drain(&mut r, now) {
                if p.ack_req {
                    path.push_back((now + SLOW, p.psn));
                }
            }
        }
        assert!(!r.is_error(), "{:?}", completions(&mut r));
        let srtt = r.rtt.srtt().expect("a round trip measured");
        assert!(srtt > SLOW * 3 / 4, "srtt {srtt} ns after {early} timeouts");
        assert!(early > 0, "the QP's timeout was shorter than the path");
        assert_eq!(late, 0, "timeouts once the round trip was measured");
        assert!(r.oldest_unacked().value() > 400, "{:?}", r.oldest_unacked());
    }

    /// A sequence NAK halves the window for the go-back-N pass, which
    /// resends half as many packets as were in flight; the window then
    /// grows back to where it was by one per PSN answered (not by one per
    /// window's worth, as after a timeout's threshold).
    #[test]
    fn a_sequence_nak_halves_the_window_and_it_grows_back_by_the_law() {
        let mut r = req(0);
        r.post(msg(1, MsgKind::Write, 200 * MTU)).unwrap();
        assert_eq!(drain(&mut r, 0).len(), 16);
        let seq = AckSyndrome::Nak(NakCode::PsnSequenceError);
        r.on_response(&nak(Psn::new(4), seq), 1);
        let p = drain(&mut r, 1);
        assert_eq!(
            p.iter().map(|p| p.psn.value()).collect::<Vec<_>>(),
            [4, 5, 6, 7, 8, 9, 10, 11]
        );
        assert!(p.iter().all(|p| p.retransmit));
        // A second NAK for the same point is the same loss: no new cut.
        r.on_response(&nak(Psn::new(4), seq), 2);
        assert!(drain(&mut r, 2).is_empty());
        // A fresh flow's congestion estimate is 1 (congestion::Window):
        // its first loss sets the threshold at the halved window, and the
        // window then grows by one per window's worth answered: 8 in
        // flight, 9 once 8 are answered, 10 after 9 more, never 16.
        let mut high = 12;
        let mut in_flight = Vec::new();
        for t in 4..40 {
            r.on_response(&ack(Psn::new(t)), u64::from(t));
            for p in drain(&mut r, u64::from(t)) {
                high = high.max(p.psn.value() + 1);
            }
            in_flight.push(high - (t + 1));
        }
        assert_eq!(&in_flight[..10], [8, 8, 8, 8, 8, 8, 8, 9, 9, 9]);
        assert!(in_flight.iter().all(|&n| n <= 12), "{in_flight:?}");
        assert!(*in_flight.last().unwrap() >= 11, "{in_flight:?}");
        // A timeout still restarts from RESTART_WINDOW.
        let d = r.next_deadline().unwrap();
        assert_eq!(r.on_timeout(d), TimerOutcome::Retransmit);
        assert_eq!(drain(&mut r, d).len(), RESTART_WINDOW as usize);
    }

    #[test]
    fn fatal_nak_fails_that_message_and_flushes_the_rest() {
        let mut r = req(0);
        r.post(msg(1, MsgKind::Send, 1)).unwrap();
        r.post(msg(2, MsgKind::Write, 2 * MTU)).unwrap();
        r.post(msg(3, MsgKind::Send, 1)).unwrap();
        drain(&mut r, 0);
        let bad = AckSyndrome::Nak(NakCode::RemoteAccessError);
        r.on_response(&nak(Psn::new(1), bad), 1);
        assert!(r.is_error());
        assert_eq!(
            completions(&mut r),
            [
                (1, Status::Success),
                (2, Status::RemoteAccess),
                (3, Status::Flushed)
            ]
        );
    }

    #[test]
    fn fatal_nak_after_an_unanswered_read_waits_for_the_read() {
        let mut r = req(0);
        r.post(msg(1, MsgKind::Read, 1)).unwrap();
        r.post(msg(2, MsgKind::Send, 1)).unwrap();
        drain(&mut r, 0);
        let bad = AckSyndrome::Nak(NakCode::InvalidRequest);
        r.on_response(&nak(Psn::new(1), bad), 1);
        assert!(!r.is_error());
        let p = drain(&mut r, 1);
        assert_eq!(p.len(), 1, "the READ again, not the failed SEND");
        r.on_response(
            &read_resp(Psn::new(0), Opcode::RC_RDMA_READ_RESPONSE_ONLY, 1),
            2,
        );
        assert!(r.is_error());
        assert_eq!(
            completions(&mut r),
            [(1, Status::Success), (2, Status::RemoteInvalidRequest)]
        );
    }

    #[test]
    fn flush_and_fail_wqe() {
        let mut r = req(0);
        r.post(msg(1, MsgKind::Send, 1)).unwrap();
        r.post(msg(2, MsgKind::Send, 1)).unwrap();
        drain(&mut r, 0);
        r.on_response(&ack(Psn::new(0)), 1);
        r.flush();
        assert_eq!(
            completions(&mut r),
            [(1, Status::Success), (2, Status::Flushed)]
        );
        assert_eq!(r.next_deadline(), None);

        let mut r = req(0);
        r.post(msg(1, MsgKind::Read, 4)).unwrap();
        r.post(msg(2, MsgKind::Send, 1)).unwrap();
        drain(&mut r, 0);
        let o = r.on_response(
            &read_resp(Psn::new(0), Opcode::RC_RDMA_READ_RESPONSE_ONLY, 4),
            1,
        );
        let Outcome::ReadData { wqe, .. } = o else {
            panic!("{o:?}")
        };
        r.fail_wqe(wqe, Status::LocalProtection).unwrap();
        assert_eq!(
            r.fail_wqe(WqeRef(5), Status::LocalProtection),
            Err(NotPosted)
        );
        r.on_response(&ack(Psn::new(1)), 2);
        assert_eq!(
            completions(&mut r),
            [(1, Status::LocalProtection), (2, Status::Flushed)]
        );
    }

    /// Issue 27: SEND 1's only packet is lost, then SEND 2 fails
    /// locally while being built. SEND 1 must not complete with success
    /// unanswered (nor ever, if never answered): it is retransmitted, and
    /// SEND 2's error follows its answer.
    #[test]
    fn a_local_failure_waits_for_the_answers_before_it() {
        let mut r = req(0);
        r.post(msg(1, MsgKind::Send, 1)).unwrap();
        let w2 = r.post(msg(2, MsgKind::Send, 1)).unwrap();
        r.post(msg(3, MsgKind::Send, 1)).unwrap();
        let p = r.next_packet(0).unwrap();
        assert_eq!(p.id, 1);
        let p = r.next_packet(0).unwrap();
        assert_eq!(p.id, 2);
        r.fail_wqe(p.wqe, Status::LocalProtection).unwrap();
        assert!(!r.is_error() && r.is_failing());
        assert_eq!(r.next_packet(0), None, "nothing from the failed one on");
        assert_eq!(completions(&mut r), [], "SEND 1 is not answered");
        // Its packet was lost: the timer resends it, and only it.
        let d = r.next_deadline().unwrap();
        assert_eq!(r.on_timeout(d), TimerOutcome::Retransmit);
        let again = drain(&mut r, d);
        assert_eq!(again.len(), 1);
        assert_eq!((again[0].id, again[0].retransmit), (1, true));
        r.on_response(&ack(Psn::new(0)), d + 1);
        assert!(r.is_error());
        assert_eq!(
            completions(&mut r),
            [
                (1, Status::Success),
                (2, Status::LocalProtection),
                (3, Status::Flushed)
            ]
        );
        let _ = w2;

        // Never answered: SEND 1 fails with the retry error, the local
        // failure after it is flushed.
        let mut r = req(0);
        r.post(msg(1, MsgKind::Send, 1)).unwrap();
        let w2 = r.post(msg(2, MsgKind::Send, 1)).unwrap();
        r.fail_wqe(w2, Status::LocalProtection).unwrap();
        let mut t = 0;
        while !r.is_error() {
            drain(&mut r, t);
            t = r.next_deadline().unwrap();
            r.on_timeout(t);
        }
        assert_eq!(
            completions(&mut r),
            [(1, Status::RetryExceeded), (2, Status::Flushed)]
        );

        // Nothing unanswered before it: the error is at once.
        let mut r = req(0);
        let w1 = r.post(msg(1, MsgKind::Send, 1)).unwrap();
        r.fail_wqe(w1, Status::LocalQpOperation).unwrap();
        assert!(r.is_error());
        assert_eq!(completions(&mut r), [(1, Status::LocalQpOperation)]);
    }

    /// IBV_SEND_FENCE: a fenced WRITE after a READ leaves only once the
    /// READ's data is in; an unfenced one does not wait.
    #[test]
    fn a_fenced_request_waits_for_earlier_reads_and_atomics() {
        for fence in [false, true] {
            let mut r = req(0);
            r.post(msg(1, MsgKind::Read, 2 * MTU)).unwrap();
            r.post(msg(2, MsgKind::FetchAdd, 8)).unwrap();
            r.post(Message {
                fence,
                ..msg(3, MsgKind::Write, 1)
            })
            .unwrap();
            let ids: Vec<u32> = drain(&mut r, 0).iter().map(|p| p.id).collect();
            if !fence {
                assert_eq!(ids, [1, 2, 3]);
                continue;
            }
            assert_eq!(ids, [1, 2], "the fenced WRITE waits");
            r.on_response(
                &read_resp(Psn::new(0), Opcode::RC_RDMA_READ_RESPONSE_FIRST, MTU),
                1,
            );
            r.on_response(
                &read_resp(Psn::new(1), Opcode::RC_RDMA_READ_RESPONSE_LAST, MTU),
                1,
            );
            assert_eq!(drain(&mut r, 1), [], "the atomic is not answered yet");
            let mut a = ack(Psn::new(2));
            a.opcode = Opcode::RC_ATOMIC_ACKNOWLEDGE;
            assert!(matches!(
                r.on_response(&a, 2),
                Outcome::AtomicResult { id: 2, .. }
            ));
            let ids: Vec<u32> = drain(&mut r, 2).iter().map(|p| p.id).collect();
            assert_eq!(ids, [3]);
        }
    }

    #[test]
    fn post_limits() {
        let mut r = req(0);
        for i in 0..8 {
            r.post(msg(i, MsgKind::Send, 0)).unwrap();
        }
        assert_eq!(r.post(msg(8, MsgKind::Send, 0)), Err(PostError::Full));
        let mut r = req(0);
        assert_eq!(
            r.post(msg(1, MsgKind::Send, MAX_MSG_LEN + 1)),
            Err(PostError::TooLong)
        );
        assert_eq!(
            r.post(msg(1, MsgKind::Read, MAX_MSG_LEN)),
            Err(PostError::TooLong),
            "2^23 packets at MTU 256"
        );
        let c = Config {
            max_rd_atomic: 0,
            ..cfg()
        };
        let mut r = Requester::new(&c, Psn::new(0), [Slot::EMPTY; 2]);
        assert_eq!(
            r.post(msg(1, MsgKind::FetchAdd, 8)),
            Err(PostError::NoRdAtomic)
        );
        let mut r = Requester::new(&cfg(), Psn::new(0), [Slot::EMPTY; 0]);
        assert_eq!(r.post(msg(1, MsgKind::Send, 0)), Err(PostError::Full));
        assert_eq!(r.next_packet(0), None);
    }

    #[test]
    fn zero_length_messages_are_one_packet() {
        let mut r = req(0);
        r.post(msg(1, MsgKind::Send, 0)).unwrap();
        r.post(msg(2, MsgKind::Write, 0)).unwrap();
        r.post(msg(3, MsgKind::Read, 0)).unwrap();
        let p = drain(&mut r, 0);
        let v: Vec<_> = p.iter().map(|p| (p.opcode, p.len)).collect();
        assert_eq!(
            v,
            [
                (Opcode::RC_SEND_ONLY, 0),
                (Opcode::RC_RDMA_WRITE_ONLY, 0),
                (Opcode::RC_RDMA_READ_REQUEST, 0)
            ]
        );
        r.on_response(
            &read_resp(Psn::new(2), Opcode::RC_RDMA_READ_RESPONSE_ONLY, 0),
            1,
        );
        assert_eq!(completions(&mut r).len(), 3);
    }

    #[test]
    fn ring_counters_wrap() {
        let mut r = req(0);
        let mut psn = Psn::new(0);
        for i in 0..1000u32 {
            r.post(msg(i, MsgKind::Send, 1)).unwrap();
            let p = r.next_packet(u64::from(i)).unwrap();
            assert_eq!(p.psn, psn);
            r.on_response(&ack(psn), u64::from(i));
            psn = psn.next();
            assert_eq!(completions(&mut r), [(i, Status::Success)]);
        }
    }
}
