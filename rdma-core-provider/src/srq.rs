// SPDX-License-Identifier: GPL-2.0 OR Linux-OpenIB

//! Shared receive queues: a kernel object and its ring, which librxud maps
//! and `post_srq_recv` posts into (`post.rs`).

use crate::mmap::map_ring;
use crate::post::RecvQueue;
use crate::sys::*;
use crate::{create_object_with_rings, destroy_object};
use core::ffi::c_int;
use core::mem::{offset_of, size_of};
use rxud_abi::{recv_wqe_slot_size, CreateSrqReq, CreateSrqResp, ModifySrqReq, ModifySrqResp};

/// librxud's SRQ. All-zero is valid (what `create_object_with_rings`
/// starts from).
#[repr(C)]
pub(crate) struct Srq {
    vsrq: verbs_srq,
    /// Set once the kernel SRQ exists and its ring is mapped.
    queue: Option<Box<RecvQueue>>,
}

const _: () = assert!(offset_of!(Srq, vsrq) == 0 && offset_of!(verbs_srq, srq) == 0);

/// CREATE_SRQ with rxud's request and response payloads, contiguous after
/// the core parts as libibverbs requires.
#[repr(C)]
#[derive(Default)]
struct CreateSrqCmd {
    core: ibv_create_srq,
    drv: CreateSrqReq,
}

#[repr(C)]
#[derive(Default)]
struct CreateSrqRespBuf {
    core: ib_uverbs_create_srq_resp,
    drv: CreateSrqResp,
}

/// `ibv_modify_srq`'s command with librxud's part (for a resize).
#[repr(C)]
#[derive(Default)]
struct ModifySrqCmd {
    core: ibv_modify_srq,
    drv: ModifySrqReq,
}

const _: () = assert!(offset_of!(ModifySrqCmd, drv) == size_of::<ibv_modify_srq>());
const _: () = assert!(offset_of!(CreateSrqCmd, drv) == size_of::<ibv_create_srq>());
const _: () = assert!(offset_of!(CreateSrqRespBuf, drv) == size_of::<ib_uverbs_create_srq_resp>());

pub(crate) unsafe extern "C" fn create_srq(
    pd: *mut ibv_pd,
    attr: *mut ibv_srq_init_attr,
) -> *mut ibv_srq {
    // SAFETY: `Srq` is valid zeroed; `pd` and `attr` come from libibverbs;
    // command and response are laid out as libibverbs expects. The ring is
    // kept only once it is mapped, and `destroy` destroys the kernel SRQ
    // `create` made.
    let srq = unsafe {
        create_object_with_rings(
            |srq: *mut Srq| {
                let mut cmd = CreateSrqCmd::default();
                let mut resp = CreateSrqRespBuf::default();
                let ret = ibv_cmd_create_srq(
                    pd,
                    &raw mut (*srq).vsrq.srq,
                    attr,
                    &raw mut cmd.core,
                    size_of::<CreateSrqCmd>(),
                    &raw mut resp.core,
                    size_of::<CreateSrqRespBuf>(),
                );
                if ret != 0 {
                    return Err(ret);
                }
                Ok(resp.drv)
            },
            |srq, resp: CreateSrqResp| {
                // `ibv_cmd_create_srq` has put the granted `max_wr` and
                // `max_sge` into `attr.attr`.
                let granted = (*attr).attr;
                let ring = map_ring(
                    (*pd).context,
                    "create_srq",
                    "SRQ",
                    &resp.ring,
                    granted.max_wr,
                    recv_wqe_slot_size(granted.max_sge),
                )?;
                (*srq).queue = Some(Box::new(RecvQueue::new(ring, granted.max_sge)));
                Ok(())
            },
            |srq| ibv_cmd_destroy_srq(&raw mut (*srq).vsrq.srq),
        )
    };
    if srq.is_null() {
        return core::ptr::null_mut();
    }
    // SAFETY: `srq` is live.
    unsafe { &raw mut (*srq).vsrq.srq }
}

/// `ibv_modify_srq`. A resize (`IBV_SRQ_MAX_WR`) holds posting off while
/// the kernel moves the waiting WQEs into a new ring, whose description
/// it writes where the command says (MODIFY_SRQ has no response buffer),
/// then maps it in place of the old one. The limit alone needs no ring.
pub(crate) unsafe extern "C" fn modify_srq(
    srq: *mut ibv_srq,
    attr: *mut ibv_srq_attr,
    attr_mask: c_int,
) -> c_int {
    if attr_mask & IBV_SRQ_MAX_WR == 0 {
        let mut cmd = ibv_modify_srq::default();
        // SAFETY: arguments from libibverbs; `cmd` is the core command
        // with no driver data.
        return unsafe {
            ibv_cmd_modify_srq(srq, attr, attr_mask, &mut cmd, size_of::<ibv_modify_srq>())
        };
    }
    // SAFETY: libibverbs passes a live SRQ of ours and the caller's
    // attributes.
    let (queue, ctx, max_wr) = unsafe {
        (
            (*srq.cast::<Srq>()).queue.as_deref(),
            (*srq).context,
            (*attr).max_wr,
        )
    };
    let Some(queue) = queue else {
        return EINVAL;
    };
    let max_sge = queue.max_sge();
    queue.replace_ring(|| {
        let mut resp = ModifySrqResp::default();
        let mut cmd = ModifySrqCmd {
            drv: ModifySrqReq {
                comp_mask: 0,
                resp_addr: (&raw mut resp).expose_provenance() as u64,
            },
            ..Default::default()
        };
        // SAFETY: as above; the driver part follows the core command,
        // and `resp` (where the kernel writes) outlives the call.
        let ret = unsafe {
            ibv_cmd_modify_srq(
                srq,
                attr,
                attr_mask,
                &raw mut cmd.core,
                size_of::<ModifySrqCmd>(),
            )
        };
        if ret != 0 {
            return Err(ret);
        }
        // SAFETY: `ctx` is the SRQ's context, live.
        Ok(unsafe {
            map_ring(
                ctx,
                "modify_srq",
                "SRQ",
                &resp.ring,
                max_wr,
                recv_wqe_slot_size(max_sge),
            )
        })
    })
}

