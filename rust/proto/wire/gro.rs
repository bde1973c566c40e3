// SPDX-License-Identifier: GPL-2.0

//! Received trains: which RoCEv2 datagram GRO may link behind the ones
//! before it, the receive half of [`super::train`].
//!
//! RoCEv2 over IPv4 sends a zero UDP checksum, and the stack's UDP GRO
//! merges only datagrams that carry one; rxud's tunnel sockets bring their
//! own GRO callback (`rust/ffi/gro.c`), which links a flow's consecutive
//! datagrams whole, each with its own IP and UDP headers, behind the first
//! (the train's head) so that they climb the stack as one skb. The C links
//! skbs; [`decide`] says whether to, from what GRO knows of the datagram
//! and of the train it holds for the datagram's flow (the IP and UDP
//! layers find that train: same addresses and ports).
//!
//! The rules:
//!
//! - A datagram GRO may not merge (the IP or UDP layer flagged it: IP
//!   options, a fragment, a bad checksum), one too short to be a RoCE
//!   packet (a BTH and an ICRC), or one whose UDP length disagrees with
//!   IP's goes up alone, and so does every datagram while GRO is off (the
//!   module parameter `gro`). The UDP length matters because the stack
//!   writes the train's length over the head's, and cutting the train
//!   loose writes the head's back from its bytes: only a datagram that
//!   came with that length gets back what its ICRC covers. A train held
//!   for its flow goes up first: RC takes a flow in order.
//! - With no train held for its flow, a datagram heads a new one; the
//!   caller makes it go up alone instead if it is not addressed to this
//!   host (a route lookup, which GRO can ask and this module cannot): a
//!   train of forwarded datagrams could not be segmented again on the way
//!   out.
//! - A held train's segment size is its head's UDP payload length. A
//!   longer datagram ends the train before itself and heads the next, as
//!   does one that would bring the train to 64 KiB: the head's IP length
//!   field (16 bits) says the whole train's length while it climbs the
//!   stack.
//! - Any other datagram joins the train; a shorter one (the last packet
//!   of a message) or the [`MAX_SEGS`]th ends it after itself, as UDP
//!   GRO's segments do.
//!
//! Whatever ends a train delivers it before the datagram that ended it,
//! so a flow keeps its order. Everything here is plain values: no skb,
//! no allocation; the C calls it once per received datagram.

use super::bth;
use super::icrc::ICRC_LEN;

/// The most datagrams in a received train (UDP GRO's own limit,
/// `UDP_GRO_CNT_MAX`).
pub const MAX_SEGS: u16 = 64;

/// The shortest UDP payload worth linking: a BTH and an ICRC.
pub const MIN_PAYLOAD: u32 = (bth::HEADER_LEN + ICRC_LEN) as u32;

/// A train's bytes (its head from the IP header on, the others' UDP
/// payloads) stay below this with the next datagram whole: the head's IP
/// total length (or IPv6 payload length) is a 16-bit field.
pub const TRAIN_LEN_LIMIT: u32 = 1 << 16;

const UDP_HEADER_LEN: u16 = 8;

/// What GRO knows of a received datagram.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Datagram {
    /// Its UDP payload length, from IP's length (`skb_gro_len` once the
    /// UDP header is pulled).
    pub payload_len: u32,
    /// Its UDP header's length field.
    pub udp_len: u16,
    /// Its bytes from the IP header on.
    pub len: u32,
    /// The IP or UDP layer wants it delivered alone (GRO's `flush`).
    pub flush: bool,
}

/// The train GRO holds for a datagram's flow.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Train {
    /// Its head's UDP length field: the head's own until GRO completes
    /// the train.
    pub head_udp_len: u16,
    /// Its bytes: the head from its IP header on, the others' UDP
    /// payloads.
    pub len: u32,
    /// Datagrams in it, the head included.
    pub count: u16,
}

impl Train {
    /// The train's segment size: its head's UDP payload length; 0, so
    /// that the train takes nothing, for a head whose UDP length is
    /// shorter than a UDP header (no datagram [`decide`] lets head a
    /// train has one).
    pub fn seg(&self) -> u32 {
        u32::from(self.head_udp_len.saturating_sub(UDP_HEADER_LEN))
    }
}

