// SPDX-License-Identifier: GPL-2.0

//! The congestion window law of rxud's senders: RC's requester and each
//! XUD stream keep one [`Window`], in packets, and send while what they
//! have in flight is below it.
//!
//! # Signals
//!
//! - A CNP (RoCEv2 annex A17.9: BTH opcode 0x81 from the receiver of
//!   packets that arrived CE-marked, at most one per flow per
//!   [`CNP_INTERVAL_NS`]): [`Window::on_cnp`]. A switch marks before its
//!   queue overflows, so this is the early signal.
//! - Loss, for paths that drop instead of marking (and for rxe, which sends
//!   no CNPs): [`Window::on_loss`], a retransmit timeout or a gap (a
//!   sequence NAK, an implied NAK, an XUD selective NAK).
//! - Progress: [`Window::on_answered`], packets acknowledged.
//!
//! # The law, and why a window and not DCQCN's rate
//!
//! DCQCN (the RoCEv2 NICs' law) is a rate law: a CNP cuts a per-QP rate
//! limiter, timers and byte counters raise it. That fits a NIC's rate
//! limiters and needs none of the ACKs hardware does not wait for. A
//! software sender has what DCQCN lacks and lacks what it has: rxud's
//! RC and XUD senders are ACK-clocked already (every packet answered,
//! coalesced), while a per-QP pacing timer in microseconds costs a kernel
//! an hrtimer interrupt per packet. So the law here is DCTCP's window law
//! with DCQCN's signal (the CNP, which carries one bit per interval, not
//! per packet):
//!
//! - `alpha`, the estimate of how congested the path is (0 to 1, in
//!   1/[`ALPHA_ONE`]), is updated once per round (a window's worth of
//!   packets answered): `alpha += g * (F - alpha)` with `F` 1 if a CNP came
//!   in the round, 0 if none, `g` = 1/2^[`ALPHA_G_SHIFT`]. It starts at 1, as
//!   DCQCN's does: the first CNP halves the window.
//! - A CNP cuts the window once per round: `cwnd -= cwnd * alpha / 2`
//!   (floor [`Window::min`]), and the slow-start threshold with it; the
//!   round of a cut does not grow.
//! - Growth: slow start below the threshold (one per packet answered),
//!   one per round above it (additive increase), up to [`Window::max`].
//! - Loss counts as a mark in `alpha`. A retransmit timeout restarts the
//!   window at `min` with the threshold at half. A gap halves the window
//!   for the recovery (the resends must not overflow again what just
//!   overflowed) and sets the threshold to the window cut as a CNP would
//!   cut it, `alpha / 2`: the window slow-starts back there. A lone loss
//!   after quiet rounds (`alpha` near 0) is a burst, a host's socket or
//!   device queue overflowing, not the path's capacity, and the window
//!   slow-starts back to nearly where it was (TCP Reno's one-per-round
//!   regrowth after every loss lost a quarter of RC's bandwidth in `make
//!   bench`); losses round after round drive `alpha` to 1 and the
//!   threshold to half, Reno's law, so that flows through a drop-tail
//!   bottleneck share it (the model's drop-tail test: the threshold left
//!   at the window, 8 flows had a fairness of 0.28 and resent 86%).
//!
//! Additive increase with a multiplicative cut converges to a fair share
//! (Chiu and Jain): [`model`]'s tests simulate N flows through one
//! bottleneck, with ECN marking and with drop-tail only.
//!
//! No unsafe, no allocation, `core` only: the kernel module and the host
//! tests compile this file.

#[cfg(test)]
mod model;

/// `alpha` of 1.0 (`alpha` is kept in 1/1024ths).
pub const ALPHA_ONE: u32 = 1024;

/// `g` = 1/16, DCTCP's gain: `alpha` follows about 16 rounds of history.
pub const ALPHA_G_SHIFT: u32 = 4;

/// What a receiver waits between two CNPs to one flow: the RoCEv2
/// annex's `min_time_between_cnps`, as NICs default it (50 us). A CNP says
/// "some packet was marked since the last one"; more would be noise.
pub const CNP_INTERVAL_NS: u64 = 50_000;

/// When a flow last got a CNP from its receiver: at most one per
/// [`CNP_INTERVAL_NS`] (RC: per QP; XUD: per receiving stream).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CnpPacer {
    last: Option<u64>,
}

impl CnpPacer {
    /// A flow that has had no CNP.
    pub const NEW: CnpPacer = CnpPacer { last: None };

