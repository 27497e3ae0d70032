/* The cost model's shared arithmetic and the choice over the strategy table (plan_cost.h). */
#include "plan_cost.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "engine-impl.h"
#include "tiergnn/extract.h"
#include "tiergnn/featbuf.h"
#include "xpass.h"

/* store/extract's plan: holes up to the probe's gap are read through, merged runs are cut at
 * FEAT_SPAN, the gap is at most half of it; without a gap adjacent rows merge up to 16 KiB. */
#define MERGE_SPAN ((double)(64 << 10))
#define ADJACENT_SPAN ((double)(16 << 10))
/* O_DIRECT reads are whole 512-byte blocks: a neighbour list read carries about one more. */
#define DIO_BLOCK 512.0
/* The probe's random reads (io/probe.c): their transfer is in its rate. */
#define PROBE_READ 4096.0
/* A sampler's neighbour-list reads in flight (engine/xpass.c's queue depth per sampler). */
#define ADJ_DEPTH 64.0

static int bad(const char *name, const char *what)
{
    return tg_err(-EINVAL, "cost model: %s %s", name, what);
}

static int check_machine(const tg_cost_machine_t *m)
{
    if (!(m->probe.seq_bytes_per_s > 0))
        return bad("machine.probe.seq_bytes_per_s", "(sequential bandwidth) must be > 0");
    if (m->probe.ndepths == 0 || m->probe.ndepths > TG_IO_PROBE_MAX_DEPTHS)
        return bad("machine.probe.ndepths", "must be 1..TG_IO_PROBE_MAX_DEPTHS");
    for (unsigned i = 0; i < m->probe.ndepths; i++) {
        if (!(m->probe.iops[i] > 0) || m->probe.depth[i] == 0)
            return bad("machine.probe.iops", "(random reads/s at each depth) must be > 0");
        if (i && m->probe.depth[i] <= m->probe.depth[i - 1])
            return bad("machine.probe.depth", "must increase");
    }
    if (!(m->gemm_flops_per_s > 0) && !(m->step_flops_per_s > 0))
        return bad("machine.gemm_flops_per_s", "(or step_flops_per_s) must be > 0");
    if (!(m->sample_nodes_per_s > 0))
        return bad("machine.sample_nodes_per_s", "(the sampler's rate) must be > 0");
    if (!(m->gather_rows_per_s > 0))
        return bad("machine.gather_rows_per_s", "(the gather rate) must be > 0");
    if (m->step_cpu_ratio < 0) return bad("machine.step_cpu_ratio", "must be >= 0");
    if (m->buffer_rows_per_s < 0 || m->window_rows_per_s < 0)
        return bad("machine.buffer_rows_per_s", "(and window_rows_per_s) must be >= 0");
    if (m->step_shared < 0 || m->sharers < 0 || !(m->gather_shared >= 0 && m->gather_shared <= 1))
        return bad("machine.step_shared",
                   "(and sharers >= 0, gather_shared in 0..1: the step beside gathering) must be "
                   ">= 0");
    if (m->buffered_bytes_per_s < 0) return bad("machine.buffered_bytes_per_s", "must be >= 0");
    if (m->cores < 1) return bad("machine.cores", "must be >= 1");
    return 0;
}

static int check_curve(const tg_cost_curve_t *c, const char *name)
{
    if (c->n < 0 || c->n > TG_COST_CURVE_MAX) return bad(name, "has a bad point count");
    for (int i = 1; i < c->n; i++)
        if (!(c->x[i] > c->x[i - 1])) return bad(name, "points must have increasing x");
    return 0;
}

