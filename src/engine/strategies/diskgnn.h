/* strategies/diskgnn.h - the figures a diskgnn pass reports (its own block of tg_pass_stats_t),
 * for tests that check them; the engine reads them only through the strategy's report hook,
 * which writes them as the epoch line's object "preprocess" and the human line's "sampled and
 * packed ..." clause. */
#ifndef TG_STRATEGIES_DISKGNN_H
#define TG_STRATEGIES_DISKGNN_H

#include "../engine-impl.h"

/* The preparation of the passes' generations (their batches sampled ahead and their rows
 * packed). For a sum of passes (tg_pass_stats_add) times and bytes add up, disk_bytes and
 * segment are the largest, prepared_now says whether any pass prepared its generation at its
 * start, reused whether every pass trained an earlier pass's generation. */
typedef struct tg_diskgnn_figures {
    uint64_t passes;
    int prepared_now; /* at the pass's start (1), or during the pass before (0) */
    int reused;       /* the batches and packed file of an earlier pass (--reuse-samples) */
    double wait_s;    /* the pass waiting for the preparation to finish */
    double sample_s, layout_s, pack_s, prep_s; /* sampling (wall), layout and maps, packing, all */
    uint64_t read_bytes, write_bytes;          /* feature bytes the packing read and wrote */
    uint64_t disk_bytes;                       /* the packed file's bytes on disk */
    uint64_t segment;                          /* batches per segment cache */
    double read_amp_est;                       /* the layout's estimated read amplification */
} tg_diskgnn_figures_t;

/* The figures of a diskgnn pass st (or of a sum of them): 0, or -ENOENT (no message) when st
 * holds none. */
int tg_diskgnn_figures(const tg_pass_stats_t *st, tg_diskgnn_figures_t *f);

#endif
