/* --mem as the whole process's budget: the run measures what a batch costs and reserves the
 * process's own memory, the model, one batch's activations and the input matrices of the batches
 * in flight against the run's budget, so that what is left is what the strategy's caches and
 * buffers may take (docs/STRATEGIES.md, "The memory budget"). Without a model (the pull loader,
 * docs/LOADER.md) the plan reserves the batches the caller holds in place of the model and its
 * activations. */
#include "engine-impl.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* Margins on measured sizes: later batches of an epoch may be a little larger than the profiled
 * ones (sampling variance), and the allocator rounds. */
#define SIZE_MARGIN 1.15
/* Thread stacks touched, allocator slack, stdio buffers: what RSS at the profile does not show
 * yet. */
#define OVERHEAD_SLACK ((uint64_t)8 << 20)
#define PROFILE_BATCHES 2

uint64_t tg_budget_effective(uint64_t mem_bytes, uint64_t cgroup_limit, char *why, size_t len)
{
    why[0] = 0;
    if (!cgroup_limit) return mem_bytes;
    /* Leave the kernel a little of the cgroup for the page cache of checkpoint writes and the
     * dataset's metadata reads: a process at exactly the limit is reclaimed or killed. */
    uint64_t margin = ((uint64_t)16 << 20) + cgroup_limit / 50;
    uint64_t cg = cgroup_limit > 2 * margin ? cgroup_limit - margin : cgroup_limit / 2;
    if (mem_bytes && mem_bytes <= cg) return mem_bytes;
    char a[32], b[32], c[32], d[32];
    if (mem_bytes)
        snprintf(why, len,
                 "--mem %s is more than this process's cgroup allows (limit %s, less %s "
                 "for the kernel): using %s",
                 tg_fmt_bytes(mem_bytes, a, sizeof a), tg_fmt_bytes(cgroup_limit, b, sizeof b),
                 tg_fmt_bytes(margin, c, sizeof c), tg_fmt_bytes(cg, d, sizeof d));
    else
        snprintf(why, len,
                 "no --mem: the budget is this process's cgroup limit %s, less %s for "
                 "the kernel",
                 tg_fmt_bytes(cgroup_limit, a, sizeof a), tg_fmt_bytes(margin, b, sizeof b));
    return cg;
}

/* Expected input nodes of the layer below n output nodes (node-wise sampling, fanout f; f < 0:
 * every in-neighbour): the n nodes and n * f draws spread over the graph's N nodes, as if
 * uniform (a real graph's neighbourhoods overlap more: the safe side). */
static double nodes_below(double n, int64_t f, double N)
{
    if (f < 0) return N;
    return TG_MIN(N, n + (N - n) * (1.0 - exp(-n * (double)f / N)));
}

uint64_t tg_budget_estimate(const tg_model_config_t *cfg, uint64_t num_nodes, uint64_t batch_size,
                            const tg_sampler_i *sampler, const int64_t *fanouts, int in_flight)
{
    /* rows[l]: input nodes of layer l (rows[L] the seeds); a sampler with a bound (ladies)
     * gives its bound, node-wise sampling the expected union of its draws */
    int L = TG_MAX(cfg->num_layers, 1);
    double N = (double)TG_MAX(num_nodes, 1), rows[TG_MAX_LAYERS + 1];
    rows[L] = TG_MIN(N, (double)(batch_size ? batch_size : num_nodes));
    for (int l = L - 1; l >= 0; l--) {
        if (sampler && sampler->max_nodes)
            rows[l] = (double)tg_sampler_max_nodes(sampler, batch_size ? batch_size : num_nodes,
                                                   L - l, fanouts + l, num_nodes);
        else
            rows[l] = batch_size ? nodes_below(rows[l + 1], fanouts[l], N) : N;
    }
    /* One input matrix, and the step's arena: a copy of the input (dropout, normalisation),
     * then per layer its aggregated input and its output with their gradients. */
    double x = rows[0] * cfg->in_dim * sizeof(float), act = x;
    for (int l = 0; l < L; l++) {
        double din = l ? cfg->hidden : cfg->in_dim;
        double dout = l + 1 < L ? cfg->hidden : TG_MAX(cfg->out_dim, 1);
        act += rows[l + 1] * (din + 2 * dout) * sizeof(float);
    }
    tg_optim_config_t adam;
    tg_optim_config_default(&adam, TG_OPTIM_ADAM);
    uint64_t model = tg_model_config_param_bytes(cfg, &adam);
    /* the process itself: binary, libraries, BLAS buffers, stacks */
    return (uint64_t)(act + x * TG_MAX(in_flight, 1)) + model + ((uint64_t)16 << 20);
}

