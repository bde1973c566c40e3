// SPDX-License-Identifier: GPL-2.0

// The protocol core: RoCEv2/XUD logic that knows nothing of the kernel.
// `core` only, no `unsafe`. The kernel module declares it as `mod proto`;
// `rust/proto/lib.rs` builds the same files as a host crate for `cargo
// test` and fuzzing. (No inner doc comment here: this file is included by
// path from the host crate root.)

#![forbid(unsafe_code)]

pub mod congestion;
pub mod guid;
pub mod mcast;
pub mod mtu;
pub mod mw;
pub mod numbers;
pub mod psn;
pub mod rc;
pub mod rtt;
pub mod siphash;
pub mod uc;
pub mod window;
pub mod wire;
pub mod xud;
