#!/usr/bin/env bash
# `make bench`: perftest over rxe and over rxud between two VMs on one
# virtio-net link, in the same run on the same kernel (qemu/bench-guest.sh),
# with iperf3 TCP over that link as its limit and the kernel memory of an
# RC QP. Prints the table and writes it, with the date and the machine, to
# Documentation/benchmarks.rst (the hand-written section from "What limits
# rxud" on is kept).
#
# The VMs boot the bench kernel (RXUD_FLAVOUR=bench: the test kernel without
# lockdep and the other debugging, see qemu/rxud-bench.config), built and
# cached on first use. rxud.ko, librxud and qp-mem are built against it in a
# copy of this tree's sources ($RXUD_CACHE/bench-src): this tree's rxud.ko
# stays built for the test kernel (make check), and the copy's objects stay
# built for the bench kernel, so neither build starts over each time.
#   qemu/bench.sh [OUTDIR]
#   RXUD_BENCH_REV=COMMIT qemu/bench.sh    measure that commit's sources, not
#                                          the working tree's (make bench
#                                          RXUD_BENCH_REV=HEAD does too)
#   qemu/bench.sh --report OUTDIR          write the tables and the document
#                                          again from a finished run's results
#   qemu/bench.sh --scaling [OUTDIR]       issue 10's scaling runs instead
#                                          (make bench-scaling): 1 to 64 QPs
#                                          and XUD peers on 1 and 2 vCPUs,
#                                          written to
#                                          Documentation/scaling.rst
#                                          (qemu/scaling-guest.sh,
#                                          qemu/bench-scaling.sh); with
#                                          --report as well, that report
set -euo pipefail
export RXUD_FLAVOUR=bench
. "$(dirname "$0")/lib.sh"
report= scaling=
if [ "${1:-}" = --scaling ]; then
	scaling=1
	shift
fi
if [ "${1:-}" = --report ]; then
	report=1
	out=${2:?usage: $0 --report OUTDIR}
	[ -f "$out/run.env" ] || die "$out has no run.env (not a finished run)"
else
	out=${1:-$RXUD_TOP/tests/out/bench${scaling:+-scaling}${RXUD_LINK:+-$RXUD_LINK}-$(date +%Y%m%d-%H%M%S)}
	mkdir -p "$out"
fi
out=$(cd "$out" && pwd)
# The VMs' link (qemu/vm.sh --link; make bench LINK=tap).
link=${RXUD_LINK:-socket}
case $link in
socket | tap) ;;
*) die "RXUD_LINK (make bench LINK=): socket or tap, not $link" ;;
esac
# vCPUs per VM of the scaling runs: the pair boots once per count.
SCALING_CPUS=(1 2)
t0=$SECONDS

if [ -z "$report" ]; then
	export KDIR
	KDIR=$(kernel_dir)
	kernel_note=cached
	[ -f "$KDIR/.rxud-built" ] || kernel_note="built by this run"
	"$RXUD_TOP/qemu/build-kernel.sh"
	kernel_s=$((SECONDS - t0))

	# The sources to measure: the working tree's (tracked and untracked, not
	# ignored), or with RXUD_BENCH_REV those of that commit; named now, as
	# they are taken (edits made while the VMs run are not measured).
	rev=$(sources_rev "${RXUD_BENCH_REV:-}" Documentation/benchmarks.rst)
	src=$RXUD_CACHE/bench-src
	copy_sources "$src" "${RXUD_BENCH_REV:-}"
	log "bench: building rxud.ko, librxud and qp-mem for $KDIR in $src (log: $out/build.log)"
	make -C "$src" KDIR="$KDIR" modules provider "$src/tests/verbs/qp-mem" "$src/tests/verbs/rxud-perf" \
		"$src/tests/verbs/xud-sink" "$src/tests/verbs/udp-lat" "$src/tests/xud-forge/target/release/xud-forge" >"$out/build.log" 2>&1 ||
		{ tail -n 30 "$out/build.log" >&2; die "build failed (log: $out/build.log)"; }
	build_s=$((SECONDS - t0 - kernel_s))

	load0=$(cut -d' ' -f1 /proc/loadavg)
	if [ -n "$scaling" ]; then
		for c in "${SCALING_CPUS[@]}"; do
			log "bench: scaling, two VMs of $c vCPUs (about 6 minutes; logs: $out/cpus$c/vm0.log, $out/cpus$c/vm1.log)"
			"$src/qemu/vm.sh" --pair --link "$link" --cpus "$c" --timeout 1800 --out "$out/cpus$c" -- "$src/qemu/scaling-guest.sh" \
				>/dev/null 2>&1 ||
				log "bench: the VMs of $c vCPUs did not both finish cleanly; rows without a figure show -"
		done
	else
		log "bench: two VMs, rxe and rxud in 3 rounds (about 4 minutes a round; logs: $out/vm0.log, $out/vm1.log)"
		"$src/qemu/vm.sh" --pair --link "$link" --timeout 2400 --out "$out" -- "$src/qemu/bench-guest.sh" >/dev/null 2>&1 ||
			log "bench: the VMs did not both finish cleanly (see $out/vm0.log, $out/vm1.log); rows without a figure show -"
	fi
	load1=$(cut -d' ' -f1 /proc/loadavg)
	total_s=$((SECONDS - t0))
	# What the report says of the run, for --report.
	declare -p rev kernel_note kernel_s build_s load0 load1 total_s scaling link >"$out/run.env"
