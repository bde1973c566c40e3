# Helpers for tests that drive rxud in a guest. Source after tap.sh.
# shellcheck shell=bash

# -P: the kselftest runner runs a test from a symlink to its directory
# (tests/lib/ksft.mk); the tree is where the link points.
RXUD_TOP=${RXUD_TOP:-$(cd -P "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)}
RXUD_KO=${RXUD_KO:-$RXUD_TOP/rxud.ko}

rxud_loaded() { [ -d /sys/module/rxud ]; }
# rxud.ko needs the UDP tunnel modules; insmod does not load dependencies.
rxud_deps() { modprobe -a udp_tunnel ip6_udp_tunnel; }
rxud_load() { rxud_loaded || { rxud_deps && insmod "$RXUD_KO"; }; }
rxud_unload() { ! rxud_loaded || rmmod rxud; }
# rxud_trains on|off: the module's trains parameter (a QP's consecutive
# packets to IP as one GSO skb; Documentation/design.rst).
rxud_trains() { echo "$([ "$1" = on ] && echo 1 || echo 0)" >/sys/module/rxud/parameters/trains; }

ib_exists() { [ -e "/sys/class/infiniband/$1" ]; }
ib_gone() { ! ib_exists "$1"; }
ib_count() { find /sys/class/infiniband -mindepth 1 -maxdepth 1 2>/dev/null | wc -l; }

# The modified EUI-64 of a netdev's MAC, as sysfs prints a GUID
# (xxxx:xxxx:xxxx:xxxx).
netdev_eui64() {
	local m
	IFS=: read -r -a m <"/sys/class/net/$1/address"
	printf '%02x%s:%sff:fe%s:%s%s\n' $((0x${m[0]} ^ 2)) "${m[1]}" "${m[2]}" "${m[3]}" "${m[4]}" "${m[5]}"
}

# The RoCEv2 GID sysfs shows for an IPv4 address: ::ffff:a.b.c.d in hex.
ipv4_gid() {
	local a b c d
	IFS=. read -r a b c d <<<"$1"
	printf '0000:0000:0000:0000:0000:ffff:%02x%02x:%02x%02x\n' "$a" "$b" "$c" "$d"
}

# has_gid DEV GID TYPE: the port-1 GID table holds GID with that type.
# One grep reads all 1024 entries: a process per entry takes minutes under
# TCG.
has_gid() {
	local f i
	for f in $(grep -lx -- "$2" /sys/class/infiniband/"$1"/ports/1/gids/* 2>/dev/null); do
		i=${f##*/}
		[ "$(cat "/sys/class/infiniband/$1/ports/1/gid_attrs/types/$i" 2>/dev/null)" = "$3" ] && return 0
	done
	return 1
}

# port_state DEV: the state word of `rdma link show DEV/1` (ACTIVE, DOWN).
port_state() { rdma link show "$1/1" | sed -n 's/.* state \([A-Z_]*\) .*/\1/p'; }
port_is() { [ "$(port_state "$1")" = "$2" ]; }
no_gid() { ! has_gid "$@"; }
netdev_gone() { ! [ -e "/sys/class/net/$1" ]; }

# barrier NAME [SECONDS]: in a VM pair, wait until the peer VM reaches the
# barrier of the same name too (both VMs see the run's output directory).
barrier() {
	local peer_dir=${RXUD_OUT%/vm*}/vm$((1 - RXUD_VM))
	touch "$RXUD_OUT/barrier.$1"
	wait_for "${2:-120}" test -e "$peer_dir/barrier.$1"
}

# rxud_beside_rxe: rxe0 and rxud0 side by side for comparisons. rxe binds
# UDP 4791 of the initial namespace, so rxud0 lives in a namespace of its
# own (rxudns) on one end of a veth pair whose other end carries rxe0; both
# ends have the same MAC, so the two devices' GUIDs agree too. Loads rxe.
rxud_beside_rxe() {
	ip netns add rxudns &&
		ip link add rxudv0 type veth peer name rxudv1 &&
		# udev may give new veths a MAC of its own after they appear:
		# let it finish, then set both ends.
		{ udevadm settle 2>/dev/null || true; } &&
		ip link set rxudv0 address 02:52:58:55:44:01 &&
		ip link set rxudv1 address 02:52:58:55:44:01 &&
		ip link set rxudv1 netns rxudns &&
		ip addr add 169.254.200.1/24 dev rxudv0 &&
		ip link set rxudv0 up &&
		inns rxudns ip addr add 169.254.200.2/24 dev rxudv1 &&
		inns rxudns ip link set rxudv1 up &&
		inns rxudns ip link set lo up &&
		modprobe rdma_rxe &&
		rdma link add rxe0 type rxe netdev rxudv0 &&
		inns rxudns rdma link add rxud0 type rxud netdev rxudv1
}

# rxud_beside_rxe_looped: rxud_beside_rxe for tests between two QPs of
# one device (or rxe0 talking to rxud0). rxud_beside_rxe gives both veth
# ends one MAC, but rxe takes any packet to its own MAC for loopback
# (rxe_prepare: RXE_LOOPBACK_MASK) and would keep what it sends to rxud0
# to itself: rxe0's end gets a MAC of its own. Then checks that both
# devices have a RoCE v2 GID (two TAP checks) and sets g_rxe and g_rxud
# to their indices.
rxud_beside_rxe_looped() {
	rxud_beside_rxe
	ip link set rxudv0 address 02:52:58:55:44:02
	check "rxe0 has a RoCE v2 GID" wait_for 10 v2_gid_index rxe0
	check "rxud0 has a RoCE v2 GID" wait_for 10 v2_gid_index rxud0
	g_rxe=$(v2_gid_index rxe0)
	g_rxud=$(v2_gid_index rxud0)
}

# rxud_beside_rxe_end: undoes rxud_beside_rxe.
rxud_beside_rxe_end() {
	rdma link delete rxe0
	inns rxudns rdma link delete rxud0
	ip link del rxudv0
	ip netns del rxudns
	rmmod rdma_rxe
}

# v2_gid_index DEV [PREFIX]: the GID index of DEV's RoCE v2 GID that starts
# with PREFIX (default: an IPv4 address's, ::ffff:a.b.c.d). Shell builtins
# only, in index order, stopping at the first match (the addresses' GIDs
# come first): under TCG a process costs some 70 ms, and a grep over the
# whole table (1024 entries) a second, paid again by every try of a
# wait_for.
v2_gid_index() {
	local f i gid type prefix=${2:-0000:0000:0000:0000:0000:ffff:}
	for f in /sys/class/infiniband/"$1"/ports/1/gids/*; do
		read -r gid <"$f" 2>/dev/null || continue
		[[ $gid == "$prefix"* ]] || continue
		i=${f##*/}
		read -r type <"/sys/class/infiniband/$1/ports/1/gid_attrs/types/$i" 2>/dev/null || continue
		[ "$type" = "RoCE v2" ] && { echo "$i"; return; }
	done
	return 1
}

# inns NS CMD...: CMD in network namespace NS ("-": this one). nsenter
# joins the network namespace only; `ip netns exec` also makes a mount
# namespace and remounts /sys there, which costs a TCG guest half a second
# per command and leaves libibverbs a cold sysfs to walk. Nothing here
# reads /sys/class/net from inside a namespace.
inns() {
	local ns=$1
	shift
	if [ "$ns" = - ]; then "$@"; else nsenter --net="/run/netns/$ns" "$@"; fi
}

# bg_in NS CMD...: CMD in network namespace NS ("-": this one) as a
# background job of its own: $! is then CMD's PID (inns, a function, would
# leave a subshell's), and /proc/$!/net shows NS once nsenter has entered
# it. Redirections given to bg_in apply to CMD.
bg_in() {
	local ns=$1
	shift
	if [ "$ns" = - ]; then "$@" & else nsenter --net="/run/netns/$ns" "$@" & fi
}

# tcp_socket PID PORT [STATE]: the network namespace of process PID has a
# TCP socket on local PORT (IPv4 or IPv6) in STATE, /proc/net/tcp's hex
# code (default 0A, listening; 01 is established). Reads /proc/PID/net:
# no process (ss costs almost a second under TCG, and wait_for polls it).
tcp_socket() {
	local f local_addr state port_hex want=${3:-0A}
	port_hex=$(printf '%04X' "$2")
	for f in /proc/"$1"/net/tcp /proc/"$1"/net/tcp6; do
		# shellcheck disable=SC2034 # sl: the line's first column
		while read -r sl local_addr _ state _; do
			[ "$state" = "$want" ] && [[ $local_addr == *":$port_hex" ]] && return 0
		done <"$f" 2>/dev/null
	done
	return 1
}
