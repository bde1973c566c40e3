#!/usr/bin/env bash
# Runs in both VMs of a pair: the virtio-net link carries IP, and each side
# gets an rxud device on it with its RoCEv2 GID.
. "$(dirname "$0")/../lib/tap.sh"
. "$(dirname "$0")/../lib/rxud.sh"
IF=${RXUD_IF:?no test NIC}
TAP_PLANNED=6
tap_begin $TAP_PLANNED

peer_answers() { ping -c 1 -W 1 "$RXUD_PEER_IP" >/dev/null; }
check "peer $RXUD_PEER_IP answers ping (waiting up to 60 s for it to boot)" wait_for 60 peer_answers
check "10 pings, none lost" ping -c 10 -i 0.2 -W 2 "$RXUD_PEER_IP"
check "rxud loaded and rxud0 on $IF" bash -c "modprobe -a udp_tunnel ip6_udp_tunnel && insmod $RXUD_KO && rdma link add rxud0 type rxud netdev $IF"
check "rxud0 has $RXUD_SELF_IP as RoCE v2 GID" wait_for 5 has_gid rxud0 "$(ipv4_gid "$RXUD_SELF_IP")" "RoCE v2"
check "ping still works with rxud bound" ping -c 3 -i 0.2 -W 2 "$RXUD_PEER_IP"
# Keep the link up until the peer is done with its checks too.
check "peer finished its checks" barrier link-checked
rdma link delete rxud0
rmmod rxud
tap_end
