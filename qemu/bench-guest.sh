#!/usr/bin/env bash
# Runs in each VM of `make bench` (qemu/bench.sh): iperf3 TCP over the VMs'
# virtio-net link (the link's limit), then for rxe and then rxud on that
# link the kernel memory of RC QPs and the same perftest runs, vm0 serving
# and vm1 connecting. vm1 writes one line per figure to $RXUD_OUT/bench.tsv:
#   PROVIDER TEST SIZE VALUE UNIT
# (PROVIDER "tcp" for iperf3; UNIT MB/s for bandwidth (2^20 bytes, as
# perftest counts), op/s for atomics, the typical latency in us, bytes per
# QP for memory).
set -u
top=$(cd "$(dirname "$0")/.." && pwd)
. "$top/tests/lib/tap.sh"
. "$top/tests/lib/rxud.sh"
. "$top/tests/lib/traffic.sh"
peer_out=${RXUD_OUT%/vm*}/vm$((1 - RXUD_VM))

# step NAME: both VMs reach NAME before either goes on.
step() { barrier "$1" 300 || { echo "peer never reached $1"; exit 1; }; }

# Each entry: TEST SIZE ITERATIONS [EXTRA PERFTEST FLAGS] [| NETEM ARGS].
# With NETEM ARGS, vm1's side of the link (what the client sends: the data
# of a WRITE) goes through netem for that run. Iterations are sized for a
# few seconds each under TCG (rxe moves about 5 to 10 MB/s there).
RUNS=(
	"ib_send_bw 4096 2000"
	"ib_send_bw 65536 200"
	"ib_send_bw 1048576 15"
	"ib_write_bw 4096 2000"
	"ib_write_bw 65536 200"
	"ib_write_bw 1048576 15"
	"ib_read_bw 4096 2000"
	"ib_read_bw 65536 200"
	"ib_read_bw 1048576 15"
	"ib_write_bw 65536 200 -c UC"
	"ib_send_bw 1024 2000 -c UD"
	"ib_atomic_bw 8 2000"
	"ib_send_lat 2 300"
	"ib_write_lat 2 300"
	"ib_read_lat 2 300"
	"ib_write_bw 1048576 10 | loss 1%"
)
# RC QPs created at once for the memory figure, and their work requests.
QPS=100 QP_WRS=32

# result FILE TEST: the figure perftest's result line gives (bandwidth
# average, the message rate of atomics, typical latency).
result() {
	case $2 in
	ib_atomic_bw) awk '$1 ~ /^[0-9]+$/ && NF >= 5 { v = sprintf("%.0f", $5 * 1000000) } END { print v }' "$1" ;;
	*_bw) awk '$1 ~ /^[0-9]+$/ && NF >= 5 { v = $4 } END { print v }' "$1" ;;
	*_lat) awk '$1 ~ /^[0-9]+$/ && NF >= 7 { v = $5 } END { print v }' "$1" ;;
	esac
}

# record PROVIDER TEST SIZE VALUE UNIT: one line of the results.
record() { printf '%s\t%s\t%s\t%s\t%s\n' "$1" "$2" "$3" "${4:--}" "$5" >>"$RXUD_OUT/bench.tsv"; }

# run_both NAME CMD...: CMD as the server in vm0 and, once it listens (on
# TCP 18515, perftest's port), as the client in vm1 with the peer's
# address appended; output in $RXUD_OUT/NAME.server or NAME.client.
run_both() {
	local name=$1 srv
	shift
	if [ "$RXUD_VM" = 0 ]; then
		"$@" >"$RXUD_OUT/$name.server" 2>&1 &
		srv=$!
		wait_for 30 serving "$srv" -
		touch "$RXUD_OUT/serving-$name"
		wait $srv
	else
		wait_for 60 test -e "$peer_out/serving-$name"
		"$@" "$RXUD_PEER_IP" >"$RXUD_OUT/$name.client" 2>&1
	fi
	step "done-$name"
}

