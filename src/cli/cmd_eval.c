/* tiergnn eval: accuracy of a run's best (or last) model on one split; its parsing
 * (tg_cli_eval_parse) is Python's too. */
#include <stdio.h>
#include <string.h>

#include "cli.h"
#include "tiergnn/dist.h"
#include "tiergnn/engine.h"
#include "tiergnn/util.h"

static const char eval_usage[] =
    "usage: tiergnn eval DATASET --checkpoint RUNDIR|FILE [options]\n"
    "\n"
    "Prints the accuracy of RUNDIR's best-validation model on a split, evaluated the way\n"
    "training evaluated it (same feature normalisation, full or sampled neighbourhoods).\n"
    "--checkpoint takes the run directory or a checkpoint in it: RUNDIR/best.bin (the best\n"
    "model), RUNDIR/checkpoint.bin (the last, as --last).\n"
    "\n"
    "  --split valid|test|train   (default test)\n"
    "  --last                     use the last checkpoint instead of the best model\n"
    "  --threads T                compute threads (default: the online CPUs)\n"
    "  --eval-chunk N             nodes per chunk of layer-wise evaluation (default: as many\n"
    "                             as take ~64 MiB of input rows, at most 65536)\n"
    "  --max-nodes N              evaluate a fixed random sample of N nodes of the split (the\n"
    "                             sample training's --eval-max-nodes N used)\n"
    "  --mem SIZE                 the whole process's memory, as in training; a dataset that\n"
    "                             does not fit is read from disk (default: the cgroup's limit)\n"
    "  --strategy NAME            auto (default) or a strategy below, with its options\n"
    "  --json                     print one JSON object instead of a sentence\n"
    "  --sampler node|ladies      the sampler training used (default: the checkpoint's); a\n"
    "  --layer-sizes S0,S1,..     different one is refused: a model is evaluated the way it\n"
    "                             was trained (a ladies GCN with P = D^-1 (A + I))\n"
    "  --verify                   check every dataset file's CRC-32 against meta.txt first\n"
    "  --verify-reads             check every feature row read from a disk against its CRC-32\n"
    "                             (derived/rowcrc, as train --verify-reads)\n"
    "  --derived-dir DIR          derived and runtime files in DIR, as train --derived-dir\n"
    "  --help-strategy NAME       the options of strategy NAME (as 'tiergnn strategies NAME')\n";

/* --sampler / --layer-sizes, when given, must be what the checkpoint was trained with: the
 * sampler decides GCN's operator (tiergnn/graph.h), so evaluation takes it from the
 * checkpoint and a different one would evaluate another model than the one trained. */
static int check_sampler(const tg_args_t *a, const char *rundir, int last)
{
    const char *sn = tg_args_str(a, "sampler", NULL), *ls = tg_args_str(a, "layer-sizes", NULL);
    if (!sn && !ls) return 0;
    char path[4200];
    snprintf(path, sizeof path, "%s/%s", rundir, last ? TG_CKPT_NAME : TG_CKPT_BEST_NAME);
    tg_ckpt_info_t info;
    int rc = tg_ckpt_read_info(path, &info);
    if (rc < 0) return rc;
    const char *had = info.sampler[0] ? info.sampler : "node";
    if (sn) {
        const tg_sampler_i *k = tg_sampler_find(sn);
        if (!k) return tg_err_prefix(-EINVAL, "--sampler");
        if (strcmp(k->name, had) != 0)
            return tg_err(-EINVAL,
                          "--sampler %s, but %s was trained with --sampler %s: eval evaluates "
                          "the way training did (leave --sampler out)",
                          sn, path, had);
    }
    if (ls) {
        if (strcmp(had, "ladies") != 0)
            return tg_err(-EINVAL,
                          "--layer-sizes: %s was trained with --sampler %s, which has none", path,
                          had);
        int64_t v[TG_MAX_LAYERS];
        int n = 0;
        if ((rc = tg_layer_sizes_parse(ls, v, &n)) < 0) return rc;
        int same = n == info.num_layers;
        for (int l = 0; same && l < n; l++)
            same = v[l] == info.fanouts[l];
        if (!same)
            return tg_err(-EINVAL,
                          "--layer-sizes %s differs from the %d layer size(s) %s was trained "
                          "with (leave --layer-sizes out)",
                          ls, info.num_layers, path);
    }
    return 0;
}

