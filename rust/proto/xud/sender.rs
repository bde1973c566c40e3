// SPDX-License-Identifier: GPL-2.0

//! The sending half of an XUD peer: one [`SendStream`] per destination
//! (GID, QPN) the QP sends to.
//!
//! A stream holds up to [`MAX_MSGS`] messages, numbered in posting order,
//! each sending its packets on consecutive PSNs as the window allows.
//! Answers come as an ACK or NAK with the receiver's base and a `sack`
//! bitmap ([`SendStream::on_answer`]); PSNs they show placed are never
//! sent again. A hole is resent once PSNs [`REORDER`] past it are
//! acknowledged and a reorder delay has passed, and again the same way
//! when packets sent after that resend pass it by [`REORDER`] (the resend
//! was lost too). On a retransmit timeout the stream sends one probe,
//! its oldest unacknowledged PSN with AckReq, until an answer shows what
//! else is missing. A message completes when every one
//! of its PSNs is acknowledged, or fails, when its PSNs are given up: they
//! leave the window as acknowledged ones do, and `oldest_psn` and
//! `msg_lag` in the next packet tell the receiver to stop waiting for
//! them (rule 4).
//!
//! Every data packet echoes the stream's cookie (xud.rst, "Stream
//! cookies"): a receiver with no window for the stream answers a packet
//! without a fresh one with a challenge ([`SendStream::on_challenge`]),
//! whose cookie the stream keeps (the newest it was given) and resends
//! what it had in flight with. Until it holds one, a stream has one packet
//! out.

use super::super::congestion::{Loss, Window};
use super::super::psn::Psn;
use super::super::rc::{local_ack_timeout_ns, rnr_timeout_ns, RNR_RETRY_INFINITE};
use super::super::rtt::Rtt;
use super::super::window::{AckResult, SendWindow};
use super::super::wire::{xack, xeth};
use super::cookie::Cookie;
use super::{
    seq_before, SendStatus, INITIAL_WINDOW, LOSS_TOLERANCE, MAX_MSGS, MIN_WINDOW, PIPE, REORDER,
    REORDER_DEEP, REORDER_DELAY_MIN_NS, RETRY_SPAN_NS, SENDER_IDLE_NS, STALL_TIMEOUTS,
    UNANSWERED_MSGS, UNPROVEN_HOLD_NS, WINDOW_WORDS,
};

/// The longest a stream with packets in flight goes without sending,
/// however its timeout backed off, unless the QP's own timeout is longer
/// (what the application asked for stands): half the time a receiver
/// holds the receives of a source that has not yet completed a message
/// ([`UNPROVEN_HOLD_NS`]). Longer, a live sender's first message could
/// lose its receive and fail `REM_INV_REQ_ERR` for being slow (one of 32
/// incast senders did, its timeout backed off to seconds).
pub const MAX_SILENCE_NS: u64 = UNPROVEN_HOLD_NS / 2;

/// The QP attributes a sender uses.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Config {
    /// Local ACK timeout code (`timeout`, 4.096 us * 2^code; 0: only
    /// [`RETRY_SPAN_NS`] bounds the wait).
    pub timeout: u8,
    /// Retransmit timeouts without progress before
    /// [`SendStatus::RetryExceeded`].
    pub retry_cnt: u8,
    /// RNR NAKs for one message before [`SendStatus::RnrRetryExceeded`];
    /// [`RNR_RETRY_INFINITE`] (7) counts none, as for RC, and
    /// [`RETRY_SPAN_NS`] alone bounds the waits (the reclaim argument
    /// needs a bound: xud.rst, "Reclaim and limits").
    pub rnr_retry: u8,
    /// AckReq at least every this many packets (0 counts as 1).
    pub ack_every: u32,
    /// Whether the stream follows the congestion law
    /// (`congestion::Window`: CNPs and losses shrink its window); if
    /// not, its window stays [`PIPE`] (rxud's `cc` module parameter off,
    /// for comparisons).
    pub congestion: bool,
    /// The window a new stream starts at, under the law
    /// ([`INITIAL_WINDOW`]; without it, the pipe).
    pub initial_window: u32,
}

impl Config {
    /// rxe's RC defaults (timeout 14: 67 ms, 7 retries, 7 RNR retries)
    /// and an ACK every 16 packets.
    pub const DEFAULT: Config = Config {
        timeout: 14,
        retry_cnt: 7,
        rnr_retry: RNR_RETRY_INFINITE,
        ack_every: 16,
        congestion: true,
        initial_window: INITIAL_WINDOW,
    };

    fn rto_ns(&self) -> u64 {
        match local_ack_timeout_ns(self.timeout) {
            Some(ns) => ns,
            None => RETRY_SPAN_NS,
        }
    }
}

/// A message to send: the driver's handle of its work request, its
/// length and the path MTU (payload bytes per packet).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Message {
    pub wqe: u32,
    pub len: u32,
    pub mtu: u32,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum MsgState {
    Free,
    /// Posted; packets to send or in flight.
    Active,
    /// Finished; its completion not yet handed out.
    Done(SendStatus),
}

/// A message being sent: one entry of its QP's [`MsgTable`], at its
/// work request's handle.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SendMsg {
    msg: Message,
    seq: u32,
    packets: u32,
    /// Packets sent at least once (their PSNs are `first_psn..+sent`).
    sent: u32,
    acked: u32,
    first_psn: Psn,
    /// When its first packet first went out (the retry span starts).
    first_tx: u64,
    rnr_left: u8,
    state: MsgState,
}

/// The messages a QP's streams are sending, indexed by their work
/// requests' handles ([`Message::wqe`]): one table per QP, as many entries
/// as work requests it can hold, so that a stream keeps [`MAX_MSGS`]
/// handles rather than [`MAX_MSGS`] messages (xud.rst, "Memory"). The
/// stream that posted a message owns its entry until it hands out its
/// completion.
pub type MsgTable = [SendMsg];

/// A stream's message slot that holds none.
const NO_MSG: u32 = u32::MAX;

impl SendMsg {
    /// An entry no stream holds.
    pub const FREE: SendMsg = SendMsg {
        msg: Message {
            wqe: 0,
            len: 0,
            mtu: 0,
        },
        seq: 0,
        packets: 0,
        sent: 0,
        acked: 0,
        first_psn: Psn::new(0),
        first_tx: 0,
        rnr_left: 0,
        state: MsgState::Free,
    };

    /// Whether `psn` is one of its sent packets; its index if so.
    fn index_of(&self, psn: Psn) -> Option<u32> {
        let d = psn.diff(self.first_psn);
        (self.state == MsgState::Active && d >= 0 && (d as u32) < self.sent).then_some(d as u32)
    }

    /// Offset and length of packet `k`.
    fn chunk(&self, k: u32) -> (u32, u32) {
        let mtu = self.msg.mtu.max(1);
        let offset = k.saturating_mul(mtu);
        (offset, self.msg.len.saturating_sub(offset).min(mtu))
    }
}

/// A packet the driver is to build and send.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TxPacket {
    pub psn: Psn,
    /// The work request of its message.
    pub wqe: u32,
    pub xeth: xeth::Repr,
    /// Payload offset in the message and length.
    pub offset: u32,
    pub len: u32,
    /// The message length (RETH `dma_len`).
    pub msg_len: u32,
    pub ack_req: bool,
    /// Sent before (for counters).
    pub retransmit: bool,
    /// The stream's cookie, for its XCK.
    pub cookie: Cookie,
}

/// An ACK or NAK for this stream, decoded by the driver.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Answer {
    /// XACK `stream`: the answer is dropped unless it is this stream's.
    pub stream: u64,
    /// XACK `inc`: the answering QP's incarnation.
    pub inc: u32,
    /// BTH PSN: the receiver's base.
    pub base: Psn,
    pub sack: u128,
    /// A NAK: why, and the PSN it is about (AETH MSN).
    pub nak: Option<(Nak, Psn)>,
}

