// SPDX-License-Identifier: GPL-2.0

//! RC (reliable connected) transport reliability (IBTA 9.7), as two
//! sans-IO state machines: the [`requester`] (send queue: PSNs, ACK
//! handling, retransmission, completions) and the [`responder`] (receive
//! side: expected PSN, MSN, duplicates, NAKs, READ/atomic resources).
//!
//! # Why sans-IO
//!
//! The kernel drives RC from three contexts: the poster's context or a
//! workqueue (transmit), the UDP receive softirq (requests and responses)
//! and timers (retransmission, RNR wait). None of the protocol decisions
//! depend on which context runs them, so they live here as plain state
//! machines: no allocation, no clock (every call that needs time takes
//! `now`, a monotonic nanosecond count), no locks, no packets. They say
//! *what* to send (PSN, opcode, which message, byte offset and length,
//! AckReq) and the kernel builds the bytes with [`super::wire`]. The same
//! code runs on the host, where the model tests in `model.rs` connect a
//! requester and a responder through a lossy, duplicating, reordering
//! network and check exactly-once, in-order delivery.
//!
//! State is bounded and caller-sized: the requester keeps one [`Slot`] per
//! outstanding work request, the responder one [`Resource`] per READ or
//! atomic it can replay, each in storage the caller provides (an array on
//! the host, a kernel allocation sized from the QP's attributes in the
//! driver). Every per-packet operation is O(1), or O(1) amortised where a
//! walk over work requests is paid for by those requests completing.
//!
//! # Retransmission, and where it differs from rxe
//!
//! Retransmission is go-back-N from the oldest PSN without its answer,
//! never from the start of the message when part of it was acknowledged:
//! SEND/WRITE resume with a MIDDLE or LAST opcode (the responder accepts
//! it because its expected PSN is exactly there), READs are re-requested
//! from the first missing response with the RETH moved on by the bytes
//! already received. rxe (`drivers/infiniband/sw/rxe`) resumes its oldest
//! work request the same way, but differs elsewhere, and this core
//! improves on it there:
//!
//! - rxe's completer PSN stops at the first READ or atomic without its
//!   answer, so a retry resends every request after it, even those an ACK
//!   showed the responder executed. Here the requester also tracks the
//!   newest PSN known executed and skips SEND/WRITE packets before it,
//!   re-requesting only the READs and atomics there (answered from the
//!   responder's resources).
//! - rxe drops a READ response past the expected one and waits for the
//!   retransmit timer. Here any answer past a READ/atomic still waiting
//!   is an implied NAK: the READ is re-requested at once.
//! - rxe's responder follows an RNR NAK with a sequence NAK for the next
//!   packet, which ends the requester's RNR wait early. Here the
//!   responder stays silent until the retry arrives, and the requester
//!   ignores sequence NAKs for the PSN it is waiting to resend.
//! - rxe ACKs every packet with AckReq, and asks at each message end.
//!   Here the requester asks at each message end but an unsignaled
//!   message's with another posted right behind it (whose ACK covers it:
//!   a WRITE of data then the SEND of a response, as nvme-rdma's target
//!   posts them, costs one ACK, not two), every `ack_every` packets and
//!   when its window fills; the responder owes an ACK then (and every
//!   `ack_every` packets, for requesters that never ask), and the kernel
//!   pulls responses at the end of a receive batch, so a burst costs one
//!   ACK (a batch of duplicates too).
//!
//! # Counting retries
//!
//! `retry_cnt` counts consecutive retransmission passes (timeouts,
//! sequence NAKs, implied NAKs) without forward progress, and is restored
//! by any progress (an answer that moves the oldest unanswered PSN), as in
//! rxe. `rnr_retry` counts RNR NAKs for the same PSN and is restored once
//! that PSN is answered. A NAK for a PSN already being retried from, or
//! before a PSN known executed, is ignored, so a duplicated or late NAK
//! does not cost a second pass. `rnr_retry == 7` means retry forever
//! (IBTA). `retry_cnt` is taken literally, as IBTA says (rxe also treats
//! a `retry_cnt` of 7 as infinite); the verbs layer bounds both to 0..=7,
//! the state machines accept any `u8`.

