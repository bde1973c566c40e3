// SPDX-License-Identifier: GPL-2.0

//! The two atomic headers (IBTA 9.3.4 and 9.5.3).
//!
//! AtomicETH, 28 bytes, follows the BTH of COMPARE_SWAP and FETCH_ADD:
//!
//! ```text
//!  0..8    virtual address (8-byte aligned)
//!  8..12   R_Key
//!  12..20  swap data (COMPARE_SWAP) or add data (FETCH_ADD)
//!  20..28  compare data (COMPARE_SWAP only)
//! ```
//!
//! AtomicAckETH, 8 bytes, follows the AETH of ATOMIC_ACKNOWLEDGE and
//! carries the value the target held before the operation.
//!
//! Both sit at offsets that are not 8-byte aligned within the packet (the
//! 64-bit fields start 12 bytes into a header that starts 12 or 16 bytes
//! in), so they are read byte-wise, never through a `u64` reference.

use super::field::{get_u64, set_u64};
use super::{remote, Error};

/// Length of the AtomicETH.
pub const HEADER_LEN: usize = 28;

/// Length of the AtomicAckETH.
pub const ACK_HEADER_LEN: usize = 8;

/// After the remote address (`remote`: VA and R_Key).
const SWAP_ADD: usize = remote::LEN;
const COMPARE: usize = 20;
const _: () = assert!(SWAP_ADD + 8 == COMPARE && COMPARE + 8 == HEADER_LEN);

header_view!(
    /// A view of an AtomicETH at the start of a buffer.
    Header,
    HEADER_LEN
);

impl<T: AsRef<[u8]>> Header<T> {
    /// Remote virtual address of the 8-byte target.
    pub fn va(&self) -> u64 {
        remote::va(self.b())
    }

    /// Remote key of the target MR.
    pub fn rkey(&self) -> u32 {
        remote::rkey(self.b())
    }

    /// The value to swap in (COMPARE_SWAP) or to add (FETCH_ADD).
    pub fn swap_add(&self) -> u64 {
        get_u64(self.b(), SWAP_ADD)
    }

    /// The value to compare with (COMPARE_SWAP; FETCH_ADD ignores it).
    pub fn compare(&self) -> u64 {
        get_u64(self.b(), COMPARE)
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Header<T> {
    /// Sets what [`Self::va`] reads.
    pub fn set_va(&mut self, va: u64) {
        remote::set_va(self.m(), va);
    }

    /// Sets what [`Self::rkey`] reads.
    pub fn set_rkey(&mut self, rkey: u32) {
        remote::set_rkey(self.m(), rkey);
    }

    /// Sets what [`Self::swap_add`] reads.
    pub fn set_swap_add(&mut self, v: u64) {
        set_u64(self.m(), SWAP_ADD, v);
    }

    /// Sets what [`Self::compare`] reads.
    pub fn set_compare(&mut self, v: u64) {
        set_u64(self.m(), COMPARE, v);
    }
}

/// A decoded AtomicETH.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Repr {
    /// Remote virtual address.
    pub va: u64,
    /// Remote key.
    pub rkey: u32,
    /// Swap (COMPARE_SWAP) or add (FETCH_ADD) operand.
    pub swap_add: u64,
    /// Compare operand (COMPARE_SWAP).
    pub compare: u64,
}

impl Repr {
    /// Decodes the header.
    pub fn parse<T: AsRef<[u8]>>(h: &Header<T>) -> Self {
        Self {
            va: h.va(),
            rkey: h.rkey(),
            swap_add: h.swap_add(),
            compare: h.compare(),
        }
    }

    /// Writes the header.
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, h: &mut Header<T>) {
        h.set_va(self.va);
        h.set_rkey(self.rkey);
        h.set_swap_add(self.swap_add);
        h.set_compare(self.compare);
    }
}

header_view!(
    /// A view of an AtomicAckETH at the start of a buffer.
    AckHeader,
    ACK_HEADER_LEN
);

impl<T: AsRef<[u8]>> AckHeader<T> {
    /// The remote value before the atomic operation.
    pub fn orig(&self) -> u64 {
        get_u64(self.b(), 0)
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> AckHeader<T> {
    /// Sets what [`Self::orig`] reads.
    pub fn set_orig(&mut self, v: u64) {
        set_u64(self.m(), 0, v);
    }
}

/// A decoded AtomicAckETH.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AckRepr {
    /// The remote value before the operation.
    pub orig: u64,
}

impl AckRepr {
    /// Decodes the header.
    pub fn parse<T: AsRef<[u8]>>(h: &AckHeader<T>) -> Self {
        Self { orig: h.orig() }
    }

    /// Writes the header.
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, h: &mut AckHeader<T>) {
        h.set_orig(self.orig);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn atomic_eth_round_trips() {
        let r = Repr {
            va: 0x1122_3344_5566_7788,
            rkey: 0x99aa_bbcc,
            swap_add: 1,
            compare: u64::MAX - 1,
        };
        let mut out = [0u8; 28];
        r.emit(&mut Header::new_checked(&mut out[..]).unwrap());
        assert_eq!(
            &out[..12],
            &[0x11, 0x22, 0x33, 0x44, 0x55, 0x66, 0x77, 0x88, 0x99, 0xaa, 0xbb, 0xcc]
        );
        assert_eq!(&out[12..20], &[0, 0, 0, 0, 0, 0, 0, 1]);
        assert_eq!(
            &out[20..],
            &[0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xfe]
        );
        assert_eq!(Repr::parse(&Header::new_checked(&out[..]).unwrap()), r);
        assert_eq!(
            Header::new_checked(&out[..27]).err(),
            Some(Error::Truncated)
        );
    }

    #[test]
    fn atomic_ack_eth_round_trips() {
        let mut out = [0u8; 8];
        AckRepr {
            orig: 0x0102_0304_0506_0708,
        }
        .emit(&mut AckHeader::new_checked(&mut out[..]).unwrap());
        assert_eq!(out, [1, 2, 3, 4, 5, 6, 7, 8]);
        assert_eq!(
            AckRepr::parse(&AckHeader::new_checked(&out[..]).unwrap()).orig,
            0x0102_0304_0506_0708
        );
        assert_eq!(
            AckHeader::new_checked(&out[..7]).err(),
            Some(Error::Truncated)
        );
    }
}
