/* The planner's arithmetic over degree classes, its choice and its table (plan_profile.h). */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "engine-impl.h"
#include "plan_profile.h"

#define GIB (1024.0 * 1024.0 * 1024.0)

/* ---------------------------------------------------------------- degree classes */

int tg_cost_degree_bin(uint64_t d)
{
    if (d == 0) return 0;
    int lz = 63 - __builtin_clzll(d);
    unsigned frac = lz >= 2 ? (unsigned)(d >> (lz - 2)) & 3u : (unsigned)(d << (2 - lz)) & 3u;
    return 1 + 4 * lz + (int)frac;
}

double tg_cost_bins_skew(const tg_cost_bins_t *b)
{
    double nodes = 0, edges = 0;
    for (int i = 0; i < TG_COST_BINS; i++)
        nodes += b->nodes[i], edges += b->edges[i];
    if (!(edges > 0)) return 0;
    double want = 0.01 * nodes, took = 0, held = 0;
    for (int i = TG_COST_BINS - 1; i >= 0 && took < want; i--) {
        if (!(b->nodes[i] > 0)) continue;
        double f = fmin(1, (want - took) / b->nodes[i]);
        took += f * b->nodes[i];
        held += f * b->edges[i];
    }
    return held / edges;
}

/* A class's per-batch access probability, epoch accesses and rows touched in the epoch. */
typedef struct {
    double n, q, acc, touched;
} cls_t;

static int classes(const tg_cost_bins_t *b, uint64_t profiled, uint64_t batches, cls_t *c)
{
    int k = 0;
    double B = (double)batches;
    for (int i = TG_COST_BINS - 1; i >= 0; i--) { /* highest degree first */
        if (!(b->nodes[i] > 0)) continue;
        double q = fmin(1, b->access[i] / ((double)profiled * b->nodes[i]));
        c[k++] = (cls_t){.n = b->nodes[i],
                         .q = q,
                         .acc = B * q * b->nodes[i],
                         .touched = b->nodes[i] * (1 - pow(1 - q, B))};
    }
    return k;
}

/* Rows an LRU cache holds that were used in the last t batches (Che's approximation). */
static double lru_fill(const cls_t *c, int k, double t)
{
    double s = 0;
    for (int i = 0; i < k; i++)
        s += c[i].n * (1 - pow(1 - c[i].q, t));
    return s;
}

/* Epoch misses of an LRU cache of `rows`: every row's first use, and a later use when the row
 * was not used within the cache's characteristic time t (lru_fill(t) = rows). */
static double lru_misses(const cls_t *c, int k, double rows, double B)
{
    double lo = 0, hi = B, m = 0;
    if (lru_fill(c, k, B) <= rows) { /* it holds every row the epoch touches: no evictions */
        for (int i = 0; i < k; i++)
            m += c[i].touched;
        return m;
    }
    for (int it = 0; it < 60 && hi - lo > 1e-6; it++) {
        double mid = (lo + hi) / 2;
        if (lru_fill(c, k, mid) < rows)
            lo = mid;
        else
            hi = mid;
    }
    for (int i = 0; i < k; i++)
        m += c[i].touched + (c[i].acc - c[i].touched) * pow(1 - c[i].q, lo);
    return m;
}

static int by_q_desc(const void *a, const void *b)
{
    const cls_t *x = a, *y = b;
    return x->q > y->q ? -1 : x->q < y->q ? 1 : 0;
}

/* Epoch misses of the best static cache of `rows` (filled by access probability): every row's
 * first use, and the later uses of the rows left out. c is sorted by q, descending. */
static double best_misses(const cls_t *c, int k, double rows)
{
    double m = 0, left = rows;
    for (int i = 0; i < k; i++) {
        double f = c[i].touched > 0 ? fmin(1, fmax(0, left / c[i].touched)) : 1;
        left -= f * c[i].touched;
        m += c[i].touched + (c[i].acc - c[i].touched) * (1 - f);
    }
    return m;
}

/* Share of the accesses the R highest-degree rows serve (c by degree, descending). */
static double hot_share(const cls_t *c, int k, double R)
{
    double all = 0, got = 0, left = R;
    for (int i = 0; i < k; i++) {
        all += c[i].acc;
        double f = fmin(1, fmax(0, left / c[i].n));
        left -= f * c[i].n;
        got += f * c[i].acc;
    }
    return all > 0 ? got / all : 0;
}

