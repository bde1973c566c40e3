// SPDX-License-Identifier: GPL-2.0
/*
 * rxud's module parameters that are not the network code's (net.c has
 * trains, gro.c has gro): timing, read through rxud_timing
 * (rust/kext/timer.rs), cc, read through rxud_cc (rust/kext/params.rs),
 * and max_qp, read through rxud_max_qp
 * (rust/kext/params.rs), with the setter that keeps it in range.
 *
 * Why C: the module! macro of 6.12's Rust declares no parameters, and
 * module_param and module_param_cb are macros that emit static
 * kernel_param structures into a section of the module.
 */

#include <linux/kernel.h>
#include <linux/module.h>
#include <linux/moduleparam.h>
#include "helpers.h"

/*
 * Timing (off by default): nanoseconds spent in rxud's receive and
 * transmit steps, added up in hw_counters (rx_ns, rx_icrc_ns,
 * tx_build_ns, tx_ip_ns), for the per-packet budget of
 * Documentation/performance.rst. Two clock reads per step and packet
 * when on; one load when off.
 */
static bool timing;
module_param(timing, bool, 0644);
MODULE_PARM_DESC(timing, "Count the nanoseconds spent in rxud's receive and transmit steps (default: off)");

bool rxud_timing(void)
{
	return READ_ONCE(timing);
}

/*
 * Congestion control (on by default; rust/proto/congestion): RC requests
 * and XUD data go out ECN-capable (ECT(0)), packets that arrive marked CE
 * are answered with CNPs, and senders cut their windows for CNPs (and XUD
 * streams for losses beyond their tolerance). Off: none of it, for
 * comparisons (RC keeps its loss law either way).
 */
static bool cc = true;
module_param(cc, bool, 0644);
MODULE_PARM_DESC(cc, "Congestion control: ECN marking, CNPs, window cuts (default: on)");

bool rxud_cc(void)
{
	return READ_ONCE(cc);
}

/*
 * Most QPs of each device created from now on (rust/kext/params.rs): a small
 * number makes QP numbers come back soon, which tests of XUD's hold on a
 * destroyed QP's number need (Documentation/xud.rst, rule 5). Values
 * outside 1..RXUD_MAX_QP are refused (EINVAL; ERANGE past UINT_MAX), at
 * insmod or later.
 */
static unsigned int max_qp = RXUD_MAX_QP;

static int rxud_max_qp_set(const char *val, const struct kernel_param *kp)
{
	unsigned int n;
	int ret = kstrtouint(val, 0, &n);

	if (ret)
		return ret;
	if (n < 1 || n > RXUD_MAX_QP)
		return -EINVAL;
	WRITE_ONCE(*(unsigned int *)kp->arg, n);
	return 0;
}

static const struct kernel_param_ops rxud_max_qp_ops = {
	.set = rxud_max_qp_set,
	.get = param_get_uint,
};
module_param_cb(max_qp, &rxud_max_qp_ops, &max_qp, 0644);
MODULE_PARM_DESC(max_qp, "Most QPs of each device created from now on, its GSI QP aside: 1 to 65536 (default 65536)");

unsigned int rxud_max_qp(void)
{
	return READ_ONCE(max_qp);
}
