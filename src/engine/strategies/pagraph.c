/* Strategy "pagraph": PaGraph's static feature cache (Lin et al., "PaGraph: Scaling GNN Training
 * on Large Graphs via Computation-aware Caching", SoCC 2020), the baseline Ginex compares with.
 *
 * Policy: the feature rows of the nodes that appear most often in indices.bin (the highest
 * out-degrees: the nodes most neighbourhoods contain, so the ones samplers pick most) fill what
 * the budget leaves at the first pass, pinned in RAM for the whole run (a static tier of
 * store/extract). Every other row is read from features.bin on extractor threads of the
 * pipeline, through io_uring with merging through holes, into the workers' staging rows: there
 * is no dynamic buffer, as in the paper. The ranking is a derived/ file built by `prepare`
 * (graph/outdeg: one streaming sweep of indices.bin; the top k by a radix select).
 *
 * Mechanism: samplers (indices read from disk as in gnndrive) -> extractors (tg_extract_group:
 * static tier, then the file) -> in-order window -> trainer -> releaser (engine/pipeline.h).
 * Batches reach the trainer in id order, so checkpoints are byte-identical to memory's. */
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tiergnn/outdeg.h"
#include "../xpass.h"
#include "../plan_cost.h"
/* While the static tier is made: the hot list and the tier's sorted copy (16 bytes a node) and
 * the fill's io/ staging (8 reads of 512 KiB, bookkeeping), or the ranking's read buffer. */
#define HOT_LIST_BYTES 16u
#define FILL_BYTES ((uint64_t)6 << 20)

typedef struct {
    tg_xpass_cfg_t x; /* the extraction's options */
    int64_t hot_nodes;
} pg_cfg_t;

static const tg_strategy_opt_t pg_opts[] = {
    TG_XPASS_OPTS,
    {.name = "hot-nodes",
     .kind = TG_SOPT_INT,
     .def = -1,
     .min = 0,
     .max = UINT32_MAX,
     .auto_ok = 1,
     .offset = offsetof(pg_cfg_t, hot_nodes),
     .meta = "N",
     .help = "cache at most the N highest out-degree nodes (default auto: what the budget leaves; "
             "without --mem an eighth of the RAM)"},
};

struct tg_strategy {
    tg_run_t *r;
    const pg_cfg_t *c;
    tg_io_stats_t stats;
    tg_io_file_t *feat;
    tg_tier_t *hot;   /* NULL when no row fits (or --hot-nodes 0) */
    tg_extract_t *ex; /* created at the first pass, when the run has reserved the rest */
    tg_adj_t *disk;   /* the disk adjacency inside r->adj's counting wrapper */
};

static void plan_opts(const tg_dataset_t *ds, const tg_strategy_opts_t *so, char *path, size_t len,
                      tg_extract_plan_opts_t *po)
{
    tg_xpass_plan_opts(ds, &((const pg_cfg_t *)so->cfg)->x, so->sampler_threads, path, len, po);
}

static uint64_t pg_min_bytes(const tg_dataset_t *ds, const tg_strategy_opts_t *so, char *why,
                             size_t len)
{
    char path[4096];
    tg_extract_plan_opts_t po;
    plan_opts(ds, so, path, sizeof path, &po);
    return tg_xpass_min_bytes(ds, &po, so->sampler_threads, 0, NULL, why, len);
}

/* The out-degree ranking: built (or found valid) before the run opens anything. */
static int pg_prepare(const tg_dataset_t *ds, const tg_strategy_opts_t *so)
{
    (void)so;
    int rc = tg_outdeg_prepare(ds, NULL, 0);
    return rc < 0 ? tg_err_prefix(rc, "pagraph: preparing the out-degree ranking") : 0;
}

static void pg_close(tg_strategy_t *s)
{
    if (!s) return;
    tg_extract_destroy(s->ex);
    tg_tier_destroy(s->hot);
    tg_io_file_close(s->feat);
    free(s);
}

static int pg_open(tg_strategy_t **out, tg_run_t *r, const tg_strategy_opts_t *so)
{
    tg_strategy_t *s = calloc(1, sizeof *s);
    if (!(*out = s)) return tg_err(-ENOMEM, "strategy pagraph: out of memory");
    s->r = r;
    s->c = so->cfg;
    tg_io_stats_init(&s->stats);
    char path[4096];
    tg_dataset_path(r->ds, TG_FILE_FEATURES, path, sizeof path);
    tg_store_opts_t sto = {.normalize = so->normalize, .budget = &r->budget, .rowcrc = r->rowcrc};
    int rc = tg_xpass_adj_open(r, tg_xpass_adj_queues(so->sampler_threads), &s->stats);
    s->disk = r->adj;
    if (rc == 0) rc = tg_store_file_open(&r->store, r->ds, &sto);
    if (rc == 0) rc = tg_io_file_open(&s->feat, path, 0);
    if (rc < 0) pg_close(s), *out = NULL;
    return rc;
}

