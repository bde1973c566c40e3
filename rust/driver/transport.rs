// SPDX-License-Identifier: GPL-2.0

//! RoCEv2 transport: UDP port 4791, one socket per network namespace that
//! has rxud devices, opened with the first device there and closed with
//! the last, or when the namespace ends ([`NetnsExit`]: rxud holds no
//! reference on a namespace, so deleting one with devices in it frees it). The device's netdev decides the namespace, so rxud devices in
//! different namespaces (containers, test hosts) each get their own port,
//! which rxe in 6.12 (initial namespace only) cannot do.
//!
//! rxe binds UDP 4791 of the initial namespace when it loads; a device in
//! a namespace whose port is taken is refused with `EADDRINUSE` before
//! anything is registered. Run both on one machine by giving rxud its own
//! namespace (Documentation/design.rst).
//!
//! Received datagrams arrive in softirq context ([`TunnelRx`]); the
//! namespace's socket finds the rxud port by the ingress netdev under an
//! interrupt-safe lock and hands the packet to it (`rx.rs`).

use super::counters::RxCounter;
use super::rx::RxPort;
use crate::kext::sync::{new_spinlock_irq, SpinLockIrq};
use crate::net::{
    netdev::NetDeviceId,
    netns::{NetNs, NetnsExit},
    skb::SkBuff,
    udp::{Lost, Train, TunnelRx, TunnelSocket},
    NetDevice,
};
use kernel::{
    new_mutex,
    prelude::*,
    sync::{Arc, Mutex},
};

/// The IANA port of RoCEv2.
pub(crate) const ROCE_V2_UDP_PORT: u16 = 4791;

/// One namespace's socket and the ports listening on it.
struct Netns {
    net: NetNs,
    rx: Arc<NetnsRx>,
    /// Dropped (closed) with the last port.
    _socket: TunnelSocket<NetnsRx>,
    users: u32,
}

/// Dispatch of one namespace's datagrams to rxud ports by ingress netdev.
#[pin_data]
pub(crate) struct NetnsRx {
    #[pin]
    ports: SpinLockIrq<KVec<Option<(NetDeviceId, Arc<RxPort>)>>>,
}

/// Puts `v` in the first free slot of `slots`, or a new one.
fn insert<T>(slots: &mut KVec<Option<T>>, v: T, flags: kernel::alloc::Flags) -> Result<usize> {
    match slots.iter().position(Option::is_none) {
        Some(i) => {
            if let Some(slot) = slots.get_mut(i) {
                *slot = Some(v);
            }
            Ok(i)
        }
        None => {
            slots.push(Some(v), flags)?;
            Ok(slots.len() - 1)
        }
    }
}

impl NetnsRx {
    /// The rxud port of the netdev `skb` came in on, if it is one; else,
    /// if that netdev is a VLAN device, the port of the netdev under it:
    /// ib_core gives a port the GIDs of its netdev's VLAN devices, so
    /// RoCE to them comes in tagged and is the port's (rxe takes it too).
    fn port_of(&self, skb: &SkBuff) -> Option<Arc<RxPort>> {
        let ingress = skb.ingress()?;
        let find = |dev: NetDeviceId| {
            self.ports
                .lock()
                .iter()
                .flatten()
                .find(|(id, _)| *id == dev)
                .map(|(_, p)| p.clone())
        };
        find(ingress).or_else(|| find(skb.ingress_below_vlan()?))
    }
}

impl TunnelRx for NetnsRx {
    fn receive(&self, skb: SkBuff) {
        // Not an rxud netdev of this namespace: dropped (the skb frees on
        // return), as the port is ours.
        if let Some(port) = self.port_of(&skb) {
            port.receive(skb);
        }
    }

    /// One port lookup for the whole train: GRO links only datagrams of
    /// one device.
    fn receive_train(&self, first: SkBuff, rest: Train, lost: u32) {
        if let Some(port) = self.port_of(&first) {
            port.receive_train(first, rest, lost);
        }
    }

    fn lost(&self, skb: &SkBuff, n: u32, why: Lost) {
        if let Some(port) = self.port_of(skb) {
            port.lost(
                n.into(),
                match why {
                    Lost::NoMemory => RxCounter::DropNoMemory,
                    Lost::Reshaped => RxCounter::DropMalformed,
                },
            );
        }
    }
}

