#!/usr/bin/env bash
# Runs in each VM of `make bench` (qemu/bench.sh): iperf3 TCP over the VMs'
# virtio-net link (the link's limit), then for rxe and then rxud on that
# link the kernel memory of RC QPs and the same perftest runs, in rounds,
# vm0 serving and vm1 connecting; last, the system calls per work request of
# a few runs. vm1 writes one line per figure to $RXUD_OUT/bench.tsv:
#   PROVIDER TEST SIZE VALUE UNIT ROUND
# (PROVIDER "tcp" for iperf3; UNIT MB/s for bandwidth (2^20 bytes, as
# perftest counts), op/s for atomics, the typical latency in us, bytes per
# QP for memory, calls/WR for system calls).
set -u
top=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
. "$top/tests/lib/tap.sh"
. "$top/tests/lib/rxud.sh"
. "$top/tests/lib/traffic.sh"
peer_out=${RXUD_OUT%/vm*}/vm$((1 - RXUD_VM))

# step NAME: both VMs reach NAME before either goes on.
step() { barrier "$1" 300 || { echo "peer never reached $1"; exit 1; }; }

# Each entry: TEST SIZE ITERATIONS [EXTRA PERFTEST FLAGS] [| NETEM ARGS].
# With NETEM ARGS, vm1's side of the link (what the client sends: the data
# of a WRITE) goes through netem for that run. ITERATIONS "DN" for a run
# of N seconds: bandwidth runs last 6 s, of which perftest measures the
# middle 4 s (-f 1: a second's margin at each end), so that a figure is a steady
# state of some thousands of packets, not a start-up of a second or less
# (a count of iterations sized for rxe under TCG ran 1 MB rows for about a
# second and atomics for a third of one). Latency runs count iterations.
# UD's figure is the receiver's: a sender's rate counts the datagrams lost
# on the way (rxud's UD sender outruns the link). "-e": both ends wait for
# completions on their completion channel instead of polling their CQ, so
# a vCPU halts when it has nothing to do (perftest takes -e for SEND only,
# and not with -D: those rows count iterations, some 6 s of rxe's).
# Documentation/performance.rst, "The host's two CPUs", says why they are
# here.
BW=D6
RUNS=(
	"ib_send_bw 4096 $BW"
	"ib_send_bw 65536 $BW"
	"ib_send_bw 1048576 $BW"
	"ib_write_bw 4096 $BW"
	"ib_write_bw 65536 $BW"
	"ib_write_bw 1048576 $BW"
	"ib_read_bw 4096 $BW"
	"ib_read_bw 65536 $BW"
	"ib_read_bw 1048576 $BW"
	"ib_write_bw 65536 $BW -c UC"
	"ib_send_bw 1024 $BW -c UD"
	"ib_atomic_bw 8 $BW"
	"ib_send_lat 2 300"
	"ib_write_lat 2 300"
	"ib_read_lat 2 300"
	"ib_write_bw 1048576 $BW | loss 1%"
	"ib_write_bw 1048576 $BW | loss 5%"
	"ib_send_bw 65536 1000 -e"
	"ib_send_bw 1048576 70 -e"
)
# Runs of the client under strace, for the system calls it makes per work
# request (one WR per ibv_post_send, as perftest posts).
SYSCALL_RUNS=(
	"ib_write_bw 4096 2000"
	"ib_send_bw 4096 2000"
	"ib_write_bw 4096 2000 -c UC"
)
# XUD's runs (rxud only, in each rxud round): tests/verbs/rxud-perf, one
# XUD QP in vm1 to one in vm0, each recorded under the RC row of the same
# operation and size so that the table sets them side by side. Each entry:
# OP SIZE ITERATIONS [EXTRA CLIENT FLAGS] [| NETEM ARGS] (rxud-perf counts
# iterations: sized for about 5 s at 8 MB/s; its latency at 4 B, the
# smallest message it sends, as each carries its number). "loss 0%" is the
# lossy rows' path (netem on, GSO off) losing nothing: their lossless
# reference. The lossy rows and their reference run about 6 s (4 s at 5%):
# at 40 messages (2.5 s) the reference alone moved by 9% between rounds.
XUD_RUNS=(
	"send 65536 600"
	"send 1048576 40"
	"write 65536 600"
	"write 1048576 40"
	"lat 4 300"
	"write 1048576 100 | loss 0%"
	"write 1048576 100 | loss 1%"
	"write 1048576 50 | loss 5%"
	"send 65536 600 -a 1"
)
# NVMe over Fabrics (issue 28, item 9): fio on vm1 against a namespace
# of vm0's nvmet target, over nvme-rdma on each round's device and, in
# rxe's rounds, over nvme-tcp on the same link (what a user without RDMA
# picks). The namespace is null_blk (no data kept: the transport is what
# is measured, not a backing store). Each entry: RW BLOCK-SIZE QUEUE-DEPTH,
# a time-based run of NVME_SECONDS after a second's ramp; its figure IO/s
# for random IO, MB/s (2^20) for sequential.
NVME_RUNS=(
	"randread 4096 32"
	"read 131072 32"
)
NVME_SECONDS=6
NVME_NQN=nqn.2026-11.dev.rxud:bench
# Peer counts for XUD's kernel memory per peer (forged sources).
XUD_PEERS=(1 100 1000 10000)
XUD_REAL_PEERS=(100 1000)
# Issue 10's steps: STEP_RUNS over rxud with its batching switched on one
# step at a time, in one boot (module parameters trains and gro, both
# VMs): the data path as it landed (neither), +GSO (trains on transmit),
# +GRO (and GRO trains on receive). ACK coalescing and the CQ ring's one
# publish per batch are part of the data path as it landed: no switch.
# Each entry: LABEL TRAINS GRO. STEP_ROUNDS rounds, the steps in reverse
# order in even ones.
STEP_RUNS=(
	"ib_write_bw 65536 $BW"
	"ib_send_bw 65536 $BW"
	"ib_write_bw 1048576 $BW"
	"ib_read_bw 65536 $BW"
)
STEPS=("landed N N" "+GSO Y N" "+GRO Y Y")
STEP_ROUNDS=2
# After each step's rows in the first round, this run once more with the
# module parameter timing on, for the per-packet budget: nanoseconds per
# packet in rxud's receive path and its ICRC check (vm0, which takes the
# data) and in building packets and handing them to IP (vm1, which sends
# it), from the hw_counters.
BUDGET_RUN="ib_write_bw 65536 $BW"
# Rounds of RUNS for each provider: the table gives each figure's median.
ROUNDS=3
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