/* The static tier of the k highest-ranked nodes; od is closed first (its buffer makes room for
 * the fill's). */
static int hot_create(tg_strategy_t *s, tg_outdeg_t *od, uint64_t k, uint64_t *hot_sum)
{
    const tg_meta_t *m = &s->r->ds->meta;
    tg_budget_t *bg = &s->r->budget;
    uint64_t *ids = NULL;
    int rc = tg_budget_reserve(bg, k * HOT_LIST_BYTES, "pagraph hot list");
    if (rc == 0 && !(ids = malloc(k * sizeof *ids))) rc = tg_err(-ENOMEM, "out of memory");
    if (rc == 0) rc = tg_outdeg_top(od, k, ids, hot_sum);
    tg_outdeg_close(od);
    tg_tier_static_opts_t to = {.name = "pagraph-static",
                                .feat = s->feat,
                                .num_nodes = m->num_nodes,
                                .feat_dim = m->feat_dim,
                                .dtype = m->feat_dtype,
                                .rowcrc = s->r->rowcrc};
    if (rc == 0) rc = tg_tier_static_create(&s->hot, &to, ids, k, bg);
    if (ids) tg_budget_release(bg, k * HOT_LIST_BYTES);
    free(ids);
    return rc;
}

/* At the first pass: the hot rows get what the budget leaves beside the extractors' plan. */
static int pg_setup(tg_strategy_t *s)
{
    const tg_meta_t *m = &s->r->ds->meta;
    tg_budget_t *bg = &s->r->budget;
    char path[4096], a[32], b[32];
    tg_extract_plan_opts_t po;
    plan_opts(s->r->ds, &s->r->sopts, path, sizeof path, &po);
    tg_outdeg_t *od;
    uint64_t k = 0, hot_sum = 0;
    /* a neighbour cache asked for comes first: the hot rows take what it leaves */
    int64_t ncb = s->c->x.neighbor_cache;
    int rc = ncb > 0 ? tg_xpass_ncache(s->r, s->disk, (uint64_t)ncb, &s->stats, "pagraph") : 0;
    if (rc < 0) return rc;
    rc = tg_outdeg_open(&od, s->r->ds, NULL, bg);
    if (rc < 0) return tg_err_prefix(rc, "pagraph");
    uint64_t left = bg->limit > bg->used ? bg->limit - bg->used : 0;
    if (!bg->limit)
        left = tg_phys_mem_bytes() / 8;
    else
        po.avail = TG_MAX(left, 1);
    tg_extract_plan_t pl;
    if ((rc = tg_extract_plan(&pl, &po)) == 0) {
        uint64_t plan = bg->limit ? tg_extract_plan_bytes(&pl) + po.other_transient : 0;
        k = tg_tier_static_fit(m->num_nodes, m->feat_dim, m->feat_dtype,
                               left > plan ? left - plan : 0, HOT_LIST_BYTES, FILL_BYTES);
        if (s->c->hot_nodes >= 0) k = TG_MIN(k, (uint64_t)s->c->hot_nodes);
    }
    rc = rc == 0 && k ? hot_create(s, od, k, &hot_sum) : (tg_outdeg_close(od), rc);
    tg_extract_opts_t eo = {.plan = &pl,
                            .feat = s->feat,
                            .normalize = s->r->sopts.normalize,
                            .budget = bg,
                            .stats = &s->stats,
                            .tiers = &s->hot,
                            .ntiers = s->hot != NULL,
                            .who = "pagraph",
                            .rowcrc = s->r->rowcrc};
    if (rc == 0) rc = tg_extract_create(&s->ex, &eo);
    if (rc < 0) {
        tg_tier_destroy(s->hot), s->hot = NULL;
        return tg_err_prefix(rc, "pagraph");
    }
    tg_log_info("pagraph: %llu hot rows (%s, %.1f%% of nodes, %.1f%% of indices.bin's entries), "
                "%d extractor(s), %u reads in flight each, %u rows per chunk, %s%s",
                (unsigned long long)k, tg_fmt_bytes(s->hot ? s->hot->mem_bytes : 0, a, sizeof a),
                100.0 * (double)k / (double)m->num_nodes,
                m->num_edges ? 100.0 * (double)hot_sum / (double)m->num_edges : 0.0, pl.extractors,
                pl.depth, pl.chunk, pl.gap ? "holes up to " : "one read per row run",
                pl.gap ? tg_fmt_bytes(pl.gap, b, sizeof b) : "");
    /* what the hot rows did not need (at most every row) serves the index reads */
    if (s->c->x.resident_indices &&
        tg_xpass_adj_resident(s->r, s->disk, eo.keep_bytes, "pagraph") < 0)
        tg_log_warn("%s; reading the indices from disk", tg_errmsg());
    return 0;
}

