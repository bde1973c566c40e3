#!/usr/bin/env bash
# Each way `rdma link add` can be misused fails with the errno a user
# should see and leaves no device behind.
. "$(dirname "$0")/../lib/tap.sh"
. "$(dirname "$0")/../lib/rxud.sh"
IF=${RXUD_IF:?no test NIC}
TAP_PLANNED=13
tap_begin $TAP_PLANNED

rxud_load
ip link add rxudtest0 type dummy
ip link set rxudtest0 up
check "rxud0 on $IF" rdma link add rxud0 type rxud netdev "$IF"
n=$(ib_count)

check_fails "unknown netdev: ENODEV" "No such device" rdma link add rxud1 type rxud netdev nosuchdev0
check_fails "duplicate device name: EEXIST" "File exists" rdma link add rxud0 type rxud netdev rxudtest0
check_fails "netdev already bound: EEXIST" "File exists" rdma link add rxud1 type rxud netdev "$IF"
check_fails "loopback (not Ethernet): EOPNOTSUPP" "Operation not supported" rdma link add rxud1 type rxud netdev lo
ip link add link rxudtest0 name rxudtest1 type vlan id 7
if [ -e /sys/class/net/rxudtest1 ]; then
	check_fails "VLAN device: EOPNOTSUPP" "Operation not supported" rdma link add rxud1 type rxud netdev rxudtest1
	ip link del rxudtest1
else
	# VLAN support is not in every test kernel: the case cannot be made here.
	tap_skip "VLAN device: EOPNOTSUPP" "no 802.1Q in this kernel"
fi
check_fails "unknown link type" "Invalid argument" rdma link add rxud1 type nosuchtype netdev rxudtest0
check_eq "no device left behind by failures" "$n" "$(ib_count)"
check "rxud1 does not exist" ib_gone rxud1

# Concurrent adds on one netdev: exactly one wins.
for i in 1 2 3 4 5 6; do
	rdma link add "rxudrace$i" type rxud netdev rxudtest0 2>/dev/null &
done
wait
won=$(find /sys/class/infiniband -maxdepth 1 -name 'rxudrace*' | wc -l)
check_eq "six racing adds on one netdev: one device" 1 "$won"
for d in /sys/class/infiniband/rxudrace*; do rdma link delete "${d##*/}"; done

# Add/delete churn: each cycle registers and unregisters an ib_device.
churn() {
	for i in $(seq 1 10); do
		rdma link add rxudc type rxud netdev rxudtest0 && rdma link delete rxudc || return 1
	done
}
check "10 add/delete cycles" churn
check "rdma link delete rxud0" rdma link delete rxud0
ip link del rxudtest0
check "rmmod after error cases" rxud_unload
tap_end
