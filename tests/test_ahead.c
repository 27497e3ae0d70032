/* The prepare-ahead mechanism (src/engine/ahead.c) alone: items come in order with what the
 * producer wrote; the producer never runs more than slots - 1 items ahead of the releases; a
 * producer's error reaches the consumer at its item, with its message, after every item before
 * it; an abort stops production mid-item and the consumer's wait; close while producing and
 * before the first item; a stop drains what is left (every item produced is consumed or dropped,
 * once: ASan sees the rest) and the next run starts clean; misuse is refused. Each item holds a
 * heap buffer, so a leaked or doubly freed item shows under ASan. */
#include "engine/ahead.h"
#include "tg_test.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

typedef struct {
    uint64_t k;
    uint64_t *vals; /* k % 7 + 1 values k * 1000 + i; NULL when empty */
    size_t n;
} item_t;

typedef struct {
    int slots;
    int64_t fail_at;     /* produce fails with a message at this item (-1: never) */
    int64_t bare_at;     /* produce returns -EIO without a message at this item (-1: never) */
    int64_t block_at;    /* produce waits for an abort at this item, then -ECANCELED (-1) */
    int64_t ignore_at;   /* produce waits for an abort at this item, then succeeds (-1) */
    unsigned delay_us;   /* per item */
    atomic_int released; /* releases so far (the consumer's) */
    atomic_int produced, dropped, blocked, too_far;
} ctx_t;

static void ctx_init(ctx_t *c, int slots)
{
    memset(c, 0, sizeof *c);
    c->slots = slots;
    c->fail_at = c->bare_at = c->block_at = c->ignore_at = -1;
}

static int produce(void *ctxp, void *itemp, uint64_t k, tg_ahead_t *a)
{
    ctx_t *c = ctxp;
    item_t *it = itemp;
    if (it->vals)
        return tg_err(-EFAULT, "test: item %llu's slot was not empty", (unsigned long long)k);
    /* slot k % slots is free only once item k - slots was released */
    if ((int64_t)k >= (int64_t)atomic_load(&c->released) + c->slots)
        atomic_fetch_add(&c->too_far, 1);
    it->k = k;
    it->n = k % 7 + 1;
    if (!(it->vals = malloc(it->n * sizeof *it->vals))) return tg_err(-ENOMEM, "test: oom");
    for (size_t i = 0; i < it->n; i++)
        it->vals[i] = k * 1000 + i;
    if (c->delay_us) usleep(c->delay_us);
    if ((int64_t)k == c->block_at || (int64_t)k == c->ignore_at) {
        atomic_store(&c->blocked, 1);
        while (!tg_ahead_aborted(a))
            usleep(200);
        if ((int64_t)k == c->block_at) return -ECANCELED; /* half filled: vals stay for drop */
    }
    if ((int64_t)k == c->fail_at)
        return tg_err(-EIO, "test: item %llu is unreadable", (unsigned long long)k);
    if ((int64_t)k == c->bare_at) return -EIO;
    atomic_fetch_add(&c->produced, 1);
    return 0;
}

static void drop(void *ctxp, void *itemp)
{
    ctx_t *c = ctxp;
    item_t *it = itemp;
    if (it->vals) atomic_fetch_add(&c->dropped, 1);
    free(it->vals);
    it->vals = NULL;
}

typedef struct {
    ctx_t c;
    item_t items[TG_AHEAD_MAX_SLOTS];
    tg_ahead_t *a;
} fix_t;

static void fix_open(fix_t *f, int slots)
{
    memset(f->items, 0, sizeof f->items);
    ctx_init(&f->c, slots);
    void *ptrs[TG_AHEAD_MAX_SLOTS];
    for (int i = 0; i < slots; i++)
        ptrs[i] = &f->items[i];
    tg_ahead_opts_t o = {.slots = slots,
                         .items = ptrs,
                         .produce = produce,
                         .drop = drop,
                         .ctx = &f->c,
                         .who = "test: the producer"};
    f->a = NULL;
    TG_CHECK_OK(tg_ahead_open(&f->a, &o));
}

