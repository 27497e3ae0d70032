/* Concurrent, deterministic sampling loader, tg_sloader (see tiergnn/graph.h).
 *
 * Worker t owns batches F+t, F+t+T, F+t+2T... (F = first_batch) and its own bounded queue; the
 * consumer pops batch b from queue (b - F) mod T. Content depends only on (seed, epoch, batch id),
 * order only on the batch id. */
#include "tiergnn/graph.h"

#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

typedef struct worker worker_t;

struct tg_sloader {
    tg_sloader_opts_t o;
    tg_plan_t plan; /* a view over o.seeds: what batch b is */
    uint64_t num_batches, next;
    int nthreads;
    worker_t *w;       /* (nthreads) */
    tg_sampler_t *inl; /* inline sampler when nthreads == 0 */
    atomic_int stop;
    int failed;
};

struct worker {
    tg_sloader_t *l;
    int tid;
    pthread_t th;
    int started;
    tg_sampler_t *s;
    tg_queue_t *q;
};

/* A worker's failure travels through its queue as an item with this payload, so the consumer
 * sees it exactly at the batch that failed. */
typedef struct {
    tg_sloader_item_t item;
    int rc;
    char msg[512];
} slot_t;

static void item_release(tg_sloader_t *l, tg_sloader_item_t *it)
{
    if (!it) return;
    if (it->payload && l->o.hook_free) l->o.hook_free(l->o.ctx, it->payload);
    tg_batch_free(&it->batch);
    free(it);
}

/* Samples batch b into a new slot (never NULL unless out of memory). */
static slot_t *make_batch(tg_sloader_t *l, tg_sampler_t *s, uint64_t b)
{
    slot_t *sl = calloc(1, sizeof *sl);
    if (!sl) return NULL;
    const tg_sloader_opts_t *o = &l->o;
    const uint64_t *seeds;
    tg_rng_t r;
    uint64_t cnt = tg_plan_batch(&l->plan, b, &seeds, &r);
    double t0 = tg_now();
    int rc = tg_sampler_sample(s, seeds, (size_t)cnt, &r, &sl->item.batch);
    double t1 = tg_now();
    sl->item.sample_s = t1 - t0;
    if (rc >= 0) {
        sl->item.batch.id = b;
        if (o->hook) {
            rc = o->hook(o->ctx, &sl->item);
            sl->item.hook_s = tg_now() - t1;
        }
    }
    if (rc < 0) {
        sl->rc = rc;
        snprintf(sl->msg, sizeof sl->msg, "batch %llu: %s", (unsigned long long)b, tg_errmsg());
    }
    return sl;
}

static void *worker_main(void *arg)
{
    worker_t *w = arg;
    tg_sloader_t *l = w->l;
    for (uint64_t b = l->o.first_batch + (uint64_t)w->tid; b < l->num_batches;
         b += (uint64_t)l->nthreads) {
        if (atomic_load(&l->stop)) break;
        slot_t *sl = make_batch(l, w->s, b);
        if (!sl) {
            /* Without memory for even the error slot, closing the queue makes the consumer's
             * pop fail, which it reports as an out-of-memory error. */
            tg_queue_close(w->q);
            break;
        }
        int failed = sl->rc < 0;
        if (tg_queue_push(w->q, sl) < 0) {
            item_release(l, &sl->item);
            break;
        }
        if (failed) break;
    }
    return NULL;
}

uint64_t tg_sloader_num_batches(const tg_sloader_t *l)
{
    return l->num_batches;
}

