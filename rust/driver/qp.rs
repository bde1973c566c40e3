// SPDX-License-Identifier: GPL-2.0

//! Queue pairs: creation with their rings, and the IB state machine with
//! attribute validation (modify/query). The transition table is ib_core's;
//! the value checks are rxud's limits, which are what `query_device`
//! reports.

use super::cq::CqCore;
use super::device::{RxudDevice, MAX_INLINE_DATA, MAX_QP_RD_ATOM, MAX_QP_WR, MAX_SGE, PORT};
use super::ring::Ring;
use super::srq::SrqCore;
use super::table::IndexTable;
use crate::abi::{CreateQpReq, CreateQpResp, RECV_WQE_HEADER_SIZE, SEND_WQE_HEADER_SIZE, SGE_SIZE};
use crate::ib::qp::{access::*, attr_mask::*};
use crate::ib::{
    qp::transition_is_valid, AddressVector, NetworkType, QpAttr, QpCap, QpInitAttr, QpQuery, QpState, QpType, UData,
};
use crate::proto::{psn::Psn, wire::QPN_MASK};
use kernel::{new_mutex, prelude::*, sync::{Arc, Mutex}};

/// First QP number handed out: 0 and 1 are the special QPs, and IB
/// reserves a few more below 16 in practice (rxe does the same).
pub(crate) const FIRST_QPN: u32 = 16;
/// Remote rights a QP can grant (`IB_ACCESS_*`); LOCAL_WRITE is allowed
/// too, as everywhere in verbs.
const QP_ACCESS_SUPPORTED: u32 =
    IB_ACCESS_LOCAL_WRITE | IB_ACCESS_REMOTE_WRITE | IB_ACCESS_REMOTE_READ | IB_ACCESS_REMOTE_ATOMIC;
/// IB path MTU codes: 1 (256 bytes) to 5 (4096 bytes).
const MTU_CODES: core::ops::RangeInclusive<u32> = 1..=5;

/// The attributes `modify_qp` sets and `query_qp` reports.
#[derive(Clone, Copy)]
struct QpConfig {
    state: QpState,
    path_mtu: u32,
    qkey: u32,
    rq_psn: Psn,
    sq_psn: Psn,
    dest_qpn: u32,
    access: u32,
    pkey_index: u16,
    port: u32,
    av: Option<AddressVector>,
    max_rd_atomic: u8,
    max_dest_rd_atomic: u8,
    min_rnr_timer: u8,
    timeout: u8,
    retry_cnt: u8,
    rnr_retry: u8,
    en_sqd_async_notify: bool,
}

/// The part of a QP the data path will share (looked up by QP number).
#[pin_data]
pub(crate) struct QpCore {
    qpn: u32,
    qp_type: QpType,
    cap: QpCap,
    sq_sig_all: bool,
    sq: Ring,
    /// `None` with an SRQ.
    rq: Option<Ring>,
    send_cq: Arc<CqCore>,
    recv_cq: Arc<CqCore>,
    srq: Option<Arc<SrqCore>>,
    /// Serialises modify and query (ib_core lets them run concurrently).
    #[pin]
    config: Mutex<QpConfig>,
}

pub(crate) struct RxudQp {
    core: Arc<QpCore>,
    table: Arc<IndexTable<QpCore>>,
}

impl Drop for RxudQp {
    fn drop(&mut self) {
        // The number is free again; the core goes when its last user does.
        drop(self.table.remove(self.core.qpn));
    }
}

/// Rounds up to the 16-byte granule of WQE slots.
fn granule(n: u32) -> u32 {
    n.div_ceil(16) * 16
}

