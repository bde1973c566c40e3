#!/usr/bin/env bash
# librxud: libibverbs finds rxud devices through it, and only those;
# ibv_devinfo reports what the kernel says, and what rxe reports for the
# same netdev where the two must agree.
. "$(dirname "$0")/../lib/tap.sh"
. "$(dirname "$0")/../lib/rxud.sh"
IF=${RXUD_IF:?no test NIC}
TAP_PLANNED=20
tap_begin $TAP_PLANNED
export RDMAV_DRIVERS=$RXUD_TOP/rdma-core-provider/build/librxud

rxud_load
check "rxud0 and rxe0 side by side (rxud0 in its own namespace)" rxud_beside_rxe
devices=$(ibv_devices 2>&1)
check "ibv_devices lists rxud0" grep -qw rxud0 <<<"$devices"
check "ibv_devices still lists rxe0 (librxud does not break other providers)" grep -qw rxe0 <<<"$devices"
check_eq "rxud_abi_version sysfs attribute" 1 "$(cat /sys/class/infiniband/rxud0/rxud_abi_version)"
check "no rxud_abi_version on rxe0" test ! -e /sys/class/infiniband/rxe0/rxud_abi_version

# field NAME DEVINFO: the value column of one ibv_devinfo line.
field() { sed -n "s/^[[:space:]]*$1:[[:space:]]*//p" <<<"$2" | head -n1; }
rxud=$(ibv_devinfo -v -d rxud0 2>&1)
rxe=$(ibv_devinfo -v -d rxe0 2>&1)
check "ibv_devinfo -v -d rxud0 opens the device" grep -q '^hca_id:[[:space:]]*rxud0' <<<"$rxud"
check "rxe0 is opened by rxe's provider, not librxud" grep -q 'fw_ver' <<<"$rxe"
for f in node_guid transport phys_port_cnt state max_mtu active_mtu link_layer pkey_tbl_len; do
	a=$(field "$f" "$rxud") b=$(field "$f" "$rxe")
	if [ -n "$a" ] && [ "$a" = "$b" ]; then
		tap_ok "$f agrees with rxe ($a)"
	else
		tap_not_ok "$f agrees with rxe"
		printf 'rxud: %s\nrxe:  %s\n' "$a" "$b" | tap_diag
	fi
done
rxud_beside_rxe_end

# The active MTU follows the link MTU, leaving room for RoCEv2 headers.
ip link add rxudm0 type dummy
ip link set rxudm0 up
rdma link add rxudm type rxud netdev rxudm0
for pair in 1500:1024 9000:4096 2200:2048 2100:1024 400:256; do
	ip link set rxudm0 mtu "${pair%%:*}"
	got=$(field active_mtu "$(ibv_devinfo -d rxudm 2>&1)")
	check_eq "link MTU ${pair%%:*} gives active_mtu ${pair##*:}" "${pair##*:}" "${got%% *}"
done
rdma link delete rxudm
ip link del rxudm0
rxud_unload
tap_end
