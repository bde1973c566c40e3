// SPDX-License-Identifier: GPL-2.0

//! Memory regions and memory windows: what memory an lkey/rkey names,
//! and with which rights.
//!
//! A memory window is an entry of the same key table as the MRs (so an
//! rkey names either, and a stale window key mismatches as a stale MR key
//! does), whose backing is a binding: a range of a user MR, rights and,
//! for type 2, the QP it was bound through. It grants remote access only
//! ([`MrCore::check_remote`]); as an lkey it names nothing. The binding
//! names its MR by key and the MR is looked up again at each access, so
//! a deregistered MR leaves its windows granting nothing.

use super::counter::Counted;
use super::table::IndexTable;
use crate::abi::BindMwOp;
use crate::ib::{kmem, AccessFlags, MwKind, Umem, UserRange};
use crate::kext::sync::{new_spinlock_irq, SpinLockIrq};
use crate::net::skb::SkBuff;
use crate::proto::mw;
use kernel::{prelude::*, sync::Arc};

/// Most pages of a fast-registration MR (`max_fast_reg_page_list_len`).
pub(crate) const MAX_FAST_REG_PAGES: u32 = 512;

/// A fast-registration MR's mapping: the page list `ib_map_mr_sg` fills,
/// and what the last REG_MR work request made of it. Its size is fixed at
/// allocation, so neither mapping nor registering allocates.
struct FastRegState {
    pages: KVec<u64>,
    /// `pages[..npages]` are mapped.
    npages: usize,
    /// The key that names the MR now: REG_MR may change its low 8 bits
    /// (`ib_update_fast_reg_key`); the index never changes.
    key: u32,
    /// Registered (REG_MR) and not invalidated since.
    valid: bool,
    access: AccessFlags,
    /// The registered range `[iova, iova + length)`, in pages of
    /// `page_size` bytes from `pages[0]` on: its first byte is at offset
    /// `iova % page_size` of `pages[0]`. The rest of `iova` is the
    /// consumer's to choose: `ib_map_mr_sg` sets it to the first page's
    /// DMA address, and a consumer may change it before REG_MR (xprtrdma
    /// puts an RPC's xid in its upper 32 bits), as with rxe.
    iova: u64,
    length: u64,
    page_size: u64,
}

impl FastRegState {
    /// The kernel virtual address of byte `off` of the registered range
    /// and how many bytes follow it in the same page.
    fn locate(&self, off: u64) -> Option<(u64, u64)> {
        // The registered range may start inside the first page.
        let lead = self.iova.checked_rem(self.page_size)?;
        let pos = lead.checked_add(off)?;
        let page = usize::try_from(pos.checked_div(self.page_size)?).ok()?;
        let in_page = pos.checked_rem(self.page_size)?;
        let base = *self.pages.get(..self.npages)?.get(page)?;
        Some((base.checked_add(in_page)?, self.page_size - in_page))
    }
}

/// What a bound memory window grants.
#[derive(Clone, Copy)]
struct Binding {
    /// The key of the MR it lies in (looked up at each access).
    mr_key: u32,
    /// Which of the MR's addresses, and how its users address them.
    range: mw::Range,
    access: AccessFlags,
    /// Type 2: the QP it was bound through, the only one it serves.
    qpn: Option<u32>,
}

/// A memory window's state, behind its lock.
struct WindowState {
    /// The key that names the window now: each bind sets its low 8 bits.
    key: u32,
    /// Bound (type 1: to a non-empty range; type 2: not invalidated
    /// since).
    binding: Option<Binding>,
}

/// The rights a window may be bound with (rxe's).
const WINDOW_ACCESS: AccessFlags = AccessFlags::LOCAL_WRITE
    .union(AccessFlags::REMOTE_WRITE)
    .union(AccessFlags::REMOTE_READ)
    .union(AccessFlags::REMOTE_ATOMIC)
    .union(AccessFlags::MW_BIND)
    .union(AccessFlags::ZERO_BASED);

