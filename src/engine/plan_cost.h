/* plan_cost.h - the cost model: a predicted epoch per strategy from measured figures.
 *
 *     tg_cost_inputs_t in = {0};        // the machine, the dataset, the run, a profile
 *     ... fill in (the device probe, rates, --mem's split, the profile's miss curves) ...
 *     tg_cost_pred_t pred[TG_COST_MAX_STRATS];
 *     int best;
 *     if (tg_cost_choose(&in, 0, pred, TG_COST_MAX_STRATS, &best) < 0) ... tg_errmsg() ...
 *     // pred[i] is the table's strategy i; best is the fastest exact one that can run
 *
 * Every strategy that has a predict hook (tg_strategy_i.predict) turns the same inputs into its
 * epoch: what its pipeline reads from the disk (from the profile's misses at the cache size the
 * budget leaves it), the random and sequential I/O time that costs on the probed device, the CPU
 * time of sampling, gathering and training, how those overlap on the cores, and its preparation
 * (derived files it would have to build, work before the first epoch) amortised over the epochs.
 * The arithmetic they share lives here once; a strategy's predict is a few lines of its paper's
 * pipeline. Everything is pure computation over the inputs: deterministic, no I/O. */
#ifndef TG_PLAN_COST_H
#define TG_PLAN_COST_H

#include <stdint.h>

#include "tiergnn/io.h"
#include "tiergnn/util.h"

#define TG_COST_CURVE_MAX 8
#define TG_COST_MAX_STRATS 16
#define TG_COST_WHY 192
#define TG_COST_KNOBS 2

/* A measured curve y(x) at up to TG_COST_CURVE_MAX points, x increasing; read piecewise
 * linearly between points and flat beyond the ends (tg_cost_curve_at). n = 0: unknown. */
typedef struct tg_cost_curve {
    int n;
    double x[TG_COST_CURVE_MAX], y[TG_COST_CURVE_MAX];
} tg_cost_curve_t;

/* The machine, measured in the process that plans. */
typedef struct tg_cost_machine {
    tg_io_probe_t probe;     /* random 4 KiB reads/s and latency by depth; sequential bytes/s */
    double gemm_flops_per_s; /* tg_nn_gemm_rate with the run's threads (0: not timed) */
    double step_flops_per_s; /* achieved by a measured training step (tg_flops_total of its
                                batch over its seconds); 0: the GEMM rate x TG_COST_STEP_EFF */
    /* CPU-seconds a measured step took per second of its wall time: its threads' parallel
     * share (a step runs its parallel loops on --threads threads, its serial parts on one);
     * 0: 1 (one thread) */
    double step_cpu_ratio;
    double sample_nodes_per_s; /* one sampler thread, indices in RAM: input nodes per second */
    /* one thread copying and converting rows from RAM into a fresh X, its first-touch page
     * faults included (each batch's X is a new allocation) */
    double gather_rows_per_s;
    /* one thread walking neighbour-list entries and keeping those in a node set (a bitmap test,
     * the kept node's part found by binary search over the parts' bounds): hier's mega-batch
     * load, per list entry; 0: not measured (the load's CPU left out) */
    double filter_edges_per_s;
    /* one thread copying large blocks of memory (memcpy between two 16 MiB buffers, warm): what
     * a loader's buffered reads cost it beyond the disk, copying out of the page cache (hier's
     * mega-batches); 0: not measured (no copy term) */
    double copy_bytes_per_s;
    /* one thread reading a file sequentially with buffered reads, cold (the page cache's
     * read-ahead, the copy out of it included): hier's mega-batch loads; 0: not measured (the
     * probe's sequential rate and the copy rate) */
    double buffered_bytes_per_s;
    /* one thread serving rows already in a feature buffer (tiergnn/featbuf.h) into a fresh X:
     * acquire, copy, release, with the LRU policy (buffer_rows_per_s) or with WINDOW and its
     * look-ahead trace announced and retired (window_rows_per_s: GIDS's window buffering);
     * 0: not measured (the gather rate) */
    double buffer_rows_per_s, window_rows_per_s;
    /* The same step timed while `sharers` more threads gather beside it (the run's sampler
     * threads), as a loader's threads do during an epoch: the step's wall time over its time
     * alone (step_shared, >= 1), and the share of its lone rate each gathering thread kept
     * meanwhile (gather_shared, 0..1: rows per wall second over gather_rows_per_s).
     * 0: not measured (the CPU terms spread evenly over the cores). */
    double step_shared, gather_shared;
    int sharers;
    int cores;
} tg_cost_machine_t;

