/* tiergnn infer: predictions (and embeddings) of a run's model for every node. */
#include <stdio.h>
#include <string.h>

#include "cli.h"
#include "tiergnn/engine.h"
#include "tiergnn/util.h"

static const char infer_usage[] =
    "usage: tiergnn infer DATASET --checkpoint RUNDIR --out FILE [options]\n"
    "\n"
    "Computes the model layer by layer with full neighbourhoods over chunks of nodes and writes\n"
    "  FILE        int32[N]: the argmax class of every node (multi-label: int32[N][C] of 0/1)\n"
    "  FILE.emb    with --embeddings: float32[N][E], the last hidden representation\n"
    "  FILE.json   shapes, dtypes and CRC-32s of the above\n"
    "Intermediate layers are kept in temporary files in RUNDIR, so the embeddings of all nodes\n"
    "need not fit in RAM.\n"
    "\n"
    "  --embeddings        also write FILE.emb\n"
    "  --last              use the last checkpoint instead of the best model\n"
    "  --chunk-nodes N     destination nodes per chunk (default: as many as take\n"
    "                      ~64 MiB of input rows, at most 65536)\n"
    "  --mem SIZE          memory budget: graph and features are kept in RAM only if\n"
    "                      they fit in SIZE, else read from disk (default: RAM/4 decides)\n"
    "  --threads T         compute threads (default: the online CPUs)\n"
    "  --strategy NAME     auto (default) or a strategy below, with its options\n"
    "  --verify            check every dataset file's CRC-32 against meta.txt first\n"
    "  --verify-reads      check every feature row read from a disk against its CRC-32\n"
    "                      (derived/rowcrc, as train --verify-reads)\n";

int tg_cmd_infer(int argc, char **argv)
{
    tg_args_t a;
    char spec[4096];
    if (tg_cli_strategy_spec(spec, sizeof spec,
                             "checkpoint=,out=,embeddings,last,chunk-nodes=,mem=,threads=,"
                             "strategy=,verify,verify-reads,help") < 0 ||
        tg_args_parse(&a, argc, argv, spec) < 0)
        return tg_cli_fail();
    if (tg_args_has(&a, "help")) {
        fputs(infer_usage, stdout);
        tg_cli_strategy_usage(stdout);
        return 0;
    }
    if (a.npos != 1) {
        tg_err(-EINVAL, "infer: expected one DATASET directory, got %d arguments", a.npos);
        return tg_cli_fail();
    }
    const char *rundir = tg_args_str(&a, "checkpoint", NULL);
    const char *out = tg_args_str(&a, "out", NULL);
    if (!rundir || !out) {
        tg_err(-EINVAL, "infer: --checkpoint RUNDIR and --out FILE are required");
        return tg_cli_fail();
    }
    tg_infer_opts_t o = {.embeddings = tg_args_has(&a, "embeddings"),
                         .which_last = tg_args_has(&a, "last"),
                         .progress = 1,
                         .verify = tg_args_has(&a, "verify"),
                         .verify_reads = tg_args_has(&a, "verify-reads")};
    static tg_strategy_arg_t sargs[TG_ARGS_MAX];
    if (tg_cli_strategy_name(&a, &o.strategy) < 0 ||
        tg_cli_strategy_args(&a, sargs, TG_ARGS_MAX, &o.num_strategy_args) < 0)
        return tg_cli_fail();
    o.strategy_args = sargs;
    uint64_t t;
    if (tg_args_u64(&a, "chunk-nodes", 0, &o.chunk_nodes) < 0 ||
        tg_args_size(&a, "mem", 0, &o.mem_bytes) < 0 ||
        tg_args_u64(&a, "threads", (uint64_t)tg_cli_default_threads(), &t) < 0)
        return tg_cli_fail();
    if (tg_args_str(&a, "chunk-nodes", NULL) && o.chunk_nodes == 0) {
        tg_err(-EINVAL, "--chunk-nodes must be at least 1");
        return tg_cli_fail();
    }
    if (t < 1 || t > 1024) {
        tg_err(-EINVAL, "--threads %llu out of range, expected 1..1024", (unsigned long long)t);
        return tg_cli_fail();
    }
    o.threads = (int)t;
    if (tg_infer(a.pos[0], rundir, out, &o) < 0) return tg_cli_fail();
    tg_log_info("wrote %s%s", out, o.embeddings ? " and its .emb" : "");
    return 0;
}
