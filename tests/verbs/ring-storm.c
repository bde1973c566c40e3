// SPDX-License-Identifier: GPL-2.0 OR Linux-OpenIB
/*
 * ring-storm: a hostile user of rxud's shared rings (make soak, and
 * tests/guest/22-soak.sh). It opens the device through librxud, makes an
 * RC, a UD and an XUD QP with their CQs and an MR open to remote access,
 * posts receives, then writes random fields into every ring librxud
 * mapped from the device (SQ, RQ and CQ alike: the kernel trusts none of
 * them): producer and consumer indices anywhere (beyond the ring,
 * wrapped, behind), send WQEs with random opcodes, flags, num_sge,
 * inline lengths, keys and addresses (the MR's own, its edges, none),
 * SGEs with lengths that overflow, receive WQEs likewise, and plain
 * random bytes; after each write it rings a QP's doorbell (POST_SEND
 * with no work request, written to the command fd as librxud does).
 * Then it exits without destroying anything: the kernel must clean up.
 *
 * The QPs are also victims for tests/roce-fuzz: the RC QP is connected
 * to PEER (a GID no device has: the fuzzer's source address) and QPN
 * 0x5eed, and the victims file (-o) gives the fuzzer their QPNs, the
 * Q_Key, and the MR's R_Key, address and length, so that its packets get
 * past the checks and into the receive rings being scribbled on.
 *
 *   ring-storm -d DEV -g GIDINDEX -p PEER_IPV4 [-s SEED] [-n ITERS]
 *              [-o VICTIMS_FILE]
 *
 * Prints the seed (-s replays the same writes) and what it did. Exit
 * status 0 if it ran its iterations (whatever the kernel refused).
 */
#include <arpa/inet.h>
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <infiniband/verbs.h>
#include <infiniband/rxudv.h>
#include <rdma/ib_user_verbs.h>
#include "util.h"

#define QKEY		0x5eed50a4u
#define PEER_QPN	0x5eed
#define MR_LEN		(64 * 1024)
#define RECVS		64
#define MAX_MAPS	32
/* RingControl: producer at 0, consumer at 64, its flags at 68; slots at 128. */
#define CTL_PRODUCER	0
#define CTL_CONSUMER	64
#define CTL_FLAGS	68
#define SLOTS_AT	128

static uint64_t rng_state;

static uint64_t rnd(void)
{
	rng_state ^= rng_state >> 12;
	rng_state ^= rng_state << 25;
	rng_state ^= rng_state >> 27;
	return rng_state * 0x2545f4914f6cdd1dull;
}

static uint64_t below(uint64_t n) { return rnd() % n; }

static void die(const char *what, int err)
{
	fprintf(stderr, "ring-storm: %s: %s\n", what, strerror(err));
	exit(1);
}

struct map { uint8_t *at; size_t len; };

/* The device's rings in this process: the writable mappings of the uverbs
 * file that librxud made. */
static int find_rings(struct map *maps)
{
	FILE *f = fopen("/proc/self/maps", "r");
	char line[512];
	int n = 0;

	if (!f)
		die("/proc/self/maps", errno);
	while (n < MAX_MAPS && fgets(line, sizeof(line), f)) {
		unsigned long lo, hi;
		char perms[8];

		if (!strstr(line, "/dev/infiniband/uverbs"))
			continue;
		if (sscanf(line, "%lx-%lx %7s", &lo, &hi, perms) != 3 || perms[1] != 'w')
			continue;
		maps[n].at = (uint8_t *)lo;
		maps[n].len = hi - lo;
		n++;
	}
	fclose(f);
	return n;
}

/* The doorbell of @qp: POST_SEND without work requests. */
static int doorbell(struct ibv_context *ctx, struct ibv_qp *qp)
{
	struct ib_uverbs_post_send_resp resp;
	struct {
		struct ib_uverbs_cmd_hdr hdr;
		struct ib_uverbs_post_send cmd;
	} c = {
		.hdr = { .command = IB_USER_VERBS_CMD_POST_SEND,
			 .in_words = sizeof(c) / 4, .out_words = sizeof(resp) / 4 },
		.cmd = { .response = (uintptr_t)&resp, .qp_handle = qp->handle,
			 .wr_count = 0, .sge_count = 0, .wqe_size = sizeof(struct ibv_send_wr) },
	};

	return write(ctx->cmd_fd, &c, sizeof(c)) == sizeof(c) ? 0 : errno;
}

