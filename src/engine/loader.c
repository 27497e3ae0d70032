/* The pull-model loader (tiergnn/loader.h): a strategy's pass runs on the loader's thread; its
 * step callback copies each batch of this rank's share (its arrays, with the seeds' labels) into
 * a free slot, marks it ready and waits there until tg_loader_next takes it (a rendezvous); then
 * it keeps the strategy's X (TG_PASS_KEEP_X: lent as it is, no copy) and returns. The ready
 * batch thus waits in the strategy's own input matrix, one of the matrices in flight that the
 * budget counts for the strategy, while the strategy's other matrices prepare the next batches:
 * the loader needs max_held slots, each covering a held batch's arrays and X, and no slot for a
 * batch that waits to be taken. tg_loader_release frees nothing: the pass's thread frees a
 * released batch's X when it fills that slot again. Closing or a new epoch sets `abort`, and the
 * step callback answers TG_PASS_STOP, from the rendezvous too, at the strategy's next batch
 * boundary.
 *
 * What the budget covers at every moment (docs/LOADER.md, "Memory"): a matrix X lives in one of
 * the strategy's places (its batches_in_flight, the step's included: the ready batch's X is
 * still there) or is owned by a slot (held, or released and not yet freed), and never more than
 * max_held slots own one; a batch just taken is owned by its slot and still in its place until
 * the step returns, counted twice, never zero times.
 *
 * Lock order: one mutex (tg_loader.mu) guards the slots' states, the ready slot, the counters and
 * the pass's flags; nothing else is locked while it is held, but for the budget's own mutex
 * (tg_budget_reserve in slot_fit is called without mu).
 *
 * The pass's thread is the loader's own, not the kit's prepare-ahead (engine/ahead.h), because
 * the loader turns a push into a pull rather than preparing items ahead: ahead asks its produce
 * function for item k and gives item k the slot k % slots, while the loader's items are the
 * batches a strategy's pass pushes through its step callback from inside tg_run_pass (which
 * cannot be asked for batch k), released by the caller in any order, up to max_held (64) at
 * once, where ahead's next item waits for the release of that very slot. Running the whole
 * pass as ahead's one item would replace only pthread_create, the join and the error box: the
 * slots would keep their own mutex and conditions, and ahead's abort does not wake them. The
 * strategies behind the loader prepare ahead with engine/ahead themselves. */
#include "tiergnn/loader.h"

#include "engine-impl.h"

#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#define MAX_HELD 64

typedef enum { SLOT_FREE = 0, SLOT_FILLING, SLOT_READY, SLOT_HELD } slot_state_t;

typedef struct slot {
    tg_loader_batch_t pub; /* first: the pointer tg_loader_next lends is the slot's */
    tg_block_t blocks[TG_MAX_LAYERS];
    void *arena;       /* the batch's arrays and y (arena_layout) */
    size_t cap;        /* bytes of arena */
    float *X;          /* the X this slot owns (held, or released and not freed yet), or NULL;
                          a ready batch's X is its step's (pub.X), not yet the slot's */
    uint64_t reserved; /* bytes of the budget this slot holds: its arena and its X */
    slot_state_t state;
} slot_t;

struct tg_loader {
    tg_run_t r;
    int run_open;
    tg_loader_opts_t o; /* the caller's (its strings read at open only); o.seeds = seeds */
    int64_t fanouts[TG_MAX_LAYERS];
    const char *split_name;
    uint64_t *seeds;       /* the caller's seeds, copied (NULL: a split of the run) */
    const uint64_t *order; /* the seeds the plan orders */
    uint64_t num_order;
    int training;              /* a training pass: the seeds are the training split */
    int next_pass;             /* the strategy prepares the next epoch (TG_STRAT_NEXT_PASS) */
    tg_plan_t plan, next_plan; /* the epoch's and the next one's (tg_plan_init or views) */
    uint8_t *mask;             /* whole-graph mode: which nodes are seeds */
    uint64_t reserved;         /* budget bytes besides the slots' */
    uint64_t slot_bytes;       /* each slot's share of the budget at open */
    slot_t *slots;
    int nslots; /* max_held */
    int ready;  /* the slot whose batch the step offers (the rendezvous), or -1 */
    int nheld;

    /* the epoch */
    uint64_t epoch, epoch_batches, start, end; /* the share: batch ids [start, end) */
    tg_pass_t pass, next;
    pthread_t thr;
    int thr_live;
    pthread_mutex_t mu;
    pthread_cond_t cv_prod; /* a slot became free, the ready batch was taken, or abort */
    pthread_cond_t cv_cons; /* a batch became ready, the pass ended, or (wait_held) one freed */
    int abort, done;
    tg_errbox_t box;
    uint64_t produced, yielded, index0;
    tg_loader_stats_t st;
};

void tg_loader_opts_default(tg_loader_opts_t *o)
{
    memset(o, 0, sizeof *o);
    o->strategy = "auto";
    o->num_layers = 2;
    for (int l = 0; l < TG_MAX_LAYERS; l++)
        o->fanouts[l] = 10;
    o->batch_size = 1024;
    o->shuffle = 1;
    o->world_size = 1;
    o->max_held = 2;
    o->threads = 1;
    o->sampler_threads = -1;
}

/* ---------------------------------------------------------------- options */

