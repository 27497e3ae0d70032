/* store/featbuf replacement policies: what each decides. NEXT_USE's and WINDOW's misses,
 * evictions and protected evictions equal those of a brute-force simulator (tests-only: at each
 * miss it scans the resident rows for the victim the policy names) on random traces with one
 * batch in flight, with the whole future known or a short look-ahead; LRU matches its simulator
 * too, and NEXT_USE never misses more than LRU at the same size. WINDOW never evicts a row needed
 * within the window while an unprotected candidate exists, and never blocks when all are
 * protected. STATIC never evicts a pinned row, refuses a pinned set that is too large, and
 * preloading + completing makes the pinned rows hits. The trace's errors and the policies'
 * budget share. tg_featbuf_check (which recomputes every heap key from the trace) after each
 * step. Threads: tests/test_featbuf.c runs its stress tests under every policy. */
#include "tg_test.h"

#include "tiergnn/featbuf.h"

#include <unistd.h>

#define NEVER UINT64_MAX

/* ---------------------------------------------------------------- helpers */

static tg_featbuf_opts_t popts(uint64_t num_nodes, uint32_t mb, uint32_t slots,
                               tg_featbuf_policy_t policy)
{
    return (tg_featbuf_opts_t){.num_nodes = num_nodes,
                               .feat_dim = 2,
                               .dtype = TG_F32,
                               .max_batch_nodes = mb,
                               .max_batches = 1,
                               .num_slots = slots,
                               .policy = policy,
                               .window = 2,
                               .future_positions = 64 * mb};
}

/* Loads every row of h with its node id and completes it. */
static void load_all(tg_featbuf_batch_t *h)
{
    tg_featbuf_t *fb = tg_featbuf_batch_owner(h);
    size_t nl;
    const tg_featbuf_load_t *ld = tg_featbuf_batch_loads(h, &nl);
    for (size_t k = 0; k < nl; k++) {
        float *row = tg_featbuf_row(fb, ld[k].slot);
        row[0] = (float)ld[k].node;
        row[1] = -(float)ld[k].node;
        TG_CHECK_OK(tg_featbuf_complete(h, k, 0));
    }
}

/* One batch through the buffer: acquire (never blocking), load, wait, check rows, release.
 * Returns the number of loads. */
static int run_batch(tg_featbuf_batch_t *h, const uint64_t *nodes, size_t n)
{
    tg_featbuf_t *fb = tg_featbuf_batch_owner(h);
    int k = tg_featbuf_acquire(h, nodes, n, TG_FEATBUF_NOWAIT);
    TG_CHECK(k >= 0);
    if (k < 0) return 0;
    load_all(h);
    TG_CHECK_OK(tg_featbuf_wait(h));
    size_t m;
    const uint32_t *slots = tg_featbuf_batch_slots(h, &m);
    for (size_t i = 0; i < m; i++)
        TG_CHECK(((const float *)tg_featbuf_row(fb, slots[i]))[0] == (float)nodes[i]);
    TG_CHECK_OK(tg_featbuf_release(h));
    return k;
}

static int resident(tg_featbuf_t *fb, uint64_t node)
{
    int st = -1;
    return tg_featbuf_lookup(fb, node, NULL, NULL, &st) && st == TG_FEATBUF_VALID;
}

/* ---------------------------------------------------------------- the simulator */

/* A trace: K batches of distinct nodes < V; batch b = nodes[off[b] .. off[b + 1]). */
typedef struct {
    uint32_t K, V;
    uint32_t *off;
    uint64_t *nodes;
    uint32_t *next; /* (K x V) next[b * V + v]: first batch > b that uses v, K if none */
} trace_t;

static void trace_make(trace_t *t, tg_rng_t *r, uint32_t K, uint32_t V, uint32_t mb, int skew)
{
    t->K = K;
    t->V = V;
    t->off = malloc(sizeof *t->off * (K + 1));
    t->nodes = malloc(sizeof *t->nodes * (size_t)K * mb);
    t->next = malloc(sizeof *t->next * (size_t)K * V);
    t->off[0] = 0;
    uint8_t *in = calloc(V, 1);
    for (uint32_t b = 0; b < K; b++) {
        uint32_t n = 1 + (uint32_t)tg_rng_below(r, mb), o = t->off[b];
        for (uint32_t i = 0; i < n;) {
            /* skew: a third of the picks from a hot eighth, so rows come back at all distances */
            uint64_t v =
                skew && tg_rng_below(r, 3) == 0 ? tg_rng_below(r, V / 8 + 1) : tg_rng_below(r, V);
            if (in[v]) continue;
            in[v] = 1;
            t->nodes[o + i++] = v;
        }
        for (uint32_t i = 0; i < n; i++)
            in[t->nodes[o + i]] = 0;
        t->off[b + 1] = o + n;
    }
    free(in);
    for (uint32_t v = 0; v < V; v++)
        t->next[(size_t)(K - 1) * V + v] = K;
    for (uint32_t b = K - 1; b-- > 0;) {
        memcpy(&t->next[(size_t)b * V], &t->next[(size_t)(b + 1) * V], sizeof *t->next * V);
        for (uint32_t i = t->off[b + 1]; i < t->off[b + 2]; i++)
            t->next[(size_t)b * V + t->nodes[i]] = b + 1;
    }
}

