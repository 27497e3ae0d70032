/* The cost model (engine/plan_cost.h) on fixed inputs: the shared bench's figures from
 * bench/README.md, every strategy's predicted steady epoch against its measured one within a
 * stated tolerance, the ranking and the choice, determinism, inexact strategies only when
 * allowed, a strategy without predict skipped, infeasible ones never chosen, and inputs that
 * cannot be used refused with their name. */
#include "support/tg_test.h"

#include <errno.h>

#include "engine/engine-impl.h"
#include "engine/plan_cost.h"
#include "tiergnn/featbuf.h"

#define MIB 1048576.0

/* The shared bench (bench/README.md, "Ginex (issue 9): the shared strategy bench"): data/g4m,
 * SAGE 3 x 256, fanouts 10,10,10, batch 1000, --mem 1200M, 2 cores. Where each figure is from:
 * - probe: depths 16, 64, 128 at 67.9k, 82.1k, 83.8k reads/s ("GIDS (issue 12): two chunks in
 *   flight per extractor (session 15)"); depths 1 and 4 (21.7k, 46.7k) from this machine's probe
 *   cache (not in bench/README.md); sequential 1.49 GB/s ("DiskGNN (issue 10): the acceptance
 *   bench again, the budget and the cores (session 19)": "disk probed at 1.49 GB/s").
 * - GEMM rate 289 GFLOP/s and the epoch's 707.9 GFLOP: that session's bench.json bounds
 *   (bench/results-diskgnn/session19-1200M/); the achieved step rate: the same GFLOP over the
 *   10.0 s of training (compute_s) ginex's epoch 2 took there.
 * - sampling 3.1 s and gathering 9.1 s of the memory strategy's epoch of 11.8 M rows ("DiskGNN
 *   (issue 10): the acceptance bench (session 10)", "Why 1.5x memory is missed").
 * - 4 M nodes, 59 M edges of 4 bytes, 128 f32 features ("HierBatching (issue 11): partitioning
 *   and the shared bench (session 11)"), the 1% highest in-degree nodes hold 31% of the edges.
 * - budget: 351 MiB for caches beside 2 input matrices of 166.5 MiB ("Ginex (issue 9)";
 *   budget_rest_bytes in its bench.json).
 * - profile: 40 batches, 11 824 348 row accesses, 2 863 387 distinct rows (footprint of every
 *   bench.json above); 96 861 index reads per batch ("Ginex (issue 9)", "Split"); index bytes:
 *   io_needed_bytes less the rows' bytes (session 19's bench.json).
 * - Belady misses: 6.45 M at ginex's 187 533-row feature cache ("Ginex (issue 9)", "Misses"),
 *   3.80 M at 718 068 rows (the Belady bound of the session 19 bench.json).
 * - LRU misses: 98.6% at gnndrive's 22 769 slots ("GIDS (issue 12): the shared bench ...
 *   (session 13)", the window table); at 324 579 slots the 85.5% gids's buffer missed of the
 *   lookups past its constant buffer (same table: inferred, no LRU simulation at that size is
 *   in bench/README.md).
 * - reverse PageRank: the 319 649 hottest rows serve 46.5% of the lookups (session 13); by
 *   degree no coverage is measured: the test uses the same points.
 * - neighbour cache: 139.5 MiB serves 48% of the sampled nodes ("Ginex (issue 9)", "Split");
 *   every list (indices + a 4-byte table entry per node) serves all.
 * - hier: mega-batches keep 3.9 + 3.7 of the mean in-degree 14.74 ("HierBatching (issue 11)
 *   ... (session 11)"); diskgnn: the layout's estimate 1.017 at --disk-budget 4G ("DiskGNN
 *   (issue 10): the acceptance bench (session 10)"). */
static tg_cost_inputs_t shared_bench(void)
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
    m->step_flops_per_s = 707.9e9 / 10.0;
    m->sample_nodes_per_s = 11.824348e6 / 3.1;
    m->gather_rows_per_s = 11.824348e6 / 9.1;
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
                             .free_bytes = (uint64_t)(351.0 * MIB + 2 * 166.5 * MIB),
                             .disk_budget = (uint64_t)4 << 30,
                             .disk_free = (uint64_t)60 << 30};
    tg_cost_profile_t *p = &in.prof;
    const double acc = 11824348, distinct = 2863387;
    p->batches = 40;
    p->rows_per_batch = acc / 40;
    p->index_reads_per_batch = 96861;
    p->index_bytes_per_batch = (6130889996.0 - acc * 512) / 40;
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

/* Measured steady epochs (epoch 2, or the mean of epochs 2..N a bench reports), and how far the
 * model may land from them. */
static const struct {
    const char *name;
    double measured_s, tol; /* |predicted / measured - 1| <= tol */
    const char *where;
    int epochs; /* of the run measured (0: shared_bench's 2) */
} measured[] = {
    {"mmap", 517.1, 0.30, "HierBatching (issue 11) ... (session 19), epoch 2", 0},
    {"gnndrive", 74.5, 0.30, "HierBatching (issue 11) ... (session 19), epoch 2", 0},
    {"pagraph", 96.3, 0.30, "DiskGNN (issue 10): first measurements, epoch 2", 0},
    /* session 19's 56.85 s (DiskGNN ... (session 19), 1200M) came from a disk that read
     * 1.49 GB/s; on this AMD machine (the probe's kind since session 21) the executor's reads
     * wait behind the samplers' and ginex measured 67.5 s (session 30: 88.8 s at a split of
     * 80%, predicted 85.8 s from its own profile) */
    {"ginex", 67.51, 0.30, "The strategy seam ... (session 21), after, epoch 2", 0},
    /* epochs 1..3 pack the next epoch beside training, the last packs none: the mean of the
     * timed epochs 2..4 (17.35, 15.54, 12.02) */
    {"diskgnn", 14.97, 0.30, "DiskGNN (issue 10) ... (session 19), disk-budget=4G, epochs 2-4", 4},
    {"hier", 6.44, 0.30, "HierBatching (issue 11) ... (session 19), parts=1024, epoch 2", 0},
    {"gids", 70.0, 0.30, "GIDS (issue 12): two chunks in flight (session 15), epoch 2", 0},
};

