/* Node-wise uniform neighbour sampler, the "node" implementation of tg_sampler_i (see
 * tiergnn/graph.h). */
#include "sampler-impl.h"

#include <stdlib.h>
#include <string.h>

#define WHO "sampler"

/* Scratch of one sampler (the generic tg_sampler_t holds the adjacency and the fanouts); owns
 * the node map (see sampler-impl.h). */
typedef struct node_sampler {
    /* global id -> local position; map.ids is the batch's node list while it grows */
    tg_sampler_idmap_t map;
    /* edge positions chosen for the current layer, and the neighbour ids read for them */
    uint64_t *pos, *nbr;
    size_t pos_cap;
    /* hash set of offsets for Floyd's algorithm when the fanout is large */
    uint64_t *set;
    size_t set_cap;
} node_t;

static int node_create(tg_sampler_t *g)
{
    node_t *s = calloc(1, sizeof *s);
    if (!s) return tg_err(-ENOMEM, "sampler: out of memory");
    g->impl = s;
    return 0;
}

static void node_destroy(tg_sampler_t *g)
{
    node_t *s = g->impl;
    if (!s) return;
    tg_sampler_idmap_free(&s->map);
    free(s->pos);
    free(s->nbr);
    free(s->set);
    free(s);
    g->impl = NULL;
}

static void sort_u64(uint64_t *a, size_t n);

/* Small open-addressing set of offsets for Floyd's algorithm; cleared per destination. */
static int set_insert(uint64_t *set, size_t cap, uint64_t x)
{
    size_t h = (size_t)tg_sampler_mix64(x) & (cap - 1);
    while (set[h] != TG_SAMPLER_EMPTY) {
        if (set[h] == x) return 0;
        h = (h + 1) & (cap - 1);
    }
    set[h] = x;
    return 1;
}

/* Chooses k distinct offsets of [0, deg) uniformly (Robert Floyd's algorithm: k RNG draws, no
 * O(deg) scratch, which matters for hubs with millions of neighbours) and writes beg + offset to
 * out in ascending order. */
static int choose(node_t *s, tg_rng_t *rng, uint64_t beg, uint64_t deg, uint64_t k, uint64_t *out)
{
    if (k <= 32) {
        /* Linear duplicate check is faster than hashing for the usual fanouts (5..25). */
        uint64_t n = 0;
        for (uint64_t j = deg - k; j < deg; j++) {
            uint64_t t = tg_rng_below(rng, j + 1);
            int dup = 0;
            for (uint64_t i = 0; i < n; i++)
                if (out[i] == t) {
                    dup = 1;
                    break;
                }
            out[n++] = dup ? j : t;
        }
    } else {
        size_t cap = 64;
        while (cap < 2 * k)
            cap *= 2;
        int rc = tg_sampler_grow((void **)&s->set, &s->set_cap, cap, sizeof *s->set, "sampling set",
                                 WHO);
        if (rc < 0) return rc;
        for (size_t i = 0; i < cap; i++)
            s->set[i] = TG_SAMPLER_EMPTY;
        uint64_t n = 0;
        for (uint64_t j = deg - k; j < deg; j++) {
            uint64_t t = tg_rng_below(rng, j + 1);
            if (set_insert(s->set, cap, t))
                out[n++] = t;
            else {
                set_insert(s->set, cap, j);
                out[n++] = j;
            }
        }
    }
    sort_u64(out, k);
    for (uint64_t i = 0; i < k; i++)
        out[i] += beg;
    return 0;
}

static void sort_u64(uint64_t *a, size_t n)
{
    if (n > 32) {
        qsort(a, n, sizeof *a, tg_cmp_u64);
        return;
    }
    for (size_t i = 1; i < n; i++) {
        uint64_t x = a[i];
        size_t j = i;
        while (j > 0 && a[j - 1] > x) {
            a[j] = a[j - 1];
            j--;
        }
        a[j] = x;
    }
}

