/* Strategy "ginex": Ginex's inspector-executor pipeline (Park et al., "Ginex", section 3) on the
 * CPU, with the same sampler, batches and model as every other strategy.
 *
 *   inspector (engine/ahead's thread): sampler threads (tg_sloader) -> superbatch of S batches
 *                      written to a spill file (ids and blocks) with its access trace
 *                      (graph/batchtrace) -> changesets (store/changeset: the initial state
 *                      and, per iteration, the rows to insert and evict, from Belady's MIN over
 *                      the superbatch) -> ready
 *   executor (the pipeline's one worker): at a superbatch's start, moves the feature cache to its
 *                      initial state (evicts, prefetches the missing rows with large sorted reads);
 *                      per batch: reads it back from the spill file, copies the rows the cache
 *                      holds into X, reads the others through store/extract (io_uring, rows close
 *                      together merged into one read), then applies the iteration's changeset
 *                      from the rows just gathered (no re-read)
 *   trainer (the calling thread) -> releaser
 *
 * Superbatch k+1 is sampled and its changesets computed while superbatch k trains (the paper's
 * Fig. 9), so two superbatches exist at once (engine/ahead's two slots): the one the executor
 * reads and the one the inspector fills, each in its own spill file (O_TMPFILE: nothing is left
 * behind by an error, SIGINT or SIGKILL).
 *
 * The feature cache (3.3) is store's changeset tier (tiergnn/store.h): direct addressing, rows
 * kept as the batch input holds them (f32, normalised when asked), so a hit is one memcpy and a
 * cached row equals the row extract would produce, bit for bit. It changes only on the executor
 * thread, between batches. Because the executor applies exactly the changesets the simulation
 * computed from exactly its initial state, the rows it misses are the simulation's misses: the
 * pass reports both (cache_lookups/hits and predicted misses) and they must agree.
 *
 * The neighbour cache (3.2) is a tier of the disk adjacency (graph/ncache) that the samplers read
 * through; its share of the cache memory is --ginex-split.
 *
 * Exactness: batch b is the epoch plan's batch b (same seeds, same RNG), handed to the trainer in
 * id order, and every row of X equals the file's (converted as everywhere): checkpoints equal
 * memory's byte for byte. A resumed pass starts its first superbatch at the resume point.
 *
 * Errors: the inspector's first error (a sampler's, a spill write, the changeset's budget) is
 * handed to the executor at the superbatch it would have produced, so the batches before it still
 * train; the executor's (an I/O error naming the file and offset) go through the pipeline's
 * first-error box. Every thread is joined, every batch and spill file freed before the pass
 * returns. */
#include "../ahead.h"
#include "../engine-impl.h"
#include "../plan_cost.h"
#include "../pipeline.h"
#include "../xpass.h"
#include "ginex.h"

#include <errno.h>
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tiergnn/batchtrace.h"
#include "tiergnn/changeset.h"
#include "tiergnn/extract.h"
#include "tiergnn/ncache.h"

/* ---------------------------------------------------------------- options */

typedef struct {
    tg_xpass_cfg_t x;
    int64_t superbatch, split, feature_cache;
} gx_cfg_t;

#define GX_OPT(...) TG_STRATEGY_OPT(gx_cfg_t, __VA_ARGS__)

/* Queue depth 1: the executor gathers one batch while the trainer trains the one before, and
 * every matrix fewer in flight is cache. */
static const tg_strategy_opt_t gx_opts[] = {
    TG_XPASS_OPTS_QD(1, "1"),
    GX_OPT("superbatch", TG_SOPT_INT, -1, 1, 1 << 20, 1, superbatch, "S",
           "batches sampled ahead and planned together (default auto: as many as a fifth of the "
           "cache memory can plan, 2..64)"),
    GX_OPT("ginex-split", TG_SOPT_INT, -1, 0, 100, 1, split, "PCT",
           "percent of the cache memory for the neighbour cache, the rest for the feature cache "
           "(default auto: planned, the cost model's shortest epoch; 0 where not planned)"),
    GX_OPT("feature-cache", TG_SOPT_SIZE, -1, 0, INT64_MAX, 1, feature_cache, "SIZE",
           "feature cache size (default auto: what --mem leaves; without --mem an eighth of the "
           "RAM, at most the feature file)"),
};

/* ---------------------------------------------------------------- state */

#define GX_NONE UINT32_MAX
#define GX_SPILL_BUF ((size_t)4 << 20)

/* One superbatch, from the inspector to the executor (an item of engine/ahead). */
typedef struct {
    uint64_t first; /* its first batch id */
    uint32_t count; /* batches */
    tg_spill_t *spill;
    double *sample_s; /* (count) sampling time of each batch */
    size_t sample_cap;
    tg_cs_t cs;
    uint32_t *c0; /* initial state */
    uint64_t n0;
    double changeset_s;
} sb_t;

struct tg_strategy {
    tg_run_t *r;
    int normalize;
    tg_io_stats_t stats;
    tg_io_file_t *feat;
    tg_adj_t *disk;
    char spill_dir[4096];
    /* created at the first pass */
    int ready, dead;
    tg_extract_t *ex;
    uint32_t dim;
    size_t xrow; /* bytes of one cached row (f32, as in X) */
    uint64_t entries;
    tg_tier_t *cache; /* the feature cache (store's changeset tier) of entries rows */
    tg_cs_ws_t *ws;
    uint32_t S;
    /* the rows the cache misses and those it fills, read through the extraction into their
     * places: X rows or cache slots (node << 32 | place, sorted by node) */
    tg_extract_scatter_t *sc;
    sb_t sb[2];
    tg_ahead_t *ahead; /* the inspector: superbatch k + 1 planned while k trains */
    /* one pass; the inspector's while it runs (set before tg_ahead_start) */
    tg_sloader_t *ld;
    const tg_pass_t *p;
    uint64_t num_batches;
    tg_btrace_t tr; /* the superbatch being planned: its ids */
    uint32_t *prev; /* the inspector's last planned final state */
    uint64_t nprev;
    uint64_t prev_bytes;
    /* the executor's position */
    uint64_t next_id;
    sb_t *cur;
    uint32_t cur_i;         /* index in cur of the batch handed out last */
    tg_ginex_figures_t fig; /* the pass's own figures */
};

