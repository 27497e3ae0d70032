/* tiergnn._run's evaluate and infer: `tiergnn eval` and `tiergnn infer` from Python, their
 * options parsed by tg_cmd_eval's and tg_cmd_infer's rules, run with the GIL released. */
#include "_run.h"

#include <errno.h>
#include <string.h>

#include "tiergnn/util.h"

static int run_split_id(const char *split, tg_file_id_t *sid)
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

/* The options of `tiergnn eval` (tg_cmd_eval's rules) into o, the run directory and split. */
static int run_eval_parse(tg_args_t *a, tg_eval_opts_t *o, char *rundir, size_t len,
                          tg_file_id_t *sid, tg_strategy_arg_t *sargs)
{
    if (a->npos != 1)
        return tg_err(-EINVAL, "eval: expected one DATASET directory, got %d arguments", a->npos);
    const char *ckpt = tg_args_str(a, "checkpoint", NULL);
    if (!ckpt) return tg_err(-EINVAL, "eval: --checkpoint RUNDIR (or RUNDIR/best.bin) is required");
    int rc = run_split_id(tg_args_str(a, "split", "test"), sid);
    o->verify = tg_args_has(a, "verify");
    o->verify_reads = tg_args_has(a, "verify-reads");
    if (!rc) rc = tg_args_int_range(a, "threads", tg_cli_default_threads(), 1, 1024, &o->threads);
    if (!rc) rc = tg_args_uint(a, "eval-chunk", 0, 1, UINT64_MAX, &o->eval_chunk);
    if (!rc) rc = tg_args_u64(a, "max-nodes", 0, &o->max_nodes);
    if (!rc) rc = tg_args_size(a, "mem", 0, &o->mem_bytes);
    if (!rc) rc = tg_cli_checkpoint(ckpt, tg_args_has(a, "last"), rundir, len, &o->which_last);
    if (!rc) rc = run_cli_eval_sampler(a, rundir, o->which_last);
    if (!rc) rc = tg_cli_strategy_name(a, &o->strategy);
    if (!rc) rc = tg_cli_strategy_args(a, sargs, TG_ARGS_MAX, &o->num_strategy_args);
    o->strategy_args = sargs;
    return rc;
}

#define RUN_EVAL_SPEC                                                                              \
    "checkpoint=,split=,last,threads=,eval-chunk=,max-nodes=,mem=,strategy=,json,sampler=,"        \
    "layer-sizes=,verify,verify-reads,help,help-strategy=,derived-dir="

/* evaluate(argv) -> {"split", "acc", "loss", "count", "epoch"}: `tiergnn eval --json`. */
PyObject *run_evaluate(PyObject *self, PyObject *list)
{
    (void)self;
    run_argv_t av;
    if (run_argv_from(list, &av) < 0) return NULL;
    run_globals_t g;
    int rc = run_globals_save(&g);
    tg_args_t a;
    char spec[4096], rundir[4096];
    tg_strategy_arg_t sargs[TG_ARGS_MAX];
    tg_eval_opts_t o = {0};
    tg_file_id_t sid = TG_FILE_TEST;
    tg_eval_result_t r;
    if (!rc) rc = tg_cli_strategy_spec(spec, sizeof spec, RUN_EVAL_SPEC);
    if (!rc) rc = run_parse(&a, &av, spec);
    if (!rc) rc = tg_cli_derived_dir(&a, 1);
    if (!rc) rc = run_eval_parse(&a, &o, rundir, sizeof rundir, &sid, sargs);
    if (!rc) {
        PyThreadState *ts = PyEval_SaveThread();
        rc = tg_eval(a.pos[0], rundir, sid, &o, &r);
        PyEval_RestoreThread(ts);
    }
    PyObject *ret = NULL;
    if (rc < 0)
        run_raise(rc);
    else
        ret = Py_BuildValue("{s:s,s:d,s:d,s:K,s:K}", "split", tg_args_str(&a, "split", "test"),
                            "acc", r.acc, "loss", r.loss, "count", (unsigned long long)r.count,
                            "epoch", (unsigned long long)r.epoch);
    run_globals_restore(&g);
    run_argv_free(&av);
    return ret;
}

