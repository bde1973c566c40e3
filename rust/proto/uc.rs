// SPDX-License-Identifier: GPL-2.0

//! UC (unreliable connected, IBTA 9.8): RC's packets and PSNs without
//! acknowledgements, as two sans-IO halves like [`super::rc`].
//!
//! The [`Sender`] numbers the packets of each message (SEND or RDMA WRITE,
//! with or without immediate data: UC has no READ, atomics or
//! invalidation) and forgets them: a message completes once its last
//! packet is handed to IP.
//!
//! The [`Receiver`] accepts a message only whole and in order. A lost
//! packet loses its message: after a gap, or a packet that does not
//! continue the message in progress, packets are dropped until the next
//! one that starts a message (FIRST or ONLY), which is taken whatever its
//! PSN as long as it is not older than the last one seen (as rxe does). A
//! receive WQE taken by an abandoned SEND is not completed: the caller
//! keeps it for the next SEND (IBTA 9.8.3.1). Placement is two-phase as
//! for RC: [`Receiver::on_packet`] plans, the caller places, then
//! [`Receiver::commit`] or, if it could not place (no receive WQE, a bad
//! R_Key or bounds), [`Receiver::abandon`]: UC never answers, so the
//! message is silently lost.

use super::mtu::IbMtu;
use super::psn::Psn;
use super::rc::{chunk, packets, position, MsgKind};
use super::wire::opcode::{Opcode, Position, Transport};
use super::wire::reth;

/// The UC opcode of a packet at `pos` in a message of `kind`; `None` for
/// kinds UC does not have.
pub const fn opcode(kind: MsgKind, pos: Position) -> Option<Opcode> {
    use Position::*;
    Some(match (kind, pos) {
        (MsgKind::Send | MsgKind::SendImm, First) => Opcode::UC_SEND_FIRST,
        (MsgKind::Send | MsgKind::SendImm, Middle) => Opcode::UC_SEND_MIDDLE,
        (MsgKind::Send, Last) => Opcode::UC_SEND_LAST,
        (MsgKind::Send, Only) => Opcode::UC_SEND_ONLY,
        (MsgKind::SendImm, Last) => Opcode::UC_SEND_LAST_WITH_IMMEDIATE,
        (MsgKind::SendImm, Only) => Opcode::UC_SEND_ONLY_WITH_IMMEDIATE,
        (MsgKind::Write | MsgKind::WriteImm, First) => Opcode::UC_RDMA_WRITE_FIRST,
        (MsgKind::Write | MsgKind::WriteImm, Middle) => Opcode::UC_RDMA_WRITE_MIDDLE,
        (MsgKind::Write, Last) => Opcode::UC_RDMA_WRITE_LAST,
        (MsgKind::Write, Only) => Opcode::UC_RDMA_WRITE_ONLY,
        (MsgKind::WriteImm, Last) => Opcode::UC_RDMA_WRITE_LAST_WITH_IMMEDIATE,
        (MsgKind::WriteImm, Only) => Opcode::UC_RDMA_WRITE_ONLY_WITH_IMMEDIATE,
        _ => return None,
    })
}

/// The kind and position of a UC packet (FIRST and MIDDLE report plain
/// `Send`/`Write`, as for RC).
fn of_packet(op: Opcode) -> Option<(MsgKind, Position)> {
    let info = op.info().ok()?;
    if info.transport != Transport::Uc {
        return None;
    }
    let (kind, pos) = MsgKind::of_request(Opcode(op.0 & 0x1f))?;
    // UC's opcodes are RC's moved to another transport (0x20 apart) for
    // SEND and WRITE; anything else is not UC's.
    match kind {
        MsgKind::Send | MsgKind::SendImm | MsgKind::Write | MsgKind::WriteImm => Some((kind, pos)),
        _ => None,
    }
}

/// Why [`Sender::start`] refused a message.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StartError {
    /// UC has no READ, atomics or SEND with invalidate.
    Unsupported,
    /// Longer than 2^31 bytes.
    TooLong,
}

/// One packet of a message to transmit.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TxPacket {
    /// BTH PSN.
    pub psn: Psn,
    /// BTH opcode.
    pub opcode: Opcode,
    /// Byte offset of the payload in the message.
    pub offset: u32,
    /// Payload bytes.
    pub len: u32,
    /// RETH DMA length (WRITE FIRST/ONLY), else 0.
    pub dma_len: u32,
    /// The message's last packet.
    pub last: bool,
}

