/* Strategy "gids": GIDS's data planning (Park et al., "Accelerating Sampling and Aggregation
 * Operations in GNN Frameworks with GPU Initiated Direct Storage Accesses", sections 3.2-3.4)
 * on the CPU, over the same pipeline as gnndrive:
 *
 *     look-ahead source (samples `window` batches ahead, announces their rows)
 *       -> extractors: constant buffer (static RAM tier) -> feature buffer (WINDOW policy) -> file
 *       -> in-order window -> trainer -> releaser
 *
 * Constant CPU buffer (3.3): the rows of the nodes ranked hottest by weighted reverse PageRank
 * (tiergnn/rank.h, a derived file built once per fanouts) are pinned in a static tier for the
 * run: served from RAM without I/O or locking.
 *
 * Window buffering (3.4): the source samples `window` batches ahead of the one it hands out and
 * announces their rows (less those in the constant buffer) to the feature buffer
 * (engine/lookahead), whose WINDOW policy evicts rows none of those batches use before rows they
 * do. Window 0 is the plain LRU
 * buffer (the paper's baseline).
 *
 * Storage access accumulator (3.2): the target number of reads in flight is N_access = IOPS x
 * latency at the device probe's best depth (equation 2 with the steady state dominating, one
 * disk). Every extractor's io/ queue may hold N_access reads (the plan's depth hint), so the
 * disk sees the target whenever any extractor reads. A worker merges the next batches into its
 * sweep, up to --sweep-batches, until their expected reads (nodes x the pass's disk reads per
 * node so far: the reads the buffers redirect are gone from it) reach ACC_FILL x N_access: a
 * sweep's reads drain at its end, and a sweep several times the target keeps that drain short.
 * The io/ layer's time-weighted depth over the time any extractor reads gives the depth
 * achieved, reported beside the target.
 *
 * Exactness: the source hands batches out in id order, the extraction fills every row of X from
 * the file's bytes whatever tier serves it, and the in-order window trains them in id order:
 * checkpoints equal memory's byte for byte. */
#include <math.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "tiergnn/featbuf.h"
#include "gids.h"
#include "tiergnn/rank.h"
#include "../lookahead.h"
#include "../plan_cost.h"
#include "../xpass.h"

/* The hot list and the tier's sorted copy while the constant buffer is made (16 bytes a node),
 * and the fill's io/ staging (as pagraph's). */
#define CB_LIST_BYTES 16u
#define CB_FILL_BYTES ((uint64_t)6 << 20)
/* Without --constant-buffer: half of what the budget leaves for features, at most this share
 * of the feature file (the paper pins 10-20% of the feature data). */
#define CB_MAX_SHARE 0.20
/* A look-ahead batch's bytes before one was seen: node ids, block indptr and indices. */
#define WIN_BYTES_PER_NODE 32u
/* The accumulator merges batches until their expected reads reach this many times N_access. */
#define ACC_FILL 4.0
/* --window auto: at most this many batches, and a look-ahead costing at most 1/WIN_AUTO_SHARE
 * of what the budget leaves for the buffers. */
#define WIN_AUTO_MAX 8u
#define WIN_AUTO_SHARE 8u

typedef struct {
    tg_xpass_cfg_t x;
    int64_t window, constant_buffer, feature_buffer, chunk_overlap;
} gi_cfg_t;

#define GI_OPT(...) TG_STRATEGY_OPT(gi_cfg_t, __VA_ARGS__)

static const tg_strategy_opt_t gi_opts[] = {
    /* One extractor and one batch queued: the accumulator's deep queue gives the device its
     * depth from one thread, and every input matrix in flight is memory the buffers lose. */
    TG_XPASS_OPTS_EQ(1, "1", 1, "1", "N_access from the device probe"),
    GI_OPT("window", TG_SOPT_INT, -1, 0, 256, 1, window, "W",
           "batches sampled ahead whose rows the feature buffer protects (0: LRU; default auto: "
           "8, fewer when their look-ahead would take over an eighth of the feature memory)"),
    GI_OPT("constant-buffer", TG_SOPT_SIZE, -1, 0, INT64_MAX, 1, constant_buffer, "BYTES",
           "RAM pinned for the hottest rows by reverse PageRank (default auto: half of what "
           "--mem leaves for features, at most 20% of the feature file)"),
    GI_OPT("feature-buffer", TG_SOPT_SIZE, 0, 0, INT64_MAX, 0, feature_buffer, "SIZE",
           "feature buffer size when there is no --mem (default 0: an eighth of the RAM, at "
           "most the feature file)"),
    GI_OPT("chunk-overlap", TG_SOPT_INT, 1, 0, 1, 0, chunk_overlap, "0|1",
           "1: an extractor acquires its next chunk and queues its reads while the current "
           "chunk's last reads drain, so the accumulator's depth holds across chunks (two "
           "chunks' handles in the feature buffer's minimum); 0: one chunk at a time "
           "(default 1)"),
};

