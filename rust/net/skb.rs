// SPDX-License-Identifier: GPL-2.0

//! Socket buffers: an owned `struct sk_buff` as the UDP tunnel hands it
//! over, read in place (linear part and page fragments alike) without
//! linearizing; and packets being built for transmission, which can stay
//! charged to their sender ([`TxOwner`]) until the network stack frees
//! them.

use super::netdev::NetDeviceId;
use crate::ffi::bindings;
use core::ptr::NonNull;
use core::sync::atomic::{AtomicUsize, Ordering};
use kernel::{prelude::*, sync::Arc};

/// An owned socket buffer; dropping it frees it (`kfree_skb`: a drop).
///
/// # Invariants
///
/// `ptr` is a live `sk_buff` we own (no one else frees it), whose data
/// starts at the UDP payload: the tunnel's receive path pulled the IP and
/// UDP headers.
pub(crate) struct SkBuff {
    ptr: NonNull<bindings::sk_buff>,
}

// SAFETY: an owned skb may move between contexts and CPUs; the kernel
// does so freely (backlogs, work items).
unsafe impl Send for SkBuff {}

impl SkBuff {
    /// # Safety
    ///
    /// `ptr` is a live skb whose ownership passes to the result, with data
    /// at the UDP payload.
    pub(super) unsafe fn from_raw(ptr: NonNull<bindings::sk_buff>) -> Self {
        // INVARIANT: per the safety requirements, the skb is live, its data
        // at the UDP payload, and its ownership is now ours.
        Self { ptr }
    }

    /// Bytes of data (the UDP payload), linear part and fragments.
    pub(crate) fn len(&self) -> usize {
        // SAFETY: the skb is live (type invariant).
        unsafe { bindings::rxud_skb_len(self.ptr.as_ptr()) as usize }
    }

    /// Copies `out.len()` bytes at `offset` into `out`, from wherever they
    /// lie (linear part or fragments); `EINVAL` past the end.
    pub(crate) fn copy_out(&self, offset: usize, out: &mut [u8]) -> Result {
        let end = offset.checked_add(out.len()).ok_or(EINVAL)?;
        if end > self.len() {
            return Err(EINVAL);
        }
        let (Ok(off), Ok(len)) = (i32::try_from(offset), i32::try_from(out.len())) else {
            return Err(EINVAL);
        };
        // SAFETY: the skb is live, the range is inside its data (checked)
        // and `out` has room for `len` bytes.
        let ret = unsafe {
            bindings::skb_copy_bits(self.ptr.as_ptr(), off, out.as_mut_ptr().cast(), len)
        };
        kernel::error::to_result(ret)
    }

    /// Advances the raw CRC-32 register `crc` (the kernel's `crc32_le`:
    /// no inversion) over `len` bytes at `offset`, reading them in place
    /// (linear part and fragments; nothing copied); `EINVAL` past the
    /// end.
    pub(crate) fn crc32(&self, offset: usize, len: usize, crc: u32) -> Result<u32> {
        let end = offset.checked_add(len).ok_or(EINVAL)?;
        if end > self.len() {
            return Err(EINVAL);
        }
        let (Ok(off), Ok(n)) = (i32::try_from(offset), i32::try_from(len)) else {
            return Err(EINVAL);
        };
        // SAFETY: the skb is live (type invariant) and the range is inside
        // its data (checked); the helper only reads it.
        Ok(unsafe { bindings::rxud_skb_crc32(self.ptr.as_ptr(), off, n, crc) })
    }

    /// Copies the IP header (IPv4 without options or IPv6) and the UDP
    /// header the datagram arrived with into `out`; returns their length.
    pub(crate) fn ip_udp_headers(&self, out: &mut [u8; 48]) -> Result<usize> {
        // SAFETY: the skb is live; the receive path left its network and
        // transport headers in the linear area; `out` has 48 bytes.
        let n =
            unsafe { bindings::rxud_skb_ip_udp_headers(self.ptr.as_ptr(), out.as_mut_ptr(), 48) };
        usize::try_from(n).map_err(|_| EINVAL)
    }

