/* The planner's profile: the cost model's inputs measured for a run (plan_profile.h). */
#include "plan_profile.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#ifdef __GLIBC__
#include <malloc.h>
#endif
#include <sched.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/statvfs.h>
#include <time.h>
#include <unistd.h>

#include "engine-impl.h"
#include "tiergnn/derived.h"
#include "tiergnn/featbuf.h"

/* The rates are measured for at least this long, so a small dataset's microseconds do not
 * make them noise (at 20 ms, five quiet profiles of the ram workload read the gather rate at
 * 1.78-2.41 M rows/s and predicted memory's epoch at 3.86-4.99 s; at 80 ms, 1.85-1.98 M and
 * 4.25-4.49 s, measured 4.11; a cold profile takes about 0.3 s more: 0.82-0.88 s against
 * 0.51-0.64 on the planner's workloads) */
#define RATE_MIN_S 0.08
/* ... of CPU time, and for at most this long whatever CPU they got */
#define RATE_MAX_WALL_S 0.4
/* The gather rate's source rows (larger than the CPU's caches) and its matrices. */
#define GATHER_BYTES ((uint64_t)64 << 20)
#define GATHER_X_BYTES ((uint64_t)8 << 20)
/* indices.bin is read ahead of the profile's sampling when it takes at most this long */
#define WARM_MAX_S 5.0
#define WARM_CHUNK ((size_t)4 << 20)
/* The budget plan's slack on the process it measures (engine/budget.c) */
#define OVERHEAD_SLACK ((uint64_t)8 << 20)
/* Steps timed after the first for the step's rate (the fastest is taken), fewer once the steps
 * took STEP_MAX_S (at least one is timed: the shared bench's steps take 0.2-0.3 s each) */
#define STEP_TIMED 3
#define STEP_MAX_S 0.3
/* The steps timed beside gathering threads, one per sampler thread of the run (at most
 * SHARERS_MAX), for at least this long (at 80 ms, the ram workload's step beside them read
 * 1.0-1.9x its time alone; at 150 ms, 1.45-1.64x) */
#define SHARED_MIN_S 0.15
#define SHARED_STEPS 64
#define SHARERS_MAX 8
/* The budget plan's margin on a measured batch's sizes (engine/budget.c) */
#define SIZE_MARGIN 1.15

/* CPU seconds so far of every thread of the process (clock CLOCK_PROCESS_CPUTIME_ID) or of the
 * calling thread (CLOCK_THREAD_CPUTIME_ID); 0 where the clock cannot be read. The rates of the
 * CPU terms (sampling, gathering) are taken per CPU second: another process that takes the core
 * for a moment lengthens their wall time, not their CPU time. */
