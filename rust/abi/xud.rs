// SPDX-License-Identifier: GPL-2.0 OR Linux-OpenIB

//! XUD's creation parameters and limits (Documentation/xud.rst, "Creating
//! one"), defined once for the kernel module and librxud.
//!
//! librxud's direct verb `rxudv_create_qp` takes `max_peers` and
//! `ack_every` from the application, checks them with [`XudParams::new`]
//! and passes them on unchanged in [`CreateQpReq`](super::CreateQpReq)
//! with [`create_qp::XUD`](super::create_qp::XUD); the kernel checks them
//! again with the same function (user space is untrusted) and keeps what it
//! returns, the defaults filled in. Kernel consumers, which have no request,
//! get [`XudParams::DEFAULT`].

/// Largest message an XUD QP sends or receives, in bytes: 16 MiB, so that
/// a message finishes well within the retry span (xud.rst, "Admission").
/// Larger posts fail with `EINVAL`.
pub const MAX_MSG_SZ: u32 = 1 << 24;

/// Fewest per-peer state entries an XUD QP may be created with.
pub const MAX_PEERS_MIN: u32 = 1;
/// Most per-peer state entries an XUD QP may be created with.
pub const MAX_PEERS_LIMIT: u32 = 1 << 16;
/// `max_peers` when the creator gives 0.
pub const MAX_PEERS_DEFAULT: u32 = 4096;

/// The largest `ack_every` a creator may ask for: one acknowledgement
/// request per 128 packets, the most a stream has out unanswered (its
/// pipe, xud.rst; the sender asks at least twice per pipe whatever this
/// says).
pub const ACK_EVERY_LIMIT: u32 = 128;
/// `ack_every` when the creator gives 0 (the provider's default).
pub const ACK_EVERY_DEFAULT: u32 = 16;

/// What is wrong with a creator's XUD parameters (`EINVAL` for both).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum XudParamError {
    /// `max_peers` above [`MAX_PEERS_LIMIT`].
    MaxPeers,
    /// `ack_every` above [`ACK_EVERY_LIMIT`].
    AckEvery,
}

/// The parameters of an XUD QP, defaults filled in and within range.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct XudParams {
    /// Per-peer state entries, each side: a new peer beyond them is
    /// refused, no live one is evicted.
    pub max_peers: u32,
    /// The sender asks for an ACK every this many packets of a stream.
    pub ack_every: u32,
}

impl XudParams {
    /// The parameters of a QP whose creator chose none.
    pub const DEFAULT: Self = Self {
        max_peers: MAX_PEERS_DEFAULT,
        ack_every: ACK_EVERY_DEFAULT,
    };

    /// The parameters a creator asked for: 0 means the default; otherwise
    /// `max_peers` is 1 to [`MAX_PEERS_LIMIT`] and `ack_every` 1 to
    /// [`ACK_EVERY_LIMIT`].
    pub const fn new(max_peers: u32, ack_every: u32) -> Result<Self, XudParamError> {
        let max_peers = match max_peers {
            0 => MAX_PEERS_DEFAULT,
            n if n >= MAX_PEERS_MIN && n <= MAX_PEERS_LIMIT => n,
            _ => return Err(XudParamError::MaxPeers),
        };
        let ack_every = match ack_every {
            0 => ACK_EVERY_DEFAULT,
            n if n <= ACK_EVERY_LIMIT => n,
            _ => return Err(XudParamError::AckEvery),
        };
        Ok(Self {
            max_peers,
            ack_every,
        })
    }
}

// The defaults are values a creator could have asked for.
const _: () = assert!(
    MAX_PEERS_DEFAULT >= MAX_PEERS_MIN
        && MAX_PEERS_DEFAULT <= MAX_PEERS_LIMIT
        && ACK_EVERY_DEFAULT >= 1
        && ACK_EVERY_DEFAULT <= ACK_EVERY_LIMIT
);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn zero_means_the_default() {
        assert_eq!(XudParams::new(0, 0), Ok(XudParams::DEFAULT));
        assert_eq!(
            XudParams::new(0, 0),
            Ok(XudParams {
                max_peers: 4096,
                ack_every: 16
            })
        );
        assert_eq!(XudParams::new(7, 0).map(|p| p.ack_every), Ok(16));
        assert_eq!(XudParams::new(0, 3).map(|p| p.max_peers), Ok(4096));
    }

    #[test]
    fn ranges_are_inclusive() {
        for (peers, ack) in [(1, 1), (65536, 128), (4096, 16), (2, 127)] {
            assert_eq!(
                XudParams::new(peers, ack),
                Ok(XudParams {
                    max_peers: peers,
                    ack_every: ack
                })
            );
        }
        assert_eq!(XudParams::new(65537, 0), Err(XudParamError::MaxPeers));
        assert_eq!(XudParams::new(u32::MAX, 0), Err(XudParamError::MaxPeers));
        assert_eq!(XudParams::new(0, 129), Err(XudParamError::AckEvery));
        assert_eq!(XudParams::new(1, u32::MAX), Err(XudParamError::AckEvery));
    }

    #[test]
    fn limits_are_the_specified_ones() {
        assert_eq!(MAX_MSG_SZ, 16 * 1024 * 1024);
        assert_eq!((MAX_PEERS_MIN, MAX_PEERS_LIMIT), (1, 65536));
        assert_eq!(ACK_EVERY_LIMIT, 128);
    }
}
