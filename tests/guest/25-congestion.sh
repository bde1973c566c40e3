#!/usr/bin/env bash
# Congestion notification end to end (proto/congestion, driver/cnp.rs;
# Documentation/xud.rst, "Congestion control"). rxud0 and rxud1 in
# namespaces of their own on a veth pair whose rxud1 end has netem "loss
# 10% ecn": of the packets rxud1 sends, one in ten is marked Congestion
# Experienced if it is ECN-capable, and dropped if not. With `cc` on (the
# default) rxud1's RC requests and XUD data go ECT(0): none is dropped,
# rxud0 sees the marks, answers them with CNPs (at most one per flow per
# 50 us), and rxud1 takes them and cuts its windows. With `cc` off the
# same RC run goes out not ECN-capable: netem drops a tenth of it, rxud1
# resends, and no CNP is sent. Last, CNPs forged by tests/xud-forge: from
# a third address they reach no flow; from the peer's, they are taken.
. "$(dirname "$0")/../lib/tap.sh"
. "$(dirname "$0")/../lib/rxud.sh"
. "$(dirname "$0")/../lib/traffic.sh"
TAP_PLANNED=19
tap_begin $TAP_PLANNED
export RDMAV_DRIVERS=$RXUD_TOP/rdma-core-provider/build/librxud

SIP=169.254.225.1 # rxud0's address (cv0, in ca)
CIP=169.254.225.2 # rxud1's (cv1, in cb)
CLI_OUT=/tmp/25-congestion.client
SRV_OUT=/tmp/25-congestion.server
RP=$RXUD_TOP/tests/verbs/rxud-perf
CC=/sys/module/rxud/parameters/cc

rxud_load
rxud_pair ca cb cv0 cv1
g0=$(v2_gid_index rxud0)
g1=$(v2_gid_index rxud1)

# d DEV COUNTER: how much COUNTER of DEV grew since `mark`.
declare -A at
mark() { local d c; for d in rxud0 rxud1; do for c in "$@"; do at[$d.$c]=$(hwc $d "$c"); done; done; }
d() { echo $(($(hwc "$1" "$2") - ${at[$1.$2]})); }
COUNTERS=(ecn_ce_received cnp_sent cnp_received cc_cnp_cuts rc_retransmits xud_retransmits rx_drop_cnp_stray)

check "cc is on by default" test "$(cat $CC)" = Y
modprobe sch_netem 2>/dev/null
# One skb per packet (no trains), so that netem marks or drops packets.
inns cb ethtool -K cv1 gso off >/dev/null
check "netem marks 10% of rxud1's packets CE (drops them if not ECN-capable)" \
	inns cb tc qdisc add dev cv1 root netem loss 10% ecn

# --- RC, cc on ---
mark "${COUNTERS[@]}"
perf ca rxud0 cb rxud1 ib_write_bw -s 65536 -n 50
check "RC: ib_write_bw 64 KB x 50 completes through the marking link" result 65536 50
ce=$(d rxud0 ecn_ce_received) sent=$(d rxud0 cnp_sent)
got=$(d rxud1 cnp_received) cuts=$(d rxud1 cc_cnp_cuts) re=$(d rxud1 rc_retransmits)
echo "RC, cc on: rxud0 ecn_ce_received +$ce cnp_sent +$sent; rxud1 cnp_received +$got cc_cnp_cuts +$cuts rc_retransmits +$re" | tap_diag
# 3200 packets, a tenth of them marked; CNPs at most one per flow per
# 50 us (under TCG packets come further apart: a CNP per mark).
check "RC: rxud0 saw the requests marked CE (+$ce, about 320 of 3200)" test "$ce" -ge 150
check "RC: rxud0 answered with CNPs, at most one per mark (+$sent)" test "$sent" -gt 0 -a "$sent" -le "$ce"
check "RC: rxud1 took every CNP and cut its window for some (+$got, cuts +$cuts)" \
	test "$got" = "$sent" -a "$cuts" -gt 0 -a "$cuts" -le "$got"
