/* Strategy "diskgnn": DiskGNN's offline sampling and packed feature layout (Liu et al.,
 * "DiskGNN", sections 3-5) on the CPU, with the same sampler, batches and model as every other
 * strategy.
 *
 * A *generation* is the batches of one pass sampled ahead ("offline sampling") and laid out for
 * them:
 *
 *   sample      the pass's batches (sampler threads over the disk adjacency), spilled (ids and
 *               blocks) with their access trace (graph/batchtrace)
 *   lay out     store/layout: the hot rows (most used, in RAM), per segment of --segment batches
 *               a disk cache of the rows several of its batches use (one copy each, MinHash
 *               order so rows needed together share pages), and each batch's packed chunk (the
 *               rest, contiguous); the segment size from the paper's Algorithm 2 under
 *               --disk-budget
 *   map         every batch's input rows as row numbers of the packed file: its map record
 *               (tiergnn/pack.h), written to an unnamed map file, read back with the batch
 *   pack        store/pack: the feature file read once, sequentially, in partitions, each row
 *               copied to every place the layout gives it, written with large appends
 *
 * The packed file is one unnamed file: [hot rows: a hole][segment caches][chunks], so that one
 * store/extract extraction reads a batch (store/packfile's reader): the record becomes the
 * batch's row list, the hot rows come from RAM through a tier over the file's first rows, the
 * cache and chunk rows through io_uring with rows close together merged into one read (a chunk
 * is a run of consecutive rows: a few large reads). Rows are converted (f16, normalisation) in
 * the one place every strategy converts them, so X equals the file's rows bit for bit.
 *
 * Fresh samples every epoch (tiergnn's addition: DiskGNN samples once and reuses the samples):
 * the run hands a training pass the next one (TG_STRAT_NEXT_PASS), and the inspector
 * (engine/nextpass) samples, lays out and packs the next epoch while this one trains, so from the
 * second epoch on the preprocessing hides behind training. --reuse-samples K is the paper's mode:
 * one generation serves K epochs (the batches then differ from memory's after the first of them).
 * Evaluation passes get a generation of their own, prepared before they run.
 *
 * Files: the spill, map and packed files are O_TMPFILE files in the run's derived directory
 * (tg_xpass_runtime_dir: the dataset's derived/ on the same disk, unless it cannot be written
 * or --derived-dir says otherwise): an error, SIGINT or SIGKILL leaves nothing behind, and nothing
 * of a packing that did not finish is ever read. At most two generations exist at once (the one
 * training and the next), each within --disk-budget.
 *
 * Memory (--mem): the hot rows (chosen from the first generation's counts and kept: the paper's
 * CPU cache, static), the reader's extraction (held during a pass), the packing's partitions,
 * and per generation the trace and the layout while it is planned; under --verify-reads the
 * node and checksum of every packed row (12 bytes a row). */
#include "../engine-impl.h"
#include "../plan_cost.h"
#include "../plan_profile.h"
#include "../nextpass.h"
#include "../passkey.h"
#include "../pipeline.h"
#include "../xpass.h"
#include "diskgnn.h"

#include <errno.h>
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include "tiergnn/batchtrace.h"
#include "tiergnn/changeset.h"
#include "tiergnn/extract.h"
#include "tiergnn/layout.h"
#include "tiergnn/ncache.h"
#include "tiergnn/pack.h"

/* ---------------------------------------------------------------- options */

typedef struct {
    tg_xpass_cfg_t x;
    int64_t segment, disk_budget, reuse_samples, hot_cache, pack_mem, sampling_indices;
} dg_cfg_t;

#define DG_OPT(...) TG_STRATEGY_OPT(dg_cfg_t, __VA_ARGS__)

static const tg_strategy_opt_t dg_opts[] = {
    TG_XPASS_OPTS_QD(1, "1"),
    DG_OPT("segment", TG_SOPT_INT, -1, 1, 1 << 24, 1, segment, "S",
           "batches sharing one disk cache (default auto: the paper's search under "
           "--disk-budget)"),
    DG_OPT("disk-budget", TG_SOPT_SIZE, -1, 1, INT64_MAX, 1, disk_budget, "BYTES",
           "bytes one generation's packed file may take on disk (default: the epoch's bytes, "
           "at least the feature file, at most 45% of the free disk)"),
    DG_OPT("reuse-samples", TG_SOPT_INT, 1, 1, 1 << 20, 0, reuse_samples, "K",
           "epochs that share one sampling and packing (default 1: fresh samples every epoch, "
           "packed while the epoch before trains; K > 1: the paper's mode)"),
    DG_OPT("hot-cache", TG_SOPT_SIZE, -1, 0, INT64_MAX, 1, hot_cache, "SIZE",
           "RAM for the most used rows (default auto: what --mem leaves; without --mem an "
           "eighth of the RAM, at most the feature file)"),
    DG_OPT("sampling-indices", TG_SOPT_INT, -1, 0, 1, 1, sampling_indices, "auto|0|1",
           "read indices.bin into RAM for each epoch's sampling only (1), never (0: sample from "
           "disk unless the indices stay in RAM), or when they cannot stay (default auto)"),
    DG_OPT("pack-mem", TG_SOPT_SIZE, -1, 1 << 20, INT64_MAX, 1, pack_mem, "SIZE",
           "RAM for one packing partition and the rows it sends (default auto: a fifth of what "
           "--mem leaves, 16 MiB .. 256 MiB)"),
};

/* ---------------------------------------------------------------- state */

#define DG_SPILL_BUF ((size_t)1 << 20)
#define DG_PACK_MIN ((uint64_t)1 << 20)
#define DG_PACK_MAX ((uint64_t)256 << 20)

/* One generation: a pass's batches sampled, laid out and packed. */
typedef struct {
    tg_pass_key_t key;    /* the pass it serves (engine/passkey) */
    uint64_t num_batches; /* of the pass, those before first_batch included */
    uint64_t count;       /* batches held: first_batch .. first_batch + count */
    tg_spill_t *spill;
    tg_btrace_t tr; /* the batches' ids (freed once laid out), offsets (tr.off) and times */
    /* the packed file, its map file (per batch its record) and checksums (tiergnn/pack.h) */
    tg_pack_set_t ps;
    tg_layout_summary_t sum;
    double sample_wall_s, layout_s, prep_s;
    int uses;                     /* passes it served (--reuse-samples) */
    _Atomic uint64_t index_bytes; /* adjacency bytes its sampling asked for */
} gen_t;

struct tg_strategy {
    tg_run_t *r;
    int normalize;
    tg_io_stats_t stats;      /* executor reads */
    tg_io_stats_t pack_stats; /* packing reads */
    tg_io_file_t *feat;
    tg_adj_t *disk;
    char dir[4096];
    int ready, dead;
    size_t row_bytes; /* raw row in the file */
    /* the hot rows: chosen by the first generation, kept */
    uint32_t *hot_nodes;
    uint64_t hot_rows, hot_cap;
    unsigned char *hot_buf; /* (hot_cap x row_bytes) raw rows */
    int hot_filled;
    int hot_out; /* hot_buf released for an evaluation (dg_evaluating), read again at a pass */
    uint64_t fixed_bytes;
    uint64_t pack_mem, disk_budget; /* disk_budget 0: default_budget's */
    int budget_said;                /* default_budget has logged its choice */
    uint64_t set_aside;             /* budget the hot rows leave for the reader, packing, maps */
    /* the executor's reader of the packed file (tiergnn/pack.h, over store/extract): its plan
     * (reads in flight, merge gap, chunk), the hot rows' tier, the reader of the pass */
    tg_extract_plan_t plan;
    tg_tier_t *hot_tier;
    tg_pack_reader_t *rd;
    int sample_in_ram; /* the indices are read into RAM for each generation's sampling */
    int warned_disk_sampling;
    uint64_t trace_hint; /* accesses of the last generation, + 1/32 */
    /* generations: cur serves the pass (kept for --reuse-samples), run is the one the
     * executor reads now; the inspector prepares (and holds) the next training pass's */
    gen_t *cur, *run;
    tg_nextpass_t *insp;
    /* the executor's position in cur, and the map of the batch it hands out */
    uint64_t next_id, pos;
    unsigned char *rec; /* the batch's map record */
    uint64_t rec_cap, rec_len;
};

