/* store/extract: the rows of a group of batches moved into their matrices X through a stack of
 * tiers (see tiergnn/extract.h for the contract). Sections: the read plan (device probe, depth,
 * merge gap, chunk, bytes), the extraction and its workers, reading a chunk's misses with merging
 * through holes, one group (sort, dedupe, chunks, tiers, scatter), counters. The static tier is
 * in tier.c. */
#include "tiergnn/extract.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "tiergnn/rowcrc.h"
#include "tiergnn/store.h"

#define FEAT_SPAN ((size_t)64 << 10)     /* largest read of rows merged across holes */
#define FEAT_MAX_READ ((size_t)16 << 10) /* largest read of adjacent rows (io/ merges them) */
#define DEFAULT_DEPTH 32u
#define MERGED_DEPTH 32u
#define MIN_PROBED_DEPTH 16u
#define HANDLE_BYTES_PER_ROW 24u /* featbuf handle arrays per row (slots, loads, flags) */
#define HANDLE_BYTES_FIXED 4096u
#define REAP_MAX 64

/* ---------------------------------------------------------------- device probe */

/* The device's preferred depth and the hole size worth reading through, from tg_io_probe_run
 * (cached per device on disk by io/, measured once otherwise). Computed once per process, on
 * the first path asked for. */
static pthread_once_t probe_once = PTHREAD_ONCE_INIT;
static pthread_mutex_t probe_mu = PTHREAD_MUTEX_INITIALIZER;
static char probe_path[4096];
static unsigned probe_depth;
static uint64_t probe_gap;
static int probe_ok;

/* The depth and the hole worth reading through of a probe. */
static void probe_figures(const tg_io_probe_t *pr, unsigned *depth, uint64_t *gap)
{
    *depth = pr->best_depth ? pr->best_depth : DEFAULT_DEPTH;
    /* A read costs about 1/iops of the device's time at that depth; in that time it could have
     * transferred seq_bytes_per_s / iops bytes. A hole smaller than that is cheaper to read. */
    double iops = 0;
    *gap = 0;
    for (unsigned i = 0; i < pr->ndepths; i++)
        if (pr->depth[i] == pr->best_depth) iops = pr->iops[i];
    if (iops > 0 && pr->seq_bytes_per_s > 0) *gap = (uint64_t)(pr->seq_bytes_per_s / iops);
}

static void probe_run(void)
{
    tg_io_probe_t pr;
    tg_io_probe_opts_t po = {0};
    if (tg_io_probe_run(probe_path, &po, &pr) < 0) {
        tg_log_warn("extract: device probe failed (%s); using %u reads in flight and no read "
                    "merging across holes",
                    tg_errmsg(), DEFAULT_DEPTH);
        return;
    }
    probe_figures(&pr, &probe_depth, &probe_gap);
    probe_ok = 1;
}

static void ensure_probe(const tg_extract_plan_opts_t *o)
{
    if ((o->io_depth && o->io_gap >= 0) || o->probe || !o->probe_path) return;
    pthread_mutex_lock(&probe_mu);
    if (!probe_path[0]) snprintf(probe_path, sizeof probe_path, "%s", o->probe_path);
    pthread_mutex_unlock(&probe_mu);
    pthread_once(&probe_once, probe_run);
}

/* ---------------------------------------------------------------- the read plan */

void tg_extract_plan_opts_default(tg_extract_plan_opts_t *o)
{
    memset(o, 0, sizeof *o);
    o->dtype = TG_F32;
    o->extractors = 1;
    o->io_gap = -1;
    o->featbuf = 1;
}

void tg_extract_plan_featbuf_opts(const tg_extract_plan_t *pl, tg_featbuf_opts_t *fo)
{
    memset(fo, 0, sizeof *fo);
    fo->num_nodes = pl->num_nodes;
    fo->feat_dim = pl->feat_dim;
    fo->dtype = pl->dtype;
    fo->max_batch_nodes = pl->chunk;
    fo->max_batches = (uint32_t)pl->extractors * (pl->overlap ? 2u : 1u);
    fo->slot_align = pl->align;
}

/* Bytes between rows in a worker's staging rows (no feature buffer): slot-aligned like the
 * buffer's, so whole-row O_DIRECT reads land there without a copy. */
static size_t row_stride(const tg_extract_plan_t *pl)
{
    return pl->align ? (pl->row_bytes + pl->align - 1) / pl->align * pl->align : pl->row_bytes;
}

/* The depth, merge gap and every cost with chunks of `chunk` rows and at most max_depth reads
 * in flight (0 = no cap). */
