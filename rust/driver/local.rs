// SPDX-License-Identifier: GPL-2.0

//! Local operations of a send queue: fast registration (REG_MR) and local
//! invalidation (LOCAL_INV). They send nothing; they take effect in send
//! queue order and complete like any other work request. Only kernel QPs
//! may post them (user MRs are not fast-registration MRs; rxud has no
//! memory windows), so a user ring that carries one gets a local QP
//! operation error.

use super::mr::{self, Registration};
use super::qp::QpCore;
use crate::abi::{opcode, status, RegMrOp, SendWqe};
use crate::ib::AccessFlags;

/// Whether `opcode` is a local operation.
pub(crate) fn is_local(op: u32) -> bool {
    matches!(op, opcode::REG_MR | opcode::LOCAL_INV)
}

/// Carries out the local operation `w` of `qp`; its completion status.
/// Any context.
pub(crate) fn execute(qp: &QpCore, w: &SendWqe) -> u32 {
    if !qp.is_kernel() {
        return status::LOC_QP_OP_ERR;
    }
    if qp.live.in_error() {
        return status::WR_FLUSH_ERR;
    }
    let done = match w.opcode {
        opcode::REG_MR => {
            let op = RegMrOp::decode(&w.op);
            let reg = Registration {
                key: op.key,
                access: AccessFlags::from_stored(op.access),
                iova: op.iova,
                length: op.length,
                page_size: u64::from(op.page_size),
            };
            mr::by_index(&qp.mrs, op.key).map(|m| m.register(qp.pd, &reg))
        }
        opcode::LOCAL_INV => {
            let key = w.imm_or_inv;
            mr::lookup(&qp.mrs, key).map(|m| m.invalidate(qp.pd, key))
        }
        _ => return status::LOC_QP_OP_ERR,
    };
    match done {
        Some(Ok(())) => status::SUCCESS,
        // No such MR, another PD's, not a fast-registration MR, a key
        // that no longer names it, or a range outside its pages.
        _ => status::LOC_PROT_ERR,
    }
}

/// Writes the send completion of local operation `w` (if signaled, or
/// failed).
pub(crate) fn complete(qp: &QpCore, w: &SendWqe, code: u32) {
    qp.complete_send(w, code, 0);
}
