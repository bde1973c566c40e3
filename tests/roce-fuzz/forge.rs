// SPDX-License-Identifier: GPL-2.0

//! One crafted frame: Ethernet, IPv4 or IPv6, UDP to 4791, then an IB
//! transport packet whose headers are laid out by rxud-proto's opcode
//! table and filled through its header views (the code rxud parses them
//! with), with values chosen to hit checks at their edges: live QPNs,
//! predicted PSNs, the victims' real keys and memory beside wrong ones,
//! lengths that lie. Then, for some, a mutation: truncation at a header
//! boundary, flipped bytes, pad counts and lengths that do not add up,
//! IP options, fragments, checksums and lengths that lie at the IP and
//! UDP level. The ICRC is computed after the transport-level mutations
//! (so that the packet passes the ICRC check and reaches what comes
//! after it) and before the IP-level ones; a share of packets is sent
//! again as a bad-ICRC twin.

use std::net::{Ipv4Addr, Ipv6Addr};

use rxud_proto::psn::Psn;
use rxud_proto::wire::{
    aeth, atomic, bth, deth, icrc::Icrc, reth, xack, xck, xeth, ExtHeader, Opcode, QPN_MASK,
    ROCE_V2_UDP_PORT,
};

use crate::targets::{Kind, Target, Victim};

/// xorshift64*: seeded, so a run's choices replay from its seed (given
/// the same targets: those are read from the live system).
#[derive(Clone, Debug)]
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Self {
        // splitmix64 of the seed: seeds 1, 2, 3... give unrelated streams.
        let mut z = seed.wrapping_add(0x9e37_79b9_7f4a_7c15);
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        Self((z ^ (z >> 31)) | 1)
    }

    pub fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    /// In `0..n` (`n > 0`).
    pub fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }

    /// True `pct` times in 100.
    pub fn pct(&mut self, pct: u64) -> bool {
        self.below(100) < pct
    }

    pub fn fill(&mut self, b: &mut [u8]) {
        for x in b {
            *x = self.next() as u8;
        }
    }

    fn pick<T: Copy>(&mut self, xs: &[T]) -> T {
        xs[self.below(xs.len() as u64) as usize]
    }
}

/// The link-level and IP addresses frames go between.
#[derive(Clone, Copy, Debug)]
pub struct Addrs {
    pub src_mac: [u8; 6],
    pub dst_mac: [u8; 6],
    /// The fuzzer's address: the victims' peer, no live QP's.
    pub src4: Ipv4Addr,
    /// The device under test's.
    pub dst4: Ipv4Addr,
    /// The same for IPv6, if the device has an IPv6 GID.
    pub v6: Option<(Ipv6Addr, Ipv6Addr)>,
}

/// What was done to a frame, for the run's tally.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Class {
    /// Well formed (as far as its field values go).
    Whole,
    /// Cut at a header boundary (or just past one), lengths fixed up.
    Truncated,
    /// Bytes of the transport packet flipped.
    Flipped,
    /// A pad count the payload does not match.
    PadLie,
    /// UDP length shorter or longer than the datagram.
    UdpLenLie,
    /// IP total (v4) or payload (v6) length shorter or longer.
    IpLenLie,
    /// IPv4 options (IHL > 5) or an IPv6 hop-by-hop header.
    IpOptions,
    /// Cut into two IP fragments (sent in either order), or a lone
    /// first fragment that is never completed.
    Fragmented,
    /// A wrong IPv4 header checksum, or a wrong UDP checksum.
    Checksum,
    /// Bytes after the IP datagram in the Ethernet frame.
    Trailer,
}

impl Class {
    #[cfg(test)]
    pub const ALL: [Class; 10] = [
        Class::Whole,
        Class::Truncated,
        Class::Flipped,
        Class::PadLie,
        Class::UdpLenLie,
        Class::IpLenLie,
        Class::IpOptions,
        Class::Fragmented,
        Class::Checksum,
        Class::Trailer,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Class::Whole => "whole",
            Class::Truncated => "truncated",
            Class::Flipped => "flipped",
            Class::PadLie => "pad-lie",
            Class::UdpLenLie => "udp-len-lie",
            Class::IpLenLie => "ip-len-lie",
            Class::IpOptions => "ip-options",
            Class::Fragmented => "fragmented",
            Class::Checksum => "checksum",
            Class::Trailer => "eth-trailer",
        }
    }
}

