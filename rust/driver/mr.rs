// SPDX-License-Identifier: GPL-2.0

//! Memory regions: what memory an lkey/rkey names, and with which rights.

use super::counter::Counted;
use super::table::IndexTable;
use crate::ib::{AccessFlags, Umem, UserRange};
use crate::sync::{new_spinlock_irq, SpinLockIrq};
use kernel::{prelude::*, sync::Arc};

/// Most pages of a fast-registration MR (`max_fast_reg_page_list_len`).
pub(crate) const MAX_FAST_REG_PAGES: u32 = 512;

/// The page list of a fast-registration MR: `pages[..len]` are mapped.
/// Its size is fixed at allocation, so mapping never allocates.
struct PageList {
    pages: KVec<u64>,
    len: usize,
}

enum Backing {
    /// Pinned user memory at `range`.
    User(Umem, UserRange),
    /// All of kernel memory (virtual DMA addresses).
    #[allow(dead_code)]
    Dma,
    /// Pages a kernel ULP maps with `ib_map_mr_sg`.
    #[allow(dead_code)]
    FastReg(Pin<KBox<SpinLockIrq<PageList>>>),
}

/// What the data path looks an lkey or rkey up as: the memory, its
/// rights and its PD.
pub(crate) struct MrCore {
    key: u32,
    pd: u32,
    access: AccessFlags,
    backing: Backing,
}

/// Why an access through a key is refused (the data path turns it into a
/// local protection error or a remote access NAK).
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) enum MrError {
    /// The key names no live MR of this PD, or lacks the rights.
    Protection,
    /// The range is not inside the MR.
    Bounds,
}

impl MrCore {
    /// Checks an access of `len` bytes at address `addr` needing `rights`
    /// by a QP of PD `pd`; returns the offset into the MR.
    pub(crate) fn check(
        &self,
        pd: u32,
        addr: u64,
        len: usize,
        rights: AccessFlags,
    ) -> Result<u64, MrError> {
        if self.pd != pd || !self.access.contains(rights) {
            return Err(MrError::Protection);
        }
        match &self.backing {
            Backing::User(_, range) => {
                let off = addr.checked_sub(range.start).ok_or(MrError::Bounds)?;
                let end = off.checked_add(len as u64).ok_or(MrError::Bounds)?;
                if end > range.len {
                    return Err(MrError::Bounds);
                }
                Ok(off)
            }
            // Kernel memory comes with the kernel data path.
            _ => Err(MrError::Protection),
        }
    }

    /// The pinned user memory, if this is a user MR.
    pub(crate) fn umem(&self) -> Option<&Umem> {
        match &self.backing {
            Backing::User(umem, _) => Some(umem),
            _ => None,
        }
    }
}

/// The MRs of a device by key index: key = index << 8 | 8-bit tag, so a
/// stale key of a freed MR whose index is reused mismatches.
pub(crate) type MrTable = IndexTable<MrCore>;

/// The MR a key names, if any. Any context; the result must not outlive
/// the caller's RCU read side (softirq): MRs wait for a grace period
/// before their memory goes.
pub(crate) fn lookup(table: &MrTable, key: u32) -> Option<Arc<MrCore>> {
    table.get(key >> 8).filter(|mr| mr.key == key)
}

pub(crate) struct RxudMr {
    core: Arc<MrCore>,
    table: Arc<MrTable>,
    _counted: Counted,
}

impl Drop for RxudMr {
    fn drop(&mut self) {
        drop(self.table.remove(self.core.key >> 8));
        // Receives that found the MR run in softirq under RCU: after a
        // grace period none uses it, and the memory can go (here, in
        // process context, as unpinning requires).
        crate::sync::synchronize_rcu();
    }
}

impl RxudMr {
    /// Registers `backing` under a fresh key; returns the MR and its key.
    fn register(
        table: &Arc<MrTable>,
        tag: u32,
        pd: u32,
        access: AccessFlags,
        backing: Backing,
        counted: Counted,
    ) -> Result<(Self, u32)> {
        let number = table.reserve()?;
        let key = (number.id() << 8) | (tag & 0xff);
        let core = Arc::new(
            MrCore {
                key,
                pd,
                access,
                backing,
            },
            GFP_KERNEL,
        )?;
        number.fill(core.clone());
        Ok((
            Self {
                core,
                table: table.clone(),
                _counted: counted,
            },
            key,
        ))
    }

    pub(crate) fn user(
        table: &Arc<MrTable>,
        tag: u32,
        pd: u32,
        umem: Umem,
        range: UserRange,
        counted: Counted,
    ) -> Result<(Self, u32)> {
        Self::register(
            table,
            tag,
            pd,
            range.access,
            Backing::User(umem, range),
            counted,
        )
    }

    pub(crate) fn user_range(&self) -> Option<UserRange> {
        match self.core.backing {
            Backing::User(_, range) => Some(range),
            _ => None,
        }
    }

    pub(crate) fn dma(
        table: &Arc<MrTable>,
        tag: u32,
        pd: u32,
        access: AccessFlags,
        counted: Counted,
    ) -> Result<(Self, u32)> {
        Self::register(table, tag, pd, access, Backing::Dma, counted)
    }

    /// A fast-registration MR for up to `max_pages` pages; `EINVAL` for 0
    /// or more than [`MAX_FAST_REG_PAGES`].
    pub(crate) fn fast_reg(
        table: &Arc<MrTable>,
        tag: u32,
        pd: u32,
        max_pages: u32,
        counted: Counted,
    ) -> Result<(Self, u32)> {
        if max_pages == 0 || max_pages > MAX_FAST_REG_PAGES {
            return Err(EINVAL);
        }
        let pages = KVec::from_elem(0u64, max_pages as usize, GFP_KERNEL)?;
        let list = KBox::pin_init(
            new_spinlock_irq!(PageList { pages, len: 0 }, "rxud:mr_pages"),
            GFP_KERNEL,
        )?;
        // Rights come with the REG_MR work request that enables it.
        Self::register(
            table,
            tag,
            pd,
            AccessFlags::EMPTY,
            Backing::FastReg(list),
            counted,
        )
    }

    fn page_list(&self) -> Result<&SpinLockIrq<PageList>> {
        match &self.core.backing {
            Backing::FastReg(list) => Ok(list),
            _ => Err(EINVAL),
        }
    }

    pub(crate) fn clear_pages(&self) -> Result {
        self.page_list()?.lock().len = 0;
        Ok(())
    }

    pub(crate) fn add_page(&self, addr: u64) -> Result {
        let list = self.page_list()?;
        let mut l = list.lock();
        let i = l.len;
        *l.pages.as_mut_slice().get_mut(i).ok_or(ENOMEM)? = addr;
        l.len = i + 1;
        Ok(())
    }
}
