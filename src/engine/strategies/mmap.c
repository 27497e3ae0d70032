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

/* The cost model: every 4 KiB page a batch touches (its rows' pages, its lists' pages: the
 * profile counts them) that the page cache does not hold is one synchronous read of that page
 * alone (MADV_RANDOM: no read-ahead; the shared bench and the planner's wide workload measured
 * 4.0-4.1 KiB a read). A fault blocks its thread: the device sees about half the threads that
 * fault (mmap_predict; bench/README.md, "Ginex", the shared strategy bench: mmap's faults ran
 * near the probe's depth-1 rate).
 *
 * The page cache is what the cgroup leaves beside the process's anonymous memory: --mem after
 * the budget plan's process, model and activations (the step's arena stays mapped once
 * touched), and the cgroup's margin beyond --mem, less the matrices that are filled. One batch
 * gathers at a time (mmap_gather), its matrix half filled on average over its gather; the
 * others wait for the pool with their matrices untouched. Where the steps are the slower stage,
 * the gathered matrices queue full as well (all k of the budget plan's). On the planner's few
 * workload (300M) the cgroup's page cache measured 184-231 MiB through the epoch, its anonymous
 * memory 53-111 MiB; taking the k matrices full from --mem alone left 69 MiB (session 30).
 * The cache is an LRU over pages, index and feature pages alike (mmap_faults). */

/* Rows of the feature file t consecutive batches use: the profile's window (t >= 1; a share of
 * one batch's below), else the epoch's distinct rows drawn at random. */
static double window_rows(const tg_cost_inputs_t *in, double t)
{
    const tg_cost_profile_t *pr = &in->prof;
    if (t < 1) return t * window_rows(in, 1);
    if (pr->window_rows.n) return tg_cost_curve_at(&pr->window_rows, t);
    double D = fmax(pr->distinct_rows, 1);
    return D * (1 - pow(fmax(1 - pr->rows_per_batch / D, 0), t));
}

/* Feature pages holding `rows` rows drawn at random: rows up to a page share pages (a page is
 * touched when any of its rows is: rows are placed by node id, unrelated to each other), longer
 * rows have their own. */
static double feat_pages_of(const tg_cost_inputs_t *in, double rows)
{
    const double page = 4096;
    double N = (double)in->data.nodes, row = tg_cost_row_bytes(in);
    double per_page = floor(page / row);
    if (per_page < 1) return rows * ceil(row / page);
    return ceil(tg_cost_feat_bytes(in) / page) * (1 - pow(fmax(1 - rows / N, 0), per_page));
}

/* Pages t consecutive batches touch: the feature pages of their rows, scaled to the pages the
 * profile counted in a batch, and the index pages, each touched in a batch at the profile's
 * share of them (its pages counted, else one a list). */
static double pages_touched(const tg_cost_inputs_t *in, double t)
{
    const tg_cost_profile_t *pr = &in->prof;
    double idx_pages = ceil((double)in->data.edges * in->data.index_bytes / 4096);
    double feat = feat_pages_of(in, window_rows(in, t)),
           one = feat_pages_of(in, window_rows(in, 1));
    if (pr->feat_pages_per_batch > 0 && one > 0) feat *= pr->feat_pages_per_batch / one;
    double idx_batch =
        pr->index_pages_per_batch > 0 ? pr->index_pages_per_batch : pr->index_reads_per_batch;
    double q = idx_pages > 0 ? fmin(idx_batch / idx_pages, 1) : 0;
    /* within a batch, as for the rows: its pages are distinct requests */
    double idx = t < 1 ? t * idx_pages * q : idx_pages * (1 - pow(1 - q, t));
    return fmin(feat, ceil(tg_cost_feat_bytes(in) / 4096)) + idx;
}

/* Page faults of an epoch with a page cache of `cached` bytes: an LRU over the pages (Che's
 * approximation, batches as its clock) holds the pages touched in the last T batches, where
 * pages_touched(T) fills it; a request faults when its page was not among them, at the rate
 * pages_touched grows at T (a batch's rows are requests in time: two rows of one page a batch
 * apart fault twice when the cache holds less than a batch). Never fewer than the rows a steady
 * epoch reads that the epoch before did not (a cache that holds what an epoch touches misses
 * those alone). The shared bench (--mem 1200M, a page cache of 650-700 MiB measured) touches
 * 46% of the feature pages in every batch: the run faulted 9.48M times, more than the 9.19M
 * feature pages its batches touch; an LRU of rows, each cached page holding one, predicted
 * 6.5M, whole batches as requests 6.8M (session 30). */