//! # Completions
//!
//! IB RC completes send work requests in order. The requester hands them
//! out one at a time ([`requester::Requester::next_completion`]): a
//! coalesced ACK may complete many, the caller drains them. After an
//! error (retry or RNR retry exceeded, a fatal NAK, a local error, or the
//! QP moved to error with [`requester::Requester::flush`]) the work
//! request at fault completes with that status and every later one with
//! [`Status::Flushed`]. A fatal NAK (or exhausted RNR retries) for a PSN
//! behind which READs or atomics still wait for their answers takes
//! effect once those are answered, so that work requests the responder
//! did execute complete successfully and in order.
//!
//! # What the kernel does around these
//!
//! Per QP, calls into one requester or one responder must be serialised
//! (a per-QP lock or a single work item). Typical driving:
//!
//! - post: [`requester::Requester::post`], then transmit every
//!   [`requester::Requester::next_packet`] (also after each response and
//!   timer), building packets from the caller's WQE (`TxPacket::id`);
//! - receive a response: [`requester::Requester::on_response`]; copy READ
//!   data or the atomic result where it says; drain
//!   [`requester::Requester::next_completion`] into the send CQ;
//! - receive a request: [`responder::Responder::on_request`]; carry out
//!   the plan; `commit`, `rnr` or `reject`; at the end of the receive
//!   batch send every [`responder::Responder::next_response`];
//! - timers: one timer per requester, re-armed at
//!   [`requester::Requester::next_deadline`] after each call that may
//!   move it, calling [`requester::Requester::on_timeout`].
//!
//! # Not here (yet)
//!
//! End-to-end credits (the responder advertises none, as rxe, and the
//! requester ignores them), fences and SQ drain (the caller can hold
//! back posting), and local operations in the send queue (they never reach the wire;
//! the caller completes them in order around the wire ones).

use super::mtu::IbMtu;
use super::psn::Psn;
use super::wire::aeth::{self, AckSyndrome, NakCode};
use super::wire::opcode::{Direction, ExtHeader, Opcode, Operation, Position, Transport};
use super::wire::{feth, reth};

pub mod requester;
pub mod responder;

// The short names users import (`rc::Requester`, ...). The kernel module
// uses only some of them so far.
#[allow(unused_imports)]
pub use requester::{
    Completion, Incoming, Message, NotPosted, Outcome, PostError, Requester, Slot, TimerOutcome,
    TxPacket, WqeRef,
};
#[allow(unused_imports)]
pub use responder::{Action, Flush, Plan, Request, Resource, Responder, Response, StalePlan};

#[cfg(test)]
mod model;

/// What a work request asks the responder to do.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum MsgKind {
    /// SEND.
    Send,
    /// SEND with immediate data.
    SendImm,
    /// SEND with invalidate.
    SendInv,
    /// RDMA WRITE.
    Write,
    /// RDMA WRITE with immediate data (consumes a receive WQE).
    WriteImm,
    /// RDMA READ.
    Read,
    /// Atomic compare and swap.
    CmpSwap,
    /// Atomic fetch and add.
    FetchAdd,
    /// ATOMIC WRITE (IBTA 1.5): 8 bytes in the request packet, written
    /// whole at an aligned address. Like a READ it holds a responder
    /// resource and is answered by a READ response (ONLY, no payload),
    /// as rxe answers it, so a duplicate is replayed, not executed again.
    AtomicWrite,
    /// FLUSH (IBTA 1.5, A19): makes what was placed before it in a range
    /// of an MR (or the whole MR) globally visible or persistent. One
    /// request packet without payload (FETH and RETH), answered like an
    /// ATOMIC WRITE by a READ response without data, from a responder
    /// resource. The message length is the RETH's: the range's bytes,
    /// none of them carried.
    Flush,
}

/// The responder-side class of a message: packets of one message share
/// it, and a multi-packet message may not be interleaved with another.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Class {
    Send,
    Write,
    Read,
    Atomic,
}

