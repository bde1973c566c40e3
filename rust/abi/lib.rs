// SPDX-License-Identifier: GPL-2.0 OR Linux-OpenIB

//! Host build of rxud's user ABI (`rust/abi/`), shared by librxud and the
//! kernel module.

#![no_std]

#[path = "mod.rs"]
mod abi;

pub use abi::*;
