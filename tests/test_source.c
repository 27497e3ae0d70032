/* The graph batch source: the epoch plan against the code it replaced (train.c's order and
 * whole-graph rule, the loader's batch b), the sampler table, the look-ahead source (order,
 * bounded memory, errors) and spill files (round trip, damaged records, directories, nothing
 * left behind after close or SIGKILL). */
#include <signal.h>
#include <stdatomic.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include "test_adj_disk_common.h"

typedef struct {
    tg_dataset_t *ds;
    tg_adj_t *adj;
    uint64_t *train, ntrain, N;
} graph_t;

static graph_t open_graph(void)
{
    const char *dir = tg_test_tmpdir("source_ds");
    tad_opts_t o;
    tad_default(&o);
    o.nodes = 1500;
    tad_write(dir, &o);
    graph_t g;
    g.ds = tad_open(dir);
    if (tg_adj_memory_open(&g.adj, g.ds) < 0 ||
        tg_dataset_load_split(g.ds, TG_FILE_TRAIN, &g.train, &g.ntrain) < 0)
        tad_fail("load", dir);
    g.N = g.ds->meta.num_nodes;
    return g;
}

static void close_graph(graph_t *g)
{
    free(g->train);
    tg_adj_destroy(g->adj);
    tg_dataset_close(g->ds);
}

/* ---------------------------------------------------------------- the code the plan replaced */

/* train.c's whole_graph_mode, MLP check included. */
static int old_whole(int mlp, uint64_t bs, uint64_t ntrain, int L, const int64_t *fan)
{
    if (bs && bs < ntrain) return 0;
    if (mlp) return 0;
    for (int l = 0; l < L; l++)
        if (fan[l] != TG_FANOUT_ALL) return 0;
    return 1;
}

typedef struct {
    int whole;
    uint64_t *order, nseeds, bsz, all, epoch_batches, pass_seeds;
} old_plan_t;

/* train.c's seed order and geometry for one epoch. */
static old_plan_t old_plan(const graph_t *g, int mlp, uint64_t bs, int L, const int64_t *fan,
                           uint64_t seed, uint64_t epoch, uint64_t max_batches)
{
    old_plan_t p;
    p.whole = old_whole(mlp, bs, g->ntrain, L, fan);
    p.nseeds = p.whole ? g->N : g->ntrain;
    p.bsz = bs && bs < g->ntrain ? bs : p.nseeds;
    p.order = malloc(p.nseeds * sizeof *p.order);
    if (p.whole) {
        for (uint64_t i = 0; i < g->N; i++)
            p.order[i] = i;
    } else {
        memcpy(p.order, g->train, g->ntrain * sizeof *p.order);
        tg_sampler_shuffle_epoch(p.order, g->ntrain, seed, epoch);
    }
    p.all = (p.nseeds + p.bsz - 1) / p.bsz;
    p.epoch_batches = max_batches ? TG_MIN(max_batches, p.all) : p.all;
    p.pass_seeds = TG_MIN(p.nseeds, p.epoch_batches * p.bsz);
    return p;
}

/* The loader's make_batch before the plan: seeds [b * bsz, ...) and the RNG of (seed, epoch, b). */
static void old_batch(tg_sampler_t *s, const uint64_t *order, uint64_t nseeds, uint64_t bsz,
                      uint64_t seed, uint64_t epoch, uint64_t b, tg_batch_t *out)
{
    uint64_t first = b * bsz, cnt = TG_MIN(bsz, nseeds - first);
    tg_rng_t r;
    tg_sampler_batch_rng(&r, seed, epoch, b);
    TG_CHECK_OK(tg_sampler_sample(s, order + first, (size_t)cnt, &r, out));
    out->id = b;
}

typedef struct {
    atomic_int live, peak; /* payloads alive = sampled batches alive */
    uint64_t fail_at;      /* the hook fails on this batch (UINT64_MAX: never) */
} count_ctx_t;

static int count_hook(void *ctx, tg_sloader_item_t *it)
{
    count_ctx_t *c = ctx;
    if (it->batch.id == c->fail_at) return tg_err(-EIO, "hook failed on purpose");
    int now = atomic_fetch_add(&c->live, 1) + 1;
    int p = atomic_load(&c->peak);
    while (now > p && !atomic_compare_exchange_weak(&c->peak, &p, now)) {
    }
    it->payload = &c->live; /* any non-NULL marker */
    return 0;
}