static int table_index(const char *name)
{
    for (int i = 0; i < tg_strategy_count(); i++)
        if (!strcmp(tg_strategy_at(i)->info.name, name)) return i;
    return -1;
}

TG_TEST(shared_bench_predictions)
{
    tg_cost_inputs_t in = shared_bench();
    tg_cost_pred_t pred[TG_COST_MAX_STRATS];
    int best = -2;
    for (size_t k = 0; k < sizeof measured / sizeof measured[0]; k++) {
        int i = table_index(measured[k].name);
        TG_CHECK(i >= 0);
        if (i < 0) continue;
        in.run.epochs = measured[k].epochs ? measured[k].epochs : 2;
        TG_CHECK_OK(tg_cost_choose(&in, 0, pred, TG_COST_MAX_STRATS, &best));
        const tg_cost_pred_t *p = &pred[i];
        double err = p->steady_s / measured[k].measured_s - 1;
        fprintf(stderr,
                "  %-9s predicted %7.2f s (steady; +%.2f s preparation) measured %7.2f s: %+5.1f%% "
                "| io %.1f s, %.1f GiB, sample %.1f, gather %.1f, compute %.1f | %s\n",
                measured[k].name, p->steady_s, p->prep_s, measured[k].measured_s, 100 * err,
                p->io_s, p->read_bytes / (MIB * 1024), p->sample_s, p->gather_s, p->compute_s,
                p->why);
        TG_CHECK(p->predicted && p->feasible);
        if (!(fabs(err) <= measured[k].tol))
            TG_FAIL("%s: predicted %.2f s, measured %.2f s (bench/README.md, %s): %+.1f%%, "
                    "tolerance %.0f%%",
                    measured[k].name, p->steady_s, measured[k].measured_s, measured[k].where,
                    100 * err, 100 * measured[k].tol);
    }
    in.run.epochs = 2;
    TG_CHECK_OK(tg_cost_choose(&in, 0, pred, TG_COST_MAX_STRATS, &best));
    /* memory does not fit 1200M (features 1.91 GiB): never chosen there */
    int mem = table_index("memory");
    TG_CHECK(pred[mem].predicted && !pred[mem].feasible && strstr(pred[mem].why, "MiB"));
    /* the fastest exact strategy is diskgnn; then gids and ginex (64-68 s each in session 21),
     * before gnndrive and pagraph (81-84 s), mmap last (373 s) */
    TG_CHECK(best == table_index("diskgnn"));
    static const char *faster[] = {"diskgnn", "gids", "ginex"};
    static const char *slower[] = {"gnndrive", "pagraph", "mmap"};
    for (int a = 0; a < 3; a++)
        for (int b = 0; b < 3; b++)
            if (!(pred[table_index(faster[a])].epoch_s < pred[table_index(slower[b])].epoch_s))
                TG_FAIL("expected %s faster than %s", faster[a], slower[b]);
    TG_CHECK(pred[table_index("diskgnn")].epoch_s < pred[table_index("gids")].epoch_s);
    TG_CHECK(pred[table_index("gnndrive")].epoch_s < pred[table_index("mmap")].epoch_s);
    TG_CHECK(pred[table_index("pagraph")].epoch_s < pred[table_index("mmap")].epoch_s);
}

/* Without a limit the memory strategy runs, and is measured at 9.45 s (bench/README.md,
 * "DiskGNN (issue 10) ... (session 19)", memory's epoch 2). */
TG_TEST(memory_without_limit)
{
    tg_cost_inputs_t in = shared_bench();
    in.run.free_bytes = (uint64_t)64 << 30;
    tg_cost_pred_t pred[TG_COST_MAX_STRATS];
    int best;
    TG_CHECK_OK(tg_cost_choose(&in, 0, pred, TG_COST_MAX_STRATS, &best));
    int mem = table_index("memory");
    const tg_cost_pred_t *p = &pred[mem];
    double err = p->steady_s / 9.45 - 1;
    fprintf(stderr, "  memory    predicted %7.2f s measured %7.2f s: %+5.1f%% | %s\n", p->steady_s,
            9.45, 100 * err, p->why);
    TG_CHECK(p->feasible);
    TG_CHECK(fabs(err) <= 0.30);
    TG_CHECK(p->io_s == 0);
}

TG_TEST(inexact_only_when_allowed)
{
    tg_cost_inputs_t in = shared_bench();
    tg_cost_pred_t pred[TG_COST_MAX_STRATS];
    int best, hier = table_index("hier");
    TG_CHECK_OK(tg_cost_choose(&in, 0, pred, TG_COST_MAX_STRATS, &best));
    TG_CHECK(best != hier);
    TG_CHECK(strstr(pred[hier].why, "not taken") != NULL);
    TG_CHECK_OK(tg_cost_choose(&in, 1, pred, TG_COST_MAX_STRATS, &best));
    TG_CHECK(best == hier); /* the shortest epoch of all when allowed */
    TG_CHECK(strstr(pred[hier].why, "changes the sampled graph") != NULL);
    /* without its partition: charged for building it, amortised over the epochs */
    in.data.derived &= ~(unsigned)TG_COST_HAVE_PARTS;
    TG_CHECK_OK(tg_cost_choose(&in, 1, pred, TG_COST_MAX_STRATS, &best));
    TG_CHECK(pred[hier].prep_s > 0 && strstr(pred[hier].why, "needs derived partition"));
    /* no room for the partitioned copy (nor diskgnn's packing): the next fastest, ginex */
    in.run.disk_free = 1 << 30;
    TG_CHECK_OK(tg_cost_choose(&in, 1, pred, TG_COST_MAX_STRATS, &best));
    TG_CHECK(!pred[hier].feasible && best != hier);
    if (!(!pred[table_index("diskgnn")].feasible && best == table_index("ginex")))
        TG_FAIL("with 1 GiB of free disk: diskgnn feasible %d, chose %d (%s)",
                pred[table_index("diskgnn")].feasible, best,
                best >= 0 ? tg_strategy_at(best)->info.name : "none");
}