static void trace_free(trace_t *t)
{
    free(t->off);
    free(t->nodes);
    free(t->next);
}

typedef struct {
    uint64_t misses, evictions, protected_evictions;
} sim_result_t;

/* The policy by brute force: C slots, one batch in flight, batches b + 1 .. b + L known while
 * batch b acquires. Per miss with no free slot, scan every resident row not in batch b:
 *   LRU       the least recently released
 *   NEXT_USE  the farthest next use within the known batches (none = farthest), ties least
 *             recently released; protected = it has a known next use
 *   WINDOW    protected = used by batch b .. b + window - 1 (and known); the least recently
 *             released unprotected row, else the least recently released protected one
 * Release order: positions of a batch in order, batch after batch. */
static sim_result_t simulate(const trace_t *t, uint32_t C, tg_featbuf_policy_t pol, uint32_t L,
                             uint32_t window)
{
    sim_result_t res = {0};
    uint8_t *res_in = calloc(t->V, 1), *cur = calloc(t->V, 1);
    uint64_t *tick = calloc(t->V, sizeof *tick), T = 0;
    uint32_t size = 0;
    for (uint32_t b = 0; b < t->K; b++) {
        for (uint32_t i = t->off[b]; i < t->off[b + 1]; i++)
            cur[t->nodes[i]] = 1;
        uint64_t horizon = (uint64_t)b + L, wend = (uint64_t)b + window - 1;
        for (uint32_t i = t->off[b]; i < t->off[b + 1]; i++) {
            uint64_t v = t->nodes[i];
            if (res_in[v]) continue;
            res.misses++;
            if (size < C) {
                res_in[v] = 1;
                size++;
                continue;
            }
            uint64_t best = NEVER, best_key = 0, best_tick = NEVER;
            int best_prot = 0;
            for (uint64_t u = 0; u < t->V; u++) {
                if (!res_in[u] || cur[u]) continue;
                uint64_t nx = t->next[(size_t)b * t->V + u];
                int known = nx < t->K && nx <= horizon;
                uint64_t key; /* smaller goes first */
                int prot;
                if (pol == TG_FEATBUF_NEXT_USE) {
                    key = known ? NEVER - nx : 0;
                    prot = known;
                } else if (pol == TG_FEATBUF_WINDOW) {
                    prot = known && nx <= wend;
                    key = (uint64_t)prot;
                } else {
                    key = 0;
                    prot = 0;
                }
                if (best == NEVER || key < best_key || (key == best_key && tick[u] < best_tick)) {
                    best = u;
                    best_key = key;
                    best_tick = tick[u];
                    best_prot = prot;
                }
            }
            res_in[best] = 0;
            res_in[v] = 1;
            res.evictions++;
            res.protected_evictions += (uint64_t)best_prot;
        }
        for (uint32_t i = t->off[b]; i < t->off[b + 1]; i++) {
            cur[t->nodes[i]] = 0;
            tick[t->nodes[i]] = ++T;
        }
    }
    free(res_in);
    free(cur);
    free(tick);
    return res;
}

/* The same trace through a real buffer of C slots: announce batch b + L, acquire b, load, wait,
 * done b, release b (L = K: everything announced up front). */
static sim_result_t run_buffer(const trace_t *t, uint32_t mb, uint32_t C, tg_featbuf_policy_t pol,
                               uint32_t L, uint32_t window)
{
    tg_featbuf_opts_t o = popts(t->V, mb, C, pol);
    o.window = window;
    o.future_positions = (uint32_t)TG_MIN((uint64_t)(L + 1) * mb, (uint64_t)t->K * mb);
    tg_featbuf_t *fb;
    tg_featbuf_batch_t *h;
    sim_result_t res = {0};
    if (tg_featbuf_create(&fb, &o, NULL) < 0 || tg_featbuf_batch_create(fb, &h) < 0) {
        TG_FAIL("create: %s", tg_errmsg());
        return res;
    }
    uint32_t announced = 0;
    for (uint32_t b = 0; b < t->K; b++) {
        for (; announced < t->K && announced <= (uint64_t)b + L; announced++)
            TG_CHECK_OK(tg_featbuf_future_add(fb, announced, t->nodes + t->off[announced],
                                              t->off[announced + 1] - t->off[announced]));
        int k = tg_featbuf_acquire(h, t->nodes + t->off[b], t->off[b + 1] - t->off[b],
                                   TG_FEATBUF_NOWAIT);
        TG_CHECK(k >= 0);
        load_all(h);
        TG_CHECK_OK(tg_featbuf_wait(h));
        TG_CHECK_OK(tg_featbuf_future_done(fb, b));
        TG_CHECK_OK(tg_featbuf_release(h));
        if (b % 16 == 0 || b + 1 == t->K) TG_CHECK_OK(tg_featbuf_check(fb));
    }
    tg_featbuf_stats_t st;
    tg_featbuf_stats(fb, &st, 0);
    res = (sim_result_t){st.misses, st.evictions, st.evictions_protected};
    TG_CHECK_EQ_U64(st.future_positions, 0); /* everything done: the trace is empty */
    tg_featbuf_batch_destroy(h);
    tg_featbuf_destroy(fb);
    return res;
}

