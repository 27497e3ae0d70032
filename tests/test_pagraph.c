/* The pagraph strategy and its ranking (graph/outdeg): the counts equal a brute-force count of
 * indices.bin (also when built in several sweeps of the id range) and the top k is exactly the
 * brute-force ranking (count desc, ties by id); the derived file is reused, rebuilt when
 * indices.bin changes, and replaced by counts in RAM when it cannot be written; every gathered
 * row equals the in-memory store's and the pass's hit ratio equals a brute-force count of the
 * batches' rows in the hot set; a budget too small is refused with the amount; read errors of
 * features.bin (during the fill and during a pass) and of indices.bin name the file and offset. */
#include "test_engine_common.h"

#include <sys/stat.h>
#include <unistd.h>

#include "engine/engine-impl.h"
#include "tiergnn/derived.h"
#include "tiergnn/outdeg.h"

static char root[4000], ds[4200];
#define N 3000u
#define DIM 16u

/* ---------------------------------------------------------------- brute force */

static uint32_t *brute_counts(const char *dir)
{
    tg_dataset_t *d;
    uint64_t *idx;
    TG_CHECK_OK(tg_dataset_open(&d, dir, 0));
    TG_CHECK_OK(tg_dataset_load_indices(d, &idx));
    uint32_t *c = calloc(d->meta.num_nodes, sizeof *c);
    for (uint64_t e = 0; e < d->meta.num_edges; e++)
        c[idx[e]]++;
    free(idx);
    tg_dataset_close(d);
    return c;
}

static const uint32_t *cmp_counts;
static int cmp_rank(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    if (cmp_counts[x] != cmp_counts[y]) return cmp_counts[x] > cmp_counts[y] ? -1 : 1;
    return x < y ? -1 : x > y;
}

/* Every node by decreasing count, ties by id: a plain sort. */
static uint64_t *brute_rank(const uint32_t *c, uint64_t n)
{
    uint64_t *r = malloc(n * sizeof *r);
    for (uint64_t v = 0; v < n; v++)
        r[v] = v;
    cmp_counts = c;
    qsort(r, n, sizeof *r, cmp_rank);
    return r;
}

/* The handle's counts and its top k for several k against the brute force. */
static void check_outdeg(tg_outdeg_t *od, const char *dir, const char *what)
{
    uint32_t *want = brute_counts(dir), *got = malloc(N * sizeof *got);
    TG_CHECK_OK(tg_outdeg_counts(od, 0, N, got));
    if (memcmp(want, got, N * sizeof *got)) TG_FAIL("%s: counts differ from brute force", what);
    uint64_t *rank = brute_rank(want, N), *top = malloc((N + 8) * sizeof *top);
    static const uint64_t ks[] = {0, 1, 2, 7, 100, 999, N / 3, N - 1, N, N + 8};
    for (size_t i = 0; i < sizeof ks / sizeof ks[0]; i++) {
        uint64_t hot = 0, want_hot = 0, k = TG_MIN(ks[i], (uint64_t)N);
        TG_CHECK_OK(tg_outdeg_top(od, ks[i], top, &hot));
        for (uint64_t j = 0; j < k; j++)
            want_hot += want[rank[j]];
        if (memcmp(top, rank, k * sizeof *top) || hot != want_hot)
            TG_FAIL("%s: the top %llu differ from the brute-force ranking", what,
                    (unsigned long long)ks[i]);
    }
    free(want);
    free(got);
    free(rank);
    free(top);
}

/* ---------------------------------------------------------------- the ranking */

TG_TEST(ranking_is_the_top_out_degrees)
{
    tg_dataset_t *d;
    TG_CHECK_OK(tg_dataset_open(&d, ds, 0));
    char dir[4300];
    for (int sweeps = 0; sweeps < 2; sweeps++) {
        /* one sweep of the id range, then 3 sweeps of 1024 counts */
        snprintf(dir, sizeof dir, "%s/rank%d", root, sweeps);
        TG_CHECK_EQ_U64(tg_outdeg_prepare(d, dir, sweeps ? 4096 : 0), 1);
        tg_outdeg_t *od;
        TG_CHECK_OK(tg_outdeg_open(&od, d, dir, NULL));
        TG_CHECK(!tg_outdeg_in_ram(od));
        check_outdeg(od, ds, sweeps ? "3 sweeps" : "1 sweep");
        tg_outdeg_close(od);
    }
    tg_dataset_close(d);
}

