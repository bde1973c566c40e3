#!/usr/bin/env bash
# XUD's peer table (Documentation/xud.rst, rules 2 and 3, "Memory")
# against packets from a sender that is not rxud: tests/xud-forge builds
# XUD packets from the wire format alone (rust/proto) and sends them from
# many source QPNs at once, from the other end of a veth pair, to an XUD
# QP of rxud0 (tests/verbs/xud-sink, max_peers 64). Checks: each source
# becomes a peer and its SEND is delivered once; sources beyond max_peers
# are refused and counted, none evicted; replayed packets are duplicates,
# answered and not delivered again, also once their streams are parked
# (at rest, message tables freed); a packet of another stream for a held
# peer, one for an earlier QP with the sink's number (a wrong peer_inc)
# and one with a wrong Q_Key are not placed; quiet peers are reclaimed,
# after which a sender re-created with a held peer's QPN (another stream)
# gets through. Stream cookies (xud.rst, "Stream cookies"): the forger
# takes each source's cookie from its challenge first (--handshake, as a
# sender on the path does); off-path forgeries (no cookie, or a made-up
# one) of RDMA WRITEs with the right Q_Key, rkey and address change no
# byte of the MR, whether for a new source or a held stream; packets
# replayed with their cookies after their peers were reclaimed are
# challenged, not delivered again.
. "$(dirname "$0")/../lib/tap.sh"
. "$(dirname "$0")/../lib/rxud.sh"
TAP_PLANNED=20
tap_begin $TAP_PLANNED

export RDMAV_DRIVERS=$RXUD_TOP/rdma-core-provider/build/librxud
SINK=$RXUD_TOP/tests/verbs/xud-sink
FORGE=$RXUD_TOP/tests/xud-forge/target/release/xud-forge
SIP=169.254.218.1 # rxud0's address (pv0, in pa)
CIP=169.254.218.2 # the forger's (pv1, in pb; no rxud device there)
IN=/tmp/18-sink.in
OUT=/tmp/18-sink.out
COOKIES=/tmp/18-cookies

hwc() { cat "/sys/class/infiniband/rxud0/ports/1/hw_counters/$1"; }
# delta NAME: how much counter NAME grew since mark.
declare -A base
mark() { local c; for c in "$@"; do base[$c]=$(hwc "$c"); done; }
delta() { echo $(($(hwc "$1") - ${base[$1]})); }
counters() {
	(cd /sys/class/infiniband/rxud0/ports/1/hw_counters &&
		grep -H -v '^0$' -- *) | tr '\n' ' ' | tap_diag
}
forge() { inns pb "$FORGE" --src $CIP --dst $SIP --qpn "$qpn" --qkey "$qkey" "$@"; }
at_least() { [ "$(delta "$1")" -ge "$2" ]; }

rxud_load
ip netns add pa
ip netns add pb
ip link add pv0 type veth peer name pv1
ip link set pv0 netns pa
ip link set pv1 netns pb
inns pa ip addr add $SIP/24 dev pv0
inns pb ip addr add $CIP/24 dev pv1
inns pa ip link set pv0 up
inns pb ip link set pv1 up
inns pa rdma link add rxud0 type rxud netdev pv0
wait_for 10 v2_gid_index rxud0
wait_for 10 inns pb ping -c1 -W1 $SIP

# The sink: 64 receives of 256 bytes, max_peers 64; it runs until its
# stdin, a FIFO whose only writer is this shell's fd 7, closes. (Opened
# read-write first, so that neither open blocks; the sink does not
# inherit fd 7. Not through bg_in: a background job's stdin is /dev/null
# unless redirected on the job itself.)
rm -f $IN
mkfifo $IN
exec 7<>$IN
nsenter --net=/run/netns/pa "$SINK" -d rxud0 -p 64 -r 64 <$IN >$OUT 2>&1 7>&- &
sink=$!
wait_for 20 grep -q '^qpn ' $OUT
read -r _ qpn _ rkey _ va _ qkey <$OUT
echo "sink: qpn $qpn rkey $rkey va $va qkey $qkey" | tap_diag
check "xud-sink is up (qpn $qpn)" test -n "$qpn"

