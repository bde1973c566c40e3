// SPDX-License-Identifier: GPL-2.0 OR Linux-OpenIB
/*
 * rxud-mcast: RDMC (rdma-core-provider/rdmc, Documentation/xud.rst,
 * "RDMC over XUD"), one process per member, perftest-shaped.
 *
 *   rxud-mcast -d DEV -x GIDINDEX -D DIR -n MEMBERS -r RANK [-R ROOT]
 *              [-a ALG[:ITERS][,ALG[:ITERS]]...] [-s SIZES] [-b BLOCK]
 *              [-i ITERS] [-S SEED] [-T SECONDS] [-k HEARTBEAT_MS]
 *              [-c RETRY_CNT] [-q] [-t]
 *   rxud-mcast -P -n MEMBERS|MIN-MAX [-a ALG[,ALG]...] [-s SIZES] [-b BLOCK]
 *
 * The member list is the directory DIR: each member opens its device and
 * XUD QP, writes "ADDRESS/QPN" (its GID as an address) to DIR/member.RANK
 * and reads the others' from their files, waiting up to SECONDS (60) for
 * all MEMBERS of them. Then, for each ALG of the list (seq, chain, tree,
 * pipeline; default pipeline), in order, the members make a group (its
 * number G: its place in the list, from 1) with root ROOT (0) and blocks
 * of BLOCK bytes (1M), and the root sends ITERS (-i's, default 3, unless
 * the ALG has its own) objects of each size in SIZES: a comma-separated
 * list of sizes (suffixes K, M, G: binary) and ranges MIN-MAX (MIN, then
 * doubling up to MAX): -a seq,chain,tree,pipeline -s 1M-64M is the
 * benchmark's sweep. Every member must be given the same options but -r.
 *
 * The root fills each object with a pattern of SEED (1), the group, the
 * size and the iteration (every 8-byte word different), and prints
 *
 *   iter I group G alg ALG size BYTES ms T MBps M
 *
 * (T: from rdmc_send to the root's completion, when every member has the
 * object; MB = 2^20 bytes, of the object, whatever the number of members)
 * and, for each size, "result group G alg ALG members N size BYTES block
 * BLOCK iters I min_ms X median_ms Y MBps Z" (Z of the median). Every
 * member prints for each object, the root its own checksum:
 *
 *   verify group G alg ALG size BYTES iter I checksum C ok|sent|BAD at offset O
 *
 * (C: FNV-1a of the object's 8-byte words; ok: every byte is the root's
 * pattern). -q leaves the check out (a benchmark's times then leave out
 * the members' checking, which runs before they report completion).
 *
 * After each group, a line of its counters (rdmc_group_stats): "stats
 * group G alg ALG blocks_sent ... blocks_refused R ctrl_refused C ...
 * copies_refused D".
 *
 * -t makes this member (not the root) hostile, a relay that alters what
 * it passes on: once it holds the whole object (its blocks_received
 * says so; its own copy has then passed the digest check), it overwrites
 * its buffer with 0x5a bytes after every pass of rdmc_progress() (1 ms)
 * until the transfer ends, so what it relays from then on is not the
 * root's (with the tree, whose relays wait for the whole object, nearly
 * all of it). No member may take such an object (the root's digest,
 * rdmc.h): none may print BAD.
 * When a member fails, each survivor prints "member N failed" (once per
 * failed member) and its stats line, leaves the group and exits 3. Exit 0
 * when every object arrived intact, 4 if one did not, 1 on an error or
 * timeout, 2 on usage.
 *
 * -P checks the schedules without a device: for each algorithm, each
 * group size and each object size, every member's plan (rdmc_plan) run
 * asynchronously (transfers delivered in random order, each member
 * sending in its plan's order, at most 4 in flight) must bring every
 * block to every member once, from the member its plan names, and finish.
 * One line per case, "plan alg A members N root R blocks B steps S ok"
 * (S: the pipeline's synchronous steps, 0 for the others; root: N / 2);
 * exit 0 if all are ok. First, BLAKE2s-256 (the objects' digest) against
 * known answers (Python's hashlib.blake2s): "digest blake2s-256 ok".
 */
#include <arpa/inet.h>
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "util.h"
#include "xud-tool.h"
#include "rdmc.h"
#include "blake2s.h"

#define MAX_GROUPS	8
#define MAX_SIZES	32

