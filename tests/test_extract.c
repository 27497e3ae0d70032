/* store/extract on real feature files with real io/ (io_uring where the machine has it): every
 * extracted row equals the file's (f32 rows of 64 and 512 bytes, f16 rows, normalised or not,
 * one and several batches per group, duplicate nodes, chunks of 1 to many rows, with and
 * without the feature buffer, with a static tier in front, merging through holes or not,
 * several workers at once over a small buffer); tier counters are exact; an injected EIO and a
 * short read (file truncated under the run) fail with the file and offset in the message,
 * report through the fail hook once, and leave the feature buffer consistent; an abort returns
 * -ECANCELED; the plan fits tight budgets; the static tier picks its table and refuses bad
 * input; tg_feat_rows_f32 converts in place. */
#include "test_feat_common.h"

#include <pthread.h>
#include <stdatomic.h>
#include <time.h>

#include "tiergnn/extract.h"
#include "tiergnn/store.h"

enum { N = 3000 };

static const char *dir;

static float fval(uint64_t node, size_t j)
{
    return tfeat_val(node, j);
}

static char *write_features(const char *name, uint32_t dim, tg_feat_dtype_t dtype)
{
    return tfeat_write(dir, name, N, dim, dtype);
}

/* The row the model must see: the file's values, normalised when asked. */
static void expect_row(float *out, uint64_t node, uint32_t dim, int normalize)
{
    for (uint32_t j = 0; j < dim; j++)
        out[j] = fval(node, j);
    if (normalize) tg_feat_normalize_rows(out, 1, dim);
}

/* ---------------------------------------------------------------- a rig */

typedef struct {
    uint32_t dim;
    tg_feat_dtype_t dtype;
    int featbuf, normalize, tier, E;
    int overlap; /* two chunks per worker in flight (with featbuf) */
    uint32_t chunk;
    int64_t gap;
    uint64_t cache_bytes; /* feature buffer size (0 = whole file) */
} cfg_t;

typedef struct {
    cfg_t c;
    tg_budget_t budget;
    tg_io_file_t *f;
    tg_tier_t *tier;
    tg_extract_t *ex;
    tg_extract_plan_t pl;
    uint64_t *hot; /* the static tier's nodes: every 7th */
    uint64_t nhot;
} rig_t;

static int rig_open(rig_t *g, const char *path, const cfg_t *c)
{
    memset(g, 0, sizeof *g);
    g->c = *c;
    tg_budget_init(&g->budget, 0);
    int rc = tg_io_file_open(&g->f, path, 0);
    if (rc < 0) return rc;
    tg_extract_plan_opts_t po;
    tg_extract_plan_opts_default(&po);
    po.num_nodes = N;
    po.feat_dim = c->dim;
    po.dtype = c->dtype;
    po.extractors = c->E ? c->E : 1;
    po.io_depth = 8;
    po.io_gap = c->gap;
    po.chunk_rows = c->chunk;
    po.featbuf = c->featbuf;
    po.overlap = c->overlap;
    if ((rc = tg_extract_plan(&g->pl, &po)) < 0) return rc;
    TG_CHECK(g->pl.overlap == (c->featbuf && c->overlap));
    tg_tier_t *tiers[1];
    if (c->tier) {
        g->hot = malloc(N * sizeof *g->hot);
        for (uint64_t v = 0; v < N; v += 7)
            g->hot[g->nhot++] = v;
        tg_tier_static_opts_t so = {
            .name = "hot", .feat = g->f, .num_nodes = N, .feat_dim = c->dim, .dtype = c->dtype};
        if ((rc = tg_tier_static_create(&g->tier, &so, g->hot, g->nhot, &g->budget)) < 0) return rc;
        tiers[0] = g->tier;
    }
    tg_extract_opts_t eo = {.plan = &g->pl,
                            .feat = g->f,
                            .normalize = c->normalize,
                            .budget = &g->budget,
                            .tiers = tiers,
                            .ntiers = c->tier ? 1 : 0,
                            .cache_bytes = c->cache_bytes ? c->cache_bytes : 64 << 20,
                            .who = "test"};
    return tg_extract_create(&g->ex, &eo);
}

static void rig_close(rig_t *g)
{
    tg_extract_destroy(g->ex);
    tg_tier_destroy(g->tier);
    tg_io_file_close(g->f);
    TG_CHECK_EQ_U64(g->budget.used, 0); /* every byte returned */
    tg_budget_destroy(&g->budget);
    free(g->hot);
}

/* What the hooks saw. */
typedef struct {
    int fails, last_rc;
    char msg[1024];
    int64_t scratch;
} rec_t;

static void rec_fail(void *ctx, int rc, const char *msg)
{
    rec_t *r = ctx;
    if (!r->fails++) snprintf(r->msg, sizeof r->msg, "%s", msg);
    r->last_rc = rc;
}
static void rec_scratch(void *ctx, int64_t b)
{
    ((rec_t *)ctx)->scratch += b;
}

/* nb batches of random lengths with duplicates (within and across batches). */
typedef struct {
    tg_extract_batch_t b[TG_EXTRACT_MAX_GROUP];
    uint64_t *nodes[TG_EXTRACT_MAX_GROUP];
    int nb;
} group_t;

