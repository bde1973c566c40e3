// SPDX-License-Identifier: GPL-2.0 OR Linux-OpenIB

//! librxud's direct verbs (`include/infiniband/rxudv.h`): creating an XUD
//! QP (Documentation/xud.rst, "Creating one"), in the shape of rdma-core's
//! `efadv_create_qp_ex`.
//!
//! `rxudv_create_qp` is exported from `librxud-rdmav34.so` for
//! applications that link to it, so it may be handed any context: one of
//! another provider's gets `EOPNOTSUPP`. The QP it makes is an
//! `IBV_QPT_DRIVER` QP whose create request carries `create_qp::XUD` and
//! the XUD parameters (`rxud_abi::CreateQpReq`), with rings as any other
//! rxud QP; `ibv_modify_qp`, `ibv_query_qp`, `ibv_destroy_qp`,
//! `ibv_post_recv`, `ibv_post_send` (SEND and SEND with immediate) and,
//! with `IBV_QP_INIT_ATTR_SEND_OPS_FLAGS`, the `ibv_wr_*` interface (also
//! RDMA WRITE, with and without immediate) work on it as usual.

use crate::qp::create_ex;
use crate::set_errno;
use crate::sys::*;
use core::ffi::c_int;
use core::mem::{offset_of, size_of};
use rxud_abi::{create_qp, CreateQpReq, XudParams};

/// `struct rxudv_qp_init_attr` of rxudv.h.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RxudvQpInitAttr {
    /// Extensions the caller uses; none are defined yet (any bit:
    /// `EINVAL`).
    pub comp_mask: u64,
    /// Per-peer state entries, 0 for the default (`rxud_abi::xud`).
    pub max_peers: u32,
    /// Packets per ACK request, 0 for the default (`rxud_abi::xud`).
    pub ack_every: u32,
}

// rxudv.h's layout (checked against the header by the tests below, and
// by tests/verbs/xud-test.c's static assertions).
const _: () = assert!(size_of::<RxudvQpInitAttr>() == 16);
const _: () = assert!(offset_of!(RxudvQpInitAttr, max_peers) == 8);
const _: () = assert!(offset_of!(RxudvQpInitAttr, ack_every) == 12);

/// The `ibv_wr_*` operations an XUD QP can be made with.
pub(crate) const XUD_SEND_OPS: u64 = IBV_QP_EX_WITH_SEND
    | IBV_QP_EX_WITH_SEND_WITH_IMM
    | IBV_QP_EX_WITH_RDMA_WRITE
    | IBV_QP_EX_WITH_RDMA_WRITE_WITH_IMM;

/// Reads the caller's `struct rxudv_qp_init_attr` of `inlen` bytes: at
/// least the fields this librxud knows (`EINVAL` otherwise); a longer one
/// (a newer header) only if what this librxud does not know is zero.
fn read_attr(bytes: &[u8]) -> Result<RxudvQpInitAttr, c_int> {
    let known = size_of::<RxudvQpInitAttr>();
    if bytes.len() < known || bytes[known..].iter().any(|&b| b != 0) {
        return Err(EINVAL);
    }
    let word = |at: usize| {
        let mut w = [0u8; 4];
        w.copy_from_slice(&bytes[at..at + 4]);
        u32::from_ne_bytes(w)
    };
    let mut mask = [0u8; 8];
    mask.copy_from_slice(&bytes[..8]);
    Ok(RxudvQpInitAttr {
        comp_mask: u64::from_ne_bytes(mask),
        max_peers: word(offset_of!(RxudvQpInitAttr, max_peers)),
        ack_every: word(offset_of!(RxudvQpInitAttr, ack_every)),
    })
}

