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
# device in a namespace of its own, see rxud_beside_rxe). Then FLUSH
# (tests/verbs/flush-test, through librxud's rxudv_wr_flush: rdma-core 44
# has no ibv_wr_flush, so on rxud only): range and whole-MR FLUSHes after a
# WRITE, and the refusals (no FLUSH right in the MR or QP, a range past the
# MR, persistence, reserved FETH values). Every run must pass every check.
. "$(dirname "$0")/../lib/tap.sh"
. "$(dirname "$0")/../lib/rxud.sh"
ET=$RXUD_TOP/tests/verbs/ex-test
FT=$RXUD_TOP/tests/verbs/flush-test
tap_begin 7
export RDMAV_DRIVERS=$RXUD_TOP/rdma-core-provider/build/librxud

# ex_test DESC NS PROG ARGS...: one run of PROG in network namespace NS
# ("-": this one), its output as diagnostics, passing as a check.
ex_test() {
	local desc=$1 ns=$2 prog=$3 out rc t=$SECONDS
	shift 3
	if [ "$ns" = - ]; then
		out=$(timeout 120 "$prog" "$@" 2>&1)
	else
		out=$(inns "$ns" timeout 120 "$prog" "$@" 2>&1)
	fi
	rc=$?
	printf '%s\n' "${prog##*/} $* ($((SECONDS - t)) s):" "$out" | tap_diag
	check_eq "$desc" 0 "$rc"
}

rxud_load
rxud_beside_rxe_looped

ex_test "ex-test on rxe0 (the reference)" - "$ET" -d rxe0 -g "${g_rxe:-0}" -q
ex_test "ex-test on rxud0" rxudns "$ET" -d rxud0 -g "${g_rxud:-0}" -s
ex_test "flush-test on rxud0: FLUSH done and refused as IBTA A19 says" \
	rxudns "$FT" -d rxud0 -g "${g_rxud:-0}"

rxud_beside_rxe_end
check "no RDMA device left" test "$(ib_count)" = 0
check "rmmod rxud after the extended verbs" rxud_unload
tap_end
