/* The planner (engine/plan_profile.h): its choice on fixed inputs (a table of machines, datasets,
 * budgets and profiles with the strategy expected), inexact strategies only when allowed, a
 * strategy without a cost model listed and skipped, the same choice and table for the same
 * inputs, the degree-class arithmetic that extrapolates a few batches to an epoch, the
 * profile's bound (its share of the epoch's batches, its time limit) on a small dataset, its
 * reads' errors, and `tiergnn plan` and `train --strategy auto` on the command line with their
 * error paths. */
#include "test_engine_common.h"

#include <math.h>

#include "engine/engine-impl.h"
#include "engine/plan_profile.h"
#include "tiergnn/derived.h"
#include "tiergnn/engine.h"
#include "tiergnn/io.h"
#include "tiergnn/partition.h"

#define MIB 1048576.0

static char root[4000], ds[4200];

static void setup(void)
{
    snprintf(root, sizeof root, "%s", tg_test_tmpdir("plan"));
    snprintf(ds, sizeof ds, "%s/ds", root);
    synth_opts_t so;
    synth_default(&so);
    so.nodes = 2000;
    synth_write(ds, &so);
}

/* The shared bench's figures (tests/test_plan_cost.c says where each is from), a little
 * rounded: data/g4m, SAGE 3 x 256, fanouts 10,10,10, batch 1000, --mem 1200M, 2 cores. */
static tg_cost_inputs_t bench_inputs(void)
{
    tg_cost_inputs_t in;
    memset(&in, 0, sizeof in);
    tg_cost_machine_t *m = &in.machine;
    static const unsigned depth[] = {1, 4, 16, 64, 128};
    static const double iops[] = {21.7e3, 46.7e3, 67.9e3, 82.1e3, 83.8e3};
    m->probe.ndepths = 5;
    for (int i = 0; i < 5; i++)
        m->probe.depth[i] = depth[i], m->probe.iops[i] = iops[i];
    m->probe.best_depth = 64;
    m->probe.seq_bytes_per_s = 1.1265e9;
    m->gemm_flops_per_s = 289e9;
    m->step_flops_per_s = 70.8e9;
    m->sample_nodes_per_s = 3.8e6;
    m->gather_rows_per_s = 1.3e6;
    m->cores = 2;
    in.data = (tg_cost_dataset_t){.nodes = 4000000,
                                  .edges = 59000000,
                                  .feat_dim = 128,
                                  .dtype_bytes = 4,
                                  .index_bytes = 4,
                                  .train_frac = 0.01,
                                  .degree_skew = 0.31,
                                  .derived = TG_COST_HAVE_PARTS | TG_COST_HAVE_RANK |
                                             TG_COST_HAVE_OUTDEG | TG_COST_HAVE_NCACHE};
    in.run = (tg_cost_run_t){.epoch_flops = 707.9e9,
                             .batch_size = 1000,
                             .epochs = 2,
                             .sampler_threads = 1,
                             .matrix_bytes = (uint64_t)(166.5 * MIB),
                             .free_bytes = (uint64_t)(684.0 * MIB),
                             .disk_budget = (uint64_t)4 << 30,
                             .disk_free = (uint64_t)60 << 30};
    tg_cost_profile_t *p = &in.prof;
    const double acc = 11824348, distinct = 2863387;
    p->batches = 40;
    p->rows_per_batch = acc / 40;
    p->index_reads_per_batch = 96861;
    p->index_bytes_per_batch = 2.0e6;
    p->distinct_rows = distinct;
    p->belady =
        (tg_cost_curve_t){4, {0, 187533, 718068, distinct}, {acc, 6449405, 3801693, distinct}};
    p->lru = (tg_cost_curve_t){
        4, {0, 22769, 324579, distinct}, {acc, 0.986 * acc, 0.855 * acc, distinct}};
    p->hot_rpr = (tg_cost_curve_t){3, {0, 319649, 4e6}, {0, 0.465, 1}};
    p->hot_degree = p->hot_rpr;
    p->ncache_hit = (tg_cost_curve_t){3, {0, 139.5 * MIB, 59e6 * 4 + 16e6}, {0, 0.48, 1}};
    p->induced_degree_frac = (3.9 + 3.7) / 14.74;
    p->layout_read_ampl = 1.017;
    return in;
}

/* Each case changes the shared bench's inputs one way and names the strategy expected. */
static void case_bench(tg_cost_inputs_t *in)
{
    (void)in; /* diskgnn: one sequential pass of the features beats every random reader */
}
static void case_ram(tg_cost_inputs_t *in)
{
    in->run.free_bytes = (uint64_t)8 << 30; /* graph and features fit: nothing to read */
}
static void case_no_disk(tg_cost_inputs_t *in)
{
    in->run.disk_free = (uint64_t)1 << 30; /* no room for diskgnn's packed files */
}
static void case_hot(tg_cost_inputs_t *in)
{
    in->run.disk_free = (uint64_t)1 << 30;
    /* a tiny working set: a cache of 200k rows holds every row the epoch reads again */
    in->prof.belady = (tg_cost_curve_t){3, {0, 100000, 200000}, {11824348, 400000, 200000}};
    in->prof.distinct_rows = 200000;
}

static const struct {
    const char *name;
    void (*change)(tg_cost_inputs_t *);
    int allow_inexact;
    const char *expect;
} cases[] = {
    {"shared bench", case_bench, 0, "diskgnn"},
    {"shared bench, inexact allowed", case_bench, 1, "hier"},
    {"features fit in --mem", case_ram, 0, "memory"},
    /* hier samples fewer edges: less work per epoch even where everything is in RAM */
    {"features fit, inexact allowed", case_ram, 1, "hier"},
    /* ginex and gids within a few percent (64-68 s in session 21): the model puts ginex first */
    {"no free disk", case_no_disk, 0, "ginex"},
    {"no free disk, small working set", case_hot, 0, "ginex"},
};

