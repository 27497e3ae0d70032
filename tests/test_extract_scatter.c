/* store/extract's rows to scattered places (tg_extract_scatter_*): every row lands at its place,
 * in X or in a caller's slots, equal to the row a batch extraction gives (f32 and f16 files,
 * normalised or not, a staging smaller and larger than the plan's chunk, one pair and none);
 * the staging is reserved against the budget and returned; the pairs buffer grows and keeps
 * what it holds; errors: the budget's refusal naming who, a zero staging, an injected read
 * error naming the file and the offset through the fail hook, an abort (-ECANCELED). */
#include "test_feat_common.h"

#include <errno.h>
#include <stdatomic.h>

#include "tiergnn/extract.h"
#include "tiergnn/store.h"

enum { N = 3000, D = 16 };

static const char *dir;

typedef struct {
    tg_budget_t budget;
    tg_io_file_t *f;
    tg_extract_t *ex;
} rig_t;

static void rig_open(rig_t *g, const char *path, tg_feat_dtype_t dtype, int normalize)
{
    memset(g, 0, sizeof *g);
    tg_budget_init(&g->budget, 0);
    TG_CHECK_OK(tg_io_file_open(&g->f, path, 0));
    tg_extract_plan_opts_t po;
    tg_extract_plan_opts_default(&po);
    po.num_nodes = N, po.feat_dim = D, po.dtype = dtype, po.extractors = 1;
    po.io_depth = 8, po.io_gap = 256, po.chunk_rows = 64;
    tg_extract_plan_t pl;
    TG_CHECK_OK(tg_extract_plan(&pl, &po));
    tg_extract_opts_t eo = {
        .plan = &pl, .feat = g->f, .normalize = normalize, .budget = &g->budget, .who = "test"};
    TG_CHECK_OK(tg_extract_create(&g->ex, &eo));
}

static void rig_close(rig_t *g)
{
    tg_extract_destroy(g->ex);
    tg_io_file_close(g->f);
    TG_CHECK_EQ_U64(g->budget.used, 0);
    tg_budget_destroy(&g->budget);
}

static void expect_row(float *out, uint64_t node, int normalize)
{
    for (uint32_t j = 0; j < D; j++)
        out[j] = tfeat_val(node, j);
    if (normalize) tg_feat_normalize_rows(out, 1, D);
}

/* f16 rows widen to values f16 can hold: compare with a tolerance there */
static int row_equal(const float *a, const float *b, tg_feat_dtype_t dtype)
{
    for (uint32_t j = 0; j < D; j++)
        if (dtype == TG_F32 ? a[j] != b[j] : fabsf(a[j] - b[j]) > 1e-3f * (1 + fabsf(b[j])))
            return 0;
    return 1;
}

static void *slot_of(void *ctx, uint32_t place)
{
    return (float *)ctx + (size_t)place * D;
}

/* n distinct random nodes, sorted, each with a distinct place < 2 n */
static size_t make_pairs(uint64_t *pairs, size_t n, uint64_t seed)
{
    tg_rng_t r;
    tg_rng_seed2(&r, seed, 0);
    uint64_t v = tg_rng_below(&r, 5);
    size_t k = 0;
    for (; k < n && v < N; k++, v += 1 + tg_rng_below(&r, 4))
        pairs[k] = v << 32 | (uint64_t)(2 * ((k * 7919) % n) + (k & 1));
    return k;
}

TG_TEST(rows_land_at_their_places)
{
    for (int c = 0; c < 4; c++) {
        tg_feat_dtype_t dtype = c & 1 ? TG_F16 : TG_F32;
        int normalize = (c >> 1) & 1;
        char name[32];
        snprintf(name, sizeof name, "feat-%d.bin", c);
        char *path = tfeat_write(dir, name, N, D, dtype);
        rig_t g;
        rig_open(&g, path, dtype, normalize);
        for (uint32_t chunk = 50; chunk <= 200; chunk += 150) {
            tg_extract_scatter_t *sc;
            uint64_t used0 = g.budget.used;
            TG_CHECK_OK(tg_extract_scatter_create(&sc, chunk, D, &g.budget, "test"));
            TG_CHECK_EQ_U64(g.budget.used - used0, tg_extract_scatter_bytes(chunk, D));
            for (size_t want = 0; want <= 700; want = want ? want * 7 : 1) {
                uint64_t *pairs = tg_extract_scatter_pairs(sc, want ? want : 1);
                TG_CHECK(pairs != NULL);
                size_t n = make_pairs(pairs, want, 3 + want);
                float *X = calloc((2 * n + 1) * D, sizeof *X);
                float *slots = calloc((2 * n + 1) * D, sizeof *slots);
                TG_CHECK_OK(tg_extract_scatter_read(sc, tg_extract_worker(g.ex, 0), 9, pairs, n, X,
                                                    NULL, NULL, NULL));
                TG_CHECK_OK(tg_extract_scatter_read(sc, tg_extract_worker(g.ex, 0), 9, pairs, n,
                                                    NULL, slot_of, slots, NULL));
                for (size_t i = 0; i < n; i++) {
                    uint64_t v = pairs[i] >> 32, place = pairs[i] & UINT32_MAX;
                    float row[D];
                    expect_row(row, v, normalize);
                    if (!row_equal(X + place * D, row, dtype) ||
                        !row_equal(slots + place * D, row, dtype)) {
                        TG_FAIL("case %d chunk %u n %zu: node %llu at place %llu", c, chunk, n,
                                (unsigned long long)v, (unsigned long long)place);
                        break;
                    }
                }
                free(X);
                free(slots);
            }
            tg_extract_scatter_destroy(sc);
            TG_CHECK_EQ_U64(g.budget.used, used0);
        }
        rig_close(&g);
        free(path);
    }
}

