/* tiergnn bench, the driver: checks the options, sets up the cgroup, samples the footprint,
 * probes the device and times the GEMM, runs every strategy in turn, computes the Belady bound
 * with the cache size the runs' budgets left, and has the reports written (see tiergnn/bench.h
 * and docs/BENCH.md). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../engine/plan_profile.h"
#include "bench-impl.h"
#include "tiergnn/engine.h"
/* The engine's table of strategies names the default set. */

#define MAX_STRATEGIES 32

void tg_bench_opts_default(tg_bench_opts_t *o)
{
    memset(o, 0, sizeof *o);
    o->epochs = 3;
    tg_model_config_default(&o->model);
    o->model.num_layers = 2; /* hidden 256, 1 head: train's defaults */
    for (int l = 0; l < TG_MAX_LAYERS; l++)
        o->fanouts[l] = 10;
    o->batch_size = 1024;
    o->threads = 1;
}

static int is_name_char(char c)
{
    return c == '-' || c == '_' || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
           (c >= '0' && c <= '9');
}

/* One --strategies item of len bytes at p: "S" or "S:opt=val:flag..." (a strategy and its own
 * options, so the same strategy can run twice with different settings, e.g.
 * "diskgnn,diskgnn:disk-budget=4G"). Fills the run's name (the item), strategy, option words
 * ("--opt" "val", "--flag") and folder name (':' -> '_', '=' -> '-', so it stays one plain
 * path component). */
static int parse_item(const char *p, size_t len, int idx, tg_bench_run_t *r, char *folder)
{
    if (len == 0 || len >= TG_BENCH_NAME_MAX)
        return tg_err(-EINVAL, "--strategies: item %d is %s", idx, len ? "too long" : "empty");
    memcpy(r->name, p, len);
    r->name[len] = 0;
    size_t slen = 0;
    while (slen < len && p[slen] != ':')
        slen++;
    for (size_t i = 0; i < slen; i++)
        if (!is_name_char(p[i]))
            return tg_err(-EINVAL,
                          "--strategies: '%.*s' is not a strategy name (letters, digits, "
                          "'-', '_'; it names a folder of RUNDIR)",
                          (int)slen, p);
    if (slen == 0) return tg_err(-EINVAL, "--strategies: item '%s' has no strategy name", r->name);
    memcpy(r->strategy, p, slen);
    r->strategy[slen] = 0;
    size_t used = 0;
    r->num_opts = 0;
    for (size_t i = slen; i < len;) {
        size_t b = ++i; /* past the ':' */
        while (i < len && p[i] != ':')
            i++;
        const char *o = p + b, *eq = memchr(o, '=', i - b);
        size_t klen = eq ? (size_t)(eq - o) : i - b, vlen = eq ? i - b - klen - 1 : 0;
        int ok = klen > 0 && o[0] >= 'a' && o[0] <= 'z' && (!eq || vlen > 0);
        for (size_t k = 0; ok && k < klen; k++)
            ok = is_name_char(o[k]) && o[k] != '_';
        for (size_t k = 0; ok && k < vlen; k++)
            ok = is_name_char(eq[1 + k]) || eq[1 + k] == '.' || eq[1 + k] == '+';
        if (!ok)
            return tg_err(-EINVAL,
                          "--strategies: in '%s', option '%.*s' is not OPTION or OPTION=VALUE "
                          "(a lowercase option name without the dashes; a value of letters, "
                          "digits, '.', '+', '-', '_')",
                          r->name, (int)(i - b), o);
        if (r->num_opts + 2 > (int)(sizeof r->opt_argv / sizeof r->opt_argv[0]))
            return tg_err(-EINVAL, "--strategies: '%s' has too many options", r->name);
        char *w = r->opt_buf + used;
        used += (size_t)snprintf(w, sizeof r->opt_buf - used, "--%.*s", (int)klen, o) + 1;
        r->opt_argv[r->num_opts++] = w;
        if (eq) {
            w = r->opt_buf + used;
            used += (size_t)snprintf(w, sizeof r->opt_buf - used, "%.*s", (int)vlen, eq + 1) + 1;
            r->opt_argv[r->num_opts++] = w;
        }
    }
    for (size_t i = 0; i <= len; i++)
        folder[i] = r->name[i] == ':' ? '_' : r->name[i] == '=' ? '-' : r->name[i];
    return 0;
}

