#!/usr/bin/env bash
# Runs in both VMs of a pair: 1 KB RC SENDs from vm1 to vm0 over the
# virtio-net link. virtio-net's NAPI takes datagrams in batches, rxud's GRO
# links them into trains, and vm0 receives a train's run to its QP with
# the QP's CQs held: the run's receive completions (one a SEND here) reach
# perftest together (rx_cq_batches publishes of rx_cq_batch_entries
# entries; Documentation/design.rst, "The per-packet path", receiving step
# 0). A veth in one VM rarely gives such trains: its sender runs the
# receiving side's NAPI at every packet it sends from a system call.
. "$(dirname "$0")/../lib/tap.sh"
. "$(dirname "$0")/../lib/rxud.sh"
. "$(dirname "$0")/../lib/traffic.sh"
IF=${RXUD_IF:?no test NIC}
TAP_PLANNED=5
tap_begin $TAP_PLANNED
export RDMAV_DRIVERS=$RXUD_TOP/rdma-core-provider/build/librxud
peer_out=${RXUD_OUT%/vm*}/vm$((1 - RXUD_VM))
N=1000
# result_in FILE SIZE ITERS: perftest's result line in FILE.
result_in() { grep -qE "^ *$2 +$3 +[0-9.]+ +[0-9.]+" "$1"; }

check "rxud0 on $IF" bash -c "modprobe -a udp_tunnel ip6_udp_tunnel && insmod $RXUD_KO && rdma link add rxud0 type rxud netdev $IF"
check "rxud0 has a RoCE v2 GID" wait_for 10 v2_gid_index rxud0
gid=$(v2_gid_index rxud0)
cb0=$(hwc rxud0 rx_cq_batches) ce0=$(hwc rxud0 rx_cq_batch_entries)
t0=$(hwc rxud0 rx_trains)
out=$RXUD_OUT/cq-batches.$RXUD_VM
# perftest times itself with the TSC, calibrated against gettimeofday;
# when a descheduled vCPU spoils the calibration (r^2 < 0.9) that side
# prints no result, whatever moved. As run_pair does (tests/lib/traffic.sh)
# the pair then runs again, once, and says so: after each run each side
# leaves its verdict (done or again) for the other, and both go again if
# either asks. The counters read around it then hold both runs' traffic.
for attempt in 1 2; do
	if [ "$RXUD_VM" = 0 ]; then
		timeout 120 ib_send_bw -d rxud0 -x "$gid" -s 1024 -n $N -u 18 >"$out" 2>&1 &
		srv=$!
		wait_for 30 serving "$srv" -
		touch "$RXUD_OUT/cq-batches-serving.$attempt"
		wait "$srv"
	else
		wait_for 60 test -e "$peer_out/cq-batches-serving.$attempt"
		timeout 120 ib_send_bw -d rxud0 -x "$gid" -s 1024 -n $N -u 18 "$RXUD_PEER_IP" >"$out" 2>&1
	fi
	verdict=done
	if [ "$attempt" = 1 ] && grep -q "Can't produce a report" "$out"; then
		verdict=again
	fi
	echo "$verdict" >"$RXUD_OUT/cq-batches-run.$attempt"
	wait_for 150 test -s "$peer_out/cq-batches-run.$attempt"
	[ "$verdict" = again ] || [ "$(cat "$peer_out/cq-batches-run.$attempt" 2>/dev/null)" = again ] || break
	{
		echo "perftest's clock calibration failed (here or on the peer), run again:"
		cat "$out"
	} | tap_diag
done
if [ "$RXUD_VM" = 0 ]; then
	check "ib_send_bw 1 KB x $N: the server received them" result_in "$out" 1024 $N
else
	check "ib_send_bw 1 KB x $N: the client sent them" result_in "$out" 1024 $N
fi
tap_diag <"$out"
cb=$(($(hwc rxud0 rx_cq_batches) - cb0)) ce=$(($(hwc rxud0 rx_cq_batch_entries) - ce0))
tr=$(($(hwc rxud0 rx_trains) - t0))
if [ "$RXUD_VM" = 0 ]; then
	check "a train's receive completions were published together (rx_trains +$tr, rx_cq_batches +$cb of rx_cq_batch_entries +$ce: more than one a batch)" \
		test "$cb" -gt 0 -a "$ce" -gt "$cb"
else
	# The sender's completions come from ACKs, one per SEND here, rarely
	# in trains; what its batches were is for the log only.
	echo "vm1: rx_trains +$tr, rx_cq_batches +$cb, rx_cq_batch_entries +$ce" | tap_diag
	tap_ok "the client's side counted (diagnostic above)"
fi
check "peer finished its checks" barrier cq-batches-checked
rdma link delete rxud0
rmmod rxud
tap_end