static void put32(uint8_t *p, uint32_t v) { memcpy(p, &v, 4); }
static void put64(uint8_t *p, uint64_t v) { memcpy(p, &v, 8); }
static uint32_t get32(const uint8_t *p) { uint32_t v; memcpy(&v, p, 4); return v; }

/* A length: right-sized, zero, at the edges of 32 bits, random. */
static uint32_t lie_len(void)
{
	static const uint32_t l[] = { 0, 1, 8, 4096, 65536, 65537, 0x7fffffff, 0x80000000,
				      0xffffffff, 0xfffffff0 };
	return below(4) ? l[below(sizeof(l) / sizeof(l[0]))] : (uint32_t)rnd();
}

/* A key: the MR's, one next to it, zero, random. */
static uint32_t lie_key(const struct ibv_mr *mr)
{
	switch (below(5)) {
	case 0: case 1: return below(2) ? mr->lkey : mr->rkey;
	case 2: return mr->lkey + 1 + below(4);
	case 3: return 0;
	default: return (uint32_t)rnd();
	}
}

/* An address: in the MR, at or past its edges, none. */
static uint64_t lie_addr(const struct ibv_mr *mr)
{
	uint64_t a = (uintptr_t)mr->addr;

	switch (below(6)) {
	case 0: case 1: return a + below(MR_LEN);
	case 2: return a + MR_LEN - below(16);
	case 3: return a - 1 - below(64);
	case 4: return ~0ull - below(64);
	default: return rnd();
	}
}

/* One hostile write into ring @m. */
static void scribble(const struct map *m, const struct ibv_mr *mr)
{
	uint8_t *r = m->at;
	size_t slots_len = m->len > SLOTS_AT ? m->len - SLOTS_AT : 0;
	/* A slot size the ring may have: 16 to 512 bytes. */
	size_t slot = 16 * (1 + below(32));
	size_t nslots = slots_len / slot;
	uint8_t *s = nslots ? r + SLOTS_AT + slot * below(nslots) : r;
	uint32_t p = get32(r + CTL_PRODUCER), c = get32(r + CTL_CONSUMER);

	switch (below(8)) {
	case 0: { /* the producer index anywhere */
		static const uint32_t d[] = { 1, 2, 63, 64, 65, 1024, 4097, 0x7fffffff, 0x80000000,
					      0xffffffff };
		uint32_t np = below(2) ? c + d[below(10)] : (uint32_t)rnd();

		put32(r + CTL_PRODUCER, np);
		break;
	}
	case 1: /* the consumer index or its flags (a CQ's consumer is ours) */
		put32(r + (below(2) ? CTL_CONSUMER : CTL_FLAGS),
		      below(2) ? p - (uint32_t)below(4096) : (uint32_t)rnd());
		break;
	case 2: case 3: { /* a send WQE: header, then SGEs or inline bytes */
		if (!nslots || slot < 64)
			break;
		put64(s, rnd());				/* wr_id */
		put32(s + 8, below(4) ? (uint32_t)below(12) : (uint32_t)rnd());	/* opcode */
		put32(s + 12, (uint32_t)below(32));		/* send_flags */
		put32(s + 16, below(3) ? (uint32_t)below(8) : (uint32_t)rnd());	/* num_sge */
		put32(s + 20, lie_len());			/* inline_len */
		put32(s + 24, lie_key(mr));			/* imm or inv */
		/* op: remote address, rkey, (atomics) operands; (UD) AH, QPN, Q_Key */
		put64(s + 32, lie_addr(mr));
		put32(s + 40, lie_key(mr));
		put32(s + 44, below(2) ? (uint32_t)below(16) : (uint32_t)rnd());
		put64(s + 48, rnd());
		put64(s + 56, below(2) ? QKEY : rnd());
		for (size_t at = 64; at + 16 <= slot; at += 16) {
			put64(s + at, lie_addr(mr));
			put32(s + at + 8, lie_len());
			put32(s + at + 12, lie_key(mr));
		}
		put32(r + CTL_PRODUCER, p + 1 + (uint32_t)below(3));
		break;
	}
	case 4: case 5: { /* a receive WQE: header, then SGEs */
		if (!nslots)
			break;
		put64(s, rnd());
		put32(s + 8, below(3) ? (uint32_t)below(8) : (uint32_t)rnd());
		put32(s + 12, (uint32_t)rnd());
		for (size_t at = 16; at + 16 <= slot; at += 16) {
			put64(s + at, lie_addr(mr));
			put32(s + at + 8, lie_len());
			put32(s + at + 12, lie_key(mr));
		}
		put32(r + CTL_PRODUCER, p + 1 + (uint32_t)below(3));
		break;
	}
	default: { /* random bytes, anywhere in the mapping */
		size_t n = 1 + below(64), at = below(m->len - n);

		for (size_t i = 0; i < n; i++)
			r[at + i] = (uint8_t)rnd();
	}
	}
}