TG_TEST(choice_on_fixed_inputs)
{
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        tg_cost_inputs_t in = bench_inputs();
        cases[k].change(&in);
        tg_cost_plan_t pl;
        memset(&pl, 0, sizeof pl); /* need[] too: not known */
        TG_CHECK_OK(tg_cost_plan_choose(&in, cases[k].allow_inexact, &pl));
        const char *got = pl.best >= 0 ? pl.names[pl.best] : "none";
        fprintf(stderr, "  %-32s -> %-8s (%s)\n", cases[k].name, got, pl.why);
        if (strcmp(got, cases[k].expect))
            TG_FAIL("%s: chose %s, expected %s", cases[k].name, got, cases[k].expect);
        /* whatever is taken is exact unless allowed, feasible and no slower than any eligible */
        TG_CHECK(pl.best < 0 || pl.exact[pl.best] || cases[k].allow_inexact);
        for (int i = 0; pl.best >= 0 && i < pl.n; i++) {
            const tg_cost_pred_t *p = &pl.pred[i];
            if (!p->predicted || !p->feasible || (!pl.exact[i] && !cases[k].allow_inexact))
                continue;
            TG_CHECK(pl.pred[pl.best].epoch_s <= p->epoch_s);
        }
    }
}

TG_TEST(inexact_shown_not_taken)
{
    tg_cost_inputs_t in = bench_inputs();
    tg_cost_plan_t pl = {0}; /* need[]: not known */
    TG_CHECK_OK(tg_cost_plan_choose(&in, 0, &pl));
    int hier = -1;
    for (int i = 0; i < pl.n; i++)
        if (!strcmp(pl.names[i], "hier")) hier = i;
    TG_CHECK(hier >= 0 && !pl.exact[hier] && pl.pred[hier].predicted);
    TG_CHECK(hier >= 0 && strstr(pl.pred[hier].why, "inexact strategies not allowed"));
    TG_CHECK(hier >= 0 && pl.pred[hier].epoch_s < pl.pred[pl.best].epoch_s);
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    tg_cost_plan_print(&pl, f);
    fclose(f);
    TG_CHECK(buf && strstr(buf, "(inexact)") && strstr(buf, "--allow-inexact"));
    free(buf);
}

TG_TEST(without_predict_skipped)
{
    /* memory with its predict left out: the inputs where it would win choose another */
    tg_strategy_i blind = tg_strategy_memory;
    blind.predict = NULL;
    const tg_strategy_i *table[] = {&blind, &tg_strategy_gnndrive, &tg_strategy_ginex};
    tg_cost_inputs_t in = bench_inputs();
    case_ram(&in);
    tg_cost_plan_t pl = {0}; /* need[]: not known */
    TG_CHECK_OK(tg_cost_plan_choose_in(table, 3, &in, 0, &pl));
    TG_CHECK(pl.best > 0);
    TG_CHECK(!pl.pred[0].predicted && strstr(pl.pred[0].why, "skipped"));
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    tg_cost_plan_print(&pl, f);
    fclose(f);
    TG_CHECK(buf && strstr(buf, "memory") && strstr(buf, "no cost model: skipped"));
    free(buf);
    char *j = tg_cost_plan_json(&pl);
    TG_CHECK(j && strstr(j, "\"name\":\"memory\",\"exact\":true,\"predicted\":false"));
    TG_CHECK(j && !strstr(j, "\"choice\":\"memory\""));
    free(j);
}

TG_TEST(deterministic)
{
    tg_cost_inputs_t in = bench_inputs();
    tg_cost_plan_t a, b;
    memset(&a, 0, sizeof a);
    memset(&b, 0xa5, sizeof b);
    memset(b.need, 0, sizeof b.need); /* an input: the working sets, not known */
    TG_CHECK_OK(tg_cost_plan_choose(&in, 0, &a));
    TG_CHECK_OK(tg_cost_plan_choose(&in, 0, &b));
    TG_CHECK(a.best == b.best && a.n == b.n && !strcmp(a.why, b.why));
    TG_CHECK(!memcmp(a.pred, b.pred, sizeof a.pred[0] * (size_t)a.n));
    /* what a profile measured beside the inputs: none here, and the choice does not set it */
    b.cost = a.cost;
    b.disk_budget_planned = a.disk_budget_planned;
    char *ja = tg_cost_plan_json(&a), *jb = tg_cost_plan_json(&b);
    TG_CHECK(ja && jb && !strcmp(ja, jb));
    free(ja);
    free(jb);
}

TG_TEST(bad_inputs_named)
{
    tg_cost_inputs_t in = bench_inputs();
    in.machine.cores = 0;
    tg_cost_plan_t pl = {0}; /* need[]: not known */
    TG_CHECK_ERR(tg_cost_plan_choose(&in, 0, &pl), "machine.cores");
    in = bench_inputs();
    in.prof.batches = 0;
    TG_CHECK_ERR(tg_cost_plan_choose(&in, 0, &pl), "profile.batches");
}

TG_TEST(disk_budget_planned)
{
    tg_cost_inputs_t in = bench_inputs();
    double need = 11824348.0 * 512, feat = 4e6 * 512;
    /* room: the epoch's bytes (no segment shared) */
    TG_CHECK_NEAR((double)tg_cost_disk_budget(&in), need, 1);
    /* less room: 45% of the free disk */
    in.run.disk_free = (uint64_t)10 << 30;
    TG_CHECK_NEAR((double)tg_cost_disk_budget(&in), 0.45 * (double)((uint64_t)10 << 30), 1);
    /* a small epoch: at least the feature file (diskgnn's default) */
    in.prof.rows_per_batch = 1000;
    TG_CHECK_NEAR((double)tg_cost_disk_budget(&in), feat, 1);
    /* no room for two feature files: the default stands */
    in.run.disk_free = (uint64_t)3 << 30;
    TG_CHECK_EQ_U64(tg_cost_disk_budget(&in), 0);
}

