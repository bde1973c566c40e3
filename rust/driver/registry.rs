// SPDX-License-Identifier: GPL-2.0

//! Which rxud device is bound to which netdev, and the three ways a device
//! comes and goes: `rdma link add` (newlink), the netdev going away, and
//! module unload. (`rdma link delete` is ib_core's own; it ends in
//! `dealloc`, like every other way out.)
//!
//! Locking: the table's mutex is taken under RTNL (netdev notifier) and
//! under ib_core's per-device unregistration lock (`dealloc`), so it is
//! never held across a call into ib_core that may take either: device
//! registration and synchronous unregistration happen outside it.

use super::device::{RxudDevice, PORT};
use super::transport::Transports;
use crate::ib::{link::LinkOps, DeviceHandle, DeviceInfo, NewDevice, PortEvent};
use crate::net::{
    netdev::NetDeviceId,
    notifier::{NetdevEvent, NetdevEvents},
    NetDevice,
};
use kernel::{
    new_mutex,
    prelude::*,
    str::CStr,
    sync::{Arc, Mutex},
};

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum BindState {
    /// Reserved by a newlink that has not finished `ib_register_device`.
    Registering,
    Registered,
    /// The netdev went away while the device was registering: newlink
    /// unregisters it as soon as registration completes.
    NetdevGone,
}

struct Binding {
    dev: DeviceHandle<RxudDevice>,
    ndev: NetDeviceId,
    state: BindState,
}

/// The table of rxud devices. Slots are reused; there are few devices.
#[pin_data]
pub(crate) struct Registry {
    #[pin]
    entries: Mutex<KVec<Option<Binding>>>,
    module: &'static ThisModule,
    /// The UDP sockets of the namespaces that have devices.
    transports: Arc<Transports>,
}

impl Registry {
    pub(crate) fn new(
        module: &'static ThisModule,
        transports: Arc<Transports>,
    ) -> impl PinInit<Self> {
        pin_init!(Self {
            entries <- new_mutex!(KVec::new(), "rxud:registry"),
            module,
            transports,
        })
    }

    /// Claims `ndev` for `dev`. Fails if an rxud device already uses
    /// `ndev` or `ndev` is already on its way out (checked under the lock,
    /// so an unregistration that starts later is seen by `netdev_event`).
    fn reserve(&self, dev: DeviceHandle<RxudDevice>, ndev: &NetDevice) -> Result {
        let mut table = self.entries.lock();
        if table.iter().flatten().any(|b| b.ndev == ndev.id()) {
            return Err(EEXIST);
        }
        if !ndev.is_registered() {
            return Err(ENODEV);
        }
        let binding = Binding {
            dev,
            ndev: ndev.id(),
            state: BindState::Registering,
        };
        match table.iter_mut().find(|slot| slot.is_none()) {
            Some(slot) => *slot = Some(binding),
            None => table.push(Some(binding), GFP_KERNEL)?,
        }
        Ok(())
    }

    /// Newlink's registration succeeded. The device may already be gone
    /// again (a racing `rdma link delete`), which is fine.
    fn registered(&self, dev: &DeviceHandle<RxudDevice>) {
        let mut table = self.entries.lock();
        let Some(b) = table.iter_mut().flatten().find(|b| b.dev.same(dev)) else {
            return;
        };
        if b.state == BindState::NetdevGone {
            if let Some(r) = b.dev.try_get() {
                r.unregister_queued();
            }
        }
        b.state = BindState::Registered;
    }

    /// Drops `dev` from the table: ib_core is freeing it.
    pub(crate) fn forget(&self, dev: &crate::ib::Device<RxudDevice>) {
        let mut table = self.entries.lock();
        if let Some(slot) = table
            .iter_mut()
            .find(|s| s.as_ref().is_some_and(|b| b.dev.is(dev)))
        {
            *slot = None;
        }
    }