check "RC: every request went ECN-capable: none dropped, none resent (+$re)" test "$re" = 0

# rxud1's RC QP: its number, and what `rdma resource show qp -dd` says of
# its window (rxud's driver details, driver/qp.rs).
rc_qpn() { rdma resource show qp link rxud1/1 | sed -n 's/.* lqpn \([0-9]*\) .*type RC.*/\1/p' | head -n 1; }
rc_up() { [ -n "$(rc_qpn)" ]; }
# detail NAME: the value of driver detail NAME in $details (which
# iproute2's rdma prints as drv_NAME).
detail() { printf '%s\n' "$details" | tr -s ' \n' '\n\n' | sed -n "/^drv_$1\$/{n;p;q}"; }
# While a run goes through the marking link, every round of the
# requester's window meets marks: its alpha climbs toward 1024 from the
# little a clean start leaves, and the window stays below its limit.
bg_in ca timeout 30 ib_write_bw -d rxud0 -x "$g0" -s 65536 -D 6 -p 18527 >/tmp/25-cc.srv 2>&1
cc_srv=$!
wait_for 20 tcp_socket "$cc_srv" 18527
inns cb timeout 30 ib_write_bw -d rxud1 -x "$g1" -s 65536 -D 6 -p 18527 "$SIP" >/tmp/25-cc.cli 2>&1 &
cc_cli=$!
# Its RC QP with its window shown, then 3 s of marked rounds, then again.
cc_details() {
	details=$(rdma -dd resource show qp link rxud1/1 2>&1 | grep 'type RC state RTS.*drv_cc_window' | head -n 1)
	[ -n "$details" ]
}
wait_for 20 cc_details
sleep 3
cc_details
printf '%s\n' "$details" | tap_diag
[ -n "$details" ] || { rdma -dd resource show qp; tail -n 5 /tmp/25-cc.cli /tmp/25-cc.srv; } 2>&1 | tap_diag
win=$(detail cc_window) limit=$(detail cc_window_limit) alpha=$(detail cc_alpha_per_1024)
wait $cc_cli
wait $cc_srv
check "RC: rdma resource shows the window under marks: $win of $limit packets, alpha $alpha/1024" \
	test -n "$win" -a -n "$limit" -a -n "$alpha" -a "${win:-0}" -ge 1 -a "${win:-0}" -lt "${limit:-0}" -a "${alpha:-0}" -ge 256

# --- XUD, cc on: one QP to one peer ---
mark "${COUNTERS[@]}"
inns ca timeout 120 "$RP" -d rxud0 -x "$g0" -q 1 -p 18525 >/tmp/25-perf.srv 2>&1 &
spid=$!
cli=$(inns cb timeout 120 "$RP" -d rxud1 -x "$g1" -p 18525 -t bw -o send -s 65536 -n 50 "$SIP" 2>&1)
crc=$?
wait $spid
src=$?
printf '%s\n' "$cli" | tail -n 4 | tap_diag
tail -n 2 /tmp/25-perf.srv | tap_diag
check "XUD: rxud-perf SEND 64 KB x 50 completes through the marking link, every SEND right" \
	test "$crc" = 0 -a "$src" = 0
ce=$(d rxud0 ecn_ce_received) sent=$(d rxud0 cnp_sent)
got=$(d rxud1 cnp_received) cuts=$(d rxud1 cc_cnp_cuts)
echo "XUD, cc on: rxud0 ecn_ce_received +$ce cnp_sent +$sent; rxud1 cnp_received +$got cc_cnp_cuts +$cuts xud_retransmits +$(d rxud1 xud_retransmits)" | tap_diag
check "XUD: rxud0 saw the data marked CE and answered with CNPs (+$ce marks, +$sent CNPs)" \
	test "$ce" -ge 100 -a "$sent" -gt 0 -a "$sent" -le "$ce"
