/* tiergnn train: flag parsing and validation (tg_cli_train_parse, Python's too), the SIGINT
 * handler; the run itself is tg_train (engine/). */
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"
#include "tiergnn/config.h"
#include "tiergnn/dist.h"
#include "tiergnn/engine.h"
#include "tiergnn/util.h"

static const char train_usage[] =
    "usage: tiergnn train DATASET --out RUNDIR [options]\n"
    "\n"
    "Trains a GNN for node classification and writes checkpoints to RUNDIR.\n"
    "\n"
    "model:\n"
    "  --model sage|gcn|gat|gin|mlp   architecture (default sage)\n"
    "  --layers L                     number of layers (default 2, or the count of --fanouts\n"
    "                                 or --layer-sizes)\n"
    "  --hidden H                     hidden width; GAT: heads x per-head width (default 256)\n"
    "  --heads K                      GAT attention heads (default 4; H must be a multiple)\n"
    "  --dropout P                    dropout on the input of every layer after the first,\n"
    "                                 0 <= P < 1 (default 0.5)\n"
    "  --input-dropout P              dropout on the input features (the first layer's input)\n"
    "                                 (default: the --dropout value; 0 = as PyG's SAGE examples)\n"
    "  --attn-dropout P               GAT attention dropout (default: the --dropout value)\n"
    "  --activation relu|elu          between layers (default relu)\n"
    "sampling:\n"
    "  --sampler node|ladies          node-wise neighbour sampling (default), or LADIES\n"
    "                                 layer-wise importance sampling (--model gcn only)\n"
    "  --fanouts F0,F1,..             node: neighbours per node for each layer, layer 0 (input)\n"
    "                                 first; -1 = all, 0 = none (default 10 per layer; mlp: 0)\n"
    "  --layer-sizes S0,S1,..         ladies (implied): nodes per layer, layer 0 first, >= 1\n"
    "                                 (default 512 per layer)\n"
    "  --batch-size B                 training nodes per step; 0 or >= the training split =\n"
    "                                 all of them in one step (default 1024). With B = 0 and\n"
    "                                 all fanouts -1 each step runs on the whole graph.\n"
    "optimisation:\n"
    "  --epochs E                     total epochs (default 10)\n"
    "  --optimizer adam|sgd           (default adam)\n"
    "  --lr LR                        learning rate (default 0.01)\n"
    "  --weight-decay W               L2 penalty (default 0)\n"
    "  --momentum M                   SGD momentum (default 0.9)\n"
    "  --normalize-features           divide each feature row by its L1 sum\n"
    "evaluation:\n"
    "  --eval-every N                 evaluate valid/test every N epochs and after the last;\n"
    "                                 0 = after the last only (default 1)\n"
    "  --eval-fanouts full|train      full neighbourhoods, layer by layer (default), or the\n"
    "                                 training fanouts with a fixed sampling stream\n"
    "  --eval-chunk N                 nodes per chunk of layer-wise evaluation (default: as many\n"
    "                                 as take ~64 MiB of input rows, at most 65536)\n"
    "run:\n"
    "  --out RUNDIR                   checkpoints, best model and result.json (required)\n"
    "  --resume                       continue RUNDIR's run up to --epochs, with the settings\n"
    "                                 of RUNDIR/config.json (a flag that would change the\n"
    "                                 trained model is refused; --epochs, --threads, --mem,\n"
    "                                 evaluation options may change)\n"
    "  --config FILE                  take the settings from FILE (a run's config.json);\n"
    "                                 flags given beside it override them\n"
    "  --checkpoint-every N           write checkpoint.bin (and best.bin) every N epochs and\n"
    "                                 after the last; 0 = after the last only (default 1)\n"
    "  --seed S                       seed of weights, dropout, shuffling, sampling (default 0)\n"
    "  --threads T                    compute threads (default: the online CPUs)\n"
    "  --sampler-threads S            sampling + gathering threads (default T, fewer if --mem "
    "needs;\n"
    "                                 0 = inline)\n"
    "  --json                         one JSON object per epoch and one at the end on stdout\n"
    "  --batches-per-epoch N          train only the first N batches of each epoch (default all)\n"
    "  --eval-max-nodes N             evaluate a fixed random sample of N nodes per split\n"
    "  --quiet, --verbose             warnings only / debug lines too (before or after train)\n"
    "out of core (docs/STRATEGIES.md):\n"
    "  --strategy NAME                auto or one of the strategies below (default auto: the\n"
    "                                 fastest exact one the planner predicts, see 'tiergnn plan')\n"
    "  --mem SIZE                     the whole process's memory: data, caches, buffers, model,\n"
    "                                 activations, batches in flight, e.g. 1G (default: the\n"
    "                                 cgroup's limit if any, else none); the split is printed\n"
    "  --verify                       check every dataset file's CRC-32 against meta.txt first\n"
    "                                 (sizes are always checked)\n"
    "  --verify-reads                 check every feature row read from a disk against its\n"
    "                                 CRC-32 (derived/rowcrc, built once by a pass over\n"
    "                                 features.bin, 4 bytes per node of --mem): a file changed\n"
    "                                 after verification ends the run with an error\n"
    "  --derived-dir DIR              files strategies derive from DATASET, and runtime files,\n"
    "                                 go to DIR (default: DATASET/derived, or a per-user cache\n"
    "                                 when that is read-only; docs/FORMAT.md)\n"
    "  --help-strategy NAME           the options of strategy NAME (as 'tiergnn strategies NAME')\n"
    "  --allow-inexact                auto may take hier, which changes the sampled graph\n"
    "\n"
    "SIGINT (Ctrl-C) stops at the next batch boundary and writes a checkpoint that --resume\n"
    "continues exactly; a second SIGINT kills at once. See docs/TRAINING.md.\n"
    "\n"
    "mpirun -np K tiergnn train ...: K processes train one model data-parallel, each with its\n"
    "own --mem and --threads; a step is K batches (docs/DISTRIBUTED.md).\n";