static void group_make(group_t *G, tg_rng_t *r, int nb, uint64_t first_id, uint32_t dim)
{
    memset(G, 0, sizeof *G);
    G->nb = nb;
    for (int j = 0; j < nb; j++) {
        uint32_t n = 1 + (uint32_t)tg_rng_below(r, 400);
        G->nodes[j] = malloc(n * sizeof(uint64_t));
        for (uint32_t i = 0; i < n; i++)
            G->nodes[j][i] = (i && tg_rng_below(r, 4) == 0) ? G->nodes[j][tg_rng_below(r, i)]
                             : tg_rng_below(r, 2)           ? tg_rng_below(r, 200) /* shared */
                                                            : tg_rng_below(r, N);
        G->b[j] = (tg_extract_batch_t){.id = first_id + (uint64_t)j,
                                       .nodes = G->nodes[j],
                                       .n = n,
                                       .X = malloc((size_t)n * dim * sizeof(float))};
        memset(G->b[j].X, 0xff, (size_t)n * dim * sizeof(float)); /* NaN: a missed row shows */
    }
}

static void group_free(group_t *G)
{
    for (int j = 0; j < G->nb; j++) {
        free(G->nodes[j]);
        free(G->b[j].X);
    }
}

/* Rows of X that differ from the file. */
static uint64_t group_bad_rows(const group_t *G, uint32_t dim, int normalize)
{
    float *want = malloc(dim * sizeof *want);
    uint64_t bad = 0;
    for (int j = 0; j < G->nb; j++)
        for (uint32_t i = 0; i < G->b[j].n; i++) {
            expect_row(want, G->nodes[j][i], dim, normalize);
            if (memcmp(want, G->b[j].X + (size_t)i * dim, dim * sizeof(float))) bad++;
        }
    free(want);
    return bad;
}

/* Distinct nodes of a group, and how many of them the static tier holds (every 7th). */
static uint64_t group_unique(const group_t *G, uint64_t *in_tier)
{
    uint8_t *seen = calloc(N, 1);
    uint64_t u = 0;
    *in_tier = 0;
    for (int j = 0; j < G->nb; j++)
        for (uint32_t i = 0; i < G->b[j].n; i++)
            if (!seen[G->nodes[j][i]]++) {
                u++;
                if (G->nodes[j][i] % 7 == 0) (*in_tier)++;
            }
    free(seen);
    return u;
}

/* ---------------------------------------------------------------- rows */

static void rows_case(const char *path, const cfg_t *c, tg_rng_t *r)
{
    rig_t g;
    if (rig_open(&g, path, c) < 0) {
        TG_FAIL("open (dim %u %s featbuf %d chunk %u): %s", c->dim,
                c->dtype == TG_F16 ? "f16" : "f32", c->featbuf, c->chunk, tg_errmsg());
        rig_close(&g);
        return;
    }
    for (int round = 0; round < 4; round++) {
        int nb = round % 2 ? 3 : 1;
        group_t G;
        group_make(&G, r, nb, (uint64_t)round * (uint64_t)nb, c->dim);
        rec_t rec = {0};
        tg_extract_hooks_t hk = {.fail = rec_fail, .scratch = rec_scratch, .ctx = &rec};
        int rc = tg_extract_group(tg_extract_worker(g.ex, 0), G.b, nb, &hk);
        if (rc < 0) TG_FAIL("group: %s", tg_errmsg());
        uint64_t bad = group_bad_rows(&G, c->dim, c->normalize);
        if (bad)
            TG_FAIL("%llu wrong rows (dim %u %s norm %d featbuf %d overlap %d tier %d chunk %u "
                    "gap %lld, %d batches)",
                    (unsigned long long)bad, c->dim, c->dtype == TG_F16 ? "f16" : "f32",
                    c->normalize, c->featbuf, c->overlap, c->tier, c->chunk, (long long)c->gap, nb);
        TG_CHECK(rec.fails == 0);
        TG_CHECK(rec.scratch == 0); /* every scratch byte reported was given back */
        group_free(&G);
    }
    if (g.ex && tg_extract_featbuf(g.ex)) TG_CHECK_OK(tg_featbuf_check(tg_extract_featbuf(g.ex)));
    rig_close(&g);
}

TG_TEST(rows_equal_the_file)
{
    static const struct {
        uint32_t dim;
        tg_feat_dtype_t dtype;
    } files[] = {{16, TG_F32}, {128, TG_F32}, {16, TG_F16}};
    static const uint32_t chunks[] = {1, 7, 64, 0};
    tg_rng_t r;
    tg_rng_seed2(&r, 11, 0);
    for (size_t fi = 0; fi < 3; fi++) {
        char name[64];
        snprintf(name, sizeof name, "rows-%u-%d.bin", files[fi].dim, (int)files[fi].dtype);
        char *path = write_features(name, files[fi].dim, files[fi].dtype);
        /* mode 0: staging rows, 1: a feature buffer, 2: a feature buffer and two chunks in
         * flight per worker */
        for (int mode = 0; mode < 3; mode++)
            for (int tier = 0; tier < 2; tier++)
                for (size_t ci = 0; ci < 4; ci++)
                    for (int gap = 0; gap < 2; gap++) {
                        cfg_t c = {.dim = files[fi].dim,
                                   .dtype = files[fi].dtype,
                                   .featbuf = mode > 0,
                                   .overlap = mode == 2,
                                   .tier = tier,
                                   .chunk = chunks[ci],
                                   .gap = gap ? 2048 : 0,
                                   .normalize = (int)((ci + (size_t)gap) % 2),
                                   /* a buffer of a few chunks: eviction between groups */
                                   .cache_bytes = ci == 2 ? 64 << 10 : 0};
                        rows_case(path, &c, &r);
                    }
        free(path);
    }
}

