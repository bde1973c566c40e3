#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0
"""Where the host's CPUs go while two bench VMs run (Documentation/performance.rst,
"What bounds the targets not met").

    qemu/host-threads.py PHASEFILE [HZ]

Runs on the host beside a pair of VMs (qemu/host-threads-guest.sh starts
both). PHASEFILE is a file the guest rewrites with the name of what it runs
now; "end" stops the sampler. For each QEMU thread and phase it prints:

- run: the share of the phase's wall time the thread ran on a host CPU,
- wait: the share it was runnable but waited for one (both from
  /proc/TID/schedstat, read when a phase starts and ends),
- and, sampled HZ times a second (default 20), what it was doing:
  "running", or the system call it sat in (/proc/TID/syscall: its number
  and first argument, a futex's address), the most frequent four.

QEMU's threads: the main loop (its thread id is the process id: the
socket link's I/O and virtio's device side), one vCPU thread per VM (the
thread with the most CPU time), and helpers (RCU, workers).
"""
import collections
import os
import sys
import time

SYSCALLS = {"202": "futex", "271": "ppoll", "7": "poll", "232": "epoll_wait"}


def qemus():
    found = []
    for p in os.listdir("/proc"):
        if not p.isdigit():
            continue
        try:
            with open(f"/proc/{p}/cmdline", "rb") as f:
                argv0 = f.read().split(b"\0", 1)[0]
                if os.path.basename(argv0).startswith(b"qemu-system"):
                    found.append(p)
        except OSError:
            pass
    return sorted(found)


def read(path):
    try:
        with open(path) as f:
            return f.read().split()
    except OSError:
        return None


def main():
    phase_file = sys.argv[1]
    hz = float(sys.argv[2]) if len(sys.argv) > 2 else 20.0
    deadline = time.time() + 3600
    pids = []
    while not pids and time.time() < deadline:
        if (read(phase_file) or [""])[0] == "end":
            sys.exit("no QEMU found")
        pids = qemus()
        time.sleep(0.5)
    states = collections.defaultdict(collections.Counter)
    # (phase, pid, tid) -> [first time, first (run, wait) ns, last time, last]
    sched = {}
    order = []
    me = read("/proc/self/schedstat")
    t_me = time.time()
    while time.time() < deadline:
        ph = (read(phase_file) or [""])[0]
        if ph == "end":
            break
        if ph and ph not in order:
            order.append(ph)
        alive = False
        for p in pids:
            try:
                tids = os.listdir(f"/proc/{p}/task")
            except OSError:
                continue
            alive = True
            for t in tids:
                sc = read(f"/proc/{p}/task/{t}/syscall")
                ss = read(f"/proc/{p}/task/{t}/schedstat")
                if not sc or not ss or not ph:
                    continue
                key = (ph, p, t)
                what = "running" if sc[0] == "running" else \
                    f"{SYSCALLS.get(sc[0], 'sys' + sc[0])}:{sc[1]}"
                states[key][what] += 1
                now, v = time.time(), (int(ss[0]), int(ss[1]))
                if key in sched:
                    sched[key][2:] = [now, v]
                else:
                    sched[key] = [now, v, now, v]
        if not alive:
            break
        time.sleep(1.0 / hz)
    me2 = read("/proc/self/schedstat")
    busy = (int(me2[0]) - int(me[0])) / 1e9 / max(time.time() - t_me, 1e-9)
    total = collections.Counter()
    for (ph, p, t), (t0, v0, t1, v1) in sched.items():
        total[(p, t)] += v1[0] - v0[0]
    vcpu = {}
    for (p, t), ns in total.items():
        if p not in vcpu or ns > total[(p, vcpu[p])]:
            vcpu[p] = t
    print(f"sampler: {len(pids)} QEMUs, {hz:g} Hz, its own CPU {busy:.1%}")
    for ph in order:
        print(f"== {ph}")
        for (q, p, t), (t0, v0, t1, v1) in sorted(sched.items()):
            if q != ph or t1 - t0 < 1:
                continue
            run = (v1[0] - v0[0]) / 1e9 / (t1 - t0)
            wait = (v1[1] - v0[1]) / 1e9 / (t1 - t0)
            if run < 0.02 and wait < 0.02:
                continue
            kind = "main" if t == p else "vcpu" if vcpu.get(p) == t else "helper"
            c = states[(ph, p, t)]
            n = sum(c.values())
            top = " ".join(f"{w}={k / n:.0%}" for w, k in c.most_common(4))
            print(f"  qemu {p} {kind:6s} run={run:4.0%} wait={wait:4.0%}  {top}")


if __name__ == "__main__":
    main()
