// SPDX-License-Identifier: GPL-2.0

//! A whole IB transport packet: the UDP payload of a RoCEv2 datagram,
//! from the BTH to the ICRC.
//!
//! ```text
//!  BTH | extension headers (per opcode) | payload | pad (0..3) | ICRC (4)
//! ```
//!
//! [`Packet::new_checked`] is the one place where a received packet's
//! layout is judged: TVer, opcode, and that the buffer holds every header
//! the opcode calls for plus pad and ICRC. It remembers the layout, so
//! the accessors afterwards are infallible and, because every range they
//! use was checked against the buffer's (fixed) length, cannot go out of
//! bounds even if the bytes are changed through a mutable view later.
//! The ICRC itself is checked over the IP datagram by
//! [`super::icrc::icrc_check`], since it covers the IP and UDP headers too.

use super::icrc::ICRC_LEN;
use super::opcode::{ExtHeader, Opcode, OpcodeInfo};
use super::Error;
use super::{aeth, atomic, bth, deth, feth, ieth, immdt, reth, xack, xck, xeth};
use super::{Aeth, AtomicAckEth, AtomicEth, Bth, Deth, Feth, Ieth, ImmDt, Reth, Xack, Xeth};

/// A checked view of a transport packet.
#[derive(Clone, Copy, Debug)]
pub struct Packet<T: AsRef<[u8]>> {
    buffer: T,
    info: &'static OpcodeInfo,
    pad: usize,
}

impl<T: AsRef<[u8]>> Packet<T> {
    /// Checks that `buffer` is exactly one well-formed transport packet
    /// (BTH to ICRC) and wraps it.
    ///
    /// Errors: [`Error::Truncated`] if the buffer cannot hold the BTH, the
    /// opcode's extension headers, the pad and the ICRC;
    /// [`Error::BadTransportVersion`]; [`Error::UnknownOpcode`];
    /// [`Error::BadLength`] if an opcode that carries no payload (an ACK,
    /// a read request, an atomic) has anything between its headers and
    /// its ICRC, pad included.
    ///
    /// The pad count need not bring the payload to a multiple of 4 bytes:
    /// senders always make it so, but the payload length is unambiguous
    /// either way and rxe does not check it either.
    pub fn new_checked(buffer: T) -> Result<Self, Error> {
        let b = buffer.as_ref();
        let (info, pad) = Self::check_layout(b, b.len())?;
        Ok(Self { buffer, info, pad })
    }

    /// Judges the layout of a packet of `total_len` bytes from its first
    /// bytes `head` (at least its headers, or all of it), without the
    /// payload: what a receiver needs before it decides where the payload
    /// goes. Returns the opcode's description and the pad length.
    pub fn check_layout(
        head: &[u8],
        total_len: usize,
    ) -> Result<(&'static OpcodeInfo, usize), Error> {
        let bth = Bth::new_checked(head)?;
        if bth.tver() != bth::TVER {
            return Err(Error::BadTransportVersion(bth.tver()));
        }
        let info = bth.opcode().info()?;
        let pad = usize::from(bth.pad_count());
        let min = info.header_len + pad + ICRC_LEN;
        if total_len < min || head.len() < info.header_len.min(total_len) {
            return Err(Error::Truncated);
        }
        if !info.payload && (pad != 0 || total_len != min) {
            return Err(Error::BadLength);
        }
        Ok((info, pad))
    }

    /// The buffer back.
    pub fn into_inner(self) -> T {
        self.buffer
    }

