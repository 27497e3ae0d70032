/* Strategy "gnndrive": GNNDrive's CPU-training pipeline (Jiang, Jia and Wang, "GNNDrive: Reducing
 * Memory Contention and I/O Congestion for Disk-based GNN Training", ICPP 2024, section 4):
 *
 *     sampler threads -> extracting queue -> extractor threads -> training queue -> trainer
 *                                                                  -> releasing queue -> releaser
 *
 * Samplers: a tg_sloader_t over the disk-resident adjacency (indptr in RAM, indices read through
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
 * exactly as in the other strategies): the budget plan reserves them (batches_in_flight).
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
#include "../plan_cost.h"
#include "../pipeline.h"
#include "../xpass.h"

#include <pthread.h>
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tiergnn/extract.h"
#include "tiergnn/featbuf.h"

/* ---------------------------------------------------------------- options */

/* The options of the table (int64_t fields at their offsets): the extraction's, shared with
 * every extracting strategy, then its own. */
typedef struct {
    tg_xpass_cfg_t x;
    int64_t out_of_order, feature_buffer, features_in_ram;
} gd_cfg_t;

#define GD_OPT(...) TG_STRATEGY_OPT(gd_cfg_t, __VA_ARGS__)

static const tg_strategy_opt_t gd_opts[] = {
    TG_XPASS_OPTS,
    GD_OPT("out-of-order", TG_SOPT_FLAG, 0, 0, 1, 0, out_of_order, NULL,
           "train batches as they are extracted (faster, not bit-identical)"),
    GD_OPT("feature-buffer", TG_SOPT_SIZE, 0, 0, INT64_MAX, 0, feature_buffer, "SIZE",
           "feature buffer size when there is no --mem (default 0: an eighth of the RAM, at "
           "most the feature file)"),
    GD_OPT("features-in-ram", TG_SOPT_INT, -1, 0, 0, 1, features_in_ram, "auto|0",
           "auto: the whole feature file in RAM (no buffer) when the budget holds it; 0: always "
           "the feature buffer (default auto)"),
};

/* Everything the strategy reads: the common settings and its own options, resolved. */
typedef struct {
    int normalize, sampler_threads;
    int extractors, out_of_order;
    unsigned io_depth;    /* 0 = from the device probe */
    uint32_t chunk_rows;  /* 0 = automatic */
    int64_t io_gap;       /* < 0 = automatic */
    uint64_t cache_bytes; /* without --mem: feature buffer size (0 = automatic) */
    int resident_indices; /* indices.bin into RAM when there is room (--resident-indices) */
    int features_in_ram;  /* the whole feature file in RAM when there is room */
} gd_opts_t;

static void gd_resolve(const tg_strategy_opts_t *o, gd_opts_t *g)
{
    const gd_cfg_t *c = o->cfg;
    memset(g, 0, sizeof *g);
    g->normalize = o->normalize;
    g->sampler_threads = o->sampler_threads;
    g->extractors = c->x.extractors > 0 ? (int)c->x.extractors : 1;
    g->io_depth = (unsigned)c->x.io_depth;
    g->chunk_rows = (uint32_t)c->x.chunk_rows;
    g->io_gap = c->x.io_gap;
    g->out_of_order = (int)c->out_of_order;
    g->cache_bytes = (uint64_t)c->feature_buffer;
    g->resident_indices = c->x.resident_indices != 0;
    g->features_in_ram = c->features_in_ram != 0;
}

/* ---------------------------------------------------------------- sizing */

/* The extraction's plan options: the strategy's knobs over the dataset's feature file. */
static void plan_opts(const tg_dataset_t *ds, const gd_opts_t *o, char *path, size_t path_len,
                      tg_extract_plan_opts_t *po)
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
    po->other_transient = tg_xpass_adj_transient(tg_xpass_adj_queues(o->sampler_threads));
}

static uint64_t gd_min_bytes(const tg_dataset_t *ds, const tg_strategy_opts_t *so, char *why,
                             size_t why_len)
{
    gd_opts_t go, *o = &go;
    gd_resolve(so, o);
    char path[4096], a[32], b[512];
    tg_extract_plan_opts_t po;
    plan_opts(ds, o, path, sizeof path, &po);
    po.minimum = 1;
    tg_extract_plan_t pl;
    if (tg_extract_plan(&pl, &po) < 0) {
        snprintf(why, why_len, "%s", tg_errmsg());
        return UINT64_MAX;
    }
    unsigned q = tg_xpass_adj_queues(o->sampler_threads);
    uint64_t adj = tg_xpass_adj_bytes(ds, q) + tg_xpass_adj_transient(q);
    snprintf(why, why_len, "indptr and index-read staging %s, %s", tg_fmt_bytes(adj, a, sizeof a),
             tg_extract_plan_describe(&pl, b, sizeof b));
    return adj + tg_extract_plan_bytes(&pl);
}

