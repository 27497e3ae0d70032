/* store/tier_cs: the changeset tier. Replaying changesets computed by store/changeset over random
 * traces (cache sizes 0, 1, some, all nodes; several superbatches, each from the state the one
 * before left): every row looked up equals the node's row, a batch misses exactly the rows the
 * simulation counted, the misses come sorted by node with their positions, the held nodes are
 * the simulation's final state, find agrees, the counters add up; retain keeps what it holds and
 * lists only what it lacks; a changeset that does not fit the state is refused naming the node;
 * bad arguments and a budget too small are refused, and every byte goes back. */
#include "tg_test.h"

#include "tiergnn/changeset.h"
#include "tiergnn/extract.h"
#include "tiergnn/store.h"

#include <errno.h>

#define DIM 3u
#define ROW (DIM * sizeof(float))

static uint64_t rng = 88172645463325252ull;
static uint64_t next_u64(void)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return rng;
}

/* Row k of node v: a value no other node's row has. */
static float value(uint64_t v, uint32_t k)
{
    return (float)(v * DIM + k) + 0.25f;
}

static int row_is(const float *x, uint64_t v)
{
    for (uint32_t k = 0; k < DIM; k++)
        if (x[k] != value(v, k)) return 0;
    return 1;
}

/* A trace of S iterations of up to B distinct nodes below N (some empty). */
static void make_trace(uint32_t N, uint32_t S, uint32_t B, uint64_t *off, uint32_t *ids)
{
    uint32_t *perm = malloc(N * sizeof *perm);
    off[0] = 0;
    for (uint32_t i = 0; i < S; i++) {
        for (uint32_t v = 0; v < N; v++)
            perm[v] = v;
        uint32_t n = (uint32_t)(next_u64() % (B + 1));
        for (uint32_t k = 0; k < n; k++) { /* a partial shuffle, skewed to low ids */
            uint32_t span = TG_MIN(N - k, 2 * B);
            uint32_t j = k + (uint32_t)(next_u64() % span);
            uint32_t t = perm[k];
            perm[k] = perm[j];
            perm[j] = t;
            ids[off[i] + k] = perm[k];
        }
        off[i + 1] = off[i] + n;
    }
    free(perm);
}

static int cmp_u32(const void *a, const void *b)
{
    uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
    return x < y ? -1 : x > y;
}

/* One superbatch through the tier: its initial state (retain, rows filled), then per iteration
 * the lookup, the misses filled from the "file", the changeset. */
static void replay(tg_tier_t *t, tg_cs_ws_t *ws, uint32_t N, uint64_t entries, uint32_t S,
                   uint32_t B)
{
    uint64_t *off = malloc((S + 1) * sizeof *off);
    uint32_t *ids = malloc((size_t)S * B * sizeof *ids + 4);
    make_trace(N, S, B, off, ids);
    tg_cs_trace_t tr = {.iters = S, .off = off, .ids = ids};
    uint32_t *prev = malloc(entries * sizeof *prev + 4), *c0;
    uint64_t nprev = tg_tier_cs_held(t, prev), n0;
    TG_CHECK_OK(tg_cs_init_state(ws, &tr, entries, prev, nprev, &c0, &n0));
    tg_cs_t cs;
    TG_CHECK_OK(tg_cs_compute(ws, &tr, entries, c0, n0, &cs, NULL));
    uint64_t *fill = malloc((n0 + B) * sizeof *fill + 8);
    size_t nf = tg_tier_cs_retain(t, c0, n0, fill);
    TG_CHECK_EQ_U64(tg_tier_cs_held(t, NULL), n0);
    /* only what it lacked is listed, in node order; what it kept still holds its row */
    size_t kept = 0;
    for (uint64_t i = 0; i < nprev; i++)
        for (uint64_t k = 0; k < n0; k++)
            kept += prev[i] == c0[k];
    TG_CHECK_EQ_U64(nf + kept, n0);
    for (size_t i = 0; i < nf; i++) {
        uint64_t v = fill[i] >> 32;
        TG_CHECK(i == 0 || (fill[i - 1] >> 32) < v);
        float *row = tg_tier_cs_row(t, (uint32_t)fill[i]);
        for (uint32_t k = 0; k < DIM; k++)
            row[k] = value(v, k);
    }
    for (uint64_t k = 0; k < n0; k++) {
        const float *row = tg_tier_find(t, c0[k]);
        TG_CHECK(row && row_is(row, c0[k]));
    }
    float *X = malloc((size_t)B * ROW + 4);
    uint64_t *nodes = malloc((size_t)B * sizeof *nodes + 8);
    for (uint32_t i = 0; i < S; i++) {
        uint32_t n = (uint32_t)(off[i + 1] - off[i]);
        for (uint32_t r = 0; r < n; r++)
            nodes[r] = ids[off[i] + r];
        memset(X, 0, (size_t)n * ROW);
        size_t nm = tg_tier_cs_gather(t, nodes, n, X, fill);
        TG_CHECK_EQ_U64(nm, cs.misses[i]);
        for (size_t m = 0; m < nm; m++) {
            uint32_t r = (uint32_t)fill[m];
            TG_CHECK(r < n && nodes[r] == fill[m] >> 32 && !tg_tier_find(t, nodes[r]));
            TG_CHECK(m == 0 || (fill[m - 1] >> 32) < (fill[m] >> 32));
            for (uint32_t k = 0; k < DIM; k++)
                X[(size_t)r * DIM + k] = value(nodes[r], k);
        }
        for (uint32_t r = 0; r < n; r++)
            TG_CHECK(row_is(X + (size_t)r * DIM, nodes[r]));
        TG_CHECK_OK(tg_tier_cs_apply(t, &cs, i, nodes, n, X));
        TG_CHECK(tg_tier_cs_held(t, NULL) <= entries);
    }
    /* the held nodes are the simulation's final state */
    uint64_t nh = tg_tier_cs_held(t, prev);
    TG_CHECK_EQ_U64(nh, cs.num_final);
    qsort(prev, nh, sizeof *prev, cmp_u32);
    qsort(cs.final, cs.num_final, sizeof *cs.final, cmp_u32);
    TG_CHECK(nh == cs.num_final && (!nh || !memcmp(prev, cs.final, nh * sizeof *prev)));
    for (uint64_t k = 0; k < nh; k++) {
        const float *row = tg_tier_find(t, prev[k]);
        TG_CHECK(row && row_is(row, prev[k]));
    }
    tg_cs_free(&cs);
    free(c0);
    free(prev);
    free(fill);
    free(X);
    free(nodes);
    free(off);
    free(ids);
}

