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

# Kernel flavours, each built and cached on its own: "test" (qemu/rxud.config,
# with lockdep, kmemleak and the other debugging that finds our bugs; built by
# `make setup`) and "bench" (qemu/rxud-bench.config on top, which turns that
# debugging off: it taxes locks and allocations, rxe's and rxud's unequally,
# and would skew the ratios of `make bench`, which builds it on first use) and
# "kasan" (qemu/rxud-kasan.config on top: KASAN and UBSAN, for `make soak`,
# which builds it on first use).
RXUD_FLAVOUR=${RXUD_FLAVOUR:-test}
case $RXUD_FLAVOUR in
test | bench | kasan) ;;
*) die "RXUD_FLAVOUR=$RXUD_FLAVOUR: not test, bench or kasan" ;;
esac

# The config fragments of the flavour, applied in this order.
kernel_fragments() {
	echo "$RXUD_TOP/qemu/rxud.config"
	[ "$RXUD_FLAVOUR" = test ] || echo "$RXUD_TOP/qemu/rxud-$RXUD_FLAVOUR.config"
}

# Cache key: everything that changes what the kernel build produces. The test
# flavour's key must not change with this script (a new key is a rebuild of
# 10 to 30 minutes for everyone): other flavours add their fragment after
# rxud.config, and the test flavour adds nothing.
kernel_key() {
	{
		dpkg-query -W -f='${Version}\n' linux-source-6.12 2>/dev/null || echo none
		# shellcheck disable=SC2046 # paths without blanks
		cat $(kernel_fragments)
		"$KRUSTC" --version 2>/dev/null || echo no-rustc
		"$KBINDGEN" --version 2>/dev/null || echo no-bindgen
		clang --version 2>/dev/null | head -n1
		echo "recipe 1"
	} | sha256sum | cut -c1-12
}

# The flavour's name in its tree's name: none for the test kernel (whose
# trees predate flavours), "bench-" for the bench kernel.
kernel_tag() { [ "$RXUD_FLAVOUR" = test ] || echo "$RXUD_FLAVOUR-"; }
kernel_dir() { echo "$RXUD_CACHE/linux-6.12-$(kernel_tag)$(kernel_key)"; }

# The built kernel tree, or die with the command that makes it.
need_kernel() {
	local how="run 'make setup' first"
	[ "$RXUD_FLAVOUR" = test ] || how="build it with RXUD_FLAVOUR=$RXUD_FLAVOUR qemu/build-kernel.sh"
	KDIR=${KDIR:-$(kernel_dir)}
	[ -f "$KDIR/.rxud-built" ] || die "no built kernel at $KDIR: $how"
}

need_vng() {
	export PATH="$RXUD_VENV/bin:$PATH"
	command -v vng >/dev/null || die "virtme-ng missing: run 'make setup' first"
}

# sources_rev REV|"" [EXCLUDE]: names the sources a copy_sources of the
# same REV takes: REV's short commit, or HEAD's for the working tree, with
# " with uncommitted changes" if the tree has any (EXCLUDE, a path, left
# out: the document the run itself rewrites).
sources_rev() {
	if [ -n "$1" ]; then
		git -C "$RXUD_TOP" rev-parse --short "$1"
		return
	fi
	local rev
	rev=$(git -C "$RXUD_TOP" rev-parse --short HEAD)
	[ -z "$(git -C "$RXUD_TOP" status --porcelain --untracked-files=normal -- . ${2:+":!$2"})" ] ||
		rev="$rev with uncommitted changes"
	echo "$rev"
}

# copy_sources DEST REV|"": makes DEST a copy of the working tree's sources
# (tracked and untracked, not ignored), or with REV of that commit's, for
# building against another kernel flavour than the test kernel (make bench,
# make soak). Into the copy go only the files whose contents differ (with a
# new time), and out of it the sources of the last copy that are gone: make
# there rebuilds exactly what changed, whichever sources the last run took.
copy_sources() {
	local src=$1 rev=$2 stage f
	stage=$(mktemp -d)
	if [ -n "$rev" ]; then
		git -C "$RXUD_TOP" archive "$rev" | tar -C "$stage" -xf -
	else
		(cd "$RXUD_TOP" && git ls-files -z -co --exclude-standard |
			tar --null --ignore-failed-read -T - -cf -) | tar -C "$stage" -xf -
	fi
	mkdir -p "$src"
	(cd "$stage" && find . -type f | sort) >"$stage.files"
	[ ! -f "$src/.bench-files" ] ||
		comm -23 "$src/.bench-files" "$stage.files" | while IFS= read -r f; do rm -f "$src/$f"; done
	while IFS= read -r f; do
		cmp -s "$stage/$f" "$src/$f" || { mkdir -p "$(dirname "$src/$f")" && cp "$stage/$f" "$src/$f"; }
	done <"$stage.files"
	mv "$stage.files" "$src/.bench-files"
	rm -rf "$stage"
}

# Kernel log lines that mean a kernel bug, whatever the tests said
# (tests/run.sh, qemu/soak.sh).
KERNEL_BUG_RE='Oops|BUG:|WARNING:|KASAN|UBSAN|kernel BUG|general protection|possible (circular|recursive) locking|inconsistent lock state|suspicious RCU usage|INFO: task .* blocked|unreferenced object|Call Trace'

# kernel_reports DMESG: the lines of DMESG that KERNEL_BUG_RE matches, but
# for known reports of upstream code that rxud's tests set off and rxud
# cannot change, each listed with its report, whole: nvmet's lockdep
# report of nvmet_config_sem against rdma_cm's handler_mutex, which
# removing an NVMe-oF RDMA port after a host connected sets off over any
# RDMA device, rxe too (long standing upstream: blktests' nvme tests
# report it, linux-nvme/nvme-cli#3113). A report is the lockdep block
# from its "WARNING: possible circular locking" line to the end of its
# stack ("</TASK>") or to the next report's first line. Lockdep is off
# for the rest of that boot.
kernel_reports() {
	awk '
	function flush(   i) {
		if (n && !(blk ~ /nvmet_config_sem/ && blk ~ /handler_mutex/))
			for (i = 1; i <= n; i++) print lines[i]
		n = 0; blk = ""; inblk = 0
	}
	/WARNING: possible circular locking dependency detected/ { flush(); inblk = 1 }
	# Another report starting ends the block: nothing else is taken in.
	inblk && !/possible circular locking/ && /Oops|BUG:|WARNING:|KASAN|UBSAN|kernel BUG|general protection|recursive locking|inconsistent lock state|suspicious RCU usage|INFO: task|unreferenced object/ { flush() }
	inblk { lines[++n] = $0; blk = blk "\n" $0; if (/<\/TASK>/) flush(); next }
	{ print }
	END { flush() }' "$1" | grep -E "$KERNEL_BUG_RE"
}

# kernel_checks KDIR: what the kernel built at KDIR can report beyond
# oopses, BUGs and WARNINGs, from its .config: "lockdep", "KASAN",
# "UBSAN", "kmemleak", as built in (a log without a KASAN report proves
# nothing on a kernel without KASAN).
kernel_checks() {
	local c=$1/.config out=()
	grep -q '^CONFIG_PROVE_LOCKING=y' "$c" 2>/dev/null && out+=(lockdep)
	grep -q '^CONFIG_KASAN=y' "$c" 2>/dev/null && out+=(KASAN)
	grep -q '^CONFIG_UBSAN=y' "$c" 2>/dev/null && out+=(UBSAN)
	grep -q '^CONFIG_DEBUG_KMEMLEAK=y' "$c" 2>/dev/null && out+=(kmemleak)
	echo "${out[*]}"
}
