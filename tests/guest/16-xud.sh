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
. "$(dirname "$0")/../lib/tap.sh"
. "$(dirname "$0")/../lib/rxud.sh"
XT=$RXUD_TOP/tests/verbs/xud-test
SINK=$RXUD_TOP/tests/verbs/xud-sink
TAP_PLANNED=9
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
rxud_beside_rxe_end
check "no RDMA device left" test "$(ib_count)" = 0
check "rmmod rxud after XUD" rxud_unload
tap_end