static int check_opts(const tg_loader_opts_t *o, const tg_sampler_i **sampler)
{
    *sampler = NULL;
    if (!o->dataset || !*o->dataset) return tg_err(-EINVAL, "loader: dataset is required");
    if (o->sampler && strcmp(o->sampler, "node") != 0) {
        *sampler = tg_sampler_find(o->sampler);
        if (!*sampler)
            return tg_err(-EINVAL, "loader: sampler '%s' unknown, expected node or ladies",
                          o->sampler);
    }
    if (o->num_layers < 1 || o->num_layers > TG_MAX_LAYERS)
        return tg_err(-EINVAL, "loader: num_layers %d out of range, expected 1..%d", o->num_layers,
                      TG_MAX_LAYERS);
    for (int l = 0; l < o->num_layers; l++) {
        if (o->fanouts[l] < TG_FANOUT_ALL)
            return tg_err(-EINVAL, "loader: fanouts[%d] = %lld, expected -1 (all) or >= 0", l,
                          (long long)o->fanouts[l]);
        if (*sampler && o->fanouts[l] < 1)
            return tg_err(-EINVAL,
                          "loader: fanouts[%d] = %lld, sampler %s expects >= 1 nodes "
                          "per layer",
                          l, (long long)o->fanouts[l], (*sampler)->name);
    }
    if (o->seeds && o->num_seeds == 0)
        return tg_err(-EINVAL, "loader: seeds given with num_seeds 0, expected >= 1 seeds");
    if (o->seeds && o->split)
        return tg_err(-EINVAL, "loader: both seeds and split '%s' given, expected one", o->split);
    if (o->split && strcmp(o->split, "train") && strcmp(o->split, "valid") &&
        strcmp(o->split, "test"))
        return tg_err(-EINVAL, "loader: split '%s' unknown, expected train, valid or test",
                      o->split);
    if (o->world_size < 1 || o->world_size > 65536)
        return tg_err(-EINVAL, "loader: world_size %d out of range, expected 1..65536",
                      o->world_size);
    if (o->rank < 0 || o->rank >= o->world_size)
        return tg_err(-EINVAL, "loader: rank %d out of range, expected 0..%d for world_size %d",
                      o->rank, o->world_size - 1, o->world_size);
    if (o->max_held < 1 || o->max_held > MAX_HELD)
        return tg_err(-EINVAL, "loader: max_held %d out of range, expected 1..%d", o->max_held,
                      MAX_HELD);
    if (o->threads < 1 || o->threads > 1024)
        return tg_err(-EINVAL, "loader: threads %d out of range, expected 1..1024", o->threads);
    if (o->sampler_threads < -1 || o->sampler_threads > 256)
        return tg_err(-EINVAL,
                      "loader: sampler_threads %d out of range, expected 0..256 (-1: "
                      "threads)",
                      o->sampler_threads);
    if ((o->shuffle | o->drop_last | o->wait_held | o->normalize | o->verify | o->verify_reads) &
        ~1)
        return tg_err(-EINVAL, "loader: shuffle, drop_last, wait_held, normalize, verify and "
                               "verify_reads take 0 or 1");
    return 0;
}

/* The seeds the loader orders: a split of the run, or the caller's (checked, copied). */
static int seeds_setup(tg_loader_t *L)
{
    tg_run_t *r = &L->r;
    if (!L->o.seeds) {
        int s = !strcmp(L->split_name, "train") ? 0 : !strcmp(L->split_name, "valid") ? 1 : 2;
        if (r->split_n[s] == 0)
            return tg_err(-EINVAL, "loader: split '%s' of %s is empty", L->split_name,
                          L->o.dataset);
        L->order = r->split[s];
        L->num_order = r->split_n[s];
        L->training = s == 0;
        return 0;
    }
    uint64_t n = L->o.num_seeds, N = r->ds->meta.num_nodes;
    for (uint64_t i = 0; i < n; i++)
        if (L->o.seeds[i] >= N)
            return tg_err(-EINVAL, "loader: seeds[%llu] = %llu is not a node of %s (%llu nodes)",
                          (unsigned long long)i, (unsigned long long)L->o.seeds[i], L->o.dataset,
                          (unsigned long long)N);
    int rc = tg_budget_reserve(&r->budget, n * sizeof *L->seeds, "the loader's seeds");
    if (rc < 0) return rc;
    L->reserved += n * sizeof *L->seeds;
    if (!(L->seeds = malloc(n * sizeof *L->seeds)))
        return tg_err(-ENOMEM, "loader: out of memory for %llu seeds", (unsigned long long)n);
    memcpy(L->seeds, L->o.seeds, n * sizeof *L->seeds);
    L->o.seeds = L->seeds;
    L->order = L->seeds;
    L->num_order = n;
    return 0;
}

/* The epoch plans: shuffled (tg_plan_init, as training) or views of the seeds in order. */
static int plans_setup(tg_loader_t *L)
{
    tg_run_t *r = &L->r;
    L->next_pass = L->training && (r->strat_i->info.caps & TG_STRAT_NEXT_PASS);
    if (!L->o.shuffle) return 0; /* views, made per epoch */
    tg_plan_opts_t po = {.num_nodes = r->ds->meta.num_nodes,
                         .train = L->order,
                         .num_train = L->num_order,
                         .batch_size = L->o.batch_size,
                         .num_layers = L->o.num_layers,
                         .fanouts = L->fanouts,
                         .seed = L->o.seed,
                         .max_batches = L->o.max_batches};
    int whole = tg_plan_whole_graph(po.batch_size, po.num_train, po.num_layers, po.fanouts);
    uint64_t order = (whole ? po.num_nodes : po.num_train) * sizeof(uint64_t);
    uint64_t bytes = order * (L->next_pass && !whole ? 2 : 1) + (whole ? po.num_nodes : 0);
    int rc = tg_budget_reserve(&r->budget, bytes, "the loader's seed order");
    if (rc < 0) return rc;
    L->reserved += bytes;
    if ((rc = tg_plan_init(&L->plan, &po)) < 0) return rc;
    if (whole) {
        L->next_pass = 0;
        if (!(L->mask = calloc(po.num_nodes, 1)))
            return tg_err(-ENOMEM, "loader: out of memory for the seeds' mask");
        for (uint64_t i = 0; i < L->num_order; i++)
            L->mask[L->order[i]] = 1;
        return 0;
    }
    if (L->next_pass && (rc = tg_plan_init(&L->next_plan, &po)) < 0) return rc;
    return 0;
}

