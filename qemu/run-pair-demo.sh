#!/usr/bin/env bash
# The main job: boot two VMs joined by one virtio-net link, load rxud in
# both, create rxud0 on the link, show what ib_core sees and send traffic
# across. (RDMA traffic over rxud arrives with the data path; until then
# the traffic is IP over the same link the RoCEv2 GIDs are on.)
set -euo pipefail
. "$(dirname "$0")/lib.sh"
exec "$RXUD_TOP/qemu/vm.sh" --pair --timeout 600 -v -- bash -c '
set -e
insmod '"$RXUD_TOP"'/rxud.ko
rdma link add rxud0 type rxud netdev "$RXUD_IF"
echo "== vm$RXUD_VM: rdma link / rdma dev"
rdma link show rxud0/1
rdma dev show rxud0
echo "== vm$RXUD_VM: RoCE v2 GIDs of rxud0"
for g in /sys/class/infiniband/rxud0/ports/1/gids/*; do
	v=$(cat "$g"); [ "$v" = 0000:0000:0000:0000:0000:0000:0000:0000 ] && continue
	echo "  GID[${g##*/}] $v $(cat /sys/class/infiniband/rxud0/ports/1/gid_attrs/types/${g##*/} 2>/dev/null)"
done
echo "== vm$RXUD_VM: traffic to $RXUD_PEER_IP"
for i in $(seq 60); do ping -c 1 -W 1 "$RXUD_PEER_IP" >/dev/null && break; done
ping -c 5 -i 0.2 "$RXUD_PEER_IP"
sleep 3
rdma link delete rxud0
rmmod rxud
echo "== vm$RXUD_VM: done"
'
