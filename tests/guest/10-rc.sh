#!/usr/bin/env bash
# RC and UC traffic: ibv_rc_pingpong and perftest (SEND, RDMA WRITE, RDMA
# READ, atomics), ibv_uc_pingpong and UC WRITEs, between two rxud devices,
# each in a network namespace of its own joined by a veth pair; ibv_rc_pingpong again over a link that loses
# 5% of the packets (netem); then rxud and rxe against each other
# (interop), with the ports' counters showing what crossed.
. "$(dirname "$0")/../lib/tap.sh"
. "$(dirname "$0")/../lib/rxud.sh"
TAP_PLANNED=30
tap_begin $TAP_PLANNED
export RDMAV_DRIVERS=$RXUD_TOP/rdma-core-provider/build/librxud

SIP=169.254.211.1 # the server's address (rcv0, in rca)
CIP=169.254.211.2 # the client's (rcv1, in rcb)
CLI_OUT=/tmp/10-rc.client
SRV_OUT=/tmp/10-rc.server

# inns NS CMD...: CMD in network namespace NS ("-": this one).
inns() {
	local ns=$1
	shift
	if [ "$ns" = - ]; then "$@"; else ip netns exec "$ns" "$@"; fi
}

# listening NS: something listens on TCP 18515 (the port ibv_rc_pingpong and
# perftest exchange their QPs' addresses on) in NS.
listening() { inns "$1" ss -Hltn 'sport = :18515' | grep -q .; }
# serving PID NS: the server PID is listening in NS, or has exited already.
serving() { ! kill -0 "$1" 2>/dev/null || listening "$2"; }

hwc() { cat "/sys/class/infiniband/$1/ports/1/hw_counters/$2"; }

# run_pair SERVER_NS SERVER_DEV CLIENT_NS CLIENT_DEV PROG ARGS...: PROG as a
# server on SERVER_DEV, then as its client on CLIENT_DEV, both with ARGS,
# -d DEV and DEV's RoCE v2 GID index (-g for ibv_rc_pingpong, -x for
# perftest; with GID_PREFIX, the GID that starts with it). The client
# connects to $SIP. Output in $CLI_OUT and $SRV_OUT, and as diagnostics.
run_pair() {
	local sns=$1 sdev=$2 cns=$3 cdev=$4 prog=$5 gopt=-x sg cg spid t0=$SECONDS
	shift 5
	case $prog in ibv_*_pingpong) gopt=-g ;; esac
	: >"$CLI_OUT"
	: >"$SRV_OUT"
	if sg=$(v2_gid_index "$sdev" ${GID_PREFIX:+"$GID_PREFIX"}) &&
		cg=$(v2_gid_index "$cdev" ${GID_PREFIX:+"$GID_PREFIX"}); then
		inns "$sns" timeout "${PP_TIMEOUT:-60}" "$prog" -d "$sdev" "$gopt" "$sg" "$@" >"$SRV_OUT" 2>&1 &
		spid=$!
		wait_for 20 serving "$spid" "$sns"
		inns "$cns" timeout "${PP_TIMEOUT:-60}" "$prog" -d "$cdev" "$gopt" "$cg" "$@" "$SIP" >"$CLI_OUT" 2>&1
		echo "client exit $?" >>"$CLI_OUT"
		wait "$spid"
		echo "server exit $?" >>"$SRV_OUT"
	else
		echo "no RoCE v2 GID${GID_PREFIX:+ starting with $GID_PREFIX}" >"$CLI_OUT"
	fi
	{
		echo "$prog $* ($cdev -> $sdev), $((SECONDS - t0)) s:"
		cat "$CLI_OUT"
		echo "-- server:"
		cat "$SRV_OUT"
	} | tap_diag
}

# pingpong SERVER_NS SERVER_DEV CLIENT_NS CLIENT_DEV ARGS...: an
# ibv_rc_pingpong run at path MTU 1024 with -c. What -c checks is thin:
# the client zeroes the first byte of each page of its 0x7b-filled buffer,
# and at the end the server reads those bytes of the last message it got
# (printing "invalid data in page N" for a wrong one; its exit status
# stays 0).
pingpong() {
	local sns=$1 sdev=$2 cns=$3 cdev=$4
	shift 4
	PP_TIMEOUT=${PP_TIMEOUT:-30} run_pair "$sns" "$sdev" "$cns" "$cdev" ibv_rc_pingpong -m 1024 -c "$@"
}

# uc_pingpong ARGS...: the same with ibv_uc_pingpong (no -c there).
uc_pingpong() {
	local sns=$1 sdev=$2 cns=$3 cdev=$4
	shift 4
	PP_TIMEOUT=${PP_TIMEOUT:-30} run_pair "$sns" "$sdev" "$cns" "$cdev" ibv_uc_pingpong -m 1024 "$@"
}

