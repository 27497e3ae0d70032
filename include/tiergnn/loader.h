/* tiergnn/loader.h - the pull-model batch loader: a strategy's batches, one at a time, to a
 * caller that trains its own model (the Python package, data-parallel ranks, a C program).
 *
 * How to use:
 *     tg_loader_opts_t o;
 *     tg_loader_opts_default(&o);                  // train split, fanouts 10,10, batch 1024
 *     o.dataset = "data/products"; o.strategy = "diskgnn"; o.mem_bytes = 1200 << 20;
 *     tg_loader_t *L;
 *     if (tg_loader_open(&L, &o) < 0) die(tg_errmsg());
 *     for (uint64_t epoch = 0; epoch < 10; epoch++) {
 *         if (tg_loader_set_epoch(L, epoch) < 0) die(tg_errmsg());
 *         const tg_loader_batch_t *b;
 *         int rc;
 *         while ((rc = tg_loader_next(L, &b)) > 0) {
 *             train_on(&b->batch, b->X, b->y);    // blocks, input node ids, X, seed labels
 *             tg_loader_release(L, b);
 *         }
 *         if (rc < 0) die(tg_errmsg());
 *     }
 *     tg_loader_close(L);
 *
 * What it yields: batch b of an epoch is the epoch plan's (tiergnn/graph.h: its seeds are
 * seeds[b * batch_size, ...) of the epoch's seed order, its RNG is that of (seed, epoch, b)) and
 * is made by the chosen strategy (docs/STRATEGIES.md): every strategy of the table works behind
 * the loader, and a loader yields the batches (node ids, blocks) and feature rows X that a
 * training pass of that strategy with the same options and seed trains (tiergnn train). The
 * strategy runs its pass on a thread of the loader; tg_loader_next hands over the batches in
 * the order the pass produces them (batch-id order, except gnndrive with its out-of-order
 * option). Strategies that make their own batches (hier's mega-batches) yield theirs.
 *
 * The rank rule (data parallelism): with rank r of world_size K, let n be the epoch's batches
 * (the plan's, or the strategy's own count for hier; less the last one when drop_last drops a
 * partial last batch) and m = floor(n / K). Rank r yields the contiguous batches
 *     [r * m, (r + 1) * m)
 * of the epoch, in order; the n - K * m batches at the end (at most K - 1) are yielded by no
 * rank. Every rank yields m batches per epoch, and the ranks' shares partition the epoch's first
 * K * m batches. K = 1 yields exactly the single-process pass. Global step s of data-parallel
 * training is the batches r * m + s of ranks r = 0..K-1: K batches of batch_size seeds each. A
 * rank's strategy samples and gathers only its own share (the pass starts at r * m and ends at
 * (r + 1) * m), so K ranks divide the epoch's work. K greater than n is refused.
 *
 * Epochs: tg_loader_open starts the epoch opts.epoch; tg_loader_next returns 1 with a batch, 0
 * once the epoch's share is exhausted (and again on every later call), or a negative error.
 * tg_loader_set_epoch(L, e) starts epoch e (the seed order of tg_sampler_shuffle_epoch(seed, e)
 * when shuffling), as PyTorch's DistributedSampler.set_epoch: call it before each epoch; it may
 * be called mid-epoch (the rest of the current epoch is dropped) and with the same epoch again
 * (the epoch is yielded again, the same batches). Calling it for the epoch already started,
 * before any batch of it was taken, changes nothing.
 *
 * Lifetimes: a batch (its tg_batch_t's arrays, X and y) is valid from tg_loader_next until
 * tg_loader_release(L, b), also across tg_loader_set_epoch. At most max_held batches are held
 * at once: tg_loader_next with max_held batches held returns -EBUSY (release one first), or with
 * wait_held waits until another thread releases one. X is the strategy's own input matrix, lent
 * without a copy: the strategy hands it over and makes another for its next batch, and the
 * release frees it. The batch's arrays and labels (bytes per node, not per feature) are copied
 * into one of max_held slots of the loader. The next batch waits for tg_loader_next in the
 * strategy's own matrix (the strategy's pass hands it over when it is taken) while the
 * strategy's other matrices in flight prepare the batches after it: holding batches stalls the
 * strategy only once those are ready too, and no batch costs a copy of X. tg_loader_close ends
 * the pass (mid-epoch too, at the strategy's next batch boundary, or while it offers a batch),
 * joins every thread, closes every file and frees every slot, batches still held included:
 * pointers into them are invalid after it.
 *
 * Memory: mem_bytes is the loader's whole budget (tiergnn/engine.h, "Memory"), the caller's
 * model and tensors excepted. Before the first epoch the loader makes the training run's budget
 * plan without a model: it samples the first batches of its share and reserves the process's
 * own memory (measured), the input matrices the strategy holds in flight (the batch waiting to
 * be taken is one of them) and, in place of a model, the max_held slots, each sized for that
 * batch (its arrays and the X it lends) with a margin; the strategy's caches take what is left. A
 * slot that a larger batch outgrows reserves the difference (-ENOMEM naming it when the budget has
 * none). A budget too small is refused naming every part and the --mem needed.
 *
 * Threads: one loader is driven from one thread at a time (tg_loader_next, _set_epoch, _info,
 * _close); tg_loader_release and tg_loader_stats may also come from another thread, while one
 * waits in tg_loader_next (a batch freed by a garbage collector). The strategy's threads and
 * the loader's pass thread are its own.
 *
 * Errors: every function returns 0 (tg_loader_next: 1 or 0) or a negative errno with a message
 * (tg_errmsg()) that names the option, file or strategy at fault. An error in the strategy's pass
 * is returned by the tg_loader_next that would have yielded the batch after the last good one.
 */
