/* store/changeset: Ginex's changeset precomputation against brute force. On random traces (sizes,
 * skew, empty iterations, cache sizes 0, 1, ... beyond the node count) the per-iteration misses
 * equal those of a brute-force Belady simulator (tests-only: each candidate's next access found
 * by scanning the iterations ahead), and the states' next-access keys equal as multisets (the
 * states themselves may differ among ties); replaying the changesets from the initial state
 * serves exactly the counted hits, in_pos names the row in the batch, out_ids were cached, the
 * size never exceeds the entries and the replayed state is the final one; never more misses than
 * LRU or FIFO of the same size from the same state. tg_cs_init_state's choice, the trace and
 * state checks, the budget, and a workspace left clean after every error. */
#include "tg_test.h"
#include "test_trace_common.h"

#include "tiergnn/changeset.h"

#include <errno.h>

#define NEVER UINT32_MAX

/* Next access of v after iteration i by scanning ahead, NEVER if none. */
static uint32_t next_access(const trace_t *tr, uint32_t v, uint32_t i)
{
    for (uint32_t j = i + 1; j < tr->iters; j++)
        if (tr->in[(size_t)j * tr->N + v]) return j;
    return NEVER;
}

static int cmp_u32(const void *a, const void *b)
{
    uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
    return x < y ? -1 : x > y;
}

static int cmp_key(const void *a, const void *b)
{
    const uint32_t *x = a, *y = b; /* (key, node) pairs */
    return x[0] != y[0] ? (x[0] < y[0] ? -1 : 1) : cmp_u32(x + 1, y + 1);
}

/* The sorted finite next-access keys (after iteration i) of the n nodes of set into keys;
 * returns how many. */
static uint32_t finite_keys(const trace_t *tr, uint32_t i, const uint32_t *set, uint32_t n,
                            uint32_t *keys)
{
    uint32_t m = 0;
    for (uint32_t k = 0; k < n; k++) {
        uint32_t key = next_access(tr, set[k], i);
        if (key != NEVER) keys[m++] = key;
    }
    qsort(keys, m, sizeof *keys, cmp_u32);
    return m;
}

/* Brute-force Belady with bypass: misses per iteration into misses[S]; the state before
 * iteration i+1 (after the update of i) as sorted finite keys into keys[i] (S rows of N + 1:
 * count, then keys). */
static void belady_brute(const trace_t *tr, uint64_t entries, const uint32_t *init, uint32_t n0,
                         uint64_t *misses, uint32_t *keys)
{
    uint32_t N = tr->N, n = n0;
    uint32_t *state = malloc((N + 1) * sizeof *state), *cand = malloc(2 * (2 * N + 1) * 4);
    unsigned char *cached = calloc(N + 1, 1);
    memcpy(state, init, n0 * sizeof *state);
    for (uint32_t k = 0; k < n0; k++)
        cached[init[k]] = 1;
    for (uint32_t i = 0; i < tr->iters; i++) {
        misses[i] = 0;
        for (uint64_t j = tr->off[i]; j < tr->off[i + 1]; j++)
            misses[i] += !cached[tr->ids[j]];
        if (i + 1 < tr->iters) {
            uint32_t c = 0;
            for (uint32_t k = 0; k < n; k++)
                cand[2 * c] = next_access(tr, state[k], i), cand[2 * c++ + 1] = state[k];
            for (uint64_t j = tr->off[i]; j < tr->off[i + 1]; j++) {
                uint32_t v = tr->ids[j], key = next_access(tr, v, i);
                if (!cached[v] && key != NEVER) cand[2 * c] = key, cand[2 * c++ + 1] = v;
            }
            qsort(cand, c, 2 * sizeof *cand, cmp_key);
            for (uint32_t k = 0; k < n; k++)
                cached[state[k]] = 0;
            n = (uint32_t)TG_MIN(c, entries);
            for (uint32_t k = 0; k < n; k++)
                state[k] = cand[2 * k + 1], cached[state[k]] = 1;
        }
        uint32_t *row = keys + (size_t)i * (N + 1);
        row[0] = finite_keys(tr, i, state, n, row + 1);
    }
    free(state);
    free(cand);
    free(cached);
}