impl RxudQp {
    pub(crate) fn new(dev: &RxudDevice, attr: &QpInitAttr<'_, RxudDevice>, udata: &UData) -> Result<(Self, u32, QpCap)> {
        let req: CreateQpReq = udata.read()?;
        if req.comp_mask != 0 || attr.create_flags != 0 || attr.has_unsupported {
            return Err(crate::ib::eopnotsupp());
        }
        match attr.qp_type {
            QpType::Rc | QpType::Uc | QpType::Ud => {}
            // The GSI QP (kernel MAD layer) and other types come with the
            // data path, if ever.
            QpType::Gsi | QpType::Other(_) => return Err(crate::ib::eopnotsupp()),
        }
        let (Some(send_cq), Some(recv_cq)) = (attr.send_cq, attr.recv_cq) else {
            return Err(EINVAL);
        };
        let c = &attr.cap;
        if c.max_send_wr > MAX_QP_WR || c.max_send_sge > MAX_SGE || c.max_inline_data > MAX_INLINE_DATA {
            return Err(EINVAL);
        }
        if attr.srq.is_none() && (c.max_recv_wr > MAX_QP_WR || c.max_recv_sge > MAX_SGE) {
            return Err(EINVAL);
        }

        // Send slots hold a header and either the SGEs or inline data.
        let send_body = granule((c.max_send_sge.max(1) * SGE_SIZE).max(c.max_inline_data));
        let sq = Ring::new(udata.ucontext(), c.max_send_wr.max(1), MAX_QP_WR, SEND_WQE_HEADER_SIZE + send_body)?;
        let mut cap = QpCap {
            max_send_wr: sq.geometry().slot_count(),
            max_send_sge: (send_body / SGE_SIZE).min(MAX_SGE),
            max_inline_data: send_body.min(MAX_INLINE_DATA),
            ..QpCap::default()
        };
        let rq = match attr.srq {
            Some(_) => None,
            None => {
                let sges = c.max_recv_sge.max(1);
                let rq = Ring::new(udata.ucontext(), c.max_recv_wr.max(1), MAX_QP_WR, RECV_WQE_HEADER_SIZE + sges * SGE_SIZE)?;
                cap.max_recv_wr = rq.geometry().slot_count();
                cap.max_recv_sge = sges;
                Some(rq)
            }
        };
        let resp = CreateQpResp {
            comp_mask: 0,
            sq: sq.info(),
            rq: rq.as_ref().map(|r| r.info()).unwrap_or_default(),
        };
        let config = QpConfig {
            state: QpState::Reset,
            path_mtu: *MTU_CODES.start(),
            qkey: 0,
            rq_psn: Psn::new(0),
            sq_psn: Psn::new(0),
            dest_qpn: 0,
            access: 0,
            pkey_index: 0,
            port: PORT,
            av: None,
            max_rd_atomic: 0,
            max_dest_rd_atomic: 0,
            min_rnr_timer: 0,
            timeout: 0,
            retry_cnt: 0,
            rnr_retry: 0,
            en_sqd_async_notify: false,
        };
        let number = dev.qps.reserve()?;
        let qpn = number.id();
        let core = Arc::pin_init(
            pin_init!(QpCore {
                qpn,
                qp_type: attr.qp_type,
                cap,
                sq_sig_all: attr.sq_sig_all,
                sq,
                rq,
                send_cq: send_cq.core().clone(),
                recv_cq: recv_cq.core().clone(),
                srq: attr.srq.map(|s| s.core().clone()),
                config <- new_mutex!(config, "rxud:qp_config"),
            }),
            GFP_KERNEL,
        )?;
        udata.write(&resp)?;
        number.fill(core.clone());
        Ok((Self { core, table: dev.qps.clone() }, qpn, cap))
    }

