/* The thread pipeline of a pass (see pipeline.h): loader -> workers -> training window ->
 * trainer -> releaser, one first-error box, matrix places taken in id order, stop and drain. */
#include "pipeline.h"

#include <stdlib.h>
#include <string.h>

typedef struct {
    tg_sloader_item_t *it;
    float *X;    /* (num_nodes, dim), x_alloc's; in gather mode it is it->payload (the loader
                    frees it) */
    int counted; /* worker mode: holds one of the matrix places (x_max) */
} item_t;

struct tg_pipe {
    const tg_pipe_opts_t *o;
    const tg_pass_t *p;
    tg_sloader_t *ld;
    int gather_mode;
    /* the loader side: tg_sloader_next is serialised; pulled counts batches handed to workers */
    pthread_mutex_t ld_mu;
    uint64_t pulled;
    int stop_pull;
    /* Set by the trainer before it takes ld_mu to stop pulling: a worker that waits for a matrix
     * place while holding ld_mu gives up its unplaced batches instead, so the trainer never
     * waits on ld_mu behind a wait that only the trainer's progress could end. */
    atomic_int stopping;
    /* the training window: a reorder window (in order) or a FIFO */
    pthread_mutex_t mu;
    pthread_cond_t cv_put, cv_get;
    item_t **ring;
    size_t cap, count, head;
    uint64_t next; /* in order: index (from first_batch) of the batch the trainer takes next */
    int in_order, closed;
    tg_queue_t *relq;
    tg_errbox_t err;
    atomic_int abort; /* stop working (an error, or an in-order stop) */
    _Atomic uint64_t gather_ns, sample_ns, release_ns;
    _Atomic int64_t x_bytes;
    _Atomic uint64_t x_peak;
    /* Matrices in flight, from a worker taking a group to the releaser: at most x_max. */
    pthread_mutex_t x_mu;
    pthread_cond_t x_cv;
    int x_count, x_max;
};

/* ---------------------------------------------------------------- small parts */

void tg_pipe_count_bytes(tg_pipe_t *P, int64_t delta)
{
    int64_t now = atomic_fetch_add(&P->x_bytes, delta) + delta;
    if (delta <= 0 || now <= 0) return;
    uint64_t peak = atomic_load(&P->x_peak);
    while ((uint64_t)now > peak &&
           !atomic_compare_exchange_weak(&P->x_peak, &peak, (uint64_t)now)) {
    }
}

int tg_pipe_aborted(const tg_pipe_t *P)
{
    return atomic_load(&((tg_pipe_t *)P)->abort);
}

atomic_int *tg_pipe_abort_flag(tg_pipe_t *P)
{
    return &P->abort;
}

/* Every X the pipeline makes has a header before it that holds its bytes (two size_t, so X is
 * as aligned as malloc's blocks), so that tg_pass_x_free frees it whoever ends up owning it. */
static float *x_alloc(tg_pipe_t *P, size_t bytes)
{
    size_t *hdr = malloc(bytes + 2 * sizeof(size_t));
    if (!hdr) return NULL;
    hdr[0] = bytes;
    tg_pipe_count_bytes(P, (int64_t)bytes);
    return (float *)(hdr + 2);
}

/* X leaves the bytes in flight: freed, or kept by the step (TG_PASS_KEEP_X). */
static void x_uncount(tg_pipe_t *P, const float *X)
{
    tg_pipe_count_bytes(P, -(int64_t)((const size_t *)X)[-2]);
}

static void x_free(tg_pipe_t *P, float *X)
{
    if (!X) return;
    x_uncount(P, X);
    tg_pass_x_free(X);
}

void tg_pass_x_free(const float *X)
{
    if (X) free((size_t *)X - 2);
}

static void x_wake_all(tg_pipe_t *P)
{
    pthread_mutex_lock(&P->x_mu);
    pthread_cond_broadcast(&P->x_cv);
    pthread_mutex_unlock(&P->x_mu);
}

static void x_give_back(tg_pipe_t *P, int n)
{
    pthread_mutex_lock(&P->x_mu);
    P->x_count -= n;
    pthread_cond_broadcast(&P->x_cv);
    pthread_mutex_unlock(&P->x_mu);
}

/* The batch source: the pass's loader, or the strategy's own (opts.source). */
static int src_next(tg_pipe_t *P, tg_sloader_item_t **it)
{
    const tg_pipe_source_t *s = P->o->source;
    return s ? s->next(s->ctx, P, it) : tg_sloader_next(P->ld, it);
}