/* "a,b:opt=v,c" (spaces around the items ignored) into *n run records (see parse_item). */
static int parse_strategies(const char *s, tg_bench_run_t *runs, char folders[][TG_BENCH_NAME_MAX],
                            int *n)
{
    *n = 0;
    if (!*s) return tg_err(-EINVAL, "--strategies: empty list, expected e.g. mmap,gnndrive");
    const char *p = s;
    for (;;) {
        while (*p == ' ')
            p++;
        const char *e = strchr(p, ',');
        size_t len = e ? (size_t)(e - p) : strlen(p);
        while (len && p[len - 1] == ' ')
            len--;
        if (*n >= MAX_STRATEGIES)
            return tg_err(-EINVAL, "--strategies: more than %d strategies", MAX_STRATEGIES);
        int rc = parse_item(p, len, *n + 1, &runs[*n], folders[*n]);
        if (rc < 0) return tg_err_prefix(rc, "in '%s'", s);
        for (int k = 0; k < *n; k++)
            if (!strcmp(folders[k], folders[*n]))
                return tg_err(-EINVAL, "--strategies: '%s' given twice", runs[*n].name);
        (*n)++;
        if (!e) break;
        p = e + 1;
    }
    return 0;
}

static int has_arg(const tg_bench_opts_t *o, const char *flag)
{
    size_t n = strlen(flag);
    for (int i = 0; i < o->num_train_args; i++)
        if (!strncmp(o->train_args[i], flag, n) &&
            (o->train_args[i][n] == 0 || o->train_args[i][n] == '='))
            return 1;
    return 0;
}

static int check_opts(const tg_bench_opts_t *o)
{
    if (!o->dataset || !*o->dataset) return tg_err(-EINVAL, "bench: a DATASET is required");
    if (!o->out_dir || !*o->out_dir) return tg_err(-EINVAL, "bench: --out RUNDIR is required");
    if (o->mem_bytes == 0)
        return tg_err(-EINVAL, "bench: --mem BYTES is required (the budget every strategy gets)");
    if (o->epochs == 0) return tg_err(-EINVAL, "bench: --epochs must be at least 1");
    if (o->threads < 1) return tg_err(-EINVAL, "bench: --threads must be at least 1");
    if (o->model.num_layers < 1 || o->model.num_layers > TG_MAX_LAYERS)
        return tg_err(-EINVAL, "bench: %d layers, expected 1..%d", o->model.num_layers,
                      TG_MAX_LAYERS);
    if (o->num_train_args > 200) return tg_err(-EINVAL, "bench: too many train arguments");
    return 0;
}

/* One run's command line: at most 20 fixed words (membudget, train, dataset, flags) plus the
 * train arguments (check_opts allows 200); the numbers live in buf. */
typedef struct {
    char *argv[256];
    int n;
    char buf[3][32];
} argv_t;

static void argv_push(argv_t *a, const char *s)
{
    if (a->n < (int)(sizeof a->argv / sizeof a->argv[0]) - 1) a->argv[a->n++] = (char *)s;
    a->argv[a->n] = NULL;
}

/* [membudget X --] tiergnn train DATASET --strategy S --mem X --epochs N --json --out DIR
 * [--eval-every 0] [--checkpoint-every 0] TRAIN-ARGS */
static void run_argv(argv_t *a, const tg_bench_opts_t *o, const tg_bench_report_t *c,
                     const tg_bench_run_t *r)
{
    memset(a, 0, sizeof *a);
    snprintf(a->buf[0], sizeof a->buf[0], "%llu", (unsigned long long)o->mem_bytes);
    snprintf(a->buf[1], sizeof a->buf[1], "%llu", (unsigned long long)o->epochs);
    if (c->cg_on) {
        argv_push(a, c->membudget);
        argv_push(a, a->buf[0]);
        argv_push(a, "--");
    }
    const char *fixed[] = {c->exe,    "train",    o->dataset, "--strategy", r->strategy, "--mem",
                           a->buf[0], "--epochs", a->buf[1],  "--json",     "--out",     r->dir};
    for (size_t i = 0; i < sizeof fixed / sizeof fixed[0]; i++)
        argv_push(a, fixed[i]);
    if (!has_arg(o, "--eval-every")) {
        argv_push(a, "--eval-every");
        argv_push(a, "0");
    }
    if (!has_arg(o, "--checkpoint-every")) {
        argv_push(a, "--checkpoint-every");
        argv_push(a, "0");
    }
    for (int k = 0; k < o->num_train_args; k++)
        argv_push(a, o->train_args[k]);
    /* the item's own options last: they are what sets this run apart */
    for (int k = 0; k < r->num_opts; k++)
        argv_push(a, r->opt_argv[k]);
}

