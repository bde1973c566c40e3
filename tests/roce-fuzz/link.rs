// SPDX-License-Identifier: GPL-2.0

//! An AF_PACKET socket bound to one interface: whole Ethernet frames out,
//! every byte ours. A raw IP socket would not do: the kernel rewrites an
//! IPv4 header's total length and refuses options and fragments it did
//! not make, and those are among the lies to tell.

use std::ffi::{c_int, c_void, CString};
use std::time::Duration;

const AF_PACKET: c_int = 17;
const SOCK_RAW: c_int = 3;
const ETH_P_ALL: u16 = 0x0003;
const ENOBUFS: i32 = 105;
const EAGAIN: i32 = 11;

/// `struct sockaddr_ll` (linux/if_packet.h).
#[repr(C)]
struct SockaddrLl {
    sll_family: u16,
    sll_protocol: u16,
    sll_ifindex: c_int,
    sll_hatype: u16,
    sll_pkttype: u8,
    sll_halen: u8,
    sll_addr: [u8; 8],
}

/// `struct iovec`.
#[repr(C)]
struct Iovec {
    base: *const c_void,
    len: usize,
}

/// `struct msghdr`.
#[repr(C)]
struct Msghdr {
    name: *const SockaddrLl,
    namelen: u32,
    iov: *const Iovec,
    iovlen: usize,
    control: *const c_void,
    controllen: usize,
    flags: c_int,
}

/// `struct mmsghdr`.
#[repr(C)]
struct Mmsghdr {
    hdr: Msghdr,
    len: u32,
}

extern "C" {
    fn sendmmsg(fd: c_int, msgs: *mut Mmsghdr, n: u32, flags: c_int) -> c_int;
    fn socket(domain: c_int, ty: c_int, protocol: c_int) -> c_int;
    fn if_nametoindex(name: *const std::ffi::c_char) -> u32;
    fn close(fd: c_int) -> c_int;
}

pub struct Link {
    fd: c_int,
    to: SockaddrLl,
}

impl Link {
    pub fn open(ifname: &str, dst_mac: [u8; 6]) -> Result<Self, String> {
        let name = CString::new(ifname).map_err(|_| "bad interface name")?;
        // SAFETY: `name` is a live NUL-terminated string.
        let ifindex = unsafe { if_nametoindex(name.as_ptr()) };
        if ifindex == 0 {
            return Err(format!("{ifname}: {}", std::io::Error::last_os_error()));
        }
        // SAFETY: plain system call with integer arguments.
        let fd = unsafe { socket(AF_PACKET, SOCK_RAW, c_int::from(ETH_P_ALL.to_be())) };
        if fd < 0 {
            return Err(format!(
                "socket(AF_PACKET): {} (needs root or CAP_NET_RAW)",
                std::io::Error::last_os_error()
            ));
        }
        let mut sll_addr = [0u8; 8];
        sll_addr[..6].copy_from_slice(&dst_mac);
        Ok(Self {
            fd,
            to: SockaddrLl {
                sll_family: AF_PACKET as u16,
                sll_protocol: ETH_P_ALL.to_be(),
                sll_ifindex: ifindex as c_int,
                sll_hatype: 0,
                sll_pkttype: 0,
                sll_halen: 6,
                sll_addr,
            },
        })
    }

    /// Sends `frames` with as few system calls as the kernel allows
    /// (sendmmsg: under TCG a system call costs more than a frame). A
    /// frame the kernel refuses is skipped. Returns (sent, refused).
    pub fn send_all(&self, frames: &[&[u8]]) -> (u64, u64) {
        let iov: Vec<Iovec> = frames
            .iter()
            .map(|f| Iovec {
                base: f.as_ptr().cast(),
                len: f.len(),
            })
            .collect();
        let mut msgs: Vec<Mmsghdr> = iov
            .iter()
            .map(|v| Mmsghdr {
                hdr: Msghdr {
                    name: &self.to,
                    namelen: std::mem::size_of::<SockaddrLl>() as u32,
                    iov: v,
                    iovlen: 1,
                    control: std::ptr::null(),
                    controllen: 0,
                    flags: 0,
                },
                len: 0,
            })
            .collect();
        let (mut at, mut sent, mut refused) = (0usize, 0u64, 0u64);
        while at < msgs.len() {
            // SAFETY: `msgs[at..]` are live, initialised headers whose
            // pointers (address, iovecs, frames) outlive the call.
            let n = unsafe {
                sendmmsg(
                    self.fd,
                    msgs[at..].as_mut_ptr(),
                    (msgs.len() - at) as u32,
                    0,
                )
            };
            if n > 0 {
                at += n as usize;
                sent += n as u64;
                continue;
            }
            match std::io::Error::last_os_error().raw_os_error() {
                Some(ENOBUFS | EAGAIN) => std::thread::sleep(Duration::from_micros(200)),
                // The first frame is refused: skip it.
                _ => {
                    at += 1;
                    refused += 1;
                }
            }
        }
        (sent, refused)
    }
}

impl Drop for Link {
    fn drop(&mut self) {
        // SAFETY: the descriptor is ours and closed only here.
        unsafe { close(self.fd) };
    }
}