/* ---------------------------------------------------------------- counters */

TG_TEST(tier_counters_exact)
{
    char *path = write_features("count.bin", 16, TG_F32);
    for (int mode = 0; mode < 3; mode++) {
        int featbuf = mode > 0;
        cfg_t c = {.dim = 16,
                   .dtype = TG_F32,
                   .featbuf = featbuf,
                   .overlap = mode == 2,
                   .tier = 1,
                   .chunk = 50};
        rig_t g;
        TG_CHECK_OK(rig_open(&g, path, &c));
        if (!g.ex) {
            rig_close(&g);
            continue;
        }
        TG_CHECK_EQ_U64(tg_tier_static_count(g.tier), g.nhot);
        tg_rng_t r;
        tg_rng_seed2(&r, 5, (uint64_t)mode);
        group_t G;
        group_make(&G, &r, 2, 0, 16);
        uint64_t in_tier, u = group_unique(&G, &in_tier);
        tg_extract_worker_t *w = tg_extract_worker(g.ex, 0);
        for (int pass = 0; pass < 2; pass++) {
            TG_CHECK_OK(tg_extract_group(w, G.b, 2, NULL));
            TG_CHECK_EQ_U64(group_bad_rows(&G, 16, 0), 0);
            tg_tier_stats_t ts[4];
            int k = tg_extract_tier_stats(g.ex, ts, 4, 1);
            TG_CHECK(k == (featbuf ? 3 : 2));
            TG_CHECK(!strcmp(ts[0].name, "hot") && !strcmp(ts[k - 1].name, "file"));
            /* the static tier is asked for every distinct node and holds every 7th */
            TG_CHECK_EQ_U64(ts[0].lookups, u);
            TG_CHECK_EQ_U64(ts[0].hits, in_tier);
            TG_CHECK_EQ_U64(ts[0].bytes, in_tier * 64);
            uint64_t rest = u - in_tier;
            if (featbuf) {
                /* the buffer sees the rest; the second pass finds all of them */
                TG_CHECK(!strcmp(ts[1].name, "featbuf"));
                TG_CHECK_EQ_U64(ts[1].lookups, rest);
                TG_CHECK_EQ_U64(ts[1].hits, pass ? rest : 0);
                TG_CHECK_EQ_U64(ts[2].lookups, pass ? 0 : rest);
                TG_CHECK_EQ_U64(ts[2].hits, pass ? 0 : rest);
            } else {
                TG_CHECK_EQ_U64(ts[1].lookups, rest);
                TG_CHECK_EQ_U64(ts[1].hits, rest);
                TG_CHECK_EQ_U64(ts[1].bytes, rest * 64);
            }
        }
        /* reset: zero now */
        tg_tier_stats_t ts[4];
        tg_extract_tier_stats(g.ex, ts, 4, 0);
        TG_CHECK_EQ_U64(ts[0].lookups + ts[0].hits, 0);
        group_free(&G);
        rig_close(&g);
    }
    free(path);
}

/* ---------------------------------------------------------------- several workers */

typedef struct {
    rig_t *g;
    int id;
    atomic_int *bad, *errors;
} thr_t;

static void *worker_main(void *arg)
{
    thr_t *t = arg;
    tg_rng_t r;
    tg_rng_seed2(&r, 17, (uint64_t)t->id);
    for (int round = 0; round < 12; round++) {
        group_t G;
        group_make(&G, &r, 1 + round % 4, (uint64_t)round * 4, t->g->c.dim);
        if (tg_extract_group(tg_extract_worker(t->g->ex, t->id), G.b, G.nb, NULL) < 0) {
            fprintf(stderr, "worker %d: %s\n", t->id, tg_errmsg());
            atomic_fetch_add(t->errors, 1);
        } else if (group_bad_rows(&G, t->g->c.dim, t->g->c.normalize)) {
            atomic_fetch_add(t->bad, 1);
        }
        group_free(&G);
    }
    return NULL;
}

