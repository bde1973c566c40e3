// SPDX-License-Identifier: GPL-2.0 OR Linux-OpenIB

//! Work-queue entries: what librxud writes into send, receive and SRQ ring
//! slots and the kernel reads (after copying the slot out: nothing here is
//! trusted by the kernel until checked).
//!
//! A send slot is a [`SendWqe`] (64 bytes) followed by `num_sge` [`Sge`]s,
//! or by `inline_len` bytes of data when [`send_flags::INLINE`] is set. A
//! receive slot is a [`RecvWqe`] (16 bytes) followed by `num_sge` [`Sge`]s.
//! Integers are little-endian (both sides run on the same machine);
//! `imm_data` keeps the byte order verbs give it (network order).
//!
//! The operation-specific part of a send WQE is a 32-byte area whose
//! meaning depends on the opcode; [`RdmaOp`], [`AtomicOp`] and [`UdOp`]
//! are typed encodings of it, so no field is defined twice and none
//! overlaps another by accident.

/// Opcodes of send WQEs: the values of `enum ib_uverbs_wr_opcode` (and
/// `ibv_wr_opcode`), so librxud passes them through.
pub mod opcode {
    pub const RDMA_WRITE: u32 = 0;
    pub const RDMA_WRITE_WITH_IMM: u32 = 1;
    pub const SEND: u32 = 2;
    pub const SEND_WITH_IMM: u32 = 3;
    pub const RDMA_READ: u32 = 4;
    pub const ATOMIC_CMP_AND_SWP: u32 = 5;
    pub const ATOMIC_FETCH_AND_ADD: u32 = 6;
    /// Invalidates the key in `imm_or_inv`: a type 2 memory window's
    /// (any QP) or a fast-registration MR's (kernel QPs).
    pub const LOCAL_INV: u32 = 7;
    /// Binds a memory window ([`super::BindMwOp`]).
    pub const BIND_MW: u32 = 8;
    pub const SEND_WITH_INV: u32 = 9;
    /// RC only: FLUSH ([`super::FlushOp`]), no SGE and no inline data.
    pub const FLUSH: u32 = 14;
    /// RC only: 8 bytes, carried as exactly 8 bytes of inline data
    /// (whatever the QP's `max_inline_data`), written at `remote_addr`
    /// ([`super::RdmaOp`], 8-byte aligned).
    pub const ATOMIC_WRITE: u32 = 15;
    /// Fast registration (`IB_WR_REG_MR`): kernel QPs only. The kernel
    /// refuses it in a user process's ring, since user MRs are not
    /// fast-registration MRs.
    pub const REG_MR: u32 = 0x20;
}

/// `SendWqe::send_flags`: the values of `ibv_send_flags`.
pub mod send_flags {
    pub const FENCE: u32 = 1 << 0;
    pub const SIGNALED: u32 = 1 << 1;
    pub const SOLICITED: u32 = 1 << 2;
    pub const INLINE: u32 = 1 << 3;
    /// Every flag the kernel knows; others make the WQE invalid.
    pub const KNOWN: u32 = FENCE | SIGNALED | SOLICITED | INLINE;
}

/// One scatter/gather element.
#[repr(C)]
#[derive(Clone, Copy, Default, Debug, PartialEq, Eq)]
pub struct Sge {
    pub addr: u64,
    pub length: u32,
    pub lkey: u32,
}

/// Header of a send WQE.
#[repr(C)]
#[derive(Clone, Copy, Default, Debug, PartialEq, Eq)]
pub struct SendWqe {
    pub wr_id: u64,
    /// One of [`opcode`].
    pub opcode: u32,
    /// [`send_flags`].
    pub send_flags: u32,
    /// Scatter/gather elements after the header (without INLINE).
    pub num_sge: u32,
    /// Bytes of inline data after the header (with INLINE).
    pub inline_len: u32,
    /// Immediate data (network order) for the `*_WITH_IMM` opcodes, or the
    /// rkey to invalidate for SEND_WITH_INV and LOCAL_INV.
    pub imm_or_inv: u32,
    pub reserved: u32,
    /// Per-opcode operands: [`RdmaOp`], [`AtomicOp`], [`UdOp`] or (XUD QPs)
    /// [`XudOp`].
    pub op: [u8; 32],
}

