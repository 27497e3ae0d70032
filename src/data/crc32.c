/* CRC-32 (zlib polynomial) with a PCLMULQDQ folding kernel on x86-64; see crc-impl.h. */
#include "crc-impl.h"

#include "tiergnn/util.h"

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define TG_CRC_CLMUL 1
#include <immintrin.h>
#include <stdatomic.h>

/* Folds len bytes (len >= 64, a multiple of 16) into the CRC register crc (not inverted: the
 * caller handles zlib's pre- and post-inversion). Constants: x^(4*128+32), x^(4*128-32),
 * x^(128+32), x^(128-32), x^64 mod P, and the Barrett pair for P = 0x104C11DB7, bit-reflected,
 * as in the paper's appendix. */
__attribute__((target("pclmul,sse4.1"))) static uint32_t fold(const unsigned char *buf, size_t len,
                                                              uint32_t crc)
{
    static const uint64_t __attribute__((aligned(16))) k1k2[] = {0x0154442bd4, 0x01c6e41596};
    static const uint64_t __attribute__((aligned(16))) k3k4[] = {0x01751997d0, 0x00ccaa009e};
    static const uint64_t __attribute__((aligned(16))) k5k0[] = {0x0163cd6124, 0x0000000000};
    static const uint64_t __attribute__((aligned(16))) poly[] = {0x01db710641, 0x01f7011641};
    __m128i x0, x1, x2, x3, x4, x5, x6, x7, x8;
    x1 = _mm_loadu_si128((const __m128i *)(buf + 0x00));
    x2 = _mm_loadu_si128((const __m128i *)(buf + 0x10));
    x3 = _mm_loadu_si128((const __m128i *)(buf + 0x20));
    x4 = _mm_loadu_si128((const __m128i *)(buf + 0x30));
    x1 = _mm_xor_si128(x1, _mm_cvtsi32_si128((int)crc));
    x0 = _mm_load_si128((const __m128i *)k1k2);
    buf += 64;
    len -= 64;
    /* four independent 128-bit lanes, each folded 512 bits forward per step */
    while (len >= 64) {
        x5 = _mm_clmulepi64_si128(x1, x0, 0x00);
        x6 = _mm_clmulepi64_si128(x2, x0, 0x00);
        x7 = _mm_clmulepi64_si128(x3, x0, 0x00);
        x8 = _mm_clmulepi64_si128(x4, x0, 0x00);
        x1 = _mm_clmulepi64_si128(x1, x0, 0x11);
        x2 = _mm_clmulepi64_si128(x2, x0, 0x11);
        x3 = _mm_clmulepi64_si128(x3, x0, 0x11);
        x4 = _mm_clmulepi64_si128(x4, x0, 0x11);
        x1 = _mm_xor_si128(_mm_xor_si128(x1, x5), _mm_loadu_si128((const __m128i *)(buf + 0x00)));
        x2 = _mm_xor_si128(_mm_xor_si128(x2, x6), _mm_loadu_si128((const __m128i *)(buf + 0x10)));
        x3 = _mm_xor_si128(_mm_xor_si128(x3, x7), _mm_loadu_si128((const __m128i *)(buf + 0x20)));
        x4 = _mm_xor_si128(_mm_xor_si128(x4, x8), _mm_loadu_si128((const __m128i *)(buf + 0x30)));
        buf += 64;
        len -= 64;
    }
    /* the four lanes into one */
    x0 = _mm_load_si128((const __m128i *)k3k4);
    __m128i lanes[3] = {x2, x3, x4};
    for (int i = 0; i < 3; i++) {
        x5 = _mm_clmulepi64_si128(x1, x0, 0x00);
        x1 = _mm_clmulepi64_si128(x1, x0, 0x11);
        x1 = _mm_xor_si128(_mm_xor_si128(x1, lanes[i]), x5);
    }
    while (len >= 16) {
        x5 = _mm_clmulepi64_si128(x1, x0, 0x00);
        x1 = _mm_clmulepi64_si128(x1, x0, 0x11);
        x1 = _mm_xor_si128(_mm_xor_si128(x1, _mm_loadu_si128((const __m128i *)buf)), x5);
        buf += 16;
        len -= 16;
    }
    /* 128 -> 64 bits */
    x2 = _mm_clmulepi64_si128(x1, x0, 0x10);
    x3 = _mm_setr_epi32(~0, 0, ~0, 0);
    x1 = _mm_xor_si128(_mm_srli_si128(x1, 8), x2);
    x0 = _mm_loadl_epi64((const __m128i *)k5k0);
    x2 = _mm_srli_si128(x1, 4);
    x1 = _mm_and_si128(x1, x3);
    x1 = _mm_xor_si128(_mm_clmulepi64_si128(x1, x0, 0x00), x2);
    /* Barrett reduction to 32 bits */
    x0 = _mm_load_si128((const __m128i *)poly);
    x2 = _mm_and_si128(x1, x3);
    x2 = _mm_clmulepi64_si128(x2, x0, 0x10);
    x2 = _mm_and_si128(x2, x3);
    x2 = _mm_clmulepi64_si128(x2, x0, 0x00);
    x1 = _mm_xor_si128(x1, x2);
    return (uint32_t)_mm_extract_epi32(x1, 1);
}

static int have_clmul(void)
{
    static atomic_int cached = -1; /* every thread computes the same answer */
    int c = atomic_load_explicit(&cached, memory_order_relaxed);
    if (c < 0) {
        c = __builtin_cpu_supports("pclmul") && __builtin_cpu_supports("sse4.1");
        atomic_store_explicit(&cached, c, memory_order_relaxed);
    }
    return c;
}
#endif

uint32_t tg_data_crc32(uint32_t crc, const void *buf, size_t len)
{
    const unsigned char *p = buf;
#ifdef TG_CRC_CLMUL
    if (len >= 64 && have_clmul()) {
        size_t n = len & ~(size_t)15;
        crc = ~fold(p, n, ~crc);
        p += n;
        len -= n;
    }
#endif
    return len ? tg_crc32(crc, p, len) : crc;
}