# srv_done N: the server of the last pingpong ran N iterations and found
# the data -c expects; pp_done N: the client ran them too.
srv_done() { grep -q "^$1 iters in " "$SRV_OUT" && ! grep -q 'invalid data' "$SRV_OUT"; }
pp_done() { grep -q "^$1 iters in " "$CLI_OUT" && srv_done "$1"; }

# result SIZE ITERS: the perftest client printed its result line (bandwidth:
# size, iterations, peak and average; latency: size, iterations, minimum
# and maximum).
result() { grep -qE "^ *$1 +$2 +[0-9.]+ +[0-9.]+" "$CLI_OUT"; }

# perf SERVER_NS SERVER_DEV CLIENT_NS CLIENT_DEV TEST ARGS...
perf() { run_pair "$@"; }

rxud_load
modprobe rdma_rxe
ip netns add rca
ip netns add rcb
ip link add rcv0 type veth peer name rcv1
ip link set rcv0 netns rca
ip link set rcv1 netns rcb
for ns in rca rcb; do ip netns exec $ns ip link set lo up; done
ip netns exec rca ip addr add $SIP/24 dev rcv0
ip netns exec rcb ip addr add $CIP/24 dev rcv1
ip netns exec rca ip link set rcv0 up
ip netns exec rcb ip link set rcv1 up
ip netns exec rca rdma link add rxud0 type rxud netdev rcv0
ip netns exec rcb rdma link add rxud1 type rxud netdev rcv1
wait_for 10 ip netns exec rcb ping -c1 -W1 $SIP >/dev/null
wait_for 10 v2_gid_index rxud0
wait_for 10 v2_gid_index rxud1

# --- ibv_rc_pingpong between the two rxud devices ----------------------
pingpong rca rxud0 rcb rxud1 -s 64 -n 50
check "ibv_rc_pingpong -c, 64 B x 50, between two rxud devices" pp_done 50
# 8 KB at path MTU 1024: each message is 8 packets (first, middle, last).
rx0=$(hwc rxud0 rx_packets)
pingpong rca rxud0 rcb rxud1 -s 8192 -n 50
check "ibv_rc_pingpong -c, 8 KB x 50 (8 packets a message), between two rxud devices" pp_done 50
rx=$(($(hwc rxud0 rx_packets) - rx0))
check "rxud0 received the 8 KB messages as 8 packets each (>= 400, got $rx)" test "$rx" -ge 400
# With completion events: req_notify_cq, the CQ's event and
# ibv_get_cq_event instead of busy polling.
pingpong rca rxud0 rcb rxud1 -s 8192 -n 50 -e
check "ibv_rc_pingpong -c -e (completion channel events), 8 KB x 50" pp_done 50

# Over IPv6: between the devices' RoCE v2 GIDs of fd00:211::/64.
ip netns exec rca ip -6 addr add fd00:211::1/64 dev rcv0 nodad
ip netns exec rcb ip -6 addr add fd00:211::2/64 dev rcv1 nodad
wait_for 10 v2_gid_index rxud0 fd00:0211:
wait_for 10 v2_gid_index rxud1 fd00:0211:
GID_PREFIX=fd00:0211: pingpong rca rxud0 rcb rxud1 -s 8192 -n 20
check "ibv_rc_pingpong -c over IPv6, 8 KB x 20" pp_done 20

# --- perftest over RC ----------------------------------------------------
perf rca rxud0 rcb rxud1 ib_send_bw -s 65536 -n 200
check "ib_send_bw (RC SEND) 64 KB x 200 between two rxud devices" result 65536 200
perf rca rxud0 rcb rxud1 ib_write_bw -s 65536 -n 200
check "ib_write_bw (RDMA WRITE) 64 KB x 200 between two rxud devices" result 65536 200
perf rca rxud0 rcb rxud1 ib_read_bw -s 65536 -n 200
check "ib_read_bw (RDMA READ) 64 KB x 200 between two rxud devices" result 65536 200
perf rca rxud0 rcb rxud1 ib_write_lat -s 2 -n 200
check "ib_write_lat 2 B x 200 between two rxud devices" result 2 200
# Atomics are 8 bytes; perftest refuses any other -s.
perf rca rxud0 rcb rxud1 ib_atomic_bw -A CMP_AND_SWAP -n 200
check "ib_atomic_bw -A CMP_AND_SWAP x 200 between two rxud devices" result 8 200
perf rca rxud0 rcb rxud1 ib_atomic_bw -A FETCH_AND_ADD -n 200
check "ib_atomic_bw -A FETCH_AND_ADD x 200 between two rxud devices" result 8 200

