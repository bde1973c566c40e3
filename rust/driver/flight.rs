// SPDX-License-Identifier: GPL-2.0

//! The transmit budget: how many of an RC, UC or XUD QP's packets may sit below
//! IP at once (in a qdisc, a device ring, or, over a veth, the peer's
//! receive path), released by the packets' destructors.
//!
//! Without it a sender hands IP everything its window allows in one go,
//! and the queues below IP take the burst or drop it: a drop costs RC a
//! go-back-N pass over the whole window. With it, a sender that used its
//! budget stops (counted as `tx_budget_waits`) and is woken, through the
//! QP's BH work item, when its packets in flight fall to half the budget:
//! the sender is clocked by the device draining its queue. rxe 6.12 does
//! the same with 64 skbs per QP; the budget here is in bytes (64 KiB),
//! each packet charged one path MTU (bulk transfers are full-size
//! packets), so large and small MTUs queue about the same number of
//! bytes: 64 packets at 1024, 16 at 4096. A train (several packets
//! handed to IP as one skb, `net/skb.rs`) is charged as its packets and
//! given back whole when its first packet is freed.
//!
//! The counts are atomics: destructors run in any context but hard irq,
//! possibly under a qdisc's lock, where taking the QP's lock or sending
//! would deadlock; they only count and queue the wake-up.

use super::qp::QpCore;
use crate::kext::bh_work::BhWork;
use crate::net::skb::TxOwner;
use core::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use kernel::sync::Arc;

/// Bytes of a QP's packets that may be below IP at once.
pub(crate) const TX_BUDGET_BYTES: u32 = 64 * 1024;
/// Packets a QP may always have below IP, whatever its MTU.
const MIN_PACKETS: u32 = 8;

/// A QP's packets below IP and its budget.
pub(crate) struct TxFlight {
    in_flight: AtomicU32,
    /// Packets allowed below IP: the byte budget at the path MTU.
    limit: AtomicU32,
    /// The sender stopped for want of budget and waits to be woken.
    blocked: AtomicBool,
}

impl TxFlight {
    pub(crate) const fn new() -> Self {
        Self {
            in_flight: AtomicU32::new(0),
            limit: AtomicU32::new(MIN_PACKETS),
            blocked: AtomicBool::new(false),
        }
    }

    /// Sets the budget for packets of at most `mtu` bytes of payload.
    pub(crate) fn set_mtu(&self, mtu: u32) {
        let packets = (TX_BUDGET_BYTES / mtu.max(1)).max(MIN_PACKETS);
        self.limit.store(packets, Ordering::Relaxed);
    }

    /// Reserves up to `want` packets of budget for packets about to be
    /// sent (each must then go out with [`crate::net::skb::TxSkb::send_owned`],
    /// whose destructor gives its unit back). Returns how many it got;
    /// fewer than `want` means the sender must stop and wait to be woken
    /// (it is marked blocked). One sender at a time (the QP's `sending`).
    pub(crate) fn reserve(&self, want: u32) -> u32 {
        let limit = self.limit.load(Ordering::Relaxed);
        let mut got = 0;
        loop {
            // Only destructors run concurrently, and they only lower the
            // count: the room seen here cannot shrink before the add.
            let room = limit.saturating_sub(self.in_flight.load(Ordering::SeqCst));
            let n = room.min(want - got);
            self.in_flight.fetch_add(n, Ordering::SeqCst);
            got += n;
            if got == want {
                return got;
            }
            self.blocked.store(true, Ordering::SeqCst);
            // A destructor that lowered the count to the wake mark before
            // seeing `blocked` did not wake us: look again after the
            // store. Going on, the room is at least half the limit, so
            // this loops at most `want` times.
            if self.in_flight.load(Ordering::SeqCst) > limit / 2
                || !self.blocked.swap(false, Ordering::SeqCst)
            {
                return got;
            }
        }
    }

    /// `packets` left: true if the sender waits and should be woken now.
    fn release(&self, packets: u32) -> bool {
        let left = self
            .in_flight
            .fetch_sub(packets, Ordering::SeqCst)
            .saturating_sub(packets);
        left <= self.limit.load(Ordering::Relaxed) / 2
            && self.blocked.load(Ordering::SeqCst)
            && self.blocked.swap(false, Ordering::SeqCst)
    }

    /// Packets below IP now.
    pub(crate) fn in_flight(&self) -> u32 {
        self.in_flight.load(Ordering::Relaxed)
    }
}

impl TxOwner for QpCore {
    fn tx_released(this: &Arc<Self>, packets: u32) {
        if this.flight().is_some_and(|f| f.release(packets)) {
            BhWork::queue(this);
        }
    }
}

/// A QP's sender was woken (see the module docs). Context: softirq.
pub(super) fn wake(qp: Arc<QpCore>) {
    let xud = qp.qp_type() == crate::ib::QpType::Xud;
    let held = super::qp::HeldCqs::new(qp);
    if xud {
        super::xud::kick(&held);
    } else {
        super::rc::kick(&held);
    }
}
