/* Strategy "gnndrive": GNNDrive's CPU-training pipeline (Jin et al., "GNNDrive", section 4):
 *
 *     sampler threads -> extracting queue -> extractor threads -> training queue -> trainer
 *                                                                  -> releasing queue -> releaser
 *
 * Samplers: a tg_loader_t over the disk-resident adjacency (indptr in RAM, indices read through
 * io/ with O_DIRECT); its per-thread bounded queues are the extracting queue and hand batches out
 * in id order. Extractors (threads, each with a store/extract worker: its own io_uring queue
 * over features.bin, opened once) take the next batches and move their rows with
 * tg_extract_group (tiergnn/extract.h) through the shared feature buffer (store/featbuf:
 * mapping table with slot, reference count and valid bit, reverse map, LRU standby list): acquire
 * slots for a chunk of the batch's nodes, read the misses with io_uring straight into slot memory
 * (several rows per read where holes between them are cheaper to read than to skip), complete
 * each row as its read is reaped, wait for rows other extractors are loading, copy the chunk's
 * rows into the batch's input matrix X and release the chunk. A node shared by batches in flight
 * is read once; a recently released row is served again from the standby list without I/O.
 * Extracted batches go to the training queue; the trainer (the calling thread) runs the step and
 * passes the batch to the releasing queue, whose releaser frees it off the critical path.
 *
 * Why chunks: GNNDrive keeps a whole batch's rows referenced in the buffer until training, so the
 * buffer must hold (extractors + queue + 1) whole batches. A 3-layer batch with fanouts 10,10,10
 * and 1024 seeds touches ~300k nodes (150 MiB of f32 rows at D = 128): five of them are far more
 * than a budget such as --mem 100M. Streaming each batch through the buffer in chunks keeps the
 * buffer's minimum at extractors x chunk rows, and everything above it is cache. The input
 * matrices of the batches in flight are part of those batches' activations (the model reads X
 * exactly as in the other strategies), accounted apart from --mem and reported.
 *
 * Order: batches reach the extractors in id order; by default the training queue is a reorder
 * window that hands them to the trainer in id order too, so results are bit-identical to the
 * memory strategy. With out_of_order it is a FIFO: a batch trains as soon as it is extracted.
 *
 * Deadlock freedom: (1) every extractor holds at most one chunk of references and the buffer has
 * at least extractors x chunk slots, so acquire never waits for the trainer (featbuf.h, rule 3);
 * (2) an extractor reaps all of its own reads before it waits for rows of others (rule 2); (3) the
 * in-order window has extractors + queue_depth places and batches enter extraction in id order,
 * so the batch the trainer waits for always has a place.
 *
 * Errors: the first error of any stage (a sampler's, an extractor's I/O error or short read - the
 * io layer's message names the file and offset -, the trainer's) is recorded with its message;
 * the queues are closed, every thread joined, every batch freed, and the pass returns it. */
#include "../engine-impl.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "tiergnn/extract.h"
#include "tiergnn/featbuf.h"

#define ADJ_MIN_QUEUES 2u
#define ADJ_DEPTH 64u
#define ADJ_MAX_READ ((size_t)16 << 10)
#define ADJ_MAX_REQUESTS ((size_t)4096)
#define TG_MAX_SWEEP TG_EXTRACT_MAX_GROUP

/* ---------------------------------------------------------------- sizing */

/* One queue per sampler thread for the index reads: each sampler's read of a layer waits for
 * its disk reads, so samplers overlap their waits only with queues of their own. */
static unsigned adj_queues(const tg_strategy_opts_t *o)
{
    return TG_MAX(ADJ_MIN_QUEUES, (unsigned)o->sampler_threads);
}

/* indptr + the index reads' staging (reserved at open), and io/ bookkeeping while index reads
 * run. */