/* Demand caching with LRU (fifo = 0) or FIFO (fifo = 1) eviction from init; total misses. */
static uint64_t demand_brute(const trace_t *tr, uint64_t entries, const uint32_t *init, uint32_t n0,
                             int fifo)
{
    uint64_t *stamp = calloc(tr->N + 1, sizeof *stamp), now = 1, total = 0, n = n0;
    unsigned char *cached = calloc(tr->N + 1, 1);
    for (uint32_t k = 0; k < n0; k++)
        cached[init[k]] = 1, stamp[init[k]] = now++;
    for (uint32_t i = 0; i < tr->iters; i++) {
        for (uint64_t j = tr->off[i]; j < tr->off[i + 1]; j++) {
            uint32_t v = tr->ids[j];
            if (cached[v]) {
                if (!fifo) stamp[v] = now++;
                continue;
            }
            total++;
            if (entries == 0) continue;
            if (n == entries) {
                uint32_t victim = 0;
                uint64_t best = UINT64_MAX;
                for (uint32_t u = 0; u < tr->N; u++)
                    if (cached[u] && stamp[u] < best) best = stamp[u], victim = u;
                cached[victim] = 0;
                n--;
            }
            cached[v] = 1, stamp[v] = now++, n++;
        }
    }
    free(stamp);
    free(cached);
    return total;
}

/* Replays cs from init over tr and checks it (see the top); returns the failures found. */
static int replay(const trace_t *tr, const tg_cs_t *cs, uint64_t entries, const uint32_t *init,
                  uint32_t n0, const uint32_t *want_keys)
{
    int bad = tg_test_failures;
    uint32_t N = tr->N, n = n0;
    unsigned char *cached = calloc(N + 1, 1);
    uint32_t *set = malloc((N + 1) * sizeof *set), *keys = malloc((N + 1) * sizeof *keys);
    for (uint32_t k = 0; k < n0; k++)
        cached[init[k]] = 1;
    TG_CHECK_EQ_U64(cs->iters, tr->iters);
    TG_CHECK(cs->in_off[0] == 0 && cs->out_off[0] == 0);
    uint64_t total = 0;
    for (uint32_t i = 0; i < tr->iters && bad == tg_test_failures; i++) {
        uint64_t miss = 0, a = tr->off[i];
        for (uint64_t j = a; j < tr->off[i + 1]; j++)
            miss += !cached[tr->ids[j]];
        TG_CHECK_EQ_U64(cs->misses[i], miss);
        total += miss;
        for (uint64_t k = cs->out_off[i]; k < cs->out_off[i + 1]; k++) {
            uint32_t v = cs->out_ids[k];
            if (v >= N || !cached[v])
                TG_FAIL("iteration %u: out %u not cached", i, v);
            else
                cached[v] = 2; /* out this iteration */
        }
        for (uint64_t k = cs->in_off[i]; k < cs->in_off[i + 1]; k++) {
            uint32_t v = cs->in_ids[k], p = cs->in_pos[k];
            if (v >= N || cached[v])
                TG_FAIL("iteration %u: in %u already cached", i, v);
            else if (p >= tr->off[i + 1] - a || tr->ids[a + p] != v)
                TG_FAIL("iteration %u: in %u at position %u of the batch", i, v, p);
            else if (next_access(tr, v, i) == NEVER)
                TG_FAIL("iteration %u: in %u never accessed again", i, v);
            else
                cached[v] = 3;
        }
        n = 0;
        for (uint32_t v = 0; v < N; v++) {
            cached[v] = cached[v] == 1 || cached[v] == 3;
            if (cached[v]) set[n++] = v;
        }
        if (n > entries)
            TG_FAIL("iteration %u: %u cached, %llu entries", i, n, (unsigned long long)entries);
        if (i + 1 == tr->iters)
            TG_CHECK(cs->in_off[i + 1] == cs->in_off[i] && cs->out_off[i + 1] == cs->out_off[i]);
        const uint32_t *want = want_keys + (size_t)i * (N + 1);
        uint32_t m = finite_keys(tr, i, set, n, keys);
        if (m != want[0] || memcmp(keys, want + 1, m * sizeof *keys))
            TG_FAIL("iteration %u: state's next accesses differ from brute force (%u vs %u keys)",
                    i, m, want[0]);
    }
    TG_CHECK_EQ_U64(cs->total_misses, total);
    if (bad == tg_test_failures) {
        TG_CHECK_EQ_U64(cs->num_final, n);
        for (uint64_t k = 0; k < cs->num_final && k < n; k++)
            TG_CHECK(cs->final[k] < N && cached[cs->final[k]]);
    }
    free(cached);
    free(set);
    free(keys);
    return tg_test_failures - bad;
}

