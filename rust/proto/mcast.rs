// SPDX-License-Identifier: GPL-2.0

//! RoCEv2 multicast groups: which GIDs name one, and the Ethernet address
//! a group's datagrams travel to. A RoCEv2 GID is an IP address (an IPv4
//! one as `::ffff:a.b.c.d`), so a multicast GID is a multicast IP address
//! and maps to Ethernet as IP does (RFC 1112 section 6.4, RFC 2464
//! section 7).

/// QP number of datagrams to a multicast group (IBTA 10.5.2.2): every QP
/// attached to the group receives them.
pub const MULTICAST_QPN: u32 = 0xff_ffff;

/// The IPv4 address of an IPv4-mapped GID (`::ffff:a.b.c.d`).
fn ipv4(gid: &[u8; 16]) -> Option<[u8; 4]> {
    let (head, v4) = gid.split_at(12);
    if head != [0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff] {
        return None;
    }
    v4.try_into().ok()
}

/// Whether `gid` names a multicast group: an IPv4 multicast address
/// (224.0.0.0/4), mapped, or an IPv6 one (ff00::/8).
pub fn is_multicast(gid: &[u8; 16]) -> bool {
    match ipv4(gid) {
        Some(a) => a[0] & 0xf0 == 0xe0,
        None => gid[0] == 0xff,
    }
}

/// The Ethernet address of the multicast group `gid`: 01:00:5e and the low
/// 23 bits of an IPv4 group, 33:33 and the low 32 bits of an IPv6 one.
/// `None` if `gid` is no multicast group.
pub fn ethernet_address(gid: &[u8; 16]) -> Option<[u8; 6]> {
    if !is_multicast(gid) {
        return None;
    }
    Some(match ipv4(gid) {
        Some(a) => [0x01, 0x00, 0x5e, a[1] & 0x7f, a[2], a[3]],
        None => [0x33, 0x33, gid[12], gid[13], gid[14], gid[15]],
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn v4(a: [u8; 4]) -> [u8; 16] {
        let mut g = [0u8; 16];
        g[10] = 0xff;
        g[11] = 0xff;
        g[12..].copy_from_slice(&a);
        g
    }

    #[test]
    fn ipv4_groups_map_their_low_23_bits() {
        let g = v4([239, 129, 2, 3]);
        assert!(is_multicast(&g));
        assert_eq!(
            ethernet_address(&g),
            Some([0x01, 0x00, 0x5e, 0x01, 0x02, 0x03])
        );
        assert_eq!(
            ethernet_address(&v4([224, 0, 0, 251])),
            Some([0x01, 0x00, 0x5e, 0x00, 0x00, 0xfb])
        );
    }

    #[test]
    fn ipv6_groups_map_their_low_32_bits() {
        let mut g = [0u8; 16];
        g[0] = 0xff;
        g[1] = 0x0e;
        g[12..].copy_from_slice(&[0xde, 0xad, 0xbe, 0xef]);
        assert!(is_multicast(&g));
        assert_eq!(
            ethernet_address(&g),
            Some([0x33, 0x33, 0xde, 0xad, 0xbe, 0xef])
        );
    }

    #[test]
    fn unicast_gids_are_no_group() {
        for g in [
            v4([169, 254, 77, 1]),
            v4([240, 0, 0, 1]),
            v4([223, 255, 255, 255]),
            [0xfe, 0x80, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1],
            [0u8; 16],
        ] {
            assert!(!is_multicast(&g), "{g:?}");
            assert_eq!(ethernet_address(&g), None);
        }
    }
}
