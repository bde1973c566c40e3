// SPDX-License-Identifier: GPL-2.0

//! UDP tunnel sockets (`net/udp_tunnel.h`): a kernel UDP socket on a port
//! of one network namespace whose datagrams are handed to a Rust receiver
//! in the UDP receive path (softirq), before any socket queueing.

use super::{netns::NetNs, skb::SkBuff, NetDevice};
use crate::ffi::bindings;
use core::ptr::NonNull;
use kernel::{prelude::*, sync::Arc};

/// Receives the datagrams of a [`TunnelSocket`].
pub(crate) trait TunnelRx: Send + Sync {
    /// One datagram, its data starting at the UDP payload.
    ///
    /// Context: softirq (the UDP receive path), under RCU; must not sleep.
    fn receive(&self, skb: SkBuff);

    /// A train: datagrams of one flow, from one device, that GRO linked
    /// (`rust/ffi/gro.c`) and that are cut loose again, in arrival order,
    /// `first` first; `lost` more were dropped cutting them loose (no
    /// memory). By default each is received alone.
    ///
    /// Context: as [`Self::receive`].
    fn receive_train(&self, first: SkBuff, rest: Train, lost: u32) {
        let _ = lost;
        self.receive(first);
        for skb in rest {
            self.receive(skb);
        }
    }

    /// `n` datagrams of the train `skb` came first in were dropped: the
    /// train could not be cut loose (then `skb` goes too), or some of its
    /// datagrams could not be cloned from a packet tap's.
    ///
    /// Context: as [`Self::receive`].
    fn lost(&self, skb: &SkBuff, n: u32, why: Lost) {
        let _ = (skb, n, why);
    }
}

/// Why datagrams of a GRO train were dropped ([`TunnelRx::lost`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Lost {
    /// No memory to cut the train loose or clone a datagram.
    NoMemory,
    /// The train's list was reshaped after GRO linked it (generic XDP, a
    /// BPF pull): its datagrams cannot be told apart again.
    Reshaped,
}

/// The datagrams of a train behind its first, each an skb of its own
/// (see [`TunnelRx::receive_train`]); those not taken are freed on drop.
///
/// # Invariants
///
/// `list` is a `next`-linked list of skbs we own, each with its data at
/// its UDP header.
pub(crate) struct Train {
    list: *mut bindings::sk_buff,
}

impl Iterator for Train {
    type Item = SkBuff;

    fn next(&mut self) -> Option<SkBuff> {
        loop {
            // INVARIANT: the helper only takes the first skb off `list`; the
            // rest stay on it, still ours and untouched.
            // SAFETY: `list` is ours (type invariant); the helper takes
            // its first skb off it.
            let skb = NonNull::new(unsafe { bindings::rxud_skb_list_pop(&mut self.list) })?;
            // SAFETY: we own `skb`, its data at its UDP header.
            if unsafe { bindings::rxud_skb_pull_udp_header(skb.as_ptr()) } {
                // SAFETY: owned, data at the UDP payload.
                return Some(unsafe { SkBuff::from_raw(skb) });
            }
            // SAFETY: owned, not used again.
            unsafe { bindings::rxud_kfree_skb(skb.as_ptr()) };
        }
    }
}

impl Drop for Train {
    fn drop(&mut self) {
        for skb in self.by_ref() {
            drop(skb);
        }
    }
}

/// A UDP port of one namespace, IPv4 and (where the kernel has IPv6)
/// IPv6, delivering to `T`.
///
/// # Invariants
///
/// `rx` comes from [`Arc::into_raw`] and owns that reference. `v4` (and
/// `v6` if set) are tunnel sockets of a live namespace, opened by [`open`]
/// with `rx` as their `sk_user_data`; they are released before that
/// reference is dropped. The namespace holds no reference for them: the
/// owner drops this at the latest when the namespace exits
/// ([`super::netns::NetnsExit`]), before it is freed.
pub(crate) struct TunnelSocket<T: TunnelRx> {
    v4: NonNull<bindings::socket>,
    v6: Option<NonNull<bindings::socket>>,
    rx: *const T,
}

// SAFETY: the sockets are only released (from any thread) and `rx` is an
// `Arc<T>` with `T: Send + Sync`.
unsafe impl<T: TunnelRx> Send for TunnelSocket<T> {}
// SAFETY: `&TunnelSocket` exposes nothing.
unsafe impl<T: TunnelRx> Sync for TunnelSocket<T> {}

/// Opens one socket.
///
/// # Safety
///
/// `net` is alive, and `user_data` stays valid for as long as the socket
/// exists.
unsafe fn open<T: TunnelRx>(
    net: &NetNs,
    ipv6: bool,
    port: u16,
    user_data: *const T,
) -> Result<NonNull<bindings::socket>> {
    let mut sock = core::ptr::null_mut();
    // SAFETY: the namespace is alive (per the caller); `encap_rcv::<T>` matches the callback
    // type and reads `user_data` as a `T`, valid per the caller.
    let ret = unsafe {
        bindings::rxud_udp_tunnel_open(
            net.as_raw(),
            ipv6,
            port,
            Some(encap_rcv::<T>),
            user_data.cast_mut().cast(),
            &mut sock,
        )
    };
    kernel::error::to_result(ret)?;
    NonNull::new(sock).ok_or(ENOMEM)
}