/* The plan p at `epoch`. */
static void plan_at(tg_loader_t *L, tg_plan_t *p, uint64_t epoch)
{
    if (L->o.shuffle) {
        tg_plan_epoch(p, epoch);
        return;
    }
    tg_plan_view(p, L->order, L->num_order, L->o.batch_size, L->o.seed, epoch);
    /* a view has no cap of its own: max_batches as tg_plan_init applies it */
    if (L->o.max_batches && L->o.max_batches < p->num_batches) {
        p->num_batches = L->o.max_batches;
        p->num_seeds = TG_MIN(p->num_order, p->num_batches * p->batch_size);
    }
}

/* ---------------------------------------------------------------- the rank rule */

/* The pass of this rank's share of the epoch plan p: batches [start, end) of the epoch's n
 * (the plan's, or the strategy's own count), m = floor(n / K) per rank. */
static int share_of(tg_loader_t *L, const tg_plan_t *p, tg_pass_t *pass, uint64_t *n_out)
{
    tg_run_t *r = &L->r;
    *pass = (tg_pass_t){.seeds = p->seeds,
                        .num_seeds = p->num_seeds,
                        .batch_size = p->batch_size,
                        .seed = p->seed,
                        .epoch = p->epoch,
                        .num_layers = L->o.num_layers,
                        .fanouts = L->fanouts,
                        .sampler = r->sampler,
                        .allow_out_of_order = L->training,
                        .training = L->training};
    uint64_t n = p->num_batches;
    int rc;
    if (L->training && !p->whole_graph && r->strat_i->epoch_batches &&
        (rc = r->strat_i->epoch_batches(r->strat, pass, &n)) < 0)
        return rc;
    if (L->o.drop_last && p->batch_size && n && !r->strat_i->epoch_batches &&
        p->num_seeds - (n - 1) * p->batch_size < p->batch_size)
        n--;
    uint64_t K = (uint64_t)L->o.world_size, m = n / K;
    if (m == 0)
        return tg_err(-EINVAL,
                      "loader: world_size %d exceeds the %llu batch(es) of epoch %llu: "
                      "every rank needs one batch at least",
                      L->o.world_size, (unsigned long long)n, (unsigned long long)p->epoch);
    uint64_t start = (uint64_t)L->o.rank * m, end = start + m;
    pass->first_batch = start;
    /* The pass ends at `end`: its seeds stop there (batch b's seeds and RNG do not depend on
     * how many follow it). A strategy with its own batches may run past it: the step skips. */
    if (end < TG_MAX(n, p->num_batches))
        pass->num_seeds = TG_MIN(p->num_seeds, end * p->batch_size);
    *n_out = n;
    return 0;
}

/* ---------------------------------------------------------------- slots */

/* Byte offsets of a batch's arrays in a slot's arena (total), and the bytes of its X, which the
 * slot holds beside the arena (x_bytes). */
typedef struct {
    size_t nodes, indptr[TG_MAX_LAYERS], indices[TG_MAX_LAYERS], weights[TG_MAX_LAYERS], y, total,
        x_bytes;
} layout_t;

static size_t up64(size_t x)
{
    return (x + 63) & ~(size_t)63;
}

static void arena_layout(const tg_batch_t *b, uint32_t dim, uint32_t width, layout_t *a)
{
    size_t off = 0;
    a->x_bytes = (size_t)b->num_nodes * dim * sizeof(float);
    a->nodes = off;
    off = up64(off + (size_t)b->num_nodes * sizeof(uint64_t));
    for (int l = 0; l < b->num_layers; l++) {
        const tg_block_t *k = &b->blocks[l];
        a->indptr[l] = off;
        off = up64(off + ((size_t)k->num_dst + 1) * sizeof(uint64_t));
        a->indices[l] = off;
        off = up64(off + (size_t)k->num_edges * sizeof(uint32_t));
        a->weights[l] = off;
        if (k->weights) off = up64(off + (size_t)k->num_edges * sizeof(float));
    }
    a->y = off;
    off = up64(off + (size_t)b->num_seeds * width * sizeof(int32_t));
    a->total = off ? off : 64;
}

/* Grows s's arena to a->total, reserving what the arena and X exceed the slot's share of the
 * budget by. */
static int slot_fit(tg_loader_t *L, slot_t *s, const layout_t *a)
{
    uint64_t need = a->total + a->x_bytes;
    if (need > s->reserved) {
        int rc = tg_budget_reserve(&L->r.budget, need - s->reserved,
                                   "a loader slot outgrown by a larger batch");
        if (rc < 0) return tg_err_prefix(rc, "loader: max_held %d", L->o.max_held);
        s->reserved = need;
    }
    size_t bytes = a->total;
    if (bytes <= s->cap) return 0;
    void *arena = tg_aligned_alloc(64, bytes);
    if (!arena)
        return tg_err(-ENOMEM, "loader: out of memory for a batch slot of %zu bytes", bytes);
    free(s->arena);
    s->arena = arena;
    s->cap = bytes;
    return 0;
}

