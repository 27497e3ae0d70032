/* Disk-resident adjacency: the sampler over it gives exactly the batches it gives over the
 * in-memory adjacency (u32 and u64 index files, io_uring and pread), concurrently too; counters,
 * chunked reads, and errors that name indices.bin and the offset. */
#include "test_adj_disk_common.h"
#include "test_io_common.h"

static const char *g_dir;

/* The fanout sets every case runs: sampled, full neighbourhoods mixed in, three layers, none. */
static const int64_t fan_sets[][3] = {{10, 5, 0}, {-1, 3, 0}, {25, 10, 5}, {0, 0, 0}};
static const int fan_layers[] = {2, 2, 3, 2};

/* Samples `nb` batches of `bs` seeds of ds's training split on both adjacencies and compares
 * them; returns the adjacency positions the sampler read (sum of block edges). */
static uint64_t compare_epoch(tg_adj_t *mem, tg_adj_t *disk, const tg_dataset_t *ds, int set,
                              uint64_t seed, uint64_t nb, uint64_t bs, const char *what)
{
    uint64_t *train, ntrain, edges = 0;
    TG_CHECK_OK(tg_dataset_load_split(ds, TG_FILE_TRAIN, &train, &ntrain));
    tg_sampler_shuffle_epoch(train, ntrain, seed, 0);
    tg_sampler_t *sm, *sd;
    TG_CHECK_OK(tg_sampler_create(&sm, mem, fan_layers[set], fan_sets[set]));
    TG_CHECK_OK(tg_sampler_create(&sd, disk, fan_layers[set], fan_sets[set]));
    for (uint64_t b = 0; b < nb && (b + 1) * bs <= ntrain; b++) {
        tg_rng_t r1, r2;
        tg_sampler_batch_rng(&r1, seed, 0, b);
        r2 = r1;
        tg_batch_t x, y;
        TG_CHECK_OK(tg_sampler_sample(sm, train + b * bs, bs, &r1, &x));
        int rc = tg_sampler_sample(sd, train + b * bs, bs, &r2, &y);
        if (rc < 0) {
            TG_FAIL("%s: disk sampler: %s", what, tg_errmsg());
            tg_batch_free(&x);
            break;
        }
        char w[256];
        snprintf(w, sizeof w, "%.160s, fanout set %d, batch %llu", what, set,
                 (unsigned long long)b);
        tad_batches_equal(&x, &y, w);
        edges += tad_batch_edges(&y);
        tg_batch_free(&x);
        tg_batch_free(&y);
    }
    tg_sampler_destroy(sm);
    tg_sampler_destroy(sd);
    free(train);
    return edges;
}

TG_TEST(same_batches_as_memory)
{
    for (int wide = 0; wide < 2; wide++)
        for (int pread_only = 0; pread_only < 2; pread_only++)
            for (uint64_t seed = 1; seed <= 3; seed++) {
                tad_opts_t o;
                tad_default(&o);
                o.index_dtype = wide ? TG_U64 : TG_U32;
                o.seed = seed;
                o.nodes = 1500 + 500 * seed;
                char dir[4200];
                snprintf(dir, sizeof dir, "%s/ds-%d-%llu", g_dir, wide, (unsigned long long)seed);
                if (!pread_only) tad_write(dir, &o);
                tg_dataset_t *ds = tad_open(dir);
                tg_adj_t *mem, *disk;
                TG_CHECK_OK(tg_adj_memory_open(&mem, ds));
                tg_io_stats_t stats;
                tg_io_stats_init(&stats);
                tg_adj_disk_opts_t ao;
                tg_adj_disk_opts_default(&ao);
                ao.io.stats = &stats;
                if (pread_only) ao.io.flags = TG_IO_FORCE_PREAD;
                tg_budget_t budget;
                tg_budget_init(&budget, 0);
                TG_CHECK_OK(tg_adj_disk_open(&disk, ds, &ao, &budget));
                TG_CHECK(tg_adj_disk_stats(disk) == &stats);
                TG_CHECK(tg_adj_disk_stats(mem) == NULL);
                /* indptr and the pool's staging are accounted */
                TG_CHECK(budget.used >= (o.nodes + 1) * 8);
                char what[160];
                snprintf(what, sizeof what, "%s, %s, seed %llu", wide ? "u64" : "u32",
                         pread_only ? "pread" : "io_uring", (unsigned long long)seed);
                uint64_t positions = 0;
                for (int set = 0; set < 4; set++)
                    positions +=
                        compare_epoch(mem, disk, ds, set, seed * 10 + (uint64_t)set, 6, 64, what);
                tg_io_counts_t c;
                tg_io_stats_snapshot(&stats, &c);
                /* exactly the index bytes the sampler asked for, no more */
                TG_CHECK_EQ_U64(c.io_needed_bytes, positions * tg_index_dtype_size(o.index_dtype));
                TG_CHECK(c.io_requests > 0);
                TG_CHECK(c.io_read_bytes > 0);
                tg_adj_destroy(disk);
                TG_CHECK_EQ_U64(budget.used, 0);
                tg_budget_destroy(&budget);
                tg_adj_destroy(mem);
                tg_dataset_close(ds);
            }
}