/* Derived files that exist already (tg_cost_dataset_t.derived); a strategy that needs one that
 * does not is charged for building it. */
enum {
    TG_COST_HAVE_PARTS = 1,  /* hier's partitioned copy */
    TG_COST_HAVE_RANK = 2,   /* gids's reverse PageRank ranking */
    TG_COST_HAVE_OUTDEG = 4, /* pagraph's and ginex's out-degree counts */
    TG_COST_HAVE_NCACHE = 8  /* ginex's neighbour cache file */
};

typedef struct tg_cost_dataset {
    uint64_t nodes, edges; /* edges: entries of indices.bin */
    uint32_t feat_dim;     /* features per row */
    uint32_t dtype_bytes;  /* bytes per feature in the file (4: f32, 2: f16) */
    uint32_t index_bytes;  /* bytes per entry of indices.bin */
    double train_frac;     /* training nodes / nodes */
    double degree_skew;    /* share of the edges held by the 1% highest in-degree nodes */
    unsigned derived;      /* TG_COST_HAVE_* */
} tg_cost_dataset_t;

typedef struct tg_cost_run {
    double epoch_flops; /* forward + backward operations of an epoch: tg_model_batch_flops
                           (tg_flops_total) over the profiled batches, x batches / profiled */
    uint64_t batch_size;
    int epochs;
    int sampler_threads; /* >= 1 */
    /* --mem after the budget plan's process, model and activations: what a strategy's input
     * matrices in flight and its caches share (each predict takes its matrices off first) */
    uint64_t free_bytes;
    uint64_t matrix_bytes; /* one input matrix of the largest profiled batch */
    /* what the page cache may fill beside the budget: the cgroup's limit less the budget (the
     * kernel's margin, which mapped pages take too); 0 without a cgroup limit */
    uint64_t cache_slack;
    uint64_t disk_budget; /* --disk-budget (0: the feature file's size) */
    uint64_t disk_free;   /* free bytes beside the dataset */
} tg_cost_run_t;

/* A strategy's own batches, where they are not the whole graph's (hier's come from a
 * mega-batch's subgraph): measured by its plan_measure hook (engine-impl.h) as its run would
 * form them. batches = 0: not measured (predict takes the profile's batches). */
typedef struct tg_cost_own {
    double batches;         /* per epoch */
    double rows_per_batch;  /* distinct input rows per batch (mean) */
    double flops_per_batch; /* forward + backward operations per batch (mean) */
    double groups;          /* the units the strategy loads per epoch (hier: mega-batches) */
    double group_size;      /* each unit's size (hier: parts per mega-batch, N_d) */
    double load_share;      /* of its data, what an epoch loads (< 1: --batches-per-epoch) */
    /* a training step on its largest measured batch, timed as the whole graph's (forward +
     * backward operations per second); 0: not timed (the whole graph's rate) */
    double step_flops_per_s;
    /* its loader's bytes per second over one real load of a unit (hier: tg_mb_load of the
     * measured mega-batch: its reads, the copy out of the page cache and the list walk);
     * 0: not timed (the buffered read, copy and filter rates) */
    double load_bytes_per_s;
} tg_cost_own_t;