/// A crafted packet: its frames (two for a fragmented one), its bad-ICRC
/// twin's if it has one.
#[derive(Clone, Debug)]
pub struct Crafted {
    pub class: Class,
    pub opcode: u8,
    pub v6: bool,
    pub frames: Vec<Vec<u8>>,
    pub twin: Option<Vec<u8>>,
}

const ETH_LEN: usize = 14;
const IPV4_LEN: usize = 20;
const IPV6_LEN: usize = 40;
const UDP_LEN: usize = 8;
const ICRC_LEN: usize = 4;
/// The veth's MTU: no IP datagram beyond it (AF_PACKET refuses it).
const MTU: usize = 1500;
/// Streams and source QPNs of XUD packets come from small pools, so that
/// consecutive packets meet the state earlier ones made.
const XUD_STREAMS: [u64; 4] = [0x5eed_0001, 0x5eed_0002, 0xffff_ffff_ffff_ffff, 1];
const SRC_QPNS: [u32; 6] = [0x100, 0x101, 0x102, 1, 0, QPN_MASK];

/// The ext header bytes of `h` in `ib` (laid out per the opcode table).
fn ext<'a>(ib: &'a mut [u8], info: &rxud_proto::wire::OpcodeInfo, h: ExtHeader) -> &'a mut [u8] {
    let off = info.offset_of(h).unwrap_or(0);
    &mut ib[off..off + h.size()]
}

/// A length that is right, or one of the lies that catch off-by-ones and
/// overflows.
fn length(rng: &mut Rng, right: u32) -> u32 {
    if rng.pct(50) {
        return right;
    }
    let any = rng.next() as u32;
    rng.pick(&[
        0,
        1,
        right.wrapping_add(1),
        right.wrapping_sub(1),
        right.wrapping_add(4096),
        0x7fff_ffff,
        0x8000_0000,
        u32::MAX,
        any,
        1 << 31 | right,
    ])
}

/// A PSN near `expected` (duplicates just behind it, the next ones just
/// ahead, the edges of the window) or anywhere.
fn psn_near(rng: &mut Rng, expected: Option<u32>) -> u32 {
    let Some(e) = expected else {
        return rng.next() as u32 & Psn::MASK;
    };
    let delta: i64 = match rng.below(10) {
        0..=3 => 0,
        4 => -1,
        5 => -(rng.below(16) as i64) - 1,
        6 => rng.below(16) as i64 + 1,
        7 => (Psn::HALF as i64) - 1 + rng.below(3) as i64,
        8 => -(Psn::HALF as i64),
        _ => rng.next() as i64,
    };
    (e as i64).wrapping_add(delta) as u32 & Psn::MASK
}

/// Picks the opcode: mostly one of the target's transport, some of any
/// known one, some any byte at all.
fn opcode_for(rng: &mut Rng, t: &Target) -> Opcode {
    let all = Opcode::all();
    let want = match t.kind {
        Kind::Rc => Some(0x00),
        Kind::Uc => Some(0x20),
        Kind::Ud | Kind::Gsi => Some(0x60),
        Kind::Xud => Some(0xe0),
        Kind::Other => None,
    };
    match rng.below(100) {
        0..=59 if want.is_some() => {
            let base = want.unwrap_or(0);
            let same: Vec<_> = all.iter().filter(|i| i.opcode.0 & 0xe0 == base).collect();
            same[rng.below(same.len() as u64) as usize].opcode
        }
        0..=84 => all[rng.below(all.len() as u64) as usize].opcode,
        _ => Opcode(rng.next() as u8),
    }
}

