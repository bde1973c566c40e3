#!/bin/bash
# SPDX-License-Identifier: GPL-2.0 OR Linux-OpenIB
#
# Checks src/sys.rs against an rdma-core source tree (rdma-core 44.0 for
# Debian 12): compiles tools/layout.c with the tree's own provider headers
# (driver.h, kern-abi.h, which Debian does not install) and requires every
# size, alignment and offset it prints to appear as an assertion in sys.rs,
# and every constant as a declaration there.
#
#   git clone --depth 1 -b v44.0 https://github.com/linux-rdma/rdma-core
#   tools/check-layout.sh rdma-core
set -euo pipefail

src=$(realpath "${1:?usage: $0 RDMA_CORE_SOURCE_DIR}")
here=$(dirname "$(realpath "$0")")
sys=$here/../src/sys.rs
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# The include tree rdma-core's cmake would build: infiniband/ from
# libibverbs/, generated kernel-abi/ wrappers, a minimal config.h.
mkdir -p "$tmp/include/infiniband" "$tmp/include/kernel-abi"
ln -s "$src"/libibverbs/*.h "$tmp/include/infiniband/"
ln -s "$src/kernel-headers/rdma" "$tmp/include/rdma"
ln -s "$src/ccan" "$tmp/include/ccan"
ln -s "$src/util" "$tmp/include/util"
(cd "$src/kernel-headers" &&
	python3 ../buildlib/make_abi_structs.py rdma/ib_user_verbs.h "$tmp/include/kernel-abi/ib_user_verbs.h")
cat > "$tmp/include/config.h" <<'CONFIG'
#define HAVE_STATEMENT_EXPR 1
#define HAVE_BUILTIN_TYPES_COMPATIBLE_P 1
#define HAVE_TYPEOF 1
#define HAVE_FUNC_ATTRIBUTE_ALWAYS_INLINE 1
#define SIZEOF_LONG 8
#define VERBS_IOCTL_ONLY 0
#define VERBS_WRITE_ONLY 0
CONFIG

${CC:-cc} -Wall -Werror -I"$tmp/include" -I"$src/kernel-headers" -o "$tmp/layout" "$here/layout.c"
"$tmp/layout" > "$tmp/facts"

missing=0
while IFS= read -r fact; do
	if ! grep -qF -- "$fact" "$sys"; then
		echo "sys.rs does not assert: $fact"
		missing=$((missing + 1))
	fi
done < "$tmp/facts"
echo "$(wc -l < "$tmp/facts") layout facts from $src, $missing not asserted in sys.rs"
[ "$missing" -eq 0 ]