impl MsgKind {
    /// READ or atomic: needs a response with data, holds a responder
    /// resource, and is limited by `max_rd_atomic`.
    pub const fn is_read_or_atomic(self) -> bool {
        matches!(
            self,
            MsgKind::Read
                | MsgKind::CmpSwap
                | MsgKind::FetchAdd
                | MsgKind::AtomicWrite
                | MsgKind::Flush
        )
    }

    /// ATOMIC WRITE or FLUSH: answered by one READ response packet
    /// without data.
    pub const fn answered_without_data(self) -> bool {
        matches!(self, MsgKind::AtomicWrite | MsgKind::Flush)
    }

    /// Compare and swap or fetch and add.
    pub const fn is_atomic(self) -> bool {
        matches!(self, MsgKind::CmpSwap | MsgKind::FetchAdd)
    }

    /// The bytes of one request packet, whatever the message length:
    /// atomics and ATOMIC WRITE are 8 bytes in one packet (a FLUSH is
    /// one packet too, but its length is the range it names).
    pub const fn is_eight_bytes(self) -> bool {
        matches!(
            self,
            MsgKind::CmpSwap | MsgKind::FetchAdd | MsgKind::AtomicWrite
        )
    }

    /// SEND or WRITE: the request packets carry the payload (ATOMIC
    /// WRITE's one packet carries its 8 bytes too, but is answered as a
    /// READ).
    pub const fn carries_payload(self) -> bool {
        !self.is_read_or_atomic()
    }

    pub(crate) const fn class(self) -> Class {
        match self {
            MsgKind::Send | MsgKind::SendImm | MsgKind::SendInv => Class::Send,
            MsgKind::Write | MsgKind::WriteImm => Class::Write,
            MsgKind::Read => Class::Read,
            MsgKind::CmpSwap | MsgKind::FetchAdd | MsgKind::AtomicWrite | MsgKind::Flush => {
                Class::Atomic
            }
        }
    }

    /// The RC request opcode of a packet at `pos` in a message of this
    /// kind (READ and atomics are always one request packet, whatever
    /// `pos`). Immediate data and invalidate go on the last packet only.
    pub const fn opcode(self, pos: Position) -> Opcode {
        use Position::*;
        match (self, pos) {
            (MsgKind::Send | MsgKind::SendImm | MsgKind::SendInv, First) => Opcode::RC_SEND_FIRST,
            (MsgKind::Send | MsgKind::SendImm | MsgKind::SendInv, Middle) => Opcode::RC_SEND_MIDDLE,
            (MsgKind::Send, Last) => Opcode::RC_SEND_LAST,
            (MsgKind::Send, Only) => Opcode::RC_SEND_ONLY,
            (MsgKind::SendImm, Last) => Opcode::RC_SEND_LAST_WITH_IMMEDIATE,
            (MsgKind::SendImm, Only) => Opcode::RC_SEND_ONLY_WITH_IMMEDIATE,
            (MsgKind::SendInv, Last) => Opcode::RC_SEND_LAST_WITH_INVALIDATE,
            (MsgKind::SendInv, Only) => Opcode::RC_SEND_ONLY_WITH_INVALIDATE,
            (MsgKind::Write | MsgKind::WriteImm, First) => Opcode::RC_RDMA_WRITE_FIRST,
            (MsgKind::Write | MsgKind::WriteImm, Middle) => Opcode::RC_RDMA_WRITE_MIDDLE,
            (MsgKind::Write, Last) => Opcode::RC_RDMA_WRITE_LAST,
            (MsgKind::Write, Only) => Opcode::RC_RDMA_WRITE_ONLY,
            (MsgKind::WriteImm, Last) => Opcode::RC_RDMA_WRITE_LAST_WITH_IMMEDIATE,
            (MsgKind::WriteImm, Only) => Opcode::RC_RDMA_WRITE_ONLY_WITH_IMMEDIATE,
            (MsgKind::Read, _) => Opcode::RC_RDMA_READ_REQUEST,
            (MsgKind::CmpSwap, _) => Opcode::RC_COMPARE_SWAP,
            (MsgKind::FetchAdd, _) => Opcode::RC_FETCH_ADD,
            (MsgKind::AtomicWrite, _) => Opcode::RC_ATOMIC_WRITE,
            (MsgKind::Flush, _) => Opcode::RC_FLUSH,
        }
    }