/// The transport packet (BTH to ICRC, ICRC zero): headers as the opcode
/// lays them out (random bytes of a random length for an unknown
/// opcode), fields set through rxud-proto's views.
fn transport(rng: &mut Rng, t: &Target, op: Opcode, max: usize) -> Vec<u8> {
    let info = op.info().ok();
    let hdr_len = info.map_or(12 + rng.below(49) as usize, |i| i.header_len);
    let carries = info.is_none_or(|i| i.payload);
    let room = max.saturating_sub(hdr_len + 3 + ICRC_LEN);
    let payload = if !carries && !rng.pct(10) {
        0
    } else {
        // Mostly short (the headers are what is crafted; under TCG every
        // byte costs, twice with its ICRC), some up to the MTU.
        match rng.below(10) {
            0 => 0,
            1..=4 => 1 + rng.below(16) as usize,
            5..=7 => 17 + rng.below(240) as usize,
            _ => rng.below(room as u64 + 1) as usize,
        }
        .min(room)
    };
    let pad = (4 - payload % 4) % 4;
    let mut ib = vec![0u8; hdr_len + payload + pad + ICRC_LEN];
    rng.fill(&mut ib[..hdr_len + payload]);
    let victim = t.victim;
    {
        let mut b = bth::Header::new_unchecked(&mut ib[..bth::HEADER_LEN]);
        b.set_opcode(op);
        b.set_tver(if rng.pct(3) { rng.below(16) as u8 } else { 0 });
        b.set_pad_count(pad as u8);
        b.set_pkey(if rng.pct(5) {
            rng.next() as u16
        } else {
            bth::DEFAULT_PKEY
        });
        b.set_dest_qp(t.qpn);
        let request = info.is_none_or(|i| i.direction == rxud_proto::wire::Direction::Request);
        let psn = psn_near(
            rng,
            if request {
                t.rq_psn
            } else {
                t.sq_psn.map(|p| p.wrapping_sub(1))
            },
        );
        b.set_psn(Psn::new(psn));
    }
    let Some(info) = info else { return ib };
    let (qkey, rkey, va, mlen, peer_qpn) = match victim {
        Some(Victim {
            peer_qpn,
            qkey,
            rkey,
            va,
            len,
        }) if rng.pct(80) => (qkey, rkey, va, len, peer_qpn),
        _ => (
            rng.next() as u32,
            rng.next() as u32,
            rng.next(),
            rng.below(1 << 20) as u32,
            rng.pick(&SRC_QPNS),
        ),
    };
    // An address in the region, at its edges, or past them.
    let addr = |rng: &mut Rng, n: u32| -> u64 {
        match rng.below(8) {
            0..=3 => va + rng.below(u64::from(mlen.saturating_sub(n)) + 1),
            4 => va + u64::from(mlen.saturating_sub(n)) + 1 + rng.below(64),
            5 => va.wrapping_sub(1 + rng.below(64)),
            6 => u64::MAX - rng.below(u64::from(n) + 1),
            _ => rng.next(),
        }
    };
    for &h in info.headers {
        match h {
            ExtHeader::Reth => {
                let a = addr(rng, payload as u32);
                let len = length(rng, payload as u32);
                let mut r = reth::Header::new_unchecked(ext(&mut ib, info, h));
                r.set_va(a);
                r.set_rkey(if rng.pct(80) { rkey } else { rng.next() as u32 });
                r.set_dma_len(len);
            }
            ExtHeader::Deth => {
                let mut d = deth::Header::new_unchecked(ext(&mut ib, info, h));
                d.set_qkey(match rng.below(10) {
                    0..=7 => qkey,
                    8 => deth::GSI_QKEY,
                    _ => rng.next() as u32,
                });
                d.set_src_qp(if rng.pct(80) {
                    peer_qpn
                } else {
                    rng.pick(&SRC_QPNS)
                });
            }
            ExtHeader::Aeth => {
                // Syndrome: ACK, RNR NAK, NAK (each code) or reserved.
                let (rnr, any) = (0x20 | rng.below(32) as u8, rng.next() as u8);
                let syn = rng.pick(&[
                    0x1f, 0x00, rnr, 0x60, 0x61, 0x62, 0x63, 0x64, 0x40, 0x80, any,
                ]);
                let msn = rng.next() as u32 & 0xff_ffff;
                let mut a = aeth::Header::new_unchecked(ext(&mut ib, info, h));
                a.set_msn(msn);
                ext(&mut ib, info, h)[0] = syn;
            }
            ExtHeader::AtomicEth => {
                let a = addr(rng, 8) & if rng.pct(70) { !7 } else { u64::MAX };
                let mut x = atomic::Header::new_unchecked(ext(&mut ib, info, h));
                x.set_va(a);
                x.set_rkey(if rng.pct(80) { rkey } else { rng.next() as u32 });
            }
            ExtHeader::Ieth => {
                // The R_Key to invalidate: the victim's own, sometimes.
                if rng.pct(50) {
                    ext(&mut ib, info, h).copy_from_slice(&rkey.to_be_bytes());
                }
            }
            ExtHeader::Xeth => {
                let psn = bth::Header::new_unchecked(&ib[..bth::HEADER_LEN]).psn();
                let stream = if rng.pct(90) {
                    rng.pick(&XUD_STREAMS)
                } else {
                    rng.next()
                };
                let seq = rng.below(8) as u32;
                let lag = if rng.pct(90) {
                    rng.below(4) as u8
                } else {
                    rng.next() as u8
                };
                let back = rng.below(64) as u32;
                let inc = if rng.pct(80) { 0 } else { rng.next() as u32 };
                let mut x = xeth::Header::new_unchecked(ext(&mut ib, info, h));
                x.set_stream(stream);
                x.set_peer_inc(inc);
                x.set_msg_seq(seq);
                x.set_oldest_psn(Psn::new(psn.value().wrapping_sub(back)));
                x.set_msg_lag(lag);
            }
            ExtHeader::Xack => {
                let stream = rng.pick(&XUD_STREAMS);
                let sack = u128::from(rng.next()) << 64 | u128::from(rng.next());
                let inc = rng.next() as u32;
                let mut x = xack::Header::new_unchecked(ext(&mut ib, info, h));
                x.set_stream(stream);
                x.set_inc(inc);
                x.set_sack(sack);
            }
            ExtHeader::Xck => {
                // No cookie (the receiver challenges, from no state) or a
                // made-up one (dropped): a fuzzer never holds a valid one,
                // so no packet of it opens an XUD window
                // (Documentation/xud.rst, "Stream cookies").
                let mut x = xck::Header::new_unchecked(ext(&mut ib, info, h));
                if rng.pct(50) {
                    x.set_time(0);
                    x.set_mac(0);
                } else {
                    x.set_time(rng.next() as u32);
                    x.set_mac(rng.next());
                }
            }
            // Random bytes: immediate data, atomic ACK values, FETH.
            ExtHeader::ImmDt | ExtHeader::AtomicAckEth | ExtHeader::Feth => {}
        }
    }
    ib
}

