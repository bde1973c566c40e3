// SPDX-License-Identifier: GPL-2.0

//! BTH opcodes (IBTA 9.2.1, table 38) and what each one implies.
//!
//! The opcode alone decides which extension headers follow the BTH and
//! in which order, whether payload follows them, and where the packet
//! sits in its message. Both ends must agree on this table bit for bit,
//! so it is data, checked once at compile time (no opcode twice) and by
//! the tests against rxe's table, rather than logic spread over the
//! requester and responder.
//!
//! The top three bits of an opcode name the transport:
//!
//! | bits | transport | here |
//! |------|-----------|------|
//! | 000  | RC        | yes |
//! | 001  | UC        | yes |
//! | 010  | RD        | no: neither rxe nor rxud implements it |
//! | 011  | UD        | yes |
//! | 100  | CNP (RoCEv2 congestion notification) | no: rxe drops it too |
//! | 101  | XRC       | no |
//! | 110  | reserved by IBTA | no |
//! | 111  | manufacturer specific | XUD ([`XUD_OPCODE_BASE`]) |
//!
//! Any opcode not in the table is [`Error::UnknownOpcode`]; rxe drops
//! such packets the same way.

use super::{aeth, atomic, deth, feth, ieth, immdt, reth, xack, xck, xeth, Error};

/// A BTH opcode. Any byte is one; [`Opcode::info`] says whether it is
/// known.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Opcode(pub u8);

/// The transport bits (7:5) of an opcode, shifted down.
const TRANSPORT_SHIFT: u8 = 5;

/// First opcode of the block XUD will use: transport bits 0b111, which
/// IBTA sets aside for manufacturer-specific opcodes and so will never
/// assign to a transport of its own (0b110, the other unused code, is
/// reserved for IBTA's future use). rxe has no entries there and drops
/// such packets as unknown, so XUD traffic reaching an rxe node is
/// discarded cleanly rather than misread.
///
/// XUD's opcodes (Documentation/xud.rst) are the six at the end of the
/// table; the rest of the block is unknown. Its data packets carry BTH,
/// DETH, XETH, RETH, an optional ImmDt and the payload: every packet names
/// its sender and its target memory, so a receiver can place it on its
/// own.
pub const XUD_OPCODE_BASE: u8 = 0b111 << TRANSPORT_SHIFT;

/// Transports this implementation speaks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Transport {
    /// Reliable connected.
    Rc,
    /// Unreliable connected.
    Uc,
    /// Unreliable datagram.
    Ud,
    /// rxud's reliable connectionless transport (opcodes from
    /// [`XUD_OPCODE_BASE`]).
    Xud,
}

impl Transport {
    /// The transport of an opcode, if it is one of ours.
    pub const fn of(op: Opcode) -> Option<Self> {
        match op.0 >> TRANSPORT_SHIFT {
            0b000 => Some(Transport::Rc),
            0b001 => Some(Transport::Uc),
            0b011 => Some(Transport::Ud),
            0b111 => Some(Transport::Xud),
            _ => None,
        }
    }

    /// The transport's first opcode (its bits 4:0 zero).
    pub const fn opcode_base(self) -> u8 {
        match self {
            Transport::Rc => 0x00,
            Transport::Uc => 0x20,
            Transport::Ud => 0x60,
            Transport::Xud => XUD_OPCODE_BASE,
        }
    }
}

/// Extension headers that can follow the BTH.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ExtHeader {
    /// RDMA ETH: remote address, R_Key and length.
    Reth,
    /// Datagram ETH: Q_Key and source QP.
    Deth,
    /// ACK ETH: syndrome and MSN.
    Aeth,
    /// Immediate data.
    ImmDt,
    /// Invalidate ETH: the R_Key to invalidate.
    Ieth,
    /// Atomic ETH: address, R_Key, swap/add and compare operands.
    AtomicEth,
    /// Atomic ACK ETH: the original remote value.
    AtomicAckEth,
    /// Flush ETH: placement type and selectivity level.
    Feth,
    /// XUD extended transport header: stream, incarnation, message.
    Xeth,
    /// XUD acknowledgement header: stream, incarnation, selective ACK.
    Xack,
    /// XUD cookie header: the stream cookie echoed or given.
    Xck,
}

