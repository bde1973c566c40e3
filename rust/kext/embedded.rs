// SPDX-License-Identifier: GPL-2.0

//! Whether a field lies inside its owner: what lets [`super::timer`] and
//! [`super::bh_work`] take their owner's word (a safe trait method naming
//! the field) for where their C callbacks find it.
//!
//! A `timer_list` or `work_struct` callback gets only a pointer to the C
//! struct; reaching the Rust object around it needs an address the object
//! vouched for. Instead of an `unsafe` trait with a field offset (which
//! would put an `unsafe impl` in the driver), each arm or queue checks
//! that the field the owner names lies within the owner's bytes. Two live
//! objects of one type never overlap, so such a field belongs to that
//! owner alone: the address stored at that moment is the one the callback
//! must find.

/// Whether `field` lies entirely within `owner`'s bytes.
pub(crate) fn lies_within<F, T>(field: &F, owner: &T) -> bool {
    let start = owner as *const T as usize;
    let at = field as *const F as usize;
    at >= start
        && at
            .checked_add(core::mem::size_of::<F>())
            .is_some_and(|end| end <= start + core::mem::size_of::<T>())
}