pub(crate) unsafe extern "C" fn query_srq(srq: *mut ibv_srq, attr: *mut ibv_srq_attr) -> c_int {
    let mut cmd = ibv_query_srq::default();
    // SAFETY: arguments from libibverbs; `cmd` is the core command with no
    // driver data.
    unsafe { ibv_cmd_query_srq(srq, attr, &mut cmd, size_of::<ibv_query_srq>()) }
}

pub(crate) unsafe extern "C" fn destroy_srq(ibsrq: *mut ibv_srq) -> c_int {
    // SAFETY: a live SRQ of ours (`ibv_srq` is at offset 0 of `Srq`). After
    // the kernel destroyed it, dropping its ring unmaps it.
    unsafe {
        destroy_object(ibsrq.cast::<Srq>(), |srq| {
            let ret = ibv_cmd_destroy_srq(&raw mut (*srq).vsrq.srq);
            if ret == 0 {
                drop((*srq).queue.take());
            }
            ret
        })
    }
}

pub(crate) unsafe extern "C" fn post_srq_recv(
    ibsrq: *mut ibv_srq,
    wr: *mut ibv_recv_wr,
    bad_wr: *mut *mut ibv_recv_wr,
) -> c_int {
    // SAFETY: libibverbs passes `bad_wr` from the application, which may
    // be NULL but otherwise points to a writable pointer.
    let Some(bad_wr) = (unsafe { bad_wr.as_mut() }) else {
        return EINVAL;
    };
    *bad_wr = core::ptr::null_mut();
    // SAFETY: a live SRQ of ours (`ibv_srq` is at offset 0 of `Srq`), from
    // libibverbs.
    let Some(queue) = (unsafe { (*ibsrq.cast::<Srq>()).queue.as_deref() }) else {
        *bad_wr = wr;
        return EINVAL;
    };
    // SAFETY: the verbs contract of `ibv_post_srq_recv` is the one
    // `RecvQueue::post` requires.
    unsafe { queue.post(wr, bad_wr) }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mmap::testing::FakeDevice;
    use crate::post::tests::{decode_recv, decode_sge, recv_wr, sge, List};
    use rxud_abi::{RingInfo, RING_SLOTS_OFFSET};

    #[test]
    fn post_srq_recv_queues_in_the_mapped_ring() {
        let mut dev = FakeDevice::new("srq", 2);
        let info = RingInfo {
            mmap_offset: 4096,
            mmap_size: 4096,
            slot_count: 2,
            slot_size: 32,
        };
        // SAFETY: the fake device's context.
        let ring = unsafe { map_ring(dev.ctx(), "create_srq", "SRQ", &info, 2, 32) }.unwrap();
        let mut srq = Box::new(Srq {
            // SAFETY: all-zero is a valid `verbs_srq`.
            vsrq: unsafe { core::mem::zeroed() },
            queue: Some(Box::new(RecvQueue::new(ring, 1))),
        });
        let one = [sge(0x1000, 10, 5)];
        let two = [sge(0x1000, 10, 5); 2];
        let post = |srq: &mut Srq, list: &List<ibv_recv_wr>| {
            let mut bad = core::ptr::null_mut();
            // SAFETY: an SRQ as `create_srq` makes it; a well-formed list.
            let ret = unsafe { post_srq_recv(&raw mut srq.vsrq.srq, list.head(), &mut bad) };
            (ret, list.index_of(bad))
        };
        let list = List::new(vec![recv_wr(1, &one), recv_wr(2, &two)]);
        assert_eq!(post(&mut srq, &list), (EINVAL, Some(1)), "max_sge 1");
        let list = List::new(vec![recv_wr(2, &[]), recv_wr(3, &one)]);
        assert_eq!(post(&mut srq, &list), (ENOMEM, Some(1)), "2 slots");
        let producer = u32::from_le_bytes(dev.read(4096, 4).try_into().unwrap());
        assert_eq!(producer, 2);
        let slots = dev.read(4096 + RING_SLOTS_OFFSET as u64, 64);
        assert_eq!(
            (decode_recv(&slots).wr_id, decode_recv(&slots).num_sge),
            (1, 1)
        );
        assert_eq!(decode_sge(&slots, 16).addr, 0x1000);
        assert_eq!(decode_recv(&slots[32..]).wr_id, 2);
        assert_eq!(dev.read(0, 4096), [0; 4096], "no command");
    }
}