/// Why a datagram goes up alone.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Alone {
    /// GRO trains are off (the module parameter `gro`).
    Off,
    /// Its UDP payload is shorter than [`MIN_PAYLOAD`].
    Short,
    /// The IP or UDP layer flagged it.
    Flushed,
    /// Its UDP length is not the one IP's length gives.
    UdpLength,
}

/// Why a datagram ends the held train before itself.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Split {
    /// It is longer than the train's segment size.
    Longer,
    /// The train would reach [`TRAIN_LEN_LIMIT`] with it.
    Full,
}

/// Why a datagram that joins the held train ends it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Last {
    /// It is shorter than the train's segment size: the last of its run.
    Shorter,
    /// The train now has [`MAX_SEGS`] datagrams.
    Count,
}

/// What to do with a received datagram.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Verdict {
    /// It goes up alone, after the held train (if any), which goes up now.
    Alone(Alone),
    /// No train of its flow is held: it heads a new one (if it is
    /// addressed to this host, which the caller asks).
    Head,
    /// The held train goes up now, without it; it heads the next one.
    Split(Split),
    /// It joins the held train, which stays open.
    Join,
    /// It joins the held train, which then goes up.
    JoinLast(Last),
}

/// Whether a datagram may be in any train at all.
fn admit(enabled: bool, d: &Datagram) -> Result<(), Alone> {
    if !enabled {
        Err(Alone::Off)
    } else if d.payload_len < MIN_PAYLOAD {
        Err(Alone::Short)
    } else if d.flush {
        Err(Alone::Flushed)
    } else if u64::from(d.udp_len) != u64::from(d.payload_len) + u64::from(UDP_HEADER_LEN) {
        Err(Alone::UdpLength)
    } else {
        Ok(())
    }
}

