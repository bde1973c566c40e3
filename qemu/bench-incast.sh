#!/usr/bin/env bash
# make bench-incast: issue 29's incast table. N senders (N = 2, 8, 32),
# each an rxud device in a namespace of its own, send 16 KB SENDs to one
# receiver through a router whose link to the receiver is a 10 Mbit/s
# RED bottleneck that marks ECN (tests/guest/27-incast.sh, run in full:
# RXUD_INCAST_ALL=1): N XUD senders to one XUD QP, then N RC QPs to as
# many RC QPs of the receiver, each with congestion control on (rxud's
# `cc`) and off. One VM on the bench kernel (as make bench; rxud.ko,
# librxud and xud-incast built for it in a copy of this tree), one boot.
# Writes the table, with the run's facts, to Documentation/incast.rst.
#   qemu/bench-incast.sh [OUTDIR]
#   qemu/bench-incast.sh --report OUTDIR   the document from a finished run
#   qemu/bench-incast.sh --rdmc [OUTDIR]   make bench-rdmc instead: RDMC
#       over XUD (tests/guest/28-rdmc.sh's benchmark mode), the time to
#       replicate 1 MB to 64 MB to 8 members with each algorithm, and the
#       kernel memory per member; written to Documentation/rdmc.rst
#       (--rdmc --report OUTDIR: the document from a finished run).
# rxe is not in the table: it has no XUD, and it neither marks ECN nor
# answers CNPs, so its RC incast is rxud's with cc off at best.
set -euo pipefail
export RXUD_FLAVOUR=bench
. "$(dirname "$0")/lib.sh"
NS=(2 8 32)
RATE=10
RDMC_SIZES=1M-64M
RDMC_N=8
what=incast
if [ "${1:-}" = --rdmc ]; then
	what=rdmc
	shift
fi
report=
if [ "${1:-}" = --report ]; then
	report=1
	out=${2:?usage: $0 --report OUTDIR}
	[ -f "$out/run.env" ] || die "$out has no run.env (not a finished run)"
else
	out=${1:-$RXUD_TOP/tests/out/bench-$what-$(date +%Y%m%d-%H%M%S)}
	mkdir -p "$out"
fi
out=$(cd "$out" && pwd)
doc=$RXUD_TOP/Documentation/$what.rst
t0=$SECONDS

if [ -z "$report" ]; then
	export KDIR
	KDIR=$(kernel_dir)
	"$RXUD_TOP/qemu/build-kernel.sh"
	rev=$(sources_rev "${RXUD_BENCH_REV:-}" "Documentation/$what.rst")
	src=$RXUD_CACHE/bench-src
	copy_sources "$src" "${RXUD_BENCH_REV:-}"
	log "bench-incast: building rxud.ko, librxud and xud-incast for $KDIR in $src (log: $out/build.log)"
	make -C "$src" KDIR="$KDIR" modules provider "$src/tests/verbs/xud-incast" "$src/tests/verbs/rxud-mcast" >"$out/build.log" 2>&1 ||
		{ tail -n 30 "$out/build.log" >&2; die "build failed (log: $out/build.log)"; }
	# The guest runs its command where this one is: in the copy, whose
	# rxud.ko and tools are the bench kernel's.
	cd "$src"
	if [ "$what" = rdmc ]; then
		log "bench-rdmc: one VM, $RDMC_N members, $RDMC_SIZES, each algorithm (log: $out/vm0.log)"
		"$src/qemu/vm.sh" --mem 2048 --timeout 3000 --out "$out" -- bash -c \
			"RXUD_RDMC_N=$RDMC_N RXUD_RDMC_BENCH=$RDMC_SIZES bash tests/guest/28-rdmc.sh >\$RXUD_OUT/rdmc.tap 2>&1" \
			>/dev/null 2>&1 || log "bench-rdmc: the VM did not finish cleanly (see $out/vm0.log)"
	else
		log "bench-incast: one VM, N = ${NS[*]}, XUD and RC, cc on and off (about 15 minutes; log: $out/vm0.log)"
		# shellcheck disable=SC2016 # expanded in the guest
		"$src/qemu/vm.sh" --mem 2048 --timeout 3000 --out "$out" -- bash -c '
			for n in '"${NS[*]}"'; do
				RXUD_INCAST_N=$n RXUD_INCAST_RATE='"$RATE"' RXUD_INCAST_ALL=1 \
					bash tests/guest/27-incast.sh >"$RXUD_OUT/incast-$n.tap" 2>&1
			done' >/dev/null 2>&1 ||
			log "bench-incast: the VM did not finish cleanly (see $out/vm0.log); rows without a figure show -"
	fi
	total_s=$((SECONDS - t0))
	declare -p rev total_s >"$out/run.env"
