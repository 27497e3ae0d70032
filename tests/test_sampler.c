/* Node-wise sampler, adjacency interface and concurrent loader. */
#include "tg_test.h"

#include "tiergnn/graph.h"

/* A random graph without repeated edges: in-degree 0..maxdeg, sorted neighbour lists. */
static tg_adj_t *random_graph(uint64_t n, uint64_t maxdeg, uint64_t seed)
{
    tg_rng_t r;
    tg_rng_seed(&r, seed);
    uint64_t *indptr = malloc((n + 1) * sizeof *indptr);
    uint64_t *indices = malloc(n * maxdeg * sizeof *indices + 8);
    uint8_t *mark = calloc(n, 1);
    indptr[0] = 0;
    uint64_t e = 0;
    for (uint64_t v = 0; v < n; v++) {
        /* a few hubs with the maximum degree, the rest spread out */
        uint64_t deg = v % 17 == 0 ? maxdeg : tg_rng_below(&r, maxdeg + 1);
        uint64_t got = 0;
        while (got < deg) {
            uint64_t u = tg_rng_below(&r, n);
            if (!mark[u]) {
                mark[u] = 1;
                got++;
            }
        }
        for (uint64_t u = 0; u < n; u++)
            if (mark[u]) {
                indices[e++] = u;
                mark[u] = 0;
            }
        indptr[v + 1] = e;
    }
    free(mark);
    tg_adj_t *adj;
    if (tg_adj_memory_create(&adj, n, e, indptr, indices, 1) < 0) {
        fprintf(stderr, "%s\n", tg_errmsg());
        exit(1);
    }
    return adj;
}

static int is_neighbour(const tg_adj_t *adj, uint64_t v, uint64_t u)
{
    uint64_t beg = adj->indptr[v], end = adj->indptr[v + 1];
    for (uint64_t p = beg; p < end; p++) {
        uint64_t w;
        tg_adj_read((tg_adj_t *)adj, &p, 1, &w);
        if (w == u) return 1;
    }
    return 0;
}

/* Checks every structural promise of tg_batch_t against the graph. */
static void check_batch(const tg_adj_t *adj, const tg_batch_t *b, const uint64_t *seeds, size_t n,
                        const int64_t *fan, int L)
{
    TG_CHECK(b->num_layers == L);
    TG_CHECK_EQ_U64(b->num_seeds, n);
    TG_CHECK_EQ_U64(b->num_nodes, b->blocks[0].num_src);
    TG_CHECK_EQ_U64(b->blocks[L - 1].num_dst, n);
    for (size_t i = 0; i < n; i++)
        TG_CHECK_EQ_U64(b->nodes[i], seeds[i]);
    /* node ids distinct */
    for (uint32_t i = 0; i < b->num_nodes; i++)
        for (uint32_t j = i + 1; j < b->num_nodes; j++)
            if (b->nodes[i] == b->nodes[j]) {
                TG_FAIL("node %llu appears at %u and %u", (unsigned long long)b->nodes[i], i, j);
                return;
            }
    for (int l = 0; l < L; l++) {
        const tg_block_t *bl = &b->blocks[l];
        TG_CHECK(bl->num_dst <= bl->num_src);
        if (l + 1 < L) TG_CHECK_EQ_U64(b->blocks[l + 1].num_src, bl->num_dst);
        TG_CHECK_EQ_U64(bl->indptr[0], 0);
        TG_CHECK_EQ_U64(bl->indptr[bl->num_dst], bl->num_edges);
        for (uint32_t i = 0; i < bl->num_dst; i++) {
            uint64_t v = b->nodes[i];
            uint64_t deg = tg_adj_degree(adj, v);
            uint64_t want = fan[l] < 0 ? deg : TG_MIN((uint64_t)fan[l], deg);
            uint64_t k = bl->indptr[i + 1] - bl->indptr[i];
            if (k != want) {
                TG_FAIL("layer %d dst %u (node %llu): %llu edges, expected min(%lld, %llu)", l, i,
                        (unsigned long long)v, (unsigned long long)k, (long long)fan[l],
                        (unsigned long long)deg);
                return;
            }
            for (uint64_t e = bl->indptr[i]; e < bl->indptr[i + 1]; e++) {
                uint32_t s = bl->indices[e];
                if (s >= bl->num_src) {
                    TG_FAIL("layer %d: source %u >= num_src %u", l, s, bl->num_src);
                    return;
                }
                if (!is_neighbour(adj, v, b->nodes[s])) {
                    TG_FAIL("layer %d: %llu is not an in-neighbour of %llu", l,
                            (unsigned long long)b->nodes[s], (unsigned long long)v);
                    return;
                }
                for (uint64_t e2 = bl->indptr[i]; e2 < e; e2++)
                    if (bl->indices[e2] == s) {
                        TG_FAIL("layer %d dst %u: neighbour %u sampled twice", l, i, s);
                        return;
                    }
            }
        }
    }
}