#define TRAIN_SPEC                                                                                 \
    "model=,layers=,hidden=,heads=,dropout=,input-dropout=,attn-dropout=,activation=,fanouts=,"    \
    "sampler=,layer-sizes=,"                                                                       \
    "batch-size=,epochs=,optimizer=,lr=,weight-decay=,momentum=,normalize-features,eval-every=,"   \
    "eval-fanouts=,eval-chunk=,checkpoint-every=,out=,resume,config=,seed=,threads=,sampler-"      \
    "threads=,"                                                                                    \
    "strategy=,mem=,json,verify,verify-reads,batches-per-epoch=,eval-max-nodes=,help,help-"        \
    "strategy=,derived-dir=,allow-inexact"

static int prob_flag(const tg_args_t *a, const char *name, double def, float *out)
{
    double v;
    int rc = tg_args_double(a, name, def, &v);
    if (rc < 0) return rc;
    if (!(v >= 0 && v < 1)) return tg_err(-EINVAL, "--%s must be in [0, 1), got %g", name, v);
    *out = (float)v;
    return 0;
}

/* plan: `tiergnn plan`, which takes train's flags but trains nothing (no --out needed). */
static int parse_train(const tg_args_t *a, tg_train_opts_t *o, tg_strategy_arg_t *sargs, int plan)
{
    int rc;
    const char *cmd = plan ? "plan" : "train";
    if (a->npos != 1)
        return tg_err(-EINVAL,
                      "%s: expected one DATASET directory, got %d arguments "
                      "(see 'tiergnn %s --help')",
                      cmd, a->npos, cmd);
    o->dataset = a->pos[0];
    o->out_dir = tg_args_str(a, "out", NULL);
    if (!o->out_dir && !plan) return tg_err(-EINVAL, "train: --out RUNDIR is required");
    o->allow_inexact = tg_args_has(a, "allow-inexact");

    if ((rc = tg_model_type_parse(tg_args_str(a, "model", "sage"), &o->model.type)) < 0)
        return tg_err_prefix(rc, "--model");
    if ((rc = tg_cli_sampling(a, o->model.type == TG_MODEL_MLP, &o->model.num_layers, o->fanouts,
                              &o->sampler)) < 0)
        return rc;

    if ((rc = tg_cli_model_widths(a, o->model.type == TG_MODEL_GAT, &o->model.hidden,
                                  &o->model.heads)) < 0)
        return rc;
    if ((rc = prob_flag(a, "dropout", 0.5, &o->model.dropout)) < 0) return rc;
    if ((rc = prob_flag(a, "input-dropout", o->model.dropout, &o->model.input_dropout)) < 0)
        return rc;
    if ((rc = prob_flag(a, "attn-dropout", o->model.type == TG_MODEL_GAT ? o->model.dropout : 0.0,
                        &o->model.attn_dropout)) < 0)
        return rc;
    if ((rc = tg_act_parse(tg_args_str(a, "activation", "relu"), &o->model.activation)) < 0)
        return tg_err_prefix(rc, "--activation");

    if ((rc = tg_args_u64(a, "batch-size", 1024, &o->batch_size)) < 0) return rc;
    if ((rc = tg_args_uint(a, "epochs", 10, 1, UINT64_MAX, &o->epochs)) < 0) return rc;

    tg_optim_type_t ot;
    if ((rc = tg_optim_type_parse(tg_args_str(a, "optimizer", "adam"), &ot)) < 0)
        return tg_err_prefix(rc, "--optimizer");
    tg_optim_config_default(&o->optim, ot);
    double d;
    if ((rc = tg_args_double(a, "lr", 0.01, &d)) < 0) return rc;
    if (!(d > 0) || !isfinite(d))
        return tg_err(-EINVAL, "--lr must be a positive number, got %g", d);
    o->optim.lr = (float)d;
    if ((rc = tg_args_double(a, "weight-decay", 0, &d)) < 0) return rc;
    if (!(d >= 0) || !isfinite(d)) return tg_err(-EINVAL, "--weight-decay must be >= 0, got %g", d);
    o->optim.weight_decay = (float)d;
    if ((rc = tg_args_double(a, "momentum", 0.9, &d)) < 0) return rc;
    if (!(d >= 0 && d < 1)) return tg_err(-EINVAL, "--momentum must be in [0, 1), got %g", d);
    o->optim.momentum = (float)d;
    o->normalize_features = tg_args_has(a, "normalize-features");

    if ((rc = tg_args_u64(a, "eval-every", 1, &o->eval_every)) < 0) return rc;
    const char *ef = tg_args_str(a, "eval-fanouts", "full");
    if (!strcmp(ef, "full"))
        o->eval_sampled = 0;
    else if (!strcmp(ef, "train"))
        o->eval_sampled = 1;
    else
        return tg_err(-EINVAL, "--eval-fanouts '%s': expected full or train", ef);
    if ((rc = tg_args_uint(a, "eval-chunk", 0, 1, UINT64_MAX, &o->eval_chunk)) < 0) return rc;

    if ((rc = tg_args_u64(a, "checkpoint-every", 1, &o->checkpoint_every)) < 0) return rc;
    o->resume = tg_args_has(a, "resume");
    if ((rc = tg_args_u64(a, "seed", 0, &o->seed)) < 0) return rc;
    if ((rc = tg_args_int_range(a, "threads", tg_cli_default_threads(), 1, 1024, &o->threads)) < 0)
        return rc;
    /* left out: -1, the threads, or fewer when --mem leaves room for fewer batches in flight */
    if (tg_args_str(a, "sampler-threads", NULL) &&
        (rc = tg_args_int_range(a, "sampler-threads", 0, 0, 256, &o->sampler_threads)) < 0)
        return rc;
    if ((rc = tg_cli_strategy_name(a, &o->strategy)) < 0) return rc;
    if ((rc = tg_args_size(a, "mem", 0, &o->mem_bytes)) < 0) return rc;
    if (tg_args_str(a, "mem", NULL) && o->mem_bytes == 0)
        return tg_err(-EINVAL, "--mem must be more than 0 (leave it out for no limit)");
    o->json = tg_args_has(a, "json") ? stdout : NULL;
    o->progress = 1;
    o->verify = tg_args_has(a, "verify");
    o->verify_reads = tg_args_has(a, "verify-reads");
    if ((rc = tg_cli_strategy_args(a, sargs, TG_ARGS_MAX, &o->num_strategy_args)) < 0) return rc;
    o->strategy_args = sargs;
    if ((rc = tg_args_u64(a, "batches-per-epoch", 0, &o->batches_per_epoch)) < 0) return rc;
    if ((rc = tg_args_u64(a, "eval-max-nodes", 0, &o->eval_max_nodes)) < 0) return rc;
    return 0;
}

