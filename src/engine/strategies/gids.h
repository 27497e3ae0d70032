/* strategies/gids.h - the figures a gids pass reports (its own block of tg_pass_stats_t), for
 * tests that check them; the engine reads them only through the strategy's report hook, which
 * writes them as the epoch line's object "gids". */
#ifndef TG_STRATEGIES_GIDS_H
#define TG_STRATEGIES_GIDS_H

#include "../engine-impl.h"

typedef struct tg_gids_figures {
    uint32_t window;                 /* batches announced ahead */
    double merged;                   /* batches per extractor sweep, mean over the pass */
    uint64_t constant_rows;          /* the constant buffer's rows */
    double target_depth, plan_depth; /* N_access (all extractors), the plan's per extractor */
    /* reads in flight of all feature-read queues together while any of them reads, one queue's
     * while it reads, over the extractors' gathering time, and over the whole pass */
    double mean_depth, queue_depth, gather_depth, inflight;
    /* batches announced to the feature buffer, left unannounced (its trace was full), not
     * sampled ahead (the budget had no room) */
    uint64_t announced, unannounced, window_short;
    uint64_t buffer_lookups, buffer_hits, buffer_slots; /* the feature buffer's */
} tg_gids_figures_t;

/* The figures of a gids pass st (or of a sum of them, tg_pass_stats_add): 0, or -ENOENT
 * (no message) when st holds none. */
int tg_gids_figures(const tg_pass_stats_t *st, tg_gids_figures_t *f);

#endif
