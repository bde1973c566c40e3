// SPDX-License-Identifier: GPL-2.0

//! Scatter/gather lists: the SGEs of a work request, as a byte stream
//! that packets read from (gather) or write into (scatter) at any offset.
//! A message is cut into packets, and a retransmission or a READ
//! response may start anywhere in it, so every access names its offset
//! in the list rather than walking it from the start with a cursor.
//!
//! Every SGE is re-checked on each access (key, PD, rights, bounds): an
//! MR may be deregistered between two packets of one message. Keys are
//! looked up through the caller's [`MrMemo`], so the packets of a
//! received train that place into one MR look it up once.

use super::mr::{MrCore, MrMemo};
use crate::abi::{Sge, SGE_SIZE};
use crate::ib::AccessFlags;
use crate::net::skb::SkBuff;
use core::ops::Range;
use kernel::prelude::*;

/// Why an access through a list failed: the work request completes with
/// the matching status.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum SglError {
    /// A key, right or bound is wrong (`LOC_PROT_ERR`).
    Protection,
    /// The list is shorter than the access (`LOC_LEN_ERR`).
    Length,
}

/// The SGEs of one work request (`num_sge` 16-byte entries at the start
/// of `sges`), used by a QP of PD `pd`.
pub(crate) struct Sgl<'a> {
    pd: u32,
    sges: &'a [u8],
    num_sge: usize,
}

impl<'a> Sgl<'a> {
    /// The list; `num_sge` must already be bounded by the QP's limit
    /// (entries missing from `sges` read as empty).
    pub(crate) fn new(pd: u32, sges: &'a [u8], num_sge: u32) -> Self {
        Self {
            pd,
            sges,
            num_sge: num_sge as usize,
        }
    }

    fn sge(&self, i: usize) -> Sge {
        let at = i * SGE_SIZE as usize;
        Sge::decode(self.sges.get(at..).unwrap_or(&[]))
    }

    /// Total bytes the list covers (saturating at `u64::MAX`).
    pub(crate) fn total_len(&self) -> u64 {
        (0..self.num_sge).fold(0u64, |t, i| t.saturating_add(u64::from(self.sge(i).length)))
    }

    /// Calls `f(mr, offset in mr, range in the access)` for each SGE
    /// piece of the `len` bytes at byte `offset` of the list, the SGEs'
    /// keys looked up through `mrs`.
    fn for_each_piece(
        &self,
        mrs: &mut MrMemo<'_>,
        offset: u64,
        len: usize,
        rights: AccessFlags,
        mut f: impl FnMut(&MrCore, u64, Range<usize>) -> Result,
    ) -> core::result::Result<(), SglError> {
        let mut skip = offset;
        let mut done = 0usize;
        for i in 0..self.num_sge {
            if done == len {
                break;
            }
            let sge = self.sge(i);
            let sge_len = u64::from(sge.length);
            if skip >= sge_len {
                skip -= sge_len;
                continue;
            }
            let n = ((sge_len - skip) as usize).min(len - done);
            let addr = sge.addr.checked_add(skip).ok_or(SglError::Protection)?;
            skip = 0;
            let mr = mrs.get(sge.lkey).ok_or(SglError::Protection)?;
            let off = mr
                .check(self.pd, addr, n, rights)
                .map_err(|_| SglError::Protection)?;
            f(mr, off, done..done + n).map_err(|_| SglError::Protection)?;
            done += n;
        }
        if done < len {
            return Err(SglError::Length);
        }
        Ok(())
    }

    /// Copies `out.len()` bytes at `offset` of the list into `out`.
    pub(crate) fn read(
        &self,
        mrs: &mut MrMemo<'_>,
        offset: u64,
        out: &mut [u8],
    ) -> core::result::Result<(), SglError> {
        self.for_each_piece(mrs, offset, out.len(), AccessFlags::EMPTY, |mr, off, r| {
            mr.read(off, out.get_mut(r).ok_or(EINVAL)?)
        })
    }

    /// Copies `data` to `offset` of the list (needs LOCAL_WRITE).
    pub(crate) fn write(
        &self,
        mrs: &mut MrMemo<'_>,
        offset: u64,
        data: &[u8],
    ) -> core::result::Result<(), SglError> {
        self.for_each_piece(
            mrs,
            offset,
            data.len(),
            AccessFlags::LOCAL_WRITE,
            |mr, off, r| mr.write(off, data.get(r).ok_or(EINVAL)?),
        )
    }

    /// Copies `len` bytes at `skb_off` of `skb` to `offset` of the list,
    /// straight from the skb's fragments (needs LOCAL_WRITE).
    pub(crate) fn copy_from_skb(
        &self,
        mrs: &mut MrMemo<'_>,
        offset: u64,
        skb: &SkBuff,
        skb_off: usize,
        len: usize,
    ) -> core::result::Result<(), SglError> {
        self.for_each_piece(mrs, offset, len, AccessFlags::LOCAL_WRITE, |mr, off, r| {
            mr.copy_from_skb(off, skb, skb_off + r.start, r.len())
        })
    }
}
