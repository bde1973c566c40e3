// SPDX-License-Identifier: GPL-2.0

//! An rxud device: one ib_device with one RoCEv2 port on one netdev.

use super::ah::{Destination, RxudAh};
use super::context::RxudContext;
use super::counter::ObjectCounter;
use super::counters::RX_COUNTER_DESCS;
use super::cq::RxudCq;
use super::mcast::{self, McastGroups};
use super::mr::{MrTable, RxudMr, RxudMw, MAX_FAST_REG_PAGES};
use super::pd::RxudPd;
use super::qp::{QpTable, RxudQp};
use super::rx::RxPort;
use super::srq::RxudSrq;
use super::table::{IndexTable, Start};
use super::transport::{Attachment, Transports};
use super::Registry;
use crate::ib::{
    AccessFlags, AddressVector, Completion, CounterDesc, CqArm, CqEvents, CqInitAttr, Details,
    Device, DeviceAttr, DeviceCapFlags, DeviceOps, LinkLayer, MrKind, MwKind, PortAttr,
    PortCapFlags, PortImmutable, PortPhysState, PortState, QpAttr, QpCap, QpInitAttr, QpQuery,
    QpType, RecvWr, SendWr, SrqAttr, SrqEvents, SrqModify, UData, Umem, UserRange,
};
use crate::net::NetDevice;
use crate::proto::{mtu, wire::bth::DEFAULT_PKEY};
use core::sync::atomic::{AtomicU32, Ordering};
use kernel::{prelude::*, sync::Arc};

/// rxud devices have exactly one port, numbered 1 as in IB.
pub(crate) const PORT: u32 = 1;
/// RoCEv2 GID table size: one entry per IPv4/IPv6 address of the netdev
/// (ib_core fills it); as rxe.
pub(crate) const GID_TABLE_LEN: u32 = 1024;
/// Largest message a port accepts (IB's 2^31 limit).
pub(crate) const MAX_MSG_SIZE: u32 = 1 << 31;
/// IEEE OUI-less vendor id, as rxe reports (0xffffff: "no vendor").
pub(crate) const VENDOR_ID: u32 = 0xffffff;
/// Most protection domains per device.
pub(crate) const MAX_PD: u32 = 1 << 16;
/// Most memory regions per device.
pub(crate) const MAX_MR: u32 = 1 << 16;
/// Most memory windows per device (their keys share the MRs' table).
pub(crate) const MAX_MW: u32 = 1 << 14;
/// Most completion queues per device.
pub(crate) const MAX_CQ: u32 = 1 << 14;
/// Most entries of one CQ (64 bytes each: 4 MiB).
pub(crate) const MAX_CQE: u32 = 1 << 16;
/// Most work requests in one send or receive queue.
pub(crate) const MAX_QP_WR: u32 = 1 << 14;
/// Most scatter/gather elements per work request.
pub(crate) const MAX_SGE: u32 = 32;
/// Most bytes of inline data per send work request (fits in the slot of
/// a 32-SGE WR).
pub(crate) const MAX_INLINE_DATA: u32 = MAX_SGE * crate::abi::SGE_SIZE;
/// Most outstanding RDMA READ/atomic requests per QP, either direction.
pub(crate) const MAX_QP_RD_ATOM: u32 = 128;
/// Most shared receive queues per device.
pub(crate) const MAX_SRQ: u32 = 1 << 14;
/// Most work requests in one SRQ.
pub(crate) const MAX_SRQ_WR: u32 = 1 << 14;
/// Most scatter/gather elements per SRQ work request.
pub(crate) const MAX_SRQ_SGE: u32 = 32;
/// Most address handles per device.
pub(crate) const MAX_AH: u32 = 1 << 15;
/// Largest memory region: the whole 64-bit space, as for rxe.
pub(crate) const MAX_MR_SIZE: u64 = u64::MAX;