    /// What the opcode says about this packet.
    pub fn info(&self) -> &'static OpcodeInfo {
        self.info
    }

    /// The opcode (as checked; see [`Packet::bth_mut`]).
    pub fn opcode(&self) -> Opcode {
        self.info.opcode
    }

    /// Total length, BTH to ICRC.
    pub fn len(&self) -> usize {
        self.buffer.as_ref().len()
    }

    /// Never true: a packet has at least a BTH and an ICRC.
    pub fn is_empty(&self) -> bool {
        false
    }

    /// The BTH and extension headers.
    pub fn header_len(&self) -> usize {
        self.info.header_len
    }

    /// Payload bytes: total minus headers, pad and ICRC.
    pub fn payload_len(&self) -> usize {
        self.len() - self.info.header_len - self.pad - ICRC_LEN
    }

    /// Pad bytes after the payload (the BTH's pad count, as checked).
    pub fn pad_len(&self) -> usize {
        self.pad
    }

    fn ext(&self, h: ExtHeader) -> Option<&[u8]> {
        let off = self.info.offset_of(h)?;
        self.buffer.as_ref().get(off..off + h.size())
    }

    /// The BTH.
    pub fn bth(&self) -> Bth<&[u8]> {
        Bth::new_unchecked(&self.buffer.as_ref()[..bth::HEADER_LEN])
    }

    /// The RETH, if the opcode has one.
    pub fn reth(&self) -> Option<Reth<&[u8]>> {
        self.ext(ExtHeader::Reth).map(Reth::new_unchecked)
    }

    /// The DETH, if the opcode has one.
    pub fn deth(&self) -> Option<Deth<&[u8]>> {
        self.ext(ExtHeader::Deth).map(Deth::new_unchecked)
    }

    /// The AETH, if the opcode has one.
    pub fn aeth(&self) -> Option<Aeth<&[u8]>> {
        self.ext(ExtHeader::Aeth).map(Aeth::new_unchecked)
    }

    /// The ImmDt header, if the opcode has one.
    pub fn immdt(&self) -> Option<ImmDt<&[u8]>> {
        self.ext(ExtHeader::ImmDt).map(ImmDt::new_unchecked)
    }

    /// The IETH, if the opcode has one.
    pub fn ieth(&self) -> Option<Ieth<&[u8]>> {
        self.ext(ExtHeader::Ieth).map(Ieth::new_unchecked)
    }

    /// The AtomicETH, if the opcode has one.
    pub fn atomic_eth(&self) -> Option<AtomicEth<&[u8]>> {
        self.ext(ExtHeader::AtomicEth).map(AtomicEth::new_unchecked)
    }

    /// The AtomicAckETH, if the opcode has one.
    pub fn atomic_ack_eth(&self) -> Option<AtomicAckEth<&[u8]>> {
        self.ext(ExtHeader::AtomicAckEth)
            .map(AtomicAckEth::new_unchecked)
    }

    /// The FETH, if the opcode has one.
    pub fn feth(&self) -> Option<Feth<&[u8]>> {
        self.ext(ExtHeader::Feth).map(Feth::new_unchecked)
    }

    /// The XETH (XUD data packets).
    pub fn xeth(&self) -> Option<Xeth<&[u8]>> {
        self.ext(ExtHeader::Xeth).map(Xeth::new_unchecked)
    }

    /// The XACK (XUD ACKs and NAKs).
    pub fn xack(&self) -> Option<Xack<&[u8]>> {
        self.ext(ExtHeader::Xack).map(Xack::new_unchecked)
    }

    /// The XCK (XUD data packets and challenges).
    pub fn xck(&self) -> Option<xck::Header<&[u8]>> {
        self.ext(ExtHeader::Xck).map(xck::Header::new_unchecked)
    }

    /// The payload (without pad).
    pub fn payload(&self) -> &[u8] {
        let start = self.info.header_len;
        &self.buffer.as_ref()[start..start + self.payload_len()]
    }

    /// The ICRC as the little-endian value it is stored as (compare with
    /// [`super::icrc::icrc_compute`]).
    pub fn icrc(&self) -> u32 {
        let b = self.buffer.as_ref();
        let t = &b[b.len() - ICRC_LEN..];
        u32::from_le_bytes([t[0], t[1], t[2], t[3]])
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Packet<T> {
    fn ext_mut(&mut self, h: ExtHeader) -> Option<&mut [u8]> {
        let off = self.info.offset_of(h)?;
        self.buffer.as_mut().get_mut(off..off + h.size())
    }

    /// The BTH, writable. The view keeps the layout it checked: changing
    /// the opcode or pad count here does not move the other headers or the
    /// payload (make a new `Packet` for that).
    pub fn bth_mut(&mut self) -> Bth<&mut [u8]> {
        Bth::new_unchecked(&mut self.buffer.as_mut()[..bth::HEADER_LEN])
    }

    /// [`Self::reth`], writable.
    pub fn reth_mut(&mut self) -> Option<Reth<&mut [u8]>> {
        self.ext_mut(ExtHeader::Reth).map(Reth::new_unchecked)
    }

    /// [`Self::deth`], writable.
    pub fn deth_mut(&mut self) -> Option<Deth<&mut [u8]>> {
        self.ext_mut(ExtHeader::Deth).map(Deth::new_unchecked)
    }

    /// [`Self::aeth`], writable.
    pub fn aeth_mut(&mut self) -> Option<Aeth<&mut [u8]>> {
        self.ext_mut(ExtHeader::Aeth).map(Aeth::new_unchecked)
    }

    /// [`Self::immdt`], writable.
    pub fn immdt_mut(&mut self) -> Option<ImmDt<&mut [u8]>> {
        self.ext_mut(ExtHeader::ImmDt).map(ImmDt::new_unchecked)
    }

    /// [`Self::ieth`], writable.
    pub fn ieth_mut(&mut self) -> Option<Ieth<&mut [u8]>> {
        self.ext_mut(ExtHeader::Ieth).map(Ieth::new_unchecked)
    }

    /// [`Self::atomic_eth`], writable.
    pub fn atomic_eth_mut(&mut self) -> Option<AtomicEth<&mut [u8]>> {
        self.ext_mut(ExtHeader::AtomicEth)
            .map(AtomicEth::new_unchecked)
    }

    /// [`Self::atomic_ack_eth`], writable.
    pub fn atomic_ack_eth_mut(&mut self) -> Option<AtomicAckEth<&mut [u8]>> {
        self.ext_mut(ExtHeader::AtomicAckEth)
            .map(AtomicAckEth::new_unchecked)
    }

    /// [`Self::feth`], writable.
    pub fn feth_mut(&mut self) -> Option<Feth<&mut [u8]>> {
        self.ext_mut(ExtHeader::Feth).map(Feth::new_unchecked)
    }

    /// [`Self::xeth`], writable.
    pub fn xeth_mut(&mut self) -> Option<Xeth<&mut [u8]>> {
        self.ext_mut(ExtHeader::Xeth).map(Xeth::new_unchecked)
    }

    /// [`Self::xack`], writable.
    pub fn xack_mut(&mut self) -> Option<Xack<&mut [u8]>> {
        self.ext_mut(ExtHeader::Xack).map(Xack::new_unchecked)
    }

    /// [`Self::xck`], writable.
    pub fn xck_mut(&mut self) -> Option<xck::Header<&mut [u8]>> {
        self.ext_mut(ExtHeader::Xck).map(xck::Header::new_unchecked)
    }

    /// The payload, writable (e.g. to copy it in after `Repr::emit`).
    pub fn payload_mut(&mut self) -> &mut [u8] {
        let start = self.info.header_len;
        let end = start + self.payload_len();
        &mut self.buffer.as_mut()[start..end]
    }
}

/// The headers of a packet, decoded. Payload is not part of it: the data
/// path copies payload straight between memory regions and packet
/// buffers, so `emit` lays out the headers for a payload of a given
/// length and leaves the payload bytes to the caller.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Repr {
    /// The BTH. `emit` derives the pad count from the payload length and
    /// ignores `bth.pad_count`.
    pub bth: bth::Repr,
    /// The RETH, if the opcode has one.
    pub reth: Option<reth::Repr>,
    /// The DETH, if the opcode has one.
    pub deth: Option<deth::Repr>,
    /// The AETH, if the opcode has one.
    pub aeth: Option<aeth::Repr>,
    /// The ImmDt, if the opcode has one.
    pub immdt: Option<immdt::Repr>,
    /// The IETH, if the opcode has one.
    pub ieth: Option<ieth::Repr>,
    /// The AtomicETH, if the opcode has one.
    pub atomic_eth: Option<atomic::Repr>,
    /// The AtomicAckETH, if the opcode has one.
    pub atomic_ack_eth: Option<atomic::AckRepr>,
    /// The FETH, if the opcode has one.
    pub feth: Option<feth::Repr>,
    /// The XETH, if the opcode has one.
    pub xeth: Option<xeth::Repr>,
    /// The XACK, if the opcode has one.
    pub xack: Option<xack::Repr>,
    /// The XCK, if the opcode has one.
    pub xck: Option<xck::Repr>,
}