TG_TEST(workers_share_a_small_buffer)
{
    char *path = write_features("threads.bin", 128, TG_F32);
    /* with overlap each worker holds two chunks: rows one worker's next chunk has yet to read are
     * waited for by others while it waits for theirs (try_wait keeps it reaping) */
    for (int mode = 0; mode < 4; mode++) {
        int tier = mode & 1, overlap = mode >> 1;
        cfg_t c = {.dim = 128,
                   .dtype = TG_F32,
                   .featbuf = 1,
                   .overlap = overlap,
                   .tier = tier,
                   .E = 3,
                   .chunk = 64,
                   .gap = 4096,
                   .normalize = 1,
                   .cache_bytes = 1}; /* the minimum: 3 (x 2) x 64 slots, constant eviction */
        rig_t g;
        TG_CHECK_OK(rig_open(&g, path, &c));
        if (!g.ex) {
            rig_close(&g);
            continue;
        }
        uint32_t slots = tg_featbuf_num_slots(tg_extract_featbuf(g.ex));
        uint32_t least = (overlap ? 2 : 1) * 3 * 64;
        TG_CHECK(slots >= least && slots < 2 * least);
        atomic_int bad = 0, errors = 0;
        pthread_t th[3];
        thr_t a[3];
        for (int i = 0; i < 3; i++) {
            a[i] = (thr_t){&g, i, &bad, &errors};
            pthread_create(&th[i], NULL, worker_main, &a[i]);
        }
        for (int i = 0; i < 3; i++)
            pthread_join(th[i], NULL);
        TG_CHECK(atomic_load(&bad) == 0 && atomic_load(&errors) == 0);
        TG_CHECK_OK(tg_featbuf_check(tg_extract_featbuf(g.ex)));
        rig_close(&g);
    }
    free(path);
}

/* ---------------------------------------------------------------- errors */

/* A group holding node v; *got = rc. The message must name the file, the offset, the batch and
 * the node; the fail hook ran once with it; the buffer is consistent; a group without the bad
 * row works afterwards on the same worker. */
static void failing_group(rig_t *g, uint64_t v, const char *needle, const char *what)
{
    uint64_t nodes[5] = {v + 2, v, 5, v + 1, 2000};
    float *X = malloc(5 * g->c.dim * sizeof *X);
    tg_extract_batch_t b = {.id = 42, .nodes = nodes, .n = 5, .X = X};
    rec_t rec = {0};
    tg_extract_hooks_t hk = {.fail = rec_fail, .scratch = rec_scratch, .ctx = &rec};
    tg_err_clear();
    int rc = tg_extract_group(tg_extract_worker(g->ex, 0), &b, 1, &hk);
    char node[64];
    snprintf(node, sizeof node, "batch 42: reading the features of node %llu",
             (unsigned long long)v);
    if (rc >= 0)
        TG_FAIL("%s: the group succeeded", what);
    else if (!strstr(tg_errmsg(), needle) || !strstr(tg_errmsg(), "offset") ||
             !strstr(tg_errmsg(), tg_io_file_path(g->f)) || !strstr(tg_errmsg(), node))
        TG_FAIL("%s: message '%s' lacks the file, the offset, '%s' or '%s'", what, tg_errmsg(),
                needle, node);
    else
        fprintf(stderr, "  %s: %s\n", what, tg_errmsg());
    TG_CHECK(rec.fails == 1 && rec.last_rc == rc && !strcmp(rec.msg, tg_errmsg()));
    TG_CHECK(rec.scratch == 0);
    tg_featbuf_t *fb = tg_extract_featbuf(g->ex);
    if (fb) {
        TG_CHECK_OK(tg_featbuf_check(fb));
        TG_CHECK(!tg_featbuf_lookup(fb, v, NULL, NULL, NULL)); /* the failed row is unmapped */
    }
    free(X);
}

TG_TEST(read_errors)
{
    char *path = write_features("eio.bin", 16, TG_F32);
    /* mode 2: two chunks of 2 rows in flight when the read fails (and a third to come) */
    static const char *what[3] = {"EIO, staging", "EIO, featbuf", "EIO, featbuf, overlap"};
    for (int mode = 0; mode < 3; mode++)
        for (int gap = 0; gap < 2; gap++) {
            int featbuf = mode > 0;
            cfg_t c = {.dim = 16,
                       .dtype = TG_F32,
                       .featbuf = featbuf,
                       .overlap = mode == 2,
                       .chunk = mode == 2 ? 2 : 0,
                       .gap = gap ? 2048 : 0};
            rig_t g;
            TG_CHECK_OK(rig_open(&g, path, &c));
            if (!g.ex) {
                rig_close(&g);
                continue;
            }
            uint64_t v = 1000;
            tg_io_fault_t f = {.op = TG_IO_FAULT_READ,
                               .file = "eio.bin",
                               .lo = v * 64,
                               .hi = v * 64 + 1,
                               .err = EIO};
            TG_CHECK_OK(tg_io_fault_add(&f));
            failing_group(&g, v, "Input/output error", what[mode]);
            tg_io_fault_clear();
            /* the same worker reads the row now */
            uint64_t nodes[2] = {v, 3};
            float X[32];
            tg_extract_batch_t b = {.id = 43, .nodes = nodes, .n = 2, .X = X};
            TG_CHECK_OK(tg_extract_group(tg_extract_worker(g.ex, 0), &b, 1, NULL));
            float want[16];
            expect_row(want, v, 16, 0);
            TG_CHECK(!memcmp(X, want, sizeof want));
            rig_close(&g);
        }
    free(path);
}

TG_TEST(short_read)
{
    static const char *what[3] = {"short, staging", "short, featbuf", "short, featbuf, overlap"};
    for (int mode = 0; mode < 3; mode++) {
        char *path = write_features("short.bin", 16, TG_F32);
        cfg_t c = {.dim = 16,
                   .dtype = TG_F32,
                   .featbuf = mode > 0,
                   .overlap = mode == 2,
                   .chunk = mode == 2 ? 2 : 0,
                   .gap = 2048};
        rig_t g;
        TG_CHECK_OK(rig_open(&g, path, &c));
        if (g.ex) {
            /* rows from node 2500 on are gone */
            TG_CHECK(truncate(path, 2500 * 64 + 10) == 0);
            failing_group(&g, 2600, "unexpected end of file", what[mode]);
        }
        rig_close(&g);
        free(path);
    }
}

