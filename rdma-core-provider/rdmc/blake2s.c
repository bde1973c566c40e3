// SPDX-License-Identifier: GPL-2.0 OR Linux-OpenIB
/* BLAKE2s-256, unkeyed, one shot (RFC 7693, sections 2 and 3). */
#include <string.h>
#include "blake2s.h"

/* The initialisation vector: SHA-256's (RFC 7693, 2.6). */
static const uint32_t IV[8] = {
	0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a,
	0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19,
};

/* The message word schedule of each of the 10 rounds (2.7). */
static const uint8_t SIGMA[10][16] = {
	{ 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15 },
	{ 14, 10, 4, 8, 9, 15, 13, 6, 1, 12, 0, 2, 11, 7, 5, 3 },
	{ 11, 8, 12, 0, 5, 2, 15, 13, 10, 14, 3, 6, 7, 1, 9, 4 },
	{ 7, 9, 3, 1, 13, 12, 11, 14, 2, 6, 5, 10, 4, 0, 15, 8 },
	{ 9, 0, 5, 7, 2, 4, 10, 15, 14, 1, 11, 12, 6, 8, 3, 13 },
	{ 2, 12, 6, 10, 0, 11, 8, 3, 4, 13, 7, 5, 15, 14, 1, 9 },
	{ 12, 5, 1, 15, 14, 13, 4, 10, 0, 7, 6, 3, 9, 2, 8, 11 },
	{ 13, 11, 7, 14, 12, 1, 3, 9, 5, 0, 15, 4, 8, 6, 2, 10 },
	{ 6, 15, 14, 9, 11, 3, 0, 8, 12, 2, 13, 7, 1, 4, 10, 5 },
	{ 10, 2, 8, 4, 7, 6, 1, 5, 15, 11, 9, 14, 3, 12, 13, 0 },
};

static uint32_t rotr(uint32_t x, unsigned int n)
{
	return x >> n | x << (32 - n);
}

static uint32_t load_le32(const uint8_t *p)
{
	return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

/* The mixing function G (3.1), BLAKE2s's rotations 16, 12, 8, 7. */
static void mix(uint32_t *v, int a, int b, int c, int d, uint32_t x, uint32_t y)
{
	v[a] += v[b] + x;
	v[d] = rotr(v[d] ^ v[a], 16);
	v[c] += v[d];
	v[b] = rotr(v[b] ^ v[c], 12);
	v[a] += v[b] + y;
	v[d] = rotr(v[d] ^ v[a], 8);
	v[c] += v[d];
	v[b] = rotr(v[b] ^ v[c], 7);
}

/* The compression function F (3.2) over one 64-byte block; @t the bytes so far. */
static void compress(uint32_t h[8], const uint8_t block[64], uint64_t t, int last)
{
	uint32_t v[16], m[16];

	for (int i = 0; i < 16; i++)
		m[i] = load_le32(block + 4 * i);
	memcpy(v, h, 8 * sizeof(*v));
	memcpy(v + 8, IV, sizeof(IV));
	v[12] ^= (uint32_t)t;
	v[13] ^= (uint32_t)(t >> 32);
	if (last)
		v[14] = ~v[14];
	for (int r = 0; r < 10; r++) {
		const uint8_t *s = SIGMA[r];

		mix(v, 0, 4, 8, 12, m[s[0]], m[s[1]]);
		mix(v, 1, 5, 9, 13, m[s[2]], m[s[3]]);
		mix(v, 2, 6, 10, 14, m[s[4]], m[s[5]]);
		mix(v, 3, 7, 11, 15, m[s[6]], m[s[7]]);
		mix(v, 0, 5, 10, 15, m[s[8]], m[s[9]]);
		mix(v, 1, 6, 11, 12, m[s[10]], m[s[11]]);
		mix(v, 2, 7, 8, 13, m[s[12]], m[s[13]]);
		mix(v, 3, 4, 9, 14, m[s[14]], m[s[15]]);
	}
	for (int i = 0; i < 8; i++)
		h[i] ^= v[i] ^ v[i + 8];
}

void blake2s256(const void *data, size_t len, uint8_t out[BLAKE2S_OUT])
{
	const uint8_t *p = data;
	uint8_t last[64] = { 0 };
	uint32_t h[8];

	memcpy(h, IV, sizeof(IV));
	/* Parameter block: digest length 32, no key, fanout 1, depth 1. */
	h[0] ^= 0x01010000 ^ BLAKE2S_OUT;
	/* Every block but the last (which may be full: it is flagged). */
	while (len > 64) {
		compress(h, p, (uint64_t)(p - (const uint8_t *)data) + 64, 0);
		p += 64;
		len -= 64;
	}
	memcpy(last, p, len);
	compress(h, last, (uint64_t)(p - (const uint8_t *)data) + len, 1);
	for (int i = 0; i < 8; i++)
		for (int j = 0; j < 4; j++)
			out[4 * i + j] = (uint8_t)(h[i] >> 8 * j);
}