static void count_free(void *ctx, void *payload)
{
    (void)payload;
    atomic_fetch_sub(&((count_ctx_t *)ctx)->live, 1);
}

static tg_sloader_opts_t plan_loader(const graph_t *g, const tg_plan_t *p, int L,
                                     const int64_t *fan, int threads, count_ctx_t *c)
{
    return (tg_sloader_opts_t){.adj = g->adj,
                               .num_layers = L,
                               .fanouts = fan,
                               .seeds = p->seeds,
                               .num_seeds = p->num_seeds,
                               .batch_size = p->batch_size,
                               .seed = p->seed,
                               .epoch = p->epoch,
                               .num_threads = threads,
                               .prefetch = 2,
                               .hook = count_hook,
                               .hook_free = count_free,
                               .ctx = c};
}

/* A sampled plan (fanouts fan[0..2)) at `epoch`. */
static void make_plan(const graph_t *g, uint64_t bs, const int64_t *fan, uint64_t seed,
                      uint64_t epoch, tg_plan_t *p)
{
    tg_plan_opts_t po = {.num_nodes = g->N,
                         .train = g->train,
                         .num_train = g->ntrain,
                         .batch_size = bs,
                         .num_layers = 2,
                         .fanouts = fan,
                         .seed = seed};
    TG_CHECK_OK(tg_plan_init(p, &po));
    tg_plan_epoch(p, epoch);
}

/* Runs a loader over the plan from first_batch and compares every batch with the old code's. */
static void check_loader(const graph_t *g, const tg_plan_t *p, const old_plan_t *op, int L,
                         const int64_t *fan, int threads, uint64_t first, const char *what)
{
    count_ctx_t c = {.fail_at = UINT64_MAX};
    tg_sloader_opts_t o = plan_loader(g, p, L, fan, threads, &c);
    o.first_batch = first;
    tg_sloader_t *ld;
    tg_sampler_t *s;
    TG_CHECK_OK(tg_sampler_create(&s, g->adj, L, fan));
    TG_CHECK_OK(tg_sloader_start(&ld, &o));
    TG_CHECK_EQ_U64(tg_sloader_num_batches(ld), op->epoch_batches);
    tg_sloader_item_t *it;
    uint64_t b = first;
    int rc;
    while ((rc = tg_sloader_next(ld, &it)) > 0) {
        tg_batch_t ref;
        old_batch(s, op->order, op->pass_seeds, op->bsz, p->seed, p->epoch, b, &ref);
        TG_CHECK_EQ_U64(it->batch.id, b);
        char w[160];
        snprintf(w, sizeof w, "%s, %d threads, first %llu, batch %llu", what, threads,
                 (unsigned long long)first, (unsigned long long)b);
        tad_batches_equal(&it->batch, &ref, w);
        tg_batch_free(&ref);
        tg_sloader_item_free(ld, it);
        b++;
    }
    TG_CHECK(rc == 0);
    TG_CHECK_EQ_U64(b, op->epoch_batches);
    tg_sloader_stop(ld);
    TG_CHECK_EQ_U64(atomic_load(&c.live), 0);
    tg_sampler_destroy(s);
}