static uint64_t adj_bytes(const tg_dataset_t *ds, const tg_strategy_opts_t *o)
{
    return (ds->meta.num_nodes + 1) * sizeof(uint64_t) +
           (uint64_t)adj_queues(o) * ADJ_DEPTH * ADJ_MAX_READ;
}
static uint64_t adj_transient(const tg_strategy_opts_t *o)
{
    return (uint64_t)adj_queues(o) * ADJ_MAX_REQUESTS * TG_EXTRACT_IO_BOOKKEEPING;
}

/* The extraction's plan options: the strategy's knobs over the dataset's feature file. */
static void plan_opts(const tg_dataset_t *ds, const tg_strategy_opts_t *o, char *path,
                      size_t path_len, tg_extract_plan_opts_t *po)
{
    tg_extract_plan_opts_default(po);
    tg_dataset_path(ds, TG_FILE_FEATURES, path, path_len);
    po->num_nodes = ds->meta.num_nodes;
    po->feat_dim = ds->meta.feat_dim;
    po->dtype = ds->meta.feat_dtype;
    po->extractors = o->extractors > 0 ? o->extractors : 1;
    po->io_depth = o->io_depth;
    po->io_gap = o->io_gap;
    po->chunk_rows = o->chunk_rows;
    po->featbuf = 1;
    po->probe_path = path;
    po->other_transient = adj_transient(o);
}

static uint64_t gd_min_bytes(const tg_dataset_t *ds, const tg_strategy_opts_t *o, char *why,
                             size_t why_len)
{
    char path[4096], a[32], b[512];
    tg_extract_plan_opts_t po;
    plan_opts(ds, o, path, sizeof path, &po);
    po.minimum = 1;
    tg_extract_plan_t pl;
    if (tg_extract_plan(&pl, &po) < 0) {
        snprintf(why, why_len, "%s", tg_errmsg());
        return UINT64_MAX;
    }
    uint64_t adj = adj_bytes(ds, o) + adj_transient(o);
    snprintf(why, why_len, "indptr and index-read staging %s, %s", tg_fmt_bytes(adj, a, sizeof a),
             tg_extract_plan_describe(&pl, b, sizeof b));
    return adj + tg_extract_plan_bytes(&pl);
}

/* ---------------------------------------------------------------- state */

struct tg_strategy {
    tg_run_t *r;
    tg_strategy_opts_t o;
    tg_io_stats_t stats; /* every disk read: index reads of the samplers, feature reads */
    tg_io_file_t *feat;
    char feat_path[4096];
    /* created at the first pass, when the run has reserved everything else */
    int ready;
    tg_extract_t *ex; /* the extractors' workers and the feature buffer */
    tg_featbuf_t *fb; /* of ex */
    int E;
    uint32_t dim;
    int dead; /* an earlier pass shut the buffer down */
};

static int gd_open(tg_strategy_t **out, tg_run_t *r, const tg_strategy_opts_t *o)
{
    *out = NULL;
    tg_strategy_t *s = calloc(1, sizeof *s);
    if (!s) return tg_err(-ENOMEM, "strategy gnndrive: out of memory");
    s->r = r;
    s->o = *o;
    if (s->o.extractors < 1) s->o.extractors = 1;
    if (s->o.queue_depth < 1) s->o.queue_depth = 1;
    tg_io_stats_init(&s->stats);
    tg_adj_disk_opts_t ao;
    tg_adj_disk_opts_default(&ao);
    ao.io.depth = ADJ_DEPTH;
    ao.io.max_read_bytes = ADJ_MAX_READ;
    ao.io.stats = &s->stats;
    ao.queues = adj_queues(o);
    ao.max_requests = ADJ_MAX_REQUESTS;
    int rc = tg_adj_disk_open(&r->adj, r->ds, &ao, &r->budget);
    if (rc < 0) goto err;
    /* Layer-wise passes (full-neighbour evaluation, inference) read rows with pread. */
    tg_store_opts_t so = {.normalize = o->normalize, .budget = &r->budget};
    if ((rc = tg_store_file_open(&r->store, r->ds, &so)) < 0) goto err;
    tg_dataset_path(r->ds, TG_FILE_FEATURES, s->feat_path, sizeof s->feat_path);
    if ((rc = tg_io_file_open(&s->feat, s->feat_path, 0)) < 0) goto err;
    uint64_t want = tg_meta_expected_size(&r->ds->meta, TG_FILE_FEATURES);
    if (tg_io_file_size(s->feat) != want) {
        rc = tg_err(-EINVAL, "%s: %llu bytes, meta.txt says %llu (changed since it was written?)",
                    s->feat_path, (unsigned long long)tg_io_file_size(s->feat),
                    (unsigned long long)want);
        goto err;
    }
    s->dim = r->ds->meta.feat_dim;
    *out = s;
    return 0;
err:
    tg_io_file_close(s->feat);
    free(s);
    return rc;
}

