/* Memory-mapped feature store: the same rows as the in-memory store (f32 and f16, with and
 * without normalisation), nothing reserved against the budget, parallel gathering equal to
 * serial gathering with errors carried to the caller, and truncation reported with the file and
 * the offset. */
#include "test_adj_disk_common.h"
#include "tiergnn/store.h"

static const char *g_dir;

/* Random node ids, with repeats, as a batch's node list would not have but a caller may pass. */
static uint64_t *random_nodes(size_t n, uint64_t num_nodes, uint64_t seed)
{
    tg_rng_t r;
    tg_rng_seed(&r, seed);
    uint64_t *v = malloc(n * sizeof *v);
    for (size_t i = 0; i < n; i++)
        v[i] = tg_rng_below(&r, num_nodes);
    v[0] = num_nodes - 1; /* the last row too */
    return v;
}

TG_TEST(same_rows_as_memory)
{
    for (int half = 0; half < 2; half++)
        for (int norm = 0; norm < 2; norm++) {
            tad_opts_t o;
            tad_default(&o);
            o.feat_dtype = half ? TG_F16 : TG_F32;
            o.dim = half ? 37 : 64; /* odd widths: rows straddle pages at odd offsets */
            o.seed = 3 + (uint64_t)half;
            char dir[4200];
            snprintf(dir, sizeof dir, "%s/ds-%d", g_dir, half);
            if (!norm) tad_write(dir, &o);
            tg_dataset_t *ds = tad_open(dir);
            tg_budget_t b;
            tg_budget_init(&b, 0);
            tg_store_opts_t so = {.normalize = norm, .budget = &b};
            tg_store_t *mem, *mm;
            TG_CHECK_OK(tg_store_memory_open(&mem, ds, &so));
            uint64_t used_mem = b.used;
            TG_CHECK_OK(tg_store_mmap_open(&mm, ds, &so));
            TG_CHECK_EQ_U64(b.used, used_mem); /* the mmap store reserves nothing */
            TG_CHECK_EQ_U64(mm->mem_bytes, 0);
            TG_CHECK_EQ_U64(mm->dim, o.dim);
            TG_CHECK_EQ_U64(mm->num_nodes, o.nodes);
            size_t n = 3000;
            uint64_t *nodes = random_nodes(n, o.nodes, 17);
            float *x = malloc(n * o.dim * sizeof *x), *y = malloc(n * o.dim * sizeof *y);
            TG_CHECK_OK(tg_store_gather(mem, nodes, n, x));
            memset(y, 0xcd, n * o.dim * sizeof *y);
            TG_CHECK_OK(tg_store_gather(mm, nodes, n, y));
            if (memcmp(x, y, n * o.dim * sizeof *x))
                TG_FAIL("%s%s: mmap rows differ from the memory store's", half ? "f16" : "f32",
                        norm ? " normalised" : "");
            /* a bad id is refused with its value, before any row is touched */
            uint64_t bad[2] = {0, o.nodes};
            TG_CHECK_ERR(tg_store_gather(mm, bad, 2, y), "node 2500 out of range");
            free(nodes);
            free(x);
            free(y);
            tg_store_release(mm);
            tg_store_release(mem);
            TG_CHECK_EQ_U64(b.used, 0);
            tg_budget_destroy(&b);
            tg_dataset_close(ds);
        }
}

TG_TEST(parallel_gather)
{
    tad_opts_t o;
    tad_default(&o);
    o.seed = 8;
    char dir[4200];
    snprintf(dir, sizeof dir, "%s/par", g_dir);
    tad_write(dir, &o);
    tg_dataset_t *ds = tad_open(dir);
    tg_store_opts_t so = {.normalize = 1};
    tg_store_t *mm;
    TG_CHECK_OK(tg_store_mmap_open(&mm, ds, &so));
    tg_pool_t *pool;
    TG_CHECK_OK(tg_pool_create(&pool, 4));
    size_t sizes[4] = {1, 63, 300, 5000};
    for (int k = 0; k < 4; k++) {
        size_t n = sizes[k];
        uint64_t *nodes = random_nodes(n, o.nodes, 100 + (uint64_t)k);
        float *x = malloc(n * o.dim * sizeof *x), *y = malloc(n * o.dim * sizeof *y);
        TG_CHECK_OK(tg_store_gather(mm, nodes, n, x));
        TG_CHECK_OK(tg_store_gather_parallel(mm, pool, nodes, n, y));
        TG_CHECK(memcmp(x, y, n * o.dim * sizeof *x) == 0);
        TG_CHECK_OK(tg_store_gather_parallel(mm, NULL, nodes, n, y));
        TG_CHECK(memcmp(x, y, n * o.dim * sizeof *x) == 0);
        if (n >= 300) {
            /* an error on a worker thread reaches the caller with its message */
            nodes[n - 1] = o.nodes + 7;
            TG_CHECK_ERR(tg_store_gather_parallel(mm, pool, nodes, n, y), "node 2507 out of range");
        }
        free(nodes);
        free(x);
        free(y);
    }
    tg_pool_destroy(pool);
    tg_store_release(mm);
    tg_dataset_close(ds);
}

TG_TEST(truncated)
{
    tad_opts_t o;
    tad_default(&o);
    o.seed = 9;
    o.dim = 100;
    char dir[4200];
    snprintf(dir, sizeof dir, "%s/trunc", g_dir);
    tad_write(dir, &o);
    tg_dataset_t *ds = tad_open(dir);
    tg_store_t *mm;
    TG_CHECK_OK(tg_store_mmap_open(&mm, ds, NULL));
    uint64_t row = o.dim * sizeof(float); /* bytes per row */
    tad_truncate(ds, TG_FILE_FEATURES, 10 * 4096);
    float *x = malloc(row);
    uint64_t v = o.nodes - 1;
    tg_err_clear();
    TG_CHECK(tg_store_gather(mm, &v, 1, x) == -EIO);
    fprintf(stderr, "  %s\n", tg_errmsg());
    TG_CHECK(strstr(tg_errmsg(), "features.bin") != NULL);
    /* the faulting address lies in the row (memcpy may touch its end first) */
    const char *at = strstr(tg_errmsg(), "offset ");
    unsigned long long off = 0;
    TG_CHECK(at && sscanf(at, "offset %llu", &off) == 1);
    TG_CHECK(off >= v * row && off < (v + 1) * row);
    /* a row before the cut: no fault, but the file shrank, so the gather still fails */
    v = 0;
    TG_CHECK_ERR(tg_store_gather(mm, &v, 1, x), "truncated");
    /* faults on pool threads, twice in a row on the same threads: each one is an error that
     * reaches the caller (the guard leaves SIGBUS unblocked after a jump) */
    tg_pool_t *pool;
    TG_CHECK_OK(tg_pool_create(&pool, 3));
    size_t n = 600;
    uint64_t *nodes = random_nodes(n, o.nodes, 44);
    float *y = malloc(n * row);
    for (int k = 0; k < 2; k++)
        TG_CHECK_ERR(tg_store_gather_parallel(mm, pool, nodes, n, y), "features.bin");
    tg_pool_destroy(pool);
    free(nodes);
    free(y);
    free(x);
    tg_store_release(mm);
    TG_CHECK_ERR(tg_store_mmap_open(&mm, ds, NULL), "expected");
    tg_dataset_close(ds);
}

int main(void)
{
    g_dir = tg_test_tmpdir("store_mmap");
    TG_RUN(same_rows_as_memory);
    TG_RUN(parallel_gather);
    TG_RUN(truncated);
    int rc = tg_test_done();
    if (!rc) tg_rmtree(g_dir);
    return rc;
}
