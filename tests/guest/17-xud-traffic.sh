#!/usr/bin/env bash
# XUD traffic (Documentation/xud.rst) between two rxud devices, each in a
# network namespace of its own joined by a veth pair (tests/verbs/xud-data):
# one XUD QP on each side sending to the other at once, SEND,
# SEND_WITH_IMM, RDMA WRITE and WRITE_WITH_IMM of 1 byte to 1 MB (and a
# run of 4 MB messages), every byte and every completion checked, each
# message received exactly once; then the same over netem losing 5%,
# duplicating 5% and reordering 25% of the packets each way, where the
# counters must show retransmissions and duplicates suppressed. Also RNR
# (receives posted late), RDMA WRITEs to a deregistered MR failing alone
# with REM_ACCESS_ERR, an MR deregistered while WRITEs into it are under
# way (nothing placed after the dereg; the QP goes on), and rxud-perf
# (bandwidth and latency, one QP to four peers; one QP to 16 peers over a
# link with 1 s of delay, where the QP's cap on packets in flight holds
# new packets back), and XUD's packet size: all the link takes, or a
# smaller route's MTU.
#
# The seed is printed; RXUD_XUD_SEED=N replays a run.
. "$(dirname "$0")/../lib/tap.sh"
. "$(dirname "$0")/../lib/rxud.sh"
. "$(dirname "$0")/../lib/traffic.sh"
XD=$RXUD_TOP/tests/verbs/xud-data
TAP_PLANNED=21
tap_begin $TAP_PLANNED
export RDMAV_DRIVERS=$RXUD_TOP/rdma-core-provider/build/librxud

SIP=169.254.217.1 # rxud0's address (xv0, in xa)
CIP=169.254.217.2 # rxud1's (xv1, in xb)
SEED=${RXUD_XUD_SEED:-$(((RANDOM << 15) | RANDOM))}
echo "seed $SEED (RXUD_XUD_SEED=$SEED replays this run)" | tap_diag

counters() {
	for d in rxud0 rxud1; do
		echo "$d: $(cd /sys/class/infiniband/$d/ports/1/hw_counters &&
			grep -H . xud_* rx_drop_xud_* rx_drop_sequence rx_drop_no_recv rx_drop_malformed tx_errors tx_budget_waits 2>/dev/null | tr '\n' ' ')"
	done | tap_diag
}

# xud_data DESC ARGS...: one run of xud-data between rxud0 and rxud1.
xud_data() {
	local desc=$1 out rc t=$SECONDS
	shift
	out=$(inns xa timeout 240 "$XD" -d rxud0 -g "${g0:-0}" -D rxud1 -G "${g1:-0}" "$@" 2>&1)
	rc=$?
	printf '%s\n' "xud-data $* ($((SECONDS - t)) s):" "$out" | tap_diag
	counters
	check_eq "$desc" 0 "$rc"
}

rxud_load
# XUD's packets to a peer in trains (the default, said here; design.rst).
rxud_trains on
rxud_pair xa xb xv0 xv1
g0=$(v2_gid_index rxud0)
g1=$(v2_gid_index rxud1)

xa0=$(($(hwc rxud0 xud_acks_sent) + $(hwc rxud1 xud_acks_sent)))
xr0=$(($(hwc rxud0 xud_acks_received) + $(hwc rxud1 xud_acks_received)))
xp0=$(($(hwc rxud0 rx_packets) + $(hwc rxud1 rx_packets)))
xud_data "xud-data: 200 messages both ways, 1 B to 1 MB, seed $SEED" -s "$SEED" -n 200 -m 1048576
xa=$(($(hwc rxud0 xud_acks_sent) + $(hwc rxud1 xud_acks_sent) - xa0))
xr=$(($(hwc rxud0 xud_acks_received) + $(hwc rxud1 xud_acks_received) - xr0))
xp=$(($(hwc rxud0 rx_packets) + $(hwc rxud1 rx_packets) - xp0))
# Coalesced: an ACK per ack_every (16) data packets and at a message's
# end; the 200 messages are some 10000 packets each way.
check "XUD ACKs coalesced and taken (xud_acks_sent +$xa, received +$xr, of $xp packets received)" \
	test "$xa" -gt 0 -a "$xr" -gt 0 -a "$xr" -le "$xa" -a $((3 * xa)) -lt "$xp"