    /// Whether a CNP may go at `now` (ns); if so, that one went.
    pub fn due(&mut self, now: u64) -> bool {
        if self
            .last
            .is_some_and(|l| now.saturating_sub(l) < CNP_INTERVAL_NS)
        {
            return false;
        }
        self.last = Some(now);
        true
    }
}

/// A loss as the sender found it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Loss {
    /// No answer within the retransmit timeout: the path or the peer
    /// stopped taking packets.
    Timeout,
    /// This many packets lost while later ones arrived (a sequence NAK,
    /// an implied NAK, holes an XUD answer shows): the path works.
    Gap(u32),
}

/// A sender's congestion window, in packets (see the module doc).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Window {
    cwnd: u32,
    ssthresh: u32,
    /// Packets answered since the window last grew in additive increase.
    ca_credit: u32,
    min: u32,
    max: u32,
    /// In 1/[`ALPHA_ONE`]ths.
    alpha: u32,
    /// Packets still to be answered before this round ends.
    round_left: u32,
    /// A CNP came in this round.
    marked: bool,
    /// The window was cut for a CNP in this round.
    cut: bool,
    /// Packets found lost in this round.
    lost: u32,
    /// The window was cut for losses in this round.
    loss_cut: bool,
    /// The window when this round began: what a round's losses are a
    /// share of.
    round_size: u32,
    /// Losses up to this share of a round (per mille) are not taken as
    /// congestion (see [`Window::with_loss_tolerance`]).
    tolerance: u32,
}

impl Window {
    /// A window of `max` packets (a sender starts at its full window: a
    /// fresh flow on a quiet path goes at once), never below `min`.
    /// `min` is at least 1 and at most `max`.
    pub const fn new(min: u32, max: u32) -> Self {
        let max = if max == 0 { 1 } else { max };
        let min = if min == 0 {
            1
        } else if min > max {
            max
        } else {
            min
        };
        Self {
            cwnd: max,
            ssthresh: max,
            ca_credit: 0,
            min,
            max,
            alpha: ALPHA_ONE,
            round_left: max,
            marked: false,
            cut: false,
            lost: 0,
            loss_cut: false,
            round_size: max,
            tolerance: 0,
        }
    }

    /// The same window, starting at `initial` packets (at least its
    /// floor, at most its ceiling) and growing in slow start to its
    /// ceiling: a fresh flow does not throw its whole window at a path it
    /// knows nothing of (TCP's initial window, RFC 6928).
    pub const fn with_initial(mut self, initial: u32) -> Self {
        let w = if initial < self.min {
            self.min
        } else if initial > self.max {
            self.max
        } else {
            initial
        };
        self.cwnd = w;
        self.round_left = w;
        self.round_size = w;
        self
    }

    /// The same window, taking losses up to `per_mille` of a round's
    /// packets for noise rather than congestion (they are resent, the
    /// window stays). A sender that resends selectively (XUD) loses
    /// little to a lossy link's random drops and should not give up its
    /// window for them (at 1% random loss a window halved for every loss
    /// kept a quarter of XUD's goodput in its model); a queue that
    /// overflows drops far more than that of the flows through it. RC
    /// goes back N on every loss, resending the whole window: it keeps 0.
    pub const fn with_loss_tolerance(mut self, per_mille: u32) -> Self {
        self.tolerance = per_mille;
        self
    }

    /// The window: how many packets may be in flight.
    pub const fn cwnd(&self) -> u32 {
        self.cwnd
    }

    /// The slow-start threshold.
    pub const fn ssthresh(&self) -> u32 {
        self.ssthresh
    }

    /// The congestion estimate, in 1/[`ALPHA_ONE`]ths.
    pub const fn alpha(&self) -> u32 {
        self.alpha
    }

    /// The floor of the window.
    pub const fn min(&self) -> u32 {
        self.min
    }

    /// The ceiling of the window.
    pub const fn max(&self) -> u32 {
        self.max
    }

    /// Whether `in_flight` packets leave room for one more.
    pub const fn allows(&self, in_flight: u32) -> bool {
        in_flight < self.cwnd
    }

    /// `answered` more packets were acknowledged.
    pub fn on_answered(&mut self, answered: u32) {
        if answered == 0 {
            return;
        }
        if !self.cut {
            self.grow(answered);
        }
        if answered >= self.round_left {
            self.end_round();
        } else {
            self.round_left -= answered;
        }
    }

