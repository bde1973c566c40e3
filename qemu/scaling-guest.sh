#!/usr/bin/env bash
# Runs in each VM of `make bench-scaling` (qemu/bench.sh --scaling; issue
# 10's scaling runs): aggregate bandwidth of 64 KB RDMA WRITEs over 1, 4,
# 16 and 64 QPs, rxe's RC and rxud's RC (ib_write_bw -q N) and rxud's XUD
# (rxud-perf: one XUD QP in vm1 to N XUD QPs in vm0, round robin), and one
# iperf3 TCP stream for scale. The host boots the pair once per vCPU
# count. vm1 writes bench.tsv lines as qemu/bench-guest.sh does:
#   PROVIDER "ib_write_bw 64 KB" QPS VALUE MB/s ROUND
# (PROVIDER rxe, rxud or xud; tcp's line as bench-guest.sh's).
set -u
BENCH_GUEST_LIB=1
# shellcheck source=qemu/bench-guest.sh
. "$(dirname "${BASH_SOURCE[0]}")/bench-guest.sh"

# QP (and XUD peer) counts, and the rounds: providers in turn, the order
# reversed in even rounds so that a drift of the host's load favours
# neither.
SCALE_QPS=(1 4 16 64)
SCALE_ROUNDS=2
# perftest's run (6 s, the middle 4 measured, as make bench's rows) and
# rxud-perf's (it counts messages: about 4 s at 16 MB/s).
SCALE_RUN="ib_write_bw 65536 $BW"
XUD_MSGS=1000

# scale PROV ROUND: SCALE_RUN over each of SCALE_QPS on PROV's device,
# then for rxud XUD's runs over as many peers.
scale() {
	local prov=$1 round=$2 q name v
	up "$prov" "scale-$round"
	for q in "${SCALE_QPS[@]}"; do
		perf_args "$SCALE_RUN -q $q"
		for name in "$prov-$round-q$q" "$prov-$round-q$q-again"; do
			run_both "$name" timeout 150 "$t" "${args[@]}"
			rdma statistic show link "$dev/1" >"$RXUD_OUT/$name.stats" 2>&1
			again "$name" || break
		done
		[ "$RXUD_VM" = 1 ] && record "$prov" "ib_write_bw 64 KB" "$q" "$(result "$RXUD_OUT/$name.client" "$t")" MB/s "$round"
	done
	if [ "$prov" = rxud ]; then
		for q in "${SCALE_QPS[@]}"; do
			name=xud-$round-q$q
			if [ "$RXUD_VM" = 0 ]; then
				args=(-q "$q")
			else
				args=(-t bw -o write -s 65536 -n "$XUD_MSGS")
			fi
			run_both "$name" timeout 150 "$top/tests/verbs/rxud-perf" -d "$dev" -x "$gid" "${args[@]}"
			rdma statistic show link "$dev/1" >"$RXUD_OUT/$name.stats" 2>&1
			[ "$RXUD_VM" = 1 ] && record xud "ib_write_bw 64 KB" "$q" "$(xud_result "$RXUD_OUT/$name.client")" MB/s "$round"
		done
	fi
	down "$prov" "scale-$round"
}

nproc >"$RXUD_OUT/cpus"
prepare
in_rounds "$SCALE_ROUNDS" scale
echo "== vm$RXUD_VM: done"