    /// Copies `len` bytes at `offset` into `page` at `pgoff`.
    ///
    /// # Safety
    ///
    /// `page` is a live page the caller may write (pinned user memory of an
    /// MR), and `pgoff + len` is at most a page.
    pub(crate) unsafe fn copy_to_page(
        &self,
        offset: usize,
        page: *mut bindings::page,
        pgoff: usize,
        len: usize,
    ) -> Result {
        let (Ok(off), Ok(n)) = (i32::try_from(offset), i32::try_from(len)) else {
            return Err(EINVAL);
        };
        // SAFETY: the skb is live; the page is writable for the range per
        // the caller; `skb_copy_bits` checks the skb range itself.
        let ret = unsafe {
            bindings::rxud_skb_copy_to_page(self.ptr.as_ptr(), off, page, pgoff as u32, n)
        };
        kernel::error::to_result(ret)
    }

    /// The device the packet is for: the one it arrived on, or for a
    /// packet looped back through `lo` by a local sender, the device that
    /// owns its destination address. Context: the receive softirq.
    pub(crate) fn ingress(&self) -> Option<NetDeviceId> {
        // SAFETY: the skb is live and its headers were checked by the
        // UDP layer; the helper reads `dev` and, for loopback, looks the
        // destination address up under the softirq's RCU read side. The
        // result is compared, not dereferenced.
        let dev = unsafe { bindings::rxud_skb_port_dev(self.ptr.as_ptr()) };
        (!dev.is_null()).then(|| NetDeviceId::from_raw(dev))
    }

    /// For a packet that is for a VLAN device ([`Self::ingress`]), the
    /// device the VLAN device sits on. Context: the receive softirq.
    pub(crate) fn ingress_below_vlan(&self) -> Option<NetDeviceId> {
        // SAFETY: as for `ingress`; a VLAN device holds a reference to
        // the device under it while it exists, and the skb holds the VLAN
        // device. The result is compared, not dereferenced.
        let dev = unsafe { bindings::rxud_skb_vlan_real_dev(self.ptr.as_ptr()) };
        (!dev.is_null()).then(|| NetDeviceId::from_raw(dev))
    }
}

impl Drop for SkBuff {
    fn drop(&mut self) {
        // SAFETY: we own the skb (type invariant).
        unsafe { bindings::rxud_kfree_skb(self.ptr.as_ptr()) };
    }
}

/// A packet being built for transmission: a linear skb with room in front
/// for the UDP and IP headers. Dropping it unsent frees it.
///
/// # Invariants
///
/// `ptr` is a live, linear skb we own, and `payload` points to its `len`
/// bytes of UDP payload. Until the headers are pushed, `datagram` is
/// `None`, `ipv6` is false, and the skb has room in front of the payload
/// for a UDP and an IPv6 header. Once they are pushed, `datagram` holds
/// the start and length of the whole IP datagram (IP header to the end of
/// the payload), and `ipv6` says whether its IP header is IPv6.
pub(crate) struct TxSkb {
    ptr: NonNull<bindings::sk_buff>,
    payload: NonNull<u8>,
    len: usize,
    datagram: Option<(NonNull<u8>, usize)>,
    ipv6: bool,
}

// SAFETY: an owned skb may be built and sent from any context.
unsafe impl Send for TxSkb {}