enum Backing {
    /// Pinned user memory at `range`, addressed from `iova` on (the
    /// address work requests and peers name its first byte by).
    User {
        umem: Umem,
        range: UserRange,
        iova: u64,
    },
    /// All of kernel memory (virtual DMA addresses).
    Dma,
    /// Pages a kernel ULP maps with `ib_map_mr_sg`, registered with a
    /// REG_MR work request.
    FastReg(Pin<KBox<SpinLockIrq<FastRegState>>>),
    /// A memory window of type `kind`: a binding to part of a user MR.
    Window {
        kind: MwKind,
        state: Pin<KBox<SpinLockIrq<WindowState>>>,
    },
}

impl Backing {
    /// Pinned user memory, addressed from `iova`, with rights `access`.
    fn user(umem: Umem, access: AccessFlags, iova: u64) -> Self {
        let (start, len) = umem.range();
        let range = UserRange { start, len, access };
        Backing::User { umem, range, iova }
    }
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

/// Where `len` bytes at `off` of a range of `size` bytes end, if inside.
fn within(off: u64, len: usize, size: u64) -> Result<u64, MrError> {
    let end = off.checked_add(len as u64).ok_or(MrError::Bounds)?;
    if end > size {
        return Err(MrError::Bounds);
    }
    Ok(off)
}

impl MrCore {
    /// The index part of the MR's keys (fixed for its life).
    pub(crate) fn index(&self) -> u32 {
        self.key >> 8
    }

    /// Whether `key` names this MR as it is now (a fast-registration
    /// MR's key changes with each registration).
    fn named_by(&self, key: u32) -> bool {
        match &self.backing {
            Backing::FastReg(st) => st.lock().key == key,
            Backing::Window { state, .. } => state.lock().key == key,
            _ => self.key == key,
        }
    }

    /// Checks an access of `len` bytes at address `addr` needing `rights`
    /// by a QP of PD `pd`; returns the offset into the MR, which
    /// [`MrCore::read`], [`MrCore::write`] and [`MrCore::copy_from_skb`]
    /// take.
    pub(crate) fn check(
        &self,
        pd: u32,
        addr: u64,
        len: usize,
        rights: AccessFlags,
    ) -> Result<u64, MrError> {
        if self.pd != pd {
            return Err(MrError::Protection);
        }
        match &self.backing {
            Backing::User { range, iova, .. } => {
                if !self.access.contains(rights) {
                    return Err(MrError::Protection);
                }
                let off = addr.checked_sub(*iova).ok_or(MrError::Bounds)?;
                within(off, len, range.len)
            }
            Backing::Dma => {
                if !self.access.contains(rights) {
                    return Err(MrError::Protection);
                }
                // The offset into "all of memory" is the address.
                within(addr, len, u64::MAX)
            }
            Backing::FastReg(st) => {
                let st = st.lock();
                if !st.valid || !st.access.contains(rights) {
                    return Err(MrError::Protection);
                }
                let off = addr.checked_sub(st.iova).ok_or(MrError::Bounds)?;
                within(off, len, st.length)
            }
            // A window is no lkey, and its remote use is checked by
            // `check_remote`.
            Backing::Window { .. } => Err(MrError::Protection),
        }
    }

    /// Checks a remote access of `len` bytes at `addr` needing `rights`
    /// through the key this MR or window answers to, for QP `qpn` of PD
    /// `pd` (the responder). An MR is checked as [`MrCore::check`] does; a
    /// window must be bound, to this QP if type 2, with the rights and a
    /// range holding the access, and its MR (looked up in `table`) must
    /// still answer to its key in the same PD and hold the range. Returns
    /// the memory to access and the offset into it. Any context; the
    /// result must not outlive the caller's RCU read side (see
    /// [`lookup`]).
    pub(crate) fn check_remote<'a>(
        &'a self,
        table: &MrTable,
        qpn: u32,
        pd: u32,
        addr: u64,
        len: usize,
        rights: AccessFlags,
    ) -> Result<(Remote<'a>, u64), MrError> {
        let Backing::Window { state, .. } = &self.backing else {
            return Ok((Remote::Region(self), self.check(pd, addr, len, rights)?));
        };
        let b = state.lock().binding.ok_or(MrError::Protection)?;
        if self.pd != pd || b.qpn.is_some_and(|q| q != qpn) || !b.access.contains(rights) {
            return Err(MrError::Protection);
        }
        // Where the access starts among the MR's addresses.
        let mr_addr = b.range.target(addr, len as u64).ok_or(MrError::Bounds)?;
        let mr = lookup(table, b.mr_key).ok_or(MrError::Protection)?;
        // Rights are the window's; the MR is checked for PD and bounds.
        let off = mr.check(pd, mr_addr, len, AccessFlags::EMPTY)?;
        Ok((Remote::Window(mr), off))
    }