/// The NAKs XUD senders act on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Nak {
    /// RNR, with the AETH timer code.
    ReceiverNotReady(u8),
    RemoteAccess,
    InvalidRequest,
    /// The packet reached a QP of another incarnation (rule 1).
    StaleIncarnation,
}

/// What an answer did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AnswerOutcome {
    /// Not this stream's, or a base nobody sent: ignored, count it.
    Ignored,
    /// Taken; completions may be ready ([`SendStream::next_completion`])
    /// and packets to send.
    Taken,
}

/// What a timer expiry did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TimerOutcome {
    /// Not due.
    Idle,
    /// Packets are ready to send again: an RNR wait is over, or holes
    /// waited out the reorder delay.
    Resend,
    /// The retransmit timer expired: the probe is ready to send.
    Probe,
    /// The destination did not answer within the budget: every message
    /// that had sent a packet failed [`SendStatus::RetryExceeded`]; the
    /// driver fails the work requests it still queues for it too.
    DestinationFailed,
}

/// A set of offsets `0..WINDOW` (PSNs to resend, from a base that moves
/// only forward).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct RtxSet([u64; WINDOW_WORDS]);

impl RtxSet {
    const EMPTY: RtxSet = RtxSet([0; WINDOW_WORDS]);

    /// Adds `i`; nothing if it is beyond the window.
    fn insert(&mut self, i: u32) {
        if let Some(w) = self.0.get_mut((i / 64) as usize) {
            *w |= 1 << (i % 64);
        }
    }

    fn is_empty(&self) -> bool {
        self.0.iter().all(|&w| w == 0)
    }

    /// Takes out and returns the smallest offset.
    fn take_first(&mut self) -> Option<u32> {
        let (k, w) = self.0.iter_mut().enumerate().find(|(_, w)| **w != 0)?;
        let b = w.trailing_zeros();
        *w &= !(1 << b);
        Some(k as u32 * 64 + b)
    }

    /// The base moved forward by `d`: offset `i + d` becomes `i`, those
    /// below `d` go.
    fn shift_down(&mut self, d: u32) {
        let (words, bits) = ((d / 64) as usize, d % 64);
        let old = self.0;
        for (k, w) in self.0.iter_mut().enumerate() {
            let lo = old.get(k + words).copied().unwrap_or(0);
            let hi = old.get(k + words + 1).copied().unwrap_or(0);
            *w = if bits == 0 {
                lo
            } else {
                lo >> bits | hi << (64 - bits)
            };
        }
    }
}

/// One destination's stream at the sender.
#[derive(Clone, Debug)]
pub struct SendStream {
    stream: u64,
    peer_inc: u32,
    /// The newest cookie a challenge gave ([`Cookie::NONE`]: none yet).
    cookie: Cookie,
    cfg: Config,
    window: SendWindow<WINDOW_WORDS>,
    /// Next message number to give.
    next_msg: u32,
    /// The message sending its first transmissions.
    tx_msg: u32,
    /// The handles of the messages it holds, message `seq` at
    /// `seq % MAX_MSGS` ([`NO_MSG`]: none).
    slots: [u32; MAX_MSGS as usize],
    /// PSNs to resend: `rtx_base + i` for each `i` in the set.
    rtx: RtxSet,
    rtx_base: Psn,
    /// Holes before it were resent already by the reorder rule.
    recovered: Psn,
    /// The first new PSN sent after those resends: once PSNs [`REORDER`]
    /// past it are acknowledged, a hole before `recovered` is a resend
    /// that was lost too, and the rule may resend it again.
    recovery_end: Psn,
    /// Holes before this PSN were seen at this time; resent if they are
    /// still holes a reorder delay later.
    reorder_mark: Option<(Psn, u64)>,
    /// Retransmit deadline while anything is in flight.
    deadline: Option<u64>,
    /// When the oldest unacknowledged PSN goes again if no answer has
    /// acknowledged anything by then: armed with `deadline`, a fraction
    /// of it, once per stretch without progress.
    tail_probe: Option<u64>,
    /// Consecutive timeouts without progress.
    retries: u8,
    /// After a timeout: only the probe goes until an answer comes.
    probing: bool,
    /// [`STALL_TIMEOUTS`] retransmit timeouts in a row since the
    /// destination last answered (or it failed `RETRY_EXC_ERR` since): it
    /// may hold only [`super::STALLED_SHARE`] of its QP's send WQEs until
    /// it answers.
    stalled: bool,
    /// An RNR NAK asked to wait until then.
    rnr_until: Option<u64>,
    /// Packets since the last AckReq.
    since_req: u32,
    last_active: u64,
    /// The congestion window, at most [`PIPE`] packets outstanding.
    cc: Window,
    /// The round trip, measured from a first transmission that asked for
    /// an ACK to the answer that acknowledges it. The delays of the
    /// reorder rule and the tail probe scale with it, the timeout does
    /// beyond the QP's, and timeouts and tail probes back both off until
    /// the next sample (`rtt`'s module doc).
    rtt: Rtt,
    /// The packet being timed and when it left: one at a time, dropped
    /// if it is resent (Karn: the answer could be either copy's).
    timing: Option<(Psn, u64)>,
}

impl SendStream {
    /// A new stream (first post to a destination, after reclaim, or after
    /// a stale-incarnation NAK ended the previous one): `stream` random
    /// and non-zero, `first` a random PSN.
    pub fn new(stream: u64, first: Psn, cfg: Config, now: u64) -> Self {
        Self {
            stream,
            peer_inc: 0,
            cookie: Cookie::NONE,
            cfg,
            window: SendWindow::new(first),
            next_msg: 0,
            tx_msg: 0,
            slots: [NO_MSG; MAX_MSGS as usize],
            rtx: RtxSet::EMPTY,
            rtx_base: first,
            recovered: first,
            recovery_end: first,
            reorder_mark: None,
            deadline: None,
            tail_probe: None,
            retries: 0,
            probing: false,
            stalled: false,
            rnr_until: None,
            since_req: 0,
            last_active: now,
            // Without the law nothing grows a window: it is the pipe.
            cc: Window::new(MIN_WINDOW, PIPE)
                .with_initial(if cfg.congestion {
                    cfg.initial_window
                } else {
                    PIPE
                })
                .with_loss_tolerance(LOSS_TOLERANCE),
            rtt: Rtt::NEW,
            timing: None,
        }
    }

    /// The congestion window, for counters and resource dumps.
    pub fn congestion(&self) -> &Window {
        &self.cc
    }

    /// A CNP from this stream's destination came: its packets met a
    /// congested queue. Returns whether it cut the window (the first of a
    /// round does; none with the law off).
    pub fn congestion_notified(&mut self) -> bool {
        self.cfg.congestion && self.cc.on_cnp()
    }

    /// Packets were found lost (the law cuts the window at most once a
    /// round, and not for losses within its tolerance).
    fn lost(&mut self, loss: Loss) {
        if self.cfg.congestion {
            self.cc.on_loss(loss);
        }
    }

    pub fn stream(&self) -> u64 {
        self.stream
    }

    /// The receiving QP's incarnation as last heard (0: not yet).
    pub fn peer_inc(&self) -> u32 {
        self.peer_inc
    }

    /// The cookie its packets echo.
    pub fn cookie(&self) -> Cookie {
        self.cookie
    }

