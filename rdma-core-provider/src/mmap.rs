// SPDX-License-Identifier: GPL-2.0 OR Linux-OpenIB

//! Ring memory: the kernel allocates each queue's ring and librxud maps it
//! from the context's command fd, read-write and shared, until the queue is
//! destroyed.

use crate::ring::{Ring, RingMemory};
use crate::sys::*;
use core::ffi::c_int;
use core::ptr::NonNull;
use rxud_abi::{RingGeometry, RingInfo};
use std::ffi::CString;

/// A shared mapping of the command fd, unmapped when dropped.
pub(crate) struct Mapping {
    addr: NonNull<u8>,
    len: usize,
}

// SAFETY: a mapping belongs to the process, not to a thread; whoever owns
// the `Mapping` may unmap it from any thread.
unsafe impl Send for Mapping {}

impl Mapping {
    /// Maps `len` bytes of `fd` at `offset`; fails with the errno of `mmap`
    /// (`EINVAL` for an offset or length `mmap` cannot take).
    pub(crate) fn new(fd: c_int, offset: u64, len: u64) -> Result<Self, c_int> {
        let offset = i64::try_from(offset).map_err(|_| EINVAL)?;
        let len = usize::try_from(len).map_err(|_| EINVAL)?;
        // SAFETY: a new mapping at an address the kernel chooses (no
        // `MAP_FIXED`): it replaces no memory anyone uses.
        let addr = unsafe {
            mmap(
                core::ptr::null_mut(),
                len,
                PROT_READ | PROT_WRITE,
                MAP_SHARED,
                fd,
                offset,
            )
        };
        if addr == MAP_FAILED {
            return Err(std::io::Error::last_os_error()
                .raw_os_error()
                .unwrap_or(EIO));
        }
        let Some(nonnull) = NonNull::new(addr.cast::<u8>()) else {
            // Only possible with vm.mmap_min_addr 0; such a ring is unusable.
            // SAFETY: the mapping just made, used by nobody.
            unsafe { munmap(addr, len) };
            return Err(EIO);
        };
        Ok(Self { addr: nonnull, len })
    }
}

impl Drop for Mapping {
    fn drop(&mut self) {
        // SAFETY: made by `new` and unmapped only here; `Ring`s borrowing it
        // are gone (their lifetime ends with the borrow of its owner).
        unsafe { munmap(self.addr.as_ptr().cast(), self.len) };
    }
}

/// A queue's ring, mapped, with its checked geometry.
pub(crate) struct MappedRing {
    map: Mapping,
    geo: RingGeometry,
}

impl MappedRing {
    /// The ring, for as long as this mapping is borrowed.
    pub(crate) fn ring(&self) -> Ring<'_> {
        // SAFETY: `map` covers `geo.bytes()` bytes (`map_ring` maps the
        // whole `mmap_size` that `RingGeometry::from_info` checked covers
        // them), is page aligned and stays mapped while `self` is borrowed;
        // the kernel follows the ring protocol.
        unsafe { Ring::new(self.map.addr, self.geo) }
    }
}

impl RingMemory for MappedRing {
    fn ring(&self) -> Ring<'_> {
        MappedRing::ring(self)
    }
}

/// Checks the ring `info` describes for a queue of `entries` entries of
/// `entry_size` bytes (`RingGeometry::from_info`) and maps it, all
/// `info.mmap_size` bytes of it. Fails with `EPROTO` if the kernel's
/// description does not fit the ABI, or with the errno of `mmap`; either is
/// logged through libibverbs (shown with `VERBS_LOG_LEVEL=1`).
///
/// # Safety
///
/// `ctx` is a live context of librxud's.
pub(crate) unsafe fn map_ring(
    ctx: *mut ibv_context,
    verb: &str,
    which: &str,
    info: &RingInfo,
    entries: u32,
    entry_size: u32,
) -> Result<MappedRing, c_int> {
    let geo = RingGeometry::from_info(info, entries, entry_size).map_err(|invalid| {
        // SAFETY: per the caller.
        unsafe { log_err(ctx, &format!("{verb}: {which} ring refused: {invalid}")) };
        EPROTO
    })?;
    // SAFETY: per the caller.
    let fd = unsafe { (*ctx).cmd_fd };
    let map = Mapping::new(fd, info.mmap_offset, info.mmap_size).inspect_err(|err| {
        // SAFETY: per the caller.
        unsafe {
            log_err(
                ctx,
                &format!("{verb}: {which} ring: mmap failed, errno {err}"),
            )
        };
    })?;
    Ok(MappedRing { map, geo })
}

/// Logs `msg` at `VERBS_LOG_ERR`.
///
/// # Safety
///
/// `ctx` is a live context of librxud's.
unsafe fn log_err(ctx: *mut ibv_context, msg: &str) {
    let Ok(msg) = CString::new(msg) else { return };
    // SAFETY: per the caller; `ibv_context` is the last member of the
    // context's `verbs_context`; the format takes one string.
    unsafe {
        __verbs_log(
            ctx.byte_sub(VERBS_CONTEXT_IBV_OFFSET).cast(),
            VERBS_LOG_ERR,
            c"rxud: %s\n".as_ptr(),
            msg.as_ptr(),
        )
    };
}

/// A stand-in for the uverbs command fd in tests: a file that rings map
/// (`map_ring` maps it as it would the device) and doorbells are written
/// to, and a context whose `cmd_fd` it is.
#[cfg(test)]
pub(crate) mod testing {
    use super::*;
    use std::os::fd::AsRawFd;
    use std::os::unix::fs::FileExt;

    pub(crate) struct FakeDevice {
        file: std::fs::File,
        path: std::path::PathBuf,
        pub(crate) ctx: Box<ibv_context>,
    }

    impl FakeDevice {
        /// A device whose fd has `pages` pages.
        pub(crate) fn new(name: &str, pages: u64) -> Self {
            let path = std::env::temp_dir().join(format!("rxud-{name}-{}", std::process::id()));
            let file = std::fs::OpenOptions::new()
                .read(true)
                .write(true)
                .create(true)
                .truncate(true)
                .open(&path)
                .unwrap();
            file.set_len(pages * 4096).unwrap();
            // SAFETY: all-zero is a valid `ibv_context` (pointers, integers
            // and a zeroed mutex).
            let mut ctx: Box<ibv_context> = Box::new(unsafe { core::mem::zeroed() });
            ctx.cmd_fd = file.as_raw_fd();
            Self { file, path, ctx }
        }

        pub(crate) fn ctx(&mut self) -> *mut ibv_context {
            &raw mut *self.ctx
        }

        pub(crate) fn read(&self, at: u64, len: usize) -> Vec<u8> {
            let mut buf = vec![0; len];
            self.file.read_exact_at(&mut buf, at).unwrap();
            buf
        }

        pub(crate) fn write(&self, at: u64, bytes: &[u8]) {
            self.file.write_all_at(bytes, at).unwrap();
        }
    }

    impl Drop for FakeDevice {
        fn drop(&mut self) {
            let _ = std::fs::remove_file(&self.path);
        }
    }
}
