/* Ginex's neighbour cache (graph/ncache) and its tier of the disk adjacency: the cache is exactly
 * the brute-force selection (nodes by out/in-degree ratio, ties by out-degree then id, greedy
 * filling that skips what does not fit) with the paper's address table and array, on directed
 * and undirected graphs, u32 and u64 index files; every cached list equals indices.bin; batches
 * sampled through the cache equal the in-memory adjacency's byte for byte, concurrently too, and
 * the counters equal a brute-force count over the batches; the derived file is reused, rebuilt
 * when the dataset changes, truncated or damaged, and built in RAM when its directory cannot be
 * written; sizes below the address table, budgets too small, read errors (build and load), a
 * cache of another graph and a non-disk adjacency are refused with messages; an engine run with
 * --neighbor-cache writes the same checkpoint as one without and reports the hit ratio. */
#include "test_adj_disk_common.h"
#include "test_engine_common.h"

#include <pthread.h>
#include <sys/stat.h>

#include "engine/engine-impl.h"
#include "tiergnn/derived.h"
#include "tiergnn/ncache.h"
#include "tiergnn/outdeg.h"

static char root[4000];

/* ---------------------------------------------------------------- brute force */

typedef struct {
    uint64_t N, E;
    uint64_t *indptr, *indices;
    uint32_t *out; /* appearances in indices.bin */
} graph_t;

static void graph_load(graph_t *g, const tg_dataset_t *ds)
{
    g->N = ds->meta.num_nodes;
    g->E = ds->meta.num_edges;
    TG_CHECK_OK(tg_dataset_load_indptr(ds, &g->indptr));
    TG_CHECK_OK(tg_dataset_load_indices(ds, &g->indices));
    g->out = calloc(g->N, sizeof *g->out);
    for (uint64_t e = 0; e < g->E; e++)
        g->out[g->indices[e]]++;
}

static void graph_free(graph_t *g)
{
    free(g->indptr);
    free(g->indices);
    free(g->out);
}

static const graph_t *cmp_g;

/* The ratio compared in long double over a plain formula (not the library's cross products). */
static int cmp_brute(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    const graph_t *g = cmp_g;
    long double rx = (long double)g->out[x] / (long double)(g->indptr[x + 1] - g->indptr[x]);
    long double ry = (long double)g->out[y] / (long double)(g->indptr[y + 1] - g->indptr[y]);
    if (rx != ry) return rx > ry ? -1 : 1;
    if (g->out[x] != g->out[y]) return g->out[x] > g->out[y] ? -1 : 1;
    return x < y ? -1 : x > y;
}

/* The expected address table and array for bytes: rank, fill greedily, lay out in id order. */
static void brute_cache(const graph_t *g, uint64_t bytes, uint32_t **addr, uint32_t **arr,
                        uint64_t *len, uint64_t *nodes)
{
    uint64_t *ids = malloc((g->N + 1) * sizeof *ids), n = 0;
    for (uint64_t v = 0; v < g->N; v++)
        if (g->indptr[v + 1] > g->indptr[v]) ids[n++] = v;
    cmp_g = g;
    qsort(ids, n, sizeof *ids, cmp_brute);
    uint8_t *sel = calloc(g->N + 1, 1);
    uint64_t room = (bytes - g->N * 4) / 4, used = 0;
    *nodes = 0;
    for (uint64_t k = 0; k < n; k++) {
        uint64_t cost = 1 + g->indptr[ids[k] + 1] - g->indptr[ids[k]];
        if (used + cost <= room) sel[ids[k]] = 1, used += cost, ++*nodes;
    }
    *addr = malloc((g->N + 1) * 4);
    *arr = malloc((used + 1) * 4);
    *len = 0;
    for (uint64_t v = 0; v < g->N; v++) {
        (*addr)[v] = sel[v] ? (uint32_t)*len : UINT32_MAX;
        if (!sel[v]) continue;
        (*arr)[(*len)++] = (uint32_t)(g->indptr[v + 1] - g->indptr[v]);
        for (uint64_t p = g->indptr[v]; p < g->indptr[v + 1]; p++)
            (*arr)[(*len)++] = (uint32_t)g->indices[p];
    }
    free(ids);
    free(sel);
}