TG_TEST(pairs_grow)
{
    tg_extract_scatter_t *sc;
    TG_CHECK_OK(tg_extract_scatter_create(&sc, 8, D, NULL, "test"));
    TG_CHECK(tg_extract_scatter_pairs(sc, 0) != NULL); /* none is a buffer too */
    uint64_t *p = tg_extract_scatter_pairs(sc, 10);
    TG_CHECK(p != NULL);
    for (uint64_t i = 0; i < 10; i++)
        p[i] = i;
    p = tg_extract_scatter_pairs(sc, 5000); /* grown: what it held stays */
    TG_CHECK(p != NULL && p[9] == 9);
    p[4999] = 1;
    TG_CHECK(tg_extract_scatter_pairs(sc, 100) == p); /* no shrink */
    tg_extract_scatter_destroy(sc);
    tg_extract_scatter_destroy(NULL);
}

typedef struct {
    int fails;
    char msg[512];
} hook_t;

static void on_fail(void *ctx, int rc, const char *msg)
{
    hook_t *h = ctx;
    (void)rc;
    h->fails++;
    snprintf(h->msg, sizeof h->msg, "%s", msg ? msg : "");
}

TG_TEST(errors)
{
    tg_extract_scatter_t *sc = NULL;
    tg_budget_t small;
    tg_budget_init(&small, 100);
    TG_CHECK_ERR(tg_extract_scatter_create(&sc, 64, D, &small, "who-asked"),
                 "who-asked: read staging");
    TG_CHECK(sc == NULL && small.used == 0);
    tg_budget_destroy(&small);
    TG_CHECK_ERR(tg_extract_scatter_create(&sc, 0, D, NULL, "test"), "staging of 0 rows");

    char *path = tfeat_write(dir, "feat-err.bin", N, D, TG_F32);
    rig_t g;
    rig_open(&g, path, TG_F32, 0);
    TG_CHECK_OK(tg_extract_scatter_create(&sc, 32, D, &g.budget, "test"));
    uint64_t *pairs = tg_extract_scatter_pairs(sc, 100);
    size_t n = make_pairs(pairs, 100, 5);
    float *X = calloc(2 * n * D, sizeof *X);
    /* a read error: the file and the offset, through the fail hook */
    tg_io_fault_t f = {
        .op = TG_IO_FAULT_READ, .file = "feat-err.bin", .lo = 0, .hi = 1ull << 40, .err = EIO};
    TG_CHECK_OK(tg_io_fault_add(&f));
    hook_t h = {0};
    tg_extract_hooks_t hk = {.fail = on_fail, .ctx = &h};
    TG_CHECK_ERR(
        tg_extract_scatter_read(sc, tg_extract_worker(g.ex, 0), 4, pairs, n, X, NULL, NULL, &hk),
        "feat-err.bin");
    TG_CHECK(strstr(tg_errmsg(), "offset") != NULL);
    TG_CHECK(h.fails == 1 && strstr(h.msg, "feat-err.bin") != NULL);
    tg_io_fault_clear();
    /* an abort */
    atomic_int stop = 1;
    tg_extract_hooks_t ab = {.abort = &stop};
    TG_CHECK(tg_extract_scatter_read(sc, tg_extract_worker(g.ex, 0), 4, pairs, n, X, NULL, NULL,
                                     &ab) == -ECANCELED);
    /* and it reads again */
    TG_CHECK_OK(
        tg_extract_scatter_read(sc, tg_extract_worker(g.ex, 0), 4, pairs, n, X, NULL, NULL, NULL));
    free(X);
    tg_extract_scatter_destroy(sc);
    rig_close(&g);
    free(path);
}

int main(void)
{
    tg_log_set_level(TG_LOG_WARN);
    dir = tg_test_tmpdir("extract_scatter");
    TG_RUN(rows_land_at_their_places);
    TG_RUN(pairs_grow);
    TG_RUN(errors);
    int rc = tg_test_done();
    if (!rc) tg_rmtree(dir);
    return rc;
}
