/* Evaluation: accuracy and loss of a model on the splits, full-neighbour (layer-wise over all
 * nodes, exact) or sampled (mini-batches with the training fanouts, fixed RNG stream). */
#include "engine-impl.h"

#include <stdlib.h>
#include <string.h>

/* The eval RNG stream: an epoch number no training run reaches, so that sampled evaluation
 * draws the same neighbours every time and never the training ones. */
#define EVAL_EPOCH UINT64_MAX

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
    acc_t acc[3];
    uint64_t bounds[4]; /* targets [bounds[s], bounds[s+1]) belong to split s */
    uint64_t seen;
} lw_ctx_t;

static int lw_sink(void *ctx, const uint64_t *ids, size_t n, const float *logits, const float *emb)
{
    (void)emb;
    lw_ctx_t *c = ctx;
    size_t i = 0;
    while (i < n) {
        uint64_t pos = c->seen + i;
        int s = 0;
        while (s < 3 && pos >= c->bounds[s + 1])
            s++;
        size_t k = (size_t)TG_MIN((uint64_t)(n - i), c->bounds[s + 1] - pos);
        int rc = accumulate(&c->acc[s], ids + i, k, logits + i * c->acc[s].C);
        if (rc < 0) return rc;
        i += k;
    }
    c->seen += n;
    return 0;
}

typedef struct {
    tg_run_t *r;
    uint32_t dim;
} gather_ctx_t;

static int eval_hook(void *ctx, tg_loader_item_t *it)
{
    gather_ctx_t *g = ctx;
    const tg_batch_t *b = &it->batch;
    float *X = malloc((size_t)b->num_nodes * g->dim * sizeof *X);
    if (!X) return tg_err(-ENOMEM, "evaluation: out of memory for %u feature rows", b->num_nodes);
    int rc = tg_store_gather(g->r->store, b->nodes, b->num_nodes, X);
    if (rc < 0) {
        free(X);
        return rc;
    }
    it->payload = X;
    return 0;
}

static void eval_hook_free(void *ctx, void *p)
{
    (void)ctx;
    free(p);
}

static int eval_sampled(tg_run_t *r, tg_model_t *m, int s, const int64_t *fanouts,
                        uint64_t batch_size, uint64_t seed, acc_t *a)
{
    const tg_model_config_t *cfg = tg_model_config(m);
    uint64_t n = r->split_n[s];
    if (n == 0) return 0;
    gather_ctx_t g = {r, r->store->dim};
    tg_loader_opts_t lo = {.adj = r->adj,
                           .num_layers = cfg->num_layers,
                           .fanouts = fanouts,
                           .seeds = r->split[s],
                           .num_seeds = n,
                           .batch_size = batch_size && batch_size < n ? batch_size : n,
                           .seed = seed,
                           .epoch = EVAL_EPOCH - (uint64_t)s,
                           .num_threads = 0,
                           .hook = eval_hook,
                           .hook_free = eval_hook_free,
                           .ctx = &g};
    tg_loader_t *ld;
    int rc = tg_loader_start(&ld, &lo);
    if (rc < 0) return rc;
    float *logits = NULL;
    size_t cap = 0;
    tg_loader_item_t *it;
    while ((rc = tg_loader_next(ld, &it)) > 0) {
        size_t need = (size_t)it->batch.num_seeds * cfg->out_dim;
        if (need > cap) {
            free(logits);
            logits = malloc(need * sizeof *logits);
            cap = logits ? need : 0;
        }
        if (!logits)
            rc = tg_err(-ENOMEM, "evaluation: out of memory for logits");
        else
            rc = tg_model_predict(m, &it->batch, it->payload, logits, NULL);
        if (rc >= 0) rc = accumulate(a, it->batch.nodes, it->batch.num_seeds, logits);
        tg_loader_item_free(ld, it);
        if (rc < 0) break;
    }
    free(logits);
    tg_loader_stop(ld);
    return rc;
}

int tg_run_evaluate(tg_run_t *r, tg_model_t *m, const int want[3], int sampled,
                    const int64_t *fanouts, uint64_t batch_size, uint64_t seed, uint64_t chunk,
                    tg_split_eval_t out[3])
{
    const tg_model_config_t *cfg = tg_model_config(m);
    int rc = 0;
    memset(out, 0, 3 * sizeof *out);
    if (sampled) {
        for (int s = 0; s < 3 && rc >= 0; s++) {
            if (!want[s]) continue;
            acc_t a = {.r = r, .C = cfg->out_dim, .multi = cfg->multi_label};
            rc = eval_sampled(r, m, s, fanouts, batch_size, seed, &a);
            finish(&a, &out[s]);
            free(a.y);
        }
        return rc;
    }
    lw_ctx_t c;
    memset(&c, 0, sizeof c);
    uint64_t total = 0;
    for (int s = 0; s < 3; s++) {
        c.acc[s].r = r;
        c.acc[s].C = cfg->out_dim;
        c.acc[s].multi = cfg->multi_label;
        c.bounds[s] = total;
        total += want[s] ? r->split_n[s] : 0;
    }
    c.bounds[3] = total;
    uint64_t *targets = malloc((total ? total : 1) * sizeof *targets);
    if (!targets)
        return tg_err(-ENOMEM, "evaluation: out of memory for %llu target ids",
                      (unsigned long long)total);
    for (int s = 0; s < 3; s++)
        if (want[s]) memcpy(targets + c.bounds[s], r->split[s], r->split_n[s] * sizeof *targets);
    if (total) {
        tg_lw_opts_t lo = {
            .chunk = chunk, .targets = targets, .num_targets = total, .sink = lw_sink, .ctx = &c};
        rc = tg_lw_forward(r, m, &lo);
    }
    for (int s = 0; s < 3; s++) {
        finish(&c.acc[s], &out[s]);
        free(c.acc[s].y);
    }
    free(targets);
    return rc;
}