    /// Applies a `modify_qp`: the transition must be one the IB state
    /// machine allows with exactly these attributes, and every value must
    /// be in range; otherwise nothing changes.
    pub(crate) fn modify(&self, attr: &QpAttr) -> Result {
        let mut cfg = self.core.config.lock();
        let mask = attr.mask;
        let has = |bit: u32| mask & bit != 0;
        let cur = if has(IB_QP_CUR_STATE) { attr.cur_state.ok_or(EINVAL)? } else { cfg.state };
        let next = if has(IB_QP_STATE) { attr.state.ok_or(EINVAL)? } else { cur };
        if !transition_is_valid(cur, next, self.core.qp_type, mask) {
            return Err(EINVAL);
        }
        // Alternate paths (APM) and rate limits are not supported.
        if has(IB_QP_ALT_PATH) || has(IB_QP_PATH_MIG_STATE) || has(IB_QP_RATE_LIMIT) {
            return Err(crate::ib::eopnotsupp());
        }
        let mut new = *cfg;
        new.state = next;
        if has(IB_QP_PORT) {
            if attr.port_num != PORT {
                return Err(EINVAL);
            }
            new.port = attr.port_num;
        }
        if has(IB_QP_PKEY_INDEX) {
            // RoCE has one P_Key.
            if attr.pkey_index != 0 {
                return Err(EINVAL);
            }
            new.pkey_index = 0;
        }
        if has(IB_QP_AV) {
            let av = attr.av.ok_or(EINVAL)??;
            // RoCE v1 GIDs exist in the table (ib_core adds both kinds),
            // but rxud, like rxe, only speaks RoCE v2.
            if av.network == NetworkType::RoceV1 || av.port != PORT {
                return Err(EINVAL);
            }
            new.av = Some(av);
        }
        if has(IB_QP_PATH_MTU) {
            if !MTU_CODES.contains(&attr.path_mtu) {
                return Err(EINVAL);
            }
            new.path_mtu = attr.path_mtu;
        }
        if has(IB_QP_QKEY) {
            new.qkey = attr.qkey;
        }
        if has(IB_QP_RQ_PSN) {
            new.rq_psn = Psn::new(attr.rq_psn);
        }
        if has(IB_QP_SQ_PSN) {
            new.sq_psn = Psn::new(attr.sq_psn);
        }
        if has(IB_QP_DEST_QPN) {
            if attr.dest_qp_num > QPN_MASK {
                return Err(EINVAL);
            }
            new.dest_qpn = attr.dest_qp_num;
        }
        if has(IB_QP_ACCESS_FLAGS) {
            // Optional flags may be ignored (IB_ACCESS_OPTIONAL); any other
            // unknown one is an error.
            let access = attr.access & !IB_ACCESS_OPTIONAL;
            if access & !QP_ACCESS_SUPPORTED != 0 {
                return Err(EINVAL);
            }
            new.access = access;
        }
        if has(IB_QP_MAX_QP_RD_ATOMIC) {
            if u32::from(attr.max_rd_atomic) > MAX_QP_RD_ATOM {
                return Err(EINVAL);
            }
            new.max_rd_atomic = attr.max_rd_atomic;
        }
        if has(IB_QP_MAX_DEST_RD_ATOMIC) {
            if u32::from(attr.max_dest_rd_atomic) > MAX_QP_RD_ATOM {
                return Err(EINVAL);
            }
            new.max_dest_rd_atomic = attr.max_dest_rd_atomic;
        }
        // Field widths of the IB spec: 5-bit timers, 3-bit retry counts.
        if has(IB_QP_MIN_RNR_TIMER) {
            if attr.min_rnr_timer > 31 {
                return Err(EINVAL);
            }
            new.min_rnr_timer = attr.min_rnr_timer;
        }
        if has(IB_QP_TIMEOUT) {
            if attr.timeout > 31 {
                return Err(EINVAL);
            }
            new.timeout = attr.timeout;
        }
        if has(IB_QP_RETRY_CNT) {
            if attr.retry_cnt > 7 {
                return Err(EINVAL);
            }
            new.retry_cnt = attr.retry_cnt;
        }
        if has(IB_QP_RNR_RETRY) {
            if attr.rnr_retry > 7 {
                return Err(EINVAL);
            }
            new.rnr_retry = attr.rnr_retry;
        }
        if has(IB_QP_EN_SQD_ASYNC_NOTIFY) {
            new.en_sqd_async_notify = attr.en_sqd_async_notify;
        }
        if next == QpState::Reset {
            // Back to the state of a new QP, keeping nothing of the old
            // connection.
            new.av = None;
            new.dest_qpn = 0;
        }
        *cfg = new;
        Ok(())
    }

    pub(crate) fn query(&self) -> QpQuery {
        let cfg = *self.core.config.lock();
        let attr = QpAttr {
            mask: 0,
            state: Some(cfg.state),
            cur_state: Some(cfg.state),
            path_mtu: cfg.path_mtu,
            qkey: cfg.qkey,
            rq_psn: cfg.rq_psn.value(),
            sq_psn: cfg.sq_psn.value(),
            dest_qp_num: cfg.dest_qpn,
            access: cfg.access,
            cap: self.core.cap,
            av: cfg.av.map(Ok),
            pkey_index: cfg.pkey_index,
            en_sqd_async_notify: cfg.en_sqd_async_notify,
            // Nothing is ever being drained: the send queue is processed
            // synchronously with respect to this lock.
            sq_draining: false,
            max_rd_atomic: cfg.max_rd_atomic,
            max_dest_rd_atomic: cfg.max_dest_rd_atomic,
            min_rnr_timer: cfg.min_rnr_timer,
            port_num: cfg.port,
            timeout: cfg.timeout,
            retry_cnt: cfg.retry_cnt,
            rnr_retry: cfg.rnr_retry,
            rate_limit: 0,
        };
        QpQuery { attr, qp_type: self.core.qp_type, cap: self.core.cap, sq_sig_all: self.core.sq_sig_all }
    }
}