/* The command line of every run, for the report: the one argv with S for the strategy. */
static void train_cmd(tg_bench_report_t *c, const tg_bench_opts_t *o)
{
    tg_bench_run_t s;
    memset(&s, 0, sizeof s);
    snprintf(s.name, sizeof s.name, "S");
    snprintf(s.strategy, sizeof s.strategy, "S");
    snprintf(s.dir, sizeof s.dir, "%s/S", o->out_dir);
    argv_t a;
    run_argv(&a, o, c, &s);
    size_t len = 0, cap = sizeof c->train_cmd;
    c->train_cmd[0] = 0;
    /* from "train" on: membudget and the binary's path are in the settings already */
    for (int i = c->cg_on ? 4 : 1; i < a.n && len < cap; i++)
        len += (size_t)snprintf(c->train_cmd + len, cap - len, "%s%s", len ? " " : "tiergnn ",
                                a.argv[i]);
}

/* Finds membudget and checks that it can set a limit here; c->cg_on says whether it can. */
static int setup_cgroup(tg_bench_report_t *c, const tg_bench_opts_t *o)
{
    if (o->membudget && !strcmp(o->membudget, "none")) {
        snprintf(c->cg_note, sizeof c->cg_note, "--membudget none");
        return 0;
    }
    if (o->membudget) {
        struct stat st;
        if (stat(o->membudget, &st) != 0 || !S_ISREG(st.st_mode) || access(o->membudget, X_OK))
            return tg_err(-ENOENT, "bench: --membudget %s is not an executable file", o->membudget);
        snprintf(c->membudget, sizeof c->membudget, "%s", o->membudget);
    } else if (!tg_bench_find_membudget(c->exe, c->membudget, sizeof c->membudget)) {
        snprintf(c->cg_note, sizeof c->cg_note,
                 "membudget not found: neither ../shared/tools/membudget from the current "
                 "directory nor from the binary's directory or its parents; give "
                 "--membudget PATH");
        return 0;
    }
    char why[512] = "";
    c->cg_on = tg_bench_membudget_works(c->membudget, o->out_dir, why, sizeof why);
    if (!c->cg_on)
        snprintf(c->cg_note, sizeof c->cg_note, "%.200s cannot set a limit here: %.300s",
                 c->membudget, why);
    return 0;
}

/* The I/O lower bound: the footprint of the first epoch the means cover, over the sequential
 * bandwidth measured now (not the probe's cached result); the compute bound from the same
 * footprint. */
static int lower_bound(tg_bench_report_t *c, const tg_bench_opts_t *o, tg_io_probe_t *probe,
                       tg_bench_result_t *res)
{
    tg_bench_footprint_opts_t fo;
    tg_bench_footprint_opts(o, &fo);
    c->fp_epoch = fo.epoch;
    tg_log_info("bench: sampling epoch %llu to count the rows it reads",
                (unsigned long long)fo.epoch + 1);
    int rc = tg_bench_footprint(o->dataset, &fo, &res->footprint);
    if (rc < 0) return rc;
    c->fp = &res->footprint;
    tg_bench_bounds_t *bd = c->bd = &res->bounds;
    bd->distinct_bytes = (double)res->footprint.distinct_nodes * (double)res->footprint.row_bytes;
    bd->seq_bytes_per_s = bd->io_s = NAN;
    tg_bench_compute_bound(c, bd);

    memset(probe, 0, sizeof *probe);
    c->probe = probe;
    tg_io_probe_opts_t po = {.time_s = o->probe_time_s, .refresh = 1};
    char fpath[4096];
    tg_dataset_path(c->ds, TG_FILE_FEATURES, fpath, sizeof fpath);
    tg_log_info("bench: probing the device under %s", fpath);
    tg_err_clear();
    if (tg_io_probe_run(fpath, &po, probe) < 0 || !(probe->seq_bytes_per_s > 0)) {
        snprintf(c->probe_err, sizeof c->probe_err, "%s",
                 tg_errmsg()[0] ? tg_errmsg() : "no bandwidth measured");
        tg_log_warn("bench: device probe failed, no I/O lower bound: %s", c->probe_err);
        c->lb_s = c->lb_cached_s = NAN;
        return 0;
    }
    c->probe_ok = 1;
    double distinct = bd->distinct_bytes;
    c->lb_s = distinct / probe->seq_bytes_per_s;
    bd->seq_bytes_per_s = probe->seq_bytes_per_s;
    bd->io_s = c->lb_s;
    c->lb_cached_s = TG_MAX(0.0, distinct - (double)o->mem_bytes) / probe->seq_bytes_per_s;
    res->seq_bytes_per_s = probe->seq_bytes_per_s;
    res->lower_bound_s = c->lb_s;
    return 0;
}

