// SPDX-License-Identifier: GPL-2.0

//! Pinned user memory (`struct ib_umem`).

use crate::ffi::bindings;
use crate::net::skb::SkBuff;
use core::ptr::NonNull;
use kernel::{error::from_err_ptr, prelude::*};

/// User pages pinned by `ib_umem_get`, unpinned on drop.
///
/// # Invariants
///
/// `ptr` is a umem returned by `ib_umem_get` and not yet released, which
/// pins the `len` bytes at user address `start`. `pages` are its pinned
/// pages in order, enough for `offset + len` bytes, where `offset` is
/// where `start` lies in the first page: byte `start + i` of the range is
/// byte `offset + i` of the page run.
pub(crate) struct Umem {
    ptr: NonNull<bindings::ib_umem>,
    /// The user address range pinned.
    start: u64,
    len: u64,
    /// The pinned pages in order, for access from any context; byte
    /// `start + i` of the range is at `offset + i` of this page run.
    pages: KVec<PagePtr>,
    offset: usize,
}

/// A pinned page of a umem.
#[derive(Clone, Copy)]
struct PagePtr(NonNull<bindings::page>);

// SAFETY: a umem is plain pinned memory bookkeeping; ib_core releases it
// from any context that may sleep. The page pointers are pinned pages,
// accessed only through kmap_local.
unsafe impl Send for Umem {}
// SAFETY: `&Umem` only reads immutable fields.
unsafe impl Sync for Umem {}

impl Umem {
    /// Pins `len` bytes of the calling process's memory at `addr` for the
    /// accesses in `access`. Fails with `EFAULT` if the
    /// range is not mapped so, `ENOMEM` past the pinning limit.
    ///
    /// # Safety
    ///
    /// `dev` is a live, registered ib_device; called in the context of the
    /// process that owns the memory (a uverbs command).
    pub(super) unsafe fn get(
        dev: *mut bindings::ib_device,
        addr: u64,
        len: u64,
        access: super::AccessFlags,
    ) -> Result<Self> {
        let (start, size) = (addr, len);
        let addr = usize::try_from(addr).map_err(|_| EINVAL)?;
        let len = usize::try_from(len).map_err(|_| EINVAL)?;
        // SAFETY: per the caller; `ib_umem_get` validates the range itself
        // and returns a umem or an ERR_PTR.
        let ptr = from_err_ptr(unsafe {
            bindings::ib_umem_get(dev, addr as _, len, access.bits() as i32)
        })?;
        // INVARIANT: `ptr` is the umem just pinned for `len` bytes at
        // `start` (NULL is turned into `ENOMEM`), ours to release. `offset`
        // and `pages` are filled in below before `umem` leaves this function;
        // until then it is at most dropped, which reads neither.
        let mut umem = Self {
            ptr: NonNull::new(ptr).ok_or(ENOMEM)?,
            start,
            len: size,
            pages: KVec::new(),
            offset: 0,
        };
        // From here on, dropping `umem` releases it.
        // SAFETY: the umem is live and ours.
        umem.offset = unsafe { bindings::rxud_umem_offset(umem.ptr.as_ptr()) } as usize;
        let page = kernel::page::PAGE_SIZE;
        let count = umem.offset.checked_add(len).ok_or(EINVAL)?.div_ceil(page);
        let mut raw: KVec<*mut bindings::page> = KVec::with_capacity(count, GFP_KERNEL)?;
        raw.extend_with(count, core::ptr::null_mut(), GFP_KERNEL)?;
        let max = i32::try_from(count).map_err(|_| EINVAL)?;
        // SAFETY: the umem is live; `raw` has room for `count` pointers.
        let n = unsafe { bindings::rxud_umem_pages(umem.ptr.as_ptr(), raw.as_mut_ptr(), max) };
        if usize::try_from(n).ok() != Some(count) {
            return Err(EINVAL);
        }
        umem.pages = KVec::with_capacity(count, GFP_KERNEL)?;
        for p in raw.iter() {
            umem.pages
                .push(PagePtr(NonNull::new(*p).ok_or(EINVAL)?), GFP_KERNEL)?;
        }
        // INVARIANT: `offset` is `ib_umem_offset`, where `start` lies in the
        // first page, and `pages` holds all `count` pages of the umem in
        // order, as many as `offset + len` bytes take.
        Ok(umem)
    }

    /// Calls `f(page, offset in page, range)` for each page piece of the
    /// `len` bytes at `off` of the range, `range` being the piece's place
    /// in those `len` bytes; `EINVAL` if they are not all in the range.
    fn for_each_piece(
        &self,
        off: u64,
        len: usize,
        mut f: impl FnMut(PagePtr, usize, core::ops::Range<usize>) -> Result,
    ) -> Result {
        let end = off.checked_add(len as u64).ok_or(EINVAL)?;
        if end > self.len {
            return Err(EINVAL);
        }
        let page = kernel::page::PAGE_SIZE;
        let mut pos = self
            .offset
            .checked_add(usize::try_from(off).map_err(|_| EINVAL)?)
            .ok_or(EINVAL)?;
        let mut done = 0;
        while done < len {
            let pgoff = pos % page;
            let n = (page - pgoff).min(len - done);
            let p = *self.pages.get(pos / page).ok_or(EINVAL)?;
            f(p, pgoff, done..done + n)?;
            done += n;
            pos += n;
        }
        Ok(())
    }

    /// Writes `data` at byte `off` of the range. Any context.
    pub(crate) fn write(&self, off: u64, data: &[u8]) -> Result {
        self.for_each_piece(off, data.len(), |p, pgoff, r| {
            let src = data.get(r).ok_or(EINVAL)?;
            // SAFETY: the page is pinned while `self` lives and the piece
            // lies within it (`for_each_piece`); `src` is a distinct buffer.
            unsafe {
                bindings::rxud_page_write(
                    p.0.as_ptr(),
                    pgoff as u32,
                    src.as_ptr().cast(),
                    src.len() as u32,
                )
            };
            Ok(())
        })
    }

    /// Reads `out.len()` bytes at byte `off` of the range. Any context.
    pub(crate) fn read(&self, off: u64, out: &mut [u8]) -> Result {
        self.for_each_piece(off, out.len(), |p, pgoff, r| {
            let dst = out.get_mut(r).ok_or(EINVAL)?;
            // SAFETY: as in `write`.
            unsafe {
                bindings::rxud_page_read(
                    p.0.as_ptr(),
                    pgoff as u32,
                    dst.as_mut_ptr().cast(),
                    dst.len() as u32,
                )
            };
            Ok(())
        })
    }

    /// Copies `len` bytes at `skb_off` of `skb` to byte `off` of the
    /// range, straight from the skb's fragments. Any context.
    pub(crate) fn copy_from_skb(
        &self,
        off: u64,
        skb: &SkBuff,
        skb_off: usize,
        len: usize,
    ) -> Result {
        self.for_each_piece(off, len, |p, pgoff, r| {
            // SAFETY: the page is pinned while `self` lives and the piece
            // lies within it.
            unsafe { skb.copy_to_page(skb_off + r.start, p.0.as_ptr(), pgoff, r.len()) }
        })
    }

    /// Start address and length of the pinned user range.
    pub(crate) fn range(&self) -> (u64, u64) {
        (self.start, self.len)
    }
}

impl Drop for Umem {
    fn drop(&mut self) {
        // SAFETY: ours to release (type invariant).
        unsafe { bindings::ib_umem_release(self.ptr.as_ptr()) };
    }
}
