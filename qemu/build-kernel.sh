#!/usr/bin/env bash
# Builds an rxud kernel from Debian's linux-source-6.12 with the config
# fragments of its flavour (RXUD_FLAVOUR, see qemu/lib.sh: "test", the
# default, is qemu/rxud.config; "bench" adds qemu/rxud-bench.config), in a
# cache directory outside the repository keyed by the kernel version, the
# fragments and the toolchain. A tree that is already built is reused as is.
set -euo pipefail
. "$(dirname "$0")/lib.sh"

KDIR=$(kernel_dir)
JOBS=${JOBS:-$(($(nproc) + 1))}

if [ -f "$KDIR/.rxud-built" ]; then
	log "kernel ($RXUD_FLAVOUR): cached at $KDIR"
	exit 0
fi

[ -f "$KERNEL_TARBALL" ] || die "$KERNEL_TARBALL missing (apt-get install linux-source-6.12)"
[ -x "$KRUSTC" ] || die "$KRUSTC missing (apt-get install rustc-web rust-web-src)"

mkdir -p "$RXUD_CACHE"
# Trees of other keys that never finished building are only disk space.
# Only this flavour's (its tag, then a 12-digit key): another flavour's may be
# building right now.
for d in "$RXUD_CACHE"/linux-6.12-"$(kernel_tag)"????????????; do
	[ -d "$d" ] && [ "$d" != "$KDIR" ] && [ ! -f "$d/.rxud-built" ] && rm -rf "$d"
done
start=$(date +%s)
if [ ! -f "$KDIR/Makefile" ]; then
	log "kernel: extracting $KERNEL_TARBALL"
	tmp=$(mktemp -d "$RXUD_CACHE/extract.XXXXXX")
	tar -C "$tmp" -xf "$KERNEL_TARBALL"
	rm -rf "$KDIR"
	mv "$tmp"/linux-source-6.12 "$KDIR"
	rmdir "$tmp"
fi

kmake() { make -C "$KDIR" "${KMAKE_FLAGS[@]}" "$@"; }

log "kernel: configuring"
kmake -s x86_64_defconfig
kmake -s kvm_guest.config
mapfile -t fragments < <(kernel_fragments)
"$KDIR/scripts/kconfig/merge_config.sh" -m -O "$KDIR" "$KDIR/.config" "${fragments[@]}" >/dev/null
kmake -s olddefconfig
kmake -s rustavailable >/dev/null || die "Rust toolchain not usable for the kernel (see make rustavailable)"

# olddefconfig silently drops options whose dependencies are missing: check
# that every request in the fragments survived. Where fragments set the same
# option, the last one's request is the one to check.
bad=0
while IFS= read -r line; do
	case "$line" in
	CONFIG_*=*)
		grep -qx "$line" "$KDIR/.config" || { log "config: wanted $line, got: $(grep "^${line%%=*}=" "$KDIR/.config" || echo unset)"; bad=1; } ;;
	"# CONFIG_"*" is not set")
		opt=${line#\# }; opt=${opt%% *}
		if grep -q "^$opt=" "$KDIR/.config"; then log "config: wanted $opt off, got $(grep "^$opt=" "$KDIR/.config")"; bad=1; fi ;;
	esac
done < <(awk '
	/^CONFIG_[A-Za-z0-9_]+=/ { o = $0; sub(/=.*/, "", o) }
	/^# CONFIG_[A-Za-z0-9_]+ is not set$/ { o = $2 }
	o != "" { if (!(o in want)) order[++n] = o; want[o] = $0; o = "" }
	END { for (i = 1; i <= n; i++) print want[order[i]] }' "${fragments[@]}")
[ $bad -eq 0 ] || die "config fragment not honoured"

log "kernel ($RXUD_FLAVOUR): building bzImage and modules with -j$JOBS (log: $KDIR/build.log)"
# Show progress without flooding the terminal: one line every 100 objects.
set +e
kmake -j"$JOBS" bzImage modules 2>&1 | tee "$KDIR/build.log" |
	awk '/^  (CC|RUSTC|AR|LD|AS)/ { n++; if (n % 100 == 0) { printf "[rxud] kernel: %d objects built\n", n; fflush() } }'
rc=${PIPESTATUS[0]}
set -e
if [ "$rc" -ne 0 ]; then
	grep -E 'error|Error' "$KDIR/build.log" | tail -n 30 >&2
	die "kernel build failed (full log: $KDIR/build.log)"
fi
touch "$KDIR/.rxud-built"
log "kernel ($RXUD_FLAVOUR): built in $(( $(date +%s) - start )) s at $KDIR"