/* Samples the first batches of the pass from o->first_batch on (the same batches the pass will
 * run: the RNG is a pure function of seed, epoch and batch) and keeps the one with the most
 * input nodes. */
static int profile_batches(tg_run_t *r, const tg_budget_plan_opts_t *o, tg_batch_t *largest)
{
    int rc = tg_plan_largest_batch(o->plan, r->adj, o->sampler, o->num_layers, o->fanouts,
                                   o->first_batch, PROFILE_BATCHES, largest);
    return rc < 0 ? tg_err_prefix(rc, "measuring a batch for the memory budget") : 0;
}

/* The activation arena one training step of `b` needs: a model of the same configuration (not
 * the run's: its weights, optimiser and RNG stay untouched) runs the step on zero features. */
static int measure_activations(tg_run_t *r, const tg_model_t *m, const tg_optim_config_t *oc,
                               const tg_batch_t *b, uint64_t *act)
{
    tg_model_t *pm = NULL;
    float *X = NULL;
    int32_t *y = NULL;
    tg_optim_config_t adam;
    if (!oc) {
        tg_optim_config_default(&adam, TG_OPTIM_ADAM);
        oc = &adam;
    }
    int rc = tg_model_create(&pm, tg_model_config(m), 1);
    if (rc == 0) rc = tg_model_set_optim(pm, oc);
    if (rc == 0) {
        tg_model_set_pool(pm, r->pool);
        X = calloc((size_t)b->num_nodes * r->ds->meta.feat_dim + 1, sizeof *X);
        y = calloc((size_t)b->num_seeds * r->label_width + 1, sizeof *y);
        if (!X || !y) rc = tg_err(-ENOMEM, "out of memory for the batch that sizes the budget");
    }
    if (rc == 0) {
        tg_step_stats_t st;
        rc = tg_model_train_step(pm, b, X, y, &st);
        if (rc == -ERANGE) rc = 0; /* zero features may give a degenerate loss: sizes still hold */
        *act = tg_model_act_bytes(pm);
    }
    free(X);
    free(y);
    tg_model_destroy(pm);
    return rc;
}

int tg_budget_check_model(const tg_run_t *r, uint64_t model_bytes)
{
    /* the model alone: a budget that holds it gets the full plan's measured refusal, which
     * names every part (the process, activations and batches come on top) */
    uint64_t limit = r->budget.limit, want = r->budget.used + model_bytes;
    if (!limit || want <= limit) return 0;
    char a[32], b[32], c[32];
    return tg_err(-ENOMEM,
                  "--mem %s is too small for this model: its parameters, gradients and optimiser "
                  "state take %s beside the %s of data strategy %s holds; give --mem above "
                  "%lluM (its batches need more), or a smaller model",
                  tg_fmt_bytes(limit, a, sizeof a), tg_fmt_bytes(model_bytes, b, sizeof b),
                  tg_fmt_bytes(r->budget.used, c, sizeof c), r->strat_i->info.name,
                  (unsigned long long)((want + (1 << 20) - 1) >> 20));
}

/* Measures the plan's parts: the largest profiled batch, one step's activations on it (with a
 * model) or one held batch (without), one input matrix, and the process's own memory. */
