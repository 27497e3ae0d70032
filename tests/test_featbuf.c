/* store/featbuf: the GNNDrive feature buffer - reference counts, shared in-flight rows, LRU
 * eviction, waits, failed reads, admission (no deadlock), counters, and concurrent stress with a
 * fake reader whose every row is checked by a trainer thread. Every test runs once per
 * replacement policy: without a pinned set or an announced future, STATIC, NEXT_USE and WINDOW
 * must evict exactly as LRU; the threaded tests give them a pinned set and a future trace (with
 * a concurrent re-pin and out-of-order future_done), and tg_featbuf_check verifies the policy's
 * structures after them. tests/test_featbuf_policy.c tests what each policy decides.
 *
 * TG_FEATBUF_STRESS=k multiplies the rounds of the threaded tests (default 1: about a second). */
#include "tg_test.h"

#include "tiergnn/featbuf.h"

#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <unistd.h>

/* ---------------------------------------------------------------- helpers */

static tg_featbuf_policy_t g_policy; /* the policy of this round of the suite */

static int g_trace(void)
{
    return g_policy == TG_FEATBUF_NEXT_USE || g_policy == TG_FEATBUF_WINDOW;
}

static int stress_mult(void)
{
    const char *s = getenv("TG_FEATBUF_STRESS");
    int k = s ? atoi(s) : 1;
    return k < 1 ? 1 : k;
}

static tg_featbuf_opts_t opts(uint64_t num_nodes, uint32_t dim, uint32_t max_batch_nodes,
                              uint32_t max_batches, uint32_t num_slots, tg_featbuf_map_t map)
{
    return (tg_featbuf_opts_t){.num_nodes = num_nodes,
                               .feat_dim = dim,
                               .dtype = TG_F32,
                               .max_batch_nodes = max_batch_nodes,
                               .max_batches = max_batches,
                               .num_slots = num_slots,
                               .map = map,
                               .policy = g_policy,
                               .window = 3,
                               .future_positions = g_trace() ? 64 * max_batch_nodes : 0};
}

/* The value every row must hold: exact in f32 (< 2^24) and, modulo 1024, in f16. */
static float fval(uint64_t node, size_t j)
{
    return (float)((node * 131 + j * 7) % 100003);
}

static float fval16(uint64_t node, size_t j)
{
    return (float)((node * 13 + j) % 1024) - 512.0f;
}

/* The fake reader: poisons the slot, optionally yields (so that a premature reader would see the
 * poison), then writes the row of node. */
static void fake_read(tg_featbuf_t *fb, uint64_t node, uint32_t slot, int yield)
{
    size_t d = tg_featbuf_row_bytes(fb) / sizeof(float);
    float *row = tg_featbuf_row(fb, slot);
    memset(row, 0xff, d * sizeof(float));
    if (yield) sched_yield();
    for (size_t j = 0; j < d; j++)
        row[j] = fval(node, j);
}

/* Reads and completes every load of h (status 0). */
static void load_all(tg_featbuf_batch_t *h)
{
    tg_featbuf_t *fb = tg_featbuf_batch_owner(h);
    size_t nl;
    const tg_featbuf_load_t *ld = tg_featbuf_batch_loads(h, &nl);
    for (size_t k = 0; k < nl; k++) {
        fake_read(fb, ld[k].node, ld[k].slot, 0);
        TG_CHECK_OK(tg_featbuf_complete(h, k, 0));
    }
}

/* 1 if every row of the acquired batch nodes[0..n) equals fval. */
static int rows_ok(const tg_featbuf_batch_t *h, const uint64_t *nodes)
{
    tg_featbuf_t *fb = tg_featbuf_batch_owner(h);
    size_t n, d = tg_featbuf_row_bytes(fb) / sizeof(float);
    const uint32_t *slots = tg_featbuf_batch_slots(h, &n);
    for (size_t i = 0; i < n; i++) {
        const float *row = tg_featbuf_row(fb, slots[i]);
        for (size_t j = 0; j < d; j++)
            if (row[j] != fval(nodes[i], j)) return 0;
    }
    return 1;
}

static uint32_t refs_of(tg_featbuf_t *fb, uint64_t node)
{
    uint32_t r = 0;
    return tg_featbuf_lookup(fb, node, NULL, &r, NULL) ? r : UINT32_MAX;
}

static int state_of(tg_featbuf_t *fb, uint64_t node)
{
    int st = -1;
    tg_featbuf_lookup(fb, node, NULL, NULL, &st);
    return st;
}

static uint32_t slot_of(tg_featbuf_t *fb, uint64_t node)
{
    uint32_t s = UINT32_MAX;
    tg_featbuf_lookup(fb, node, &s, NULL, NULL);
    return s;
}

static void sleep_ms(int ms)
{
    usleep((useconds_t)ms * 1000);
}

/* ---------------------------------------------------------------- creation and budget */

TG_TEST(create_and_budget)
{
    tg_featbuf_t *fb;
    tg_featbuf_opts_t o = opts(1000, 8, 16, 2, 0, TG_FEATBUF_MAP_AUTO);

    tg_featbuf_opts_t bad = o;
    bad.feat_dim = 0;
    TG_CHECK_ERR(tg_featbuf_create(&fb, &bad, NULL), "bad options");
    bad = o;
    bad.slot_align = 48;
    TG_CHECK_ERR(tg_featbuf_create(&fb, &bad, NULL), "power of two");
    bad = o;
    bad.num_slots = 31;
    TG_CHECK_ERR(tg_featbuf_create(&fb, &bad, NULL), "below the minimum 32");
    bad = o;
    bad.max_batch_nodes = 1u << 20;
    bad.max_batches = 1u << 13;
    TG_CHECK_ERR(tg_featbuf_create(&fb, &bad, NULL), "exceeds");

    /* too small a budget: -ENOMEM naming the bytes needed for the minimum, nothing charged */
    uint64_t need = tg_featbuf_bytes_for(&o, 32);
    TG_CHECK(need > 32 * 32);
    TG_CHECK_EQ_U64(tg_featbuf_min_slots(&o), 32);
    tg_budget_t b;
    tg_budget_init(&b, need - 1);
    char num[32];
    snprintf(num, sizeof num, "needs %llu bytes", (unsigned long long)need);
    tg_err_clear();
    int rc = tg_featbuf_create(&fb, &o, &b);
    TG_CHECK(rc == -ENOMEM);
    TG_CHECK(strstr(tg_errmsg(), num) != NULL);
    if (getenv("TG_FEATBUF_SHOW")) fprintf(stderr, "  %s\n", tg_errmsg());
    TG_CHECK(strstr(tg_errmsg(), "feature buffer") != NULL);
    TG_CHECK(strstr(tg_errmsg(), "max_batch_nodes 16 x max_batches 2") != NULL);
    TG_CHECK_EQ_U64(b.used, 0);
    /* more slots than the minimum asked for: the message gives both amounts */
    tg_featbuf_opts_t more = o;
    more.num_slots = 64;
    char num64[48];
    snprintf(num64, sizeof num64, "64 slots need %llu bytes",
             (unsigned long long)tg_featbuf_bytes_for(&o, 64));
    TG_CHECK_ERR(tg_featbuf_create(&fb, &more, &b), num64);
    TG_CHECK(strstr(tg_errmsg(), num) != NULL);
    if (getenv("TG_FEATBUF_SHOW")) fprintf(stderr, "  %s\n", tg_errmsg());
    TG_CHECK_EQ_U64(b.used, 0);
    tg_budget_destroy(&b);

    /* exactly enough: the budget holds the buffer, then each handle */
    tg_budget_init(&b, need + 4096);
    TG_CHECK_OK(tg_featbuf_create(&fb, &o, &b));
    TG_CHECK_EQ_U64(b.used, need);
    TG_CHECK_EQ_U64(tg_featbuf_num_slots(fb), 32);
    TG_CHECK_EQ_U64(tg_featbuf_row_bytes(fb), 32);
    tg_featbuf_batch_t *h;
    TG_CHECK_OK(tg_featbuf_batch_create(fb, &h));
    TG_CHECK(b.used > need);
    TG_CHECK_EQ_U64(tg_featbuf_reserved_bytes(fb), b.used);
    void *base;
    size_t len;
    tg_featbuf_memory(fb, &base, &len);
    TG_CHECK(((uintptr_t)base & 4095) == 0);
    TG_CHECK_EQ_U64(len, 32 * 32);
    tg_featbuf_batch_destroy(h);
    tg_featbuf_destroy(fb);
    TG_CHECK_EQ_U64(b.used, 0);
    tg_budget_destroy(&b);

    /* mem_bytes: the largest slot count that fits; too little names the minimum's bytes */
    o.mem_bytes = 100000;
    TG_CHECK_OK(tg_featbuf_create(&fb, &o, NULL));
    uint32_t s = tg_featbuf_num_slots(fb);
    TG_CHECK(tg_featbuf_bytes_for(&o, s) <= o.mem_bytes);
    TG_CHECK(tg_featbuf_bytes_for(&o, s + 1) > o.mem_bytes);
    tg_featbuf_destroy(fb);
    o.mem_bytes = need - 1;
    TG_CHECK_ERR(tg_featbuf_create(&fb, &o, NULL), num);

    /* map choice: direct while 4 bytes per graph node cost no more than the hash */
    o = opts(64, 8, 16, 2, 0, TG_FEATBUF_MAP_AUTO);
    TG_CHECK_OK(tg_featbuf_create(&fb, &o, NULL));
    TG_CHECK(tg_featbuf_is_direct_map(fb));
    tg_featbuf_destroy(fb);
    o.num_nodes = 1000000;
    TG_CHECK_OK(tg_featbuf_create(&fb, &o, NULL));
    TG_CHECK(!tg_featbuf_is_direct_map(fb));
    tg_featbuf_destroy(fb);

    /* slot_align pads the stride */
    o = opts(100, 5, 4, 1, 0, TG_FEATBUF_MAP_AUTO);
    o.slot_align = 64;
    TG_CHECK_OK(tg_featbuf_create(&fb, &o, NULL));
    TG_CHECK_EQ_U64(tg_featbuf_row_bytes(fb), 20);
    TG_CHECK_EQ_U64(tg_featbuf_slot_stride(fb), 64);
    TG_CHECK(((uintptr_t)tg_featbuf_row(fb, 3) & 63) == 0);
    tg_featbuf_destroy(fb);
}

