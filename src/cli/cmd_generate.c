/* tiergnn generate OUT --nodes N [...]: a synthetic dataset (src/data/generate.c); its parsing
 * (tg_cli_generate_parse) is Python's too. */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "cli.h"
#include "tiergnn/data.h"

static const char *const usage_text =
    "usage: tiergnn generate OUT --nodes N [--avg-degree K] [--feat-dim D] [--classes C]\n"
    "         [--train-frac F] [--valid-frac F] [--test-frac F] [--homophily H]\n"
    "         [--feat-noise S|auto] [--feat-dtype f32|f16] [--seed S] [--mem BYTES]\n"
    "         [--threads T] [--overwrite]\n"
    "\n"
    "Writes a power-law graph with C planted communities (label = community) to the dataset\n"
    "directory OUT, in memory bounded by --mem, whatever N.\n"
    "  --nodes N        number of nodes (required)\n"
    "  --avg-degree K   stored (directed) edges per node before repeats are dropped (20);\n"
    "                   edges are undirected: both directions are stored\n"
    "  --feat-dim D     feature dimension (128)\n"
    "  --classes C      communities = classes, of equal size (32)\n"
    "  --train-frac F --valid-frac F --test-frac F   random split sizes (0.6 / 0.2 / 0.2)\n"
    "  --homophily H    fraction of edges inside a community (0.8)\n"
    "  --feat-noise S   noise std per feature around unit-norm class centroids; 'auto' (the\n"
    "                   default) makes the best classifier on a node's own features right\n"
    "                   halfway between chance and always, so neighbours are needed\n"
    "  --feat-dtype T   f32 (default) or f16\n"
    "  --seed S         random seed (1); the same seed gives the same bytes\n"
    "  --mem BYTES      memory the generator may use (default min(1G, RAM/4))\n"
    "  --threads T      worker threads (default: all CPUs); does not change the output\n"
    "  --overwrite      replace OUT if it exists (only once the new dataset is complete)\n"
    "docs/FORMAT.md describes the files and the model.\n";

/* The number flags, in the order their errors are reported. */
static int parse_numbers(const tg_args_t *a, tg_gen_opts_t *o)
{
    uint64_t dim, classes, threads;
    int rc = tg_args_uint(a, "nodes", 0, 1, UINT64_MAX, &o->nodes);
    if (!rc) rc = tg_args_double(a, "avg-degree", o->avg_degree, &o->avg_degree);
    if (!rc) rc = tg_args_uint(a, "feat-dim", o->feat_dim, 1, 1u << 24, &dim);
    if (!rc) rc = tg_args_uint(a, "classes", o->classes, 1, 1u << 24, &classes);
    if (!rc) rc = tg_args_double(a, "train-frac", o->train_frac, &o->train_frac);
    if (!rc) rc = tg_args_double(a, "valid-frac", o->valid_frac, &o->valid_frac);
    if (!rc) rc = tg_args_double(a, "test-frac", o->test_frac, &o->test_frac);
    if (!rc) rc = tg_args_double(a, "homophily", o->homophily, &o->homophily);
    if (!rc) rc = tg_args_u64(a, "seed", o->seed, &o->seed);
    if (!rc) rc = tg_args_size(a, "mem", 0, &o->mem_bytes);
    if (!rc) rc = tg_args_uint(a, "threads", 0, 0, 256, &threads);
    if (rc) return rc;
    o->feat_dim = (uint32_t)dim;
    o->classes = (uint32_t)classes;
    o->threads = (int)threads;
    return 0;
}

static int parse_generate(const tg_args_t *a, tg_cli_generate_t *g)
{
    tg_gen_opts_t *o = &g->o;
    if (a->npos != 1)
        return tg_err(-EINVAL,
                      "generate: expected one output directory, got %d arguments (see "
                      "'tiergnn generate --help')",
                      a->npos);
    g->out = a->pos[0];
    if (!tg_args_has(a, "nodes")) return tg_err(-EINVAL, "generate: --nodes is required");
    tg_gen_opts_default(o);
    int rc = parse_numbers(a, o);
    if (rc) return rc;
    const char *noise = tg_args_str(a, "feat-noise", "auto");
    if (strcmp(noise, "auto") != 0) {
        if ((rc = tg_parse_double(noise, &o->feat_noise, "--feat-noise")) < 0) return rc;
        if (o->feat_noise < 0)
            return tg_err(-EINVAL, "--feat-noise must be 'auto' or at least 0, got %s", noise);
    }
    if ((rc = tg_cli_feat_dtype(a, &o->feat_dtype)) < 0) return rc;
    o->overwrite = tg_args_has(a, "overwrite");
    return 0;
}

int tg_cli_generate_parse(int argc, char **argv, tg_cli_generate_t *g)
{
    memset(g, 0, sizeof *g);
    int rc = tg_args_parse(&g->a, argc, argv,
                           "nodes=,avg-degree=,feat-dim=,classes=,train-frac=,valid-frac=,"
                           "test-frac=,homophily=,feat-noise=,feat-dtype=,seed=,mem=,threads=,"
                           "overwrite,help");
    if (rc) return rc;
    g->help = tg_args_has(&g->a, "help");
    return g->help ? 0 : parse_generate(&g->a, g);
}

int tg_cmd_generate(int argc, char **argv)
{
    tg_cli_generate_t g;
    if (tg_cli_generate_parse(argc, argv, &g) < 0) return tg_cli_fail();
    if (g.help) {
        fputs(usage_text, stdout);
        return 0;
    }
    /* Ctrl-C must not leave gigabytes of OUT.tmp-PID behind */
    if (tg_dsw_cleanup_on_signals() < 0) return tg_cli_fail();
    double t0 = tg_now();
    if (tg_generate(g.out, &g.o) < 0) return tg_cli_fail();
    tg_log_info("generate: done in %.1f s", tg_now() - t0);
    return 0;
}
