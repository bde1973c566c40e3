// SPDX-License-Identifier: GPL-2.0

//! Trains: consecutive RoCEv2 datagrams of one flow handed to IP as one
//! skb.
//!
//! Routing, netfilter, neighbour, qdisc and driver-queue work is paid per
//! skb, not per byte. A QP's packets to one destination carry the same IP
//! and UDP headers but for the IPv4 identification and the lengths, so a
//! run of them can go down the stack as one fraglist GSO skb
//! (`SKB_GSO_UDP_L4 | SKB_GSO_FRAGLIST`): the first datagram (the head)
//! with the others on its `frag_list`, each a whole RoCEv2 packet with its
//! own ICRC. A device that cannot send such an skb whole (virtio-net
//! without offloads, and every NIC: none offers fraglist segmentation on
//! transmit) gets it cut back into its datagrams just before its driver
//! (`validate_xmit_skb`, `skb_segment_list`): unlinked, not copied, and
//! with no checksum to compute (RoCEv2 over IPv4 sends a zero UDP
//! checksum). On the way `__udp_gso_segment_list` sets the head's UDP
//! length to the segment size, and `inet_gso_segment` rewrites every
//! datagram's IPv4 header: identification the head's plus the datagram's
//! place in the train, total length from the datagram's own, header
//! checksum (`ipv6_gso_segment` sets each payload length). The ICRC covers
//! the identification and both lengths, so a datagram may follow another
//! in a train only where those rewrites give back what it was built with
//! ([`may_follow`]): the same flow (addresses, ports, TOS, TTL, DF, or
//! IPv6's class, label and hop limit), an identification one more than
//! the datagram before it (rxud numbers each QP's datagrams in sequence, as
//! RFC 6864 allows for atomic datagrams: DF set, never fragmented), and
//! no datagram longer than the head, nor shorter unless it is the last
//! (the head's UDP payload is the train's segment size).

use super::icrc::IpUdp;

/// The most datagrams in one train.
pub const MAX_PACKETS: usize = 64;

/// The most bytes of UDP payload in one train, all datagrams together:
/// the head's IP total length (or IPv6 payload length), which covers the
/// whole train until the stack cuts it, stays a 16-bit field.
pub const MAX_PAYLOAD: usize = 65535 - 40 - 8;

/// Whether the datagram `next` may follow `prev` in a train whose first
/// datagram is `head` (`prev` may be `head`). All three are whole IP
/// datagrams as built: IP header, UDP header, BTH to ICRC.
pub fn may_follow(head: &[u8], prev: &[u8], next: &[u8]) -> bool {
    let (Ok(h), Ok(p), Ok(n)) = (IpUdp::parse(head), IpUdp::parse(prev), IpUdp::parse(next)) else {
        return false;
    };
    if h.ip_header_len != n.ip_header_len || p.ip_header_len != n.ip_header_len {
        return false;
    }
    let seg = h.udp_len;
    if p.udp_len != seg || n.udp_len > seg {
        return false;
    }
    let ip = h.ip_header_len;
    let same = |r: core::ops::Range<usize>| head.get(r.clone()) == next.get(r);
    let flow = if ip == 20 {
        // Version, IHL and TOS; flags and fragment offset; TTL and
        // protocol; addresses. Not: total length, identification,
        // header checksum.
        same(0..2) && same(6..10) && same(12..20)
    } else {
        // Version, class and label; next header and hop limit;
        // addresses. Not: payload length.
        same(0..4) && same(6..40)
    };
    // UDP ports (the length differs; the checksum is zero).
    if !flow || !same(ip..ip + 4) {
        return false;
    }
    if ip == 20 {
        let id = |d: &[u8]| u16::from_be_bytes([d[4], d[5]]);
        id(next) == id(prev).wrapping_add(1)
    } else {
        true
    }
}

/// Whether a train of `packets` datagrams carrying `payload` bytes of UDP
/// payload in all may take one more datagram of `next` bytes of UDP
/// payload.
pub fn has_room(packets: usize, payload: usize, next: usize) -> bool {
    packets < MAX_PACKETS && payload.saturating_add(next) <= MAX_PAYLOAD
}

#[cfg(test)]
mod tests {
    use super::super::icrc::tests::{ipv4_roce, set_ipv4_checksum};
    use super::super::icrc::{icrc_check, icrc_fill};
    use super::*;
    use std::vec::Vec;

    /// An IPv4 datagram to 10.0.0.`dst`, identification `id`, PSN `psn`.
    fn v4(id: u16, psn: u32, payload: usize, dst: u8) -> Vec<u8> {
        ipv4_roce(id, psn, payload, dst)
    }

    /// The IPv6 form of [`v4`]: fd00::1 to fd00::`dst`, label 0x12345.
    fn v6(psn: u32, payload: usize, dst: u8) -> Vec<u8> {
        let udp_len = 8 + 12 + payload + 4;
        let mut p = std::vec![0u8; 40 + udp_len];
        p[0..4].copy_from_slice(&0x6001_2345u32.to_be_bytes());
        p[4..6].copy_from_slice(&(udp_len as u16).to_be_bytes());
        p[6] = 17;
        p[7] = 64;
        p[8] = 0xfd;
        p[23] = 1;
        p[24] = 0xfd;
        p[39] = dst;
        p[40..42].copy_from_slice(&0xc123u16.to_be_bytes());
        p[42..44].copy_from_slice(&4791u16.to_be_bytes());
        p[44..46].copy_from_slice(&(udp_len as u16).to_be_bytes());
        p[48] = 0x07;
        p[49] = 0x40 | (((4 - payload % 4) % 4) as u8) << 4;
        p[50..52].copy_from_slice(&[0xff, 0xff]);
        p[55] = 0x11;
        p[57..60].copy_from_slice(&psn.to_be_bytes()[1..]);
        for (i, b) in p[60..60 + payload].iter_mut().enumerate() {
            *b = (i as u8) ^ (psn as u8);
        }
        icrc_fill(&mut p).unwrap();
        p
    }

