// SPDX-License-Identifier: GPL-2.0

//! Queue pairs: `struct ib_qp_init_attr` and `struct ib_qp_attr` as Rust
//! values, the IB state machine's transition table (ib_core's), and the
//! `create_qp`, `modify_qp`, `query_qp` and `destroy_qp` adapters.

use super::ah::AddressVector;
use super::device::{to_c, Adapter, Device, DeviceOps, Object};
use super::flags::flag_set;
use super::mr::AccessFlags;
use super::udata::UData;
use super::wr::{Addressing, QpHandle, RecvWr, SendWr};
use crate::ffi::bindings;
use crate::proto::mtu::IbMtu;
use kernel::prelude::*;

// `IbMtu` (the protocol core's) carries the verbs MTU codes.
const _: () = assert!(
    IbMtu::Mtu256.code() == bindings::IB_MTU_256
        && IbMtu::Mtu512.code() == bindings::IB_MTU_512
        && IbMtu::Mtu1024.code() == bindings::IB_MTU_1024
        && IbMtu::Mtu2048.code() == bindings::IB_MTU_2048
        && IbMtu::Mtu4096.code() == bindings::IB_MTU_4096
);

flag_set! {
    /// Which attributes a `modify_qp` sets (`IB_QP_*`).
    pub(crate) struct QpAttrMask {
        const STATE = bindings::IB_QP_STATE;
        const CUR_STATE = bindings::IB_QP_CUR_STATE;
        const EN_SQD_ASYNC_NOTIFY = bindings::IB_QP_EN_SQD_ASYNC_NOTIFY;
        const ACCESS_FLAGS = bindings::IB_QP_ACCESS_FLAGS;
        const PKEY_INDEX = bindings::IB_QP_PKEY_INDEX;
        const PORT = bindings::IB_QP_PORT;
        const QKEY = bindings::IB_QP_QKEY;
        const AV = bindings::IB_QP_AV;
        const PATH_MTU = bindings::IB_QP_PATH_MTU;
        const TIMEOUT = bindings::IB_QP_TIMEOUT;
        const RETRY_CNT = bindings::IB_QP_RETRY_CNT;
        const RNR_RETRY = bindings::IB_QP_RNR_RETRY;
        const RQ_PSN = bindings::IB_QP_RQ_PSN;
        const MAX_QP_RD_ATOMIC = bindings::IB_QP_MAX_QP_RD_ATOMIC;
        const ALT_PATH = bindings::IB_QP_ALT_PATH;
        const MIN_RNR_TIMER = bindings::IB_QP_MIN_RNR_TIMER;
        const SQ_PSN = bindings::IB_QP_SQ_PSN;
        const MAX_DEST_RD_ATOMIC = bindings::IB_QP_MAX_DEST_RD_ATOMIC;
        const PATH_MIG_STATE = bindings::IB_QP_PATH_MIG_STATE;
        const CAP = bindings::IB_QP_CAP;
        const DEST_QPN = bindings::IB_QP_DEST_QPN;
        const RATE_LIMIT = bindings::IB_QP_RATE_LIMIT;
    }
}

flag_set! {
    /// Creation flags of a QP (`IB_QP_CREATE_*`). The driver refuses any
    /// it does not offer.
    pub(crate) struct QpCreateFlags {
        /// A kernel consumer's `IB_QPT_DRIVER` QP is an XUD QP: the first
        /// of the flags ib_core leaves to drivers
        /// (`IB_QP_CREATE_RESERVED_START`), which is what a kernel ULP
        /// passes. User processes cannot pass it (uverbs accepts only the
        /// flags it knows); they ask for XUD in the create request.
        const XUD = bindings::IB_QP_CREATE_RESERVED_START;
    }
}

/// QP types (`enum ib_qp_type`) rxud knows; creating any other fails
/// with `EOPNOTSUPP` before the driver sees it.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) enum QpType {
    Gsi,
    Rc,
    Uc,
    Ud,
    /// `IB_QPT_DRIVER`, rxud's only driver-defined type: XUD
    /// (Documentation/xud.rst). The driver checks that the creator asked
    /// for XUD ([`QpCreateFlags::XUD`] or the create request's XUD bit).
    Xud,
}

