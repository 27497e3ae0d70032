/* bench/bench_loader.c - batches per second of a strategy's passes with a consumer that does
 * nothing: the reference the Python loader's overhead is measured against (bench/README.md,
 * "Python package (issue 30)").
 *
 *     bench_loader DATASET [--mode loader|pass] [--strategy S] [--mem M] [--fanouts 10,10,10]
 *                  [--batch-size 1000] [--epochs 2] [--seed 0] [--threads 1]
 *                  [--sampler-threads -1] [--max-batches 0] [--opt NAME=VALUE]...
 *
 * --mode loader drains tiergnn/loader.h (the C loader the Python package wraps) and releases
 * every batch as soon as it comes: the same work as `for b in tiergnn.Loader(...): pass`, less
 * Python. --mode pass runs the engine's own training pass (tg_run_pass, as tiergnn train does)
 * with a step callback that returns at once: no loader, no copy into slots, no model. Both make
 * the budget plan of their kind before the first epoch (the loader's with its slots; the pass's
 * without a model) and prepare the next epoch ahead for strategies that do (diskgnn).
 *
 * One JSON line per epoch on stdout: mode, strategy, epoch, batches, time_s (from the epoch's
 * start to its last batch; epoch 0 from before the open, whose time is open_s), batches_per_s,
 * and the loader's copy_s / wait_s / stall_s or the pass's wait_s, io_read_bytes; the loader's
 * also rss_peak_bytes, the process's peak RSS so far (VmHWM: mapped pages of a file count, so
 * it is the budget's measure for strategies that read with pread, not mmap's). */
#define BENCH_NAME "bench_loader"
#include "bench_common.h"

#include <string.h>

#include "engine/engine-impl.h"
#include "tiergnn/loader.h"

#define MAX_OPTS 32

typedef struct {
    const char *dataset, *mode, *strategy;
    uint64_t mem, batch_size, epochs, seed, max_batches;
    int num_layers, threads, sampler_threads;
    int64_t fanouts[TG_MAX_LAYERS];
    tg_strategy_arg_t args[MAX_OPTS];
    int nargs;
} opts_t;

static void usage(void)
{
    fprintf(stderr, "usage: bench_loader DATASET [--mode loader|pass] [--strategy S] [--mem M] "
                    "[--fanouts 10,10,10] [--batch-size 1000] [--epochs 2] [--seed 0] "
                    "[--threads 1] [--sampler-threads -1] [--max-batches 0] "
                    "[--opt NAME=VALUE]...\n");
    exit(2);
}

static void parse_fanouts(const char *s, opts_t *o)
{
    o->num_layers = 0;
    char *end;
    while (*s) {
        if (o->num_layers == TG_MAX_LAYERS) die("--fanouts: too many layers");
        long long v = strtoll(s, &end, 10);
        if (end == s || v < -1) die("--fanouts: expected integers >= -1 separated by commas");
        o->fanouts[o->num_layers++] = v;
        s = *end == ',' ? end + 1 : end;
        if (*end && *end != ',') die("--fanouts: expected integers separated by commas");
    }
    if (!o->num_layers) die("--fanouts: empty");
}

static uint64_t parse_u64(const char *s, const char *name)
{
    uint64_t v;
    if (tg_parse_u64(s, &v, name) < 0) die(tg_errmsg());
    return v;
}

