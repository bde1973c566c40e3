// SPDX-License-Identifier: GPL-2.0

//! Base Transport Header (IBTA 9.2): the 12 bytes every RoCEv2 packet
//! starts with.
//!
//! ```text
//!  byte 0   opcode
//!  byte 1   SE(7) M(6) PadCnt(5:4) TVer(3:0)
//!  2..4     P_Key
//!  byte 4   FECN(7) BECN(6) resv6(5:0)      "resv8a": masked in the ICRC
//!  5..8     destination QP (24 bits)
//!  byte 8   AckReq(7) resv7(6:0)
//!  9..12    PSN (24 bits)
//! ```
//!
//! The view reads fields as they are; judging them (known opcode, TVer 0)
//! is [`super::Packet`]'s job, so that a BTH can be inspected, e.g. for
//! logging, even when the packet is rejected.

use super::super::psn::Psn;
use super::field::{get_u16, get_u24, set_u16, set_u24};
use super::opcode::Opcode;
use super::Error;

/// Length of the BTH.
pub const HEADER_LEN: usize = 12;

/// The only transport header version IBTA defines.
pub const TVER: u8 = 0;

/// The default (full-membership, default partition) P_Key; RoCE devices
/// have only this one.
pub const DEFAULT_PKEY: u16 = 0xffff;

mod field {
    pub(super) const OPCODE: usize = 0;
    pub(super) const FLAGS: usize = 1;
    pub(super) const PKEY: usize = 2;
    pub(super) const RESV8A: usize = 4;
    pub(super) const DEST_QP: usize = 4;
    pub(super) const ACK_REQ: usize = 8;
    pub(super) const PSN: usize = 8;
}

const SE: u8 = 0x80;
const MIG: u8 = 0x40;
const PAD_SHIFT: u8 = 4;
const PAD_MASK: u8 = 0x30;
const TVER_MASK: u8 = 0x0f;
const FECN: u8 = 0x80;
const BECN: u8 = 0x40;
const RESV6_MASK: u8 = 0x3f;
const ACK_REQ: u8 = 0x80;
const RESV7_MASK: u8 = 0x7f;

/// Offset of the BTH byte the ICRC masks to all-ones (FECN, BECN and
/// resv6 may change in flight).
pub const ICRC_MASKED_BYTE: usize = field::RESV8A;

header_view!(
    /// A view of a BTH at the start of a buffer (which may go on with the
    /// rest of the packet).
    Header,
    HEADER_LEN
);

impl<T: AsRef<[u8]>> Header<T> {
    /// The opcode (transport in the top 3 bits, operation below).
    pub fn opcode(&self) -> Opcode {
        Opcode(self.b()[field::OPCODE])
    }

    /// Solicited event: the receiver's CQ should notify.
    pub fn solicited(&self) -> bool {
        self.b()[field::FLAGS] & SE != 0
    }

    /// MigReq (path migration state; rxe, which has no APM, sends 0).
    pub fn mig_req(&self) -> bool {
        self.b()[field::FLAGS] & MIG != 0
    }

    /// Bytes of padding between payload and ICRC (0..=3).
    pub fn pad_count(&self) -> u8 {
        (self.b()[field::FLAGS] & PAD_MASK) >> PAD_SHIFT
    }

    /// Transport header version; 0 is the only valid one.
    pub fn tver(&self) -> u8 {
        self.b()[field::FLAGS] & TVER_MASK
    }

    /// The partition key.
    pub fn pkey(&self) -> u16 {
        get_u16(self.b(), field::PKEY)
    }

    /// Forward explicit congestion notification.
    pub fn fecn(&self) -> bool {
        self.b()[field::RESV8A] & FECN != 0
    }

    /// Backward explicit congestion notification.
    pub fn becn(&self) -> bool {
        self.b()[field::RESV8A] & BECN != 0
    }

    /// The 6 reserved bits next to FECN/BECN.
    pub fn resv6(&self) -> u8 {
        self.b()[field::RESV8A] & RESV6_MASK
    }

    /// Destination QP number (24 bits).
    pub fn dest_qp(&self) -> u32 {
        get_u24(self.b(), field::DEST_QP)
    }