static struct rdmc_ctx *ctx;
static int n_members, rank, root, iters = 3, verify_on = 1, tamper;
static unsigned long long seed = 1;
static uint32_t block = 1 << 20;
/* The groups, one per ALG of -a: its algorithm, its objects per size (0: -i's). */
static struct {
	int alg, iters;
} groups[MAX_GROUPS];
static int n_groups;
static size_t sizes[MAX_SIZES];
static int n_sizes;
static long long timeout_ms = 60000;

/* A member failed: sticky, whatever transfer the callback came in. */
static int member_failed;

/* What the current transfer's callbacks report. */
static struct transfer {
	int done, bad;
	long long done_at;
	uint64_t key;
	size_t size;
	int group, alg, iter;
	uint8_t *buf;
} cur;

static void die(const char *what)
{
	fprintf(stderr, "rxud-mcast: %s: %s\n", what, strerror(errno));
	exit(1);
}

static uint64_t mix64(uint64_t z)
{
	z += 0x9e3779b97f4a7c15ULL;
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
	return z ^ (z >> 31);
}

/* The pattern's key of one object. */
static uint64_t object_key(int group, int size_idx, int iter)
{
	return mix64(seed ^ (uint64_t)group << 48 ^ (uint64_t)size_idx << 32 ^ (uint64_t)iter);
}

static void fill_object(uint8_t *p, size_t len, uint64_t key)
{
	size_t i;

	for (i = 0; i + 8 <= len; i += 8) {
		uint64_t w = mix64(key + i / 8);

		memcpy(p + i, &w, 8);
	}
	if (i < len) {
		uint64_t w = mix64(key + i / 8);

		memcpy(p + i, &w, len - i);
	}
}

/* The offset of the first byte not of the pattern, or -1. */
static long long check_object(const uint8_t *p, size_t len, uint64_t key)
{
	size_t i;

	for (i = 0; i + 8 <= len; i += 8) {
		uint64_t w = mix64(key + i / 8);

		if (memcmp(p + i, &w, 8))
			break;
	}
	for (; i < len; i++) {
		uint64_t w = mix64(key + i / 8);

		if (p[i] != ((uint8_t *)&w)[i % 8])
			return (long long)i;
	}
	return -1;
}

/* FNV-1a over 8-byte words (then the bytes left): a byte at a time is
 * slow in a TCG guest. */
static uint64_t checksum(const uint8_t *p, size_t len)
{
	uint64_t h = 0xcbf29ce484222325ULL, w;
	size_t i;

	for (i = 0; i + 8 <= len; i += 8) {
		memcpy(&w, p + i, 8);
		h = (h ^ w) * 0x100000001b3ULL;
	}
	for (; i < len; i++)
		h = (h ^ p[i]) * 0x100000001b3ULL;
	return h;
}

static void on_complete(struct rdmc_group *g, uint32_t seq, size_t size, void *arg)
{
	long long bad;

	(void)g;
	(void)seq;
	(void)arg;
	cur.done = 1;
	cur.done_at = now_ms();
	/* (A hostile member's copy is what it made of it.) */
	if (rank == root || !verify_on || tamper)
		return;
	/* Here, before the member reports DONE: the buffer is ours until then. */
	bad = size == cur.size ? check_object(cur.buf, size, cur.key) : 0;
	printf("verify group %d alg %s size %zu iter %d checksum %016llx ", cur.group,
	       rdmc_algorithm_name(cur.alg), size, cur.iter,
	       (unsigned long long)checksum(cur.buf, size));
	if (bad < 0) {
		printf("ok\n");
	} else {
		printf("BAD at offset %lld\n", bad);
		cur.bad = 1;
	}
}

static void on_failed(struct rdmc_group *g, unsigned int member, void *arg)
{
	(void)g;
	(void)arg;
	printf("member %u failed\n", member);
	member_failed = 1;
}

/* Runs the context until the transfer completes, a member fails, or the
 * time is up. */
static void wait_transfer(struct rdmc_group *g)
{
	long long end = now_ms() + timeout_ms;
	uint64_t nblocks = (cur.size + block - 1) / block;
	struct rdmc_stats st;
	uint64_t base;

	rdmc_group_stats(g, &st);
	base = st.blocks_received;
	while (!cur.done && !member_failed) {
		if (now_ms() >= end) {
			errno = ETIMEDOUT;
			die("waiting for a transfer");
		}
		if (rdmc_progress(ctx, tamper ? 1 : 200) < 0 && !member_failed)
			die("rdmc_progress");
		rdmc_group_stats(g, &st);
		if (tamper && st.blocks_received - base >= nblocks)
			memset(cur.buf, 0x5a, cur.size);
	}
}

