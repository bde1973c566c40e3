// SPDX-License-Identifier: GPL-2.0

//! XUD reliability (Documentation/xud.rst) as two sans-IO state machines,
//! one per direction of a peer: [`sender::SendStream`] (what one QP sends
//! to one destination: PSNs, messages, ACKs, selective retransmission,
//! completions) and [`receiver::RecvStream`] (what one QP receives from
//! one source: the two-phase window, messages in progress, when to ACK).
//!
//! As in [`super::rc`], nothing here allocates, locks, reads a clock or
//! touches a packet: every call that needs time takes `now` (monotonic
//! nanoseconds), and the kernel builds and parses the bytes with
//! [`super::wire`]. The peer table, its locks and the reclaim timer are
//! the driver's; the decisions they need (is a held stream quiet, may a
//! sender's state go) are made here, so the host model tests in
//! `model.rs` check the same rules the kernel runs.
//!
//! Two properties carry the design, and the model checks both over lossy,
//! duplicating, reordering and delaying channels:
//!
//! - *exactly once*: a receiver commits a PSN only after placing it
//!   ([`receiver::RecvStream::commit`]), each PSN once, so no payload is
//!   placed or counted twice; a new receiver window starts at the
//!   sender's `oldest_psn`, never at the first PSN seen (rule 2);
//! - *no silent loss*: a sender completes a message with success only when
//!   every one of its PSNs is acknowledged, and a receiver acknowledges
//!   only what it committed or what the sender itself gave up (rule 4).

pub mod cookie;
pub mod receiver;
pub mod sender;

#[cfg(test)]
mod model;

/// The window: how far past its oldest unacknowledged PSN a stream may
/// send, and the span of PSNs a receiver takes (the rest it drops). Twice
/// [`PIPE`], so that a stream keeps sending while a hole is recovered
/// (xud.rst, "Loss on a faster link"); an ACK describes its base and the
/// 127 PSNs after it ([`super::wire::xack::SACK_BITS`]).
pub const WINDOW: u32 = 256;

/// Packets a stream may have out that no answer has shown placed: with
/// nothing lost, the packets in flight. Packets placed beyond a hole
/// leave it (`sack` shows them), so new ones may go up to the window's
/// end while the hole is resent.
pub const PIPE: u32 = 128;

/// The congestion window a new stream starts at (then slow start to
/// [`PIPE`]): eight senders' first windows fit a switch's queue of 200 KB,
/// where full pipes made incast's first round drop a tenth of the run.
pub const INITIAL_WINDOW: u32 = 16;

/// The smallest congestion window of a stream (`congestion::Window`, at
/// most [`PIPE`]): two packets, so that one answer never waits for a
/// packet the window holds back.
pub const MIN_WINDOW: u32 = 2;

/// Losses a stream takes for a lossy link's noise rather than congestion:
/// up to 5% of a round's packets (`congestion::Window::with_loss_tolerance`,
/// per mille). Its model keeps nine tenths of its goodput at 1% and 2%
/// random loss; a queue that overflows under many senders drops more.
pub const LOSS_TOLERANCE: u32 = 50;

/// Bytes of an XUD data packet besides its payload, IP header to ICRC:
/// RC's allowance ([`super::mtu::ROCE_MAX_HDR_LEN`]: IPv6, UDP, BTH,
/// RETH, ICRC) and the DETH, the XETH, the XCK and an ImmDt.
pub const DATA_HEADERS: u32 = super::mtu::ROCE_MAX_HDR_LEN
    + (super::wire::deth::HEADER_LEN
        + super::wire::xeth::HEADER_LEN
        + super::wire::xck::HEADER_LEN
        + super::wire::immdt::HEADER_LEN) as u32;

/// Most payload bytes of an XUD packet: RC's largest MTU (a packet's
/// buffer stays as small as RC's).
pub const MAX_PAYLOAD: u32 = 4096;

/// Least payload bytes of an XUD packet: IB's smallest MTU.
pub const MIN_PAYLOAD: u32 = 256;

/// Payload bytes of each packet of a message but its last, on a link of
/// `link_mtu` bytes (IP header onwards): as many as fit beside
/// [`DATA_HEADERS`], rounded down to a multiple of 64, at most
/// [`MAX_PAYLOAD`]; `None` if not even [`MIN_PAYLOAD`] fit.
///
/// XUD is not held to IB's five MTUs as RC is: every packet carries its
/// offset and the message length, and a receiver places a packet of any
/// size that lies within its message (xud.rst, "Packet sizes"). On a
/// 1500-byte link a packet carries 1344 bytes where RC's carries 1024:
/// a quarter fewer packets for the same bytes, and per-packet work is
/// what a software transport pays for.
pub fn payload_per_packet(link_mtu: u32) -> Option<u32> {
    let room = link_mtu.checked_sub(DATA_HEADERS)? & !63;
    (room >= MIN_PAYLOAD).then_some(room.min(MAX_PAYLOAD))
}

