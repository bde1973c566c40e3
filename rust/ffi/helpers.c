// SPDX-License-Identifier: GPL-2.0
/* See helpers.h: forwarders for static inlines and macros. */

#include <linux/crc32.h>
#include <linux/delay.h>
#include <linux/module.h>
#include <linux/moduleparam.h>
#include <linux/highmem.h>
#include <linux/if_vlan.h>
#include <linux/inetdevice.h>
#include <linux/ip.h>
#include <net/ip.h>
#include <net/route.h>
#include <net/ipv6.h>
#include <net/ipv6_stubs.h>
#include <net/ip6_route.h>
#include <rdma/ib_umem.h>
#include <net/dst_cache.h>
#include <linux/sysfs.h>
#include <linux/vmalloc.h>
#include <rdma/uverbs_ioctl.h>
#include <linux/random.h>
#include "helpers.h"

/*
 * rxud_abi_version: librxud recognises rxud devices by this attribute (the
 * name is rust/abi's SYSFS_ABI_ATTR); the value comes from Rust.
 */
static ssize_t rxud_abi_version_show(struct device *dev,
				     struct device_attribute *attr, char *buf)
{
	return sysfs_emit(buf, "%u\n", rxud_uverbs_abi_version());
}
static DEVICE_ATTR_RO(rxud_abi_version);

static struct attribute *rxud_device_attrs[] = {
	&dev_attr_rxud_abi_version.attr,
	NULL,
};

const struct attribute_group rxud_device_attr_group = {
	.attrs = rxud_device_attrs,
};

struct ib_device *rxud_ib_alloc_device(size_t size)
{
	return _ib_alloc_device(size);
}

bool rxud_ib_device_try_get(struct ib_device *dev)
{
	return ib_device_try_get(dev);
}

void rxud_ib_device_get_dev(struct ib_device *dev)
{
	get_device(&dev->dev);
}

void rxud_ib_device_put_dev(struct ib_device *dev)
{
	put_device(&dev->dev);
}

void rxud_ib_mark_name_assigned_by_user(struct ib_device *dev)
{
	ib_mark_name_assigned_by_user(dev);
}

struct net_device *rxud_netdev_notifier_info_to_dev(void *info)
{
	return netdev_notifier_info_to_dev(info);
}

bool rxud_netif_running(const struct net_device *ndev)
{
	return netif_running(ndev);
}

bool rxud_netif_carrier_ok(const struct net_device *ndev)
{
	return netif_carrier_ok(ndev);
}

bool rxud_netdev_is_registered(const struct net_device *ndev)
{
	return READ_ONCE(ndev->reg_state) == NETREG_REGISTERED;
}

unsigned short rxud_netdev_type(const struct net_device *ndev)
{
	return ndev->type;
}

unsigned int rxud_netdev_mtu(const struct net_device *ndev)
{
	return READ_ONCE(ndev->mtu);
}

const unsigned char *rxud_netdev_addr(const struct net_device *ndev)
{
	return ndev->dev_addr;
}

const char *rxud_netdev_name(const struct net_device *ndev)
{
	return netdev_name(ndev);
}

void rxud_netdev_hold(struct net_device *ndev)
{
	dev_hold(ndev);
}

void rxud_netdev_put(struct net_device *ndev)
{
	dev_put(ndev);
}

bool rxud_netdev_is_vlan(const struct net_device *ndev)
{
	return is_vlan_dev(ndev);
}

void *rxud_vmalloc_user(unsigned long size)
{
	return vmalloc_user(size);
}

struct ib_ucontext *rxud_udata_ucontext(struct ib_udata *udata)
{
	return udata ? rdma_udata_to_uverbs_attr_bundle(udata)->context : NULL;
}

struct ib_udata *rxud_attrs_udata(struct uverbs_attr_bundle *attrs)
{
	return attrs ? &attrs->driver_udata : NULL;
}

u64 rxud_mmap_entry_offset(const struct rdma_user_mmap_entry *entry)
{
	return rdma_user_mmap_get_offset(entry);
}

unsigned long rxud_spin_lock_irqsave(spinlock_t *lock)
{
	unsigned long flags;

	spin_lock_irqsave(lock, flags);
	return flags;
}

void rxud_spin_unlock_irqrestore(spinlock_t *lock, unsigned long flags)
{
	spin_unlock_irqrestore(lock, flags);
}