TG_TEST(abort_and_bad_input)
{
    char *path = write_features("abort.bin", 16, TG_F16);
    cfg_t c = {.dim = 16, .dtype = TG_F16, .featbuf = 1, .chunk = 4};
    rig_t g;
    TG_CHECK_OK(rig_open(&g, path, &c));
    if (g.ex) {
        uint64_t nodes[3] = {1, 2, 3};
        float X[48];
        tg_extract_batch_t b = {.id = 1, .nodes = nodes, .n = 3, .X = X};
        atomic_int stop = 1;
        rec_t rec = {0};
        tg_extract_hooks_t hk = {.fail = rec_fail, .abort = &stop, .ctx = &rec};
        TG_CHECK(tg_extract_group(tg_extract_worker(g.ex, 0), &b, 1, &hk) == -ECANCELED);
        TG_CHECK(rec.fails == 0);
        nodes[1] = N;
        TG_CHECK_ERR(tg_extract_group(tg_extract_worker(g.ex, 0), &b, 1, NULL), "node 3000");
        TG_CHECK_ERR(tg_extract_group(tg_extract_worker(g.ex, 0), &b, 17, NULL), "17 batches");
        nodes[1] = 2;
        tg_extract_shutdown(g.ex);
        TG_CHECK(tg_extract_group(tg_extract_worker(g.ex, 0), &b, 1, NULL) == -ECANCELED);
        TG_CHECK_OK(tg_featbuf_check(tg_extract_featbuf(g.ex)));
    }
    rig_close(&g);
    /* a feature file of the wrong size */
    tg_io_file_t *f = NULL;
    TG_CHECK_OK(tg_io_file_open(&f, path, 0));
    tg_extract_plan_opts_t po;
    tg_extract_plan_opts_default(&po);
    po.num_nodes = N + 1;
    po.feat_dim = 16;
    po.dtype = TG_F16;
    po.io_depth = 4;
    po.io_gap = 0;
    tg_extract_plan_t pl;
    TG_CHECK_OK(tg_extract_plan(&pl, &po));
    tg_extract_opts_t eo = {.plan = &pl, .feat = f};
    tg_extract_t *ex = NULL;
    TG_CHECK_ERR(tg_extract_create(&ex, &eo), "expected 96032");
    po.feat_dim = 0;
    TG_CHECK_ERR(tg_extract_plan(&pl, &po), "width 0");
    tg_io_file_close(f);
    free(path);
}

/* Stops a group from another thread after a while: with two chunks in flight per worker the
 * stop lands between chunks while reads of the next one are out. */
typedef struct {
    atomic_int *stop;
    long usec;
} stopper_t;

static void *stopper_main(void *arg)
{
    stopper_t *t = arg;
    struct timespec ts = {0, t->usec * 1000};
    nanosleep(&ts, NULL);
    atomic_store(t->stop, 1);
    return NULL;
}

TG_TEST(abort_midway_with_two_chunks_in_flight)
{
    char *path = write_features("midway.bin", 16, TG_F32);
    uint64_t *nodes = malloc(N * sizeof *nodes);
    float *X = malloc((size_t)N * 16 * sizeof *X);
    for (uint64_t v = 0; v < N; v++)
        nodes[v] = (v * 7919) % N; /* every row once, not in order */
    for (int round = 0; round < 6; round++) {
        cfg_t c = {.dim = 16,
                   .dtype = TG_F32,
                   .featbuf = 1,
                   .overlap = 1,
                   .chunk = 3,
                   .gap = round % 2 ? 2048 : 0,
                   .cache_bytes = round < 3 ? 1 : 0};
        rig_t g;
        TG_CHECK_OK(rig_open(&g, path, &c));
        if (!g.ex) {
            rig_close(&g);
            continue;
        }
        atomic_int stop = 0;
        rec_t rec = {0};
        tg_extract_hooks_t hk = {.fail = rec_fail, .abort = &stop, .ctx = &rec};
        tg_extract_batch_t b = {.id = 9, .nodes = nodes, .n = N, .X = X};
        stopper_t st = {&stop, 200L * (round + 1)};
        pthread_t th;
        pthread_create(&th, NULL, stopper_main, &st);
        int rc = tg_extract_group(tg_extract_worker(g.ex, 0), &b, 1, &hk);
        pthread_join(th, NULL);
        TG_CHECK(rc == 0 || rc == -ECANCELED);
        fprintf(stderr, "  round %d: %s\n", round, rc ? "stopped midway" : "finished first");
        TG_CHECK(rec.fails == 0);
        TG_CHECK_OK(tg_featbuf_check(tg_extract_featbuf(g.ex)));
        /* the worker carries on: the whole file, every row right */
        TG_CHECK_OK(tg_extract_group(tg_extract_worker(g.ex, 0), &b, 1, NULL));
        uint64_t bad = 0;
        for (uint64_t i = 0; i < N; i++) {
            float want[16];
            expect_row(want, nodes[i], 16, 0);
            bad += memcmp(X + i * 16, want, sizeof want) != 0;
        }
        TG_CHECK_EQ_U64(bad, 0);
        TG_CHECK_OK(tg_featbuf_check(tg_extract_featbuf(g.ex)));
        rig_close(&g);
    }
    free(nodes);
    free(X);
    free(path);
}