/* Raw reads of every position (one call, and node by node in random node order) with tiny
 * queues: many chunks of max_requests ranges, ranges split over several disk reads. */
TG_TEST(raw_reads_chunked)
{
    for (int wide = 0; wide < 2; wide++) {
        tad_opts_t o;
        tad_default(&o);
        o.index_dtype = wide ? TG_U64 : TG_U32;
        o.seed = 11;
        char dir[4200];
        snprintf(dir, sizeof dir, "%s/raw-%d", g_dir, wide);
        tad_write(dir, &o);
        tg_dataset_t *ds = tad_open(dir);
        tg_adj_t *mem, *disk;
        TG_CHECK_OK(tg_adj_memory_open(&mem, ds));
        tg_adj_disk_opts_t ao;
        tg_adj_disk_opts_default(&ao);
        ao.io.depth = 2;
        ao.io.max_read_bytes = 4096;
        ao.queues = 1;
        ao.max_requests = 7;
        TG_CHECK_OK(tg_adj_disk_open(&disk, ds, &ao, NULL));
        uint64_t E = mem->num_edges, N = mem->num_nodes;
        uint64_t *pos = malloc(E * sizeof *pos), *a = malloc(E * 8), *b = malloc(E * 8);
        for (uint64_t i = 0; i < E; i++)
            pos[i] = i;
        TG_CHECK_OK(tg_adj_read(mem, pos, E, a));
        TG_CHECK_OK(tg_adj_read(disk, pos, E, b));
        TG_CHECK(memcmp(a, b, E * 8) == 0);
        /* node order shuffled, every other position of each node: many short ranges */
        uint64_t *order = malloc(N * sizeof *order);
        for (uint64_t v = 0; v < N; v++)
            order[v] = v;
        tg_rng_t r;
        tg_rng_seed(&r, 5);
        tg_rng_shuffle_u64(&r, order, N);
        uint64_t n = 0;
        for (uint64_t k = 0; k < N; k++) {
            uint64_t v = order[k];
            for (uint64_t p = mem->indptr[v]; p < mem->indptr[v + 1]; p += 1 + (p & 1))
                pos[n++] = p;
        }
        TG_CHECK_OK(tg_adj_read(mem, pos, n, a));
        memset(b, 0xab, n * 8);
        TG_CHECK_OK(tg_adj_read(disk, pos, n, b));
        TG_CHECK(memcmp(a, b, n * 8) == 0);
        tg_io_counts_t c;
        tg_io_stats_snapshot(tg_adj_disk_stats(disk), &c);
        TG_CHECK_EQ_U64(c.io_needed_bytes, (E + n) * tg_index_dtype_size(o.index_dtype));
        /* a position out of range is refused, naming it */
        uint64_t bad = E;
        TG_CHECK_ERR(tg_adj_read(disk, &bad, 1, a), "out of range");
        free(order);
        free(pos);
        free(a);
        free(b);
        tg_adj_destroy(disk);
        tg_adj_destroy(mem);
        tg_dataset_close(ds);
    }
}

/* Sampler threads share one disk adjacency (two queues for four threads). */
typedef struct {
    tg_adj_t *adj;
    const uint64_t *seeds;
    int tid;
    tg_batch_t out[8];
    int rc;
    char msg[512];
} thr_t;

#define THREAD_BATCHES 8
#define THREAD_BS 48

static void *thr_main(void *arg)
{
    thr_t *t = arg;
    tg_sampler_t *s;
    int64_t fan[2] = {15, 10};
    t->rc = tg_sampler_create(&s, t->adj, 2, fan);
    for (int k = 0; t->rc == 0 && k < THREAD_BATCHES; k++) {
        uint64_t b = (uint64_t)(t->tid * THREAD_BATCHES + k);
        tg_rng_t r;
        tg_sampler_batch_rng(&r, 77, 0, b);
        t->rc = tg_sampler_sample(s, t->seeds + b * THREAD_BS, THREAD_BS, &r, &t->out[k]);
    }
    if (t->rc < 0) snprintf(t->msg, sizeof t->msg, "%s", tg_errmsg());
    tg_sampler_destroy(s);
    return NULL;
}