/* ---------------------------------------------------------------- sizing */

static uint64_t gx_min_bytes(const tg_dataset_t *ds, const tg_strategy_opts_t *so, char *why,
                             size_t why_len)
{
    const gx_cfg_t *c = so->cfg;
    uint64_t N = ds->meta.num_nodes;
    uint64_t fixed = tg_tier_cs_bytes(N, 0, 1) + tg_cs_ws_bytes(N) + 2 * GX_SPILL_BUF;
    return tg_xpass_ahead_min_bytes(ds, &c->x, so->sampler_threads, fixed,
                                    "address table and changeset workspace", why, why_len);
}

static int inspect(void *ctx, void *item, uint64_t k, tg_ahead_t *a);
static void sb_clear(void *ctx, void *item);

static int gx_open(tg_strategy_t **out, tg_run_t *r, const tg_strategy_opts_t *so)
{
    *out = NULL;
    if (r->ds->meta.num_nodes >= GX_NONE)
        return tg_err(-EINVAL, "strategy ginex: %llu nodes; the cache addresses at most 2^32 - 1",
                      (unsigned long long)r->ds->meta.num_nodes);
    tg_strategy_t *s = calloc(1, sizeof *s);
    if (!s) return tg_err(-ENOMEM, "strategy ginex: out of memory");
    s->r = r;
    s->normalize = so->normalize;
    tg_io_stats_init(&s->stats);
    tg_btrace_init(&s->tr, &r->budget, "ginex: superbatch trace");
    void *items[2] = {&s->sb[0], &s->sb[1]};
    tg_ahead_opts_t ao = {.slots = 2,
                          .items = items,
                          .produce = inspect,
                          .drop = sb_clear,
                          .ctx = s,
                          .who = "ginex: the inspector"};
    int rc = tg_ahead_open(&s->ahead, &ao);
    if (rc == 0)
        rc = tg_xpass_open_disk(r, tg_xpass_adj_queues(so->sampler_threads), &s->stats, &s->feat);
    s->disk = r->adj;
    if (rc == 0) {
        *out = s;
        return 0;
    }
    tg_ahead_close(s->ahead);
    free(s);
    return rc;
}

/* ---------------------------------------------------------------- the split (3.5)
 *
 * The paper gives each cache what its stage leaves of the memory, because its sample and main
 * loop stages take turns; here they run at once (superbatch k+1 is sampled while k trains), so
 * the cache memory is shared and the split decides. One rule decides it, the cost model's
 * (gx_predict: the share of 0, 5, ..., 100% with the shortest predicted epoch, from the
 * planner's profile); a run takes it as --ginex-split, which the planner adds to the options of
 * a run that takes ginex through auto or names it without the option (engine/train.c). A run
 * not planned (the library's loader, a planner that could not profile) gives the feature cache
 * everything (GX_SPLIT_UNPLANNED). The rule it replaces, a per-run profile of 4 batches counting
 * a missed row as one read against a quarter of an index read, saw none of the epoch's reuse:
 * on the planner's narrow workload (rows of 128 bytes) it took 95% and read 2.61 GiB in 3.82 s
 * an epoch where 0%, the model's, read 0.44 GiB in 1.97 s (bench/README.md, session 24). */
#define GX_SPLIT_UNPLANNED 0
/* The share of the shortest predicted epoch within which gx_predict takes the fewest bytes. */
#define GX_SPLIT_TOL 0.05

/* Splits the cache memory between the neighbour cache (given its share first: its file is built
 * once, reused after) and the feature cache (s->entries rows). */
static int split_caches(tg_strategy_t *s, uint64_t caches, int *split, uint64_t *nc_bytes)
{
    tg_run_t *r = s->r;
    const gx_cfg_t *c = r->sopts.cfg;
    uint64_t N = r->ds->meta.num_nodes;
    /* the neighbour cache that holds every list: address table, counts and neighbours */
    uint64_t nc_all = tg_ncache_full_bytes(N, s->disk->indptr);
    int rc;
    *split = c->split >= 0 ? (int)c->split : GX_SPLIT_UNPLANNED;
    uint64_t nc =
        c->x.neighbor_cache >= 0 ? (uint64_t)c->x.neighbor_cache : caches / 100 * (uint64_t)*split;
    nc = TG_MIN(nc, nc_all);
    if (nc < tg_ncache_min_bytes(r->ds)) nc = 0;
    if (nc) {
        uint64_t used0 = r->budget.used;
        if ((rc = tg_xpass_ncache(r, s->disk, nc, &s->stats, "ginex")) < 0) return rc;
        nc = r->budget.used - used0;
    }
    *nc_bytes = nc;
    uint64_t fc_bytes = caches > nc ? caches - nc : 0;
    if (c->feature_cache >= 0 && r->budget.limit)
        fc_bytes = TG_MIN(fc_bytes, (uint64_t)c->feature_cache);
    uint64_t per_entry = tg_tier_cs_bytes(0, 1, s->xrow);
    s->entries = TG_MIN(fc_bytes / per_entry, N);
    return 0;
}