/* ginex's split is the prediction's: of the shares within 5% of the shortest epoch, the one
 * that reads the fewest bytes (55% is the shortest on the shared bench's inputs), recorded as the
 * knob "ginex-split" the run takes (tg_cost_plan_args), the same number the why says. Without a
 * neighbour cache that serves lists (no ncache_hit curve) the feature cache takes everything;
 * with one that serves most lists from a small share, a share goes to it. */
#define GX_BENCH_SPLIT 45
#define GX_BENCH_SPLIT_S "45"
static int ginex_row(const tg_cost_plan_t *pl)
{
    for (int i = 0; i < pl->n; i++)
        if (!strcmp(pl->names[i], "ginex")) return i;
    return -1;
}

TG_TEST(ginex_split_planned)
{
    tg_cost_inputs_t in = bench_inputs();
    in.prof.ncache_hit.n = 0; /* no neighbour cache measured: it serves nothing */
    tg_cost_plan_t pl = {0};  /* need[]: not known */
    TG_CHECK_OK(tg_cost_plan_choose(&in, 0, &pl));
    int g = ginex_row(&pl);
    TG_CHECK(g >= 0 && pl.pred[g].feasible);
    if (g < 0) return;
    const tg_cost_pred_t *p = &pl.pred[g];
    TG_CHECK(p->knobs[0].name && !strcmp(p->knobs[0].name, "ginex-split"));
    TG_CHECK(p->knobs[0].value == 0 && !strncmp(p->why, "split 0% of ", 12));
    /* the shared bench's: 139.5 MiB of lists serve 48% of the list reads */
    in = bench_inputs();
    TG_CHECK_OK(tg_cost_plan_choose(&in, 0, &pl));
    p = &pl.pred[g];
    fprintf(stderr, "  shared bench: %s\n", p->why);
    TG_CHECK(p->knobs[0].value == GX_BENCH_SPLIT &&
             !strncmp(p->why, "split " GX_BENCH_SPLIT_S "% of ", 12));
    char *j = tg_cost_plan_json(&pl);
    TG_CHECK(j && strstr(j, "\"planned\":{\"ginex-split\":" GX_BENCH_SPLIT_S "}"));
    free(j);
}

/* What a run of a planned strategy adds to its options: the knobs (and diskgnn's disk budget)
 * its options do not give; one given wins, "auto" counts as not given; a strategy that cannot
 * run gets nothing. */
TG_TEST(plan_args_added_unless_given)
{
    tg_cost_inputs_t in = bench_inputs();
    tg_cost_plan_t pl = {0}; /* need[]: not known */
    TG_CHECK_OK(tg_cost_plan_choose(&in, 0, &pl));
    int g = ginex_row(&pl);
    TG_CHECK(g >= 0);
    if (g < 0) return;
    char want[32];
    snprintf(want, sizeof want, "%lld", (long long)pl.pred[g].knobs[0].value);
    tg_cost_plan_args_t a;
    tg_strategy_arg_t given[2] = {{"superbatch", "4"}, {"ginex-split", "auto"}};
    tg_cost_plan_args(&pl, g, given, 2, &a);
    TG_CHECK(a.added == 1 && !strcmp(a.add[0].name, "ginex-split") &&
             !strcmp(a.add[0].value, want));
    given[1].value = "30";
    tg_cost_plan_args(&pl, g, given, 2, &a);
    TG_CHECK(a.added == 0);
    /* diskgnn: its planned disk budget, unless given */
    pl.disk_budget_planned = (uint64_t)5 << 30;
    int d = -1;
    for (int i = 0; i < pl.n; i++)
        if (!strcmp(pl.names[i], "diskgnn")) d = i;
    TG_CHECK(d >= 0);
    tg_cost_plan_args(&pl, d, NULL, 0, &a);
    TG_CHECK(a.added == 1 && !strcmp(a.add[0].name, "disk-budget") &&
             !strcmp(a.add[0].value, "5368709120"));
    tg_strategy_arg_t budget = {"disk-budget", "4G"};
    tg_cost_plan_args(&pl, d, &budget, 1, &a);
    TG_CHECK(a.added == 0);
    /* infeasible: nothing planned */
    pl.pred[g].feasible = 0;
    tg_cost_plan_args(&pl, g, NULL, 0, &a);
    TG_CHECK(a.added == 0);
}

/* diskgnn and ginex at a tight --mem. diskgnn: its first pass sizes the reader from what --mem
 * leaves, then the packing (a fifth of the rest), a batch's maps and the epoch's planning, and
 * refuses the pass when they do not fit (dg_setup). The planner refuses it by the same sums: on a
 * 16 MiB graph (25k rows of 128 f32, 59 batches of 9253 rows, 2 matrices of 5.24 MiB) a run at
 * --mem 64M had 22 MiB left and failed in epoch 1 ("packing and planning ... need 17.51 MiB" after
 * a reader of 9.19 MiB) where the least working set (19.6 MiB) let the planner take it. */