static void plan_for(const tg_extract_plan_opts_t *o, uint32_t chunk, unsigned max_depth,
                     tg_extract_plan_t *pl)
{
    memset(pl, 0, sizeof *pl);
    int E = o->extractors;
    pl->extractors = E;
    pl->num_nodes = o->num_nodes;
    pl->feat_dim = o->feat_dim;
    pl->dtype = o->dtype;
    pl->featbuf = o->featbuf;
    pl->overlap = o->featbuf && o->overlap;
    /* the probe given, else the process's */
    unsigned p_depth = probe_depth;
    uint64_t p_gap = probe_gap;
    int p_ok = probe_ok;
    if (o->probe) {
        probe_figures(o->probe, &p_depth, &p_gap);
        p_ok = 1;
    }
    pl->probed = p_ok && !(o->io_depth && o->io_gap >= 0);
    pl->row_bytes = (size_t)o->feat_dim * tg_feat_dtype_size(o->dtype);
    if (o->io_depth) {
        pl->depth = o->io_depth;
    } else if (o->depth_hint) {
        pl->depth = o->depth_hint;
    } else if (p_ok) {
        /* the device's depth, shared by the workers; not below MIN_PROBED_DEPTH, because a
         * probe taken while other processes load the disk can report a best depth of 1 or 4,
         * and a shallow queue costs far more on a free disk than a deep one on a busy disk */
        pl->depth = (p_depth + (unsigned)E - 1) / (unsigned)E;
        if (pl->depth < MIN_PROBED_DEPTH) pl->depth = MIN_PROBED_DEPTH;
    } else {
        pl->depth = DEFAULT_DEPTH;
    }
    uint64_t gap = o->io_gap >= 0 ? (uint64_t)o->io_gap : (p_ok ? p_gap : 0);
    pl->span = FEAT_SPAN;
    pl->gap = TG_MIN(gap, (uint64_t)pl->span / 2);
    pl->max_read = pl->gap ? pl->span : FEAT_MAX_READ;
    /* Merged reads are long: a few in flight keep the disk's bandwidth busy, and each costs
     * two buffers of span bytes against --mem that the feature buffer can use better. */
    if (pl->gap && !o->io_depth && !o->depth_hint) pl->depth = TG_MIN(pl->depth, MERGED_DEPTH);
    /* a tight budget lowers the automatic depth: every read in flight holds staging */
    if (max_depth && !o->io_depth) pl->depth = TG_MIN(pl->depth, max_depth);
    pl->chunk = chunk;
    /* 512-byte slots let an O_DIRECT read of a whole row land in its slot without a copy. */
    pl->align = pl->row_bytes % 512 == 0 ? 512 : 0;
    pl->stage_bytes = (uint64_t)E * ((uint64_t)pl->depth * pl->max_read +
                                     (pl->gap ? (uint64_t)pl->depth * pl->span : 0));
    /* with overlap two chunks' reads are queued at once */
    unsigned held = pl->overlap ? 2u : 1u;
    pl->transient_bytes = (uint64_t)E * held * chunk * TG_EXTRACT_IO_BOOKKEEPING;
    if (o->featbuf) {
        tg_featbuf_opts_t fo;
        tg_extract_plan_featbuf_opts(pl, &fo);
        pl->handle_bytes =
            (uint64_t)E * held * ((uint64_t)chunk * HANDLE_BYTES_PER_ROW + HANDLE_BYTES_FIXED);
        pl->featbuf_min = tg_featbuf_bytes_for(&fo, tg_featbuf_min_slots(&fo)) + pl->handle_bytes;
    } else {
        pl->rows_bytes = (uint64_t)E * chunk * row_stride(pl);
    }
}

int tg_extract_plan(tg_extract_plan_t *pl, const tg_extract_plan_opts_t *o)
{
    memset(pl, 0, sizeof *pl);
    if (o->num_nodes == 0 || o->feat_dim == 0 || o->extractors < 1 ||
        (o->dtype != TG_F32 && o->dtype != TG_F16))
        return tg_err(-EINVAL,
                      "extract plan: %llu rows of width %u, %d extractor(s) (need at least one "
                      "of each, f32 or f16)",
                      (unsigned long long)o->num_nodes, o->feat_dim, o->extractors);
    ensure_probe(o);
    if (o->minimum) {
        plan_for(o, o->chunk_rows ? o->chunk_rows : TG_EXTRACT_MIN_CHUNK, TG_EXTRACT_MIN_DEPTH, pl);
        return 0;
    }
    uint32_t chunk = o->chunk_rows ? o->chunk_rows : TG_EXTRACT_DEFAULT_CHUNK;
    if (chunk > o->num_nodes) chunk = (uint32_t)o->num_nodes;
    unsigned depth_cap = 0;
    plan_for(o, chunk, depth_cap, pl);
    if (!o->avail) return 0;
    /* Under a tight budget: halve the automatic depth until the staging takes at most a quarter
     * of what is left, and the chunk until the buffer's minimum is at most a quarter of what
     * the buffer gets (then the depth again): the rest of the buffer is cache, which is what
     * saves reads. Without a buffer the chunk's staging rows only have to fit. */
    for (;;) {
        uint64_t fixed = o->other_transient + pl->stage_bytes + pl->transient_bytes;
        uint64_t per_chunk = o->featbuf ? 4 * pl->featbuf_min : pl->rows_bytes;
        int ok_depth = pl->stage_bytes <= o->avail / 4, ok_chunk = fixed + per_chunk <= o->avail;
        int can_chunk = !o->chunk_rows && chunk > TG_EXTRACT_MIN_CHUNK;
        int can_depth = !o->io_depth && pl->depth > TG_EXTRACT_MIN_DEPTH;
        if (ok_depth && ok_chunk) break;
        if (!ok_depth && can_depth)
            depth_cap = TG_MAX(pl->depth / 2, TG_EXTRACT_MIN_DEPTH);
        else if (!ok_chunk && can_chunk)
            chunk = TG_MAX(chunk / 2, TG_EXTRACT_MIN_CHUNK);
        else if (!ok_chunk && can_depth)
            depth_cap = TG_MAX(pl->depth / 2, TG_EXTRACT_MIN_DEPTH);
        else
            break;
        plan_for(o, chunk, depth_cap, pl);
    }
    return 0;
}

uint64_t tg_extract_plan_bytes(const tg_extract_plan_t *pl)
{
    return pl->stage_bytes + pl->transient_bytes + pl->featbuf_min + pl->rows_bytes;
}

const char *tg_extract_plan_describe(const tg_extract_plan_t *pl, char *buf, size_t len)
{
    char a[32], b[32];
    tg_fmt_bytes(pl->stage_bytes + pl->transient_bytes, a, sizeof a);
    if (pl->featbuf)
        snprintf(buf, len,
                 "feature-read staging of %d extractor(s) %s, feature buffer of at least %d x %u "
                 "rows %s",
                 pl->extractors, a, pl->extractors * (pl->overlap ? 2 : 1), pl->chunk,
                 tg_fmt_bytes(pl->featbuf_min, b, sizeof b));
    else
        snprintf(buf, len, "feature-read staging of %d extractor(s) %s, staging rows %d x %u %s",
                 pl->extractors, a, pl->extractors, pl->chunk,
                 tg_fmt_bytes(pl->rows_bytes, b, sizeof b));
    return buf;
}

/* ---------------------------------------------------------------- extraction and workers */

/* One chunk in a worker's hands: its unique nodes, the RAM tiers' answer, its feature-buffer
 * handle and loads, its reads. A worker has one, or two with plan.overlap: the next chunk is
 * acquired and its reads queued while the current one's last reads drain. */