/* Checks item k's contents, empties it (the consumer moves what it holds out) and releases. */
static int consume(fix_t *f, void *p, uint64_t k, int release)
{
    item_t *it = p;
    int ok = it->k == k && it->vals && it->n == k % 7 + 1;
    for (size_t i = 0; ok && i < it->n; i++)
        ok = it->vals[i] == k * 1000 + i;
    if (!ok)
        TG_FAIL("item %llu: wrong contents (k %llu)", (unsigned long long)k,
                (unsigned long long)it->k);
    if (!release) return ok;
    free(it->vals);
    it->vals = NULL;
    atomic_fetch_add(&f->c.released, 1);
    TG_CHECK_OK(tg_ahead_release(f->a, p));
    return ok;
}

/* The items of a run in order, many of them, through 1, 2 and 3 slots. */
TG_TEST(many_items_in_order)
{
    for (int slots = 1; slots <= 3; slots++) {
        fix_t f;
        fix_open(&f, slots);
        if (!f.a) return;
        const uint64_t n = 20000;
        TG_CHECK_OK(tg_ahead_start(f.a, n));
        void *p;
        uint64_t k = 0;
        int rc;
        while ((rc = tg_ahead_next(f.a, NULL, &p)) > 0) {
            if (!consume(&f, p, k, 1)) break;
            k++;
        }
        TG_CHECK(rc == 0);
        TG_CHECK_EQ_U64(k, n);
        TG_CHECK(tg_ahead_next(f.a, NULL, &p) == 0 && !p); /* stays at the end */
        tg_ahead_stop(f.a);
        TG_CHECK_EQ_U64(atomic_load(&f.c.produced), n);
        TG_CHECK_EQ_U64(atomic_load(&f.c.dropped), 0);
        TG_CHECK_EQ_U64(atomic_load(&f.c.too_far), 0);
        tg_ahead_close(f.a);
    }
}

/* A run of no items ends at once; a stop without a run, and a close without one, are no-ops. */
TG_TEST(empty_run)
{
    fix_t f;
    fix_open(&f, 2);
    if (!f.a) return;
    tg_ahead_stop(f.a);
    TG_CHECK_OK(tg_ahead_start(f.a, 0));
    void *p = &p;
    TG_CHECK(tg_ahead_next(f.a, NULL, &p) == 0 && !p);
    tg_ahead_stop(f.a);
    TG_CHECK(!tg_ahead_running(f.a));
    tg_ahead_close(f.a);
    tg_ahead_close(NULL);
}

/* The producer fails at item 5: items 0..4 come first, then its error with its message, at item
 * 5 and again after; the half-filled item is dropped at the stop. Also with one slot, at item 0,
 * and with a code returned without a message (strerror's, not a stale one). */
TG_TEST(producer_error_in_order)
{
    for (int slots = 1; slots <= 2; slots++)
        for (int at = 0; at <= 5; at += 5) {
            fix_t f;
            fix_open(&f, slots);
            if (!f.a) return;
            f.c.fail_at = at;
            f.c.delay_us = 300; /* the consumer waits, then the failure lands */
            TG_CHECK_OK(tg_ahead_start(f.a, 10));
            void *p;
            int rc;
            uint64_t k = 0;
            while ((rc = tg_ahead_next(f.a, NULL, &p)) > 0)
                consume(&f, p, k++, 1);
            TG_CHECK_EQ_U64(k, (uint64_t)at);
            TG_CHECK(rc == -EIO);
            char want[64];
            snprintf(want, sizeof want, "test: item %d is unreadable", at);
            if (!strstr(tg_errmsg(), want)) TG_FAIL("message '%s' lacks '%s'", tg_errmsg(), want);
            TG_CHECK_ERR(tg_ahead_next(f.a, NULL, &p), "is unreadable");
            tg_ahead_stop(f.a);
            TG_CHECK_EQ_U64(atomic_load(&f.c.dropped), 1);
            for (int i = 0; i < slots; i++)
                TG_CHECK(!f.items[i].vals);
            tg_ahead_close(f.a);
        }
    fix_t f;
    fix_open(&f, 2);
    if (!f.a) return;
    tg_err(-EINVAL, "a stale message of this thread");
    f.c.bare_at = 1;
    TG_CHECK_OK(tg_ahead_start(f.a, 4));
    void *p;
    TG_CHECK(tg_ahead_next(f.a, NULL, &p) == 1);
    consume(&f, p, 0, 1);
    TG_CHECK(tg_ahead_next(f.a, NULL, &p) == -EIO);
    TG_CHECK(strstr(tg_errmsg(), "Input/output error") != NULL);
    tg_ahead_close(f.a); /* stops: drops the half-filled item */
}

