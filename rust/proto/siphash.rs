// SPDX-License-Identifier: GPL-2.0

//! SipHash-2-4 (Aumasson and Bernstein, "SipHash: a fast short-input
//! PRF", 2012): a keyed MAC for short inputs, the one the kernel uses for
//! SYN cookies and sequence numbers. XUD's stream cookies
//! ([`super::xud::cookie`]) are SipHash-2-4 of what they bind, under a
//! per-QP random key. Written here (not the kernel's `siphash()`) so the
//! host tests run the same code; checked against the reference vectors.

/// A 128-bit SipHash key, as two little-endian 64-bit words.
#[derive(Clone, Copy, PartialEq, Eq)]
pub struct Key {
    pub k0: u64,
    pub k1: u64,
}

impl core::fmt::Debug for Key {
    // A secret: never printed.
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str("Key(..)")
    }
}

struct State([u64; 4]);

impl State {
    fn round(&mut self) {
        let v = &mut self.0;
        v[0] = v[0].wrapping_add(v[1]);
        v[1] = v[1].rotate_left(13) ^ v[0];
        v[0] = v[0].rotate_left(32);
        v[2] = v[2].wrapping_add(v[3]);
        v[3] = v[3].rotate_left(16) ^ v[2];
        v[0] = v[0].wrapping_add(v[3]);
        v[3] = v[3].rotate_left(21) ^ v[0];
        v[2] = v[2].wrapping_add(v[1]);
        v[1] = v[1].rotate_left(17) ^ v[2];
        v[2] = v[2].rotate_left(32);
    }

    /// Two compression rounds over one 64-bit message word.
    fn absorb(&mut self, m: u64) {
        self.0[3] ^= m;
        self.round();
        self.round();
        self.0[0] ^= m;
    }
}

/// SipHash-2-4 of `data` under `key`.
pub fn siphash24(key: Key, data: &[u8]) -> u64 {
    let mut s = State([
        key.k0 ^ 0x736f_6d65_7073_6575,
        key.k1 ^ 0x646f_7261_6e64_6f6d,
        key.k0 ^ 0x6c79_6765_6e65_7261,
        key.k1 ^ 0x7465_6462_7974_6573,
    ]);
    let mut words = data.chunks_exact(8);
    for w in &mut words {
        let mut b = [0u8; 8];
        b.copy_from_slice(w);
        s.absorb(u64::from_le_bytes(b));
    }
    // The last word: the remaining bytes, the length's low byte on top.
    let rest = words.remainder();
    let mut b = [0u8; 8];
    b[..rest.len()].copy_from_slice(rest);
    b[7] = data.len() as u8;
    s.absorb(u64::from_le_bytes(b));
    s.0[2] ^= 0xff;
    for _ in 0..4 {
        s.round();
    }
    s.0[0] ^ s.0[1] ^ s.0[2] ^ s.0[3]
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The reference implementation's vectors (github.com/veorq/SipHash,
    /// `vectors.h`, as the kernel's `lib/siphash_kunit.c` has them): key
    /// 00 01 .. 0f, message `i` the bytes 00 01 .. i-1.
    const REFERENCE: [u64; 64] = [
        0x726f_db47_dd0e_0e31,
        0x74f8_39c5_93dc_67fd,
        0x0d6c_8009_d9a9_4f5a,
        0x8567_6696_d7fb_7e2d,
        0xcf27_94e0_2771_87b7,
        0x1876_5564_cd99_a68d,
        0xcbc9_466e_58fe_e3ce,
        0xab02_00f5_8b01_d137,
        0x93f5_f579_9a93_2462,
        0x9e00_82df_0ba9_e4b0,
        0x7a5d_bbc5_94dd_b9f3,
        0xf4b3_2f46_226b_ada7,
        0x751e_8fbc_860e_e5fb,
        0x14ea_5627_c084_3d90,
        0xf723_ca90_8e7a_f2ee,
        0xa129_ca61_49be_45e5,
        0x3f2a_cc7f_57c2_9bdb,
        0x699a_e9f5_2cbe_4794,
        0x4bc1_b3f0_968d_d39c,
        0xbb6d_c91d_a779_61bd,
        0xbed6_5cf2_1aa2_ee98,
        0xd0f2_cbb0_2e3b_67c7,
        0x9353_6795_e3a3_3e88,
        0xa80c_038c_cd5c_cec8,
        0xb8ad_50c6_f649_af94,
        0xbce1_92de_8a85_b8ea,
        0x17d8_35b8_5bbb_15f3,
        0x2f2e_6163_076b_cfad,
        0xde4d_aaac_a71d_c9a5,
        0xa6a2_5066_8795_6571,
        0xad87_a353_5c49_ef28,
        0x32d8_92fa_d841_c342,
        0x7127_512f_72f2_7cce,
        0xa7f3_2346_f959_78e3,
        0x12e0_b01a_bb05_1238,
        0x15e0_34d4_0fa1_97ae,
        0x314d_ffbe_0815_a3b4,
        0x0279_90f0_2962_3981,
        0xcadc_d4e5_9ef4_0c4d,
        0x9abf_d876_6a33_735c,
        0x0e3e_a96b_5304_a7d0,
        0xad0c_42d6_fc58_5992,
        0x1873_06c8_9bc2_15a9,
        0xd4a6_0abc_f379_2b95,
        0xf935_451d_e4f2_1df2,
        0xa953_8f04_1975_5787,
        0xdb9a_cddf_f56c_a510,
        0xd06c_98cd_5c09_75eb,
        0xe612_a3cb_9ecb_a951,
        0xc766_e62c_fcad_af96,
        0xee64_435a_9752_fe72,
        0xa192_d576_b245_165a,
        0x0a87_87bf_8ecb_74b2,
        0x81b3_e73d_20b4_9b6f,
        0x7fa8_220b_a3b2_ecea,
        0x2457_31c1_3ca4_2499,
        0xb78d_bfaf_3a8d_83bd,
        0xea1a_d565_322a_1a0b,
        0x60e6_1c23_a379_5013,
        0x6606_d7e4_4628_2b93,
        0x6ca4_ecb1_5c5f_91e1,
        0x9f62_6da1_5c96_25f3,
        0xe51b_3860_8ef2_5f57,
        0x958a_324c_eb06_4572,
    ];

    const KEY: Key = Key {
        k0: 0x0706_0504_0302_0100,
        k1: 0x0f0e_0d0c_0b0a_0908,
    };

    #[test]
    fn matches_the_reference_vectors() {
        let msg: [u8; 64] = core::array::from_fn(|i| i as u8);
        for (i, &want) in REFERENCE.iter().enumerate() {
            assert_eq!(siphash24(KEY, &msg[..i]), want, "message of {i} bytes");
        }
    }

    #[test]
    fn the_key_is_never_printed() {
        assert_eq!(std::format!("{KEY:?}"), "Key(..)");
    }
}
