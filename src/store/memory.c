/* The in-memory feature store (see tiergnn/store.h). */
#include "tiergnn/store.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "tiergnn/data.h"

typedef struct {
    float *x; /* (num_nodes, dim) */
    tg_budget_t *budget;
} mem_store_t;

void tg_store_release(tg_store_t *st)
{
    if (st) st->iface->release(st);
}

void tg_feat_normalize_rows(float *x, size_t n, size_t dim)
{
    for (size_t i = 0; i < n; i++) {
        float *r = x + i * dim;
        /* Sum in double: bag-of-words rows have thousands of entries. */
        double s = 0;
        for (size_t k = 0; k < dim; k++)
            s += fabs((double)r[k]);
        if (s == 0) continue;
        float inv = (float)(1.0 / s);
        for (size_t k = 0; k < dim; k++)
            r[k] *= inv;
    }
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
    /* Read in pieces so that a huge file is never one giant read (and f16 conversion happens in
     * the reader piece by piece). */
    uint64_t step = TG_MAX(1, (64u << 20) / (d * sizeof(float)));
    for (uint64_t first = 0; first < n; first += step) {
        uint64_t cnt = TG_MIN(step, n - first);
        if ((rc = tg_dataset_read_features(ds, first, cnt, x + first * d)) < 0) goto err;
    }
    if (opts && opts->normalize) tg_feat_normalize_rows(x, (size_t)n, (size_t)d);
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
