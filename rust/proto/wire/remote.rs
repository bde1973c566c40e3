// SPDX-License-Identifier: GPL-2.0

//! The remote address both the RETH (IBTA 9.3.3) and the AtomicETH (IBTA
//! 9.3.4) start with, read and written in one place for both:
//!
//! ```text
//!  0..8    virtual address
//!  8..12   R_Key
//! ```
//!
//! The functions take the header's bytes, which its view has checked to
//! hold at least [`LEN`] of them.

use super::field::{get_u32, get_u64, set_u32, set_u64};

/// Bytes of the remote address.
pub(super) const LEN: usize = 12;

const VA: usize = 0;
const RKEY: usize = 8;

/// The remote virtual address.
pub(super) fn va(header: &[u8]) -> u64 {
    get_u64(header, VA)
}

/// The remote key.
pub(super) fn rkey(header: &[u8]) -> u32 {
    get_u32(header, RKEY)
}

/// Sets what [`va`] reads.
pub(super) fn set_va(header: &mut [u8], va: u64) {
    set_u64(header, VA, va);
}

/// Sets what [`rkey`] reads.
pub(super) fn set_rkey(header: &mut [u8], rkey: u32) {
    set_u32(header, RKEY, rkey);
}

#[cfg(test)]
mod tests {
    use super::super::{atomic, reth};
    use super::LEN;

    /// The same bytes read as a RETH and as an AtomicETH give the same
    /// remote address, and either view writes it the same way.
    #[test]
    fn reth_and_atomic_eth_agree() {
        let bytes: [u8; 28] = core::array::from_fn(|i| 0x10 + i as u8);
        let r = reth::Header::new_checked(&bytes[..]).unwrap();
        let a = atomic::Header::new_checked(&bytes[..]).unwrap();
        assert_eq!(r.va(), 0x1011_1213_1415_1617);
        assert_eq!(r.rkey(), 0x1819_1a1b);
        assert_eq!((a.va(), a.rkey()), (r.va(), r.rkey()));

        let mut via_reth = bytes;
        let mut h = reth::Header::new_checked(&mut via_reth[..]).unwrap();
        h.set_va(0xfedc_ba98_7654_3210);
        h.set_rkey(0xcafe_f00d);
        let mut via_atomic = bytes;
        let mut h = atomic::Header::new_checked(&mut via_atomic[..]).unwrap();
        h.set_va(0xfedc_ba98_7654_3210);
        h.set_rkey(0xcafe_f00d);
        assert_eq!(via_reth, via_atomic);
        assert_eq!(
            &via_reth[..LEN],
            &[0xfe, 0xdc, 0xba, 0x98, 0x76, 0x54, 0x32, 0x10, 0xca, 0xfe, 0xf0, 0x0d]
        );
        assert_eq!(
            via_reth[LEN..],
            bytes[LEN..],
            "nothing after the remote address changes"
        );
    }
}
