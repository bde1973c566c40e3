// SPDX-License-Identifier: GPL-2.0

//! `struct ib_device` with driver data, its verbs vtable and its lifetime.
//!
//! An rxud device is one allocation made by `_ib_alloc_device`: the C
//! `struct ib_device` first, the driver's `T` right after it ([`Device`]).
//! Its life has three stages, each with its own Rust type:
//!
//! 1. [`NewDevice`]: allocated and initialised, not registered; owned by the
//!    caller. Dropping it frees it.
//! 2. Registered: owned by ib_core, which may unregister it at any time
//!    (`rdma link delete`, netdev removal, module unload). Code outside the
//!    verbs callbacks reaches it through a [`DeviceHandle`] (keeps the memory,
//!    never the driver data) and, while it is still registered, a
//!    [`DeviceRef`] (a registration reference: ib_core waits for it before
//!    tearing the device down, so the driver data is usable through it).
//! 3. Deallocated: ib_core calls `dealloc_driver`, where `T` is dropped.
//!    Handles may outlive this; they then only keep a dead `ib_device`.

use super::ah::AddressVector;
use super::attr::{DeviceAttr, LinkLayer, PortAttr, PortImmutable};
use super::cq::{CqArm, CqEvents, CqInitAttr};
use super::mr::{AccessFlags, MrKind, UserRange};
use super::qp::{QpAttr, QpCap, QpInitAttr, QpQuery};
use super::srq::{SrqAttr, SrqEvents, SrqModify};
use super::udata::UData;
use super::wr::{Completion, RecvWr, SendWr};
use crate::ffi::bindings;
use crate::net::{netdev::NetDeviceRef, NetDevice};
use core::{marker::PhantomData, mem, ptr::NonNull};
use kernel::{error::to_result, prelude::*, str::CStr, types::Opaque};

/// Verbs a driver implements for its devices; `Self` is the per-device
/// driver data. ib_core calls these only between registration and
/// `dealloc_driver`, so `dev.data()` is always valid inside them.
///
/// `#[vtable]`: a method with a default body is optional, and ib_core sees
/// a NULL callback (and its own fallback or `EOPNOTSUPP`) unless the driver
/// implements it. Destroy callbacks are wired with their create callback;
/// destroying is dropping the driver's object.
///
/// Each method's `Context:` line says where ib_core may call it from: a
/// method that may run in atomic context must not sleep (no `GFP_KERNEL`,
/// no mutex, only interrupt-safe spinlocks: `crate::kext::sync::SpinLockIrq`).
#[vtable]
pub(crate) trait DeviceOps: Sized + Send + Sync {
    /// Per-process state of one user context (`ibv_open_device`).
    type Context: Send + Sync;

    /// Context: process (uverbs), may sleep.
    fn alloc_context(_dev: &Device<Self>, _udata: &UData) -> Result<Self::Context> {
        kernel::build_error(kernel::error::VTABLE_DEFAULT_ERROR)
    }

    /// The device is going away while a process still holds `ctx`
    /// (`disassociate_ucontext`). ib_core has destroyed the context's
    /// objects and zapped the mappings it made itself; what the process
    /// mapped through the driver must no longer reach freed memory. A
    /// driver that implements this lets `rdma link delete`, the netdev's
    /// removal and rmmod finish without waiting for its processes: they
    /// get `IBV_EVENT_DEVICE_FATAL`, and their verbs fail with `EIO`.
    ///
    /// Context: process (device unregistration), may sleep.
    fn disassociate_context(_ctx: &Self::Context) {
        kernel::build_error(kernel::error::VTABLE_DEFAULT_ERROR)
    }

    /// A protection domain. Dropped in process context.
    type Pd: Send + Sync;

    /// Context: process (uverbs or `ib_alloc_pd`), may sleep.
    fn alloc_pd(dev: &Device<Self>, udata: &UData) -> Result<Self::Pd>;

    /// A memory region. Dropped in process context.
    type Mr: Send + Sync;

    /// Registers the user memory pinned in `umem`, which the MR addresses
    /// from `iova`, with rights `access` (already checked by ib_core for
    /// consistency). Returns the MR and its key (lkey = rkey).
    ///
    /// Context: process (uverbs), may sleep.
    fn reg_user_mr(
        _dev: &Device<Self>,
        _pd: &Self::Pd,
        _umem: super::Umem,
        _iova: u64,
        _access: AccessFlags,
        _udata: &UData,
    ) -> Result<(Self::Mr, u32)> {
        kernel::build_error(kernel::error::VTABLE_DEFAULT_ERROR)
    }

    /// The address range and rights of a user MR (`None` for others), for
    /// `rereg_user_mr`, which keeps what it is not told to change.
    ///
    /// Context: process (uverbs), may sleep.
    fn user_range(_mr: &Self::Mr) -> Option<UserRange> {
        kernel::build_error(kernel::error::VTABLE_DEFAULT_ERROR)
    }

    /// Re-registers user MR `old` (`ibv_rereg_mr`) over the user memory
    /// pinned in `umem`, addressed from `iova`, with rights `access` and
    /// PD `pd` (each `old`'s own unless the call changes it). Returns the
    /// successor and its key; ib_core puts it in `old`'s place and then
    /// destroys `old`. On an error `old` stays as it was.
    ///
    /// Context: process (uverbs), may sleep.
    #[allow(clippy::too_many_arguments)]
    fn rereg_user_mr(
        _dev: &Device<Self>,
        _old: &Self::Mr,
        _pd: &Self::Pd,
        _umem: super::Umem,
        _iova: u64,
        _access: AccessFlags,
        _udata: &UData,
    ) -> Result<(Self::Mr, u32)> {
        kernel::build_error(kernel::error::VTABLE_DEFAULT_ERROR)
    }