impl TxSkb {
    /// A packet of `len` bytes of UDP payload out of `ndev` (zeroed
    /// later by the builder: every byte is written before sending).
    /// Allocates atomically.
    pub(crate) fn new(ndev: &super::NetDevice, len: usize) -> Result<Self> {
        let n = u32::try_from(len).map_err(|_| EINVAL)?;
        let mut data = core::ptr::null_mut();
        // SAFETY: the device is live for the borrow; the skb holds a
        // pointer to it, and the caller keeps the device until `send`.
        let skb = unsafe { bindings::rxud_tx_skb_alloc(ndev.as_raw(), n, &mut data) };
        let ptr = NonNull::new(skb).ok_or(ENOMEM)?;
        let payload = NonNull::new(data.cast::<u8>()).ok_or(ENOMEM)?;
        // INVARIANT: the helper allocated a linear skb, now ours, put `len`
        // bytes of data at `payload` and reserved room in front of them for
        // a link-layer, an IPv6 and a UDP header; nothing is pushed yet.
        Ok(Self {
            ptr,
            payload,
            len,
            datagram: None,
            ipv6: false,
        })
    }

    /// Bytes of UDP payload (BTH to ICRC).
    pub(crate) fn payload_len(&self) -> usize {
        self.len
    }

    /// The UDP payload, to be written in full.
    pub(crate) fn payload_mut(&mut self) -> &mut [u8] {
        // SAFETY: `payload` points to `len` bytes of the skb's linear
        // data, ours to write (type invariant); the borrow of `self`
        // keeps the skb alive and unshared.
        unsafe { core::slice::from_raw_parts_mut(self.payload.as_ptr(), self.len) }
    }

    /// Routes the packet from `saddr` to `daddr` (through `route` when
    /// the flow has a cached one) and puts the UDP (source port `sport`,
    /// destination 4791, no checksum) and IPv4 (`fields`, DF) headers in
    /// front of the payload. `EHOSTUNREACH`-like errors when there is no
    /// route.
    pub(crate) fn push_udp4(
        &mut self,
        route: Option<&super::RouteCache>,
        saddr: [u8; 4],
        daddr: [u8; 4],
        sport: u16,
        fields: Ipv4Fields,
    ) -> Result {
        if self.datagram.is_some() {
            return Err(EINVAL);
        }
        let mut d = core::ptr::null_mut();
        // SAFETY: the skb is ours, with room for the headers (allocated
        // so); addresses are in network order as the C side expects.
        let ret = unsafe {
            bindings::rxud_tx_push_udp4(
                self.ptr.as_ptr(),
                route.map_or(core::ptr::null_mut(), |r| r.as_raw()),
                u32::from_ne_bytes(saddr),
                u32::from_ne_bytes(daddr),
                sport.to_be(),
                fields.tos,
                fields.ttl,
                fields.id,
                &mut d,
            )
        };
        kernel::error::to_result(ret)?;
        let d = NonNull::new(d).ok_or(EINVAL)?;
        // INVARIANT: the helper pushed a UDP and an IPv4 header (8 + 20
        // bytes, no options) right in front of the payload, which stays in
        // place, and `d` is the IP header; `ipv6` stays false.
        self.datagram = Some((d, self.len + 20 + 8));
        Ok(())
    }

    /// As [`TxSkb::push_udp4`], over IPv6 (with `flow`'s traffic class,
    /// hop limit and flow label in the IPv6 header).
    pub(crate) fn push_udp6(
        &mut self,
        route: Option<&super::RouteCache>,
        saddr: [u8; 16],
        daddr: [u8; 16],
        sport: u16,
        flow: Ipv6Flow,
    ) -> Result {
        if self.datagram.is_some() {
            return Err(EINVAL);
        }
        let mut d = core::ptr::null_mut();
        let s = bindings::in6_addr {
            in6_u: bindings::in6_addr__bindgen_ty_1 { u6_addr8: saddr },
        };
        let t = bindings::in6_addr {
            in6_u: bindings::in6_addr__bindgen_ty_1 { u6_addr8: daddr },
        };
        // SAFETY: the skb is ours, with room for the headers (allocated
        // so); the addresses are valid for the call.
        let ret = unsafe {
            bindings::rxud_tx_push_udp6(
                self.ptr.as_ptr(),
                route.map_or(core::ptr::null_mut(), |r| r.as_raw()),
                &s,
                &t,
                sport.to_be(),
                flow.tclass,
                flow.hop_limit,
                flow.label,
                &mut d,
            )
        };
        kernel::error::to_result(ret)?;
        let d = NonNull::new(d).ok_or(EINVAL)?;
        // INVARIANT: as in `push_udp4`, with a 40-byte IPv6 header, which
        // `ipv6` records.
        self.datagram = Some((d, self.len + 40 + 8));
        self.ipv6 = true;
        Ok(())
    }