fi
# shellcheck source=/dev/null
. "$out/run.env"
# What the document says of the link; a run over the tap link writes
# documents of their own (benchmarks-tap.rst, scaling-tap.rst), so that
# both links' stay.
doc_suffix=
case $link in
socket) link_note="qemu/vm.sh's socket link: frames between the QEMUs over a UDP socket, no virtio-net offloads" ;;
tap)
	link_note="qemu/vm.sh --link tap: a tap device per VM with virtio-net headers, joined by a host bridge; TCP's 64 KB TSO frames cross it whole, UDP datagrams (RoCE's) are still cut to the MTU in the guest: QEMU 7.2's virtio-net offers no UDP segmentation offload"
	doc_suffix=-tap
	;;
esac
doc=$RXUD_TOP/Documentation/benchmarks$doc_suffix.rst

# awk: the median of the M numbers in A (sorts A), for both tables.
MID_AWK='
function mid(a, m,   i, j, x) {
	for (i = 2; i <= m; i++)
		for (j = i; j > 1 && a[j - 1] > a[j]; j--) { x = a[j]; a[j] = a[j - 1]; a[j - 1] = x }
	return m % 2 ? a[(m + 1) / 2] : (a[m / 2] + a[m / 2 + 1]) / 2
}'
# awk, for the XUD and NVMe-oF tables: median(PROV, KEY), the median of
# PROV's figures for KEY over the rounds (v[PROV, KEY, ROUND]; "" without
# any), and size(S), a byte count in B, KB or MB.
ROUNDS_AWK='
function median(prov, key,   m, i, a) {
	m = 0
	for (i = 1; i <= 9; i++)
		if ((prov, key, i) in v) a[++m] = v[prov, key, i] + 0
	return m ? mid(a, m) : ""
}
function size(s) {
	if (s >= 1048576 && s % 1048576 == 0) return s / 1048576 " MB"
	if (s >= 1024 && s % 1024 == 0) return s / 1024 " KB"
	return s " B"
}'
# awk: prints cell[1..ROWS, 1..COLS] as an RST simple table, row 1 its
# header, columns as wide as their widest cell.
RST_AWK='
function rst_table(rows, cols,   r, c, j, w, s, rule, line) {
	for (r = 1; r <= rows; r++)
		for (c = 1; c <= cols; c++)
			if (length(cell[r, c]) > w[c]) w[c] = length(cell[r, c])
	rule = ""
	for (c = 1; c <= cols; c++) { s = ""; for (j = 0; j < w[c]; j++) s = s "="; rule = rule (c > 1 ? "  " : "") s }
	print rule
	for (r = 1; r <= rows; r++) {
		line = ""
		for (c = 1; c <= cols; c++) line = line (c > 1 ? "  " : "") sprintf("%-" w[c] "s", cell[r, c])
		sub(/ +$/, "", line); print line
		if (r == 1) print rule
	}
	print rule
}'

# The scaling runs have a report of their own.
if [ -n "$scaling" ]; then
	# shellcheck source=qemu/bench-scaling.sh
	. "$RXUD_TOP/qemu/bench-scaling.sh"
	exit 0
fi
tsv=$out/vm1/bench.tsv
[ -s "$tsv" ] || die "no results (see $out/vm0.log, $out/vm1.log)"

