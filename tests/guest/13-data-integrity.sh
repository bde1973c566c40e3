#!/usr/bin/env bash
# Data integrity over RC (tests/verbs/data-test): a seeded random sequence
# of SENDs, WRITEs (with and without immediate), READs and atomics, random
# sizes up to 64 KB, offsets and SGE counts, inline data, up to 8 in flight,
# both ends' memory and every completion checked. Between two rxud devices
# in namespaces of their own joined by a veth pair; then over that link
# with netem losing, duplicating and reordering packets both ways; then rxe
# and rxud against each other both ways round, on a clean link and on one
# that loses and duplicates packets, and rxe alone (the reference: the
# same seed as the first run). Between the two rxud devices and from rxe
# to rxud also with GRO on the veth, so that rxud receives GRO trains
# (rust/ffi/gro.c). Also ibv_srq_pingpong -c between the two rxud
# devices.
#
# The seed is printed; RXUD_DATA_SEED=N replays a run.
. "$(dirname "$0")/../lib/tap.sh"
. "$(dirname "$0")/../lib/rxud.sh"
. "$(dirname "$0")/../lib/traffic.sh"
DT=$RXUD_TOP/tests/verbs/data-test
TAP_PLANNED=19
tap_begin $TAP_PLANNED
export RDMAV_DRIVERS=$RXUD_TOP/rdma-core-provider/build/librxud

SIP=169.254.213.1 # rxud0's address (div0, in dia)
CIP=169.254.213.2 # rxud1's, then rxe0's (div1, in dib, then here)
CLI_OUT=/tmp/13-data.client
SRV_OUT=/tmp/13-data.server
SEED=${RXUD_DATA_SEED:-$(((RANDOM << 15) | RANDOM))}
echo "seed $SEED (RXUD_DATA_SEED=$SEED replays this run)" | tap_diag

# data_test DESC NS ARGS...: one run of data-test in namespace NS ("-":
# this one), its output as diagnostics (with the rxud ports' counters if it
# failed), passing as a check.
data_test() {
	local desc=$1 ns=$2 out rc t=$SECONDS
	shift 2
	out=$(inns "$ns" timeout 120 "$DT" "$@" 2>&1)
	rc=$?
	printf '%s\n' "data-test $* ($((SECONDS - t)) s):" "$out" | tap_diag
	if [ $rc -ne 0 ]; then
		inns dia rdma statistic show link rxud0/1 2>&1 | tap_diag
		inns dib rdma statistic show link rxud1/1 2>&1 | tap_diag
	fi
	check_eq "$desc" 0 "$rc"
}

rxud_load
modprobe rdma_rxe
rxud_pair dia dib div0 div1
g0=$(v2_gid_index rxud0)
g1=$(v2_gid_index rxud1)

# --- Between two rxud devices --------------------------------------------
data_test "data-test, 300 random operations between rxud0 and rxud1, seed $SEED" dia \
	-d rxud0 -g "${g0:-0}" -D rxud1 -G "${g1:-0}" -s "$SEED" -n 300

# Several QPs sharing one SRQ on each side.
srq_pingpong dia rxud0 dib rxud1 -s 4096 -q 4 -n 100
check "ibv_srq_pingpong -c, 4 QPs on an SRQ each side, 4 KB x 100, between two rxud devices" pp_done 100

# --- The same with GRO trains on receive ---------------------------------
# rxud's GRO (rust/ffi/gro.c): a veth does GRO once asked (ethtool -K DEV
# gro on gives its receiving end NAPI), for what a peer without TSO sends
# it (veth_skb_is_eligible_for_gro); with GSO off the senders hand IP
# single datagrams, which GRO then links into trains for rxud's socket,
# and rxud cuts loose again and checks one by one.
gro_link() { # on|off
	local g=$1 s=off
	[ "$g" = on ] || s=on
	inns dia ethtool -K div0 gro "$g" gso "$s" tso "$s" >/dev/null &&
		inns dib ethtool -K div1 gro "$g" gso "$s" tso "$s" >/dev/null
}
trains_in() { echo $(($(hwc rxud0 rx_trains) + $(hwc rxud1 rx_trains))); }
qp_reused() { echo $(($(hwc rxud0 rx_qp_reused) + $(hwc rxud1 rx_qp_reused))); }
mr_reused() { echo $(($(hwc rxud0 rx_mr_reused) + $(hwc rxud1 rx_mr_reused))); }
rt0=$(trains_in) rp0=$(($(hwc rxud0 rx_train_packets) + $(hwc rxud1 rx_train_packets))) rq0=$(qp_reused) rm0=$(mr_reused)
check "GRO on and GSO off on both veth ends" gro_link on
data_test "data-test, 200 random operations between rxud0 and rxud1 with GRO trains, seed $((SEED + 6))" dia \
	-d rxud0 -g "${g0:-0}" -D rxud1 -G "${g1:-0}" -s $((SEED + 6)) -n 200
