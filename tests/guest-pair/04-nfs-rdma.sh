#!/usr/bin/env bash
# NFS over RDMA over rxud (issue 28, item 3): vm0 runs nfsd with an RDMA
# listener on 20049 (svcrdma) exporting a tmpfs, vm1 mounts it with
# proto=rdma (xprtrdma), writes a 4 MB file, reads it back after dropping
# its caches, compares it, unmounts. The mount hung over rxud until
# session 23 (REG_MR refused xprtrdma's iova, whose upper 32 bits carry
# the RPC's xid); 32 MB took about 100 s in these TCG guests.
. "$(dirname "$0")/../lib/tap.sh"
. "$(dirname "$0")/../lib/rxud.sh"
IF=${RXUD_IF:?no test NIC}
# vm0: rxud0, GID, nfsd, barrier, client done, unload;
# vm1: rxud0, GID, barrier, mount, write+read+compare, umount, unload.
TAP_PLANNED=$([ "$RXUD_VM" = 0 ] && echo 6 || echo 7)
tap_begin $TAP_PLANNED
EXP=/tmp/rxud-nfs-export
MNT=/tmp/rxud-nfs-mnt

check "rxud0 on $IF" bash -c "modprobe -a udp_tunnel ip6_udp_tunnel && { [ -d /sys/module/rxud ] || insmod $RXUD_KO; } && rdma link add rxud0 type rxud netdev $IF"
check "rxud0 has a RoCE v2 GID" wait_for 10 v2_gid_index rxud0

# server: nfsd for NFSv4 only (no rpcbind needed), an RDMA listener beside
# TCP. Its state (/var/lib/nfs: etab, rmtab, v4recovery) in a tmpfs: the
# guest's root is the host's, not to be written.
server() {
	modprobe -a nfsd svcrdma 2>/dev/null || modprobe -a nfsd rpcrdma
	mount -t tmpfs none /var/lib/nfs &&
		mkdir -p $EXP /var/lib/nfs/v4recovery &&
		: >/var/lib/nfs/etab && : >/var/lib/nfs/rmtab &&
		mount -t tmpfs none $EXP &&
		{ mountpoint -q /proc/fs/nfsd || mount -t nfsd nfsd /proc/fs/nfsd; } &&
		echo "$EXP $RXUD_PEER_IP(rw,no_root_squash,fsid=0,insecure)" >/tmp/rxud-exports &&
		exportfs -o rw,no_root_squash,fsid=0,insecure "$RXUD_PEER_IP:$EXP" &&
		rpc.mountd --no-nfs-version 3 --no-udp &&
		# The shortest grace period and lease (10 s): a new server
		# makes its clients' first OPEN wait out its grace (90 s by
		# default, most of this test's time).
		echo 10 >/proc/fs/nfsd/nfsv4gracetime && echo 10 >/proc/fs/nfsd/nfsv4leasetime &&
		rpc.nfsd -N 3 --no-udp 4 &&
		echo "rdma 20049" >/proc/fs/nfsd/portlist
}

if [ "$RXUD_VM" = 0 ]; then
	check "nfsd exports $EXP, listening on RDMA 20049" server
	check "the client is ready" barrier nfs-server-up 120
	check "the client finished" barrier nfs-client-done 600
	rpc.nfsd 0
	exportfs -ua
	pkill rpc.mountd
	umount /proc/fs/nfsd $EXP /var/lib/nfs
else
	modprobe -a nfsv4 rpcrdma
	mkdir -p $MNT
	check "the server is up" barrier nfs-server-up 120
	check "mount -t nfs4 -o proto=rdma,port=20049" \
		timeout 60 mount -t nfs4 -o proto=rdma,port=20049,vers=4.0 "$RXUD_PEER_IP:/" $MNT
	roundtrip() {
		# Over NFS, not into the empty directory a failed mount leaves.
		[ "$(findmnt -n -o FSTYPE $MNT)" = nfs4 ] || { echo "$MNT is not an NFS mount"; return 1; }
		head -c 4M /dev/urandom >/tmp/rxud-nfs-src &&
			cp /tmp/rxud-nfs-src $MNT/file && sync &&
			echo 3 >/proc/sys/vm/drop_caches &&
			cmp /tmp/rxud-nfs-src $MNT/file
	}
	check "a 4 MB file written over NFS/RDMA reads back the same" roundtrip
	check "umount" umount $MNT
	barrier nfs-client-done 600
fi
rdma link delete rxud0
check "rxud unloads" rmmod rxud
tap_end