TG_TEST(tiny_known_block)
{
    /* in-neighbours: 0 <- {1,2}; 1 <- {0,2,3}; 2 <- {0}; 3 <- {}; 4 <- {3} */
    static const uint64_t indptr[] = {0, 2, 5, 6, 6, 7};
    static const uint64_t indices[] = {1, 2, 0, 2, 3, 0, 3};
    tg_adj_t *adj;
    TG_CHECK_OK(tg_adj_memory_create(&adj, 5, 7, indptr, indices, 0));
    tg_sampler_t *s;
    int64_t fan[2] = {-1, -1};
    TG_CHECK_OK(tg_sampler_create(&s, adj, 2, fan));
    uint64_t seeds[2] = {4, 0};
    tg_rng_t r;
    tg_rng_seed(&r, 1);
    tg_batch_t b;
    TG_CHECK_OK(tg_sampler_sample(s, seeds, 2, &r, &b));
    static const uint64_t nodes[] = {4, 0, 3, 1, 2};
    TG_CHECK_EQ_U64(b.num_nodes, 5);
    for (int i = 0; i < 5; i++)
        TG_CHECK_EQ_U64(b.nodes[i], nodes[i]);
    /* block 1: dst [4, 0]; 4 <- 3 (local 2), 0 <- 1, 2 (locals 3, 4) */
    static const uint64_t ip1[] = {0, 1, 3};
    static const uint32_t ix1[] = {2, 3, 4};
    TG_CHECK_EQ_U64(b.blocks[1].num_dst, 2);
    TG_CHECK_EQ_U64(b.blocks[1].num_src, 5);
    for (int i = 0; i < 3; i++)
        TG_CHECK_EQ_U64(b.blocks[1].indptr[i], ip1[i]);
    for (int i = 0; i < 3; i++)
        TG_CHECK_EQ_U64(b.blocks[1].indices[i], ix1[i]);
    /* block 0: dst [4, 0, 3, 1, 2] */
    static const uint64_t ip0[] = {0, 1, 3, 3, 6, 7};
    static const uint32_t ix0[] = {2, 3, 4, 1, 4, 2, 1};
    TG_CHECK_EQ_U64(b.blocks[0].num_dst, 5);
    TG_CHECK_EQ_U64(b.blocks[0].num_src, 5);
    TG_CHECK_EQ_U64(b.blocks[0].num_edges, 7);
    for (int i = 0; i < 6; i++)
        TG_CHECK_EQ_U64(b.blocks[0].indptr[i], ip0[i]);
    for (int i = 0; i < 7; i++)
        TG_CHECK_EQ_U64(b.blocks[0].indices[i], ix0[i]);
    tg_batch_free(&b);

    /* fanout 0 (MLP): only the seeds, no edges */
    tg_sampler_t *s0;
    int64_t zero[2] = {0, 0};
    TG_CHECK_OK(tg_sampler_create(&s0, adj, 2, zero));
    TG_CHECK_OK(tg_sampler_sample(s0, seeds, 2, &r, &b));
    TG_CHECK_EQ_U64(b.num_nodes, 2);
    TG_CHECK_EQ_U64(b.blocks[0].num_edges, 0);
    TG_CHECK_EQ_U64(b.blocks[1].num_edges, 0);
    TG_CHECK_EQ_U64(b.blocks[0].num_src, 2);
    tg_batch_free(&b);
    tg_sampler_destroy(s0);
    tg_sampler_destroy(s);
    tg_adj_destroy(adj);
}

