#!/usr/bin/env bash
# UD traffic: ibv_ud_pingpong between two rxud devices (each in a network
# namespace of its own, joined by a veth pair), then between rxud and rxe
# (interop: rxe's packets reach rxud's QPs and the reverse), with the
# ports' counters showing what crossed; and multicast groups
# (tests/verbs/mcast-test): on one rxud device (an IPv4 group, IGMP, and
# an IPv6 one, MLD), rxe sending to rxud's members, rxud sending to rxe's.
. "$(dirname "$0")/../lib/tap.sh"
. "$(dirname "$0")/../lib/rxud.sh"
. "$(dirname "$0")/../lib/traffic.sh"
TAP_PLANNED=15
tap_begin $TAP_PLANNED
export RDMAV_DRIVERS=$RXUD_TOP/rdma-core-provider/build/librxud

# ud_pingpong SERVER_NS SERVER_DEV CLIENT_NS CLIENT_DEV SERVER_IP: a short
# ibv_ud_pingpong run; prints the client's output, then the server's. The
# client starts once the server listens (a cold guest takes seconds to
# start the first one) and tries again if it was refused anyway.
ud_pingpong() {
	local sns=$1 sdev=$2 cns=$3 cdev=$4 sip=$5 sg cg spid rc out
	shift 5
	sg=$(v2_gid_index "$sdev" ${GID_PREFIX:-}) && cg=$(v2_gid_index "$cdev" ${GID_PREFIX:-}) ||
		{ echo "no RoCE v2 GID"; return 1; }
	bg_in "$sns" timeout 60 ibv_ud_pingpong -d "$sdev" -g "$sg" -s 256 -n 20 "$@" >/tmp/ud-server.out 2>&1
	spid=$!
	wait_for 60 serving "$spid"
	for _ in 1 2 3; do
		out=$(inns "$cns" timeout 8 ibv_ud_pingpong -d "$cdev" -g "$cg" -s 256 -n 20 "$@" "$sip" 2>&1)
		rc=$?
		grep -q "Couldn't connect" <<<"$out" && kill -0 "$spid" 2>/dev/null || break
		sleep 2
	done
	printf '%s\n' "$out"
	end_server "$spid" "$rc"
	echo "-- server:"
	cat /tmp/ud-server.out
	return $rc
}

rxud_load
modprobe rdma_rxe
SIP=169.254.210.1 # rxud0's address (rxudv0, in rxa)
CIP=169.254.210.2 # rxud1's (rxudv1, in rxb)
rxud_pair rxa rxb rxudv0 rxudv1

out=$(ud_pingpong rxa rxud0 rxb rxud1 169.254.210.1)
printf '%s\n' "$out" | tap_diag
check "ibv_ud_pingpong between two rxud devices" grep -q 'iters in' <<<"$out"
check "rxud0 received the datagrams" test "$(cat /sys/class/infiniband/rxud0/ports/1/hw_counters/rx_packets)" -ge 20
# perftest: ib_send_bw over UD, 500 messages of 1 KB.
g0=$(v2_gid_index rxud0) g1=$(v2_gid_index rxud1)
bg_in rxa timeout 60 ib_send_bw -d rxud0 -x "$g0" -c UD -s 1024 -n 500 >/tmp/bw-server.out 2>&1
bw=$!
wait_for 60 serving "$bw"
out=$(inns rxb timeout 60 ib_send_bw -d rxud1 -x "$g1" -c UD -s 1024 -n 500 169.254.210.1 2>&1)
wait $bw
printf '%s\n' "$out" | tap_diag
check "ib_send_bw -c UD between two rxud devices" grep -qE '^ *1024 +500 ' <<<"$out"

# Over IPv6, between the devices' RoCE v2 GIDs of fd00:210::/64, and with
# completion events: req_notify_cq, the CQ's event and ibv_get_cq_event
# instead of busy polling.
inns rxa ip -6 addr add fd00:210::1/64 dev rxudv0 nodad
inns rxb ip -6 addr add fd00:210::2/64 dev rxudv1 nodad
wait_for 10 v2_gid_index rxud0 fd00:0210:
wait_for 10 v2_gid_index rxud1 fd00:0210:
out=$(GID_PREFIX=fd00:0210: ud_pingpong rxa rxud0 rxb rxud1 169.254.210.1 -e)
printf '%s\n' "$out" | tap_diag
check "ibv_ud_pingpong -e (completion channel events) over IPv6 between two rxud devices" grep -q 'iters in' <<<"$out"
check_eq "no ICRC errors" "0 0" \
	"$(cat /sys/class/infiniband/rxud0/ports/1/hw_counters/rx_drop_bad_icrc) $(cat /sys/class/infiniband/rxud1/ports/1/hw_counters/rx_drop_bad_icrc)"