impl ExtHeader {
    /// Its length in bytes.
    pub const fn size(self) -> usize {
        match self {
            ExtHeader::Reth => reth::HEADER_LEN,
            ExtHeader::Deth => deth::HEADER_LEN,
            ExtHeader::Aeth => aeth::HEADER_LEN,
            ExtHeader::ImmDt => immdt::HEADER_LEN,
            ExtHeader::Ieth => ieth::HEADER_LEN,
            ExtHeader::AtomicEth => atomic::HEADER_LEN,
            ExtHeader::AtomicAckEth => atomic::ACK_HEADER_LEN,
            ExtHeader::Feth => feth::HEADER_LEN,
            ExtHeader::Xeth => xeth::HEADER_LEN,
            ExtHeader::Xack => xack::HEADER_LEN,
            ExtHeader::Xck => xck::HEADER_LEN,
        }
    }
}

/// What a packet does.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Operation {
    /// SEND (with or without immediate or invalidate).
    Send,
    /// RDMA WRITE (with or without immediate).
    RdmaWrite,
    /// RDMA READ request.
    RdmaReadRequest,
    /// RDMA READ response, carrying the data read.
    RdmaReadResponse,
    /// ACK or NAK.
    Acknowledge,
    /// Response to an atomic, carrying the original value.
    AtomicAcknowledge,
    /// Atomic compare and swap.
    CompareSwap,
    /// Atomic fetch and add.
    FetchAdd,
    /// FLUSH (IBTA 1.5 memory placement extension).
    Flush,
    /// ATOMIC WRITE (IBTA 1.5 memory placement extension): 8 bytes
    /// written as one.
    AtomicWrite,
}

impl Operation {
    /// Whether packets of this operation may carry payload.
    pub const fn carries_payload(self) -> bool {
        matches!(
            self,
            Operation::Send
                | Operation::RdmaWrite
                | Operation::RdmaReadResponse
                | Operation::AtomicWrite
        )
    }

    /// Which way the packet goes.
    pub const fn direction(self) -> Direction {
        match self {
            Operation::RdmaReadResponse | Operation::Acknowledge | Operation::AtomicAcknowledge => {
                Direction::Response
            }
            _ => Direction::Request,
        }
    }
}

/// Requester to responder, or back.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Direction {
    /// Sent by the requester (sends, writes, read requests, atomics).
    Request,
    /// Sent by the responder (read responses, ACKs and NAKs, atomic ACKs).
    Response,
}

/// Where a packet sits in its message (a message of one packet, or a
/// packet that is no part of a multi-packet message such as an ACK, is
/// `Only`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Position {
    /// First packet of a multi-packet message.
    First,
    /// Neither first nor last.
    Middle,
    /// Last packet of a multi-packet message.
    Last,
    /// The whole message.
    Only,
}

impl Position {
    /// The packet starts a message (First or Only).
    pub const fn starts_message(self) -> bool {
        matches!(self, Position::First | Position::Only)
    }

    /// The packet ends a message (Last or Only).
    pub const fn ends_message(self) -> bool {
        matches!(self, Position::Last | Position::Only)
    }
}

/// Everything the opcode implies about a packet's layout and role.
#[derive(Debug, PartialEq, Eq)]
pub struct OpcodeInfo {
    /// The opcode described.
    pub opcode: Opcode,
    /// The IBTA name, as in `<rdma/ib_pack.h>` without `IB_OPCODE_`.
    pub name: &'static str,
    /// From the top three bits.
    pub transport: Transport,
    /// What the packet does.
    pub operation: Operation,
    /// Where it sits in its message.
    pub position: Position,
    /// Request or response.
    pub direction: Direction,
    /// Whether payload may follow the headers (it may still be empty,
    /// e.g. a zero-length SEND_ONLY). If not, nothing but pad-free ICRC
    /// may follow them.
    pub payload: bool,
    /// The extension headers after the BTH, in wire order.
    pub headers: &'static [ExtHeader],
    /// BTH plus extension headers: the payload's offset.
    pub header_len: usize,
}

