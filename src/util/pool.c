/* Thread pool for data-parallel loops, and the bounded queue used by pipelines. */
#include "tiergnn/util.h"

#include <stdlib.h>

struct tg_pool {
    int n;
    pthread_t *th;
    pthread_mutex_t mu;
    pthread_cond_t cv_work, cv_done;
    uint64_t gen; /* incremented for each tg_pool_for */
    int pending;  /* workers still running the current job */
    int stop;
    tg_pool_fn fn;
    void *ctx;
    size_t n_items;
};

typedef struct {
    tg_pool_t *p;
    int tid;
} worker_arg_t;

static void range_of(size_t n, int nth, int tid, size_t *b, size_t *e)
{
    size_t base = n / (size_t)nth, rem = n % (size_t)nth, t = (size_t)tid;
    *b = t * base + TG_MIN(t, rem);
    *e = *b + base + (t < rem ? 1 : 0);
}

static void *worker(void *arg)
{
    worker_arg_t wa = *(worker_arg_t *)arg;
    free(arg);
    tg_pool_t *p = wa.p;
    uint64_t seen = 0;
    pthread_mutex_lock(&p->mu);
    for (;;) {
        while (!p->stop && p->gen == seen)
            pthread_cond_wait(&p->cv_work, &p->mu);
        if (p->stop) break;
        seen = p->gen;
        tg_pool_fn fn = p->fn;
        void *ctx = p->ctx;
        size_t b, e;
        range_of(p->n_items, p->n, wa.tid, &b, &e);
        pthread_mutex_unlock(&p->mu);
        if (b < e) fn(ctx, b, e, wa.tid);
        pthread_mutex_lock(&p->mu);
        if (--p->pending == 0) pthread_cond_signal(&p->cv_done);
    }
    pthread_mutex_unlock(&p->mu);
    return NULL;
}

int tg_pool_create(tg_pool_t **out, int nthreads)
{
    *out = NULL;
    if (nthreads < 1 || nthreads > 1024)
        return tg_err(-EINVAL, "thread pool: thread count %d out of range 1..1024", nthreads);
    tg_pool_t *p = calloc(1, sizeof *p);
    if (!p) return tg_err(-ENOMEM, "thread pool: out of memory");
    p->n = nthreads;
    pthread_mutex_init(&p->mu, NULL);
    pthread_cond_init(&p->cv_work, NULL);
    pthread_cond_init(&p->cv_done, NULL);
    p->th = calloc((size_t)nthreads, sizeof *p->th);
    if (!p->th) {
        tg_pool_destroy(p);
        return tg_err(-ENOMEM, "thread pool: out of memory");
    }
    for (int i = 1; i < nthreads; i++) {
        worker_arg_t *wa = malloc(sizeof *wa);
        if (!wa) {
            p->n = i;
            tg_pool_destroy(p);
            return tg_err(-ENOMEM, "thread pool: out of memory");
        }
        wa->p = p;
        wa->tid = i;
        int rc = pthread_create(&p->th[i], NULL, worker, wa);
        if (rc) {
            free(wa);
            p->n = i;
            tg_pool_destroy(p);
            return tg_err(-rc, "thread pool: cannot start thread %d", i);
        }
    }
    *out = p;
    return 0;
}

void tg_pool_destroy(tg_pool_t *p)
{
    if (!p) return;
    pthread_mutex_lock(&p->mu);
    p->stop = 1;
    pthread_cond_broadcast(&p->cv_work);
    pthread_mutex_unlock(&p->mu);
    for (int i = 1; i < p->n; i++)
        if (p->th) pthread_join(p->th[i], NULL);
    pthread_mutex_destroy(&p->mu);
    pthread_cond_destroy(&p->cv_work);
    pthread_cond_destroy(&p->cv_done);
    free(p->th);
    free(p);
}

int tg_pool_nthreads(const tg_pool_t *p)
{
    return p ? p->n : 1;
}

void tg_pool_for(tg_pool_t *p, size_t n, tg_pool_fn fn, void *ctx)
{
    if (!p || p->n == 1 || n <= 1) {
        if (n) fn(ctx, 0, n, 0);
        return;
    }
    pthread_mutex_lock(&p->mu);
    p->fn = fn;
    p->ctx = ctx;
    p->n_items = n;
    p->pending = p->n - 1;
    p->gen++;
    pthread_cond_broadcast(&p->cv_work);
    pthread_mutex_unlock(&p->mu);
    size_t b, e;
    range_of(n, p->n, 0, &b, &e);
    if (b < e) fn(ctx, b, e, 0);
    pthread_mutex_lock(&p->mu);
    while (p->pending > 0)
        pthread_cond_wait(&p->cv_done, &p->mu);
    pthread_mutex_unlock(&p->mu);
}

/* ---------------------------------------------------------------- queue */

struct tg_queue {
    pthread_mutex_t mu;
    pthread_cond_t not_empty, not_full;
    void **items;
    size_t cap, head, len;
    int closed;
};

int tg_queue_create(tg_queue_t **out, size_t capacity)
{
    *out = NULL;
    if (capacity == 0) return tg_err(-EINVAL, "queue: capacity must be at least 1");
    tg_queue_t *q = calloc(1, sizeof *q);
    if (!q || !(q->items = calloc(capacity, sizeof(void *)))) {
        free(q);
        return tg_err(-ENOMEM, "queue: out of memory");
    }
    q->cap = capacity;
    pthread_mutex_init(&q->mu, NULL);
    pthread_cond_init(&q->not_empty, NULL);
    pthread_cond_init(&q->not_full, NULL);
    *out = q;
    return 0;
}

void tg_queue_destroy(tg_queue_t *q)
{
    if (!q) return;
    pthread_mutex_destroy(&q->mu);
    pthread_cond_destroy(&q->not_empty);
    pthread_cond_destroy(&q->not_full);
    free(q->items);
    free(q);
}

int tg_queue_push(tg_queue_t *q, void *item)
{
    pthread_mutex_lock(&q->mu);
    while (!q->closed && q->len == q->cap)
        pthread_cond_wait(&q->not_full, &q->mu);
    if (q->closed) {
        pthread_mutex_unlock(&q->mu);
        return -EPIPE;
    }
    q->items[(q->head + q->len) % q->cap] = item;
    q->len++;
    pthread_cond_signal(&q->not_empty);
    pthread_mutex_unlock(&q->mu);
    return 0;
}

int tg_queue_pop(tg_queue_t *q, void **item)
{
    pthread_mutex_lock(&q->mu);
    while (!q->closed && q->len == 0)
        pthread_cond_wait(&q->not_empty, &q->mu);
    if (q->len == 0) {
        pthread_mutex_unlock(&q->mu);
        *item = NULL;
        return -EPIPE;
    }
    *item = q->items[q->head];
    q->head = (q->head + 1) % q->cap;
    q->len--;
    pthread_cond_signal(&q->not_full);
    pthread_mutex_unlock(&q->mu);
    return 0;
}

void tg_queue_close(tg_queue_t *q)
{
    pthread_mutex_lock(&q->mu);
    q->closed = 1;
    pthread_cond_broadcast(&q->not_empty);
    pthread_cond_broadcast(&q->not_full);
    pthread_mutex_unlock(&q->mu);
}

size_t tg_queue_len(tg_queue_t *q)
{
    pthread_mutex_lock(&q->mu);
    size_t n = q->len;
    pthread_mutex_unlock(&q->mu);
    return n;
}