/* Figures the profile left out and derived files that are missing change the terms the way the
 * pipelines say. */
TG_TEST(missing_figures_and_files)
{
    tg_cost_inputs_t in = shared_bench();
    tg_cost_pred_t a[TG_COST_MAX_STRATS], b[TG_COST_MAX_STRATS];
    int best;
    int pg = table_index("pagraph"), dg = table_index("diskgnn"), gi = table_index("gids");
    TG_CHECK_OK(tg_cost_choose(&in, 0, a, TG_COST_MAX_STRATS, &best));
    /* pagraph without a degree coverage: the 1% highest-degree nodes' edge share, pro rata */
    in.prof.hot_degree.n = 0;
    in.run.free_bytes += (uint64_t)(200 * MIB);
    TG_CHECK_OK(tg_cost_choose(&in, 0, b, TG_COST_MAX_STRATS, &best));
    TG_CHECK(b[pg].feasible && strstr(b[pg].why, "serve") && b[pg].steady_s < a[pg].steady_s);
    /* diskgnn with no room for the indices (225 MiB) but enough for its first pass (reader,
     * packing and the epoch's planning, about 130 MiB): its samplers read every list from disk */
    in = shared_bench();
    in.run.free_bytes = (uint64_t)(200 * MIB + 2 * 166.5 * MIB);
    TG_CHECK_OK(tg_cost_choose(&in, 0, b, TG_COST_MAX_STRATS, &best));
    /* (the epochs that sample the next one read them: with 2 epochs the first, so the run's
     * mean epoch, not the last epoch's, grows) */
    TG_CHECK(strstr(b[dg].why, "from disk") && b[dg].epoch_s > a[dg].epoch_s);
    /* gids without its ranking: charged the power iterations */
    in = shared_bench();
    in.data.derived &= ~(unsigned)TG_COST_HAVE_RANK;
    TG_CHECK_OK(tg_cost_choose(&in, 0, b, TG_COST_MAX_STRATS, &best));
    TG_CHECK(b[gi].prep_s > a[gi].prep_s && b[gi].steady_s == a[gi].steady_s);
}

/* hier's loader: its synchronous reads, their copy out of the page cache (at the gather's byte
 * rate) and the walk over every list entry (at the measured filter rate) add up on one thread,
 * which bounds the epoch when training is quicker. */
TG_TEST(hier_loader)
{
    tg_cost_inputs_t in = shared_bench();
    tg_cost_pred_t a[TG_COST_MAX_STRATS], b[TG_COST_MAX_STRATS];
    int best, h = table_index("hier");
    TG_CHECK_OK(tg_cost_choose(&in, 1, a, TG_COST_MAX_STRATS, &best));
    in.machine.filter_edges_per_s = 59e6; /* the 59 M edges in 1 s */
    TG_CHECK_OK(tg_cost_choose(&in, 1, b, TG_COST_MAX_STRATS, &best));
    TG_CHECK_NEAR(b[h].gather_s - a[h].gather_s, 1.0, 1e-9);
    in.machine.copy_bytes_per_s = 4e9;
    TG_CHECK_OK(tg_cost_choose(&in, 1, b, TG_COST_MAX_STRATS, &best));
    double bytes = 4e6 * 512 + 59e6 * 4, io = bytes / 1.1265e9, copy = bytes / 4e9;
    TG_CHECK_NEAR(b[h].io_s, io, 1e-9);
    TG_CHECK_NEAR(b[h].stage_s, io + 1.0 + copy, 1e-9);
    TG_CHECK_NEAR(b[h].stage_cpu_s, 1.0 + copy, 1e-9);
    /* training ten times quicker: the loader's reads, copy and walk are the epoch */
    in.machine.step_flops_per_s *= 10;
    in.machine.sample_nodes_per_s *= 10;
    in.machine.gather_rows_per_s *= 10;
    in.machine.copy_bytes_per_s *= 10;
    TG_CHECK_OK(tg_cost_choose(&in, 1, b, TG_COST_MAX_STRATS, &best));
    TG_CHECK_NEAR(b[h].steady_s, io + 1.0 + copy / 10, 1e-9);
    /* its buffered reads at their measured rate, which includes the copy out of the page
     * cache */
    in.machine.buffered_bytes_per_s = 0.5e9;
    TG_CHECK_OK(tg_cost_choose(&in, 1, b, TG_COST_MAX_STRATS, &best));
    TG_CHECK_NEAR(b[h].io_s, bytes / 0.5e9, 1e-9);
    TG_CHECK_NEAR(b[h].stage_s, bytes / 0.5e9 + 1.0, 1e-9);
    /* a real load timed: its rate is the loader's */
    in.prof.own = (tg_cost_own_t){.batches = (double)in.prof.batches,
                                  .rows_per_batch = in.prof.rows_per_batch,
                                  .flops_per_batch = in.run.epoch_flops / (double)in.prof.batches,
                                  .groups = 20,
                                  .group_size = 49,
                                  .load_share = 1,
                                  .load_bytes_per_s = 0.25e9};
    TG_CHECK_OK(tg_cost_choose(&in, 1, b, TG_COST_MAX_STRATS, &best));
    TG_CHECK_NEAR(b[h].stage_s, bytes / 0.25e9, 1e-9);
    TG_CHECK_NEAR(b[h].steady_s, bytes / 0.25e9, 1e-9);
    /* a step timed on its own batch: its steps at that rate */
    in.prof.own.step_flops_per_s = in.machine.step_flops_per_s / 20;
    TG_CHECK_OK(tg_cost_choose(&in, 1, b, TG_COST_MAX_STRATS, &best));
    TG_CHECK_NEAR(b[h].compute_s, in.run.epoch_flops / in.prof.own.step_flops_per_s, 1e-6);
}

/* hier with its own batches measured (plan_measure): sampling and gathering follow the
 * mega-batches' row accesses, training their operations, not the whole graph's batches nor the
 * in-degree kept. */
