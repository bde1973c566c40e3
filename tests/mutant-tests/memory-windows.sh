#!/usr/bin/env bash
# The memory window and ATOMIC WRITE tests of rdma-core's pyverbs suite on
# rxud0 (two QPs of one device), for the mutants of tests/mutation.sh: the
# same tests that make check runs within tests/guest/23-pyverbs.sh, without
# the rest of the suite and its run on rxe0 (seconds instead of minutes).
. "$(dirname "$0")/../lib/tap.sh"
. "$(dirname "$0")/../lib/rxud.sh"
TESTS="tests.test_mr.MWTest.test_mw_type1
tests.test_mr.MWTest.test_invalidate_mw_type1
tests.test_mr.MWTest.test_mw_type2
tests.test_mr.MWTest.test_mw_type2_invalidate_local
tests.test_mr.MWTest.test_mw_type2_invalidate_remote
tests.test_mr.MWTest.test_mw_type2_invalidate_dealloc
tests.test_mr.MWTest.test_reg_mw_wrong_type
tests.test_qpex.QpExTestCase.test_qp_ex_rc_bind_mw
tests.test_qpex.QpExTestCase.test_qp_ex_rc_atomic_write"
tap_begin $(($(wc -l <<<"$TESTS") + 1))
export RDMAV_DRIVERS=$RXUD_TOP/rdma-core-provider/build/librxud
W=${RXUD_OUT:-/tmp}/memory-windows
rm -rf $W
mkdir -p $W
cp -r /usr/share/doc/rdma-core/tests $W/tests
gunzip -f $W/tests/*.gz

rxud_load
rxud_beside_rxe
check "rxud0 has a RoCE v2 GID" wait_for 10 v2_gid_index rxud0
# shellcheck disable=SC2086 # one argument per test
inns rxudns timeout 300 python3 "$RXUD_TOP/tests/lib/pyverbs-verdicts.py" "$W/tests" "$W/rxud0.verdicts" \
	--dev rxud0 --gid "$(v2_gid_index rxud0)" $TESTS >"$W/rxud0.log" 2>&1
for t in $TESTS; do
	check_eq "pyverbs ${t#tests.} on rxud0" pass \
		"$(awk -F'\t' -v t="$t" '$2 == t { print $1 }' "$W/rxud0.verdicts" 2>/dev/null)"
done
awk -F'\t' '$1 != "pass"' "$W/rxud0.verdicts" 2>/dev/null | tap_diag
rxud_beside_rxe_end
rxud_unload
tap_end