/// A message being sent: its packets are `packet(0..npkts())`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Message {
    first: Psn,
    npkts: u32,
    kind: MsgKind,
    len: u32,
    mtu: u32,
}

impl Message {
    /// Packets the message takes.
    pub fn npkts(&self) -> u32 {
        self.npkts
    }

    /// Packet `k` (`k < npkts()`).
    pub fn packet(&self, k: u32) -> TxPacket {
        let pos = position(k, self.npkts);
        let (offset, len) = chunk(self.len, self.mtu, k);
        let is_write = matches!(self.kind, MsgKind::Write | MsgKind::WriteImm);
        TxPacket {
            psn: self.first.add(k),
            // `start` admits only kinds with UC opcodes.
            opcode: opcode(self.kind, pos).unwrap_or(Opcode::UC_SEND_ONLY),
            offset,
            len,
            dma_len: if is_write && pos.starts_message() {
                self.len
            } else {
                0
            },
            last: pos.ends_message(),
        }
    }
}

/// The send side of a UC QP.
#[derive(Clone, Copy, Debug)]
pub struct Sender {
    next: Psn,
    mtu: u32,
}

impl Sender {
    /// A sender whose first PSN is `start` (the QP's `sq_psn`).
    pub fn new(start: Psn, mtu: IbMtu) -> Self {
        Self {
            next: start,
            mtu: mtu.bytes(),
        }
    }

    /// The PSN of the next packet (`sq_psn` for query_qp).
    pub fn next_psn(&self) -> Psn {
        self.next
    }

    /// Numbers the packets of a message of `kind` and `len` bytes.
    pub fn start(&mut self, kind: MsgKind, len: u32) -> Result<Message, StartError> {
        if opcode(kind, Position::Only).is_none() {
            return Err(StartError::Unsupported);
        }
        if len > super::rc::MAX_MSG_LEN {
            return Err(StartError::TooLong);
        }
        let npkts = packets(kind, len, self.mtu);
        let m = Message {
            first: self.next,
            npkts,
            kind,
            len,
            mtu: self.mtu,
        };
        self.next = self.next.add(npkts);
        Ok(m)
    }
}

/// A packet as the kernel parsed it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Request {
    /// BTH PSN.
    pub psn: Psn,
    /// BTH opcode.
    pub opcode: Opcode,
    /// Payload bytes.
    pub payload_len: u32,
    /// The RETH, if the opcode has one.
    pub reth: Option<reth::Repr>,
}

/// What to do with an accepted packet (compare `rc::Plan`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Plan {
    psn: Psn,
    base_va: u64,
    dma_len: u32,
    /// The packet's kind (FIRST and MIDDLE report plain `Send`/`Write`).
    pub kind: MsgKind,
    /// Where the packet sits in its message.
    pub position: Position,
    /// Byte offset of the payload in the message.
    pub offset: u32,
    /// Payload bytes.
    pub len: u32,
    /// WRITE: where this packet's payload goes.
    pub va: u64,
    /// WRITE: the R_Key to check `va..va + len` against.
    pub rkey: u32,
    /// Take a receive WQE first (SEND FIRST/ONLY, WRITE with immediate
    /// LAST/ONLY), unless one is held from an abandoned SEND.
    pub needs_recv: bool,
    /// The message ends here and completes the receive WQE.
    pub completes_recv: bool,
}

impl Plan {
    /// WRITE: the message's length, its RETH's DMA length; 0 for SENDs.
    pub fn write_len(&self) -> u32 {
        match self.kind {
            MsgKind::Write | MsgKind::WriteImm => self.dma_len,
            _ => 0,
        }
    }
}

/// How [`Receiver::on_packet`] classified a packet.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Action {
    /// Place it, then `commit` or `abandon`.
    Execute(Plan),
    /// Dropped (lost message, stale, malformed): count it.
    Drop,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct InMsg {
    write: bool,
    offset: u32,
    va: u64,
    rkey: u32,
    dma_len: u32,
}

/// The receive side of a UC QP.
#[derive(Clone, Copy, Debug)]
pub struct Receiver {
    epsn: Psn,
    mtu: u32,
    cur: Option<InMsg>,
}

impl Receiver {
    /// A receiver expecting `start` (the QP's `rq_psn`) first.
    pub fn new(start: Psn, mtu: IbMtu) -> Self {
        Self {
            epsn: start,
            mtu: mtu.bytes(),
            cur: None,
        }
    }