/* A random init state of at most entries distinct nodes. */
static uint32_t random_init(tg_rng_t *r, uint32_t N, uint64_t entries, uint32_t *init)
{
    uint32_t want = (uint32_t)tg_rng_below(r, TG_MIN(entries, N) + 1), n = 0;
    unsigned char *used = calloc(N + 1, 1);
    while (n < want) {
        uint32_t v = (uint32_t)tg_rng_below(r, N);
        if (!used[v]) used[v] = 1, init[n++] = v;
    }
    free(used);
    return n;
}

/* One random case: compute from a random init (or tg_cs_init_state's), against brute force,
 * replayed, against LRU and FIFO. */
static void one_case(tg_cs_ws_t *ws, tg_rng_t *r, uint32_t N, uint32_t S, uint32_t max_len,
                     uint64_t entries, int use_init_state)
{
    trace_t tr =
        trace_random(r, N, S, max_len, tg_rng_below(r, 2) ? 4 : 0, (int)tg_rng_below(r, 2));
    tg_cs_trace_t t = view(&tr);
    uint32_t *init = malloc((N + 1) * sizeof *init), n0;
    if (use_init_state) {
        uint32_t *c0, prev_n = random_init(r, N, N, init);
        uint64_t m;
        TG_CHECK_OK(tg_cs_init_state(ws, &t, entries, init, prev_n, &c0, &m));
        n0 = (uint32_t)m;
        memcpy(init, c0, n0 * sizeof *init);
        free(c0);
    } else {
        n0 = random_init(r, N, entries, init);
    }
    uint64_t *misses = malloc((S + 1) * sizeof *misses);
    uint32_t *keys = malloc(((size_t)S * (N + 1) + 1) * sizeof *keys);
    belady_brute(&tr, entries, init, n0, misses, keys);
    tg_cs_t cs;
    TG_CHECK_OK(tg_cs_trace_check(ws, &t));
    TG_CHECK_OK(tg_cs_compute(ws, &t, entries, init, n0, &cs, NULL));
    uint64_t total = 0;
    for (uint32_t i = 0; i < S; i++) {
        if (cs.misses[i] != misses[i])
            TG_FAIL("N %u S %u entries %llu: iteration %u: %llu misses, brute force %llu", N, S,
                    (unsigned long long)entries, i, (unsigned long long)cs.misses[i],
                    (unsigned long long)misses[i]);
        total += misses[i];
    }
    replay(&tr, &cs, entries, init, n0, keys);
    uint64_t lru = demand_brute(&tr, entries, init, n0, 0);
    uint64_t fifo = demand_brute(&tr, entries, init, n0, 1);
    if (total > lru || total > fifo)
        TG_FAIL("N %u S %u entries %llu: %llu misses, LRU %llu, FIFO %llu", N, S,
                (unsigned long long)entries, (unsigned long long)total, (unsigned long long)lru,
                (unsigned long long)fifo);
    tg_cs_free(&cs);
    free(misses);
    free(keys);
    free(init);
    trace_free(&tr);
}

