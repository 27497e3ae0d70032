/* engine/pipeline - the thread pipeline every strategy's pass runs on.
 *
 *     sampler threads (tg_sloader_t: batches in id order, optionally gathered on the sampler
 * thread)
 *       -> workers: 0..W threads, each taking `group` consecutive batches at a time, their matrix
 *          places in id order, and filling their input matrices X (a strategy's extraction)
 *       -> training window: a reorder window that hands batches out in id order, or a FIFO
 *       -> trainer: the calling thread runs the pass's step callback
 *       -> releasing queue -> releaser thread: frees X and the batch off the trainer's path
 *          (with workers; gathering on the sampler threads, the trainer frees each batch itself)
 *
 * How a strategy uses it (strategies/gnndrive.c is the worked example):
 *
 *     tg_pipe_opts_t po = {.pass = p, .adj = r->adj, .dim = D, .sampler_threads = S,
 *                          .prefetch = 2, .queue_depth = 2, .in_order = 1,
 *                          .workers = E, .group = 1, .work = my_extract, .work_ctx = s};
 *     rc = tg_pipe_run(&po, st);
 *
 * A strategy that samples on its own hands the batches in through `source` (workers > 0 only).
 *
 * With workers = 0, X comes from `gather`, called on the sampler thread right after sampling
 * (rows in RAM or mapped); with workers > 0 the pipeline allocates X and `work` fills it. A work
 * function reports a failure with tg_pipe_fail (the first error of any stage wins, with its
 * message) and returns it; it should give up early (-ECANCELED) when tg_pipe_aborted says so.
 *
 * Order and exactness: batches enter the workers in id order; in order (the default) the window
 * has queue_depth + workers x group places and hands them to the trainer in id order, so the
 * trainer sees exactly the batches and order of every other strategy. Out of order, a FIFO of
 * queue_depth places: a batch trains as soon as it is ready.
 *
 * Matrix places: at most workers x group + queue_depth matrices X exist at once (between a
 * worker taking a group and the releaser freeing it). Places are taken in id order under the
 * loader's lock, so the batch the trainer needs next never waits for a place a later batch holds.
 *
 * Stopping: when the step returns TG_PASS_STOP the pass stops at that batch boundary. In order,
 * it ends there. Out of order, the batches already handed to workers train first, so the pass
 * always ends on a prefix of the epoch (st->next_batch) and a resumed pass skips exactly those.
 *
 * Errors: the first error of a sampler (at the batch it failed), a worker, or the trainer is kept
 * in one tg_errbox_t; then every queue is closed, every thread joined, every batch freed, and
 * tg_pipe_run returns it with its message. on_error (optional) runs once after the first error,
 * on the calling thread before the workers are joined (a strategy shuts its feature buffer down
 * there, so that workers blocked in it wake up).
 *
 * Timing (tg_pass_stats_t): sample_s summed over sampler threads, gather_s over the gather hook
 * or the workers, wait_s the trainer waiting for its next batch, release_s the releaser, and
 * batch_bytes_peak the bytes of X (plus scratch a worker declares with tg_pipe_count_bytes) in
 * flight at once. */
#ifndef TG_ENGINE_PIPELINE_H
#define TG_ENGINE_PIPELINE_H

#include <stdatomic.h>

#include "engine-impl.h"

typedef struct tg_pipe tg_pipe_t;

/* Fills the input matrices X[j] (b[j]->num_nodes x dim f32) of n consecutive batches. Returns 0,
 * or a negative code after tg_pipe_fail (or -ECANCELED when the pipeline aborted). */
typedef int (*tg_pipe_work_fn)(void *ctx, tg_pipe_t *P, int worker, const tg_batch_t *const *b,
                               float *const *X, int n);

/* Where the batches come from when they are not sampled by the pipeline's own loader (a
 * strategy that samples batches ahead on a thread of its own reads them back from spill files,
 * or takes them from a look-ahead source). next hands out the pass's batches in id order from
 * first_batch on (it->batch.id set, it->sample_s what sampling it took): 1 with *it, 0 at the end,
 * or a negative error code with its message; it runs on a worker under the pipeline's loader lock,
 * and should return -ECANCELED soon once tg_pipe_aborted(P). item_free frees an item next returned.
 */
typedef struct tg_pipe_source {
    int (*next)(void *ctx, tg_pipe_t *P, tg_sloader_item_t **it);
    void (*item_free)(void *ctx, tg_sloader_item_t *it);
    uint64_t num_batches; /* the pass's batches, those before first_batch included */
    void *ctx;
} tg_pipe_source_t;

typedef struct tg_pipe_opts {
    const tg_pass_t *pass;
    const tg_pipe_source_t *source; /* NULL: a loader over adj samples the batches */
    tg_adj_t *adj;                  /* the samplers read it */
    uint32_t dim;                   /* columns of X */
    int sampler_threads;            /* 0 = sample inline (in the worker or the trainer) */
    size_t prefetch;                /* batches each sampler thread may have ready */
    /* workers == 0: X is gathered on the sampler thread */
    tg_gather_fn gather;
    void *gather_ctx;
    /* workers > 0: `group` consecutive batches per call of work (1..TG_PIPE_MAX_GROUP) */
    int workers, group;
    /* Optional, with group > 1: asked after each batch a worker pulls for its group (under the
     * loader lock), 1 to pull one more (up to group), 0 when the group is full enough: GIDS's
     * accumulator merges batches until their expected reads reach its target. */
    int (*group_more)(void *ctx, const tg_batch_t *const *b, int n);
    tg_pipe_work_fn work;
    void *work_ctx;
    int queue_depth; /* training window / FIFO and releasing queue (>= 1) */
    int in_order;
    void (*on_error)(void *ctx); /* optional */
    void *error_ctx;             /* its argument (NULL: work_ctx / gather_ctx) */
} tg_pipe_opts_t;

#define TG_PIPE_MAX_GROUP 16

/* Runs one pass; see the header comment. st is filled (timing, steps, next_batch, stopped,
 * batch_bytes_peak); the strategy adds its own I/O and cache figures. */
int tg_pipe_run(const tg_pipe_opts_t *o, tg_pass_stats_t *st);

/* Records the first error (msg NULL: this thread's message) and stops the pipeline. Returns rc.
 * -ECANCELED once the pipeline is stopping is not recorded (a stage's answer to the stop). */
int tg_pipe_fail(tg_pipe_t *P, int rc, const char *msg);
/* Non-zero once the pipeline is stopping (an error, or an in-order stop): workers give up. */
int tg_pipe_aborted(const tg_pipe_t *P);
/* The flag behind tg_pipe_aborted, for code below engine/ that polls an atomic_int. */
atomic_int *tg_pipe_abort_flag(tg_pipe_t *P);
/* Adds delta (may be negative) to the bytes in flight counted in batch_bytes_peak: a worker's
 * scratch that lives as long as a group's extraction. */
void tg_pipe_count_bytes(tg_pipe_t *P, int64_t delta);

#endif