static void same(const char *what, sim_result_t buf, sim_result_t sim)
{
    if (buf.misses != sim.misses || buf.evictions != sim.evictions ||
        buf.protected_evictions != sim.protected_evictions)
        TG_FAIL("%s: buffer %llu misses, %llu evictions (%llu protected); simulator %llu, %llu "
                "(%llu)",
                what, (unsigned long long)buf.misses, (unsigned long long)buf.evictions,
                (unsigned long long)buf.protected_evictions, (unsigned long long)sim.misses,
                (unsigned long long)sim.evictions, (unsigned long long)sim.protected_evictions);
}

/* ---------------------------------------------------------------- NEXT_USE, WINDOW, LRU vs sim */

TG_TEST(policies_match_simulator)
{
    enum { K = 240, MB = 10 };
    static const uint32_t pools[] = {40, 120};
    static const uint32_t extra[] = {0, 7, 30}; /* slots above the minimum MB */
    tg_rng_t r;
    tg_rng_seed(&r, 2024);
    uint64_t nu_total = 0, lru_total = 0, win_total = 0;
    for (int trial = 0; trial < 6; trial++) {
        trace_t t;
        trace_make(&t, &r, K, pools[trial % 2], MB, trial & 2);
        for (size_t e = 0; e < sizeof extra / sizeof *extra; e++) {
            uint32_t C = MB + extra[e];
            char what[96];
            sim_result_t lru = run_buffer(&t, MB, C, TG_FEATBUF_LRU, 0, 1);
            snprintf(what, sizeof what, "trial %d, %u slots: lru", trial, C);
            same(what, lru, simulate(&t, C, TG_FEATBUF_LRU, 0, 1));
            lru_total += lru.misses;
            static const uint32_t looks[] = {K, 3, 1};
            for (size_t l = 0; l < sizeof looks / sizeof *looks; l++) {
                uint32_t L = looks[l];
                sim_result_t nu = run_buffer(&t, MB, C, TG_FEATBUF_NEXT_USE, L, 1);
                snprintf(what, sizeof what, "trial %d, %u slots, look-ahead %u: next_use", trial, C,
                         L);
                same(what, nu, simulate(&t, C, TG_FEATBUF_NEXT_USE, L, 1));
                /* Belady with the whole future: never more misses than LRU */
                if (L == K) {
                    TG_CHECK(nu.misses <= lru.misses);
                    nu_total += nu.misses;
                }
                for (uint32_t w = 1; w <= 4; w += 3) {
                    sim_result_t win = run_buffer(&t, MB, C, TG_FEATBUF_WINDOW, L, w);
                    snprintf(what, sizeof what, "trial %d, %u slots, look-ahead %u: window %u",
                             trial, C, L, w);
                    same(what, win, simulate(&t, C, TG_FEATBUF_WINDOW, L, w));
                    if (L == K && w == 4) win_total += win.misses;
                }
            }
        }
        trace_free(&t);
    }
    fprintf(stderr, "  misses over all trials: lru %llu, window(4) %llu, next_use %llu\n",
            (unsigned long long)lru_total, (unsigned long long)win_total,
            (unsigned long long)nu_total);
    TG_CHECK(nu_total < lru_total);
}