    /// The next PSN expected (`rq_psn` for query_qp).
    pub fn expected_psn(&self) -> Psn {
        self.epsn
    }

    /// Classifies a packet (see the module docs). A packet that is
    /// dropped still moves the expected PSN past it, and ends the message
    /// in progress.
    pub fn on_packet(&mut self, req: &Request) -> Action {
        let Some((kind, pos)) = of_packet(req.opcode) else {
            return Action::Drop;
        };
        if req.psn.before(self.epsn) {
            // Older than what was seen: a duplicate or a straggler.
            return Action::Drop;
        }
        if req.psn != self.epsn {
            // A gap: the message in progress lost a packet.
            self.cur = None;
        }
        let write = matches!(kind, MsgKind::Write | MsgKind::WriteImm);
        let plan = match (self.cur, pos.starts_message()) {
            (_, true) => self.start(req, kind, pos, write),
            (Some(m), false) if m.write == write => self.continue_msg(req, kind, pos, m),
            _ => None,
        };
        match plan {
            Some(p) => Action::Execute(p),
            None => {
                self.cur = None;
                self.epsn = req.psn.next();
                Action::Drop
            }
        }
    }

    fn start(&self, req: &Request, kind: MsgKind, pos: Position, write: bool) -> Option<Plan> {
        let n = req.payload_len;
        let fits = match pos {
            Position::First => n == self.mtu,
            _ => n <= self.mtu,
        };
        if !fits {
            return None;
        }
        let (va, rkey, dma_len) = if write {
            let r = req.reth?;
            // An ONLY packet carries the whole WRITE; a FIRST a full MTU
            // of a longer one.
            let ok = match pos {
                Position::Only => r.dma_len == n,
                _ => r.dma_len > n,
            };
            if !ok {
                return None;
            }
            (r.va, r.rkey, r.dma_len)
        } else {
            (0, 0, 0)
        };
        let ends = pos.ends_message();
        Some(Plan {
            psn: req.psn,
            base_va: va,
            dma_len,
            kind,
            position: pos,
            offset: 0,
            len: n,
            va,
            rkey,
            needs_recv: !write || (kind == MsgKind::WriteImm && ends),
            completes_recv: ends && (!write || kind == MsgKind::WriteImm),
        })
    }

    fn continue_msg(&self, req: &Request, kind: MsgKind, pos: Position, m: InMsg) -> Option<Plan> {
        let n = req.payload_len;
        let fits = match pos {
            Position::Middle => n == self.mtu,
            _ => n > 0 && n <= self.mtu,
        };
        let end = m.offset.checked_add(n)?;
        if !fits || (m.write && (end > m.dma_len || (pos.ends_message() && end != m.dma_len))) {
            return None;
        }
        let ends = pos.ends_message();
        Some(Plan {
            psn: req.psn,
            base_va: m.va,
            dma_len: m.dma_len,
            kind,
            position: pos,
            offset: m.offset,
            len: n,
            va: m.va.wrapping_add(u64::from(m.offset)),
            rkey: m.rkey,
            needs_recv: kind == MsgKind::WriteImm && ends,
            completes_recv: ends && (!m.write || kind == MsgKind::WriteImm),
        })
    }

    /// The plan was carried out.
    pub fn commit(&mut self, plan: &Plan) {
        self.epsn = plan.psn.next();
        self.cur = if plan.position.ends_message() {
            None
        } else {
            Some(InMsg {
                write: matches!(plan.kind, MsgKind::Write | MsgKind::WriteImm),
                offset: plan.offset.saturating_add(plan.len),
                va: plan.base_va,
                rkey: plan.rkey,
                dma_len: plan.dma_len,
            })
        };
    }