void rxud_spin_lock_bh(spinlock_t *lock)
{
	spin_lock_bh(lock);
}

void rxud_spin_unlock_bh(spinlock_t *lock)
{
	spin_unlock_bh(lock);
}

struct net *rxud_dev_net(const struct net_device *ndev)
{
	return dev_net(ndev);
}

struct net *rxud_get_net(struct net *net)
{
	return get_net(net);
}

void rxud_put_net(struct net *net)
{
	put_net(net);
}

int rxud_udp_tunnel_open(struct net *net, bool ipv6, u16 port,
			 int (*encap_rcv)(struct sock *sk, struct sk_buff *skb),
			 void *user_data, struct socket **sockp)
{
	struct udp_port_cfg udp_cfg = {
		.family = ipv6 ? AF_INET6 : AF_INET,
		.ipv6_v6only = ipv6,
		.local_udp_port = htons(port),
	};
	struct udp_tunnel_sock_cfg tnl_cfg = {
		.sk_user_data = user_data,
		.encap_type = 1,
		.encap_rcv = encap_rcv,
		.gro_receive = rxud_gro_receive,
		.gro_complete = rxud_gro_complete,
	};
	int err = udp_sock_create(net, &udp_cfg, sockp);

	if (err < 0)
		return err;
	setup_udp_tunnel_sock(net, *sockp, &tnl_cfg);
	return 0;
}

void *rxud_sk_user_data(struct sock *sk)
{
	return rcu_dereference_sk_user_data(sk);
}

void rxud_kfree_skb(struct sk_buff *skb)
{
	kfree_skb(skb);
}

unsigned int rxud_skb_len(const struct sk_buff *skb)
{
	return skb->len;
}

/*
 * The device a received packet is for: the one it arrived on, or, for a
 * packet a local sender looped back through lo (a QP talking to a QP of
 * the same device), the device that owns its destination address. Called
 * in the receive softirq (RCU read side).
 */
struct net_device *rxud_skb_port_dev(const struct sk_buff *skb)
{
	struct net_device *dev = skb->dev;

	if (!dev || !(dev->flags & IFF_LOOPBACK))
		return dev;
	if (skb->protocol == htons(ETH_P_IP))
		return __ip_dev_find(dev_net(dev), ip_hdr(skb)->daddr, false);
#if IS_ENABLED(CONFIG_IPV6)
	if (skb->protocol == htons(ETH_P_IPV6))
		return ipv6_dev_find(dev_net(dev), &ipv6_hdr(skb)->daddr, NULL);
#endif
	return NULL;
}

bool rxud_skb_pull_udp_header(struct sk_buff *skb)
{
	return pskb_may_pull(skb, sizeof(struct udphdr)) &&
	       __skb_pull(skb, sizeof(struct udphdr));
}

u64 *rxud_hw_stats_values(struct rdma_hw_stats *stats, int *num)
{
	*num = stats->num_counters;
	return stats->value;
}

/*
 * The data path's sk_buff and IP plumbing: inline functions and macros of
 * the skb, routing and IP layers, in the order rxe uses them
 * (rxe_net.c), so that Rust builds packets and the kernel routes them.
 */
int rxud_skb_ip_udp_headers(const struct sk_buff *skb, u8 *buf, int max)
{
	int ip_len = skb_transport_header(skb) - skb_network_header(skb);

	if (ip_len <= 0 || ip_len + (int)sizeof(struct udphdr) > max)
		return -EINVAL;
	memcpy(buf, skb_network_header(skb), ip_len);
	memcpy(buf + ip_len, skb_transport_header(skb), sizeof(struct udphdr));
	return ip_len + sizeof(struct udphdr);
}

/*
 * CRC-32 through __skb_checksum, the way SCTP runs CRC-32c over an skb:
 * the linear part continues from the seed, each fragment's CRC is taken
 * from zero and combined (crc32_le is linear: crc(c, A|B) is
 * shift(crc(c, A), |B|) ^ crc(0, B)). No byte is copied.
 */
static __wsum rxud_crc32_update(const void *buf, int len, __wsum crc)
{
	return (__force __wsum)crc32_le((__force u32)crc, buf, len);
}

static __wsum rxud_crc32_combine(__wsum crc, __wsum crc2, int offset, int len)
{
	return (__force __wsum)crc32_le_combine((__force u32)crc,
						(__force u32)crc2, len);
}