static int node_sample(tg_sampler_t *g, const uint64_t *seeds, size_t n, tg_rng_t *rng,
                       tg_batch_t *out)
{
    node_t *s = g->impl;
    tg_adj_t *adj = g->adj;
    const uint64_t *indptr = adj->indptr;
    int L = g->num_layers, rc = 0;
    if ((rc = tg_sampler_batch_begin(g, &s->map, seeds, n, out, WHO)) < 0) return rc;

    /* From the seeds outwards: block L-1 first, block 0 last. */
    for (int l = L - 1; l >= 0; l--) {
        tg_block_t *b = &out->blocks[l];
        uint32_t num_dst = (uint32_t)s->map.len;
        int64_t f = g->fanouts[l];
        b->num_dst = num_dst;
        b->indptr = malloc(((size_t)num_dst + 1) * sizeof *b->indptr);
        if (!b->indptr) {
            rc = tg_err(-ENOMEM, "sampler: out of memory for block %d", l);
            goto err;
        }
        /* Pass 1: how many edges each destination keeps. */
        b->indptr[0] = 0;
        for (uint32_t i = 0; i < num_dst; i++) {
            uint64_t v = s->map.ids[i];
            uint64_t deg = indptr[v + 1] - indptr[v];
            uint64_t k = f < 0 ? deg : TG_MIN((uint64_t)f, deg);
            b->indptr[i + 1] = b->indptr[i] + k;
        }
        uint64_t ne = b->indptr[num_dst];
        b->num_edges = ne;
        if ((rc = tg_sampler_grow((void **)&s->pos, &s->pos_cap, ne, sizeof *s->pos,
                                  "edge positions", WHO)) < 0)
            goto err;
        /* nbr shares pos_cap: grow it to the same capacity. */
        {
            uint64_t *nb = realloc(s->nbr, (s->pos_cap ? s->pos_cap : 1) * sizeof *nb);
            if (!nb) {
                rc = tg_err(-ENOMEM, "sampler: out of memory for %llu neighbours",
                            (unsigned long long)ne);
                goto err;
            }
            s->nbr = nb;
        }
        /* Pass 2: choose the positions (the RNG is consumed in destination order). */
        for (uint32_t i = 0; i < num_dst; i++) {
            uint64_t v = s->map.ids[i];
            uint64_t beg = indptr[v], deg = indptr[v + 1] - beg;
            uint64_t k = b->indptr[i + 1] - b->indptr[i];
            if (k == 0)
                continue; /* also keeps s->pos (NULL before the first edge) out of arithmetic */
            uint64_t *p = s->pos + b->indptr[i];
            if (k == deg) {
                for (uint64_t j = 0; j < k; j++)
                    p[j] = beg + j;
            } else if ((rc = choose(s, rng, beg, deg, k, p)) < 0) {
                goto err;
            }
        }
        /* One batched read per layer: a disk-resident adjacency turns it into merged I/O. */
        if (ne && (rc = tg_adj_read(adj, s->pos, (size_t)ne, s->nbr)) < 0) {
            tg_err_prefix(rc, "sampler: block %d", l);
            goto err;
        }
        b->indices = malloc((ne ? ne : 1) * sizeof *b->indices);
        if (!b->indices) {
            rc = tg_err(-ENOMEM, "sampler: out of memory for block %d (%llu edges)", l,
                        (unsigned long long)ne);
            goto err;
        }
        for (uint64_t e = 0; e < ne; e++) {
            uint32_t local;
            int is_new;
            if (s->nbr[e] >= adj->num_nodes) {
                rc = tg_err(-EINVAL,
                            "sampler: edge %llu names node %llu, but the graph has %llu "
                            "nodes (corrupt indices?)",
                            (unsigned long long)s->pos[e], (unsigned long long)s->nbr[e],
                            (unsigned long long)adj->num_nodes);
                goto err;
            }
            if ((rc = tg_sampler_idmap_get_or_add(&s->map, s->nbr[e], &local, &is_new, WHO)) < 0)
                goto err;
            b->indices[e] = local;
        }
        b->num_src = (uint32_t)s->map.len;
    }

    return tg_sampler_batch_end(&s->map, n, out, WHO);
err:
    tg_batch_free(out);
    return rc;
}

const tg_sampler_i tg_sampler_node = {
    .name = "node",
    .summary = "uniform neighbour sampling without replacement, one fanout per layer (GraphSAGE)",
    .create = node_create,
    .sample = node_sample,
    .destroy = node_destroy,
    .amount = "fanout",
};