/// Per-device state. The ib_device and its netdev binding are ib_core's;
/// this is what rxud adds.
pub(crate) struct RxudDevice {
    /// The table that tracks this device; it drops us from it when ib_core
    /// frees the device.
    registry: Arc<Registry>,
    /// Node GUID (EUI-64 of the netdev's MAC at creation), wire order.
    guid: [u8; 8],
    pds: Arc<ObjectCounter>,
    mrs: Arc<ObjectCounter>,
    mws: Arc<ObjectCounter>,
    pub(super) cqs: Arc<ObjectCounter>,
    pub(super) srqs: Arc<ObjectCounter>,
    /// QPs by number (the data path's lookup).
    pub(super) qps: Arc<QpTable>,
    /// Address vectors by AH number.
    pub(super) ahs: Arc<IndexTable<Destination>>,
    /// MRs and memory windows by key (the data path's lkey/rkey lookup).
    pub(super) mr_keys: Arc<MrTable>,
    /// The 8-bit tag of the next MR key: a key reused for a new MR at the
    /// same index differs from the old one.
    next_key: AtomicU32,
    /// Identity of the next PD.
    next_pd: AtomicU32,
    /// Multicast groups of its UD QPs (shared with the receive path).
    mcast: Arc<McastGroups>,
    /// The receive side of the port: counters and (with the data path)
    /// delivery.
    pub(super) rx: Arc<RxPort>,
    /// The port's place on its namespace's UDP socket; closes the socket
    /// with the namespace's last device.
    _transport: Attachment,
}

impl RxudDevice {
    /// The netdev is being unregistered: connected QPs stop sending and
    /// drop their references to it (they are flushed with the device).
    pub(crate) fn release_netdev(&self) {
        self.qps.for_each(|qp| qp.release_netdev());
    }

    /// The state of a new device on `ndev`: its tables, and its port on
    /// the UDP socket of `ndev`'s namespace (`EADDRINUSE` if that port is
    /// taken: then nothing else is made).
    pub(crate) fn new(
        registry: Arc<Registry>,
        guid: [u8; 8],
        transports: &Arc<Transports>,
        ndev: &NetDevice,
    ) -> Result<Self> {
        let qps = QpTable::new(crate::kext::params::max_qp())?;
        let mr_keys = IndexTable::new_rcu(1, MAX_MR + MAX_MW, Start::Base)?;
        let mcast = Arc::pin_init(McastGroups::new(), GFP_KERNEL)?;
        let rx = RxPort::new(qps.clone(), mr_keys.clone(), mcast.clone())?;
        let transport = transports.attach(ndev, rx.clone())?;
        Ok(Self {
            registry,
            guid,
            rx,
            _transport: transport,
            pds: ObjectCounter::new(MAX_PD)?,
            mrs: ObjectCounter::new(MAX_MR)?,
            mws: ObjectCounter::new(MAX_MW)?,
            cqs: ObjectCounter::new(MAX_CQ)?,
            srqs: ObjectCounter::new(MAX_SRQ)?,
            qps,
            // AH number 0 is never used (rust/abi: `CreateAhResp`).
            ahs: IndexTable::new(1, MAX_AH)?,
            next_key: AtomicU32::new(1),
            next_pd: AtomicU32::new(1),
            mr_keys,
            mcast,
        })
    }
}

impl RxudDevice {
    /// The tag of a fresh MR key.
    fn new_key(&self) -> u32 {
        self.next_key.fetch_add(1, Ordering::Relaxed)
    }
}

fn check_port(port: u32) -> Result {
    if port == PORT {
        Ok(())
    } else {
        Err(EINVAL)
    }
}

#[vtable]
impl DeviceOps for RxudDevice {
    type Context = RxudContext;

    fn alloc_context(_dev: &Device<Self>, udata: &UData) -> Result<RxudContext> {
        RxudContext::new(udata)
    }

    fn disassociate_context(_ctx: &RxudContext) {
        // Nothing is left to undo. The context's QPs, CQs and SRQs are
        // destroyed, and each destroy took its rings out of the context
        // (`SharedMem::unmap`): a later mmap of their offsets fails. What
        // the process mapped before are vmalloc pages inserted with a
        // reference each (`remap_vmalloc_range`, no vm_ops of ours), so
        // its mappings keep live pages, which go when it unmaps them,
        // and nothing in them reaches the module once it is gone. No
        // destroy waits for the process.
    }

    type Pd = RxudPd;

