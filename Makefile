# SPDX-License-Identifier: GPL-2.0
#
# rxud top-level Makefile.
#
#   make setup    install everything and build the test kernel (cached)
#   make          build rxud.ko against that kernel (KDIR= to override)
#   make run      the main job: two VMs, rxud loaded, traffic between them
#   make check    host unit tests + in-VM kselftest-style tests
#   make clean

TOP := $(abspath $(dir $(lastword $(MAKEFILE_LIST))))
KDIR ?= $(shell bash -c '. $(TOP)/qemu/lib.sh && kernel_dir')
KRUSTC ?= /usr/bin/rustc
KRUSTDOC ?= /usr/bin/rustdoc
BINDGEN ?= $(HOME)/.cargo/bin/bindgen
KMAKE = $(MAKE) -C $(KDIR) M=$(TOP) LLVM=1 RUSTC=$(KRUSTC) \
	RUSTDOC=$(KRUSTDOC) BINDGEN=$(BINDGEN)

.PHONY: all modules setup run check check-host check-vm clean help

all: modules

modules:
	@test -f $(KDIR)/.config || { echo "no kernel at $(KDIR): run 'make setup'"; exit 1; }
	$(KMAKE) modules

setup:
	bash $(TOP)/qemu/setup.sh

run: modules
	bash $(TOP)/qemu/run-pair-demo.sh

check: modules
	bash $(TOP)/tests/run.sh

check-host:
	bash $(TOP)/tests/run.sh --host-only

check-vm: modules
	bash $(TOP)/tests/run.sh --vm-only

clean:
	-$(KMAKE) clean
	rm -rf $(TOP)/rust/proto/target

help:
	@sed -n '3,10p' $(TOP)/Makefile
