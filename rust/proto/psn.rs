// SPDX-License-Identifier: GPL-2.0

//! Packet sequence numbers: 24-bit counters compared within a half-space
//! window (IBTA 9.7.1), so "before" and "after" survive wrap-around.

use core::cmp::Ordering;

/// A 24-bit packet sequence number.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug, Default)]
pub struct Psn(u32);

impl Psn {
    pub const BITS: u32 = 24;
    pub const MASK: u32 = (1 << Self::BITS) - 1;
    /// Half the number space: the furthest two PSNs can be apart and still
    /// be ordered.
    pub const HALF: u32 = 1 << (Self::BITS - 1);

    /// Truncates to 24 bits, as the wire field does.
    pub const fn new(value: u32) -> Self {
        Self(value & Self::MASK)
    }

    pub const fn value(self) -> u32 {
        self.0
    }

    /// `self + n`, wrapping at 2^24.
    pub const fn add(self, n: u32) -> Self {
        Self::new(self.0.wrapping_add(n))
    }

    /// The next PSN.
    pub const fn next(self) -> Self {
        self.add(1)
    }

    /// Signed distance from `other` to `self`, in (-2^23, 2^23].
    pub const fn diff(self, other: Psn) -> i32 {
        // Shift the 24-bit difference into the top of an i32 and back to
        // sign-extend it.
        ((self.0.wrapping_sub(other.0) << 8) as i32) >> 8
    }

    /// Serial-number comparison. IB leaves PSNs exactly half the space
    /// apart unordered; `diff` puts that case on the `Less` side.
    pub fn cmp_serial(self, other: Psn) -> Ordering {
        self.diff(other).cmp(&0)
    }

    /// `self` is strictly before `other`.
    pub fn before(self, other: Psn) -> bool {
        self.diff(other) < 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wraps_at_24_bits() {
        assert_eq!(Psn::new(0xff_ffff).next(), Psn::new(0));
        assert_eq!(Psn::new(0x1_000_005).value(), 5);
        assert_eq!(Psn::new(0xff_fffe).add(5).value(), 3);
    }

    #[test]
    fn diff_is_signed_across_wrap() {
        assert_eq!(Psn::new(3).diff(Psn::new(0xff_fffe)), 5);
        assert_eq!(Psn::new(0xff_fffe).diff(Psn::new(3)), -5);
        assert_eq!(Psn::new(7).diff(Psn::new(7)), 0);
        assert_eq!(
            Psn::new(Psn::HALF - 1).diff(Psn::new(0)),
            (Psn::HALF - 1) as i32
        );
        assert!(Psn::new(0xff_ffff).before(Psn::new(0)));
        assert!(!Psn::new(0).before(Psn::new(0xff_ffff)));
    }

    #[test]
    fn ordering_is_antisymmetric_within_half_space() {
        // Exhaustive over distances, sampled over bases.
        for base in [0u32, 1, 0x7f_ffff, 0x80_0000, 0xff_fff0, 0xff_ffff] {
            let a = Psn::new(base);
            for d in 1..Psn::HALF {
                if d % 4099 != 1 && d > 70000 {
                    continue;
                }
                let b = a.add(d);
                assert!(a.before(b), "{base:#x} + {d}");
                assert!(!b.before(a), "{base:#x} + {d}");
                assert_eq!(b.diff(a), d as i32);
            }
        }
    }
}
