// SPDX-License-Identifier: GPL-2.0 OR Linux-OpenIB

//! Queue pairs: kernel objects whose send queue (and receive queue, unless
//! the QP uses an SRQ) are rings librxud maps and posts work requests into
//! (`post.rs`).

use crate::mmap::map_ring;
use crate::post::{
    recv_state_allows, send_state_allows, CmdDoorbell, QpType, RecvQueue, SendCaps, SendQueue,
};
use crate::sys::*;
use crate::{create_object_with_rings, destroy_object};
use core::ffi::c_int;
use core::mem::{offset_of, size_of};
use rxud_abi::{recv_wqe_slot_size, send_wqe_slot_size, CreateQpReq, CreateQpResp};

/// librxud's QP. All-zero is valid (what `create_object_with_rings` starts
/// from).
#[repr(C)]
pub(crate) struct Qp {
    vqp: verbs_qp,
    /// Set once the kernel QP exists and its rings are mapped.
    rings: Option<Box<QpRings>>,
}

/// What `post_send` and `post_recv` post into, with the capabilities the
/// kernel granted.
struct QpRings {
    sq: SendQueue,
    /// `None` when the QP receives through an SRQ.
    rq: Option<RecvQueue>,
}

const _: () = assert!(offset_of!(Qp, vqp) == 0 && offset_of!(verbs_qp, qp) == 0);

/// CREATE_QP with rxud's request and response payloads, contiguous after
/// the core parts as libibverbs requires.
#[repr(C)]
#[derive(Default)]
struct CreateQpCmd {
    core: ibv_create_qp,
    drv: CreateQpReq,
}

#[repr(C)]
#[derive(Default)]
struct CreateQpRespBuf {
    core: ib_uverbs_create_qp_resp,
    drv: CreateQpResp,
}

const _: () = assert!(offset_of!(CreateQpCmd, drv) == size_of::<ibv_create_qp>());
const _: () = assert!(offset_of!(CreateQpRespBuf, drv) == size_of::<ib_uverbs_create_qp_resp>());

/// The `Qp` of an `ibv_qp` libibverbs passes back.
///
/// # Safety
///
/// `ibqp` was returned by `create_qp`.
unsafe fn from_ibv(ibqp: *mut ibv_qp) -> *mut Qp {
    // `ibv_qp` is at offset 0 of `Qp` (asserted above).
    ibqp.cast()
}

/// Maps the rings the kernel describes, checked against the granted
/// capabilities `cap`, for QP `qp` of type `qp_type`.
///
/// # Safety
///
/// `ctx` is a live context of librxud's and `qp` the `ibv_qp` that
/// `ibv_cmd_create_qp` filled in.
unsafe fn map_rings(
    ctx: *mut ibv_context,
    qp: *const ibv_qp,
    resp: &CreateQpResp,
    cap: &ibv_qp_cap,
    qp_type: ibv_enum,
) -> Result<QpRings, c_int> {
    // The kernel makes no other types.
    let qp_type = QpType::from_ibv(qp_type).ok_or(EPROTO)?;
    // SAFETY: per the caller.
    unsafe {
        let send_size = send_wqe_slot_size(cap.max_send_sge, cap.max_inline_data);
        let sq = map_ring(
            ctx,
            "create_qp",
            "send",
            &resp.sq,
            cap.max_send_wr,
            send_size,
        )?;
        let rq = if resp.rq.is_present() {
            let recv_size = recv_wqe_slot_size(cap.max_recv_sge);
            let ring = map_ring(
                ctx,
                "create_qp",
                "receive",
                &resp.rq,
                cap.max_recv_wr,
                recv_size,
            )?;
            Some(RecvQueue::new(ring, cap.max_recv_sge))
        } else {
            None
        };
        let caps = SendCaps {
            qp_type,
            max_sge: cap.max_send_sge,
            max_inline: cap.max_inline_data,
        };
        let doorbell = CmdDoorbell {
            fd: (*ctx).cmd_fd,
            qp_handle: (*qp).handle,
        };
        Ok(QpRings {
            sq: SendQueue::new(sq, caps, doorbell),
            rq,
        })
    }
}

