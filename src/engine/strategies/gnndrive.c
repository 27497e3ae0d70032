/* Strategy "gnndrive": GNNDrive's CPU-training pipeline (Jin et al., "GNNDrive", section 4):
 *
 *     sampler threads -> extracting queue -> extractor threads -> training queue -> trainer
 *                                                                  -> releasing queue -> releaser
 *
 * Samplers: a tg_loader_t over the disk-resident adjacency (indptr in RAM, indices read through
 * io/ with O_DIRECT); its per-thread bounded queues are the extracting queue and hand batches out
 * in id order. Extractors (threads, each with its own io_uring queue over features.bin, opened
 * once) take the next batch and move its rows through the shared feature buffer (store/featbuf:
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
#include "../pipeline.h"

#include <pthread.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "tiergnn/featbuf.h"

#define ADJ_MIN_QUEUES 2u
#define ADJ_DEPTH 64u
#define ADJ_MAX_READ ((size_t)16 << 10)
#define ADJ_MAX_REQUESTS ((size_t)4096)
#define IO_BOOKKEEPING 120u              /* bytes per request while a read runs (io.h) */
#define FEAT_SPAN ((size_t)64 << 10)     /* largest read of rows merged across holes */
#define FEAT_MAX_READ ((size_t)16 << 10) /* largest read of adjacent rows (io/ merges them) */
#define DEFAULT_DEPTH 32u
#define MERGED_DEPTH 32u
#define MIN_PROBED_DEPTH 16u
#define MIN_DEPTH 4u /* the least depth a tight budget may lower the automatic one to */
#define MIN_CHUNK 256u
#define DEFAULT_CHUNK 8192u
#define HANDLE_BYTES_PER_ROW 24u /* featbuf handle arrays per row (slots, loads, flags) */
#define HANDLE_BYTES_FIXED 4096u

/* ---------------------------------------------------------------- options */

/* The options of the table (int64_t fields at their offsets). */
typedef struct {
    int64_t extractors, queue_depth, io_depth, chunk_rows, io_gap, out_of_order, sweep_batches;
    int64_t feature_buffer;
} gd_cfg_t;

#define GD_OPT(n, k, d, lo, hi, a, f, m, h)                                                        \
    {                                                                                              \
        .name = n, .kind = k, .def = d, .min = lo, .max = hi, .auto_ok = a,                        \
        .offset = offsetof(gd_cfg_t, f), .meta = m, .help = h                                      \
    }

static const tg_strategy_opt_t gd_opts[] = {
    GD_OPT("extractors", TG_SOPT_INT, 2, 1, 64, 0, extractors, "E",
           "extractor threads (default 2)"),
    GD_OPT("queue-depth", TG_SOPT_INT, 2, 1, 1024, 0, queue_depth, "Q",
           "training/releasing queue capacity (default 2)"),
    GD_OPT("io-depth", TG_SOPT_INT, 0, 0, 4096, 0, io_depth, "D",
           "reads in flight per extractor (default 0: the device probe's depth / E)"),
    GD_OPT("io-gap", TG_SOPT_SIZE, -1, 0, 1 << 20, 1, io_gap, "BYTES",
           "read through holes up to BYTES to merge rows (default auto: what the disk reads in "
           "one request's time)"),
    GD_OPT("chunk-rows", TG_SOPT_INT, 0, 0, 1 << 24, 0, chunk_rows, "N",
           "rows per feature-buffer acquire (default 0: automatic)"),
    GD_OPT("sweep-batches", TG_SOPT_INT, 1, 1, 16, 0, sweep_batches, "S",
           "batches an extractor reads in one sweep of the feature file (default 1)"),
    GD_OPT("out-of-order", TG_SOPT_FLAG, 0, 0, 1, 0, out_of_order, NULL,
           "train batches as they are extracted (faster, not bit-identical)"),
    GD_OPT("feature-buffer", TG_SOPT_SIZE, 0, 0, INT64_MAX, 0, feature_buffer, "SIZE",
           "feature buffer size when there is no --mem (default 0: an eighth of the RAM, at "
           "most the feature file)"),
};

/* Everything the strategy reads: the common settings and its own options, resolved. */
typedef struct {
    int normalize, threads, sampler_threads;
    int extractors, queue_depth, out_of_order, sweep_batches;
    unsigned io_depth;    /* 0 = from the device probe */
    uint32_t chunk_rows;  /* 0 = automatic */
    int64_t io_gap;       /* < 0 = automatic */
    uint64_t cache_bytes; /* without --mem: feature buffer size (0 = automatic) */
} gd_opts_t;