/* ---------------------------------------------------------------- generations */

static void gen_destroy(tg_strategy_t *s, gen_t *g)
{
    if (!g) return;
    tg_pack_set_close(&g->ps);
    tg_spill_close(g->spill);
    tg_btrace_free(&g->tr);
    tg_pass_key_free(&g->key);
    free(g);
}

static int gen_new(tg_strategy_t *s, gen_t **out)
{
    *out = NULL;
    gen_t *g = calloc(1, sizeof *g);
    if (!g) return tg_err(-ENOMEM, "diskgnn: out of memory");
    tg_pack_set_init(&g->ps);
    tg_btrace_init(&g->tr, &s->r->budget, "diskgnn: the sampled batches' trace");
    tg_spill_opts_t so = {.buf_bytes = DG_SPILL_BUF, .budget = &s->r->budget};
    int rc = tg_spill_open(&g->spill, s->dir, &so);
    if (rc < 0) {
        gen_destroy(s, g);
        return rc;
    }
    *out = g;
    return 0;
}

/* Samples the generation's batches into its spill file and its trace (ids in X order). */
static int gen_sample(tg_strategy_t *s, gen_t *g, const atomic_int *abort)
{
    tg_run_t *r = s->r;
    tg_pass_t kp = tg_pass_key_pass(&g->key);
    size_t esz = tg_index_dtype_size(r->ds->meta.index_dtype);
    int rc;
    /* The indices in RAM for the sampling only, when they are not kept there: read whole
     * (sequential, a fraction of a second) into a copy of their own, freed before the layout
     * is planned, so the sampling and the planning share the memory (the paper's offline
     * sampling has the topology in memory). Without room for them: the disk adjacency. */
    tg_adj_t *src = s->disk, *copy = NULL;
    if (s->sample_in_ram && tg_adj_disk_load_bytes(s->disk)) {
        /* The trace first, at about its size (the last generation's, else the pass's batches
         * at the largest measured batch): the copy takes only what the trace leaves, or it
         * fits and the sampling then finds no room for the trace. Without room for that
         * estimate (an upper bound) the trace grows as it goes, as without the copy. */
        uint64_t nb = (kp.num_seeds + kp.batch_size - 1) / kp.batch_size;
        nb = nb > kp.first_batch ? nb - kp.first_batch : 0;
        uint64_t ids = s->trace_hint ? s->trace_hint : nb * r->batch_nodes;
        if (tg_btrace_reserve(&g->tr, nb, ids) < 0) tg_err_clear();
        rc = tg_adj_disk_copy(&copy, s->disk, &r->budget, "diskgnn: indices while sampling");
        if (rc < 0 && rc != -ENOMEM) return rc;
        if (copy) {
            src = copy;
        } else if (!s->warned_disk_sampling) {
            s->warned_disk_sampling = 1;
            tg_log_info("diskgnn: no room to read the indices for sampling (%s): the samplers "
                        "read them from disk",
                        tg_errmsg());
        }
    }
    /* its own count of the index bytes: the run's counting wrapper would add them to the epoch
     * the trainer is running; the pass that trains these batches adds them to its own */
    tg_adj_t *view = NULL;
    tg_sloader_t *ld = NULL;
    if ((rc = tg_adj_counting_view(&view, src, esz, &g->index_bytes)) < 0) goto out;
    tg_sloader_opts_t lo = tg_pass_sloader_opts(&kp, view, r->sopts.sampler_threads, 2);
    if ((rc = tg_sloader_start(&ld, &lo)) < 0) goto out;
    g->num_batches = tg_sloader_num_batches(ld);
    g->count = g->num_batches > kp.first_batch ? g->num_batches - kp.first_batch : 0;
    /* the trace at about the last generation's size: growing it by half again would reserve
     * a third more than it needs */
    if ((rc = tg_btrace_reserve(&g->tr, g->count, s->trace_hint)) < 0) goto out;
    if ((rc = tg_btrace_sample(&g->tr, ld, g->count, g->spill, abort)) < 0) goto out;
    s->trace_hint = tg_btrace_accesses(&g->tr) + tg_btrace_accesses(&g->tr) / 32;
out:
    if (ld) tg_sloader_stop(ld);
    tg_adj_destroy(view);
    tg_adj_destroy(copy);
    return rc;
}

static int size_hot(tg_strategy_t *s, const tg_cs_trace_t *tr, const tg_layout_cfg_t *lc0);

/* No --disk-budget: the planner's rule (tg_cost_disk_budget_rule) on the generation's exact
 * bytes (its trace's accesses: every batch's distinct rows; the hot rows, chosen after, only
 * lower them) and the free disk where the packed
 * files go, now (the generation training, if any, already takes its share). A budget that holds
 * the epoch's bytes lets each batch read only its own rows (read amplification 1); the feature
 * file's size, the default before, read 2.1-2.9x on the shared bench. Per generation: an
 * evaluation's generation asks for fewer bytes than an epoch's. */
static uint64_t default_budget(tg_strategy_t *s, const gen_t *g)
{
    const tg_meta_t *m = &s->r->ds->meta;
    double feat = (double)tg_meta_expected_size(m, TG_FILE_FEATURES);
    double need = (double)tg_btrace_accesses(&g->tr) * (double)s->row_bytes;
    /* the layout's search (Algorithm 2) takes one batch a segment when the first batch's rows
     * times the batches fit: where the first batch is larger than the mean, that is the need */
    if (g->count && g->tr.off)
        need = fmax(need, (double)(g->tr.off[1] - g->tr.off[0]) * (double)g->count *
                              (double)s->row_bytes);
    struct statvfs sv;
    uint64_t b = 0;
    char a[32], f[32];
    if (statvfs(s->dir, &sv) == 0)
        b = tg_cost_disk_budget_rule(need, feat, (double)sv.f_bavail * (double)sv.f_frsize);
    else
        tg_log_warn("diskgnn: statvfs %s (the free disk for the packed files): %s; the disk "
                    "budget is the feature file's size",
                    s->dir, strerror(errno));
    if (!b) b = (uint64_t)feat;
    if (!s->budget_said++)
        tg_log_info("diskgnn: disk budget %s (default: the generation's bytes %s, at least the "
                    "feature file, at most 45%% of the free disk)",
                    tg_fmt_bytes(b, a, sizeof a), tg_fmt_bytes((uint64_t)need, f, sizeof f));
    return b;
}

static int gen_layout(tg_strategy_t *s, gen_t *g, tg_layout_t **L)
{
    tg_run_t *r = s->r;
    const dg_cfg_t *c = r->sopts.cfg;
    double t0 = tg_now();
    tg_layout_cfg_t lc = {.num_nodes = r->ds->meta.num_nodes,
                          .row_bytes = s->row_bytes,
                          .hot_rows = s->hot_filled ? 0 : s->hot_cap,
                          .hot_given = s->hot_filled ? s->hot_nodes : NULL,
                          .num_hot_given = s->hot_filled ? s->hot_rows : 0,
                          .segment = c->segment > 0 ? (uint32_t)c->segment : 0,
                          .seed = g->key.seed ^ (g->key.epoch * 0x9E3779B97F4A7C15ull),
                          .disk_budget = s->disk_budget ? s->disk_budget : default_budget(s, g),
                          .pack_bytes = s->pack_mem / 3,
                          /* unpadded chunks: every row of the packed file starts at a multiple
                           * of the row size, so the reader addresses it by row number */
                          .chunk_align = 1};
    tg_cs_trace_t tr = {.iters = (uint32_t)g->count, .off = g->tr.off, .ids = g->tr.ids};
    int rc;
    if (!s->hot_buf && !s->hot_out) {
        if ((rc = size_hot(s, &tr, &lc)) < 0) return rc;
        lc.hot_rows = s->hot_cap;
    }
    if ((rc = tg_layout_plan(L, &tr, &lc, &r->budget)) < 0) return rc;
    tg_layout_summary(*L, &g->sum);
    g->layout_s = tg_now() - t0;
    if (!s->hot_filled) {
        uint64_t nh = 0;
        const uint32_t *hot = tg_layout_hot(*L, &nh);
        if (nh) memcpy(s->hot_nodes, hot, nh * sizeof *hot);
        s->hot_rows = nh;
    }
    return 0;
}