/// The header boundaries of a transport packet: after the BTH, after
/// each extension header, into the payload, at the ICRC.
fn boundaries(op: Opcode, ib_len: usize) -> Vec<usize> {
    let mut b = vec![0, 1, 4, 8, 11, bth::HEADER_LEN];
    if let Ok(info) = op.info() {
        let mut off = bth::HEADER_LEN;
        for h in info.headers {
            b.push(off + 1);
            off += h.size();
            b.push(off - 1);
            b.push(off);
        }
        b.push(off + ICRC_LEN);
        b.push(off + ICRC_LEN - 1);
    }
    b.push(ib_len.saturating_sub(1));
    b.retain(|&x| x < ib_len);
    b
}

fn ipv4_checksum(h: &[u8]) -> u16 {
    let mut sum: u32 = h
        .chunks(2)
        .map(|c| u32::from(u16::from_be_bytes([c[0], *c.get(1).unwrap_or(&0)])))
        .sum();
    while sum > 0xffff {
        sum = (sum & 0xffff) + (sum >> 16);
    }
    !(sum as u16)
}

/// The UDP checksum over IPv6's pseudo header (RFC 8200 8.1): IPv6
/// receivers drop UDP without one.
fn udp6_checksum(src: &Ipv6Addr, dst: &Ipv6Addr, udp: &[u8]) -> u16 {
    let mut pseudo = Vec::with_capacity(40 + udp.len());
    pseudo.extend_from_slice(&src.octets());
    pseudo.extend_from_slice(&dst.octets());
    pseudo.extend_from_slice(&(udp.len() as u32).to_be_bytes());
    pseudo.extend_from_slice(&[0, 0, 0, 17]);
    pseudo.extend_from_slice(udp);
    match ipv4_checksum(&pseudo) {
        0 => 0xffff,
        c => c,
    }
}

