// SPDX-License-Identifier: GPL-2.0

//! A user context: what one process's `ibv_open_device` creates.

use crate::abi::{AllocContextReq, AllocContextResp, UVERBS_ABI_VERSION};
use crate::ib::UData;
use kernel::prelude::*;

/// Per-process state. Empty until the data path adds mmap'ed rings.
pub(crate) struct RxudContext {}

impl RxudContext {
    pub(crate) fn new(udata: &UData) -> Result<Self> {
        let req: AllocContextReq = udata.read()?;
        // No request extensions exist yet.
        if req.comp_mask != 0 {
            return Err(crate::ib::eopnotsupp());
        }
        let resp = AllocContextResp {
            comp_mask: 0,
            abi_version: UVERBS_ABI_VERSION,
            reserved: 0,
        };
        udata.write(&resp)?;
        Ok(Self {})
    }
}