/* The options of `tiergnn infer` (tg_cmd_infer's rules) into o; *out and *npy from --out and
 * --format. */
static int run_infer_parse(tg_args_t *a, tg_infer_opts_t *o, char *rundir, size_t len,
                           const char **out, int *npy, tg_strategy_arg_t *sargs)
{
    if (a->npos != 1)
        return tg_err(-EINVAL, "infer: expected one DATASET directory, got %d arguments", a->npos);
    const char *ckpt = tg_args_str(a, "checkpoint", NULL);
    *out = tg_args_str(a, "out", NULL);
    if (!ckpt || !*out)
        return tg_err(-EINVAL, "infer: --checkpoint RUNDIR|FILE and --out FILE are required");
    o->embeddings = tg_args_has(a, "embeddings");
    o->verify = tg_args_has(a, "verify");
    o->verify_reads = tg_args_has(a, "verify-reads");
    int rc = tg_cli_strategy_name(a, &o->strategy);
    if (!rc) rc = tg_cli_strategy_args(a, sargs, TG_ARGS_MAX, &o->num_strategy_args);
    o->strategy_args = sargs;
    if (!rc) rc = tg_args_uint(a, "chunk-nodes", 0, 1, UINT64_MAX, &o->chunk_nodes);
    if (!rc) rc = tg_args_size(a, "mem", 0, &o->mem_bytes);
    if (!rc) rc = tg_args_int_range(a, "threads", tg_cli_default_threads(), 1, 1024, &o->threads);
    if (!rc) rc = tg_cli_checkpoint(ckpt, tg_args_has(a, "last"), rundir, len, &o->which_last);
    const char *format = tg_args_str(a, "format", "raw");
    if (!rc && strcmp(format, "raw") && strcmp(format, "npy"))
        rc = tg_err(-EINVAL, "--format must be raw or npy, got '%s'", format);
    *npy = !strcmp(format, "npy");
    return rc;
}

#define RUN_INFER_SPEC                                                                             \
    "checkpoint=,out=,embeddings,format=,last,chunk-nodes=,mem=,threads=,strategy=,verify,"        \
    "verify-reads,help,help-strategy=,derived-dir="

/* infer(argv) -> {"out", "embeddings"}: `tiergnn infer`; FILE.json beside FILE says the shapes. */
PyObject *run_infer(PyObject *self, PyObject *list)
{
    (void)self;
    run_argv_t av;
    if (run_argv_from(list, &av) < 0) return NULL;
    run_globals_t g;
    int rc = run_globals_save(&g), npy = 0;
    tg_args_t a;
    char spec[4096], rundir[4096];
    tg_strategy_arg_t sargs[TG_ARGS_MAX];
    tg_infer_opts_t o = {0};
    const char *out = NULL;
    if (!rc) rc = tg_cli_strategy_spec(spec, sizeof spec, RUN_INFER_SPEC);
    if (!rc) rc = run_parse(&a, &av, spec);
    if (!rc) rc = tg_cli_derived_dir(&a, 1);
    if (!rc) rc = run_infer_parse(&a, &o, rundir, sizeof rundir, &out, &npy, sargs);
    if (!rc) {
        PyThreadState *ts = PyEval_SaveThread();
        rc = tg_infer(a.pos[0], rundir, out, &o);
        if (!rc && npy) rc = run_cli_infer_npy(a.pos[0], out, o.embeddings);
        PyEval_RestoreThread(ts);
    }
    PyObject *ret = NULL;
    if (rc < 0)
        run_raise(rc);
    else
        ret = Py_BuildValue("{s:s,s:O,s:O}", "out", out, "embeddings",
                            o.embeddings ? Py_True : Py_False, "npy", npy ? Py_True : Py_False);
    run_globals_restore(&g);
    run_argv_free(&av);
    return ret;
}