/* The member files: ours written, everyone's read. */
static void rendezvous(const char *dir, struct rdmc_member *m)
{
	char addr[INET6_ADDRSTRLEN], path[4096], tmp[4096];
	const union ibv_gid *gid = rdmc_gid(ctx);
	static const uint8_t v4_prefix[12] = { [10] = 0xff, [11] = 0xff };
	long long end = now_ms() + timeout_ms;
	FILE *f;

	if (!memcmp(gid->raw, v4_prefix, sizeof(v4_prefix)))
		inet_ntop(AF_INET, &gid->raw[12], addr, sizeof(addr));
	else
		inet_ntop(AF_INET6, gid->raw, addr, sizeof(addr));
	printf("member %d address %s qpn %u\n", rank, addr, rdmc_qpn(ctx));
	snprintf(tmp, sizeof(tmp), "%s/.member.%d", dir, rank);
	snprintf(path, sizeof(path), "%s/member.%d", dir, rank);
	f = fopen(tmp, "w");
	if (!f || fprintf(f, "%s/%u\n", addr, rdmc_qpn(ctx)) < 0 || fclose(f) || rename(tmp, path))
		die(path);
	for (int i = 0; i < n_members; i++) {
		char line[256];

		snprintf(path, sizeof(path), "%s/member.%d", dir, i);
		while (!(f = fopen(path, "r"))) {
			if (now_ms() >= end) {
				errno = ETIMEDOUT;
				die(path);
			}
			usleep(50000);
		}
		if (!fgets(line, sizeof(line), f)) {
			errno = EINVAL;
			die(path);
		}
		fclose(f);
		line[strcspn(line, "\n")] = 0;
		if (parse_peer_arg(line, &m[i].gid, &m[i].qpn)) {
			errno = EINVAL;
			die(path);
		}
	}
}

static int cmp_ll(const void *a, const void *b)
{
	long long x = *(const long long *)a, y = *(const long long *)b;

	return x < y ? -1 : x > y;
}

static void stats_line(struct rdmc_group *g)
{
	struct rdmc_stats st;

	rdmc_group_stats(g, &st);
	printf("stats group %d alg %s blocks_sent %llu blocks_received %llu "
	       "blocks_refused %llu ctrl_refused %llu heartbeats %llu copies_refused %llu\n",
	       cur.group, rdmc_algorithm_name(cur.alg), (unsigned long long)st.blocks_sent,
	       (unsigned long long)st.blocks_received, (unsigned long long)st.blocks_refused,
	       (unsigned long long)st.ctrl_refused, (unsigned long long)st.heartbeats,
	       (unsigned long long)st.copies_refused);
}

/* Leaves a group whose member failed: exit 3. */
static void failed_exit(struct rdmc_group *g)
{
	if (g) {
		stats_line(g);
		rdmc_destroy_group(g, 10000);
	}
	rdmc_close(ctx);
	exit(3);
}

/* The root's line for each size: minimum and median of its objects' times. */
static void result_line(int gi, const char *name, size_t size, long long *times, int n)
{
	long long med;

	qsort(times, n, sizeof(*times), cmp_ll);
	med = times[(n - 1) / 2] ? times[(n - 1) / 2] : 1;
	printf("result group %d alg %s members %d size %zu block %u iters %d min_ms %lld "
	       "median_ms %lld MBps %.1f\n", gi, name, n_members, size, block, n, times[0], med,
	       size / 1048576.0 / (med / 1e3));
}

/* Object @it of size @size in group @gi: the root sends it, and each
 * member waits for it (its callback checks it). The root's time, in ms. */
static long long one_object(struct rdmc_group *g, int gi, int alg, int s, int it)
{
	const char *name = rdmc_algorithm_name(alg);
	size_t size = sizes[s];
	long long t0, ms;

	cur = (struct transfer){ .buf = cur.buf, .bad = cur.bad, .group = gi, .alg = alg,
				 .iter = it, .size = size, .key = object_key(gi, s, it) };
	if (rank != root) {
		wait_transfer(g);
		if (member_failed)
			failed_exit(g);
		return 0;
	}
	fill_object(cur.buf, size, cur.key);
	if (verify_on)
		printf("verify group %d alg %s size %zu iter %d checksum %016llx sent\n", gi,
		       name, size, it, (unsigned long long)checksum(cur.buf, size));
	t0 = now_ms();
	if (rdmc_send(g, size)) {
		if (errno == EPIPE)
			failed_exit(g);
		die("rdmc_send");
	}
	wait_transfer(g);
	if (member_failed)
		failed_exit(g);
	ms = cur.done_at - t0;
	printf("iter %d group %d alg %s size %zu ms %lld MBps %.1f\n", it, gi, name, size, ms,
	       size / 1048576.0 / ((ms ? ms : 1) / 1e3));
	return ms;
}

