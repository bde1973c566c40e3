// SPDX-License-Identifier: GPL-2.0 OR Linux-OpenIB

// The user ABI of rxud: everything the kernel module and librxud exchange,
// defined once. The module declares this as `mod abi`; librxud uses it
// through the host crate `rxud-abi` (`rust/abi/lib.rs`). Only `repr(C)`
// structs of fixed-size integers, with explicit padding fields, so that
// every byte is defined; `layout` below checks sizes and offsets at compile
// time in both builds.
//
// Evolution rules: a struct only grows at its end; a new field is valid
// only if its `comp_mask` bit (or a size check) says so; the kernel copies
// `min(sizeof, user len)` both ways and rejects requests whose unknown tail
// is not zero. Incompatible changes bump `UVERBS_ABI_VERSION`.

#![forbid(unsafe_code)]

/// `ib_device_ops.uverbs_abi_ver` of rxud devices; librxud accepts exactly
/// this version.
pub const UVERBS_ABI_VERSION: u32 = 1;

/// Name of the sysfs attribute of every rxud ib_device
/// (`/sys/class/infiniband/<dev>/rxud_abi_version`). librxud matches
/// devices by its presence: rxud registers with `RDMA_DRIVER_UNKNOWN`, so
/// no driver id can identify it.
pub const SYSFS_ABI_ATTR: &str = "rxud_abi_version";

/// Driver part of `ibv_get_context` (alloc_ucontext) request.
#[repr(C)]
#[derive(Clone, Copy, Default, Debug, PartialEq, Eq)]
pub struct AllocContextReq {
    /// Request extensions the caller uses; none are defined yet.
    pub comp_mask: u64,
}

/// Driver part of the `ibv_get_context` response.
#[repr(C)]
#[derive(Clone, Copy, Default, Debug, PartialEq, Eq)]
pub struct AllocContextResp {
    /// Response extensions the kernel filled in; none are defined yet.
    pub comp_mask: u64,
    /// `UVERBS_ABI_VERSION` of the kernel, repeated for the provider's own
    /// check.
    pub abi_version: u32,
    pub reserved: u32,
}

/// Shared rings.
///
/// Every work queue and completion queue is a ring of fixed-size slots in
/// memory the kernel allocates and user space maps (`mmap` of the context's
/// file at [`RingInfo::mmap_offset`]). A ring starts with a [`RingControl`]
/// and its slots follow at [`RING_SLOTS_OFFSET`]. Indices run freely
/// (wrapping at 2^32); slot `i` is at `i & (slot_count - 1)`, `slot_count`
/// being a power of two; the ring holds `producer - consumer` entries, never
/// more than `slot_count`. Each index is written by one side only and read
/// by the other with acquire/release ordering: the producer writes a slot,
/// then releases `producer`; the consumer reads it after acquiring
/// `producer` and then releases `consumer`.
///
/// | ring            | producer | consumer |
/// |-----------------|----------|----------|
/// | CQ              | kernel   | user     |
/// | SQ, RQ, SRQ     | user     | kernel   |
///
/// The kernel trusts nothing it reads from a ring: it copies an entry out
/// before checking it, and treats indices that claim more entries than the
/// ring holds as a broken queue.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct RingControl {
    pub producer: u32,
    pub reserved0: [u32; 15],
    /// On its own cache line, away from the other side's index.
    pub consumer: u32,
    /// Written by the consumer, on its cache line: [`ring_flags`].
    pub consumer_flags: u32,
    pub reserved1: [u32; 14],
}

/// `RingControl::consumer_flags`.
pub mod ring_flags {
    /// The kernel is draining this send queue and will see entries
    /// produced now without a doorbell. It clears the flag, then re-reads
    /// the producer index before it stops, so a producer that publishes an
    /// entry, then (after a full fence) finds the flag clear, must ring the
    /// doorbell; one that finds it set need not.
    pub const SENDER_ACTIVE: u32 = 1 << 0;
}

/// Where the slots of a ring start.
pub const RING_SLOTS_OFFSET: usize = core::mem::size_of::<RingControl>();

/// Describes one shared ring in a create (or resize) response.
#[repr(C)]
#[derive(Clone, Copy, Default, Debug, PartialEq, Eq)]
pub struct RingInfo {
    /// Offset to pass to `mmap` on the context's command fd; 0 with
    /// `mmap_size` 0 when the queue has no ring (a QP on an SRQ has no RQ).
    pub mmap_offset: u64,
    /// Bytes to map: control block and slots, page aligned.
    pub mmap_size: u64,
    /// Number of slots, a power of two.
    pub slot_count: u32,
    /// Bytes per slot, a multiple of 16.
    pub slot_size: u32,
}

impl RingInfo {
    /// Whether this describes a ring at all.
    pub fn is_present(&self) -> bool {
        self.mmap_size != 0
    }
}

