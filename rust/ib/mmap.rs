// SPDX-License-Identifier: GPL-2.0

//! Memory shared with user space: queue rings that the kernel allocates and
//! a process maps with `mmap` on its uverbs file.
//!
//! A [`SharedMem`] is zeroed, page-aligned kernel memory (`vmalloc_user`).
//! Made for a user context, it is also an `rdma_user_mmap_entry` of that
//! context: ib_core hands out its mmap offset and finds it again when the
//! process calls `mmap`. Dropping the `SharedMem` removes the entry; the
//! memory is freed when ib_core drops the last entry reference
//! (`mmap_free`). Pages already mapped into a process stay valid for it
//! after that, because mapping took a reference on each page.
//!
//! User space may write the memory at any time, concurrently with the
//! kernel. Accessors therefore never hand out references to it: indices are
//! read and written with atomic loads and stores, entries are copied in and
//! out whole, and whatever was copied is checked by the caller before use.

use crate::ffi::bindings;
use core::{
    ptr::NonNull,
    sync::atomic::{AtomicU32, Ordering},
};
use kernel::prelude::*;

/// The bookkeeping ib_core keeps for an mmap-able buffer, with the buffer.
///
/// Freed by `mmap_free` once ib_core holds no more references to it.
#[repr(C)]
struct Entry {
    /// First field: ib_core hands `&entry.raw` back to `mmap_free`.
    raw: bindings::rdma_user_mmap_entry,
    buf: NonNull<u8>,
}

/// Zeroed kernel memory, optionally mappable by one user context.
///
/// # Invariants
///
/// `buf` is a `vmalloc_user` allocation of `len` bytes (page-aligned, a
/// whole number of pages, at least one) that stays allocated while `self`
/// exists. If `entry` is `Some`, it is an inserted mmap entry that owns
/// `buf` (freed with the entry) and on which we hold the driver's
/// reference; otherwise `self` owns `buf`.
pub(crate) struct SharedMem {
    buf: NonNull<u8>,
    len: usize,
    entry: Option<NonNull<Entry>>,
}

// SAFETY: the memory is only accessed through atomics and raw copies, and
// the entry functions of ib_core are thread-safe.
unsafe impl Send for SharedMem {}
// SAFETY: as above; `&self` methods do not mutate Rust-visible state.
unsafe impl Sync for SharedMem {}

impl SharedMem {
    /// Allocates at least `len` bytes (rounded up to whole pages), zeroed.
    /// With a user context, makes them mappable by it.
    pub(crate) fn new(ucontext: Option<super::UContext<'_>>, len: usize) -> Result<Self> {
        let page = kernel::page::PAGE_SIZE;
        let len = len.checked_add(page - 1).ok_or(EINVAL)? & !(page - 1);
        if len == 0 {
            return Err(EINVAL);
        }
        // SAFETY: plain allocation; freed by `Drop` or `mmap_free`.
        let buf = NonNull::new(unsafe { bindings::rxud_vmalloc_user(len as _) }.cast::<u8>())
            .ok_or(ENOMEM)?;
        let Some(uctx) = ucontext else {
            // INVARIANT: `buf` is the `vmalloc_user` allocation of `len`
            // bytes just made (rounded up to whole pages, not zero), which
            // no one else has, so ours.
            return Ok(Self {
                buf,
                len,
                entry: None,
            });
        };
        let entry = match KBox::new(
            Entry {
                raw: Default::default(),
                buf,
            },
            GFP_KERNEL,
        ) {
            Ok(e) => KBox::into_raw(e),
            Err(e) => {
                // SAFETY: allocated above, not shared.
                unsafe { bindings::vfree(buf.as_ptr().cast()) };
                return Err(e.into());
            }
        };
        // SAFETY: `uctx` is the live context of the current call; `entry`
        // is ours, zero-initialised as ib_core requires. On success ib_core
        // owns it and gives it back through `mmap_free`.
        let ret = unsafe {
            bindings::rdma_user_mmap_entry_insert(uctx.0.as_ptr(), &raw mut (*entry).raw, len)
        };
        if ret != 0 {
            // SAFETY: insertion failed, so both are still only ours.
            unsafe {
                bindings::vfree(buf.as_ptr().cast());
                drop(KBox::from_raw(entry));
            }
            return Err(Error::from_errno(ret));
        }
        // SAFETY: `entry` came from `KBox::into_raw`, so it is not NULL.
        let entry = unsafe { NonNull::new_unchecked(entry) };
        // INVARIANT: `buf` is as above, but the entry now owns it (its
        // `mmap_free` frees it); the entry is inserted, and the reference
        // insertion set up is the driver's, ours to drop.
        Ok(Self {
            buf,
            len,
            entry: Some(entry),
        })
    }

    /// Bytes allocated (whole pages).
    pub(crate) fn len(&self) -> usize {
        self.len
    }

    /// The offset user space passes to `mmap`, if the memory is mappable.
    pub(crate) fn mmap_offset(&self) -> Option<u64> {
        // SAFETY: the entry is inserted and we hold a reference on it.
        self.entry
            .map(|e| unsafe { bindings::rxud_mmap_entry_offset(&raw const (*e.as_ptr()).raw) })
    }

