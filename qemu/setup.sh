#!/usr/bin/env bash
# Installs everything rxud needs on a Debian 12 machine and builds the test
# kernel. Idempotent: a second run checks and returns in seconds.
set -euo pipefail
. "$(dirname "$0")/lib.sh"

APT_PACKAGES=(
	# Kernel toolchain: Debian's rustc-web + rust-web-src are a matching
	# compiler/library-source pair; clang/lld/llvm for LLVM=1.
	rustc-web rust-web-src clang lld llvm libclang-dev
	# Lint and format gates (make check): the same version as rustc-web.
	rust-web-clippy rustfmt-web
	bc flex bison libelf-dev libssl-dev cpio kmod dwarves make gcc xz-utils
	linux-source-6.12
	# VMs.
	qemu-system-x86 python3-venv busybox-static
	# RDMA userspace, the reference tools and traffic generators.
	rdma-core ibverbs-utils ibverbs-providers libibverbs-dev librdmacm-dev
	perftest rdmacm-utils iperf3 iproute2 iputils-ping ethtool
	# rdma-core's own conformance suite (tests/guest/23-pyverbs.sh).
	python3-pyverbs
	# Kernel RDMA consumers in the VMs: NVMe over Fabrics (nvme-cli; fio
	# drives and verifies the IO) and NFS over RDMA (nfsd's tools, mount.nfs).
	nvme-cli fio nfs-kernel-server nfs-common
	# Tests.
	jq procps  # procps: pkill in the teardown test
	strace     # make bench: system calls per work request
)

install_apt() {
	local missing=()
	for p in "${APT_PACKAGES[@]}"; do
		dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' ||
			missing+=("$p")
	done
	if [ ${#missing[@]} -eq 0 ]; then
		log "apt packages: all present"
		return
	fi
	log "apt packages: installing ${missing[*]}"
	export DEBIAN_FRONTEND=noninteractive
	apt-get update -q
	# The packages are for the VMs (which share this root): no service of
	# theirs (nfsd, rpcbind, nvmf autoconnect) is to start on this machine.
	# policy-rc.d tells invoke-rc.d and deb-systemd-invoke not to.
	local policy=/usr/sbin/policy-rc.d ours=0
	if [ ! -e $policy ]; then
		printf '#!/bin/sh\nexit 101\n' >$policy && chmod 755 $policy && ours=1
	fi
	apt-get install -y -q --no-install-recommends "${missing[@]}" || { [ $ours = 0 ] || rm -f $policy; return 1; }
	[ $ours = 0 ] || rm -f $policy
}

install_bindgen() {
	local want=0.65.1 have
	have=$("$KBINDGEN" --version 2>/dev/null | awk '{print $2}') || true
	if [ -n "$have" ] && [ "$(printf '%s\n%s\n' "$want" "$have" | sort -V | head -n1)" = "$want" ]; then
		log "bindgen $have: present"
		return
	fi
	command -v cargo >/dev/null || die "cargo not found (rustup toolchain expected in ~/.cargo/bin)"
	log "bindgen: cargo install bindgen-cli (about 2 minutes)"
	cargo install --locked bindgen-cli
}

install_vng() {
	if [ -x "$RXUD_VENV/bin/vng" ]; then
		log "virtme-ng: present"
		return
	fi
	log "virtme-ng: installing into $RXUD_VENV"
	mkdir -p "$RXUD_CACHE"
	/usr/bin/python3 -m venv "$RXUD_VENV"
	"$RXUD_VENV/bin/pip" install -q --upgrade pip
	"$RXUD_VENV/bin/pip" install -q 'virtme-ng==1.42'
}

# Each stage is timed so that cold and warm setup times can be read off a
# run (Documentation/measurements.rst).
timings=()
stage() {
	local t0=$SECONDS
	"$@"
	timings+=("$1 $((SECONDS - t0))s")
}
stage install_apt
stage install_bindgen
stage install_vng
stage "$RXUD_TOP/qemu/build-kernel.sh"
log "setup complete in ${SECONDS}s (${timings[*]##*/}); kernel at $(kernel_dir)"