/// Writes the ICRC of the datagram `dg` (IP header at 0, `ip_len` bytes
/// of it) into its last 4 bytes, if it holds the headers the ICRC needs.
fn fill_icrc(dg: &mut [u8], ip_len: usize) {
    let n = ip_len + UDP_LEN + bth::HEADER_LEN;
    if dg.len() < n + ICRC_LEN {
        return;
    }
    let Ok((mut c, done)) = Icrc::begin(dg) else {
        return;
    };
    let end = dg.len() - ICRC_LEN;
    c.update(&dg[done..end]);
    let v = c.finish().to_le_bytes();
    dg[end..].copy_from_slice(&v);
}

/// Crafts one packet for `t`.
pub fn craft(rng: &mut Rng, a: &Addrs, t: &Target) -> Crafted {
    let v6 = a.v6.is_some() && rng.pct(15);
    let ip_len = if v6 { IPV6_LEN } else { IPV4_LEN };
    let class = match rng.below(100) {
        0..=44 => Class::Whole,
        45..=59 => Class::Truncated,
        60..=67 => Class::Flipped,
        68..=72 => Class::PadLie,
        73..=78 => Class::UdpLenLie,
        79..=83 => Class::IpLenLie,
        84..=87 => Class::IpOptions,
        88..=93 => Class::Fragmented,
        94..=96 => Class::Checksum,
        _ => Class::Trailer,
    };
    let op = opcode_for(rng, t);
    let mut ib = transport(rng, t, op, MTU - ip_len - UDP_LEN - 8);
    match class {
        Class::Truncated => {
            let b = boundaries(op, ib.len());
            let cut = b[rng.below(b.len() as u64) as usize];
            ib.truncate(cut);
        }
        Class::Flipped => {
            for _ in 0..1 + rng.below(4) {
                let i = rng.below(ib.len() as u64) as usize;
                ib[i] ^= 1 << rng.below(8);
            }
        }
        Class::PadLie => {
            let pad = bth::Header::new_unchecked(&ib[..bth::HEADER_LEN]).pad_count();
            let lie = (pad + 1 + rng.below(3) as u8) & 3;
            bth::Header::new_unchecked(&mut ib[..bth::HEADER_LEN]).set_pad_count(lie);
        }
        _ => {}
    }
    // The IP datagram: header, UDP, the transport packet.
    let mut dg = vec![0u8; ip_len + UDP_LEN];
    dg.extend_from_slice(&ib);
    let udp_len = (UDP_LEN + ib.len()) as u16;
    let sport = if rng.pct(90) {
        0xc000 | rng.next() as u16
    } else {
        rng.pick(&[0, ROCE_V2_UDP_PORT, 0xffff])
    };
    dg[ip_len..ip_len + 2].copy_from_slice(&sport.to_be_bytes());
    dg[ip_len + 2..ip_len + 4].copy_from_slice(&ROCE_V2_UDP_PORT.to_be_bytes());
    dg[ip_len + 4..ip_len + 6].copy_from_slice(&udp_len.to_be_bytes());
    let (src4, src6) = if rng.pct(5) {
        // Someone else entirely.
        (
            Ipv4Addr::from(rng.next() as u32),
            Ipv6Addr::from(u128::from(rng.next())),
        )
    } else {
        (a.src4, a.v6.map_or(Ipv6Addr::UNSPECIFIED, |v| v.0))
    };
    let dst6 = a.v6.map_or(Ipv6Addr::UNSPECIFIED, |v| v.1);
    if v6 {
        dg[0] = 0x60;
        dg[4..6].copy_from_slice(&udp_len.to_be_bytes());
        dg[6] = 17;
        dg[7] = 64;
        dg[8..24].copy_from_slice(&src6.octets());
        dg[24..40].copy_from_slice(&dst6.octets());
    } else {
        dg[0] = 0x45;
        let total = dg.len() as u16;
        dg[2..4].copy_from_slice(&total.to_be_bytes());
        dg[4..6].copy_from_slice(&(1 + rng.below(0xfffe) as u16).to_be_bytes());
        dg[6] = 0x40;
        dg[8] = if rng.pct(3) { rng.below(2) as u8 } else { 64 };
        dg[9] = 17;
        dg[12..16].copy_from_slice(&src4.octets());
        dg[16..20].copy_from_slice(&a.dst4.octets());
    }
    fill_icrc(&mut dg, ip_len);
    // The IP-level lies, after the ICRC (which masks none of them but
    // the checksums).
    let mut trailer = 0;
    match class {
        Class::UdpLenLie => {
            let lie = match rng.below(4) {
                0 => udp_len.saturating_sub(1 + rng.below(8) as u16),
                1 => udp_len + 1 + rng.below(8) as u16,
                2 => rng.below(UDP_LEN as u64 + bth::HEADER_LEN as u64 + 5) as u16,
                _ => rng.next() as u16,
            };
            dg[ip_len + 4..ip_len + 6].copy_from_slice(&lie.to_be_bytes());
        }
        Class::IpLenLie => {
            let at = if v6 { 4 } else { 2 };
            let now = u16::from_be_bytes([dg[at], dg[at + 1]]);
            let lie = match rng.below(3) {
                0 => now.saturating_sub(1 + rng.below(16) as u16),
                1 => now + 1 + rng.below(16) as u16,
                _ => rng.next() as u16,
            };
            dg[at..at + 2].copy_from_slice(&lie.to_be_bytes());
        }
        Class::IpOptions => {
            if v6 {
                // A hop-by-hop header (PadN) between IPv6 and UDP.
                dg[6] = 0;
                let hbh = [17, 0, 1, 4, 0, 0, 0, 0];
                dg.splice(IPV6_LEN..IPV6_LEN, hbh);
                let pl = (dg.len() - IPV6_LEN) as u16;
                dg[4..6].copy_from_slice(&pl.to_be_bytes());
            } else {
                // 4 to 40 bytes of options: NOPs, an end, or garbage.
                let words = 1 + rng.below(10) as usize;
                let mut opts = vec![1u8; words * 4];
                if rng.pct(30) {
                    rng.fill(&mut opts);
                }
                dg.splice(IPV4_LEN..IPV4_LEN, opts);
                dg[0] = 0x40 | (5 + words) as u8;
                let total = dg.len() as u16;
                dg[2..4].copy_from_slice(&total.to_be_bytes());
            }
        }
        Class::Trailer => trailer = 1 + rng.below(32) as usize,
        _ => {}
    }
    if v6 {
        let udp_at = if class == Class::IpOptions {
            IPV6_LEN + 8
        } else {
            IPV6_LEN
        };
        let c = udp6_checksum(&src6, &dst6, &dg[udp_at..]);
        dg[udp_at + 6..udp_at + 8].copy_from_slice(&c.to_be_bytes());
    }
    if class == Class::Checksum && !v6 {
        dg[10..12].copy_from_slice(&(rng.next() as u16 | 1).to_be_bytes());
    } else if !v6 {
        let ihl = usize::from(dg[0] & 0x0f) * 4;
        let c = ipv4_checksum(&dg[..ihl.min(dg.len())]);
        dg[10..12].copy_from_slice(&c.to_be_bytes());
    }
    if class == Class::Checksum && v6 {
        dg[IPV6_LEN + 6] ^= 0x5a;
    }
    let twin = if dg.len() >= ip_len + UDP_LEN + bth::HEADER_LEN + ICRC_LEN && rng.pct(30) {
        let mut t = dg.clone();
        let n = t.len();
        let x = (rng.next() as u32 | 1).to_le_bytes();
        for i in 0..4 {
            t[n - 4 + i] ^= x[i];
        }
        Some(frame_checked(a, frame(a, v6, &t, 0)))
    } else {
        None
    };
    let frames = if class == Class::Fragmented && !v6 {
        fragments(rng, &dg)
    } else {
        vec![frame(a, v6, &dg, trailer)]
            .into_iter()
            .map(|mut f| {
                let n = f.len();
                rng.fill(&mut f[n - trailer..]);
                f
            })
            .collect()
    };
    Crafted {
        class,
        opcode: op.0,
        v6,
        frames: frames.into_iter().map(|f| frame_checked(a, f)).collect(),
        twin,
    }
}