static void to_rts(struct ibv_qp *qp, int gid_index, const union ibv_gid *peer, uint32_t rq_psn,
		   uint32_t sq_psn)
{
	struct ibv_qp_attr a = { .qp_state = IBV_QPS_INIT, .pkey_index = 0, .port_num = 1 };
	int err;

	if (qp->qp_type == IBV_QPT_RC) {
		a.qp_access_flags = IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ |
				    IBV_ACCESS_REMOTE_ATOMIC;
		err = ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT |
				    IBV_QP_ACCESS_FLAGS);
	} else {
		a.qkey = QKEY;
		err = ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT |
				    IBV_QP_QKEY);
	}
	if (err)
		die("modify to INIT", err);
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTR;
	if (qp->qp_type == IBV_QPT_RC) {
		a.path_mtu = IBV_MTU_1024;
		a.dest_qp_num = PEER_QPN;
		a.rq_psn = rq_psn;
		a.max_dest_rd_atomic = 4;
		a.min_rnr_timer = 1;
		a.ah_attr.is_global = 1;
		a.ah_attr.grh.dgid = *peer;
		a.ah_attr.grh.sgid_index = gid_index;
		a.ah_attr.grh.hop_limit = 64;
		a.ah_attr.port_num = 1;
		err = ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU |
				    IBV_QP_DEST_QPN | IBV_QP_RQ_PSN | IBV_QP_MAX_DEST_RD_ATOMIC |
				    IBV_QP_MIN_RNR_TIMER);
	} else {
		err = ibv_modify_qp(qp, &a, IBV_QP_STATE);
	}
	if (err)
		die("modify to RTR", err);
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTS;
	a.sq_psn = sq_psn;
	if (qp->qp_type == IBV_QPT_RC) {
		a.timeout = 8;
		a.retry_cnt = 2;
		a.rnr_retry = 2;
		a.max_rd_atomic = 4;
		err = ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_SQ_PSN | IBV_QP_TIMEOUT |
				    IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY | IBV_QP_MAX_QP_RD_ATOMIC);
	} else {
		err = ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_SQ_PSN);
	}
	if (err)
		die("modify to RTS", err);
}

static void post_recvs(struct ibv_qp *qp, struct ibv_mr *mr)
{
	for (int i = 0; i < RECVS; i++) {
		struct ibv_sge sge = { .addr = (uintptr_t)mr->addr + (i % 16) * 4096,
				       .length = 4096, .lkey = mr->lkey };
		struct ibv_recv_wr wr = { .wr_id = i, .sg_list = &sge, .num_sge = 1 }, *bad;

		if (ibv_post_recv(qp, &wr, &bad))
			break;
	}
}