/// Header of a receive WQE.
#[repr(C)]
#[derive(Clone, Copy, Default, Debug, PartialEq, Eq)]
pub struct RecvWqe {
    pub wr_id: u64,
    pub num_sge: u32,
    pub reserved: u32,
}

impl Sge {
    /// An SGE from its 16 slot bytes (fewer: the missing ones read 0).
    pub fn decode(b: &[u8]) -> Self {
        Self {
            addr: le_u64(b, 0),
            length: le_u32(b, 8),
            lkey: le_u32(b, 12),
        }
    }

    pub fn encode(&self) -> [u8; 16] {
        let mut b = [0u8; 16];
        b[0..8].copy_from_slice(&self.addr.to_le_bytes());
        b[8..12].copy_from_slice(&self.length.to_le_bytes());
        b[12..16].copy_from_slice(&self.lkey.to_le_bytes());
        b
    }
}

impl RecvWqe {
    /// The header at the start of a receive slot.
    pub fn decode(b: &[u8]) -> Self {
        Self {
            wr_id: le_u64(b, 0),
            num_sge: le_u32(b, 8),
            reserved: le_u32(b, 12),
        }
    }

    pub fn encode(&self) -> [u8; 16] {
        let mut b = [0u8; 16];
        b[0..8].copy_from_slice(&self.wr_id.to_le_bytes());
        b[8..12].copy_from_slice(&self.num_sge.to_le_bytes());
        b[12..16].copy_from_slice(&self.reserved.to_le_bytes());
        b
    }
}

impl SendWqe {
    /// The header at the start of a send slot.
    pub fn decode(b: &[u8]) -> Self {
        let mut op = [0u8; 32];
        if let Some(src) = b.get(32..64) {
            op.copy_from_slice(src);
        }
        Self {
            wr_id: le_u64(b, 0),
            opcode: le_u32(b, 8),
            send_flags: le_u32(b, 12),
            num_sge: le_u32(b, 16),
            inline_len: le_u32(b, 20),
            imm_or_inv: le_u32(b, 24),
            reserved: le_u32(b, 28),
            op,
        }
    }

    pub fn encode(&self) -> [u8; 64] {
        let mut b = [0u8; 64];
        b[0..8].copy_from_slice(&self.wr_id.to_le_bytes());
        b[8..12].copy_from_slice(&self.opcode.to_le_bytes());
        b[12..16].copy_from_slice(&self.send_flags.to_le_bytes());
        b[16..20].copy_from_slice(&self.num_sge.to_le_bytes());
        b[20..24].copy_from_slice(&self.inline_len.to_le_bytes());
        b[24..28].copy_from_slice(&self.imm_or_inv.to_le_bytes());
        b[28..32].copy_from_slice(&self.reserved.to_le_bytes());
        b[32..64].copy_from_slice(&self.op);
        b
    }
}

/// Little-endian integers of a slot; bytes past its end read as 0.
fn le_u32(b: &[u8], at: usize) -> u32 {
    let mut w = [0u8; 4];
    for (i, x) in w.iter_mut().enumerate() {
        *x = b.get(at + i).copied().unwrap_or(0);
    }
    u32::from_le_bytes(w)
}

fn le_u64(b: &[u8], at: usize) -> u64 {
    u64::from(le_u32(b, at)) | (u64::from(le_u32(b, at + 4)) << 32)
}

/// Little-endian field access within the 32-byte operand area.
fn get_u32(b: &[u8; 32], at: usize) -> u32 {
    let mut w = [0u8; 4];
    w.copy_from_slice(&b[at..at + 4]);
    u32::from_le_bytes(w)
}

fn get_u64(b: &[u8; 32], at: usize) -> u64 {
    let mut w = [0u8; 8];
    w.copy_from_slice(&b[at..at + 8]);
    u64::from_le_bytes(w)
}

fn put_u32(b: &mut [u8; 32], at: usize, v: u32) {
    b[at..at + 4].copy_from_slice(&v.to_le_bytes());
}

fn put_u64(b: &mut [u8; 32], at: usize, v: u64) {
    b[at..at + 8].copy_from_slice(&v.to_le_bytes());
}

