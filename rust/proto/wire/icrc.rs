// SPDX-License-Identifier: GPL-2.0

//! The invariant CRC (ICRC) that ends every RoCEv2 packet (IBTA annex
//! A17.3.3).
//!
//! Switches and routers may rewrite some header fields in flight (TTL,
//! DSCP/ECN, flow label, the IP checksum that covers them, the UDP
//! checksum, and FECN/BECN in the BTH), so the ICRC covers every other
//! byte from the IP header to the end of the payload and pad, and treats
//! those fields as all-ones. The input to the CRC is, in order:
//!
//! 1. 8 bytes of 0xff standing for the LRH, which RoCE does not have;
//! 2. the IPv4 header with TOS, TTL and header checksum set to ones, or
//!    the IPv6 header with traffic class, flow label and hop limit set
//!    to ones;
//! 3. the UDP header with its checksum set to ones;
//! 4. the BTH with its byte 4 (FECN, BECN, resv6) set to ones;
//! 5. everything after the BTH up to the 4-byte ICRC itself.
//!
//! The CRC is CRC-32 as Ethernet and zlib use it (polynomial 0x04C11DB7,
//! reflected, initial value and final XOR all-ones), so `icrc_compute`
//! returns what any CRC-32 routine would return over that input. rxe
//! starts from 0xdebb20e3, the CRC state after the 8 bytes of 0xff, and
//! stores the final value with a plain native-endian 32-bit store
//! (`*icrcp = ~crc` in `rxe_icrc_generate()`), so on the little-endian
//! machines rxe runs on the trailer holds the CRC **least significant
//! byte first**, like an Ethernet FCS and unlike every other field of
//! the packet. This module does the same explicitly, on any host.
//!
//! rxe copies a fixed 20-byte IPv4 header or 40-byte IPv6 header followed
//! directly by UDP when it computes the ICRC, i.e. it assumes no IPv4
//! options and no IPv6 extension headers. No RoCE sender produces them,
//! and no two implementations would agree on such a packet's ICRC, so
//! they are rejected here ([`Error::UnsupportedIpHeader`],
//! [`Error::NotUdp`]).

use core::ops::Range;

use super::bth;
use super::Error;

/// Length of the ICRC trailer.
pub const ICRC_LEN: usize = 4;

const IPV4_HEADER_LEN: usize = 20;
const IPV6_HEADER_LEN: usize = 40;
const UDP_HEADER_LEN: usize = 8;
const IP_PROTO_UDP: u8 = 17;

/// The reflected CRC-32 polynomial.
const POLY: u32 = 0xedb8_8320;

/// Slicing-by-8 tables: `TABLES[0]` is the classic byte-at-a-time table,
/// `TABLES[k][b]` the CRC of byte `b` followed by `k` zero bytes. Eight
/// bytes then cost eight lookups and no dependent shifts, several times
/// faster than one byte at a time; built at compile time.
static TABLES: [[u32; 256]; 8] = {
    let mut t = [[0u32; 256]; 8];
    let mut i = 0;
    while i < 256 {
        let mut c = i as u32;
        let mut k = 0;
        while k < 8 {
            c = if c & 1 != 0 { (c >> 1) ^ POLY } else { c >> 1 };
            k += 1;
        }
        t[0][i] = c;
        i += 1;
    }
    let mut i = 0;
    while i < 256 {
        let mut k = 1;
        while k < 8 {
            let prev = t[k - 1][i];
            t[k][i] = (prev >> 8) ^ t[0][(prev & 0xff) as usize];
            k += 1;
        }
        i += 1;
    }
    t
};