static void parse(int argc, char **argv, opts_t *o)
{
    *o = (opts_t){.mode = "loader",
                  .strategy = "auto",
                  .batch_size = 1000,
                  .epochs = 2,
                  .threads = 1,
                  .sampler_threads = -1,
                  .num_layers = 3,
                  .fanouts = {10, 10, 10}};
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (a[0] != '-') {
            if (o->dataset) usage();
            o->dataset = a;
            continue;
        }
        if (!v) usage();
        i++;
        if (!strcmp(a, "--mode"))
            o->mode = v;
        else if (!strcmp(a, "--strategy"))
            o->strategy = v;
        else if (!strcmp(a, "--mem")) {
            if (tg_parse_size(v, &o->mem) < 0) die(tg_errmsg());
        } else if (!strcmp(a, "--fanouts"))
            parse_fanouts(v, o);
        else if (!strcmp(a, "--batch-size"))
            o->batch_size = parse_u64(v, "--batch-size");
        else if (!strcmp(a, "--epochs"))
            o->epochs = parse_u64(v, "--epochs");
        else if (!strcmp(a, "--seed"))
            o->seed = parse_u64(v, "--seed");
        else if (!strcmp(a, "--max-batches"))
            o->max_batches = parse_u64(v, "--max-batches");
        else if (!strcmp(a, "--threads"))
            o->threads = (int)parse_u64(v, "--threads");
        else if (!strcmp(a, "--sampler-threads"))
            o->sampler_threads = atoi(v);
        else if (!strcmp(a, "--opt")) {
            if (o->nargs == MAX_OPTS) die("--opt: too many");
            char *eq = strchr(v, '=');
            if (eq) *eq = 0;
            o->args[o->nargs++] = (tg_strategy_arg_t){v, eq ? eq + 1 : NULL};
        } else
            usage();
    }
    if (!o->dataset || !o->epochs) usage();
    if (strcmp(o->mode, "loader") && strcmp(o->mode, "pass")) usage();
}

static void line(const opts_t *o, const char *strategy, uint64_t e, uint64_t n, double t,
                 const char *extra)
{
    printf("{\"mode\":\"%s\",\"strategy\":\"%s\",\"epoch\":%llu,\"batches\":%llu,"
           "\"time_s\":%.4f,\"batches_per_s\":%.3f%s}\n",
           o->mode, strategy, (unsigned long long)e, (unsigned long long)n, t,
           t > 0 ? (double)n / t : 0.0, extra);
    fflush(stdout);
}

/* ---------------------------------------------------------------- the C loader, drained */

static void run_loader(const opts_t *o)
{
    tg_loader_opts_t lo;
    tg_loader_opts_default(&lo);
    lo.dataset = o->dataset;
    lo.strategy = o->strategy;
    lo.strategy_args = o->args;
    lo.num_strategy_args = o->nargs;
    lo.mem_bytes = o->mem;
    lo.num_layers = o->num_layers;
    memcpy(lo.fanouts, o->fanouts, sizeof lo.fanouts);
    lo.batch_size = o->batch_size;
    lo.seed = o->seed;
    lo.num_epochs = o->epochs;
    lo.max_batches = o->max_batches;
    lo.threads = o->threads;
    lo.sampler_threads = o->sampler_threads;
    double t0 = tg_now();
    tg_loader_t *L;
    if (tg_loader_open(&L, &lo) < 0) die(tg_errmsg());
    double open_s = tg_now() - t0;
    tg_loader_info_t info;
    tg_loader_info(L, &info);
    for (uint64_t e = 0; e < o->epochs; e++) {
        if (e > 0) t0 = tg_now();
        if (tg_loader_set_epoch(L, e) < 0) die(tg_errmsg());
        const tg_loader_batch_t *b;
        uint64_t n = 0;
        int rc;
        while ((rc = tg_loader_next(L, &b)) > 0) {
            n++;
            if (tg_loader_release(L, b) < 0) die(tg_errmsg());
        }
        if (rc < 0) die(tg_errmsg());
        double t = tg_now() - t0;
        tg_loader_stats_t st;
        tg_loader_stats(L, &st);
        char extra[256];
        snprintf(extra, sizeof extra,
                 ",\"open_s\":%.4f,\"copy_s\":%.4f,\"wait_s\":%.4f,\"stall_s\":%.4f,"
                 "\"io_read_bytes\":%llu,\"rss_peak_bytes\":%llu",
                 e ? 0.0 : open_s, st.copy_s, st.wait_s, st.stall_s,
                 (unsigned long long)st.io_read_bytes, (unsigned long long)tg_peak_rss_bytes());
        line(o, info.strategy, e, n, t, extra);
    }
    tg_loader_close(L);
}

/* ---------------------------------------------------------------- the engine's own pass */

static int nop_step(void *ctx, const tg_batch_t *b, const float *X)
{
    (void)b;
    (void)X;
    ++*(uint64_t *)ctx;
    return 0;
}

