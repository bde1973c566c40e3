# TAP helpers for rxud's in-guest tests, over the kernel's own
# ktap_helpers.sh (tools/testing/selftests/kselftest). Source it; each test
# script is one KTAP producer (kselftest style) and exits 0 (KSFT_PASS) only
# if every planned check passed or was skipped, 4 (KSFT_SKIP) if it skipped
# as a whole (tap_skip_all). Result lines read "ok N - DESCRIPTION", the
# form tests/run.sh and tests/mutation.sh match.
# shellcheck shell=bash

# The kernel's selftests directory: KSFT_DIR (tests/lib/ksft.mk exports
# it), else that of the booted kernel's tree (qemu/vm.sh exports RXUD_KDIR).
KSFT_DIR=${KSFT_DIR:-${RXUD_KDIR:?neither KSFT_DIR nor RXUD_KDIR is set: tests/lib/ksft.mk says how to run the tests}/tools/testing/selftests}
# shellcheck source=/dev/null
. "$KSFT_DIR/kselftest/ktap_helpers.sh"
# For the closing line: how long the test took.
TAP_T0=$SECONDS

tap_begin() { # tap_begin PLANNED
	ktap_print_header
	ktap_set_plan "$1"
}

# tap_result ok|fail|skip DESCRIPTION [REASON]: one result line. ktap's
# helpers echo it from unquoted words: a * or ? in a description must not
# be expanded against the working directory's files.
tap_result() {
	local opts=$-
	set -f
	case $1 in
	ok) ktap_test_pass "- $2" ;;
	fail) ktap_test_fail "- $2" ;;
	skip)
		# ktap_test_skip has no reason; its own line builder has.
		__ktap_test ok "- $2" "SKIP $3"
		KTAP_CNT_SKIP=$((KTAP_CNT_SKIP + 1))
		;;
	esac
	case $opts in *f*) ;; *) set +f ;; esac
}
# RXUD_CHECK_TIMES=1: each result is followed by the seconds since the one
# before it (where a test's time goes, to trim make check).
if [ "${RXUD_CHECK_TIMES:-0}" = 1 ]; then
	TAP_LAST=$SECONDS
	eval "$(declare -f tap_result | sed '1s/tap_result/tap_result_untimed/')"
	tap_result() {
		tap_result_untimed "$@"
		echo "# +$((SECONDS - TAP_LAST)) s"
		TAP_LAST=$SECONDS
	}
fi
tap_ok() { tap_result ok "$*"; }
tap_not_ok() { tap_result fail "$*"; }
tap_skip() { tap_result skip "$1" "$2"; } # tap_skip DESCRIPTION REASON
# tap_skip_all REASON: the whole test cannot run here (a kernel option or a
# package it needs is missing); the runner reports it as skipped.
tap_skip_all() {
	ktap_skip_all "$*"
	exit "$KSFT_SKIP"
}

# tap_diag: stdin as TAP comments, each line ended (also a last line
# without its newline, which would otherwise glue the next result line to
# it, and run.sh would not count that result). Builtins only: a process
# costs tens of milliseconds in the TCG guests.
tap_diag() {
	local line
	while IFS= read -r line || [ -n "$line" ]; do
		printf '# %s\n' "$line"
	done
}
# After a failed check's diagnostics: with RXUD_FAIL_FAST set (the
# mutation tests, which need only the first failure), stop the test here
# instead of waiting out the timeouts of every later check.
tap_bail_if_fast() {
	[ -z "${RXUD_FAIL_FAST:-}" ] && return
	echo "Bail out! RXUD_FAIL_FAST: stopping at the first failed check"
	exit 1
}

# check DESC CMD...: CMD must succeed.
check() {
	local desc=$1 out
	shift
	if out=$("$@" 2>&1); then
		tap_ok "$desc"
	else
		tap_not_ok "$desc"
		printf '%s\n' "command: $*" "$out" | tap_diag
		tap_bail_if_fast
	fi
}

# check_fails DESC ERRTEXT CMD...: CMD must fail and say ERRTEXT (the
# strerror of the errno we expect) on stdout or stderr.
check_fails() {
	local desc=$1 want=$2 out rc=0
	shift 2
	out=$("$@" 2>&1) || rc=$?
	if [ $rc -ne 0 ] && grep -qF -- "$want" <<<"$out"; then
		tap_ok "$desc"
	else
		tap_not_ok "$desc"
		printf '%s\n' "command: $*" "expected failure with: $want" "got exit $rc: $out" | tap_diag
		tap_bail_if_fast
	fi
}

# check_eq DESC EXPECTED ACTUAL
check_eq() {
	if [ "$2" = "$3" ]; then
		tap_ok "$1"
	else
		tap_not_ok "$1"
		printf '%s\n' "expected: $2" "actual:   $3" | tap_diag
		tap_bail_if_fast
	fi
}

# wait_for SECONDS CMD...: polls CMD every 0.1 s until it succeeds or
# SECONDS have passed.
wait_for() {
	local deadline=$((SECONDS + $1))
	shift
	while :; do
		"$@" >/dev/null 2>&1 && return 0
		[ $SECONDS -lt $deadline ] || return 1
		sleep 0.1
	done
}

# tap_end: the totals, and the test's exit: KSFT_PASS if every planned
# check passed or was skipped, else KSFT_FAIL (ktap_finished).
tap_end() {
	local ran=$((KTAP_TESTNO - 1))
	[ "$ran" -eq "$KSFT_NUM_TESTS" ] || echo "# planned $KSFT_NUM_TESTS checks, ran $ran"
	echo "# $(basename "$0"): $((SECONDS - TAP_T0)) s"
	ktap_finished
}