# record PROVIDER TEST SIZE VALUE UNIT [ROUND]: one line of the results.
record() { printf '%s\t%s\t%s\t%s\t%s\t%s\n' "$1" "$2" "$3" "${4:--}" "$5" "${6:-1}" >>"$RXUD_OUT/bench.tsv"; }

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

# lossy_link on NETEM_ARGS... | lossy_link off: netem on this VM's side of
# the link, standing for a link that loses packets. GSO goes off on the
# device meanwhile: rxud would hand IP its packets in trains (design.rst,
# "The per-packet path"), which netem, sitting above the device, would
# drop, duplicate or delay whole; rxe sends no trains either way.
lossy_link() {
	if [ "$1" = on ]; then
		shift
		ethtool -K "$RXUD_IF" gso off
		tc qdisc add dev "$RXUD_IF" root netem "$@"
	else
		tc qdisc del dev "$RXUD_IF" root
		ethtool -K "$RXUD_IF" gso on
	fi
}

# xud_result FILE: rxud-perf's figure (bandwidth average; latency: typical).
xud_result() {
	awk '$1 ~ /^[0-9]+$/ && NF == 5 { v = $4 } $1 ~ /^[0-9]+$/ && NF == 6 { v = $5 } END { print v }' "$1"
}

# xud_rc_key OP SIZE EXTRA NETEM: the RC row an XUD run stands beside
# (RUNS' test names), or a row of its own.
xud_rc_key() {
	local t
	case $1 in
	send) t=ib_send_bw ;;
	write) t=ib_write_bw ;;
	lat) t=ib_send_lat ;;
	esac
	[ -n "$3" ] && t="rxud-perf -o $1 $3"
	echo "$t${4:+, netem $4}"
}