/* A short profile: a few batches of the epoch sampled with the run's RNG, scaled to the epoch. */
typedef struct tg_cost_profile {
    uint64_t batches;             /* per epoch */
    double rows_per_batch;        /* distinct input rows per batch (mean) */
    double index_reads_per_batch; /* neighbour lists the samplers read per batch */
    double index_bytes_per_batch; /* index bytes they ask for per batch */
    /* distinct 4 KiB pages of the feature file and of the index file a batch touches (its rows'
     * pages, its lists' pages); 0: not measured (mmap's model takes rows placed at random) */
    double feat_pages_per_batch, index_pages_per_batch;
    double distinct_rows;       /* distinct rows over the epoch (reuse across batches) */
    tg_cost_curve_t belady;     /* epoch misses of a Belady cache vs its rows (changeset sim.) */
    tg_cost_curve_t lru;        /* epoch misses of an LRU cache vs its rows */
    tg_cost_curve_t hot_degree; /* share of row accesses the R highest out-degree rows serve */
    tg_cost_curve_t hot_rpr;    /* the same for the R highest by reverse PageRank */
    tg_cost_curve_t ncache_hit; /* share of list reads a neighbour cache of B bytes serves */
    /* distinct rows t consecutive batches use (a superbatch's, a window's); n = 0: unknown */
    tg_cost_curve_t window_rows;
    double induced_degree_frac; /* hier: mean in-degree kept in a mega-batch (static cache
                                   included) / the graph's; 0: unknown (taken as 1) */
    tg_cost_own_t own;          /* hier: its batches inside a mega-batch */
    double layout_read_ampl;    /* diskgnn: the layout's read estimate at the disk budget
                                   (bytes read / needed); 0: unknown (taken as 1) */
} tg_cost_profile_t;

typedef struct tg_cost_inputs {
    tg_cost_machine_t machine;
    tg_cost_dataset_t data;
    tg_cost_run_t run;
    tg_cost_profile_t prof;
} tg_cost_inputs_t;

/* One strategy's predicted epoch, its terms, and why. */
typedef struct tg_cost_pred {
    int predicted;     /* its predict ran (0: the strategy has none; why says so) */
    int feasible;      /* it can run with these inputs (0: why says what is missing) */
    double epoch_s;    /* the predicted epoch over the run: steady_s + prep_s */
    double steady_s;   /* an epoch after the first, preparation left out */
    double read_bytes; /* from the disk per epoch */
    double io_s;       /* the disk's busy time per epoch (random + sequential) */
    double row_io_s;   /* of io_s, the feature rows' reads (tg_cost_disk_epoch) */
    double reads;      /* requests to the disk per epoch (tg_cost_disk_epoch; 0: not counted) */
    double sample_s;   /* sampling, CPU seconds summed over threads */
    double gather_s;   /* rows into X (and the strategy's own copying), CPU seconds */
    double compute_s;  /* training steps, wall time */
    /* the slowest pipeline stage alone: its CPU seconds over the threads that run it (a stage
     * on fewer threads than cores can bound the epoch); 0: none */
    double stage_s;
    /* of stage_s, the time its thread computes rather than waits on the disk: beside the steps
     * it runs at the machine's gather_shared of its pace alone (tg_cost_overlap) */
    double stage_cpu_s;
    double prep_s; /* preparation per epoch: derived files and first-epoch work / epochs */
    double cpu_s;  /* every CPU term summed, the steps' at their CPU (tg_cost_compute_cpu_s) */
    /* bytes of --mem its first pass needs beyond its least working set (min_bytes), from the
     * run's batches (a strategy that sizes buffers by the batch); 0: none. The planner refuses
     * a strategy whose working set and these do not fit what --mem leaves. */
    double least_extra;
    /* the strategy options this prediction planned (name: the option without "--", NULL where
     * unused; value as the option parses it): a run of the strategy takes each one its options
     * do not give (tg_cost_plan_args), so that it runs what was predicted */
    struct {
        const char *name;
        int64_t value;
    } knobs[TG_COST_KNOBS];
    char why[TG_COST_WHY];
} tg_cost_pred_t;

/* Training at this share of the GEMM rate when no step was measured (aggregation, element-wise
 * work and small GEMMs run below the rate of one large GEMM). */
#define TG_COST_STEP_EFF 0.25

/* 0, or -EINVAL naming the first input that cannot be used (zero bandwidth, no cores...). */
int tg_cost_check(const tg_cost_inputs_t *in);

/* ---- shared arithmetic (each O(1) but the merge, O(gap rows)) */

double tg_cost_curve_at(const tg_cost_curve_t *c, double x);
/* Random 4 KiB reads per second at depth d, read off the probe (linear in log2 depth, never
 * fewer than at a shallower probed depth). */
