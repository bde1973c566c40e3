// SPDX-License-Identifier: GPL-2.0

//! A sender's round-trip estimate and the retransmit timeout it gives
//! (RFC 6298), for RC's requester and each XUD stream.
//!
//! Samples are taken by the sender from one timed packet at a time, a
//! first transmission, to the answer that acknowledges it; a timed packet
//! that goes again is not sampled (Karn: the answer could be either
//! copy's). The timeout is the QP's (its `timeout` attribute, the floor
//! the verbs promise) or the measured round trip and four deviations if
//! that is longer: a queue or a loaded host may make the path slower than
//! the QP expects, and timing out before the answer can come only resends.
//!
//! Each timeout (and each XUD tail probe) doubles the wait until a sample
//! is taken again (Karn's algorithm, RFC 6298 5.5 and 5.7): progress alone
//! does not end the backoff. On a path whose round trip outgrew the
//! estimate every timed packet would otherwise go again before its answer
//! came, no sample would ever be taken and the estimate would never grow:
//! 32 XUD streams through one queue resent over half their packets so.
//!
//! `core` only, no allocation: the kernel module and the host tests
//! compile this file.

/// The most doublings of a backed-off wait.
pub const MAX_BACKOFF: u8 = 16;

/// The estimate (all times in ns).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Rtt {
    /// Smoothed round trip, `None` until a sample was taken.
    srtt: Option<u64>,
    /// Its mean deviation.
    rttvar: u64,
    /// Doublings owed to timeouts since the last sample.
    backoff: u8,
}

impl Rtt {
    /// No sample yet, no backoff.
    pub const NEW: Rtt = Rtt {
        srtt: None,
        rttvar: 0,
        backoff: 0,
    };

    /// Takes a round-trip sample (RFC 6298, 2.2 and 2.3); the backoff ends
    /// with it.
    pub fn sample(&mut self, r: u64) {
        self.backoff = 0;
        match self.srtt {
            None => {
                self.srtt = Some(r);
                self.rttvar = r / 2;
            }
            Some(srtt) => {
                self.rttvar = self.rttvar - self.rttvar / 4 + srtt.abs_diff(r) / 4;
                self.srtt = Some(srtt - srtt / 8 + r / 8);
            }
        }
    }

    /// A timeout (or a probe) found the path slower than the estimate:
    /// the next waits are twice as long, until a sample is taken.
    pub fn back_off(&mut self) {
        self.backoff = self.backoff.saturating_add(1).min(MAX_BACKOFF);
    }

    /// The smoothed round trip, if one was measured.
    pub const fn srtt(&self) -> Option<u64> {
        self.srtt
    }

    /// Doublings owed since the last sample.
    pub const fn backoff(&self) -> u8 {
        self.backoff
    }

    /// The retransmit timeout before backoff: `floor` (the QP's), or the
    /// round trip and four deviations if that is longer, at most
    /// `ceiling`.
    pub fn timeout(&self, floor: u64, ceiling: u64) -> u64 {
        let measured = self
            .srtt
            .map_or(0, |s| s.saturating_add(self.rttvar.saturating_mul(4)));
        floor.max(measured).min(ceiling)
    }

    /// `wait` doubled for the backoff (and at most `extra` more doublings,
    /// a caller's own count of timeouts in a row).
    pub fn backed_off(&self, wait: u64, extra: u8) -> u64 {
        let shift = self.backoff.max(extra).min(MAX_BACKOFF);
        wait.checked_shl(u32::from(shift))
            .filter(|w| w >> shift == wait)
            .unwrap_or(u64::MAX)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: u64 = 1_000_000;

    #[test]
    fn the_first_sample_sets_the_estimate_and_later_ones_smooth_it() {
        let mut r = Rtt::NEW;
        assert_eq!(r.timeout(67 * MS, 8_000 * MS), 67 * MS);
        r.sample(100 * MS);
        // srtt 100, rttvar 50: 300 ms.
        assert_eq!(r.timeout(67 * MS, 8_000 * MS), 300 * MS);
        for _ in 0..64 {
            r.sample(100 * MS);
        }
        let t = r.timeout(67 * MS, 8_000 * MS);
        assert!((100 * MS..101 * MS).contains(&t), "{t}");
        // The QP's timeout is a floor, the ceiling a ceiling.
        assert_eq!(r.timeout(500 * MS, 8_000 * MS), 500 * MS);
        assert_eq!(r.timeout(MS, 50 * MS), 50 * MS);
    }

    #[test]
    fn the_backoff_lasts_until_a_sample_and_saturates() {
        let mut r = Rtt::NEW;
        r.back_off();
        r.back_off();
        assert_eq!(r.backed_off(10, 0), 40);
        assert_eq!(r.backed_off(10, 3), 80, "the caller's count when larger");
        r.sample(MS);
        assert_eq!((r.backoff(), r.backed_off(10, 0)), (0, 10));
        for _ in 0..100 {
            r.back_off();
        }
        assert_eq!(r.backoff(), MAX_BACKOFF);
        assert_eq!(r.backed_off(u64::MAX / 2, 0), u64::MAX, "no overflow");
    }
}