xud_data "xud-data: 12 messages of up to 4 MB, seed $((SEED + 1))" -s $((SEED + 1)) -n 12 -m 4194304 -k 2
xud_data "xud-data with an ACK asked for every packet (ack_every 1), seed $((SEED + 2))" \
	-s $((SEED + 2)) -n 100 -m 65536 -a 1
rnr0=$(($(hwc rxud0 xud_rnr_naks_sent) + $(hwc rxud1 xud_rnr_naks_sent)))
nk0=$(($(hwc rxud0 xud_naks_sent) + $(hwc rxud1 xud_naks_sent)))
nkr0=$(($(hwc rxud0 xud_naks_received) + $(hwc rxud1 xud_naks_received)))
xud_data "xud-data with the receives posted 300 ms late (RNR) and WRITEs to a deregistered MR (REM_ACCESS_ERR, the others go on), seed $((SEED + 4))" \
	-s $((SEED + 4)) -n 100 -m 65536 -r 300 -x
rnr=$(($(hwc rxud0 xud_rnr_naks_sent) + $(hwc rxud1 xud_rnr_naks_sent) - rnr0))
check "SENDs that found no receive were RNR NAKed, then delivered (xud_rnr_naks_sent +$rnr)" test "$rnr" -gt 0
nk=$(($(hwc rxud0 xud_naks_sent) + $(hwc rxud1 xud_naks_sent) - nk0))
nkr=$(($(hwc rxud0 xud_naks_received) + $(hwc rxud1 xud_naks_received) - nkr0))
check "xud_naks_sent counts the RNR and access NAKs (+$nk >= +$rnr), and senders took them (+$nkr)" \
	test "$nk" -ge "$rnr" -a "$nkr" -gt 0 -a "$nkr" -le "$nk"
# The link from A (rxud0, the writer) runs at 40 Mbit/s here, so that a
# 2 MB WRITE takes some 0.4 s and the dereg can come in its middle: over
# a bare veth, rxud's trains place it whole before the poller that waits
# for its first bytes has run (all 4 rounds, in the run that added trains).
if modprobe sch_netem 2>/dev/null && inns xa tc qdisc add dev xv0 root netem rate 40mbit 2>/dev/null; then
	slowed=" (40 Mbit/s link)"
else
	slowed=" (full speed: no netem qdisc)"
fi
xud_data "xud-data -X$slowed: the target MR deregistered while 6 RDMA WRITEs of 2 MB into it are under way: nothing placed after the dereg, each WRITE succeeds or fails REM_ACCESS_ERR, the QP goes on" \
	-X -m 2097152
inns xa tc qdisc del dev xv0 root 2>/dev/null

# rxud-perf (XUD's perftest): rxud1's one QP to four QPs of rxud0, over
# TCP for the setup as perftest; the server checks every SEND's bytes.
# [PEERS=N] rxud_perf DESC CLIENT_ARGS... (N server QPs, 4 by default)
rxud_perf() {
	local desc=$1 srv cli t=$SECONDS
	shift
	inns xa timeout 120 "$RP" -d rxud0 -x "${g0:-0}" -q "${PEERS:-4}" -p 18517 >/tmp/17-perf.srv 2>&1 &
	local spid=$!
	cli=$(inns xb timeout 120 "$RP" -d rxud1 -x "${g1:-0}" -p 18517 "$@" "$SIP" 2>&1)
	local rc=$?
	wait $spid
	local src=$?
	srv=$(cat /tmp/17-perf.srv)
	printf '%s\n' "rxud-perf $* ($((SECONDS - t)) s):" "$cli" "$srv" | tap_diag
	check "$desc" test "$rc" = 0 -a "$src" = 0
}
RP=$RXUD_TOP/tests/verbs/rxud-perf
rxud_perf "rxud-perf SEND bandwidth, 64 KB x 300, one QP to 4 peers" -t bw -o send -s 65536 -n 300
# The WRITEs go in packets of 1344 bytes, all the veth's 1500 takes
# beside XUD's headers (xud.rst, "Packet sizes"): 49 per 64 KB message,
# not the 64 of 1 KB packets. rxud1 sends nothing else meanwhile but
# what it resends.
tp0=$(hwc rxud1 tx_packets)
rxud_perf "rxud-perf RDMA WRITE bandwidth, 64 KB x 300, one QP to 4 peers" -t bw -o write -s 65536 -n 300
tp=$(($(hwc rxud1 tx_packets) - tp0))
check "the 300 WRITEs of 64 KB took 49 packets each, 1344 bytes of payload (rxud1 tx_packets +$tp; 14700 and what was resent)" \
	test "$tp" -ge 14700 -a "$tp" -le 15435