/// Advances a raw (not inverted) CRC-32 state over `data`: the kernel's
/// `crc32_le()`.
fn crc32_update(mut crc: u32, data: &[u8]) -> u32 {
    let mut chunks = data.chunks_exact(8);
    for c in &mut chunks {
        let lo = crc ^ u32::from_le_bytes([c[0], c[1], c[2], c[3]]);
        crc = TABLES[7][(lo & 0xff) as usize]
            ^ TABLES[6][((lo >> 8) & 0xff) as usize]
            ^ TABLES[5][((lo >> 16) & 0xff) as usize]
            ^ TABLES[4][(lo >> 24) as usize]
            ^ TABLES[3][usize::from(c[4])]
            ^ TABLES[2][usize::from(c[5])]
            ^ TABLES[1][usize::from(c[6])]
            ^ TABLES[0][usize::from(c[7])];
    }
    for &b in chunks.remainder() {
        crc = TABLES[0][((crc ^ u32::from(b)) & 0xff) as usize] ^ (crc >> 8);
    }
    crc
}

/// The CRC state after the masked LRH (8 bytes of 0xff) from the
/// all-ones initial value; rxe hard-codes it as 0xdebb20e3.
const LRH_SEED: u32 = {
    let mut crc = !0u32;
    let mut n = 0;
    while n < 8 {
        let mut c = (crc ^ 0xff) & 0xff;
        let mut k = 0;
        while k < 8 {
            c = if c & 1 != 0 { (c >> 1) ^ POLY } else { c >> 1 };
            k += 1;
        }
        crc = c ^ (crc >> 8);
        n += 1;
    }
    crc
};

/// IP version of a RoCEv2 packet.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum IpVersion {
    /// IPv4 (RoCEv2 GIDs of the form ::ffff:a.b.c.d).
    V4,
    /// IPv6.
    V6,
}

/// Where the IP and UDP headers of a RoCEv2 datagram end and how long
/// it is, from a buffer starting at the IP header. Parsing checks that
/// the IP and UDP length fields agree, that the buffer holds the whole
/// datagram (it may hold more, e.g. Ethernet padding, which is ignored)
/// and that the UDP payload can hold a BTH and an ICRC.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct IpUdp {
    /// IPv4 or IPv6, from the version nibble.
    pub version: IpVersion,
    /// Length of the IP header (20 or 40).
    pub ip_header_len: usize,
    /// The UDP length field: UDP header, BTH, ..., ICRC.
    pub udp_len: usize,
}

impl IpUdp {
    /// Reads the IP and UDP headers at the start of `buf`.
    pub fn parse(buf: &[u8]) -> Result<Self, Error> {
        let first = *buf.first().ok_or(Error::Truncated)?;
        let (version, ip_header_len) = match first >> 4 {
            4 => (IpVersion::V4, IPV4_HEADER_LEN),
            6 => (IpVersion::V6, IPV6_HEADER_LEN),
            v => return Err(Error::BadIpVersion(v)),
        };
        let hdrs = buf
            .get(..ip_header_len + UDP_HEADER_LEN)
            .ok_or(Error::Truncated)?;
        let be16 = |at: usize| usize::from(u16::from_be_bytes([hdrs[at], hdrs[at + 1]]));
        let udp_len = be16(ip_header_len + 4);
        match version {
            IpVersion::V4 => {
                if usize::from(first & 0x0f) * 4 != IPV4_HEADER_LEN {
                    return Err(Error::UnsupportedIpHeader);
                }
                // More-fragments flag or a fragment offset: not a whole
                // datagram.
                if be16(6) & 0x3fff != 0 {
                    return Err(Error::UnsupportedIpHeader);
                }
                if hdrs[9] != IP_PROTO_UDP {
                    return Err(Error::NotUdp);
                }
                if be16(2) != IPV4_HEADER_LEN + udp_len {
                    return Err(Error::BadLength);
                }
            }
            IpVersion::V6 => {
                if hdrs[6] != IP_PROTO_UDP {
                    return Err(Error::NotUdp);
                }
                if be16(4) != udp_len {
                    return Err(Error::BadLength);
                }
            }
        }
        if udp_len < UDP_HEADER_LEN + bth::HEADER_LEN + ICRC_LEN {
            return Err(Error::Truncated);
        }
        let ip = Self {
            version,
            ip_header_len,
            udp_len,
        };
        if buf.len() < ip.datagram_len() {
            return Err(Error::Truncated);
        }
        Ok(ip)
    }

