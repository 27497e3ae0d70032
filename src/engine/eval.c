/* Evaluation: accuracy and loss of a model on the splits, full-neighbour (layer-wise over all
 * nodes, exact) or sampled (mini-batches with the training fanouts, fixed RNG stream, through the
 * run's strategy, so that out of core the rows come the way training reads them). */
#include "engine-impl.h"
#include "tiergnn/dist.h"

#include <stdlib.h>
#include <string.h>

typedef struct {
    const tg_run_t *r;
    uint32_t C;
    int multi;
    double loss_sum;
    uint64_t correct, count;
    int32_t *y;
    size_t y_cap;
} acc_t;

static int accumulate(acc_t *a, const uint64_t *ids, size_t n, const float *logits)
{
    size_t w = a->r->label_width;
    if (n * w > a->y_cap) {
        free(a->y);
        a->y = malloc(n * w * sizeof *a->y);
        a->y_cap = a->y ? n * w : 0;
        if (!a->y) return tg_err(-ENOMEM, "evaluation: out of memory for labels");
    }
    tg_run_labels(a->r, ids, n, NULL, a->y);
    tg_step_stats_t st;
    int rc = tg_loss_eval(logits, a->y, (uint32_t)n, a->C, a->multi, &st);
    if (rc < 0) return rc;
    a->loss_sum += st.loss * (double)st.count;
    a->correct += st.correct;
    a->count += st.count;
    return 0;
}

static void finish(const acc_t *a, tg_split_eval_t *out)
{
    out->count = a->count;
    out->acc = a->count ? (double)a->correct / (double)a->count : 0;
    out->loss = a->count ? a->loss_sum / (double)a->count : 0;
}

/* Full-neighbour mode: the last layer runs on the concatenated targets of the wanted splits;
 * the sink routes each chunk's logits to its split by position. */
typedef struct {
    acc_t *acc;
    uint64_t bounds[4]; /* targets [bounds[s], bounds[s+1]) belong to split s */
} lw_ctx_t;

static int lw_sink(void *ctx, uint64_t first, const uint64_t *ids, size_t n, const float *logits,
                   const float *emb)
{
    (void)emb;
    lw_ctx_t *c = ctx;
    size_t i = 0;
    while (i < n) {
        uint64_t pos = first + i;
        int s = 0;
        while (s < 3 && pos >= c->bounds[s + 1])
            s++;
        size_t k = (size_t)TG_MIN((uint64_t)(n - i), c->bounds[s + 1] - pos);
        int rc = accumulate(&c->acc[s], ids + i, k, logits + i * c->acc[s].C);
        if (rc < 0) return rc;
        i += k;
    }
    return 0;
}

/* Sampled mode: one pass of the strategy over the split's nodes, in batch order. */
typedef struct {
    tg_model_t *m;
    acc_t *a;
    float *logits;
    size_t cap;
    uint64_t first, end; /* this rank's share of the batches */
} sampled_ctx_t;

static int sampled_step(void *ctx, const tg_batch_t *b, const float *X)
{
    sampled_ctx_t *c = ctx;
    /* a strategy with its own batch count runs past the share: another rank's batch */
    if (b->id < c->first || b->id >= c->end) return 0;
    const tg_model_config_t *cfg = tg_model_config(c->m);
    size_t need = (size_t)b->num_seeds * cfg->out_dim;
    if (need > c->cap) {
        free(c->logits);
        c->logits = malloc(need * sizeof *c->logits);
        c->cap = c->logits ? need : 0;
        if (!c->logits) return tg_err(-ENOMEM, "evaluation: out of memory for logits");
    }
    int rc = tg_model_predict(c->m, b, X, c->logits, NULL);
    if (rc >= 0) rc = accumulate(c->a, b->nodes, b->num_seeds, c->logits);
    return rc < 0 ? rc : 0;
}