    /// The whole IP datagram once the headers are pushed, to read.
    pub(crate) fn datagram(&self) -> Option<&[u8]> {
        let (d, n) = self.datagram?;
        // SAFETY: as for `datagram_mut`; shared for the borrow of `self`.
        Some(unsafe { core::slice::from_raw_parts(d.as_ptr(), n) })
    }

    /// Whether trains go out of the packet's device: the `trains` module
    /// parameter is on (the default) and GSO is wanted on the
    /// device (`NETIF_F_GSO` in its wanted features, which `ethtool -K
    /// DEV gso off` clears). Wanted, not in effect: the core turns GSO off
    /// on a device without scatter-gather, as software GSO of TCP makes
    /// paged segments, but a train's packets are linear.
    pub(crate) fn trains_allowed(&self) -> bool {
        // SAFETY: the skb is ours and holds a reference to its device.
        unsafe { bindings::rxud_skb_trains_allowed(self.ptr.as_ptr()) }
    }

    /// The whole IP datagram once the headers are pushed.
    pub(crate) fn datagram_mut(&mut self) -> Option<&mut [u8]> {
        let (d, n) = self.datagram?;
        // SAFETY: `d` points to the `n` linear bytes from the IP header to
        // the end of the payload (type invariant), ours to write.
        Some(unsafe { core::slice::from_raw_parts_mut(d.as_ptr(), n) })
    }

    /// Charges the packet to `owner` until it is freed (see
    /// [`TxSkb::send_owned`]).
    fn charge<T: TxOwner>(&self, owner: &Arc<T>) {
        let arg = Arc::into_raw(owner.clone());
        OWNED_SKBS.fetch_add(1, Ordering::Relaxed);
        // SAFETY: the skb is ours and has no destructor (it has no
        // socket); `released::<T>` reads `arg` back as the `Arc<T>` it is.
        unsafe {
            bindings::rxud_skb_set_destructor(
                self.ptr.as_ptr(),
                Some(released::<T>),
                arg.cast_mut().cast(),
            )
        };
    }