    /// Length of the datagram: IP header to ICRC.
    pub fn datagram_len(&self) -> usize {
        self.ip_header_len + self.udp_len
    }

    /// Where the UDP payload (BTH to ICRC, inclusive) lies in the buffer.
    pub fn udp_payload(&self) -> Range<usize> {
        self.ip_header_len + UDP_HEADER_LEN..self.datagram_len()
    }

    /// Where the ICRC lies in the buffer.
    pub fn icrc(&self) -> Range<usize> {
        self.datagram_len() - ICRC_LEN..self.datagram_len()
    }
}

/// An ICRC computation in progress, for packets that are not in one
/// contiguous buffer (headers in one place, payload in pages).
#[derive(Clone, Copy, Debug)]
pub struct Icrc {
    state: u32,
}

impl Icrc {
    /// Starts an ICRC over the headers at the start of `buf`: the IP
    /// header (version from its first nibble), UDP header and BTH, which
    /// `buf` must hold at least. Returns the computation after those
    /// masked headers and how many bytes of `buf` it covered; feed the
    /// rest of the packet up to the ICRC to [`Icrc::update`]. Only the
    /// version is looked at: check received headers with
    /// [`IpUdp::parse`] first.
    pub fn begin(buf: &[u8]) -> Result<(Self, usize), Error> {
        let first = *buf.first().ok_or(Error::Truncated)?;
        let ip_header_len = match first >> 4 {
            4 => IPV4_HEADER_LEN,
            6 => IPV6_HEADER_LEN,
            v => return Err(Error::BadIpVersion(v)),
        };
        let n = ip_header_len + UDP_HEADER_LEN + bth::HEADER_LEN;
        let src = buf.get(..n).ok_or(Error::Truncated)?;
        // Copy the headers to mask them; IPv6 + UDP + BTH is the most.
        let mut hdr = [0u8; IPV6_HEADER_LEN + UDP_HEADER_LEN + bth::HEADER_LEN];
        let hdr = &mut hdr[..n];
        hdr.copy_from_slice(src);
        if ip_header_len == IPV4_HEADER_LEN {
            hdr[1] = 0xff; // TOS (DSCP, ECN)
            hdr[8] = 0xff; // TTL
            hdr[10] = 0xff; // header checksum
            hdr[11] = 0xff;
        } else {
            hdr[0] |= 0x0f; // traffic class, high nibble
            hdr[1] = 0xff; // traffic class, low nibble; flow label
            hdr[2] = 0xff;
            hdr[3] = 0xff;
            hdr[7] = 0xff; // hop limit
        }
        let udp = ip_header_len;
        hdr[udp + 6] = 0xff; // UDP checksum
        hdr[udp + 7] = 0xff;
        hdr[udp + UDP_HEADER_LEN + bth::ICRC_MASKED_BYTE] = 0xff;
        Ok((
            Self {
                state: crc32_update(LRH_SEED, hdr),
            },
            n,
        ))
    }

    /// Continues over `data`.
    pub fn update(&mut self, data: &[u8]) {
        self.state = crc32_update(self.state, data);
    }

    /// Continues over bytes that are not in one slice (an skb's
    /// fragments) with a CRC-32 engine of the caller's: `f` takes the raw
    /// CRC-32 register (crc32_le's: no inversion, reflected) and returns
    /// it advanced over those bytes, or fails.
    pub fn try_update_with<E>(&mut self, f: impl FnOnce(u32) -> Result<u32, E>) -> Result<(), E> {
        self.state = f(self.state)?;
        Ok(())
    }

    /// The ICRC value. On the wire it goes least significant byte first:
    /// `value.to_le_bytes()`.
    pub fn finish(&self) -> u32 {
        !self.state
    }
}

/// Computes the ICRC of the RoCEv2 datagram at the start of `buf` (IPv4
/// or IPv6, told apart by the version nibble), over everything up to its
/// last 4 bytes. The value goes on the wire as `to_le_bytes()`.
pub fn icrc_compute(buf: &[u8]) -> Result<u32, Error> {
    let ip = IpUdp::parse(buf)?;
    let (mut icrc, done) = Icrc::begin(buf)?;
    icrc.update(&buf[done..ip.icrc().start]);
    Ok(icrc.finish())
}