TG_TEST(plan_matches_old_code)
{
    graph_t g = open_graph();
    static const struct {
        int mlp;
        uint64_t bs, max_batches;
        int64_t fan[2];
        const char *what;
    } cases[] = {
        {0, 97, 0, {5, 3}, "sampled"},
        {0, 97, 3, {5, 3}, "sampled, 3 batches per epoch"},
        {0, 0, 0, {5, -1}, "one batch of the split"},
        {0, 0, 0, {-1, -1}, "whole graph"},
        {0, 100000, 0, {-1, -1}, "whole graph, batch size beyond the split"},
        {0, 200, 0, {-1, -1}, "full neighbourhoods in batches"},
        {1, 0, 0, {-1, -1}, "MLP"},
    };
    for (size_t c = 0; c < sizeof cases / sizeof *cases; c++) {
        int64_t fan[2] = {cases[c].fan[0], cases[c].fan[1]};
        if (cases[c].mlp) fan[0] = fan[1] = 0; /* what train.c does before planning */
        tg_plan_opts_t po = {.num_nodes = g.N,
                             .train = g.train,
                             .num_train = g.ntrain,
                             .batch_size = cases[c].bs,
                             .num_layers = 2,
                             .fanouts = fan,
                             .seed = 42,
                             .max_batches = cases[c].max_batches};
        tg_plan_t p;
        TG_CHECK_OK(tg_plan_init(&p, &po));
        for (uint64_t epoch = 0; epoch < 3; epoch++) {
            old_plan_t op = old_plan(&g, cases[c].mlp, cases[c].bs, 2, cases[c].fan, 42, epoch,
                                     cases[c].max_batches);
            tg_plan_epoch(&p, epoch);
            TG_CHECK_EQ_U64(p.whole_graph, op.whole);
            TG_CHECK_EQ_U64(tg_plan_whole_graph(cases[c].bs, g.ntrain, 2, fan), op.whole);
            TG_CHECK_EQ_U64(p.num_order, op.nseeds);
            TG_CHECK_EQ_U64(p.batch_size, op.bsz);
            TG_CHECK_EQ_U64(p.all_batches, op.all);
            TG_CHECK_EQ_U64(p.num_batches, op.epoch_batches);
            TG_CHECK_EQ_U64(p.num_seeds, op.pass_seeds);
            if (memcmp(p.seeds, op.order, op.nseeds * sizeof *op.order))
                TG_FAIL("%s, epoch %llu: seed orders differ", cases[c].what,
                        (unsigned long long)epoch);
            /* batch b's seeds and RNG, straight from the plan */
            for (uint64_t b = 0; b < p.num_batches; b++) {
                const uint64_t *seeds;
                tg_rng_t r1, r2;
                uint64_t n = tg_plan_batch(&p, b, &seeds, &r1);
                tg_sampler_batch_rng(&r2, 42, epoch, b);
                TG_CHECK(seeds == p.seeds + b * op.bsz);
                TG_CHECK_EQ_U64(n, TG_MIN(op.bsz, op.pass_seeds - b * op.bsz));
                TG_CHECK(memcmp(&r1, &r2, sizeof r1) == 0);
            }
            if (epoch == 1) /* whole epochs, and resumed mid-epoch, inline and threaded */
                for (int t = 0; t <= 3; t += 3) {
                    check_loader(&g, &p, &op, 2, fan, t, 0, cases[c].what);
                    check_loader(&g, &p, &op, 2, fan, t, op.epoch_batches / 2, cases[c].what);
                }
            free(op.order);
        }
        tg_plan_destroy(&p);
    }
    /* evaluation: the old eval.c batch size rule and streams */
    for (int s = 0; s < 3; s++) {
        for (uint64_t bs = 0; bs < 1000; bs += 333) {
            tg_plan_t p;
            tg_plan_eval(&p, g.train, g.ntrain, bs, 7, s);
            TG_CHECK_EQ_U64(p.batch_size, bs && bs < g.ntrain ? bs : g.ntrain);
            TG_CHECK_EQ_U64(p.epoch, UINT64_MAX - (uint64_t)s);
            TG_CHECK_EQ_U64(p.num_seeds, g.ntrain);
            TG_CHECK(p.seeds == g.train && p.seed == 7 && !p.whole_graph);
        }
        uint64_t *a = malloc(g.ntrain * 8), *b = malloc(g.ntrain * 8);
        memcpy(a, g.train, g.ntrain * 8);
        memcpy(b, g.train, g.ntrain * 8);
        tg_plan_eval_subset(a, g.ntrain, 7, s);
        tg_sampler_shuffle_epoch(b, g.ntrain, 7, UINT64_MAX - 8 - (uint64_t)s);
        TG_CHECK(memcmp(a, b, g.ntrain * 8) == 0);
        free(a);
        free(b);
    }
    /* errors */
    tg_plan_t p;
    int64_t fan[2] = {1, 1};
    tg_plan_opts_t po = {.num_nodes = g.N, .num_layers = 2, .fanouts = fan};
    TG_CHECK_ERR(tg_plan_init(&p, &po), "training split is empty");
    po.train = g.train;
    po.num_train = g.ntrain;
    po.num_layers = TG_MAX_LAYERS + 1;
    TG_CHECK_ERR(tg_plan_init(&p, &po), "layers");
    close_graph(&g);
}

/* ---------------------------------------------------------------- sampler table */

