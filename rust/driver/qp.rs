// SPDX-License-Identifier: GPL-2.0

//! Queue pairs: creation with their rings, modify (the IB state machine;
//! the transition table is ib_core's) and query, destruction. What the
//! attributes may be, checked against rxud's limits (which are what
//! `query_device` reports), is in `qp/config.rs`; each transport's own
//! state, fixed by the QP's type, in `qp/transport.rs`.

use super::ah::Destination;
use super::cq::CqCore;
use super::device::{RxudDevice, MAX_INLINE_DATA, MAX_QP_WR, MAX_SGE};
use super::flight::TxFlight;
use super::mr::MrTable;
use super::rc::{self, Path, RcAttrs, RcState};
use super::ring::{Ring, WorkQueue};
use super::rx::RxPort;
use super::srq::SrqCore;
use super::table::{IndexTable, Reservation, Start};
use super::xud::XudState;

mod config;
mod transport;
use crate::abi::{
    create_qp, opcode, recv_wqe_slot_size, send_flags, send_wqe_slot_size, status, wc_opcode, Cqe,
    CreateQpReq, CreateQpResp, RecvWqe, SendWqe, XudParams, SEND_WQE_HEADER_SIZE, SGE_SIZE,
};
use crate::ib::{
    qp::{transition_is_valid, QpCreateFlags},
    Details, QpAttr, QpAttrMask, QpCap, QpEvent, QpEvents, QpHandle, QpInitAttr, QpQuery, QpState,
    QpType, UData,
};
use crate::kext::bh_work::{BhWork, HasBhWork};
use crate::kext::timer::{HasTimer, Timer};
use crate::net::NetDeviceRef;
use crate::proto::xud;
pub(crate) use config::LiveConfig;
use config::{xud_transition_is_valid, QpConfig};
use core::sync::atomic::{AtomicU16, Ordering};
use kernel::{
    c_str, new_mutex,
    prelude::*,
    sync::{Arc, Mutex},
};
pub(crate) use transport::{Datagram, Queued};
use transport::{HeldNetdev, QpTransport};

/// First QP number handed out: 0 and 1 are the special QPs, and IB
/// reserves a few more below 16 in practice (rxe does the same).
pub(crate) const FIRST_QPN: u32 = 16;

/// What a creator asks for with an `IB_QPT_DRIVER` QP, or the XUD bit or
/// flag on another type: XUD with its parameters, or the errno refusing
/// it (`EINVAL`: not an XUD QP, or XUD on another type, or parameters out
/// of range). `None` for an ordinary QP. User processes ask with the
/// request's XUD bit, kernel consumers with [`QpCreateFlags::XUD`].
fn xud_params(
    qp_type: QpType,
    req: &CreateQpReq,
    flags: QpCreateFlags,
    kernel: bool,
) -> Result<Option<XudParams>> {
    let bit = req.comp_mask & create_qp::XUD != 0;
    let flag = flags.contains(QpCreateFlags::XUD);
    if qp_type != QpType::Xud {
        return if bit || flag { Err(EINVAL) } else { Ok(None) };
    }
    match (kernel, bit, flag) {
        (false, true, false) => XudParams::new(req.max_peers, req.ack_every)
            .map(Some)
            .map_err(|_| EINVAL),
        // No request: the defaults.
        (true, false, true) => Ok(Some(XudParams::DEFAULT)),
        // A driver-defined QP of no type rxud defines.
        _ => Err(EINVAL),
    }
}

/// Receives an XUD QP can hold claimed at once, at least.
const XUD_MIN_CLAIMS: u32 = 64;

/// Receives an XUD QP can hold claimed at once: as many as its receive
/// queue or SRQ can hold (each open SEND or WRITE_IMM message holds one)
/// when its XUD state is made (RESET to INIT): an SRQ resized later does
/// not change it.
fn xud_claims(cap: &QpCap, srq: Option<&SrqCore>) -> u32 {
    let srq_slots = srq.map(|s| s.slot_count()).unwrap_or(0);
    cap.max_recv_wr.max(srq_slots).max(XUD_MIN_CLAIMS)
}

