/* tiergnn bench: flag parsing; the bench itself is tg_bench (src/bench/). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cli.h"
#include "tiergnn/bench.h"
#include "tiergnn/util.h"

static const char bench_usage[] =
    "usage: tiergnn bench DATASET --mem SIZE [--strategies A,B,...] [--epochs N] [--out RUNDIR]\n"
    "                     [bench options] [train options] [-- more train arguments]\n"
    "\n"
    "Runs `tiergnn train DATASET --strategy S --mem SIZE ...` once per strategy, each in its\n"
    "own process, cold (the dataset dropped from the page cache first) and in a cgroup limited\n"
    "to SIZE when ../shared/tools/membudget can set one: SIZE is the whole process's memory,\n"
    "the same for every strategy. Writes RUNDIR/bench.csv, RUNDIR/bench.md, RUNDIR/bench.svg\n"
    "and RUNDIR/bench.json and prints the table with three lower bounds of an epoch (I/O,\n"
    "Belady-optimal cache, compute).\n"
    "\n"
    "bench options:\n"
    "  --mem SIZE             --mem of every run and its cgroup limit, e.g. 512M (required)\n"
    "  --strategies A,B,...   strategies to compare (default: every strategy of the engine);\n"
    "                         an item S:OPT=VAL:FLAG runs S with its own options --OPT VAL\n"
    "                         --FLAG after the shared ones, e.g. diskgnn,diskgnn:disk-budget=4G\n"
    "                         (its folder: S_OPT-VAL_FLAG)\n"
    "  --epochs N             epochs per run (default 3; the first is left out of the means)\n"
    "  --out RUNDIR           reports here, run S in RUNDIR/S (default runs/bench-DATE-TIME)\n"
    "  --overwrite            replace existing RUNDIR/S folders\n"
    "  --membudget PATH       the membudget tool, or 'none' for no cgroup limit (default:\n"
    "                         ../shared/tools/membudget from the current directory, then from\n"
    "                         the binary's directory and its parents)\n"
    "  --no-evict             do not drop the dataset from the page cache before each run\n"
    "  --probe-time S         seconds of the device probe for the bandwidth (default 2)\n"
    "  --gemm-time S          seconds timing the GEMM rate of the compute bound (default 1)\n"
    "  --help-strategy NAME   the options of strategy NAME (as 'tiergnn strategies NAME')\n"
    "train options passed to every run (see 'tiergnn train --help'):\n"
    "  --model --layers --hidden --heads --dropout --input-dropout --attn-dropout --activation\n"
    "  --fanouts --sampler --layer-sizes --batch-size --optimizer --lr --weight-decay\n"
    "  --momentum --normalize-features\n"
    "  --eval-every --eval-fanouts --eval-chunk --checkpoint-every --seed --threads\n"
    "  --sampler-threads --derived-dir; arguments after '--' are passed on verbatim.\n"
    "  Without --eval-every / --checkpoint-every the runs get 0 for both (only after the last\n"
    "  epoch: neither is part of the epoch time).\n"
    "\n"
    "Exit status 0 when every run succeeded, 1 otherwise (the reports are written either way).\n"
    "See docs/BENCH.md.\n";

/* Bench options (not passed on) and train options (passed on, some also read here). */
#define BENCH_OWN                                                                                  \
    "strategies=,mem=,epochs=,out=,overwrite,membudget=,no-evict,probe-time=,gemm-time=,help,"     \
    "help-strategy="
#define BENCH_SPEC                                                                                 \
    BENCH_OWN ",model=,layers=,hidden=,heads=,dropout=,input-dropout=,attn-dropout=,activation=,"  \
              "fanouts=,sampler=,layer-sizes=,batch-size=,optimizer=,lr=,weight-decay=,"           \
              "momentum=,normalize-features,"                                                      \
              "eval-every=,eval-fanouts=,eval-chunk=,checkpoint-every=,seed=,threads=,"            \
              "sampler-threads=,batches-per-epoch=,eval-max-nodes=,derived-dir="

static int is_own(const char *flag)
{
    static const char *const own[] = {"strategies", "mem",       "epochs",       "out",
                                      "overwrite",  "membudget", "no-evict",     "probe-time",
                                      "gemm-time",  "help",      "help-strategy"};
    for (size_t i = 0; i < sizeof own / sizeof own[0]; i++)
        if (!strcmp(flag, own[i])) return 1;
    return 0;
}

/* The settings the bench needs itself (what is sampled and the model's widths, for the lower
 * bounds), read with the train command's defaults. */
static int parse_sampling(const tg_args_t *a, tg_bench_opts_t *o)
{
    int rc;
    if ((rc = tg_model_type_parse(tg_args_str(a, "model", "sage"), &o->model.type)) < 0)
        return tg_err_prefix(rc, "--model");
    if ((rc = tg_cli_sampling(a, o->model.type == TG_MODEL_MLP, &o->model.num_layers, o->fanouts,
                              &o->sampler)) < 0)
        return rc;
    if ((rc = tg_cli_model_widths(a, o->model.type == TG_MODEL_GAT, &o->model.hidden,
                                  &o->model.heads)) < 0)
        return rc;
    if ((rc = tg_args_u64(a, "batch-size", 1024, &o->batch_size)) < 0) return rc;
    if ((rc = tg_args_u64(a, "seed", 0, &o->seed)) < 0) return rc;
    if ((rc = tg_args_u64(a, "batches-per-epoch", 0, &o->batches_per_epoch)) < 0) return rc;
    return tg_args_int_range(a, "threads", tg_cli_default_threads(), 1, 1024, &o->threads);
}

