#!/usr/bin/env bash
# Runs in each VM of `make run` (qemu/run-pair-demo.sh): load rxud, create
# rxud0 on the link, show it as ib_core and libibverbs see it, send IP
# traffic, then RDMA traffic over rxud (ibv_ud_pingpong, ibv_rc_pingpong,
# ib_write_bw, rping over rdma_cm, and XUD with rxud-perf: vm0 serves, vm1
# connects) and show the port counters.
#   qemu/demo-guest.sh [--tests]: --tests runs the two-VM test suite
#   (tests/guest-pair) first, and saves the kernel log at the end.
set -e
top=$(cd "$(dirname "$0")/.." && pwd)
if [ "${1:-}" = --tests ]; then
	# The suite's result is in its TAP; the demo runs whatever it says.
	"$top/tests/guest-runner.sh" "$top/tests/guest-pair" || true
	trap 'dmesg >"$RXUD_OUT/dmesg.txt"' EXIT
fi
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
# across NAME CMD...: CMD in both VMs, vm0 serving and vm1 connecting to
# it (CMD with vm0's address last).
across() {
	local name=$1
	shift
	if [ "$RXUD_VM" = 0 ]; then
		touch "$RXUD_OUT/$name-ready"
		timeout 120 "$@"
	else
		for _ in $(seq 120); do [ -e "$peer_out/$name-ready" ] && break; sleep 0.5; done
		sleep 2
		timeout 120 "$@" "$RXUD_PEER_IP"
	fi
}
echo "== vm$RXUD_VM: RDMA over rxud: ibv_ud_pingpong (GID index $gid)"
across ud-pingpong ibv_ud_pingpong -d rxud0 -g "$gid" -s 1024 -n 100
echo "== vm$RXUD_VM: RDMA over rxud: ibv_rc_pingpong (RC, 8 KB messages, data checked)"
across rc-pingpong ibv_rc_pingpong -d rxud0 -g "$gid" -m 1024 -s 8192 -n 100 -c
echo "== vm$RXUD_VM: RDMA over rxud: ib_write_bw (RC RDMA WRITE, 64 KB x 200)"
across write-bw ib_write_bw -d rxud0 -x "$gid" -s 65536 -n 200
# rdma_cm: the connection is set up by the IB CM over rxud's GSI QP.
echo "== vm$RXUD_VM: RDMA over rxud: rping (rdma_cm, 20 ping-pongs, data checked)"
if [ "$RXUD_VM" = 0 ]; then
	across rping rping -s -C 20 -V -a "$RXUD_SELF_IP"
else
	# The server may not listen yet when the first try comes.
	for _ in 1 2 3; do across rping rping -c -C 20 -v -V -a && break; sleep 2; done
fi
# XUD: one reliable connectionless QP on vm1 sending to two XUD QPs on vm0
# (rxud-perf, XUD's perftest; the server checks every message's bytes).
echo "== vm$RXUD_VM: XUD over rxud: rxud-perf SEND bandwidth (64 KB x 300, one QP to 2 peers)"
across xud-send "$top/tests/verbs/rxud-perf" -d rxud0 -x "$gid" -p 18520 \
	$([ "$RXUD_VM" = 0 ] && echo "-q 2" || echo "-t bw -o send -s 65536 -n 300")
echo "== vm$RXUD_VM: XUD over rxud: rxud-perf SEND latency (64 B x 300)"
across xud-lat "$top/tests/verbs/rxud-perf" -d rxud0 -x "$gid" -p 18521 \
	$([ "$RXUD_VM" = 0 ] && echo "-q 1" || echo "-t lat -s 64 -n 300")
echo "== vm$RXUD_VM: port counters"
rdma statistic show link rxud0/1
# Stay up until the peer has reached us too.
touch "$RXUD_OUT/demo-done"
peer=${RXUD_OUT%/vm*}/vm$((1 - RXUD_VM))/demo-done
for _ in $(seq 120); do [ -e "$peer" ] && break; sleep 0.5; done
rdma link delete rxud0
rmmod rxud
echo "== vm$RXUD_VM: done"
