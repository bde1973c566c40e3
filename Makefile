# SPDX-License-Identifier: GPL-2.0
#
# rxud top-level Makefile.
#
#   make setup    install everything and build the test kernel (cached)
#   make          build rxud.ko against that kernel (KDIR= to override)
#                 and librxud (rdma-core-provider/build/librxud-rdmav34.so)
#   make install  install both (modules_install, libibverbs provider dir)
#   make run      the main job: two VMs, rxud loaded, traffic between them
#   make bench    perftest over rxe and rxud between two VMs, side by side
#                 (LINK=tap: over tap devices and a host bridge instead of
#                 QEMU's socket link; needs root), then bench-incast's and
#                 bench-rdmc's tables
#   make bench-scaling  1 to 64 QPs and XUD peers, 1 and 2 vCPUs per VM
#   make bench-incast   2, 8 and 32 XUD and RC senders to one receiver
#                 through an ECN-marking bottleneck, congestion control on/off
#   make bench-rdmc     RDMC over XUD: 1 to 64 MB to 8 members, each algorithm
#   make soak     a million crafted RoCEv2 packets and a hostile ring writer
#                 against rxud on the KASAN + UBSAN kernel, with live RC,
#                 UD and XUD traffic; then rmmod, kmemleak, kernel reports
#   make check    lint gates, host unit tests + in-VM kselftest-style tests
#   make check-mutants  the tests of the tests: each mutant must be caught
#   make fmt      format rust/ and the provider with the kernel's settings
#   make lint     rustfmt --check and clippy (module, host crates, librxud)
#   make clean

TOP := $(abspath $(dir $(lastword $(MAKEFILE_LIST))))
KDIR ?= $(shell bash -c '. $(TOP)/qemu/lib.sh && kernel_dir')
KRUSTC ?= /usr/bin/rustc
KRUSTDOC ?= /usr/bin/rustdoc
BINDGEN ?= $(HOME)/.cargo/bin/bindgen
KMAKE = $(MAKE) -C $(KDIR) M=$(TOP) LLVM=1 RUSTC=$(KRUSTC) \
	RUSTDOC=$(KRUSTDOC) BINDGEN=$(BINDGEN)

PROVIDER := $(TOP)/rdma-core-provider
PROVIDER_SO := $(PROVIDER)/build/librxud-rdmav34.so
LIBIBVERBS_DIR ?= /usr/lib/x86_64-linux-gnu/libibverbs
INCLUDEDIR ?= /usr/include

VERBS_TEST := $(TOP)/tests/verbs/verbs-test
RC_TEST := $(TOP)/tests/verbs/rc-test
DATA_TEST := $(TOP)/tests/verbs/data-test
EX_TEST := $(TOP)/tests/verbs/ex-test
FLUSH_TEST := $(TOP)/tests/verbs/flush-test
XUD_TEST := $(TOP)/tests/verbs/xud-test
XUD_DATA := $(TOP)/tests/verbs/xud-data
RXUD_PERF := $(TOP)/tests/verbs/rxud-perf
RXUD_PINGMESH := $(TOP)/tests/verbs/rxud-pingmesh
XUD_INCAST := $(TOP)/tests/verbs/xud-incast
RXUD_MCAST := $(TOP)/tests/verbs/rxud-mcast
RDMC_LIB := $(PROVIDER)/build/librdmc.a
XUD_SINK := $(TOP)/tests/verbs/xud-sink
XUD_RECREATE := $(TOP)/tests/verbs/xud-recreate
XUD_BOUNDS := $(TOP)/tests/verbs/xud-bounds
XUD_FORGE := $(TOP)/tests/xud-forge/target/release/xud-forge
ROCE_FUZZ := $(TOP)/tests/roce-fuzz/target/release/roce-fuzz
RING_STORM := $(TOP)/tests/verbs/ring-storm
HELD_DEVICE := $(TOP)/tests/verbs/held-device
ORPHAN_SEND := $(TOP)/tests/verbs/orphan-send
MCAST_TEST := $(TOP)/tests/verbs/mcast-test
QP_MEM := $(TOP)/tests/verbs/qp-mem
UDP_LAT := $(TOP)/tests/verbs/udp-lat
KTEST := $(TOP)/tests/kmod

.PHONY: all modules provider ktest install setup run bench bench-scaling bench-incast bench-rdmc soak check check-host check-vm check-mutants clean help \
	fmt lint fmt-check clippy clippy-module clippy-host