/* Lays out the sampled batches and packs them (store/packfile's set: the maps, each input
 * row's row number in the packed file, then the rows), from the generation's trace (its ids freed
 * by the caller after). The first generation fills the hot rows in RAM too. */
static int gen_layout_pack(tg_strategy_t *s, gen_t *g, atomic_int *abort, const char *progress)
{
    tg_run_t *r = s->r;
    tg_layout_t *L = NULL;
    int rc = gen_layout(s, g, &L);
    tg_pack_set_opts_t po = {.dir = s->dir,
                             .who = "diskgnn",
                             .L = L,
                             .ids = g->tr.ids,
                             .off = g->tr.off,
                             .count = g->count,
                             .hot_nodes = s->hot_nodes,
                             .feat = s->feat,
                             .num_nodes = r->ds->meta.num_nodes,
                             .row_bytes = s->row_bytes,
                             .hot = s->hot_filled ? NULL : s->hot_buf,
                             .threads = TG_MAX(r->sopts.threads, 1),
                             .budget = &r->budget,
                             .abort = abort,
                             .progress = progress,
                             .io_stats = &s->pack_stats,
                             .rowcrc = r->rowcrc};
    if (rc == 0 && (rc = tg_pack_set_write(&g->ps, &po)) == 0) s->hot_filled = 1;
    tg_layout_destroy(L);
    return rc;
}

/* The pass's reader of generation g's packed file (tiergnn/pack.h): the hot rows through their
 * tier, the rest through store/extract with the executor's plan. */
static int reader_open(tg_strategy_t *s, const gen_t *g)
{
    int rc;
    if (!s->hot_tier && (rc = tg_pack_hot_tier_create(&s->hot_tier, "diskgnn-hot", s->hot_buf,
                                                      s->row_bytes, s->hot_rows)) < 0)
        return rc;
    tg_pack_reader_opts_t ro = {.plan = &s->plan,
                                .hot = s->hot_tier,
                                .normalize = s->normalize,
                                .budget = &s->r->budget,
                                .stats = &s->stats,
                                .who = "diskgnn"};
    return tg_pack_set_reader_open(&g->ps, &s->rd, &ro);
}

/* Samples, lays out and packs a generation for pass key k (copied). */
static int gen_prepare(tg_strategy_t *s, const tg_pass_t *k, atomic_int *abort,
                       const char *progress, gen_t **out)
{
    *out = NULL;
    gen_t *g;
    int rc = gen_new(s, &g);
    if (rc < 0) return rc;
    double t0 = tg_now();
    if ((rc = tg_pass_key_set(&g->key, k)) == 0 && (rc = gen_sample(s, g, abort)) == 0) {
        g->sample_wall_s = tg_now() - t0;
        rc = gen_layout_pack(s, g, abort, progress);
    }
    tg_btrace_free_ids(&g->tr); /* laid out: the offsets and times stay for the executor */
    if (rc < 0) {
        gen_destroy(s, g);
        return rc;
    }
    g->prep_s = tg_now() - t0;
    *out = g;
    return 0;
}

/* ---------------------------------------------------------------- the inspector
 *
 * engine/nextpass: started by a training pass for the pass after it, waited for by the next
 * pass, whatever it is, so that at most one generation is being prepared; its generation is
 * kept for the pass it was made for. */

/* engine/nextpass's prepare: the generation of pass p. */
static int inspect(void *ctx, const tg_pass_t *p, atomic_int *abort, void **item)
{
    gen_t *g = NULL;
    int rc = gen_prepare(ctx, p, abort, NULL, &g);
    *item = g;
    return rc;
}

/* engine/nextpass's drop: a generation prepared and never claimed. */
static void drop_gen(void *ctx, void *item)
{
    gen_destroy(ctx, item);
}

/* ---------------------------------------------------------------- the executor */

/* The pipeline's source: the generation's batches in order, read back from its spill file, each
 * with its map (its rows' numbers in the packed file) for the worker that follows. */
static int src_next(void *ctx, tg_pipe_t *P, tg_sloader_item_t **out)
{
    tg_strategy_t *s = ctx;
    gen_t *g = s->run;
    *out = NULL;
    if (tg_pipe_aborted(P)) return -ECANCELED;
    if (s->pos >= g->count) return 0;
    uint64_t n = g->tr.off[s->pos + 1] - g->tr.off[s->pos];
    int rc = tg_spill_read_item(g->spill, s->next_id, n, g->tr.sample_s[s->pos], out);
    if (rc > 0 &&
        (rc = tg_pack_map_read(&g->ps.map, s->pos, s->rec, s->rec_cap, &s->rec_len)) < 0) {
        tg_spill_item_free(*out);
        *out = NULL;
    }
    if (rc < 0) return rc;
    s->pos++;
    s->next_id++;
    return 1;
}

static void src_free(void *ctx, tg_sloader_item_t *it)
{
    (void)ctx;
    tg_spill_item_free(it);
}

/* The extraction's sort scratch counts in batch_bytes_peak like the matrices. */
static void reader_scratch(void *ctx, int64_t bytes)
{
    tg_pipe_count_bytes(ctx, bytes);
}

/* One batch: its map record (read by the source) as the packed file's rows, read into X by the
 * pass's reader: the hot rows from RAM, the chunk (consecutive rows: a few large reads) and the
 * cache rows (merged within the gap) from the packed file. */
static int dg_work(void *ctx, tg_pipe_t *P, int worker, const tg_batch_t *const *bb,
                   float *const *XX, int n)
{
    tg_strategy_t *s = ctx;
    (void)worker;
    if (n != 1) return tg_pipe_fail(P, tg_err(-EINVAL, "diskgnn: groups of one batch only"), NULL);
    /* no fail hook: the reader names the packed file before the pipeline gets the message */
    tg_extract_hooks_t hk = {.scratch = reader_scratch, .abort = tg_pipe_abort_flag(P), .ctx = P};
    int rc =
        tg_pack_reader_read(s->rd, bb[0]->id, s->rec, s->rec_len, bb[0]->num_nodes, XX[0], &hk);
    if (rc < 0 && rc != -ECANCELED) return tg_pipe_fail(P, rc, NULL);
    return rc;
}

/* ---------------------------------------------------------------- sizing and setup */

static uint64_t dg_min_bytes(const tg_dataset_t *ds, const tg_strategy_opts_t *so, char *why,
                             size_t why_len)
{
    const dg_cfg_t *c = so->cfg;
    /* per node: the layout's counts and marks while it plans */
    uint64_t fixed = 4 * DG_SPILL_BUF + DG_PACK_MIN + 8 * ds->meta.num_nodes;
    return tg_xpass_ahead_min_bytes(ds, &c->x, so->sampler_threads, fixed,
                                    "spill buffers, packing and layout", why, why_len);
}

static int dg_open(tg_strategy_t **out, tg_run_t *r, const tg_strategy_opts_t *so)
{
    *out = NULL;
    if (r->ds->meta.num_nodes >= UINT32_MAX)
        return tg_err(-EINVAL,
                      "strategy diskgnn: %llu nodes; the layout addresses at most "
                      "2^32 - 1",
                      (unsigned long long)r->ds->meta.num_nodes);
    tg_strategy_t *s = calloc(1, sizeof *s);
    if (!s) return tg_err(-ENOMEM, "strategy diskgnn: out of memory");
    s->r = r;
    s->normalize = so->normalize;
    tg_io_stats_init(&s->stats);
    tg_io_stats_init(&s->pack_stats);
    tg_nextpass_opts_t no = {
        .prepare = inspect, .drop = drop_gen, .ctx = s, .who = "diskgnn: the inspector"};
    int rc = tg_nextpass_open(&s->insp, &no);
    if (rc == 0)
        rc = tg_xpass_open_disk(r, tg_xpass_adj_queues(so->sampler_threads), &s->stats, &s->feat);
    s->disk = r->adj;
    if (rc == 0) {
        *out = s;
        return 0;
    }
    tg_nextpass_close(s->insp);
    free(s);
    return rc;
}