/* Sizes and creates the extractors' workers and the feature buffer from what the budget has
 * left (store/extract plans the reads and fits them to a tight budget). */
static int gd_setup(tg_strategy_t *s)
{
    tg_run_t *r = s->r;
    char path[4096], a[32], b[32];
    tg_extract_plan_opts_t po;
    plan_opts(r->ds, &s->o, path, sizeof path, &po);
    uint64_t limit = r->budget.limit;
    if (limit) po.avail = limit > r->budget.used ? limit - r->budget.used : 1;
    tg_extract_plan_t pl;
    int rc = tg_extract_plan(&pl, &po);
    if (rc < 0) return rc;
    tg_extract_opts_t eo = {.plan = &pl,
                            .feat = s->feat,
                            .normalize = s->o.normalize,
                            .budget = &r->budget,
                            .stats = &s->stats,
                            .keep_bytes = po.other_transient + pl.transient_bytes,
                            .cache_bytes = s->o.cache_bytes,
                            .who = "gnndrive"};
    if ((rc = tg_extract_create(&s->ex, &eo)) < 0) return rc;
    s->fb = tg_extract_featbuf(s->ex);
    s->E = pl.extractors;
    tg_log_info("gnndrive: %d extractor(s), %u reads in flight each, %u rows per chunk, "
                "feature buffer %u slots (%s), %s%s",
                s->E, pl.depth, pl.chunk, tg_featbuf_num_slots(s->fb),
                tg_fmt_bytes(tg_featbuf_reserved_bytes(s->fb), a, sizeof a),
                pl.gap ? "holes up to " : "one read per row run",
                pl.gap ? tg_fmt_bytes(pl.gap, b, sizeof b) : "");
    s->ready = 1;
    return 0;
}

static void gd_close(tg_strategy_t *s)
{
    if (!s) return;
    tg_extract_destroy(s->ex);
    tg_io_file_close(s->feat);
    free(s);
}
/* ---------------------------------------------------------------- one pass */

typedef struct {
    tg_loader_item_t *it;
    float *X;       /* (num_nodes, dim): the batch's input matrix */
    size_t x_bytes; /* of X, counted in batch_bytes_peak while it exists */
    int counted;    /* holds one of the pass's matrix places (x_max) */
} item_t;

typedef struct {
    tg_strategy_t *s;
    const tg_pass_t *p;
    tg_loader_t *ld;
    /* the extracting side: tg_loader_next is serialised; pulled counts batches handed out */
    pthread_mutex_t ld_mu;
    uint64_t pulled;
    int stop_pull;
    /* Set by the trainer before it takes ld_mu to stop pulling: an extractor that waits for a
     * matrix place while holding ld_mu gives up its unplaced batches instead, so the trainer
     * never waits on ld_mu behind a wait that only the trainer's progress could end. */
    atomic_int stopping;
    /* the training queue: a reorder window (in order) or a FIFO */
    pthread_mutex_t mu;
    pthread_cond_t cv_put, cv_get;
    item_t **ring;
    size_t cap, count, head;
    uint64_t next; /* in order: index (from first_batch) of the batch the trainer takes next */
    int in_order, closed;
    tg_queue_t *relq;
    /* the first error */
    pthread_mutex_t err_mu;
    int err_rc;
    char err_msg[1024];
    atomic_int abort; /* stop extracting (error, or an in-order stop) */
    _Atomic uint64_t gather_ns, sample_ns, x_bytes, x_peak;
    /* Input matrices in flight, from extraction to release: at most x_max. Places are taken in
     * batch-id order (under ld_mu), so the batch the trainer needs next never waits for a place
     * a later batch holds. */
    pthread_mutex_t x_mu;
    pthread_cond_t x_cv;
    int x_count, x_max;
} pass_t;

