/* An adjacency that counts the index bytes read through it (graph/adj-counting.h). */
#include "adj-counting.h"

#include <errno.h>
#include <stdlib.h>

#include "tiergnn/util.h"

typedef struct {
    tg_adj_t *inner;
    size_t index_bytes;
    _Atomic uint64_t *counter;
    int owns; /* destroys inner with the wrapper */
} counting_t;

static int counting_read(tg_adj_t *adj, const uint64_t *pos, size_t n, uint64_t *out)
{
    counting_t *c = adj->impl;
    atomic_fetch_add_explicit(c->counter, (uint64_t)n * c->index_bytes, memory_order_relaxed);
    return tg_adj_read(c->inner, pos, n, out);
}

static void counting_destroy(tg_adj_t *adj)
{
    counting_t *c = adj->impl;
    if (c->owns) tg_adj_destroy(c->inner);
    free(c);
    free(adj);
}

static const tg_adj_i counting_iface = {"counting", counting_read, counting_destroy};

static int counting_new(tg_adj_t **out, tg_adj_t *adj, size_t index_bytes,
                        _Atomic uint64_t *counter, int owns)
{
    *out = NULL;
    tg_adj_t *w = calloc(1, sizeof *w);
    counting_t *c = calloc(1, sizeof *c);
    if (!w || !c) {
        free(w);
        free(c);
        if (owns) tg_adj_destroy(adj);
        return tg_err(-ENOMEM, "adjacency: out of memory");
    }
    c->owns = owns;
    c->inner = adj;
    c->index_bytes = index_bytes;
    c->counter = counter;
    w->iface = &counting_iface;
    w->num_nodes = adj->num_nodes;
    w->num_edges = adj->num_edges;
    w->indptr = adj->indptr;
    w->impl = c;
    *out = w;
    return 0;
}

int tg_adj_counting_wrap(tg_adj_t **out, tg_adj_t *adj, size_t index_bytes,
                         _Atomic uint64_t *counter)
{
    return counting_new(out, adj, index_bytes, counter, 1);
}

int tg_adj_counting_view(tg_adj_t **out, tg_adj_t *adj, size_t index_bytes,
                         _Atomic uint64_t *counter)
{
    return counting_new(out, adj, index_bytes, counter, 0);
}
