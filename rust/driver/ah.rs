// SPDX-License-Identifier: GPL-2.0

//! Address handles: a numbered destination. UD (and XUD) send WRs name
//! their destination by the AH's number, which the data path looks up.

use super::device::{RxudDevice, PORT};
use super::table::IndexTable;
use crate::abi::CreateAhResp;
use crate::ib::{AddressVector, NetworkType, UData};
use crate::net::RouteCache;
use kernel::{prelude::*, sync::Arc};

/// What an AH number stands for: the address vector, and the route to it
/// cached for every QP that sends along it, so that a datagram does not
/// pay a routing lookup (rxe looks one up per packet). The cache checks
/// the route on each use (`dst_check`), so a changed route is looked up
/// again. Unlike an RC connection's cache, it is not reset when the
/// netdev goes away: an AH may outlive that (its owner destroys it), and
/// it need not, because the kernel moves routes still held past their
/// netdev's unregistration to the blackhole device (`dst_dev_put`), so a
/// cached route never holds the netdev (09-teardown unregisters one under
/// UD traffic).
pub(crate) struct Destination {
    pub(crate) av: AddressVector,
    /// `None` if the cache could not be allocated (an AH made in atomic
    /// context, as the MAD layer makes them, under memory pressure): its
    /// packets look their route up each time, which works all the same.
    pub(crate) route: Option<RouteCache>,
}

pub(crate) struct RxudAh {
    num: u32,
    table: Arc<IndexTable<Destination>>,
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
        let value = Arc::new(
            Destination {
                av: *av,
                route: RouteCache::new(sleepable).ok(),
            },
            flags,
        )?;
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
        // Never sleeps: a spinlock and, at worst, freeing the destination
        // (its route cache's per-CPU memory is freed without sleeping).
        drop(self.table.remove(self.num));
    }
}