    /// An MR over all of kernel memory with rights `access`, for kernel
    /// ULPs (`ib_alloc_pd` makes one per PD). Returns it and its key.
    ///
    /// Context: process (`ib_alloc_pd`), may sleep.
    fn get_dma_mr(
        _dev: &Device<Self>,
        _pd: &Self::Pd,
        _access: AccessFlags,
    ) -> Result<(Self::Mr, u32)> {
        kernel::build_error(kernel::error::VTABLE_DEFAULT_ERROR)
    }

    /// A fast-registration MR with room for `max_pages` pages, mapped
    /// later by `map_mr_sg` and enabled by a REG_MR work request.
    ///
    /// Context: process (`ib_alloc_mr`), may sleep.
    fn alloc_mr(
        _dev: &Device<Self>,
        _pd: &Self::Pd,
        _kind: MrKind,
        _max_pages: u32,
    ) -> Result<(Self::Mr, u32)> {
        kernel::build_error(kernel::error::VTABLE_DEFAULT_ERROR)
    }

    /// A memory window. Dropped in process context.
    type Mw: Send + Sync;

    /// Allocates a memory window of type `kind` in PD `pd` (unbound, or
    /// for type 1 bound to nothing). Returns it and its rkey. With it,
    /// ib_core's `dealloc_mw` is wired (dropping the window).
    ///
    /// Context: process (uverbs), may sleep.
    fn alloc_mw(
        _dev: &Device<Self>,
        _pd: &Self::Pd,
        _kind: super::MwKind,
    ) -> Result<(Self::Mw, u32)> {
        kernel::build_error(kernel::error::VTABLE_DEFAULT_ERROR)
    }

    /// Starts mapping a fast-registration MR (`ib_map_mr_sg`): forget its
    /// pages. With [`DeviceOps::mr_add_page`], wires `map_mr_sg`.
    ///
    /// Context: any but hard irq (a ULP's submission path, e.g. blk-mq's
    /// `queue_rq` under RCU); must not sleep.
    fn mr_clear_pages(_mr: &Self::Mr) -> Result {
        kernel::build_error(kernel::error::VTABLE_DEFAULT_ERROR)
    }

    /// Appends the page at (virtual DMA) address `addr`; `ENOMEM` when the
    /// MR is full.
    ///
    /// Context: as [`DeviceOps::mr_clear_pages`]; must not sleep.
    fn mr_add_page(_mr: &Self::Mr, _addr: u64) -> Result {
        kernel::build_error(kernel::error::VTABLE_DEFAULT_ERROR)
    }

    /// A completion queue. Dropped in process context.
    type Cq: Send + Sync;

    /// Creates a CQ; returns it and the number of entries it holds.
    ///
    /// Context: process (uverbs or `ib_create_cq`), may sleep.
    fn create_cq(
        dev: &Device<Self>,
        attr: &CqInitAttr,
        events: CqEvents,
        udata: &UData,
    ) -> Result<(Self::Cq, u32)>;

    /// Resizes a CQ to hold at least `cqe` entries, keeping the ones it
    /// holds; returns the new number of entries.
    ///
    /// Context: process (uverbs or `ib_resize_cq`), may sleep.
    fn resize_cq(_dev: &Device<Self>, _cq: &Self::Cq, _cqe: u32, _udata: &UData) -> Result<u32> {
        kernel::build_error(kernel::error::VTABLE_DEFAULT_ERROR)
    }

    /// Arms a CQ for one completion event; returns whether completions are
    /// already waiting.
    ///
    /// Context: any, hard irq included (ULPs re-arm from their completion
    /// handlers); must not sleep.
    fn req_notify_cq(_cq: &Self::Cq, _arm: CqArm) -> Result<bool> {
        kernel::build_error(kernel::error::VTABLE_DEFAULT_ERROR)
    }

    /// A shared receive queue. Dropped in process context.
    type Srq: Send + Sync;

    /// Creates an SRQ; returns it and the sizes granted.
    ///
    /// Context: process (uverbs or `ib_create_srq`), may sleep.
    fn create_srq(
        _dev: &Device<Self>,
        _pd: &Self::Pd,
        _attr: &SrqAttr,
        _events: SrqEvents,
        _udata: &UData,
    ) -> Result<(Self::Srq, SrqAttr)> {
        kernel::build_error(kernel::error::VTABLE_DEFAULT_ERROR)
    }

    /// Context: process (uverbs or `ib_modify_srq`), may sleep.
    fn modify_srq(
        _dev: &Device<Self>,
        _srq: &Self::Srq,
        _attr: &SrqAttr,
        _what: SrqModify,
        _udata: &UData,
    ) -> Result {
        kernel::build_error(kernel::error::VTABLE_DEFAULT_ERROR)
    }

    /// Context: process (uverbs or `ib_query_srq`), may sleep.
    fn query_srq(_srq: &Self::Srq) -> Result<SrqAttr> {
        kernel::build_error(kernel::error::VTABLE_DEFAULT_ERROR)
    }

    /// A queue pair. Dropped in process context.
    type Qp: Send + Sync;

    /// Creates a QP in the RESET state; returns it, its QP number and the
    /// capacities granted.
    ///
    /// Context: process (uverbs or `ib_create_qp`), may sleep.
    fn create_qp(
        dev: &Device<Self>,
        pd: &Self::Pd,
        attr: &QpInitAttr<'_, Self>,
        udata: &UData,
    ) -> Result<(Self::Qp, u32, QpCap)>;

    /// Context: process (uverbs, `ib_modify_qp`, the CM's work items), may
    /// sleep.
    fn modify_qp(dev: &Device<Self>, qp: &Self::Qp, attr: &QpAttr, udata: &UData) -> Result;

    /// Work requests were queued on the QP's send queue: by a user
    /// process in its shared ring (librxud's doorbell, a POST_SEND command
    /// with no work requests), or by [`DeviceOps::post_send`] for a kernel
    /// consumer's list. Send them.
    ///
    /// Context: process (uverbs); for kernel consumers any, hard irq
    /// included: must not sleep.
    fn post_send_doorbell(_dev: &Device<Self>, _qp: &Self::Qp) -> Result {
        kernel::build_error(kernel::error::VTABLE_DEFAULT_ERROR)
    }