impl OpcodeInfo {
    const fn new(
        opcode: u8,
        name: &'static str,
        operation: Operation,
        position: Position,
        headers: &'static [ExtHeader],
    ) -> Self {
        let transport = match Transport::of(Opcode(opcode)) {
            Some(t) => t,
            None => panic!("opcode outside our transports"),
        };
        let mut header_len = super::bth::HEADER_LEN;
        let mut i = 0;
        while i < headers.len() {
            header_len += headers[i].size();
            i += 1;
        }
        Self {
            opcode: Opcode(opcode),
            name,
            transport,
            operation,
            position,
            direction: operation.direction(),
            payload: operation.carries_payload(),
            headers,
            header_len,
        }
    }

    /// Whether extension header `h` is present.
    pub fn has(&self, h: ExtHeader) -> bool {
        self.headers.contains(&h)
    }

    /// Offset of extension header `h` from the start of the BTH, if
    /// present.
    pub fn offset_of(&self, h: ExtHeader) -> Option<usize> {
        let mut off = super::bth::HEADER_LEN;
        for &x in self.headers {
            if x == h {
                return Some(off);
            }
            off += x.size();
        }
        None
    }
}

/// Declares the opcode constants and the table from one list, so a name
/// and its value cannot drift apart.
macro_rules! opcodes {
    ($($name:ident = $val:expr, $op:ident, $pos:ident, [$($h:ident),*];)*) => {
        impl Opcode {
            $(
                #[doc = concat!("`", stringify!($name), "`")]
                pub const $name: Opcode = Opcode($val);
            )*
        }

        const TABLE_DEF: [OpcodeInfo; [$($val),*].len()] = [
            $(OpcodeInfo::new(
                $val,
                stringify!($name),
                Operation::$op,
                Position::$pos,
                &[$(ExtHeader::$h),*],
            ),)*
        ];
    };
}

