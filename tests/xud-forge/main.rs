// SPDX-License-Identifier: GPL-2.0

//! xud-forge: sends forged XUD data packets (Documentation/xud.rst, "Wire
//! format") to an rxud device, to test its XUD receive path with traffic
//! no XUD QP would send: many source QPNs at once (the peer limit), the
//! same packet again (duplicates), chosen PSNs and streams.
//!
//! Each packet is a complete one-packet message (XUD_RDMA_WRITE, or
//! XUD_SEND with `--send`) from its own source QPN, or with `--dma-len`
//! the first packet of a longer one that never finishes (a partial SEND:
//! it claims a receive), `--msgs` of them per source; sent through a raw
//! IPv4 socket. The IP header is built here rather than by the kernel
//! because the ICRC covers it: with every field fixed before the ICRC is
//! computed (ID non-zero so the kernel keeps it, DF, source address), the
//! only fields the kernel still writes are the IP checksum and total
//! length, which the ICRC masks or which equal ours. The headers come from
//! `rxud-proto`, the same code the kernel module parses them with.
//!
//! Stream cookies (Documentation/xud.rst, "Stream cookies"): by default
//! the packets carry none (or, with `--fake-cookie`, a made-up one), as an
//! off-path forger's would; the receiver challenges them and takes
//! nothing. With `--handshake` the forger plays a sender on the path: it
//! listens on UDP 4791 at its source address, sends each packet once
//! without a cookie, takes each source's cookie from the challenge and
//! then sends the packets with it (`--save-cookies FILE` keeps them);
//! `--cookies FILE` sends with cookies saved earlier, as a replay of the
//! packets sent then would carry them.

use std::collections::hash_map::RandomState;
use std::ffi::{c_int, c_void};
use std::hash::BuildHasher;
use std::net::Ipv4Addr;
use std::process::ExitCode;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use std::collections::BTreeMap;

use rxud_proto::psn::Psn;
use rxud_proto::wire::{
    bth, cnp, deth, icrc, packet, reth, xck, xeth, Opcode, QPN_MASK, ROCE_V2_UDP_PORT,
};
use rxud_proto::xud::cookie::Cookie;

const USAGE: &str = "usage: xud-forge --src A.B.C.D --dst A.B.C.D --qpn DEST_QPN --qkey QKEY \
[--rkey RKEY --va VA] [--len BYTES] [--peers N] [--first-src-qpn Q] [--stream S] [--psn P] \
[--peer-inc I] [--send] [--repeat K] [--sport PORT] [--gap-us U] [--dma-len L --msgs M] \
[--handshake [--save-cookies FILE] | --cookies FILE | --fake-cookie] [--cnp]";

const IPV4_HEADER_LEN: usize = 20;
const UDP_HEADER_LEN: usize = 8;
const IPPROTO_UDP: u8 = 17;

/// One forged packet: every field that differs between packets or that
/// the ICRC covers.
#[derive(Clone, Copy, Debug)]
struct Forged<'a> {
    src: Ipv4Addr,
    dst: Ipv4Addr,
    sport: u16,
    /// Non-zero: an IP ID of 0 is replaced by the kernel, after the ICRC
    /// was computed over it.
    ip_id: u16,
    opcode: Opcode,
    dest_qpn: u32,
    src_qpn: u32,
    qkey: u32,
    psn: Psn,
    stream: u64,
    /// XETH `peer_inc`: 0 (a sender that has not heard from the receiver
    /// yet), or a receiving QP's incarnation.
    peer_inc: u32,
    /// RETH: for a SEND, the payload's offset in the message (0 here).
    va: u64,
    rkey: u32,
    /// XCK: the stream cookie echoed ([`Cookie::NONE`]: none).
    cookie: Cookie,
    /// The message's number in the stream (XETH `msg_seq`; `msg_lag` is
    /// the same: message 0 is the oldest unfinished) and its length (RETH
    /// `dma_len`): the payload's, or more for a message never finished.
    msg_seq: u32,
    dma_len: u32,
    /// XETH `oldest_psn`: the first message's packet.
    oldest_psn: Psn,
    payload: &'a [u8],
}