    /// AckReq: the responder should acknowledge this packet.
    pub fn ack_req(&self) -> bool {
        self.b()[field::ACK_REQ] & ACK_REQ != 0
    }

    /// The 7 reserved bits next to AckReq.
    pub fn resv7(&self) -> u8 {
        self.b()[field::ACK_REQ] & RESV7_MASK
    }

    /// Packet sequence number.
    pub fn psn(&self) -> Psn {
        Psn::new(get_u24(self.b(), field::PSN))
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Header<T> {
    fn set_flag(byte: &mut u8, mask: u8, on: bool) {
        if on {
            *byte |= mask;
        } else {
            *byte &= !mask;
        }
    }

    /// Sets what [`Self::opcode`] reads.
    pub fn set_opcode(&mut self, op: Opcode) {
        self.m()[field::OPCODE] = op.0;
    }

    /// Sets what [`Self::solicited`] reads.
    pub fn set_solicited(&mut self, on: bool) {
        Self::set_flag(&mut self.m()[field::FLAGS], SE, on);
    }

    /// Sets what [`Self::mig_req`] reads.
    pub fn set_mig_req(&mut self, on: bool) {
        Self::set_flag(&mut self.m()[field::FLAGS], MIG, on);
    }

    /// Sets the pad count (only the low 2 bits of `pad` are used).
    pub fn set_pad_count(&mut self, pad: u8) {
        let b = &mut self.m()[field::FLAGS];
        *b = (*b & !PAD_MASK) | ((pad << PAD_SHIFT) & PAD_MASK);
    }

    /// Sets TVer (only the low 4 bits of `v` are used).
    pub fn set_tver(&mut self, v: u8) {
        let b = &mut self.m()[field::FLAGS];
        *b = (*b & !TVER_MASK) | (v & TVER_MASK);
    }

    /// Sets what [`Self::pkey`] reads.
    pub fn set_pkey(&mut self, pkey: u16) {
        set_u16(self.m(), field::PKEY, pkey);
    }

    /// Sets what [`Self::fecn`] reads.
    pub fn set_fecn(&mut self, on: bool) {
        Self::set_flag(&mut self.m()[field::RESV8A], FECN, on);
    }

    /// Sets what [`Self::becn`] reads.
    pub fn set_becn(&mut self, on: bool) {
        Self::set_flag(&mut self.m()[field::RESV8A], BECN, on);
    }

    /// Sets the reserved bits next to FECN/BECN (senders write 0).
    pub fn set_resv6(&mut self, v: u8) {
        let b = &mut self.m()[field::RESV8A];
        *b = (*b & !RESV6_MASK) | (v & RESV6_MASK);
    }

    /// Sets the destination QP (only the low 24 bits of `qpn` are used).
    pub fn set_dest_qp(&mut self, qpn: u32) {
        set_u24(self.m(), field::DEST_QP, qpn & super::QPN_MASK);
    }

    /// Sets what [`Self::ack_req`] reads.
    pub fn set_ack_req(&mut self, on: bool) {
        Self::set_flag(&mut self.m()[field::ACK_REQ], ACK_REQ, on);
    }

    /// Sets the reserved bits next to AckReq (senders write 0).
    pub fn set_resv7(&mut self, v: u8) {
        let b = &mut self.m()[field::ACK_REQ];
        *b = (*b & !RESV7_MASK) | (v & RESV7_MASK);
    }

    /// Sets what [`Self::psn`] reads.
    pub fn set_psn(&mut self, psn: Psn) {
        set_u24(self.m(), field::PSN, psn.value());
    }
}

/// A decoded BTH. The reserved fields are not represented: `emit` writes
/// them as zero, as IBTA asks of senders.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Repr {
    /// The opcode.
    pub opcode: Opcode,
    /// Solicited event.
    pub solicited: bool,
    /// MigReq.
    pub mig_req: bool,
    /// Pad bytes before the ICRC (0..=3).
    pub pad_count: u8,
    /// Partition key.
    pub pkey: u16,
    /// Forward ECN.
    pub fecn: bool,
    /// Backward ECN.
    pub becn: bool,
    /// Destination QP (24 bits).
    pub dest_qp: u32,
    /// AckReq.
    pub ack_req: bool,
    /// Packet sequence number.
    pub psn: Psn,
}

impl Repr {
    /// Decodes a BTH. Accepts any opcode and TVer 0 only.
    pub fn parse<T: AsRef<[u8]>>(h: &Header<T>) -> Result<Self, Error> {
        if h.tver() != TVER {
            return Err(Error::BadTransportVersion(h.tver()));
        }
        Ok(Self {
            opcode: h.opcode(),
            solicited: h.solicited(),
            mig_req: h.mig_req(),
            pad_count: h.pad_count(),
            pkey: h.pkey(),
            fecn: h.fecn(),
            becn: h.becn(),
            dest_qp: h.dest_qp(),
            ack_req: h.ack_req(),
            psn: h.psn(),
        })
    }