static void src_free(tg_pipe_t *P, tg_sloader_item_t *it)
{
    const tg_pipe_source_t *s = P->o->source;
    if (s)
        s->item_free(s->ctx, it);
    else
        tg_sloader_item_free(P->ld, it);
}

static void item_free(tg_pipe_t *P, item_t *t)
{
    if (!t) return;
    if (!P->gather_mode) x_free(P, t->X);
    if (t->it) src_free(P, t->it);
    if (t->counted) x_give_back(P, 1);
    free(t);
}

static void window_close(tg_pipe_t *P)
{
    pthread_mutex_lock(&P->mu);
    P->closed = 1;
    pthread_cond_broadcast(&P->cv_put);
    pthread_cond_broadcast(&P->cv_get);
    pthread_mutex_unlock(&P->mu);
}

int tg_pipe_fail(tg_pipe_t *P, int rc, const char *msg)
{
    /* -ECANCELED is what a stage answers once it sees the pipeline stopping: a consequence,
     * never a cause. When the stop is the normal end of the pass (abort set after the last
     * batch trained) there is no cause to report, and recording it would fail the pass with
     * a bare "Operation canceled" (a worker asking for one more batch just then). */
    if (rc == -ECANCELED && atomic_load(&P->abort)) return rc;
    tg_errbox_set(&P->err, rc, msg);
    atomic_store(&P->abort, 1);
    window_close(P);
    x_wake_all(P);
    return rc;
}

/* Puts a ready batch into the training window. -EPIPE when the window closed. */
static int window_put(tg_pipe_t *P, item_t *t)
{
    pthread_mutex_lock(&P->mu);
    uint64_t idx = t->it->batch.id - P->p->first_batch;
    if (P->in_order) {
        while (!P->closed && idx >= P->next + P->cap)
            pthread_cond_wait(&P->cv_put, &P->mu);
    } else {
        while (!P->closed && P->count == P->cap)
            pthread_cond_wait(&P->cv_put, &P->mu);
    }
    if (P->closed) {
        pthread_mutex_unlock(&P->mu);
        return -EPIPE;
    }
    if (P->in_order)
        P->ring[idx % P->cap] = t;
    else
        P->ring[(P->head + P->count) % P->cap] = t;
    P->count++;
    pthread_cond_broadcast(&P->cv_get);
    pthread_mutex_unlock(&P->mu);
    return 0;
}

/* Takes the next batch to train: batch `next` in order, else the oldest ready one. */
static int window_get(tg_pipe_t *P, item_t **out)
{
    *out = NULL;
    pthread_mutex_lock(&P->mu);
    for (;;) {
        if (P->closed) break;
        if (P->in_order) {
            item_t **slot = &P->ring[P->next % P->cap];
            if (*slot) {
                *out = *slot;
                *slot = NULL;
                P->next++;
                break;
            }
        } else if (P->count) {
            *out = P->ring[P->head];
            P->ring[P->head] = NULL;
            P->head = (P->head + 1) % P->cap;
            break;
        }
        pthread_cond_wait(&P->cv_get, &P->mu);
    }
    if (*out) {
        P->count--;
        pthread_cond_broadcast(&P->cv_put);
    }
    pthread_mutex_unlock(&P->mu);
    return *out ? 0 : -EPIPE;
}

/* ---------------------------------------------------------------- gather on the sampler thread */

/* The loader's free function for the payload X (x_alloc's). */
static void gather_free(void *ctx, void *payload)
{
    x_free(ctx, payload);
}

static int gather_hook(void *ctx, tg_sloader_item_t *it)
{
    tg_pipe_t *P = ctx;
    const tg_batch_t *b = &it->batch;
    size_t bytes = (size_t)b->num_nodes * P->o->dim * sizeof(float);
    float *X = x_alloc(P, bytes);
    if (!X) return tg_err(-ENOMEM, "out of memory for the features of %u nodes", b->num_nodes);
    int rc = P->o->gather(P->o->gather_ctx, b, X);
    if (rc < 0) {
        gather_free(P, X);
        return rc;
    }
    it->payload = X;
    return 0;
}

/* ---------------------------------------------------------------- workers */

typedef struct {
    tg_pipe_t *P;
    int id;
} worker_arg_t;

/* Pulls the next `group` consecutive batches (fewer when opts.group_more says the group is full)
 * and takes their matrix places, under one lock so that places go in id order. Returns the
 * count (0: the pass is over or stopping); *ended: no batch is left to pull. */
