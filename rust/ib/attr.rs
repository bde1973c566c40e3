// SPDX-License-Identifier: GPL-2.0

//! Device and port attributes: typed setters over the C structures ib_core
//! hands to `query_device` and `query_port`.

use super::flags::flag_set;
use crate::ffi::bindings;
use crate::proto::mtu::IbMtu;

flag_set! {
    /// Port capabilities (`IB_PORT_*_SUP`).
    pub(crate) struct PortCapFlags {
        /// The connection manager can be used on this port.
        const CM_SUP = bindings::IB_PORT_CM_SUP;
    }
}

flag_set! {
    /// Device capabilities (`IB_DEVICE_*`): only what rxud does.
    pub(crate) struct DeviceCapFlags {
        /// Port state changes are reported as async events.
        const PORT_ACTIVE_EVENT = bindings::IB_DEVICE_PORT_ACTIVE_EVENT;
        /// `sys_image_guid` is set.
        const SYS_IMAGE_GUID = bindings::IB_DEVICE_SYS_IMAGE_GUID;
        /// The RC responder sends RNR NAKs when no receive is posted.
        const RC_RNR_NAK_GEN = bindings::IB_DEVICE_RC_RNR_NAK_GEN;
        /// Fast registration (REG_MR), local and remote invalidation.
        const MEM_MGT_EXTENSIONS = bindings::IB_DEVICE_MEM_MGT_EXTENSIONS;
        /// Memory windows (`alloc_mw`, binding, invalidation).
        const MEM_WINDOW = bindings::IB_DEVICE_MEM_WINDOW;
        /// Type 2B memory windows (bound to a QP by a work request).
        const MEM_WINDOW_TYPE_2B = bindings::IB_DEVICE_MEM_WINDOW_TYPE_2B;
        /// SRQs can be resized (`modify_srq` with `IB_SRQ_MAX_WR`).
        const SRQ_RESIZE = bindings::IB_DEVICE_SRQ_RESIZE;
    }
}

/// Generates chainable setters, one per C field, named as the field.
macro_rules! setters {
    ($($field:ident: $ty:ty),* $(,)?) => {
        $(
            #[allow(dead_code)]
            pub(crate) fn $field(&mut self, value: $ty) -> &mut Self {
                self.0.$field = value;
                self
            }
        )*
    };
}

/// `struct ib_device_attr`, filled by `DeviceOps::query_device`.
#[repr(transparent)]
pub(crate) struct DeviceAttr(bindings::ib_device_attr);

impl DeviceAttr {
    /// # Safety
    ///
    /// `ptr` must be valid for writes for `'a` and not aliased.
    pub(super) unsafe fn from_raw<'a>(ptr: *mut bindings::ib_device_attr) -> &'a mut Self {
        // SAFETY: transparent wrapper; validity and uniqueness are the
        // caller's guarantee.
        unsafe { &mut *ptr.cast() }
    }

    setters! {
        fw_ver: u64,
        max_mr_size: u64,
        page_size_cap: u64,
        vendor_id: u32,
        vendor_part_id: u32,
        hw_ver: u32,
        max_qp: i32,
        max_qp_wr: i32,
        max_send_sge: i32,
        max_recv_sge: i32,
        max_sge_rd: i32,
        max_cq: i32,
        max_cqe: i32,
        max_mr: i32,
        max_pd: i32,
        max_qp_rd_atom: i32,
        max_res_rd_atom: i32,
        max_qp_init_rd_atom: i32,
        max_mw: i32,
        max_mcast_grp: i32,
        max_mcast_qp_attach: i32,
        max_total_mcast_qp_attach: i32,
        max_ah: i32,
        max_srq: i32,
        max_srq_wr: i32,
        max_srq_sge: i32,
        max_fast_reg_page_list_len: u32,
        max_pkeys: u16,
        local_ca_ack_delay: u8,
    }

    /// System image GUID, in the wire (big-endian) byte order.
    pub(crate) fn sys_image_guid(&mut self, guid: [u8; 8]) -> &mut Self {
        self.0.sys_image_guid = u64::from_ne_bytes(guid);
        self
    }

    pub(crate) fn device_cap_flags(&mut self, flags: DeviceCapFlags) -> &mut Self {
        self.0.device_cap_flags = u64::from(flags.bits());
        self
    }

    /// RC ATOMIC WRITE work requests (`IB_DEVICE_ATOMIC_WRITE`, a bit
    /// beyond the 32 of [`DeviceCapFlags`]).
    pub(crate) fn atomic_write(&mut self) -> &mut Self {
        self.0.device_cap_flags |= bindings::IB_DEVICE_ATOMIC_WRITE as u64;
        self
    }