    /// Queues one send work request of a kernel consumer on `qp` (the
    /// doorbell follows the list). An error fails the post call at this
    /// request, the ones before it stay queued.
    ///
    /// Context: any, hard irq included; must not sleep.
    fn post_send(_dev: &Device<Self>, _qp: &Self::Qp, _wr: &SendWr<'_, Self>) -> Result {
        kernel::build_error(kernel::error::VTABLE_DEFAULT_ERROR)
    }

    /// Queues one receive work request of a kernel consumer on `qp`.
    ///
    /// Context: any, hard irq included; must not sleep.
    fn post_recv(_dev: &Device<Self>, _qp: &Self::Qp, _wr: &RecvWr<'_>) -> Result {
        kernel::build_error(kernel::error::VTABLE_DEFAULT_ERROR)
    }

    /// Queues one receive work request of a kernel consumer on `srq`.
    ///
    /// Context: any, hard irq included; must not sleep.
    fn post_srq_recv(_srq: &Self::Srq, _wr: &RecvWr<'_>) -> Result {
        kernel::build_error(kernel::error::VTABLE_DEFAULT_ERROR)
    }

    /// Takes the oldest completion of a kernel consumer's CQ.
    ///
    /// Context: any but hard irq; must not sleep.
    fn poll_cq(_dev: &Device<Self>, _cq: &Self::Cq) -> Option<Completion> {
        kernel::build_error(kernel::error::VTABLE_DEFAULT_ERROR)
    }

    /// Context: process (uverbs or `ib_query_qp`), may sleep.
    fn query_qp(_dev: &Device<Self>, _qp: &Self::Qp) -> Result<QpQuery> {
        kernel::build_error(kernel::error::VTABLE_DEFAULT_ERROR)
    }

    /// Writes the driver's details of `qp` (`rdma resource show qp -d`)
    /// into `out`.
    ///
    /// Context: process (an `rdma resource` dump), may sleep.
    fn qp_details(_dev: &Device<Self>, _qp: &Self::Qp, _out: &mut super::Details) -> Result {
        kernel::build_error(kernel::error::VTABLE_DEFAULT_ERROR)
    }

    /// Attaches `qp` to the multicast group `mgid` (`ibv_attach_mcast`,
    /// `ib_attach_mcast`): datagrams to the group's address and to QP
    /// number 0xFFFFFF reach it. ib_core counts the attachment in the QP's
    /// use count, so the QP is not destroyed while attached (uverbs
    /// detaches what a closing process left attached). Wired with
    /// [`DeviceOps::detach_mcast`].
    ///
    /// Context: process (uverbs or `ib_attach_mcast`), may sleep.
    fn attach_mcast(_dev: &Device<Self>, _qp: &Self::Qp, _mgid: &[u8; 16]) -> Result {
        kernel::build_error(kernel::error::VTABLE_DEFAULT_ERROR)
    }

    /// Detaches `qp` from the multicast group `mgid`.
    ///
    /// Context: process (uverbs or `ib_detach_mcast`), may sleep.
    fn detach_mcast(_dev: &Device<Self>, _qp: &Self::Qp, _mgid: &[u8; 16]) -> Result {
        kernel::build_error(kernel::error::VTABLE_DEFAULT_ERROR)
    }

    /// An address handle. Dropping it must not sleep (`destroy_ah` without
    /// `RDMA_DESTROY_AH_SLEEPABLE` runs in atomic context).
    type Ah: Send + Sync;

    /// Creates an AH for `av`.
    ///
    /// Context: process if `sleepable`; otherwise atomic (softirq, or
    /// with interrupts disabled: CM and MAD paths), must not sleep.
    fn create_ah(
        _dev: &Device<Self>,
        _pd: &Self::Pd,
        _av: &AddressVector,
        _sleepable: bool,
        _udata: &UData,
    ) -> Result<Self::Ah> {
        kernel::build_error(kernel::error::VTABLE_DEFAULT_ERROR)
    }

    /// Context: process (registration, uverbs, `ib_query_device`), may
    /// sleep.
    fn query_device(dev: &Device<Self>, attr: &mut DeviceAttr) -> Result;

    /// Context: process (uverbs, `ib_query_port`, sysfs), may sleep.
    fn query_port(dev: &Device<Self>, port: u32, attr: &mut PortAttr) -> Result;

    /// Context: process (registration), may sleep.
    fn port_immutable(dev: &Device<Self>, port: u32) -> Result<PortImmutable>;

    /// Context: any but hard irq (the MAD and CM layers); must not sleep.
    fn query_pkey(_dev: &Device<Self>, _port: u32, _index: u16) -> Result<u16> {
        kernel::build_error(kernel::error::VTABLE_DEFAULT_ERROR)
    }

    /// Context: any (`rdma_port_get_link_layer` is called under spinlocks
    /// and in softirq); must not sleep.
    fn link_layer(_dev: &Device<Self>, _port: u32) -> LinkLayer {
        kernel::build_error(kernel::error::VTABLE_DEFAULT_ERROR)
    }

    /// Names of the port counters (`rdma statistic show`, sysfs
    /// `hw_counters`), in the order [`DeviceOps::port_counters`] fills them.
    const PORT_COUNTERS: &'static [super::stats::CounterDesc] = &[];

    /// Fills `values` (one per [`DeviceOps::PORT_COUNTERS`] entry) with the
    /// port's counters.
    ///
    /// Context: process (netlink or sysfs read, under the stats lock),
    /// may sleep.
    fn port_counters(_dev: &Device<Self>, _port: u32, _values: &mut [u64]) {
        kernel::build_error(kernel::error::VTABLE_DEFAULT_ERROR)
    }

    /// Last call before `Self` is dropped.
    ///
    /// Context: process (`ib_dealloc_device` or the end of
    /// unregistration), may sleep.
    fn dealloc(_dev: &Device<Self>) {}
}