/// How long destroying a QP waits for its packets below IP to drain.
const QP_DRAIN_WAIT_MS: u32 = 1000;
/// The QP number of the GSI QP (IBTA 3.5.1; one per port, rxud has one).
pub(crate) const GSI_QPN: u32 = 1;

/// A device's QPs by number: the GSI QP at [`GSI_QPN`], the others from
/// [`FIRST_QPN`] on. Any context.
pub(crate) struct QpTable {
    gsi: Arc<IndexTable<QpCore>>,
    numbered: Arc<IndexTable<QpCore>>,
}

impl QpTable {
    pub(crate) fn new(max: u32) -> Result<Arc<Self>> {
        Ok(Arc::new(
            Self {
                gsi: IndexTable::new_rcu(GSI_QPN, 1, Start::Base)?,
                numbered: IndexTable::new_rcu(FIRST_QPN, max, Start::Random)?,
            },
            GFP_KERNEL,
        )?)
    }

    fn table(&self, qpn: u32) -> &IndexTable<QpCore> {
        if qpn == GSI_QPN {
            &self.gsi
        } else {
            &self.numbered
        }
    }

    /// A number for a new QP of type `ty`; `ENOMEM` when none is left
    /// (for GSI: when the port has its GSI QP already).
    fn reserve(&self, ty: QpType) -> Result<Reservation<'_, QpCore>> {
        match ty {
            QpType::Gsi => self.gsi.reserve(),
            _ => self.numbered.reserve(),
        }
    }

    /// The QP numbered `qpn`, if any.
    pub(crate) fn get(&self, qpn: u32) -> Option<Arc<QpCore>> {
        self.table(qpn).get(qpn)
    }

    /// Takes the QP numbered `qpn` out. An XUD QP's number is held for
    /// [`xud::QPN_HOLD_NS`] (xud.rst, rule 5: no peer may still hold a
    /// stream for it when another QP gets it).
    fn remove(&self, qpn: u32, ty: QpType) -> Option<Arc<QpCore>> {
        match ty {
            QpType::Xud => self.table(qpn).remove_held(qpn, xud::QPN_HOLD_NS),
            _ => self.table(qpn).remove(qpn),
        }
    }

    /// Most QPs other than the GSI QP.
    pub(crate) fn max(&self) -> u32 {
        self.numbered.max()
    }

    /// Calls `f` on every QP (see [`IndexTable::for_each`]). Context:
    /// process.
    pub(crate) fn for_each(&self, mut f: impl FnMut(&Arc<QpCore>)) {
        self.gsi.for_each(&mut f);
        self.numbered.for_each(f);
    }
}

/// The part of a QP the data path shares (looked up by QP number).
#[pin_data]
pub(crate) struct QpCore {
    /// RC and XUD retransmission and RNR waits; any QP's doorbell rung
    /// where packets cannot be sent (hard irq).
    #[pin]
    rto: Timer<QpCore>,
    qpn: u32,
    qp_type: QpType,
    /// Made by a kernel consumer (its queues are posted through
    /// `post_send`/`post_recv`, never mapped by a process).
    kernel: bool,
    /// How kernel completions name the QP.
    handle: QpHandle,
    /// Its asynchronous events: raised only under the RC lock while the
    /// connection state exists (see [`crate::ib::QpEvents`]).
    events: QpEvents,
    cap: QpCap,
    sq_sig_all: bool,
    /// The PD's identity: MRs used by the QP must be of the same PD.
    pub(super) pd: u32,
    pub(super) sq: Pin<KBox<WorkQueue>>,
    /// `None` with an SRQ.
    pub(super) rq: Option<Pin<KBox<WorkQueue>>>,
    pub(super) send_cq: Arc<CqCore>,
    pub(super) recv_cq: Arc<CqCore>,
    pub(super) srq: Option<Arc<SrqCore>>,
    /// Serialises modify and query (ib_core lets them run concurrently).
    #[pin]
    config: Mutex<QpConfig>,
    /// What the packet paths read of the configuration, without the
    /// mutex (they may run in softirq): set by `modify` after each change.
    pub(super) live: LiveConfig,
    /// The device's MRs, for the keys the QP's work requests name.
    pub(super) mrs: Arc<MrTable>,
    /// The device's address vectors, for the AHs UD work requests name.
    pub(super) ahs: Arc<IndexTable<Destination>>,
    /// IPv4 identification of the QP's next datagram (see `next_ip_id`).
    ip_id: AtomicU16,
    /// The device's port: its counters.
    pub(super) port: Arc<RxPort>,
    /// The transport's own state, by QP type (`qp/transport.rs`).
    transport: QpTransport,
    /// Wakes the RC/UC/XUD sender when its packets below IP have drained.
    #[pin]
    wake: BhWork<QpCore>,
}