/// Operands of RDMA WRITE (with or without immediate) and READ.
#[derive(Clone, Copy, Default, Debug, PartialEq, Eq)]
pub struct RdmaOp {
    pub remote_addr: u64,
    pub rkey: u32,
}

impl RdmaOp {
    pub fn decode(op: &[u8; 32]) -> Self {
        Self {
            remote_addr: get_u64(op, 0),
            rkey: get_u32(op, 8),
        }
    }

    pub fn encode(&self) -> [u8; 32] {
        let mut op = [0u8; 32];
        put_u64(&mut op, 0, self.remote_addr);
        put_u32(&mut op, 8, self.rkey);
        op
    }
}

/// Operands of the atomic operations.
#[derive(Clone, Copy, Default, Debug, PartialEq, Eq)]
pub struct AtomicOp {
    pub remote_addr: u64,
    /// The value compared (CMP_AND_SWP) or added (FETCH_AND_ADD).
    pub compare_add: u64,
    /// The value swapped in (CMP_AND_SWP).
    pub swap: u64,
    pub rkey: u32,
}

impl AtomicOp {
    pub fn decode(op: &[u8; 32]) -> Self {
        Self {
            remote_addr: get_u64(op, 0),
            compare_add: get_u64(op, 8),
            swap: get_u64(op, 16),
            rkey: get_u32(op, 24),
        }
    }

    pub fn encode(&self) -> [u8; 32] {
        let mut op = [0u8; 32];
        put_u64(&mut op, 0, self.remote_addr);
        put_u64(&mut op, 8, self.compare_add);
        put_u64(&mut op, 16, self.swap);
        put_u32(&mut op, 24, self.rkey);
        op
    }
}

/// Operands of a FLUSH (IBTA 1.5, A19; rdma-core's `ibv_wr_flush`,
/// librxud's `rxudv_wr_flush`): make the range `[remote_addr, remote_addr
/// + length)` under `rkey` (or the whole MR, `selectivity_level` 1)
/// globally visible (`placement_type` bit 0) or persistent (bit 1).
/// `remote_addr` and `rkey` sit where [`RdmaOp`] has them.
#[derive(Clone, Copy, Default, Debug, PartialEq, Eq)]
pub struct FlushOp {
    pub remote_addr: u64,
    pub rkey: u32,
    pub length: u32,
    pub placement_type: u8,
    pub selectivity_level: u8,
}

impl FlushOp {
    pub fn decode(op: &[u8; 32]) -> Self {
        Self {
            remote_addr: get_u64(op, 0),
            rkey: get_u32(op, 8),
            length: get_u32(op, 12),
            placement_type: op[16],
            selectivity_level: op[17],
        }
    }

    pub fn encode(&self) -> [u8; 32] {
        let mut op = [0u8; 32];
        put_u64(&mut op, 0, self.remote_addr);
        put_u32(&mut op, 8, self.rkey);
        put_u32(&mut op, 12, self.length);
        op[16] = self.placement_type;
        op[17] = self.selectivity_level;
        op
    }

    /// The remote address and key, as an RDMA operation names them.
    pub fn remote(&self) -> RdmaOp {
        RdmaOp {
            remote_addr: self.remote_addr,
            rkey: self.rkey,
        }
    }
}

/// Destination of a datagram (UD) send: an address handle by number
/// (`CreateAhResp::ah_num`), the remote QP and its Q_Key.
#[derive(Clone, Copy, Default, Debug, PartialEq, Eq)]
pub struct UdOp {
    pub ah_num: u32,
    pub remote_qpn: u32,
    pub remote_qkey: u32,
}

impl UdOp {
    pub fn decode(op: &[u8; 32]) -> Self {
        Self {
            ah_num: get_u32(op, 0),
            remote_qpn: get_u32(op, 4),
            remote_qkey: get_u32(op, 8),
        }
    }

    pub fn encode(&self) -> [u8; 32] {
        let mut op = [0u8; 32];
        put_u32(&mut op, 0, self.ah_num);
        put_u32(&mut op, 4, self.remote_qpn);
        put_u32(&mut op, 8, self.remote_qkey);
        op
    }
}