/// Checks the ICRC of the RoCEv2 datagram at the start of `buf`.
pub fn icrc_check(buf: &[u8]) -> Result<(), Error> {
    let ip = IpUdp::parse(buf)?;
    let computed = icrc_compute(buf)?;
    let t = &buf[ip.icrc()];
    let received = u32::from_le_bytes([t[0], t[1], t[2], t[3]]);
    if computed == received {
        Ok(())
    } else {
        Err(Error::IcrcMismatch { computed, received })
    }
}

/// Computes the ICRC of the RoCEv2 datagram at the start of `buf` and
/// writes it into the datagram's last 4 bytes; returns it.
pub fn icrc_fill(buf: &mut [u8]) -> Result<u32, Error> {
    icrc_fill_with(buf, crc32_update)
}

/// As [`icrc_fill`], with the CRC-32 over everything after the masked
/// headers (the extension headers, the payload and its pad: the bulk of
/// the work) run by `engine`, which takes the raw CRC-32 register
/// (crc32_le's: no inversion, reflected) and returns it advanced over the
/// bytes: the kernel passes its `crc32_le`, which newer kernels
/// accelerate.
pub fn icrc_fill_with(
    buf: &mut [u8],
    engine: impl FnOnce(u32, &[u8]) -> u32,
) -> Result<u32, Error> {
    let ip = IpUdp::parse(buf)?;
    let (mut icrc, done) = Icrc::begin(buf)?;
    let rest = buf.get(done..ip.icrc().start).ok_or(Error::Truncated)?;
    icrc.state = engine(icrc.state, rest);
    let value = icrc.finish();
    buf[ip.icrc()].copy_from_slice(&value.to_le_bytes());
    Ok(value)
}

#[cfg(test)]
pub(crate) mod tests {
    use super::super::testutil::Rng;
    use super::*;
    use std::vec::Vec;

    fn crc32(data: &[u8]) -> u32 {
        !crc32_update(!0, data)
    }

    #[test]
    fn is_standard_crc32() {
        // The CRC-32 check value.
        assert_eq!(crc32(b"123456789"), 0xcbf4_3926);
        assert_eq!(crc32(b""), 0);
        assert_eq!(
            crc32(b"The quick brown fox jumps over the lazy dog"),
            0x414f_a339
        );
    }

    #[test]
    fn lrh_seed_is_rxes() {
        assert_eq!(LRH_SEED, 0xdebb_20e3);
        assert_eq!(crc32_update(!0, &[0xff; 8]), LRH_SEED);
    }

    #[test]
    fn slicing_matches_bytewise() {
        let mut rng = Rng::new(7);
        let mut buf = [0u8; 100];
        rng.fill(&mut buf);
        for start in 0..20 {
            for end in start..buf.len() {
                let mut bytewise = 0x1234_5678u32;
                for &b in &buf[start..end] {
                    bytewise =
                        TABLES[0][((bytewise ^ u32::from(b)) & 0xff) as usize] ^ (bytewise >> 8);
                }
                assert_eq!(crc32_update(0x1234_5678, &buf[start..end]), bytewise);
            }
        }
    }

    /// An IPv4 RoCEv2 datagram with `payload` bytes after a BTH, ICRC
    /// filled in.
    pub(crate) fn ipv4_datagram(payload: usize) -> Vec<u8> {
        ipv4_roce(0, 0, payload, 2)
    }

