/* strategies/hier.h - the figures a hier training pass reports (its own block of
 * tg_pass_stats_t), for tests that check them; the engine reads them only through the
 * strategy's report hook, which writes them as the epoch line's object "megabatch" and the human
 * line's "mega-batches" clause. */
#ifndef TG_STRATEGIES_HIER_H
#define TG_STRATEGIES_HIER_H

#include "../engine-impl.h"

typedef struct tg_hier_figures {
    uint64_t megabatches;   /* mega-batches loaded and trained */
    uint64_t dynamic_parts; /* parts per mega-batch (N_d) */
    uint64_t static_nodes;  /* the static cache's nodes */
    uint64_t nodes;         /* the mega-batches' dynamic nodes (T), summed */
    double load_s;          /* the loading's wall time (on its own thread) */
    double load_wait_s;     /* the trainer waiting for a mega-batch */
    /* over the dynamic nodes: their in-degrees in the full graph, inside their mega-batch, and
     * from the static cache (what the static cache gives back), summed */
    uint64_t deg_full, deg_induced, deg_static;
} tg_hier_figures_t;

/* The figures of a hier training pass st (or of a sum of them, tg_pass_stats_add): 0, or
 * -ENOENT (no message) when st holds none (an evaluation pass). */
int tg_hier_figures(const tg_pass_stats_t *st, tg_hier_figures_t *f);

#endif
