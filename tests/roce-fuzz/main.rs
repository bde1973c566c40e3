// SPDX-License-Identifier: GPL-2.0

//! roce-fuzz: crafted RoCEv2 packets at an rxud device's UDP port 4791,
//! for `make soak` (qemu/soak.sh) and its short version in make check
//! (tests/guest/22-soak.sh). Every BTH opcode (RC, UC, UD, XUD, and bytes
//! no transport has), truncations at every header boundary, lying RETH,
//! AETH, pad counts and lengths, good-ICRC packets and their bad-ICRC
//! twins, the device's live QPNs and the PSNs they expect, IPv4 and IPv6,
//! and lies at the IP level (lengths, options, fragments, checksums):
//! forge.rs says how. Sent as Ethernet frames from the other end of the
//! device's veth (link.rs).
//!
//! The targets are re-read every `--refresh` packets: the output of
//! `--qps-cmd` (`rdma resource show qp link DEV/1`) and the victims file
//! tests/verbs/ring-storm writes (targets.rs). The seed is printed; the
//! same seed replays the same choices (the targets are whatever is alive).
//!
//!   roce-fuzz --ifname IF --src-mac MAC --dst-mac MAC --src A.B.C.D
//!             --dst A.B.C.D [--src6 ADDR --dst6 ADDR] --count N
//!             [--seed S] [--qps-cmd CMD] [--victims FILE] [--refresh K]
//!             [--seconds S]
//!
//! `--seconds`: stop after that long (checked every 32 packets) even if
//! fewer than `--count` packets went out, and say so.

mod forge;
mod link;
mod targets;

use std::collections::BTreeMap;
use std::net::{Ipv4Addr, Ipv6Addr};
use std::process::{Command, ExitCode};
use std::time::{Instant, SystemTime, UNIX_EPOCH};

use forge::{Addrs, Class, Rng};
use targets::{Kind, Target};

const USAGE: &str = "usage: roce-fuzz --ifname IF --src-mac MAC --dst-mac MAC --src A.B.C.D \
--dst A.B.C.D [--src6 ADDR --dst6 ADDR] --count N [--seed S] [--qps-cmd CMD] [--victims FILE] \
[--refresh K] [--seconds S]";

/// Frames sent with one system call.
const BATCH: usize = 32;

#[derive(Debug)]
struct Args {
    ifname: String,
    addrs: Addrs,
    count: u64,
    seed: u64,
    qps_cmd: Option<String>,
    victims: Option<String>,
    refresh: u64,
    /// Stop after this long even if `count` packets have not gone out.
    seconds: Option<u64>,
}

fn mac(s: &str) -> Result<[u8; 6], String> {
    let v: Vec<u8> = s
        .split(':')
        .map(|x| u8::from_str_radix(x, 16))
        .collect::<Result<_, _>>()
        .map_err(|_| format!("'{s}' is not a MAC address"))?;
    v.try_into()
        .map_err(|_| format!("'{s}' is not a MAC address"))
}

