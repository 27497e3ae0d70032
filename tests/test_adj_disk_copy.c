/* tg_adj_disk_copy (graph/adj_disk.c): a copy of indices.bin in RAM, apart from the disk
 * adjacency, reads what the disk adjacency reads (u32 and u64 index files) and samples the same
 * batches; it holds its bytes against the budget until destroyed and leaves the disk adjacency
 * as it was; errors: the budget's refusal (naming who asked), another adjacency, a position out
 * of range, a short file (naming indices.bin and the offset), each leaving the budget as it
 * was. */
#include "test_adj_disk_common.h"

static const char *g_dir;

static tg_dataset_t *make(const char *name, tg_index_dtype_t dt, uint64_t seed)
{
    tad_opts_t o;
    tad_default(&o);
    o.index_dtype = dt;
    o.seed = seed;
    char dir[4200];
    snprintf(dir, sizeof dir, "%s/%s", g_dir, name);
    tad_write(dir, &o);
    return tad_open(dir);
}

TG_TEST(same_reads_and_batches)
{
    for (int w = 0; w < 2; w++) {
        tg_dataset_t *ds = make(w ? "u64" : "u32", w ? TG_U64 : TG_U32, 3 + w);
        tg_budget_t bg;
        tg_budget_init(&bg, 0);
        tg_adj_t *disk, *copy;
        TG_CHECK_OK(tg_adj_disk_open(&disk, ds, NULL, &bg));
        uint64_t used0 = bg.used, E = disk->num_edges;
        TG_CHECK_OK(tg_adj_disk_copy(&copy, disk, &bg, "test: the copy"));
        TG_CHECK_EQ_U64(bg.used - used0, tg_adj_disk_file_bytes(disk));
        TG_CHECK(copy->indptr == disk->indptr && copy->num_edges == E);
        TG_CHECK(copy->num_nodes == disk->num_nodes);
        /* every position, a chunk at a time, in reverse order within a chunk */
        uint64_t pos[512], a[512], b[512];
        for (uint64_t p0 = 0; p0 < E; p0 += 512) {
            size_t n = (size_t)TG_MIN((uint64_t)512, E - p0);
            for (size_t i = 0; i < n; i++)
                pos[i] = p0 + n - 1 - i;
            TG_CHECK_OK(tg_adj_read(disk, pos, n, a));
            TG_CHECK_OK(tg_adj_read(copy, pos, n, b));
            if (memcmp(a, b, n * sizeof *a)) {
                TG_FAIL("%s: positions %llu.. differ", w ? "u64" : "u32", (unsigned long long)p0);
                break;
            }
        }
        /* a sampled batch over each */
        int64_t fan[2] = {10, 5};
        uint64_t seeds[64];
        for (int i = 0; i < 64; i++)
            seeds[i] = (uint64_t)i * 31 % disk->num_nodes;
        tg_sampler_t *s1, *s2;
        TG_CHECK_OK(tg_sampler_create(&s1, disk, 2, fan));
        TG_CHECK_OK(tg_sampler_create(&s2, copy, 2, fan));
        tg_rng_t r1, r2;
        tg_sampler_batch_rng(&r1, 9, 0, 0);
        r2 = r1;
        tg_batch_t x, y;
        TG_CHECK_OK(tg_sampler_sample(s1, seeds, 64, &r1, &x));
        TG_CHECK_OK(tg_sampler_sample(s2, seeds, 64, &r2, &y));
        tad_batches_equal(&x, &y, "a batch over the copy");
        tg_batch_free(&x);
        tg_batch_free(&y);
        tg_sampler_destroy(s1);
        tg_sampler_destroy(s2);
        /* out of range */
        uint64_t bad = E, v;
        TG_CHECK_ERR(tg_adj_read(copy, &bad, 1, &v), "out of range");
        tg_adj_destroy(copy);
        TG_CHECK_EQ_U64(bg.used, used0);
        /* the disk adjacency still reads, still from disk */
        TG_CHECK(tg_adj_disk_load_bytes(disk) > 0);
        uint64_t p0 = E - 1;
        TG_CHECK_OK(tg_adj_read(disk, &p0, 1, &v));
        tg_adj_destroy(disk);
        TG_CHECK_EQ_U64(bg.used, 0);
        tg_budget_destroy(&bg);
        tg_dataset_close(ds);
    }
}

TG_TEST(no_budget)
{
    tg_dataset_t *ds = make("nobudget", TG_U32, 5);
    tg_adj_t *disk, *copy;
    TG_CHECK_OK(tg_adj_disk_open(&disk, ds, NULL, NULL));
    TG_CHECK_OK(tg_adj_disk_copy(&copy, disk, NULL, "test: the copy"));
    uint64_t p = 0, a, b;
    TG_CHECK_OK(tg_adj_read(disk, &p, 1, &a));
    TG_CHECK_OK(tg_adj_read(copy, &p, 1, &b));
    TG_CHECK(a == b);
    tg_adj_destroy(copy);
    tg_adj_destroy(disk);
    tg_dataset_close(ds);
}

TG_TEST(errors)
{
    tg_dataset_t *ds = make("errors", TG_U32, 7);
    tg_budget_t bg;
    tg_budget_init(&bg, 0);
    tg_adj_t *disk, *copy = (tg_adj_t *)&bg;
    TG_CHECK_OK(tg_adj_disk_open(&disk, ds, NULL, &bg));
    /* the budget refuses: -ENOMEM naming who asked */
    tg_budget_t small;
    tg_budget_init(&small, 4096);
    tg_err_clear();
    TG_CHECK(tg_adj_disk_copy(&copy, disk, &small, "test: the copy") == -ENOMEM);
    TG_CHECK(strstr(tg_errmsg(), "test: the copy") != NULL);
    TG_CHECK(copy == NULL);
    TG_CHECK_EQ_U64(small.used, 0);
    tg_budget_destroy(&small);
    /* another adjacency */
    static const uint64_t ip[2] = {0, 1}, ix[1] = {0};
    tg_adj_t *mem;
    TG_CHECK_OK(tg_adj_memory_create(&mem, 1, 1, ip, ix, 0));
    TG_CHECK_ERR(tg_adj_disk_copy(&copy, mem, &bg, "test"), "not a disk adjacency");
    tg_adj_destroy(mem);
    /* a short file under the open adjacency: the read names the file and the offset */
    uint64_t used0 = bg.used;
    tad_truncate(ds, TG_FILE_INDICES, disk->num_edges * 4 / 2);
    tg_err_clear();
    int rc = tg_adj_disk_copy(&copy, disk, &bg, "test: the copy");
    TG_CHECK(rc < 0 && copy == NULL);
    TG_CHECK(strstr(tg_errmsg(), "indices.bin") != NULL);
    TG_CHECK(strstr(tg_errmsg(), "offset") != NULL);
    fprintf(stderr, "  %s\n", tg_errmsg());
    TG_CHECK_EQ_U64(bg.used, used0);
    tg_adj_destroy(disk);
    tg_budget_destroy(&bg);
    tg_dataset_close(ds);
}

int main(void)
{
    /* No skip without O_DIRECT or io_uring: the copy is read through the io layer's fallbacks. */
    g_dir = tg_test_tmpdir("adj_disk_copy");
    TG_RUN(same_reads_and_batches);
    TG_RUN(no_budget);
    TG_RUN(errors);
    int rc = tg_test_done();
    if (!rc) tg_rmtree(g_dir);
    return rc;
}
