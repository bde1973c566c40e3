#!/usr/bin/env bash
# RDMA pingmesh over one XUD QP (tests/verbs/rxud-pingmesh.c;
# Documentation/xud.rst, "Pingmesh"): a prober's one QP probes 16 peers,
# each an rxud device in a namespace of its own behind a router namespace
# (RoCEv2 routed: one /24 per link), every 100 ms with 512-byte SENDs.
# After 3 s the router's link to the last peer goes down: the prober
# must flag that peer dead (its run ends a second later), and only that
# one, while the other 15
# keep answering, each with its RTT percentiles. The prober and the
# responders run in the initial namespace, where their devices are
# (tests/lib/mesh.sh: ib_core's exclusive mode).
. "$(dirname "$0")/../lib/tap.sh"
. "$(dirname "$0")/../lib/rxud.sh"
. "$(dirname "$0")/../lib/mesh.sh"
TAP_PLANNED=8
tap_begin $TAP_PLANNED
export RDMAV_DRIVERS=$RXUD_TOP/rdma-core-provider/build/librxud
PM=$RXUD_TOP/tests/verbs/rxud-pingmesh
N=16
W=/tmp/26-pingmesh
rm -rf "$W"
mkdir -p "$W"

setup() {
	mesh_router pmr || return 1
	mesh_host pmr pm pm0 10.77.0 || return 1
	for i in $(seq 1 $N); do
		mesh_host pmr "pm$i" "pp$i" "10.77.$i" || return 1
	done
	for d in pm0 $(seq -f 'pp%g' 1 $N); do
		wait_for 10 v2_gid_index "rx$d" || return 1
	done
}

rxud_load
check "a prober and $N peers, each an rxud device in its namespace, routed through a third" setup
# The responders: each prints its QP number, then answers until SIGTERM.
pids=()
for i in $(seq 1 $N); do
	bg_in - "$PM" -d "rxpp$i" -x "$(v2_gid_index "rxpp$i")" -R >"$W/r$i.out" 2>&1
	pids+=($!)
done
ready() { for i in $(seq 1 $N); do grep -q '^qpn ' "$W/r$i.out" || return 1; done; }
check "the $N responders are up" wait_for 30 ready
targets=()
for i in $(seq 1 $N); do
	targets+=("10.77.$i.1/$(sed -n 's/^qpn //p' "$W/r$i.out")")
done
# The prober's run ends on SIGTERM, once the cut-off peer is flagged
# dead (60 s at most): a loaded guest's prober starts late and runs
# slow, and a run of fixed length left the peer too little time after
# the cut (make check: the cut came with 6 rounds of 54 left).
"$PM" -d rxpm0 -x "$(v2_gid_index rxpm0)" -i 100 -t 60 -w 1000 -k 1500 "${targets[@]}" \
	>"$W/prober.out" 2>&1 &
prober=$!
# The cut comes 3 s into the probing.
wait_for 60 grep -q '^probing' "$W/prober.out"
sleep 3
ip -n pmr link set "rpp$N" down
wait_for 30 grep -q "^t=[0-9]* ms: peer 10\.77\.$N\.1/[0-9]* dead" "$W/prober.out"
sleep 1
kill -TERM $prober
wait $prober
prc=$?
tap_diag <"$W/prober.out"
check_eq "the prober ran and reported" 0 $prc

# row I: the prober's report line of peer I.
row() { grep "^peer 10\.77\.$1\.1/" "$W/prober.out"; }
# field I NAME: the value after NAME in peer I's line.
field() { row "$1" | sed -n "s/.* $2 \([^ ]*\).*/\1/p"; }
rounds=$(sed -n 's/^rounds //p' "$W/prober.out")
live_ok() {
	local i sent lost
	# A loaded guest's prober runs late, and sends fewer rounds than
	# are due (one each 100 ms); every round must probe every peer.
	[ "${rounds:-0}" -ge 20 ] || return 1
	for i in $(seq 1 $((N - 1))); do
		sent=$(field "$i" sent) lost=$(field "$i" lost)
		# At most one probe in twenty lost (a loaded host's late answers).
		[ "$(field "$i" state)" = alive ] && [ "${sent:-0}" = "$rounds" ] &&
			[ $((20 * ${lost:-99})) -le "$sent" ] && [ "$(field "$i" p99.9)" != - ] || return 1
	done
}
check "the 15 peers kept answering: alive, probed in each of the prober's ${rounds:-?} rounds (20 at least), 5% lost at most, RTT percentiles reported" live_ok
check "peer $N answered before its link went down ($(field $N answered) of $(field $N sent))" \
	test "$(field $N answered)" -gt 0
check "peer $N was flagged dead, and is dead at the end" \
	eval "grep -q '^t=[0-9]* ms: peer 10\.77\.$N\.1/[0-9]* dead' '$W/prober.out' && test \"\$(field $N state)\" = dead"
check "no other peer was ever flagged dead" \
	test "$(grep -c ' dead: ' "$W/prober.out")" = 1

kill -TERM "${pids[@]}" 2>/dev/null
wait "${pids[@]}"
# shellcheck disable=SC2046 # names without blanks
check "no rxud device left, rmmod rxud" eval 'mesh_teardown pmr pm $(seq -f "pm%g" 1 $N) && rmmod rxud'
tap_end