    /// A CNP for this flow arrived. Returns whether it cut the window (the
    /// first of a round does; the rest of the round's are the same news).
    pub fn on_cnp(&mut self) -> bool {
        self.marked = true;
        if self.cut {
            return false;
        }
        self.cut = true;
        self.cwnd = (self.cwnd - self.share()).max(self.min);
        self.ssthresh = self.cwnd;
        self.ca_credit = 0;
        true
    }

    /// The sender found a loss. One beyond the tolerance counts as a mark
    /// in `alpha`: it says the path is full as a CNP does, only later. A
    /// round's gaps cut the window once. Returns whether it cut.
    pub fn on_loss(&mut self, loss: Loss) -> bool {
        let (ssthresh, cwnd) = match loss {
            Loss::Timeout => ((self.cwnd / 2).max(self.min), self.min),
            Loss::Gap(n) => {
                self.lost = self.lost.saturating_add(n);
                let tolerated = u64::from(self.round_size) * u64::from(self.tolerance);
                if self.loss_cut || u64::from(self.lost) * 1000 <= tolerated {
                    return false;
                }
                self.loss_cut = true;
                (self.cwnd - self.share(), (self.cwnd / 2).max(self.min))
            }
        };
        self.marked = true;
        self.ssthresh = ssthresh.min(self.max);
        self.cwnd = cwnd.min(self.max);
        self.ca_credit = 0;
        // The new window's packets are the next round.
        self.round_left = self.cwnd;
        true
    }

    /// What a cut takes: `cwnd * alpha / 2` (at most half the window).
    fn share(&self) -> u32 {
        (u64::from(self.cwnd) * u64::from(self.alpha) / u64::from(2 * ALPHA_ONE)) as u32
    }

    fn grow(&mut self, answered: u32) {
        let mut left = answered;
        if self.cwnd < self.ssthresh {
            let step = left.min(self.ssthresh - self.cwnd);
            self.cwnd += step;
            left -= step;
        }
        self.ca_credit = self.ca_credit.saturating_add(left);
        // Bounded: each pass takes at least `cwnd` >= 1 of the credit, and
        // there are at most `max` passes before the window is full.
        while self.cwnd < self.max && self.ca_credit >= self.cwnd {
            self.ca_credit -= self.cwnd;
            self.cwnd += 1;
        }
        if self.cwnd >= self.max {
            self.cwnd = self.max;
            self.ca_credit = 0;
        }
    }