struct tg_strategy {
    tg_run_t *r;
    const gi_cfg_t *c;
    tg_io_stats_t stats;  /* index reads of the samplers, the constant buffer's fill */
    tg_io_stats_t fstats; /* the extractors' feature reads: their depth is the accumulator's */
    tg_io_file_t *feat;
    tg_adj_t *disk;
    tg_tier_t *hot; /* the constant buffer (NULL: no room or --constant-buffer 0) */
    tg_extract_t *ex;
    tg_featbuf_t *fb;
    int dead;
    uint32_t window;
    double n_access;       /* target reads in flight (all extractors) */
    unsigned plan_depth;   /* reads in flight per extractor */
    double reads_per_node; /* disk reads per node looked up, last pass (0: none yet) */
    _Atomic uint64_t nodes_done, groups_done; /* this pass: nodes extracted, sweeps */
    /* window buffering: the rows of the next `window` batches announced to the buffer */
    tg_lookahead_t *la;
    /* per pass */
    tg_source_t *src;
    uint64_t num_batches;
    uint64_t win_est;   /* a look-ahead batch's bytes before one was seen */
    uint64_t max_nodes; /* the budget plan's bound on a batch's nodes */
    uint64_t keep;      /* budget bytes the look-ahead leaves free (io/ transient) */
};

static uint64_t gi_min_bytes(const tg_dataset_t *ds, const tg_strategy_opts_t *so, char *why,
                             size_t len)
{
    char path[4096];
    tg_extract_plan_opts_t po;
    const gi_cfg_t *c = so->cfg;
    tg_xpass_plan_opts(ds, &c->x, so->sampler_threads, path, sizeof path, &po);
    po.featbuf = 1;
    po.overlap = (int)c->chunk_overlap;
    return tg_xpass_min_bytes(ds, &po, so->sampler_threads, 0, NULL, why, len);
}

static void gi_close(tg_strategy_t *s)
{
    if (!s) return;
    tg_lookahead_close(s->la);
    tg_extract_destroy(s->ex);
    tg_tier_destroy(s->hot);
    tg_io_file_close(s->feat);
    free(s);
}

static int gi_open(tg_strategy_t **out, tg_run_t *r, const tg_strategy_opts_t *so)
{
    tg_strategy_t *s = calloc(1, sizeof *s);
    if (!(*out = s)) return tg_err(-ENOMEM, "strategy gids: out of memory");
    s->r = r;
    s->c = so->cfg;
    s->window = s->c->window < 0 ? WIN_AUTO_MAX : (uint32_t)s->c->window; /* auto: at setup */
    tg_io_stats_init(&s->stats);
    tg_io_stats_init(&s->fstats);
    int rc = tg_xpass_open_disk(r, tg_xpass_adj_queues(so->sampler_threads), &s->stats, &s->feat);
    s->disk = r->adj;
    if (rc < 0) gi_close(s), *out = NULL;
    return rc;
}

/* ---------------------------------------------------------------- setup */

/* The constant buffer: the k hottest nodes of the ranking for the pass's fanouts. */
static int constant_buffer(tg_strategy_t *s, const tg_pass_t *p, uint64_t k)
{
    const tg_meta_t *m = &s->r->ds->meta;
    tg_budget_t *bg = &s->r->budget;
    tg_rank_opts_t ro;
    tg_rank_opts_default(&ro);
    ro.num_layers = p->num_layers;
    ro.fanouts = p->fanouts;
    ro.budget = bg;
    ro.mem = bg->limit ? (bg->limit > bg->used ? bg->limit - bg->used : 1) : 0;
    /* smaller reads rather than no ranking when the budget is tight */
    for (ro.read_bytes = TG_RANK_READ_BYTES;
         ro.mem && ro.read_bytes > (64u << 10) && tg_rank_mem_bytes(s->r->ds, &ro) > ro.mem;)
        ro.read_bytes /= 2;
    tg_rank_t *rk;
    int rc = tg_rank_open(&rk, s->r->ds, &ro);
    if (rc == -ENOMEM) {
        tg_log_warn("gids: no constant buffer: %s", tg_errmsg());
        return 0;
    }
    if (rc < 0) return tg_err_prefix(rc, "gids: ranking the hot nodes");
    uint64_t *ids = NULL;
    rc = tg_budget_reserve(bg, k * CB_LIST_BYTES, "gids: constant buffer's node list");
    if (rc == 0 && !(ids = malloc(k * sizeof *ids)))
        rc = tg_err(-ENOMEM, "gids: out of memory for %llu hot ids", (unsigned long long)k);
    if (rc == 0) rc = tg_rank_top(rk, k, ids);
    tg_rank_close(rk);
    tg_tier_static_opts_t to = {.name = "gids-constant",
                                .feat = s->feat,
                                .num_nodes = m->num_nodes,
                                .feat_dim = m->feat_dim,
                                .dtype = m->feat_dtype,
                                .stats = &s->stats,
                                .rowcrc = s->r->rowcrc};
    if (rc == 0) rc = tg_tier_static_create(&s->hot, &to, ids, k, bg);
    if (ids) tg_budget_release(bg, k * CB_LIST_BYTES);
    free(ids);
    return rc;
}

/* N_access from the device probe: IOPS x latency at the best depth (Little's law: the reads in
 * flight at the peak); 0 when the probe failed (the plan's depth is then the target). */
static double access_target(const char *path)
{
    tg_io_probe_t pr;
    if (tg_io_probe_run(path, NULL, &pr) < 0) return 0;
    for (unsigned i = 0; i < pr.ndepths; i++)
        if (pr.depth[i] == pr.best_depth && pr.iops[i] > 0 && pr.lat_us[i] > 0)
            return pr.iops[i] * pr.lat_us[i] * 1e-6;
    return 0;
}

