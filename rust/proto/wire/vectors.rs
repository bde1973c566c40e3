// SPDX-License-Identifier: GPL-2.0

//! Packets rxe put on the wire (Linux 6.12, two VMs, perftest traffic;
//! `testdata/README` says how they were captured), parsed with these
//! views and checked against what the capture shows. They are the ground
//! truth for the ICRC: an implementation that agrees with itself but not
//! with rxe would pass every other test here.

use super::aeth::{AckSyndrome, CREDITS_INVALID};
use super::icrc::{icrc_check, icrc_compute, icrc_fill, IpUdp, IpVersion, ICRC_LEN};
use super::opcode::{Opcode, Transport};
use super::packet::{Packet, Repr};
use super::testutil::hex;
use super::{Error, ROCE_V2_UDP_PORT};
use crate::psn::Psn;
use std::vec::Vec;

/// A captured packet and what it must decode to.
struct Vector {
    name: &'static str,
    text: &'static str,
    version: IpVersion,
    opcode: Opcode,
    dest_qp: u32,
    psn: u32,
    ack_req: bool,
    pad: usize,
    payload_len: usize,
    /// The ICRC value (the trailer read little-endian).
    icrc: u32,
}

macro_rules! vector {
    ($name:literal, $v:ident, $op:ident, qp $qp:literal, psn $psn:literal, ack $ack:literal, pad $pad:literal,
     payload $len:literal, icrc $icrc:literal) => {
        Vector {
            name: $name,
            text: include_str!(concat!("../testdata/", $name, ".hex")),
            version: IpVersion::$v,
            opcode: Opcode::$op,
            dest_qp: $qp,
            psn: $psn,
            ack_req: $ack,
            pad: $pad,
            payload_len: $len,
            icrc: $icrc,
        }
    };
}

/// Expected values read off the captures with an independent decoder
/// (a few lines of Python and `zlib.crc32`).
const VECTORS: &[Vector] = &[
    vector!("rc_send_only", V4, RC_SEND_ONLY, qp 0x11, psn 0xb58781, ack true, pad 0, payload 64, icrc 0xdb955ce7),
    vector!("rc_acknowledge", V4, RC_ACKNOWLEDGE, qp 0x11, psn 0xb58781, ack false, pad 0, payload 0, icrc 0x81f3cf8f),
    vector!("ud_send_only", V4, UD_SEND_ONLY, qp 0x12, psn 0x0cec8f, ack false, pad 0, payload 64, icrc 0x0c141ffb),
    vector!("uc_send_only", V4, UC_SEND_ONLY, qp 0x13, psn 0x3aba7d, ack false, pad 0, payload 64, icrc 0xf1a5d6de),
    vector!("rc_rdma_write_only", V4, RC_RDMA_WRITE_ONLY, qp 0x14, psn 0x09dfd6, ack true, pad 0, payload 64,
            icrc 0xc08add1e),
    vector!("rc_rdma_read_request", V4, RC_RDMA_READ_REQUEST, qp 0x15, psn 0x7376c4, ack true, pad 0, payload 0,
            icrc 0xbce91cb7),
    vector!("rc_rdma_read_response_only", V4, RC_RDMA_READ_RESPONSE_ONLY, qp 0x15, psn 0x7376c4, ack false, pad 0,
            payload 64, icrc 0xbb5fc8f5),
    vector!("rc_send_first", V4, RC_SEND_FIRST, qp 0x16, psn 0x40dd20, ack false, pad 0, payload 1024,
            icrc 0x76880d48),
    vector!("rc_send_middle", V4, RC_SEND_MIDDLE, qp 0x16, psn 0x40dd21, ack false, pad 0, payload 1024,
            icrc 0xe96b2923),
    vector!("rc_send_last", V4, RC_SEND_LAST, qp 0x16, psn 0x40dd22, ack true, pad 0, payload 452, icrc 0x0264f582),
    vector!("rc_rdma_read_response_first", V4, RC_RDMA_READ_RESPONSE_FIRST, qp 0x17, psn 0xea4670, ack false, pad 0,
            payload 1024, icrc 0xecc9a488),
    vector!("rc_rdma_read_response_middle", V4, RC_RDMA_READ_RESPONSE_MIDDLE, qp 0x17, psn 0xea4671, ack false,
            pad 0, payload 1024, icrc 0x43b436cb),
    vector!("rc_rdma_read_response_last", V4, RC_RDMA_READ_RESPONSE_LAST, qp 0x17, psn 0xea4672, ack false, pad 0,
            payload 452, icrc 0x2a1f4dd3),
    vector!("rc_fetch_add", V4, RC_FETCH_ADD, qp 0x18, psn 0x685850, ack true, pad 0, payload 0, icrc 0xe3d9ccf4),
    vector!("rc_compare_swap", V4, RC_COMPARE_SWAP, qp 0x19, psn 0xa7a009, ack true, pad 0, payload 0,
            icrc 0x0e41ef72),
    vector!("rc_atomic_acknowledge", V4, RC_ATOMIC_ACKNOWLEDGE, qp 0x18, psn 0x685850, ack false, pad 0, payload 0,
            icrc 0x9ce6ec45),
    vector!("rc_send_only_v6", V6, RC_SEND_ONLY, qp 0x1a, psn 0x95f6a3, ack true, pad 0, payload 64, icrc 0x7e8ba887),
    vector!("rc_acknowledge_v6", V6, RC_ACKNOWLEDGE, qp 0x1a, psn 0x95f6a3, ack false, pad 0, payload 0,
            icrc 0xc11cc56c),
    vector!("ud_send_only_v6", V6, UD_SEND_ONLY, qp 0x1b, psn 0xc371dd, ack false, pad 0, payload 64, icrc 0xb2c3526b),
    vector!("ud_send_only_pad3", V4, UD_SEND_ONLY, qp 0x11, psn 0xb37e56, ack false, pad 3, payload 61,
            icrc 0x204439b3),
    vector!("rc_rdma_write_only_pad1", V4, RC_RDMA_WRITE_ONLY, qp 0x12, psn 0x08463a, ack true, pad 1, payload 63,
            icrc 0x94b69ef9),
    vector!("rc_rdma_read_response_last_pad3", V4, RC_RDMA_READ_RESPONSE_LAST, qp 0x13, psn 0x762345, ack false,
            pad 3, payload 5, icrc 0x967e6a3d),
    vector!("uc_rdma_write_first", V4, UC_RDMA_WRITE_FIRST, qp 0x14, psn 0xdd2c6a, ack false, pad 0, payload 1024,
            icrc 0x1f9998bf),
    vector!("uc_rdma_write_middle", V4, UC_RDMA_WRITE_MIDDLE, qp 0x14, psn 0xdd2c6b, ack false, pad 0, payload 1024,
            icrc 0x417139f9),
    vector!("uc_rdma_write_last_pad2", V4, UC_RDMA_WRITE_LAST, qp 0x14, psn 0xdd2c6c, ack false, pad 2, payload 2,
            icrc 0x03d94fa2),
    vector!("rc_send_only_pad2_v6", V6, RC_SEND_ONLY, qp 0x15, psn 0x92f0df, ack true, pad 2, payload 62,
            icrc 0x534e6291),
];

