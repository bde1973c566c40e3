// SPDX-License-Identifier: GPL-2.0

//! Kernel consumers' work requests (`ib_post_send`, `ib_post_recv`,
//! `ib_post_srq_recv`) into a QP's or SRQ's queue. They go into the same
//! rings, in the same slot formats (rust/abi), as a user process writes
//! through its mapping, so each queue has one consumer for both kinds of
//! owner. What can be refused at once is refused here with an errno (the
//! post fails at that request); what depends on memory keys is checked
//! when the request is carried out, and completes in error.

use super::device::RxudDevice;
use super::qp::QpCore;
use super::ring::{MAX_RECV_SLOT, MAX_SEND_SLOT};
use super::srq::SrqCore;
use crate::abi::{
    opcode, send_flags, xud, AtomicOp, RdmaOp, RecvWqe, RegMrOp, SendWqe, Sge, UdOp, XudOp,
    RECV_WQE_HEADER_SIZE, SEND_WQE_HEADER_SIZE, SGE_SIZE,
};
use crate::ib::{QpType, RecvWr, SendFlags, SendOp, SendWr, SgeList};
use kernel::prelude::*;

/// The ring's form of a send work request's flags.
fn ring_flags(f: SendFlags) -> Result<u32> {
    if !f.difference(SendFlags::KNOWN).is_empty() {
        // IP checksum offload and the like: not for RDMA.
        return Err(EINVAL);
    }
    let mut bits = 0;
    for (flag, bit) in [
        (SendFlags::FENCE, send_flags::FENCE),
        (SendFlags::SIGNALED, send_flags::SIGNALED),
        (SendFlags::SOLICITED, send_flags::SOLICITED),
        (SendFlags::INLINE, send_flags::INLINE),
    ] {
        if f.contains(flag) {
            bits |= bit;
        }
    }
    Ok(bits)
}

/// Writes `sges` after the header of a slot (`body` is the rest of it).
fn put_sges(body: &mut [u8], sges: &SgeList<'_>) -> Result {
    for (i, s) in sges.iter().enumerate() {
        let at = i * SGE_SIZE as usize;
        let e = Sge {
            addr: s.addr,
            length: s.length,
            lkey: s.lkey,
        };
        body.get_mut(at..at + SGE_SIZE as usize)
            .ok_or(EINVAL)?
            .copy_from_slice(&e.encode());
    }
    Ok(())
}

