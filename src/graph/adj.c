/* In-memory adjacency (tg_adj_i over a u64 indices array in RAM). See tiergnn/graph.h. */
#include "tiergnn/graph.h"

#include <stdlib.h>
#include <string.h>

#include "tiergnn/data.h"

typedef struct {
    uint64_t *indptr_owned;
    uint64_t *indices_owned;
    const uint64_t *indices;
} adj_mem_t;

static int mem_read(tg_adj_t *adj, const uint64_t *pos, size_t n, uint64_t *out)
{
    const adj_mem_t *m = adj->impl;
    for (size_t i = 0; i < n; i++) {
        if (pos[i] >= adj->num_edges)
            return tg_err(-EINVAL, "adjacency: edge position %llu out of range (%llu edges)",
                          (unsigned long long)pos[i], (unsigned long long)adj->num_edges);
        out[i] = m->indices[pos[i]];
    }
    return 0;
}

static void mem_destroy(tg_adj_t *adj)
{
    adj_mem_t *m = adj->impl;
    if (m) {
        free(m->indptr_owned);
        free(m->indices_owned);
        free(m);
    }
    free(adj);
}

static const tg_adj_i mem_iface = {"memory", mem_read, mem_destroy};

/* ---------------------------------------------------------------- raw entries */

typedef struct {
    const void *indices;
    size_t esz;
} adj_raw_t;

static int raw_read(tg_adj_t *adj, const uint64_t *pos, size_t n, uint64_t *out)
{
    const adj_raw_t *m = adj->impl;
    for (size_t i = 0; i < n; i++) {
        if (pos[i] >= adj->num_edges)
            return tg_err(-EINVAL, "adjacency: edge position %llu out of range (%llu edges)",
                          (unsigned long long)pos[i], (unsigned long long)adj->num_edges);
        out[i] = m->esz == 4 ? ((const uint32_t *)m->indices)[pos[i]]
                             : ((const uint64_t *)m->indices)[pos[i]];
    }
    return 0;
}

static void raw_destroy(tg_adj_t *adj)
{
    free(adj->impl);
    free(adj);
}

static const tg_adj_i raw_iface = {"raw", raw_read, raw_destroy};

int tg_adj_raw_create(tg_adj_t **out, uint64_t num_nodes, uint64_t num_edges,
                      const uint64_t *indptr, const void *indices, size_t esz)
{
    *out = NULL;
    if (!indptr || (num_edges && !indices) || (esz != 4 && esz != 8))
        return tg_err(-EINVAL, "adjacency: raw entries need indptr, indices and 4 or 8 bytes");
    tg_adj_t *a = calloc(1, sizeof *a);
    adj_raw_t *m = calloc(1, sizeof *m);
    if (!a || !m) {
        free(a);
        free(m);
        return tg_err(-ENOMEM, "adjacency: out of memory");
    }
    m->indices = indices;
    m->esz = esz;
    a->iface = &raw_iface;
    a->num_nodes = num_nodes;
    a->num_edges = num_edges;
    a->indptr = indptr;
    a->impl = m;
    *out = a;
    return 0;
}

int tg_adj_top_degree(const tg_adj_t *adj, uint64_t k, uint64_t *out, uint64_t *edges)
{
    const uint64_t *ip = adj->indptr, N = adj->num_nodes;
    if (edges) *edges = 0;
    if (k > N)
        return tg_err(-EINVAL, "adjacency: the %llu highest degrees of %llu nodes",
                      (unsigned long long)k, (unsigned long long)N);
    if (!k) return 0;
    uint64_t maxd = 0;
    for (uint64_t v = 0; v < N; v++)
        maxd = TG_MAX(maxd, ip[v + 1] - ip[v]);
    /* the threshold degree from a histogram of degrees (capped) */
    uint64_t cap = TG_MIN(maxd, (uint64_t)1 << 20) + 1;
    uint64_t *hist = calloc(cap, sizeof *hist);
    if (!hist) return tg_err(-ENOMEM, "adjacency: out of memory for a degree histogram");
    for (uint64_t v = 0; v < N; v++)
        hist[TG_MIN(ip[v + 1] - ip[v], cap - 1)]++;
    uint64_t thr = cap - 1, above = 0;
    while (thr > 0 && above + hist[thr] < k)
        above += hist[thr--];
    free(hist);
    uint64_t n = 0;
    for (uint64_t v = 0; v < N && n < k; v++)
        if (TG_MIN(ip[v + 1] - ip[v], cap - 1) > thr) out[n++] = v;
    for (uint64_t v = 0; v < N && n < k; v++)
        if (TG_MIN(ip[v + 1] - ip[v], cap - 1) == thr) out[n++] = v;
    for (uint64_t i = 0; edges && i < k; i++)
        *edges += ip[out[i] + 1] - ip[out[i]];
    return 0;
}

void tg_adj_destroy(tg_adj_t *adj)
{
    if (adj) adj->iface->destroy(adj);
}

int tg_adj_memory_create(tg_adj_t **out, uint64_t num_nodes, uint64_t num_edges,
                         const uint64_t *indptr, const uint64_t *indices, int own)
{
    *out = NULL;
    int rc = 0;
    tg_adj_t *adj = NULL;
    adj_mem_t *m = NULL;
    if (!indptr || (num_edges && !indices)) {
        rc = tg_err(-EINVAL, "adjacency: indptr and indices are required");
        goto err;
    }
    /* A broken indptr would make the sampler read out of bounds: check it once here. */
    if (indptr[0] != 0) {
        rc = tg_err(-EINVAL, "adjacency: indptr[0] is %llu, expected 0",
                    (unsigned long long)indptr[0]);
        goto err;
    }
    for (uint64_t v = 0; v < num_nodes; v++)
        if (indptr[v + 1] < indptr[v]) {
            rc = tg_err(-EINVAL, "adjacency: indptr decreases at node %llu", (unsigned long long)v);
            goto err;
        }
    if (indptr[num_nodes] != num_edges) {
        rc = tg_err(-EINVAL, "adjacency: indptr[%llu] is %llu, expected the edge count %llu",
                    (unsigned long long)num_nodes, (unsigned long long)indptr[num_nodes],
                    (unsigned long long)num_edges);
        goto err;
    }
    adj = calloc(1, sizeof *adj);
    m = calloc(1, sizeof *m);
    if (!adj || !m) {
        rc = tg_err(-ENOMEM, "adjacency: out of memory");
        goto err;
    }
    if (own) {
        m->indptr_owned = (uint64_t *)indptr;
        m->indices_owned = (uint64_t *)indices;
    }
    m->indices = indices;
    adj->iface = &mem_iface;
    adj->num_nodes = num_nodes;
    adj->num_edges = num_edges;
    adj->indptr = indptr;
    adj->impl = m;
    *out = adj;
    return 0;
err:
    free(adj);
    free(m);
    if (own) {
        free((void *)indptr);
        free((void *)indices);
    }
    return rc;
}

int tg_adj_memory_open(tg_adj_t **out, const struct tg_dataset *ds)
{
    *out = NULL;
    uint64_t *indptr = NULL, *indices = NULL;
    int rc = tg_dataset_load_indptr(ds, &indptr);
    if (rc < 0) return rc;
    rc = tg_dataset_load_indices(ds, &indices);
    if (rc < 0) {
        free(indptr);
        return rc;
    }
    /* Node ids are not scanned here: the sampler checks every id it reads, which also covers
     * adjacency sources that never hold the whole array. */
    uint64_t n = ds->meta.num_nodes, e = ds->meta.num_edges;
    return tg_adj_memory_create(out, n, e, indptr, indices, 1);
}
