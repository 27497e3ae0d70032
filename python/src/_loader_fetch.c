/* _loader_fetch.c - the thread that waits in tg_loader_next for the Loader, so that the
 * caller's own wait can be interrupted (see _loader.h). */
#include "_loader.h"

#include <errno.h>
#include <string.h>
#include <time.h>

#include "tiergnn/util.h"

static void *fetch_main(void *arg)
{
    tgpy_fetch_t *f = arg;
    pthread_mutex_lock(&f->mu);
    for (;;) {
        while (!f->quit && (f->paused || !f->want || f->have))
            pthread_cond_wait(&f->cv, &f->mu);
        if (f->quit) break;
        f->running = 1;
        pthread_mutex_unlock(&f->mu);
        const tg_loader_batch_t *b = NULL;
        int rc = tg_loader_next(f->L, &b);
        pthread_mutex_lock(&f->mu);
        f->rc = rc;
        f->b = b;
        /* tg_errmsg() is this thread's: the caller raises a copy */
        snprintf(f->msg, sizeof f->msg, "%s", rc < 0 ? tg_errmsg() : "");
        f->have = 1;
        f->running = 0;
        pthread_cond_broadcast(&f->cv);
    }
    pthread_mutex_unlock(&f->mu);
    return NULL;
}

int tgpy_fetch_start(tgpy_fetch_t *f, tg_loader_t *L)
{
    memset(f, 0, sizeof *f);
    atomic_init(&f->waiters, 0);
    f->L = L;
    pthread_mutex_init(&f->mu, NULL);
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC); /* timed waits immune to clock changes */
    pthread_cond_init(&f->cv, &ca);
    pthread_condattr_destroy(&ca);
    int rc = pthread_create(&f->thr, NULL, fetch_main, f);
    if (rc) {
        pthread_cond_destroy(&f->cv);
        pthread_mutex_destroy(&f->mu);
        return tg_err(-rc, "loader: cannot start the fetch thread: %s", strerror(rc));
    }
    f->started = 1;
    return 0;
}

static void deadline_after(struct timespec *ts, double s)
{
    clock_gettime(CLOCK_MONOTONIC, ts);
    long ns = ts->tv_nsec + (long)(s * 1e9);
    ts->tv_sec += ns / 1000000000L;
    ts->tv_nsec = ns % 1000000000L;
}

int tgpy_fetch_collect(tgpy_fetch_t *f, double timeout_s, int *rc, const tg_loader_batch_t **b,
                       char *msg, size_t msg_size)
{
    struct timespec until;
    deadline_after(&until, timeout_s);
    pthread_mutex_lock(&f->mu);
    if (!f->want && !f->have) {
        f->want = 1;
        pthread_cond_broadcast(&f->cv);
    }
    while (!f->have && !f->quit)
        if (pthread_cond_timedwait(&f->cv, &f->mu, &until) == ETIMEDOUT) break;
    int got = f->have;
    if (got) {
        *rc = f->rc;
        *b = f->b;
        snprintf(msg, msg_size, "%s", f->msg);
        f->have = f->want = 0;
    }
    pthread_mutex_unlock(&f->mu);
    return got;
}

void tgpy_fetch_pause(tgpy_fetch_t *f)
{
    pthread_mutex_lock(&f->mu);
    while (f->paused) /* one pauser at a time: the C loader's calls are one at a time */
        pthread_cond_wait(&f->cv, &f->mu);
    f->paused = 1;
    while (f->running)
        pthread_cond_wait(&f->cv, &f->mu);
    pthread_mutex_unlock(&f->mu);
}

void tgpy_fetch_resume(tgpy_fetch_t *f)
{
    pthread_mutex_lock(&f->mu);
    f->paused = 0;
    pthread_cond_broadcast(&f->cv);
    pthread_mutex_unlock(&f->mu);
}

const tg_loader_batch_t *tgpy_fetch_discard(tgpy_fetch_t *f)
{
    pthread_mutex_lock(&f->mu);
    const tg_loader_batch_t *b = f->have && f->rc > 0 ? f->b : NULL;
    f->have = f->want = 0;
    pthread_mutex_unlock(&f->mu);
    return b;
}

void tgpy_fetch_stop(tgpy_fetch_t *f)
{
    if (!f->started) return;
    pthread_mutex_lock(&f->mu);
    f->quit = 1;
    pthread_cond_broadcast(&f->cv);
    pthread_mutex_unlock(&f->mu);
    pthread_join(f->thr, NULL);
    while (atomic_load(&f->waiters) > 0) { /* a caller on another thread leaves collect */
        pthread_mutex_lock(&f->mu);
        pthread_cond_broadcast(&f->cv);
        pthread_mutex_unlock(&f->mu);
        struct timespec ts = {0, 1000000};
        nanosleep(&ts, NULL);
    }
    pthread_cond_destroy(&f->cv);
    pthread_mutex_destroy(&f->mu);
    f->started = 0;
}
