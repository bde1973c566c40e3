// SPDX-License-Identifier: GPL-2.0

//! XUD acknowledgement header (Documentation/xud.rst, "ACK and NAK"):
//! follows the DETH of every XUD_ACK and XUD_NAK. 32 bytes:
//!
//! ```text
//!  0..8    stream: the stream answered (echoes the XETH's)
//!  8..12   inc: the answering QP's incarnation
//! 12..16   reserved
//! 16..32   sack: bit i set if PSN BTH.PSN + 1 + i was placed
//! ```
//!
//! The BTH's PSN is the receiver's window base (every PSN before it was
//! placed or given up); `sack` names the placed PSNs among the 127 after
//! it, a whole window of 128 with the base, so a sender learns everything
//! the receiver holds from any one ACK. Bit 0 of `sack` is the least
//! significant bit of its last byte: the 16 bytes are one big-endian
//! 128-bit number.

use super::field::{get_u32, get_u64, set_u32, set_u64};
use super::Error;

/// Length of the XACK.
pub const HEADER_LEN: usize = 32;

/// PSNs after the base that `sack` covers.
pub const SACK_BITS: u32 = 127;

const STREAM: usize = 0;
const INC: usize = 8;
const RESV: usize = 12;
const SACK: usize = 16;

header_view!(
    /// A view of an XACK at the start of a buffer.
    Header,
    HEADER_LEN
);

impl<T: AsRef<[u8]>> Header<T> {
    /// The stream answered.
    pub fn stream(&self) -> u64 {
        get_u64(self.b(), STREAM)
    }

    /// The answering QP's incarnation.
    pub fn inc(&self) -> u32 {
        get_u32(self.b(), INC)
    }

    /// The reserved word (senders write 0).
    pub fn resv32(&self) -> u32 {
        get_u32(self.b(), RESV)
    }

    /// The placed PSNs after the base, bit `i` for `base + 1 + i`.
    pub fn sack(&self) -> u128 {
        let hi = u128::from(get_u64(self.b(), SACK));
        let lo = u128::from(get_u64(self.b(), SACK + 8));
        (hi << 64) | lo
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Header<T> {
    /// Sets what [`Self::stream`] reads.
    pub fn set_stream(&mut self, v: u64) {
        set_u64(self.m(), STREAM, v);
    }

    /// Sets what [`Self::inc`] reads.
    pub fn set_inc(&mut self, v: u32) {
        set_u32(self.m(), INC, v);
    }

    /// Sets the reserved word (senders write 0).
    pub fn set_resv32(&mut self, v: u32) {
        set_u32(self.m(), RESV, v);
    }

    /// Sets what [`Self::sack`] reads.
    pub fn set_sack(&mut self, v: u128) {
        set_u64(self.m(), SACK, (v >> 64) as u64);
        set_u64(self.m(), SACK + 8, v as u64);
    }
}

/// A decoded XACK.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Repr {
    /// The stream answered (never 0).
    pub stream: u64,
    /// The answering QP's incarnation (never 0).
    pub inc: u32,
    /// The placed PSNs after the base; bit 127 is never set.
    pub sack: u128,
}

impl Repr {
    /// Decodes the header. A zero `stream` or `inc` (neither is ever
    /// drawn) or the top `sack` bit (beyond the window) is malformed; the
    /// reserved word is ignored.
    pub fn parse<T: AsRef<[u8]>>(h: &Header<T>) -> Result<Self, Error> {
        let r = Self {
            stream: h.stream(),
            inc: h.inc(),
            sack: h.sack(),
        };
        if r.stream == 0 || r.inc == 0 || r.sack >> SACK_BITS != 0 {
            return Err(Error::BadField);
        }
        Ok(r)
    }

    /// Whether `sack` says PSN `base + 1 + i` was placed.
    pub fn placed_after_base(&self, i: u32) -> bool {
        i < SACK_BITS && self.sack >> i & 1 != 0
    }

    /// Writes the XACK with its reserved word 0.
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, h: &mut Header<T>) {
        h.set_stream(self.stream);
        h.set_inc(self.inc);
        h.set_resv32(0);
        h.set_sack(self.sack);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_with_the_sack_as_one_big_endian_number() {
        let r = Repr {
            stream: 0xfedc_ba98_7654_3210,
            inc: 0x0102_0304,
            sack: 1 | 1 << 64 | 1 << 126,
        };
        let mut out = [0xaau8; HEADER_LEN];
        r.emit(&mut Header::new_checked(&mut out[..]).unwrap());
        assert_eq!(out[..8], [0xfe, 0xdc, 0xba, 0x98, 0x76, 0x54, 0x32, 0x10]);
        assert_eq!(out[8..12], [1, 2, 3, 4]);
        assert_eq!(out[12..16], [0; 4], "reserved written as 0");
        assert_eq!(out[16], 0x40, "bit 126 in the first byte");
        assert_eq!(out[23], 0x01, "bit 64");
        assert_eq!(out[31], 0x01, "bit 0 in the last byte");
        let h = Header::new_checked(&out[..]).unwrap();
        assert_eq!(Repr::parse(&h), Ok(r));
        assert!(r.placed_after_base(0) && r.placed_after_base(64) && r.placed_after_base(126));
        assert!(!r.placed_after_base(1) && !r.placed_after_base(127) && !r.placed_after_base(500));
    }

    #[test]
    fn rejects_what_no_receiver_writes() {
        let r = Repr {
            stream: 5,
            inc: 6,
            sack: 0,
        };
        let mut b = [0u8; HEADER_LEN];
        r.emit(&mut Header::new_checked(&mut b[..]).unwrap());
        assert_eq!(
            Header::new_checked(&b[..HEADER_LEN - 1]).err(),
            Some(Error::Truncated)
        );
        b[RESV] = 0xff;
        assert_eq!(
            Repr::parse(&Header::new_checked(&b[..]).unwrap()),
            Ok(r),
            "reserved ignored"
        );
        let mut z = b;
        z[..8].fill(0);
        assert_eq!(
            Repr::parse(&Header::new_checked(&z[..]).unwrap()),
            Err(Error::BadField)
        );
        let mut z = b;
        z[INC..INC + 4].fill(0);
        assert_eq!(
            Repr::parse(&Header::new_checked(&z[..]).unwrap()),
            Err(Error::BadField)
        );
        let mut z = b;
        z[SACK] = 0x80;
        assert_eq!(
            Repr::parse(&Header::new_checked(&z[..]).unwrap()),
            Err(Error::BadField),
            "bit 127 lies beyond the window"
        );
    }
}