    fn alloc_pd(dev: &Device<Self>, _udata: &UData) -> Result<RxudPd> {
        let d = dev.data();
        Ok(RxudPd::new(
            d.next_pd.fetch_add(1, Ordering::Relaxed),
            d.pds.take()?,
        ))
    }

    type Mr = RxudMr;

    fn reg_user_mr(
        dev: &Device<Self>,
        pd: &RxudPd,
        umem: Umem,
        iova: u64,
        access: AccessFlags,
        _udata: &UData,
    ) -> Result<(RxudMr, u32)> {
        let d = dev.data();
        let counted = d.mrs.take()?;
        RxudMr::user(
            &d.mr_keys,
            d.new_key(),
            pd.id(),
            umem,
            access,
            iova,
            counted,
        )
    }

    fn user_range(mr: &RxudMr) -> Option<UserRange> {
        mr.user_range().map(|(range, _)| range)
    }

    fn rereg_user_mr(
        dev: &Device<Self>,
        old: &RxudMr,
        pd: &RxudPd,
        umem: Umem,
        iova: u64,
        access: AccessFlags,
        _udata: &UData,
    ) -> Result<(RxudMr, u32)> {
        // The successor counts against the limit until `old` goes, right
        // after: at the limit, a re-registration fails with ENOMEM.
        let counted = dev.data().mrs.take()?;
        old.reregister_user(pd.id(), umem, access, iova, counted)
    }

    fn get_dma_mr(dev: &Device<Self>, pd: &RxudPd, access: AccessFlags) -> Result<(RxudMr, u32)> {
        let counted = dev.data().mrs.take()?;
        let d = dev.data();
        RxudMr::dma(&d.mr_keys, d.new_key(), pd.id(), access, counted)
    }

    fn alloc_mr(
        dev: &Device<Self>,
        pd: &RxudPd,
        kind: MrKind,
        max_pages: u32,
    ) -> Result<(RxudMr, u32)> {
        // Only page lists: no SG_GAPS or integrity capability is reported.
        if kind != MrKind::MemReg {
            return Err(EINVAL);
        }
        let counted = dev.data().mrs.take()?;
        let d = dev.data();
        RxudMr::fast_reg(&d.mr_keys, d.new_key(), pd.id(), max_pages, counted)
    }

    type Mw = RxudMw;

    fn alloc_mw(dev: &Device<Self>, pd: &RxudPd, kind: MwKind) -> Result<(RxudMw, u32)> {
        let d = dev.data();
        let counted = d.mws.take()?;
        RxudMw::new(&d.mr_keys, d.new_key(), pd.id(), kind, counted)
    }

    fn mr_clear_pages(mr: &RxudMr) -> Result {
        mr.clear_pages()
    }

    fn mr_add_page(mr: &RxudMr, addr: u64) -> Result {
        mr.add_page(addr)
    }

    type Cq = RxudCq;

    fn create_cq(
        dev: &Device<Self>,
        attr: &CqInitAttr,
        events: CqEvents,
        udata: &UData,
    ) -> Result<(RxudCq, u32)> {
        RxudCq::new(dev.data(), attr, events, udata)
    }

    fn resize_cq(_dev: &Device<Self>, cq: &RxudCq, cqe: u32, udata: &UData) -> Result<u32> {
        cq.resize(cqe, udata)
    }

    fn req_notify_cq(cq: &RxudCq, arm: CqArm) -> Result<bool> {
        Ok(cq.arm(arm))
    }

    type Srq = RxudSrq;

    fn create_srq(
        dev: &Device<Self>,
        _pd: &RxudPd,
        attr: &SrqAttr,
        events: SrqEvents,
        udata: &UData,
    ) -> Result<(RxudSrq, SrqAttr)> {
        RxudSrq::new(dev.data(), attr, events, udata)
    }

    fn modify_srq(
        _dev: &Device<Self>,
        srq: &RxudSrq,
        attr: &SrqAttr,
        what: SrqModify,
        udata: &UData,
    ) -> Result {
        srq.modify(attr, what, udata)
    }

    fn query_srq(srq: &RxudSrq) -> Result<SrqAttr> {
        Ok(srq.query())
    }

    type Qp = RxudQp;