/* The cache equals the brute force for its size, and every list equals indices.bin. */
static void check_cache(const tg_ncache_t *nc, const graph_t *g, uint64_t bytes, const char *what)
{
    uint32_t *addr, *arr;
    uint64_t len, nodes;
    brute_cache(g, bytes, &addr, &arr, &len, &nodes);
    tg_ncache_info_t in;
    tg_ncache_info(nc, &in);
    if (in.nodes != nodes || in.array_len != len || in.mem_bytes != (g->N + len) * 4 ||
        in.mem_bytes > bytes)
        TG_FAIL("%s: %llu nodes / %llu entries, brute force %llu / %llu", what,
                (unsigned long long)in.nodes, (unsigned long long)in.array_len,
                (unsigned long long)nodes, (unsigned long long)len);
    else if (memcmp(tg_ncache_address_table(nc), addr, g->N * 4) ||
             memcmp(tg_ncache_array(nc), arr, len * 4))
        TG_FAIL("%s: address table or array differ from the brute force", what);
    for (uint64_t v = 0; v < g->N; v++) {
        uint64_t deg = 0;
        const uint32_t *l = tg_ncache_find(nc, v, &deg);
        if (!l) continue;
        int ok = deg == g->indptr[v + 1] - g->indptr[v];
        for (uint64_t k = 0; ok && k < deg; k++)
            ok = l[k] == g->indices[g->indptr[v] + k];
        if (!ok) {
            TG_FAIL("%s: node %llu's cached list differs from indices.bin", what,
                    (unsigned long long)v);
            break;
        }
    }
    uint64_t deg;
    TG_CHECK(tg_ncache_find(nc, g->N, &deg) == NULL);
    free(addr);
    free(arr);
}

/* The sizes every graph is checked with: the table alone, a little, a fraction, everything. */
static void sizes_of(const graph_t *g, uint64_t out[5])
{
    uint64_t full = tg_ncache_full_bytes(g->N, g->indptr), t = g->N * 4;
    out[0] = t;
    out[1] = t + 7;
    out[2] = t + (full - t) / 10;
    out[3] = t + (full - t) / 2 + 3;
    out[4] = full;
}

/* ---------------------------------------------------------------- selection */

static void check_dataset(const char *dir, const char *what)
{
    tg_dataset_t *d = tad_open(dir);
    graph_t g;
    graph_load(&g, d);
    uint64_t sz[5];
    sizes_of(&g, sz);
    char where[4300], w[256];
    snprintf(where, sizeof where, "%s/derived-sel", dir);
    for (int i = 0; i < 5; i++) {
        tg_ncache_t *nc;
        TG_CHECK_OK(tg_ncache_open(&nc, d, where, sz[i], NULL, NULL));
        if (!nc) continue;
        snprintf(w, sizeof w, "%s, %llu bytes", what, (unsigned long long)sz[i]);
        check_cache(nc, &g, sz[i], w);
        tg_ncache_info_t in;
        tg_ncache_info(nc, &in);
        TG_CHECK(in.built && !in.in_ram);
        if (i == 0) TG_CHECK(in.nodes == 0);
        if (i == 4) TG_CHECK(in.edges == g.E);
        tg_ncache_close(nc);
    }
    graph_free(&g);
    tg_dataset_close(d);
}

TG_TEST(selection_is_the_brute_force_ranking)
{
    char dir[4200];
    for (int wide = 0; wide < 2; wide++) {
        /* directed: ratios differ */
        tad_opts_t o;
        tad_default(&o);
        o.index_dtype = wide ? TG_U64 : TG_U32;
        o.seed = 5 + (uint64_t)wide;
        snprintf(dir, sizeof dir, "%s/directed%d", root, wide);
        tad_write(dir, &o);
        check_dataset(dir, wide ? "directed u64" : "directed u32");
    }
    /* undirected: every ratio 1, the ties decide (out-degree desc, id asc) */
    synth_opts_t so;
    synth_default(&so);
    so.nodes = 1800;
    snprintf(dir, sizeof dir, "%s/undirected", root);
    synth_write(dir, &so);
    check_dataset(dir, "undirected");
}

/* ---------------------------------------------------------------- the tier */