impl Repr {
    /// A packet of `bth.opcode` with no extension headers filled in yet.
    pub fn new(bth: bth::Repr) -> Self {
        Self {
            bth,
            reth: None,
            deth: None,
            aeth: None,
            immdt: None,
            ieth: None,
            atomic_eth: None,
            atomic_ack_eth: None,
            feth: None,
            xeth: None,
            xack: None,
            xck: None,
        }
    }

    /// Decodes every header of a checked packet.
    pub fn parse<T: AsRef<[u8]>>(p: &Packet<T>) -> Result<Self, Error> {
        Ok(Self {
            bth: bth::Repr::parse(&p.bth())?,
            reth: p.reth().map(|h| reth::Repr::parse(&h)),
            deth: p.deth().map(|h| deth::Repr::parse(&h)),
            aeth: p.aeth().map(|h| aeth::Repr::parse(&h)),
            immdt: p.immdt().map(|h| immdt::Repr::parse(&h)),
            ieth: p.ieth().map(|h| ieth::Repr::parse(&h)),
            atomic_eth: p.atomic_eth().map(|h| atomic::Repr::parse(&h)),
            atomic_ack_eth: p.atomic_ack_eth().map(|h| atomic::AckRepr::parse(&h)),
            feth: p.feth().map(|h| feth::Repr::parse(&h)),
            xeth: p.xeth().map(|h| xeth::Repr::parse(&h)).transpose()?,
            xack: p.xack().map(|h| xack::Repr::parse(&h)).transpose()?,
            xck: p.xck().map(|h| xck::Repr::parse(&h)).transpose()?,
        })
    }