# Off path (item 7 of issue 27): RDMA WRITEs with the right Q_Key, rkey
# and address into the sink's last quarter, from 5 new sources, by a
# forger that never sees a challenge: challenged, no peer made, and no
# byte may land (the sink reports that quarter at exit).
mark rx_packets rx_drop_xud_cookie xud_challenges_sent xud_peers_added
guard=$((va + 49152))
forge --peers 5 --first-src-qpn 0x3000 --rkey "$rkey" --va $guard --len 64 >/dev/null 2>&1
wait_for 10 at_least rx_packets 5
counters
check_eq "off-path WRITEs from 5 new sources: challenged (rx_drop_xud_cookie), no peer made" \
	"5 5 0" "$(delta rx_drop_xud_cookie) $(delta xud_challenges_sent) $(delta xud_peers_added)"

# 50 sources, one SEND each, each sent once without a cookie, challenged,
# and again with its cookie: 50 new peers, 50 receives completed. (The
# reclaim count is marked now: all 64 peers go, the first 14 of them
# maybe before the replays below are done.) The replay below must come
# within the 10 s after which these peers would be reclaimed: only their
# parking comes between.
mark xud_peers_added rx_packets xud_streams_parked xud_peers_reclaimed xud_challenges_sent
out=$(forge --send --peers 50 --first-src-qpn 0x1000 --stream 0x5eed --psn 100 --len 64 \
	--handshake --save-cookies $COOKIES 2>&1)
counters
echo "$out" | tap_diag
wait_for 10 at_least rx_packets 100
counters
check_eq "50 forged sources, a SEND each after its challenge: 50 challenges, 50 peers made" \
	"50 50" "$(delta xud_challenges_sent) $(delta xud_peers_added)"

check "the 50 streams, once at rest, are parked (xud_streams_parked)" wait_for 8 at_least xud_streams_parked 50

# The first 50 packets again: duplicates, answered, not delivered. They
# take the 50 streams back into use (marked now: they may park again
# before the next check is done).
mark xud_duplicates rx_packets xud_streams_parked
forge --send --peers 50 --first-src-qpn 0x1000 --stream 0x5eed --psn 100 --len 64 \
	--cookies $COOKIES 2>&1 | tap_diag
wait_for 10 at_least rx_packets 50
counters
check_eq "the 50 SENDs replayed: 50 duplicates (xud_duplicates)" 50 "$(delta xud_duplicates)"

# 30 more sources (RDMA WRITEs into the sink's buffer, past its
# receives): 14 fit max_peers, 16 are refused and counted. (Only now,
# so as not to hold up the replay above.)
mark xud_peers_added rx_drop_xud_peer_limit rx_packets
out=$(forge --peers 30 --first-src-qpn 0x2000 --rkey "$rkey" --va $((va + 32768)) --len 64 \
	--handshake 2>&1)
echo "$out" | tap_diag
wait_for 10 at_least rx_packets 60
counters
check_eq "30 more sources at max_peers 64: 14 peers made, 16 refused (rx_drop_xud_peer_limit)" \
	"14 16" "$(delta xud_peers_added) $(delta rx_drop_xud_peer_limit)"

# At rest, the streams park: the reclaim scan, every 2.5 s, parks those
# idle for 1 s. The replay above took the 50 back into use; they park
# again well within the 10 s after which they would be reclaimed (what
# does not touch them comes after the replay below: a slow VM once took
# more than those 10 s over it).
check "the 50 streams park again once at rest (xud_streams_parked)" wait_for 8 at_least xud_streams_parked 50
counters

# A parked stream keeps its window: the replay is still a duplicate.
mark xud_duplicates rx_packets xud_peers_added
forge --send --peers 50 --first-src-qpn 0x1000 --stream 0x5eed --psn 100 --len 64 \
	--cookies $COOKIES 2>&1 | tap_diag
wait_for 10 at_least rx_packets 50
check_eq "replayed to parked streams: 50 duplicates, no new peer" "50 0" \
	"$(delta xud_duplicates) $(delta xud_peers_added)"

# Another stream claiming a held peer's source (an off-path forger that
# does not know the stream): dropped, nothing placed (rule 3).
mark rx_drop_xud_stale rx_packets
forge --send --peers 5 --first-src-qpn 0x1000 --stream 0xbad --psn 101 --len 64 2>&1 | tap_diag
wait_for 10 at_least rx_packets 5
counters
check_eq "5 SENDs of another stream for held peers: dropped (rx_drop_xud_stale)" 5 "$(delta rx_drop_xud_stale)"