TG_TEST(hier_own_batches)
{
    tg_cost_inputs_t in = shared_bench();
    tg_cost_pred_t a[TG_COST_MAX_STRATS], b[TG_COST_MAX_STRATS];
    int best, h = table_index("hier");
    in.prof.induced_degree_frac = 1;
    TG_CHECK_OK(tg_cost_choose(&in, 1, a, TG_COST_MAX_STRATS, &best));
    /* a third of the rows over 10% more batches, 40% of the operations per batch */
    double per = in.run.epoch_flops / (double)in.prof.batches;
    in.prof.own = (tg_cost_own_t){.batches = 1.1 * (double)in.prof.batches,
                                  .rows_per_batch = in.prof.rows_per_batch / 3,
                                  .flops_per_batch = 0.4 * per,
                                  .groups = 20,
                                  .group_size = 49,
                                  .load_share = 1};
    TG_CHECK_OK(tg_cost_choose(&in, 1, b, TG_COST_MAX_STRATS, &best));
    TG_CHECK_NEAR(b[h].sample_s, a[h].sample_s * 1.1 / 3, 1e-9);
    TG_CHECK_NEAR(b[h].compute_s, a[h].compute_s * 1.1 * 0.4, 1e-9);
    double loader = a[h].stage_cpu_s; /* its copy and walk: the same */
    TG_CHECK_NEAR(b[h].gather_s - loader, (a[h].gather_s - loader) * 1.1 / 3, 1e-9);
    TG_CHECK(b[h].steady_s < a[h].steady_s);
    TG_CHECK(strstr(b[h].why, "20 mega-batches of 49 parts") != NULL);
    /* an epoch cut to a quarter of its mega-batches reads a quarter of the files */
    in.prof.own.load_share = 0.25;
    TG_CHECK_OK(tg_cost_choose(&in, 1, b, TG_COST_MAX_STRATS, &best));
    TG_CHECK_NEAR(b[h].read_bytes, a[h].read_bytes / 4, 1e-3);
}

/* diskgnn's executor and its packing beside training: the executor's reads and copies add up
 * on its one thread; the packing chain (the next epoch sampled on its sampler thread, then
 * features.bin read beside the copies of its rows and the packed file's writes) lasts its disk
 * time or its copies, whichever is longer; an epoch that packs lasts the pair (packing and
 * training on one disk and the cores), and the last waits for the pair's end beyond twice its
 * own training (an epoch beside the packing trains at about half its pace). On the shared
 * bench's figures the chain (3.1 + 9.1 s: its copies outlast its 7.2 s of disk) is shorter than
 * an epoch's training beside it (15.65 s: 31.3 CPU seconds on 2 cores), which is shorter than
 * twice the last epoch's 10 s: the last waits for nothing. */
TG_TEST(diskgnn_packing_wait)
{
    tg_cost_inputs_t in = shared_bench();
    tg_cost_pred_t pred[TG_COST_MAX_STRATS];
    int best, dg = table_index("diskgnn");
    double need = 11824348.0 * 512, feat = 4e6 * 512, seq = 1.1265e9;
    double pack = 3.1 / 1 + fmax((feat + need) / seq, 9.1);
    double train = (3.1 + 2 * 9.1 + 10.0) / 2; /* sampling, two copies and the steps */
    double S[4];
    for (int e = 1; e <= 3; e++) {
        in.run.epochs = e;
        TG_CHECK_OK(tg_cost_choose(&in, 0, pred, TG_COST_MAX_STRATS, &best));
        S[e] = pred[dg].steady_s;
    }
    /* E = 1: the last epoch alone; E = 3: the mean of an epoch that packs (the pair) and the
     * last */
    /* the last epoch: one executor reads the packed runs (the layout's 1.017: 5.5 s) and
     * copies the rows (9.1 s), on that thread; past the first wave of a batch's reads the reads
     * run beside the copies, so its stage is shorter than the steps (10 s), which set the epoch */
    TG_CHECK(S[1] <= need * 1.017 / seq + 9.1);
    TG_CHECK_NEAR(S[1], 10.0, 1e-6);
    double pair = 2 * S[3] - S[2];
    TG_CHECK_NEAR(pair, fmax(train, pack), 1e-6);
    TG_CHECK(pack < train);
    /* E = 2: the last waits for the pair's end beyond twice its own training: none here */
    TG_CHECK_NEAR(S[2] - S[1], fmax(pair - fmin(2 * S[1], pair), 0), 1e-6);
    TG_CHECK_NEAR(S[2], S[1], 1e-6);
    /* no room for hot rows at 351 MiB (as measured there); where every row fits, every row is
     * hot and the last epoch reads nothing back */
    TG_CHECK(strstr(pred[dg].why, " 0k hot rows serve 0%") != NULL);
    in.run.free_bytes = (uint64_t)64 << 30;
    in.run.epochs = 2;
    TG_CHECK_OK(tg_cost_choose(&in, 0, pred, TG_COST_MAX_STRATS, &best));
    TG_CHECK(strstr(pred[dg].why, "4000k hot rows serve 100%") != NULL);
    TG_CHECK(pred[dg].read_bytes == 0 && pred[dg].io_s == 0);
    /* every row hot on a disk at a twentieth of the rate: the packing reads features.bin in
     * 36 s, beyond twice the last epoch (no reads: its copies and steps), which waits for the
     * rest */
    in.machine.probe.seq_bytes_per_s = seq / 20;
    for (int e = 1; e <= 3; e++) {
        in.run.epochs = e;
        TG_CHECK_OK(tg_cost_choose(&in, 0, pred, TG_COST_MAX_STRATS, &best));
        S[e] = pred[dg].steady_s;
    }
    /* the pair lasts the packing's disk time: features.bin, then the indices read for
     * sampling (E = 3: io_s is the mean of the pair's and the last's, which reads nothing) */
    pair = 2 * S[3] - S[2];
    TG_CHECK(pair >= 3.1 + feat / (seq / 20));
    TG_CHECK_NEAR(pair, 2 * pred[dg].io_s, 1e-6);
    TG_CHECK(pair > 2 * S[1]);
    TG_CHECK_NEAR(S[2] - S[1], pair - 2 * S[1], 1e-6);
}