TG_TEST(sampled_properties)
{
    tg_adj_t *adj = random_graph(300, 40, 7);
    static const int64_t fans[][3] = {{5, 5, 5}, {2, 10, 25}, {40, 1, 3}, {0, 3, -1}, {33, 33, 33}};
    for (size_t f = 0; f < sizeof fans / sizeof fans[0]; f++) {
        tg_sampler_t *s;
        TG_CHECK_OK(tg_sampler_create(&s, adj, 3, fans[f]));
        for (int trial = 0; trial < 4; trial++) {
            uint64_t seeds[16];
            tg_rng_t r;
            tg_rng_seed2(&r, 99, (uint64_t)trial);
            for (int i = 0; i < 16; i++)
                seeds[i] = (uint64_t)(i * 17 + trial * 3) % 300;
            tg_batch_t b;
            TG_CHECK_OK(tg_sampler_sample(s, seeds, 16, &r, &b));
            check_batch(adj, &b, seeds, 16, fans[f], 3);
            tg_batch_free(&b);
        }
        tg_sampler_destroy(s);
    }
    tg_adj_destroy(adj);
}

TG_TEST(full_equals_graph)
{
    /* With -1 fanouts and every node a seed, block 0 is the graph itself. */
    uint64_t n = 120;
    tg_adj_t *adj = random_graph(n, 12, 3);
    uint64_t *seeds = malloc(n * sizeof *seeds);
    for (uint64_t i = 0; i < n; i++)
        seeds[i] = (i * 37) % n; /* a permutation (37 and 120 are coprime) */
    int64_t fan[1] = {-1};
    tg_sampler_t *s;
    TG_CHECK_OK(tg_sampler_create(&s, adj, 1, fan));
    tg_rng_t r;
    tg_rng_seed(&r, 5);
    tg_batch_t b;
    TG_CHECK_OK(tg_sampler_sample(s, seeds, n, &r, &b));
    TG_CHECK_EQ_U64(b.num_nodes, n);
    TG_CHECK_EQ_U64(b.blocks[0].num_edges, adj->num_edges);
    for (uint64_t i = 0; i < n; i++) {
        uint64_t v = seeds[i], beg = adj->indptr[v];
        TG_CHECK_EQ_U64(b.blocks[0].indptr[i + 1] - b.blocks[0].indptr[i], tg_adj_degree(adj, v));
        for (uint64_t k = 0; k < tg_adj_degree(adj, v); k++) {
            uint64_t p = beg + k, u;
            tg_adj_read(adj, &p, 1, &u);
            TG_CHECK_EQ_U64(b.nodes[b.blocks[0].indices[b.blocks[0].indptr[i] + k]], u);
        }
    }
    tg_batch_free(&b);
    tg_sampler_destroy(s);
    free(seeds);
    tg_adj_destroy(adj);
}

TG_TEST(uniform)
{
    /* One node with 10 neighbours, fanout 3 (linear path) and 40 of 100 (hash-set path): every
     * neighbour must be picked with probability k/deg. */
    static const struct {
        uint64_t deg, k;
    } cases[] = {{10, 3}, {100, 40}};
    for (size_t c = 0; c < 2; c++) {
        uint64_t deg = cases[c].deg, k = cases[c].k, n = deg + 1;
        uint64_t *indptr = calloc(n + 1, sizeof *indptr);
        uint64_t *indices = malloc(deg * sizeof *indices);
        for (uint64_t i = 0; i < deg; i++)
            indices[i] = i + 1;
        indptr[1] = deg;
        for (uint64_t v = 2; v <= n; v++)
            indptr[v] = deg;
        tg_adj_t *adj;
        TG_CHECK_OK(tg_adj_memory_create(&adj, n, deg, indptr, indices, 1));
        int64_t fan[1] = {(int64_t)k};
        tg_sampler_t *s;
        TG_CHECK_OK(tg_sampler_create(&s, adj, 1, fan));
        uint64_t counts[100] = {0};
        int trials = 20000;
        tg_rng_t r;
        tg_rng_seed(&r, 11);
        for (int t = 0; t < trials; t++) {
            uint64_t seed = 0;
            tg_batch_t b;
            TG_CHECK_OK(tg_sampler_sample(s, &seed, 1, &r, &b));
            for (uint64_t e = 0; e < b.blocks[0].num_edges; e++)
                counts[b.nodes[b.blocks[0].indices[e]] - 1]++;
            tg_batch_free(&b);
        }
        double expect = (double)trials * (double)k / (double)deg;
        for (uint64_t i = 0; i < deg; i++) /* 6 standard deviations at most */
            TG_CHECK_NEAR((double)counts[i], expect, 6 * sqrt(expect));
        tg_sampler_destroy(s);
        tg_adj_destroy(adj);
    }
}