/* ---------------------------------------------------------------- state */

struct tg_strategy {
    tg_run_t *r;
    gd_opts_t o;
    tg_io_stats_t stats; /* every disk read: index reads of the samplers, feature reads */
    tg_io_file_t *feat;
    char feat_path[4096];
    /* created at the first pass, when the run has reserved everything else */
    int ready;
    tg_extract_t *ex; /* the extractors' workers and the feature buffer */
    tg_featbuf_t *fb; /* of ex */
    tg_adj_t *disk;   /* the disk adjacency inside r->adj's counting wrapper */
    tg_tier_t *all;   /* the whole feature file in RAM, when the budget holds it (no buffer) */
    int dead;         /* an earlier pass shut the buffer down */
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
    int rc = tg_xpass_adj_open(r, tg_xpass_adj_queues(o->sampler_threads), &s->stats);
    s->disk = r->adj;
    if (rc < 0) goto err;
    /* Layer-wise passes (full-neighbour evaluation, inference) read rows with pread. */
    tg_store_opts_t so = {.normalize = o->normalize, .budget = &r->budget, .rowcrc = r->rowcrc};
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
    *out = s;
    return 0;
err:
    tg_io_file_close(s->feat);
    free(s);
    return rc;
}

/* When the budget left holds every row (and the extraction's staging without a buffer), the
 * feature file goes into a static RAM tier with large sorted reads: every later lookup is a
 * lock-free hit, with none of the buffer's reference counting. Returns 1 when it did. */
static int whole_file_tier(tg_strategy_t *s, const tg_extract_plan_opts_t *fpo,
                           tg_extract_plan_t *pl)
{
    tg_run_t *r = s->r;
    const tg_meta_t *m = &r->ds->meta;
    uint64_t limit = r->budget.limit, used = r->budget.used;
    uint64_t avail = limit ? (limit > used ? limit - used : 0) : tg_phys_mem_bytes() / 8;
    if (!s->o.features_in_ram || (!limit && s->o.cache_bytes))
        return 0; /* --features-in-ram 0 or --feature-buffer ask for the buffer */
    tg_extract_plan_opts_t po = *fpo;
    po.featbuf = 0;
    if (limit) po.avail = TG_MAX(avail, 1);
    if (tg_extract_plan(pl, &po) < 0) return 0;
    uint64_t N = m->num_nodes, ids_bytes = N * sizeof(uint64_t);
    uint64_t whole = tg_tier_static_bytes(N, m->feat_dim, m->feat_dtype, N);
    uint64_t need = whole + ids_bytes + tg_extract_plan_bytes(pl) + po.other_transient;
    if (need > avail) return 0;
    uint64_t *ids = malloc(N ? ids_bytes : 1);
    if (!ids || tg_budget_reserve(&r->budget, ids_bytes, "gnndrive: node list") < 0) {
        free(ids);
        return 0;
    }
    for (uint64_t v = 0; v < N; v++)
        ids[v] = v;
    tg_tier_static_opts_t to = {.name = "gnndrive-ram",
                                .feat = s->feat,
                                .num_nodes = N,
                                .feat_dim = m->feat_dim,
                                .dtype = m->feat_dtype,
                                .stats = &s->stats,
                                .rowcrc = r->rowcrc};
    int rc = tg_tier_static_create(&s->all, &to, ids, N, &r->budget);
    tg_budget_release(&r->budget, ids_bytes);
    free(ids);
    if (rc < 0) {
        tg_log_warn("gnndrive: the whole feature file in RAM failed (%s); using the buffer",
                    tg_errmsg());
        s->all = NULL;
        return 0;
    }
    return 1;
}

/* Sizes and creates the extractors' workers and the feature buffer from what the budget has
 * left (store/extract plans the reads and fits them to a tight budget), or the whole file in
 * RAM when it fits. */
