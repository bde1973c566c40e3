# TAP helpers for rxud's in-guest tests. Source it; each test script is one
# TAP producer (kselftest style) and exits 0 only if every check passed.
# shellcheck shell=bash

TAP_N=0
TAP_FAIL=0

tap_begin() { # tap_begin PLANNED
	echo "TAP version 13"
	echo "1..$1"
}

tap_ok() { TAP_N=$((TAP_N + 1)); echo "ok $TAP_N - $*"; }
tap_not_ok() { TAP_N=$((TAP_N + 1)); TAP_FAIL=$((TAP_FAIL + 1)); echo "not ok $TAP_N - $*"; }
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

tap_end() {
	[ "$TAP_N" -eq "${TAP_PLANNED:-$TAP_N}" ] || echo "# planned ${TAP_PLANNED} checks, ran $TAP_N"
	[ $TAP_FAIL -eq 0 ]
}