/* Group @gi of the -a list: made, its objects sent, left. */
static void run_group(struct rdmc_member *members, size_t max_size, int hb_ms, int gi)
{
	int alg = groups[gi - 1].alg, n_iters = groups[gi - 1].iters;
	const char *name = rdmc_algorithm_name(alg);
	struct rdmc_group_attr ga = {
		.id = (uint8_t)gi, .n_members = n_members, .members = members, .rank = rank,
		.root = root, .algorithm = alg, .block_size = block, .buffer = cur.buf,
		.buffer_len = max_size, .heartbeat_ms = hb_ms, .complete = on_complete,
		.failed = on_failed,
	};
	long long *times = calloc(n_iters, sizeof(*times));
	struct rdmc_group *g;

	if (!times)
		die("calloc");
	g = rdmc_create_group(ctx, &ga, (int)timeout_ms);
	if (!g) {
		if (errno == EHOSTDOWN)
			failed_exit(NULL);
		die("rdmc_create_group");
	}
	printf("group %d alg %s members %d root %d block %u\n", gi, name, n_members, root, block);
	cur.group = gi;
	cur.alg = alg;
	for (int s = 0; s < n_sizes; s++) {
		for (int it = 1; it <= n_iters; it++)
			times[it - 1] = one_object(g, gi, alg, s, it);
		if (rank == root)
			result_line(gi, name, sizes[s], times, n_iters);
	}
	stats_line(g);
	free(times);
	if (rdmc_destroy_group(g, 10000))
		die("rdmc_destroy_group");
}

static int run(const char *dev, int gid_idx, const char *dir, int hb_ms, int retry_cnt)
{
	struct rdmc_ctx_attr ca = { .retry_cnt = (uint8_t)retry_cnt };
	struct rdmc_member members[RDMC_MAX_MEMBERS];
	size_t max_size = 0;

	for (int s = 0; s < n_sizes; s++)
		if (sizes[s] > max_size)
			max_size = sizes[s];
	cur.buf = malloc(max_size);
	if (!cur.buf)
		die("malloc");
	ctx = rdmc_open(dev, gid_idx, &ca);
	if (!ctx)
		die("rdmc_open");
	rendezvous(dir, members);
	for (int gi = 1; gi <= n_groups; gi++)
		run_group(members, max_size, hb_ms, gi);
	if (rdmc_close(ctx))
		die("rdmc_close");
	free(cur.buf);
	return cur.bad ? 4 : 0;
}

/* --- -P: the schedules, run without a device --- */

/* One member's plan, executed: next send, in flight, blocks held. */
struct sim_member {
	struct rdmc_plan plan;
	uint8_t *have;
	uint32_t held, next, out;
};

