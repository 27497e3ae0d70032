/* tiergnn/bench.h - comparing strategies end to end: `tiergnn bench`.
 *
 * tg_bench runs `tiergnn train DATASET --strategy S --mem X --epochs N --json --out RUNDIR/S ...`
 * once per strategy, each in its own process, cold (every dataset file dropped from the page
 * cache first, residency checked with mincore) and, where ../shared/tools/membudget can create a
 * cgroup, under a memory limit of exactly X. X is the whole process's budget: every strategy,
 * mmap included, gets the same cgroup and the same --mem, so the rows compare strategies and
 * nothing else. It parses each run's JSON lines and writes RUNDIR/bench.csv, RUNDIR/bench.md and
 * RUNDIR/bench.svg and RUNDIR/bench.json. Beside the results it gives three lower bounds of an
 * epoch (tg_bench_bounds_t), each from the epoch sampled here with the runs' sampler, seed,
 * fanouts and batch size (tg_bench_footprint) and rates measured in the same bench:
 *   I/O:     the distinct feature bytes the epoch must read over the sequential read bandwidth
 *            (tg_io_probe_run, refreshed);
 *   Belady:  the bytes an optimal feature cache of the size the runs' budgets left for caches
 *            must still read in the epoch (store/'s changeset simulator over the epoch's trace,
 *            from an empty cache: tg_bench_belady) over the same bandwidth;
 *   compute: the epoch's forward + backward operations (tg_model_batch_flops) over the rate of
 *            the engine's GEMM with the runs' thread count (tg_nn_gemm_rate).
 * A failed run is a row of the table (status, exit status, last
 * stderr line; "oom-killed" when the cgroup's out-of-memory killer ended it) and the others
 * still run. docs/BENCH.md describes every column.
 *
 *     tg_bench_opts_t o;
 *     tg_bench_opts_default(&o);
 *     o.dataset = "data/synth"; o.strategies = "mmap,gnndrive"; o.mem_bytes = 512 << 20;
 *     o.out_dir = "runs/bench1";
 *     tg_bench_result_t r;
 *     if (tg_bench(&o, &r) < 0) die(tg_errmsg());       // the bench itself failed
 *     if (r.failed) ...                                    // some strategy runs failed
 *
 * Module: bench/ uses engine/ (its strategy table; the runs are `tiergnn train` processes),
 * graph/, data/, io/, nn/ (the operation count, the GEMM rate) and store/ (the changeset
 * simulator); only the CLI uses it.
 */
#ifndef TIERGNN_BENCH_H
#define TIERGNN_BENCH_H

#include <stdint.h>

#include "tiergnn/graph.h"
#include "tiergnn/nn.h"

