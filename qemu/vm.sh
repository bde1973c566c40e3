#!/usr/bin/env bash
# Boots test VMs with virtme-ng over the cached test kernel and runs a
# command in each.
#
#   qemu/vm.sh [options] -- CMD...              one VM
#   qemu/vm.sh [options] --pair -- CMD...       two VMs joined by one
#                                               virtio-net link
#
# The host's root filesystem is shared read-only over 9p; OUTDIR is
# writable from the guests. In each guest, CMD runs as root in the current
# directory with RXUD_VM (0 or 1), RXUD_PEER_IP, RXUD_SELF_IP and
# RXUD_OUT (=OUTDIR/vmN) set. The guests' network link is addressed
# 169.254.77.1/16 (VM 0) and 169.254.77.2/16 (VM 1).
#
# Output of VM N goes to OUTDIR/vmN.log (and to the terminal with -v), its
# kernel console (boot messages, oopses, panics: everything a guest that
# dies before or without its command's output can still say) to
# OUTDIR/vmN.console, over a virtio console of its own (hvc0). Exit
# status: 0 if CMD exited 0 in every VM; 124 if a VM timed out; else the
# first non-zero status. No QEMU process outlives this script: on exit,
# timeout or Ctrl-C every VM's process group is killed.
#
# Options:
#   --pair           boot two VMs
#   --timeout SEC    per-run limit (default 600)
#   --out DIR        output directory (default: a new one under /tmp)
#   --mem MB         memory per VM (default 1024)
#   --cpus N         vCPUs per VM (default 1)
#   --append ARGS    extra kernel command line (e.g. kmemleak=on)
#   --kvm            use KVM (default: TCG; KVM does not work on every host)
#   --link KIND      socket (default): each VM's virtio-net frames go to the
#                    other's QEMU over a UDP socket on loopback, with no
#                    virtio-net header, so a guest offers no offloads and
#                    segments everything before its device; tap: each VM
#                    gets a tap device with virtio-net headers (vnet_hdr)
#                    and a host bridge joins the two, so TCP's TSO frames
#                    of up to 64 KB cross whole (QEMU 7.2's virtio-net has
#                    no UDP segmentation offload: UDP is still cut to the
#                    MTU in the guest); needs root and /dev/net/tun; the
#                    taps and the bridge go when the run ends
#   -v               copy guest output to the terminal
set -euo pipefail
. "$(dirname "$0")/lib.sh"

pair=0 timeout=600 out="" mem=1024 cpus=1 kvm=0 verbose=0 append="" link=socket
while [ $# -gt 0 ]; do
	case "$1" in
	--pair) pair=1 ;;
	--timeout) timeout=$2; shift ;;
	--out) out=$2; shift ;;
	--mem) mem=$2; shift ;;
	--cpus) cpus=$2; shift ;;
	--append) append=$2; shift ;;
	--kvm) kvm=1 ;;
	--link) link=$2; shift ;;
	-v) verbose=1 ;;
	--) shift; break ;;
	*) die "unknown option $1 (see the header of $0)" ;;
	esac
	shift
done
[ $# -gt 0 ] || die "no command given"
need_kernel
need_vng
out=${out:-$(mktemp -d /tmp/rxud-vm.XXXXXX)}
mkdir -p "$out"
out=$(cd "$out" && pwd)

nvms=$((pair + 1))
# Two UDP ports on loopback per pair carry the link; derive them from our
# PID so concurrent runs do not collide.
base=$((20000 + ($$ % 2000) * 2))
pids=()

# The tap link's host devices, named after the ports (IFNAMSIZ: 15).
bridge=rxud${base}br taps=()
cleanup() {
	local pid tap
	for pid in "${pids[@]}"; do
		kill -TERM -- "-$pid" 2>/dev/null || true
	done
	sleep 1
	for pid in "${pids[@]}"; do
		kill -KILL -- "-$pid" 2>/dev/null || true
	done
	for tap in "${taps[@]}"; do
		ip link del "$tap" 2>/dev/null || true
	done
	[ "$link" != tap ] || ip link del "$bridge" 2>/dev/null || true
}
trap cleanup EXIT
trap 'exit 130' INT TERM

case $link in
socket) ;;
tap)
	[ -w /dev/net/tun ] || die "--link tap needs /dev/net/tun"
	# STP off and no forwarding delay: the bridge forwards at once.
	ip link add name "$bridge" type bridge stp_state 0 forward_delay 0 ||
		die "--link tap: cannot make a bridge (needs root, CAP_NET_ADMIN)"
	for i in $(seq 0 $((nvms - 1))); do
		taps+=("rxud${base}t$i")
		ip tuntap add dev "${taps[i]}" mode tap vnet_hdr
		ip link set "${taps[i]}" master "$bridge" up
	done
	ip link set "$bridge" up
	;;