    /// An IPv4 RoCEv2 datagram (RC SEND_ONLY) from 10.0.0.1 to
    /// 10.0.0.`dst`: identification `id`, PSN `psn`, `payload` bytes after
    /// the BTH, header checksum and ICRC filled in.
    pub(crate) fn ipv4_roce(id: u16, psn: u32, payload: usize, dst: u8) -> Vec<u8> {
        let udp_len = 8 + 12 + payload + 4;
        let total = 20 + udp_len;
        let mut p = std::vec![0u8; total];
        p[0] = 0x45;
        p[2..4].copy_from_slice(&(total as u16).to_be_bytes());
        p[4..6].copy_from_slice(&id.to_be_bytes());
        p[6] = 0x40; // DF
        p[8] = 64;
        p[9] = 17;
        p[12..16].copy_from_slice(&[10, 0, 0, 1]);
        p[16..20].copy_from_slice(&[10, 0, 0, dst]);
        p[20..22].copy_from_slice(&0xc000u16.to_be_bytes());
        p[22..24].copy_from_slice(&4791u16.to_be_bytes());
        p[24..26].copy_from_slice(&(udp_len as u16).to_be_bytes());
        p[28] = 0x04; // RC SEND_ONLY
        p[29] = 0x40 | (((4 - payload % 4) % 4) as u8) << 4;
        p[30..32].copy_from_slice(&[0xff, 0xff]);
        p[35] = 0x11;
        p[37..40].copy_from_slice(&psn.to_be_bytes()[1..]);
        for (i, b) in p[40..40 + payload].iter_mut().enumerate() {
            *b = (i as u8) ^ (psn as u8);
        }
        set_ipv4_checksum(&mut p);
        icrc_fill(&mut p).unwrap();
        p
    }

    /// rxe 6.12's ICRC of an RC FLUSH: its opcode table gives FLUSH no
    /// payload offset, so `payload_addr()` is the BTH and
    /// `rxe_icrc_generate()`/`rxe_icrc_check()` run the CRC over the BTH,
    /// FETH and RETH a second time (unmasked) after the headers. rxud
    /// follows IBTA A17.3.3 (each byte once): each refuses the other's
    /// FLUSH packets as bad ICRC, so FLUSH does not cross between them
    /// (design.rst, "FLUSH").
    #[test]
    fn rxes_flush_icrc_covers_the_headers_twice_and_is_refused() {
        // BTH + FETH (global visibility, range) + RETH.
        let mut p = ipv4_roce(1, 9, 4 + 16, 2);
        p[28] = 0x1c; // RC FLUSH
        p[29] &= !0x30; // no pad
        p[40..44].copy_from_slice(&[0, 0, 0, 0x01]);
        p[44..52].copy_from_slice(&0x7f00_0000_1000u64.to_be_bytes());
        p[52..56].copy_from_slice(&0x0000_1234u32.to_be_bytes());
        p[56..60].copy_from_slice(&4096u32.to_be_bytes());
        let spec = icrc_fill(&mut p).unwrap();
        assert_eq!(icrc_check(&p), Ok(()));
        let (mut rxe, done) = Icrc::begin(&p).unwrap();
        assert_eq!(done, 20 + 8 + 12);
        rxe.update(&p[40..60]); // the headers after the BTH, once ...
        rxe.update(&p[28..60]); // ... and BTH, FETH, RETH as "payload"
        let rxe = rxe.finish();
        assert_ne!(rxe, spec);
        p[60..64].copy_from_slice(&rxe.to_le_bytes());
        assert_eq!(
            icrc_check(&p),
            Err(Error::IcrcMismatch {
                computed: spec,
                received: rxe
            })
        );
    }

    /// Computes an IPv4 header's checksum (`ip_send_check`).
    pub(crate) fn set_ipv4_checksum(d: &mut [u8]) {
        d[10] = 0;
        d[11] = 0;
        let mut sum = 0u32;
        for w in d[..20].chunks(2) {
            sum += u32::from(u16::from_be_bytes([w[0], w[1]]));
        }
        while sum > 0xffff {
            sum = (sum & 0xffff) + (sum >> 16);
        }
        d[10..12].copy_from_slice(&(!(sum as u16)).to_be_bytes());
    }

