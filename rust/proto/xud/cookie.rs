// SPDX-License-Identifier: GPL-2.0

//! Stream cookies (Documentation/xud.rst, "Stream cookies"): what a
//! sender must echo in every data packet before a receiver opens a window
//! for its stream, and keeps echoing while the window is open.
//!
//! A cookie is the receiver's own statement "stream S from (GID, QPN) to
//! my QP asked me at time T", sealed with a keyed MAC (SipHash-2-4 under a
//! random key each QP draws when it is created), so the receiver keeps no
//! state for a sender it challenges: it recomputes the MAC from the packet
//! and its key. The time is the receiver's own clock, in ticks of
//! [`TICK_NS`]; no clock is shared.
//!
//! Two rules make a delayed copy of any age harmless (xud.rst gives the
//! argument): a window opens only for a cookie at most [`MAX_AGE_TICKS`]
//! old, younger than the reclaim's quiet time; and a cookie is issued
//! only when the receiver holds no window for the stream, so every
//! cookie's time lies before the window it opened or after the window
//! was reclaimed. An open window takes only cookies no older than the one
//! that opened it. And since the MAC binds the source, an off-path party
//! that never sees a challenge cannot place a byte.

use super::super::siphash::{self, Key};
use super::{seq_before, QUIET_NS};

/// A cookie's time unit: 2^27 ns (about 134 ms). A 32-bit time lasts 18
/// years of the receiver's uptime before it wraps.
pub const TICK_SHIFT: u32 = 27;
pub const TICK_NS: u64 = 1 << TICK_SHIFT;

/// The oldest cookie a window opens for, in ticks: a cookie time `T` read
/// at tick `N` was issued less than `(N - T + 1) * TICK_NS` ago, which
/// this keeps strictly below [`QUIET_NS`] (xud.rst: the copy that could
/// meet a reclaimed window is older than that).
pub const MAX_AGE_TICKS: u32 = (QUIET_NS / TICK_NS) as u32 - 1;

/// The receiver's clock in cookie ticks.
pub const fn tick(now: u64) -> u32 {
    (now >> TICK_SHIFT) as u32
}

/// A stream cookie as it travels (the XCK header): the time it was
/// issued and the MAC. All zero: no cookie (a sender that has none yet).
/// Kept as three 32-bit words so that a parked sending stream holds it in
/// 12 bytes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct Cookie {
    time: u32,
    mac_hi: u32,
    mac_lo: u32,
}

impl Cookie {
    /// No cookie.
    pub const NONE: Cookie = Cookie {
        time: 0,
        mac_hi: 0,
        mac_lo: 0,
    };

    pub const fn new(time: u32, mac: u64) -> Self {
        Self {
            time,
            mac_hi: (mac >> 32) as u32,
            mac_lo: mac as u32,
        }
    }

    /// When it was issued, in the issuer's ticks.
    pub const fn time(&self) -> u32 {
        self.time
    }

    pub const fn mac(&self) -> u64 {
        (self.mac_hi as u64) << 32 | self.mac_lo as u64
    }

    pub const fn is_none(&self) -> bool {
        self.time == 0 && self.mac_hi == 0 && self.mac_lo == 0
    }

    /// Issued after `other` (serial arithmetic on the 32-bit time).
    pub const fn is_newer_than(&self, other: &Cookie) -> bool {
        seq_before(other.time, self.time)
    }

    /// At most [`MAX_AGE_TICKS`] old at `now` (a time ahead of `now` is
    /// no cookie this receiver issued: not fresh).
    pub const fn is_fresh(&self, now: u64) -> bool {
        tick(now).wrapping_sub(self.time) <= MAX_AGE_TICKS
    }
}

/// What a cookie binds: the stream and both ends. The source GID is the
/// packet's IP source (an IPv4 address mapped into a GID), so a challenge
/// goes where the packet claims to come from, and a cookie learnt at one
/// address is worth nothing from another.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Binding {
    pub src_gid: [u8; 16],
    pub src_qpn: u32,
    pub dst_qpn: u32,
    pub stream: u64,
}

impl Binding {
    /// The bytes the MAC covers, the time last.
    fn message(&self, time: u32) -> [u8; 36] {
        let mut m = [0u8; 36];
        m[..16].copy_from_slice(&self.src_gid);
        m[16..20].copy_from_slice(&self.src_qpn.to_be_bytes());
        m[20..24].copy_from_slice(&self.dst_qpn.to_be_bytes());
        m[24..32].copy_from_slice(&self.stream.to_be_bytes());
        m[32..].copy_from_slice(&time.to_be_bytes());
        m
    }
}

/// A QP's cookie secret: 128 random bits drawn with the QP (a QP created
/// again with the same number takes none of its predecessor's cookies).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CookieKey(Key);

impl CookieKey {
    pub const fn new(k0: u64, k1: u64) -> Self {
        Self(Key { k0, k1 })
    }

