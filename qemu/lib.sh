# Shared settings for the qemu/ scripts. Source it; do not run it.
# shellcheck shell=bash

RXUD_TOP=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
RXUD_CACHE=${RXUD_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/rxud}
RXUD_VENV=$RXUD_CACHE/venv

# The one toolchain pair that builds a Rust-enabled 6.12 kernel here:
# Debian's rustc-web with its library sources (rust-web-src), and a bindgen
# new enough for 6.12 from crates.io. See Documentation/design.rst.
KRUSTC=/usr/bin/rustc
KRUSTDOC=/usr/bin/rustdoc
KBINDGEN=${KBINDGEN:-$HOME/.cargo/bin/bindgen}
KERNEL_TARBALL=/usr/src/linux-source-6.12.tar.xz
KMAKE_FLAGS=(LLVM=1 "RUSTC=$KRUSTC" "RUSTDOC=$KRUSTDOC" "BINDGEN=$KBINDGEN")

log() { printf '[rxud] %s\n' "$*" >&2; }
die() { printf '[rxud] error: %s\n' "$*" >&2; exit 1; }

# Cache key: everything that changes what the kernel build produces.
kernel_key() {
	{
		dpkg-query -W -f='${Version}\n' linux-source-6.12 2>/dev/null || echo none
		cat "$RXUD_TOP/qemu/rxud.config"
		"$KRUSTC" --version 2>/dev/null || echo no-rustc
		"$KBINDGEN" --version 2>/dev/null || echo no-bindgen
		clang --version 2>/dev/null | head -n1
		echo "recipe 1"
	} | sha256sum | cut -c1-12
}

kernel_dir() { echo "$RXUD_CACHE/linux-6.12-$(kernel_key)"; }

# The built kernel tree, or die with the command that makes it.
need_kernel() {
	KDIR=${KDIR:-$(kernel_dir)}
	[ -f "$KDIR/.rxud-built" ] || die "no built kernel at $KDIR: run 'make setup' first"
}

need_vng() {
	export PATH="$RXUD_VENV/bin:$PATH"
	command -v vng >/dev/null || die "virtme-ng missing: run 'make setup' first"
}