impl QpType {
    fn from_raw(t: bindings::ib_qp_type) -> Option<Self> {
        Some(match t {
            bindings::IB_QPT_GSI => Self::Gsi,
            bindings::IB_QPT_RC => Self::Rc,
            bindings::IB_QPT_UC => Self::Uc,
            bindings::IB_QPT_UD => Self::Ud,
            bindings::IB_QPT_DRIVER => Self::Xud,
            _ => return None,
        })
    }

    fn to_raw(self) -> bindings::ib_qp_type {
        match self {
            Self::Gsi => bindings::IB_QPT_GSI,
            Self::Rc => bindings::IB_QPT_RC,
            Self::Uc => bindings::IB_QPT_UC,
            Self::Ud => bindings::IB_QPT_UD,
            Self::Xud => bindings::IB_QPT_DRIVER,
        }
    }

    /// The row of ib_core's state table for this type: none for XUD,
    /// whose value (`IB_QPT_DRIVER`, 0xff) lies beyond the table
    /// `ib_modify_qp_is_ok` indexes.
    fn table_type(self) -> Option<bindings::ib_qp_type> {
        match self {
            Self::Xud => None,
            _ => Some(self.to_raw()),
        }
    }
}

/// QP states (`enum ib_qp_state`).
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) enum QpState {
    Reset,
    Init,
    Rtr,
    Rts,
    Sqd,
    Sqe,
    Err,
}

impl QpState {
    fn from_raw(s: bindings::ib_qp_state) -> Option<Self> {
        Some(match s {
            bindings::IB_QPS_RESET => Self::Reset,
            bindings::IB_QPS_INIT => Self::Init,
            bindings::IB_QPS_RTR => Self::Rtr,
            bindings::IB_QPS_RTS => Self::Rts,
            bindings::IB_QPS_SQD => Self::Sqd,
            bindings::IB_QPS_SQE => Self::Sqe,
            bindings::IB_QPS_ERR => Self::Err,
            _ => return None,
        })
    }

    fn to_raw(self) -> bindings::ib_qp_state {
        match self {
            Self::Reset => bindings::IB_QPS_RESET,
            Self::Init => bindings::IB_QPS_INIT,
            Self::Rtr => bindings::IB_QPS_RTR,
            Self::Rts => bindings::IB_QPS_RTS,
            Self::Sqd => bindings::IB_QPS_SQD,
            Self::Sqe => bindings::IB_QPS_SQE,
            Self::Err => bindings::IB_QPS_ERR,
        }
    }
}

/// Whether the IB state machine allows `cur` → `next` for `ty` with exactly
/// the attributes in `mask`: every required one present, nothing neither
/// required nor optional. ib_core's table (`ib_modify_qp_is_ok`), the one
/// every driver uses. It has no row for XUD (always `false` here): the
/// driver checks an XUD QP against the type whose rules it follows.
pub(crate) fn transition_is_valid(
    cur: QpState,
    next: QpState,
    ty: QpType,
    mask: QpAttrMask,
) -> bool {
    let Some(ty) = ty.table_type() else {
        return false;
    };
    // SAFETY: a pure function of its arguments; states and masks out of
    // range are rejected by it, and `ty` is a type its table has a row
    // for (it indexes the row without a check).
    unsafe { bindings::ib_modify_qp_is_ok(cur.to_raw(), next.to_raw(), ty, mask.bits()) }
}

/// Queue capacities (`struct ib_qp_cap`).
#[derive(Clone, Copy, Default, Debug, PartialEq, Eq)]
pub(crate) struct QpCap {
    pub(crate) max_send_wr: u32,
    pub(crate) max_recv_wr: u32,
    pub(crate) max_send_sge: u32,
    pub(crate) max_recv_sge: u32,
    pub(crate) max_inline_data: u32,
}

impl QpCap {
    fn from_raw(c: &bindings::ib_qp_cap) -> Self {
        Self {
            max_send_wr: c.max_send_wr,
            max_recv_wr: c.max_recv_wr,
            max_send_sge: c.max_send_sge,
            max_recv_sge: c.max_recv_sge,
            max_inline_data: c.max_inline_data,
        }
    }

