/* strategies/ginex.h - the figures a ginex pass reports (its own block of tg_pass_stats_t), for
 * tests that check them; the engine reads them only through the strategy's report hook, which
 * writes them as the epoch line's keys changeset_s, cache_init_s, cache_update_s, cache_misses,
 * predicted_misses, prefetch_rows and superbatches. */
#ifndef TG_STRATEGIES_GINEX_H
#define TG_STRATEGIES_GINEX_H

#include "../engine-impl.h"

typedef struct tg_ginex_figures {
    uint64_t passes;           /* passes summed */
    uint64_t superbatch;       /* batches planned together (S) */
    uint64_t cache_rows;       /* the feature cache's rows */
    double changeset_s;        /* planning: the changesets' computation, on the inspector */
    double init_s, update_s;   /* the cache moved to each plan's initial state; per-batch updates */
    uint64_t misses;           /* rows the cache missed (cache_lookups - cache_hits) */
    uint64_t predicted_misses; /* the plans' misses: equal to misses when the cache followed them */
    uint64_t prefetch_rows;    /* rows read at the superbatches' starts */
    uint64_t superbatches;     /* superbatches trained */
} tg_ginex_figures_t;

/* The figures of a ginex pass st (or of a sum of them, tg_pass_stats_add): 0, or -ENOENT
 * (no message) when st holds none. */
int tg_ginex_figures(const tg_pass_stats_t *st, tg_ginex_figures_t *f);

#endif