double tg_cost_iops(const tg_cost_machine_t *m, double depth);
/* The probe's best depth (its default for io/). */
double tg_cost_best_depth(const tg_cost_machine_t *m);
/* Disk time of reads random requests of about the same size carrying bytes in all, kept depth
 * deep: each costs its access (the probe's rate at that depth, measured with 4 KiB reads) and
 * the transfer of its bytes beyond those 4 KiB at the sequential rate (a merged read of 64 KiB
 * takes about four 4 KiB reads' time on the shared bench's disk, not one). */
double tg_cost_random_s(const tg_cost_machine_t *m, double reads, double bytes, double depth);
/* A strategy's one reading thread (ginex's executor, gids's extractor) keeping depth reads in
 * flight: the disk time of all the epoch's reads (p->reads, p->read_bytes) at that depth, never
 * less than its own reads' (p->row_io_s: tg_cost_random_s's transfer term taken apart). The
 * samplers' list reads queue on the same device and come a layer's lists at a time between their
 * sampling, adding few reads in flight: the planner's narrow workload read at 54.5k/s under
 * ginex, the probe's rate at about 24 in flight, against 85k/s at the depths summed. */
double tg_cost_reader_s(const tg_cost_inputs_t *in, const tg_cost_pred_t *p, double depth);
double tg_cost_seq_s(const tg_cost_machine_t *m, double bytes);
/* Reads and bytes of one batch's rows missing from RAM, spread uniformly over a file of rows,
 * merged as store/extract plans it: holes below the probe's gap read through, runs cut at the
 * largest merged read. */
void tg_cost_merge(const tg_cost_inputs_t *in, double rows, double *reads, double *bytes);
/* Disk time of a static tier's fill (tg_tier_static_create) of rows spread uniformly over the
 * feature file: holes of at most TG_TIER_FILL_GAP read through, TG_TIER_FILL_RUNS runs of at
 * most TG_TIER_FILL_SPAN in flight (a tier of 8% of 1 KiB rows reads most of the file). */
double tg_cost_fill_s(const tg_cost_inputs_t *in, double rows);
/* The epoch of overlapped terms: the disk's busy time, the trainer's compute, the slowest stage
 * alone (stage_s) and every CPU term spread over the cores, whichever is longest (steady_s);
 * prep_s is added to it (epoch_s). The steps count at their CPU seconds among the CPU terms
 * (their threads share the cores with the samplers and extractors). Fills p->steady_s,
 * p->epoch_s and p->cpu_s from the terms already in p. */
void tg_cost_overlap(const tg_cost_inputs_t *in, tg_cost_pred_t *p);
/* Common terms: one feature row's bytes, the file's, the epoch's row accesses, training time,
 * sampling CPU (indices in RAM), gathering CPU, bytes left for caches beside k matrices. */
double tg_cost_row_bytes(const tg_cost_inputs_t *in);
double tg_cost_feat_bytes(const tg_cost_inputs_t *in);
double tg_cost_accesses(const tg_cost_inputs_t *in);
double tg_cost_compute_s(const tg_cost_inputs_t *in);
/* CPU seconds of compute_s seconds of steps: compute_s x the measured step_cpu_ratio. */
double tg_cost_compute_cpu_s(const tg_cost_inputs_t *in, double compute_s);
double tg_cost_sample_s(const tg_cost_inputs_t *in);
double tg_cost_gather_s(const tg_cost_inputs_t *in);
/* Gathering rows rows through a feature buffer (window: with GIDS's look-ahead trace), CPU
 * seconds: at the measured buffer rate, else at the gather rate. */
double tg_cost_buffer_gather_s(const tg_cost_inputs_t *in, double rows, int window);
double tg_cost_cache_bytes(const tg_cost_inputs_t *in, int matrices);
struct tg_strategy_i;
/* The input matrices strategy s holds at once with its default options and the run's sampler
 * threads (its batches_in_flight), at most the epoch's batches: what the budget plan reserves
 * before its caches. */
int tg_cost_matrices(const struct tg_strategy_i *s, const tg_cost_inputs_t *in);
/* The sampler threads the budget plan leaves strategy s where only `fit` of its matrices fit:
 * it lowers the run's (left at their default) while that lowers the matrices in flight. */