    fn end_round(&mut self) {
        let target = if self.marked { ALPHA_ONE } else { 0 };
        // alpha += (target - alpha) / 16, in integers that stay in 0..=1024.
        if target >= self.alpha {
            self.alpha += (target - self.alpha + (1 << ALPHA_G_SHIFT) - 1) >> ALPHA_G_SHIFT;
        } else {
            self.alpha -= (self.alpha - target) >> ALPHA_G_SHIFT;
        }
        self.marked = false;
        self.cut = false;
        self.lost = 0;
        self.loss_cut = false;
        self.round_left = self.cwnd;
        self.round_size = self.cwnd;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_flow_gets_one_cnp_per_interval() {
        let mut p = CnpPacer::NEW;
        assert!(p.due(1_000));
        assert!(!p.due(1_000 + CNP_INTERVAL_NS - 1));
        assert!(p.due(1_000 + CNP_INTERVAL_NS));
        assert!(!p.due(1_000 + CNP_INTERVAL_NS));
        // A clock that went back does not silence it for good.
        assert!(!p.due(0));
        assert!(p.due(1_000 + 2 * CNP_INTERVAL_NS));
    }

    #[test]
    fn a_new_window_is_full_and_its_bounds_are_sane() {
        let w = Window::new(2, 64);
        assert_eq!(
            (w.cwnd(), w.min(), w.max(), w.alpha()),
            (64, 2, 64, ALPHA_ONE)
        );
        let w = Window::new(0, 0);
        assert_eq!((w.cwnd(), w.min(), w.max()), (1, 1, 1));
        let w = Window::new(9, 4);
        assert_eq!((w.min(), w.max()), (4, 4));
        assert!(w.allows(3) && !w.allows(4));
    }

    #[test]
    fn the_first_cnp_halves_and_a_round_cuts_once() {
        let mut w = Window::new(2, 64);
        assert!(w.on_cnp());
        assert_eq!(w.cwnd(), 32);
        assert!(!w.on_cnp(), "a second CNP in the round is the same news");
        assert_eq!(w.cwnd(), 32);
        // The round of a cut does not grow; the next one adds one.
        w.on_answered(64);
        assert_eq!(w.cwnd(), 32);
        w.on_answered(32);
        assert_eq!(w.cwnd(), 33);
    }

    #[test]
    fn alpha_decays_without_cnps_and_cuts_get_gentler() {
        let mut w = Window::new(2, 1000);
        let mut before = w.alpha();
        for _ in 0..40 {
            let c = w.cwnd();
            w.on_answered(c);
            assert!(w.alpha() < before || w.alpha() == 0);
            before = w.alpha();
        }
        assert!(w.alpha() < ALPHA_ONE / 8, "alpha {}", w.alpha());
        let c = w.cwnd();
        w.on_cnp();
        assert!(
            w.cwnd() >= c - c / 16,
            "a CNP after quiet rounds cuts little: {c} -> {}",
            w.cwnd()
        );
    }

    #[test]
    fn alpha_rises_toward_one_under_steady_marking() {
        let mut w = Window::new(2, 1000);
        for _ in 0..60 {
            // Quiet first: alpha falls.
            let c = w.cwnd();
            w.on_answered(c);
        }
        let low = w.alpha();
        for _ in 0..60 {
            w.on_cnp();
            let c = w.cwnd();
            w.on_answered(c);
        }
        assert!(
            w.alpha() > low && w.alpha() > ALPHA_ONE * 9 / 10,
            "alpha {}",
            w.alpha()
        );
        assert_eq!(w.cwnd(), w.min(), "halved each round down to the floor");
    }

    /// A window after `rounds` rounds without a signal.
    fn quiet(rounds: u32) -> Window {
        let mut w = Window::new(2, 64);
        for _ in 0..rounds {
            let c = w.cwnd();
            w.on_answered(c);
        }
        w
    }

    #[test]
    fn a_lone_loss_after_quiet_rounds_slow_starts_back_near_the_window() {
        let mut w = quiet(64);
        assert!(w.alpha() < 32, "alpha {}", w.alpha());
        w.on_loss(Loss::Gap(1));
        assert_eq!((w.cwnd(), w.ssthresh()), (32, 64 - 64 * w.alpha() / 2048));
        assert!(w.ssthresh() >= 63);
        // Slow start back to the threshold: one per packet answered.
        w.on_answered(16);
        assert_eq!(w.cwnd(), 48);
    }

    #[test]
    fn losses_round_after_round_halve_like_reno() {
        // A fresh flow's alpha is 1: its first gap sets the threshold to
        // half at once.
        let mut w = Window::new(2, 64);
        w.on_loss(Loss::Gap(1));
        assert_eq!((w.cwnd(), w.ssthresh()), (32, 32));
        let mut w = quiet(64);
        for _ in 0..64 {
            w.on_loss(Loss::Gap(1));
            let c = w.cwnd();
            w.on_answered(c);
        }
        assert!(w.alpha() > ALPHA_ONE * 9 / 10, "alpha {}", w.alpha());
        // Halved each round, one back in each: at the floor or one above.
        assert!(w.cwnd() <= w.min() + 1, "cwnd {}", w.cwnd());
    }

    #[test]
    fn a_timeout_restarts_at_the_floor() {
        let mut w = quiet(64);
        w.on_answered(16);
        w.on_loss(Loss::Timeout);
        assert_eq!((w.cwnd(), w.ssthresh()), (2, 32));
        w.on_answered(30);
        assert_eq!(w.cwnd(), 32);
        // Then one per window's worth.
        w.on_answered(31);
        assert_eq!(w.cwnd(), 32);
        w.on_answered(1);
        assert_eq!(w.cwnd(), 33);
    }

    #[test]
    fn the_window_stays_within_its_bounds() {
        let mut w = Window::new(3, 40);
        for i in 0..10_000u32 {
            match i % 7 {
                0 => {
                    w.on_cnp();
                }
                3 => {
                    w.on_loss(if i % 2 == 0 {
                        Loss::Gap(1)
                    } else {
                        Loss::Timeout
                    });
                }
                _ => w.on_answered(i % 50),
            }
            assert!((3..=40).contains(&w.cwnd()), "cwnd {}", w.cwnd());
            assert!(w.alpha() <= ALPHA_ONE);
        }
    }
}