/* An error for an item the consumer never reaches is dropped with the run; the next run of the
 * same mechanism starts clean. */
TG_TEST(unreached_error_goes_with_its_run)
{
    fix_t f;
    fix_open(&f, 2);
    if (!f.a) return;
    f.c.fail_at = 3;
    TG_CHECK_OK(tg_ahead_start(f.a, 8));
    void *p;
    TG_CHECK(tg_ahead_next(f.a, NULL, &p) == 1);
    consume(&f, p, 0, 1);
    usleep(20000); /* let the producer reach its failure */
    tg_ahead_stop(f.a);
    f.c.fail_at = -1;
    atomic_store(&f.c.released, 0);
    TG_CHECK_OK(tg_ahead_start(f.a, 6));
    uint64_t k = 0;
    int rc;
    while ((rc = tg_ahead_next(f.a, NULL, &p)) > 0)
        consume(&f, p, k++, 1);
    TG_CHECK(rc == 0);
    TG_CHECK_EQ_U64(k, 6);
    tg_ahead_close(f.a);
}

typedef struct {
    tg_ahead_t *a;
    atomic_int *flag; /* set this one instead of aborting when non-NULL */
    unsigned after_us;
} aborter_t;

static void *aborter_main(void *arg)
{
    aborter_t *x = arg;
    usleep(x->after_us);
    if (x->flag)
        atomic_store(x->flag, 1);
    else
        tg_ahead_abort(x->a);
    return NULL;
}

/* An abort from another thread while the producer is mid-item and the consumer waits for it:
 * the consumer gets -ECANCELED, produce stops (its -ECANCELED is no error), the stop drops the
 * half-filled item and the item the consumer still holds. */
TG_TEST(abort_mid_production)
{
    fix_t f;
    fix_open(&f, 2);
    if (!f.a) return;
    f.c.block_at = 1;
    TG_CHECK_OK(tg_ahead_start(f.a, 50));
    void *p;
    TG_CHECK(tg_ahead_next(f.a, NULL, &p) == 1);
    consume(&f, p, 0, 0); /* held, not released */
    pthread_t th;
    aborter_t x = {.a = f.a, .after_us = 30000};
    TG_CHECK(pthread_create(&th, NULL, aborter_main, &x) == 0);
    double t0 = tg_now();
    TG_CHECK_ERR(tg_ahead_next(f.a, NULL, &p), "stopped");
    TG_CHECK(tg_now() - t0 < 5);
    pthread_join(th, NULL);
    TG_CHECK(tg_ahead_aborted(f.a));
    TG_CHECK(atomic_load(tg_ahead_abort_flag(f.a)) != 0);
    TG_CHECK(atomic_load(&f.c.blocked) == 1);
    TG_CHECK_ERR(tg_ahead_next(f.a, NULL, &p), "stopped"); /* and stays so */
    tg_ahead_stop(f.a);
    TG_CHECK_EQ_U64(atomic_load(&f.c.dropped), 2);
    /* a new run is not aborted */
    atomic_store(&f.c.released, 0);
    f.c.block_at = -1;
    TG_CHECK_OK(tg_ahead_start(f.a, 3));
    TG_CHECK(!tg_ahead_aborted(f.a));
    uint64_t k = 0;
    while (tg_ahead_next(f.a, NULL, &p) > 0)
        consume(&f, p, k++, 1);
    TG_CHECK_EQ_U64(k, 3);
    tg_ahead_close(f.a);
}

