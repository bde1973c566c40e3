/* SPDX-License-Identifier: GPL-2.0 */
/*
 * rxud's C, declared for the C files and, through wrapper.h and bindgen,
 * for the Rust code; one section per file:
 *
 * - helpers.c: forwarders, each one kernel call or field access that
 *   6.12's Rust cannot make (a static inline function, a macro, a field
 *   of a struct the bindings keep opaque) and nothing else;
 * - net.c: the network code under rust/net/ that is more than that: the
 *   UDP tunnel socket's set-up, route lookups and a flow's route cache,
 *   IP and UDP headers pushed, transmit trains linked, CRC-32 over an
 *   skb; all sk_buff and IP inlines and macros;
 * - gro.c: received trains, the tunnel socket's GRO callbacks: the skbs
 *   linked and cut loose again in C, the decision of which datagram may
 *   join in Rust (rxud_gro_decide below, rust/proto/wire/gro.rs);
 * - ib.c: the sysfs attribute of rxud ib_devices, events reported to the
 *   owners of CQs, QPs and SRQs, the pages of a user memory region;
 * - params.c: the module parameters besides net.c's and gro.c's.
 *
 * Why C at all: bindgen gives Rust callable symbols only for functions
 * the kernel exports, 6.12's kernel crate has no abstractions for
 * sk_buffs, sockets, routes, netdevices, timers or module parameters, and
 * a static structure a kernel macro defines (module_param,
 * DEVICE_ATTR_RO) can only be written in C. Each file's head says which
 * of these its code needs.
 */
#ifndef RXUD_HELPERS_H
#define RXUD_HELPERS_H

#include <linux/netdevice.h>
#include <net/udp_tunnel.h>
#include <rdma/ib_verbs.h>

struct dst_cache;
struct list_head;

/* --- helpers.c: forwarders --- */

struct ib_device *rxud_ib_alloc_device(size_t size);
bool rxud_ib_device_try_get(struct ib_device *dev);
void rxud_ib_device_get_dev(struct ib_device *dev);
void rxud_ib_device_put_dev(struct ib_device *dev);
void rxud_ib_mark_name_assigned_by_user(struct ib_device *dev);

struct net_device *rxud_netdev_notifier_info_to_dev(void *info);
bool rxud_netif_running(const struct net_device *ndev);
bool rxud_netif_carrier_ok(const struct net_device *ndev);
bool rxud_netdev_is_registered(const struct net_device *ndev);
unsigned short rxud_netdev_type(const struct net_device *ndev);
unsigned int rxud_netdev_mtu(const struct net_device *ndev);
const unsigned char *rxud_netdev_addr(const struct net_device *ndev);
const char *rxud_netdev_name(const struct net_device *ndev);
void rxud_netdev_hold(struct net_device *ndev);
void rxud_netdev_put(struct net_device *ndev);
bool rxud_netdev_is_vlan(const struct net_device *ndev);

/* Memory shared with user space through mmap (remap_vmalloc_range). */
void *rxud_vmalloc_user(unsigned long size);
/* The user context a verbs call's udata belongs to (NULL for none). */
struct ib_ucontext *rxud_udata_ucontext(struct ib_udata *udata);
/* The driver udata of a uverbs attribute bundle (NULL for none). */
struct ib_udata *rxud_attrs_udata(struct uverbs_attr_bundle *attrs);
/* Where user space maps an mmap entry (rdma_user_mmap_get_offset). */
u64 rxud_mmap_entry_offset(const struct rdma_user_mmap_entry *entry);

/*
 * spin_lock_irqsave/spin_unlock_irqrestore (macros): locks shared with
 * interrupt context (rust/kext/sync.rs).
 */
unsigned long rxud_spin_lock_irqsave(spinlock_t *lock);
void rxud_spin_unlock_irqrestore(spinlock_t *lock, unsigned long flags);
/* spin_lock_bh/spin_unlock_bh: locks shared with softirq context only. */
void rxud_spin_lock_bh(spinlock_t *lock);
void rxud_spin_unlock_bh(spinlock_t *lock);

/* Network namespaces (dev_net is inline; net_cookie a field). */
struct net *rxud_dev_net(const struct net_device *ndev);
u64 rxud_net_cookie(const struct net *net);
void *rxud_sk_user_data(struct sock *sk);
/* sk_buff fields and inlines (struct sk_buff is opaque to Rust). */
void rxud_kfree_skb(struct sk_buff *skb);
unsigned int rxud_skb_len(const struct sk_buff *skb);
int rxud_skb_copy_to_page(const struct sk_buff *skb, int offset,
			  struct page *page, unsigned int pgoff, int len);
void rxud_page_write(struct page *page, unsigned int pgoff, const void *src,
		     unsigned int len);
void rxud_page_read(struct page *page, unsigned int pgoff, void *dst,
		    unsigned int len);
unsigned long rxud_umem_offset(struct ib_umem *umem);