typedef struct chunk {
    tg_featbuf_batch_t *h;         /* NULL without a feature buffer */
    tg_io_req_t *reqs;             /* (2 * chunk): single rows, then merged runs */
    uint32_t *run_first, *run_len; /* (chunk) merged run r covers loads [first, first + len) */
    const void **src;              /* (chunk) raw row of each unique node of the chunk */
    uint64_t *miss;                /* (chunk) nodes the RAM tiers did not hold */
    uint32_t *miss_at;             /* (chunk) their index in the chunk */
    uint8_t *scat;                 /* (chunk) miss k went into X as its read completed */
    /* the chunk in flight: unique nodes [c0, c0 + n) of group G, nm of them misses */
    const struct group *G;
    size_t c0, n, nm;
    int held;       /* h is acquired: release it at the end */
    int tiers_done; /* the RAM tiers' rows went into X (while the reads ran) */
    const tg_featbuf_load_t *ld;
    size_t nl, nruns, rnext; /* the loads; merged runs, of which rnext are submitted */
    size_t left;             /* requests submitted and not reaped yet */
} chunk_t;

struct tg_extract_worker {
    tg_extract_t *ex;
    int id;
    tg_io_t *io;          /* NULL after the queue broke: recreated at the next group */
    chunk_t cx[2];        /* cx[1] only with plan.overlap */
    int ncx;              /* 1 or 2 */
    char *stage;          /* depth x span merge buffers, 4 KiB aligned */
    uint32_t *free_stage; /* (depth) free merge buffers */
    size_t nfree;
    uint64_t staged_bytes;  /* reserved for stage */
    tg_featbuf_load_t *own; /* (chunk) without a buffer: the loads, into rows */
    unsigned char *rows;    /* without a buffer: chunk staging rows, 4 KiB aligned */
    uint64_t rows_reserved;
    int failed; /* a read of the group failed: nothing more is submitted */
};

struct tg_extract {
    tg_extract_plan_t plan;
    tg_io_file_t *feat;
    int normalize;
    tg_budget_t *budget;
    tg_io_stats_t *stats;
    tg_tier_t **tiers;
    int ntiers;
    const tg_rowcrc_t *rowcrc;
    char who[32];
    tg_featbuf_t *fb;
    tg_extract_worker_t *w;
    int nw;
    /* counters of the last two tiers */
    _Atomic uint64_t fb_lookups, fb_hits, file_lookups, file_hits;
};

static int worker_io(tg_extract_worker_t *w)
{
    tg_extract_t *ex = w->ex;
    tg_io_opts_t io = {.depth = ex->plan.depth,
                       .max_read_bytes = ex->plan.max_read,
                       .budget = ex->budget,
                       .stats = ex->stats};
    return tg_io_create(&w->io, &io);
}

static void chunk_free(chunk_t *c)
{
    tg_featbuf_batch_destroy(c->h);
    free(c->reqs);
    free(c->run_first);
    free(c->run_len);
    free(c->src);
    free(c->miss);
    free(c->miss_at);
    free(c->scat);
}

static void worker_free(tg_extract_worker_t *w)
{
    tg_extract_t *ex = w->ex;
    for (int i = 0; i < 2; i++)
        chunk_free(&w->cx[i]);
    tg_io_destroy(w->io);
    free(w->free_stage);
    free(w->stage);
    free(w->own);
    free(w->rows);
    if (ex && ex->budget && w->staged_bytes + w->rows_reserved)
        tg_budget_release(ex->budget, w->staged_bytes + w->rows_reserved);
    memset(w, 0, sizeof *w);
}

static int reserve_alloc(tg_extract_t *ex, void **p, uint64_t bytes, uint64_t *reserved,
                         const char *what)
{
    char name[96];
    snprintf(name, sizeof name, "%s %s", ex->who, what);
    int rc;
    if (ex->budget && (rc = tg_budget_reserve(ex->budget, bytes, name)) < 0) return rc;
    *reserved = bytes;
    *p = tg_aligned_alloc(4096, (size_t)bytes);
    if (!*p) return tg_err(-ENOMEM, "%s: out of memory for %s", ex->who, what);
    return 0;
}

static int worker_init(tg_extract_t *ex, tg_extract_worker_t *w, int id)
{
    const tg_extract_plan_t *pl = &ex->plan;
    size_t chunk = pl->chunk;
    w->ex = ex;
    w->id = id;
    int rc;
    if ((rc = worker_io(w)) < 0) return rc;
    w->ncx = pl->overlap ? 2 : 1;
    w->free_stage = malloc((size_t)pl->depth * sizeof *w->free_stage);
    if (!w->free_stage) return tg_err(-ENOMEM, "%s: out of memory for extractor %d", ex->who, id);
    for (int i = 0; i < w->ncx; i++) {
        chunk_t *c = &w->cx[i];
        c->reqs = malloc(2 * chunk * sizeof *c->reqs);
        c->run_first = malloc(chunk * sizeof *c->run_first);
        c->run_len = malloc(chunk * sizeof *c->run_len);
        c->src = malloc(chunk * sizeof *c->src);
        c->miss = malloc(chunk * sizeof *c->miss);
        c->miss_at = malloc(chunk * sizeof *c->miss_at);
        c->scat = malloc(chunk);
        if (!c->reqs || !c->run_first || !c->run_len || !c->src || !c->miss || !c->miss_at ||
            !c->scat)
            return tg_err(-ENOMEM, "%s: out of memory for extractor %d", ex->who, id);
    }
    if (pl->gap && (rc = reserve_alloc(ex, (void **)&w->stage, (uint64_t)pl->depth * pl->span,
                                       &w->staged_bytes, "merged-read buffers")) < 0)
        return rc;
    if (!pl->featbuf) {
        w->own = malloc(chunk * sizeof *w->own);
        if (!w->own) return tg_err(-ENOMEM, "%s: out of memory for extractor %d", ex->who, id);
        if ((rc = reserve_alloc(ex, (void **)&w->rows, chunk * row_stride(pl), &w->rows_reserved,
                                "staging rows")) < 0)
            return rc;
    }
    return 0;
}