    /// Writes the whole BTH (TVer 0, reserved bits 0; fields wider than
    /// theirs on the wire are truncated).
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, h: &mut Header<T>) {
        h.m()[..HEADER_LEN].fill(0);
        h.set_opcode(self.opcode);
        h.set_solicited(self.solicited);
        h.set_mig_req(self.mig_req);
        h.set_pad_count(self.pad_count);
        h.set_tver(TVER);
        h.set_pkey(self.pkey);
        h.set_fecn(self.fecn);
        h.set_becn(self.becn);
        h.set_dest_qp(self.dest_qp);
        h.set_ack_req(self.ack_req);
        h.set_psn(self.psn);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // An RC SEND_ONLY: MigReq set, default P_Key, QP 0x000011, AckReq,
    // PSN 0xabcdef.
    const BYTES: [u8; 12] = [
        0x04, 0x40, 0xff, 0xff, 0x00, 0x00, 0x00, 0x11, 0x80, 0xab, 0xcd, 0xef,
    ];

    #[test]
    fn reads_every_field() {
        let h = Header::new_checked(&BYTES[..]).unwrap();
        assert_eq!(h.opcode(), Opcode(0x04));
        assert!(!h.solicited());
        assert!(h.mig_req());
        assert_eq!(h.pad_count(), 0);
        assert_eq!(h.tver(), 0);
        assert_eq!(h.pkey(), DEFAULT_PKEY);
        assert!(!h.fecn() && !h.becn());
        assert_eq!(h.resv6(), 0);
        assert_eq!(h.dest_qp(), 0x11);
        assert!(h.ack_req());
        assert_eq!(h.resv7(), 0);
        assert_eq!(h.psn(), Psn::new(0xabcdef));
    }

    #[test]
    fn flags_and_24_bit_fields_do_not_bleed() {
        let mut buf = [0xffu8; 12];
        let mut h = Header::new_checked(&mut buf[..]).unwrap();
        h.set_dest_qp(0);
        h.set_psn(Psn::new(0));
        h.set_pad_count(0);
        assert!(h.fecn() && h.becn() && h.ack_req());
        assert_eq!((h.resv6(), h.resv7(), h.tver()), (0x3f, 0x7f, 0xf));
        assert!(h.solicited() && h.mig_req());
        h.set_fecn(false);
        h.set_ack_req(false);
        h.set_dest_qp(0xfff_ffff);
        assert_eq!(h.dest_qp(), 0xff_ffff);
        assert!(!h.fecn() && h.becn() && !h.ack_req());
        h.set_pad_count(3);
        h.set_tver(0);
        assert_eq!(h.pad_count(), 3);
        assert!(h.solicited());
    }

    #[test]
    fn repr_round_trips() {
        let h = Header::new_checked(&BYTES[..]).unwrap();
        let r = Repr::parse(&h).unwrap();
        let mut out = [0x55u8; 12];
        r.emit(&mut Header::new_unchecked(&mut out[..]));
        assert_eq!(out, BYTES);
    }

    #[test]
    fn checks_length_and_version() {
        assert_eq!(
            Header::new_checked(&BYTES[..11]).err(),
            Some(Error::Truncated)
        );
        let mut b = BYTES;
        b[1] |= 1;
        let h = Header::new_checked(&b[..]).unwrap();
        assert_eq!(Repr::parse(&h), Err(Error::BadTransportVersion(1)));
    }
}
