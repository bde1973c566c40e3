// SPDX-License-Identifier: GPL-2.0

//! XUD Extended Transport Header (Documentation/xud.rst, "Data packets"):
//! what a receiver needs to take a packet into the right stream and
//! message without any earlier packet. 20 bytes:
//!
//! ```text
//!  0..8    stream: the sender's incarnation of the stream (64 bits)
//!  8..12   peer_inc: the receiving QP's incarnation, 0 until known
//! 12..16   msg_seq: the message's number in the stream
//! byte 16  msg_lag: msg_seq minus the oldest unfinished message
//! 17..20   oldest_psn: the oldest PSN the sender still tries (24 bits)
//! ```
//!
//! `oldest_psn` starts a receiver's window that has no state for the
//! stream and lets it skip PSNs the sender gave up; `msg_lag` tells it
//! which messages in progress were abandoned.

use super::super::psn::Psn;
use super::field::{get_u24, get_u32, get_u64, set_u24, set_u32, set_u64};
use super::Error;

/// Length of the XETH.
pub const HEADER_LEN: usize = 20;

/// Most messages a stream has in flight: `msg_lag` is below this.
pub const MAX_MSG_LAG: u8 = 16;

const STREAM: usize = 0;
const PEER_INC: usize = 8;
const MSG_SEQ: usize = 12;
const MSG_LAG: usize = 16;
/// The 24-bit field in the low bytes of the word at 16 (as the DETH's
/// source QP).
const OLDEST_PSN: usize = 16;

header_view!(
    /// A view of an XETH at the start of a buffer.
    Header,
    HEADER_LEN
);

impl<T: AsRef<[u8]>> Header<T> {
    /// The sender's incarnation of the stream.
    pub fn stream(&self) -> u64 {
        get_u64(self.b(), STREAM)
    }

    /// The receiving QP's incarnation as the sender knows it (0: not yet).
    pub fn peer_inc(&self) -> u32 {
        get_u32(self.b(), PEER_INC)
    }

    /// The message's number in the stream.
    pub fn msg_seq(&self) -> u32 {
        get_u32(self.b(), MSG_SEQ)
    }

    /// The oldest PSN the sender still tries to deliver.
    pub fn oldest_psn(&self) -> Psn {
        Psn::new(get_u24(self.b(), OLDEST_PSN))
    }

    /// `msg_seq` minus the oldest message the sender has not finished.
    pub fn msg_lag(&self) -> u8 {
        self.b()[MSG_LAG]
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Header<T> {
    /// Sets what [`Self::stream`] reads.
    pub fn set_stream(&mut self, v: u64) {
        set_u64(self.m(), STREAM, v);
    }

    /// Sets what [`Self::peer_inc`] reads.
    pub fn set_peer_inc(&mut self, v: u32) {
        set_u32(self.m(), PEER_INC, v);
    }

    /// Sets what [`Self::msg_seq`] reads.
    pub fn set_msg_seq(&mut self, v: u32) {
        set_u32(self.m(), MSG_SEQ, v);
    }

    /// Sets what [`Self::oldest_psn`] reads.
    pub fn set_oldest_psn(&mut self, psn: Psn) {
        set_u24(self.m(), OLDEST_PSN, psn.value());
    }

    /// Sets what [`Self::msg_lag`] reads.
    pub fn set_msg_lag(&mut self, v: u8) {
        self.m()[MSG_LAG] = v;
    }
}

/// A decoded XETH.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Repr {
    /// The sender's incarnation of the stream (never 0).
    pub stream: u64,
    /// The receiving QP's incarnation, 0 until the sender learnt it.
    pub peer_inc: u32,
    /// The message's number in the stream.
    pub msg_seq: u32,
    /// The oldest PSN the sender still tries to deliver.
    pub oldest_psn: Psn,
    /// `msg_seq` minus the oldest unfinished message, below
    /// [`MAX_MSG_LAG`].
    pub msg_lag: u8,
}

impl Repr {
    /// Decodes the header. A zero `stream` (no sender draws it) or a
    /// `msg_lag` of [`MAX_MSG_LAG`] or more (no sender has that many
    /// messages in flight) is malformed.
    pub fn parse<T: AsRef<[u8]>>(h: &Header<T>) -> Result<Self, Error> {
        let r = Self {
            stream: h.stream(),
            peer_inc: h.peer_inc(),
            msg_seq: h.msg_seq(),
            oldest_psn: h.oldest_psn(),
            msg_lag: h.msg_lag(),
        };
        if r.stream == 0 || r.msg_lag >= MAX_MSG_LAG {
            return Err(Error::BadField);
        }
        Ok(r)
    }

    /// The oldest message the sender has not finished: messages in
    /// progress before it were abandoned (serial arithmetic on 32 bits).
    pub fn oldest_msg(&self) -> u32 {
        self.msg_seq.wrapping_sub(u32::from(self.msg_lag))
    }

    /// Writes the XETH.
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, h: &mut Header<T>) {
        h.set_stream(self.stream);
        h.set_peer_inc(self.peer_inc);
        h.set_msg_seq(self.msg_seq);
        h.set_oldest_psn(self.oldest_psn);
        h.set_msg_lag(self.msg_lag);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const BYTES: [u8; HEADER_LEN] = [
        0x01, 0x23, 0x45, 0x67, 0x89, 0xab, 0xcd, 0xef, // stream
        0x00, 0x00, 0x00, 0x07, // peer_inc
        0xff, 0xff, 0xff, 0xfe, // msg_seq
        0x03, // msg_lag
        0x12, 0x34, 0x56, // oldest_psn
    ];

    #[test]
    fn round_trips() {
        let h = Header::new_checked(&BYTES[..]).unwrap();
        let r = Repr::parse(&h).unwrap();
        assert_eq!(
            r,
            Repr {
                stream: 0x0123_4567_89ab_cdef,
                peer_inc: 7,
                msg_seq: 0xffff_fffe,
                oldest_psn: Psn::new(0x12_3456),
                msg_lag: 3,
            }
        );
        assert_eq!(r.oldest_msg(), 0xffff_fffb);
        let mut out = [0xaau8; HEADER_LEN];
        r.emit(&mut Header::new_checked(&mut out[..]).unwrap());
        assert_eq!(out, BYTES);
    }

    #[test]
    fn rejects_what_no_sender_writes() {
        assert_eq!(
            Header::new_checked(&BYTES[..HEADER_LEN - 1]).err(),
            Some(Error::Truncated)
        );
        let mut b = BYTES;
        b[..8].fill(0);
        let h = Header::new_checked(&b[..]).unwrap();
        assert_eq!(Repr::parse(&h), Err(Error::BadField), "stream 0");
        let mut b = BYTES;
        b[MSG_LAG] = MAX_MSG_LAG;
        let h = Header::new_checked(&b[..]).unwrap();
        assert_eq!(Repr::parse(&h), Err(Error::BadField), "msg_lag too large");
        b[MSG_LAG] = MAX_MSG_LAG - 1;
        let h = Header::new_checked(&b[..]).unwrap();
        assert!(Repr::parse(&h).is_ok());
    }

    #[test]
    fn oldest_msg_wraps() {
        let r = Repr {
            stream: 1,
            peer_inc: 0,
            msg_seq: 2,
            oldest_psn: Psn::new(0),
            msg_lag: 5,
        };
        assert_eq!(r.oldest_msg(), u32::MAX - 2);
    }
}