/* Exact victims on small cases. */
TG_TEST(next_use_victims)
{
    /* rows never announced again go first, least recently released first */
    tg_featbuf_opts_t o = popts(100, 2, 4, TG_FEATBUF_NEXT_USE);
    tg_featbuf_t *fb;
    tg_featbuf_batch_t *h;
    TG_CHECK_OK(tg_featbuf_create(&fb, &o, NULL));
    TG_CHECK_OK(tg_featbuf_batch_create(fb, &h));
    uint64_t b0[] = {1, 2}, b1[] = {3, 4}, b2[] = {5}, b3[] = {1}, b4[] = {3};
    TG_CHECK_OK(tg_featbuf_future_add(fb, 10, b0, 2));
    TG_CHECK_OK(tg_featbuf_future_add(fb, 11, b1, 2));
    TG_CHECK_OK(tg_featbuf_future_add(fb, 12, b2, 1));
    TG_CHECK_OK(tg_featbuf_future_add(fb, 13, b3, 1));
    TG_CHECK_OK(tg_featbuf_future_add(fb, 14, b4, 1));
    run_batch(h, b0, 2);
    TG_CHECK_OK(tg_featbuf_future_done(fb, 10));
    run_batch(h, b1, 2);
    TG_CHECK_OK(tg_featbuf_future_done(fb, 11));
    /* standby 1 (next 13), 2 (never), 3 (next 14), 4 (never), released in that order: 5 evicts 2 */
    TG_CHECK(run_batch(h, b2, 1) == 1);
    TG_CHECK(!resident(fb, 2) && resident(fb, 4) && resident(fb, 1) && resident(fb, 3));
    TG_CHECK_OK(tg_featbuf_future_done(fb, 12));
    /* unannounced batches: 4, then 5 and 6, then 7 ... go; 1 and 3 stay throughout */
    uint64_t c0[] = {6}, c1[] = {7, 8}, c2[] = {9}, c3[] = {10, 11};
    TG_CHECK(run_batch(h, c0, 1) == 1);
    TG_CHECK(!resident(fb, 4) && resident(fb, 5));
    TG_CHECK(run_batch(h, c1, 2) == 2);
    TG_CHECK(!resident(fb, 5) && !resident(fb, 6));
    TG_CHECK(run_batch(h, c2, 1) == 1);
    TG_CHECK(!resident(fb, 7) && resident(fb, 8));
    TG_CHECK(run_batch(h, c3, 2) == 2);
    TG_CHECK(!resident(fb, 8) && !resident(fb, 9));
    TG_CHECK(resident(fb, 1) && resident(fb, 3));
    tg_featbuf_stats_t st;
    tg_featbuf_stats(fb, &st, 0);
    TG_CHECK_EQ_U64(st.evictions, 7); /* 2, 4, 5, 6, 7, 8, 9 */
    TG_CHECK_EQ_U64(st.evictions_protected, 0);
    TG_CHECK_OK(tg_featbuf_check(fb));
    tg_featbuf_batch_destroy(h);
    tg_featbuf_destroy(fb);

    /* among announced rows the farthest goes (a protected eviction: every candidate is used
     * again) */
    o = popts(100, 4, 4, TG_FEATBUF_NEXT_USE);
    TG_CHECK_OK(tg_featbuf_create(&fb, &o, NULL));
    TG_CHECK_OK(tg_featbuf_batch_create(fb, &h));
    uint64_t d0[] = {1, 2, 3, 4}, d1[] = {5}, d2[] = {3}, d3[] = {1}, d4[] = {4}, d5[] = {2};
    const uint64_t *ds[] = {d0, d1, d2, d3, d4, d5};
    size_t dn[] = {4, 1, 1, 1, 1, 1};
    for (int i = 0; i < 6; i++)
        TG_CHECK_OK(tg_featbuf_future_add(fb, (uint64_t)i, ds[i], dn[i]));
    run_batch(h, d0, 4);
    TG_CHECK_OK(tg_featbuf_future_done(fb, 0)); /* next uses: 1 at 3, 2 at 5, 3 at 2, 4 at 4 */
    TG_CHECK(run_batch(h, d1, 1) == 1);
    TG_CHECK(!resident(fb, 2));
    tg_featbuf_stats(fb, &st, 0);
    TG_CHECK_EQ_U64(st.evictions_protected, 1);
    TG_CHECK_OK(tg_featbuf_future_done(fb, 1)); /* 5: never again */
    TG_CHECK(run_batch(h, d2, 1) == 0);
    TG_CHECK_OK(tg_featbuf_future_done(fb, 2)); /* 3: never again, released after 5 */
    uint64_t e0[] = {7};
    TG_CHECK(run_batch(h, e0, 1) == 1); /* 5 and 3 are never used: 5, released first, goes */
    TG_CHECK(!resident(fb, 5) && resident(fb, 3) && resident(fb, 1) && resident(fb, 4));
    tg_featbuf_stats(fb, &st, 0);
    TG_CHECK_EQ_U64(st.evictions_protected, 1);
    TG_CHECK_OK(tg_featbuf_check(fb));
    tg_featbuf_batch_destroy(h);
    tg_featbuf_destroy(fb);
}

/* WINDOW: every candidate protected - acquire still succeeds at once (the least recently
 * released protected row goes), counted as a protected eviction. */
TG_TEST(window_never_blocks)
{
    tg_featbuf_opts_t o = popts(100, 2, 2, TG_FEATBUF_WINDOW);
    o.window = 3;
    tg_featbuf_t *fb;
    tg_featbuf_batch_t *h;
    TG_CHECK_OK(tg_featbuf_create(&fb, &o, NULL));
    TG_CHECK_OK(tg_featbuf_batch_create(fb, &h));
    uint64_t a[] = {1, 2}, b[] = {3}, c[] = {1, 2};
    TG_CHECK_OK(tg_featbuf_future_add(fb, 0, a, 2));
    TG_CHECK_OK(tg_featbuf_future_add(fb, 1, b, 1));
    TG_CHECK_OK(tg_featbuf_future_add(fb, 2, c, 2));
    run_batch(h, a, 2);
    TG_CHECK_OK(tg_featbuf_future_done(fb, 0));
    /* 1 and 2 are needed by batch 2, inside the window: both protected, 3 must still load */
    TG_CHECK(run_batch(h, b, 1) == 1);
    TG_CHECK(!resident(fb, 1) && resident(fb, 2));
    tg_featbuf_stats_t st;
    tg_featbuf_stats(fb, &st, 0);
    TG_CHECK_EQ_U64(st.evictions, 1);
    TG_CHECK_EQ_U64(st.evictions_protected, 1);
    TG_CHECK_EQ_U64(st.future_batches, 2);
    TG_CHECK_OK(tg_featbuf_future_done(fb, 1));
    /* 3 is not needed again, 2 is: 1 evicts 3 */
    TG_CHECK(run_batch(h, c, 2) == 1);
    TG_CHECK(!resident(fb, 3));
    TG_CHECK_OK(tg_featbuf_future_done(fb, 2));
    tg_featbuf_stats(fb, &st, 0);
    TG_CHECK_EQ_U64(st.evictions_protected, 1);
    TG_CHECK_EQ_U64(st.future_batches, 0);
    TG_CHECK_OK(tg_featbuf_check(fb));
    tg_featbuf_batch_destroy(h);
    tg_featbuf_destroy(fb);
}

