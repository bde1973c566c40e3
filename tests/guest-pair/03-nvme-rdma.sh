#!/usr/bin/env bash
# NVMe over Fabrics over rxud (issue 28, item 2), a real kernel consumer.
# vm0 is the target (nvmet: a subsystem whose namespace is a file in the
# guest's memory, an RDMA port on 4420), vm1 the host (nvme-rdma). Each
# round: nvme discover, nvme connect with two IO queues, fio with data
# verification (crc32c, 4 KB random reads and writes, queue depth 32, two
# jobs), nvme disconnect. Rounds:
#   rxud to rxud; again under 1% loss (netem on the host's link); again
#   across a 5 s link down and up on the host during the IO (the host
#   reconnects, every verified block is right); then interop: an rxe
#   target with an rxud host, and an rxud target with an rxe host.
# Then the target comes down and rxud unloads on both: nothing held.
. "$(dirname "$0")/../lib/tap.sh"
. "$(dirname "$0")/../lib/rxud.sh"
IF=${RXUD_IF:?no test NIC}
ROUNDS=(rxud loss flap rxe-target rxe-host)
# vm0: device, target, the port moved twice (interop), each round's end,
# target down, unload. vm1: device; per round: target up, discover,
# connect, fio, disconnect; the device swapped twice (rxe-host); unload.
TAP_PLANNED=$([ "$RXUD_VM" = 0 ] && echo $((2 + 2 + 5 + 2)) || echo $((1 + 5 * 5 + 1 + 2 + 1)))
tap_begin $TAP_PLANNED
NQN=nqn.2026-11.dev.rxud:test
CFS=/sys/kernel/config/nvmet
W=$RXUD_OUT/nvme
mkdir -p "$W"

# check_here DESC CMD...: check, with CMD run in this shell (check runs it
# in a subshell), for the commands that set DEV.
check_here() {
	local desc=$1
	shift
	if "$@" >"$W/cmd.log" 2>&1; then
		tap_ok "$desc"
	else
		tap_not_ok "$desc"
		tap_diag <"$W/cmd.log"
		tap_bail_if_fast
	fi
}

# use_device rxud|rxe: this VM's RoCE device on the test NIC becomes rxud0
# or rxe0 (rxe and rxud both bind UDP 4791: one at a time).
DEV=
use_device() {
	if [ -n "$DEV" ]; then
		rdma link delete "$DEV" || return
		# rxe holds UDP 4791 from its load to its unload, not its
		# devices' lives.
		[ "$DEV" != rxe0 ] || modprobe -r rdma_rxe || return
	fi
	case $1 in
	rxud)
		{ [ -d /sys/module/rxud ] || { modprobe -a udp_tunnel ip6_udp_tunnel && insmod "$RXUD_KO"; }; } &&
			rdma link add rxud0 type rxud netdev "$IF" && DEV=rxud0 ;;
	rxe)
		modprobe rdma_rxe && rdma link add rxe0 type rxe netdev "$IF" && DEV=rxe0 ;;
	esac && wait_for 10 v2_gid_index "$DEV"
}

# The target: a subsystem with one namespace, and its RDMA port (which
# listens on whatever RoCE device holds the address).
target_up() {
	modprobe -a nvmet nvmet-rdma &&
		{ mountpoint -q /sys/kernel/config || mount -t configfs none /sys/kernel/config; } &&
		modprobe null_blk nr_devices=1 gb=1 memory_backed=1 queue_mode=2 &&
		mkdir "$CFS/subsystems/$NQN" &&
		echo 1 >"$CFS/subsystems/$NQN/attr_allow_any_host" &&
		mkdir "$CFS/subsystems/$NQN/namespaces/1" &&
		echo /dev/nullb0 >"$CFS/subsystems/$NQN/namespaces/1/device_path" &&
		echo 1 >"$CFS/subsystems/$NQN/namespaces/1/enable" &&
		port_up
}
port_up() {
	mkdir "$CFS/ports/1" &&
		echo rdma >"$CFS/ports/1/addr_trtype" &&
		echo ipv4 >"$CFS/ports/1/addr_adrfam" &&
		echo "$RXUD_SELF_IP" >"$CFS/ports/1/addr_traddr" &&
		echo 4420 >"$CFS/ports/1/addr_trsvcid" &&
		ln -s "$CFS/subsystems/$NQN" "$CFS/ports/1/subsystems/$NQN"
}
port_down() {
	rm -f "$CFS/ports/1/subsystems/$NQN" && rmdir "$CFS/ports/1"
}
target_down() {
	port_down
	rmdir "$CFS/subsystems/$NQN/namespaces/1" "$CFS/subsystems/$NQN" &&
		modprobe -r nvmet-rdma nvmet null_blk
}
# ctrl: the host's controller of the subsystem (nvmeN), if connected.
ctrl() {
	local d
	for d in /sys/class/nvme/nvme*; do
		grep -qx "$NQN" "$d/subsysnqn" 2>/dev/null && { basename "$d"; return; }
	done
	return 1
}
# fio_verify ROUND: 2 jobs of 2 MB each, written and read back verified
# (about 85 IOs a second in these TCG guests, 16 MB a job took 48 s:
# measurements.rst, session 24).
fio_verify() {
	fio --name="$1" --filename="/dev/$(ctrl)n1" --direct=1 --ioengine=libaio --rw=randrw \
		--bs=4k --iodepth=32 --numjobs=2 --size=2M --offset_increment=64M \
		--verify=crc32c --verify_fatal=1 --output="$W/fio-$1.txt"
}
# flap: the host's link down for 5 s once the IO has started.
flap() {
	sleep 2
	ip link set "$IF" down
	sleep 5
	ip link set "$IF" up
}
# reg_mr_ahead: rxud0's REG_MRs run ahead of unanswered requests (0
# without rxud0).
reg_mr_ahead() { cat /sys/class/infiniband/rxud0/ports/1/hw_counters/rc_reg_mr_ahead 2>/dev/null || echo 0; }
# ctrl_state: the controller's state, for the diagnostics.
ctrl_state() { cat "/sys/class/nvme/$(ctrl)/state" 2>/dev/null; }