int main(int argc, char **argv)
{
	const char *dev = NULL, *peer_ip = NULL, *victims = NULL;
	int gid_index = -1, opt;
	long iters = 20000;
	uint64_t seed = (uint64_t)time(NULL) ^ ((uint64_t)getpid() << 32);

	while ((opt = getopt(argc, argv, "d:g:p:s:n:o:")) != -1) {
		switch (opt) {
		case 'd': dev = optarg; break;
		case 'g': gid_index = atoi(optarg); break;
		case 'p': peer_ip = optarg; break;
		case 's': seed = strtoull(optarg, NULL, 0); break;
		case 'n': iters = atol(optarg); break;
		case 'o': victims = optarg; break;
		default: goto usage;
		}
	}
	struct in_addr in;
	if (!dev || gid_index < 0 || !peer_ip || inet_pton(AF_INET, peer_ip, &in) != 1) {
usage:
		fprintf(stderr, "usage: %s -d DEV -g GIDINDEX -p PEER_IPV4 [-s SEED] [-n ITERS] "
			"[-o VICTIMS_FILE]\n", argv[0]);
		return 1;
	}
	printf("ring-storm: seed %llu (-s %llu replays it), %ld iterations\n",
	       (unsigned long long)seed, (unsigned long long)seed, iters);
	rng_state = seed | 1;
	union ibv_gid peer = { .raw = { [10] = 0xff, [11] = 0xff } };
	memcpy(&peer.raw[12], &in, 4);

	struct ibv_context *ctx = open_dev(dev);
	if (!ctx)
		die(dev, errno ? errno : ENODEV);
	struct ibv_pd *pd = ibv_alloc_pd(ctx);
	struct ibv_cq *scq = ibv_create_cq(ctx, 256, NULL, NULL, 0);
	struct ibv_cq *rcq = ibv_create_cq(ctx, 256, NULL, NULL, 0);
	uint8_t *buf = aligned_alloc(4096, MR_LEN);
	if (!pd || !scq || !rcq || !buf)
		die("PD, CQs or buffer", errno);
	struct ibv_mr *mr = ibv_reg_mr(pd, buf, MR_LEN, IBV_ACCESS_LOCAL_WRITE |
				       IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ |
				       IBV_ACCESS_REMOTE_ATOMIC);
	if (!mr)
		die("ibv_reg_mr", errno);
	struct ibv_qp_init_attr ia = {
		.send_cq = scq, .recv_cq = rcq, .qp_type = IBV_QPT_RC,
		.cap = { .max_send_wr = 64, .max_recv_wr = RECVS, .max_send_sge = 4,
			 .max_recv_sge = 4, .max_inline_data = 64 },
	};
	struct ibv_qp *rc = ibv_create_qp(pd, &ia);
	ia.qp_type = IBV_QPT_UD;
	struct ibv_qp *ud = ibv_create_qp(pd, &ia);
	struct ibv_qp_init_attr_ex xa = {
		.qp_type = IBV_QPT_DRIVER, .comp_mask = IBV_QP_INIT_ATTR_PD, .pd = pd,
		.send_cq = scq, .recv_cq = rcq,
		.cap = { .max_send_wr = 64, .max_recv_wr = RECVS, .max_send_sge = 4,
			 .max_recv_sge = 4 },
	};
	struct rxudv_qp_init_attr x = { .max_peers = 64 };
	struct ibv_qp *xud = rxudv_create_qp(ctx, &xa, &x, sizeof(x));
	if (!rc || !ud || !xud)
		die("create QPs", errno);
	uint32_t rq_psn = rnd() & 0xffffff, sq_psn = rnd() & 0xffffff;
	to_rts(rc, gid_index, &peer, rq_psn, sq_psn);
	to_rts(ud, gid_index, &peer, 0, 0);
	to_rts(xud, gid_index, &peer, 0, 0);
	post_recvs(rc, mr);
	post_recvs(ud, mr);
	post_recvs(xud, mr);

	if (victims) {
		char tmp[4096];
		snprintf(tmp, sizeof(tmp), "%s.tmp", victims);
		FILE *f = fopen(tmp, "w");
		if (!f)
			die(tmp, errno);
		struct ibv_qp *qps[] = { rc, ud, xud };
		const char *names[] = { "rc", "ud", "xud" };
		for (int i = 0; i < 3; i++)
			fprintf(f, "victim %s qpn %u peer-qpn %u qkey %u rkey %u va %llu len %u\n",
				names[i], qps[i]->qp_num, PEER_QPN, QKEY, mr->rkey,
				(unsigned long long)(uintptr_t)buf, MR_LEN);
		if (fclose(f) || rename(tmp, victims))
			die(victims, errno);
	}
	printf("ring-storm: rc qpn %u (rq_psn %u sq_psn %u), ud qpn %u, xud qpn %u, rkey %#x\n",
	       rc->qp_num, rq_psn, sq_psn, ud->qp_num, xud->qp_num, mr->rkey);

	struct map maps[MAX_MAPS];
	int nmaps = find_rings(maps);
	if (!nmaps) {
		fprintf(stderr, "ring-storm: no ring of the device is mapped\n");
		return 1;
	}
	struct ibv_qp *qps[] = { rc, ud, xud };
	long refused = 0, rung = 0;
	long long t0 = now_ms();
	for (long i = 0; i < iters; i++) {
		scribble(&maps[below(nmaps)], mr);
		if (below(2)) {
			rung++;
			refused += doorbell(ctx, qps[below(3)]) != 0;
		}
	}
	printf("ring-storm: %ld writes into %d rings, %ld doorbells (%ld refused) in %lld ms; "
	       "exiting without cleaning up\n", iters, nmaps, rung, refused, now_ms() - t0);
	fflush(stdout);
	_exit(0);
}