impl HasTimer for QpCore {
    fn timer(&self) -> &Timer<Self> {
        &self.rto
    }

    /// The QP's timer fired: RC retransmission or RNR wait, or (any type)
    /// a doorbell rung where packets could not be sent (hard irq).
    /// Context: softirq.
    fn timer_fired(qp: Arc<Self>) {
        match qp.qp_type {
            QpType::Rc | QpType::Uc => rc::timer_fired(qp),
            QpType::Ud | QpType::Gsi => super::tx::send_queued(&qp),
            QpType::Xud => super::xud::timer_fired(qp),
        }
    }
}

impl HasBhWork for QpCore {
    fn bh_work(&self) -> &BhWork<Self> {
        &self.wake
    }

    fn bh_work_run(qp: Arc<Self>) {
        super::flight::wake(qp)
    }
}

impl QpCore {
    pub(crate) fn qpn(&self) -> u32 {
        self.qpn
    }

    /// The IPv4 identification of the QP's next datagram: in sequence per
    /// QP from a random start (DF datagrams, RFC 6864), so that a run of
    /// them can go to IP as one train (`proto::wire::train`).
    pub(crate) fn next_ip_id(&self) -> u16 {
        self.ip_id.fetch_add(1, Ordering::Relaxed)
    }

    /// Writes the send completion of work request `w` with `code` and
    /// `len` bytes, if it was signaled (or the QP signals all) or failed.
    /// A full CQ loses the completion (its owner gets an overflow event).
    pub(crate) fn complete_send(&self, w: &SendWqe, code: u32, len: u32) {
        let signaled = self.sq_sig_all || w.send_flags & send_flags::SIGNALED != 0;
        if !signaled && code == status::SUCCESS {
            return;
        }
        let op = match w.opcode {
            opcode::RDMA_WRITE | opcode::RDMA_WRITE_WITH_IMM => wc_opcode::RDMA_WRITE,
            opcode::REG_MR => wc_opcode::REG_MR,
            opcode::LOCAL_INV => wc_opcode::LOCAL_INV,
            opcode::BIND_MW => wc_opcode::BIND_MW,
            _ => wc_opcode::SEND,
        };
        let cqe = Cqe {
            wr_id: w.wr_id,
            status: code,
            opcode: op,
            byte_len: len,
            qp_num: self.qpn,
            ..Default::default()
        };
        let _ = self.send_cq.push(&cqe, false);
    }

    /// Holds the QP's CQs until the [`HeldCqs`] returned goes.
    pub(crate) fn hold_cqs(self: &Arc<Self>) -> HeldCqs {
        HeldCqs::new(self.clone())
    }

    pub(crate) fn qp_type(&self) -> QpType {
        self.qp_type
    }

    pub(crate) fn cap(&self) -> &QpCap {
        &self.cap
    }

    pub(crate) fn sq_sig_all(&self) -> bool {
        self.sq_sig_all
    }

    pub(crate) fn is_kernel(&self) -> bool {
        self.kernel
    }

    pub(crate) fn handle(&self) -> QpHandle {
        self.handle
    }

    /// The data path put the QP in the error state on its own (IBTA
    /// 10.3.1): posts from now on are flushed, packets are no longer
    /// taken, `query_qp` says ERR and `modify_qp` starts from ERR; its
    /// owner hears why (`event`). The caller has flushed the transport's
    /// work; this flushes what is still in the rings. Context: any, under
    /// the transport's lock (see `events`).
    pub(crate) fn fail(&self, event: Option<QpEvent>) {
        self.live.fail();
        self.flush();
        if let Some(e) = event {
            self.events.raise(e);
        }
    }