/* The executor's reading plan (store/extract, one reader, no feature buffer): reads in flight
 * and the merge gap from the device probe (--io-depth and --io-gap override), the chunk from
 * --chunk-rows or fitted to avail. */
static int setup_plan(tg_strategy_t *s, uint64_t avail)
{
    tg_run_t *r = s->r;
    const dg_cfg_t *c = r->sopts.cfg;
    char path[4096];
    tg_extract_plan_opts_t po;
    tg_xpass_ahead_plan_opts(r->ds, &c->x, r->sopts.sampler_threads, path, sizeof path, &po);
    po.avail = avail;
    return tg_extract_plan(&s->plan, &po);
}

/* Where the samplers read the indices: in RAM before the first epoch is sampled, when they fit
 * beside keep bytes (an estimate of the planning; size_hot checks again with the measured peak;
 * without --mem: when they fit in an eighth of the RAM, tg_xpass_adj_resident); else read into
 * RAM for each sampling only (--sampling-indices); else from disk, with Ginex's neighbour cache
 * when --neighbor-cache gives it bytes. */
static int setup_indices(tg_strategy_t *s, uint64_t keep)
{
    tg_run_t *r = s->r;
    const dg_cfg_t *c = r->sopts.cfg;
    int resident = 0, rc;
    if (c->x.resident_indices != 0 && c->sampling_indices != 1) {
        resident = tg_xpass_adj_resident(r, s->disk, keep, "diskgnn");
        if (resident < 0) return resident;
    }
    s->sample_in_ram = !resident && c->sampling_indices != 0 &&
                       (c->x.resident_indices != 0 || c->sampling_indices == 1);
    if (s->sample_in_ram) {
        char ib[32];
        tg_log_info("diskgnn: each epoch's sampling reads indices.bin (%s) into RAM for its own "
                    "time and frees it before the layout is planned",
                    tg_fmt_bytes(tg_adj_disk_file_bytes(s->disk), ib, sizeof ib));
    }
    /* Indices on disk: the samplers' index reads set the pace (a random read per neighbour
     * list, an epoch sampled ahead). --neighbor-cache gives Ginex's neighbour cache its bytes
     * before the hot rows; not automatic: what the planning leaves serves too few lists to
     * matter (bench/README.md, "DiskGNN: first measurements on the shared bench"). */
    if (!resident && c->x.neighbor_cache > 0 &&
        (uint64_t)c->x.neighbor_cache >= tg_ncache_min_bytes(r->ds) &&
        (rc = tg_xpass_ncache(r, s->disk, (uint64_t)c->x.neighbor_cache, &s->stats, "diskgnn")) < 0)
        return rc;
    return 0;
}

/* What the first pass takes from the avail bytes --mem leaves the strategy: the reader of the
 * largest batch (bn rows) on its read plan; set aside while generations come and go: the
 * packing (pack_mem: given, or a fifth of what the reader leaves, 1 MiB .. 256 MiB, no more than
 * the whole file with every row sent to a few places would take), a batch's map twice (the
 * executor's and the next generation's) and the locate arrays, the spill buffers of two
 * generations; and the least planning of an epoch of B batches: the trace (4 bytes per access)
 * and the layout's 8 bytes per node. dg_setup refuses a pass where they do not fit, and the cost
 * model refuses the strategy by the same sums (dg_first_fits). */
typedef struct {
    uint64_t avail, reader, pack_mem, set_aside, plan_min;
    uint64_t span;  /* the reader's largest merged read (its plan's span) */
    unsigned depth; /* and its reads in flight */
} dg_first_t;

static void dg_first_pass(const tg_extract_plan_t *plan, uint64_t avail, uint64_t bn, uint64_t B,
                          uint64_t N, size_t row, uint64_t feat_bytes, int64_t pack_mem,
                          dg_first_t *f)
{
    f->avail = avail;
    f->reader = tg_pack_reader_bytes(plan, bn);
    f->span = plan->span;
    f->depth = plan->depth;
    uint64_t left = avail > f->reader ? avail - f->reader : 0;
    f->pack_mem = pack_mem > 0
                      ? (uint64_t)pack_mem
                      : TG_MAX(DG_PACK_MIN, TG_MIN(TG_MIN(DG_PACK_MAX, left / 5), 8 * feat_bytes));
    /* what tg_pack reserves for partitions of pack_mem / 3 (the layout's cut): the two read
     * buffers, the staging of their targets and its read queue */
    uint64_t prow = f->pack_mem / 3 / TG_MAX(row, 1) + 1;
    tg_pack_part_t part = {.lo = 0, .hi = TG_MIN(prow, N), .ntargets = prow};
    f->set_aside = tg_pack_bytes(&part, 1, row, 3) + 2 * tg_pack_rec_bytes_max(bn) +
                   bn * tg_layout_loc_bytes(1) + 4 * DG_SPILL_BUF;
    f->plan_min = 4 * B * bn + 8 * N;
}

static int dg_first_fits(const dg_first_t *f)
{
    return f->reader <= f->avail && f->set_aside + f->plan_min <= f->avail - f->reader;
}

/* Sizes the fixed parts at the first pass: the reader's plan, the packing's memory, the maps;
 * the hot rows are sized when the first generation is laid out (size_hot), from what its
 * planning measured. */
static int dg_setup(tg_strategy_t *s, const tg_pass_t *p)
{
    tg_run_t *r = s->r;
    const dg_cfg_t *c = r->sopts.cfg;
    const tg_meta_t *m = &r->ds->meta;
    uint64_t N = m->num_nodes;
    char a[32], b[32], d[32], e[32], f[32];
    s->row_bytes = r->row_bytes;
    uint64_t limit = r->budget.limit;
    uint64_t avail = limit ? (limit > r->budget.used ? limit - r->budget.used : 0) : 0;
    int rc = setup_plan(s, avail);
    if (rc < 0) return rc;
    /* the reader of a pass (opened with it): the extraction, the row list and the sort scratch
     * of the largest batch */
    uint64_t bn = r->batch_nodes ? r->batch_nodes : TG_MIN(N, (uint64_t)1 << 16);
    /* the batches a generation holds: from the pass's first batch, or the next pass's where it
     * starts earlier (a run resumed mid-epoch); a rank's share starts every pass at its own */
    uint64_t B = p->batch_size ? (p->num_seeds + p->batch_size - 1) / p->batch_size : 1;
    uint64_t first = p->next ? TG_MIN(p->first_batch, p->next->first_batch) : p->first_batch;
    B = B > first ? B - first : 1;
    uint64_t feat_bytes = tg_meta_expected_size(m, TG_FILE_FEATURES);
    dg_first_t fp;
    dg_first_pass(&s->plan, avail, bn, B, N, s->row_bytes, feat_bytes, c->pack_mem, &fp);
    uint64_t reader = fp.reader;
    avail = avail > reader ? avail - reader : 0;
    /* 0: default_budget decides per generation, from its bytes */
    s->disk_budget = c->disk_budget > 0 ? (uint64_t)c->disk_budget : 0;
    s->pack_mem = fp.pack_mem;
    s->set_aside = fp.set_aside;
    uint64_t plan_min = fp.plan_min;
    if (limit && !dg_first_fits(&fp))
        return tg_err(-ENOMEM,
                      "diskgnn: --mem leaves %s after the model, batches and the reader (%s), "
                      "but packing (%s) and planning an epoch of %llu batches "
                      "(at least %s) need %s: raise --mem, lower --pack-mem, or use smaller "
                      "batches",
                      tg_fmt_bytes(avail, a, sizeof a), tg_fmt_bytes(reader, b, sizeof b),
                      tg_fmt_bytes(s->pack_mem, d, sizeof d), (unsigned long long)B,
                      tg_fmt_bytes(plan_min, e, sizeof e),
                      tg_fmt_bytes(s->set_aside + plan_min, f, sizeof f));
    s->set_aside += reader;
    /* the planning's estimate: the trace's 4 bytes and about 8 more per access, 8 per node
     * (bench/README.md, "DiskGNN: first measurements on the shared bench") */
    uint64_t est = s->set_aside + 12 * B * bn + 8 * N;
    if ((rc = setup_indices(s, limit ? est + est / 4 : 0)) < 0) return rc;
    tg_xpass_runtime_dir(r->ds, s->dir, sizeof s->dir);
    s->ready = 1;
    return 0;
}