/* The curves' points: shares of what every row (or every list) would take. */
static const double frac[8] = {0, 1.0 / 64, 1.0 / 16, 1.0 / 8, 0.25, 0.5, 0.75, 1};

/* The share of list reads a neighbour cache of each size serves (tiergnn/ncache.h: an address
 * table of a u32 per node, then each cached node's count and list, 4 bytes an entry). The cache
 * ranks nodes by out-degree over in-degree, ties by out-degree: on an undirected graph (every
 * generated one) every ratio is 1 and it takes the longest lists first, the order of the classes
 * here (on a directed graph it prefers lists read often for their size, which this understates).
 * The curve's points: the table alone, then shares of the array that every list would take. */
static void ncache_curve(const tg_cost_bins_t *b, tg_cost_profile_t *p)
{
    double N = 0, all = 0, reads = 0;
    for (int i = 0; i < TG_COST_BINS; i++)
        N += b->nodes[i], all += 4 * (b->nodes[i] + b->edges[i]), reads += b->lists[i];
    p->ncache_hit.n = 0;
    if (!(reads > 0) || !(all > 0)) return;
    for (int k = 0; k < 8; k++) {
        double left = frac[k] * all, got = 0;
        for (int i = TG_COST_BINS - 1; i > 0 && left > 0; i--) { /* degree 0: never cached */
            double bytes = 4 * (b->nodes[i] + b->edges[i]);
            if (!(bytes > 0)) continue;
            double f = fmin(1, left / bytes);
            left -= f * bytes;
            got += f * b->lists[i];
        }
        p->ncache_hit.x[k] = 4 * N + frac[k] * all;
        p->ncache_hit.y[k] = got / reads;
    }
    p->ncache_hit.n = 8;
}

void tg_cost_bins_curves(const tg_cost_bins_t *b, uint64_t profiled, uint64_t batches,
                         tg_cost_profile_t *p)
{
    static const double hot[8] = {0, 0.001, 0.01, 0.05, 0.1, 0.25, 0.5, 1};
    cls_t c[TG_COST_BINS];
    p->lru.n = p->belady.n = p->hot_degree.n = p->window_rows.n = p->ncache_hit.n = 0;
    p->distinct_rows = 0;
    if (profiled == 0 || batches == 0) return;
    int k = classes(b, profiled, batches, c);
    double D = 0, N = 0;
    for (int i = 0; i < k; i++)
        D += c[i].touched, N += c[i].n;
    p->distinct_rows = D;
    if (!(D > 0)) return;
    for (int i = 0; i < 8; i++) {
        p->hot_degree.x[i] = hot[i] * N;
        p->hot_degree.y[i] = hot_share(c, k, hot[i] * N);
    }
    p->hot_degree.n = 8;
    /* consecutive batches are independent draws: t of them touch lru_fill(t) distinct rows */
    static const double span[7] = {1, 2, 4, 8, 16, 32, 64};
    int nw = 0;
    for (int i = 0; i < 7 && span[i] < (double)batches; i++, nw++)
        p->window_rows.x[nw] = span[i], p->window_rows.y[nw] = lru_fill(c, k, span[i]);
    p->window_rows.x[nw] = (double)batches, p->window_rows.y[nw++] = D;
    p->window_rows.n = nw;
    for (int i = 0; i < 8; i++)
        p->lru.x[i] = frac[i] * D, p->lru.y[i] = lru_misses(c, k, frac[i] * D, (double)batches);
    qsort(c, (size_t)k, sizeof *c, by_q_desc);
    for (int i = 0; i < 8; i++)
        p->belady.x[i] = frac[i] * D, p->belady.y[i] = best_misses(c, k, frac[i] * D);
    p->lru.n = p->belady.n = 8;
    ncache_curve(b, p);
}

/* ---------------------------------------------------------------- the choice */

/* A strategy whose working set (pl->need, and what its first pass adds) does not fit what the
 * run leaves beside its matrices cannot run, whatever its prediction. The matrices: as few as
 * the budget plan lowers the batches in flight to where --mem is tight, one trained and one
 * sampled ahead. */
#define LEAST_MATRICES 2

