/* Helpers for the out-of-core adjacency and store tests (test_adj_disk*.c, test_store_mmap*.c):
 * a random dataset written with the dataset writer in either index width and feature dtype,
 * and a byte-for-byte batch comparison. */
#ifndef TEST_ADJ_DISK_COMMON_H
#define TEST_ADJ_DISK_COMMON_H

#include <fcntl.h>
#include <unistd.h>

#include "tg_test.h"
#include "tiergnn/data.h"
#include "tiergnn/graph.h"

typedef struct {
    uint64_t nodes;
    uint64_t max_deg; /* in-degree of ordinary nodes: uniform in 0..max_deg */
    uint64_t hub_deg; /* every 97th node has this in-degree (capped at nodes) */
    uint32_t dim;
    tg_index_dtype_t index_dtype;
    tg_feat_dtype_t feat_dtype;
    uint64_t seed;
} tad_opts_t;

static inline void tad_default(tad_opts_t *o)
{
    memset(o, 0, sizeof *o);
    o->nodes = 2500;
    o->max_deg = 40;
    o->hub_deg = 600;
    o->dim = 12;
    o->index_dtype = TG_U32;
    o->feat_dtype = TG_F32;
    o->seed = 1;
}

static inline void tad_fail(const char *what, const char *dir)
{
    fprintf(stderr, "writing test dataset %s: %s: %s\n", dir, what, tg_errmsg());
    exit(1);
}

/* Writes a random dataset to dir (replacing it): sorted in-neighbour lists without repeats,
 * N(0,1) features, labels v % 3, splits 50/25/25 of a permutation. */
static inline void tad_write(const char *dir, const tad_opts_t *o)
{
    uint64_t n = o->nodes;
    tg_rng_t r;
    tg_rng_seed(&r, o->seed);
    tg_dsw_t w;
    if (tg_dsw_begin(&w, dir, 1) < 0) tad_fail("begin", dir);
    tg_meta_t *m = &w.meta;
    m->num_nodes = n;
    m->feat_dim = o->dim;
    m->feat_dtype = o->feat_dtype;
    m->index_dtype = o->index_dtype;
    m->num_classes = 3;
    snprintf(m->source, sizeof m->source, "test_adj_disk seed %llu", (unsigned long long)o->seed);
    size_t isz = tg_index_dtype_size(o->index_dtype);

    tg_filew_t fi, fx;
    if (tg_dsw_open_file(&w, TG_FILE_INDPTR, &fi) < 0) tad_fail("indptr", dir);
    if (tg_dsw_open_file(&w, TG_FILE_INDICES, &fx) < 0) tad_fail("indices", dir);
    uint8_t *mark = calloc(n, 1);
    uint64_t e = 0;
    tg_filew_write(&fi, &e, 8);
    for (uint64_t v = 0; v < n; v++) {
        uint64_t deg = v % 97 == 0 ? TG_MIN(o->hub_deg, n) : tg_rng_below(&r, o->max_deg + 1);
        for (uint64_t got = 0; got < deg;) {
            uint64_t u = tg_rng_below(&r, n);
            if (!mark[u]) {
                mark[u] = 1;
                got++;
            }
        }
        for (uint64_t u = 0; u < n; u++)
            if (mark[u]) {
                mark[u] = 0;
                if (isz == 4) {
                    uint32_t x = (uint32_t)u;
                    tg_filew_write(&fx, &x, 4);
                } else {
                    tg_filew_write(&fx, &u, 8);
                }
                e++;
            }
        tg_filew_write(&fi, &e, 8);
    }
    free(mark);
    m->num_edges = e;
    if (tg_dsw_close_file(&w, TG_FILE_INDPTR, &fi) < 0) tad_fail("indptr", dir);
    if (tg_dsw_close_file(&w, TG_FILE_INDICES, &fx) < 0) tad_fail("indices", dir);

    if (tg_dsw_open_file(&w, TG_FILE_FEATURES, &fx) < 0) tad_fail("features", dir);
    for (uint64_t i = 0; i < n * o->dim; i++) {
        float x = (float)tg_rng_normal(&r);
        if (o->feat_dtype == TG_F16) {
            uint16_t h = tg_f32_to_f16(x);
            tg_filew_write(&fx, &h, 2);
        } else {
            tg_filew_write(&fx, &x, 4);
        }
    }
    if (tg_dsw_close_file(&w, TG_FILE_FEATURES, &fx) < 0) tad_fail("features", dir);
    if (tg_dsw_open_file(&w, TG_FILE_LABELS, &fx) < 0) tad_fail("labels", dir);
    for (uint64_t v = 0; v < n; v++) {
        int32_t y = (int32_t)(v % 3);
        tg_filew_write(&fx, &y, 4);
    }
    if (tg_dsw_close_file(&w, TG_FILE_LABELS, &fx) < 0) tad_fail("labels", dir);

    uint64_t *perm = malloc(n * sizeof *perm);
    for (uint64_t v = 0; v < n; v++)
        perm[v] = v;
    tg_rng_shuffle_u64(&r, perm, n);
    uint64_t cnt[3] = {n / 2, n / 4, n - n / 2 - n / 4}, off = 0;
    m->num_train = cnt[0];
    m->num_valid = cnt[1];
    m->num_test = cnt[2];
    static const tg_file_id_t sp[3] = {TG_FILE_TRAIN, TG_FILE_VALID, TG_FILE_TEST};
    for (int s = 0; s < 3; s++) {
        if (tg_dsw_open_file(&w, sp[s], &fx) < 0) tad_fail("split", dir);
        for (uint64_t i = 0; i < cnt[s]; i++) {
            uint64_t v = perm[off + i];
            if (isz == 4) {
                uint32_t x = (uint32_t)v;
                tg_filew_write(&fx, &x, 4);
            } else {
                tg_filew_write(&fx, &v, 8);
            }
        }
        off += cnt[s];
        if (tg_dsw_close_file(&w, sp[s], &fx) < 0) tad_fail("split", dir);
    }
    free(perm);
    if (tg_dsw_commit(&w) < 0) tad_fail("commit", dir);
    tg_dsw_abort(&w);
}

