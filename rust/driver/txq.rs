// SPDX-License-Identifier: GPL-2.0

//! A QP's transmit queue: packets built under the QP's lock, handed to IP
//! after it is dropped, oldest first (RC and XUD, see `rc.rs`, "Contexts
//! and locking").

use super::counters::RxCounter;
use super::qp::{HeldCqs, QpCore, Queued};
use crate::net::skb::TxSkb;
use crate::proto::wire::train;
use kernel::sync::Arc;

/// Packets one call of [`kick`] sends at most before leaving the rest to
/// the QP's timer (bounds the time spent in a softirq).
const KICK_BUDGET: usize = 256;

/// A QP's transport state as [`kick`] drives it.
pub(crate) trait Transmitter {
    /// Generates what is due into [`Self::txq`] (responses, packets,
    /// completions) and re-arms the QP's timer. Under the lock.
    fn generate(&mut self, qp: &Arc<QpCore>);
    fn txq(&mut self) -> &mut TxQueue;
    /// One context is handing this QP's queue to IP.
    fn sending(&mut self) -> &mut bool;
    /// [`kick`]'s budget ran out: the QP's timer, armed for now, does the
    /// rest (the state must forget the deadline it was armed for).
    fn defer(&mut self, qp: &Arc<QpCore>);
    /// Whether [`kick`] generates again after handing a batch to IP when
    /// the generation before did not fill the queue. Not needed where
    /// everything that makes work due kicks the QP itself (an answer, a
    /// doorbell, the timer, the budget's wake-up): that kick generates
    /// the work, finds this one sending, and leaves the packets to it.
    fn regenerate_after_send(&self) -> bool {
        true
    }
}

/// Generates what is due, then sends the QP's queue unless another
/// context is at it: packets are built under `lock` and handed to IP
/// after it is dropped, as many as the QP's budget for packets below IP
/// allows (the rest wait for the destructors' wake-up), one context at a
/// time so they leave in the order they were built. `held` holds the QP's
/// CQs: the completions written here reach their owner once it goes. Any
/// context but hard irq.
pub(crate) fn kick<S: Transmitter>(held: &HeldCqs, queued: &Queued<S>) {
    let qp = held.qp();
    let mut batch: [Option<TxSkb>; TXQ_LEN] = core::array::from_fn(|_| None);
    let mut sent = 0;
    // Whether this pass generates: the first always.
    let mut due = true;
    loop {
        let n = {
            let mut g = queued.lock(held);
            let Some(st) = g.as_deref_mut() else {
                return;
            };
            if sent >= KICK_BUDGET {
                // Enough for one context (a long READ answer can be
                // thousands of packets): the rest from the timer, soon.
                st.defer(qp);
                return;
            }
            if due {
                let _timed = qp.port.counters.span(RxCounter::TxBuildNs);
                st.generate(qp);
            }
            // A full queue may have left work undone.
            due = st.txq().is_full() || st.regenerate_after_send();
            if *st.sending() {
                return;
            }
            let txq = st.txq();
            let allowed = queued.flight().reserve(txq.len() as u32) as usize;
            if allowed < txq.len() {
                qp.port.counters.add(RxCounter::TxBudgetWaits, 1);
            }
            let mut n = 0;
            while n < allowed {
                let Some(skb) = txq.pop() else {
                    break;
                };
                batch[n] = Some(skb);
                n += 1;
            }
            if n == 0 {
                return;
            }
            *st.sending() = true;
            n
        };
        let mut i = 0;
        while i < n {
            let len = train_len(batch.get(i..n).unwrap_or(&[]));
            let Some((head, rest)) = batch.get_mut(i..i + len).and_then(|t| t.split_first_mut())
            else {
                break;
            };
            if let Some(skb) = head.take() {
                count_tx(qp, &skb);
                for m in rest.iter().flatten() {
                    count_tx(qp, m);
                }
                if len > 1 {
                    qp.port.counters.add(RxCounter::TxTrains, 1);
                    qp.port.counters.add(RxCounter::TxTrainPackets, len as u64);
                }
                // A packet IP refuses is a lost packet: the transport
                // recovers it.
                let timed = qp.port.counters.span(RxCounter::TxIpNs);
                if skb.send_owned(rest, qp).is_err() {
                    qp.port.counters.add(RxCounter::TxErrors, 1);
                }
                drop(timed);
            }
            i += len;
        }
        sent += n;
        if let Some(st) = queued.lock(held).as_deref_mut() {
            *st.sending() = false;
        }
    }
}

/// How many packets from the front of `q` go to IP as one train
/// (`proto::wire::train`): consecutive datagrams of one flow, numbered in
/// sequence, none longer than the first and only the last shorter; 1
/// where trains are off (the module parameter, or GSO off on the device).
fn train_len(q: &[Option<TxSkb>]) -> usize {
    let Some(head) = q.first().and_then(|s| s.as_ref()) else {
        return 1;
    };
    let Some(hd) = head.datagram().filter(|_| head.trains_allowed()) else {
        return 1;
    };
    let mut payload = head.payload_len();
    let mut n = 1;
    while let (Some(Some(prev)), Some(Some(next))) = (q.get(n - 1), q.get(n)) {
        let follows = match (prev.datagram(), next.datagram()) {
            (Some(p), Some(d)) => train::may_follow(hd, p, d),
            _ => false,
        };
        if !follows || !train::has_room(n, payload, next.payload_len()) {
            break;
        }
        payload += next.payload_len();
        n += 1;
    }
    n
}

/// Counts a packet about to be handed to IP (`tx_packets`, `tx_bytes`).
pub(crate) fn count_tx(qp: &QpCore, skb: &TxSkb) {
    qp.port.counters.add(RxCounter::TxPackets, 1);
    qp.port
        .counters
        .add(RxCounter::TxBytes, skb.payload_len() as u64);
}

/// Packets built and not yet handed to IP, per QP: a batch.
pub(crate) const TXQ_LEN: usize = 32;

/// Built packets waiting for IP, oldest first.
pub(crate) struct TxQueue {
    slots: [Option<TxSkb>; TXQ_LEN],
    head: usize,
    len: usize,
}

impl TxQueue {
    pub(crate) fn new() -> Self {
        Self {
            slots: core::array::from_fn(|_| None),
            head: 0,
            len: 0,
        }
    }

    pub(crate) fn is_full(&self) -> bool {
        self.len == TXQ_LEN
    }

    pub(crate) fn push(&mut self, skb: TxSkb) {
        if self.is_full() {
            return;
        }
        self.slots[(self.head + self.len) % TXQ_LEN] = Some(skb);
        self.len += 1;
    }

    pub(crate) fn len(&self) -> usize {
        self.len
    }

    pub(crate) fn pop(&mut self) -> Option<TxSkb> {
        if self.len == 0 {
            return None;
        }
        let skb = self.slots[self.head].take();
        self.head = (self.head + 1) % TXQ_LEN;
        self.len -= 1;
        skb
    }
}