/// IPv4 fragments of `dg`: both halves (in either order: reassembly must
/// give the datagram back, its skb then not linear), or only the first,
/// which the kernel's reassembly holds until it times out.
fn fragments(rng: &mut Rng, dg: &[u8]) -> Vec<Vec<u8>> {
    let body = &dg[IPV4_LEN..];
    if body.len() < 16 {
        return vec![dg.to_vec()];
    }
    let cut = 8 * (1 + rng.below((body.len() as u64 - 1) / 8)) as usize;
    let half = |data: &[u8], off: usize, more: bool| {
        let mut h = dg[..IPV4_LEN].to_vec();
        h.extend_from_slice(data);
        let total = h.len() as u16;
        h[2..4].copy_from_slice(&total.to_be_bytes());
        let fo = (off / 8) as u16 | if more { 0x2000 } else { 0 };
        h[6..8].copy_from_slice(&fo.to_be_bytes());
        h[10..12].copy_from_slice(&[0, 0]);
        let c = ipv4_checksum(&h[..IPV4_LEN]);
        h[10..12].copy_from_slice(&c.to_be_bytes());
        h
    };
    let first = half(&body[..cut], 0, true);
    let second = half(&body[cut..], cut, false);
    match rng.below(4) {
        0 => vec![first],
        1 => vec![second, first],
        _ => vec![first, second],
    }
}