static int plan_measure(tg_run_t *r, const tg_model_t *m, const tg_budget_plan_opts_t *o,
                        tg_budget_plan_t *p)
{
    double t0 = tg_now();
    tg_batch_t big;
    int own = r->strat_i->profile_batch && !o->plan_batches;
    int rc = own ? r->strat_i->profile_batch(r->strat, o, &big) : profile_batches(r, o, &big);
    if (rc < 0) return rc;
    uint64_t act = 0;
    if (m) rc = measure_activations(r, m, o->optim, &big, &act);
    if (o->held_bytes)
        p->held_each = (uint64_t)((double)o->held_bytes(o->held_ctx, &big) * SIZE_MARGIN);
    p->batch_nodes = big.num_nodes;
    tg_batch_free(&big);
    if (rc < 0) return tg_err_prefix(rc, "measuring a batch for the memory budget");
    /* A sampler that bounds its batches (ladies: at most batch_size + the layer sizes nodes,
     * whatever the graph) sizes the input matrices by that bound, and the activations by it
     * where it exceeds the margin; node-wise batches have no useful bound: the margin. */
    double grow = SIZE_MARGIN;
    p->batch_x =
        (uint64_t)((double)p->batch_nodes * r->ds->meta.feat_dim * sizeof(float) * SIZE_MARGIN);
    if (o->sampler && o->sampler->max_nodes && p->batch_nodes) {
        uint64_t bound = tg_sampler_max_nodes(o->sampler, o->plan->batch_size, o->num_layers,
                                              o->fanouts, r->ds->meta.num_nodes);
        grow = TG_MAX(grow, (double)bound / (double)p->batch_nodes);
        p->batch_x = bound * r->ds->meta.feat_dim * sizeof(float);
    }
    p->activations = (uint64_t)((double)act * grow);
    /* What the process holds that is neither data in the budget nor the model: the binary and
     * its libraries, OpenBLAS's buffers (allocated by the step above, when there is a model),
     * thread stacks. */
    /* anonymous memory only: the pages of a mapped file are page cache, not the process */
    uint64_t rss = tg_rss_anon_bytes(), known = r->budget.used + p->model;
#ifdef TG_SANITIZE
    /* Under ASan the RSS is mostly shadow memory and the quarantine of freed blocks: not the
     * program's. A typical release-build figure keeps budgets and tests alike in both builds. */
    (void)rss;
    (void)known;
    p->overhead = ((uint64_t)16 << 20) + OVERHEAD_SLACK;
#else
    p->overhead = (rss > known ? rss - known : 0) + OVERHEAD_SLACK;
#endif
    p->profile_s = tg_now() - t0;
    return 0;
}

/* The plan's bytes for its in-flight count. */
static uint64_t plan_need(const tg_budget_plan_t *p)
{
    return p->overhead + p->model + p->activations + p->in_flight * p->batch_x +
           p->held * p->held_each;
}

/* The refusal of a plan without a model: the process, the matrices in flight and the batches
 * the caller holds. */
static int plan_refuse_held(const tg_run_t *r, const tg_budget_plan_opts_t *o,
                            const tg_budget_plan_t *p)
{
    char a[32], b[32], c[32], d[32], e[32], f[32];
    uint64_t need = plan_need(p), want = r->budget.used + need;
    return tg_err(-ENOMEM,
                  "--mem %s is too small for these batches: the process (%s), %llu input "
                  "matrices strategy %s holds in flight (%s each, a batch of %u input nodes) and "
                  "%s (%s each) need %s beside the %s of data it holds; give --mem %lluM or "
                  "more, or hold fewer batches, or a smaller batch size or fanouts",
                  tg_fmt_bytes(p->limit, a, sizeof a), tg_fmt_bytes(p->overhead, b, sizeof b),
                  (unsigned long long)p->in_flight, r->strat_i->info.name,
                  tg_fmt_bytes(p->batch_x, c, sizeof c), p->batch_nodes,
                  o->held_what ? o->held_what : "the batches held",
                  tg_fmt_bytes(p->held_each, d, sizeof d), tg_fmt_bytes(need, e, sizeof e),
                  tg_fmt_bytes(r->budget.used, f, sizeof f),
                  (unsigned long long)((want + (1 << 20) - 1) >> 20));
}

/* The settings the plan may lower: the strategy's in_flight_opts the user did not give, then
 * the sampler threads when they were the default. */
#define FIT_MAX 8
typedef struct {
    int n;
    const char *name[FIT_MAX];
    int64_t *val[FIT_MAX]; /* in the strategy's config, or NULL: the sampler threads */
    int64_t min[FIT_MAX], def[FIT_MAX];
} fit_knobs_t;

static void fit_knobs(tg_run_t *r, fit_knobs_t *k)
{
    const tg_strategy_info_t *info = &r->strat_i->info;
    k->n = 0;
    for (const char *const *on = r->strat_i->in_flight_opts; on && *on && k->n < FIT_MAX - 1; on++)
        for (int i = 0; i < info->num_opts && i < 64; i++) {
            const tg_strategy_opt_t *op = &info->opts[i];
            if (strcmp(op->name, *on) || op->kind != TG_SOPT_INT || (r->opts_given >> i & 1))
                continue;
            k->name[k->n] = op->name;
            k->val[k->n] = (int64_t *)((char *)r->scfg + op->offset);
            k->min[k->n] = TG_MAX(op->min, 1);
            k->def[k->n] = *k->val[k->n];
            k->n++;
        }
    if (r->sopts.sampler_threads_auto) {
        k->name[k->n] = "sampler-threads";
        k->val[k->n] = NULL;
        k->min[k->n] = 1;
        k->def[k->n] = r->sopts.sampler_threads;
        k->n++;
    }
}