/* ---------------------------------------------------------------- reference counts */

static void refcounts_with(tg_featbuf_map_t map)
{
    tg_featbuf_t *fb;
    tg_featbuf_opts_t o = opts(100, 4, 4, 2, 0, map);
    TG_CHECK_OK(tg_featbuf_create(&fb, &o, NULL));
    TG_CHECK(tg_featbuf_is_direct_map(fb) == (map == TG_FEATBUF_MAP_DIRECT));
    tg_featbuf_batch_t *h1, *h2;
    TG_CHECK_OK(tg_featbuf_batch_create(fb, &h1));
    TG_CHECK_OK(tg_featbuf_batch_create(fb, &h2));

    uint64_t a[] = {1, 2, 3}, b[] = {2, 3, 4}, c[] = {5, 5, 6, 1};
    TG_CHECK(tg_featbuf_acquire(h1, a, 3, 0) == 3);
    for (int i = 0; i < 3; i++) {
        TG_CHECK_EQ_U64(refs_of(fb, a[i]), 1);
        TG_CHECK(state_of(fb, a[i]) == TG_FEATBUF_LOADING);
    }
    TG_CHECK_ERR(tg_featbuf_acquire(h1, a, 3, 0), "still acquired");
    load_all(h1);
    TG_CHECK_OK(tg_featbuf_wait(h1));
    TG_CHECK(rows_ok(h1, a));
    TG_CHECK(state_of(fb, 2) == TG_FEATBUF_VALID);

    TG_CHECK(tg_featbuf_acquire(h2, b, 3, 0) == 1); /* 2, 3 hit; 4 loads */
    TG_CHECK_EQ_U64(refs_of(fb, 2), 2);
    TG_CHECK_EQ_U64(refs_of(fb, 3), 2);
    TG_CHECK_EQ_U64(refs_of(fb, 4), 1);
    load_all(h2);
    TG_CHECK_OK(tg_featbuf_wait(h2));
    TG_CHECK(rows_ok(h2, b));
    TG_CHECK_OK(tg_featbuf_check(fb));

    TG_CHECK_OK(tg_featbuf_release(h1));
    TG_CHECK_ERR(tg_featbuf_release(h1), "not acquired");
    TG_CHECK_EQ_U64(refs_of(fb, 1), 0);
    TG_CHECK(state_of(fb, 1) == TG_FEATBUF_VALID); /* released rows stay mapped and valid */
    TG_CHECK_EQ_U64(refs_of(fb, 2), 1);
    TG_CHECK_EQ_U64(refs_of(fb, 3), 1);
    TG_CHECK_OK(tg_featbuf_release(h2));
    for (uint64_t v = 1; v <= 4; v++)
        TG_CHECK_EQ_U64(refs_of(fb, v), 0);

    /* a repeated node: one slot, one load, one reference per position */
    TG_CHECK(tg_featbuf_acquire(h1, c, 4, 0) == 2); /* 5 and 6 load; 1 revived from standby */
    size_t n;
    const uint32_t *sl = tg_featbuf_batch_slots(h1, &n);
    TG_CHECK_EQ_U64(n, 4);
    TG_CHECK(sl[0] == sl[1]);
    TG_CHECK_EQ_U64(refs_of(fb, 5), 2);
    TG_CHECK_EQ_U64(refs_of(fb, 1), 1);
    load_all(h1);
    TG_CHECK_OK(tg_featbuf_wait(h1));
    TG_CHECK(rows_ok(h1, c));
    TG_CHECK_OK(tg_featbuf_release(h1));
    TG_CHECK_EQ_U64(refs_of(fb, 5), 0);
    TG_CHECK_OK(tg_featbuf_check(fb));

    tg_featbuf_stats_t st;
    tg_featbuf_stats(fb, &st, 1);
    TG_CHECK_EQ_U64(st.acquires, 3);
    TG_CHECK_EQ_U64(st.releases, 3);
    TG_CHECK_EQ_U64(st.lookups, 10);
    TG_CHECK_EQ_U64(st.misses, 6);       /* 1 2 3 | 4 | 5 6 */
    TG_CHECK_EQ_U64(st.hits, 4);         /* 2 3 | 5 (repeat) 1 */
    TG_CHECK_EQ_U64(st.standby_hits, 1); /* 1 */
    TG_CHECK_EQ_U64(st.waits, 0);
    TG_CHECK_EQ_U64(st.evictions, 0);
    TG_CHECK_EQ_U64(st.slots_standby, 6);
    TG_CHECK_EQ_U64(st.slots_free, 2);
    TG_CHECK_EQ_U64(st.slots_referenced, 0);
    TG_CHECK_NEAR(tg_featbuf_hit_ratio(&st), 0.4, 1e-12);
    tg_featbuf_stats(fb, &st, 0);
    TG_CHECK_EQ_U64(st.lookups, 0); /* reset */
    TG_CHECK_EQ_U64(st.slots_standby, 6);

    /* bad input leaves the handle unacquired */
    uint64_t big[] = {1, 2, 3, 4, 5};
    TG_CHECK_ERR(tg_featbuf_acquire(h1, big, 5, 0), "exceeds max_batch_nodes 4");
    uint64_t oob[] = {1, 100};
    TG_CHECK_ERR(tg_featbuf_acquire(h1, oob, 2, 0), "node 100 at position 1 is out of range");
    TG_CHECK(tg_featbuf_acquire(h1, oob, 0, 0) == 0); /* an empty batch is fine */
    TG_CHECK_OK(tg_featbuf_wait(h1));
    TG_CHECK_OK(tg_featbuf_release(h1));
    TG_CHECK_OK(tg_featbuf_check(fb));

    tg_featbuf_batch_destroy(h1);
    tg_featbuf_batch_destroy(h2);
    tg_featbuf_destroy(fb);
}

