/* The sample -> spill -> trace step (src/graph/batchtrace.c): the trace holds each batch's ids in
 * X order, equal to the batch the spill file gives back and to what a second loader samples;
 * the budget sees every array and gets it all back; a hint sizes the trace ahead; the ids can go
 * while the offsets and times stay; a loader that ends early, an abort, a budget too small and a
 * 64-bit id are refused with a message naming the trace. */
#include "tg_test.h"
#include "tiergnn/batchtrace.h"

#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

enum { N = 64, BS = 8, NB = N / BS, DEG = 3 };

typedef struct {
    uint64_t indptr[N + 1], indices[N * DEG], seeds[N];
    int64_t fanouts[1];
    tg_adj_t *adj;
} graph_t;

/* A ring: node i's in-neighbours are i + 1, i + 2 and i + 5 (mod N). */
static int graph_open(graph_t *g)
{
    static const int step[DEG] = {1, 2, 5};
    for (uint64_t i = 0; i < N; i++) {
        g->indptr[i] = i * DEG;
        for (int d = 0; d < DEG; d++)
            g->indices[i * DEG + (uint64_t)d] = (i + (uint64_t)step[d]) % N;
        g->seeds[i] = (i * 7) % N;
    }
    g->indptr[N] = N * DEG;
    g->fanouts[0] = 2;
    return tg_adj_raw_create(&g->adj, N, N * DEG, g->indptr, g->indices, 8);
}

static int loader(graph_t *g, tg_sloader_t **ld)
{
    tg_sloader_opts_t o = {.adj = g->adj,
                           .num_layers = 1,
                           .fanouts = g->fanouts,
                           .seeds = g->seeds,
                           .num_seeds = N,
                           .batch_size = BS,
                           .seed = 7,
                           .epoch = 1,
                           .num_threads = 1};
    return tg_sloader_start(ld, &o);
}

TG_TEST(trace_equals_the_batches)
{
    graph_t g;
    TG_CHECK_OK(graph_open(&g));
    tg_budget_t bg;
    tg_budget_init(&bg, 1 << 20);
    tg_spill_t *sp = NULL;
    TG_CHECK_OK(tg_spill_open(&sp, tg_test_tmpdir("batchtrace"), NULL));
    tg_sloader_t *ld = NULL, *ld2 = NULL;
    TG_CHECK_OK(loader(&g, &ld));
    TG_CHECK_OK(loader(&g, &ld2));
    if (!sp || !ld || !ld2) return;
    tg_btrace_t tr;
    tg_btrace_init(&tr, &bg, "test trace");
    /* two runs of the same trace: the first batches, then (cleared) the rest */
    TG_CHECK_OK(tg_btrace_sample(&tr, ld, 3, sp, NULL));
    TG_CHECK_EQ_U64(tr.n, 3);
    tg_batch_t b;
    for (uint64_t j = 0; j < 3; j++) {
        TG_CHECK(tg_spill_read(sp, &b) == 1);
        tg_sloader_item_t *it;
        TG_CHECK(tg_sloader_next(ld2, &it) == 1);
        TG_CHECK_EQ_U64(b.id, j);
        TG_CHECK_EQ_U64(tr.off[j + 1] - tr.off[j], b.num_nodes);
        TG_CHECK_EQ_U64(it->batch.num_nodes, b.num_nodes);
        for (uint32_t i = 0; i < b.num_nodes; i++) {
            TG_CHECK_EQ_U64(tr.ids[tr.off[j] + i], b.nodes[i]);
            TG_CHECK_EQ_U64(it->batch.nodes[i], b.nodes[i]);
        }
        TG_CHECK(tr.sample_s[j] >= 0);
        tg_batch_free(&b);
        tg_sloader_item_free(ld2, it);
    }
    TG_CHECK(tg_spill_read(sp, &b) == 0);
    TG_CHECK(bg.used > 0);
    tg_btrace_clear(&tr);
    TG_CHECK_OK(tg_spill_reset(sp));
    TG_CHECK_OK(tg_btrace_sample(&tr, ld, NB - 3, sp, NULL));
    TG_CHECK_EQ_U64(tr.n, NB - 3);
    TG_CHECK_EQ_U64(tr.off[0], 0);
    TG_CHECK_EQ_U64(tg_spill_count(sp), NB - 3);
    for (uint64_t j = 0; j < NB - 3; j++) {
        TG_CHECK(tg_spill_read(sp, &b) == 1);
        TG_CHECK_EQ_U64(b.id, j + 3);
        TG_CHECK_EQ_U64(tr.off[j + 1] - tr.off[j], b.num_nodes);
        for (uint32_t i = 0; i < b.num_nodes; i++)
            TG_CHECK_EQ_U64(tr.ids[tr.off[j] + i], b.nodes[i]);
        tg_batch_free(&b);
    }
    /* the loader is at the end of its epoch: one more batch is an error */
    TG_CHECK_ERR(tg_btrace_sample(&tr, ld, 1, NULL, NULL), "test trace: the sampler's epoch ended");
    tg_btrace_free(&tr);
    TG_CHECK_EQ_U64(bg.used, 0);
    tg_sloader_stop(ld);
    tg_sloader_stop(ld2);
    tg_spill_close(sp);
    tg_adj_destroy(g.adj);
    tg_budget_destroy(&bg);
}

