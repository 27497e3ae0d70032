/* Row files (tiergnn/store.h), the reading path of layer-wise evaluation and inference out of
 * core: rows gathered in any order equal the rows converted straight from the file (f32 and f16,
 * with and without normalisation) whatever part is resident; a file that fits is read by one
 * sequential pass and never again; resident rows are the most weighted; rows near one another
 * are read by one merged request; failed reads are reported with the file and the offset; and
 * every reservation is returned. */
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tg_test.h"
#include "tiergnn/data.h"
#include "tiergnn/io.h"
#include "tiergnn/store.h"

static const char *g_dir;

/* A file of n rows of dim values of dtype, deterministic; returns its path and the raw bytes. */
static char *write_rows(const char *name, uint64_t n, uint32_t dim, tg_feat_dtype_t dtype,
                        unsigned char **raw_out)
{
    size_t rb = (size_t)dim * tg_feat_dtype_size(dtype);
    unsigned char *raw = malloc(n * rb);
    tg_rng_t r;
    tg_rng_seed(&r, n * 31 + dim);
    for (uint64_t i = 0; i < n * dim; i++) {
        float v = (float)tg_rng_uniform(&r) * 2.0f - 1.0f;
        if (dtype == TG_F16) {
            uint16_t h = tg_f32_to_f16(v);
            memcpy(raw + i * 2, &h, 2);
        } else {
            memcpy(raw + i * 4, &v, 4);
        }
    }
    char *path = malloc(4300);
    snprintf(path, 4300, "%s/%s", g_dir, name);
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    TG_CHECK(fd >= 0);
    TG_CHECK(write(fd, raw, n * rb) == (ssize_t)(n * rb));
    close(fd);
    *raw_out = raw;
    return path;
}

static uint64_t *random_ids(size_t n, uint64_t num_rows, uint64_t seed)
{
    tg_rng_t r;
    tg_rng_seed(&r, seed);
    uint64_t *v = malloc(n * sizeof *v);
    for (size_t i = 0; i < n; i++)
        v[i] = tg_rng_below(&r, num_rows);
    v[0] = num_rows - 1;
    if (n > 2) v[2] = v[1]; /* a repeat */
    return v;
}

/* Row ids[i] of raw, converted as every store converts it, equals out row i, byte for byte. */
static int rows_ok(const unsigned char *raw, uint32_t dim, tg_feat_dtype_t dtype, int norm,
                   const uint64_t *ids, size_t n, const float *out)
{
    size_t rb = (size_t)dim * tg_feat_dtype_size(dtype);
    float *want = malloc(dim * sizeof *want);
    int ok = 1;
    for (size_t i = 0; i < n && ok; i++) {
        tg_feat_rows_f32(want, raw + ids[i] * rb, 0, 1, dim, dtype, norm);
        if (memcmp(want, out + i * dim, dim * sizeof *want)) {
            fprintf(stderr, "  row %zu (id %llu) differs\n", i, (unsigned long long)ids[i]);
            ok = 0;
        }
    }
    free(want);
    return ok;
}