/// Builds `f` as one whole IPv4 datagram, ICRC filled in: BTH, DETH,
/// XETH, RETH as the opcode table orders them. The XETH is that of a
/// stream's message `msg_seq` with none finished (`msg_lag` the same,
/// `oldest_psn` the first message's packet) from a sender that has heard
/// nothing yet (`peer_inc` 0:
/// a receiver with no state for the source accepts it, rules 1 and 2) or,
/// with `--peer-inc`, from one that names the receiving QP's incarnation
/// (a wrong one: the packet was meant for an earlier QP with the same
/// number, rule 1); AckReq is set so that each packet is answered at once.
fn build(f: &Forged<'_>) -> Result<Vec<u8>, String> {
    let mut repr = packet::Repr::new(bth::Repr {
        opcode: f.opcode,
        solicited: false,
        mig_req: false,
        pad_count: 0,
        pkey: bth::DEFAULT_PKEY,
        fecn: false,
        becn: false,
        dest_qp: f.dest_qpn,
        ack_req: true,
        psn: f.psn,
    });
    repr.deth = Some(deth::Repr {
        qkey: f.qkey,
        src_qp: f.src_qpn,
    });
    repr.xeth = Some(xeth::Repr {
        stream: f.stream,
        peer_inc: f.peer_inc,
        msg_seq: f.msg_seq,
        oldest_psn: f.oldest_psn,
        msg_lag: u8::try_from(f.msg_seq).map_err(|_| "msg_seq too large")?,
    });
    repr.xck = Some(xck::Repr { cookie: f.cookie });
    repr.reth = Some(reth::Repr {
        va: f.va,
        rkey: f.rkey,
        dma_len: f.dma_len,
    });
    let ib_len = repr
        .buffer_len(f.payload.len())
        .map_err(|e| format!("headers: {e}"))?;
    let total = IPV4_HEADER_LEN + UDP_HEADER_LEN + ib_len;
    let total16 = u16::try_from(total).map_err(|_| {
        format!(
            "{} payload bytes do not fit an IPv4 datagram",
            f.payload.len()
        )
    })?;
    let mut buf = vec![0u8; total];
    ip_udp(&mut buf, f.src, f.dst, f.sport, f.ip_id, total16);
    let mut p = repr
        .emit(
            &mut buf[IPV4_HEADER_LEN + UDP_HEADER_LEN..],
            f.payload.len(),
        )
        .map_err(|e| format!("headers: {e}"))?;
    p.payload_mut().copy_from_slice(f.payload);
    icrc::icrc_fill(&mut buf).map_err(|e| format!("ICRC: {e}"))?;
    Ok(buf)
}

/// Writes the IPv4 and UDP headers of a RoCEv2 datagram of `total` bytes
/// at the start of `buf`.
fn ip_udp(buf: &mut [u8], src: Ipv4Addr, dst: Ipv4Addr, sport: u16, ip_id: u16, total: u16) {
    // IPv4 header: TOS 0, checksum 0 (the kernel fills it in; the ICRC
    // masks both, and TTL).
    buf[0] = 0x45;
    buf[2..4].copy_from_slice(&total.to_be_bytes());
    buf[4..6].copy_from_slice(&ip_id.to_be_bytes());
    buf[6] = 0x40; // DF: RoCE packets are never fragmented
    buf[8] = 64;
    buf[9] = IPPROTO_UDP;
    buf[12..16].copy_from_slice(&src.octets());
    buf[16..20].copy_from_slice(&dst.octets());
    // UDP header, checksum 0 (none: the ICRC protects the packet).
    let udp = &mut buf[IPV4_HEADER_LEN..IPV4_HEADER_LEN + UDP_HEADER_LEN];
    udp[0..2].copy_from_slice(&sport.to_be_bytes());
    udp[2..4].copy_from_slice(&ROCE_V2_UDP_PORT.to_be_bytes());
    udp[4..6].copy_from_slice(&(total - IPV4_HEADER_LEN as u16).to_be_bytes());
}

/// A RoCEv2 CNP (`rxud_proto::wire::cnp`) for QP `dest_qpn`, from `src`:
/// what a receiver of CE-marked packets sends their sender, or what a
/// forger sends to slow a flow down.
fn build_cnp(
    src: Ipv4Addr,
    dst: Ipv4Addr,
    sport: u16,
    ip_id: u16,
    dest_qpn: u32,
) -> Result<Vec<u8>, String> {
    let total = IPV4_HEADER_LEN + UDP_HEADER_LEN + cnp::PACKET_LEN;
    let mut buf = vec![0u8; total];
    ip_udp(&mut buf, src, dst, sport, ip_id, total as u16);
    cnp::emit(
        &mut buf[IPV4_HEADER_LEN + UDP_HEADER_LEN..],
        dest_qpn,
        bth::DEFAULT_PKEY,
    )
    .map_err(|e| format!("CNP: {e}"))?;
    icrc::icrc_fill(&mut buf).map_err(|e| format!("ICRC: {e}"))?;
    Ok(buf)
}

/// The command line.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Args {
    src: Ipv4Addr,
    dst: Ipv4Addr,
    qpn: u32,
    qkey: u32,
    rkey: u32,
    va: u64,
    len: u32,
    peers: u32,
    first_src_qpn: u32,
    /// One stream for every peer; by default each gets a random one.
    stream: Option<u64>,
    psn: Option<u32>,
    peer_inc: u32,
    send: bool,
    repeat: u32,
    sport: u16,
    gap_us: u64,
    /// Ask for each source's cookie first (an on-path sender).
    handshake: bool,
    save_cookies: Option<String>,
    /// Send with the cookies saved in this file.
    cookies: Option<String>,
    /// Send with a random cookie (an off-path guess).
    fake_cookie: bool,
    /// Message length, if longer than `len` (a partial message).
    dma_len: Option<u32>,
    /// Messages per source.
    msgs: u32,
    /// Send CNPs to `qpn` (`repeat` of them) instead of XUD packets.
    cnp: bool,
}