static void gd_resolve(const tg_strategy_opts_t *o, gd_opts_t *g)
{
    const gd_cfg_t *c = o->cfg;
    memset(g, 0, sizeof *g);
    g->normalize = o->normalize;
    g->threads = o->threads;
    g->sampler_threads = o->sampler_threads;
    g->extractors = c->extractors > 0 ? (int)c->extractors : 1;
    g->queue_depth = c->queue_depth > 0 ? (int)c->queue_depth : 1;
    g->io_depth = (unsigned)c->io_depth;
    g->chunk_rows = (uint32_t)c->chunk_rows;
    g->io_gap = c->io_gap;
    g->out_of_order = (int)c->out_of_order;
    g->sweep_batches = c->sweep_batches > 0 ? (int)c->sweep_batches : 1;
    g->cache_bytes = (uint64_t)c->feature_buffer;
}

/* ---------------------------------------------------------------- sizing */

/* The device's preferred depth and the hole size worth reading through, from tg_io_probe_run
 * (cached per device, measured once otherwise). Computed once per process. */
static pthread_once_t probe_once = PTHREAD_ONCE_INIT;
static const char *probe_path;
static unsigned probe_depth;
static uint64_t probe_gap;
static int probe_ok;

static void probe_run(void)
{
    tg_io_probe_t pr;
    tg_io_probe_opts_t po = {0};
    if (tg_io_probe_run(probe_path, &po, &pr) < 0) {
        tg_log_warn("gnndrive: device probe failed (%s); using %u reads in flight and no read "
                    "merging across holes",
                    tg_errmsg(), DEFAULT_DEPTH);
        return;
    }
    probe_ok = 1;
    probe_depth = pr.best_depth ? pr.best_depth : DEFAULT_DEPTH;
    /* A read costs about 1/iops of the device's time at that depth; in that time it could have
     * transferred seq_bytes_per_s / iops bytes. A hole smaller than that is cheaper to read. */
    double iops = 0;
    for (unsigned i = 0; i < pr.ndepths; i++)
        if (pr.depth[i] == pr.best_depth) iops = pr.iops[i];
    if (iops > 0 && pr.seq_bytes_per_s > 0) probe_gap = (uint64_t)(pr.seq_bytes_per_s / iops);
}

typedef struct {
    unsigned depth;  /* reads in flight per extractor */
    uint64_t gap;    /* hole bytes read through (0: one read per row, merged only if adjacent) */
    size_t span;     /* largest merged read */
    size_t max_read; /* the extractors' io/ queues: a merged run is one disk read */
    uint32_t chunk;  /* rows per acquire */
    /* bytes against --mem */
    uint64_t adj;           /* indptr + the index reads' staging (reserved at open) */
    uint64_t adj_transient; /* io/ bookkeeping while index reads run */
    uint64_t ex_fixed;      /* extractors' io/ staging and merged-read buffers */
    uint64_t ex_transient;  /* io/ bookkeeping while a chunk's reads run */
    uint64_t fb_min;        /* the feature buffer's minimum with this chunk, handles included */
    size_t row_bytes;       /* one row in the file */
    uint32_t align; /* slot alignment: rows land in slots with O_DIRECT when it divides them */
} gd_plan_t;

/* One queue per sampler thread for the index reads: each sampler's read of a layer waits for
 * its disk reads, so samplers overlap their waits only with queues of their own. */
static unsigned adj_queues(const gd_opts_t *o)
{
    return TG_MAX(ADJ_MIN_QUEUES, (unsigned)o->sampler_threads);
}

static void fb_opts_for(const tg_dataset_t *ds, const gd_plan_t *pl, int extractors,
                        tg_featbuf_opts_t *fo)
{
    memset(fo, 0, sizeof *fo);
    fo->num_nodes = ds->meta.num_nodes;
    fo->feat_dim = ds->meta.feat_dim;
    fo->dtype = ds->meta.feat_dtype;
    fo->max_batch_nodes = pl->chunk;
    fo->max_batches = (uint32_t)extractors;
    fo->slot_align = pl->align;
}

static uint64_t handle_bytes(uint32_t chunk)
{
    return (uint64_t)chunk * HANDLE_BYTES_PER_ROW + HANDLE_BYTES_FIXED;
}