TG_TEST(same_rows_any_residency)
{
    const uint64_t N = 5000;
    for (int half = 0; half < 2; half++) {
        tg_feat_dtype_t dt = half ? TG_F16 : TG_F32;
        uint32_t dim = half ? 37 : 32; /* odd widths: rows straddle blocks at odd offsets */
        unsigned char *raw;
        char *path = write_rows(half ? "h.bin" : "f.bin", N, dim, dt, &raw);
        uint32_t *w = malloc(N * sizeof *w);
        for (uint64_t v = 0; v < N; v++)
            w[v] = (uint32_t)((v * 7919) % 97);
        size_t n = 3000;
        uint64_t *ids = random_ids(n, N, 7 + (uint64_t)half);
        float *out = malloc(n * dim * sizeof *out);
        uint64_t rams[4] = {0, N * 4 + 700 * dim * 4, N * 4 + 3000 * dim * 4, UINT64_MAX};
        for (int norm = 0; norm < 2; norm++)
            for (int k = 0; k < 4; k++)
                for (int weighted = 0; weighted < 2; weighted++)
                    for (int g = 0; g < 3; g++) {
                        uint64_t gaps[3] = {1, 4096, 60000};
                        tg_budget_t b;
                        tg_budget_init(&b, 0);
                        tg_rowfile_opts_t o = {.path = path,
                                               .num_rows = N,
                                               .dim = dim,
                                               .dtype = dt,
                                               .normalize = norm,
                                               .ram_bytes = rams[k],
                                               .weight = weighted ? w : NULL,
                                               .gap = gaps[g],
                                               .depth = g ? 8 : 1,
                                               .budget = &b};
                        tg_rowfile_t *rf = NULL;
                        TG_CHECK_OK(tg_rowfile_open(&rf, &o));
                        if (!rf) continue;
                        memset(out, 0xff, n * dim * sizeof *out);
                        TG_CHECK_OK(tg_rowfile_gather(rf, ids, n, out));
                        TG_CHECK(rows_ok(raw, dim, dt, norm, ids, n, out));
                        tg_rowfile_counts_t c;
                        tg_rowfile_counts(rf, &c);
                        uint64_t want_res = k == 0 ? 0 : k == 1 ? 700 : k == 2 ? 3000 : N;
                        TG_CHECK_EQ_U64(c.resident_rows, want_res);
                        TG_CHECK_EQ_U64(c.stream_bytes, k ? N * dim * tg_feat_dtype_size(dt) : 0);
                        TG_CHECK_EQ_U64(c.gather_rows, n);
                        if (k == 3) TG_CHECK_EQ_U64(c.miss_rows, 0);
                        if (k == 0) TG_CHECK_EQ_U64(c.miss_rows, n);
                        TG_CHECK(b.used > 0);
                        tg_rowfile_close(rf);
                        TG_CHECK_EQ_U64(b.used, 0);
                        tg_budget_destroy(&b);
                    }
        free(out);
        free(ids);
        free(w);
        free(raw);
        unlink(path);
        free(path);
    }
}

/* The file that fits is read once at open: gathers read nothing more, whatever they ask. */
TG_TEST(one_sequential_pass)
{
    const uint64_t N = 70000; /* 8.96 MB: more than one window of the pass */
    unsigned char *raw;
    char *path = write_rows("s.bin", N, 32, TG_F32, &raw);
    tg_io_stats_t st;
    tg_io_stats_init(&st);
    tg_rowfile_opts_t o = {.path = path,
                           .num_rows = N,
                           .dim = 32,
                           .dtype = TG_F32,
                           .ram_bytes = UINT64_MAX,
                           .stats = &st};
    tg_rowfile_t *rf = NULL;
    TG_CHECK_OK(tg_rowfile_open(&rf, &o));
    tg_io_counts_t a, z;
    tg_io_stats_snapshot(&st, &a);
    TG_CHECK(a.io_read_bytes >= N * 128 && a.io_read_bytes < N * 128 + 2 * 4096 * 300);
    size_t n = 20000;
    uint64_t *ids = random_ids(n, N, 3);
    float *out = malloc(n * 32 * sizeof *out);
    for (int rep = 0; rep < 3; rep++)
        TG_CHECK_OK(tg_rowfile_gather(rf, ids, n, out));
    TG_CHECK(rows_ok(raw, 32, TG_F32, 0, ids, n, out));
    tg_io_stats_snapshot(&st, &z);
    TG_CHECK_EQ_U64(z.io_read_bytes, a.io_read_bytes);
    TG_CHECK_EQ_U64(z.io_requests, a.io_requests);
    tg_rowfile_close(rf);
    free(out);
    free(ids);
    free(raw);
    unlink(path);
    free(path);
}

/* The most weighted rows are the resident ones; ties go to the lower ids. */
TG_TEST(resident_by_weight)
{
    const uint64_t N = 1000;
    unsigned char *raw;
    char *path = write_rows("w.bin", N, 16, TG_F32, &raw);
    uint32_t *w = calloc(N, sizeof *w);
    uint64_t hot[5] = {999, 3, 500, 501, 77};
    for (int i = 0; i < 5; i++)
        w[hot[i]] = 100000 + (uint32_t)i; /* beyond the clamp: still the heaviest */
    w[10] = w[11] = w[12] = 9;            /* a tie: 10 and 11 fit */
    tg_rowfile_opts_t o = {.path = path,
                           .num_rows = N,
                           .dim = 16,
                           .dtype = TG_F32,
                           .ram_bytes = N * 4 + 7 * 64,
                           .weight = w};
    tg_rowfile_t *rf = NULL;
    TG_CHECK_OK(tg_rowfile_open(&rf, &o));
    if (rf) {
        uint64_t ids[7] = {10, 999, 3, 11, 500, 501, 77};
        float out[7 * 16];
        TG_CHECK_OK(tg_rowfile_gather(rf, ids, 7, out));
        TG_CHECK(rows_ok(raw, 16, TG_F32, 0, ids, 7, out));
        tg_rowfile_counts_t c;
        tg_rowfile_counts(rf, &c);
        TG_CHECK_EQ_U64(c.resident_rows, 7);
        TG_CHECK_EQ_U64(c.miss_rows, 0);
        uint64_t cold = 12;
        TG_CHECK_OK(tg_rowfile_gather(rf, &cold, 1, out));
        tg_rowfile_counts(rf, &c);
        TG_CHECK_EQ_U64(c.miss_rows, 1);
    }
    tg_rowfile_close(rf);
    free(w);
    free(raw);
    unlink(path);
    free(path);
}

