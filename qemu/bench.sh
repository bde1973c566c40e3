#!/usr/bin/env bash
# `make bench`: perftest over rxe and over rxud between two VMs on one
# virtio-net link, in the same run (qemu/bench-guest.sh), printed side by
# side with the ratio rxud/rxe (bandwidth: higher is better for rxud;
# latency: lower is better).
#   qemu/bench.sh [OUTDIR]
set -euo pipefail
. "$(dirname "$0")/lib.sh"
out=${1:-$RXUD_TOP/tests/out/bench-$(date +%Y%m%d-%H%M%S)}
mkdir -p "$out"
"$RXUD_TOP/qemu/vm.sh" --pair --timeout 1200 --out "$out" -- "$RXUD_TOP/qemu/bench-guest.sh" >/dev/null 2>&1 || true
tsv=$out/vm1/bench.tsv
[ -s "$tsv" ] || die "no results (see $out/vm0.log, $out/vm1.log)"
echo "perftest between two TCG VMs over virtio-net ($(uname -m) host, $(nproc) CPUs), the test kernel (lockdep on)"
awk -F'\t' '
	{ key = $2 "\t" $3; if (!(key in seen)) { seen[key] = 1; order[++n] = key; unit[key] = $5 }
	  val[$1, key] = $4 }
	END {
		printf "%-28s %9s %10s %10s %8s\n", "test", "size", "rxe", "rxud", "rxud/rxe"
		for (i = 1; i <= n; i++) {
			k = order[i]; split(k, f, "\t")
			a = val["rxe", k]; b = val["rxud", k]
			r = (a + 0 > 0 && b + 0 > 0) ? sprintf("%.2f", b / a) : "-"
			printf "%-28s %9s %7s %-2s %7s %-2s %8s\n", f[1], f[2], a, unit[k] == "us" ? "us" : "MB", b, unit[k] == "us" ? "us" : "MB", r
		}
	}' "$tsv" | tee "$out/bench.txt"
echo "results in $out"