fn parse_args(mut it: impl Iterator<Item = String>) -> Result<Args, String> {
    let mut m: BTreeMap<String, String> = BTreeMap::new();
    while let Some(k) = it.next() {
        let v = it.next().ok_or_else(|| format!("{k}: value missing"))?;
        m.insert(k, v);
    }
    let mut take = |k: &str| m.remove(k);
    let need = |v: Option<String>, k: &str| v.ok_or_else(|| format!("{k} is required"));
    let ip4 = |s: String| {
        s.parse::<Ipv4Addr>()
            .map_err(|_| format!("'{s}': not IPv4"))
    };
    let ip6 = |s: String| {
        s.parse::<Ipv6Addr>()
            .map_err(|_| format!("'{s}': not IPv6"))
    };
    let num = |s: String| s.parse::<u64>().map_err(|_| format!("'{s}': not a number"));
    let v6 = match (take("--src6"), take("--dst6")) {
        (Some(s), Some(d)) => Some((ip6(s)?, ip6(d)?)),
        (None, None) => None,
        _ => return Err("--src6 and --dst6 go together".into()),
    };
    let a = Args {
        ifname: need(take("--ifname"), "--ifname")?,
        addrs: Addrs {
            src_mac: mac(&need(take("--src-mac"), "--src-mac")?)?,
            dst_mac: mac(&need(take("--dst-mac"), "--dst-mac")?)?,
            src4: ip4(need(take("--src"), "--src")?)?,
            dst4: ip4(need(take("--dst"), "--dst")?)?,
            v6,
        },
        count: num(need(take("--count"), "--count")?)?,
        seed: match take("--seed") {
            Some(s) => num(s)?,
            None => SystemTime::now()
                .duration_since(UNIX_EPOCH)
                .map_or(1, |d| d.as_nanos() as u64 & 0xffff_ffff),
        },
        qps_cmd: take("--qps-cmd"),
        victims: take("--victims"),
        refresh: take("--refresh")
            .map(num)
            .transpose()?
            .unwrap_or(2000)
            .max(1),
        seconds: take("--seconds").map(num).transpose()?,
    };
    if let Some(k) = m.keys().next() {
        return Err(format!("unknown option '{k}'"));
    }
    Ok(a)
}

/// The targets now: the listing's QPs with the victims merged in, and
/// some QPNs no QP has (0, 1, the largest, beyond the listing's).
fn read_targets(a: &Args) -> Vec<Target> {
    let qps = a
        .qps_cmd
        .as_ref()
        .and_then(|c| Command::new("sh").arg("-c").arg(c).output().ok())
        .map(|o| targets::parse_rdma_qps(&String::from_utf8_lossy(&o.stdout)))
        .unwrap_or_default();
    let victims = a
        .victims
        .as_ref()
        .and_then(|f| std::fs::read_to_string(f).ok())
        .map(|t| targets::parse_victims(&t))
        .unwrap_or_default();
    let mut t = targets::merge(qps, &victims);
    let top = t.iter().map(|q| q.qpn).max().unwrap_or(16);
    for qpn in [0, 1, 0xff_ffff, top + 1, top + 100] {
        if !t.iter().any(|q| q.qpn == qpn) {
            t.push(Target {
                qpn,
                kind: Kind::Other,
                rq_psn: None,
                sq_psn: None,
                victim: None,
            });
        }
    }
    t
}