TG_TEST(refcounts_direct)
{
    refcounts_with(TG_FEATBUF_MAP_DIRECT);
}

TG_TEST(refcounts_hash)
{
    refcounts_with(TG_FEATBUF_MAP_HASH);
}

/* ---------------------------------------------------------------- shared in-flight rows */

TG_TEST(shared_row_read_once)
{
    tg_featbuf_t *fb;
    tg_featbuf_opts_t o = opts(50, 4, 3, 2, 0, TG_FEATBUF_MAP_HASH);
    TG_CHECK_OK(tg_featbuf_create(&fb, &o, NULL));
    tg_featbuf_batch_t *h1, *h2;
    TG_CHECK_OK(tg_featbuf_batch_create(fb, &h1));
    TG_CHECK_OK(tg_featbuf_batch_create(fb, &h2));
    uint64_t a[] = {10, 11}, b[] = {11, 12};
    TG_CHECK(tg_featbuf_acquire(h1, a, 2, 0) == 2);
    TG_CHECK(tg_featbuf_acquire(h2, b, 2, 0) == 1); /* 11 is in flight for h1: not re-read */
    TG_CHECK_EQ_U64(tg_featbuf_batch_num_waits(h2), 1);
    size_t nl;
    const tg_featbuf_load_t *ld = tg_featbuf_batch_loads(h2, &nl);
    TG_CHECK(nl == 1 && ld[0].node == 12 && ld[0].pos == 1);
    TG_CHECK_EQ_U64(refs_of(fb, 11), 2);

    /* misuse is refused, not deadlocked or corrupted */
    TG_CHECK_ERR(tg_featbuf_wait(h2), "own loads outstanding");
    TG_CHECK(tg_featbuf_release(h2) == -EBUSY);
    TG_CHECK_ERR(tg_featbuf_complete(h2, 1, 0), "has 1 loads");
    TG_CHECK_ERR(tg_featbuf_complete(h2, 0, 5), "negative");
    float X[8];
    TG_CHECK_ERR(tg_featbuf_gather_f32(h2, X, NULL), "not all valid");

    load_all(h2);
    TG_CHECK_ERR(tg_featbuf_complete(h2, 0, 0), "completed twice");
    TG_CHECK_EQ_U64(tg_featbuf_batch_pending(h2), 0);
    TG_CHECK_EQ_U64(tg_featbuf_batch_pending(h1), 2);
    load_all(h1);
    TG_CHECK_OK(tg_featbuf_wait(h2));
    TG_CHECK(rows_ok(h2, b));
    TG_CHECK_OK(tg_featbuf_wait(h1));
    TG_CHECK(rows_ok(h1, a));
    /* release in the other order than acquisition */
    TG_CHECK_OK(tg_featbuf_release(h2));
    TG_CHECK_OK(tg_featbuf_release(h1));

    tg_featbuf_stats_t st;
    tg_featbuf_stats(fb, &st, 0);
    TG_CHECK_EQ_U64(st.misses, 3); /* 10, 11, 12: 11 read once */
    TG_CHECK_EQ_U64(st.waits, 1);
    TG_CHECK_EQ_U64(st.hits, 0);
    TG_CHECK_NEAR(tg_featbuf_hit_ratio(&st), 0.25, 1e-12);
    TG_CHECK_OK(tg_featbuf_check(fb));
    tg_featbuf_batch_destroy(h1);
    tg_featbuf_batch_destroy(h2);
    tg_featbuf_destroy(fb);
}

/* ---------------------------------------------------------------- LRU eviction */

static void acquire_loaded(tg_featbuf_batch_t *h, const uint64_t *nodes, size_t n)
{
    TG_CHECK(tg_featbuf_acquire(h, nodes, n, TG_FEATBUF_NOWAIT) >= 0);
    load_all(h);
    TG_CHECK_OK(tg_featbuf_wait(h));
    TG_CHECK(rows_ok(h, nodes));
}

TG_TEST(lru_eviction)
{
    tg_featbuf_t *fb;
    tg_featbuf_opts_t o = opts(100, 4, 2, 2, 0, TG_FEATBUF_MAP_HASH); /* 4 slots */
    TG_CHECK_OK(tg_featbuf_create(&fb, &o, NULL));
    tg_featbuf_batch_t *h, *hold;
    TG_CHECK_OK(tg_featbuf_batch_create(fb, &h));
    TG_CHECK_OK(tg_featbuf_batch_create(fb, &hold));

    /* release 1, 2, 3, 4 in that order: standby = [1 2 3 4] (oldest first) */
    for (uint64_t v = 1; v <= 4; v++) {
        acquire_loaded(h, &v, 1);
        TG_CHECK_OK(tg_featbuf_release(h));
    }
    /* reusing 2 costs no I/O and moves it to the tail: [1 3 4 2] */
    uint64_t v2 = 2;
    TG_CHECK(tg_featbuf_acquire(h, &v2, 1, 0) == 0);
    TG_CHECK_OK(tg_featbuf_wait(h));
    TG_CHECK(rows_ok(h, &v2));
    TG_CHECK_OK(tg_featbuf_release(h));

    /* 10 evicts the oldest, 1, and takes its slot */
    uint32_t s1 = slot_of(fb, 1);
    uint64_t v10 = 10;
    acquire_loaded(h, &v10, 1);
    TG_CHECK(slot_of(fb, 10) == s1);
    TG_CHECK(!tg_featbuf_lookup(fb, 1, NULL, NULL, NULL));
    TG_CHECK_OK(tg_featbuf_release(h)); /* [3 4 2 10] */

    /* a referenced row is never evicted: hold 3 (the oldest), then 11 evicts 4, 12 evicts 2 */
    uint64_t v3 = 3;
    acquire_loaded(hold, &v3, 1); /* [4 2 10] */
    uint64_t v11 = 11, v12 = 12;
    acquire_loaded(h, &v11, 1);
    TG_CHECK(!tg_featbuf_lookup(fb, 4, NULL, NULL, NULL));
    TG_CHECK_OK(tg_featbuf_release(h)); /* [2 10 11] */
    acquire_loaded(h, &v12, 1);
    TG_CHECK(!tg_featbuf_lookup(fb, 2, NULL, NULL, NULL));
    TG_CHECK(state_of(fb, 3) == TG_FEATBUF_VALID);
    TG_CHECK(rows_ok(hold, &v3));
    TG_CHECK_OK(tg_featbuf_release(h)); /* [10 11 12] */

    /* a batch never evicts a standby row it reuses itself: [20, 10] with 10 the oldest must
     * revive 10 and evict 11 for 20 */
    uint64_t pair[] = {20, 10};
    TG_CHECK(tg_featbuf_acquire(h, pair, 2, 0) == 1);
    TG_CHECK(!tg_featbuf_lookup(fb, 11, NULL, NULL, NULL));
    load_all(h);
    TG_CHECK_OK(tg_featbuf_wait(h));
    TG_CHECK(rows_ok(h, pair));
    /* all four slots referenced (3, 20, 10) or standby (12): a 2-node batch of new rows does not
     * fit now - NOWAIT says so instead of evicting referenced rows */
    uint64_t pair2[] = {30, 31};
    TG_CHECK_ERR(tg_featbuf_acquire(h, pair2, 2, 0), "still acquired");
    tg_featbuf_batch_t *h3;
    TG_CHECK_OK(tg_featbuf_batch_create(fb, &h3));
    TG_CHECK_ERR(tg_featbuf_acquire(h3, pair2, 2, TG_FEATBUF_NOWAIT), "needs 2");
    /* reviving a standby row takes an unreferenced slot too: 12 + a new row need 2, 1 is left */
    uint64_t revive_and_new[] = {12, 40};
    TG_CHECK_ERR(tg_featbuf_acquire(h3, revive_and_new, 2, TG_FEATBUF_NOWAIT),
                 "needs 2 unreferenced slots, 1 available");
    TG_CHECK(tg_featbuf_acquire(h3, revive_and_new, 1, TG_FEATBUF_NOWAIT) == 0);
    TG_CHECK_OK(tg_featbuf_release(h3)); /* 12 back at the tail, alone: [12] */
    TG_CHECK_OK(tg_featbuf_release(hold));
    acquire_loaded(h3, pair2, 2); /* evicts 12, then 3 */
    TG_CHECK(!tg_featbuf_lookup(fb, 12, NULL, NULL, NULL));
    TG_CHECK(!tg_featbuf_lookup(fb, 3, NULL, NULL, NULL));
    TG_CHECK(rows_ok(h, pair));
    TG_CHECK_OK(tg_featbuf_release(h3));
    TG_CHECK_OK(tg_featbuf_release(h));

    tg_featbuf_stats_t st;
    tg_featbuf_stats(fb, &st, 0);
    TG_CHECK_EQ_U64(st.evictions, 6);    /* 1, 4, 2, 11, 12, 3 */
    TG_CHECK_EQ_U64(st.standby_hits, 4); /* 2, 3 (held), 10 (in the pair), 12 */
    TG_CHECK_OK(tg_featbuf_check(fb));
    tg_featbuf_batch_destroy(h3);
    tg_featbuf_batch_destroy(h);
    tg_featbuf_batch_destroy(hold);
    tg_featbuf_destroy(fb);
}

