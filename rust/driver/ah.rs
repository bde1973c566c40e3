// SPDX-License-Identifier: GPL-2.0

//! Address handles: a numbered address vector. UD (and XUD) send WRs name
//! their destination by the AH's number, which the data path looks up.

use super::device::{RxudDevice, PORT};
use super::table::IndexTable;
use crate::abi::CreateAhResp;
use crate::ib::{AddressVector, NetworkType, UData};
use kernel::{prelude::*, sync::Arc};

pub(crate) struct RxudAh {
    num: u32,
    table: Arc<IndexTable<AddressVector>>,
}

impl RxudAh {
    /// Unless `sleepable`, runs in atomic context: allocates atomically.
    pub(crate) fn new(
        dev: &RxudDevice,
        av: &AddressVector,
        sleepable: bool,
        udata: &UData,
    ) -> Result<Self> {
        // RoCE v2 only, as for QP paths.
        if av.network == NetworkType::RoceV1 || av.port != PORT {
            return Err(EINVAL);
        }
        let flags = if sleepable { GFP_KERNEL } else { GFP_ATOMIC };
        let value = Arc::new(*av, flags)?;
        let number = dev.ahs.reserve()?;
        udata.write(&CreateAhResp {
            comp_mask: 0,
            ah_num: number.id(),
            reserved: 0,
        })?;
        let num = number.fill(value);
        Ok(Self {
            num,
            table: dev.ahs.clone(),
        })
    }
}

impl RxudAh {
    /// The number UD work requests name the AH by.
    pub(crate) fn number(&self) -> u32 {
        self.num
    }
}

impl Drop for RxudAh {
    fn drop(&mut self) {
        // Never sleeps: a spinlock and, at worst, freeing the vector.
        drop(self.table.remove(self.num));
    }
}
