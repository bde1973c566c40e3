#!/usr/bin/env bash
# Tests of the tests: builds rxud with deliberate bugs and checks that the
# in-VM tests catch each one. A suite that passes against a broken module
# is itself broken.
#
# Each mutant: a name, a file under rust/, text to replace and its
# replacement, the test to run (with kmemleak on if the pattern is its
# report), and a pattern that must
# appear in that run's results (its TAP output, kmemleak's report or the
# kernel log). Mutants share a boot per lane (tests/mutant-lane.sh), two
# lanes side by side; the second boots with kmemleak on and runs the
# kmemleak mutants first, each scanned for leaks of its own.
#
#   tests/mutation.sh              build and run every mutant
#   tests/mutation.sh build DIR    only build them into DIR (make
#                                  check-mutants: then run DIR)
#   tests/mutation.sh run DIR      run and judge the mutants built in DIR
set -uo pipefail
TOP=$(cd "$(dirname "$0")/.." && pwd)
. "$TOP/qemu/lib.sh"
need_kernel

mode=${1:-all}
case "$mode" in
all)
	work=$(mktemp -d /tmp/rxud-mutant.XXXXXX)
	trap 'rm -rf "$work"' EXIT
	;;
build | run) work=${2:?usage: $0 [build DIR | run DIR]} ;;
*) die "usage: $0 [build DIR | run DIR]" ;;
esac
mkdir -p "$work"
failed=0

# Mutants are built two at a time (a module build is mostly one rustc
# process), then run two at a time: each VM has one vCPU and the machine
# two cores.
BUILD_JOBS=2
names=() tests=() wants=()
# Mutants whose builds have been started: name, test, pattern.
building=()

