/* Strategy "mmap": the papers' tuned PyG+ baseline. indices.bin and features.bin are mapped
 * read-only with readahead off (MADV_RANDOM), so every touched page is read on its own by a page
 * fault and kept in the page cache, which only a cgroup limit bounds. Only indptr is reserved
 * against --mem. Sampler threads (tg_sloader_t) sample; each gathers its batch's rows with a pool
 * of gather_threads threads, so that many page faults are outstanding at once. The pool is shared
 * by the sampler threads one batch at a time (tg_pool_for is not reentrant). */
#include "../engine-impl.h"
#include "../plan_cost.h"

#include <pthread.h>
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Options (tg_strategy_info_t): int64_t fields at the table's offsets. */
typedef struct {
    int64_t gather_threads; /* 0 = the compute threads */
} mmap_cfg_t;

static const tg_strategy_opt_t mmap_opts[] = {
    {.name = "gather-threads",
     .kind = TG_SOPT_INT,
     .def = 0,
     .min = 0,
     .max = 1024,
     .offset = offsetof(mmap_cfg_t, gather_threads),
     .meta = "G",
     .help = "threads gathering a batch's rows, many page faults at once (default: --threads)"},
};

struct tg_strategy {
    tg_run_t *r;
    tg_strategy_opts_t o;
    tg_pool_t *gather_pool;
    pthread_mutex_t mu; /* one batch gathers on the pool at a time */
};

static uint64_t mmap_min_bytes(const tg_dataset_t *ds, const tg_strategy_opts_t *o, char *why,
                               size_t why_len)
{
    (void)o;
    uint64_t indptr = (ds->meta.num_nodes + 1) * sizeof(uint64_t);
    char a[32];
    snprintf(why, why_len, "adjacency indptr %s (mapped pages live in the page cache)",
             tg_fmt_bytes(indptr, a, sizeof a));
    return indptr;
}

static int mmap_open(tg_strategy_t **out, tg_run_t *r, const tg_strategy_opts_t *o)
{
    *out = NULL;
    int rc = tg_adj_mmap_open(&r->adj, r->ds, &r->budget);
    if (rc < 0) return rc;
    tg_store_opts_t so = {.normalize = o->normalize, .budget = &r->budget, .rowcrc = r->rowcrc};
    if ((rc = tg_store_mmap_open(&r->store, r->ds, &so)) < 0) return rc;
    tg_strategy_t *s = calloc(1, sizeof *s);
    if (!s) return tg_err(-ENOMEM, "strategy mmap: out of memory");
    s->r = r;
    s->o = *o;
    pthread_mutex_init(&s->mu, NULL);
    const mmap_cfg_t *c = o->cfg;
    int gt = c->gather_threads > 0 ? (int)c->gather_threads : TG_MAX(o->threads, 1);
    if ((rc = tg_pool_create(&s->gather_pool, gt)) < 0) {
        pthread_mutex_destroy(&s->mu);
        free(s);
        return rc;
    }
    *out = s;
    return 0;
}

static int mmap_gather(void *ctx, const tg_batch_t *b, float *X)
{
    tg_strategy_t *s = ctx;
    pthread_mutex_lock(&s->mu);
    int rc = tg_store_gather_parallel(s->r->store, s->gather_pool, b->nodes, b->num_nodes, X);
    pthread_mutex_unlock(&s->mu);
    return rc;
}

static int mmap_pass(tg_strategy_t *s, const tg_pass_t *p, tg_pass_stats_t *st)
{
    /* One batch ready per sampler thread: a gathered matrix can be large, and the page cache,
     * not our buffers, is where mmap keeps data. */
    return tg_gather_pass(s->r, p, s->r->sopts.sampler_threads, 1, mmap_gather, s, st);
}

static void mmap_close(tg_strategy_t *s)
{
    if (!s) return;
    tg_pool_destroy(s->gather_pool);
    pthread_mutex_destroy(&s->mu);
    free(s);
}

static int mmap_in_flight(const tg_strategy_opts_t *o)
{
    return tg_gather_pass_in_flight(o->sampler_threads, 1);
}