static tg_adj_t *disk_open(const tg_dataset_t *d, unsigned flags)
{
    tg_adj_disk_opts_t ao;
    tg_adj_disk_opts_default(&ao);
    ao.io.flags = flags;
    ao.max_requests = 64; /* several pieces per read */
    tg_adj_t *a = NULL;
    TG_CHECK_OK(tg_adj_disk_open(&a, d, &ao, NULL));
    return a;
}

static const int64_t fans[][3] = {{10, 5, 0}, {-1, 3, 0}, {25, 10, 5}};
static const int fan_layers[] = {2, 2, 3};

typedef struct {
    tg_adj_t *mem, *disk;
    const tg_ncache_t *nc;
    const uint64_t *train;
    uint64_t ntrain, bs, first, step, nb;
    int set;
    uint64_t lookups, hits, entries; /* brute force over the batches */
    int bad;
} sample_job_t;

/* Batches first, first + step, ... on both adjacencies, compared; counts what the cache served. */
static void *sample_job(void *arg)
{
    sample_job_t *j = arg;
    tg_sampler_t *sm = NULL, *sd = NULL;
    if (tg_sampler_create(&sm, j->mem, fan_layers[j->set], fans[j->set]) < 0 ||
        tg_sampler_create(&sd, j->disk, fan_layers[j->set], fans[j->set]) < 0) {
        j->bad++;
        goto out;
    }
    for (uint64_t b = j->first; b < j->nb && (b + 1) * j->bs <= j->ntrain; b += j->step) {
        tg_rng_t r1, r2;
        tg_sampler_batch_rng(&r1, 7, 0, b);
        r2 = r1;
        tg_batch_t x, y;
        if (tg_sampler_sample(sm, j->train + b * j->bs, j->bs, &r1, &x) < 0) {
            j->bad++;
            break;
        }
        if (tg_sampler_sample(sd, j->train + b * j->bs, j->bs, &r2, &y) < 0) {
            tg_batch_free(&x);
            j->bad++;
            break;
        }
        char w[64];
        snprintf(w, sizeof w, "fanout set %d, batch %llu", j->set, (unsigned long long)b);
        if (!tad_batches_equal(&x, &y, w)) j->bad++;
        /* one lookup per destination with edges, one read per layer */
        for (int l = 0; l < y.num_layers; l++) {
            const tg_block_t *k = &y.blocks[l];
            for (uint32_t i = 0; i < k->num_dst; i++) {
                uint64_t e = k->indptr[i + 1] - k->indptr[i], deg;
                if (!e) continue;
                j->lookups++;
                if (tg_ncache_find(j->nc, y.nodes[i], &deg)) j->hits++, j->entries += e;
            }
        }
        tg_batch_free(&x);
        tg_batch_free(&y);
    }
out:
    tg_sampler_destroy(sm);
    tg_sampler_destroy(sd);
    return NULL;
}