    /// Whether `cq` is one of this QP's CQs.
    pub(crate) fn uses_cq(&self, cq: &CqCore) -> bool {
        core::ptr::eq(&*self.send_cq, cq) || core::ptr::eq(&*self.recv_cq, cq)
    }

    /// The netdev a UD, GSI or XUD QP sends on
    /// ([`transport::HeldNetdev`]). Any context.
    pub(crate) fn ud_netdev(&self) -> Option<NetDeviceRef> {
        self.transport.netdev().and_then(HeldNetdev::get)
    }

    /// An RC or UC QP's connection state.
    pub(crate) fn rc(&self) -> Option<&Queued<RcState>> {
        match &self.transport {
            QpTransport::Connected(c) => Some(c),
            _ => None,
        }
    }

    /// An XUD QP's state.
    pub(crate) fn xud(&self) -> Option<&Queued<XudState>> {
        match &self.transport {
            QpTransport::Xud(x) => Some(x.queued()),
            _ => None,
        }
    }

    /// A UD or GSI QP's state.
    pub(crate) fn datagram(&self) -> Option<&Datagram> {
        match &self.transport {
            QpTransport::Datagram(d) => Some(d),
            _ => None,
        }
    }

    /// The transmit budget of an RC, UC or XUD QP.
    pub(crate) fn flight(&self) -> Option<&TxFlight> {
        self.transport.flight()
    }

    /// Takes the next receive WQE, from the QP's receive queue or its SRQ
    /// (which may raise the SRQ limit event). `Ok(false)` if none is
    /// posted. Any context.
    pub(crate) fn pop_recv(&self, out: &mut [u8]) -> Result<bool> {
        match (&self.rq, &self.srq) {
            (Some(rq), _) => rq.pop(out),
            (None, Some(srq)) => srq.pop(out),
            (None, None) => Ok(false),
        }
    }

    /// Gives back the netdev an RC QP sends on (see
    /// `RxudDevice::release_netdev`). Any context.
    pub(crate) fn release_netdev(self: &Arc<Self>) {
        let held = self.hold_cqs();
        let gone = self
            .rc()
            .and_then(|c| c.lock(&held).as_deref_mut().and_then(RcState::detach));
        drop(gone);
        let gone = self.transport.netdev().and_then(HeldNetdev::take);
        drop(gone);
    }

    /// Completes every posted work request with a flush error, as a QP
    /// entering the error state must (IBTA 10.3.1): sends on the send CQ,
    /// receives (unless from an SRQ, which outlives the QP) on the receive
    /// CQ. Any context.
    pub(crate) fn flush(&self) {
        let mut slot = [0u8; 64];
        let flushed = |wr_id: u64, opcode: u32| Cqe {
            wr_id,
            status: status::WR_FLUSH_ERR,
            opcode,
            qp_num: self.qpn,
            ..Default::default()
        };
        while let Ok(true) = self.sq.pop(&mut slot) {
            let _ = self.send_cq.push(
                &flushed(SendWqe::decode(&slot).wr_id, wc_opcode::SEND),
                false,
            );
        }
        if let Some(rq) = &self.rq {
            while let Ok(true) = rq.pop(&mut slot) {
                let _ = self.recv_cq.push(
                    &flushed(RecvWqe::decode(&slot).wr_id, wc_opcode::RECV),
                    false,
                );
            }
        }
    }
}

/// A QP's CQs held ([`super::cq::CqCore::hold`]) for as long as this
/// lives: the completions written meanwhile are published, and the CQs'
/// completion events raised, when it goes. The QP's transport lock is
/// taken only with one ([`Queued::lock`]), which must outlive the lock's
/// guard: so a completion handler never runs under that lock. A kernel
/// consumer's handler may poll its CQ and post to the same QP (as krping
/// does); the post takes the lock again. The receive path holds one for a
/// run of datagrams to the QP (`rx.rs`), the other entries to the lock
/// for their own call.
pub(crate) struct HeldCqs {
    qp: Arc<QpCore>,
    /// Released already ([`HeldCqs::release`]).
    released: bool,
}

impl HeldCqs {
    /// Holds `qp`'s CQs.
    pub(crate) fn new(qp: Arc<QpCore>) -> Self {
        qp.send_cq.hold();
        qp.recv_cq.hold();
        Self {
            qp,
            released: false,
        }
    }