# Multicast: two UD QPs of rxud0 in a group, a third sending to it, the
# namespace's IP looping the datagrams back (tests/verbs/mcast-test).
out=$(inns rxa "$RXUD_TOP/tests/verbs/mcast-test" -d rxud0 -g "$g0" -i rxudv0 2>&1)
printf '%s\n' "$out" | tap_diag
check "UD multicast on rxud0: attach, each member receives each datagram to the group, detach, refusals" \
	test -n "$out" -a -z "$(grep '^not ok' <<<"$out")" -a "$(grep -c '^ok' <<<"$out")" = 15
# The same with an IPv6 group (ff0e::1:2:3, joined with MLD), from
# rxud0's IPv6 GID.
g06=$(v2_gid_index rxud0 fd00:0210:)
out=$(inns rxa "$RXUD_TOP/tests/verbs/mcast-test" -d rxud0 -g "${g06:-0}" -i rxudv0 -6 2>&1)
printf '%s\n' "$out" | tap_diag
check "UD multicast on rxud0 to an IPv6 group (MLD join): each member receives each" \
	test -n "$out" -a -z "$(grep '^not ok' <<<"$out")" -a "$(grep -c '^ok' <<<"$out")" = 15

# Interop: rxe on a veth end in the initial namespace, rxud in rxb.
inns rxb rdma link delete rxud1
inns rxb ip link set rxudv1 netns 1
ip addr add 169.254.210.2/24 dev rxudv1
ip link set rxudv1 up
rdma link add rxe0 type rxe netdev rxudv1
wait_for 10 ping -c1 -W1 169.254.210.1 >/dev/null
wait_for 10 v2_gid_index rxe0
out=$(ud_pingpong rxa rxud0 - rxe0 169.254.210.1)
printf '%s\n' "$out" | tap_diag
check "ibv_ud_pingpong: rxe client, rxud server" grep -q 'iters in' <<<"$out"
out=$(ud_pingpong - rxe0 rxa rxud0 169.254.210.2)
printf '%s\n' "$out" | tap_diag
check "ibv_ud_pingpong: rxud client, rxe server" grep -q 'iters in' <<<"$out"
# Multicast interop: rxe0's QP sends to the group rxud0's two QPs joined
# (the process in rxa, where rxud0's netdev and the IP join are; rxe0 is
# reachable from there, RDMA devices being shared across namespaces).
ge=$(v2_gid_index rxe0)
out=$(inns rxa "$RXUD_TOP/tests/verbs/mcast-test" -d rxud0 -g "$g0" -i rxudv0 -s rxe0 -G "$ge" 2>&1)
printf '%s\n' "$out" | tap_diag
check "UD multicast: rxe0 sends to a group of rxud0's QPs, each member receives each" \
	test -n "$out" -a -z "$(grep '^not ok' <<<"$out")" -a "$(grep -c '^ok' <<<"$out")" = 15
check_eq "no ICRC errors on rxe's packets" 0 "$(cat /sys/class/infiniband/rxud0/ports/1/hw_counters/rx_drop_bad_icrc)"
# The reverse: rxe0's QPs are the group (the IP join on rxe0's netdev,
# here), rxud0 sends from rxa: its datagrams cross the link.
tx0=$(cat /sys/class/infiniband/rxud0/ports/1/hw_counters/tx_packets)
out=$("$RXUD_TOP/tests/verbs/mcast-test" -d rxe0 -g "$ge" -i rxudv1 -s rxud0 -G "$g0" 2>&1)
printf '%s\n' "$out" | tap_diag
check "UD multicast: rxud0 sends to a group of rxe0's QPs, each member receives each" \
	test -n "$out" -a -z "$(grep '^not ok' <<<"$out")" -a "$(grep -c '^ok' <<<"$out")" = 15
tx1=$(cat /sys/class/infiniband/rxud0/ports/1/hw_counters/tx_packets)
check "rxud0 counted the datagrams it sent to the group (+$((tx1 - tx0)))" test $((tx1 - tx0)) -ge 8

rdma link delete rxe0
inns rxa rdma link delete rxud0
ip link del rxudv1
ip netns del rxa
ip netns del rxb
rmmod rdma_rxe
check "no rxud device left" test "$(ib_count)" = 0
check "rmmod rxud" rxud_unload
tap_end