/// Bytes of a send work-queue entry before its scatter/gather list or
/// inline data. The data path defines the header's fields within it.
pub const SEND_WQE_HEADER_SIZE: u32 = 64;
/// Bytes of a receive work-queue entry before its scatter/gather list.
pub const RECV_WQE_HEADER_SIZE: u32 = 16;
/// Bytes of one scatter/gather element (`addr: u64, length: u32, lkey: u32`).
pub const SGE_SIZE: u32 = 16;
/// Bytes of one completion-queue entry.
pub const CQE_SIZE: u32 = 64;

// Work completions (`wc.rs`).
mod wc;
#[allow(unused_imports)]
pub use wc::{network, status, wc_flags, wc_opcode};

// Work-queue entries (`wqe.rs`).
mod wqe;
#[allow(unused_imports)]
pub use wqe::{
    opcode, send_flags, AtomicOp, BindMwOp, FlushOp, RdmaOp, RecvWqe, RegMrOp, SendWqe, Sge, UdOp,
    XudOp,
};

// XUD's creation parameters and limits (`xud.rs`).
pub mod xud;
#[allow(unused_imports)]
pub use xud::{XudParamError, XudParams};

// Ring geometry and slot sizes (`ring.rs`), used by both sides. The module
// uses only part of them, and `unused_imports` is not covered by its
// `allow(dead_code)` on `mod abi`.
mod ring;
#[allow(unused_imports)]
pub use ring::{
    recv_wqe_slot_size, send_wqe_slot_size, GeometryError, RingGeometry, RingInfoError,
    CQ_SLOT_SIZE, SLOT_SIZE_ALIGN,
};

/// One work completion in a CQ ring ([`CQE_SIZE`] bytes). Enumerations
/// carry libibverbs' values (`enum ibv_wc_status`, `ibv_wc_opcode`,
/// `ibv_wc_flags`), which equal the kernel's `ib_wc_*` values.
#[repr(C)]
#[derive(Clone, Copy, Default, Debug, PartialEq, Eq)]
pub struct Cqe {
    pub wr_id: u64,
    pub status: u32,
    pub opcode: u32,
    pub vendor_err: u32,
    pub byte_len: u32,
    /// Immediate data (network byte order, as in `ibv_wc`) or the
    /// invalidated rkey, as `wc_flags` says.
    pub imm_data: u32,
    pub qp_num: u32,
    /// UD/XUD: the sender's QP number.
    pub src_qp: u32,
    pub wc_flags: u32,
    pub pkey_index: u16,
    pub slid: u16,
    pub sl: u8,
    pub dlid_path_bits: u8,
    /// UD on RoCE: network header of the received packet
    /// (`RDMA_NETWORK_IPV4` or `RDMA_NETWORK_IPV6`).
    pub network_hdr_type: u8,
    pub reserved0: u8,
    /// UD on RoCE: the sender's MAC and VLAN id.
    pub smac: [u8; 6],
    pub vlan_id: u16,
    pub reserved1: u64,
}

/// Driver part of the `ibv_create_cq` request.
#[repr(C)]
#[derive(Clone, Copy, Default, Debug, PartialEq, Eq)]
pub struct CreateCqReq {
    /// Request extensions; none are defined yet.
    pub comp_mask: u64,
}

/// Driver part of the `ibv_create_cq` response: the CQ's ring.
#[repr(C)]
#[derive(Clone, Copy, Default, Debug, PartialEq, Eq)]
pub struct CreateCqResp {
    pub comp_mask: u64,
    pub ring: RingInfo,
}

/// Driver part of the `ibv_resize_cq` request.
#[repr(C)]
#[derive(Clone, Copy, Default, Debug, PartialEq, Eq)]
pub struct ResizeCqReq {
    pub comp_mask: u64,
}

/// Driver part of the `ibv_resize_cq` response: the CQ's new ring. The
/// kernel has moved the unconsumed entries of the old ring into it (the
/// first at slot 0); the old mapping stays valid until unmapped but is
/// never written again.
#[repr(C)]
#[derive(Clone, Copy, Default, Debug, PartialEq, Eq)]
pub struct ResizeCqResp {
    pub comp_mask: u64,
    pub ring: RingInfo,
}

/// `CreateQpReq::comp_mask`.
pub mod create_qp {
    /// The QP is an XUD QP (`IB_QPT_DRIVER`, made by librxud's
    /// `rxudv_create_qp`); `max_peers` and `ack_every` are meaningful.
    pub const XUD: u64 = 1 << 0;
    /// Every bit the kernel knows; a request with another is refused
    /// (`EOPNOTSUPP`).
    pub const KNOWN: u64 = XUD;
}

/// Driver part of the `ibv_create_qp` request. An older librxud sends only
/// `comp_mask` (8 bytes); the kernel reads the rest as 0.
#[repr(C)]
#[derive(Clone, Copy, Default, Debug, PartialEq, Eq)]
pub struct CreateQpReq {
    /// Request extensions: [`create_qp`].
    pub comp_mask: u64,
    /// With [`create_qp::XUD`]: per-peer state entries, 0 for the default
    /// (checked by [`XudParams::new`]).
    pub max_peers: u32,
    /// With [`create_qp::XUD`]: packets per ACK request, 0 for the default
    /// (checked by [`XudParams::new`]).
    pub ack_every: u32,
}