TG_TEST(sampling_through_the_cache_is_exact)
{
    for (int wide = 0; wide < 2; wide++)
        for (int pread_only = 0; pread_only < 2; pread_only++) {
            char dir[4200];
            snprintf(dir, sizeof dir, "%s/directed%d", root, wide);
            tg_dataset_t *d = tad_open(dir);
            graph_t g;
            graph_load(&g, d);
            uint64_t sz[5];
            sizes_of(&g, sz);
            tg_adj_t *mem;
            TG_CHECK_OK(tg_adj_memory_open(&mem, d));
            uint64_t *train, ntrain;
            TG_CHECK_OK(tg_dataset_load_split(d, TG_FILE_TRAIN, &train, &ntrain));
            for (int i = 2; i < 5; i += 2) {
                tg_adj_t *disk = disk_open(d, pread_only ? TG_IO_FORCE_PREAD : 0);
                tg_ncache_t *nc;
                TG_CHECK_OK(tg_ncache_open(&nc, d, NULL, sz[i], NULL, NULL));
                TG_CHECK_OK(tg_adj_disk_attach_ncache(disk, nc));
                TG_CHECK(tg_adj_disk_ncache(disk) == nc && tg_adj_disk_ncache(mem) == NULL);
                for (int set = 0; set < 3; set++) {
                    tg_ncache_stats_t st;
                    tg_ncache_stats(nc, &st, 1);
                    sample_job_t jobs[3];
                    pthread_t th[3];
                    for (int t = 0; t < 3; t++) {
                        jobs[t] = (sample_job_t){.mem = mem,
                                                 .disk = disk,
                                                 .nc = nc,
                                                 .train = train,
                                                 .ntrain = ntrain,
                                                 .bs = 64,
                                                 .first = (uint64_t)t,
                                                 .step = 3,
                                                 .nb = 12,
                                                 .set = set};
                        pthread_create(&th[t], NULL, sample_job, &jobs[t]);
                    }
                    uint64_t lk = 0, ht = 0, en = 0;
                    for (int t = 0; t < 3; t++) {
                        pthread_join(th[t], NULL);
                        TG_CHECK(jobs[t].bad == 0);
                        lk += jobs[t].lookups, ht += jobs[t].hits, en += jobs[t].entries;
                    }
                    tg_ncache_stats(nc, &st, 0);
                    TG_CHECK_EQ_U64(st.lookups, lk);
                    TG_CHECK_EQ_U64(st.hits, ht);
                    TG_CHECK_EQ_U64(st.entries, en);
                    TG_CHECK(ht > 0 && (i < 4 ? ht < lk : ht == lk));
                }
                tg_ncache_stats_t st;
                tg_ncache_stats(nc, &st, 1);
                tg_ncache_stats(nc, &st, 0);
                TG_CHECK(st.lookups == 0 && st.hits == 0 && st.entries == 0);
                /* with the whole cache no index is read from disk */
                if (i == 4) {
                    tg_io_counts_t c;
                    tg_io_stats_take(tg_adj_disk_stats(disk), &c);
                    TG_CHECK_EQ_U64(c.io_requests, 0);
                }
                tg_adj_destroy(disk); /* closes nc */
            }
            free(train);
            tg_adj_destroy(mem);
            graph_free(&g);
            tg_dataset_close(d);
        }
}

/* Reads of hand-made position lists: several nodes per call, partial lists, cached and not,
 * resident indices too; out and the counters against the brute force. */
TG_TEST(reads_and_counters)
{
    char dir[4200];
    snprintf(dir, sizeof dir, "%s/directed0", root);
    tg_dataset_t *d = tad_open(dir);
    graph_t g;
    graph_load(&g, d);
    uint64_t sz[5];
    sizes_of(&g, sz);
    tg_adj_t *disk = disk_open(d, 0);
    tg_ncache_t *nc;
    TG_CHECK_OK(tg_ncache_open(&nc, d, NULL, sz[3], NULL, NULL));
    TG_CHECK_OK(tg_adj_disk_attach_ncache(disk, nc));
    uint64_t *pos = malloc(g.E * sizeof *pos), *out = malloc(g.E * sizeof *out);
    tg_rng_t r;
    tg_rng_seed(&r, 11);
    for (int round = 0; round < 40; round++) {
        if (round == 20) TG_CHECK_OK(tg_adj_disk_load(disk)); /* cache first, then RAM */
        size_t n = 0;
        uint64_t lk = 0, ht = 0, en = 0, deg;
        uint64_t v = tg_rng_below(&r, g.N);
        for (int k = 0; k < 30; k++, v = (v + 1 + tg_rng_below(&r, 3)) % g.N) {
            uint64_t beg = g.indptr[v], end = g.indptr[v + 1];
            size_t before = n;
            for (uint64_t p = beg; p < end; p++)
                if (tg_rng_below(&r, 3)) pos[n++] = p;
            if (n == before) continue;
            lk++;
            if (tg_ncache_find(nc, v, &deg)) ht++, en += n - before;
        }
        TG_CHECK_OK(tg_adj_read(disk, pos, n, out));
        for (size_t i = 0; i < n; i++)
            if (out[i] != g.indices[pos[i]]) {
                TG_FAIL("round %d: position %llu read %llu, expected %llu", round,
                        (unsigned long long)pos[i], (unsigned long long)out[i],
                        (unsigned long long)g.indices[pos[i]]);
                break;
            }
        tg_ncache_stats_t st;
        tg_ncache_stats(nc, &st, 1);
        TG_CHECK(st.lookups == lk && st.hits == ht && st.entries == en);
    }
    /* out of range: refused by the cache path too */
    pos[0] = g.indptr[1];
    pos[1] = g.E;
    TG_CHECK_ERR(tg_adj_read(disk, pos, 2, out), "out of range");
    free(pos);
    free(out);
    tg_adj_destroy(disk);
    graph_free(&g);
    tg_dataset_close(d);
}