TG_TEST(derived_file_reused_and_rebuilt)
{
    char dir[4300], copy[4300], file[4400];
    snprintf(dir, sizeof dir, "%s/reuse", root);
    snprintf(copy, sizeof copy, "%s/reuse-ds", root);
    synth_opts_t so;
    synth_default(&so);
    so.nodes = N;
    synth_write(copy, &so);
    for (int round = 0; round < 3; round++) {
        if (round == 2) { /* another graph: indices.bin and its checksum change */
            so.seed = 99;
            synth_write(copy, &so);
        }
        tg_dataset_t *d;
        TG_CHECK_OK(tg_dataset_open(&d, copy, 0));
        TG_CHECK_EQ_U64(tg_outdeg_prepare(d, dir, 0), round == 1 ? 0 : 1);
        tg_outdeg_t *od;
        TG_CHECK_OK(tg_outdeg_open(&od, d, dir, NULL));
        check_outdeg(od, copy, round == 2 ? "rebuilt" : "built or reused");
        tg_outdeg_close(od);
        tg_dataset_close(d);
    }
    /* a derived directory that cannot be made (a file in its place): counts in RAM, accounted */
    snprintf(file, sizeof file, "%s/not-a-dir", root);
    tg_test_write_file(file, "x");
    tg_dataset_t *d;
    TG_CHECK_OK(tg_dataset_open(&d, copy, 0));
    TG_CHECK_EQ_U64(tg_outdeg_prepare(d, file, 0), 2);
    tg_budget_t b;
    tg_budget_init(&b, 64 << 20);
    tg_outdeg_t *od;
    TG_CHECK_OK(tg_outdeg_open(&od, d, file, &b));
    TG_CHECK(tg_outdeg_in_ram(od) && b.used >= N * 4);
    check_outdeg(od, copy, "in RAM");
    tg_outdeg_close(od);
    TG_CHECK_EQ_U64(b.used, 0);
    tg_budget_init(&b, 1000); /* too small for the counts: refused with the amount */
    TG_CHECK_ERR(tg_outdeg_open(&od, d, file, &b), "out-degree");
    /* a header that says the payload is 4 bytes shorter, the file cut to match (CRCs forged):
     * stale, rebuilt (it was trusted, and every read of the last count failed: fuzz_outdeg) */
    char path[4600];
    TG_CHECK_OK(tg_derived_path(d, dir, TG_OUTDEG_KIND, TG_OUTDEG_PARAMS, path, sizeof path));
    size_t n = 0;
    unsigned char *f = (unsigned char *)tg_test_read_all(path, &n);
    TG_CHECK(f && n == 4096 + N * 4);
    if (f && n == 4096 + N * 4) {
        n -= 4;
        uint64_t len = n - 4096;
        memcpy(f + 16, &len, 8);
        uint32_t c = tg_crc32(0, f + 4096, len);
        memcpy(f + 24, &c, 4);
        c = tg_crc32(0, f, 4092);
        memcpy(f + 4092, &c, 4);
        FILE *w = fopen(path, "wb");
        TG_CHECK(w && fwrite(f, 1, n, w) == n && fclose(w) == 0);
    }
    free(f);
    TG_CHECK_OK(tg_outdeg_open(&od, d, dir, NULL));
    check_outdeg(od, copy, "rebuilt after a short payload");
    tg_outdeg_close(od);
    struct stat st;
    TG_CHECK(stat(path, &st) == 0 && st.st_size == 4096 + N * 4);
    tg_dataset_close(d);
}

TG_TEST(indices_read_error)
{
    char dir[4300];
    snprintf(dir, sizeof dir, "%s/eio", root);
    tg_dataset_t *d;
    TG_CHECK_OK(tg_dataset_open(&d, ds, 0));
    tg_io_fault_t f = {
        .op = TG_IO_FAULT_READ, .file = "indices.bin", .lo = 0, .hi = 1 << 30, .err = EIO};
    TG_CHECK_OK(tg_io_fault_add(&f));
    int rc = tg_outdeg_prepare(d, dir, 0);
    TG_CHECK(rc == -EIO && strstr(tg_errmsg(), "indices.bin") && strstr(tg_errmsg(), "offset"));
    fprintf(stderr, "  %s\n", tg_errmsg());
    tg_io_fault_clear();
    tg_dataset_close(d);
}