/// `dg` in an Ethernet frame, with `trailer` bytes after it.
fn frame(a: &Addrs, v6: bool, dg: &[u8], trailer: usize) -> Vec<u8> {
    let mut f = Vec::with_capacity(ETH_LEN + dg.len() + trailer);
    f.extend_from_slice(&a.dst_mac);
    f.extend_from_slice(&a.src_mac);
    f.extend_from_slice(&(if v6 { 0x86dd_u16 } else { 0x0800 }).to_be_bytes());
    f.extend_from_slice(dg);
    f.resize(f.len() + trailer, 0);
    f
}

/// Frames are at most the MTU plus the Ethernet header: AF_PACKET
/// refuses more (IP options can push a frame over).
fn frame_checked(_a: &Addrs, mut f: Vec<u8>) -> Vec<u8> {
    f.truncate(ETH_LEN + MTU);
    f
}

#[cfg(test)]
mod tests {
    use super::*;
    use rxud_proto::wire::icrc::{icrc_check, IpUdp};
    use rxud_proto::wire::Packet;

    fn addrs() -> Addrs {
        Addrs {
            src_mac: [2, 0, 0, 0, 0, 2],
            dst_mac: [2, 0, 0, 0, 0, 1],
            src4: Ipv4Addr::new(169, 254, 218, 3),
            dst4: Ipv4Addr::new(169, 254, 218, 1),
            v6: Some(("fd00::3".parse().unwrap(), "fd00::1".parse().unwrap())),
        }
    }

    fn targets() -> Vec<Target> {
        let v = Victim {
            peer_qpn: 0x5eed,
            qkey: 0x5eed_50a4,
            rkey: 0x1234,
            va: 0x7f00_0000_0000,
            len: 65536,
        };
        [
            (17, Kind::Rc),
            (18, Kind::Ud),
            (19, Kind::Xud),
            (20, Kind::Uc),
        ]
        .into_iter()
        .map(|(qpn, kind)| Target {
            qpn,
            kind,
            rq_psn: Some(1000),
            sq_psn: Some(5),
            victim: Some(v),
        })
        .collect()
    }