/* ---------------------------------------------------------------- waiting on another batch */

typedef struct {
    tg_featbuf_t *fb;
    const uint64_t *nodes;
    size_t n;
    int acquire_rc, wait_rc, rows_ok;
    char msg[256];
    atomic_int stage; /* 1 = acquired and own loads completed, 2 = wait returned */
} waiter_t;

static void *waiter_main(void *arg)
{
    waiter_t *w = arg;
    tg_featbuf_batch_t *h;
    if (tg_featbuf_batch_create(w->fb, &h) < 0) {
        w->acquire_rc = -1;
        atomic_store(&w->stage, 2);
        return NULL;
    }
    w->acquire_rc = tg_featbuf_acquire(h, w->nodes, w->n, 0);
    if (w->acquire_rc >= 0) {
        size_t nl;
        const tg_featbuf_load_t *ld = tg_featbuf_batch_loads(h, &nl);
        for (size_t k = 0; k < nl; k++) {
            fake_read(w->fb, ld[k].node, ld[k].slot, 1);
            tg_featbuf_complete(h, k, 0);
        }
        atomic_store(&w->stage, 1);
        w->wait_rc = tg_featbuf_wait(h);
        snprintf(w->msg, sizeof w->msg, "%s", tg_errmsg());
        if (w->wait_rc == 0) {
            float X[2 * 8];
            w->rows_ok = rows_ok(h, w->nodes) && tg_featbuf_gather_f32(h, X, NULL) == 0;
            for (size_t i = 0; i < w->n; i++)
                for (size_t j = 0; j < 8; j++)
                    if (X[i * 8 + j] != fval(w->nodes[i], j)) w->rows_ok = 0;
        }
        tg_featbuf_release(h);
    }
    tg_featbuf_batch_destroy(h);
    atomic_store(&w->stage, 2);
    return NULL;
}

TG_TEST(wait_for_other_batch)
{
    tg_featbuf_t *fb;
    tg_featbuf_opts_t o = opts(50, 8, 2, 2, 0, TG_FEATBUF_MAP_AUTO);
    TG_CHECK_OK(tg_featbuf_create(&fb, &o, NULL));
    tg_featbuf_batch_t *ha;
    TG_CHECK_OK(tg_featbuf_batch_create(fb, &ha));
    uint64_t a[] = {1, 2}, b[] = {2, 3};
    TG_CHECK(tg_featbuf_acquire(ha, a, 2, 0) == 2);

    waiter_t w = {.fb = fb, .nodes = b, .n = 2};
    pthread_t t;
    pthread_create(&t, NULL, waiter_main, &w);
    while (atomic_load(&w.stage) < 1)
        sleep_ms(1);
    sleep_ms(50); /* B must still be waiting: A has not loaded 2 */
    TG_CHECK(atomic_load(&w.stage) == 1);
    size_t nl;
    const tg_featbuf_load_t *ld = tg_featbuf_batch_loads(ha, &nl);
    for (size_t k = nl; k-- > 0;) { /* out of order */
        fake_read(fb, ld[k].node, ld[k].slot, 0);
        TG_CHECK_OK(tg_featbuf_complete(ha, k, 0));
    }
    pthread_join(t, NULL);
    TG_CHECK(w.acquire_rc == 1);
    TG_CHECK(w.wait_rc == 0);
    TG_CHECK(w.rows_ok);
    TG_CHECK_OK(tg_featbuf_wait(ha));
    TG_CHECK_OK(tg_featbuf_release(ha));
    tg_featbuf_stats_t st;
    tg_featbuf_stats(fb, &st, 0);
    TG_CHECK_EQ_U64(st.waits, 1);
    TG_CHECK_EQ_U64(st.misses, 3);
    TG_CHECK_OK(tg_featbuf_check(fb));
    tg_featbuf_batch_destroy(ha);
    tg_featbuf_destroy(fb);
}

/* try_wait: -EAGAIN without a message while another batch's row is loading, then what wait
 * gives; its own loads outstanding are refused as by wait. */
TG_TEST(try_wait)
{
    tg_featbuf_t *fb;
    tg_featbuf_opts_t o = opts(50, 8, 2, 2, 0, TG_FEATBUF_MAP_AUTO);
    TG_CHECK_OK(tg_featbuf_create(&fb, &o, NULL));
    tg_featbuf_batch_t *ha, *hb;
    TG_CHECK_OK(tg_featbuf_batch_create(fb, &ha));
    TG_CHECK_OK(tg_featbuf_batch_create(fb, &hb));
    uint64_t a[] = {1, 2}, b[] = {2, 3};
    TG_CHECK(tg_featbuf_acquire(ha, a, 2, 0) == 2);
    TG_CHECK_ERR(tg_featbuf_try_wait(ha), "own loads outstanding");
    TG_CHECK(tg_featbuf_acquire(hb, b, 2, 0) == 1); /* 3; 2 is A's */
    size_t nl;
    const tg_featbuf_load_t *lb = tg_featbuf_batch_loads(hb, &nl);
    fake_read(fb, lb[0].node, lb[0].slot, 0);
    TG_CHECK_OK(tg_featbuf_complete(hb, 0, 0));
    tg_err_clear();
    TG_CHECK(tg_featbuf_try_wait(hb) == -EAGAIN);
    TG_CHECK(!strcmp(tg_errmsg(), "")); /* not an error: nothing recorded */
    const tg_featbuf_load_t *la = tg_featbuf_batch_loads(ha, &nl);
    for (size_t k = 0; k < nl; k++) {
        fake_read(fb, la[k].node, la[k].slot, 0);
        TG_CHECK_OK(tg_featbuf_complete(ha, k, 0));
    }
    TG_CHECK_OK(tg_featbuf_try_wait(hb));
    TG_CHECK_OK(tg_featbuf_try_wait(hb)); /* ready stays ready */
    TG_CHECK_OK(tg_featbuf_try_wait(ha));
    TG_CHECK_OK(tg_featbuf_release(ha));
    TG_CHECK_OK(tg_featbuf_release(hb));
    TG_CHECK_ERR(tg_featbuf_try_wait(hb), "not acquired");
    TG_CHECK_OK(tg_featbuf_check(fb));
    tg_featbuf_batch_destroy(ha);
    tg_featbuf_batch_destroy(hb);
    tg_featbuf_destroy(fb);
}

/* ---------------------------------------------------------------- failed reads */

