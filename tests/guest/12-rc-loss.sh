#!/usr/bin/env bash
# Two rxud devices in network namespaces of their own joined by a veth
# pair, first over a slow link, where packets queue below IP: the transmit
# budget stops the sender and the packets' destructors restart it. Then
# over a link that loses 5% of the packets one way (netem):
# ibv_rc_pingpong with validated data must still complete, the losses must
# show as retransmissions and as out-of-sequence packets not delivered.
. "$(dirname "$0")/../lib/tap.sh"
. "$(dirname "$0")/../lib/rxud.sh"
. "$(dirname "$0")/../lib/traffic.sh"
TAP_PLANNED=10
tap_begin $TAP_PLANNED
export RDMAV_DRIVERS=$RXUD_TOP/rdma-core-provider/build/librxud

SIP=169.254.212.1 # the server's address (rlv0, in rla)
CIP=169.254.212.2 # the client's (rlv1, in rlb)
CLI_OUT=/tmp/12-rc-loss.client
SRV_OUT=/tmp/12-rc-loss.server

rxud_load
# Trains on (the default, said here as the slow link below depends on
# them: it catches a train that gives its charge back short,
# tests/mutation.sh).
rxud_trains on
rxud_pair rla rlb rlv0 rlv1

# --- A slow link ---------------------------------------------------------
# netem lets 16 of the client's skbs out per 10 ms slot (16 packets,
# 1.6 MB/s, slower than a TCG guest's sender; or 16 of rxud's trains,
# design.rst "The per-packet path", whose first packet carries the whole
# train's charge) and keeps the rest queued (slots, unlike a delay, do
# not orphan the packets): they pile up below IP, the client's transmit
# budget (64 KiB) stops its sender, and only the destructors of the
# packets the slots let out wake it again. UC, whose sender no ACK ever
# wakes, stalls without them, or when a train gives back less than it
# took (the mutants of tests/mutation.sh).
# (Both runs here take 7 or 8 s; a sender that stalls waits out their 20
# s: the mutants of tests/mutation.sh.)
if inns rlb tc qdisc add dev rlv1 root netem slot 10ms 10ms packets 16 2>/dev/null; then
	w0=$(hwc rxud1 tx_budget_waits)
	PP_TIMEOUT=20 perf rla rxud0 rlb rxud1 ib_write_bw -c UC -s 65536 -n 50
	w=$(($(hwc rxud1 tx_budget_waits) - w0))
	inns rlb tc -s qdisc show dev rlv1 | tap_diag
	inns rlb tc qdisc del dev rlv1 root
	check "slow link: UC WRITE 64 KB x 50 completed" result 65536 50
	check "slow link: the sender waited for its budget (tx_budget_waits +$w)" test "$w" -gt 0
else
	tap_skip "slow link: UC WRITE" "no netem slots in this kernel"
	tap_skip "slow link: tx_budget_waits" "no netem slots in this kernel"
fi

# --- A lossy link ------------------------------------------------------
# netem drops 5% of what the server (rxud0) sends: its replies' packets
# and its ACKs of the client's messages. The client's last message is the
# one exchange RC cannot save: when the ACK of it is lost, the server has
# every completion it waits for, exits and destroys its QP, and the
# client's retries find no QP ("transport retry counter exceeded"), an
# ibv_rc_pingpong property, not a fault. The server, which is the side
# that checks the data, always finishes if lost packets are recovered:
# it has sent all 100 replies only if the client got every message
# through, and its QP stays until the client has acknowledged them all.
# GSO is off on rlv0 so that netem, standing for a lossy link, drops
# packets: with it on, rxud hands IP a reply's 8 packets as one train
# (design.rst, "The per-packet path"), which netem would drop whole, and a
# reply lost whole leaves no gap for a NAK. (13-data-integrity.sh leaves
# GSO on: its netem loses, duplicates and reorders whole trains.)
nm_why=$(modprobe sch_netem 2>&1)
inns rla ethtool -K rlv0 gso off
if nm_err=$(inns rla tc qdisc add dev rlv0 root netem loss 5% 2>&1); then
	seq0=$(($(hwc rxud0 rx_drop_sequence) + $(hwc rxud1 rx_drop_sequence)))
	re0=$(($(hwc rxud0 rc_retransmits) + $(hwc rxud1 rc_retransmits)))
	ns0=$(($(hwc rxud0 rc_naks_sent) + $(hwc rxud1 rc_naks_sent)))
	nr0=$(($(hwc rxud0 rc_naks_received) + $(hwc rxud1 rc_naks_received)))
	PP_TIMEOUT=20 pingpong rla rxud0 rlb rxud1 -s 8192 -n 100
	nm_stats=$(inns rla tc -s qdisc show dev rlv0)
	printf '%s\n' "$nm_stats" | tap_diag
	dropped=$(sed -n 's/.*(dropped \([0-9]*\),.*/\1/p' <<<"$nm_stats" | head -n 1)
	seq=$(($(hwc rxud0 rx_drop_sequence) + $(hwc rxud1 rx_drop_sequence) - seq0))
	re=$(($(hwc rxud0 rc_retransmits) + $(hwc rxud1 rc_retransmits) - re0))
	ns=$(($(hwc rxud0 rc_naks_sent) + $(hwc rxud1 rc_naks_sent) - ns0))
	nr=$(($(hwc rxud0 rc_naks_received) + $(hwc rxud1 rc_naks_received) - nr0))
	inns rla tc qdisc del dev rlv0 root
	check "5% loss: the server ran 100 exchanges of 8 KB and found the data -c expects" srv_done 100
	check "5% loss: the client finished too, or lost only its last ACK (retry counter exceeded)" \
		grep -qE '^100 iters in |transport retry counter exceeded' "$CLI_OUT"
	check "netem dropped packets of the run (${dropped:-none})" test "${dropped:-0}" -gt 0
	check "out-of-sequence and duplicate packets seen and not delivered (rx_drop_sequence +$seq)" test "$seq" -gt 0
	check "lost packets were sent again (rc_retransmits +$re)" test "$re" -gt 0
	check "gaps were NAKed and the NAKs taken (rc_naks_sent +$ns, rc_naks_received +$nr)" \
		test "$ns" -gt 0 -a "$nr" -gt 0 -a "$nr" -le "$ns"
else
	why="no netem qdisc in this kernel: ${nm_err//$'\n'/ }${nm_why:+ (modprobe sch_netem: ${nm_why//$'\n'/ })}"
	tap_skip "5% loss: ibv_rc_pingpong server" "$why"
	tap_skip "5% loss: ibv_rc_pingpong client" "$why"
	tap_skip "5% loss: netem dropped packets" "$why"
	tap_skip "5% loss: rx_drop_sequence" "$why"
	tap_skip "5% loss: rc_retransmits" "$why"
	tap_skip "5% loss: rc_naks_sent and rc_naks_received" "$why"
fi

inns rla rdma link delete rxud0
inns rlb rdma link delete rxud1
ip netns del rla
ip netns del rlb
check "no rxud device left" test "$(ib_count)" = 0
check "rmmod rxud" rxud_unload
tap_end