/* Rows near one another go out as one request; rows farther apart than the gap do not. */
TG_TEST(runs_merged)
{
    const uint64_t N = 4096;
    unsigned char *raw;
    char *path = write_rows("m.bin", N, 128, TG_F32, &raw); /* 512-byte rows */
    size_t n = 300;
    uint64_t *ids = malloc(n * sizeof *ids);
    float *out = malloc(n * 128 * sizeof *out);
    for (int g = 0; g < 2; g++) {
        tg_rowfile_opts_t o = {
            .path = path, .num_rows = N, .dim = 128, .dtype = TG_F32, .gap = g ? 1024 : 1};
        tg_rowfile_t *rf = NULL;
        TG_CHECK_OK(tg_rowfile_open(&rf, &o));
        if (!rf) continue;
        /* every third row, backwards: holes of 1024 bytes */
        for (size_t i = 0; i < n; i++)
            ids[i] = 3 * (n - 1 - i);
        TG_CHECK_OK(tg_rowfile_gather(rf, ids, n, out));
        TG_CHECK(rows_ok(raw, 128, TG_F32, 0, ids, n, out));
        tg_rowfile_counts_t c;
        tg_rowfile_counts(rf, &c);
        if (g) {
            /* runs of at most 64 KiB: 43 rows of 512 bytes 1024 apart per run */
            TG_CHECK(c.miss_requests <= (n + 42) / 43 + 1);
            /* the rows and the holes inside runs, never the holes between them */
            TG_CHECK(c.miss_bytes <= ((n - 1) * 3 + 1) * 512);
            TG_CHECK(c.miss_bytes > (n - 1) * 3 * 512 - 7 * 1024);
        } else {
            TG_CHECK_EQ_U64(c.miss_requests, n);
            TG_CHECK_EQ_U64(c.miss_bytes, n * 512);
        }
        /* adjacent rows in any order: one request per 64 KiB */
        for (size_t i = 0; i < n; i++)
            ids[i] = (i * 7) % n + 1000;
        uint64_t before = c.miss_requests;
        TG_CHECK_OK(tg_rowfile_gather(rf, ids, n, out));
        TG_CHECK(rows_ok(raw, 128, TG_F32, 0, ids, n, out));
        tg_rowfile_counts(rf, &c);
        TG_CHECK_EQ_U64(c.miss_requests - before, (n * 512 + 65535) / 65536);
        tg_rowfile_close(rf);
    }
    free(ids);
    free(out);
    free(raw);
    unlink(path);
    free(path);
}

/* A read that fails names the file and the offset, in the pass at open and in a gather; ids
 * out of range and a file too short are refused naming them. */