/* The cost model: every 4 KiB page a batch touches (its rows' pages, a page per neighbour list)
 * that the page cache does not hold is one synchronous read of that page alone (MADV_RANDOM: no
 * read-ahead; the shared bench and the planner's wide workload measured 4.0-4.1 KiB a read). A
 * fault blocks its thread, so the device sees about one read per sampler thread (bench/README.md,
 * "Ginex", the shared strategy bench: mmap's faults ran near the probe's depth-1 rate).
 *
 * The page cache is what the cgroup leaves beside the process: --mem after the budget plan's
 * process, model and activations, less the matrices in flight at the epoch's mean batch (the
 * budget reserves the largest with a margin, but the kernel gives the page cache what is not
 * in use), as many as the budget plan lets fit. It is an LRU over pages (mmap_page_misses): the
 * index pages first, which about every other batch touches and so stay, then the feature pages.
 * Counting it as a uniform share of the file's pages, with the budget's full reservation taken off,
 * predicted 1.46 GB read per epoch on the planner's wide workload (--mem 320M), where the run read
 * 0.78 GB (session 24). */
static double mmap_page_misses(const tg_cost_inputs_t *in, double pages);

static int mmap_predict(const tg_cost_inputs_t *in, tg_cost_pred_t *p)
{
    const double page = 4096;
    const tg_cost_profile_t *pr = &in->prof;
    double feat_pages = ceil(tg_cost_feat_bytes(in) / page);
    double idx_pages = ceil((double)in->data.edges * in->data.index_bytes / page);
    double per_page = fmax(1, floor(page / tg_cost_row_bytes(in)));
    double q = fmin(pr->rows_per_batch / (double)in->data.nodes, 1);
    double feat_touched = feat_pages * (1 - pow(1 - q, per_page)) * (double)pr->batches;
    double idx_touched = pr->index_reads_per_batch * (double)pr->batches;
    /* the budget plan lowers the sampler threads until its matrices (the largest batch's, with
     * its margin) fit what --mem leaves: as many as fit, at least one */
    double free = (double)in->run.free_bytes, k = tg_cost_matrices(&tg_strategy_mmap, in);
    if (in->run.matrix_bytes) k = fmax(1, fmin(k, floor(free / (double)in->run.matrix_bytes)));
    double cached = fmax(free - k * pr->rows_per_batch * tg_cost_row_bytes(in), 0) / page;
    double idx_cached = fmin(cached, idx_pages);
    double faults = idx_touched * (1 - idx_cached / fmax(idx_pages, 1)) +
                    feat_touched * mmap_page_misses(in, cached - idx_cached);
    p->read_bytes = faults * page;
    p->io_s = tg_cost_random_s(&in->machine, faults, p->read_bytes, in->run.sampler_threads);
    p->sample_s = tg_cost_sample_s(in);
    p->gather_s = tg_cost_gather_s(in);
    p->compute_s = tg_cost_compute_s(in);
    tg_cost_overlap(in, p);
    snprintf(p->why, sizeof p->why,
             "%.2fM page faults, a page cache of %.0f MiB (%.0f%% of the pages)", faults / 1e6,
             cached * page / 1048576, 100 * fmin(cached / (feat_pages + idx_pages), 1));
    return 0;
}

/* The share of the feature pages a batch touches that a page cache of `pages` feature pages
 * misses. Each cached page is there for one row the LRU keeps (the profile's LRU of rows at as
 * many rows: tg_cost_lru_misses); a page's other rows are unrelated to it (rows are placed by
 * node id) and serve the misses as a uniform share of the file's rows. */
static double mmap_page_misses(const tg_cost_inputs_t *in, double pages)
{
    double N = (double)in->data.nodes, acc = tg_cost_accesses(in);
    if (!(pages > 0) || !(acc > 0)) return 1;
    double per_page = fmax(1, floor(4096 / tg_cost_row_bytes(in)));
    double rows = fmin(pages, N);
    double lru = fmin(tg_cost_lru_misses(in, rows) / acc, 1);
    /* never fewer than the rows a steady epoch reads that the epoch before did not: a page
     * cache that holds the file misses those alone */
    double fresh = fmin(tg_cost_lru_misses(in, N) / acc, 1);
    return fmax(lru * (1 - fmin(1, (per_page - 1) * rows / N)), fresh);
}

const tg_strategy_i tg_strategy_mmap = {
    .info = {.name = "mmap",
             .summary = "indices and features memory-mapped (MADV_RANDOM), page cache bounded by "
                        "the cgroup; sampler threads sample, a pool gathers",
             .caps = TG_STRAT_EXACT,
             .opts = mmap_opts,
             .num_opts = sizeof mmap_opts / sizeof mmap_opts[0],
             .config_size = sizeof(mmap_cfg_t),
             .example_args = "--gather-threads 3"},
    .min_bytes = mmap_min_bytes,
    .open = mmap_open,
    .pass = mmap_pass,
    .close = mmap_close,
    .batches_in_flight = mmap_in_flight,
    .predict = mmap_predict,
};