TG_TEST(failed_read)
{
    tg_featbuf_t *fb;
    tg_featbuf_opts_t o = opts(50, 8, 2, 3, 0, TG_FEATBUF_MAP_HASH); /* 6 slots */
    TG_CHECK_OK(tg_featbuf_create(&fb, &o, NULL));
    tg_featbuf_batch_t *ha, *hc;
    TG_CHECK_OK(tg_featbuf_batch_create(fb, &ha));
    TG_CHECK_OK(tg_featbuf_batch_create(fb, &hc));
    uint64_t a[] = {1, 2}, b[] = {2, 3};
    TG_CHECK(tg_featbuf_acquire(ha, a, 2, 0) == 2);
    uint32_t bad_slot = slot_of(fb, 2);

    waiter_t w = {.fb = fb, .nodes = b, .n = 2};
    pthread_t t;
    pthread_create(&t, NULL, waiter_main, &w);
    while (atomic_load(&w.stage) < 1)
        sleep_ms(1);
    size_t nl;
    const tg_featbuf_load_t *ld = tg_featbuf_batch_loads(ha, &nl);
    TG_CHECK(nl == 2 && ld[1].node == 2);
    fake_read(fb, 1, ld[0].slot, 0);
    TG_CHECK_OK(tg_featbuf_complete(ha, 0, 0));
    memset(tg_featbuf_row(fb, ld[1].slot), 0xab, 32); /* a torn read: garbage in the slot */
    TG_CHECK_OK(tg_featbuf_complete(ha, 1, -EIO));
    pthread_join(t, NULL);
    TG_CHECK(w.wait_rc == -EIO);
    TG_CHECK(strstr(w.msg, "node 2") != NULL && strstr(w.msg, "another batch") != NULL);
    tg_err_clear();
    TG_CHECK(tg_featbuf_wait(ha) == -EIO);
    TG_CHECK(strstr(tg_errmsg(), "node 2 failed to load in this batch") != NULL);
    float X[16];
    TG_CHECK_ERR(tg_featbuf_gather_f32(ha, X, NULL), "not all valid");

    /* the node is unmapped at once; the failed slot stays out of use while ha references it */
    TG_CHECK(!tg_featbuf_lookup(fb, 2, NULL, NULL, NULL));
    int st_;
    uint32_t refs;
    tg_featbuf_slot_info(fb, bad_slot, NULL, &refs, &st_);
    TG_CHECK(st_ == TG_FEATBUF_FAILED && refs == 1);
    TG_CHECK_OK(tg_featbuf_check(fb));
    uint64_t c[] = {2};
    TG_CHECK(tg_featbuf_acquire(hc, c, 1, 0) == 1); /* read again, elsewhere */
    TG_CHECK(slot_of(fb, 2) != bad_slot);
    load_all(hc);
    TG_CHECK_OK(tg_featbuf_wait(hc));
    TG_CHECK(rows_ok(hc, c));
    TG_CHECK_OK(tg_featbuf_release(hc));

    /* after the last reference the failed slot is free again, and reusable */
    TG_CHECK_OK(tg_featbuf_release(ha));
    tg_featbuf_slot_info(fb, bad_slot, NULL, &refs, &st_);
    TG_CHECK(st_ == TG_FEATBUF_FREE && refs == 0);
    uint64_t d[] = {7};
    TG_CHECK(tg_featbuf_acquire(hc, d, 1, 0) == 1);
    TG_CHECK(slot_of(fb, 7) == bad_slot); /* free slots go before standby ones */
    load_all(hc);
    TG_CHECK_OK(tg_featbuf_wait(hc));
    TG_CHECK(rows_ok(hc, d));
    TG_CHECK_OK(tg_featbuf_release(hc));

    /* complete_all aborts a batch: every outstanding load fails */
    uint64_t e[] = {8, 9};
    TG_CHECK(tg_featbuf_acquire(hc, e, 2, 0) == 2);
    TG_CHECK_OK(tg_featbuf_complete(hc, 0, 0));
    TG_CHECK_OK(tg_featbuf_complete_all(hc, -ECANCELED));
    TG_CHECK(tg_featbuf_wait(hc) == -ECANCELED);
    TG_CHECK_OK(tg_featbuf_release(hc));
    TG_CHECK(state_of(fb, 8) == TG_FEATBUF_VALID);
    TG_CHECK(!tg_featbuf_lookup(fb, 9, NULL, NULL, NULL));

    tg_featbuf_stats_t st;
    tg_featbuf_stats(fb, &st, 0);
    TG_CHECK_EQ_U64(st.load_errors, 2);
    TG_CHECK_EQ_U64(st.slots_referenced, 0);
    TG_CHECK_OK(tg_featbuf_check(fb));
    tg_featbuf_batch_destroy(ha);
    tg_featbuf_batch_destroy(hc);
    tg_featbuf_destroy(fb);
}

/* ---------------------------------------------------------------- gather, f16 */

TG_TEST(gather_f16_padded)
{
    tg_featbuf_t *fb;
    tg_featbuf_opts_t o = opts(40, 7, 16, 1, 0, TG_FEATBUF_MAP_AUTO);
    o.dtype = TG_F16;
    o.slot_align = 16;
    TG_CHECK_OK(tg_featbuf_create(&fb, &o, NULL));
    TG_CHECK_EQ_U64(tg_featbuf_row_bytes(fb), 14);
    TG_CHECK_EQ_U64(tg_featbuf_slot_stride(fb), 16);
    tg_featbuf_batch_t *h;
    TG_CHECK_OK(tg_featbuf_batch_create(fb, &h));
    uint64_t nodes[16];
    for (int i = 0; i < 16; i++)
        nodes[i] = (uint64_t)(39 - 2 * i);
    TG_CHECK(tg_featbuf_acquire(h, nodes, 16, TG_FEATBUF_SORT_LOADS) == 16);
    size_t nl;
    const tg_featbuf_load_t *ld = tg_featbuf_batch_loads(h, &nl);
    for (size_t k = 0; k < nl; k++) {
        if (k) TG_CHECK(ld[k - 1].node < ld[k].node);
        TG_CHECK(nodes[ld[k].pos] == ld[k].node);
        uint16_t *row = tg_featbuf_row(fb, ld[k].slot);
        for (size_t j = 0; j < 7; j++)
            row[j] = tg_f32_to_f16(fval16(ld[k].node, j));
        TG_CHECK_OK(tg_featbuf_complete(h, k, 0));
    }
    TG_CHECK_OK(tg_featbuf_wait(h));
    float X[16 * 7];
    tg_pool_t *pool;
    TG_CHECK_OK(tg_pool_create(&pool, 2));
    TG_CHECK_OK(tg_featbuf_gather_f32(h, X, pool));
    int bad = 0;
    for (int i = 0; i < 16; i++)
        for (size_t j = 0; j < 7; j++)
            bad += X[i * 7 + (int)j] != fval16(nodes[i], j);
    TG_CHECK(bad == 0);
    tg_pool_destroy(pool);
    TG_CHECK_OK(tg_featbuf_release(h));
    tg_featbuf_batch_destroy(h);
    tg_featbuf_destroy(fb);
}

/* ---------------------------------------------------------------- admission: FIFO, shutdown */

typedef struct {
    tg_featbuf_batch_t *h;
    const uint64_t *nodes;
    size_t n;
    int rc;
    atomic_int done;
} acq_t;

static void *acquirer_main(void *arg)
{
    acq_t *a = arg;
    a->rc = tg_featbuf_acquire(a->h, a->nodes, a->n, 0);
    atomic_store(&a->done, 1);
    return NULL;
}