/* Rows through a feature buffer at its measured rate: gnndrive's every row (LRU), gids's past
 * its constant buffer (WINDOW where --window auto takes a look-ahead: with room for it); gids's
 * one extractor bounds the epoch by its gathering. */
TG_TEST(buffer_gather)
{
    tg_cost_inputs_t in = shared_bench();
    tg_cost_pred_t pred[TG_COST_MAX_STRATS];
    int best, gd = table_index("gnndrive"), gi = table_index("gids");
    double acc = 11824348;
    TG_CHECK_NEAR(tg_cost_buffer_gather_s(&in, acc, 0), 9.1, 1e-9); /* unmeasured: gather rate */
    in.machine.buffer_rows_per_s = acc / 20;
    in.machine.window_rows_per_s = acc / 40;
    TG_CHECK_NEAR(tg_cost_buffer_gather_s(&in, acc, 0), 20, 1e-9);
    TG_CHECK_NEAR(tg_cost_buffer_gather_s(&in, acc, 1), 40, 1e-9);
    TG_CHECK_OK(tg_cost_choose(&in, 0, pred, TG_COST_MAX_STRATS, &best));
    TG_CHECK_NEAR(pred[gd].gather_s, 20, 1e-9);
    /* gids with room for the look-ahead: the constant buffer's share (the reverse-PageRank
     * coverage at its rows) at the gather rate, the rest at the window rate */
    in.run.free_bytes = (uint64_t)64 << 30;
    TG_CHECK_OK(tg_cost_choose(&in, 0, pred, TG_COST_MAX_STRATS, &best));
    TG_CHECK(strstr(pred[gi].why, "window buffer") != NULL);
    /* at most a fifth of the file, its node table included (as gi_setup sizes it) */
    double cb = tg_cost_static_rows(&in, 0.20 * tg_cost_feat_bytes(&in), 0, 0);
    TG_CHECK(cb > 0.19 * 4e6 && cb < 0.20 * 4e6);
    double cover = tg_cost_curve_at(&in.prof.hot_rpr, cb);
    TG_CHECK_NEAR(pred[gi].gather_s, (1 - cover) * 40 + cover * 9.1, 1e-6);
    /* its one extractor reads (every read of the epoch at its depth) and copies */
    TG_CHECK(pred[gi].stage_s > pred[gi].gather_s && pred[gi].stage_cpu_s == pred[gi].gather_s);
    TG_CHECK(pred[gi].steady_s >= pred[gi].gather_s);
    in.machine.buffer_rows_per_s = -1;
    TG_CHECK_ERR(tg_cost_check(&in), "buffer_rows_per_s");
}

/* ginex fills its cache with a superbatch's distinct rows in one sorted sweep (at most the
 * cache's rows): the fewer rows S consecutive batches use (the profile's window_rows), the
 * fewer of the Belady misses come in those sweeps rather than as a batch's random reads. */
TG_TEST(ginex_superbatch_fill)
{
    tg_cost_inputs_t in = shared_bench();
    tg_cost_pred_t pred[TG_COST_MAX_STRATS];
    int best, gx = table_index("ginex");
    in.run.free_bytes = (uint64_t)1200 << 20;
    TG_CHECK_OK(tg_cost_choose(&in, 0, pred, TG_COST_MAX_STRATS, &best));
    tg_cost_pred_t even = pred[gx]; /* unknown window: an even share of the epoch's rows */
    TG_CHECK(strstr(even.why, "superbatch 21") != NULL);
    double B = (double)in.prof.batches;
    in.prof.window_rows = (tg_cost_curve_t){2, {1, B}, {1000, 2e5}};
    TG_CHECK_OK(tg_cost_choose(&in, 0, pred, TG_COST_MAX_STRATS, &best));
    TG_CHECK(strstr(pred[gx].why, "superbatch 21") != NULL);
    TG_CHECK(pred[gx].row_io_s > even.row_io_s);
}

/* The buffers as the runs size them: a feature buffer's slots carry records and a node table
 * (the narrow workload's gids: 118k slots in 25.4 MiB for rows of 128 bytes), a static tier's
 * rows a node table. */
TG_TEST(buffer_sizes)
{
    tg_cost_inputs_t in = shared_bench();
    tg_featbuf_opts_t fo = {.num_nodes = 4000000,
                            .feat_dim = 128,
                            .dtype = TG_F32,
                            .max_batch_nodes = 8192,
                            .max_batches = 2};
    double bytes = 64 << 20, r = tg_cost_featbuf_rows(&in, &fo, bytes);
    TG_CHECK((double)tg_featbuf_bytes_for(&fo, (uint32_t)r) <= bytes);
    TG_CHECK((double)tg_featbuf_bytes_for(&fo, (uint32_t)r + 1) > bytes);
    TG_CHECK(r < bytes / 512);
    TG_CHECK_NEAR(tg_cost_featbuf_rows(&in, &fo, 1e15), 4e6, 0); /* never more than rows */
    TG_CHECK_NEAR(tg_cost_featbuf_rows(&in, &fo, 0), 0, 0);
    double k = tg_cost_static_rows(&in, bytes, 16, 6 << 20);
    TG_CHECK(k > 0 && k < (bytes - (6 << 20)) / (512 + 16));
    TG_CHECK_NEAR(tg_cost_static_rows(&in, 1e15, 0, 0), 4e6, 0);
}

TG_TEST(deterministic)
{
    tg_cost_inputs_t in = shared_bench();
    tg_cost_pred_t a[TG_COST_MAX_STRATS], b[TG_COST_MAX_STRATS];
    int ba, bb;
    TG_CHECK_OK(tg_cost_choose(&in, 1, a, TG_COST_MAX_STRATS, &ba));
    TG_CHECK_OK(tg_cost_choose(&in, 1, b, TG_COST_MAX_STRATS, &bb));
    TG_CHECK(ba == bb);
    TG_CHECK(!memcmp(a, b, sizeof(tg_cost_pred_t) * (size_t)tg_strategy_count()));
}

