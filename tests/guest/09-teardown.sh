#!/usr/bin/env bash
# Teardown with traffic in flight, both directions: the processes killed
# (-9), the device deleted (rdma link delete), its netdev unregistered, and
# rmmod, each while ibv_ud_pingpong (UD), ib_write_bw (RC WRITEs one way),
# rping (RC over an rdma_cm connection, the other way) and rxud-perf (XUD
# SENDs from one QP to two peers) run. The kernel must survive every one
# (the runner fails on any oops, lockdep report or leak) and leave nothing
# behind. rxud implements disassociate_ucontext (unlike rxe): ib_core
# removes a device without waiting for the processes using it, which get
# IBV_EVENT_DEVICE_FATAL (tests/guest/24-device-removal.sh checks what
# they see); here the deletions are started with traffic running, and the
# processes killed while the removal goes on.
. "$(dirname "$0")/../lib/tap.sh"
. "$(dirname "$0")/../lib/rxud.sh"
. "$(dirname "$0")/../lib/traffic.sh"
TAP_PLANNED=8
tap_begin $TAP_PLANNED
export RDMAV_DRIVERS=$RXUD_TOP/rdma-core-provider/build/librxud

# setup: rxud0 in rxa and rxud1 in rxb, joined by a veth pair.
SIP=169.254.210.1
CIP=169.254.210.2
setup() { rxud_pair rxa rxb rxudv0 rxudv1; }

# teardown_ns: whatever is left of setup.
teardown_ns() {
	ip netns pids rxa 2>/dev/null | xargs -r kill -9
	ip netns pids rxb 2>/dev/null | xargs -r kill -9
	sleep 0.5
	for d in rxud0 rxud1; do ib_exists $d && rdma link delete $d; done
	ip netns del rxa 2>/dev/null
	ip netns del rxb 2>/dev/null
	wait_for 10 test "$(ib_count)" = 0
}

# traffic: long runs between the two devices, in the background: a UD
# ping-pong, RC WRITEs from rxud1 to rxud0, rping (rdma_cm) from rxud0 to
# rxud1, XUD SENDs of 64 KB from rxud1's QP to two of rxud0's (their
# ACKs, retransmit timers and peer states live when the teardown comes).
# Returns once packets flow both ways. The ping-pong waits for
# completions with events (-e; rping always does), not by spinning on its
# CQ: in a one-vCPU guest a spinning process slows the test's own steps.
# (perftest offers no events for WRITEs.)
traffic() {
	local g0 g1
	g0=$(v2_gid_index rxud0) g1=$(v2_gid_index rxud1)
	inns rxa ibv_ud_pingpong -e -d rxud0 -g "$g0" -s 512 -n 1000000 \
		>"$RXUD_OUT/pp-server.txt" 2>&1 </dev/null &
	bg_in rxa ib_write_bw -d rxud0 -x "$g0" -s 65536 -D 300 -p 18600 \
		>"$RXUD_OUT/bw-server.txt" 2>&1 </dev/null
	bw_server=$!
	inns rxb rping -s -a 169.254.210.2 -C 1000000 \
		>"$RXUD_OUT/rping-server.txt" 2>&1 </dev/null &
	bg_in rxa "$RXUD_TOP/tests/verbs/rxud-perf" -d rxud0 -x "$g0" -q 2 -p 18700 \
		>"$RXUD_OUT/xud-server.txt" 2>&1 </dev/null
	xud_server=$!
	wait_for 20 bw_listening && wait_for 20 xud_listening
	inns rxb ibv_ud_pingpong -e -d rxud1 -g "$g1" -s 512 -n 1000000 169.254.210.1 \
		>"$RXUD_OUT/pp-client.txt" 2>&1 </dev/null &
	inns rxb ib_write_bw -d rxud1 -x "$g1" -s 65536 -D 300 -p 18600 169.254.210.1 \
		>"$RXUD_OUT/bw-client.txt" 2>&1 </dev/null &
	inns rxa rping -c -a 169.254.210.2 -C 1000000 \
		>"$RXUD_OUT/rping-client.txt" 2>&1 </dev/null &
	inns rxb "$RXUD_TOP/tests/verbs/rxud-perf" -d rxud1 -x "$g1" -t bw -o send -s 65536 \
		-n 10000000 -p 18700 169.254.210.1 >"$RXUD_OUT/xud-client.txt" 2>&1 </dev/null &
	# Running once packets flow both ways, the perftest pair has
	# connected (its TCP socket, port 18600 as the ping-pong has 18515,
	# stays open while it runs) and so has rping
	# (an rdma_cm id in the CONNECT state).
	wait_for 30 received_more_than rxud0 200 && wait_for 30 received_more_than rxud1 200 &&
		wait_for 30 bw_connected && wait_for 30 cm_connected && wait_for 30 xud_flowing
}
bw_listening() { tcp_socket "$bw_server" 18600; }
xud_listening() { tcp_socket "$xud_server" 18700; }
# XUD data has reached rxud0: its QPs have peers.
xud_flowing() { [ "$(hwc rxud0 xud_peers_added)" -gt 0 ]; }
bw_connected() { tcp_socket "$bw_server" 18600 01; }
cm_connected() { rdma resource show cm_id | grep -q 'state CONNECT'; }

received_more_than() { [ "$(cat "/sys/class/infiniband/$1/ports/1/hw_counters/rx_packets")" -gt "$2" ]; }

# user_qps DEV: QPs of DEV other than the GSI QP (ib_core's MAD layer
# keeps one on every kernel-verbs device).
user_qps() { rdma resource show qp link "$1/1" | grep -c -v 'type GSI'; }
no_user_qps() { [ "$(user_qps rxud0)$(user_qps rxud1)" = 00 ]; }

# kill_traffic: the traffic's processes, -9.
kill_traffic() {
	pkill -9 -x ibv_ud_pingpong
	pkill -9 -x ib_write_bw
	pkill -9 -x rping
	pkill -9 -x rxud-perf
}

# Open contexts do not hold the module (disassociate_ucontext): rmmod
# goes through, with every device gone.
rmmod_outcome() { ! rxud_loaded && [ "$(ib_count)" = 0 ]; }

rxud_load

# rxud0 deleted with the traffic running, the processes killed meanwhile:
# the kill destroys the QPs of rxud1 with packets in flight while rxud0
# is being deleted.
setup
check "traffic flows" traffic
inns rxa rdma link delete rxud0 &
del=$!
sleep 2
kill_traffic
wait $del
del_status=$?
check "killed mid-transfer: every QP released" wait_for 10 no_user_qps
check_eq "rdma link delete rxud0 mid-transfer completes" 0 $del_status
check "the device is gone" wait_for 10 ib_gone rxud0
teardown_ns

# rxud1's netdev unregistered with the traffic running; then rmmod while
# rxud0's processes still run (their peers gone, their QPs with work in
# flight): open devices do not pin the module. The processes are killed
# after.
setup
traffic
inns rxb ip link del rxudv1
check_eq "netdev unregistered mid-transfer" 0 $?
check "its device is gone" wait_for 10 ib_gone rxud1
timeout 60 rmmod rxud
check "rmmod with rxud0's processes running completes, every device gone" rmmod_outcome
kill_traffic
teardown_ns
check "no device left" test "$(ib_count)" = 0
tap_end