all: modules provider $(VERBS_TEST) $(RC_TEST) $(DATA_TEST) $(EX_TEST) $(FLUSH_TEST) $(XUD_TEST) $(XUD_DATA) $(RXUD_PERF) \
	$(RXUD_PINGMESH) $(XUD_INCAST) $(RXUD_MCAST) $(XUD_SINK) $(XUD_RECREATE) $(XUD_BOUNDS) $(XUD_FORGE) $(ROCE_FUZZ) $(RING_STORM) $(HELD_DEVICE) $(ORPHAN_SEND) $(MCAST_TEST) ktest

# tests/kmod/rxud_ktest.ko: drives kernel-only verbs (tests/guest/06-*).
ktest:
	$(MAKE) -C $(KDIR) M=$(KTEST) LLVM=1 modules

$(VERBS_TEST): $(TOP)/tests/verbs/verbs-test.c $(TOP)/tests/verbs/tap.h $(TOP)/tests/verbs/util.h
	$(CC) -O2 -g -Wall -Wextra -Werror -o $@ $< -libverbs

$(RC_TEST): $(TOP)/tests/verbs/rc-test.c $(TOP)/tests/verbs/tap.h $(TOP)/tests/verbs/util.h
	$(CC) -O2 -g -Wall -Wextra -Werror -o $@ $< -libverbs

$(DATA_TEST): $(TOP)/tests/verbs/data-test.c $(TOP)/tests/verbs/tap.h $(TOP)/tests/verbs/util.h
	$(CC) -O2 -g -Wall -Wextra -Werror -o $@ $< -libverbs

# A process that holds a device while it is removed, and one that exits
# with packets waiting for ARP (tests/guest/24-*).
$(HELD_DEVICE): $(TOP)/tests/verbs/held-device.c $(TOP)/tests/verbs/util.h
	$(CC) -O2 -g -Wall -Wextra -Werror -o $@ $< -libverbs

$(ORPHAN_SEND): $(TOP)/tests/verbs/orphan-send.c $(TOP)/tests/verbs/util.h
	$(CC) -O2 -g -Wall -Wextra -Werror -o $@ $< -libverbs

$(EX_TEST): $(TOP)/tests/verbs/ex-test.c $(TOP)/tests/verbs/tap.h $(TOP)/tests/verbs/util.h
	$(CC) -O2 -g -Wall -Wextra -Werror -o $@ $< -libverbs

# FLUSH through librxud's direct verb rxudv_wr_flush (rdma-core 44 has no
# ibv_wr_flush).
$(FLUSH_TEST): $(TOP)/tests/verbs/flush-test.c $(TOP)/tests/verbs/tap.h $(TOP)/tests/verbs/util.h \
		$(PROVIDER)/include/infiniband/rxudv.h | provider
	$(CC) -O2 -g -Wall -Wextra -Werror -I$(PROVIDER)/include -o $@ $< -libverbs \
		-L$(PROVIDER)/build -l:librxud-rdmav34.so -Wl,-rpath,$(PROVIDER)/build

# XUD through librxud's direct verb: rxudv.h from the tree, linked to the
# provider built here (which exports rxudv_create_qp).
$(XUD_TEST): $(TOP)/tests/verbs/xud-test.c $(TOP)/tests/verbs/tap.h $(TOP)/tests/verbs/util.h \
		$(PROVIDER)/include/infiniband/rxudv.h | provider
	$(CC) -O2 -g -Wall -Wextra -Werror -I$(PROVIDER)/include -o $@ $< -libverbs \
		-L$(PROVIDER)/build -l:librxud-rdmav34.so -Wl,-rpath,$(PROVIDER)/build

$(XUD_DATA): $(TOP)/tests/verbs/xud-data.c $(TOP)/tests/verbs/tap.h $(TOP)/tests/verbs/util.h \
		$(PROVIDER)/include/infiniband/rxudv.h | provider
	$(CC) -O2 -g -Wall -Wextra -Werror -I$(PROVIDER)/include -o $@ $< -libverbs \
		-L$(PROVIDER)/build -l:librxud-rdmav34.so -Wl,-rpath,$(PROVIDER)/build

# An XUD QP that reports what it received, for xud-forge to send to.
$(XUD_SINK): $(TOP)/tests/verbs/xud-sink.c $(TOP)/tests/verbs/util.h \
		$(PROVIDER)/include/infiniband/rxudv.h | provider
	$(CC) -O2 -g -Wall -Wextra -Werror -I$(PROVIDER)/include -o $@ $< -libverbs \
		-L$(PROVIDER)/build -l:librxud-rdmav34.so -Wl,-rpath,$(PROVIDER)/build

