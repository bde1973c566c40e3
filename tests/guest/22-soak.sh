#!/usr/bin/env bash
# The soak (issue 27, item 13), short here (RXUD_SOAK_PACKETS, default
# 5000, within RXUD_SOAK_SECONDS, default 15); `make soak` (qemu/soak.sh)
# runs it with a million packets on the KASAN + UBSAN kernel. rxud0 and rxud1 on the two ends of a veth pair,
# each in a namespace of its own, with live traffic between them for as
# long as the storm lasts, each tool again and again: RC (tests/verbs/
# data-test, every byte and completion checked), XUD (tests/verbs/
# xud-data, data and exactly-once checked) and UD (ibv_ud_pingpong, every
# datagram received). Meanwhile tests/roce-fuzz sends crafted RoCEv2
# frames to rxud0 from rxud1's side of the link, from an address of its
# own (169.254.219.3, fd77::3): every opcode, truncations, lying lengths,
# keys and pad counts, good and bad ICRC twins, rxud0's live QPNs and the
# PSNs they expect, IP-level lies; and tests/verbs/ring-storm, run after
# run, makes QPs on rxud0 whose peer is the fuzzer's address (victims:
# the fuzzer knows their keys and memory), scribbles over their rings and
# rings their doorbells, and exits without cleaning up. Then: every
# traffic round passed, the fuzzer sent all its packets (or as many as
# its time budget let it) and rxud0 counted
# the ones that reached it as dropped, the devices go and rxud unloads,
# and the kernel log has no report (the runner's kmemleak scan and
# tests/run.sh's check of its log come after).
#
# Seeds are printed: RXUD_SOAK_SEED=N replays the fuzzer's and the
# storm's choices (the live QPNs it aims at are whatever is alive).
. "$(dirname "$0")/../lib/tap.sh"
. "$(dirname "$0")/../lib/rxud.sh"
. "$(dirname "$0")/../lib/traffic.sh"
TAP_PLANNED=10
tap_begin $TAP_PLANNED
export RDMAV_DRIVERS=$RXUD_TOP/rdma-core-provider/build/librxud

PACKETS=${RXUD_SOAK_PACKETS:-5000}
# A time budget for the fuzzer: as many of the packets as fit in it. In
# make check 15 s (make check's time budget: 20,000 packets took 64 s of
# the test's 107 at 5b20a91; at 7256a7c a 30 s budget sent 8,000 and the
# test took 95 s of its half's 688; under load the budget ends the
# fuzzer early, and the test says so). make soak sets its own, or none
# (empty).
BUDGET=${RXUD_SOAK_SECONDS-15}
# Writes per ring-storm run.
STORM_ITERS=${RXUD_SOAK_STORM_ITERS:-5000}
SEED=${RXUD_SOAK_SEED:-$(((RANDOM << 15) | RANDOM))}
FUZZ=$RXUD_TOP/tests/roce-fuzz/target/release/roce-fuzz
STORM=$RXUD_TOP/tests/verbs/ring-storm
DT=$RXUD_TOP/tests/verbs/data-test
XD=$RXUD_TOP/tests/verbs/xud-data
SIP=169.254.219.1 # rxud0's address (sv0, in sa)
CIP=169.254.219.2 # rxud1's (sv1, in sb)
FIP=169.254.219.3 # the fuzzer's, the victims' peer: no device's
# Its files where the host sees them (the run's output directory).
W=${RXUD_OUT:-/tmp}/22-soak
rm -rf $W
mkdir -p $W
echo "seed $SEED (RXUD_SOAK_SEED=$SEED replays it), $PACKETS packets" | tap_diag
# Kernel reports since this test started (the log may hold older lines).
dmesg_at=$(dmesg | wc -l)

