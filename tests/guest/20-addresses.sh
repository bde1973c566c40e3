#!/usr/bin/env bash
# Hosts with several addresses, and VLAN devices (Documentation/xud.rst,
# "Addresses"; design.rst, "Addresses and VLANs"): two rxud devices, each
# in a network namespace of its own on one end of a veth pair, each
# netdev with two IPv4 and two IPv6 addresses, and a VLAN device (802.1Q,
# id 100) on top of each with an address of each family.
#
# XUD (tests/verbs/xud-data -T): A's messages alternate between two of
# B's addresses while B sends to A from the first. B keeps a stream per
# address of its own that A targets and answers each from the address A
# targeted, the only one A takes answers from; else A's sends to the
# second address fail RETRY_EXC_ERR.
#
# VLAN: ib_core gives each port the GIDs of its netdev's VLAN device;
# RC (ibv_rc_pingpong), UD (ibv_ud_pingpong) and XUD between those GIDs
# work, their packets go out tagged on the VLAN device and are received
# from it (the VLAN devices' packet counts show the traffic).
. "$(dirname "$0")/../lib/tap.sh"
. "$(dirname "$0")/../lib/rxud.sh"
. "$(dirname "$0")/../lib/traffic.sh"
XD=$RXUD_TOP/tests/verbs/xud-data
TAP_PLANNED=10
tap_begin $TAP_PLANNED
export RDMAV_DRIVERS=$RXUD_TOP/rdma-core-provider/build/librxud

SIP=169.254.220.1 # rxud0's first address (mv0, in ma)
CIP=169.254.220.2 # rxud1's (mv1, in mb)
SIP2=169.254.220.11
CIP2=169.254.220.12
# IPv6 addresses and their GIDs as sysfs prints them.
SIP6=fd00:220::1 SIP6_GID=fd00:0220:0000:0000:0000:0000:0000:0001
SIP6B=fd00:220::11 SIP6B_GID=fd00:0220:0000:0000:0000:0000:0000:0011
CIP6=fd00:220::2 CIP6_GID=fd00:0220:0000:0000:0000:0000:0000:0002
CIP6B=fd00:220::12 CIP6B_GID=fd00:0220:0000:0000:0000:0000:0000:0012
# The VLAN devices' addresses; GID prefixes that match both ends'.
VSIP=169.254.230.1 VCIP=169.254.230.2
VSIP6=fd00:230::1 VCIP6=fd00:230::2
VLAN4_PREFIX=0000:0000:0000:0000:0000:ffff:a9fe:e60
VLAN6_PREFIX=fd00:0230:

counters() {
	for d in rxud0 rxud1; do
		echo "$d: $(cd /sys/class/infiniband/$d/ports/1/hw_counters &&
			grep -H . xud_acks_* xud_peers_added rx_drop_* tx_errors 2>/dev/null | tr '\n' ' ')"
	done | tap_diag
}

# xud_data DESC ARGS...: one run of xud-data, A = rxud0, B = rxud1.
xud_data() {
	local desc=$1 out rc t=$SECONDS
	shift
	out=$(inns ma timeout 120 "$XD" -d rxud0 -D rxud1 -n 40 -m 16384 "$@" 2>&1)
	rc=$?
	printf '%s\n' "xud-data $* ($((SECONDS - t)) s):" "$out" | tap_diag
	counters
	check_eq "$desc" 0 "$rc"
}

# vlan_packets NS DEV: DEV's received plus sent packets (/proc/net/dev of
# NS: sysfs shows the initial namespace's devices).
vlan_packets() {
	inns "$1" awk -v d="$2:" '$1 == d { print $3 + $11 }' /proc/net/dev
}

rxud_load
rxud_pair ma mb mv0 mv1
inns ma ip addr add $SIP2/24 dev mv0
inns mb ip addr add $CIP2/24 dev mv1
inns ma ip addr add $SIP6/64 dev mv0 nodad
inns ma ip addr add $SIP6B/64 dev mv0 nodad
inns mb ip addr add $CIP6/64 dev mv1 nodad
inns mb ip addr add $CIP6B/64 dev mv1 nodad
check "each port has the GIDs of its netdev's two IPv4 and two IPv6 addresses" \
	wait_for 10 eval 'v2_gid_index rxud0 $(ipv4_gid $SIP2) && v2_gid_index rxud1 $(ipv4_gid $CIP2) &&
		v2_gid_index rxud0 $SIP6B_GID && v2_gid_index rxud1 $CIP6B_GID'