/* The caller's own stop flag (a pipeline's): the wait ends soon after it is set, the run goes on
 * until the stop. */
TG_TEST(cancel_flag_ends_the_wait)
{
    fix_t f;
    fix_open(&f, 2);
    if (!f.a) return;
    f.c.block_at = 0;
    atomic_int flag;
    atomic_init(&flag, 0);
    TG_CHECK_OK(tg_ahead_start(f.a, 4));
    pthread_t th;
    aborter_t x = {.a = f.a, .flag = &flag, .after_us = 30000};
    TG_CHECK(pthread_create(&th, NULL, aborter_main, &x) == 0);
    void *p;
    double t0 = tg_now();
    TG_CHECK_ERR(tg_ahead_next(f.a, &flag, &p), "stopped");
    TG_CHECK(tg_now() - t0 < 5);
    pthread_join(th, NULL);
    TG_CHECK(!tg_ahead_aborted(f.a));
    tg_ahead_stop(f.a); /* aborts the blocked produce */
    TG_CHECK_EQ_U64(atomic_load(&f.c.dropped), 1);
    tg_ahead_close(f.a);
}

/* Close while the producer is mid-item (it polls the abort) and while it waits for a slot. */
TG_TEST(close_while_producing)
{
    fix_t f;
    fix_open(&f, 2);
    if (!f.a) return;
    f.c.ignore_at = 0; /* finishes item 0 after the abort: a READY item to drop */
    TG_CHECK_OK(tg_ahead_start(f.a, 100));
    while (!atomic_load(&f.c.blocked))
        usleep(100);
    tg_ahead_close(f.a);
    TG_CHECK_EQ_U64(atomic_load(&f.c.dropped), 1);
    for (int i = 0; i < 2; i++)
        TG_CHECK(!f.items[i].vals);

    fix_open(&f, 2);
    if (!f.a) return;
    TG_CHECK_OK(tg_ahead_start(f.a, 100));
    while (atomic_load(&f.c.produced) < 2) /* both slots full: the producer waits */
        usleep(100);
    usleep(2000);
    TG_CHECK_EQ_U64(atomic_load(&f.c.produced), 2);
    tg_ahead_close(f.a);
    TG_CHECK_EQ_U64(atomic_load(&f.c.dropped), 2);
}

/* Close right after the start, before any item is asked for (the producer may be anywhere), and
 * a close without a start. */
TG_TEST(close_before_the_first_item)
{
    for (int i = 0; i < 200; i++) {
        fix_t f;
        fix_open(&f, 1 + i % 3);
        if (!f.a) return;
        if (i % 4 != 3) TG_CHECK_OK(tg_ahead_start(f.a, 1 + (uint64_t)i));
        if (i % 2) usleep(50);
        tg_ahead_close(f.a);
        TG_CHECK_EQ_U64(atomic_load(&f.c.dropped), atomic_load(&f.c.produced));
        for (int j = 0; j < 3; j++)
            TG_CHECK(!f.items[j].vals);
    }
}

/* Passes back to back, each stopped at a different point: every item produced is consumed or
 * dropped exactly once, and each run hands out items 0, 1, ... of its own. */
