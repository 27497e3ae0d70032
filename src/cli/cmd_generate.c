/* tiergnn generate OUT --nodes N [...]: a synthetic dataset (src/data/generate.c). */
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

int tg_cmd_generate(int argc, char **argv)
{
    tg_args_t a;
    if (tg_args_parse(&a, argc, argv,
                      "nodes=,avg-degree=,feat-dim=,classes=,train-frac=,valid-frac=,test-frac=,"
                      "homophily=,feat-noise=,feat-dtype=,seed=,mem=,threads=,overwrite,help") < 0)
        return tg_cli_fail();
    if (tg_args_has(&a, "help")) {
        fputs(usage_text, stdout);
        return 0;
    }
    if (a.npos != 1) {
        tg_err(-EINVAL,
               "generate: expected one output directory, got %d arguments (see "
               "'tiergnn generate --help')",
               a.npos);
        return tg_cli_fail();
    }
    if (!tg_args_has(&a, "nodes")) {
        tg_err(-EINVAL, "generate: --nodes is required");
        return tg_cli_fail();
    }
    tg_gen_opts_t o;
    tg_gen_opts_default(&o);
    uint64_t dim, classes, threads;
    const char *noise = tg_args_str(&a, "feat-noise", "auto");
    const char *dtype = tg_args_str(&a, "feat-dtype", "f32");
    if (tg_args_uint(&a, "nodes", 0, 1, UINT64_MAX, &o.nodes) < 0 ||
        tg_args_double(&a, "avg-degree", o.avg_degree, &o.avg_degree) < 0 ||
        tg_args_uint(&a, "feat-dim", o.feat_dim, 1, 1u << 24, &dim) < 0 ||
        tg_args_uint(&a, "classes", o.classes, 1, 1u << 24, &classes) < 0 ||
        tg_args_double(&a, "train-frac", o.train_frac, &o.train_frac) < 0 ||
        tg_args_double(&a, "valid-frac", o.valid_frac, &o.valid_frac) < 0 ||
        tg_args_double(&a, "test-frac", o.test_frac, &o.test_frac) < 0 ||
        tg_args_double(&a, "homophily", o.homophily, &o.homophily) < 0 ||
        tg_args_u64(&a, "seed", o.seed, &o.seed) < 0 ||
        tg_args_size(&a, "mem", 0, &o.mem_bytes) < 0 ||
        tg_args_uint(&a, "threads", 0, 0, 256, &threads) < 0)
        return tg_cli_fail();
    o.feat_dim = (uint32_t)dim;
    o.classes = (uint32_t)classes;
    o.threads = (int)threads;
    if (strcmp(noise, "auto") != 0) {
        if (tg_parse_double(noise, &o.feat_noise, "--feat-noise") < 0) return tg_cli_fail();
        if (o.feat_noise < 0) {
            tg_err(-EINVAL, "--feat-noise must be 'auto' or at least 0, got %s", noise);
            return tg_cli_fail();
        }
    }
    if (!strcmp(dtype, "f32")) {
        o.feat_dtype = TG_F32;
    } else if (!strcmp(dtype, "f16")) {
        o.feat_dtype = TG_F16;
    } else {
        tg_err(-EINVAL, "--feat-dtype must be f32 or f16, got '%s'", dtype);
        return tg_cli_fail();
    }
    o.overwrite = tg_args_has(&a, "overwrite");
    /* Ctrl-C must not leave gigabytes of OUT.tmp-PID behind */
    if (tg_dsw_cleanup_on_signals() < 0) return tg_cli_fail();
    double t0 = tg_now();
    if (tg_generate(a.pos[0], &o) < 0) return tg_cli_fail();
    tg_log_info("generate: done in %.1f s", tg_now() - t0);
    return 0;
}