/* Copies batch b and its seeds' labels into slot s and lends X as it is (the pass's thread, s
 * FILLING). */
static int slot_fill(tg_loader_t *L, slot_t *s, const tg_batch_t *b, const float *X)
{
    const tg_run_t *r = &L->r;
    uint32_t dim = r->ds->meta.feat_dim, w = r->label_width;
    layout_t a;
    arena_layout(b, dim, w, &a);
    int rc = slot_fit(L, s, &a);
    if (rc < 0) return rc;
    char *base = s->arena;
    tg_batch_t *c = &s->pub.batch;
    *c = *b;
    c->blocks = s->blocks;
    c->nodes = (uint64_t *)(base + a.nodes);
    memcpy(c->nodes, b->nodes, (size_t)b->num_nodes * sizeof *c->nodes);
    for (int l = 0; l < b->num_layers; l++) {
        const tg_block_t *k = &b->blocks[l];
        tg_block_t *d = &s->blocks[l];
        *d = *k;
        d->indptr = (uint64_t *)(base + a.indptr[l]);
        d->indices = (uint32_t *)(base + a.indices[l]);
        d->weights = k->weights ? (float *)(base + a.weights[l]) : NULL;
        memcpy(d->indptr, k->indptr, ((size_t)k->num_dst + 1) * sizeof *d->indptr);
        memcpy(d->indices, k->indices, (size_t)k->num_edges * sizeof *d->indices);
        if (k->weights) memcpy(d->weights, k->weights, (size_t)k->num_edges * sizeof *d->weights);
    }
    s->pub.X = (float *)X;
    int32_t *y = (int32_t *)(base + a.y);
    tg_run_labels(r, b->nodes, b->num_seeds, L->mask, y);
    s->pub.y = y;
    s->pub.dim = dim;
    s->pub.label_width = w;
    s->pub.epoch = L->epoch;
    return 0;
}

static slot_t *free_slot(tg_loader_t *L)
{
    for (int i = 0; i < L->nslots; i++)
        if (L->slots[i].state == SLOT_FREE) return &L->slots[i];
    return NULL;
}

/* ---------------------------------------------------------------- the pass's thread */

/* The step callback: a batch of the share goes to a free slot (waiting while the caller holds
 * every slot), is offered, and the step waits until tg_loader_next takes it: then the slot owns
 * X (TG_PASS_KEEP_X). TG_PASS_STOP once the loader aborts the pass, also while the batch is
 * offered and not taken (X stays the pass's, which frees it). */
static int step(void *ctx, const tg_batch_t *b, const float *X)
{
    tg_loader_t *L = ctx;
    if (b->id < L->start || b->id >= L->end) return 0; /* past the share (hier's own count) */
    pthread_mutex_lock(&L->mu);
    double t0 = tg_now();
    slot_t *s;
    while (!L->abort && !(s = free_slot(L)))
        pthread_cond_wait(&L->cv_prod, &L->mu);
    L->st.stall_s += tg_now() - t0;
    if (L->abort) {
        pthread_mutex_unlock(&L->mu);
        return TG_PASS_STOP;
    }
    s->state = SLOT_FILLING;
    pthread_mutex_unlock(&L->mu);
    /* the X of the batch released from this slot last: freed once the new batch is offered, so
     * that unmapping it is off the caller's path (the slot still counts it meanwhile) */
    float *stale = s->X;
    s->X = NULL;
    double t1 = tg_now();
    int rc = slot_fill(L, s, b, X);
    pthread_mutex_lock(&L->mu);
    L->st.copy_s += tg_now() - t1;
    if (rc < 0) {
        s->state = SLOT_FREE;
        pthread_mutex_unlock(&L->mu);
        tg_pass_x_free(stale);
        return rc;
    }
    int idx = (int)(s - L->slots);
    s->state = SLOT_READY;
    L->ready = idx;
    pthread_cond_broadcast(&L->cv_cons);
    pthread_mutex_unlock(&L->mu);
    tg_pass_x_free(stale);
    /* the rendezvous: X waits in the strategy's place until the caller takes it */
    pthread_mutex_lock(&L->mu);
    double t2 = tg_now();
    while (!L->abort && L->ready == idx)
        pthread_cond_wait(&L->cv_prod, &L->mu);
    L->st.stall_s += tg_now() - t2;
    if (L->ready == idx) { /* aborted before it was taken: the batch is dropped */
        L->ready = -1;
        s->state = SLOT_FREE;
        s->pub.X = NULL;
        rc = TG_PASS_STOP;
    } else {
        rc = TG_PASS_KEEP_X; /* taken: its slot owns X (tg_loader_next) */
        L->produced++;
        L->st.feature_bytes += (uint64_t)b->num_nodes * L->r.row_bytes;
    }
    pthread_mutex_unlock(&L->mu);
    return rc;
}

static void stats_take(tg_loader_stats_t *st, const tg_pass_stats_t *ps)
{
    st->stopped = ps->stopped;
    st->sample_s = ps->sample_s;
    st->gather_s = ps->gather_s;
    st->pass_wait_s = ps->wait_s;
    st->batch_bytes_peak = ps->batch_bytes_peak;
    st->have_io = ps->have_io;
    st->io_requests = ps->io_requests;
    st->io_read_bytes = ps->io_read_bytes;
    st->have_io_wait = ps->have_io_wait;
    st->io_wait_s = ps->io_wait_s;
    st->have_cache = ps->have_cache;
    st->cache_lookups = ps->cache_lookups;
    st->cache_hits = ps->cache_hits;
    st->ntiers = TG_MIN(ps->ntiers, TG_LOADER_MAX_TIERS);
    for (int t = 0; t < st->ntiers; t++) {
        memcpy(st->tiers[t].name, ps->tiers[t].name, sizeof st->tiers[t].name);
        st->tiers[t].lookups = ps->tiers[t].lookups;
        st->tiers[t].hits = ps->tiers[t].hits;
        st->tiers[t].bytes = ps->tiers[t].bytes;
    }
}