    /// The opcode's description, after checking that exactly the
    /// extension headers it calls for are present.
    fn checked_info(&self) -> Result<&'static OpcodeInfo, Error> {
        let info = self.bth.opcode.info()?;
        let present = [
            (ExtHeader::Reth, self.reth.is_some()),
            (ExtHeader::Deth, self.deth.is_some()),
            (ExtHeader::Aeth, self.aeth.is_some()),
            (ExtHeader::ImmDt, self.immdt.is_some()),
            (ExtHeader::Ieth, self.ieth.is_some()),
            (ExtHeader::AtomicEth, self.atomic_eth.is_some()),
            (ExtHeader::AtomicAckEth, self.atomic_ack_eth.is_some()),
            (ExtHeader::Feth, self.feth.is_some()),
            (ExtHeader::Xeth, self.xeth.is_some()),
            (ExtHeader::Xack, self.xack.is_some()),
            (ExtHeader::Xck, self.xck.is_some()),
        ];
        for (h, is) in present {
            if info.has(h) != is {
                return Err(Error::ReprMismatch);
            }
        }
        Ok(info)
    }

    /// Bytes of the BTH and extension headers.
    pub fn header_len(&self) -> Result<usize, Error> {
        Ok(self.checked_info()?.header_len)
    }

    /// Bytes of the whole packet (BTH to ICRC) with `payload_len` bytes of
    /// payload.
    pub fn buffer_len(&self, payload_len: usize) -> Result<usize, Error> {
        let info = self.checked_info()?;
        if !info.payload && payload_len != 0 {
            return Err(Error::ReprMismatch);
        }
        Ok(info.header_len + payload_len + pad_for(payload_len) + ICRC_LEN)
    }

    /// Writes the headers of a packet with `payload_len` bytes of payload
    /// at the start of `buf`, which must be exactly
    /// [`Repr::buffer_len`] long, and zeroes the pad. Payload and ICRC are
    /// left alone. Returns the checked packet view, ready for the payload.
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(
        &self,
        mut buf: T,
        payload_len: usize,
    ) -> Result<Packet<T>, Error> {
        let total = self.buffer_len(payload_len)?;
        let b = buf.as_mut();
        if b.len() < total {
            return Err(Error::Truncated);
        }
        if b.len() != total {
            return Err(Error::BadLength);
        }
        let pad = pad_for(payload_len);
        let mut bth = self.bth;
        bth.pad_count = pad as u8;
        bth.emit(&mut Bth::new_unchecked(&mut b[..bth::HEADER_LEN]));
        let pad_start = total - ICRC_LEN - pad;
        b[pad_start..pad_start + pad].fill(0);
        let mut p = Packet::new_checked(buf)?;
        if let (Some(r), Some(mut h)) = (self.reth, p.reth_mut()) {
            r.emit(&mut h);
        }
        if let (Some(r), Some(mut h)) = (self.deth, p.deth_mut()) {
            r.emit(&mut h);
        }
        if let (Some(r), Some(mut h)) = (self.aeth, p.aeth_mut()) {
            r.emit(&mut h);
        }
        if let (Some(r), Some(mut h)) = (self.immdt, p.immdt_mut()) {
            r.emit(&mut h);
        }
        if let (Some(r), Some(mut h)) = (self.ieth, p.ieth_mut()) {
            r.emit(&mut h);
        }
        if let (Some(r), Some(mut h)) = (self.atomic_eth, p.atomic_eth_mut()) {
            r.emit(&mut h);
        }
        if let (Some(r), Some(mut h)) = (self.atomic_ack_eth, p.atomic_ack_eth_mut()) {
            r.emit(&mut h);
        }
        if let (Some(r), Some(mut h)) = (self.feth, p.feth_mut()) {
            r.emit(&mut h);
        }
        if let (Some(r), Some(mut h)) = (self.xeth, p.xeth_mut()) {
            r.emit(&mut h);
        }
        if let (Some(r), Some(mut h)) = (self.xack, p.xack_mut()) {
            r.emit(&mut h);
        }
        if let (Some(r), Some(mut h)) = (self.xck, p.xck_mut()) {
            r.emit(&mut h);
        }
        Ok(p)
    }
}

