/* tg_adj_top_degree (graph/adj.c): the k nodes it picks are the k highest in-degrees with ties
 * to the lower id, checked against a sort of every node for every k on graphs with many ties
 * and without; the order it gives (above the k-th degree in id order, then at it in id order);
 * the sum of their degrees; degrees of 2^20 and more tie; k = 0 and k = N; k past N refused. */
#include "tg_test.h"
#include "tiergnn/graph.h"

#include <stdlib.h>

enum { N = 300 };

static uint64_t indptr[N + 1];
static uint64_t deg_of[N];

static tg_adj_t *graph(uint64_t seed, uint64_t spread)
{
    tg_rng_t r;
    tg_rng_seed(&r, seed);
    indptr[0] = 0;
    for (uint64_t v = 0; v < N; v++) {
        deg_of[v] = tg_rng_below(&r, spread);
        indptr[v + 1] = indptr[v] + deg_of[v];
    }
    tg_adj_t *adj = NULL;
    /* the indices are never read */
    static uint64_t none[1];
    TG_CHECK_OK(tg_adj_raw_create(&adj, N, indptr[N], indptr, none, 8));
    return adj;
}

/* degrees as the ranking sees them: 2^20 and more tie */
static uint64_t key(uint64_t v)
{
    return TG_MIN(deg_of[v], (uint64_t)1 << 20);
}

static int by_degree(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    if (key(x) != key(y)) return key(x) > key(y) ? -1 : 1;
    return x < y ? -1 : x > y;
}

TG_TEST(against_a_sort)
{
    static const uint64_t spreads[] = {4, 50, 100000, (uint64_t)3 << 20};
    for (size_t g = 0; g < 4; g++) {
        tg_adj_t *adj = graph(7 + g, spreads[g]);
        uint64_t all[N], out[N];
        for (uint64_t v = 0; v < N; v++)
            all[v] = v;
        qsort(all, N, sizeof *all, by_degree);
        for (uint64_t k = 0; k <= N; k++) {
            uint64_t edges = 7;
            TG_CHECK_OK(tg_adj_top_degree(adj, k, out, &edges));
            unsigned char in[N] = {0};
            uint64_t want_edges = 0;
            for (uint64_t i = 0; i < k; i++) {
                in[all[i]] = 1;
                want_edges += deg_of[all[i]];
            }
            uint64_t thr = k ? key(all[k - 1]) : 0;
            int ok = edges == want_edges;
            for (uint64_t i = 0; i < k && ok; i++) {
                ok = in[out[i]];
                in[out[i]] = 0; /* each once */
                /* the order: above thr by id, then at thr by id */
                if (ok && i > 0) {
                    int above0 = key(out[i - 1]) > thr, above1 = key(out[i]) > thr;
                    ok = above0 > above1 || (above0 == above1 && out[i - 1] < out[i]);
                }
            }
            if (!ok) {
                TG_FAIL("spread %llu, k %llu: not the top k (edges %llu, expected %llu)",
                        (unsigned long long)spreads[g], (unsigned long long)k,
                        (unsigned long long)edges, (unsigned long long)want_edges);
                break;
            }
        }
        TG_CHECK_OK(tg_adj_top_degree(adj, 3, out, NULL));
        TG_CHECK_ERR(tg_adj_top_degree(adj, N + 1, out, NULL), "highest degrees");
        tg_adj_destroy(adj);
    }
}

int main(void)
{
    TG_RUN(against_a_sort);
    return tg_test_done();
}