/* The ended pass's keys of the epoch line that the loader's own fields do not carry (loader.h:
 * pass_json, pass_line), written by the kit's report (engine/report.c) as tiergnn train writes
 * them: cache_tiers, the strategy's own section (its report hook), neighbor_cache, and the
 * human line's part. Into json and line: the caller copies them under the mutex. */
static void pass_render(const tg_loader_t *L, const tg_pass_stats_t *ps, uint64_t needed,
                        char json[TG_LOADER_PASS_JSON], char line[TG_LOADER_PASS_LINE])
{
    char buf[TG_PASS_MAX_TIERS * 128 + 4];
    tg_json_t j;
    tg_json_begin(&j);
    tg_json_raw(&j, "cache_tiers", tg_pass_tiers_json(ps, buf, sizeof buf));
    tg_pass_report(&L->r, ps, &j, NULL, 0);
    if (ps->have_ncache)
        tg_json_raw(&j, "neighbor_cache", tg_pass_ncache_json(ps, buf, sizeof buf));
    line[0] = 0;
    tg_pass_line(&L->r, ps, needed, line, TG_LOADER_PASS_LINE);
    char *text = NULL;
    tg_json_end(&j, NULL, &text);
    if (text && strlen(text) < TG_LOADER_PASS_JSON) {
        memcpy(json, text, strlen(text) + 1);
    } else {
        /* a section too large for the field (or no memory for it): the tiers alone */
        tg_log_warn("loader: strategy %s's figures of epoch %llu left out of its statistics' "
                    "JSON (%zu bytes, more than %d)",
                    L->r.strat_i->info.name, (unsigned long long)L->epoch, text ? strlen(text) : 0,
                    TG_LOADER_PASS_JSON - 1);
        snprintf(json, TG_LOADER_PASS_JSON, "{\"cache_tiers\":%s}",
                 tg_pass_tiers_json(ps, buf, sizeof buf));
    }
    free(text);
}

static void *pass_main(void *arg)
{
    tg_loader_t *L = arg;
    tg_run_t *r = &L->r;
    tg_pass_stats_t ps;
    memset(&ps, 0, sizeof ps);
    double t0 = tg_now();
    int rc = tg_run_pass(r, &L->pass, &ps);
    pthread_mutex_lock(&L->mu);
    int aborted = L->abort;
    uint64_t got = L->produced;
    pthread_mutex_unlock(&L->mu);
    /* a pass that ends by itself has given the whole share, or the rank rule would not hold */
    if (rc >= 0 && !aborted && !ps.stopped && got != L->end - L->start)
        rc = tg_err(-EIO,
                    "loader: strategy %s's pass of epoch %llu gave %llu of the %llu "
                    "batches [%llu, %llu) of rank %d",
                    r->strat_i->info.name, (unsigned long long)L->epoch, (unsigned long long)got,
                    (unsigned long long)(L->end - L->start), (unsigned long long)L->start,
                    (unsigned long long)L->end, L->o.rank);
    if (rc < 0) tg_errbox_set(&L->box, rc, NULL);
    double time_s = tg_now() - t0;
    /* feature_bytes is written by step, on this thread: final here */
    uint64_t index_bytes = atomic_load(&r->index_bytes) - L->index0;
    char json[TG_LOADER_PASS_JSON], line[TG_LOADER_PASS_LINE];
    pass_render(L, &ps, index_bytes + L->st.feature_bytes, json, line);
    pthread_mutex_lock(&L->mu);
    stats_take(&L->st, &ps);
    L->st.stopped = aborted || ps.stopped;
    L->st.time_s = time_s;
    L->st.index_bytes = index_bytes;
    memcpy(L->st.pass_json, json, sizeof json);
    memcpy(L->st.pass_line, line, sizeof line);
    L->st.pass_done = 1;
    L->done = 1;
    pthread_cond_broadcast(&L->cv_cons);
    pthread_mutex_unlock(&L->mu);
    return NULL;
}

/* Aborts the pass and waits for its thread: a batch offered and not taken goes back to the
 * pass (step), held ones stay. */
static void pass_stop(tg_loader_t *L)
{
    if (!L->thr_live) return;
    pthread_mutex_lock(&L->mu);
    L->abort = 1;
    pthread_cond_broadcast(&L->cv_prod);
    pthread_mutex_unlock(&L->mu);
    pthread_join(L->thr, NULL);
    L->thr_live = 0;
}

/* Plans epoch `epoch` (this rank's share) and starts its pass on the loader's thread; the
 * previous pass has stopped. */