    #[test]
    fn fill_with_another_engine_gives_the_same_icrc() {
        // A bytewise CRC-32 (the definition) in place of the tables.
        fn bytewise(mut crc: u32, data: &[u8]) -> u32 {
            for &b in data {
                crc ^= u32::from(b);
                for _ in 0..8 {
                    crc = if crc & 1 != 0 {
                        (crc >> 1) ^ 0xedb8_8320
                    } else {
                        crc >> 1
                    };
                }
            }
            crc
        }
        for n in [0, 1, 3, 4, 1000, 1024] {
            let p = ipv4_datagram(n);
            let mut q = p.clone();
            let value = icrc_fill_with(&mut q, bytewise).unwrap();
            assert_eq!(q, p);
            assert_eq!(value, icrc_compute(&p).unwrap());
        }
    }

    #[test]
    fn fill_then_check() {
        for n in [0, 1, 4, 63, 64, 1024] {
            let p = ipv4_datagram(n);
            assert_eq!(icrc_check(&p), Ok(()));
            // Trailing bytes beyond the IP length are ignored.
            let mut longer = p.clone();
            longer.extend_from_slice(&[0; 6]);
            assert_eq!(icrc_check(&longer), Ok(()));
        }
    }

    /// What the kernel's `rxud_skb_crc32` relies on: with the raw
    /// register, a fragment's CRC taken from zero combines with the state
    /// before it (`crc32_le_combine`: that state advanced over as many
    /// zero bytes, XOR the fragment's CRC).
    #[test]
    fn fragments_combine_as_the_kernel_does() {
        let p = ipv4_datagram(300);
        let end = p.len() - ICRC_LEN;
        let (mut whole, n) = Icrc::begin(&p).unwrap();
        whole.update(&p[n..end]);
        let (mut pieces, _) = Icrc::begin(&p).unwrap();
        pieces
            .try_update_with(|mut crc| -> Result<u32, ()> {
                for frag in p[n..end].chunks(97) {
                    let shifted = crc32_update(crc, &std::vec![0u8; frag.len()]);
                    crc = shifted ^ crc32_update(0, frag);
                }
                Ok(crc)
            })
            .unwrap();
        assert_eq!(pieces.finish(), whole.finish());
        assert_eq!(whole.finish().to_le_bytes(), p[end..]);
        let (mut failed, _) = Icrc::begin(&p).unwrap();
        assert_eq!(failed.try_update_with(|_| Err(7)), Err(7));
    }

    #[test]
    fn trailer_is_little_endian() {
        let p = ipv4_datagram(8);
        let icrc = icrc_compute(&p).unwrap();
        assert_eq!(&p[p.len() - 4..], &icrc.to_le_bytes());
        // And it is the plain CRC-32 of the masked input.
        let mut input = std::vec![0xffu8; 8];
        let mut masked = p[..p.len() - 4].to_vec();
        for i in [1, 8, 10, 11, 26, 27, 32] {
            masked[i] = 0xff;
        }
        input.extend_from_slice(&masked);
        assert_eq!(crc32(&input), icrc);
    }

    #[test]
    fn reports_errors_as_values() {
        let p = ipv4_datagram(8);
        assert_eq!(icrc_check(&[]), Err(Error::Truncated));
        assert_eq!(icrc_check(&p[..p.len() - 1]), Err(Error::Truncated));
        assert_eq!(icrc_check(&p[..27]), Err(Error::Truncated));
        let mut q = p.clone();
        q[0] = 0x55;
        assert_eq!(icrc_check(&q), Err(Error::BadIpVersion(5)));
        let mut q = p.clone();
        q[0] = 0x46;
        assert_eq!(icrc_check(&q), Err(Error::UnsupportedIpHeader));
        let mut q = p.clone();
        q[6] |= 0x20;
        assert_eq!(icrc_check(&q), Err(Error::UnsupportedIpHeader));
        let mut q = p.clone();
        q[9] = 6;
        assert_eq!(icrc_check(&q), Err(Error::NotUdp));
        let mut q = p.clone();
        q[25] -= 1;
        assert_eq!(icrc_check(&q), Err(Error::BadLength));
        let mut q = p.clone();
        let last = q.len() - 1;
        q[last] ^= 1;
        match icrc_check(&q) {
            Err(Error::IcrcMismatch { computed, received }) => {
                assert_eq!(computed ^ received, 0x0100_0000)
            }
            other => panic!("{other:?}"),
        }
    }
}
