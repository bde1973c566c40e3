// SPDX-License-Identifier: GPL-2.0

//! PSN windows: which packets of a stream have arrived (receiver) or been
//! acknowledged (sender), when packets may be lost, duplicated and
//! reordered.
//!
//! XUD acknowledges packets selectively and places every packet directly
//! (each carries a RETH), so neither side needs packets in order; both need
//! to know, per PSN, "seen or not" over a bounded range, and where the
//! first hole is. That is one structure, [`PsnBitmap`]: `W = 64 * WORDS`
//! bits for the PSNs `[base, base + W)`, the bit of PSN `p` at position
//! `p mod W` (W divides 2^24, so positions survive PSN wrap-around), and
//! `base` the first PSN not yet seen. Marking `base` slides the window over
//! every contiguous seen PSN, clearing their bits for the PSNs `W` further
//! on.
//!
//! - [`RecvWindow`] (the receiver window of seed 002): a packet is new
//!   (place it, ACK it), a duplicate (ACK again, do not deliver twice) or
//!   beyond the window (drop: the sender cannot have more than `W` PSNs
//!   outstanding). Its [`RecvWindow::gaps`] are what a selective
//!   retransmission request names: single PSNs or ranges. A receiver that
//!   may fail to place a packet checks it first ([`RecvWindow::check`])
//!   and records it only once placed ([`RecvWindow::commit`]); PSNs the
//!   sender gave up are skipped with [`RecvWindow::advance`].
//! - [`SendWindow`]: the sender hands out at most `W` PSNs beyond the
//!   oldest unacknowledged one, records ACKs in any order, and lists what
//!   is still unacknowledged for selective retransmission.
//!
//! No allocation; every operation is O(W / 64) at worst.

use super::psn::Psn;

/// Seen/unseen for the PSNs `[base, base + 64 * WORDS)`.
#[derive(Clone, Debug)]
pub struct PsnBitmap<const WORDS: usize> {
    base: Psn,
    bits: [u64; WORDS],
}

impl<const WORDS: usize> PsnBitmap<WORDS> {
    /// Number of PSNs the window spans.
    pub const SIZE: u32 = {
        let size = 64 * WORDS;
        assert!(
            size.is_power_of_two() && size <= (1 << 23),
            "window must be a power of two, at most 2^23"
        );
        size as u32
    };

    /// A window whose first unseen PSN is `base`.
    pub const fn new(base: Psn) -> Self {
        // Evaluates the size check at compile time for every WORDS used.
        let _ = Self::SIZE;
        Self {
            base,
            bits: [0; WORDS],
        }
    }

    /// The first PSN not seen; every PSN before it was.
    pub fn base(&self) -> Psn {
        self.base
    }

    /// Offset of `psn` from `base` if inside the window.
    fn offset(&self, psn: Psn) -> Option<u32> {
        let d = psn.diff(self.base);
        (d >= 0 && (d as u32) < Self::SIZE).then_some(d as u32)
    }

    fn position(psn: Psn) -> (usize, u64) {
        let p = psn.value() & (Self::SIZE - 1);
        ((p / 64) as usize, 1u64 << (p % 64))
    }

    fn bit(&self, psn: Psn) -> bool {
        let (w, m) = Self::position(psn);
        self.bits[w] & m != 0
    }

    /// The bits of the 64 PSNs from `psn` on, bit `i` for `psn + i`, as
    /// stored (no window check: the caller keeps them inside it).
    fn run_of_64(&self, psn: Psn) -> u64 {
        let p = psn.value() & (Self::SIZE - 1);
        let (w, shift) = ((p / 64) as usize, p % 64);
        let lo = self.bits.get(w).copied().unwrap_or(0);
        if shift == 0 {
            return lo;
        }
        let hi = self.bits.get((w + 1) % WORDS).copied().unwrap_or(0);
        lo >> shift | hi << (64 - shift)
    }

    /// Whether `psn` has been seen: before the window always, beyond it
    /// never.
    pub fn is_seen(&self, psn: Psn) -> bool {
        if psn.before(self.base) {
            return true;
        }
        self.offset(psn).is_some_and(|_| self.bit(psn))
    }

