/* tiergnn partition DATASET --parts P [--method auto|metis|stream]: min-edge-cut partitions and
 * the dataset rewritten in partition order under DATASET/derived/ or the directory --derived-dir
 * names (include/tiergnn/partition.h). */
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "cli.h"
#include "tiergnn/derived.h"
#include "tiergnn/partition.h"

/* --assignment F: part[v] for every original id v, from the map file's new_of_old and pp. */
static int write_assignment(const tg_dataset_t *ds, const tg_part_assign_opts_t *ao,
                            tg_part_method_t method, const char *path)
{
    char params[256];
    int rc = tg_part_params(ao, method, params, sizeof params);
    tg_part_t *p = NULL;
    if (rc == 0) rc = tg_part_open(&p, ds, params);
    if (rc < 0) return rc;
    uint64_t N = ds->meta.num_nodes;
    uint32_t *part = malloc(N * sizeof *part + 1);
    void *n2o = malloc(N * p->id_bytes + 1);
    if (!part || !n2o) rc = tg_err(-ENOMEM, "partition: out of memory for the assignment");
    if (rc == 0) rc = tg_derived_read(p->map, n2o, N * p->id_bytes, p->new_of_old_off);
    for (uint64_t v = 0; rc == 0 && v < N; v++)
        part[v] = tg_part_of(p, p->id_bytes == 4 ? ((uint32_t *)n2o)[v] : ((uint64_t *)n2o)[v]);
    if (rc == 0) rc = tg_write_file_atomic(path, part, N * sizeof *part);
    if (rc == 0)
        printf("assignment: %s (%llu x u32, original node ids)\n", path, (unsigned long long)N);
    free(part);
    free(n2o);
    tg_part_close(p);
    return rc;
}

int tg_cmd_partition(int argc, char **argv)
{
    tg_args_t a;
    if (tg_args_parse(
            &a, argc, argv,
            "parts=,method=,mem=,seed=,passes=,imbalance=,assignment=,derived-dir=,help") < 0 ||
        tg_cli_derived_dir(&a, 1) < 0)
        return tg_cli_fail();
    if (tg_args_has(&a, "help")) {
        fputs("usage: tiergnn partition DATASET --parts P [--method auto|metis|stream]\n"
              "                         [--mem SIZE] [--seed S] [--passes K] [--imbalance X]\n"
              "                         [--derived-dir DIR]\n"
              "Splits DATASET's nodes into P parts with few edges between them and rewrites the\n"
              "features and the adjacency so that every part is contiguous on disk (the\n"
              "partitioned layout strategy hier reads). The results go to DATASET/derived/\n"
              "(part-*, partfeat-*, partadj-*; or see --derived-dir); the dataset's own files\n"
              "are untouched, and a valid result is kept: running it again is a no-op.\n"
              "  --parts P        number of parts, 1 .. the nodes (HierBatching recommends a few\n"
              "                   thousand nodes per part)\n"
              "  --method M       metis: METIS k-way on the graph made undirected, in RAM;\n"
              "                   stream: restreaming linear deterministic greedy, 4 bytes per\n"
              "                   node, for graphs larger than RAM; auto (default): metis when\n"
              "                   its estimated memory fits --mem, else stream\n"
              "  --mem SIZE       memory the partitioner and the rewrite may use (default: a\n"
              "                   quarter of the RAM)\n"
              "  --seed S         METIS's seed (default 1)\n"
              "  --passes K       passes of the streaming partitioner (default 4)\n"
              "  --imbalance X    largest part at most (1 + X) x N / P (default 0.03)\n"
              "  --assignment F   also write each node's part to F: u32 little-endian, one per\n"
              "                   node in the dataset's own (original) ids\n"
              "  --derived-dir D  write the results to D (default: DATASET/derived/, or a\n"
              "                   per-user cache when that is read-only; docs/FORMAT.md)\n"
              "Prints the method, the edge cut, the balance and the time of each step.\n",
              stdout);
        return 0;
    }
    if (a.npos != 1) {
        tg_err(-EINVAL, "partition: expected one dataset directory, got %d arguments", a.npos);
        return tg_cli_fail();
    }
    tg_part_build_opts_t o = {0};
    tg_part_assign_opts_default(&o.assign);
    uint64_t parts = 0, seed = 0, passes = 0, mem = 0;
    double imb = o.assign.imbalance;
    if (!tg_args_has(&a, "parts")) {
        tg_err(-EINVAL, "partition: --parts P is required (e.g. the nodes / 4000)");
        return tg_cli_fail();
    }
    if (tg_args_uint(&a, "parts", 0, 1, UINT32_MAX, &parts) < 0 ||
        tg_args_u64(&a, "seed", o.assign.seed, &seed) < 0 ||
        tg_args_uint(&a, "passes", o.assign.stream_passes, 1, 100, &passes) < 0 ||
        tg_args_size(&a, "mem", 0, &mem) < 0 || tg_args_double(&a, "imbalance", imb, &imb) < 0)
        return tg_cli_fail();
    if (!(imb >= 0.0 && imb <= 1.0)) {
        tg_err(-EINVAL, "partition: --imbalance %g: expected 0 .. 1", imb);
        return tg_cli_fail();
    }
    if (tg_part_method_parse(tg_args_str(&a, "method", "auto"), &o.assign.method) < 0)
        return tg_cli_fail();
    o.assign.parts = (uint32_t)parts;
    o.assign.seed = seed;
    o.assign.stream_passes = (uint32_t)passes;
    o.assign.imbalance = imb;
    o.assign.mem_bytes = mem;
    o.mem_bytes = mem;
    o.progress = isatty(STDERR_FILENO);
    tg_dataset_t *ds;
    if (tg_dataset_open(&ds, a.pos[0], 0) < 0) return tg_cli_fail();
    tg_part_build_stats_t st;
    int rc = tg_part_build(ds, &o, &st);
    if (rc == 0) {
        const tg_part_summary_t *s = &st.sum;
        char params[256], r[32], w[32];
        tg_part_params(&o.assign, s->method, params, sizeof params);
        if (!st.built_map && !st.built_feat && !st.built_adj) {
            char where[4096];
            tg_derived_dir(ds, NULL, where, sizeof where);
            printf("up to date: %s/ holds the partitioned dataset (%s)\n", where, params);
        }
        printf("method %s: %u parts in %.2f s; edge cut %llu of %llu edges (%.2f%%); parts of "
               "%llu .. %llu nodes, balance %.3f\n",
               tg_part_method_name(s->method), s->parts, s->assign_s,
               (unsigned long long)s->cut_edges, (unsigned long long)s->edges,
               s->edges ? 100.0 * (double)s->cut_edges / (double)s->edges : 0.0,
               (unsigned long long)s->min_part, (unsigned long long)s->max_part, s->balance);
        printf("files (%s): assignment %s %.2f s, features %s %.2f s, adjacency %s %.2f s; "
               "read %s, wrote %s, %.2f s in all\n",
               params, st.built_map ? "built" : "kept", st.map_s,
               st.built_feat ? "rewritten" : "kept", st.feat_s, st.built_adj ? "rewritten" : "kept",
               st.adj_s, tg_fmt_bytes(st.read_bytes, r, sizeof r),
               tg_fmt_bytes(st.write_bytes, w, sizeof w), st.total_s);
    }
    const char *apath = tg_args_str(&a, "assignment", NULL);
    if (rc == 0 && apath) rc = write_assignment(ds, &o.assign, st.sum.method, apath);
    tg_dataset_close(ds);
    return rc < 0 ? tg_cli_fail() : 0;
}