    fn to_raw(self, c: &mut bindings::ib_qp_cap) {
        c.max_send_wr = self.max_send_wr;
        c.max_recv_wr = self.max_recv_wr;
        c.max_send_sge = self.max_send_sge;
        c.max_recv_sge = self.max_recv_sge;
        c.max_inline_data = self.max_inline_data;
    }
}

/// What the creator of a QP asks for, with the driver data of the CQs and
/// SRQ it names (kept alive by ib_core's use counts while the QP exists).
pub(crate) struct QpInitAttr<'a, T: DeviceOps> {
    pub(crate) qp_type: QpType,
    pub(crate) cap: QpCap,
    /// Every send WR completes with a CQE (else only signaled ones).
    pub(crate) sq_sig_all: bool,
    pub(crate) create_flags: QpCreateFlags,
    pub(crate) send_cq: Option<&'a T::Cq>,
    pub(crate) recv_cq: Option<&'a T::Cq>,
    pub(crate) srq: Option<&'a T::Srq>,
    /// An XRC domain, a receive WQ indirection table or a source QPN was
    /// given: features rxud does not have.
    pub(crate) has_unsupported: bool,
    /// How kernel completions name the QP.
    pub(crate) handle: QpHandle,
    /// Its asynchronous events.
    pub(crate) events: QpEvents,
}

/// An affiliated asynchronous error of a QP (IBTA 11.6.3): the data path
/// put the QP in the error state on its own.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum QpEvent {
    /// Local work queue catastrophic error (`IB_EVENT_QP_FATAL`): e.g. a
    /// completion the QP could not write.
    Fatal,
    /// Invalid request local work queue error (`IB_EVENT_QP_REQ_ERR`):
    /// the responder got a request it cannot carry out.
    InvalidRequest,
    /// Local access violation work queue error (`IB_EVENT_QP_ACCESS_ERR`):
    /// a request named memory it may not touch.
    AccessViolation,
}

/// Raises a QP's asynchronous events to its owner's handler (uverbs
/// queues them for `ibv_get_async_event`; kernel ULPs get a callback).
///
/// # Invariants
///
/// `qp` is the `ib_qp` the driver's QP object belongs to; it is valid
/// while that object exists, and the driver only raises events while it
/// does: from the QP's transport state, which the QP's destruction takes
/// down (under the lock the data path holds while raising) before it
/// returns. The value may outlive the QP (in a core packets still hold);
/// dropping it does not touch `qp`.
#[derive(Clone)]
pub(crate) struct QpEvents {
    qp: core::ptr::NonNull<bindings::ib_qp>,
}

// SAFETY: ib_core's QP event handlers may be called from any context; the
// pointer is only passed to them.
unsafe impl Send for QpEvents {}
// SAFETY: as above.
unsafe impl Sync for QpEvents {}

impl QpEvents {
    /// Reports `e` to the QP's event handler, if any. Any context.
    pub(crate) fn raise(&self, e: QpEvent) {
        let ty = match e {
            QpEvent::Fatal => bindings::IB_EVENT_QP_FATAL,
            QpEvent::InvalidRequest => bindings::IB_EVENT_QP_REQ_ERR,
            QpEvent::AccessViolation => bindings::IB_EVENT_QP_ACCESS_ERR,
        };
        // SAFETY: the QP is live (type invariant); ib_core's event
        // handlers may be called from any context.
        unsafe { bindings::rxud_ib_qp_event(self.qp.as_ptr(), ty) };
    }
}