    /// The plan could not be carried out: the message is lost.
    pub fn abandon(&mut self, plan: &Plan) {
        self.epsn = plan.psn.next();
        self.cur = None;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::vec::Vec;

    const MTU: IbMtu = IbMtu::Mtu256;

    fn req(p: &TxPacket) -> Request {
        Request {
            psn: p.psn,
            opcode: p.opcode,
            payload_len: p.len,
            reth: (p.dma_len > 0 || p.opcode == Opcode::UC_RDMA_WRITE_ONLY).then_some(reth::Repr {
                va: 0x1000 + u64::from(p.offset),
                rkey: 7,
                dma_len: p.dma_len,
            }),
        }
    }

    /// Sends `msgs` through a network that drops the packets `lost`
    /// (indices over the whole stream); returns the messages the receiver
    /// completed (kind, length).
    fn run(msgs: &[(MsgKind, u32)], lost: &[usize]) -> Vec<(MsgKind, u32)> {
        let mut tx = Sender::new(Psn::new(0xfffff0), MTU);
        let mut rx = Receiver::new(Psn::new(0xfffff0), MTU);
        let mut done = Vec::new();
        let mut i = 0;
        for &(kind, len) in msgs {
            let m = tx.start(kind, len).unwrap();
            for k in 0..m.npkts() {
                let p = m.packet(k);
                let lose = lost.contains(&i);
                i += 1;
                if lose {
                    continue;
                }
                match rx.on_packet(&req(&p)) {
                    Action::Execute(plan) => {
                        assert_eq!(plan.offset, p.offset);
                        rx.commit(&plan);
                        if plan.position.ends_message() {
                            done.push((kind, plan.offset + plan.len));
                        }
                    }
                    Action::Drop => {}
                }
            }
        }
        done
    }

    #[test]
    fn in_order_messages_arrive_whole_across_the_psn_wrap() {
        let msgs = [
            (MsgKind::Send, 1000),
            (MsgKind::WriteImm, 513),
            (MsgKind::Write, 256),
            (MsgKind::SendImm, 0),
        ];
        assert_eq!(run(&msgs, &[]), msgs.to_vec());
    }

    #[test]
    fn a_lost_packet_loses_only_its_message() {
        let msgs = [
            (MsgKind::Send, 700),
            (MsgKind::Send, 700),
            (MsgKind::Write, 300),
        ];
        // 3 packets each for the SENDs, 2 for the WRITE: lose the middle
        // of the first SEND, the first of the WRITE.
        assert_eq!(
            run(&msgs, &[1]),
            [(MsgKind::Send, 700), (MsgKind::Write, 300)]
        );
        assert_eq!(
            run(&msgs, &[6]),
            [(MsgKind::Send, 700), (MsgKind::Send, 700)]
        );
        assert_eq!(run(&msgs, &[2, 3]), [(MsgKind::Write, 300)]);
    }

    #[test]
    fn stale_and_malformed_packets_are_dropped() {
        let mut tx = Sender::new(Psn::new(5), MTU);
        let mut rx = Receiver::new(Psn::new(5), MTU);
        let m = tx.start(MsgKind::Send, 10).unwrap();
        let p = req(&m.packet(0));
        let Action::Execute(plan) = rx.on_packet(&p) else {
            panic!("not taken");
        };
        rx.commit(&plan);
        assert_eq!(rx.on_packet(&p), Action::Drop, "a duplicate");
        // A MIDDLE with no message in progress, a FIRST shorter than the
        // MTU, a WRITE ONLY whose RETH length disagrees.
        let mut bad = req(&tx.start(MsgKind::Send, 600).unwrap().packet(1));
        assert_eq!(rx.on_packet(&bad), Action::Drop);
        bad = req(&tx.start(MsgKind::Send, 600).unwrap().packet(0));
        bad.payload_len = 100;
        assert_eq!(rx.on_packet(&bad), Action::Drop);
        bad = req(&tx.start(MsgKind::Write, 100).unwrap().packet(0));
        bad.reth = Some(reth::Repr {
            va: 0,
            rkey: 1,
            dma_len: 99,
        });
        assert_eq!(rx.on_packet(&bad), Action::Drop);
        assert_eq!(tx.start(MsgKind::Read, 8), Err(StartError::Unsupported));
        assert_eq!(tx.start(MsgKind::SendInv, 8), Err(StartError::Unsupported));
    }

    #[test]
    fn abandoned_messages_do_not_block_the_next() {
        let mut tx = Sender::new(Psn::new(0), MTU);
        let mut rx = Receiver::new(Psn::new(0), MTU);
        let m = tx.start(MsgKind::Write, 600).unwrap();
        let Action::Execute(plan) = rx.on_packet(&req(&m.packet(0))) else {
            panic!("not taken");
        };
        // The caller could not place it (a bad R_Key, say).
        rx.abandon(&plan);
        assert_eq!(rx.on_packet(&req(&m.packet(1))), Action::Drop);
        assert_eq!(rx.on_packet(&req(&m.packet(2))), Action::Drop);
        let n = tx.start(MsgKind::Send, 4).unwrap();
        assert!(
            matches!(rx.on_packet(&req(&n.packet(0))), Action::Execute(p) if p.needs_recv && p.completes_recv)
        );
    }
}