/// Operands of an XUD send (SEND, SEND_WITH_IMM, RDMA_WRITE,
/// RDMA_WRITE_WITH_IMM): the destination as for UD ([`UdOp`]'s fields, at
/// the same offsets) and, for the WRITEs, the remote address and its rkey
/// (0 for the SENDs). A UD work request has no room for both an AH and a
/// remote address; librxud fills them from `ibv_wr_set_ud_addr` and
/// `ibv_wr_rdma_write*` (xud.rst, "Creating one").
#[derive(Clone, Copy, Default, Debug, PartialEq, Eq)]
pub struct XudOp {
    pub ah_num: u32,
    pub remote_qpn: u32,
    pub remote_qkey: u32,
    pub rkey: u32,
    pub remote_addr: u64,
}

impl XudOp {
    pub fn decode(op: &[u8; 32]) -> Self {
        Self {
            ah_num: get_u32(op, 0),
            remote_qpn: get_u32(op, 4),
            remote_qkey: get_u32(op, 8),
            rkey: get_u32(op, 12),
            remote_addr: get_u64(op, 16),
        }
    }

    pub fn encode(&self) -> [u8; 32] {
        let mut op = [0u8; 32];
        put_u32(&mut op, 0, self.ah_num);
        put_u32(&mut op, 4, self.remote_qpn);
        put_u32(&mut op, 8, self.remote_qkey);
        put_u32(&mut op, 12, self.rkey);
        put_u64(&mut op, 16, self.remote_addr);
        op
    }

    /// The destination alone, as a UD send names it.
    pub fn destination(&self) -> UdOp {
        UdOp {
            ah_num: self.ah_num,
            remote_qpn: self.remote_qpn,
            remote_qkey: self.remote_qkey,
        }
    }
}

/// Operands of a BIND_MW work request (`ibv_bind_mw` for type 1,
/// `IBV_WR_BIND_MW`/`ibv_wr_bind_mw` for type 2): bind the window `mw_rkey`
/// names to `[addr, addr + length)` of the MR `mr_lkey` names, with
/// `access` (`IBV_ACCESS_*` bits), under `new_rkey` (only its low 8 bits
/// are the caller's: the index stays the window's). Length 0 unbinds a
/// type 1 window (its `mr_lkey` is then not looked at).
#[derive(Clone, Copy, Default, Debug, PartialEq, Eq)]
pub struct BindMwOp {
    pub addr: u64,
    pub length: u64,
    pub mw_rkey: u32,
    pub new_rkey: u32,
    pub mr_lkey: u32,
    pub access: u32,
}

impl BindMwOp {
    pub fn decode(op: &[u8; 32]) -> Self {
        Self {
            addr: get_u64(op, 0),
            length: get_u64(op, 8),
            mw_rkey: get_u32(op, 16),
            new_rkey: get_u32(op, 20),
            mr_lkey: get_u32(op, 24),
            access: get_u32(op, 28),
        }
    }

    pub fn encode(&self) -> [u8; 32] {
        let mut op = [0u8; 32];
        put_u64(&mut op, 0, self.addr);
        put_u64(&mut op, 8, self.length);
        put_u32(&mut op, 16, self.mw_rkey);
        put_u32(&mut op, 20, self.new_rkey);
        put_u32(&mut op, 24, self.mr_lkey);
        put_u32(&mut op, 28, self.access);
        op
    }
}

/// Operands of a REG_MR work request (kernel QPs only): register the
/// fast-registration MR at `key`'s index under `key`, with `access`
/// (ib_core's `IB_ACCESS_*` bits) over `[iova, iova + length)` of its
/// page list, whose pages are `page_size` bytes.
#[derive(Clone, Copy, Default, Debug, PartialEq, Eq)]
pub struct RegMrOp {
    pub iova: u64,
    pub length: u64,
    pub key: u32,
    pub access: u32,
    pub page_size: u32,
}

impl RegMrOp {
    pub fn decode(op: &[u8; 32]) -> Self {
        Self {
            iova: get_u64(op, 0),
            length: get_u64(op, 8),
            key: get_u32(op, 16),
            access: get_u32(op, 20),
            page_size: get_u32(op, 24),
        }
    }

    pub fn encode(&self) -> [u8; 32] {
        let mut op = [0u8; 32];
        put_u64(&mut op, 0, self.iova);
        put_u64(&mut op, 8, self.length);
        put_u32(&mut op, 16, self.key);
        put_u32(&mut op, 20, self.access);
        put_u32(&mut op, 24, self.page_size);
        op
    }
}