# XUD QPs destroyed and re-created with the same number (tests/guest/19-*).
$(XUD_RECREATE): $(TOP)/tests/verbs/xud-recreate.c $(TOP)/tests/verbs/tap.h $(TOP)/tests/verbs/util.h \
		$(PROVIDER)/include/infiniband/rxudv.h | provider
	$(CC) -O2 -g -Wall -Wextra -Werror -I$(PROVIDER)/include -o $@ $< -libverbs \
		-L$(PROVIDER)/build -l:librxud-rdmav34.so -Wl,-rpath,$(PROVIDER)/build

# UD multicast groups on one device (tests/guest/08-ud.sh).
$(MCAST_TEST): $(TOP)/tests/verbs/mcast-test.c $(TOP)/tests/verbs/tap.h $(TOP)/tests/verbs/util.h
	$(CC) -O2 -g -Wall -Wextra -Werror -o $@ $< -libverbs

# Dead peers and a full receive CQ against an XUD QP (tests/guest/20-*).
$(XUD_BOUNDS): $(TOP)/tests/verbs/xud-bounds.c $(TOP)/tests/verbs/tap.h $(TOP)/tests/verbs/util.h \
		$(PROVIDER)/include/infiniband/rxudv.h | provider
	$(CC) -O2 -g -Wall -Wextra -Werror -I$(PROVIDER)/include -o $@ $< -libverbs \
		-L$(PROVIDER)/build -l:librxud-rdmav34.so -Wl,-rpath,$(PROVIDER)/build

# Forged XUD packets through a raw socket, built with rust/proto. Cargo
# leaves an up-to-date binary untouched: touched here so make sees it new.
$(XUD_FORGE): $(TOP)/tests/xud-forge/main.rs $(TOP)/tests/xud-forge/Cargo.toml \
		$(wildcard $(TOP)/rust/proto/*.rs $(TOP)/rust/proto/*/*.rs)
	cargo build --release --offline --manifest-path $(TOP)/tests/xud-forge/Cargo.toml
	touch $@

# Crafted RoCEv2 frames of every kind (make soak, tests/guest/22-soak.sh),
# built with rust/proto as xud-forge is.
$(ROCE_FUZZ): $(wildcard $(TOP)/tests/roce-fuzz/*.rs) $(TOP)/tests/roce-fuzz/Cargo.toml \
		$(wildcard $(TOP)/rust/proto/*.rs $(TOP)/rust/proto/*/*.rs)
	cargo build --release --offline --manifest-path $(TOP)/tests/roce-fuzz/Cargo.toml
	touch $@

# A user that scribbles on its own rings and rings doorbells (make soak).
$(RING_STORM): $(TOP)/tests/verbs/ring-storm.c $(TOP)/tests/verbs/util.h \
		$(PROVIDER)/include/infiniband/rxudv.h | provider
	$(CC) -O2 -g -Wall -Wextra -Werror -I$(PROVIDER)/include -o $@ $< -libverbs \
		-L$(PROVIDER)/build -l:librxud-rdmav34.so -Wl,-rpath,$(PROVIDER)/build

# XUD's perftest: bandwidth and latency, one QP to many peers.
$(RXUD_PERF): $(TOP)/tests/verbs/rxud-perf.c $(PROVIDER)/include/infiniband/rxudv.h | provider
	$(CC) -O2 -g -Wall -Wextra -Werror -I$(PROVIDER)/include -o $@ $< -libverbs \
		-L$(PROVIDER)/build -l:librxud-rdmav34.so -Wl,-rpath,$(PROVIDER)/build

# RDMA pingmesh over one XUD QP (tests/guest/26-pingmesh.sh).
$(RXUD_PINGMESH): $(TOP)/tests/verbs/rxud-pingmesh.c $(TOP)/tests/verbs/xud-tool.h $(TOP)/tests/verbs/util.h \
		$(PROVIDER)/include/infiniband/rxudv.h | provider
	$(CC) -O2 -g -Wall -Wextra -Werror -I$(PROVIDER)/include -o $@ $< -libverbs \
		-L$(PROVIDER)/build -l:librxud-rdmav34.so -Wl,-rpath,$(PROVIDER)/build

# Many XUD senders to one XUD QP (tests/guest/27-incast.sh).
$(XUD_INCAST): $(TOP)/tests/verbs/xud-incast.c $(TOP)/tests/verbs/xud-tool.h $(TOP)/tests/verbs/util.h \
		$(PROVIDER)/include/infiniband/rxudv.h | provider
	$(CC) -O2 -g -Wall -Wextra -Werror -I$(PROVIDER)/include -o $@ $< -libverbs \
		-L$(PROVIDER)/build -l:librxud-rdmav34.so -Wl,-rpath,$(PROVIDER)/build