    /// Message slot `m`'s entry in the QP's table, if the slot holds one.
    fn msg<'t>(&self, t: &'t MsgTable, m: usize) -> Option<&'t SendMsg> {
        t.get(*self.slots.get(m)? as usize)
    }

    fn msg_mut<'t>(&self, t: &'t mut MsgTable, m: usize) -> Option<&'t mut SendMsg> {
        t.get_mut(*self.slots.get(m)? as usize)
    }

    /// The slots holding a message that is still being sent.
    fn active<'t>(&'t self, t: &'t MsgTable) -> impl Iterator<Item = (usize, &'t SendMsg)> + 't {
        (0..MAX_MSGS as usize)
            .filter_map(move |m| self.msg(t, m).map(|x| (m, x)))
            .filter(|(_, x)| x.state == MsgState::Active)
    }

    /// Messages posted and not yet completed (handed out).
    pub fn in_use(&self) -> u32 {
        self.slots.iter().filter(|&&h| h != NO_MSG).count() as u32
    }

    /// Packets in flight (sent, neither acknowledged nor given up).
    pub fn in_flight(&self) -> u32 {
        self.window.in_flight()
    }

    /// What this stream counts against its QP's cap on packets in flight
    /// ([`super::MAX_QP_IN_FLIGHT`]): its packets in flight, but only the
    /// probe while one is out (after a timeout the others are taken for
    /// lost until an answer comes), so that dead destinations hold one
    /// packet each of the QP's cap.
    pub fn in_network(&self) -> u32 {
        if self.probing {
            self.in_flight().min(1)
        } else {
            self.in_flight()
        }
    }

    /// Whether a message has packets not sent yet (new packets, which
    /// [`Self::next_packet_if`] holds back when told to).
    pub fn has_new(&self, t: &MsgTable) -> bool {
        self.active(t).any(|(_, m)| m.sent < m.packets)
    }

    /// Whether another message can start now (at most [`MAX_MSGS`] in
    /// flight, numbered within `msg_lag`'s range; [`UNANSWERED_MSGS`]
    /// until the destination has answered the stream once).
    pub fn can_post(&self) -> bool {
        let oldest = self.oldest_in_use();
        let most = if self.peer_inc == 0 {
            UNANSWERED_MSGS
        } else {
            MAX_MSGS
        };
        self.next_msg.wrapping_sub(oldest) < most
    }

    /// Whether the destination is stalled: [`STALL_TIMEOUTS`] retransmit
    /// timeouts in a row since it last answered. The driver lets it hold only
    /// [`super::STALLED_SHARE`] send WQEs then (xud.rst, "Send resources").
    pub fn is_stalled(&self) -> bool {
        self.stalled
    }

    /// Starts `msg` in its entry of `t`, returning its number; `None` if
    /// [`Self::can_post`] says no (the driver keeps it queued) or `t` has
    /// no entry at its handle.
    pub fn post(&mut self, t: &mut MsgTable, msg: Message, now: u64) -> Option<u32> {
        if !self.can_post() {
            return None;
        }
        let entry = t.get_mut(msg.wqe as usize)?;
        let seq = self.next_msg;
        let packets = if msg.len == 0 || msg.mtu == 0 {
            1
        } else {
            (msg.len - 1) / msg.mtu + 1
        };
        *entry = SendMsg {
            msg,
            seq,
            packets,
            sent: 0,
            acked: 0,
            first_psn: Psn::new(0),
            first_tx: 0,
            rnr_left: self.cfg.rnr_retry,
            state: MsgState::Active,
        };
        self.slots[(seq % MAX_MSGS) as usize] = msg.wqe;
        self.next_msg = seq.wrapping_add(1);
        self.last_active = now;
        Some(seq)
    }

    /// The next packet to send, if any: resends first, then new packets
    /// in message order while the window has room. `None` while an RNR
    /// wait runs or only a probe may be in flight.
    pub fn next_packet(&mut self, t: &mut MsgTable, now: u64) -> Option<TxPacket> {
        self.next_packet_if(t, now, true)
    }

    /// [`Self::next_packet`], but with `new_allowed` false only resends
    /// (and probes): the QP's cap on packets in flight is reached.
    pub fn next_packet_if(
        &mut self,
        t: &mut MsgTable,
        now: u64,
        new_allowed: bool,
    ) -> Option<TxPacket> {
        if self.rnr_until.is_some_and(|until| now < until) {
            return None;
        }
        self.rnr_until = None;
        if let Some(p) = self.next_resend(t, now) {
            return Some(p);
        }
        if self.probing || !new_allowed {
            return None;
        }
        self.next_new(t, now)
    }

    fn next_resend(&mut self, t: &MsgTable, now: u64) -> Option<TxPacket> {
        self.rebase_rtx();
        while let Some(i) = self.rtx.take_first() {
            let psn = self.rtx_base.add(i);
            if self.window.is_acked(psn) {
                continue;
            }
            let Some((m, k)) = self.find(t, psn) else {
                continue;
            };
            let last = self.rtx.is_empty();
            if self.timing.is_some_and(|(timed, _)| timed == psn) {
                self.timing = None;
            }
            let pkt = self.packet(t, m, k, psn, self.probing || last, true)?;
            self.arm(t, now);
            return Some(pkt);
        }
        None
    }

    fn next_new(&mut self, t: &mut MsgTable, now: u64) -> Option<TxPacket> {
        loop {
            if self.tx_msg == self.next_msg {
                return None;
            }
            let m = (self.tx_msg % MAX_MSGS) as usize;
            let sends = self.msg(t, m).is_some_and(|msg| {
                msg.seq == self.tx_msg && msg.state == MsgState::Active && msg.sent < msg.packets
            });
            if !sends {
                self.tx_msg = self.tx_msg.wrapping_add(1);
                continue;
            }
            break;
        }
        let m = (self.tx_msg % MAX_MSGS) as usize;
        if !self.cc.allows(self.window.outstanding()) {
            return None;
        }
        if self.cookie.is_none() && self.window.in_flight() > 0 {
            // Without a cookie the receiver takes nothing: one packet
            // asks for it, the rest wait for the challenge.
            return None;
        }
        let psn = self.window.send()?;
        // The loop above found the entry.
        let msg = self.msg_mut(t, m)?;
        if msg.sent == 0 {
            msg.first_psn = psn;
            msg.first_tx = now;
        }
        let k = msg.sent;
        msg.sent += 1;
        let last = msg.sent == msg.packets;
        if last {
            self.tx_msg = self.tx_msg.wrapping_add(1);
        }
        self.since_req += 1;
        // At least twice a window, so a full window always has an ACK
        // coming that opens it.
        let spacing = (self.cc.cwnd() / 2).max(1);
        let ack_req = last || self.since_req >= self.cfg.ack_every.clamp(1, spacing);
        if ack_req {
            self.since_req = 0;
            if self.timing.is_none() {
                self.timing = Some((psn, now));
            }
        }
        let pkt = self.packet(t, m, k, psn, ack_req, false)?;
        self.arm(t, now);
        self.last_active = now;
        Some(pkt)
    }

    fn packet(
        &self,
        t: &MsgTable,
        m: usize,
        k: u32,
        psn: Psn,
        ack_req: bool,
        retransmit: bool,
    ) -> Option<TxPacket> {
        let msg = self.msg(t, m)?;
        let (offset, len) = msg.chunk(k);
        let oldest_msg = self.oldest_unfinished(t);
        Some(TxPacket {
            psn,
            wqe: msg.msg.wqe,
            xeth: xeth::Repr {
                stream: self.stream,
                peer_inc: self.peer_inc,
                msg_seq: msg.seq,
                oldest_psn: self.window.oldest_unacked(),
                msg_lag: msg.seq.wrapping_sub(oldest_msg) as u8,
            },
            offset,
            len,
            msg_len: msg.msg.len,
            ack_req,
            retransmit,
            cookie: self.cookie,
        })
    }

    /// The message (slot) and packet index of a PSN still tried.
    fn find(&self, t: &MsgTable, psn: Psn) -> Option<(usize, u32)> {
        self.active(t)
            .find_map(|(m, msg)| msg.index_of(psn).map(|k| (m, k)))
    }

    /// The oldest message number held (`next_msg` if none): a slot holds
    /// one of the last [`MAX_MSGS`] numbers ([`Self::can_post`]).
    fn oldest_in_use(&self) -> u32 {
        let mut seq = self.next_msg.wrapping_sub(MAX_MSGS);
        while seq != self.next_msg {
            if self.slots[(seq % MAX_MSGS) as usize] != NO_MSG {
                return seq;
            }
            seq = seq.wrapping_add(1);
        }
        self.next_msg
    }

    fn oldest_unfinished(&self, t: &MsgTable) -> u32 {
        let mut seq = self.oldest_in_use();
        while seq != self.next_msg {
            let m = (seq % MAX_MSGS) as usize;
            if self
                .msg(t, m)
                .is_some_and(|msg| msg.seq == seq && msg.state == MsgState::Active)
            {
                return seq;
            }
            seq = seq.wrapping_add(1);
        }
        self.next_msg
    }

    /// Arms the retransmit timer if it is not running: the timeout,
    /// doubled for each timeout without progress, but never past the end
    /// of a started message's retry span (so a message fails within
    /// [`RETRY_SPAN_NS`] however the backoff grew).
    fn arm(&mut self, t: &MsgTable, now: u64) {
        if self.deadline.is_none() {
            let wait = self.rtt.backed_off(self.rto(), self.retries);
            let rto = now.saturating_add(wait.min(self.max_silence()));
            let span_end = self
                .active(t)
                .filter(|(_, m)| m.sent > 0)
                .map(|(_, m)| m.first_tx.saturating_add(RETRY_SPAN_NS))
                .min();
            let deadline = match span_end {
                Some(end) => rto.min(end.max(now)),
                None => rto,
            };
            self.deadline = Some(deadline);
            self.tail_probe = (!self.probing)
                .then(|| now.saturating_add(self.tail_probe_delay()))
                .filter(|&due| due < deadline);
        }
    }

    /// Keeps `rtx` relative to the oldest unacknowledged PSN.
    fn rebase_rtx(&mut self) {
        let base = self.window.oldest_unacked();
        let d = base.diff(self.rtx_base);
        if d > 0 {
            self.rtx.shift_down(d as u32);
            self.rtx_base = base;
        }
    }

    fn mark_resend(&mut self, psn: Psn) {
        self.rebase_rtx();
        let d = psn.diff(self.rtx_base);
        if d >= 0 {
            self.rtx.insert(d as u32);
        }
    }

    /// Takes an ACK or NAK. Answers with another `stream`, or a base past
    /// what was sent, are ignored. PSNs below the base or set in `sack`
    /// are acknowledged if still tried; PSNs given up stay failed.
    pub fn on_answer(&mut self, t: &mut MsgTable, a: &Answer, now: u64) -> AnswerOutcome {
        if a.stream != self.stream || a.inc == 0 {
            return AnswerOutcome::Ignored;
        }
        if let Some((Nak::StaleIncarnation, _)) = a.nak {
            if a.inc == self.peer_inc {
                // About a packet sent before the new incarnation was
                // adopted (its messages failed with the first such NAK):
                // nothing more to do.
                return AnswerOutcome::Ignored;
            }
            // Rule 1: the QP this stream spoke to is gone. What it may
            // have received is lost with it; queued messages go on to its
            // successor, which has another cookie key.
            self.peer_inc = a.inc;
            self.cookie = Cookie::NONE;
            self.stalled = false;
            self.fail_started(t, SendStatus::RetryExceeded);
            return AnswerOutcome::Taken;
        }
        if self.peer_inc != 0 && a.inc != self.peer_inc {
            // A late answer of an incarnation this stream has left.
            return AnswerOutcome::Ignored;
        }
        let oldest = self.window.oldest_unacked();
        let sent_end = oldest.add(self.window.in_flight());
        if sent_end.before(a.base) {
            return AnswerOutcome::Ignored;
        }
        self.peer_inc = a.inc;
        self.last_active = now;
        self.stalled = false;
        let mut answered = 0u32;
        let mut p = oldest;
        while p.before(a.base) {
            answered += u32::from(self.ack_psn(t, p));
            p = p.next();
        }
        let mut highest = None;
        let mut bits = a.sack;
        while bits != 0 {
            let i = bits.trailing_zeros();
            bits &= bits - 1;
            let p = a.base.add(1 + i);
            if !p.before(sent_end) {
                break;
            }
            highest = Some(p);
            answered += u32::from(self.ack_psn(t, p));
        }
        if self.cfg.congestion {
            self.cc.on_answered(answered);
        }
        if let Some((psn, sent)) = self.timing {
            if self.window.is_acked(psn) {
                self.timing = None;
                self.rtt.sample(now.saturating_sub(sent));
            }
        }
        if answered > 0 {
            self.retries = 0;
            self.deadline = None;
            self.tail_probe = None;
            if self.window.in_flight() > 0 {
                self.arm(t, now);
            }
        }
        // Marks kept behind the oldest unacknowledged PSN would, after 2^23
        // PSNs without a loss, compare as ahead of it and turn the rules
        // below off: they follow it.
        let oldest_now = self.window.oldest_unacked();
        if self.recovered.before(oldest_now) {
            self.recovered = oldest_now;
        }
        if self.recovery_end.before(oldest_now) {
            self.recovery_end = oldest_now;
        }
        let was_probing = core::mem::replace(&mut self.probing, false);
        if was_probing {
            // Everything sent before the timeout that this answer could
            // show and does not show placed is taken as lost. What lies
            // past its `sack` the receiver may hold: later answers tell.
            let shown_end = a.base.add(1 + xack::SACK_BITS);
            let end = if shown_end.before(sent_end) {
                shown_end
            } else {
                sent_end
            };
            self.mark_unacked_before(end);
        } else if let Some(h) = highest {
            // Holes REORDER or more before the highest placed PSN: lost
            // if they are still holes once the reorder delay has passed
            // (the timer looks again then).
            let limit = h.add(1).add(0u32.wrapping_sub(REORDER));
            if !limit.before(self.recovery_end) {
                // Packets sent after the last resends overtook them by
                // REORDER: what those resends have not filled was lost
                // again, and is a hole like any other.
                self.recovered = oldest;
            }
            if self.reorder_mark.is_none() && self.has_holes_before(limit) {
                self.reorder_mark = Some((limit, now));
            }
            // Holes a whole ACK interval behind are lost, whatever the
            // delay says: they go now.
            let deep = h.add(1).add(0u32.wrapping_sub(REORDER_DEEP));
            if self.has_holes_before(deep) {
                let from = self.reorder_from();
                self.resend_range(from, deep);
            }
            self.resend_reordered(now);
        }
        if let Some((nak, psn)) = a.nak {
            self.on_nak(t, nak, psn, now);
        }
        AnswerOutcome::Taken
    }

    /// A challenge (xud.rst, "Stream cookies"): the receiver, with no
    /// window for this stream, took nothing of the packet `psn` and gives
    /// `cookie`. One for another stream or incarnation is ignored. A
    /// cookie newer than the one held replaces it, and every PSN in flight
    /// goes again with it: each went with the old cookie (or none), which
    /// that receiver does not take. An older or the same cookie (a
    /// challenge of a packet sent before the newest arrived) changes
    /// nothing: what it was about went again when the newer one came.
    pub fn on_challenge(
        &mut self,
        stream: u64,
        inc: u32,
        cookie: Cookie,
        now: u64,
    ) -> AnswerOutcome {
        if stream != self.stream || inc == 0 || cookie.is_none() {
            return AnswerOutcome::Ignored;
        }
        if self.peer_inc != 0 && inc != self.peer_inc {
            return AnswerOutcome::Ignored;
        }
        if !self.cookie.is_none() && !cookie.is_newer_than(&self.cookie) {
            return AnswerOutcome::Ignored;
        }
        // The incarnation is an ACK's to adopt: a challenge carries it
        // only so a late one of a left incarnation is told apart.
        self.cookie = cookie;
        self.last_active = now;
        let oldest = self.window.oldest_unacked();
        self.mark_unacked_before(oldest.add(self.window.in_flight()));
        // A probe's answer came: what was in flight goes again at once.
        self.probing = false;
        AnswerOutcome::Taken
    }

    /// The first PSN the reorder rule has not resent yet.
    fn reorder_from(&self) -> Psn {
        let oldest = self.window.oldest_unacked();
        if self.recovered.before(oldest) {
            oldest
        } else {
            self.recovered
        }
    }

    /// Whether an unacknowledged PSN lies before `limit` that the reorder
    /// rule has not resent yet.
    fn has_holes_before(&self, limit: Psn) -> bool {
        let mut p = self.reorder_from();
        while p.before(limit) {
            if !self.window.is_acked(p) {
                return true;
            }
            p = p.next();
        }
        false
    }

    /// The smoothed round trip, 0 before one was measured.
    fn srtt(&self) -> u64 {
        self.rtt.srtt().unwrap_or(0)
    }

    /// The retransmit timeout before backoff: the QP's (its `timeout`
    /// attribute), or the measured round trip and four deviations if that
    /// is longer.
    fn rto(&self) -> u64 {
        self.rtt.timeout(self.cfg.rto_ns(), RETRY_SPAN_NS)
    }

    /// How long a hole may be reordering rather than lost: a
    /// sixty-fourth of the QP's timeout, at least
    /// [`REORDER_DELAY_MIN_NS`], and at least a quarter of the round trip
    /// (RACK's reorder window, RFC 8985).
    fn reorder_delay(&self) -> u64 {
        (self.cfg.rto_ns() / 64)
            .max(REORDER_DELAY_MIN_NS)
            .max(self.srtt() / 4)
    }

    /// How long packets may be in flight with nothing acknowledged before
    /// the oldest goes again (a tail probe): four reorder delays, and at
    /// least two round trips (RFC 8985's probe timeout): sooner, the
    /// answer to what is in flight cannot have come yet. Backed off as the
    /// timeout is.
    fn tail_probe_delay(&self) -> u64 {
        let delay = (self.reorder_delay() * 4).max(self.srtt().saturating_mul(2));
        self.rtt.backed_off(delay, 0).min(self.max_silence())
    }

    /// [`MAX_SILENCE_NS`], or the QP's timeout if that is longer.
    fn max_silence(&self) -> u64 {
        MAX_SILENCE_NS.max(self.cfg.rto_ns())
    }

    /// Resends the holes before the reorder mark once it has waited the
    /// reorder delay.
    fn resend_reordered(&mut self, now: u64) -> bool {
        let Some((mark, since)) = self.reorder_mark else {
            return false;
        };
        if now.saturating_sub(since) < self.reorder_delay() {
            return false;
        }
        let from = self.reorder_from();
        self.reorder_mark = None;
        if !from.before(mark) {
            return false;
        }
        self.resend_range(from, mark);
        true
    }

    /// Resends the holes in `from..end` by the reorder rule: a loss.
    fn resend_range(&mut self, from: Psn, end: Psn) {
        let n = self.mark_unacked_range(from, end);
        self.lost(Loss::Gap(n));
        self.recovered = end;
        self.recovery_end = self.window.oldest_unacked().add(self.window.in_flight());
    }

    fn on_nak(&mut self, t: &mut MsgTable, nak: Nak, psn: Psn, now: u64) {
        let Some((m, _)) = self.find(t, psn) else {
            // About a PSN no longer tried: the base and sack were all.
            return;
        };
        if self.window.is_acked(psn) {
            return;
        }
        match nak {
            Nak::ReceiverNotReady(code) => {
                let Some(msg) = self.msg_mut(t, m) else {
                    return;
                };
                let counted_out = msg.rnr_left == 0 && self.cfg.rnr_retry != RNR_RETRY_INFINITE;
                if counted_out || now.saturating_sub(msg.first_tx) >= RETRY_SPAN_NS {
                    self.fail(t, m, SendStatus::RnrRetryExceeded);
                    return;
                }
                // The destination answered: no transport timeout runs
                // while it refuses for want of receives (the RNR budget
                // and the retry span bound that instead); the resend
                // after the wait arms the timer again.
                self.retries = 0;
                self.deadline = None;
                self.tail_probe = None;
                // One RNR wait per round: the other packets of a message
                // refused at once come back with NAKs of their own.
                if self.rnr_until.is_none() {
                    msg.rnr_left = msg.rnr_left.saturating_sub(1);
                    self.rnr_until = Some(now + rnr_timeout_ns(code));
                }
                self.mark_resend(psn);
            }
            Nak::RemoteAccess => self.fail(t, m, SendStatus::RemoteAccess),
            Nak::InvalidRequest => self.fail(t, m, SendStatus::RemoteInvalidRequest),
            Nak::StaleIncarnation => {}
        }
    }

    /// Acknowledges `psn` if still tried; true if that was news.
    fn ack_psn(&mut self, t: &mut MsgTable, psn: Psn) -> bool {
        let Some((m, _)) = self.find(t, psn) else {
            return false;
        };
        if self.window.ack(psn) != AckResult::New {
            return false;
        }
        let Some(msg) = self.msg_mut(t, m) else {
            return true;
        };
        msg.acked += 1;
        if msg.acked == msg.packets {
            msg.state = MsgState::Done(SendStatus::Success);
        }
        true
    }

    fn mark_unacked_before(&mut self, end: Psn) {
        let from = self.window.oldest_unacked();
        self.mark_unacked_range(from, end);
    }

    /// Marks the unacknowledged PSNs of `from..end` for resending; returns
    /// how many.
    fn mark_unacked_range(&mut self, from: Psn, end: Psn) -> u32 {
        let mut p = from;
        let mut n = 0;
        while p.before(end) {
            if !self.window.is_acked(p) {
                self.mark_resend(p);
                n += 1;
            }
            p = p.next();
        }
        n
    }

    /// Fails message `m`: its sent PSNs not acknowledged are given up
    /// (they leave the window as acknowledged ones do), its unsent ones
    /// never go.
    fn fail(&mut self, t: &mut MsgTable, m: usize, status: SendStatus) {
        let Some(msg) = self.msg_mut(t, m) else {
            return;
        };
        if msg.state != MsgState::Active {
            return;
        }
        msg.state = MsgState::Done(status);
        let (first, sent) = (msg.first_psn, msg.sent);
        for k in 0..sent {
            let _ = self.window.ack(first.add(k));
        }
        if self.window.in_flight() == 0 {
            self.deadline = None;
            self.tail_probe = None;
            self.probing = false;
            self.rnr_until = None;
            self.reorder_mark = None;
        }
    }

    /// Fails every message that has sent a packet.
    fn fail_started(&mut self, t: &mut MsgTable, status: SendStatus) {
        for m in 0..MAX_MSGS as usize {
            if self
                .msg(t, m)
                .is_some_and(|x| x.state == MsgState::Active && x.sent > 0)
            {
                self.fail(t, m, status);
            }
        }
    }

    /// When [`Self::on_timer`] next has work: the retransmit deadline,
    /// the end of an RNR wait or of the reorder delay, or the tail probe.
    pub fn next_deadline(&self) -> Option<u64> {
        let reorder = self
            .reorder_mark
            .map(|(_, since)| since.saturating_add(self.reorder_delay()));
        [self.deadline, self.rnr_until, reorder, self.tail_probe]
            .into_iter()
            .flatten()
            .min()
    }

    /// The timer fired. A message past its retry span, or a stream out
    /// of retries, fails; otherwise the oldest unacknowledged PSN goes
    /// again as a probe and new packets wait for its answer.
    pub fn on_timer(&mut self, t: &mut MsgTable, now: u64) -> TimerOutcome {
        // An RNR wait over, or holes that waited out the reorder delay.
        let rnr_over = self.rnr_until.is_some_and(|due| now >= due);
        if rnr_over {
            self.rnr_until = None;
        }
        // Nothing acknowledged for the tail probe delay: the oldest goes
        // again with AckReq. A lost tail, or a lost resend with nothing
        // sent after it (the window full behind it), is repaired here
        // rather than at the timeout; its answer's sack shows the rest.
        let mut tail = false;
        if self.tail_probe.is_some_and(|due| now >= due) {
            self.tail_probe = None;
            if self.window.in_flight() > 0 && !self.probing {
                let oldest = self.window.oldest_unacked();
                self.mark_resend(oldest);
                // Resending the timed packet drops the sample: the next
                // probe waits longer, or on a path that only got slower
                // it would resend the timed packet every round and no
                // round trip would ever be measured.
                if self.timing.is_some_and(|(p, _)| p == oldest) {
                    self.rtt.back_off();
                }
                tail = true;
            }
        }
        let due = rnr_over | self.resend_reordered(now) | tail;
        let not_timed_out = if due {
            TimerOutcome::Resend
        } else {
            TimerOutcome::Idle
        };
        let Some(deadline) = self.deadline else {
            return not_timed_out;
        };
        if now < deadline {
            return not_timed_out;
        }
        self.deadline = None;
        self.tail_probe = None;
        if self.window.in_flight() == 0 {
            return TimerOutcome::Idle;
        }
        let expired = self
            .active(t)
            .any(|(_, msg)| msg.sent > 0 && now.saturating_sub(msg.first_tx) >= RETRY_SPAN_NS);
        if expired || self.retries >= self.cfg.retry_cnt {
            self.fail_started(t, SendStatus::RetryExceeded);
            self.fail_queued(t, SendStatus::RetryExceeded);
            self.retries = 0;
            self.probing = false;
            self.stalled = true;
            return TimerOutcome::DestinationFailed;
        }
        self.retries += 1;
        self.rtt.back_off();
        self.probing = true;
        self.lost(Loss::Timeout);
        self.stalled |= self.retries >= STALL_TIMEOUTS;
        // Only the probe: its answer shows what else is missing.
        self.rtx = RtxSet::EMPTY;
        self.reorder_mark = None;
        let oldest = self.window.oldest_unacked();
        self.mark_resend(oldest);
        self.arm(t, now);
        TimerOutcome::Probe
    }

    /// Fails the messages that have not sent a packet yet.
    fn fail_queued(&mut self, t: &mut MsgTable, status: SendStatus) {
        for m in 0..MAX_MSGS as usize {
            if let Some(msg) = self.msg_mut(t, m) {
                if msg.state == MsgState::Active && msg.sent == 0 {
                    msg.state = MsgState::Done(status);
                }
            }
        }
    }

    /// A finished message's work request and status, each once, oldest
    /// first among those ready (completions may come out of posting
    /// order).
    /// The entry goes back to `t` (free for the next message at that
    /// handle).
    pub fn next_completion(&mut self, t: &mut MsgTable) -> Option<(u32, SendStatus)> {
        let mut seq = self.oldest_in_use();
        while seq != self.next_msg {
            let m = (seq % MAX_MSGS) as usize;
            if let Some(msg) = self.msg_mut(t, m) {
                if let MsgState::Done(status) = msg.state {
                    *msg = SendMsg::FREE;
                    let wqe = self.slots[m];
                    self.slots[m] = NO_MSG;
                    return Some((wqe, status));
                }
            }
            seq = seq.wrapping_add(1);
        }
        None
    }

    /// Nothing in flight or queued for [`SENDER_IDLE_NS`]: the state may
    /// go (the next post draws a new stream).
    pub fn is_idle(&self, now: u64) -> bool {
        self.in_use() == 0 && now.saturating_sub(self.last_active) > SENDER_IDLE_NS
    }

    /// modify_qp changed the QP's retransmission attributes.
    pub fn set_config(&mut self, cfg: Config) {
        self.cfg = cfg;
    }

    /// The work request `wqe` cannot be sent for a local reason (its
    /// memory, its address): its message fails with `status` alone, its
    /// packets sent are given up, the other messages go on.
    pub fn fail_local(&mut self, t: &mut MsgTable, wqe: u32, status: SendStatus) {
        if let Some(m) = self.slots.iter().position(|&h| h == wqe && h != NO_MSG) {
            self.fail(t, m, status);
        }
    }

    /// The QP is going to the error state or away: every message fails
    /// (their work requests are flushed by the caller).
    pub fn abort(&mut self, t: &mut MsgTable, status: SendStatus) {
        self.fail_started(t, status);
        self.fail_queued(t, status);
    }
}

