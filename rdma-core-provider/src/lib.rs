// SPDX-License-Identifier: GPL-2.0 OR Linux-OpenIB

//! librxud: the libibverbs provider for rxud devices.
//!
//! libibverbs dlopen()s `librxud-rdmav34.so`; its load-time constructor
//! registers [`DEVICE_OPS`]. For each RDMA device no other provider claims,
//! libibverbs asks [`match_device`], and for a device we claim it calls
//! [`alloc_device`] and, on `ibv_open_device`, `context::alloc_context`.

mod ah;
mod context;
mod cq;
mod mmap;
mod mr;
mod mw;
mod pd;
mod post;
mod qp;
mod ring;
mod srq;
mod sys;
mod wr;
mod xud;

use core::ffi::{c_void, CStr};
use std::os::unix::ffi::OsStrExt;
use sys::*;

/// The table libibverbs keeps a pointer to.
struct DeviceOps(verbs_device_ops);

// SAFETY: the table is immutable and its pointers refer to statics.
unsafe impl Sync for DeviceOps {}

/// No table entries: rxud has no driver id, PCI id or modalias; matching
/// is `match_device`'s. The table must still exist and be terminated.
struct MatchTable([verbs_match_ent; 1]);
// SAFETY: immutable; the only pointer in it is NULL.
unsafe impl Sync for MatchTable {}
static MATCH_TABLE: MatchTable = MatchTable([verbs_match_ent {
    driver_data: core::ptr::null(),
    u: 0,
    vendor: 0,
    device: 0,
    kind: 0,
}]);

static DEVICE_OPS: DeviceOps = DeviceOps(verbs_device_ops {
    name: c"rxud".as_ptr(),
    match_min_abi_version: rxud_abi::UVERBS_ABI_VERSION,
    match_max_abi_version: rxud_abi::UVERBS_ABI_VERSION,
    match_table: MATCH_TABLE.0.as_ptr(),
    static_providers: core::ptr::null(),
    match_device: Some(match_device),
    alloc_context: Some(context::alloc_context),
    import_context: None,
    alloc_device: Some(alloc_device),
    uninit_device: Some(uninit_device),
});

extern "C" fn register() {
    // SAFETY: `DEVICE_OPS` is a valid, immortal ops table.
    unsafe { verbs_register_driver_34(&DEVICE_OPS.0) };
}

/// Runs when libibverbs dlopen()s us, as C providers' constructors do.
#[used]
#[link_section = ".init_array"]
static REGISTER: extern "C" fn() = register;

/// rxud registers with `RDMA_DRIVER_UNKNOWN`, so it is recognised by the
/// sysfs attribute every rxud device has (and no other device has).
unsafe extern "C" fn match_device(dev: *mut verbs_sysfs_dev) -> bool {
    // SAFETY: libibverbs passes a valid sysfs device whose `ibdev_path` is
    // NUL-terminated.
    let path = unsafe { CStr::from_ptr((*dev).ibdev_path.as_ptr()) };
    let dir = std::path::Path::new(std::ffi::OsStr::from_bytes(path.to_bytes()));
    dir.join(rxud_abi::SYSFS_ABI_ATTR).exists()
}

unsafe extern "C" fn alloc_device(_dev: *mut verbs_sysfs_dev) -> *mut verbs_device {
    // libibverbs requires the device zeroed; it fills it in.
    // SAFETY: plain allocation; freed in `uninit_device`.
    unsafe { calloc(1, core::mem::size_of::<verbs_device>()).cast() }
}

unsafe extern "C" fn uninit_device(dev: *mut verbs_device) {
    // SAFETY: allocated by `alloc_device`; libibverbs is done with it.
    unsafe { free(dev.cast::<c_void>()) };
}

/// Whether `ctx` is a context of an rxud device: its device is librxud's
/// (registered with [`DEVICE_OPS`]), not another provider's. librxud's
/// direct verbs are exported to applications, which may pass any context.
///
/// # Safety
///
/// `ctx` is an open device context (of any provider).
unsafe fn is_rxud_context(ctx: *const ibv_context) -> bool {
    // SAFETY: every libibverbs device is a `verbs_device` with its
    // `ibv_device` first; an open context's device is live.
    unsafe {
        let dev = (*ctx).device.cast::<verbs_device>();
        !dev.is_null() && core::ptr::eq((*dev).ops, &DEVICE_OPS.0)
    }
}

/// Allocates a zeroed `T` and hands it to `create`, the kernel command that
/// fills it in. On failure frees it, sets `errno` to the returned error and
/// returns NULL, as libibverbs expects of object-creating callbacks.
///
/// # Safety
///
/// `T` must be valid when all-zero, and `create` must either succeed or
/// leave no reference to the object behind.
unsafe fn create_object<T>(create: impl FnOnce(*mut T) -> core::ffi::c_int) -> *mut T {
    // SAFETY: plain allocation; the caller's destroy path frees it.
    let obj = unsafe { calloc(1, core::mem::size_of::<T>()) }.cast::<T>();
    if obj.is_null() {
        return obj;
    }
    let ret = create(obj);
    if ret != 0 {
        // SAFETY: allocated above and, per the caller, unreferenced.
        unsafe { free(obj.cast()) };
        set_errno(ret);
        return core::ptr::null_mut();
    }
    obj
}

