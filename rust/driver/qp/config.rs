// SPDX-License-Identifier: GPL-2.0

//! A QP's attributes: what `modify_qp` sets and `query_qp` reports
//! ([`QpConfig`], each value checked against rxud's limits, which are
//! what `query_device` reports), the XUD state machine's rule, and the
//! part the packet paths read without the QP's mutex ([`LiveConfig`]).

use crate::driver::device::{MAX_QP_RD_ATOM, PORT};
use crate::ib::{
    qp::transition_is_valid, AccessFlags, AddressVector, NetworkType, QpAttr, QpAttrMask, QpState,
    QpType,
};
use crate::proto::{mtu::IbMtu, psn::Psn, wire::QPN_MASK};
use core::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use kernel::prelude::*;

/// Remote rights a QP can grant; LOCAL_WRITE is allowed too, as
/// everywhere in verbs. FLUSH for persistence too, though the device does
/// not offer it: ib_cm grants both FLUSH rights to every connected QP of a
/// device that offers either (cm_init_qp_init_attr), and refusing them
/// failed every rdma_cm connection; no MR can grant persistence, so a
/// FLUSH asking for it still fails at the key.
const QP_ACCESS_SUPPORTED: AccessFlags = AccessFlags::LOCAL_WRITE
    .union(AccessFlags::REMOTE_WRITE)
    .union(AccessFlags::REMOTE_READ)
    .union(AccessFlags::REMOTE_ATOMIC)
    .union(AccessFlags::FLUSH_GLOBAL)
    .union(AccessFlags::FLUSH_PERSISTENT);
/// Largest value of the IB spec's 5-bit timer fields (min_rnr_timer,
/// timeout).
const MAX_TIMER_CODE: u8 = 31;
/// Largest value of the IB spec's 3-bit retry counts.
const MAX_RETRY_COUNT: u8 = 7;

/// An XUD QP's `timeout` (14: 67 ms), `retry_cnt`, `rnr_retry` and
/// `min_rnr_timer` (12: 0.64 ms) until `modify_qp` sets them: rxe's RC
/// defaults (xud.rst, "Sending").
const XUD_DEFAULT_TIMEOUT: u8 = 14;
const XUD_DEFAULT_RETRY_CNT: u8 = 7;
const XUD_DEFAULT_RNR_RETRY: u8 = 7;
const XUD_DEFAULT_MIN_RNR_TIMER: u8 = 12;

/// Whether the IB state machine allows `cur` → `next` for an XUD QP with
/// exactly the attributes in `mask`: UD's rules (ib_core's table), plus
/// RC's retransmission attributes, optional, where RC takes them
/// (`min_rnr_timer` at INIT → RTR; `timeout`, `retry_cnt` and `rnr_retry`
/// at RTR → RTS).
pub(super) fn xud_transition_is_valid(cur: QpState, next: QpState, mask: QpAttrMask) -> bool {
    let optional = match (cur, next) {
        (QpState::Init, QpState::Rtr) => QpAttrMask::MIN_RNR_TIMER,
        (QpState::Rtr, QpState::Rts) => {
            QpAttrMask::TIMEOUT | QpAttrMask::RETRY_CNT | QpAttrMask::RNR_RETRY
        }
        _ => QpAttrMask::EMPTY,
    };
    transition_is_valid(cur, next, QpType::Ud, mask.difference(optional))
}

/// The attributes `modify_qp` sets and `query_qp` reports.
#[derive(Clone, Copy)]
pub(super) struct QpConfig {
    pub(super) state: QpState,
    pub(super) path_mtu: IbMtu,
    pub(super) qkey: u32,
    pub(super) rq_psn: Psn,
    pub(super) sq_psn: Psn,
    pub(super) dest_qpn: u32,
    pub(super) access: AccessFlags,
    pub(super) pkey_index: u16,
    pub(super) port: u32,
    pub(super) av: Option<AddressVector>,
    pub(super) max_rd_atomic: u8,
    pub(super) max_dest_rd_atomic: u8,
    pub(super) min_rnr_timer: u8,
    pub(super) timeout: u8,
    pub(super) retry_cnt: u8,
    pub(super) rnr_retry: u8,
    pub(super) en_sqd_async_notify: bool,
}

