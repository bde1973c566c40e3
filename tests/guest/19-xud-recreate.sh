#!/usr/bin/env bash
# Real XUD QPs destroyed and re-created with the same number
# (Documentation/xud.rst, rules 1, 3 and 5; tests/verbs/xud-recreate). The
# module parameter max_qp (refused outside 1..65536) is 2 for the two
# devices, each in a network namespace of its own on a veth pair, so a
# destroyed QP's number is the only one a new QP can get once the 12 s
# hold is over. On rxud0 QPs S and T, on rxud1 R and R2; S sends to R and
# T to R2, then R and T are destroyed at once and re-created as soon as
# the devices allow. xud-recreate checks the hold (new QPs refused
# meanwhile, the old numbers handed out after 12 s), that S's stream
# turns over to R' (SENDs fail only until a stale-incarnation NAK tells S
# of the new QP; R' gets each SEND that succeeded once, nothing else) and
# that T' (a new stream from T's number) reaches R2, which held T's old
# stream. Here: the counters that show which paths ran.
. "$(dirname "$0")/../lib/tap.sh"
. "$(dirname "$0")/../lib/rxud.sh"
. "$(dirname "$0")/../lib/traffic.sh"
XR=$RXUD_TOP/tests/verbs/xud-recreate
TAP_PLANNED=8
tap_begin $TAP_PLANNED
export RDMAV_DRIVERS=$RXUD_TOP/rdma-core-provider/build/librxud

SIP=169.254.219.1 # rxud0's address (rv0, in ra)
CIP=169.254.219.2 # rxud1's (rv1, in rb)
P=/sys/module/rxud/parameters/max_qp

rxud_load
check_eq "max_qp defaults to 65536" 65536 "$(cat $P)"
check "max_qp 0 and 65537 are refused" \
	eval '! echo 0 >$P 2>/dev/null && ! echo 65537 >$P 2>/dev/null && test "$(cat $P)" = 65536'
echo 2 >$P
rxud_pair ra rb rv0 rv1
echo 65536 >$P
g0=$(v2_gid_index rxud0)
g1=$(v2_gid_index rxud1)

st0=$(hwc rxud1 rx_drop_xud_stale)
rc0=$(hwc rxud1 xud_peers_reclaimed)
t=$SECONDS
out=$(inns ra timeout 120 "$XR" -d rxud0 -g "${g0:-0}" -D rxud1 -G "${g1:-0}" 2>&1)
rc=$?
printf '%s\n' "xud-recreate ($((SECONDS - t)) s):" "$out" | tap_diag
check "xud-recreate ran to its plan" grep -q '^1\.\.[0-9]' <<<"$out"
check_eq "xud-recreate passes every check" 0 "$rc"
st=$(($(hwc rxud1 rx_drop_xud_stale) - st0))
rc=$(($(hwc rxud1 xud_peers_reclaimed) - rc0))
check "R' answered S's stale stream (rxud1 rx_drop_xud_stale +$st)" test "$st" -gt 0
check "rxud1 reclaimed T's old stream before T' (xud_peers_reclaimed +$rc)" test "$rc" -gt 0

inns ra rdma link delete rxud0
inns rb rdma link delete rxud1
ip netns del ra
ip netns del rb
check "no rxud device left" test "$(ib_count)" = 0
check "rmmod rxud" rxud_unload
tap_end