static void run_pass(const opts_t *o)
{
    double t0 = tg_now();
    tg_run_opts_t ro;
    memset(&ro, 0, sizeof ro);
    ro.dataset = o->dataset;
    ro.strategy = o->strategy;
    tg_strategy_opts_default(&ro.sopts);
    ro.sopts.threads = o->threads;
    ro.sopts.sampler_threads = o->sampler_threads;
    ro.args = o->args;
    ro.nargs = o->nargs;
    ro.mem_bytes = o->mem;
    ro.threads = o->threads;
    tg_run_t r;
    memset(&r, 0, sizeof r);
    if (tg_run_open_opts(&r, &ro) < 0) die(tg_errmsg());
    uint64_t ntrain = r.split_n[0];
    if (!ntrain) die("the training split is empty");
    int next = (r.strat_i->info.caps & TG_STRAT_NEXT_PASS) && o->epochs > 1;
    if (tg_budget_reserve(&r.budget, ntrain * sizeof(uint64_t) * (next ? 2 : 1), "seed order") < 0)
        die(tg_errmsg());
    tg_plan_opts_t po = {.num_nodes = r.ds->meta.num_nodes,
                         .train = r.split[0],
                         .num_train = ntrain,
                         .batch_size = o->batch_size,
                         .num_layers = o->num_layers,
                         .fanouts = o->fanouts,
                         .seed = o->seed,
                         .max_batches = o->max_batches};
    tg_plan_t plan, next_plan;
    memset(&next_plan, 0, sizeof next_plan);
    if (tg_plan_init(&plan, &po) < 0) die(tg_errmsg());
    if (plan.whole_graph) die("whole-graph batches: give a batch size and fanouts");
    if (next && tg_plan_init(&next_plan, &po) < 0) die(tg_errmsg());
    tg_plan_epoch(&plan, 0);
    tg_budget_plan_opts_t bo = {
        .plan = &plan, .num_layers = o->num_layers, .fanouts = o->fanouts, .sampler = r.sampler};
    tg_budget_plan_t bp;
    if (tg_budget_plan(&r, NULL, &bo, &bp) < 0) die(tg_errmsg());
    double open_s = tg_now() - t0;
    for (uint64_t e = 0; e < o->epochs; e++) {
        if (e > 0) t0 = tg_now();
        tg_plan_epoch(&plan, e);
        uint64_t n = 0;
        tg_pass_t p = {.seeds = plan.seeds,
                       .num_seeds = plan.num_seeds,
                       .batch_size = plan.batch_size,
                       .seed = o->seed,
                       .epoch = e,
                       .num_layers = o->num_layers,
                       .fanouts = o->fanouts,
                       .sampler = r.sampler,
                       .allow_out_of_order = 1,
                       .training = 1,
                       .step = nop_step,
                       .ctx = &n};
        tg_pass_t np = p;
        if (next && e + 1 < o->epochs) {
            tg_plan_epoch(&next_plan, e + 1);
            np.seeds = next_plan.seeds;
            np.num_seeds = next_plan.num_seeds;
            np.epoch = e + 1;
            np.step = NULL;
            np.ctx = NULL;
            p.next = &np;
        }
        tg_pass_stats_t ps;
        memset(&ps, 0, sizeof ps);
        if (tg_run_pass(&r, &p, &ps) < 0) die(tg_errmsg());
        double t = tg_now() - t0;
        char extra[256];
        snprintf(extra, sizeof extra,
                 ",\"open_s\":%.4f,\"wait_s\":%.4f,\"sample_s\":%.4f,\"gather_s\":%.4f,"
                 "\"io_read_bytes\":%llu",
                 e ? 0.0 : open_s, ps.wait_s, ps.sample_s, ps.gather_s,
                 (unsigned long long)ps.io_read_bytes);
        line(o, r.strat_i->info.name, e, n, t, extra);
    }
    tg_plan_destroy(&plan);
    if (next) tg_plan_destroy(&next_plan);
    tg_run_close(&r);
}

int main(int argc, char **argv)
{
    opts_t o;
    parse(argc, argv, &o);
    if (!strcmp(o.mode, "loader"))
        run_loader(&o);
    else
        run_pass(&o);
    return 0;
}