/// Pad bytes that bring `payload_len` to a multiple of 4.
pub const fn pad_for(payload_len: usize) -> usize {
    (4 - payload_len % 4) % 4
}

#[cfg(test)]
mod tests {
    use super::super::aeth::AckSyndrome;
    use super::super::testutil::Rng;
    use super::*;
    use crate::psn::Psn;

    fn bth(opcode: Opcode) -> bth::Repr {
        bth::Repr {
            opcode,
            solicited: false,
            mig_req: true,
            pad_count: 0,
            pkey: bth::DEFAULT_PKEY,
            fecn: false,
            becn: false,
            dest_qp: 0x12,
            ack_req: true,
            psn: Psn::new(0x00ab_cdef),
        }
    }

    #[test]
    fn emit_then_parse() {
        let mut r = Repr::new(bth(Opcode::RC_RDMA_WRITE_ONLY_WITH_IMMEDIATE));
        r.reth = Some(reth::Repr {
            va: 0x7f00_0000_1000,
            rkey: 0x1234,
            dma_len: 5,
        });
        r.immdt = Some(immdt::Repr {
            imm_data: [9, 8, 7, 6],
        });
        assert_eq!(r.buffer_len(5), Ok(12 + 16 + 4 + 5 + 3 + 4));
        let mut buf = [0xaau8; 44];
        let mut p = r.emit(&mut buf[..], 5).unwrap();
        p.payload_mut().copy_from_slice(b"hello");
        assert_eq!(p.payload(), b"hello");
        assert_eq!(p.pad_len(), 3);
        assert_eq!(p.bth().pad_count(), 3);
        let mut want = r;
        want.bth.pad_count = 3;
        assert_eq!(Repr::parse(&p), Ok(want));
        assert_eq!(&buf[37..40], &[0, 0, 0], "pad zeroed");
        assert_eq!(&buf[40..], &[0xaa; 4], "ICRC left alone");
    }

