#!/usr/bin/env bash
# Routed RoCEv2 between namespaces (tests/guest/26-pingmesh.sh,
# 27-incast.sh): one router namespace, and hosts each in a namespace of
# their own with one veth to it and an rxud device on that veth. Each link
# is a /24 of its own (host .1, router .254), so every packet between two
# hosts is routed once, as between racks. Needs tests/lib/rxud.sh.

# mesh_router NS: the router namespace, forwarding IPv4.
mesh_router() {
	ip netns add "$1" &&
		inns "$1" ip link set lo up &&
		inns "$1" sysctl -qw net.ipv4.ip_forward=1
}

# mesh_host ROUTER NS DEV NET: namespace NS with veth DEV at NET.1/24, its
# router end (rDEV, in ROUTER) at NET.254 and its default route; rxud
# device rxDEV on DEV.
mesh_host() {
	local router=$1 ns=$2 dev=$3 net=$4
	ip netns add "$ns" &&
		ip link add "$dev" type veth peer name "r$dev" &&
		ip link set "$dev" netns "$ns" &&
		ip link set "r$dev" netns "$router" &&
		inns "$ns" ip link set lo up &&
		inns "$ns" ip addr add "$net.1/24" dev "$dev" &&
		inns "$ns" ip link set "$dev" up &&
		inns "$ns" ip route add default via "$net.254" &&
		inns "$router" ip addr add "$net.254/24" dev "r$dev" &&
		inns "$router" ip link set "r$dev" up &&
		inns "$ns" rdma link add "rx$dev" type rxud netdev "$dev"
}

# mesh_teardown NS...: deletes the rxud devices, then the namespaces (and
# their veths with them), and waits until no RDMA device is left.
mesh_teardown() {
	local ns d
	for d in $(rdma link show | sed -n 's/^link \(rx[a-z0-9]*\)\/1 .*/\1/p'); do
		rdma link delete "$d"
	done
	for ns in "$@"; do
		ip netns del "$ns"
	done
	wait_for 30 test "$(ib_count)" = 0
}