/* One strategy: cold start, the process, what it reported. */
static int run_one(const tg_bench_report_t *c, const tg_bench_opts_t *o, tg_bench_run_t *r, int i,
                   int nruns)
{
    int rc = tg_mkdir_p(r->dir);
    if (rc < 0) return rc;
    uint64_t resident = 0, total = 0;
    if ((rc = tg_bench_dataset_cache(c->ds, o->no_evict, &resident, &total)) < 0) return rc;
    r->resident_start = total ? (double)resident / (double)total : 0;
    argv_t a;
    run_argv(&a, o, c, r);
    char out_path[4200], err_path[4200];
    snprintf(out_path, sizeof out_path, "%s/bench-stdout.jsonl", r->dir);
    snprintf(err_path, sizeof err_path, "%s/bench-stderr.log", r->dir);
    tg_log_info("bench: [%d/%d] %s (%.0f%% of the dataset in the page cache at start)", i + 1,
                nruns, r->name, 100 * r->resident_start);
    int64_t oom0 = c->cg_on ? tg_bench_oom_kills() : -1;
    int st = 0;
    if ((rc = tg_bench_spawn_wait(a.argv, out_path, err_path, &st, &r->ru, &r->wall_s)) < 0)
        return rc;
    int64_t oom1 = oom0 >= 0 ? tg_bench_oom_kills() : -1;
    if ((rc = tg_bench_run_parse_stdout(r, out_path)) < 0) return rc;
    tg_bench_run_parse_stderr(r, err_path);
    tg_bench_run_ended(r, st, c->cg_on, oom1 >= oom0 && oom0 >= 0 ? oom1 - oom0 : -1);
    tg_bench_run_summarise(r);
    int ok = tg_bench_run_ok(r);
    tg_log_info("bench: [%d/%d] %s: %s in %.1f s%s%s", i + 1, nruns, r->name,
                tg_bench_run_status(r), r->wall_s, ok ? "" : ": ", ok ? "" : r->last_err);
    return 0;
}

/* The run records, with their folders made free (refused unless overwrite). */
static int prepare_runs(const tg_bench_opts_t *o, tg_bench_run_t **out, int *nruns)
{
    const char *list = o->strategies ? o->strategies : tg_strategy_names();
    tg_bench_run_t *runs = calloc(MAX_STRATEGIES, sizeof *runs);
    char(*folders)[TG_BENCH_NAME_MAX] = malloc(MAX_STRATEGIES * sizeof *folders);
    if (!runs || !folders) {
        free(runs);
        free(folders);
        return tg_err(-ENOMEM, "bench: out of memory");
    }
    *out = runs;
    int rc = parse_strategies(list, runs, folders, nruns);
    for (int i = 0; rc == 0 && i < *nruns; i++) {
        tg_bench_run_t *r = &runs[i];
        snprintf(r->dir, sizeof r->dir, "%s/%s", o->out_dir, folders[i]);
        r->exit_code = -1;
        r->budget_rest = NAN;
        r->predicted_s = r->probe_iops = r->probe_seq = NAN;
        struct stat st;
        if (stat(r->dir, &st) != 0) continue;
        if (!o->overwrite)
            rc = tg_err(-EEXIST,
                        "bench: %s already exists (an earlier bench?); choose another --out "
                        "or pass --overwrite",
                        r->dir);
        else
            rc = tg_rmtree(r->dir);
    }
    free(folders);
    return rc;
}