TG_TEST(errors_named)
{
    const uint64_t N = 2000;
    unsigned char *raw;
    char *path = write_rows("e.bin", N, 32, TG_F32, &raw);
    uint64_t bad = 1234, off = bad * 128;
    tg_io_fault_t f = {
        .op = TG_IO_FAULT_READ, .file = "e.bin", .lo = off, .hi = off + 1, .err = EIO};
    TG_CHECK_OK(tg_io_fault_add(&f));
    tg_budget_t b;
    tg_budget_init(&b, 0);
    tg_rowfile_opts_t o = {.path = path,
                           .num_rows = N,
                           .dim = 32,
                           .dtype = TG_F32,
                           .ram_bytes = UINT64_MAX,
                           .budget = &b};
    tg_rowfile_t *rf = NULL;
    TG_CHECK_ERR(tg_rowfile_open(&rf, &o), "e.bin");
    TG_CHECK(rf == NULL);
    TG_CHECK(strstr(tg_errmsg(), "offset") != NULL);
    TG_CHECK_EQ_U64(b.used, 0);
    /* nothing resident: only the gather that needs the row fails */
    o.ram_bytes = 0;
    TG_CHECK_OK(tg_rowfile_open(&rf, &o));
    if (rf) {
        float out[3 * 32];
        uint64_t good[3] = {5, 1999, 1200};
        TG_CHECK_OK(tg_rowfile_gather(rf, good, 3, out));
        TG_CHECK(rows_ok(raw, 32, TG_F32, 0, good, 3, out));
        uint64_t with_bad[3] = {5, bad, 7};
        int rc = tg_rowfile_gather(rf, with_bad, 3, out);
        TG_CHECK(rc == -EIO);
        char want[64];
        snprintf(want, sizeof want, "offset %llu", (unsigned long long)off);
        TG_CHECK(strstr(tg_errmsg(), "e.bin") != NULL);
        TG_CHECK(strstr(tg_errmsg(), want) != NULL);
        fprintf(stderr, "  message: %s\n", tg_errmsg());
        uint64_t out_of_range = N;
        TG_CHECK_ERR(tg_rowfile_gather(rf, &out_of_range, 1, out), "out of range");
    }
    tg_rowfile_close(rf);
    TG_CHECK_EQ_U64(b.used, 0);
    tg_io_fault_clear();
    /* a file shorter than its rows */
    o.num_rows = N + 1;
    TG_CHECK_ERR(tg_rowfile_open(&rf, &o), "e.bin");
    TG_CHECK_EQ_U64(b.used, 0);
    /* a budget too small for the stage */
    tg_budget_t tiny;
    tg_budget_init(&tiny, 1 << 20);
    o.num_rows = N;
    o.budget = &tiny;
    TG_CHECK(tg_rowfile_open(&rf, &o) == -ENOMEM);
    TG_CHECK_EQ_U64(tiny.used, 0);
    tg_budget_destroy(&tiny);
    tg_budget_destroy(&b);
    free(raw);
    unlink(path);
    free(path);
}

/* The CLI's JSON object: the line that starts with '{'. */
static const char *json_line(const char *out)
{
    const char *p = out;
    while (p && *p && *p != '{') {
        p = strchr(p, '\n');
        if (p) p++;
    }
    return p && *p == '{' ? p : "";
}

/* How many rows layer l kept resident in the run whose -v output is out (-1: no row file). */
static long resident(const char *out, int l)
{
    char key[64];
    snprintf(key, sizeof key, "layer-wise layer %d: ", l);
    for (const char *p = out ? strstr(out, key) : NULL; p; p = strstr(p + 1, key)) {
        long k, n;
        char word[16];
        if (sscanf(p + strlen(key), "%ld of %ld rows %15s", &k, &n, word) == 3 &&
            !strcmp(word, "resident,"))
            return k;
    }
    return -1;
}

/* Evaluation and inference of an out-of-core strategy under budgets from "the row file's stage
 * does not fit" to "everything in RAM" give memory's bytes: the same accuracy and loss, the same
 * predictions and embeddings. Between them the budgets cover every way a layer reads: rows
 * resident or not, some by weight, the intermediate layer in a file or in RAM. */