/// The configuration the packet paths need, readable in any context.
pub(crate) struct LiveConfig {
    can_receive: AtomicBool,
    can_send: AtomicBool,
    in_error: AtomicBool,
    qkey: AtomicU32,
}

impl LiveConfig {
    pub(super) fn new() -> Self {
        Self {
            can_receive: AtomicBool::new(false),
            can_send: AtomicBool::new(false),
            in_error: AtomicBool::new(false),
            qkey: AtomicU32::new(0),
        }
    }

    pub(super) fn publish(&self, cfg: &QpConfig) {
        self.qkey.store(cfg.qkey, Ordering::Relaxed);
        let receive = matches!(
            cfg.state,
            QpState::Rtr | QpState::Rts | QpState::Sqd | QpState::Sqe
        );
        self.can_receive.store(receive, Ordering::Release);
        self.can_send
            .store(cfg.state == QpState::Rts, Ordering::Release);
        self.in_error
            .store(cfg.state == QpState::Err, Ordering::Release);
    }

    /// The data path put the QP in the error state (`QpCore::fail`);
    /// the next `publish` (a modify to RESET or ERROR) overrides it.
    pub(super) fn fail(&self) {
        self.can_send.store(false, Ordering::Release);
        self.can_receive.store(false, Ordering::Release);
        self.in_error.store(true, Ordering::Release);
    }

    /// The QP is in the error state: whatever is posted is flushed.
    pub(crate) fn in_error(&self) -> bool {
        self.in_error.load(Ordering::Acquire)
    }

    /// Receives are accepted (RTR and later, until ERROR or RESET).
    pub(crate) fn can_receive(&self) -> bool {
        self.can_receive.load(Ordering::Acquire)
    }

    /// Sends may go out (RTS).
    pub(crate) fn can_send(&self) -> bool {
        self.can_send.load(Ordering::Acquire)
    }

    pub(crate) fn qkey(&self) -> u32 {
        self.qkey.load(Ordering::Relaxed)
    }
}

impl QpConfig {
    /// A new QP's attributes: RESET, nothing configured (an XUD QP's
    /// retransmission attributes at their defaults).
    pub(super) fn reset(ty: QpType) -> Self {
        let xud = ty == QpType::Xud;
        let default = |v: u8| if xud { v } else { 0 };
        Self {
            state: QpState::Reset,
            path_mtu: IbMtu::Mtu256,
            qkey: 0,
            rq_psn: Psn::new(0),
            sq_psn: Psn::new(0),
            dest_qpn: 0,
            access: AccessFlags::EMPTY,
            pkey_index: 0,
            port: PORT,
            av: None,
            max_rd_atomic: 0,
            max_dest_rd_atomic: 0,
            min_rnr_timer: default(XUD_DEFAULT_MIN_RNR_TIMER),
            timeout: default(XUD_DEFAULT_TIMEOUT),
            retry_cnt: default(XUD_DEFAULT_RETRY_CNT),
            rnr_retry: default(XUD_DEFAULT_RNR_RETRY),
            en_sqd_async_notify: false,
        }
    }

    /// The configuration after `attr` is applied to `self`, or the error
    /// that refuses it (then nothing changes). The state machine has been
    /// checked already; this checks the values.
    pub(super) fn apply(&self, attr: &QpAttr, next: QpState) -> Result<Self> {
        let mut new = *self;
        new.state = next;
        new.set_path(attr)?;
        new.set_sequence(attr)?;
        new.set_access(attr)?;
        new.set_rd_atomic(attr)?;
        new.set_timers(attr)?;
        if attr.mask.contains(QpAttrMask::EN_SQD_ASYNC_NOTIFY) {
            new.en_sqd_async_notify = attr.en_sqd_async_notify;
        }
        if next == QpState::Reset {
            // Back to the state of a new QP, keeping nothing of the old
            // connection.
            new.av = None;
            new.dest_qpn = 0;
        }
        Ok(new)
    }