check "XUD: rxud1's stream took them and cut its window (+$got, cuts +$cuts)" \
	test "$got" = "$sent" -a "$cuts" -gt 0 -a "$cuts" -le "$got"

# --- RC, cc off ---
echo 0 >$CC
mark "${COUNTERS[@]}"
perf ca rxud0 cb rxud1 ib_write_bw -s 65536 -n 10
check "cc off: RC ib_write_bw 64 KB x 10 completes" result 65536 10
ce=$(d rxud0 ecn_ce_received) sent=$(d rxud0 cnp_sent) re=$(d rxud1 rc_retransmits)
echo "RC, cc off: rxud0 ecn_ce_received +$ce cnp_sent +$sent; rxud1 rc_retransmits +$re" | tap_diag
check "cc off: the requests went not ECN-capable: netem dropped some and rxud1 resent (+$re)" test "$re" -gt 0
check "cc off: no mark seen, no CNP sent (+$ce, +$sent)" test "$ce" = 0 -a "$sent" = 0
echo 1 >$CC
inns cb tc qdisc del dev cv1 root

# --- Forged CNPs (tests/xud-forge --cnp) ---
# While rxud1's RC QP writes to rxud0, CNPs for it from an address of
# rxud0's side that is not its peer's are stray: counted, nothing cut. The
# same CNPs from the peer's own address (spoofed: an on-path forger can,
# as with any RoCE packet) are taken. Its QP number from `rdma resource`.
# The writes run 30 s: a loaded guest took more than 16 s for the checks
# between (the QP was gone before the second forgery).
FORGE=$RXUD_TOP/tests/xud-forge/target/release/xud-forge
inns ca ip addr add 169.254.225.3/24 dev cv0
inns ca timeout 90 ib_write_bw -d rxud0 -x "$g0" -s 65536 -D 30 -p 18526 >/tmp/25-bw.srv 2>&1 &
bw_srv=$!
sleep 1
inns cb timeout 90 ib_write_bw -d rxud1 -x "$g1" -s 65536 -D 30 -p 18526 "$SIP" >/tmp/25-bw.cli 2>&1 &
bw_cli=$!
wait_for 20 rc_up
qpn=$(rc_qpn)
FORGED=(rx_drop_cnp_stray cnp_received cc_cnp_cuts)
mark "${FORGED[@]}"
inns ca "$FORGE" --cnp --src 169.254.225.3 --dst $CIP --qpn "${qpn:-0}" --qkey 0 --repeat 50 --gap-us 100 | tap_diag
stray=$(d rxud1 rx_drop_cnp_stray) got=$(d rxud1 cnp_received) cuts=$(d rxud1 cc_cnp_cuts)
check "50 CNPs for rxud1's RC QP $qpn from a third address: stray, none taken, nothing cut (+$stray, +$got, +$cuts)" \
	test "$stray" = 50 -a "$got" = 0 -a "$cuts" = 0
mark "${FORGED[@]}"
inns ca "$FORGE" --cnp --src $SIP --dst $CIP --qpn "${qpn:-0}" --qkey 0 --repeat 20 --gap-us 100 | tap_diag
got=$(d rxud1 cnp_received) cuts=$(d rxud1 cc_cnp_cuts) still=$(rc_qpn)
check "the same from the peer's address are taken and cut its window (+$got, cuts +$cuts; QP $still still there)" \
	test "$got" = 20 -a "$cuts" -gt 0 -a "$still" = "$qpn"
wait $bw_cli
cli_rc=$?
wait $bw_srv
check "the WRITEs under the forged CNPs complete (ib_write_bw exit $cli_rc)" test "$cli_rc" = 0

inns cb tc qdisc show dev cv1 >/dev/null
inns ca rdma link delete rxud0
inns cb rdma link delete rxud1
ip netns del ca
ip netns del cb
check "no rxud device left" wait_for 10 test "$(ib_count)" = 0
check "rmmod rxud" rmmod rxud
tap_end