/// Attributes of a QP (`struct ib_qp_attr`): the input of `modify_qp`,
/// where `mask` says which fields are meaningful, and the output of
/// `query_qp`.
#[derive(Clone, Copy, Debug)]
pub(crate) struct QpAttr {
    pub(crate) mask: QpAttrMask,
    /// `None`: a state value outside the IB state machine.
    pub(crate) state: Option<QpState>,
    pub(crate) cur_state: Option<QpState>,
    /// `None`: not a valid `enum ib_mtu` value.
    pub(crate) path_mtu: Option<IbMtu>,
    pub(crate) qkey: u32,
    pub(crate) rq_psn: u32,
    pub(crate) sq_psn: u32,
    pub(crate) dest_qp_num: u32,
    pub(crate) access: AccessFlags,
    pub(crate) cap: QpCap,
    /// With `IB_QP_AV`: the resolved path, or the error resolving it.
    pub(crate) av: Option<Result<AddressVector>>,
    pub(crate) pkey_index: u16,
    pub(crate) en_sqd_async_notify: bool,
    pub(crate) sq_draining: bool,
    pub(crate) max_rd_atomic: u8,
    pub(crate) max_dest_rd_atomic: u8,
    pub(crate) min_rnr_timer: u8,
    pub(crate) port_num: u32,
    pub(crate) timeout: u8,
    pub(crate) retry_cnt: u8,
    pub(crate) rnr_retry: u8,
    pub(crate) rate_limit: u32,
}

impl QpAttr {
    /// # Safety
    ///
    /// `a` is a valid attribute struct whose `ah_attr`, when `mask` has
    /// `AV`, was prepared by ib_core (source GID resolved).
    unsafe fn from_raw(a: &bindings::ib_qp_attr, mask: QpAttrMask) -> Self {
        Self {
            mask,
            state: QpState::from_raw(a.qp_state),
            cur_state: QpState::from_raw(a.cur_qp_state),
            path_mtu: IbMtu::from_code(a.path_mtu),
            qkey: a.qkey,
            rq_psn: a.rq_psn,
            sq_psn: a.sq_psn,
            dest_qp_num: a.dest_qp_num,
            access: AccessFlags::from_bits(a.qp_access_flags as u32),
            cap: QpCap::from_raw(&a.cap),
            // SAFETY: per the caller.
            av: mask
                .contains(QpAttrMask::AV)
                .then(|| unsafe { AddressVector::from_raw(&a.ah_attr) }),
            pkey_index: a.pkey_index,
            en_sqd_async_notify: a.en_sqd_async_notify != 0,
            sq_draining: a.sq_draining != 0,
            max_rd_atomic: a.max_rd_atomic,
            max_dest_rd_atomic: a.max_dest_rd_atomic,
            min_rnr_timer: a.min_rnr_timer,
            port_num: a.port_num,
            timeout: a.timeout,
            retry_cnt: a.retry_cnt,
            rnr_retry: a.rnr_retry,
            rate_limit: a.rate_limit,
        }
    }

    /// Writes every field into `a`.
    ///
    /// # Safety
    ///
    /// `a` is valid for writes.
    unsafe fn to_raw(self, a: &mut bindings::ib_qp_attr) {
        a.qp_state = self.state.unwrap_or(QpState::Err).to_raw();
        a.cur_qp_state = a.qp_state;
        a.path_mtu = self.path_mtu.unwrap_or(IbMtu::Mtu256).code();
        a.path_mig_state = bindings::IB_MIG_MIGRATED;
        a.qkey = self.qkey;
        a.rq_psn = self.rq_psn;
        a.sq_psn = self.sq_psn;
        a.dest_qp_num = self.dest_qp_num;
        a.qp_access_flags = self.access.bits() as i32;
        self.cap.to_raw(&mut a.cap);
        if let Some(Ok(av)) = &self.av {
            // SAFETY: `a.ah_attr` is valid for writes.
            unsafe { av.to_raw(&mut a.ah_attr) };
        }
        a.pkey_index = self.pkey_index;
        a.en_sqd_async_notify = self.en_sqd_async_notify as u8;
        a.sq_draining = self.sq_draining as u8;
        a.max_rd_atomic = self.max_rd_atomic;
        a.max_dest_rd_atomic = self.max_dest_rd_atomic;
        a.min_rnr_timer = self.min_rnr_timer;
        a.port_num = self.port_num;
        a.timeout = self.timeout;
        a.retry_cnt = self.retry_cnt;
        a.rnr_retry = self.rnr_retry;
        a.rate_limit = self.rate_limit;
    }
}

/// What `query_qp` reports besides the attributes.
pub(crate) struct QpQuery {
    pub(crate) attr: QpAttr,
    pub(crate) qp_type: QpType,
    pub(crate) cap: QpCap,
    pub(crate) sq_sig_all: bool,
}