    pub(crate) fn qp(&self) -> &Arc<QpCore> {
        &self.qp
    }

    /// Ends the hold now; how many entries that published.
    pub(crate) fn release(mut self) -> u32 {
        self.released = true;
        self.qp.send_cq.release() + self.qp.recv_cq.release()
    }
}

impl Drop for HeldCqs {
    fn drop(&mut self) {
        if !self.released {
            self.qp.send_cq.release();
            self.qp.recv_cq.release();
        }
    }
}

pub(crate) struct RxudQp {
    core: Arc<QpCore>,
    table: Arc<QpTable>,
}

impl Drop for RxudQp {
    fn drop(&mut self) {
        // The number is free again; the core goes when its last user does.
        // Receives that found the QP run in softirq under RCU, and the
        // table's removal waits for a grace period after unpublishing it:
        // none is still using it (or its CQs, which ib_core may destroy
        // once this returns).
        drop(self.table.remove(self.core.qpn, self.core.qp_type()));
        // ib_core frees the user context after its objects' destroys, and
        // packets below IP may keep the core (and its rings) past that:
        // the rings leave the context now.
        drop(self.core.sq.ring().unmap());
        if let Some(rq) = &self.core.rq {
            drop(rq.ring().unmap());
        }
        // No receive can arm the timer now, nor a doorbell (ib_core does
        // not post to a QP being destroyed). The wake-up goes first: it
        // runs the sender, which may arm the timer; the timer's sender
        // only queues packets whose destructors find the wake-up shut.
        BhWork::shutdown(&self.core);
        Timer::shutdown(&self.core);
        let held = self.core.hold_cqs();
        if let Some(c) = self.core.rc() {
            let state = c.lock(&held).take();
            drop(state);
        }
        if let Some(x) = self.core.xud() {
            let state = x.lock(&held).take();
            drop(state);
        }
        drop(held);
        let ndev = self.core.transport.netdev().and_then(HeldNetdev::take);
        drop(ndev);
        // Packets still below IP hold the core; they normally drain in
        // microseconds. Waiting a little lets the core go here, in
        // process context, rather than from the last destructor.
        for _ in 0..QP_DRAIN_WAIT_MS / 10 {
            if self.core.flight().map_or(0, TxFlight::in_flight) == 0 {
                break;
            }
            crate::kext::timer::sleep_ms(10);
        }
    }
}

/// The send and receive rings of a new QP and the capacities they give.
struct QpRings {
    sq: Pin<KBox<WorkQueue>>,
    /// `None` with an SRQ.
    rq: Option<Pin<KBox<WorkQueue>>>,
    cap: QpCap,
}

impl QpRings {
    /// Checks what the creator asks for against rxud's limits.
    fn check_caps(attr: &QpInitAttr<'_, RxudDevice>) -> Result {
        let c = &attr.cap;
        if c.max_send_wr > MAX_QP_WR
            || c.max_send_sge > MAX_SGE
            || c.max_inline_data > MAX_INLINE_DATA
        {
            return Err(EINVAL);
        }
        if attr.srq.is_none() && (c.max_recv_wr > MAX_QP_WR || c.max_recv_sge > MAX_SGE) {
            return Err(EINVAL);
        }
        Ok(())
    }

    /// Allocates the rings (mappable by the creator's context, if any).
    fn new(attr: &QpInitAttr<'_, RxudDevice>, udata: &UData) -> Result<Self> {
        Self::check_caps(attr)?;
        let c = &attr.cap;
        let sges = c.max_send_sge.max(1);
        let send_slot = send_wqe_slot_size(sges, c.max_inline_data);
        let sq = Ring::new(udata.ucontext(), c.max_send_wr.max(1), MAX_QP_WR, send_slot)?;
        // The slot may hold more than asked for: report what fits.
        let send_body = send_slot - SEND_WQE_HEADER_SIZE;
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
                let rq = Ring::new(
                    udata.ucontext(),
                    c.max_recv_wr.max(1),
                    MAX_QP_WR,
                    recv_wqe_slot_size(sges),
                )?;
                cap.max_recv_wr = rq.geometry().slot_count();
                cap.max_recv_sge = sges;
                Some(KBox::pin_init(WorkQueue::new(rq), GFP_KERNEL)?)
            }
        };
        let sq = KBox::pin_init(WorkQueue::new(sq), GFP_KERNEL)?;
        Ok(Self { sq, rq, cap })
    }
}