/// An ib_device followed by the driver's data.
///
/// # Invariants
///
/// `ib` was set up by `_ib_alloc_device` with room for the whole
/// `Device<T>`, and `data` is initialised until `dealloc_driver` runs.
#[repr(C)]
pub(crate) struct Device<T: DeviceOps> {
    ib: Opaque<bindings::ib_device>,
    data: T,
}

/// Static description of a device, applied before registration.
pub(crate) struct DeviceInfo<'a> {
    /// Node GUID in wire byte order.
    pub(crate) node_guid: [u8; 8],
    pub(crate) node_desc: &'a CStr,
    pub(crate) phys_port_cnt: u32,
    pub(crate) num_comp_vectors: i32,
}

/// Asynchronous port events delivered to ib_core's event handlers.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) enum PortEvent {
    Active,
    Error,
}

impl<T: DeviceOps> Device<T> {
    pub(super) fn as_raw(&self) -> *mut bindings::ib_device {
        self.ib.get()
    }

    /// # Safety
    ///
    /// `ptr` must be the `ib_device` of a live `Device<T>` whose data is
    /// initialised for `'a`.
    pub(super) unsafe fn from_raw<'a>(ptr: *mut bindings::ib_device) -> &'a Self {
        // INVARIANT: the caller guarantees that `ptr` is the `ib_device` of a
        // live `Device<T>` whose data stays initialised for `'a`.
        // SAFETY: `ib` is the first field of a `repr(C)` struct, so the
        // pointers coincide; validity is the caller's guarantee.
        unsafe { &*ptr.cast::<Self>() }
    }

    /// The driver data.
    pub(crate) fn data(&self) -> &T {
        &self.data
    }

    /// The netdev bound to `port`, held.
    pub(crate) fn netdev(&self, port: u32) -> Option<NetDeviceRef> {
        // SAFETY: the device is alive; `ib_device_get_netdev` returns a held
        // reference or NULL.
        let ptr = unsafe { bindings::ib_device_get_netdev(self.as_raw(), port) };
        // SAFETY: a non-NULL result carries one reference, which we take.
        NonNull::new(ptr).map(|p| unsafe { NetDeviceRef::from_held(p) })
    }

    /// Speed and width of `port` as ib_core derives them from the netdev's
    /// ethtool link settings. Takes RTNL.
    pub(crate) fn eth_speed(&self, port: u32) -> Result<(u16, u8)> {
        let (mut speed, mut width) = (0u16, 0u8);
        // SAFETY: the device is alive and the out-pointers are valid locals.
        to_result(unsafe {
            bindings::ib_get_eth_speed(self.as_raw(), port, &mut speed, &mut width)
        })?;
        Ok((speed, width))
    }

    /// Tells ib_core's event handlers (and user `ibv_get_async_event`)
    /// that a port changed state.
    pub(crate) fn dispatch_port_event(&self, port: u32, event: PortEvent) {
        let mut ev = bindings::ib_event {
            device: self.as_raw(),
            event: match event {
                PortEvent::Active => bindings::IB_EVENT_PORT_ACTIVE,
                PortEvent::Error => bindings::IB_EVENT_PORT_ERR,
            },
            ..Default::default()
        };
        ev.element.port_num = port;
        // SAFETY: `ev` is a fully initialised event for this live device;
        // ib_dispatch_event does not keep the pointer.
        unsafe { bindings::ib_dispatch_event(&ev) };
    }
}

/// Whether any RDMA device (rxud or not) is registered under `name`.
pub(crate) fn name_taken(name: &CStr) -> bool {
    // SAFETY: `name` is NUL-terminated; a device found comes with a
    // registration reference, which we drop at once.
    unsafe {
        let dev =
            bindings::ib_device_get_by_name(name.as_char_ptr(), bindings::RDMA_DRIVER_UNKNOWN);
        if dev.is_null() {
            return false;
        }
        bindings::ib_device_put(dev);
    }
    true
}

/// An ib_core object (`ib_ucontext`, `ib_pd`, ...) followed by the
/// driver's data for it. ib_core allocates it with the size the ops declare
/// (`size_ib_*`), zeroed, and frees it after the destroy callback; the
/// adapters initialise `data` on create and drop it on destroy.
#[repr(C)]
pub(crate) struct Object<I, D> {
    ib: Opaque<I>,
    data: D,
}

impl<I, D> Object<I, D> {
    /// An object the driver allocates itself (an `ib_mr`).
    pub(super) fn new(ib: Opaque<I>, data: D) -> Self {
        Self { ib, data }
    }

    /// Stores the outcome of a driver's create verb in the object.
    ///
    /// # Safety
    ///
    /// `obj` is an object ib_core allocated with room for `Object<I, D>`,
    /// whose data is not initialised.
    pub(super) unsafe fn init(obj: *mut I, data: Result<D>) -> kernel::ffi::c_int {
        match data {
            Ok(d) => {
                // SAFETY: per the caller, the data slot is ours to write.
                unsafe { core::ptr::write(core::ptr::addr_of_mut!((*obj.cast::<Self>()).data), d) };
                0
            }
            Err(e) => e.to_errno(),
        }
    }

    /// Drops the data of an object ib_core is destroying.
    ///
    /// # Safety
    ///
    /// `obj` was initialised by [`Object::init`] and is not used again.
    pub(super) unsafe fn drop_data(obj: *mut I) {
        // SAFETY: per the caller.
        unsafe { core::ptr::drop_in_place(core::ptr::addr_of_mut!((*obj.cast::<Self>()).data)) };
    }

    /// The driver data of a live object.
    ///
    /// # Safety
    ///
    /// `obj` was initialised by [`Object::init`] and is not destroyed
    /// during `'a`.
    pub(super) unsafe fn data_of<'a>(obj: *mut I) -> &'a D {
        // SAFETY: per the caller.
        unsafe { &(*obj.cast::<Self>()).data }
    }
}