/* ---------------------------------------------------------------- the derived file */

static void derived_file(const tg_dataset_t *d, const char *dir, uint64_t bytes, char *path,
                         size_t len)
{
    char params[64];
    snprintf(params, sizeof params, "bytes=%llu,v=%d", (unsigned long long)bytes,
             TG_NCACHE_VERSION);
    TG_CHECK_OK(tg_derived_path(d, dir, TG_NCACHE_KIND, params, path, len));
}

static void reopen_check(const tg_dataset_t *d, const char *dir, uint64_t bytes, int built,
                         const char *what)
{
    graph_t g;
    graph_load(&g, d);
    tg_ncache_t *nc = NULL;
    TG_CHECK_OK(tg_ncache_open(&nc, d, dir, bytes, NULL, NULL));
    if (nc) {
        tg_ncache_info_t in;
        tg_ncache_info(nc, &in);
        if (in.built != built) TG_FAIL("%s: built %d, expected %d", what, in.built, built);
        check_cache(nc, &g, bytes, what);
    }
    tg_ncache_close(nc);
    graph_free(&g);
}

TG_TEST(derived_file_reused_rebuilt_never_trusted)
{
    char ds[4200], dir[4300], path[4600];
    snprintf(ds, sizeof ds, "%s/reuse-ds", root);
    snprintf(dir, sizeof dir, "%s/reuse", root);
    tad_opts_t o;
    tad_default(&o);
    o.nodes = 1200;
    tad_write(ds, &o);
    tg_dataset_t *d = tad_open(ds);
    uint64_t bytes = o.nodes * 4 + 20000;
    TG_CHECK_EQ_U64(tg_ncache_prepare(d, dir, bytes, NULL, NULL), 1);
    TG_CHECK_EQ_U64(tg_ncache_prepare(d, dir, bytes, NULL, NULL), 0);
    reopen_check(d, dir, bytes, 0, "reused");
    derived_file(d, dir, bytes, path, sizeof path);
    /* listed like every derived file */
    tg_derived_entry_t *ents;
    size_t n, found = 0;
    TG_CHECK_OK(tg_derived_list(d, dir, &ents, &n));
    for (size_t i = 0; i < n; i++)
        found += !strcmp(ents[i].kind, TG_NCACHE_KIND) && ents[i].state == TG_DERIVED_VALID;
    free(ents);
    TG_CHECK_EQ_U64(found, 1);

    /* truncated: stale, rebuilt */
    struct stat sb;
    TG_CHECK(stat(path, &sb) == 0);
    TG_CHECK(truncate(path, sb.st_size - 4) == 0);
    TG_CHECK_EQ_U64(tg_ncache_prepare(d, dir, bytes, NULL, NULL), 1);
    reopen_check(d, dir, bytes, 0, "after truncation");

    /* a payload byte flipped (size and header intact): the CRC refuses it, open rebuilds */
    int fd = open(path, O_RDWR);
    unsigned char c;
    off_t at = TG_DERIVED_PAYLOAD_OFFSET + 64 + o.nodes * 4 + 100;
    TG_CHECK(pread(fd, &c, 1, at) == 1);
    c ^= 0x5a;
    TG_CHECK(pwrite(fd, &c, 1, at) == 1);
    close(fd);
    TG_CHECK_EQ_U64(tg_ncache_prepare(d, dir, bytes, NULL, NULL), 0); /* header still matches */
    reopen_check(d, dir, bytes, 1, "after damage");

    /* another graph under the same directory: indices.bin's checksum changes, rebuilt */
    tg_dataset_close(d);
    o.seed = 77;
    tad_write(ds, &o);
    d = tad_open(ds);
    TG_CHECK_EQ_U64(tg_ncache_prepare(d, dir, bytes, NULL, NULL), 1);
    reopen_check(d, dir, bytes, 0, "another graph");

    /* a directory that cannot be made: built in RAM, the same cache, accounted */
    char file[4400];
    snprintf(file, sizeof file, "%s/not-a-dir", root);
    tg_test_write_file(file, "x");
    TG_CHECK_EQ_U64(tg_ncache_prepare(d, file, bytes, NULL, NULL), 2);
    tg_budget_t b;
    tg_budget_init(&b, 256 << 20);
    tg_ncache_t *nc = NULL;
    TG_CHECK_OK(tg_ncache_open(&nc, d, file, bytes, &b, NULL));
    if (nc) {
        tg_ncache_info_t in;
        tg_ncache_info(nc, &in);
        TG_CHECK(in.in_ram && in.built && b.used == in.mem_bytes);
        graph_t g;
        graph_load(&g, d);
        check_cache(nc, &g, bytes, "in RAM");
        graph_free(&g);
    }
    tg_ncache_close(nc);
    TG_CHECK_EQ_U64(b.used, 0);
    tg_budget_destroy(&b);
    tg_dataset_close(d);
}