static int epoch_start(tg_loader_t *L, uint64_t epoch)
{
    tg_errbox_destroy(&L->box);
    tg_errbox_init(&L->box);
    memset(&L->st, 0, sizeof L->st);
    L->epoch = epoch;
    L->done = 1; /* until the pass starts: tg_loader_next reports a failure to start it */
    L->produced = L->yielded = 0;
    L->ready = -1;
    L->start = L->end = 0;
    plan_at(L, &L->plan, epoch);
    uint64_t n;
    int rc = share_of(L, &L->plan, &L->pass, &n);
    if (rc < 0) {
        tg_errbox_set(&L->box, rc, NULL);
        return rc;
    }
    L->pass.step = step;
    L->pass.ctx = L;
    L->pass.next = NULL;
    int last = L->o.num_epochs && epoch + 1 >= L->o.num_epochs;
    if (L->next_pass && !last) {
        plan_at(L, &L->next_plan, epoch + 1);
        uint64_t nn;
        /* the next epoch's share, as its pass will be asked: the strategy prepares that one */
        if (share_of(L, &L->next_plan, &L->next, &nn) == 0) L->pass.next = &L->next;
        tg_err_clear();
    }
    L->epoch_batches = n;
    L->start = L->pass.first_batch;
    L->end = L->start + n / (uint64_t)L->o.world_size;
    L->abort = L->done = 0;
    L->index0 = atomic_load(&L->r.index_bytes);
    if ((rc = pthread_create(&L->thr, NULL, pass_main, L)) != 0) {
        L->done = 1;
        rc = tg_err(-rc, "loader: cannot start the pass's thread: %s", strerror(rc));
        tg_errbox_set(&L->box, rc, NULL);
        return rc;
    }
    L->thr_live = 1;
    return 0;
}

/* ---------------------------------------------------------------- the budget */

/* One slot's bytes for the batch b, its arena and X (the budget plan's held_bytes). */
static uint64_t slot_bytes_for(void *ctx, const tg_batch_t *b)
{
    const tg_loader_t *L = ctx;
    layout_t a;
    arena_layout(b, L->r.ds->meta.feat_dim, L->r.label_width, &a);
    return a.total + a.x_bytes;
}

/* The run's budget plan without a model (engine/budget.c): it measures the share's first
 * batches and reserves the process, the strategy's matrices in flight and the max_held slots
 * (see loader.h, "Memory"): the batch offered to the caller waits in one of the strategy's
 * matrices (step), so no slot is reserved for it. Without a budget, nothing. */
static int budget_plan(tg_loader_t *L)
{
    tg_run_t *r = &L->r;
    char what[64];
    snprintf(what, sizeof what, "max_held %d held batches", L->o.max_held);
    /* a training pass of a strategy that makes its own batches measures those (hier's) */
    tg_budget_plan_opts_t bo = {.plan = &L->plan,
                                .num_layers = L->o.num_layers,
                                .fanouts = L->fanouts,
                                .sampler = r->sampler,
                                .first_batch = L->start,
                                .plan_batches = !L->training || L->plan.whole_graph,
                                .held = (uint64_t)L->nslots,
                                .held_bytes = slot_bytes_for,
                                .held_ctx = L,
                                .held_what = what};
    tg_budget_plan_t p;
    int rc = tg_budget_plan(r, NULL, &bo, &p);
    if (rc < 0) return tg_err_prefix(rc, "loader");
    if (!p.reserved) return 0;
    L->slot_bytes = p.held_each;
    L->reserved += p.reserved - p.held * p.held_each;
    for (int i = 0; i < L->nslots; i++)
        L->slots[i].reserved = L->slot_bytes;
    return 0;
}

/* ---------------------------------------------------------------- open, close */

/* What the automatic choice of strategy adds for the loader: its max_held slots and the
 * strategy's matrices in flight at the sampler's bound, and the process. */
static uint64_t auto_extra(const tg_loader_opts_t *o, const tg_sampler_i *sampler)
{
    tg_dataset_t *ds;
    if (tg_dataset_open(&ds, o->dataset, 0) < 0) {
        tg_err_clear();
        return 0;
    }
    uint64_t N = ds->meta.num_nodes, bs = o->batch_size ? o->batch_size : N;
    double x = (double)tg_sampler_max_nodes(sampler, bs, o->num_layers, o->fanouts, N) *
               ds->meta.feat_dim * sizeof(float);
    tg_dataset_close(ds);
    return (uint64_t)(x * (o->max_held + 4)) + ((uint64_t)32 << 20);
}

static int run_open(tg_loader_t *L, const tg_sampler_i *sampler)
{
    const tg_loader_opts_t *o = &L->o;
    tg_run_opts_t ro;
    memset(&ro, 0, sizeof ro);
    ro.dataset = o->dataset;
    ro.strategy = o->strategy;
    tg_strategy_opts_default(&ro.sopts);
    ro.sopts.normalize = o->normalize;
    ro.sopts.threads = o->threads;
    ro.sopts.sampler_threads = o->sampler_threads;
    ro.args = o->strategy_args;
    ro.nargs = o->num_strategy_args;
    ro.mem_bytes = o->mem_bytes;
    ro.auto_extra = auto_extra(o, sampler);
    ro.threads = o->threads;
    ro.verify = o->verify;
    ro.verify_reads = o->verify_reads;
    int rc = tg_run_open_opts(&L->r, &ro);
    if (rc < 0) return rc;
    L->run_open = 1;
    L->r.sampler = sampler;
    return 0;
}

static int slots_alloc(tg_loader_t *L)
{
    L->nslots = L->o.max_held;
    L->slots = calloc((size_t)L->nslots, sizeof *L->slots);
    if (!L->slots) return tg_err(-ENOMEM, "loader: out of memory for its slots");
    return 0;
}