/* The feature cache (every slot free, no node cached) and the executor's staging for reads of
 * chunk rows. */
static int cache_alloc(tg_strategy_t *s, uint32_t chunk)
{
    tg_run_t *r = s->r;
    tg_extract_scatter_destroy(s->sc); /* a setup that failed before */
    int rc = tg_extract_scatter_create(&s->sc, chunk, s->dim, &r->budget, "ginex");
    if (rc < 0) return rc;
    return tg_tier_cs_create(&s->cache, "ginex-cache", r->ds->meta.num_nodes, s->entries, s->xrow,
                             &r->budget);
}

/* Bytes the inspector may hold per access of a superbatch: its trace (4), the simulation's iters
 * (4) and the changesets of the superbatch it plans and of the one the executor reads (up to 12
 * per miss each; about half the accesses miss at the sizes Ginex runs with). */
#define GX_PLAN_BYTES_PER_ACCESS 20u

/* The superbatch S (given, or as many batches as a fifth of what --mem leaves can plan, 2..64)
 * and the bytes planning it may take, from the largest profiled batch; avail: what --mem leaves
 * (with a limit), need: the fixed parts. */
static int size_superbatch(tg_strategy_t *s, uint64_t avail, uint64_t need, uint64_t *plan_bytes)
{
    tg_run_t *r = s->r;
    const gx_cfg_t *c = r->sopts.cfg;
    uint64_t limit = r->budget.limit;
    uint64_t batch_nodes = r->batch_nodes;
    if (!batch_nodes) batch_nodes = TG_MIN(r->ds->meta.num_nodes, (uint64_t)1 << 16);
    uint64_t per_batch = batch_nodes * GX_PLAN_BYTES_PER_ACCESS * 5 / 4;
    uint64_t S;
    if (c->superbatch > 0)
        S = (uint64_t)c->superbatch;
    else if (limit)
        S = avail > need ? (avail - need) / 5 / per_batch : 0;
    else
        S = 16;
    if (c->superbatch <= 0) S = TG_MAX(2, TG_MIN(S, 64));
    *plan_bytes = S * per_batch;
    char a[32], b[32], d[32];
    if (limit && need + *plan_bytes > avail)
        return tg_err(-ENOMEM,
                      "ginex: --mem leaves %s after the model and batches, but the feature "
                      "cache's address table, the changeset workspace and the read staging take "
                      "%s and planning a superbatch of %llu batches %s: raise --mem or lower "
                      "--superbatch",
                      tg_fmt_bytes(avail, a, sizeof a), tg_fmt_bytes(need, b, sizeof b),
                      (unsigned long long)S, tg_fmt_bytes(*plan_bytes, d, sizeof d));
    s->S = (uint32_t)S;
    return 0;
}

static int gx_setup(tg_strategy_t *s)
{
    tg_run_t *r = s->r;
    const gx_cfg_t *c = r->sopts.cfg;
    const tg_meta_t *m = &r->ds->meta;
    uint64_t N = m->num_nodes;
    char path[4096], a[32], b[32], e[32];
    tg_extract_plan_opts_t po;
    tg_xpass_ahead_plan_opts(r->ds, &c->x, r->sopts.sampler_threads, path, sizeof path, &po);
    uint64_t limit = r->budget.limit;
    uint64_t avail = limit ? (limit > r->budget.used ? limit - r->budget.used : 0) : 0;
    if (limit) po.avail = TG_MAX(avail, 1);
    tg_extract_plan_t pl;
    int rc;
    if ((rc = tg_extract_plan(&pl, &po)) < 0) return rc;
    s->dim = m->feat_dim;
    s->xrow = (size_t)m->feat_dim * sizeof(float);
    /* Fixed parts: address table, changeset workspace, spill buffers, the executor's staging
     * and miss list, the extraction. */
    uint64_t stage = tg_extract_scatter_bytes(pl.chunk, s->dim);
    uint64_t fixed = tg_tier_cs_bytes(N, 0, 1) + 2 * GX_SPILL_BUF + stage;
    uint64_t keep = po.other_transient + pl.transient_bytes;
    uint64_t need = fixed + tg_cs_ws_bytes(N) + tg_extract_plan_bytes(&pl) + keep;
    uint64_t plan_bytes;
    if ((rc = size_superbatch(s, avail, need, &plan_bytes)) < 0) return rc;
    /* What is left is cache: the neighbour cache's share and the feature cache. */
    uint64_t caches;
    if (limit)
        caches = avail - need - plan_bytes;
    else
        caches = c->feature_cache >= 0 ? (uint64_t)c->feature_cache
                                       : TG_MIN(tg_phys_mem_bytes() / 8, N * s->xrow);
    if ((rc = tg_cs_ws_create(&s->ws, N, &r->budget)) < 0) return rc;
    int split;
    uint64_t nc_bytes;
    if ((rc = split_caches(s, caches, &split, &nc_bytes)) < 0 ||
        (rc = cache_alloc(s, pl.chunk)) < 0)
        return rc;
    tg_extract_opts_t eo = {.plan = &pl,
                            .feat = s->feat,
                            .normalize = s->normalize,
                            .budget = &r->budget,
                            .stats = &s->stats,
                            .keep_bytes = keep,
                            .who = "ginex",
                            .rowcrc = r->rowcrc};
    if ((rc = tg_extract_create(&s->ex, &eo)) < 0) return rc;
    tg_xpass_runtime_dir(r->ds, s->spill_dir, sizeof s->spill_dir);
    tg_spill_opts_t so = {.buf_bytes = GX_SPILL_BUF, .budget = &r->budget};
    for (int k = 0; k < 2; k++)
        if ((rc = tg_spill_open(&s->sb[k].spill, s->spill_dir, &so)) < 0) return rc;
    tg_log_info("ginex: superbatch of %u batches (planning up to %s), feature cache %llu rows "
                "(%s, %.1f%% of the features), neighbour cache share %d%% (%s%s), spill files in "
                "%s; %u reads in flight, %u rows per chunk",
                s->S, tg_fmt_bytes(plan_bytes, a, sizeof a), (unsigned long long)s->entries,
                tg_fmt_bytes(s->entries * s->xrow, b, sizeof b),
                N ? 100.0 * (double)s->entries / (double)N : 0.0, split,
                tg_fmt_bytes(nc_bytes, e, sizeof e),
                c->split >= 0 || c->x.neighbor_cache >= 0 ? "" : ", --ginex-split not planned",
                s->spill_dir, pl.depth, pl.chunk);
    s->ready = 1;
    return 0;
}

