// SPDX-License-Identifier: GPL-2.0

//! What the fuzzer aims at: the QPs alive on the device under test, as
//! `rdma resource show qp` lists them (number, type, the PSNs it expects
//! and will send next), and the victims that tests/verbs/ring-storm made
//! for it: QPs whose peer is the fuzzer's own source address, whose
//! Q_Key, R_Key and memory it was told, so that its packets get past
//! every check a stranger's would fail and reach the placement code.
//!
//! QPs of live traffic are aimed at from an address that is not their
//! peer's and with keys that are not theirs: they must drop everything,
//! and their data must come through intact.

/// A QP's transport, as `rdma resource show qp` names it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    Rc,
    Uc,
    Ud,
    /// The GSI QP (QP1) and anything else with a Q_Key.
    Gsi,
    /// rxud's XUD QPs (`type` is a driver-specific number there).
    Xud,
    Other,
}

/// What the fuzzer may claim, for a QP whose peer it plays.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Victim {
    /// The QPN the victim is connected to (RC) or takes as a source.
    pub peer_qpn: u32,
    pub qkey: u32,
    pub rkey: u32,
    pub va: u64,
    pub len: u32,
}

/// One QP of the device under test.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Target {
    pub qpn: u32,
    pub kind: Kind,
    /// The next PSN the QP expects (its responder's), if listed.
    pub rq_psn: Option<u32>,
    /// The next PSN it sends (its requester's), if listed.
    pub sq_psn: Option<u32>,
    pub victim: Option<Victim>,
}

/// The value after `key` among whitespace-separated words.
fn word_after<'a>(words: &[&'a str], key: &str) -> Option<&'a str> {
    words
        .iter()
        .position(|w| *w == key)
        .and_then(|i| words.get(i + 1))
        .copied()
}

fn number(s: &str) -> Option<u64> {
    match s.strip_prefix("0x") {
        Some(h) => u64::from_str_radix(h, 16).ok(),
        None => s.parse().ok(),
    }
}

/// Parses `rdma resource show qp` (one QP a line: `link rxud0/1 lqpn 17
/// rqpn 18 type RC state RTS rq-psn 1234 sq-psn 5678 ...`).
pub fn parse_rdma_qps(text: &str) -> Vec<Target> {
    text.lines()
        .filter_map(|line| {
            let w: Vec<&str> = line.split_whitespace().collect();
            let qpn = number(word_after(&w, "lqpn")?)? as u32;
            let kind = match word_after(&w, "type").unwrap_or("") {
                "RC" => Kind::Rc,
                "UC" => Kind::Uc,
                "UD" => Kind::Ud,
                "GSI" | "SMI" => Kind::Gsi,
                // XUD is no type the rdma tool knows: it prints the
                // number, or (newer tools) "DRIVER".
                _ => Kind::Xud,
            };
            let psn = |k| {
                word_after(&w, k)
                    .and_then(number)
                    .map(|v| v as u32 & 0xff_ffff)
            };
            Some(Target {
                qpn,
                kind,
                rq_psn: psn("rq-psn"),
                sq_psn: psn("sq-psn"),
                victim: None,
            })
        })
        .collect()
}

/// Parses ring-storm's victims file: `victim rc|ud|xud qpn N peer-qpn R
/// qkey K rkey K va V len L` a line. Returns (QPN, kind, victim).
pub fn parse_victims(text: &str) -> Vec<(u32, Kind, Victim)> {
    text.lines()
        .filter_map(|line| {
            let w: Vec<&str> = line.split_whitespace().collect();
            if w.first() != Some(&"victim") {
                return None;
            }
            let kind = match *w.get(1)? {
                "rc" => Kind::Rc,
                "ud" => Kind::Ud,
                "xud" => Kind::Xud,
                _ => Kind::Other,
            };
            let n = |k| word_after(&w, k).and_then(number);
            Some((
                n("qpn")? as u32,
                kind,
                Victim {
                    peer_qpn: n("peer-qpn")? as u32,
                    qkey: n("qkey")? as u32,
                    rkey: n("rkey")? as u32,
                    va: n("va")?,
                    len: n("len")? as u32,
                },
            ))
        })
        .collect()
}

/// The QPs of `rdma` with the victims' details merged in (a victim the
/// listing missed is added: it may have been made since).
pub fn merge(mut qps: Vec<Target>, victims: &[(u32, Kind, Victim)]) -> Vec<Target> {
    for &(qpn, kind, v) in victims {
        match qps.iter_mut().find(|t| t.qpn == qpn) {
            Some(t) => t.victim = Some(v),
            None => qps.push(Target {
                qpn,
                kind,
                rq_psn: None,
                sq_psn: None,
                victim: Some(v),
            }),
        }
    }
    qps
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_the_rdma_tool_and_victims() {
        let text = "link rxud0/1 lqpn 1 type GSI state RTS sq-psn 0 comm [ib_core]\n\
            link rxud0/1 lqpn 17 rqpn 18 type RC state RTS rq-psn 11189063 sq-psn 5413813 \
            path-mig-state MIGRATED pdn 3 pid 245 comm data-test\n\
            link rxud0/1 lqpn 19 type UD state RTS sq-psn 0 pdn 4 pid 250 comm ring-storm\n\
            link rxud0/1 lqpn 20 type 4096 state RTS sq-psn 7 pdn 4 pid 250 comm xud-data\n\
            garbage line\n";
        let q = parse_rdma_qps(text);
        assert_eq!(q.len(), 4);
        assert_eq!((q[0].qpn, q[0].kind), (1, Kind::Gsi));
        assert_eq!(q[1].kind, Kind::Rc);
        assert_eq!((q[1].rq_psn, q[1].sq_psn), (Some(11189063), Some(5413813)));
        assert_eq!((q[2].kind, q[2].rq_psn), (Kind::Ud, None));
        assert_eq!(q[3].kind, Kind::Xud);
        let v = parse_victims(
            "victim ud qpn 19 peer-qpn 0x5eed qkey 0x5eed50a4 rkey 0x1234 va 0x7f0000001000 len 65536\n\
             victim rc qpn 33 peer-qpn 77 qkey 0 rkey 1 va 2 len 3\nnot a victim\n",
        );
        assert_eq!(v.len(), 2);
        assert_eq!(v[0].2.va, 0x7f00_0000_1000);
        let m = merge(q, &v);
        assert_eq!(m.len(), 5);
        assert_eq!(m[2].victim.unwrap().qkey, 0x5eed_50a4);
        assert_eq!((m[4].qpn, m[4].kind), (33, Kind::Rc));
    }
}
