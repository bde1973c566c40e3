#!/usr/bin/env bash
# Removing a device while a process holds it (issue 28, item 5). rxud
# implements disassociate_ucontext, so ib_core does not wait for the
# device's processes: `rdma link delete`, the netdev's removal and rmmod
# finish at once, the process gets IBV_EVENT_DEVICE_FATAL, its verbs fail
# with EIO and nothing crashes (tests/verbs/held-device: a PD, an MR, a
# CQ, an SRQ and an RC QP in RTS, their rings mapped). Then a process
# that exits with RC packets waiting for ARP (tests/verbs/orphan-send):
# they hold its QP's core past the QP's destroy and past the freeing of
# its user context, which must not find the QP's rings still in it (ib_core
# WARNs at rdma_core.c:874, and the rings' later removal wrote into freed
# memory: the soak's first find). Last, rmmod with
# the process still holding its file and mappings: it reads its CQ ring
# after the module is gone (the pages are its own by then), then tears
# down. The runner's kmemleak scan after the test finds any leak.
. "$(dirname "$0")/../lib/tap.sh"
. "$(dirname "$0")/../lib/rxud.sh"
. "$(dirname "$0")/../lib/traffic.sh"
tap_begin 15
export RDMAV_DRIVERS=$RXUD_TOP/rdma-core-provider/build/librxud
HD=$RXUD_TOP/tests/verbs/held-device
W=${RXUD_OUT:-/tmp}/24-device-removal
rm -rf $W
mkdir -p $W

# device: rxud0 on one end of a veth pair, with an address (a GID).
device() {
	ip link add rxudv0 type veth peer name rxudv1 &&
		ip addr add 169.254.230.1/24 dev rxudv0 &&
		ip link set rxudv0 up && ip link set rxudv1 up &&
		rdma link add rxud0 type rxud netdev rxudv0 &&
		wait_for 10 v2_gid_index rxud0
}

# held NAME [ARGS]: held-device on rxud0 in the background ($held_pid:
# called outside `check`, whose subshell would keep it), its output in
# $W/NAME.out; waits until it is ready (ready NAME).
held() {
	local name=$1
	shift
	"$HD" -d rxud0 -g "$(v2_gid_index rxud0)" -t 60 "$@" >"$W/$name.out" 2>&1 &
	held_pid=$!
	wait_for 30 ready "$name"
}
ready() { grep -q '^ready' "$W/$1.out"; }

# timed SECONDS CMD...: CMD completes with status 0 within SECONDS
# (killed at three times that); says how long it took.
timed() {
	local limit=$1 t=$SECONDS rc
	shift
	timeout $((limit * 3)) "$@"
	rc=$?
	echo "$* took $((SECONDS - t)) s (status $rc)" | tap_diag
	[ $rc -eq 0 ] && [ $((SECONDS - t)) -le "$limit" ]
}

# finish NAME: waits (up to 30 s, then kills it) for the holder to exit;
# its status in $held_rc (outside `check`, as `held`), its output as
# diagnostics.
finish() {
	wait_for 30 server_gone "$held_pid" || kill -9 "$held_pid"
	wait "$held_pid"
	held_rc=$?
	tap_diag <"$W/$1.out"
}
# fatal_seen NAME: the holder exited 0 (DEVICE_FATAL seen, the verbs that
# need the kernel failed with EIO).
fatal_seen() { [ "$held_rc" = 0 ] && grep -q '(IBV_EVENT_DEVICE_FATAL)' "$W/$1.out"; }

rxud_load
check "rxud0 up on a veth" device
held delete
check "a process holds rxud0 (PD, MR, CQ, SRQ, RC QP in RTS)" ready delete
check "rdma link delete rxud0 returns within 10 s while the process holds it" timed 10 rdma link delete rxud0
check "rxud0 is gone" ib_gone rxud0
finish delete
check "the process got IBV_EVENT_DEVICE_FATAL, its verbs failed with EIO, it exited" fatal_seen delete
ip link del rxudv0

device
held netdev
check "a process holds the new rxud0" ready netdev
check "the netdev's removal returns within 10 s while the process holds rxud0" timed 10 ip link del rxudv0
check "rxud0 went with it" wait_for 10 ib_gone rxud0
finish netdev
check "the process got IBV_EVENT_DEVICE_FATAL and exited" fatal_seen netdev

device
# 169.254.230.9: on rxudv0's subnet, nobody's (rxudv1 has no address);
# a static neighbour entry while the QP connects, none when it sends.
dmesg_at=$(dmesg | wc -l)
ip neigh replace 169.254.230.9 lladdr 02:52:58:55:44:09 dev rxudv0
"$RXUD_TOP/tests/verbs/orphan-send" -d rxud0 -g "$(v2_gid_index rxud0)" -a 169.254.230.9 \
	>"$W/orphan.out" 2>&1 &
orphan=$!
wait_for 30 grep -q '^ready' "$W/orphan.out"
ip neigh del 169.254.230.9 dev rxudv0
kill -USR1 $orphan
wait $orphan
orphan_rc=$?
tap_diag <"$W/orphan.out"
check_eq "a process sends on an RC QP connected to an address nobody answers ARP for, and exits" 0 $orphan_rc
# new_warnings: what the kernel warned of since the orphan started.
new_warnings() { dmesg | tail -n +$((dmesg_at + 1)) | grep -E 'WARNING|BUG|Call Trace'; }
# Its context was freed as it exited, before `wait` returned, while its
# datagrams still waited for ARP: ib_core warns then if an mmap entry is
# left in it (a ring that did not leave it at its QP's destroy), before
# that entry's use after free when the datagrams are dropped.
check_eq "no kernel warning as its context is freed" "" "$(new_warnings)"
# The neighbour gives up after 3 probes a second apart and drops them.
sleep 5
check_eq "no kernel warning as its datagrams are dropped" "" "$(new_warnings)"
held rmmod -w
check "rmmod rxud returns within 10 s while a process holds rxud0's file and mappings" timed 10 rmmod rxud
# The event, the failing verbs, then the wait for SIGUSR1.
wait_for 30 grep -q '^waiting for SIGUSR1' "$W/rmmod.out"
kill -USR1 "$held_pid"
finish rmmod
check "after rmmod the process read its CQ ring, tore down and exited (DEVICE_FATAL seen)" fatal_seen rmmod
ip link del rxudv0
check "no RDMA device left" test "$(ib_count)" = 0
tap_end