static int gd_setup(tg_strategy_t *s)
{
    tg_run_t *r = s->r;
    char path[4096], a[32], b[32];
    /* a neighbour cache asked for comes first: the feature buffer takes what it leaves */
    int64_t ncb = ((const gd_cfg_t *)r->sopts.cfg)->x.neighbor_cache;
    int rc = ncb > 0 ? tg_xpass_ncache(r, s->disk, (uint64_t)ncb, &s->stats, "gnndrive") : 0;
    if (rc < 0) return rc;
    /* the extractors as the budget plan left them (it may lower a default count) */
    s->o.extractors = (int)TG_MAX(((const gd_cfg_t *)r->sopts.cfg)->x.extractors, 1);
    tg_extract_plan_opts_t po;
    plan_opts(r->ds, &s->o, path, sizeof path, &po);
    uint64_t limit = r->budget.limit;
    if (limit) po.avail = limit > r->budget.used ? limit - r->budget.used : 1;
    tg_extract_plan_t pl;
    int all = whole_file_tier(s, &po, &pl);
    if (!all && (rc = tg_extract_plan(&pl, &po)) < 0) return rc;
    tg_extract_opts_t eo = {.plan = &pl,
                            .feat = s->feat,
                            .normalize = s->o.normalize,
                            .budget = &r->budget,
                            .stats = &s->stats,
                            .keep_bytes = po.other_transient + pl.transient_bytes,
                            .cache_bytes = s->o.cache_bytes,
                            .tiers = &s->all,
                            .ntiers = all,
                            .who = "gnndrive",
                            .rowcrc = r->rowcrc};
    if ((rc = tg_extract_create(&s->ex, &eo)) < 0) {
        tg_tier_destroy(s->all);
        s->all = NULL;
        return rc;
    }
    s->fb = tg_extract_featbuf(s->ex);
    if (all)
        tg_log_info("gnndrive: %d extractor(s); the whole feature file is in RAM (%s: the budget "
                    "left room for it), read once with large reads",
                    pl.extractors, tg_fmt_bytes(s->all->mem_bytes, a, sizeof a));
    else
        tg_log_info("gnndrive: %d extractor(s), %u reads in flight each, %u rows per chunk, "
                    "feature buffer %u slots (%s), %s%s",
                    pl.extractors, pl.depth, pl.chunk, tg_featbuf_num_slots(s->fb),
                    tg_fmt_bytes(tg_featbuf_reserved_bytes(s->fb), a, sizeof a),
                    pl.gap ? "holes up to " : "one read per row run",
                    pl.gap ? tg_fmt_bytes(pl.gap, b, sizeof b) : "");
    /* what the buffer did not need (it holds at most the whole feature file) serves the index
     * reads; if loading fails the samplers read from disk, where the error will show again */
    if (s->o.resident_indices && tg_xpass_adj_resident(r, s->disk, eo.keep_bytes, "gnndrive") < 0)
        tg_log_warn("%s; reading the indices from disk", tg_errmsg());
    s->ready = 1;
    return 0;
}

static void gd_close(tg_strategy_t *s)
{
    if (!s) return;
    tg_extract_destroy(s->ex);
    tg_tier_destroy(s->all);
    tg_io_file_close(s->feat);
    free(s);
}

/* Before an evaluation: the feature buffer (or the whole file in RAM) and the extractors'
 * staging go back to the budget, so that a layer-wise pass's row files keep that many rows
 * resident; the next pass sets them up again from what the budget leaves then. The buffer is a
 * cache (rows equal the file's), so training results do not change. The neighbour cache and the
 * indices in RAM stay: every pass, layer-wise ones too, reads the adjacency through them. */
static void gd_evaluating(tg_strategy_t *s, int layerwise)
{
    /* a sampled evaluation pass reads through the same caches as training */
    if (!layerwise) return;
    if (!s->ready || s->dead) return;
    tg_extract_destroy(s->ex);
    tg_tier_destroy(s->all); /* after the extraction that asks it */
    s->ex = NULL;
    s->fb = NULL;
    s->all = NULL;
    s->ready = 0;
}