/* The feature buffer: what the budget has left after the workers' staging, or without a limit
 * the cache size asked for (an eighth of RAM by default) up to the whole file. */
static int featbuf_create(tg_extract_t *ex, const tg_extract_opts_t *o)
{
    const tg_extract_plan_t *pl = &ex->plan;
    tg_featbuf_opts_t fo;
    tg_extract_plan_featbuf_opts(pl, &fo);
    fo.policy = o->policy;
    fo.window = o->window;
    fo.future_positions = o->future_positions;
    uint64_t limit = ex->budget ? ex->budget->limit : 0;
    /* never more slots than rows: a buffer that holds the whole file is all it can use */
    uint64_t whole =
        tg_featbuf_bytes_for(&fo, (uint32_t)TG_MIN(pl->num_nodes, (uint64_t)UINT32_MAX - 1));
    /* the least buffer: the plan's, or more with a future trace (the plan knows no policy) */
    uint64_t least = TG_MAX(pl->featbuf_min, tg_featbuf_bytes_for(&fo, tg_featbuf_min_slots(&fo)));
    if (limit) {
        /* Everything left, less the handles and what the caller keeps. */
        uint64_t used = ex->budget->used, keep = pl->handle_bytes + o->keep_bytes;
        fo.mem_bytes = limit > used + keep ? limit - used - keep : 1;
        if (whole) fo.mem_bytes = TG_MIN(fo.mem_bytes, TG_MAX(whole, least));
    } else {
        uint64_t cap = o->cache_bytes ? o->cache_bytes : tg_phys_mem_bytes() / 8;
        fo.mem_bytes = TG_MAX(TG_MIN(cap, whole), least);
    }
    int rc = tg_featbuf_create(&ex->fb, &fo, ex->budget);
    if (rc < 0) {
        char a[32];
        return tg_err_prefix(rc, "%s: --mem %s cannot hold the feature buffer", ex->who,
                             tg_fmt_bytes(limit, a, sizeof a));
    }
    for (int i = 0; i < ex->nw; i++)
        for (int k = 0; k < ex->w[i].ncx; k++)
            if ((rc = tg_featbuf_batch_create(ex->fb, &ex->w[i].cx[k].h)) < 0) return rc;
    return 0;
}

int tg_extract_create(tg_extract_t **out, const tg_extract_opts_t *o)
{
    *out = NULL;
    const tg_extract_plan_t *pl = o->plan;
    if (!pl || !o->feat || pl->extractors < 1 || pl->chunk < 1 || o->ntiers < 0)
        return tg_err(-EINVAL, "extract: a plan with workers and chunks and a feature file needed");
    uint64_t want = pl->num_nodes * pl->row_bytes;
    if (tg_io_file_size(o->feat) != want)
        return tg_err(-EINVAL, "%s: %llu bytes, expected %llu (%llu rows of %zu bytes)",
                      tg_io_file_path(o->feat), (unsigned long long)tg_io_file_size(o->feat),
                      (unsigned long long)want, (unsigned long long)pl->num_nodes, pl->row_bytes);
    tg_extract_t *ex = calloc(1, sizeof *ex);
    if (!ex) return tg_err(-ENOMEM, "extract: out of memory");
    ex->plan = *pl;
    ex->feat = o->feat;
    ex->normalize = o->normalize;
    ex->budget = o->budget;
    ex->stats = o->stats;
    ex->rowcrc = o->rowcrc;
    snprintf(ex->who, sizeof ex->who, "%s", o->who ? o->who : "extract");
    int rc = -ENOMEM;
    ex->nw = pl->extractors;
    ex->w = calloc((size_t)ex->nw, sizeof *ex->w);
    ex->tiers = calloc((size_t)o->ntiers + 1, sizeof *ex->tiers);
    if (!ex->w || !ex->tiers) {
        rc = tg_err(-ENOMEM, "extract: out of memory");
        goto err;
    }
    for (int i = 0; i < o->ntiers; i++)
        ex->tiers[i] = o->tiers[i];
    ex->ntiers = o->ntiers;
    for (int i = 0; i < ex->nw; i++)
        if ((rc = worker_init(ex, &ex->w[i], i)) < 0) goto err;
    if (pl->featbuf && (rc = featbuf_create(ex, o)) < 0) goto err;
    *out = ex;
    return 0;
err:
    tg_extract_destroy(ex);
    return rc;
}

void tg_extract_destroy(tg_extract_t *ex)
{
    if (!ex) return;
    for (int i = 0; ex->w && i < ex->nw; i++)
        worker_free(&ex->w[i]);
    free(ex->w);
    tg_featbuf_destroy(ex->fb);
    free(ex->tiers);
    free(ex);
}

int tg_extract_num_workers(const tg_extract_t *ex)
{
    return ex->nw;
}
tg_extract_worker_t *tg_extract_worker(tg_extract_t *ex, int i)
{
    return i >= 0 && i < ex->nw ? &ex->w[i] : NULL;
}
tg_featbuf_t *tg_extract_featbuf(tg_extract_t *ex)
{
    return ex->fb;
}
const tg_extract_plan_t *tg_extract_get_plan(const tg_extract_t *ex)
{
    return &ex->plan;
}
void tg_extract_shutdown(tg_extract_t *ex)
{
    if (ex && ex->fb) tg_featbuf_shutdown(ex->fb);
}

/* ---------------------------------------------------------------- one group */

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

/* A group's positions: position p of batch j is global index off[j] + p. */
typedef struct group {
    const tg_extract_batch_t *b;
    int nb;
    uint64_t off[TG_EXTRACT_MAX_GROUP + 1];
    const uint64_t *keys;  /* sorted node << 32 | global index */
    const uint32_t *start; /* unique node u's keys are [start[u], start[u + 1]) */
} group_t;

static void hook_fail(const tg_extract_hooks_t *hk, int rc)
{
    if (hk && hk->fail) hk->fail(hk->ctx, rc, tg_errmsg());
}