/* Whether setting i of config.json was given as a flag. The layer count follows the fanouts (the
 * parser takes it from their count); with --config the fanouts follow --layers too, since the
 * parser gave them for that count. */
static int given(const tg_args_t *a, int i, int resume)
{
    const char *key = tg_train_config_key(i), *flag = tg_train_config_flag(i);
    int fan = tg_args_has(a, "fanouts") || tg_args_has(a, "layer-sizes");
    if (!strcmp(key, "layers")) return fan || tg_args_has(a, "layers");
    /* --fanouts is node-wise sampling's flag and --layer-sizes LADIES': either names a sampler */
    if (!strcmp(key, "sampler")) return fan || tg_args_has(a, "sampler");
    if (!strcmp(key, "fanouts")) return fan || (!resume && tg_args_has(a, "layers"));
    return flag && tg_args_has(a, flag);
}

/* The file's strategy options, then the flags' (replacing those of the same name). */
static int merge_args(const tg_train_opts_t *file, const tg_train_opts_t *flags,
                      tg_strategy_arg_t *out, int *n)
{
    *n = 0;
    for (int k = 0; k < file->num_strategy_args; k++)
        out[(*n)++] = file->strategy_args[k];
    for (int k = 0; k < flags->num_strategy_args; k++) {
        int j = 0;
        while (j < *n && strcmp(out[j].name, flags->strategy_args[k].name) != 0)
            j++;
        if (j == *n && *n >= TG_CONFIG_MAX_ARGS) return tg_err(-E2BIG, "too many strategy options");
        out[j] = flags->strategy_args[k];
        if (j == *n) (*n)++;
    }
    return 0;
}

