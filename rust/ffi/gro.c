// SPDX-License-Identifier: GPL-2.0
/*
 * GRO for rxud's UDP tunnel sockets: the receive half of trains.
 *
 * RoCEv2 over IPv4 sends a zero UDP checksum, and the stack's UDP GRO
 * (udp_gro_receive_segment) merges only datagrams that carry one, so
 * without help every RoCE packet climbs the stack alone: IP receive,
 * netfilter, the route and socket lookups, once per packet. A tunnel
 * socket may bring its own GRO callbacks (VXLAN's and GENEVE's do); ours
 * link a flow's consecutive datagrams whole, each keeping its own IP and
 * UDP headers (the ICRC covers them), behind the first, as fraglist GRO
 * does: the train then climbs the stack once, and the encap callback cuts
 * it loose again (rxud_rx_unlink_train) and receives its datagrams one by
 * one, in order. Nothing is rewritten in a datagram but the first's IP
 * and UDP lengths, which the stack sets to the train's and the unlinking
 * sets back, and its checksums, which the ICRC masks, so every
 * datagram's ICRC is checked as it was sent.
 *
 * udp_gro_complete marks a train of a socket with GRO callbacks
 * SKB_GSO_UDP_TUNNEL, which udp_unexpected_gso lets through to the encap
 * callback whole; SKB_GSO_UDP_L4 trains (rxud's own sent trains, over a
 * veth) are still segmented before it. Such a train cannot be segmented
 * by the stack (there is no inner packet), so only datagrams addressed
 * to this host are linked: the wildcard-bound socket would otherwise
 * link RoCE datagrams the host forwards too.
 *
 * Which datagram may join a train, and when a train ends, is decided in
 * Rust (rxud_gro_decide, rust/net/gro.rs, over the pure function of
 * rust/proto/wire/gro.rs, where the rules are stated and tested on the
 * host). This file gathers what that decision needs from GRO's state and
 * carries it out: skbs linked and unlinked, NAPI_GRO_CB's count, last
 * and flush, the train's lengths and GSO fields. Why C: NAPI_GRO_CB,
 * skb_gro_len, skb_gro_header_fast, skb_shinfo, udp_hdr and
 * list_for_each_entry are macros and static inlines, and the GRO
 * callbacks work on fields of struct sk_buff, which the bindings keep
 * opaque.
 */
#include <linux/module.h>
#include <linux/moduleparam.h>
#include <linux/ip.h>
#include <linux/ipv6.h>
#include <linux/skbuff.h>
#include <linux/udp.h>
#include <linux/inetdevice.h>
#include <net/addrconf.h>
#include <net/gro.h>
#include <net/ip.h>
#include "helpers.h"

static bool gro = true;
module_param(gro, bool, 0644);
MODULE_PARM_DESC(gro, "Link a flow's consecutive received datagrams into one train for the stack (default: on)");

/*
 * Bytes of @skb's own datagram from its network header, the datagrams
 * linked behind it not counted.
 */
static unsigned int rxud_gro_own_len(const struct sk_buff *skb)
{
	const struct sk_buff *m;
	unsigned int len = skb->len;

	skb_walk_frags(skb, m)
		len -= m->len;
	return len;
}

/*
 * Whether @skb, in GRO, is addressed to this host. rxud's sockets are
 * bound to the wildcard address, so GRO's socket lookup also finds them
 * for RoCE datagrams this host forwards; a train of those could not be
 * segmented again on the way out (its GSO type says tunnel, and there is
 * no inner packet), so they go up alone. Asked once per train (its first
 * datagram); the rest of a flow has the same destination.
 */
static bool rxud_gro_for_us(struct sk_buff *skb)
{
	unsigned int off = NAPI_GRO_CB(skb)->network_offset;
	struct net *net = dev_net(skb->dev);
	const void *nh;

	/* As skb_gro_network_header, at the outer header: the callback runs
	 * with encap_mark set, which would pick the inner one. */
	if (skb_gro_may_pull(skb, skb_gro_offset(skb)))
		nh = skb_gro_header_fast(skb, off);
	else
		nh = skb->data + off;
	if (!NAPI_GRO_CB(skb)->is_ipv6)
		return __ip_dev_find(net, ((const struct iphdr *)nh)->daddr,
				     false) != NULL;
#if IS_ENABLED(CONFIG_IPV6)
	return ipv6_dev_find(net, &((const struct ipv6hdr *)nh)->daddr,
			     NULL) != NULL;
#else
	return false;
#endif
}

/*
 * @skb's UDP length field, in GRO (where the UDP layer has not checked it
 * yet: rxud_gro_decide compares it with IP's length).
 */