# Off path, into held streams: their stream and a PSN not yet seen known,
# without a cookie and with made-up ones: dropped unanswered.
mark rx_packets rx_drop_xud_cookie xud_challenges_sent
forge --peers 5 --first-src-qpn 0x1000 --stream 0x5eed --psn 104 --rkey "$rkey" --va $guard \
	--len 64 >/dev/null 2>&1
forge --peers 5 --first-src-qpn 0x1000 --stream 0x5eed --psn 104 --rkey "$rkey" --va $guard \
	--len 64 --fake-cookie >/dev/null 2>&1
wait_for 10 at_least rx_packets 10
counters
check_eq "off-path WRITEs into 5 held streams, without and with made-up cookies: 10 dropped, none challenged" \
	"10 0" "$(delta rx_drop_xud_cookie) $(delta xud_challenges_sent)"

# The held streams, with a PSN not yet seen, but naming another
# incarnation of the receiving QP (sent to an earlier QP with the sink's
# number, rule 1): dropped, each answered with a stale-incarnation NAK.
mark rx_drop_xud_stale rx_packets
forge --send --peers 5 --first-src-qpn 0x1000 --stream 0x5eed --psn 102 --peer-inc 0xdead >/dev/null 2>&1
wait_for 10 at_least rx_packets 5
check_eq "5 SENDs for another incarnation of the sink's QP: dropped (rx_drop_xud_stale)" 5 "$(delta rx_drop_xud_stale)"

# The same with a wrong Q_Key: dropped before any peer state is looked at.
mark rx_drop_qkey rx_packets
forge --send --peers 5 --first-src-qpn 0x1000 --stream 0x5eed --psn 103 --qkey $((qkey ^ 1)) >/dev/null 2>&1
wait_for 10 at_least rx_packets 5
check_eq "5 SENDs with a wrong Q_Key: dropped (rx_drop_qkey)" 5 "$(delta rx_drop_qkey)"

# Quiet for 10 s (the retry span plus a packet's lifetime): reclaimed.
check "quiet peers are reclaimed (xud_peers_reclaimed 64)" wait_for 20 at_least xud_peers_reclaimed 64
counters

# Item 6 of issue 27: the 50 SENDs replayed with the cookies they
# carried, their peers reclaimed (their packets may be delayed that long,
# or recorded and sent again): challenged, not delivered, no peer made.
# (Without cookies each would open a new window and be delivered again.)
mark xud_peers_added rx_packets rx_drop_xud_cookie xud_challenges_sent
forge --send --peers 50 --first-src-qpn 0x1000 --stream 0x5eed --psn 100 --len 64 \
	--cookies $COOKIES 2>&1 | tap_diag
wait_for 10 at_least rx_packets 50
check_eq "the 50 SENDs replayed after reclaim: 50 challenged (rx_drop_xud_cookie), no peer made" \
	"50 50 0" "$(delta rx_drop_xud_cookie) $(delta xud_challenges_sent) $(delta xud_peers_added)"

# The source QPNs whose other stream was dropped above, as a sender QP
# re-created with the same number would come back: with its old stream
# reclaimed, the new one is a new peer, and its SENDs are delivered.
mark xud_peers_added rx_packets
forge --send --peers 5 --first-src-qpn 0x1000 --stream 0xbad --psn 101 --len 64 \
	--handshake >/dev/null 2>&1
wait_for 10 at_least rx_packets 10
check_eq "a re-created sender's stream, once the old one is reclaimed: 5 new peers" 5 "$(delta xud_peers_added)"

exec 7>&-
wait $sink
check_eq "xud-sink exits 0" 0 $?
tap_diag <$OUT
check "the sink got each of the 55 SENDs once, and nothing else" grep -q '^sink: 55 receive completions, 55 with status success' $OUT
check "no off-path WRITE changed a byte of the MR" grep -q '^sink: 0 bytes not zero in the last quarter' $OUT

ip netns del pa
ip netns del pb
wait_for 10 test "$(ib_count)" = 0
check "no rxud device left" test "$(ib_count)" = 0
check "rmmod rxud" rxud_unload
tap_end