TG_TEST(sampler_table)
{
    graph_t g = open_graph();
    TG_CHECK(tg_samplers[0] == &tg_sampler_node);
    TG_CHECK(tg_sampler_find("node") == &tg_sampler_node);
    tg_err_clear();
    TG_CHECK(tg_sampler_find("ladies-not-yet") == NULL);
    TG_CHECK(strstr(tg_errmsg(), "unknown sampler 'ladies-not-yet'") != NULL);
    TG_CHECK(strstr(tg_errmsg(), "node") != NULL);
    int64_t fan[2] = {6, 4};
    tg_sampler_t *a, *b;
    TG_CHECK_OK(tg_sampler_open(&a, NULL, g.adj, 2, fan));
    TG_CHECK_OK(tg_sampler_create(&b, g.adj, 2, fan));
    TG_CHECK(a->iface == &tg_sampler_node && b->iface == &tg_sampler_node);
    for (uint64_t k = 0; k < 5; k++) {
        tg_rng_t r1, r2;
        tg_sampler_batch_rng(&r1, 3, 1, k);
        r2 = r1;
        tg_batch_t x, y;
        TG_CHECK_OK(tg_sampler_sample(a, g.train + 50 * k, 50, &r1, &x));
        TG_CHECK_OK(tg_sampler_sample(b, g.train + 50 * k, 50, &r2, &y));
        tad_batches_equal(&x, &y, "open vs create");
        tg_batch_free(&x);
        tg_batch_free(&y);
    }
    tg_sampler_destroy(a);
    tg_sampler_destroy(b);
    int64_t bad[2] = {3, -2};
    TG_CHECK_ERR(tg_sampler_open(&a, &tg_sampler_node, g.adj, 2, bad), "layer 1");
    TG_CHECK(a == NULL);
    TG_CHECK_ERR(tg_sampler_open(&a, NULL, NULL, 2, fan), "no adjacency");
    close_graph(&g);
}

/* ---------------------------------------------------------------- look-ahead source */

TG_TEST(lookahead_order_and_bounds)
{
    graph_t g = open_graph();
    int64_t fan[2] = {4, 4};
    tg_plan_t p;
    make_plan(&g, 37, fan, 5, 2, &p);
    tg_sampler_t *s;
    TG_CHECK_OK(tg_sampler_create(&s, g.adj, 2, fan));
    static const size_t ks[] = {0, 1, 3, 8};
    for (int t = 0; t <= 4; t++)
        for (size_t ki = 0; ki < 4; ki++) {
            size_t k = ks[ki];
            count_ctx_t c = {.fail_at = UINT64_MAX};
            tg_sloader_opts_t o = plan_loader(&g, &p, 2, fan, t, &c);
            uint64_t first = t == 2 ? 5 : 0; /* a resumed pass too */
            o.first_batch = first;
            tg_source_t *src;
            TG_CHECK_OK(tg_source_start(&src, &o, k));
            uint64_t nb = tg_source_num_batches(src);
            TG_CHECK_EQ_U64(nb, p.num_batches);
            const tg_sloader_item_t *ahead;
            TG_CHECK_ERR(tg_source_peek(src, k + 1, &ahead), "window holds");
            for (uint64_t b = first; b < nb; b++) {
                TG_CHECK_EQ_U64(tg_source_next_id(src), b);
                const tg_sloader_item_t *seen[9];
                for (size_t i = 0; i <= k; i++) {
                    int rc = tg_source_peek(src, i, &ahead);
                    TG_CHECK(rc == (b + i < nb ? 1 : 0));
                    if (rc == 1) TG_CHECK_EQ_U64(ahead->batch.id, b + i);
                    seen[i] = rc == 1 ? ahead : NULL;
                }
                tg_sloader_item_t *it;
                TG_CHECK(tg_source_next(src, &it) == 1);
                TG_CHECK(it == seen[0]); /* the peeked batch is the one handed out */
                tg_batch_t ref;
                old_batch(s, p.seeds, p.num_seeds, p.batch_size, 5, 2, b, &ref);
                char w[64];
                snprintf(w, sizeof w, "look-ahead %zu, %d threads, batch %llu", k, t,
                         (unsigned long long)b);
                tad_batches_equal(&it->batch, &ref, w);
                tg_batch_free(&ref);
                tg_source_item_free(src, it);
            }
            tg_sloader_item_t *it;
            TG_CHECK(tg_source_next(src, &it) == 0);
            TG_CHECK(tg_source_peek(src, 0, &ahead) == 0);
            /* window + each worker's queue and the batch it waits to queue + the caller's */
            int bound = (int)(k + 1) + t * (2 + 1) + 1;
            if (atomic_load(&c.peak) > bound)
                TG_FAIL("look-ahead %zu, %d threads: %d batches alive at once, bound %d", k, t,
                        atomic_load(&c.peak), bound);
            tg_source_stop(src);
            TG_CHECK_EQ_U64(atomic_load(&c.live), 0);
        }
    /* a loader error: the batches before it are handed out, peeks beyond it fail */
    for (int t = 0; t <= 2; t += 2) {
        count_ctx_t c = {.fail_at = 4};
        tg_sloader_opts_t o = plan_loader(&g, &p, 2, fan, t, &c);
        tg_source_t *src;
        TG_CHECK_OK(tg_source_start(&src, &o, 6));
        const tg_sloader_item_t *ahead;
        TG_CHECK_ERR(tg_source_peek(src, 6, &ahead), "batch 4: hook failed on purpose");
        TG_CHECK(tg_source_peek(src, 3, &ahead) == 1 && ahead->batch.id == 3);
        for (uint64_t b = 0; b < 4; b++) {
            tg_sloader_item_t *it;
            TG_CHECK(tg_source_next(src, &it) == 1);
            TG_CHECK_EQ_U64(it->batch.id, b);
            tg_source_item_free(src, it);
        }
        tg_sloader_item_t *it;
        TG_CHECK_ERR(tg_source_next(src, &it), "batch 4: hook failed on purpose");
        tg_source_stop(src); /* mid-epoch, with nothing in the window */
        TG_CHECK_EQ_U64(atomic_load(&c.live), 0);
    }
    /* stopping with a full window frees it */
    count_ctx_t c = {.fail_at = UINT64_MAX};
    tg_sloader_opts_t o = plan_loader(&g, &p, 2, fan, 3, &c);
    tg_source_t *src;
    TG_CHECK_OK(tg_source_start(&src, &o, 5));
    const tg_sloader_item_t *ahead;
    TG_CHECK(tg_source_peek(src, 5, &ahead) == 1);
    tg_source_stop(src);
    TG_CHECK_EQ_U64(atomic_load(&c.live), 0);
    TG_CHECK_ERR(tg_source_start(&src, &o, (size_t)1 << 30), "look-ahead");
    tg_sampler_destroy(s);
    tg_plan_destroy(&p);
    close_graph(&g);
}