static int check_profile(const tg_cost_profile_t *p)
{
    if (p->batches == 0) return bad("profile.batches", "must be >= 1");
    if (!(p->rows_per_batch > 0)) return bad("profile.rows_per_batch", "must be > 0");
    if (p->index_reads_per_batch < 0 || p->index_bytes_per_batch < 0)
        return bad("profile.index_reads_per_batch", "must be >= 0");
    if (p->feat_pages_per_batch < 0 || p->index_pages_per_batch < 0)
        return bad("profile.feat_pages_per_batch", "(and index_pages_per_batch) must be >= 0");
    if (p->own.step_flops_per_s < 0 || p->own.load_bytes_per_s < 0)
        return bad("profile.own.step_flops_per_s", "(and load_bytes_per_s) must be >= 0");
    int rc;
    if ((rc = check_curve(&p->belady, "profile.belady")) < 0 ||
        (rc = check_curve(&p->lru, "profile.lru")) < 0 ||
        (rc = check_curve(&p->hot_degree, "profile.hot_degree")) < 0 ||
        (rc = check_curve(&p->hot_rpr, "profile.hot_rpr")) < 0 ||
        (rc = check_curve(&p->ncache_hit, "profile.ncache_hit")) < 0)
        return rc;
    return 0;
}

int tg_cost_check(const tg_cost_inputs_t *in)
{
    int rc = check_machine(&in->machine);
    if (rc < 0) return rc;
    const tg_cost_dataset_t *d = &in->data;
    if (d->nodes == 0) return bad("data.nodes", "must be >= 1");
    if (d->feat_dim == 0) return bad("data.feat_dim", "must be >= 1");
    if (d->dtype_bytes == 0) return bad("data.dtype_bytes", "must be >= 1");
    if (d->index_bytes == 0) return bad("data.index_bytes", "must be >= 1");
    if (!(in->run.epoch_flops > 0)) return bad("run.epoch_flops", "must be > 0");
    if (in->run.epochs < 1) return bad("run.epochs", "must be >= 1");
    if (in->run.sampler_threads < 1) return bad("run.sampler_threads", "must be >= 1");
    return check_profile(&in->prof);
}

double tg_cost_curve_at(const tg_cost_curve_t *c, double x)
{
    if (c->n <= 0) return 0;
    if (x <= c->x[0]) return c->y[0];
    for (int i = 1; i < c->n; i++)
        if (x <= c->x[i]) {
            double t = (x - c->x[i - 1]) / (c->x[i] - c->x[i - 1]);
            return c->y[i - 1] + t * (c->y[i] - c->y[i - 1]);
        }
    return c->y[c->n - 1];
}

double tg_cost_iops(const tg_cost_machine_t *m, double depth)
{
    const tg_io_probe_t *p = &m->probe;
    tg_cost_curve_t c = {.n = (int)p->ndepths};
    /* a deeper queue never serves fewer reads: a probe taken while another process loads the
     * disk can read less at depth 4 than at 1 (bench/README.md, "The planner's acceptance
     * bench"), which is the other load, not the device */
    for (unsigned i = 0; i < p->ndepths; i++) {
        c.x[i] = log2((double)p->depth[i]);
        c.y[i] = i ? fmax(p->iops[i], c.y[i - 1]) : p->iops[i];
    }
    return tg_cost_curve_at(&c, log2(depth < 1 ? 1 : depth));
}

double tg_cost_best_depth(const tg_cost_machine_t *m)
{
    if (m->probe.best_depth) return m->probe.best_depth;
    return m->probe.depth[m->probe.ndepths - 1];
}

double tg_cost_random_s(const tg_cost_machine_t *m, double reads, double bytes, double depth)
{
    return reads / tg_cost_iops(m, depth) + tg_cost_seq_s(m, fmax(0, bytes - reads * PROBE_READ));
}

double tg_cost_reader_s(const tg_cost_inputs_t *in, const tg_cost_pred_t *p, double depth)
{
    return fmax(p->row_io_s, tg_cost_random_s(&in->machine, p->reads, p->read_bytes, depth));
}

double tg_cost_seq_s(const tg_cost_machine_t *m, double bytes)
{
    return bytes / m->probe.seq_bytes_per_s;
}