/* Empties a superbatch (its spill file keeps its bytes until the next reset). Also the drop of
 * engine/ahead: a superbatch planned but not trained, or half planned. */
static void sb_clear(void *ctx, void *item)
{
    sb_t *b = item;
    (void)ctx;
    tg_cs_free(&b->cs);
    free(b->c0);
    b->c0 = NULL;
    b->n0 = 0;
    b->count = 0;
}

static void gx_close(tg_strategy_t *s)
{
    if (!s) return;
    tg_ahead_close(s->ahead); /* joins the inspector when a pass failed to stop it */
    tg_btrace_free(&s->tr);
    for (int k = 0; k < 2; k++) {
        sb_clear(s, &s->sb[k]);
        tg_spill_close(s->sb[k].spill);
        free(s->sb[k].sample_s);
    }
    tg_extract_destroy(s->ex);
    tg_cs_ws_destroy(s->ws);
    tg_extract_scatter_destroy(s->sc);
    if (s->prev_bytes) tg_budget_release(&s->r->budget, s->prev_bytes);
    free(s->prev);
    tg_tier_destroy(s->cache);
    tg_io_file_close(s->feat);
    free(s);
}

/* Before an evaluation: the feature cache, the neighbour cache, the changeset workspace, the
 * executor's staging and miss list, the extraction, the planned state and the spill files go
 * back to the budget, so that a layer-wise pass's row files keep that many rows resident (a
 * layer-wise pass reads each neighbour list once per layer, but rows many times: the budget
 * saves more reads as rows). The inspector runs only inside a pass, so nothing is planning now.
 * The next pass sets them up again (gx_setup, with the split chosen first) from empty caches:
 * the neighbour cache is loaded again, the first superbatch prefetches the rows it needs, and
 * both equal the files, so training results do not change. */
static void gx_evaluating(tg_strategy_t *s, int layerwise)
{
    /* a sampled evaluation pass reads through the same caches as training */
    if (!layerwise) return;
    if (!s->ready || s->dead) return;
    tg_budget_t *bg = &s->r->budget;
    (void)tg_adj_disk_attach_ncache(s->disk, NULL); /* detaches and closes it */
    tg_extract_destroy(s->ex);
    s->ex = NULL;
    tg_cs_ws_destroy(s->ws);
    s->ws = NULL;
    tg_tier_destroy(s->cache);
    s->cache = NULL;
    tg_extract_scatter_destroy(s->sc);
    s->sc = NULL;
    if (s->prev_bytes) tg_budget_release(bg, s->prev_bytes);
    s->prev_bytes = 0;
    free(s->prev);
    s->prev = NULL;
    s->nprev = 0;
    for (int k = 0; k < 2; k++) {
        tg_spill_close(s->sb[k].spill);
        s->sb[k].spill = NULL;
    }
    s->ready = 0;
}

/* ---------------------------------------------------------------- the inspector */

/* The state the inspector plans the next superbatch from becomes ids[0..n), or the cache's
 * nodes when ids is NULL (a pass's start); held against the budget. */
static int prev_set(tg_strategy_t *s, const uint32_t *ids, uint64_t n)
{
    tg_budget_t *bg = &s->r->budget;
    if (s->prev_bytes) tg_budget_release(bg, s->prev_bytes);
    s->prev_bytes = 0;
    free(s->prev);
    s->prev = NULL;
    s->nprev = 0;
    if (!ids && !(n = tg_tier_cs_held(s->cache, NULL))) return 0;
    int rc = tg_budget_reserve(bg, n * sizeof(uint32_t), "ginex: cache state");
    if (rc < 0) return rc;
    s->prev_bytes = n * sizeof(uint32_t);
    if (!(s->prev = malloc(n ? n * sizeof(uint32_t) : 1)))
        return tg_err(-ENOMEM, "ginex: out of memory");
    if (ids && n) memcpy(s->prev, ids, n * sizeof(uint32_t));
    s->nprev = ids ? n : tg_tier_cs_held(s->cache, s->prev);
    return 0;
}

/* Superbatch b's changesets over its trace, from the final state the superbatch before it
 * planned (the cache's rows at the pass's start for the first); b's own final state becomes the
 * next one's start. */
