/* SPDX-License-Identifier: GPL-2.0 OR Linux-OpenIB */
/*
 * BLAKE2s-256 (RFC 7693), unkeyed: the digest RDMC's root sends with each
 * object so that a member takes an object only if every byte is the
 * root's (Documentation/xud.rst, "RDMC over XUD"). A cryptographic hash,
 * because the one who might alter a copy is a member that knows the
 * object; BLAKE2s because it is short to write and fast in plain C.
 */
#ifndef RDMC_BLAKE2S_H
#define RDMC_BLAKE2S_H

#include <stddef.h>
#include <stdint.h>

#define BLAKE2S_OUT 32

void blake2s256(const void *data, size_t len, uint8_t out[BLAKE2S_OUT]);

#endif
