/* engine-impl.h - private seams of the engine: the opened dataset resources, the strategy table,
 * checkpoints and the layer-wise forward pass shared by evaluation and inference. */
#ifndef TG_ENGINE_IMPL_H
#define TG_ENGINE_IMPL_H

#include <stdatomic.h>
#include <string.h>

#include "tiergnn/engine.h"
#include "tiergnn/io.h"
#include "tiergnn/rowcrc.h"
#include "tiergnn/store.h"

#include "../graph/adj-counting.h"
#include "../io/proc-io.h"

/* ================================================================ strategies
 *
 * A strategy decides when and in what order batches are sampled, where each feature row comes
 * from and what runs concurrently; the model, the sampler's RNG and the loss never depend on it.
 * It is a small table of function pointers (like tg_store_i), one file each under
 * engine/strategies/. The engine asks a strategy for two things:
 *
 *   open:  the adjacency the samplers read and the feature store of layer-wise passes (full
 *          neighbourhood evaluation, inference), reserved against the run's budget;
 *   pass:  one pass over a list of seeds (a training epoch, or a sampled evaluation of a split):
 *          batch b takes seeds [b * batch_size, ...) and the RNG of (seed, epoch, b), and the
 *          strategy hands each batch with its feature matrix X to the step callback, on the
 *          calling thread, in batch-id order unless the pass allows otherwise.
 *
 * A strategy also reports its own figures (report); everything else the engine needs from it
 * comes through optional hooks whose contracts below say which kind of strategy needs them. Adding
 * a strategy is a new file with a tg_strategy_i and a line in the table of strategies/strategy.c;
 * the engine (train, eval, infer, budget) never names one. */

typedef struct tg_run tg_run_t;
typedef struct tg_strategy tg_strategy_t;
struct tg_budget_plan_opts;
struct tg_cost_inputs; /* engine/plan_cost.h */
struct tg_cost_pred;
struct tg_cost_measure; /* engine/plan_profile.h */
struct tg_cost_profile;

/* Settings every strategy gets; its own options arrive parsed in cfg (see tg_strategy_info_t). */
typedef struct tg_strategy_opts {
    int normalize;       /* L1 row normalisation of features */
    int threads;         /* compute threads (the trainer's pool) */
    int sampler_threads; /* loader threads (>= 0; 0 = sample inline / one sampler) */
    /* sampler_threads was the default (the compute threads), not asked for: the budget plan may
     * lower it when --mem leaves no room for that many batch matrices in flight */
    int sampler_threads_auto;
    const void *cfg; /* the strategy's config (info.config_size bytes), parsed from its options */
} tg_strategy_opts_t;

void tg_strategy_opts_default(tg_strategy_opts_t *o);

/* The step callback of a pass: the batch and its feature matrix X (num_nodes x dim f32, rows
 * normalised when asked). Both stay valid until the callback returns. Returns 0 to go on,
 * TG_PASS_STOP to stop at this batch boundary, TG_PASS_KEEP_X to go on and keep X, or a
 * negative error code with a message.
 *
 * TG_PASS_KEEP_X: the callback takes X over (the pull loader lends it to its caller rather than
 * copying it): the pass frees the batch but not X, whose matrix place it gives back at once, and
 * the callback frees X later with tg_pass_x_free, from any thread, after the pass too. Whoever
 * keeps X accounts for its bytes in the budget. A strategy that wraps the step callback passes
 * its answer on unchanged (the kit's pipeline is the only caller that acts on it). */
#define TG_PASS_STOP 1
#define TG_PASS_KEEP_X 2
void tg_pass_x_free(const float *X);
typedef int (*tg_pass_step_fn)(void *ctx, const tg_batch_t *b, const float *X);

