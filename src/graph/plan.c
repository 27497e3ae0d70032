/* The epoch plan: which seeds and which RNG make batch b (see tiergnn/graph.h). */
#include "tiergnn/graph.h"

#include <stdlib.h>
#include <string.h>

/* Evaluation's RNG streams use epoch numbers no training run reaches, so sampled evaluation
 * draws the same neighbours every time and never the training ones: split s's pass uses
 * EVAL_EPOCH - s, its node subset EVAL_EPOCH - 8 - s. */
#define EVAL_EPOCH UINT64_MAX

int tg_plan_whole_graph(uint64_t batch_size, uint64_t num_train, int num_layers,
                        const int64_t *fanouts)
{
    if (batch_size && batch_size < num_train) return 0;
    for (int l = 0; l < num_layers; l++)
        if (fanouts[l] != TG_FANOUT_ALL) return 0;
    return 1;
}

/* The geometry shared by both kinds of plan. */
static void geometry(tg_plan_t *p, uint64_t batch_size, uint64_t split_n, uint64_t max_batches)
{
    p->batch_size = batch_size && batch_size < split_n ? batch_size : p->num_order;
    p->all_batches = p->batch_size ? (p->num_order + p->batch_size - 1) / p->batch_size : 0;
    p->num_batches = max_batches ? TG_MIN(max_batches, p->all_batches) : p->all_batches;
    p->num_seeds = TG_MIN(p->num_order, p->num_batches * p->batch_size);
}

int tg_plan_init(tg_plan_t *p, const tg_plan_opts_t *o)
{
    memset(p, 0, sizeof *p);
    if (!o->train || !o->num_train)
        return tg_err(-EINVAL, "epoch plan: the training split is empty");
    if (o->num_layers < 1 || o->num_layers > TG_MAX_LAYERS || !o->fanouts)
        return tg_err(-EINVAL, "epoch plan: %d layers, expected 1..%d", o->num_layers,
                      TG_MAX_LAYERS);
    p->whole_graph = tg_plan_whole_graph(o->batch_size, o->num_train, o->num_layers, o->fanouts);
    p->seed = o->seed;
    p->train = o->train;
    p->num_order = p->whole_graph ? o->num_nodes : o->num_train;
    geometry(p, o->batch_size, o->num_train, o->max_batches);
    p->order = malloc((p->num_order ? p->num_order : 1) * sizeof *p->order);
    if (!p->order)
        return tg_err(-ENOMEM, "epoch plan: out of memory for the seed order (%llu ids)",
                      (unsigned long long)p->num_order);
    p->seeds = p->order;
    return 0;
}

void tg_plan_epoch(tg_plan_t *p, uint64_t epoch)
{
    p->epoch = epoch;
    if (p->whole_graph) {
        for (uint64_t i = 0; i < p->num_order; i++)
            p->order[i] = i;
    } else {
        memcpy(p->order, p->train, p->num_order * sizeof *p->order);
        tg_sampler_shuffle_epoch(p->order, p->num_order, p->seed, epoch);
    }
}

void tg_plan_destroy(tg_plan_t *p)
{
    if (!p) return;
    free(p->order);
    memset(p, 0, sizeof *p);
}

void tg_plan_view(tg_plan_t *p, const uint64_t *seeds, uint64_t n, uint64_t batch_size,
                  uint64_t seed, uint64_t epoch)
{
    memset(p, 0, sizeof *p);
    p->seed = seed;
    p->epoch = epoch;
    p->seeds = seeds;
    p->num_order = n;
    geometry(p, batch_size, n, 0);
}

uint64_t tg_plan_batch(const tg_plan_t *p, uint64_t b, const uint64_t **seeds, tg_rng_t *rng)
{
    uint64_t first = b * p->batch_size;
    tg_sampler_batch_rng(rng, p->seed, p->epoch, b);
    *seeds = p->seeds + first;
    return TG_MIN(p->batch_size, p->num_seeds - first);
}

int tg_plan_largest_batch(const tg_plan_t *p, tg_adj_t *adj, const tg_sampler_i *kind,
                          int num_layers, const int64_t *fanouts, uint64_t first, uint64_t k,
                          tg_batch_t *largest)
{
    memset(largest, 0, sizeof *largest);
    tg_sampler_t *s;
    int rc = tg_sampler_open(&s, kind, adj, num_layers, fanouts);
    if (rc < 0) return rc;
    uint64_t end = first < p->num_batches ? first + TG_MIN(k, p->num_batches - first) : first;
    for (uint64_t b = first; b < end; b++) {
        const uint64_t *seeds;
        tg_rng_t rng;
        uint64_t cnt = tg_plan_batch(p, b, &seeds, &rng);
        tg_batch_t bt;
        memset(&bt, 0, sizeof bt);
        if ((rc = tg_sampler_sample(s, seeds, (size_t)cnt, &rng, &bt)) < 0) break;
        if (bt.num_nodes > largest->num_nodes) {
            tg_batch_free(largest);
            *largest = bt;
        } else {
            tg_batch_free(&bt);
        }
    }
    tg_sampler_destroy(s);
    if (rc < 0) {
        tg_batch_free(largest);
        memset(largest, 0, sizeof *largest);
    }
    return rc < 0 ? rc : 0;
}

void tg_plan_eval(tg_plan_t *p, const uint64_t *nodes, uint64_t n, uint64_t batch_size,
                  uint64_t seed, int split)
{
    tg_plan_view(p, nodes, n, batch_size, seed, EVAL_EPOCH - (uint64_t)split);
}

void tg_plan_eval_subset(uint64_t *ids, size_t n, uint64_t seed, int split)
{
    tg_sampler_shuffle_epoch(ids, n, seed, EVAL_EPOCH - 8 - (uint64_t)split);
}