pub(crate) unsafe extern "C" fn create_qp(
    pd: *mut ibv_pd,
    attr: *mut ibv_qp_init_attr,
) -> *mut ibv_qp {
    // SAFETY: `Qp` is valid zeroed; `pd` and `attr` come from libibverbs;
    // command and response are laid out as libibverbs expects. The rings
    // are kept only once all are mapped, and `destroy` destroys the kernel
    // QP `create` made.
    let qp = unsafe {
        create_object_with_rings(
            |qp: *mut Qp| {
                let mut cmd = CreateQpCmd::default();
                let mut resp = CreateQpRespBuf::default();
                let ret = ibv_cmd_create_qp(
                    pd,
                    &raw mut (*qp).vqp.qp,
                    attr,
                    &raw mut cmd.core,
                    size_of::<CreateQpCmd>(),
                    &raw mut resp.core,
                    size_of::<CreateQpRespBuf>(),
                );
                if ret != 0 {
                    return Err(ret);
                }
                Ok(resp.drv)
            },
            |qp, resp: CreateQpResp| {
                // `ibv_cmd_create_qp` has put the capabilities the kernel
                // granted into `attr.cap`, on the ioctl path (where
                // `resp.core` stays empty) as on the write path: the caller
                // sees the real ones.
                let rings = map_rings(
                    (*pd).context,
                    &raw const (*qp).vqp.qp,
                    &resp,
                    &(*attr).cap,
                    (*attr).qp_type,
                )?;
                (*qp).rings = Some(Box::new(rings));
                Ok(())
            },
            |qp| ibv_cmd_destroy_qp(&raw mut (*qp).vqp.qp),
        )
    };
    if qp.is_null() {
        return core::ptr::null_mut();
    }
    // SAFETY: `qp` is live.
    unsafe { &raw mut (*qp).vqp.qp }
}

pub(crate) unsafe extern "C" fn query_qp(
    qp: *mut ibv_qp,
    attr: *mut ibv_qp_attr,
    attr_mask: c_int,
    init_attr: *mut ibv_qp_init_attr,
) -> c_int {
    let mut cmd = ibv_query_qp::default();
    // SAFETY: arguments from libibverbs; `cmd` is the core command with no
    // driver data.
    unsafe {
        ibv_cmd_query_qp(
            qp,
            attr,
            attr_mask,
            init_attr,
            &mut cmd,
            size_of::<ibv_query_qp>(),
        )
    }
}

pub(crate) unsafe extern "C" fn modify_qp(
    qp: *mut ibv_qp,
    attr: *mut ibv_qp_attr,
    attr_mask: c_int,
) -> c_int {
    let mut cmd = ibv_modify_qp::default();
    // SAFETY: arguments from libibverbs; `cmd` is the core command with no
    // driver data.
    unsafe { ibv_cmd_modify_qp(qp, attr, attr_mask, &mut cmd, size_of::<ibv_modify_qp>()) }
}

pub(crate) unsafe extern "C" fn destroy_qp(ibqp: *mut ibv_qp) -> c_int {
    // SAFETY: a live QP of ours. After the kernel destroyed it, dropping
    // its rings unmaps them.
    unsafe {
        destroy_object(from_ibv(ibqp), |qp| {
            let ret = ibv_cmd_destroy_qp(&raw mut (*qp).vqp.qp);
            if ret == 0 {
                drop((*qp).rings.take());
            }
            ret
        })
    }
}

/// The rings of a live QP of ours, or `None` if it has none (never once
/// `create_qp` returned it).
///
/// # Safety
///
/// `ibqp` was returned by `create_qp` and is not destroyed during `'a`.
unsafe fn rings<'a>(ibqp: *mut ibv_qp) -> Option<&'a QpRings> {
    // SAFETY: per the caller.
    unsafe { (*from_ibv(ibqp)).rings.as_deref() }
}