static void x_wake_all(pass_t *P)
{
    pthread_mutex_lock(&P->x_mu);
    pthread_cond_broadcast(&P->x_cv);
    pthread_mutex_unlock(&P->x_mu);
}

static void item_free(pass_t *P, item_t *t)
{
    if (!t) return;
    free(t->X);
    if (t->x_bytes) atomic_fetch_sub(&P->x_bytes, t->x_bytes);
    if (t->it) tg_loader_item_free(P->ld, t->it);
    if (t->counted) {
        pthread_mutex_lock(&P->x_mu);
        P->x_count--;
        pthread_cond_broadcast(&P->x_cv);
        pthread_mutex_unlock(&P->x_mu);
    }
    free(t);
}

static void buf_close(pass_t *P)
{
    pthread_mutex_lock(&P->mu);
    P->closed = 1;
    pthread_cond_broadcast(&P->cv_put);
    pthread_cond_broadcast(&P->cv_get);
    pthread_mutex_unlock(&P->mu);
}

/* Records the first error (with this thread's message) and stops the pipeline. */
static void fail(pass_t *P, int rc, const char *msg)
{
    pthread_mutex_lock(&P->err_mu);
    if (!P->err_rc) {
        P->err_rc = rc;
        snprintf(P->err_msg, sizeof P->err_msg, "%s", msg && *msg ? msg : "unknown error");
    }
    pthread_mutex_unlock(&P->err_mu);
    atomic_store(&P->abort, 1);
    buf_close(P);
    x_wake_all(P);
}

/* Puts an extracted batch into the training queue. -EPIPE when the queue closed. */
static int buf_put(pass_t *P, item_t *t)
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

/* Takes the next batch to train: batch `next` in order, else the oldest extracted. */
static int buf_get(pass_t *P, item_t **out)
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

/* A group of batches extracted in one sweep: g[j]'s position p is global index off[j] + p. */
typedef struct {
    item_t **g;
    int ng;
    uint64_t off[TG_MAX_SWEEP + 1];
} group_t;

static void ex_fail(void *ctx, int rc, const char *msg)
{
    fail(ctx, rc, msg);
}

/* The extraction's sort scratch counts in batch_bytes_peak like the matrices. */
static void ex_scratch(void *ctx, int64_t bytes)
{
    pass_t *P = ctx;
    if (bytes < 0) {
        atomic_fetch_sub(&P->x_bytes, (uint64_t)-bytes);
        return;
    }
    uint64_t now = atomic_fetch_add(&P->x_bytes, (uint64_t)bytes) + (uint64_t)bytes;
    uint64_t peak = atomic_load(&P->x_peak);
    while (now > peak && !atomic_compare_exchange_weak(&P->x_peak, &peak, now)) {
    }
}

/* Moves the rows of a group of batches into their matrices X (store/extract: one sweep over
 * the feature file in id order through the feature buffer). */
static int extract_group(pass_t *P, tg_extract_worker_t *x, const group_t *G)
{
    tg_extract_batch_t b[TG_MAX_SWEEP];
    for (int j = 0; j < G->ng; j++) {
        const tg_batch_t *bt = &G->g[j]->it->batch;
        b[j] = (tg_extract_batch_t){
            .id = bt->id, .nodes = bt->nodes, .n = bt->num_nodes, .X = G->g[j]->X};
    }
    tg_extract_hooks_t hk = {.fail = ex_fail, .scratch = ex_scratch, .abort = &P->abort, .ctx = P};
    return tg_extract_group(x, b, G->ng, &hk);
}

