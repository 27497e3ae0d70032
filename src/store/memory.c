/* The in-memory feature store (see tiergnn/store.h). */
#include "tiergnn/store.h"

#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tiergnn/data.h"
#include "tiergnn/rowcrc.h"

typedef struct {
    float *x; /* (num_nodes, dim) */
    tg_budget_t *budget;
} mem_store_t;

void tg_store_release(tg_store_t *st)
{
    if (st) st->iface->release(st);
}

static int mem_gather(tg_store_t *st, const uint64_t *nodes, size_t n, float *out)
{
    const mem_store_t *m = st->impl;
    size_t d = st->dim;
    for (size_t i = 0; i < n; i++) {
        if (nodes[i] >= st->num_nodes)
            return tg_err(-EINVAL, "feature store: node %llu out of range (%llu nodes)",
                          (unsigned long long)nodes[i], (unsigned long long)st->num_nodes);
        memcpy(out + i * d, m->x + nodes[i] * d, d * sizeof(float));
    }
    return 0;
}

static void mem_release(tg_store_t *st)
{
    mem_store_t *m = st->impl;
    if (m) {
        free(m->x);
        if (m->budget) tg_budget_release(m->budget, st->mem_bytes);
        free(m);
    }
    free(st);
}

static const tg_store_i mem_iface = {"memory", mem_gather, mem_release};

/* Reads every row of features.bin into x (num_nodes x dim f32) in pieces, so that a huge file is
 * never one giant read: f32 rows straight into x, f16 rows through a 4 MiB scratch buffer;
 * both are converted (and normalised) by tg_feat_rows_f32 piece by piece. */
static int load_rows(const struct tg_dataset *ds, float *x, int normalize,
                     const tg_rowcrc_t *rowcrc)
{
    const tg_meta_t *m = &ds->meta;
    size_t d = m->feat_dim, row = d * tg_feat_dtype_size(m->feat_dtype);
    int f16 = m->feat_dtype == TG_F16;
    char path[4096];
    tg_dataset_path(ds, TG_FILE_FEATURES, path, sizeof path);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return tg_err(-errno, "%s: cannot open: %s", path, strerror(errno));
    uint64_t step = TG_MAX(1, (f16 ? 4u << 20 : 64u << 20) / row);
    void *scratch = f16 ? malloc((size_t)TG_MIN(step, m->num_nodes) * row + 1) : NULL;
    int rc = f16 && !scratch ? tg_err(-ENOMEM, "%s: out of memory for reading", path) : 0;
    for (uint64_t first = 0; rc == 0 && first < m->num_nodes; first += step) {
        uint64_t cnt = TG_MIN(step, m->num_nodes - first);
        float *dst = x + first * d;
        void *raw = f16 ? scratch : (void *)dst;
        if ((rc = tg_pread_full(fd, raw, (size_t)(cnt * row), first * row, path)) == 0)
            rc = tg_rowcrc_check_rows(rowcrc, first, cnt, raw, path, first * row);
        if (rc == 0) tg_feat_rows_f32(dst, raw, row, (size_t)cnt, d, m->feat_dtype, normalize);
    }
    free(scratch);
    close(fd);
    return rc;
}

int tg_store_memory_open(tg_store_t **out, const struct tg_dataset *ds, const tg_store_opts_t *opts)
{
    *out = NULL;
    uint64_t n = ds->meta.num_nodes, d = ds->meta.feat_dim;
    if (d == 0) return tg_err(-EINVAL, "%s: feature width is 0", ds->dir);
    if (n > SIZE_MAX / (d * sizeof(float)))
        return tg_err(-ENOMEM, "%s: %llu x %llu features do not fit in the address space", ds->dir,
                      (unsigned long long)n, (unsigned long long)d);
    uint64_t bytes = n * d * sizeof(float);
    tg_budget_t *budget = opts ? opts->budget : NULL;
    int rc;
    if (budget && (rc = tg_budget_reserve(budget, bytes, "in-memory feature store")) < 0) return rc;
    tg_store_t *st = calloc(1, sizeof *st);
    mem_store_t *m = calloc(1, sizeof *m);
    float *x = malloc(bytes ? bytes : 1);
    if (!st || !m || !x) {
        rc = tg_err(-ENOMEM, "%s: out of memory for the feature store (%llu bytes)", ds->dir,
                    (unsigned long long)bytes);
        goto err;
    }
    if ((rc = load_rows(ds, x, opts && opts->normalize, opts ? opts->rowcrc : NULL)) < 0) goto err;
    m->x = x;
    m->budget = budget;
    st->iface = &mem_iface;
    st->num_nodes = n;
    st->dim = (uint32_t)d;
    st->mem_bytes = bytes;
    st->impl = m;
    *out = st;
    return 0;
err:
    free(x);
    free(m);
    free(st);
    if (budget) tg_budget_release(budget, bytes);
    return rc;
}
