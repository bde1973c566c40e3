// SPDX-License-Identifier: GPL-2.0

//! A model of [`Window`]'s law: N flows through one bottleneck.
//!
//! Time goes in ticks, one packet's time on the bottleneck link. Each
//! sender's own link is as fast (it sends at most a packet per tick), so
//! N of them can offer N times what the bottleneck drains: incast. A
//! packet reaches the bottleneck's queue `delay` ticks after it is sent;
//! a full queue drops it, one longer than `mark_at` marks it CE (ECN). The
//! queue drains a packet per tick to the receiver, `delay` ticks on, whose
//! answer reaches the sender `delay` ticks later: an ACK, a NAK for a
//! packet the sender learns was dropped (a gap), and a CNP when the packet
//! was marked and the flow had none for `cnp_interval` ticks (as rxud's
//! receiver rate-limits them). Losses are resent selectively (XUD's
//! recovery; RC goes back N, which a model of the law need not copy): a
//! resend is a packet like any other.
//!
//! Measured over the second half of the run: each flow's goodput, the
//! bottleneck's use, Jain's fairness index, the share of packets sent
//! that were resends, the queue's mean and peak.

use super::super::xud as crate_xud;
use super::{Loss, Window};
use std::collections::VecDeque;
use std::vec::Vec;

#[derive(Clone, Copy)]
struct Params {
    flows: usize,
    ticks: u64,
    /// Flow `i` starts at `i * start_gap`.
    start_gap: u64,
    /// One way, each hop (sender to queue, queue to receiver, back).
    delay: u64,
    /// Queue length from which arriving packets are marked; None: a
    /// drop-tail queue that never marks.
    mark_at: Option<usize>,
    qmax: usize,
    cnp_interval: u64,
    min_window: u32,
    max_window: u32,
    /// Whether the senders follow the law (else each keeps `max_window`).
    control: bool,
    /// Losses per mille of a round taken for noise.
    tolerance: u32,
}

impl Params {
    const fn incast(flows: usize) -> Self {
        Self {
            flows,
            ticks: 400_000,
            start_gap: 2_000,
            delay: 5,
            mark_at: Some(24),
            qmax: 256,
            // 50 us at 10 Gb/s of 1 KB packets: about 60 packets' time.
            cnp_interval: 60,
            min_window: crate_xud::MIN_WINDOW,
            // XUD's stream: its pipe, its floor and its loss tolerance.
            max_window: crate_xud::PIPE,
            control: true,
            tolerance: crate_xud::LOSS_TOLERANCE,
        }
    }
}

#[derive(Clone, Copy)]
struct Packet {
    flow: usize,
    marked: bool,
}

#[derive(Clone, Copy)]
enum Answer {
    Ack,
    Nak,
    Cnp,
}

struct Sender {
    window: Window,
    in_flight: u32,
    /// Resends owed (packets the sender learned were dropped).
    owed: u32,
}

#[derive(Debug)]
struct Outcome {
    goodput: Vec<u64>,
    measured_ticks: u64,
    sent: u64,
    resent: u64,
    queue_mean: f64,
    queue_peak: usize,
    cnps: u64,
}

impl Outcome {
    fn utilisation(&self) -> f64 {
        self.goodput.iter().sum::<u64>() as f64 / self.measured_ticks as f64
    }

    fn jain(&self) -> f64 {
        let sum: f64 = self.goodput.iter().map(|&g| g as f64).sum();
        let squares: f64 = self.goodput.iter().map(|&g| (g as f64) * (g as f64)).sum();
        sum * sum / (self.goodput.len() as f64 * squares)
    }

    fn resent_share(&self) -> f64 {
        self.resent as f64 / self.sent.max(1) as f64
    }
}

