// SPDX-License-Identifier: GPL-2.0 OR Linux-OpenIB

//! Work completions: the values a [`Cqe`] carries (libibverbs' `enum
//! ibv_wc_status`, `ibv_wc_opcode`, `ibv_wc_flags`, equal to the kernel's
//! `ib_wc_*`), and the CQE's byte image in a ring slot.

use super::Cqe;

/// `Cqe::status`.
pub mod status {
    pub const SUCCESS: u32 = 0;
    pub const LOC_LEN_ERR: u32 = 1;
    pub const LOC_QP_OP_ERR: u32 = 2;
    pub const LOC_PROT_ERR: u32 = 4;
    pub const WR_FLUSH_ERR: u32 = 5;
    pub const MW_BIND_ERR: u32 = 6;
    pub const BAD_RESP_ERR: u32 = 7;
    pub const LOC_ACCESS_ERR: u32 = 8;
    pub const REM_INV_REQ_ERR: u32 = 9;
    pub const REM_ACCESS_ERR: u32 = 10;
    pub const REM_OP_ERR: u32 = 11;
    pub const RETRY_EXC_ERR: u32 = 12;
    pub const RNR_RETRY_EXC_ERR: u32 = 13;
    /// The sender gave the message up part-way (XUD, xud.rst).
    pub const REM_ABORT_ERR: u32 = 16;
    pub const GENERAL_ERR: u32 = 21;
}

/// `Cqe::opcode`.
pub mod wc_opcode {
    pub const SEND: u32 = 0;
    pub const RDMA_WRITE: u32 = 1;
    pub const RDMA_READ: u32 = 2;
    pub const COMP_SWAP: u32 = 3;
    pub const FETCH_ADD: u32 = 4;
    pub const BIND_MW: u32 = 5;
    pub const LOCAL_INV: u32 = 6;
    pub const FLUSH: u32 = 8;
    pub const ATOMIC_WRITE: u32 = 9;
    /// A fast registration completed (kernel consumers only).
    pub const REG_MR: u32 = 10;
    pub const RECV: u32 = 128;
    pub const RECV_RDMA_WITH_IMM: u32 = 129;
}

/// `Cqe::wc_flags`.
pub mod wc_flags {
    /// The receive buffer starts with a 40-byte GRH.
    pub const GRH: u32 = 1 << 0;
    pub const WITH_IMM: u32 = 1 << 1;
    pub const WITH_INV: u32 = 1 << 3;
}

/// `Cqe::network_hdr_type` (`enum rdma_network_type`).
pub mod network {
    pub const IPV4: u8 = 2;
    pub const IPV6: u8 = 3;
}

impl Cqe {
    /// The CQE as it lies in a ring slot (little-endian `repr(C)`).
    pub fn to_bytes(self) -> [u8; 64] {
        let mut b = [0u8; 64];
        b[0..8].copy_from_slice(&self.wr_id.to_le_bytes());
        b[8..12].copy_from_slice(&self.status.to_le_bytes());
        b[12..16].copy_from_slice(&self.opcode.to_le_bytes());
        b[16..20].copy_from_slice(&self.vendor_err.to_le_bytes());
        b[20..24].copy_from_slice(&self.byte_len.to_le_bytes());
        b[24..28].copy_from_slice(&self.imm_data.to_le_bytes());
        b[28..32].copy_from_slice(&self.qp_num.to_le_bytes());
        b[32..36].copy_from_slice(&self.src_qp.to_le_bytes());
        b[36..40].copy_from_slice(&self.wc_flags.to_le_bytes());
        b[40..42].copy_from_slice(&self.pkey_index.to_le_bytes());
        b[42..44].copy_from_slice(&self.slid.to_le_bytes());
        b[44] = self.sl;
        b[45] = self.dlid_path_bits;
        b[46] = self.network_hdr_type;
        b[47] = self.reserved0;
        b[48..54].copy_from_slice(&self.smac);
        b[54..56].copy_from_slice(&self.vlan_id.to_le_bytes());
        b[56..64].copy_from_slice(&self.reserved1.to_le_bytes());
        b
    }