/* ---------------------------------------------------------------- the strategy */

typedef struct {
    uint64_t hot_nodes, mem, gap, chunk;
    int extractors;
} cfg_t;

static int open_run(tg_run_t *r, const cfg_t *c)
{
    static char v[5][32];
    static tg_strategy_arg_t args[5];
    snprintf(v[0], 32, "%llu", (unsigned long long)c->hot_nodes);
    snprintf(v[1], 32, "%d", c->extractors ? c->extractors : 2);
    snprintf(v[2], 32, "%llu", (unsigned long long)c->gap);
    snprintf(v[3], 32, "%llu", (unsigned long long)c->chunk);
    args[0] = (tg_strategy_arg_t){"hot-nodes", v[0]};
    args[1] = (tg_strategy_arg_t){"extractors", v[1]};
    args[2] = (tg_strategy_arg_t){"io-gap", v[2]};
    args[3] = (tg_strategy_arg_t){"chunk-rows", v[3]};
    args[4] = (tg_strategy_arg_t){"io-depth", "8"}; /* no device probe in tests */
    tg_run_opts_t o = {.dataset = ds,
                       .strategy = "pagraph",
                       .args = args,
                       .nargs = 5,
                       .mem_bytes = c->mem,
                       .threads = 1};
    tg_strategy_opts_default(&o.sopts);
    o.sopts.sampler_threads = 2;
    return tg_run_open_opts(r, &o);
}

typedef struct {
    tg_store_t *ref;
    const uint8_t *hot; /* per node */
    uint64_t lookups, hits, bad_rows, steps;
    float *Xref;
    uint8_t *seen; /* per node, this batch */
} check_t;

static int check_step(void *ctx, const tg_batch_t *b, const float *X)
{
    check_t *c = ctx;
    int eq = batch_rows_equal(c->ref, b, X, DIM, &c->Xref);
    if (eq < 0) return eq;
    c->bad_rows += !eq;
    for (uint32_t i = 0; i < b->num_nodes; i++) /* each distinct row is looked up once */
        if (!c->seen[b->nodes[i]]) {
            c->seen[b->nodes[i]] = 1;
            c->lookups++;
            c->hits += c->hot[b->nodes[i]];
        }
    for (uint32_t i = 0; i < b->num_nodes; i++)
        c->seen[b->nodes[i]] = 0;
    c->steps++;
    return 0;
}

static int run_pass(tg_run_t *r, check_t *c, tg_pass_stats_t *st)
{
    static const int64_t fan[2] = {5, 5};
    tg_pass_t p = {.seeds = r->split[0],
                   .num_seeds = r->split_n[0],
                   .batch_size = 64,
                   .seed = 7,
                   .num_layers = 2,
                   .fanouts = fan,
                   .step = check_step,
                   .ctx = c};
    return tg_run_pass(r, &p, st);
}

/* Two passes: rows equal memory's, the hit ratio equals the brute-force count. */
static void pass_case(const cfg_t *cfg, uint64_t expect_hot, const char *what)
{
    tg_run_t r;
    if (open_run(&r, cfg) < 0) {
        TG_FAIL("%s: open: %s", what, tg_errmsg());
        return;
    }
    uint32_t *cnt = brute_counts(ds);
    uint64_t *rank = brute_rank(cnt, N);
    check_t c = {.hot = calloc(N, 1), .seen = calloc(N, 1)};
    for (uint64_t j = 0; j < expect_hot; j++)
        ((uint8_t *)c.hot)[rank[j]] = 1;
    tg_store_opts_t so = {0};
    TG_CHECK_OK(tg_store_memory_open(&c.ref, r.ds, &so));
    for (int pass = 0; pass < 2; pass++) {
        tg_pass_stats_t st;
        c.lookups = c.hits = 0;
        if (run_pass(&r, &c, &st) < 0) TG_FAIL("%s: pass: %s", what, tg_errmsg());
        TG_CHECK_EQ_U64(c.bad_rows, 0);
        TG_CHECK(st.have_cache && st.have_io && st.ntiers == (expect_hot ? 2 : 1));
        TG_CHECK_EQ_U64(st.cache_lookups, c.lookups);
        TG_CHECK_EQ_U64(st.cache_hits, c.hits);
        TG_CHECK_EQ_U64(st.tiers[st.ntiers - 1].lookups, c.lookups - c.hits); /* the file */
        if (pass == 1)
            fprintf(stderr, "  %-34s hit ratio %.3f, %llu reads, %llu bytes\n", what,
                    (double)st.cache_hits / (double)st.cache_lookups,
                    (unsigned long long)st.io_requests, (unsigned long long)st.io_read_bytes);
    }
    TG_CHECK(!cfg->mem || r.budget.peak <= cfg->mem);
    tg_store_release(c.ref);
    free(c.Xref);
    free((void *)c.hot);
    free(c.seen);
    free(cnt);
    free(rank);
    tg_run_close(&r);
}