static u16 rxud_gro_udp_len(struct sk_buff *skb)
{
	unsigned int off = skb_gro_offset(skb) - sizeof(struct udphdr);
	const struct udphdr *uh;

	if (skb_gro_may_pull(skb, skb_gro_offset(skb)))
		uh = skb_gro_header_fast(skb, off);
	else
		uh = (const struct udphdr *)(skb->data + off);
	return ntohs(uh->len);
}

/*
 * The packet of the new datagram's flow that GRO holds (the IP and UDP
 * layers marked it same_flow), or NULL.
 */
static struct sk_buff *rxud_gro_held(struct list_head *head)
{
	struct sk_buff *p;

	list_for_each_entry(p, head, list)
		if (NAPI_GRO_CB(p)->same_flow)
			return p;
	return NULL;
}

/*
 * Links @skb behind the train @p; false, leaving it alone, if its headers
 * cannot be had in its linear part.
 */
static bool rxud_gro_link(struct sk_buff *p, struct sk_buff *skb)
{
	/* Each datagram's headers stay in front of its data, in its linear
	 * part, for the receive path and the ICRC. */
	if (!pskb_may_pull(skb, skb_gro_offset(skb)))
		return false;
	skb_set_network_header(skb, NAPI_GRO_CB(skb)->network_offset);
	if (NAPI_GRO_CB(p)->last == p)
		skb_shinfo(p)->frag_list = skb;
	else
		NAPI_GRO_CB(p)->last->next = skb;
	NAPI_GRO_CB(p)->last = skb;
	skb_pull(skb, skb_gro_offset(skb));
	NAPI_GRO_CB(p)->count++;
	p->data_len += skb->len;
	p->len += skb->len;
	p->truesize += skb->truesize;
	/* The train owns it now. */
	skb->destructor = NULL;
	skb->sk = NULL;
	skb_shinfo(p)->flags |= skb_shinfo(skb)->flags & SKBFL_SHARED_FRAG;
	NAPI_GRO_CB(skb)->same_flow = 1;
	return true;
}

/*
 * udp_tunnel_sock_cfg.gro_receive: @skb's UDP header is pulled (its GRO
 * offset is at the UDP payload); @head holds the packets GRO keeps for
 * this NAPI poll, those of @skb's flow (addresses and ports) marked
 * same_flow by the IP and UDP layers. Returns a held packet to deliver
 * now, or NULL. rxud_gro_decide says what becomes of @skb; a train it
 * ends goes up before @skb unless @skb joins it, so a flow keeps its
 * order.
 */
struct sk_buff *rxud_gro_receive(struct sock *sk, struct list_head *head,
				 struct sk_buff *skb)
{
	struct rxud_gro_dgram d = {
		.payload_len = skb_gro_len(skb),
		.len = skb->len,
		.udp_len = rxud_gro_udp_len(skb),
		.flush = NAPI_GRO_CB(skb)->flush,
	};
	struct sk_buff *p = rxud_gro_held(head);
	struct rxud_gro_train t = {};
	enum rxud_gro_action action;

	if (p) {
		t.held = true;
		/* The first datagram's UDP length is its own until GRO
		 * completes the train. */
		t.head_udp_len = ntohs(udp_hdr(p)->len);
		t.count = NAPI_GRO_CB(p)->count;
		t.len = p->len;
	}
	action = rxud_gro_decide(READ_ONCE(gro), d, t);
	switch (action) {
	case RXUD_GRO_HEAD:
		if (!rxud_gro_for_us(skb))
			NAPI_GRO_CB(skb)->flush = 1;
		return NULL;
	case RXUD_GRO_SPLIT:
		return p;
	case RXUD_GRO_JOIN:
	case RXUD_GRO_JOIN_LAST:
		if (!rxud_gro_link(p, skb)) {
			NAPI_GRO_CB(skb)->flush = 1;
			return p;
		}
		return action == RXUD_GRO_JOIN ? NULL : p;
	case RXUD_GRO_ALONE:
	default:
		/* After the train held before it, not ahead of it: RC takes
		 * a flow in order. */
		NAPI_GRO_CB(skb)->flush = 1;
		return p;
	}
}

/*
 * udp_tunnel_sock_cfg.gro_complete, for a train of two or more (GRO
 * delivers a lone datagram as it came): @nhoff is the offset of the UDP
 * payload. The IP and UDP layers set the first datagram's lengths to the
 * train's and udp_gro_complete its GSO type to SKB_GSO_UDP_TUNNEL; this
 * says how many datagrams and how long the first.
 */
