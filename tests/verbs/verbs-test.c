// SPDX-License-Identifier: GPL-2.0 OR Linux-OpenIB
/*
 * verbs-test: drives the control verbs of one RDMA device through
 * libibverbs and prints TAP. Run against rxud and against rxe on the same
 * netdev, it must give the same results where rxe supports a verb.
 *
 *   verbs-test -d DEV              run the checks
 *   verbs-test -d DEV -H SECONDS   open DEV, allocate 3 PDs and an MR, print
 *                                  "ready", then sleep (for the resource
 *                                  cleanup test, which kills it)
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>
#include <infiniband/verbs.h>

static int n_checks, n_failed;

static void check(int ok, const char *fmt, ...)
{
	va_list ap;

	n_checks++;
	if (!ok)
		n_failed++;
	printf("%s %d - ", ok ? "ok" : "not ok", n_checks);
	va_start(ap, fmt);
	vprintf(fmt, ap);
	va_end(ap);
	printf("\n");
	fflush(stdout);
}

/* A verb that returns an errno value must return exactly @want. */
static void check_err(int got, int want, const char *what)
{
	check(got == want, "%s: %s (got %s)", what, want ? strerror(want) : "success",
	      got ? strerror(got) : "success");
}

static struct ibv_context *open_dev(const char *name)
{
	struct ibv_device **list = ibv_get_device_list(NULL);
	struct ibv_context *ctx = NULL;

	for (int i = 0; list && list[i]; i++)
		if (!strcmp(ibv_get_device_name(list[i]), name))
			ctx = ibv_open_device(list[i]);
	ibv_free_device_list(list);
	return ctx;
}

#define NPDS 64

/* ibv_reg_mr must fail with @want in errno. */
static void check_reg_fails(struct ibv_pd *pd, void *addr, size_t len, int access, int want,
			    const char *what)
{
	struct ibv_mr *mr;

	errno = 0;
	mr = ibv_reg_mr(pd, addr, len, access);
	check(!mr && errno == want, "%s: %s (got %s)", what, strerror(want),
	      mr ? "success" : strerror(errno));
	if (mr)
		ibv_dereg_mr(mr);
}

