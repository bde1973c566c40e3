#!/usr/bin/env bash
# Routed RoCEv2 between namespaces (tests/guest/26-pingmesh.sh,
# 27-incast.sh): one router namespace, and hosts each in a namespace of
# their own with one veth to it and an rxud device on that veth. Each link
# is a /24 of its own (host .1, router .254), so every packet between two
# hosts is routed once, as between racks. Needs tests/lib/rxud.sh.
#
# ib_core is in its exclusive namespace mode meanwhile (`rdma system set
# netns exclusive`, from mesh_router until mesh_teardown): in the shared
# mode, its default, every RDMA device gets a compat device (sysfs and
# char devices) in every namespace, 17 devices times 19 namespaces for a
# pingmesh of 16, which cost a loaded guest minutes and hundreds of MB.
# In the exclusive mode the devices `rdma link add` makes stay in the
# initial namespace, where the tests' processes use them: only their
# netdevs, and so their traffic, are in the hosts' namespaces.

# mesh_router NS: the router namespace, forwarding IPv4. The first
# namespace of a mesh: ib_core changes its mode only while no namespace
# but the initial one exists (an earlier test's may still be going away).
mesh_router() {
	wait_for 60 rdma system set netns exclusive || return 1
	ip netns add "$1" &&
		ip -n "$1" link set lo up &&
		inns "$1" sysctl -qw net.ipv4.ip_forward=1
}

# Each command costs a TCG guest a fraction of a second to start: the
# hosts are made in few of them (ip's -n and -batch, both veth ends put in
# their namespaces as they are made), a dozen hosts in seconds.

# mesh_host ROUTER NS DEV NET: namespace NS with veth DEV at NET.1/24, its
# router end (rDEV, in ROUTER) at NET.254 and its default route; rxud
# device rxDEV on DEV.
mesh_host() {
	local router=$1 ns=$2 dev=$3 net=$4
	ip netns add "$ns" &&
		ip link add "$dev" netns "$ns" type veth peer name "r$dev" netns "$router" &&
		ip -n "$ns" -batch - <<-EOF &&
			link set lo up
			addr add $net.1/24 dev $dev
			link set $dev up
			route add default via $net.254
		EOF
		ip -n "$router" -batch - <<-EOF &&
			addr add $net.254/24 dev r$dev
			link set r$dev up
		EOF
		inns "$ns" rdma link add "rx$dev" type rxud netdev "$dev"
}

# mesh_teardown NS...: deletes the rxud devices, then the namespaces (and
# their veths with them), waits until no RDMA device is left, and puts
# ib_core back in its shared mode once the namespaces are gone.
mesh_teardown() {
	rdma link show | sed -n 's/^link \(rx[a-z0-9]*\)\/1 .*/link delete \1/p' | rdma -b - &&
		printf 'netns del %s\n' "$@" | ip -batch - &&
		wait_for 30 test "$(ib_count)" = 0 &&
		wait_for 60 rdma system set netns shared
}
