#!/usr/bin/env bash
# RC and UC traffic: ibv_rc_pingpong and perftest (SEND, RDMA WRITE, RDMA
# READ, atomics), ibv_uc_pingpong and UC WRITEs, between two rxud devices,
# each in a network namespace of its own joined by a veth pair; then rxud
# and rxe against each other (interop), with the ports' counters showing
# what crossed. (RC over a lossy link: 12-rc-loss.sh.)
. "$(dirname "$0")/../lib/tap.sh"
. "$(dirname "$0")/../lib/rxud.sh"
. "$(dirname "$0")/../lib/traffic.sh"
TAP_PLANNED=31
tap_begin $TAP_PLANNED
export RDMAV_DRIVERS=$RXUD_TOP/rdma-core-provider/build/librxud

SIP=169.254.211.1 # the server's address (rcv0, in rca)
CIP=169.254.211.2 # the client's (rcv1, in rcb)
CLI_OUT=/tmp/10-rc.client
SRV_OUT=/tmp/10-rc.server

rxud_load
# With trains (the default, said here as this file checks them): the
# interop runs below are rxe taking rxud's trains, cut back into packets
# by the receiving stack.
rxud_trains on
modprobe rdma_rxe
rxud_pair rca rcb rcv0 rcv1

# --- ibv_rc_pingpong between the two rxud devices ----------------------
# 8 KB at path MTU 1024: each message is 8 packets (first, middle, last);
# with completion events: req_notify_cq, the CQ's event and
# ibv_get_cq_event instead of busy polling.
rx0=$(hwc rxud0 rx_packets)
pingpong rca rxud0 rcb rxud1 -s 8192 -n 50 -e
check "ibv_rc_pingpong -c -e (completion channel events), 8 KB x 50, between two rxud devices" pp_done 50
rx=$(($(hwc rxud0 rx_packets) - rx0))
check "rxud0 received the 8 KB messages as 8 packets each (>= 400, got $rx)" test "$rx" -ge 400

# Over IPv6: between the devices' RoCE v2 GIDs of fd00:211::/64, messages
# of one packet.
inns rca ip -6 addr add fd00:211::1/64 dev rcv0 nodad
inns rcb ip -6 addr add fd00:211::2/64 dev rcv1 nodad
wait_for 10 v2_gid_index rxud0 fd00:0211:
wait_for 10 v2_gid_index rxud1 fd00:0211:
GID_PREFIX=fd00:0211: pingpong rca rxud0 rcb rxud1 -s 64 -n 50
check "ibv_rc_pingpong -c over IPv6, 64 B x 50" pp_done 50

# --- perftest over RC ----------------------------------------------------
perf rca rxud0 rcb rxud1 ib_send_bw -s 65536 -n 100
check "ib_send_bw (RC SEND) 64 KB x 100 between two rxud devices" result 65536 100
# The ports' counters of that run (rxud1 writes, rxud0 answers): every
# packet counted with its bytes, coalesced ACKs, doorbells.
snap_counters() {
	local c
	for c in "rxud1 tx_packets" "rxud1 tx_bytes" "rxud0 rx_packets" "rxud0 rx_bytes" \
		"rxud0 rc_acks_sent" "rxud1 rc_acks_received" "rxud1 doorbells" "rxud0 rc_passes_skipped"; do
		# shellcheck disable=SC2086
		printf '%s ' "$(hwc $c)"
	done
}
read -r tp0 tb0 rp0 rb0 as0 ar0 db0 ps0 < <(snap_counters)
perf rca rxud0 rcb rxud1 ib_write_bw -s 65536 -n 100
check "ib_write_bw (RDMA WRITE) 64 KB x 100 between two rxud devices" result 65536 100
runs=$PAIR_RUNS # 2 if perftest ran again: the counters hold both runs
read -r tp tb rp rb as ar db ps < <(snap_counters)
tp=$((tp - tp0)) tb=$((tb - tb0)) rp=$((rp - rp0)) rb=$((rb - rb0)) as=$((as - as0)) ar=$((ar - ar0)) db=$((db - db0)) ps=$((ps - ps0))
echo "ib_write_bw 64 KB x 100: rxud1 tx_packets +$tp tx_bytes +$tb doorbells +$db rc_acks_received +$ar; rxud0 rx_packets +$rp rx_bytes +$rb rc_acks_sent +$as" | tap_diag
# 64 packets of 1 KB per message at path MTU 1024, each with 16 bytes of
# BTH and ICRC (and the first a RETH).
check "tx_packets counts the writer's packets (>= 6400: +$tp)" test "$tp" -ge 6400
check "tx_bytes counts their bytes (>= 100 x 64 KB + 6400 x 16: +$tb)" test "$tb" -ge $((6553600 + 6400 * 16))
check "rx_bytes counts what reached the responder (>= 100 x 64 KB: +$rb)" test "$rb" -ge 6553600
check "rc_acks_sent: coalesced, fewer than one per 2 packets received (+$as of +$rp)" \
	test "$as" -gt 0 -a $((2 * as)) -lt "$rp"