/// A sending stream at rest, without its message table: nothing posted
/// and nothing in flight, so what goes on is its identity (`stream`, the
/// peer's incarnation as last heard) and where its numbering stands (the
/// next PSN and message number). The driver keeps this in the peer entry
/// and frees the full [`SendStream`] while nothing is sent to the
/// destination.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ParkedSend {
    stream: u64,
    peer_inc: u32,
    /// Kept, so a stream taken back into use before its receiver's window
    /// is reclaimed goes on without a challenge.
    cookie: Cookie,
    next_psn: Psn,
    next_msg: u32,
    last_active: u64,
}

impl ParkedSend {
    pub fn stream(&self) -> u64 {
        self.stream
    }

    /// As [`SendStream::is_idle`].
    pub fn is_idle(&self, now: u64) -> bool {
        now.saturating_sub(self.last_active) > SENDER_IDLE_NS
    }

    /// The stream in full again, as it was parked, with the QP's current
    /// `cfg`: the next packet and message continue its numbering.
    pub fn unpark(&self, cfg: Config) -> SendStream {
        let mut s = SendStream::new(self.stream, self.next_psn, cfg, self.last_active);
        s.peer_inc = self.peer_inc;
        s.cookie = self.cookie;
        s.next_msg = self.next_msg;
        s.tx_msg = self.next_msg;
        s
    }
}