/* ---------------------------------------------------------------- tests */

TG_TEST(against_brute_force)
{
    int before = tg_test_failures;
    tg_rng_t r;
    tg_rng_seed(&r, 9);
    static const uint32_t Ns[] = {1, 2, 7, 40, 300};
    static const uint32_t Ss[] = {0, 1, 2, 3, 8, 25};
    tg_cs_ws_t *ws;
    TG_CHECK_OK(tg_cs_ws_create(&ws, 300, NULL));
    int cases = 0;
    for (int rep = 0; rep < 30; rep++)
        for (size_t a = 0; a < sizeof Ns / sizeof *Ns; a++)
            for (size_t b = 0; b < sizeof Ss / sizeof *Ss; b++) {
                uint32_t N = Ns[a], S = Ss[b];
                uint64_t sizes[] = {0, 1, 2, N / 4, N / 2, N, N + 5, (uint64_t)1 << 40};
                uint64_t e = sizes[tg_rng_below(&r, sizeof sizes / sizeof *sizes)];
                uint32_t len = (uint32_t)(1 + tg_rng_below(&r, N));
                if (tg_test_failures > before) return;
                one_case(ws, &r, N, S, len, e, rep & 1);
                cases++;
            }
    tg_cs_ws_destroy(ws);
    fprintf(stderr, "%d random cases\n", cases);
}

/* Batches larger than the cache, the cache nearly the working set: many evictions per
 * iteration, including rows the iteration's own misses would displace. */
TG_TEST(crowded)
{
    int before = tg_test_failures;
    tg_rng_t r;
    tg_rng_seed(&r, 10);
    tg_cs_ws_t *ws;
    TG_CHECK_OK(tg_cs_ws_create(&ws, 120, NULL));
    for (int rep = 0; rep < 200 && tg_test_failures == before; rep++)
        one_case(ws, &r, 120, 12, 90, 5 + tg_rng_below(&r, 60), rep & 1);
    tg_cs_ws_destroy(ws);
}

/* The worked example: 5 nodes, 5 iterations of two ids (the paper's Fig. 12 shape), 2 entries. */
TG_TEST(small_example)
{
    uint64_t off[] = {0, 2, 4, 6, 8, 10};
    uint32_t ids[] = {3, 4, 0, 2, 3, 1, 0, 4, 3, 2};
    tg_cs_trace_t t = {.iters = 5, .off = off, .ids = ids};
    tg_cs_ws_t *ws;
    TG_CHECK_OK(tg_cs_ws_create(&ws, 5, NULL));
    uint32_t *c0;
    uint64_t n0;
    TG_CHECK_OK(tg_cs_init_state(ws, &t, 2, NULL, 0, &c0, &n0));
    TG_CHECK_EQ_U64(n0, 2);
    qsort(c0, 2, 4, cmp_u32);
    TG_CHECK(c0[0] == 3 && c0[1] == 4);
    tg_cs_t cs;
    TG_CHECK_OK(tg_cs_compute(ws, &t, 2, c0, n0, &cs, NULL));
    /* it 0: 3, 4 hit, next at 2 and 3. it 1: 0, 2 miss, next at 3 and 4: 0 ties with 4 (kept),
     * 2 is later. it 2: 3 hits (next 4), 1 misses and bypasses (never again). it 3: 4 hits (next
     * never), 0 misses (never again). it 4: 3 hits, 2 misses. */
    static const uint64_t want[] = {0, 2, 1, 1, 1};
    for (int i = 0; i < 5; i++)
        TG_CHECK_EQ_U64(cs.misses[i], want[i]);
    TG_CHECK_EQ_U64(cs.total_misses, 5);
    TG_CHECK_EQ_U64(cs.num_final, 2);
    tg_cs_free(&cs);
    free(c0);
    tg_cs_ws_destroy(ws);
}