int tg_cmd_bench(int argc, char **argv)
{
    /* Everything after "--" goes to train verbatim. */
    int split = argc;
    for (int i = 0; i < argc; i++)
        if (!strcmp(argv[i], "--")) {
            split = i;
            break;
        }
    tg_args_t a;
    char spec[4096];
    /* the strategies' own options (from the engine's table) are train options too */
    if (tg_cli_strategy_spec(spec, sizeof spec, BENCH_SPEC) < 0 ||
        tg_args_parse(&a, split, argv, spec) < 0)
        return tg_cli_fail();
    if (tg_args_has(&a, "help") || tg_args_has(&a, "help-strategy"))
        return tg_cli_help(&a, bench_usage);
    tg_bench_opts_t o;
    tg_bench_opts_default(&o);
    if (a.npos != 1) {
        tg_err(-EINVAL,
               "bench: expected one DATASET directory, got %d arguments (see 'tiergnn "
               "bench --help')",
               a.npos);
        return tg_cli_fail();
    }
    o.dataset = a.pos[0];
    if (tg_cli_derived_dir(&a, 1) < 0) return tg_cli_fail();
    o.strategies = tg_args_str(&a, "strategies", NULL);
    if (!tg_args_has(&a, "mem")) {
        tg_err(-EINVAL, "bench: --mem SIZE is required (the budget every strategy gets)");
        return tg_cli_fail();
    }
    double probe = 0, gemm = 0;
    if (tg_args_size(&a, "mem", 0, &o.mem_bytes) < 0 ||
        tg_args_uint(&a, "epochs", 3, 1, UINT64_MAX, &o.epochs) < 0 || parse_sampling(&a, &o) < 0 ||
        tg_args_double(&a, "probe-time", 2.0, &probe) < 0 ||
        tg_args_double(&a, "gemm-time", 1.0, &gemm) < 0)
        return tg_cli_fail();
    if (!(probe > 0 && probe <= 60) || !(gemm > 0 && gemm <= 60)) {
        tg_err(-EINVAL, "--%s must be in (0, 60] seconds, got %g",
               !(probe > 0 && probe <= 60) ? "probe-time" : "gemm-time",
               !(probe > 0 && probe <= 60) ? probe : gemm);
        return tg_cli_fail();
    }
    o.probe_time_s = probe;
    o.gemm_time_s = gemm;
    o.membudget = tg_args_str(&a, "membudget", NULL);
    o.no_evict = tg_args_has(&a, "no-evict");
    o.overwrite = tg_args_has(&a, "overwrite");
    char out_default[64];
    o.out_dir = tg_args_str(&a, "out", NULL);
    if (!o.out_dir) {
        time_t now = time(NULL);
        struct tm tm;
        localtime_r(&now, &tm);
        strftime(out_default, sizeof out_default, "runs/bench-%Y%m%d-%H%M%S", &tm);
        o.out_dir = out_default;
    }

    /* Train arguments: every parsed train option as "--name [value]", then the raw rest. The
     * parser stores each name inside its argv string right after "--", so name - 2 is that
     * "--name" string, NUL-terminated where a "=value" began. */
    char **targs = calloc((size_t)(2 * a.nflags + argc + 1), sizeof *targs);
    if (!targs) {
        tg_err(-ENOMEM, "bench: out of memory");
        return tg_cli_fail();
    }
    int nt = 0;
    for (int k = 0; k < a.nflags; k++) {
        if (is_own(a.flag[k])) continue;
        targs[nt++] = (char *)a.flag[k] - 2;
        if (a.value[k]) targs[nt++] = (char *)a.value[k];
    }
    for (int i = split + 1; i < argc; i++)
        targs[nt++] = argv[i];
    o.train_args = targs;
    o.num_train_args = nt;

    /* the runs are this binary: tiergnn itself */
    char self[4096];
    ssize_t sl = readlink("/proc/self/exe", self, sizeof self - 1);
    if (sl <= 0 || sl >= (ssize_t)sizeof self - 1) {
        tg_err(sl < 0 ? -errno : -ENAMETOOLONG, "bench: cannot read /proc/self/exe: %s",
               sl < 0 ? strerror(errno) : "path too long");
        free(targs);
        return tg_cli_fail();
    }
    self[sl] = 0;
    o.exe = self;

    tg_bench_result_t res;
    int rc = tg_bench(&o, &res);
    if (rc < 0) {
        free(targs);
        return tg_cli_fail();
    }
    char path[4200];
    snprintf(path, sizeof path, "%s/bench.md", o.out_dir);
    char *md = NULL;
    size_t len = 0;
    if (tg_read_file(path, &md, &len) == 0) fwrite(md, 1, len, stdout);
    free(md);
    fflush(stdout);
    fprintf(stderr, "wrote %s/bench.csv, %s/bench.md, %s/bench.svg and %s/bench.json\n", o.out_dir,
            o.out_dir, o.out_dir, o.out_dir);
    free(targs);
    if (res.failed) {
        tg_err(-EIO, "bench: %d of %d strategy run(s) failed (%d oom-killed); see %s/bench.md",
               res.failed, res.runs, res.oom_killed, o.out_dir);
        return tg_cli_fail();
    }
    return 0;
}