    /// The kind and position of an RC request packet, from the opcode
    /// table. `None` for anything else. FIRST and
    /// MIDDLE SEND/WRITE packets report plain `Send`/`Write`: whether the
    /// message has immediate data or invalidates shows on its last packet.
    pub fn of_request(op: Opcode) -> Option<(MsgKind, Position)> {
        let info = op.info().ok()?;
        if info.transport != Transport::Rc {
            return None;
        }
        let kind = match info.operation {
            Operation::Send if info.has(ExtHeader::ImmDt) => MsgKind::SendImm,
            Operation::Send if info.has(ExtHeader::Ieth) => MsgKind::SendInv,
            Operation::Send => MsgKind::Send,
            Operation::RdmaWrite if info.has(ExtHeader::ImmDt) => MsgKind::WriteImm,
            Operation::RdmaWrite => MsgKind::Write,
            Operation::RdmaReadRequest => MsgKind::Read,
            Operation::CompareSwap => MsgKind::CmpSwap,
            Operation::FetchAdd => MsgKind::FetchAdd,
            Operation::AtomicWrite => MsgKind::AtomicWrite,
            Operation::Flush => MsgKind::Flush,
            _ => return None,
        };
        Some((kind, info.position))
    }
}

/// How a work request completed (the subset of `ib_wc_status` RC
/// reliability produces).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Status {
    /// Done (`IB_WC_SUCCESS`).
    Success,
    /// No response after `retry_cnt` retransmissions
    /// (`IB_WC_RETRY_EXC_ERR`).
    RetryExceeded,
    /// Still RNR NAKed after `rnr_retry` retries
    /// (`IB_WC_RNR_RETRY_EXC_ERR`).
    RnrRetryExceeded,
    /// NAK remote access error (`IB_WC_REM_ACCESS_ERR`).
    RemoteAccess,
    /// NAK invalid request (`IB_WC_REM_INV_REQ_ERR`).
    RemoteInvalidRequest,
    /// NAK remote operational error, or a NAK code we do not know
    /// (`IB_WC_REM_OP_ERR`).
    RemoteOperational,
    /// The local side could not place a response (`IB_WC_LOC_PROT_ERR`);
    /// reported by the caller through
    /// [`requester::Requester::fail_wqe`].
    LocalProtection,
    /// The work request itself is invalid (opcode, flags, SGE count,
    /// length; `IB_WC_LOC_QP_OP_ERR`); reported by the caller through
    /// [`requester::Requester::fail_wqe`].
    LocalQpOperation,
    /// Not executed because the QP went to the error state first
    /// (`IB_WC_WR_FLUSH_ERR`).
    Flushed,
}

impl Status {
    /// The completion status a fatal NAK code reports (as rxe).
    pub const fn of_nak(code: NakCode) -> Status {
        match code {
            NakCode::InvalidRequest => Status::RemoteInvalidRequest,
            NakCode::RemoteAccessError => Status::RemoteAccess,
            NakCode::PsnSequenceError
            | NakCode::RemoteOperationalError
            | NakCode::InvalidRdRequest
            | NakCode::Reserved(_) => Status::RemoteOperational,
        }
    }
}

/// `rnr_retry` value meaning "retry forever" (IBTA 9.7.5.2.8).
pub const RNR_RETRY_INFINITE: u8 = 7;

/// Largest send window (PSNs outstanding) a requester accepts; larger
/// values are clamped. Far below 2^23 so that a window plus one large
/// READ stays comparable in 24-bit PSN arithmetic.
pub const MAX_WINDOW: u32 = 1 << 16;

/// Largest message (IBTA: 2^31 bytes).
pub const MAX_MSG_LEN: u32 = 1 << 31;

/// The local ACK timeout for a `timeout` QP attribute: 4.096 us * 2^code
/// (IBTA 9.7.6.1.3), `None` for code 0 (wait forever). Only the low five
/// bits count.
pub const fn local_ack_timeout_ns(code: u8) -> Option<u64> {
    let code = code & 0x1f;
    if code == 0 {
        None
    } else {
        Some(4096u64 << code)
    }
}