/* The counter array of hardware statistics and its length. */
u64 *rxud_hw_stats_values(struct rdma_hw_stats *stats, int *num);

/* One-shot timers (rust/kext/timer.rs). */
void rxud_timer_setup(struct timer_list *timer,
		      void (*fn)(struct timer_list *));
int rxud_timer_arm_ns(struct timer_list *timer, u64 delay_ns);
u64 rxud_now_ns(void);
/* The kernel's CSPRNG (rust/kext/random.rs). */
u64 rxud_random_u64(void);

/* Work items run in softirq context, on the BH workqueue (rust/kext/bh_work.rs). */
void rxud_bh_work_init(struct work_struct *work,
		       void (*fn)(struct work_struct *));
bool rxud_bh_work_queue(struct work_struct *work);
bool rxud_bh_work_disable_sync(struct work_struct *work);

/*
 * Transmit skbs charged to their sender until the stack frees them
 * (rust/net/skb.rs): @fn runs when @skb is freed or orphaned, and finds
 * @arg with rxud_skb_destructor_arg().
 */
void rxud_skb_set_destructor(struct sk_buff *skb,
			     void (*fn)(struct sk_buff *), void *arg);
void *rxud_skb_destructor_arg(struct sk_buff *skb);
void rxud_msleep(unsigned int ms);

/*
 * Kernel memory by virtual DMA address (rust/ib/kmem.rs): the page of a
 * direct-mapped kernel address, or NULL if the address is not one.
 */
struct page *rxud_kva_page(u64 addr);

/* Whether packets may be sent from here: not in hard irq, interrupts on. */
bool rxud_may_send_inline(void);

/* The kernel's CRC-32 (crc32_le) over @len bytes at @p from @crc. */
u32 rxud_crc32_le(u32 crc, const u8 *p, size_t len);

/* An RCU read-side critical section (rust/kext/rcu.rs); the macros' bodies. */
void rxud_rcu_read_lock(void);
void rxud_rcu_read_unlock(void);

/*
 * A restrack entry's driver details (rust/ib/res.rs): the nest of
 * RDMA_NLDEV_ATTR_DRIVER that `rdma resource show -d` prints, opened
 * (NULL: no room), closed or cancelled; named values go in it.
 */
struct nlattr *rxud_nl_driver_open(struct sk_buff *msg);
void rxud_nl_driver_close(struct sk_buff *msg, struct nlattr *nest);
void rxud_nl_driver_cancel(struct sk_buff *msg, struct nlattr *nest);
int rxud_nl_driver_u32(struct sk_buff *msg, const char *name, u32 value);

/* --- net.c: the network code (rust/net/) --- */

/*
 * A UDP tunnel socket on @port of @net (IPv4, or IPv6-only with @ipv6)
 * whose datagrams go to @encap_rcv with @user_data as sk_user_data, and
 * through gro.c's GRO callbacks first.
 */
int rxud_udp_tunnel_open(struct net *net, bool ipv6, u16 port,
			 int (*encap_rcv)(struct sock *sk, struct sk_buff *skb),
			 void *user_data, struct socket **sockp);
/*
 * Namespaces' end (rust/net/netns.rs): @exit(@ctx, cookie) for each
 * network namespace that exits while registered, and for each one still
 * alive when unregistering, before it is freed (a pernet subsystem's
 * exit). One registration at a time.
 */
int rxud_netns_exit_register(void (*exit)(void *ctx, u64 cookie), void *ctx);
void rxud_netns_exit_unregister(void);
/* The rxud port a received packet is for (its device, or lo's owner). */
struct net_device *rxud_skb_port_dev(const struct sk_buff *skb);
/* For a packet that is for a VLAN device, the device under it; else NULL. */
struct net_device *rxud_skb_vlan_real_dev(const struct sk_buff *skb);
/* Drops the UDP header an encap_rcv skb starts with; false if too short. */
bool rxud_skb_pull_udp_header(struct sk_buff *skb);
int rxud_skb_ip_udp_headers(const struct sk_buff *skb, u8 *buf, int max);
/*
 * Advances the raw CRC-32 register @crc (crc32_le's, no inversion) over
 * @len bytes at @offset of @skb, linear part and fragments, in place.
 */
u32 rxud_skb_crc32(const struct sk_buff *skb, int offset, int len, u32 crc);

struct sk_buff *rxud_tx_skb_alloc(struct net_device *ndev, unsigned int len,
				  void **data);
/*
 * A flow's cached output route (rust/net/route.rs): allocated (with
 * GFP_ATOMIC if @atomic), reset (forget the route), freed. The transmit
 * functions below disable bottom halves around the per-CPU slot they
 * touch.
 */
struct dst_cache *rxud_dst_cache_new(bool atomic);
void rxud_dst_cache_reset(struct dst_cache *cache);
void rxud_dst_cache_free(struct dst_cache *cache);
unsigned int rxud_route_mtu(struct net_device *ndev, const struct in6_addr *sgid,
			    const struct in6_addr *dgid);