TG_TEST(first_pass_refused)
{
    tg_cost_inputs_t in = bench_inputs();
    in.data.nodes = 25000;
    in.data.edges = 500000;
    in.run.disk_budget = 0;
    in.run.epoch_flops = 2e9;
    in.run.matrix_bytes = (uint64_t)(5.24 * MIB);
    in.prof.batches = 59;
    in.prof.rows_per_batch = 9253;
    in.prof.index_reads_per_batch = 9000;
    in.prof.index_bytes_per_batch = 200e3;
    in.prof.distinct_rows = 24898;
    in.prof.belady = (tg_cost_curve_t){2, {0, 24898}, {59 * 9253, 24898}};
    in.prof.lru = in.prof.belady;
    in.prof.hot_rpr = (tg_cost_curve_t){2, {0, 25000}, {0, 1}};
    in.prof.hot_degree = in.prof.hot_rpr;
    in.prof.ncache_hit = (tg_cost_curve_t){0};
    int dg = -1;
    for (int i = 0; i < tg_strategy_count(); i++)
        if (!strcmp(tg_strategy_at(i)->info.name, "diskgnn")) dg = i;
    TG_CHECK(dg >= 0);
    if (dg < 0) return;
    /* 22 MiB beside the two matrices: the reader, packing, maps and planning do not fit */
    in.run.free_bytes = (uint64_t)((22 + 2 * 5.24) * MIB);
    tg_cost_plan_t pl = {0}; /* need[]: not known */
    TG_CHECK_OK(tg_cost_plan_choose(&in, 0, &pl));
    fprintf(stderr, "  22 MiB: %s\n", pl.pred[dg].why);
    TG_CHECK(!pl.pred[dg].feasible && strstr(pl.pred[dg].why, "first pass needs"));
    TG_CHECK(pl.best != dg);
    /* 40 MiB: it fits, and nothing else on these inputs is faster */
    in.run.free_bytes = (uint64_t)((40 + 2 * 5.24) * MIB);
    TG_CHECK_OK(tg_cost_plan_choose(&in, 0, &pl));
    fprintf(stderr, "  40 MiB: %s\n", pl.pred[dg].why);
    TG_CHECK(pl.pred[dg].feasible);
    /* ginex on the same graph: at --mem 72M under a cgroup its run had 17.2 MiB and refused
     * the pass (its table, changeset workspace and read staging 23.16 MiB, a superbatch of 2
     * batches 0.45 MiB) where its least working set let the planner take it */
    int gx = -1;
    for (int i = 0; i < tg_strategy_count(); i++)
        if (!strcmp(tg_strategy_at(i)->info.name, "ginex")) gx = i;
    TG_CHECK(gx >= 0);
    if (gx < 0) return;
    in.run.free_bytes = (uint64_t)((17.2 + 2 * 5.24) * MIB);
    TG_CHECK_OK(tg_cost_plan_choose(&in, 0, &pl));
    fprintf(stderr, "  ginex at 17.2 MiB: %s\n", pl.pred[gx].why);
    TG_CHECK(!pl.pred[gx].feasible && strstr(pl.pred[gx].why, "first pass needs"));
    TG_CHECK(pl.best != gx);
    in.run.free_bytes = (uint64_t)((40 + 2 * 5.24) * MIB);
    TG_CHECK_OK(tg_cost_plan_choose(&in, 0, &pl));
    TG_CHECK(pl.pred[gx].feasible);
}

/* ---------------------------------------------------------------- degree classes */

TG_TEST(degree_classes)
{
    TG_CHECK(tg_cost_degree_bin(0) == 0 && tg_cost_degree_bin(1) == 1);
    int last = 0;
    for (uint64_t d = 1; d < ((uint64_t)1 << 40); d = d * 5 / 4 + 1) {
        int b = tg_cost_degree_bin(d);
        TG_CHECK(b >= last && b < TG_COST_BINS);
        last = b;
    }
    TG_CHECK(tg_cost_degree_bin(UINT64_MAX) == TG_COST_BINS - 1);
    /* skew: 1000 nodes of degree 1 and 10 of degree 100: the top 1% (10.1 nodes) hold the 10 */
    tg_cost_bins_t b;
    memset(&b, 0, sizeof b);
    b.nodes[tg_cost_degree_bin(1)] = 1000, b.edges[tg_cost_degree_bin(1)] = 1000;
    b.nodes[tg_cost_degree_bin(100)] = 10, b.edges[tg_cost_degree_bin(100)] = 1000;
    TG_CHECK_NEAR(tg_cost_bins_skew(&b), (1000 + 0.1) / 2000, 1e-9);
}