TG_TEST(concurrent_samplers)
{
    tad_opts_t o;
    tad_default(&o);
    o.seed = 21;
    o.nodes = 4000;
    char dir[4200];
    snprintf(dir, sizeof dir, "%s/thr", g_dir);
    tad_write(dir, &o);
    tg_dataset_t *ds = tad_open(dir);
    tg_adj_t *mem, *disk;
    TG_CHECK_OK(tg_adj_memory_open(&mem, ds));
    TG_CHECK_OK(tg_adj_disk_open(&disk, ds, NULL, NULL));
    uint64_t *train, ntrain;
    TG_CHECK_OK(tg_dataset_load_split(ds, TG_FILE_TRAIN, &train, &ntrain));
    TG_CHECK(ntrain >= 4 * THREAD_BATCHES * THREAD_BS);
    thr_t t[4];
    pthread_t th[4];
    for (int i = 0; i < 4; i++) {
        memset(&t[i], 0, sizeof t[i]);
        t[i].adj = disk;
        t[i].seeds = train;
        t[i].tid = i;
        pthread_create(&th[i], NULL, thr_main, &t[i]);
    }
    for (int i = 0; i < 4; i++)
        pthread_join(th[i], NULL);
    tg_sampler_t *s;
    int64_t fan[2] = {15, 10};
    TG_CHECK_OK(tg_sampler_create(&s, mem, 2, fan));
    for (int i = 0; i < 4; i++) {
        if (t[i].rc < 0) {
            TG_FAIL("thread %d: %s", i, t[i].msg);
            continue;
        }
        for (int k = 0; k < THREAD_BATCHES; k++) {
            uint64_t b = (uint64_t)(i * THREAD_BATCHES + k);
            tg_rng_t r;
            tg_sampler_batch_rng(&r, 77, 0, b);
            tg_batch_t x;
            TG_CHECK_OK(tg_sampler_sample(s, train + b * THREAD_BS, THREAD_BS, &r, &x));
            char w[64];
            snprintf(w, sizeof w, "thread %d batch %d", i, k);
            tad_batches_equal(&x, &t[i].out[k], w);
            tg_batch_free(&x);
            tg_batch_free(&t[i].out[k]);
        }
    }
    tg_sampler_destroy(s);
    free(train);
    tg_adj_destroy(disk);
    tg_adj_destroy(mem);
    tg_dataset_close(ds);
}

/* An injected EIO on indices.bin fails the sampler with a message naming the file, the offset
 * and the block; the next batch (fault spent) samples correctly. Both backends. */
