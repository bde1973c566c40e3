// SPDX-License-Identifier: GPL-2.0

//! `struct net_device`, borrowed.

use crate::ffi::bindings;
use kernel::{error::to_result, prelude::*, str::CStr, types::Opaque};

/// ARP hardware type of Ethernet devices.
const ARPHRD_ETHER: u16 = bindings::ARPHRD_ETHER as u16;

/// A network device borrowed for the duration of a callback.
///
/// # Invariants
///
/// A `&NetDevice` always refers to a live `struct net_device` for the
/// lifetime of the reference: callers of [`NetDevice::from_raw`] guarantee
/// that the kernel holds the device for that long.
#[repr(transparent)]
pub(crate) struct NetDevice(Opaque<bindings::net_device>);

/// Identity of a net_device, for lookups: compares addresses, never
/// dereferences.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) struct NetDeviceId(usize);

impl NetDeviceId {
    /// The identity of the device at `ptr` (compared, never dereferenced).
    pub(super) fn from_raw(ptr: *mut bindings::net_device) -> Self {
        Self(ptr as usize)
    }
}

impl NetDevice {
    /// Borrows a raw net_device.
    ///
    /// # Safety
    ///
    /// `ptr` must point to a `struct net_device` that stays alive (is not
    /// freed) for the lifetime `'a`.
    pub(crate) unsafe fn from_raw<'a>(ptr: *mut bindings::net_device) -> &'a Self {
        // INVARIANT: the caller guarantees that the device stays alive for
        // `'a`, the lifetime of the returned reference.
        // SAFETY: `NetDevice` is a transparent wrapper of `net_device`, and
        // the caller guarantees the pointee outlives `'a`.
        unsafe { &*ptr.cast() }
    }

    pub(crate) fn as_raw(&self) -> *mut bindings::net_device {
        self.0.get()
    }

    /// Identity of this device, valid to compare for as long as something
    /// holds a reference on it.
    pub(crate) fn id(&self) -> NetDeviceId {
        NetDeviceId::from_raw(self.as_raw())
    }

    /// Interface name (`eth0`, ...).
    pub(crate) fn name(&self) -> &CStr {
        // SAFETY: the device is alive (type invariant); `netdev_name` returns
        // the NUL-terminated `name` array embedded in it, which lives as long
        // as the device does.
        unsafe { CStr::from_char_ptr(bindings::rxud_netdev_name(self.as_raw())) }
    }

    /// Whether the device is Ethernet (ARP hardware type `ARPHRD_ETHER`).
    pub(crate) fn is_ethernet(&self) -> bool {
        // SAFETY: the device is alive (type invariant).
        unsafe { bindings::rxud_netdev_type(self.as_raw()) == ARPHRD_ETHER }
    }

    /// Link MTU in bytes.
    pub(crate) fn mtu(&self) -> u32 {
        // SAFETY: the device is alive (type invariant).
        unsafe { bindings::rxud_netdev_mtu(self.as_raw()) }
    }

    /// The MTU of the route from `sgid` to `dgid` out of this device (IPv4
    /// addresses as IPv4-mapped GIDs): a route's own MTU (`ip route ...
    /// mtu`, a learnt path MTU) or the device's; `None` without a route.
    /// Any context but hard irq.
    pub(crate) fn route_mtu(&self, sgid: &[u8; 16], dgid: &[u8; 16]) -> Option<u32> {
        let s = bindings::in6_addr {
            in6_u: bindings::in6_addr__bindgen_ty_1 { u6_addr8: *sgid },
        };
        let d = bindings::in6_addr {
            in6_u: bindings::in6_addr__bindgen_ty_1 { u6_addr8: *dgid },
        };
        // SAFETY: the device is alive (type invariant); the addresses are
        // valid for the call, which only reads them.
        let mtu = unsafe { bindings::rxud_route_mtu(self.as_raw(), &s, &d) };
        (mtu != 0).then_some(mtu)
    }

    /// Administratively up (`IFF_UP` and running).
    pub(crate) fn is_running(&self) -> bool {
        // SAFETY: the device is alive (type invariant).
        unsafe { bindings::rxud_netif_running(self.as_raw()) }
    }