*) die "--link: socket or tap, not $link" ;;
esac

# The guest command: set the environment, bring up the link, run CMD.
cmd=$(printf '%q ' "$@")
for i in $(seq 0 $((nvms - 1))); do
	self_ip=169.254.77.$((i + 1))
	peer_ip=169.254.77.$((2 - i))
	mkdir -p "$out/vm$i"
	# RXUD_KDIR: the booted kernel's tree, whose kselftest runner and
	# ktap_helpers.sh the tests use (tests/lib/ksft.mk, tests/lib/tap.sh).
	# The guest command goes in a file, not on the kernel command line
	# (vng's virtme.exec=): x86's holds 2,048 bytes and cuts the rest,
	# init= included, so a long command (a suite's list of tests under a
	# long path) booted a guest that ran nothing and said nothing.
	{
		printf 'export RXUD_VM=%s RXUD_SELF_IP=%s RXUD_PEER_IP=%s RXUD_OUT=%q RXUD_KDIR=%q\n' \
			"$i" "$self_ip" "$peer_ip" "$out/vm$i" "$KDIR"
		printf '. %q\n' "$RXUD_TOP/qemu/guest-net.sh"
		printf 'cd %q && %s\n' "$PWD" "$cmd"
		printf 'echo $? > %q\n' "$out/vm$i/exit-status"
	} >"$out/vm$i/guest.sh"
	guest="bash $(printf '%q' "$out/vm$i/guest.sh")"
	# Every VM gets the virtio-net NIC; a single VM's has no one at the
	# other end (its frames go to a loopback port nobody reads).
	self_port=$((base + i)) peer_port=$((base + 1 - i))
	if [ "$link" = tap ]; then
		netdev="tap,id=s0,ifname=${taps[i]},script=no,downscript=no,vnet_hdr=on"
	else
		netdev="socket,id=s0,udp=127.0.0.1:$peer_port,localaddr=127.0.0.1:$self_port"
	fi
	opts=(--qemu-opts="-netdev $netdev -device virtio-net-pci,netdev=s0,mac=52:54:00:77:00:0$((i + 1))")
	accel=(--disable-kvm)
	[ $kvm -eq 1 ] && accel=()
	# vng boots "quiet loglevel=1" with its serial console sent nowhere;
	# the 8250 driver serves one console only, so the kernel's goes to
	# hvc0 instead, at full level (the later loglevel= wins).
	kopts=(--qemu-opts="-chardev file,id=kcon,path=$out/vm$i.console -device virtconsole,chardev=kcon")
	accel+=(--append "console=hvc0 loglevel=7${append:+ $append}")
	# Created here, not by the background job's redirection: `tail -f`
	# below must find it.
	: >"$out/vm$i.log"
	setsid vng --run "$KDIR" --user root --force-9p --disable-microvm "${accel[@]}" \
		-m "${mem}M" --cpus "$cpus" --rwdir "$out" "${opts[@]}" "${kopts[@]}" -- "$guest" \
		</dev/null >"$out/vm$i.log" 2>&1 &
	pids+=($!)
	if [ $verbose -eq 1 ]; then
		tail -n +1 -f "$out/vm$i.log" --pid=$! | sed -u "s/^/[vm$i] /" &
	fi
done

deadline=$(($(date +%s) + timeout))
rc=0
for i in "${!pids[@]}"; do
	pid=${pids[$i]}
	while kill -0 "$pid" 2>/dev/null; do
		if [ "$(date +%s)" -ge "$deadline" ]; then
			log "vm$i: timed out after ${timeout}s (log: $out/vm$i.log)"
			rc=124
			break 2
		fi
		sleep 1
	done
	wait "$pid" || true
done
cleanup
pids=()

if [ $rc -eq 0 ]; then
	for i in $(seq 0 $((nvms - 1))); do
		if [ ! -f "$out/vm$i/exit-status" ]; then
			log "vm$i: did not come back (log: $out/vm$i.log, kernel console: $out/vm$i.console)"
			[ $rc -ne 0 ] || rc=1
			continue
		fi
		s=$(cat "$out/vm$i/exit-status")
		[ "$s" = 0 ] || { log "vm$i: command exited $s (log: $out/vm$i.log)"; [ $rc -ne 0 ] || rc=$s; }
	done
fi
echo "$out" > "$out/.done"
exit $rc
