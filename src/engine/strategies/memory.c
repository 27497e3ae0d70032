/* Strategy "memory": graph and features in RAM. Sampler threads (tg_sloader_t) sample each batch
 * and gather its rows from the in-memory store right after, ahead of the trainer; the trainer
 * runs the steps in batch-id order. The reference every other strategy must match. */
#include "../engine-impl.h"
#include "../plan_cost.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct tg_strategy {
    tg_run_t *r;
    tg_strategy_opts_t o;
};

static uint64_t memory_min_bytes(const tg_dataset_t *ds, const tg_strategy_opts_t *o, char *why,
                                 size_t why_len)
{
    (void)o;
    const tg_meta_t *m = &ds->meta;
    /* The in-memory adjacency widens indices to u64; the store holds f32 rows. */
    uint64_t adj = (m->num_nodes + 1 + m->num_edges) * sizeof(uint64_t);
    uint64_t feat = m->num_nodes * m->feat_dim * sizeof(float);
    char a[32], b[32];
    snprintf(why, why_len, "in-memory adjacency %s, in-memory features %s",
             tg_fmt_bytes(adj, a, sizeof a), tg_fmt_bytes(feat, b, sizeof b));
    return adj + feat;
}

static int memory_open(tg_strategy_t **out, tg_run_t *r, const tg_strategy_opts_t *o)
{
    *out = NULL;
    const tg_meta_t *m = &r->ds->meta;
    /* The adjacency in RAM is part of the data budget: indptr (N+1) and indices (E), as u64. */
    uint64_t adj_bytes = (m->num_nodes + 1 + m->num_edges) * sizeof(uint64_t);
    int rc = tg_budget_reserve(&r->budget, adj_bytes, "in-memory adjacency");
    if (rc < 0) return rc;
    if ((rc = tg_adj_memory_open(&r->adj, r->ds)) < 0) {
        tg_budget_release(&r->budget, adj_bytes);
        return rc;
    }
    tg_store_opts_t so = {.normalize = o->normalize, .budget = &r->budget, .rowcrc = r->rowcrc};
    if ((rc = tg_store_memory_open(&r->store, r->ds, &so)) < 0) return rc;
    tg_strategy_t *s = calloc(1, sizeof *s);
    if (!s) return tg_err(-ENOMEM, "strategy memory: out of memory");
    s->r = r;
    s->o = *o;
    *out = s;
    return 0;
}

static int memory_gather(void *ctx, const tg_batch_t *b, float *X)
{
    tg_strategy_t *s = ctx;
    return tg_store_gather(s->r->store, b->nodes, b->num_nodes, X);
}

static int memory_pass(tg_strategy_t *s, const tg_pass_t *p, tg_pass_stats_t *st)
{
    return tg_gather_pass(s->r, p, s->r->sopts.sampler_threads, 2, memory_gather, s, st);
}

static void memory_close(tg_strategy_t *s)
{
    free(s);
}

static int memory_in_flight(const tg_strategy_opts_t *o)
{
    return tg_gather_pass_in_flight(o->sampler_threads, 2);
}

/* The cost model: nothing is read during an epoch; sampler threads sample and gather, the
 * trainer trains, all on the cores. It runs only where the rows (f32), the u64 indices and indptr
 * fit in what the budget leaves beside its matrices. */
static int memory_predict(const tg_cost_inputs_t *in, tg_cost_pred_t *p)
{
    const tg_cost_dataset_t *d = &in->data;
    double need = (double)d->nodes * d->feat_dim * sizeof(float) + (double)d->edges * 8 +
                  ((double)d->nodes + 1) * 8;
    double have = tg_cost_cache_bytes(in, tg_cost_matrices(&tg_strategy_memory, in));
    p->sample_s = tg_cost_sample_s(in);
    p->gather_s = tg_cost_gather_s(in);
    p->compute_s = tg_cost_compute_s(in);
    tg_cost_overlap(in, p);
    if (need > have)
        tg_cost_infeasible(p, "graph and features need %.0f MiB in RAM, the budget leaves %.0f MiB",
                           need / 1048576, have / 1048576);
    else
        snprintf(p->why, sizeof p->why, "all in RAM: sampling, gathering and training on %d cores",
                 in->machine.cores);
    return 0;
}

const tg_strategy_i tg_strategy_memory = {
    .info = {.name = "memory",
             .summary = "graph and features in RAM; sampler threads sample and gather ahead",
             .caps = TG_STRAT_EXACT | TG_STRAT_IN_RAM},
    .min_bytes = memory_min_bytes,
    .open = memory_open,
    .pass = memory_pass,
    .close = memory_close,
    .batches_in_flight = memory_in_flight,
    .predict = memory_predict,
};