/// The user ABI version, for the `rxud_abi_version` sysfs attribute
/// (rust/ffi/ib.c).
#[no_mangle]
pub(crate) extern "C" fn rxud_uverbs_abi_version() -> u32 {
    crate::abi::UVERBS_ABI_VERSION
}

/// The `ib_device_ops` adapters for `T`; those of each object kind are in
/// its module (`cq`, `qp`, `srq`, `ah`, `mmap`).
pub(super) struct Adapter<T>(PhantomData<T>);

/// `Some(f)` if the driver implements the verb behind `f` (its `HAS_*`
/// constant), else `None`: ib_core then sees NULL.
macro_rules! wired {
    ($has:expr, $f:expr) => {
        if $has {
            Some($f)
        } else {
            None
        }
    };
}

impl<T: DeviceOps> Adapter<T> {
    const HAS_MR: bool = T::HAS_REG_USER_MR || T::HAS_GET_DMA_MR || T::HAS_ALLOC_MR;

    const OPS: bindings::ib_device_ops = bindings::ib_device_ops {
        driver_id: bindings::RDMA_DRIVER_UNKNOWN,
        dealloc_driver: Some(Self::dealloc_driver),
        query_device: Some(Self::query_device),
        query_port: Some(Self::query_port),
        get_port_immutable: Some(Self::get_port_immutable),
        query_pkey: wired!(T::HAS_QUERY_PKEY, Self::query_pkey),
        get_link_layer: wired!(T::HAS_LINK_LAYER, Self::get_link_layer),
        alloc_ucontext: wired!(T::HAS_ALLOC_CONTEXT, Self::alloc_ucontext),
        dealloc_ucontext: wired!(T::HAS_ALLOC_CONTEXT, Self::dealloc_ucontext),
        disassociate_ucontext: wired!(
            T::HAS_ALLOC_CONTEXT && T::HAS_DISASSOCIATE_CONTEXT,
            Self::disassociate_ucontext
        ),
        size_ib_ucontext: mem::size_of::<Object<bindings::ib_ucontext, T::Context>>(),
        alloc_pd: Some(Self::alloc_pd),
        dealloc_pd: Some(Self::dealloc_pd),
        size_ib_pd: mem::size_of::<Object<bindings::ib_pd, T::Pd>>(),
        reg_user_mr: wired!(T::HAS_REG_USER_MR, Self::reg_user_mr),
        rereg_user_mr: wired!(
            T::HAS_REREG_USER_MR && T::HAS_USER_RANGE,
            Self::rereg_user_mr
        ),
        get_dma_mr: wired!(T::HAS_GET_DMA_MR, Self::get_dma_mr),
        alloc_mr: wired!(T::HAS_ALLOC_MR, Self::alloc_mr),
        map_mr_sg: wired!(T::HAS_MR_CLEAR_PAGES && T::HAS_MR_ADD_PAGE, Self::map_mr_sg),
        dereg_mr: wired!(Self::HAS_MR, Self::dereg_mr),
        alloc_mw: wired!(T::HAS_ALLOC_MW, Self::alloc_mw),
        dealloc_mw: wired!(T::HAS_ALLOC_MW, Self::dealloc_mw),
        size_ib_mw: mem::size_of::<Object<bindings::ib_mw, T::Mw>>(),
        create_cq: Some(Self::create_cq),
        destroy_cq: Some(Self::destroy_cq),
        resize_cq: wired!(T::HAS_RESIZE_CQ, Self::resize_cq),
        req_notify_cq: wired!(T::HAS_REQ_NOTIFY_CQ, Self::req_notify_cq),
        size_ib_cq: mem::size_of::<Object<bindings::ib_cq, T::Cq>>(),
        create_srq: wired!(T::HAS_CREATE_SRQ, Self::create_srq),
        modify_srq: wired!(T::HAS_MODIFY_SRQ, Self::modify_srq),
        query_srq: wired!(T::HAS_QUERY_SRQ, Self::query_srq),
        destroy_srq: wired!(T::HAS_CREATE_SRQ, Self::destroy_srq),
        size_ib_srq: mem::size_of::<Object<bindings::ib_srq, T::Srq>>(),
        create_qp: Some(Self::create_qp),
        modify_qp: Some(Self::modify_qp),
        query_qp: wired!(T::HAS_QUERY_QP, Self::query_qp),
        fill_res_qp_entry: wired!(T::HAS_QP_DETAILS, Self::fill_res_qp_entry),
        attach_mcast: wired!(T::HAS_ATTACH_MCAST, Self::attach_mcast),
        detach_mcast: wired!(T::HAS_ATTACH_MCAST, Self::detach_mcast),
        destroy_qp: Some(Self::destroy_qp),
        post_send: wired!(T::HAS_POST_SEND_DOORBELL, Self::post_send),
        // Kernel consumers' verbs: with these three (and the verbs every
        // device has) ib_core counts the device as a kernel-verbs
        // provider, and its MAD and CM clients attach to it.
        post_recv: wired!(T::HAS_POST_RECV, Self::post_recv),
        post_srq_recv: wired!(T::HAS_POST_SRQ_RECV, Self::post_srq_recv),
        poll_cq: wired!(T::HAS_POLL_CQ, Self::poll_cq),
        size_ib_qp: mem::size_of::<Object<bindings::ib_qp, T::Qp>>(),
        create_ah: wired!(T::HAS_CREATE_AH, Self::create_ah),
        create_user_ah: wired!(T::HAS_CREATE_AH, Self::create_ah),
        destroy_ah: wired!(T::HAS_CREATE_AH, Self::destroy_ah),
        size_ib_ah: mem::size_of::<Object<bindings::ib_ah, T::Ah>>(),
        alloc_hw_port_stats: wired!(T::HAS_PORT_COUNTERS, Self::alloc_hw_port_stats),
        get_hw_stats: wired!(T::HAS_PORT_COUNTERS, Self::get_hw_stats),
        // Shared rings are mapped through user contexts.
        mmap: wired!(T::HAS_ALLOC_CONTEXT, super::mmap::mmap),
        mmap_free: wired!(T::HAS_ALLOC_CONTEXT, super::mmap::mmap_free),
        uverbs_abi_ver: crate::abi::UVERBS_ABI_VERSION,
        // SAFETY: all-zeroes is a valid `ib_device_ops` (NULL callbacks).
        ..unsafe { mem::zeroed() }
    };