TG_TEST(drain_between_passes)
{
    fix_t f;
    fix_open(&f, 2);
    if (!f.a) return;
    int consumed = 0;
    for (int pass = 0; pass < 300; pass++) {
        atomic_store(&f.c.released, 0);
        uint64_t n = 1 + (uint64_t)pass % 9, stop_at = (uint64_t)pass * 7 % (n + 2);
        int hold = pass % 3 == 0;
        TG_CHECK_OK(tg_ahead_start(f.a, n));
        void *p;
        int rc = 0;
        uint64_t k = 0;
        while (k < stop_at && (rc = tg_ahead_next(f.a, NULL, &p)) > 0) {
            int last = k + 1 == stop_at;
            consume(&f, p, k, !(last && hold));
            if (!(last && hold)) consumed++;
            k++;
        }
        TG_CHECK(rc >= 0);
        TG_CHECK_EQ_U64(k, TG_MIN(stop_at, n));
        tg_ahead_stop(f.a);
        TG_CHECK(!tg_ahead_running(f.a));
        for (int i = 0; i < 2; i++)
            TG_CHECK(!f.items[i].vals);
    }
    TG_CHECK_EQ_U64(atomic_load(&f.c.produced), consumed + atomic_load(&f.c.dropped));
    TG_CHECK_EQ_U64(atomic_load(&f.c.too_far), 0);
    tg_ahead_close(f.a);
}

/* Misuse is refused with a message: bad options, a second start, a release of an item not held,
 * asking for item k + slots while item k is still held, next without a run. */
TG_TEST(misuse_is_refused)
{
    item_t it[2];
    memset(it, 0, sizeof it);
    void *same[2] = {&it[0], &it[0]}, *ok[2] = {&it[0], &it[1]};
    tg_ahead_t *a = NULL;
    tg_ahead_opts_t o = {.slots = 2, .items = same, .produce = produce};
    TG_CHECK_ERR(tg_ahead_open(&a, &o), "item 1 is the same as item 0");
    TG_CHECK(!a);
    void *none[2] = {&it[0], NULL};
    o.items = none;
    TG_CHECK_ERR(tg_ahead_open(&a, &o), "item 1 is NULL");
    o.items = ok;
    o.slots = 0;
    TG_CHECK_ERR(tg_ahead_open(&a, &o), "bad options");
    o.slots = TG_AHEAD_MAX_SLOTS + 1;
    TG_CHECK_ERR(tg_ahead_open(&a, &o), "bad options");
    o.slots = 2;
    o.produce = NULL;
    TG_CHECK_ERR(tg_ahead_open(&a, &o), "bad options");

    fix_t f;
    fix_open(&f, 2);
    if (!f.a) return;
    void *p;
    TG_CHECK_ERR(tg_ahead_next(f.a, NULL, &p), "no run started");
    TG_CHECK_OK(tg_ahead_start(f.a, 5));
    TG_CHECK_ERR(tg_ahead_start(f.a, 5), "started while a run is going");
    TG_CHECK_ERR(tg_ahead_release(f.a, &f.items[0]), "does not hold");
    void *p0, *p1;
    TG_CHECK(tg_ahead_next(f.a, NULL, &p0) == 1);
    TG_CHECK(tg_ahead_next(f.a, NULL, &p1) == 1);
    TG_CHECK(p0 != p1);
    TG_CHECK_ERR(tg_ahead_next(f.a, NULL, &p), "still held");
    TG_CHECK_ERR(tg_ahead_release(f.a, &it[0]), "does not hold");
    consume(&f, p0, 0, 1);
    TG_CHECK_ERR(tg_ahead_release(f.a, p0), "does not hold"); /* twice */
    TG_CHECK(tg_ahead_next(f.a, NULL, &p) == 1);
    consume(&f, p, 2, 1);
    tg_ahead_close(f.a); /* p1 still held: dropped */
    TG_CHECK(!f.items[0].vals && !f.items[1].vals);
}

int main(void)
{
    TG_RUN(many_items_in_order);
    TG_RUN(empty_run);
    TG_RUN(producer_error_in_order);
    TG_RUN(unreached_error_goes_with_its_run);
    TG_RUN(abort_mid_production);
    TG_RUN(cancel_flag_ends_the_wait);
    TG_RUN(close_while_producing);
    TG_RUN(close_before_the_first_item);
    TG_RUN(drain_between_passes);
    TG_RUN(misuse_is_refused);
    return tg_test_done();
}