opcodes! {
    RC_SEND_FIRST = 0x00, Send, First, [];
    RC_SEND_MIDDLE = 0x01, Send, Middle, [];
    RC_SEND_LAST = 0x02, Send, Last, [];
    RC_SEND_LAST_WITH_IMMEDIATE = 0x03, Send, Last, [ImmDt];
    RC_SEND_ONLY = 0x04, Send, Only, [];
    RC_SEND_ONLY_WITH_IMMEDIATE = 0x05, Send, Only, [ImmDt];
    RC_RDMA_WRITE_FIRST = 0x06, RdmaWrite, First, [Reth];
    RC_RDMA_WRITE_MIDDLE = 0x07, RdmaWrite, Middle, [];
    RC_RDMA_WRITE_LAST = 0x08, RdmaWrite, Last, [];
    RC_RDMA_WRITE_LAST_WITH_IMMEDIATE = 0x09, RdmaWrite, Last, [ImmDt];
    RC_RDMA_WRITE_ONLY = 0x0a, RdmaWrite, Only, [Reth];
    RC_RDMA_WRITE_ONLY_WITH_IMMEDIATE = 0x0b, RdmaWrite, Only, [Reth, ImmDt];
    RC_RDMA_READ_REQUEST = 0x0c, RdmaReadRequest, Only, [Reth];
    RC_RDMA_READ_RESPONSE_FIRST = 0x0d, RdmaReadResponse, First, [Aeth];
    RC_RDMA_READ_RESPONSE_MIDDLE = 0x0e, RdmaReadResponse, Middle, [];
    RC_RDMA_READ_RESPONSE_LAST = 0x0f, RdmaReadResponse, Last, [Aeth];
    RC_RDMA_READ_RESPONSE_ONLY = 0x10, RdmaReadResponse, Only, [Aeth];
    RC_ACKNOWLEDGE = 0x11, Acknowledge, Only, [Aeth];
    RC_ATOMIC_ACKNOWLEDGE = 0x12, AtomicAcknowledge, Only, [Aeth, AtomicAckEth];
    RC_COMPARE_SWAP = 0x13, CompareSwap, Only, [AtomicEth];
    RC_FETCH_ADD = 0x14, FetchAdd, Only, [AtomicEth];
    RC_SEND_LAST_WITH_INVALIDATE = 0x16, Send, Last, [Ieth];
    RC_SEND_ONLY_WITH_INVALIDATE = 0x17, Send, Only, [Ieth];
    RC_FLUSH = 0x1c, Flush, Only, [Feth, Reth];
    RC_ATOMIC_WRITE = 0x1d, AtomicWrite, Only, [Reth];

    UC_SEND_FIRST = 0x20, Send, First, [];
    UC_SEND_MIDDLE = 0x21, Send, Middle, [];
    UC_SEND_LAST = 0x22, Send, Last, [];
    UC_SEND_LAST_WITH_IMMEDIATE = 0x23, Send, Last, [ImmDt];
    UC_SEND_ONLY = 0x24, Send, Only, [];
    UC_SEND_ONLY_WITH_IMMEDIATE = 0x25, Send, Only, [ImmDt];
    UC_RDMA_WRITE_FIRST = 0x26, RdmaWrite, First, [Reth];
    UC_RDMA_WRITE_MIDDLE = 0x27, RdmaWrite, Middle, [];
    UC_RDMA_WRITE_LAST = 0x28, RdmaWrite, Last, [];
    UC_RDMA_WRITE_LAST_WITH_IMMEDIATE = 0x29, RdmaWrite, Last, [ImmDt];
    UC_RDMA_WRITE_ONLY = 0x2a, RdmaWrite, Only, [Reth];
    UC_RDMA_WRITE_ONLY_WITH_IMMEDIATE = 0x2b, RdmaWrite, Only, [Reth, ImmDt];

    UD_SEND_ONLY = 0x64, Send, Only, [Deth];
    UD_SEND_ONLY_WITH_IMMEDIATE = 0x65, Send, Only, [Deth, ImmDt];

    // Documentation/xud.rst, "Wire format": every data packet is placed
    // on its own (RETH), so there are no FIRST/MIDDLE/LAST opcodes.
    XUD_SEND = 0xe0, Send, Only, [Deth, Xeth, Xck, Reth];
    XUD_SEND_WITH_IMMEDIATE = 0xe1, Send, Only, [Deth, Xeth, Xck, Reth, ImmDt];
    XUD_RDMA_WRITE = 0xe2, RdmaWrite, Only, [Deth, Xeth, Xck, Reth];
    XUD_RDMA_WRITE_WITH_IMMEDIATE = 0xe3, RdmaWrite, Only, [Deth, Xeth, Xck, Reth, ImmDt];
    XUD_ACKNOWLEDGE = 0xf0, Acknowledge, Only, [Deth, Xack];
    XUD_NAK = 0xf1, Acknowledge, Only, [Deth, Xack, Aeth];
    // A receiver's answer to a data packet of a stream it holds no window
    // for, without a fresh cookie: the cookie to echo (xud.rst, "Stream
    // cookies").
    XUD_CHALLENGE = 0xf2, Acknowledge, Only, [Deth, Xack, Xck];
}

/// Every known opcode.
static TABLE: [OpcodeInfo; TABLE_DEF.len()] = TABLE_DEF;

/// Opcode to 1 + its index in `TABLE`, 0 for unknown ones. Building it
/// fails the compilation if an opcode is listed twice.
static INDEX: [u8; 256] = {
    let mut index = [0u8; 256];
    let mut i = 0;
    while i < TABLE_DEF.len() {
        let op = TABLE_DEF[i].opcode.0 as usize;
        assert!(index[op] == 0, "opcode listed twice");
        index[op] = (i + 1) as u8;
        i += 1;
    }
    index
};

