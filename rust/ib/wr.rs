// SPDX-License-Identifier: GPL-2.0

//! Kernel consumers' work requests and completions: the lists of
//! `ib_post_send`, `ib_post_recv` and `ib_post_srq_recv` as Rust values,
//! and `struct ib_wc` filled from the driver's completion entries.
//!
//! A work request is read once, when posted (the verbs contract lets the
//! caller reuse it as soon as the post returns), into a value that names
//! the operation with exactly the operands it has: the container struct
//! (`ib_rdma_wr`, `ib_atomic_wr`, `ib_ud_wr`, `ib_reg_wr`) is read only for
//! the opcodes and QP types that come in it.

use super::device::{DeviceOps, Object};
use super::flags::flag_set;
use super::mr::AccessFlags;
use crate::abi::{self, Cqe};
use crate::ffi::bindings;
use core::ptr::NonNull;

flag_set! {
    /// Flags of a send work request (`IB_SEND_*`).
    pub(crate) struct SendFlags {
        const FENCE = bindings::IB_SEND_FENCE;
        const SIGNALED = bindings::IB_SEND_SIGNALED;
        const SOLICITED = bindings::IB_SEND_SOLICITED;
        const INLINE = bindings::IB_SEND_INLINE;
    }
}

/// One scatter/gather element (`struct ib_sge`): `length` bytes at DMA
/// address `addr` of the memory `lkey` names.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Sge {
    pub(crate) addr: u64,
    pub(crate) length: u32,
    pub(crate) lkey: u32,
}

/// The SGEs of a work request, borrowed for the post call.
#[derive(Clone, Copy)]
pub(crate) struct SgeList<'a>(&'a [bindings::ib_sge]);

impl<'a> SgeList<'a> {
    /// # Safety
    ///
    /// `list` points to `num` valid SGEs for `'a` (or `num` is at most 0).
    unsafe fn from_raw(list: *const bindings::ib_sge, num: i32) -> Self {
        match usize::try_from(num) {
            Ok(n) if n > 0 && !list.is_null() => {
                // SAFETY: per the function's contract.
                Self(unsafe { core::slice::from_raw_parts(list, n) })
            }
            _ => Self(&[]),
        }
    }

    pub(crate) fn len(&self) -> usize {
        self.0.len()
    }

    pub(crate) fn iter(&self) -> impl Iterator<Item = Sge> + 'a {
        self.0.iter().map(|s| Sge {
            addr: s.addr,
            length: s.length,
            lkey: s.lkey,
        })
    }
}

/// A remote address and the rkey that grants it.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Remote {
    pub(crate) addr: u64,
    pub(crate) rkey: u32,
}

/// A fast-registration request (`IB_WR_REG_MR`): give the MR, whose page
/// list `ib_map_mr_sg` filled, this key and these rights over
/// `[iova, iova + length)`.
pub(crate) struct FastReg<'a, T: DeviceOps> {
    pub(crate) mr: &'a T::Mr,
    pub(crate) key: u32,
    pub(crate) access: AccessFlags,
    pub(crate) iova: u64,
    pub(crate) length: u64,
    pub(crate) page_size: u32,
}

/// The operation of a send work request, with its operands.
pub(crate) enum SendOp<'a, T: DeviceOps> {
    Send,
    /// Immediate data as `ib_send_wr` holds it (network byte order).
    SendImm(u32),
    /// The rkey the peer is to invalidate.
    SendInv(u32),
    Write(Remote),
    WriteImm(Remote, u32),
    Read(Remote),
    CmpSwap {
        remote: Remote,
        compare: u64,
        swap: u64,
    },
    FetchAdd {
        remote: Remote,
        add: u64,
    },
    /// The key to invalidate.
    LocalInv(u32),
    RegMr(FastReg<'a, T>),
    /// An opcode rxud does not implement (LSO, masked atomics, memory
    /// window binds, flush, atomic write), or one its QP type cannot do.
    Unsupported,
}

/// A UD destination (`struct ib_ud_wr`).
pub(crate) struct UdDest<'a, T: DeviceOps> {
    pub(crate) ah: &'a T::Ah,
    pub(crate) remote_qpn: u32,
    pub(crate) remote_qkey: u32,
}

/// How a QP's work requests are addressed, which decides the container
/// struct of each.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum Addressing {
    /// RC, UC: the opcode's container (`ib_rdma_wr`, `ib_atomic_wr`, ...).
    Connected,
    /// UD, GSI: `ib_ud_wr`.
    Datagram,
    /// XUD: `ib_ud_wr`, and for RDMA WRITEs `struct rxud_xud_rdma_wr`
    /// (rust/ffi/rxud_kernel.h).
    Xud,
}