#[allow(clippy::manual_is_multiple_of)]
mod layout {
    use super::super::{RECV_WQE_HEADER_SIZE, SEND_WQE_HEADER_SIZE, SGE_SIZE};
    use super::*;
    use core::mem::{offset_of, size_of};

    const _: () = assert!(size_of::<Sge>() == SGE_SIZE as usize);
    const _: () = assert!(size_of::<SendWqe>() == SEND_WQE_HEADER_SIZE as usize);
    const _: () = assert!(offset_of!(SendWqe, op) == 32);
    const _: () = assert!(size_of::<RecvWqe>() == RECV_WQE_HEADER_SIZE as usize);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn operands_round_trip() {
        let r = RdmaOp {
            remote_addr: 0x1122_3344_5566_7788,
            rkey: 0xdead_beef,
        };
        assert_eq!(RdmaOp::decode(&r.encode()), r);
        let a = AtomicOp {
            remote_addr: 8,
            compare_add: u64::MAX,
            swap: 7,
            rkey: 9,
        };
        assert_eq!(AtomicOp::decode(&a.encode()), a);
        let f = FlushOp {
            remote_addr: 0x1000,
            rkey: 0x1234_5678,
            length: 0x8000_0000,
            placement_type: 1,
            selectivity_level: 1,
        };
        assert_eq!(FlushOp::decode(&f.encode()), f);
        // The address and key where a WRITE's are (the requester builds
        // the RETH from them).
        assert_eq!(RdmaOp::decode(&f.encode()), f.remote());
        let u = UdOp {
            ah_num: 1,
            remote_qpn: 0xff_ffff,
            remote_qkey: 0x8001_0000,
        };
        assert_eq!(UdOp::decode(&u.encode()), u);
        let m = RegMrOp {
            iova: 0xffff_8880_0000_1000,
            length: 1 << 20,
            key: 0x1234_56ab,
            access: 7,
            page_size: 4096,
        };
        assert_eq!(RegMrOp::decode(&m.encode()), m);
        let b = BindMwOp {
            addr: 0x7f00_0000_1000,
            length: 4096,
            mw_rkey: 0x0001_0203,
            new_rkey: 0x0001_0204,
            mr_lkey: 0x0000_0501,
            access: 0x13,
        };
        assert_eq!(BindMwOp::decode(&b.encode()), b);
    }

    #[test]
    fn operands_are_little_endian_at_fixed_offsets() {
        let op = RdmaOp {
            remote_addr: 0x0102_0304_0506_0708,
            rkey: 0x0a0b_0c0d,
        }
        .encode();
        assert_eq!(op[..12], [8, 7, 6, 5, 4, 3, 2, 1, 0x0d, 0x0c, 0x0b, 0x0a]);
    }

    #[test]
    fn xud_operands_round_trip_at_fixed_offsets() {
        let x = XudOp {
            ah_num: 0x0102_0304,
            remote_qpn: 0x00ab_cdef,
            remote_qkey: 0x8000_0011,
            rkey: 0x0a0b_0c0d,
            remote_addr: 0x1122_3344_5566_7788,
        };
        let op = x.encode();
        assert_eq!(XudOp::decode(&op), x);
        assert_eq!(op[..4], [4, 3, 2, 1]);
        assert_eq!(op[12..16], [0x0d, 0x0c, 0x0b, 0x0a]);
        assert_eq!(op[16..24], [0x88, 0x77, 0x66, 0x55, 0x44, 0x33, 0x22, 0x11]);
        assert_eq!(op[24..], [0; 8], "the last 8 bytes stay reserved");
        // The destination lies where a UD send's does: the kernel reads
        // either with the other's decoder and gets the same AH, QPN, Q_Key.
        assert_eq!(UdOp::decode(&op), x.destination());
        let ud = UdOp {
            ah_num: 5,
            remote_qpn: 6,
            remote_qkey: 7,
        };
        let as_xud = XudOp::decode(&ud.encode());
        assert_eq!(as_xud.destination(), ud);
        assert_eq!((as_xud.rkey, as_xud.remote_addr), (0, 0));
    }
}
