// SPDX-License-Identifier: GPL-2.0

//! Per-port counters, updated lock-free on the packet paths and reported
//! as the port's hardware counters (`rdma statistic show link rxud0/1`):
//! what the receive path dropped and why, and the RC events that cost
//! packets (retransmissions, RNR NAKs, duplicates).

use crate::ib::CounterDesc;
use core::sync::atomic::{AtomicU64, Ordering};
use kernel::c_str;

/// What rxud counts. The discriminant is the position in
/// [`RX_COUNTER_DESCS`].
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) enum RxCounter {
    /// Datagrams that reached the port's UDP socket.
    Packets = 0,
    /// Dropped: too short, bad transport version, unknown opcode, or
    /// lengths that contradict the opcode.
    DropMalformed = 1,
    /// Dropped: well formed, but for no QP of this port (or a QP of
    /// another type, or not in a receiving state).
    DropNoQp = 2,
    /// Dropped: the ICRC does not match.
    DropBadIcrc = 3,
    /// Dropped: an opcode this port does not handle yet.
    DropUnsupported = 4,
    /// Dropped: a datagram whose Q_Key is not the QP's.
    DropQkey = 5,
    /// Dropped: a datagram that found no receive WQE posted.
    DropNoRecv = 6,
    /// Dropped: the completion queue was full.
    DropCqFull = 7,
    /// Not delivered: an RC packet out of sequence, a duplicate or a
    /// stale response (the protocol answers it; nothing is placed).
    DropSequence = 8,
    /// RC request packets sent again (timeouts, NAKs, implied NAKs).
    RcRetransmits = 9,
    /// RC retransmit timer expiries that started a retransmission.
    RcTimeouts = 10,
    /// RNR NAKs the RC responder sent (a SEND found no receive WQE).
    RcRnrNaks = 11,
    /// Duplicate RC requests the responder answered again.
    RcDuplicates = 12,
    /// Packets built and handed to IP that it refused at once (no route,
    /// a full device queue), or that could not be built (no memory): lost
    /// on the sending side, recovered by RC's retransmission.
    TxErrors = 13,
    /// Times an RC/UC sender stopped because its packets below IP used
    /// its whole budget (see `driver/flight.rs`).
    TxBudgetWaits = 14,
    /// Dropped: an XUD packet for an earlier incarnation of the QP (rule
    /// 1), or of a stream other than the one held (rule 3).
    XudStale = 15,
    /// Dropped: an XUD packet from a new source with the peer table full.
    XudPeerLimit = 16,
    /// XUD data packets sent again (timeouts, holes, RNR).
    XudRetransmits = 17,
    /// XUD retransmit timer expiries that sent a probe.
    XudTimeouts = 18,
    /// RNR NAKs XUD sent (a SEND or WRITE_IMM found no receive WQE).
    XudRnrNaks = 19,
    /// Duplicate XUD data packets answered again.
    XudDuplicates = 20,
    /// Dropped: taking the packet needed memory (atomic allocation) and
    /// there was none; the sender's retransmission tries again.
    DropNoMemory = 21,
    /// XUD peer entries made (first contact with a source or destination).
    XudPeersAdded = 22,
    /// XUD peer entries freed after their quiet period (the reclaim
    /// scan); entries of a destroyed or reset QP are not counted.
    XudPeersReclaimed = 23,
    /// XUD streams parked: at rest, their message tables freed.
    XudStreamsParked = 24,
    /// Passes over an XUD QP's destinations that held new packets back at
    /// the QP's cap on packets in flight (`xud::MAX_QP_IN_FLIGHT`).
    XudQpCapWaits = 25,
    /// RoCE packets handed to IP, of every QP type (answers included).
    TxPackets = 26,
    /// Their bytes, BTH to ICRC (the UDP payload).
    TxBytes = 27,
    /// Bytes of the datagrams that reached the port's UDP socket (UDP
    /// payload, as `rx_packets` counts them; dropped ones included).
    RxBytes = 28,
    /// Doorbells: times a post made a QP's sender run (a user post_send
    /// that found it idle, or a kernel consumer's post list).
    Doorbells = 29,
    /// RC/UC ACKs the responder sent (coalesced: one per several packets).
    RcAcksSent = 30,
    /// RC NAKs the responder sent (sequence, access, invalid request,
    /// RNR; the RNR ones are also `rc_rnr_naks_sent`).
    RcNaksSent = 31,
    /// RC ACKs the requester took (not duplicates or stale ones).
    RcAcksReceived = 32,
    /// RC NAKs the requester took (RNR included).
    RcNaksReceived = 33,
    /// XUD ACKs sent (each acknowledges a window: base PSN and bitmap).
    XudAcksSent = 34,
    /// XUD NAKs sent (RNR, access, invalid request, stale incarnation).
    XudNaksSent = 35,
    /// XUD ACKs taken by a sending stream.
    XudAcksReceived = 36,
    /// XUD NAKs taken by a sending stream.
    XudNaksReceived = 37,
    /// Trains: runs of a QP's packets handed to IP as one skb (see
    /// `proto::wire::train`).
    TxTrains = 38,
    /// The packets that went in trains (`tx_train_packets / tx_trains`
    /// is the average train; the rest of `tx_packets` went alone).
    TxTrainPackets = 39,
    /// Received trains: runs of one flow's datagrams that GRO linked
    /// (`rust/ffi/gro.c`) and the port took as one, two or more.
    RxTrains = 40,
    /// The datagrams that came in trains (`rx_train_packets / rx_trains`
    /// is the average; the rest of `rx_packets` came alone).
    RxTrainPackets = 41,
    /// Nanoseconds in the port's receive path, datagram by datagram
    /// (module parameter `timing`; 0 while it is off): the checks, the
    /// ICRC, the protocol, the placement, the completion and the answers
    /// built and sent from there.
    RxNs = 42,
    /// Of those, nanoseconds in the ICRC check.
    RxIcrcNs = 43,
    /// Nanoseconds a QP's sender spent building packets (the skb, the
    /// copy from the MR, the ICRC) when its queue was run (`timing`).
    TxBuildNs = 44,
    /// Nanoseconds from handing a packet or train to IP until IP gave
    /// back (routing, netfilter, the qdisc, segmentation of trains, the
    /// driver; `timing`).
    TxIpNs = 45,
    /// Datagrams of a received train that found their QP in the datagram
    /// before them: the QP lookups a train saved (one per run of
    /// datagrams to one QP).
    RxQpReused = 46,
    /// Runs of a received train's datagrams to one QP, whose CQs were
    /// held meanwhile (`CqCore::hold`), that ended by publishing held
    /// completions to the CQs' owner...
    RxCqBatches = 47,
    /// ...and the completions they published (those of other producers
    /// that wrote into a held CQ meanwhile included): `rx_cq_batch_entries
    /// / rx_cq_batches` is the average batch.
    RxCqBatchEntries = 48,
    /// Datagrams of a received train whose first MR lookup took the MR
    /// a datagram before them found (`MrMemo`): the lookups trains saved
    /// (one per run of datagrams into one MR).
    RxMrReused = 49,
    /// Of `rx_ns`, nanoseconds in the transports' receive (RC/UC, UD,
    /// XUD: the protocol under the QP's lock, the placement, the answers
    /// built; `timing`)...
    RxTransportNs = 50,
    /// ...and of those, nanoseconds placing payload: the copy from the
    /// skb into memory regions (into a receive buffer, with the walk of
    /// its SGEs and their checks; `timing`).
    RxPlaceNs = 51,
    /// RC requests after which the QP's pass (responses, the requester's
    /// work, the timer) was skipped, as they left it nothing to do.
    RcPassesSkipped = 52,
    /// XUD challenges sent: data packets of a stream with no window here
    /// and no fresh cookie, answered with a cookie (xud.rst, "Stream
    /// cookies")...
    XudChallengesSent = 53,
    /// ...and those not sent, beyond the QP's bound on challenges per
    /// millisecond (the packet is dropped unanswered).
    XudChallengesLimited = 54,
    /// Dropped: an XUD data packet without a cookie the QP takes for its
    /// stream (none, forged, too old to open a window, older than its
    /// window's); challenged ones included.
    XudDropCookie = 55,
    /// XUD challenges a sending stream took (a newer cookie: what it had
    /// in flight goes again with it).
    XudChallengesReceived = 56,
    /// XUD claims of a receive refused (RNR NAKed) for a message the
    /// packet does not finish, because its source, or the QP's sources
    /// together, held their share of receives with unfinished messages
    /// (xud.rst, "Receive resources").
    XudClaimsRefused = 57,
    /// XUD receives taken back from sources that never finished a
    /// message and went quiet (`xud::UNPROVEN_HOLD_NS`): they complete
    /// `IBV_WC_REM_ABORT_ERR`.
    XudClaimsDropped = 58,
    /// XUD posts refused (`IBV_WC_LOC_QP_OP_ERR` at once) beyond the
    /// share of the send queue a destination that does not answer may
    /// hold (xud.rst, "Send resources").
    XudStalledRefused = 59,
    /// Received RC/UC requests and XUD data packets that arrived marked
    /// Congestion Experienced (ECN): a queue on the path was filling.
    EcnCeReceived = 60,
    /// CNPs sent for them, to their senders (at most one per flow per
    /// `congestion::CNP_INTERVAL_NS`; with `cc` on).
    CnpsSent = 61,
    /// CNPs received (well-formed, for a QP of this port, from its peer).
    CnpsReceived = 62,
    /// Congestion windows cut for a CNP (the first of a round cuts).
    CcCnpCuts = 63,
    /// Dropped: a CNP for a QP that has no flow to its sender (another
    /// address than an RC QP's peer, an XUD QP that sends nothing there,
    /// a UD QP): no flow of this port is slowed by it.
    DropCnpStray = 64,
    /// REG_MRs of a kernel consumer's RC QP run ahead of the unanswered
    /// requests before them (`local::execute_ahead`: unsignaled, of a
    /// free MR); the others waited for those requests' answers.
    RcRegMrAhead = 65,
}

