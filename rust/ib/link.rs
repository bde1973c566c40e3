// SPDX-License-Identifier: GPL-2.0

//! rdma link types: `rdma link add NAME type TYPE netdev IF`.

use crate::ffi::bindings;
use crate::net::NetDevice;
use core::{
    ptr::{self, NonNull},
    sync::atomic::{AtomicPtr, Ordering},
};
use kernel::{prelude::*, str::CStr, types::Opaque};

/// A link type: what `rdma link add` calls to create a device.
pub(crate) trait LinkOps: Send + Sync + 'static {
    /// The `type` keyword users give to `rdma link add`.
    const TYPE: &'static CStr;

    /// Creates device `name` on `ndev`. Called without RTNL, possibly
    /// concurrently with itself.
    fn newlink(&self, name: &CStr, ndev: &NetDevice) -> Result;
}

/// The context of the one registered link type. `rdma_link_ops.newlink`
/// carries no context pointer, so it has to be global; only one
/// [`Registration`] may exist at a time.
static CONTEXT: AtomicPtr<kernel::ffi::c_void> = AtomicPtr::new(ptr::null_mut());

/// A registered link type; unregistered on drop.
pub(crate) struct Registration<T: LinkOps> {
    ops: Pin<KBox<Opaque<bindings::rdma_link_ops>>>,
    /// Pointed to by `CONTEXT` while registered.
    _context: KBox<T>,
}

// SAFETY: the ops struct is only touched by ib_core under its
// `link_ops_rwsem`; the context is `Send + Sync`.
unsafe impl<T: LinkOps> Send for Registration<T> {}
// SAFETY: as above; `&Registration` gives access only to `&T`.
unsafe impl<T: LinkOps> Sync for Registration<T> {}

impl<T: LinkOps> Registration<T> {
    pub(crate) fn register(context: T) -> Result<Self> {
        let context = KBox::new(context, GFP_KERNEL)?;
        let ops = KBox::pin(
            Opaque::new(bindings::rdma_link_ops {
                list: bindings::list_head::default(),
                type_: T::TYPE.as_char_ptr(),
                newlink: Some(Self::newlink),
            }),
            GFP_KERNEL,
        )?;
        let raw = core::ptr::from_ref::<T>(&*context).cast_mut().cast();
        if CONTEXT
            .compare_exchange(ptr::null_mut(), raw, Ordering::AcqRel, Ordering::Acquire)
            .is_err()
        {
            return Err(EBUSY);
        }
        // SAFETY: `ops` is pinned and outlives the registration (`Drop`
        // unregisters first); `CONTEXT` is set before any call can come.
        unsafe { bindings::rdma_link_register(ops.get()) };
        Ok(Self {
            ops,
            _context: context,
        })
    }

    /// `rdma_link_ops.newlink`.
    ///
    /// # Safety
    ///
    /// Called by ib_core's netlink handler in process context with a
    /// NUL-terminated device name and a held, live netdev.
    unsafe extern "C" fn newlink(
        name: *const kernel::ffi::c_char,
        ndev: *mut bindings::net_device,
    ) -> kernel::ffi::c_int {
        // `CONTEXT` holds our boxed `T` from before registration
        // until after unregistration, which waits for running calls (it
        // takes `link_ops_rwsem` for writing; calls hold it for reading).
        let Some(ctx) = NonNull::new(CONTEXT.load(Ordering::Acquire)) else {
            return ENODEV.to_errno();
        };
        // SAFETY: see above: only `Registration<T>` stores here and only
        // its ops call this function, so the pointee is a live `T`.
        let ctx = unsafe { ctx.cast::<T>().as_ref() };
        // SAFETY: ib_core passes a NUL-terminated name and a net_device it
        // holds for the whole call.
        let (name, ndev) = unsafe { (CStr::from_char_ptr(name), NetDevice::from_raw(ndev)) };
        match ctx.newlink(name, ndev) {
            Ok(()) => 0,
            Err(e) => e.to_errno(),
        }
    }
}

impl<T: LinkOps> Drop for Registration<T> {
    fn drop(&mut self) {
        // SAFETY: registered in `register`; returns once no `newlink` call
        // is running.
        unsafe { bindings::rdma_link_unregister(self.ops.get()) };
        CONTEXT.store(ptr::null_mut(), Ordering::Release);
    }
}
