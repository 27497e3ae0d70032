/* plan_profile.h - the planner: measures the cost model's inputs (plan_cost.h) for a run and
 * picks its strategy; `tiergnn plan` and `train --strategy auto` print the same table.
 *
 *     tg_cost_plan_opts_t o;
 *     tg_cost_plan_opts_default(&o);
 *     o.dataset = "data/g4m"; o.mem_bytes = 1200 << 20; ... the run's model, fanouts, batch ...
 *     tg_cost_plan_t pl;
 *     if (tg_cost_plan(&o, &pl) < 0) ... tg_errmsg() ...   // the profile could not run
 *     tg_cost_plan_print(&pl, stdout);                      // the table and the choice
 *     // pl.best: the table's index of the fastest exact strategy (-1: none can run)
 *
 * The profile measures, in this process:
 *   the machine: the device probe under features.bin (io/probe.c, its cache when there is one),
 *     the GEMM rate with the run's threads at the run's widest layer, the sampler's rate (a
 *     profiled batch sampled again, its lists now in RAM), the gather rate (rows copied and
 *     converted from a RAM buffer into a matrix), the cores (the run's threads);
 *   the dataset: meta.txt, the degree distribution (from indptr), the training fraction, which
 *     derived files exist (TG_COST_HAVE_*), the free disk beside the dataset;
 *   the run: the model's operations over the profiled batches, --mem less an estimate of what
 *     the budget plan reserves before the caches (tg_budget_estimate), --disk-budget;
 *   the first batches of the run's first epoch, sampled with its RNG (the plan's seeds and
 *     streams): rows, neighbour lists and index bytes per batch, and the rows' accesses by
 *     degree. The epoch's reuse is extrapolated from them (tg_cost_bins_curves): a few batches
 *     of an epoch of tens show little of the reuse across batches that decides cache misses, so
 *     the per-batch access probability of the nodes of each degree class (measured) stands in
 *     for each node's, and the epoch's distinct rows, LRU misses (Che's approximation) and
 *     optimal misses (the static best cache, which is what an optimal policy converges to when
 *     batches are independent draws) follow from it at every cache size.
 * Bounded: tg_cost_profile_batches of the epoch (about 5% of its batches, each at most a
 * batch's share of an epoch's sampling, which any strategy's epoch includes), and sampling stops
 * after max_s seconds whatever is left. */
#ifndef TG_PLAN_PROFILE_H
#define TG_PLAN_PROFILE_H

#include <stdint.h>
#include <stdio.h>

#include "plan_cost.h"
#include "tiergnn/engine.h"
#include "tiergnn/graph.h"
#include "tiergnn/nn.h"

/* The share of an epoch's batches the profile samples, and its time limit's default. */
#define TG_COST_PROFILE_SHARE 0.05
#define TG_COST_PROFILE_MAX_S 30.0

enum {
    TG_COST_OWN_ALL = 0, /* every strategy's (tiergnn plan, tiergnn bench: the whole table) */
    TG_COST_OWN_TAKEN,   /* those the choice may take (no inexact one without allow_inexact) */
    TG_COST_OWN_NONE     /* none (a named strategy's options planned) */
};

typedef struct tg_cost_plan_opts {
    const char *dataset;
    tg_model_config_t model; /* type, num_layers, hidden, heads (the rest: the dataset's) */
    int64_t fanouts[TG_MAX_LAYERS];
    const tg_sampler_i *sampler; /* NULL = node-wise */
    uint64_t batch_size;         /* 0 = full batch */
    uint64_t seed;
    uint64_t epochs;            /* >= 1 */
    uint64_t batches_per_epoch; /* 0 = all */
    int threads;                /* compute threads (>= 1): the cores the model gets */
    int sampler_threads;        /* < 0: the threads */
    uint64_t mem_bytes;         /* --mem; 0: a quarter of the physical RAM */
    /* the run's cgroup memory limit, which lowers --mem as the run's budget does
     * (tg_budget_effective): < 0 this process's (default), 0 none */
    int64_t cgroup_limit;
    uint64_t disk_budget; /* diskgnn's --disk-budget (0: planned, tg_cost_disk_budget) */
    int allow_inexact;    /* strategies that change the sampled graph may be taken */
    const tg_strategy_arg_t *strategy_args; /* the run's strategy options (their working sets) */
    int num_strategy_args;
    /* which strategies' own measures run (tg_strategy_i.plan_measure; a strategy not measured
     * is predicted from the whole graph's batches): TG_COST_OWN_* */
    int own;
    double max_s;        /* the profile's sampling time limit (0: TG_COST_PROFILE_MAX_S) */
    double gemm_time_s;  /* the GEMM rate's measuring time (0: 0.2 s), where no step is timed */
    double probe_time_s; /* the device probe's when not cached (0: its default) */
} tg_cost_plan_opts_t;

