#!/usr/bin/env bash
# `make soak` (issue 27, item 13): tests/guest/22-soak.sh with a million
# crafted packets (RXUD_SOAK_PACKETS) in one VM booted with kmemleak on the
# kasan flavour (the test kernel plus KASAN and UBSAN: qemu/rxud-kasan.config),
# which this builds and caches on first use. rxud.ko, librxud and the test
# programs are built against it in a copy of this tree's sources
# ($RXUD_CACHE/soak-src, as make bench does with its own): this tree's
# rxud.ko stays built for the test kernel.
#
# The verdict: every check of the test passed, kmemleak found nothing
# after rxud was unloaded, and the kernel log has no report (KERNEL_BUG_RE,
# qemu/lib.sh: oops, BUG, WARNING, KASAN, UBSAN, lockdep). The run's figures
# (packets, frames, kernel reports, leaks, traffic rounds, time, seed) are
# added to Documentation/soak.rst, failed runs too.
#
#   qemu/soak.sh [OUTDIR]
#   RXUD_SOAK_PACKETS=N qemu/soak.sh    another number of packets
#   RXUD_SOAK_SEED=S qemu/soak.sh       replay a run's seed
#   RXUD_SOAK_SECONDS=T qemu/soak.sh    stop the fuzzer after T seconds
#                                       (the record says how many packets
#                                       went out)
#   RXUD_SOAK_CPUS=N qemu/soak.sh       the VM's vCPUs (default: the
#                                       host's, at most 4: TCG runs each
#                                       on a host thread of its own)
set -euo pipefail
export RXUD_FLAVOUR=kasan
. "$(dirname "$0")/lib.sh"
packets=${RXUD_SOAK_PACKETS:-1000000}
budget=${RXUD_SOAK_SECONDS:-}
cpus=${RXUD_SOAK_CPUS:-$(($(nproc) < 4 ? $(nproc) : 4))}
out=${1:-$RXUD_TOP/tests/out/soak-$(date +%Y%m%d-%H%M%S)}
mkdir -p "$out"
out=$(cd "$out" && pwd)
t0=$SECONDS

export KDIR
KDIR=$(kernel_dir)
kernel_note=cached
[ -f "$KDIR/.rxud-built" ] || kernel_note="built by this run"
"$RXUD_TOP/qemu/build-kernel.sh"
kernel_s=$((SECONDS - t0))

rev=$(sources_rev "" Documentation/soak.rst)
src=$RXUD_CACHE/soak-src
copy_sources "$src" ""
log "soak: building rxud.ko, librxud and the test programs for $KDIR in $src (log: $out/build.log)"
make -C "$src" KDIR="$KDIR" modules provider "$src/tests/verbs/data-test" "$src/tests/verbs/xud-data" \
	"$src/tests/verbs/ring-storm" "$src/tests/roce-fuzz/target/release/roce-fuzz" >"$out/build.log" 2>&1 ||
	{ tail -n 30 "$out/build.log" >&2; die "build failed (log: $out/build.log)"; }
build_s=$((SECONDS - t0 - kernel_s))

# Under TCG with KASAN, on 2 host CPUs: some 260 packets a second with
# the machine to itself, 150 beside one more VM. The limit assumes 50, for
# a slower or busier host.
limit=$((1200 + packets / 50))
[ -z "$budget" ] || limit=$((1200 + budget))
log "soak: $packets packets at rxud in a KASAN + UBSAN VM (limit $limit s; log: $out/vm0.log)"
# no5lvl: with five-level paging (TCG's CPU has LA57), an interrupt that
# lands while identify_cpu has cleared the boot CPU's feature words makes
# KASAN take a direct-map address for a wild one (session 23: a report at
# 1.7 s of boot, before rxud was loaded). That one report turned lockdep
# off for the whole run, and KASAN, which reports only its first finding
# unless told otherwise, with it: kasan_multi_shot, so that no report can
# hide a later one.
vm_rc=0
"$src/qemu/vm.sh" --append "kmemleak=on no5lvl kasan_multi_shot" --mem 2048 --cpus "$cpus" --timeout $((limit + 120)) --out "$out" -- \
	env RXUD_SOAK_PACKETS="$packets" ${RXUD_SOAK_SEED:+RXUD_SOAK_SEED=$RXUD_SOAK_SEED} RXUD_SOAK_SECONDS="$budget" \
	RXUD_TEST_TIMEOUT="$limit" "$src/tests/guest-runner.sh" "$src/tests/guest/22-soak.sh" \
	>/dev/null 2>&1 || vm_rc=$?