/* ---------------------------------------------------------------- one pass */

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
    tg_featbuf_stats_t fs;
    if (s->fb) tg_featbuf_stats(s->fb, &fs, 1);
    tg_xpass_begin(s->ex, &s->stats);
    tg_xpass_ncache_take(s->disk, NULL);
    const gd_cfg_t *c = s->r->sopts.cfg;
    tg_pipe_opts_t po = tg_xpass_pipe_opts(s->r, p, &c->x, s->ex);
    po.in_order = !(p->allow_out_of_order && s->o.out_of_order);
    po.on_error = gd_on_error;
    po.error_ctx = s;
    rc = tg_pipe_run(&po, st);
    tg_xpass_end(s->ex, &s->stats, s->all != NULL, st);
    tg_xpass_ncache_take(s->disk, st);
    /* the hit ratio of the feature buffer: hits, standby hits, and rows another extractor was
     * loading (not read again); with the whole file in RAM, that tier's */
    if (s->fb) {
        tg_featbuf_stats(s->fb, &fs, 1);
        st->cache_lookups = fs.lookups;
        st->cache_hits = fs.hits + fs.waits;
    }
    return rc;
}

/* What the budget plan may lower where --mem leaves no room (read after it, at the first pass). */
static const char *const gd_shrink[] = {"queue-depth", "sweep-batches", "extractors", NULL};

static int gd_in_flight(const tg_strategy_opts_t *so)
{
    return tg_xpass_in_flight(&((const gd_cfg_t *)so->cfg)->x);
}

/* The cost model: the feature buffer behaves as an LRU cache of what the budget leaves beside
 * the matrices in flight; its misses are read batch by batch with merging, the samplers read
 * every neighbour list from disk, and both share the device at the probe's best depth. */
static int gd_predict(const tg_cost_inputs_t *in, tg_cost_pred_t *p)
{
    double caches = tg_cost_cache_bytes(in, tg_cost_matrices(&tg_strategy_gnndrive, in)), plan;
    /* its extractors at the depth their plan takes at what the budget leaves; the buffer gets
     * the rest */
    tg_extract_plan_t pl;
    double depth = tg_cost_extract_depth(in, TG_XPASS_EXTRACTORS, 1, 0, caches, &plan, &pl);
    /* where every row fits beside the plan (without a buffer) and a node list, the file goes
     * into a RAM tier at the first pass (whole_file_tier): no misses; the indices follow it
     * into RAM when what is left holds them */
    double N = (double)in->data.nodes, file = tg_cost_feat_bytes(in), flat;
    tg_cost_extract_depth(in, TG_XPASS_EXTRACTORS, 0, 0, caches, &flat, NULL);
    double whole = file + 8 * N + flat;
    if (whole <= caches) {
        int idx_ram = tg_cost_indices_fit(in, caches - whole);
        tg_cost_disk_epoch(in, 0, idx_ram, depth, p);
        p->prep_s = tg_cost_seq_s(&in->machine, file) / in->run.epochs;
        tg_cost_overlap(in, p);
        snprintf(p->why, sizeof p->why, "every row in a RAM tier, indices %s",
                 idx_ram ? "in RAM" : "from disk");
        return 0;
    }
    /* the buffer: its least share of the plan and the rest, in slots with their records */
    tg_featbuf_opts_t fo;
    tg_extract_plan_featbuf_opts(&pl, &fo);
    double rows =
        pl.depth ? tg_cost_featbuf_rows(
                       in, &fo, fmax(caches - plan, 0) + (double)(pl.featbuf_min - pl.handle_bytes))
                 : 0;
    double misses = tg_cost_lru_misses(in, rows);
    tg_cost_disk_epoch(in, misses, 0, depth, p);
    /* every row passes the feature buffer (LRU) on its way into X */
    p->gather_s = tg_cost_buffer_gather_s(in, tg_cost_accesses(in), 0);
    tg_cost_overlap(in, p);
    snprintf(p->why, sizeof p->why,
             "LRU buffer of %.0fk rows misses %.2fM rows, %.0f reads in flight", rows / 1e3,
             misses / 1e6, depth);
    return 0;
}

const tg_strategy_i tg_strategy_gnndrive = {
    .info = {.name = "gnndrive",
             .summary = "GNNDrive: samplers -> extractors (io_uring into a shared feature buffer) "
                        "-> trainer -> releaser; indices and features on disk",
             .caps = TG_STRAT_EXACT | TG_STRAT_AUTO_OOC,
             .opts = gd_opts,
             .num_opts = sizeof gd_opts / sizeof gd_opts[0],
             .config_size = sizeof(gd_cfg_t),
             .example_args = "--mem 32M --extractors 3 --chunk-rows 64 --features-in-ram 0"},
    .min_bytes = gd_min_bytes,
    .open = gd_open,
    .pass = gd_pass,
    .close = gd_close,
    .batches_in_flight = gd_in_flight,
    .predict = gd_predict,
    .in_flight_opts = gd_shrink,
    .evaluating = gd_evaluating,
};
