// SPDX-License-Identifier: GPL-2.0

//! ACK Extended Transport Header (IBTA 9.3.7): what a responder says
//! about the requests it received. 4 bytes:
//!
//! ```text
//!  byte 0  syndrome: resv(7) type(6:5) value(4:0)
//!  1..4    MSN, the responder's message sequence number (24 bits)
//! ```
//!
//! The syndrome packs three different answers into one byte, and the
//! meaning of the low five bits depends on the type: a credit count for
//! an ACK, a timer code for an RNR NAK, an error code for a NAK. Code
//! that switches on raw bits gets this wrong easily, so the view decodes
//! the byte into [`AckSyndrome`]. Decoding is total (every byte decodes,
//! reserved encodings into `Reserved` variants) and exact
//! (`AckSyndrome::from_byte(b).to_byte() == b`), so a receiver can both
//! act on what it understands and report what it does not.

use super::field::{get_u24, set_u24};
use super::Error;

/// Length of the AETH.
pub const HEADER_LEN: usize = 4;

const SYNDROME: usize = 0;
const MSN: usize = 0;

const TYPE_MASK: u8 = 0xe0;
const VALUE_MASK: u8 = 0x1f;
const TYPE_ACK: u8 = 0x00;
const TYPE_RNR_NAK: u8 = 0x20;
const TYPE_NAK: u8 = 0x60;

/// The credit count code meaning "no credit information" (IBTA calls it
/// invalid, rxe `AETH_ACK_UNLIMITED`); rxe sends it in every ACK.
pub const CREDITS_INVALID: u8 = 31;

/// The error a NAK reports (IBTA table 47).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NakCode {
    /// A request arrived out of sequence; the requester resends from
    /// the NAK's PSN.
    PsnSequenceError,
    /// Unsupported or malformed request.
    InvalidRequest,
    /// R_Key or access rights check failed.
    RemoteAccessError,
    /// The responder failed to carry out a valid request.
    RemoteOperationalError,
    /// RD only.
    InvalidRdRequest,
    /// Codes 5..=31.
    Reserved(u8),
}

impl NakCode {
    const fn from_value(v: u8) -> Self {
        match v & VALUE_MASK {
            0 => NakCode::PsnSequenceError,
            1 => NakCode::InvalidRequest,
            2 => NakCode::RemoteAccessError,
            3 => NakCode::RemoteOperationalError,
            4 => NakCode::InvalidRdRequest,
            v => NakCode::Reserved(v),
        }
    }

    const fn value(self) -> u8 {
        match self {
            NakCode::PsnSequenceError => 0,
            NakCode::InvalidRequest => 1,
            NakCode::RemoteAccessError => 2,
            NakCode::RemoteOperationalError => 3,
            NakCode::InvalidRdRequest => 4,
            NakCode::Reserved(v) => v & VALUE_MASK,
        }
    }
}

/// A decoded AETH syndrome.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AckSyndrome {
    /// Positive acknowledgement.
    Ack {
        /// Credit count code (0..=30, see [`credits`]; [`CREDITS_INVALID`]
        /// for none).
        credit_code: u8,
    },
    /// Receiver not ready.
    RnrNak {
        /// How long to wait before retrying (see [`rnr_timer_micros`]).
        timer_code: u8,
    },
    /// Negative acknowledgement.
    Nak(NakCode),
    /// A syndrome with the reserved type (0b10) or the reserved top bit
    /// set; the raw byte.
    Reserved(u8),
}

impl AckSyndrome {
    /// The ACK rxe sends: no credit information.
    pub const ACK_NO_CREDITS: Self = AckSyndrome::Ack {
        credit_code: CREDITS_INVALID,
    };

    /// Decodes a syndrome byte; every byte decodes to something.
    pub const fn from_byte(b: u8) -> Self {
        let v = b & VALUE_MASK;
        match b & TYPE_MASK {
            TYPE_ACK => AckSyndrome::Ack { credit_code: v },
            TYPE_RNR_NAK => AckSyndrome::RnrNak { timer_code: v },
            TYPE_NAK => AckSyndrome::Nak(NakCode::from_value(v)),
            _ => AckSyndrome::Reserved(b),
        }
    }

    /// Encodes the syndrome; codes wider than 5 bits are truncated.
    pub const fn to_byte(self) -> u8 {
        match self {
            AckSyndrome::Ack { credit_code } => TYPE_ACK | (credit_code & VALUE_MASK),
            AckSyndrome::RnrNak { timer_code } => TYPE_RNR_NAK | (timer_code & VALUE_MASK),
            AckSyndrome::Nak(code) => TYPE_NAK | code.value(),
            AckSyndrome::Reserved(b) => b,
        }
    }
}

/// Credits (receive WQEs the responder has ready) that a credit count
/// code stands for (IBTA table 46: roughly a doubling every two codes),
/// or `None` for [`CREDITS_INVALID`] and codes beyond 5 bits.
pub const fn credits(code: u8) -> Option<u16> {
    if code >= CREDITS_INVALID {
        return None;
    }
    if code <= 4 {
        return Some(code as u16);
    }
    // From code 4 on, an even code stands for 2^(code/2) and the odd
    // code after it for one and a half times that: 4, 6, 8, 12, 16, ...
    let base = 1u16 << (code / 2);
    Some(if code % 2 == 1 { base + base / 2 } else { base })
}