    /// Checks that the key this MR or window answers to grants `rights`
    /// to QP `qpn` of PD `pd`, whatever the range: a FLUSH of the whole
    /// MR (IBTA A19 selectivity level 1). Any context.
    pub(crate) fn check_remote_key(
        &self,
        table: &MrTable,
        qpn: u32,
        pd: u32,
        rights: AccessFlags,
    ) -> Result<(), MrError> {
        if self.pd != pd {
            return Err(MrError::Protection);
        }
        let granted = match &self.backing {
            Backing::User { .. } | Backing::Dma => self.access.contains(rights),
            Backing::FastReg(st) => {
                let st = st.lock();
                st.valid && st.access.contains(rights)
            }
            Backing::Window { state, .. } => {
                let b = state.lock().binding.ok_or(MrError::Protection)?;
                // The window's MR must still answer to its key.
                lookup(table, b.mr_key).ok_or(MrError::Protection)?;
                !b.qpn.is_some_and(|q| q != qpn) && b.access.contains(rights)
            }
        };
        if granted {
            Ok(())
        } else {
            Err(MrError::Protection)
        }
    }

    /// Binds this memory window (BIND_MW from QP `qpn` of PD `pd`) as
    /// `op` asks, to a user MR of `table`; rxe's checks (IBTA C10-72 to
    /// C10-75, o10-36.2.2, o10-37.2.30 and .40). Any context.
    pub(crate) fn bind(
        &self,
        table: &MrTable,
        qpn: u32,
        pd: u32,
        op: &BindMwOp,
    ) -> Result<(), MrError> {
        let Backing::Window { kind, state } = &self.backing else {
            return Err(MrError::Protection);
        };
        let access = AccessFlags::from_stored(op.access);
        if !access.difference(WINDOW_ACCESS).is_empty() || self.pd != pd {
            return Err(MrError::Protection);
        }
        let zero_based = access.contains(AccessFlags::ZERO_BASED);
        if *kind == MwKind::Type1 && zero_based {
            return Err(MrError::Protection);
        }
        // The MR first, outside the window's lock: the lkey might name
        // this very window, whose key check takes that lock.
        let binding = if op.length == 0 {
            // Type 1 only (below): unbound, granting nothing.
            None
        } else {
            let mr = lookup(table, op.mr_lkey).ok_or(MrError::Protection)?;
            mr.may_hold_window(pd, access, op.addr, op.length)?;
            Some(Binding {
                mr_key: op.mr_lkey,
                range: mw::Range {
                    addr: op.addr,
                    length: op.length,
                    zero_based,
                },
                access,
                qpn: (*kind == MwKind::Type2).then_some(qpn),
            })
        };
        let mut st = state.lock();
        if st.key != op.mw_rkey {
            return Err(MrError::Protection);
        }
        if *kind == MwKind::Type2 && (st.binding.is_some() || binding.is_none()) {
            return Err(MrError::Protection);
        }
        st.key = mw::bound_key(st.key, op.new_rkey);
        st.binding = binding;
        Ok(())
    }