/* What the profile cost. */
typedef struct tg_cost_profile_cost {
    double total_s; /* everything below and the rest (opening, degrees) */
    double probe_s, gemm_s, gather_s, sample_s, step_s;
    double own_s;              /* the strategies' own measures (tg_strategy_i.plan_measure) */
    double warm_s;             /* indices.bin read ahead of the sampling (0: not read) */
    uint64_t batches_profiled; /* of batches_per_epoch */
    int probe_cached;          /* the device probe came from its cache file */
} tg_cost_profile_cost_t;

/* What a strategy's plan_measure hook (engine-impl.h) gets from the profile: the graph and the
 * run's sampling, to sample batches of its own as its run would. */
typedef struct tg_cost_measure {
    tg_adj_t *adj;         /* the dataset's graph, memory-mapped (its lists read ahead) */
    const uint64_t *train; /* the training split */
    uint64_t ntrain;
    const tg_sampler_i *sampler;    /* the run's (NULL: node-wise) */
    const tg_model_config_t *model; /* the operation count's (tg_model_batch_flops) */
    int num_layers;
    const int64_t *fanouts;
    uint64_t batch_size, seed;
    uint64_t epoch_batches;  /* the plan's, --batches-per-epoch applied */
    int limited;             /* --batches-per-epoch cut the epoch */
    uint64_t batches;        /* how many of its batches to sample (the profile's count) */
    uint64_t free_bytes;     /* tg_cost_run_t's: what its matrices and caches share */
    double matrix_row_bytes; /* one input matrix's bytes per row, with the budget's margin */
    /* the whole graph's largest profiled batch: its input rows, and one step's arena on it
     * (with the budget plan's margin), which free_bytes has had taken off */
    uint64_t max_rows, act_bytes;
    /* where the hook leaves the largest of its batches (owned by the profile after, which times
     * a step on it: own.step_flops_per_s); NULL: not wanted */
    tg_batch_t *keep;
    int *kept; /* set to 1 when keep holds a batch */
} tg_cost_measure_t;

typedef struct tg_cost_plan {
    tg_cost_inputs_t in;
    tg_cost_profile_cost_t cost;
    int n; /* strategies in the table */
    const char *names[TG_COST_MAX_STRATS];
    int exact[TG_COST_MAX_STRATS]; /* 0: the strategy changes the sampled graph */
    /* the least bytes of --mem each needs beside the run's own and its matrices (min_bytes on
     * the dataset with the run's options; 0: not known): more than the run leaves makes it
     * infeasible, as the run would refuse it */
    double need[TG_COST_MAX_STRATS];
    tg_cost_pred_t pred[TG_COST_MAX_STRATS];
    int best; /* -1: none can run */
    int allow_inexact;
    char why[256]; /* why best was taken */
    /* diskgnn's --disk-budget when not given: planned from the epoch's bytes and the free disk
     * (tg_cost_disk_budget), the value its prediction used; 0: given, or left to its default */
    uint64_t disk_budget_planned;
    /* the process (anonymous memory beside the data, with the budget plan's slack) the inputs'
     * free_bytes assumed the run's budget plan would measure: the profile's (0: a plan made
     * without a profile) */
    uint64_t process_bytes;
} tg_cost_plan_t;

void tg_cost_plan_opts_default(tg_cost_plan_opts_t *o);
/* The planner's settings of a training run: its model, sampling, epochs, threads, --mem and
 * diskgnn's --disk-budget among its strategy options (a bad size: -EINVAL naming it). */
int tg_cost_plan_opts_train(const tg_train_opts_t *t, tg_cost_plan_opts_t *o);

/* Measures the inputs (above) and runs the choice over the strategy table. Errors name the
 * dataset's file or the measurement that failed. */
int tg_cost_plan(const tg_cost_plan_opts_t *o, tg_cost_plan_t *pl);
/* The process the run will measure is process_anon (anonymous memory now, before the run
 * loads anything) with the budget plan's slack: where that is more than the plan assumed
 * (pl->process_bytes; what the planner left allocated stays with an `auto` run), free_bytes
 * loses the difference and the choice is made again, so that the run has the memory each
 * strategy's prediction counted on. 1 when it chose again, 0 when nothing changed. */