/// Words of a [`super::window::PsnBitmap`] covering [`WINDOW`] PSNs.
pub const WINDOW_WORDS: usize = (WINDOW / 64) as usize;

/// Messages in flight per stream (`msg_lag` stays below this).
pub const MAX_MSGS: u32 = super::wire::xeth::MAX_MSG_LAG as u32;

/// Longest a sender keeps trying one message, from the first
/// transmission of its first packet (xud.rst, "Reclaim and limits").
pub const RETRY_SPAN_NS: u64 = 8_000_000_000;

/// Longest a packet may live in the network.
pub const LIFETIME_NS: u64 = 2_000_000_000;

/// A receiver's state for a source goes after this long without an
/// accepted packet: longer than any sender keeps a message, plus the
/// lifetime of its last copy.
pub const QUIET_NS: u64 = RETRY_SPAN_NS + LIFETIME_NS;

/// A sender's state for a destination goes after this long with nothing
/// in flight (by then the receiver has dropped its side).
pub const SENDER_IDLE_NS: u64 = QUIET_NS + LIFETIME_NS;

/// How long a destroyed XUD QP's number is held before another QP gets it
/// (rule 5): by then every peer has reclaimed its receiving state for the
/// old QP (`QUIET_NS`) and no packet of it is left in the network.
pub const QPN_HOLD_NS: u64 = QUIET_NS + LIFETIME_NS;

/// Packets in flight over all of a QP's streams (each stream has its
/// window of [`WINDOW`] besides): past it, new packets wait for ACKs to
/// free room, and the streams take turns (xud.rst, "Limits, per QP").
pub const MAX_QP_IN_FLIGHT: u32 = 1024;

/// Receives a source may hold for messages it has not finished (a
/// partial SEND or WRITE_IMM) while no message of its stream has
/// completed here: a forger sending first packets from many source QPNs
/// pins one receive each, not [`MAX_MSGS`] (xud.rst, "Receive
/// resources").
pub const CLAIMS_UNPROVEN: u32 = 1;

/// The same once the source has completed a message: enough for a
/// sender whose pipelined messages arrive while a hole is resent.
pub const CLAIMS_PROVEN: u32 = 4;

/// A source that has never completed a message and has sent nothing for
/// this long loses the receives its open messages hold (they complete
/// `REM_ABORT_ERR`, the messages fail): the lifetime of its last packet,
/// not [`QUIET_NS`].
pub const UNPROVEN_HOLD_NS: u64 = LIFETIME_NS;

/// Messages a sending stream holds while its destination has never
/// answered it: a destination that does not exist (or never answers)
/// holds this many of its QP's send WQEs in its stream, not
/// [`MAX_MSGS`]; the first answer opens the rest (xud.rst, "Send
/// resources").
pub const UNANSWERED_MSGS: u32 = 2;

/// Send WQEs (queued and in its stream) a destination may hold while it
/// is stalled ([`sender::SendStream::is_stalled`]: [`STALL_TIMEOUTS`]
/// retransmit timeouts in a row since its last answer): posts beyond them
/// fail at once, so that dead destinations leave the QP's send queue to
/// the live ones.
pub const STALLED_SHARE: u32 = 2;

/// Retransmit timeouts in a row without an answer that stall a
/// destination: four, about a second with the default `timeout` (67 +
/// 134 + 268 + 536 ms). A lost probe exchange on a lossy link (one
/// timeout, its probe answered) does not stall it, nor a peer on a host
/// too busy to answer for a few hundred milliseconds: with two (0.2 s) a
/// live peer of `make run`'s pair beside a soak VM was taken for dead and
/// its queue failed (session 23). A dead destination holds its share of
/// the send queue for that second before the stall.
pub const STALL_TIMEOUTS: u8 = 4;

/// Bytes of GRH at the start of a SEND's receive buffer, as UD.
pub const GRH_LEN: u32 = 40;

/// Largest XUD message: one that finishes well within
/// [`RETRY_SPAN_NS`].
pub const MAX_MSG_LEN: u32 = 1 << 24;

/// A hole in a stream is resent without waiting for the timer once PSNs
/// this far past it are acknowledged and it is still a hole a reorder
/// delay later (a sixty-fourth of the timeout, at least
/// [`REORDER_DELAY_MIN_NS`]): reordering beyond both is taken as loss.
pub const REORDER: u32 = 3;