/* ---------------------------------------------------------------- plan */

static void plan_with(tg_extract_plan_t *pl, uint64_t avail, int featbuf, int minimum)
{
    tg_extract_plan_opts_t po;
    tg_extract_plan_opts_default(&po);
    po.num_nodes = 1000000;
    po.feat_dim = 128;
    po.dtype = TG_F32;
    po.extractors = 2;
    po.io_gap = 4096; /* automatic depth, no probe (probe_path NULL) */
    po.featbuf = featbuf;
    po.avail = avail;
    po.minimum = minimum;
    po.other_transient = 100000;
    TG_CHECK_OK(tg_extract_plan(pl, &po));
    TG_CHECK_EQ_U64(tg_extract_plan_bytes(pl),
                    pl->stage_bytes + pl->transient_bytes + pl->featbuf_min + pl->rows_bytes);
}

TG_TEST(plan_under_tight_budgets)
{
    tg_extract_plan_t pl, lo;
    plan_with(&pl, 0, 1, 0); /* no limit: the defaults */
    TG_CHECK(pl.chunk == TG_EXTRACT_DEFAULT_CHUNK && pl.depth == 32 && pl.gap == 4096);
    TG_CHECK(pl.align == 512 && pl.max_read == pl.span && pl.featbuf_min > 0 && !pl.rows_bytes);
    plan_with(&lo, 0, 1, 1); /* the minimum */
    TG_CHECK(lo.chunk == TG_EXTRACT_MIN_CHUNK && lo.depth == TG_EXTRACT_MIN_DEPTH);
    TG_CHECK(tg_extract_plan_bytes(&lo) < tg_extract_plan_bytes(&pl));
    char why[256];
    tg_extract_plan_describe(&lo, why, sizeof why);
    TG_CHECK(strstr(why, "feature buffer of at least 2 x 256 rows") != NULL);
    /* tight budgets shrink the depth and the chunk until the rules hold, never below the
     * minimum */
    uint64_t budgets[] = {64u << 20, 16u << 20, 6u << 20, 3u << 20, 1u << 20, 100000};
    for (int featbuf = 0; featbuf < 2; featbuf++) {
        uint64_t prev = UINT64_MAX;
        for (size_t i = 0; i < sizeof budgets / sizeof *budgets; i++) {
            uint64_t avail = budgets[i];
            plan_with(&pl, avail, featbuf, 0);
            TG_CHECK(pl.chunk >= TG_EXTRACT_MIN_CHUNK && pl.depth >= TG_EXTRACT_MIN_DEPTH);
            TG_CHECK(tg_extract_plan_bytes(&pl) <= prev); /* monotone in the budget */
            prev = tg_extract_plan_bytes(&pl);
            int at_min = pl.chunk == TG_EXTRACT_MIN_CHUNK && pl.depth == TG_EXTRACT_MIN_DEPTH;
            uint64_t fixed = 100000 + pl.stage_bytes + pl.transient_bytes;
            uint64_t per = featbuf ? 4 * pl.featbuf_min : pl.rows_bytes;
            if (!at_min) {
                TG_CHECK(pl.stage_bytes <= avail / 4 || pl.depth == TG_EXTRACT_MIN_DEPTH);
                TG_CHECK(fixed + per <= avail || pl.chunk == TG_EXTRACT_MIN_CHUNK);
            }
        }
        /* the smallest budget gets the minimum plan */
        plan_with(&lo, 0, featbuf, 1);
        TG_CHECK_EQ_U64(prev, tg_extract_plan_bytes(&lo));
    }
}

/* An extraction created under a tight limit stays inside it, and one below the minimum is
 * refused with what did not fit. */
TG_TEST(create_within_budget)
{
    char *path = write_features("budget.bin", 128, TG_F32);
    tg_io_file_t *f = NULL;
    TG_CHECK_OK(tg_io_file_open(&f, path, 0));
    uint64_t limits[] = {8u << 20, 2u << 20, 300u << 10};
    for (size_t i = 0; f && i < 3; i++) {
        tg_budget_t b;
        tg_budget_init(&b, limits[i]);
        tg_extract_plan_opts_t po;
        tg_extract_plan_opts_default(&po);
        po.num_nodes = N;
        po.feat_dim = 128;
        po.extractors = 2;
        po.io_gap = 0;
        po.avail = limits[i];
        tg_extract_plan_t pl;
        TG_CHECK_OK(tg_extract_plan(&pl, &po));
        tg_extract_opts_t eo = {
            .plan = &pl, .feat = f, .budget = &b, .keep_bytes = pl.transient_bytes};
        tg_extract_t *ex = NULL;
        if (i < 2) {
            TG_CHECK_OK(tg_extract_create(&ex, &eo));
            TG_CHECK(b.used + pl.transient_bytes <= b.limit);
            if (ex) {
                tg_featbuf_opts_t fo;
                tg_extract_plan_featbuf_opts(&pl, &fo);
                TG_CHECK(tg_featbuf_num_slots(tg_extract_featbuf(ex)) >= tg_featbuf_min_slots(&fo));
            }
        } else {
            TG_CHECK_ERR(tg_extract_create(&ex, &eo), "cannot hold the feature buffer");
        }
        tg_extract_destroy(ex);
        TG_CHECK_EQ_U64(b.used, 0);
        tg_budget_destroy(&b);
    }
    tg_io_file_close(f);
    free(path);
}