/// Parses the arguments after the program name. Numbers are decimal or
/// `0x` hexadecimal.
fn parse_args(mut it: impl Iterator<Item = String>) -> Result<Args, String> {
    fn int<T: TryFrom<u64>>(opt: &str, v: &str) -> Result<T, String> {
        let n = match v.strip_prefix("0x").or_else(|| v.strip_prefix("0X")) {
            Some(hex) => u64::from_str_radix(hex, 16),
            None => v.parse(),
        };
        n.ok()
            .and_then(|n| T::try_from(n).ok())
            .ok_or_else(|| format!("{opt}: '{v}' is not a number in range"))
    }
    let (mut src, mut dst, mut qpn, mut qkey) = (None, None, None, None);
    let mut a = Args {
        src: Ipv4Addr::UNSPECIFIED,
        dst: Ipv4Addr::UNSPECIFIED,
        qpn: 0,
        qkey: 0,
        rkey: 0,
        va: 0,
        len: 64,
        peers: 1,
        first_src_qpn: 0x100,
        stream: None,
        psn: None,
        peer_inc: 0,
        send: false,
        repeat: 1,
        sport: 49152,
        gap_us: 0,
        handshake: false,
        save_cookies: None,
        cookies: None,
        fake_cookie: false,
        dma_len: None,
        msgs: 1,
        cnp: false,
    };
    while let Some(opt) = it.next() {
        match opt.as_str() {
            "--send" => a.send = true,
            "--handshake" => a.handshake = true,
            "--fake-cookie" => a.fake_cookie = true,
            "--cnp" => a.cnp = true,
            _ => {}
        }
        if matches!(
            opt.as_str(),
            "--send" | "--handshake" | "--fake-cookie" | "--cnp"
        ) {
            continue;
        }
        let v = it.next().ok_or_else(|| format!("{opt}: value missing"))?;
        let ip = |v: &str| {
            v.parse::<Ipv4Addr>()
                .map_err(|_| format!("{opt}: '{v}' is not an IPv4 address"))
        };
        match opt.as_str() {
            "--src" => src = Some(ip(&v)?),
            "--dst" => dst = Some(ip(&v)?),
            "--qpn" => qpn = Some(int(&opt, &v)?),
            "--qkey" => qkey = Some(int(&opt, &v)?),
            "--rkey" => a.rkey = int(&opt, &v)?,
            "--va" => a.va = int(&opt, &v)?,
            "--len" => a.len = int(&opt, &v)?,
            "--peers" => a.peers = int(&opt, &v)?,
            "--first-src-qpn" => a.first_src_qpn = int(&opt, &v)?,
            "--stream" => a.stream = Some(int(&opt, &v)?),
            "--psn" => a.psn = Some(int(&opt, &v)?),
            "--peer-inc" => a.peer_inc = int(&opt, &v)?,
            "--repeat" => a.repeat = int(&opt, &v)?,
            "--sport" => a.sport = int(&opt, &v)?,
            "--gap-us" => a.gap_us = int(&opt, &v)?,
            "--save-cookies" => a.save_cookies = Some(v),
            "--cookies" => a.cookies = Some(v),
            "--dma-len" => a.dma_len = Some(int(&opt, &v)?),
            "--msgs" => a.msgs = int(&opt, &v)?,
            _ => return Err(format!("unknown option '{opt}'")),
        }
    }
    fn need<T>(o: Option<T>, name: &str) -> Result<T, String> {
        o.ok_or_else(|| format!("{name} is required"))
    }
    (a.src, a.dst) = (need(src, "--src")?, need(dst, "--dst")?);
    (a.qpn, a.qkey) = (need(qpn, "--qpn")?, need(qkey, "--qkey")?);
    let last_src = a.first_src_qpn.saturating_add(a.peers.saturating_sub(1));
    if a.qpn > QPN_MASK || last_src > QPN_MASK {
        return Err("QPNs are 24 bits".into());
    }
    if a.peers == 0 || a.repeat == 0 {
        return Err("--peers and --repeat are at least 1".into());
    }
    if a.stream == Some(0) {
        return Err("--stream: 0 is no sender's stream (the receiver drops it)".into());
    }
    if a.psn.is_some_and(|p| p > Psn::MASK) {
        return Err("--psn: PSNs are 24 bits".into());
    }
    let ways = [a.handshake, a.cookies.is_some(), a.fake_cookie];
    if ways.iter().filter(|&&w| w).count() > 1 {
        return Err("--handshake, --cookies and --fake-cookie exclude each other".into());
    }
    if a.save_cookies.is_some() && !a.handshake {
        return Err("--save-cookies needs --handshake".into());
    }
    if a.dma_len.is_some_and(|d| d < a.len) {
        return Err("--dma-len: at least --len".into());
    }
    // msg_lag is below 16 (xeth::MAX_MSG_LAG).
    if a.msgs == 0 || a.msgs > 16 {
        return Err("--msgs: 1 to 16".into());
    }
    Ok(a)
}