int tg_loader_open(tg_loader_t **out, const tg_loader_opts_t *o)
{
    *out = NULL;
    const tg_sampler_i *sampler = NULL;
    int rc = check_opts(o, &sampler);
    if (rc < 0) return rc;
    tg_loader_t *L = calloc(1, sizeof *L);
    if (!L) return tg_err(-ENOMEM, "loader: out of memory");
    L->o = *o;
    L->split_name = o->split ? o->split : "train";
    memcpy(L->fanouts, o->fanouts, sizeof L->fanouts);
    pthread_mutex_init(&L->mu, NULL);
    pthread_cond_init(&L->cv_prod, NULL);
    pthread_cond_init(&L->cv_cons, NULL);
    tg_errbox_init(&L->box);
    if ((rc = slots_alloc(L)) < 0) goto err;
    if ((rc = run_open(L, sampler)) < 0) goto err;
    if ((rc = seeds_setup(L)) < 0) goto err;
    if (L->o.drop_last && L->training && L->r.strat_i->epoch_batches) {
        rc = tg_err(-EINVAL,
                    "loader: drop_last with strategy %s, which makes its own batches "
                    "(several of them smaller than the batch size): not supported",
                    L->r.strat_i->info.name);
        goto err;
    }
    if ((rc = plans_setup(L)) < 0) goto err;
    /* The first epoch's share, for the budget's measure; then its pass. A strategy that counts
     * its own batches (hier) sizes them when asked (its mega-batches, from what the budget
     * leaves): the budget plan comes first there, as in tiergnn train, so that the strategy gets
     * what the plan leaves rather than all of --mem. Its plan measures its own batches (its
     * profile hook), not the share's first ones, so the share's start is not needed for it. */
    plan_at(L, &L->plan, o->epoch);
    int own_count = L->training && !L->plan.whole_graph && L->r.strat_i->epoch_batches;
    if (own_count && (rc = budget_plan(L)) < 0) goto err;
    tg_pass_t p;
    uint64_t n;
    if ((rc = share_of(L, &L->plan, &p, &n)) < 0) goto err;
    L->start = p.first_batch;
    L->end = L->start + n / (uint64_t)o->world_size;
    if (!own_count && (rc = budget_plan(L)) < 0) goto err;
    if ((rc = epoch_start(L, o->epoch)) < 0) goto err;
    /* the caller's strings and arrays are not kept (loader.h) */
    L->o.dataset = L->r.ds->dir;
    L->o.strategy = L->r.strat_i->info.name;
    L->o.strategy_args = NULL;
    L->o.num_strategy_args = 0;
    L->o.sampler = L->o.split = L->split_name = NULL;
    *out = L;
    return 0;
err:
    tg_loader_close(L);
    return rc;
}

void tg_loader_close(tg_loader_t *L)
{
    if (!L) return;
    pass_stop(L);
    uint64_t slot_bytes = 0;
    for (int i = 0; L->slots && i < L->nslots; i++) {
        tg_pass_x_free(L->slots[i].X);
        free(L->slots[i].arena);
        slot_bytes += L->slots[i].reserved;
    }
    if (L->run_open) tg_budget_release(&L->r.budget, slot_bytes + L->reserved);
    free(L->slots);
    free(L->mask);
    free(L->seeds);
    tg_plan_destroy(&L->plan);
    tg_plan_destroy(&L->next_plan);
    /* the run drains what the strategy prepares between passes before it closes */
    if (L->run_open) tg_run_close(&L->r);
    tg_errbox_destroy(&L->box);
    pthread_cond_destroy(&L->cv_cons);
    pthread_cond_destroy(&L->cv_prod);
    pthread_mutex_destroy(&L->mu);
    free(L);
}

/* ---------------------------------------------------------------- the caller's side */

int tg_loader_set_epoch(tg_loader_t *L, uint64_t epoch)
{
    /* the epoch just started and untouched: its pass is already the one asked for */
    if (L->thr_live && L->epoch == epoch && L->yielded == 0 && !tg_errbox_failed(&L->box)) return 0;
    pass_stop(L);
    return epoch_start(L, epoch);
}

int tg_loader_next(tg_loader_t *L, const tg_loader_batch_t **out)
{
    *out = NULL;
    pthread_mutex_lock(&L->mu);
    double t0 = tg_now();
    /* the share given whole is the epoch's end, however many batches are held */
    int ended = L->yielded >= L->end - L->start;
    while (!ended && L->o.wait_held && L->nheld >= L->o.max_held)
        pthread_cond_wait(&L->cv_cons, &L->mu);
    if (!ended && L->nheld >= L->o.max_held) {
        pthread_mutex_unlock(&L->mu);
        return tg_err(-EBUSY,
                      "loader: %d batches held, max_held is %d: release one "
                      "(tg_loader_release) before taking the next",
                      L->nheld, L->o.max_held);
    }
    while (L->ready < 0 && !L->done && L->thr_live)
        pthread_cond_wait(&L->cv_cons, &L->mu);
    L->st.wait_s += tg_now() - t0;
    if (L->ready >= 0) {
        slot_t *s = &L->slots[L->ready];
        L->ready = -1;
        s->state = SLOT_HELD;
        s->X = s->pub.X; /* the slot owns X now; the step returns TG_PASS_KEEP_X */
        pthread_cond_broadcast(&L->cv_prod); /* the step waits in the rendezvous */
        s->pub.index = L->yielded++;
        L->nheld++;
        pthread_mutex_unlock(&L->mu);
        *out = &s->pub;
        return 1;
    }
    pthread_mutex_unlock(&L->mu);
    if (L->thr_live) {
        pthread_join(L->thr, NULL);
        L->thr_live = 0;
    }
    int rc = tg_errbox_raise(&L->box);
    if (rc < 0)
        return tg_err_prefix(rc, "loader: epoch %llu, strategy %s", (unsigned long long)L->epoch,
                             L->r.strat_i->info.name);
    return 0;
}