/* Fake rows: one without predict, two with the same prediction (the earlier one wins), one
 * faster but infeasible. */
static int fake_fast(const tg_cost_inputs_t *in, tg_cost_pred_t *p)
{
    (void)in;
    p->steady_s = p->epoch_s = 1;
    return 0;
}
static int fake_slow(const tg_cost_inputs_t *in, tg_cost_pred_t *p)
{
    (void)in;
    p->steady_s = p->epoch_s = 2;
    return 0;
}
static int fake_cannot(const tg_cost_inputs_t *in, tg_cost_pred_t *p)
{
    (void)in;
    p->steady_s = p->epoch_s = 0.5;
    tg_cost_infeasible(p, "needs %s", "a GPU");
    return 0;
}

TG_TEST(fake_rows)
{
    tg_cost_inputs_t in = shared_bench();
    tg_strategy_i none = {.info = {.name = "none", .caps = TG_STRAT_EXACT}};
    tg_strategy_i first = {.info = {.name = "first", .caps = TG_STRAT_EXACT}, .predict = fake_slow};
    tg_strategy_i second = first, cannot = first;
    second.info.name = "second";
    cannot.info.name = "cannot";
    cannot.predict = fake_cannot;
    const tg_strategy_i *rows[] = {&none, &cannot, &first, &second};
    tg_cost_pred_t pred[4];
    int best;
    TG_CHECK_OK(tg_cost_choose_in(rows, 4, &in, 0, pred, &best));
    TG_CHECK(best == 2); /* a tie goes to the earlier row */
    TG_CHECK(!pred[0].predicted && strstr(pred[0].why, "skipped"));
    TG_CHECK(pred[1].predicted && !pred[1].feasible && !strcmp(pred[1].why, "needs a GPU"));
    second.predict = fake_fast;
    TG_CHECK_OK(tg_cost_choose_in(rows, 4, &in, 0, pred, &best));
    TG_CHECK(best == 3);
    const tg_strategy_i *only_none[] = {&none};
    TG_CHECK_OK(tg_cost_choose_in(only_none, 1, &in, 0, pred, &best));
    TG_CHECK(best == -1);
}

/* mmap's page cache (what the cgroup leaves beside the process and the matrix being gathered)
 * is an LRU over pages, index and feature pages alike: Che's approximation over the batches,
 * each row a request for its page. Fixed inputs: the wide workload's profile (bench/README.md,
 * the planner's acceptance bench, session 24): 300k rows of 2 KiB, 6M lists of 4 bytes (5860
 * pages), 12 batches of 26 581 rows and 4340 lists, 229 MiB left, matrices of 62.6 MiB, its
 * steps 2 s an epoch. The run read 0.78 GB in 0.19M faults. More room faults less; room for the
 * file and its lists faults only on the epoch's new rows. */
static double mmap_faults(const tg_cost_inputs_t *in)
{
    tg_cost_pred_t p;
    memset(&p, 0, sizeof p);
    p.feasible = 1;
    TG_CHECK_OK(tg_strategy_mmap.predict(in, &p));
    return p.read_bytes / 4096;
}

TG_TEST(mmap_page_cache)
{
    tg_cost_inputs_t in = shared_bench();
    in.data.nodes = 300000;
    in.data.edges = 6000000;
    in.data.feat_dim = 512;
    in.data.derived = 0;
    in.run.sampler_threads = 2;
    in.run.epoch_flops = in.machine.step_flops_per_s * 2;
    in.run.free_bytes = 240216513;
    in.run.matrix_bytes = 62603571;
    tg_cost_profile_t *p = &in.prof;
    p->batches = 12;
    p->rows_per_batch = 26581;
    p->index_reads_per_batch = 4340;
    p->distinct_rows = 145954;
    p->lru = (tg_cost_curve_t){8,
                               {0, 2280.53, 9122.13, 18244.3, 36488.5, 72977, 109466, 145954},
                               {318972, 310683, 289725, 267390, 235216, 197674, 177296, 145954}};
    double f = mmap_faults(&in);
    fprintf(stderr, "  wide at 229 MiB: %.0f faults (measured 0.19M)\n", f);
    TG_CHECK(f > 0.17e6 && f < 0.21e6);
    /* the cgroup's margin beyond --mem is page cache too */
    in.run.cache_slack = (uint64_t)(22 * MIB);
    double slack = mmap_faults(&in);
    TG_CHECK(slack < f);
    in.run.free_bytes += (uint64_t)(64 * MIB);
    double more = mmap_faults(&in);
    TG_CHECK(more < slack);
    /* room for every page: the features miss the LRU's new rows alone */
    in.run.free_bytes = (uint64_t)(2048 * MIB);
    double all = mmap_faults(&in);
    TG_CHECK(all < more && all > 0);
    /* the steps slower than the faults: the gathered matrices queue, the cache is smaller */
    in.run.free_bytes = 240216513;
    in.run.epoch_flops = in.machine.step_flops_per_s * 60;
    TG_CHECK(mmap_faults(&in) > slack);
    /* no room at all: every row and list is a fault (the pages a batch's rows touch, as many
     * as the rows, two rows to a page) */
    in.run.epoch_flops = in.machine.step_flops_per_s * 2;
    in.run.cache_slack = 0;
    in.run.free_bytes = 0;
    double none = mmap_faults(&in);
    TG_CHECK(none > f && none <= 12 * (26581 + 4340) * 1.01);
}

/* The sampler threads the budget plan leaves mmap (each holds two matrices, the trainer one
 * more: 2s + 1): wide at 320M fits three of its matrices, one sampler thread; its faults then
 * read the probe at 1.5 in flight (half of one sampler thread and a pool of two), slower than
 * at two where five fit. */
