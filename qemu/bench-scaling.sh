# shellcheck shell=bash
# Sourced by qemu/bench.sh --scaling once the VMs are done (or with
# --report): the scaling table from each boot's results
# ($out/cpusN/vm1/bench.tsv, qemu/scaling-guest.sh), printed and written,
# with the run's facts, to Documentation/scaling.rst (its hand-written
# section, from "What it shows" on, is kept). Uses bench.sh's out, rev,
# doc_suffix, link_note, kernel_note, load0, load1, total_s, kernel_s,
# build_s, MID_AWK and RST_AWK.

scaling_doc=$RXUD_TOP/Documentation/scaling$doc_suffix.rst
scaling_tsv=$out/scaling.tsv
# Every boot's lines, each with its vCPUs first.
: >"$scaling_tsv"
for d in "$out"/cpus*; do
	[ -s "$d/vm1/bench.tsv" ] || continue
	awk -v c="${d##*/cpus}" -F'\t' '{ print c "\t" $0 }' "$d/vm1/bench.tsv" >>"$scaling_tsv"
done
[ -s "$scaling_tsv" ] || die "no results (see $out/cpus*/vm0.log, $out/cpus*/vm1.log)"

# scaling_table: one row per vCPU count and QP count: the medians of the
# rounds of rxe's RC, rxud's RC and rxud's XUD (one XUD QP to that many
# peers); rxud/rxe and XUD/rxe are the medians of each round's ratio
# ("per round" lists rxud RC's).
scaling_table() {
	sort -t$'\t' -k1,1n -k4,4n "$scaling_tsv" | awk -F'\t' "$MID_AWK$RST_AWK"'
	function median(prov, key,   m, r, a) {
		m = 0
		for (r = 1; r <= rounds; r++)
			if ((prov, key, r) in v) a[++m] = v[prov, key, r] + 0
		return m ? sprintf("%.2f", mid(a, m)) : ""
	}
	# Each round'\''s ratio of PROV over rxe: the median, or the list.
	function ratio(prov, key, list,   m, r, q, per) {
		m = 0; per = ""
		for (r = 1; r <= rounds; r++)
			if ((prov, key, r) in v && ("rxe", key, r) in v && v["rxe", key, r] > 0) {
				q[++m] = v[prov, key, r] / v["rxe", key, r]
				per = per (per == "" ? "" : " ") sprintf("%.2f", q[m])
			}
		if (list) return m ? per : "-"
		return m ? sprintf("%.2f", mid(q, m)) : "-"
	}
	function cell_of(x) { return x == "" ? "-" : x }
	$2 == "tcp" { tcp[$1] = $5; next }
	{ key = $1 "\t" $4; if (!(key in seen)) { seen[key] = 1; order[++n] = key }
	  if ($5 != "" && $5 != "-") v[$2, key, $7] = $5
	  if ($7 > rounds) rounds = $7 }
	END {
		rows = 0
		split("vCPUs|QPs (XUD peers)|rxe RC|rxud RC|rxud/rxe|per round|rxud XUD|XUD/rxe", h, "|")
		for (c = 1; c <= 8; c++) cell[1, c] = h[c]
		rows = 1
		for (i = 1; i <= n; i++) {
			k = order[i]; split(k, f, "\t"); rows++
			cell[rows, 1] = f[1]; cell[rows, 2] = f[2]
			cell[rows, 3] = cell_of(median("rxe", k)); cell[rows, 4] = cell_of(median("rxud", k))
			cell[rows, 5] = ratio("rxud", k, 0); cell[rows, 6] = ratio("rxud", k, 1)
			cell[rows, 7] = cell_of(median("xud", k)); cell[rows, 8] = ratio("xud", k, 0)
		}
		rst_table(rows, 8)
		print ""
		for (c = 1; c <= 64; c++)
			if (c in tcp) t = t (t == "" ? "" : "; ") tcp[c] " MB/s with " c " vCPU" (c > 1 ? "s" : "")
		print "One iperf3 TCP stream over the same link, in the same boot: " t "."
	}'
}