/* With --config, the settings whose default follows another one (the input and attention
 * dropouts follow --dropout, GAT's heads and attention dropout --model) follow a flag given beside
 * the file where the file holds the default its own values give, as in a run started with that
 * flag; a value that differs from that default was chosen, and stays. Each change is said. */
static void follow_defaults(const tg_args_t *a, const tg_train_opts_t *file, tg_train_opts_t *m,
                            const char *path)
{
    const tg_model_config_t *f = &file->model;
    tg_model_config_t *t = &m->model;
    int fgat = f->type == TG_MODEL_GAT, tgat = t->type == TG_MODEL_GAT;
    if (!tg_args_has(a, "input-dropout") && f->input_dropout == f->dropout &&
        t->input_dropout != t->dropout) {
        tg_log_info("--config: --input-dropout %g follows --dropout (%g in %s)", t->dropout,
                    f->input_dropout, path);
        t->input_dropout = t->dropout;
    }
    float fa = fgat ? f->dropout : 0, ta = tgat ? t->dropout : 0;
    if (!tg_args_has(a, "attn-dropout") && f->attn_dropout == fa && t->attn_dropout != ta) {
        tg_log_info("--config: --attn-dropout %g follows --model and --dropout (%g in %s)", ta,
                    f->attn_dropout, path);
        t->attn_dropout = ta;
    }
    int fh = fgat ? TG_CLI_GAT_HEADS : 1, th = tgat ? TG_CLI_GAT_HEADS : 1;
    if (!tg_args_has(a, "heads") && f->heads == fh && t->heads != th) {
        tg_log_info("--config: --heads %d follows --model (%d in %s)", th, f->heads, path);
        t->heads = th;
    }
}

/* The settings of path (a run's config.json) with the flags given beside them. With --config
 * (resume 0) a flag replaces the file's value. With --resume a flag that changes a safe setting
 * is taken and said; one that would change the trained model is refused naming both values
 * (the strategy may change between exact ones, and then its options). o holds the flags parsed
 * and receives the result; cf owns its strings. */