rt=$(($(trains_in) - rt0))
rp=$(($(hwc rxud0 rx_train_packets) + $(hwc rxud1 rx_train_packets) - rp0))
rq=$(($(qp_reused) - rq0))
rm=$(($(mr_reused) - rm0))
check "received datagrams came in GRO trains (rx_trains +$rt, rx_train_packets +$rp)" \
	test "$rt" -gt 0 -a "$rp" -ge $((2 * rt))
# A train is one flow, mostly one QP's: its datagrams after the first find
# their QP in the one before them (one lookup per run), never more than
# that many.
check "datagrams of a train took the QP found for the one before them (rx_qp_reused +$rq of at most $((rp - rt)))" \
	test "$rq" -gt 0 -a "$rq" -le $((rp - rt))
# And the MR a datagram placed into is the next one's without a lookup,
# when it names the same key (the packets of one message): never more
# than the datagrams after a train's first. data-test above checks every
# byte landed where its key says.
check "datagrams of a train took the MR the one before them found (rx_mr_reused +$rm of at most $((rp - rt)))" \
	test "$rm" -gt 0 -a "$rm" -le $((rp - rt))
gro_link off

# --- The same over a link that loses, duplicates and reorders ------------
# netem on both veth ends: each way, 1% of the packets lost, 1% sent
# twice, and 75% held back 1 ms while the rest overtake them.
NETEM="loss 1% duplicate 1% delay 1ms reorder 25%"
nm_why=$(modprobe sch_netem 2>&1)
if nm_err=$(inns dia tc qdisc add dev div0 root netem $NETEM 2>&1) &&
	nm_err=$(inns dib tc qdisc add dev div1 root netem $NETEM 2>&1); then
	re0=$(($(hwc rxud0 rc_retransmits) + $(hwc rxud1 rc_retransmits)))
	data_test "data-test, 300 random operations over netem ($NETEM), seed $((SEED + 1))" dia \
		-d rxud0 -g "${g0:-0}" -D rxud1 -G "${g1:-0}" -s $((SEED + 1)) -n 300
	dropped=0
	for e in dia:div0 dib:div1; do
		ns=${e%:*} dev=${e#*:}
		nm_stats=$(inns "$ns" tc -s qdisc show dev "$dev")
		printf '%s\n' "$dev: $nm_stats" | tap_diag
		d=$(sed -n 's/.*(dropped \([0-9]*\),.*/\1/p' <<<"$nm_stats" | head -n 1)
		dropped=$((dropped + ${d:-0}))
		inns "$ns" tc qdisc del dev "$dev" root
	done
	re=$(($(hwc rxud0 rc_retransmits) + $(hwc rxud1 rc_retransmits) - re0))
	check "netem dropped packets of the run ($dropped)" test "$dropped" -gt 0
	check "lost packets were sent again (rc_retransmits +$re)" test "$re" -gt 0
else
	why="no netem qdisc in this kernel: ${nm_err//$'\n'/ }${nm_why:+ (modprobe sch_netem: ${nm_why//$'\n'/ })}"
	inns dia tc qdisc del dev div0 root 2>/dev/null
	tap_skip "data-test over netem" "$why"
	tap_skip "netem dropped packets" "$why"
	tap_skip "rc_retransmits" "$why"
fi
rdma statistic show link rxud0/1 | tap_diag
inns dib rdma statistic show link rxud1/1 | tap_diag
check_eq "no ICRC errors, malformed or unsupported packets (rxud0 rxud1)" "0 0 0 0 0 0" \
	"$(for d in rxud0 rxud1; do for c in rx_drop_bad_icrc rx_drop_malformed rx_drop_unsupported; do
		printf '%s ' "$(hwc $d $c)"; done; done | sed 's/ $//')"

