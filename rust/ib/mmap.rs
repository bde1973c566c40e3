// SPDX-License-Identifier: GPL-2.0

//! Memory shared with user space: queue rings that the kernel allocates and
//! a process maps with `mmap` on its uverbs file.
//!
//! A [`SharedMem`] is zeroed, page-aligned kernel memory (`vmalloc_user`).
//! Made for a user context, it is also an `rdma_user_mmap_entry` of that
//! context: ib_core hands out its mmap offset and finds it again when the
//! process calls `mmap`. The buffer is shared by the `SharedMem` and the
//! entry ([`VmallocBuf`], reference-counted) and freed when both are gone.
//! Pages already mapped into a process stay valid for it after that,
//! because mapping took a reference on each page.
//!
//! The entry belongs to the context, and ib_core frees the context once
//! the objects made in it are destroyed, whoever else still holds their
//! memory (a QP's core lives on while packets it sent are below IP): the
//! object's destroy calls [`SharedMem::unmap`], which takes the entry out
//! of the context (its last reference goes with it, or with an `mmap`
//! call still running) while the kernel keeps the buffer for as long as
//! it needs it. Dropping a `SharedMem` unmaps it too, for the paths that
//! drop it within the call that made it (a failed create, a resize).
//!
//! User space may write the memory at any time, concurrently with the
//! kernel. Accessors therefore never hand out references to it: indices are
//! read and written with atomic loads and stores, entries are copied in and
//! out whole, and whatever was copied is checked by the caller before use.

use crate::ffi::bindings;
use core::{
    ptr::{self, NonNull},
    sync::atomic::{AtomicPtr, AtomicU32, Ordering},
};
use kernel::{prelude::*, sync::Arc};

/// A `vmalloc_user` allocation, freed when dropped.
///
/// # Invariants
///
/// `ptr` is a live `vmalloc_user` allocation, owned by `self`.
struct VmallocBuf {
    ptr: NonNull<u8>,
}

// SAFETY: the allocation is plain memory, freed once (by `drop`); who
// accesses it through the pointer is `SharedMem`'s business.
unsafe impl Send for VmallocBuf {}
// SAFETY: as above; `&self` gives out only the pointer.
unsafe impl Sync for VmallocBuf {}

impl VmallocBuf {
    /// `len` bytes (a whole number of pages, not zero), zeroed.
    fn new(len: usize) -> Result<Arc<Self>> {
        // SAFETY: plain allocation; freed by `drop` below.
        let ptr = NonNull::new(unsafe { bindings::rxud_vmalloc_user(len as _) }.cast::<u8>())
            .ok_or(ENOMEM)?;
        // INVARIANT: just allocated, and ours. If `Arc::new` fails, the
        // value it was given is dropped, which frees the allocation.
        Ok(Arc::new(Self { ptr }, GFP_KERNEL)?)
    }
}

impl Drop for VmallocBuf {
    fn drop(&mut self) {
        // SAFETY: ours (type invariant), and no one holds the buffer any
        // more: every holder holds it through this `VmallocBuf`'s `Arc`.
        unsafe { bindings::vfree(self.ptr.as_ptr().cast()) };
    }
}

/// The bookkeeping ib_core keeps for an mmap-able buffer, with the buffer.
///
/// Freed by `mmap_free` once ib_core holds no more references to it.
#[repr(C)]
struct Entry {
    /// First field: ib_core hands `&entry.raw` back to `mmap_free`.
    raw: bindings::rdma_user_mmap_entry,
    /// Keeps the buffer for an `mmap` call that found the entry.
    buf: Arc<VmallocBuf>,
}

/// Zeroed kernel memory, optionally mappable by one user context.
///
/// # Invariants
///
/// `buf` holds `len` bytes (page-aligned, a whole number of pages, at
/// least one). `entry` is null, or an inserted mmap entry of the user
/// context the memory was made for, on which we hold the driver's
/// reference (given up by [`SharedMem::unmap`], which nulls it).
pub(crate) struct SharedMem {
    buf: Arc<VmallocBuf>,
    len: usize,
    entry: AtomicPtr<Entry>,
    /// The offset user space maps it at, if it was made mappable.
    mmap_offset: Option<u64>,
}