static double mmap_faults(const tg_cost_inputs_t *in, double cached)
{
    const tg_cost_profile_t *pr = &in->prof;
    double B = (double)pr->batches, C = fmax(cached, 0) / 4096;
    double acc = tg_cost_accesses(in), N = (double)in->data.nodes;
    double fresh = acc > 0 ? fmin(tg_cost_lru_misses(in, N) / acc, 1) * pages_touched(in, 1) : 0;
    if (pages_touched(in, B) <= C) return fmax(fresh * B, 0);
    double lo = 0, hi = B;
    for (int it = 0; it < 60 && hi - lo > 1e-6; it++) {
        double mid = (lo + hi) / 2;
        if (pages_touched(in, mid) < C)
            lo = mid;
        else
            hi = mid;
    }
    const double h = 1e-3;
    double per_batch = (pages_touched(in, lo + h) - pages_touched(in, lo)) / h;
    return B * fmax(per_batch, fresh);
}

static int mmap_predict(const tg_cost_inputs_t *in, tg_cost_pred_t *p)
{
    const double page = 4096;
    double feat_pages = ceil(tg_cost_feat_bytes(in) / page);
    double idx_pages = ceil((double)in->data.edges * in->data.index_bytes / page);
    /* the budget plan lowers the sampler threads until its matrices (the largest batch's, with
     * its margin) fit what --mem leaves: as many as fit, at least one */
    double free = (double)in->run.free_bytes, k = tg_cost_matrices(&tg_strategy_mmap, in);
    if (in->run.matrix_bytes) k = fmax(1, fmin(k, floor(free / (double)in->run.matrix_bytes)));
    /* ... and the sampler threads with them (each holds its matrices, mmap_in_flight) */
    int threads = tg_cost_sampler_threads(&tg_strategy_mmap, in, k);
    /* Faults in flight, as the probe's curve reads them: half the threads that fault. One batch
     * gathers at a time, on the pool (its default: a thread a core); the other sampler threads
     * sample meanwhile, faulting on their lists while they sample. Session 31's runs: on wide
     * (320M: one sampler thread left) the device held 1.1 reads in flight (diskstats) and
     * served 17.4-19.8 k/s, the probe's rate at 1.2-1.6 (a fault's read completes sooner than
     * the probe's O_DIRECT read at the same depth); at the two sampler threads taken before,
     * the predictions came out 39-47% short. few and narrow, two sampler threads: 1.3 and 1.6
     * in flight on the device, 19.1 and 24.9 k/s. */
    double depth = 0.5 * (threads + fmax(in->machine.cores, 1));
    double matrix = in->prof.rows_per_batch * tg_cost_row_bytes(in);
    double room = free + (double)in->run.cache_slack;
    p->sample_s = tg_cost_sample_s(in);
    p->gather_s = tg_cost_gather_s(in);
    p->compute_s = tg_cost_compute_s(in);
    double cached = fmax(room - 0.5 * matrix, 0), faults = mmap_faults(in, cached);
    p->io_s = tg_cost_random_s(&in->machine, faults, faults * page, depth);
    if (p->compute_s > p->io_s) { /* the steps are slower: gathered matrices queue full */
        cached = fmax(room - k * matrix, 0);
        faults = mmap_faults(in, cached);
        p->io_s = tg_cost_random_s(&in->machine, faults, faults * page, depth);
    }
    p->read_bytes = faults * page;
    p->reads = faults;
    /* a gathering thread copies a row once its fault is served: the pool's copies follow its
     * waits rather than overlap them */
    p->stage_cpu_s = p->gather_s / fmax(in->machine.cores, 1);
    p->stage_s = p->io_s + p->stage_cpu_s;
    tg_cost_overlap(in, p);
    snprintf(p->why, sizeof p->why,
             "%.2fM page faults, %.1f in flight (%d sampler thread%s), a page cache of %.0f MiB "
             "(%.0f%% of the pages)",
             faults / 1e6, depth, threads, threads > 1 ? "s" : "", cached / 1048576,
             100 * fmin(cached / page / (feat_pages + idx_pages), 1));
    return 0;
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