fn run(p: Params) -> Outcome {
    let mut senders: Vec<Sender> = (0..p.flows)
        .map(|_| Sender {
            window: Window::new(p.min_window, p.max_window).with_loss_tolerance(p.tolerance),
            in_flight: 0,
            owed: 0,
        })
        .collect();
    let mut last_cnp: Vec<Option<u64>> = (0..p.flows).map(|_| None).collect();
    // Every hop has the same delay, so each of these is in time order.
    let mut to_queue: VecDeque<(u64, Packet)> = VecDeque::new();
    let mut queue: VecDeque<Packet> = VecDeque::new();
    let mut to_sender: VecDeque<(u64, usize, Answer)> = VecDeque::new();
    let from = p.ticks / 2;
    let mut out = Outcome {
        goodput: (0..p.flows).map(|_| 0).collect(),
        measured_ticks: p.ticks - from,
        sent: 0,
        resent: 0,
        queue_mean: 0.0,
        queue_peak: 0,
        cnps: 0,
    };
    let mut queue_sum = 0u64;
    for t in 0..p.ticks {
        while let Some(&(at, flow, answer)) = to_sender.front() {
            if at > t {
                break;
            }
            to_sender.pop_front();
            let s = &mut senders[flow];
            match answer {
                Answer::Ack => {
                    s.in_flight -= 1;
                    if p.control {
                        s.window.on_answered(1);
                    }
                }
                Answer::Nak => {
                    s.in_flight -= 1;
                    s.owed += 1;
                    if p.control {
                        s.window.on_loss(Loss::Gap(1));
                    }
                }
                Answer::Cnp => {
                    if p.control {
                        s.window.on_cnp();
                    }
                }
            }
        }
        // Each started sender puts at most one packet on its link; their
        // packets reach the queue in an order that turns each tick (a
        // fixed order would hand every freed slot of a full queue to the
        // first flows, a lock-out of the model's making).
        for k in 0..p.flows {
            let flow = (k + t as usize) % p.flows;
            let s = &mut senders[flow];
            if t < flow as u64 * p.start_gap || !s.window.allows(s.in_flight) {
                continue;
            }
            s.in_flight += 1;
            if s.owed > 0 {
                s.owed -= 1;
                if t >= from {
                    out.resent += 1;
                }
            }
            if t >= from {
                out.sent += 1;
            }
            to_queue.push_back((
                t + p.delay,
                Packet {
                    flow,
                    marked: false,
                },
            ));
        }
        while let Some(&(at, mut pkt)) = to_queue.front() {
            if at > t {
                break;
            }
            to_queue.pop_front();
            if queue.len() >= p.qmax {
                // The sender learns of the drop when the packets behind it
                // arrive: about when its answer would have come.
                to_sender.push_back((t + 2 * p.delay, pkt.flow, Answer::Nak));
                continue;
            }
            pkt.marked = p.mark_at.is_some_and(|k| queue.len() >= k);
            queue.push_back(pkt);
        }
        out.queue_peak = out.queue_peak.max(queue.len());
        if t >= from {
            queue_sum += queue.len() as u64;
        }
        if let Some(pkt) = queue.pop_front() {
            let back = t + 2 * p.delay;
            if t >= from {
                out.goodput[pkt.flow] += 1;
            }
            to_sender.push_back((back, pkt.flow, Answer::Ack));
            if pkt.marked && last_cnp[pkt.flow].is_none_or(|l| t - l >= p.cnp_interval) {
                last_cnp[pkt.flow] = Some(t);
                out.cnps += 1;
                to_sender.push_back((back, pkt.flow, Answer::Cnp));
            }
        }
    }
    out.queue_mean = queue_sum as f64 / out.measured_ticks as f64;
    out
}

#[test]
fn with_marking_n_flows_share_the_bottleneck_fairly_and_keep_it_full() {
    for flows in [2, 8, 32] {
        let o = run(Params::incast(flows));
        std::println!(
            "ECN, {flows} flows: use {:.3}, Jain {:.3}, resent {:.4}, queue mean {:.1} peak {}, CNPs {}",
            o.utilisation(),
            o.jain(),
            o.resent_share(),
            o.queue_mean,
            o.queue_peak,
            o.cnps
        );
        assert!(
            o.utilisation() >= 0.9,
            "{flows} flows: use {:.3}",
            o.utilisation()
        );
        assert!(o.jain() >= 0.9, "{flows} flows: Jain {:.3}", o.jain());
        assert!(
            o.resent_share() < 0.05,
            "{flows} flows: resent {:.4}",
            o.resent_share()
        );
        // Marking keeps the queue short: the point of ECN over loss.
        assert!(
            o.queue_mean < 64.0,
            "{flows} flows: queue mean {:.1}",
            o.queue_mean
        );
        assert!(o.cnps > 0);
    }
}

#[test]
fn without_marking_losses_alone_share_the_bottleneck() {
    for flows in [2, 8, 32] {
        let o = run(Params {
            mark_at: None,
            ..Params::incast(flows)
        });
        std::println!(
            "drop-tail, {flows} flows: use {:.3}, Jain {:.3}, resent {:.4}, queue mean {:.1} peak {}",
            o.utilisation(),
            o.jain(),
            o.resent_share(),
            o.queue_mean,
            o.queue_peak
        );
        assert!(
            o.utilisation() >= 0.9,
            "{flows} flows: use {:.3}",
            o.utilisation()
        );
        assert!(
            o.jain() >= 0.8,
            "{flows} flows: Jain {:.3} {:?}",
            o.jain(),
            o.goodput
        );
        assert_eq!(o.cnps, 0);
    }
}

#[test]
fn without_the_law_the_queue_stays_full_and_resends_grow() {
    // The comparison the module parameter gives: fixed windows of 128.
    let on = run(Params::incast(32));
    let off = run(Params {
        control: false,
        ..Params::incast(32)
    });
    std::println!(
        "32 flows, law off: use {:.3}, Jain {:.3}, resent {:.4}, queue mean {:.1}",
        off.utilisation(),
        off.jain(),
        off.resent_share(),
        off.queue_mean
    );
    assert!(off.queue_mean > 4.0 * on.queue_mean.max(1.0));
    assert!(off.resent_share() > 10.0 * on.resent_share().max(0.001));
}
