#!/usr/bin/env bash
# rdma-core's own conformance suite (pyverbs' tests, as Debian's
# python3-pyverbs ships them) on rxe0 and on rxud0 side by side in this VM
# (rxud_beside_rxe), each device's tests between two QPs of its own. Each
# test's verdict on both is compared (tests/lib/pyverbs-verdicts.py):
# rxud passes every test rxe passes, has no error and no failure, and
# skips only what rxe skips too (hardware neither has: mlx5, EFA, ODP,
# CUDA, ...). Both devices' verdicts go to the diagnostics.
#
# Except the tests of verbs rxe has and rxud does not yet: PENDING names
# them (one a line; none now: issue 28 item 6's memory window and
# ATOMIC_WRITE tests left it when they passed), each is printed, and a
# pending test that passes on rxud0 fails the run until it leaves the
# list.
. "$(dirname "$0")/../lib/tap.sh"
. "$(dirname "$0")/../lib/rxud.sh"
tap_begin 10
export RDMAV_DRIVERS=$RXUD_TOP/rdma-core-provider/build/librxud
SUITE=/usr/share/doc/rdma-core/tests
PENDING=""
W=${RXUD_OUT:-/tmp}/23-pyverbs
rm -rf $W
mkdir -p $W

check "rdma-core's pyverbs tests are installed (python3-pyverbs)" test -f $SUITE/run_tests.py
cp -r $SUITE $W/tests
gunzip -f $W/tests/*.gz

rxud_load
rxud_beside_rxe_looped

# suite DEV NS GID: the suite on DEV, its verdicts in $W/DEV.verdicts.
suite() {
	local t=$SECONDS
	inns "$2" timeout 900 python3 "$RXUD_TOP/tests/lib/pyverbs-verdicts.py" "$W/tests" "$W/$1.verdicts" \
		--dev "$1" --gid "$3" >"$W/$1.log" 2>&1
	echo "$1: $(tail -n 1 "$W/$1.log") in $((SECONDS - t)) s" | tap_diag
}
suite rxe0 - "$g_rxe"
suite rxud0 rxudns "$g_rxud"
check "the suite ran on rxe0" test -s $W/rxe0.verdicts
check "the suite ran on rxud0" test -s $W/rxud0.verdicts

# with VERDICT DEV: the tests DEV had VERDICT for, sorted.
with() { awk -F'\t' -v v="$1" '$1 == v { print $2 }' "$W/$2.verdicts" | sort; }
count() { with "$@" | wc -l; }
for d in rxe0 rxud0; do
	echo "$d: $(count pass $d) passed, $(count skip $d) skipped, $(count fail $d) failed, $(count error $d) errors" | tap_diag
	awk -F'\t' '$1 == "fail" || $1 == "error" { print "'$d' " $1 ": " $2 ": " $3 }' "$W/$d.verdicts" | tap_diag
done
pending() { sort <<<"$PENDING" | sed '/^$/d'; }
[ -z "$(pending)" ] || echo "not compared yet (verbs rxud lacks):" $(pending | sed 's/^tests\.//') | tap_diag
missing=$(comm -23 <(with pass rxe0) <(with pass rxud0) | comm -23 - <(pending))
[ -z "$missing" ] || { echo "passed on rxe0, not on rxud0:"; grep -F -f <(echo "$missing") $W/rxud0.verdicts; } | tap_diag
check_eq "rxud0 passes every test rxe0 passes but the $(pending | wc -l) pending ($(count pass rxe0) on rxe0, $(count pass rxud0) on rxud0)" "" "$missing"
check_eq "no test fails or errs on rxud0" 0 $(($(count fail rxud0) + $(count error rxud0)))
extra=$(comm -23 <(with skip rxud0) <(with skip rxe0) | comm -23 - <(pending))
[ -z "$extra" ] || { echo "skipped on rxud0, not on rxe0:"; grep -F -f <(echo "$extra") $W/rxud0.verdicts; } | tap_diag
check_eq "rxud0 skips only tests rxe0 skips too (but the pending)" "" "$extra"
check_eq "no pending test passes on rxud0 (one that does leaves PENDING)" "" "$(comm -12 <(with pass rxud0) <(pending))"

rxud_beside_rxe_end
check "rmmod rxud after the suite" rxud_unload
tap_end