static const struct skb_checksum_ops rxud_crc32_ops = {
	.update = rxud_crc32_update,
	.combine = rxud_crc32_combine,
};

u32 rxud_skb_crc32(const struct sk_buff *skb, int offset, int len, u32 crc)
{
	return (__force u32)__skb_checksum(skb, offset, len, (__force __wsum)crc,
					   &rxud_crc32_ops);
}

int rxud_skb_copy_to_page(const struct sk_buff *skb, int offset,
			  struct page *page, unsigned int pgoff, int len)
{
	void *addr = kmap_local_page(page);
	int ret = skb_copy_bits(skb, offset, addr + pgoff, len);

	kunmap_local(addr);
	return ret;
}

void rxud_page_write(struct page *page, unsigned int pgoff, const void *src,
		     unsigned int len)
{
	void *addr = kmap_local_page(page);

	memcpy(addr + pgoff, src, len);
	kunmap_local(addr);
}

void rxud_page_read(struct page *page, unsigned int pgoff, void *dst,
		    unsigned int len)
{
	void *addr = kmap_local_page(page);

	memcpy(dst, addr + pgoff, len);
	kunmap_local(addr);
}

int rxud_umem_pages(struct ib_umem *umem, struct page **pages, int max)
{
	struct sg_page_iter iter;
	int n = 0;

	for_each_sgtable_page(&umem->sgt_append.sgt, &iter, 0) {
		if (n == max)
			return -EINVAL;
		pages[n++] = sg_page_iter_page(&iter);
	}
	return n;
}

unsigned long rxud_umem_offset(struct ib_umem *umem)
{
	return ib_umem_offset(umem);
}

/*
 * A packet's buffer comes from the per-CPU page fragment cache the
 * networking core keeps for receive buffers (__netdev_alloc_skb: a bump
 * allocation in a page, the skb built around it), not from kmalloc as
 * alloc_skb's does (rxe's way); packets too large for a page fragment
 * (4096-byte path MTU) fall back to kmalloc there.
 */
struct sk_buff *rxud_tx_skb_alloc(struct net_device *ndev, unsigned int len,
				  void **data)
{
	unsigned int room = LL_RESERVED_SPACE(ndev) + sizeof(struct ipv6hdr) +
			    sizeof(struct udphdr);
	struct sk_buff *skb = __netdev_alloc_skb(ndev, room + len, GFP_ATOMIC);

	if (!skb)
		return NULL;
	skb_reserve(skb, room);
	*data = skb_put(skb, len);
	return skb;
}

/* The UDP header of a RoCEv2 packet from @sport; no checksum (the ICRC
 * covers the payload). */
static void push_udp(struct sk_buff *skb, __be16 sport)
{
	struct udphdr *uh;

	__skb_push(skb, sizeof(*uh));
	skb_reset_transport_header(skb);
	uh = udp_hdr(skb);
	uh->source = sport;
	uh->dest = htons(4791);
	uh->len = htons(skb->len);
	uh->check = 0;
	skb_clear_hash(skb);
}

struct dst_cache *rxud_dst_cache_new(bool atomic)
{
	gfp_t gfp = atomic ? GFP_ATOMIC : GFP_KERNEL;
	struct dst_cache *cache = kzalloc(sizeof(*cache), gfp);

	if (cache && dst_cache_init(cache, gfp)) {
		kfree(cache);
		cache = NULL;
	}
	return cache;
}

void rxud_dst_cache_reset(struct dst_cache *cache)
{
	dst_cache_reset(cache);
}

void rxud_dst_cache_free(struct dst_cache *cache)
{
	dst_cache_destroy(cache);
	kfree(cache);
}

/*
 * The MTU of the route that packets from @sgid to @dgid leave @ndev by
 * (rxud_tx_push_udp4/6's lookup, without a cache), 0 if there is none.
 * IPv4 addresses come as IPv4-mapped GIDs. Any context but hard irq.
 */