TG_TEST(eio_names_file_and_offset)
{
    tad_opts_t o;
    tad_default(&o);
    o.seed = 31;
    char dir[4200];
    snprintf(dir, sizeof dir, "%s/eio", g_dir);
    tad_write(dir, &o);
    for (int pread_only = 0; pread_only < 2; pread_only++) {
        tg_dataset_t *ds = tad_open(dir);
        tg_adj_t *mem, *disk;
        TG_CHECK_OK(tg_adj_memory_open(&mem, ds));
        tg_adj_disk_opts_t ao;
        tg_adj_disk_opts_default(&ao);
        if (pread_only) ao.io.flags = TG_IO_FORCE_PREAD;
        TG_CHECK_OK(tg_adj_disk_open(&disk, ds, &ao, NULL));
        /* the read of one byte inside hub 97's neighbour list fails, once */
        uint64_t bad = disk->indptr[97] * 4 + 10;
        tg_io_fault_t f = {.op = TG_IO_FAULT_READ,
                           .file = "indices.bin",
                           .lo = bad,
                           .hi = bad + 1,
                           .err = EIO,
                           .count = 1};
        TG_CHECK_OK(tg_io_fault_add(&f));
        tg_sampler_t *s;
        int64_t fan[2] = {-1, -1};
        TG_CHECK_OK(tg_sampler_create(&s, disk, 2, fan));
        uint64_t seeds[3] = {0, 97, 194}; /* hubs: long neighbour lists */
        tg_rng_t r;
        tg_sampler_batch_rng(&r, 1, 0, 0);
        tg_batch_t b;
        tg_err_clear();
        int rc = tg_sampler_sample(s, seeds, 3, &r, &b);
        TG_CHECK(rc == -EIO);
        const char *msg = tg_errmsg();
        TG_CHECK(strstr(msg, "indices.bin") != NULL);
        TG_CHECK(strstr(msg, "offset") != NULL);
        TG_CHECK(strstr(msg, "edge positions") != NULL);
        TG_CHECK(strstr(msg, "sampler: block 1") != NULL);
        /* the disk read the message names covers the faulty byte */
        const char *at = strstr(msg, "read error at offset ");
        unsigned long long off = 0, len = 0;
        TG_CHECK(at && sscanf(at, "read error at offset %llu (%llu-byte", &off, &len) == 2);
        TG_CHECK(off <= bad && bad < off + len);
        fprintf(stderr, "  (%s) %s\n", pread_only ? "pread" : "io_uring", msg);
        tg_io_fault_clear();
        /* the pool keeps working after a failed read */
        tg_rng_t r1, r2;
        tg_sampler_batch_rng(&r1, 1, 0, 1);
        r2 = r1;
        tg_batch_t x, y;
        tg_sampler_t *sm;
        TG_CHECK_OK(tg_sampler_create(&sm, mem, 2, fan));
        TG_CHECK_OK(tg_sampler_sample(sm, seeds, 3, &r1, &x));
        TG_CHECK_OK(tg_sampler_sample(s, seeds, 3, &r2, &y));
        tad_batches_equal(&x, &y, "after the fault");
        tg_batch_free(&x);
        tg_batch_free(&y);
        tg_sampler_destroy(sm);
        tg_sampler_destroy(s);
        tg_adj_destroy(disk);
        tg_adj_destroy(mem);
        tg_dataset_close(ds);
    }
}

/* indices.bin truncated under an open adjacency: reads past the new end fail with a message
 * naming the file, the offset and "truncated", never with wrong ids. */
TG_TEST(truncated_under_the_run)
{
    tad_opts_t o;
    tad_default(&o);
    o.seed = 41;
    char dir[4200];
    snprintf(dir, sizeof dir, "%s/trunc", g_dir);
    tad_write(dir, &o);
    tg_dataset_t *ds = tad_open(dir);
    tg_adj_t *disk;
    TG_CHECK_OK(tg_adj_disk_open(&disk, ds, NULL, NULL));
    uint64_t E = disk->num_edges;
    tad_truncate(ds, TG_FILE_INDICES, E * 4 / 2);
    uint64_t pos[2] = {E - 2, E - 1};
    uint64_t out[2];
    tg_err_clear();
    int rc = tg_adj_read(disk, pos, 2, out);
    TG_CHECK(rc == -EIO);
    TG_CHECK(strstr(tg_errmsg(), "indices.bin") != NULL);
    TG_CHECK(strstr(tg_errmsg(), "offset") != NULL);
    TG_CHECK(strstr(tg_errmsg(), "truncated") != NULL);
    fprintf(stderr, "  %s\n", tg_errmsg());
    /* positions before the cut still read */
    uint64_t p0 = 0, v;
    TG_CHECK_OK(tg_adj_read(disk, &p0, 1, &v));
    tg_adj_destroy(disk);
    /* and a new open refuses the short file at once */
    tg_adj_t *again;
    TG_CHECK_ERR(tg_adj_disk_open(&again, ds, NULL, NULL), "expected");
    tg_dataset_close(ds);
}

TG_TEST(budget)
{
    tad_opts_t o;
    tad_default(&o);
    o.seed = 51;
    char dir[4200];
    snprintf(dir, sizeof dir, "%s/budget", g_dir);
    tad_write(dir, &o);
    tg_dataset_t *ds = tad_open(dir);
    tg_budget_t b;
    tg_budget_init(&b, 1000); /* indptr alone needs (N+1) x 8 = 20 008 bytes */
    tg_adj_t *adj;
    TG_CHECK_ERR(tg_adj_disk_open(&adj, ds, NULL, &b), "adjacency indptr");
    TG_CHECK_EQ_U64(b.used, 0);
    tg_budget_destroy(&b);
    /* indptr fits, the staging of the default pool does not */
    tg_budget_init(&b, 64 << 10);
    TG_CHECK_ERR(tg_adj_disk_open(&adj, ds, NULL, &b), "disk adjacency");
    TG_CHECK_EQ_U64(b.used, 0);
    tg_budget_destroy(&b);
    tg_dataset_close(ds);
}

