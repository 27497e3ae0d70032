/* bench_layout - cost and outcome of DiskGNN's layout planner (tg_layout_plan) on a trace shaped
 * like an epoch's sampled inputs.
 *
 *     bench_layout [--nodes 4000000] [--distinct 300000] [--batches 40] [--alpha 0.8]
 *                  [--row 512] [--hot 0.1] [--budget-ratio 1.0] [--pack 1G]
 *                  [--segments 0,1,5,10,40] [--seed 1]
 *
 * The trace: --batches batches of --distinct distinct node ids each, drawn with a power law over
 * node ranks (P(rank <= r) ~ r^(1 - alpha), as sampling favours high-degree nodes), the ranks
 * scattered over the ids by a fixed permutation. For each segment size (0 = Algorithm 2's search)
 * the layout is planned with hot rows = --hot x nodes, rows of --row bytes, a disk budget of
 * --budget-ratio x the feature file (nodes x row; the default is 1.0) and packing
 * partitions of --pack bytes; printed: the plan's time, the chosen segment and the search steps,
 * rows per tier, disk bytes, read amplification with and without the MinHash order, memory kept
 * and at the plan's peak; then the time to list every partition's targets and to locate every
 * batch. Before timing those, each is checked: the targets of all partitions are as many as the
 * layout's rows (hot + cache + packed), every batch's ids are located exactly once and its chunk
 * named whole.
 */
#include "tiergnn/layout.h"
#include "tiergnn/util.h"

#define BENCH_NAME "bench_layout"
#include "bench_common.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_SIZES 32

static double mib(uint64_t bytes)
{
    return (double)bytes / (1 << 20);
}

/* Every partition's targets (timed, after one checked pass) and every batch located. */
static void queries(tg_layout_t *L, const tg_cs_trace_t *t, uint32_t longest)
{
    tg_layout_summary_t s;
    tg_layout_summary(L, &s);
    uint64_t most = 0, total = 0, n;
    uint32_t lo, hi;
    for (uint64_t p = 0; p < s.num_partitions; p++) {
        if (tg_layout_partition(L, p, &lo, &hi, &n) < 0) die(tg_errmsg());
        most = TG_MAX(most, n);
    }
    tg_pack_target_t *buf = xmalloc((size_t)most * sizeof *buf);
    double t0 = tg_now();
    for (uint64_t p = 0; p < s.num_partitions; p++) {
        if (tg_layout_targets(L, p, buf, most, &n) < 0) die(tg_errmsg());
        total += n;
    }
    double t_targets = tg_now() - t0;
    if (total != s.hot_rows + s.cache_rows + s.packed_rows) die("targets != the layout's rows");
    free(buf);
    tg_layout_loc_t loc;
    if (tg_layout_loc_init(&loc, longest, NULL) < 0) die(tg_errmsg());
    t0 = tg_now();
    for (uint32_t b = 0; b < t->iters; b++) {
        uint64_t m = t->off[b + 1] - t->off[b];
        if (tg_layout_locate(L, b, t->ids + t->off[b], m, &loc) < 0) die(tg_errmsg());
        if (loc.n_hot + loc.n_cache + loc.n_chunk != m) die("locate lost rows");
    }
    double t_locate = tg_now() - t0;
    tg_layout_loc_free(&loc);
    printf("  targets of %llu partitions: %.3f s (%.1f ns per target); locate: %.1f ms per "
           "batch (%.1f ns per id)\n",
           (unsigned long long)s.num_partitions, t_targets, 1e9 * t_targets / (double)total,
           1e3 * t_locate / t->iters, 1e9 * t_locate / (double)t->off[t->iters]);
}