/* ---------------------------------------------------------------- static tier, rows */

TG_TEST(static_tier)
{
    char *path = write_features("tier.bin", 16, TG_F16);
    tg_io_file_t *f = NULL;
    TG_CHECK_OK(tg_io_file_open(&f, path, 0));
    tg_tier_static_opts_t so = {.feat = f, .num_nodes = N, .feat_dim = 16, .dtype = TG_F16};
    /* 100 nodes: a hash of 256 entries (3 KiB) beats a 12 KiB table; 1500: the table */
    uint64_t sizes[2] = {100, 1500};
    for (int k = 0; f && k < 2; k++) {
        uint64_t *nodes = malloc(sizes[k] * 2 * sizeof *nodes);
        for (uint64_t i = 0; i < sizes[k]; i++)
            nodes[2 * i] = nodes[2 * i + 1] = (i * 1999) % N; /* each twice, scattered */
        tg_budget_t b;
        tg_budget_init(&b, 0);
        tg_tier_t *t = NULL;
        TG_CHECK_OK(tg_tier_static_create(&t, &so, nodes, sizes[k] * 2, &b));
        if (t) {
            TG_CHECK_EQ_U64(tg_tier_static_count(t), sizes[k]);
            TG_CHECK_EQ_U64(b.used, tg_tier_static_bytes(N, 16, TG_F16, sizes[k]));
            TG_CHECK(!strcmp(t->name, "static"));
            uint64_t held = 0;
            for (uint64_t v = 0; v < N; v++) {
                const uint16_t *row = tg_tier_find(t, v);
                if (!row) continue;
                held++;
                for (int j = 0; j < 16; j++)
                    if (tg_f16_to_f32(row[j]) != fval(v, (size_t)j)) {
                        TG_FAIL("node %llu: wrong row", (unsigned long long)v);
                        break;
                    }
            }
            TG_CHECK_EQ_U64(held, sizes[k]);
        }
        tg_tier_destroy(t);
        TG_CHECK_EQ_U64(b.used, 0);
        /* too small a budget, an id out of range */
        tg_budget_t small;
        tg_budget_init(&small, 1000);
        TG_CHECK_ERR(tg_tier_static_create(&t, &so, nodes, sizes[k], &small), "static tier");
        TG_CHECK_EQ_U64(small.used, 0);
        nodes[3] = N + 5;
        TG_CHECK_ERR(tg_tier_static_create(&t, &so, nodes, sizes[k], &b), "node 3005");
        tg_budget_destroy(&small);
        tg_budget_destroy(&b);
        free(nodes);
    }
    /* a dense set (every third row) is read in merged runs, holes included: a few reads, not
     * one per row, and every row right */
    if (f) {
        uint64_t nd = N / 3;
        uint64_t *dense = malloc(nd * sizeof *dense);
        for (uint64_t i = 0; i < nd; i++)
            dense[i] = 3 * (nd - 1 - i); /* given in descending order: sorted by the tier */
        tg_io_stats_t st;
        tg_io_stats_init(&st);
        tg_tier_static_opts_t sd = so;
        sd.stats = &st;
        tg_tier_t *t = NULL;
        TG_CHECK_OK(tg_tier_static_create(&t, &sd, dense, nd, NULL));
        tg_io_counts_t c;
        tg_io_stats_snapshot(&st, &c);
        /* N x 32 bytes = 96 KiB of file: one merged read (io/ may split it in its slots) */
        TG_CHECK(c.io_requests >= 1 && c.io_requests <= 4);
        for (uint64_t v = 0; t && v < N; v++) {
            const uint16_t *row = tg_tier_find(t, v);
            if ((v % 3 == 0 && v / 3 < nd) != (row != NULL)) {
                TG_FAIL("node %llu: held %d", (unsigned long long)v, row != NULL);
                break;
            }
            if (row && tg_f16_to_f32(row[15]) != fval(v, 15)) {
                TG_FAIL("node %llu: wrong row", (unsigned long long)v);
                break;
            }
        }
        tg_tier_destroy(t);
        free(dense);
    }
    /* an empty set: nothing held, nothing read */
    tg_tier_t *empty = NULL;
    TG_CHECK_OK(tg_tier_static_create(&empty, &so, NULL, 0, NULL));
    if (empty) TG_CHECK(tg_tier_static_count(empty) == 0 && !tg_tier_find(empty, 0));
    tg_tier_destroy(empty);
    /* a read error while filling names the file and offset */
    tg_io_fault_t fault = {
        .op = TG_IO_FAULT_READ, .file = "tier.bin", .lo = 320, .hi = 321, .err = EIO};
    TG_CHECK_OK(tg_io_fault_add(&fault));
    uint64_t ten = 10;
    tg_tier_t *t = NULL;
    TG_CHECK_ERR(tg_tier_static_create(&t, &so, &ten, 1, NULL), "offset 320");
    tg_io_fault_clear();
    tg_io_file_close(f);
    free(path);
}

