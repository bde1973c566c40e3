#!/usr/bin/env bash
# The extended verbs (tests/verbs/ex-test): ibv_create_cq_ex with
# start/next/end_poll and every ibv_wc_read_*, ibv_create_qp_ex with
# IBV_QP_INIT_ATTR_SEND_OPS_FLAGS and the ibv_wr_* builders and setters
# (SEND, SEND with immediate, inline data, SGE lists, RDMA WRITE with and
# without immediate, READ, both atomics, UD with ibv_wr_set_ud_addr,
# ibv_wr_abort, a failing batch), the refusals at create time. Two QPs of one
# device connected to each other, on rxe (the reference, with -q: the checks
# rdma-core 44's rxe provider fails are skipped) and on rxud (with -s: also
# the refusals where rxud departs from rxe on purpose), side by side (rxud's
# device in a namespace of its own, see rxud_beside_rxe). Every run must pass
# every check.
. "$(dirname "$0")/../lib/tap.sh"
. "$(dirname "$0")/../lib/rxud.sh"
ET=$RXUD_TOP/tests/verbs/ex-test
tap_begin 6
export RDMAV_DRIVERS=$RXUD_TOP/rdma-core-provider/build/librxud

# ex_test DESC NS ARGS...: one run of ex-test in network namespace NS ("-":
# this one), its output as diagnostics, passing as a check.
ex_test() {
	local desc=$1 ns=$2 out rc t=$SECONDS
	shift 2
	if [ "$ns" = - ]; then
		out=$(timeout 120 "$ET" "$@" 2>&1)
	else
		out=$(inns "$ns" timeout 120 "$ET" "$@" 2>&1)
	fi
	rc=$?
	printf '%s\n' "ex-test $* ($((SECONDS - t)) s):" "$out" | tap_diag
	check_eq "$desc" 0 "$rc"
}

rxud_load
rxud_beside_rxe
# As in 11-rc-semantics.sh: rxe takes any packet to its own MAC for
# loopback, so rxe0's end gets a MAC of its own.
ip link set rxudv0 address 02:52:58:55:44:02
check "rxe0 has a RoCE v2 GID" wait_for 10 v2_gid_index rxe0
check "rxud0 has a RoCE v2 GID" wait_for 10 v2_gid_index rxud0
g_rxe=$(v2_gid_index rxe0)
g_rxud=$(v2_gid_index rxud0)

ex_test "ex-test on rxe0 (the reference)" - -d rxe0 -g "${g_rxe:-0}" -q
ex_test "ex-test on rxud0" rxudns -d rxud0 -g "${g_rxud:-0}" -s

rxud_beside_rxe_end
check "no RDMA device left" test "$(ib_count)" = 0
check "rmmod rxud after the extended verbs" rxud_unload
tap_end