TG_TEST(curves_from_classes)
{
    /* one class: 1000 nodes each in a batch with probability 0.1, an epoch of 10 batches */
    tg_cost_bins_t b;
    memset(&b, 0, sizeof b);
    b.nodes[5] = 1000;
    b.access[5] = 200; /* over 2 profiled batches */
    tg_cost_profile_t p;
    memset(&p, 0, sizeof p);
    tg_cost_bins_curves(&b, 2, 10, &p);
    double D = 1000 * (1 - pow(0.9, 10));
    TG_CHECK_NEAR(p.distinct_rows, D, 1e-6);
    TG_CHECK(p.lru.n == 8 && p.belady.n == 8 && p.hot_degree.n == 8);
    TG_CHECK_NEAR(tg_cost_curve_at(&p.belady, 0), 1000, 1e-6); /* no cache: every access */
    TG_CHECK_NEAR(tg_cost_curve_at(&p.lru, 0), 1000, 1e-6);
    TG_CHECK_NEAR(tg_cost_curve_at(&p.belady, D), D, 1e-6); /* all: first uses only */
    TG_CHECK_NEAR(tg_cost_curve_at(&p.lru, D), D, 0.01 * D);
    for (int i = 1; i < 8; i++) {
        TG_CHECK(p.belady.x[i] > p.belady.x[i - 1] && p.belady.y[i] <= p.belady.y[i - 1]);
        TG_CHECK(p.lru.y[i] <= p.lru.y[i - 1] + 1e-9);
        TG_CHECK(p.belady.y[i] <= p.lru.y[i] + 1e-9); /* the best cache misses no more */
    }
    /* the rows t consecutive batches use: 100 in one, 1000 (1 - 0.9^t) in t, all the epoch's
     * in its 10 */
    TG_CHECK(p.window_rows.n == 5); /* 1, 2, 4, 8 and the epoch's 10 */
    TG_CHECK_NEAR(tg_cost_curve_at(&p.window_rows, 1), 100, 1e-6);
    TG_CHECK_NEAR(tg_cost_curve_at(&p.window_rows, 4), 1000 * (1 - pow(0.9, 4)), 1e-6);
    TG_CHECK_NEAR(tg_cost_curve_at(&p.window_rows, 10), D, 1e-6);
    /* two classes: the hot one (10 nodes in every batch) is what a small cache keeps */
    b.nodes[9] = 10;
    b.access[9] = 20;
    tg_cost_bins_curves(&b, 2, 10, &p);
    TG_CHECK_NEAR(tg_cost_curve_at(&p.hot_degree, 10), 100.0 / 1100, 0.002);
    TG_CHECK_NEAR(tg_cost_curve_at(&p.belady, 10), 10 + 1000, 0.01 * 1010);
    /* nothing profiled: no curves */
    tg_cost_bins_curves(&b, 0, 10, &p);
    TG_CHECK(p.lru.n == 0 && p.belady.n == 0 && p.distinct_rows == 0 && p.window_rows.n == 0);
    /* a long epoch: the window's points stop at 64 batches, then the epoch */
    b.nodes[9] = 0;
    tg_cost_bins_curves(&b, 2, 1000, &p);
    TG_CHECK(p.window_rows.n == 8 && p.window_rows.x[6] == 64 && p.window_rows.x[7] == 1000);
    TG_CHECK(p.ncache_hit.n == 0); /* no list read profiled: no neighbour cache curve */
    /* the neighbour cache's curve: 10 nodes of degree 100 read 40 lists, 1000 of degree 2 read
     * 60; the cache's address table (4 bytes a node) first, then the longest lists */
    memset(&b, 0, sizeof b);
    b.nodes[20] = 10, b.edges[20] = 1000, b.lists[20] = 40, b.access[20] = 20;
    b.nodes[5] = 1000, b.edges[5] = 2000, b.lists[5] = 60, b.access[5] = 200;
    tg_cost_bins_curves(&b, 2, 10, &p);
    double table = 4 * 1010.0, hot = 4 * (10 + 1000.0), all = hot + 4 * (1000 + 2000.0);
    TG_CHECK(p.ncache_hit.n == 8);
    TG_CHECK_NEAR(tg_cost_curve_at(&p.ncache_hit, table / 2), 0, 1e-12); /* table only */
    TG_CHECK_NEAR(tg_cost_curve_at(&p.ncache_hit, table + hot), 0.4, 0.005);
    TG_CHECK_NEAR(tg_cost_curve_at(&p.ncache_hit, table + all), 1, 1e-12);
    for (int i = 1; i < 8; i++)
        TG_CHECK(p.ncache_hit.x[i] > p.ncache_hit.x[i - 1] &&
                 p.ncache_hit.y[i] >= p.ncache_hit.y[i - 1]);
}

/* ---------------------------------------------------------------- the profile */

static void plan_opts(tg_cost_plan_opts_t *o)
{
    tg_cost_plan_opts_default(o);
    o->dataset = ds;
    o->model.num_layers = 2;
    o->model.hidden = 16;
    o->fanouts[0] = o->fanouts[1] = 5;
    o->batch_size = 10; /* 120 batches of the 1200 training nodes */
    o->epochs = 3;
    o->mem_bytes = (uint64_t)256 << 20;
    o->gemm_time_s = 0.02;
}

TG_TEST(profile_bound)
{
    TG_CHECK_EQ_U64(tg_cost_profile_batches(0), 0);
    TG_CHECK_EQ_U64(tg_cost_profile_batches(1), 1);
    TG_CHECK_EQ_U64(tg_cost_profile_batches(40), 2);
    TG_CHECK_EQ_U64(tg_cost_profile_batches(41), 3);
    TG_CHECK_EQ_U64(tg_cost_profile_batches(1000), 50);
    tg_cost_plan_opts_t o;
    plan_opts(&o);
    tg_cost_plan_t *pl = malloc(sizeof *pl);
    TG_CHECK_OK(tg_cost_plan(&o, pl));
    uint64_t nb = pl->in.prof.batches;
    TG_CHECK(nb > 20);
    TG_CHECK_EQ_U64(pl->cost.batches_profiled, tg_cost_profile_batches(nb));
    TG_CHECK(pl->cost.total_s >= pl->cost.sample_s && pl->best >= 0);
    /* the time limit: sampling stops after the first batch once it is spent */
    o.max_s = 1e-9;
    TG_CHECK_OK(tg_cost_plan(&o, pl));
    TG_CHECK_EQ_U64(pl->cost.batches_profiled, 1);
    free(pl);
}

