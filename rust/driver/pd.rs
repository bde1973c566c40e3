// SPDX-License-Identifier: GPL-2.0

//! Protection domains. A PD is only an identity for now: the MRs, QPs and
//! AHs that name it are checked against it when they are created.

use super::counter::Counted;

pub(crate) struct RxudPd {
    _counted: Counted,
}

impl RxudPd {
    pub(crate) fn new(counted: Counted) -> Self {
        Self { _counted: counted }
    }
}