double tg_cost_row_bytes(const tg_cost_inputs_t *in)
{
    return (double)in->data.feat_dim * in->data.dtype_bytes;
}

double tg_cost_feat_bytes(const tg_cost_inputs_t *in)
{
    return tg_cost_row_bytes(in) * (double)in->data.nodes;
}

double tg_cost_accesses(const tg_cost_inputs_t *in)
{
    return in->prof.rows_per_batch * (double)in->prof.batches;
}

double tg_cost_compute_s(const tg_cost_inputs_t *in)
{
    const tg_cost_machine_t *m = &in->machine;
    double rate =
        m->step_flops_per_s > 0 ? m->step_flops_per_s : m->gemm_flops_per_s * TG_COST_STEP_EFF;
    return in->run.epoch_flops / rate;
}

double tg_cost_compute_cpu_s(const tg_cost_inputs_t *in, double compute_s)
{
    double r = in->machine.step_cpu_ratio;
    return compute_s * (r > 0 ? r : 1);
}

double tg_cost_sample_s(const tg_cost_inputs_t *in)
{
    return tg_cost_accesses(in) / in->machine.sample_nodes_per_s;
}

double tg_cost_gather_s(const tg_cost_inputs_t *in)
{
    return tg_cost_accesses(in) / in->machine.gather_rows_per_s;
}

double tg_cost_buffer_gather_s(const tg_cost_inputs_t *in, double rows, int window)
{
    const tg_cost_machine_t *m = &in->machine;
    double rate = window ? m->window_rows_per_s : m->buffer_rows_per_s;
    return rows / (rate > 0 ? rate : m->gather_rows_per_s);
}

double tg_cost_cache_bytes(const tg_cost_inputs_t *in, int matrices)
{
    double left = (double)in->run.free_bytes - matrices * (double)in->run.matrix_bytes;
    return left > 0 ? left : 0;
}

/* Strategy s's batches_in_flight with its default options at `threads` sampler threads (2
 * where it has none to ask). */
static int in_flight_at(const tg_strategy_i *s, const tg_cost_inputs_t *in, int threads)
{
    union {
        unsigned char bytes[1024];
        int64_t align_;
    } cfg;
    if (!s->batches_in_flight || s->info.config_size > sizeof cfg.bytes) return 2;
    if (tg_strategy_parse(&s->info, NULL, 0, cfg.bytes, 0) < 0) return 2;
    tg_strategy_opts_t o;
    tg_strategy_opts_default(&o);
    o.threads = in->machine.cores;
    o.sampler_threads = threads;
    o.cfg = cfg.bytes;
    return s->batches_in_flight(&o);
}

/* A pass holds no more matrices than it has batches (a whole-graph epoch: one). */
static int capped(const tg_cost_inputs_t *in, int k)
{
    return in->prof.batches && (uint64_t)k > in->prof.batches ? (int)in->prof.batches : k;
}

int tg_cost_matrices(const tg_strategy_i *s, const tg_cost_inputs_t *in)
{
    return capped(in, in_flight_at(s, in, in->run.sampler_threads));
}

int tg_cost_sampler_threads(const tg_strategy_i *s, const tg_cost_inputs_t *in, double fit)
{
    /* as the budget plan's fit_step: a thread fewer while the matrices do not fit and one fewer
     * holds fewer (engine/budget.c) */
    int t = TG_MAX(in->run.sampler_threads, 1);
    while (t > 1 && capped(in, in_flight_at(s, in, t)) > fit &&
           in_flight_at(s, in, t - 1) < in_flight_at(s, in, t))
        t--;
    return t;
}

/* The hole (in rows) store/extract reads through: the bytes the disk transfers in the time of
 * one random read at the best depth, at most half a merged read. */
static double gap_rows(const tg_cost_inputs_t *in)
{
    const tg_cost_machine_t *m = &in->machine;
    double gap = m->probe.seq_bytes_per_s / tg_cost_iops(m, tg_cost_best_depth(m));
    gap = fmin(gap, MERGE_SPAN / 2);
    return floor(gap / tg_cost_row_bytes(in));
}

