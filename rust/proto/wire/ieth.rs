// SPDX-License-Identifier: GPL-2.0

//! Invalidate Extended Transport Header (IBTA 9.3.6): the R_Key a SEND
//! with invalidate asks the responder to invalidate. 4 bytes.

use super::field::{get_u32, set_u32};
use super::Error;

/// Length of the IETH.
pub const HEADER_LEN: usize = 4;

header_view!(
    /// A view of an IETH at the start of a buffer.
    Header,
    HEADER_LEN
);

impl<T: AsRef<[u8]>> Header<T> {
    /// The R_Key to invalidate.
    pub fn rkey(&self) -> u32 {
        get_u32(self.b(), 0)
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Header<T> {
    /// Sets what [`Self::rkey`] reads.
    pub fn set_rkey(&mut self, rkey: u32) {
        set_u32(self.m(), 0, rkey);
    }
}

/// A decoded IETH.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Repr {
    /// Remote key.
    pub rkey: u32,
}

impl Repr {
    /// Decodes the header.
    pub fn parse<T: AsRef<[u8]>>(h: &Header<T>) -> Self {
        Self { rkey: h.rkey() }
    }

    /// Writes the header.
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, h: &mut Header<T>) {
        h.set_rkey(self.rkey);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips() {
        let mut out = [0u8; 4];
        Repr { rkey: 0x0102_0304 }.emit(&mut Header::new_checked(&mut out[..]).unwrap());
        assert_eq!(out, [1, 2, 3, 4]);
        assert_eq!(
            Repr::parse(&Header::new_checked(&out[..]).unwrap()).rkey,
            0x0102_0304
        );
        assert_eq!(Header::new_checked(&out[..3]).err(), Some(Error::Truncated));
    }
}