/* ---------------------------------------------------------------- spill files */

/* A random batch with the layout of graph.h; ids above 2^32 when wide. */
static void random_batch(tg_rng_t *r, int wide, uint64_t id, tg_batch_t *b)
{
    memset(b, 0, sizeof *b);
    b->id = id;
    b->num_layers = 1 + (int)tg_rng_below(r, 4);
    b->blocks = calloc((size_t)b->num_layers, sizeof *b->blocks);
    /* sources shrink towards the output layer; sometimes a large batch that spans buffers */
    uint32_t src = 1 + (uint32_t)tg_rng_below(r, tg_rng_below(r, 10) == 0 ? 40000 : 600);
    b->num_nodes = src;
    b->nodes = malloc(src * sizeof *b->nodes);
    for (uint32_t i = 0; i < src; i++)
        b->nodes[i] = wide ? tg_rng_u64(r) : tg_rng_below(r, (uint64_t)1 << 32);
    if (wide && src > 1) b->nodes[0] = UINT32_MAX; /* the largest narrow value, among wide */
    for (int l = 0; l < b->num_layers; l++) {
        tg_block_t *bl = &b->blocks[l];
        bl->num_src = src;
        bl->num_dst = 1 + (uint32_t)tg_rng_below(r, src);
        bl->indptr = malloc((bl->num_dst + 1) * sizeof *bl->indptr);
        bl->indptr[0] = 0;
        int empty = tg_rng_below(r, 6) == 0; /* an MLP's block */
        for (uint32_t i = 0; i < bl->num_dst; i++)
            bl->indptr[i + 1] = bl->indptr[i] + (empty ? 0 : tg_rng_below(r, 12));
        bl->num_edges = bl->indptr[bl->num_dst];
        bl->indices = malloc((bl->num_edges ? bl->num_edges : 1) * sizeof *bl->indices);
        for (uint64_t e = 0; e < bl->num_edges; e++)
            bl->indices[e] = (uint32_t)tg_rng_below(r, src);
        src = bl->num_dst;
    }
    b->num_seeds = src;
}

/* Every field, not only what tad_batches_equal compares. */
static void check_same(const tg_batch_t *a, const tg_batch_t *b, const char *what)
{
    TG_CHECK_EQ_U64(a->id, b->id);
    tad_batches_equal(a, b, what);
}

