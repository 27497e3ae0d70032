/* Opening the resources a run reads: dataset, adjacency, labels, splits, feature store, pool. */
#include "engine-impl.h"

#include <stdlib.h>
#include <string.h>

int tg_run_open(tg_run_t *r, const char *dataset, tg_run_store_t store, int normalize,
                uint64_t mem_bytes, int threads)
{
    memset(r, 0, sizeof *r);
    int rc = tg_dataset_open(&r->ds, dataset, TG_OPEN_CHECK_SIZES);
    if (rc < 0) return rc;
    const tg_meta_t *m = &r->ds->meta;
    if (m->num_nodes == 0 || m->num_nodes > UINT32_MAX) {
        rc = tg_err(-EINVAL, "%s: %llu nodes; training needs 1..%u nodes", dataset,
                    (unsigned long long)m->num_nodes, UINT32_MAX);
        goto err;
    }
    if (m->num_classes == 0) {
        rc = tg_err(-EINVAL, "%s: the dataset has no classes (num_classes = 0)", dataset);
        goto err;
    }
    tg_budget_init(&r->budget, mem_bytes);
    r->budget_init = 1;
    /* The adjacency in RAM is part of the data budget: indptr (N+1) and indices (E), as u64. */
    uint64_t adj_bytes = (m->num_nodes + 1 + m->num_edges) * sizeof(uint64_t);
    if ((rc = tg_budget_reserve(&r->budget, adj_bytes, "in-memory adjacency")) < 0) goto err;
    if ((rc = tg_adj_memory_open(&r->adj, r->ds)) < 0) goto err;
    if ((rc = tg_dataset_load_labels(r->ds, &r->labels)) < 0) goto err;
    r->label_width = m->multi_label ? m->num_classes : 1;
    static const tg_file_id_t ids[3] = {TG_FILE_TRAIN, TG_FILE_VALID, TG_FILE_TEST};
    for (int s = 0; s < 3; s++)
        if ((rc = tg_dataset_load_split(r->ds, ids[s], &r->split[s], &r->split_n[s])) < 0) goto err;
    tg_store_opts_t so = {.normalize = normalize, .budget = &r->budget};
    rc = store == TG_RUN_STORE_MEMORY ? tg_store_memory_open(&r->store, r->ds, &so)
                                      : tg_store_file_open(&r->store, r->ds, &so);
    if (rc < 0) goto err;
    if ((rc = tg_pool_create(&r->pool, threads)) < 0) goto err;
    return 0;
err:
    tg_run_close(r);
    return rc;
}

void tg_run_close(tg_run_t *r)
{
    tg_pool_destroy(r->pool);
    tg_store_release(r->store);
    for (int s = 0; s < 3; s++)
        free(r->split[s]);
    free(r->labels);
    tg_adj_destroy(r->adj);
    if (r->budget_init) tg_budget_destroy(&r->budget);
    tg_dataset_close(r->ds);
    memset(r, 0, sizeof *r);
}

void tg_run_labels(const tg_run_t *r, const uint64_t *nodes, size_t n, const uint8_t *mask,
                   int32_t *y)
{
    size_t w = r->label_width;
    for (size_t i = 0; i < n; i++) {
        uint64_t v = nodes[i];
        if (mask && !mask[v]) {
            for (size_t k = 0; k < w; k++)
                y[i * w + k] = -1;
        } else {
            memcpy(y + i * w, r->labels + v * w, w * sizeof *y);
        }
    }
}
