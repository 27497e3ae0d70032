/* tiergnn._run's evaluate and infer: `tiergnn eval` and `tiergnn infer` from Python, parsed and
 * run by the commands' own steps (tg_cli_eval_*, tg_cli_infer_*), with the GIL released. */
#include "_run.h"

/* evaluate(argv) -> {"split", "acc", "loss", "count", "epoch"}: `tiergnn eval --json`. */
PyObject *run_evaluate(PyObject *self, PyObject *list)
{
    (void)self;
    run_argv_t av;
    if (run_argv_from(list, &av) < 0) return NULL;
    run_globals_t g;
    tg_cli_eval_t e;
    tg_eval_result_t r;
    int rc = run_globals_save(&g);
    if (!rc) rc = tg_cli_eval_parse(av.argc, av.argv, &e);
    if (!rc && e.help) rc = run_refuse_help();
    if (!rc) {
        PyThreadState *ts = PyEval_SaveThread();
        rc = tg_cli_eval_run(&e, &r);
        PyEval_RestoreThread(ts);
    }
    PyObject *ret = NULL;
    if (rc < 0)
        run_raise(rc);
    else
        ret = Py_BuildValue("{s:s,s:d,s:d,s:K,s:K}", "split", e.split, "acc", r.acc, "loss", r.loss,
                            "count", (unsigned long long)r.count, "epoch",
                            (unsigned long long)r.epoch);
    run_globals_restore(&g);
    run_argv_free(&av);
    return ret;
}

/* infer(argv) -> {"out", "embeddings", "npy"}: `tiergnn infer` without its progress bar; FILE.json
 * beside FILE says the shapes. */
PyObject *run_infer(PyObject *self, PyObject *list)
{
    (void)self;
    run_argv_t av;
    if (run_argv_from(list, &av) < 0) return NULL;
    run_globals_t g;
    tg_cli_infer_t p;
    int rc = run_globals_save(&g);
    if (!rc) rc = tg_cli_infer_parse(av.argc, av.argv, &p);
    if (!rc && p.help) rc = run_refuse_help();
    if (!rc) {
        p.o.progress = 0;
        PyThreadState *ts = PyEval_SaveThread();
        rc = tg_cli_infer_run(&p);
        PyEval_RestoreThread(ts);
    }
    PyObject *ret = NULL;
    if (rc < 0)
        run_raise(rc);
    else
        ret = Py_BuildValue("{s:s,s:O,s:O}", "out", p.out, "embeddings",
                            p.o.embeddings ? Py_True : Py_False, "npy", p.npy ? Py_True : Py_False);
    run_globals_restore(&g);
    run_argv_free(&av);
    return ret;
}