static int pull_group(tg_pipe_t *P, tg_sloader_item_t **its, int group, int *ended)
{
    int ng = 0, rc = 0;
    *ended = 1;
    pthread_mutex_lock(&P->ld_mu);
    while (ng < group && !P->stop_pull && !atomic_load(&P->abort)) {
        rc = src_next(P, &its[ng]);
        if (rc <= 0) break;
        P->pulled++;
        ng++;
        if (ng < group && P->o->group_more) {
            const tg_batch_t *bs[TG_PIPE_MAX_GROUP];
            for (int j = 0; j < ng; j++)
                bs[j] = &its[j]->batch;
            if (!P->o->group_more(P->o->work_ctx, bs, ng)) {
                *ended = 0;
                break;
            }
        }
    }
    if (ng == group) *ended = 0;
    if (rc < 0) tg_pipe_fail(P, rc, NULL); /* a sampler's error, with its message */
    int placed = 0;
    if (ng && rc >= 0) {
        pthread_mutex_lock(&P->x_mu);
        while (P->x_count + ng > P->x_max && !atomic_load(&P->abort) && !atomic_load(&P->stopping))
            pthread_cond_wait(&P->x_cv, &P->x_mu);
        if (!atomic_load(&P->abort) && !atomic_load(&P->stopping)) {
            P->x_count += ng;
            placed = 1;
        }
        pthread_mutex_unlock(&P->x_mu);
        /* Unplaced batches go back: they no longer count as handed out, so a draining trainer's
         * target (read under ld_mu) only covers batches it will get. */
        if (!placed) P->pulled -= (uint64_t)ng;
    }
    pthread_mutex_unlock(&P->ld_mu);
    if (ng && !placed) {
        for (int j = 0; j < ng; j++)
            src_free(P, its[j]);
        ng = 0;
    }
    return ng;
}

static void *worker_main(void *arg)
{
    worker_arg_t *a = arg;
    tg_pipe_t *P = a->P;
    const tg_pipe_opts_t *o = P->o;
    for (;;) {
        tg_sloader_item_t *its[TG_PIPE_MAX_GROUP];
        int ended;
        int ng = pull_group(P, its, o->group, &ended);
        if (ng == 0) break;
        double t0 = tg_now();
        item_t *g[TG_PIPE_MAX_GROUP];
        const tg_batch_t *bs[TG_PIPE_MAX_GROUP];
        float *Xs[TG_PIPE_MAX_GROUP];
        int rc = 0;
        for (int j = 0; j < ng; j++) {
            atomic_fetch_add(&P->sample_ns, (uint64_t)(its[j]->sample_s * 1e9));
            g[j] = calloc(1, sizeof *g[j]);
            if (!g[j]) {
                src_free(P, its[j]);
                x_give_back(P, 1);
            } else {
                g[j]->it = its[j];
                g[j]->counted = 1;
                g[j]->X = x_alloc(P, (size_t)its[j]->batch.num_nodes * o->dim * sizeof(float));
            }
            if (rc == 0 && (!g[j] || !g[j]->X))
                rc = tg_pipe_fail(
                    P,
                    tg_err(-ENOMEM, "batch %llu: out of memory for the features of %u nodes",
                           (unsigned long long)its[j]->batch.id, its[j]->batch.num_nodes),
                    NULL);
            if (g[j]) {
                bs[j] = &g[j]->it->batch;
                Xs[j] = g[j]->X;
            }
        }
        if (rc == 0) rc = o->work(o->work_ctx, P, a->id, bs, Xs, ng);
        atomic_fetch_add(&P->gather_ns, (uint64_t)((tg_now() - t0) * 1e9));
        int j = 0;
        if (rc == 0)
            for (; j < ng; j++)
                if (window_put(P, g[j]) < 0) break;
        for (; j < ng; j++)
            item_free(P, g[j]);
        if (rc < 0 || j < ng || ended) break;
    }
    return NULL;
}

static void *releaser_main(void *arg)
{
    tg_pipe_t *P = arg;
    void *t;
    /* Frees batches after training, off the trainer's critical path (unmapping a large input
     * matrix costs time). */
    while (tg_queue_pop(P->relq, &t) == 0) {
        double t0 = tg_now();
        item_free(P, t);
        atomic_fetch_add(&P->release_ns, (uint64_t)((tg_now() - t0) * 1e9));
    }
    return NULL;
}

/* The trainer's next batch: from the window (workers), or straight from the loader, whose
 * sampler threads gathered it (gather mode). */