static int check_plans(enum rdmc_algorithm a, unsigned int n, uint32_t nb, unsigned int rt)
{
	struct sim_member *m = calloc(n, sizeof(*m));
	struct { unsigned int from; struct rdmc_plan_send s; } *fly;
	uint32_t n_fly = 0, total = 0;
	const char *why = NULL;

	if (!m)
		die("calloc");
	for (unsigned int r = 0; r < n; r++) {
		if (rdmc_plan(&m[r].plan, a, n, rt, r, nb))
			die("rdmc_plan");
		m[r].have = calloc(nb, 1);
		if (!m[r].have)
			die("calloc");
		if (r == rt) {
			memset(m[r].have, 1, nb);
			m[r].held = nb;
		}
		total += m[r].plan.n_sends;
	}
	fly = malloc((total + 1) * sizeof(*fly));
	if (!fly)
		die("malloc");
	for (;;) {
		/* Each member posts what its plan lets it, up to 4 in flight. */
		for (unsigned int r = 0; r < n; r++) {
			struct sim_member *s = &m[r];

			while (s->next < s->plan.n_sends && s->out < 4) {
				const struct rdmc_plan_send *x = &s->plan.sends[s->next];

				if (s->plan.whole_first ? s->held < nb : !s->have[x->block])
					break;
				fly[n_fly].from = r;
				fly[n_fly++].s = *x;
				s->next++;
				s->out++;
			}
		}
		if (!n_fly)
			break;
		/* One of them, any, arrives. */
		uint32_t i = (uint32_t)(random() % n_fly);
		unsigned int from = fly[i].from, to = fly[i].s.to;
		uint32_t b = fly[i].s.block;

		fly[i] = fly[--n_fly];
		m[from].out--;
		if (to >= n || b >= nb) {
			why = "a send out of range";
			break;
		}
		if (m[to].plan.from[b] != (int32_t)from) {
			why = "a block from a member the receiver's plan does not name";
			break;
		}
		if (m[to].have[b]) {
			why = "a block sent twice to one member";
			break;
		}
		m[to].have[b] = 1;
		m[to].held++;
	}
	for (unsigned int r = 0; r < n && !why; r++) {
		if (m[r].held != nb)
			why = "a member without every block (a deadlock)";
		else if (m[r].next != m[r].plan.n_sends)
			why = "sends left over";
	}
	printf("plan alg %s members %u root %u blocks %u steps %u %s%s\n", rdmc_algorithm_name(a),
	       n, rt, nb, m[0].plan.steps, why ? "FAILED: " : "ok", why ? why : "");
	for (unsigned int r = 0; r < n; r++) {
		rdmc_plan_free(&m[r].plan);
		free(m[r].have);
	}
	free(m);
	free(fly);
	return why ? 1 : 0;
}

/*
 * BLAKE2s-256 of "abc" (RFC 7693, appendix B) and of 1000 and 100000
 * bytes (i * 7 + 3) mod 256: the last two cross block boundaries with a
 * partial last block.
 */
static int check_digest(void)
{
	static uint8_t buf[100000];
	static const struct {
		const void *data;
		size_t len;
		const char *hex;
	} kat[] = {
		{ "abc", 3, "508c5e8c327c14e2e1a72ba34eeb452f37458b209ed63a294d999b4c86675982" },
		{ buf, 1000, "02a016193469710efadf8fb005ca19b509331cb847df5598cc0794bded669681" },
		{ buf, 100000, "537e1a8baaa0888b5fe4e55e122566d8f4acc5c27ca9570ef2dc26b34ffaff85" },
	};
	uint8_t d[BLAKE2S_OUT];
	char hex[2 * BLAKE2S_OUT + 1];
	int failed = 0;

	for (size_t i = 0; i < sizeof(buf); i++)
		buf[i] = (uint8_t)(i * 7 + 3);
	for (size_t k = 0; k < sizeof(kat) / sizeof(kat[0]); k++) {
		blake2s256(kat[k].data, kat[k].len, d);
		for (int i = 0; i < BLAKE2S_OUT; i++)
			sprintf(hex + 2 * i, "%02x", d[i]);
		if (strcmp(hex, kat[k].hex)) {
			printf("digest blake2s-256 of %zu bytes %s FAILED: want %s\n", kat[k].len,
			       hex, kat[k].hex);
			failed = 1;
		}
	}
	if (!failed)
		printf("digest blake2s-256 ok\n");
	return failed;
}

static int plan_mode(int n_min, int n_max)
{
	int failed = check_digest();

	srandom((unsigned int)seed);
	for (int a = 0; a < n_groups; a++)
		for (int n = n_min; n <= n_max; n++)
			for (int s = 0; s < n_sizes; s++) {
				uint32_t nb = (uint32_t)((sizes[s] + block - 1) / block);

				failed |= check_plans(groups[a].alg, n, nb, n / 2);
			}
	return failed;
}

/* --- options --- */

static int parse_size(const char *s, size_t *v)
{
	char *end;
	unsigned long long x = strtoull(s, &end, 0);

	switch (*end) {
	case 'K': x <<= 10; end++; break;
	case 'M': x <<= 20; end++; break;
	case 'G': x <<= 30; end++; break;
	}
	if (end == s || *end || !x)
		return -1;
	*v = x;
	return 0;
}

/* SIZES: sizes and MIN-MAX ranges (doubling), comma-separated. */
static int parse_sizes(char *arg)
{
	for (char *tok = strtok(arg, ","); tok; tok = strtok(NULL, ",")) {
		char *dash = strchr(tok, '-');
		size_t lo, hi;

		if (dash)
			*dash = 0;
		if (parse_size(tok, &lo) || (dash ? parse_size(dash + 1, &hi) : (hi = lo, 0)) ||
		    hi < lo)
			return -1;
		for (size_t v = lo; v <= hi; v *= 2) {
			if (n_sizes == MAX_SIZES)
				return -1;
			sizes[n_sizes++] = v;
		}
	}
	return n_sizes ? 0 : -1;
}