# xud_runs ROUND: every entry of XUD_RUNS over rxud's device.
xud_runs() {
	local round=$1 n=0 run op size iters extra netem name v args
	for run in "${XUD_RUNS[@]}"; do
		n=$((n + 1))
		netem=
		[[ "$run" = *"|"* ]] && netem=${run#*| } run=${run%% |*}
		read -r op size iters extra <<<"$run"
		name=xud-$round-$n
		if [ "$RXUD_VM" = 0 ]; then
			# -S: the server spot-checks each SEND (its number and
			# ends) as perftest, beside it, checks nothing; a full
			# check costs a TCG guest milliseconds per 64 KB.
			args=(-q 1 -S)
		elif [ "$op" = lat ]; then
			# shellcheck disable=SC2206
			args=(-t lat -s "$size" -n "$iters" $extra)
		else
			# shellcheck disable=SC2206
			args=(-t bw -o "$op" -s "$size" -n "$iters" $extra)
		fi
		# shellcheck disable=SC2086
		[ -n "$netem" ] && [ "$RXUD_VM" = 1 ] && lossy_link on $netem
		run_both "$name" timeout 150 "$top/tests/verbs/rxud-perf" -d "$dev" -x "$gid" "${args[@]}"
		rdma statistic show link "$dev/1" >"$RXUD_OUT/$name.stats" 2>&1
		if [ "$RXUD_VM" = 1 ]; then
			[ -n "$netem" ] && lossy_link off
			v=$(xud_result "$RXUD_OUT/$name.client")
			record xud "$(xud_rc_key "$op" "$size" "$extra" "$netem")" "$size" "$v" \
				"$([ "$op" = lat ] && echo us || echo MB/s)" "$round"
		fi
	done
}

# kobj: bytes of slab objects in use (active objects times object size,
# over /proc/slabinfo) and of vmalloc: object-exact where kmem moves by
# whole slab pages only when an object needs a new one (a few hundred
# peers fit in the slabs an earlier step's frees left partly empty).
# Every cache is shrunk first: SLUB counts the free objects of per-CPU
# slabs as active in /proc/slabinfo, so objects freed just before (the
# streams that parked) would otherwise still read as in use.
kobj() {
	local f
	for f in /sys/kernel/slab/*/shrink; do echo 1 >"$f" 2>/dev/null; done
	kobj_read
}

# kobj_read: kobj's reading alone (no shrinking first).
kobj_read() {
	awk 'NR > 2 { s += $2 * $4 } END { printf "%.0f ", s }' /proc/slabinfo
	awk '/^VmallocUsed:/ { print $2 * 1024 }' /proc/meminfo
}

# kmalloc_shrink: kobj's shrinking, of the kmalloc caches only (where XUD's
# peers and streams live): a fraction of a second where shrinking every
# cache takes about one in a TCG guest, so that few streams park between
# the shrinking and the reading (see xud_mem).
kmalloc_shrink() {
	local f
	for f in /sys/kernel/slab/kmalloc-*/shrink; do echo 1 >"$f" 2>/dev/null; done
}

# xud_mem: kernel memory per XUD peer. vm1 makes an XUD QP
# (tests/verbs/xud-sink, max_peers 16384), vm0 sends it one RDMA WRITE
# from each of N source QPNs (tests/xud-forge --handshake: each source
# takes its stream cookie from vm1's challenge first, or vm1 keeps no
# peer of it, xud.rst "Stream cookies"; paced so that vm1 keeps up:
# 400 us apart, 100 us for more than 1000 peers, so that the step ends
# within the quiet period; what the link drops makes fewer peers, and the
# figures divide by the peers made, xud_peers_added). The slab objects grow by the peers'
# entries and, while in use, by their streams; at rest (1 s, then the next
# reclaim scan, within 3.5 s) the streams park and only the entries stay.
# Read right after the peers are made (streams parked by then are
# counted) and once all have parked, all within XUD's 10 s quiet period
# (after which they would be reclaimed): "idle" is the second growth over
# the peers made, "in use" adds what each stream not yet parked held at
# the first reading. Peers take nothing from vmalloc: its growth over the
# whole step is recorded as it is (other kernel activity moves it by
# pages). For each N of XUD_PEERS.
xud_mem() {
	local n k=0 line qpn rkey va qkey s0 v0 s1 v1 s2 v2 a0 p0 p1a p1 r0 r2 added inuse idle stream
	hw() { cat "/sys/class/infiniband/$dev/ports/1/hw_counters/$1"; }
	grown() { [ $(($(hw "$1") - $2)) -ge "$3" ]; }
	for n in "${XUD_PEERS[@]}"; do
		k=$((k + 1))
		if [ "$RXUD_VM" = 1 ]; then
			coproc SINK { "$top/tests/verbs/xud-sink" -d "$dev" -p 16384 2>&1; }
			read -r -t 60 line <&"${SINK[0]}"
			echo "$line" >"$RXUD_OUT/sink-$n"
			# Let what the last step freed (RCU) settle first.
			sleep 3
			read -r s0 v0 < <(kobj)
			a0=$(hw xud_peers_added) p0=$(hw xud_streams_parked) r0=$(hw xud_peers_reclaimed)
		fi
		step "xudmem-$n-sink"
		if [ "$RXUD_VM" = 0 ]; then
			read -r _ qpn _ rkey _ va _ qkey <"$peer_out/sink-$n"
			# The forger reads the challenges through a raw socket
			# (rxud holds UDP 4791 here), which GRO would hand one
			# train of them as one datagram: 3 of 100 came so.
			ethtool -K "$RXUD_IF" gro off
			timeout 120 "$top/tests/xud-forge/target/release/xud-forge" --src "$RXUD_SELF_IP" \
				--dst "$RXUD_PEER_IP" --qpn "$qpn" --qkey "$qkey" --rkey "$rkey" --va "$va" \
				--len 64 --peers "$n" --first-src-qpn $((k << 16)) --gap-us $((n > 1000 ? 100 : 400)) \
				--handshake >"$RXUD_OUT/forge-$n" 2>&1
			ethtool -K "$RXUD_IF" gro on
		fi
		step "xudmem-$n-forged"
		if [ "$RXUD_VM" = 1 ]; then
			wait_for 2 grown xud_peers_added "$a0" "$n"
			# Streams go on parking meanwhile (1 s at rest): the
			# kmalloc caches only are shrunk, and the streams parked
			# by the end of the reading count as parked (the figure
			# per stream errs high, if anything); the log has the
			# count before the reading too.
			kmalloc_shrink
			p1a=$(hw xud_streams_parked)
			read -r s1 v1 < <(kobj_read)
			p1=$(hw xud_streams_parked)
			added=$(($(hw xud_peers_added) - a0))
			wait_for 5 grown xud_streams_parked "$p0" "$added"
			read -r s2 v2 < <(kobj)
			r2=$(hw xud_peers_reclaimed)
			inuse=$((added - (p1 - p0)))
			echo "peers $n: made $added, $inuse not yet parked at the first reading ($((added - (p1a - p0))) as it began), $(($(hw xud_streams_parked) - p0)) parked, $((r2 - r0)) reclaimed meanwhile; slab objects and vmalloc (bytes) $s0 $v0 -> $s1 $v1 -> $s2 $v2" \
				>>"$RXUD_OUT/xud-mem.log"
			# A peer reclaimed before the last reading (the step took
			# longer than the quiet period) spoils the figure, and so does
			# no growth at all (a few objects can come from a slab that
			# /proc/slabinfo counted whole already): none then.
			# One peer's few hundred bytes are below what whole slabs
			# move by here (a run of b819a57 read 10 KB): no figure for
			# fewer than 100.
			if [ "$added" -ge 100 ] && [ "$r2" = "$r0" ] && [ "$s2" -gt "$s0" ]; then
				idle=$(((s2 - s0) / added))
				record xud "kernel memory per XUD peer, idle (slab)" "$n" "$idle" B
				if [ "$inuse" -gt 0 ]; then
					stream=$(((s1 - s2) / inuse))
					record xud "kernel memory per XUD peer, in use (slab)" "$n" $((idle + stream)) B
				fi
				record xud "vmalloc growth over the step (all peers)" "$n" $((v2 - v0)) B
			elif [ "$n" -ge 100 ]; then
				# Shown as "-", not left out: xud-mem.log says why.
				record xud "kernel memory per XUD peer, idle (slab)" "$n" "" B
			fi
			eval "exec ${SINK[1]}>&-"
			wait "$SINK_PID"
		fi
		step "xudmem-$n-done"
	done
}

# xud_real_peers: the XUD paper's Table 4 with real peers. vm0 makes N
# XUD QPs (rxud-perf's server, -q N); vm1's one QP sends one 64 B SEND to
# each and each answers with one (rxud-perf -t mem), so vm1's QP holds a
# sending and a receiving state per peer, as each of the paper's
# connections does. vm1's slab objects are read before the exchange
# (QP, CQ, AH, receives posted: all made), right after it (every
# direction in use but those parked already, counted), and once every
# stream has parked (1 s idle, then the next reclaim scan). For each N of
# XUD_REAL_PEERS.
xud_real_peers() {
	local n line s0 s1 s2 p0 p1 p2 a0 srv added pid
	hw() { cat "/sys/class/infiniband/$dev/ports/1/hw_counters/$1"; }
	grown() { [ $(($(hw "$1") - $2)) -ge "$3" ]; }
	for n in "${XUD_REAL_PEERS[@]}"; do
		if [ "$RXUD_VM" = 0 ]; then
			timeout 300 "$top/tests/verbs/rxud-perf" -d "$dev" -x "$gid" -q "$n" -s 64 \
				>"$RXUD_OUT/real-peers-$n.server" 2>&1 &
			srv=$!
			wait_for 30 serving "$srv" -
			touch "$RXUD_OUT/serving-real-peers-$n"
			wait $srv
		else
			wait_for 60 test -e "$peer_out/serving-real-peers-$n"
			coproc MEM { timeout 300 "$top/tests/verbs/rxud-perf" -d "$dev" -x "$gid" -t mem \
				-s 64 "$RXUD_PEER_IP" 2>&1; }
			# bash forgets MEM_PID once the coprocess has exited.
			pid=$MEM_PID
			while read -r -t 200 line <&"${MEM[0]}" && [ "$line" != ready ]; do
				echo "$line" >>"$RXUD_OUT/real-peers-$n.client"
			done
			sleep 3
			read -r s0 _ < <(kobj)
			p0=$(hw xud_streams_parked) a0=$(hw xud_peers_added)
			echo go >&"${MEM[1]}"
			read -r -t 200 line <&"${MEM[0]}"
			echo "$line" >>"$RXUD_OUT/real-peers-$n.client"
			read -r s1 _ < <(kobj)
			p1=$(hw xud_streams_parked)
			added=$(($(hw xud_peers_added) - a0))
			wait_for 10 grown xud_streams_parked "$p0" $((2 * n))
			read -r s2 _ < <(kobj)
			p2=$(hw xud_streams_parked)
			echo "real peers $n: $line; peers added $added; streams parked $((p1 - p0)) at the second reading, $((p2 - p0)) at the third; slab objects (bytes) $s0 -> $s1 -> $s2" \
				>>"$RXUD_OUT/xud-mem.log"
			echo go >&"${MEM[1]}"
			cat <&"${MEM[0]}" >>"$RXUD_OUT/real-peers-$n.client"
			wait "$pid"
			# No growth (a few objects can come from slabs counted whole
			# already): no figure.
			if [[ $line == "exchanged $n "* ]] && [ "$added" = "$n" ] && [ "$s1" -gt "$s0" ]; then
				record xud "real peers, send+recv, in use (slab)" "$n" $(((s1 - s0) / n)) B
				[ $((p2 - p0)) -ge $((2 * n)) ] && [ "$s2" -gt "$s0" ] &&
					record xud "real peers, send+recv, at rest (slab)" "$n" $(((s2 - s0) / n)) B
			fi
		fi
		step "real-peers-$n-done"
	done
}

# prepare: what each bench run in a guest does first: notes the kernel
# for the document, waits for the link, checks the tools, and measures one
# iperf3 TCP stream over the link (recorded as provider tcp).
prepare() {
	uname -r >"$RXUD_OUT/uname"
	ping -c 1 -W 1 "$RXUD_PEER_IP" >/dev/null || wait_for 60 ping -c 1 -W 1 "$RXUD_PEER_IP" >/dev/null
	rxud_deps
	step up-tcp
	run_both tcp tcp
	if [ "$RXUD_VM" = 1 ]; then
		v=$(jq '.end.sum_received.bits_per_second / 8 / 1048576 * 100 | round / 100' "$RXUD_OUT/tcp.client" 2>/dev/null)
		record tcp "iperf3 TCP" - "$v" MB/s
	fi
}

# up PROV: loads PROV's module and makes its device on the link; both VMs
# wait for each other. Sets dev and gid.
up() {
	dev=$1"0"
	case $1 in
	rxe) modprobe rdma_rxe ;;
	rxud) insmod "$RXUD_KO" ;;
	esac
	rdma link add "$dev" type "$1" netdev "$RXUD_IF"
	wait_for 10 v2_gid_index "$dev" >/dev/null
	gid=$(v2_gid_index "$dev")
	if [ "$1" = rxud ]; then
		export RDMAV_DRIVERS=$top/rdma-core-provider/build/librxud
	else
		unset RDMAV_DRIVERS
	fi
	step "up-$1-$2"
}