/* tg_cs_init_state: the earliest first accesses, prev preferred among ties, at most entries,
 * nodes of prev not in the trace dropped. */
TG_TEST(init_state)
{
    int before = tg_test_failures;
    tg_rng_t r;
    tg_rng_seed(&r, 11);
    tg_cs_ws_t *ws;
    TG_CHECK_OK(tg_cs_ws_create(&ws, 200, NULL));
    for (int rep = 0; rep < 300 && tg_test_failures == before; rep++) {
        uint32_t N = 1 + (uint32_t)tg_rng_below(&r, 200), S = (uint32_t)tg_rng_below(&r, 8);
        trace_t tr =
            trace_random(&r, N, S, 1 + (uint32_t)tg_rng_below(&r, N), rep & 1 ? 4 : 0, rep & 2);
        tg_cs_trace_t t = view(&tr);
        uint32_t *prev = malloc((N + 1) * 4), np = random_init(&r, N, N, prev), *c0;
        uint64_t entries = tg_rng_below(&r, N + 3), n0;
        TG_CHECK_OK(tg_cs_init_state(ws, &t, entries, prev, np, &c0, &n0));
        uint32_t *first = malloc((N + 1) * 4), distinct = 0;
        unsigned char *isprev = calloc(N + 1, 1), *inc = calloc(N + 1, 1);
        for (uint32_t v = 0; v < N; v++)
            first[v] = NEVER;
        for (uint32_t i = S; i-- > 0;)
            for (uint64_t j = tr.off[i]; j < tr.off[i + 1]; j++)
                first[tr.ids[j]] = i;
        for (uint32_t v = 0; v < N; v++)
            distinct += first[v] != NEVER;
        for (uint32_t k = 0; k < np; k++)
            isprev[prev[k]] = 1;
        TG_CHECK_EQ_U64(n0, TG_MIN(entries, distinct));
        uint32_t F = 0;
        for (uint64_t k = 0; k < n0; k++) {
            uint32_t v = c0[k];
            TG_CHECK(v < N && !inc[v] && first[v] != NEVER);
            if (v >= N || inc[v] || first[v] == NEVER) break;
            inc[v] = 1;
            F = TG_MAX(F, first[v]);
        }
        int other_at_F = 0;
        for (uint32_t v = 0; v < N; v++)
            other_at_F |= inc[v] && first[v] == F && !isprev[v];
        for (uint32_t v = 0; v < N && n0; v++) {
            if (first[v] < F && !inc[v])
                TG_FAIL("node %u first accessed at %u < %u left out", v, first[v], F);
            if (first[v] == F && isprev[v] && !inc[v] && other_at_F)
                TG_FAIL("node %u of prev left out for a node not in prev at iteration %u", v, F);
        }
        free(c0);
        free(prev);
        free(first);
        free(isprev);
        free(inc);
        trace_free(&tr);
    }
    tg_cs_ws_destroy(ws);
}

/* A fixed trace and its result, to see that the workspace is clean after every error. */
static uint64_t reference_misses(tg_cs_ws_t *ws, const tg_cs_trace_t *t, uint64_t entries)
{
    tg_cs_t cs;
    uint64_t m = UINT64_MAX;
    if (tg_cs_compute(ws, t, entries, NULL, 0, &cs, NULL) == 0)
        m = cs.total_misses;
    else
        TG_FAIL("reference compute: %s", tg_errmsg());
    tg_cs_free(&cs);
    return m;
}