/* ALG[:ITERS], comma-separated: one group each. */
static int parse_groups(char *arg)
{
	for (char *tok = strtok(arg, ","); tok; tok = strtok(NULL, ",")) {
		char *colon = strchr(tok, ':');
		int a, n = 0;

		if (colon) {
			*colon = 0;
			n = atoi(colon + 1);
			if (n < 1)
				return -1;
		}
		a = rdmc_algorithm_parse(tok);
		if (a < 0 || n_groups == MAX_GROUPS)
			return -1;
		groups[n_groups].alg = a;
		groups[n_groups++].iters = n;
	}
	return n_groups ? 0 : -1;
}

int main(int argc, char **argv)
{
	const char *dev = NULL, *dir = NULL, *n_arg = NULL;
	int gid_idx = -1, hb_ms = 0, retry_cnt = 0, plan = 0, c;

	setvbuf(stdout, NULL, _IOLBF, 0);
	rank = -1;
	while ((c = getopt(argc, argv, "d:x:D:n:r:R:a:s:b:i:S:T:k:c:qtP")) != -1) {
		switch (c) {
		case 'd': dev = optarg; break;
		case 'x': gid_idx = atoi(optarg); break;
		case 'D': dir = optarg; break;
		case 'n': n_arg = optarg; break;
		case 'r': rank = atoi(optarg); break;
		case 'R': root = atoi(optarg); break;
		case 'a':
			if (parse_groups(optarg))
				goto usage;
			break;
		case 's':
			if (parse_sizes(optarg))
				goto usage;
			break;
		case 'b': {
			size_t v;

			if (parse_size(optarg, &v) || v > RDMC_MAX_BLOCK_SIZE)
				goto usage;
			block = (uint32_t)v;
			break;
		}
		case 'i': iters = atoi(optarg); break;
		case 'S': seed = strtoull(optarg, NULL, 0); break;
		case 'T': timeout_ms = atoll(optarg) * 1000; break;
		case 'k': hb_ms = atoi(optarg); break;
		case 'c': retry_cnt = atoi(optarg); break;
		case 'q': verify_on = 0; break;
		case 't': tamper = 1; break;
		case 'P': plan = 1; break;
		default: goto usage;
		}
	}
	if (!n_groups)
		groups[n_groups++].alg = RDMC_PIPELINE;
	if (!n_sizes)
		sizes[n_sizes++] = 1 << 20;
	if (!n_arg || optind != argc)
		goto usage;
	if (plan) {
		int lo, hi;
		char *dash = strchr(n_arg, '-');

		lo = atoi(n_arg);
		hi = dash ? atoi(dash + 1) : lo;
		if (lo < 2 || hi < lo || hi > RDMC_MAX_MEMBERS)
			goto usage;
		return plan_mode(lo, hi);
	}
	n_members = atoi(n_arg);
	if (!dev || gid_idx < 0 || !dir || n_members < 2 || n_members > RDMC_MAX_MEMBERS ||
	    rank < 0 || rank >= n_members || root < 0 || root >= n_members || iters < 1 ||
	    timeout_ms < 1000 || hb_ms < 0 || retry_cnt < 0 || retry_cnt > 7 ||
	    (tamper && rank == root))
		goto usage;
	for (int i = 0; i < n_groups; i++)
		if (!groups[i].iters)
			groups[i].iters = iters;
	return run(dev, gid_idx, dir, hb_ms, retry_cnt);
usage:
	fprintf(stderr, "usage: %s -d DEV -x GIDINDEX -D DIR -n MEMBERS -r RANK [-R ROOT]\n"
		"         [-a ALG[:ITERS][,ALG[:ITERS]]...] [-s SIZES] [-b BLOCK] [-i ITERS]\n"
		"         [-S SEED] [-T SECONDS] [-k HEARTBEAT_MS] [-c RETRY_CNT] [-q] [-t]\n"
		"       %s -P -n MEMBERS|MIN-MAX [-a ALG[,ALG]...] [-s SIZES] [-b BLOCK]\n"
		"ALG: seq, chain, tree, pipeline; SIZES: e.g. 4M or 1M-64M or 1M,3M\n",
		argv[0], argv[0]);
	return 2;
}
