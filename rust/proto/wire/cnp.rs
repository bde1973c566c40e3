// SPDX-License-Identifier: GPL-2.0

//! Congestion notification on the wire: the ECN field of the IP header
//! that carries a RoCEv2 packet (RFC 3168), and the RoCEv2 Congestion
//! Notification Packet (IBTA RoCEv2 annex A17.9.3) a receiver sends back
//! when packets reach it marked Congestion Experienced:
//!
//! ```text
//!  0..12   BTH: opcode 0x81, DestQP = the QP that sent the marked
//!          packets, BECN 1, P_Key of the marked packet, PSN 0, no pad
//! 12..28   reserved (16 bytes, 0)
//! 28..32   ICRC
//! ```
//!
//! A CNP names the QP it is for, not the one that sends it: which flow it
//! speaks for, the receiver's address tells (RC: the connection's peer;
//! XUD: the streams to that address). Its opcode's transport bits (0b100)
//! are none of [`super::opcode::Transport`]'s: [`super::Packet`] refuses
//! it as unknown, and the receive path looks for it first.

use super::super::psn::Psn;
use super::bth;
use super::opcode::Opcode;
use super::Error;

/// The CNP's BTH opcode.
pub const OPCODE: Opcode = Opcode(0x81);

/// The reserved bytes after the BTH.
pub const RESERVED_LEN: usize = 16;

/// A CNP from its BTH to its ICRC (the UDP payload).
pub const PACKET_LEN: usize = bth::HEADER_LEN + RESERVED_LEN + super::icrc::ICRC_LEN;

/// The ECN field of an IP header (RFC 3168), its low two bits of the IPv4
/// TOS or the IPv6 traffic class.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Ecn {
    /// Not ECN-capable transport.
    NotEct,
    /// ECN-capable, codepoint ECT(1).
    Ect1,
    /// ECN-capable, codepoint ECT(0): what rxud's senders write.
    Ect0,
    /// Congestion Experienced: a router on the path marked it.
    Ce,
}

impl Ecn {
    /// The two-bit codepoint.
    pub const fn bits(self) -> u8 {
        match self {
            Ecn::NotEct => 0b00,
            Ecn::Ect1 => 0b01,
            Ecn::Ect0 => 0b10,
            Ecn::Ce => 0b11,
        }
    }

    /// The field of a codepoint (its low two bits).
    pub const fn from_bits(b: u8) -> Self {
        match b & 0b11 {
            0b00 => Ecn::NotEct,
            0b01 => Ecn::Ect1,
            0b10 => Ecn::Ect0,
            _ => Ecn::Ce,
        }
    }

    /// The ECN field of the IP header at the start of `ip` (IPv4 or IPv6,
    /// by its version nibble), if it holds one.
    pub fn of_ip(ip: &[u8]) -> Option<Self> {
        match ip.first()? >> 4 {
            4 => ip.get(1).map(|&tos| Self::from_bits(tos)),
            // Traffic class: the low nibble of byte 0, the high of byte 1.
            6 => ip.get(1).map(|&b| Self::from_bits(b >> 4)),
            _ => None,
        }
    }

    /// `tos` (an IPv4 TOS or IPv6 traffic class, as an address vector
    /// gives it) with ECT(0) when `capable` and the field is 0: a user's
    /// own ECN codepoint is left as it is.
    pub const fn with_ect(tos: u8, capable: bool) -> u8 {
        if capable && tos & 0b11 == 0 {
            tos | Ecn::Ect0.bits()
        } else {
            tos
        }
    }
}

/// Writes a CNP for `dest_qp` with `pkey` into `packet`, from the BTH to
/// the ICRC (which stays 0: the sender fills it in with the IP header).
pub fn emit(packet: &mut [u8], dest_qp: u32, pkey: u16) -> Result<(), Error> {
    let packet = packet.get_mut(..PACKET_LEN).ok_or(Error::Truncated)?;
    packet.fill(0);
    let mut h = bth::Header::new_checked(&mut packet[..])?;
    bth::Repr {
        opcode: OPCODE,
        solicited: false,
        mig_req: false,
        pad_count: 0,
        pkey,
        fecn: false,
        becn: true,
        dest_qp,
        ack_req: false,
        psn: Psn::new(0),
    }
    .emit(&mut h);
    Ok(())
}