#ifdef __cplusplus
extern "C" {
#endif

/* What one epoch reads: the batches of epoch `epoch` (0-based) sampled exactly as a training run
 * with these settings samples them (seed order from tg_sampler_shuffle_epoch, batch b with
 * tg_sampler_batch_rng(seed, epoch, b), whole-graph mode when batch_size is 0 or covers the
 * training split and every fanout is -1; an MLP samples no neighbours). */
typedef struct tg_bench_footprint_opts {
    tg_model_type_t model; /* TG_MODEL_MLP samples no neighbours */
    int num_layers;
    int64_t fanouts[TG_MAX_LAYERS];
    const tg_sampler_i *sampler; /* NULL = node-wise (tiergnn/graph.h) */
    uint64_t batch_size;         /* 0 = full batch */
    uint64_t seed;
    uint64_t epoch;       /* 0-based */
    uint64_t max_batches; /* the first batches of the epoch only (--batches-per-epoch; 0 = all) */
    int threads;          /* sampling threads (the result does not depend on it) */
    /* The model's widths, for the operation count: hidden 0 = no count. The input width and
     * the classes are the dataset's; the rest is tg_model_config_default's, as train has it. */
    uint32_t hidden;
    int heads;
    int want_trace; /* 1: keep the epoch's trace (trace_off, trace_ids; tg_bench_footprint_free) */
} tg_bench_footprint_opts_t;

typedef struct tg_bench_footprint {
    uint64_t batches;
    uint64_t distinct_nodes;  /* nodes whose feature row the epoch needs at least once */
    uint64_t batch_nodes;     /* sum over batches of their input nodes: rows gathered when
                                 nothing is reused across batches */
    uint64_t max_batch_nodes; /* the largest batch's input nodes */
    uint64_t max_batch_edges; /* its edges over all blocks */
    uint64_t row_bytes;       /* bytes of one feature row on disk */
    uint32_t max_batch_dst0;  /* the largest batch's layer-0 destinations (its widest GEMM) */
    int whole_graph;
    uint64_t num_nodes;
    int have_flops;   /* o->hidden > 0 */
    tg_flops_t flops; /* the epoch's training steps, summed over its batches */
    /* With want_trace: the input node ids of batch b, in batch order, are
     * trace_ids[trace_off[b] .. trace_off[b + 1]) (4 bytes per access, 8 per batch). */
    uint64_t *trace_off;
    uint32_t *trace_ids;
} tg_bench_footprint_t;

/* Samples the epoch over a memory-mapped adjacency (tg_adj_mmap_open; RAM: indptr, one bit per
 * node, the samplers' scratch, and the trace if asked: while the threads' parts are joined, at
 * most 4 bytes per access more) and counts. Node ids of a trace must fit 32 bits (-EOVERFLOW).
 * Time: one epoch of sampling, split over o->threads. */
int tg_bench_footprint(const char *dataset, const tg_bench_footprint_opts_t *o,
                       tg_bench_footprint_t *out);
/* Frees the trace (a footprint without one, or zeroed: fine). */
void tg_bench_footprint_free(tg_bench_footprint_t *fp);

/* Misses of a Belady-optimal cache of `entries` rows over the footprint's trace, starting empty
 * (tg_cs_compute). RAM: the simulator's 8 bytes per node, 4 per access, 8 per cache row (at most
 * the distinct nodes) and up to 12 per miss (its changesets), all freed before it returns. */
int tg_bench_belady(const tg_bench_footprint_t *fp, uint64_t entries, uint64_t *misses);

/* The three lower bounds of one epoch (NAN where one could not be had; the report says why). */
typedef struct tg_bench_bounds {
    double seq_bytes_per_s;  /* sequential O_DIRECT read bandwidth (the device probe) */
    double distinct_bytes;   /* the footprint's distinct rows x row bytes */
    double io_s;             /* I/O bound: distinct_bytes / seq_bytes_per_s */
    uint64_t cache_bytes;    /* what the budget left for caches (see cache_from) */
    uint64_t cache_entries;  /* cache_bytes / row bytes */
    uint64_t accesses;       /* the trace's length: rows the epoch's batches ask for */
    uint64_t belady_misses;  /* of a Belady-optimal cache of cache_entries rows, from empty */
    double belady_bytes;     /* belady_misses x row bytes */
    double belady_s;         /* Belady bound: belady_bytes / seq_bytes_per_s */
    double belady_sim_s;     /* time of sampling the trace and simulating */
    double epoch_flops;      /* forward + backward operations of the epoch's steps */
    double gemm_flops_per_s; /* tg_nn_gemm_rate with the runs' threads */
    uint32_t gemm_m, gemm_k, gemm_n;
    double compute_s; /* compute bound: epoch_flops / gemm_flops_per_s */
} tg_bench_bounds_t;

typedef struct tg_bench_opts {
    const char *dataset;
    /* "a,b,c": names passed to train --strategy; NULL = every strategy of the engine's table */
    const char *strategies;
    uint64_t mem_bytes;  /* X: --mem of every run and its cgroup limit (> 0) */
    uint64_t epochs;     /* >= 1 */
    const char *out_dir; /* RUNDIR; RUNDIR/<strategy> must not exist unless overwrite */
    int overwrite;       /* remove existing RUNDIR/<strategy> folders first */
    /* The tiergnn binary every run starts (required; the CLI gives its own path). It must answer
     * `--version` with "tiergnn VERSION": a program embedding the library never runs itself. */
    const char *exe;
    /* ../shared/tools/membudget: a path; NULL = look for it (docs/BENCH.md says where);
     * "none" = run without a cgroup limit */
    const char *membudget;
    int no_evict;        /* 1: do not drop the dataset from the page cache before each run */
    double probe_time_s; /* device probe time (0 = 1.5 s) */
    double gemm_time_s;  /* time of the GEMM rate measurement (0 = 1 s) */
    /* The runs' settings that decide what is sampled; they must agree with the flags in
     * train_args (cmd_bench parses both from one command line). */
    tg_model_config_t model; /* type, num_layers, hidden, heads (the rest is the runs') */
    int64_t fanouts[TG_MAX_LAYERS];
    const tg_sampler_i *sampler; /* NULL = node-wise */
    uint64_t batch_size;
    uint64_t seed;
    uint64_t batches_per_epoch; /* the runs train the first N batches of each epoch (0 = all) */
    int threads;                /* the runs' compute threads: the footprint's sampling threads
                                   and the GEMM rate's (>= 1) */
    /* Extra arguments appended to every `tiergnn train` command line, verbatim. Unless they
     * contain --eval-every or --checkpoint-every, "--eval-every 0 --checkpoint-every 0" are
     * added (evaluate and checkpoint after the last epoch only: neither is in the epoch time,
     * but they cost bench time). */
    char *const *train_args;
    int num_train_args;
} tg_bench_opts_t;

typedef struct tg_bench_result {
    int runs, failed;      /* strategy runs, and how many of them did not succeed */
    int oom_killed;        /* of the failed: ended by the cgroup's out-of-memory killer */
    int cgroup_limited;    /* 1 if the runs ran under a cgroup limit */
    uint64_t cgroup_limit; /* bytes (= mem_bytes), 0 without a limit */
    tg_bench_footprint_t footprint;
    double seq_bytes_per_s; /* probe; 0 if the probe failed */
    double lower_bound_s;   /* distinct feature bytes / seq_bytes_per_s; NAN without a probe */
    tg_bench_bounds_t bounds;
} tg_bench_result_t;

/* Defaults: every strategy, 3 epochs, GraphSAGE 2 layers hidden 256, fanouts 10,10, batch 1024,
 * seed 0, 1 thread, probe 1.5 s, GEMM rate 1 s. */
void tg_bench_opts_default(tg_bench_opts_t *o);
/* Runs the bench (see above). Returns 0 when the reports were written, whatever the runs did
 * (res->failed counts the failures); a negative code when the bench itself could not run. */
int tg_bench(const tg_bench_opts_t *o, tg_bench_result_t *res);

#ifdef __cplusplus
}
#endif
#endif