TG_TEST(profile_measures)
{
    tg_cost_plan_opts_t o;
    plan_opts(&o);
    tg_cost_plan_t *a = malloc(sizeof *a), *b = malloc(sizeof *b);
    TG_CHECK_OK(tg_cost_plan(&o, a));
    const tg_cost_inputs_t *in = &a->in;
    TG_CHECK_EQ_U64(in->data.nodes, 2000);
    TG_CHECK(in->data.train_frac > 0 && in->data.train_frac <= 1);
    TG_CHECK(in->prof.rows_per_batch >= 10 && in->prof.index_reads_per_batch > 0);
    /* the neighbour cache's curve: nothing below the address table, every list read above the
     * whole adjacency */
    TG_CHECK(in->prof.ncache_hit.n == 8 && in->prof.ncache_hit.y[0] == 0);
    TG_CHECK_NEAR(in->prof.ncache_hit.y[7], 1, 1e-9);
    TG_CHECK(in->prof.distinct_rows > 0 && in->prof.distinct_rows <= 2000);
    TG_CHECK(in->run.epoch_flops > 0 && in->run.free_bytes > 0 && in->run.matrix_bytes > 0);
    TG_CHECK(in->machine.sample_nodes_per_s > 0 && in->machine.gather_rows_per_s > 0);
    /* the step timed, the GEMM not (its rate is the fallback where no step can be) */
    TG_CHECK(in->machine.step_flops_per_s > 0 && in->machine.gemm_flops_per_s == 0);
    TG_CHECK(a->cost.gemm_s == 0);
    /* the step's CPU seconds per second (its threads' share; below 1 only where another process
     * took the core during the step) */
    TG_CHECK(in->machine.step_cpu_ratio > 0 && in->machine.step_cpu_ratio <= o.threads + 0.5);
    TG_CHECK(in->machine.filter_edges_per_s > 0); /* hier's list walk */
    TG_CHECK(in->machine.copy_bytes_per_s > 0);   /* and its copy out of the page cache */
    TG_CHECK(in->machine.buffer_rows_per_s > 0 && in->machine.window_rows_per_s > 0);
    /* 256M holds this graph: the in-RAM strategy wins */
    TG_CHECK(a->best >= 0 && !strcmp(a->names[a->best], "memory"));
    /* the same run's batches give the same figures (the rates are measured anew) */
    TG_CHECK_OK(tg_cost_plan(&o, b));
    TG_CHECK(a->in.prof.rows_per_batch == b->in.prof.rows_per_batch);
    TG_CHECK(a->in.prof.distinct_rows == b->in.prof.distinct_rows);
    TG_CHECK(!memcmp(&a->in.prof.belady, &b->in.prof.belady, sizeof a->in.prof.belady));
    TG_CHECK(a->in.run.epoch_flops == b->in.run.epoch_flops);
    /* a run that cannot take hier (no --allow-inexact) leaves its loader's rates unmeasured;
     * with --allow-inexact they are measured */
    o.own = TG_COST_OWN_TAKEN;
    TG_CHECK_OK(tg_cost_plan(&o, b));
    TG_CHECK(b->in.machine.filter_edges_per_s == 0 && b->in.machine.copy_bytes_per_s == 0);
    TG_CHECK(b->in.machine.gather_rows_per_s > 0 && b->in.machine.buffer_rows_per_s > 0);
    o.allow_inexact = 1;
    TG_CHECK_OK(tg_cost_plan(&o, b));
    TG_CHECK(b->in.machine.filter_edges_per_s > 0 && b->in.machine.copy_bytes_per_s > 0);
    plan_opts(&o);
    /* errors name what is wrong */
    o.dataset = "/nonexistent/plan-ds";
    TG_CHECK_ERR(tg_cost_plan(&o, a), "/nonexistent/plan-ds");
    plan_opts(&o);
    o.model.num_layers = 0;
    TG_CHECK_ERR(tg_cost_plan(&o, a), "layers");
    plan_opts(&o);
    o.threads = 0;
    TG_CHECK_ERR(tg_cost_plan(&o, a), "threads");
    free(a);
    free(b);
}

static int row_of(const tg_cost_plan_t *pl, const char *name)
{
    for (int i = 0; i < pl->n; i++)
        if (!strcmp(pl->names[i], name)) return i;
    return -1;
}

/* hier's own batches (its plan_measure hook): none without the partition (its build charged),
 * a mega-batch's once it is built, the same for the same inputs; its options (--dynamic-parts)
 * and --batches-per-epoch followed; not measured where the plan cannot take it or plans a named
 * strategy; a damaged partition (which the run rebuilds) leaves it unmeasured, not an error. */
