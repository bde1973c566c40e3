#!/usr/bin/env bash
# XUD's control path (Documentation/xud.rst, "Creating one"), through
# librxud's direct verb rxudv_create_qp (tests/verbs/xud-test): creation with
# the defaults, the limits, an SRQ and the ibv_wr_* interface; EOPNOTSUPP on
# an rxe context and EINVAL for what XUD cannot take; ibv_query_qp (type
# IBV_QPT_DRIVER, caps, the retransmission defaults); ibv_modify_qp through
# RESET, INIT, RTR, RTS with UD's attributes and XUD's optional ones, bad
# values and masks refused; ibv_post_send's refusals; an RDMA WRITE built
# with ibv_wr_rdma_write + ibv_wr_set_ud_addr; destroy, and the device's QP
# count back where it was. XUD QPs are driver-defined QPs (IBV_QPT_DRIVER),
# which ib_core's RDMA netlink lists only when asked for driver details, and
# Debian 12's `rdma resource show` (iproute2 6.1) never asks: xud-test counts
# them itself (xud-test -n). Its sends go to a QP that does not exist and
# fail with IBV_WC_RETRY_EXC_ERR within the retry budget. rxud0 sits beside rxe0 (rxud_beside_rxe),
# whose context rxudv_create_qp must refuse. Then QP numbers (xud.rst,
# rule 5): a destroyed XUD QP's number is not the next QP's, and a
# re-created device starts its numbers at a random point (tests/verbs/
# xud-sink prints its QP's number).
#
# Last, rxe takes no harm from XUD (xud.rst, "Wire format": XUD's opcodes
# are in the manufacturer-specific block, 0xE0-0xFF, which rxe does not
# know): a real XUD QP of rxud0 (xud-sink -t) sends SENDs to QP 1 of
# rxe0's GID with the GSI's Q_Key, so that a packet rxe took for UD would
# reach its GSI QP. rxe must drop every one before its receive counter
# (rcvd_pkts), nothing answers (the sends fail), no kernel
# report, and rxe's RC and UD work afterwards (ibv_rc_pingpong and
# ibv_ud_pingpong between rxe0 and rxud0). On the 6.12 kernel tested,
# rxe_rcv drops opcodes it does not know before any length arithmetic:
# a regression test of that and of XUD's opcode block (the mutant
# xud-send-as-ud, XUD's SEND sent as UD's, is caught).
. "$(dirname "$0")/../lib/tap.sh"
. "$(dirname "$0")/../lib/rxud.sh"
. "$(dirname "$0")/../lib/traffic.sh"
XT=$RXUD_TOP/tests/verbs/xud-test
SINK=$RXUD_TOP/tests/verbs/xud-sink
TAP_PLANNED=15
tap_begin $TAP_PLANNED
export RDMAV_DRIVERS=$RXUD_TOP/rdma-core-provider/build/librxud

qps() { inns rxudns "$XT" -d rxud0 -n; }
# sink_qpn: the number of a new XUD QP (xud-sink, which exits at once as
# its stdin is empty).
sink_qpn() { inns rxudns "$SINK" -d rxud0 -p 1 -r 1 </dev/null 2>&1 | awk '$1 == "qpn" { print $2; exit }'; }

rxud_load
rxud_beside_rxe
check "rxud0 has a RoCE v2 GID" wait_for 10 v2_gid_index rxud0
g=$(v2_gid_index rxud0)
before=$(qps)
t=$SECONDS
out=$(inns rxudns timeout 120 "$XT" -d rxud0 -g "${g:-0}" -r rxe0 2>&1)
rc=$?
printf '%s\n' "xud-test -d rxud0 -g ${g:-0} -r rxe0 ($((SECONDS - t)) s):" "$out" | tap_diag
check "xud-test ran to its plan" grep -q '^1\.\.[0-9]' <<<"$out"
check_eq "xud-test on rxud0 passes every check" 0 "$rc"
check "xud-test saw rxe0 refuse the direct verb" grep -q '^ok .*another provider' <<<"$out"
check_eq "no XUD QP is left behind (ib_core's QP count of rxud0, driver QPs included)" \
	"$before" "$(qps)"

