// SPDX-License-Identifier: GPL-2.0

//! The QP's one timer: when it is armed (the earliest of the busy peers'
//! stream deadlines and owed ACKs, and the next reclaim scan), what it
//! does when it fires (retransmissions and probes, owed ACKs), and the
//! reclaim scan, which frees quiet receiving states, idle sending states
//! and the peers with neither, and parks the streams at rest.
//!
//! Apart because the timer's work crosses both halves and every peer,
//! with constants of its own (the ACK delay, the reclaim period, how long
//! a stream rests before it is parked).

use super::answers::flush_owed_acks;
use super::peers::PeerKey;
use super::receiver::{drain_recv_done, Origin};
use super::sender::complete_sends;
use super::{now, XudState};
use crate::abi::{status, SendWqe};
use crate::driver::{counters::RxCounter, qp::QpCore};
use crate::proto::xud::{self, sender::TimerOutcome};
use kernel::{prelude::*, sync::Arc};

/// How long an owed ACK may wait (xud.rst: one jiffy; 1 ms here).
const ACK_DELAY_NS: u64 = 1_000_000;
/// The reclaim scan's period.
pub(super) const RECLAIM_PERIOD_NS: u64 = xud::QUIET_NS / 4;
/// How long a stream must have been at rest before the reclaim scan parks
/// it: long enough that a stream in use between two messages keeps its
/// table (parking and taking back cost an allocation each).
pub(super) const PARK_AFTER_NS: u64 = 1_000_000_000;

/// Arms the QP's timer for the earliest thing due.
pub(super) fn arm(qp: &Arc<QpCore>, st: &mut XudState, t: u64) {
    let mut due = st.next_reclaim;
    if st.starved {
        due = due.min(t + ACK_DELAY_NS);
    }
    for i in 0..st.busy.len() {
        let Some(p) = st.busy.peer(i, &st.peers) else {
            continue;
        };
        if let Some(d) = p.send_ref().and_then(|s| s.next_deadline()) {
            due = due.min(d);
        }
        if let Some(since) = p.recv_ref().and_then(|r| r.ack_owed()) {
            due = due.min(since + ACK_DELAY_NS);
        }
    }
    if st.armed != Some(due) {
        st.armed = Some(due);
        crate::kext::timer::Timer::arm(qp, due.saturating_sub(t));
    }
}

/// The timer's work: streams' deadlines, owed ACKs, the reclaim scan.
pub(super) fn on_timer(qp: &Arc<QpCore>, st: &mut XudState) {
    let t = now();
    let XudState {
        peers,
        wqes,
        msgs,
        busy,
        ..
    } = st;
    for i in 0..busy.len() {
        let Some((_, peer)) = busy.peer_mut(i, peers) else {
            continue;
        };
        let Some(s) = peer.send_active() else {
            continue;
        };
        if s.next_deadline().is_some_and(|d| d <= t) {
            match s.on_timer(msgs, t) {
                TimerOutcome::Probe => {
                    qp.port.counters.add(RxCounter::XudTimeouts, 1);
                    if s.is_stalled() {
                        // Stalled: what is queued beyond its small share
                        // fails now rather than hold the send queue.
                        let keep = xud::STALLED_SHARE.saturating_sub(s.in_use());
                        while peer.queue.len() > keep {
                            let Some(h) = peer.queue.pop(wqes) else {
                                break;
                            };
                            let w = SendWqe::decode(wqes.get(h));
                            qp.complete_send(&w, status::LOC_QP_OP_ERR, 0);
                            wqes.give(h);
                            qp.port.counters.add(RxCounter::XudStalledRefused, 1);
                        }
                    }
                }
                TimerOutcome::Resend => {}
                TimerOutcome::DestinationFailed => {
                    // What is still queued for it fails the same way.
                    while let Some(h) = peer.queue.pop(wqes) {
                        let w = SendWqe::decode(wqes.get(h));
                        qp.complete_send(&w, status::RETRY_EXC_ERR, 0);
                        wqes.give(h);
                    }
                }
                TimerOutcome::Idle => {}
            }
        }
        complete_sends(qp, peer, wqes, msgs);
    }
    flush_owed_acks(qp, st);
    if t >= st.next_reclaim {
        st.next_reclaim = t + RECLAIM_PERIOD_NS;
        reclaim(qp, st, t);
    }
}

/// Takes back the receives of sources that never finished a message and
/// have been quiet for [`xud::UNPROVEN_HOLD_NS`]. Frees what has been
/// quiet long enough: receive states after
/// [`xud::QUIET_NS`] (their open messages fail), send states idle for
/// [`xud::SENDER_IDLE_NS`], peers with neither. Parks the streams at
/// rest for [`PARK_AFTER_NS`].
fn reclaim(qp: &QpCore, st: &mut XudState, t: u64) {
    let XudState {
        peers,
        recvs,
        recv_peers,
        send_peers,
        busy,
        ..
    } = st;
    let mut gone = KVec::<PeerKey>::new();
    let mut parked = 0;
    for (key, peer) in peers.iter_mut() {
        if let Some(r) = peer.recv_active() {
            // The short hold of sources that never finished a message.
            let n = r.drop_unproven_claims(t);
            if n > 0 {
                qp.port
                    .counters
                    .add(RxCounter::XudClaimsDropped, u64::from(n));
                drain_recv_done(qp, r, recvs, &Origin::none(key.qpn));
            }
        }
        if peer.recv_is_quiet(t) {
            if let Some(r) = peer.recv_active() {
                r.abandon_all();
                drain_recv_done(qp, r, recvs, &Origin::none(key.qpn));
            }
            peer.recv = None;
            *recv_peers = recv_peers.saturating_sub(1);
        }
        if peer.send_is_idle(t) && peer.queue.is_empty() {
            peer.send = None;
            *send_peers = send_peers.saturating_sub(1);
        }
        if peer.send.is_none() && peer.recv.is_none() && peer.queue.is_empty() {
            let _ = gone.push(*key, GFP_ATOMIC);
        } else {
            parked += peer.park(t);
            // One the list could not take when it became busy.
            if peer.is_busy() {
                busy.add(*key, peer);
            }
        }
    }
    qp.port.counters.add(RxCounter::XudStreamsParked, parked);
    for key in gone.iter() {
        // Its entry in `busy`, if any, goes at the next prune.
        peers.remove(key);
    }
    qp.port
        .counters
        .add(RxCounter::XudPeersReclaimed, gone.len() as u64);
}
