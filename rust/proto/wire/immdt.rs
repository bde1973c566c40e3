// SPDX-License-Identifier: GPL-2.0

//! Immediate Data Extended Transport Header (IBTA 9.3.5): 4 bytes handed
//! to the receiver's completion with SEND or RDMA WRITE "with immediate".
//!
//! The verbs API already holds immediate data in network byte order
//! (`imm_data` is `__be32`), so the bytes travel verbatim: the view
//! exposes them as an array rather than inviting a byte-order conversion
//! that would have to be undone.

use super::Error;

/// Length of the ImmDt header.
pub const HEADER_LEN: usize = 4;

header_view!(
    /// A view of an ImmDt header at the start of a buffer.
    Header,
    HEADER_LEN
);

impl<T: AsRef<[u8]>> Header<T> {
    /// The immediate data, as on the wire (and in `ibv_wc.imm_data`).
    pub fn imm_data(&self) -> [u8; 4] {
        let b = self.b();
        [b[0], b[1], b[2], b[3]]
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Header<T> {
    /// Sets what [`Self::imm_data`] reads.
    pub fn set_imm_data(&mut self, imm: [u8; 4]) {
        self.m()[..HEADER_LEN].copy_from_slice(&imm);
    }
}

/// A decoded ImmDt header.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Repr {
    /// The immediate data, as on the wire.
    pub imm_data: [u8; 4],
}

impl Repr {
    /// Decodes the header.
    pub fn parse<T: AsRef<[u8]>>(h: &Header<T>) -> Self {
        Self {
            imm_data: h.imm_data(),
        }
    }

    /// Writes the header.
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, h: &mut Header<T>) {
        h.set_imm_data(self.imm_data);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bytes_travel_verbatim() {
        let mut out = [0u8; 4];
        Repr {
            imm_data: [1, 2, 3, 4],
        }
        .emit(&mut Header::new_checked(&mut out[..]).unwrap());
        assert_eq!(out, [1, 2, 3, 4]);
        assert_eq!(
            Header::new_checked(&out[..]).unwrap().imm_data(),
            [1, 2, 3, 4]
        );
        assert_eq!(Header::new_checked(&out[..3]).err(), Some(Error::Truncated));
    }
}