static void veto_working_sets(const struct tg_strategy_i *const *table, tg_cost_plan_t *pl)
{
    for (int i = 0; i < pl->n; i++) {
        tg_cost_pred_t *p = &pl->pred[i];
        int k = TG_MIN(tg_cost_matrices(table[i], &pl->in), LEAST_MATRICES);
        double have = tg_cost_cache_bytes(&pl->in, k), need = pl->need[i] + p->least_extra;
        if (!p->predicted || !p->feasible || !(need > have)) continue;
        tg_cost_infeasible(p,
                           "its least working set %.1f MiB is more than the %.1f MiB --mem "
                           "leaves it",
                           need / 1048576.0, have / 1048576.0);
    }
}

/* The fastest eligible strategy other than skip (-1: none; ties: the earlier row). */
static int fastest(const tg_cost_plan_t *pl, int skip)
{
    int best = -1;
    for (int i = 0; i < pl->n; i++) {
        const tg_cost_pred_t *p = &pl->pred[i];
        if (i == skip || !p->predicted || !p->feasible || (!pl->exact[i] && !pl->allow_inexact))
            continue;
        if (best < 0 || p->epoch_s < pl->pred[best].epoch_s) best = i;
    }
    return best;
}

int tg_cost_plan_choose_in(const tg_strategy_i *const *table, int n, const tg_cost_inputs_t *in,
                           int allow_inexact, tg_cost_plan_t *pl)
{
    if (&pl->in != in) pl->in = *in;
    pl->allow_inexact = allow_inexact;
    if (n > TG_COST_MAX_STRATS)
        return tg_err(-EINVAL, "plan: %d strategies, room for %d", n, TG_COST_MAX_STRATS);
    pl->n = n;
    for (int i = 0; i < n; i++) {
        pl->names[i] = table[i]->info.name;
        pl->exact[i] = !(table[i]->info.caps & TG_STRAT_CHANGES_GRAPH);
    }
    int rc = tg_cost_choose_in(table, n, &pl->in, allow_inexact, pl->pred, &pl->best);
    if (rc < 0) return rc;
    veto_working_sets(table, pl);
    pl->best = fastest(pl, -1);
    if (pl->best < 0) {
        snprintf(pl->why, sizeof pl->why, "no strategy can run with these inputs");
        return 0;
    }
    int second = fastest(pl, pl->best); /* to say by how much the choice wins */
    const tg_cost_pred_t *b = &pl->pred[pl->best];
    int k = snprintf(pl->why, sizeof pl->why, "the fastest %sstrategy predicted: %.2f s per epoch",
                     allow_inexact ? "" : "exact ", b->epoch_s);
    if (second >= 0 && k > 0 && (size_t)k < sizeof pl->why)
        snprintf(pl->why + k, sizeof pl->why - (size_t)k, ", next %s %.2f s", pl->names[second],
                 pl->pred[second].epoch_s);
    return 0;
}

int tg_cost_plan_choose(const tg_cost_inputs_t *in, int allow_inexact, tg_cost_plan_t *pl)
{
    const tg_strategy_i *table[TG_COST_MAX_STRATS];
    int n = tg_strategy_count();
    if (n > TG_COST_MAX_STRATS)
        return tg_err(-EINVAL, "plan: %d strategies, room for %d", n, TG_COST_MAX_STRATS);
    for (int i = 0; i < n; i++)
        table[i] = tg_strategy_at(i);
    return tg_cost_plan_choose_in(table, n, in, allow_inexact, pl);
}

/* An option args[0..n) gives a value other than "auto" (the strategies' word for their
 * default). */
static int arg_given(const tg_strategy_arg_t *args, int n, const char *name)
{
    for (int k = 0; k < n; k++)
        if (!strcmp(args[k].name, name) && !(args[k].value && !strcmp(args[k].value, "auto")))
            return 1;
    return 0;
}

static void plan_arg(tg_cost_plan_args_t *out, const char *name, int64_t value)
{
    int k = out->added++;
    snprintf(out->value[k], sizeof out->value[k], "%lld", (long long)value);
    out->add[k] = (tg_strategy_arg_t){name, out->value[k]};
}