impl<T: DeviceOps> Adapter<T> {
    /// `ib_device_ops.create_qp`.
    ///
    /// # Safety
    ///
    /// Called by ib_core in process context with a zeroed QP object of
    /// `size_ib_qp` bytes whose `device` and `pd` are set, the init
    /// attributes (whose CQs and SRQ, if set, are live objects of ours that
    /// ib_core holds for the QP's life) and the call's udata (or NULL).
    pub(super) unsafe extern "C" fn create_qp(
        qp: *mut bindings::ib_qp,
        init: *mut bindings::ib_qp_init_attr,
        udata: *mut bindings::ib_udata,
    ) -> kernel::ffi::c_int {
        // SAFETY: per the function's contract, every pointer is valid for
        // the call and the objects named are ours and live.
        let (dev, pd, i, udata) = unsafe {
            (
                Device::<T>::from_raw((*qp).device),
                Object::<bindings::ib_pd, T::Pd>::data_of((*qp).pd),
                &mut *init,
                UData::from_raw(udata),
            )
        };
        let Some(qp_type) = QpType::from_raw(i.qp_type) else {
            return super::eopnotsupp().to_errno();
        };
        let Some(ptr) = core::ptr::NonNull::new(qp) else {
            return EINVAL.to_errno();
        };
        let handle = QpHandle::new(ptr);
        // INVARIANT: `qp` is the object being created; the driver keeps
        // the events with the QP's transport state (see `QpEvents`).
        let events = QpEvents { qp: ptr };
        let cq = |c: *mut bindings::ib_cq| {
            // SAFETY: a CQ named by the init attributes is a live CQ of
            // ours (contract above).
            (!c.is_null()).then(|| unsafe { Object::<bindings::ib_cq, T::Cq>::data_of(c) })
        };
        let a = QpInitAttr::<T> {
            qp_type,
            cap: QpCap::from_raw(&i.cap),
            sq_sig_all: i.sq_sig_type == bindings::IB_SIGNAL_ALL_WR,
            create_flags: QpCreateFlags::from_bits(i.create_flags),
            send_cq: cq(i.send_cq),
            recv_cq: cq(i.recv_cq),
            // SAFETY: as for the CQs.
            srq: (!i.srq.is_null())
                .then(|| unsafe { Object::<bindings::ib_srq, T::Srq>::data_of(i.srq) }),
            has_unsupported: !i.xrcd.is_null() || !i.rwq_ind_tbl.is_null() || i.source_qpn != 0,
            handle,
            events,
        };
        let r = T::create_qp(dev, pd, &a, &udata).map(|(data, qpn, cap)| {
            // ib_core reports the granted capacities to the creator.
            cap.to_raw(&mut i.cap);
            // SAFETY: the QP object is ours to fill during the call.
            unsafe { (*qp).qp_num = qpn };
            data
        });
        // SAFETY: the object was allocated for `Object<ib_qp, T::Qp>` and
        // its data is not initialised yet.
        unsafe { Object::<_, T::Qp>::init(qp, r) }
    }

    /// `ib_device_ops.destroy_qp`.
    ///
    /// # Safety
    ///
    /// Called by ib_core once per QP that `create_qp` initialised, in
    /// process context, when nothing else uses the QP.
    pub(super) unsafe extern "C" fn destroy_qp(
        qp: *mut bindings::ib_qp,
        _udata: *mut bindings::ib_udata,
    ) -> kernel::ffi::c_int {
        // SAFETY: per the function's contract.
        unsafe { Object::<_, T::Qp>::drop_data(qp) };
        0
    }