#ifndef TIERGNN_LOADER_H
#define TIERGNN_LOADER_H

#include <stdint.h>

#include "tiergnn/engine.h"
#include "tiergnn/graph.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct tg_loader tg_loader_t;

typedef struct tg_loader_opts {
    const char *dataset;  /* dataset directory (required) */
    const char *strategy; /* a name of the strategy table, or NULL / "auto" (tiergnn/engine.h) */
    const tg_strategy_arg_t *strategy_args; /* the strategy's own options, as tg_train_opts_t */
    int num_strategy_args;
    uint64_t mem_bytes;  /* the loader's budget (--mem); 0 = the cgroup's limit or none */
    const char *sampler; /* "node" (NULL: node-wise) or "ladies" (tiergnn/graph.h) */
    int num_layers;      /* 1..TG_MAX_LAYERS */
    int64_t fanouts[TG_MAX_LAYERS]; /* per layer, input layer first, in the sampler's sense */
    uint64_t batch_size;            /* seeds per batch; 0 = all seeds in one batch */
    /* The seeds: seeds[0..num_seeds) (node ids, copied at open) when seeds is not NULL, else
     * the split named by split ("train", "valid" or "test"; NULL = "train"). A pass over the
     * training split is a training pass of the strategy (hier: its mega-batches); over other
     * seeds it is the strategy's pass over those seeds (as a sampled evaluation runs). */
    const uint64_t *seeds;
    uint64_t num_seeds;
    const char *split;
    uint64_t seed;        /* the run's seed: seed order and sampling RNG */
    uint64_t epoch;       /* the epoch tg_loader_open starts */
    uint64_t num_epochs;  /* epochs the caller will run (0: unknown); past the last one a
                             strategy that prepares the next epoch ahead (diskgnn) does not */
    int shuffle;          /* 1: the seeds shuffled per epoch (as training); 0: in order */
    int drop_last;        /* 1: the epoch's last batch is not yielded when partial */
    uint64_t max_batches; /* batches per epoch at most (--batches-per-epoch; 0 = all) */
    int rank, world_size; /* this rank of world_size (the rank rule above); 0 of 1 */
    int max_held;         /* batches held at once, 1..64 (default 2) */
    int wait_held;        /* 1: tg_loader_next at max_held waits for a release from another thread;
                             0: it returns -EBUSY */
    int threads;          /* the run's compute threads, 1..1024 (default 1) */
    int sampler_threads;  /* the strategy's sampler threads, 0..256; -1 = threads */
    int normalize;        /* L1 row normalisation of X (tiergnn/store.h) */
    int verify;           /* compare every dataset file's CRC-32 with meta.txt first */
    int verify_reads;     /* check every feature row read from a disk against its CRC-32 */
} tg_loader_opts_t;

