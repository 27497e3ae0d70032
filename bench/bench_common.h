/* bench/bench_common.h - what the bench programs of the strategy issues share: fatal errors, a
 * checked malloc, and the synthetic trace shaped like an epoch's sampled inputs. Header-only
 * (each bench/ program is one file); define BENCH_NAME ("bench_x", the prefix of messages) before
 * including it. */
#ifndef TG_BENCH_COMMON_H
#define TG_BENCH_COMMON_H

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "tiergnn/util.h"

#ifndef BENCH_NAME
#error "define BENCH_NAME before including bench_common.h"
#endif

_Noreturn static inline void die(const char *what)
{
    fprintf(stderr, BENCH_NAME ": %s\n", what);
    exit(1);
}

static inline void *xmalloc(size_t n)
{
    void *p = malloc(n ? n : 1);
    if (!p) die("out of memory");
    return p;
}

/* B batches of `distinct` distinct node ids each out of N, drawn with a power law over node
 * ranks (P(rank <= r) ~ r^(1 - alpha), as sampling favours high-degree nodes), the ranks
 * scattered over the ids by a permutation drawn from seed. off (B + 1), ids (B x distinct);
 * distinct <= N. */
static inline void power_law_trace(uint32_t N, uint32_t distinct, double alpha, uint32_t B,
                                   uint64_t seed, uint64_t *off, uint32_t *ids)
{
    tg_rng_t r;
    tg_rng_seed(&r, seed);
    uint32_t *perm = xmalloc((size_t)N * sizeof *perm), *stamp = calloc(N, sizeof *stamp);
    if (!stamp) die("out of memory");
    for (uint32_t v = 0; v < N; v++)
        perm[v] = v;
    tg_rng_shuffle_u32(&r, perm, N);
    double e = 1 - alpha, top = pow((double)N, e) - 1;
    off[0] = 0;
    for (uint32_t b = 0; b < B; b++) {
        uint64_t o = off[b];
        for (uint32_t k = 0; k < distinct;) {
            double rank = pow(top * tg_rng_uniform(&r) + 1, 1 / e) - 1;
            uint32_t v = perm[TG_MIN((uint32_t)rank, N - 1)];
            if (stamp[v] == b + 1) continue;
            stamp[v] = b + 1;
            ids[o + k++] = v;
        }
        off[b + 1] = o + distinct;
    }
    free(perm);
    free(stamp);
}

#endif
