#!/usr/bin/env bash
# In-guest kselftest-style runner: runs every test script of a directory
# (or the scripts given), each with a time limit, nests its TAP output,
# and records dmesg (and kmemleak's findings when booted with kmemleak=on).
#   tests/guest-runner.sh DIR|SCRIPT...
# Writes the TAP stream to stdout and to $RXUD_OUT/tap.txt, the kernel log
# to $RXUD_OUT/dmesg.txt. Exits non-zero if any test failed.
set -u
out=${RXUD_OUT:-/tmp}
limit=${RXUD_TEST_TIMEOUT:-300}
if [ $# -eq 1 ] && [ -d "$1" ]; then tests=("$1"/[0-9]*.sh); else tests=("$@"); fi
{
	echo "TAP version 13"
	echo "1..${#tests[@]}"
	rc=0
	n=0
	for t in "${tests[@]}"; do
		n=$((n + 1))
		name=$(basename "$t")
		echo "# selftests: rxud: $name"
		t0=$SECONDS
		timeout -k 5 "$limit" "$t" 2>&1 | sed -u 's/^/# /'
		s=${PIPESTATUS[0]}
		echo "# $name: $((SECONDS - t0)) s"
		if [ "$s" -eq 0 ]; then
			echo "ok $n selftests: rxud: $name"
		else
			[ "$s" -eq 124 ] && echo "# $name: timed out after ${limit}s"
			echo "not ok $n selftests: rxud: $name # exit=$s"
			rc=1
		fi
	done
	exit $rc
} | tee "$out/tap.txt"
rc=${PIPESTATUS[0]}
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