# scaling_failures: each run without a figure, with the errors its client
# printed (perftest: "Failed status N", N the ibv_wc_status of the first
# failed completion it polled).
scaling_failures() {
	local c prov q r name f why first=1
	awk -F'\t' '$2 != "tcp" && ($5 == "-" || $5 == "") { print $1, $2, $4, $7 }' "$scaling_tsv" |
		while read -r c prov q r; do
			name=$prov-$r-q$q
			f=$out/cpus$c/vm1/$name-again.client
			[ -f "$f" ] || f=$out/cpus$c/vm1/$name.client
			why=$(grep -o -E 'Completion with error at [a-z]+|Failed status [0-9]+|Unable to [a-z /_]*|Couldn.t [a-z /_]*' \
				"$f" 2>/dev/null | awk '!s[$0]++' | paste -sd ';' | sed 's/;/; /g')
			[ -z "$first" ] || echo
			first=
			echo "- no figure: $prov, $q QPs, $c vCPU$([ "$c" -gt 1 ] && echo s), round $r: ${why:-the client printed no error}"
		done
}

scaling_table >"$out/bench-scaling.txt"
scaling_failures >>"$out/bench-scaling.txt"
cat "$out/bench-scaling.txt"
scaling_rounds=$(awk -F'\t' '$7 > r { r = $7 } END { print r + 0 }' "$scaling_tsv")
scaling_reruns=$({ grep -l '^yes$' "$out"/cpus*/vm1/again-* 2>/dev/null || true; } |
	sed 's/.*again-//' | tr '\n' ' ' | sed 's/ $//')
scaling_kept=$(sed -n '/^What it shows$/,$p' "$scaling_doc" 2>/dev/null || true)
[ -n "$scaling_kept" ] || scaling_kept=$'What it shows\n=============\n\nNot written yet.'
cat >"$scaling_doc" <<EOF
.. SPDX-License-Identifier: GPL-2.0

=============
rxud: scaling
=============

.. Written by \`\`make bench-scaling\`\` (qemu/bench.sh --scaling) down to
   "What it shows"; that section is written by hand, and later runs keep it.

Issue 10's scaling runs: aggregate bandwidth of 64 KB RDMA WRITEs over
1, 4, 16 and 64 QPs, rxe's RC beside rxud's RC (\`\`ib_write_bw -q N\`\`,
perftest's defaults otherwise: 128 WRs in flight per QP, 6 s of which the
middle 4 s are measured) and rxud's XUD (tests/verbs/rxud-perf: one XUD
QP in vm1 writing $(sed -n 's/^XUD_MSGS=//p' "$RXUD_TOP/qemu/scaling-guest.sh") messages round robin to N XUD QPs in vm0,
64 in flight), between two VMs on one virtio-net link
($link_note; qemu/scaling-guest.sh). The pair boots once with 1 vCPU per VM and once
with 2; $scaling_rounds rounds in each boot, the providers in turn (rxe
first in odd rounds, rxud first in even ones). MB/s (2^20 bytes), the
median of the rounds; rxud/rxe and XUD/rxe the median of each round's
ratio, "per round" rxud RC's ratio in each round.

- sources: $rev
- host: $(uname -srm), $(nproc) CPUs ($(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -n1)); the
  two VMs' vCPUs are TCG threads on these (4 vCPU threads on $(nproc) CPUs
  in the 2-vCPU boot)
- kernel: $(cat "$out"/cpus1/vm1/uname 2>/dev/null || echo unknown), the bench flavour, $kernel_note
- host load (1-minute average) as the first boot started and as the last
  ended: $load0 and $load1
- runs run once more because perftest measured no CPU clock rate
  (qemu/bench-guest.sh, \`\`again\`\`): ${scaling_reruns:-none}
- this run: $((total_s / 60)) min $((total_s % 60)) s (kernel $kernel_s s, builds $build_s s)

$(cat "$out/bench-scaling.txt")

$scaling_kept
EOF
log "bench: scaling table written to $scaling_doc; all output in $out"