/* The depth, merge gap and every fixed cost of the strategy on ds with chunks of `chunk` rows. */
static void plan_for(const tg_dataset_t *ds, const gd_opts_t *o, uint32_t chunk, unsigned max_depth,
                     gd_plan_t *pl)
{
    memset(pl, 0, sizeof *pl);
    const tg_meta_t *m = &ds->meta;
    int E = o->extractors > 0 ? o->extractors : 1;
    pl->row_bytes = (size_t)m->feat_dim * tg_feat_dtype_size(m->feat_dtype);
    if (o->io_depth) {
        pl->depth = o->io_depth;
    } else if (probe_ok) {
        /* the device's depth, shared by the extractors; not below MIN_PROBED_DEPTH, because a
         * probe taken while other processes load the disk can report a best depth of 1 or 4,
         * and a shallow queue costs far more on a free disk than a deep one on a busy disk */
        pl->depth = (probe_depth + (unsigned)E - 1) / (unsigned)E;
        if (pl->depth < MIN_PROBED_DEPTH) pl->depth = MIN_PROBED_DEPTH;
    } else {
        pl->depth = DEFAULT_DEPTH;
    }
    uint64_t gap = o->io_gap >= 0 ? (uint64_t)o->io_gap : (probe_ok ? probe_gap : 0);
    pl->span = FEAT_SPAN;
    pl->gap = TG_MIN(gap, (uint64_t)pl->span / 2);
    pl->max_read = pl->gap ? pl->span : FEAT_MAX_READ;
    /* Merged reads are long: a few in flight keep the disk's bandwidth busy, and each costs
     * two buffers of span bytes against --mem that the feature buffer can use better. */
    if (pl->gap && !o->io_depth) pl->depth = TG_MIN(pl->depth, MERGED_DEPTH);
    /* a tight budget lowers the automatic depth: every read in flight holds staging */
    if (max_depth && !o->io_depth) pl->depth = TG_MIN(pl->depth, max_depth);
    pl->chunk = chunk;
    /* 512-byte slots let an O_DIRECT read of a whole row land in its slot without a copy. */
    pl->align = pl->row_bytes % 512 == 0 ? 512 : 0;
    pl->adj =
        (m->num_nodes + 1) * sizeof(uint64_t) + (uint64_t)adj_queues(o) * ADJ_DEPTH * ADJ_MAX_READ;
    pl->adj_transient = (uint64_t)adj_queues(o) * ADJ_MAX_REQUESTS * IO_BOOKKEEPING;
    pl->ex_fixed = (uint64_t)E * ((uint64_t)pl->depth * pl->max_read +
                                  (pl->gap ? (uint64_t)pl->depth * pl->span : 0));
    pl->ex_transient = (uint64_t)E * chunk * IO_BOOKKEEPING;
    tg_featbuf_opts_t fo;
    fb_opts_for(ds, pl, E, &fo);
    pl->fb_min = tg_featbuf_bytes_for(&fo, tg_featbuf_min_slots(&fo)) + E * handle_bytes(chunk);
}

static char probe_file[4096];

/* Runs the device probe once per process (its result sizes the reads) unless both the depth and
 * the merge gap were given. */
static void ensure_probe(const tg_dataset_t *ds, const gd_opts_t *o)
{
    if (o->io_depth && o->io_gap >= 0) return;
    static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
    pthread_mutex_lock(&mu);
    if (!probe_path) {
        tg_dataset_path(ds, TG_FILE_FEATURES, probe_file, sizeof probe_file);
        probe_path = probe_file;
    }
    pthread_mutex_unlock(&mu);
    pthread_once(&probe_once, probe_run);
}

static uint64_t plan_total(const gd_plan_t *pl)
{
    return pl->adj + pl->adj_transient + pl->ex_fixed + pl->ex_transient + pl->fb_min;
}

static uint64_t gd_min_bytes(const tg_dataset_t *ds, const tg_strategy_opts_t *so, char *why,
                             size_t why_len)
{
    gd_opts_t go, *o = &go;
    gd_resolve(so, o);
    ensure_probe(ds, o);
    gd_plan_t pl;
    plan_for(ds, o, o->chunk_rows ? o->chunk_rows : MIN_CHUNK, MIN_DEPTH, &pl);
    char a[32], b[32], c[32];
    snprintf(why, why_len,
             "indptr and index-read staging %s, feature-read staging of %d extractor(s) %s, "
             "feature buffer of at least %d x %u rows %s",
             tg_fmt_bytes(pl.adj + pl.adj_transient, a, sizeof a), o->extractors,
             tg_fmt_bytes(pl.ex_fixed + pl.ex_transient, b, sizeof b), o->extractors, pl.chunk,
             tg_fmt_bytes(pl.fb_min, c, sizeof c));
    return plan_total(&pl);
}

/* ---------------------------------------------------------------- state */

typedef struct {
    int id;
    tg_io_t *io; /* NULL after the queue broke: recreated at the next batch */
    tg_featbuf_batch_t *h;
    tg_io_req_t *reqs;             /* (2 * chunk): direct rows and merged runs */
    uint32_t *run_first, *run_len; /* merged run r covers loads [first, first + len) */
    uint32_t *pending;             /* runs waiting for a merge buffer */
    char *stage;                   /* depth x span, 4 KiB aligned */
    uint32_t *free_stage;          /* free merge buffers */
    uint64_t staged_bytes;         /* reserved for stage */
} extractor_t;