    /// Port, P_Key index, address vector, path MTU.
    fn set_path(&mut self, attr: &QpAttr) -> Result {
        let has = |f| attr.mask.contains(f);
        if has(QpAttrMask::PORT) {
            if attr.port_num != PORT {
                return Err(EINVAL);
            }
            self.port = attr.port_num;
        }
        if has(QpAttrMask::PKEY_INDEX) {
            // RoCE has one P_Key.
            if attr.pkey_index != 0 {
                return Err(EINVAL);
            }
            self.pkey_index = 0;
        }
        if has(QpAttrMask::AV) {
            let av = attr.av.ok_or(EINVAL)??;
            // RoCE v1 GIDs exist in the table (ib_core adds both kinds),
            // but rxud, like rxe, only speaks RoCE v2.
            if av.network == NetworkType::RoceV1 || av.port != PORT {
                return Err(EINVAL);
            }
            self.av = Some(av);
        }
        if has(QpAttrMask::PATH_MTU) {
            self.path_mtu = attr.path_mtu.ok_or(EINVAL)?;
        }
        Ok(())
    }

    /// Q_Key, PSNs and the destination QP.
    fn set_sequence(&mut self, attr: &QpAttr) -> Result {
        let has = |f| attr.mask.contains(f);
        if has(QpAttrMask::QKEY) {
            self.qkey = attr.qkey;
        }
        if has(QpAttrMask::RQ_PSN) {
            self.rq_psn = Psn::new(attr.rq_psn);
        }
        if has(QpAttrMask::SQ_PSN) {
            self.sq_psn = Psn::new(attr.sq_psn);
        }
        if has(QpAttrMask::DEST_QPN) {
            if attr.dest_qp_num > QPN_MASK {
                return Err(EINVAL);
            }
            self.dest_qpn = attr.dest_qp_num;
        }
        Ok(())
    }

    /// Rights granted to the peer.
    fn set_access(&mut self, attr: &QpAttr) -> Result {
        if attr.mask.contains(QpAttrMask::ACCESS_FLAGS) {
            // Optional flags may be ignored; any other unknown one is an
            // error.
            let access = attr.access.difference(AccessFlags::OPTIONAL);
            if !access.difference(QP_ACCESS_SUPPORTED).is_empty() {
                return Err(EINVAL);
            }
            self.access = access;
        }
        Ok(())
    }

    /// Outstanding RDMA READ/atomic limits, both directions.
    fn set_rd_atomic(&mut self, attr: &QpAttr) -> Result {
        let has = |f| attr.mask.contains(f);
        if has(QpAttrMask::MAX_QP_RD_ATOMIC) {
            if u32::from(attr.max_rd_atomic) > MAX_QP_RD_ATOM {
                return Err(EINVAL);
            }
            self.max_rd_atomic = attr.max_rd_atomic;
        }
        if has(QpAttrMask::MAX_DEST_RD_ATOMIC) {
            if u32::from(attr.max_dest_rd_atomic) > MAX_QP_RD_ATOM {
                return Err(EINVAL);
            }
            self.max_dest_rd_atomic = attr.max_dest_rd_atomic;
        }
        Ok(())
    }

    /// Timers and retry counts, within the IB spec's field widths.
    fn set_timers(&mut self, attr: &QpAttr) -> Result {
        let has = |f| attr.mask.contains(f);
        let bounded = |v: u8, max: u8| if v <= max { Ok(v) } else { Err(EINVAL) };
        if has(QpAttrMask::MIN_RNR_TIMER) {
            self.min_rnr_timer = bounded(attr.min_rnr_timer, MAX_TIMER_CODE)?;
        }
        if has(QpAttrMask::TIMEOUT) {
            self.timeout = bounded(attr.timeout, MAX_TIMER_CODE)?;
        }
        if has(QpAttrMask::RETRY_CNT) {
            self.retry_cnt = bounded(attr.retry_cnt, MAX_RETRY_COUNT)?;
        }
        if has(QpAttrMask::RNR_RETRY) {
            self.rnr_retry = bounded(attr.rnr_retry, MAX_RETRY_COUNT)?;
        }
        Ok(())
    }
}