# The table, as an RST simple table. Sizes in B/KB/MB, memory in KiB; each
# figure is the median of its rounds. "per round" is rxud's figure over
# rxe's within each round, in round order, and rxud/rxe the median of those
# (rxud over rxe measured minutes apart in one round, so that the host's
# drift between rounds cancels out), or with one round its ratio
# (bandwidth: higher is better for rxud; latency, memory and system calls:
# lower); "% of the link" is rxud's median bandwidth over iperf3's, its
# median latency over udp-lat's.
table() {
	awk -F'\t' "$MID_AWK$RST_AWK"'
	function size(s) {
		if (s !~ /^[0-9]+$/) return s
		if (s >= 1048576 && s % 1048576 == 0) return s / 1048576 " MB"
		if (s >= 1024 && s % 1024 == 0) return s / 1024 " KB"
		return s " B"
	}
	function val(v, u) {
		if (v == "") return "-"
		if (u == "B") return sprintf("%.1f KiB", v / 1024)
		return v " " u
	}
	# The median of the figures of PROV for KEY ("" without any).
	function median(prov, key,   m, i, a) {
		m = 0
		for (i = 1; i <= rounds; i++)
			if ((prov, key, i) in v) a[++m] = v[prov, key, i] + 0
		if (m == 0) return ""
		return sprintf(unit[key] == "calls/WR" ? "%.3f" : (unit[key] == "B" || unit[key] == "op/s") ? "%.0f" : "%.2f", mid(a, m))
	}
	$1 == "tcp" { tcp = $4; next }
	$1 == "udp" { if ($4 != "-" && $4 != "") { udp[++nudp] = $4 + 0 }; next }
	$1 == "xud" || $1 == "step" || $1 == "budget" || $1 ~ /^nvme-/ { next }
	{ key = $2 "\t" $3; if (!(key in seen)) { seen[key] = 1; order[++n] = key; unit[key] = $5 }
	  if ($4 != "-" && $4 != "") v[$1, key, $6] = $4
	  if ($6 > rounds) rounds = $6 }
	END {
		rows = 0
		cell[++rows, 1] = "test"; cell[rows, 2] = "size"; cell[rows, 3] = "rxe"
		cell[rows, 4] = "rxud"; cell[rows, 5] = "rxud/rxe"; cell[rows, 6] = "per round"
		cell[rows, 7] = "rxud % of the link"
		cell[++rows, 1] = "iperf3 TCP (the link)"; cell[rows, 2] = "-"; cell[rows, 3] = "-"
		cell[rows, 4] = "-"; cell[rows, 5] = "-"; cell[rows, 6] = "-"; cell[rows, 7] = val(tcp, "MB/s")
		udpm = nudp ? sprintf("%.2f", mid(udp, nudp)) : ""
		cell[++rows, 1] = "udp-lat (the link)"; cell[rows, 2] = "2 B"; cell[rows, 3] = "-"
		cell[rows, 4] = "-"; cell[rows, 5] = "-"; cell[rows, 6] = "-"; cell[rows, 7] = val(udpm, "us")
		# Traffic first, then memory (unit B), then system calls.
		for (pass = 1; pass <= 3; pass++)
			for (i = 1; i <= n; i++) {
				k = order[i]
				if ((unit[k] == "B" ? 2 : unit[k] == "calls/WR" ? 3 : 1) != pass) continue
				split(k, f, "\t"); a = median("rxe", k); b = median("rxud", k)
				cell[++rows, 1] = f[1]; cell[rows, 2] = size(f[2])
				cell[rows, 3] = val(a, unit[k]); cell[rows, 4] = val(b, unit[k])
				per = ""; m = 0; delete q
				for (r = 1; r <= rounds; r++)
					if (("rxe", k, r) in v && ("rxud", k, r) in v && v["rxe", k, r] + 0 > 0) {
						q[++m] = v["rxud", k, r] / v["rxe", k, r]
						per = per (per == "" ? "" : " ") sprintf("%.2f", q[m])
					}
				cell[rows, 5] = m > 1 ? sprintf("%.2f", mid(q, m)) : (a + 0 > 0 && b != "") ? sprintf(pass == 3 ? "%.3f" : "%.2f", b / a) : "-"
				cell[rows, 6] = m > 1 ? per : "-"
				cell[rows, 7] = (unit[k] == "MB/s" && tcp + 0 > 0 && b + 0 > 0) ? sprintf("%.0f%%", 100 * b / tcp) : \
					(unit[k] == "us" && udpm + 0 > 0 && b + 0 > 0) ? sprintf("%.0f%%", 100 * b / (f[1] ~ /_(read|atomic)_lat/ ? 2 * udpm : udpm)) : "-"
			}
		rst_table(rows, 7)
	}' "$tsv"
}
# XUD's table: rxud-perf's figures (one XUD QP to one peer) beside the RC
# rows of the same operation and size (rxe's and rxud's medians), then the
# kernel memory per XUD peer beside rxud's per RC QP. Medians of the
# rounds; XUD/RC is XUD's median over rxud RC's (bandwidth: higher is
# better for XUD; latency and memory: lower).
xud_table() {
	awk -F'\t' "$MID_AWK$ROUNDS_AWK"'
	function fig(x, u) { return x == "" ? "-" : u == "B" ? sprintf("%.0f B", x) : sprintf("%.2f %s", x, u) }
	{ key = $2 "\t" $3; if ($4 != "-" && $4 != "") v[$1, key, $6] = $4; unit[key] = $5
	  if ($1 == "xud" && !(key in seen)) { seen[key] = 1; order[++n] = key } }
	$1 == "rxud" && $2 == "kernel memory per RC QP, total" { rcmem = $4 }
	END {
		printf "%-34s %-14s %-12s %-12s %-12s %-8s\n", "XUD (rxud-perf) beside RC", "size", "rxe RC", "rxud RC", "rxud XUD", "XUD/RC"
		for (i = 1; i <= n; i++) {
			k = order[i]; split(k, f, "\t")
			if (unit[k] == "B") continue
			# rxud-perf measures latency at 4 B, perftest at 2 B.
			rk = k; sz = size(f[2])
			if (f[1] ~ /_lat$/ && !(("rxud", rk, 1) in v)) { rk = f[1] "\t2"; sz = sz " (RC 2 B)" }
			x = median("xud", k); r = median("rxud", rk); e = median("rxe", rk)
			printf "%-34s %-14s %-12s %-12s %-12s %-8s\n", f[1], sz, fig(e, unit[k]), fig(r, unit[k]), fig(x, unit[k]), (x != "" && r + 0 > 0) ? sprintf("%.2f", x / r) : "-"
		}
		printf "\n%-42s %-8s %-12s %-12s\n", "kernel memory per XUD peer", "peers", "per peer", "rxud RC QP"
		for (i = 1; i <= n; i++) {
			k = order[i]; split(k, f, "\t")
			if (unit[k] != "B") continue
			printf "%-42s %-8s %-12s %-12s\n", f[1], f[2], fig(median("xud", k), "B"), fig(rcmem, "B")
		}
	}' "$tsv"
}
# NVMe-oF's table (qemu/bench-guest.sh, nvme_fio): fio's figure over
# nvme-tcp, over nvme-rdma on rxe and on rxud (the medians of the rounds),
# rxud over rxe within each round (its median, as the main table), and
# rxud over NVMe/TCP's median.
nvme_table() {
	awk -F'\t' "$MID_AWK$ROUNDS_AWK"'
	function fig(x, u) { return x == "" ? "-" : u == "IO/s" ? sprintf("%.0f %s", x, u) : sprintf("%.2f %s", x, u) }
	$1 !~ /^nvme-/ { next }
	{ key = $2 "\t" $3; if ($4 != "-" && $4 != "") v[$1, key, $6] = $4; unit[key] = $5
	  if (!(key in seen)) { seen[key] = 1; order[++n] = key } }
	END {
		printf "%-20s %-8s %-14s %-14s %-14s %-9s %-8s\n", "NVMe-oF (fio)", "size", "NVMe/TCP", "rxe", "rxud", "rxud/rxe", "rxud/TCP"
		for (i = 1; i <= n; i++) {
			k = order[i]; split(k, f, "\t")
			t = median("nvme-tcp", k); e = median("nvme-rxe", k); x = median("nvme-rxud", k)
			m = 0; delete q
			for (r = 1; r <= 9; r++)
				if (("nvme-rxe", k, r) in v && ("nvme-rxud", k, r) in v && v["nvme-rxe", k, r] + 0 > 0)
					q[++m] = v["nvme-rxud", k, r] / v["nvme-rxe", k, r]
			printf "%-20s %-8s %-14s %-14s %-14s %-9s %-8s\n", f[1], size(f[2]), fig(t, unit[k]), fig(e, unit[k]), fig(x, unit[k]),
				m ? sprintf("%.2f", mid(q, m)) : "-", (x != "" && t + 0 > 0) ? sprintf("%.2f", x / t) : "-"
		}
	}' "$tsv"
}
# Issue 10's steps (qemu/bench-guest.sh, steps): rxud's figure at each
# step (the median of its rounds), the step over the one before, and the
# last step over rxe's figure of the same test in the rounds above.
steps_table() {
	awk -F'\t' "$MID_AWK"'
	function median(key,   m, i, a) {
		m = 0
		for (i = 1; i <= 9; i++)
			if ((key, i) in v) a[++m] = v[key, i] + 0
		return m ? mid(a, m) : ""
	}
	function size(s) {
		if (s >= 1048576 && s % 1048576 == 0) return s / 1048576 " MB"
		if (s >= 1024 && s % 1024 == 0) return s / 1024 " KB"
		return s " B"
	}
	$1 == "rxe" && $4 != "-" && $4 != "" { e[$2 "\t" $3, $6] = $4 }
	$1 == "step" {
		split($2, f, "|"); k = f[1] "\t" $3
		if (!(k in seen)) { seen[k] = 1; order[++n] = k }
		if (!(f[2] in ls)) { ls[f[2]] = 1; lab[++nl] = f[2] }
		if ($4 != "-" && $4 != "") v[k "\t" f[2], $6] = $4
	}
	END {
		if (!n) exit
		hdr = sprintf("%-14s %-7s", "test", "size")
		for (j = 1; j <= nl; j++) hdr = hdr sprintf(" %-11s %-6s", lab[j], j > 1 ? "step" : "")
		print hdr sprintf(" %-11s %s", "rxe", "last/rxe")
		for (i = 1; i <= n; i++) {
			k = order[i]; split(k, f, "\t")
			line = sprintf("%-14s %-7s", f[1], size(f[2])); prev = ""
			for (j = 1; j <= nl; j++) {
				x = median(k "\t" lab[j])
				line = line sprintf(" %-11s %-6s", x == "" ? "-" : sprintf("%.2f", x),
					j == 1 ? "" : (x != "" && prev + 0 > 0) ? sprintf("%.2f", x / prev) : "-")
				prev = x
			}
			m = 0; delete a
			for (r = 1; r <= 9; r++) if ((k, r) in e) a[++m] = e[k, r] + 0
			r = m ? mid(a, m) : ""
			print line sprintf(" %-11s %s", r == "" ? "-" : sprintf("%.2f", r),
				(r + 0 > 0 && prev != "") ? sprintf("%.2f", prev / r) : "-")
		}
	}' "$tsv"
}
# The per-packet budget at each step (qemu/bench-guest.sh, budget): one
# row per figure, one column per step.
budget_table() {
	awk -F'\t' '
	$1 == "budget" {
		split($2, f, "|")
		if (!(f[2] in seen)) { seen[f[2]] = 1; order[++n] = f[2] }
		if (!(f[1] in ls)) { ls[f[1]] = 1; lab[++nl] = f[1] }
		v[f[2], f[1]] = $4; unit[f[2]] = $5
	}
	END {
		if (!n) exit
		hdr = sprintf("%-42s", "ib_write_bw 64 KB, timing on")
		for (j = 1; j <= nl; j++) hdr = hdr sprintf(" %-8s", lab[j])
		print hdr
		for (i = 1; i <= n; i++) {
			line = sprintf("%-42s", order[i] (unit[order[i]] == "ns" ? " (ns)" : ""))
			for (j = 1; j <= nl; j++) {
				x = v[order[i], lab[j]]
				line = line sprintf(" %-8s", x == "" || x == "-" ? "-" : x)
			}
			print line
		}
	}' "$tsv"
}
table >"$out/bench.txt"
xud_table >"$out/bench-xud.txt"
nvme_table >"$out/bench-nvme.txt"
steps_table >"$out/bench-steps.txt"
budget_table >"$out/bench-budget.txt"
cat "$out/bench.txt" "$out/bench-xud.txt" "$out/bench-steps.txt" "$out/bench-budget.txt"