    fn create_qp(
        dev: &Device<Self>,
        pd: &RxudPd,
        attr: &QpInitAttr<'_, Self>,
        udata: &UData,
    ) -> Result<(RxudQp, u32, QpCap)> {
        RxudQp::new(dev.data(), pd.id(), attr, udata)
    }

    fn modify_qp(dev: &Device<Self>, qp: &RxudQp, attr: &QpAttr, _udata: &UData) -> Result {
        qp.modify(attr, dev.netdev(PORT))
    }

    fn query_qp(_dev: &Device<Self>, qp: &RxudQp) -> Result<QpQuery> {
        Ok(qp.query())
    }

    fn qp_details(_dev: &Device<Self>, qp: &RxudQp, out: &mut Details) -> Result {
        qp.details(out)
    }

    fn attach_mcast(dev: &Device<Self>, qp: &RxudQp, mgid: &[u8; 16]) -> Result {
        // UD QPs only (IBTA 10.5.2.2).
        if qp.core().qp_type() != QpType::Ud {
            return Err(EINVAL);
        }
        let ndev = dev.netdev(PORT);
        dev.data()
            .mcast
            .attach(mgid, qp.core().qpn(), ndev.as_deref())
    }

    fn detach_mcast(dev: &Device<Self>, qp: &RxudQp, mgid: &[u8; 16]) -> Result {
        let ndev = dev.netdev(PORT);
        dev.data()
            .mcast
            .detach(mgid, qp.core().qpn(), ndev.as_deref())
    }

    type Ah = RxudAh;

    fn create_ah(
        dev: &Device<Self>,
        _pd: &RxudPd,
        av: &AddressVector,
        sleepable: bool,
        udata: &UData,
    ) -> Result<RxudAh> {
        RxudAh::new(dev.data(), av, sleepable, udata)
    }

    fn query_device(dev: &Device<Self>, attr: &mut DeviceAttr) -> Result {
        let d = dev.data();
        attr.vendor_id(VENDOR_ID)
            .max_pd(d.pds.max() as i32)
            .max_mr(d.mrs.max() as i32)
            .max_mw(d.mws.max() as i32)
            .max_cq(d.cqs.max() as i32)
            .max_cqe(MAX_CQE as i32)
            .max_qp(d.qps.max() as i32)
            .max_qp_wr(MAX_QP_WR as i32)
            .max_send_sge(MAX_SGE as i32)
            .max_recv_sge(MAX_SGE as i32)
            .max_sge_rd(MAX_SGE as i32)
            .max_qp_rd_atom(MAX_QP_RD_ATOM as i32)
            .max_qp_init_rd_atom(MAX_QP_RD_ATOM as i32)
            .max_res_rd_atom((MAX_QP_RD_ATOM * d.qps.max()) as i32)
            .max_srq(d.srqs.max() as i32)
            .max_srq_wr(MAX_SRQ_WR as i32)
            .max_srq_sge(MAX_SRQ_SGE as i32)
            .max_ah(d.ahs.max() as i32)
            .max_mcast_grp(mcast::MAX_GROUPS as i32)
            .max_mcast_qp_attach(mcast::MAX_GROUP_QPS as i32)
            .max_total_mcast_qp_attach(mcast::MAX_ATTACHMENTS as i32)
            .max_fast_reg_page_list_len(MAX_FAST_REG_PAGES)
            .max_pkeys(1)
            .max_mr_size(MAX_MR_SIZE)
            .page_size_cap(0xffff_f000)
            .sys_image_guid(dev.data().guid)
            .device_cap_flags(
                DeviceCapFlags::PORT_ACTIVE_EVENT
                    | DeviceCapFlags::SYS_IMAGE_GUID
                    | DeviceCapFlags::RC_RNR_NAK_GEN
                    // REG_MR and LOCAL_INV work requests, SEND with
                    // invalidate (nvme-rdma and other ULPs require it).
                    | DeviceCapFlags::MEM_MGT_EXTENSIONS
                    // Memory windows of type 1 and 2B, as rxe.
                    | DeviceCapFlags::MEM_WINDOW
                    | DeviceCapFlags::MEM_WINDOW_TYPE_2B
                    // ibv_modify_srq with IBV_SRQ_MAX_WR.
                    | DeviceCapFlags::SRQ_RESIZE,
            )
            .atomic_write()
            // Not FLUSH for persistence: no MR of rxud is persistent
            // memory (rxe offers it for pmem pages only).
            .flush_global()
            .atomics_within_device()
            .allow_user_unregister();
        Ok(())
    }