static int split_id(const char *split, tg_file_id_t *sid)
{
    if (!strcmp(split, "test"))
        *sid = TG_FILE_TEST;
    else if (!strcmp(split, "valid"))
        *sid = TG_FILE_VALID;
    else if (!strcmp(split, "train"))
        *sid = TG_FILE_TRAIN;
    else
        return tg_err(-EINVAL, "--split '%s': expected valid, test or train", split);
    return 0;
}

/* The operands and flags, in the order their errors are reported. */
static int parse_eval(const tg_args_t *a, tg_cli_eval_t *e)
{
    tg_eval_opts_t *o = &e->o;
    if (a->npos != 1)
        return tg_err(-EINVAL, "eval: expected one DATASET directory, got %d arguments", a->npos);
    e->dataset = a->pos[0];
    const char *ckpt = tg_args_str(a, "checkpoint", NULL);
    if (!ckpt) return tg_err(-EINVAL, "eval: --checkpoint RUNDIR (or RUNDIR/best.bin) is required");
    e->split = tg_args_str(a, "split", "test");
    int rc = split_id(e->split, &e->split_id);
    e->json = tg_args_has(a, "json");
    o->verify = tg_args_has(a, "verify");
    o->verify_reads = tg_args_has(a, "verify-reads");
    if (!rc) rc = tg_args_int_range(a, "threads", tg_cli_default_threads(), 1, 1024, &o->threads);
    if (!rc) rc = tg_args_uint(a, "eval-chunk", 0, 1, UINT64_MAX, &o->eval_chunk);
    if (!rc) rc = tg_args_u64(a, "max-nodes", 0, &o->max_nodes);
    if (!rc) rc = tg_args_size(a, "mem", 0, &o->mem_bytes);
    if (!rc)
        rc = tg_cli_checkpoint(ckpt, tg_args_has(a, "last"), e->rundir, sizeof e->rundir,
                               &o->which_last);
    if (!rc) rc = check_sampler(a, e->rundir, o->which_last);
    if (!rc) rc = tg_cli_strategy_name(a, &o->strategy);
    if (!rc) rc = tg_cli_strategy_args(a, e->sargs, TG_ARGS_MAX, &o->num_strategy_args);
    o->strategy_args = e->sargs;
    return rc;
}

int tg_cli_eval_parse(int argc, char **argv, tg_cli_eval_t *e)
{
    memset(e, 0, sizeof *e);
    int rc = tg_cli_parse_with_strategies(
        &e->a, argc, argv,
        "checkpoint=,split=,last,threads=,eval-chunk=,max-nodes=,mem=,strategy=,json,sampler=,"
        "layer-sizes=,verify,verify-reads,help,help-strategy=,derived-dir=",
        &e->help);
    if (!rc) rc = tg_cli_derived_dir(&e->a, 1);
    if (rc) return rc;
    return e->help ? 0 : parse_eval(&e->a, e);
}

int tg_cli_eval_run(const tg_cli_eval_t *e, tg_eval_result_t *r)
{
    return tg_eval(e->dataset, e->rundir, e->split_id, &e->o, r);
}

/* Under mpirun every rank evaluates its share of the split and the sums are every rank's
 * (docs/DISTRIBUTED.md); rank 0 prints them. MPI ends as in train: MPI_Abort when this rank
 * failed alone, so that no other rank waits for it forever. */
int tg_cmd_eval(int argc, char **argv)
{
    tg_cli_eval_t e;
    if (tg_cli_eval_parse(argc, argv, &e) < 0) return tg_cli_fail();
    if (e.help) return tg_cli_help(&e.a, eval_usage);
    tg_eval_result_t r;
    int rc = tg_dist_init();
    if (rc >= 0) rc = tg_cli_eval_run(&e, &r);
    int code = rc < 0 ? tg_cli_fail() : 0;
    int rank = tg_dist_rank();
    tg_dist_finish(rc);
    if (code || rank != 0) return code;
    if (e.json) {
        tg_json_t j;
        tg_json_begin(&j);
        tg_json_str(&j, "split", e.split);
        tg_json_num(&j, "acc", r.acc);
        tg_json_num(&j, "loss", r.loss);
        tg_json_uint(&j, "count", r.count);
        tg_json_uint(&j, "epoch", r.epoch);
        tg_json_end(&j, stdout, NULL);
    } else {
        printf("%s accuracy %.4f (loss %.4f, %llu labelled, model of epoch %llu)\n", e.split, r.acc,
               r.loss, (unsigned long long)r.count, (unsigned long long)r.epoch);
    }
    return 0;
}