/// Microseconds an RNR NAK's timer code asks the requester to wait
/// (IBTA table 45). Code 0 is the longest, 655.36 ms. rxe's table has
/// 61410 for code 25 where the spec says 61.44 ms; this one follows the
/// spec.
pub const fn rnr_timer_micros(code: u8) -> u32 {
    const TABLE: [u32; 32] = [
        655_360, 10, 20, 30, 40, 60, 80, 120, 160, 240, 320, 480, 640, 960, 1280, 1920, 2560, 3840,
        5120, 7680, 10_240, 15_360, 20_480, 30_720, 40_960, 61_440, 81_920, 122_880, 163_840,
        245_760, 327_680, 491_520,
    ];
    TABLE[(code & VALUE_MASK) as usize]
}

header_view!(
    /// A view of an AETH at the start of a buffer.
    Header,
    HEADER_LEN
);

impl<T: AsRef<[u8]>> Header<T> {
    /// The raw syndrome byte.
    pub fn syndrome_byte(&self) -> u8 {
        self.b()[SYNDROME]
    }

    /// The decoded syndrome.
    pub fn syndrome(&self) -> AckSyndrome {
        AckSyndrome::from_byte(self.syndrome_byte())
    }

    /// Message sequence number (24 bits).
    pub fn msn(&self) -> u32 {
        get_u24(self.b(), MSN)
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Header<T> {
    /// Sets the syndrome byte.
    pub fn set_syndrome(&mut self, s: AckSyndrome) {
        self.m()[SYNDROME] = s.to_byte();
    }

    /// Sets the MSN (only the low 24 bits of `msn` are used).
    pub fn set_msn(&mut self, msn: u32) {
        set_u24(self.m(), MSN, msn & 0x00ff_ffff);
    }
}

/// A decoded AETH.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Repr {
    /// The decoded syndrome.
    pub syndrome: AckSyndrome,
    /// Message sequence number (24 bits).
    pub msn: u32,
}

impl Repr {
    /// Decodes the header.
    pub fn parse<T: AsRef<[u8]>>(h: &Header<T>) -> Self {
        Self {
            syndrome: h.syndrome(),
            msn: h.msn(),
        }
    }

    /// Writes the header.
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, h: &mut Header<T>) {
        h.set_syndrome(self.syndrome);
        h.set_msn(self.msn);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_syndrome_byte_round_trips() {
        for b in 0..=255u8 {
            assert_eq!(AckSyndrome::from_byte(b).to_byte(), b, "{b:#04x}");
        }
    }

    #[test]
    fn decodes_the_kinds_rxe_uses() {
        // rxe's AETH_ACK_UNLIMITED, AETH_RNR_NAK | timer, AETH_NAK_*.
        assert_eq!(AckSyndrome::from_byte(0x1f), AckSyndrome::ACK_NO_CREDITS);
        assert_eq!(
            AckSyndrome::from_byte(0x2e),
            AckSyndrome::RnrNak { timer_code: 14 }
        );
        assert_eq!(
            AckSyndrome::from_byte(0x60),
            AckSyndrome::Nak(NakCode::PsnSequenceError)
        );
        assert_eq!(
            AckSyndrome::from_byte(0x61),
            AckSyndrome::Nak(NakCode::InvalidRequest)
        );
        assert_eq!(
            AckSyndrome::from_byte(0x62),
            AckSyndrome::Nak(NakCode::RemoteAccessError)
        );
        assert_eq!(
            AckSyndrome::from_byte(0x63),
            AckSyndrome::Nak(NakCode::RemoteOperationalError)
        );
        assert_eq!(
            AckSyndrome::from_byte(0x64),
            AckSyndrome::Nak(NakCode::InvalidRdRequest)
        );
        assert_eq!(
            AckSyndrome::from_byte(0x65),
            AckSyndrome::Nak(NakCode::Reserved(5))
        );
        assert_eq!(AckSyndrome::from_byte(0x40), AckSyndrome::Reserved(0x40));
        assert_eq!(AckSyndrome::from_byte(0x80), AckSyndrome::Reserved(0x80));
    }

    #[test]
    fn credit_table_matches_the_spec() {
        let spec: [u16; 31] = [
            0, 1, 2, 3, 4, 6, 8, 12, 16, 24, 32, 48, 64, 96, 128, 192, 256, 384, 512, 768, 1024,
            1536, 2048, 3072, 4096, 6144, 8192, 12288, 16384, 24576, 32768,
        ];
        for (code, want) in spec.iter().enumerate() {
            assert_eq!(credits(code as u8), Some(*want), "code {code}");
        }
        assert_eq!(credits(31), None);
        assert_eq!(credits(255), None);
    }

    #[test]
    fn rnr_timer_extremes() {
        assert_eq!(rnr_timer_micros(0), 655_360);
        assert_eq!(rnr_timer_micros(1), 10);
        assert_eq!(rnr_timer_micros(25), 61_440);
        assert_eq!(rnr_timer_micros(31), 491_520);
        assert_eq!(rnr_timer_micros(32 + 1), 10);
    }

    #[test]
    fn header_round_trips() {
        let bytes = [0x1f, 0x00, 0x01, 0x02];
        let h = Header::new_checked(&bytes[..]).unwrap();
        let r = Repr::parse(&h);
        assert_eq!(
            r,
            Repr {
                syndrome: AckSyndrome::ACK_NO_CREDITS,
                msn: 0x102
            }
        );
        let mut out = [0u8; 4];
        r.emit(&mut Header::new_checked(&mut out[..]).unwrap());
        assert_eq!(out, bytes);
        assert_eq!(
            Header::new_checked(&bytes[..3]).err(),
            Some(Error::Truncated)
        );
    }
}