    fn query_port(dev: &Device<Self>, port: u32, attr: &mut PortAttr) -> Result {
        check_port(port)?;
        let ndev = dev.netdev(port).ok_or(ENODEV)?;
        let (state, phys) = match (ndev.is_running(), ndev.carrier_ok()) {
            (true, true) => (PortState::Active, PortPhysState::LinkUp),
            (true, false) => (PortState::Down, PortPhysState::Polling),
            (false, _) => (PortState::Down, PortPhysState::Disabled),
        };
        let active = mtu::IbMtu::for_link_mtu(ndev.mtu()).unwrap_or(mtu::IbMtu::Mtu256);
        drop(ndev);
        attr.state(state)
            .phys_state(phys)
            .mtu(mtu::IbMtu::Mtu4096, active)
            .phys_mtu(mtu::IbMtu::Mtu4096.bytes())
            .gid_tbl_len(GID_TABLE_LEN as i32)
            .pkey_tbl_len(1)
            .port_cap_flags(PortCapFlags::CM_SUP)
            .max_msg_sz(MAX_MSG_SIZE)
            .max_vl_num(1);
        // ethtool may know nothing about a virtual link (veth, virtio):
        // then ib_core's defaults stand, as for rxe.
        if let Ok((speed, width)) = dev.eth_speed(port) {
            attr.active_speed(speed).active_width(width);
        }
        Ok(())
    }

    fn port_immutable(_dev: &Device<Self>, port: u32) -> Result<PortImmutable> {
        check_port(port)?;
        Ok(PortImmutable {
            pkey_tbl_len: 1,
            gid_tbl_len: GID_TABLE_LEN,
            max_mad_size: PortImmutable::MAD_SIZE,
        })
    }

    fn query_pkey(_dev: &Device<Self>, port: u32, index: u16) -> Result<u16> {
        check_port(port)?;
        match index {
            0 => Ok(DEFAULT_PKEY),
            _ => Err(EINVAL),
        }
    }

    fn link_layer(_dev: &Device<Self>, _port: u32) -> LinkLayer {
        LinkLayer::Ethernet
    }

    fn post_send_doorbell(_dev: &Device<Self>, qp: &RxudQp) -> Result {
        super::tx::doorbell(qp.core());
        Ok(())
    }

    fn post_send(_dev: &Device<Self>, qp: &RxudQp, wr: &SendWr<'_, Self>) -> Result {
        super::post::post_send(qp.core(), wr)
    }

    fn post_recv(_dev: &Device<Self>, qp: &RxudQp, wr: &RecvWr<'_>) -> Result {
        super::post::post_recv(qp.core(), wr)
    }

    fn post_srq_recv(srq: &RxudSrq, wr: &RecvWr<'_>) -> Result {
        super::post::post_srq_recv(srq.core(), wr)
    }

    fn poll_cq(dev: &Device<Self>, cq: &RxudCq) -> Option<Completion> {
        let core = cq.core();
        loop {
            let cqe = core.pop()?;
            // Entries carry the QP's number; completions name the QP
            // itself. An entry of a QP destroyed before its CQ was
            // drained (or whose number a QP on other CQs took since) can
            // name none, and a ULP's handler may follow `wc->qp`: it is
            // dropped.
            let qp = dev.data().qps.get(cqe.qp_num).filter(|qp| qp.uses_cq(core));
            if let Some(qp) = qp {
                return Some(Completion {
                    cqe,
                    qp: qp.handle(),
                    port: PORT,
                });
            }
        }
    }

    const PORT_COUNTERS: &'static [CounterDesc] = &RX_COUNTER_DESCS;

    fn port_counters(dev: &Device<Self>, _port: u32, values: &mut [u64]) {
        dev.data().rx.counters.read(values);
    }

    fn dealloc(dev: &Device<Self>) {
        dev.data().registry.forget(dev);
    }
}