# UC: RC's packets without ACKs (a lossless veth: every message arrives).
uc_pingpong rca rxud0 rcb rxud1 -s 8192 -n 50
check "ibv_uc_pingpong, 8 KB x 50 (UC), between two rxud devices" pp_done 50
perf rca rxud0 rcb rxud1 ib_write_bw -c UC -s 65536 -n 200
check "ib_write_bw -c UC 64 KB x 200 between two rxud devices" result 65536 200

check_eq "no ICRC errors (rxud0 rxud1)" "0 0" "$(hwc rxud0 rx_drop_bad_icrc) $(hwc rxud1 rx_drop_bad_icrc)"
check_eq "no packet dropped as malformed or unsupported (rxud0 rxud1)" "0 0 0 0" \
	"$(hwc rxud0 rx_drop_malformed) $(hwc rxud0 rx_drop_unsupported) $(hwc rxud1 rx_drop_malformed) $(hwc rxud1 rx_drop_unsupported)"

# --- A lossy link ------------------------------------------------------
# netem drops 5% of what the server (rxud0) sends: its replies' packets
# and its ACKs of the client's messages. The client's last message is the
# one exchange RC cannot save: when the ACK of it is lost, the server has
# every completion it waits for, exits and destroys its QP, and the
# client's retries find no QP ("transport retry counter exceeded"), an
# ibv_rc_pingpong property, not a fault. The server, which is the side
# that checks the data, always finishes if lost packets are recovered:
# it has sent all 100 replies only if the client got every message
# through, and its QP stays until the client has acknowledged them all.
nm_why=$(modprobe sch_netem 2>&1)
if nm_err=$(ip netns exec rca tc qdisc add dev rcv0 root netem loss 5% 2>&1); then
	seq0=$(($(hwc rxud0 rx_drop_sequence) + $(hwc rxud1 rx_drop_sequence)))
	PP_TIMEOUT=60 pingpong rca rxud0 rcb rxud1 -s 8192 -n 100
	nm_stats=$(ip netns exec rca tc -s qdisc show dev rcv0)
	printf '%s\n' "$nm_stats" | tap_diag
	dropped=$(sed -n 's/.*(dropped \([0-9]*\),.*/\1/p' <<<"$nm_stats" | head -n 1)
	seq=$(($(hwc rxud0 rx_drop_sequence) + $(hwc rxud1 rx_drop_sequence) - seq0))
	ip netns exec rca tc qdisc del dev rcv0 root
	check "5% loss: the server ran 100 exchanges of 8 KB and found the data -c expects" srv_done 100
	check "5% loss: the client finished too, or lost only its last ACK (retry counter exceeded)" \
		grep -qE '^100 iters in |transport retry counter exceeded' "$CLI_OUT"
	check "netem dropped packets of the run (${dropped:-none})" test "${dropped:-0}" -gt 0
	check "out-of-sequence and duplicate packets seen and not delivered (rx_drop_sequence +$seq)" test "$seq" -gt 0
else
	why="no netem qdisc in this kernel: ${nm_err//$'\n'/ }${nm_why:+ (modprobe sch_netem: ${nm_why//$'\n'/ })}"
	tap_ok "5% loss: ibv_rc_pingpong server # SKIP $why"
	tap_ok "5% loss: ibv_rc_pingpong client # SKIP $why"
	tap_ok "5% loss: netem dropped packets # SKIP $why"
	tap_ok "5% loss: rx_drop_sequence # SKIP $why"
fi

# --- Interop: rxe on a veth end in the initial namespace, rxud in rca -----
ip netns exec rcb rdma link delete rxud1
ip netns exec rcb ip link set rcv1 netns 1
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
perf rca rxud0 - rxe0 ib_write_bw -s 65536 -n 100
check "ib_write_bw 64 KB x 100: rxe writes to rxud" result 65536 100
SIP=$CIP perf - rxe0 rca rxud0 ib_write_bw -s 65536 -n 100
check "ib_write_bw 64 KB x 100: rxud writes to rxe" result 65536 100
perf rca rxud0 - rxe0 ib_read_bw -s 65536 -n 100
check "ib_read_bw 64 KB x 100: rxe reads from rxud" result 65536 100
SIP=$CIP perf - rxe0 rca rxud0 ib_read_bw -s 65536 -n 100
check "ib_read_bw 64 KB x 100: rxud reads from rxe" result 65536 100
check_eq "no ICRC errors on rxe's packets" 0 "$(hwc rxud0 rx_drop_bad_icrc)"

rdma link delete rxe0
ip netns exec rca rdma link delete rxud0
ip link del rcv1
ip netns del rca
ip netns del rcb
rmmod rdma_rxe
check "no rxud device left" test "$(ib_count)" = 0
check "rmmod rxud" rxud_unload
echo "10-rc.sh: $SECONDS s" | tap_diag
tap_end