/* What a look-ahead of W batches of at most bn nodes keeps beside the input matrices: the W
 * sampled batches and, for the WINDOW policy, their positions in the buffer's trace (announced
 * and not retired are at most the W + 1 batches from the next one on and the groups the E
 * extractors hold), which raise the feature buffer's least size. */
typedef struct {
    uint64_t positions, fb_min, keep;
} win_cost_t;

static win_cost_t window_cost(const tg_extract_plan_t *pl, uint32_t S, uint64_t bn, uint32_t W)
{
    win_cost_t w = {0};
    uint32_t E = (uint32_t)pl->extractors;
    /* the look-ahead holds the next batch too until the pipeline takes it: W + 1 batches */
    w.keep = W ? (uint64_t)(W + 1) * bn * WIN_BYTES_PER_NODE + bn * 8 : 0;
    w.positions = W ? TG_MIN((uint64_t)(W + E * S + 1) * bn, (uint64_t)1 << 30) : 0;
    tg_featbuf_opts_t fo;
    tg_extract_plan_featbuf_opts(pl, &fo);
    fo.policy = W ? TG_FEATBUF_WINDOW : TG_FEATBUF_LRU;
    fo.window = W;
    fo.future_positions = (uint32_t)w.positions;
    w.fb_min = tg_featbuf_bytes_for(&fo, tg_featbuf_min_slots(&fo)) + pl->handle_bytes;
    return w;
}

/* --window auto: the largest W <= WIN_AUTO_MAX whose look-ahead costs at most a
 * 1/WIN_AUTO_SHARE of what the budget leaves for the buffers beside the plan (room). */
static uint32_t window_auto(const tg_extract_plan_t *pl, uint32_t S, uint64_t bn, uint64_t room)
{
    win_cost_t w0 = window_cost(pl, S, bn, 0);
    for (uint32_t W = WIN_AUTO_MAX; W > 0; W--) {
        win_cost_t w = window_cost(pl, S, bn, W);
        if (!room || w.fb_min + w.keep - w0.fb_min <= room / WIN_AUTO_SHARE) return W;
    }
    return 0;
}

/* At the first pass: the extraction's plan, the constant buffer from what the budget leaves
 * beside the plan and the look-ahead, the feature buffer (WINDOW) with the rest. */
/* The look-ahead window (--window, or auto from what the budget leaves: left bytes, base of
 * them the extraction's with no window) and what it costs (*wc; *plan: the extraction's bytes
 * with it); -ENOMEM naming the window when --mem cannot hold it. */
static int gi_window(tg_strategy_t *s, const tg_pass_t *p, const tg_extract_plan_t *pl,
                     uint64_t base, uint64_t left, win_cost_t *wc, uint64_t *plan)
{
    tg_run_t *r = s->r;
    const tg_budget_t *bg = &r->budget;
    uint32_t S = (uint32_t)s->c->x.sweep_batches;
    /* the budget plan's largest batch, else the sampler's bound (no --mem: no plan) */
    uint64_t bn = r->batch_nodes ? r->batch_nodes
                                 : tg_sampler_max_nodes(p->sampler, p->batch_size, p->num_layers,
                                                        p->fanouts, r->ds->meta.num_nodes);
    bn = TG_MAX(bn, 1);
    s->win_est = bn * WIN_BYTES_PER_NODE;
    s->max_nodes = bn;
    if (s->c->window < 0) {
        s->window = window_auto(pl, S, bn, bg->limit && left > base ? left - base : 0);
        if (s->window < WIN_AUTO_MAX)
            tg_log_info("gids: --window auto: %u (a look-ahead of %u batches of up to %llu nodes "
                        "would take over an eighth of the feature memory --mem leaves)",
                        s->window, WIN_AUTO_MAX, (unsigned long long)bn);
    }
    *wc = window_cost(pl, S, bn, s->window);
    *plan = base - pl->featbuf_min + wc->fb_min + wc->keep;
    if (!bg->limit || *plan <= left) return 0;
    char a[32], c[32], d[32], e[32];
    return tg_err(-ENOMEM,
                  "gids: --window %u needs %s for %llu look-ahead positions and batches beside "
                  "the extraction's %s, but --mem leaves %s: give a smaller --window (or "
                  "--extractors / --queue-depth), or --mem %s more",
                  s->window, tg_fmt_bytes(wc->fb_min - pl->featbuf_min + wc->keep, a, sizeof a),
                  (unsigned long long)wc->positions,
                  tg_fmt_bytes(tg_extract_plan_bytes(pl), c, sizeof c),
                  tg_fmt_bytes(left, d, sizeof d), tg_fmt_bytes(*plan - left, e, sizeof e));
}

/* What the setup made: the constant buffer's k rows, the feature buffer, the extractors and
 * their depth against N_access. */
