// SPDX-License-Identifier: GPL-2.0

//! rxud: soft RoCEv2 in Rust, with XUD, a reliable connectionless QP type.
//!
//! `rdma link add rxud0 type rxud netdev eth0` creates an ib_device on
//! `eth0`. The crate has two floors (see Documentation/design.rst): the
//! boundary (`ffi`, `ib`, `net`, `kext`: every `unsafe` block) and the
//! driver (`driver`: safe Rust, `forbid(unsafe_code)`), over the
//! kernel-independent protocol core (`proto`).

// pin_init! of the larger driver objects (QpCore) nests deeper than the
// default allows.
#![recursion_limit = "256"]

use kernel::{prelude::*, sync::Arc};

// The user ABI, shared with librxud through the host crate
// (`rust/abi/lib.rs`); librxud uses items the module does not.
#[allow(dead_code, unreachable_pub)]
mod abi;
mod driver;
mod ffi;
mod ib;
mod kext;
mod net;
// Shared with the host crate (`rust/proto/lib.rs`), whose users need its
// whole public API; the module uses only part of it so far.
#[allow(dead_code, unreachable_pub)]
mod proto;

use driver::{transport::Transports, Registry};
use ib::link;
use net::{netns::NetnsExitRegistration, notifier::NetdevNotifier};

module! {
    type: RxudModule,
    name: "rxud",
    author: "The rxud developers",
    description: "Soft RoCEv2 RDMA provider with the XUD transport",
    license: "GPL",
    alias: ["rdma-link-rxud"],
}

struct RxudModule {
    registry: Arc<Registry>,
    /// `None` once unloading has unregistered the link type.
    link: Option<link::Registration<Arc<Registry>>>,
    _notifier: Pin<KBox<NetdevNotifier<Arc<Registry>>>>,
    /// Last: unregistering it closes what the devices left in live
    /// namespaces (nothing, once they are gone).
    _netns: NetnsExitRegistration<Transports>,
}

impl kernel::Module for RxudModule {
    fn init(module: &'static ThisModule) -> Result<Self> {
        let transports = Arc::pin_init(Transports::new(), GFP_KERNEL)?;
        // Before any device: a namespace that ends releases its socket.
        let netns = NetnsExitRegistration::register(transports.clone())?;
        let registry = Arc::pin_init(Registry::new(module, transports), GFP_KERNEL)?;
        // The notifier goes first so that no device can be bound to a netdev
        // whose removal we would not hear about.
        let notifier = NetdevNotifier::register(registry.clone())?;
        let link = link::Registration::register(registry.clone())?;
        pr_info!("loaded\n");
        Ok(Self {
            registry,
            link: Some(link),
            _notifier: notifier,
            _netns: netns,
        })
    }
}

impl Drop for RxudModule {
    fn drop(&mut self) {
        // No new devices, then none at all; the notifier goes last, with
        // the fields.
        self.link = None;
        self.registry.unregister_all();
        // Packets the devices sent may still sit in a qdisc, with our
        // destructor attached.
        net::skb::wait_for_owned_skbs();
        pr_info!("unloaded\n");
    }
}
