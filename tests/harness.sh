#!/usr/bin/env bash
# Tests of qemu/vm.sh itself: a VM that outlives its timeout, or a run that
# is interrupted, leaves no QEMU process behind; a guest command's exit
# status comes back, however long the command; a guest whose kernel dies
# leaves its last words in its kernel console (OUTDIR/vm0.console).
set -uo pipefail
TOP=$(cd "$(dirname "$0")/.." && pwd)
n=0 failed=0
result() { # result OK DESC
	n=$((n + 1))
	if [ "$1" = 0 ]; then echo "ok $n - $2"; else echo "not ok $n - $2"; failed=1; fi
}
# qemu_left DIR: QEMU processes still serving output directory DIR.
qemu_left() { pgrep -f "qemu-system.*$1" >/dev/null; }

out=$(mktemp -d /tmp/rxud-harness.XXXXXX)
# The first three side by side (one vCPU each, two cores; make check runs
# this beside its single-VM suite, hence timeouts far above a boot).
# A command of 3,000 bytes, more than x86's kernel command line holds
# (2,048): it exits 3 only if it ran whole.
long=$(printf 'x%.0s' $(seq 3000))
"$TOP/qemu/vm.sh" --timeout 240 --out "$out/status" -- \
	bash -c '[ ${#1} -eq 3000 ] && exit 3; exit 4' - "$long" >/dev/null 2>&1 &
status_pid=$!
# A guest that panics (sysrq c) and so never writes its exit status.
"$TOP/qemu/vm.sh" --timeout 240 --out "$out/crash" -- \
	bash -c 'echo c > /proc/sysrq-trigger; sleep 60' >/dev/null 2>&1 &
crash_pid=$!
"$TOP/qemu/vm.sh" --timeout 15 --out "$out/timeout" -- sleep 600 >/dev/null 2>&1
rc=$?
wait $status_pid
result $([ $? -eq 3 ] && echo 0 || echo 1) "guest exit status 3 is returned, from a 3,000-byte command"
result $([ $rc -eq 124 ] && echo 0 || echo 1) "a guest that outlives --timeout: exit 124 (got $rc)"
wait $crash_pid
rc=$?
result $([ $rc -eq 1 ] && echo 0 || echo 1) "a guest whose kernel panics: exit 1, did not come back (got $rc)"
result $(grep -q 'Kernel panic' "$out/crash/vm0.console" && echo 0 || echo 1) \
	"its panic is in its kernel console (vm0.console)"
sleep 2
result $(qemu_left "$out/timeout" && echo 1 || echo 0) "no QEMU left after the timeout"

"$TOP/qemu/vm.sh" --pair --timeout 120 --out "$out/int" -- sleep 600 >/dev/null 2>&1 &
pid=$!
for _ in $(seq 60); do qemu_left "$out/int" && break; sleep 0.5; done
sleep 3
# SIGTERM: a background job of a non-interactive shell ignores SIGINT, and
# vm.sh handles both the same way (Ctrl-C at a terminal sends SIGINT).
kill -TERM $pid
wait $pid
rc=$?
sleep 2
result $([ $rc -eq 130 ] && echo 0 || echo 1) "an interrupted pair run stops at once with exit 130 (got $rc)"
result $(qemu_left "$out/int" && echo 1 || echo 0) "no QEMU left after the interruption"
pkill -KILL -f "qemu-system.*$out" 2>/dev/null
rm -rf "$out"
exit $failed
