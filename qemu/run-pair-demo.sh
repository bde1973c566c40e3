#!/usr/bin/env bash
# The main job (`make run`): boot two VMs joined by one virtio-net link,
# load rxud in both, create rxud0 on the link, show it to ib_core's and
# libibverbs' tools and send traffic across (qemu/demo-guest.sh): IP, then
# RDMA over rxud between the VMs (UD and RC ping-pongs, ib_write_bw, rping
# over rdma_cm, XUD bandwidth and latency with rxud-perf).
set -euo pipefail
. "$(dirname "$0")/lib.sh"
exec "$RXUD_TOP/qemu/vm.sh" --pair --timeout 600 -v -- "$RXUD_TOP/qemu/demo-guest.sh"