/// How long an RNR NAK's timer code (or `min_rnr_timer`) asks the
/// requester to wait, in nanoseconds (IBTA table 45, via
/// [`aeth::rnr_timer_micros`]).
pub const fn rnr_timeout_ns(code: u8) -> u64 {
    aeth::rnr_timer_micros(code) as u64 * 1000
}

/// Packets a message of `len` bytes takes at `mtu` bytes a packet: at
/// least one (zero-length messages are one empty packet). READs use the
/// same count for their responses; atomics are one packet.
pub const fn packets(kind: MsgKind, len: u32, mtu: u32) -> u32 {
    if kind.is_eight_bytes() || matches!(kind, MsgKind::Flush) || len == 0 || mtu == 0 {
        1
    } else {
        (len - 1) / mtu + 1
    }
}

/// The position of packet `k` of `n`.
pub(crate) const fn position(k: u32, n: u32) -> Position {
    let first = k == 0;
    let last = k.saturating_add(1) >= n;
    match (first, last) {
        (true, true) => Position::Only,
        (true, false) => Position::First,
        (false, true) => Position::Last,
        (false, false) => Position::Middle,
    }
}

/// Payload bytes of packet `k` of a `len`-byte message, and its offset.
pub(crate) const fn chunk(len: u32, mtu: u32, k: u32) -> (u32, u32) {
    let offset = k.saturating_mul(mtu);
    let rest = len.saturating_sub(offset);
    (offset, if rest < mtu { rest } else { mtu })
}

/// The QP attributes RC reliability uses (both directions; a requester
/// ignores the responder's fields and vice versa).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Config {
    /// Path MTU: payload bytes per packet.
    pub mtu: IbMtu,
    /// Retransmissions after a timeout or NAK before
    /// [`Status::RetryExceeded`] (verbs: 0..=7).
    pub retry_cnt: u8,
    /// Retries after RNR NAKs before [`Status::RnrRetryExceeded`];
    /// [`RNR_RETRY_INFINITE`] (7) retries forever.
    pub rnr_retry: u8,
    /// Local ACK timeout code (see [`local_ack_timeout_ns`]); 0 never
    /// times out.
    pub timeout: u8,
    /// Responder: the RNR timer code it puts in RNR NAKs.
    pub min_rnr_timer: u8,
    /// Requester: READs and atomics outstanding at once (must not exceed
    /// the peer's `max_dest_rd_atomic`).
    pub max_rd_atomic: u8,
    /// Responder: READs and atomics it holds resources for.
    pub max_dest_rd_atomic: u8,
    /// ACK coalescing: the requester sets AckReq at least every this many
    /// packets (and at message ends), the responder ACKs at least
    /// every this many packets. 0 counts as 1.
    pub ack_every: u32,
    /// Requester: PSNs outstanding beyond the oldest unacknowledged one
    /// (rxe: 128). Clamped to `1..=MAX_WINDOW`.
    pub window: u32,
}

impl Config {
    /// Defaults close to rxe's: MTU 1024, retry_cnt 7, rnr_retry 7,
    /// timeout 14 (67 ms), min_rnr_timer 12 (640 us), 16 READ/atomics
    /// each way, AckReq every 64 packets, window 128.
    pub const DEFAULT: Config = Config {
        mtu: IbMtu::Mtu1024,
        retry_cnt: 7,
        rnr_retry: RNR_RETRY_INFINITE,
        timeout: 14,
        min_rnr_timer: 12,
        max_rd_atomic: 16,
        max_dest_rd_atomic: 16,
        ack_every: 64,
        window: 128,
    };

    pub(crate) fn window_clamped(&self) -> u32 {
        self.window.clamp(1, MAX_WINDOW)
    }

    pub(crate) fn ack_every_clamped(&self) -> u32 {
        self.ack_every.max(1)
    }
}

impl Default for Config {
    fn default() -> Self {
        Self::DEFAULT
    }
}