int tg_cost_plan_recheck(tg_cost_plan_t *pl, uint64_t process_anon);
/* The choice alone over measured inputs (tests give fixed ones): fills pl->pred, best, why.
 * It reads pl->need (the working sets tg_cost_plan measured; 0 where not known): the caller
 * sets them, or zeroes them. */
int tg_cost_plan_choose(const tg_cost_inputs_t *in, int allow_inexact, tg_cost_plan_t *pl);
/* The same over a table of strategies of the caller's (a row without predict: skipped). */
struct tg_strategy_i;
int tg_cost_plan_choose_in(const struct tg_strategy_i *const *table, int n,
                           const tg_cost_inputs_t *in, int allow_inexact, tg_cost_plan_t *pl);

/* The table: one row per strategy with its terms, then the profile's cost and the choice. */
void tg_cost_plan_print(const tg_cost_plan_t *pl, FILE *f);
/* The same as one JSON object ({"choice":..., "why":..., "profile":{...}, "strategies":[...]})
 * into a malloc'd string (NULL: out of memory, with a message). */
char *tg_cost_plan_json(const tg_cost_plan_t *pl);

/* ---- the profile's pieces, pure arithmetic (tests give fixed inputs) */

/* Batches the profile samples of an epoch of epoch_batches: TG_COST_PROFILE_SHARE of them,
 * at least 1, at most all (0 of none). */
uint64_t tg_cost_profile_batches(uint64_t epoch_batches);

/* diskgnn's --disk-budget where it is not given: the bytes the epoch's batches ask for (a packed
 * epoch that size shares no segment, so its read amplification is 1 by construction; the
 * feature file's size, its default, made it read 2.1-2.9x on the shared bench), at least the
 * feature file's size, and at most 45% of the free disk (two packed epochs live at once, with
 * room to spare). 0 when the free disk does not hold two feature files: the default stands. */
uint64_t tg_cost_disk_budget(const tg_cost_inputs_t *in);
/* The same rule on its figures: need, the bytes an epoch's batches ask for; feat, the feature
 * file's; disk_free, the free bytes where the packed files go. diskgnn's own default when no
 * --disk-budget is given (it knows need exactly once its first generation is sampled). */
uint64_t tg_cost_disk_budget_rule(double need, double feat, double disk_free);

/* The options the planner planned for table row i that args[0..n) do not give (an option
 * given as "auto" counts as not given): diskgnn's --disk-budget (pl->disk_budget_planned) and
 * the row's prediction's knobs (none where it is not predicted or cannot run). The run takes
 * them after its own; add[k].value points into value[k], so the struct stays where it was
 * filled. */
#define TG_COST_PLAN_ARGS (TG_COST_KNOBS + 1)
typedef struct tg_cost_plan_args {
    int added;
    tg_strategy_arg_t add[TG_COST_PLAN_ARGS];
    char value[TG_COST_PLAN_ARGS][32];
} tg_cost_plan_args_t;
void tg_cost_plan_args(const tg_cost_plan_t *pl, int i, const tg_strategy_arg_t *args, int n,
                       tg_cost_plan_args_t *out);

/* Nodes by degree class: class 0 holds degree 0; above, four classes per power of two. */
#define TG_COST_BINS (1 + 4 * 64)
typedef struct tg_cost_bins {
    double nodes[TG_COST_BINS];  /* nodes of the class */
    double access[TG_COST_BINS]; /* their row accesses over the profiled batches */
    double edges[TG_COST_BINS];  /* their degrees summed */
    double lists[TG_COST_BINS];  /* their neighbour lists read over the profiled batches */
} tg_cost_bins_t;

int tg_cost_degree_bin(uint64_t degree);
/* The share of the edges the 1% highest-degree nodes hold (within a class, linear). */
double tg_cost_bins_skew(const tg_cost_bins_t *b);
/* From the classes' accesses over `profiled` batches, the epoch of `batches` batches: its
 * distinct rows (p->distinct_rows) and the curves p->lru, p->belady (epoch misses against cache
 * rows) and p->hot_degree (share of accesses served by the R highest-degree rows); from the
 * classes' list reads, p->ncache_hit (share of list reads a neighbour cache of B bytes serves,
 * num_nodes x 4 bytes of address table included; tiergnn/ncache.h). */
void tg_cost_bins_curves(const tg_cost_bins_t *b, uint64_t profiled, uint64_t batches,
                         tg_cost_profile_t *p);

#endif
