#!/bin/bash
# Captures the ICRC test vectors (see ../README). Runs in both VMs of
#   qemu/vm.sh --pair --out DIR -- bash DIR/guest.sh
# with this file and sniff.py copied into DIR (the guests can write only
# there): rxe on the inter-VM link, perftest traffic from VM 0 (client)
# to VM 1 (server), every RoCEv2 frame seen by either VM written to
# $RXUD_OUT/frames.txt.
set -x
D=${RXUD_OUT%/vm*}
modprobe rdma_rxe || exit 1
rdma link add rxe0 type rxe netdev "$RXUD_IF" || exit 1
PEER_DIR=$D/vm$((1 - RXUD_VM))
barrier() {
	touch "$RXUD_OUT/barrier.$1"
	for _ in $(seq 1200); do [ -e "$PEER_DIR/barrier.$1" ] && return 0; sleep 0.1; done
	echo "barrier $1 timed out"
	return 1
}
for _ in $(seq 60); do ping -c1 -W1 "$RXUD_PEER_IP" >/dev/null && break; done
# gid_index PATTERN: the first RoCE v2 GID of rxe0 matching PATTERN.
gid_index() {
	local f i
	for f in /sys/class/infiniband/rxe0/ports/1/gids/*; do
		i=${f##*/}
		case "$(cat "$f" 2>/dev/null)" in $1) ;; *) continue ;; esac
		[ "$(cat "/sys/class/infiniband/rxe0/ports/1/gid_attrs/types/$i" 2>/dev/null)" = "RoCE v2" ] && { echo "$i"; return 0; }
	done
	return 1
}
sleep 3
G4=$(gid_index '0000:0000:0000:0000:0000:ffff:*')
G6=$(gid_index 'fe80:*')
echo "G4=$G4 G6=$G6"
/usr/bin/python3 "$D/sniff.py" "$RXUD_IF" "$RXUD_OUT/frames.txt" "$RXUD_OUT/stop" &
SNIFF=$!
sleep 1
n=0
# run NAME GID_INDEX PERFTEST_COMMAND...: server in VM 1, client in VM 0.
run() {
	local name=$1 gid=$2
	shift 2
	n=$((n + 1))
	if [ "$RXUD_VM" = 1 ]; then
		timeout 120 "$@" -d rxe0 -x "$gid" -p $((18515 + n)) >"$RXUD_OUT/$name.log" 2>&1 &
		local srv=$!
		sleep 2
		barrier "srv$n"
		wait $srv
		echo "$name server rc=$?"
	else
		barrier "srv$n"
		timeout 120 "$@" -d rxe0 -x "$gid" -p $((18515 + n)) "$RXUD_PEER_IP" >"$RXUD_OUT/$name.log" 2>&1
		echo "$name client rc=$?"
	fi
	barrier "done$n"
	sleep 1
}
run send_rc "$G4" ib_send_bw -c RC -s 64 -n 5
run send_ud "$G4" ib_send_bw -c UD -s 64 -n 5
run send_uc "$G4" ib_send_bw -c UC -s 64 -n 5
run write_rc "$G4" ib_write_bw -c RC -s 64 -n 5
run read_rc "$G4" ib_read_bw -c RC -s 64 -n 5
run send_rc_multi "$G4" ib_send_bw -c RC -s 2500 -m 1024 -n 5
run read_rc_multi "$G4" ib_read_bw -c RC -s 2500 -m 1024 -n 5
run atomic_faa "$G4" ib_atomic_bw -A FETCH_AND_ADD -n 5
run atomic_cas "$G4" ib_atomic_bw -A CMP_AND_SWAP -n 5
run send_ud_pad "$G4" ib_send_bw -c UD -s 61 -n 5
run write_rc_pad "$G4" ib_write_bw -c RC -s 63 -n 5
run read_rc_pad "$G4" ib_read_bw -c RC -s 1029 -m 1024 -n 5
run write_uc_multi "$G4" ib_write_bw -c UC -s 2050 -m 1024 -n 5
if [ -n "$G6" ]; then
	run send_rc_v6 "$G6" ib_send_bw -c RC -s 64 -n 5
	run send_ud_v6 "$G6" ib_send_bw -c UD -s 64 -n 5
	run send_rc_pad_v6 "$G6" ib_send_bw -c RC -s 62 -n 5
fi
touch "$RXUD_OUT/stop"
wait $SNIFF
wc -l "$RXUD_OUT/frames.txt"
rdma link delete rxe0
exit 0