/* Sizes the hot rows at the first generation's layout: a layout planned without them measures
 * the planning's peak; the budget keeps that (+25%) for the generations to come, the set-aside
 * parts, and, when they fit, the indices in RAM before any hot row (sampling an epoch ahead from
 * disk costs a random read per neighbour list: the preparation, not the reading, then sets the
 * pace; bench/README.md, "DiskGNN: first measurements on the shared bench"); the hot rows get
 * the rest. */
static int size_hot(tg_strategy_t *s, const tg_cs_trace_t *tr, const tg_layout_cfg_t *lc0)
{
    tg_run_t *r = s->r;
    const dg_cfg_t *c = r->sopts.cfg;
    uint64_t N = r->ds->meta.num_nodes, limit = r->budget.limit;
    char a[32], b[32], d[32], e[32];
    uint64_t hot_bytes, peak = 0;
    if (limit) {
        tg_layout_cfg_t lc = *lc0;
        lc.hot_rows = 0;
        lc.hot_given = NULL;
        lc.num_hot_given = 0;
        tg_layout_t *L;
        int rc = tg_layout_plan(&L, tr, &lc, &r->budget);
        if (rc < 0) return tg_err_prefix(rc, "diskgnn: planning the first epoch's layout");
        tg_layout_summary_t sm;
        tg_layout_summary(L, &sm);
        peak = sm.plan_peak_bytes;
        tg_layout_destroy(L);
        /* the planning of a generation and, before it, its sampling with the indices read into
         * RAM take turns on the same memory */
        uint64_t transient = peak + peak / 4;
        if (s->sample_in_ram) transient = TG_MAX(transient, tg_adj_disk_load_bytes(s->disk));
        uint64_t keep = s->set_aside + transient;
        uint64_t avail = limit > r->budget.used ? limit - r->budget.used : 0;
        uint64_t rest = avail > keep ? avail - keep : 0;
        if (c->x.resident_indices != 0 && c->sampling_indices != 1) {
            uint64_t ib = tg_adj_disk_load_bytes(s->disk);
            if (ib && ib <= rest) {
                int lr = tg_xpass_adj_resident(r, s->disk, keep + (rest - ib), "diskgnn");
                if (lr < 0) return lr;
                if (lr > 0) rest -= ib;
            }
        }
        hot_bytes = rest;
    } else {
        hot_bytes = tg_phys_mem_bytes() / 8;
    }
    if (c->hot_cache >= 0) hot_bytes = TG_MIN(hot_bytes, (uint64_t)c->hot_cache);
    /* a row and its node id */
    s->hot_cap = TG_MIN(hot_bytes / (s->row_bytes + sizeof(uint32_t)), N);
    uint64_t mine = s->hot_cap * (s->row_bytes + sizeof(uint32_t));
    int rc = tg_budget_reserve(&r->budget, mine, "diskgnn: hot rows");
    if (rc < 0) return rc;
    s->fixed_bytes = mine;
    s->hot_buf = malloc(s->hot_cap * s->row_bytes + 1);
    s->hot_nodes = malloc(s->hot_cap * sizeof(uint32_t) + 1);
    if (!s->hot_buf || !s->hot_nodes)
        return tg_err(-ENOMEM, "diskgnn: out of memory for %llu hot rows",
                      (unsigned long long)s->hot_cap);
    tg_log_info("diskgnn: hot rows %llu (%s, %.1f%% of the features); planning an epoch's "
                "layout peaked at %s; packing partitions of %s; disk budget %s per generation; "
                "%s; runtime files in %s",
                (unsigned long long)s->hot_cap, tg_fmt_bytes(mine, a, sizeof a),
                N ? 100.0 * (double)s->hot_cap / (double)N : 0.0, tg_fmt_bytes(peak, b, sizeof b),
                tg_fmt_bytes(s->pack_mem, d, sizeof d), tg_fmt_bytes(lc0->disk_budget, e, sizeof e),
                c->reuse_samples > 1 ? "samples reused" : "fresh samples every epoch", s->dir);
    return 0;
}

/* The inspector stops (its generation is dropped): the run closes the adjacency next. */
static void dg_drain(tg_strategy_t *s)
{
    tg_nextpass_cancel(s->insp);
}

static void dg_close(tg_strategy_t *s)
{
    if (!s) return;
    tg_nextpass_close(s->insp);
    gen_destroy(s, s->cur);
    tg_pack_reader_close(s->rd);
    tg_tier_destroy(s->hot_tier);
    if (s->fixed_bytes) tg_budget_release(&s->r->budget, s->fixed_bytes);
    if (s->rec_cap) tg_budget_release(&s->r->budget, s->rec_cap);
    free(s->rec);
    free(s->hot_buf);
    free(s->hot_nodes);
    tg_io_file_close(s->feat);
    free(s);
}

/* ---------------------------------------------------------------- one pass */

static int rec_reserve(tg_strategy_t *s, const gen_t *g)
{
    if (g->ps.map.rec_max <= s->rec_cap) return 0;
    uint64_t add = g->ps.map.rec_max - s->rec_cap;
    int rc = tg_budget_reserve(&s->r->budget, add, "diskgnn: a batch's map");
    if (rc < 0) return rc;
    unsigned char *n = realloc(s->rec, g->ps.map.rec_max);
    if (!n) {
        tg_budget_release(&s->r->budget, add);
        return tg_err(-ENOMEM, "diskgnn: out of memory for a batch's map");
    }
    s->rec = n;
    s->rec_cap = g->ps.map.rec_max;
    return 0;
}

/* A training generation serves K epochs (--reuse-samples K). */
static int reuse_more_ok(int training, uint64_t K, const gen_t *g)
{
    return g && training && K > 1 && (uint64_t)g->uses < K;
}

/* The generation that serves pass p: the one the inspector prepared for it, the kept one again
 * (--reuse-samples), or one prepared now. A training pass's replaces the kept one. */
static int pass_generation(tg_strategy_t *s, const tg_pass_t *p, uint64_t K, gen_t **out,
                           int *prepared_now)
{
    int training = p->allow_out_of_order != 0, rc;
    gen_t *g = NULL;
    *out = NULL;
    *prepared_now = 0;
    if ((g = tg_nextpass_claim(s->insp, p))) {
        /* prepared by the inspector during the pass before */
    } else if (training && K > 1 && s->cur && (uint64_t)s->cur->uses < K &&
               tg_pass_key_match(&s->cur->key, p, 1)) {
        g = s->cur; /* --reuse-samples: the same batches again */
        s->cur = NULL;
    } else {
        char label[64];
        snprintf(label, sizeof label, "diskgnn: packing %s",
                 training ? "an epoch's batches" : "the evaluation's batches");
        int show = isatty(STDERR_FILENO) && tg_log_level() >= TG_LOG_INFO;
        if ((rc = gen_prepare(s, p, NULL, show ? label : NULL, &g)) < 0) return rc;
        *prepared_now = 1;
    }
    /* an evaluation's generation is its own */
    if (training) {
        gen_destroy(s, s->cur);
        s->cur = NULL;
    }
    *out = g;
    return 0;
}

/* A pass's own figures (tg_pass_stats_t.own): counts, sums and settings, so that passes add;
 * the read amplification is derived when it is reported (tg_diskgnn_figures). */