    /// Marks `psn` seen. `Ok(true)` if it was not, `Ok(false)` if it was
    /// (including every PSN before the window), `Err(())` if it lies beyond
    /// the window.
    #[allow(clippy::result_unit_err)]
    pub fn mark(&mut self, psn: Psn) -> Result<bool, ()> {
        if psn.before(self.base) {
            return Ok(false);
        }
        self.offset(psn).ok_or(())?;
        if self.bit(psn) {
            return Ok(false);
        }
        let (w, m) = Self::position(psn);
        self.bits[w] |= m;
        self.slide();
        Ok(true)
    }

    /// Moves `base` forward to `to` (nothing if `to` is not after it),
    /// whether or not the PSNs passed were seen, then past every seen PSN
    /// at the new start. The bits of the PSNs passed are cleared: they now
    /// stand for PSNs `SIZE` further on.
    pub fn advance(&mut self, to: Psn) {
        let d = to.diff(self.base);
        if d <= 0 {
            return;
        }
        let d = d as u32;
        if d >= Self::SIZE {
            self.bits = [0; WORDS];
        } else {
            for i in 0..d {
                let (w, m) = Self::position(self.base.add(i));
                self.bits[w] &= !m;
            }
        }
        self.base = to;
        self.slide();
    }

    /// Moves `base` past every seen PSN at its start, a word at a time
    /// where possible, clearing the bits it leaves (they now stand for
    /// PSNs `SIZE` further on).
    fn slide(&mut self) {
        loop {
            let p = self.base.value() & (Self::SIZE - 1);
            let (w, shift) = ((p / 64) as usize, p % 64);
            let run = (self.bits[w] >> shift).trailing_ones().min(64 - shift);
            if run == 0 {
                return;
            }
            let mask = if run == 64 {
                u64::MAX
            } else {
                ((1u64 << run) - 1) << shift
            };
            self.bits[w] &= !mask;
            self.base = self.base.add(run);
            if run + shift < 64 {
                return;
            }
        }
    }

    /// The unseen PSNs in `[base, end)` (clipped to the window), as
    /// `(first, count)` runs in PSN order.
    pub fn gaps(&self, end: Psn) -> Gaps<'_, WORDS> {
        let span = end.diff(self.base).clamp(0, Self::SIZE as i32) as u32;
        Gaps {
            map: self,
            at: 0,
            span,
        }
    }
}

/// Iterator over the unseen runs of a [`PsnBitmap`] (see
/// [`PsnBitmap::gaps`]).
pub struct Gaps<'a, const WORDS: usize> {
    map: &'a PsnBitmap<WORDS>,
    /// Offset from `map.base` where the search continues.
    at: u32,
    span: u32,
}

impl<const WORDS: usize> Iterator for Gaps<'_, WORDS> {
    type Item = (Psn, u32);

    fn next(&mut self) -> Option<(Psn, u32)> {
        let base = self.map.base;
        while self.at < self.span && self.map.bit(base.add(self.at)) {
            self.at += 1;
        }
        if self.at >= self.span {
            return None;
        }
        let first = self.at;
        while self.at < self.span && !self.map.bit(base.add(self.at)) {
            self.at += 1;
        }
        Some((base.add(first), self.at - first))
    }
}

/// What a receiver does with an arriving packet.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Arrival {
    /// First arrival: place its payload and acknowledge it.
    New,
    /// Seen before: acknowledge it again (the ACK may have been lost), do
    /// not deliver it twice.
    Duplicate,
    /// Beyond the window: drop it (and count it); the sender may not have
    /// it outstanding, so it is stale or forged.
    BeyondWindow,
}

/// The receiver's window over one packet stream.
#[derive(Clone, Debug)]
pub struct RecvWindow<const WORDS: usize> {
    seen: PsnBitmap<WORDS>,
    /// One past the highest PSN seen: gaps lie before it.
    end: Psn,
}

impl<const WORDS: usize> RecvWindow<WORDS> {
    /// A window expecting `first` next.
    pub const fn new(first: Psn) -> Self {
        Self {
            seen: PsnBitmap::new(first),
            end: first,
        }
    }