int tg_cost_sampler_threads(const struct tg_strategy_i *s, const tg_cost_inputs_t *in, double fit);
/* The reads a strategy's extraction keeps in flight: store/extract's plan for its extractors
 * (featbuf: with a feature buffer; depth_hint: tg_extract_plan_opts_t's) at the avail bytes the
 * budget leaves it, from the profile's probe (a tight budget lowers the depth), times the
 * extractors; *plan_bytes (NULL: not wanted): what that plan and the samplers' list reads hold
 * (tg_extract_plan_bytes + the index reads' transient), which the caches do not get; *plan
 * (NULL: not wanted): the plan itself (zeroed where it cannot be made). */
struct tg_extract_plan;
double tg_cost_extract_depth(const tg_cost_inputs_t *in, int extractors, int featbuf,
                             unsigned depth_hint, double avail, double *plan_bytes,
                             struct tg_extract_plan *plan);
/* The rows a feature buffer with options fo (tiergnn/featbuf.h: the one store/extract makes
 * from a plan, tg_extract_plan_featbuf_opts, with the strategy's policy) holds in bytes: row
 * slots, their records, its node table and its policy's trace; at most every row. */
struct tg_featbuf_opts;
double tg_cost_featbuf_rows(const tg_cost_inputs_t *in, const struct tg_featbuf_opts *fo,
                            double bytes);
/* The rows a static tier of hot rows holds in room bytes, with per_row more bytes for each and
 * fixed bytes once beside it (tg_tier_static_fit: its node table included). */
double tg_cost_static_rows(const tg_cost_inputs_t *in, double room, double per_row, double fixed);
/* The bytes such a tier of rows rows reserves (tg_tier_static_bytes). */
double tg_cost_static_bytes(const tg_cost_inputs_t *in, double rows);
/* A disk strategy's epoch: rows missing from its caches (misses per epoch), read by batch with
 * merging at depth reads in flight (tg_cost_extract_depth; 0: the probe's best); index reads of
 * which a share hit_idx comes from RAM, at the samplers' depth; the CPU terms. Fills every term
 * of p and its epoch. */
void tg_cost_disk_epoch(const tg_cost_inputs_t *in, double misses, double hit_idx, double depth,
                        tg_cost_pred_t *p);
/* What a strategy that reads the indices from disk reserves when it opens, before its first
 * pass sizes anything: indptr and the samplers' read staging (tg_xpass_adj_bytes). */
double tg_cost_open_bytes(const tg_cost_inputs_t *in);
/* 1 when left bytes hold indices.bin (tg_adj_disk_load_bytes): the extracting strategies load it
 * into RAM when the budget has room after their feature caches (tg_xpass_adj_resident), and
 * their samplers then read no list from disk. */
int tg_cost_indices_fit(const tg_cost_inputs_t *in, double left);
/* An LRU cache of rows over a steady epoch (the epoch before has filled it): the profile's
 * misses (an epoch from cold) where it holds less than the file; where it holds every row, only
 * the rows the epoch before did not use (epochs as independent draws of their distinct rows). */
double tg_cost_lru_misses(const tg_cost_inputs_t *in, double rows);
/* Marks p infeasible with a reason. */
void tg_cost_infeasible(tg_cost_pred_t *p, const char *fmt, ...) TG_PRINTF(2, 3);

/* ---- over a strategy table */

/* Runs every row's predict (a row without one is left predicted = 0, with a note in why) and
 * picks the fastest feasible exact strategy, strategies that change the sampled graph only with
 * allow_inexact; ties go to the earlier row. *best = -1 when none can run (not an error). */
int tg_cost_choose_in(const struct tg_strategy_i *const *table, int n, const tg_cost_inputs_t *in,
                      int allow_inexact, tg_cost_pred_t *pred, int *best);
/* tg_cost_choose_in over the engine's table (strategies/strategy.c); pred holds max entries. */
int tg_cost_choose(const tg_cost_inputs_t *in, int allow_inexact, tg_cost_pred_t *pred, int max,
                   int *best);

#endif