/* The value of --disk-budget among the runs' train arguments (0: not given). */
static int disk_budget_arg(const tg_bench_opts_t *o, uint64_t *out)
{
    *out = 0;
    for (int i = 0; i < o->num_train_args; i++) {
        const char *a = o->train_args[i], *v = NULL;
        if (!strncmp(a, "--disk-budget=", 14))
            v = a + 14;
        else if (!strcmp(a, "--disk-budget") && i + 1 < o->num_train_args)
            v = o->train_args[i + 1];
        if (v && strcmp(v, "auto")) return tg_parse_size(v, out);
    }
    return 0;
}

/* The run's predicted steady epoch from the bench's plan (NAN: none), with the device probe pr
 * when given (the choice made again on the plan's inputs with it). A run with options of its own
 * is predicted with them where the model takes them as inputs (diskgnn's --disk-budget: the
 * choice made again with that budget); any other option of its own leaves it unpredicted rather
 * than predicted at defaults it does not run with. */
static double predict_one(const tg_cost_plan_t *pl, const tg_bench_run_t *r,
                          const tg_io_probe_t *pr)
{
    const tg_cost_plan_t *use = pl;
    tg_cost_plan_t *own = NULL;
    uint64_t budget = 0;
    for (int k = 0; k < r->num_opts; k += 2) {
        const char *w = r->opt_argv[k];
        if (strcmp(w, "--disk-budget") || k + 1 >= r->num_opts ||
            tg_parse_size(r->opt_argv[k + 1], &budget) < 0 || !budget)
            return NAN;
    }
    if (budget || pr) {
        own = malloc(sizeof *own);
        /* the same dataset and options: the same working sets (the choice reads them) */
        if (own) memcpy(own->need, pl->need, sizeof own->need);
        tg_cost_inputs_t in = pl->in;
        if (budget) in.run.disk_budget = budget;
        if (pr) in.machine.probe = *pr;
        if (!own || tg_cost_plan_choose(&in, pl->allow_inexact, own) < 0) {
            free(own);
            tg_err_clear();
            return NAN;
        }
        use = own;
    }
    int k = !strcmp(r->strategy, "auto") ? use->best : -1;
    for (int j = 0; k < 0 && j < use->n; j++)
        if (!strcmp(r->strategy, use->names[j])) k = j;
    double v = NAN;
    if (k >= 0 && use->pred[k].predicted && use->pred[k].feasible) v = use->pred[k].steady_s;
    free(own);
    return v;
}

/* Run r's prediction with the device probed again now (and the probe's cache refreshed, which
 * an auto run reads). A probe that fails leaves the prediction of the bench's start. */
static void predict_now(const tg_cost_plan_t *pl, const tg_bench_report_t *c,
                        const tg_bench_opts_t *o, tg_bench_run_t *r)
{
    r->probe_iops = r->probe_seq = NAN;
    if (!pl) return;
    char fpath[4096];
    tg_dataset_path(c->ds, TG_FILE_FEATURES, fpath, sizeof fpath);
    tg_io_probe_opts_t po = {.time_s = o->probe_time_s, .refresh = 1};
    tg_io_probe_t pr;
    if (tg_io_probe_run(fpath, &po, &pr) < 0 || !(pr.seq_bytes_per_s > 0)) {
        tg_log_warn("bench: %s: no probe before the run, its prediction is the bench's start's: %s",
                    r->name, tg_errmsg());
        tg_err_clear();
        r->predicted_s = predict_one(pl, r, NULL);
        return;
    }
    r->predicted_s = predict_one(pl, r, &pr);
    tg_cost_machine_t m = {.probe = pr};
    r->probe_iops = tg_cost_iops(&m, tg_cost_best_depth(&m));
    r->probe_seq = pr.seq_bytes_per_s;
}

/* The planner (engine/plan_profile.h) on the runs' settings, in this process, before the runs
 * (NULL: it could not run, which costs the column, not the bench); each run's prediction comes
 * from it with the device probed again right before the run (predict_now). */