check "rc_acks_received: the writer took ACKs (+$ar, at most +$as sent)" test "$ar" -gt 0 -a "$ar" -le "$as"
# A WRITE's packets between coalesced ACKs leave the responder's QP
# nothing to send: its pass after them is skipped (not after all: the
# ACKs went).
check "rc_passes_skipped: the responder skipped its pass after most packets (+$ps of +$rp)" \
	test "$ps" -gt $((rp / 2)) -a "$ps" -lt "$rp"
check "doorbells: at least one, at most one per WR (+$db for 100 WRs x $runs run)" \
	test "$db" -ge 1 -a "$db" -le $((100 * runs))
check "the writer's packets went in trains (tx_trains $(hwc rxud1 tx_trains), tx_train_packets $(hwc rxud1 tx_train_packets))" \
	test "$(hwc rxud1 tx_train_packets)" -gt "$(hwc rxud1 tx_trains)" -a "$(hwc rxud1 tx_trains)" -gt 0
# The READ runs with the timing counters on (module parameter timing):
# the time of the receive path, its ICRC check, its transport part and
# the placement within that (the READ responses' payload), the senders'
# packet building and IP counts up.
NS_COUNTERS="rx_ns rx_icrc_ns rx_transport_ns rx_place_ns tx_build_ns tx_ip_ns"
ns_sum() { echo $(($(hwc rxud0 "$1") + $(hwc rxud1 "$1"))); }
read -r rx0 ic0 tr0 pl0 tx0 ip0 < <(for c in $NS_COUNTERS; do printf '%s ' "$(ns_sum $c)"; done)
echo 1 >/sys/module/rxud/parameters/timing
perf rca rxud0 rcb rxud1 ib_read_bw -s 65536 -n 100
check "ib_read_bw (RDMA READ) 64 KB x 100 between two rxud devices" result 65536 100
echo 0 >/sys/module/rxud/parameters/timing
read -r rx1 ic1 tr1 pl1 tx1 ip1 < <(for c in $NS_COUNTERS; do printf '%s ' "$(ns_sum $c)"; done)
check "with timing on, rx_ns, rx_icrc_ns and rx_transport_ns (parts of it), rx_place_ns (a part of that), tx_build_ns and tx_ip_ns count (+$((rx1 - rx0)) +$((ic1 - ic0)) +$((tr1 - tr0)) +$((pl1 - pl0)) +$((tx1 - tx0)) +$((ip1 - ip0)) ns)" \
	test $((ic1 - ic0)) -gt 0 -a $((pl1 - pl0)) -gt 0 -a $((tr1 - tr0)) -gt $((pl1 - pl0)) \
	-a $((rx1 - rx0)) -gt $((ic1 - ic0 + tr1 - tr0)) -a $((tx1 - tx0)) -gt 0 -a $((ip1 - ip0)) -gt 0
