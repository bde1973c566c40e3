// SPDX-License-Identifier: GPL-2.0

//! The RoCEv2 wire format: InfiniBand transport headers carried in UDP
//! (destination port 4791), as the kernel's rxe puts them on the wire.
//!
//! Why it looks like this: every byte a peer sends is untrusted, and the
//! data path must look at headers without copying them. So, as in
//! smoltcp's `wire` module, each header is a typed view over a byte
//! buffer (`Bth<T>`, `Reth<T>`, ...) whose constructor `new_checked`
//! checks the buffer length once; after that every getter is infallible
//! and cannot index out of bounds, and setters exist when the buffer is
//! mutable. Where a decoded value is handier than a view (building a
//! packet, comparing in tests) each header also has a plain `Repr` with
//! `parse` and `emit`.
//!
//! [`Packet`] ties the headers together: given a UDP payload it checks
//! the BTH, looks the opcode up in the [`opcode`] table (which says which
//! extension headers follow, in which order), checks that the buffer holds
//! all of them plus pad and ICRC, and hands out the headers and the
//! payload. [`icrc`] computes and checks the invariant CRC over the whole
//! IP datagram. Nothing here allocates, panics on malformed input or uses
//! `unsafe`; every malformed input is an [`Error`] value.
//!
//! All multi-byte fields are big-endian, except the ICRC trailer (see
//! [`icrc`]).

use core::fmt;

/// The part every fixed-size header view shares: the struct and its
/// length checks. `$len` is the header length; the buffer may be longer.
macro_rules! header_view {
    ($(#[$doc:meta])* $name:ident, $len:expr) => {
        $(#[$doc])*
        #[derive(Clone, Copy, Debug, PartialEq, Eq)]
        pub struct $name<T: AsRef<[u8]>> {
            buffer: T,
        }

        impl<T: AsRef<[u8]>> $name<T> {
            /// Wraps `buffer` without checking it; getters panic if it is
            /// too short. For buffers whose length is already checked.
            pub const fn new_unchecked(buffer: T) -> Self {
                Self { buffer }
            }

            /// Wraps `buffer` if it holds the whole header (it may hold
            /// more).
            pub fn new_checked(buffer: T) -> Result<Self, Error> {
                let h = Self::new_unchecked(buffer);
                h.check_len()?;
                Ok(h)
            }

            /// Whether the buffer holds the whole header.
            pub fn check_len(&self) -> Result<(), Error> {
                if self.buffer.as_ref().len() < $len {
                    Err(Error::Truncated)
                } else {
                    Ok(())
                }
            }

            /// The buffer back.
            pub fn into_inner(self) -> T {
                self.buffer
            }

            #[allow(dead_code)]
            fn b(&self) -> &[u8] {
                self.buffer.as_ref()
            }
        }

        impl<T: AsRef<[u8]> + AsMut<[u8]>> $name<T> {
            #[allow(dead_code)]
            fn m(&mut self) -> &mut [u8] {
                self.buffer.as_mut()
            }
        }
    };
}

pub mod aeth;
pub mod atomic;
pub mod bth;
pub mod cnp;
pub mod deth;
pub mod feth;
pub mod gro;
pub mod icrc;
pub mod ieth;
pub mod immdt;
pub mod opcode;
pub mod packet;
mod remote;
pub mod reth;
pub mod train;
#[cfg(test)]
mod vectors;
pub mod xack;
pub mod xck;
pub mod xeth;

// The short names users import (`wire::Bth`, `wire::RethRepr`, ...).
// The kernel module uses only some of them so far, and `unused_imports`
// is not covered by its `allow(dead_code)` on `mod proto`.
#[allow(unused_imports)]
pub use aeth::{AckSyndrome, Header as Aeth, NakCode, Repr as AethRepr};
#[allow(unused_imports)]
pub use atomic::{
    AckHeader as AtomicAckEth, AckRepr as AtomicAckEthRepr, Header as AtomicEth,
    Repr as AtomicEthRepr,
};
#[allow(unused_imports)]
pub use bth::{Header as Bth, Repr as BthRepr};
#[allow(unused_imports)]
pub use deth::{Header as Deth, Repr as DethRepr};
#[allow(unused_imports)]
pub use feth::{Header as Feth, Repr as FethRepr};
#[allow(unused_imports)]
pub use icrc::{icrc_check, icrc_compute, icrc_fill, Icrc, IpUdp, IpVersion, ICRC_LEN};
#[allow(unused_imports)]
pub use ieth::{Header as Ieth, Repr as IethRepr};
#[allow(unused_imports)]
pub use immdt::{Header as ImmDt, Repr as ImmDtRepr};
#[allow(unused_imports)]
pub use opcode::{
    Direction, ExtHeader, Opcode, OpcodeInfo, Operation, Position, Transport, XUD_OPCODE_BASE,
};
#[allow(unused_imports)]
pub use packet::{Packet, Repr as PacketRepr};
#[allow(unused_imports)]
pub use reth::{Header as Reth, Repr as RethRepr};
#[allow(unused_imports)]
pub use xack::{Header as Xack, Repr as XackRepr};
#[allow(unused_imports)]
pub use xeth::{Header as Xeth, Repr as XethRepr};

/// The UDP destination port IANA assigned to RoCEv2.
pub const ROCE_V2_UDP_PORT: u16 = 4791;

/// QP numbers are 24 bits on the wire (BTH destination QP, DETH source
/// QP).
pub const QPN_MASK: u32 = 0x00ff_ffff;

/// Why a buffer is not a well-formed packet (or header).
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Error {
    /// The buffer is shorter than the headers, or than a length field
    /// says it is.
    Truncated,
    /// Length fields disagree with each other or with the opcode (IP and
    /// UDP lengths differ, bytes after the headers of an opcode that
    /// carries no payload, ...).
    BadLength,
    /// The BTH opcode is not one this implementation knows.
    UnknownOpcode(u8),
    /// The BTH transport header version is not 0.
    BadTransportVersion(u8),
    /// The IP version nibble is neither 4 nor 6.
    BadIpVersion(u8),
    /// An IPv4 header with options, or an IPv6 header followed by an
    /// extension header: rxe computes the ICRC as if neither could occur,
    /// so no two implementations would agree on such a packet's ICRC.
    UnsupportedIpHeader,
    /// The IP header does not carry UDP.
    NotUdp,
    /// The ICRC in the trailer is not the one computed over the packet.
    IcrcMismatch {
        /// What the packet should carry.
        computed: u32,
        /// What it carries (as the same little-endian value).
        received: u32,
    },
    /// A packet representation does not fit its opcode (a missing or
    /// superfluous extension header, a pad count above 3, payload on an
    /// opcode without payload).
    ReprMismatch,
    /// A header field holds a value no conforming sender writes (an XUD
    /// stream incarnation of 0, a message lag beyond the stream's limit).
    BadField,
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            Error::Truncated => f.write_str("truncated packet"),
            Error::BadLength => f.write_str("inconsistent length"),
            Error::UnknownOpcode(op) => write!(f, "unknown opcode {op:#04x}"),
            Error::BadTransportVersion(v) => write!(f, "transport version {v}"),
            Error::BadIpVersion(v) => write!(f, "IP version {v}"),
            Error::UnsupportedIpHeader => f.write_str("IP options or extension headers"),
            Error::NotUdp => f.write_str("not UDP"),
            Error::IcrcMismatch { computed, received } => {
                write!(f, "ICRC {received:#010x}, expected {computed:#010x}")
            }
            Error::ReprMismatch => f.write_str("headers do not match the opcode"),
            Error::BadField => f.write_str("header field out of range"),
        }
    }
}