    /// Whether a window with `access` may be bound to `[addr, addr +
    /// length)` of this MR for a QP of PD `pd`: a user MR of that PD,
    /// registered with MW_BIND, and LOCAL_WRITE if the window is to be
    /// written.
    fn may_hold_window(
        &self,
        pd: u32,
        access: AccessFlags,
        addr: u64,
        length: u64,
    ) -> Result<(), MrError> {
        let Backing::User { range, iova, .. } = &self.backing else {
            return Err(MrError::Protection);
        };
        let writes = AccessFlags::REMOTE_WRITE | AccessFlags::REMOTE_ATOMIC;
        if self.pd != pd
            || !self.access.contains(AccessFlags::MW_BIND)
            || (access.intersects(writes) && !self.access.contains(AccessFlags::LOCAL_WRITE))
        {
            return Err(MrError::Protection);
        }
        let off = addr.checked_sub(*iova).ok_or(MrError::Bounds)?;
        let length = usize::try_from(length).map_err(|_| MrError::Bounds)?;
        within(off, length, range.len).map(|_| ())
    }

    /// Calls `f(kernel address, range)` for each piece of the `len` bytes
    /// at `off` of a kernel MR that lie at contiguous kernel addresses
    /// (the whole range for the DMA MR, page by page for fast-reg). A
    /// fast-registration MR stays locked meanwhile, so a LOCAL_INV cannot
    /// complete while its pages are being accessed.
    fn kernel_pieces(
        &self,
        off: u64,
        len: usize,
        mut f: impl FnMut(u64, core::ops::Range<usize>) -> Result,
    ) -> Result {
        match &self.backing {
            Backing::Dma => f(off, 0..len),
            Backing::FastReg(st) => {
                let st = st.lock();
                if !st.valid || within(off, len, st.length).is_err() {
                    return Err(EFAULT);
                }
                let mut done = 0usize;
                while done < len {
                    let (addr, room) = st.locate(off + done as u64).ok_or(EFAULT)?;
                    let n = (room.min((len - done) as u64)) as usize;
                    f(addr, done..done + n)?;
                    done += n;
                }
                Ok(())
            }
            Backing::User { .. } | Backing::Window { .. } => Err(EINVAL),
        }
    }

    /// Reads `out.len()` bytes at `off` (from [`MrCore::check`]). Any
    /// context.
    pub(crate) fn read(&self, off: u64, out: &mut [u8]) -> Result {
        if let Backing::User { umem, .. } = &self.backing {
            return umem.read(off, out);
        }
        self.kernel_pieces(off, out.len(), |addr, r| {
            kmem::read(addr, out.get_mut(r).ok_or(EINVAL)?)
        })
    }

    /// Writes `data` at `off` (from [`MrCore::check`]). Any context.
    pub(crate) fn write(&self, off: u64, data: &[u8]) -> Result {
        if let Backing::User { umem, .. } = &self.backing {
            return umem.write(off, data);
        }
        self.kernel_pieces(off, data.len(), |addr, r| {
            kmem::write(addr, data.get(r).ok_or(EINVAL)?)
        })
    }

    /// Copies `len` bytes at `skb_off` of `skb` to `off` (from
    /// [`MrCore::check`]), straight from the skb's fragments. Any
    /// context.
    pub(crate) fn copy_from_skb(
        &self,
        off: u64,
        skb: &SkBuff,
        skb_off: usize,
        len: usize,
    ) -> Result {
        if let Backing::User { umem, .. } = &self.backing {
            return umem.copy_from_skb(off, skb, skb_off, len);
        }
        self.kernel_pieces(off, len, |addr, r| {
            kmem::copy_from_skb(addr, skb, skb_off + r.start, r.len())
        })
    }

    /// Invalidates the fast-registration MR or type 2 memory window `key`
    /// names, for QP `qpn` of PD `pd` (LOCAL_INV, or SEND_WITH_INV from
    /// the peer): a window must be bound, through that QP. Nothing else
    /// can be invalidated (o10-37.2.26: no type 1 window). Any context.
    pub(crate) fn invalidate(&self, qpn: u32, pd: u32, key: u32) -> Result<(), MrError> {
        if let Backing::Window { kind, state } = &self.backing {
            let mut st = state.lock();
            let bound_here = st.binding.is_some_and(|b| b.qpn == Some(qpn));
            if *kind != MwKind::Type2 || self.pd != pd || st.key != key || !bound_here {
                return Err(MrError::Protection);
            }
            st.binding = None;
            return Ok(());
        }
        let Backing::FastReg(st) = &self.backing else {
            return Err(MrError::Protection);
        };
        let mut st = st.lock();
        if self.pd != pd || st.key != key {
            return Err(MrError::Protection);
        }
        st.valid = false;
        Ok(())
    }

