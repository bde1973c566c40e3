// SPDX-License-Identifier: GPL-2.0

//! XUD QPs (Documentation/xud.rst) on the send side. Creation, the state
//! machine and the parameters are in `qp.rs`; the data path is not built
//! yet, and [`post_send`] is what it replaces.

use super::qp::QpCore;
use super::tx::MAX_SEND_SLOT;
use crate::abi::{opcode, status, wc_opcode, Cqe, SendWqe};
use kernel::sync::Arc;

/// Carries out what was posted to an XUD QP's send queue: the doorbell's
/// (and the QP timer's) work for XUD. Context: process or softirq.
///
/// PLACEHOLDER until the XUD data path lands, which replaces this
/// function: every send WQE completes at once with
/// `IBV_WC_LOC_QP_OP_ERR` (whether signaled or not) and nothing is sent.
/// The WQE is not interpreted beyond its `wr_id` and opcode, so no
/// posted value can make it misbehave.
pub(crate) fn post_send(qp: &Arc<QpCore>) {
    let mut slot = [0u8; MAX_SEND_SLOT];
    while let Ok(true) = qp.sq.pop(&mut slot) {
        let wqe = SendWqe::decode(&slot);
        let cqe = Cqe {
            wr_id: wqe.wr_id,
            status: status::LOC_QP_OP_ERR,
            opcode: match wqe.opcode {
                opcode::RDMA_WRITE | opcode::RDMA_WRITE_WITH_IMM => wc_opcode::RDMA_WRITE,
                _ => wc_opcode::SEND,
            },
            qp_num: qp.qpn(),
            ..Default::default()
        };
        // A full CQ loses the completion (its owner gets an overflow
        // event), as for every other QP type.
        let _ = qp.send_cq.push(&cqe, false);
    }
}