/// Queues a kernel consumer's send work request on `qp`'s send ring.
/// Context: any.
pub(crate) fn post_send(qp: &QpCore, wr: &SendWr<'_, RxudDevice>) -> Result {
    if !qp.live.can_send() && !qp.live.in_error() {
        // Not yet RTS (an error state flushes what is posted instead).
        return Err(EINVAL);
    }
    // XUD requests are addressed as UD ones; a WRITE carries its remote
    // memory besides (`struct rxud_xud_rdma_wr`, rust/ffi/rxud_kernel.h).
    // A kernel consumer's XUD QP takes SEND, SEND_WITH_IMM, RDMA_WRITE and
    // RDMA_WRITE_WITH_IMM (the others are `SendOp::Unsupported` on it).
    let xud = qp.qp_type() == QpType::Xud;
    let ud = matches!(qp.qp_type(), QpType::Ud | QpType::Gsi) || xud;
    let mut w = SendWqe {
        wr_id: wr.wr_id,
        send_flags: ring_flags(wr.flags)?,
        ..Default::default()
    };
    let rdma = |r: &crate::ib::Remote| {
        RdmaOp {
            remote_addr: r.addr,
            rkey: r.rkey,
        }
        .encode()
    };
    let local = matches!(wr.op, SendOp::LocalInv(_) | SendOp::RegMr(_));
    (w.opcode, w.imm_or_inv, w.op) = match &wr.op {
        SendOp::Send => (opcode::SEND, 0, [0; 32]),
        SendOp::SendImm(imm) => (opcode::SEND_WITH_IMM, *imm, [0; 32]),
        SendOp::SendInv(rkey) => (opcode::SEND_WITH_INV, *rkey, [0; 32]),
        SendOp::Write(r) => (opcode::RDMA_WRITE, 0, rdma(r)),
        SendOp::WriteImm(r, imm) => (opcode::RDMA_WRITE_WITH_IMM, *imm, rdma(r)),
        SendOp::Read(r) => (opcode::RDMA_READ, 0, rdma(r)),
        SendOp::CmpSwap {
            remote,
            compare,
            swap,
        } => {
            let op = AtomicOp {
                remote_addr: remote.addr,
                compare_add: *compare,
                swap: *swap,
                rkey: remote.rkey,
            };
            (opcode::ATOMIC_CMP_AND_SWP, 0, op.encode())
        }
        SendOp::FetchAdd { remote, add } => {
            let op = AtomicOp {
                remote_addr: remote.addr,
                compare_add: *add,
                swap: 0,
                rkey: remote.rkey,
            };
            (opcode::ATOMIC_FETCH_AND_ADD, 0, op.encode())
        }
        SendOp::LocalInv(key) => (opcode::LOCAL_INV, *key, [0; 32]),
        SendOp::RegMr(fr) => {
            // A new key may change only the tag, never the index.
            if fr.key >> 8 != fr.mr.core().index() || fr.length == 0 {
                return Err(EINVAL);
            }
            let op = RegMrOp {
                iova: fr.iova,
                length: fr.length,
                key: fr.key,
                access: fr.access.to_stored(),
                page_size: fr.page_size,
            };
            (opcode::REG_MR, 0, op.encode())
        }
        SendOp::Unsupported => return Err(EINVAL),
    };
    if ud {
        let dest = wr.ud.as_ref().ok_or(EINVAL)?;
        let to = UdOp {
            ah_num: dest.ah.number(),
            remote_qpn: dest.remote_qpn,
            remote_qkey: dest.remote_qkey,
        };
        w.op = if xud {
            let total = wr
                .sges
                .iter()
                .fold(0u64, |sum, s| sum + u64::from(s.length));
            if total > u64::from(xud::MAX_MSG_SZ) {
                return Err(EINVAL);
            }
            let (rkey, remote_addr) = match &wr.op {
                SendOp::Write(r) | SendOp::WriteImm(r, _) => (r.rkey, r.addr),
                _ => (0, 0),
            };
            XudOp {
                ah_num: to.ah_num,
                remote_qpn: to.remote_qpn,
                remote_qkey: to.remote_qkey,
                rkey,
                remote_addr,
            }
            .encode()
        } else {
            to.encode()
        };
    } else if matches!(qp.qp_type(), QpType::Uc)
        && !matches!(
            w.opcode,
            opcode::SEND | opcode::SEND_WITH_IMM | opcode::RDMA_WRITE | opcode::RDMA_WRITE_WITH_IMM
        )
        && !local
    {
        // UC has neither READ nor atomics.
        return Err(EINVAL);
    }
    let cap = qp.cap();
    let slot_size = (qp.sq.ring().geometry().slot_size() as usize).min(MAX_SEND_SLOT);
    let mut slot = [0u8; MAX_SEND_SLOT];
    let (head, body) = slot.split_at_mut(SEND_WQE_HEADER_SIZE as usize);
    let body = &mut body[..slot_size - SEND_WQE_HEADER_SIZE as usize];
    if w.send_flags & send_flags::INLINE != 0 && !local {
        let room = (cap.max_inline_data as usize).min(body.len());
        w.inline_len = wr.copy_inline(&mut body[..room])? as u32;
    } else if !local {
        if wr.sges.len() > cap.max_send_sge as usize {
            return Err(EINVAL);
        }
        w.num_sge = wr.sges.len() as u32;
        put_sges(body, &wr.sges)?;
    }
    head.copy_from_slice(&w.encode());
    qp.sq.push(&slot[..slot_size])
}

/// A receive slot for `wr`, at most `max_sge` SGEs; its length.
fn recv_slot(wr: &RecvWr<'_>, max_sge: u32, slot: &mut [u8; MAX_RECV_SLOT]) -> Result<usize> {
    if wr.sges.len() > max_sge as usize {
        return Err(EINVAL);
    }
    let w = RecvWqe {
        wr_id: wr.wr_id,
        num_sge: wr.sges.len() as u32,
        reserved: 0,
    };
    let (head, body) = slot.split_at_mut(RECV_WQE_HEADER_SIZE as usize);
    head.copy_from_slice(&w.encode());
    put_sges(body, &wr.sges)?;
    Ok(RECV_WQE_HEADER_SIZE as usize + wr.sges.len() * SGE_SIZE as usize)
}

/// Queues a kernel consumer's receive work request on `qp`'s receive
/// ring (a QP with an SRQ has none: `EINVAL`). In the error state it is
/// flushed at once. Context: any.
pub(crate) fn post_recv(qp: &QpCore, wr: &RecvWr<'_>) -> Result {
    let rq = qp.rq.as_ref().ok_or(EINVAL)?;
    let mut slot = [0u8; MAX_RECV_SLOT];
    let n = recv_slot(wr, qp.cap().max_recv_sge, &mut slot)?;
    rq.push(&slot[..n])?;
    if qp.live.in_error() {
        qp.flush();
    }
    Ok(())
}

/// Queues a kernel consumer's receive work request on an SRQ. Context:
/// any.
pub(crate) fn post_srq_recv(srq: &SrqCore, wr: &RecvWr<'_>) -> Result {
    let mut slot = [0u8; MAX_RECV_SLOT];
    let n = recv_slot(wr, srq.max_sge(), &mut slot)?;
    srq.push(&slot[..n])
}