/* tg_adj_disk_load: the whole file in RAM gives the same batches with no disk read; the budget
 * is charged and refused when short; a file cut under the run is an error naming it, and the
 * adjacency then still reads from disk. */
TG_TEST(resident_indices)
{
    for (int wide = 0; wide < 2; wide++) {
        tad_opts_t o;
        tad_default(&o);
        o.index_dtype = wide ? TG_U64 : TG_U32;
        o.seed = 61 + (uint64_t)wide;
        char dir[4200];
        snprintf(dir, sizeof dir, "%s/resident-%d", g_dir, wide);
        tad_write(dir, &o);
        tg_dataset_t *ds = tad_open(dir);
        tg_adj_t *mem, *disk;
        TG_CHECK_OK(tg_adj_memory_open(&mem, ds));
        tg_io_stats_t stats;
        tg_io_stats_init(&stats);
        tg_adj_disk_opts_t ao;
        tg_adj_disk_opts_default(&ao);
        ao.io.stats = &stats;
        tg_budget_t budget;
        tg_budget_init(&budget, 0);
        TG_CHECK_OK(tg_adj_disk_open(&disk, ds, &ao, &budget));
        uint64_t before = budget.used, need = tg_adj_disk_load_bytes(disk);
        TG_CHECK(need >= disk->num_edges * tg_index_dtype_size(o.index_dtype));
        TG_CHECK(tg_adj_disk_load_bytes(mem) == 0);
        TG_CHECK(tg_adj_disk_load(mem) == -EINVAL);
        TG_CHECK_OK(tg_adj_disk_load(disk));
        TG_CHECK_EQ_U64(budget.used, before + need);
        tg_io_counts_t c0, c1;
        tg_io_stats_snapshot(&stats, &c0);
        for (int set = 0; set < 4; set++)
            compare_epoch(mem, disk, ds, set, 70 + (uint64_t)set, 4, 64, "resident");
        tg_io_stats_snapshot(&stats, &c1);
        TG_CHECK_EQ_U64(c1.io_requests, c0.io_requests); /* no disk read any more */
        tg_adj_destroy(disk);
        TG_CHECK_EQ_U64(budget.used, 0);
        tg_budget_destroy(&budget);
        /* a budget without room: refused, nothing kept, reads still from disk */
        tg_budget_init(&budget, 64 << 20);
        TG_CHECK_OK(tg_adj_disk_open(&disk, ds, NULL, &budget));
        before = budget.used;
        tg_budget_t *bp = &budget;
        bp->limit = before + need / 2;
        TG_CHECK_ERR(tg_adj_disk_load(disk), "indices in RAM");
        TG_CHECK_EQ_U64(budget.used, before);
        uint64_t p0 = 0, v0, m0;
        TG_CHECK_OK(tg_adj_read(disk, &p0, 1, &v0));
        TG_CHECK_OK(tg_adj_read(mem, &p0, 1, &m0));
        TG_CHECK(v0 == m0);
        /* cut under the run: the load fails naming the file and the offset */
        tad_truncate(ds, TG_FILE_INDICES, disk->num_edges * tg_index_dtype_size(o.index_dtype) / 2);
        bp->limit = 0;
        int rc = tg_adj_disk_load(disk);
        TG_CHECK(rc == -EIO && strstr(tg_errmsg(), "indices.bin") &&
                 strstr(tg_errmsg(), "unexpected end of file at offset"));
        TG_CHECK_EQ_U64(budget.used, before);
        tg_adj_destroy(disk);
        tg_budget_destroy(&budget);
        tg_adj_destroy(mem);
        tg_dataset_close(ds);
    }
}

int main(void)
{
    /* No skip without O_DIRECT or io_uring: the io layer falls back to buffered reads and to
     * pread, and the adjacency must give the same batches there too. */
    g_dir = tg_test_tmpdir("adj_disk");
    if (!tio_have_uring())
        fprintf(stderr, "note: io_uring unavailable; the io_uring cases ran on pread\n");
    TG_RUN(same_batches_as_memory);
    TG_RUN(raw_reads_chunked);
    TG_RUN(concurrent_samplers);
    TG_RUN(eio_names_file_and_offset);
    TG_RUN(truncated_under_the_run);
    TG_RUN(budget);
    TG_RUN(resident_indices);
    int rc = tg_test_done();
    if (!rc) tg_rmtree(g_dir);
    return rc;
}
