/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Everything rxud's generated bindings cover. Kbuild runs bindgen on this
 * header with the kernel's own C flags; see bindgen_parameters for what is
 * kept.
 */
#include <linux/netdevice.h>
#include <linux/if_arp.h>
#include <linux/notifier.h>
#include <linux/vmalloc.h>
#include <linux/mm.h>
#include <net/addrconf.h>
#include <net/udp_tunnel.h>
#include <rdma/ib_verbs.h>
#include <rdma/ib_cache.h>
#include <rdma/ib_mad.h>
#include <rdma/ib_umem.h>
#include <rdma/rdma_netlink.h>
#include "helpers.h"
#include "rxud_kernel.h"