impl RxudQp {
    pub(crate) fn core(&self) -> &Arc<QpCore> {
        &self.core
    }

    pub(crate) fn new(
        dev: &RxudDevice,
        pd: u32,
        attr: &QpInitAttr<'_, RxudDevice>,
        udata: &UData,
    ) -> Result<(Self, u32, QpCap)> {
        let req: CreateQpReq = udata.read()?;
        let kernel = udata.ucontext().is_none();
        if req.comp_mask & !create_qp::KNOWN != 0
            || !attr.create_flags.difference(QpCreateFlags::XUD).is_empty()
            || attr.has_unsupported
        {
            return Err(crate::ib::eopnotsupp());
        }
        let xud = xud_params(attr.qp_type, &req, attr.create_flags, kernel)?;
        // The GSI QP is ib_core's MAD layer's.
        if attr.qp_type == QpType::Gsi && !kernel {
            return Err(EINVAL);
        }
        let (Some(send_cq), Some(recv_cq)) = (attr.send_cq, attr.recv_cq) else {
            return Err(EINVAL);
        };
        let QpRings { sq, rq, cap } = QpRings::new(attr, udata)?;
        let xud_state = match xud {
            Some(p) => Some((
                p,
                XudState::new(
                    p,
                    cap.max_send_wr,
                    sq.ring().geometry().slot_size(),
                    xud_claims(&cap, attr.srq.map(|s| &**s.core())),
                )?,
            )),
            None => None,
        };
        let transport = QpTransport::new(attr.qp_type, xud_state)?;
        let resp = CreateQpResp {
            comp_mask: 0,
            sq: sq.ring().info(),
            rq: rq.as_ref().map(|r| r.ring().info()).unwrap_or_default(),
        };
        let number = dev.qps.reserve(attr.qp_type)?;
        let qpn = number.id();
        let core = Arc::pin_init(
            pin_init!(QpCore {
                qpn,
                qp_type: attr.qp_type,
                kernel,
                handle: attr.handle,
                events: attr.events.clone(),
                cap,
                sq_sig_all: attr.sq_sig_all,
                pd,
                sq,
                rq,
                send_cq: send_cq.core().clone(),
                recv_cq: recv_cq.core().clone(),
                srq: attr.srq.map(|s| s.core().clone()),
                config <- new_mutex!(QpConfig::reset(attr.qp_type), "rxud:qp_config"),
                live: LiveConfig::new(),
                mrs: dev.mr_keys.clone(),
                ahs: dev.ahs.clone(),
                ip_id: AtomicU16::new(crate::kext::random::u64() as u16),
                port: dev.rx.clone(),
                rto <- Timer::new(),
                transport,
                wake <- BhWork::new(),
            }),
            GFP_KERNEL,
        )?;
        udata.write(&resp)?;
        number.fill(core.clone());
        Ok((
            Self {
                core,
                table: dev.qps.clone(),
            },
            qpn,
            cap,
        ))
    }