static void round_trip(tg_spill_t *sp, int wide, uint64_t seed, int n)
{
    tg_rng_t r;
    tg_rng_seed(&r, seed);
    tg_batch_t *w = calloc((size_t)n, sizeof *w);
    for (int i = 0; i < n; i++) {
        random_batch(&r, wide, 1000 + (uint64_t)i * 3, &w[i]);
        TG_CHECK_OK(tg_spill_write(sp, &w[i]));
    }
    TG_CHECK_EQ_U64(tg_spill_count(sp), n);
    for (int pass = 0; pass < 2; pass++) {
        TG_CHECK_OK(tg_spill_rewind(sp));
        for (int i = 0; i < n; i++) {
            tg_batch_t b;
            TG_CHECK(tg_spill_read(sp, &b) == 1);
            char what[64];
            snprintf(what, sizeof what, "%s ids, record %d, pass %d", wide ? "u64" : "u32", i,
                     pass);
            check_same(&b, &w[i], what);
            tg_batch_free(&b);
        }
        tg_batch_t b;
        TG_CHECK(tg_spill_read(sp, &b) == 0);
    }
    for (int i = 0; i < n; i++)
        tg_batch_free(&w[i]);
    free(w);
}

TG_TEST(spill_round_trip)
{
    const char *dir = tg_test_tmpdir("spill_rt");
    tg_budget_t budget;
    tg_budget_init(&budget, 1 << 20);
    for (unsigned flags = 0; flags <= TG_SPILL_NAMED; flags++) {
        /* a 64 KiB buffer: records straddle refills, large ones span several */
        tg_spill_opts_t so = {.buf_bytes = 1, .budget = &budget, .flags = flags};
        tg_spill_t *sp;
        TG_CHECK_OK(tg_spill_open(&sp, dir, &so));
        TG_CHECK(strstr(tg_spill_name(sp), dir) != NULL);
        TG_CHECK_EQ_U64(tg_test_count_entries(dir, 1), 0); /* unnamed while open */
        round_trip(sp, 0, 11 + flags, 150);
        tg_batch_t b = {0};
        TG_CHECK_ERR(tg_spill_write(sp, &b), "write while reading");
        TG_CHECK_OK(tg_spill_reset(sp));
        TG_CHECK_EQ_U64(tg_spill_bytes(sp), 0);
        round_trip(sp, 1, 21 + flags, 150);
        TG_CHECK_OK(tg_spill_reset(sp));
        TG_CHECK_ERR(tg_spill_read(sp, &b), "read before tg_spill_rewind");
        TG_CHECK_OK(tg_spill_rewind(sp)); /* an empty file reads as no records */
        TG_CHECK(tg_spill_read(sp, &b) == 0);
        tg_spill_close(sp);
        TG_CHECK_EQ_U64(tg_test_count_entries(dir, 1), 0);
    }
    /* the buffer is accounted */
    tg_budget_t small;
    tg_budget_init(&small, 1 << 16);
    tg_spill_t *sp;
    tg_spill_opts_t so = {.buf_bytes = 1 << 20, .budget = &small};
    TG_CHECK_ERR(tg_spill_open(&sp, dir, &so), "spill buffer");
    tg_budget_destroy(&small);
    tg_budget_destroy(&budget);
}

/* Sampled batches of a loader, spilled ahead a superbatch at a time, equal the loader's. */
TG_TEST(spill_sampled_epoch)
{
    graph_t g = open_graph();
    const char *dir = tg_test_tmpdir("spill_epoch");
    int64_t fan[2] = {10, 5};
    tg_plan_t p;
    make_plan(&g, 64, fan, 9, 0, &p);
    count_ctx_t c = {.fail_at = UINT64_MAX};
    tg_sloader_opts_t o = plan_loader(&g, &p, 2, fan, 2, &c);
    tg_sloader_t *ld;
    TG_CHECK_OK(tg_sloader_start(&ld, &o));
    tg_sampler_t *s;
    TG_CHECK_OK(tg_sampler_create(&s, g.adj, 2, fan));
    tg_spill_t *sp;
    TG_CHECK_OK(tg_spill_open(&sp, dir, NULL));
    uint64_t next = 0, got;
    do {
        TG_CHECK_OK(tg_spill_fill(sp, ld, 4, &got));
        TG_CHECK_OK(tg_spill_rewind(sp));
        tg_batch_t b;
        for (uint64_t i = 0; i < got; i++, next++) {
            TG_CHECK(tg_spill_read(sp, &b) == 1);
            tg_batch_t ref;
            old_batch(s, p.seeds, p.num_seeds, p.batch_size, 9, 0, next, &ref);
            check_same(&b, &ref, "spilled superbatch");
            tg_batch_free(&ref);
            tg_batch_free(&b);
        }
        TG_CHECK(tg_spill_read(sp, &b) == 0);
        TG_CHECK_OK(tg_spill_reset(sp));
    } while (got == 4);
    TG_CHECK_EQ_U64(next, p.num_batches);
    TG_CHECK_EQ_U64(atomic_load(&c.live), 0);
    tg_spill_close(sp);
    tg_sampler_destroy(s);
    tg_sloader_stop(ld);
    tg_plan_destroy(&p);
    close_graph(&g);
}

