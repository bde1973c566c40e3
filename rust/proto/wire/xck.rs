// SPDX-License-Identifier: GPL-2.0

//! XUD cookie header (Documentation/xud.rst, "Stream cookies"): the
//! stream cookie a data packet echoes (after its XETH), or a challenge
//! gives (after its XACK). 12 bytes:
//!
//! ```text
//!  0..4    time: when the receiver issued it, in its own ticks
//!  4..12   mac: SipHash-2-4 of the stream, both ends and the time
//! ```
//!
//! All zero in a data packet: the sender has no cookie yet.

use super::super::xud::cookie::Cookie;
use super::field::{get_u32, get_u64, set_u32, set_u64};
use super::Error;

/// Length of the XCK.
pub const HEADER_LEN: usize = 12;

const TIME: usize = 0;
const MAC: usize = 4;

header_view!(
    /// A view of an XCK at the start of a buffer.
    Header,
    HEADER_LEN
);

impl<T: AsRef<[u8]>> Header<T> {
    /// When the cookie was issued (receiver's ticks).
    pub fn time(&self) -> u32 {
        get_u32(self.b(), TIME)
    }

    /// The cookie's MAC.
    pub fn mac(&self) -> u64 {
        get_u64(self.b(), MAC)
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Header<T> {
    /// Sets what [`Self::time`] reads.
    pub fn set_time(&mut self, v: u32) {
        set_u32(self.m(), TIME, v);
    }

    /// Sets what [`Self::mac`] reads.
    pub fn set_mac(&mut self, v: u64) {
        set_u64(self.m(), MAC, v);
    }
}

/// A decoded XCK: the cookie ([`Cookie::NONE`] if all zero).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Repr {
    pub cookie: Cookie,
}

impl Repr {
    /// Decodes the header: any value is a cookie or none; whether it is
    /// one the receiver issued is the receiver's to check.
    pub fn parse<T: AsRef<[u8]>>(h: &Header<T>) -> Result<Self, Error> {
        Ok(Self {
            cookie: Cookie::new(h.time(), h.mac()),
        })
    }

    /// Writes the XCK.
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, h: &mut Header<T>) {
        h.set_time(self.cookie.time());
        h.set_mac(self.cookie.mac());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_big_endian() {
        let bytes: [u8; HEADER_LEN] = [
            0x01, 0x02, 0x03, 0x04, // time
            0x89, 0xab, 0xcd, 0xef, 0x01, 0x23, 0x45, 0x67, // mac
        ];
        let h = Header::new_checked(&bytes[..]).unwrap();
        let r = Repr::parse(&h).unwrap();
        assert_eq!(r.cookie, Cookie::new(0x0102_0304, 0x89ab_cdef_0123_4567));
        let mut out = [0xaau8; HEADER_LEN];
        r.emit(&mut Header::new_checked(&mut out[..]).unwrap());
        assert_eq!(out, bytes);
        let zero = [0u8; HEADER_LEN];
        let none = Repr::parse(&Header::new_checked(&zero[..]).unwrap()).unwrap();
        assert!(none.cookie.is_none());
        assert_eq!(
            Header::new_checked(&bytes[..HEADER_LEN - 1]).err(),
            Some(Error::Truncated)
        );
    }
}