    /// Registers a fast-registration MR (REG_MR) under `key` (same index)
    /// with `access` over `[iova, iova + length)` of its mapped pages.
    /// Any context.
    pub(crate) fn register(&self, pd: u32, reg: &Registration) -> Result<(), MrError> {
        self.register_if(pd, reg, |_| true)
    }

    /// [`Self::register`], only if this MR is free (not valid): no
    /// request can then be using it. Any context.
    pub(crate) fn register_free(&self, pd: u32, reg: &Registration) -> Result<(), MrError> {
        self.register_if(pd, reg, |valid| !valid)
    }

    fn register_if(
        &self,
        pd: u32,
        reg: &Registration,
        allowed: impl FnOnce(bool) -> bool,
    ) -> Result<(), MrError> {
        let Backing::FastReg(st) = &self.backing else {
            return Err(MrError::Protection);
        };
        let mut st = st.lock();
        if !allowed(st.valid) {
            return Err(MrError::Protection);
        }
        if self.pd != pd
            || (reg.key >> 8) != (self.key >> 8)
            || !reg.page_size.is_power_of_two()
            || reg.page_size < 512
        {
            return Err(MrError::Protection);
        }
        // The range, from its offset into the first page, must lie within
        // the mapped pages.
        let lead = reg.iova & (reg.page_size - 1);
        let span = lead.checked_add(reg.length).ok_or(MrError::Bounds)?;
        let mapped = (st.npages as u64)
            .checked_mul(reg.page_size)
            .ok_or(MrError::Bounds)?;
        if st.npages == 0 || span > mapped {
            return Err(MrError::Bounds);
        }
        st.key = reg.key;
        st.access = reg.access;
        st.iova = reg.iova;
        st.length = reg.length;
        st.page_size = reg.page_size;
        st.valid = true;
        Ok(())
    }
}

/// The memory a remote access goes to: the MR its rkey names, or the MR
/// the window it names is bound to.
pub(crate) enum Remote<'a> {
    Region(&'a MrCore),
    Window(Arc<MrCore>),
}

impl core::ops::Deref for Remote<'_> {
    type Target = MrCore;

    fn deref(&self) -> &MrCore {
        match self {
            Remote::Region(mr) => mr,
            Remote::Window(mr) => mr,
        }
    }
}

/// What a REG_MR work request asks of a fast-registration MR.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Registration {
    pub(crate) key: u32,
    pub(crate) access: AccessFlags,
    pub(crate) iova: u64,
    pub(crate) length: u64,
    pub(crate) page_size: u64,
}

/// The MRs of a device by key index: key = index << 8 | 8-bit tag, so a
/// stale key of a freed MR whose index is reused mismatches.
pub(crate) type MrTable = IndexTable<MrCore>;

/// The MR a key names, if any. Any context; the result must not outlive
/// the caller's RCU read side (softirq): MRs wait for a grace period
/// before their memory goes.
pub(crate) fn lookup(table: &MrTable, key: u32) -> Option<Arc<MrCore>> {
    table.get(key >> 8).filter(|mr| mr.named_by(key))
}