/* Before an evaluation: the hot rows and the extractors' staging go back to the budget, so that
 * a layer-wise pass's row files keep that many rows resident; the next pass sets them up again
 * (pg_setup: the hot rows read once more) from what the budget leaves then. The hot rows equal
 * the file's, so training results do not change. The neighbour cache and the indices in RAM
 * stay: every pass, layer-wise ones too, reads the adjacency through them. */
static void pg_evaluating(tg_strategy_t *s, int layerwise)
{
    /* a sampled evaluation pass reads through the same caches as training */
    if (!layerwise) return;
    if (!s->ex) return;
    tg_extract_destroy(s->ex);
    tg_tier_destroy(s->hot); /* after the extraction that asks it */
    s->ex = NULL;
    s->hot = NULL;
}

static int pg_pass(tg_strategy_t *s, const tg_pass_t *p, tg_pass_stats_t *st)
{
    memset(st, 0, sizeof *st);
    st->next_batch = p->first_batch;
    int rc;
    if (!s->ex && (rc = pg_setup(s)) < 0) return rc;
    tg_xpass_begin(s->ex, &s->stats); /* the fill and the budget's profile are not the pass's */
    tg_xpass_ncache_take(s->disk, NULL);
    tg_pipe_opts_t po = tg_xpass_pipe_opts(s->r, p, &s->c->x, s->ex);
    rc = tg_pipe_run(&po, st);
    tg_xpass_end(s->ex, &s->stats, s->hot != NULL, st); /* hit ratio: static-tier hits / rows */
    tg_xpass_ncache_take(s->disk, st);
    return rc;
}

/* What the budget plan may lower where --mem leaves no room (read after it, at the first pass). */
static const char *const pg_shrink[] = {"queue-depth", "sweep-batches", "extractors", NULL};

static int pg_in_flight(const tg_strategy_opts_t *so)
{
    return tg_xpass_in_flight(&((const pg_cfg_t *)so->cfg)->x);
}

/* The cost model: the highest out-degree rows that fit beside the matrices serve their share
 * of the accesses (the profile's degree coverage), every other access is read, merged, as
 * gnndrive's are; indices from disk. Without the out-degree counts, one sweep of indices.bin
 * builds them before the first epoch. */
static int pg_predict(const tg_cost_inputs_t *in, tg_cost_pred_t *p)
{
    double left = tg_cost_cache_bytes(in, tg_cost_matrices(&tg_strategy_pagraph, in)), plan;
    /* its extractors (no feature buffer) at the depth their plan takes at what is left; the hot
     * rows get what the plan leaves (pg_setup) */
    double depth = tg_cost_extract_depth(in, TG_XPASS_EXTRACTORS, 0, 0, left, &plan, NULL);
    double hot = tg_cost_static_rows(in, left - plan, HOT_LIST_BYTES, (double)FILL_BYTES);
    /* what the hot rows do not need (at most every row) holds the indices when it can */
    double hot_bytes = tg_cost_static_bytes(in, hot) + hot * HOT_LIST_BYTES;
    int idx_ram = tg_cost_indices_fit(in, left - plan - (double)FILL_BYTES - hot_bytes);
    /* unprofiled: the share of the edges the 1% highest-degree nodes hold, pro rata */
    double cover = in->prof.hot_degree.n
                       ? tg_cost_curve_at(&in->prof.hot_degree, hot)
                       : in->data.degree_skew * fmin(hot / (0.01 * (double)in->data.nodes), 1);
    double idx = (double)in->data.edges * in->data.index_bytes;
    if (!(in->data.derived & TG_COST_HAVE_OUTDEG))
        p->prep_s = tg_cost_seq_s(&in->machine, idx) / in->run.epochs;
    p->prep_s += tg_cost_fill_s(in, hot) / in->run.epochs; /* the hot tier's fill */
    tg_cost_disk_epoch(in, tg_cost_accesses(in) * (1 - cover), idx_ram, depth, p);
    snprintf(p->why, sizeof p->why,
             "%.0fk hot rows by out-degree serve %.0f%% of the accesses, %.0f reads in flight%s",
             hot / 1e3, 100 * cover, depth, idx_ram ? ", indices in RAM" : "");
    return 0;
}

const tg_strategy_i tg_strategy_pagraph = {
    .info = {.name = "pagraph",
             .summary = "PaGraph: the highest out-degree nodes' feature rows pinned in RAM, the "
                        "rest read from disk by extractors (io_uring); indices on disk",
             .caps = TG_STRAT_EXACT | TG_STRAT_DERIVED,
             .opts = pg_opts,
             .num_opts = sizeof pg_opts / sizeof pg_opts[0],
             .config_size = sizeof(pg_cfg_t),
             .example_args = "--mem 32M --hot-nodes 400 --extractors 3 --chunk-rows 64"},
    .min_bytes = pg_min_bytes,
    .prepare = pg_prepare,
    .open = pg_open,
    .pass = pg_pass,
    .close = pg_close,
    .batches_in_flight = pg_in_flight,
    .predict = pg_predict,
    .in_flight_opts = pg_shrink,
    .evaluating = pg_evaluating,
};