void tg_cost_plan_args(const tg_cost_plan_t *pl, int i, const tg_strategy_arg_t *args, int n,
                       tg_cost_plan_args_t *out)
{
    memset(out, 0, sizeof *out);
    if (i < 0 || i >= pl->n) return;
    if (!strcmp(pl->names[i], "diskgnn") && pl->disk_budget_planned &&
        !arg_given(args, n, "disk-budget"))
        plan_arg(out, "disk-budget", (int64_t)pl->disk_budget_planned);
    const tg_cost_pred_t *p = &pl->pred[i];
    if (!p->predicted || !p->feasible) return;
    for (int k = 0; k < TG_COST_KNOBS; k++)
        if (p->knobs[k].name && !arg_given(args, n, p->knobs[k].name))
            plan_arg(out, p->knobs[k].name, p->knobs[k].value);
}

/* ---------------------------------------------------------------- the table */

static void print_row(const tg_cost_plan_t *pl, int i, FILE *f)
{
    const tg_cost_pred_t *p = &pl->pred[i];
    const char *mark = i == pl->best ? "*" : " ";
    if (!p->predicted) {
        fprintf(f, "%s %-9s %9s  %s\n", mark, pl->names[i], "-", p->why);
        return;
    }
    fprintf(f, "%s %-9s %9.2f %8.2f %8.2f %8.2f %8.2f %8.2f %8.2f %8.2f  %s%s%s\n", mark,
            pl->names[i], p->epoch_s, p->read_bytes / GIB, p->io_s, p->sample_s, p->gather_s,
            p->compute_s, p->prep_s, p->steady_s,
            p->feasible ? "" : "cannot run: ", pl->exact[i] ? "" : "(inexact) ", p->why);
}

void tg_cost_plan_print(const tg_cost_plan_t *pl, FILE *f)
{
    fprintf(f, "  %-9s %9s %8s %8s %8s %8s %8s %8s %8s  %s\n", "strategy", "epoch s", "read GiB",
            "I/O s", "sample s", "gather s", "compute", "prep s", "steady", "why");
    for (int i = 0; i < pl->n; i++)
        print_row(pl, i, f);
    const tg_cost_profile_cost_t *c = &pl->cost;
    const tg_cost_inputs_t *in = &pl->in;
    char gemm[64] = "GEMM not timed (the step was)";
    if (in->machine.gemm_flops_per_s > 0)
        snprintf(gemm, sizeof gemm, "GEMM %.1f GFLOP/s in %.2f s",
                 in->machine.gemm_flops_per_s / 1e9, c->gemm_s);
    fprintf(f,
            "profile: %.2f s (indices read ahead in %.2f s, %llu of %llu batches sampled in "
            "%.2f s, device probe %s, %s, a step at %.1f GFLOP/s on %.1f cores in %.2f s (x%.2f "
            "beside a gathering thread, which kept %.0f%% of its rate), gather in %.2f s, "
            "strategies' own batches in %.2f s); %.0f rows per batch (%.0f feature "
            "pages, %.0f index pages), %.0f distinct in the epoch, %.0f MiB for matrices and "
            "caches, %d core(s)\n",
            c->total_s, c->warm_s, (unsigned long long)c->batches_profiled,
            (unsigned long long)in->prof.batches, c->sample_s,
            c->probe_cached ? "cached" : "measured", gemm, in->machine.step_flops_per_s / 1e9,
            in->machine.step_cpu_ratio, c->step_s, in->machine.step_shared,
            100 * in->machine.gather_shared, c->gather_s, c->own_s, in->prof.rows_per_batch,
            in->prof.feat_pages_per_batch, in->prof.index_pages_per_batch, in->prof.distinct_rows,
            (double)in->run.free_bytes / (1024.0 * 1024.0), in->machine.cores);
    if (pl->disk_budget_planned) {
        char a[32], b[32];
        fprintf(f,
                "diskgnn's --disk-budget planned: %s (the epoch's bytes, at least the feature "
                "file, at most 45%% of the %s free)\n",
                tg_fmt_bytes(pl->disk_budget_planned, a, sizeof a),
                tg_fmt_bytes(in->run.disk_free, b, sizeof b));
    }
    if (pl->best >= 0)
        fprintf(f, "choice: %s (%s)%s\n", pl->names[pl->best], pl->why,
                pl->allow_inexact ? "" : "; inexact strategies need --allow-inexact");
    else
        fprintf(f, "choice: none (%s)\n", pl->why);
}