    /// What `psn` would be, without recording it: a receiver that may
    /// still fail to place the packet checks first and commits only once
    /// the payload is in place, so that a packet it could not place is
    /// new again when it is retransmitted.
    pub fn check(&self, psn: Psn) -> Arrival {
        if psn.before(self.seen.base()) {
            return Arrival::Duplicate;
        }
        match self.seen.offset(psn) {
            None => Arrival::BeyondWindow,
            Some(_) if self.seen.bit(psn) => Arrival::Duplicate,
            Some(_) => Arrival::New,
        }
    }

    /// Records `psn` as received (placed). True if it was new: of two
    /// contexts that both checked the same PSN as new, only the one whose
    /// commit returns true may count it.
    pub fn commit(&mut self, psn: Psn) -> bool {
        self.receive(psn) == Arrival::New
    }

    /// The sender says it will never send PSNs before `to` again (they
    /// were acknowledged or given up): stop waiting for them. They are not
    /// recorded as received, and PSNs up to `SIZE` past `to` fit in the
    /// window from now on.
    pub fn advance(&mut self, to: Psn) {
        self.seen.advance(to);
        if self.end.before(self.seen.base()) {
            self.end = self.seen.base();
        }
    }

    /// Records the packet `psn` (check and commit in one).
    pub fn receive(&mut self, psn: Psn) -> Arrival {
        match self.seen.mark(psn) {
            Ok(true) => {
                if !psn.before(self.end) {
                    self.end = psn.next();
                }
                Arrival::New
            }
            Ok(false) => Arrival::Duplicate,
            Err(()) => Arrival::BeyondWindow,
        }
    }

    /// Whether `psn` was received. Every PSN before the base counts (the
    /// sender gave up those [`Self::advance`] skipped), none beyond the
    /// window.
    pub fn is_received(&self, psn: Psn) -> bool {
        self.seen.is_seen(psn)
    }

    /// The received PSNs after the base as a bitmap: bit `i` for PSN
    /// `base + 1 + i`, over the 127 PSNs after the base (or the window,
    /// if smaller). What an XUD ACK's `sack` carries.
    pub fn received_after_base(&self) -> u128 {
        let base = self.seen.base();
        if WORDS == 2 {
            // Every bit stands for a PSN in [base, base + 128): rotate the
            // one after the base to bit 0; the base's own bit (unseen) ends
            // at bit 127.
            let all = u128::from(self.seen.bits[0]) | u128::from(self.seen.bits[1]) << 64;
            return all.rotate_right(base.next().value() & 127) & (u128::MAX >> 1);
        }
        if WORDS > 2 {
            // The window spans more than the 128 PSNs from the base: the
            // 127 after it are two 64-bit runs of the circular bitmap.
            let first = base.next();
            let lo = u128::from(self.seen.run_of_64(first));
            let hi = u128::from(self.seen.run_of_64(first.add(64)));
            return (lo | hi << 64) & (u128::MAX >> 1);
        }
        let n = (PsnBitmap::<WORDS>::SIZE - 1).min(127);
        let mut out = 0u128;
        for i in 0..n {
            if self.seen.bit(base.add(1 + i)) {
                out |= 1 << i;
            }
        }
        out
    }

    /// The first PSN not received; all before it were.
    pub fn expected(&self) -> Psn {
        self.seen.base()
    }

    /// Missing PSNs below the highest one received: what to ask the sender
    /// to retransmit, as single PSNs (`count == 1`) or ranges.
    pub fn gaps(&self) -> Gaps<'_, WORDS> {
        self.seen.gaps(self.end)
    }
}

/// A [`RecvWindow`] at rest, in the room of a 128-PSN one whatever the
/// window's span: its base and the PSNs seen among the 127 after it. A
/// window whose highest PSN seen lies further on has no resting form.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RestingWindow {
    base: Psn,
    end: Psn,
    /// Bit `i` of word `i / 64`: PSN `base + 1 + i` was seen.
    after: [u64; 2],
}