/// Checks an XUD QP's attributes: the direct verb's (no `comp_mask` bit,
/// parameters in range) and the `ibv_qp_init_attr_ex` fields XUD takes:
/// type `IBV_QPT_DRIVER`, a PD, no creation flags, `send_ops_flags` within
/// [`XUD_SEND_OPS`], nothing else in `comp_mask`. Every refusal is
/// `EINVAL`. Returns the driver request to create with.
fn check(
    x: &RxudvQpInitAttr,
    qp_type: ibv_enum,
    comp_mask: u32,
    create_flags: u32,
    send_ops_flags: u64,
) -> Result<CreateQpReq, c_int> {
    if x.comp_mask != 0 || XudParams::new(x.max_peers, x.ack_every).is_err() {
        return Err(EINVAL);
    }
    let known =
        IBV_QP_INIT_ATTR_PD | IBV_QP_INIT_ATTR_CREATE_FLAGS | IBV_QP_INIT_ATTR_SEND_OPS_FLAGS;
    let with = |bit: u32| comp_mask & bit != 0;
    if qp_type != IBV_QPT_DRIVER
        || comp_mask & !known != 0
        || !with(IBV_QP_INIT_ATTR_PD)
        || (with(IBV_QP_INIT_ATTR_CREATE_FLAGS) && create_flags != 0)
        || (with(IBV_QP_INIT_ATTR_SEND_OPS_FLAGS) && send_ops_flags & !XUD_SEND_OPS != 0)
    {
        return Err(EINVAL);
    }
    // The kernel checks the parameters again and fills in the defaults.
    Ok(CreateQpReq {
        comp_mask: create_qp::XUD,
        max_peers: x.max_peers,
        ack_every: x.ack_every,
    })
}

/// `rxudv_create_qp`: see rxudv.h. NULL with `errno` set on failure.
///
/// # Safety
///
/// Each pointer is NULL or valid: `ibvctx` an open device context,
/// `attr_ex` the attributes to create with (its PD and CQs live objects of
/// `ibvctx`), `xattr` `inlen` readable bytes.
#[no_mangle]
pub unsafe extern "C" fn rxudv_create_qp(
    ibvctx: *mut ibv_context,
    attr_ex: *mut ibv_qp_init_attr_ex,
    xattr: *const RxudvQpInitAttr,
    inlen: u32,
) -> *mut ibv_qp {
    // SAFETY: per the function's contract.
    match unsafe { create(ibvctx, attr_ex, xattr, inlen) } {
        Ok(qp) => qp,
        Err(err) => {
            set_errno(err);
            core::ptr::null_mut()
        }
    }
}

