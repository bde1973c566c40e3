#!/usr/bin/env bash
# In-guest: runs several mutants' tests in one boot (tests/mutation.sh),
# one after the other, each against its own build of the module:
#   tests/mutant-lane.sh LIST
# LIST has one mutant per line: NAME, KO, TEST and, for a mutant that
# kmemleak is to catch, "scan" (for one that may crash the kernel,
# "crash": the guest powers off after its test; "-" for neither), and for
# a user-space mutant VAR=VALUE for its test's environment (RXUD_MCAST:
# its build of the RDMC tool), tab-separated (a file,
# not arguments: the guest's command travels on the kernel command line,
# which holds 2048 bytes). Each mutant's TAP stream and kernel log go to $RXUD_OUT/NAME/
# (the kernel log cleared in between, so each holds its own run), and for
# "scan" kmemleak's findings: those of earlier runs are cleared first, so
# a leak reported is the mutant's own (the lane boots with kmemleak=on;
# the other mutants skip the scans, which take seconds each). A mutant
# whose module cannot be unloaded afterwards ends the lane: the ones after
# it are not run, so they cannot be counted as caught.
set -u
top=$(cd "$(dirname "$0")/.." && pwd)
out=${RXUD_OUT:-/tmp}
# A mutant's test stops at its first failed check (RXUD_FAIL_FAST), so it
# does not clean up after itself: what it may have left is removed here,
# whatever the test, before the next mutant.
cleanup() {
	local l d ns
	pkill -9 -f 'ibv_|ib_(send|write|read|atomic)_|rping|ucmatose|udaddy|data-test|rc-test|ex-test|srq_pingpong' 2>/dev/null
	sleep 1
	for ns in $(ip netns list 2>/dev/null | awk '{print $1}'); do
		ip netns del "$ns"
	done
	for l in $(rdma link show 2>/dev/null | awk '{print $2}' | cut -d/ -f1 | sort -u); do
		rdma link delete "$l" 2>/dev/null
	done
	# Virtual netdevs (no bus device behind them) other than lo.
	for d in /sys/class/net/*; do
		d=${d##*/}
		[ "$d" = lo ] || [ -e "/sys/class/net/$d/device" ] || ip link del "$d" 2>/dev/null
	done
	for m in rxud_ktest rdma_rxe; do
		[ -d "/sys/module/$m" ] && rmmod "$m" 2>/dev/null
	done
	# A mesh test stopped early (tests/lib/mesh.sh) leaves ib_core in its
	# exclusive namespace mode, where the next test's devices made in a
	# namespace are not seen outside it: back to shared, once the
	# namespaces deleted above are gone (it refuses while one is left).
	for _ in $(seq 30); do
		rdma system set netns shared 2>/dev/null && break
		sleep 1
	done
}

list=${1:?usage: $0 LIST}
# The list on fd 3: the tests must not read it from their stdin.
while IFS=$'\t' read -r name ko test scan env <&3; do
	mkdir -p "$out/$name"
	# Whether lockdep can still report (it stops after its first report
	# or a taint): the judge says so of a lockdep mutant that survived.
	grep -s '^ *debug_locks:' /proc/lockdep_stats >"$out/$name/lockdep.txt"
	dmesg -C
	# In the console too: a crash after it is this mutant's
	# (tests/mutation.sh, CRASHERS).
	echo "rxud-mutant: $name" >/dev/kmsg
	if [ "$scan" = scan ]; then
		mountpoint -q /sys/kernel/debug || mount -t debugfs none /sys/kernel/debug
		echo clear >/sys/kernel/debug/kmemleak
	fi
	(
		[ -z "${env:-}" ] || export "${env?}"
		RXUD_OUT=$out/$name RXUD_KO=$ko RXUD_FAIL_FAST=1 RXUD_KMEMLEAK_SCAN=$([ "$scan" = scan ] && echo 1 || echo 0) \
			"$top/tests/guest-runner.sh" "$test" </dev/null >/dev/null 2>&1
	)
	if [ "$scan" = crash ]; then
		# A crasher (tests/mutation.sh, CRASHERS) is the lane's last: its
		# results are written; power off before its use after free runs
		# (24-device-removal's fires seconds after the test, when the
		# orphan's datagrams are dropped, and hangs the guest silently).
		sync
		echo o >/proc/sysrq-trigger
		sleep 60
	fi
	cleanup </dev/null
	for _ in 1 2 3 4 5; do
		[ -d /sys/module/rxud ] || break
		rmmod rxud 2>/dev/null || sleep 1
	done
	if [ -d /sys/module/rxud ]; then
		echo "mutant $name: rxud could not be unloaded; the rest of the lane is not run" |
			tee "$out/$name/stuck"
		exit 1
	fi
done 3<"$list"
