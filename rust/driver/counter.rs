// SPDX-License-Identifier: GPL-2.0

//! Per-device object limits: what `query_device` reports is what creation
//! enforces.

use core::sync::atomic::{AtomicU32, Ordering};
use kernel::{prelude::*, sync::Arc};

/// Live objects of one kind on one device, and how many may live.
pub(crate) struct ObjectCounter {
    live: AtomicU32,
    max: u32,
}

/// One counted object; uncounts it when dropped.
pub(crate) struct Counted(Arc<ObjectCounter>);

impl ObjectCounter {
    pub(crate) fn new(max: u32) -> Result<Arc<Self>> {
        Ok(Arc::new(
            Self {
                live: AtomicU32::new(0),
                max,
            },
            GFP_KERNEL,
        )?)
    }

    pub(crate) fn max(&self) -> u32 {
        self.max
    }

    /// Counts one more object, or fails with `ENOMEM` at the limit.
    pub(crate) fn take(self: &Arc<Self>) -> Result<Counted> {
        self.live
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |n| {
                (n < self.max).then_some(n + 1)
            })
            .map_err(|_| ENOMEM)?;
        Ok(Counted(self.clone()))
    }
}

impl Drop for Counted {
    fn drop(&mut self) {
        self.0.live.fetch_sub(1, Ordering::Relaxed);
    }
}