# down PROV TAG: the device and the module go.
down() {
	rdma link delete "$dev"
	case $1 in
	rxe) rmmod rdma_rxe ;;
	rxud) rmmod rxud ;;
	esac
	step "down-$1-$2"
}

# perf_args RUN: perftest's arguments for one entry of RUNS (sets t, size,
# iters, extra, netem, args).
perf_args() {
	local run=$1
	netem=
	[[ "$run" = *"|"* ]] && netem=${run#*| } run=${run%% |*}
	read -r t size iters extra <<<"$run"
	args=(-d "$dev" -x "$gid")
	case $iters in
	D*) args+=(-D "${iters#D}" -f 1) ;;
	*) args+=(-n "$iters") ;;
	esac
	# shellcheck disable=SC2086
	args+=($extra)
	[ "$t" = ib_atomic_bw ] || args+=(-s "$size")
}

# again NAME: whether run NAME is run once more, as vm1 (the client) finds
# and tells vm0. perftest turns cycles into seconds with a CPU clock rate
# it measures when it reports, by fitting the TSC against gettimeofday over
# a busy loop (get_cpu_mhz); a fit worse than r^2 0.9 makes the client
# exit with "Can't produce a report" and no figure (the server, which
# gives UD's figure, likewise). In a TCG guest the fit
# fails when the guest is busy meanwhile, as after a 1 MB ib_read_bw, whose
# 128 outstanding READs go on arriving when the timed part ends. Such a
# run, and only such a run, is run once more (its log is kept).
again() {
	local name=$1 verdict=no
	if [ "$RXUD_VM" = 1 ]; then
		case $name in
		*-again) ;;
		*) cat "$RXUD_OUT/$name.client" "$peer_out/$name.server" 2>/dev/null |
			grep -q "Can't produce a report" && verdict=yes ;;
		esac
		echo "$verdict" >"$RXUD_OUT/again-$name"
	fi
	step "again-$name"
	[ "$RXUD_VM" = 1 ] || verdict=$(cat "$peer_out/again-$name" 2>/dev/null)
	[ "$verdict" = yes ]
}