# mutant NAME FILE FROM TO TEST WANT: starts the mutant's build (at most
# BUILD_JOBS at once; finish_builds waits for them); runs later. TEST
# `build`: the build must fail, with WANT in its log. TEST `host`: a
# mutant of the protocol core (FILE under proto/): its host tests
# (cargo test) must fail, with WANT in their output; nothing to boot.
# FILE under rust/, or rdma-core-provider/rdmc/ (the RDMC library, a
# user-space mutant: rxud-mcast is built with it, and TEST runs against
# the unmutated module with RXUD_MCAST naming that build).
mutant() {
	local name=$1 file=$2 from=$3 to=$4 test=$5 want=$6 src
	src=$work/$name
	mkdir -p "$src"
	if [[ $file == rdma-core-provider/rdmc/* ]]; then
		user_mutant "$@"
		return
	fi
	cp -r "$TOP/Kbuild" "$TOP/rust" "$src/"
	rm -rf "$src"/rust/*/target
	# Sources only: objects built in the work tree must not leak in.
	find "$src" \( -name '*.o' -o -name '.*.cmd' -o -name '*.d' -o -name bindings_generated.rs \) -delete
	if ! grep -qF -- "$from" "$src/rust/$file"; then
		echo "not ok - mutant $name: mutation site gone from rust/$file"
		failed=1
		return
	fi
	FROM=$from TO=$to perl -pi -e 's/\Q$ENV{FROM}\E/$ENV{TO}/' "$src/rust/$file"
	while [ "$(jobs -rp | wc -l)" -ge "$BUILD_JOBS" ]; do
		wait -n
	done
	(
		rc=0
		if [ "$test" = host ]; then
			# Its own target directory: cargo would take another
			# copy's build of the same package for this one.
			CARGO_TARGET_DIR=$src/host-target cargo test --release \
				--manifest-path "$src/rust/proto/Cargo.toml" >"$src/build.log" 2>&1 || rc=$?
		else
			make -s -C "$KDIR" M="$src" "${KMAKE_FLAGS[@]}" modules >"$src/build.log" 2>&1 || rc=$?
		fi
		echo "$rc" >"$src/build.rc"
	) &
	building+=("$name"$'\t'"$test"$'\t'"$want")
}

# user_mutant ARGS...: mutant's user-space half (see mutant): the RDMC
# library's directory copied, FILE's copy mutated, rxud-mcast built from
# this tree's source with it, against this tree's librxud.
user_mutant() {
	local name=$1 file=$2 from=$3 to=$4 test=$5 want=$6 src=$work/$1
	cp -r "$TOP/rdma-core-provider/rdmc" "$src/rdmc"
	if ! grep -qF -- "$from" "$src/rdmc/${file##*/}"; then
		echo "not ok - mutant $name: mutation site gone from $file"
		failed=1
		return
	fi
	FROM=$from TO=$to perl -pi -e 's/\Q$ENV{FROM}\E/$ENV{TO}/' "$src/rdmc/${file##*/}"
	(
		rc=0
		cc -O2 -g -Wall -Wextra -I"$TOP/rdma-core-provider/include" -I"$src/rdmc" \
			-o "$src/rxud-mcast" "$TOP/tests/verbs/rxud-mcast.c" "$src/rdmc/rdmc.c" "$src/rdmc/blake2s.c" -libverbs \
			-L"$TOP/rdma-core-provider/build" -l:librxud-rdmav34.so \
			-Wl,-rpath,"$TOP/rdma-core-provider/build" >"$src/build.log" 2>&1 || rc=$?
		echo "$rc" >"$src/build.rc"
	) &
	building+=("$name"$'\t'"$test"$'\t'"$want")
}

# finish_builds: waits for the builds mutant started; the mutants that
# built are the ones to run, in the order they were declared.
finish_builds() {
	local line name test want
	wait
	for line in "${building[@]}"; do
		IFS=$'\t' read -r name test want <<<"$line"
		if [ "$test" = host ]; then
			# The protocol core's own tests are the judge.
			if [ "$(cat "$work/$name/build.rc" 2>/dev/null)" != 0 ] &&
				grep -qE -- "$want" "$work/$name/build.log"; then
				echo "ok - mutant $name is caught by the host tests"
			else
				grep -E 'test result|error' "$work/$name/build.log" | tail -n 5
				echo "not ok - mutant $name survived the host tests (looked for: $want)"
				failed=1
			fi
			continue
		fi
		if [ "$test" = build ]; then
			# A mutant the build itself must refuse, with `want` in
			# its log: nothing to run.
			if [ "$(cat "$work/$name/build.rc" 2>/dev/null)" != 0 ] &&
				grep -qE -- "$want" "$work/$name/build.log"; then
				echo "ok - mutant $name is refused by the build"
			else
				tail -n 20 "$work/$name/build.log"
				echo "not ok - mutant $name builds (looked for: $want)"
				failed=1
			fi
			continue
		fi
		if [ "$(cat "$work/$name/build.rc" 2>/dev/null)" != 0 ]; then
			tail -n 20 "$work/$name/build.log"
			echo "not ok - mutant $name does not build"
			failed=1
			continue
		fi
		names+=("$name") tests+=("$test") wants+=("$want")
		printf '%s\t%s\t%s\n' "$name" "$test" "$want" >>"$work/mutants.tsv"
	done
}

# The mutants of the second lane besides the kmemleak ones: chosen so that
# both lanes end together (the kmemleak lane pays for kmemleak's scans).
# In CI of effd4e0 the lanes took 273 s and 172 s; train-charge-one and
# xud-qpn-not-held (some 50 s of tests) moved here after it, and two of
# the four 21-xud-bounds mutants (45 to 90 s each) came here, with one of
# 20-addresses'. Issue 27 took the mutants from 23 to 40: the first lane
# ran past its old 600 s limit (some 650 s of tests before its last
# seven), so three 18- and 20- mutants moved here and the limit is 1500 s.
LANE_B=" cq-handler-under-qp-lock invalidate-noop mr-key-outlives-dereg mr-memo-key-unchecked xud-park-forgets xud-streams-merge train-charge-one xud-qpn-not-held xud-claims-unbounded xud-unproven-claims-kept vlan-tx-untagged xud-cookie-age-unchecked xud-window-cookie-unchecked xud-v6-answer-address "

# The mutants that need lockdep on: each runs first in its lane, and one
# per lane (the first's report turns lockdep off for the rest).
LOCKDEP=" plain-spinlocks cq-handler-under-qp-lock "

# The mutants whose use after free may crash the kernel rather than warn:
# each runs last in its lane, so that a crash loses no other mutant's run,
# and a crash in the lane's console while it ran catches it (judge); the
# lane powers off once its test is done (tests/mutant-lane.sh). In
# check-mutants of 84d3196 ring-outlives-context, then fifth in its lane,
# panicked the guest ("Fatal exception in interrupt") and the lane's 24
# mutants after it never ran; in CI's of 3f1a4d7, last, its use after
# free hung the guest silently until the lane's timeout (1,500 s).
CRASHERS=" ring-outlives-context "

# is_leak I: whether mutant I is caught by kmemleak.
is_leak() { case ${wants[$1]} in *unreferenced*) return 0 ;; *) return 1 ;; esac; }

# lane_of I: the lane mutant I runs in.
lane_of() {
	if is_leak "$1"; then
		echo lane-b
		return
	fi
	case $LANE_B in *" ${names[$1]} "*) echo lane-b ;; *) echo lane ;; esac
}

# A mutant's results: its directory in its lane's VM.
result_dir() { echo "$work/$(lane_of "$1")/vm0/${names[$1]}"; }