TG_TEST(errors)
{
    tg_rng_t r;
    tg_rng_seed(&r, 12);
    trace_t tr = trace_random(&r, 50, 10, 30, 0, 1);
    tg_cs_trace_t good = view(&tr);
    tg_cs_ws_t *ws;
    TG_CHECK_OK(tg_cs_ws_create(&ws, 50, NULL));
    uint64_t ref = reference_misses(ws, &good, 12);

    uint64_t off_bad0[] = {1, 2, 3}, off_dec[] = {0, 3, 2};
    uint32_t ids[] = {1, 2, 3, 4};
    tg_cs_trace_t t = {.iters = 2, .off = off_bad0, .ids = ids};
    tg_cs_t cs;
    uint32_t *c0;
    uint64_t n0;
    TG_CHECK_ERR(tg_cs_trace_check(ws, &t), "off[0] = 1");
    TG_CHECK_ERR(tg_cs_compute(ws, &t, 4, NULL, 0, &cs, NULL), "off[0] = 1");
    TG_CHECK_ERR(tg_cs_init_state(ws, &t, 4, NULL, 0, &c0, &n0), "off[0] = 1");
    t.off = off_dec;
    TG_CHECK_ERR(tg_cs_trace_check(ws, &t), "off[2] = 2 < off[1] = 3");
    TG_CHECK_ERR(tg_cs_compute(ws, &t, 4, NULL, 0, &cs, NULL), "non-decreasing");

    /* An id out of range, after valid ones (which must be unmarked again). */
    uint64_t off[] = {0, 3, 6};
    uint32_t far[] = {5, 6, 7, 8, 50, 9}, dup[] = {5, 6, 7, 8, 9, 8}, dup0[] = {5, 5, 7, 1, 2, 3};
    t = (tg_cs_trace_t){.iters = 2, .off = off, .ids = far};
    TG_CHECK_ERR(tg_cs_trace_check(ws, &t), "iteration 1 position 1: node 50, expected < 50");
    TG_CHECK_ERR(tg_cs_compute(ws, &t, 4, NULL, 0, &cs, NULL), "iteration 1 position 1: node 50");
    TG_CHECK_ERR(tg_cs_init_state(ws, &t, 10, NULL, 0, &c0, &n0), "node 50");
    TG_CHECK_EQ_U64(reference_misses(ws, &good, 12), ref);
    /* A duplicate within an iteration; the same id in two iterations is fine. */
    t.ids = dup;
    TG_CHECK_ERR(tg_cs_trace_check(ws, &t), "iteration 1: node 8 at positions 0 and 2");
    TG_CHECK_ERR(tg_cs_compute(ws, &t, 4, NULL, 0, &cs, NULL),
                 "iteration 1: node 8 at positions 0 and 2");
    TG_CHECK_ERR(tg_cs_compute(ws, &t, 0, NULL, 0, &cs, NULL), "node 8 at positions 0 and 2");
    t.ids = dup0;
    TG_CHECK_ERR(tg_cs_trace_check(ws, &t), "iteration 0: node 5 at positions 0 and 1");
    TG_CHECK_ERR(tg_cs_compute(ws, &t, 2, NULL, 0, &cs, NULL),
                 "iteration 0: node 5 at positions 0 and 1");
    TG_CHECK_EQ_U64(reference_misses(ws, &good, 12), ref);
    uint32_t cross[] = {5, 6, 7, 8, 5, 6};
    t.ids = cross;
    TG_CHECK_OK(tg_cs_trace_check(ws, &t));

    /* Initial states: an id out of range, twice, more than the entries; a bad prev. */
    uint32_t init_far[] = {1, 60}, init_dup[] = {1, 2, 1}, prev_far[] = {3, 51};
    TG_CHECK_ERR(tg_cs_compute(ws, &good, 4, init_far, 2, &cs, NULL),
                 "initial state entry 1: node 60");
    TG_CHECK_ERR(tg_cs_compute(ws, &good, 4, init_dup, 3, &cs, NULL),
                 "initial state entries 0 and 2 are both node 1");
    TG_CHECK_ERR(tg_cs_compute(ws, &good, 2, init_dup, 3, &cs, NULL), "more than the 2 entries");
    TG_CHECK_ERR(tg_cs_init_state(ws, &good, 4, prev_far, 2, &c0, &n0),
                 "previous state entry 1: node 51");
    TG_CHECK_EQ_U64(reference_misses(ws, &good, 12), ref);
    tg_cs_ws_destroy(ws);

    /* The budget: the workspace, then the compute's temporaries and output. */
    tg_budget_t b;
    tg_budget_init(&b, 399);
    TG_CHECK_ERR(tg_cs_ws_create(&ws, 50, &b), "changeset workspace");
    TG_CHECK_EQ_U64(b.used, 0);
    tg_budget_destroy(&b);
    tg_budget_init(&b, 400 + 100);
    TG_CHECK_OK(tg_cs_ws_create(&ws, 50, &b));
    TG_CHECK_EQ_U64(b.used, 400);
    TG_CHECK_ERR(tg_cs_compute(ws, &good, 12, NULL, 0, &cs, &b), "changeset temporaries");
    TG_CHECK(strstr(tg_errmsg(), "needs") != NULL); /* the bytes */
    TG_CHECK_EQ_U64(b.used, 400);
    /* Find the smallest budget that works: every smaller one fails cleanly. */
    uint64_t lim = 400;
    for (;; lim += 8) {
        b.limit = lim;
        tg_err_clear();
        int rc = tg_cs_compute(ws, &good, 12, NULL, 0, &cs, &b);
        if (rc == 0) break;
        TG_CHECK(rc == -ENOMEM && strstr(tg_errmsg(), "changeset") != NULL);
        TG_CHECK_EQ_U64(b.used, 400);
        if (b.used != 400) break;
    }
    TG_CHECK_EQ_U64(cs.total_misses, ref);
    TG_CHECK(b.used > 400 && b.used <= lim);
    tg_cs_free(&cs);
    TG_CHECK_EQ_U64(b.used, 400);
    tg_cs_ws_destroy(ws);
    TG_CHECK_EQ_U64(b.used, 0);
    tg_budget_destroy(&b);
    trace_free(&tr);
}