/// The body of [`rxudv_create_qp`], with its contract: `Err` for what
/// librxud refuses, NULL (`errno` set) for what the kernel refuses.
///
/// # Safety
///
/// As for [`rxudv_create_qp`].
unsafe fn create(
    ibvctx: *mut ibv_context,
    attr_ex: *mut ibv_qp_init_attr_ex,
    xattr: *const RxudvQpInitAttr,
    inlen: u32,
) -> Result<*mut ibv_qp, c_int> {
    if ibvctx.is_null() {
        return Err(EINVAL);
    }
    // SAFETY: an open context, per the contract.
    if !unsafe { crate::is_rxud_context(ibvctx) } {
        return Err(EOPNOTSUPP);
    }
    if attr_ex.is_null() || xattr.is_null() {
        return Err(EINVAL);
    }
    let len = usize::try_from(inlen).map_err(|_| EINVAL)?;
    // SAFETY: `inlen` readable bytes at `xattr`, per the contract.
    let x = read_attr(unsafe { crate::post::app_slice(xattr.cast::<u8>(), len) })?;
    // SAFETY: valid attributes, per the contract; ours for the call.
    let attr = unsafe { &mut *attr_ex };
    let req = check(
        &x,
        attr.qp_type,
        attr.comp_mask,
        attr.create_flags,
        attr.send_ops_flags,
    )?;
    // The PD must be of this context (the QP is made on its device).
    // SAFETY: a PD given with IBV_QP_INIT_ATTR_PD is live, per the
    // contract.
    if attr.pd.is_null() || unsafe { (*attr.pd).context } != ibvctx {
        return Err(EINVAL);
    }
    // SAFETY: a live PD of librxud's (its context is ours) and checked
    // attributes. NULL if the kernel refused: `create_ex` set errno.
    Ok(unsafe { create_ex(attr, req) })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bytes(x: &RxudvQpInitAttr, extra: &[u8]) -> Vec<u8> {
        let mut b = Vec::new();
        b.extend_from_slice(&x.comp_mask.to_ne_bytes());
        b.extend_from_slice(&x.max_peers.to_ne_bytes());
        b.extend_from_slice(&x.ack_every.to_ne_bytes());
        b.extend_from_slice(extra);
        b
    }

    const PD: u32 = IBV_QP_INIT_ATTR_PD;

    fn ok_attr() -> RxudvQpInitAttr {
        RxudvQpInitAttr {
            comp_mask: 0,
            max_peers: 100,
            ack_every: 8,
        }
    }

    #[test]
    fn the_attr_is_read_by_its_length() {
        let x = ok_attr();
        assert_eq!(read_attr(&bytes(&x, &[])), Ok(x));
        // A newer header's longer struct, its new fields zero: fine.
        assert_eq!(read_attr(&bytes(&x, &[0; 8])), Ok(x));
        // Not zero: this librxud cannot honour it.
        assert_eq!(read_attr(&bytes(&x, &[0, 0, 1, 0])), Err(EINVAL));
        // Too short for the fields this librxud knows.
        let b = bytes(&x, &[]);
        for len in [0, 8, 12, 15] {
            assert_eq!(read_attr(&b[..len]), Err(EINVAL), "inlen {len}");
        }
    }

    #[test]
    fn xud_attributes_are_checked() {
        let all = XUD_SEND_OPS;
        let req = check(&ok_attr(), IBV_QPT_DRIVER, PD, 0, 0).unwrap();
        assert_eq!(
            (req.comp_mask, req.max_peers, req.ack_every),
            (create_qp::XUD, 100, 8)
        );
        let ops = PD | IBV_QP_INIT_ATTR_SEND_OPS_FLAGS;
        assert!(check(&ok_attr(), IBV_QPT_DRIVER, ops, 0, all).is_ok());
        let flags = PD | IBV_QP_INIT_ATTR_CREATE_FLAGS;
        assert!(check(&ok_attr(), IBV_QPT_DRIVER, flags, 0, 0).is_ok());
        let bad = |x: RxudvQpInitAttr, qp_type, mask, flags, ops| {
            assert_eq!(
                check(&x, qp_type, mask, flags, ops),
                Err(EINVAL),
                "{x:?} type {qp_type} mask {mask:#x} flags {flags:#x} ops {ops:#x}"
            )
        };
        // The direct verb's own fields.
        for bit in [0, 1, 63] {
            let x = RxudvQpInitAttr {
                comp_mask: 1 << bit,
                ..ok_attr()
            };
            bad(x, IBV_QPT_DRIVER, PD, 0, 0);
        }
        let x = RxudvQpInitAttr {
            max_peers: 65537,
            ..ok_attr()
        };
        bad(x, IBV_QPT_DRIVER, PD, 0, 0);
        let x = RxudvQpInitAttr {
            ack_every: 129,
            ..ok_attr()
        };
        bad(x, IBV_QPT_DRIVER, PD, 0, 0);
        // Zero means the defaults.
        assert!(check(&RxudvQpInitAttr::default(), IBV_QPT_DRIVER, PD, 0, 0).is_ok());
        // What XUD cannot take from `ibv_qp_init_attr_ex`.
        for ty in [IBV_QPT_RC, IBV_QPT_UC, IBV_QPT_UD] {
            bad(ok_attr(), ty, PD, 0, 0);
        }
        bad(ok_attr(), IBV_QPT_DRIVER, 0, 0, 0);
        bad(ok_attr(), IBV_QPT_DRIVER, flags, 1, 0);
        // XRCD, TSO header, RSS, hash, source QPN.
        for bit in [1, 3, 4, 5, 7] {
            bad(ok_attr(), IBV_QPT_DRIVER, PD | 1 << bit, 0, 0);
        }
        // READ, both atomics, LOCAL_INV, BIND_MW, SEND_WITH_INV, TSO.
        for bit in [4, 5, 6, 7, 8, 9, 10] {
            bad(ok_attr(), IBV_QPT_DRIVER, ops, 0, all | 1 << bit);
        }
    }

    /// rxudv.h says what rxud_abi says: every limit it names, and the
    /// struct's fields in order.
    #[test]
    fn the_header_agrees_with_the_abi() {
        let h = include_str!("../include/infiniband/rxudv.h");
        let define = |name: &str| -> u64 {
            let line = h
                .lines()
                .find(|l| l.starts_with(&format!("#define {name} ")))
                .unwrap_or_else(|| panic!("rxudv.h has no {name}"));
            let v = line.split_whitespace().nth(2).unwrap();
            let v = v.trim_end_matches(['u', 'U', 'l', 'L']);
            v.parse()
                .unwrap_or_else(|_| panic!("{name}: {v} is not a number"))
        };
        use rxud_abi::xud;
        assert_eq!(define("RXUDV_MAX_MSG_SZ"), u64::from(xud::MAX_MSG_SZ));
        assert_eq!(
            define("RXUDV_MAX_PEERS_MAX"),
            u64::from(xud::MAX_PEERS_LIMIT)
        );
        assert_eq!(
            define("RXUDV_MAX_PEERS_DEFAULT"),
            u64::from(xud::MAX_PEERS_DEFAULT)
        );
        assert_eq!(
            define("RXUDV_ACK_EVERY_MAX"),
            u64::from(xud::ACK_EVERY_LIMIT)
        );
        assert_eq!(
            define("RXUDV_ACK_EVERY_DEFAULT"),
            u64::from(xud::ACK_EVERY_DEFAULT)
        );
        // FLUSH (rxudv_wr_flush): rdma-core 45's values.
        assert_eq!(define("RXUDV_QP_EX_WITH_FLUSH"), IBV_QP_EX_WITH_FLUSH);
        assert_eq!(
            define("RXUDV_WC_FLUSH"),
            u64::from(rxud_abi::wc_opcode::FLUSH)
        );
        assert_eq!(define("RXUDV_ACCESS_FLUSH_GLOBAL"), 1 << 8);
        assert_eq!(
            (
                define("RXUDV_FLUSH_GLOBAL"),
                define("RXUDV_FLUSH_PERSISTENT")
            ),
            (1, 2)
        );
        assert_eq!(
            (define("RXUDV_FLUSH_RANGE"), define("RXUDV_FLUSH_MR")),
            (0, 1)
        );
        let body: String = h
            .split("struct rxudv_qp_init_attr {")
            .nth(1)
            .and_then(|rest| rest.split("};").next())
            .expect("rxudv.h defines struct rxudv_qp_init_attr")
            .lines()
            .map(|l| l.split("/*").next().unwrap().trim())
            .filter(|l| !l.is_empty())
            .collect::<Vec<_>>()
            .join(" ");
        assert_eq!(
            body,
            "uint64_t comp_mask; uint32_t max_peers; uint32_t ack_every;"
        );
        assert!(h.contains(
            "struct ibv_qp *rxudv_create_qp(struct ibv_context *ibvctx,\n\
             \t\t\t\tstruct ibv_qp_init_attr_ex *attr_ex,\n\
             \t\t\t\tstruct rxudv_qp_init_attr *xattr,\n\
             \t\t\t\tuint32_t inlen);"
        ));
    }
}