TG_TEST(hier_own_batches)
{
    char dir[4300], path[4700];
    snprintf(dir, sizeof dir, "%s/ds-hier", root);
    synth_opts_t so;
    synth_default(&so);
    so.nodes = 2000;
    synth_write(dir, &so);
    tg_cost_plan_opts_t o;
    plan_opts(&o);
    o.dataset = dir;
    o.allow_inexact = 1;
    tg_strategy_arg_t args[] = {{"parts", "8"}, {"dynamic-parts", "2"}};
    o.strategy_args = args;
    o.num_strategy_args = 1;
    tg_cost_plan_t *a = malloc(sizeof *a), *b = malloc(sizeof *b);
    TG_CHECK_OK(tg_cost_plan(&o, a));
    int h = row_of(a, "hier");
    TG_CHECK(h >= 0 && a->in.prof.own.batches == 0);
    if (h < 0) goto out;
    TG_CHECK(strstr(a->pred[h].why, "needs derived partition") != NULL);
    /* the partition the run would use (8 parts: its --parts), built */
    tg_dataset_t *d = NULL;
    TG_CHECK_OK(tg_dataset_open(&d, dir, TG_OPEN_CHECK_SIZES));
    tg_part_build_opts_t bo = {0};
    tg_part_assign_opts_default(&bo.assign);
    bo.assign.parts = 8;
    bo.assign.method = TG_PART_STREAM;
    tg_part_build_stats_t st;
    TG_CHECK_OK(tg_part_build(d, &bo, &st));
    tg_dataset_close(d);
    TG_CHECK_OK(tg_cost_plan(&o, a));
    const tg_cost_own_t *w = &a->in.prof.own;
    TG_CHECK(w->batches >= (double)a->in.prof.batches && w->rows_per_batch > 0 &&
             w->flops_per_batch > 0);
    /* 256M holds every part: one mega-batch of them all, the graph's batches but for the
     * static nodes' lists, which keep only the mega-batch's neighbours */
    TG_CHECK(w->group_size == 8 && w->groups == 1 && w->load_share == 1);
    TG_CHECK(w->rows_per_batch <= a->in.prof.rows_per_batch * 1.05);
    TG_CHECK(a->in.prof.induced_degree_frac > 0.99 && a->in.prof.induced_degree_frac <= 1);
    TG_CHECK(a->cost.own_s > 0 && strstr(a->pred[h].why, "1 mega-batches of 8 parts") != NULL);
    /* a step timed on its largest batch, a mega-batch loaded */
    TG_CHECK(w->step_flops_per_s > 0 && w->load_bytes_per_s > 0);
    /* the same inputs, the same batches (the step and the load are timed anew) */
    TG_CHECK_OK(tg_cost_plan(&o, b));
    tg_cost_own_t x = a->in.prof.own, y = b->in.prof.own;
    x.step_flops_per_s = y.step_flops_per_s = x.load_bytes_per_s = y.load_bytes_per_s = 0;
    TG_CHECK(!memcmp(&x, &y, sizeof x));
    /* --dynamic-parts 2: four mega-batches of a quarter of the nodes, fewer rows per batch and
     * a share of the in-degree */
    o.num_strategy_args = 2;
    TG_CHECK_OK(tg_cost_plan(&o, b));
    w = &b->in.prof.own;
    TG_CHECK(w->group_size == 2 && w->groups == 4 && w->batches >= (double)b->in.prof.batches);
    TG_CHECK(w->rows_per_batch < a->in.prof.own.rows_per_batch);
    TG_CHECK(b->in.prof.induced_degree_frac < 0.9);
    /* (the operations, not the compute time: each plan measures the step's rate anew) */
    TG_CHECK(w->flops_per_batch < a->in.prof.own.flops_per_batch);
    /* --batches-per-epoch 10: the first mega-batch's ten batches; it alone is loaded */
    o.batches_per_epoch = 10;
    TG_CHECK_OK(tg_cost_plan(&o, b));
    TG_CHECK(b->in.prof.own.batches == 10 && b->in.prof.own.groups == 1);
    TG_CHECK(b->in.prof.own.load_share == 0.25);
    o.batches_per_epoch = 0;
    /* a plan that cannot take hier, or plans a named strategy, does not measure it */
    o.own = TG_COST_OWN_TAKEN;
    o.allow_inexact = 0;
    TG_CHECK_OK(tg_cost_plan(&o, b));
    TG_CHECK(b->in.prof.own.batches == 0 && b->cost.own_s == 0);
    o.allow_inexact = 1;
    TG_CHECK_OK(tg_cost_plan(&o, b));
    TG_CHECK(b->in.prof.own.batches > 0);
    o.own = TG_COST_OWN_NONE;
    TG_CHECK_OK(tg_cost_plan(&o, b));
    TG_CHECK(b->in.prof.own.batches == 0);
    o.own = TG_COST_OWN_ALL;
    /* a read of the timed load failing (the partitioned features' rows, past the header that
     * opening the partition checks): the plan fails, naming the file and the offset */
    tg_io_fault_t ft = {.op = TG_IO_FAULT_READ,
                        .file = "partfeat-",
                        .lo = TG_DERIVED_PAYLOAD_OFFSET,
                        .hi = UINT64_MAX,
                        .err = EIO};
    TG_CHECK_OK(tg_io_fault_add(&ft));
    TG_CHECK_ERR(tg_cost_plan(&o, b), "partfeat-");
    TG_CHECK(strstr(tg_errmsg(), "hier: measuring a mega-batch's batches") &&
             strstr(tg_errmsg(), "read at offset"));
    tg_io_fault_clear();
    /* the partition's map damaged: unmeasured (the run rebuilds it), the plan made */
    char params[256];
    TG_CHECK_OK(tg_part_params(&bo.assign, TG_PART_STREAM, params, sizeof params));
    snprintf(path, sizeof path, "%s/derived/part-%s.bin", dir, params);
    FILE *f = fopen(path, "r+b");
    TG_CHECK(f != NULL);
    if (f) {
        fseek(f, -16, SEEK_END);
        fputc(0x5a, f);
        fputc(0xa5, f);
        fclose(f);
    }
    TG_CHECK_OK(tg_cost_plan(&o, b));
    TG_CHECK(b->in.prof.own.batches == 0 && strstr(b->pred[h].why, "not measured") != NULL);
out:
    free(a);
    free(b);
}

/* The profile's own reads failing (indices.bin read ahead of its sampling, the middle of
 * features.bin read buffered for hier's loader rate): the plan fails, the message naming the
 * file and the offset. */
TG_TEST(profile_read_errors)
{
    char dir[4300];
    snprintf(dir, sizeof dir, "%s/ds-reads", root);
    synth_opts_t so;
    synth_default(&so);
    so.nodes = 8000;
    so.dim = 160; /* 5.1 MB of features: the buffered read times 4 MiB or more */
    synth_write(dir, &so);
    tg_cost_plan_opts_t o;
    plan_opts(&o);
    o.dataset = dir;
    o.allow_inexact = 1;
    tg_cost_plan_t *pl = malloc(sizeof *pl);
    TG_CHECK_OK(tg_cost_plan(&o, pl));
    TG_CHECK(pl->in.machine.buffered_bytes_per_s > 0);
    static const char *const files[] = {"indices.bin", "features.bin"};
    for (int i = 0; i < 2; i++) {
        tg_io_fault_t f = {.op = TG_IO_FAULT_READ, .file = files[i], .hi = UINT64_MAX, .err = EIO};
        TG_CHECK_OK(tg_io_fault_add(&f));
        TG_CHECK_ERR(tg_cost_plan(&o, pl), files[i]);
        TG_CHECK(strncmp(tg_errmsg(), "plan: ", 6) == 0 && strstr(tg_errmsg(), "read at offset"));
        tg_io_fault_clear();
    }
    free(pl);
}

/* ---------------------------------------------------------------- the command line */

#define TINY1 "--hidden 8 --fanouts 3,3 --batch-size 64 --threads 1"
#define TINY TINY1 " --epochs 2"