rxud_load
rxud_pair sa sb sv0 sv1
inns sa ip -6 addr add fd77::1/64 dev sv0 nodad
inns sb ip -6 addr add fd77::3/64 dev sv1 nodad
mac0=$(inns sa ip -o link show sv0 | sed -n 's|.*link/ether \([0-9a-f:]*\).*|\1|p')
mac1=$(inns sb ip -o link show sv1 | sed -n 's|.*link/ether \([0-9a-f:]*\).*|\1|p')
# rxud0's answers to the fuzzer's address go to sv1 (where nothing takes
# them: the address is no one's), not to ARP for ever.
inns sa ip neigh replace $FIP lladdr "$mac1" dev sv0
inns sa ip -6 neigh replace fd77::3 lladdr "$mac1" dev sv0
g0=$(v2_gid_index rxud0)
g1=$(v2_gid_index rxud1)
wait_for 10 v2_gid_index rxud0 0000:0000:0000:0000:fd77
check "rxud0 and rxud1 up, rxud0 with an IPv6 GID too (macs $mac0 $mac1)" test -n "$g0" -a -n "$g1" -a -n "$mac0"

declare -A base
for c in rx_packets rx_drop_malformed rx_drop_no_qp rx_drop_bad_icrc rx_drop_unsupported \
	rx_drop_qkey rx_drop_no_recv rx_drop_sequence rx_drop_cq_full rx_drop_xud_stale \
	rx_drop_xud_peer_limit rx_drop_no_memory; do
	base[$c]=$(hwc rxud0 "$c")
done
delta() { echo $(($(hwc rxud0 "$1") - ${base[$1]})); }

rc_round() { inns sa timeout 300 "$DT" -d rxud0 -g "$g0" -D rxud1 -G "$g1" -s $((SEED + $1)) -n 60 -m 16384; }
xud_round() { inns sa timeout 300 "$XD" -d rxud0 -g "$g0" -D rxud1 -G "$g1" -s $((SEED + $1)) -n 60 -m 16384; }
ud_round() {
	local CLI_OUT=$W/ud.cli SRV_OUT=$W/ud.srv
	PP_TIMEOUT=120 run_pair sa rxud0 sb rxud1 ibv_ud_pingpong -n 100 -s 512 >/dev/null
	grep -q '^100 iters in ' "$CLI_OUT" && grep -q '^100 iters in ' "$SRV_OUT"
}
# seq_loop NAME FN: FN ROUND again and again until $W/stop exists or the
# test has gone (at least once), each round's output in $W/NAME.ROUND, its status in
# $W/NAME.rc.
seq_loop() {
	local name=$1 fn=$2 n=0 rc
	while :; do
		n=$((n + 1))
		$fn $n >"$W/$name.$n" 2>&1
		rc=$?
		echo "$n $rc" >>"$W/$name.rc"
		# Also when the test is gone (killed at its time limit).
		[ ! -e $W/stop ] && kill -0 $$ 2>/dev/null || break
		# A breath between rounds: one vCPU, and the fuzzer must get
		# most of it.
		sleep 1
	done
}
storm_round() { inns sa "$STORM" -d rxud0 -g "$g0" -p $FIP -s $((SEED + $1)) -n "$STORM_ITERS" -o $W/victims; }

t0=$SECONDS
seq_loop rc rc_round &
rc_pid=$!
seq_loop xud xud_round &
xud_pid=$!
seq_loop ud ud_round &
ud_pid=$!
seq_loop storm storm_round &
storm_pid=$!
# The first victims, before the fuzzer reads its targets.
wait_for 30 test -s $W/victims
inns sb "$FUZZ" --ifname sv1 --src-mac "$mac1" --dst-mac "$mac0" --src $FIP --dst $SIP \
	--src6 fd77::3 --dst6 fd77::1 --count "$PACKETS" --seed "$SEED" \
	--qps-cmd "rdma resource show qp link rxud0/1" --victims $W/victims ${BUDGET:+--seconds "$BUDGET"} \
	>$W/fuzz.out 2>&1