/* WINDOW: a random trace where, before every acquire, the test lists the candidates and which
 * are needed within the window; the rows evicted by the acquire must be unprotected ones as long
 * as any unprotected candidate was there. */
TG_TEST(window_protects_rows_in_window)
{
    enum { K = 300, MB = 8, V = 64, C = 12, W = 5 };
    tg_rng_t r;
    tg_rng_seed(&r, 77);
    trace_t t;
    trace_make(&t, &r, K, V, MB, 1);
    tg_featbuf_opts_t o = popts(V, MB, C, TG_FEATBUF_WINDOW);
    o.window = W;
    o.future_positions = (W + 2) * MB;
    tg_featbuf_t *fb;
    tg_featbuf_batch_t *h;
    TG_CHECK_OK(tg_featbuf_create(&fb, &o, NULL));
    TG_CHECK_OK(tg_featbuf_batch_create(fb, &h));
    uint32_t announced = 0, bad = 0, forced = 0;
    for (uint32_t b = 0; b < K; b++) {
        for (; announced < K && announced <= b + W; announced++)
            TG_CHECK_OK(tg_featbuf_future_add(fb, announced, t.nodes + t.off[announced],
                                              t.off[announced + 1] - t.off[announced]));
        uint8_t cand[V] = {0}, prot[V] = {0}, cur[V] = {0};
        for (uint32_t i = t.off[b]; i < t.off[b + 1]; i++)
            cur[t.nodes[i]] = 1;
        for (uint32_t d = b; d < b + W && d < K; d++)
            for (uint32_t i = t.off[d]; i < t.off[d + 1]; i++)
                prot[t.nodes[i]] = 1;
        uint32_t unprot = 0;
        for (uint64_t v = 0; v < V; v++) {
            cand[v] = !cur[v] && resident(fb, v);
            unprot += cand[v] && !prot[v];
        }
        int k = tg_featbuf_acquire(h, t.nodes + t.off[b], t.off[b + 1] - t.off[b], 0);
        uint32_t evicted_unprot = 0, evicted_prot = 0;
        for (uint64_t v = 0; v < V; v++)
            if (cand[v] && !resident(fb, v)) {
                if (prot[v])
                    evicted_prot++;
                else
                    evicted_unprot++;
            }
        /* protected rows go only once every unprotected candidate has gone */
        if (evicted_prot && evicted_unprot < unprot) bad++;
        forced += evicted_prot;
        TG_CHECK(k >= 0);
        load_all(h);
        TG_CHECK_OK(tg_featbuf_wait(h));
        TG_CHECK_OK(tg_featbuf_future_done(fb, b));
        TG_CHECK_OK(tg_featbuf_release(h));
        TG_CHECK_OK(tg_featbuf_check(fb));
    }
    TG_CHECK(bad == 0);
    tg_featbuf_stats_t st;
    tg_featbuf_stats(fb, &st, 0);
    TG_CHECK_EQ_U64(st.evictions_protected, forced);
    fprintf(stderr, "  %llu evictions, %u of protected rows (no unprotected one left)\n",
            (unsigned long long)st.evictions, forced);
    trace_free(&t);
    tg_featbuf_batch_destroy(h);
    tg_featbuf_destroy(fb);
}

/* ---------------------------------------------------------------- STATIC */