/* Node-wise, 2 layers of fanout 10, batch 1024, the training split shuffled, seed 0, epoch 0,
 * rank 0 of 1, max_held 2, 1 thread, sampler threads = threads, strategy auto, no --mem. */
void tg_loader_opts_default(tg_loader_opts_t *o);

/* A batch as lent by tg_loader_next; every pointer valid until tg_loader_release. */
typedef struct tg_loader_batch {
    /* Seeds, input node ids and per-layer blocks (tiergnn/graph.h): batch.nodes[0..num_nodes)
     * are the input nodes (global ids), the seeds first; batch.id is the batch's number in the
     * epoch. The loader owns the arrays: do not free them. */
    tg_batch_t batch;
    float *X;             /* (batch.num_nodes, dim) f32: row i = the features of batch.nodes[i] */
    const int32_t *y;     /* (batch.num_seeds, label_width): the seeds' labels; -1 = unlabelled (in
                             whole-graph mode, the nodes that are not among the seeds) */
    uint32_t dim;         /* feature width */
    uint32_t label_width; /* 1, or the number of classes for a multi-label dataset */
    uint64_t epoch;
    uint64_t index; /* position in this rank's share of the epoch: 0 .. m - 1 */
} tg_loader_batch_t;

/* What the loader is: fixed at open but for the batch counts, which are the current epoch's. */
typedef struct tg_loader_info {
    const char *strategy; /* the strategy that runs (static string) */
    const char *sampler;  /* "node" or "ladies" */
    uint64_t num_nodes;   /* of the dataset */
    uint32_t dim, label_width, num_classes;
    int multi_label;
    int whole_graph;        /* one batch of every node per epoch (tiergnn/graph.h) */
    uint64_t num_seeds;     /* seeds of the loader (the split's or the caller's) */
    uint64_t epoch;         /* the current epoch */
    uint64_t epoch_batches; /* the epoch's batches n (after drop_last) */
    uint64_t rank_batches;  /* this rank's share m = floor(n / world_size) */
    uint64_t first_batch;   /* the first batch id of the share, rank * m */
    int max_held;
    uint64_t slot_bytes; /* the budget each slot reserved at open (0: no budget) */
    uint64_t mem_bytes;  /* the budget (0: none) */
} tg_loader_info_t;

#define TG_LOADER_MAX_TIERS 8
#define TG_LOADER_PASS_JSON 4096
#define TG_LOADER_PASS_LINE 1024

/* The figures of the current epoch's pass, as a training epoch reports them (tiergnn train's
 * JSON epoch line). The pass's own figures (sample_s .. tiers) are known once the pass has
 * ended (pass_done): after tg_loader_next returned 0 for the epoch. */
