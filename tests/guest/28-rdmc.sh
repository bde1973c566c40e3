#!/usr/bin/env bash
# RDMC over XUD (rdma-core-provider/rdmc; tests/verbs/rxud-mcast.c;
# Documentation/xud.rst, "RDMC over XUD"): 5 members, each an rxud device
# in a namespace of its own behind a router namespace (tests/lib/mesh.sh:
# RoCEv2 routed, one /24 per link), one process and one XUD QP each, in
# the initial namespace where the devices are. Root: member 2 (so ranks
# and the schedules' virtual ranks differ). For each algorithm (seq,
# chain, tree, pipeline) a group whose root sends an object of 2 MB in
# 128 KB blocks: every member must have every byte (its checksum the
# root's, every word the root's pattern), and nobody may have refused a
# block or a control message. The pipeline's group goes on sending 2 MB
# objects back to back, and member 4, a relay, is killed (SIGKILL) once
# the first has gone: every survivor must report member 4's failure, and
# only that, and exit 3. Then a hostile relay: in a tree group, member 3
# (rxud-mcast -t) overwrites its buffer once its own copy is whole, so
# what it relays to member 0 is not the root's object: member 0 must
# refuse it (the root's digest), nobody may take a wrong object, and
# the root must hear that member 0 failed. The schedules and the
# digest are checked first, without devices (rxud-mcast -P).
#
# With RXUD_RDMC_BENCH=SIZES (rxud-mcast's -s, e.g. 1M-64M) it is the
# benchmark instead (make bench-rdmc, qemu/bench-incast.sh --rdmc): each
# algorithm's time to replicate one object of each size to the members
# (RXUD_RDMC_N of them, default 8, root 0; 1 MB blocks, the members'
# checks left out: -q), and the kernel memory each member's context and
# group took; its "result" and "memory" lines are the figures.
. "$(dirname "$0")/../lib/tap.sh"
. "$(dirname "$0")/../lib/rxud.sh"
. "$(dirname "$0")/../lib/mesh.sh"
BENCH=${RXUD_RDMC_BENCH:-}
TAP_PLANNED=13
[ -z "$BENCH" ] || TAP_PLANNED=3
tap_begin $TAP_PLANNED
export RDMAV_DRIVERS=$RXUD_TOP/rdma-core-provider/build/librxud
# RXUD_MCAST: another build of the tool (tests/mutation.sh's RDMC mutants).
MC=${RXUD_MCAST:-$RXUD_TOP/tests/verbs/rxud-mcast}
N=5
ROOT=2
VICTIM=4
[ -z "$BENCH" ] || N=${RXUD_RDMC_N:-8} ROOT=0
SIZE=2097152
W=/tmp/28-rdmc
declare -a gid pids
rm -rf "$W"
mkdir -p "$W"

setup() {
	local i
	mesh_router mcr || return 1
	for i in $(seq 0 $((N - 1))); do
		mesh_host mcr "mc$i" "mv$i" "10.79.$i" || return 1
	done
	for i in $(seq 0 $((N - 1))); do
		wait_for 10 v2_gid_index "rxmv$i" || return 1
	done
}

[ -n "$BENCH" ] ||
	check "the schedules of every algorithm bring every block to every member once, from the member its plan names, for 2 to 9 members; BLAKE2s-256 gives the known answers (rxud-mcast -P)" \
		"$MC" -P -n 2-9 -a seq,chain,tree,pipeline -s 1,5M -b 128K

rxud_load
check "$N members, each an rxud device in its namespace, routed through a router namespace" setup
# Looked up once, here (check runs setup in a subshell).
for i in $(seq 0 $((N - 1))); do
	gid[i]=$(v2_gid_index "rxmv$i")
done

# members RUN ARGS...: one rxud-mcast per member, in the background
# (pids[]), their member files in $W/RUN and their output in $W/RUN/out.I;
# member $HOSTILE, if set, with -t.
members() {
	local run=$1 i
	shift
	mkdir -p "$W/$run"
	for i in $(seq 0 $((N - 1))); do
		bg_in - "$MC" -d "rxmv$i" -x "${gid[i]}" -D "$W/$run" -n $N -r "$i" -R $ROOT -T 60 \
			$([ "$i" != "${HOSTILE:-}" ] || echo -t) "$@" >"$W/$run/out.$i" 2>&1
		pids[i]=$!
	done
}

if [ -n "$BENCH" ]; then
	# kB of unreclaimable slab and vmalloc: before the members, and once
	# the root sent its first object (every context and group made).
	kmem() { awk '/^SUnreclaim:/ { s = $2 } /^VmallocUsed:/ { v = $2 } END { print s + v }' /proc/meminfo; }
	m0=$(kmem)
	members bench -a seq,chain,tree,pipeline -s "$BENCH" -b 1M -i 1 -q -T 600
	wait_for 600 grep -q '^iter 1 group 1 ' "$W/bench/out.$ROOT"
	m1=$(kmem)
	echo "memory members $N kB_per_member $(((m1 - m0) / N))" | tap_diag
	for i in $(seq 0 $((N - 1))); do
		wait "${pids[i]}"
		rc[i]=$?
	done
	grep -h '^result\|rxud-mcast' "$W/bench/out.$ROOT" | tap_diag
	check_eq "every member replicated every object (exit statuses)" "$(printf '0 %.0s' $(seq 1 $N))" \
		"$(for i in $(seq 0 $((N - 1))); do printf '%s ' "${rc[i]}"; done)"
	# shellcheck disable=SC2046 # names without blanks
	check "no rxud device left, rmmod rxud" eval 'mesh_teardown mcr $(seq -f "mc%g" 0 $((N - 1))) && rmmod rxud'
	tap_end
	exit