int tg_sloader_start(tg_sloader_t **out, const tg_sloader_opts_t *o)
{
    *out = NULL;
    if (!o->adj || !o->fanouts || (!o->seeds && o->num_seeds))
        return tg_err(-EINVAL, "loader: adjacency, fanouts and seeds are required");
    if (o->batch_size == 0) return tg_err(-EINVAL, "loader: batch size must be at least 1");
    if (o->num_threads < 0 || o->num_threads > 256)
        return tg_err(-EINVAL, "loader: %d sampler threads, expected 0..256", o->num_threads);
    tg_sloader_t *l = calloc(1, sizeof *l);
    if (!l) return tg_err(-ENOMEM, "loader: out of memory");
    l->o = *o;
    if (!l->o.prefetch) l->o.prefetch = 2;
    tg_plan_view(&l->plan, o->seeds, o->num_seeds, o->batch_size, o->seed, o->epoch);
    l->num_batches = l->plan.num_batches;
    if (o->first_batch > l->num_batches) {
        uint64_t nb = l->num_batches;
        free(l);
        return tg_err(-EINVAL, "loader: first batch %llu beyond the %llu batches of the pass",
                      (unsigned long long)o->first_batch, (unsigned long long)nb);
    }
    l->next = o->first_batch;
    /* More workers than batches would only idle. */
    l->nthreads = (int)TG_MIN((uint64_t)o->num_threads, l->num_batches - o->first_batch);
    atomic_init(&l->stop, 0);
    int rc = 0;
    if (l->nthreads == 0) {
        rc = tg_sampler_open(&l->inl, o->sampler, o->adj, o->num_layers, o->fanouts);
        if (rc < 0) goto err;
        *out = l;
        return 0;
    }
    l->w = calloc((size_t)l->nthreads, sizeof *l->w);
    if (!l->w) {
        rc = tg_err(-ENOMEM, "loader: out of memory");
        goto err;
    }
    for (int t = 0; t < l->nthreads; t++) {
        worker_t *w = &l->w[t];
        w->l = l;
        w->tid = t;
        if ((rc = tg_sampler_open(&w->s, o->sampler, o->adj, o->num_layers, o->fanouts)) < 0)
            goto err;
        if ((rc = tg_queue_create(&w->q, l->o.prefetch)) < 0) goto err;
    }
    for (int t = 0; t < l->nthreads; t++) {
        int e = pthread_create(&l->w[t].th, NULL, worker_main, &l->w[t]);
        if (e) {
            rc = tg_err(-e, "loader: cannot start sampler thread %d", t);
            goto err;
        }
        l->w[t].started = 1;
    }
    *out = l;
    return 0;
err:
    tg_sloader_stop(l);
    return rc;
}

int tg_sloader_next(tg_sloader_t *l, tg_sloader_item_t **it)
{
    *it = NULL;
    if (l->failed) return tg_err(-EINVAL, "loader: next batch requested after an error");
    if (l->next >= l->num_batches) return 0;
    uint64_t b = l->next;
    slot_t *sl;
    if (l->nthreads == 0) {
        sl = make_batch(l, l->inl, b);
        if (!sl)
            return tg_err(-ENOMEM, "loader: out of memory for batch %llu", (unsigned long long)b);
    } else {
        void *p;
        if (tg_queue_pop(l->w[(b - l->o.first_batch) % (uint64_t)l->nthreads].q, &p) < 0) {
            l->failed = 1;
            return tg_err(-ENOMEM, "loader: sampler thread for batch %llu stopped (out of memory)",
                          (unsigned long long)b);
        }
        sl = p;
    }
    if (sl->rc < 0) {
        int rc = sl->rc;
        l->failed = 1;
        tg_err(rc, "%s", sl->msg);
        item_release(l, &sl->item);
        return rc;
    }
    l->next++;
    *it = &sl->item; /* item is the slot's first member: freeing it frees the slot */
    return 1;
}

void tg_sloader_item_free(tg_sloader_t *l, tg_sloader_item_t *it)
{
    item_release(l, it);
}

void tg_sloader_stop(tg_sloader_t *l)
{
    if (!l) return;
    atomic_store(&l->stop, 1);
    if (l->w) {
        /* Closing first wakes a worker blocked on a full queue; it then frees its batch. */
        for (int t = 0; t < l->nthreads; t++)
            if (l->w[t].q) tg_queue_close(l->w[t].q);
        for (int t = 0; t < l->nthreads; t++) {
            worker_t *w = &l->w[t];
            if (w->started) pthread_join(w->th, NULL);
            if (w->q) {
                void *p;
                while (tg_queue_pop(w->q, &p) == 0)
                    item_release(l, p);
                tg_queue_destroy(w->q);
            }
            tg_sampler_destroy(w->s);
        }
        free(l->w);
    }
    tg_sampler_destroy(l->inl);
    free(l);
}