static void mr_checks(struct ibv_context *ctx)
{
	const int rw = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ;
	size_t len = 1 << 20;
	struct ibv_mr *mr, *mr2;
	struct ibv_pd *pd;
	void *buf, *hole;

	pd = ibv_alloc_pd(ctx);
	check(pd != NULL, "alloc PD for MRs");
	buf = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (!pd || buf == MAP_FAILED)
		return;

	mr = ibv_reg_mr(pd, buf, len, rw);
	check(mr != NULL, "reg_mr 1 MiB, local+remote read/write");
	if (mr) {
		check(mr->addr == buf && mr->length == len, "MR reports its address and length");
		check(mr->lkey != 0 && mr->rkey != 0, "MR has non-zero keys");
	}
	mr2 = ibv_reg_mr(pd, buf, len, IBV_ACCESS_LOCAL_WRITE);
	check(mr2 != NULL, "a second MR over the same memory");
	if (mr && mr2)
		check(mr2->lkey != mr->lkey, "the two MRs have different lkeys");

	check_reg_fails(pd, buf, len, IBV_ACCESS_REMOTE_WRITE, EINVAL,
			"reg_mr remote write without local write");
	check_reg_fails(pd, buf, len, IBV_ACCESS_REMOTE_ATOMIC, EINVAL,
			"reg_mr remote atomic without local write");
	check_reg_fails(pd, buf, len, 1 << 30, EINVAL, "reg_mr with an unknown access flag");

	/* An address range with nothing mapped behind it. */
	hole = mmap(NULL, len, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (hole != MAP_FAILED) {
		munmap(hole, len);
		check_reg_fails(pd, hole, len, IBV_ACCESS_LOCAL_WRITE, EFAULT, "reg_mr over unmapped memory");
	}

	check_err(ibv_dealloc_pd(pd), EBUSY, "dealloc_pd while MRs use it");
	check_err(mr ? ibv_dereg_mr(mr) : -1, 0, "dereg_mr");
	check_err(mr2 ? ibv_dereg_mr(mr2) : -1, 0, "dereg_mr of the second MR");
	check_err(ibv_dealloc_pd(pd), 0, "dealloc_pd once unused");
	munmap(buf, len);
}

static int hold(struct ibv_context *ctx, int seconds)
{
	struct ibv_pd *pd[3];

	for (int i = 0; i < 3; i++)
		if (!(pd[i] = ibv_alloc_pd(ctx))) {
			perror("ibv_alloc_pd");
			return 1;
		}
	if (!ibv_reg_mr(pd[0], malloc(1 << 16), 1 << 16, IBV_ACCESS_LOCAL_WRITE)) {
		perror("ibv_reg_mr");
		return 1;
	}
	printf("ready\n");
	fflush(stdout);
	sleep(seconds);
	return 0;
}

int main(int argc, char **argv)
{
	struct ibv_device_attr dattr;
	struct ibv_port_attr pattr;
	struct ibv_pd *pds[NPDS];
	const char *dev = NULL;
	struct ibv_context *ctx;
	union ibv_gid gid;
	int hold_s = 0, opt, ok;
	__be16 pkey;

	while ((opt = getopt(argc, argv, "d:H:")) != -1) {
		if (opt == 'd')
			dev = optarg;
		else if (opt == 'H')
			hold_s = atoi(optarg);
		else
			return 2;
	}
	if (!dev) {
		fprintf(stderr, "usage: %s -d DEV [-H SECONDS]\n", argv[0]);
		return 2;
	}
	ctx = open_dev(dev);
	if (hold_s)
		return ctx ? hold(ctx, hold_s) : 1;

	printf("TAP version 13\n");
	check(ctx != NULL, "open %s", dev);
	if (!ctx) {
		printf("1..%d\n", n_checks);
		return 1;
	}

	check_err(ibv_query_device(ctx, &dattr), 0, "query_device");
	check(dattr.phys_port_cnt == 1, "one port (%d)", dattr.phys_port_cnt);
	check(dattr.max_pd >= NPDS, "max_pd %d >= %d", dattr.max_pd, NPDS);
	check(dattr.max_pkeys >= 1, "max_pkeys %d >= 1", dattr.max_pkeys);

	check_err(ibv_query_port(ctx, 1, &pattr), 0, "query_port 1");
	check(pattr.link_layer == IBV_LINK_LAYER_ETHERNET, "port 1 link layer is Ethernet");
	check(pattr.gid_tbl_len > 0 && pattr.pkey_tbl_len == 1, "gid_tbl_len %d > 0, pkey_tbl_len %d == 1",
	      pattr.gid_tbl_len, pattr.pkey_tbl_len);
	check_err(ibv_query_port(ctx, 2, &pattr), EINVAL, "query_port 2 (no such port)");
	check_err(ibv_query_port(ctx, 0, &pattr), EINVAL, "query_port 0 (ports count from 1)");

	check_err(ibv_query_gid(ctx, 1, 0, &gid), 0, "query_gid 1/0");
	check(gid.global.subnet_prefix == htobe64(0xfe80000000000000ULL), "GID 0 is the link-local one");
	check_err(ibv_query_pkey(ctx, 1, 0, &pkey), 0, "query_pkey 1/0");
	check(pkey == htobe16(0xffff), "P_Key 0 is 0xffff (%#x)", be16toh(pkey));

	ok = 1;
	for (int i = 0; i < NPDS; i++)
		ok &= (pds[i] = ibv_alloc_pd(ctx)) != NULL;
	check(ok, "alloc %d PDs", NPDS);
	ok = 1;
	for (int i = 0; i < NPDS; i++)
		ok &= pds[i] && ibv_dealloc_pd(pds[i]) == 0;
	check(ok, "dealloc %d PDs", NPDS);

	mr_checks(ctx);

	check_err(ibv_close_device(ctx), 0, "close_device");
	printf("1..%d\n", n_checks);
	return n_failed ? 1 : 0;
}