cpu=$(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -n1)
guest=$(cat "$out/vm1/uname" 2>/dev/null || echo unknown)
read -r qps wrs <"$out/vm1/qp-mem.conf" || qps=? wrs=?
rounds=$(awk -F'\t' '$6 > r { r = $6 } END { print r + 0 }' "$tsv")
# Runs run once more because perftest could not measure the CPU clock
# (qemu/bench-guest.sh, again).
reruns=$({ grep -l '^yes$' "$out"/vm1/again-* 2>/dev/null || true; } | sed 's/.*again-//' | tr '\n' ' ' | sed 's/ $//')
# The hand-written part of the document, from its heading on.
kept=$(sed -n '/^What limits rxud$/,$p' "$doc" 2>/dev/null || true)
[ -n "$kept" ] || kept=$'What limits rxud\n================\n\nNot written yet.'
# Issue 10's steps, if the run has them.
steps_doc="This run has no figures of issue 10's steps."
if [ -s "$out/bench-steps.txt" ]; then
	steps_doc=$(cat <<STEPS
Issue 10's steps: rxud alone, after the rounds above, in one boot, its
batching switched on one step at a time with its module parameters in
both VMs (qemu/bench-guest.sh, \`\`steps\`\`): "landed" is the data path as
it landed (\`\`trains\`\` and \`\`gro\`\` off: every packet through IP alone
each way), "+GSO" adds trains on transmit, "+GRO" GRO trains on
receive. MB/s, the median of $(awk -F'\t' '$1 == "step" && $6 > r { r = $6 } END { print r + 0 }' "$tsv") rounds (the steps in reverse order
in even rounds); "step": over the step before; "last/rxe": the last
step over rxe's figure of the same test in the rounds above (rxe was
measured minutes earlier). ACK coalescing came with the data path and
has no switch, so no step of its own; completions published once per
run of a GRO train came with +GRO's step.

::

$(sed 's/^/    /' "$out/bench-steps.txt")
STEPS
	)
fi
if [ -s "$out/bench-budget.txt" ]; then
	steps_doc+=$(cat <<BUDGET


The per-packet budget at each step (issue 10): in the steps' first
round, after each step's rows, one more 64 KB \`\`ib_write_bw\`\` with rxud's
module parameter \`\`timing\`\` on, which adds up the nanoseconds of its
steps in hw_counters: vm0's receive path per datagram (from the port
taking it to the answers sent), and of that the ICRC check and the
transport (RC's protocol under the QP's lock, the answers it builds
and sends, the placement), and of the transport the payload's copy into
memory; vm1's packet building (skb, copy from the MR, ICRC) and the
call into IP per packet sent. "wall time per data packet": what one 1 KB packet had at the
run's rate, for scale (both ends also run perftest, which polls its CQ
on the same vCPU). The clock reads themselves cost a little: the timed
run's bandwidth is its own row.

::

$(sed 's/^/    /' "$out/bench-budget.txt")
BUDGET
	)
fi
cat >"$doc" <<EOF
.. SPDX-License-Identifier: GPL-2.0

================
rxud: benchmarks
================

.. Written by \`\`make bench\`\` (qemu/bench.sh) down to "What limits rxud";
   that section is written by hand, and later runs keep it.

\`\`make bench\`\` of $(date -u +%Y-%m-%d): two VMs joined by one virtio-net
link ($link_note), rxe and rxud on that link, same run, same kernel, in $rounds rounds
(rxe then rxud in odd rounds, rxud then rxe in even ones, so that a drift
of the host's load favours neither). vm0 serves, vm1 connects; the sizes
are those of qemu/bench-guest.sh, perftest's defaults otherwise (RC
unless said, one QP, 128 WRs in flight for bandwidth). Bandwidth and
atomics runs last 6 s each, of which perftest measures the middle 4 s
(\`\`-D 6 -f 1\`\`); latency runs are 300 iterations. In the \`\`-e\`\` rows
perftest waits for completions on a completion channel instead of
polling its CQ, so that a vCPU with nothing to do halts and leaves the
host's CPU to the link (Documentation/performance.rst, "The host's two
CPUs"); perftest takes \`\`-e\`\` for SEND only and only counting
iterations (1000 of 64 KB, 70 of 1 MB: its figure is over the whole
run). Bandwidth is
perftest's average in MB/s (2^20 bytes), atomics its message rate,
latency its typical figure; UD's bandwidth is the receiver's (a sender's
counts datagrams lost on the way). "netem loss" rows: netem on vm1's side
of the link drops that share of what vm1 sends, with GSO off on that
device, so that rxud sends no trains there even with its trains
parameter on (netem would drop a train whole; Documentation/design.rst,
"The per-packet path"). Each
figure is the median of the rounds. "per round": rxud's figure over rxe's
within each round, in round order (how far the noise goes); rxud/rxe: the
median of those (rxe and rxud measured minutes apart in the same round),
above 1 better for rxud in bandwidth, below 1 in latency, memory and
system calls. % of the link: rxud's median bandwidth over that of one
iperf3 TCP stream (5 s) over the same link, in the same run; for latency,
rxud's median over that of plain UDP sockets (udp-lat: tests/verbs/udp-lat,
one 2-byte datagram each way at a time, both ends polling as perftest
does, half the round trip, once a round; \`\`ib_read_lat\`\` reports a whole
round trip, so its figure is set against twice udp-lat's). System calls
per WR: \`\`write\`\`
calls on the uverbs file (where a post_send doorbell goes) that the client
made per work request, counted with strace in a run of its own after the
rounds (one WR per \`\`ibv_post_send\`\`, as perftest posts).

- sources: $rev
- host: $(uname -srm), $(nproc) CPUs ($cpu), $(awk '/^MemTotal:/ { printf "%.0f GiB", $2 / 1048576 }' /proc/meminfo)
- VMs: $(qemu-system-x86_64 --version | head -n1 | sed 's/ (.*//'), TCG (no KVM), 1 vCPU and 1 GiB each
- kernel: $guest, the bench flavour (qemu/rxud.config without lockdep,
  kmemleak and the other debugging: qemu/rxud-bench.config), $kernel_note
- kernel memory per RC QP: the growth of SUnreclaim (slab, large kmallocs
  included) and of VmallocUsed in vm1's /proc/meminfo while
  tests/verbs/qp-mem creates $qps RC QPs ($wrs send and $wrs receive WRs, one
  SGE each) and moves them to RTS, divided by $qps; the PD and the one CQ
  that all of them share exist before the first reading
- host load (1-minute average) as the VMs started and as they ended:
  $load0 and $load1 (the two VMs alone make about 2)
- runs run once more because perftest's client measured no CPU clock
  rate (\`\`Can't produce a report\`\`; qemu/bench-guest.sh, \`\`again\`\`):
  ${reruns:-none}
- this run: $((total_s / 60)) min $((total_s % 60)) s (kernel $kernel_s s, builds $build_s s, VMs $((total_s - kernel_s - build_s)) s)

$(cat "$out/bench.txt")

XUD (rxud only; Documentation/xud.rst): rxud-perf, one XUD QP to one peer,
beside the RC rows of the same operation and size (its latency at 4 B:
each message carries its number; a round trip there ends when both the
answer and the ACK of the message sent have come). Its server
spot-checks each SEND (the message number, the first and last 64 bytes:
rxud-perf -S), as perftest, beside it, checks nothing. Then the kernel
memory per XUD peer:
the growth of the slab objects in use (/proc/slabinfo) in vm1 while vm0
sends one forged RDMA WRITE from each of N source QPNs (tests/xud-forge)
to one XUD QP, over the peers made: "in use" right after, "idle" once the
streams have parked (qemu/bench-guest.sh, xud_mem); with vmalloc's growth
over the step, which peers do not use; beside rxud's per RC QP above.
"real peers" is the XUD paper's Table 4: vm0 makes N XUD QPs, vm1's one
QP sends one 64 B SEND to each and each answers with one (rxud-perf -t
mem), so each peer has a sending and a receiving state at vm1: vm1's
slab growth over N right after the exchange ("in use", streams that
parked within it included, xud-mem.log counts them) and once every
stream has parked ("at rest"; xud_real_peers).

::

$(sed 's/^/    /' "$out/bench-xud.txt")

NVMe over Fabrics (issue 28): fio in vm1 against one namespace of an
nvmet target in vm0 (a null_blk device: no data kept, so the transport
is what is measured), time-based, 6 s after a second's ramp, one
job, libaio, O_DIRECT; over nvme-rdma on rxe and on rxud in their
rounds, and over nvme-tcp (nvmet-tcp: what a user without RDMA picks) on
the same link in rxe's rounds (qemu/bench-guest.sh, \`\`nvme_fio\`\`).
Random reads in IO/s, sequential reads in MB/s (2^20), the medians of
the rounds; rxud/rxe is the median of the per-round ratios.

::

$(sed 's/^/    /' "$out/bench-nvme.txt")

$steps_doc

$kept
EOF
log "bench: table written to $doc; all output in $out; $total_s s in all"