# tcp [PEER]: iperf3's server for one test, or with PEER its client (5 s,
# JSON), on perftest's port so that run_both sees it listen.
tcp() {
	if [ $# -eq 0 ]; then
		timeout 60 iperf3 -s -1 -p 18515
	else
		timeout 60 iperf3 -J -t 5 -p 18515 -c "$1"
	fi
}

# kmem: the kernel's unreclaimable slab (kmalloc, large kmallocs included)
# and vmalloc usage, in kB. Reclaimable slab (dentries, inodes) is left
# out: it moves with file system activity, and no QP lives there.
kmem() { awk '/^SUnreclaim:/ { s = $2 } /^VmallocUsed:/ { v = $2 } END { print s, v }' /proc/meminfo; }

# qp_mem DEV GIDINDEX: "SLAB VMALLOC" bytes per RC QP of DEV, from the
# growth of kmem while tests/verbs/qp-mem creates $QPS of them (and moves
# them to RTS) with its PD and CQ already made.
qp_mem() {
	local line s0 v0 s1 v1
	coproc QPM { "$top/tests/verbs/qp-mem" -d "$1" -g "$2" -n "$QPS" -w "$QP_WRS" 2>&1; }
	read -r -t 60 line <&"${QPM[0]}" && [ "$line" = ready ] || { echo "qp-mem: ${line:-no answer}" >&2; return 1; }
	read -r s0 v0 < <(kmem)
	echo go >&"${QPM[1]}"
	read -r -t 300 line <&"${QPM[0]}" && [ "$line" = "created $QPS" ] || { echo "qp-mem: ${line:-no answer}" >&2; return 1; }
	read -r s1 v1 < <(kmem)
	echo go >&"${QPM[1]}"
	wait "$QPM_PID" || return 1
	echo $(((s1 - s0) * 1024 / QPS)) $(((v1 - v0) * 1024 / QPS))
}

# For the document: what ran.
uname -r >"$RXUD_OUT/uname"
echo "$QPS $QP_WRS" >"$RXUD_OUT/qp-mem.conf"
ping -c 1 -W 1 "$RXUD_PEER_IP" >/dev/null || wait_for 60 ping -c 1 -W 1 "$RXUD_PEER_IP" >/dev/null
rxud_deps

step up-tcp
run_both tcp tcp
if [ "$RXUD_VM" = 1 ]; then
	v=$(jq '.end.sum_received.bits_per_second / 8 / 1048576 * 100 | round / 100' "$RXUD_OUT/tcp.client" 2>/dev/null)
	record tcp "iperf3 TCP" - "$v" MB/s
fi

for prov in rxe rxud; do
	dev=${prov}0
	case $prov in
	rxe) modprobe rdma_rxe ;;
	rxud) insmod "$RXUD_KO" ;;
	esac
	rdma link add "$dev" type "$prov" netdev "$RXUD_IF"
	wait_for 10 v2_gid_index "$dev" >/dev/null
	gid=$(v2_gid_index "$dev")
	[ "$prov" = rxud ] && export RDMAV_DRIVERS=$top/rdma-core-provider/build/librxud
	step "up-$prov"
	if [ "$RXUD_VM" = 1 ]; then
		read -r slab vmal < <(qp_mem "$dev" "$gid" 2>>"$RXUD_OUT/$prov-qp-mem.err") || slab=
		what="kernel memory per RC QP"
		record "$prov" "$what, slab" "$QP_WRS/$QP_WRS WRs" "$slab" B
		record "$prov" "$what, vmalloc" "$QP_WRS/$QP_WRS WRs" "${slab:+$vmal}" B
		record "$prov" "$what, total" "$QP_WRS/$QP_WRS WRs" "${slab:+$((slab + vmal))}" B
	fi
	step "mem-$prov"
	n=0
	for run in "${RUNS[@]}"; do
		n=$((n + 1))
		netem=
		[[ "$run" = *"|"* ]] && netem=${run#*| } run=${run%% |*}
		read -r t size iters extra <<<"$run"
		# shellcheck disable=SC2086
		args=(-d "$dev" -x "$gid" -n "$iters" $extra)
		[ "$t" = ib_atomic_bw ] || args+=(-s "$size")
		# shellcheck disable=SC2086
		[ -n "$netem" ] && [ "$RXUD_VM" = 1 ] && tc qdisc add dev "$RXUD_IF" root netem $netem
		run_both "$prov-$n" timeout 150 "$t" "${args[@]}"
		# The device's counters after each run, on both ends (cumulative:
		# a run's share is the difference with the run before), for
		# whoever looks into what limits a figure.
		rdma statistic show link "$dev/1" >"$RXUD_OUT/$prov-$n.stats" 2>&1
		if [ "$RXUD_VM" = 1 ]; then
			if [ -n "$netem" ]; then
				tc -s qdisc show dev "$RXUD_IF" >>"$RXUD_OUT/$prov-$n.client"
				tc qdisc del dev "$RXUD_IF" root
			fi
			case $t in
			*_lat) unit=us ;;
			ib_atomic_bw) unit=op/s ;;
			*) unit=MB/s ;;
			esac
			v=$(result "$RXUD_OUT/$prov-$n.client" "$t")
			record "$prov" "$t${extra:+ $extra}${netem:+, netem $netem}" "$size" "$v" "$unit"
			# A run without a figure: what the device counted, and
			# what the kernel said, for whoever looks into it.
			[ -n "$v" ] || { rdma statistic show link "$dev/1"; dmesg | tail -n 20; } >>"$RXUD_OUT/$prov-$n.client" 2>&1
		fi
	done
	rdma link delete "$dev"
	case $prov in
	rxe) rmmod rdma_rxe ;;
	rxud) rmmod rxud ;;
	esac
	step "down-$prov"
done
echo "== vm$RXUD_VM: done"