unsigned int rxud_route_mtu(struct net_device *ndev, const struct in6_addr *sgid,
			    const struct in6_addr *dgid)
{
	unsigned int mtu = 0;

	if (ipv6_addr_v4mapped(sgid) && ipv6_addr_v4mapped(dgid)) {
		struct flowi4 fl = {
			.flowi4_oif = ndev->ifindex,
			.flowi4_proto = IPPROTO_UDP,
			.saddr = sgid->s6_addr32[3],
			.daddr = dgid->s6_addr32[3],
		};
		struct rtable *rt = ip_route_output_key(dev_net(ndev), &fl);

		if (IS_ERR(rt))
			return 0;
		mtu = dst_mtu(&rt->dst);
		ip_rt_put(rt);
	} else {
		struct flowi6 fl6 = {
			.flowi6_oif = ndev->ifindex,
			.flowi6_proto = IPPROTO_UDP,
			.saddr = *sgid,
			.daddr = *dgid,
		};
		struct dst_entry *dst;

		dst = ipv6_stub->ipv6_dst_lookup_flow(dev_net(ndev), NULL, &fl6, NULL);
		if (IS_ERR(dst))
			return 0;
		if (!dst->error)
			mtu = dst_mtu(dst);
		dst_release(dst);
	}
	return mtu;
}

int rxud_tx_push_udp4(struct sk_buff *skb, struct dst_cache *cache,
		      __be32 saddr, __be32 daddr, __be16 sport, u8 tos, u8 ttl,
		      u16 id, u8 **datagram)
{
	struct net_device *ndev = skb->dev;
	struct flowi4 fl = {
		.flowi4_oif = ndev->ifindex,
		.flowi4_proto = IPPROTO_UDP,
		.saddr = saddr,
		.daddr = daddr,
	};
	struct rtable *rt = NULL;
	struct iphdr *iph;

	/* The cache is per CPU: bottom halves off while it is used. */
	local_bh_disable();
	if (cache)
		rt = dst_cache_get_ip4(cache, &fl.saddr);
	if (!rt) {
		rt = ip_route_output_key(dev_net(ndev), &fl);
		if (!IS_ERR(rt) && cache)
			dst_cache_set_ip4(cache, &rt->dst, fl.saddr);
	}
	local_bh_enable();
	if (IS_ERR(rt))
		return PTR_ERR(rt);
	skb->protocol = htons(ETH_P_IP);
	push_udp(skb, sport);
	skb_dst_set(skb, &rt->dst);
	memset(IPCB(skb), 0, sizeof(*IPCB(skb)));
	__skb_push(skb, sizeof(*iph));
	skb_reset_network_header(skb);
	iph = ip_hdr(skb);
	iph->version = IPVERSION;
	iph->ihl = sizeof(*iph) >> 2;
	iph->tot_len = htons(skb->len);
	iph->frag_off = htons(IP_DF);
	iph->protocol = IPPROTO_UDP;
	iph->tos = tos;
	iph->ttl = ttl;
	iph->saddr = saddr;
	iph->daddr = daddr;
	/*
	 * The QP numbers its datagrams in sequence (DF datagrams: RFC 6864),
	 * so that a run of them can go as one train (rxud_tx_train).
	 */
	iph->id = htons(id);
	*datagram = skb->data;
	return 0;
}

/*
 * Links the @n routed datagrams of @rest (IP and UDP headers pushed, as
 * @head's) behind @head as one fraglist GSO skb, the way UDP GRO links
 * the datagrams of a flow for forwarding: each keeps its own headers and
 * ICRC; @head's UDP length says the whole train (IP's total length or
 * payload length will too, from __ip_local_out), and its UDP payload is
 * the train's segment size. A device without fraglist segmentation (all
 * of them) gets the datagrams back, unlinked, from skb_segment_list in
 * validate_xmit_skb; __udp_gso_segment_list and inet_gso_segment then
 * restore the head's UDP length and set each IPv4 identification to the
 * head's plus the datagram's place, which is the one it was built with
 * (rust/proto/wire/train.rs says when a datagram may join). On the TX
 * path CHECKSUM_UNNECESSARY means what CHECKSUM_NONE does (no checksum
 * to offload; RoCEv2 sends none) and is what GSO expects of an skb whose
 * checksums are done.
 */