    /// The CQE a ring slot holds (the inverse of [`Cqe::to_bytes`]).
    pub fn from_bytes(b: &[u8; 64]) -> Self {
        let u16_at = |i: usize| u16::from_le_bytes([b[i], b[i + 1]]);
        let u32_at = |i: usize| u32::from_le_bytes([b[i], b[i + 1], b[i + 2], b[i + 3]]);
        let u64_at = |i: usize| u64::from(u32_at(i)) | (u64::from(u32_at(i + 4)) << 32);
        let mut smac = [0u8; 6];
        smac.copy_from_slice(&b[48..54]);
        Self {
            wr_id: u64_at(0),
            status: u32_at(8),
            opcode: u32_at(12),
            vendor_err: u32_at(16),
            byte_len: u32_at(20),
            imm_data: u32_at(24),
            qp_num: u32_at(28),
            src_qp: u32_at(32),
            wc_flags: u32_at(36),
            pkey_index: u16_at(40),
            slid: u16_at(42),
            sl: b[44],
            dlid_path_bits: b[45],
            network_hdr_type: b[46],
            reserved0: b[47],
            smac,
            vlan_id: u16_at(54),
            reserved1: u64_at(56),
        }
    }
}

#[allow(clippy::manual_is_multiple_of)]
mod layout {
    use super::super::Cqe;
    use core::mem::offset_of;

    // `to_bytes` writes each field at its `repr(C)` offset.
    const _: () = assert!(
        offset_of!(Cqe, status) == 8
            && offset_of!(Cqe, byte_len) == 20
            && offset_of!(Cqe, wc_flags) == 36
            && offset_of!(Cqe, pkey_index) == 40
            && offset_of!(Cqe, sl) == 44
            && offset_of!(Cqe, network_hdr_type) == 46
            && offset_of!(Cqe, smac) == 48
            && offset_of!(Cqe, vlan_id) == 54
            && offset_of!(Cqe, reserved1) == 56
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn from_bytes_inverts_to_bytes() {
        let c = Cqe {
            wr_id: 0x0102_0304_0506_0708,
            status: 5,
            opcode: 129,
            vendor_err: 3,
            byte_len: 4096,
            imm_data: 0xdead_beef,
            qp_num: 0x12_3456,
            src_qp: 1,
            wc_flags: 0x49,
            pkey_index: 7,
            slid: 0xabcd,
            sl: 2,
            dlid_path_bits: 1,
            network_hdr_type: 3,
            reserved0: 0,
            smac: [1, 2, 3, 4, 5, 6],
            vlan_id: 100,
            reserved1: u64::MAX - 1,
        };
        assert_eq!(Cqe::from_bytes(&c.to_bytes()), c);
    }

    #[test]
    fn bytes_are_the_repr_c_image() {
        let c = Cqe {
            wr_id: 0x0102_0304_0506_0708,
            status: 9,
            opcode: 128,
            byte_len: 40,
            qp_num: 0x12_3456,
            src_qp: 7,
            wc_flags: 3,
            sl: 2,
            network_hdr_type: 2,
            smac: [1, 2, 3, 4, 5, 6],
            vlan_id: 100,
            ..Default::default()
        };
        let b = c.to_bytes();
        assert_eq!(b[0..8], [8, 7, 6, 5, 4, 3, 2, 1]);
        assert_eq!(b[8..12], [9, 0, 0, 0]);
        assert_eq!(b[12..16], [128, 0, 0, 0]);
        assert_eq!(b[20..24], [40, 0, 0, 0]);
        assert_eq!(b[28..32], [0x56, 0x34, 0x12, 0]);
        assert_eq!(b[36], 3);
        assert_eq!((b[44], b[46]), (2, 2));
        assert_eq!(b[48..54], [1, 2, 3, 4, 5, 6]);
        assert_eq!(b[54..56], [100, 0]);
    }
}