/// Pseudo-random numbers: std's SipHash (keyed at random per process)
/// over the clock and a counter, so that each run is a new sender, with
/// new streams and PSN. (A receiver holds a source's stream for QUIET,
/// 10 s: a second run from the same source QPNs within it is dropped as
/// rule 3 says, unless it passes the same `--stream`.)
struct Rng {
    keys: RandomState,
    seed: u128,
    n: u64,
}

impl Rng {
    fn from_time() -> Self {
        let seed = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos());
        Self {
            keys: RandomState::new(),
            seed,
            n: 0,
        }
    }

    fn next(&mut self) -> u64 {
        self.n += 1;
        self.keys.hash_one((self.seed, self.n))
    }

    fn nonzero(&mut self) -> u64 {
        self.next().max(1)
    }
}

const AF_INET: c_int = 2;
const SOCK_RAW: c_int = 3;
const IPPROTO_IP: c_int = 0;
const IPPROTO_RAW: c_int = 255;
const IP_HDRINCL: c_int = 3;

/// `struct sockaddr_in` (netinet/in.h); port and address in network byte
/// order.
#[repr(C)]
struct SockaddrIn {
    sin_family: u16,
    sin_port: u16,
    sin_addr: u32,
    sin_zero: [u8; 8],
}

extern "C" {
    fn socket(domain: c_int, ty: c_int, protocol: c_int) -> c_int;
    fn setsockopt(fd: c_int, level: c_int, name: c_int, value: *const c_void, len: u32) -> c_int;
    fn sendto(
        fd: c_int,
        buf: *const c_void,
        len: usize,
        flags: c_int,
        addr: *const SockaddrIn,
        addr_len: u32,
    ) -> isize;
    fn close(fd: c_int) -> c_int;
    fn recv(fd: c_int, buf: *mut c_void, len: usize, flags: c_int) -> isize;
}

/// Where challenges are read: a UDP socket on 4791 at the source address,
/// or, where an rxud device of this namespace holds that port, a raw UDP
/// socket, which sees a copy of every UDP datagram the host receives (the
/// device drops the challenge: it names no stream of its own).
enum Listener {
    Udp(std::net::UdpSocket),
    Raw(c_int, Ipv4Addr),
}

/// Receive buffer of the listener: the challenges are read only once
/// every first packet is sent, so it holds all of them (a raw socket
/// also holds every other UDP datagram meanwhile). The default (208 KB)
/// held some 300: `make bench`'s 10,000 sources lost the rest.
const LISTEN_RCVBUF: c_int = 64 << 20;

impl Listener {
    fn open(src: Ipv4Addr) -> Result<Self, String> {
        let listener = Self::bind(src)?;
        let fd = match &listener {
            Self::Udp(s) => std::os::fd::AsRawFd::as_raw_fd(s),
            Self::Raw(fd, _) => *fd,
        };
        // SAFETY: `fd` is a live socket; the value is a c_int of the
        // length given. SOL_SOCKET 1, SO_RCVBUFFORCE 33 (root: beyond
        // rmem_max).
        let ret = unsafe {
            setsockopt(
                fd,
                1,
                33,
                (&LISTEN_RCVBUF as *const c_int).cast(),
                std::mem::size_of::<c_int>() as u32,
            )
        };
        if ret != 0 {
            return Err(format!(
                "setsockopt(SO_RCVBUFFORCE): {}",
                std::io::Error::last_os_error()
            ));
        }
        Ok(listener)
    }

    fn bind(src: Ipv4Addr) -> Result<Self, String> {
        match std::net::UdpSocket::bind((src, ROCE_V2_UDP_PORT)) {
            Ok(s) => Ok(Self::Udp(s)),
            Err(e) if e.kind() == std::io::ErrorKind::AddrInUse => {
                // SAFETY: plain system call with integer arguments.
                let fd = unsafe { socket(AF_INET, SOCK_RAW, c_int::from(IPPROTO_UDP)) };
                if fd < 0 {
                    return Err(format!(
                        "socket(AF_INET, SOCK_RAW, IPPROTO_UDP): {}",
                        std::io::Error::last_os_error()
                    ));
                }
                Ok(Self::Raw(fd, src))
            }
            Err(e) => Err(format!("bind {src}:{ROCE_V2_UDP_PORT}: {e}")),
        }
    }

