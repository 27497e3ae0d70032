/* xoshiro256** (Blackman & Vigna), seeded through splitmix64. Deterministic everywhere. */
#include "tiergnn/util.h"

#include <math.h>

static uint64_t splitmix64(uint64_t *x)
{
    uint64_t z = (*x += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

void tg_rng_seed(tg_rng_t *r, uint64_t seed)
{
    uint64_t x = seed;
    for (int i = 0; i < 4; i++)
        r->s[i] = splitmix64(&x);
}

void tg_rng_seed2(tg_rng_t *r, uint64_t seed, uint64_t stream)
{
    uint64_t x = seed ^ 0x5851f42d4c957f2dULL;
    uint64_t a = splitmix64(&x);
    uint64_t y = stream * 0xd1342543de82ef95ULL + a;
    tg_rng_seed(r, splitmix64(&y) ^ seed);
}

static inline uint64_t rotl(uint64_t x, int k)
{
    return (x << k) | (x >> (64 - k));
}

uint64_t tg_rng_u64(tg_rng_t *r)
{
    uint64_t *s = r->s;
    uint64_t result = rotl(s[1] * 5, 7) * 9;
    uint64_t t = s[1] << 17;
    s[2] ^= s[0];
    s[3] ^= s[1];
    s[1] ^= s[2];
    s[0] ^= s[3];
    s[2] ^= t;
    s[3] = rotl(s[3], 45);
    return result;
}

uint64_t tg_rng_below(tg_rng_t *r, uint64_t n)
{
    /* Lemire's nearly divisionless method with rejection: unbiased. */
    __uint128_t m = (__uint128_t)tg_rng_u64(r) * n;
    uint64_t l = (uint64_t)m;
    if (l < n) {
        uint64_t t = -n % n;
        while (l < t) {
            m = (__uint128_t)tg_rng_u64(r) * n;
            l = (uint64_t)m;
        }
    }
    return (uint64_t)(m >> 64);
}

double tg_rng_uniform(tg_rng_t *r)
{
    return (double)(tg_rng_u64(r) >> 11) * 0x1.0p-53;
}

float tg_rng_uniformf(tg_rng_t *r)
{
    return (float)(tg_rng_u64(r) >> 40) * 0x1.0p-24f;
}

double tg_rng_normal(tg_rng_t *r)
{
    double u1 = tg_rng_uniform(r), u2 = tg_rng_uniform(r);
    if (u1 < 1e-300) u1 = 1e-300;
    return sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2);
}

void tg_rng_shuffle_u64(tg_rng_t *r, uint64_t *a, size_t n)
{
    for (size_t i = n; i > 1; i--) {
        size_t j = (size_t)tg_rng_below(r, i);
        uint64_t t = a[i - 1];
        a[i - 1] = a[j];
        a[j] = t;
    }
}

void tg_rng_shuffle_u32(tg_rng_t *r, uint32_t *a, size_t n)
{
    for (size_t i = n; i > 1; i--) {
        size_t j = (size_t)tg_rng_below(r, i);
        uint32_t t = a[i - 1];
        a[i - 1] = a[j];
        a[j] = t;
    }
}