fi
# shellcheck source=/dev/null
. "$out/run.env"

# The RDMC document: one row per object size, each algorithm's time to
# replicate it to every member and its rate (of the object), and the
# pipeline's time over sequential send's (seed 001's Figure 4).
if [ "$what" = rdmc ]; then
	tap=$out/vm0/rdmc.tap
	grep -q '^# result ' "$tap" 2>/dev/null || die "no results (see $out/vm0.log, $tap)"
	mem=$(sed -n 's/^# memory members [0-9]* kB_per_member \(-*[0-9]*\)/\1/p' "$tap")
	tbl=$(awk '
		$2 == "result" { t[$10, $6] = $18; r[$10, $6] = $20; sizes[$10] = 1 }
		function cell(s, a) { return ((s, a) in t) ? sprintf("%d ms, %s MB/s", t[s, a], r[s, a]) : "-" }
		END {
			rule = "========  ===================  ===================  ===================  ===================  =========="
			print rule
			printf "%-8s  %-19s  %-19s  %-19s  %-19s  %s\n", "object", "sequential", "chain", "binomial tree", "binomial pipeline", "pipe/seq"
			print rule
			n = 0
			for (s in sizes) list[++n] = s + 0
			for (i = 2; i <= n; i++) for (j = i; j > 1 && list[j - 1] > list[j]; j--) { x = list[j]; list[j] = list[j - 1]; list[j - 1] = x }
			for (i = 1; i <= n; i++) {
				s = list[i]
				q = ((s, "pipeline") in t && (s, "seq") in t && t[s, "seq"] > 0) ? sprintf("%.2f", t[s, "pipeline"] / t[s, "seq"]) : "-"
				printf "%-8s  %-19s  %-19s  %-19s  %-19s  %s\n", s / 1048576 " MB", cell(s, "seq"), cell(s, "chain"), cell(s, "tree"), cell(s, "pipeline"), q
			}
			print rule
		}' "$tap")
	printf '%s\n' "$tbl"
	{
		cat <<-EOF
			.. This file is written by qemu/bench-incast.sh --rdmc (make bench-rdmc).

			RDMC over XUD: time to replicate an object
			==========================================

			${RDMC_N} members, each an rxud device on a veth in a network namespace
			of its own behind a router namespace, one rxud-mcast process and one
			XUD QP each (tests/guest/28-rdmc.sh's benchmark mode); root member 0
			sends one object of each size in 1 MB blocks with each algorithm
			(Documentation/xud.rst, "RDMC over XUD"). A cell is the root's time
			from rdmc_send to its completion (every member has the object and has
			said so) and MB/s of the object; pipe/seq is the binomial pipeline's
			time over sequential send's (seed 001's Figure 4 compares them).
			Kernel memory per member (unreclaimable slab and vmalloc over
			the members' start, their contexts and groups made, divided by
			${RDMC_N}): ${mem:-?} kB.

			All members share one VM's one vCPU (TCG): every block crosses the
			same CPU whichever member sends it, so the algorithms' parallelism
			(every member sending at once in the pipeline) cannot show here as
			it does between hosts; what shows is each schedule's cost in
			messages and round trips. Each member also checks its copy against
			the root's BLAKE2s-256 digest before its completion (xud.rst,
			"What a member can and cannot do to another's copy"), and the root
			hashes the object first: in one TCG vCPU those passes over every
			copy take most of the time (the run of dd34194, before the check:
			64 MB in 12.6 to 14.4 s, 1 MB in 223 to 391 ms); between hosts
			each member hashes its own copy, at about 300 MB/s of one core.

			Run of ${rev} on the bench kernel, one VM (1 vCPU, 2 GiB), one boot,
			${total_s} s in all.

		EOF
		printf '%s\n' "$tbl"
	} >"$doc"
	log "bench-rdmc: written to $doc (run: $out)"
	exit 0