/* Samples a whole epoch through the loader and returns a digest of every batch, in order. */
static uint32_t epoch_digest(tg_adj_t *adj, int threads, uint64_t seed, uint64_t epoch,
                             uint64_t *nb)
{
    uint64_t n = adj->num_nodes;
    uint64_t *order = malloc(n * sizeof *order);
    for (uint64_t i = 0; i < n; i++)
        order[i] = i;
    tg_sampler_shuffle_epoch(order, n, seed, epoch);
    int64_t fan[2] = {4, 7};
    tg_sloader_opts_t o = {.adj = adj,
                           .num_layers = 2,
                           .fanouts = fan,
                           .seeds = order,
                           .num_seeds = n,
                           .batch_size = 13,
                           .seed = seed,
                           .epoch = epoch,
                           .num_threads = threads,
                           .prefetch = 1};
    tg_sloader_t *ld;
    uint32_t crc = 0;
    *nb = 0;
    TG_CHECK_OK(tg_sloader_start(&ld, &o));
    tg_sloader_item_t *it;
    int rc;
    while ((rc = tg_sloader_next(ld, &it)) > 0) {
        tg_batch_t *b = &it->batch;
        TG_CHECK_EQ_U64(b->id, *nb);
        (*nb)++;
        crc = tg_crc32(crc, b->nodes, b->num_nodes * sizeof *b->nodes);
        for (int l = 0; l < 2; l++) {
            crc = tg_crc32(crc, b->blocks[l].indptr, (b->blocks[l].num_dst + 1) * sizeof(uint64_t));
            crc = tg_crc32(crc, b->blocks[l].indices, b->blocks[l].num_edges * sizeof(uint32_t));
        }
        tg_sloader_item_free(ld, it);
    }
    TG_CHECK(rc == 0);
    tg_sloader_stop(ld);
    free(order);
    return crc;
}

TG_TEST(deterministic_across_threads)
{
    tg_adj_t *adj = random_graph(400, 20, 21);
    uint64_t nb0, nb;
    uint32_t ref = epoch_digest(adj, 0, 42, 3, &nb0);
    TG_CHECK_EQ_U64(nb0, (400 + 12) / 13);
    for (int t = 1; t <= 4; t++) {
        uint32_t d = epoch_digest(adj, t, 42, 3, &nb);
        if (d != ref) TG_FAIL("epoch digest with %d threads %08x != inline %08x", t, d, ref);
        TG_CHECK_EQ_U64(nb, nb0);
    }
    /* a different epoch or seed changes the batches */
    TG_CHECK(epoch_digest(adj, 2, 42, 4, &nb) != ref);
    TG_CHECK(epoch_digest(adj, 2, 43, 3, &nb) != ref);
    tg_adj_destroy(adj);
}

TG_TEST(loader_stop_midway)
{
    /* Stopping with full queues must join the workers and free everything (ASan checks). */
    tg_adj_t *adj = random_graph(400, 20, 22);
    uint64_t n = adj->num_nodes;
    uint64_t *order = malloc(n * sizeof *order);
    for (uint64_t i = 0; i < n; i++)
        order[i] = i;
    int64_t fan[2] = {3, 3};
    tg_sloader_opts_t o = {.adj = adj,
                           .num_layers = 2,
                           .fanouts = fan,
                           .seeds = order,
                           .num_seeds = n,
                           .batch_size = 5,
                           .seed = 1,
                           .num_threads = 3};
    tg_sloader_t *ld;
    TG_CHECK_OK(tg_sloader_start(&ld, &o));
    tg_sloader_item_t *it;
    TG_CHECK(tg_sloader_next(ld, &it) == 1);
    tg_sloader_item_free(ld, it);
    tg_sloader_stop(ld);
    free(order);
    tg_adj_destroy(adj);
}