TG_TEST(replay_changesets)
{
    const uint32_t N = 300;
    static const uint64_t sizes[] = {0, 1, 17, 120, 300};
    tg_cs_ws_t *ws;
    TG_CHECK_OK(tg_cs_ws_create(&ws, N, NULL));
    for (size_t z = 0; z < sizeof sizes / sizeof *sizes; z++) {
        tg_budget_t b;
        tg_budget_init(&b, 0);
        tg_tier_t *t;
        TG_CHECK_OK(tg_tier_cs_create(&t, "test-cache", N, sizes[z], ROW, &b));
        if (!t) continue;
        TG_CHECK_EQ_U64(b.used, tg_tier_cs_bytes(N, sizes[z], ROW));
        TG_CHECK_EQ_U64(tg_tier_cs_entries(t), sizes[z]);
        for (int sb = 0; sb < 4; sb++)
            replay(t, ws, N, sizes[z], 2 + (uint32_t)sb * 3, 40);
        tg_tier_stats_t ts;
        tg_tier_stats(t, &ts, 1);
        TG_CHECK(!strcmp(ts.name, "test-cache") && ts.lookups > 0 && ts.hits <= ts.lookups);
        TG_CHECK(sizes[z] < 17 || ts.hits > 0);
        TG_CHECK_EQ_U64(ts.bytes, ts.hits * ROW);
        tg_tier_stats(t, &ts, 0);
        TG_CHECK_EQ_U64(ts.lookups, 0);
        tg_tier_destroy(t);
        TG_CHECK_EQ_U64(b.used, 0);
        tg_budget_destroy(&b);
    }
    tg_cs_ws_destroy(ws);
}

TG_TEST(refused)
{
    tg_tier_t *t = NULL;
    TG_CHECK_ERR(tg_tier_cs_create(&t, "x", 10, 11, ROW, NULL), "at most one entry per node");
    TG_CHECK_ERR(tg_tier_cs_create(&t, "x", 10, 1, 0, NULL), "row width");
    TG_CHECK(!t);
    tg_budget_t b;
    tg_budget_init(&b, 100);
    TG_CHECK_ERR(tg_tier_cs_create(&t, "small", 10, 10, ROW, &b), "changeset tier small");
    TG_CHECK(!t);
    TG_CHECK_EQ_U64(b.used, 0);
    tg_budget_destroy(&b);

    /* a changeset that was not computed from the tier's state */
    TG_CHECK_OK(tg_tier_cs_create(&t, NULL, 10, 2, ROW, NULL));
    uint64_t nodes[3] = {4, 5, 6};
    float X[3 * DIM] = {0};
    uint64_t in_off[2] = {0, 1}, out_off[2] = {0, 1}, none[2] = {0, 0}, miss[3];
    uint32_t in_ids[1] = {5}, in_pos[1] = {1}, out_ids[1] = {7};
    tg_cs_t cs = {.iters = 1,
                  .in_off = in_off,
                  .out_off = out_off,
                  .in_ids = in_ids,
                  .in_pos = in_pos,
                  .out_ids = out_ids};
    TG_CHECK_ERR(tg_tier_cs_apply(t, &cs, 0, nodes, 3, X), "evicts node 7, which is not held");
    cs.out_off = none;
    in_pos[0] = 2;
    TG_CHECK_ERR(tg_tier_cs_apply(t, &cs, 0, nodes, 3, X), "inserts node 5 at position 2");
    in_pos[0] = 1;
    TG_CHECK_OK(tg_tier_cs_apply(t, &cs, 0, nodes, 3, X));
    TG_CHECK_ERR(tg_tier_cs_apply(t, &cs, 0, nodes, 3, X), "changeset tier changeset");
    TG_CHECK_OK(tg_tier_cs_apply(t, &cs, 1, nodes, 3, X)); /* past the last iteration: nothing */
    TG_CHECK_EQ_U64(tg_tier_cs_gather(t, nodes, 3, X, miss), 2);
    TG_CHECK(miss[0] == (4ull << 32 | 0) && miss[1] == (6ull << 32 | 2));
    TG_CHECK(tg_tier_find(t, 5) && !tg_tier_find(t, 4) && !tg_tier_find(t, 10));
    tg_tier_destroy(t);
    tg_tier_destroy(NULL);
}

int main(void)
{
    TG_RUN(replay_changesets);
    TG_RUN(refused);
    return tg_test_done();
}