static int merge_config(const tg_args_t *a, tg_train_opts_t *o, tg_train_config_t *cf,
                        tg_strategy_arg_t *args, const char *path, int resume)
{
    tg_train_opts_t m;
    tg_train_opts_default(&m);
    int rc = tg_train_config_read(cf, path, &m);
    if (rc < 0) return rc;
    const tg_train_opts_t file = m;
    char diff[2048] = "", va[512], vb[512];
    size_t n = 0;
    for (int i = 0; i < tg_train_config_count(); i++) {
        if (!given(a, i, resume)) continue;
        tg_train_config_show(&file, i, va, sizeof va);
        tg_train_config_show(o, i, vb, sizeof vb);
        if (!strcmp(va, vb)) continue;
        const char *flag = tg_train_config_flag(i);
        int ok = !resume || !tg_train_config_changes_model(i) ||
                 (!strcmp(flag, "strategy") &&
                  tg_train_config_strategy_exact(file.strategy, o->strategy));
        if (!ok) {
            char one[1024];
            tg_train_config_diff(&file, o, i, one, sizeof one);
            if (n < sizeof diff)
                n += (size_t)snprintf(diff + n, sizeof diff - n, "%s%s", n ? "; " : "", one);
            continue;
        }
        tg_train_config_copy(&m, o, i);
        if (resume) tg_log_info("--resume: --%s %s here (%s in %s): taken", flag, vb, va, path);
    }
    if (!resume) follow_defaults(a, &file, &m, path);
    int nargs = 0;
    if ((rc = merge_args(&file, o, args, &nargs)) < 0) return rc;
    if (!tg_train_config_same_args(file.strategy_args, file.num_strategy_args, args, nargs)) {
        const tg_strategy_info_t *si = tg_strategy_info_find(m.strategy);
        int exact = !strcmp(m.strategy, "auto") || (si && (si->caps & TG_STRAT_EXACT));
        if (resume && !exact) {
            if (n < sizeof diff)
                n += (size_t)snprintf(diff + n, sizeof diff - n,
                                      "%sstrategy %s's options differ from those there",
                                      n ? "; " : "", m.strategy);
        } else if (resume) {
            for (int k = 0; k < o->num_strategy_args; k++)
                tg_log_info("--resume: --%s%s%s here: taken (strategy %s gives the same batches "
                            "with any options)",
                            o->strategy_args[k].name, o->strategy_args[k].value ? " " : "",
                            o->strategy_args[k].value ? o->strategy_args[k].value : "", m.strategy);
        }
    }
    if (n)
        return tg_err(-EINVAL,
                      "cannot resume with the settings of %s: settings differ: %s (these change "
                      "the trained model; leave them out to continue the run, or start a new run "
                      "with another --out)",
                      path, diff);
    m.strategy_args = args;
    m.num_strategy_args = nargs;
    /* what is not a setting of the run comes from the command line */
    m.dataset = o->dataset;
    m.out_dir = o->out_dir;
    m.resume = o->resume;
    m.json = o->json;
    m.progress = o->progress;
    m.allow_inexact = o->allow_inexact;
    *o = m;
    if (resume) tg_log_info("--resume: the other settings from %s", path);
    return 0;
}

/* --config FILE, and --resume of a run directory that has a config.json. */
static int apply_config(tg_cli_train_t *t)
{
    tg_train_opts_t *o = &t->o;
    const char *file = tg_args_str(&t->a, "config", NULL);
    if (file && o->resume)
        return tg_err(-EINVAL, "--config and --resume: a resumed run takes its settings from "
                               "RUNDIR/" TG_CONFIG_NAME);
    if (file) return merge_config(&t->a, o, &t->cf, t->merged, file, 0);
    if (!o->resume) return 0;
    char path[4200];
    snprintf(path, sizeof path, "%s/%s", o->out_dir, TG_CONFIG_NAME);
    if (access(path, F_OK) != 0) return 0; /* a run of a build before config.json */
    return merge_config(&t->a, o, &t->cf, t->merged, path, 1);
}