# RDMC over XUD (rdma-core-provider/rdmc): the library, and its
# perftest-shaped tool (tests/guest/28-rdmc.sh).
$(RDMC_LIB): $(PROVIDER)/rdmc/rdmc.c $(PROVIDER)/rdmc/rdmc.h $(PROVIDER)/rdmc/blake2s.c $(PROVIDER)/rdmc/blake2s.h $(PROVIDER)/include/infiniband/rxudv.h | provider
	$(CC) -O2 -g -Wall -Wextra -Werror -I$(PROVIDER)/include -c -o $(PROVIDER)/build/rdmc.o $<
	$(CC) -O2 -g -Wall -Wextra -Werror -c -o $(PROVIDER)/build/blake2s.o $(PROVIDER)/rdmc/blake2s.c
	$(AR) rcs $@ $(PROVIDER)/build/rdmc.o $(PROVIDER)/build/blake2s.o

$(RXUD_MCAST): $(TOP)/tests/verbs/rxud-mcast.c $(TOP)/tests/verbs/xud-tool.h $(TOP)/tests/verbs/util.h \
		$(PROVIDER)/rdmc/rdmc.h $(RDMC_LIB) | provider
	$(CC) -O2 -g -Wall -Wextra -Werror -I$(PROVIDER)/include -I$(PROVIDER)/rdmc -o $@ $< $(RDMC_LIB) \
		-libverbs -L$(PROVIDER)/build -l:librxud-rdmav34.so -Wl,-rpath,$(PROVIDER)/build

# Kernel memory per QP, for make bench (which builds it in its own copy).
$(QP_MEM): $(TOP)/tests/verbs/qp-mem.c
	$(CC) -O2 -g -Wall -Wextra -Werror -o $@ $< -libverbs

# Plain UDP sockets' round trip, make bench's latency reference.
$(UDP_LAT): $(TOP)/tests/verbs/udp-lat.c
	$(CC) -O2 -g -Wall -Wextra -Werror -o $@ $< -lm

# librxud, named as libibverbs loads it. Tests use it in place through
# RDMAV_DRIVERS=$(PROVIDER)/build/librxud.
provider:
	cargo build --release --manifest-path $(PROVIDER)/Cargo.toml
	install -D -m 0755 $(PROVIDER)/target/release/librxud.so $(PROVIDER_SO)

install: all
	$(KMAKE) modules_install
	install -D -m 0755 $(PROVIDER_SO) $(DESTDIR)$(LIBIBVERBS_DIR)/librxud-rdmav34.so
	install -D -m 0644 $(PROVIDER)/include/infiniband/rxudv.h $(DESTDIR)$(INCLUDEDIR)/infiniband/rxudv.h
	install -D -m 0644 /dev/null $(DESTDIR)/etc/libibverbs.d/rxud.driver
	echo "driver rxud" > $(DESTDIR)/etc/libibverbs.d/rxud.driver

# Kbuild's dependency files name kernel headers by relative paths, so objects
# built against one kernel tree look up to date against another (with a
# different config, hence different struct layouts). Start clean whenever the
# tree changes.
modules:
	@test -f $(KDIR)/.config || { echo "no kernel at $(KDIR): run 'make setup'"; exit 1; }
	@if [ "$$(cat $(TOP)/.rxud-kdir 2>/dev/null)" != "$(KDIR)" ]; then \
		echo "kernel tree changed: cleaning module objects"; \
		$(KMAKE) clean >/dev/null; $(MAKE) -C $(KDIR) M=$(KTEST) LLVM=1 clean >/dev/null; \
		echo "$(KDIR)" > $(TOP)/.rxud-kdir; fi
	$(KMAKE) modules

setup:
	bash $(TOP)/qemu/setup.sh

run: all
	bash $(TOP)/qemu/run-pair-demo.sh

# perftest over rxe and rxud between two VMs, side by side (not in check),
# on the bench kernel. qemu/bench.sh builds that kernel on first use and
# builds rxud.ko, librxud and qp-mem against it in a copy of this tree, so
# that this tree's rxud.ko stays built for the test kernel. Then issue
# 29's incast and RDMC tables (bench-incast, bench-rdmc).
bench:
	RXUD_LINK=$(LINK) bash $(TOP)/qemu/bench.sh
	bash $(TOP)/qemu/bench-incast.sh
	bash $(TOP)/qemu/bench-incast.sh --rdmc