static void gi_setup_log(const tg_strategy_t *s, const tg_extract_plan_t *pl, uint64_t k,
                         uint64_t file_bytes)
{
    char a[32], b[32], g[32];
    if (pl->depth < s->n_access && s->c->x.io_depth <= 0)
        tg_log_warn("gids: --mem leaves room for %u reads in flight per extractor, below the "
                    "device's N_access %.0f: the accumulator cannot reach its target",
                    pl->depth, s->n_access);
    tg_log_info("gids: constant buffer %llu rows (%s, %.1f%% of the feature file), feature "
                "buffer %u slots (%s, window %u), %d extractor(s) x %u reads in flight, target "
                "N_access %.0f, chunk %u%s%s",
                (unsigned long long)k, tg_fmt_bytes(s->hot ? s->hot->mem_bytes : 0, a, sizeof a),
                file_bytes ? 100.0 * (double)k * s->r->row_bytes / (double)file_bytes : 0.0,
                tg_featbuf_num_slots(s->fb),
                tg_fmt_bytes(tg_featbuf_reserved_bytes(s->fb), b, sizeof b), s->window,
                pl->extractors, pl->depth, s->n_access, pl->chunk, pl->gap ? ", holes up to " : "",
                pl->gap ? tg_fmt_bytes(pl->gap, g, sizeof g) : "");
}

static int gi_setup(tg_strategy_t *s, const tg_pass_t *p)
{
    tg_run_t *r = s->r;
    const tg_meta_t *m = &r->ds->meta;
    tg_budget_t *bg = &r->budget;
    char path[4096];
    int64_t ncb = s->c->x.neighbor_cache;
    int rc = ncb > 0 ? tg_xpass_ncache(r, s->disk, (uint64_t)ncb, &s->stats, "gids") : 0;
    if (rc < 0) return rc;
    tg_extract_plan_opts_t po;
    tg_xpass_plan_opts(r->ds, &s->c->x, r->sopts.sampler_threads, path, sizeof path, &po);
    po.featbuf = 1;
    /* the accumulator across chunk boundaries: the next chunk's reads go out while this one's
     * drain, and its acquire runs while reads are in flight (store/extract) */
    po.overlap = (int)s->c->chunk_overlap;
    /* The accumulator's target: with no --io-depth, every extractor may keep N_access reads in
     * flight, so that the device sees its best depth whenever any extractor reads (between its
     * chunks another may not be reading); a tight budget lowers it like the probe's depth. */
    s->n_access = s->c->x.io_depth > 0 ? 0 : access_target(path);
    if (s->n_access >= 1) po.depth_hint = (unsigned)TG_MIN(ceil(s->n_access), 4096.0);
    uint64_t left =
        bg->limit ? (bg->limit > bg->used ? bg->limit - bg->used : 0) : tg_phys_mem_bytes() / 8;
    if (bg->limit) po.avail = TG_MAX(left, 1);
    tg_extract_plan_t pl;
    if ((rc = tg_extract_plan(&pl, &po)) < 0) return tg_err_prefix(rc, "gids");
    uint64_t base = tg_extract_plan_bytes(&pl) + po.other_transient; /* with W = 0 */
    win_cost_t wc;
    uint64_t plan;
    if ((rc = gi_window(s, p, &pl, base, left, &wc, &plan)) < 0) return rc;
    uint64_t win_keep = wc.keep, positions = wc.positions;
    uint64_t feat_room = left > plan ? left - plan : 0;
    uint64_t file_bytes = m->num_nodes * (uint64_t)r->row_bytes;
    uint64_t cb = s->c->constant_buffer >= 0
                      ? (uint64_t)s->c->constant_buffer
                      : TG_MIN(feat_room / 2, (uint64_t)(CB_MAX_SHARE * (double)file_bytes));
    /* the constant buffer's size counts its rows; the budget also holds their transient lists
     * and the fill's staging */
    uint64_t k = TG_MIN(tg_tier_static_fit(m->num_nodes, m->feat_dim, m->feat_dtype, cb, 0, 0),
                        tg_tier_static_fit(m->num_nodes, m->feat_dim, m->feat_dtype, feat_room,
                                           CB_LIST_BYTES, CB_FILL_BYTES));
    double t_cb = tg_now();
    if (k && (rc = constant_buffer(s, p, k)) < 0) return rc;
    if (k) tg_log_info("gids: constant buffer ranked and read in %.2f s", tg_now() - t_cb);
    tg_extract_opts_t eo = {
        .plan = &pl,
        .feat = s->feat,
        .normalize = r->sopts.normalize,
        .budget = bg,
        .stats = &s->fstats,
        .tiers = &s->hot,
        .ntiers = s->hot != NULL,
        /* the look-ahead's check counts the transients as free even
         * while reads hold them: they are kept twice with a window */
        .keep_bytes = (po.other_transient + pl.transient_bytes) * (s->window ? 2 : 1) + win_keep,
        .cache_bytes = (uint64_t)s->c->feature_buffer,
        .who = "gids",
        .policy = s->window ? TG_FEATBUF_WINDOW : TG_FEATBUF_LRU,
        .window = s->window,
        .future_positions = (uint32_t)positions,
        .rowcrc = r->rowcrc};
    if ((rc = tg_extract_create(&s->ex, &eo)) < 0) {
        tg_tier_destroy(s->hot), s->hot = NULL;
        return rc;
    }
    s->fb = tg_extract_featbuf(s->ex);
    s->keep = po.other_transient + pl.transient_bytes;
    /* an --io-depth given is the depth asked for (all extractors); else the device's */
    if (s->n_access < 1) s->n_access = (double)pl.depth * pl.extractors;
    s->plan_depth = pl.depth;
    gi_setup_log(s, &pl, k, file_bytes);
    if (s->c->x.resident_indices && tg_xpass_adj_resident(r, s->disk, eo.keep_bytes, "gids") < 0)
        tg_log_warn("%s; reading the indices from disk", tg_errmsg());
    return 0;
}