/// Big-endian accessors at byte offsets. The callers index only within
/// lengths they have checked, so none of these can fail.
pub(crate) mod field {
    pub(crate) fn get_u16(d: &[u8], at: usize) -> u16 {
        u16::from_be_bytes([d[at], d[at + 1]])
    }

    pub(crate) fn set_u16(d: &mut [u8], at: usize, v: u16) {
        d[at..at + 2].copy_from_slice(&v.to_be_bytes());
    }

    /// The low 24 bits of the 32-bit word at `at` (a QPN, PSN or MSN
    /// under a flag or reserved byte).
    pub(crate) fn get_u24(d: &[u8], at: usize) -> u32 {
        get_u32(d, at) & 0x00ff_ffff
    }

    /// Sets the low 24 bits of the word at `at`, keeping its top byte.
    pub(crate) fn set_u24(d: &mut [u8], at: usize, v: u32) {
        d[at + 1..at + 4].copy_from_slice(&v.to_be_bytes()[1..]);
    }

    pub(crate) fn get_u32(d: &[u8], at: usize) -> u32 {
        u32::from_be_bytes([d[at], d[at + 1], d[at + 2], d[at + 3]])
    }

    pub(crate) fn set_u32(d: &mut [u8], at: usize, v: u32) {
        d[at..at + 4].copy_from_slice(&v.to_be_bytes());
    }

    pub(crate) fn get_u64(d: &[u8], at: usize) -> u64 {
        (u64::from(get_u32(d, at)) << 32) | u64::from(get_u32(d, at + 4))
    }

    pub(crate) fn set_u64(d: &mut [u8], at: usize, v: u64) {
        d[at..at + 8].copy_from_slice(&v.to_be_bytes());
    }
}

/// Shared by the tests of the header modules.
#[cfg(test)]
pub(crate) mod testutil {
    use std::vec::Vec;

    /// Parses whitespace-separated hex (comments from `#` to the end of a
    /// line are skipped).
    pub(crate) fn hex(s: &str) -> Vec<u8> {
        let digits: Vec<u8> = s
            .lines()
            .flat_map(|l| l.split('#').next().unwrap_or("").bytes())
            .filter(|b| !b.is_ascii_whitespace())
            .collect();
        assert!(digits.len() & 1 == 0, "odd number of hex digits");
        digits
            .chunks(2)
            .map(|p| u8::from_str_radix(core::str::from_utf8(p).unwrap(), 16).unwrap())
            .collect()
    }

    /// A xorshift64* generator: deterministic, good enough to throw
    /// garbage at parsers.
    pub(crate) struct Rng(u64);

    impl Rng {
        pub(crate) fn new(seed: u64) -> Self {
            Self(seed | 1)
        }

        pub(crate) fn next_u64(&mut self) -> u64 {
            self.0 ^= self.0 >> 12;
            self.0 ^= self.0 << 25;
            self.0 ^= self.0 >> 27;
            self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
        }

        /// Uniform-ish in `0..n` (`n > 0`).
        pub(crate) fn below(&mut self, n: usize) -> usize {
            (self.next_u64() % n as u64) as usize
        }

        pub(crate) fn fill(&mut self, buf: &mut [u8]) {
            for b in buf {
                *b = self.next_u64() as u8;
            }
        }
    }
}
