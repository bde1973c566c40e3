// SPDX-License-Identifier: GPL-2.0

//! Random numbers from the kernel's CSPRNG (`get_random_u64`): XUD's
//! stream and QP incarnations and each QP's stream-cookie key are the
//! secrets an off-path forger must guess, so they come from it, never
//! from a seeded generator.

use crate::ffi::bindings;

/// 64 random bits. Any context.
pub(crate) fn u64() -> u64 {
    // SAFETY: no precondition; `get_random_u64` may be called in any
    // context (it never sleeps).
    unsafe { bindings::rxud_random_u64() }
}