/// Releases a socket: no receive callback runs on it after this returns.
///
/// # Safety
///
/// `sock` was opened by [`open`] and is not used again.
unsafe fn release(sock: NonNull<bindings::socket>) {
    // SAFETY: per the caller. Receive callbacks run under RCU, so once the
    // socket is unhashed, a grace period ends every one still running.
    unsafe {
        bindings::udp_tunnel_sock_release(sock.as_ptr());
        bindings::synchronize_rcu();
    }
}

impl<T: TunnelRx> TunnelSocket<T> {
    /// Binds `port` in the namespace of `ndev` (alive for the borrow, so
    /// its namespace is). `EADDRINUSE` if another socket has it (rxe binds
    /// UDP 4791 of the initial namespace when it loads). Sleeps. Drop it
    /// before the namespace ends (see [`TunnelSocket`]).
    pub(crate) fn open(ndev: &NetDevice, port: u16, rx: Arc<T>) -> Result<Self> {
        let net = NetNs::of(ndev);
        let raw = Arc::into_raw(rx);
        // SAFETY: `net` is alive while `ndev` is borrowed; `raw` stays
        // valid until after the sockets are released (here on error, in
        // `drop` otherwise).
        let v4 = match unsafe { open(&net, false, port, raw) } {
            Ok(s) => s,
            Err(e) => {
                // SAFETY: from `Arc::into_raw` above, no socket uses it.
                drop(unsafe { Arc::from_raw(raw) });
                return Err(e);
            }
        };
        // SAFETY: as above.
        let v6 = match unsafe { open(&net, true, port, raw) } {
            Ok(s) => Some(s),
            // A kernel without IPv6 (or with it disabled) serves IPv4 only.
            Err(e) if e.to_errno() == -(bindings::EAFNOSUPPORT as i32) => None,
            Err(e) => {
                // SAFETY: `v4` is ours; then no socket uses `raw`.
                unsafe {
                    release(v4);
                    drop(Arc::from_raw(raw));
                }
                return Err(e);
            }
        };
        // INVARIANT: both sockets were opened in `net` with `raw` as their
        // user data, and `raw` holds the reference `Arc::into_raw` gave up
        // above, which passes to `rx`; `drop` releases the sockets first.
        Ok(Self { v4, v6, rx: raw })
    }
}

impl<T: TunnelRx> Drop for TunnelSocket<T> {
    fn drop(&mut self) {
        // SAFETY: the sockets are ours (type invariant); once released, no
        // callback can still see `rx`, whose reference we then drop.
        unsafe {
            if let Some(v6) = self.v6 {
                release(v6);
            }
            release(self.v4);
            drop(Arc::from_raw(self.rx));
        }
    }
}

/// `udp_tunnel_sock_cfg.encap_rcv`.
///
/// # Safety
///
/// Called by the UDP receive path under RCU with a socket opened by
/// [`open`] for a `T`, and an skb we then own, its data at the UDP header.
unsafe extern "C" fn encap_rcv<T: TunnelRx>(
    sk: *mut bindings::sock,
    skb: *mut bindings::sk_buff,
) -> kernel::ffi::c_int {
    let Some(skb_ptr) = NonNull::new(skb) else {
        return 0;
    };
    let mut rest = core::ptr::null_mut();
    let mut lost = 0u32;
    // SAFETY: per the function's contract we own the skb from here on,
    // whatever happens to it, its data at the UDP header; the helper
    // cuts a GRO train loose into `rest` (ours then), or leaves it whole
    // and fails.
    let behind = unsafe { bindings::rxud_rx_unlink_train(skb_ptr.as_ptr(), &mut rest, &mut lost) };
    // INVARIANT: the helper always sets `rest`: a list (empty unless it cut
    // a train loose) of skbs that are ours from here, each with its data at
    // its UDP header.
    let rest = Train { list: rest };
    let segs = if behind < 0 {
        // SAFETY: as above (a train left whole is still an skb of ours).
        unsafe { bindings::rxud_skb_train_segs(skb_ptr.as_ptr()) }
    } else {
        0
    };
    // SAFETY: as above.
    let pulled = unsafe { bindings::rxud_skb_pull_udp_header(skb_ptr.as_ptr()) };
    if !pulled {
        // Shorter than its UDP header: freed unread, never an `SkBuff`
        // (whose data would have to start at the payload).
        // SAFETY: the skb is ours (as above) and handed to no one else.
        unsafe { bindings::rxud_kfree_skb(skb_ptr.as_ptr()) };
        return 0;
    }
    // INVARIANT: the data now starts at the UDP payload, and the skb is
    // ours alone.
    // SAFETY: as above; the data now starts at the UDP payload.
    let skb = unsafe { SkBuff::from_raw(skb_ptr) };
    // SAFETY: `sk_user_data` is the `T` of the socket's `TunnelSocket`,
    // valid until after the socket is released, which waits for RCU
    // readers like this one.
    let rx = unsafe { bindings::rxud_sk_user_data(sk).cast::<T>().as_ref() };
    match rx {
        Some(rx) if behind > 0 => rx.receive_train(skb, rest, lost),
        Some(rx) if behind == 0 => {
            // A train whose every other datagram was lost cutting it
            // loose (no memory for their clones).
            if lost > 0 {
                rx.lost(&skb, lost, Lost::NoMemory);
            }
            rx.receive(skb)
        }
        Some(rx) => {
            let why = if behind == ENOMEM.to_errno() {
                Lost::NoMemory
            } else {
                Lost::Reshaped
            };
            rx.lost(&skb, segs, why)
        }
        None => drop(skb),
    }
    // 0: consumed (we own and have freed or kept the skb).
    0
}