/// A hole this many PSNs behind the highest acknowledged one (an ACK
/// interval: the sender asks for an ACK every 16 packets by default) is
/// resent at once, without the reorder delay.
pub const REORDER_DEEP: u32 = 16;

/// The shortest reorder delay.
pub const REORDER_DELAY_MIN_NS: u64 = 1_000_000;

/// NAK syndrome values XUD adds (`AckSyndrome::Nak` codes of its own
/// space, xud.rst "ACK and NAK").
pub const NAK_STALE_INCARNATION: u8 = 8;

/// The operation of a message.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Op {
    Send,
    SendImm,
    Write,
    WriteImm,
}

impl Op {
    /// Whether the message consumes a receive work request.
    pub const fn claims_receive(self) -> bool {
        matches!(self, Op::Send | Op::SendImm | Op::WriteImm)
    }

    /// Whether its payload goes into a receive buffer (after a GRH).
    pub const fn is_send(self) -> bool {
        matches!(self, Op::Send | Op::SendImm)
    }
}

/// Why a receiver refuses a data packet it has otherwise accepted: the
/// NAK it answers with.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Refusal {
    /// No receive work request (RNR NAK).
    ReceiverNotReady,
    /// rkey, PD, access or bounds (NAK remote access error).
    RemoteAccess,
    /// Length or `dma_len` wrong (NAK invalid request).
    InvalidRequest,
}

/// How a send work request completed.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum SendStatus {
    /// Every PSN acknowledged (`IB_WC_SUCCESS`).
    Success,
    /// Not acknowledged within `retry_cnt` or [`RETRY_SPAN_NS`]; may have
    /// been delivered (`IB_WC_RETRY_EXC_ERR`).
    RetryExceeded,
    /// Still RNR NAKed after `rnr_retry` (`IB_WC_RNR_RETRY_EXC_ERR`).
    RnrRetryExceeded,
    /// NAK remote access error (`IB_WC_REM_ACCESS_ERR`).
    RemoteAccess,
    /// NAK invalid request (`IB_WC_REM_INV_REQ_ERR`).
    RemoteInvalidRequest,
    /// The local memory of the work request failed (`IB_WC_LOC_PROT_ERR`).
    LocalProtection,
    /// The work request cannot be carried out here: its address vector
    /// is gone or unusable (`IB_WC_LOC_QP_OP_ERR`).
    LocalQpOperation,
}

/// How a receive claimed by a message completed.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum RecvStatus {
    /// The whole message placed (`IB_WC_SUCCESS`).
    Success,
    /// A SEND longer than the receive (`IB_WC_LOC_LEN_ERR`).
    LocalLength,
    /// The sender gave the message up, or a WRITE_IMM was refused
    /// part-way (`IB_WC_REM_ABORT_ERR`).
    RemoteAbort,
}

/// `a` is before `b` in 32-bit serial arithmetic (message numbers).
pub(crate) const fn seq_before(a: u32, b: u32) -> bool {
    (a.wrapping_sub(b) as i32) < 0
}

#[cfg(test)]
mod tests {
    use super::super::mtu::IbMtu;
    use super::*;

    #[test]
    fn a_packet_fills_the_link_in_steps_of_64_bytes() {
        // Ethernet's 1500: 1500 - 124 = 1376, down to 1344 (RC: 1024).
        assert_eq!(DATA_HEADERS, 124);
        assert_eq!(payload_per_packet(1500), Some(1344));
        assert_eq!(payload_per_packet(9000), Some(MAX_PAYLOAD));
        assert_eq!(payload_per_packet(4200), Some(4032));
        assert_eq!(payload_per_packet(DATA_HEADERS + 256), Some(256));
        assert_eq!(payload_per_packet(DATA_HEADERS + 255), None);
        assert_eq!(payload_per_packet(0), None);
    }

    #[test]
    fn a_packet_always_fits_and_never_carries_less_than_an_rc_packet() {
        for link in 0..=65535 {
            let Some(p) = payload_per_packet(link) else {
                assert!(link < DATA_HEADERS + MIN_PAYLOAD, "{link}");
                continue;
            };
            assert!(p + DATA_HEADERS <= link && p % 64 == 0 && p <= MAX_PAYLOAD);
            // What XUD carried before: the IB MTU that fits with its
            // 44 bytes of headers beyond RC's.
            if let Some(ib) = IbMtu::for_link_mtu(link.saturating_sub(44)) {
                assert!(p >= ib.bytes(), "{link}: {p} < {}", ib.bytes());
            }
        }
    }
}