int rxud_gro_complete(struct sock *sk, struct sk_buff *skb, int nhoff)
{
	const struct udphdr *uh =
		(const struct udphdr *)(skb->data + nhoff - sizeof(struct udphdr));

	skb_shinfo(skb)->gso_size = rxud_gro_own_len(skb) - nhoff;
	skb_shinfo(skb)->gso_segs = NAPI_GRO_CB(skb)->count;
	/* A sender that sums its datagrams (IPv6 ones must): udp_gro_receive
	 * hands the callback only datagrams whose checksum was found good,
	 * and the first's checksum state (a device's CHECKSUM_COMPLETE sum,
	 * say) covers its own bytes, not the train's with its rewritten
	 * length, which the UDP layer would then find bad and drop whole. */
	if (uh->check) {
		skb->ip_summed = CHECKSUM_UNNECESSARY;
		skb->csum_level = 0;
	}
	return 0;
}

/*
 * The encap callback's side, before it pulls @skb's UDP header: if @skb
 * is a train rxud_gro_receive linked, cuts the datagrams behind the first
 * loose and gives the first back its own IP and UDP lengths (and IPv4
 * header checksum). Puts the others in @rest as a list (->next, taken
 * with rxud_skb_list_pop), each an skb of its own with its data at its
 * UDP header as @skb's is, and returns how many there are; 0 and an
 * empty @rest for a lone datagram.
 *
 * A train a packet tap also holds (cloned) gets a private copy of the
 * first datagram's header and shared info before anything is written,
 * and each datagram it shares is cloned: the tap keeps the train as the
 * stack saw it. A datagram that cannot be cloned is dropped (counted in
 * @dropped); -ENOMEM if the first cannot be made private, -EINVAL if the
 * train is not as it was linked: the caller then drops the train whole
 * (its gso_segs datagrams).
 */
int rxud_rx_unlink_train(struct sk_buff *skb, struct sk_buff **rest,
			 unsigned int *dropped)
{
	struct sk_buff *list, *m, *next, **tail = rest;
	unsigned int len = 0, truesize = 0, hlen;
	int n = 0;

	*rest = NULL;
	*dropped = 0;
	if (!skb_is_gso(skb) || !skb_has_frag_list(skb) ||
	    !(skb_shinfo(skb)->gso_type &
	      (SKB_GSO_UDP_TUNNEL | SKB_GSO_UDP_TUNNEL_CSUM)))
		return 0;
	/* As rxud_gro_receive linked it: one datagram per segment. Anything
	 * that reshaped the list since (generic XDP, a BPF pull) leaves a
	 * train that cannot be cut back into its datagrams: dropped whole. */
	skb_walk_frags(skb, m)
		n++;
	if (n + 1 != skb_shinfo(skb)->gso_segs)
		return -EINVAL;
	n = 0;
	if (skb_unclone(skb, GFP_ATOMIC))
		return -ENOMEM;
	list = skb_shinfo(skb)->frag_list;
	skb_shinfo(skb)->frag_list = NULL;
	for (m = list; m; m = next) {
		next = m->next;
		m->next = NULL;
		len += m->len;
		truesize += m->truesize;
		if (skb_shared(m)) {
			struct sk_buff *c = skb_clone(m, GFP_ATOMIC);

			consume_skb(m);
			if (!c) {
				(*dropped)++;
				continue;
			}
			m = c;
		}
		/* GRO pulled it to its UDP payload; its headers are still in
		 * front, at the offsets the IP layer set. It arrived where
		 * the first did, as the stack saw it (a VLAN's or a bond's
		 * device, not the one below that GRO ran on). */
		skb_push(m, m->data - skb_transport_header(m));
		m->dev = skb->dev;
		*tail = m;
		tail = &m->next;
		n++;
	}
	skb->len -= len;
	skb->data_len -= len;
	skb->truesize -= min(truesize, skb->truesize);
	skb_shinfo(skb)->gso_size = 0;
	skb_shinfo(skb)->gso_segs = 0;
	skb_shinfo(skb)->gso_type = 0;
	skb->encapsulation = 0;
	/* The data is at the UDP header. */
	hlen = skb->data - skb_network_header(skb);
	udp_hdr(skb)->len = htons(skb->len);
	if (skb->protocol == htons(ETH_P_IP)) {
		ip_hdr(skb)->tot_len = htons(skb->len + hlen);
		ip_send_check(ip_hdr(skb));
	} else {
		ipv6_hdr(skb)->payload_len =
			htons(skb->len + hlen - sizeof(struct ipv6hdr));
	}
	return n;
}

/* The first skb of @list, taken off it, or NULL. */
struct sk_buff *rxud_skb_list_pop(struct sk_buff **list)
{
	struct sk_buff *skb = *list;

	if (skb) {
		*list = skb->next;
		skb->next = NULL;
	}
	return skb;
}

/* Datagrams in a train @skb (1 for a lone one). */
unsigned int rxud_skb_train_segs(const struct sk_buff *skb)
{
	return skb_is_gso(skb) ? max_t(unsigned int, skb_shinfo(skb)->gso_segs, 1) : 1;
}