int main(int argc, char **argv)
{
    uint64_t N = 4000000, distinct = 300000, B = 40, row = 512, seed = 1, pack = 1ull << 30;
    double alpha = 0.8, hot = 0.1, ratio = 1.0;
    uint32_t sizes[MAX_SIZES] = {0, 1, 5, 10, 40}, nsizes = 5;
    for (int i = 1; i + 1 < argc; i += 2) {
        const char *k = argv[i], *v = argv[i + 1];
        int rc = 0;
        if (!strcmp(k, "--nodes"))
            rc = tg_parse_u64(v, &N, k);
        else if (!strcmp(k, "--distinct"))
            rc = tg_parse_u64(v, &distinct, k);
        else if (!strcmp(k, "--batches"))
            rc = tg_parse_u64(v, &B, k);
        else if (!strcmp(k, "--row"))
            rc = tg_parse_u64(v, &row, k);
        else if (!strcmp(k, "--seed"))
            rc = tg_parse_u64(v, &seed, k);
        else if (!strcmp(k, "--pack"))
            rc = tg_parse_size(v, &pack);
        else if (!strcmp(k, "--alpha"))
            rc = tg_parse_double(v, &alpha, k);
        else if (!strcmp(k, "--hot"))
            rc = tg_parse_double(v, &hot, k);
        else if (!strcmp(k, "--budget-ratio"))
            rc = tg_parse_double(v, &ratio, k);
        else if (!strcmp(k, "--segments")) {
            nsizes = 0;
            for (char *p = (char *)v; *p && nsizes < MAX_SIZES; p += *p == ',')
                sizes[nsizes++] = (uint32_t)strtoul(p, &p, 10);
        } else
            die("unknown option");
        if (rc < 0) die(tg_errmsg());
    }
    if (distinct > N || !B || N > UINT32_MAX) die("bad sizes");
    tg_log_set_level(TG_LOG_DEBUG); /* the plan's phases */
    uint64_t T = B * distinct;
    uint64_t *off = xmalloc((B + 1) * sizeof *off);
    uint32_t *ids = xmalloc(T * sizeof *ids);
    double t0 = tg_now();
    power_law_trace((uint32_t)N, (uint32_t)distinct, alpha, (uint32_t)B, seed, off, ids);
    printf("trace: %llu batches x %llu ids over %llu nodes (alpha %.2f), drawn in %.1f s\n",
           (unsigned long long)B, (unsigned long long)distinct, (unsigned long long)N, alpha,
           tg_now() - t0);
    tg_cs_trace_t t = {.iters = (uint32_t)B, .off = off, .ids = ids};
    tg_layout_cfg_t c = {.num_nodes = N,
                         .row_bytes = row,
                         .hot_rows = (uint64_t)(hot * N),
                         .seed = seed,
                         .pack_bytes = pack,
                         .disk_budget = (uint64_t)(ratio * (double)(N * row))};
    uint64_t peak_bound, kept_bound = tg_layout_bytes(&c, (uint32_t)B, T, &peak_bound);
    printf("hot %llu rows, row %llu B, disk budget %.1f MiB, pack %.1f MiB; bounds: kept %.1f "
           "MiB, peak %.1f MiB\n",
           (unsigned long long)c.hot_rows, (unsigned long long)row, mib(c.disk_budget), mib(pack),
           mib(kept_bound), mib(peak_bound));
    for (uint32_t i = 0; i < nsizes; i++) {
        c.segment = sizes[i];
        tg_layout_t *L;
        t0 = tg_now();
        int rc = tg_layout_plan(&L, &t, &c, NULL);
        double dt = tg_now() - t0;
        if (rc < 0) {
            printf("segment %u: %s (%.2f s)\n", sizes[i], tg_errmsg(), dt);
            continue;
        }
        tg_layout_summary_t s;
        tg_layout_summary(L, &s);
        printf("segment %u -> %u (%u segments, %u search steps, Algorithm 2's pick %u): plan "
               "%.2f s (%.1f ns per access)\n",
               sizes[i], s.segment, s.num_segments, s.num_steps, s.search_segment, dt,
               1e9 * dt / (double)T);
        printf("  rows: hot %llu, cache %llu, packed %llu; accesses %llu (%.1f%% hot)\n",
               (unsigned long long)s.hot_rows, (unsigned long long)s.cache_rows,
               (unsigned long long)s.packed_rows, (unsigned long long)s.accesses,
               100.0 * (double)s.hot_accesses / (double)s.accesses);
        printf("  disk %.1f MiB (cache %.1f, chunks %.1f); read %.1f MiB per pass for %.1f "
               "needed: amplification %.3f (node order: %.3f)\n",
               mib(s.disk_bytes), mib(s.cache_file_bytes), mib(s.chunk_file_bytes),
               mib(s.read_bytes), mib(s.needed_bytes), s.read_amp, s.read_amp_nominhash);
        printf("  memory: kept %.1f MiB, plan peak %.1f MiB\n", mib(s.reserved),
               mib(s.plan_peak_bytes));
        queries(L, &t, (uint32_t)distinct);
        tg_layout_destroy(L);
    }
    free(off);
    free(ids);
    return 0;
}