impl<const WORDS: usize> RecvWindow<WORDS> {
    /// The resting form, if every PSN seen beyond the base is among the
    /// 127 after it.
    pub fn rest(&self) -> Option<RestingWindow> {
        let base = self.seen.base();
        if self.end.diff(base) > 128 {
            return None;
        }
        let after = self.received_after_base();
        Some(RestingWindow {
            base,
            end: self.end,
            after: [after as u64, (after >> 64) as u64],
        })
    }

    /// The window a resting form stands for.
    pub fn wake(r: &RestingWindow) -> Self {
        let mut w = Self::new(r.base);
        w.end = r.end;
        for (k, &word) in r.after.iter().enumerate() {
            let mut bits = word;
            while bits != 0 {
                let i = bits.trailing_zeros();
                bits &= bits - 1;
                // Within the window (i < 127 < SIZE): never refused.
                let _ = w.seen.mark(r.base.add(1 + k as u32 * 64 + i));
            }
        }
        w
    }
}

/// The sender's window over one packet stream.
#[derive(Clone, Debug)]
pub struct SendWindow<const WORDS: usize> {
    acked: PsnBitmap<WORDS>,
    /// Next PSN to hand out.
    next: Psn,
}

/// What an arriving ACK did.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum AckResult {
    /// It acknowledged an outstanding packet.
    New,
    /// The packet was acknowledged already.
    Duplicate,
    /// No such packet was ever sent (or it is too old to tell): ignore it.
    NotSent,
}

impl<const WORDS: usize> SendWindow<WORDS> {
    /// A window that will hand out `first` first.
    pub const fn new(first: Psn) -> Self {
        Self {
            acked: PsnBitmap::new(first),
            next: first,
        }
    }

    /// Packets sent and not all acknowledged (oldest unacknowledged to
    /// next), at most `SIZE`.
    pub fn in_flight(&self) -> u32 {
        self.next.diff(self.acked.base()) as u32
    }

    /// Packets sent and neither acknowledged nor known placed: those in
    /// flight less those acknowledged beyond the oldest unacknowledged one.
    pub fn outstanding(&self) -> u32 {
        // The bitmap holds exactly the acknowledged PSNs after the base
        // (the base's own bit is clear, and none at or beyond `next`).
        let acked: u32 = self.acked.bits.iter().map(|w| w.count_ones()).sum();
        self.in_flight().saturating_sub(acked)
    }

    /// The next PSN, or `None` while `SIZE` PSNs are in flight (the
    /// receiver would drop anything further).
    pub fn send(&mut self) -> Option<Psn> {
        if self.in_flight() >= PsnBitmap::<WORDS>::SIZE {
            return None;
        }
        let psn = self.next;
        self.next = psn.next();
        Some(psn)
    }

    /// Records an ACK of `psn`.
    pub fn ack(&mut self, psn: Psn) -> AckResult {
        if !psn.before(self.next) {
            return AckResult::NotSent;
        }
        match self.acked.mark(psn) {
            Ok(true) => AckResult::New,
            Ok(false) => AckResult::Duplicate,
            // Cannot happen for psn < next (next - base <= SIZE); treat
            // defensively as foreign.
            Err(()) => AckResult::NotSent,
        }
    }

    /// Whether `psn` is acknowledged.
    pub fn is_acked(&self, psn: Psn) -> bool {
        self.acked.is_seen(psn)
    }

    /// The oldest unacknowledged PSN (equals the next PSN when nothing is
    /// in flight).
    pub fn oldest_unacked(&self) -> Psn {
        self.acked.base()
    }

    /// Unacknowledged runs, oldest first: what selective retransmission
    /// resends once their timer expires.
    pub fn unacked(&self) -> Gaps<'_, WORDS> {
        self.acked.gaps(self.next)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeSet;
    use std::vec::Vec;

    /// xorshift64*: deterministic pseudo-random numbers for the model tests.
    struct Rng(u64);
    impl Rng {
        fn next(&mut self) -> u64 {
            self.0 ^= self.0 >> 12;
            self.0 ^= self.0 << 25;
            self.0 ^= self.0 >> 27;
            self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
        }
        fn below(&mut self, n: u32) -> u32 {
            (self.next() % u64::from(n)) as u32
        }
    }