    /// The next RoCE packet (BTH on) to UDP 4791 at the source address
    /// within `left`, as its range in `buf`.
    fn recv(&self, buf: &mut [u8], left: Duration) -> Option<core::ops::Range<usize>> {
        match self {
            Self::Udp(s) => {
                s.set_read_timeout(Some(left)).ok()?;
                s.recv(buf).ok().map(|n| 0..n)
            }
            Self::Raw(fd, src) => {
                let tv = [
                    left.as_secs() as i64,
                    i64::from(left.subsec_micros().max(1)),
                ];
                // SAFETY: `tv` is a live struct timeval (two longs) of the
                // length given. SOL_SOCKET 1, SO_RCVTIMEO 20.
                unsafe {
                    setsockopt(
                        *fd,
                        1,
                        20,
                        tv.as_ptr().cast(),
                        std::mem::size_of_val(&tv) as u32,
                    )
                };
                // SAFETY: `buf` is live and writable for its length.
                let n = unsafe { recv(*fd, buf.as_mut_ptr().cast(), buf.len(), 0) };
                let n = usize::try_from(n).ok()?;
                let d = buf.get(..n)?;
                let ihl = usize::from(d.first()? & 0xf) * 4;
                let udp = d.get(ihl..ihl + UDP_HEADER_LEN)?;
                let to_us = d.get(16..20)? == src.octets()
                    && u16::from_be_bytes([udp[2], udp[3]]) == ROCE_V2_UDP_PORT;
                to_us.then_some(ihl + UDP_HEADER_LEN..n)
            }
        }
    }
}

impl Drop for Listener {
    fn drop(&mut self) {
        if let Self::Raw(fd, _) = self {
            // SAFETY: our own descriptor, closed once.
            unsafe { close(*fd) };
        }
    }
}

/// A raw IPv4 socket that sends datagrams with their own IP header.
struct RawSocket(c_int);

impl RawSocket {
    fn open() -> Result<Self, String> {
        let err = |what: &str| {
            format!(
                "{what}: {} (sending needs root or CAP_NET_RAW)",
                std::io::Error::last_os_error()
            )
        };
        // SAFETY: plain system call with integer arguments.
        let fd = unsafe { socket(AF_INET, SOCK_RAW, IPPROTO_RAW) };
        if fd < 0 {
            return Err(err("socket(AF_INET, SOCK_RAW, IPPROTO_RAW)"));
        }
        let sock = Self(fd);
        // IPPROTO_RAW implies IP_HDRINCL; said explicitly, since every
        // header byte must be ours for the ICRC to hold.
        let on: c_int = 1;
        // SAFETY: `on` is a live c_int and the length given is its size.
        let r = unsafe {
            setsockopt(
                fd,
                IPPROTO_IP,
                IP_HDRINCL,
                (&on as *const c_int).cast(),
                std::mem::size_of::<c_int>() as u32,
            )
        };
        if r < 0 {
            return Err(err("setsockopt(IP_HDRINCL)"));
        }
        Ok(sock)
    }

    fn send_to(&self, datagram: &[u8], dst: Ipv4Addr) -> Result<(), String> {
        let to = SockaddrIn {
            sin_family: AF_INET as u16,
            sin_port: 0,
            sin_addr: u32::from_ne_bytes(dst.octets()),
            sin_zero: [0; 8],
        };
        // SAFETY: the buffer and the address are live for the call and
        // their lengths are the ones given.
        let n = unsafe {
            sendto(
                self.0,
                datagram.as_ptr().cast(),
                datagram.len(),
                0,
                &to,
                std::mem::size_of::<SockaddrIn>() as u32,
            )
        };
        if n != datagram.len() as isize {
            return Err(format!("sendto {dst}: {}", std::io::Error::last_os_error()));
        }
        Ok(())
    }
}

impl Drop for RawSocket {
    fn drop(&mut self) {
        // SAFETY: the descriptor is ours and closed only here.
        unsafe { close(self.0) };
    }
}