TG_TEST(hint_and_free_ids)
{
    graph_t g;
    TG_CHECK_OK(graph_open(&g));
    tg_budget_t bg;
    tg_budget_init(&bg, 1 << 20);
    tg_sloader_t *ld = NULL;
    TG_CHECK_OK(loader(&g, &ld));
    if (!ld) return;
    tg_btrace_t tr;
    tg_btrace_init(&tr, &bg, "test trace");
    /* sized ahead: NB batches exactly, ids as the hint says (and 1024 more at least) */
    TG_CHECK_OK(tg_btrace_reserve(&tr, NB, 100));
    uint64_t held = bg.used;
    TG_CHECK_EQ_U64(held, NB * sizeof(double) + (NB + 1) * sizeof(uint64_t) + 1024 * 4);
    TG_CHECK_OK(tg_btrace_sample(&tr, ld, NB, NULL, NULL)); /* no spill: a profile */
    TG_CHECK_EQ_U64(bg.used, held);                         /* nothing grew */
    uint64_t acc = tg_btrace_accesses(&tr);
    TG_CHECK(acc >= N);
    tg_btrace_free_ids(&tr);
    TG_CHECK(!tr.ids);
    TG_CHECK_EQ_U64(bg.used, NB * sizeof(double) + (NB + 1) * sizeof(uint64_t));
    TG_CHECK_EQ_U64(tr.off[NB], acc); /* offsets and times stay */
    tg_batch_t b = {.num_nodes = 1};
    uint64_t one = 1;
    b.nodes = &one;
    TG_CHECK_ERR(tg_btrace_add(&tr, &b, 0), "its ids were freed");
    tg_btrace_free(&tr);
    TG_CHECK_EQ_U64(bg.used, 0);
    tg_sloader_stop(ld);
    tg_adj_destroy(g.adj);
    tg_budget_destroy(&bg);
}

TG_TEST(errors)
{
    graph_t g;
    TG_CHECK_OK(graph_open(&g));
    tg_sloader_t *ld = NULL;
    TG_CHECK_OK(loader(&g, &ld));
    if (!ld) return;
    /* an abort between two batches */
    tg_btrace_t tr;
    tg_btrace_init(&tr, NULL, "test trace");
    atomic_int stop;
    atomic_init(&stop, 1);
    TG_CHECK_ERR(tg_btrace_sample(&tr, ld, 2, NULL, &stop), "test trace: stopped");
    TG_CHECK_EQ_U64(tr.n, 0);
    /* a budget with no room names the trace */
    tg_budget_t bg;
    tg_budget_init(&bg, 64);
    tg_btrace_t small;
    tg_btrace_init(&small, &bg, "test trace in 64 bytes");
    TG_CHECK_ERR(tg_btrace_sample(&small, ld, 1, NULL, NULL), "test trace in 64 bytes");
    tg_btrace_free(&small);
    TG_CHECK_EQ_U64(bg.used, 0);
    tg_budget_destroy(&bg);
    /* a node id past 32 bits */
    uint64_t ids[2] = {5, (uint64_t)1 << 32};
    tg_batch_t b = {.id = 4, .num_nodes = 2, .nodes = ids};
    TG_CHECK_ERR(tg_btrace_add(&tr, &b, 0), "holds node 4294967296");
    TG_CHECK_EQ_U64(tr.n, 0);
    ids[1] = 6;
    TG_CHECK_OK(tg_btrace_add(&tr, &b, 0.5));
    TG_CHECK(tr.n == 1 && tr.off[1] == 2 && tr.ids[1] == 6 && tr.sample_s[0] == 0.5);
    tg_btrace_free(&tr);
    tg_btrace_free(&tr); /* twice is fine */
    tg_sloader_stop(ld);
    tg_adj_destroy(g.adj);
}

int main(void)
{
    TG_RUN(trace_equals_the_batches);
    TG_RUN(hint_and_free_ids);
    TG_RUN(errors);
    return tg_test_done();
}