host_round() {
	local r=$1 ok=1
	check "$r: the target is up" barrier "nvme-$r-target" 180
	check "$r: nvme discover -t rdma finds the subsystem" \
		bash -c "nvme discover -t rdma -a $RXUD_PEER_IP -s 4420 | grep -q $NQN"
	# Reconnect at once after a link loss, for the flap round.
	check "$r: nvme connect -t rdma, 2 IO queues" nvme connect -t rdma -n "$NQN" -a "$RXUD_PEER_IP" \
		-s 4420 -i 2 --reconnect-delay=1 --ctrl-loss-tmo=60
	wait_for 30 test -b "/dev/$(ctrl)n1" || ok=0
	# The namespace's size as the host sees it (identify data came over
	# RDMA): 1 GiB.
	[ "$(cat "/sys/block/$(ctrl)n1/size" 2>/dev/null)" = 2097152 ] ||
		{ echo "$(ctrl)n1: $(cat "/sys/block/$(ctrl)n1/size" 2>&1) sectors, not 2097152" | tap_diag; ok=0; }
	case $r in
	loss) tc qdisc add dev "$IF" root netem loss 1% ;;
	flap) flap & ;;
	esac
	local ahead0
	ahead0=$(reg_mr_ahead)
	if [ $ok = 1 ] && fio_verify "$r"; then
		tap_ok "$r: fio verify=crc32c, 4 KB random read/write, QD 32, 2 jobs: every block right"
	else
		tap_not_ok "$r: fio verify=crc32c, 4 KB random read/write, QD 32, 2 jobs: every block right"
		{ echo "controller: $(ctrl) $(ctrl_state)"; cat "$W/fio-$r.txt"; dmesg | tail -n 30; } | tap_diag
	fi
	wait
	tc qdisc del dev "$IF" root 2>/dev/null
	grep -E 'IOPS|err=' "$W/fio-$r.txt" | tap_diag
	# nvme-rdma posts each IO's REG_MR with its command's SEND: a REG_MR
	# that waited for the IOs before it to be answered made them go one
	# at a time at any queue depth (measurements.rst, session 28).
	if [ "$r" = rxud ]; then
		local ahead=$(($(reg_mr_ahead) - ahead0))
		check "$r: REG_MRs ran ahead of the unanswered IOs before them (rc_reg_mr_ahead +$ahead)" \
			test "$ahead" -gt 0
	fi
	check "$r: nvme disconnect" nvme disconnect -n "$NQN"
	barrier "nvme-$r-host" 300
}

# swap_target rxud|rxe: the port moved to the other RoCE device.
swap_target() { port_down && use_device "$1" && port_up; }

if [ "$RXUD_VM" = 0 ]; then
	check_here "rxud0 on $IF" use_device rxud
	check "nvmet: subsystem, a memory-backed null_blk namespace, RDMA port $RXUD_SELF_IP:4420" target_up
	for r in "${ROUNDS[@]}"; do
		case $r in
		rxe-target) check_here "$r: the port moved to rxe0 (rxud0 removed)" swap_target rxe ;;
		rxe-host) check_here "$r: the port moved back to rxud0 (rxe0 removed)" swap_target rxud ;;
		esac
		barrier "nvme-$r-target" 180
		check "$r: the host finished its round" barrier "nvme-$r-host" 300
	done
	check "the target comes down, nvmet unloads" target_down
else
	check_here "rxud0 on $IF" use_device rxud
	modprobe nvme-rdma
	for r in "${ROUNDS[@]}"; do
		[ "$r" = rxe-host ] && check_here "$r: rxud0 replaced by rxe0" use_device rxe
		host_round "$r"
		[ "$r" = rxe-host ] && check_here "$r: rxe0 replaced by rxud0" use_device rxud
	done
	modprobe -r nvme-rdma
fi
check "the target's and host's devices removed, rxud unloads" bash -c "rdma link delete $DEV && rmmod rxud"
tap_end