fn run(a: &Args) -> Result<(), String> {
    println!(
        "roce-fuzz: seed {} (--seed {} replays it), {} packets",
        a.seed, a.seed, a.count
    );
    let link = link::Link::open(&a.ifname, a.addrs.dst_mac)?;
    let mut rng = Rng::new(a.seed);
    let t0 = Instant::now();
    let mut targets = read_targets(a);
    let (mut packets, mut frames, mut twins, mut refused, mut v6) = (0u64, 0u64, 0u64, 0u64, 0u64);
    let mut classes: BTreeMap<Class, u64> = BTreeMap::new();
    let mut opcodes = [0u64; 256];
    let (mut victim_hits, mut live_hits) = (0u64, 0u64);
    let mut batch: Vec<Vec<u8>> = Vec::with_capacity(BATCH + 4);
    let mut out_of_time = false;
    while packets < a.count {
        if packets % a.refresh == 0 && packets > 0 {
            targets = read_targets(a);
        }
        if packets % BATCH as u64 == 0 && a.seconds.is_some_and(|s| t0.elapsed().as_secs() >= s) {
            out_of_time = true;
            break;
        }
        // Victims (whose keys the fuzzer has) half the time, when any.
        let victims: Vec<&Target> = targets.iter().filter(|t| t.victim.is_some()).collect();
        let t = if !victims.is_empty() && rng.pct(50) {
            victim_hits += 1;
            *victims[rng.below(victims.len() as u64) as usize]
        } else {
            let t = targets[rng.below(targets.len() as u64) as usize];
            live_hits += u64::from(t.kind != Kind::Other);
            t
        };
        let c = forge::craft(&mut rng, &a.addrs, &t);
        twins += u64::from(c.twin.is_some());
        batch.extend(c.frames.into_iter().chain(c.twin));
        v6 += u64::from(c.v6);
        *classes.entry(c.class).or_default() += 1;
        opcodes[usize::from(c.opcode)] += 1;
        packets += 1;
        if batch.len() >= BATCH || packets == a.count || packets % a.refresh == 0 {
            let refs: Vec<&[u8]> = batch.iter().map(|f| &f[..]).collect();
            let (s, r) = link.send_all(&refs);
            (frames, refused) = (frames + s, refused + r);
            batch.clear();
        }
        if packets % 10_000 == 0 {
            println!(
                "roce-fuzz: {packets} packets, {frames} frames in {:.0} s",
                t0.elapsed().as_secs_f64()
            );
        }
    }
    // What the time budget cut off in the middle of a batch.
    if !batch.is_empty() {
        let refs: Vec<&[u8]> = batch.iter().map(|f| &f[..]).collect();
        let (s, r) = link.send_all(&refs);
        (frames, refused) = (frames + s, refused + r);
    }
    let secs = t0.elapsed().as_secs_f64();
    if out_of_time {
        println!(
            "roce-fuzz: stopped by its time budget ({} s) after {packets} of {} packets",
            a.seconds.unwrap_or(0),
            a.count
        );
    }
    let tally: Vec<String> = classes
        .iter()
        .map(|(c, n)| format!("{} {n}", c.name()))
        .collect();
    println!("roce-fuzz: classes: {}", tally.join(", "));
    println!(
        "roce-fuzz: {} opcodes used, {v6} over IPv6, {twins} bad-ICRC twins, {victim_hits} at victims, \
         {live_hits} at other live QPs, {} targets at the end",
        opcodes.iter().filter(|&&n| n > 0).count(),
        targets.len()
    );
    println!(
        "roce-fuzz: sent {packets} packets ({frames} frames, {refused} refused by the kernel) in {secs:.1} s, \
         seed {}",
        a.seed
    );
    if frames == 0 {
        return Err("no frame went out".into());
    }
    Ok(())
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
            eprintln!("roce-fuzz: {e}\n{USAGE}");
            return ExitCode::from(1);
        }
    };
    match run(&a) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("roce-fuzz: {e}");
            ExitCode::from(1)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_arguments() {
        let args = |s: &str| parse_args(s.split_whitespace().map(String::from));
        let a = args(
            "--ifname pv1 --src-mac 02:00:00:00:00:02 --dst-mac 02:00:00:00:00:01 \
             --src 10.0.0.3 --dst 10.0.0.1 --count 5 --seed 9",
        )
        .unwrap();
        assert_eq!((a.count, a.seed, a.refresh), (5, 9, 2000));
        assert_eq!(a.addrs.dst_mac, [2, 0, 0, 0, 0, 1]);
        assert!(a.addrs.v6.is_none());
        for bad in [
            "--ifname pv1",
            "--ifname pv1 --src-mac 02:00 --dst-mac 02:00:00:00:00:01 --src 1.2.3.4 --dst 1.2.3.4 --count 1",
            "--ifname pv1 --src-mac 02:00:00:00:00:02 --dst-mac 02:00:00:00:00:01 --src 1.2.3.4 --dst 1.2.3.4 --count 1 --src6 ::1",
            "--ifname pv1 --src-mac 02:00:00:00:00:02 --dst-mac 02:00:00:00:00:01 --src 1.2.3.4 --dst 1.2.3.4 --count 1 --bogus 1",
        ] {
            assert!(args(bad).is_err(), "{bad}");
        }
    }
}