a4=$(v2_gid_index rxud0 "$(ipv4_gid $SIP)")
b4=$(v2_gid_index rxud1 "$(ipv4_gid $CIP)")
b4b=$(v2_gid_index rxud1 "$(ipv4_gid $CIP2)")
a6=$(v2_gid_index rxud0 $SIP6_GID)
b6=$(v2_gid_index rxud1 $CIP6_GID)
b6b=$(v2_gid_index rxud1 $CIP6B_GID)
xud_data "XUD, IPv4: A sends to B's $CIP and $CIP2 alternately, B to A from $CIP: every message once, every send answered" \
	-g "${a4:-0}" -G "${b4:-0}" -T "${b4b:-0}" -s 1
xud_data "XUD, IPv6: A sends to B's $CIP6 and $CIP6B alternately, B to A from $CIP6: every message once, every send answered" \
	-g "${a6:-0}" -G "${b6:-0}" -T "${b6b:-0}" -s 2

# VLAN 100 on top of each netdev.
inns ma ip link add link mv0 name mv0.100 type vlan id 100
inns mb ip link add link mv1 name mv1.100 type vlan id 100
inns ma ip addr add $VSIP/24 dev mv0.100
inns mb ip addr add $VCIP/24 dev mv1.100
inns ma ip addr add $VSIP6/64 dev mv0.100 nodad
inns mb ip addr add $VCIP6/64 dev mv1.100 nodad
inns ma ip link set mv0.100 up
inns mb ip link set mv1.100 up
check "each port has the GIDs of its VLAN device's addresses (ib_core)" \
	wait_for 10 eval 'v2_gid_index rxud0 $(ipv4_gid $VSIP) && v2_gid_index rxud1 $(ipv4_gid $VCIP) &&
		v2_gid_index rxud0 fd00:0230:0000:0000:0000:0000:0000:0001 &&
		v2_gid_index rxud1 fd00:0230:0000:0000:0000:0000:0000:0002'
wait_for 10 inns mb ping -c1 -W1 $VSIP >/dev/null
wait_for 10 inns mb ping -c1 -W1 $VSIP6 >/dev/null

v0=$(vlan_packets ma mv0.100)
v1=$(vlan_packets mb mv1.100)
CLI_OUT=/tmp/20-cli.out SRV_OUT=/tmp/20-srv.out
# The pingpongs exchange their QPs' addresses over TCP to $SIP (untagged):
# the VLAN devices carry RoCE alone.
GID_PREFIX=$VLAN4_PREFIX run_pair ma rxud0 mb rxud1 ibv_rc_pingpong -n 50
check "RC between the VLAN devices' IPv4 GIDs (ibv_rc_pingpong -n 50)" \
	grep -q '50 iters' "$CLI_OUT"
GID_PREFIX=$VLAN6_PREFIX run_pair ma rxud0 mb rxud1 ibv_ud_pingpong -n 50
check "UD between the VLAN devices' IPv6 GIDs (ibv_ud_pingpong -n 50)" \
	grep -q '50 iters' "$CLI_OUT"
xud_data "XUD between the VLAN devices' IPv4 GIDs" \
	-g "$(v2_gid_index rxud0 $VLAN4_PREFIX)" -G "$(v2_gid_index rxud1 $VLAN4_PREFIX)" -s 3
d0=$(($(vlan_packets ma mv0.100) - v0))
d1=$(($(vlan_packets mb mv1.100) - v1))
# Each device sent 50 and received 50 messages of each pingpong (200),
# besides RC's ACKs and XUD's 40 messages and their ACKs.
check "the RoCE went tagged, over the VLAN devices (mv0.100 +$d0, mv1.100 +$d1 packets in and out)" \
	test "$d0" -ge 200 -a "$d1" -ge 200
counters

inns ma rdma link delete rxud0
inns mb rdma link delete rxud1
ip netns del ma
ip netns del mb
check "no RDMA device left" wait_for 10 test "$(ib_count)" = 0
check "rmmod rxud" rxud_unload
tap_end