static void *load_dst(const tg_extract_worker_t *w, const tg_featbuf_load_t *l)
{
    const tg_extract_t *ex = w->ex;
    return ex->fb ? tg_featbuf_row(ex->fb, l->slot)
                  : w->rows + (size_t)l->slot * row_stride(&ex->plan);
}

/* Converts unique node u's row (c->src[u], raw) of chunk c once into its first place in the
 * group's matrices (widened, normalised) and copies it to the other places; *j is the batch of
 * the last place (places are visited in sorted order, so it moves little). */
static void scatter_node(const tg_extract_worker_t *w, const chunk_t *c, size_t u, int *j)
{
    const tg_extract_t *ex = w->ex;
    const group_t *G = c->G;
    size_t dim = ex->plan.feat_dim;
    const float *first = NULL;
    for (uint32_t k = G->start[c->c0 + u]; k < G->start[c->c0 + u + 1]; k++) {
        uint64_t gi = G->keys[k] & 0xffffffffu;
        while (gi < G->off[*j])
            (*j)--;
        while (gi >= G->off[*j + 1])
            (*j)++;
        float *dst = G->b[*j].X + (size_t)(gi - G->off[*j]) * dim;
        if (!first) {
            tg_feat_rows_f32(dst, c->src[u], 0, 1, dim, ex->plan.dtype, ex->normalize);
            first = dst;
        } else {
            memcpy(dst, first, dim * sizeof(float));
        }
    }
}

/* Which rows of a chunk scatter_rows converts. */
enum { SCATTER_ALL, SCATTER_TIERS, SCATTER_MISSES };

/* Converts the rows of chunk c's unique nodes (the RAM tiers' only, the misses' only (miss_at,
 * ascending) less those load_scatter converted, or all) into the group's matrices. */
static void scatter_rows(const tg_extract_worker_t *w, const chunk_t *c, int which)
{
    int j = 0;
    if (which == SCATTER_MISSES) {
        for (size_t k = 0; k < c->nm; k++)
            if (!c->scat[k]) scatter_node(w, c, c->miss_at[k], &j);
        return;
    }
    size_t k = 0;
    for (size_t u = 0; u < c->n; u++) {
        if (k < c->nm && c->miss_at[k] == u) {
            int skip = which == SCATTER_TIERS || c->scat[k];
            k++;
            if (skip) continue;
        }
        scatter_node(w, c, u, &j);
    }
}

/* A read row of chunk c goes into X as its read completes, while the other reads are in flight
 * (the slot stays held by the handle until the chunk's release). l->pos is the row's index
 * among the chunk's misses. */
static void load_scatter(tg_extract_worker_t *w, chunk_t *c, const tg_featbuf_load_t *l)
{
    uint32_t u = c->miss_at[l->pos];
    int j = 0;
    c->src[u] = load_dst(w, l);
    scatter_node(w, c, u, &j);
    c->scat[l->pos] = 1;
}

/* Asks the RAM tiers for ids[0..n) in order; fills c->src for the rows they hold and lists the
 * others in c->miss / c->miss_at. Returns the number of misses. */
static size_t ask_tiers(tg_extract_worker_t *w, chunk_t *c, const uint64_t *ids, size_t n)
{
    tg_extract_t *ex = w->ex;
    size_t left = n;
    for (size_t u = 0; u < n; u++)
        c->src[u] = NULL;
    for (int t = 0; t < ex->ntiers && left; t++) {
        tg_tier_t *T = ex->tiers[t];
        uint64_t hits = 0;
        for (size_t u = 0; u < n; u++)
            if (!c->src[u] && (c->src[u] = tg_tier_find(T, ids[u]))) hits++;
        atomic_fetch_add_explicit(&T->lookups, left, memory_order_relaxed);
        atomic_fetch_add_explicit(&T->hits, hits, memory_order_relaxed);
        left -= hits;
    }
    size_t nm = 0;
    for (size_t u = 0; u < n; u++)
        if (!c->src[u]) {
            c->miss[nm] = ids[u];
            c->miss_at[nm++] = (uint32_t)u;
        }
    return nm;
}

/* ---------------------------------------------------------------- reading a chunk's misses */

/* A request's user word: index << 2 | chunk (0 or 1 of the worker's) << 1 | merged run. */
static void *req_user(const tg_extract_worker_t *w, const chunk_t *c, size_t i, int run)
{
    return (void *)(uintptr_t)(i << 2 | (size_t)(c - w->cx) << 1 | (size_t)run);
}

/* Splits chunk c's loads (sorted by node) into single-row requests c->reqs[0, nd) (returned)
 * and merged runs (run_first/run_len [0, c->nruns)): rows separated by holes of at most gap
 * bytes whose aligned read fits one merge buffer. */
static size_t plan_reads(tg_extract_worker_t *w, chunk_t *c)
{
    const tg_extract_plan_t *pl = &w->ex->plan;
    const tg_featbuf_load_t *ld = c->ld;
    size_t row = pl->row_bytes, nd = 0;
    uint64_t align = tg_io_file_align(w->ex->feat);
    c->nruns = 0;
    for (size_t i = 0; i < c->nl;) {
        size_t j = i + 1;
        uint64_t start = ld[i].node * row, end = start + row;
        if (pl->gap)
            while (j < c->nl) {
                uint64_t o = ld[j].node * row;
                if (o < end || o - end > pl->gap || o + row - start + 2 * align > pl->span) break;
                end = o + row;
                j++;
            }
        if (j - i == 1) {
            c->reqs[nd++] = (tg_io_req_t){.file = w->ex->feat,
                                          .off = start,
                                          .len = row,
                                          .dst = load_dst(w, &ld[i]),
                                          .user = req_user(w, c, i, 0)};
        } else {
            c->run_first[c->nruns] = (uint32_t)i;
            c->run_len[c->nruns] = (uint32_t)(j - i);
            c->nruns++;
        }
        i = j;
    }
    return nd;
}

/* The request of chunk c's merged run r into merge buffer bidx: aligned, so that the read lands
 * in the buffer directly, but not past the end of the file (a short read there would be an
 * error). */