    /// FLUSH for global visibility (`IB_DEVICE_FLUSH_GLOBAL`, beyond the
    /// 32 bits of [`DeviceCapFlags`]): ib_core then lets MRs and QPs
    /// grant `IB_ACCESS_FLUSH_GLOBAL`.
    pub(crate) fn flush_global(&mut self) -> &mut Self {
        self.0.device_cap_flags |= bindings::IB_DEVICE_FLUSH_GLOBAL as u64;
        self
    }

    /// Atomic operations are atomic with respect to the other atomics of
    /// this device (`IB_ATOMIC_HCA`), not to the CPU's accesses.
    pub(crate) fn atomics_within_device(&mut self) -> &mut Self {
        self.0.atomic_cap = bindings::IB_ATOMIC_HCA;
        self
    }

    /// Lets `rdma link delete` remove the device: rxud devices are made by
    /// users, so users may unmake them.
    pub(crate) fn allow_user_unregister(&mut self) -> &mut Self {
        self.0.kernel_cap_flags |= bindings::IBK_ALLOW_USER_UNREG as u64;
        self
    }
}

/// Logical port state (`enum ib_port_state`).
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) enum PortState {
    Down,
    Active,
}

/// Physical port state (`enum ib_port_phys_state`).
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) enum PortPhysState {
    Disabled,
    Polling,
    LinkUp,
}

/// Link layer of a port.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) enum LinkLayer {
    Ethernet,
}

impl LinkLayer {
    pub(super) fn to_raw(self) -> bindings::rdma_link_layer {
        match self {
            LinkLayer::Ethernet => bindings::IB_LINK_LAYER_ETHERNET,
        }
    }
}

/// `struct ib_port_attr`, filled by `DeviceOps::query_port`. ib_core zeroes
/// it before the call.
#[repr(transparent)]
pub(crate) struct PortAttr(bindings::ib_port_attr);

impl PortAttr {
    /// # Safety
    ///
    /// `ptr` must be valid for writes for `'a` and not aliased.
    pub(super) unsafe fn from_raw<'a>(ptr: *mut bindings::ib_port_attr) -> &'a mut Self {
        // SAFETY: transparent wrapper; validity and uniqueness are the
        // caller's guarantee.
        unsafe { &mut *ptr.cast() }
    }

    setters! {
        phys_mtu: u32,
        gid_tbl_len: i32,
        max_msg_sz: u32,
        bad_pkey_cntr: u32,
        qkey_viol_cntr: u32,
        pkey_tbl_len: u16,
        max_vl_num: u8,
        active_width: u8,
        active_speed: u16,
    }

    pub(crate) fn state(&mut self, state: PortState) -> &mut Self {
        self.0.state = match state {
            PortState::Down => bindings::IB_PORT_DOWN,
            PortState::Active => bindings::IB_PORT_ACTIVE,
        };
        self
    }

    pub(crate) fn phys_state(&mut self, state: PortPhysState) -> &mut Self {
        self.0.phys_state = match state {
            PortPhysState::Disabled => bindings::IB_PORT_PHYS_STATE_DISABLED,
            PortPhysState::Polling => bindings::IB_PORT_PHYS_STATE_POLLING,
            PortPhysState::LinkUp => bindings::IB_PORT_PHYS_STATE_LINK_UP,
        } as u8;
        self
    }

    /// Largest and active MTU.
    pub(crate) fn mtu(&mut self, max: IbMtu, active: IbMtu) -> &mut Self {
        self.0.max_mtu = max.code();
        self.0.active_mtu = active.code();
        self
    }

    pub(crate) fn port_cap_flags(&mut self, flags: PortCapFlags) -> &mut Self {
        self.0.port_cap_flags = flags.bits();
        self
    }
}

/// What never changes about a port, reported once at registration.
pub(crate) struct PortImmutable {
    pub(crate) pkey_tbl_len: u32,
    pub(crate) gid_tbl_len: u32,
    pub(crate) max_mad_size: u32,
}

impl PortImmutable {
    /// Core capability flags of a RoCEv2 (UDP-encapsulated) port.
    pub(super) const ROCE_V2_CAPS: u32 = bindings::RDMA_CORE_PORT_IBA_ROCE_UDP_ENCAP;
    /// Size of a MAD, for ports that carry MADs (RoCE ports do).
    pub(crate) const MAD_SIZE: u32 = bindings::IB_MGMT_MAD_SIZE;
}