static int failing_hook(void *ctx, tg_sloader_item_t *it)
{
    (void)ctx;
    if (it->batch.id == 2) return tg_err(-EIO, "hook failed on purpose");
    return 0;
}

TG_TEST(errors)
{
    static const uint64_t indptr[] = {0, 1, 2};
    static const uint64_t indices[] = {1, 5}; /* 5 is not a node */
    tg_adj_t *adj;
    TG_CHECK_OK(tg_adj_memory_create(&adj, 2, 2, indptr, indices, 0));
    int64_t fan[1] = {-1};
    tg_sampler_t *s;
    TG_CHECK_OK(tg_sampler_create(&s, adj, 1, fan));
    tg_rng_t r;
    tg_rng_seed(&r, 1);
    tg_batch_t b;
    uint64_t dup[2] = {0, 0}, bad[1] = {7}, corrupt[1] = {1};
    TG_CHECK_ERR(tg_sampler_sample(s, dup, 2, &r, &b), "appears twice");
    TG_CHECK_ERR(tg_sampler_sample(s, bad, 1, &r, &b), "is not a node id");
    TG_CHECK_ERR(tg_sampler_sample(s, corrupt, 1, &r, &b), "corrupt indices");
    tg_sampler_destroy(s);

    static const uint64_t broken[] = {0, 2, 1};
    tg_adj_t *a2;
    TG_CHECK_ERR(tg_adj_memory_create(&a2, 2, 1, broken, indices, 0), "decreases");
    int64_t neg[1] = {-2};
    TG_CHECK_ERR(tg_sampler_create(&s, adj, 1, neg), "fanout -2");
    TG_CHECK_ERR(tg_sampler_create(&s, adj, 0, neg), "0 layers");

    int64_t f[TG_MAX_LAYERS];
    int nf;
    TG_CHECK_OK(tg_fanouts_parse("10,-1,0", f, &nf));
    TG_CHECK(nf == 3 && f[0] == 10 && f[1] == -1 && f[2] == 0);
    TG_CHECK_ERR(tg_fanouts_parse("10,,5", f, &nf), "item 2");
    TG_CHECK_ERR(tg_fanouts_parse("10,x", f, &nf), "--fanouts item 2");
    TG_CHECK_ERR(tg_fanouts_parse("-3", f, &nf), "expected -1 (all) or >= 0");
    TG_CHECK_ERR(tg_fanouts_parse("", f, &nf), "empty");

    /* a hook error reaches the consumer at the failing batch, for inline and threaded loaders */
    static const uint64_t ok_ip[] = {0, 1, 2};
    static const uint64_t ok_ix[] = {1, 0};
    tg_adj_t *a3;
    TG_CHECK_OK(tg_adj_memory_create(&a3, 2, 2, ok_ip, ok_ix, 0));
    uint64_t many[6] = {0, 1, 0, 1, 0, 1};
    for (int th = 0; th <= 2; th++) {
        tg_sloader_opts_t o = {.adj = a3,
                               .num_layers = 1,
                               .fanouts = fan,
                               .seeds = many,
                               .num_seeds = 6,
                               .batch_size = 1,
                               .num_threads = th,
                               .hook = failing_hook};
        tg_sloader_t *ld;
        TG_CHECK_OK(tg_sloader_start(&ld, &o));
        tg_sloader_item_t *it;
        TG_CHECK(tg_sloader_next(ld, &it) == 1);
        tg_sloader_item_free(ld, it);
        TG_CHECK(tg_sloader_next(ld, &it) == 1);
        tg_sloader_item_free(ld, it);
        TG_CHECK_ERR(tg_sloader_next(ld, &it), "batch 2: hook failed on purpose");
        tg_sloader_stop(ld);
    }
    tg_adj_destroy(a3);
    tg_adj_destroy(adj);
}

int main(void)
{
    TG_RUN(tiny_known_block);
    TG_RUN(sampled_properties);
    TG_RUN(full_equals_graph);
    TG_RUN(uniform);
    TG_RUN(deterministic_across_threads);
    TG_RUN(loader_stop_midway);
    TG_RUN(errors);
    return tg_test_done();
}
