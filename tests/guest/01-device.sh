#!/usr/bin/env bash
# rxud.ko loads; `rdma link add` makes an ib_device on the VM's NIC that
# ib_core and sysfs describe correctly; `rdma link delete` and rmmod remove
# it; the module reloads cleanly.
. "$(dirname "$0")/../lib/tap.sh"
. "$(dirname "$0")/../lib/rxud.sh"
IF=${RXUD_IF:?no test NIC}
TAP_PLANNED=17

link_on() { rdma link show "$1/1" | grep -qw "netdev $2"; }
dev_is_ca() { rdma dev show "$1" | grep -q 'node_type ca'; }
two_devices() { rdma link add rxud0 type rxud netdev "$IF" && rdma link add rxud1 type rxud netdev rxudtest0; }
rmmod_removes_all() { rmmod rxud && ib_gone rxud0 && ib_gone rxud1 && ! rxud_loaded; }
reload_serves() { rxud_load && rdma link add rxud0 type rxud netdev "$IF" && rdma link delete rxud0 && rxud_unload; }
tap_begin $TAP_PLANNED

check "insmod rxud.ko" rxud_load
check "module is live" grep -qx live /sys/module/rxud/initstate
check "rdma link add rxud0 type rxud netdev $IF" rdma link add rxud0 type rxud netdev "$IF"
check "rxud0 in /sys/class/infiniband" ib_exists rxud0
check "rdma link show lists rxud0/1 on $IF" link_on rxud0 "$IF"
check_eq "port 1 is ACTIVE (carrier up)" ACTIVE "$(port_state rxud0)"
check_eq "node type is CA" "1: CA" "$(cat /sys/class/infiniband/rxud0/node_type)"
check_eq "link layer is Ethernet" Ethernet "$(cat /sys/class/infiniband/rxud0/ports/1/link_layer)"
check_eq "node GUID is the EUI-64 of $IF's MAC" "$(netdev_eui64 "$IF")" "$(cat /sys/class/infiniband/rxud0/node_guid)"
check_eq "P_Key 0 is the default 0xffff" 0xffff "$(cat /sys/class/infiniband/rxud0/ports/1/pkeys/0)"
check "GID table has $RXUD_SELF_IP as a RoCE v2 GID" \
	wait_for 5 has_gid rxud0 "$(ipv4_gid "$RXUD_SELF_IP")" "RoCE v2"
check "rdma dev show reports rxud0 as a CA" dev_is_ca rxud0
check "rdma link delete rxud0" rdma link delete rxud0
check "rxud0 is gone after delete" ib_gone rxud0

# rmmod with devices present removes them all.
ip link add rxudtest0 type dummy
check "two devices before rmmod" two_devices
check "rmmod with devices present removes them" rmmod_removes_all
ip link del rxudtest0
check "module reloads and serves again" reload_serves
tap_end