    /// `ib_device_ops.dealloc_driver`.
    ///
    /// # Safety
    ///
    /// Called by ib_core once, in process context, on a device whose ops we
    /// set, i.e. a `Device<T>` with initialised data, after every verbs
    /// callback has returned and before the memory is freed.
    unsafe extern "C" fn dealloc_driver(ib: *mut bindings::ib_device) {
        // SAFETY: per the function's contract.
        let dev = unsafe { Device::<T>::from_raw(ib) };
        T::dealloc(dev);
        // INVARIANT: `data` stops being initialised here, in
        // `dealloc_driver`, as the invariant allows; `dev` is not used again.
        // SAFETY: no verbs callback runs after `dealloc_driver`, `NewDevice`
        // is gone, and `DeviceRef`s cannot exist (the registration count is
        // zero), so nothing can reach `data` any more. Drop it in place.
        unsafe {
            core::ptr::drop_in_place(core::ptr::addr_of_mut!((*ib.cast::<Device<T>>()).data))
        };
    }

    /// `ib_device_ops.alloc_ucontext`.
    ///
    /// # Safety
    ///
    /// Called by ib_core in process context with a zeroed object of
    /// `size_ib_ucontext` bytes whose `device` is our live device, and the
    /// call's udata.
    unsafe extern "C" fn alloc_ucontext(
        uctx: *mut bindings::ib_ucontext,
        udata: *mut bindings::ib_udata,
    ) -> kernel::ffi::c_int {
        // SAFETY: per the function's contract.
        let (dev, udata) = unsafe {
            (
                Device::<T>::from_raw((*uctx).device),
                UData::from_raw(udata),
            )
        };
        let r = T::alloc_context(dev, &udata);
        // SAFETY: the object has room for `Object<_, T::Context>`, data
        // not yet initialised.
        unsafe { Object::<_, T::Context>::init(uctx, r) }
    }

    /// `ib_device_ops.dealloc_ucontext`.
    ///
    /// # Safety
    ///
    /// Called by ib_core once per context `alloc_ucontext` initialised, in
    /// process context, when nothing uses it any more.
    unsafe extern "C" fn dealloc_ucontext(uctx: *mut bindings::ib_ucontext) {
        // SAFETY: per the function's contract.
        unsafe { Object::<_, T::Context>::drop_data(uctx) };
    }

    /// `ib_device_ops.disassociate_ucontext`.
    ///
    /// # Safety
    ///
    /// Called by ib_core (`uverbs_destroy_ufile_hw` at device removal) in
    /// process context for a live context `alloc_ucontext` initialised.
    unsafe extern "C" fn disassociate_ucontext(uctx: *mut bindings::ib_ucontext) {
        // SAFETY: per the function's contract.
        T::disassociate_context(unsafe { Object::<_, T::Context>::data_of(uctx) });
    }

    /// `ib_device_ops.alloc_pd`.
    ///
    /// # Safety
    ///
    /// As [`Self::alloc_ucontext`], for a PD object of `size_ib_pd` bytes
    /// and a udata that is NULL for kernel callers.
    unsafe extern "C" fn alloc_pd(
        pd: *mut bindings::ib_pd,
        udata: *mut bindings::ib_udata,
    ) -> kernel::ffi::c_int {
        // SAFETY: per the function's contract.
        let (dev, udata) = unsafe { (Device::<T>::from_raw((*pd).device), UData::from_raw(udata)) };
        let r = T::alloc_pd(dev, &udata);
        // SAFETY: as in `alloc_ucontext`.
        unsafe { Object::<_, T::Pd>::init(pd, r) }
    }

    /// `ib_device_ops.dealloc_pd`.
    ///
    /// # Safety
    ///
    /// Called by ib_core once per PD `alloc_pd` initialised, in process
    /// context, after every object using it is gone.
    unsafe extern "C" fn dealloc_pd(
        pd: *mut bindings::ib_pd,
        _udata: *mut bindings::ib_udata,
    ) -> kernel::ffi::c_int {
        // SAFETY: per the function's contract.
        unsafe { Object::<_, T::Pd>::drop_data(pd) };
        0
    }

    /// `ib_device_ops.query_device`.
    ///
    /// # Safety
    ///
    /// Called by ib_core on a live device of ours with an attribute struct
    /// exclusively ours for the call.
    unsafe extern "C" fn query_device(
        ib: *mut bindings::ib_device,
        attr: *mut bindings::ib_device_attr,
        _udata: *mut bindings::ib_udata,
    ) -> kernel::ffi::c_int {
        // SAFETY: per the function's contract.
        let (dev, attr) = unsafe { (Device::<T>::from_raw(ib), DeviceAttr::from_raw(attr)) };
        to_c(T::query_device(dev, attr))
    }

    /// `ib_device_ops.query_port`.
    ///
    /// # Safety
    ///
    /// As [`Self::query_device`], for a port attribute struct.
    unsafe extern "C" fn query_port(
        ib: *mut bindings::ib_device,
        port: u32,
        attr: *mut bindings::ib_port_attr,
    ) -> kernel::ffi::c_int {
        // SAFETY: per the function's contract.
        let (dev, attr) = unsafe { (Device::<T>::from_raw(ib), PortAttr::from_raw(attr)) };
        to_c(T::query_port(dev, port, attr))
    }