/* ---------------------------------------------------------------- the look-ahead source */

/* The window (engine/lookahead): the rows of the next `window` batches, outside the constant
 * buffer, announced to the feature buffer (its WINDOW policy protects them); made at the pass
 * after a setup, with the feature buffer it announces to. */
static int lookahead_open(tg_strategy_t *s)
{
    tg_lookahead_opts_t lo = {.fb = s->fb,
                              .skip = s->hot,
                              .window = s->window,
                              .max_nodes = s->max_nodes,
                              .est_bytes = s->win_est,
                              .keep = s->keep,
                              .budget = &s->r->budget,
                              .who = "gids"};
    return tg_lookahead_open(&s->la, &lo);
}

static int src_next(void *ctx, tg_pipe_t *P, tg_sloader_item_t **out)
{
    tg_strategy_t *s = ctx;
    *out = NULL;
    if (tg_pipe_aborted(P)) return -ECANCELED;
    return tg_lookahead_next(s->la, out);
}

static void src_free(void *ctx, tg_sloader_item_t *it)
{
    tg_strategy_t *s = ctx;
    tg_source_item_free(s->src, it);
}

/* Expected disk reads per node: the pass's so far once it has a few sweeps, else the pass
 * before's, else one per node (no merging before anything is known). */
static double reads_per_node(tg_strategy_t *s)
{
    uint64_t nodes = atomic_load(&s->nodes_done);
    if (atomic_load(&s->groups_done) >= 4 && nodes) {
        tg_io_counts_t c;
        tg_io_stats_snapshot(&s->fstats, &c);
        return (double)c.io_requests / (double)nodes;
    }
    return s->reads_per_node > 0 ? s->reads_per_node : 1.0;
}

/* The accumulator (pipeline's group_more): one more batch while the sweep's expected reads
 * stay below ACC_FILL x N_access. */
static int group_more(void *ctx, const tg_batch_t *const *b, int n)
{
    tg_strategy_t *s = ctx;
    uint64_t nodes = 0;
    for (int j = 0; j < n; j++)
        nodes += b[j]->num_nodes;
    return (double)nodes * reads_per_node(s) < ACC_FILL * s->n_access;
}

/* The extraction of a group, then its batches leave the buffer's trace. */
static int gi_work(void *ctx, tg_pipe_t *P, int worker, const tg_batch_t *const *b, float *const *X,
                   int n)
{
    tg_strategy_t *s = ctx;
    int rc = tg_xpass_work(s->ex, P, worker, b, X, n);
    uint64_t nodes = 0;
    for (int j = 0; j < n; j++)
        nodes += b[j]->num_nodes;
    atomic_fetch_add(&s->nodes_done, nodes);
    atomic_fetch_add(&s->groups_done, 1);
    for (int j = 0; j < n && rc == 0; j++)
        if ((rc = tg_lookahead_done(s->la, b[j]->id)) < 0) tg_pipe_fail(P, rc, NULL);
    return rc;
}

static void gi_on_error(void *ctx)
{
    tg_strategy_t *s = ctx;
    if (s->fb) tg_featbuf_shutdown(s->fb);
    s->dead = 1;
}

/* ---------------------------------------------------------------- one pass */

/* A pass's own figures (tg_pass_stats_t.own): counts, sums and settings, so that passes add;
 * the depths and ratios are derived when they are reported (tg_gids_figures). */
typedef struct {
    uint64_t passes;
    uint64_t window, constant_rows; /* settings: the larger */
    double target_depth, plan_depth;
    uint64_t groups; /* extractor sweeps */
    /* the feature queues' time-weighted reads in flight, the time any of them read, the time
     * each read (summed over queues), the pass's wall time and its gathering time per
     * extractor */
    double io_depth_s, io_any_s, io_busy_s, wall_s, gather_s;
    uint64_t announced, unannounced, window_short;
    uint64_t buffer_lookups, buffer_hits, buffer_slots;
} gi_own_t;
TG_PASS_OWN_FITS(gi_own_t);

static void gi_stats(tg_strategy_t *s, double wall_s, tg_pass_stats_t *st)
{
    tg_io_counts_t c;
    tg_io_stats_take(&s->fstats, &c);
    st->io_requests += c.io_requests;
    st->io_read_bytes += c.io_read_bytes;
    st->io_wait_s += c.io_wait_s;
    tg_featbuf_stats_t fs;
    tg_featbuf_stats(s->fb, &fs, 1);
    tg_lookahead_counts_t lc;
    tg_lookahead_counts(s->la, &lc);
    /* rows served without a read of their own: the constant buffer's, then the buffer's */
    st->cache_hits = (s->hot ? st->tiers[0].hits : 0) + fs.hits + fs.waits;
    /* the gathering time per extractor, between chunks included (exact with one extractor;
     * with several it assumes they gather at the same time) */
    gi_own_t o = {.passes = 1,
                  .window = s->window,
                  .constant_rows = s->hot ? tg_tier_static_count(s->hot) : 0,
                  .target_depth = s->n_access,
                  .plan_depth = (double)s->plan_depth,
                  .groups = atomic_load(&s->groups_done),
                  .io_depth_s = c.io_depth_s,
                  .io_any_s = c.io_any_s,
                  .io_busy_s = c.io_busy_s,
                  .wall_s = wall_s,
                  .gather_s = st->gather_s / (double)TG_MAX(tg_extract_num_workers(s->ex), 1),
                  .announced = lc.announced,
                  .unannounced = lc.unannounced,
                  .window_short = lc.stopped_short,
                  .buffer_lookups = fs.lookups,
                  .buffer_hits = fs.hits + fs.waits,
                  .buffer_slots = fs.num_slots};
    tg_pass_own_put(st, &o, sizeof o);
    uint64_t nodes = atomic_load(&s->nodes_done);
    if (nodes) s->reads_per_node = (double)c.io_requests / (double)nodes;
}