struct tg_strategy {
    tg_run_t *r;
    gd_opts_t o;
    tg_io_stats_t stats; /* every disk read: index reads of the samplers, feature reads */
    tg_io_file_t *feat;
    char feat_path[4096];
    /* created at the first pass, when the run has reserved everything else */
    int ready;
    gd_plan_t plan;
    tg_featbuf_t *fb;
    int E;
    extractor_t *ex;
    uint32_t dim;
    int dead; /* an earlier pass shut the buffer down */
};

static int gd_open(tg_strategy_t **out, tg_run_t *r, const tg_strategy_opts_t *sopts)
{
    *out = NULL;
    tg_strategy_t *s = calloc(1, sizeof *s);
    if (!s) return tg_err(-ENOMEM, "strategy gnndrive: out of memory");
    s->r = r;
    gd_resolve(sopts, &s->o);
    const gd_opts_t *o = &s->o;
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

static void extractor_free(tg_strategy_t *s, extractor_t *x)
{
    tg_featbuf_batch_destroy(x->h);
    tg_io_destroy(x->io);
    free(x->reqs);
    free(x->run_first);
    free(x->run_len);
    free(x->pending);
    free(x->free_stage);
    free(x->stage);
    if (x->staged_bytes) tg_budget_release(&s->r->budget, x->staged_bytes);
    memset(x, 0, sizeof *x);
}

static int extractor_io(tg_strategy_t *s, extractor_t *x)
{
    tg_io_opts_t io = {.depth = s->plan.depth,
                       .max_read_bytes = s->plan.max_read,
                       .budget = &s->r->budget,
                       .stats = &s->stats};
    return tg_io_create(&x->io, &io);
}

/* Sizes and creates the extractors and the feature buffer from what the budget has left. */
static int gd_setup(tg_strategy_t *s)
{
    tg_run_t *r = s->r;
    const tg_dataset_t *ds = r->ds;
    int E = s->o.extractors, rc;
    ensure_probe(ds, &s->o);
    uint32_t chunk = s->o.chunk_rows ? s->o.chunk_rows : DEFAULT_CHUNK;
    if (chunk > ds->meta.num_nodes) chunk = (uint32_t)TG_MAX(ds->meta.num_nodes, 1);
    gd_plan_t pl;
    unsigned depth_cap = 0;
    plan_for(ds, &s->o, chunk, depth_cap, &pl);
    uint64_t limit = r->budget.limit;
    if (limit) {
        /* Under a tight budget: halve the automatic depth until the extractors' staging takes
         * at most a quarter of what is left, and the chunk until the buffer's minimum is at most
         * a quarter of what the buffer gets (then the depth again): the rest of the buffer is
         * cache, which is what saves reads. The adjacency is reserved already. */
        uint64_t avail = limit > r->budget.used ? limit - r->budget.used : 0;
        for (;;) {
            uint64_t fixed = pl.adj_transient + pl.ex_fixed + pl.ex_transient;
            int ok_depth = pl.ex_fixed <= avail / 4, ok_chunk = fixed + 4 * pl.fb_min <= avail;
            int can_chunk = !s->o.chunk_rows && chunk > MIN_CHUNK;
            int can_depth = !s->o.io_depth && pl.depth > MIN_DEPTH;
            if (ok_depth && ok_chunk) break;
            if (!ok_depth && can_depth)
                depth_cap = TG_MAX(pl.depth / 2, MIN_DEPTH);
            else if (!ok_chunk && can_chunk)
                chunk = TG_MAX(chunk / 2, MIN_CHUNK);
            else if (!ok_chunk && can_depth)
                depth_cap = TG_MAX(pl.depth / 2, MIN_DEPTH);
            else
                break;
            plan_for(ds, &s->o, chunk, depth_cap, &pl);
        }
    }
    s->plan = pl;
    s->E = E;
    s->ex = calloc((size_t)E, sizeof *s->ex);
    if (!s->ex) return tg_err(-ENOMEM, "gnndrive: out of memory");
    for (int e = 0; e < E; e++) {
        extractor_t *x = &s->ex[e];
        x->id = e;
        if ((rc = extractor_io(s, x)) < 0) goto err;
        x->reqs = malloc(2 * (size_t)chunk * sizeof *x->reqs);
        x->run_first = malloc((size_t)chunk * sizeof *x->run_first);
        x->run_len = malloc((size_t)chunk * sizeof *x->run_len);
        x->pending = malloc((size_t)chunk * sizeof *x->pending);
        x->free_stage = malloc((size_t)pl.depth * sizeof *x->free_stage);
        if (!x->reqs || !x->run_first || !x->run_len || !x->pending || !x->free_stage) {
            rc = tg_err(-ENOMEM, "gnndrive: out of memory for extractor %d", e);
            goto err;
        }
        if (pl.gap) {
            uint64_t sb = (uint64_t)pl.depth * pl.span;
            if ((rc = tg_budget_reserve(&r->budget, sb, "gnndrive merged-read buffers")) < 0)
                goto err;
            x->staged_bytes = sb;
            x->stage = tg_aligned_alloc(4096, (size_t)sb);
            if (!x->stage) {
                rc = tg_err(-ENOMEM, "gnndrive: out of memory for merged-read buffers");
                goto err;
            }
        }
    }
    tg_featbuf_opts_t fo;
    fb_opts_for(ds, &pl, E, &fo);
    uint64_t hb = (uint64_t)E * handle_bytes(chunk);
    if (limit) {
        /* Everything left, less the handles and the io layer's bookkeeping while reads run. */
        uint64_t used = r->budget.used, keep = hb + pl.adj_transient + pl.ex_transient;
        fo.mem_bytes = limit > used + keep ? limit - used - keep : 1;
    } else {
        /* No --mem: the buffer caches up to an eighth of RAM, or the whole feature file. */
        uint64_t cap = s->o.cache_bytes ? s->o.cache_bytes : tg_phys_mem_bytes() / 8;
        uint64_t want = tg_featbuf_bytes_for(
            &fo, (uint32_t)TG_MIN(ds->meta.num_nodes, (uint64_t)UINT32_MAX - 1));
        fo.mem_bytes = TG_MAX(TG_MIN(cap, want), pl.fb_min);
    }
    if ((rc = tg_featbuf_create(&s->fb, &fo, &r->budget)) < 0) {
        char a[32];
        tg_err_prefix(rc, "gnndrive: --mem %s cannot hold the feature buffer",
                      tg_fmt_bytes(limit, a, sizeof a));
        goto err;
    }
    for (int e = 0; e < E; e++)
        if ((rc = tg_featbuf_batch_create(s->fb, &s->ex[e].h)) < 0) goto err;
    char a[32], b[32];
    tg_log_info("gnndrive: %d extractor(s), %u reads in flight each, %u rows per chunk, "
                "feature buffer %u slots (%s), %s%s",
                E, pl.depth, chunk, tg_featbuf_num_slots(s->fb),
                tg_fmt_bytes(tg_featbuf_reserved_bytes(s->fb), a, sizeof a),
                pl.gap ? "holes up to " : "one read per row run",
                pl.gap ? tg_fmt_bytes(pl.gap, b, sizeof b) : "");
    s->ready = 1;
    return 0;
err:
    if (s->ex)
        for (int e = 0; e < E; e++)
            extractor_free(s, &s->ex[e]);
    free(s->ex);
    s->ex = NULL;
    tg_featbuf_destroy(s->fb);
    s->fb = NULL;
    return rc;
}

static void gd_close(tg_strategy_t *s)
{
    if (!s) return;
    if (s->ex)
        for (int e = 0; e < s->E; e++)
            extractor_free(s, &s->ex[e]);
    free(s->ex);
    tg_featbuf_destroy(s->fb);
    tg_io_file_close(s->feat);
    free(s);
}

/* ---------------------------------------------------------------- one pass */

/* One pass as an extractor sees it: the strategy and the pipeline it runs on. */
typedef struct {
    tg_strategy_t *s;
    tg_pipe_t *pipe;
} pass_t;

static void fail(pass_t *P, int rc, const char *msg)
{
    tg_pipe_fail(P->pipe, rc, msg);
}

/* The queue broke (a failed submit or reap): destroying it waits for the reads the kernel still
 * owns, so no slot is given up while a read may land in it; then every outstanding load fails.
 * The extractor makes a new queue at its next batch. */
static int queue_broke(pass_t *P, extractor_t *x, int rc)
{
    fail(P, rc, tg_errmsg());
    tg_io_destroy(x->io);
    x->io = NULL;
    tg_featbuf_complete_all(x->h, rc);
    return rc;
}

/* Reads the loads of the acquired chunk and completes every one of them, whatever happens.
 * Rows alone (or adjacent: the io layer merges those) are read straight into their slots; rows
 * separated by holes of at most plan.gap bytes are read as one run into a merge buffer and
 * copied to their slots. Returns 0 or the first failure, whose message is recorded in the pass
 * before the failed rows are completed: a batch waiting for one of them then reports the I/O
 * error (file and offset) and not only its consequence. */
static int read_loads(pass_t *P, extractor_t *x, const tg_featbuf_load_t *ld, size_t nl,
                      uint64_t batch)
{
    tg_strategy_t *s = P->s;
    const gd_plan_t *pl = &s->plan;
    tg_featbuf_t *fb = s->fb;
    size_t row = pl->row_bytes;
    int rc = 0;
    if (!x->io && (rc = extractor_io(s, x)) < 0) {
        fail(P, rc, tg_errmsg());
        tg_featbuf_complete_all(x->h, rc);
        return rc;
    }
    /* reqs[0, nd): single rows; reqs[nl + r]: merged run r. user = load index << 1 for a row,
     * run index << 1 | 1 for a run. Loads come sorted by node (TG_FEATBUF_SORT_LOADS). */
    uint64_t align = tg_io_file_align(s->feat);
    size_t nd = 0, nruns = 0;
    for (size_t i = 0; i < nl;) {
        size_t j = i + 1;
        uint64_t start = ld[i].node * row, end = start + row;
        if (pl->gap)
            while (j < nl) {
                /* a run's aligned read must fit one merge buffer */
                uint64_t o = ld[j].node * row;
                if (o < end || o - end > pl->gap || o + row - start + 2 * align > pl->span) break;
                end = o + row;
                j++;
            }
        if (j - i == 1) {
            x->reqs[nd++] = (tg_io_req_t){.file = s->feat,
                                          .off = start,
                                          .len = row,
                                          .dst = tg_featbuf_row(fb, ld[i].slot),
                                          .user = (void *)(uintptr_t)(i << 1)};
        } else {
            x->run_first[nruns] = (uint32_t)i;
            x->run_len[nruns] = (uint32_t)(j - i);
            nruns++;
        }
        i = j;
    }
    tg_io_req_t *runreq = x->reqs + nl;
    size_t nfree = 0, rnext = 0;
    for (uint32_t b = 0; b < pl->depth && x->stage; b++)
        x->free_stage[nfree++] = b;
    if (nd && (rc = tg_io_submit(x->io, x->reqs, nd)) < 0) return queue_broke(P, x, rc);
    int failed = 0;
    for (;;) {
        /* Runs get a merge buffer each as buffers come free, submitted together. */
        size_t k = 0;
        while (!failed && rnext + k < nruns && nfree > 0) {
            size_t r = rnext + k;
            uint32_t bidx = x->free_stage[--nfree];
            const tg_featbuf_load_t *a = &ld[x->run_first[r]];
            const tg_featbuf_load_t *z = &ld[x->run_first[r] + x->run_len[r] - 1];
            /* aligned, so that the read lands in the buffer directly, but not past the end of
             * the file (a short read there would be an error) */
            uint64_t off = a->node * row / align * align;
            uint64_t end = (z->node * row + row + align - 1) / align * align;
            end = TG_MIN(end, tg_io_file_size(s->feat));
            runreq[r] = (tg_io_req_t){.file = s->feat,
                                      .off = off,
                                      .len = (size_t)(end - off),
                                      .dst = x->stage + (size_t)bidx * pl->span,
                                      .user = (void *)(uintptr_t)((r << 1) | 1)};
            k++;
        }
        if (k && (rc = tg_io_submit(x->io, runreq + rnext, k)) < 0) return queue_broke(P, x, rc);
        rnext += k;
        if (tg_io_inflight(x->io) == 0) break;
        tg_io_req_t *done[64];
        int got = tg_io_reap(x->io, done, 64, 1);
        if (got < 0) return queue_broke(P, x, got);
        for (int i = 0; i < got; i++) {
            tg_io_req_t *q = done[i];
            uintptr_t u = (uintptr_t)q->user;
            size_t first = (u & 1) ? x->run_first[u >> 1] : (u >> 1);
            if (q->res < 0 && !failed) {
                char msg[900];
                snprintf(msg, sizeof msg, "%s", tg_errmsg());
                rc = tg_err(q->res, "batch %llu: reading the features of node %llu: %s",
                            (unsigned long long)batch, (unsigned long long)ld[first].node, msg);
                fail(P, rc, tg_errmsg());
                failed = 1;
            }
            if (!(u & 1)) {
                tg_featbuf_complete(x->h, first, q->res);
                continue;
            }
            const char *base = q->dst;
            for (uint32_t t = 0; t < x->run_len[u >> 1]; t++) {
                const tg_featbuf_load_t *l = &ld[first + t];
                if (q->res == 0)
                    memcpy(tg_featbuf_row(fb, l->slot), base + (l->node * row - q->off), row);
                tg_featbuf_complete(x->h, first + t, q->res);
            }
            x->free_stage[nfree++] = (uint32_t)((base - x->stage) / pl->span);
        }
    }
    /* After a failure the runs not yet submitted fail too. */
    if (failed) tg_featbuf_complete_all(x->h, rc);
    return rc;
}

/* keys[i] = node << 32 | position, sorted by node: LSD radix sort on the node bits (two 16-bit
 * passes; ids are < 2^32), stable, O(n). tmp has room for n keys. */
static void sort_by_node(uint64_t *keys, uint64_t *tmp, size_t n)
{
    for (int shift = 32; shift < 64; shift += 16) {
        size_t count[65537];
        memset(count, 0, sizeof count);
        for (size_t i = 0; i < n; i++)
            count[((keys[i] >> shift) & 0xffff) + 1]++;
        for (size_t d = 0; d < 65536; d++)
            count[d + 1] += count[d];
        for (size_t i = 0; i < n; i++)
            tmp[count[(keys[i] >> shift) & 0xffff]++] = keys[i];
        memcpy(keys, tmp, n * sizeof *keys);
    }
}

/* A group of batches extracted in one sweep: batch j's position p is global index off[j] + p. */
typedef struct {
    const tg_batch_t *const *b;
    float *const *X;
    int ng;
    uint64_t off[TG_PIPE_MAX_GROUP + 1];
} group_t;

/* Copies the rows of the acquired chunk (unique nodes ids[c0 .. c0 + n)) to every place they
 * take in the group's matrices: the keys start[u] .. start[u+1] of unique node u name them (f16
 * rows widened). Only after tg_featbuf_wait returned 0. */
static void scatter_rows(const tg_strategy_t *s, const tg_featbuf_batch_t *h, const group_t *G,
                         const uint64_t *keys, const uint32_t *start, size_t c0)
{
    size_t n;
    const uint32_t *slots = tg_featbuf_batch_slots(h, &n);
    uint32_t dim = s->dim;
    int f16 = s->r->ds->meta.feat_dtype == TG_F16;
    int j = 0;
    for (size_t u = 0; u < n; u++) {
        const void *src = tg_featbuf_row(s->fb, slots[u]);
        for (uint32_t k = start[c0 + u]; k < start[c0 + u + 1]; k++) {
            uint64_t gi = keys[k] & 0xffffffffu;
            while (gi < G->off[j])
                j--;
            while (gi >= G->off[j + 1])
                j++;
            float *dst = G->X[j] + (size_t)(gi - G->off[j]) * dim;
            if (!f16) {
                memcpy(dst, src, (size_t)dim * sizeof(float));
            } else {
                const uint16_t *h16 = src;
                for (uint32_t d = 0; d < dim; d++)
                    dst[d] = tg_f16_to_f32(h16[d]);
            }
        }
    }
}

/* Moves the rows of a group of batches into their matrices X through the feature buffer, in one
 * sweep over the feature file: the group's nodes are sorted by id and deduplicated, and chunks
 * of consecutive ids are acquired, read and scattered in turn. In id order a chunk covers a
 * narrow range of the file, where its rows lie close together and merge into few reads (chunks
 * of a batch's own order would scatter over the whole file), and a row two batches of the group
 * share is read once. Sweeps alternate direction from group to group, so that a sweep starts
 * where the previous one ended, among the rows the standby list still holds. */
static int extract_group(pass_t *P, extractor_t *x, const group_t *G)
{
    tg_strategy_t *s = P->s;
    uint32_t chunk = s->plan.chunk;
    uint64_t total = G->off[G->ng];
    size_t bytes = (size_t)total * (2 * sizeof(uint64_t) + sizeof(uint32_t)) + sizeof(uint32_t);
    uint64_t *keys = malloc((size_t)total * 2 * sizeof *keys + 1);
    uint32_t *start = malloc(((size_t)total + 1) * sizeof *start);
    uint64_t first = G->b[0]->id;
    if (!keys || !start) {
        free(keys);
        free(start);
        int rc = tg_err(-ENOMEM, "batch %llu: out of memory for the extraction of %llu rows",
                        (unsigned long long)first, (unsigned long long)total);
        fail(P, rc, tg_errmsg());
        return rc;
    }
    tg_pipe_count_bytes(P->pipe, (int64_t)bytes);
    uint64_t *tmp = keys + total;
    for (int j = 0; j < G->ng; j++) {
        const tg_batch_t *b = G->b[j];
        for (uint32_t i = 0; i < b->num_nodes; i++)
            keys[G->off[j] + i] = b->nodes[i] << 32 | (G->off[j] + i);
    }
    sort_by_node(keys, tmp, (size_t)total);
    uint64_t *ids = tmp, nu = 0; /* the unique node ids, in order */
    for (uint64_t k = 0; k < total; k++)
        if (k == 0 || keys[k] >> 32 != keys[k - 1] >> 32) {
            ids[nu] = keys[k] >> 32;
            start[nu++] = (uint32_t)k;
        }
    start[nu] = (uint32_t)total;
    uint64_t nchunks = (nu + chunk - 1) / chunk;
    int descending = (first / (uint64_t)G->ng) & 1;
    int rc = 0;
    for (uint64_t ci = 0; ci < nchunks && rc == 0; ci++) {
        if (tg_pipe_aborted(P->pipe)) {
            rc = -ECANCELED;
            break;
        }
        uint64_t c0 = (descending ? nchunks - 1 - ci : ci) * chunk;
        size_t n = (size_t)TG_MIN((uint64_t)chunk, nu - c0);
        rc = tg_featbuf_acquire(x->h, ids + c0, n, TG_FEATBUF_SORT_LOADS);
        if (rc < 0) {
            if (rc != -ECANCELED) {
                tg_err_prefix(rc, "batch %llu", (unsigned long long)first);
                fail(P, rc, tg_errmsg());
            }
            break;
        }
        size_t nl;
        const tg_featbuf_load_t *ld = tg_featbuf_batch_loads(x->h, &nl);
        rc = read_loads(P, x, ld, nl, first);
        if (rc == 0) {
            rc = tg_featbuf_wait(x->h);
            /* a row another extractor failed to load: that extractor recorded the error */
            if (rc < 0 && rc != -ECANCELED) {
                tg_err_prefix(rc, "batch %llu", (unsigned long long)first);
                fail(P, rc, tg_errmsg());
            }
        }
        if (rc == 0) scatter_rows(s, x->h, G, keys, start, (size_t)c0);
        int rr = tg_featbuf_release(x->h);
        if (rc == 0 && rr < 0) {
            rc = rr;
            fail(P, rc, tg_errmsg());
        }
    }
    free(keys);
    free(start);
    tg_pipe_count_bytes(P->pipe, -(int64_t)bytes);
    if (rc == 0 && s->o.normalize)
        for (int j = 0; j < G->ng; j++)
            tg_feat_normalize_rows(G->X[j], G->b[j]->num_nodes, s->dim);
    return rc;
}

/* The pipeline's work function: extractor `worker` moves a group of consecutive batches. */
static int gd_work(void *ctx, tg_pipe_t *pipe, int worker, const tg_batch_t *const *b,
                   float *const *X, int n)
{
    pass_t P = {.s = ctx, .pipe = pipe};
    group_t G = {.b = b, .X = X, .ng = n};
    for (int j = 0; j < n; j++)
        G.off[j + 1] = G.off[j] + b[j]->num_nodes;
    return extract_group(&P, &P.s->ex[worker], &G);
}

/* The first error of a pass: blocked extractors wake up with -ECANCELED; the buffer is unusable
 * from now on. */
static void gd_on_error(void *ctx)
{
    tg_strategy_t *s = ctx;
    if (s->fb) tg_featbuf_shutdown(s->fb);
    s->dead = 1;
}

static int gd_pass(tg_strategy_t *s, const tg_pass_t *p, tg_pass_stats_t *st)
{
    memset(st, 0, sizeof *st);
    st->next_batch = p->first_batch;
    if (s->dead)
        return tg_err(-ECANCELED, "gnndrive: the pipeline was shut down by an earlier error");
    int rc;
    if (!s->ready && (rc = gd_setup(s)) < 0) return rc;
    tg_featbuf_stats_t fs0;
    tg_io_counts_t io0;
    tg_featbuf_stats(s->fb, &fs0, 1);
    tg_io_stats_take(&s->stats, &io0);
    tg_pipe_opts_t po = {.pass = p,
                         .adj = s->r->adj,
                         .dim = s->dim,
                         .sampler_threads = s->o.sampler_threads,
                         .prefetch = (size_t)s->o.queue_depth,
                         .workers = s->E,
                         .group = s->o.sweep_batches > 0 ? s->o.sweep_batches : 1,
                         .work = gd_work,
                         .work_ctx = s,
                         .queue_depth = s->o.queue_depth,
                         .in_order = !(p->allow_out_of_order && s->o.out_of_order),
                         .on_error = gd_on_error};
    rc = tg_pipe_run(&po, st);
    tg_featbuf_stats_t fs;
    tg_featbuf_stats(s->fb, &fs, 1);
    st->have_cache = 1;
    st->cache_lookups = fs.lookups;
    st->cache_hits = fs.hits + fs.waits;
    tg_io_counts_t io;
    tg_io_stats_take(&s->stats, &io);
    st->have_io = st->have_io_wait = 1;
    st->io_requests = io.io_requests;
    st->io_read_bytes = io.io_read_bytes;
    st->io_wait_s = io.io_wait_s;
    return rc;
}

/* Matrix places of the pipeline: extractors x sweep + queue depth (pipeline.h). */
static int gd_in_flight(const tg_strategy_opts_t *so)
{
    gd_opts_t o;
    gd_resolve(so, &o);
    return o.extractors * o.sweep_batches + o.queue_depth;
}

const tg_strategy_i tg_strategy_gnndrive = {
    .info = {.name = "gnndrive",
             .summary = "GNNDrive: samplers -> extractors (io_uring into a shared feature buffer) "
                        "-> trainer -> releaser; indices and features on disk",
             .caps = TG_STRAT_EXACT | TG_STRAT_AUTO_OOC,
             .opts = gd_opts,
             .num_opts = sizeof gd_opts / sizeof gd_opts[0],
             .config_size = sizeof(gd_cfg_t),
             .example_args = "--mem 32M --extractors 3 --chunk-rows 64"},
    .min_bytes = gd_min_bytes,
    .open = gd_open,
    .pass = gd_pass,
    .close = gd_close,
    .batches_in_flight = gd_in_flight,
};
