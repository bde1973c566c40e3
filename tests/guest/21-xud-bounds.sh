#!/usr/bin/env bash
# What a stranger, a dead peer or a full completion queue may cost an XUD
# QP (Documentation/xud.rst, "Receive resources" and "Send resources";
# issue 27 items 5, 8 and 9), between two rxud devices in two network
# namespaces joined by a veth pair:
#
# - a receive CQ that is full: the receiver acknowledges no message whose
#   completion it could not write (RNR instead), and once it polls every
#   SEND arrives exactly once (tests/verbs/xud-bounds -t cq);
# - dead peers (QP numbers nothing answers) stall within 2.5 s per wave of
#   fresh ones (a send queue's worth), and once they have, do not starve a
#   live one: its rate beside 4 and 16 dead peers is at least a third of
#   its rate with none (0 without the bounds) (xud-bounds -t dead);
# - forged partial SENDs (tests/xud-forge: first packets of messages that
#   never finish, from 40 source QPNs, 4 messages each) pin at most one
#   receive per source and half of those posted: complete SENDs from
#   other sources are still delivered; and sources that never finished a
#   message lose what they hold after the short hold (REM_ABORT_ERR).
. "$(dirname "$0")/../lib/tap.sh"
. "$(dirname "$0")/../lib/rxud.sh"
. "$(dirname "$0")/../lib/traffic.sh"
TAP_PLANNED=9
tap_begin $TAP_PLANNED
export RDMAV_DRIVERS=$RXUD_TOP/rdma-core-provider/build/librxud
XB=$RXUD_TOP/tests/verbs/xud-bounds
SINK=$RXUD_TOP/tests/verbs/xud-sink
FORGE=$RXUD_TOP/tests/xud-forge/target/release/xud-forge
SIP=169.254.220.1 # rxud0's address (bv0, in ba)
CIP=169.254.220.2 # rxud1's (bv1, in bb)
FIP=169.254.220.3 # the forger's (bv0 too: a host on rxud0's side)
IN=/tmp/20-sink.in
OUT=/tmp/20-sink.out

counters() {
	for d in rxud0 rxud1; do
		echo "$d: $(cd /sys/class/infiniband/$d/ports/1/hw_counters &&
			grep -H -v '^0$' xud_* rx_drop_* 2>/dev/null | tr '\n' ' ')"
	done | tap_diag
}
declare -A base
mark() { local c; for c in "$@"; do base[$c]=$(hwc rxud1 "$c"); done; }
delta() { echo $(($(hwc rxud1 "$1") - ${base[$1]})); }
at_least() { [ "$(delta "$1")" -ge "$2" ]; }

# bounds DESC TEST: one run of xud-bounds, its TAP as diagnostics.
bounds() {
	local desc=$1 out rc t=$SECONDS
	out=$(inns ba timeout 60 "$XB" -d rxud0 -g "${g0:-0}" -D rxud1 -G "${g1:-0}" -t "$2" 2>&1)
	rc=$?
	printf '%s\n' "xud-bounds -t $2 ($((SECONDS - t)) s):" "$out" | tap_diag
	counters
	check_eq "$desc" 0 "$rc"
}

rxud_load
rxud_pair ba bb bv0 bv1
inns ba ip addr add $FIP/24 dev bv0
g0=$(v2_gid_index rxud0)
g1=$(v2_gid_index rxud1)

bounds "a full receive CQ: no SEND acknowledged beyond it, each delivered once when polled" cq
sr0=$(hwc rxud0 xud_stalled_refused)
bounds "a live peer keeps a third of its rate or more beside 4 and 16 dead peers" dead
sr=$(($(hwc rxud0 xud_stalled_refused) - sr0))
check "posts beyond a stalled destination's share were refused (xud_stalled_refused +$sr)" \
	test "$sr" -gt 0

# The sink on rxud1: 32 receives of 256 bytes (xud-sink; see 18-xud-peers.sh
# for the FIFO on its stdin).
rm -f $IN
mkfifo $IN
exec 7<>$IN
nsenter --net=/run/netns/bb "$SINK" -d rxud1 -p 256 -r 32 <$IN >$OUT 2>&1 7>&- &
sink=$!
wait_for 20 grep -q '^qpn ' $OUT
read -r _ qpn _ _ _ _ _ qkey <$OUT
# The forger takes each source's stream cookie from its challenge first
# (--handshake: it sees what is sent to its address, as any host that
# sends from its own does; xud.rst, "Stream cookies"): the cookie keeps
# out those who cannot, these bounds are for those who can.
forge() { inns ba "$FORGE" --src $FIP --dst $CIP --qpn "$qpn" --qkey "$qkey" --handshake "$@"; }

# 40 sources, each the first 64 bytes of 4 SENDs of 200 bytes that never
# finish: one claim per source, and no more than half the receives.
mark xud_claims_refused rx_packets xud_claims_dropped
out=$(forge --send --peers 40 --first-src-qpn 0x3000 --psn 1000 --len 64 --dma-len 200 --msgs 4 2>&1)
echo "$out" | tap_diag
wait_for 10 at_least rx_packets 160
counters
check "forged partial SENDs: claims beyond one per source and half the receives refused (xud_claims_refused +$(delta xud_claims_refused))" \
	at_least xud_claims_refused 136
# 10 other sources, one whole SEND each: receives are left for them.
mark rx_packets
forge --send --peers 10 --first-src-qpn 0x4000 --psn 2000 --len 64 >/dev/null 2>&1
wait_for 10 at_least rx_packets 10
# The 16 partial messages' sources never finished one: they lose their
# receives after the short hold (2 s, then the scan's 2.5 s).
check "sources that never finished a message lose their receives within seconds (xud_claims_dropped 16)" \
	wait_for 10 at_least xud_claims_dropped 16
counters

exec 7>&-
wait $sink
check_eq "xud-sink exits 0" 0 $?
tap_diag <$OUT
check "the 10 whole SENDs were delivered beside the forged partial ones (10 successes, 16 aborted)" \
	grep -q '^sink: 26 receive completions, 10 with status success' $OUT

inns ba rdma link delete rxud0
inns bb rdma link delete rxud1
ip netns del ba
ip netns del bb
check "no rxud device left" test "$(ib_count)" = 0
check "rmmod rxud" rxud_unload
tap_end