typedef struct {
    uint64_t passes, prepared_now, reused; /* passes, of which prepared at their start, reused */
    double wait_s, sample_s, layout_s, pack_s, prep_s;
    uint64_t read_bytes, write_bytes;
    uint64_t disk_bytes, segment;          /* settings: the larger */
    uint64_t est_read_bytes, needed_bytes; /* the layout's estimate of a pass's reads, and need */
} dg_own_t;
TG_PASS_OWN_FITS(dg_own_t);

/* The pass's figures: the reader's and the samplers' I/O, the hot rows and the packed file as
 * its two tiers, and the generation's preparation in its own block. */
static void pass_report(tg_strategy_t *s, const gen_t *g, int prepared_now, double insp_wait,
                        tg_pass_stats_t *st)
{
    tg_xpass_ncache_take(s->disk, st);
    tg_io_counts_t io;
    tg_io_stats_take(&s->stats, &io);
    st->have_io = st->have_io_wait = 1;
    st->io_requests = io.io_requests;
    st->io_read_bytes = io.io_read_bytes;
    st->io_wait_s = io.io_wait_s;
    /* the reader's tiers: the hot rows (every row is looked up there first), the packed file */
    tg_tier_stats_t ts[2];
    int nt = tg_pack_reader_tier_stats(s->rd, ts, 2, 1);
    st->have_cache = 1;
    st->cache_lookups = ts[0].lookups;
    st->cache_hits = ts[0].hits;
    st->ntiers = 0;
    for (int t = 0; t < nt && t < 2; t++)
        (void)tg_pass_tier_add(st, ts[t].name, ts[t].lookups, ts[t].hits, ts[t].bytes);
    /* the preparation's reads (sampling, packing) are the epoch's too */
    tg_io_counts_t pk;
    tg_io_stats_take(&s->pack_stats, &pk);
    st->io_requests += pk.io_requests;
    st->io_read_bytes += pk.io_read_bytes;
    dg_own_t o = {.passes = 1,
                  .prepared_now = prepared_now != 0,
                  .reused = g->uses > 1,
                  .wait_s = insp_wait,
                  .sample_s = g->sample_wall_s,
                  .layout_s = g->layout_s + g->ps.map_s,
                  .pack_s = g->ps.pack_s,
                  .prep_s = g->prep_s,
                  .read_bytes = g->ps.pst.read_bytes,
                  .write_bytes = g->ps.pst.file_bytes,
                  .disk_bytes = g->sum.disk_bytes,
                  .segment = g->sum.segment,
                  .est_read_bytes = g->sum.read_bytes,
                  .needed_bytes = g->sum.needed_bytes};
    tg_pass_own_put(st, &o, sizeof o);
}

static void dg_own_add(tg_pass_stats_t *sum, const tg_pass_stats_t *add)
{
    dg_own_t a, b;
    tg_pass_own_get(sum, &a, sizeof a);
    tg_pass_own_get(add, &b, sizeof b);
    a.passes += b.passes;
    a.prepared_now += b.prepared_now;
    a.reused += b.reused;
    a.wait_s += b.wait_s;
    a.sample_s += b.sample_s;
    a.layout_s += b.layout_s;
    a.pack_s += b.pack_s;
    a.prep_s += b.prep_s;
    a.read_bytes += b.read_bytes;
    a.write_bytes += b.write_bytes;
    a.disk_bytes = TG_MAX(a.disk_bytes, b.disk_bytes);
    a.segment = TG_MAX(a.segment, b.segment);
    a.est_read_bytes += b.est_read_bytes;
    a.needed_bytes += b.needed_bytes;
    tg_pass_own_put(sum, &a, sizeof a);
}

int tg_diskgnn_figures(const tg_pass_stats_t *st, tg_diskgnn_figures_t *f)
{
    dg_own_t o;
    tg_pass_own_get(st, &o, sizeof o);
    memset(f, 0, sizeof *f);
    if (!o.passes) return -ENOENT;
    f->passes = o.passes;
    f->prepared_now = o.prepared_now > 0;
    f->reused = o.reused == o.passes;
    f->wait_s = o.wait_s;
    f->sample_s = o.sample_s;
    f->layout_s = o.layout_s;
    f->pack_s = o.pack_s;
    f->prep_s = o.prep_s;
    f->read_bytes = o.read_bytes;
    f->write_bytes = o.write_bytes;
    f->disk_bytes = o.disk_bytes;
    f->segment = o.segment;
    /* as the layout computes it (tg_layout_summary_t.read_amp): read / needed, 0 when nothing is
     * needed */
    f->read_amp_est = o.needed_bytes ? (double)o.est_read_bytes / (double)o.needed_bytes : 0;
    return 0;
}

/* The object "preprocess" and the human line's clause on the generation's preparation. */
static void dg_report(const tg_pass_stats_t *st, tg_json_t *j, char *line, size_t len)
{
    tg_diskgnn_figures_t f;
    if (tg_diskgnn_figures(st, &f) < 0) return;
    if (j) {
        char buf[512];
        snprintf(buf, sizeof buf,
                 "{\"at_start\":%s,\"reused\":%s,\"wait_s\":%.6f,\"sample_s\":%.6f,"
                 "\"layout_s\":%.6f,\"pack_s\":%.6f,\"total_s\":%.6f,\"read_bytes\":%llu,"
                 "\"write_bytes\":%llu,\"disk_bytes\":%llu,\"segment\":%llu,"
                 "\"read_amp_estimate\":%.6f}",
                 f.prepared_now ? "true" : "false", f.reused ? "true" : "false", f.wait_s,
                 f.sample_s, f.layout_s, f.pack_s, f.prep_s, (unsigned long long)f.read_bytes,
                 (unsigned long long)f.write_bytes, (unsigned long long)f.disk_bytes,
                 (unsigned long long)f.segment, f.read_amp_est);
        tg_json_raw(j, "preprocess", buf);
    }
    if (!line) return;
    size_t l = strlen(line);
    if (l + 1 >= len) return;
    if (f.reused)
        snprintf(line + l, len - l, "; the samples and packing of an earlier epoch (%.2f s then)",
                 f.prep_s);
    else if (f.prepared_now)
        snprintf(line + l, len - l, "; sampled and packed at its start in %.2f s", f.prep_s);
    else
        snprintf(line + l, len - l,
                 "; sampled and packed during the epoch before (%.2f s; waited %.2f s)", f.prep_s,
                 f.wait_s);
}

/* Reads the hot rows back into RAM after an evaluation released them (store/packfile: the rows
 * of hot_nodes, the order the packed files give them, from the feature file). */
static int hot_reload(tg_strategy_t *s)
{
    if (!s->hot_out) return 0;
    tg_budget_t *bg = &s->r->budget;
    uint64_t bytes = s->hot_cap * s->row_bytes;
    int rc = tg_budget_reserve(bg, bytes, "diskgnn: hot rows");
    if (rc < 0) return rc;
    s->fixed_bytes += bytes;
    if (!(s->hot_buf = malloc(bytes + 1)))
        return tg_err(-ENOMEM, "diskgnn: out of memory for %llu hot rows",
                      (unsigned long long)s->hot_cap);
    rc = tg_pack_hot_read(s->feat, s->hot_nodes, s->hot_rows, s->row_bytes, s->hot_buf, bg,
                          &s->pack_stats, s->r->rowcrc);
    if (rc < 0) return tg_err_prefix(rc, "diskgnn: reading the hot rows again");
    s->hot_out = 0;
    return 0;
}

/* Before an evaluation. The inspector may be preparing the next training pass's generation on
 * its thread, reserving budget as it goes: it is waited for (its generation kept for that pass,
 * which no longer waits), so that it does not compete with a layer-wise pass's row files for
 * the budget. Then the hot rows' RAM goes back to the budget, so that those row files keep that
 * many rows resident; their node list stays (the packed files' layout) and the next pass reads
 * them again (hot_reload). The rows equal the file's, so training results do not change. */