static int plan_changesets(tg_strategy_t *s, sb_t *b)
{
    tg_run_t *r = s->r;
    double t0 = tg_now();
    tg_cs_trace_t tr = {.iters = b->count, .off = s->tr.off, .ids = s->tr.ids};
    int rc = tg_cs_init_state(s->ws, &tr, s->entries, s->prev, s->nprev, &b->c0, &b->n0);
    if (rc == 0) rc = tg_cs_compute(s->ws, &tr, s->entries, b->c0, b->n0, &b->cs, &r->budget);
    if (rc < 0) return rc;
    if ((rc = prev_set(s, b->cs.final, b->cs.num_final)) < 0) return rc;
    b->changeset_s = tg_now() - t0;
    return 0;
}

/* The inspector (engine/ahead's producer): superbatch k of the pass sampled from the loader,
 * spilled, traced and planned. */
static int inspect(void *ctx, void *item, uint64_t k, tg_ahead_t *a)
{
    tg_strategy_t *s = ctx;
    sb_t *b = item;
    b->first = s->p->first_batch + k * s->S;
    b->count = (uint32_t)TG_MIN((uint64_t)s->S, s->num_batches - b->first);
    int rc = tg_spill_reset(b->spill);
    if (rc < 0) return rc;
    if (b->sample_cap < b->count) {
        double *ns = realloc(b->sample_s, b->count * sizeof *ns);
        if (!ns) return tg_err(-ENOMEM, "ginex: out of memory");
        b->sample_s = ns;
        b->sample_cap = b->count;
    }
    tg_btrace_clear(&s->tr);
    if ((rc = tg_btrace_sample(&s->tr, s->ld, b->count, b->spill, tg_ahead_abort_flag(a))) < 0)
        return rc;
    memcpy(b->sample_s, s->tr.sample_s, b->count * sizeof *b->sample_s);
    return plan_changesets(s, b);
}

/* ---------------------------------------------------------------- the feature cache */

static void ex_fail(void *ctx, int rc, const char *msg)
{
    tg_pipe_fail(ctx, rc, msg);
}

static void *cache_slot(void *ctx, uint32_t slot)
{
    return tg_tier_cs_row(ctx, slot);
}

/* Reads the rows of pairs[0..n) (node << 32 | place, sorted by node) through the extraction
 * (store/extract's scattered places): into X's rows, or without X into the cache's slots. */
static int read_rows(tg_strategy_t *s, tg_pipe_t *P, uint64_t batch_id, const uint64_t *pairs,
                     size_t n, float *X)
{
    tg_extract_hooks_t hk = {.fail = ex_fail, .abort = tg_pipe_abort_flag(P), .ctx = P};
    return tg_extract_scatter_read(s->sc, tg_extract_worker(s->ex, 0), batch_id, pairs, n, X,
                                   cache_slot, s->cache, &hk);
}

/* Moves the cache to superbatch b's initial state: evicts what it does not keep, reads what it
 * lacks (in node order, each into its slot). */
static int cache_init(tg_strategy_t *s, tg_pipe_t *P, sb_t *b)
{
    double t0 = tg_now();
    uint64_t *fill = tg_extract_scatter_pairs(s->sc, b->n0);
    if (!fill) return tg_pipe_fail(P, -ENOMEM, NULL);
    size_t nread = tg_tier_cs_retain(s->cache, b->c0, b->n0, fill);
    int rc = read_rows(s, P, b->first, fill, nread, NULL);
    if (rc < 0) return rc;
    s->fig.prefetch_rows += nread;
    s->fig.init_s += tg_now() - t0;
    return 0;
}

/* ---------------------------------------------------------------- the executor */

/* The executor moves on to the next superbatch: the one it read goes back to the inspector, the
 * next one comes (the inspector's error instead, at the superbatch it could not produce), and
 * the cache moves to its initial state. */
static int next_superbatch(tg_strategy_t *s, tg_pipe_t *P)
{
    if (s->cur) {
        sb_clear(s, s->cur);
        tg_ahead_release(s->ahead, s->cur);
        s->cur = NULL;
    }
    void *item;
    int rc = tg_ahead_next(s->ahead, tg_pipe_abort_flag(P), &item);
    if (rc == 0)
        rc = tg_err(-EIO, "ginex: no superbatch holds batch %llu (internal error)",
                    (unsigned long long)s->next_id);
    if (rc < 0) return rc;
    sb_t *b = s->cur = item;
    s->cur_i = UINT32_MAX; /* +1 below = 0 */
    s->fig.superbatches++;
    s->fig.changeset_s += b->changeset_s;
    s->fig.predicted_misses += b->cs.total_misses;
    return cache_init(s, P, b);
}

/* The pipeline's source: the batches of the superbatches, in order, read back from their spill
 * files. */
static int src_next(void *ctx, tg_pipe_t *P, tg_sloader_item_t **out)
{
    tg_strategy_t *s = ctx;
    *out = NULL;
    if (s->next_id >= s->num_batches) return 0;
    int rc;
    if ((!s->cur || s->cur_i + 1 >= s->cur->count) && (rc = next_superbatch(s, P)) < 0) return rc;
    s->cur_i++;
    rc = tg_spill_read_item(s->cur->spill, s->next_id, TG_SPILL_ANY_NODES,
                            s->cur->sample_s[s->cur_i], out);
    if (rc < 0) return rc;
    s->next_id++;
    return 1;
}

static void src_free(void *ctx, tg_sloader_item_t *it)
{
    (void)ctx;
    tg_spill_item_free(it);
}