    /// Carrier present.
    pub(crate) fn carrier_ok(&self) -> bool {
        // SAFETY: the device is alive (type invariant).
        unsafe { bindings::rxud_netif_carrier_ok(self.as_raw()) }
    }

    /// Fully registered: not yet on its way out. Once this reads false it
    /// stays false.
    pub(crate) fn is_registered(&self) -> bool {
        // SAFETY: the device is alive (type invariant).
        unsafe { bindings::rxud_netdev_is_registered(self.as_raw()) }
    }

    /// An 802.1Q VLAN device stacked on another netdev.
    pub(crate) fn is_vlan(&self) -> bool {
        // SAFETY: the device is alive (type invariant).
        unsafe { bindings::rxud_netdev_is_vlan(self.as_raw()) }
    }

    /// Adds `mac`, a multicast link-layer address, to the device's
    /// filter (`dev_mc_add`: counted, so each add needs its delete).
    ///
    /// Context: process; takes the device's address lock.
    pub(crate) fn mc_add(&self, mac: &[u8; 6]) -> Result {
        // SAFETY: the device is alive (type invariant); `mac` holds the six
        // bytes an Ethernet device's `addr_len` says, read during the call.
        to_result(unsafe { bindings::dev_mc_add(self.as_raw(), mac.as_ptr()) })
    }

    /// Removes one [`Self::mc_add`] of `mac`.
    ///
    /// Context: process; takes the device's address lock.
    pub(crate) fn mc_del(&self, mac: &[u8; 6]) -> Result {
        // SAFETY: as in `mc_add`.
        to_result(unsafe { bindings::dev_mc_del(self.as_raw(), mac.as_ptr()) })
    }

    /// The 6-byte Ethernet address. Only meaningful for Ethernet devices.
    pub(crate) fn mac(&self) -> [u8; 6] {
        let mut mac = [0u8; 6];
        if self.is_ethernet() {
            // SAFETY: the device is alive (type invariant), and Ethernet
            // devices have an `addr_len` of 6, so `dev_addr` holds at least
            // six readable bytes.
            let addr = unsafe { bindings::rxud_netdev_addr(self.as_raw()) };
            // SAFETY: as above, six bytes are readable at `addr`, which
            // cannot overlap our local.
            unsafe { core::ptr::copy_nonoverlapping(addr, mac.as_mut_ptr(), 6) };
        }
        mac
    }
}

/// A counted reference to a net_device (`dev_hold`/`dev_put`).
pub(crate) struct NetDeviceRef {
    ptr: core::ptr::NonNull<bindings::net_device>,
}

// SAFETY: a held net_device may be used and released from any thread.
unsafe impl Send for NetDeviceRef {}
// SAFETY: `NetDevice`'s methods only read through `&self`, with the same
// synchronisation the C accessors use.
unsafe impl Sync for NetDeviceRef {}

impl NetDeviceRef {
    /// Takes ownership of a reference the caller already holds.
    ///
    /// # Safety
    ///
    /// `ptr` must be a live net_device on which the caller holds one
    /// `dev_hold` reference, which is transferred to the returned value.
    pub(crate) unsafe fn from_held(ptr: core::ptr::NonNull<bindings::net_device>) -> Self {
        Self { ptr }
    }
}

impl Clone for NetDeviceRef {
    /// Another reference to the same device. Any context.
    fn clone(&self) -> Self {
        // SAFETY: the device is live (we hold a reference); `dev_hold`
        // takes one more, which the new value owns.
        unsafe { bindings::rxud_netdev_hold(self.ptr.as_ptr()) };
        Self { ptr: self.ptr }
    }
}

impl core::ops::Deref for NetDeviceRef {
    type Target = NetDevice;

    fn deref(&self) -> &NetDevice {
        // SAFETY: the reference we hold keeps the device alive as long as
        // `self`.
        unsafe { NetDevice::from_raw(self.ptr.as_ptr()) }
    }
}

impl Drop for NetDeviceRef {
    fn drop(&mut self) {
        // SAFETY: we own one reference (type invariant of `from_held`).
        unsafe { bindings::rxud_netdev_put(self.ptr.as_ptr()) };
    }
}