# udp_lat ROUND: the latency rows' reference, as iperf3 is the bandwidth
# rows': plain UDP sockets between the same two VMs, one 2-byte datagram
# each way at a time with both ends polling (tests/verbs/udp-lat, shaped
# as ib_send_lat: half the round trip, the median of 300), recorded as
# provider udp.
udp_lat() {
	run_both "udp-lat-$1" timeout 120 "$top/tests/verbs/udp-lat" -s 2 -n 300
	[ "$RXUD_VM" = 1 ] && record udp udp-lat 2 "$(result "$RXUD_OUT/udp-lat-$1.client" ib_send_lat)" us "$1"
}

# measure PROV ROUND: every entry of RUNS over PROV's device, one line of
# results each (and, in the first round, its kernel memory per QP); in each
# round, before rxe's runs, udp-lat's.
measure() {
	local prov=$1 round=$2 n=0 name v unit
	[ "$prov" = rxe ] && udp_lat "$round"
	up "$prov" "$round"
	if [ "$round" = 1 ]; then
		if [ "$RXUD_VM" = 1 ]; then
			read -r slab vmal < <(qp_mem "$dev" "$gid" 2>>"$RXUD_OUT/$prov-qp-mem.err") || slab=
			what="kernel memory per RC QP"
			record "$prov" "$what, slab" "$QP_WRS/$QP_WRS WRs" "$slab" B
			record "$prov" "$what, vmalloc" "$QP_WRS/$QP_WRS WRs" "${slab:+$vmal}" B
			record "$prov" "$what, total" "$QP_WRS/$QP_WRS WRs" "${slab:+$((slab + vmal))}" B
		fi
		step "mem-$prov"
		[ "$prov" = rxud ] && { xud_mem; xud_real_peers; }
	fi
	for run in "${RUNS[@]}"; do
		n=$((n + 1))
		perf_args "$run"
		for name in "$prov-$round-$n" "$prov-$round-$n-again"; do
			# shellcheck disable=SC2086
			[ -n "$netem" ] && [ "$RXUD_VM" = 1 ] && lossy_link on $netem
			run_both "$name" timeout 150 "$t" "${args[@]}"
			# The device's counters after each run, on both ends
			# (cumulative over the round: a run's share is the
			# difference with the run before), for whoever looks into
			# what limits a figure.
			rdma statistic show link "$dev/1" >"$RXUD_OUT/$name.stats" 2>&1
			if [ "$RXUD_VM" = 1 ] && [ -n "$netem" ]; then
				tc -s qdisc show dev "$RXUD_IF" >>"$RXUD_OUT/$name.client"
				lossy_link off
			fi
			again "$name" || break
		done
		if [ "$RXUD_VM" = 1 ]; then
			case $t in
			*_lat) unit=us ;;
			ib_atomic_bw) unit=op/s ;;
			*) unit=MB/s ;;
			esac
			case " $extra " in
			*" -c UD "*) v=$(result "$peer_out/$name.server" "$t") ;;
			*) v=$(result "$RXUD_OUT/$name.client" "$t") ;;
			esac
			record "$prov" "$t${extra:+ $extra}${netem:+, netem $netem}" "$size" "$v" "$unit" "$round"
			# A run without a figure: what the device counted, and
			# what the kernel said, for whoever looks into it.
			[ -n "$v" ] || { rdma statistic show link "$dev/1"; dmesg | tail -n 20; } >>"$RXUD_OUT/$name.client" 2>&1
		fi
	done
	[ "$prov" = rxud ] && xud_runs "$round"
	nvme_fio "$prov" rdma "$round"
	[ "$prov" = rxe ] && nvme_fio tcp tcp "$round"
	down "$prov" "$round"
}