static void dg_evaluating(tg_strategy_t *s, int layerwise)
{
    /* a sampled evaluation pass reads through the same caches as training */
    if (!layerwise) return;
    if (!s->ready || s->dead) return;
    if (tg_nextpass_wait(s->insp) < 0)
        tg_log_warn("diskgnn: preparing the next epoch's batches: %s; they are prepared again at "
                    "its start",
                    tg_errmsg());
    if (!s->hot_filled || !s->hot_buf) return;
    tg_tier_destroy(s->hot_tier); /* over hot_buf; no reader is open between passes */
    s->hot_tier = NULL;
    free(s->hot_buf);
    s->hot_buf = NULL;
    uint64_t bytes = s->hot_cap * s->row_bytes;
    tg_budget_release(&s->r->budget, bytes);
    s->fixed_bytes -= bytes;
    s->hot_out = 1;
}

/* One pass: the generation of its batches (prepared by the inspector during the pass before,
 * or now), the inspector started on the next training pass's, then the executor reads the
 * batches back in order and gathers their rows on the pipeline's worker. */
static int dg_pass(tg_strategy_t *s, const tg_pass_t *p, tg_pass_stats_t *st)
{
    memset(st, 0, sizeof *st);
    st->next_batch = p->first_batch;
    if (s->dead) return tg_err(-ECANCELED, "diskgnn: an earlier pass failed");
    tg_run_t *r = s->r;
    const dg_cfg_t *c = r->sopts.cfg;
    int rc;
    if (!s->ready && (rc = dg_setup(s, p)) < 0) return rc; /* the first pass sizes the parts */
    int training = p->allow_out_of_order != 0, prepared_now;
    uint64_t K = (uint64_t)TG_MAX(c->reuse_samples, 1);
    double waited0 = tg_now();
    rc = tg_nextpass_wait(s->insp);
    double insp_wait = tg_now() - waited0;
    gen_t *g = NULL;
    if (rc < 0 || (rc = pass_generation(s, p, K, &g, &prepared_now)) < 0) {
        s->dead = 1;
        return rc;
    }
    s->run = g;
    if ((rc = hot_reload(s)) < 0 || (rc = reader_open(s, g)) < 0 || (rc = rec_reserve(s, g)) < 0 ||
        (rc = tg_spill_rewind(g->spill)) < 0)
        goto done;
    g->uses++;
    /* the next training pass, prepared while this one trains */
    if (training && p->next && !reuse_more_ok(training, K, g)) {
        if ((rc = tg_nextpass_start(s->insp, p->next)) < 0) goto done;
    }
    s->pos = 0;
    s->next_id = p->first_batch;
    /* the index bytes its batches asked for, sampled at its start or during the pass before,
     * are this pass's (once: a reused generation's batches are sampled once) */
    if (g->uses == 1) atomic_fetch_add(&r->index_bytes, atomic_load(&g->index_bytes));
    tg_pipe_source_t src = {
        .next = src_next, .item_free = src_free, .num_batches = g->num_batches, .ctx = s};
    tg_pipe_opts_t po = {.pass = p,
                         .source = &src,
                         .adj = r->adj,
                         .dim = r->ds->meta.feat_dim,
                         .workers = 1,
                         .group = 1,
                         .work = dg_work,
                         .work_ctx = s,
                         .queue_depth = (int)c->x.queue_depth,
                         .in_order = 1};
    rc = tg_pipe_run(&po, st);
    pass_report(s, g, prepared_now, insp_wait, st);
done:
    s->run = NULL;
    tg_pack_reader_close(s->rd);
    s->rd = NULL;
    if (reuse_more_ok(training, K, g) && rc >= 0)
        s->cur = g; /* kept for the next epochs (--reuse-samples) */
    else
        gen_destroy(s, g); /* its files go now */
    if (rc < 0) s->dead = 1;
    return rc;
}

static int dg_in_flight(const tg_strategy_opts_t *so)
{
    /* one batch gathered by the executor, queue-depth waiting or training */
    return 1 + (int)((const dg_cfg_t *)so->cfg)->x.queue_depth;
}

/* The cost model: each epoch is sampled ahead (indices read whole into RAM when the budget
 * holds them, else list by list from disk), laid out and packed: features.bin read once
 * sequentially, the epoch's rows written to the packed file, then read back by batch in large
 * runs with the layout's amplification (the profile's estimate at the disk budget). The CPU
 * copies every row twice (packing, then into X) beside sampling and training; the first epoch
 * samples and packs before it trains. Two generations live on disk at once. */
/* The run's first pass at the bytes the budget leaves the strategy beside its matrices: the
 * reader planned at that size from the profile's probe (as setup_plan does from the run's), the
 * largest batch's rows (its input matrix is f32 with the budget plan's margin), the epoch's
 * batches, the default options. */
static void dg_first_predict(const tg_cost_inputs_t *in, double caches, dg_first_t *f)
{
    const tg_cost_dataset_t *d = &in->data;
    uint64_t N = d->nodes, avail = (uint64_t)caches;
    uint64_t bn = (uint64_t)((double)in->run.matrix_bytes / (d->feat_dim * 4.0 * 1.15)) + 1;
    size_t row = (size_t)d->feat_dim * d->dtype_bytes;
    tg_extract_plan_opts_t po;
    tg_extract_plan_opts_default(&po);
    po.num_nodes = N;
    po.feat_dim = d->feat_dim;
    po.dtype = d->dtype_bytes == 2 ? TG_F16 : TG_F32;
    po.extractors = 1;
    po.featbuf = 0;
    po.probe = &in->machine.probe;
    po.avail = avail;
    po.other_transient = tg_xpass_adj_transient(tg_xpass_adj_queues(in->run.sampler_threads));
    tg_extract_plan_t plan;
    if (tg_extract_plan(&plan, &po) < 0) {
        /* inputs tg_cost_check passed cannot fail here; a reader that cannot be planned does
         * not fit */
        memset(f, 0, sizeof *f);
        f->reader = UINT64_MAX;
        return;
    }
    dg_first_pass(&plan, avail, bn, TG_MAX(in->prof.batches, 1), N, row,
                  (uint64_t)tg_cost_feat_bytes(in), 0, f);
}

/* One training epoch: the packed rows read back (need bytes, amplified) and copied into X by
 * the executor, the model trained; with pack_next, the next epoch sampled, features.bin read
 * once, its rows packed and written (copied a second time) beside it. span and depth: the
 * executor's reader's largest merged read and its reads in flight. */
static void dg_epoch(const tg_cost_inputs_t *in, double need, double ampl, double span,
                     unsigned depth, int idx_ram, int pack_next, tg_cost_pred_t *p)
{
    const tg_cost_machine_t *m = &in->machine;
    double idx = (double)in->data.edges * in->data.index_bytes, feat = tg_cost_feat_bytes(in);
    double idx_reads =
        pack_next && !idx_ram ? in->prof.index_reads_per_batch * (double)in->prof.batches : 0;
    double seq = need * ampl + (pack_next ? feat + (idx_ram ? idx : 0) : 0);
    p->read_bytes = seq + idx_reads * 512;
    p->io_s = tg_cost_seq_s(m, seq + (pack_next ? need : 0)) +
              tg_cost_random_s(m, idx_reads, idx_reads * 512, tg_cost_best_depth(m));
    p->sample_s = pack_next ? tg_cost_sample_s(in) : 0;
    /* one executor (workers = 1) copies each batch's hot rows into X at the gather rate and
     * reads its packed runs, whose rows pass store/extract's staging on their way to X at the
     * rate rows leave a feature buffer (narrow's 2.2M packed rows of 128 bytes took 0.8 s of its
     * CPU, the buffer rate's 0.78 s, the gather rate's 0.49 s; ram's 7.8M hot rows 5.4-6.5 s
     * beside the steps, the gather rate's 4.1 s over the 0.63 a gathering thread keeps there).
     * io/ hands each merged read over as it completes and the executor copies its rows then,
     * while the others are in flight: of a batch's k reads the first wave (depth of them, all
     * where k <= depth) is waited for, the rest stream beside the copies (wide's 49 MB batches,
     * about 47 reads of 1 MiB: 0.42 s of the executor's 3.7 s waiting for 2.3 GB; narrow's
     * 2.5 MB, 2-3 reads: 0.33 s for 0.30 GB, all of it) */
    double packed = need / tg_cost_row_bytes(in), acc = tg_cost_accesses(in);
    double exec_cpu = fmax(acc - packed, 0) / m->gather_rows_per_s +
                      tg_cost_buffer_gather_s(in, fmin(packed, acc), 0);
    p->gather_s = (pack_next ? tg_cost_gather_s(in) : 0) + exec_cpu;
    p->compute_s = tg_cost_compute_s(in);
    p->prep_s = 0;
    p->stage_cpu_s = exec_cpu;
    double reads = tg_cost_seq_s(m, need * ampl), B = (double)TG_MAX(in->prof.batches, 1);
    double k = fmax(need * ampl / B / fmax(span, 1), 1), wave = fmin(fmax(depth, 1), k) / k;
    p->stage_s = reads * wave + fmax(reads * (1 - wave), exec_cpu);
    tg_cost_overlap(in, p);
}

