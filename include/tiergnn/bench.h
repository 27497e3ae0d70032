/* tiergnn/bench.h - comparing strategies end to end: `tiergnn bench`.
 *
 * tg_bench runs `tiergnn train DATASET --strategy S --mem X --epochs N --json --out RUNDIR/S ...`
 * once per strategy, each in its own process, cold (every dataset file dropped from the page
 * cache first, residency checked with mincore) and, where ../shared/tools/membudget can create a
 * cgroup, under a memory limit of exactly X. X is the whole process's budget: every strategy,
 * mmap included, gets the same cgroup and the same --mem, so the rows compare strategies and
 * nothing else. It parses each run's JSON lines and writes RUNDIR/bench.csv, RUNDIR/bench.md and
 * RUNDIR/bench.svg. Beside the results it prints the I/O lower bound of an epoch: the distinct
 * feature bytes the epoch must read (sampled here with the runs' sampler, seed, fanouts and
 * batch size: tg_bench_footprint) over the sequential read bandwidth measured in the same bench
 * (tg_io_probe_run, refreshed). A failed run is a row of the table (status, exit status, last
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
 * graph/, data/ and io/; only the CLI uses it.
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
    uint64_t batch_size; /* 0 = full batch */
    uint64_t seed;
    uint64_t epoch;       /* 0-based */
    uint64_t max_batches; /* the first batches of the epoch only (--batches-per-epoch; 0 = all) */
    int threads;          /* sampling threads (the result does not depend on it) */
} tg_bench_footprint_opts_t;

typedef struct tg_bench_footprint {
    uint64_t batches;
    uint64_t distinct_nodes;  /* nodes whose feature row the epoch needs at least once */
    uint64_t batch_nodes;     /* sum over batches of their input nodes: rows gathered when
                                 nothing is reused across batches */
    uint64_t max_batch_nodes; /* the largest batch's input nodes */
    uint64_t max_batch_edges; /* its edges over all blocks */
    uint64_t row_bytes;       /* bytes of one feature row on disk */
    int whole_graph;
} tg_bench_footprint_t;

/* Samples the epoch over a memory-mapped adjacency (tg_adj_mmap_open; RAM: indptr, one bit per
 * node, the samplers' scratch) and counts. Time: one epoch of sampling, split over o->threads. */
int tg_bench_footprint(const char *dataset, const tg_bench_footprint_opts_t *o,
                       tg_bench_footprint_t *out);

typedef struct tg_bench_opts {
    const char *dataset;
    /* "a,b,c": names passed to train --strategy; NULL = every strategy of the engine's table */
    const char *strategies;
    uint64_t mem_bytes;  /* X: --mem of every run and its cgroup limit (> 0) */
    uint64_t epochs;     /* >= 1 */
    const char *out_dir; /* RUNDIR; RUNDIR/<strategy> must not exist unless overwrite */
    int overwrite;       /* remove existing RUNDIR/<strategy> folders first */
    const char *exe;     /* the tiergnn binary; NULL = /proc/self/exe */
    /* ../shared/tools/membudget: a path; NULL = look for it (docs/BENCH.md says where);
     * "none" = run without a cgroup limit */
    const char *membudget;
    int no_evict;        /* 1: do not drop the dataset from the page cache before each run */
    double probe_time_s; /* device probe time (0 = 1.5 s) */
    /* The runs' settings that decide what is sampled; they must agree with the flags in
     * train_args (cmd_bench parses both from one command line). */
    tg_model_config_t model; /* type and num_layers (the rest is the runs' business) */
    int64_t fanouts[TG_MAX_LAYERS];
    uint64_t batch_size;
    uint64_t seed;
    uint64_t batches_per_epoch; /* the runs train the first N batches of each epoch (0 = all) */
    int threads;                /* sampling threads of the footprint (>= 1) */
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
} tg_bench_result_t;

/* Defaults: every strategy, 3 epochs, GraphSAGE 2 layers, fanouts 10,10, batch 1024, seed 0,
 * 1 thread, probe 1.5 s. */
void tg_bench_opts_default(tg_bench_opts_t *o);
/* Runs the bench (see above). Returns 0 when the reports were written, whatever the runs did
 * (res->failed counts the failures); a negative code when the bench itself could not run. */
int tg_bench(const tg_bench_opts_t *o, tg_bench_result_t *res);

#ifdef __cplusplus
}
#endif
#endif
