/* test_trace_common.h - random access traces (tg_cs_trace_t) with a membership table, for the
 * tests of the planners over sampled batches (store/changeset, store/layout). */
#ifndef TG_TEST_TRACE_COMMON_H
#define TG_TEST_TRACE_COMMON_H

#include <stdint.h>
#include <stdlib.h>

#include "tiergnn/changeset.h"
#include "tiergnn/util.h"

typedef struct {
    uint32_t iters, N;
    uint64_t *off;
    uint32_t *ids;
    unsigned char *in; /* (iters, N) whether iteration (batch) i uses node v */
} trace_t;

static inline tg_cs_trace_t view(const trace_t *tr)
{
    return (tg_cs_trace_t){.iters = tr->iters, .off = tr->off, .ids = tr->ids};
}

static inline void trace_free(trace_t *tr)
{
    free(tr->off);
    free(tr->ids);
    free(tr->in);
}

/* iters iterations of 0..max_len distinct ids out of N; one in empty_one_in of them empty (0:
 * none forced empty); with skew, most ids come from the first N/8 nodes (a hot set, as sampling
 * gives). */
static inline trace_t trace_random(tg_rng_t *r, uint32_t N, uint32_t iters, uint32_t max_len,
                                   uint32_t empty_one_in, int skew)
{
    trace_t tr = {.iters = iters, .N = N};
    tr.off = calloc(iters + 1, sizeof *tr.off);
    tr.ids = malloc(((size_t)iters * max_len + 1) * sizeof *tr.ids);
    tr.in = calloc((size_t)iters * N + 1, 1);
    for (uint32_t i = 0; i < iters; i++) {
        uint32_t len = (uint32_t)tg_rng_below(r, (uint64_t)TG_MIN(max_len, N) + 1);
        if (empty_one_in && tg_rng_below(r, empty_one_in) == 0) len = 0;
        uint64_t o = tr.off[i];
        for (uint32_t k = 0; k < len;) {
            uint32_t hot = TG_MAX(N / 8, 1);
            uint32_t v =
                (uint32_t)(skew && tg_rng_below(r, 4) ? tg_rng_below(r, hot) : tg_rng_below(r, N));
            if (tr.in[(size_t)i * N + v]) continue; /* a full hot set: the uniform draws end it */
            tr.in[(size_t)i * N + v] = 1;
            tr.ids[o + k++] = v;
        }
        tr.off[i + 1] = o + len;
    }
    return tr;
}

#endif