void rxud_tx_train(struct sk_buff *head, struct sk_buff **rest,
		   unsigned int n)
{
	struct sk_buff **tail = &skb_shinfo(head)->frag_list;
	unsigned int hdrs = skb_transport_offset(head) + sizeof(struct udphdr);
	unsigned int mss = head->len - hdrs;
	unsigned int i;

	for (i = 0; i < n; i++) {
		struct sk_buff *m = rest[i];

		/* The head's route carries the train; the members' headers
		 * stay in front of their data for skb_segment_list. */
		skb_dst_drop(m);
		__skb_pull(m, skb_transport_offset(m) + sizeof(struct udphdr));
		*tail = m;
		tail = &m->next;
		head->len += m->len;
		head->data_len += m->len;
		head->truesize += m->truesize;
	}
	*tail = NULL;
	skb_shinfo(head)->gso_size = mss;
	skb_shinfo(head)->gso_type = SKB_GSO_UDP_L4 | SKB_GSO_FRAGLIST;
	skb_shinfo(head)->gso_segs = n + 1;
	head->ip_summed = CHECKSUM_UNNECESSARY;
	udp_hdr(head)->len = htons(head->len - skb_transport_offset(head));
}

int rxud_tx_send(struct sk_buff *skb)
{
	return ip_local_out(dev_net(skb_dst(skb)->dev), NULL, skb);
}

void rxud_ib_cq_event(struct ib_cq *cq)
{
	if (cq->comp_handler)
		cq->comp_handler(cq, cq->cq_context);
}

/* Fewer WQEs than the armed limit remain: IB_EVENT_SRQ_LIMIT_REACHED. */
void rxud_ib_srq_limit_reached(struct ib_srq *srq)
{
	struct ib_event ev = {
		.device = srq->device,
		.element.srq = srq,
		.event = IB_EVENT_SRQ_LIMIT_REACHED,
	};

	if (srq->event_handler)
		srq->event_handler(&ev, srq->srq_context);
}

/* The CQ overflowed: IB_EVENT_CQ_ERR to its owner (as rxe reports it). */
void rxud_ib_cq_overflow(struct ib_cq *cq)
{
	struct ib_event ev = {
		.device = cq->device,
		.element.cq = cq,
		.event = IB_EVENT_CQ_ERR,
	};

	if (cq->event_handler)
		cq->event_handler(&ev, cq->cq_context);
}

/*
 * A QP on an SRQ reached the error state: IB_EVENT_QP_LAST_WQE_REACHED to
 * its owner (ib_drain_qp waits for it before polling the CQ).
 */
void rxud_ib_qp_last_wqe_reached(struct ib_qp *qp)
{
	struct ib_event ev = {
		.device = qp->device,
		.element.qp = qp,
		.event = IB_EVENT_QP_LAST_WQE_REACHED,
	};

	if (qp->srq && qp->event_handler)
		qp->event_handler(&ev, qp->qp_context);
}

int rxud_tx_push_udp6(struct sk_buff *skb, struct dst_cache *cache,
		      const struct in6_addr *saddr, const struct in6_addr *daddr,
		      __be16 sport, u8 tclass, u8 hop_limit, u32 flow_label,
		      u8 **datagram)
{
	struct net_device *ndev = skb->dev;
	struct flowi6 fl6 = {
		.flowi6_oif = ndev->ifindex,
		.flowi6_proto = IPPROTO_UDP,
		.saddr = *saddr,
		.daddr = *daddr,
	};
	struct dst_entry *dst = NULL;
	struct in6_addr cached_saddr;
	struct ipv6hdr *ip6h;

	/* As for IPv4: the per-CPU cache with bottom halves off. */
	local_bh_disable();
	if (cache)
		dst = dst_cache_get_ip6(cache, &cached_saddr);
	if (!dst) {
		dst = ipv6_stub->ipv6_dst_lookup_flow(dev_net(ndev), NULL, &fl6, NULL);
		if (!IS_ERR(dst) && !dst->error && cache)
			dst_cache_set_ip6(cache, dst, &fl6.saddr);
	}
	local_bh_enable();
	if (IS_ERR(dst))
		return PTR_ERR(dst);
	if (dst->error) {
		int err = dst->error;

		dst_release(dst);
		return err;
	}
	skb->protocol = htons(ETH_P_IPV6);
	push_udp(skb, sport);
	skb_dst_set(skb, dst);
	memset(IP6CB(skb), 0, sizeof(*IP6CB(skb)));
	__skb_push(skb, sizeof(*ip6h));
	skb_reset_network_header(skb);
	ip6h = ipv6_hdr(skb);
	ip6_flow_hdr(ip6h, tclass, htonl(flow_label & 0xfffff));
	ip6h->payload_len = htons(skb->len - sizeof(*ip6h));
	ip6h->nexthdr = IPPROTO_UDP;
	ip6h->hop_limit = hop_limit;
	ip6h->saddr = *saddr;
	ip6h->daddr = *daddr;
	*datagram = skb->data;
	return 0;
}