static int next_item(tg_pipe_t *P, item_t **out)
{
    if (!P->gather_mode) return window_get(P, out);
    *out = NULL;
    tg_sloader_item_t *it;
    int rc = tg_sloader_next(P->ld, &it);
    if (rc < 0) return tg_pipe_fail(P, rc, NULL);
    if (rc == 0) return 1; /* end of the pass */
    item_t *t = calloc(1, sizeof *t);
    if (!t) {
        tg_sloader_item_free(P->ld, it);
        return tg_pipe_fail(P, tg_err(-ENOMEM, "out of memory"), NULL);
    }
    t->it = it;
    t->X = it->payload;
    atomic_fetch_add(&P->sample_ns, (uint64_t)(it->sample_s * 1e9));
    atomic_fetch_add(&P->gather_ns, (uint64_t)(it->hook_s * 1e9));
    *out = t;
    return 0;
}

/* ---------------------------------------------------------------- the pass */

static int pipe_init(tg_pipe_t *P, const tg_pipe_opts_t *o)
{
    memset(P, 0, sizeof *P);
    P->o = o;
    P->p = o->pass;
    P->gather_mode = o->workers == 0;
    P->in_order = o->in_order || P->gather_mode;
    pthread_mutex_init(&P->ld_mu, NULL);
    pthread_mutex_init(&P->mu, NULL);
    pthread_cond_init(&P->cv_put, NULL);
    pthread_cond_init(&P->cv_get, NULL);
    pthread_mutex_init(&P->x_mu, NULL);
    pthread_cond_init(&P->x_cv, NULL);
    tg_errbox_init(&P->err);
    atomic_init(&P->abort, 0);
    atomic_init(&P->stopping, 0);
    atomic_init(&P->gather_ns, 0);
    atomic_init(&P->sample_ns, 0);
    atomic_init(&P->release_ns, 0);
    atomic_init(&P->x_bytes, 0);
    atomic_init(&P->x_peak, 0);
    int qd = o->queue_depth > 0 ? o->queue_depth : 1;
    P->x_max = o->workers * o->group + qd;
    P->cap = P->in_order ? (size_t)(qd + o->workers * o->group) : (size_t)qd;
    P->ring = calloc(P->cap, sizeof *P->ring);
    if (!P->ring) return tg_err(-ENOMEM, "pipeline: out of memory");
    return tg_queue_create(&P->relq, (size_t)qd);
}

static void pipe_destroy(tg_pipe_t *P)
{
    free(P->ring);
    tg_queue_destroy(P->relq);
    tg_errbox_destroy(&P->err);
    pthread_cond_destroy(&P->x_cv);
    pthread_mutex_destroy(&P->x_mu);
    pthread_cond_destroy(&P->cv_put);
    pthread_cond_destroy(&P->cv_get);
    pthread_mutex_destroy(&P->mu);
    pthread_mutex_destroy(&P->ld_mu);
}

/* The trainer: this thread. Returns after the pass, a stop, or the pipeline's failure. */
static void train_loop(tg_pipe_t *P, uint64_t total, tg_pass_stats_t *st)
{
    const tg_pass_t *p = P->p;
    uint64_t done = 0, target = total;
    int draining = 0;
    while (done < target) {
        item_t *t;
        double tw = tg_now();
        int g = next_item(P, &t);
        st->wait_s += tg_now() - tw;
        if (g != 0) break; /* the end of the pass, or a failure recorded in the box */
        int src = p->step(p->ctx, &t->it->batch, t->X);
        uint64_t id = t->it->batch.id;
        if (src == TG_PASS_KEEP_X) { /* the step owns X now: the batch goes, X stays */
            x_uncount(P, t->X);
            if (P->gather_mode) t->it->payload = NULL;
            t->X = NULL;
            src = 0;
        }
        /* Gathering on the sampler threads, the trainer frees its batch itself: a releaser would
         * keep two more matrices alive, which a tight budget must pay for (mmap). */
        if (P->gather_mode || tg_queue_push(P->relq, t) < 0) item_free(P, t);
        if (src < 0) {
            tg_pipe_fail(P, src, NULL);
            break;
        }
        st->steps++;
        done++;
        if (P->in_order) st->next_batch = id + 1;
        if (src == TG_PASS_STOP && !draining) {
            st->stopped = 1;
            atomic_store(&P->stopping, 1);
            x_wake_all(P);
            pthread_mutex_lock(&P->ld_mu);
            P->stop_pull = 1;
            uint64_t pulled = P->pulled;
            pthread_mutex_unlock(&P->ld_mu);
            if (P->in_order) break;
            /* Out of order, the batches already handed out train first, so the pass ends on a
             * prefix of the epoch and a resumed run skips exactly those. */
            target = pulled;
            draining = 1;
        }
    }
    if (!P->in_order) st->next_batch = p->first_batch + done;
}

