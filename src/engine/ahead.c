/* engine/ahead - see ahead.h. One producer thread per run; one lock (mu) guards the slots'
 * states, the run's position and the failure point; cv is broadcast on every change of them.
 * Lock order: mu, then the error box's own lock (tg_ahead_next raises the error under mu; the
 * producer records it holding neither). */
#include "ahead.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "tiergnn/util.h"

enum { SLOT_FREE = 0, SLOT_FILLING, SLOT_READY, SLOT_TAKEN };

#define NO_FAILURE UINT64_MAX
#define CANCEL_POLL_NS (20 * 1000 * 1000)

struct tg_ahead {
    tg_ahead_opts_t o;
    void *items[TG_AHEAD_MAX_SLOTS];
    char who[128];
    /* under mu */
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int state[TG_AHEAD_MAX_SLOTS];
    uint64_t n;        /* items of the run */
    uint64_t consumed; /* the next item tg_ahead_next hands out */
    uint64_t fail_at;  /* the item produce failed for (NO_FAILURE: none) */
    int done;          /* the producer returned */
    /* any thread */
    atomic_int abort;
    tg_errbox_t err; /* the producer's first error */
    /* the consumer's */
    pthread_t th;
    int running;
};

int tg_ahead_open(tg_ahead_t **out, const tg_ahead_opts_t *o)
{
    *out = NULL;
    const char *who = o && o->who ? o->who : "prepare-ahead";
    if (!o || o->slots < 1 || o->slots > TG_AHEAD_MAX_SLOTS || !o->items || !o->produce)
        return tg_err(-EINVAL, "%s: bad options (%d slots; 1..%d, items and produce needed)", who,
                      o ? o->slots : 0, TG_AHEAD_MAX_SLOTS);
    for (int i = 0; i < o->slots; i++) {
        if (!o->items[i]) return tg_err(-EINVAL, "%s: item %d is NULL", who, i);
        for (int j = 0; j < i; j++)
            if (o->items[i] == o->items[j])
                return tg_err(-EINVAL, "%s: item %d is the same as item %d", who, i, j);
    }
    tg_ahead_t *a = calloc(1, sizeof *a);
    if (!a) return tg_err(-ENOMEM, "%s: out of memory", who);
    a->o = *o;
    memcpy(a->items, o->items, (size_t)o->slots * sizeof *a->items);
    a->o.items = a->items;
    snprintf(a->who, sizeof a->who, "%s", who);
    a->o.who = a->who;
    pthread_mutex_init(&a->mu, NULL);
    pthread_cond_init(&a->cv, NULL);
    atomic_init(&a->abort, 0);
    tg_errbox_init(&a->err);
    a->fail_at = NO_FAILURE;
    *out = a;
    return 0;
}

/* The producer: items 0 .. n-1, each into its slot once the consumer gave it back. */
static void *producer_main(void *arg)
{
    tg_ahead_t *a = arg;
    const int S = a->o.slots;
    pthread_mutex_lock(&a->mu);
    const uint64_t n = a->n;
    for (uint64_t k = 0; k < n; k++) {
        int *st = &a->state[k % (uint64_t)S];
        while (*st != SLOT_FREE && !atomic_load(&a->abort))
            pthread_cond_wait(&a->cv, &a->mu);
        if (atomic_load(&a->abort)) break;
        *st = SLOT_FILLING;
        pthread_mutex_unlock(&a->mu);
        tg_err_clear(); /* a code returned without a message gets strerror's, not a stale one */
        int rc = a->o.produce(a->o.ctx, a->items[k % (uint64_t)S], k, a);
        if (rc < 0 && !(rc == -ECANCELED && atomic_load(&a->abort)))
            tg_errbox_set(&a->err, rc, NULL);
        pthread_mutex_lock(&a->mu);
        if (rc < 0) {
            a->fail_at = k; /* the slot stays FILLING: tg_ahead_stop drops it */
            break;
        }
        *st = SLOT_READY;
        pthread_cond_broadcast(&a->cv);
    }
    a->done = 1;
    pthread_cond_broadcast(&a->cv);
    pthread_mutex_unlock(&a->mu);
    return NULL;
}

int tg_ahead_start(tg_ahead_t *a, uint64_t n)
{
    if (a->running) return tg_err(-EINVAL, "%s: started while a run is going", a->who);
    /* no thread runs: the fields need no lock */
    a->n = n;
    a->consumed = 0;
    a->fail_at = NO_FAILURE;
    a->done = 0;
    atomic_store(&a->abort, 0);
    for (int i = 0; i < a->o.slots; i++)
        a->state[i] = SLOT_FREE;
    int e = pthread_create(&a->th, NULL, producer_main, a);
    if (e != 0) return tg_err(-e, "%s: cannot start its thread: %s", a->who, strerror(e));
    a->running = 1;
    return 0;
}

