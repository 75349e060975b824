/* SPDX-License-Identifier: MIT */
/* SHA-256 (FIPS 180-4), small and dependency-free: digests of code, sources and policy. */
#pragma once

#include <stddef.h>
#include <stdint.h>

typedef struct Sha256 {
        uint32_t h[8];
        uint64_t length; /* bytes hashed so far */
        uint8_t buf[64];
        size_t n; /* bytes in buf */
} Sha256;

void sha256_init(Sha256 *s);
void sha256_update(Sha256 *s, const void *data, size_t len);
void sha256_final(Sha256 *s, uint8_t out[32]);
/* One-shot: writes 64 lowercase hex digits and a NUL into hex. */
void sha256_hex(const void *data, size_t len, char hex[65]);
void sha256_to_hex(const uint8_t digest[32], char hex[65]);