/// Builds each peer's packet, then sends them all `repeat` times over
/// (round after round, so copies arrive as retransmissions would).
/// Returns how many packets went out.
fn run(a: &Args) -> Result<u64, String> {
    if a.cnp {
        let sock = RawSocket::open()?;
        for i in 0..a.repeat {
            if i > 0 && a.gap_us > 0 {
                std::thread::sleep(Duration::from_micros(a.gap_us));
            }
            let d = build_cnp(a.src, a.dst, a.sport, (i % 0xffff) as u16 + 1, a.qpn)?;
            sock.send_to(&d, a.dst)?;
        }
        return Ok(u64::from(a.repeat));
    }
    let mut rng = Rng::from_time();
    let psn = Psn::new(a.psn.unwrap_or(rng.next() as u32));
    let (opcode, va, rkey) = if a.send {
        (Opcode::XUD_SEND, 0, 0)
    } else {
        (Opcode::XUD_RDMA_WRITE, a.va, a.rkey)
    };
    let streams: Vec<u64> = (0..a.peers)
        .map(|_| a.stream.unwrap_or_else(|| rng.nonzero()))
        .collect();
    let mut cookies: BTreeMap<u32, Cookie> = match &a.cookies {
        Some(path) => load_cookies(path)?,
        None => BTreeMap::new(),
    };
    // Each source sends `msgs` messages of its one stream.
    let build_all = |cookies: &BTreeMap<u32, Cookie>, rng: &mut Rng| {
        (0..a.peers)
            .flat_map(|i| (0..a.msgs).map(move |m| (i, m)))
            .map(|(i, m)| {
                let payload: Vec<u8> = (0..a.len).map(|k| i.wrapping_add(k) as u8).collect();
                let src_qpn = a.first_src_qpn + i;
                let cookie = if a.fake_cookie {
                    Cookie::new(rng.next() as u32, rng.next())
                } else {
                    cookies.get(&src_qpn).copied().unwrap_or(Cookie::NONE)
                };
                build(&Forged {
                    src: a.src,
                    dst: a.dst,
                    sport: a.sport,
                    ip_id: (i % 0xffff) as u16 + 1,
                    opcode,
                    dest_qpn: a.qpn,
                    src_qpn,
                    qkey: a.qkey,
                    psn: psn.add(m),
                    stream: streams[i as usize],
                    peer_inc: a.peer_inc,
                    va,
                    rkey,
                    cookie,
                    msg_seq: m,
                    dma_len: a.dma_len.unwrap_or(a.len),
                    oldest_psn: psn,
                    payload: &payload,
                })
            })
            .collect::<Result<Vec<_>, _>>()
    };
    let sock = RawSocket::open()?;
    let mut sent = 0u64;
    if a.handshake {
        // Listen where the challenges go (the source address), then send
        // each packet once without a cookie, paced as the packets after
        // (the receiver challenges at most 64 a millisecond).
        let listen = Listener::open(a.src)?;
        for d in build_all(&cookies, &mut rng)? {
            if sent > 0 && a.gap_us > 0 {
                std::thread::sleep(Duration::from_micros(a.gap_us));
            }
            sock.send_to(&d, a.dst)?;
            sent += 1;
        }
        cookies = challenges(&listen, a, &streams)?;
        if let Some(path) = &a.save_cookies {
            save_cookies(path, &cookies)?;
        }
    }
    let datagrams = build_all(&cookies, &mut rng)?;
    for _ in 0..a.repeat {
        for d in &datagrams {
            if sent > 0 && a.gap_us > 0 {
                std::thread::sleep(Duration::from_micros(a.gap_us));
            }
            sock.send_to(d, a.dst)?;
            sent += 1;
        }
    }
    Ok(sent)
}

/// Takes the challenge of each source's stream from `listen` (2 s at
/// most): its cookie, by source QPN.
fn challenges(
    listen: &Listener,
    a: &Args,
    streams: &[u64],
) -> Result<BTreeMap<u32, Cookie>, String> {
    let deadline = std::time::Instant::now() + Duration::from_secs(2);
    let mut got = BTreeMap::new();
    let mut buf = [0u8; 2048];
    while got.len() < streams.len() {
        let left = deadline.saturating_duration_since(std::time::Instant::now());
        if left.is_zero() {
            return Err(format!(
                "{} of {} challenges came within 2 s",
                got.len(),
                streams.len()
            ));
        }
        let Some(r) = listen.recv(&mut buf, left) else {
            continue;
        };
        let Ok(p) = packet::Packet::new_checked(&buf[r]) else {
            continue;
        };
        if p.opcode() != Opcode::XUD_CHALLENGE {
            continue;
        }
        let Ok(r) = packet::Repr::parse(&p) else {
            continue;
        };
        let (Some(x), Some(c)) = (r.xack, r.xck) else {
            continue;
        };
        let qpn = r.bth.dest_qp;
        let Some(i) = qpn.checked_sub(a.first_src_qpn) else {
            continue;
        };
        if streams.get(i as usize) == Some(&x.stream) {
            got.insert(qpn, c.cookie);
        }
    }
    Ok(got)
}

/// Writes `cookies`, one line per source QPN: `qpn time mac`.
fn save_cookies(path: &str, cookies: &BTreeMap<u32, Cookie>) -> Result<(), String> {
    let text: String = cookies
        .iter()
        .map(|(q, c)| format!("{q:#x} {:#x} {:#x}\n", c.time(), c.mac()))
        .collect();
    std::fs::write(path, text).map_err(|e| format!("{path}: {e}"))
}