typedef struct tg_pass {
    const uint64_t *seeds; /* the pass's seed order; outlives the pass */
    uint64_t num_seeds;
    uint64_t batch_size; /* >= 1 */
    uint64_t seed, epoch;
    uint64_t first_batch; /* batches before it are skipped: run earlier (resume) or by other
                             ranks (the pull loader's share) */
    int num_layers;
    const int64_t *fanouts;      /* per layer, in the sampler's sense (tiergnn/graph.h) */
    const tg_sampler_i *sampler; /* NULL = node-wise; tg_pass_sloader_opts passes it on */
    int allow_out_of_order; /* training passes: the strategy may use its out_of_order setting */
    int training;           /* a training epoch (not an evaluation of a split) */
    /* The training pass that follows this one, for strategies with TG_STRAT_NEXT_PASS (they
     * sample and lay out epoch e + 1 while epoch e trains): first_batch is where that pass
     * will start (0, or a rank's share's start through the pull loader), no step; it and its
     * seeds are valid during this pass only (copy what is kept). NULL at the last epoch, for
     * other strategies and for evaluation passes. What a strategy prepares from it is used only
     * if the pass that comes equals it (seeds, seed, epoch, batch size, fanouts, first_batch). */
    const struct tg_pass *next;
    tg_pass_step_fn step;
    void *ctx;
} tg_pass_t;

#define TG_PASS_MAX_TIERS 8
/* Bytes of a pass's own block (tg_pass_stats_t.own): a strategy's figures must fit in it. */
#define TG_PASS_OWN_BYTES 256

/* What a pass measured: what every strategy has (times, I/O, the tiers rows came from, the
 * adjacency's neighbour cache), and a block of the strategy's own figures that only its hooks
 * read (tg_strategy_i.report, .own_add). I/O figures are per pass (the counters are taken at
 * its start). Several passes add up into one with tg_pass_stats_add (evaluation sums its
 * splits' passes), so figures are counts and sums; ratios are derived when they are reported. */
typedef struct tg_pass_stats {
    uint64_t steps;            /* step callbacks run */
    uint64_t next_batch;       /* first batch not run: the whole pass when not stopped */
    int stopped;               /* a callback returned TG_PASS_STOP */
    double sample_s;           /* summed over sampler threads */
    double gather_s;           /* summed over gathering / extracting threads */
    double wait_s;             /* the step thread waiting for its next batch */
    double release_s;          /* the releaser freeing trained batches */
    uint64_t batch_bytes_peak; /* feature matrices of batches in flight at once */
    int have_io;               /* the fields below are known */
    uint64_t io_requests, io_read_bytes;
    int have_io_wait;
    double io_wait_s;
    int have_cache; /* the strategy has a feature cache: lookups, hits */
    uint64_t cache_lookups, cache_hits;
    /* Where the rows came from, tier by tier in lookup order (RAM caches, feature buffer, the
     * feature file): the JSON key cache_tiers. Added with tg_pass_tier_add. */
    int ntiers;
    struct {
        char name[32];
        uint64_t lookups, hits, bytes;
    } tiers[TG_PASS_MAX_TIERS];
    /* The neighbour cache tier of a disk adjacency (tiergnn/ncache.h, any strategy's
     * --neighbor-cache): nodes asked, nodes served, its bytes; the JSON key neighbor_cache. */
    int have_ncache;
    uint64_t ncache_lookups, ncache_hits, ncache_bytes;
    /* The strategy's own figures (its paper's: a planner's time, a window's announcements): a
     * struct of its own, copied in and out with tg_pass_own_put / tg_pass_own_get (memcpy: no
     * aliasing rules broken), read only by its report and own_add hooks. All zero: the pass
     * wrote none (a block of counters that add, so that zero is the sum of no pass). */
    union {
        unsigned char bytes[TG_PASS_OWN_BYTES];
        uint64_t align_;
    } own;
} tg_pass_stats_t;