/// libibverbs' cached state of `ibqp`: RESET from `ibv_cmd_create_qp`,
/// then what `ibv_modify_qp` and `ibv_query_qp` store, possibly in another
/// thread (hence a volatile read of the whole, aligned `u32`).
///
/// # Safety
///
/// `ibqp` is a live QP.
unsafe fn cached_state(ibqp: *const ibv_qp) -> ibv_enum {
    // SAFETY: per the caller, a live `ibv_qp`; `state` is aligned.
    unsafe { core::ptr::read_volatile(&raw const (*ibqp).state) }
}

pub(crate) unsafe extern "C" fn post_send(
    ibqp: *mut ibv_qp,
    wr: *mut ibv_send_wr,
    bad_wr: *mut *mut ibv_send_wr,
) -> c_int {
    // SAFETY: libibverbs passes `bad_wr` from the application, which may
    // be NULL but otherwise points to a writable pointer.
    let Some(bad_wr) = (unsafe { bad_wr.as_mut() }) else {
        return EINVAL;
    };
    *bad_wr = core::ptr::null_mut();
    // SAFETY: a live QP of ours, from libibverbs.
    let (Some(rings), state) = (unsafe { (rings(ibqp), cached_state(ibqp)) }) else {
        return EINVAL;
    };
    if !wr.is_null() && !send_state_allows(state) {
        *bad_wr = wr;
        return EINVAL;
    }
    // SAFETY: the verbs contract of `ibv_post_send` is the one
    // `SendQueue::post` requires.
    unsafe { rings.sq.post(wr, bad_wr) }
}