    /// As [`TxSkb::send`], with the packet charged to `owner` until the
    /// stack frees it (transmitted, dropped, or delivered through a
    /// virtual link): then [`TxOwner::tx_released`] runs. The packet
    /// holds a reference to `owner` meanwhile. The destructor runs
    /// however the packet ends, refused by IP here included, so the
    /// reference and the charge come back on every path.
    ///
    /// The datagrams of `rest` (taken out; none, for a packet alone) go
    /// behind this one as one train: one skb through IP, the neighbour
    /// layer and the qdisc, cut back into its datagrams before the device
    /// (`rxud_tx_train`). The caller checked each with
    /// `proto::wire::train` (`may_follow`, `has_room`) against the one
    /// before it. The first datagram carries the whole train's charge,
    /// given back when it is freed: the others lose any destructor when
    /// the stack unlinks them (`skb_segment_list` runs it there, before
    /// the device has them), so they carry none. The first is freed
    /// first (the device sends in order), so at most the rest of one
    /// train is below IP uncharged. Without memory for that charge (an
    /// atomic allocation of 16 bytes), each goes alone.
    pub(crate) fn send_owned<T: TxOwner>(
        self,
        rest: &mut [Option<TxSkb>],
        owner: &Arc<T>,
    ) -> Result {
        if self.datagram.is_none() {
            // Not routed (the transports queue none such): freed here,
            // charged first so that its destructor gives back the budget
            // the caller reserved for it; the rest go alone.
            self.charge(owner);
            drop(self);
            for skb in rest.iter_mut().filter_map(Option::take) {
                let _ = skb.send_charged(owner);
            }
            return Err(EINVAL);
        }
        let mut members = [core::ptr::null_mut(); crate::proto::wire::train::MAX_PACKETS];
        let mut n = 0usize;
        let charge = match rest.iter().flatten().next() {
            Some(_) => KBox::new(
                TrainCharge {
                    owner: owner.clone(),
                    packets: 1,
                },
                GFP_ATOMIC,
            )
            .ok(),
            None => None,
        };
        let Some(mut charge) = charge else {
            let r = self.send_charged(owner);
            for skb in rest.iter_mut().filter_map(Option::take) {
                // Each alone; a refusal is a lost packet, as for the first.
                let _ = skb.send_charged(owner);
            }
            return r;
        };
        for skb in rest.iter_mut().filter_map(Option::take) {
            if skb.datagram.is_none() {
                // Not routed: never admitted by `may_follow`; freed, its
                // reserved budget given back by its destructor.
                skb.charge(owner);
                continue;
            }
            match members.get_mut(n) {
                Some(slot) => {
                    *slot = skb.ptr.as_ptr();
                    core::mem::forget(skb);
                    n += 1;
                }
                // More than a train holds (`train::has_room` says no
                // first): alone.
                None => {
                    let _ = skb.send_charged(owner);
                }
            }
        }
        charge.packets += n as u32;
        OWNED_SKBS.fetch_add(1, Ordering::Relaxed);
        // SAFETY: the skb is ours and has no destructor (it has no
        // socket); `released_train::<T>` reads the argument back as the
        // `KBox<TrainCharge<T>>` it is.
        unsafe {
            bindings::rxud_skb_set_destructor(
                self.ptr.as_ptr(),
                Some(released_train::<T>),
                KBox::into_raw(charge).cast(),
            )
        };
        if n > 0 {
            // SAFETY: `self` and `members[..n]` are routed datagrams we
            // own with their headers pushed; the head takes the members
            // (they are its frag_list from here on, freed with it).
            unsafe { bindings::rxud_tx_train(self.ptr.as_ptr(), members.as_mut_ptr(), n as u32) };
        }
        self.send()
    }

    /// A packet alone, charged to `owner` (see [`TxSkb::send_owned`]).
    fn send_charged<T: TxOwner>(self, owner: &Arc<T>) -> Result {
        self.charge(owner);
        self.send()
    }

    /// Hands the packet to the IP layer (`ip_local_out`); it is consumed
    /// whatever happens.
    pub(crate) fn send(self) -> Result {
        if self.datagram.is_none() {
            return Err(EINVAL);
        }
        let (ptr, ipv6) = (self.ptr, self.ipv6);
        core::mem::forget(self);
        // SAFETY: the skb is complete and routed; the IP layer takes it.
        let ret = unsafe {
            if ipv6 {
                bindings::rxud_tx_send6(ptr.as_ptr())
            } else {
                bindings::rxud_tx_send(ptr.as_ptr())
            }
        };
        kernel::error::to_result(ret)
    }
}

impl Drop for TxSkb {
    fn drop(&mut self) {
        // SAFETY: we own the unsent skb (type invariant).
        unsafe { bindings::rxud_kfree_skb(self.ptr.as_ptr()) };
    }
}

/// The IPv4 header fields of a packet: TOS, TTL and identification.
#[derive(Clone, Copy)]
pub(crate) struct Ipv4Fields {
    pub(crate) tos: u8,
    pub(crate) ttl: u8,
    pub(crate) id: u16,
}