    /// Unregisters every device and waits for each to be freed. Call after
    /// the link type is unregistered, so no newlink can add more.
    pub(crate) fn unregister_all(&self) {
        loop {
            let next = self
                .entries
                .lock()
                .iter()
                .flatten()
                .next()
                .map(|b| b.dev.clone());
            let Some(dev) = next else { break };
            dev.unregister();
            // `dealloc` has run and removed the binding, unless the device
            // never got registered; then nothing else will remove it.
            let mut table = self.entries.lock();
            if let Some(slot) = table
                .iter_mut()
                .find(|s| s.as_ref().is_some_and(|b| b.dev.same(&dev)))
            {
                pr_warn!("dropping a device that was never registered\n");
                *slot = None;
            }
        }
    }

    /// The registered device bound to `ndev`, if any.
    fn device_on(&self, ndev: NetDeviceId) -> Option<crate::ib::DeviceRef<RxudDevice>> {
        let table = self.entries.lock();
        let b = table
            .iter()
            .flatten()
            .find(|b| b.ndev == ndev && b.state == BindState::Registered)?;
        b.dev.try_get()
    }
}

impl LinkOps for Arc<Registry> {
    const TYPE: &'static CStr = kernel::c_str!("rxud");

    fn newlink(&self, name: &CStr, ndev: &NetDevice) -> Result {
        // RoCEv2 needs Ethernet framing below IP: loopback, tunnels and
        // other link types cannot carry it, and VLAN devices are used
        // through their real device, as with rxe.
        if !ndev.is_ethernet() || ndev.is_vlan() {
            pr_info!("{} is not an Ethernet device\n", ndev.name());
            return Err(crate::ib::eopnotsupp());
        }
        // ib_core would refuse a taken name too, but with ENFILE ("Too many
        // open files in system"); say what is wrong instead. A name taken
        // between here and registration still gets ib_core's answer.
        if crate::ib::device::name_taken(name) {
            return Err(EEXIST);
        }
        let guid = crate::proto::guid::eui64_from_mac(ndev.mac());
        let info = DeviceInfo {
            node_guid: guid,
            node_desc: kernel::c_str!("rxud"),
            phys_port_cnt: 1,
            num_comp_vectors: 1,
        };
        // A namespace whose UDP port is taken refuses the device here,
        // before anything is registered.
        let data = RxudDevice::new(self.clone(), guid, &self.transports, ndev)?;
        let dev = NewDevice::new(self.module, &info, data)?;
        dev.set_netdev(PORT, ndev)?;
        let handle = dev.handle();
        if let Err(e) = self.reserve(handle.clone(), ndev) {
            if e == EEXIST {
                pr_info!("{} already has an rxud device\n", ndev.name());
            }
            return Err(e);
        }
        // On failure `register` frees the device, whose `dealloc` releases
        // the reservation.
        dev.register(name)?;
        self.registered(&handle);
        Ok(())
    }
}

impl NetdevEvents for Arc<Registry> {
    fn event(&self, event: NetdevEvent, ndev: &NetDevice) {
        match event {
            NetdevEvent::Unregister => {
                let mut table = self.entries.lock();
                for b in table.iter_mut().flatten().filter(|b| b.ndev == ndev.id()) {
                    match b.state {
                        BindState::Registered => {
                            // Queued: unregistering waits for users, and
                            // we hold RTNL here.
                            if let Some(r) = b.dev.try_get() {
                                r.unregister_queued();
                                // Connected QPs hold the netdev: give it
                                // back now, or unregistering it waits for
                                // their owners to exit.
                                r.data().release_netdev();
                            }
                        }
                        BindState::Registering => b.state = BindState::NetdevGone,
                        BindState::NetdevGone => {}
                    }
                }
            }
            NetdevEvent::Up | NetdevEvent::Down | NetdevEvent::Change => {
                if let Some(dev) = self.device_on(ndev.id()) {
                    let up = ndev.is_running() && ndev.carrier_ok();
                    dev.dispatch_port_event(
                        PORT,
                        if up {
                            PortEvent::Active
                        } else {
                            PortEvent::Error
                        },
                    );
                }
            }
            _ => {}
        }
    }
}
