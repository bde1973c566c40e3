// SPDX-License-Identifier: GPL-2.0

//! Memory regions: what memory an lkey/rkey names, and with which rights.

use super::counter::Counted;
use crate::ib::{AccessFlags, Umem, UserRange};
use crate::sync::{new_spinlock_irq, SpinLockIrq};
use kernel::prelude::*;

/// Most pages of a fast-registration MR (`max_fast_reg_page_list_len`).
pub(crate) const MAX_FAST_REG_PAGES: u32 = 512;

/// The page list of a fast-registration MR: `pages[..len]` are mapped.
/// Its size is fixed at allocation, so mapping never allocates.
struct PageList {
    pages: KVec<u64>,
    len: usize,
}

// Fields are read by the data path (key lookup, placement).
#[allow(dead_code)]
enum Backing {
    /// Pinned user memory at `range`.
    User(Umem, UserRange),
    /// All of kernel memory (virtual DMA addresses).
    Dma,
    /// Pages a kernel ULP maps with `ib_map_mr_sg`.
    FastReg(Pin<KBox<SpinLockIrq<PageList>>>),
}

pub(crate) struct RxudMr {
    backing: Backing,
    #[allow(dead_code)]
    access: AccessFlags,
    _counted: Counted,
}

impl RxudMr {
    pub(crate) fn user(umem: Umem, range: UserRange, counted: Counted) -> Self {
        Self {
            backing: Backing::User(umem, range),
            access: range.access,
            _counted: counted,
        }
    }

    pub(crate) fn user_range(&self) -> Option<UserRange> {
        match self.backing {
            Backing::User(_, range) => Some(range),
            _ => None,
        }
    }

    pub(crate) fn dma(access: AccessFlags, counted: Counted) -> Self {
        Self {
            backing: Backing::Dma,
            access,
            _counted: counted,
        }
    }

    /// A fast-registration MR for up to `max_pages` pages; `EINVAL` for 0
    /// or more than [`MAX_FAST_REG_PAGES`].
    pub(crate) fn fast_reg(max_pages: u32, counted: Counted) -> Result<Self> {
        if max_pages == 0 || max_pages > MAX_FAST_REG_PAGES {
            return Err(EINVAL);
        }
        let pages = KVec::from_elem(0u64, max_pages as usize, GFP_KERNEL)?;
        let list = KBox::pin_init(
            new_spinlock_irq!(PageList { pages, len: 0 }, "rxud:mr_pages"),
            GFP_KERNEL,
        )?;
        // Rights come with the REG_MR work request that enables it.
        Ok(Self {
            backing: Backing::FastReg(list),
            access: AccessFlags::EMPTY,
            _counted: counted,
        })
    }

    fn page_list(&self) -> Result<&SpinLockIrq<PageList>> {
        match &self.backing {
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