/* Gathers a batch (cache hits, then the misses from disk) and applies its changeset. */
static int gx_work(void *ctx, tg_pipe_t *P, int worker, const tg_batch_t *const *bb,
                   float *const *XX, int n)
{
    tg_strategy_t *s = ctx;
    (void)worker;
    if (n != 1) return tg_pipe_fail(P, tg_err(-EINVAL, "ginex: groups of one batch only"), NULL);
    const tg_batch_t *b = bb[0];
    float *X = XX[0];
    uint64_t *miss = tg_extract_scatter_pairs(s->sc, b->num_nodes);
    if (!miss) return tg_pipe_fail(P, -ENOMEM, NULL);
    size_t nm = tg_tier_cs_gather(s->cache, b->nodes, b->num_nodes, X, miss);
    int rc = read_rows(s, P, b->id, miss, nm, X);
    if (rc < 0) return rc;
    /* the changeset: evictions free their slots, insertions take a slot and the row from X */
    double t0 = tg_now();
    if ((rc = tg_tier_cs_apply(s->cache, &s->cur->cs, s->cur_i, b->nodes, b->num_nodes, X)) < 0) {
        tg_err_prefix(rc, "ginex: batch %llu", (unsigned long long)b->id);
        return tg_pipe_fail(P, rc, NULL);
    }
    s->fig.update_s += tg_now() - t0;
    return 0;
}

/* ---------------------------------------------------------------- one pass */

static void gx_on_error(void *ctx)
{
    tg_strategy_t *s = ctx;
    tg_ahead_abort(s->ahead); /* the inspector stops planning, the executor's wait ends */
}

/* A pass starts from an empty plan; the cache keeps its rows (they are still the file's), and
 * they are the first plan's "previous state". */
static int pass_begin(tg_strategy_t *s, const tg_pass_t *p)
{
    s->p = p;
    s->next_id = p->first_batch;
    s->cur = NULL;
    s->fig = (tg_ginex_figures_t){.passes = 1, .superbatch = s->S, .cache_rows = s->entries};
    tg_tier_stats_t ts;
    tg_tier_stats(s->cache, &ts, 1); /* the counters start at the pass */
    return prev_set(s, NULL, 0);
}

/* A pass's own figures (tg_pass_stats_t.own) are a tg_ginex_figures_t: counts, sums and
 * settings (the larger), so that passes add; misses come from the shared cache counters when
 * read (tg_ginex_figures). */
TG_PASS_OWN_FITS(tg_ginex_figures_t);

/* The pass's figures: the cache is the first tier, then the extraction's (the file). */
static void pass_report(tg_strategy_t *s, tg_pass_stats_t *st)
{
    tg_pass_stats_t ex; /* the extraction's tiers, to follow the cache's */
    tg_tier_stats_t c;
    tg_tier_stats(s->cache, &c, 1);
    tg_xpass_end(s->ex, &s->stats, 0, st);
    ex.ntiers = st->ntiers;
    memcpy(ex.tiers, st->tiers, sizeof ex.tiers);
    st->ntiers = 0;
    /* bytes as the file holds them, like the other tiers' */
    (void)tg_pass_tier_add(st, c.name, c.lookups, c.hits, c.hits * s->r->row_bytes);
    for (int t = 0; t < ex.ntiers; t++)
        (void)tg_pass_tier_add(st, ex.tiers[t].name, ex.tiers[t].lookups, ex.tiers[t].hits,
                               ex.tiers[t].bytes);
    st->have_cache = 1;
    st->cache_lookups = c.lookups;
    st->cache_hits = c.hits;
    tg_pass_own_put(st, &s->fig, sizeof s->fig);
}

static void gx_own_add(tg_pass_stats_t *sum, const tg_pass_stats_t *add)
{
    tg_ginex_figures_t a, b;
    tg_pass_own_get(sum, &a, sizeof a);
    tg_pass_own_get(add, &b, sizeof b);
    a.passes += b.passes;
    a.superbatch = TG_MAX(a.superbatch, b.superbatch);
    a.cache_rows = TG_MAX(a.cache_rows, b.cache_rows);
    a.changeset_s += b.changeset_s;
    a.init_s += b.init_s;
    a.update_s += b.update_s;
    a.predicted_misses += b.predicted_misses;
    a.prefetch_rows += b.prefetch_rows;
    a.superbatches += b.superbatches;
    tg_pass_own_put(sum, &a, sizeof a);
}

int tg_ginex_figures(const tg_pass_stats_t *st, tg_ginex_figures_t *f)
{
    tg_pass_own_get(st, f, sizeof *f);
    if (!f->passes) return -ENOENT;
    f->misses = st->cache_lookups - st->cache_hits;
    return 0;
}

/* The planner's breakdown and the plans' misses beside the cache's: the keys changeset_s,
 * cache_init_s, cache_update_s, cache_misses, predicted_misses, prefetch_rows, superbatches, and
 * a clause after the I/O figures of the human line. */
static void gx_report(const tg_pass_stats_t *st, tg_json_t *j, char *line, size_t len)
{
    tg_ginex_figures_t f;
    if (tg_ginex_figures(st, &f) < 0) return;
    if (j) {
        tg_json_num(j, "changeset_s", f.changeset_s);
        tg_json_num(j, "cache_init_s", f.init_s);
        tg_json_num(j, "cache_update_s", f.update_s);
        tg_json_uint(j, "cache_misses", f.misses);
        tg_json_uint(j, "predicted_misses", f.predicted_misses);
        tg_json_uint(j, "prefetch_rows", f.prefetch_rows);
        tg_json_uint(j, "superbatches", f.superbatches);
    }
    size_t l = line ? strlen(line) : len;
    if (st->have_io && l + 1 < len)
        snprintf(line + l, len - l,
                 ", misses %llu (planned %llu), changesets %.2f s, cache init %.2f s",
                 (unsigned long long)f.misses, (unsigned long long)f.predicted_misses,
                 f.changeset_s, f.init_s);
}

