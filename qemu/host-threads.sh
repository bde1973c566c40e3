#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
# Where the host's CPUs go while the bench VMs move RDMA traffic
# (Documentation/performance.rst, "What bounds the targets not met"): the
# pair of bench VMs runs one iperf3 TCP stream, then rxe's and rxud's 64 KB
# ib_write_bw and ib_send_bw (10 s each) and ib_send_lat, and udp-lat,
# while qemu/host-threads.py samples the QEMU threads on the host.
#
#   qemu/host-threads.sh [OUTDIR]
#
# It runs the build of the last `make bench` ($RXUD_CACHE/bench-src: the
# module, the provider, udp-lat), so run that first. The report is
# OUTDIR/host-threads.txt.
set -u
export RXUD_FLAVOUR=bench
. "$(dirname "$0")/lib.sh"

if [ -n "${RXUD_VM:-}" ]; then
	# In each guest, from the bench build's copy of this script.
	src=$(cd "$(dirname "$0")/.." && pwd)
	BENCH_GUEST_LIB=1 . "$src/qemu/bench-guest.sh"
	ping -c 1 -W 1 "$RXUD_PEER_IP" >/dev/null || wait_for 60 ping -c 1 -W 1 "$RXUD_PEER_IP" >/dev/null
	rxud_deps
	phase() { if [ "$RXUD_VM" = 1 ]; then echo "$1" >"$RXUD_OUT/phase"; fi; step "phase-$1"; }
	tcp10() { if [ $# -eq 0 ]; then timeout 60 iperf3 -s -1 -p 18515; else timeout 60 iperf3 -J -t 10 -p 18515 -c "$1"; fi; }
	phase tcp
	run_both tcp tcp10
	phase udp-lat
	run_both udp-lat timeout 120 "$src/tests/verbs/udp-lat" -s 2 -n 1000
	for prov in rxe rxud; do
		up "$prov" 1
		for run in "ib_write_bw 65536 D10" "ib_send_bw 65536 D10" "ib_send_lat 2 1000"; do
			perf_args "$run"
			phase "$prov-$t"
			run_both "$prov-$t" timeout 150 "$t" "${args[@]}"
		done
		phase "$prov-down"
		down "$prov" 1
	done
	phase end
	exit 0
fi

src=$RXUD_CACHE/bench-src
[ -f "$src/rxud.ko" ] && [ -x "$src/tests/verbs/udp-lat" ] ||
	die "no bench build in $src: run make bench first"
cp "$0" "$src/qemu/host-threads.sh" || die "cannot copy $0 into $src"
out=${1:-$RXUD_TOP/tests/out/host-threads-$(date +%Y%m%d-%H%M%S)}
mkdir -p "$out/vm1"
out=$(cd "$out" && pwd)
python3 "$RXUD_TOP/qemu/host-threads.py" "$out/vm1/phase" >"$out/host-threads.txt" &
sampler=$!
"$src/qemu/vm.sh" --pair --timeout 900 --out "$out" -- "$src/qemu/host-threads.sh" >"$out/vms.log" 2>&1 ||
	{ echo end >"$out/vm1/phase"; wait "$sampler"; die "the VMs failed (log: $out/vms.log)"; }
echo end >"$out/vm1/phase"
wait "$sampler"
cat "$out/host-threads.txt"