    /// Whole packets are what rxud-proto accepts: they parse, with
    /// their ICRC right, so that they reach the transport; twins differ
    /// in the ICRC alone.
    #[test]
    fn whole_packets_parse_and_check() {
        let (a, ts) = (addrs(), targets());
        let mut rng = Rng::new(7);
        let (mut whole, mut known) = (0, 0);
        for i in 0..20000 {
            let c = craft(&mut rng, &a, &ts[i % ts.len()]);
            assert!(c.frames.iter().all(|f| f.len() <= ETH_LEN + MTU));
            if let Some(t) = &c.twin {
                let f = &c.frames[0];
                if !matches!(
                    c.class,
                    Class::Trailer | Class::Fragmented | Class::IpOptions
                ) {
                    assert_eq!(t.len(), f.len());
                    assert_eq!(t[..t.len() - 4], f[..f.len() - 4]);
                    assert_ne!(t[t.len() - 4..], f[f.len() - 4..]);
                }
            }
            if c.class != Class::Whole {
                continue;
            }
            whole += 1;
            let dg = &c.frames[0][ETH_LEN..];
            let ip = IpUdp::parse(dg).unwrap();
            assert_eq!(ip.datagram_len(), dg.len());
            if Opcode(c.opcode).info().is_err() || (dg[0] >> 4 == 4 && dg[8] < 2) {
                continue;
            }
            let tver = dg[ip.udp_payload().start + 1] & 0x0f;
            if tver != 0 {
                continue;
            }
            known += 1;
            assert_eq!(icrc_check(dg), Ok(()), "packet {i}");
            // Opcodes without payload get some now and then: a lie.
            match Packet::new_checked(&dg[ip.udp_payload()]) {
                Ok(_) => {}
                Err(rxud_proto::wire::Error::BadLength) => {
                    assert!(!Opcode(c.opcode).info().unwrap().payload, "packet {i}")
                }
                Err(e) => panic!("packet {i}: {e}"),
            }
        }
        assert!(whole > 8000 && known > 5000, "{whole} whole, {known} known");
    }

    /// Truncations cut at every header boundary of every known opcode.
    #[test]
    fn truncations_cover_each_header_boundary() {
        for info in Opcode::all() {
            let b = boundaries(info.opcode, 4096);
            let mut off = bth::HEADER_LEN;
            assert!(b.contains(&off));
            for h in info.headers {
                off += h.size();
                assert!(b.contains(&off), "{} after {h:?}", info.name);
            }
        }
    }

    /// Every class and every known opcode come up, over IPv4 and IPv6.
    #[test]
    fn covers_classes_and_opcodes() {
        let (a, ts) = (addrs(), targets());
        let mut rng = Rng::new(1);
        let mut seen = std::collections::BTreeSet::new();
        let mut ops = std::collections::BTreeSet::new();
        let mut v6 = 0;
        for i in 0..50000 {
            let c = craft(&mut rng, &a, &ts[i % ts.len()]);
            seen.insert(c.class);
            ops.insert(c.opcode);
            v6 += usize::from(c.v6);
        }
        assert_eq!(seen.len(), Class::ALL.len());
        for info in Opcode::all() {
            assert!(ops.contains(&info.opcode.0), "{}", info.name);
        }
        assert!(ops.len() > 200, "{} opcodes", ops.len());
        assert!(v6 > 5000);
    }

    /// A seed replays the same packets.
    #[test]
    fn seeded() {
        let (a, ts) = (addrs(), targets());
        let run = |seed| {
            let mut rng = Rng::new(seed);
            (0..500)
                .map(|i| craft(&mut rng, &a, &ts[i % 4]).frames)
                .collect::<Vec<_>>()
        };
        assert_eq!(run(42), run(42));
        assert_ne!(run(42), run(43));
    }
}