/// Creates an object that has rings: allocates a zeroed `T` and runs
/// `create`, the kernel command that fills it in and returns the driver
/// part of its response, then `map`, which maps the rings that response
/// describes and keeps them in the object. If `map` fails, `destroy`
/// destroys the kernel object again; then, as with any failure, the object
/// is freed, `errno` set and NULL returned (see [`create_object`]).
///
/// # Safety
///
/// `T` must be valid when all-zero. `create` must either succeed or leave
/// no reference to the object behind; `map` must keep nothing in the object
/// when it fails; `destroy` must destroy the kernel object `create` made,
/// after which nothing refers to the object.
unsafe fn create_object_with_rings<T, R>(
    create: impl FnOnce(*mut T) -> Result<R, core::ffi::c_int>,
    map: impl FnOnce(*mut T, R) -> Result<(), core::ffi::c_int>,
    destroy: impl FnOnce(*mut T) -> core::ffi::c_int,
) -> *mut T {
    // SAFETY: `T` is valid zeroed, per the caller. If mapping fails, the
    // kernel object is destroyed again before the error is returned, so
    // nothing refers to the object when `create_object` frees it.
    unsafe {
        create_object(|obj| {
            let resp = match create(obj) {
                Ok(resp) => resp,
                Err(err) => return err,
            };
            match map(obj, resp) {
                Ok(()) => 0,
                Err(err) => {
                    // The object is unusable; nothing but its kernel handle
                    // exists yet. The verb fails either way, so an error
                    // destroying it has nowhere to go.
                    destroy(obj);
                    err
                }
            }
        })
    }
}

/// Runs `destroy`, the kernel command that destroys `obj`, and frees `obj`
/// if it succeeded (on failure, e.g. `EBUSY`, the object stays usable).
///
/// # Safety
///
/// `obj` came from [`create_object`] (or [`create_object_with_rings`]) and
/// is not used after a success.
unsafe fn destroy_object<T>(
    obj: *mut T,
    destroy: impl FnOnce(*mut T) -> core::ffi::c_int,
) -> core::ffi::c_int {
    let ret = destroy(obj);
    if ret == 0 {
        // SAFETY: the kernel object is gone; per the caller nothing uses it.
        unsafe { free(obj.cast()) };
    }
    ret
}

/// Sets `errno`, for callbacks that report failure by returning NULL.
fn set_errno(err: i32) {
    // SAFETY: `__errno_location` returns this thread's errno.
    unsafe { *__errno_location() = err };
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sysfs_dev(path: &std::path::Path) -> Box<verbs_sysfs_dev> {
        // SAFETY: all-zero is a valid `verbs_sysfs_dev` (integers and
        // arrays only).
        let mut dev: Box<verbs_sysfs_dev> = Box::new(unsafe { core::mem::zeroed() });
        let bytes = path.as_os_str().as_bytes();
        assert!(bytes.len() < dev.ibdev_path.len());
        for (d, s) in dev.ibdev_path.iter_mut().zip(bytes) {
            *d = *s as _;
        }
        dev
    }

    #[test]
    fn matches_only_devices_with_the_abi_attribute() {
        let root = std::env::temp_dir().join(format!("rxud-match-{}", std::process::id()));
        let rxud = root.join("rxud0");
        let other = root.join("mlx5_0");
        std::fs::create_dir_all(&rxud).unwrap();
        std::fs::create_dir_all(&other).unwrap();
        std::fs::write(rxud.join(rxud_abi::SYSFS_ABI_ATTR), "1\n").unwrap();
        // SAFETY: valid sysfs device records with NUL-terminated paths.
        unsafe {
            assert!(match_device(&mut *sysfs_dev(&rxud)));
            assert!(!match_device(&mut *sysfs_dev(&other)));
            assert!(!match_device(&mut *sysfs_dev(&root.join("gone"))));
        }
        std::fs::remove_dir_all(&root).unwrap();
    }

    #[test]
    fn contexts_are_ours_by_their_devices_ops() {
        // SAFETY: all-zero is a valid `verbs_device` and `ibv_context`
        // (integers, arrays, pointers and a zeroed mutex).
        let (mut dev, mut other, mut ctx): (
            Box<verbs_device>,
            Box<verbs_device>,
            Box<ibv_context>,
        ) = unsafe {
            (
                Box::new(core::mem::zeroed()),
                Box::new(core::mem::zeroed()),
                Box::new(core::mem::zeroed()),
            )
        };
        dev.ops = &DEVICE_OPS.0;
        let another = verbs_device_ops { ..DEVICE_OPS.0 };
        other.ops = &another;
        // SAFETY: contexts whose devices are the records above.
        unsafe {
            assert!(!is_rxud_context(&*ctx), "no device");
            ctx.device = (&raw mut *dev).cast();
            assert!(is_rxud_context(&*ctx));
            ctx.device = (&raw mut *other).cast();
            assert!(!is_rxud_context(&*ctx), "another provider's device");
        }
    }

    #[test]
    fn ops_advertise_exactly_our_abi() {
        let ops = &DEVICE_OPS.0;
        assert_eq!(ops.match_min_abi_version, rxud_abi::UVERBS_ABI_VERSION);
        assert_eq!(ops.match_max_abi_version, rxud_abi::UVERBS_ABI_VERSION);
        // SAFETY: the table is a static array ending in a sentinel.
        let kind = unsafe { (*ops.match_table).kind };
        assert_eq!(kind, 0, "table must be sentinel-only");
    }
}