# steps: STEP_RUNS at each of STEPS, recorded as provider "step", test
# "TEST|LABEL".
steps() {
	local round i label tr gr n run name v order
	up rxud steps
	for round in $(seq 1 "$STEP_ROUNDS"); do
		order=()
		for i in "${!STEPS[@]}"; do
			if [ $((round % 2)) = 1 ]; then order+=("${STEPS[i]}"); else order=("${STEPS[i]}" "${order[@]}"); fi
		done
		for i in "${order[@]}"; do
			read -r label tr gr <<<"$i"
			echo "$tr" >/sys/module/rxud/parameters/trains
			echo "$gr" >/sys/module/rxud/parameters/gro
			step "step-$round-$label"
			n=0
			for run in "${STEP_RUNS[@]}"; do
				n=$((n + 1))
				perf_args "$run"
				for name in "step-$round-$label-$n" "step-$round-$label-$n-again"; do
					run_both "$name" timeout 150 "$t" "${args[@]}"
					rdma statistic show link "$dev/1" >"$RXUD_OUT/$name.stats" 2>&1
					again "$name" || break
				done
				if [ "$RXUD_VM" = 1 ]; then
					v=$(result "$RXUD_OUT/$name.client" "$t")
					record step "$t|$label" "$size" "$v" MB/s "$round"
				fi
			done
			[ "$round" = 1 ] && budget "$label" "$name"
		done
	done
	echo Y >/sys/module/rxud/parameters/trains
	echo Y >/sys/module/rxud/parameters/gro
	down rxud steps
}

# hw_stat FILE COUNTER: COUNTER's value in a saved `rdma statistic` line.
hw_stat() { awk -v k="$2" '{ for (i = 1; i < NF; i++) if ($i == k) { print $(i + 1); exit } }' "$1"; }