/* ---------------------------------------------------------------- errors */

TG_TEST(errors)
{
    char ds[4200], dir[4300];
    snprintf(ds, sizeof ds, "%s/directed0", root);
    snprintf(dir, sizeof dir, "%s/errors", root);
    tg_dataset_t *d = tad_open(ds);
    uint64_t N = d->meta.num_nodes, bytes = N * 4 + 40000;
    tg_ncache_t *nc = NULL;
    TG_CHECK(tg_ncache_min_bytes(d) == N * 4);

    /* smaller than the address table */
    TG_CHECK_ERR(tg_ncache_open(&nc, d, dir, N * 4 - 1, NULL, NULL), "address table");
    TG_CHECK_ERR(tg_ncache_prepare(d, dir, 100, NULL, NULL), "address table");

    /* indices.bin unreadable while building: the file and offset, nothing left behind */
    TG_CHECK(tg_outdeg_prepare(d, dir, 0) >= 0); /* the out-degrees are not this test's */
    tg_io_fault_t f = {
        .op = TG_IO_FAULT_READ, .file = "indices.bin", .lo = 0, .hi = 1 << 30, .err = EIO};
    TG_CHECK_OK(tg_io_fault_add(&f));
    tg_err_clear();
    int rc = tg_ncache_prepare(d, dir, bytes, NULL, NULL);
    TG_CHECK(rc == -EIO && strstr(tg_errmsg(), "indices.bin") && strstr(tg_errmsg(), "offset"));
    fprintf(stderr, "  %s\n", tg_errmsg());
    tg_io_fault_clear();
    tg_derived_entry_t *ents;
    size_t n;
    TG_CHECK_OK(tg_derived_list(d, dir, &ents, &n));
    for (size_t i = 0; i < n; i++)
        TG_CHECK(strcmp(ents[i].kind, TG_NCACHE_KIND) && ents[i].state != TG_DERIVED_TEMP_DEAD);
    free(ents);

    /* the derived file unreadable while loading */
    TG_CHECK_EQ_U64(tg_ncache_prepare(d, dir, bytes, NULL, NULL), 1);
    f.file = "ncache-";
    TG_CHECK_OK(tg_io_fault_add(&f));
    tg_err_clear();
    rc = tg_ncache_open(&nc, d, dir, bytes, NULL, NULL);
    TG_CHECK(rc == -EIO && nc == NULL && strstr(tg_errmsg(), "ncache-") &&
             strstr(tg_errmsg(), "offset"));
    fprintf(stderr, "  %s\n", tg_errmsg());
    tg_io_fault_clear();

    /* a budget too small: -ENOMEM naming the cache and its bytes; nothing stays reserved */
    tg_budget_t b;
    tg_budget_init(&b, N * 4 + 1000);
    tg_err_clear();
    rc = tg_ncache_open(&nc, d, dir, bytes, &b, NULL);
    TG_CHECK(rc == -ENOMEM && strstr(tg_errmsg(), "neighbour cache"));
    fprintf(stderr, "  %s\n", tg_errmsg());
    TG_CHECK_EQ_U64(b.used, 0);
    tg_budget_destroy(&b);
    /* ... also when it must be built first */
    tg_budget_init(&b, N * 4 + 1000);
    rc = tg_ncache_open(&nc, d, dir, bytes + 4, &b, NULL);
    TG_CHECK(rc == -ENOMEM && strstr(tg_errmsg(), "neighbour cache"));
    TG_CHECK_EQ_U64(b.used, 0);
    tg_budget_destroy(&b);

    /* attach: not a disk adjacency; a cache of another graph */
    TG_CHECK_OK(tg_ncache_open(&nc, d, dir, bytes, NULL, NULL));
    tg_adj_t *mem;
    TG_CHECK_OK(tg_adj_memory_open(&mem, d));
    TG_CHECK_ERR(tg_adj_disk_attach_ncache(mem, nc), "not a disk adjacency"); /* nc closed */
    tg_adj_destroy(mem);
    char other[4300];
    snprintf(other, sizeof other, "%s/directed1", root);
    tg_dataset_t *d2 = tad_open(other);
    tg_adj_t *disk2 = disk_open(d2, 0);
    TG_CHECK_OK(tg_ncache_open(&nc, d, dir, bytes, NULL, NULL));
    TG_CHECK_ERR(tg_adj_disk_attach_ncache(disk2, nc), "neighbour cache");
    TG_CHECK(tg_adj_disk_ncache(disk2) == NULL);
    TG_CHECK_OK(tg_adj_disk_attach_ncache(disk2, NULL));
    tg_adj_destroy(disk2);
    tg_dataset_close(d2);
    tg_dataset_close(d);
}