int tg_pipe_run(const tg_pipe_opts_t *o, tg_pass_stats_t *st)
{
    const tg_pass_t *p = o->pass;
    memset(st, 0, sizeof *st);
    st->next_batch = p->first_batch;
    if (o->workers < 0 || o->workers > 256 || (o->workers && !o->work) ||
        (!o->workers && !o->gather) || (o->source && !o->workers) ||
        (o->workers && (o->group < 1 || o->group > TG_PIPE_MAX_GROUP)))
        return tg_err(-EINVAL, "pipeline: bad options (%d workers, group %d)", o->workers,
                      o->group);
    tg_pipe_t P;
    int rc = pipe_init(&P, o);
    int W = o->workers;
    pthread_t *th = W ? calloc((size_t)W, sizeof *th) : NULL;
    worker_arg_t *args = W ? calloc((size_t)W, sizeof *args) : NULL;
    int nstarted = 0, rel_started = 0;
    pthread_t rel;
    if (rc == 0 && W && (!th || !args)) rc = tg_err(-ENOMEM, "pipeline: out of memory");
    if (rc < 0) goto out;
    uint64_t total;
    if (o->source) {
        total =
            o->source->num_batches > p->first_batch ? o->source->num_batches - p->first_batch : 0;
    } else {
        tg_sloader_opts_t lo =
            tg_pass_sloader_opts(p, o->adj, o->sampler_threads, o->prefetch ? o->prefetch : 2);
        if (P.gather_mode) {
            lo.hook = gather_hook;
            lo.hook_free = gather_free;
            lo.ctx = &P;
        }
        if ((rc = tg_sloader_start(&P.ld, &lo)) < 0) goto out;
        total = tg_sloader_num_batches(P.ld) - p->first_batch;
    }
    int e;
    if ((e = pthread_create(&rel, NULL, releaser_main, &P)) != 0) {
        rc = tg_err(-e, "pipeline: cannot start the releaser thread");
        goto out;
    }
    rel_started = 1;
    for (int i = 0; i < W; i++) {
        args[i] = (worker_arg_t){&P, i};
        if ((e = pthread_create(&th[i], NULL, worker_main, &args[i])) != 0) {
            tg_pipe_fail(&P, tg_err(-e, "pipeline: cannot start worker thread %d", i), NULL);
            break;
        }
        nstarted++;
    }
    if (!tg_errbox_failed(&P.err)) train_loop(&P, total, st);
out:
    /* A worker may wait for a matrix place while it holds ld_mu: wake it first. */
    atomic_store(&P.abort, 1);
    x_wake_all(&P);
    pthread_mutex_lock(&P.ld_mu);
    P.stop_pull = 1;
    pthread_mutex_unlock(&P.ld_mu);
    if (tg_errbox_failed(&P.err) && o->on_error)
        o->on_error(o->error_ctx ? o->error_ctx
                    : W          ? o->work_ctx
                                 : o->gather_ctx); /* e.g. wake workers blocked in a buffer */
    window_close(&P);
    for (int i = 0; i < nstarted; i++)
        pthread_join(th[i], NULL);
    /* Batches that were ready but not trained (a stop, an error) go back too. */
    if (P.ring)
        for (size_t i = 0; i < P.cap; i++)
            item_free(&P, P.ring[i]);
    if (P.relq) tg_queue_close(P.relq);
    if (rel_started) pthread_join(rel, NULL);
    tg_sloader_stop(P.ld);
    if (rc == 0) rc = tg_errbox_raise(&P.err);
    st->sample_s = (double)atomic_load(&P.sample_ns) * 1e-9;
    st->gather_s = (double)atomic_load(&P.gather_ns) * 1e-9;
    st->release_s = (double)atomic_load(&P.release_ns) * 1e-9;
    st->batch_bytes_peak = atomic_load(&P.x_peak);
    free(th);
    free(args);
    pipe_destroy(&P);
    return rc;
}

/* ---------------------------------------------------------------- a pass's loader */

tg_sloader_opts_t tg_pass_sloader_opts(const tg_pass_t *p, tg_adj_t *adj, int sampler_threads,
                                       size_t prefetch)
{
    return (tg_sloader_opts_t){.adj = adj,
                               .num_layers = p->num_layers,
                               .fanouts = p->fanouts,
                               .seeds = p->seeds,
                               .num_seeds = p->num_seeds,
                               .batch_size = p->batch_size,
                               .seed = p->seed,
                               .epoch = p->epoch,
                               .num_threads = sampler_threads,
                               .prefetch = prefetch,
                               .first_batch = p->first_batch,
                               .sampler = p->sampler};
}
