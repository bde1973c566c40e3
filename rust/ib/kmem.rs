// SPDX-License-Identifier: GPL-2.0

//! Kernel memory named by a kernel consumer's DMA address.
//!
//! rxud registers its devices without a DMA device, so ib_core maps
//! kernel ULPs' buffers with virtual DMA (`ib_uses_virt_dma`): the "DMA
//! address" in an SGE, a fast-registration page list or a DMA MR access
//! is the kernel virtual address of direct-mapped memory. The verbs
//! contract keeps such memory valid while a work request or a registered
//! MR names it. Every access here still checks, page by page, that the
//! address is a direct-mapped one (`virt_addr_valid`), so a wrong address
//! (a ULP bug, or a peer's request through a DMA MR a ULP exposed for
//! remote access) fails with `EFAULT` instead of touching vmalloc space,
//! I/O memory or nothing at all.

use crate::ffi::bindings;
use crate::net::skb::SkBuff;
use core::ops::Range;
use kernel::{page::PAGE_SIZE, prelude::*};

/// Calls `f(page, offset in page, range)` for each page piece of the
/// `len` bytes at kernel virtual address `addr`, `range` being the
/// piece's place in those bytes. `EFAULT` at the first address that is
/// not direct-mapped memory.
fn for_each_page(
    addr: u64,
    len: usize,
    mut f: impl FnMut(*mut bindings::page, usize, Range<usize>) -> Result,
) -> Result {
    addr.checked_add(len as u64).ok_or(EFAULT)?;
    let mut done = 0usize;
    while done < len {
        let a = addr + done as u64;
        let pgoff = (a % PAGE_SIZE as u64) as usize;
        let n = (PAGE_SIZE - pgoff).min(len - done);
        // SAFETY: a pure address translation; it checks the address.
        let page = unsafe { bindings::rxud_kva_page(a) };
        if page.is_null() {
            return Err(EFAULT);
        }
        f(page, pgoff, done..done + n)?;
        done += n;
    }
    Ok(())
}

/// Copies `out.len()` bytes from kernel virtual address `addr`. Any
/// context.
pub(crate) fn read(addr: u64, out: &mut [u8]) -> Result {
    for_each_page(addr, out.len(), |page, pgoff, r| {
        let dst = out.get_mut(r).ok_or(EINVAL)?;
        // SAFETY: `page` is the direct-mapped page holding the piece
        // (checked by `for_each_page`), which the kernel consumer keeps
        // valid (module docs); `dst` is a distinct buffer.
        unsafe {
            bindings::rxud_page_read(
                page,
                pgoff as u32,
                dst.as_mut_ptr().cast(),
                dst.len() as u32,
            )
        };
        Ok(())
    })
}

/// Copies `data` to kernel virtual address `addr`. Any context.
pub(crate) fn write(addr: u64, data: &[u8]) -> Result {
    for_each_page(addr, data.len(), |page, pgoff, r| {
        let src = data.get(r).ok_or(EINVAL)?;
        // SAFETY: as in `read`; the consumer registered the memory for
        // this kind of access, which the MR check made sure of.
        unsafe {
            bindings::rxud_page_write(page, pgoff as u32, src.as_ptr().cast(), src.len() as u32)
        };
        Ok(())
    })
}

/// Copies `len` bytes at `skb_off` of `skb` to kernel virtual address
/// `addr`, straight from the skb's fragments. Any context.
pub(crate) fn copy_from_skb(addr: u64, skb: &SkBuff, skb_off: usize, len: usize) -> Result {
    for_each_page(addr, len, |page, pgoff, r| {
        // SAFETY: as in `write`; the piece lies within the page.
        unsafe { skb.copy_to_page(skb_off + r.start, page, pgoff, r.len()) }
    })
}
