// SPDX-License-Identifier: GPL-2.0

//! Flush Extended Transport Header (IBTA 1.5, Annex A19 "Memory
//! Placement Extensions"): what an RC FLUSH makes persistent or visible.
//! 4 bytes, of which the low 6 bits of the last one are used:
//!
//! ```text
//!  bits 5:4  selectivity level (0: the range in the RETH, 1: the whole MR)
//!  bits 3:0  placement type (bit 0: global visibility, bit 1: persistence)
//! ```
//!
//! rxe sends and accepts FLUSH, so the parser must know its layout to
//! stay in step with the headers that follow, whether or not rxud ever
//! executes one.

use super::field::{get_u32, set_u32};
use super::Error;

/// Length of the FETH.
pub const HEADER_LEN: usize = 4;

const PLT_MASK: u32 = 0x0f;
const SEL_MASK: u32 = 0x30;
const SEL_SHIFT: u32 = 4;

header_view!(
    /// A view of a FETH at the start of a buffer.
    Header,
    HEADER_LEN
);

impl<T: AsRef<[u8]>> Header<T> {
    /// Placement type bits.
    pub fn placement_type(&self) -> u8 {
        (get_u32(self.b(), 0) & PLT_MASK) as u8
    }

    /// Selectivity level.
    pub fn selectivity_level(&self) -> u8 {
        ((get_u32(self.b(), 0) & SEL_MASK) >> SEL_SHIFT) as u8
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Header<T> {
    /// Writes both fields and zeroes the reserved bits.
    pub fn set(&mut self, placement_type: u8, selectivity_level: u8) {
        let v = (u32::from(placement_type) & PLT_MASK)
            | ((u32::from(selectivity_level) << SEL_SHIFT) & SEL_MASK);
        set_u32(self.m(), 0, v);
    }
}

/// A decoded FETH.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Repr {
    /// Placement type bits (4).
    pub placement_type: u8,
    /// Selectivity level (2 bits).
    pub selectivity_level: u8,
}

impl Repr {
    /// Decodes the header.
    pub fn parse<T: AsRef<[u8]>>(h: &Header<T>) -> Self {
        Self {
            placement_type: h.placement_type(),
            selectivity_level: h.selectivity_level(),
        }
    }

    /// Writes the header.
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, h: &mut Header<T>) {
        h.set(self.placement_type, self.selectivity_level);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn packs_into_the_last_byte() {
        let mut out = [0xffu8; 4];
        Repr {
            placement_type: 2,
            selectivity_level: 1,
        }
        .emit(&mut Header::new_checked(&mut out[..]).unwrap());
        assert_eq!(out, [0, 0, 0, 0x12]);
        let r = Repr::parse(&Header::new_checked(&[0xff, 0xff, 0xff, 0xff][..]).unwrap());
        assert_eq!(
            r,
            Repr {
                placement_type: 0xf,
                selectivity_level: 3
            }
        );
        assert_eq!(Header::new_checked(&out[..3]).err(), Some(Error::Truncated));
    }
}
