/* SPDX-License-Identifier: GPL-2.0 OR Linux-OpenIB */
/*
 * TAP output for the libibverbs test programs (verbs-test, rc-test): one
 * "ok N - ..." or "not ok N - ..." line per check; the caller prints the
 * plan ("1..N") at the end.
 */
#ifndef RXUD_TESTS_VERBS_TAP_H
#define RXUD_TESTS_VERBS_TAP_H

#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <infiniband/verbs.h>
#include "util.h"

#define ARRAY_SIZE(a) (sizeof(a) / sizeof((a)[0]))

static int n_checks, n_failed;

__attribute__((format(printf, 2, 3)))
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

static void vcheck_err(int got, int want, const char *fmt, va_list ap)
{
	char what[256];

	vsnprintf(what, sizeof(what), fmt, ap);
	check(got == want, "%s: %s (got %s)", what, want ? strerror(want) : "success",
	      got ? strerror(got) : "success");
}

/* A verb that returns an errno value must return exactly @want. */
__attribute__((format(printf, 3, 4), unused))
static void check_err(int got, int want, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vcheck_err(got, want, fmt, ap);
	va_end(ap);
}

/* The device called @name, opened; NULL if there is none. */

#endif