int rxud_tx_send6(struct sk_buff *skb)
{
	return ip6_local_out(dev_net(skb_dst(skb)->dev), NULL, skb);
}

void rxud_timer_setup(struct timer_list *timer,
		      void (*fn)(struct timer_list *))
{
	timer_setup(timer, fn, 0);
}

/* Fires @timer @delay_ns from now, rounded up to the next jiffy. Returns
 * 1 if it was already pending (and has been moved), 0 if it was idle. */
int rxud_timer_arm_ns(struct timer_list *timer, u64 delay_ns)
{
	return mod_timer(timer, jiffies + nsecs_to_jiffies(delay_ns) + 1);
}

u64 rxud_now_ns(void)
{
	return ktime_get_ns();
}

u64 rxud_random_u64(void)
{
	return get_random_u64();
}

void rxud_bh_work_init(struct work_struct *work,
		       void (*fn)(struct work_struct *))
{
	INIT_WORK(work, fn);
}

/* Queues @work on the BH workqueue: it runs in softirq context on this
 * CPU, at the next softirq exit. False if it was pending or is disabled. */
bool rxud_bh_work_queue(struct work_struct *work)
{
	return queue_work(system_bh_wq, work);
}

/* Cancels @work, waits for a running instance and keeps it from being
 * queued again. True if it was pending. */
bool rxud_bh_work_disable_sync(struct work_struct *work)
{
	return disable_work_sync(work);
}

/*
 * Trains (rxud_tx_train), on by default; off, every packet goes to IP
 * alone, as before them (Documentation/performance.rst compares). A C
 * parameter: the kernel's Rust module! macro of 6.12 has none.
 */
static bool trains = true;
module_param(trains, bool, 0644);
MODULE_PARM_DESC(trains, "Hand a QP's consecutive packets to IP as one GSO skb (default: on)");

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
 * Most QPs of each device created from now on (rust/params.rs): a small
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

/*
 * Whether to send trains out of the skb's device: asked for by the
 * module parameter and GSO wanted on the device, not necessarily in
 * effect. The core drops NETIF_F_GSO from the features of a device
 * without scatter-gather (virtio-net without offloads, say), because
 * software GSO of TCP makes paged segments; a train's packets are linear,
 * so only the administrator's choice (ethtool -K DEV gso off) counts.
 */
bool rxud_skb_trains_allowed(const struct sk_buff *skb)
{
	return READ_ONCE(trains) && skb->dev &&
	       (skb->dev->wanted_features & NETIF_F_GSO);
}

/*
 * The skb has no socket: its destructor is its only owner hook. A
 * transmit skb's shared info carries destructor_arg for its owner (it is
 * zerocopy state only on skbs flagged SKBFL_ZEROCOPY_ENABLE, which ours
 * never are), as AF_PACKET's and XDP sockets' transmit skbs use it.
 */
void rxud_skb_set_destructor(struct sk_buff *skb,
			     void (*fn)(struct sk_buff *), void *arg)
{
	skb_shinfo(skb)->destructor_arg = arg;
	skb->destructor = fn;
}

void *rxud_skb_destructor_arg(struct sk_buff *skb)
{
	return skb_shinfo(skb)->destructor_arg;
}

void rxud_msleep(unsigned int ms)
{
	msleep(ms);
}

struct page *rxud_kva_page(u64 addr)
{
	const void *va = (const void *)(uintptr_t)addr;

	if (!virt_addr_valid(va))
		return NULL;
	return virt_to_page(va);
}

bool rxud_may_send_inline(void)
{
	/*
	 * The send paths take bottom-half locks and call into IP, which
	 * needs interrupts enabled; ULPs may post from hard irq.
	 */
	return !in_hardirq() && !in_nmi() && !irqs_disabled();
}

void rxud_rcu_read_lock(void)
{
	rcu_read_lock();
}

void rxud_rcu_read_unlock(void)
{
	rcu_read_unlock();
}

u32 rxud_crc32_le(u32 crc, const u8 *p, size_t len)
{
	return crc32_le(crc, p, len);
}
