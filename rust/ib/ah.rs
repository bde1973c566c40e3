// SPDX-License-Identifier: GPL-2.0

//! Address handles and address vectors: `struct rdma_ah_attr` as a plain
//! Rust value, and the `create_ah`/`destroy_ah` adapters.

use super::device::{Adapter, Device, DeviceOps, Object};
use super::udata::UData;
use crate::ffi::bindings;
use kernel::{error::to_result, prelude::*};

/// The network header a RoCE path uses, from its source GID
/// (`rdma_gid_attr_network_type`).
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) enum NetworkType {
    /// RoCE v1 (no IP header); rxud, as rxe, only speaks RoCE v2.
    RoceV1,
    Ipv4,
    Ipv6,
}

/// A RoCE address vector: where packets of a QP or an AH go, with the
/// source GID entry and the destination MAC ib_core resolved for it.
// The source fields are what the data path builds headers from.
#[allow(dead_code)]
#[derive(Clone, Copy, Debug)]
pub(crate) struct AddressVector {
    pub(crate) port: u32,
    pub(crate) sgid_index: u8,
    /// The source GID (from the GID table entry), wire order.
    pub(crate) sgid: [u8; 16],
    pub(crate) network: NetworkType,
    /// VLAN of the source GID's netdev, if it is a VLAN device.
    pub(crate) vlan_id: Option<u16>,
    /// MAC of the source GID's netdev.
    pub(crate) smac: [u8; 6],
    pub(crate) dgid: [u8; 16],
    pub(crate) dmac: [u8; 6],
    pub(crate) flow_label: u32,
    pub(crate) hop_limit: u8,
    pub(crate) traffic_class: u8,
    pub(crate) sl: u8,
    pub(crate) static_rate: u8,
}

/// `::ffff:a.b.c.d`: an IPv4 address as RoCE GIDs carry it.
fn is_v4_mapped(gid: &[u8; 16]) -> bool {
    gid[..10].iter().all(|&b| b == 0) && gid[10] == 0xff && gid[11] == 0xff
}

impl AddressVector {
    /// Reads a RoCE `rdma_ah_attr` whose source GID ib_core has resolved
    /// (`grh.sgid_attr` set, as it is for every AH and for QP address
    /// paths it passes to drivers). `EINVAL` for anything that is not a
    /// routable RoCE address.
    ///
    /// # Safety
    ///
    /// `attr` is valid for reads for the call, and its `sgid_attr`, if
    /// not NULL, is a held GID table entry.
    pub(super) unsafe fn from_raw(attr: *const bindings::rdma_ah_attr) -> Result<Self> {
        // SAFETY: per the caller.
        let a = unsafe { &*attr };
        if a.type_ != bindings::RDMA_AH_ATTR_TYPE_ROCE
            || a.ah_flags as u32 & bindings::IB_AH_GRH == 0
        {
            return Err(EINVAL);
        }
        let grh = &a.grh;
        if grh.sgid_attr.is_null() {
            return Err(EINVAL);
        }
        // SAFETY: per the caller, a held entry, valid for reads.
        let gattr = unsafe { &*grh.sgid_attr };
        // SAFETY: `ib_gid` is a union of byte views of the same 16 bytes.
        let sgid = unsafe { gattr.gid.raw };
        // SAFETY: as above.
        let dgid = unsafe { grh.dgid.raw };
        let network = if gattr.gid_type != bindings::IB_GID_TYPE_ROCE_UDP_ENCAP {
            NetworkType::RoceV1
        } else if is_v4_mapped(&sgid) {
            NetworkType::Ipv4
        } else {
            NetworkType::Ipv6
        };
        let (mut vlan, mut smac) = (0u16, [0u8; 6]);
        // SAFETY: the entry is held; the out-pointers are valid locals of
        // the sizes the function writes (u16, ETH_ALEN bytes).
        to_result(unsafe {
            bindings::rdma_read_gid_l2_fields(grh.sgid_attr, &mut vlan, smac.as_mut_ptr())
        })?;
        Ok(Self {
            port: a.port_num,
            sgid_index: grh.sgid_index,
            sgid,
            network,
            vlan_id: (vlan < 0x1000).then_some(vlan),
            smac,
            dgid,
            // SAFETY: `type_` is RoCE, so `roce` is the union's live member.
            dmac: unsafe { a.__bindgen_anon_1.roce.dmac },
            flow_label: grh.flow_label,
            hop_limit: grh.hop_limit,
            traffic_class: grh.traffic_class,
            sl: a.sl,
            static_rate: a.static_rate,
        })
    }

    /// Writes the vector back as an `rdma_ah_attr` (for `query_qp`),
    /// without a GID table reference.
    ///
    /// # Safety
    ///
    /// `attr` is valid for writes for the call.
    pub(super) unsafe fn to_raw(self, attr: *mut bindings::rdma_ah_attr) {
        let mut a = bindings::rdma_ah_attr {
            sl: self.sl,
            static_rate: self.static_rate,
            port_num: self.port,
            ah_flags: bindings::IB_AH_GRH as u8,
            type_: bindings::RDMA_AH_ATTR_TYPE_ROCE,
            ..Default::default()
        };
        a.grh.dgid.raw = self.dgid;
        a.grh.flow_label = self.flow_label;
        a.grh.sgid_index = self.sgid_index;
        a.grh.hop_limit = self.hop_limit;
        a.grh.traffic_class = self.traffic_class;
        a.__bindgen_anon_1.roce.dmac = self.dmac;
        // SAFETY: per the caller.
        unsafe { attr.write(a) };
    }
}

impl<T: DeviceOps> Adapter<T> {
    /// `ib_device_ops.create_ah` and `create_user_ah`: ib_core has
    /// resolved the source GID and, for user AHs, the destination MAC.
    ///
    /// # Safety
    ///
    /// Called by ib_core with a zeroed AH object of `size_ib_ah` bytes
    /// whose `device` and `pd` are set and live, an init attr with a
    /// resolved `ah_attr`, and the call's udata (or NULL). In atomic
    /// context unless `RDMA_CREATE_AH_SLEEPABLE` is set.
    pub(super) unsafe extern "C" fn create_ah(
        ah: *mut bindings::ib_ah,
        init: *mut bindings::rdma_ah_init_attr,
        udata: *mut bindings::ib_udata,
    ) -> kernel::ffi::c_int {
        // SAFETY: per the function's contract.
        let (dev, pd, sleepable, av, udata) = unsafe {
            (
                Device::<T>::from_raw((*ah).device),
                Object::<bindings::ib_pd, T::Pd>::data_of((*ah).pd),
                (*init).flags & bindings::RDMA_CREATE_AH_SLEEPABLE != 0,
                AddressVector::from_raw((*init).ah_attr),
                UData::from_raw(udata),
            )
        };
        let r = av.and_then(|av| T::create_ah(dev, pd, &av, sleepable, &udata));
        // SAFETY: the object has room for `Object<_, T::Ah>`, data not yet
        // initialised.
        unsafe { Object::<_, T::Ah>::init(ah, r) }
    }

    /// `ib_device_ops.destroy_ah`. `T::Ah`'s drop must not sleep.
    ///
    /// # Safety
    ///
    /// Called by ib_core once per AH `create_ah` initialised; in atomic
    /// context unless `RDMA_DESTROY_AH_SLEEPABLE` is set.
    pub(super) unsafe extern "C" fn destroy_ah(
        ah: *mut bindings::ib_ah,
        _flags: u32,
    ) -> kernel::ffi::c_int {
        // SAFETY: per the function's contract.
        unsafe { Object::<_, T::Ah>::drop_data(ah) };
        0
    }
}
