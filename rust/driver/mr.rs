// SPDX-License-Identifier: GPL-2.0

//! Memory regions over user memory.

use super::counter::Counted;
use crate::ib::Umem;

pub(crate) struct RxudMr {
    /// The pinned pages; the data path will place and fetch payload here.
    _umem: Umem,
    _counted: Counted,
}

impl RxudMr {
    pub(crate) fn new(umem: Umem, counted: Counted) -> Self {
        Self { _umem: umem, _counted: counted }
    }
}
