// SPDX-License-Identifier: GPL-2.0

//! Memory windows' arithmetic: where a remote access through a bound
//! window lands among its MR's addresses, and the rkey a bind gives it.
//! The rights, PD and QP checks are the driver's (`driver/mr.rs`), over
//! ib_core's access flags.

/// The range of an MR a window is bound to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Range {
    /// The MR address of the window's first byte.
    pub addr: u64,
    /// Its length in bytes.
    pub length: u64,
    /// Users address the window from 0 (`IB_ZERO_BASED`), not by the
    /// MR's addresses.
    pub zero_based: bool,
}

impl Range {
    /// The MR address where `len` bytes at `va` (as the window's user
    /// names them) start, if they lie inside the window; `None` for
    /// anything outside it, wrapping included. An empty window holds
    /// nothing, not even an empty access.
    pub fn target(&self, va: u64, len: u64) -> Option<u64> {
        if self.length == 0 {
            return None;
        }
        let off = if self.zero_based {
            va
        } else {
            va.checked_sub(self.addr)?
        };
        if off.checked_add(len)? > self.length {
            return None;
        }
        self.addr.checked_add(off)
    }
}

/// The key of a window now named `key` after a bind asking for
/// `requested`: the index (high 24 bits) stays the window's, the low 8
/// bits are the binder's (IBTA 10.6.7.2.4, as rxe does).
pub const fn bound_key(key: u32, requested: u32) -> u32 {
    (key & !0xff) | (requested & 0xff)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_window_addressed_by_the_mrs_addresses() {
        let w = Range {
            addr: 0x1000,
            length: 0x100,
            zero_based: false,
        };
        assert_eq!(w.target(0x1000, 0x100), Some(0x1000));
        assert_eq!(w.target(0x10f8, 8), Some(0x10f8));
        assert_eq!(w.target(0x10f9, 8), None, "past its end");
        assert_eq!(w.target(0xfff, 1), None, "before its start");
        assert_eq!(w.target(0x1100, 0), Some(0x1100), "empty, at its end");
        assert_eq!(w.target(u64::MAX, 2), None, "wrapping");
        assert_eq!(w.target(0x1001, u64::MAX), None, "wrapping");
    }

    #[test]
    fn a_zero_based_window_counts_from_0() {
        let w = Range {
            addr: 0x7f00_0000_1000,
            length: 64,
            zero_based: true,
        };
        assert_eq!(w.target(0, 64), Some(0x7f00_0000_1000));
        assert_eq!(w.target(56, 8), Some(0x7f00_0000_1038));
        assert_eq!(w.target(57, 8), None);
        assert_eq!(w.target(0x7f00_0000_1000, 8), None, "not by MR address");
        let top = Range {
            addr: u64::MAX - 3,
            length: 8,
            zero_based: true,
        };
        assert_eq!(top.target(4, 1), None, "an MR address past 2^64");
    }

    #[test]
    fn an_empty_window_grants_nothing() {
        let w = Range {
            addr: 0x1000,
            length: 0,
            zero_based: false,
        };
        assert_eq!(w.target(0x1000, 0), None);
        assert_eq!(w.target(0x1000, 1), None);
    }

    #[test]
    fn a_bind_sets_the_low_byte_of_the_key_only() {
        assert_eq!(bound_key(0x0001_0203, 0x0001_0204), 0x0001_0204);
        assert_eq!(bound_key(0x0001_0203, 0xdead_be12), 0x0001_0212);
        assert_eq!(bound_key(0xffff_ff00, 0xff), 0xffff_ffff);
    }
}