static int eval_sampled(tg_run_t *r, tg_model_t *m, int s, const tg_eval_how_t *h,
                        const uint64_t *nodes, uint64_t n, acc_t *a)
{
    const tg_model_config_t *cfg = tg_model_config(m);
    if (n == 0) return 0;
    sampled_ctx_t c = {.m = m, .a = a};
    /* evaluation's own RNG streams, never a training epoch's */
    tg_plan_t pl;
    tg_plan_eval(&pl, nodes, n, h->batch_size, h->seed, s);
    /* --mem is the whole process's: the first sampled pass of a run that has not planned its
     * budget yet (tiergnn eval) reserves the model and its batches as training does */
    if (r->budget.limit && !r->budget_planned) {
        /* evaluation samples the plan's batches from the whole graph, whatever batches the
         * strategy makes for its training passes: those are the ones to measure */
        tg_budget_plan_opts_t bo = {.plan = &pl,
                                    .num_layers = cfg->num_layers,
                                    .fanouts = h->fanouts,
                                    .sampler = r->sampler,
                                    .plan_batches = 1};
        tg_budget_plan_t bp;
        int rc = tg_budget_plan(r, m, &bo, &bp);
        if (rc < 0) return rc;
    }
    /* this rank's share of the batches (all of them with one rank): batch b's seeds and RNG do
     * not depend on the batches before or after it, so every batch is a single process's */
    tg_dist_share(pl.num_batches, tg_dist_rank(), &c.first, &c.end);
    if (c.first == c.end) return 0;
    tg_pass_t p = {.seeds = pl.seeds,
                   .num_seeds = TG_MIN(pl.num_seeds, c.end * pl.batch_size),
                   .first_batch = c.first,
                   .batch_size = pl.batch_size,
                   .seed = pl.seed,
                   .epoch = pl.epoch,
                   .num_layers = cfg->num_layers,
                   .fanouts = h->fanouts,
                   .sampler = r->sampler,
                   .step = sampled_step,
                   .ctx = &c};
    tg_pass_stats_t st;
    int rc = tg_run_pass(r, &p, &st);
    if (h->stats) tg_pass_stats_add(r, h->stats, &st);
    free(c.logits);
    return rc;
}

/* The nodes of split s to evaluate: all of them, or a fixed random sample of max_nodes (the
 * same every time for a seed, in the split's order so that batches stay comparable). */
static int eval_nodes(const tg_run_t *r, int s, uint64_t max_nodes, uint64_t seed, uint64_t **out,
                      uint64_t *n)
{
    *out = NULL;
    *n = r->split_n[s];
    if (!max_nodes || max_nodes >= r->split_n[s]) return 0;
    uint64_t *ids = malloc(r->split_n[s] * sizeof *ids);
    if (!ids) return tg_err(-ENOMEM, "evaluation: out of memory for the node sample");
    memcpy(ids, r->split[s], r->split_n[s] * sizeof *ids);
    tg_plan_eval_subset(ids, r->split_n[s], seed, s);
    *n = max_nodes;
    *out = ids;
    return 0;
}

/* Data-parallel: every rank evaluated its share of each split; the sums become every rank's
 * (exact for the counts, the loss sums added in another order than one process's). A rank that
 * failed fails every rank here. */
static int sum_ranks(acc_t a[3], int rc)
{
    if (tg_dist_size() == 1) return rc;
    if ((rc = tg_dist_agree(rc, "its share of the evaluation")) < 0) return rc;
    double v[9];
    for (int s = 0; s < 3; s++) {
        v[3 * s] = a[s].loss_sum;
        v[3 * s + 1] = (double)a[s].correct;
        v[3 * s + 2] = (double)a[s].count;
    }
    if ((rc = tg_dist_sum_f64(v, 9, "the evaluation's sums")) < 0) return rc;
    for (int s = 0; s < 3; s++) {
        a[s].loss_sum = v[3 * s];
        a[s].correct = (uint64_t)v[3 * s + 1];
        a[s].count = (uint64_t)v[3 * s + 2];
    }
    return 0;
}