fi

# One run: a group per algorithm, one object each but the last
# (pipeline), which sends objects back to back until member VICTIM is
# killed: the root is always in the middle of a transfer.
members run -a seq,chain,tree,pipeline:1000 -s $SIZE -b 128K -i 1 -S 28
wait_for 120 grep -q '^iter 1 group 4 ' "$W/run/out.$ROOT"
check "the root sent an object with each algorithm (the pipeline's group going on)" \
	grep -q '^iter 1 group 4 ' "$W/run/out.$ROOT"
kill -KILL "${pids[VICTIM]}"
t0=${EPOCHREALTIME/./}
# (Its end reaped quietly: bash reports a killed job on its stderr.)
{ wait "${pids[VICTIM]}"; } 2>/dev/null
declare -a rc
for i in $(seq 0 $((N - 1))); do
	[ "$i" = $VICTIM ] && continue
	wait "${pids[i]}"
	rc[i]=$?
done
t1=${EPOCHREALTIME/./}
gone=$(((t1 - t0) / 100000))
gone=$((gone / 10)).$((gone % 10))
tap_diag <"$W/run/out.$ROOT"

# verified G: each member but the root printed group G's object's
# checksum, the root's, and "ok" (every word of the root's pattern). One
# awk for all: a process costs a TCG guest some 70 ms.
verified() {
	awk -v g="$1" -v size=$SIZE -v root="$W/run/out.$ROOT" -v n=$((N - 1)) '
		$1 == "verify" && $3 == g && $7 == size && $9 == 1 {
			if (FILENAME == root && $12 == "sent")
				sum = $11
			else if (FILENAME != root && $12 == "ok")
				ok[$11]++
		}
		END { exit !(sum != "" && ok[sum] == n) }' "$W"/run/out.*
}
# took G: the root's time for group G's object.
took() { sed -n "s/^iter 1 group $1 alg [a-z]* size $SIZE ms \([0-9]*\) MBps \(.*\)/\1 ms, \2 MB\/s/p" "$W/run/out.$ROOT"; }
g=0
for alg in seq chain tree pipeline; do
	g=$((g + 1))
	check "$alg: each of the $((N - 1)) members got every byte of a 2 MB object, its checksum the root's ($(took $g))" \
		verified $g
done
# Every stats line (the pipeline group's at the survivors' exit):
# nothing refused, blocks or control messages.
refused() { cat "$W"/run/out.* | sed -n 's/^stats .* blocks_refused \([0-9]*\) ctrl_refused \([0-9]*\) .*/\1 \2/p' | tr ' ' '\n' | sort -u; }
check_eq "no member refused a block or a control message" 0 "$(refused)"

grep -h 'failed\|rxud-mcast' "$W"/run/out.* | sort | uniq -c | tap_diag
# reported: each survivor said "member VICTIM failed" and exited 3.
reported() {
	local i
	for i in $(seq 0 $((N - 1))); do
		[ "$i" = $VICTIM ] && continue
		grep -qx "member $VICTIM failed" "$W/run/out.$i" && [ "${rc[i]}" = 3 ] || return 1
	done
}
check "member $VICTIM killed (SIGKILL) in a transfer: every survivor reported its failure and exited 3 (the last ${gone} s after the kill)" reported
check_eq "no survivor reported another member's failure" 0 \
	"$(cat "$W"/run/out.* | grep '^member [0-9]* failed' | grep -cv "^member $VICTIM failed")"

# The hostile relay: in the tree (root 2), member 3 (virtual rank 1)
# relays the whole object to member 0 (virtual rank 3) once it holds it.
HOSTILE=3
members tamper -a tree -s $SIZE -b 128K -i 1 -S 29
HOSTILE=
for i in $(seq 0 $((N - 1))); do
	wait "${pids[i]}"
	rc[i]=$?
done
grep -H '^verify\|^stats\|failed\|rxud-mcast' "$W"/tamper/out.* | tap_diag
check_eq "a hostile relay (member 3, -t) altered the tree's object on its way to member 0: no member took an object that was not the root's (no BAD)" 0 \
	"$(cat "$W"/tamper/out.* | grep -c BAD)"
# refused_copy: member 0 refused its copy, once, and took no object; the
# root, which waits for every member's DONE, heard that member 0 failed
# (exit 3); every other honest member either took the root's object (its
# checksum checked: "ok") or heard the same (members that were done and
# gone hear nothing).
refused_copy() {
	local i
	grep -q ' copies_refused 1$' "$W/tamper/out.0" && ! grep -q '^verify' "$W/tamper/out.0" &&
		grep -qx "member 0 failed" "$W/tamper/out.$ROOT" && [ "${rc[ROOT]}" = 3 ] || return 1
	for i in $(seq 1 $((N - 1))); do
		[ "$i" = $ROOT ] || [ "$i" = 3 ] ||
			grep -q '^verify .* ok$\|^member 0 failed$' "$W/tamper/out.$i" || return 1
	done
}
check "member 0 refused its copy (its digest not the root's: copies_refused 1), the root reported member 0 failed, and each other honest member took the root's object or heard the same" refused_copy

# shellcheck disable=SC2046 # names without blanks
check "no rxud device left, rmmod rxud" eval 'mesh_teardown mcr $(seq -f "mc%g" 0 $((N - 1))) && rmmod rxud'
tap_end