# budget LABEL PREV: BUDGET_RUN with timing on, at step LABEL; PREV is the
# run before it (its counters are the starting point). Recorded as
# provider "budget", test "LABEL|WHAT", in ns per packet.
budget() {
	local label=$1 prev=$2 name=budget-$1 v per a b
	perf_args "$BUDGET_RUN"
	echo 1 >/sys/module/rxud/parameters/timing
	run_both "$name" timeout 150 "$t" "${args[@]}"
	echo 0 >/sys/module/rxud/parameters/timing
	rdma statistic show link "$dev/1" >"$RXUD_OUT/$name.stats" 2>&1
	step "budget-$label"
	[ "$RXUD_VM" = 1 ] || return 0
	v=$(result "$RXUD_OUT/$name.client" "$t")
	record budget "$label|bandwidth of the timed run (MB/s)" "$size" "$v" MB/s
	# The time one packet of payload has at that rate (MTU 1024).
	[ -n "$v" ] && record budget "$label|wall time per data packet" "$size" \
		"$(awk -v v="$v" 'BEGIN { printf "%.0f", 1e9 * 1024 / (v * 1048576) }')" ns
	# per SIDE COUNTER PACKETS: COUNTER's growth over the run per packet
	# of PACKETS' growth, on vm0 ("peer") or vm1 ("self").
	per() {
		local dir=$RXUD_OUT
		[ "$1" = peer ] && dir=$peer_out
		a=$(( $(hw_stat "$dir/$name.stats" "$2") - $(hw_stat "$dir/$prev.stats" "$2") ))
		b=$(( $(hw_stat "$dir/$name.stats" "$3") - $(hw_stat "$dir/$prev.stats" "$3") ))
		[ "$b" -gt 0 ] && awk -v a="$a" -v b="$b" 'BEGIN { printf "%.0f", a / b }'
	}
	record budget "$label|receive path, per datagram (vm0)" "$size" "$(per peer rx_ns rx_packets)" ns
	record budget "$label|of which the ICRC check (vm0)" "$size" "$(per peer rx_icrc_ns rx_packets)" ns
	record budget "$label|of which the transport (vm0)" "$size" "$(per peer rx_transport_ns rx_packets)" ns
	record budget "$label|of that, placing the payload (vm0)" "$size" "$(per peer rx_place_ns rx_packets)" ns
	record budget "$label|building packets, per packet (vm1)" "$size" "$(per self tx_build_ns tx_packets)" ns
	record budget "$label|handing them to IP, per packet (vm1)" "$size" "$(per self tx_ip_ns tx_packets)" ns
}

