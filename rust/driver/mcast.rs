// SPDX-License-Identifier: GPL-2.0

//! A device's multicast groups (`ibv_attach_mcast`, `ib_attach_mcast`):
//! the UD QPs attached to each, which the receive path copies a group's
//! datagrams to, and the Ethernet addresses the port's netdev takes for
//! them. As with rxe, the netdev's filter only: the IP layer delivers a
//! group's datagrams once the host has joined it (IGMP or MLD), which is
//! the application's to do; rdma_cm's `rdma_join_multicast` does it.

use crate::kext::sync::{new_spinlock_irq, SpinLockIrq};
use crate::net::NetDevice;
use crate::proto::mcast;
use kernel::{new_mutex, prelude::*, sync::Mutex};

/// Groups of a device at most (`max_mcast_grp`).
pub(crate) const MAX_GROUPS: usize = 256;
/// QPs attached to one group at most (`max_mcast_qp_attach`).
pub(crate) const MAX_GROUP_QPS: usize = 16;
/// Attachments of a device in all (`max_total_mcast_qp_attach`).
pub(crate) const MAX_ATTACHMENTS: usize = 1024;

struct Group {
    gid: [u8; 16],
    qpns: [u32; MAX_GROUP_QPS],
    n: usize,
}

/// A group with no QP (`n` 0) is a free slot for the next new group
/// (6.12's `KVec` cannot remove an element).
struct Groups {
    list: KVec<Group>,
    groups: usize,
    attachments: usize,
}

/// The groups of one device.
#[pin_data]
pub(crate) struct McastGroups {
    /// Serialises attach and detach, so that a group's Ethernet address is
    /// added to the netdev by its first attachment and removed by its last
    /// in that order.
    #[pin]
    control: Mutex<()>,
    /// The membership, read by the receive path (softirq).
    #[pin]
    groups: SpinLockIrq<Groups>,
}

impl McastGroups {
    pub(crate) fn new() -> impl PinInit<Self> {
        pin_init!(Self {
            control <- new_mutex!((), "rxud:mcast_control"),
            groups <- new_spinlock_irq!(
                Groups { list: KVec::new(), groups: 0, attachments: 0 },
                "rxud:mcast_groups"
            ),
        })
    }

    /// Attaches QP `qpn` to group `gid`; the netdev `ndev` (the port's, if
    /// it still has one) takes the group's Ethernet address with its
    /// first attachment. Attaching twice is one attachment. `EINVAL`: no
    /// multicast GID; `ENOMEM`: beyond the device's limits.
    ///
    /// Context: process, may sleep.
    pub(crate) fn attach(&self, gid: &[u8; 16], qpn: u32, ndev: Option<&NetDevice>) -> Result {
        let mac = mcast::ethernet_address(gid).ok_or(EINVAL)?;
        let _control = self.control.lock();
        let first = {
            let mut g = self.groups.lock();
            let Groups {
                list,
                groups,
                attachments,
            } = &mut *g;
            match list.iter_mut().find(|x| x.n > 0 && x.gid == *gid) {
                Some(x) if x.qpns[..x.n].contains(&qpn) => return Ok(()),
                Some(x) => {
                    if x.n == MAX_GROUP_QPS || *attachments == MAX_ATTACHMENTS {
                        return Err(ENOMEM);
                    }
                    x.qpns[x.n] = qpn;
                    x.n += 1;
                    *attachments += 1;
                    false
                }
                None => {
                    if *groups == MAX_GROUPS || *attachments == MAX_ATTACHMENTS {
                        return Err(ENOMEM);
                    }
                    let mut qpns = [0; MAX_GROUP_QPS];
                    qpns[0] = qpn;
                    let group = Group {
                        gid: *gid,
                        qpns,
                        n: 1,
                    };
                    match list.iter_mut().find(|x| x.n == 0) {
                        Some(free) => *free = group,
                        None => list.push(group, GFP_ATOMIC)?,
                    }
                    *groups += 1;
                    *attachments += 1;
                    true
                }
            }
        };
        if first {
            if let Some(ndev) = ndev {
                if let Err(e) = ndev.mc_add(&mac) {
                    self.remove(gid, qpn);
                    return Err(e);
                }
            }
        }
        Ok(())
    }

    /// Detaches QP `qpn` from group `gid`; the netdev drops the group's
    /// Ethernet address with its last attachment. `EINVAL` if the QP is not
    /// attached to it.
    ///
    /// Context: process, may sleep.
    pub(crate) fn detach(&self, gid: &[u8; 16], qpn: u32, ndev: Option<&NetDevice>) -> Result {
        let _control = self.control.lock();
        let emptied = self.remove(gid, qpn).ok_or(EINVAL)?;
        if emptied {
            if let (Some(ndev), Some(mac)) = (ndev, mcast::ethernet_address(gid)) {
                // The address goes with the group even if the netdev
                // refuses (it then no longer had it).
                let _ = ndev.mc_del(&mac);
            }
        }
        Ok(())
    }

    /// Takes `qpn` out of group `gid`: whether that emptied the group (which
    /// goes), `None` if it was not attached.
    fn remove(&self, gid: &[u8; 16], qpn: u32) -> Option<bool> {
        let mut g = self.groups.lock();
        let Groups {
            list,
            groups,
            attachments,
        } = &mut *g;
        let x = list.iter_mut().find(|x| x.n > 0 && x.gid == *gid)?;
        let i = x.qpns.get(..x.n)?.iter().position(|&q| q == qpn)?;
        x.qpns.copy_within(i + 1..x.n, i);
        x.n -= 1;
        *attachments -= 1;
        if x.n > 0 {
            return Some(false);
        }
        *groups -= 1;
        Some(true)
    }

    /// Copies the QPs attached to group `gid` into `out`; how many.
    ///
    /// Context: any.
    pub(crate) fn members(&self, gid: &[u8; 16], out: &mut [u32; MAX_GROUP_QPS]) -> usize {
        let g = self.groups.lock();
        match g.list.iter().find(|x| x.n > 0 && x.gid == *gid) {
            Some(x) => {
                out[..x.n].copy_from_slice(&x.qpns[..x.n]);
                x.n
            }
            None => 0,
        }
    }
}