static tg_io_req_t run_request(const tg_extract_worker_t *w, const chunk_t *c, size_t r,
                               uint32_t bidx)
{
    const tg_extract_plan_t *pl = &w->ex->plan;
    size_t row = pl->row_bytes;
    uint64_t align = tg_io_file_align(w->ex->feat);
    const tg_featbuf_load_t *a = &c->ld[c->run_first[r]];
    const tg_featbuf_load_t *z = &c->ld[c->run_first[r] + c->run_len[r] - 1];
    uint64_t off = a->node * row / align * align;
    uint64_t end = (z->node * row + row + align - 1) / align * align;
    end = TG_MIN(end, tg_io_file_size(w->ex->feat));
    return (tg_io_req_t){.file = w->ex->feat,
                         .off = off,
                         .len = (size_t)(end - off),
                         .dst = w->stage + (size_t)bidx * pl->span,
                         .user = req_user(w, c, r, 1)};
}

/* The queue broke (a failed submit or reap): destroying it waits for the reads the kernel still
 * owns, so no slot is given up while a read may land in it; the group then fails (the loads of
 * the chunks in hand are completed with the error by the caller). The worker makes a new queue
 * at its next group. */
static int queue_broke(tg_extract_worker_t *w, const tg_extract_hooks_t *hk, int rc)
{
    hook_fail(hk, rc);
    tg_io_destroy(w->io);
    w->io = NULL;
    for (int i = 0; i < w->ncx; i++)
        w->cx[i].left = 0;
    return rc;
}

static void complete(chunk_t *c, size_t k, int res)
{
    if (c->h) tg_featbuf_complete(c->h, k, res);
}

/* Unique nodes ids[0..n) (the group's c0 ..) into chunk c: the RAM tiers asked, the rest acquired
 * in the feature buffer (hits, rows other extractors are loading) or given staging rows, and the
 * single-row reads of its loads queued (its merged runs go out as merge buffers come free). */
static int chunk_begin(tg_extract_worker_t *w, chunk_t *c, const group_t *G, const uint64_t *ids,
                       size_t c0, size_t n, const tg_extract_hooks_t *hk)
{
    tg_extract_t *ex = w->ex;
    uint64_t batch = G->b[0].id;
    c->G = G;
    c->c0 = c0;
    c->n = n;
    c->held = c->tiers_done = 0;
    c->ld = NULL;
    c->nl = c->nruns = c->rnext = c->left = 0;
    c->nm = ask_tiers(w, c, ids, n);
    memset(c->scat, 0, c->nm);
    if (!c->nm) return 0;
    int rc;
    if (ex->fb) {
        /* never blocks for slots: the buffer has room for every handle's chunk at once */
        if ((rc = tg_featbuf_acquire(c->h, c->miss, c->nm, TG_FEATBUF_SORT_LOADS)) < 0) {
            if (rc != -ECANCELED) {
                tg_err_prefix(rc, "batch %llu", (unsigned long long)batch);
                hook_fail(hk, rc);
            }
            return rc;
        }
        c->held = 1;
        c->ld = tg_featbuf_batch_loads(c->h, &c->nl);
        atomic_fetch_add_explicit(&ex->fb_lookups, c->nm, memory_order_relaxed);
        atomic_fetch_add_explicit(&ex->fb_hits, c->nm - c->nl, memory_order_relaxed);
    } else {
        for (size_t k = 0; k < c->nm; k++) {
            w->own[k] =
                (tg_featbuf_load_t){.node = c->miss[k], .slot = (uint32_t)k, .pos = (uint32_t)k};
            c->src[c->miss_at[k]] = load_dst(w, &w->own[k]);
        }
        c->ld = w->own;
        c->nl = c->nm;
    }
    atomic_fetch_add_explicit(&ex->file_lookups, c->nl, memory_order_relaxed);
    if (!c->nl) return 0;
    if (!w->io && (rc = worker_io(w)) < 0) {
        hook_fail(hk, rc);
        return rc;
    }
    size_t nd = plan_reads(w, c);
    if (nd && (rc = tg_io_submit(w->io, c->reqs, nd)) < 0) return queue_broke(w, hk, rc);
    c->left = nd;
    return 0;
}

/* Submits the merged runs of the chunks in hand (oldest first) as merge buffers come free. */
static int pump(tg_extract_worker_t *w, uint64_t first, uint64_t next, const tg_extract_hooks_t *hk)
{
    for (uint64_t i = first; i < next && w->nfree; i++) {
        chunk_t *c = &w->cx[i % (uint64_t)w->ncx];
        tg_io_req_t *runreq = c->reqs + c->nl;
        size_t k = 0;
        while (c->rnext + k < c->nruns && w->nfree > 0) {
            runreq[c->rnext + k] = run_request(w, c, c->rnext + k, w->free_stage[--w->nfree]);
            k++;
        }
        int rc;
        if (k && (rc = tg_io_submit(w->io, runreq + c->rnext, k)) < 0)
            return queue_broke(w, hk, rc);
        c->rnext += k;
        c->left += k;
    }
    return 0;
}

/* Waits for at least one read and hands each completed one to its chunk: its rows are completed
 * in the buffer and converted into X (merged runs copied out of their merge buffer first). The
 * first failed read is recorded in *frc (and given to hooks->fail) before its rows are
 * completed, so that a batch waiting for one of them reports the I/O error (file and offset)
 * and not only its consequence; from then on nothing is converted. */