static void gi_own_add(tg_pass_stats_t *sum, const tg_pass_stats_t *add)
{
    gi_own_t a, b;
    tg_pass_own_get(sum, &a, sizeof a);
    tg_pass_own_get(add, &b, sizeof b);
    a.passes += b.passes;
    a.window = TG_MAX(a.window, b.window);
    a.constant_rows = TG_MAX(a.constant_rows, b.constant_rows);
    a.target_depth = TG_MAX(a.target_depth, b.target_depth);
    a.plan_depth = TG_MAX(a.plan_depth, b.plan_depth);
    a.groups += b.groups;
    a.io_depth_s += b.io_depth_s;
    a.io_any_s += b.io_any_s;
    a.io_busy_s += b.io_busy_s;
    a.wall_s += b.wall_s;
    a.gather_s += b.gather_s;
    a.announced += b.announced;
    a.unannounced += b.unannounced;
    a.window_short += b.window_short;
    a.buffer_lookups += b.buffer_lookups;
    a.buffer_hits += b.buffer_hits;
    a.buffer_slots = TG_MAX(a.buffer_slots, b.buffer_slots);
    tg_pass_own_put(sum, &a, sizeof a);
}

int tg_gids_figures(const tg_pass_stats_t *st, tg_gids_figures_t *f)
{
    gi_own_t o;
    tg_pass_own_get(st, &o, sizeof o);
    memset(f, 0, sizeof *f);
    if (!o.passes) return -ENOENT;
    f->window = (uint32_t)o.window;
    f->merged = o.groups ? (double)st->steps / (double)o.groups : 0;
    f->constant_rows = o.constant_rows;
    f->target_depth = o.target_depth;
    f->plan_depth = o.plan_depth;
    f->mean_depth = o.io_any_s > 0 ? o.io_depth_s / o.io_any_s : 0;
    f->queue_depth = o.io_busy_s > 0 ? o.io_depth_s / o.io_busy_s : 0;
    f->inflight = o.wall_s > 0 ? o.io_depth_s / o.wall_s : 0;
    f->gather_depth = o.gather_s > 0 ? o.io_depth_s / o.gather_s : 0;
    f->announced = o.announced;
    f->unannounced = o.unannounced;
    f->window_short = o.window_short;
    f->buffer_lookups = o.buffer_lookups;
    f->buffer_hits = o.buffer_hits;
    f->buffer_slots = o.buffer_slots;
    return 0;
}

/* The object "gids": the accumulator's depth against its target, the constant buffer's and the
 * feature buffer's hit ratios, the window's announcements. No clause in the human line. */
static void gi_report(const tg_pass_stats_t *st, tg_json_t *j, char *line, size_t len)
{
    (void)line;
    (void)len;
    tg_gids_figures_t f;
    if (!j || tg_gids_figures(st, &f) < 0) return;
    uint64_t rows = st->ntiers ? st->tiers[0].lookups : 0;
    uint64_t cb_hits = f.constant_rows && st->ntiers ? st->tiers[0].hits : 0;
    char buf[512];
    snprintf(buf, sizeof buf,
             "{\"window\":%u,\"merged_batches\":%.3f,\"constant_buffer_rows\":%llu,"
             "\"target_depth\":%.3f,\"plan_depth_per_extractor\":%.3f,\"mean_depth\":%.3f,"
             "\"depth_of_target\":%.4f,\"queue_depth\":%.3f,\"gather_depth\":%.3f,"
             "\"mean_in_flight\":%.3f,\"constant_hit_ratio\":%.6f,\"buffer_hit_ratio\":%.6f,"
             "\"announced\":%llu,\"unannounced\":%llu,\"window_short\":%llu}",
             f.window, f.merged, (unsigned long long)f.constant_rows, f.target_depth, f.plan_depth,
             f.mean_depth, f.target_depth > 0 ? f.mean_depth / f.target_depth : 0.0, f.queue_depth,
             f.gather_depth, f.inflight, rows ? (double)cb_hits / (double)rows : 0.0,
             f.buffer_lookups ? (double)f.buffer_hits / (double)f.buffer_lookups : 0.0,
             (unsigned long long)f.announced, (unsigned long long)f.unannounced,
             (unsigned long long)f.window_short);
    tg_json_raw(j, "gids", buf);
}

/* Before an evaluation: the constant buffer, the feature buffer and the extractors' staging go
 * back to the budget, so that a layer-wise pass's row files keep that many rows resident; the
 * next pass sets them up again (gi_setup: the constant buffer ranked and read once more) from
 * what the budget leaves then. Both buffers hold the file's rows, so training results do not
 * change. The neighbour cache and the indices in RAM stay: every pass, layer-wise ones too,
 * reads the adjacency through them. */