const RX_COUNTERS: usize = 66;

/// Counter names, as `rdma statistic` shows them.
pub(crate) static RX_COUNTER_DESCS: [CounterDesc; RX_COUNTERS] = [
    CounterDesc::new(c_str!("rx_packets")),
    CounterDesc::new(c_str!("rx_drop_malformed")),
    CounterDesc::new(c_str!("rx_drop_no_qp")),
    CounterDesc::new(c_str!("rx_drop_bad_icrc")),
    CounterDesc::new(c_str!("rx_drop_unsupported")),
    CounterDesc::new(c_str!("rx_drop_qkey")),
    CounterDesc::new(c_str!("rx_drop_no_recv")),
    CounterDesc::new(c_str!("rx_drop_cq_full")),
    CounterDesc::new(c_str!("rx_drop_sequence")),
    CounterDesc::new(c_str!("rc_retransmits")),
    CounterDesc::new(c_str!("rc_timeouts")),
    CounterDesc::new(c_str!("rc_rnr_naks_sent")),
    CounterDesc::new(c_str!("rc_duplicates")),
    CounterDesc::new(c_str!("tx_errors")),
    CounterDesc::new(c_str!("tx_budget_waits")),
    CounterDesc::new(c_str!("rx_drop_xud_stale")),
    CounterDesc::new(c_str!("rx_drop_xud_peer_limit")),
    CounterDesc::new(c_str!("xud_retransmits")),
    CounterDesc::new(c_str!("xud_timeouts")),
    CounterDesc::new(c_str!("xud_rnr_naks_sent")),
    CounterDesc::new(c_str!("xud_duplicates")),
    CounterDesc::new(c_str!("rx_drop_no_memory")),
    CounterDesc::new(c_str!("xud_peers_added")),
    CounterDesc::new(c_str!("xud_peers_reclaimed")),
    CounterDesc::new(c_str!("xud_streams_parked")),
    CounterDesc::new(c_str!("xud_qp_cap_waits")),
    CounterDesc::new(c_str!("tx_packets")),
    CounterDesc::new(c_str!("tx_bytes")),
    CounterDesc::new(c_str!("rx_bytes")),
    CounterDesc::new(c_str!("doorbells")),
    CounterDesc::new(c_str!("rc_acks_sent")),
    CounterDesc::new(c_str!("rc_naks_sent")),
    CounterDesc::new(c_str!("rc_acks_received")),
    CounterDesc::new(c_str!("rc_naks_received")),
    CounterDesc::new(c_str!("xud_acks_sent")),
    CounterDesc::new(c_str!("xud_naks_sent")),
    CounterDesc::new(c_str!("xud_acks_received")),
    CounterDesc::new(c_str!("xud_naks_received")),
    CounterDesc::new(c_str!("tx_trains")),
    CounterDesc::new(c_str!("tx_train_packets")),
    CounterDesc::new(c_str!("rx_trains")),
    CounterDesc::new(c_str!("rx_train_packets")),
    CounterDesc::new(c_str!("rx_ns")),
    CounterDesc::new(c_str!("rx_icrc_ns")),
    CounterDesc::new(c_str!("tx_build_ns")),
    CounterDesc::new(c_str!("tx_ip_ns")),
    CounterDesc::new(c_str!("rx_qp_reused")),
    CounterDesc::new(c_str!("rx_cq_batches")),
    CounterDesc::new(c_str!("rx_cq_batch_entries")),
    CounterDesc::new(c_str!("rx_mr_reused")),
    CounterDesc::new(c_str!("rx_transport_ns")),
    CounterDesc::new(c_str!("rx_place_ns")),
    CounterDesc::new(c_str!("rc_passes_skipped")),
    CounterDesc::new(c_str!("xud_challenges_sent")),
    CounterDesc::new(c_str!("xud_challenges_limited")),
    CounterDesc::new(c_str!("rx_drop_xud_cookie")),
    CounterDesc::new(c_str!("xud_challenges_received")),
    CounterDesc::new(c_str!("xud_claims_refused")),
    CounterDesc::new(c_str!("xud_claims_dropped")),
    CounterDesc::new(c_str!("xud_stalled_refused")),
    CounterDesc::new(c_str!("ecn_ce_received")),
    CounterDesc::new(c_str!("cnp_sent")),
    CounterDesc::new(c_str!("cnp_received")),
    CounterDesc::new(c_str!("cc_cnp_cuts")),
    CounterDesc::new(c_str!("rx_drop_cnp_stray")),
    CounterDesc::new(c_str!("rc_reg_mr_ahead")),
];