/* Writes n random batches; off[i] = offset of record i, off[n] = the end. */
static tg_spill_t *spill_some(const char *dir, int n, uint64_t *off)
{
    tg_spill_t *sp;
    TG_CHECK_OK(tg_spill_open(&sp, dir, NULL));
    tg_rng_t r;
    tg_rng_seed(&r, 77);
    off[0] = 0;
    for (int i = 0; i < n; i++) {
        tg_batch_t b;
        random_batch(&r, i & 1, (uint64_t)i, &b);
        TG_CHECK_OK(tg_spill_write(sp, &b));
        tg_batch_free(&b);
        off[i + 1] = tg_spill_bytes(sp);
    }
    TG_CHECK_OK(tg_spill_rewind(sp));
    return sp;
}

/* Reads records until one fails; expects records before `bad` to be fine and the error to name
 * the file, the record's offset and `needle`. */
static void expect_bad(tg_spill_t *sp, int bad, uint64_t off, const char *needle)
{
    tg_batch_t b;
    for (int i = 0; i < bad; i++) {
        TG_CHECK(tg_spill_read(sp, &b) == 1);
        tg_batch_free(&b);
    }
    char want[128];
    snprintf(want, sizeof want, "record at offset %llu", (unsigned long long)off);
    TG_CHECK_ERR(tg_spill_read(sp, &b), needle);
    TG_CHECK(strstr(tg_errmsg(), want) != NULL);
    TG_CHECK(strstr(tg_errmsg(), tg_spill_name(sp)) != NULL);
    TG_CHECK(b.blocks == NULL && b.nodes == NULL);
    TG_CHECK_ERR(tg_spill_read(sp, &b), "earlier error");
    tg_spill_close(sp);
}

static void poke(tg_spill_t *sp, uint64_t at, const void *p, size_t n)
{
    TG_CHECK(pwrite(tg_spill_fd(sp), p, n, (off_t)at) == (ssize_t)n);
}

TG_TEST(spill_damaged_records)
{
    const char *dir = tg_test_tmpdir("spill_bad");
    uint64_t off[9];
    /* a flipped payload byte */
    tg_spill_t *sp = spill_some(dir, 8, off);
    uint8_t x;
    TG_CHECK(pread(tg_spill_fd(sp), &x, 1, (off_t)(off[3] + 100)) == 1);
    x ^= 0x40;
    poke(sp, off[3] + 100, &x, 1);
    expect_bad(sp, 3, off[3], "CRC mismatch");
    /* a flipped stored CRC */
    sp = spill_some(dir, 8, off);
    TG_CHECK(pread(tg_spill_fd(sp), &x, 1, (off_t)(off[6] - 1)) == 1);
    x ^= 1;
    poke(sp, off[6] - 1, &x, 1);
    expect_bad(sp, 5, off[5], "CRC mismatch");
    /* a damaged magic */
    sp = spill_some(dir, 8, off);
    poke(sp, off[2], "XXXX", 4);
    expect_bad(sp, 2, off[2], "bad magic");
    /* an edge count beyond the file */
    sp = spill_some(dir, 8, off);
    uint64_t big = (uint64_t)1 << 40;
    poke(sp, off[4] + 40 + 8, &big, 8);
    expect_bad(sp, 4, off[4], "more than the file holds");
    /* a node count that disagrees with the payload size */
    sp = spill_some(dir, 8, off);
    uint32_t nn;
    TG_CHECK(pread(tg_spill_fd(sp), &nn, 4, (off_t)(off[1] + 20)) == 4);
    nn++;
    poke(sp, off[1] + 20, &nn, 4);
    expect_bad(sp, 1, off[1], "payload size");
    /* truncated inside a record, at a record boundary, inside a header */
    static const int cut_rec[3] = {5, 6, 7};
    static const uint64_t cut_at[3] = {1000, 0, 10};
    for (int c = 0; c < 3; c++) {
        sp = spill_some(dir, 8, off);
        uint64_t at =
            off[cut_rec[c]] + TG_MIN(cut_at[c], off[cut_rec[c] + 1] - off[cut_rec[c]] - 1);
        TG_CHECK(ftruncate(tg_spill_fd(sp), (off_t)at) == 0);
        char want[64];
        snprintf(want, sizeof want, "the file ends at offset %llu", (unsigned long long)at);
        expect_bad(sp, cut_rec[c], off[cut_rec[c]], want);
    }
    TG_CHECK_EQ_U64(tg_test_count_entries(dir, 1), 0);
}