    /// Applies a `modify_qp`: the transition must be one the IB state
    /// machine allows with exactly these attributes, and every value must
    /// be in range; otherwise nothing changes.
    pub(crate) fn modify(&self, attr: &QpAttr, ndev: Option<NetDeviceRef>) -> Result {
        // Taken before the configuration's mutex: the flushes' completion
        // events are raised once it is dropped too.
        let held = self.core.hold_cqs();
        let mut cfg = self.core.config.lock();
        let mask = attr.mask;
        let cur = if mask.contains(QpAttrMask::CUR_STATE) {
            attr.cur_state.ok_or(EINVAL)?
        } else if self.core.live.in_error() {
            // In ERROR by the data path (`QpCore::fail`) or by modify.
            QpState::Err
        } else {
            cfg.state
        };
        let next = if mask.contains(QpAttrMask::STATE) {
            attr.state.ok_or(EINVAL)?
        } else {
            cur
        };
        let valid = match self.core.qp_type {
            QpType::Xud => xud_transition_is_valid(cur, next, mask),
            ty => transition_is_valid(cur, next, ty, mask),
        };
        if !valid {
            return Err(EINVAL);
        }
        // Alternate paths (APM) and rate limits are not supported.
        if mask
            .intersects(QpAttrMask::ALT_PATH | QpAttrMask::PATH_MIG_STATE | QpAttrMask::RATE_LIMIT)
        {
            return Err(crate::ib::eopnotsupp());
        }
        let new = cfg.apply(attr, next)?;
        match self.core.qp_type {
            QpType::Rc | QpType::Uc => self.connect(&held, cur, &new, attr, ndev)?,
            // XUD sends per AH as UD does, on the netdev held from RTS.
            QpType::Ud | QpType::Gsi | QpType::Xud => {
                // XUD answers what it receives: it needs the netdev from
                // RTR on.
                let from_rtr = self.core.qp_type == QpType::Xud && next == QpState::Rtr;
                let keep = from_rtr || matches!(next, QpState::Rts | QpState::Sqd | QpState::Sqe);
                if let Some(held) = self.core.transport.netdev() {
                    if keep {
                        held.keep(ndev)?;
                    } else {
                        drop(held.take());
                    }
                }
                if self.core.qp_type == QpType::Xud {
                    self.xud_transition(&held, next, &new)?;
                }
            }
        }
        *cfg = new;
        self.core.live.publish(&cfg);
        drop(cfg);
        if next == QpState::Err {
            // XUD after the state is published: nothing is admitted or
            // claimed in between.
            if let Some(x) = self.core.xud() {
                if let Some(st) = x.lock(&held).as_deref_mut() {
                    super::xud::flush(&self.core, st);
                }
            }
            self.core.flush();
        }
        Ok(())
    }

    /// The XUD side of a transition: the retransmission attributes into
    /// the senders; at ERROR every message fails and posted work flushes;
    /// at RESET the state starts again (a new incarnation: peers that
    /// still send to the old one are told so, rule 1).
    fn xud_transition(&self, held: &HeldCqs, next: QpState, new: &QpConfig) -> Result {
        let QpTransport::Xud(x) = &self.core.transport else {
            return Ok(());
        };
        // The transmit budget for XUD's packets on the netdev (held from
        // RTS on).
        if let Some(payload) = self
            .core
            .ud_netdev()
            .and_then(|n| xud::payload_per_packet(n.mtu()))
        {
            x.queued().flight().set_mtu(payload);
        }
        let fresh = match (next, x.params()) {
            (QpState::Reset, p) => Some(XudState::new(
                p,
                self.core.cap.max_send_wr,
                self.core.sq.ring().geometry().slot_size(),
                xud_claims(&self.core.cap, self.core.srq.as_deref()),
            )?),
            _ => None,
        };
        let mut g = x.queued().lock(held);
        let old = match fresh {
            Some(f) => g.replace(f),
            None => None,
        };
        if let Some(st) = g.as_deref_mut() {
            st.set_attrs(new.timeout, new.retry_cnt, new.rnr_retry, new.min_rnr_timer);
        }
        drop(g);
        drop(old);
        Ok(())
    }