    /// What `received_after_base` must say, PSN by PSN.
    fn after_base_bit_by_bit<const W: usize>(w: &RecvWindow<W>) -> u128 {
        let base = w.expected();
        (0..127)
            .filter(|&i| w.is_received(base.add(1 + i)))
            .fold(0, |acc, i| acc | 1 << i)
    }

    #[test]
    fn received_after_base_is_the_bit_by_bit_answer() {
        let mut rng = Rng(0x5ac);
        for start in [0u32, 5, 0xff_ff80, 0xff_fffe] {
            let start = Psn::new(start);
            let mut w = RecvWindow::<2>::new(start);
            for _ in 0..2000 {
                let psn = w.expected().add(rng.below(130));
                let _ = w.receive(psn);
                assert_eq!(w.received_after_base(), after_base_bit_by_bit(&w));
                let w1 = {
                    let mut v = RecvWindow::<1>::new(start);
                    let _ = v.receive(start.add(3));
                    v
                };
                assert_eq!(w1.received_after_base(), 1 << 2);
            }
        }
    }

    /// The wider window's fast path (two 64-PSN runs of the circular
    /// bitmap) against the bit-by-bit answer, and its resting form
    /// against the window itself.
    #[test]
    fn a_wide_window_reports_and_rests_as_bit_by_bit() {
        let mut rng = Rng(0x77);
        let mut rested = 0;
        // Arrivals up to the window's end, and (every other start) only
        // within the 128 from the base, whose windows can always rest.
        for (k, start) in [0u32, 63, 0xff_ff80, 0xff_fffe].into_iter().enumerate() {
            let spread = if k % 2 == 0 { 260 } else { 128 };
            let start = Psn::new(start);
            let mut w = RecvWindow::<4>::new(start);
            for _ in 0..3000 {
                let psn = w.expected().add(rng.below(spread));
                let _ = w.receive(psn);
                if rng.below(50) == 0 {
                    w.advance(w.expected().add(rng.below(40)));
                }
                let base = w.expected();
                assert_eq!(w.received_after_base(), after_base_bit_by_bit(&w));
                // Rests only if nothing seen lies past the 127 after the
                // base; wakes as the same window.
                let far = (128..256).any(|i| w.is_received(base.add(i)));
                match w.rest() {
                    Some(r) => {
                        assert!(!far);
                        let v = RecvWindow::<4>::wake(&r);
                        assert_eq!(v.expected(), base);
                        for i in 0..300 {
                            let p = base.add(i);
                            assert_eq!(v.is_received(p), w.is_received(p), "{i}");
                            assert_eq!(v.check(p), w.check(p), "{i}");
                        }
                        assert_eq!(v.gaps().collect::<Vec<_>>(), w.gaps().collect::<Vec<_>>());
                        rested += 1;
                    }
                    None => assert!(far || w.end.diff(base) > 128),
                }
            }
        }
        assert!(rested > 100, "only {rested} windows could rest");
    }

    #[test]
    fn in_order_slides_and_wraps() {
        let start = Psn::new(0xff_fff0);
        let mut w = RecvWindow::<1>::new(start);
        for i in 0..1000 {
            assert_eq!(w.receive(start.add(i)), Arrival::New, "{i}");
            assert_eq!(w.expected(), start.add(i + 1));
        }
        assert_eq!(w.gaps().next(), None);
        assert_eq!(w.receive(start.add(999)), Arrival::Duplicate);
        assert_eq!(
            w.receive(start),
            Arrival::Duplicate,
            "long before the window"
        );
    }

    #[test]
    fn holes_are_reported_as_runs() {
        let mut w = RecvWindow::<2>::new(Psn::new(100));
        for p in [100, 101, 104, 105, 106, 110] {
            assert_eq!(w.receive(Psn::new(p)), Arrival::New);
        }
        assert_eq!(w.expected(), Psn::new(102));
        let gaps: Vec<_> = w.gaps().map(|(p, n)| (p.value(), n)).collect();
        assert_eq!(gaps, [(102, 2), (107, 3)]);
        assert_eq!(w.receive(Psn::new(103)), Arrival::New);
        assert_eq!(w.receive(Psn::new(102)), Arrival::New);
        assert_eq!(w.expected(), Psn::new(107));
    }

