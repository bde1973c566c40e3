#!/usr/bin/env bash
# Runs in each VM of `make bench` (qemu/bench.sh): the same perftest runs
# over rxe and then over rxud on the VMs' virtio-net link, vm0 serving and
# vm1 connecting. vm1 writes one line per run to $RXUD_OUT/bench.tsv:
#   PROVIDER TEST SIZE VALUE UNIT
# (MB/s for bandwidth, the typical latency in us for latency runs).
set -u
top=$(cd "$(dirname "$0")/.." && pwd)
. "$top/tests/lib/tap.sh"
. "$top/tests/lib/rxud.sh"
peer_out=${RXUD_OUT%/vm*}/vm$((1 - RXUD_VM))

# step NAME: both VMs reach NAME before either goes on.
step() { barrier "$1" 180 || { echo "peer never reached $1"; exit 1; }; }

# Each entry: TEST SIZE ITERATIONS [EXTRA PERFTEST FLAGS].
RUNS=(
	"ib_write_bw 65536 300"
	"ib_send_bw 65536 300"
	"ib_read_bw 65536 200"
	"ib_write_bw 1048576 20"
	"ib_write_bw 65536 300 -c UC"
	"ib_send_bw 1024 1000 -c UD"
	"ib_write_lat 2 300"
	"ib_send_lat 2 300"
	"ib_read_lat 2 300"
)

# result FILE TEST: the figure perftest's result line gives.
result() {
	case $2 in
	*_bw) awk '$1 ~ /^[0-9]+$/ && NF >= 5 { v = $4 } END { print v }' "$1" ;;
	*_lat) awk '$1 ~ /^[0-9]+$/ && NF >= 7 { v = $5 } END { print v }' "$1" ;;
	esac
}

ping -c 1 -W 1 "$RXUD_PEER_IP" >/dev/null || wait_for 60 ping -c 1 -W 1 "$RXUD_PEER_IP" >/dev/null
rxud_deps
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
	n=0
	for run in "${RUNS[@]}"; do
		n=$((n + 1))
		read -r t size iters extra <<<"$run"
		# shellcheck disable=SC2086
		args=(-d "$dev" -x "$gid" -s "$size" -n "$iters" $extra)
		if [ "$RXUD_VM" = 0 ]; then
			timeout 120 "$t" "${args[@]}" >"$RXUD_OUT/$prov-$n.server" 2>&1 &
			srv=$!
			sleep 1
			touch "$RXUD_OUT/serving-$prov-$n"
			wait $srv
		else
			wait_for 60 test -e "$peer_out/serving-$prov-$n"
			sleep 1
			timeout 120 "$t" "${args[@]}" "$RXUD_PEER_IP" >"$RXUD_OUT/$prov-$n.client" 2>&1
			v=$(result "$RXUD_OUT/$prov-$n.client" "$t")
			unit=MB/s
			[ "${t%_lat}" != "$t" ] && unit=us
			printf '%s\t%s\t%s\t%s\t%s\n' "$prov" "$t${extra:+ $extra}" "$size" "${v:--}" "$unit" >>"$RXUD_OUT/bench.tsv"
		fi
		step "done-$prov-$n"
	done
	rdma link delete "$dev"
	case $prov in
	rxe) rmmod rdma_rxe ;;
	rxud) rmmod rxud ;;
	esac
	step "down-$prov"
done
echo "== vm$RXUD_VM: done"