pub(crate) unsafe extern "C" fn post_recv(
    ibqp: *mut ibv_qp,
    wr: *mut ibv_recv_wr,
    bad_wr: *mut *mut ibv_recv_wr,
) -> c_int {
    // SAFETY: as in `post_send`.
    let Some(bad_wr) = (unsafe { bad_wr.as_mut() }) else {
        return EINVAL;
    };
    *bad_wr = core::ptr::null_mut();
    // SAFETY: a live QP of ours, from libibverbs.
    let (rings, state) = unsafe { (rings(ibqp), cached_state(ibqp)) };
    // A QP on an SRQ has no receive queue of its own.
    let Some(rq) = rings.and_then(|rings| rings.rq.as_ref()) else {
        *bad_wr = wr;
        return EINVAL;
    };
    if !wr.is_null() && !recv_state_allows(state) {
        *bad_wr = wr;
        return EINVAL;
    }
    // SAFETY: the verbs contract of `ibv_post_recv` is the one
    // `RecvQueue::post` requires.
    unsafe { rq.post(wr, bad_wr) }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mmap::testing::FakeDevice;
    use crate::post::tests::{decode_recv, decode_send, decode_sge, recv_wr, send_wr, sge, List};
    use rxud_abi::{opcode, ring_flags, RingInfo, RING_SLOTS_OFFSET};

    const SQ_AT: u64 = 4096;
    const RQ_AT: u64 = 2 * 4096;
    const SEND_SLOT: u32 = 128;
    const RECV_SLOT: u32 = 48;

    /// A QP of `qp_type` on `dev` as `create_qp` leaves it: handle 77,
    /// RESET, rings mapped from the device's fd (its first page is where
    /// doorbells go).
    fn qp(dev: &mut FakeDevice, qp_type: ibv_enum, on_srq: bool) -> Result<Box<Qp>, c_int> {
        let cap = ibv_qp_cap {
            max_send_wr: 4,
            max_recv_wr: if on_srq { 0 } else { 4 },
            max_send_sge: 2,
            max_recv_sge: if on_srq { 0 } else { 2 },
            max_inline_data: 32,
        };
        let ring = |mmap_offset, slot_size| RingInfo {
            mmap_offset,
            mmap_size: 4096,
            slot_count: 4,
            slot_size,
        };
        let resp = CreateQpResp {
            comp_mask: 0,
            sq: ring(SQ_AT, SEND_SLOT),
            rq: if on_srq {
                RingInfo::default()
            } else {
                ring(RQ_AT, RECV_SLOT)
            },
        };
        let mut qp = Box::new(Qp {
            // SAFETY: all-zero is a valid `verbs_qp`.
            vqp: unsafe { core::mem::zeroed() },
            rings: None,
        });
        qp.vqp.qp.handle = 77;
        qp.vqp.qp.qp_type = qp_type;
        qp.vqp.qp.state = IBV_QPS_RESET;
        // SAFETY: the fake device's context; the QP's `ibv_qp` filled in as
        // `ibv_cmd_create_qp` would.
        let rings = unsafe { map_rings(dev.ctx(), &raw const qp.vqp.qp, &resp, &cap, qp_type)? };
        qp.rings = Some(Box::new(rings));
        Ok(qp)
    }

    fn producer(dev: &FakeDevice, ring_at: u64) -> u32 {
        u32::from_le_bytes(dev.read(ring_at, 4).try_into().unwrap())
    }

    fn slot(dev: &FakeDevice, ring_at: u64, slot_size: u32, index: u64) -> Vec<u8> {
        let at = ring_at + RING_SLOTS_OFFSET as u64 + index * u64::from(slot_size);
        dev.read(at, slot_size as usize)
    }

    fn post_send_list(qp: &mut Qp, list: &List<ibv_send_wr>) -> (c_int, Option<usize>) {
        let mut bad = core::ptr::null_mut();
        // SAFETY: a QP as `create_qp` makes it; a well-formed list.
        let ret = unsafe { post_send(&raw mut qp.vqp.qp, list.head(), &mut bad) };
        (ret, list.index_of(bad))
    }

    fn post_recv_list(qp: &mut Qp, list: &List<ibv_recv_wr>) -> (c_int, Option<usize>) {
        let mut bad = core::ptr::null_mut();
        // SAFETY: as above.
        let ret = unsafe { post_recv(&raw mut qp.vqp.qp, list.head(), &mut bad) };
        (ret, list.index_of(bad))
    }

    #[test]
    fn post_send_queues_in_the_mapped_ring_and_rings_the_doorbell() {
        let mut dev = FakeDevice::new("qp-send", 3);
        let mut qp = qp(&mut dev, IBV_QPT_RC, false).unwrap();
        let one = [sge(0x1000, 10, 5)];
        let list = List::new(vec![
            send_wr(1, opcode::SEND, &one),
            send_wr(2, opcode::SEND, &[]),
        ]);
        // Not before RTS, and then not even the first is queued.
        for state in [IBV_QPS_RESET, IBV_QPS_INIT, IBV_QPS_RTR] {
            qp.vqp.qp.state = state;
            assert_eq!(post_send_list(&mut qp, &list), (EINVAL, Some(0)));
        }
        assert_eq!(producer(&dev, SQ_AT), 0);
        assert_eq!(dev.read(0, 32), [0; 32], "no doorbell");
        qp.vqp.qp.state = 3; // RTS
        assert_eq!(post_send_list(&mut qp, &list), (0, None));
        assert_eq!(producer(&dev, SQ_AT), 2);
        let first = slot(&dev, SQ_AT, SEND_SLOT, 0);
        assert_eq!(decode_send(&first).wr_id, 1);
        assert_eq!(decode_sge(&first, 64).lkey, 5);
        assert_eq!(decode_send(&slot(&dev, SQ_AT, SEND_SLOT, 1)).wr_id, 2);
        // The doorbell: POST_SEND for handle 77, without requests.
        let cmd = dev.read(0, 32);
        assert_eq!(cmd[..8], [28, 0, 0, 0, 8, 0, 1, 0]);
        assert_eq!(
            cmd[16..],
            [77, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 128, 0, 0, 0]
        );
        // The kernel's sender is draining: no doorbell.
        dev.write(SQ_AT + 68, &ring_flags::SENDER_ACTIVE.to_le_bytes());
        let list = List::new(vec![send_wr(3, opcode::SEND, &[])]);
        assert_eq!(post_send_list(&mut qp, &list), (0, None));
        assert_eq!(producer(&dev, SQ_AT), 3);
        assert_eq!(dev.read(32, 32), [0; 32]);
        // SQE and ERR still post (the kernel flushes).
        dev.write(SQ_AT + 68, &0u32.to_le_bytes());
        qp.vqp.qp.state = 6; // ERR
        assert_eq!(post_send_list(&mut qp, &list), (0, None));
        assert_eq!(dev.read(32, 8), [28, 0, 0, 0, 8, 0, 1, 0]);
        let counters = qp.rings.as_ref().unwrap().sq.counters();
        assert_eq!((counters.wrs_posted, counters.doorbells), (4, 2));
    }

    #[test]
    fn post_recv_stays_in_user_space() {
        let mut dev = FakeDevice::new("qp-recv", 3);
        let mut qp = qp(&mut dev, IBV_QPT_UD, false).unwrap();
        let two = [sge(0x1000, 10, 5), sge(0x2000, 20, 6)];
        let list = List::new(vec![recv_wr(9, &two)]);
        assert_eq!(post_recv_list(&mut qp, &list), (EINVAL, Some(0)), "RESET");
        qp.vqp.qp.state = IBV_QPS_INIT;
        assert_eq!(post_recv_list(&mut qp, &list), (0, None));
        assert_eq!(producer(&dev, RQ_AT), 1);
        let first = slot(&dev, RQ_AT, RECV_SLOT, 0);
        assert_eq!(
            (decode_recv(&first).wr_id, decode_recv(&first).num_sge),
            (9, 2)
        );
        assert_eq!(decode_sge(&first, 32).addr, 0x2000);
        assert_eq!(dev.read(0, 4096), [0; 4096], "no command");
        // More SGEs than granted.
        let three = [sge(0, 0, 0); 3];
        let list = List::new(vec![recv_wr(10, &three)]);
        assert_eq!(post_recv_list(&mut qp, &list), (EINVAL, Some(0)));
    }

    #[test]
    fn a_qp_on_an_srq_has_no_receive_queue() {
        let mut dev = FakeDevice::new("qp-srq", 3);
        let mut qp = qp(&mut dev, IBV_QPT_RC, true).unwrap();
        qp.vqp.qp.state = IBV_QPS_INIT;
        let list = List::new(vec![recv_wr(1, &[])]);
        assert_eq!(post_recv_list(&mut qp, &list), (EINVAL, Some(0)));
    }

    #[test]
    fn posting_needs_somewhere_to_report_the_bad_request() {
        let mut dev = FakeDevice::new("qp-null", 3);
        let mut qp = qp(&mut dev, IBV_QPT_RC, false).unwrap();
        qp.vqp.qp.state = 3;
        let list = List::new(vec![send_wr(1, opcode::SEND, &[])]);
        // SAFETY: a QP as `create_qp` makes it; a well-formed list.
        let ret = unsafe { post_send(&raw mut qp.vqp.qp, list.head(), core::ptr::null_mut()) };
        assert_eq!(ret, EINVAL);
        let list = List::new(vec![recv_wr(1, &[])]);
        // SAFETY: as above.
        let ret = unsafe { post_recv(&raw mut qp.vqp.qp, list.head(), core::ptr::null_mut()) };
        assert_eq!(ret, EINVAL);
        assert_eq!(producer(&dev, SQ_AT), 0);
        assert_eq!(producer(&dev, RQ_AT), 0);
    }

    #[test]
    fn only_known_qp_types_get_rings() {
        let mut dev = FakeDevice::new("qp-type", 3);
        for qp_type in [IBV_QPT_RC, IBV_QPT_UC, IBV_QPT_UD] {
            assert!(qp(&mut dev, qp_type, false).is_ok());
        }
        // RAW_PACKET, XRC: rxud makes none.
        for qp_type in [8, 9, 10] {
            assert_eq!(qp(&mut dev, qp_type, false).err(), Some(EPROTO));
        }
    }
}