static char *pred_json(const tg_cost_plan_t *pl, int i)
{
    const tg_cost_pred_t *p = &pl->pred[i];
    tg_json_t j;
    tg_json_begin(&j);
    tg_json_str(&j, "name", pl->names[i]);
    tg_json_bool(&j, "exact", pl->exact[i]);
    tg_json_bool(&j, "predicted", p->predicted);
    tg_json_bool(&j, "feasible", p->predicted && p->feasible);
    tg_json_bool(&j, "chosen", i == pl->best);
    tg_json_num(&j, "epoch_s", p->predicted ? p->epoch_s : NAN);
    tg_json_num(&j, "steady_s", p->predicted ? p->steady_s : NAN);
    tg_json_num(&j, "read_bytes", p->predicted ? p->read_bytes : NAN);
    tg_json_num(&j, "reads", p->predicted && p->reads > 0 ? p->reads : NAN);
    tg_json_num(&j, "io_s", p->predicted ? p->io_s : NAN);
    tg_json_num(&j, "sample_s", p->predicted ? p->sample_s : NAN);
    tg_json_num(&j, "gather_s", p->predicted ? p->gather_s : NAN);
    tg_json_num(&j, "stage_s", p->predicted ? p->stage_s : NAN);
    tg_json_num(&j, "compute_s", p->predicted ? p->compute_s : NAN);
    tg_json_num(&j, "prep_s", p->predicted ? p->prep_s : NAN);
    tg_json_num(&j, "least_bytes", pl->need[i] > 0 ? pl->need[i] : NAN);
    /* the options the prediction planned, as "planned":{"ginex-split":40} */
    char knobs[256];
    size_t at = 0;
    for (int k = 0; k < TG_COST_KNOBS && at < sizeof knobs; k++)
        if (p->predicted && p->knobs[k].name)
            at += (size_t)snprintf(knobs + at, sizeof knobs - at, "%s\"%s\":%lld", at ? "," : "{",
                                   p->knobs[k].name, (long long)p->knobs[k].value);
    if (at && at + 2 <= sizeof knobs) {
        memcpy(knobs + at, "}", 2);
        tg_json_raw(&j, "planned", knobs);
    }
    tg_json_str(&j, "why", p->why);
    char *text = NULL;
    tg_json_end(&j, NULL, &text);
    return text;
}

/* [[x, y], ...] of a curve into buf. */
static const char *curve_json(const tg_cost_curve_t *c, char *buf, size_t len)
{
    size_t n = (size_t)snprintf(buf, len, "[");
    for (int i = 0; i < c->n && n < len; i++)
        n += (size_t)snprintf(buf + n, len - n, "%s[%.6g,%.6g]", i ? "," : "", c->x[i], c->y[i]);
    if (n < len) snprintf(buf + n, len - n, "]");
    return buf;
}

