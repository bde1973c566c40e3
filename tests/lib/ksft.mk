# SPDX-License-Identifier: GPL-2.0
# rxud's test directories as kselftest targets, over the kernel's own
# lib.mk and runner (tools/testing/selftests of the booted kernel's tree).
# A directory's Makefile sets TEST_PROGS (and COLLECTION, the name its
# results go under: "selftests: COLLECTION: TEST") and includes this:
#
#   make -C tests/guest run_tests            every test of the directory
#   make -C tests/guest run_tests TEST_PROGS=06-kernel-verbs.sh
#   kselftest_override_timeout=600 make -C tests/guest run_tests
#
# in a guest booted on the test kernel (qemu/vm.sh: it exports RXUD_KDIR;
# tests/guest-runner.sh runs this for make check), as root, with rxud.ko
# built (RXUD_KO names another build). Each directory's settings file has
# its per-test timeout and config the options its tests need.

KSFT_DIR ?= $(if $(RXUD_KDIR),$(RXUD_KDIR)/tools/testing/selftests,$(error \
	set KSFT_DIR to a kernel tree's tools/testing/selftests (or RXUD_KDIR to the tree)))
# The tests source ktap_helpers.sh from it (tests/lib/tap.sh).
export KSFT_DIR
COLLECTION ?= rxud
TEST_FILES := settings config

include $(KSFT_DIR)/lib.mk

# The kernel's runner names a test's collection by the directory it runs
# in, taken relative to BASE_DIR (the selftests directory it was sourced
# from), and reads that directory's settings from there. These tests live
# outside the tree: give the runner a BASE_DIR that holds it and this
# directory as the tree would (BASE_DIR/kselftest, BASE_DIR/COLLECTION),
# and run from there. The runner writes each test's output to its logfile,
# /dev/stdout: in virtme-ng's guests a link to the VM's console, not to
# the runner's own standard output (which tests/guest-runner.sh records),
# so the logfile is the runner's standard output itself.
define RUN_TESTS
	base=$$(mktemp -d) &&						\
	ln -s "$(selfdir)/kselftest" "$$base/kselftest" &&		\
	ln -s "$(CURDIR)" "$$base/$(COLLECTION)" &&			\
	cd "$$base/$(COLLECTION)" &&					\
	BASE_DIR=$$base &&						\
	. "$$base/kselftest/runner.sh" &&				\
	logfile=/proc/self/fd/1 &&					\
	run_many $(notdir $(1));					\
	rm -rf "$$base"
endef