static int reap(tg_extract_worker_t *w, int *frc, const tg_extract_hooks_t *hk)
{
    tg_extract_t *ex = w->ex;
    size_t row = ex->plan.row_bytes;
    tg_io_req_t *done[REAP_MAX];
    int got = tg_io_reap(w->io, done, REAP_MAX, 1);
    if (got < 0) return queue_broke(w, hk, got);
    uint64_t ok = 0;
    for (int i = 0; i < got; i++) {
        tg_io_req_t *q = done[i];
        uintptr_t u = (uintptr_t)q->user;
        chunk_t *c = &w->cx[(u >> 1) & 1];
        size_t idx = u >> 2, first = (u & 1) ? c->run_first[idx] : idx;
        size_t len = (u & 1) ? c->run_len[idx] : 1;
        c->left--;
        int res = q->res;
        uint64_t fnode = c->ld[first].node; /* the node a failure names */
        /* --verify-reads: a row that is not what was verified fails its read like an I/O error */
        for (size_t t = 0; t < len && res == 0 && ex->rowcrc; t++) {
            uint64_t node = c->ld[first + t].node;
            const void *src = (u & 1) ? (const char *)q->dst + (node * row - q->off)
                                      : load_dst(w, &c->ld[first + t]);
            res = tg_rowcrc_check(ex->rowcrc, node, src, tg_io_file_path(ex->feat), node * row);
            if (res < 0) fnode = node;
        }
        if (res < 0 && !*frc) {
            char msg[900];
            snprintf(msg, sizeof msg, "%s", tg_errmsg());
            *frc = tg_err(res, "batch %llu: reading the features of node %llu: %s",
                          (unsigned long long)c->G->b[0].id, (unsigned long long)fnode, msg);
            hook_fail(hk, *frc);
        }
        for (size_t t = 0; t < len; t++) {
            const tg_featbuf_load_t *l = &c->ld[first + t];
            if ((u & 1) && res == 0)
                memcpy(load_dst(w, l), (const char *)q->dst + (l->node * row - q->off), row);
            complete(c, first + t, res);
            if (res == 0) ok++;
            if (res == 0 && !*frc) load_scatter(w, c, l);
        }
        if (u & 1)
            w->free_stage[w->nfree++] = (uint32_t)(((char *)q->dst - w->stage) / ex->plan.span);
    }
    atomic_fetch_add_explicit(&ex->file_hits, ok, memory_order_relaxed);
    return 0;
}

/* Chunk c, whose own reads are done: the rows other extractors load, then every row not in X yet,
 * and the handle released. -EAGAIN (nothing done) when a row another extractor loads is not there
 * yet and busy says another chunk in hand has reads of its own to finish: sleeping now could
 * leave an extractor waiting for one of those. */
static int chunk_end(tg_extract_worker_t *w, chunk_t *c, int busy, const tg_extract_hooks_t *hk)
{
    tg_extract_t *ex = w->ex;
    int rc = 0;
    if (c->held) {
        rc = busy ? tg_featbuf_try_wait(c->h) : tg_featbuf_wait(c->h);
        if (rc == -EAGAIN) return rc;
        /* a row another worker failed to load: that worker recorded the error */
        if (rc < 0 && rc != -ECANCELED) {
            tg_err_prefix(rc, "batch %llu", (unsigned long long)c->G->b[0].id);
            hook_fail(hk, rc);
        }
        if (rc == 0) {
            size_t ns;
            const uint32_t *slots = tg_featbuf_batch_slots(c->h, &ns);
            for (size_t k = 0; k < c->nm; k++)
                c->src[c->miss_at[k]] = tg_featbuf_row(ex->fb, slots[k]);
        }
    }
    /* the tiers' rows went into X while the reads ran, unless nothing was read */
    if (rc == 0) scatter_rows(w, c, c->tiers_done ? SCATTER_MISSES : SCATTER_ALL);
    if (c->held) {
        int rr = tg_featbuf_release(c->h);
        c->held = 0;
        if (rc == 0 && rr < 0) {
            rc = rr;
            hook_fail(hk, rc);
        }
    }
    return rc;
}

/* Chunk c has reads of its own not completed (queued, in flight or not submitted yet). */
static int chunk_busy(const chunk_t *c)
{
    return c->left > 0 || c->rnext < c->nruns;
}

/* The group's nu unique nodes ids, in chunks (descending: the last chunk first), through the
 * tiers into the matrices. With two chunks per worker the next one is begun once the oldest has
 * every read queued and at most a queue's depth of them outstanding: its tail drains while the
 * next chunk's reads start, and the acquire and the conversions of one chunk run while the
 * other's reads are in flight. */
static int run_chunks(tg_extract_worker_t *w, const group_t *G, const uint64_t *ids, uint64_t nu,
                      int descending, const tg_extract_hooks_t *hk)
{
    tg_extract_t *ex = w->ex;
    uint32_t chunk = ex->plan.chunk;
    uint64_t nchunks = (nu + chunk - 1) / chunk, first = 0, next = 0, ncx = (uint64_t)w->ncx;
    int rc = 0, frc = 0;
    w->nfree = 0;
    for (uint32_t b = 0; b < ex->plan.depth && w->stage; b++)
        w->free_stage[w->nfree++] = b;
    /* chunks [first, next) are in hand, chunk i in w->cx[i % ncx] */
    while (first < nchunks && rc == 0 && !frc) {
        while (next < nchunks && next - first < ncx &&
               (next == first || (!chunk_busy(&w->cx[first % ncx]) ||
                                  (w->cx[first % ncx].rnext == w->cx[first % ncx].nruns &&
                                   w->cx[first % ncx].left <= ex->plan.depth)))) {
            if (hk && hk->abort && atomic_load(hk->abort)) {
                rc = tg_err(-ECANCELED, "batch %llu: extraction stopped",
                            (unsigned long long)G->b[0].id);
                break;
            }
            uint64_t c0 = (descending ? nchunks - 1 - next : next) * chunk;
            size_t n = (size_t)TG_MIN((uint64_t)chunk, nu - c0);
            rc = chunk_begin(w, &w->cx[next % ncx], G, ids + c0, (size_t)c0, n, hk);
            next++;
            if (rc < 0) break;
        }
        if (rc < 0) break;
        chunk_t *c = &w->cx[first % ncx];
        if (!chunk_busy(c)) {
            int busy = next - first > 1 && chunk_busy(&w->cx[(first + 1) % ncx]);
            rc = chunk_end(w, c, busy, hk);
            if (rc == 0) first++;
            if (rc != -EAGAIN) continue;
            rc = 0; /* reap the other chunk's reads, then ask again */
        }
        if ((rc = pump(w, first, next, hk)) < 0) break;
        /* the RAM tiers' rows of a chunk whose reads are out go into X meanwhile (one chunk's
         * per turn, so that completions are reaped in between) */
        for (uint64_t i = first; i < next; i++) {
            chunk_t *d = &w->cx[i % ncx];
            if (!d->tiers_done && d->left > 0) {
                scatter_rows(w, d, SCATTER_TIERS);
                d->tiers_done = 1;
                break;
            }
        }
        if (!w->io || tg_io_inflight(w->io) == 0) {
            /* cannot happen: a busy chunk has reads in flight or merge buffers to submit */
            rc = tg_err(-EIO, "%s: extractor %d has chunks waiting and no read in flight", ex->who,
                        w->id);
            hook_fail(hk, rc);
            break;
        }
        rc = reap(w, &frc, hk);
    }
    if (rc == 0) rc = frc;
    if (rc == 0) return 0;
    /* Failed or stopped: the reads in flight land before any slot is given up, then every load
     * of the chunks in hand is completed with the error (the runs never submitted included). */
    while (w->io && tg_io_inflight(w->io) > 0)
        if (reap(w, &frc, hk) < 0) break;
    for (uint64_t i = first; i < next; i++) {
        chunk_t *c = &w->cx[i % ncx];
        if (!c->held) continue;
        tg_featbuf_complete_all(c->h, rc);
        tg_featbuf_release(c->h);
        c->held = 0;
    }
    return rc;
}

