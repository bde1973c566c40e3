// SPDX-License-Identifier: GPL-2.0

//! Which number to hand out next, for objects that peers name on the wire
//! (QP numbers): the policy of the driver's index tables, kept here so that
//! the host can test it.
//!
//! Numbers are handed out round robin from a cursor, not lowest-free, so a
//! number freed now is reused as late as the table allows. That alone does
//! not bound how soon: a process that creates and destroys QPs in a loop
//! goes round 65536 numbers in seconds. A number can therefore also be
//! *held* until a deadline after its object went: XUD holds a destroyed
//! QP's number for [`crate::proto::xud::QPN_HOLD_NS`] (xud.rst, rule 5),
//! by which time no peer keeps state for it and no packet for it is left
//! in the network. The table's owner may also start the cursor at a random
//! number, so that a reloaded module rarely gives out a number that a peer
//! still holds.

/// A number's slot, as the policy sees it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Slot {
    /// Unused: can be handed out.
    Free,
    /// Unused, but not to be handed out before `until_ns` (monotonic
    /// time).
    Held { until_ns: u64 },
    /// Reserved or in use.
    Taken,
}

impl Slot {
    /// Whether the number can be handed out at `now_ns`.
    pub fn is_free_at(self, now_ns: u64) -> bool {
        match self {
            Slot::Free => true,
            Slot::Held { until_ns } => now_ns >= until_ns,
            Slot::Taken => false,
        }
    }
}

/// The slot to hand out next among `len` slots: the first one at or after
/// `cursor` (wrapping around) that is free at `now_ns`; `None` if none is.
/// `slot(i)` is called for `i < len` only. O(len) at worst.
pub fn next_free(
    len: usize,
    cursor: usize,
    now_ns: u64,
    slot: impl Fn(usize) -> Slot,
) -> Option<usize> {
    if len == 0 {
        return None;
    }
    let start = cursor % len;
    (0..len)
        .map(|i| (start + i) % len)
        .find(|&i| slot(i).is_free_at(now_ns))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::vec;
    use std::vec::Vec;

    /// A table of slots driven by the policy, as the driver drives it.
    struct Table {
        slots: Vec<Slot>,
        cursor: usize,
    }

    impl Table {
        fn new(len: usize, cursor: usize) -> Self {
            Self {
                slots: vec![Slot::Free; len],
                cursor,
            }
        }

        fn take(&mut self, now: u64) -> Option<usize> {
            let i = next_free(self.slots.len(), self.cursor, now, |i| self.slots[i])?;
            self.slots[i] = Slot::Taken;
            self.cursor = i + 1;
            Some(i)
        }

        fn free(&mut self, i: usize, hold_until: Option<u64>) {
            self.slots[i] = match hold_until {
                Some(until_ns) => Slot::Held { until_ns },
                None => Slot::Free,
            };
        }
    }

    #[test]
    fn numbers_go_round_from_the_cursor() {
        let mut t = Table::new(4, 2);
        assert_eq!(
            (0..4).map(|_| t.take(0)).collect::<Vec<_>>(),
            [Some(2), Some(3), Some(0), Some(1)]
        );
        assert_eq!(t.take(0), None, "all taken");
        // A number freed is reused only after the others the cursor
        // passes first.
        t.free(3, None);
        t.free(1, None);
        assert_eq!(t.take(0), Some(3), "the cursor is past 1, at 2");
        assert_eq!(t.take(0), Some(1));
    }

    #[test]
    fn a_held_number_is_skipped_until_its_deadline() {
        let mut t = Table::new(3, 0);
        for _ in 0..3 {
            t.take(0);
        }
        t.free(0, Some(100));
        t.free(1, None);
        t.cursor = 0;
        // 0 is first in line but held: 1 comes out, then nothing (0 is
        // still held at 99).
        assert_eq!(t.take(99), Some(1));
        assert_eq!(t.take(99), None);
        // From its deadline on, 0 is free again.
        assert_eq!(t.take(100), Some(0));
    }

    #[test]
    fn a_number_freed_without_hold_is_free_at_once() {
        let mut t = Table::new(1, 0);
        assert_eq!(t.take(5), Some(0));
        t.free(0, None);
        assert_eq!(t.take(5), Some(0));
    }

    #[test]
    fn odd_cursors_and_empty_tables() {
        assert_eq!(next_free(0, 0, 0, |_| unreachable!()), None);
        // A cursor past the end wraps (the driver sets it to index + 1).
        assert_eq!(next_free(4, 4, 0, |_| Slot::Free), Some(0));
        assert_eq!(next_free(4, 9, 0, |_| Slot::Free), Some(1));
        // Only slots below len are looked at.
        assert_eq!(
            next_free(2, 1, 0, |i| if i == 0 { Slot::Free } else { Slot::Taken }),
            Some(0)
        );
    }

    #[test]
    fn slot_states() {
        assert!(Slot::Free.is_free_at(0));
        assert!(!Slot::Taken.is_free_at(u64::MAX));
        assert!(!Slot::Held { until_ns: 10 }.is_free_at(9));
        assert!(Slot::Held { until_ns: 10 }.is_free_at(10));
    }
}