/// Driver part of the `ibv_create_qp` response: the QP's rings.
#[repr(C)]
#[derive(Clone, Copy, Default, Debug, PartialEq, Eq)]
pub struct CreateQpResp {
    pub comp_mask: u64,
    /// Send queue.
    pub sq: RingInfo,
    /// Receive queue; absent when the QP uses an SRQ.
    pub rq: RingInfo,
}

/// Driver part of the `ibv_create_srq` request.
#[repr(C)]
#[derive(Clone, Copy, Default, Debug, PartialEq, Eq)]
pub struct CreateSrqReq {
    pub comp_mask: u64,
}

/// Driver part of the `ibv_create_srq` response.
#[repr(C)]
#[derive(Clone, Copy, Default, Debug, PartialEq, Eq)]
pub struct CreateSrqResp {
    pub comp_mask: u64,
    pub ring: RingInfo,
}

/// Driver part of an `ibv_modify_srq` request that resizes the SRQ
/// (`IBV_SRQ_MAX_WR`). MODIFY_SRQ has no response buffer, so the kernel
/// writes the new ring's [`ModifySrqResp`] at `resp_addr` in the caller's
/// memory (as rxe writes its mmap information) before it swaps the rings;
/// it has then moved the waiting WQEs into the new ring (the oldest at
/// slot 0). The old mapping stays valid until unmapped but is never read
/// again.
#[repr(C)]
#[derive(Clone, Copy, Default, Debug, PartialEq, Eq)]
pub struct ModifySrqReq {
    pub comp_mask: u64,
    pub resp_addr: u64,
}

/// What the kernel writes at [`ModifySrqReq::resp_addr`]: the SRQ's new
/// ring.
#[repr(C)]
#[derive(Clone, Copy, Default, Debug, PartialEq, Eq)]
pub struct ModifySrqResp {
    pub comp_mask: u64,
    pub ring: RingInfo,
}

/// Driver part of the `ibv_create_ah` response. It follows the 4-byte
/// `ib_uverbs_create_ah_resp`, so in the response buffer it starts at
/// offset 4, not 8-aligned: readers copy it out rather than reference it.
#[repr(C)]
#[derive(Clone, Copy, Default, Debug, PartialEq, Eq)]
pub struct CreateAhResp {
    pub comp_mask: u64,
    /// Names the AH in UD send work requests; never 0.
    pub ah_num: u32,
    pub reserved: u32,
}

/// Layout checks, evaluated at compile time wherever this file is built.
// `is_multiple_of` needs Rust 1.87; the kernel supports older compilers.
#[allow(clippy::manual_is_multiple_of)]
mod layout {
    use super::*;
    use core::mem::{align_of, offset_of, size_of};

    const _: () = assert!(size_of::<AllocContextReq>() == 8);
    const _: () = assert!(size_of::<AllocContextResp>() == 16);
    const _: () = assert!(offset_of!(AllocContextResp, abi_version) == 8);
    const _: () = assert!(size_of::<RingControl>() == 128);
    const _: () = assert!(offset_of!(RingControl, consumer) == 64);
    const _: () = assert!(size_of::<RingInfo>() == 24);
    const _: () = assert!(offset_of!(RingInfo, slot_count) == 16);
    const _: () = assert!(size_of::<Cqe>() == CQE_SIZE as usize);
    const _: () = assert!(offset_of!(Cqe, smac) == 48);
    const _: () = assert!(size_of::<CreateCqReq>() == 8);
    const _: () = assert!(size_of::<CreateCqResp>() == 32);
    const _: () = assert!(size_of::<ResizeCqReq>() == 8);
    const _: () = assert!(size_of::<ResizeCqResp>() == 32);
    const _: () = assert!(size_of::<CreateQpReq>() == 16);
    const _: () = assert!(align_of::<CreateQpReq>() == 8);
    const _: () = assert!(offset_of!(CreateQpReq, max_peers) == 8);
    const _: () = assert!(offset_of!(CreateQpReq, ack_every) == 12);
    const _: () = assert!(size_of::<CreateQpResp>() == 56);
    const _: () = assert!(offset_of!(CreateQpResp, rq) == 32);
    const _: () = assert!(size_of::<CreateSrqReq>() == 8);
    const _: () = assert!(size_of::<CreateSrqResp>() == 32);
    const _: () = assert!(size_of::<ModifySrqReq>() == 16);
    const _: () = assert!(size_of::<ModifySrqResp>() == 32);
    const _: () = assert!(size_of::<CreateAhResp>() == 16);
    const _: () = assert!(RING_SLOTS_OFFSET % 64 == 0);
    const _: () =
        assert!(SEND_WQE_HEADER_SIZE % SGE_SIZE == 0 && RECV_WQE_HEADER_SIZE % SGE_SIZE == 0);
}
