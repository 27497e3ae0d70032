/* engine/lookahead - the rows of the next batches announced to a feature buffer ahead.
 *
 * A feature buffer with a policy over the future (tiergnn/featbuf.h: NEXT_USE, WINDOW) keeps
 * the rows the next batches need when it is told them. This unit tells it, over a pass's batch
 * source (graph.h, tg_source_*: batches next..next+k seen before next is taken): before the
 * pipeline takes batch b, batches b..b+window are sampled and their rows announced (less those a
 * RAM tier serves without the buffer), each batch held ahead accounted against the budget while
 * it waits; a worker done with batch b retires it from the buffer's trace. GIDS's window
 * buffering (gids.c) is the user:
 *
 *     tg_lookahead_opts_t o = {.fb = fb, .skip = hot_tier, .window = W, .max_nodes = bn,
 *                              .est_bytes = bn * 32, .keep = io_transient, .budget = bg,
 *                              .who = "gids"};
 *     tg_lookahead_open(&la, &o);
 *     per pass:  tg_source_start(&src, &lo, W);
 *                tg_lookahead_begin(la, src, num_batches, first_batch);
 *                pipeline source: tg_lookahead_next(la, &item);     (the loader's thread)
 *                worker, batch b done: tg_lookahead_done(la, b);    (any worker)
 *                tg_lookahead_end(la, buffer_alive);  tg_source_stop(src);
 *     tg_lookahead_close(la);
 *
 * Budget: each batch held ahead reserves the largest batch's bytes seen so far (est_bytes before
 * one is seen), then its own when larger (tg_batch_bytes); when that would leave fewer than keep
 * bytes free (io/'s bookkeeping of the reads in flight, reserved as they run), the window stops
 * short for this step (counted, logged once). A batch's bytes go back when the pipeline takes it
 * (its input matrix is the pipeline's in-flight memory then). The announcement scratch (8 bytes
 * a node, grown by half again up to max_nodes) is reserved too and held until close.
 *
 * Trace: a batch is announced as trace id base + b, base rising past each pass's batches, so a
 * buffer that lives across passes sees ids that only grow. A trace that is full (-ENOSPC)
 * leaves the batch unannounced (its rows then not protected; nothing else changes).
 *
 * Threads: begin, next, end on one thread (the pipeline's source runs under the loader's lock);
 * done on the workers, each for the batches it was handed (a batch's flag is set before the
 * pipeline hands the batch out). Errors: 0 or a negative code with its message (the budget, the
 * source, the buffer's). With window 0 next only takes the source's next batch. */
#ifndef TG_ENGINE_LOOKAHEAD_H
#define TG_ENGINE_LOOKAHEAD_H

#include "tiergnn/extract.h"
#include "tiergnn/featbuf.h"
#include "tiergnn/graph.h"

typedef struct tg_lookahead tg_lookahead_t;

typedef struct tg_lookahead_opts {
    tg_featbuf_t *fb;      /* told the future; must outlive the look-ahead */
    const tg_tier_t *skip; /* rows it holds are not announced; NULL: none */
    uint32_t window;       /* batches announced beyond the next one; 0: none */
    uint64_t max_nodes;    /* the most nodes a batch is planned to have (the scratch's bound) */
    uint64_t est_bytes;    /* a batch's bytes before one was seen */
    uint64_t keep;         /* budget bytes left free beside the batches held ahead */
    tg_budget_t *budget;   /* NULL: not accounted */
    const char *who;       /* prefix of messages and budget items */
} tg_lookahead_opts_t;

/* What a pass announced: batches announced, left unannounced (trace full), steps the window
 * stopped short (budget). */
typedef struct tg_lookahead_counts {
    uint64_t announced, unannounced, stopped_short;
} tg_lookahead_counts_t;

int tg_lookahead_open(tg_lookahead_t **out, const tg_lookahead_opts_t *o);
/* A pass over src (ids first_batch .. num_batches - 1); the counts start at 0. */
int tg_lookahead_begin(tg_lookahead_t *la, tg_source_t *src, uint64_t num_batches,
                       uint64_t first_batch);
/* The pipeline source's next: announces up to window batches beyond the next one, then takes
 * it (tg_source_next: 1 with *out, 0 at the end, or an error). */
int tg_lookahead_next(tg_lookahead_t *la, tg_sloader_item_t **out);
/* Batch b is gathered: it leaves the buffer's trace (nothing when it was not announced). */
int tg_lookahead_done(tg_lookahead_t *la, uint64_t b);
/* The pass ends (completed, stopped or failed): the bytes of batches held ahead go back, and
 * every batch announced and not done leaves the trace (unless retire is 0: the buffer was shut
 * down by an error). */
void tg_lookahead_end(tg_lookahead_t *la, int retire);
void tg_lookahead_counts(const tg_lookahead_t *la, tg_lookahead_counts_t *c);
/* Returns the scratch to the budget and frees. NULL is fine. No pass may be running. */
void tg_lookahead_close(tg_lookahead_t *la);

#endif