/* One pass: the inspector plans the superbatches on its thread (engine/ahead), the executor
 * gathers their batches on the pipeline's worker, in order. */
static int gx_pass(tg_strategy_t *s, const tg_pass_t *p, tg_pass_stats_t *st)
{
    memset(st, 0, sizeof *st);
    st->next_batch = p->first_batch;
    if (s->dead) return tg_err(-ECANCELED, "ginex: an earlier pass failed");
    int rc;
    if (!s->ready && (rc = gx_setup(s)) < 0) return rc;
    if ((rc = pass_begin(s, p)) < 0) return rc;
    tg_run_t *r = s->r;
    const gx_cfg_t *c = r->sopts.cfg;
    tg_sloader_opts_t lo = tg_pass_sloader_opts(p, r->adj, r->sopts.sampler_threads,
                                                (size_t)TG_MAX(c->x.queue_depth, 1));
    if ((rc = tg_sloader_start(&s->ld, &lo)) < 0) return rc;
    s->num_batches = tg_sloader_num_batches(s->ld);
    uint64_t left = s->num_batches > p->first_batch ? s->num_batches - p->first_batch : 0;
    tg_xpass_begin(s->ex, &s->stats);
    tg_xpass_ncache_take(s->disk, NULL);
    if ((rc = tg_ahead_start(s->ahead, (left + s->S - 1) / s->S)) < 0) {
        tg_sloader_stop(s->ld);
        s->ld = NULL;
        return rc;
    }
    tg_pipe_source_t src = {
        .next = src_next, .item_free = src_free, .num_batches = s->num_batches, .ctx = s};
    tg_pipe_opts_t po = {.pass = p,
                         .source = &src,
                         .adj = r->adj,
                         .dim = r->ds->meta.feat_dim,
                         .workers = 1,
                         .group = 1,
                         .work = gx_work,
                         .work_ctx = s,
                         .queue_depth = (int)c->x.queue_depth,
                         .in_order = 1,
                         .on_error = gx_on_error,
                         .error_ctx = s};
    rc = tg_pipe_run(&po, st);
    tg_ahead_stop(s->ahead); /* joins the inspector; clears both superbatches */
    s->cur = NULL;
    tg_btrace_free(&s->tr);
    tg_sloader_stop(s->ld);
    s->ld = NULL;
    for (int k = 0; k < 2; k++)
        tg_spill_reset(s->sb[k].spill); /* the files' bytes go back now */
    pass_report(s, st);
    tg_xpass_ncache_take(s->disk, st);
    if (rc < 0) s->dead = 1;
    return rc;
}

/* What the budget plan may lower where --mem leaves no room (read after it, at the first pass). */
static const char *const gx_shrink[] = {"queue-depth", NULL};

static int gx_in_flight(const tg_strategy_opts_t *so)
{
    /* one batch gathered by the executor, queue-depth waiting or training */
    return 1 + (int)((const gx_cfg_t *)so->cfg)->x.queue_depth;
}

/* The cost model: what gx_setup leaves for caches (after its address table, changeset
 * workspace, spill buffers and a superbatch's planning) is split; a Belady-optimal feature cache
 * of the rows its share holds (the changeset simulation's misses over the epoch) is read by the
 * executor, one thread that also copies every row, with merging; the index reads the neighbour
 * cache does not serve come from disk on the sampler threads. The
 * split is planned: the share (0, 5, ..., 100%) with the shortest predicted epoch, ties to the
 * larger feature cache; the run takes it as --ginex-split (the split above). Without the neighbour
 * cache file (and the out-degrees it ranks by), two sweeps of indices.bin build it before the first
 * epoch. */