TG_TEST(static_pinned_rows_stay)
{
    enum { MB = 4, V = 200 };
    /* 4 slots minimum + 6: at most 6 pinned */
    uint64_t pins[] = {10, 11, 12, 13, 14, 15, 10}; /* the repeat is ignored */
    tg_featbuf_opts_t o = popts(V, MB, 10, TG_FEATBUF_STATIC);
    o.pinned = pins;
    o.num_pinned = 7;
    tg_featbuf_t *fb;
    TG_CHECK_OK(tg_featbuf_create(&fb, &o, NULL));
    TG_CHECK_EQ_U64(tg_featbuf_pin_capacity(fb), 6);
    tg_featbuf_batch_t *h;
    TG_CHECK_OK(tg_featbuf_batch_create(fb, &h));

    /* too many: refused at create, and by tg_featbuf_pin, with the numbers */
    uint64_t many[] = {1, 2, 3, 4, 5, 6, 7};
    tg_featbuf_opts_t big = o;
    big.pinned = many;
    TG_CHECK_ERR(tg_featbuf_create(&(tg_featbuf_t *){NULL}, &big, NULL),
                 "pinned set of 7 nodes leaves 3 of 10 slots");
    TG_CHECK(strstr(tg_errmsg(), "below the minimum 4") != NULL);
    TG_CHECK(strstr(tg_errmsg(), "pin at most 6") != NULL);
    TG_CHECK_ERR(tg_featbuf_pin(fb, many, 7), "pin at most 6");
    uint64_t oob[] = {V};
    TG_CHECK_ERR(tg_featbuf_pin(fb, oob, 1), "out of range");
    /* without num_slots the buffer makes room for the set */
    big.num_slots = 0;
    tg_featbuf_t *fb2;
    TG_CHECK_OK(tg_featbuf_create(&fb2, &big, NULL));
    TG_CHECK_EQ_U64(tg_featbuf_num_slots(fb2), 4 + 7);
    tg_featbuf_destroy(fb2);
    /* other policies take no pinned set */
    big.policy = TG_FEATBUF_LRU;
    TG_CHECK_ERR(tg_featbuf_create(&fb2, &big, NULL), "needs policy static");

    /* preload: the 6 pinned rows, in node order, at most MB per round */
    int k = tg_featbuf_preload(h);
    TG_CHECK(k == 4);
    size_t nl;
    const tg_featbuf_load_t *ld = tg_featbuf_batch_loads(h, &nl);
    for (size_t i = 0; i < nl; i++)
        TG_CHECK(ld[i].node == 10 + i && ld[i].pos == i);
    TG_CHECK_ERR(tg_featbuf_preload(h), "still acquired");
    load_all(h);
    TG_CHECK_OK(tg_featbuf_wait(h));
    TG_CHECK_OK(tg_featbuf_release(h));
    TG_CHECK(tg_featbuf_preload(h) == 2);
    load_all(h);
    TG_CHECK_OK(tg_featbuf_wait(h));
    TG_CHECK_OK(tg_featbuf_release(h));
    TG_CHECK(tg_featbuf_preload(h) == 0);
    TG_CHECK_OK(tg_featbuf_check(fb));
    tg_featbuf_stats_t st;
    tg_featbuf_stats(fb, &st, 1);
    TG_CHECK_EQ_U64(st.preloads, 6);
    TG_CHECK_EQ_U64(st.slots_pinned, 6);
    TG_CHECK_EQ_U64(st.pinned_nodes, 6);
    TG_CHECK_EQ_U64(st.lookups, 0);
    TG_CHECK_EQ_U64(st.slots_standby, 6);

    /* churn through 4 unpinned slots: the pinned rows are hits every time, never evicted */
    tg_rng_t r;
    tg_rng_seed(&r, 5);
    for (int it = 0; it < 500; it++) {
        /* one pinned row, three rows not seen for 60 batches */
        uint64_t u = 20 + (3 * (uint64_t)it) % 180;
        uint64_t nodes[MB] = {10 + tg_rng_below(&r, 6), u, u + 1, u + 2};
        TG_CHECK(run_batch(h, nodes, MB) == MB - 1);
        if (it % 50 == 0) TG_CHECK_OK(tg_featbuf_check(fb));
    }
    tg_featbuf_stats(fb, &st, 0);
    TG_CHECK_EQ_U64(st.hits, 500);
    TG_CHECK_EQ_U64(st.standby_hits, 500);
    TG_CHECK(st.evictions > 1000);
    for (uint64_t v = 10; v < 16; v++)
        TG_CHECK(resident(fb, v));

    /* re-pin: 10..12 leave the set (ordinary standby rows now, evicted by the next misses),
     * 13..15 stay; 16, 17 join and are read by the next preload pass */
    uint64_t pins2[] = {13, 14, 15, 16, 17};
    TG_CHECK_OK(tg_featbuf_pin(fb, pins2, 5));
    TG_CHECK_OK(tg_featbuf_check(fb));
    TG_CHECK(tg_featbuf_preload(h) == 2);
    load_all(h);
    TG_CHECK_OK(tg_featbuf_wait(h));
    TG_CHECK_OK(tg_featbuf_release(h));
    for (int it = 0; it < 20; it++) {
        uint64_t nodes[MB] = {100 + 4 * (uint64_t)it, 101 + 4 * (uint64_t)it,
                              102 + 4 * (uint64_t)it, 103 + 4 * (uint64_t)it};
        run_batch(h, nodes, MB);
    }
    for (uint64_t v = 10; v < 13; v++)
        TG_CHECK(!resident(fb, v));
    for (uint64_t v = 13; v < 18; v++)
        TG_CHECK(resident(fb, v));
    tg_featbuf_stats(fb, &st, 0);
    TG_CHECK_EQ_U64(st.slots_pinned, 5);
    TG_CHECK_EQ_U64(st.evictions_protected, 0);
    TG_CHECK_OK(tg_featbuf_check(fb));

    /* preload finds no slot while everything unpinned is referenced: -EAGAIN, never blocks */
    uint64_t pins3[] = {13, 14, 15, 16, 17, 18};
    TG_CHECK_OK(tg_featbuf_pin(fb, pins3, 6));
    uint64_t hold[] = {190, 191, 192, 193}, hold1[] = {194};
    tg_featbuf_batch_t *h2, *h3;
    TG_CHECK_OK(tg_featbuf_batch_create(fb, &h2));
    TG_CHECK_OK(tg_featbuf_batch_create(fb, &h3));
    TG_CHECK(tg_featbuf_acquire(h, hold, 4, TG_FEATBUF_NOWAIT) == 4);
    TG_CHECK(tg_featbuf_acquire(h3, hold1, 1, TG_FEATBUF_NOWAIT) == 1); /* the 5th unpinned */
    TG_CHECK_ERR(tg_featbuf_preload(h2), "no unreferenced slot");
    load_all(h);
    load_all(h3);
    TG_CHECK_OK(tg_featbuf_release(h));
    TG_CHECK_OK(tg_featbuf_release(h3));
    tg_featbuf_batch_destroy(h3);
    TG_CHECK(tg_featbuf_preload(h2) == 1);
    load_all(h2);
    TG_CHECK_OK(tg_featbuf_release(h2));
    TG_CHECK(resident(fb, 18));
    TG_CHECK_OK(tg_featbuf_check(fb));
    tg_featbuf_batch_destroy(h2);
    tg_featbuf_batch_destroy(h);
    tg_featbuf_destroy(fb);
}

