// SPDX-License-Identifier: GPL-2.0

//! A QP's transport state, chosen by its type when the QP is created and
//! fixed for its life: a UD QP holds no RC or XUD state and takes no lock
//! it does not use, and each transport's code reaches its own state
//! through one accessor that says so (`QpCore::rc`, `QpCore::xud`,
//! `QpCore::datagram`).

use super::HeldCqs;
use crate::abi::XudParams;
use crate::driver::flight::TxFlight;
use crate::driver::rc::RcState;
use crate::driver::xud::XudState;
use crate::ib::QpType;
use crate::kext::sync::{
    new_spinlock_bh, new_spinlock_irq, SpinLockBh, SpinLockBhGuard, SpinLockIrq,
};
use crate::net::NetDeviceRef;
use core::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use kernel::prelude::*;

/// The state of a transport that queues its packets (RC, UC, XUD): built,
/// answered and retransmitted under a bottom-half lock (taken in process
/// context and softirq, never in hard irq; routing, which may disable
/// softirqs itself, runs under it), and the packets below IP.
#[pin_data]
pub(crate) struct Queued<S> {
    #[pin]
    state: SpinLockBh<Option<KBox<S>>>,
    flight: TxFlight,
}

impl<S> Queued<S> {
    fn new(state: impl PinInit<SpinLockBh<Option<KBox<S>>>>) -> impl PinInit<Self> {
        pin_init!(Self {
            state <- state,
            flight: TxFlight::new(),
        })
    }

    /// The state, locked, while a [`HeldCqs`] holds the QP's CQs: the
    /// guard borrows it, so the completions written under the lock are
    /// published, and their events raised, only after the lock is
    /// dropped. Context: process or softirq.
    pub(crate) fn lock<'a>(&'a self, _cqs: &'a HeldCqs) -> SpinLockBhGuard<'a, Option<KBox<S>>> {
        self.state.lock()
    }

    /// The QP's packets below IP and their budget (`flight.rs`).
    pub(crate) fn flight(&self) -> &TxFlight {
        &self.flight
    }
}

/// The netdev a datagram QP (UD, GSI, XUD) sends on, held from RTS (XUD:
/// RTR) until ERROR, RESET, destruction or the netdev's unregistration,
/// so that sending needs no lookup (ib_core's takes a lock that is not
/// safe in softirq, where kernel consumers may post). Any context.
#[pin_data]
pub(crate) struct HeldNetdev {
    #[pin]
    ndev: SpinLockIrq<Option<NetDeviceRef>>,
}

impl HeldNetdev {
    fn new() -> impl PinInit<Self> {
        pin_init!(Self {
            ndev <- new_spinlock_irq!(None, "rxud:qp_ud_ndev"),
        })
    }

    /// The netdev, if held.
    pub(crate) fn get(&self) -> Option<NetDeviceRef> {
        self.ndev.lock().clone()
    }

    /// Keeps a netdev held: `ndev` unless one is held already (`ENODEV`
    /// if none is held and `ndev` is `None`).
    pub(crate) fn keep(&self, ndev: Option<NetDeviceRef>) -> Result {
        let mut held = self.ndev.lock();
        if held.is_none() {
            *held = Some(ndev.ok_or(ENODEV)?);
        }
        Ok(())
    }

    /// Gives the netdev back (to be dropped outside the lock).
    pub(crate) fn take(&self) -> Option<NetDeviceRef> {
        self.ndev.lock().take()
    }
}

/// UD and GSI: sent in the poster's context, one sender at a time.
#[pin_data]
pub(crate) struct Datagram {
    #[pin]
    ndev: HeldNetdev,
    /// PSN of the next datagram.
    next_psn: AtomicU32,
    /// A sender is draining the send queue (see `tx.rs`).
    sq_active: AtomicBool,
}

impl Datagram {
    /// The PSN of the next datagram (UD numbers them, in sequence).
    pub(crate) fn next_psn(&self) -> u32 {
        self.next_psn.fetch_add(1, Ordering::Relaxed)
    }

    /// Takes the send queue for draining; false if a sender has it.
    pub(crate) fn try_start_sending(&self) -> bool {
        !self.sq_active.swap(true, Ordering::AcqRel)
    }

    /// Gives the send queue up (before the doorbell flag settles).
    pub(crate) fn stop_sending(&self) {
        self.sq_active.store(false, Ordering::SeqCst);
    }
}

/// XUD: every peer, both directions (`xud.rs`), sent per AH on the held
/// netdev as UD is.
#[pin_data]
pub(crate) struct Xud {
    #[pin]
    queued: Queued<XudState>,
    #[pin]
    ndev: HeldNetdev,
    /// The creation parameters, defaults filled in.
    params: XudParams,
}

impl Xud {
    pub(crate) fn queued(&self) -> &Queued<XudState> {
        &self.queued
    }

    pub(crate) fn params(&self) -> XudParams {
        self.params
    }
}

/// One QP's transport state, by QP type.
pub(crate) enum QpTransport {
    /// RC and UC: the connection, from RTR until RESET (`rc.rs`).
    Connected(Pin<KBox<Queued<RcState>>>),
    /// UD and GSI (`tx.rs`).
    Datagram(Pin<KBox<Datagram>>),
    /// XUD (`xud.rs`).
    Xud(Pin<KBox<Xud>>),
}

impl QpTransport {
    /// The state of a new QP of type `ty`; an XUD QP's, with `params`, and
    /// `xud` its first state. Context: process (allocates).
    pub(crate) fn new(ty: QpType, xud: Option<(XudParams, KBox<XudState>)>) -> Result<Self> {
        Ok(match (ty, xud) {
            (QpType::Rc | QpType::Uc, None) => Self::Connected(KBox::pin_init(
                Queued::new(new_spinlock_bh!(None, "rxud:qp_rc")),
                GFP_KERNEL,
            )?),
            (QpType::Ud | QpType::Gsi, None) => Self::Datagram(KBox::pin_init(
                pin_init!(Datagram {
                    ndev <- HeldNetdev::new(),
                    next_psn: AtomicU32::new(0),
                    sq_active: AtomicBool::new(false),
                }),
                GFP_KERNEL,
            )?),
            (QpType::Xud, Some((params, state))) => Self::Xud(KBox::pin_init(
                pin_init!(Xud {
                    queued <- Queued::new(new_spinlock_bh!(Some(state), "rxud:qp_xud")),
                    ndev <- HeldNetdev::new(),
                    params,
                }),
                GFP_KERNEL,
            )?),
            _ => return Err(EINVAL),
        })
    }

    /// The netdev a datagram QP sends on (UD, GSI, XUD).
    pub(crate) fn netdev(&self) -> Option<&HeldNetdev> {
        match self {
            Self::Datagram(d) => Some(&d.ndev),
            Self::Xud(x) => Some(&x.ndev),
            Self::Connected(_) => None,
        }
    }

    /// The transmit budget of a transport that queues (RC, UC, XUD).
    pub(crate) fn flight(&self) -> Option<&TxFlight> {
        match self {
            Self::Connected(c) => Some(&c.flight),
            Self::Xud(x) => Some(&x.queued.flight),
            Self::Datagram(_) => None,
        }
    }
}