TG_TEST(spill_directory_errors)
{
    const char *dir = tg_test_tmpdir("spill_dirs");
    char path[4200];
    tg_spill_t *sp;
    snprintf(path, sizeof path, "%s/missing", dir);
    TG_CHECK_ERR(tg_spill_open(&sp, path, NULL), path);
    TG_CHECK(strstr(tg_errmsg(), "No such file") != NULL);
    TG_CHECK(sp == NULL);
    snprintf(path, sizeof path, "%s/file", dir);
    tg_test_write_file(path, "x");
    TG_CHECK_ERR(tg_spill_open(&sp, path, NULL), "is not a directory");
    TG_CHECK_ERR(tg_spill_open(&sp, "", NULL), "no directory");
    /* unwritable: a read-only directory (root writes anyway: then /sys, which refuses both
     * O_TMPFILE and named files) */
    const char *ro = "/sys";
    if (geteuid() != 0) {
        snprintf(path, sizeof path, "%s/ro", dir);
        TG_CHECK(mkdir(path, 0500) == 0);
        ro = path;
    }
    struct stat st;
    if (stat(ro, &st) == 0) {
        for (unsigned flags = 0; flags <= TG_SPILL_NAMED; flags++) {
            tg_spill_opts_t so = {.flags = flags};
            char want[4300];
            snprintf(want, sizeof want, "cannot create a spill file in %s", ro);
            TG_CHECK_ERR(tg_spill_open(&sp, ro, &so), want);
        }
    }
    if (ro == path) rmdir(path);
}

/* A child that spills batches forever; the parent kills it once it has written a few buffers.
 * The directory must be empty afterwards. */
TG_TEST(spill_gone_after_sigkill)
{
    const char *dir = tg_test_tmpdir("spill_kill");
    for (unsigned flags = 0; flags <= TG_SPILL_NAMED; flags++) {
        int fds[2];
        TG_CHECK(pipe(fds) == 0);
        pid_t pid = fork();
        if (pid == 0) {
            close(fds[0]);
            tg_spill_opts_t so = {.buf_bytes = 1 << 16, .flags = flags};
            tg_spill_t *sp;
            if (tg_spill_open(&sp, dir, &so) < 0) _exit(2);
            tg_rng_t r;
            tg_rng_seed(&r, 5);
            tg_batch_t b;
            random_batch(&r, 1, 0, &b);
            for (uint64_t i = 0;; i++) {
                b.id = i;
                if (tg_spill_write(sp, &b) < 0) _exit(3);
                if (i == 20 && write(fds[1], "w", 1) != 1) _exit(4);
                if (i > 20 && tg_spill_bytes(sp) > ((uint64_t)1 << 30)) {
                    tg_spill_reset(sp); /* keep the disk use bounded while waiting */
                }
            }
        }
        close(fds[1]);
        char c;
        TG_CHECK(read(fds[0], &c, 1) == 1);
        /* mid-write: the child is still appending */
        TG_CHECK(kill(pid, SIGKILL) == 0);
        int status;
        TG_CHECK(waitpid(pid, &status, 0) == pid);
        TG_CHECK(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);
        close(fds[0]);
        TG_CHECK_EQ_U64(tg_test_count_entries(dir, 1), 0);
    }
}

int main(void)
{
    TG_RUN(plan_matches_old_code);
    TG_RUN(sampler_table);
    TG_RUN(lookahead_order_and_bounds);
    TG_RUN(spill_round_trip);
    TG_RUN(spill_sampled_epoch);
    TG_RUN(spill_damaged_records);
    TG_RUN(spill_directory_errors);
    TG_RUN(spill_gone_after_sigkill);
    return tg_test_done();
}