impl SendStream {
    /// The stream's parked form if nothing was sent or answered for
    /// `idle_ns` and it holds nothing: no message posted or unreported,
    /// no PSN in flight, no timer. `None` otherwise, and for a stalled
    /// stream: its destination is silent, and taken back it must still
    /// be held to the stalled share until it answers. (Parked, a dead
    /// destination's stream that failed its messages and rested a second
    /// came back with a fresh one's share of the send queue: in make
    /// check's 21-xud-bounds one dead peer of twelve held 26 WQEs after
    /// 12.5 s.) It goes when idle instead, as any stream.
    pub fn park(&self, now: u64, idle_ns: u64) -> Option<ParkedSend> {
        let at_rest = !self.stalled
            && now.saturating_sub(self.last_active) >= idle_ns
            && self.in_use() == 0
            && self.window.in_flight() == 0
            && self.deadline.is_none()
            && self.tail_probe.is_none()
            && self.rnr_until.is_none()
            && self.reorder_mark.is_none()
            && !self.probing;
        at_rest.then(|| ParkedSend {
            stream: self.stream,
            peer_inc: self.peer_inc,
            cookie: self.cookie,
            next_psn: self.window.oldest_unacked(),
            next_msg: self.next_msg,
            last_active: self.last_active,
        })
    }
}