/// Looks MRs up by key for a run of accesses, keeping the last one found:
/// the packets of a received train mostly name one key (a message's
/// packets its receive buffer, a peer's WRITEs one region), so the run
/// looks it up once (issue 10's "one MR check per train"). The table
/// lookup is all a memo saves: each use matches the key against the MR
/// again (a fast-registration MR's key changes with each REG_MR), and
/// each access is still checked whole by [`MrCore::check`] (PD, rights,
/// bounds, a fast-registration MR's validity), since every packet names
/// its own range.
///
/// A memo lives no longer than the call or the receive callback that
/// made it, as a lookup's result must: a deregistration waits for a grace
/// period after taking the MR out of the table, so it cannot complete
/// while a receive callback (softirq, an RCU read side) still holds it;
/// and the MR's index is not handed out again before then (the table
/// keeps the slot reserved until the MR is unpublished), so no new MR can
/// match a key the memo's MR no longer answers to.
pub(crate) struct MrMemo<'a> {
    table: &'a MrTable,
    last: Option<Arc<MrCore>>,
    /// The next lookup is the first of a packet, and `last` is what the
    /// packets before it found.
    carried: bool,
    /// Packets whose first lookup took the MR a packet before them found.
    reused: u64,
}

impl<'a> MrMemo<'a> {
    /// An empty memo over the MRs of `table`.
    pub(crate) fn new(table: &'a MrTable) -> Self {
        Self {
            table,
            last: None,
            carried: false,
            reused: 0,
        }
    }

    /// The table the memo looks keys up in.
    pub(crate) fn table(&self) -> &'a MrTable {
        self.table
    }

    /// The next lookup is a new packet's (for [`MrMemo::reused`]).
    pub(crate) fn next_packet(&mut self) {
        self.carried = self.last.is_some();
    }

    /// The MR `key` names: the last one found, if the key still names it,
    /// else looked up (and remembered). Any context.
    pub(crate) fn get(&mut self, key: u32) -> Option<&MrCore> {
        let carried = core::mem::replace(&mut self.carried, false);
        // The index first: a fast-registration MR's full key is read
        // under its lock.
        if self
            .last
            .as_ref()
            .is_some_and(|mr| mr.index() == key >> 8 && mr.named_by(key))
        {
            self.reused += u64::from(carried);
        } else {
            self.last = Some(lookup(self.table, key)?);
        }
        self.last.as_deref()
    }

    /// How many packets (since [`MrMemo::next_packet`] marked them) took
    /// at their first lookup the MR a packet before them found.
    pub(crate) fn reused(&self) -> u64 {
        self.reused
    }
}

/// The MR at `key`'s index whatever its current tag (REG_MR gives a
/// fast-registration MR a new one). Any context.
pub(crate) fn by_index(table: &MrTable, key: u32) -> Option<Arc<MrCore>> {
    table.get(key >> 8)
}

pub(crate) struct RxudMr {
    core: Arc<MrCore>,
    table: Arc<MrTable>,
    _counted: Counted,
}

impl Drop for RxudMr {
    fn drop(&mut self) {
        // Receives that found the MR run in softirq under RCU, and the
        // table's removal waits for a grace period after unpublishing it:
        // none uses it now, and the memory can go (here, in process
        // context, as unpinning requires). If a re-registration put a
        // successor under the key, the key is the successor's.
        drop(self.table.remove_this(self.core.key >> 8, &self.core));
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
        Self::add(table, tag, pd, access, |_| Ok(backing), counted)
    }