static int64_t knob_get(const tg_run_t *r, const fit_knobs_t *k, int i)
{
    return k->val[i] ? *k->val[i] : r->sopts.sampler_threads;
}

static void knob_set(tg_run_t *r, const fit_knobs_t *k, int i, int64_t v)
{
    if (k->val[i])
        *k->val[i] = v;
    else
        r->sopts.sampler_threads = (int)v;
}

/* Lowers by one the first knob whose step lowers the strategy's matrices in flight (a knob
 * that does not, under a max of two terms, is put back); 0 when none does. The plan counts at
 * most `cap` of them (the epoch's batches), whatever the strategy's count. */
static int fit_step(tg_run_t *r, const fit_knobs_t *k, tg_budget_plan_t *p, uint64_t cap)
{
    int cur = r->strat_i->batches_in_flight(&r->sopts);
    for (int i = 0; i < k->n; i++) {
        int64_t v = knob_get(r, k, i);
        if (v <= k->min[i]) continue;
        knob_set(r, k, i, v - 1);
        int cnt = r->strat_i->batches_in_flight(&r->sopts);
        if (cnt >= 0 && cnt < cur) {
            p->in_flight = TG_MIN((uint64_t)cnt, cap);
            return 1;
        }
        knob_set(r, k, i, v);
    }
    return 0;
}

/* The one log line of what fit_step lowered. */
static void fit_log(const tg_run_t *r, const fit_knobs_t *k, const tg_budget_plan_t *p)
{
    char a[32], e[32], what[512];
    size_t n = 0;
    what[0] = 0;
    for (int i = 0; i < k->n && n < sizeof what; i++)
        if (knob_get(r, k, i) != k->def[i])
            n += (size_t)snprintf(what + n, sizeof what - n, "%s--%s %lld (default %lld)",
                                  n ? ", " : "", k->name[i], (long long)knob_get(r, k, i),
                                  (long long)k->def[i]);
    if (what[0])
        tg_log_info("--mem %s leaves room for %llu batch matrices of %s in flight: %s (a "
                    "setting given is kept)",
                    tg_fmt_bytes(p->limit, a, sizeof a), (unsigned long long)p->in_flight,
                    tg_fmt_bytes(p->batch_x, e, sizeof e), what);
}

/* What the strategy's least working set (min_bytes, with the settings as they are now) holds
 * beyond what it reserved at open: its buffers and staging of the first pass, which take what
 * the plan leaves. */
static uint64_t after_plan(const tg_run_t *r)
{
    char why[256];
    uint64_t min = r->strat_i->min_bytes(r->ds, &r->sopts, why, sizeof why);
    uint64_t own = r->split_bytes + r->label_bytes, held = r->budget.used;
    held = held > own ? held - own : 0;
    if (min == UINT64_MAX) tg_err_clear();
    return min == UINT64_MAX || min <= held ? 0 : min - held;
}

/* Fits the plan in the budget: the settings of what the strategy holds in flight that were left
 * at their defaults (pipeline depth, sweep groups, extractors, sampler threads: each holds
 * batches, and fewer still train, slower, with the same results for exact strategies) give way
 * before the budget refuses; then -ENOMEM naming every part and the --mem needed. */