static tg_cost_plan_t *plan_runs(tg_bench_report_t *c, const tg_bench_opts_t *o)
{
    tg_cost_plan_opts_t po;
    tg_cost_plan_opts_default(&po);
    po.dataset = o->dataset;
    po.model = o->model;
    memcpy(po.fanouts, o->fanouts, sizeof po.fanouts);
    po.sampler = o->sampler;
    po.batch_size = o->batch_size;
    po.seed = o->seed;
    po.epochs = o->epochs;
    po.batches_per_epoch = o->batches_per_epoch;
    po.threads = o->threads;
    po.mem_bytes = o->mem_bytes;
    /* the runs' budget: --mem within their cgroup of --mem, less the kernel's margin */
    po.cgroup_limit = c->cg_on ? (int64_t)o->mem_bytes : 0;
    tg_cost_plan_t *pl = malloc(sizeof *pl);
    tg_err_clear();
    int rc = pl ? disk_budget_arg(o, &po.disk_budget) : tg_err(-ENOMEM, "out of memory");
    if (rc == 0) rc = tg_cost_plan(&po, pl);
    if (rc < 0) {
        snprintf(c->plan_note, sizeof c->plan_note, "no predictions: %s", tg_errmsg());
        tg_log_warn("bench: %s", c->plan_note);
        free(pl);
        return NULL;
    }
    snprintf(c->plan_note, sizeof c->plan_note,
             "the planner's choice: %s (%s); its profile took %.2f s; each run predicted with "
             "the device probed again before it",
             pl->best >= 0 ? pl->names[pl->best] : "none", pl->why, pl->cost.total_s);
    return pl;
}

static int write_reports(const tg_bench_report_t *c, const tg_bench_run_t *runs, int nruns)
{
    char path[4200];
    snprintf(path, sizeof path, "%s/bench.csv", c->o->out_dir);
    int rc = tg_bench_write_csv(path, runs, nruns);
    snprintf(path, sizeof path, "%s/bench.md", c->o->out_dir);
    if (rc == 0) rc = tg_bench_write_md(path, c, runs, nruns);
    snprintf(path, sizeof path, "%s/bench.svg", c->o->out_dir);
    if (rc == 0) rc = tg_bench_write_svg(path, c, runs, nruns);
    snprintf(path, sizeof path, "%s/bench.json", c->o->out_dir);
    if (rc == 0) rc = tg_bench_write_json(path, c, runs, nruns);
    return rc;
}

int tg_bench(const tg_bench_opts_t *o, tg_bench_result_t *res)
{
    memset(res, 0, sizeof *res);
    res->lower_bound_s = NAN;
    int rc = check_opts(o);
    if (rc < 0) return rc;
    tg_dataset_t *ds = NULL;
    tg_bench_run_t *runs = NULL;
    int nruns = 0;
    tg_bench_report_t c;
    memset(&c, 0, sizeof c);
    c.o = o;
    tg_io_probe_t probe;
    tg_cost_plan_t *pl = NULL;
    if ((rc = tg_dataset_open(&ds, o->dataset, TG_OPEN_CHECK_SIZES)) < 0) return rc;
    c.ds = ds;
    /* The binary the runs use: tiergnn, said explicitly, never this process by default. */
    if ((rc = tg_mkdir_p(o->out_dir)) < 0 || (rc = tg_bench_check_exe(o->exe, o->out_dir)) < 0 ||
        (rc = prepare_runs(o, &runs, &nruns)) < 0)
        goto out;
    snprintf(c.exe, sizeof c.exe, "%s", o->exe);
    if ((rc = setup_cgroup(&c, o)) < 0) goto out;
    char t1[32];
    if (c.cg_on) {
        res->cgroup_limited = 1;
        res->cgroup_limit = o->mem_bytes;
        tg_log_info("bench: every run under a cgroup limit of %s = --mem (the whole process)",
                    tg_fmt_bytes(o->mem_bytes, t1, sizeof t1));
    } else {
        tg_log_warn("bench: running WITHOUT a memory limit: %s", c.cg_note);
    }
    if ((rc = lower_bound(&c, o, &probe, res)) < 0) goto out;
    pl = plan_runs(&c, o);
    train_cmd(&c, o);
    for (int i = 0; i < nruns; i++) {
        predict_now(pl, &c, o, &runs[i]);
        if ((rc = run_one(&c, o, &runs[i], i, nruns)) < 0) goto out;
        res->runs++;
        res->failed += !tg_bench_run_ok(&runs[i]);
        res->oom_killed += runs[i].oom_killed;
    }
    tg_bench_belady_bound(&c, &res->bounds, runs, nruns);
    rc = write_reports(&c, runs, nruns);
out:
    if (runs)
        for (int i = 0; i < nruns; i++)
            free(runs[i].ep);
    free(runs);
    free(pl);
    tg_dataset_close(ds);
    return rc;
}