/* A tier over rows the caller holds (hier's static cache for evaluation): rows in the caller's
 * order, found by node; only the table is charged; a repeated or out-of-range node refused. */
TG_TEST(borrowed_tier)
{
    uint64_t sizes[2] = {100, 1500}; /* a hash, then the direct table (as static_tier) */
    for (int k = 0; k < 2; k++) {
        uint64_t n = sizes[k];
        uint64_t *nodes = malloc(n * sizeof *nodes);
        uint32_t *rows = malloc(n * 2 * sizeof *rows);
        for (uint64_t i = 0; i < n; i++) {
            nodes[i] = (i * 1999 + 7) % N; /* scattered, distinct, in no order */
            rows[2 * i] = (uint32_t)nodes[i], rows[2 * i + 1] = ~(uint32_t)nodes[i];
        }
        tg_budget_t b;
        tg_budget_init(&b, 0);
        tg_tier_t *t = NULL;
        TG_CHECK_OK(tg_tier_borrow_create(&t, "lent", rows, 8, nodes, n, N, &b));
        if (t) {
            TG_CHECK(!strcmp(t->name, "lent") && tg_tier_static_count(t) == n);
            TG_CHECK_EQ_U64(b.used, tg_tier_static_bytes(N, 2, TG_F32, n) - n * 8);
            uint64_t held = 0;
            for (uint64_t v = 0; v < N; v++) {
                const uint32_t *row = tg_tier_find(t, v);
                if (!row) continue;
                held++;
                if (row[0] != v || row[1] != ~(uint32_t)v) {
                    TG_FAIL("node %llu: wrong row", (unsigned long long)v);
                    break;
                }
            }
            TG_CHECK_EQ_U64(held, n);
        }
        tg_tier_destroy(t);
        TG_CHECK_EQ_U64(b.used, 0); /* the rows are still the caller's */
        TG_CHECK(rows[2 * (n - 1)] == (uint32_t)nodes[n - 1]);
        uint64_t last = nodes[n - 1];
        nodes[n - 1] = nodes[3];
        TG_CHECK_ERR(tg_tier_borrow_create(&t, "lent", rows, 8, nodes, n, N, &b), "given twice");
        TG_CHECK(t == NULL && b.used == 0);
        nodes[n - 1] = N;
        TG_CHECK_ERR(tg_tier_borrow_create(&t, "lent", rows, 8, nodes, n, N, &b), "out of range");
        tg_budget_t small;
        tg_budget_init(&small, 100);
        nodes[n - 1] = last;
        TG_CHECK_ERR(tg_tier_borrow_create(&t, "lent", rows, 8, nodes, n, N, &small), "lent");
        TG_CHECK_EQ_U64(small.used, 0);
        tg_budget_destroy(&small);
        tg_budget_destroy(&b);
        free(nodes);
        free(rows);
    }
}

TG_TEST(rows_f32_in_place)
{
    enum { D = 37 };
    uint16_t h[D];
    float want[D], got[D];
    for (int j = 0; j < D; j++) {
        want[j] = fval(9, (size_t)j);
        h[j] = tg_f32_to_f16(want[j]);
    }
    /* f16 widened in place from the end of the row */
    memcpy((char *)(got + D) - sizeof h, h, sizeof h);
    tg_feat_rows_f32(got, (char *)(got + D) - sizeof h, 0, 1, D, TG_F16, 0);
    TG_CHECK(!memcmp(got, want, sizeof want));
    /* f32 in place, normalised = normalised copy */
    float copy[D];
    memcpy(copy, want, sizeof want);
    tg_feat_normalize_rows(copy, 1, D);
    tg_feat_rows_f32(got, got, 0, 1, D, TG_F32, 1);
    TG_CHECK(!memcmp(got, copy, sizeof copy));
    /* strided source rows */
    uint16_t two[2][D + 3];
    memcpy(two[0], h, sizeof h);
    memcpy(two[1], h, sizeof h);
    float out[2 * D];
    tg_feat_rows_f32(out, two, sizeof two[0], 2, D, TG_F16, 1);
    TG_CHECK(!memcmp(out, copy, sizeof copy) && !memcmp(out + D, copy, sizeof copy));
}

int main(void)
{
    alarm(300); /* a deadlock fails the test instead of hanging it */
    dir = tg_test_tmpdir("extract");
    TG_RUN(rows_f32_in_place);
    TG_RUN(rows_equal_the_file);
    TG_RUN(tier_counters_exact);
    TG_RUN(workers_share_a_small_buffer);
    TG_RUN(read_errors);
    TG_RUN(short_read);
    TG_RUN(abort_and_bad_input);
    TG_RUN(abort_midway_with_two_chunks_in_flight);
    TG_RUN(plan_under_tight_budgets);
    TG_RUN(create_within_budget);
    TG_RUN(static_tier);
    TG_RUN(borrowed_tier);
    int rc = tg_test_done();
    if (rc == 0) tg_rmtree(dir);
    return rc;
}
