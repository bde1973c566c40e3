// SPDX-License-Identifier: GPL-2.0

//! Datagram Extended Transport Header (IBTA 9.3.2): who sent a datagram
//! and the key it must present. 8 bytes:
//!
//! ```text
//!  0..4   Q_Key
//!  byte 4 reserved
//!  5..8   source QP (24 bits)
//! ```
//!
//! UD has no connection, so the receiver learns the sender's QP only from
//! here; XUD, connectionless too, uses the same header for the same
//! reason.

use super::field::{get_u24, get_u32, set_u24, set_u32};
use super::Error;

/// Length of the DETH.
pub const HEADER_LEN: usize = 8;

/// The Q_Key of the GSI QP (QP1), which a controlled Q_Key (high bit set)
/// in a send work request cannot impersonate.
pub const GSI_QKEY: u32 = 0x8001_0000;

const QKEY: usize = 0;
const RESV: usize = 4;
const SRC_QP: usize = 4;

header_view!(
    /// A view of a DETH at the start of a buffer.
    Header,
    HEADER_LEN
);

impl<T: AsRef<[u8]>> Header<T> {
    /// The Q_Key the receiving QP must have.
    pub fn qkey(&self) -> u32 {
        get_u32(self.b(), QKEY)
    }

    /// The reserved byte (senders write 0).
    pub fn resv8(&self) -> u8 {
        self.b()[RESV]
    }

    /// The sender's QP number (24 bits).
    pub fn src_qp(&self) -> u32 {
        get_u24(self.b(), SRC_QP)
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Header<T> {
    /// Sets what [`Self::qkey`] reads.
    pub fn set_qkey(&mut self, qkey: u32) {
        set_u32(self.m(), QKEY, qkey);
    }

    /// Sets the reserved byte (senders write 0).
    pub fn set_resv8(&mut self, v: u8) {
        self.m()[RESV] = v;
    }

    /// Sets the source QP (only the low 24 bits of `qpn` are used).
    pub fn set_src_qp(&mut self, qpn: u32) {
        set_u24(self.m(), SRC_QP, qpn & super::QPN_MASK);
    }
}

/// A decoded DETH.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Repr {
    /// The Q_Key.
    pub qkey: u32,
    /// The sender's QP number (24 bits).
    pub src_qp: u32,
}

impl Repr {
    /// Decodes the header.
    pub fn parse<T: AsRef<[u8]>>(h: &Header<T>) -> Self {
        Self {
            qkey: h.qkey(),
            src_qp: h.src_qp(),
        }
    }

    /// Writes the DETH with its reserved byte 0.
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, h: &mut Header<T>) {
        h.set_qkey(self.qkey);
        h.set_resv8(0);
        h.set_src_qp(self.src_qp);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_and_ignores_reserved_byte() {
        let bytes = [0x11, 0x11, 0x11, 0x11, 0xaa, 0x00, 0x00, 0x12];
        let h = Header::new_checked(&bytes[..]).unwrap();
        assert_eq!(h.resv8(), 0xaa);
        let r = Repr::parse(&h);
        assert_eq!(
            r,
            Repr {
                qkey: 0x1111_1111,
                src_qp: 0x12
            }
        );
        let mut out = [0xffu8; 8];
        r.emit(&mut Header::new_checked(&mut out[..]).unwrap());
        assert_eq!(out, [0x11, 0x11, 0x11, 0x11, 0, 0, 0, 0x12]);
        assert_eq!(
            Header::new_checked(&bytes[..7]).err(),
            Some(Error::Truncated)
        );
    }
}