/// One send work request of a kernel consumer.
pub(crate) struct SendWr<'a, T: DeviceOps> {
    pub(crate) wr_id: u64,
    pub(crate) op: SendOp<'a, T>,
    pub(crate) flags: SendFlags,
    pub(crate) sges: SgeList<'a>,
    /// Set for UD, GSI and XUD QPs (`None` there: no AH given).
    pub(crate) ud: Option<UdDest<'a, T>>,
}

impl<'a, T: DeviceOps> SendWr<'a, T> {
    /// # Safety
    ///
    /// `wr` is a valid work request for `'a`, posted to a QP of ours; it
    /// is the `wr` member of the container `to` and its opcode call for:
    /// an `ib_ud_wr` on a datagram QP, on an XUD QP too but for RDMA
    /// WRITEs (the `ud.wr` of a `rxud_xud_rdma_wr`), the opcode's own on a
    /// connected QP (ib_core's contract with ULPs, and rxud_kernel.h's).
    /// The AH and MR it names are live objects of ours for the call.
    pub(super) unsafe fn from_raw(wr: &'a bindings::ib_send_wr, to: Addressing) -> Self {
        let ud = to != Addressing::Connected;
        let p: *const bindings::ib_send_wr = wr;
        // SAFETY: the unions hold a wr_id (or a pointer we treat as one)
        // and an immediate (or an rkey): plain integers either way.
        let (wr_id, ex) = unsafe { (wr.__bindgen_anon_1.wr_id, wr.ex.imm_data) };
        // SAFETY: for these opcodes the request is the `wr` member of an
        // `ib_rdma_wr` (contract above), at offset 0 of it.
        let remote = || unsafe {
            let r = &*p.cast::<bindings::ib_rdma_wr>();
            Remote {
                addr: r.remote_addr,
                rkey: r.rkey,
            }
        };
        // SAFETY: a WRITE on an XUD QP is the `ud.wr` of a
        // `rxud_xud_rdma_wr`, both at offset 0 (contract above).
        let xud_remote = || unsafe {
            let r = &*p.cast::<bindings::rxud_xud_rdma_wr>();
            Remote {
                addr: r.remote_addr,
                rkey: r.rkey,
            }
        };
        // SAFETY: for atomics the request is the `wr` of an `ib_atomic_wr`.
        let atomic = || unsafe { &*p.cast::<bindings::ib_atomic_wr>() };
        let op = match wr.opcode {
            bindings::IB_WR_SEND => SendOp::Send,
            bindings::IB_WR_SEND_WITH_IMM => SendOp::SendImm(ex),
            bindings::IB_WR_RDMA_WRITE if to == Addressing::Xud => SendOp::Write(xud_remote()),
            bindings::IB_WR_RDMA_WRITE_WITH_IMM if to == Addressing::Xud => {
                SendOp::WriteImm(xud_remote(), ex)
            }
            _ if ud => SendOp::Unsupported,
            bindings::IB_WR_SEND_WITH_INV => SendOp::SendInv(ex),
            bindings::IB_WR_RDMA_WRITE => SendOp::Write(remote()),
            bindings::IB_WR_RDMA_WRITE_WITH_IMM => SendOp::WriteImm(remote(), ex),
            bindings::IB_WR_RDMA_READ => SendOp::Read(remote()),
            bindings::IB_WR_ATOMIC_CMP_AND_SWP => {
                let a = atomic();
                SendOp::CmpSwap {
                    remote: Remote {
                        addr: a.remote_addr,
                        rkey: a.rkey,
                    },
                    compare: a.compare_add,
                    swap: a.swap,
                }
            }
            bindings::IB_WR_ATOMIC_FETCH_AND_ADD => {
                let a = atomic();
                SendOp::FetchAdd {
                    remote: Remote {
                        addr: a.remote_addr,
                        rkey: a.rkey,
                    },
                    add: a.compare_add,
                }
            }
            bindings::IB_WR_LOCAL_INV => SendOp::LocalInv(ex),
            bindings::IB_WR_REG_MR => {
                // SAFETY: a REG_MR request is the `wr` of an `ib_reg_wr`
                // naming a live MR of ours (contract above).
                let (r, mr) = unsafe {
                    let r = &*p.cast::<bindings::ib_reg_wr>();
                    (r, &*r.mr)
                };
                SendOp::RegMr(FastReg {
                    // SAFETY: our MRs are `Object<ib_mr, T::Mr>`.
                    mr: unsafe { Object::<bindings::ib_mr, T::Mr>::data_of(r.mr) },
                    key: r.key,
                    access: AccessFlags::from_bits(r.access as u32),
                    iova: mr.iova,
                    length: mr.length,
                    page_size: mr.page_size,
                })
            }
            _ => SendOp::Unsupported,
        };
        let ud = if ud {
            // SAFETY: on a UD, GSI or XUD QP the request is the `wr` of an
            // `ib_ud_wr` (alone or first in a `rxud_xud_rdma_wr`) whose AH
            // is a live AH of ours (contract above).
            unsafe {
                let u = &*p.cast::<bindings::ib_ud_wr>();
                (!u.ah.is_null()).then(|| UdDest {
                    ah: Object::<bindings::ib_ah, T::Ah>::data_of(u.ah),
                    remote_qpn: u.remote_qpn,
                    remote_qkey: u.remote_qkey,
                })
            }
        } else {
            None
        };
        Self {
            wr_id,
            op,
            flags: SendFlags::from_bits(wr.send_flags as u32),
            // SAFETY: the SGE array of a valid work request.
            sges: unsafe { SgeList::from_raw(wr.sg_list, wr.num_sge) },
            ud,
        }
    }
}