/* A failed preload leaves the node unmapped and unpinned-in-slot; the next acquire reads it and
 * its row is pinned from then on. */
TG_TEST(static_failed_preload)
{
    uint64_t pins[] = {3, 4};
    tg_featbuf_opts_t o = popts(50, 2, 4, TG_FEATBUF_STATIC);
    o.pinned = pins;
    o.num_pinned = 2;
    tg_featbuf_t *fb;
    tg_featbuf_batch_t *h;
    TG_CHECK_OK(tg_featbuf_create(&fb, &o, NULL));
    TG_CHECK_OK(tg_featbuf_batch_create(fb, &h));
    TG_CHECK(tg_featbuf_preload(h) == 2);
    TG_CHECK_OK(tg_featbuf_complete(h, 0, 0));
    TG_CHECK_OK(tg_featbuf_complete(h, 1, -EIO));
    TG_CHECK(tg_featbuf_wait(h) == -EIO);
    TG_CHECK_OK(tg_featbuf_release(h));
    TG_CHECK(tg_featbuf_preload(h) == 0); /* one pass */
    TG_CHECK(resident(fb, 3) && !resident(fb, 4));
    TG_CHECK_OK(tg_featbuf_check(fb));
    uint64_t b[] = {4};
    TG_CHECK(run_batch(h, b, 1) == 1);
    tg_featbuf_stats_t st;
    tg_featbuf_stats(fb, &st, 0);
    TG_CHECK_EQ_U64(st.slots_pinned, 2);
    TG_CHECK_EQ_U64(st.load_errors, 1);
    /* the two free slots churn; 3 and 4 stay */
    for (uint64_t v = 10; v < 30; v += 2) {
        uint64_t nb[] = {v, v + 1};
        run_batch(h, nb, 2);
    }
    TG_CHECK(resident(fb, 3) && resident(fb, 4));
    TG_CHECK_OK(tg_featbuf_check(fb));
    tg_featbuf_batch_destroy(h);
    tg_featbuf_destroy(fb);
}

/* ---------------------------------------------------------------- options, trace errors, budget */