    /// `ib_device_ops.get_port_immutable`.
    ///
    /// # Safety
    ///
    /// As [`Self::query_device`], for the port's immutable attributes.
    unsafe extern "C" fn get_port_immutable(
        ib: *mut bindings::ib_device,
        port: u32,
        out: *mut bindings::ib_port_immutable,
    ) -> kernel::ffi::c_int {
        // SAFETY: per the function's contract.
        let dev = unsafe { Device::<T>::from_raw(ib) };
        match T::port_immutable(dev, port) {
            Ok(p) => {
                // SAFETY: `out` is ours to write for the call.
                let out = unsafe { &mut *out };
                out.pkey_tbl_len = p.pkey_tbl_len as _;
                out.gid_tbl_len = p.gid_tbl_len as _;
                out.core_cap_flags = PortImmutable::ROCE_V2_CAPS;
                out.max_mad_size = p.max_mad_size;
                0
            }
            Err(e) => e.to_errno(),
        }
    }

    /// `ib_device_ops.query_pkey`.
    ///
    /// # Safety
    ///
    /// Called by ib_core on a live device of ours with `pkey` valid for a
    /// write.
    unsafe extern "C" fn query_pkey(
        ib: *mut bindings::ib_device,
        port: u32,
        index: u16,
        pkey: *mut u16,
    ) -> kernel::ffi::c_int {
        // SAFETY: per the function's contract.
        let dev = unsafe { Device::<T>::from_raw(ib) };
        match T::query_pkey(dev, port, index) {
            Ok(value) => {
                // SAFETY: per the function's contract.
                unsafe { *pkey = value };
                0
            }
            Err(e) => e.to_errno(),
        }
    }

    /// `ib_device_ops.get_link_layer`.
    ///
    /// # Safety
    ///
    /// Called by ib_core on a live device of ours.
    unsafe extern "C" fn get_link_layer(
        ib: *mut bindings::ib_device,
        port: u32,
    ) -> bindings::rdma_link_layer {
        // SAFETY: per the function's contract.
        let dev = unsafe { Device::<T>::from_raw(ib) };
        T::link_layer(dev, port).to_raw()
    }
}

/// `ERR_PTR(e)`: how ib_core's pointer-returning verbs report errors.
pub(super) fn err_ptr<P>(e: Error) -> *mut P {
    e.to_errno() as isize as *mut P
}

pub(super) fn to_c(r: Result) -> kernel::ffi::c_int {
    match r {
        Ok(()) => 0,
        Err(e) => e.to_errno(),
    }
}

/// A device that exists but is not registered; owned by its creator.
///
/// # Invariants
///
/// `ptr` is a `Device<T>` with initialised data and our ops set; no one
/// else owns it.
pub(crate) struct NewDevice<T: DeviceOps> {
    ptr: NonNull<Device<T>>,
}

impl<T: DeviceOps> NewDevice<T> {
    /// Allocates a device, initialises its data with `init` and sets its
    /// static description and verbs.
    pub(crate) fn new(
        module: &'static ThisModule,
        info: &DeviceInfo<'_>,
        init: impl PinInit<T, Error>,
    ) -> Result<Self> {
        kernel::build_assert!(
            mem::align_of::<Device<T>>() <= 8,
            "kmalloc guarantees 8-byte alignment"
        );
        // SAFETY: the size covers the whole `Device<T>`, whose first field
        // is the `ib_device` (`repr(C)`), as `_ib_alloc_device` requires.
        let ib = unsafe { bindings::rxud_ib_alloc_device(mem::size_of::<Device<T>>()) };
        let ib = NonNull::new(ib).ok_or(ENOMEM)?;
        let dev = ib.cast::<Device<T>>();
        // SAFETY: `data` lies inside the allocation and is not yet
        // initialised; the device is never moved, so `data` is pinned.
        let res = unsafe { init.__pinned_init(core::ptr::addr_of_mut!((*dev.as_ptr()).data)) };
        if let Err(e) = res {
            // SAFETY: the data is not initialised and no ops are set, so
            // ib_dealloc_device only frees the core's part.
            unsafe { bindings::ib_dealloc_device(ib.as_ptr()) };
            return Err(e);
        }
        // INVARIANT: `ib` came from `_ib_alloc_device` with room for the
        // whole `Device<T>`, and its `data` is now initialised; only our
        // `dealloc_driver` (set below) drops it.
        let raw = ib.as_ptr();
        let mut ops = Adapter::<T>::OPS;
        ops.owner = module.as_ptr().cast();
        ops.device_group = &raw const bindings::rxud_device_attr_group;
        // SAFETY: `raw` is ours and not yet visible to anyone else. The
        // description fields are plain data; `ib_set_device_ops` copies
        // `ops`.
        unsafe {
            (*raw).node_guid = u64::from_ne_bytes(info.node_guid);
            (*raw).node_type = bindings::RDMA_NODE_IB_CA as u8;
            (*raw).phys_port_cnt = info.phys_port_cnt;
            (*raw).num_comp_vectors = info.num_comp_vectors;
            let desc = info.node_desc.as_bytes();
            let n = desc.len().min((*raw).node_desc.len() - 1);
            for (i, b) in desc[..n].iter().enumerate() {
                (*raw).node_desc[i] = *b as _;
            }
            // User commands beyond ib_core's default set that the ops
            // above implement.
            if T::HAS_REQ_NOTIFY_CQ {
                (*raw).uverbs_cmd_mask |= 1u64 << bindings::IB_USER_VERBS_CMD_REQ_NOTIFY_CQ;
            }
            if T::HAS_POST_SEND_DOORBELL {
                (*raw).uverbs_cmd_mask |= 1u64 << bindings::IB_USER_VERBS_CMD_POST_SEND;
            }
            bindings::rxud_ib_mark_name_assigned_by_user(raw);
            bindings::ib_set_device_ops(raw, &ops);
        }
        // INVARIANT: `dev` is a `Device<T>` with initialised data and our
        // ops set (above); it is not registered, so no one else owns it.
        Ok(Self { ptr: dev })
    }