TG_TEST(mmap_sampler_threads)
{
    tg_cost_inputs_t in = shared_bench();
    in.data.nodes = 300000;
    in.data.edges = 6000000;
    in.data.feat_dim = 512;
    in.data.derived = 0;
    in.run.sampler_threads = 2;
    in.prof.batches = 47;
    in.prof.rows_per_batch = 27086;
    in.prof.index_reads_per_batch = 4450;
    in.prof.distinct_rows = 251303;
    TG_CHECK_EQ_U64((uint64_t)tg_cost_sampler_threads(&tg_strategy_mmap, &in, 5), 2);
    TG_CHECK_EQ_U64((uint64_t)tg_cost_sampler_threads(&tg_strategy_mmap, &in, 4), 1);
    TG_CHECK_EQ_U64((uint64_t)tg_cost_sampler_threads(&tg_strategy_mmap, &in, 3), 1);
    TG_CHECK_EQ_U64((uint64_t)tg_cost_sampler_threads(&tg_strategy_mmap, &in, 1), 1);
    in.run.sampler_threads = 4;
    TG_CHECK_EQ_U64((uint64_t)tg_cost_sampler_threads(&tg_strategy_mmap, &in, 6), 2);
    /* a pass of two batches holds two matrices whatever its threads: none lowered for it */
    in.prof.batches = 2;
    TG_CHECK_EQ_U64((uint64_t)tg_cost_sampler_threads(&tg_strategy_mmap, &in, 2), 4);
    in.prof.batches = 47;
    in.run.sampler_threads = 2;
    in.run.matrix_bytes = 63795000; /* 61 MiB with the budget's margin */
    in.run.free_bytes = 3 * in.run.matrix_bytes + 1000;
    tg_cost_pred_t one, two;
    memset(&one, 0, sizeof one), memset(&two, 0, sizeof two);
    TG_CHECK_OK(tg_strategy_mmap.predict(&in, &one));
    TG_CHECK(strstr(one.why, "1.5 in flight (1 sampler thread)") != NULL);
    in.run.free_bytes = 5 * in.run.matrix_bytes + 1000;
    TG_CHECK_OK(tg_strategy_mmap.predict(&in, &two));
    TG_CHECK(strstr(two.why, "2.0 in flight (2 sampler threads)") != NULL);
    /* more room faults less, and at more in flight each fault takes less */
    TG_CHECK(two.reads <= one.reads && two.io_s / two.reads < one.io_s / one.reads);
}

TG_TEST(bad_inputs)
{
    tg_cost_pred_t pred[TG_COST_MAX_STRATS];
    int best;
    tg_cost_inputs_t in = shared_bench();
    in.machine.probe.seq_bytes_per_s = 0;
    TG_CHECK_ERR(tg_cost_choose(&in, 0, pred, TG_COST_MAX_STRATS, &best), "seq_bytes_per_s");
    in = shared_bench();
    in.machine.probe.iops[2] = 0;
    TG_CHECK_ERR(tg_cost_choose(&in, 0, pred, TG_COST_MAX_STRATS, &best), "probe.iops");
    in = shared_bench();
    in.machine.cores = 0;
    TG_CHECK_ERR(tg_cost_check(&in), "machine.cores");
    in = shared_bench();
    in.machine.gemm_flops_per_s = in.machine.step_flops_per_s = 0;
    TG_CHECK_ERR(tg_cost_check(&in), "gemm_flops_per_s");
    in = shared_bench();
    in.machine.sample_nodes_per_s = 0;
    TG_CHECK_ERR(tg_cost_check(&in), "sample_nodes_per_s");
    in = shared_bench();
    in.machine.step_cpu_ratio = -1;
    TG_CHECK_ERR(tg_cost_check(&in), "step_cpu_ratio");
    in = shared_bench();
    in.machine.gather_shared = 1.5;
    TG_CHECK_ERR(tg_cost_check(&in), "step_shared");
    in = shared_bench();
    in.machine.step_shared = -1;
    TG_CHECK_ERR(tg_cost_check(&in), "step_shared");
    in = shared_bench();
    in.machine.buffered_bytes_per_s = -1;
    TG_CHECK_ERR(tg_cost_check(&in), "buffered_bytes_per_s");
    in = shared_bench();
    in.prof.index_pages_per_batch = -1;
    TG_CHECK_ERR(tg_cost_check(&in), "feat_pages_per_batch");
    in = shared_bench();
    in.prof.own.load_bytes_per_s = -1;
    TG_CHECK_ERR(tg_cost_check(&in), "own.step_flops_per_s");
    in = shared_bench();
    in.data.nodes = 0;
    TG_CHECK_ERR(tg_cost_check(&in), "data.nodes");
    in = shared_bench();
    in.prof.batches = 0;
    TG_CHECK_ERR(tg_cost_check(&in), "profile.batches");
    in = shared_bench();
    in.prof.belady.x[2] = in.prof.belady.x[1];
    TG_CHECK_ERR(tg_cost_check(&in), "profile.belady");
    in = shared_bench();
    in.run.epochs = 0;
    TG_CHECK_ERR(tg_cost_check(&in), "run.epochs");
    in = shared_bench();
    TG_CHECK_ERR(tg_cost_choose(&in, 0, pred, 2, &best), "room for 2");
}