# uverbs_writes STRACE: how many write(2) calls an strace log shows on the
# file descriptors opened on /dev/infiniband/uverbs* (the verbs commands:
# a post_send doorbell is one), unfinished calls counted once.
uverbs_writes() {
	awk '
	/openat\(.*"\/dev\/infiniband\/uverbs[0-9]+"/ && match($0, /= [0-9]+$/) { fd[substr($0, RSTART + 2)] = 1 }
	match($0, /write\([0-9]+,/) { f = substr($0, RSTART + 6, RLENGTH - 7); if (f in fd) n++ }
	END { print n + 0 }' "$1"
}

# syscalls PROV: the system calls per work request of the client, for the
# entries of SYSCALL_RUNS over PROV's device (a run of its own under
# strace, which slows it: its bandwidth is not recorded).
syscalls() {
	local prov=$1 n=0 name w
	up "$prov" sys
	for run in "${SYSCALL_RUNS[@]}"; do
		n=$((n + 1))
		name=$prov-sys-$n
		perf_args "$run"
		if [ "$RXUD_VM" = 0 ]; then
			run_both "$name" timeout 300 "$t" "${args[@]}"
		else
			run_both "$name" strace -f -qq -e trace=openat,write -o "$RXUD_OUT/$name.strace" \
				timeout 300 "$t" "${args[@]}"
			w=$(uverbs_writes "$RXUD_OUT/$name.strace")
			v=
			result "$RXUD_OUT/$name.client" "$t" | grep -q . && v=$(awk -v w="$w" -v n="$iters" 'BEGIN { printf "%.3f", w / n }')
			record "$prov" "system calls per WR, $t${extra:+ $extra}" "$size" "$v" calls/WR 1
		fi
	done
	down "$prov" sys
}

# nvme_port TRTYPE | nvme_port down: vm0's nvmet port on its address
# (4420), serving the bench subsystem (made on first use), or the port
# gone. An RDMA port listens through whatever RoCE device holds the
# address when it is made: it is made again for each device.
nvme_port() {
	local cfs=/sys/kernel/config/nvmet sub=/sys/kernel/config/nvmet/subsystems/$NVME_NQN
	if [ "$1" = down ]; then
		rm -f "$cfs/ports/1/subsystems/$NVME_NQN" && rmdir "$cfs/ports/1"
		return
	fi
	modprobe -a nvmet "nvmet-$1" || return
	if [ ! -d "$sub" ]; then
		modprobe null_blk nr_devices=1 gb=1 queue_mode=2 &&
			{ mountpoint -q /sys/kernel/config || mount -t configfs none /sys/kernel/config; } &&
			mkdir "$sub" && echo 1 >"$sub/attr_allow_any_host" &&
			mkdir "$sub/namespaces/1" && echo /dev/nullb0 >"$sub/namespaces/1/device_path" &&
			echo 1 >"$sub/namespaces/1/enable" || return
	fi
	mkdir "$cfs/ports/1" && echo "$1" >"$cfs/ports/1/addr_trtype" &&
		echo ipv4 >"$cfs/ports/1/addr_adrfam" && echo "$RXUD_SELF_IP" >"$cfs/ports/1/addr_traddr" &&
		echo 4420 >"$cfs/ports/1/addr_trsvcid" && ln -s "$sub" "$cfs/ports/1/subsystems/$NVME_NQN"
}

# nvme_fio KIND TRTYPE ROUND: the NVME_RUNS over an NVMe-oF connection of
# TRTYPE (rdma, tcp) from vm1 to vm0's target, recorded as provider
# nvme-KIND (KIND: rxe, rxud or tcp). A run without a figure is recorded
# without one (the table shows "-"), its fio output kept.
nvme_fio() {
	local kind=$1 tr=$2 round=$3 run rw bs qd name v unit ctrl n=0
	if [ "$RXUD_VM" = 0 ]; then
		nvme_port "$tr" >"$RXUD_OUT/nvme-$kind-$round.port" 2>&1
		step "nvme-up-$kind-$round"
		step "nvme-done-$kind-$round"
		nvme_port down
		return
	fi
	modprobe "nvme-$tr"
	step "nvme-up-$kind-$round"
	ctrl=
	if nvme connect -t "$tr" -n "$NVME_NQN" -a "$RXUD_PEER_IP" -s 4420 >"$RXUD_OUT/nvme-$kind-$round.connect" 2>&1; then
		wait_for 30 nvme_ns >/dev/null && ctrl=$(nvme_ns)
	fi
	for run in "${NVME_RUNS[@]}"; do
		n=$((n + 1))
		read -r rw bs qd <<<"$run"
		name=nvme-$kind-$round-$n
		v=
		if [ -n "$ctrl" ]; then
			fio --name="$name" --filename="/dev/$ctrl" --direct=1 --ioengine=libaio --rw="$rw" \
				--bs="$bs" --iodepth="$qd" --time_based --ramp_time=1 --runtime="$NVME_SECONDS" \
				--output-format=json --output="$RXUD_OUT/$name.json" >/dev/null 2>&1
			case $rw in
			rand*) v=$(jq '.jobs[0].read.iops | round' "$RXUD_OUT/$name.json" 2>/dev/null) ;;
			*) v=$(jq '.jobs[0].read.bw_bytes / 1048576 * 100 | round / 100' "$RXUD_OUT/$name.json" 2>/dev/null) ;;
			esac
		fi
		case $rw in rand*) unit=IO/s ;; *) unit=MB/s ;; esac
		record "nvme-$kind" "fio $rw, QD $qd" "$bs" "$v" "$unit" "$round"
	done
	nvme disconnect -n "$NVME_NQN" >>"$RXUD_OUT/nvme-$kind-$round.connect" 2>&1
	modprobe -r "nvme-$tr"
	step "nvme-done-$kind-$round"
}

# nvme_ns: vm1's namespace of the bench subsystem (nvmeXnY), if any.
nvme_ns() {
	local c n
	for c in /sys/class/nvme/nvme*; do
		grep -qx "$NVME_NQN" "$c/subsysnqn" 2>/dev/null || continue
		for n in "$c"/nvme*n*; do
			[ -b "/dev/${n##*/}" ] && { echo "${n##*/}"; return; }
		done
	done
	return 1
}

# in_rounds N FN: FN PROV ROUND for rxe and rxud in each of N rounds, rxe
# first in odd rounds and rxud first in even ones, so that a host whose load
# drifts during the run favours neither.
in_rounds() {
	local n=$1 fn=$2 round prov order
	for round in $(seq 1 "$n"); do
		if [ $((round % 2)) = 1 ]; then order="rxe rxud"; else order="rxud rxe"; fi
		for prov in $order; do
			"$fn" "$prov" "$round"
		done
	done
}

# Sourced with BENCH_GUEST_LIB=1 (a trial script of one's own, say): the
# functions above, nothing run.
[ -n "${BENCH_GUEST_LIB:-}" ] && return 0

echo "$QPS $QP_WRS" >"$RXUD_OUT/qp-mem.conf"
prepare

in_rounds "$ROUNDS" measure
for prov in rxe rxud; do
	syscalls "$prov"
done
steps
echo "== vm$RXUD_VM: done"