/// The IPv6 header fields of a flow: traffic class, hop limit and the
/// 20-bit flow label.
#[derive(Clone, Copy)]
pub(crate) struct Ipv6Flow {
    pub(crate) tclass: u8,
    pub(crate) hop_limit: u8,
    pub(crate) label: u32,
}

/// A sender that charges its packets in flight below IP to itself (see
/// [`TxSkb::send_owned`]).
pub(crate) trait TxOwner: Send + Sync + Sized {
    /// `packets` of the owner's packets were freed (one, or a train).
    /// Context: softirq, or process context, possibly under network
    /// stack locks (a qdisc's while it drops): no sending from here, and
    /// no lock that is held while sending.
    fn tx_released(this: &Arc<Self>, packets: u32);
}

/// What the first packet of a train carries to its destructor.
struct TrainCharge<T> {
    owner: Arc<T>,
    /// The train's packets.
    packets: u32,
}

/// Transmit skbs with an rxud destructor not yet run: the module must not
/// go while any is left.
static OWNED_SKBS: AtomicUsize = AtomicUsize::new(0);

/// The destructor of a packet sent with [`TxSkb::send_owned`].
///
/// # Safety
///
/// `skb` is being freed or orphaned, and its destructor argument is a
/// reference to a `T` taken with `Arc::into_raw` by `send_owned`.
unsafe extern "C" fn released<T: TxOwner>(skb: *mut bindings::sk_buff) {
    // SAFETY: the stack calls the destructor with the skb still valid;
    // its destructor argument is ours (set by `send_owned`).
    let arg = unsafe { bindings::rxud_skb_destructor_arg(skb) };
    // SAFETY: per the function's contract; the stack clears the
    // destructor once it has run, so the reference is given back once.
    let owner = unsafe { Arc::from_raw(arg.cast::<T>().cast_const()) };
    T::tx_released(&owner, 1);
    drop(owner);
    OWNED_SKBS.fetch_sub(1, Ordering::Release);
}

/// The destructor of a train's first packet (see [`TxSkb::send_owned`]).
///
/// # Safety
///
/// `skb` is being freed or orphaned, and its destructor argument is a
/// `TrainCharge<T>` made into a raw pointer by `send_owned`.
unsafe extern "C" fn released_train<T: TxOwner>(skb: *mut bindings::sk_buff) {
    // SAFETY: the stack calls the destructor with the skb still valid;
    // its destructor argument is ours (set by `send_owned`).
    let arg = unsafe { bindings::rxud_skb_destructor_arg(skb) };
    // SAFETY: per the function's contract; the stack clears the
    // destructor once it has run, so the box is taken back once.
    let charge = unsafe { KBox::from_raw(arg.cast::<TrainCharge<T>>()) };
    T::tx_released(&charge.owner, charge.packets);
    drop(charge);
    OWNED_SKBS.fetch_sub(1, Ordering::Release);
}

/// Waits until every packet sent with [`TxSkb::send_owned`] has been
/// freed: at module exit, after the last device, so that no destructor
/// of ours runs once the module is gone. Packets held by a qdisc (a
/// netem delay, say) are waited for; the wait is reported if it lasts.
/// Context: process (sleeps).
pub(crate) fn wait_for_owned_skbs() {
    let mut waited_ms = 0u32;
    while OWNED_SKBS.load(Ordering::Acquire) != 0 {
        if waited_ms % 5000 == 4990 {
            pr_warn!(
                "waiting for {} packets still queued below IP\n",
                OWNED_SKBS.load(Ordering::Relaxed)
            );
        }
        crate::kext::timer::sleep_ms(10);
        waited_ms = waited_ms.wrapping_add(10);
    }
    // A destructor that ran in softirq context (the usual one) did so in
    // an RCU read-side critical section; after a grace period none is
    // still returning from our code.
    crate::kext::sync::synchronize_rcu();
}