/// The largest power of two not above `n` (0 for 0), capped at 2^31: the
/// usable part of caller-provided ring storage, so that free-running u32
/// counters map onto slots with a mask across their wrap-around.
pub(crate) const fn ring_capacity(n: usize) -> u32 {
    if n == 0 {
        return 0;
    }
    let n = if n > (1 << 31) { 1 << 31 } else { n };
    1 << (usize::BITS - 1 - n.leading_zeros())
}

/// `psn` lies in `[from, to)` (24-bit serial arithmetic).
pub(crate) fn psn_in(psn: Psn, from: Psn, to: Psn) -> bool {
    !psn.before(from) && psn.before(to)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn timer_tables() {
        assert_eq!(local_ack_timeout_ns(0), None);
        assert_eq!(local_ack_timeout_ns(1), Some(8192));
        assert_eq!(local_ack_timeout_ns(14), Some(67_108_864));
        assert_eq!(local_ack_timeout_ns(31), Some(4096u64 << 31));
        assert_eq!(local_ack_timeout_ns(32 + 1), Some(8192));
        assert_eq!(rnr_timeout_ns(0), 655_360_000);
        assert_eq!(rnr_timeout_ns(1), 10_000);
        assert_eq!(rnr_timeout_ns(31), 491_520_000);
    }

    #[test]
    fn packet_counts_and_chunks() {
        assert_eq!(packets(MsgKind::Send, 0, 256), 1);
        assert_eq!(packets(MsgKind::Send, 1, 256), 1);
        assert_eq!(packets(MsgKind::Send, 256, 256), 1);
        assert_eq!(packets(MsgKind::Write, 257, 256), 2);
        assert_eq!(packets(MsgKind::Read, 1 << 31, 4096), 1 << 19);
        assert_eq!(packets(MsgKind::FetchAdd, 8, 256), 1);
        assert_eq!(packets(MsgKind::AtomicWrite, 8, 4), 1);
        assert_eq!(chunk(600, 256, 0), (0, 256));
        assert_eq!(chunk(600, 256, 2), (512, 88));
        assert_eq!(chunk(0, 256, 0), (0, 0));
        assert_eq!(position(0, 1), Position::Only);
        assert_eq!(position(0, 3), Position::First);
        assert_eq!(position(1, 3), Position::Middle);
        assert_eq!(position(2, 3), Position::Last);
    }

    #[test]
    fn opcodes_round_trip_through_the_table() {
        let kinds = [
            MsgKind::Send,
            MsgKind::SendImm,
            MsgKind::SendInv,
            MsgKind::Write,
            MsgKind::WriteImm,
        ];
        for kind in kinds {
            for pos in [
                Position::First,
                Position::Middle,
                Position::Last,
                Position::Only,
            ] {
                let op = kind.opcode(pos);
                let (k, p) = MsgKind::of_request(op).unwrap();
                assert_eq!(p, pos, "{kind:?} {pos:?}");
                let want = if pos.ends_message() {
                    kind
                } else if kind.class() == Class::Send {
                    MsgKind::Send
                } else {
                    MsgKind::Write
                };
                assert_eq!(k, want, "{kind:?} {pos:?}");
                let info = op.info().unwrap();
                assert_eq!(
                    info.has(ExtHeader::Reth),
                    kind.class() == Class::Write && pos.starts_message()
                );
            }
        }
        for kind in [
            MsgKind::Read,
            MsgKind::CmpSwap,
            MsgKind::FetchAdd,
            MsgKind::AtomicWrite,
            MsgKind::Flush,
        ] {
            assert_eq!(
                MsgKind::of_request(kind.opcode(Position::Only)),
                Some((kind, Position::Only))
            );
        }
        assert_eq!(packets(MsgKind::Flush, 1 << 20, 1024), 1);
        assert_eq!(MsgKind::of_request(Opcode::RC_ACKNOWLEDGE), None);
        assert_eq!(MsgKind::of_request(Opcode::UC_SEND_ONLY), None);
    }

    #[test]
    fn ring_capacity_is_a_power_of_two() {
        assert_eq!(ring_capacity(0), 0);
        assert_eq!(ring_capacity(1), 1);
        assert_eq!(ring_capacity(3), 2);
        assert_eq!(ring_capacity(64), 64);
        assert_eq!(ring_capacity(100), 64);
    }
}