/* rows spread uniformly over the file, holes of at most g rows read through, reads of at most
 * span bytes: the reads and their bytes */
static void merge_runs(const tg_cost_inputs_t *in, double rows, double g, double span,
                       double *reads, double *bytes)
{
    double n = (double)in->data.nodes, row = tg_cost_row_bytes(in);
    *reads = *bytes = 0;
    if (rows <= 0) return;
    double p = fmin(rows / n, 1.0);
    /* holes between consecutive rows read are geometric: P(h = k) = p (1 - p)^k */
    double through = 0, pk = p;
    for (double k = 0; k <= g; k++, pk *= 1 - p)
        through += k * pk;
    double new_run = pow(1 - p, g + 1);
    *bytes = fmin(rows * row * (1 + through), n * row);
    *reads = fmax(fmax(rows * new_run, *bytes / span), 1);
}

void tg_cost_merge(const tg_cost_inputs_t *in, double rows, double *reads, double *bytes)
{
    double g = gap_rows(in);
    merge_runs(in, rows, g, g > 0 ? MERGE_SPAN : ADJACENT_SPAN, reads, bytes);
}

double tg_cost_fill_s(const tg_cost_inputs_t *in, double rows)
{
    double reads, bytes;
    merge_runs(in, rows, floor((double)TG_TIER_FILL_GAP / tg_cost_row_bytes(in)),
               (double)TG_TIER_FILL_SPAN, &reads, &bytes);
    return rows > 0 ? tg_cost_random_s(&in->machine, reads, bytes, TG_TIER_FILL_RUNS) : 0;
}

/* The feature file's dtype, from its element size. */
static tg_feat_dtype_t dtype_of(const tg_cost_inputs_t *in)
{
    return in->data.dtype_bytes == 2 ? TG_F16 : TG_F32;
}

/* Two jobs run at once, each alone taking a (b) seconds and ac (bc) beside the other: the one
 * done first beside the other (in its shared time), the other's rest alone. */
static double two_jobs(double a, double ac, double b, double bc)
{
    if (!(a > 0) || !(b > 0)) return fmax(a, b);
    if (ac > bc) return two_jobs(b, bc, a, ac);
    return ac + (1 - ac / bc) * b;
}

/* The trainer beside the loader, at the rates the profile measured them at together
 * (step_shared, gather_shared): the loader's CPU terms run on its sampler threads, each at
 * gather_shared of its lone rate while steps run, and alone as fast as its threads allow;
 * never faster than its slowest stage, whose computing slows beside the steps as a gathering
 * thread's does and whose waits on the disk do not (the shared bench's diskgnn: its executor
 * read and copied for 8.7 s of a 10.4 s epoch, for 4.3 s of reads and 3 s of copies alone).
 * 0: not measured. */
static double shared_s(const tg_cost_inputs_t *in, const tg_cost_pred_t *p)
{
    const tg_cost_machine_t *m = &in->machine;
    if (!(m->step_shared > 0) || !(m->gather_shared > 0) || m->sharers < 1) return 0;
    double loader = p->sample_s + p->gather_s, g = m->gather_shared;
    double cpu = fmin(p->stage_cpu_s, p->stage_s), stage = p->stage_s - cpu + cpu / g;
    double alone = fmax(p->stage_s, loader / (m->sharers < m->cores ? m->sharers : m->cores));
    double beside = fmax(stage, loader / (m->sharers * g));
    return two_jobs(p->compute_s, p->compute_s * m->step_shared, alone, beside);
}