    /// How many datagrams from the front of `q` form a train, as the
    /// driver forms them.
    fn train_len(q: &[Vec<u8>]) -> usize {
        let Some(head) = q.first() else {
            return 0;
        };
        let mut n = 1;
        let mut payload = IpUdp::parse(head).unwrap().udp_len - 8;
        while let Some(next) = q.get(n) {
            let next_payload = IpUdp::parse(next).unwrap().udp_len - 8;
            if !may_follow(head, &q[n - 1], next) || !has_room(n, payload, next_payload) {
                break;
            }
            payload += next_payload;
            n += 1;
        }
        n
    }

    /// What the stack does to a train on its way to a device that cannot
    /// send it whole: the head's lengths first say the whole train
    /// (`__ip_local_out`, and rxud's UDP length as it links the train),
    /// then `skb_segment_list` gives each datagram back with
    /// `__udp_gso_segment_list`'s and `inet_gso_segment`'s (or
    /// `ipv6_gso_segment`'s) rewrites.
    fn segment(train: &[Vec<u8>]) -> Vec<Vec<u8>> {
        let head = &train[0];
        let ip = IpUdp::parse(head).unwrap().ip_header_len;
        let mss = IpUdp::parse(head).unwrap().udp_len - 8;
        let id0 = u16::from_be_bytes([head[4], head[5]]);
        train
            .iter()
            .enumerate()
            .map(|(i, d)| {
                let mut d = d.clone();
                if i == 0 {
                    d[ip + 4..ip + 6].copy_from_slice(&((8 + mss) as u16).to_be_bytes());
                }
                if ip == 20 {
                    let len = d.len() as u16;
                    d[2..4].copy_from_slice(&len.to_be_bytes());
                    d[4..6].copy_from_slice(&id0.wrapping_add(i as u16).to_be_bytes());
                    set_ipv4_checksum(&mut d);
                } else {
                    let len = (d.len() - 40) as u16;
                    d[4..6].copy_from_slice(&len.to_be_bytes());
                }
                d
            })
            .collect()
    }

    #[test]
    fn a_qps_consecutive_datagrams_form_a_train_that_segments_into_valid_packets() {
        // 20 full packets of 1 KiB, then a shorter last one, ids wrapping.
        let mut q: Vec<_> = (0..20)
            .map(|i| v4(65530u16.wrapping_add(i), 100 + u32::from(i), 1024, 2))
            .collect();
        q.push(v4(65530u16.wrapping_add(20), 120, 300, 2));
        assert_eq!(train_len(&q), 21);
        for (i, d) in segment(&q).iter().enumerate() {
            assert_eq!(icrc_check(d), Ok(()), "segment {i}");
            assert_eq!(d, &q[i], "segment {i} is the datagram as built");
        }
        let q6: Vec<_> = (0..10).map(|i| v6(i, 1024, 2)).collect();
        assert_eq!(train_len(&q6), 10);
        for (i, d) in segment(&q6).iter().enumerate() {
            assert_eq!(icrc_check(d), Ok(()), "IPv6 segment {i}");
        }
    }

    #[test]
    fn a_gap_in_the_identifications_ends_the_train() {
        let q = [v4(7, 0, 1024, 2), v4(8, 1, 1024, 2), v4(10, 2, 1024, 2)];
        assert_eq!(train_len(&q), 2);
        // Why: the stack would renumber the third datagram 9, and its
        // ICRC (which covers the identification) would no longer match.
        assert!(icrc_check(&segment(&q)[2]).is_err());
    }

    #[test]
    fn another_flow_a_longer_datagram_or_a_short_one_inside_ends_the_train() {
        // Another destination.
        assert_eq!(train_len(&[v4(1, 0, 1024, 2), v4(2, 1, 1024, 3)]), 1);
        // Longer than the head: the segment size is the head's.
        assert_eq!(train_len(&[v4(1, 0, 512, 2), v4(2, 1, 1024, 2)]), 1);
        // A short datagram can only be the last.
        let q = [v4(1, 0, 1024, 2), v4(2, 1, 512, 2), v4(3, 2, 512, 2)];
        assert_eq!(train_len(&q), 2);
        // Another TTL, or another source port.
        let mut t = v4(2, 1, 1024, 2);
        t[8] = 63;
        set_ipv4_checksum(&mut t);
        icrc_fill(&mut t).unwrap();
        assert_eq!(train_len(&[v4(1, 0, 1024, 2), t]), 1);
        let mut s = v4(2, 1, 1024, 2);
        s[21] ^= 1;
        icrc_fill(&mut s).unwrap();
        assert_eq!(train_len(&[v4(1, 0, 1024, 2), s]), 1);
        // IPv4 after IPv6.
        assert_eq!(train_len(&[v6(0, 1024, 2), v4(1, 1, 1024, 2)]), 1);
    }

    #[test]
    fn a_train_stays_within_its_limits() {
        let q: Vec<_> = (0..100).map(|i| v4(i, u32::from(i), 256, 2)).collect();
        assert_eq!(train_len(&q), MAX_PACKETS);
        // 4 KiB packets: the 64 KiB length field ends it first.
        let q: Vec<_> = (0..30).map(|i| v4(i, u32::from(i), 4096, 2)).collect();
        let n = train_len(&q);
        assert_eq!(n, MAX_PAYLOAD / (4096 + 12 + 4));
        assert!(n * (4096 + 12 + 4) <= MAX_PAYLOAD);
    }
}