# --- rxe and rxud: rxe on div1 in this namespace, rxud0 still in dia ---
inns dib rdma link delete rxud1
inns dib ip link set div1 netns 1
ip addr add $CIP/24 dev div1
ip link set div1 up
rdma link add rxe0 type rxe netdev div1
wait_for 10 ping -c1 -W1 $SIP >/dev/null
wait_for 10 v2_gid_index rxe0
ge=$(v2_gid_index rxe0)
data_test "data-test, 200 random operations, QP A on rxe0, QP B on rxud0, seed $((SEED + 2))" dia \
	-d rxe0 -g "${ge:-0}" -D rxud0 -G "${g0:-0}" -s $((SEED + 2)) -n 200
data_test "data-test, 200 random operations, QP A on rxud0, QP B on rxe0, seed $((SEED + 3))" dia \
	-d rxud0 -g "${g0:-0}" -D rxe0 -G "${ge:-0}" -s $((SEED + 3)) -n 200
# rxe's datagrams in GRO trains at rxud0 (GRO on its veth end, TSO off on
# rxe's; rxe sends no GSO), and rxud0's to rxe0 one by one (GSO off).
rt0=$(hwc rxud0 rx_trains)
inns dia ethtool -K div0 gro on gso off >/dev/null
ethtool -K div1 tso off >/dev/null
data_test "data-test, 200 random operations, QP A on rxe0, QP B on rxud0 taking GRO trains, seed $((SEED + 7))" dia \
	-d rxe0 -g "${ge:-0}" -D rxud0 -G "${g0:-0}" -s $((SEED + 7)) -n 200
inns dia ethtool -K div0 gro off gso on >/dev/null
ethtool -K div1 tso on >/dev/null
# Diagnostic only: rxe sends each packet from its task with bottom halves
# enabled again after it, so the veth's NAPI mostly polls one at a time
# and trains are rare (2 in a trial run).
echo "rxud0 took $(($(hwc rxud0 rx_trains) - rt0)) GRO trains of rxe0's datagrams" | tap_diag
# And over a link that loses and duplicates packets (no reordering: rxe's
# requester cannot take it, see Documentation/design.rst, "rxe under
# reordering"). This is where rxe met rxud's plain ACKs naming a READ's or
# atomic's PSN and completed them without their data.
NETEM_INTEROP="loss 1% duplicate 1%"
if inns dia tc qdisc add dev div0 root netem $NETEM_INTEROP 2>/dev/null &&
	tc qdisc add dev div1 root netem $NETEM_INTEROP 2>/dev/null; then
	data_test "data-test over netem ($NETEM_INTEROP), QP A on rxe0, QP B on rxud0, seed $((SEED + 4))" dia \
		-d rxe0 -g "${ge:-0}" -D rxud0 -G "${g0:-0}" -s $((SEED + 4)) -n 200 -m 8192
	data_test "data-test over netem ($NETEM_INTEROP), QP A on rxud0, QP B on rxe0, seed $((SEED + 5))" dia \
		-d rxud0 -g "${g0:-0}" -D rxe0 -G "${ge:-0}" -s $((SEED + 5)) -n 200 -m 8192
	inns dia tc qdisc del dev div0 root
	tc qdisc del dev div1 root
else
	tap_skip "data-test over netem, rxe0 and rxud0" "no netem qdisc"
	tap_skip "data-test over netem, rxud0 and rxe0" "no netem qdisc"
fi
# The reference: rxe with the seed of the first run, two QPs of rxe0.
data_test "data-test on rxe0 alone (the reference), seed $SEED" - -d rxe0 -g "${ge:-0}" -s "$SEED" -n 300

rdma link delete rxe0
inns dia rdma link delete rxud0
ip link del div1
ip netns del dia
ip netns del dib
rmmod rdma_rxe
check "no rxud device left" test "$(ib_count)" = 0
check "rmmod rxud" rxud_unload
tap_end