    fn mac(&self, b: &Binding, time: u32) -> u64 {
        siphash::siphash24(self.0, &b.message(time))
    }

    /// The cookie to challenge with at `now`. (A MAC of 0 with time 0 would
    /// read as no cookie: that time is the first 134 ms of uptime, and the
    /// chance 2^-64; the sender then gets challenged again.)
    pub fn issue(&self, b: &Binding, now: u64) -> Cookie {
        let time = tick(now);
        Cookie::new(time, self.mac(b, time))
    }

    /// Whether `c` is a cookie this key issued for `b` (at any time).
    pub fn verify(&self, b: &Binding, c: &Cookie) -> bool {
        !c.is_none() && self.mac(b, c.time) == c.mac()
    }
}

/// The per-QP bound on challenges: at most [`CHALLENGES_PER_MS`] in each
/// millisecond, so that a flood of cookie-less packets (forged sources
/// among them) costs at most that many small answers, and no memory per
/// source. Beyond it a packet is dropped unanswered; its sender's
/// retransmission asks again.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ChallengeLimit {
    window: u64,
    sent: u32,
}

/// Challenges a QP sends per millisecond at most.
pub const CHALLENGES_PER_MS: u32 = 64;

impl ChallengeLimit {
    pub const fn new() -> Self {
        Self { window: 0, sent: 0 }
    }

    /// Whether a challenge may go at `now` (counted if so).
    pub fn allow(&mut self, now: u64) -> bool {
        let ms = now / 1_000_000;
        if ms != self.window {
            self.window = ms;
            self.sent = 0;
        }
        if self.sent >= CHALLENGES_PER_MS {
            return false;
        }
        self.sent += 1;
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const KEY: CookieKey = CookieKey::new(0x0123_4567_89ab_cdef, 0xfedc_ba98_7654_3210);
    const B: Binding = Binding {
        src_gid: [0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 169, 254, 1, 2],
        src_qpn: 0x11,
        dst_qpn: 0x12,
        stream: 0x5eed,
    };

    #[test]
    fn a_cookie_verifies_for_what_it_binds_only() {
        let now = 50 * 1_000_000_000;
        let c = KEY.issue(&B, now);
        assert!(!c.is_none() && KEY.verify(&B, &c));
        assert_eq!(c.time(), tick(now));
        for other in [
            Binding { src_qpn: 0x13, ..B },
            Binding { dst_qpn: 0x13, ..B },
            Binding {
                stream: 0x5eee,
                ..B
            },
            Binding {
                src_gid: [0xfe, 0x80, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1],
                ..B
            },
        ] {
            assert!(!KEY.verify(&other, &c), "{other:?}");
        }
        assert!(!CookieKey::new(1, 2).verify(&B, &c), "another QP's key");
        let moved = Cookie::new(c.time() + 1, c.mac());
        assert!(!KEY.verify(&B, &moved), "the time is sealed too");
        let flipped = Cookie::new(c.time(), c.mac() ^ 1);
        assert!(!KEY.verify(&B, &flipped));
        assert!(!KEY.verify(&B, &Cookie::NONE));
    }

    #[test]
    fn a_cookie_is_fresh_for_less_than_the_quiet_time() {
        let issued = 1_000 * 1_000_000_000 + 12_345;
        let c = KEY.issue(&B, issued);
        assert!(c.is_fresh(issued));
        // Fresh at every instant strictly less than QUIET later that the
        // tick count allows, never at QUIET or after.
        let mut last_fresh = issued;
        let mut t = issued;
        while t < issued + 2 * QUIET_NS {
            if c.is_fresh(t) {
                last_fresh = t;
            }
            t += 1_000_000;
        }
        assert!(last_fresh - issued < QUIET_NS, "{}", last_fresh - issued);
        assert!(last_fresh - issued > QUIET_NS - 2 * TICK_NS);
        assert!(!c.is_fresh(issued + QUIET_NS));
        assert!(!c.is_fresh(issued + 180 * 1_000_000_000));
        // Issued "in the future": no cookie of this receiver's clock.
        assert!(!c.is_fresh(issued - 2 * TICK_NS));
    }

    #[test]
    fn newer_is_serial_in_the_time() {
        let a = Cookie::new(5, 1);
        let b = Cookie::new(6, 1);
        assert!(b.is_newer_than(&a) && !a.is_newer_than(&b) && !a.is_newer_than(&a));
        assert!(Cookie::new(0, 1).is_newer_than(&Cookie::new(u32::MAX, 1)));
    }

    #[test]
    fn challenges_are_bounded_per_millisecond() {
        let mut l = ChallengeLimit::new();
        let t = 7_000_000;
        for _ in 0..CHALLENGES_PER_MS {
            assert!(l.allow(t));
        }
        assert!(!l.allow(t + 999_999));
        assert!(l.allow(t + 1_000_000));
    }
}