fn bytes(name: &str) -> Vec<u8> {
    let v = VECTORS.iter().find(|v| v.name == name).unwrap();
    hex(v.text)
}

/// The UDP payload (BTH to ICRC) of a captured datagram.
fn udp_payload(d: &[u8]) -> &[u8] {
    &d[IpUdp::parse(d).unwrap().udp_payload()]
}

/// Offsets of the bytes the ICRC masks (to all-ones) in a datagram, and
/// for the low nibble of IPv6 byte 0, which only partly belongs to the
/// traffic class, the bit mask.
fn masked_bits(version: IpVersion) -> Vec<(usize, u8)> {
    let (ip, udp) = match version {
        IpVersion::V4 => (std::vec![(1, 0xff), (8, 0xff), (10, 0xff), (11, 0xff)], 20),
        IpVersion::V6 => (
            std::vec![(0, 0x0f), (1, 0xff), (2, 0xff), (3, 0xff), (7, 0xff)],
            40,
        ),
    };
    let mut m = ip;
    m.extend([(udp + 6, 0xff), (udp + 7, 0xff), (udp + 8 + 4, 0xff)]);
    m
}

#[test]
fn every_capture_parses_as_expected() {
    assert_eq!(VECTORS.len(), 26);
    for v in VECTORS {
        let d = hex(v.text);
        let ip = IpUdp::parse(&d).unwrap_or_else(|e| panic!("{}: {e}", v.name));
        assert_eq!(ip.version, v.version, "{}", v.name);
        assert_eq!(ip.datagram_len(), d.len(), "{}", v.name);
        let udp = ip.ip_header_len;
        assert_eq!(
            u16::from_be_bytes([d[udp + 2], d[udp + 3]]),
            ROCE_V2_UDP_PORT,
            "{}",
            v.name
        );
        // rxe sends no UDP checksum, over IPv6 too: the ICRC covers it.
        assert_eq!(&d[udp + 6..udp + 8], &[0, 0], "{}", v.name);

        let p = Packet::new_checked(udp_payload(&d)).unwrap_or_else(|e| panic!("{}: {e}", v.name));
        let bth = p.bth();
        assert_eq!(p.opcode(), v.opcode, "{}", v.name);
        assert_eq!(bth.dest_qp(), v.dest_qp, "{}", v.name);
        assert_eq!(bth.psn(), Psn::new(v.psn), "{}", v.name);
        assert_eq!(bth.ack_req(), v.ack_req, "{}", v.name);
        assert_eq!(bth.pad_count() as usize, v.pad, "{}", v.name);
        assert_eq!(p.pad_len(), v.pad, "{}", v.name);
        assert_eq!(p.payload_len(), v.payload_len, "{}", v.name);
        // What rxe puts in the fields it does not use.
        assert_eq!(bth.pkey(), 0xffff, "{}", v.name);
        assert!(
            !bth.solicited() && !bth.mig_req() && !bth.fecn() && !bth.becn(),
            "{}",
            v.name
        );
        assert_eq!(
            (bth.tver(), bth.resv6(), bth.resv7()),
            (0, 0, 0),
            "{}",
            v.name
        );

        // The ICRC: the trailer holds the CRC least significant byte
        // first.
        assert_eq!(p.icrc(), v.icrc, "{}", v.name);
        assert_eq!(
            &d[d.len() - ICRC_LEN..],
            &v.icrc.to_le_bytes(),
            "{}",
            v.name
        );
        assert_eq!(icrc_compute(&d), Ok(v.icrc), "{}", v.name);
        assert_eq!(icrc_check(&d), Ok(()), "{}", v.name);
    }
}