void tg_cost_overlap(const tg_cost_inputs_t *in, tg_cost_pred_t *p)
{
    p->cpu_s = p->sample_s + p->gather_s + tg_cost_compute_cpu_s(in, p->compute_s);
    /* the extractors' row reads keep their own depth whatever the samplers add beside them
     * (wide: gnndrive's and pagraph's 8 reads in flight, 0.68M row reads at the probe's 43k/s
     * at that depth: 17.5 s; the two streams' depths summed gave 12.4 s, measured 17.8) */
    double busiest = fmax(fmax(p->io_s, p->row_io_s), fmax(p->compute_s, p->stage_s));
    p->steady_s = fmax(fmax(busiest, p->cpu_s / in->machine.cores), shared_s(in, p));
    p->epoch_s = p->steady_s + p->prep_s;
}

double tg_cost_extract_depth(const tg_cost_inputs_t *in, int extractors, int featbuf,
                             unsigned depth_hint, double avail, double *plan_bytes,
                             tg_extract_plan_t *plan)
{
    tg_extract_plan_opts_t po;
    tg_extract_plan_opts_default(&po);
    po.num_nodes = in->data.nodes;
    po.feat_dim = in->data.feat_dim;
    po.dtype = dtype_of(in);
    po.extractors = extractors < 1 ? 1 : extractors;
    po.featbuf = featbuf;
    po.depth_hint = depth_hint;
    po.probe = &in->machine.probe;
    po.avail = (uint64_t)fmax(avail, 1);
    po.other_transient = tg_xpass_adj_transient(tg_xpass_adj_queues(in->run.sampler_threads));
    tg_extract_plan_t pl;
    if (plan_bytes) *plan_bytes = 0;
    if (plan) memset(plan, 0, sizeof *plan);
    if (tg_extract_plan(&pl, &po) < 0) return tg_cost_best_depth(&in->machine);
    if (plan_bytes) *plan_bytes = (double)(tg_extract_plan_bytes(&pl) + po.other_transient);
    if (plan) *plan = pl;
    return (double)pl.depth * po.extractors;
}

double tg_cost_featbuf_rows(const tg_cost_inputs_t *in, const tg_featbuf_opts_t *fo, double bytes)
{
    uint32_t lo = 0, hi = (uint32_t)fmin((double)in->data.nodes, (double)UINT32_MAX - 1);
    if ((double)tg_featbuf_bytes_for(fo, hi) <= bytes) return hi;
    while (lo + 1 < hi) {
        uint32_t mid = lo + (hi - lo) / 2;
        if ((double)tg_featbuf_bytes_for(fo, mid) <= bytes)
            lo = mid;
        else
            hi = mid;
    }
    return lo;
}

double tg_cost_static_rows(const tg_cost_inputs_t *in, double room, double per_row, double fixed)
{
    const tg_cost_dataset_t *d = &in->data;
    return (double)tg_tier_static_fit(d->nodes, d->feat_dim, dtype_of(in), (uint64_t)fmax(room, 0),
                                      (uint64_t)per_row, (uint64_t)fixed);
}

double tg_cost_static_bytes(const tg_cost_inputs_t *in, double rows)
{
    const tg_cost_dataset_t *d = &in->data;
    return (double)tg_tier_static_bytes(d->nodes, d->feat_dim, dtype_of(in), (uint64_t)rows);
}

void tg_cost_disk_epoch(const tg_cost_inputs_t *in, double misses, double hit_idx, double depth,
                        tg_cost_pred_t *p)
{
    const tg_cost_profile_t *pr = &in->prof;
    double b = (double)pr->batches, reads, bytes;
    tg_cost_merge(in, misses / b, &reads, &bytes);
    double idx_reads = pr->index_reads_per_batch * b * (1 - hit_idx);
    double idx_bytes = pr->index_bytes_per_batch * b * (1 - hit_idx) + idx_reads * DIO_BLOCK;
    const tg_cost_machine_t *m = &in->machine;
    double best = tg_cost_best_depth(m);
    /* the samplers' list reads and the extraction's row reads run at once: the device sees
     * both streams' reads in flight */
    double row_depth = depth > 0 ? depth : best;
    double idx_depth = idx_reads > 0 ? ADJ_DEPTH * in->run.sampler_threads : 0;
    double both = row_depth + idx_depth;
    p->read_bytes = bytes * b + idx_bytes;
    p->reads = reads * b + idx_reads;
    p->row_io_s = tg_cost_random_s(m, reads * b, bytes * b, row_depth);
    p->io_s = tg_cost_random_s(m, reads * b + idx_reads, bytes * b + idx_bytes, both);
    p->sample_s = tg_cost_sample_s(in);
    p->gather_s = tg_cost_gather_s(in);
    p->compute_s = tg_cost_compute_s(in);
    tg_cost_overlap(in, p);
}