# The numbers go round from a random start: the next QP never gets the
# number of the one just destroyed (an XUD QP's is held for 12 s besides);
# a device created again starts elsewhere, not at the range's first
# number, 0x10, where every device started before (once in 65536 it
# draws 0x10: then this check fails).
q1=$(sink_qpn)
q2=$(sink_qpn)
check "a destroyed XUD QP's number is not the next QP's ($q1, then $q2)" \
	test -n "$q1" -a -n "$q2" -a "$q1" != "$q2"
inns rxudns rdma link delete rxud0
inns rxudns rdma link add rxud0 type rxud netdev rxudv1
wait_for 10 v2_gid_index rxud0
q3=$(sink_qpn)
check "the re-created rxud0's first QP has a random number, not the first of the range ($q3)" \
	test -n "$q3" -a "$q3" != 0x10

# XUD at rxe. rxud_beside_rxe gives both veth ends one MAC (for
# 04-provider's GUIDs); rxe takes a packet to its own MAC for loopback
# (rxe_net.c) and would never send rxud0 one: another MAC for rxud0's end.
RXE_IP=169.254.200.1 # rxe0's address (rxudv0); rxud0's is .2 (rxudv1)
SENDS=8
bugs() { dmesg | grep -cE 'Oops|BUG:|WARNING:|KASAN|UBSAN|general protection|Call Trace'; }
inns rxudns ip link set rxudv1 address 02:52:58:55:44:02
wait_for 10 v2_gid_index rxe0
wait_for 10 inns rxudns ping -c1 -W1 $RXE_IP >/dev/null
g=$(v2_gid_index rxud0)
bugs0=$(bugs)
rcvd0=$(hwc rxe0 rcvd_pkts)
rx0=$(cat /sys/class/net/rxudv0/statistics/rx_packets)
out=$(inns rxudns timeout 60 "$SINK" -d rxud0 -k 0x80010000 -g "${g:-0}" -t "::ffff:$RXE_IP" -q 1 \
	-n $SENDS </dev/null 2>&1)
echo "$out" | tap_diag
rcvd=$(($(hwc rxe0 rcvd_pkts) - rcvd0))
rx=$(($(cat /sys/class/net/rxudv0/statistics/rx_packets) - rx0))
# All fail: those XUD let out to a destination that never answered after
# their retries (RETRY_EXC_ERR), the rest at once (LOC_QP_OP_ERR: a
# stalled destination's share, xud.rst "Send resources").
retried=$(sed -n "s/^sent: $SENDS send completions, \([0-9]*\) RETRY_EXC_ERR, $SENDS failed$/\1/p" <<<"$out")
check "rxud0's $SENDS XUD SENDs to rxe0's QP 1 went unanswered: all failed, ${retried:-none} after retries" \
	test "${retried:-0}" -ge 1
# The SENDs that went out (a destination that never answered has 2 in its
# stream, UNANSWERED_MSGS; the rest wait in its queue, and fail with them
# when it does, unsent, since the stall takes four timeouts), and the
# probes after them.
went=$(( ${retried:-1} < 2 ? ${retried:-1} : 2 ))
check "rxe0's netdev received their packets (rxudv0 rx_packets +$rx >= $went)" \
	test "$rx" -ge "$went"
check_eq "rxe0 dropped them all before counting a packet received (rcvd_pkts +$rcvd)" 0 "$rcvd"
check_eq "no kernel report (oops, BUG, WARNING, KASAN, UBSAN)" "$bugs0" "$(bugs)"
SIP=$RXE_IP CLI_OUT=/tmp/16-cli.out SRV_OUT=/tmp/16-srv.out
run_pair - rxe0 rxudns rxud0 ibv_rc_pingpong -n 20
check "rxe0's RC still works: ibv_rc_pingpong -n 20 with rxud0" grep -q '20 iters' "$CLI_OUT"
run_pair - rxe0 rxudns rxud0 ibv_ud_pingpong -n 20
check "rxe0's UD still works: ibv_ud_pingpong -n 20 with rxud0" grep -q '20 iters' "$CLI_OUT"
rxud_beside_rxe_end
check "no RDMA device left" test "$(ib_count)" = 0
check "rmmod rxud after XUD" rxud_unload
tap_end