/* Epochs 1 .. E-1 pack the next epoch while they train, the last packs none (engine/nextpass:
 * nothing is prepared past the run's end); the first samples and packs its own before it
 * trains. The packing is a chain beside the training (the next epoch sampled on the sampler
 * threads, then features.bin read beside the copies of every row and the writes of the packed
 * file: pack), and an epoch starts when its generation is packed: each epoch after the first
 * waits for what the packing took beyond the epoch before (pk, an epoch that packs), so an epoch
 * that packs lasts at least the packing, and the last lasts its own training and that wait
 * (below). steady_s is the mean of epochs 2 .. E (what a bench times), epoch_s
 * the run's mean. */
static int dg_predict(const tg_cost_inputs_t *in, tg_cost_pred_t *p)
{
    const tg_cost_machine_t *m = &in->machine;
    double caches = tg_cost_cache_bytes(in, tg_cost_matrices(&tg_strategy_diskgnn, in));
    double idx = (double)in->data.edges * in->data.index_bytes, feat = tg_cost_feat_bytes(in);
    double ampl = in->prof.layout_read_ampl > 0 ? in->prof.layout_read_ampl : 1;
    double budget = in->run.disk_budget ? (double)in->run.disk_budget : feat;
    int idx_ram = caches >= idx;
    dg_first_t f;
    /* at the first pass the disk adjacency it opened is off too */
    dg_first_predict(in, fmax(caches - tg_cost_open_bytes(in), 0), &f);
    /* the hot rows (size_hot): what the reader, the set-aside parts, the planning (its least,
     * +25%) or the indices read for sampling, and the resident indices leave, the most used
     * rows of the first generation, whose share of the accesses the profile's degree coverage
     * stands in for; the packed file holds the others (the ram workload: every row hot,
     * nothing read) */
    double rest = (double)f.avail - (double)f.reader - (double)f.set_aside -
                  fmax(1.25 * (double)f.plan_min, idx_ram ? idx : 0);
    if (idx_ram && rest >= idx) rest -= idx;
    double N = (double)in->data.nodes, row = tg_cost_row_bytes(in);
    double hot = fmin(fmax(rest, 0) / (row + 4), N);
    double cover = hot >= N ? 1 : tg_cost_curve_at(&in->prof.hot_degree, hot);
    double need = tg_cost_accesses(in) * (1 - cover) * row;
    tg_cost_pred_t pk = {0}, last = {0};
    dg_epoch(in, need, ampl, (double)f.span, f.depth, idx_ram, 1, &pk);
    dg_epoch(in, need, ampl, (double)f.span, f.depth, idx_ram, 0, &last);
    /* store/pack's reader thread reads features.bin while the packer copies the rows already
     * read and writes them: the packing lasts its disk time or its copies, whichever is longer
     * (few: 0.78 s to read 614 MB and write 84 MB, whose copies alone take 0.2 s) */
    double sample = tg_cost_sample_s(in) / in->run.sampler_threads, copies = tg_cost_gather_s(in);
    double pack_cpu = sample + copies;
    double pack = sample + fmax(tg_cost_seq_s(m, feat + need), copies);
    /* epoch 1 trains after packing its own (first); an epoch that packs the next lasts the
     * pair (pk: the packing and the training on one disk and the cores); the last trains
     * alone, after waiting for what the packing took beyond the epoch before. That epoch trains
     * at about half its pace while the packing runs (few: 0.87 s beside a packing of 0.99 s,
     * 0.4 s alone; narrow: 2.04 s beside 2.19 s, 1.5 s alone; wide: 7.2 s, the pair's end,
     * beside 5.9 s, 4.4 s alone), so the last waits for the pair's end beyond twice its own
     * training */
    double first = pack, alone = last.steady_s, E = in->run.epochs;
    if (pack > pk.stage_s) pk.stage_s = pack, pk.stage_cpu_s = pack_cpu;
    tg_cost_overlap(in, &pk);
    double pk_train = fmax(fmin(2 * alone, pk.steady_s), alone);
    if (E >= 2) last.steady_s += fmax(pk.steady_s - pk_train, 0);
    double w = E >= 2 ? (E - 2) / (E - 1) : 0;
    /* the timed epochs' mean, term by term */
    p->read_bytes = w * pk.read_bytes + (1 - w) * last.read_bytes;
    p->io_s = w * pk.io_s + (1 - w) * last.io_s;
    p->sample_s = w * pk.sample_s + (1 - w) * last.sample_s;
    p->gather_s = w * pk.gather_s + (1 - w) * last.gather_s;
    p->compute_s = pk.compute_s;
    p->cpu_s = w * pk.cpu_s + (1 - w) * last.cpu_s;
    p->steady_s = w * pk.steady_s + (1 - w) * last.steady_s;
    p->epoch_s = E >= 2 ? (first + pk_train + (E - 2) * pk.steady_s + last.steady_s) / E
                        : first + last.steady_s;
    p->prep_s = p->epoch_s - p->steady_s;
    if (!dg_first_fits(&f))
        tg_cost_infeasible(p,
                           "its first pass needs %.1f MiB (reader %.1f, packing and maps %.1f, "
                           "planning %llu batches %.1f), --mem leaves it %.1f MiB",
                           ((double)f.reader + (double)f.set_aside + (double)f.plan_min) / 1048576,
                           (double)f.reader / 1048576, (double)f.set_aside / 1048576,
                           (unsigned long long)in->prof.batches, (double)f.plan_min / 1048576,
                           (double)f.avail / 1048576);
    else if ((double)in->run.disk_free < 2 * fmin(budget, need * ampl))
        tg_cost_infeasible(p, "needs %.1f GiB of free disk for two packed epochs, %.1f GiB free",
                           2 * fmin(budget, need * ampl) / 1073741824.0,
                           (double)in->run.disk_free / 1073741824.0);
    else
        snprintf(p->why, sizeof p->why,
                 "packs each epoch: file read once, %.0fk hot rows serve %.0f%%, read "
                 "amplification %.2f, indices %s",
                 hot / 1e3, 100 * cover, ampl, idx_ram ? "in RAM while sampling" : "from disk");
    return 0;
}

const tg_strategy_i tg_strategy_diskgnn = {
    .info = {.name = "diskgnn",
             .summary = "DiskGNN: each epoch sampled ahead, its rows packed per batch (hot rows "
                        "in RAM, MinHash-ordered segment caches, packed chunks), the next epoch "
                        "packed while this one trains",
             .caps = TG_STRAT_EXACT | TG_STRAT_NEXT_PASS,
             .opts = dg_opts,
             .num_opts = sizeof dg_opts / sizeof dg_opts[0],
             .config_size = sizeof(dg_cfg_t),
             .example_args = "--mem 64M --hot-cache 20K --chunk-rows 64"},
    .min_bytes = dg_min_bytes,
    .open = dg_open,
    .pass = dg_pass,
    .close = dg_close,
    .drain = dg_drain,
    .batches_in_flight = dg_in_flight,
    .predict = dg_predict,
    .evaluating = dg_evaluating,
    .report = dg_report,
    .own_add = dg_own_add,
};