typedef struct tg_loader_stats {
    uint64_t epoch;
    int pass_done;          /* the strategy's pass over the share has ended */
    int stopped;            /* it ended early (set_epoch or close mid-epoch) */
    uint64_t batches;       /* batches yielded to the caller this epoch */
    uint64_t rank_batches;  /* m: what the epoch's share holds */
    double wait_s;          /* the caller waiting in tg_loader_next */
    double copy_s;          /* copying batches' arrays and labels into slots (the pass's
                               thread; X is lent, not copied) */
    double stall_s;         /* the pass waiting for the caller: for a free slot (max_held
                               held) or for the caller to take the batch it offers */
    uint64_t index_bytes;   /* adjacency bytes the samplers asked for */
    uint64_t feature_bytes; /* feature rows' bytes the yielded batches hold (in the file's type) */
    /* the pass's figures (tg_pass_stats_t); valid when pass_done */
    double time_s;             /* the pass's wall time */
    double sample_s;           /* summed over sampler threads */
    double gather_s;           /* summed over gathering threads */
    double pass_wait_s;        /* the pass's step thread waiting for its next batch */
    uint64_t batch_bytes_peak; /* the strategy's input matrices in flight at once */
    int have_io;
    uint64_t io_requests, io_read_bytes;
    int have_io_wait;
    double io_wait_s;
    int have_cache;
    uint64_t cache_lookups, cache_hits;
    int ntiers; /* where the rows came from, tier by tier (the JSON key cache_tiers) */
    struct {
        char name[32];
        uint64_t lookups, hits, bytes;
    } tiers[TG_LOADER_MAX_TIERS];
    /* the budget */
    uint64_t mem_bytes, data_bytes, data_bytes_peak;
    /* The pass's keys of tiergnn train's JSON epoch line that the fields above do not carry, as
     * train writes them for this strategy, in one JSON object: cache_tiers, the strategy's own
     * section (gids's "gids", diskgnn's "preprocess", hier's "megabatch", ...: the figures of
     * its paper) and neighbor_cache with a neighbour cache. Valid when pass_done ("" before):
     * tg_loader_stats_json adds its members to its object. */
    char pass_json[TG_LOADER_PASS_JSON];
    /* The pass's part of train's human epoch line ("; io 12 req, 1.2 MiB read / ...", the
     * strategy's clause), when pass_done ("" before). */
    char pass_line[TG_LOADER_PASS_LINE];
} tg_loader_stats_t;

/* Opens the dataset, the strategy and the budget, checks every option (an error names it) and
 * starts epoch o->epoch on the loader's thread. *out is NULL on error. The options' strings and
 * arrays (dataset, strategy_args, seeds, ...) are read here only: they need not outlive it. */
int tg_loader_open(tg_loader_t **out, const tg_loader_opts_t *o);
/* Starts epoch `epoch` (see "Epochs" above); held batches stay valid. */
int tg_loader_set_epoch(tg_loader_t *L, uint64_t epoch);
/* 1 and *out = the next batch of this rank's share; 0 at the end of the epoch's share (with
 * batches held too); -EBUSY when max_held batches are held before the end; another negative code
 * when the strategy's pass failed. */
int tg_loader_next(tg_loader_t *L, const tg_loader_batch_t **out);
/* Gives a batch back: -EINVAL when b is not a batch L lent and still holds. */
int tg_loader_release(tg_loader_t *L, const tg_loader_batch_t *b);
void tg_loader_info(const tg_loader_t *L, tg_loader_info_t *info);
void tg_loader_stats(tg_loader_t *L, tg_loader_stats_t *st);
/* st as one JSON object with the keys of tiergnn train's epoch line where they exist (epoch,
 * batches, sample_s, gather_s, wait_s, io_requests, io_read_bytes, io_needed_bytes, io_wait_s,
 * cache_hit_ratio, data_bytes, batch_bytes_peak; unknown figures null), the members of
 * st->pass_json (cache_tiers, the strategy's own section, neighbor_cache; cache_tiers [] before
 * pass_done) and the loader's own keys (rank_batches, pass_done, stopped, copy_s, stall_s,
 * pass_time_s, pass_wait_s, mem_bytes, data_bytes_peak). *out is malloc'd (the caller frees
 * it). */
int tg_loader_stats_json(const tg_loader_stats_t *st, char **out);
/* Ends the pass, joins every thread, frees every slot (held batches included) and closes the
 * dataset. NULL is fine. */
void tg_loader_close(tg_loader_t *L);

#ifdef __cplusplus
}
#endif
#endif