    /// The RC side of a transition: the connection state is made at RTR,
    /// the send side added at RTS, flushed at ERROR, dropped at RESET.
    /// Fails (changing nothing) only while allocating, or without an
    /// address vector or netdev at RTR.
    fn connect(
        &self,
        held: &HeldCqs,
        cur: QpState,
        new: &QpConfig,
        attr: &QpAttr,
        ndev: Option<NetDeviceRef>,
    ) -> Result {
        let Some(conn) = self.core.rc() else {
            return Ok(());
        };
        let attrs = RcAttrs {
            mtu: new.path_mtu,
            access: new.access,
            sq_psn: new.sq_psn,
            rq_psn: new.rq_psn,
            retry_cnt: new.retry_cnt,
            rnr_retry: new.rnr_retry,
            timeout: new.timeout,
            min_rnr_timer: new.min_rnr_timer,
            max_rd_atomic: new.max_rd_atomic,
            max_dest_rd_atomic: new.max_dest_rd_atomic,
        };
        let uc = self.core.qp_type == QpType::Uc;
        let made = if cur == QpState::Init && new.state == QpState::Rtr {
            let av = new.av.ok_or(EINVAL)?;
            let path = Path {
                av,
                dest_qpn: new.dest_qpn,
                sport: super::tx::source_port(self.core.qpn),
            };
            conn.flight().set_mtu(attrs.mtu.bytes());
            Some(RcState::new(path, ndev.ok_or(ENODEV)?, &attrs, uc)?)
        } else {
            None
        };
        let mut sender = if cur == QpState::Rtr && new.state == QpState::Rts {
            let slot = self.core.sq.ring().geometry().slot_size();
            Some(rc::SendSide::new(
                uc,
                &attrs,
                self.core.cap.max_send_wr,
                slot,
            )?)
        } else {
            None
        };
        let (mut old, mut gone) = (None, None);
        let mut guard = conn.lock(held);
        if let Some(st) = made {
            old = guard.replace(st);
        }
        if let Some(st) = guard.as_deref_mut() {
            if let Some(s) = sender.take() {
                st.start_sending(s);
            }
            if attr.mask.contains(QpAttrMask::ACCESS_FLAGS) {
                st.set_access(new.access);
            }
            if new.state == QpState::Err {
                rc::enter_error(&self.core, st);
                gone = st.detach();
            }
        }
        if new.state == QpState::Reset {
            old = guard.take();
        }
        // Freed with the lock dropped (and interrupts back on).
        drop(guard);
        drop((old, gone, sender));
        Ok(())
    }

    /// The driver's details for `rdma resource show qp -d`: the state of
    /// the congestion control (Documentation/xud.rst, "Congestion
    /// control") of RC's requester, or of XUD's sending streams. Read
    /// under the QP's lock, written after it.
    pub(crate) fn details(&self, out: &mut Details) -> Result {
        let held = self.core.hold_cqs();
        let rc = rc::window(&held);
        let xud = super::xud::send_summary(&held);
        drop(held);
        if let Some(w) = rc {
            out.u32(c_str!("cc_window"), w.cwnd())?;
            out.u32(c_str!("cc_ssthresh"), w.ssthresh())?;
            out.u32(c_str!("cc_window_limit"), w.max())?;
            out.u32(c_str!("cc_alpha_per_1024"), w.alpha())?;
        }
        if let Some(x) = xud {
            out.u32(c_str!("send_streams"), x.streams)?;
            out.u32(c_str!("send_streams_stalled"), x.stalled)?;
            out.u32(c_str!("in_network"), x.in_network)?;
            out.u32(c_str!("cc_window_min"), x.window_min)?;
            out.u32(c_str!("cc_window_max"), x.window_max)?;
        }
        Ok(())
    }

    pub(crate) fn query(&self) -> QpQuery {
        let cfg = *self.core.config.lock();
        let held = self.core.hold_cqs();
        let (psns, failed) = match self.core.rc().map(|c| c.lock(&held)).as_deref() {
            Some(Some(st)) => {
                let (sq, rq) = st.psns();
                ((sq, Some(rq)), st.is_error())
            }
            _ => ((None, None), false),
        };
        // The data path moved the QP to ERROR (an error completion): the
        // configuration still says where modify_qp left it.
        // A CQ of the QP lost a completion: the QP is in error, whether or
        // not its data path has run since (it fails at its next step).
        let cq_lost = self.core.send_cq.overflowed() || self.core.recv_cq.overflowed();
        let state = if failed || cq_lost || self.core.live.in_error() {
            QpState::Err
        } else {
            cfg.state
        };
        let attr = QpAttr {
            mask: QpAttrMask::EMPTY,
            state: Some(state),
            cur_state: Some(state),
            path_mtu: Some(cfg.path_mtu),
            qkey: cfg.qkey,
            rq_psn: psns.1.unwrap_or(cfg.rq_psn).value(),
            sq_psn: psns.0.unwrap_or(cfg.sq_psn).value(),
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
        QpQuery {
            attr,
            qp_type: self.core.qp_type,
            cap: self.core.cap,
            sq_sig_all: self.core.sq_sig_all,
        }
    }
}