/// The receive counters of one port.
pub(crate) struct RxCounters([AtomicU64; RX_COUNTERS]);

impl RxCounters {
    pub(crate) const fn new() -> Self {
        Self([const { AtomicU64::new(0) }; RX_COUNTERS])
    }

    /// Counts `n` more of `which`. Any context.
    pub(crate) fn add(&self, which: RxCounter, n: u64) {
        if let Some(c) = self.0.get(which as usize) {
            c.fetch_add(n, Ordering::Relaxed);
        }
    }

    /// Times what runs until the result is dropped into `which`, when the
    /// module parameter `timing` is on (`None` otherwise). Any context.
    pub(crate) fn span(&self, which: RxCounter) -> Option<Span<'_>> {
        crate::kext::timer::timing_enabled().then(|| Span {
            counters: self,
            which,
            start: crate::kext::timer::now_ns(),
        })
    }

    /// Copies the counters into `out`, in [`RX_COUNTER_DESCS`] order.
    pub(crate) fn read(&self, out: &mut [u64]) {
        for (o, c) in out.iter_mut().zip(self.0.iter()) {
            *o = c.load(Ordering::Relaxed);
        }
    }
}

/// A step being timed (see [`RxCounters::span`]): its nanoseconds are
/// added to its counter when it is dropped.
pub(crate) struct Span<'a> {
    counters: &'a RxCounters,
    which: RxCounter,
    start: u64,
}

impl Drop for Span<'_> {
    fn drop(&mut self) {
        let ns = crate::kext::timer::now_ns().saturating_sub(self.start);
        self.counters.add(self.which, ns);
    }
}