static void gi_evaluating(tg_strategy_t *s, int layerwise)
{
    /* a sampled evaluation pass reads through the same caches as training */
    if (!layerwise) return;
    if (!s->ex || s->dead) return;
    tg_lookahead_close(s->la); /* it announces to the feature buffer */
    s->la = NULL;
    tg_extract_destroy(s->ex);
    tg_tier_destroy(s->hot); /* after the extraction that asks it */
    s->ex = NULL;
    s->fb = NULL;
    s->hot = NULL;
}

static int gi_pass(tg_strategy_t *s, const tg_pass_t *p, tg_pass_stats_t *st)
{
    memset(st, 0, sizeof *st);
    st->next_batch = p->first_batch;
    if (s->dead) return tg_err(-ECANCELED, "gids: the pipeline was shut down by an earlier error");
    int rc;
    if (!s->ex && (rc = gi_setup(s, p)) < 0) return rc;
    if (!s->la && (rc = lookahead_open(s)) < 0) return rc;
    tg_run_t *r = s->r;
    tg_xpass_begin(s->ex, &s->stats);
    tg_io_stats_reset(&s->fstats);
    tg_xpass_ncache_take(s->disk, NULL);
    tg_featbuf_stats_t fs;
    tg_featbuf_stats(s->fb, &fs, 1);
    tg_sloader_opts_t lo = tg_pass_sloader_opts(p, r->adj, r->sopts.sampler_threads,
                                                (size_t)TG_MAX(s->c->x.queue_depth, 1));
    if ((rc = tg_source_start(&s->src, &lo, s->window)) < 0) return rc;
    s->num_batches = tg_source_num_batches(s->src);
    if ((rc = tg_lookahead_begin(s->la, s->src, s->num_batches, p->first_batch)) < 0) {
        tg_source_stop(s->src);
        s->src = NULL;
        return rc;
    }
    tg_pipe_source_t src = {
        .next = src_next, .item_free = src_free, .num_batches = s->num_batches, .ctx = s};
    tg_pipe_opts_t po = tg_xpass_pipe_opts(r, p, &s->c->x, s->ex);
    atomic_store(&s->nodes_done, 0);
    atomic_store(&s->groups_done, 0);
    po.source = &src;
    po.group = (int)s->c->x.sweep_batches;
    if (po.group > 1) po.group_more = group_more;
    po.work = gi_work;
    po.work_ctx = s;
    po.on_error = gi_on_error;
    po.error_ctx = s;
    double t0 = tg_now();
    rc = tg_pipe_run(&po, st);
    double wall = tg_now() - t0;
    tg_source_stop(s->src);
    s->src = NULL;
    /* look-ahead batches not taken (a stop or an error) give their bytes back, and every
     * announced batch leaves the trace (unless an error shut the buffer down) */
    tg_lookahead_end(s->la, !s->dead);
    tg_xpass_end(s->ex, &s->stats, s->hot != NULL, st);
    tg_xpass_ncache_take(s->disk, st);
    gi_stats(s, wall, st);
    if (rc < 0) s->dead = 1;
    return rc;
}

/* What the budget plan may lower where --mem leaves no room (read after it, at the first pass). */
static const char *const gi_shrink[] = {"queue-depth", "sweep-batches", NULL};

static int gi_in_flight(const tg_strategy_opts_t *so)
{
    return tg_xpass_in_flight(&((const gi_cfg_t *)so->cfg)->x);
}

/* The cost model: GIDS's constant buffer takes half of what the budget leaves (at most
 * CB_MAX_SHARE of the file) and serves the accesses of the hottest rows by reverse PageRank
 * (the profile's coverage); the rest pass an LRU feature buffer of the other half (--window 0,
 * auto's choice at a tight budget), whose miss share is the profile's LRU curve; misses are
 * read merged at the accumulator's depth, the probe's best; indices from disk. The constant
 * buffer is filled once per run (tg_cost_fill_s: its rows spread over the file, read in the
 * static tier's merged runs); without the ranking, its power iterations over the edges come
 * first. */
#define GI_RANK_ITERS 20
/* N_access of the profile's probe (access_target's arithmetic: reads in flight at its best
 * depth by Little's law), as a depth hint; 0 when the probe has no latency. */
static unsigned gi_access(const tg_cost_inputs_t *in)
{
    const tg_io_probe_t *pr = &in->machine.probe;
    for (unsigned i = 0; i < pr->ndepths; i++)
        if (pr->depth[i] == pr->best_depth && pr->iops[i] > 0 && pr->lat_us[i] > 0)
            return (unsigned)fmin(ceil(pr->iops[i] * pr->lat_us[i] * 1e-6), 4096);
    return 0;
}

/* The window --window auto takes at the first pass (gi_window) with the default options: the
 * extraction's plan pl, the largest batch's rows from its input matrix (f32, the budget plan's
 * 15% margin), room what the budget leaves beside the plan; 0 where no plan was made. *wc:
 * what that window costs. */
static uint32_t gi_predict_window(const tg_cost_inputs_t *in, const tg_extract_plan_t *pl,
                                  double room, win_cost_t *wc)
{
    gi_cfg_t c;
    memset(wc, 0, sizeof *wc);
    if (!pl->depth || tg_strategy_parse(&tg_strategy_gids.info, NULL, 0, &c, 0) < 0) return 0;
    uint64_t bn = (uint64_t)((double)in->run.matrix_bytes / (in->data.feat_dim * 4.0 * 1.15)) + 1;
    uint32_t S = (uint32_t)c.x.sweep_batches;
    uint32_t W = window_auto(pl, S, bn, room > 0 ? (uint64_t)room : 1);
    *wc = window_cost(pl, S, bn, W);
    return W;
}

