#!/usr/bin/env bash
# RC semantics (tests/verbs/rc-test): SEND (multi-packet, with immediate,
# gather and scatter lists, inline), RDMA WRITE (with immediate), READ,
# atomics; remote access errors, RNR and a receive too small, each leaving
# the QP in error with later work requests flushed; unsignaled sends;
# query_qp in RTS; PSNs wrapping. Two QPs of one device connected to each
# other, on rxe (the reference) and on rxud side by side (rxud's device in a
# namespace of its own, see rxud_beside_rxe); then a QP of each device
# connected to one of the other, over the veth pair between them, both ways
# round. Every run must pass every check.
. "$(dirname "$0")/../lib/tap.sh"
. "$(dirname "$0")/../lib/rxud.sh"
RT=$RXUD_TOP/tests/verbs/rc-test
TAP_PLANNED=8
tap_begin $TAP_PLANNED
export RDMAV_DRIVERS=$RXUD_TOP/rdma-core-provider/build/librxud

# rc_test DESC NS ARGS...: one run of rc-test in network namespace NS ("-":
# this one), its output as diagnostics (with rxud0's counters if it failed),
# passing as a check.
rc_test() {
	local desc=$1 ns=$2 out rc t=$SECONDS
	shift 2
	if [ "$ns" = - ]; then
		out=$(timeout 150 "$RT" "$@" 2>&1)
	else
		out=$(inns "$ns" timeout 150 "$RT" "$@" 2>&1)
	fi
	rc=$?
	printf '%s\n' "rc-test $* ($((SECONDS - t)) s):" "$out" | tap_diag
	[ $rc -eq 0 ] || grep -H . /sys/class/infiniband/rxud0/ports/1/hw_counters/* 2>&1 | tap_diag
	check_eq "$desc" 0 "$rc"
}

rxud_load
rxud_beside_rxe_looped

# -q where B, the responder, is rxe: rxe departs from the spec's completion
# statuses for a receive too small (see rc-test.c, length_error_checks) and
# raises no async event when its responder fails; -Q where A is rxe, which
# orders a local failure's completions otherwise and keeps its QP in RTS
# when its send CQ overflows.
rc_test "rc-test, two QPs of rxe0 (the reference)" - -d rxe0 -g "${g_rxe:-0}" -q -Q
rc_test "rc-test, two QPs of rxud0" rxudns -d rxud0 -g "${g_rxud:-0}"
rc_test "rc-test, QP A on rxe0, QP B on rxud0" rxudns -d rxe0 -g "${g_rxe:-0}" -D rxud0 -G "${g_rxud:-0}" -Q
rc_test "rc-test, QP A on rxud0, QP B on rxe0" rxudns -d rxud0 -g "${g_rxud:-0}" -D rxe0 -G "${g_rxe:-0}" -q

rxud_beside_rxe_end
check "no RDMA device left" test "$(ib_count)" = 0
check "rmmod rxud after RC traffic" rxud_unload
tap_end