/// Whether `a` comes before `b` (message numbers); re-exported for the
/// driver's queues.
pub fn msg_before(a: u32, b: u32) -> bool {
    seq_before(a, b)
}

#[cfg(test)]
mod tests {
    use super::super::model::answer_of as answer;
    use super::{Config, Message, MsgTable, Psn, RtxSet, SendMsg, SendStream};
    use super::{TimerOutcome, WINDOW_WORDS};
    use std::vec::Vec;

    /// Stream 42 from `first` with one message of `packets` packets, and
    /// its message table.
    fn one_message(first: Psn, packets: u32) -> (SendStream, Vec<SendMsg>) {
        let mut t: Vec<SendMsg> = std::vec![SendMsg::FREE; 4];
        // The whole pipe at once: these tests look at what it holds.
        let cfg = Config {
            initial_window: super::PIPE,
            ..Config::DEFAULT
        };
        let mut s = SendStream::new(42, first, cfg, 0);
        s.cookie = super::Cookie::new(1, 1);
        let msg = Message {
            wqe: 1,
            len: packets * 256,
            mtu: 256,
        };
        s.post(&mut t as &mut MsgTable, msg, 0).unwrap();
        (s, t)
    }

    /// Eight rounds of 16 packets from `first`, each answered `rtt` after
    /// it went (the timed packet among them): the stream has measured
    /// `rtt`. The time and the next unacknowledged PSN after them.
    fn rounds_of(s: &mut SendStream, t: &mut MsgTable, first: Psn, rtt: u64) -> (u64, Psn) {
        let mut now = 0;
        let mut acked = first;
        for _ in 0..8 {
            for _ in 0..16 {
                s.next_packet(t, now).unwrap();
            }
            now += rtt;
            acked = acked.add(16);
            s.on_answer(t, &answer(acked, 0), now);
        }
        (now, acked)
    }