impl<T: DeviceOps> SendWr<'_, T> {
    /// Copies the request's data into `out` for an inline send
    /// (`IB_SEND_INLINE`): the SGEs then hold plain kernel addresses of
    /// the caller's buffers, read now, at post time. Returns the bytes
    /// copied; `EINVAL` if they do not fit in `out`.
    pub(crate) fn copy_inline(&self, out: &mut [u8]) -> kernel::error::Result<usize> {
        let mut at = 0usize;
        for sge in self.sges.iter() {
            let n = sge.length as usize;
            let dst = out.get_mut(at..at + n).ok_or(kernel::error::code::EINVAL)?;
            if n > 0 {
                // SAFETY: for an inline send, ib_core's contract with the
                // poster is that each SGE is `length` readable bytes at
                // kernel address `addr`, valid for the post call (rxe reads
                // them the same way); `dst` is our own buffer.
                unsafe {
                    core::ptr::copy_nonoverlapping(
                        sge.addr as usize as *const u8,
                        dst.as_mut_ptr(),
                        n,
                    )
                };
            }
            at += n;
        }
        Ok(at)
    }
}

/// One receive work request of a kernel consumer.
pub(crate) struct RecvWr<'a> {
    pub(crate) wr_id: u64,
    pub(crate) sges: SgeList<'a>,
}

impl<'a> RecvWr<'a> {
    /// # Safety
    ///
    /// `wr` is a valid receive work request for `'a`.
    pub(super) unsafe fn from_raw(wr: &'a bindings::ib_recv_wr) -> Self {
        Self {
            // SAFETY: the union holds a wr_id or a pointer used as one.
            wr_id: unsafe { wr.__bindgen_anon_1.wr_id },
            // SAFETY: the SGE array of a valid work request.
            sges: unsafe { SgeList::from_raw(wr.sg_list, wr.num_sge) },
        }
    }
}

/// Walks a work-request list (`next` links) posting each entry with
/// `post`; at the first failure, points `bad_wr` at the failed entry and
/// returns its error.
///
/// # Safety
///
/// `wr` is NULL or a valid list for the call; `bad_wr` is NULL or valid
/// for a write.
pub(super) unsafe fn post_list<W>(
    mut wr: *const W,
    bad_wr: *mut *const W,
    next: impl Fn(&W) -> *const W,
    mut post: impl FnMut(&W) -> kernel::error::Result,
) -> kernel::error::Result {
    while !wr.is_null() {
        // SAFETY: an entry of a valid list.
        let w = unsafe { &*wr };
        if let Err(e) = post(w) {
            if !bad_wr.is_null() {
                // SAFETY: per the function's contract.
                unsafe { *bad_wr = wr };
            }
            return Err(e);
        }
        wr = next(w);
    }
    Ok(())
}

/// A QP as ib_core knows it, to be named in kernel completions
/// (`ib_wc.qp`). Never dereferenced: only handed back to ib_core.
#[derive(Clone, Copy)]
pub(crate) struct QpHandle(NonNull<bindings::ib_qp>);

// SAFETY: an opaque pointer value that Rust never dereferences.
unsafe impl Send for QpHandle {}
// SAFETY: as above.
unsafe impl Sync for QpHandle {}

impl QpHandle {
    pub(super) fn new(qp: NonNull<bindings::ib_qp>) -> Self {
        Self(qp)
    }
}