int tg_extract_group(tg_extract_worker_t *w, const tg_extract_batch_t *b, int nb,
                     const tg_extract_hooks_t *hk)
{
    tg_extract_t *ex = w->ex;
    if (nb < 1 || nb > TG_EXTRACT_MAX_GROUP)
        return tg_err(-EINVAL, "extract: a group of %d batches (1 to %d)", nb,
                      TG_EXTRACT_MAX_GROUP);
    group_t G = {.b = b, .nb = nb};
    for (int j = 0; j < nb; j++)
        G.off[j + 1] = G.off[j] + b[j].n;
    uint64_t total = G.off[nb], first = b[0].id;
    for (int j = 0; j < nb; j++)
        for (uint32_t i = 0; i < b[j].n; i++)
            if (b[j].nodes[i] >= ex->plan.num_nodes) {
                int rc = tg_err(-EINVAL, "batch %llu: node %llu out of range (%llu nodes)",
                                (unsigned long long)b[j].id, (unsigned long long)b[j].nodes[i],
                                (unsigned long long)ex->plan.num_nodes);
                hook_fail(hk, rc);
                return rc;
            }
    /* A first tier holding every row (the whole file in RAM): nothing to read, so no sort and no
     * dedup - each position is converted straight from the tier, as a gather in RAM does. Its
     * lookups then count positions, not distinct rows. */
    if (ex->ntiers >= 1 && !ex->fb && tg_tier_static_count(ex->tiers[0]) >= ex->plan.num_nodes) {
        tg_tier_t *t = ex->tiers[0];
        uint32_t dim = ex->plan.feat_dim;
        for (int j = 0; j < nb; j++) {
            if (hk && hk->abort && atomic_load(hk->abort)) return -ECANCELED;
            for (uint32_t i = 0; i < b[j].n; i++)
                tg_feat_rows_f32(b[j].X + (size_t)i * dim, tg_tier_find(t, b[j].nodes[i]), 0, 1,
                                 dim, ex->plan.dtype, ex->normalize);
        }
        atomic_fetch_add_explicit(&t->lookups, total, memory_order_relaxed);
        atomic_fetch_add_explicit(&t->hits, total, memory_order_relaxed);
        return 0;
    }
    int64_t bytes = (int64_t)(total * (2 * sizeof(uint64_t) + sizeof(uint32_t)) + sizeof(uint32_t));
    uint64_t *keys = malloc((size_t)total * 2 * sizeof *keys + 1);
    uint32_t *start = malloc(((size_t)total + 1) * sizeof *start);
    if (!keys || !start) {
        free(keys);
        free(start);
        int rc = tg_err(-ENOMEM, "batch %llu: out of memory for the extraction of %llu rows",
                        (unsigned long long)first, (unsigned long long)total);
        hook_fail(hk, rc);
        return rc;
    }
    if (hk && hk->scratch) hk->scratch(hk->ctx, bytes);
    uint64_t *tmp = keys + total;
    for (int j = 0; j < nb; j++)
        for (uint32_t i = 0; i < b[j].n; i++)
            keys[G.off[j] + i] = b[j].nodes[i] << 32 | (G.off[j] + i);
    sort_by_node(keys, tmp, (size_t)total);
    uint64_t *ids = tmp, nu = 0; /* the unique node ids, in order */
    for (uint64_t k = 0; k < total; k++)
        if (k == 0 || keys[k] >> 32 != keys[k - 1] >> 32) {
            ids[nu] = keys[k] >> 32;
            start[nu++] = (uint32_t)k;
        }
    start[nu] = (uint32_t)total;
    G.keys = keys;
    G.start = start;
    int descending = (first / (uint64_t)nb) & 1;
    int rc = run_chunks(w, &G, ids, nu, descending, hk);
    free(keys);
    free(start);
    if (hk && hk->scratch) hk->scratch(hk->ctx, -bytes);
    return rc;
}

/* ---------------------------------------------------------------- counters */

int tg_extract_tier_stats(tg_extract_t *ex, tg_tier_stats_t *out, int max, int reset)
{
    int k = 0;
    for (int t = 0; t < ex->ntiers; t++, k++)
        if (k < max) tg_tier_stats(ex->tiers[t], &out[k], reset);
    size_t row = ex->plan.row_bytes;
#define TAKE(c) (reset ? atomic_exchange(&(c), 0) : atomic_load(&(c)))
    if (ex->fb) {
        if (k < max) {
            out[k].name = "featbuf";
            out[k].lookups = TAKE(ex->fb_lookups);
            out[k].hits = TAKE(ex->fb_hits);
            out[k].bytes = out[k].hits * row;
        }
        k++;
    }
    if (k < max) {
        out[k].name = "file";
        out[k].lookups = TAKE(ex->file_lookups);
        out[k].hits = TAKE(ex->file_hits);
        out[k].bytes = out[k].hits * row;
    }
    k++;
#undef TAKE
    return k;
}