static int plan_fit(tg_run_t *r, const tg_model_t *m, const tg_budget_plan_opts_t *o,
                    tg_budget_plan_t *p)
{
    char a[32], b[32], c[32], d[32], e[32], f[32], g[32];
    uint64_t need = plan_need(p);
    fit_knobs_t k = {0};
    if (r->strat_i->batches_in_flight) fit_knobs(r, &k);
    /* the knobs give way until the plan fits with room for what the strategy still needs at
     * its first pass; the refusal below is the plan's alone (the strategy names its own) */
    uint64_t cap = o->plan->num_batches ? o->plan->num_batches : UINT64_MAX;
    while (r->budget.used + need + after_plan(r) > p->limit && fit_step(r, &k, p, cap))
        need = plan_need(p);
    if (r->budget.used + need <= p->limit) fit_log(r, &k, p);
    if (r->budget.used + need <= p->limit) return 0;
    if (!m) return plan_refuse_held(r, o, p);
    uint64_t want = r->budget.used + need;
    return tg_err(-ENOMEM,
                  "--mem %s is too small for this model and batch size: the process (%s), the "
                  "model with its optimiser state (%s), one batch's activations (%s, a batch of "
                  "%u input nodes) and %llu input matrices in flight (%s each) need %s beside "
                  "the %s of data strategy %s holds; give --mem %lluM or more, or a smaller "
                  "--batch-size or fanouts",
                  tg_fmt_bytes(p->limit, a, sizeof a), tg_fmt_bytes(p->overhead, b, sizeof b),
                  tg_fmt_bytes(p->model, c, sizeof c), tg_fmt_bytes(p->activations, d, sizeof d),
                  p->batch_nodes, (unsigned long long)p->in_flight,
                  tg_fmt_bytes(p->batch_x, e, sizeof e), tg_fmt_bytes(need, f, sizeof f),
                  tg_fmt_bytes(r->budget.used, g, sizeof g), r->strat_i->info.name,
                  (unsigned long long)((want + (1 << 20) - 1) >> 20));
}

/* The plan's log line: the parts it reserved and what is left for the strategy. */
static void plan_log(const tg_run_t *r, const tg_model_t *m, const tg_budget_plan_t *p)
{
    char a[32], b[32], c[32], d[32], e[32], f[32], g[32];
    if (!m) {
        tg_log_info("memory budget %s: process %s, %llu batch matrices of %s, %llu held batches "
                    "of %s, data so far %s; %s left for %s's caches and buffers (measured in "
                    "%.2f s)",
                    tg_fmt_bytes(p->limit, a, sizeof a), tg_fmt_bytes(p->overhead, b, sizeof b),
                    (unsigned long long)p->in_flight, tg_fmt_bytes(p->batch_x, c, sizeof c),
                    (unsigned long long)p->held, tg_fmt_bytes(p->held_each, d, sizeof d),
                    tg_fmt_bytes(p->data, f, sizeof f), tg_fmt_bytes(p->rest, g, sizeof g),
                    r->strat_i->info.name, p->profile_s);
        return;
    }
    tg_log_info("memory budget %s: process %s, model %s, activations %s, %llu batch matrices of "
                "%s, data so far %s; %s left for %s's caches and buffers (measured in %.2f s)",
                tg_fmt_bytes(p->limit, a, sizeof a), tg_fmt_bytes(p->overhead, b, sizeof b),
                tg_fmt_bytes(p->model, c, sizeof c), tg_fmt_bytes(p->activations, d, sizeof d),
                (unsigned long long)p->in_flight, tg_fmt_bytes(p->batch_x, e, sizeof e),
                tg_fmt_bytes(p->data, f, sizeof f), tg_fmt_bytes(p->rest, g, sizeof g),
                r->strat_i->info.name, p->profile_s);
}

int tg_budget_plan(tg_run_t *r, const tg_model_t *m, const tg_budget_plan_opts_t *o,
                   tg_budget_plan_t *p)
{
    memset(p, 0, sizeof *p);
    p->limit = r->budget.limit;
    p->model = m ? tg_model_param_bytes(m) : 0;
    p->in_flight = r->strat_i->batches_in_flight ? r->strat_i->batches_in_flight(&r->sopts) : 2;
    /* a pass holds no more input matrices than it has batches (one, training on the whole split) */
    if (o->plan->num_batches) p->in_flight = TG_MIN(p->in_flight, o->plan->num_batches);
    p->held = o->held;
    if (!p->limit || o->plan->num_batches == 0 || r->budget_planned) return 0;
    /* measuring a batch creates a second model: not when the first alone is too large */
    int rc = m ? tg_budget_check_model(r, p->model) : 0;
    if (rc < 0 || (rc = plan_measure(r, m, o, p)) < 0 || (rc = plan_fit(r, m, o, p)) < 0) return rc;
    uint64_t need = plan_need(p);
    if ((rc = tg_budget_reserve(&r->budget, need,
                                m ? "process, model, activations, batches"
                                  : "process, batches in flight, held batches")) < 0)
        return rc;
    p->reserved = need;
    r->budget_planned = 1;
    r->batch_nodes = p->batch_nodes;
    p->data = r->budget.used - need;
    p->rest = p->limit - r->budget.used;
    plan_log(r, m, p);
    return 0;
}
