#!/usr/bin/env bash
# In-guest runner for make check, make soak, make run and the mutant lanes:
# runs test scripts with the kernel's own kselftest runner, through their
# directory's Makefile over the kernel's lib.mk (`make run_tests`,
# tests/lib/ksft.mk), then records the kernel log (and kmemleak's findings
# when booted with kmemleak=on).
#   tests/guest-runner.sh DIR|SCRIPT...
# Scripts given must share a directory. RXUD_TEST_TIMEOUT overrides the
# directory's settings timeout. Writes the TAP stream to stdout and to
# $RXUD_OUT/tap.txt, the kernel log to $RXUD_OUT/dmesg.txt. Exits non-zero
# if any test failed or timed out (a skipped one, exit 4, is not a failure).
set -u
out=${RXUD_OUT:-/tmp}
die() { echo "guest-runner: $*" >&2; exit 2; }
progs=()
if [ $# -eq 1 ] && [ -d "$1" ]; then
	dir=$1
else
	[ $# -gt 0 ] || die "usage: $0 DIR|SCRIPT..."
	dir=$(dirname "$1")
	for t in "$@"; do
		[ "$(dirname "$t")" = "$dir" ] || die "$t: not in $dir (one directory per run)"
		progs+=("$(basename "$t")")
	done
fi
[ -f "$dir/Makefile" ] || die "$dir has no kselftest Makefile"
[ -z "${RXUD_TEST_TIMEOUT:-}" ] || export kselftest_override_timeout=$RXUD_TEST_TIMEOUT
# Each test's wall time follows its result, as a TAP comment, and its start
# goes to the kernel log, so that a slow suite shows where its time went
# and a kernel report shows which test it came in.
timed() {
	local start=$SECONDS line
	while IFS= read -r line; do
		printf '%s\n' "$line"
		case $line in
		"# selftests: "*)
			start=$SECONDS
			echo "rxud-test: ${line#\# selftests: }" >/dev/kmsg 2>/dev/null ;;
		"ok "*" selftests: "* | "not ok "*" selftests: "*)
			echo "# $((SECONDS - start)) s: ${line#* selftests: }" ;;
		esac
	done
}
make -s -C "$dir" run_tests ${progs[@]+TEST_PROGS="${progs[*]}"} 2>&1 | timed | tee "$out/tap.txt"
rc=0
# The runner's own status says nothing of its tests': its TAP does.
grep -qE '^not ok ' "$out/tap.txt" && rc=1
grep -qE '^ok [0-9]+ ' "$out/tap.txt" || rc=1
# With kmemleak=on, look for leaks after everything has been unloaded:
# two scans, the second after kmemleak's minimum object age (5 s).
# RXUD_KMEMLEAK_SCAN=0 skips them (tests/mutant-lane.sh, for the mutants
# that kmemleak is not to catch).
if [ "${RXUD_KMEMLEAK_SCAN:-1}" != 0 ] && grep -qw kmemleak=on /proc/cmdline; then
	t0=$SECONDS
	mountpoint -q /sys/kernel/debug || mount -t debugfs none /sys/kernel/debug
	echo scan > /sys/kernel/debug/kmemleak
	sleep 6
	echo scan > /sys/kernel/debug/kmemleak
	cat /sys/kernel/debug/kmemleak > "$out/kmemleak.txt"
	echo "# kmemleak scans: $((SECONDS - t0)) s" | tee -a "$out/tap.txt"
fi
dmesg > "$out/dmesg.txt"
exit "$rc"