TG_TEST(options_and_trace_errors)
{
    tg_featbuf_t *fb;
    tg_featbuf_opts_t o = popts(100, 4, 8, TG_FEATBUF_NEXT_USE);
    o.future_positions = 0;
    TG_CHECK_ERR(tg_featbuf_create(&fb, &o, NULL), "needs future_positions");
    TG_CHECK_EQ_U64(tg_featbuf_bytes_for(&o, 8), 0);
    o = popts(100, 4, 8, TG_FEATBUF_WINDOW);
    o.window = 0;
    TG_CHECK_ERR(tg_featbuf_create(&fb, &o, NULL), "window >= 1");
    o = popts(100, 4, 8, (tg_featbuf_policy_t)9);
    TG_CHECK_ERR(tg_featbuf_create(&fb, &o, NULL), "unknown replacement policy 9");
    o = popts(100, 4, 8, TG_FEATBUF_STATIC);
    o.num_pinned = 3;
    TG_CHECK_ERR(tg_featbuf_create(&fb, &o, NULL), "without a pinned array");

    /* the policy's bytes are in bytes_for and charged to the budget */
    tg_featbuf_opts_t lru = popts(100, 4, 8, TG_FEATBUF_LRU);
    tg_featbuf_opts_t nu = popts(100, 4, 8, TG_FEATBUF_NEXT_USE);
    tg_featbuf_opts_t st_ = popts(100, 4, 8, TG_FEATBUF_STATIC);
    uint64_t b_lru = tg_featbuf_bytes_for(&lru, 64), b_nu = tg_featbuf_bytes_for(&nu, 64);
    TG_CHECK(b_nu >= b_lru + 64 * 28 + nu.future_positions * 48ull);
    TG_CHECK_EQ_U64(tg_featbuf_bytes_for(&st_, 64), b_lru + 8 * (64 - 4));
    TG_CHECK_EQ_U64(tg_featbuf_bytes_for(&st_, 4), tg_featbuf_bytes_for(&lru, 4));
    nu.future_positions *= 2;
    TG_CHECK(tg_featbuf_bytes_for(&nu, 64) > b_nu);
    tg_budget_t budget;
    tg_budget_init(&budget, 0);
    nu.num_slots = 64;
    TG_CHECK_OK(tg_featbuf_create(&fb, &nu, &budget));
    TG_CHECK_EQ_U64(budget.used, tg_featbuf_bytes_for(&nu, 64));
    TG_CHECK(tg_featbuf_policy(fb) == TG_FEATBUF_NEXT_USE);
    TG_CHECK(strcmp(tg_featbuf_policy_name(TG_FEATBUF_NEXT_USE), "next_use") == 0);

    /* the trace */
    uint64_t a[] = {1, 2, 3}, bad[] = {1, 100};
    TG_CHECK_OK(tg_featbuf_future_add(fb, 5, a, 3));
    TG_CHECK_ERR(tg_featbuf_future_add(fb, 5, a, 3), "ids must increase");
    TG_CHECK_ERR(tg_featbuf_future_add(fb, 6, bad, 2), "node 100 at position 1 is out of range");
    TG_CHECK_ERR(tg_featbuf_future_add(fb, UINT64_MAX, a, 1), "reserved");
    TG_CHECK_OK(tg_featbuf_future_add(fb, 6, NULL, 0)); /* an empty batch */
    TG_CHECK_ERR(tg_featbuf_future_done(fb, 9), "never announced");
    TG_CHECK_OK(tg_featbuf_future_done(fb, 6)); /* empty: nothing to do */
    /* future_positions 2 * 64 * 4 = 512: 3 held, 510 fit, 511 do not */
    uint64_t *many = calloc(511, sizeof *many);
    TG_CHECK_ERR(tg_featbuf_future_add(fb, 7, many, 511),
                 "does not fit: 3 of future_positions 512");
    TG_CHECK_OK(tg_featbuf_future_add(fb, 7, many, 509));
    TG_CHECK_OK(tg_featbuf_future_done(fb, 7)); /* done early: held until 5 is done */
    tg_featbuf_stats_t st;
    tg_featbuf_stats(fb, &st, 0);
    TG_CHECK_EQ_U64(st.future_positions, 512);
    TG_CHECK_EQ_U64(st.future_batches, 2);
    TG_CHECK_OK(tg_featbuf_check(fb));
    TG_CHECK_ERR(tg_featbuf_future_done(fb, 7), "twice");
    TG_CHECK_OK(tg_featbuf_future_done(fb, 5)); /* retires 5 and 7 */
    tg_featbuf_stats(fb, &st, 0);
    TG_CHECK_EQ_U64(st.future_positions, 0);
    TG_CHECK_EQ_U64(st.future_batches, 0);
    TG_CHECK_OK(tg_featbuf_future_done(fb, 5)); /* retired: indistinguishable from empty */
    /* the rings wrap: many small batches through a nearly full trace */
    for (uint64_t id = 10; id < 2000; id++) {
        uint64_t v[3] = {id % 97, (id * 7) % 97, (id * 13 + 1) % 97};
        TG_CHECK_OK(tg_featbuf_future_add(fb, id, v, 3));
        if (id >= 150) TG_CHECK_OK(tg_featbuf_future_done(fb, id - 140));
        if (id % 250 == 0) TG_CHECK_OK(tg_featbuf_check(fb));
    }
    TG_CHECK_OK(tg_featbuf_check(fb));
    free(many);
    tg_featbuf_destroy(fb);
    TG_CHECK_EQ_U64(budget.used, 0);
    tg_budget_destroy(&budget);

    /* policies without a trace ignore it; pin and preload need STATIC */
    TG_CHECK_OK(tg_featbuf_create(&fb, &lru, NULL));
    TG_CHECK_OK(tg_featbuf_future_add(fb, 3, a, 3));
    TG_CHECK_OK(tg_featbuf_future_add(fb, 1, a, 3));
    TG_CHECK_OK(tg_featbuf_future_done(fb, 77));
    TG_CHECK_ERR(tg_featbuf_pin(fb, a, 1), "needs policy static");
    TG_CHECK_EQ_U64(tg_featbuf_pin_capacity(fb), 0);
    tg_featbuf_batch_t *h;
    TG_CHECK_OK(tg_featbuf_batch_create(fb, &h));
    TG_CHECK_ERR(tg_featbuf_preload(h), "needs policy static");
    tg_featbuf_batch_destroy(h);
    tg_featbuf_destroy(fb);
}

int main(void)
{
    alarm(300);
    TG_RUN(policies_match_simulator);
    TG_RUN(next_use_victims);
    TG_RUN(window_never_blocks);
    TG_RUN(window_protects_rows_in_window);
    TG_RUN(static_pinned_rows_stay);
    TG_RUN(static_failed_preload);
    TG_RUN(options_and_trace_errors);
    return tg_test_done();
}