fuzz_rc=$?
fuzz_s=$((SECONDS - t0))
touch $W/stop
wait $rc_pid $xud_pid $ud_pid $storm_pid
tap_diag <$W/fuzz.out
echo "fuzzing took $fuzz_s s; all done after $((SECONDS - t0)) s" | tap_diag
sent=$(sed -n 's/^roce-fuzz: sent \([0-9]*\) packets.*/\1/p' $W/fuzz.out)
if grep -q '^roce-fuzz: stopped by its time budget' $W/fuzz.out; then
	check "roce-fuzz sent ${sent:-no} crafted packets to rxud0 (of $PACKETS: its ${BUDGET} s budget ended it; seed $SEED)" \
		test "${sent:-0}" -gt 0 -a "$fuzz_rc" = 0
else
	check "roce-fuzz sent $PACKETS crafted packets to rxud0 (seed $SEED)" test "${sent:-0}" = "$PACKETS" -a "$fuzz_rc" = 0
fi
[ "$fuzz_rc" = 0 ] || echo "roce-fuzz exited $fuzz_rc" | tap_diag

# rounds NAME: "N rounds, M failed", and the failed rounds' output.
rounds() {
	local n f
	n=$(wc -l <"$W/$1.rc")
	f=$(awk '$2 != 0' "$W/$1.rc" | wc -l)
	echo "$1: $n rounds, $f failed"
	awk '$2 != 0 { print $1 }' "$W/$1.rc" | head -n 2 | while read -r r; do
		echo "-- $1 round $r:"
		tail -n 30 "$W/$1.$r"
	done
}
all_passed() { [ -s "$W/$1.rc" ] && awk '$2 != 0 { bad = 1 } END { exit bad }' "$W/$1.rc"; }
for t in rc xud ud storm; do rounds $t | tap_diag; done
check "RC during the storm: data-test rounds all passed (data and completions checked)" all_passed rc
check "XUD during the storm: xud-data rounds all passed (data, exactly once)" all_passed xud
check "UD during the storm: ibv_ud_pingpong rounds all passed (100 of 100 each way)" all_passed ud
check "ring-storm: every run scribbled its rings, rang doorbells and exited" all_passed storm
tail -n 2 "$W/storm.1" | tap_diag

(cd /sys/class/infiniband/rxud0/ports/1/hw_counters && grep -H -v '^0$' -- rx_* xud_peers* 2>/dev/null) |
	tr '\n' ' ' | tap_diag
dropped=0
for c in rx_drop_malformed rx_drop_no_qp rx_drop_bad_icrc rx_drop_unsupported rx_drop_qkey \
	rx_drop_no_recv rx_drop_sequence rx_drop_cq_full rx_drop_xud_stale rx_drop_xud_peer_limit \
	rx_drop_no_memory; do
	dropped=$((dropped + $(delta $c)))
done
# A quarter: lies at the IP level and in UDP lengths never reach rxud,
# whole packets to live QPs may be taken.
check "rxud0 dropped and counted $dropped of them (at least $((${sent:-0} / 4)); bad ICRC: $(delta rx_drop_bad_icrc), malformed: $(delta rx_drop_malformed))" \
	test "$dropped" -ge $((${sent:-0} / 4)) -a "$dropped" -gt 0

inns sa rdma link delete rxud0
inns sb rdma link delete rxud1
check "both devices deleted" wait_for 30 ib_gone rxud0
check "rxud unloads (nothing held by the storm's or the fuzzer's leftovers)" rxud_unload
reports=$(dmesg | tail -n +$((dmesg_at + 1)) |
	grep -E 'Oops|BUG:|WARNING:|KASAN|UBSAN|kernel BUG|general protection|possible (circular|recursive) locking|inconsistent lock state|suspicious RCU usage|Call Trace')
# Lockdep stops at its first report or taint, even one from before the
# soak: then it watched nothing, and the run proves nothing of locking.
if grep -qs 'debug_locks: *0' /proc/lockdep_stats; then
	reports+="${reports:+$'\n'}lockdep was off during the soak (debug_locks 0: an earlier report or taint)"
fi
[ -z "$reports" ] || printf '%s\n' "$reports" | head -n 60 | tap_diag
check_eq "no kernel report (oops, BUG, WARNING, KASAN, UBSAN, lockdep) during the soak" "" "$reports"
ip netns del sa
ip netns del sb
tap_end