static int gi_predict(const tg_cost_inputs_t *in, tg_cost_pred_t *p)
{
    double caches = tg_cost_cache_bytes(in, tg_cost_matrices(&tg_strategy_gids, in)), plan;
    /* one extractor keeping N_access reads in flight (the probe's, as access_target), lowered
     * by its plan at what the budget leaves; the look-ahead's window from what the plan leaves;
     * the buffers share what both leave (gi_setup) */
    tg_extract_plan_t pl;
    double depth = tg_cost_extract_depth(in, 1, 1, gi_access(in), caches, &plan, &pl);
    win_cost_t wc;
    uint32_t W = gi_predict_window(in, &pl, caches - plan, &wc);
    double room = fmax(caches - plan + (double)pl.featbuf_min - (double)(wc.fb_min + wc.keep), 0);
    double row = tg_cost_row_bytes(in), feat = tg_cost_feat_bytes(in);
    double N = (double)in->data.nodes;
    /* the constant buffer: rows as gi_setup sizes them (its node table, and the lists and
     * staging that fill it, beside them); the feature buffer: the rest, in slots with their
     * records and the window's trace (never more than rows); what it leaves holds the indices
     * when it can */
    double k = fmin(tg_cost_static_rows(in, fmin(room / 2, feat * CB_MAX_SHARE), 0, 0),
                    tg_cost_static_rows(in, room, CB_LIST_BYTES, (double)CB_FILL_BYTES));
    double cb_bytes = tg_cost_static_bytes(in, k);
    tg_featbuf_opts_t fo;
    tg_extract_plan_featbuf_opts(&pl, &fo);
    fo.policy = W ? TG_FEATBUF_WINDOW : TG_FEATBUF_LRU;
    fo.window = W;
    fo.future_positions = (uint32_t)wc.positions;
    double fb_bytes = fmax(room - cb_bytes, 0) + (double)(wc.fb_min - pl.handle_bytes);
    double buf = pl.depth ? tg_cost_featbuf_rows(in, &fo, fb_bytes) : 0;
    int idx_ram = tg_cost_indices_fit(in, room - cb_bytes - buf * row);
    double cover = tg_cost_curve_at(&in->prof.hot_rpr, k), acc = tg_cost_accesses(in);
    double lru = tg_cost_lru_misses(in, k + buf >= N ? N : buf) / acc;
    double misses = acc * (1 - cover) * fmin(lru, 1);
    double idx = (double)in->data.edges * in->data.index_bytes;
    p->prep_s = tg_cost_fill_s(in, k);
    if (!(in->data.derived & TG_COST_HAVE_RANK))
        p->prep_s += GI_RANK_ITERS * tg_cost_seq_s(&in->machine, idx);
    p->prep_s /= in->run.epochs;
    tg_cost_disk_epoch(in, misses, idx_ram, depth, p);
    /* one extractor gathers every row: the constant buffer's at the gather rate, the others
     * through the feature buffer, whose bookkeeping grows with the look-ahead's trace where
     * --window auto takes one (gi_window), and that extractor's gathering alone can bound the
     * epoch (the ram workload: 1.7 CPU seconds an epoch on it); it reads too, between its
     * copies (tg_cost_reader_s: wide's 0.74M reads took 13.7 s at 54k/s, where the probe reads
     * 71k/s at its 64 in flight and 85k/s at the samplers' and its depths summed) */
    p->gather_s = tg_cost_buffer_gather_s(in, acc * (1 - cover), W > 0) +
                  cover * acc / in->machine.gather_rows_per_s;
    p->stage_cpu_s = p->gather_s;
    p->stage_s = tg_cost_reader_s(in, p, depth) + p->gather_s;
    tg_cost_overlap(in, p);
    snprintf(p->why, sizeof p->why,
             "constant buffer %.0fk rows serves %.0f%%, %s buffer %.0fk rows; misses %.2fM "
             "rows%s",
             k / 1e3, 100 * cover, W ? "window" : "LRU", buf / 1e3, misses / 1e6,
             idx_ram ? ", indices in RAM" : "");
    return 0;
}

const tg_strategy_i tg_strategy_gids = {
    .info = {.name = "gids",
             .summary = "GIDS: hot rows by reverse PageRank pinned in RAM, a feature buffer that "
                        "protects the rows of the next W sampled batches, merged sweeps sized "
                        "from the device's depth; indices on disk",
             .caps = TG_STRAT_EXACT,
             .opts = gi_opts,
             .num_opts = sizeof gi_opts / sizeof gi_opts[0],
             .config_size = sizeof(gi_cfg_t),
             .example_args = "--mem 40M --window 4 --constant-buffer 16K --extractors 2 "
                             "--chunk-rows 64 --sweep-batches 2"},
    .min_bytes = gi_min_bytes,
    .open = gi_open,
    .pass = gi_pass,
    .close = gi_close,
    .batches_in_flight = gi_in_flight,
    .predict = gi_predict,
    .in_flight_opts = gi_shrink,
    .evaluating = gi_evaluating,
    .report = gi_report,
    .own_add = gi_own_add,
};
