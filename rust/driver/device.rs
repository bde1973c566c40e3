// SPDX-License-Identifier: GPL-2.0

//! An rxud device: one ib_device with one RoCEv2 port on one netdev.

use super::Registry;
use super::context::RxudContext;
use super::counter::ObjectCounter;
use super::mr::RxudMr;
use super::pd::RxudPd;
use core::sync::atomic::{AtomicU32, Ordering};
use crate::ib::{
    Device, DeviceAttr, DeviceOps, LinkLayer, PortAttr, PortImmutable, PortPhysState, PortState, UData, Umem,
};
use crate::proto::mtu;
use kernel::{prelude::*, sync::Arc};

/// rxud devices have exactly one port, numbered 1 as in IB.
pub(crate) const PORT: u32 = 1;
/// RoCEv2 GID table size: one entry per IPv4/IPv6 address of the netdev
/// (ib_core fills it); as rxe.
pub(crate) const GID_TABLE_LEN: u32 = 1024;
/// The default P_Key, full membership. RoCE has only this one.
pub(crate) const DEFAULT_PKEY: u16 = 0xffff;
/// Largest message a port accepts (IB's 2^31 limit).
pub(crate) const MAX_MSG_SIZE: u32 = 1 << 31;
/// IEEE OUI-less vendor id, as rxe reports (0xffffff: "no vendor").
pub(crate) const VENDOR_ID: u32 = 0xffffff;
/// Most protection domains per device.
pub(crate) const MAX_PD: u32 = 1 << 16;
/// Most memory regions per device.
pub(crate) const MAX_MR: u32 = 1 << 16;
/// `IB_PORT_CM_SUP`: the connection manager can be used on this port.
const PORT_CAP_CM_SUP: u32 = 1 << 16;

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
    /// Source of MR keys. Keys are only names for now; the data path will
    /// look MRs up by key through an index table that also guarantees
    /// uniqueness among live MRs.
    next_key: AtomicU32,
}

impl RxudDevice {
    pub(crate) fn new(registry: Arc<Registry>, guid: [u8; 8]) -> Result<Self> {
        Ok(Self {
            registry,
            guid,
            pds: ObjectCounter::new(MAX_PD)?,
            mrs: ObjectCounter::new(MAX_MR)?,
            next_key: AtomicU32::new(1),
        })
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

    type Pd = RxudPd;

    fn alloc_pd(dev: &Device<Self>, _udata: &UData) -> Result<RxudPd> {
        Ok(RxudPd::new(dev.data().pds.take()?))
    }

    type Mr = RxudMr;

    fn reg_user_mr(
        dev: &Device<Self>,
        _pd: &RxudPd,
        umem: Umem,
        _iova: u64,
        _access: u32,
        _udata: &UData,
    ) -> Result<(RxudMr, u32)> {
        let counted = dev.data().mrs.take()?;
        // Key 0 is reserved (the local DMA lkey of kernel users).
        let key = loop {
            let k = dev.data().next_key.fetch_add(1, Ordering::Relaxed);
            if k != 0 {
                break k;
            }
        };
        Ok((RxudMr::new(umem, counted), key))
    }

    fn query_device(dev: &Device<Self>, attr: &mut DeviceAttr) -> Result {
        // Limits of objects rxud cannot create yet stay zero: a consumer
        // must not be told it can make a QP it cannot.
        attr.vendor_id(VENDOR_ID)
            .max_pd(dev.data().pds.max() as i32)
            .max_mr(dev.data().mrs.max() as i32)
            .max_pkeys(1)
            .max_mr_size(u64::MAX)
            .page_size_cap(0xffff_f000)
            .sys_image_guid(dev.data().guid)
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
            .mtu(mtu::IbMtu::Mtu4096.code(), active.code())
            .phys_mtu(mtu::IbMtu::Mtu4096.bytes())
            .gid_tbl_len(GID_TABLE_LEN as i32)
            .pkey_tbl_len(1)
            .port_cap_flags(PORT_CAP_CM_SUP)
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

    fn dealloc(dev: &Device<Self>) {
        dev.data().registry.forget(dev);
    }
}