# Atomics are 8 bytes; perftest refuses any other -s. (Compare-and-swap,
# with its results checked: 11-rc-semantics.sh and 13-data-integrity.sh.)
perf rca rxud0 rcb rxud1 ib_atomic_bw -A FETCH_AND_ADD -n 200
check "ib_atomic_bw -A FETCH_AND_ADD x 200 between two rxud devices" result 8 200

# UC: RC's packets without ACKs (a lossless veth: every message arrives).
uc_pingpong rca rxud0 rcb rxud1 -s 8192 -n 50
check "ibv_uc_pingpong, 8 KB x 50 (UC), between two rxud devices" pp_done 50
perf rca rxud0 rcb rxud1 ib_write_bw -c UC -s 65536 -n 100
check "ib_write_bw -c UC 64 KB x 100 between two rxud devices" result 65536 100

# Where the RC packets went (RNR NAKs slow SEND streams down).
rdma statistic show link rxud0/1 | tap_diag
inns rcb rdma statistic show link rxud1/1 | tap_diag
check_eq "no ICRC errors (rxud0 rxud1)" "0 0" "$(hwc rxud0 rx_drop_bad_icrc) $(hwc rxud1 rx_drop_bad_icrc)"
check_eq "no packet dropped as malformed or unsupported (rxud0 rxud1)" "0 0 0 0" \
	"$(hwc rxud0 rx_drop_malformed) $(hwc rxud0 rx_drop_unsupported) $(hwc rxud1 rx_drop_malformed) $(hwc rxud1 rx_drop_unsupported)"

# --- Interop: rxe on a veth end in the initial namespace, rxud in rca -----
inns rcb rdma link delete rxud1
inns rcb ip link set rcv1 netns 1
ip addr add $CIP/24 dev rcv1
ip link set rcv1 up
rdma link add rxe0 type rxe netdev rcv1
wait_for 10 ping -c1 -W1 $SIP >/dev/null
wait_for 10 v2_gid_index rxe0
pingpong rca rxud0 - rxe0 -s 8192 -n 20
check "ibv_rc_pingpong -c, 8 KB x 20: rxe client, rxud server" pp_done 20
# The client connects to $SIP: for rxud as the client, the server (rxe0)
# is at $CIP.
SIP=$CIP pingpong - rxe0 rca rxud0 -s 8192 -n 20
check "ibv_rc_pingpong -c, 8 KB x 20: rxud client, rxe server" pp_done 20
uc_pingpong rca rxud0 - rxe0 -s 8192 -n 20
check "ibv_uc_pingpong, 8 KB x 20: rxe client, rxud server" pp_done 20
SIP=$CIP uc_pingpong - rxe0 rca rxud0 -s 8192 -n 20
check "ibv_uc_pingpong, 8 KB x 20: rxud client, rxe server" pp_done 20
# RDMA WRITE and READ both ways: rxud as requester and as responder.
perf rca rxud0 - rxe0 ib_write_bw -s 65536 -n 50
check "ib_write_bw 64 KB x 50: rxe writes to rxud" result 65536 50
SIP=$CIP perf - rxe0 rca rxud0 ib_write_bw -s 65536 -n 50
check "ib_write_bw 64 KB x 50: rxud writes to rxe" result 65536 50
perf rca rxud0 - rxe0 ib_read_bw -s 65536 -n 50
check "ib_read_bw 64 KB x 50: rxe reads from rxud" result 65536 50
SIP=$CIP perf - rxe0 rca rxud0 ib_read_bw -s 65536 -n 50
check "ib_read_bw 64 KB x 50: rxud reads from rxe" result 65536 50
# What the interop runs cost on each side (retransmissions, sequence
# errors, duplicates).
inns rca rdma statistic show link rxud0/1 | tap_diag
rdma statistic show link rxe0/1 | tap_diag
check_eq "no ICRC errors on rxe's packets" 0 "$(hwc rxud0 rx_drop_bad_icrc)"

rdma link delete rxe0
inns rca rdma link delete rxud0
ip link del rcv1
ip netns del rca
ip netns del rcb
rmmod rdma_rxe
check "no rxud device left" test "$(ib_count)" = 0
check "rmmod rxud" rxud_unload
tap_end