    #[test]
    fn window_edge_is_exact() {
        let mut w = RecvWindow::<1>::new(Psn::new(0));
        assert_eq!(w.receive(Psn::new(63)), Arrival::New);
        assert_eq!(w.receive(Psn::new(64)), Arrival::BeyondWindow);
        assert_eq!(w.receive(Psn::new(0)), Arrival::New);
        assert_eq!(w.expected(), Psn::new(1));
        assert_eq!(
            w.receive(Psn::new(64)),
            Arrival::New,
            "the window moved by one"
        );
        assert_eq!(w.receive(Psn::new(65)), Arrival::BeyondWindow);
    }

    #[test]
    fn slide_crosses_words() {
        let mut w = RecvWindow::<4>::new(Psn::new(0));
        for p in 1..200 {
            w.receive(Psn::new(p));
        }
        assert_eq!(w.expected(), Psn::new(0));
        w.receive(Psn::new(0));
        assert_eq!(w.expected(), Psn::new(200));
        assert_eq!(w.receive(Psn::new(200 + 255)), Arrival::New);
        assert_eq!(w.receive(Psn::new(200 + 256)), Arrival::BeyondWindow);
    }

    /// Random loss, duplication and reordering against a set-based model,
    /// across the 24-bit wrap.
    #[test]
    fn receiver_matches_a_model() {
        let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
        for round in 0..100 {
            let start = Psn::new(0xff_ff00u32.wrapping_add(rng.below(512)));
            let mut w = RecvWindow::<2>::new(start);
            let mut seen = BTreeSet::new();
            let mut expected = 0u32;
            for _ in 0..2000 {
                let off = expected + rng.below(160);
                let verdict = w.receive(start.add(off));
                let want = if off >= expected + 128 {
                    Arrival::BeyondWindow
                } else if off < expected || seen.contains(&off) {
                    Arrival::Duplicate
                } else {
                    Arrival::New
                };
                assert_eq!(verdict, want, "round {round}");
                if want == Arrival::New {
                    seen.insert(off);
                    while seen.contains(&expected) {
                        expected += 1;
                    }
                }
                assert_eq!(w.expected(), start.add(expected));
                let high = seen
                    .iter()
                    .next_back()
                    .map_or(expected, |h| (h + 1).max(expected));
                let missing: Vec<u32> = (expected..high).filter(|o| !seen.contains(o)).collect();
                let from_gaps: Vec<u32> = w
                    .gaps()
                    .flat_map(|(p, n)| (0..n).map(move |i| p.add(i).diff(start) as u32))
                    .collect();
                assert_eq!(from_gaps, missing, "round {round}");
            }
        }
    }

    /// Check does not record: a packet that could not be placed is new
    /// again on retransmission; commit is a test-and-set.
    #[test]
    fn check_then_commit() {
        let mut w = RecvWindow::<1>::new(Psn::new(10));
        assert_eq!(w.check(Psn::new(12)), Arrival::New);
        assert_eq!(w.check(Psn::new(12)), Arrival::New, "check records nothing");
        assert!(w.commit(Psn::new(12)));
        assert!(!w.commit(Psn::new(12)), "a second commit of one PSN loses");
        assert_eq!(w.check(Psn::new(12)), Arrival::Duplicate);
        assert_eq!(w.check(Psn::new(9)), Arrival::Duplicate);
        assert_eq!(w.check(Psn::new(10 + 64)), Arrival::BeyondWindow);
        assert_eq!(w.expected(), Psn::new(10));
    }