static inline tg_dataset_t *tad_open(const char *dir)
{
    tg_dataset_t *ds;
    if (tg_dataset_open(&ds, dir, TG_OPEN_CHECK_SIZES) < 0) tad_fail("open", dir);
    return ds;
}

/* Truncates file `id` of the dataset in dir to `size` bytes (under an open reader). */
static inline void tad_truncate(const tg_dataset_t *ds, tg_file_id_t id, uint64_t size)
{
    char path[4096];
    tg_dataset_path(ds, id, path, sizeof path);
    if (truncate(path, (off_t)size) < 0) {
        perror(path);
        exit(1);
    }
}

/* 1 if the two batches are identical field by field and byte by byte; else reports the first
 * difference (with `what` naming the case) and returns 0. */
static inline int tad_batches_equal(const tg_batch_t *a, const tg_batch_t *b, const char *what)
{
#define TAD_DIFF(...)                                                                              \
    do {                                                                                           \
        TG_FAIL("%s: ", what);                                                                     \
        fprintf(stderr, "    " __VA_ARGS__);                                                       \
        fputc('\n', stderr);                                                                       \
        return 0;                                                                                  \
    } while (0)
    if (a->num_layers != b->num_layers || a->num_nodes != b->num_nodes ||
        a->num_seeds != b->num_seeds)
        TAD_DIFF("shape: %d/%u/%u vs %d/%u/%u layers/nodes/seeds", a->num_layers, a->num_nodes,
                 a->num_seeds, b->num_layers, b->num_nodes, b->num_seeds);
    if (memcmp(a->nodes, b->nodes, a->num_nodes * sizeof *a->nodes)) TAD_DIFF("node lists differ");
    for (int l = 0; l < a->num_layers; l++) {
        const tg_block_t *x = &a->blocks[l], *y = &b->blocks[l];
        if (x->num_dst != y->num_dst || x->num_src != y->num_src || x->num_edges != y->num_edges)
            TAD_DIFF("block %d shape: %u/%u/%llu vs %u/%u/%llu", l, x->num_dst, x->num_src,
                     (unsigned long long)x->num_edges, y->num_dst, y->num_src,
                     (unsigned long long)y->num_edges);
        if (memcmp(x->indptr, y->indptr, (x->num_dst + 1) * sizeof *x->indptr))
            TAD_DIFF("block %d indptr differs", l);
        if (x->num_edges && memcmp(x->indices, y->indices, x->num_edges * sizeof *x->indices))
            TAD_DIFF("block %d indices differ", l);
    }
    return 1;
#undef TAD_DIFF
}

/* Total edges over the blocks of a batch (= adjacency positions the sampler read). */
static inline uint64_t tad_batch_edges(const tg_batch_t *b)
{
    uint64_t e = 0;
    for (int l = 0; l < b->num_layers; l++)
        e += b->blocks[l].num_edges;
    return e;
}

#endif