/// Reads what [`save_cookies`] wrote.
fn load_cookies(path: &str) -> Result<BTreeMap<u32, Cookie>, String> {
    let text = std::fs::read_to_string(path).map_err(|e| format!("{path}: {e}"))?;
    let hex = |v: &str| {
        u64::from_str_radix(v.trim_start_matches("0x"), 16)
            .map_err(|_| format!("{path}: '{v}' is not a hexadecimal number"))
    };
    let mut out = BTreeMap::new();
    for line in text.lines() {
        let f: Vec<&str> = line.split_whitespace().collect();
        let [q, t, m] = f[..] else {
            return Err(format!("{path}: bad line '{line}'"));
        };
        out.insert(hex(q)? as u32, Cookie::new(hex(t)? as u32, hex(m)?));
    }
    Ok(out)
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.iter().any(|a| a == "-h" || a == "--help") {
        println!("{USAGE}");
        return ExitCode::SUCCESS;
    }
    let a = match parse_args(args.into_iter()) {
        Ok(a) => a,
        Err(e) => {
            eprintln!("xud-forge: {e}\n{USAGE}");
            return ExitCode::from(1);
        }
    };
    match run(&a) {
        Ok(sent) => {
            println!(
                "xud-forge: sent {sent} packets ({} bytes each) from source QPNs {:#x}..{:#x} \
                 to QPN {:#x}",
                a.len,
                a.first_src_qpn,
                a.first_src_qpn + a.peers - 1,
                a.qpn
            );
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("xud-forge: {e}");
            ExitCode::from(1)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rxud_proto::wire::icrc::{icrc_check, IpUdp};
    use rxud_proto::wire::packet::{Packet, Repr};
    use rxud_proto::wire::Error;

    fn forged(opcode: Opcode, payload: &[u8]) -> Forged<'_> {
        Forged {
            src: Ipv4Addr::new(10, 0, 0, 1),
            dst: Ipv4Addr::new(10, 0, 0, 2),
            sport: 49152,
            ip_id: 7,
            opcode,
            dest_qpn: 0x00ab_cdef,
            src_qpn: 0x123,
            qkey: 0x1111_1111,
            psn: Psn::new(0x00fe_dcba),
            stream: 0x0102_0304_0506_0708,
            peer_inc: 0x0bad_f00d,
            va: 0x7f00_1234_5678,
            rkey: 0x4321,
            cookie: Cookie::new(0x0102_0304, 0x0506_0708_090a_0b0c),
            msg_seq: 0,
            dma_len: payload.len() as u32,
            oldest_psn: Psn::new(0x00fe_dcba),
            payload,
        }
    }

    /// What the driver reads back from a built packet is what was put in,
    /// and its ICRC checks.
    #[test]
    fn a_forged_cnp_is_one_rxud_takes_as_a_cnp() {
        let src = Ipv4Addr::new(169, 254, 225, 3);
        let dst = Ipv4Addr::new(169, 254, 225, 2);
        let d = build_cnp(src, dst, 49152, 7, 0x12).unwrap();
        assert_eq!(d.len(), IPV4_HEADER_LEN + UDP_HEADER_LEN + cnp::PACKET_LEN);
        icrc_check(&d).unwrap();
        let roce = &d[IPV4_HEADER_LEN + UDP_HEADER_LEN..];
        assert_eq!(cnp::check(roce, roce.len()), Ok(0x12));
        let a = parse_args(
            [
                "--src", "1.2.3.4", "--dst", "5.6.7.8", "--qpn", "9", "--qkey", "0", "--cnp",
            ]
            .iter()
            .map(|s| s.to_string()),
        )
        .unwrap();
        assert!(a.cnp);
    }

    #[test]
    fn built_packets_parse_back() {
        let payload: Vec<u8> = (0..13u8).collect(); // odd: 3 pad bytes
        for (opcode, payload) in [
            (Opcode::XUD_RDMA_WRITE, &payload[..]),
            (Opcode::XUD_SEND, &payload[..4]),
        ] {
            let f = forged(opcode, payload);
            let buf = build(&f).unwrap();
            assert_eq!(icrc_check(&buf), Ok(()));
            let ip = IpUdp::parse(&buf).unwrap();
            assert_eq!(ip.datagram_len(), buf.len());
            assert_eq!(&buf[4..6], &[0, 7], "IP ID");
            assert_eq!((buf[6], buf[8], buf[9]), (0x40, 64, 17), "DF, TTL, UDP");
            assert_eq!(&buf[12..20], &[10, 0, 0, 1, 10, 0, 0, 2]);
            assert_eq!(&buf[22..24], &4791u16.to_be_bytes());
            let p = Packet::new_checked(&buf[ip.udp_payload()]).unwrap();
            let r = Repr::parse(&p).unwrap();
            assert_eq!(p.opcode(), opcode);
            assert_eq!(r.bth.dest_qp, 0x00ab_cdef);
            assert!(r.bth.ack_req);
            assert_eq!(r.bth.psn, f.psn);
            let d = r.deth.unwrap();
            assert_eq!((d.src_qp, d.qkey), (0x123, 0x1111_1111));
            let x = r.xeth.unwrap();
            assert_eq!(x.stream, 0x0102_0304_0506_0708);
            assert_eq!((x.peer_inc, x.msg_seq, x.msg_lag), (0x0bad_f00d, 0, 0));
            assert_eq!(x.oldest_psn, f.psn);
            assert_eq!(r.xck.unwrap().cookie, f.cookie);
            let rh = r.reth.unwrap();
            assert_eq!((rh.va, rh.rkey), (0x7f00_1234_5678, 0x4321));
            assert_eq!(rh.dma_len as usize, payload.len());
            assert_eq!(p.payload(), payload);
        }
    }

    /// A partial SEND: the first packet of message 3 of a longer message,
    /// the stream's oldest PSN three before it.
    #[test]
    fn a_partial_send_names_its_message_and_length() {
        let mut f = forged(Opcode::XUD_SEND, &[9; 64]);
        f.msg_seq = 3;
        f.dma_len = 200;
        f.oldest_psn = f.psn.add(0u32.wrapping_sub(3));
        let buf = build(&f).unwrap();
        let ip = IpUdp::parse(&buf).unwrap();
        let p = Packet::new_checked(&buf[ip.udp_payload()]).unwrap();
        let r = Repr::parse(&p).unwrap();
        let x = r.xeth.unwrap();
        assert_eq!((x.msg_seq, x.msg_lag, x.oldest_msg()), (3, 3, 0));
        assert_eq!(x.oldest_psn, f.oldest_psn);
        assert_eq!(r.reth.unwrap().dma_len, 200);
        assert_eq!(p.payload().len(), 64);
        let args = |s: &str| parse_args(s.split_whitespace().map(String::from));
        let base = "--src 1.2.3.4 --dst 5.6.7.8 --qpn 18 --qkey 1 --send --len 64";
        let a = args(&format!("{base} --dma-len 200 --msgs 4")).unwrap();
        assert_eq!((a.dma_len, a.msgs), (Some(200), 4));
        assert!(args(&format!("{base} --dma-len 10")).is_err());
        assert!(args(&format!("{base} --msgs 17")).is_err());
    }

    /// The fields the kernel writes into a raw socket's header (checksum)
    /// and routers change (TTL) are masked; the ones set here are covered.
    #[test]
    fn icrc_masks_only_what_the_network_changes() {
        let mut buf = build(&forged(Opcode::XUD_RDMA_WRITE, &[1, 2, 3, 4])).unwrap();
        buf[8] = 1; // TTL
        buf[10..12].copy_from_slice(&[0xab, 0xcd]); // IP checksum
        assert_eq!(icrc_check(&buf), Ok(()));
        for at in [4, 12, 20, 28 + 15, buf.len() - 5] {
            let mut b = buf.clone();
            b[at] ^= 1;
            assert!(
                matches!(icrc_check(&b), Err(Error::IcrcMismatch { .. })),
                "byte {at}"
            );
        }
    }

    #[test]
    fn saved_cookies_read_back() {
        let path = std::env::temp_dir().join(format!("xud-forge-test-{}", std::process::id()));
        let path = path.to_str().unwrap();
        let c: BTreeMap<u32, Cookie> = [
            (0x1000, Cookie::new(7, u64::MAX)),
            (0x1001, Cookie::new(u32::MAX, 1)),
        ]
        .into();
        save_cookies(path, &c).unwrap();
        assert_eq!(load_cookies(path), Ok(c));
        std::fs::remove_file(path).unwrap();
    }

    #[test]
    fn parses_arguments() {
        let args = |s: &str| parse_args(s.split_whitespace().map(String::from));
        let a = args("--src 10.0.0.1 --dst 10.0.0.2 --qpn 0x12 --qkey 0x11111111").unwrap();
        assert_eq!((a.qpn, a.qkey, a.len, a.peers), (0x12, 0x1111_1111, 64, 1));
        assert_eq!((a.first_src_qpn, a.repeat, a.sport), (0x100, 1, 49152));
        assert!(!a.send && a.stream.is_none() && a.psn.is_none());
        let a = args(
            "--src 1.2.3.4 --dst 5.6.7.8 --qpn 18 --qkey 1 --send --peers 5 --repeat 2 \
             --stream 9 --psn 0xffffff --rkey 3 --va 0x1000 --len 0 --peer-inc 0xfeed",
        )
        .unwrap();
        assert!(a.send);
        assert_eq!(a.peer_inc, 0xfeed);
        assert_eq!((a.qpn, a.peers, a.repeat, a.stream), (18, 5, 2, Some(9)));
        assert_eq!(
            (a.psn, a.rkey, a.va, a.len),
            (Some(0xff_ffff), 3, 0x1000, 0)
        );
        for bad in [
            "--dst 10.0.0.2 --qpn 1 --qkey 1",
            "--src 10.0.0 --dst 10.0.0.2 --qpn 1 --qkey 1",
            "--src 10.0.0.1 --dst 10.0.0.2 --qpn 0x1000000 --qkey 1",
            "--src 10.0.0.1 --dst 10.0.0.2 --qpn 1 --qkey 1 --peers 0",
            "--src 10.0.0.1 --dst 10.0.0.2 --qpn 1 --qkey 1 --stream 0",
            "--src 10.0.0.1 --dst 10.0.0.2 --qpn 1 --qkey 1 --sport 70000",
            "--src 10.0.0.1 --dst 10.0.0.2 --qpn 1 --qkey 1 --peer-inc 0x100000000",
            "--src 10.0.0.1 --dst 10.0.0.2 --qpn 1 --qkey 1 --len",
            "--src 10.0.0.1 --dst 10.0.0.2 --qpn 1 --qkey 1 --bogus 1",
            "--src 10.0.0.1 --dst 10.0.0.2 --qpn 1 --qkey 1 --handshake --fake-cookie",
            "--src 10.0.0.1 --dst 10.0.0.2 --qpn 1 --qkey 1 --save-cookies /tmp/x",
        ] {
            assert!(args(bad).is_err(), "{bad}");
        }
    }
}