TG_TEST(rows_and_hit_ratio)
{
    pass_case(&(cfg_t){.hot_nodes = 300}, 300, "300 hot nodes");
    pass_case(
        &(cfg_t){.hot_nodes = 1000, .mem = 32 << 20, .gap = 4096, .chunk = 64, .extractors = 3},
        1000, "1000 hot, --mem 32M, gap 4K, chunks 64");
    pass_case(&(cfg_t){.hot_nodes = 0}, 0, "no hot nodes");
    pass_case(&(cfg_t){.hot_nodes = N}, N, "every node hot");
}

TG_TEST(budget_too_small)
{
    tg_run_t r;
    TG_CHECK_ERR(open_run(&r, &(cfg_t){.hot_nodes = 10, .mem = 200 << 10}), "give --mem");
}

/* A read error in the fill of the hot rows (at the first pass) and one on a cold row (during
 * the pass): both name features.bin and the offset. */
TG_TEST(feature_read_error)
{
    uint32_t *cnt = brute_counts(ds);
    uint64_t *rank = brute_rank(cnt, N);
    for (int cold = 0; cold < 2; cold++) {
        tg_run_t r;
        TG_CHECK_OK(open_run(&r, &(cfg_t){.hot_nodes = 100}));
        check_t c = {.hot = calloc(N, 1), .seen = calloc(N, 1)};
        TG_CHECK_OK(tg_store_memory_open(&c.ref, r.ds, &(tg_store_opts_t){0}));
        /* hot: the top node, read by the fill; cold: the first seed outside the top 100 */
        uint64_t node = rank[0], row = DIM * sizeof(float);
        for (uint64_t i = 0; cold && i < r.split_n[0]; i++) {
            node = r.split[0][i];
            uint64_t j = 0;
            while (j < 100 && rank[j] != node)
                j++;
            if (j == 100) break;
        }
        tg_io_fault_t f = {.op = TG_IO_FAULT_READ,
                           .file = "features.bin",
                           .lo = node * row,
                           .hi = node * row + row,
                           .err = EIO};
        TG_CHECK_OK(tg_io_fault_add(&f));
        tg_pass_stats_t st;
        tg_err_clear();
        int rc = run_pass(&r, &c, &st);
        const char *m = tg_errmsg();
        if (rc >= 0 || !strstr(m, "features.bin") || !strstr(m, "offset"))
            TG_FAIL("%s row: rc %d, message '%s'", cold ? "cold" : "hot", rc, m);
        else
            fprintf(stderr, "  %s row: %s\n", cold ? "cold" : "hot", m);
        TG_CHECK_EQ_U64(c.bad_rows, 0);
        tg_io_fault_clear();
        tg_store_release(c.ref);
        free(c.Xref);
        free((void *)c.hot);
        free(c.seen);
        tg_run_close(&r);
    }
    free(cnt);
    free(rank);
}

int main(void)
{
    alarm(300);
    snprintf(root, sizeof root, "%s", tg_test_tmpdir("pagraph"));
    snprintf(ds, sizeof ds, "%s/ds", root);
    synth_opts_t so;
    synth_default(&so);
    so.nodes = N;
    so.dim = DIM;
    synth_write(ds, &so);
    TG_RUN(ranking_is_the_top_out_degrees);
    TG_RUN(derived_file_reused_and_rebuilt);
    TG_RUN(indices_read_error);
    TG_RUN(rows_and_hit_ratio);
    TG_RUN(budget_too_small);
    TG_RUN(feature_read_error);
    int rc = tg_test_done();
    if (rc == 0) tg_rmtree(root);
    return rc;
}
