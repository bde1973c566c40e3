// SPDX-License-Identifier: GPL-2.0

//! RDMA Extended Transport Header (IBTA 9.3.3): where an RDMA WRITE or
//! READ goes. 16 bytes:
//!
//! ```text
//!  0..8    virtual address
//!  8..12   R_Key
//!  12..16  DMA length (of the whole message, not this packet)
//! ```
//!
//! XUD carries a RETH in every packet of a message (not only the first
//! one, as RC does), so that a responder can place any packet it receives
//! on its own; the header itself is the same.

use super::field::{get_u32, set_u32};
use super::{remote, Error};

/// Length of the RETH.
pub const HEADER_LEN: usize = 16;

/// After the remote address (`remote`: VA and R_Key).
const DMA_LEN: usize = remote::LEN;
const _: () = assert!(DMA_LEN + 4 == HEADER_LEN);

header_view!(
    /// A view of a RETH at the start of a buffer.
    Header,
    HEADER_LEN
);

impl<T: AsRef<[u8]>> Header<T> {
    /// Remote virtual address (or offset, for zero-based MRs).
    pub fn va(&self) -> u64 {
        remote::va(self.b())
    }

    /// Remote key of the target MR.
    pub fn rkey(&self) -> u32 {
        remote::rkey(self.b())
    }

    /// Bytes of the whole RDMA operation.
    pub fn dma_len(&self) -> u32 {
        get_u32(self.b(), DMA_LEN)
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

    /// Sets what [`Self::dma_len`] reads.
    pub fn set_dma_len(&mut self, len: u32) {
        set_u32(self.m(), DMA_LEN, len);
    }
}

/// A decoded RETH.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Repr {
    /// Remote virtual address.
    pub va: u64,
    /// Remote key.
    pub rkey: u32,
    /// Bytes of the whole RDMA operation.
    pub dma_len: u32,
}

impl Repr {
    /// Decodes the header.
    pub fn parse<T: AsRef<[u8]>>(h: &Header<T>) -> Self {
        Self {
            va: h.va(),
            rkey: h.rkey(),
            dma_len: h.dma_len(),
        }
    }

    /// Writes the header.
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, h: &mut Header<T>) {
        h.set_va(self.va);
        h.set_rkey(self.rkey);
        h.set_dma_len(self.dma_len);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_big_endian() {
        let bytes = [
            1, 2, 3, 4, 5, 6, 7, 8, 0xde, 0xad, 0xbe, 0xef, 0, 0, 0x10, 0,
        ];
        let h = Header::new_checked(&bytes[..]).unwrap();
        let r = Repr::parse(&h);
        assert_eq!(
            r,
            Repr {
                va: 0x0102_0304_0506_0708,
                rkey: 0xdead_beef,
                dma_len: 4096
            }
        );
        let mut out = [0u8; 16];
        r.emit(&mut Header::new_checked(&mut out[..]).unwrap());
        assert_eq!(out, bytes);
        assert_eq!(
            Header::new_checked(&bytes[..15]).err(),
            Some(Error::Truncated)
        );
    }
}