static char *profile_json(const tg_cost_plan_t *pl)
{
    char cb[5][512];
    const tg_cost_profile_cost_t *c = &pl->cost;
    const tg_cost_inputs_t *in = &pl->in;
    tg_json_t j;
    tg_json_begin(&j);
    tg_json_num(&j, "total_s", c->total_s);
    tg_json_num(&j, "sample_s", c->sample_s);
    tg_json_num(&j, "warm_s", c->warm_s);
    tg_json_num(&j, "probe_s", c->probe_s);
    tg_json_bool(&j, "probe_cached", c->probe_cached);
    tg_json_num(&j, "gemm_s", c->gemm_s);
    tg_json_num(&j, "step_s", c->step_s);
    tg_json_num(&j, "step_flops_per_s", in->machine.step_flops_per_s);
    tg_json_num(&j, "step_cpu_ratio", in->machine.step_cpu_ratio);
    tg_json_num(&j, "step_shared", in->machine.step_shared);
    tg_json_num(&j, "gather_shared", in->machine.gather_shared);
    tg_json_num(&j, "gather_s", c->gather_s);
    tg_json_uint(&j, "batches_profiled", c->batches_profiled);
    tg_json_uint(&j, "batches", in->prof.batches);
    tg_json_num(&j, "rows_per_batch", in->prof.rows_per_batch);
    tg_json_num(&j, "distinct_rows", in->prof.distinct_rows);
    tg_json_num(&j, "index_reads_per_batch", in->prof.index_reads_per_batch);
    tg_json_num(&j, "feat_pages_per_batch", in->prof.feat_pages_per_batch);
    tg_json_num(&j, "index_pages_per_batch", in->prof.index_pages_per_batch);
    tg_json_num(&j, "degree_skew", in->data.degree_skew);
    tg_json_uint(&j, "free_bytes", in->run.free_bytes);
    tg_json_uint(&j, "cache_slack", in->run.cache_slack);
    tg_json_uint(&j, "disk_free", in->run.disk_free);
    tg_json_num(&j, "seq_bytes_per_s", in->machine.probe.seq_bytes_per_s);
    tg_json_num(&j, "gemm_flops_per_s", in->machine.gemm_flops_per_s);
    tg_json_num(&j, "sample_nodes_per_s", in->machine.sample_nodes_per_s);
    tg_json_num(&j, "gather_rows_per_s", in->machine.gather_rows_per_s);
    tg_json_num(&j, "filter_edges_per_s", in->machine.filter_edges_per_s);
    tg_json_num(&j, "copy_bytes_per_s", in->machine.copy_bytes_per_s);
    tg_json_num(&j, "buffered_bytes_per_s", in->machine.buffered_bytes_per_s);
    tg_json_num(&j, "buffer_rows_per_s", in->machine.buffer_rows_per_s);
    tg_json_num(&j, "window_rows_per_s", in->machine.window_rows_per_s);
    tg_json_int(&j, "cores", in->machine.cores);
    /* the strategies' own batches (hier's, in a mega-batch; zeros: not measured) */
    const tg_cost_own_t *own = &in->prof.own;
    tg_json_num(&j, "own_s", c->own_s);
    tg_json_num(&j, "own_batches", own->batches);
    tg_json_num(&j, "own_rows_per_batch", own->rows_per_batch);
    tg_json_num(&j, "own_step_flops_per_s", own->step_flops_per_s);
    tg_json_num(&j, "own_load_bytes_per_s", own->load_bytes_per_s);
    tg_json_num(&j, "own_flops_per_batch", own->flops_per_batch);
    tg_json_num(&j, "induced_degree_frac", in->prof.induced_degree_frac);
    /* the epoch's curves the profile extrapolated: misses against cache rows, coverage */
    tg_json_raw(&j, "lru_misses", curve_json(&in->prof.lru, cb[0], sizeof cb[0]));
    tg_json_raw(&j, "belady_misses", curve_json(&in->prof.belady, cb[1], sizeof cb[1]));
    tg_json_raw(&j, "hot_degree_share", curve_json(&in->prof.hot_degree, cb[2], sizeof cb[2]));
    tg_json_raw(&j, "window_rows", curve_json(&in->prof.window_rows, cb[3], sizeof cb[3]));
    tg_json_raw(&j, "ncache_hit", curve_json(&in->prof.ncache_hit, cb[4], sizeof cb[4]));
    char *text = NULL;
    tg_json_end(&j, NULL, &text);
    return text;
}

/* "[a,b,...]" of the strategies' objects, malloc'd. */
static char *preds_json(const tg_cost_plan_t *pl)
{
    size_t len = 1;
    char *out = malloc(3);
    if (out) out[0] = '[';
    for (int i = 0; out && i < pl->n; i++) {
        char *one = pred_json(pl, i);
        size_t add = one ? strlen(one) : 0;
        char *grown = one ? realloc(out, len + add + 3) : NULL;
        if (!grown) {
            free(one);
            free(out);
            return NULL;
        }
        out = grown;
        if (i) out[len++] = ',';
        memcpy(out + len, one, add);
        len += add;
        free(one);
    }
    if (out) memcpy(out + len, "]", 2);
    return out;
}

char *tg_cost_plan_json(const tg_cost_plan_t *pl)
{
    char *prof = profile_json(pl), *preds = preds_json(pl), *text = NULL;
    if (prof && preds) {
        tg_json_t j;
        tg_json_begin(&j);
        tg_json_str(&j, "choice", pl->best >= 0 ? pl->names[pl->best] : "");
        tg_json_str(&j, "why", pl->why);
        tg_json_bool(&j, "allow_inexact", pl->allow_inexact);
        tg_json_uint(&j, "disk_budget_planned", pl->disk_budget_planned);
        tg_json_raw(&j, "profile", prof);
        tg_json_raw(&j, "strategies", preds);
        tg_json_end(&j, NULL, &text);
    }
    free(prof);
    free(preds);
    if (!text) tg_err(-ENOMEM, "plan: out of memory for the table's JSON");
    return text;
}