# Issue 10's scaling runs (Documentation/scaling.rst), on the bench kernel
# as make bench.
bench-scaling:
	RXUD_LINK=$(LINK) bash $(TOP)/qemu/bench.sh --scaling

# Issue 29's incast table (Documentation/incast.rst): N = 2, 8, 32 XUD and
# RC senders to one receiver through a RED/ECN bottleneck, congestion
# control on and off (tests/guest/27-incast.sh in full), on the bench
# kernel in one VM.
bench-incast:
	bash $(TOP)/qemu/bench-incast.sh

# Issue 29's RDMC table (Documentation/rdmc.rst): the time to replicate
# 1 MB to 64 MB to 8 members with each algorithm (tests/guest/28-rdmc.sh's
# benchmark mode), on the bench kernel in one VM.
bench-rdmc:
	bash $(TOP)/qemu/bench-incast.sh --rdmc

# Issue 27's soak (not in check; check runs a short version of it,
# tests/guest/22-soak.sh): qemu/soak.sh builds the KASAN + UBSAN kernel on
# first use, builds rxud and the test programs against it in a copy of
# this tree (as make bench does), runs the soak in a VM and records it in
# Documentation/soak.rst. PACKETS= to change the million; FUZZ_SECONDS=
# stops the fuzzer after that long (a slow host: as many as fit).
soak:
	RXUD_SOAK_PACKETS=$(PACKETS) RXUD_SOAK_SECONDS=$(FUZZ_SECONDS) bash $(TOP)/qemu/soak.sh

check: all
	bash $(TOP)/tests/run.sh

check-host:
	bash $(TOP)/tests/run.sh --host-only

check-vm: all
	bash $(TOP)/tests/run.sh --vm-only

# The tests of the tests (tests/mutation.sh): each mutant must fail the
# test named for it. CI runs it after check.
check-mutants: all
	bash $(TOP)/tests/run.sh --mutants

# Lint gates. Debian's rustfmt and clippy-driver match the kernel's rustc
# (rustc-web); the rustup ones on PATH are another version.
RUSTFMT ?= /usr/bin/rustfmt
CLIPPY_DRIVER ?= /usr/bin/clippy-driver
RUST_SOURCES = $(shell find $(TOP)/rust $(PROVIDER) $(TOP)/tests/roce-fuzz -name '*.rs' \
	-not -path '*/target/*' -not -name bindings_generated.rs | sort)
HOST_CRATES := $(TOP)/rust/proto $(TOP)/rust/abi $(PROVIDER) $(TOP)/tests/xud-forge $(TOP)/tests/roce-fuzz

fmt:
	$(RUSTFMT) --edition 2021 --config-path $(TOP)/.rustfmt.toml $(RUST_SOURCES)

fmt-check:
	$(RUSTFMT) --check --edition 2021 --config-path $(TOP)/.rustfmt.toml $(RUST_SOURCES)

# The kernel's own lint set (CLIPPY=1), over a fresh build of the crate;
# any warning fails.
clippy-module:
	@test -f $(KDIR)/.config || { echo "no kernel at $(KDIR): run 'make setup'"; exit 1; }
	rm -f $(TOP)/rust/rxud.o
	$(KMAKE) CLIPPY=1 CLIPPY_DRIVER=$(CLIPPY_DRIVER) modules 2>&1 | tee $(TOP)/.clippy-module.log
	@! grep -E '^(warning|error)' $(TOP)/.clippy-module.log

clippy-host:
	set -e; for c in $(HOST_CRATES); do \
		cargo clippy --manifest-path $$c/Cargo.toml --all-targets -- -D warnings; done

clippy: clippy-module clippy-host

lint: fmt-check clippy

clean:
	-$(KMAKE) clean
	-$(MAKE) -C $(KDIR) M=$(KTEST) LLVM=1 clean
	rm -f $(TOP)/.rxud-kdir
	rm -f $(VERBS_TEST) $(RC_TEST) $(DATA_TEST) $(EX_TEST) $(XUD_TEST) $(XUD_DATA) $(RXUD_PERF) \
		$(XUD_SINK) $(XUD_RECREATE) $(XUD_BOUNDS) $(RXUD_MCAST) $(QP_MEM) $(UDP_LAT) $(RING_STORM) $(HELD_DEVICE) $(ORPHAN_SEND) $(MCAST_TEST)
	rm -rf $(TOP)/rust/proto/target $(TOP)/rust/abi/target $(PROVIDER)/target $(PROVIDER)/build

help:
	@sed -n '3,/^$$/p' $(TOP)/Makefile