# A route to the peer with a smaller MTU than the link's (1300): packets
# to it carry what that route takes, 1152 bytes (57 per 64 KB), where a
# 1344-byte packet would not fit it and IP would drop it (DF).
inns xb ip route replace "$SIP/32" dev xv1 mtu 1300
tp0=$(hwc rxud1 tx_packets)
rxud_perf "rxud-perf RDMA WRITE, 64 KB x 100, over a route with MTU 1300" -t bw -o write -s 65536 -n 100
tp=$(($(hwc rxud1 tx_packets) - tp0))
inns xb ip route del "$SIP/32" dev xv1
check "the route's MTU set the packets: 57 per 64 KB, 1152 bytes of payload (rxud1 tx_packets +$tp; 5700 and what was resent)" \
	test "$tp" -ge 5700 -a "$tp" -le 5985
rxud_perf "rxud-perf SEND latency, 64 B x 300" -t lat -s 64 -n 300

# The QP's cap on packets in flight (1024 over all its streams; xud.rst,
# "Limits, per QP"): one QP to 16 peers, 4 messages of 49 packets each,
# each stream with its pipe of 128, over a link that delays the data 1
# s: the streams would have 2048 packets out before the first ACK came
# back, however slowly the guest sends (1024 packets take well under a
# second here). The cap holds new packets back (xud_qp_cap_waits) and
# every message arrives. (-T 20: a retransmit timeout of 4.3 s, above
# the round trip.)
if inns xb tc qdisc add dev xv1 root netem delay 1000ms limit 10000 2>/dev/null; then
	cw0=$(hwc rxud1 xud_qp_cap_waits)
	PEERS=16 rxud_perf "rxud-perf SEND, 64 KB x 64, one QP to 16 peers, 1 s of delay" \
		-t bw -o send -s 65536 -n 64 -T 20
	inns xb tc qdisc del dev xv1 root
	cw=$(($(hwc rxud1 xud_qp_cap_waits) - cw0))
	check "the QP's cap on packets in flight held new packets back (xud_qp_cap_waits +$cw)" \
		test "$cw" -gt 0
else
	tap_skip "rxud-perf to 16 peers over a delay" "no netem qdisc"
	tap_skip "the QP's cap" "no netem qdisc"
fi

NETEM="loss 5% duplicate 5% delay 1ms reorder 25%"
re0=$(($(hwc rxud0 xud_retransmits) + $(hwc rxud1 xud_retransmits)))
du0=$(($(hwc rxud0 xud_duplicates) + $(hwc rxud1 xud_duplicates)))
if modprobe sch_netem 2>/dev/null &&
	inns xa tc qdisc add dev xv0 root netem $NETEM 2>/dev/null &&
	inns xb tc qdisc add dev xv1 root netem $NETEM 2>/dev/null; then
	xud_data "xud-data over netem ($NETEM): exactly once, data right, seed $((SEED + 3))" \
		-s $((SEED + 3)) -n 200 -m 262144
	inns xa tc qdisc del dev xv0 root
	inns xb tc qdisc del dev xv1 root
	re=$(($(hwc rxud0 xud_retransmits) + $(hwc rxud1 xud_retransmits) - re0))
	du=$(($(hwc rxud0 xud_duplicates) + $(hwc rxud1 xud_duplicates) - du0))
	check "lost packets were sent again (xud_retransmits +$re)" test "$re" -gt 0
	check "duplicates arrived and were answered, not delivered (xud_duplicates +$du)" test "$du" -gt 0
else
	tap_skip "xud-data over netem" "no netem qdisc"
	tap_skip "retransmissions" "no netem qdisc"
	tap_skip "duplicates" "no netem qdisc"
fi

inns xa rdma link delete rxud0
inns xb rdma link delete rxud1
ip netns del xa
ip netns del xb
check "no rxud device left" test "$(ib_count)" = 0
check "rmmod rxud after XUD traffic" rxud_unload
tap_end