/// Every namespace's socket.
#[pin_data]
pub(crate) struct Transports {
    #[pin]
    netns: Mutex<KVec<Option<Netns>>>,
}

/// An rxud port attached to its namespace's socket; detaches on drop
/// (closing the socket with the last port). Drop in process context.
pub(crate) struct Attachment {
    transports: Arc<Transports>,
    ndev: NetDeviceId,
    net: NetNs,
}

impl Transports {
    pub(crate) fn new() -> impl PinInit<Self> {
        pin_init!(Self { netns <- new_mutex!(KVec::new(), "rxud:transports") })
    }

    /// Attaches `port` on `ndev` to the socket of `ndev`'s namespace,
    /// opening it if this is the namespace's first port. Sleeps.
    pub(crate) fn attach(
        self: &Arc<Self>,
        ndev: &NetDevice,
        port: Arc<RxPort>,
    ) -> Result<Attachment> {
        let net = NetNs::of(ndev);
        let mut all = self.netns.lock();
        let i = match all
            .iter()
            .position(|n| n.as_ref().is_some_and(|n| n.net.cookie() == net.cookie()))
        {
            Some(i) => i,
            None => {
                let rx = Arc::pin_init(
                    pin_init!(NetnsRx { ports <- new_spinlock_irq!(KVec::new(), "rxud:netns_ports") }),
                    GFP_KERNEL,
                )?;
                let socket =
                    TunnelSocket::open(ndev, ROCE_V2_UDP_PORT, rx.clone()).inspect_err(|e| {
                        if crate::net::is_addr_in_use(*e) {
                            pr_err!(
                            "UDP port {} is taken in the network namespace of {} (by rdma_rxe?): \
                                 put rxud devices in a namespace of their own\n",
                            ROCE_V2_UDP_PORT,
                            ndev.name()
                        );
                        }
                    })?;
                let entry = Netns {
                    net,
                    rx,
                    _socket: socket,
                    users: 0,
                };
                insert(&mut all, entry, GFP_KERNEL)?
            }
        };
        let Some(Some(entry)) = all.get_mut(i) else {
            return Err(EINVAL);
        };
        let attached = {
            let mut ports = entry.rx.ports.lock();
            insert(&mut ports, (ndev.id(), port), GFP_ATOMIC)
        };
        if let Err(e) = attached {
            if entry.users == 0 {
                // Closes the socket just opened.
                let closed = all.get_mut(i).and_then(Option::take);
                drop(all);
                drop(closed);
            }
            return Err(e);
        }
        entry.users += 1;
        Ok(Attachment {
            transports: self.clone(),
            ndev: ndev.id(),
            net,
        })
    }
}

impl Drop for Attachment {
    fn drop(&mut self) {
        let mut all = self.transports.netns.lock();
        // None once the namespace ended (`NetnsExit`): nothing left.
        let Some(slot) = all.iter_mut().find(|n| {
            n.as_ref()
                .is_some_and(|n| n.net.cookie() == self.net.cookie())
        }) else {
            return;
        };
        let Some(entry) = slot.as_mut() else {
            return;
        };
        let port = {
            let mut ports = entry.rx.ports.lock();
            ports
                .iter_mut()
                .find(|p| p.as_ref().is_some_and(|(id, _)| *id == self.ndev))
                .and_then(Option::take)
        };
        // The port's last reference may go here, outside the spinlock.
        drop(port);
        entry.users = entry.users.saturating_sub(1);
        let closed = if entry.users == 0 { slot.take() } else { None };
        drop(all);
        // Closing waits for receive callbacks to finish: outside the
        // mutex.
        drop(closed);
    }
}

impl NetnsExit for Transports {
    /// A namespace ends: its socket is released now, whatever ports are
    /// still attached (their devices go with their netdevs, unregistered
    /// before this; their attachments find nothing left).
    fn exit(&self, cookie: u64) {
        let ended = {
            let mut all = self.netns.lock();
            all.iter_mut()
                .find(|n| n.as_ref().is_some_and(|n| n.net.cookie() == cookie))
                .and_then(Option::take)
        };
        // Closing waits for receive callbacks to finish: outside the
        // mutex.
        drop(ended);
    }
}