static void deadline_in(struct timespec *ts, long ns)
{
    clock_gettime(CLOCK_REALTIME, ts);
    ts->tv_nsec += ns;
    if (ts->tv_nsec >= 1000000000L) {
        ts->tv_sec++;
        ts->tv_nsec -= 1000000000L;
    }
}

int tg_ahead_next(tg_ahead_t *a, const atomic_int *cancel, void **item)
{
    *item = NULL;
    if (!a->running) return tg_err(-EINVAL, "%s: no run started", a->who);
    pthread_mutex_lock(&a->mu);
    int rc;
    uint64_t k = a->consumed;
    int *st = &a->state[k % (uint64_t)a->o.slots];
    for (;;) {
        if (atomic_load(&a->abort) || (cancel && atomic_load(cancel))) {
            rc = tg_err(-ECANCELED, "%s: stopped", a->who);
            break;
        }
        if (k >= a->n) {
            rc = 0;
            break;
        }
        if (*st == SLOT_READY) {
            *st = SLOT_TAKEN;
            *item = a->items[k % (uint64_t)a->o.slots];
            a->consumed++;
            rc = 1;
            break;
        }
        if (*st == SLOT_TAKEN) {
            rc = tg_err(-EINVAL, "%s: item %llu's slot is still held by the consumer", a->who,
                        (unsigned long long)k);
            break;
        }
        if (a->fail_at == k) {
            /* 0: produce answered -ECANCELED to an abort */
            rc = tg_errbox_raise(&a->err);
            if (rc == 0) rc = tg_err(-ECANCELED, "%s: stopped", a->who);
            break;
        }
        if (a->done) { /* cannot happen: the producer ends early only on an abort or a failure */
            rc = tg_err(-ECANCELED, "%s: ended before item %llu", a->who, (unsigned long long)k);
            break;
        }
        if (cancel) {
            struct timespec ts;
            deadline_in(&ts, CANCEL_POLL_NS);
            pthread_cond_timedwait(&a->cv, &a->mu, &ts);
        } else {
            pthread_cond_wait(&a->cv, &a->mu);
        }
    }
    pthread_mutex_unlock(&a->mu);
    return rc;
}

int tg_ahead_release(tg_ahead_t *a, void *item)
{
    int rc = -EINVAL;
    pthread_mutex_lock(&a->mu);
    for (int i = 0; i < a->o.slots; i++)
        if (a->items[i] == item && a->state[i] == SLOT_TAKEN) {
            a->state[i] = SLOT_FREE;
            pthread_cond_broadcast(&a->cv);
            rc = 0;
        }
    pthread_mutex_unlock(&a->mu);
    if (rc < 0) return tg_err(rc, "%s: released an item it does not hold", a->who);
    return 0;
}

void tg_ahead_abort(tg_ahead_t *a)
{
    /* under the lock: a waiter between its check and its wait would miss a bare broadcast */
    pthread_mutex_lock(&a->mu);
    atomic_store(&a->abort, 1);
    pthread_cond_broadcast(&a->cv);
    pthread_mutex_unlock(&a->mu);
}

int tg_ahead_aborted(const tg_ahead_t *a)
{
    return atomic_load(&((tg_ahead_t *)a)->abort) != 0;
}

atomic_int *tg_ahead_abort_flag(tg_ahead_t *a)
{
    return &a->abort;
}

int tg_ahead_running(const tg_ahead_t *a)
{
    return a->running;
}

void tg_ahead_stop(tg_ahead_t *a)
{
    if (!a || !a->running) return;
    tg_ahead_abort(a);
    pthread_join(a->th, NULL);
    a->running = 0;
    /* joined: the slots are this thread's */
    for (int i = 0; i < a->o.slots; i++) {
        if (a->state[i] != SLOT_FREE && a->o.drop) a->o.drop(a->o.ctx, a->items[i]);
        a->state[i] = SLOT_FREE;
    }
    /* the run's error goes with it (tg_errbox_t keeps the first one for good) */
    tg_errbox_destroy(&a->err);
    tg_errbox_init(&a->err);
    a->n = a->consumed = 0;
    a->fail_at = NO_FAILURE;
    a->done = 0;
}

void tg_ahead_close(tg_ahead_t *a)
{
    if (!a) return;
    tg_ahead_stop(a);
    tg_errbox_destroy(&a->err);
    pthread_cond_destroy(&a->cv);
    pthread_mutex_destroy(&a->mu);
    free(a);
}