static int train_parse(int argc, char **argv, tg_cli_train_t *t, int plan)
{
    memset(t, 0, sizeof *t);
    tg_train_opts_default(&t->o);
    int rc = tg_cli_parse_with_strategies(&t->a, argc, argv, TRAIN_SPEC, &t->help);
    if (rc || t->help) return rc;
    rc = tg_cli_derived_dir(&t->a, !plan);
    if (!rc) rc = parse_train(&t->a, &t->o, t->sargs, plan);
    if (!rc && plan && t->o.resume)
        rc = tg_err(-EINVAL, "plan: --resume continues a run; give its settings or --config");
    if (!rc) rc = apply_config(t);
    return rc;
}

int tg_cli_train_parse(int argc, char **argv, tg_cli_train_t *t)
{
    return train_parse(argc, argv, t, 0);
}

int tg_cli_plan_parse(int argc, char **argv, tg_cli_train_t *t)
{
    return train_parse(argc, argv, t, 1);
}

void tg_cli_train_destroy(tg_cli_train_t *t)
{
    tg_train_config_destroy(&t->cf);
}

/* SIGINT asks the run to stop at the next batch boundary (it writes a checkpoint, then returns
 * -EINTR); the handler then restores the default action, so a second Ctrl-C kills at once. Under
 * mpirun SIGUSR1 asks the same: OpenMPI's mpirun ends the job on its own SIGINT, but forwards
 * SIGUSR1 to every rank (`kill -USR1 MPIRUN_PID` stops all with a checkpoint). SIGUSR1's handler
 * stays: mpirun may forward one signal more than once, and the default action of a second would
 * kill the rank while it writes its checkpoint. */
static volatile sig_atomic_t stop_requested;

static void on_sigint(int sig)
{
    stop_requested = 1;
    if (sig == SIGINT) signal(sig, SIG_DFL);
}

/* One rank's run (the whole run without mpirun): tg_train with the stop request of the handlers
 * run_train installed; the exit status. */
static int run_train_rank(tg_cli_train_t *t)
{
    t->o.stop = &stop_requested;
    /* one JSON stream: rank 0's (every rank trains the same model) */
    if (tg_dist_rank() != 0) t->o.json = NULL;
    tg_train_result_t res;
    int rc = tg_train(&t->o, &res);
    if (rc == -EINTR && res.interrupted) {
        fprintf(stderr, "tiergnn: %s\n", tg_errmsg());
        return 130; /* the shell's code for "ended by SIGINT" */
    }
    return rc < 0 ? tg_cli_fail() : 0;
}

/* Under mpirun the process is one rank of a data-parallel run (tiergnn/dist.h): MPI starts here,
 * before the engine's threads, and ends after (MPI_Abort when this rank failed alone, so that no
 * other rank waits for it in a collective forever). */
static int run_train(tg_cli_train_t *t)
{
    /* the handlers before MPI starts: a stop asked while MPI_Init runs (it takes a few hundred
     * ms) is taken at the first step, as the other ranks', rather than ending this rank alone */
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_sigint;
    sigemptyset(&sa.sa_mask);
    int size, launched = tg_dist_launched(&size);
    sigaction(SIGINT, &sa, NULL);
    if (launched) sigaction(SIGUSR1, &sa, NULL);
    int rc = tg_dist_init();
    if (rc < 0) {
        fprintf(stderr, "tiergnn: %s\n", tg_errmsg());
        tg_dist_finish(rc);
        rc = 1;
    } else {
        rc = run_train_rank(t);
        tg_dist_finish(rc == 130 ? -EINTR : rc ? -1 : 0);
    }
    signal(SIGINT, SIG_DFL);
    if (launched) signal(SIGUSR1, SIG_DFL);
    return rc;
}

int tg_cmd_train(int argc, char **argv)
{
    tg_cli_train_t t;
    int rc;
    if (tg_cli_train_parse(argc, argv, &t) < 0)
        rc = tg_cli_fail();
    else if (t.help)
        rc = tg_cli_help(&t.a, train_usage);
    else
        rc = run_train(&t);
    tg_cli_train_destroy(&t);
    return rc;
}
