#!/usr/bin/env bash
# Host check of the kselftest targets (tests/lib/ksft.mk), one of make
# check's lint gates: each target's Makefile lists exactly the test
# scripts of its directory (a script left out would silently never run),
# each executable, and the test kernel has every option of its config fragment.
#   tests/ksft-targets.sh [KERNEL_TREE]
set -uo pipefail
TOP=$(cd "$(dirname "$0")/.." && pwd)
. "$TOP/qemu/lib.sh"
kdir=${1:-$(kernel_dir)}
[ -f "$kdir/.config" ] || die "no kernel .config at $kdir: run 'make setup'"
bad=0
for dir in tests/guest tests/guest-pair tests/mutant-tests; do
	listed=$(make -s -C "$TOP/$dir" KSFT_DIR="$kdir/tools/testing/selftests" emit_tests |
		sed 's/^[^:]*://' | sort)
	present=$(cd "$TOP/$dir" && ls -- *.sh | sort)
	if [ "$listed" != "$present" ]; then
		echo "$dir/Makefile's TEST_PROGS and the directory's scripts differ:"
		diff <(echo "$listed") <(echo "$present") | sed 's/^/  /'
		bad=1
	fi
	# The runner warns of a script not executable and runs it anyway:
	# the mode is checked here (an editor's rewrite drops it).
	for t in $present; do
		[ -x "$TOP/$dir/$t" ] || { echo "$dir/$t is not executable"; bad=1; }
	done
	for s in settings config; do
		[ -s "$TOP/$dir/$s" ] || { echo "$dir: no $s file"; bad=1; }
	done
	# Each CONFIG_X=V of the fragment: the kernel has it (=m is met by =y).
	while IFS='=' read -r opt want; do
		case $opt in CONFIG_*) ;; *) continue ;; esac
		have=$(sed -n "s/^$opt=//p" "$kdir/.config")
		if [ "$have" != "$want" ] && ! { [ "$want" = m ] && [ "$have" = y ]; }; then
			echo "$dir/config: $opt=$want, but the test kernel ($kdir) has ${have:-it unset}"
			bad=1
		fi
	done <"$TOP/$dir/config"
done
[ $bad -eq 0 ] && echo "kselftest targets: Makefiles list every script; the test kernel meets each config fragment"
exit $bad