TG_TEST(admission_fifo_and_shutdown)
{
    tg_featbuf_t *fb;
    tg_featbuf_opts_t o = opts(100, 2, 4, 1, 0, TG_FEATBUF_MAP_AUTO); /* 4 slots */
    TG_CHECK_OK(tg_featbuf_create(&fb, &o, NULL));
    tg_featbuf_batch_t *hold, *hb, *hs;
    TG_CHECK_OK(tg_featbuf_batch_create(fb, &hold));
    TG_CHECK_OK(tg_featbuf_batch_create(fb, &hb));
    TG_CHECK_OK(tg_featbuf_batch_create(fb, &hs));
    uint64_t held[] = {1, 2, 3}, big[] = {10, 11, 12, 13}, small[] = {20};
    acquire_loaded(hold, held, 3);

    /* the 4-node batch blocks (1 slot unreferenced); a 1-node batch that would fit must not
     * overtake it, or a stream of small batches could starve it */
    acq_t a = {.h = hb, .nodes = big, .n = 4};
    pthread_t t;
    pthread_create(&t, NULL, acquirer_main, &a);
    for (;;) {
        tg_featbuf_stats_t st;
        tg_featbuf_stats(fb, &st, 0);
        if (st.admission_waits == 1) break;
        sleep_ms(1);
    }
    TG_CHECK_ERR(tg_featbuf_acquire(hs, small, 1, TG_FEATBUF_NOWAIT), "others queued");
    /* a batch that takes no unreferenced slot may pass: it cannot delay anyone */
    TG_CHECK(tg_featbuf_acquire(hs, held, 2, TG_FEATBUF_NOWAIT) == 0);
    TG_CHECK_OK(tg_featbuf_release(hs));
    TG_CHECK(!atomic_load(&a.done));
    TG_CHECK_OK(tg_featbuf_release(hold));
    pthread_join(t, NULL);
    TG_CHECK(a.rc == 4);
    load_all(hb);
    TG_CHECK_OK(tg_featbuf_wait(hb));
    TG_CHECK(rows_ok(hb, big));

    /* shutdown wakes a blocked acquirer with -ECANCELED; release still works */
    acq_t a2 = {.h = hs, .nodes = small, .n = 1};
    pthread_create(&t, NULL, acquirer_main, &a2);
    sleep_ms(20);
    TG_CHECK(!atomic_load(&a2.done));
    tg_featbuf_shutdown(fb);
    pthread_join(t, NULL);
    TG_CHECK(a2.rc == -ECANCELED);
    TG_CHECK_ERR(tg_featbuf_acquire(hs, small, 1, 0), "shut down");
    TG_CHECK_OK(tg_featbuf_release(hb));
    tg_featbuf_stats_t st;
    tg_featbuf_stats(fb, &st, 0);
    TG_CHECK(st.admission_wait_s > 0);
    TG_CHECK_OK(tg_featbuf_check(fb));
    tg_featbuf_batch_destroy(hold);
    tg_featbuf_batch_destroy(hb);
    tg_featbuf_batch_destroy(hs);
    tg_featbuf_destroy(fb);
}

/* ---------------------------------------------------------------- no deadlock, exact reservation
 */

/* Every thread holds at most one batch and the buffer has exactly threads * max_batch_nodes
 * slots: by the reservation invariant a NOWAIT acquire must always succeed, however the batches
 * overlap; the threads wait for each other's rows all the time (crossed waits included) and must
 * never deadlock. */
typedef struct {
    tg_featbuf_t *fb;
    int id, rounds;
    uint32_t mb, pool;
    atomic_int *eagain, *bad_rows, *errors;
    pthread_mutex_t *trace_mu; /* trace policies: each batch is announced under it, ids in order */
    uint64_t *next_id;
} cross_t;

/* Trace policies: announces nodes as the next batch id (*id); 1 if it was recorded (a full
 * trace is fine: the batch is then simply unknown to the policy). */
static int announce(cross_t *c, const uint64_t *nodes, size_t n, uint64_t *id)
{
    if (!g_trace()) return 0;
    pthread_mutex_lock(c->trace_mu);
    *id = (*c->next_id)++;
    int rc = tg_featbuf_future_add(c->fb, *id, nodes, n);
    pthread_mutex_unlock(c->trace_mu);
    if (rc < 0 && rc != -ENOSPC) atomic_fetch_add(c->errors, 1);
    return rc == 0;
}

static void random_batch(tg_rng_t *r, uint32_t pool, uint32_t max, uint64_t *nodes, size_t *n)
{
    *n = 1 + (size_t)tg_rng_below(r, max);
    for (size_t i = 0; i < *n;) {
        uint64_t v = tg_rng_below(r, pool);
        size_t k = 0;
        while (k < i && nodes[k] != v)
            k++;
        if (k == i) nodes[i++] = v;
    }
}

static void *cross_main(void *arg)
{
    cross_t *c = arg;
    tg_rng_t r;
    tg_rng_seed2(&r, 7, (uint64_t)c->id);
    tg_featbuf_batch_t *h;
    if (tg_featbuf_batch_create(c->fb, &h) < 0) {
        atomic_fetch_add(c->errors, 1);
        return NULL;
    }
    uint64_t nodes[64];
    size_t n;
    for (int it = 0; it < c->rounds; it++) {
        random_batch(&r, c->pool, c->mb, nodes, &n);
        uint64_t id = 0;
        int announced = announce(c, nodes, n, &id);
        int rc = tg_featbuf_acquire(h, nodes, n, TG_FEATBUF_NOWAIT);
        if (announced && tg_featbuf_future_done(c->fb, id) < 0) atomic_fetch_add(c->errors, 1);
        if (rc == -EAGAIN) {
            atomic_fetch_add(c->eagain, 1);
            continue;
        }
        if (rc < 0) {
            atomic_fetch_add(c->errors, 1);
            continue;
        }
        size_t nl;
        const tg_featbuf_load_t *ld = tg_featbuf_batch_loads(h, &nl);
        for (size_t k = 0; k < nl; k++) {
            fake_read(c->fb, ld[k].node, ld[k].slot, (k & 3) == 0);
            if (tg_featbuf_complete(h, k, 0) < 0) atomic_fetch_add(c->errors, 1);
        }
        if (tg_featbuf_wait(h) < 0)
            atomic_fetch_add(c->errors, 1);
        else if (!rows_ok(h, nodes))
            atomic_fetch_add(c->bad_rows, 1);
        if (tg_featbuf_release(h) < 0) atomic_fetch_add(c->errors, 1);
    }
    tg_featbuf_batch_destroy(h);
    return NULL;
}

TG_TEST(no_deadlock_exact_reservation)
{
    enum { T = 6, MB = 12 };
    tg_featbuf_t *fb;
    tg_featbuf_opts_t o = opts(1000, 4, MB, T, 0, TG_FEATBUF_MAP_HASH);
    TG_CHECK_OK(tg_featbuf_create(&fb, &o, NULL));
    TG_CHECK_EQ_U64(tg_featbuf_num_slots(fb), T * MB);
    atomic_int eagain = 0, bad = 0, errors = 0;
    pthread_mutex_t trace_mu = PTHREAD_MUTEX_INITIALIZER;
    uint64_t next_id = 0;
    cross_t c[T];
    pthread_t th[T];
    for (int i = 0; i < T; i++) {
        /* 120 nodes for 72 slots: heavy overlap and constant eviction, so rows in flight are
         * shared (and waited for crosswise) all the time */
        c[i] = (cross_t){.fb = fb,
                         .id = i,
                         .rounds = 2000 * stress_mult(),
                         .mb = MB,
                         .pool = 120,
                         .eagain = &eagain,
                         .bad_rows = &bad,
                         .errors = &errors,
                         .trace_mu = &trace_mu,
                         .next_id = &next_id};
        pthread_create(&th[i], NULL, cross_main, &c[i]);
    }
    for (int i = 0; i < T; i++)
        pthread_join(th[i], NULL);
    TG_CHECK(atomic_load(&eagain) == 0);
    TG_CHECK(atomic_load(&bad) == 0);
    TG_CHECK(atomic_load(&errors) == 0);
    tg_featbuf_stats_t st;
    tg_featbuf_stats(fb, &st, 0);
    TG_CHECK_EQ_U64(st.acquires, (uint64_t)T * 2000 * stress_mult());
    TG_CHECK_EQ_U64(st.admission_waits, 0);
    TG_CHECK_EQ_U64(st.slots_referenced, 0);
    fprintf(stderr, "  %llu lookups: %llu hits, %llu waits, %llu misses\n",
            (unsigned long long)st.lookups, (unsigned long long)st.hits,
            (unsigned long long)st.waits, (unsigned long long)st.misses);
    TG_CHECK_OK(tg_featbuf_check(fb));

    /* the same with 1000 nodes: evictions all the time */
    for (int i = 0; i < T; i++) {
        c[i].pool = 1000;
        c[i].rounds = 1000 * stress_mult();
        pthread_create(&th[i], NULL, cross_main, &c[i]);
    }
    for (int i = 0; i < T; i++)
        pthread_join(th[i], NULL);
    TG_CHECK(atomic_load(&eagain) == 0);
    TG_CHECK(atomic_load(&bad) == 0);
    TG_CHECK(atomic_load(&errors) == 0);
    tg_featbuf_stats(fb, &st, 0);
    TG_CHECK(st.evictions > 0);
    TG_CHECK_OK(tg_featbuf_check(fb));
    tg_featbuf_destroy(fb);
}