int tg_loader_release(tg_loader_t *L, const tg_loader_batch_t *b)
{
    pthread_mutex_lock(&L->mu);
    int i = -1;
    for (int k = 0; k < L->nslots; k++)
        if (b == &L->slots[k].pub) i = k;
    if (i < 0 || L->slots[i].state != SLOT_HELD) {
        pthread_mutex_unlock(&L->mu);
        return tg_err(-EINVAL, "loader: release of a batch the loader does not hold (%s)",
                      i < 0 ? "not one of its slots" : "released already");
    }
    /* its X is freed by the pass's thread when it fills the slot again (step), off the
     * caller's path: unmapping a matrix costs time */
    L->slots[i].state = SLOT_FREE;
    L->nheld--;
    pthread_cond_signal(&L->cv_prod);
    if (L->o.wait_held) pthread_cond_broadcast(&L->cv_cons); /* a next waiting at max_held */
    pthread_mutex_unlock(&L->mu);
    return 0;
}

void tg_loader_info(const tg_loader_t *L, tg_loader_info_t *info)
{
    const tg_meta_t *m = &L->r.ds->meta;
    memset(info, 0, sizeof *info);
    info->strategy = L->r.strat_i->info.name;
    info->sampler = tg_sampler_name(L->r.sampler);
    info->num_nodes = m->num_nodes;
    info->dim = m->feat_dim;
    info->label_width = L->r.label_width;
    info->num_classes = m->num_classes;
    info->multi_label = m->multi_label;
    info->whole_graph = L->plan.whole_graph;
    info->num_seeds = L->num_order;
    info->epoch = L->epoch;
    info->epoch_batches = L->epoch_batches;
    info->rank_batches = L->end - L->start;
    info->first_batch = L->start;
    info->max_held = L->o.max_held;
    info->slot_bytes = L->slot_bytes;
    info->mem_bytes = L->r.budget.limit;
}

void tg_loader_stats(tg_loader_t *L, tg_loader_stats_t *st)
{
    pthread_mutex_lock(&L->mu);
    *st = L->st;
    st->epoch = L->epoch;
    st->batches = L->yielded;
    st->rank_batches = L->end - L->start;
    pthread_mutex_unlock(&L->mu);
    pthread_mutex_lock(&L->r.budget.mu);
    st->mem_bytes = L->r.budget.limit;
    st->data_bytes = L->r.budget.used;
    st->data_bytes_peak = L->r.budget.peak;
    pthread_mutex_unlock(&L->r.budget.mu);
}

int tg_loader_stats_json(const tg_loader_stats_t *st, char **out)
{
    *out = NULL;
    tg_json_t j;
    tg_json_begin(&j);
    tg_json_uint(&j, "epoch", st->epoch);
    tg_json_uint(&j, "batches", st->batches);
    tg_json_uint(&j, "rank_batches", st->rank_batches);
    tg_json_bool(&j, "pass_done", st->pass_done);
    tg_json_bool(&j, "stopped", st->stopped);
    tg_json_num(&j, "sample_s", st->pass_done ? st->sample_s : NAN);
    tg_json_num(&j, "gather_s", st->pass_done ? st->gather_s : NAN);
    tg_json_num(&j, "wait_s", st->wait_s);
    tg_json_num(&j, "copy_s", st->copy_s);
    tg_json_num(&j, "stall_s", st->stall_s);
    tg_json_num(&j, "pass_time_s", st->pass_done ? st->time_s : NAN);
    tg_json_num(&j, "pass_wait_s", st->pass_done ? st->pass_wait_s : NAN);
    int io = st->pass_done && st->have_io;
    tg_json_num(&j, "io_requests", io ? (double)st->io_requests : NAN);
    tg_json_num(&j, "io_read_bytes", io ? (double)st->io_read_bytes : NAN);
    tg_json_uint(&j, "io_needed_bytes", st->index_bytes + st->feature_bytes);
    tg_json_num(&j, "io_wait_s", st->pass_done && st->have_io_wait ? st->io_wait_s : NAN);
    tg_json_num(&j, "cache_hit_ratio",
                st->pass_done && st->have_cache && st->cache_lookups
                    ? (double)st->cache_hits / (double)st->cache_lookups
                    : NAN);
    tg_json_uint(&j, "batch_bytes_peak", st->batch_bytes_peak);
    tg_json_uint(&j, "mem_bytes", st->mem_bytes);
    tg_json_uint(&j, "data_bytes", st->data_bytes);
    tg_json_uint(&j, "data_bytes_peak", st->data_bytes_peak);
    char *head = NULL;
    tg_json_end(&j, NULL, &head);
    /* the pass's keys (pass_json's members) close the object: "{...," + "...}" */
    const char *pj =
        st->pass_done && st->pass_json[0] == '{' ? st->pass_json : "{\"cache_tiers\":[]}";
    size_t hl = head ? strlen(head) : 0, pl = strnlen(pj, TG_LOADER_PASS_JSON - 1);
    char *all = head ? realloc(head, hl + pl) : NULL;
    if (!all) {
        free(head);
        return tg_err(-ENOMEM, "loader: out of memory for the statistics' JSON");
    }
    if (pl > 2) {
        all[hl - 1] = ',';
        memcpy(all + hl, pj + 1, pl - 1);
        all[hl + pl - 1] = 0;
    }
    *out = all;
    return 0;
}