    /// A handle that outlives registration.
    pub(crate) fn handle(&self) -> DeviceHandle<T> {
        // SAFETY: the device is alive.
        unsafe { DeviceHandle::new(self.ptr) }
    }

    /// Binds `ndev` to `port`; ib_core holds a reference on it until the
    /// device is freed.
    pub(crate) fn set_netdev(&self, port: u32, ndev: &NetDevice) -> Result {
        // SAFETY: both devices are alive; ib_core takes its own reference.
        to_result(unsafe {
            bindings::ib_device_set_netdev(self.ptr.as_ptr().cast(), ndev.as_raw(), port)
        })
    }

    /// Registers the device under `name`. From here on ib_core owns it and
    /// may unregister and free it at any moment, even before this returns
    /// (use a [`DeviceHandle`] taken beforehand to find it again). On error
    /// the device is freed.
    pub(crate) fn register(self, name: &CStr) -> Result {
        let raw = self.ptr.as_ptr().cast::<bindings::ib_device>();
        // SAFETY: the device is ours and fully set up; the name is copied.
        let ret =
            unsafe { bindings::ib_register_device(raw, name.as_char_ptr(), core::ptr::null_mut()) };
        if ret != 0 {
            // `self` drops here and deallocates the device.
            return Err(Error::from_errno(ret));
        }
        mem::forget(self);
        Ok(())
    }
}

impl<T: DeviceOps> Drop for NewDevice<T> {
    fn drop(&mut self) {
        // SAFETY: the device is ours and unregistered; this calls our
        // `dealloc_driver`, which drops the data, then frees the device.
        unsafe { bindings::ib_dealloc_device(self.ptr.as_ptr().cast()) };
    }
}

/// Keeps a device's memory (not its driver data) alive: a `struct device`
/// reference. Enough to identify the device and to unregister it.
///
/// # Invariants
///
/// We hold one `get_device` reference on `ptr`'s `ib_device`.
pub(crate) struct DeviceHandle<T: DeviceOps> {
    ptr: NonNull<Device<T>>,
}

// SAFETY: the handle only calls thread-safe ib_core entry points.
unsafe impl<T: DeviceOps> Send for DeviceHandle<T> {}
// SAFETY: as above; `&DeviceHandle` exposes nothing more.
unsafe impl<T: DeviceOps> Sync for DeviceHandle<T> {}

impl<T: DeviceOps> DeviceHandle<T> {
    /// # Safety
    ///
    /// `ptr` must be an allocated `Device<T>` whose `struct device` is live.
    unsafe fn new(ptr: NonNull<Device<T>>) -> Self {
        // SAFETY: the caller guarantees the device is live.
        unsafe { bindings::rxud_ib_device_get_dev(ptr.as_ptr().cast()) };
        // INVARIANT: the `get_device` reference just taken passes to the
        // new handle.
        Self { ptr }
    }

    fn raw(&self) -> *mut bindings::ib_device {
        self.ptr.as_ptr().cast()
    }

    /// Whether both handles are of the same device.
    pub(crate) fn same(&self, other: &Self) -> bool {
        self.ptr == other.ptr
    }

    /// Whether this is the handle of `dev`.
    pub(crate) fn is(&self, dev: &Device<T>) -> bool {
        self.raw() == dev.as_raw()
    }

    /// A registration reference, if the device is still registered and
    /// not being unregistered.
    pub(crate) fn try_get(&self) -> Option<DeviceRef<T>> {
        // SAFETY: our `get_device` reference keeps the memory valid, and
        // `ib_device_try_get` is safe on any state of the device.
        if unsafe { bindings::rxud_ib_device_try_get(self.raw()) } {
            // INVARIANT: `ib_device_try_get` succeeded: the registration
            // reference it took passes to the new `DeviceRef`.
            Some(DeviceRef { ptr: self.ptr })
        } else {
            None
        }
    }

    /// Unregisters the device and waits until it is gone, if it is still
    /// registered. Sleeps; must not be called from a verbs callback or with
    /// locks ib_core may take.
    pub(crate) fn unregister(&self) {
        // SAFETY: our reference keeps the memory valid; unregistering an
        // unregistered device is a no-op in ib_core.
        unsafe { bindings::ib_unregister_device(self.raw()) };
    }
}

impl<T: DeviceOps> Clone for DeviceHandle<T> {
    fn clone(&self) -> Self {
        // SAFETY: our own reference keeps the device live.
        unsafe { Self::new(self.ptr) }
    }
}

impl<T: DeviceOps> Drop for DeviceHandle<T> {
    fn drop(&mut self) {
        // SAFETY: we own one reference (type invariant).
        unsafe { bindings::rxud_ib_device_put_dev(self.raw()) };
    }
}

/// A registration reference (`ib_device_try_get`): while it exists the
/// device stays registered enough that `dealloc_driver` cannot run, so the
/// driver data is valid.
///
/// # Invariants
///
/// We hold one registration reference on `ptr`.
pub(crate) struct DeviceRef<T: DeviceOps> {
    ptr: NonNull<Device<T>>,
}

impl<T: DeviceOps> DeviceRef<T> {
    /// Starts unregistration on a workqueue and returns at once. Safe to call
    /// with RTNL held (netdev notifier).
    pub(crate) fn unregister_queued(&self) {
        // SAFETY: the registration reference guarantees the device is
        // registered, which `ib_unregister_device_queued` requires.
        unsafe { bindings::ib_unregister_device_queued(self.ptr.as_ptr().cast()) };
    }
}

impl<T: DeviceOps> core::ops::Deref for DeviceRef<T> {
    type Target = Device<T>;

    fn deref(&self) -> &Device<T> {
        // SAFETY: the registration reference keeps the device and its data
        // alive (type invariant).
        unsafe { self.ptr.as_ref() }
    }
}

impl<T: DeviceOps> Drop for DeviceRef<T> {
    fn drop(&mut self) {
        // SAFETY: we own one registration reference (type invariant).
        unsafe { bindings::ib_device_put(self.ptr.as_ptr().cast()) };
    }
}