/* The shared arithmetic on hand-checked numbers. */
TG_TEST(arithmetic)
{
    tg_cost_inputs_t in = shared_bench();
    const tg_cost_machine_t *m = &in.machine;
    TG_CHECK_NEAR(tg_cost_iops(m, 64), 82.1e3, 1e-6);
    TG_CHECK_NEAR(tg_cost_iops(m, 2), (21.7e3 + 46.7e3) / 2, 1e-6); /* linear in log2 depth */
    TG_CHECK_NEAR(tg_cost_iops(m, 1000), 83.8e3, 1e-6);             /* flat past the ends */
    /* a probe that read less at a deeper queue (another process's load): the shallower rate */
    tg_cost_machine_t dip = *m;
    dip.probe.iops[1] = dip.probe.iops[0] / 2;
    TG_CHECK_NEAR(tg_cost_iops(&dip, 4), dip.probe.iops[0], 1e-9);
    TG_CHECK_NEAR(tg_cost_iops(&dip, 2), dip.probe.iops[0], 1e-9);
    /* a request costs its access (the probe's 4 KiB reads) and its transfer beyond 4 KiB */
    TG_CHECK_NEAR(tg_cost_random_s(m, 82.1e3, 82.1e3 * 4096, 64), 1.0, 1e-9);
    TG_CHECK_NEAR(tg_cost_random_s(m, 1, 2 * 1.1265e9 + 4096, 64), 2.0 + 1 / 82.1e3, 1e-9);
    tg_cost_curve_t c = {2, {10, 20}, {1, 3}};
    TG_CHECK_NEAR(tg_cost_curve_at(&c, 15), 2, 1e-12);
    TG_CHECK_NEAR(tg_cost_curve_at(&c, 5), 1, 1e-12);
    TG_CHECK_NEAR(tg_cost_curve_at(&c, 25), 3, 1e-12);
    /* every row of the file missing: one sequential sweep in runs of 64 KiB */
    double reads, bytes;
    tg_cost_merge(&in, 4e6, &reads, &bytes);
    TG_CHECK_NEAR(bytes, 4e6 * 512, 1);
    TG_CHECK_NEAR(reads, 4e6 * 512 / 65536, 1e-6);
    /* one row: one read of its bytes */
    tg_cost_merge(&in, 1, &reads, &bytes);
    TG_CHECK_NEAR(reads, 1, 1e-9);
    TG_CHECK(bytes >= 512 && bytes < 513);
    /* the overlap: the longest of disk, compute and CPU / cores, then preparation */
    tg_cost_pred_t p = {.io_s = 3, .sample_s = 2, .gather_s = 2, .compute_s = 2, .prep_s = 1};
    tg_cost_overlap(&in, &p);
    TG_CHECK_NEAR(p.cpu_s, 6, 1e-12);
    TG_CHECK_NEAR(p.steady_s, 3, 1e-12);
    TG_CHECK_NEAR(p.epoch_s, 4, 1e-12);
    p.io_s = 1;
    tg_cost_overlap(&in, &p);
    TG_CHECK_NEAR(p.steady_s, 3, 1e-12); /* 6 s of CPU on 2 cores */
    /* steps measured on 1.5 cores: their 2 s of wall time are 3 CPU seconds beside the
     * samplers' and the gather's 4 */
    in.machine.step_cpu_ratio = 1.5;
    TG_CHECK_NEAR(tg_cost_compute_cpu_s(&in, 2), 3, 1e-12);
    tg_cost_overlap(&in, &p);
    TG_CHECK_NEAR(p.cpu_s, 7, 1e-12);
    TG_CHECK_NEAR(p.steady_s, 3.5, 1e-12);
    TG_CHECK_NEAR(p.epoch_s, 4.5, 1e-12);
    /* a stage on one thread with 5 CPU seconds bounds the epoch however idle the other core */
    p.stage_s = 5;
    tg_cost_overlap(&in, &p);
    TG_CHECK_NEAR(p.steady_s, 5, 1e-12);
    /* the trainer beside its loader at the rates the profile measured together: steps 1.5x
     * their time alone, each of 2 sampler threads at half its lone rate. 2 s of steps alone, 3 s
     * beside; the loader's 4 CPU seconds take 2 s alone on its 2 threads, 4 s beside the steps:
     * the steps end first (3 s) with the loader three quarters done, its rest alone (0.5 s) */
    in.machine.step_cpu_ratio = 0;
    in.machine.step_shared = 1.5;
    in.machine.gather_shared = 0.5;
    in.machine.sharers = 2;
    p = (tg_cost_pred_t){.sample_s = 2, .gather_s = 2, .compute_s = 2};
    tg_cost_overlap(&in, &p);
    TG_CHECK_NEAR(p.steady_s, 3.5, 1e-12); /* more than the even share: 6 CPU s / 2 cores */
    /* a loader of 1 CPU second, done beside the steps in 1 s: their last 2/3 alone */
    p = (tg_cost_pred_t){.sample_s = 0.5, .gather_s = 0.5, .compute_s = 2};
    tg_cost_overlap(&in, &p);
    TG_CHECK_NEAR(p.steady_s, 1 + 2.0 / 3 * 2, 1e-12);
    /* a stage of 5 s (the disk's, say) bounds the loader either way */
    p = (tg_cost_pred_t){.sample_s = 0.5, .gather_s = 0.5, .compute_s = 2, .stage_s = 5};
    tg_cost_overlap(&in, &p);
    TG_CHECK_NEAR(p.steady_s, 5, 1e-12);
    /* the same on one sampler thread: its 1 s of CPU take 2 s beside the steps, which then
     * have a third of theirs to run alone */
    in.machine.sharers = 1;
    p = (tg_cost_pred_t){.sample_s = 0.5, .gather_s = 0.5, .compute_s = 2};
    tg_cost_overlap(&in, &p);
    TG_CHECK_NEAR(p.steady_s, 2 + 1.0 / 3 * 2, 1e-12);
    in.machine.step_shared = in.machine.gather_shared = 0; /* not measured: the even share */
    in.machine.sharers = 0;
    tg_cost_overlap(&in, &p);
    TG_CHECK_NEAR(p.steady_s, 2, 1e-12);
    in.machine.step_cpu_ratio = 0; /* not measured: the steps count on one thread */
    TG_CHECK_NEAR(tg_cost_compute_cpu_s(&in, 2), 2, 1e-12);
    TG_CHECK_EQ_U64(tg_cost_matrices(&tg_strategy_ginex, &in), 2);
}

int main(void)
{
    TG_RUN(arithmetic);
    TG_RUN(shared_bench_predictions);
    TG_RUN(memory_without_limit);
    TG_RUN(inexact_only_when_allowed);
    TG_RUN(missing_figures_and_files);
    TG_RUN(hier_loader);
    TG_RUN(hier_own_batches);
    TG_RUN(diskgnn_packing_wait);
    TG_RUN(buffer_gather);
    TG_RUN(buffer_sizes);
    TG_RUN(ginex_superbatch_fill);
    TG_RUN(deterministic);
    TG_RUN(fake_rows);
    TG_RUN(bad_inputs);
    TG_RUN(mmap_page_cache);
    TG_RUN(mmap_sampler_threads);
    return tg_test_done();
}
