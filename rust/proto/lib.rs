// SPDX-License-Identifier: GPL-2.0

//! Host build of rxud's protocol core (`rust/proto/`), the same files the
//! kernel module compiles, for unit tests, property tests and fuzzing.

#![no_std]

#[cfg(test)]
extern crate std;

#[path = "mod.rs"]
mod core_mod;

pub use core_mod::*;
