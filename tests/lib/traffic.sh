# Traffic between RDMA devices for in-guest tests: client/server runs of
# the rdma-core examples and perftest, each side in a network namespace.
# Source after tap.sh and rxud.sh. The caller sets SIP (the address clients
# connect to), CLI_OUT and SRV_OUT (where the two sides' output goes).
# shellcheck shell=bash

# serving PID: the server PID (started by bg_in) listens on TCP 18515 (the
# port ibv_rc_pingpong and perftest exchange their QPs' addresses on), or
# has exited already.
serving() { ! kill -0 "$1" 2>/dev/null || tcp_socket "$1" 18515; }

# end_server PID CLIENT_STATUS: once the client has exited. A client that
# failed may leave its server waiting for it until its timeout: that one
# gets 5 s to finish, then SIGTERM (PID, started by bg_in, is `timeout`,
# which passes the signal on). Then waits for PID.
end_server() {
	if [ "$2" -ne 0 ] && ! wait_for 5 server_gone "$1"; then
		kill -TERM "$1"
	fi
	wait "$1"
}
server_gone() { ! kill -0 "$1" 2>/dev/null; }

hwc() { cat "/sys/class/infiniband/$1/ports/1/hw_counters/$2"; }

# run_pair SERVER_NS SERVER_DEV CLIENT_NS CLIENT_DEV PROG ARGS...: PROG as a
# server on SERVER_DEV, then as its client on CLIENT_DEV, both with ARGS,
# -d DEV and DEV's RoCE v2 GID index (-g for ibv_rc_pingpong, -x for
# perftest; with GID_PREFIX, the GID that starts with it). The client
# connects to $SIP. Output in $CLI_OUT and $SRV_OUT, and as diagnostics;
# PAIR_RUNS says how many times it ran PROG (2 when perftest's clock
# calibration failed the first time: counters read around the call then
# hold both runs' traffic).
run_pair() {
	local sns=$1 sdev=$2 cns=$3 cdev=$4 prog=$5 gopt=-x sg cg spid crc attempt t0=$SECONDS
	shift 5
	case $prog in ibv_*_pingpong) gopt=-g ;; esac
	: >"$CLI_OUT"
	: >"$SRV_OUT"
	PAIR_RUNS=0
	if sg=$(v2_gid_index "$sdev" ${GID_PREFIX:+"$GID_PREFIX"}) &&
		cg=$(v2_gid_index "$cdev" ${GID_PREFIX:+"$GID_PREFIX"}); then
		# perftest times itself with the TSC, calibrated against
		# gettimeofday; when a descheduled vCPU spoils the calibration
		# (r^2 < 0.9) it prints no result and fails whatever moved: that
		# run alone goes again, once, and says so.
		for attempt in 1 2; do
			PAIR_RUNS=$attempt
			bg_in "$sns" timeout "${PP_TIMEOUT:-60}" "$prog" -d "$sdev" "$gopt" "$sg" "$@" >"$SRV_OUT" 2>&1
			spid=$!
			wait_for 60 serving "$spid"
			# A slow guest may not be listening yet: the client tries
			# again while the server runs and the TCP connection was
			# refused.
			for _ in 1 2 3; do
				inns "$cns" timeout "${PP_TIMEOUT:-60}" "$prog" -d "$cdev" "$gopt" "$cg" "$@" "$SIP" >"$CLI_OUT" 2>&1
				crc=$?
				grep -q "Couldn't connect" "$CLI_OUT" && kill -0 "$spid" 2>/dev/null || break
				sleep 2
			done
			echo "client exit $crc" >>"$CLI_OUT"
			end_server "$spid" "$crc"
			echo "server exit $?" >>"$SRV_OUT"
			[ "$attempt" = 1 ] && grep -q "Can't produce a report" "$CLI_OUT" "$SRV_OUT" || break
			{
				echo "perftest's clock calibration failed, run again:"
				cat "$CLI_OUT" "$SRV_OUT"
			} | tap_diag
		done
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

# perf SERVER_NS SERVER_DEV CLIENT_NS CLIENT_DEV TEST ARGS...: a perftest
# run, with a 1 s ACK timeout (-u 18) instead of perftest's 67 ms. rxe
# 6.12's requester and responder tasks yield every 1024 packets, and in a
# one-vCPU TCG guest get the CPU back 70 to 140 ms later (seen with
# tcpdump: rxe silent mid-message, every 1024 packets); with the default
# timeout each such pause is a retransmission, and on a loaded host
# several in a row exhaust the retry count (CI failed so, twice). The
# tests check that data moves and completes, not how fast.
perf() { run_pair "$@" -u "${PERF_QP_TIMEOUT:-18}"; }

# rxud_pair NS_A NS_B VETH_A VETH_B: rxud0 on VETH_A in namespace NS_A at
# $SIP/24 and rxud1 on VETH_B in NS_B at $CIP/24, the two ends of one veth
# pair; returns once they reach each other and have RoCE v2 GIDs.
rxud_pair() {
	local na=$1 nb=$2 va=$3 vb=$4
	ip netns add "$na"
	ip netns add "$nb"
	ip link add "$va" type veth peer name "$vb"
	ip link set "$va" netns "$na"
	ip link set "$vb" netns "$nb"
	inns "$na" ip link set lo up
	inns "$nb" ip link set lo up
	inns "$na" ip addr add "$SIP/24" dev "$va"
	inns "$nb" ip addr add "$CIP/24" dev "$vb"
	inns "$na" ip link set "$va" up
	inns "$nb" ip link set "$vb" up
	inns "$na" rdma link add rxud0 type rxud netdev "$va"
	inns "$nb" rdma link add rxud1 type rxud netdev "$vb"
	wait_for 10 inns "$nb" ping -c1 -W1 "$SIP" >/dev/null
	wait_for 10 v2_gid_index rxud0
	wait_for 10 v2_gid_index rxud1
}

# srq_pingpong ARGS...: the same with ibv_srq_pingpong -c: several RC QPs
# (-q, default 16) whose receives come from one SRQ on each side; -n
# counts the exchanges over all of them. -c is as thin as ibv_rc_pingpong's
# (the server reads the first byte of each page of its buffer at the end).
srq_pingpong() {
	local sns=$1 sdev=$2 cns=$3 cdev=$4
	shift 4
	PP_TIMEOUT=${PP_TIMEOUT:-30} run_pair "$sns" "$sdev" "$cns" "$cdev" ibv_srq_pingpong -m 1024 -c "$@"
}