    #[test]
    fn xud_packets_emit_then_parse() {
        let mut r = Repr::new(bth(Opcode::XUD_SEND_WITH_IMMEDIATE));
        r.deth = Some(deth::Repr {
            qkey: 0x1111_2222,
            src_qp: 0x33,
        });
        r.xeth = Some(xeth::Repr {
            stream: 0x0102_0304_0506_0708,
            peer_inc: 7,
            msg_seq: 9,
            oldest_psn: crate::psn::Psn::new(0x00ab_cd00),
            msg_lag: 2,
        });
        r.xck = Some(xck::Repr {
            cookie: crate::xud::cookie::Cookie::new(0x0102_0304, 0x0506_0708_090a_0b0c),
        });
        r.reth = Some(reth::Repr {
            va: 4096,
            rkey: 0,
            dma_len: 8192,
        });
        r.immdt = Some(immdt::Repr {
            imm_data: [1, 2, 3, 4],
        });
        assert_eq!(r.buffer_len(6), Ok(72 + 6 + 2 + 4));
        let mut buf = [0u8; 84];
        let p = r.emit(&mut buf[..], 6).unwrap();
        let mut want = r;
        want.bth.pad_count = 2;
        assert_eq!(Repr::parse(&p), Ok(want));

        let mut nak = Repr::new(bth(Opcode::XUD_NAK));
        nak.deth = r.deth;
        nak.xack = Some(xack::Repr {
            stream: 5,
            inc: 6,
            sack: 1 << 100,
        });
        nak.aeth = Some(aeth::Repr {
            syndrome: AckSyndrome::Nak(aeth::NakCode::Reserved(8)),
            msn: 0x00ab_cd05,
        });
        let mut buf = [0u8; 60];
        let p = nak.emit(&mut buf[..], 0).unwrap();
        assert_eq!(Repr::parse(&p), Ok(nak));
        // A stream of 0 is no sender's.
        buf[20..28].fill(0);
        let p = Packet::new_checked(&buf[..]).unwrap();
        assert_eq!(Repr::parse(&p), Err(Error::BadField));

        let mut ch = Repr::new(bth(Opcode::XUD_CHALLENGE));
        ch.deth = r.deth;
        ch.xack = nak.xack;
        ch.xck = r.xck;
        let mut buf = [0u8; 68];
        let p = ch.emit(&mut buf[..], 0).unwrap();
        assert_eq!(Repr::parse(&p), Ok(ch));
        assert_eq!(
            &buf[52..56],
            &[1, 2, 3, 4],
            "the cookie's time after the XACK"
        );
    }

    #[test]
    fn emit_checks_headers_against_opcode() {
        let mut r = Repr::new(bth(Opcode::UD_SEND_ONLY));
        assert_eq!(r.header_len(), Err(Error::ReprMismatch));
        r.deth = Some(deth::Repr {
            qkey: 0x1111_1111,
            src_qp: 3,
        });
        assert_eq!(r.header_len(), Ok(20));
        r.reth = Some(reth::Repr {
            va: 0,
            rkey: 0,
            dma_len: 0,
        });
        assert_eq!(r.header_len(), Err(Error::ReprMismatch));
        let mut ack = Repr::new(bth(Opcode::RC_ACKNOWLEDGE));
        ack.aeth = Some(aeth::Repr {
            syndrome: AckSyndrome::ACK_NO_CREDITS,
            msn: 1,
        });
        assert_eq!(ack.buffer_len(0), Ok(20));
        assert_eq!(ack.buffer_len(1), Err(Error::ReprMismatch));
        assert_eq!(
            ack.emit(&mut [0u8; 19][..], 0).err(),
            Some(Error::Truncated)
        );
        assert_eq!(
            ack.emit(&mut [0u8; 21][..], 0).err(),
            Some(Error::BadLength)
        );
        let mut bad = Repr::new(bth(Opcode(0x15)));
        bad.bth.opcode = Opcode(0x15);
        assert_eq!(bad.header_len(), Err(Error::UnknownOpcode(0x15)));
    }

    #[test]
    fn rejects_malformed_packets() {
        let mut ack = Repr::new(bth(Opcode::RC_ACKNOWLEDGE));
        ack.aeth = Some(aeth::Repr {
            syndrome: AckSyndrome::ACK_NO_CREDITS,
            msn: 1,
        });
        let mut buf = [0u8; 20];
        ack.emit(&mut buf[..], 0).unwrap();
        assert!(Packet::new_checked(&buf[..]).is_ok());
        assert_eq!(
            Packet::new_checked(&buf[..19]).err(),
            Some(Error::Truncated)
        );
        assert_eq!(
            Packet::new_checked(&buf[..11]).err(),
            Some(Error::Truncated)
        );
        let mut longer = [0u8; 24];
        longer[..20].copy_from_slice(&buf);
        assert_eq!(
            Packet::new_checked(&longer[..]).err(),
            Some(Error::BadLength)
        );
        let mut b = buf;
        b[1] |= 0x10; // pad count 1 on an ACK
        assert_eq!(Packet::new_checked(&b[..]).err(), Some(Error::Truncated));
        let mut b = longer;
        b[1] |= 0x10;
        assert_eq!(Packet::new_checked(&b[..21]).err(), Some(Error::BadLength));
        let mut b = buf;
        b[1] |= 0x01;
        assert_eq!(
            Packet::new_checked(&b[..]).err(),
            Some(Error::BadTransportVersion(1))
        );
        let mut b = buf;
        b[0] = 0x81; // CNP
        assert_eq!(
            Packet::new_checked(&b[..]).err(),
            Some(Error::UnknownOpcode(0x81))
        );
    }