double tg_cost_open_bytes(const tg_cost_inputs_t *in)
{
    return (double)tg_xpass_adj_bytes_n(in->data.nodes,
                                        tg_xpass_adj_queues(in->run.sampler_threads));
}

int tg_cost_indices_fit(const tg_cost_inputs_t *in, double left)
{
    double idx = ceil((double)in->data.edges * in->data.index_bytes / 4096) * 4096;
    return idx > 0 && left >= idx;
}

double tg_cost_lru_misses(const tg_cost_inputs_t *in, double rows)
{
    const tg_cost_profile_t *pr = &in->prof;
    double N = (double)in->data.nodes, d = fmin(pr->distinct_rows, N);
    if (rows >= N && d > 0) return d * (1 - d / N);
    return pr->lru.n ? tg_cost_curve_at(&pr->lru, rows) : tg_cost_accesses(in);
}

void tg_cost_infeasible(tg_cost_pred_t *p, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(p->why, sizeof p->why, fmt, ap);
    va_end(ap);
    p->feasible = 0;
}

/* ---------------------------------------------------------------- the choice */

static int eligible(const tg_strategy_i *s, const tg_cost_pred_t *p, int allow_inexact)
{
    if (!p->predicted || !p->feasible) return 0;
    return !(s->info.caps & TG_STRAT_CHANGES_GRAPH) || allow_inexact;
}

static void note(tg_cost_pred_t *p, const char *what)
{
    size_t n = strlen(p->why);
    snprintf(p->why + n, sizeof p->why - n, "%s%s", n ? "; " : "", what);
}

int tg_cost_choose_in(const tg_strategy_i *const *table, int n, const tg_cost_inputs_t *in,
                      int allow_inexact, tg_cost_pred_t *pred, int *best)
{
    *best = -1;
    int rc = tg_cost_check(in);
    if (rc < 0) return rc;
    for (int i = 0; i < n; i++) {
        tg_cost_pred_t *p = &pred[i];
        memset(p, 0, sizeof *p);
        if (!table[i]->predict) {
            snprintf(p->why, sizeof p->why, "no cost model: skipped");
            continue;
        }
        p->feasible = 1;
        if ((rc = table[i]->predict(in, p)) < 0) return rc;
        p->predicted = 1;
        if (p->feasible && !eligible(table[i], p, allow_inexact))
            note(p, "not taken: inexact strategies not allowed");
        if (eligible(table[i], p, allow_inexact) && (*best < 0 || p->epoch_s < pred[*best].epoch_s))
            *best = i;
    }
    return 0;
}

int tg_cost_choose(const tg_cost_inputs_t *in, int allow_inexact, tg_cost_pred_t *pred, int max,
                   int *best)
{
    const tg_strategy_i *table[TG_COST_MAX_STRATS];
    int n = tg_strategy_count();
    if (n > max || n > TG_COST_MAX_STRATS)
        return tg_err(-EINVAL, "cost model: %d strategies, room for %d predictions", n,
                      TG_MIN(max, TG_COST_MAX_STRATS));
    for (int i = 0; i < n; i++)
        table[i] = tg_strategy_at(i);
    return tg_cost_choose_in(table, n, in, allow_inexact, pred, best);
}