static double cpu_s(clockid_t clock)
{
    struct timespec ts;
    if (clock_gettime(clock, &ts) != 0) return 0;
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

int tg_cost_plan_recheck(tg_cost_plan_t *pl, uint64_t process_anon)
{
    uint64_t now = process_anon + OVERHEAD_SLACK;
    if (!pl->process_bytes || now <= pl->process_bytes) return 0;
    uint64_t more = now - pl->process_bytes;
    tg_cost_run_t *r = &pl->in.run;
    r->free_bytes = r->free_bytes > more ? r->free_bytes - more : 0;
    pl->process_bytes = now;
    int rc = tg_cost_plan_choose(&pl->in, pl->allow_inexact, pl);
    return rc < 0 ? rc : 1;
}

void tg_cost_plan_opts_default(tg_cost_plan_opts_t *o)
{
    memset(o, 0, sizeof *o);
    tg_model_config_default(&o->model);
    for (int l = 0; l < TG_MAX_LAYERS; l++)
        o->fanouts[l] = 10;
    o->batch_size = 1024;
    o->epochs = 10;
    o->threads = 1;
    o->sampler_threads = -1;
    o->cgroup_limit = -1;
}

int tg_cost_plan_opts_train(const tg_train_opts_t *t, tg_cost_plan_opts_t *o)
{
    tg_cost_plan_opts_default(o);
    o->dataset = t->dataset;
    o->model = t->model;
    memcpy(o->fanouts, t->fanouts, sizeof o->fanouts);
    o->sampler = t->sampler;
    o->batch_size = t->batch_size;
    o->seed = t->seed;
    o->epochs = t->epochs;
    o->batches_per_epoch = t->batches_per_epoch;
    o->threads = t->threads;
    o->sampler_threads = t->sampler_threads;
    o->mem_bytes = t->mem_bytes;
    o->allow_inexact = t->allow_inexact;
    o->strategy_args = t->strategy_args;
    o->num_strategy_args = t->num_strategy_args;
    for (int i = 0; i < t->num_strategy_args; i++) {
        const tg_strategy_arg_t *a = &t->strategy_args[i];
        if (strcmp(a->name, "disk-budget") || !a->value || !strcmp(a->value, "auto")) continue;
        int rc = tg_parse_size(a->value, &o->disk_budget);
        if (rc < 0) return tg_err_prefix(rc, "--disk-budget");
    }
    return 0;
}

uint64_t tg_cost_disk_budget_rule(double need, double feat, double disk_free)
{
    double cap = 0.45 * disk_free;
    if (cap < feat) return 0;
    return (uint64_t)fmin(fmax(need, feat), cap);
}

uint64_t tg_cost_disk_budget(const tg_cost_inputs_t *in)
{
    double need = in->prof.rows_per_batch * (double)in->prof.batches * tg_cost_row_bytes(in);
    return tg_cost_disk_budget_rule(need, tg_cost_feat_bytes(in), (double)in->run.disk_free);
}

uint64_t tg_cost_profile_batches(uint64_t epoch_batches)
{
    uint64_t k = (uint64_t)ceil(TG_COST_PROFILE_SHARE * (double)epoch_batches);
    return TG_MIN(TG_MAX((uint64_t)1, k), epoch_batches);
}

/* ---------------------------------------------------------------- the run's first batches */

typedef struct {
    tg_dataset_t *ds;
    tg_adj_t *adj;
    uint64_t *train, ntrain;
    tg_plan_t plan;
    int have_plan;
    int64_t fan[TG_MAX_LAYERS];
    tg_model_config_t cfg; /* the operation count's model */
    tg_cost_bins_t bins;
    uint64_t rows, lists, max_rows;
    double index_bytes, flops;
    double feat_pages, index_pages; /* distinct 4 KiB pages of the files a batch touches */
    uint64_t *pages;                /* a bitmap for counting them (prof_pages) */
    uint32_t max_dst0;
    tg_batch_t largest; /* the profiled batch with the most input rows (owned) */
    int have_largest;
    uint64_t act_bytes; /* one step's arena on it, measured */
    uint64_t overhead;  /* the process beside its data, measured after the step */
} prof_t;

static void prof_close(prof_t *p)
{
    if (p->have_largest) tg_batch_free(&p->largest);
    if (p->have_plan) tg_plan_destroy(&p->plan);
    free(p->pages);
    free(p->train);
    tg_adj_destroy(p->adj);
    tg_dataset_close(p->ds);
}

/* The dataset, its training split, the epoch's plan (epoch 0, as the run's first) and the
 * memory-mapped adjacency the batches are sampled over. */
static int prof_open(prof_t *p, const tg_cost_plan_opts_t *o)
{
    int rc = tg_dataset_open(&p->ds, o->dataset, TG_OPEN_CHECK_SIZES);
    if (rc < 0) return rc;
    const tg_meta_t *m = &p->ds->meta;
    if ((rc = tg_dataset_load_split(p->ds, TG_FILE_TRAIN, &p->train, &p->ntrain)) < 0) return rc;
    if (p->ntrain == 0) return tg_err(-EINVAL, "%s: the training split is empty", o->dataset);
    for (int l = 0; l < o->model.num_layers; l++)
        p->fan[l] = o->model.type == TG_MODEL_MLP ? 0 : o->fanouts[l];
    tg_plan_opts_t po = {.num_nodes = m->num_nodes,
                         .train = p->train,
                         .num_train = p->ntrain,
                         .batch_size = o->batch_size,
                         .num_layers = o->model.num_layers,
                         .fanouts = p->fan,
                         .seed = o->seed,
                         .max_batches = o->batches_per_epoch};
    if ((rc = tg_plan_init(&p->plan, &po)) < 0) return rc;
    p->have_plan = 1;
    tg_plan_epoch(&p->plan, 0);
    p->cfg = o->model;
    p->cfg.in_dim = m->feat_dim;
    p->cfg.out_dim = m->num_classes;
    p->cfg.multi_label = m->multi_label;
    if ((rc = tg_model_config_check(&p->cfg)) < 0) return tg_err_prefix(rc, "plan: the model");
    return tg_adj_mmap_open(&p->adj, p->ds, NULL);
}

static void prof_degrees(prof_t *p)
{
    uint64_t N = p->ds->meta.num_nodes;
    for (uint64_t v = 0; v < N; v++) {
        uint64_t d = tg_adj_degree(p->adj, v);
        int b = tg_cost_degree_bin(d);
        p->bins.nodes[b] += 1;
        p->bins.edges[b] += (double)d;
    }
}

/* A page seen in this batch: 1 the first time (its bit set), else 0. */
static int page_new(uint64_t *bits, uint64_t pg)
{
    uint64_t m = 1ull << (pg & 63);
    if (bits[pg >> 6] & m) return 0;
    bits[pg >> 6] |= m;
    return 1;
}

/* The distinct 4 KiB pages of the feature file and of the index file a batch touches, as a
 * memory map reads them: each input row's pages (rows lie by node id), and for each list the
 * sampler reads, the pages of the entries it can read: a list no longer than the fanout is read
 * whole; a longer one at fanout positions, taken as evenly spread over its pages. A bitmap of
 * the larger file's pages (1 bit a page), cleared per batch. */
static int prof_pages(prof_t *p, const tg_batch_t *bt)
{
    const tg_meta_t *m = &p->ds->meta;
    uint64_t rb = m->feat_dim * tg_feat_dtype_size(m->feat_dtype);
    uint64_t ib = tg_index_dtype_size(m->index_dtype);
    uint64_t fpages = (m->num_nodes * rb + 4095) / 4096, ipages = (m->num_edges * ib + 4095) / 4096;
    size_t words = (size_t)((TG_MAX(fpages, ipages) + 63) / 64) + 1;
    if (!p->pages) {
        p->pages = calloc(words, sizeof *p->pages);
        if (!p->pages)
            return tg_err(-ENOMEM, "plan: cannot allocate a bitmap of %zu pages", words * 64);
    }
    uint64_t n = 0;
    for (uint32_t i = 0; i < bt->num_nodes; i++) {
        uint64_t a = bt->nodes[i] * rb, z = a + rb - 1;
        for (uint64_t pg = a / 4096; pg <= z / 4096; pg++)
            n += (uint64_t)page_new(p->pages, pg);
    }
    p->feat_pages += (double)n;
    memset(p->pages, 0, words * sizeof *p->pages);
    n = 0;
    for (int l = 0; l < bt->num_layers; l++) {
        if (p->fan[l] == 0) continue;
        uint64_t fan = p->fan[l] < 0 ? UINT64_MAX : (uint64_t)p->fan[l];
        for (uint32_t i = 0; i < bt->blocks[l].num_dst; i++) {
            uint64_t v = bt->nodes[i], beg = p->adj->indptr[v], end = p->adj->indptr[v + 1];
            if (end == beg) continue;
            uint64_t first = beg * ib / 4096, last = (end * ib - 1) / 4096;
            uint64_t span = last - first + 1, take = TG_MIN(span, fan);
            for (uint64_t j = 0; j < take; j++)
                n += (uint64_t)page_new(p->pages, first + j * span / take);
        }
    }
    p->index_pages += (double)n;
    memset(p->pages, 0, words * sizeof *p->pages);
    return 0;
}

/* One batch's figures: its rows by degree class, the neighbour lists its sampler reads (the
 * destinations of every layer that samples) and their index bytes, its operations. */
static int prof_batch(prof_t *p, const tg_batch_t *bt)
{
    uint64_t ib = tg_index_dtype_size(p->ds->meta.index_dtype);
    for (uint32_t i = 0; i < bt->num_nodes; i++)
        p->bins.access[tg_cost_degree_bin(tg_adj_degree(p->adj, bt->nodes[i]))] += 1;
    for (int l = 0; l < bt->num_layers; l++) {
        if (p->fan[l] == 0) continue;
        p->lists += bt->blocks[l].num_dst;
        for (uint32_t i = 0; i < bt->blocks[l].num_dst; i++) {
            uint64_t d = tg_adj_degree(p->adj, bt->nodes[i]);
            p->index_bytes += (double)(d * ib);
            p->bins.lists[tg_cost_degree_bin(d)] += 1;
        }
    }
    int rc = prof_pages(p, bt);
    if (rc < 0) return rc;
    p->rows += bt->num_nodes;
    p->max_rows = TG_MAX(p->max_rows, (uint64_t)bt->num_nodes);
    p->max_dst0 = TG_MAX(p->max_dst0, bt->blocks[0].num_dst);
    tg_flops_t f;
    rc = tg_model_batch_flops(&p->cfg, bt, &f);
    if (rc < 0) return rc;
    p->flops += (double)tg_flops_total(&f);
    return 0;
}

/* Samples the profile's batches (the first of the epoch, at most max_s seconds), then samples
 * them again in turn, their lists now in RAM, for the sampler's rate: distinct batches, as the
 * run's samplers see them (one batch again and again keeps its lists in the CPU's caches and
 * measured half the CPU the ram workload's samplers took, bench/README.md's session 24). */
static int prof_sample(prof_t *p, const tg_cost_plan_opts_t *o, tg_cost_inputs_t *in,
                       tg_cost_profile_cost_t *cost)
{
    uint64_t k = tg_cost_profile_batches(p->plan.num_batches);
    double max_s = o->max_s > 0 ? o->max_s : TG_COST_PROFILE_MAX_S, t0 = tg_now();
    tg_sampler_t *s = NULL;
    const tg_sampler_i *kind = o->model.type == TG_MODEL_MLP ? NULL : o->sampler;
    int rc = tg_sampler_open(&s, kind, p->adj, o->model.num_layers, p->fan);
    uint64_t done = 0;
    for (; rc == 0 && done < k && (done == 0 || tg_now() - t0 < max_s); done++) {
        const uint64_t *seeds;
        tg_rng_t r;
        uint64_t cnt = tg_plan_batch(&p->plan, done, &seeds, &r);
        tg_batch_t bt;
        if ((rc = tg_sampler_sample(s, seeds, (size_t)cnt, &r, &bt)) < 0) break;
        if ((rc = prof_batch(p, &bt)) == 0 &&
            (!p->have_largest || bt.num_nodes > p->largest.num_nodes)) {
            if (p->have_largest) tg_batch_free(&p->largest);
            p->largest = bt; /* kept: the step is measured on it */
            p->have_largest = 1;
            continue;
        }
        tg_batch_free(&bt);
    }
    cost->sample_s = tg_now() - t0;
    cost->batches_profiled = done;
    /* warm: the profiled batches again in turn, for at least RATE_MIN_S of CPU */
    uint64_t again = 0, rows = 0;
    double c1 = cpu_s(CLOCK_THREAD_CPUTIME_ID), t1 = tg_now();
    while (rc == 0 && done && (again == 0 || cpu_s(CLOCK_THREAD_CPUTIME_ID) - c1 < RATE_MIN_S) &&
           (again == 0 || tg_now() - t1 < RATE_MAX_WALL_S)) {
        const uint64_t *seeds;
        tg_rng_t r;
        uint64_t cnt = tg_plan_batch(&p->plan, again % done, &seeds, &r);
        tg_batch_t bt;
        if ((rc = tg_sampler_sample(s, seeds, (size_t)cnt, &r, &bt)) < 0) break;
        rows += bt.num_nodes;
        tg_batch_free(&bt);
        again++;
    }
    in->machine.sample_nodes_per_s = (double)rows / fmax(cpu_s(CLOCK_THREAD_CPUTIME_ID) - c1, 1e-9);
    tg_sampler_destroy(s);
    return rc < 0 ? tg_err_prefix(rc, "plan: sampling the profile's batches") : 0;
}

/* ---------------------------------------------------------------- the machine */

/* Rows copied (and converted to f32) from a RAM buffer into a matrix, at random, by one thread:
 * the gathering every strategy does for the rows it has in RAM. */
/* One matrix of rows_x rows gathered at random from src (n rows), converted to f32. The matrix
 * is fresh, as a batch's is: its first touch is part of the cost. It is mapped and unmapped
 * here, so that its pages are new each time: a batch's X (megabytes, malloc'd on one thread and
 * freed on another) faults its pages in as the gather writes them (the ram workload's runs
 * took one page fault per 4 KiB of X, 9 in 10 of them in the gather's copy, and those faults
 * cost twice the copy), where a malloc'd matrix here would come back from the heap already
 * mapped after the first. */
static int gather_once(const unsigned char *src, uint64_t n, size_t width, size_t es, size_t rows_x,
                       tg_rng_t *r, _Atomic uint64_t *done)
{
    size_t len = rows_x * width * sizeof(float);
    void *map = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (map == MAP_FAILED)
        return tg_err(-errno, "plan: cannot map the gather rate's matrix of %zu bytes: %s", len,
                      strerror(errno));
    float *X = map;
    for (size_t i = 0; i < rows_x; i++) {
        const unsigned char *row = src + tg_rng_below(r, n) * width * es;
        if (done && (i & 255) == 255) atomic_fetch_add_explicit(done, 256, memory_order_relaxed);
        if (es == 4) {
            memcpy(X + i * width, row, width * 4);
            continue;
        }
        for (size_t c = 0; c < width; c++) {
            uint16_t h;
            memcpy(&h, row + 2 * c, 2);
            X[i * width + c] = tg_f16_to_f32(h);
        }
    }
    munmap(map, len);
    return 0;
}

static int measure_featbuf(const tg_meta_t *m, tg_cost_machine_t *mc);

/* The gather's source: min(N, GATHER_BYTES of) rows, filled (untouched pages would all be the
 * one zero page, always in the CPU's cache), and the rows of its matrices. */
typedef struct gsrc {
    unsigned char *src;
    uint64_t n;
    size_t width, es, rows_x;
} gsrc_t;

static int gsrc_open(gsrc_t *g, const tg_meta_t *m)
{
    g->width = m->feat_dim;
    g->es = tg_feat_dtype_size(m->feat_dtype);
    g->n = TG_MIN(m->num_nodes, TG_MAX((uint64_t)1, GATHER_BYTES / (g->width * g->es)));
    g->rows_x = (size_t)TG_MAX((uint64_t)1, GATHER_X_BYTES / (g->width * sizeof(float)));
    g->src = malloc(g->n * g->width * g->es);
    if (!g->src)
        return tg_err(-ENOMEM, "plan: out of memory for the gather rate's %llu rows",
                      (unsigned long long)g->n);
    memset(g->src, 0x3c, g->n * g->width * g->es);
    return 0;
}

static int measure_gather(const tg_meta_t *m, tg_cost_machine_t *mc, double *spent)
{
    gsrc_t g;
    int rc = gsrc_open(&g, m);
    if (rc < 0) return rc;
    tg_rng_t r;
    tg_rng_seed(&r, 1);
    uint64_t rows = 0;
    double t0 = tg_now(), c0 = cpu_s(CLOCK_THREAD_CPUTIME_ID), c = 0;
    while (rc == 0 && (rows == 0 || (c < RATE_MIN_S && tg_now() - t0 < RATE_MAX_WALL_S))) {
        rc = gather_once(g.src, g.n, g.width, g.es, g.rows_x, &r, NULL);
        rows += g.rows_x;
        c = cpu_s(CLOCK_THREAD_CPUTIME_ID) - c0;
    }
    mc->gather_rows_per_s = (double)rows / (c > 0 ? c : tg_now() - t0);
    free(g.src);
    if (rc == 0) rc = measure_featbuf(m, mc); /* after: the profile stays within a few MiB */
    *spent = tg_now() - t0;
    return rc;
}

/* Rows already in a feature buffer served into fresh matrices, as gnndrive's and gids's
 * extractors serve a hit (store/extract): acquire, copy, release, and with the WINDOW policy the
 * look-ahead's announcing (FB_WINDOW batches ahead) and retiring of each batch, whose trace
 * keeps the buffer's heap in order (the ram workload's gids spent a sixth of its CPU there).
 * Matrices of FB_X_BYTES drawn from a buffer of FB_BYTES of rows (larger than a core's cache;
 * small enough that the profile fits a tight cgroup: the narrow workload's 120 MiB), every row
 * loaded first (the loads are not timed). Rows per CPU second. */
#define FB_WINDOW 8u
#define FB_BATCHES (FB_WINDOW + 1)
#define FB_BYTES ((uint64_t)16 << 20)
#define FB_X_BYTES ((uint64_t)4 << 20)
static int featbuf_rate(uint64_t n, const tg_meta_t *m, size_t rows_x, uint64_t *const *batch,
                        uint32_t window, double *rate)
{
    size_t row = (size_t)m->feat_dim * tg_feat_dtype_size(m->feat_dtype);
    tg_featbuf_opts_t fo = {.num_nodes = n,
                            .feat_dim = m->feat_dim,
                            .dtype = m->feat_dtype,
                            .max_batch_nodes = (uint32_t)rows_x,
                            .max_batches = 2,
                            .policy = window ? TG_FEATBUF_WINDOW : TG_FEATBUF_LRU,
                            .window = window,
                            .future_positions = (uint32_t)((window + 2) * rows_x)};
    fo.num_slots = (uint32_t)TG_MAX(n, (uint64_t)tg_featbuf_min_slots(&fo));
    tg_featbuf_t *fb = NULL;
    tg_featbuf_batch_t *h = NULL;
    int rc = tg_featbuf_create(&fb, &fo, NULL);
    if (rc == 0) rc = tg_featbuf_batch_create(fb, &h);
    uint64_t *all = rc == 0 ? malloc(n * sizeof *all) : NULL;
    if (rc == 0 && !all) rc = tg_err(-ENOMEM, "plan: out of memory for the buffer rate's nodes");
    /* every row loaded first, a batch at a time */
    for (uint64_t v = 0; rc == 0 && v < n; v++)
        all[v] = v;
    for (uint64_t lo = 0; rc == 0 && lo < n; lo += rows_x) {
        size_t k = (size_t)TG_MIN((uint64_t)rows_x, n - lo), nl;
        if ((rc = tg_featbuf_acquire(h, all + lo, k, 0)) < 0) break;
        const tg_featbuf_load_t *ld = tg_featbuf_batch_loads(h, &nl);
        for (size_t j = 0; j < nl; j++)
            memset(tg_featbuf_row(fb, ld[j].slot), 0x3c, row); /* not the zero page */
        if ((rc = tg_featbuf_complete_all(h, 0)) == 0 && (rc = tg_featbuf_wait(h)) == 0)
            rc = tg_featbuf_release(h);
    }
    for (uint32_t b = 0; rc == 0 && b < window; b++)
        rc = tg_featbuf_future_add(fb, b, batch[b % FB_BATCHES], rows_x);
    size_t len = rows_x * m->feat_dim * sizeof(float);
    uint64_t rows = 0, b = 0;
    double t0 = tg_now(), c0 = cpu_s(CLOCK_THREAD_CPUTIME_ID), c = 0;
    while (rc == 0 && (rows == 0 || (c < RATE_MIN_S && tg_now() - t0 < RATE_MAX_WALL_S))) {
        if (window && (rc = tg_featbuf_future_add(fb, b + window, batch[(b + window) % FB_BATCHES],
                                                  rows_x)) < 0)
            break;
        void *X = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (X == MAP_FAILED) {
            rc = tg_err(-errno, "plan: cannot map the buffer rate's matrix of %zu bytes: %s", len,
                        strerror(errno));
            break;
        }
        if ((rc = tg_featbuf_acquire(h, batch[b % FB_BATCHES], rows_x, 0)) == 0 &&
            (rc = tg_featbuf_complete_all(h, 0)) == 0 && (rc = tg_featbuf_wait(h)) == 0)
            rc = tg_featbuf_gather_f32(h, X, NULL);
        int rr = tg_featbuf_release(h);
        if (rc == 0) rc = rr;
        if (rc == 0) rc = tg_featbuf_future_done(fb, b);
        munmap(X, len);
        rows += rows_x;
        b++;
        c = cpu_s(CLOCK_THREAD_CPUTIME_ID) - c0;
    }
    *rate = rows / (c > 0 ? c : fmax(tg_now() - t0, 1e-9));
    free(all);
    tg_featbuf_batch_destroy(h);
    tg_featbuf_destroy(fb);
    return rc < 0 ? tg_err_prefix(rc, "plan: the feature buffer's rate") : 0;
}

/* Both buffer rates (featbuf_rate). */
static int measure_featbuf(const tg_meta_t *m, tg_cost_machine_t *mc)
{
    size_t row = (size_t)m->feat_dim * tg_feat_dtype_size(m->feat_dtype);
    uint64_t n = TG_MIN(m->num_nodes, TG_MAX((uint64_t)1, FB_BYTES / row));
    size_t rows_x = (size_t)TG_MIN(n, TG_MAX((uint64_t)1, FB_X_BYTES / (m->feat_dim * 4)));
    uint64_t *batch[FB_BATCHES] = {0};
    uint64_t *perm = malloc(n * sizeof *perm);
    int rc = perm ? 0 : tg_err(-ENOMEM, "plan: out of memory for the buffer rate's batches");
    tg_rng_t r;
    tg_rng_seed(&r, 3);
    for (uint64_t v = 0; rc == 0 && v < n; v++)
        perm[v] = v;
    /* each batch distinct nodes: the first rows_x of a partial shuffle */
    for (unsigned k = 0; rc == 0 && k < FB_BATCHES; k++) {
        if (!(batch[k] = malloc(rows_x * sizeof *batch[k]))) {
            rc = tg_err(-ENOMEM, "plan: out of memory for the buffer rate's batches");
            break;
        }
        for (size_t i = 0; i < rows_x; i++) {
            uint64_t j = i + tg_rng_below(&r, n - i), t = perm[i];
            perm[i] = perm[j];
            perm[j] = t;
            batch[k][i] = perm[i];
        }
    }
    if (rc == 0) rc = featbuf_rate(n, m, rows_x, batch, 0, &mc->buffer_rows_per_s);
    if (rc == 0) rc = featbuf_rate(n, m, rows_x, batch, FB_WINDOW, &mc->window_rows_per_s);
    /* A buffer's hit is the gather's copy plus the buffer's bookkeeping: never faster. Measured
     * faster, it is the noise of rates taken over a few tens of milliseconds (on a wide-row
     * dataset in RAM, 185k-372k rows/s for the gather in five quiet runs), which made gids's
     * gathering look shorter than memory's and chose it over memory for a dataset in RAM. */
    mc->buffer_rows_per_s = fmin(mc->buffer_rows_per_s, mc->gather_rows_per_s);
    mc->window_rows_per_s = fmin(mc->window_rows_per_s, mc->gather_rows_per_s);
    for (unsigned k = 0; k < FB_BATCHES; k++)
        free(batch[k]);
    free(perm);
    return rc;
}

/* hier's mega-batch load keeps, of every list entry of its parts, the neighbours in the
 * mega-batch (graph/megabatch.c, local_of): a bitmap test, and for a kept one its part by binary
 * search over the parts' bounds. The same loop over FILTER_ENTRIES random entries, half of the
 * nodes in the set, parts of FILTER_PART_NODES nodes (hier's default size), per CPU second. */
#define FILTER_ENTRIES ((size_t)1 << 20)
#define FILTER_PART_NODES 4096
static volatile uint32_t filter_sink;
static int measure_filter(uint64_t n, tg_cost_machine_t *mc, double *spent)
{
    uint64_t parts = TG_MAX((uint64_t)1, n / FILTER_PART_NODES), words = (n + 63) / 64;
    uint32_t *list = malloc(FILTER_ENTRIES * sizeof *list);
    uint32_t *kept = malloc(FILTER_ENTRIES * sizeof *kept);
    uint64_t *set = malloc(words * sizeof *set), *bound = malloc((parts + 1) * sizeof *bound);
    int rc = list && kept && set && bound ? 0
                                          : tg_err(-ENOMEM, "plan: out of memory for the "
                                                            "list filter's rate");
    tg_rng_t r;
    tg_rng_seed(&r, 2);
    for (size_t i = 0; rc == 0 && i < FILTER_ENTRIES; i++)
        list[i] = (uint32_t)tg_rng_below(&r, n);
    for (uint64_t w = 0; rc == 0 && w < words; w++)
        set[w] = tg_rng_u64(&r);
    for (uint64_t k = 0; rc == 0 && k <= parts; k++)
        bound[k] = k * n / parts;
    double t0 = tg_now(), c0 = cpu_s(CLOCK_THREAD_CPUTIME_ID), c = 0;
    uint64_t entries = 0;
    while (rc == 0 && (entries == 0 || (c < RATE_MIN_S && tg_now() - t0 < RATE_MAX_WALL_S))) {
        size_t nk = 0;
        for (size_t i = 0; i < FILTER_ENTRIES; i++) {
            uint64_t u = list[i];
            if (!(set[u >> 6] >> (u & 63) & 1)) continue;
            uint64_t lo = 0, hi = parts;
            while (hi - lo > 1) {
                uint64_t mid = lo + (hi - lo) / 2;
                if (bound[mid] <= u)
                    lo = mid;
                else
                    hi = mid;
            }
            kept[nk++] = (uint32_t)(u - bound[lo]);
        }
        filter_sink = nk ? kept[nk - 1] : 0; /* used: the loop is not optimised away */
        entries += FILTER_ENTRIES;
        c = cpu_s(CLOCK_THREAD_CPUTIME_ID) - c0;
    }
    *spent += tg_now() - t0;
    if (rc == 0) mc->filter_edges_per_s = (double)entries / (c > 0 ? c : tg_now() - t0);
    free(list);
    free(kept);
    free(set);
    free(bound);
    return rc;
}

/* Large blocks copied per CPU second (memcpy between two COPY_BYTES buffers, touched first). */
#define COPY_BYTES ((size_t)16 << 20)
static volatile unsigned char copy_sink;
static int measure_copy(tg_cost_machine_t *mc, double *spent)
{
    unsigned char *a = malloc(COPY_BYTES), *b = malloc(COPY_BYTES);
    if (!a || !b) {
        free(a);
        free(b);
        return tg_err(-ENOMEM, "plan: out of memory for the copy rate");
    }
    memset(a, 1, COPY_BYTES);
    memset(b, 2, COPY_BYTES);
    double t0 = tg_now(), c0 = cpu_s(CLOCK_THREAD_CPUTIME_ID), c = 0;
    uint64_t bytes = 0;
    while (bytes == 0 || (c < RATE_MIN_S && tg_now() - t0 < RATE_MAX_WALL_S)) {
        memcpy(bytes / COPY_BYTES % 2 ? a : b, bytes / COPY_BYTES % 2 ? b : a, COPY_BYTES);
        bytes += COPY_BYTES;
        c = cpu_s(CLOCK_THREAD_CPUTIME_ID) - c0;
    }
    copy_sink = a[COPY_BYTES / 2] ^ b[COPY_BYTES / 3]; /* used: the copies are not optimised away */
    *spent += tg_now() - t0;
    mc->copy_bytes_per_s = (double)bytes / (c > 0 ? c : tg_now() - t0);
    free(a);
    free(b);
    return 0;
}

/* Bytes [off0, off0 + len) of fd read in reads of at most chunk bytes: into buf at their
 * offset from off0 (fill), or each into buf's start. tg_pread_full's reads: an error names the
 * path and the offset, and the fault rules (TIERGNN_IO_FAULT) reach them. */
static int read_span(int fd, const char *path, char *buf, size_t chunk, int fill, uint64_t off0,
                     uint64_t len)
{
    int rc = 0;
    for (uint64_t off = off0; rc == 0 && off < off0 + len; off += chunk) {
        char *dst = fill ? buf + (off - off0) : buf;
        rc = tg_pread_full(fd, dst, (size_t)TG_MIN(chunk, off0 + len - off), off, path);
    }
    return rc < 0 ? tg_err_prefix(rc, "plan") : 0;
}

/* features.bin read sequentially by one thread with buffered reads of BUFREAD_CHUNK, cold
 * (the range dropped from the page cache first and after), BUFREAD_BYTES of its middle at most:
 * what hier's loader reads at (graph/megabatch.c), whose synchronous reads wait on the page
 * cache's read-ahead (700-950 MB/s here, where the probe's O_DIRECT reads, 1 MiB at depth 8,
 * give 1.03 GB/s). hier's predict takes a timed load's rate before it (prof.own). */
#define BUFREAD_BYTES ((uint64_t)32 << 20)
#define BUFREAD_CHUNK ((size_t)4 << 20)
static int measure_buffered(const prof_t *p, tg_cost_machine_t *mc, double *spent)
{
    char path[4096];
    tg_dataset_path(p->ds, TG_FILE_FEATURES, path, sizeof path);
    uint64_t size = tg_meta_expected_size(&p->ds->meta, TG_FILE_FEATURES);
    uint64_t len = TG_MIN(size, BUFREAD_BYTES), off0 = (size - len) / 2 / 4096 * 4096;
    if (len < BUFREAD_CHUNK) return 0; /* too small to time: not measured */
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return tg_err(-errno, "plan: %s: cannot open: %s", path, strerror(errno));
    /* into a buffer as large as the read, touched first: a mega-batch's buffers are reused
     * from one load to the next, larger than the CPU's caches */
    char *buf = malloc(len);
    int rc = buf ? 0 : tg_err(-ENOMEM, "plan: out of memory for reading %s", path);
    if (buf) memset(buf, 0, len);
    (void)posix_fadvise(fd, (off_t)off0, (off_t)len, POSIX_FADV_DONTNEED);
    double t0 = tg_now();
    if (rc == 0) rc = read_span(fd, path, buf, BUFREAD_CHUNK, 1, off0, len);
    double dt = tg_now() - t0;
    (void)posix_fadvise(fd, (off_t)off0, (off_t)len, POSIX_FADV_DONTNEED);
    free(buf);
    close(fd);
    *spent += dt;
    if (rc == 0 && dt > 0) mc->buffered_bytes_per_s = (double)len / dt;
    return rc;
}

/* The device under features.bin (the probe's cache when it has one). */
static int measure_probe(const prof_t *p, const tg_cost_plan_opts_t *o, tg_cost_machine_t *mc,
                         tg_cost_profile_cost_t *cost)
{
    char path[4096];
    tg_dataset_path(p->ds, TG_FILE_FEATURES, path, sizeof path);
    tg_io_probe_opts_t po = {.time_s = o->probe_time_s};
    int rc = tg_io_probe_run(path, &po, &mc->probe);
    if (rc < 0) return tg_err_prefix(rc, "plan: probing the device under %s", path);
    cost->probe_s = mc->probe.from_cache ? 0 : mc->probe.time_s;
    cost->probe_cached = mc->probe.from_cache;
    return 0;
}

/* indices.bin read once, sequentially, into the page cache before the profile samples from it
 * when that takes at most WARM_MAX_S at the probed rate and the file is at most a quarter of the
 * RAM: the profile's few batches touch lists all over the file, and cold, page by page, they
 * took 15 s of random reads on the shared bench where the sequential read takes 0.4 s. */
static int warm_indices(const prof_t *p, const tg_cost_machine_t *mc, double *spent)
{
    char path[4096];
    tg_dataset_path(p->ds, TG_FILE_INDICES, path, sizeof path);
    uint64_t size = tg_meta_expected_size(&p->ds->meta, TG_FILE_INDICES);
    *spent = 0;
    if ((double)size / mc->probe.seq_bytes_per_s > WARM_MAX_S || size > tg_phys_mem_bytes() / 4)
        return 0;
    double t0 = tg_now();
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return tg_err(-errno, "plan: %s: cannot open: %s", path, strerror(errno));
    char *buf = malloc(WARM_CHUNK);
    int rc = buf ? 0 : tg_err(-ENOMEM, "plan: out of memory for reading %s", path);
    if (rc == 0) rc = read_span(fd, path, buf, WARM_CHUNK, 0, 0, size);
    free(buf);
    close(fd);
    *spent = tg_now() - t0;
    return rc;
}

/* Whether the strategies that change the sampled graph (hier) have their own batches measured:
 * tiergnn plan and bench always, a training run only where the choice may take them. */
static int own_inexact(const tg_cost_plan_opts_t *o)
{
    return !(o->own == TG_COST_OWN_NONE || (o->own == TG_COST_OWN_TAKEN && !o->allow_inexact));
}

/* The gather rates; hier's loader rates (its list walk, its copy out of the page cache, its
 * buffered reads) only
 * where hier's own batches are measured: a run that cannot take hier spends no profile time
 * on them (its table row then leaves those terms out). */
static int measure_machine(const prof_t *p, const tg_cost_plan_opts_t *o, tg_cost_inputs_t *in,
                           tg_cost_profile_cost_t *cost)
{
    tg_cost_machine_t *mc = &in->machine;
    const tg_meta_t *m = &p->ds->meta;
    mc->cores = o->threads;
    int rc = measure_gather(m, mc, &cost->gather_s);
    if (rc < 0 || !own_inexact(o)) return rc;
    if ((rc = measure_copy(mc, &cost->gather_s)) < 0) return rc;
    if ((rc = measure_buffered(p, mc, &cost->gather_s)) < 0) return rc;
    return measure_filter(m->num_nodes, mc, &cost->gather_s);
}

/* The GEMM at the run's widest layer (the largest batch's layer-0 destinations, as the bench
 * times it): the compute rate where no step could be measured (the step's own rate is the one
 * the model uses; 0.2 s of the profile saved). */
static int measure_gemm(const prof_t *p, const tg_cost_plan_opts_t *o, tg_cost_inputs_t *in,
                        tg_cost_profile_cost_t *cost)
{
    const tg_meta_t *m = &p->ds->meta;
    uint32_t M = TG_MIN(TG_MAX(p->max_dst0, 256u), 16384u);
    uint32_t N =
        o->model.num_layers > 1 || o->model.type == TG_MODEL_GIN ? o->model.hidden : m->num_classes;
    double t0 = tg_now();
    int rc =
        tg_nn_gemm_rate(M, m->feat_dim, TG_MAX(N, 1u), o->threads,
                        o->gemm_time_s > 0 ? o->gemm_time_s : 0.2, &in->machine.gemm_flops_per_s);
    if (rc < 0) return tg_err_prefix(rc, "plan: timing the GEMM");
    cost->gemm_s = tg_now() - t0;
    return 0;
}

/* A thread gathering rows as a loader's does, beside the steps measure_shared times, until
 * told to stop; rows counts what it copied so far. */
typedef struct sharer {
    gsrc_t g;
    atomic_int stop, rc;
    _Atomic uint64_t rows;
} sharer_t;

static void *sharer_main(void *arg)
{
    sharer_t *h = arg;
    tg_rng_t r;
    tg_rng_seed(&r, 2);
    while (!atomic_load(&h->stop)) {
        int rc = gather_once(h->g.src, h->g.n, h->g.width, h->g.es, h->g.rows_x, &r, &h->rows);
        if (rc < 0) {
            atomic_store(&h->rc, rc);
            break;
        }
    }
    return NULL;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double median(double *v, int n)
{
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

/* The step's rate shared with a loader: steps of the measured batch (at least one, for at
 * least RATE_MIN_S) while another thread gathers, against alone, the lone step's seconds. The
 * cores are not shared evenly: the step's threads meet at every parallel loop's end, so a
 * thread of theirs that waits for a core holds up the rest (the ram workload's runs trained
 * 1.3-1.7x slower than the lone step beside their loaders). */
static int measure_shared(tg_model_t *pm, const tg_batch_t *b, const float *X, const int32_t *y,
                          const tg_meta_t *m, int sharers, double alone, tg_cost_machine_t *mc)
{
    sharers = TG_MAX(1, TG_MIN(sharers, SHARERS_MAX));
    sharer_t h = {.rows = 0};
    atomic_init(&h.stop, 0);
    atomic_init(&h.rc, 0);
    int rc = gsrc_open(&h.g, m);
    if (rc < 0) return rc;
    pthread_t t[SHARERS_MAX];
    int nt = 0;
    while (nt < sharers && (rc = pthread_create(&t[nt], NULL, sharer_main, &h)) == 0)
        nt++;
    if (nt < sharers) {
        atomic_store(&h.stop, 1);
        while (nt > 0)
            pthread_join(t[--nt], NULL);
        free(h.g.src);
        return tg_err(-rc, "plan: cannot start the threads that gather beside the step: %s",
                      strerror(rc));
    }
    while (atomic_load(&h.rows) == 0 && atomic_load(&h.rc) == 0)
        sched_yield();
    /* each step's time and the rows gathered meanwhile; the medians: a step that met a
     * scheduling tick's worst placement of the threads counts once, not in the mean */
    double t0 = tg_now(), t1 = t0, k[SHARED_STEPS], g[SHARED_STEPS];
    uint64_t r1 = atomic_load(&h.rows);
    int steps = 0;
    while (rc == 0 && steps < SHARED_STEPS && (steps == 0 || t1 - t0 < SHARED_MIN_S)) {
        tg_step_stats_t st;
        rc = tg_model_train_step(pm, b, X, y, &st);
        if (rc == -ERANGE) rc = 0;
        double t2 = tg_now();
        uint64_t r2 = atomic_load(&h.rows);
        k[steps] = (t2 - t1) / alone;
        g[steps++] = t2 > t1 ? (double)(r2 - r1) / (t2 - t1) : 0;
        t1 = t2, r1 = r2;
    }
    atomic_store(&h.stop, 1);
    while (nt > 0)
        pthread_join(t[--nt], NULL);
    free(h.g.src);
    if (rc == 0) rc = atomic_load(&h.rc);
    if (rc == 0 && alone > 0 && steps > 0) {
        mc->step_shared = fmax(1, median(k, steps));
        mc->gather_shared = fmin(1, median(g, steps) / mc->gather_rows_per_s / sharers);
        mc->sharers = sharers;
    }
    return rc;
}

/* A model and a batch's inputs (features written with a short pattern, labels 0) to time steps
 * with. */
typedef struct {
    tg_model_t *pm;
    tg_pool_t *pool;
    float *X;
    int32_t *y;
} step_t;

static void step_free(step_t *st)
{
    tg_model_destroy(st->pm);
    tg_pool_destroy(st->pool);
    free(st->X);
    free(st->y);
}

static int step_open(const prof_t *p, const tg_cost_plan_opts_t *o, const tg_batch_t *b, step_t *st)
{
    const tg_meta_t *m = &p->ds->meta;
    tg_optim_config_t adam;
    tg_optim_config_default(&adam, TG_OPTIM_ADAM);
    size_t width = m->multi_label ? m->num_classes : 1;
    memset(st, 0, sizeof *st);
    st->X = calloc((size_t)b->num_nodes * m->feat_dim + 1, sizeof *st->X);
    st->y = calloc((size_t)b->num_seeds * width + 1, sizeof *st->y);
    int rc = st->X && st->y ? 0 : tg_err(-ENOMEM, "plan: out of memory for the step's batch");
    /* features written, as a gathered matrix's are: untouched, X would read the one zero page,
     * always in the CPU's cache (the narrow and ram workloads' steps timed 9-18% slower written:
     * 29.8 against 32.7 GFLOP/s, 48.6 against 59.7) */
    for (size_t i = 0; rc == 0 && i < (size_t)b->num_nodes * m->feat_dim; i++)
        st->X[i] = (float)(i % 7) * 0.125f - 0.375f;
    if (rc == 0 && o->threads > 1) rc = tg_pool_create(&st->pool, o->threads);
    if (rc == 0) rc = tg_model_create(&st->pm, &p->cfg, 1);
    if (rc == 0) rc = tg_model_set_optim(st->pm, &adam);
    return rc;
}

/* The first step also allocates; of the STEP_TIMED after it, the fastest is taken (another
 * process that takes a core for a moment lengthens a step, never shortens one), with its CPU
 * seconds: the process runs nothing else meanwhile, so its CPU time over the step is the
 * step's threads'. */
static int step_time(step_t *st, const tg_batch_t *b, double *dt, double *cpu)
{
    double t0 = tg_now();
    int rc = 0;
    *dt = *cpu = 0;
    for (int k = 0; rc == 0 && k <= STEP_TIMED; k++) {
        tg_model_set_pool(st->pm, st->pool);
        tg_step_stats_t ss;
        double t1 = tg_now(), c1 = cpu_s(CLOCK_PROCESS_CPUTIME_ID);
        rc = tg_model_train_step(st->pm, b, st->X, st->y, &ss);
        if (rc == -ERANGE) rc = 0; /* zero features may give a degenerate loss */
        double d = tg_now() - t1, c = cpu_s(CLOCK_PROCESS_CPUTIME_ID) - c1;
        if (k == 0 || d < *dt) *dt = d, *cpu = c;
        /* a first step of over a second is measure enough (as it always was) */
        if ((k == 0 && d > 1.0) || (k >= 1 && tg_now() - t0 > STEP_MAX_S)) break;
    }
    return rc;
}

/* Training steps of a scratch model (the run's configuration, Adam, the run's threads) on the
 * largest profiled batch: the arena it needs, and the rate the steps achieve (its operations
 * over its time), alone and beside gathering threads. */
static int measure_step(prof_t *p, const tg_cost_plan_opts_t *o, tg_cost_machine_t *mc,
                        double *spent)
{
    const tg_batch_t *b = &p->largest;
    const tg_meta_t *m = &p->ds->meta;
    step_t st;
    double t0 = tg_now(), dt = 0, cpu = 0;
    int rc = step_open(p, o, b, &st);
    if (rc == 0) rc = step_time(&st, b, &dt, &cpu);
    *spent = tg_now() - t0;
    if (rc == 0) {
        tg_flops_t f;
        if ((rc = tg_model_batch_flops(&p->cfg, b, &f)) == 0 && dt > 0)
            mc->step_flops_per_s = (double)tg_flops_total(&f) / dt;
        mc->step_cpu_ratio = dt > 0 && cpu > 0 ? cpu / dt : 0;
        p->act_bytes = tg_model_act_bytes(st.pm);
        rc = measure_shared(st.pm, b, st.X, st.y, m,
                            o->sampler_threads < 0 ? o->threads : o->sampler_threads, dt, mc);
    }
    step_free(&st);
    /* the process as the budget plan will measure it, after a step has set up OpenBLAS: its
     * anonymous memory less what the profile itself still holds (the seed order, the batch),
     * its freed heap given back first (as the run does after the planner) */
#ifdef __GLIBC__
    malloc_trim(0);
#endif
    uint64_t rss = tg_rss_anon_bytes(), held = p->ntrain * 8 + tg_batch_bytes(b);
#ifdef TG_SANITIZE
    (void)rss;
    (void)held;
    p->overhead = ((uint64_t)16 << 20) + OVERHEAD_SLACK;
#else
    p->overhead = (rss > held ? rss - held : 0) + OVERHEAD_SLACK;
#endif
    return rc < 0 ? tg_err_prefix(rc, "plan: measuring a training step") : 0;
}

/* ---------------------------------------------------------------- the dataset and the run */

/* Which derived files exist, valid, in the derived directory (any parameters). */
static int derived_have(const tg_dataset_t *ds, unsigned *have)
{
    tg_derived_entry_t *e = NULL;
    size_t n = 0;
    int rc = tg_derived_list(ds, NULL, &e, &n);
    if (rc < 0) return tg_err_prefix(rc, "plan: listing the derived files");
    *have = 0;
    for (size_t i = 0; i < n; i++) {
        if (e[i].state != TG_DERIVED_VALID) continue;
        if (!strcmp(e[i].kind, "partadj")) *have |= TG_COST_HAVE_PARTS;
        if (!strcmp(e[i].kind, "rank")) *have |= TG_COST_HAVE_RANK;
        if (!strcmp(e[i].kind, "outdeg")) *have |= TG_COST_HAVE_OUTDEG;
        if (!strcmp(e[i].kind, "ncache")) *have |= TG_COST_HAVE_NCACHE;
    }
    free(e);
    return 0;
}

static int fill_dataset(const prof_t *p, const char *dir, tg_cost_inputs_t *in)
{
    const tg_meta_t *m = &p->ds->meta;
    tg_cost_dataset_t *d = &in->data;
    d->nodes = m->num_nodes;
    d->edges = m->num_edges;
    d->feat_dim = m->feat_dim;
    d->dtype_bytes = (uint32_t)tg_feat_dtype_size(m->feat_dtype);
    d->index_bytes = (uint32_t)tg_index_dtype_size(m->index_dtype);
    d->train_frac = (double)p->ntrain / (double)m->num_nodes;
    d->degree_skew = tg_cost_bins_skew(&p->bins);
    struct statvfs sv;
    if (statvfs(dir, &sv) != 0)
        return tg_err(-errno, "plan: statvfs %s (the free disk beside the dataset): %s", dir,
                      strerror(errno));
    in->run.disk_free = (uint64_t)sv.f_bavail * sv.f_frsize;
    return derived_have(p->ds, &d->derived);
}

/* What the budget plan reserves before the strategy's matrices and caches: the process, the
 * model with Adam's state, one step's arena on the largest profiled batch (measured, with the
 * plan's margin) and the run's own data (labels, splits, the seed order). */
static uint64_t reserved_bytes(const prof_t *p)
{
    const tg_meta_t *m = &p->ds->meta;
    tg_optim_config_t adam;
    tg_optim_config_default(&adam, TG_OPTIM_ADAM);
    uint64_t own = (m->num_nodes * (m->multi_label ? m->num_classes : 1)) * sizeof(int32_t) +
                   (m->num_train + m->num_valid + m->num_test + p->ntrain) * sizeof(uint64_t);
    return (uint64_t)((double)p->act_bytes * SIZE_MARGIN) +
           tg_model_config_param_bytes(&p->cfg, &adam) + p->overhead + own;
}

/* The run: the epoch's operations and batches from the profile, --mem less what the budget
 * plan reserves first: what the input matrices and the caches share. */
static void fill_run(const prof_t *p, const tg_cost_plan_opts_t *o, tg_cost_inputs_t *in,
                     uint64_t profiled)
{
    const tg_meta_t *m = &p->ds->meta;
    tg_cost_run_t *r = &in->run;
    double scale = (double)p->plan.num_batches / (double)profiled;
    r->epoch_flops = p->flops * scale;
    r->batch_size = o->batch_size;
    r->epochs = (int)TG_MIN(o->epochs, (uint64_t)1 << 30);
    /* sampler threads left to their default: no more than the epoch has batches (the others
     * would hold no batch; the budget plan lowers them too where --mem is tight) */
    r->sampler_threads = TG_MAX(o->sampler_threads < 0 ? o->threads : o->sampler_threads, 1);
    if (o->sampler_threads < 0)
        r->sampler_threads =
            (int)TG_MAX(1, TG_MIN((uint64_t)r->sampler_threads, p->plan.num_batches));
    r->matrix_bytes = (uint64_t)((double)p->max_rows * m->feat_dim * sizeof(float) * SIZE_MARGIN);
    /* the run's budget: --mem within its cgroup's limit (less the kernel's margin) */
    char why[256];
    uint64_t cg = o->cgroup_limit < 0 ? tg_cgroup_mem_limit() : (uint64_t)o->cgroup_limit;
    uint64_t mem = tg_budget_effective(o->mem_bytes, cg, why, sizeof why);
    if (!mem) mem = tg_phys_mem_bytes() / 4;
    uint64_t res = reserved_bytes(p);
    r->free_bytes = mem > res ? mem - res : 0;
    r->cache_slack = cg > mem ? cg - mem : 0;
    r->disk_budget = o->disk_budget;
    tg_cost_profile_t *pr = &in->prof;
    pr->batches = p->plan.num_batches;
    pr->rows_per_batch = (double)p->rows / (double)profiled;
    pr->index_reads_per_batch = (double)p->lists / (double)profiled;
    pr->index_bytes_per_batch = p->index_bytes / (double)profiled;
    pr->feat_pages_per_batch = p->feat_pages / (double)profiled;
    pr->index_pages_per_batch = p->index_pages / (double)profiled;
    tg_cost_bins_curves(&p->bins, profiled, pr->batches, pr);
    /* gids ranks rows by reverse PageRank (derived/, when built): how often the samplers reach
     * a node, which its degree stands in for here (the ranking is not read) */
    pr->hot_rpr = pr->hot_degree;
}

/* The context of the strategies' own measures: the profile's graph and the run's sampling. */
static tg_cost_measure_t measure_ctx(const prof_t *p, const tg_cost_plan_opts_t *o,
                                     const tg_cost_inputs_t *in)
{
    const tg_meta_t *m = &p->ds->meta;
    return (tg_cost_measure_t){
        .adj = p->adj,
        .train = p->train,
        .ntrain = p->ntrain,
        .sampler = o->model.type == TG_MODEL_MLP ? NULL : o->sampler,
        .model = &p->cfg,
        .num_layers = o->model.num_layers,
        .fanouts = p->fan,
        .batch_size = o->batch_size,
        .seed = o->seed,
        .epoch_batches = p->plan.num_batches,
        .limited = o->batches_per_epoch && o->batch_size &&
                   p->plan.num_batches < (p->ntrain + o->batch_size - 1) / o->batch_size,
        .batches = tg_cost_profile_batches(p->plan.num_batches),
        .free_bytes = in->run.free_bytes,
        .matrix_row_bytes = (double)m->feat_dim * sizeof(float) * SIZE_MARGIN,
        .max_rows = p->max_rows,
        .act_bytes = (uint64_t)((double)p->act_bytes * SIZE_MARGIN)};
}

/* A step timed on a strategy's own largest batch (hier's come from a mega-batch's subgraph, of
 * another shape than the whole graph's: on narrow half the rows with about as many sampled
 * edges), rather than the whole graph's rate per operation taken for them (they came out alike
 * there, 29.5 against 29.8 GFLOP/s; few 59.7 against 64.0). */
static int own_step(const prof_t *p, const tg_cost_plan_opts_t *o, const tg_batch_t *b,
                    tg_cost_plan_t *pl)
{
    step_t st;
    double t0 = tg_now(), dt = 0, cpu = 0;
    int rc = step_open(p, o, b, &st);
    if (rc == 0) rc = step_time(&st, b, &dt, &cpu);
    tg_flops_t f;
    if (rc == 0 && (rc = tg_model_batch_flops(&p->cfg, b, &f)) == 0 && dt > 0)
        pl->in.prof.own.step_flops_per_s = (double)tg_flops_total(&f) / dt;
    step_free(&st);
    pl->cost.own_s += tg_now() - t0;
    return rc < 0 ? tg_err_prefix(rc, "plan: timing a step on a strategy's own batch") : 0;
}

/* Each strategy's least working set on the dataset with the run's options (min_bytes), for the
 * choice to refuse those the run would refuse, and the measures of those with batches of their
 * own (plan_measure). */
static int working_sets(const prof_t *p, const tg_cost_plan_opts_t *o, tg_cost_plan_t *pl)
{
    tg_cost_measure_t mx = measure_ctx(p, o, &pl->in);
    tg_batch_t own;
    int kept = 0, rc = 0;
    mx.keep = &own, mx.kept = &kept;
    for (int i = 0; i < tg_strategy_count() && i < TG_COST_MAX_STRATS; i++) {
        const tg_strategy_i *s = tg_strategy_at(i);
        void *cfg = calloc(1, s->info.config_size + 1);
        if (!cfg) return tg_err(-ENOMEM, "plan: out of memory");
        tg_strategy_opts_t so;
        tg_strategy_opts_default(&so);
        so.threads = o->threads;
        so.sampler_threads = o->sampler_threads < 0 ? o->threads : o->sampler_threads;
        so.cfg = cfg;
        rc = tg_strategy_parse(&s->info, o->strategy_args, o->num_strategy_args, cfg, 0);
        char why[512];
        if (rc == 0) pl->need[i] = (double)s->min_bytes(p->ds, &so, why, sizeof why);
        /* a batch-size-free run (whole graph) has no batches of its own to measure */
        int skip = o->own == TG_COST_OWN_NONE ||
                   ((s->info.caps & TG_STRAT_CHANGES_GRAPH) && !own_inexact(o));
        if (rc == 0 && s->plan_measure && o->batch_size && !skip) {
            double t0 = tg_now();
            if ((rc = s->plan_measure(p->ds, &so, &mx, &pl->in.prof)) < 0)
                tg_err_prefix(rc, "plan: %s's own batches", s->info.name);
            pl->cost.own_s += tg_now() - t0;
        }
        free(cfg);
        if (rc < 0) break;
    }
    if (kept && rc == 0) rc = own_step(p, o, &own, pl);
    if (kept) tg_batch_free(&own);
    return rc;
}

static int check_opts(const tg_cost_plan_opts_t *o)
{
    if (!o->dataset || !*o->dataset) return tg_err(-EINVAL, "plan: no dataset");
    if (o->model.num_layers < 1 || o->model.num_layers > TG_MAX_LAYERS)
        return tg_err(-EINVAL, "plan: %d layers, expected 1..%d", o->model.num_layers,
                      TG_MAX_LAYERS);
    if (o->threads < 1) return tg_err(-EINVAL, "plan: %d threads, expected >= 1", o->threads);
    if (o->epochs < 1) return tg_err(-EINVAL, "plan: --epochs must be >= 1");
    return 0;
}

int tg_cost_plan(const tg_cost_plan_opts_t *o, tg_cost_plan_t *pl)
{
    memset(pl, 0, sizeof *pl);
    pl->best = -1;
    int rc = check_opts(o);
    if (rc < 0) return rc;
    double t0 = tg_now();
    prof_t p;
    memset(&p, 0, sizeof p);
    tg_cost_inputs_t *in = &pl->in;
    if ((rc = prof_open(&p, o)) == 0) rc = measure_probe(&p, o, &in->machine, &pl->cost);
    if (rc == 0) rc = warm_indices(&p, &in->machine, &pl->cost.warm_s);
    if (rc == 0) {
        prof_degrees(&p);
        rc = prof_sample(&p, o, in, &pl->cost);
    }
    if (rc == 0) rc = measure_machine(&p, o, in, &pl->cost);
    if (rc == 0) rc = measure_step(&p, o, &in->machine, &pl->cost.step_s);
    if (rc == 0 && !(in->machine.step_flops_per_s > 0)) rc = measure_gemm(&p, o, in, &pl->cost);
    if (rc == 0) rc = fill_dataset(&p, o->dataset, in);
    if (rc == 0) fill_run(&p, o, in, pl->cost.batches_profiled);
    if (rc == 0) pl->process_bytes = p.overhead;
    if (rc == 0) rc = working_sets(&p, o, pl);
    if (rc == 0 && !o->disk_budget)
        in->run.disk_budget = pl->disk_budget_planned = tg_cost_disk_budget(in);
    prof_close(&p);
    pl->cost.total_s = tg_now() - t0;
    if (rc < 0) return rc;
    return tg_cost_plan_choose(in, o->allow_inexact, pl);
}