static int gx_predict(const tg_cost_inputs_t *in, tg_cost_pred_t *p)
{
    const tg_cost_profile_t *pr = &in->prof;
    /* what the budget leaves it at the first pass: its matrices and the disk adjacency it
     * opened off */
    double avail = fmax(tg_cost_cache_bytes(in, tg_cost_matrices(&tg_strategy_ginex, in)) -
                            tg_cost_open_bytes(in),
                        0);
    double idx = (double)in->data.edges * in->data.index_bytes, row = tg_cost_row_bytes(in);
    /* the executor's reads in flight: its plan (one reader, no feature buffer) at avail */
    tg_extract_plan_t pl;
    double plan, depth = tg_cost_extract_depth(in, 1, 0, 0, avail, &plan, &pl);
    /* gx_setup's fixed parts (address table, changeset workspace, spill buffers, the
     * executor's staging and the plan with its transients) and the superbatch's planning (per
     * batch of the largest batch's nodes, as size_superbatch) come off first */
    double need =
        (double)(tg_tier_cs_bytes(in->data.nodes, 0, 1) + tg_cs_ws_bytes(in->data.nodes) +
                 2 * GX_SPILL_BUF + tg_extract_scatter_bytes(pl.chunk, in->data.feat_dim) +
                 pl.transient_bytes) +
        plan;
    double bn = floor((double)in->run.matrix_bytes / (in->data.feat_dim * 4.0 * 1.15)) + 1;
    double per_batch = bn * GX_PLAN_BYTES_PER_ACCESS * 5 / 4;
    double S = fmax(2, fmin(64, floor(fmax(avail - need, 0) / 5 / per_batch)));
    double caches = fmax(avail - need - S * per_batch, 0);
    double misses = 0, hit = 0, prep = 0, m_at[21], h_at[21];
    tg_cost_pred_t at[21];
    int split = 0;
    if (!(in->data.derived & TG_COST_HAVE_NCACHE))
        prep = tg_cost_seq_s(&in->machine, 2 * idx) / in->run.epochs;
    /* superbatches of S batches: each starts by filling the cache with the rows it will hold
     * (the superbatch's distinct rows, at most its size: the profile's rows of S consecutive
     * batches; the narrow workload's superbatches of 12 batches prefetched 94.5k rows each,
     * where an even share of the epoch's distinct rows gave 60k), one sorted sweep; the
     * Belady count's other misses are read batch by batch */
    double B = (double)pr->batches, sbs = ceil(B / fmin(S, B));
    double sb_rows = pr->window_rows.n ? tg_cost_curve_at(&pr->window_rows, fmin(S, B))
                                       : pr->distinct_rows * fmin(1, S / B);
    for (int k = 0, pct = 0; k <= 20; k++, pct += 5) {
        tg_cost_pred_t q = {.feasible = 1, .prep_s = pct ? prep : 0};
        double nb = caches * pct / 100, m = tg_cost_curve_at(&pr->belady, (caches - nb) / row);
        double C = (caches - nb) / row, fr, fb;
        /* a superbatch's fill loads the rows its initial state holds that the cache does not
         * (the rest stay from the superbatch before); the rows it uses beyond the cache's size
         * are missed batch by batch: of the epoch's Belady misses, a superbatch's share less
         * those (narrow: superbatches of 13 batches used ~154k rows with a cache of 107k:
         * 69k rows filled, 47k missed each) */
        double fill = fmax(fmin(fmin(C, sb_rows), m / sbs - fmax(sb_rows - C, 0)), 0);
        /* a neighbour cache that holds every list (and its table) serves them all */
        double h = nb >= idx + 16 * (double)in->data.nodes
                       ? 1
                       : fmin(tg_cost_curve_at(&pr->ncache_hit, nb), 1);
        tg_cost_disk_epoch(in, fmax(m - sbs * fill, 0), h, depth, &q);
        tg_cost_merge(in, fill, &fr, &fb);
        double fill_s = tg_cost_random_s(&in->machine, sbs * fr, sbs * fb, depth);
        q.read_bytes += sbs * fb;
        q.reads += sbs * fr;
        q.row_io_s += fill_s;
        q.io_s += fill_s;
        tg_cost_overlap(in, &q);
        /* one executor thread reads the rows and copies them: its reads and gathering add
         * (tg_cost_reader_s: narrow's executor read and copied for 9.5 s of a 10.3 s epoch,
         * 560k reads at 54.5k/s; its row reads alone at 32 in flight predicted 6.5 s) */
        q.steady_s = fmax(q.steady_s, tg_cost_reader_s(in, &q, depth) + q.gather_s);
        q.epoch_s = q.steady_s + q.prep_s;
        at[k] = q, m_at[k] = m, h_at[k] = h;
        if (k == 0 || q.epoch_s < at[split].epoch_s) split = k;
    }
    /* Of the shares predicted within GX_SPLIT_TOL of the shortest epoch, the one that reads the
     * fewest bytes (ties: the larger feature cache). Where the epoch is bound by the CPU the
     * shares' epochs differ by less than the model's error while their bytes differ by half:
     * the shortest alone jumped from a 100% share to 0% between --mem 1010M and 1020M on the
     * shared bench (55.1 to 36.5 GiB an epoch for 10 MiB, predicted 90.2 and 88.5 s). One
     * step remains, between 1000M and 1010M (51.2 to 36.0 GiB): below it the feature cache's
     * fills cost the model more than they save. */
    double shortest = at[split].epoch_s;
    for (int k = 0; k <= 20; k++)
        if (at[k].epoch_s <= shortest * (1 + GX_SPLIT_TOL) &&
            at[k].read_bytes < at[split].read_bytes)
            split = k;
    *p = at[split], misses = m_at[split], hit = h_at[split];
    split *= 5;
    if (need + S * per_batch > avail) {
        tg_cost_infeasible(p,
                           "its first pass needs %.1f MiB (table, changeset workspace, read "
                           "staging %.1f, a superbatch of %.0f batches %.1f), --mem leaves it "
                           "%.1f MiB",
                           (need + S * per_batch) / 1048576, need / 1048576, S,
                           S * per_batch / 1048576, avail / 1048576);
        return 0;
    }
    p->knobs[0].name = "ginex-split";
    p->knobs[0].value = split;
    snprintf(p->why, sizeof p->why,
             "split %d%% of %.1f MiB, superbatch %.0f: Belady cache misses %.2fM rows, neighbour "
             "cache serves %.0f%% of lists, %.0f reads in flight",
             split, caches / 1048576, S, misses / 1e6, 100 * hit, depth);
    return 0;
}

static const char *const gx_planned[] = {"ginex-split", NULL};

const tg_strategy_i tg_strategy_ginex = {
    .info = {.name = "ginex",
             .summary = "Ginex: superbatches sampled ahead and spilled, Belady-optimal feature "
                        "cache from precomputed changesets, static neighbour cache",
             .caps = TG_STRAT_EXACT,
             .opts = gx_opts,
             .num_opts = sizeof gx_opts / sizeof gx_opts[0],
             .config_size = sizeof(gx_cfg_t),
             .example_args = "--mem 40M --superbatch 3 --chunk-rows 64"},
    .min_bytes = gx_min_bytes,
    .open = gx_open,
    .pass = gx_pass,
    .close = gx_close,
    .batches_in_flight = gx_in_flight,
    .predict = gx_predict,
    .planned = gx_planned,
    .in_flight_opts = gx_shrink,
    .evaluating = gx_evaluating,
    .report = gx_report,
    .own_add = gx_own_add,
};