/// GRO's decision for the datagram `next`, given the train it holds for
/// `next`'s flow (`None` if it holds none) and whether GRO trains are on
/// (`enabled`).
pub fn decide(enabled: bool, next: Datagram, held: Option<Train>) -> Verdict {
    if let Err(why) = admit(enabled, &next) {
        return Verdict::Alone(why);
    }
    let Some(train) = held else {
        return Verdict::Head;
    };
    let seg = train.seg();
    if next.payload_len > seg {
        return Verdict::Split(Split::Longer);
    }
    if u64::from(train.len) + u64::from(next.len) >= u64::from(TRAIN_LEN_LIMIT) {
        return Verdict::Split(Split::Full);
    }
    if next.payload_len < seg {
        Verdict::JoinLast(Last::Shorter)
    } else if train.count.saturating_add(1) >= MAX_SEGS {
        Verdict::JoinLast(Last::Count)
    } else {
        Verdict::Join
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::vec::Vec;

    /// IPv4 and UDP headers in front of every datagram here.
    const HEADERS: u32 = 20 + 8;

    /// A well-formed IPv4 RoCE datagram with `payload` bytes of UDP
    /// payload.
    fn dgram(payload: u32) -> Datagram {
        Datagram {
            payload_len: payload,
            udp_len: (payload + 8) as u16,
            len: HEADERS + payload,
            flush: false,
        }
    }

    /// A train of `count` datagrams of `seg` bytes of UDP payload each.
    fn train(seg: u32, count: u16) -> Train {
        Train {
            head_udp_len: (seg + 8) as u16,
            len: HEADERS + seg * u32::from(count),
            count,
        }
    }

    #[test]
    fn a_well_formed_datagram_heads_a_train_when_none_is_held() {
        assert_eq!(decide(true, dgram(1024), None), Verdict::Head);
        assert_eq!(decide(true, dgram(MIN_PAYLOAD), None), Verdict::Head);
    }

    #[test]
    fn with_gro_off_every_datagram_goes_up_alone() {
        let alone = Verdict::Alone(Alone::Off);
        assert_eq!(decide(false, dgram(1024), None), alone);
        assert_eq!(decide(false, dgram(1024), Some(train(1024, 1))), alone);
    }

    #[test]
    fn a_datagram_shorter_than_a_bth_and_an_icrc_goes_up_alone() {
        let short = dgram(MIN_PAYLOAD - 1);
        assert_eq!(decide(true, short, None), Verdict::Alone(Alone::Short));
        assert_eq!(
            decide(true, short, Some(train(1024, 2))),
            Verdict::Alone(Alone::Short)
        );
        assert_eq!(decide(true, dgram(0), None), Verdict::Alone(Alone::Short));
    }

    #[test]
    fn a_datagram_the_ip_or_udp_layer_flagged_goes_up_alone() {
        let d = Datagram {
            flush: true,
            ..dgram(1024)
        };
        assert_eq!(decide(true, d, None), Verdict::Alone(Alone::Flushed));
        assert_eq!(
            decide(true, d, Some(train(1024, 2))),
            Verdict::Alone(Alone::Flushed)
        );
    }

    #[test]
    fn a_datagram_whose_udp_length_is_not_ips_goes_up_alone() {
        for udp_len in [1031, 1033, 0, 8, u16::MAX] {
            let d = Datagram {
                udp_len,
                ..dgram(1024)
            };
            assert_eq!(decide(true, d, None), Verdict::Alone(Alone::UdpLength));
            assert_eq!(
                decide(true, d, Some(train(1024, 2))),
                Verdict::Alone(Alone::UdpLength)
            );
        }
        // One byte of UDP payload past what a 16-bit length can say, and
        // a length no datagram has (no overflow, no panic).
        for payload_len in [0xffff - 7, u32::MAX] {
            let d = Datagram {
                payload_len,
                udp_len: 0xffff,
                len: u32::MAX,
                flush: false,
            };
            assert_eq!(decide(true, d, None), Verdict::Alone(Alone::UdpLength));
        }
    }

    #[test]
    fn the_first_reason_to_go_alone_is_the_one_reported() {
        let all_wrong = Datagram {
            payload_len: 4,
            udp_len: 99,
            len: HEADERS + 4,
            flush: true,
        };
        assert_eq!(decide(false, all_wrong, None), Verdict::Alone(Alone::Off));
        assert_eq!(decide(true, all_wrong, None), Verdict::Alone(Alone::Short));
        let flagged_bad_length = Datagram {
            udp_len: 99,
            flush: true,
            ..dgram(1024)
        };
        assert_eq!(
            decide(true, flagged_bad_length, None),
            Verdict::Alone(Alone::Flushed)
        );
    }

    #[test]
    fn a_datagram_of_the_trains_segment_size_joins_it() {
        assert_eq!(
            decide(true, dgram(1024), Some(train(1024, 1))),
            Verdict::Join
        );
        assert_eq!(
            decide(true, dgram(1024), Some(train(1024, 40))),
            Verdict::Join
        );
    }

    #[test]
    fn a_datagram_longer_than_the_trains_segments_ends_the_train_before_itself() {
        assert_eq!(
            decide(true, dgram(1025), Some(train(1024, 3))),
            Verdict::Split(Split::Longer)
        );
        assert_eq!(
            decide(true, dgram(4096), Some(train(MIN_PAYLOAD, 1))),
            Verdict::Split(Split::Longer)
        );
    }

    #[test]
    fn a_shorter_datagram_joins_the_train_as_its_last() {
        assert_eq!(
            decide(true, dgram(1023), Some(train(1024, 3))),
            Verdict::JoinLast(Last::Shorter)
        );
        assert_eq!(
            decide(true, dgram(MIN_PAYLOAD), Some(train(1024, 1))),
            Verdict::JoinLast(Last::Shorter)
        );
    }

    #[test]
    fn the_datagram_that_makes_the_train_max_segs_long_ends_it() {
        assert_eq!(
            decide(true, dgram(256), Some(train(256, MAX_SEGS - 2))),
            Verdict::Join
        );
        assert_eq!(
            decide(true, dgram(256), Some(train(256, MAX_SEGS - 1))),
            Verdict::JoinLast(Last::Count)
        );
        // A shorter one says why it ends the train first.
        assert_eq!(
            decide(true, dgram(255), Some(train(256, MAX_SEGS - 1))),
            Verdict::JoinLast(Last::Shorter)
        );
    }

    #[test]
    fn a_datagram_that_would_bring_the_train_to_64_kib_ends_it_before_itself() {
        let d = dgram(1024);
        let room = Train {
            len: TRAIN_LEN_LIMIT - 1 - d.len,
            ..train(1024, 10)
        };
        assert_eq!(decide(true, d, Some(room)), Verdict::Join);
        let full = Train {
            len: TRAIN_LEN_LIMIT - d.len,
            ..room
        };
        assert_eq!(decide(true, d, Some(full)), Verdict::Split(Split::Full));
        // Lengths that would wrap 32 bits still count as too long.
        let huge = Train {
            len: u32::MAX,
            ..room
        };
        assert_eq!(decide(true, d, Some(huge)), Verdict::Split(Split::Full));
        // A longer datagram is longer first.
        assert_eq!(
            decide(true, dgram(2048), Some(full)),
            Verdict::Split(Split::Longer)
        );
    }

    #[test]
    fn a_train_whose_head_has_no_udp_payload_takes_nothing() {
        let broken = Train {
            head_udp_len: 4,
            ..train(1024, 1)
        };
        assert_eq!(broken.seg(), 0);
        assert_eq!(
            decide(true, dgram(MIN_PAYLOAD), Some(broken)),
            Verdict::Split(Split::Longer)
        );
    }

    /// GRO over one NAPI poll of one flow, as `rust/ffi/gro.c` runs it:
    /// the datagrams' payload lengths, in arrival order, come out as the
    /// trains (and lone datagrams) the stack receives, in order.
    fn gro(payloads: &[u32]) -> Vec<Vec<u32>> {
        let mut up = Vec::new();
        let mut held: Option<Vec<u32>> = None;
        for &p in payloads {
            let t = held.as_ref().map(|t| Train {
                head_udp_len: (t[0] + 8) as u16,
                len: HEADERS + t.iter().sum::<u32>(),
                count: t.len() as u16,
            });
            match decide(true, dgram(p), t) {
                Verdict::Alone(_) => {
                    up.extend(held.take());
                    up.push(std::vec![p]);
                }
                Verdict::Head => held = Some(std::vec![p]),
                Verdict::Split(_) => {
                    up.extend(held.take());
                    held = Some(std::vec![p]);
                }
                Verdict::Join => held.as_mut().unwrap().push(p),
                Verdict::JoinLast(_) => {
                    let mut t = held.take().unwrap();
                    t.push(p);
                    up.push(t);
                }
            }
        }
        // The end of the poll flushes what is held.
        up.extend(held);
        up
    }

    #[test]
    fn a_flows_datagrams_come_up_in_order_in_trains_ended_as_the_rules_say() {
        // A message of 100 full packets and a short last one, then a lone
        // runt, then a message of longer packets.
        let mut q: Vec<u32> = std::vec![512; 100];
        q.push(300);
        q.push(MIN_PAYLOAD - 1);
        q.extend([2048, 2048, 2048]);
        let up = gro(&q);
        let flat: Vec<u32> = up.iter().flatten().copied().collect();
        assert_eq!(flat, q, "nothing lost, nothing reordered");
        let sizes: Vec<usize> = up.iter().map(Vec::len).collect();
        // 64 (MAX_SEGS), 36 and the short one, the runt alone, then the
        // longer packets in a train of their own.
        assert_eq!(sizes, [64, 37, 1, 3]);
        // 1 KiB packets: the 64 KiB limit ends the first train before
        // MAX_SEGS does.
        let q: Vec<u32> = std::vec![1024; 100];
        let sizes: Vec<usize> = gro(&q).iter().map(Vec::len).collect();
        assert_eq!(sizes, [63, 37]);
        for t in &up {
            let seg = t[0];
            assert!(t.iter().all(|&p| p <= seg));
            assert!(t[..t.len() - 1].iter().all(|&p| p == seg));
        }
    }

    #[test]
    fn four_kib_datagrams_fill_a_train_before_max_segs() {
        let q: Vec<u32> = std::vec![4096 + 16; 40];
        let up = gro(&q);
        let n = up[0].len() as u32;
        // The head's headers, n payloads, and one more whole datagram,
        // would reach 64 KiB.
        assert!(HEADERS + n * 4112 + (HEADERS + 4112) >= TRAIN_LEN_LIMIT);
        assert!(HEADERS + (n - 1) * 4112 + (HEADERS + 4112) < TRAIN_LEN_LIMIT);
        assert_eq!(n, 15);
        assert_eq!(up.iter().flatten().count(), 40);
    }
}