typedef struct {
    pass_t *P;
    tg_extract_worker_t *x;
} ex_arg_t;

static void *extractor_main(void *arg)
{
    ex_arg_t *a = arg;
    pass_t *P = a->P;
    tg_extract_worker_t *x = a->x;
    tg_strategy_t *s = P->s;
    int sweep = s->o.sweep_batches > 0 ? s->o.sweep_batches : 1;
    for (;;) {
        /* The next `sweep` batches, consecutive: pulled under one lock. */
        tg_loader_item_t *its[TG_MAX_SWEEP];
        int ng = 0, rc = 0;
        pthread_mutex_lock(&P->ld_mu);
        while (ng < sweep && !P->stop_pull && !atomic_load(&P->abort)) {
            rc = tg_loader_next(P->ld, &its[ng]);
            if (rc <= 0) break;
            P->pulled++;
            ng++;
        }
        if (rc < 0) fail(P, rc, tg_errmsg()); /* a sampler's error, with its message */
        int placed = 0;
        if (ng && rc >= 0) {
            /* places for the group's matrices, taken before any later batch can take one */
            pthread_mutex_lock(&P->x_mu);
            while (P->x_count + ng > P->x_max && !atomic_load(&P->abort) &&
                   !atomic_load(&P->stopping))
                pthread_cond_wait(&P->x_cv, &P->x_mu);
            if (!atomic_load(&P->abort) && !atomic_load(&P->stopping)) {
                P->x_count += ng;
                placed = 1;
            }
            pthread_mutex_unlock(&P->x_mu);
            /* Unplaced batches go back below: they no longer count as handed out, so a
             * draining trainer's target (read under ld_mu) only covers batches it will get. */
            if (!placed) P->pulled -= (uint64_t)ng;
        }
        pthread_mutex_unlock(&P->ld_mu);
        if (ng == 0) break;
        if (!placed) { /* a sampler failed, or the pass is stopping: the batches go back */
            for (int j = 0; j < ng; j++)
                tg_loader_item_free(P->ld, its[j]);
            break;
        }
        double t0 = tg_now();
        item_t *g[TG_MAX_SWEEP];
        group_t G = {.g = g, .ng = ng};
        int ok = 1;
        for (int j = 0; j < ng; j++) {
            uint64_t bid = its[j]->batch.id;
            uint32_t nn = its[j]->batch.num_nodes;
            G.off[j + 1] = G.off[j] + nn;
            atomic_fetch_add(&P->sample_ns, (uint64_t)(its[j]->sample_s * 1e9));
            g[j] = calloc(1, sizeof *g[j]);
            if (g[j]) {
                g[j]->it = its[j];
                g[j]->counted = 1;
                size_t xb = (size_t)its[j]->batch.num_nodes * s->dim * sizeof(float);
                g[j]->X = malloc(xb ? xb : 1);
                if (g[j]->X) {
                    g[j]->x_bytes = xb;
                    uint64_t now = atomic_fetch_add(&P->x_bytes, xb) + xb;
                    uint64_t peak = atomic_load(&P->x_peak);
                    while (now > peak && !atomic_compare_exchange_weak(&P->x_peak, &peak, now)) {
                    }
                }
            } else {
                tg_loader_item_free(P->ld, its[j]);
                pthread_mutex_lock(&P->x_mu); /* its place goes back */
                P->x_count--;
                pthread_cond_broadcast(&P->x_cv);
                pthread_mutex_unlock(&P->x_mu);
            }
            if (ok && (!g[j] || !g[j]->X)) {
                rc = tg_err(-ENOMEM, "batch %llu: out of memory for the features of %u nodes",
                            (unsigned long long)bid, nn);
                fail(P, rc, tg_errmsg());
                ok = 0;
            }
        }
        if (ok) rc = extract_group(P, x, &G);
        atomic_fetch_add(&P->gather_ns, (uint64_t)((tg_now() - t0) * 1e9));
        int j = 0;
        if (ok && rc == 0)
            for (; j < ng; j++)
                if (buf_put(P, g[j]) < 0) break;
        for (; j < ng; j++)
            item_free(P, g[j]);
        if (!ok || rc < 0 || j < ng || ng < sweep) break;
    }
    return NULL;
}