impl Opcode {
    /// What the opcode implies, or [`Error::UnknownOpcode`].
    pub fn info(self) -> Result<&'static OpcodeInfo, Error> {
        match INDEX[usize::from(self.0)] {
            0 => Err(Error::UnknownOpcode(self.0)),
            i => TABLE
                .get(usize::from(i) - 1)
                .ok_or(Error::UnknownOpcode(self.0)),
        }
    }

    /// The transport bits name one of our transports (the opcode itself
    /// may still be unknown).
    pub const fn transport(self) -> Option<Transport> {
        Transport::of(self)
    }

    /// Every known opcode's description, in opcode order.
    pub fn all() -> &'static [OpcodeInfo] {
        &TABLE
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ExtHeader::*;

    #[test]
    fn lookup_is_total_and_consistent() {
        let mut known = 0;
        for b in 0..=255u8 {
            match Opcode(b).info() {
                Ok(i) => {
                    known += 1;
                    assert_eq!(i.opcode, Opcode(b));
                    assert_eq!(Some(i.transport), Opcode(b).transport());
                    assert_eq!(i.transport.opcode_base(), b & 0xe0);
                    let prefix = match i.transport {
                        Transport::Rc => "RC_",
                        Transport::Uc => "UC_",
                        Transport::Ud => "UD_",
                        Transport::Xud => "XUD_",
                    };
                    assert!(i.name.starts_with(prefix), "{}", i.name);
                    assert_eq!(i.name.contains("IMMEDIATE"), i.has(ImmDt), "{}", i.name);
                    assert_eq!(i.name.contains("INVALIDATE"), i.has(Ieth), "{}", i.name);
                    assert_eq!(
                        matches!(i.transport, Transport::Ud | Transport::Xud),
                        i.has(Deth),
                        "{}",
                        i.name
                    );
                    assert_eq!(i.transport == Transport::Xud, i.has(Xeth) || i.has(Xack));
                    let sum: usize = i.headers.iter().map(|h| h.size()).sum();
                    assert_eq!(i.header_len, 12 + sum);
                    for (k, h) in i.headers.iter().enumerate() {
                        assert!(
                            !i.headers[k + 1..].contains(h),
                            "{} repeats a header",
                            i.name
                        );
                    }
                }
                Err(e) => assert_eq!(e, Error::UnknownOpcode(b)),
            }
        }
        assert_eq!(known, Opcode::all().len());
        assert_eq!(known, 25 + 12 + 2 + 7);
    }

    #[test]
    fn rejects_other_transports_and_gaps() {
        for b in [
            0x15, 0x18, 0x1b, 0x1e, 0x1f, 0x2c, 0x40, 0x60, 0x63, 0x66, 0x80, 0x81, 0xa0, 0xc0,
            0xe4, 0xef, 0xf3, 0xff,
        ] {
            assert_eq!(Opcode(b).info(), Err(Error::UnknownOpcode(b)), "{b:#x}");
        }
        assert_eq!(Opcode(0xe5).transport(), Some(Transport::Xud));
        assert_eq!(Opcode(0x81).transport(), None);
    }

    /// Header order and lengths as in rxe's `rxe_opcode[]` (its
    /// `.length` and `.offset` entries).
    #[test]
    fn layouts_match_rxe() {
        let cases: &[(Opcode, &[ExtHeader], usize)] = &[
            (Opcode::RC_SEND_ONLY, &[], 12),
            (Opcode::RC_SEND_LAST_WITH_IMMEDIATE, &[ImmDt], 16),
            (Opcode::RC_RDMA_WRITE_FIRST, &[Reth], 28),
            (
                Opcode::RC_RDMA_WRITE_ONLY_WITH_IMMEDIATE,
                &[Reth, ImmDt],
                32,
            ),
            (Opcode::RC_RDMA_READ_REQUEST, &[Reth], 28),
            (Opcode::RC_RDMA_READ_RESPONSE_MIDDLE, &[], 12),
            (Opcode::RC_RDMA_READ_RESPONSE_LAST, &[Aeth], 16),
            (Opcode::RC_ACKNOWLEDGE, &[Aeth], 16),
            (Opcode::RC_ATOMIC_ACKNOWLEDGE, &[Aeth, AtomicAckEth], 24),
            (Opcode::RC_COMPARE_SWAP, &[AtomicEth], 40),
            (Opcode::RC_SEND_ONLY_WITH_INVALIDATE, &[Ieth], 16),
            (Opcode::RC_FLUSH, &[Feth, Reth], 32),
            (Opcode::RC_ATOMIC_WRITE, &[Reth], 28),
            (
                Opcode::UC_RDMA_WRITE_ONLY_WITH_IMMEDIATE,
                &[Reth, ImmDt],
                32,
            ),
            (Opcode::UD_SEND_ONLY, &[Deth], 20),
            (Opcode::UD_SEND_ONLY_WITH_IMMEDIATE, &[Deth, ImmDt], 24),
        ];
        for &(op, headers, len) in cases {
            let i = op.info().unwrap();
            assert_eq!(i.headers, headers, "{}", i.name);
            assert_eq!(i.header_len, len, "{}", i.name);
        }
        let i = Opcode::RC_RDMA_WRITE_ONLY_WITH_IMMEDIATE.info().unwrap();
        assert_eq!(
            (i.offset_of(Reth), i.offset_of(ImmDt), i.offset_of(Aeth)),
            (Some(12), Some(28), None)
        );
        let i = Opcode::RC_ATOMIC_ACKNOWLEDGE.info().unwrap();
        assert_eq!(
            (i.offset_of(Aeth), i.offset_of(AtomicAckEth)),
            (Some(12), Some(16))
        );
    }

    /// Documentation/xud.rst, "Wire format": one header order, 68 bytes of
    /// transport headers a data packet (72 with immediate data).
    #[test]
    fn xud_layouts_match_the_spec() {
        let cases: &[(Opcode, usize, Option<usize>)] = &[
            (Opcode::XUD_SEND, 68, None),
            (Opcode::XUD_SEND_WITH_IMMEDIATE, 72, Some(68)),
            (Opcode::XUD_RDMA_WRITE, 68, None),
            (Opcode::XUD_RDMA_WRITE_WITH_IMMEDIATE, 72, Some(68)),
        ];
        for &(op, len, imm) in cases {
            let i = op.info().unwrap();
            assert_eq!(i.header_len, len, "{}", i.name);
            assert_eq!(
                (
                    i.offset_of(Deth),
                    i.offset_of(Xeth),
                    i.offset_of(Xck),
                    i.offset_of(Reth)
                ),
                (Some(12), Some(20), Some(40), Some(52)),
                "{}",
                i.name
            );
            assert_eq!(i.offset_of(ImmDt), imm);
            assert!(i.payload && i.position == Position::Only);
        }
        let ack = Opcode::XUD_ACKNOWLEDGE.info().unwrap();
        assert_eq!((ack.header_len, ack.offset_of(Xack)), (52, Some(20)));
        let nak = Opcode::XUD_NAK.info().unwrap();
        assert_eq!((nak.header_len, nak.offset_of(Aeth)), (56, Some(52)));
        assert!(!ack.payload && ack.direction == Direction::Response);
        let ch = Opcode::XUD_CHALLENGE.info().unwrap();
        assert_eq!((ch.header_len, ch.offset_of(Xck)), (64, Some(52)));
        assert!(!ch.payload && ch.direction == Direction::Response);
    }

    #[test]
    fn roles() {
        let i = Opcode::RC_RDMA_READ_RESPONSE_FIRST.info().unwrap();
        assert_eq!(
            (i.direction, i.position, i.payload),
            (Direction::Response, Position::First, true)
        );
        let i = Opcode::RC_ACKNOWLEDGE.info().unwrap();
        assert_eq!((i.direction, i.payload), (Direction::Response, false));
        let i = Opcode::RC_RDMA_READ_REQUEST.info().unwrap();
        assert_eq!(
            (i.direction, i.payload, i.operation),
            (Direction::Request, false, Operation::RdmaReadRequest)
        );
        let i = Opcode::UC_SEND_MIDDLE.info().unwrap();
        assert!(!i.position.starts_message() && !i.position.ends_message() && i.payload);
        assert!(Position::Only.starts_message() && Position::Only.ends_message());
        let i = Opcode::RC_ATOMIC_WRITE.info().unwrap();
        assert!(i.payload && i.direction == Direction::Request);
    }
}