/* Full-neighbour mode over the wanted splits' nodes (sample[s], or the whole split), their
 * targets concatenated; under K > 1 ranks each rank's sink gets its share of them. */
static int eval_layerwise(tg_run_t *r, tg_model_t *m, const int want[3], const tg_eval_how_t *h,
                          uint64_t *const sample[3], const uint64_t cnt[3], acc_t a[3])
{
    lw_ctx_t c = {.acc = a};
    uint64_t total = 0;
    for (int s = 0; s < 3; s++) {
        c.bounds[s] = total;
        total += want[s] ? cnt[s] : 0;
    }
    c.bounds[3] = total;
    uint64_t *targets = malloc((total ? total : 1) * sizeof *targets);
    if (!targets)
        return tg_err(-ENOMEM, "evaluation: out of memory for %llu target ids",
                      (unsigned long long)total);
    for (int s = 0; s < 3; s++)
        if (want[s])
            memcpy(targets + c.bounds[s], sample[s] ? sample[s] : r->split[s],
                   cnt[s] * sizeof *targets);
    int rc = 0;
    if (total) {
        tg_lw_opts_t lo = {.chunk = h->chunk,
                           .tmp_dir = h->tmp_dir,
                           .targets = targets,
                           .num_targets = total,
                           .sink = lw_sink,
                           .ctx = &c};
        rc = tg_lw_forward(r, m, &lo);
    }
    free(targets);
    return rc;
}

int tg_run_evaluate_how(tg_run_t *r, tg_model_t *m, const int want[3], const tg_eval_how_t *h,
                        tg_split_eval_t out[3])
{
    const tg_model_config_t *cfg = tg_model_config(m);
    int rc = 0;
    memset(out, 0, 3 * sizeof *out);
    if (r->strat_i->evaluating) r->strat_i->evaluating(r->strat, !h->sampled);
    uint64_t *sample[3] = {NULL, NULL, NULL}, cnt[3] = {0, 0, 0};
    acc_t a[3];
    for (int s = 0; s < 3; s++)
        a[s] = (acc_t){.r = r, .C = cfg->out_dim, .multi = cfg->multi_label};
    for (int s = 0; s < 3 && rc >= 0; s++)
        if (want[s]) rc = eval_nodes(r, s, h->max_nodes, h->seed, &sample[s], &cnt[s]);
    /* a layer-wise forward is collective: the ranks start it together or not at all */
    if (!h->sampled && tg_dist_size() > 1) rc = tg_dist_agree(rc, "to prepare the evaluation");
    if (rc >= 0 && h->sampled) {
        for (int s = 0; s < 3 && rc >= 0; s++)
            if (want[s])
                rc = eval_sampled(r, m, s, h, sample[s] ? sample[s] : r->split[s], cnt[s], &a[s]);
    } else if (rc >= 0) {
        rc = eval_layerwise(r, m, want, h, sample, cnt, a);
    }
    if (h->sampled || rc >= 0) rc = sum_ranks(a, rc); /* a failed forward was every rank's */
    for (int s = 0; s < 3; s++) {
        if (rc >= 0) finish(&a[s], &out[s]);
        free(a[s].y);
    }
    for (int s = 0; s < 3; s++)
        free(sample[s]);
    return rc;
}

int tg_run_evaluate(tg_run_t *r, tg_model_t *m, const int want[3], int sampled,
                    const int64_t *fanouts, uint64_t batch_size, uint64_t seed, uint64_t chunk,
                    tg_split_eval_t out[3])
{
    tg_eval_how_t h = {.sampled = sampled,
                       .fanouts = fanouts,
                       .batch_size = batch_size,
                       .seed = seed,
                       .chunk = chunk};
    return tg_run_evaluate_how(r, m, want, &h, out);
}
