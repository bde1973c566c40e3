#!/usr/bin/env bash
# tests/verbs/verbs-test against rxud and against rxe side by side (two
# ends of a veth pair, rxud's in a namespace of its own because rxe holds
# UDP 4791 of the initial one): both must pass the same checks. Then resources of a process that is
# killed are all released.
. "$(dirname "$0")/../lib/tap.sh"
. "$(dirname "$0")/../lib/rxud.sh"
IF=${RXUD_IF:?no test NIC}
VT=$RXUD_TOP/tests/verbs/verbs-test
TAP_PLANNED=17
tap_begin $TAP_PLANNED
export RDMAV_DRIVERS=$RXUD_TOP/rdma-core-provider/build/librxud

rxud_load
rxud_beside_rxe

out_rxud=$("$VT" -d rxud0 2>&1); rc_rxud=$?
out_rxe=$("$VT" -d rxe0 2>&1); rc_rxe=$?
printf '%s\n' "verbs-test -d rxud0:" "$out_rxud" | tap_diag
check_eq "verbs-test passes on rxud0" 0 "$rc_rxud"
check_eq "verbs-test passes on rxe0 (the reference)" 0 "$rc_rxe"
# Same checks, same verdicts: compare the TAP lines without device names.
strip() { sed -E 's/ \(got [^)]*\)//; s/rx(e|ud)0/DEV/g; s/[0-9]+ (>=|==)/N \1/g; s/\(([0-9]+)\)//g' <<<"$1" | grep -E '^(not )?ok'; }
check_eq "rxud and rxe give the same results" "$(strip "$out_rxe")" "$(strip "$out_rxud")"
# Limits of the IB spec that rxe does not enforce: rxud only.
out_strict=$("$VT" -d rxud0 -s 2>&1); rc_strict=$?
printf '%s\n' "verbs-test -d rxud0 -s:" "$out_strict" | tap_diag
check_eq "rxud-only checks: spec limits rxe does not enforce, rereg_mr (verbs-test -s)" 0 "$rc_strict"

# count KIND: live objects of that kind on rxud0 (`rdma resource show`),
# beyond those ib_core's MAD layer keeps on every kernel-verbs device (a
# PD, a CQ and the GSI QP): what was there before the holder started.
raw_count() { rdma resource show | sed -n "s/.* rxud0: .*\\b$1 \\([0-9]*\\).*/\\1/p"; }
declare -A base
for k in pd mr ctx cq qp srq; do base[$k]=$(raw_count $k); done
count() { echo $(($(raw_count "$1") - ${base[$1]:-0})); }
check_eq "ib_core's MAD layer holds a PD, a CQ and the GSI QP on rxud0" "1 1 1" \
	"${base[pd]} ${base[cq]} ${base[qp]}"
"$VT" -d rxud0 -H 60 > /tmp/vt-hold.out 2>&1 &
pid=$!
check "holder process opened rxud0 and made PDs, an MR, CQs, a QP, an SRQ, an AH" \
	wait_for 20 grep -q ready /tmp/vt-hold.out
check_eq "rdma resource show counts its 3 PDs" 3 "$(count pd)"
check_eq "and its MR" 1 "$(count mr)"
check_eq "and its context" 1 "$(count ctx)"
check_eq "and its 2 CQs" 2 "$(count cq)"
check_eq "and its QP" 1 "$(count qp)"
check_eq "and its SRQ" 1 "$(count srq)"
kill -9 $pid
wait $pid 2>/dev/null
count_is() { [ "$(count "$1")" = "$2" ]; }
check "PDs released after kill -9" wait_for 10 count_is pd 0
check_eq "MR released (pages unpinned) after kill -9" 0 "$(count mr)"
check_eq "context released after kill -9" 0 "$(count ctx)"
check_eq "CQs, QP and SRQ released after kill -9" "0 0 0" "$(count cq) $(count qp) $(count srq)"

rxud_beside_rxe_end
check "rmmod rxud after user contexts came and went" rxud_unload
tap_end
