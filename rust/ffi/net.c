// SPDX-License-Identifier: GPL-2.0
/*
 * The C half of rxud's network boundary (rust/net/): code with logic of
 * its own, unlike helpers.c's forwarders. Rust builds every RoCE packet
 * and decides what to send; this file does the sk_buff, routing and IP
 * work around it, in the order rxe does it (rxe_net.c):
 *
 * - the UDP tunnel socket's set-up (rxud_udp_tunnel_open: its GRO
 *   callbacks are gro.c's), and the pernet subsystem whose exit tells
 *   rxud a namespace is ending (a static struct pernet_operations);
 * - on receive: the device a packet is for (and, for one that came in on
 *   a VLAN device, the device under it), the UDP header pulled, the
 *   IP and UDP headers copied for the ICRC, CRC-32 over an skb's bytes
 *   in place (__skb_checksum with CRC-32 operations);
 * - on transmit: the skb allocated with headroom, a flow's cached route
 *   (dst_cache) and route lookups (out of the VLAN device that holds the
 *   source address, if one on top of the port's netdev does), the UDP
 *   and IPv4 or IPv6 headers pushed, a QP's consecutive datagrams linked
 *   into one GSO skb (a train, rxud_tx_train; the module parameter
 *   trains), and the hand-off to IP.
 *
 * Why C: it is made of static inline functions and macros (skb_shinfo,
 * ip_hdr, __skb_push, skb_reset_network_header, IPCB, ip_route_output_key,
 * ip6_flow_hdr, udp_sock_create, LL_RESERVED_SPACE, module_param, ...)
 * and of fields of struct sk_buff, which the generated bindings keep
 * opaque: 6.12's Rust can call none of them, and written in Rust nearly
 * every line would be a call to a forwarder. The few exported functions
 * among them (dst_cache_*, setup_udp_tunnel_sock, __skb_checksum) take
 * what those inlines build.
 */

#include <linux/crc32.h>
#include <linux/module.h>
#include <linux/moduleparam.h>
#include <linux/if_vlan.h>
#include <linux/inetdevice.h>
#include <linux/ip.h>
#include <net/ip.h>
#include <net/route.h>
#include <net/ipv6.h>
#include <net/ipv6_stubs.h>
#include <net/ip6_route.h>
#include <net/dst_cache.h>
#include <net/net_namespace.h>
#include "helpers.h"

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

/*
 * A pernet subsystem whose exit tells rxud a namespace is ending: it runs
 * after the namespace's devices are unregistered (device exits come
 * first) and before UDP's own exit (registered later, exited earlier), so
 * rxud's sockets there can still be released. Its only state is the one
 * registration's callback and context.
 */
static void (*rxud_netns_exit_cb)(void *ctx, u64 cookie);
static void *rxud_netns_exit_ctx;

static void __net_exit rxud_netns_exit(struct net *net)
{
	rxud_netns_exit_cb(rxud_netns_exit_ctx, net->net_cookie);
}

static struct pernet_operations rxud_netns_ops = {
	.exit = rxud_netns_exit,
};

int rxud_netns_exit_register(void (*exit)(void *ctx, u64 cookie), void *ctx)
{
	rxud_netns_exit_cb = exit;
	rxud_netns_exit_ctx = ctx;
	return register_pernet_subsys(&rxud_netns_ops);
}

void rxud_netns_exit_unregister(void)
{
	unregister_pernet_subsys(&rxud_netns_ops);
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

/*
 * For a packet that is for a VLAN device (rxud_skb_port_dev), the device
 * under it, else NULL. ib_core gives a RoCE port the GIDs of its netdev's
 * VLAN devices, so RoCE to those comes in tagged, on the VLAN device; rxe
 * takes it too (rxe_udp_encap_recv). Receive softirq.
 */
struct net_device *rxud_skb_vlan_real_dev(const struct sk_buff *skb)
{
	struct net_device *dev = rxud_skb_port_dev(skb);

	return dev && is_vlan_dev(dev) ? vlan_dev_real_dev(dev) : NULL;
}

bool rxud_skb_pull_udp_header(struct sk_buff *skb)
{
	return pskb_may_pull(skb, sizeof(struct udphdr)) &&
	       __skb_pull(skb, sizeof(struct udphdr));
}

/*
 * A received datagram's IP and UDP headers, copied into @buf (the ICRC
 * covers them): their length, or -EINVAL if more than @max.
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

/*
 * A flow's cached output route (rust/net/route.rs): a dst_cache, per CPU
 * inside, which rxud_tx_push_udp4/6 read and fill with bottom halves off.
 */
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
 * The device packets from @saddr leave by, as an output route's oif: the
 * port's netdev @ndev, or the VLAN device on top of it that holds the
 * address (its GID is one ib_core gave the port; rxe sends on a GID's
 * netdev). A link-local IPv6 address @ndev holds too stays @ndev's (VLAN
 * devices share their lower device's MAC, hence its link-local address).
 */
static int tx_oif4(struct net_device *ndev, __be32 saddr)
{
	struct net_device *dev;
	int oif = ndev->ifindex;

	rcu_read_lock();
	dev = __ip_dev_find(dev_net(ndev), saddr, false);
	if (dev && is_vlan_dev(dev) && vlan_dev_real_dev(dev) == ndev)
		oif = dev->ifindex;
	rcu_read_unlock();
	return oif;
}

static int tx_oif6(struct net_device *ndev, const struct in6_addr *saddr)
{
	struct net_device *dev;
	int oif = ndev->ifindex;

	rcu_read_lock();
	if (!ipv6_dev_find(dev_net(ndev), saddr, ndev)) {
		dev = ipv6_dev_find(dev_net(ndev), saddr, NULL);
		if (dev && is_vlan_dev(dev) && vlan_dev_real_dev(dev) == ndev)
			oif = dev->ifindex;
	}
	rcu_read_unlock();
	return oif;
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
			.flowi4_oif = tx_oif4(ndev, sgid->s6_addr32[3]),
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
			.flowi6_oif = tx_oif6(ndev, sgid),
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

int rxud_tx_push_udp4(struct sk_buff *skb, struct dst_cache *cache,
		      __be32 saddr, __be32 daddr, __be16 sport, u8 tos, u8 ttl,
		      u16 id, u8 **datagram)
{
	struct net_device *ndev = skb->dev;
	struct flowi4 fl = {
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
		fl.flowi4_oif = tx_oif4(ndev, saddr);
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

int rxud_tx_push_udp6(struct sk_buff *skb, struct dst_cache *cache,
		      const struct in6_addr *saddr, const struct in6_addr *daddr,
		      __be16 sport, u8 tclass, u8 hop_limit, u32 flow_label,
		      u8 **datagram)
{
	struct net_device *ndev = skb->dev;
	struct flowi6 fl6 = {
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
		fl6.flowi6_oif = tx_oif6(ndev, saddr);
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

/*
 * Trains (rxud_tx_train), on by default; off, every packet goes to IP
 * alone, as before them (Documentation/performance.rst compares). A C
 * parameter: the kernel's Rust module! macro of 6.12 has none.
 */
static bool trains = true;
module_param(trains, bool, 0644);
MODULE_PARM_DESC(trains, "Hand a QP's consecutive packets to IP as one GSO skb (default: on)");

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

int rxud_tx_send6(struct sk_buff *skb)
{
	return ip6_local_out(dev_net(skb_dst(skb)->dev), NULL, skb);
}