/* ---------------------------------------------------------------- the pipeline under stress */

/* Extractors acquire random overlapping batches, "read" their loads in random order (1 in 64
 * fails with -EIO), wait, and queue the batch for the trainer; the trainer takes batches out of
 * order and checks that every row equals f(node) - through the raw slots and through gather;
 * the releaser releases and hands the job back. Each extractor owns `jobs` jobs, so at most
 * extractors * jobs batches hold references: declared as max_batches, admission must never
 * block (first run); declared as 1 with the minimum of slots, admission blocks all the time but
 * the pipeline must still finish (second run). The batches are drawn up front, so that a trace
 * policy can be told LOOKAHEAD batches ahead of the extractors (each extractor announces batch
 * id + LOOKAHEAD as it takes batch id, and marks id done once acquired: out of order across
 * extractors); STATIC pins PINNED hot nodes, preloads them, and the releaser moves the pinned
 * set now and then while the extractors run. */
enum { P_MB = 24, P_DIM = 6, LOOKAHEAD = 4, PINNED = 40 };

typedef struct job {
    tg_featbuf_batch_t *h;
    uint64_t nodes[P_MB];
    int owner;
} job_t;

typedef struct pipe {
    tg_featbuf_t *fb;
    int extractors, jobs, rounds;
    uint32_t pool;
    tg_queue_t *train_q, *release_q, *free_q[8];
    atomic_int bad_rows, errors, failed_batches, trained;
    atomic_ullong loads, load_fails, positions;
    /* the batches, drawn up front: batch b = nodes[b * P_MB ..][0..len[b]) */
    uint64_t *nodes;
    uint32_t *len;
    uint8_t *announced; /* guarded by mu */
    int total, next_id; /* guarded by mu */
    pthread_mutex_t mu;
    atomic_int nospc, repins;
} pipe_t;

/* skewed ids: half the picks from a hot tenth of the pool, so batches overlap */
static void draw_batches(pipe_t *p)
{
    tg_rng_t r;
    tg_rng_seed(&r, 99);
    p->nodes = malloc(sizeof *p->nodes * P_MB * (size_t)p->total);
    p->len = malloc(sizeof *p->len * (size_t)p->total);
    p->announced = calloc((size_t)p->total, 1);
    for (int b = 0; b < p->total; b++) {
        uint64_t *v = p->nodes + (size_t)b * P_MB;
        p->len[b] = 1 + (uint32_t)tg_rng_below(&r, P_MB);
        for (size_t i = 0; i < p->len[b];) {
            uint64_t x =
                tg_rng_below(&r, 2) ? tg_rng_below(&r, p->pool / 10) : tg_rng_below(&r, p->pool);
            size_t k = 0;
            while (k < i && v[k] != x)
                k++;
            if (k == i) v[i++] = x;
        }
    }
}

/* Announces batch b if it exists (p->mu held). A full trace only leaves b unknown. */
static void announce_batch(pipe_t *p, int b)
{
    if (!g_trace() || b >= p->total) return;
    int rc = tg_featbuf_future_add(p->fb, (uint64_t)b, p->nodes + (size_t)b * P_MB, p->len[b]);
    p->announced[b] = rc == 0;
    if (rc == -ENOSPC)
        atomic_fetch_add(&p->nospc, 1);
    else if (rc < 0)
        atomic_fetch_add(&p->errors, 1);
}

typedef struct {
    pipe_t *p;
    int id;
} ex_arg_t;

static void *extractor_main(void *arg)
{
    ex_arg_t *a = arg;
    pipe_t *p = a->p;
    tg_rng_t r;
    tg_rng_seed2(&r, 99, (uint64_t)a->id);
    uint32_t order[P_MB];
    for (int it = 0; it < p->rounds; it++) {
        void *item;
        if (tg_queue_pop(p->free_q[a->id], &item) < 0) break;
        job_t *j = item;
        pthread_mutex_lock(&p->mu);
        int id = p->next_id++;
        announce_batch(p, id + LOOKAHEAD);
        int announced = p->announced[id];
        pthread_mutex_unlock(&p->mu);
        size_t n = p->len[id];
        memcpy(j->nodes, p->nodes + (size_t)id * P_MB, n * sizeof *j->nodes);
        int rc = tg_featbuf_acquire(j->h, j->nodes, n, (it & 1) ? TG_FEATBUF_SORT_LOADS : 0);
        if (announced && tg_featbuf_future_done(p->fb, (uint64_t)id) < 0)
            atomic_fetch_add(&p->errors, 1);
        if (rc < 0) {
            atomic_fetch_add(&p->errors, 1);
            tg_queue_push(p->free_q[a->id], j);
            continue;
        }
        atomic_fetch_add(&p->positions, n);
        size_t nl;
        const tg_featbuf_load_t *ld = tg_featbuf_batch_loads(j->h, &nl);
        for (size_t k = 0; k < nl; k++)
            order[k] = (uint32_t)k;
        tg_rng_shuffle_u32(&r, order, nl);
        for (size_t q = 0; q < nl; q++) {
            size_t k = order[q];
            int fail = tg_rng_below(&r, 64) == 0;
            if (fail)
                memset(tg_featbuf_row(p->fb, ld[k].slot), 0x5a, tg_featbuf_row_bytes(p->fb));
            else
                fake_read(p->fb, ld[k].node, ld[k].slot, (q & 7) == 0);
            atomic_fetch_add(&p->loads, 1);
            if (fail) atomic_fetch_add(&p->load_fails, 1);
            if (tg_featbuf_complete(j->h, k, fail ? -EIO : 0) < 0) atomic_fetch_add(&p->errors, 1);
        }
        rc = tg_featbuf_wait(j->h);
        if (rc == 0) {
            tg_queue_push(p->train_q, j);
        } else if (rc == -EIO) {
            atomic_fetch_add(&p->failed_batches, 1);
            tg_queue_push(p->release_q, j);
        } else {
            atomic_fetch_add(&p->errors, 1);
            tg_queue_push(p->release_q, j);
        }
    }
    return NULL;
}

static void train_one(pipe_t *p, job_t *j)
{
    size_t n;
    const uint32_t *slots = tg_featbuf_batch_slots(j->h, &n);
    float X[P_MB * P_DIM];
    if (tg_featbuf_gather_f32(j->h, X, NULL) < 0) atomic_fetch_add(&p->errors, 1);
    for (size_t i = 0; i < n; i++) {
        const float *row = tg_featbuf_row(p->fb, slots[i]);
        for (size_t d = 0; d < P_DIM; d++)
            if (row[d] != fval(j->nodes[i], d) || X[i * P_DIM + d] != fval(j->nodes[i], d)) {
                atomic_fetch_add(&p->bad_rows, 1);
                break;
            }
    }
    atomic_fetch_add(&p->trained, 1);
    tg_queue_push(p->release_q, j);
}

static void *trainer_main(void *arg)
{
    pipe_t *p = arg;
    tg_rng_t r;
    tg_rng_seed(&r, 5);
    void *item, *next;
    /* Out of order: when a second batch is already queued, train it first half of the time. A
     * trainer must never hold a batch back waiting for one that may not come: the held batch's
     * references could be what the extractors are waiting for. */
    while (tg_queue_pop(p->train_q, &item) == 0) {
        if (tg_queue_len(p->train_q) > 0 && tg_rng_below(&r, 2) &&
            tg_queue_pop(p->train_q, &next) == 0)
            train_one(p, next);
        train_one(p, item);
    }
    return NULL;
}

/* STATIC: PINNED nodes of the hot range 0..2*PINNED, starting at k. */
static void pin_hot(tg_featbuf_t *fb, int k, int *errors)
{
    uint64_t v[PINNED];
    for (int i = 0; i < PINNED; i++)
        v[i] = (uint64_t)((k + i) % (2 * PINNED));
    if (tg_featbuf_pin(fb, v, PINNED) < 0) ++*errors;
}