static void *releaser_main(void *arg)
{
    pass_t *P = arg;
    void *t;
    /* Frees batches after training, off the trainer's critical path (unmapping a large input
     * matrix costs time). */
    while (tg_queue_pop(P->relq, &t) == 0)
        item_free(P, t);
    return NULL;
}

static int gd_pass(tg_strategy_t *s, const tg_pass_t *p, tg_pass_stats_t *st)
{
    memset(st, 0, sizeof *st);
    st->next_batch = p->first_batch;
    if (s->dead)
        return tg_err(-ECANCELED, "gnndrive: the pipeline was shut down by an earlier error");
    int rc;
    if (!s->ready && (rc = gd_setup(s)) < 0) return rc;
    pass_t P;
    memset(&P, 0, sizeof P);
    P.s = s;
    P.p = p;
    P.in_order = !(p->allow_out_of_order && s->o.out_of_order);
    int E = s->E;
    int sweep = s->o.sweep_batches > 0 ? s->o.sweep_batches : 1;
    P.cap = P.in_order ? (size_t)(s->o.queue_depth + E * sweep) : (size_t)s->o.queue_depth;
    pthread_mutex_init(&P.ld_mu, NULL);
    pthread_mutex_init(&P.mu, NULL);
    pthread_mutex_init(&P.err_mu, NULL);
    pthread_cond_init(&P.cv_put, NULL);
    pthread_cond_init(&P.cv_get, NULL);
    atomic_init(&P.abort, 0);
    atomic_init(&P.stopping, 0);
    atomic_init(&P.gather_ns, 0);
    atomic_init(&P.sample_ns, 0);
    atomic_init(&P.x_bytes, 0);
    atomic_init(&P.x_peak, 0);
    pthread_mutex_init(&P.x_mu, NULL);
    pthread_cond_init(&P.x_cv, NULL);
    P.x_max = E * sweep + s->o.queue_depth;
    pthread_t *th = calloc((size_t)E, sizeof *th);
    ex_arg_t *args = calloc((size_t)E, sizeof *args);
    int *started = calloc((size_t)E, sizeof *started);
    pthread_t rel;
    int rel_started = 0;
    tg_featbuf_stats_t fs0;
    tg_io_counts_t io0;
    tg_featbuf_stats(s->fb, &fs0, 1);
    tg_io_stats_take(&s->stats, &io0);
    P.ring = calloc(P.cap, sizeof *P.ring);
    if (!th || !args || !started || !P.ring) {
        rc = tg_err(-ENOMEM, "gnndrive: out of memory");
        goto out;
    }
    if ((rc = tg_queue_create(&P.relq, (size_t)s->o.queue_depth)) < 0) goto out;
    tg_loader_opts_t lo =
        tg_pass_loader_opts(p, s->r->adj, s->o.sampler_threads, (size_t)s->o.queue_depth);
    if ((rc = tg_loader_start(&P.ld, &lo)) < 0) goto out;
    uint64_t total = tg_loader_num_batches(P.ld) - p->first_batch;
    int e;
    if ((e = pthread_create(&rel, NULL, releaser_main, &P)) != 0) {
        rc = tg_err(-e, "gnndrive: cannot start the releaser thread");
        goto out;
    }
    rel_started = 1;
    for (int i = 0; i < E; i++) {
        args[i] = (ex_arg_t){&P, tg_extract_worker(s->ex, i)};
        if ((e = pthread_create(&th[i], NULL, extractor_main, &args[i])) != 0) {
            rc = tg_err(-e, "gnndrive: cannot start extractor thread %d", i);
            fail(&P, rc, tg_errmsg());
            break;
        }
        started[i] = 1;
    }
    /* The trainer: this thread. */
    uint64_t done = 0, target = total;
    int draining = 0;
    while (rc == 0 && done < target) {
        item_t *t;
        double tw = tg_now();
        int g = buf_get(&P, &t);
        st->wait_s += tg_now() - tw;
        if (g < 0) break; /* the pipeline failed: its error is recorded */
        int src = p->step(p->ctx, &t->it->batch, t->X);
        uint64_t id = t->it->batch.id;
        if (tg_queue_push(P.relq, t) < 0) item_free(&P, t);
        if (src < 0) {
            fail(&P, src, tg_errmsg());
            break;
        }
        st->steps++;
        done++;
        if (P.in_order) st->next_batch = id + 1;
        if (src == TG_PASS_STOP && !draining) {
            st->stopped = 1;
            atomic_store(&P.stopping, 1);
            x_wake_all(&P);
            pthread_mutex_lock(&P.ld_mu);
            P.stop_pull = 1;
            uint64_t pulled = P.pulled;
            pthread_mutex_unlock(&P.ld_mu);
            if (P.in_order) break;
            /* Out of order, the batches already handed out train first, so the pass ends on
             * a prefix of the epoch and a resumed run skips exactly those. */
            target = pulled;
            draining = 1;
        }
    }
    if (!P.in_order) st->next_batch = p->first_batch + done;
out:
    /* An extractor may wait for a matrix place while it holds ld_mu: wake it first. */
    atomic_store(&P.abort, 1);
    x_wake_all(&P);
    pthread_mutex_lock(&P.ld_mu);
    P.stop_pull = 1;
    pthread_mutex_unlock(&P.ld_mu);
    if (P.err_rc) {
        /* Blocked extractors wake up with -ECANCELED; the buffer is unusable from now on. */
        if (s->fb) tg_featbuf_shutdown(s->fb);
        s->dead = 1;
    }
    atomic_store(&P.abort, 1);
    buf_close(&P);
    for (int i = 0; th && started && i < E; i++)
        if (started[i]) pthread_join(th[i], NULL);
    /* Batches that were extracted but not trained (a stop, an error) go back too. */
    if (P.ring)
        for (size_t i = 0; i < P.cap; i++)
            item_free(&P, P.ring[i]);
    if (P.relq) tg_queue_close(P.relq);
    if (rel_started) pthread_join(rel, NULL);
    tg_loader_stop(P.ld);
    tg_queue_destroy(P.relq);
    if (P.err_rc && rc == 0) rc = tg_err(P.err_rc, "%s", P.err_msg);
    st->sample_s = (double)atomic_load(&P.sample_ns) * 1e-9;
    st->gather_s = (double)atomic_load(&P.gather_ns) * 1e-9;
    st->batch_bytes_peak = atomic_load(&P.x_peak);
    if (s->fb) {
        tg_featbuf_stats_t fs;
        tg_featbuf_stats(s->fb, &fs, 1);
        st->have_cache = 1;
        st->cache_lookups = fs.lookups;
        st->cache_hits = fs.hits + fs.waits;
    }
    tg_io_counts_t io;
    tg_io_stats_take(&s->stats, &io);
    st->have_io = st->have_io_wait = 1;
    st->io_requests = io.io_requests;
    st->io_read_bytes = io.io_read_bytes;
    st->io_wait_s = io.io_wait_s;
    free(P.ring);
    free(th);
    free(args);
    free(started);
    pthread_cond_destroy(&P.cv_put);
    pthread_cond_destroy(&P.cv_get);
    pthread_mutex_destroy(&P.err_mu);
    pthread_cond_destroy(&P.x_cv);
    pthread_mutex_destroy(&P.x_mu);
    pthread_mutex_destroy(&P.mu);
    pthread_mutex_destroy(&P.ld_mu);
    return rc;
}

const tg_strategy_i tg_strategy_gnndrive = {
    .name = "gnndrive",
    .summary = "GNNDrive: samplers -> extractors (io_uring into a shared feature buffer) -> "
               "trainer -> releaser; indices and features on disk",
    .min_bytes = gd_min_bytes,
    .open = gd_open,
    .pass = gd_pass,
    .close = gd_close,
};