    /// The `u32` at byte `OFFSET`, which must be 4-aligned and within the
    /// first page (checked at compile time; every `SharedMem` has at least
    /// one page).
    fn word<const OFFSET: usize>(&self) -> &AtomicU32 {
        const { assert!(OFFSET % 4 == 0 && OFFSET + 4 <= kernel::page::PAGE_SIZE) };
        // SAFETY: in bounds and aligned (checked above; the buffer is
        // page-aligned and at least a page long), valid while `self` lives;
        // every access to it from the kernel is atomic. User space may
        // write it concurrently, which is the point of the atomic.
        unsafe { AtomicU32::from_ptr(self.buf.as_ptr().add(OFFSET).cast()) }
    }

    /// Loads the `u32` at `OFFSET` with acquire ordering.
    pub(crate) fn load_acquire<const OFFSET: usize>(&self) -> u32 {
        self.word::<OFFSET>().load(Ordering::Acquire)
    }

    /// Stores `value` at `OFFSET` with release ordering.
    pub(crate) fn store_release<const OFFSET: usize>(&self, value: u32) {
        self.word::<OFFSET>().store(value, Ordering::Release)
    }

    /// Whether `len` bytes at `offset` lie inside the memory.
    fn in_bounds(&self, offset: usize, len: usize) -> bool {
        offset <= self.len && len <= self.len - offset
    }

    /// Copies `out.len()` bytes at `offset` out of the shared memory;
    /// `EINVAL` if that is out of bounds.
    pub(crate) fn read(&self, offset: usize, out: &mut [u8]) -> Result {
        if !self.in_bounds(offset, out.len()) {
            return Err(EINVAL);
        }
        // SAFETY: in bounds (checked); `out` is a distinct Rust buffer. A
        // concurrent user write yields some bytes, which the caller checks.
        unsafe {
            core::ptr::copy_nonoverlapping(
                self.buf.as_ptr().add(offset),
                out.as_mut_ptr(),
                out.len(),
            )
        };
        Ok(())
    }

    /// Copies `data` into the shared memory at `offset`; `EINVAL` if that
    /// is out of bounds.
    pub(crate) fn write(&self, offset: usize, data: &[u8]) -> Result {
        if !self.in_bounds(offset, data.len()) {
            return Err(EINVAL);
        }
        // SAFETY: in bounds (checked); no Rust reference to the shared
        // memory exists.
        unsafe {
            core::ptr::copy_nonoverlapping(data.as_ptr(), self.buf.as_ptr().add(offset), data.len())
        };
        Ok(())
    }
}

impl Drop for SharedMem {
    fn drop(&mut self) {
        match self.entry {
            // SAFETY: we hold the driver's reference on the inserted entry;
            // removing drops it, and ib_core frees the buffer through
            // `mmap_free` once no mmap call still uses it.
            Some(e) => unsafe { bindings::rdma_user_mmap_entry_remove(&raw mut (*e.as_ptr()).raw) },
            // SAFETY: the buffer is ours alone (type invariant).
            None => unsafe { bindings::vfree(self.buf.as_ptr().cast()) },
        }
    }
}

/// `ib_device_ops.mmap`: maps the whole buffer of the entry at the VMA's
/// offset, if its size matches the VMA.
///
/// # Safety
///
/// Called by ib_core with a live user context and the VMA being set up.
pub(super) unsafe extern "C" fn mmap(
    uctx: *mut bindings::ib_ucontext,
    vma: *mut bindings::vm_area_struct,
) -> kernel::ffi::c_int {
    // SAFETY: per the caller; returns a referenced entry of this context
    // whose length equals the VMA's, or NULL.
    let raw = unsafe { bindings::rdma_user_mmap_entry_get(uctx, vma) };
    if raw.is_null() {
        return EINVAL.to_errno();
    }
    let entry = raw.cast::<Entry>();
    // SAFETY: every entry of our contexts is the first field of an
    // `Entry`; our reference keeps its buffer allocated. The buffer came
    // from `vmalloc_user` (VM_USERMAP) and the VMA is exactly its size.
    let ret = unsafe { bindings::remap_vmalloc_range(vma, (*entry).buf.as_ptr().cast(), 0) };
    // SAFETY: drops the reference taken above.
    unsafe { bindings::rdma_user_mmap_entry_put(raw) };
    ret
}

/// `ib_device_ops.mmap_free`: the last reference to an entry is gone.
///
/// # Safety
///
/// Called by ib_core once per inserted entry, when no one uses it.
pub(super) unsafe extern "C" fn mmap_free(raw: *mut bindings::rdma_user_mmap_entry) {
    // SAFETY: the entry is the first field of an `Entry` made by
    // `KBox::into_raw` in `SharedMem::new`; nothing refers to it any more.
    let entry = unsafe { KBox::from_raw(raw.cast::<Entry>()) };
    // SAFETY: the entry owned the buffer (`SharedMem` invariant).
    unsafe { bindings::vfree(entry.buf.as_ptr().cast()) };
}
