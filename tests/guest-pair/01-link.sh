#!/usr/bin/env bash
# Runs in both VMs of a pair: the virtio-net link carries IP, and each side
# gets an rxud device on it with its RoCEv2 GID. Then UD multicast across
# the link (tests/verbs/mcast-test -r / -t): two QPs of vm0 in the group
# 239.1.2.3, vm1's QP sends to it, each member gets each datagram.
. "$(dirname "$0")/../lib/tap.sh"
. "$(dirname "$0")/../lib/rxud.sh"
IF=${RXUD_IF:?no test NIC}
TAP_PLANNED=7
tap_begin $TAP_PLANNED

peer_answers() { ping -c 1 -W 1 "$RXUD_PEER_IP" >/dev/null; }
check "peer $RXUD_PEER_IP answers ping (waiting up to 60 s for it to boot)" wait_for 60 peer_answers
check "10 pings, none lost" ping -c 10 -i 0.2 -W 2 "$RXUD_PEER_IP"
check "rxud loaded and rxud0 on $IF" bash -c "modprobe -a udp_tunnel ip6_udp_tunnel && insmod $RXUD_KO && rdma link add rxud0 type rxud netdev $IF"
check "rxud0 has $RXUD_SELF_IP as RoCE v2 GID" wait_for 5 has_gid rxud0 "$(ipv4_gid "$RXUD_SELF_IP")" "RoCE v2"
check "ping still works with rxud bound" ping -c 3 -i 0.2 -W 2 "$RXUD_PEER_IP"
MCAST=$RXUD_TOP/tests/verbs/mcast-test
export RDMAV_DRIVERS=$RXUD_TOP/rdma-core-provider/build/librxud
gidx=$(v2_gid_index rxud0)
if [ "$RXUD_VM" = 0 ]; then
	# The members: ready (attached, joined, receives posted) before the
	# peer sends.
	"$MCAST" -d rxud0 -g "${gidx:-0}" -i "$IF" -r 60 >"$RXUD_OUT/mcast.txt" 2>&1 &
	members=$!
	wait_for 30 grep -q 'members ready' "$RXUD_OUT/mcast.txt"
	barrier mcast-members-ready
	wait $members
	rc=$?
	tap_diag <"$RXUD_OUT/mcast.txt"
	check_eq "UD multicast across the link: vm0's two members each got vm1's 8 datagrams" 0 "$rc"
else
	barrier mcast-members-ready
	out=$("$MCAST" -d rxud0 -g "${gidx:-0}" -i "$IF" -t 2>&1)
	rc=$?
	printf '%s\n' "$out" | tap_diag
	check_eq "UD multicast across the link: vm1 sent 8 datagrams to 239.1.2.3" 0 "$rc"
fi
# Keep the link up until the peer is done with its checks too.
check "peer finished its checks" barrier link-checked
rdma link delete rxud0
rmmod rxud
tap_end