    /// The reorder rule's marks follow the oldest unacknowledged PSN as
    /// answers move it, so that they never fall 2^23 PSNs behind it (where
    /// they would compare as ahead).
    #[test]
    fn recovery_marks_follow_the_oldest_unacknowledged_psn() {
        let first = Psn::new(0xff_ff00);
        let (mut s, mut t) = one_message(first, 600);
        for _ in 0..100 {
            s.next_packet(&mut t, 0).unwrap();
        }
        s.on_answer(&mut t, &answer(first.add(100), 0), 10);
        assert_eq!(s.recovered, first.add(100));
        assert_eq!(s.recovery_end, first.add(100));
    }

    /// On a path whose round trip is 40 ms (a queue, a loaded host), the
    /// tail probe waits two round trips (the QP's delays would send it
    /// after 4 ms) and the timeout at least the round trip: an answer on
    /// its way is not raced by resends (incast through RED resent a
    /// quarter of its packets with the fixed delays).
    #[test]
    fn the_tail_probe_and_the_timeout_wait_for_the_measured_round_trip() {
        const RTT: u64 = 40_000_000;
        let first = Psn::new(0);
        let (mut s, mut t) = one_message(first, 400);
        // Round trips of 40 ms: each answer acknowledges what went a round
        // trip before, the timed packet among them.
        let (now, acked) = rounds_of(&mut s, &mut t, first, RTT);
        let srtt = s.rtt.srtt().expect("a round trip measured");
        assert!(srtt.abs_diff(RTT) < RTT / 10, "srtt {srtt} ns");
        // Sixteen more, then silence: no resend before two round trips.
        for _ in 0..16 {
            s.next_packet(&mut t, now).unwrap();
        }
        // (Armed only if it comes before the timeout.)
        if let Some(probe) = s.tail_probe {
            assert!(
                probe >= now + 2 * RTT - RTT / 10,
                "tail probe {} ns after",
                probe - now
            );
        }
        let deadline = s.next_deadline().expect("a timeout armed");
        assert!(deadline >= now + RTT, "timeout {} ns after", deadline - now);
        assert_eq!(s.on_timer(&mut t, now + RTT), TimerOutcome::Idle);
        // An answer in time: nothing was resent.
        s.on_answer(&mut t, &answer(acked.add(16), 0), now + RTT);
        assert!(s
            .next_packet(&mut t, now + RTT)
            .is_some_and(|p| !p.retransmit));
    }

    /// A destination that never answers hears from the stream at least
    /// every [`super::MAX_SILENCE_NS`], however far the timeout backed
    /// off, until the stream gives up: a receiver drops the receives of a
    /// source silent for twice that which has not completed a message.
    #[test]
    fn a_silent_destination_hears_from_the_stream_at_least_every_max_silence() {
        let (mut s, mut t) = one_message(Psn::new(0), 40);
        let mut last = 0;
        let mut longest = 0;
        while s.next_packet(&mut t, 0).is_some() {}
        loop {
            let due = s.next_deadline().expect("a timer while packets are out");
            let outcome = s.on_timer(&mut t, due);
            if outcome == TimerOutcome::DestinationFailed {
                break;
            }
            if let Some(p) = s.next_packet(&mut t, due) {
                assert!(p.retransmit);
                longest = longest.max(due - last);
                last = due;
                while s.next_packet(&mut t, due).is_some() {}
            }
            assert!(due < 2 * super::RETRY_SPAN_NS, "never gave up");
        }
        assert!(longest > 0);
        assert!(
            longest <= super::MAX_SILENCE_NS,
            "{} ms without a packet",
            longest / 1_000_000
        );
    }

    /// A QP whose own timeout is longer than [`super::MAX_SILENCE_NS`]
    /// (rxud-perf -T 20: 4.3 s, over a link that delays 1 s) keeps it:
    /// the cap on silence must not time out before the answers can come.
    #[test]
    fn a_qp_timeout_longer_than_max_silence_stands() {
        let mut t: Vec<SendMsg> = std::vec![SendMsg::FREE; 4];
        let cfg = Config {
            timeout: 20,
            ..Config::DEFAULT
        };
        let mut s = SendStream::new(42, Psn::new(0), cfg, 0);
        s.cookie = super::Cookie::new(1, 1);
        let msg = Message {
            wqe: 1,
            len: 4 * 256,
            mtu: 256,
        };
        s.post(&mut t as &mut MsgTable, msg, 0).unwrap();
        while s.next_packet(&mut t, 0).is_some() {}
        let rto = super::local_ack_timeout_ns(20).unwrap();
        assert!(rto > super::MAX_SILENCE_NS);
        assert_eq!(s.deadline, Some(rto));
    }

