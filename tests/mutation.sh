#!/usr/bin/env bash
# Tests of the tests: builds rxud with a deliberate bug and checks that the
# in-VM suite catches it. A suite that passes against a broken module is
# itself broken.
#
# Mutant "allow-non-ethernet": newlink stops refusing non-Ethernet netdevs,
# so `rdma link add ... netdev lo` succeeds. 02-link-errors.sh must fail on
# exactly that check.
set -uo pipefail
TOP=$(cd "$(dirname "$0")/.." && pwd)
. "$TOP/qemu/lib.sh"
need_kernel

work=$(mktemp -d /tmp/rxud-mutant.XXXXXX)
trap 'rm -rf "$work"' EXIT
cp -r "$TOP/Kbuild" "$TOP/rust" "$work/"
rm -rf "$work/rust/proto/target"
target='if ndev.hw_type() != ARPHRD_ETHER || ndev.is_vlan() {'
grep -qF "$target" "$work/rust/driver/registry.rs" || die "mutation site not found: update tests/mutation.sh"
T=$target perl -pi -e 's/\Q$ENV{T}\E/if ndev.is_vlan() {/' "$work/rust/driver/registry.rs"
grep -qF "$target" "$work/rust/driver/registry.rs" && die "mutation not applied"

log "mutation: building the allow-non-ethernet mutant"
make -s -C "$KDIR" M="$work" "${KMAKE_FLAGS[@]}" modules >"$work/build.log" 2>&1 ||
	{ tail -n 30 "$work/build.log"; die "mutant does not build"; }

out=$(mktemp -d /tmp/rxud-mutant-run.XXXXXX)
log "mutation: running 02-link-errors.sh against it"
RXUD_KO="$work/rxud.ko" "$TOP/qemu/vm.sh" --timeout 600 --out "$out" -- \
	env RXUD_KO="$work/rxud.ko" "$TOP/tests/guest/02-link-errors.sh"
rc=$?
if [ $rc -ne 0 ] && grep -qE '^not ok [0-9]+ - loopback \(not Ethernet\)' "$out/vm0.log"; then
	echo "ok - mutant allow-non-ethernet is caught by 02-link-errors.sh"
	exit 0
fi
echo "not ok - mutant allow-non-ethernet survived (exit $rc, log $out/vm0.log)"
exit 1