/*
 * Routes @skb (through @cache if not NULL) and pushes its UDP and IP
 * headers; *@datagram is then the whole IP datagram, for the ICRC.
 */
int rxud_tx_push_udp4(struct sk_buff *skb, struct dst_cache *cache,
		      __be32 saddr, __be32 daddr, __be16 sport, u8 tos, u8 ttl,
		      u16 id, u8 **datagram);
int rxud_tx_push_udp6(struct sk_buff *skb, struct dst_cache *cache,
		      const struct in6_addr *saddr, const struct in6_addr *daddr,
		      __be16 sport, u8 tclass, u8 hop_limit, u32 flow_label,
		      u8 **datagram);
/* Whether trains may go out of @skb's device (module parameter trains). */
bool rxud_skb_trains_allowed(const struct sk_buff *skb);
void rxud_tx_train(struct sk_buff *head, struct sk_buff **rest,
		   unsigned int n);
int rxud_tx_send(struct sk_buff *skb);
int rxud_tx_send6(struct sk_buff *skb);

/* --- gro.c: received trains --- */

struct sk_buff *rxud_gro_receive(struct sock *sk, struct list_head *head,
				 struct sk_buff *skb);
int rxud_gro_complete(struct sock *sk, struct sk_buff *skb, int nhoff);
int rxud_rx_unlink_train(struct sk_buff *skb, struct sk_buff **rest,
			 unsigned int *dropped);
struct sk_buff *rxud_skb_list_pop(struct sk_buff **list);
unsigned int rxud_skb_train_segs(const struct sk_buff *skb);

/*
 * What rxud_gro_receive knows of a datagram in GRO, its UDP header
 * pulled, for rxud_gro_decide (rust/proto/wire/gro.rs, Datagram).
 */
struct rxud_gro_dgram {
	/* Its UDP payload length, from IP's length (skb_gro_len). */
	u32 payload_len;
	/* Its bytes from the IP header on (skb->len). */
	u32 len;
	/* Its UDP header's length field, in host order. */
	u16 udp_len;
	/* The IP or UDP layer wants it delivered alone (GRO's flush). */
	bool flush;
};

/* The train GRO holds for the datagram's flow (proto's Train). */
struct rxud_gro_train {
	/* Whether GRO holds one; the fields below are 0 if not. */
	bool held;
	/* Its first datagram's UDP length field, in host order. */
	u16 head_udp_len;
	/* Datagrams in it (NAPI_GRO_CB's count). */
	u16 count;
	/* Its bytes (the held skb's len). */
	u32 len;
};

/* What rxud_gro_receive does with the datagram. */
enum rxud_gro_action {
	/* Up alone (flushed), after the held train, which goes up now. */
	RXUD_GRO_ALONE,
	/* Heads a new train, if it is addressed to this host. */
	RXUD_GRO_HEAD,
	/* The held train goes up now; the datagram heads the next one. */
	RXUD_GRO_SPLIT,
	/* Linked behind the held train, which stays open. */
	RXUD_GRO_JOIN,
	/* Linked behind the held train, which then goes up. */
	RXUD_GRO_JOIN_LAST,
};

/*
 * Implemented in Rust (rust/net/gro.rs): GRO's decision for @d, given the
 * train held for its flow (@t) and whether GRO trains are on (@enabled,
 * the module parameter gro). Called once per received datagram.
 */
enum rxud_gro_action rxud_gro_decide(bool enabled, struct rxud_gro_dgram d,
				     struct rxud_gro_train t);

/* --- ib.c: verbs glue beyond forwarders (rust/ib/) --- */

/* sysfs attributes of rxud ib_devices (ib_device_ops.device_group). */
extern const struct attribute_group rxud_device_attr_group;
/* Implemented in Rust: the user ABI version the attribute shows. */
u32 rxud_uverbs_abi_version(void);

int rxud_umem_pages(struct ib_umem *umem, struct page **pages, int max);
void rxud_ib_cq_event(struct ib_cq *cq);
void rxud_ib_cq_overflow(struct ib_cq *cq);
void rxud_ib_qp_last_wqe_reached(struct ib_qp *qp);
void rxud_ib_qp_event(struct ib_qp *qp, enum ib_event_type type);
void rxud_ib_srq_limit_reached(struct ib_srq *srq);

/* --- params.c: module parameters --- */

/* Whether to time receive and transmit steps (rust/kext/timer.rs). */
bool rxud_timing(void);
bool rxud_cc(void);
/*
 * Most QPs of a device besides its GSI QP: the size of its QP number
 * range (rust/kext/params.rs). The module parameter max_qp lowers it for
 * the devices created after it is set.
 */
#define RXUD_MAX_QP 65536U
unsigned int rxud_max_qp(void);

#endif
