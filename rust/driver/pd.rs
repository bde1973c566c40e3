// SPDX-License-Identifier: GPL-2.0

//! Protection domains. A PD is only an identity for now: the MRs, QPs and
//! AHs that name it are checked against it when they are created.

use super::counter::Counted;

pub(crate) struct RxudPd {
    /// Unique among the device's live PDs: what MRs and QPs compare.
    id: u32,
    _counted: Counted,
}

impl RxudPd {
    pub(crate) fn new(id: u32, counted: Counted) -> Self {
        Self {
            id,
            _counted: counted,
        }
    }

    pub(crate) fn id(&self) -> u32 {
        self.id
    }
}
