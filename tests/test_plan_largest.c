/* tg_plan_largest_batch (graph/plan.c): the batch it keeps is, node for node, the largest of the
 * plan's batches [first, first + k) sampled one by one with the plan's seeds and RNG streams (the
 * first of equals); k past the plan's end stops there, a first past it samples nothing; a
 * sampler that cannot open and one that fails mid-way return its error with nothing kept
 * (ASan: nothing leaked). */
#include "tg_test.h"
#include "tiergnn/graph.h"

enum { N = 90, DEG = 4 };

static uint64_t indptr[N + 1], indices[N * DEG], seeds[N];

/* Node i's in-neighbours: i + 1, i + 2, i * 3 and (i * 7 + 5) mod N; degree 1 for every fifth
 * node, so batches differ in size. */
static tg_adj_t *graph(uint64_t num_edges)
{
    uint64_t e = 0;
    for (uint64_t i = 0; i < N; i++) {
        indptr[i] = e;
        uint64_t nb[DEG] = {(i + 1) % N, (i + 2) % N, (i * 3) % N, (i * 7 + 5) % N};
        for (int d = 0; d < (i % 5 ? DEG : 1); d++)
            indices[e++] = nb[d];
        seeds[i] = (i * 37) % N;
    }
    indptr[N] = e;
    tg_adj_t *adj = NULL;
    TG_CHECK_OK(tg_adj_raw_create(&adj, N, num_edges ? num_edges : e, indptr, indices, 8));
    return adj;
}

static const int64_t fan[2] = {3, 2};

TG_TEST(largest_of_the_range)
{
    tg_adj_t *adj = graph(0);
    tg_plan_t p;
    tg_plan_view(&p, seeds, N, 7, 11, 4); /* 13 batches, the last of 6 seeds */
    tg_sampler_t *sm;
    TG_CHECK_OK(tg_sampler_create(&sm, adj, 2, fan));
    uint64_t ranges[][2] = {{0, 2}, {3, 5}, {0, 13}, {10, 100}, {12, 1}, {13, 2}, {50, 3}};
    for (size_t t = 0; t < sizeof ranges / sizeof ranges[0]; t++) {
        uint64_t first = ranges[t][0], k = ranges[t][1];
        tg_batch_t big;
        TG_CHECK_OK(tg_plan_largest_batch(&p, adj, NULL, 2, fan, first, k, &big));
        /* by hand */
        tg_batch_t want;
        memset(&want, 0, sizeof want);
        for (uint64_t b = first; b < first + k && b < p.num_batches; b++) {
            const uint64_t *s;
            tg_rng_t r;
            uint64_t n = tg_plan_batch(&p, b, &s, &r);
            tg_batch_t bt;
            TG_CHECK_OK(tg_sampler_sample(sm, s, n, &r, &bt));
            if (bt.num_nodes > want.num_nodes) {
                tg_batch_free(&want);
                want = bt;
            } else {
                tg_batch_free(&bt);
            }
        }
        if (big.num_nodes != want.num_nodes || big.num_seeds != want.num_seeds ||
            (want.num_nodes && memcmp(big.nodes, want.nodes, want.num_nodes * sizeof *want.nodes)))
            TG_FAIL("range %llu+%llu: a batch of %u nodes, expected %u", (unsigned long long)first,
                    (unsigned long long)k, big.num_nodes, want.num_nodes);
        tg_batch_free(&big);
        tg_batch_free(&want);
    }
    tg_sampler_destroy(sm);
    tg_adj_destroy(adj);
}

TG_TEST(errors)
{
    tg_adj_t *adj = graph(0);
    tg_plan_t p;
    tg_plan_view(&p, seeds, N, 7, 11, 4);
    tg_batch_t big;
    int64_t bad[2] = {3, -5};
    TG_CHECK_ERR(tg_plan_largest_batch(&p, adj, NULL, 2, bad, 0, 2, &big), "layer");
    TG_CHECK(big.num_nodes == 0 && big.nodes == NULL);
    tg_adj_destroy(adj);
    /* the adjacency ends before the last lists: a batch that reaches them fails, whatever was
     * kept before it */
    adj = graph(N * 2);
    int64_t all[1] = {-1};
    tg_plan_view(&p, seeds, N, 30, 11, 4);
    TG_CHECK_ERR(tg_plan_largest_batch(&p, adj, NULL, 1, all, 0, 3, &big), "out of range");
    TG_CHECK(big.num_nodes == 0 && big.nodes == NULL);
    /* batch 0 of seeds below the cut samples, batch 1 reaches past it */
    uint64_t low[8] = {0, 1, 2, 3, 80, 81, 82, 83};
    tg_plan_view(&p, low, 8, 4, 11, 4);
    TG_CHECK_OK(tg_plan_largest_batch(&p, adj, NULL, 1, all, 0, 1, &big));
    TG_CHECK(big.num_nodes > 0);
    tg_batch_free(&big);
    TG_CHECK_ERR(tg_plan_largest_batch(&p, adj, NULL, 1, all, 0, 2, &big), "out of range");
    TG_CHECK(big.num_nodes == 0 && big.nodes == NULL);
    tg_adj_destroy(adj);
}

int main(void)
{
    TG_RUN(largest_of_the_range);
    TG_RUN(errors);
    return tg_test_done();
}