#[test]
fn extension_headers_decode() {
    let d = bytes("rc_rdma_write_only");
    let p = Packet::new_checked(udp_payload(&d)).unwrap();
    let reth = p.reth().unwrap();
    assert_eq!(
        (reth.va(), reth.rkey(), reth.dma_len()),
        (0x5558_e926_f000, 0x5c0, 64)
    );

    let d = bytes("rc_rdma_write_only_pad1");
    let p = Packet::new_checked(udp_payload(&d)).unwrap();
    assert_eq!(p.reth().unwrap().dma_len(), 63);

    let d = bytes("rc_rdma_read_request");
    let p = Packet::new_checked(udp_payload(&d)).unwrap();
    let reth = p.reth().unwrap();
    assert_eq!(
        (reth.va(), reth.rkey(), reth.dma_len()),
        (0x5587_0d80_b000, 0x614, 64)
    );
    assert!(p.payload().is_empty());

    let d = bytes("uc_rdma_write_first");
    let p = Packet::new_checked(udp_payload(&d)).unwrap();
    assert_eq!(p.info().transport, Transport::Uc);
    let reth = p.reth().unwrap();
    assert_eq!(
        (reth.va(), reth.rkey(), reth.dma_len()),
        (0x5587_a7d0_4000, 0x53a, 2050)
    );
    let d = bytes("uc_rdma_write_last_pad2");
    let p = Packet::new_checked(udp_payload(&d)).unwrap();
    assert!(p.reth().is_none());
    assert_eq!(p.payload(), &[0xb1, 0x5f]);
    assert_eq!(
        &udp_payload(&d)[14..16],
        &[0, 0],
        "rxe's pad bytes are zero"
    );

    for (name, src_qp) in [
        ("ud_send_only", 0x12),
        ("ud_send_only_v6", 0x1b),
        ("ud_send_only_pad3", 0x11),
    ] {
        let d = bytes(name);
        let p = Packet::new_checked(udp_payload(&d)).unwrap();
        let deth = p.deth().unwrap();
        // perftest's Q_Key.
        assert_eq!(
            (deth.qkey(), deth.resv8(), deth.src_qp()),
            (0x1111_1111, 0, src_qp),
            "{name}"
        );
    }

    // rxe acknowledges with "no credit information", MSN counting
    // messages from 1.
    for name in [
        "rc_acknowledge",
        "rc_acknowledge_v6",
        "rc_rdma_read_response_only",
        "rc_rdma_read_response_first",
        "rc_rdma_read_response_last",
        "rc_rdma_read_response_last_pad3",
        "rc_atomic_acknowledge",
    ] {
        let d = bytes(name);
        let p = Packet::new_checked(udp_payload(&d)).unwrap();
        let aeth = p.aeth().unwrap();
        assert_eq!(
            aeth.syndrome(),
            AckSyndrome::Ack {
                credit_code: CREDITS_INVALID
            },
            "{name}"
        );
        assert_eq!(aeth.msn(), 1, "{name}");
    }
    let d = bytes("rc_rdma_read_response_middle");
    assert!(Packet::new_checked(udp_payload(&d))
        .unwrap()
        .aeth()
        .is_none());
    let d = bytes("rc_rdma_read_response_last_pad3");
    let p = Packet::new_checked(udp_payload(&d)).unwrap();
    assert_eq!(p.payload(), &[0x31, 0xa4, 0x09, 0xd1, 0x43]);

    let d = bytes("rc_fetch_add");
    let p = Packet::new_checked(udp_payload(&d)).unwrap();
    let a = p.atomic_eth().unwrap();
    assert_eq!(
        (a.va(), a.rkey(), a.swap_add()),
        (0x55d0_39da_2000, 0x90b, 1)
    );
    // rxe leaves the compare field of FETCH_ADD unwritten: it carries
    // whatever the packet buffer held before (here, bytes of an earlier
    // packet's payload), so nothing may depend on it.
    assert_ne!(a.compare(), 0);

    let d = bytes("rc_compare_swap");
    let p = Packet::new_checked(udp_payload(&d)).unwrap();
    let a = p.atomic_eth().unwrap();
    assert_eq!(
        (a.va(), a.rkey(), a.swap_add(), a.compare()),
        (0x55e2_aa47_9000, 0xa93, 0, 0)
    );

    let d = bytes("rc_atomic_acknowledge");
    let p = Packet::new_checked(udp_payload(&d)).unwrap();
    assert_eq!(p.atomic_ack_eth().unwrap().orig(), 0x4847_f1e0_fb78_1d49);
}

