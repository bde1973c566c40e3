#!/usr/bin/env bash
# Verbs only kernel ULPs reach: DMA MRs (every kernel PD has one) and
# fast-registration MRs with ib_map_mr_sg, kernel RC QPs moving data
# (SEND, inline SEND with immediate, REG_MR, RDMA WRITE and READ through a
# fast-registered rkey, SEND with invalidate, LOCAL_INV, remote access error
# on an invalidated key, flush in the error state), driven by
# tests/kmod/rxud_ktest on rxud0 and on rxe0 (the reference), which must
# agree; and the verbs
# ib_core allows in atomic context, called from it (AHs with interrupts off
# and in softirq, ib_map_mr_sg in softirq, req_notify_cq in hard irq) on a
# lockdep kernel: the runner fails on any lockdep or sleep-in-atomic report;
# last, on rxud0 only, an XUD QP made as a kernel consumer makes it
# (IB_QPT_DRIVER with the driver-reserved creation flag) through RTS, with
# a SEND, RDMA WRITEs (struct rxud_xud_rdma_wr, rust/ffi/rxud_kernel.h)
# with and without immediate, and one with a wrong rkey; then, on rxud0
# only, QPs driven entirely from completion handlers that re-arm, poll and
# post to the same QP (krping-style): RC, UD and XUD ping-pongs, an RC QP
# flushing while its handler posts more, an RC SEND failed by the
# retransmit timer. A handler called under one of rxud's locks would
# deadlock there; the module's handlers look for one (lockdep's held
# locks) and fail the check naming it instead of freezing the guest.
# rxe runs without the atomic-context checks (atomic=0): its object pools
# share one lockdep class, so an AH made in softirq after a PD made in
# process context draws a lockdep report from rxe itself; nor the handler
# checks (handlers=0): rxe (6.12) calls a CQ's handler under the CQ's
# lock, which its poll_cq takes.
. "$(dirname "$0")/../lib/tap.sh"
. "$(dirname "$0")/../lib/rxud.sh"
IF=${RXUD_IF:?no test NIC}
KTEST=$RXUD_TOP/tests/kmod/rxud_ktest.ko
TAP_PLANNED=10
tap_begin $TAP_PLANNED

# ktest DEV: the module's TAP lines for DEV, without the prefix. The log
# is not cleared: the runner checks all of it for kernel bugs afterwards.
ktest() {
	local before
	before=$(dmesg | wc -l)
	insmod "$KTEST" dev="$1" "${@:2}" && rmmod rxud_ktest
	dmesg | tail -n +$((before + 1)) | sed -n 's/.*rxud_ktest: //p'
}

rxud_load
rxud_beside_rxe
count() { rdma resource show | sed -n "s/.* rxud0: .*\\b$1 \\([0-9]*\\).*/\\1/p"; }
# ib_core's MAD layer keeps a PD (and its QP1, CQ) on every kernel-verbs
# device: what the test module leaves must be what was there before.
baseline="pd $(count pd) mr $(count mr)"
out_rxud=$(ktest rxud0)
out_rxe=$(ktest rxe0 atomic=0 xud=0 handlers=0)
counts="pd $(count pd) mr $(count mr)"
printf '%s\n' "rxud_ktest dev=rxud0:" "$out_rxud" | tap_diag
check "ktest ran on rxud0" grep -q '^1\.\.' <<<"$out_rxud"
check_eq "every kernel-verbs check passes on rxud0" "" "$(grep '^not ok' <<<"$out_rxud")"
# Where the reference is wrong: rxe does not enforce its own
# max_fast_reg_page_list_len (it allocates whatever is asked), and its
# REG_MR does not hold the length to the pages mapped (rxe_reg_fast_mr),
# so the local failure checks' REG_MR succeeds there; nor does its
# LOCAL_INV check the MR's PD against the QP's (rxe_invalidate_mr).
RXE_BUG='ib_alloc_mr above max_fast_reg_page_list_len\|local failure: \|LOCAL_INV of another PD'
check_eq "every kernel-verbs check passes on rxe0 (the reference), but its known bug" \
	"" "$(grep '^not ok' <<<"$out_rxe" | grep -v "$RXE_BUG")"
strip() { sed -E 's/ \([^)]*\)$//; s/rx(e|ud)0/DEV/g' <<<"$1" | grep -E '^(not )?ok' | grep -v "$RXE_BUG"; }
check "the atomic-context checks ran on rxud0 (hard irq included)" grep -q 'ib_req_notify_cq in hard irq' <<<"$out_rxud"
check "the XUD checks ran on rxud0" grep -q '^ok .*ib_destroy_qp of the XUD QP' <<<"$out_rxud"
check "the completion-handler checks ran on rxud0" grep -q 'handlers, XUD: ' <<<"$out_rxud"
# The checks both ran come first; rxud's atomic-context ones follow.
n_rxe=$(strip "$out_rxe" | wc -l)
check_eq "rxud and rxe give the same results" "$(strip "$out_rxe")" "$(strip "$out_rxud" | head -n "$n_rxe")"
rxud_beside_rxe_end
check_eq "the kernel PDs and MRs are all released (back to ib_mad's: $baseline)" "$baseline" "$counts"
check "ib_mad holds a PD on rxud0 (the device is a kernel-verbs provider)" test "${baseline#pd }" != "0 mr 0"
check "rmmod rxud after kernel verbs" rxud_unload
tap_end
