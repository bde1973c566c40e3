#!/usr/bin/env bash
# The RC error checks of rc-test (-e: access errors, invalid request, local
# failure order, CQ overflow) between two QPs of one rxud device, for the
# mutants of tests/mutation.sh: the same checks that make check runs within
# tests/guest/11-rc-semantics.sh, without its rxe runs (a third of the time).
. "$(dirname "$0")/../lib/tap.sh"
. "$(dirname "$0")/../lib/rxud.sh"
tap_begin 2
export RDMAV_DRIVERS=$RXUD_TOP/rdma-core-provider/build/librxud

rxud_load
rxud_beside_rxe
check "rxud0 has a RoCE v2 GID" wait_for 10 v2_gid_index rxud0
out=$(inns rxudns timeout 150 "$RXUD_TOP/tests/verbs/rc-test" -e -d rxud0 -g "$(v2_gid_index rxud0)" 2>&1)
rc=$?
printf '%s\n' "$out" | tap_diag
check_eq "rc-test -e, two QPs of rxud0" 0 "$rc"
rxud_beside_rxe_end
rxud_unload
tap_end