// Completion statuses, opcodes and network types are ib_core's values
// (they are uverbs', which librxud hands to applications unchanged).
// Flags are not: libibverbs' WITH_INV is 8, the kernel's 4 (its 4 is
// IP_CSUM_OK in user space), so they are translated.
const _: () = assert!(
    abi::status::SUCCESS == bindings::IB_WC_SUCCESS
        && abi::status::LOC_LEN_ERR == bindings::IB_WC_LOC_LEN_ERR
        && abi::status::LOC_QP_OP_ERR == bindings::IB_WC_LOC_QP_OP_ERR
        && abi::status::LOC_PROT_ERR == bindings::IB_WC_LOC_PROT_ERR
        && abi::status::WR_FLUSH_ERR == bindings::IB_WC_WR_FLUSH_ERR
        && abi::status::REM_INV_REQ_ERR == bindings::IB_WC_REM_INV_REQ_ERR
        && abi::status::REM_ACCESS_ERR == bindings::IB_WC_REM_ACCESS_ERR
        && abi::status::REM_OP_ERR == bindings::IB_WC_REM_OP_ERR
        && abi::status::RETRY_EXC_ERR == bindings::IB_WC_RETRY_EXC_ERR
        && abi::status::RNR_RETRY_EXC_ERR == bindings::IB_WC_RNR_RETRY_EXC_ERR
        && abi::status::GENERAL_ERR == bindings::IB_WC_GENERAL_ERR
        && abi::wc_opcode::SEND == bindings::IB_WC_SEND
        && abi::wc_opcode::RDMA_WRITE == bindings::IB_WC_RDMA_WRITE
        && abi::wc_opcode::RDMA_READ == bindings::IB_WC_RDMA_READ
        && abi::wc_opcode::COMP_SWAP == bindings::IB_WC_COMP_SWAP
        && abi::wc_opcode::FETCH_ADD == bindings::IB_WC_FETCH_ADD
        && abi::wc_opcode::LOCAL_INV == bindings::IB_WC_LOCAL_INV
        && abi::wc_opcode::FLUSH == bindings::IB_WC_FLUSH
        && abi::wc_opcode::ATOMIC_WRITE == bindings::IB_WC_ATOMIC_WRITE
        && abi::opcode::FLUSH == bindings::IB_WR_FLUSH
        && abi::opcode::ATOMIC_WRITE == bindings::IB_WR_ATOMIC_WRITE
        && abi::wc_opcode::REG_MR == bindings::IB_WC_REG_MR
        && abi::wc_opcode::RECV == bindings::IB_WC_RECV
        && abi::wc_opcode::RECV_RDMA_WITH_IMM == bindings::IB_WC_RECV_RDMA_WITH_IMM
        && abi::network::IPV4 as u32 == bindings::RDMA_NETWORK_IPV4
        && abi::network::IPV6 as u32 == bindings::RDMA_NETWORK_IPV6
);

/// A completion for a kernel consumer.
pub(crate) struct Completion {
    pub(crate) cqe: Cqe,
    /// The QP it belongs to.
    pub(crate) qp: QpHandle,
    pub(crate) port: u32,
}

/// Fills `wc` from `c`.
pub(super) fn write_wc(c: &Completion, wc: &mut bindings::ib_wc) {
    let (cqe, qp, port) = (&c.cqe, c.qp, c.port);
    wc.__bindgen_anon_1.wr_id = cqe.wr_id;
    wc.status = cqe.status;
    wc.opcode = cqe.opcode;
    wc.vendor_err = cqe.vendor_err;
    wc.byte_len = cqe.byte_len;
    wc.qp = qp.0.as_ptr();
    // Both union members are a u32 as the entry holds it.
    wc.ex.imm_data = cqe.imm_data;
    wc.src_qp = cqe.src_qp;
    wc.slid = 0;
    let mut flags = 0;
    for (user, kernel) in [
        (abi::wc_flags::GRH, bindings::IB_WC_GRH),
        (abi::wc_flags::WITH_IMM, bindings::IB_WC_WITH_IMM),
        (abi::wc_flags::WITH_INV, bindings::IB_WC_WITH_INVALIDATE),
    ] {
        if cqe.wc_flags & user != 0 {
            flags |= kernel;
        }
    }
    if cqe.network_hdr_type != 0 {
        // The MAD and CM layers build reply paths from it.
        flags |= bindings::IB_WC_WITH_NETWORK_HDR_TYPE;
    }
    wc.wc_flags = flags as i32;
    wc.pkey_index = cqe.pkey_index;
    wc.sl = cqe.sl;
    wc.dlid_path_bits = 0;
    wc.port_num = port;
    wc.smac = cqe.smac;
    wc.vlan_id = cqe.vlan_id;
    wc.network_hdr_type = cqe.network_hdr_type;
}