/* Copies a strategy's own figures (n <= TG_PASS_OWN_BYTES bytes) into st->own, or out of it. */
static inline void tg_pass_own_put(tg_pass_stats_t *st, const void *own, size_t n)
{
    memcpy(st->own.bytes, own, n);
}
static inline void tg_pass_own_get(const tg_pass_stats_t *st, void *own, size_t n)
{
    memcpy(own, st->own.bytes, n);
}
/* A strategy's own figures type fits the block (a compile-time check beside the type). */
#define TG_PASS_OWN_FITS(type)                                                                     \
    _Static_assert(sizeof(type) <= TG_PASS_OWN_BYTES, #type " is larger than a pass's own block")

/* Appends a tier (name, rows asked, rows it served, bytes it served) to st->tiers; -ENOSPC
 * (no message) when TG_PASS_MAX_TIERS are there: the figures are then left out. */
int tg_pass_tier_add(tg_pass_stats_t *st, const char *name, uint64_t lookups, uint64_t hits,
                     uint64_t bytes);

typedef struct tg_strategy_i {
    tg_strategy_info_t info; /* name, summary, capabilities, options (tiergnn/engine.h) */
    /* The least --mem bytes the strategy needs on ds beside the run's own (labels, splits,
     * seed order): its adjacency, stores and buffers. Describes the items in why. */
    uint64_t (*min_bytes)(const tg_dataset_t *ds, const tg_strategy_opts_t *o, char *why,
                          size_t why_len);
    /* Builds (or finds valid) the derived/ files the strategy reads; NULL = none. Runs before
     * open, and from `tiergnn prepare`. */
    int (*prepare)(const tg_dataset_t *ds, const tg_strategy_opts_t *o);
    /* Opens r->adj (raw, before the run wraps it) and r->store, reserving against r->budget, and
     * the strategy's own state (which may be created lazily at the first pass). */
    int (*open)(tg_strategy_t **out, tg_run_t *r, const tg_strategy_opts_t *o);
    /* One pass; see above. It fills st from zero: the shared figures (the pipeline's timing,
     * I/O, cache lookups and hits, tiers with tg_pass_tier_add, the neighbour cache) and, when
     * it has a report hook, its own block (tg_pass_own_put). On error every thread the pass
     * started is joined and every batch freed before it returns. */
    int (*pass)(tg_strategy_t *s, const tg_pass_t *p, tg_pass_stats_t *st);
    /* Frees the strategy's state (not r->adj / r->store: the run closes those). NULL is fine. */
    void (*close)(tg_strategy_t *s);
    /* Optional, for strategies that keep work running between passes (a thread preparing the
     * next pass, reading ahead): stops it and waits for it. tg_run_close calls it before it
     * closes the adjacency and the store, which such work reads. NULL: nothing runs between
     * passes. */
    void (*drain)(tg_strategy_t *s);
    /* The most input matrices X its passes hold at once (sampled ahead, queued, trained, being
     * freed): the run reserves that many batches' worth of --mem for them. It reads o->cfg and
     * o->sampler_threads as they are when called: the budget plan calls it again after it lowers
     * them (in_flight_opts). */
    int (*batches_in_flight)(const tg_strategy_opts_t *o);
    /* Optional: the integer options (names in info.opts, NULL-terminated) whose values
     * batches_in_flight counts and that the strategy's passes read from o->cfg after the budget
     * plan (at the first pass, not at open): pipeline depth, sweep groups, extractors set up at
     * the first pass. Where --mem leaves no room for the matrices in flight, the plan lowers
     * those the user did not give (and the sampler threads when they were the default) one step
     * at a time, each to at least its option's min, before it refuses. NULL: only the sampler
     * threads. */
    const char *const *in_flight_opts;
    /* Optional, for strategies that make the batches of a training pass themselves rather
     * than take the plan's (batches drawn inside partitions, regrouped seeds): how many batches
     * the pass p has (its first_batch ignored; p->num_seeds less than the training split means
     * --batches-per-epoch limited it). The trainer counts an epoch's batches, checks a resume
     * point and draws its progress with it. Called before each training pass, after the
     * budget plan. NULL: the plan's, ceil(num_seeds / batch_size). */
    int (*epoch_batches)(tg_strategy_t *s, const tg_pass_t *p, uint64_t *n);
    /* Optional, for strategies whose training batches are not sampled from r->adj as the plan
     * says (another graph, a subgraph, batches of their own): the largest of the first batches
     * the plan's epoch would train, as the budget plan measures them (tg_budget_plan) to size
     * one step's activations and the input matrices. NULL: the plan's first batches, sampled
     * from r->adj. */
    int (*profile_batch)(tg_strategy_t *s, const struct tg_budget_plan_opts *o,
                         tg_batch_t *largest);
    /* Optional, for strategies that hold data only their training passes use (batches or
     * subgraphs prepared for the next training pass, a graph of their own, caches sized for
     * training): the run is about to evaluate (tg_run_evaluate_how), layer-wise (layerwise 1:
     * the row files of tg_lw_forward take what the budget has left) or sampled through the
     * strategy's own pass (0), so the strategy may release that data and its budget. A cache
     * that serves a sampled evaluation pass as well as training is kept for layerwise 0 (its
     * rebuild would cost every evaluated epoch). The next pass must work after it (rebuilding
     * what was released). NULL: nothing to do. */
    void (*evaluating)(tg_strategy_t *s, int layerwise);
    /* Optional, for strategies with figures of their own (st->own, written by their pass):
     * reports them for a pass st (or a sum of passes, own_add) on the calling thread, between
     * passes. Writes its keys into the epoch's JSON line j (NULL: none) - one key named after
     * what it measures, whose value is an object of its figures, is the usual shape - and
     * appends its part of the human epoch line to line (NULL: none; len bytes in all,
     * NUL-terminated; clauses that start with "; " or ", " after the I/O figures). The keys
     * are an interface (tiergnn bench, scripts): a key keeps its name and meaning. NULL: the
     * strategy has no figures of its own. */
    void (*report)(const tg_pass_stats_t *st, tg_json_t *j, char *line, size_t len);
    /* Optional, with report: sum->own += add->own, so that several passes report as one
     * (evaluation sums its splits' passes with tg_pass_stats_add). A block of zeros is the sum
     * of no pass; settings (a window, a depth) take the larger. NULL: the sum's block stays
     * zero. */
    void (*own_add)(tg_pass_stats_t *sum, const tg_pass_stats_t *add);
    /* Optional: the cost model's prediction of one training epoch of this strategy with its
     * default options on the inputs in (engine/plan_cost.h): what its pipeline reads from the
     * disk, the I/O, sampling, gathering and compute that costs, how they overlap, and its
     * preparation amortised over the epochs, with a one-line why. out arrives zeroed with
     * feasible = 1; a strategy that cannot run on these inputs clears it (tg_cost_infeasible).
     * Pure arithmetic: a negative code only for inputs tg_cost_check lets through that it
     * cannot use. NULL: the planner skips the strategy with a note. */
    int (*predict)(const struct tg_cost_inputs *in, struct tg_cost_pred *out);
    /* Optional, with profile_batch (batches not sampled from the whole graph): measures the
     * strategy's own batches of an epoch for the planner, as its run would form them, into
     * prof->own (and what else of prof is its own), from the derived files that exist; leaves
     * them zero where it cannot without building one (predict then charges the build and takes
     * the whole graph's batches). Called by the profile (engine/plan_profile.c) with so parsed
     * from the run's strategy options. NULL: predict takes the profile's batches. */
    int (*plan_measure)(const tg_dataset_t *ds, const tg_strategy_opts_t *so,
                        const struct tg_cost_measure *mx, struct tg_cost_profile *prof);
    /* Optional: the options predict plans (NULL-terminated; it sets their values in the
     * prediction's knobs). A run of the strategy by name whose options leave one of them unset
     * is planned first (engine/train.c), so that the run and its prediction agree; NULL: none. */
    const char *const *planned;
} tg_strategy_i;

/* The table (strategies/strategy.c) is the only place that names every strategy. */
extern const tg_strategy_i tg_strategy_memory;
extern const tg_strategy_i tg_strategy_mmap;
extern const tg_strategy_i tg_strategy_gnndrive;
extern const tg_strategy_i tg_strategy_pagraph;
extern const tg_strategy_i tg_strategy_ginex;
extern const tg_strategy_i tg_strategy_diskgnn;
extern const tg_strategy_i tg_strategy_hier;
extern const tg_strategy_i tg_strategy_gids;

/* The table's strategy i (0 .. tg_strategy_count() - 1), or NULL. */
const tg_strategy_i *tg_strategy_at(int i);
/* The strategy called name ("auto" is not one: see tg_strategy_choose). */
int tg_strategy_find(const char *name, const tg_strategy_i **out);

/* ---------------------------------------------------------------- the run */

/* Everything a run reads from the dataset, opened once. */
struct tg_run {
    tg_dataset_t *ds;
    tg_adj_t *adj;        /* the strategy's adjacency, wrapped to count the index bytes read */
    tg_store_t *store;    /* the strategy's store for layer-wise passes */
    int32_t *labels;      /* (N * label_width) */
    uint32_t label_width; /* 1, or C when multi-label */
    uint64_t *split[3];   /* train, valid, test ids */
    uint64_t split_n[3];
    uint64_t split_bytes, label_bytes; /* reserved against budget */
    tg_budget_t budget;
    int budget_init;
    int budget_planned; /* tg_budget_plan has reserved the model and batches */
    /* bit k: the strategy's option info.opts[k] was given (tg_run_open_opts); the budget plan
     * lowers only the others (tg_strategy_i.in_flight_opts) */
    uint64_t opts_given;
    uint32_t batch_nodes; /* input nodes of the plan's largest profiled batch (0: no plan) */
    tg_pool_t *pool;      /* compute threads */
    const tg_strategy_i *strat_i;
    tg_strategy_t *strat;
    tg_strategy_opts_t sopts;
    void *scfg;                   /* the strategy's parsed options (sopts.cfg) */
    _Atomic uint64_t index_bytes; /* bytes of adjacency entries the samplers asked for */
    uint32_t row_bytes;           /* one feature row in the file */
    /* --verify-reads: the row checksums every strategy checks its disk reads against (passed
     * to its stores, extraction and tiers; NULL = not checked); reserved against budget */
    tg_rowcrc_t *rowcrc;
    /* The run's sampler (NULL = node-wise), set by train / eval / infer from the options or the
     * checkpoint: its passes sample with it, and layer-wise GCN passes take its full-neighbour
     * blocks (ladies: the exact P = D^-1 (A + I) its training estimated). */
    const tg_sampler_i *sampler;
};

/* Which feature store tg_run_open opens: MEMORY = the table's in-RAM strategy memory; FILE =
 * adjacency and features on disk (strategy gnndrive, whose layer-wise store reads rows with
 * pread). */
typedef enum { TG_RUN_STORE_MEMORY = 0, TG_RUN_STORE_FILE = 1 } tg_run_store_t;

/* TG_FILE_TRAIN/VALID/TEST -> 0/1/2 */
static inline int tg_split_index(tg_file_id_t f)
{
    return f == TG_FILE_TRAIN ? 0 : f == TG_FILE_VALID ? 1 : 2;
}

typedef struct tg_run_opts {
    const char *dataset;
    const char *strategy;          /* a name, or "auto" / NULL: see tg_strategy_choose */
    tg_strategy_opts_t sopts;      /* cfg is filled by tg_run_open_opts from args */
    const tg_strategy_arg_t *args; /* the strategy's options */
    int nargs;
    uint64_t mem_bytes;   /* the data budget (--mem); 0 = unlimited */
    uint64_t extra_bytes; /* what the caller will reserve besides (seed order, masks) */
    uint64_t auto_extra;  /* the automatic choice: model, activations, batches (estimated) */
    int threads;          /* compute threads */
    int verify;           /* compare every file's CRC-32 with meta.txt before anything else */
    int verify_reads;     /* check every feature row read against its CRC-32 (rowcrc) */
} tg_run_opts_t;

/* Opens the dataset (sizes always checked against meta.txt, checksums with verify), labels and
 * splits (reserved against the budget), the strategy (its adjacency and store) and the compute
 * pool. Refuses with the amount needed when mem_bytes cannot hold the minimum working set. */
int tg_run_open_opts(tg_run_t *r, const tg_run_opts_t *o);
/* tg_run_open_opts with strategy memory or gnndrive and their defaults (see tg_run_store_t). */
int tg_run_open(tg_run_t *r, const char *dataset, tg_run_store_t store, int normalize,
                uint64_t mem_bytes, int threads);
void tg_run_close(tg_run_t *r);

/* Picks the first in-RAM strategy (TG_STRAT_IN_RAM) whose working set plus extra_bytes fits
 * mem_bytes (0: a quarter of the physical RAM), else the table's TG_STRAT_AUTO_OOC strategy;
 * *why says how it decided. */
int tg_strategy_choose(const tg_dataset_t *ds, uint64_t mem_bytes, uint64_t extra_bytes,
                       uint64_t auto_extra, const tg_strategy_opts_t *base,
                       const tg_strategy_arg_t *args, int nargs, const tg_strategy_i **out,
                       char *why, size_t why_len);

/* Labels of nodes[0..n) into y (n * label_width); when mask is given, nodes whose mask byte is 0
 * get -1 (not counted by the loss). */
void tg_run_labels(const tg_run_t *r, const uint64_t *nodes, size_t n, const uint8_t *mask,
                   int32_t *y);

/* Runs one pass of the run's strategy (see tg_strategy_i.pass). */
int tg_run_pass(tg_run_t *r, const tg_pass_t *p, tg_pass_stats_t *st);

/* ---------------------------------------------------------------- a pass's figures
 *
 * engine/report.c: what train, eval and the bench read from a pass, for every strategy alike;
 * a strategy's own figures come only through its report and own_add hooks. */

/* sum += add, for passes of r's strategy: times and counts add, batch_bytes_peak takes the
 * larger, tiers add by name (a new name is appended), the neighbour cache's counters add, and
 * the own block goes through the strategy's own_add. */
void tg_pass_stats_add(const tg_run_t *r, tg_pass_stats_t *sum, const tg_pass_stats_t *add);
/* The JSON value of cache_tiers: [{"name":..., "lookups":..., "hits":..., "bytes":...}, ...]. */
const char *tg_pass_tiers_json(const tg_pass_stats_t *st, char *buf, size_t len);
/* The JSON value of neighbor_cache: {"bytes":..., "lookups":..., "hits":..., "hit_ratio":...}. */
const char *tg_pass_ncache_json(const tg_pass_stats_t *st, char *buf, size_t len);
/* The strategy's keys of the epoch's JSON line (j; NULL: none) and its part of the human line
 * (appended to line): its report hook, if it has one. */
void tg_pass_report(const tg_run_t *r, const tg_pass_stats_t *st, tg_json_t *j, char *line,
                    size_t len);
/* The pass's part of the human epoch line, appended to line: "; io R req, X read / Y needed,
 * wait W, hit ratio H" (with I/O figures; needed: the bytes the batches needed), then the
 * strategy's part (tg_pass_report), then the neighbour cache's hit ratio. */
void tg_pass_line(const tg_run_t *r, const tg_pass_stats_t *st, uint64_t needed, char *line,
                  size_t len);

/* ---------------------------------------------------------------- the kit's pass helpers
 *
 * The counting adjacency (graph/adj-counting.h) wraps every strategy's adjacency; the loader
 * options of a pass are engine/pipeline.c's; the gather pass is engine/gather.c. */

/* Gathers one batch's rows into X for loader-based strategies. */
typedef int (*tg_gather_fn)(void *ctx, const tg_batch_t *b, float *X);

/* The loader options of a pass (its seeds, batches, fanouts, resume point) over adj; hooks
 * are left unset. */
tg_sloader_opts_t tg_pass_sloader_opts(const tg_pass_t *p, tg_adj_t *adj, int sampler_threads,
                                       size_t prefetch);

/* A pass on the pipeline (engine/pipeline.h) whose sampler threads gather each batch's rows right
 * after sampling (prefetch batches ahead per thread); the trainer runs the steps in id order. The
 * process's own I/O over the pass (tg_proc_io_t, io/proc-io.h) goes into st: for strategies
 * whose reads the io/ layer does not see (rows in RAM, a mapped file). */
int tg_gather_pass(tg_run_t *r, const tg_pass_t *p, int sampler_threads, size_t prefetch,
                   tg_gather_fn gather, void *gctx, tg_pass_stats_t *st);
/* The matrices in flight of tg_gather_pass with that many sampler threads and prefetch. */
int tg_gather_pass_in_flight(int sampler_threads, size_t prefetch);

/* st->io_* = the process's own I/O between a and b (major faults as requests). */
void tg_proc_io_delta(const tg_proc_io_t *a, const tg_proc_io_t *b, tg_pass_stats_t *st);

/* ---------------------------------------------------------------- the whole-process budget
 *
 * --mem is everything the process holds (engine/budget.c): before the first pass the run samples
 * the first batches, measures one step's activations on the largest with a scratch model, and
 * reserves the process's own memory, the model, the activations and the strategy's batches in
 * flight; the strategy's caches take what is left. A plan without a model (the pull loader,
 * tiergnn/loader.h) reserves the batches its caller holds in place of the model and the
 * activations. */

typedef struct tg_budget_plan_opts {
    const tg_plan_t *plan; /* at the first epoch to run: its first batches are measured */
    int num_layers;
    const int64_t *fanouts;
    const tg_sampler_i *sampler;    /* NULL = node-wise */
    const tg_optim_config_t *optim; /* NULL: Adam's defaults (evaluation: no optimiser) */
    uint64_t first_batch; /* the batches measured start here (a rank's share); 0: the first */
    /* 1: measure the plan's batches, sampled from r->adj, even when the strategy makes its own
     * training batches (profile_batch): for passes that take the plan's */
    int plan_batches;
    /* Batches the caller holds besides the strategy's in flight (the loader's slots), what one
     * of them takes as a function of the largest measured batch (the margin is added), and
     * their name in a refusal ("max_held 2 held batches"). 0 / NULL: none. */
    uint64_t held;
    uint64_t (*held_bytes)(void *ctx, const tg_batch_t *largest);
    void *held_ctx;
    const char *held_what;
} tg_budget_plan_opts_t;

typedef struct tg_budget_plan {
    uint64_t limit;       /* the budget (0: none, nothing reserved) */
    uint64_t overhead;    /* the process: binary, libraries, BLAS buffers, stacks (measured) */
    uint64_t model;       /* parameters, gradients, optimiser state */
    uint64_t activations; /* one step's arena on the largest profiled batch, with a margin */
    uint64_t batch_x;     /* one input matrix of that batch, with a margin */
    uint64_t in_flight;   /* matrices the strategy holds at once */
    uint64_t held;        /* batches the caller holds (opts.held) */
    uint64_t held_each;   /* one of them, with a margin */
    uint64_t reserved;    /* all of the above */
    uint64_t data;        /* the run's data before the plan (labels, splits, graph, stores) */
    uint64_t rest;        /* what is left for the strategy's caches and buffers */
    uint32_t batch_nodes; /* input nodes of the largest profiled batch */
    double profile_s;
} tg_budget_plan_t;

/* The budget a run uses: mem_bytes, lowered to the cgroup's limit less a margin when that is
 * smaller (or taken from it when mem_bytes is 0); why says so when the cgroup decided. */
uint64_t tg_budget_effective(uint64_t mem_bytes, uint64_t cgroup_limit, char *why, size_t len);
/* An estimate of what the model with its optimiser state, one step's activations, in_flight
 * input matrices and the process take, before any batch exists, from the model and sampler as
 * configured (node-wise: the expected union of the draws; a bounded sampler: its bound): used
 * by the automatic choice of strategy. On the safe side of what tg_budget_plan measures, within
 * about 2x of it (test_budget_estimate). */
uint64_t tg_budget_estimate(const tg_model_config_t *cfg, uint64_t num_nodes, uint64_t batch_size,
                            const tg_sampler_i *sampler, const int64_t *fanouts, int in_flight);
/* Refuses (-ENOMEM naming the sizes and the --mem needed) a model whose parameters, gradients
 * and optimiser state alone (model_bytes, tg_model_config_param_bytes) do not fit beside the
 * data the run holds: checked before the model is created, and before a batch is measured with
 * a second one. */
int tg_budget_check_model(const tg_run_t *r, uint64_t model_bytes);
/* Measures and reserves (see above). m NULL: a plan without a model (no model, no activations;
 * the held batches instead). -ENOMEM naming every part and the --mem needed when the budget
 * cannot hold the model (or the held batches) and the batches beside the data. No-op without a
 * budget. */
int tg_budget_plan(tg_run_t *r, const tg_model_t *m, const tg_budget_plan_opts_t *o,
                   tg_budget_plan_t *p);

/* ---------------------------------------------------------------- checkpoints */

/* Fills the dataset identity of info from ds. */
void tg_ckpt_identity(tg_ckpt_info_t *info, const tg_dataset_t *ds);
/* -EINVAL naming every difference if info was made on another dataset than ds. */
int tg_ckpt_check_dataset(const tg_ckpt_info_t *info, const tg_dataset_t *ds, const char *path);
/* Serialises info + model into a malloc'd buffer (the bytes tg_ckpt_write puts in a file). */
int tg_ckpt_serialize(const tg_ckpt_info_t *info, const tg_model_t *m, char **buf, size_t *len);
/* Writes info + model to path atomically (path.tmp, fsync, rename, fsync dir). */
int tg_ckpt_write(const char *path, const tg_ckpt_info_t *info, const tg_model_t *m);
/* Reads the engine record from f (positioned at the start); leaves f after it. */
int tg_ckpt_read_record(FILE *f, const char *path, tg_ckpt_info_t *info);

/* ---------------------------------------------------------------- layer-wise forward */

/* Receives the final layer's output for a chunk of targets: logits (n, out_dim) and, when asked,
 * embeddings (n, embed_dim); pos is ids[0]'s position in the final layer's list (the targets, or
 * every node in id order). */
typedef int (*tg_lw_sink_fn)(void *ctx, uint64_t pos, const uint64_t *ids, size_t n,
                             const float *logits, const float *emb);

typedef struct tg_lw_opts {
    uint64_t chunk;          /* destination nodes per chunk (>= 1) */
    const char *tmp_dir;     /* NULL: intermediate layers in RAM; else temporary files there */
    const uint64_t *targets; /* nodes of the final layer, NULL = all nodes in id order */
    uint64_t num_targets;
    int want_emb;
    tg_lw_sink_fn sink;
    void *ctx;
    /* Under K > 1 ranks (tiergnn/dist.h) every rank computes its share of each layer's chunks and
     * the ranks exchange the layer's rows. The final layer: sink_root 0, each rank's sink sees its
     * own share of the targets (evaluation sums them after); 1, rank 0's sink sees every target
     * in order, after the final layer's rows were exchanged too, and the others' sinks nothing
     * (inference writes one file). Every rank must call with the same options. */
    int sink_root;
    const char *progress_label; /* NULL: no progress bar */
} tg_lw_opts_t;

/* Full-neighbour forward of every layer: layers 0..L-2 for all nodes (each layer's output is the
 * next one's input), the last layer for the targets only. chunk 0 = tg_lw_auto_chunk. (collective
 * under K > 1 ranks: see sink_root; an error is every rank's.) A strategy
 * in RAM (TG_STRAT_IN_RAM) gathers layer 0 from r->store; any other reads features.bin, and a
 * layer kept in a file, through a row file (tiergnn/store.h) within r->budget, whatever the
 * strategy. With tmp_dir, an intermediate layer stays in RAM when the budget holds it. */
int tg_lw_forward(tg_run_t *r, tg_model_t *m, const tg_lw_opts_t *o);
/* Nodes per chunk when none is given, the same for every strategy (the chunk decides the GEMM
 * shapes): as many as make about 64 MiB of input rows, at most 65536. */
uint64_t tg_lw_auto_chunk(const tg_run_t *r, const tg_model_t *m);

/* ---------------------------------------------------------------- evaluation */

typedef struct tg_split_eval {
    double acc, loss;
    uint64_t count;
} tg_split_eval_t;

/* How to evaluate. */
typedef struct tg_eval_how {
    int sampled;            /* mini-batches with fanouts (through the strategy) vs layer-wise */
    const int64_t *fanouts; /* sampled: per layer */
    uint64_t batch_size;    /* sampled */
    uint64_t seed;          /* sampled: the eval RNG stream is derived from it */
    uint64_t chunk;         /* layer-wise: nodes per chunk (0 = tg_lw_auto_chunk) */
    const char *tmp_dir;    /* layer-wise: intermediate layers in files there (NULL: RAM) */
    uint64_t max_nodes;     /* evaluate at most this many nodes per split (0 = all) */
    tg_pass_stats_t *stats; /* sampled: summed pass figures (may be NULL) */
} tg_eval_how_t;

/* Evaluates m on the splits flagged in want[3] (train, valid, test). */
int tg_run_evaluate_how(tg_run_t *r, tg_model_t *m, const int want[3], const tg_eval_how_t *h,
                        tg_split_eval_t out[3]);
/* tg_run_evaluate_how with the settings as arguments: layer-wise in RAM unless sampled. */
int tg_run_evaluate(tg_run_t *r, tg_model_t *m, const int want[3], int sampled,
                    const int64_t *fanouts, uint64_t batch_size, uint64_t seed, uint64_t chunk,
                    tg_split_eval_t out[3]);

#endif
