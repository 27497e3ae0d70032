/* The memory-mapped feature store of the "mmap" baseline, and parallel gathering over a pool
 * (see "out-of-core stores" in tiergnn/store.h). */
#include <stdlib.h>
#include <string.h>

#include "tiergnn/data.h"
#include "tiergnn/graph.h" /* tg_mmap_file_t: the mapped file with its SIGBUS guard */
#include "tiergnn/rowcrc.h"
#include "tiergnn/store.h"

typedef struct {
    tg_mmap_file_t *file;
    tg_feat_dtype_t dtype;
    int normalize;
    const tg_rowcrc_t *rowcrc;
} mmap_store_t;

typedef struct {
    const tg_store_t *st;
    const uint64_t *nodes;
    size_t n;
    float *out;
} gather_ctx_t;

/* Under the guard: ids are checked before the mapping is touched; then rows are copied. */
static int gather_fn(void *arg)
{
    const gather_ctx_t *c = arg;
    const tg_store_t *st = c->st;
    const mmap_store_t *m = st->impl;
    size_t d = st->dim;
    for (size_t i = 0; i < c->n; i++)
        if (c->nodes[i] >= st->num_nodes)
            return tg_err(-EINVAL, "feature store: node %llu out of range (%llu nodes)",
                          (unsigned long long)c->nodes[i], (unsigned long long)st->num_nodes);
    const unsigned char *base = tg_mmap_file_data(m->file);
    size_t row = d * tg_feat_dtype_size(m->dtype);
    for (size_t i = 0; i < c->n; i++) {
        const unsigned char *src = base + c->nodes[i] * row;
        int rc = tg_rowcrc_check(m->rowcrc, c->nodes[i], src, tg_mmap_file_path(m->file),
                                 c->nodes[i] * row);
        if (rc < 0) return rc;
        tg_feat_rows_f32(c->out + i * d, src, 0, 1, d, m->dtype, 0);
    }
    return 0;
}

static int mmap_gather(tg_store_t *st, const uint64_t *nodes, size_t n, float *out)
{
    mmap_store_t *m = st->impl;
    if (n == 0) return 0;
    gather_ctx_t c = {st, nodes, n, out};
    int rc = tg_mmap_file_guard(m->file, gather_fn, &c);
    if (rc < 0) return tg_err_prefix(rc, "mmap feature store");
    /* Normalising outside the guard: it touches only the caller's rows. */
    if (m->normalize) tg_feat_normalize_rows(out, n, st->dim);
    return 0;
}

static void mmap_release(tg_store_t *st)
{
    mmap_store_t *m = st->impl;
    if (m) {
        tg_mmap_file_close(m->file);
        free(m);
    }
    free(st);
}

static const tg_store_i mmap_iface = {"mmap", mmap_gather, mmap_release};

int tg_store_mmap_open(tg_store_t **out, const struct tg_dataset *ds, const tg_store_opts_t *opts)
{
    *out = NULL;
    const tg_meta_t *meta = &ds->meta;
    if (meta->feat_dim == 0) return tg_err(-EINVAL, "%s: feature width is 0", ds->dir);
    tg_store_t *st = calloc(1, sizeof *st);
    mmap_store_t *m = calloc(1, sizeof *m);
    if (!st || !m) {
        free(st);
        free(m);
        return tg_err(-ENOMEM, "mmap feature store: out of memory");
    }
    char path[4096];
    tg_dataset_path(ds, TG_FILE_FEATURES, path, sizeof path);
    uint64_t want = meta->num_nodes * meta->feat_dim * tg_feat_dtype_size(meta->feat_dtype);
    int rc = tg_mmap_file_open(&m->file, path, want);
    if (rc < 0) {
        free(st);
        free(m);
        return rc;
    }
    m->dtype = meta->feat_dtype;
    m->normalize = opts && opts->normalize;
    m->rowcrc = opts ? opts->rowcrc : NULL;
    st->iface = &mmap_iface;
    st->num_nodes = meta->num_nodes;
    st->dim = meta->feat_dim;
    st->mem_bytes = 0; /* the page cache holds the rows; a cgroup limit bounds it */
    st->impl = m;
    *out = st;
    return 0;
}

/* ---------------------------------------------------------------- parallel gathering */

#define MIN_ROWS_PER_THREAD 64

typedef struct {
    tg_store_t *st;
    const uint64_t *nodes;
    size_t n, parts;
    float *out;
    int *rc;    /* (parts) */
    char **msg; /* (parts) the thread-local message of a failed part, copied */
} par_ctx_t;

static void par_fn(void *arg, size_t begin, size_t end, int tid)
{
    (void)tid;
    par_ctx_t *c = arg;
    for (size_t k = begin; k < end; k++) {
        size_t lo = k * c->n / c->parts, hi = (k + 1) * c->n / c->parts;
        int rc = tg_store_gather(c->st, c->nodes + lo, hi - lo, c->out + lo * c->st->dim);
        c->rc[k] = rc;
        /* The message is thread-local: carry it to the caller's thread. */
        if (rc < 0) c->msg[k] = strdup(tg_errmsg());
    }
}

int tg_store_gather_parallel(tg_store_t *st, tg_pool_t *pool, const uint64_t *nodes, size_t n,
                             float *out)
{
    size_t threads = pool ? (size_t)tg_pool_nthreads(pool) : 1;
    size_t parts = TG_MIN(threads, n / MIN_ROWS_PER_THREAD);
    if (parts <= 1) return tg_store_gather(st, nodes, n, out);
    int *rcs = calloc(parts, sizeof *rcs);
    char **msgs = calloc(parts, sizeof *msgs);
    if (!rcs || !msgs) {
        free(rcs);
        free(msgs);
        return tg_err(-ENOMEM, "gather: out of memory for %zu parts", parts);
    }
    par_ctx_t c = {st, nodes, n, parts, out, rcs, msgs};
    tg_pool_for(pool, parts, par_fn, &c);
    int rc = 0;
    for (size_t k = 0; k < parts; k++) {
        if (rcs[k] < 0 && rc == 0)
            rc = tg_err(rcs[k], "%s",
                        msgs[k] ? msgs[k] : "gather failed (message lost: out of memory)");
        free(msgs[k]);
    }
    free(rcs);
    free(msgs);
    return rc;
}
