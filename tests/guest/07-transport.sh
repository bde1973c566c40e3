#!/usr/bin/env bash
# RoCEv2 transport: UDP 4791, one socket per network namespace with rxud
# devices, opened with the first and closed with the last; EADDRINUSE (and
# nothing half-made) where rxe holds the port; received datagrams counted
# by the port (rdma statistic / hw_counters) and malformed ones dropped.
. "$(dirname "$0")/../lib/tap.sh"
. "$(dirname "$0")/../lib/rxud.sh"
IF=${RXUD_IF:?no test NIC}
TAP_PLANNED=19
tap_begin $TAP_PLANNED

# port_bound [NETNS]: something listens on UDP 4791 there.
port_bound() {
	if [ -n "${1:-}" ]; then
		inns "$1" ss -Hluna 'sport = :4791' | grep -q .
	else
		ss -Hluna 'sport = :4791' | grep -q .
	fi
}
port_free() { ! port_bound "$@"; }
counter() { cat "/sys/class/infiniband/$1/ports/1/hw_counters/$2"; }
# send_roce SRC DST HEX [BAD]: a RoCEv2 datagram from SRC to DST:4791 whose
# UDP payload is HEX followed by its ICRC (computed as IBTA A17.3.3 says,
# over an IP header sent as is through a raw socket; with BAD, a wrong one).
send_roce() {
	python3 - "$@" <<'PY'
import socket, struct, sys, zlib
src, dst, body = sys.argv[1], sys.argv[2], bytes.fromhex(sys.argv[3])
udp_len = 8 + len(body) + 4
ip = struct.pack('!BBHHHBBH4s4s', 0x45, 0, 20 + udp_len, 0x1234, 0x4000, 64, 17, 0,
                 socket.inet_aton(src), socket.inet_aton(dst))
udp = struct.pack('!HHHH', 49152, 4791, udp_len, 0)
m_ip, m_udp, m_bth = bytearray(ip), bytearray(udp), bytearray(body[:12])
m_ip[1] = m_ip[8] = m_ip[10] = m_ip[11] = 0xff   # TOS, TTL, checksum
m_udp[6] = m_udp[7] = 0xff                        # UDP checksum
m_bth[4] = 0xff                                   # FECN, BECN, resv6
crc = zlib.crc32(b'\xff' * 8 + m_ip + m_udp + m_bth + body[12:]) & 0xffffffff
if len(sys.argv) > 4:
    crc ^= 1
s = socket.socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_RAW)
s.sendto(ip + udp + body + struct.pack('<I', crc), (dst, 0))
PY
}

# send_udp NETNS DST HEX: one datagram to DST:4791 from NETNS ("": here).
send_udp() {
	local ns=()
	[ -z "$1" ] || ns=(inns "$1")
	"${ns[@]}" python3 -c '
import socket, sys
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.sendto(bytes.fromhex(sys.argv[2]), (sys.argv[1], 4791))' "$2" "$3"
}

rxud_load
check "no socket before the first device" port_free
rdma link add rxud0 type rxud netdev "$IF"
check "rxud0 opens UDP 4791 in its namespace" port_bound
check_fails "rxe cannot load while rxud holds the port" "" modprobe rdma_rxe
rdma link delete rxud0
check "the last device closes the socket" wait_for 10 port_free
check "rxe loads once the port is free" modprobe rdma_rxe
check_fails "rxud0 where rxe holds the port: EADDRINUSE" "Address already in use" \
	rdma link add rxud0 type rxud netdev "$IF"
check "and nothing half-made" ib_gone rxud0
check "a clear kernel message says why" bash -c "dmesg | grep -q 'UDP port 4791 is taken'"

# rxud in a namespace of its own beside rxe: the documented way to run both.
ip netns add rxudns
ip link add rxudv0 type veth peer name rxudv1
ip link add rxudv2 type veth peer name rxudv3
ip link set rxudv1 netns rxudns
ip link set rxudv3 netns rxudns
ip addr add 169.254.200.1/24 dev rxudv0
ip link set rxudv0 up
ip link set rxudv2 up
inns rxudns ip addr add 169.254.200.2/24 dev rxudv1
inns rxudns ip link set rxudv1 up
inns rxudns ip link set rxudv3 up
inns rxudns ip link set lo up
check "rxud0 in its own namespace beside rxe" inns rxudns rdma link add rxud0 type rxud netdev rxudv1
check "a second device there shares the socket" inns rxudns rdma link add rxud1 type rxud netdev rxudv3
check "the namespace's port is bound" port_bound rxudns
check "rdma statistic shows the port counters" bash -c "rdma statistic show link rxud0/1 | grep -q rx_drop_malformed"
wait_for 5 ping -c1 -W1 169.254.200.2 >/dev/null
before=$(counter rxud0 rx_packets)
# Too short for a BTH and ICRC.
send_udp "" 169.254.200.2 0102030405
# A UD SEND_ONLY (BTH, DETH, 4 bytes of payload) to QP 0x123456, with a
# good ICRC, then with a bad one.
UD_SEND=6400ffff00123456800000010000000100000001deadbeef
send_roce 169.254.200.1 169.254.200.2 $UD_SEND
send_roce 169.254.200.1 169.254.200.2 $UD_SEND bad
check "the port counts the datagrams it received" wait_for 5 \
	test "$(counter rxud0 rx_packets)" -ge $((before + 3))
check_eq "the short one is dropped as malformed" 1 "$(counter rxud0 rx_drop_malformed)"
check_eq "the one with a bad ICRC is dropped as such" 1 "$(counter rxud0 rx_drop_bad_icrc)"
check_eq "the well-formed one for no QP is dropped as such" 1 "$(counter rxud0 rx_drop_no_qp)"
check_eq "the other device counted nothing" 0 "$(counter rxud1 rx_packets)"
inns rxudns rdma link delete rxud0
inns rxudns rdma link delete rxud1
check "the namespace's last device closes its socket" wait_for 10 port_free rxudns
ip link del rxudv0
ip link del rxudv2
ip netns del rxudns
rmmod rdma_rxe
check "rmmod rxud" rxud_unload
tap_end