    /// `ib_device_ops.modify_qp`.
    ///
    /// # Safety
    ///
    /// Called by ib_core in process context with a live QP of ours,
    /// attributes prepared by `_ib_modify_qp` (AV source GID resolved, MAC
    /// resolved for user QPs) and the call's udata (or NULL).
    pub(super) unsafe extern "C" fn modify_qp(
        qp: *mut bindings::ib_qp,
        attr: *mut bindings::ib_qp_attr,
        mask: kernel::ffi::c_int,
        udata: *mut bindings::ib_udata,
    ) -> kernel::ffi::c_int {
        // SAFETY: per the function's contract.
        let (dev, data, a, udata) = unsafe {
            (
                Device::<T>::from_raw((*qp).device),
                Object::<bindings::ib_qp, T::Qp>::data_of(qp),
                QpAttr::from_raw(&*attr, QpAttrMask::from_bits(mask as u32)),
                UData::from_raw(udata),
            )
        };
        let r = T::modify_qp(dev, data, &a, &udata);
        if r.is_ok() && a.mask.contains(QpAttrMask::STATE) && a.state == Some(QpState::Err) {
            // In the error state the QP takes nothing more from its SRQ
            // (if it has one): its owner learns so, as from rxe, and
            // `ib_drain_qp` waits for exactly this before polling
            // (without it, 60 s per QP). Also when the QP was in error
            // already: a drain asks again.
            // SAFETY: the QP is live for the call (contract above); the
            // helper does nothing for a QP without an SRQ, and ib_core's
            // event handlers may be called from a verb.
            unsafe { bindings::rxud_ib_qp_last_wqe_reached(qp) };
        }
        to_c(r)
    }

    /// `ib_device_ops.post_send`. User QPs ring the doorbell with no work
    /// request (their WQEs are in the shared send ring); kernel consumers
    /// pass a list, each entry of which the driver queues
    /// ([`DeviceOps::post_send`]) before one doorbell for the lot.
    ///
    /// # Safety
    ///
    /// Called by ib_core with a live QP of ours, `wr` NULL or a list of
    /// valid work requests, and `bad_wr` NULL or valid for a write.
    pub(super) unsafe extern "C" fn post_send(
        qp: *mut bindings::ib_qp,
        wr: *const bindings::ib_send_wr,
        bad_wr: *mut *const bindings::ib_send_wr,
    ) -> kernel::ffi::c_int {
        // SAFETY: per the function's contract.
        let (dev, data, to) = unsafe {
            (
                Device::<T>::from_raw((*qp).device),
                Object::<bindings::ib_qp, T::Qp>::data_of(qp),
                // XUD (rxud's one driver QP type) requests are addressed
                // as UD ones, its WRITEs with remote memory besides.
                match (*qp).qp_type {
                    bindings::IB_QPT_UD | bindings::IB_QPT_GSI => Addressing::Datagram,
                    bindings::IB_QPT_DRIVER => Addressing::Xud,
                    _ => Addressing::Connected,
                },
            )
        };
        if wr.is_null() {
            return to_c(T::post_send_doorbell(dev, data));
        }
        // A user QP's work requests are in its ring. uverbs' legacy
        // POST_SEND command would hand us a list built from user data,
        // whose SGEs (inline ones included) hold user addresses: refused,
        // as the kernel-consumer contract below does not hold for them.
        // SAFETY: `qp` is live (contract).
        if !unsafe { (*qp).uobject }.is_null() {
            if !bad_wr.is_null() {
                // SAFETY: per the function's contract.
                unsafe { *bad_wr = wr };
            }
            return EINVAL.to_errno();
        }
        // SAFETY: per the function's contract, `wr` is a valid list whose
        // entries are what their opcodes and the QP type say (a kernel
        // consumer's, checked above).
        let posted = unsafe {
            super::wr::post_list(
                wr,
                bad_wr,
                |w| w.next,
                |w| T::post_send(dev, data, &SendWr::<T>::from_raw(w, to)),
            )
        };
        // What was queued before a failure goes out too.
        let rung = T::post_send_doorbell(dev, data);
        to_c(posted.and(rung))
    }

