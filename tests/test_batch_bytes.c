/* tg_batch_bytes (graph/batch.c): a batch's array bytes, counted by hand on a built batch (node
 * ids, each block's indptr and indices, weights where a block has them), an empty batch, and a
 * sampled one against its own arrays. */
#include "tg_test.h"
#include "tiergnn/graph.h"

TG_TEST(by_hand)
{
    tg_block_t blk[2] = {{.num_dst = 5, .num_src = 9, .num_edges = 12},
                         {.num_dst = 2, .num_src = 5, .num_edges = 4}};
    float w[4];
    blk[1].weights = w;
    tg_batch_t b = {.num_layers = 2, .blocks = blk, .num_nodes = 9, .num_seeds = 2};
    TG_CHECK_EQ_U64(tg_batch_bytes(&b), 9 * 8 + (6 * 8 + 12 * 4) + (3 * 8 + 4 * 4 + 4 * 4));
    tg_batch_t none = {0};
    TG_CHECK_EQ_U64(tg_batch_bytes(&none), 0);
}

TG_TEST(sampled)
{
    enum { N = 40 };
    uint64_t ip[N + 1], ix[N * 3], seeds[6] = {1, 5, 9, 13, 17, 21};
    for (uint64_t v = 0; v < N; v++) {
        ip[v] = v * 3;
        for (uint64_t d = 0; d < 3; d++)
            ix[v * 3 + d] = (v * 7 + d * 11 + 1) % N;
    }
    ip[N] = N * 3;
    tg_adj_t *adj;
    TG_CHECK_OK(tg_adj_raw_create(&adj, N, N * 3, ip, ix, 8));
    tg_sampler_t *sm;
    int64_t fan[2] = {2, 3};
    TG_CHECK_OK(tg_sampler_create(&sm, adj, 2, fan));
    tg_rng_t r;
    tg_sampler_batch_rng(&r, 1, 0, 0);
    tg_batch_t b;
    TG_CHECK_OK(tg_sampler_sample(sm, seeds, 6, &r, &b));
    uint64_t want = (uint64_t)b.num_nodes * 8;
    for (int l = 0; l < b.num_layers; l++)
        want += ((uint64_t)b.blocks[l].num_dst + 1) * 8 + b.blocks[l].num_edges * 4 +
                (b.blocks[l].weights ? b.blocks[l].num_edges * 4 : 0);
    TG_CHECK_EQ_U64(tg_batch_bytes(&b), want);
    TG_CHECK(want > 6 * 8);
    tg_batch_free(&b);
    tg_sampler_destroy(sm);
    tg_adj_destroy(adj);
}

int main(void)
{
    TG_RUN(by_hand);
    TG_RUN(sampled);
    return tg_test_done();
}