impl SharedMem {
    /// Allocates at least `len` bytes (rounded up to whole pages), zeroed.
    /// With a user context, makes them mappable by it; the owner must then
    /// call [`SharedMem::unmap`] before the context goes (in the destroy of
    /// the object the memory belongs to).
    pub(crate) fn new(ucontext: Option<super::UContext<'_>>, len: usize) -> Result<Self> {
        let page = kernel::page::PAGE_SIZE;
        let len = len.checked_add(page - 1).ok_or(EINVAL)? & !(page - 1);
        if len == 0 {
            return Err(EINVAL);
        }
        let buf = VmallocBuf::new(len)?;
        let Some(uctx) = ucontext else {
            // INVARIANT: `buf` holds `len` bytes (rounded up to whole
            // pages, not zero); no entry.
            return Ok(Self {
                buf,
                len,
                entry: AtomicPtr::new(ptr::null_mut()),
                mmap_offset: None,
            });
        };
        let entry = KBox::into_raw(KBox::new(
            Entry {
                raw: Default::default(),
                buf: buf.clone(),
            },
            GFP_KERNEL,
        )?);
        // SAFETY: `uctx` is the live context of the current call; `entry`
        // is ours, zero-initialised as ib_core requires. On success ib_core
        // owns it and gives it back through `mmap_free`.
        let ret = unsafe {
            bindings::rdma_user_mmap_entry_insert(uctx.0.as_ptr(), &raw mut (*entry).raw, len)
        };
        if ret != 0 {
            // SAFETY: insertion failed, so the entry is still only ours.
            drop(unsafe { KBox::from_raw(entry) });
            return Err(Error::from_errno(ret));
        }
        // SAFETY: the entry is inserted and we hold a reference on it.
        let offset = unsafe { bindings::rxud_mmap_entry_offset(&raw const (*entry).raw) };
        // INVARIANT: `buf` is as above; the entry is inserted in the
        // context the memory is for, and the reference insertion set up is
        // the driver's, ours to drop.
        Ok(Self {
            buf,
            len,
            entry: AtomicPtr::new(entry),
            mmap_offset: Some(offset),
        })
    }

    /// Takes the memory out of its user context: a later `mmap` of its
    /// offset fails, mappings made before keep their pages; the kernel's
    /// access is unchanged. The owner's destroy calls this while the
    /// context lives; a second call finds nothing to take. The entry is
    /// removed when the result is dropped (in process context, and outside
    /// spinlocks: the last reference frees it, and perhaps the buffer).
    pub(crate) fn unmap(&self) -> Unmapping {
        // INVARIANT: nulling `entry` hands the driver's reference on to
        // the `Unmapping`.
        Unmapping(NonNull::new(
            self.entry.swap(ptr::null_mut(), Ordering::AcqRel),
        ))
    }

    /// Bytes allocated (whole pages).
    pub(crate) fn len(&self) -> usize {
        self.len
    }

    /// The offset user space passes to `mmap`, if the memory was made
    /// mappable.
    pub(crate) fn mmap_offset(&self) -> Option<u64> {
        self.mmap_offset
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
        unsafe { AtomicU32::from_ptr(self.buf.ptr.as_ptr().add(OFFSET).cast()) }
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
                self.buf.ptr.as_ptr().add(offset),
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
            core::ptr::copy_nonoverlapping(
                data.as_ptr(),
                self.buf.ptr.as_ptr().add(offset),
                data.len(),
            )
        };
        Ok(())
    }
}

impl Drop for SharedMem {
    fn drop(&mut self) {
        // The buffer goes with the last of `self` and the entry.
        drop(self.unmap());
    }
}

/// An mmap entry taken out of its [`SharedMem`] ([`SharedMem::unmap`]),
/// removed from its user context when dropped.
///
/// # Invariants
///
/// If `Some`, an inserted entry of a live user context, on which this
/// holds the driver's reference.
#[must_use = "the entry is removed when this is dropped"]
pub(crate) struct Unmapping(Option<NonNull<Entry>>);

impl Drop for Unmapping {
    fn drop(&mut self) {
        if let Some(e) = self.0 {
            // SAFETY: an inserted entry of a live context with the
            // driver's reference on it (type invariant), given up here.
            // The entry (and its hold on the buffer) goes with the last
            // reference.
            unsafe { bindings::rdma_user_mmap_entry_remove(&raw mut (*e.as_ptr()).raw) };
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
    // `Entry`; our reference keeps it, and it keeps its buffer. The buffer
    // came from `vmalloc_user` (VM_USERMAP) and the VMA is exactly its size.
    let ret = unsafe {
        let buf = &(*entry).buf;
        bindings::remap_vmalloc_range(vma, buf.ptr.as_ptr().cast(), 0)
    };
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
    // Its hold on the buffer goes with it: the buffer is freed here if
    // the kernel's `SharedMem` is gone too.
    drop(unsafe { KBox::from_raw(raw.cast::<Entry>()) });
}
