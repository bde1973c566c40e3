// SPDX-License-Identifier: GPL-2.0

//! IB path MTUs and how they fit in an Ethernet link MTU.

/// Bytes reserved for headers (IP header to ICRC) when mapping a link MTU
/// to an IB MTU. rxe reserves 80; rxud uses the same figure so that both
/// ends of a mixed rxud/rxe link report the same active MTU.
pub const ROCE_MAX_HDR_LEN: u32 = 80;

/// An IB MTU (`enum ib_mtu`): the largest payload of one packet.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Debug)]
pub enum IbMtu {
    Mtu256 = 1,
    Mtu512 = 2,
    Mtu1024 = 3,
    Mtu2048 = 4,
    Mtu4096 = 5,
}

impl IbMtu {
    /// All MTUs, smallest first.
    pub const ALL: [IbMtu; 5] = [
        IbMtu::Mtu256,
        IbMtu::Mtu512,
        IbMtu::Mtu1024,
        IbMtu::Mtu2048,
        IbMtu::Mtu4096,
    ];

    /// The code ib_core and the verbs ABI use (1..=5).
    pub const fn code(self) -> u32 {
        self as u32
    }

    /// Payload bytes.
    pub const fn bytes(self) -> u32 {
        128 << (self as u32)
    }

    /// From the verbs code; `None` for anything else (user input).
    pub fn from_code(code: u32) -> Option<Self> {
        Self::ALL.into_iter().find(|m| m.code() == code)
    }

    /// The largest IB MTU whose packets fit in a link of `link_mtu` bytes
    /// (IP header onwards), or `None` if not even 256 bytes fit.
    pub fn for_link_mtu(link_mtu: u32) -> Option<Self> {
        let room = link_mtu.checked_sub(ROCE_MAX_HDR_LEN)?;
        Self::ALL.into_iter().rev().find(|m| m.bytes() <= room)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_and_sizes_match_the_verbs_enum() {
        assert_eq!(IbMtu::Mtu256.bytes(), 256);
        assert_eq!(IbMtu::Mtu4096.bytes(), 4096);
        for m in IbMtu::ALL {
            assert_eq!(IbMtu::from_code(m.code()), Some(m));
        }
        assert_eq!(IbMtu::from_code(0), None);
        assert_eq!(IbMtu::from_code(6), None);
    }

    #[test]
    fn link_mtu_mapping_matches_rxe() {
        // The values rxe reports for common link MTUs.
        assert_eq!(IbMtu::for_link_mtu(1500), Some(IbMtu::Mtu1024));
        assert_eq!(IbMtu::for_link_mtu(9000), Some(IbMtu::Mtu4096));
        assert_eq!(IbMtu::for_link_mtu(65536), Some(IbMtu::Mtu4096));
        assert_eq!(IbMtu::for_link_mtu(2048 + 80), Some(IbMtu::Mtu2048));
        assert_eq!(IbMtu::for_link_mtu(2048 + 79), Some(IbMtu::Mtu1024));
        assert_eq!(IbMtu::for_link_mtu(256 + 80), Some(IbMtu::Mtu256));
        assert_eq!(IbMtu::for_link_mtu(255 + 80), None);
        assert_eq!(IbMtu::for_link_mtu(0), None);
    }

    #[test]
    fn mapping_is_monotonic_and_always_fits() {
        let mut prev = None;
        for link in 0..20000u32 {
            let m = IbMtu::for_link_mtu(link);
            assert!(m >= prev, "not monotonic at {link}");
            if let Some(m) = m {
                assert!(m.bytes() + ROCE_MAX_HDR_LEN <= link);
            }
            prev = m;
        }
    }
}