fi

# rows: one line per run from the scripts' diagnostics,
#   N KIND CC USE% GOODPUT JAIN RESENT_PERMILLE FAILED MEM_KB
rows() {
	local n
	for n in "${NS[@]}"; do
		[ -f "$out/vm0/incast-$n.tap" ] || continue
		sed -n 's/^# [cr]c-\(on\|off\): \([a-z]*\), N=\([0-9]*\), .*goodput \([0-9?]*\) kbit\/s (\([0-9]*\)% .*jain \([0-9.?]*\), retransmitted \([0-9]*\) per mille.*failed SENDs \([0-9?]*\), receiver kernel memory \(-*[0-9]*\) kB/\3 \2 \1 \5 \4 \6 \7 \8 \9/p' \
			"$out/vm0/incast-$n.tap"
	done
}

table() {
	printf '%s\n' "====  ====  ===  =======  ==========  =====  =======  ========  ============"
	printf '%-4s  %-4s  %-3s  %-7s  %-10s  %-5s  %-7s  %-8s  %s\n' N QPs cc goodput "kbit/s" Jain resent failed "receiver kB"
	printf '%s\n' "====  ====  ===  =======  ==========  =====  =======  ========  ============"
	rows | sort -k1,1n -k2,2r -k3,3r | while read -r n kind cc use kbit jain rtx failed mem; do
		printf '%-4s  %-4s  %-3s  %-7s  %-10s  %-5s  %-7s  %-8s  %s\n' "$n" "${kind^^}" "$cc" "$use%" "$kbit" "$jain" \
			"$(awk -v r="$rtx" 'BEGIN { printf "%.1f%%", r / 10 }')" "$failed" "$mem"
	done
	printf '%s\n' "====  ====  ===  =======  ==========  =====  =======  ========  ============"
}

[ -n "$(rows)" ] || die "no results (see $out/vm0.log)"
tbl=$(table)
printf '%s\n' "$tbl"
{
	cat <<-EOF
		.. This file is written by qemu/bench-incast.sh (make bench-incast).

		Incast: many senders to one receiver
		====================================

		N senders, each an rxud device on a veth in a network namespace of
		its own, send 16 KB SENDs (16 at a time each, 8 s) to one receiver
		behind a router namespace whose link to the receiver is a
		${RATE} Mbit/s token bucket with a RED queue that marks ECN-capable
		packets Congestion Experienced (tests/guest/27-incast.sh, run with
		RXUD_INCAST_ALL=1). XUD: every sender an XUD QP, all to one XUD QP.
		RC: every sender an RC QP connected to an RC QP of its own at the
		receiver, all of those on one shared receive queue. Each with rxud's
		congestion control on (``cc=1``, the default: ECN marking, CNPs, the
		window law of Documentation/xud.rst, "Congestion control") and off.

		Measured at the receiver over 4 s after 2 s of warm-up: goodput (the
		SENDs' payload, in kbit/s and as a share of the payload the link can
		carry at the packets' mean size on it), Jain's fairness index of the
		senders' shares (1 is equal shares), the share of the senders'
		packets that were retransmissions (over the whole run), SENDs that
		completed with an error, and the kernel memory (unreclaimable slab
		and vmalloc) the receiver's setup and run took: its QPs, rings, CQ
		and per-peer state (a kB-granular difference of /proc/meminfo, so
		a few pages of noise). Issue 29's bar with control on at N = 32:
		goodput at least 90% of the bottleneck, Jain at least 0.9, resent
		under 5%.

		Run of ${rev} on the bench kernel, one VM (TCG, 1 vCPU, 2 GiB),
		one boot, ${total_s} s in all.

	EOF
	printf '%s\n\n' "$tbl"
	cat <<-EOF
		rxe is not in the table: it has no XUD, and it neither marks ECN nor
		answers CNPs, so its RC incast is at best rxud's with cc off.
	EOF
} >"$doc"
log "bench-incast: written to $doc (run: $out)"