    /// Checks every accessor of a packet that parsed, and that the parts
    /// add up to the whole.
    fn exercise(p: &Packet<&[u8]>) {
        let info = p.info();
        if let Err(e) = Repr::parse(p) {
            // XETH and XACK fields no sender writes (a zero stream).
            assert_eq!(e, Error::BadField);
            assert!(info.has(ExtHeader::Xeth) || info.has(ExtHeader::Xack));
        }
        assert_eq!(
            p.header_len() + p.payload_len() + p.pad_len() + ICRC_LEN,
            p.len()
        );
        assert_eq!(p.payload().len(), p.payload_len());
        assert_eq!(p.reth().is_some(), info.has(ExtHeader::Reth));
        assert_eq!(p.deth().is_some(), info.has(ExtHeader::Deth));
        assert_eq!(p.aeth().is_some(), info.has(ExtHeader::Aeth));
        assert_eq!(p.immdt().is_some(), info.has(ExtHeader::ImmDt));
        assert_eq!(p.ieth().is_some(), info.has(ExtHeader::Ieth));
        assert_eq!(p.atomic_eth().is_some(), info.has(ExtHeader::AtomicEth));
        assert_eq!(
            p.atomic_ack_eth().is_some(),
            info.has(ExtHeader::AtomicAckEth)
        );
        assert_eq!(p.feth().is_some(), info.has(ExtHeader::Feth));
        assert_eq!(p.xeth().is_some(), info.has(ExtHeader::Xeth));
        assert_eq!(p.xack().is_some(), info.has(ExtHeader::Xack));
        if !info.payload {
            assert_eq!(p.payload_len(), 0);
        }
        let _ = (p.bth().psn(), p.bth().dest_qp(), p.icrc());
    }

    /// Random and truncated byte strings never panic the parser: they
    /// parse into a consistent view or give an error.
    #[test]
    fn garbage_never_panics() {
        let mut rng = Rng::new(0x5eed);
        let known: std::vec::Vec<u8> = Opcode::all().iter().map(|i| i.opcode.0).collect();
        let mut buf = [0u8; 128];
        let (mut ok, mut err) = (0, 0);
        for _ in 0..200_000 {
            let len = rng.below(buf.len() + 1);
            rng.fill(&mut buf[..len]);
            // Mostly plausible BTHs, so that parsing gets past the first
            // checks.
            if len >= 2 && rng.below(4) != 0 {
                buf[0] = known[rng.below(known.len())];
                buf[1] &= if rng.below(8) == 0 { 0xff } else { 0xf0 };
                if rng.below(2) == 0 {
                    buf[1] &= 0xcf;
                }
            }
            match Packet::new_checked(&buf[..len]) {
                Ok(p) => {
                    ok += 1;
                    exercise(&p);
                    let _ = super::super::icrc::icrc_check(&buf[..len]);
                }
                Err(_) => err += 1,
            }
        }
        assert!(ok > 10_000 && err > 10_000, "ok {ok} err {err}");
    }

    /// Every prefix of every well-formed packet: the whole one parses, no
    /// shorter one panics.
    #[test]
    fn truncations_never_panic() {
        let mut rng = Rng::new(99);
        for info in Opcode::all() {
            let payload = if info.payload { rng.below(40) } else { 0 };
            let total = info.header_len + payload + pad_for(payload) + ICRC_LEN;
            let mut buf = std::vec![0u8; total];
            rng.fill(&mut buf);
            buf[0] = info.opcode.0;
            buf[1] = (buf[1] & 0xc0) | ((pad_for(payload) as u8) << 4);
            let p = Packet::new_checked(&buf[..]).unwrap();
            exercise(&p);
            assert_eq!(p.payload_len(), payload, "{}", info.name);
            for n in 0..total {
                if let Ok(p) = Packet::new_checked(&buf[..n]) {
                    // Only payload-carrying packets can be shortened and
                    // stay well-formed (less payload).
                    assert!(info.payload, "{}", info.name);
                    exercise(&p);
                }
            }
        }
    }
}
