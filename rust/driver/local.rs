// SPDX-License-Identifier: GPL-2.0

//! Local operations of a send queue: fast registration (REG_MR), memory
//! window binding (BIND_MW) and local invalidation (LOCAL_INV). They send
//! nothing; they take effect in send queue order and complete like any
//! other work request. REG_MR is for kernel QPs only (user MRs are not
//! fast-registration MRs), so a user ring that carries one gets a local QP
//! operation error; BIND_MW is for RC and UC QPs (rxe's rule).

use super::mr::{self, Registration};
use super::qp::QpCore;
use crate::abi::{opcode, send_flags, status, BindMwOp, RegMrOp, SendWqe};
use crate::ib::{AccessFlags, QpType};

/// Whether `opcode` is a local operation.
pub(crate) fn is_local(op: u32) -> bool {
    matches!(op, opcode::REG_MR | opcode::LOCAL_INV | opcode::BIND_MW)
}

/// Carries out the local operation `w` of `qp`; its completion status.
/// Any context.
pub(crate) fn execute(qp: &QpCore, w: &SendWqe) -> u32 {
    let allowed = match w.opcode {
        opcode::REG_MR => qp.is_kernel(),
        opcode::BIND_MW => matches!(qp.qp_type(), QpType::Rc | QpType::Uc),
        _ => true,
    };
    if !allowed {
        return status::LOC_QP_OP_ERR;
    }
    if qp.live.in_error() {
        return status::WR_FLUSH_ERR;
    }
    match w.opcode {
        opcode::REG_MR => {
            let op = RegMrOp::decode(&w.op);
            // No such MR, another PD's, not a fast-registration MR, or a
            // range outside its pages.
            match mr::by_index(&qp.mrs, op.key).map(|m| m.register(qp.pd, &registration(&op))) {
                Some(Ok(())) => status::SUCCESS,
                _ => status::LOC_PROT_ERR,
            }
        }
        opcode::BIND_MW => {
            let op = BindMwOp::decode(&w.op);
            // No such window (or a key it no longer answers to), another
            // PD's, a type 2 window bound already, or an MR that cannot
            // hold it.
            match mr::lookup(&qp.mrs, op.mw_rkey).map(|m| m.bind(&qp.mrs, qp.qpn(), qp.pd, &op)) {
                Some(Ok(())) => status::SUCCESS,
                _ => status::MW_BIND_ERR,
            }
        }
        opcode::LOCAL_INV => {
            let key = w.imm_or_inv;
            // No such MR or window, another PD's or QP's, a key that no
            // longer names it, or nothing invalidatable.
            match mr::lookup(&qp.mrs, key).map(|m| m.invalidate(qp.qpn(), qp.pd, key)) {
                Some(Ok(())) => status::SUCCESS,
                _ => status::LOC_PROT_ERR,
            }
        }
        _ => status::LOC_QP_OP_ERR,
    }
}

/// What REG_MR `op` asks of its MR.
fn registration(op: &RegMrOp) -> Registration {
    Registration {
        key: op.key,
        access: AccessFlags::from_stored(op.access),
        iova: op.iova,
        length: op.length,
        page_size: u64::from(op.page_size),
    }
}

/// Runs `w`, a local operation behind requests of `qp` not yet answered,
/// ahead of them if no one can tell it from running in its turn; whether
/// it ran (then it is done: it has no completion). Only an unsignaled
/// REG_MR (on a QP that does not signal all) that succeeds on a free MR
/// does: with no completion there is no order to keep, and a request
/// before it cannot be using an MR that is not valid. A kernel consumer
/// posts REG_MR and the SEND that names the MR together (nvme-rdma,
/// xprtrdma): made to wait for every request before it, each such pair
/// waited a round trip for the previous one, and nvme-rdma's IOs went one
/// at a time whatever the queue depth. A failure, a signaled REG_MR and
/// the other local operations wait and run in their turn. Any context.
pub(crate) fn execute_ahead(qp: &QpCore, w: &SendWqe) -> bool {
    if w.opcode != opcode::REG_MR
        || !qp.is_kernel()
        || qp.sq_sig_all()
        || w.send_flags & send_flags::SIGNALED != 0
        || qp.live.in_error()
    {
        return false;
    }
    let op = RegMrOp::decode(&w.op);
    mr::by_index(&qp.mrs, op.key)
        .is_some_and(|m| m.register_free(qp.pd, &registration(&op)).is_ok())
}

/// Writes the send completion of local operation `w` (if signaled, or
/// failed).
pub(crate) fn complete(qp: &QpCore, w: &SendWqe, code: u32) {
    qp.complete_send(w, code, 0);
}