/// Whether `packet` (a UDP payload of `len` bytes, of which `packet`
/// holds at least the headers) is a CNP. Returns the QP it is for.
/// Errors: not a CNP's length, a pad count, a transport version other
/// than 0. The reserved bytes are not checked (IBTA: receivers ignore
/// them), the ICRC is the receive path's.
pub fn check(packet: &[u8], len: usize) -> Result<u32, Error> {
    let h = bth::Header::new_checked(packet)?;
    if h.opcode() != OPCODE {
        return Err(Error::UnknownOpcode(h.opcode().0));
    }
    if len != PACKET_LEN {
        return Err(Error::BadLength);
    }
    if h.tver() != 0 {
        return Err(Error::BadTransportVersion(h.tver()));
    }
    if h.pad_count() != 0 {
        return Err(Error::BadField);
    }
    Ok(h.dest_qp())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_cnp_is_32_bytes_for_its_qp_with_becn() {
        let mut p = [0xffu8; 40];
        emit(&mut p, 0x12_3456, 0xffff).unwrap();
        assert_eq!(
            p[..PACKET_LEN],
            [
                0x81, 0x00, 0xff, 0xff, 0x40, 0x12, 0x34, 0x56, 0, 0, 0, 0, // BTH
                0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, // reserved
                0, 0, 0, 0, // ICRC, filled in later
            ]
        );
        assert_eq!(p[PACKET_LEN], 0xff, "nothing written past it");
        assert_eq!(check(&p, PACKET_LEN), Ok(0x12_3456));
        assert!(emit(&mut p[..31], 1, 0xffff).is_err());
    }

    #[test]
    fn only_a_well_formed_cnp_passes() {
        let mut p = [0u8; PACKET_LEN];
        emit(&mut p, 7, 0xffff).unwrap();
        assert_eq!(check(&p, PACKET_LEN + 4), Err(Error::BadLength));
        assert_eq!(check(&p, PACKET_LEN - 4), Err(Error::BadLength));
        assert_eq!(check(&p[..8], PACKET_LEN), Err(Error::Truncated));
        let mut padded = p;
        padded[1] |= 0x10;
        assert_eq!(check(&padded, PACKET_LEN), Err(Error::BadField));
        let mut tver = p;
        tver[1] |= 0x01;
        assert_eq!(check(&tver, PACKET_LEN), Err(Error::BadTransportVersion(1)));
        let mut other = p;
        other[0] = 0x80;
        assert_eq!(check(&other, PACKET_LEN), Err(Error::UnknownOpcode(0x80)));
        // Reserved bytes are the sender's business.
        let mut resv = p;
        resv[20] = 0xaa;
        assert_eq!(check(&resv, PACKET_LEN), Ok(7));
        // And the opcode table does not know it: Packet refuses it.
        assert!(OPCODE.info().is_err() && OPCODE.transport().is_none());
    }

    #[test]
    fn ecn_is_read_from_either_ip_version() {
        // IPv4, TOS 0x03 (CE) and 0xb8 | ECT(0).
        assert_eq!(Ecn::of_ip(&[0x45, 0x03]), Some(Ecn::Ce));
        assert_eq!(Ecn::of_ip(&[0x45, 0xba]), Some(Ecn::Ect0));
        assert_eq!(Ecn::of_ip(&[0x45, 0x00]), Some(Ecn::NotEct));
        // IPv6, traffic class 0x03 (CE): 0x60 | tc >> 4, tc << 4 | flow.
        assert_eq!(Ecn::of_ip(&[0x60, 0x30, 0, 0]), Some(Ecn::Ce));
        assert_eq!(Ecn::of_ip(&[0x6b, 0x9f, 0, 0]), Some(Ecn::Ect1));
        assert_eq!(Ecn::of_ip(&[0x50, 0x03]), None);
        assert_eq!(Ecn::of_ip(&[0x45]), None);
        assert_eq!(Ecn::of_ip(&[]), None);
    }

    #[test]
    fn ect_is_added_only_where_the_user_set_no_codepoint() {
        assert_eq!(Ecn::with_ect(0xb8, true), 0xba);
        assert_eq!(Ecn::with_ect(0xb8, false), 0xb8);
        assert_eq!(Ecn::with_ect(0xb9, true), 0xb9);
        assert_eq!(Ecn::with_ect(0x03, true), 0x03);
        for b in 0..=3u8 {
            assert_eq!(Ecn::from_bits(b).bits(), b);
        }
    }
}
