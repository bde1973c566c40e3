// SPDX-License-Identifier: GPL-2.0

//! The netdev notifier chain (`register_netdevice_notifier`).

use super::NetDevice;
use crate::ffi::bindings;
use core::{
    marker::PhantomPinned,
    pin::Pin,
    sync::atomic::{AtomicBool, Ordering},
};
use kernel::{error::to_result, prelude::*, types::Opaque};

/// A netdev event rxud cares about. Others arrive as [`NetdevEvent::Other`].
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) enum NetdevEvent {
    Up,
    Down,
    Change,
    ChangeMtu,
    ChangeAddr,
    Unregister,
    Other,
}

impl NetdevEvent {
    fn from_raw(event: kernel::ffi::c_ulong) -> Self {
        match event as u32 {
            bindings::NETDEV_UP => Self::Up,
            bindings::NETDEV_DOWN => Self::Down,
            bindings::NETDEV_CHANGE => Self::Change,
            bindings::NETDEV_CHANGEMTU => Self::ChangeMtu,
            bindings::NETDEV_CHANGEADDR => Self::ChangeAddr,
            bindings::NETDEV_UNREGISTER => Self::Unregister,
            _ => Self::Other,
        }
    }
}

/// Receiver of netdev events. Called with RTNL held: must not sleep on
/// anything that waits for RTNL.
pub(crate) trait NetdevEvents: Send + Sync {
    fn event(&self, event: NetdevEvent, ndev: &NetDevice);
}

/// A registered netdev notifier carrying `T`; unregistered on drop.
#[pin_data(PinnedDrop)]
pub(crate) struct NetdevNotifier<T: NetdevEvents> {
    #[pin]
    nb: Opaque<bindings::notifier_block>,
    handler: T,
    /// Set once `nb` is on the chain: only then does drop unregister it.
    registered: AtomicBool,
    #[pin]
    _pin: PhantomPinned,
}

// SAFETY: the notifier block is only touched by the notifier chain, under
// its own locking; `handler` is `Send + Sync`.
unsafe impl<T: NetdevEvents> Send for NetdevNotifier<T> {}
// SAFETY: as above; `&NetdevNotifier` gives access to nothing mutable.
unsafe impl<T: NetdevEvents> Sync for NetdevNotifier<T> {}

impl<T: NetdevEvents> NetdevNotifier<T> {
    /// Registers a notifier that forwards events to `handler`. The kernel
    /// replays REGISTER and UP for every existing netdev.
    pub(crate) fn register(handler: T) -> Result<Pin<KBox<Self>>> {
        let this = KBox::pin_init(
            pin_init!(Self {
                nb: Opaque::new(bindings::notifier_block {
                    notifier_call: Some(Self::notifier_call),
                    next: core::ptr::null_mut(),
                    priority: 0,
                }),
                handler,
                registered: AtomicBool::new(false),
                _pin: PhantomPinned,
            }),
            GFP_KERNEL,
        )?;
        // SAFETY: `nb` is pinned in a heap allocation that outlives the
        // registration: `PinnedDrop` unregisters before the memory goes.
        to_result(unsafe { bindings::register_netdevice_notifier(this.nb.get()) })?;
        this.registered.store(true, Ordering::Release);
        Ok(this)
    }

    /// `notifier_block.notifier_call`.
    ///
    /// # Safety
    ///
    /// Called by the netdev notifier chain, under RTNL, with the block
    /// `register` put on it and a `netdev_notifier_info` for a live netdev.
    unsafe extern "C" fn notifier_call(
        nb: *mut bindings::notifier_block,
        event: kernel::ffi::c_ulong,
        info: *mut kernel::ffi::c_void,
    ) -> kernel::ffi::c_int {
        // SAFETY: `nb` is the `nb` field of a registered `NetdevNotifier<T>`
        // (only `register` hands out this callback), which stays alive while
        // registered; `Opaque<T>` is `repr(transparent)`.
        let this = unsafe {
            &*kernel::container_of!(nb.cast::<Opaque<bindings::notifier_block>>(), Self, nb)
        };
        // SAFETY: netdev notifiers are always called with a
        // `netdev_notifier_info` whose device is alive for the call.
        let ndev = unsafe { NetDevice::from_raw(bindings::rxud_netdev_notifier_info_to_dev(info)) };
        this.handler.event(NetdevEvent::from_raw(event), ndev);
        bindings::NOTIFY_DONE as kernel::ffi::c_int
    }
}

#[pinned_drop]
impl<T: NetdevEvents> PinnedDrop for NetdevNotifier<T> {
    fn drop(self: Pin<&mut Self>) {
        // A failed registration drops a block that is not on the chain.
        if !self.registered.load(Ordering::Acquire) {
            return;
        }
        // SAFETY: `nb` is on the chain (checked above); after this returns
        // no callback is running or will run.
        unsafe { bindings::unregister_netdevice_notifier(self.nb.get()) };
    }
}