/* Zero nodes, zero iterations, an empty trace; freeing twice. */
TG_TEST(edges)
{
    tg_cs_ws_t *ws;
    TG_CHECK_OK(tg_cs_ws_create(&ws, 0, NULL));
    uint64_t off[] = {0, 0, 0};
    tg_cs_trace_t t = {.iters = 2, .off = off, .ids = NULL};
    tg_cs_t cs;
    TG_CHECK_OK(tg_cs_trace_check(ws, &t));
    TG_CHECK_OK(tg_cs_compute(ws, &t, 10, NULL, 0, &cs, NULL));
    TG_CHECK(cs.total_misses == 0 && cs.num_final == 0 && cs.in_off[2] == 0);
    tg_cs_free(&cs);
    tg_cs_free(&cs);
    t.iters = 0;
    TG_CHECK_OK(tg_cs_compute(ws, &t, 10, NULL, 0, &cs, NULL));
    tg_cs_free(&cs);
    tg_cs_ws_destroy(ws);
    TG_CHECK_ERR(tg_cs_ws_create(&ws, (uint64_t)1 << 32, NULL), "at most");
    /* No iterations: the final state is the initial one. */
    TG_CHECK_OK(tg_cs_ws_create(&ws, 10, NULL));
    uint32_t init[] = {4, 2, 9};
    TG_CHECK_OK(tg_cs_compute(ws, &t, 3, init, 3, &cs, NULL));
    TG_CHECK_EQ_U64(cs.num_final, 3);
    qsort(cs.final, 3, 4, cmp_u32);
    TG_CHECK(cs.final[0] == 2 && cs.final[1] == 4 && cs.final[2] == 9);
    tg_cs_free(&cs);
    tg_cs_ws_destroy(ws);
}

int main(void)
{
    TG_RUN(small_example);
    TG_RUN(against_brute_force);
    TG_RUN(crowded);
    TG_RUN(init_state);
    TG_RUN(errors);
    TG_RUN(edges);
    return tg_test_done();
}