TG_TEST(cli_plan)
{
    char *out = NULL;
    int rc = tg_test_cli(&out, "plan %s " TINY " --mem 256M", ds);
    TG_CHECK(rc == 0 && out && strstr(out, "choice: memory") && strstr(out, "gnndrive"));
    if (rc) fprintf(stderr, "%s\n", out ? out : "");
    free(out);
    rc = tg_test_cli(&out, "plan %s " TINY " --strategy gnndrive", ds);
    TG_CHECK(rc == 0 && out && strstr(out, "note: --strategy gnndrive is given"));
    free(out);
    rc = tg_test_cli(&out, "plan %s " TINY " --json --allow-inexact 2>/dev/null", ds);
    TG_CHECK(rc == 0 && out && out[0] == '{' && strstr(out, "\"choice\":\"") &&
             strstr(out, "\"allow_inexact\":true") && strstr(out, "\"batches_profiled\":"));
    free(out);
    /* error paths: a dataset that is not there (named), none, a resume, a bad flag */
    rc = tg_test_cli(&out, "plan %s/missing " TINY, root);
    TG_CHECK(rc == 1 && out && strstr(out, "/missing"));
    free(out);
    rc = tg_test_cli(&out, "plan " TINY);
    TG_CHECK(rc == 1 && out && strstr(out, "plan: expected one DATASET"));
    free(out);
    rc = tg_test_cli(&out, "plan %s --resume " TINY, ds);
    TG_CHECK(rc == 1 && out && strstr(out, "plan: --resume"));
    free(out);
    rc = tg_test_cli(&out, "plan %s --disk-budget lots " TINY, ds);
    TG_CHECK(rc == 1 && out && strstr(out, "--disk-budget"));
    free(out);
    rc = tg_test_cli(&out, "plan %s --layers 0 " TINY, ds);
    TG_CHECK(rc != 0 && out && strstr(out, "layers"));
    free(out);
    rc = tg_test_cli(&out, "plan --help");
    TG_CHECK(rc == 0 && out && strstr(out, "usage: tiergnn plan"));
    free(out);
}

TG_TEST(train_auto_records_the_plan)
{
    char *out = NULL, path[4400];
    int rc = tg_test_cli(&out, "train %s --out %s/auto " TINY " --mem 256M --json", ds, root);
    TG_CHECK(rc == 0 && out && strstr(out, "strategy memory: planned"));
    TG_CHECK(out && strstr(out, "\"plan\":{\"choice\":\"memory\""));
    if (rc) fprintf(stderr, "%s\n", out ? out : "");
    free(out);
    snprintf(path, sizeof path, "%s/auto/%s", root, TG_PLAN_NAME);
    char *text = tg_test_read_all(path, NULL);
    TG_CHECK(text && strstr(text, "\"choice\":\"memory\"") && strstr(text, "\"profile\":{"));
    free(text);
    /* a named strategy is not planned */
    rc = tg_test_cli(&out, "train %s --out %s/named --strategy gnndrive " TINY, ds, root);
    TG_CHECK(rc == 0 && out && !strstr(out, "planned"));
    free(out);
    snprintf(path, sizeof path, "%s/named/%s", root, TG_PLAN_NAME);
    TG_CHECK(access(path, F_OK) != 0);
    /* a resumed run continues with the strategy its config.json records: the planned one */
    rc = tg_test_cli(&out, "train %s --out %s/auto " TINY1 " --epochs 3 --resume", ds, root);
    TG_CHECK(rc == 0 && out && strstr(out, "with strategy memory") && !strstr(out, "planned"));
    free(out);
}

/* Where the profile cannot run (here: the device probe cannot open features.bin with O_DIRECT and
 * has no cached result), train keeps the fixed rule and says why; plan fails naming the probe. */
TG_TEST(train_falls_back_to_the_fixed_rule)
{
    char cache[4300], *out = NULL;
    snprintf(cache, sizeof cache, "%s/empty-cache", root);
    const char *old = getenv("XDG_CACHE_HOME");
    char *saved = old ? strdup(old) : NULL;
    setenv("XDG_CACHE_HOME", cache, 1);
    setenv("TIERGNN_IO_FAULT", "EINVAL@0,op=open,file=features.bin", 1);
    int rc = tg_test_cli(&out, "train %s --out %s/fallback " TINY " --mem 256M", ds, root);
    TG_CHECK(rc == 0 && out && strstr(out, "the planner cannot choose (") &&
             strstr(out, "the fixed rule decides") && strstr(out, "strategy memory: graph and"));
    if (rc) fprintf(stderr, "%s\n", out ? out : "");
    free(out);
    char path[4400];
    snprintf(path, sizeof path, "%s/fallback/%s", root, TG_PLAN_NAME);
    TG_CHECK(access(path, F_OK) != 0);
    rc = tg_test_cli(&out, "plan %s " TINY, ds);
    TG_CHECK(rc == 1 && out && strstr(out, "plan: probing the device under") &&
             strstr(out, "features.bin"));
    free(out);
    unsetenv("TIERGNN_IO_FAULT");
    if (saved)
        setenv("XDG_CACHE_HOME", saved, 1);
    else
        unsetenv("XDG_CACHE_HOME");
    free(saved);
}

int main(void)
{
    setup();
    TG_RUN(choice_on_fixed_inputs);
    TG_RUN(inexact_shown_not_taken);
    TG_RUN(without_predict_skipped);
    TG_RUN(deterministic);
    TG_RUN(bad_inputs_named);
    TG_RUN(disk_budget_planned);
    TG_RUN(ginex_split_planned);
    TG_RUN(plan_args_added_unless_given);
    TG_RUN(first_pass_refused);
    TG_RUN(degree_classes);
    TG_RUN(curves_from_classes);
    TG_RUN(profile_bound);
    TG_RUN(profile_measures);
    TG_RUN(hier_own_batches);
    TG_RUN(profile_read_errors);
    TG_RUN(cli_plan);
    TG_RUN(train_auto_records_the_plan);
    TG_RUN(train_falls_back_to_the_fixed_rule);
    return tg_test_done();
}
