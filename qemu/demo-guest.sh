#!/usr/bin/env bash
# Runs in each VM of `make run` (qemu/run-pair-demo.sh): load rxud, create
# rxud0 on the link, show it as ib_core and libibverbs see it, send IP
# traffic, then RDMA traffic over rxud (ibv_ud_pingpong, then
# ibv_rc_pingpong: vm0 serves, vm1 connects) and show the port counters.
set -e
top=$(cd "$(dirname "$0")/.." && pwd)
modprobe -a udp_tunnel ip6_udp_tunnel # rxud.ko needs them; insmod does not load them
insmod "$top/rxud.ko"
rdma link add rxud0 type rxud netdev "$RXUD_IF"
echo "== vm$RXUD_VM: rdma link / rdma dev"
rdma link show rxud0/1
rdma dev show rxud0
echo "== vm$RXUD_VM: ibv_devinfo through librxud"
RDMAV_DRIVERS=$top/rdma-core-provider/build/librxud ibv_devinfo -d rxud0
echo "== vm$RXUD_VM: traffic to $RXUD_PEER_IP"
for _ in $(seq 60); do ping -c 1 -W 1 "$RXUD_PEER_IP" >/dev/null && break; done
ping -c 5 -i 0.2 "$RXUD_PEER_IP"
# The RoCE v2 GID of the link's IPv4 address.
gid=
for _ in $(seq 50); do
	for f in /sys/class/infiniband/rxud0/ports/1/gids/*; do
		i=${f##*/}
		grep -q '^0000:0000:0000:0000:0000:ffff:' "$f" &&
			[ "$(cat /sys/class/infiniband/rxud0/ports/1/gid_attrs/types/$i)" = "RoCE v2" ] && gid=$i && break
	done
	[ -n "$gid" ] && break
	sleep 0.2
done
peer_out=${RXUD_OUT%/vm*}/vm$((1 - RXUD_VM))
export RDMAV_DRIVERS=$top/rdma-core-provider/build/librxud
echo "== vm$RXUD_VM: RDMA over rxud: ibv_ud_pingpong (GID index $gid)"
if [ "$RXUD_VM" = 0 ]; then
	touch "$RXUD_OUT/pingpong-ready"
	timeout 120 ibv_ud_pingpong -d rxud0 -g "$gid" -s 1024 -n 100
else
	for _ in $(seq 120); do [ -e "$peer_out/pingpong-ready" ] && break; sleep 0.5; done
	sleep 2
	timeout 120 ibv_ud_pingpong -d rxud0 -g "$gid" -s 1024 -n 100 "$RXUD_PEER_IP"
fi
echo "== vm$RXUD_VM: RDMA over rxud: ibv_rc_pingpong (RC, 8 KB messages, data checked)"
if [ "$RXUD_VM" = 0 ]; then
	touch "$RXUD_OUT/rc-pingpong-ready"
	timeout 120 ibv_rc_pingpong -d rxud0 -g "$gid" -m 1024 -s 8192 -n 100 -c
else
	for _ in $(seq 120); do [ -e "$peer_out/rc-pingpong-ready" ] && break; sleep 0.5; done
	sleep 2
	timeout 120 ibv_rc_pingpong -d rxud0 -g "$gid" -m 1024 -s 8192 -n 100 -c "$RXUD_PEER_IP"
fi
echo "== vm$RXUD_VM: port counters"
rdma statistic show link rxud0/1
# Stay up until the peer has reached us too.
touch "$RXUD_OUT/demo-done"
peer=${RXUD_OUT%/vm*}/vm$((1 - RXUD_VM))/demo-done
for _ in $(seq 120); do [ -e "$peer" ] && break; sleep 0.5; done
rdma link delete rxud0
rmmod rxud
echo "== vm$RXUD_VM: done"