/* ---------------------------------------------------------------- in a run */

TG_TEST(engine_run_with_the_cache)
{
    char ds[4200], a[4300], b[4300], fa[4400], fb[4400];
    snprintf(ds, sizeof ds, "%s/undirected", root);
    static const char *strats[] = {"gnndrive", "pagraph"};
    for (int s = 0; s < 2; s++) {
        snprintf(a, sizeof a, "%s/run-%s-plain", root, strats[s]);
        snprintf(b, sizeof b, "%s/run-%s-ncache", root, strats[s]);
        char *out = NULL;
        const char *common = "--model sage --layers 2 --hidden 8 --fanouts 5,5 --batch-size 64 "
                             "--seed 3 --threads 1 --io-depth 8 --io-gap 0 --epochs 2 --json";
        int rc = tg_test_cli(&out, "train %s --out %s --strategy %s %s", ds, a, strats[s], common);
        TG_CHECK(rc == 0);
        if (rc) fprintf(stderr, "%s\n", out ? out : "");
        TG_CHECK(out && !strstr(out, "neighbor_cache"));
        free(out);
        rc = tg_test_cli(
            &out, "train %s --out %s --strategy %s %s --neighbor-cache 40K --resident-indices 0",
            ds, b, strats[s], common);
        TG_CHECK(rc == 0 && out && strstr(out, "\"neighbor_cache\":{\"bytes\":"));
        TG_CHECK(out && strstr(out, "neighbour cache hit ratio"));
        if (out) {
            double hit = json_value(out, "hit_ratio", 0);
            TG_CHECK(hit > 0 && hit < 1);
        }
        if (rc) fprintf(stderr, "%s\n", out ? out : "");
        free(out);
        snprintf(fa, sizeof fa, "%s/%s", a, TG_CKPT_NAME);
        snprintf(fb, sizeof fb, "%s/%s", b, TG_CKPT_NAME);
        TG_CHECK(tg_test_same_file(fa, fb));
        /* smaller than the address table: the run refuses with the message */
        rc = tg_test_cli(&out, "train %s --out %s-bad --strategy %s %s --neighbor-cache 100", ds, b,
                         strats[s], common);
        TG_CHECK(rc != 0 && out && strstr(out, "address table"));
        free(out);
    }
}

int main(void)
{
    snprintf(root, sizeof root, "%s", tg_test_tmpdir("ncache"));
    tg_log_set_level(TG_LOG_WARN);
    TG_RUN(selection_is_the_brute_force_ranking);
    TG_RUN_PLAIN(sampling_through_the_cache_is_exact); /* sampling only, no model */
    TG_RUN(reads_and_counters);
    TG_RUN(derived_file_reused_rebuilt_never_trusted);
    TG_RUN(errors);
    TG_RUN(engine_run_with_the_cache);
    return tg_test_done();
}