    /// Registers the backing `make(key)` gives under a fresh key.
    fn add(
        table: &Arc<MrTable>,
        tag: u32,
        pd: u32,
        access: AccessFlags,
        make: impl FnOnce(u32) -> Result<Backing>,
        counted: Counted,
    ) -> Result<(Self, u32)> {
        let number = table.reserve()?;
        let key = (number.id() << 8) | (tag & 0xff);
        let core = Arc::new(
            MrCore {
                key,
                pd,
                access,
                backing: make(key)?,
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

    /// A user MR over the memory pinned in `umem`, with rights `access`,
    /// addressed from `iova`.
    pub(crate) fn user(
        table: &Arc<MrTable>,
        tag: u32,
        pd: u32,
        umem: Umem,
        access: AccessFlags,
        iova: u64,
        counted: Counted,
    ) -> Result<(Self, u32)> {
        Self::register(
            table,
            tag,
            pd,
            access,
            Backing::user(umem, access, iova),
            counted,
        )
    }

    /// Re-registers this user MR (`ibv_rereg_mr`): a successor with the
    /// same key over `umem` at `iova`, with PD `pd` and rights `access`,
    /// takes this MR's place in the table, so that the keys the owner
    /// handed to peers name the new memory, rights and PD (as hardware
    /// that re-registers in place keeps them). Work requests already
    /// posted with the key meet the successor's checks. Returns the
    /// successor and its key; this MR, dropped by ib_core next, no longer
    /// holds the key. Context: process.
    pub(crate) fn reregister_user(
        &self,
        pd: u32,
        umem: Umem,
        access: AccessFlags,
        iova: u64,
        counted: Counted,
    ) -> Result<(Self, u32)> {
        if !matches!(self.core.backing, Backing::User { .. }) {
            return Err(EINVAL);
        }
        let key = self.core.key;
        let backing = Backing::user(umem, access, iova);
        let core = Arc::new(
            MrCore {
                key,
                pd,
                access,
                backing,
            },
            GFP_KERNEL,
        )?;
        self.table.replace(key >> 8, &self.core, core.clone())?;
        Ok((
            Self {
                core,
                table: self.table.clone(),
                _counted: counted,
            },
            key,
        ))
    }

    /// A user MR's address range and rights, and its iova.
    pub(crate) fn user_range(&self) -> Option<(UserRange, u64)> {
        match self.core.backing {
            Backing::User { range, iova, .. } => Some((range, iova)),
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
        // Invalid until a REG_MR work request registers it; its key is
        // the one `alloc_mr` returns until then.
        let (mr, key) = Self::add(
            table,
            tag,
            pd,
            AccessFlags::EMPTY,
            |key| {
                Ok(Backing::FastReg(KBox::pin_init(
                    new_spinlock_irq!(
                        FastRegState {
                            pages,
                            npages: 0,
                            key,
                            valid: false,
                            access: AccessFlags::EMPTY,
                            iova: 0,
                            length: 0,
                            page_size: kernel::page::PAGE_SIZE as u64,
                        },
                        "rxud:mr_fast_reg"
                    ),
                    GFP_KERNEL,
                )?))
            },
            counted,
        )?;
        Ok((mr, key))
    }

    fn fast_reg_state(&self) -> Result<&SpinLockIrq<FastRegState>> {
        match &self.core.backing {
            Backing::FastReg(st) => Ok(st),
            _ => Err(EINVAL),
        }
    }

    pub(crate) fn clear_pages(&self) -> Result {
        self.fast_reg_state()?.lock().npages = 0;
        Ok(())
    }

    pub(crate) fn add_page(&self, addr: u64) -> Result {
        let mut st = self.fast_reg_state()?.lock();
        let i = st.npages;
        *st.pages.as_mut_slice().get_mut(i).ok_or(ENOMEM)? = addr;
        st.npages = i + 1;
        Ok(())
    }

    /// The MR's data-path side.
    pub(crate) fn core(&self) -> &Arc<MrCore> {
        &self.core
    }
}

/// A memory window: an entry of the MR key table until deallocated
/// (dropping the entry takes it out).
pub(crate) struct RxudMw {
    _entry: RxudMr,
}

impl RxudMw {
    /// A window of type `kind` in PD `pd` under a fresh key; returns it
    /// and its key. Type 1 is valid at once, bound to nothing; type 2
    /// waits for a bind.
    pub(crate) fn new(
        table: &Arc<MrTable>,
        tag: u32,
        pd: u32,
        kind: MwKind,
        counted: Counted,
    ) -> Result<(Self, u32)> {
        let (mw, key) = RxudMr::add(
            table,
            tag,
            pd,
            AccessFlags::EMPTY,
            |key| {
                Ok(Backing::Window {
                    kind,
                    state: KBox::pin_init(
                        new_spinlock_irq!(WindowState { key, binding: None }, "rxud:mw"),
                        GFP_KERNEL,
                    )?,
                })
            },
            counted,
        )?;
        Ok((Self { _entry: mw }, key))
    }
}