    /// `ib_device_ops.post_recv`: kernel consumers' receive lists (user
    /// QPs post into their shared receive ring and never come here).
    ///
    /// # Safety
    ///
    /// Called by ib_core with a live QP of ours, `wr` a list of valid
    /// receive work requests, and `bad_wr` NULL or valid for a write.
    pub(super) unsafe extern "C" fn post_recv(
        qp: *mut bindings::ib_qp,
        wr: *const bindings::ib_recv_wr,
        bad_wr: *mut *const bindings::ib_recv_wr,
    ) -> kernel::ffi::c_int {
        // SAFETY: per the function's contract.
        let (dev, data, user) = unsafe {
            (
                Device::<T>::from_raw((*qp).device),
                Object::<bindings::ib_qp, T::Qp>::data_of(qp),
                !(*qp).uobject.is_null(),
            )
        };
        // A user QP's receives are in its ring (see `post_send`).
        if user {
            if !bad_wr.is_null() {
                // SAFETY: per the function's contract.
                unsafe { *bad_wr = wr };
            }
            return EINVAL.to_errno();
        }
        // SAFETY: per the function's contract.
        to_c(unsafe {
            super::wr::post_list(
                wr,
                bad_wr,
                |w| w.next,
                |w| T::post_recv(dev, data, &RecvWr::from_raw(w)),
            )
        })
    }

    /// `ib_device_ops.attach_mcast`.
    ///
    /// # Safety
    ///
    /// Called by ib_core in process context with a live QP of ours and the
    /// group's GID, valid for the call (`lid` is InfiniBand's; RoCE has
    /// none).
    pub(super) unsafe extern "C" fn attach_mcast(
        qp: *mut bindings::ib_qp,
        gid: *mut bindings::ib_gid,
        _lid: u16,
    ) -> kernel::ffi::c_int {
        // SAFETY: per the function's contract.
        unsafe { Self::mcast_call(qp, gid, T::attach_mcast) }
    }

    /// Calls `f` with the device, the QP's data and the group GID of an
    /// attach or detach.
    ///
    /// # Safety
    ///
    /// As [`Self::attach_mcast`].
    unsafe fn mcast_call(
        qp: *mut bindings::ib_qp,
        gid: *mut bindings::ib_gid,
        f: fn(&Device<T>, &T::Qp, &[u8; 16]) -> Result,
    ) -> kernel::ffi::c_int {
        // SAFETY: `qp` is a live QP of ours and `gid` is valid for the
        // call, per the caller's contract.
        let (dev, data, mgid) = unsafe {
            (
                Device::<T>::from_raw((*qp).device),
                Object::<bindings::ib_qp, T::Qp>::data_of(qp),
                (*gid).raw,
            )
        };
        to_c(f(dev, data, &mgid))
    }

    /// `ib_device_ops.detach_mcast`.
    ///
    /// # Safety
    ///
    /// As [`Self::attach_mcast`].
    pub(super) unsafe extern "C" fn detach_mcast(
        qp: *mut bindings::ib_qp,
        gid: *mut bindings::ib_gid,
        _lid: u16,
    ) -> kernel::ffi::c_int {
        // SAFETY: per the function's contract.
        unsafe { Self::mcast_call(qp, gid, T::detach_mcast) }
    }

    /// `ib_device_ops.query_qp`.
    ///
    /// # Safety
    ///
    /// Called by ib_core in process context with a live QP of ours and two
    /// structs to fill, exclusively ours for the call.
    pub(super) unsafe extern "C" fn query_qp(
        qp: *mut bindings::ib_qp,
        attr: *mut bindings::ib_qp_attr,
        _mask: kernel::ffi::c_int,
        init: *mut bindings::ib_qp_init_attr,
    ) -> kernel::ffi::c_int {
        // SAFETY: per the function's contract.
        let (dev, data) = unsafe {
            (
                Device::<T>::from_raw((*qp).device),
                Object::<bindings::ib_qp, T::Qp>::data_of(qp),
            )
        };
        // Every field is reported whatever the mask, as the IB spec allows.
        let q = match T::query_qp(dev, data) {
            Ok(q) => q,
            Err(e) => return e.to_errno(),
        };
        // SAFETY: per the function's contract, `attr` and `init` are ours
        // to write and `qp` is live.
        unsafe {
            q.attr.to_raw(&mut *attr);
            let i = &mut *init;
            i.qp_type = q.qp_type.to_raw();
            q.cap.to_raw(&mut i.cap);
            i.sq_sig_type = if q.sq_sig_all {
                bindings::IB_SIGNAL_ALL_WR
            } else {
                bindings::IB_SIGNAL_REQ_WR
            };
            i.send_cq = (*qp).send_cq;
            i.recv_cq = (*qp).recv_cq;
            i.srq = (*qp).srq;
        }
        0
    }
}