    /// Advancing skips PSNs without recording them, keeps what was seen
    /// beyond the new base, and makes room for PSNs a window past it.
    #[test]
    fn advance_skips_given_up_psns() {
        let mut w = RecvWindow::<1>::new(Psn::new(0));
        for p in [1, 2, 5, 63] {
            assert!(w.commit(Psn::new(p)));
        }
        w.advance(Psn::new(4));
        assert_eq!(w.expected(), Psn::new(4), "4 is still missing");
        assert_eq!(w.check(Psn::new(5)), Arrival::Duplicate, "5 was kept");
        assert_eq!(w.check(Psn::new(63)), Arrival::Duplicate, "63 was kept");
        assert_eq!(w.check(Psn::new(66)), Arrival::New, "the window moved");
        assert_eq!(w.check(Psn::new(68)), Arrival::BeyondWindow);
        w.advance(Psn::new(2));
        assert_eq!(w.expected(), Psn::new(4), "never backwards");
        assert!(w.commit(Psn::new(4)));
        assert_eq!(w.expected(), Psn::new(6));
        // Far past the window: what was seen there no longer counts.
        w.advance(Psn::new(6 + 0x1000));
        assert_eq!(w.expected(), Psn::new(6 + 0x1000));
        assert_eq!(w.check(Psn::new(6 + 0x1000)), Arrival::New);
        assert_eq!(w.check(Psn::new(6 + 0x1000 + 63)), Arrival::New);
        assert_eq!(w.check(Psn::new(6 + 0x1000 + 64)), Arrival::BeyondWindow);
        assert_eq!(w.check(Psn::new(63)), Arrival::Duplicate, "behind the base");
        assert_eq!(w.gaps().next(), None);
        // Across the 24-bit wrap, and a half-space away is backwards.
        let mut w = RecvWindow::<1>::new(Psn::new(0xff_fff0));
        w.advance(Psn::new(0x10));
        assert_eq!(w.expected(), Psn::new(0x10));
        assert_eq!(w.check(Psn::new(0xff_fff8)), Arrival::Duplicate);
        w.advance(Psn::new(0x10 + (1 << 23)));
        assert_eq!(w.expected(), Psn::new(0x10), "not after the base: ignored");
    }

    #[test]
    fn sender_stops_at_the_window_and_resumes_on_acks() {
        let mut s = SendWindow::<1>::new(Psn::new(0xff_ffe0));
        let sent: Vec<Psn> = core::iter::from_fn(|| s.send()).collect();
        assert_eq!(sent.len(), 64);
        assert_eq!(s.in_flight(), 64);
        assert_eq!(s.ack(sent[5]), AckResult::New);
        assert_eq!(s.send(), None, "oldest is still unacknowledged");
        assert_eq!(s.ack(sent[0]), AckResult::New);
        assert_eq!(s.oldest_unacked(), sent[1]);
        assert!(s.send().is_some());
        assert_eq!(s.ack(sent[0]), AckResult::Duplicate);
        assert_eq!(s.ack(sent[63].add(2)), AckResult::NotSent, "never sent");
        let unacked: Vec<_> = s.unacked().map(|(p, n)| (p.diff(sent[0]), n)).collect();
        assert_eq!(unacked, [(1, 4), (6, 59)]);
    }

    #[test]
    fn sender_matches_a_model() {
        let mut rng = Rng(42);
        let start = Psn::new(0xff_fc00);
        let mut s = SendWindow::<2>::new(start);
        let mut outstanding = BTreeSet::new();
        let mut next = 0u32;
        for _ in 0..100_000 {
            if rng.below(2) == 0 {
                match s.send() {
                    Some(p) => {
                        assert_eq!(p, start.add(next));
                        assert!(outstanding.first().is_none_or(|&o| next - o < 128));
                        outstanding.insert(next);
                        next += 1;
                    }
                    None => assert!(next - outstanding.first().copied().unwrap() >= 128),
                }
            } else if next > 0 {
                let off = next.saturating_sub(1 + rng.below(140));
                let r = s.ack(start.add(off));
                let want = if outstanding.remove(&off) {
                    AckResult::New
                } else {
                    AckResult::Duplicate
                };
                assert_eq!(r, want);
            }
            let oldest = outstanding.first().copied().unwrap_or(next);
            assert_eq!(s.oldest_unacked(), start.add(oldest));
            assert_eq!(s.in_flight(), next - oldest);
            assert_eq!(s.outstanding(), outstanding.len() as u32);
        }
    }
}
