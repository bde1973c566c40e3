# Sourced in each guest by qemu/vm.sh: brings up the inter-VM link, if any,
# with the VM's link-local address. Sets RXUD_IF to its name.
# shellcheck shell=bash
RXUD_IF=
for d in /sys/class/net/*; do
	n=${d##*/}
	[ "$n" = lo ] && continue
	[ -e "$d/device" ] || continue
	RXUD_IF=$n
	break
done
export RXUD_IF
if [ -n "$RXUD_IF" ]; then
	ip link set "$RXUD_IF" up
	ip addr add "$RXUD_SELF_IP/16" dev "$RXUD_IF"
fi
ip link set lo up