total_s=$((SECONDS - t0))
vm_s=$((total_s - kernel_s - build_s))

tap=$out/vm0/tap.txt
fails=$(grep -cE '^# not ok ' "$tap" 2>/dev/null || true)
oks=$(grep -cE '^# ok ' "$tap" 2>/dev/null || true)
reports=0
if [ -f "$out/vm0/dmesg.txt" ]; then
	grep -E "$KERNEL_BUG_RE" "$out/vm0/dmesg.txt" >"$out/kernel-reports.txt" || true
	reports=$(grep -cE 'BUG:|WARNING:|KASAN:|UBSAN:|Oops|general protection|possible (circular|recursive) locking|inconsistent lock state|suspicious RCU usage|INFO: task' "$out/kernel-reports.txt" || true)
else
	reports="? (no kernel log)"
fi
leaks="? (no scan)"
[ ! -f "$out/vm0/kmemleak.txt" ] || leaks=$(grep -c '^unreferenced object' "$out/vm0/kmemleak.txt" || true)
fuzz=$(sed -n 's/^# # roce-fuzz: sent \([0-9]*\) packets (\([0-9]*\) frames.*in \([0-9.]*\) s, seed \([0-9]*\)/\1 \2 \3 \4/p' "$tap" 2>/dev/null | tail -n 1)
read -r sent frames fuzz_s seed <<<"${fuzz:-? ? ? ?}"
rounds=$(sed -n 's/^# # \(rc\|xud\|ud\|storm\): \([0-9]*\) rounds, \([0-9]*\) failed$/\1 \2 (\3 failed)/p' "$tap" | paste -sd, | sed 's/,/, /g')
verdict=passed
if [ "$vm_rc" -ne 0 ] || [ "$fails" != 0 ] || [ "$oks" -eq 0 ] || [ "$reports" != 0 ] || [ "$leaks" != 0 ]; then
	verdict=FAILED
fi
guest=$(sed -n 's/.*Linux version \([^ ]*\).*/\1/p' "$out/vm0/dmesg.txt" 2>/dev/null | head -n 1)
of="of $packets"
[ "$sent" != "$packets" ] || of="all"
grep -q '^# # roce-fuzz: stopped by its time budget' "$tap" 2>/dev/null && of="$of, stopped by its ${budget} s budget"
row="- $(date -u +%Y-%m-%d) $verdict: sources $rev; $sent packets ($of; $frames frames) in ${fuzz_s} s of fuzzing,
  seed $seed; kernel reports: $reports; kmemleak: $leaks leaks; traffic rounds: ${rounds:-none};
  checks: $oks passed, $fails failed; kernel ${guest:-?} ($(kernel_checks "$KDIR" | sed 's/ /, /g'); $kernel_note);
  $((total_s / 60)) min $((total_s % 60)) s in all (kernel $kernel_s s, builds $build_s s, VM $vm_s s);
  VM: $cpus vCPUs; host: $(nproc) CPUs, load $(cut -d' ' -f1-3 /proc/loadavg)"
doc=$RXUD_TOP/Documentation/soak.rst
printf '%s\n' "$row" >>"$doc"
printf '%s\n' "$row"
log "soak: $verdict; all output in $out (TAP: $tap, kernel reports: $out/kernel-reports.txt); the run is recorded in $doc"
[ "$verdict" = passed ]
