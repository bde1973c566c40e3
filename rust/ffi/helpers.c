// SPDX-License-Identifier: GPL-2.0
/*
 * Forwarders: each function here makes one kernel call or field access
 * reachable from rxud's Rust code, and does nothing else. 6.12's Rust
 * reaches C through bindgen, which emits no callable symbol for a static
 * inline function or a macro (netif_running, dev_hold, kfree_skb,
 * spin_lock_irqsave, rcu_read_lock, queue_work, timer_setup, ...), and
 * the generated bindings keep struct sk_buff, net_device and device
 * opaque, so their fields are read here too. A few take two or three
 * lines because the macro needs them (spin_lock_irqsave's flags word,
 * kmap_local_page's mapping around a copy) or to answer NULL for none.
 *
 * A few forward to exported functions the bindings could call directly
 * (_ib_alloc_device, get_device and put_device, disable_work_sync,
 * msleep, get_random_u64, crc32_le): they are here only so that the
 * Rust side reaches the kernel one way; nothing stops their callers
 * (rust/ib, rust/kext, rust/net.rs) from using the bindings instead.
 *
 * Code with logic of its own is elsewhere: net.c (routes, IP and UDP
 * headers, trains), gro.c (received trains), ib.c (sysfs attribute,
 * verbs events, umem pages), params.c (module parameters).
 */

#include <linux/crc32.h>
#include <linux/delay.h>
#include <linux/highmem.h>
#include <linux/if_vlan.h>
#include <linux/netdevice.h>
#include <linux/random.h>
#include <linux/vmalloc.h>
#include <linux/workqueue.h>
#include <net/netlink.h>
#include <net/sock.h>
#include <rdma/ib_umem.h>
#include <rdma/rdma_netlink.h>
#include <rdma/restrack.h>
#include <rdma/uverbs_ioctl.h>
#include "helpers.h"

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

u64 rxud_net_cookie(const struct net *net)
{
	return net->net_cookie;
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

u64 *rxud_hw_stats_values(struct rdma_hw_stats *stats, int *num)
{
	*num = stats->num_counters;
	return stats->value;
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

unsigned long rxud_umem_offset(struct ib_umem *umem)
{
	return ib_umem_offset(umem);
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

struct nlattr *rxud_nl_driver_open(struct sk_buff *msg)
{
	return nla_nest_start(msg, RDMA_NLDEV_ATTR_DRIVER);
}

void rxud_nl_driver_close(struct sk_buff *msg, struct nlattr *nest)
{
	nla_nest_end(msg, nest);
}

void rxud_nl_driver_cancel(struct sk_buff *msg, struct nlattr *nest)
{
	nla_nest_cancel(msg, nest);
}

int rxud_nl_driver_u32(struct sk_buff *msg, const char *name, u32 value)
{
	return rdma_nl_put_driver_u32(msg, name, value);
}
