#!/usr/bin/env bash
# The main job (`make run`): boot two VMs joined by one virtio-net link,
# load rxud in both, create rxud0 on the link, show it to ib_core's and
# libibverbs' tools and send traffic across (qemu/demo-guest.sh): IP, then
# RDMA over rxud between the VMs (UD and RC ping-pongs, ib_write_bw, rping
# over rdma_cm, XUD bandwidth and latency with rxud-perf).
#
#   qemu/run-pair-demo.sh [--tests]
#
# --tests (make check, tests/run.sh): each VM first runs the two-VM test
# suite (tests/guest-pair) in the same boot, its TAP in
# $RXUD_DEMO_OUT/vmN/tap.txt, and keeps its whole kernel log in
# $RXUD_DEMO_OUT/vmN/dmesg.txt (one boot of the pair instead of two).
# RXUD_DEMO_OUT: the VMs' output directory (default: a new one).
set -euo pipefail
. "$(dirname "$0")/lib.sh"
case "${1:-}" in
"" | --tests) ;;
*) die "usage: $0 [--tests]" ;;
esac
exec "$RXUD_TOP/qemu/vm.sh" --pair --timeout 600 ${RXUD_DEMO_OUT:+--out "$RXUD_DEMO_OUT"} -v -- \
	"$RXUD_TOP/qemu/demo-guest.sh" "$@"