    /// A path whose round trip grows from 40 ms to 200 ms, past the
    /// timeout (the QP's 67 ms): the first timed packets time out and go
    /// again before their answers come, and Karn's rule takes no sample
    /// of them. The backoff must outlive the progress their late answers
    /// make, until a packet is timed whole: then the estimate has the new
    /// round trip and the timeouts stop. (Without it the timeout fell
    /// back to 67 ms at every answer and fired at every round, for ever.)
    #[test]
    fn a_timeout_backs_off_until_a_round_trip_is_measured() {
        const RTT: u64 = 40_000_000;
        const SLOW: u64 = 200_000_000;
        const STEP: u64 = 1_000_000;
        let first = Psn::new(0);
        let (mut s, mut t) = one_message(first, 20_000);
        let (mut now, acked) = rounds_of(&mut s, &mut t, first, RTT);
        assert!(s.rtt.srtt().is_some_and(|r| r < 2 * RTT));
        // Then a FIFO path of SLOW round trips, lossless but marking
        // every packet (a queue that holds many streams at their floor,
        // as incast's does): each copy of a packet is answered SLOW after
        // it left, the answer acknowledging everything up to the newest
        // PSN delivered, with a CNP.
        let mut path: std::collections::VecDeque<(u64, Psn)> = Default::default();
        let mut newest = acked;
        let (mut early, mut late) = (0, 0);
        for step in 0..4_000u64 {
            now += STEP;
            while path.front().is_some_and(|&(at, _)| at <= now) {
                let (_, psn) = path.pop_front().unwrap();
                if !psn.before(newest) {
                    newest = psn.next();
                }
                s.on_answer(&mut t, &answer(newest, 0), now);
                s.congestion_notified();
            }
            if s.next_deadline().is_some_and(|d| d <= now)
                && s.on_timer(&mut t, now) == TimerOutcome::Probe
            {
                if step < 2_000 {
                    early += 1;
                } else {
                    late += 1;
                }
            }
            while let Some(p) = s.next_packet(&mut t, now) {
                path.push_back((now + SLOW, p.psn));
            }
        }
        let srtt = s.rtt.srtt().unwrap();
        assert!(
            srtt > SLOW * 3 / 4,
            "srtt {} ms after {early} timeouts",
            srtt / 1_000_000
        );
        assert!(early > 0, "the change of path timed out at first");
        assert_eq!(late, 0, "timeouts once the round trip was measured");
        assert_eq!(s.rtt.backoff(), 0);
        assert_eq!(s.cc.cwnd(), super::MIN_WINDOW);
    }

    /// After a timeout, the probe's answer marks for resending only the
    /// unacknowledged PSNs it could show (its base and `sack`), not those
    /// beyond, which the receiver may hold.
    #[test]
    fn a_probe_answer_resends_only_what_it_could_show() {
        let first = Psn::new(5);
        let (mut s, mut t) = one_message(first, 600);
        let mut sent = 0;
        while s.next_packet(&mut t, 0).is_some() {
            sent += 1;
        }
        assert_eq!(sent, 128);
        // `first` and `first + 10` lost, the rest placed: both go again
        // (deep holes), and 126 new packets, the pipe allowing.
        s.on_answer(&mut t, &answer(first, (u128::MAX >> 1) & !(1 << 9)), 10);
        let (mut more, mut again) = (0, 0);
        while let Some(p) = s.next_packet(&mut t, 10) {
            more += u32::from(!p.retransmit);
            again += u32::from(p.retransmit);
        }
        assert_eq!((more, again), (126, 2));
        // Both resends lost too: the timeout's probe.
        let mut now = 10;
        while s.on_timer(&mut t, now) != TimerOutcome::Probe {
            now = s.next_deadline().unwrap().max(now + 1);
        }
        let probe = s.next_packet(&mut t, now).unwrap();
        assert_eq!((probe.psn, probe.retransmit), (first, true));
        // The probe placed `first`; the answer's base is `first + 10` and
        // its sack shows the 127 after it placed. Of what it could show
        // only `first + 10` is missing: that goes again, not the 117
        // packets past its sack (`first + 138` on), which it cannot show.
        s.on_answer(&mut t, &answer(first.add(10), u128::MAX >> 1), now + 1);
        let mut resent = Vec::new();
        while let Some(p) = s.next_packet(&mut t, now + 1) {
            if !p.retransmit {
                // Resends go first; new packets then, the pipe allowing.
                break;
            }
            resent.push(p.psn.diff(first));
        }
        assert_eq!(resent, [10]);
    }

    #[test]
    fn rtx_set_keeps_offsets_across_words_as_its_base_moves() {
        let top = WINDOW_WORDS as u32 * 64;
        let mut r = RtxSet::EMPTY;
        for i in [0, 5, 63, 64, 127, 128, 200, top - 1, top, top + 7] {
            r.insert(i);
        }
        r.shift_down(5);
        let mut got = std::vec::Vec::new();
        let mut c = r;
        while let Some(i) = c.take_first() {
            got.push(i);
        }
        // `top` and past it were never in; 0 went with the shift.
        assert_eq!(got, [0, 58, 59, 122, 123, 195, top - 6]);
        r.shift_down(64);
        assert_eq!(r.take_first(), Some(58));
        r.shift_down(top);
        assert!(r.is_empty());
        assert_eq!(r.take_first(), None);
    }

    /// A destination that has never answered holds
    /// [`super::super::UNANSWERED_MSGS`] messages in its stream; its first
    /// answer opens the rest. [`STALL_TIMEOUTS`] retransmit timeouts in a
    /// row stall it until it answers again (the driver's small share).
    #[test]
    fn an_unanswered_destination_holds_two_messages_and_timeouts_stall_it() {
        let mut t: Vec<SendMsg> = std::vec![SendMsg::FREE; 32];
        let first = Psn::new(100);
        let mut s = SendStream::new(42, first, Config::DEFAULT, 0);
        let post = |s: &mut SendStream, t: &mut Vec<SendMsg>, w: u32| {
            let msg = Message {
                wqe: w,
                len: 10,
                mtu: 256,
            };
            s.post(t as &mut MsgTable, msg, 0).is_some()
        };
        let taken = (0..5).filter(|&w| post(&mut s, &mut t, w)).count() as u32;
        assert_eq!(taken, super::UNANSWERED_MSGS);
        assert!(!s.is_stalled());
        while s.next_packet(&mut t, 0).is_some() {}
        // No answer: the retransmit timer expires, the destination stalls.
        assert!(s.next_deadline().is_some());
        // Timeouts before the last (67, 134, 268 ms) are no stall; the
        // last (536 ms later, about a second in all) is.
        // (A tail probe before the first timeout is no timeout.)
        let (mut due, mut timeouts) = (0, 0);
        for _ in 0..16 {
            if timeouts == super::STALL_TIMEOUTS {
                break;
            }
            assert!(!s.is_stalled(), "stalled after {timeouts} timeouts");
            due = s.next_deadline().expect("a retransmit deadline");
            if s.on_timer(&mut t, due) == TimerOutcome::Probe {
                timeouts += 1;
            }
            // What is due goes; nothing answers it.
            while s.next_packet(&mut t, due).is_some() {}
        }
        assert_eq!(timeouts, super::STALL_TIMEOUTS);
        assert!(s.is_stalled());
        assert!(
            due >= 900_000_000,
            "stalled after {due} ns, not about a second"
        );
        assert!(!post(&mut s, &mut t, 9));
        // Its messages fail at the end of the retry span; at rest a second
        // later the stream still does not park: it stays stalled.
        let mut end = due;
        while let Some(d) = s.next_deadline() {
            end = d;
            if s.on_timer(&mut t, d) == TimerOutcome::DestinationFailed {
                break;
            }
            while s.next_packet(&mut t, d).is_some() {}
        }
        while s.next_completion(&mut t).is_some() {}
        assert!(s.is_stalled());
        let rest = end.max(s.last_active) + 1_000_000_000;
        assert!(
            s.park(rest, 1_000_000_000).is_none(),
            "a stalled stream parked: taken back it would be unstalled"
        );
        assert!(s.is_stalled());
        let due = rest;
        // An answer (the first PSN placed) ends the stall and opens the
        // stream's sixteen messages.
        s.on_answer(&mut t, &answer(first.add(1), 0), due + 1);
        assert!(!s.is_stalled());
        while s.next_completion(&mut t).is_some() {}
        (10..30).for_each(|w| {
            post(&mut s, &mut t, w);
        });
        assert_eq!(s.in_use(), super::MAX_MSGS);
    }
}