TG_TEST(out_of_core_same_results)
{
    char ds[4300], run[4300];
    snprintf(ds, sizeof ds, "%s/ds", g_dir);
    snprintf(run, sizeof run, "%s/run", g_dir);
    char *out = NULL;
    TG_CHECK(tg_test_cli(&out,
                         "generate %s --nodes 20000 --feat-dim 32 --avg-degree 10 "
                         "--threads 1",
                         ds) == 0);
    free(out);
    TG_CHECK(tg_test_cli(&out,
                         "train %s --out %s --strategy memory --model sage --layers 2 "
                         "--hidden 64 --fanouts 5,5 --batch-size 500 --epochs 1 "
                         "--batches-per-epoch 2 --eval-every 0 --threads 1",
                         ds, run) == 0);
    free(out);
    char *ref = NULL;
    TG_CHECK(tg_test_cli(&ref,
                         "eval %s --checkpoint %s --strategy memory --eval-chunk 500 --json "
                         "--threads 1",
                         ds, run) == 0);
    char p0[4400], p1[4400], e0[4400], e1[4400];
    snprintf(p0, sizeof p0, "%s/pred-memory", g_dir);
    snprintf(e0, sizeof e0, "%s/pred-memory.emb", g_dir);
    TG_CHECK(tg_test_cli(&out,
                         "infer %s --checkpoint %s --out %s --strategy memory --chunk-nodes 500 "
                         "--embeddings --threads 1",
                         ds, run, p0) == 0);
    free(out);
    const char *mems[4] = {"8M", "16M", "20M", "24M"};
    int none0 = 0, some0 = 0, all0 = 0, some1 = 0, ram1 = 0;
    for (int i = 0; i < 4; i++) {
        int rc = tg_test_cli(&out,
                             "-v eval %s --checkpoint %s --strategy gnndrive --mem %s "
                             "--eval-chunk 500 --json --threads 1",
                             ds, run, mems[i]);
        TG_CHECK(rc == 0);
        if (rc) fprintf(stderr, "%s\n", out ? out : "");
        const char *a = json_line(out), *z = json_line(ref);
        size_t la = strcspn(a, "\n"), lz = strcspn(z, "\n");
        if (la != lz || memcmp(a, z, la))
            TG_FAIL("--mem %s: %.*s, memory: %.*s", mems[i], (int)la, a, (int)lz, z);
        long k0 = resident(out, 0), k1 = resident(out, 1);
        none0 += k0 == 0;
        some0 += k0 > 0 && k0 < 20000;
        all0 += k0 == 20000;
        some1 += k1 > 0 && k1 < 20000;
        ram1 += k1 < 0;
        free(out);
        snprintf(p1, sizeof p1, "%s/pred-%d", g_dir, i);
        snprintf(e1, sizeof e1, "%s/pred-%d.emb", g_dir, i);
        rc = tg_test_cli(&out,
                         "infer %s --checkpoint %s --out %s --strategy gnndrive --mem %s "
                         "--chunk-nodes 500 --embeddings --threads 1",
                         ds, run, p1, mems[i]);
        TG_CHECK(rc == 0);
        if (rc) fprintf(stderr, "%s\n", out ? out : "");
        free(out);
        if (!tg_test_same_file(p0, p1) || !tg_test_same_file(e0, e1))
            TG_FAIL("--mem %s: inference differs from memory's", mems[i]);
    }
    /* every way a layer reads was taken */
    TG_CHECK(none0 && some0 && all0 && some1 && ram1);
    free(ref);
}

/* A failed read of features.bin stops evaluation with the file, the offset and the layer, both
 * in the sequential pass (the rows fit) and in a chunk's reads (none resident). Runs after
 * out_of_core_same_results, on its dataset and run. */
TG_TEST(cli_read_error_named)
{
    char ds[4300], run[4300];
    snprintf(ds, sizeof ds, "%s/ds", g_dir);
    snprintf(run, sizeof run, "%s/run", g_dir);
    /* row 15000 of 128 bytes: a row every chunk's sources may hold */
    setenv("TIERGNN_IO_FAULT", "EIO@1920000-1920128,file=features.bin", 1);
    const char *mems[2] = {"24M", "8M"};
    for (int i = 0; i < 2; i++) {
        char *out = NULL;
        int rc = tg_test_cli(&out,
                             "eval %s --checkpoint %s --strategy gnndrive --mem %s "
                             "--eval-chunk 500 --json --threads 1",
                             ds, run, mems[i]);
        TG_CHECK(rc != 0);
        TG_CHECK(out && strstr(out, "features.bin: read error at offset"));
        TG_CHECK(out && strstr(out, "layer-wise forward, layer 0"));
        if (out) fprintf(stderr, "  --mem %s:\n%s", mems[i], out);
        free(out);
    }
    unsetenv("TIERGNN_IO_FAULT");
}

int main(void)
{
    g_dir = tg_test_tmpdir("layerwise_rows");
    TG_RUN(same_rows_any_residency);
    TG_RUN(one_sequential_pass);
    TG_RUN(resident_by_weight);
    TG_RUN(runs_merged);
    TG_RUN(errors_named);
    TG_RUN(out_of_core_same_results);
    TG_RUN(cli_read_error_named);
    int rc = tg_test_done();
    if (!rc) tg_rmtree(g_dir);
    return rc;
}