# run_lane LANE [VM.SH OPTIONS]: the lane's mutants in one boot
# (tests/mutant-lane.sh). The lockdep one first (LOCKDEP): lockdep turns itself
# off after its first report, and after any oops (taint), which an
# earlier mutant may cause (ring-outlives-context's use after free did,
# and plain-spinlocks, run after it, went unreported). Then the
# kmemleak ones, each scanned (a leak must be its own: the lane clears
# kmemleak's findings before each, and scans after it); then the rest.
run_lane() {
	local lane=$1 i line locks=() leaks=() last=()
	shift
	: >"$work/$lane.tsv"
	for i in "${!names[@]}"; do
		[ "$(lane_of "$i")" = "$lane" ] || continue
		line=$(printf '%s\t%s\t%s' "${names[$i]}" "$work/${names[$i]}/rxud.ko" "$TOP/${tests[$i]}")
		# A user-space mutant: this tree's module, its own tool.
		[ ! -x "$work/${names[$i]}/rxud-mcast" ] ||
			line=$(printf '%s\t%s\t%s\t-\tRXUD_MCAST=%s' "${names[$i]}" "$TOP/rxud.ko" \
				"$TOP/${tests[$i]}" "$work/${names[$i]}/rxud-mcast")
		if is_leak "$i"; then
			leaks+=("$line"$'\tscan')
			continue
		fi
		case " $LOCKDEP $CRASHERS " in
		*" ${names[$i]} "*)
			case $CRASHERS in
			*" ${names[$i]} "*) last+=("$line"$'\tcrash') ;;
			*) locks+=("$line") ;;
			esac ;;
		*) echo "$line" >>"$work/$lane.tsv" ;;
		esac
	done
	{
		[ ${#locks[@]} -eq 0 ] || printf '%s\n' "${locks[@]}"
		[ ${#leaks[@]} -eq 0 ] || printf '%s\n' "${leaks[@]}"
		cat "$work/$lane.tsv"
		[ ${#last[@]} -eq 0 ] || printf '%s\n' "${last[@]}"
	} >"$work/$lane.list"
	[ -s "$work/$lane.list" ] || return 0
	"$TOP/qemu/vm.sh" "$@" --timeout 1500 --out "$work/$lane" -- \
		"$TOP/tests/mutant-lane.sh" "$work/$lane.list" >"$work/$lane.log" 2>&1
}

judge() {
	local name=${names[$1]} out
	out=$(result_dir "$1")
	local console=$work/$(lane_of "$1")/vm0.console
	# A crasher runs last in its lane: an oops or panic in the lane's
	# console after its start (tests/mutant-lane.sh marks it) is its own.
	# Its TAP stream may stop short: the test ran until the kernel died.
	if [[ $CRASHERS == *" $name "* ]] && ! grep -qsE -- "${wants[$1]}" "$out/tap.txt" &&
		sed -n "/rxud-mutant: $name\$/,\$p" "$console" 2>/dev/null |
		grep -qE 'Oops|Kernel panic|BUG: '; then
		echo "ok - mutant $name is caught: the kernel crashed running $(basename "${tests[$1]}") (its lane's console)"
		return
	fi
	if [ ! -s "$out/tap.txt" ]; then
		echo "not ok - mutant $name was not run: no results in $out (see $work/$(lane_of "$1").log)"
		failed=1
		return
	fi
	if grep -qsE -- "${wants[$1]}" "$out"/tap.txt "$out"/kmemleak.txt "$out"/dmesg.txt; then
		echo "ok - mutant $name is caught by $(basename "${tests[$1]}")"
	else
		echo "not ok - mutant $name survived $(basename "${tests[$1]}") (looked for: ${wants[$1]})"
		# A survivor the kernel could not have reported: say so.
		grep -qs 'debug_locks: *0' "$out/lockdep.txt" &&
			echo "# lockdep was already off when $name started (an earlier report or taint)"
		cp -r "$out" "/tmp/rxud-mutant-$name-$$"
		failed=1
	fi
}

build_all() {
	: >"$work/mutants.tsv"
	# newlink stops refusing non-Ethernet netdevs: `netdev lo` succeeds.
	mutant allow-non-ethernet driver/registry.rs \
		'if !ndev.is_ethernet() || ndev.is_vlan() {' 'if ndev.is_vlan() {' \
		tests/guest/02-link-errors.sh '^# not ok [0-9]+ - loopback \(not Ethernet\)'

	# An `unsafe` block in the driver floor: rust/driver.rs's
	# #![forbid(unsafe_code)] must make the build fail, so the safe floor
	# cannot erode unnoticed (no test needed: the compiler is the test).
	mutant driver-unsafe-refused driver/pd.rs \
		'    pub(crate) fn id(&self) -> u32 {' \
		'    pub(crate) fn id(&self) -> u32 { unsafe {}' \
		build 'usage of an `unsafe` block'

	# Every PD leaks a reference to its device's object counter.
	mutant leak-pd-counter driver/counter.rs \
		'Ok(Counted(self.clone()))' '{ core::mem::forget(self.clone()); Ok(Counted(self.clone())) }' \
		tests/guest/05-verbs.sh 'unreferenced object'

	# modify_qp stops consulting the IB state machine.
	mutant any-qp-transition driver/qp.rs \
		'        if !valid {' '        if false {' \
		tests/guest/05-verbs.sh 'not ok [0-9]+ - RC QP RESET->RTS is illegal'

	# Ring memory is never freed once the kernel and its mmap entry are
	# done with it.
	mutant leak-ring-memory ib/mmap.rs \
		'unsafe { bindings::vfree(self.ptr.as_ptr().cast()) };' '' \
		tests/guest/05-verbs.sh 'unreferenced object'

	# A QP's destroy leaves its send ring in the user context: a packet
	# that outlives the destroy keeps it there past the context's freeing.
	mutant ring-outlives-context driver/qp.rs \
		'drop(self.core.sq.ring().unmap());' '' \
		tests/guest/24-device-removal.sh 'not ok [0-9]+ - no kernel warning as its context is freed'

	# Interrupt-safe locks become plain spinlocks: the CQ lock, taken in
	# process context with interrupts on and by req_notify_cq in hard irq, is
	# then a deadlock that lockdep reports.
	mutant plain-spinlocks kext/sync.rs \
		'pub(crate) type SpinLockIrq<T> = Lock<T, SpinLockIrqBackend>;' \
		'pub(crate) type SpinLockIrq<T> = kernel::sync::SpinLock<T>;' \
		tests/guest/06-kernel-verbs.sh 'inconsistent lock state'
	# A completion written while its CQ is held publishes and calls the
	# CQ's handler at once again: under the QP's lock, which a handler that
	# posts to its QP takes again (rxud_ktest's handlers name the lock
	# rather than deadlock, while lockdep tracks locks: the lane runs this
	# one first, in lane B, as plain-spinlocks' report turns lockdep off
	# in lane A).
	mutant cq-handler-under-qp-lock driver/cq.rs \
		'            if self.holds.load(Ordering::SeqCst) > 0 {' '            if false {' \
		tests/guest/06-kernel-verbs.sh 'not ok [0-9]+ - handlers, RC: .*under an rxud lock: rxud:qp_rc'

	# --- RC error semantics (issue 27) ---
	# A local failure takes effect at once: the WQEs before it complete
	# with success unacknowledged (the RC model's invariant).
	mutant rc-local-failure-unordered proto/rc/requester.rs \
		'        self.local_error_due();' '        self.enter_error(wqe.0, status);' \
		host 'lost_send_before_a_local_failure_is_resent.*FAILED|success without an acknowledgement'

	# IBV_SEND_FENCE accepted and ignored again.
	mutant rc-fence-ignored proto/rc/requester.rs \
		'if fresh && w.fence && self.rd_atomic_out > 0 {' 'if fresh && w.fence && false {' \
		host 'a_fenced_request_waits_for_earlier_reads_and_atomics.*FAILED'

	# --- RDMC over XUD (issue 29) ---
	# A member's failure is no longer reported to the application: the
	# survivors of a killed member go on as if nothing happened.
	mutant rdmc-failure-unreported rdma-core-provider/rdmc/rdmc.c \
		'	push_event(g->ctx, g, EV_FAILED, r, 0);' '	(void)push_event;' \
		tests/guest/28-rdmc.sh '^# not ok [0-9]+ - member [0-9]+ killed'

	# A member no longer checks its copy against the root's digest: the
	# object a hostile relay altered is taken (and the tool finds it BAD).
	mutant rdmc-digest-unchecked rdma-core-provider/rdmc/rdmc.c \
		'	if (memcmp(d, g->digest, sizeof(d))) {' '	if (0 && memcmp(d, g->digest, sizeof(d))) {' \
		tests/guest/28-rdmc.sh '^# not ok [0-9]+ - a hostile relay'

	# --- Congestion control (issue 29) ---
	# A CNP no longer cuts the window (the law's reaction gone).
	mutant cnp-cuts-nothing proto/congestion/mod.rs \
		'        self.cwnd = (self.cwnd - self.share()).max(self.min);' \
		'        self.cwnd = self.cwnd.max(self.min);' \
		host 'the_first_cnp_halves_and_a_round_cuts_once.*FAILED'

	# The tail probe ignores the measured round trip: on a queued path it
	# resends what is on its way (incast resent a quarter of its packets).
	mutant xud-tail-probe-ignores-rtt proto/xud/sender.rs \
		'(self.reorder_delay() * 4).max(self.srtt().saturating_mul(2))' \
		'self.reorder_delay() * 4' \
		host 'the_tail_probe_and_the_timeout_wait_for_the_measured_round_trip.*FAILED'

	# The tail probe no longer backs off until a round trip is measured:
	# on a path that got slower it resends the timed packet every round,
	# no sample is taken, and 32 streams through one queue resent over
	# half their packets (issue 29's incast).
	mutant xud-tail-probe-never-backs-off proto/xud/sender.rs \
		'        self.rtt.backed_off(delay, 0)' \
		'        delay' \
		host 'a_timeout_backs_off_until_a_round_trip_is_measured.*FAILED'

	# A stream's backed-off timeout may again leave a destination without
	# a packet for longer than half the receiver's hold of an unproven
	# source's receives (one of 32 incast senders then failed REM_INV_REQ).
	mutant xud-silence-unbounded proto/xud/sender.rs \
		'let rto = now.saturating_add(wait.min(self.max_silence()));' \
		'let rto = now.saturating_add(wait);' \
		host 'a_silent_destination_hears_from_the_stream_at_least_every_max_silence.*FAILED'

	# RC's timeout no longer backs off after a timeout: a path slower than
	# the QP's timeout times out and goes back N at every round, never
	# measures its round trip, and fails the QP (RC's incast at N = 32).
	mutant rc-timeout-never-backs-off proto/rc/requester.rs \
		'pub const MAX_TIMEOUT_BACKOFF: u8 = 2;' 'pub const MAX_TIMEOUT_BACKOFF: u8 = 0;' \
		host 'a_path_slower_than_the_timeout_gets_a_longer_one.*FAILED'

	# A stalled stream may park, and forgets its destination's stall: a
	# dead peer's stream, parked between its failures, comes back with a
	# fresh one's share of the send queue (21-xud-bounds' unstalled peer).
	mutant xud-park-forgets-stall proto/xud/sender.rs \
		'        let at_rest = !self.stalled' '        let at_rest = true' \
		host 'an_unanswered_destination_holds_two_messages_and_timeouts_stall_it.*FAILED'

	# The QP entering error clears the NAK of the fatal request that put
	# it there: the peer retries until RETRY_EXC_ERR.
	mutant rc-fatal-nak-dropped driver/rc.rs \
		'    if !st.receiver.resp.is_error() {' '    if true {' \
		tests/mutant-tests/rc-errors.sh 'not ok [0-9]+ - invalid request: A.s READ to B'

	# A responder's fatal error leaves the rest of the QP running.
	mutant rc-responder-error-not-qp-wide driver/rc/responder.rs \
		'            fail(qp, st, Some(event));' '            let _ = event;' \
		tests/mutant-tests/rc-errors.sh 'not ok [0-9]+ - WRITE with a wrong rkey: B.s posted receive is flushed'

	# The message whose receive completion the CQ could not take is
	# acknowledged anyway.
	mutant rc-ack-without-completion driver/rc/responder.rs \
		'                && finish_recv(qp, st, p, plan.kind, plan.offset + plan.len).is_err()' \
		'                && finish_recv(qp, st, p, plan.kind, plan.offset + plan.len).is_err() && false' \
		tests/mutant-tests/rc-errors.sh 'not ok [0-9]+ - CQ overflow: A.s SEND whose completion B lost'

	# Received packets are no longer checked against their ICRC.
	mutant no-icrc-check driver/rx.rs \
		'if icrc.finish() == u32::from_le_bytes(trailer) {' 'if true {' \
		tests/guest/07-transport.sh 'not ok [0-9]+ - the one with a bad ICRC is dropped'

	# Datagrams rxud drops are no longer counted (hw_counters): the soak
	# cannot tell that the crafted packets reached rxud and were refused.
	mutant rx-drops-uncounted driver/rx.rs \
		'self.counters.add(why, 1);' 'let _ = why;' \
		tests/guest/22-soak.sh 'not ok [0-9]+ - rxud0 dropped and counted'

	# Sent packets go out without their ICRC: peers (rxud and rxe) drop them.
	mutant no-icrc-fill driver/tx.rs \
		'if icrc::icrc_fill_with(datagram, crate::net::crc32_le).is_err() {' 'if false {' \
		tests/guest/08-ud.sh 'not ok [0-9]+ - ibv_ud_pingpong between two rxud devices'

	# RC never arms its retransmit timer: a lost packet that no later one
	# reveals (the last of a burst, an ACK) is never resent.
	mutant rc-no-retransmit-timer driver/rc.rs \
		'crate::kext::timer::Timer::arm(qp, d.saturating_sub(t));' 'let _ = d;' \
		tests/guest/12-rc-loss.sh 'not ok [0-9]+ - 5% loss'

	# Packets' destructors stop waking a sender stopped by its transmit
	# budget: a UC sender (no ACK wakes it either) stalls on a slow link.
	mutant flight-no-wake driver/flight.rs \
		'BhWork::queue(this);' 'let _ = this;' \
		tests/guest/12-rc-loss.sh 'not ok [0-9]+ - slow link: UC WRITE'

	# A train's first packet gives back its own charge on the transmit
	# budget, not the train's: the budget leaks with every train and a UC
	# sender (no ACK wakes it) stalls for good.
	mutant train-charge-one net/skb.rs \
		'charge.packets += n as u32;' 'charge.packets += 0;' \
		tests/guest/12-rc-loss.sh 'not ok [0-9]+ - slow link: UC WRITE'

	# A GRO train's first datagram keeps a wrong UDP length when it is cut
	# loose (rust/ffi/gro.c): its ICRC no longer matches, each train's
	# first datagram is dropped as corrupt and the run over GRO stalls.
	mutant gro-head-length ffi/gro.c \
		'udp_hdr(skb)->len = htons(skb->len);' 'udp_hdr(skb)->len = htons(skb->len + 1);' \
		tests/guest/13-data-integrity.sh 'not ok [0-9]+ - data-test, 200 random operations between rxud0 and rxud1 with GRO trains'

	# A train's datagrams never take the QP the one before them found
	# (rust/driver/rx.rs, qp_for): each looks its QP up again, as before
	# session 16, which no data check can tell; rx_qp_reused does.
	mutant rx-qp-never-reused driver/rx.rs \
		'is_some_and(|h| h.qp().qpn() == qpn)' 'is_some_and(|h| h.qp().qpn() == qpn && false)' \
		tests/guest/13-data-integrity.sh 'not ok [0-9]+ - datagrams of a train took the QP found for the one before them'

	# A train's datagrams never take the MR a datagram before them found
	# (rust/driver/mr.rs, MrMemo::get): each looks its MR up again, as
	# before session 19, which no data check can tell; rx_mr_reused does.
	mutant mr-memo-never-reused driver/mr.rs \
		'mr.index() == key >> 8 && mr.named_by(key))' 'mr.index() == key >> 8 && mr.named_by(key) && false)' \
		tests/guest/13-data-integrity.sh 'not ok [0-9]+ - datagrams of a train took the MR the one before them found'

	# The MR memo hands out the last MR whatever key is asked for: the
	# IETH key of a SEND with invalidate then finds the receive buffer's
	# MR, which cannot be invalidated.
	mutant mr-memo-key-unchecked driver/mr.rs \
		'is_some_and(|mr| mr.index() == key >> 8 && mr.named_by(key))' 'is_some()' \
		tests/guest/06-kernel-verbs.sh 'not ok [0-9]+ - SEND with invalidate completes'

	# Remote access through a memory window's rkey no longer checks the
	# window's rights: a window bound without REMOTE_WRITE lets the peer
	# write (pyverbs' test_qp_ex_rc_bind_mw expects REM_ACCESS_ERR).
	mutant mw-rights-unchecked driver/mr.rs \
		'b.qpn.is_some_and(|q| q != qpn) || !b.access.contains(rights) {' \
		'b.qpn.is_some_and(|q| q != qpn) {' \
		tests/mutant-tests/memory-windows.sh 'not ok [0-9]+ - pyverbs test_qpex.QpExTestCase.test_qp_ex_rc_bind_mw on rxud0'

	# A FLUSH no longer asks its key for the FLUSH right: an MR registered
	# without IBV_ACCESS_FLUSH_GLOBAL answers it with success.
	mutant flush-rights-unchecked driver/rc/responder.rs \
		'remote_mr(qp, st, mrs, plan.rkey, plan.va, plan.len as usize, rights)?;' \
		'remote_mr(qp, st, mrs, plan.rkey, plan.va, plan.len as usize, AccessFlags::EMPTY)?;' \
		tests/guest/15-extended-verbs.sh 'not ok [0-9]+ - flush-test on rxud0'

	# An RC WRITE's RETH range is checked packet by packet only: one that
	# runs past its MR writes its first packets before it fails.
	mutant write-range-per-packet driver/rc/responder.rs \
		'            if plan.position.starts_message() && plan.write_len() > plan.len {' \
		'            if plan.position.starts_message() && plan.write_len() > plan.len && false {' \
		tests/guest/06-kernel-verbs.sh 'not ok [0-9]+ - bad input: an RDMA WRITE of 2 pages through a 1-page MR'

	# An SRQ resize moves the count of waiting receives but not the WQEs
	# themselves: SENDs after it land in zeroed slots (wrong wr_ids).
	mutant srq-resize-drops-waiting driver/ring.rs \
		'        for i in 0..pending {' '        for i in 0..0 {' \
		tests/guest/11-rc-semantics.sh 'not ok [0-9]+ - rc-test, two QPs of rxud0'

	# A kernel consumer's XUD WRITE gets a wrong rkey on the way into the send
	# ring (struct rxud_xud_rdma_wr read wrong): the WRITE is refused and
	# the data never lands.
	mutant xud-kernel-write-no-rkey driver/post.rs \
		'SendOp::Write(r) | SendOp::WriteImm(r, _) => (r.rkey, r.addr),' \
		'SendOp::Write(r) | SendOp::WriteImm(r, _) => (!r.rkey, r.addr),' \
		tests/guest/06-kernel-verbs.sh 'not ok [0-9]+ - an RDMA WRITE of [0-9]+ bytes \(struct rxud_xud_rdma_wr\)'

	# The RC receive path never skips its pass over the QP after a request
	# that owes nothing (as before session 19): every test of data still
	# passes; rc_passes_skipped tells.
	mutant rc-pass-never-skipped driver/rc.rs \
		'    if pass_due {' '    if pass_due || true {' \
		tests/guest/10-rc.sh 'not ok [0-9]+ - rc_passes_skipped'

	# The RC responder stops checking the rights of the MR (or window) an
	# rkey names.
	mutant rc-mr-rights-unchecked driver/rc/responder.rs \
		'mr.check_remote(table, qp.qpn(), qp.pd, va, len, rights)' \
		'mr.check_remote(table, qp.qpn(), qp.pd, va, len, AccessFlags::EMPTY)' \
		tests/guest/11-rc-semantics.sh 'not ok [0-9]+ - WRITE to an MR without remote write'

	# REG_MR takes the registered range's offset into its first page from
	# the first page's address again (the code before session 23): an
	# iova whose upper bits the consumer chose, as xprtrdma's, fails
	# LOC_PROT_ERR, and NFS over RDMA reconnects for ever.
	mutant fastreg-iova-from-first-page driver/mr.rs \
		'        let lead = reg.iova & (reg.page_size - 1);' \
		'        let lead = reg.iova.wrapping_sub(st.pages.first().copied().unwrap_or(0));' \
		tests/guest/06-kernel-verbs.sh 'not ok [0-9]+ - REG_MR again under a new key, at an iova'

	# A failed local operation leaves its RC QP running (rxe and IBTA
	# put it in the error state).
	mutant rc-local-op-failure-keeps-qp driver/rc/requester.rs \
		'                s.req.flush();' '' \
		tests/guest/06-kernel-verbs.sh 'not ok [0-9]+ - local failure: the failed REG_MR put its QP in the error state'

	# A QP moved to error before RTS keeps what is posted to it: the WR
	# of ib_drain_qp never completes, and the ULP's thread waits for ever.
	mutant rc-flush-needs-no-state driver/rc.rs \
		'.map_or(true, |st| !st.is_sending_side())' '.map_or(true, |_| false)' \
		tests/guest/06-kernel-verbs.sh 'not ok [0-9]+ - a SEND posted to a QP moved from RTR to error'

	# Datagrams to QP 0xFFFFFF are looked up as one QP again: a
	# multicast group's members receive nothing.
	mutant mcast-not-delivered driver/rx.rs \
		'if bth.dest_qp() == mcast::MULTICAST_QPN {' 'if false {' \
		tests/guest/08-ud.sh 'not ok [0-9]+ - UD multicast on rxud0'

	# Invalidation (LOCAL_INV, SEND with invalidate) leaves the MR valid:
	# a peer can still write through a key its owner withdrew.
	mutant invalidate-noop driver/mr.rs \
		'st.valid = false;' '' \
		tests/guest/06-kernel-verbs.sh 'not ok [0-9]+ - RDMA WRITE through an invalidated rkey fails'

	# Removing an object from a lock-free table leaves it published: a
	# deregistered MR's key still names it.
	mutant mr-key-outlives-dereg driver/table.rs \
		'drop(p.unpublish(index));' 'let _ = p;' \
		tests/guest/11-rc-semantics.sh 'not ok [0-9]+ - WRITE through the rkey of a deregistered MR'

	# Parking an XUD receiving stream forgets it instead of keeping its
	# window: a replay to the peer is then taken as new.
	mutant xud-park-forgets driver/xud/peers.rs \
		'self.recv = Some(Side::Parked(p));' 'let _ = p; self.recv = None;' \
		tests/guest/18-xud-peers.sh 'not ok [0-9]+ - the 50 SENDs replayed'

	# A destroyed XUD QP's number is free at once (rule 5's hold gone): a
	# new QP gets it while peers may still hold streams for the old one.
	mutant xud-qpn-not-held driver/qp.rs \
		'QpType::Xud => self.table(qpn).remove_held(qpn, xud::QPN_HOLD_NS),' \
		'QpType::Xud => self.table(qpn).remove(qpn),' \
		tests/guest/19-xud-recreate.sh 'not ok [0-9]+ - just after R and T are destroyed'

	# A packet of another stream for a peer whose stream is held and not
	# quiet replaces it (rule 3 dropped): a forger who knows no stream
	# takes a live peer's window, whose unacknowledged packets could then
	# be taken for new.
	mutant xud-streams-merge driver/xud/receiver.rs \
		'Admission::OtherStream => return Err(RxCounter::XudStale),' 'Admission::OtherStream => {}' \
		tests/guest/18-xud-peers.sh 'not ok [0-9]+ - 5 SENDs of another stream'

	# A window opens for any packet, cookie or not (as before issue 27):
	# an off-path forger's RDMA WRITE from a new source lands.
	mutant xud-cookie-not-required proto/xud/receiver.rs \
		'_ if cookie_valid && pkt.cookie.is_fresh(now) => Admission::Open,' '_ => Admission::Open,' \
		tests/guest/18-xud-peers.sh 'not ok [0-9]+ - off-path WRITEs from 5 new sources'

	# A window opens for a valid cookie of any age: a packet replayed
	# with its cookie after its peer was reclaimed is delivered again.
	mutant xud-cookie-age-unchecked proto/xud/receiver.rs \
		'_ if cookie_valid && pkt.cookie.is_fresh(now) => Admission::Open,' '_ if cookie_valid => Admission::Open,' \
		tests/guest/18-xud-peers.sh 'not ok [0-9]+ - the 50 SENDs replayed after reclaim'

	# An open window takes packets without its cookie: an off-path forger
	# who knows a stream in use and a PSN writes into its window.
	mutant xud-window-cookie-unchecked proto/xud/receiver.rs \
		'if cookie_valid && !seq_before(pkt.cookie.time(), h.cookie_time) {' 'if true {' \
		tests/guest/18-xud-peers.sh 'not ok [0-9]+ - off-path WRITEs into 5 held streams'

	# An XUD receiver commits (and ACKs) a packet that completes a message
	# whatever room its receive CQ has: the sender is told of a delivery
	# whose completion the receiver then loses.
	mutant xud-ack-without-cq-room driver/xud/receiver.rs \
		'Ok(()) if rs.completes(&plan) && !qp.recv_cq.has_room() =>' 'Ok(()) if false =>' \
		tests/guest/21-xud-bounds.sh 'not ok [0-9]+ - a full receive CQ'

	# Claims of receives by messages that do not finish go unbounded:
	# forged first packets pin every receive, whole SENDs meet RNR.
	mutant xud-claims-unbounded driver/xud/receiver.rs \
		'if plan.held && (!rs.may_hold_claim() || recvs.in_use() >= recvs_posted(qp)) {' \
		'if plan.held && false {' \
		tests/guest/21-xud-bounds.sh 'not ok [0-9]+ - forged partial SENDs: claims beyond one per source'

	# Sources that never finished a message keep their receives until the
	# reclaim (14.5 s), not the short hold.
	mutant xud-unproven-claims-kept driver/xud/timers.rs \
		'let n = r.drop_unproven_claims(t);' 'let n = 0u32;' \
		tests/guest/21-xud-bounds.sh 'not ok [0-9]+ - sources that never finished a message lose'

	# A stalled destination takes posts up to the full share again: dead
	# peers fill the send queue between their timeouts.
	mutant xud-stalled-full-share driver/xud/sender.rs \
		'if peer.send_ref().is_some_and(SendStream::is_stalled) {' 'if false {' \
		tests/guest/21-xud-bounds.sh 'not ok [0-9]+ - a live peer keeps a third of its rate'

	# An XUD receiver takes the sender's IPv6 address for its own (the
	# destination read at the source's offset): its receiving state is
	# then keyed, and its answers sent, by an address the sender did not
	# target, which the sender never takes. Silent over IPv4, which every
	# other XUD test uses.
	mutant xud-v6-answer-address driver/rx.rs \
		'address_gid(ip, 16, 24)' 'address_gid(ip, 16, 8)' \
		tests/guest/20-addresses.sh 'not ok [0-9]+ - XUD, IPv6: A sends to B'

	# RoCE that comes in on a VLAN device on top of the port's netdev is
	# dropped again (uncounted, as before issue 27).
	mutant vlan-rx-dropped driver/transport.rs \
		'find(ingress).or_else(|| find(skb.ingress_below_vlan()?))' \
		'find(ingress).or_else(|| find(skb.ingress()?))' \
		tests/guest/20-addresses.sh 'not ok [0-9]+ - RC between the VLAN devices'

	# IPv4 packets from a VLAN device's address are routed out of the
	# port's netdev again: they leave untagged (IP's on-link guess), which
	# a peer on the same link still takes; only the VLAN devices' packet
	# counts tell.
	mutant vlan-tx-untagged ffi/net.c \
		'fl.flowi4_oif = tx_oif4(ndev, saddr);' 'fl.flowi4_oif = ndev->ifindex;' \
		tests/guest/20-addresses.sh 'not ok [0-9]+ - the RoCE went tagged'

	# XUD's SEND given a UD opcode, the one overlap with what rxe takes
	# (rxe drops every opcode it does not know: 16-xud.sh checks it with
	# real XUD packets). No one-line change puts one on the wire: the
	# opcode table refuses an opcode listed twice at build time.
	mutant xud-opcode-overlaps-ud proto/wire/opcode.rs \
		'XUD_SEND = 0xe0,' 'XUD_SEND = 0x64,' \
		build 'opcode listed twice'
}

if [ "$mode" != run ]; then
	build_all
	finish_builds
fi
if [ "$mode" = build ]; then
	exit $failed
fi
if [ "$mode" = run ]; then
	[ -f "$work/mutants.tsv" ] || die "no mutants built in $work"
	while IFS=$'\t' read -r n t w; do
		names+=("$n") tests+=("$t") wants+=("$w")
	done <"$work/mutants.tsv"
fi
# The two lanes at once (each VM has one vCPU, the machine two cores);
# only the second pays for kmemleak, which slows every allocation.
run_lane lane &
lane=$!
run_lane lane-b --append kmemleak=on
wait $lane
for i in "${!names[@]}"; do
	judge "$i"
done

exit $failed