static void *releaser_main(void *arg)
{
    pipe_t *p = arg;
    void *item;
    int released = 0, errs = 0;
    while (tg_queue_pop(p->release_q, &item) == 0) {
        job_t *j = item;
        if (tg_featbuf_release(j->h) < 0) atomic_fetch_add(&p->errors, 1);
        tg_queue_push(p->free_q[j->owner], j);
        if (g_policy == TG_FEATBUF_STATIC && ++released % 512 == 0) {
            pin_hot(p->fb, released / 512, &errs); /* rows change sides under the extractors */
            atomic_fetch_add(&p->repins, 1);
        }
    }
    atomic_fetch_add(&p->errors, errs);
    return NULL;
}

/* STATIC: reads the pinned rows through tg_featbuf_preload; they must then all be pinned. */
static void preload_all(tg_featbuf_t *fb, tg_featbuf_batch_t *h)
{
    int k, rounds = 0;
    while ((k = tg_featbuf_preload(h)) > 0) {
        load_all(h);
        TG_CHECK_OK(tg_featbuf_wait(h));
        TG_CHECK_OK(tg_featbuf_release(h));
        rounds++;
    }
    TG_CHECK(k == 0);
    tg_featbuf_stats_t st;
    tg_featbuf_stats(fb, &st, 0);
    TG_CHECK_EQ_U64(st.slots_pinned, PINNED);
    TG_CHECK_EQ_U64(st.preloads, PINNED);
    TG_CHECK(rounds == (PINNED + P_MB - 1) / P_MB);
    TG_CHECK_OK(tg_featbuf_check(fb));
}

static void run_pipeline(uint32_t declared_batches, uint32_t pool, int expect_no_admission_wait)
{
    enum { E = 3, J = 2 };
    pipe_t p = {.extractors = E, .jobs = J, .rounds = 2000 * stress_mult(), .pool = pool};
    p.total = E * p.rounds;
    pthread_mutex_init(&p.mu, NULL);
    draw_batches(&p);
    tg_featbuf_opts_t o = opts(pool, P_DIM, P_MB, declared_batches, 0, TG_FEATBUF_MAP_AUTO);
    /* the most batches announced and not retired: LOOKAHEAD, those between an extractor's
     * announcement and its done, and the one the slowest extractor holds back */
    o.future_positions = g_trace() ? (LOOKAHEAD + 2 * E) * P_MB : 0;
    if (g_policy == TG_FEATBUF_STATIC) o.num_slots = P_MB * declared_batches + PINNED;
    TG_CHECK_OK(tg_featbuf_create(&p.fb, &o, NULL));
    for (int b = 0; b < LOOKAHEAD; b++)
        announce_batch(&p, b);
    TG_CHECK_OK(tg_queue_create(&p.train_q, E * J));
    TG_CHECK_OK(tg_queue_create(&p.release_q, E * J));
    job_t jobs[E * J];
    for (int e = 0; e < E; e++) {
        TG_CHECK_OK(tg_queue_create(&p.free_q[e], J));
        for (int k = 0; k < J; k++) {
            job_t *j = &jobs[e * J + k];
            j->owner = e;
            TG_CHECK_OK(tg_featbuf_batch_create(p.fb, &j->h));
            tg_queue_push(p.free_q[e], j);
        }
    }
    int pin_errors = 0;
    if (g_policy == TG_FEATBUF_STATIC) {
        pin_hot(p.fb, 0, &pin_errors);
        preload_all(p.fb, jobs[0].h);
    }
    TG_CHECK(pin_errors == 0);
    pthread_t ex[E], tr, rl;
    ex_arg_t args[E];
    for (int e = 0; e < E; e++) {
        args[e] = (ex_arg_t){.p = &p, .id = e};
        pthread_create(&ex[e], NULL, extractor_main, &args[e]);
    }
    pthread_create(&tr, NULL, trainer_main, &p);
    pthread_create(&rl, NULL, releaser_main, &p);
    for (int e = 0; e < E; e++)
        pthread_join(ex[e], NULL);
    tg_queue_close(p.train_q);
    pthread_join(tr, NULL);
    tg_queue_close(p.release_q);
    pthread_join(rl, NULL);

    TG_CHECK(atomic_load(&p.bad_rows) == 0);
    TG_CHECK(atomic_load(&p.errors) == 0);
    TG_CHECK(atomic_load(&p.trained) + atomic_load(&p.failed_batches) == E * p.rounds);
    TG_CHECK(atomic_load(&p.trained) > 0);
    tg_featbuf_stats_t st;
    tg_featbuf_stats(p.fb, &st, 0);
    uint64_t preload_batches = g_policy == TG_FEATBUF_STATIC ? (PINNED + P_MB - 1) / P_MB : 0;
    TG_CHECK_EQ_U64(st.acquires, (uint64_t)E * p.rounds + preload_batches);
    TG_CHECK_EQ_U64(st.releases, (uint64_t)E * p.rounds + preload_batches);
    TG_CHECK_EQ_U64(st.lookups, atomic_load(&p.positions));
    TG_CHECK_EQ_U64(st.misses, atomic_load(&p.loads));
    TG_CHECK_EQ_U64(st.load_errors, atomic_load(&p.load_fails));
    TG_CHECK_EQ_U64(st.slots_referenced, 0);
    TG_CHECK(st.evictions > 0);
    if (expect_no_admission_wait) TG_CHECK_EQ_U64(st.admission_waits, 0);
    fprintf(stderr,
            "  %s, %u slots: %llu batches (%d failed), hit ratio %.3f (%llu waits), %llu "
            "evictions (%llu protected), %llu admission waits, %d repins, %d full traces\n",
            tg_featbuf_policy_name(g_policy), tg_featbuf_num_slots(p.fb),
            (unsigned long long)st.acquires, atomic_load(&p.failed_batches),
            tg_featbuf_hit_ratio(&st), (unsigned long long)st.waits,
            (unsigned long long)st.evictions, (unsigned long long)st.evictions_protected,
            (unsigned long long)st.admission_waits, atomic_load(&p.repins), atomic_load(&p.nospc));
    TG_CHECK_OK(tg_featbuf_check(p.fb));
    for (int i = 0; i < E * J; i++)
        tg_featbuf_batch_destroy(jobs[i].h);
    for (int e = 0; e < E; e++)
        tg_queue_destroy(p.free_q[e]);
    tg_queue_destroy(p.train_q);
    tg_queue_destroy(p.release_q);
    tg_featbuf_destroy(p.fb);
    free(p.nodes);
    free(p.len);
    free(p.announced);
    pthread_mutex_destroy(&p.mu);
}

TG_TEST(pipeline_reserved)
{
    run_pipeline(3 * 2, 400, 1);
}

TG_TEST(pipeline_minimum_slots)
{
    run_pipeline(1, 400, 0);
}

static void run_suite(void)
{
    alarm(120); /* per policy: a deadlock fails the test instead of hanging it */
    TG_RUN(create_and_budget);
    TG_RUN(refcounts_direct);
    TG_RUN(refcounts_hash);
    TG_RUN(shared_row_read_once);
    TG_RUN(lru_eviction);
    TG_RUN(wait_for_other_batch);
    TG_RUN(try_wait);
    TG_RUN(failed_read);
    TG_RUN(gather_f16_padded);
    TG_RUN(admission_fifo_and_shutdown);
    TG_RUN(no_deadlock_exact_reservation);
    TG_RUN(pipeline_reserved);
    TG_RUN(pipeline_minimum_slots);
}

int main(void)
{
    static const tg_featbuf_policy_t policies[] = {TG_FEATBUF_LRU, TG_FEATBUF_STATIC,
                                                   TG_FEATBUF_NEXT_USE, TG_FEATBUF_WINDOW};
    for (size_t k = 0; k < sizeof policies / sizeof *policies; k++) {
        g_policy = policies[k];
        fprintf(stderr, "policy %s\n", tg_featbuf_policy_name(g_policy));
        run_suite();
    }
    return tg_test_done();
}
