// SPDX-License-Identifier: GPL-2.0

//! Node and port GUIDs of RoCE devices.

/// The modified EUI-64 of a 48-bit MAC address (RFC 4291 appendix A): the
/// universal/local bit flipped and `ff:fe` inserted in the middle. RoCE
/// devices derive their node GUID this way, so rxud and rxe on the same
/// netdev report the same GUID.
pub const fn eui64_from_mac(mac: [u8; 6]) -> [u8; 8] {
    [
        mac[0] ^ 0x02,
        mac[1],
        mac[2],
        0xff,
        0xfe,
        mac[3],
        mac[4],
        mac[5],
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn eui64_flips_universal_local_bit_and_inserts_fffe() {
        assert_eq!(
            eui64_from_mac([0x52, 0x54, 0x00, 0x12, 0x34, 0x56]),
            [0x50, 0x54, 0x00, 0xff, 0xfe, 0x12, 0x34, 0x56]
        );
        assert_eq!(eui64_from_mac([0; 6]), [0x02, 0, 0, 0xff, 0xfe, 0, 0, 0]);
    }
}
