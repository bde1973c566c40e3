#!/usr/bin/env bash
# The device follows its netdev: carrier and admin state drive the port
# state, addresses drive the GID table, unregistering the netdev removes
# the device, and so does deleting the namespace the netdev is in.
. "$(dirname "$0")/../lib/tap.sh"
. "$(dirname "$0")/../lib/rxud.sh"
TAP_PLANNED=14
tap_begin $TAP_PLANNED

rxud_load
ip link add rxudv0 type veth peer name rxudv1
ip link set rxudv0 up
ip link set rxudv1 up
check "rxudv on veth rxudv0" rdma link add rxudv type rxud netdev rxudv0
check "port ACTIVE with carrier" wait_for 5 port_is rxudv ACTIVE
ip link set rxudv1 down
check "port DOWN when the peer drops carrier" wait_for 5 port_is rxudv DOWN
ip link set rxudv1 up
check "port ACTIVE again" wait_for 5 port_is rxudv ACTIVE
ip link set rxudv0 down
check "port DOWN when the netdev is down" wait_for 5 port_is rxudv DOWN
ip link set rxudv0 up

gid=$(ipv4_gid 169.254.99.1)
ip addr add 169.254.99.1/16 dev rxudv0
check "new IPv4 address appears as a RoCE v2 GID" wait_for 5 has_gid rxudv "$gid" "RoCE v2"
ip addr del 169.254.99.1/16 dev rxudv0
check "removed address leaves the GID table" wait_for 5 no_gid rxudv "$gid" "RoCE v2"
gid6=fd00:0077:0000:0000:0000:0000:0000:0001
ip -6 addr add fd00:77::1/64 dev rxudv0 nodad
check "new IPv6 address appears as a RoCE v2 GID" wait_for 5 has_gid rxudv "$gid6" "RoCE v2"
ip -6 addr del fd00:77::1/64 dev rxudv0
check "removed IPv6 address leaves the GID table" wait_for 5 no_gid rxudv "$gid6" "RoCE v2"

ip link del rxudv0
check "deleting the netdev removes the device" wait_for 5 ib_gone rxudv
check "netdev is really gone" wait_for 5 netdev_gone rxudv0

# A namespace deleted with an rxud device in it: the namespace ends, its
# veth is unregistered and the device goes with it (rxud holds no
# reference on the namespace: net/netns.rs). Its UDP socket is released
# as the namespace ends; then rmmod works.
ip netns add nsx
ip link add rxudx0 type veth peer name rxudx1
ip link set rxudx0 netns nsx
inns nsx ip link set rxudx0 up
inns nsx ip addr add 169.254.231.1/24 dev rxudx0
check "rxudx in namespace nsx" inns nsx rdma link add rxudx type rxud netdev rxudx0
ip netns del nsx
check "deleting the namespace removes the device" wait_for 20 ib_gone rxudx
check "rmmod afterwards" rxud_unload
tap_end