/// Decoding every capture and emitting it again gives back the same bytes
/// (including the ICRC, recomputed over the rebuilt datagram).
#[test]
fn captures_round_trip_through_repr() {
    for v in VECTORS {
        let d = hex(v.text);
        let ip = IpUdp::parse(&d).unwrap();
        let p = Packet::new_checked(&d[ip.udp_payload()]).unwrap();
        let repr = Repr::parse(&p).unwrap();
        let mut out = d.clone();
        out[ip.udp_payload()].fill(0x5a);
        let mut q = repr
            .emit(&mut out[ip.udp_payload()], p.payload_len())
            .unwrap();
        q.payload_mut().copy_from_slice(p.payload());
        assert_eq!(icrc_fill(&mut out), Ok(v.icrc), "{}", v.name);
        // The FETCH_ADD's stale compare field is reproduced too: the Repr
        // carries it.
        assert_eq!(out, d, "{}", v.name);
    }
}

#[test]
fn masked_fields_do_not_change_the_icrc() {
    for v in VECTORS {
        let d = hex(v.text);
        for (at, mask) in masked_bits(v.version) {
            for bit in 0..8 {
                if mask & (1 << bit) == 0 {
                    continue;
                }
                let mut m = d.clone();
                m[at] ^= 1 << bit;
                assert_eq!(
                    icrc_compute(&m),
                    Ok(v.icrc),
                    "{} byte {at} bit {bit}",
                    v.name
                );
                assert_eq!(icrc_check(&m), Ok(()), "{} byte {at} bit {bit}", v.name);
            }
        }
    }
}

/// Every other bit, up to the ICRC, is covered: flipping it either makes
/// the datagram malformed (a length, version or protocol field) or changes
/// the ICRC. CRC-32 catches every single-bit error, so this checks that
/// nothing is masked that should not be.
#[test]
fn every_other_bit_changes_the_icrc() {
    for v in VECTORS {
        let d = hex(v.text);
        let masked = masked_bits(v.version);
        let mut m = d.clone();
        for at in 0..d.len() - ICRC_LEN {
            for bit in 0..8 {
                if masked
                    .iter()
                    .any(|&(o, mask)| o == at && mask & (1 << bit) != 0)
                {
                    continue;
                }
                m[at] ^= 1 << bit;
                match icrc_compute(&m) {
                    Ok(c) => {
                        assert_ne!(c, v.icrc, "{} byte {at} bit {bit}", v.name);
                        assert!(
                            matches!(icrc_check(&m), Err(Error::IcrcMismatch { .. })),
                            "{} byte {at} bit {bit}",
                            v.name
                        );
                    }
                    Err(e) => assert!(!matches!(e, Error::IcrcMismatch { .. }), "{}", v.name),
                }
                m[at] ^= 1 << bit;
            }
        }
    }
}

/// No prefix of a real packet makes the parsers panic.
#[test]
fn truncated_captures_are_errors() {
    for v in VECTORS {
        let d = hex(v.text);
        for n in 0..d.len() {
            assert!(icrc_check(&d[..n]).is_err(), "{} cut at {n}", v.name);
            assert!(IpUdp::parse(&d[..n]).is_err(), "{} cut at {n}", v.name);
        }
        let ip = IpUdp::parse(&d).unwrap();
        let udp = &d[ip.udp_payload()];
        for n in 0..udp.len() {
            if let Ok(p) = Packet::new_checked(&udp[..n]) {
                // Only shorter payload can still parse.
                assert!(
                    p.info().payload && p.payload_len() < v.payload_len,
                    "{} cut at {n}",
                    v.name
                );
            }
        }
    }
}
