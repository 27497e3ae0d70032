/* tiergnn._run - the trainer, evaluation, inference, the generator and the importers for Python
 * (python/tiergnn/run.py and dataset.py are the API over it).
 *
 * Every entry point takes an argv of the CLI's options, which run.py makes from keyword
 * arguments (fanouts=[10, 10] -> "--fanouts=10,10"), and parses it with the CLI's own parsers:
 * the options, their defaults, their rules and their messages (did-you-mean included) are the
 * CLI's by construction, so that tiergnn.train(ds, out, **opts) and `tiergnn train` with the same
 * options give the same run, checkpoint for checkpoint.
 *
 * Training runs tg_train on a thread of its own with every signal blocked (so Ctrl-C reaches the
 * interpreter's thread), its JSON lines going into a pipe that readline() reads with the GIL
 * released; stop() sets tg_train_opts_t.stop, join() reads the pipe to its end and joins. The
 * other calls run on the calling thread with the GIL released.
 *
 * Errors raise through tgpy_raise with tiergnn's message; a message recorded on the training
 * thread is made the caller's before raising (tg_errmsg is per thread).
 */
#include "tgpy_common.h" /* Python.h, first */

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* The CLI's option parsers (argument table, strategy options, train's flags and --config merge,
 * eval's sampler check, infer's .npy copies). The CLI is not part of libtiergnn, and these are
 * static functions of its files, so the files are compiled into this module as they are. */
#include "../../src/cli/args.c"
#include "../../src/cli/cmd_strategy.c"
#include "../../src/cli/cmd_train.c"
#include "../../src/cli/cmd_eval.c"
#include "../../src/cli/cmd_infer.c"

#include "tiergnn/config.h"
#include "tiergnn/data.h"
#include "tiergnn/derived.h"
#include "tiergnn/engine.h"
#include "tiergnn/util.h"

/* ---------------------------------------------------------------- argv */

/* A private copy of the Python list's strings: tg_args_parse writes into them, and the parsed
 * options point into them for as long as the run lasts. */
typedef struct run_argv {
    int argc;
    char **argv;
} run_argv_t;

static void run_argv_free(run_argv_t *av)
{
    for (int i = 0; av->argv && i < av->argc; i++)
        free(av->argv[i]);
    free(av->argv);
    av->argv = NULL;
    av->argc = 0;
}

static int run_argv_from(PyObject *list, run_argv_t *av)
{
    av->argc = 0;
    av->argv = NULL;
    if (!PyList_Check(list)) {
        PyErr_SetString(PyExc_TypeError, "argv must be a list of str");
        return -1;
    }
    Py_ssize_t n = PyList_GET_SIZE(list);
    av->argv = calloc((size_t)n + 1, sizeof *av->argv);
    if (!av->argv) {
        PyErr_NoMemory();
        return -1;
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *b = tgpy_path(PyList_GET_ITEM(list, i)); /* paths: the file system's bytes */
        if (!b || !(av->argv[i] = strdup(PyBytes_AS_STRING(b)))) {
            if (b) PyErr_NoMemory();
            Py_XDECREF(b);
            run_argv_free(av);
            return -1;
        }
        Py_DECREF(b);
        av->argc = (int)i + 1;
    }
    return 0;
}

/* Parses av against spec; --help is the CLI's, not an option of a call. */
static int run_parse(tg_args_t *a, run_argv_t *av, const char *spec)
{
    int rc = tg_args_parse(a, av->argc, av->argv, spec);
    if (rc < 0) return rc;
    if (tg_args_has(a, "help") || tg_args_has(a, "help-strategy"))
        return tg_err(-EINVAL, "help and help_strategy are the CLI's (tiergnn COMMAND --help, "
                               "tiergnn strategies NAME)");
    return 0;
}

/* The process-wide settings an argv may change (--quiet / --verbose, --derived-dir), saved
 * before a call and put back after it, so that one call's options do not outlive it. */
typedef struct run_globals {
    int log_level;
    char *derived_dir;
} run_globals_t;

static int run_globals_save(run_globals_t *g)
{
    g->log_level = tg_log_level();
    const char *d = tg_derived_get_dir();
    g->derived_dir = d ? strdup(d) : NULL;
    return d && !g->derived_dir ? -ENOMEM : 0;
}

static void run_globals_restore(run_globals_t *g)
{
    tg_log_set_level(g->log_level);
    if (tg_derived_get_dir() != g->derived_dir) tg_derived_set_dir(g->derived_dir, 0);
    free(g->derived_dir);
    g->derived_dir = NULL;
}

static PyObject *run_raise(int rc)
{
    return tgpy_raise(rc, NULL);
}

/* d[key] = v, a new reference given up here; -1 with an exception set (v NULL included). */
static int run_set(PyObject *d, const char *key, PyObject *v)
{
    int rc = v ? PyDict_SetItemString(d, key, v) : -1;
    Py_XDECREF(v);
    return rc;
}

static PyObject *run_u64(uint64_t v)
{
    return PyLong_FromUnsignedLongLong((unsigned long long)v);
}

/* ---------------------------------------------------------------- training */

typedef struct run_train {
    PyObject_HEAD run_argv_t av;
    tg_train_opts_t o;
    tg_train_config_t cf; /* owns the strings of --config / --resume's settings */
    tg_strategy_arg_t sargs[TG_CONFIG_MAX_ARGS];
    run_globals_t globals;
    int have_globals;
    volatile sig_atomic_t stop;
    int state; /* 0 parsed, 1 running, 2 joined */
    pthread_t thread;
    FILE *json; /* the pipe's write end: the training thread's, closed by it */
    int rfd;    /* the pipe's read end */
    int reading;
    char *buf; /* read buffer: bytes [pos, len) not yet returned */
    size_t pos, len, cap;
    int rc;
    tg_train_result_t res;
    char msg[2048];
} run_train_t;

static PyTypeObject run_train_type;

static void *run_train_main(void *arg)
{
    run_train_t *t = arg;
    t->rc = tg_train(&t->o, &t->res);
    if (t->rc < 0) snprintf(t->msg, sizeof t->msg, "%s", tg_errmsg());
    fclose(t->json); /* end of file for readline */
    t->json = NULL;
    return NULL;
}

/* The strategy options parse_train / apply_config left in static arrays, copied into t. */
static void run_train_own_args(run_train_t *t)
{
    int n = TG_MIN(t->o.num_strategy_args, TG_CONFIG_MAX_ARGS);
    for (int k = 0; k < n; k++)
        t->sargs[k] = t->o.strategy_args[k];
    t->o.strategy_args = t->sargs;
    t->o.num_strategy_args = n;
}

/* train_prepare(argv, progress): parses the options of `tiergnn train` (DATASET and --out
 * included); the run starts with start(). */
static PyObject *run_train_prepare(PyObject *self, PyObject *args)
{
    (void)self;
    PyObject *list;
    int progress = 0;
    if (!PyArg_ParseTuple(args, "O|p", &list, &progress)) return NULL;
    run_train_t *t = PyObject_New(run_train_t, &run_train_type);
    if (!t) return NULL;
    memset((char *)t + sizeof(PyObject), 0, sizeof *t - sizeof(PyObject));
    t->rfd = -1;
    if (run_argv_from(list, &t->av) < 0) {
        Py_DECREF(t);
        return NULL;
    }
    int rc = run_globals_save(&t->globals);
    t->have_globals = rc == 0;
    tg_args_t a;
    char spec[4096];
    tg_train_opts_default(&t->o);
    if (!rc) rc = tg_cli_strategy_spec(spec, sizeof spec, TRAIN_SPEC);
    if (!rc) rc = run_parse(&a, &t->av, spec);
    if (!rc) rc = tg_cli_derived_dir(&a, 1);
    if (!rc) rc = parse_train(&a, &t->o);
    if (!rc) rc = apply_config(&a, &t->o, &t->cf);
    if (rc < 0) {
        run_raise(rc);
        Py_DECREF(t);
        return NULL;
    }
    run_train_own_args(t);
    t->o.progress = progress;
    t->o.json = NULL;
    t->o.stop = &t->stop;
    return (PyObject *)t;
}

static PyObject *run_train_start(run_train_t *t, PyObject *unused)
{
    (void)unused;
    if (t->state != 0) {
        PyErr_SetString(PyExc_RuntimeError, "this run was started already");
        return NULL;
    }
    int fds[2];
    if (pipe2(fds, O_CLOEXEC)) return PyErr_SetFromErrno(PyExc_OSError);
    t->json = fdopen(fds[1], "w");
    if (!t->json) {
        close(fds[0]);
        close(fds[1]);
        return PyErr_SetFromErrno(PyExc_OSError);
    }
    setvbuf(t->json, NULL, _IOLBF, 0);
    t->rfd = fds[0];
    t->o.json = t->json;
    /* the thread and those tg_train starts inherit the mask: signals go to Python's thread */
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_BLOCK, &all, &old);
    int err = pthread_create(&t->thread, NULL, run_train_main, t);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    if (err) {
        fclose(t->json);
        t->json = NULL;
        errno = err;
        return PyErr_SetFromErrno(PyExc_OSError);
    }
    t->state = 1;
    Py_RETURN_NONE;
}

/* Room for 4 KiB more in the read buffer, the bytes not yet returned moved to its start. */
static int run_train_room(run_train_t *t)
{
    if (t->pos > 0) {
        memmove(t->buf, t->buf + t->pos, t->len - t->pos);
        t->len -= t->pos;
        t->pos = 0;
    }
    if (t->cap - t->len >= 4096) return 0;
    size_t cap = t->cap ? t->cap * 2 : 65536;
    char *b = realloc(t->buf, cap);
    if (!b) {
        PyErr_NoMemory();
        return -1;
    }
    t->buf = b;
    t->cap = cap;
    return 0;
}

/* Waits up to RUN_POLL_MS for the pipe, then reads what is there; the GIL released. Returns
 * the bytes read, 0 at the pipe's end, -2 when nothing came (timeout or a signal), -1 with
 * errno set. */
#define RUN_POLL_MS 100
static ssize_t run_train_read(run_train_t *t)
{
    struct pollfd p = {.fd = t->rfd, .events = POLLIN};
    PyThreadState *ts = PyEval_SaveThread();
    int ready = poll(&p, 1, RUN_POLL_MS);
    ssize_t n = ready > 0 ? read(t->rfd, t->buf + t->len, t->cap - t->len) : -2;
    int err = errno;
    PyEval_RestoreThread(ts);
    if ((ready < 0 || n == -1) && err == EINTR) return -2;
    if (ready < 0) n = -1;
    errno = err;
    return n;
}

/* Reads more of the pipe into the buffer. Returns the bytes read, 0 at its end, -1 with an
 * exception set. interruptible: the interpreter's signal handlers run every RUN_POLL_MS while
 * waiting (Ctrl-C raises KeyboardInterrupt here), whichever thread the signal reached;
 * otherwise reading goes on to the end (join must reach it). */
static Py_ssize_t run_train_fill(run_train_t *t, int interruptible)
{
    if (run_train_room(t) < 0) return -1;
    for (;;) {
        ssize_t n = run_train_read(t);
        if (n >= 0) {
            t->len += (size_t)n;
            return n;
        }
        if (n == -1) {
            PyErr_SetFromErrno(PyExc_OSError);
            return -1;
        }
        if (interruptible && PyErr_CheckSignals() < 0) return -1;
    }
}

/* readline(): the next JSON line of the run (str), None once the run has ended. */
static PyObject *run_train_readline(run_train_t *t, PyObject *unused)
{
    (void)unused;
    if (t->rfd < 0) Py_RETURN_NONE;
    if (t->reading) {
        PyErr_SetString(PyExc_RuntimeError, "readline() of one run from two threads");
        return NULL;
    }
    t->reading = 1;
    PyObject *line = NULL;
    for (;;) {
        char *s = t->buf + t->pos, *nl = t->len > t->pos ? memchr(s, '\n', t->len - t->pos) : NULL;
        if (nl) {
            line = PyUnicode_DecodeUTF8(s, nl - s, "replace");
            t->pos = (size_t)(nl + 1 - t->buf);
            break;
        }
        Py_ssize_t n = run_train_fill(t, 1);
        if (n < 0) break;
        if (n == 0) { /* the run closed its end: a last line without '\n', or None */
            close(t->rfd);
            t->rfd = -1;
            line = t->len > t->pos
                       ? PyUnicode_DecodeUTF8(s, (Py_ssize_t)(t->len - t->pos), "replace")
                       : Py_NewRef(Py_None);
            t->pos = t->len;
            break;
        }
    }
    t->reading = 0;
    return line;
}

static void run_join_thread(pthread_t th)
{
    PyThreadState *ts = PyEval_SaveThread();
    pthread_join(th, NULL);
    PyEval_RestoreThread(ts);
}

static PyObject *run_train_stop(run_train_t *t, PyObject *unused)
{
    (void)unused;
    t->stop = 1;
    Py_RETURN_NONE;
}

/* Reads the pipe to its end (a writer blocked on a full pipe would never finish) and joins the
 * thread. Returns 0, or -1 with an exception set. */
static int run_train_finish(run_train_t *t)
{
    if (t->state != 1) return 0;
    while (t->rfd >= 0) {
        t->pos = t->len = 0;
        Py_ssize_t n = run_train_fill(t, 0);
        if (n < 0) return -1;
        if (n == 0) {
            close(t->rfd);
            t->rfd = -1;
        }
    }
    run_join_thread(t->thread);
    t->state = 2;
    if (t->have_globals) run_globals_restore(&t->globals);
    t->have_globals = 0;
    return 0;
}

static PyObject *run_train_result(const run_train_t *t)
{
    const tg_train_result_t *r = &t->res;
    const struct {
        const char *key;
        double v;
    } nums[] = {{"best_valid_acc", r->best_valid_acc},
                {"best_valid_loss", r->best_valid_loss},
                {"test_acc", r->test_acc},
                {"last_train_loss", r->last_train_loss},
                {"train_time_s", r->train_time_s}};
    const struct {
        const char *key;
        uint64_t v;
    } counts[] = {{"epochs_done", r->epochs_done},
                  {"best_epoch", r->best_epoch},
                  {"peak_rss_bytes", r->peak_rss_bytes},
                  {"stopped_epoch", r->stopped_epoch},
                  {"stopped_batch", r->stopped_batch}};
    PyObject *d = PyDict_New();
    int rc = d ? 0 : -1;
    for (size_t i = 0; !rc && i < sizeof nums / sizeof nums[0]; i++)
        rc = run_set(d, nums[i].key, PyFloat_FromDouble(nums[i].v));
    for (size_t i = 0; !rc && i < sizeof counts / sizeof counts[0]; i++)
        rc = run_set(d, counts[i].key, run_u64(counts[i].v));
    if (!rc) rc = run_set(d, "strategy", PyUnicode_FromString(r->strategy ? r->strategy : ""));
    if (!rc) rc = run_set(d, "interrupted", PyBool_FromLong(r->interrupted));
    if (rc) Py_CLEAR(d);
    return d;
}

/* join(): waits for the run's end (call stop() first to end it early) and returns its result as
 * a dict; a run that failed raises with its message. A run ended by stop() is no failure. */
static PyObject *run_train_join(run_train_t *t, PyObject *unused)
{
    (void)unused;
    if (t->state == 0) {
        PyErr_SetString(PyExc_RuntimeError, "this run was not started");
        return NULL;
    }
    if (run_train_finish(t) < 0) return NULL;
    if (t->rc < 0 && !(t->stop && t->rc == -EINTR && t->res.interrupted))
        return tgpy_raise_msg(t->rc, t->msg);
    return run_train_result(t);
}

static PyObject *run_train_running(run_train_t *t, void *closure)
{
    (void)closure;
    return PyBool_FromLong(t->state == 1);
}

/* A run left running by its owner is stopped and joined: no thread outlives its object. */
static void run_train_dealloc(run_train_t *t)
{
    if (t->state == 1) {
        t->stop = 1;
        PyObject *et, *ev, *tb;
        PyErr_Fetch(&et, &ev, &tb);
        if (run_train_finish(t) < 0) PyErr_WriteUnraisable((PyObject *)t);
        PyErr_Restore(et, ev, tb);
    }
    if (t->state == 1) { /* the pipe failed: the thread still must be joined */
        run_join_thread(t->thread);
        t->state = 2;
    }
    if (t->rfd >= 0) close(t->rfd);
    if (t->have_globals) run_globals_restore(&t->globals);
    tg_train_config_destroy(&t->cf);
    run_argv_free(&t->av);
    free(t->buf);
    PyObject_Free(t);
}

static PyMethodDef run_train_methods[] = {
    {"start", (PyCFunction)run_train_start, METH_NOARGS, "start the run on a thread of its own"},
    {"readline", (PyCFunction)run_train_readline, METH_NOARGS,
     "the next JSON line of the run, None at its end"},
    {"stop", (PyCFunction)run_train_stop, METH_NOARGS, "ask the run to stop at the next batch"},
    {"join", (PyCFunction)run_train_join, METH_NOARGS, "wait for the end; the result as a dict"},
    {NULL, NULL, 0, NULL}};

static PyGetSetDef run_train_getset[] = {
    {"running", (getter)run_train_running, NULL, "started and not joined", NULL},
    {NULL, NULL, NULL, NULL, NULL}};

static PyTypeObject run_train_type = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "tiergnn._run.TrainRun",
    .tp_basicsize = sizeof(run_train_t),
    .tp_dealloc = (destructor)run_train_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "a training run (tiergnn.train is the API over it)",
    .tp_methods = run_train_methods,
    .tp_getset = run_train_getset,
};

/* ---------------------------------------------------------------- evaluation and inference */

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
    if (!rc) rc = check_sampler(a, rundir, o->which_last);
    if (!rc) rc = tg_cli_strategy_name(a, &o->strategy);
    if (!rc) rc = tg_cli_strategy_args(a, sargs, TG_ARGS_MAX, &o->num_strategy_args);
    o->strategy_args = sargs;
    return rc;
}

#define RUN_EVAL_SPEC                                                                              \
    "checkpoint=,split=,last,threads=,eval-chunk=,max-nodes=,mem=,strategy=,json,sampler=,"        \
    "layer-sizes=,verify,verify-reads,help,help-strategy=,derived-dir="

/* evaluate(argv) -> {"split", "acc", "loss", "count", "epoch"}: `tiergnn eval --json`. */
static PyObject *run_evaluate(PyObject *self, PyObject *list)
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
static PyObject *run_infer(PyObject *self, PyObject *list)
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
        if (!rc && npy) rc = write_npy_outputs(a.pos[0], out, o.embeddings);
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

/* ---------------------------------------------------------------- generator and importers */

static int run_feat_dtype(const char *s, tg_feat_dtype_t *t)
{
    if (!strcmp(s, "f32"))
        *t = TG_F32;
    else if (!strcmp(s, "f16"))
        *t = TG_F16;
    else
        return tg_err(-EINVAL, "--feat-dtype must be f32 or f16, got '%s'", s);
    return 0;
}

#define RUN_GEN_SPEC                                                                               \
    "nodes=,avg-degree=,feat-dim=,classes=,train-frac=,valid-frac=,test-frac=,homophily=,"         \
    "feat-noise=,feat-dtype=,seed=,mem=,threads=,overwrite,help"

/* The options of `tiergnn generate` (tg_cmd_generate's rules) into o. */
static int run_gen_parse(const tg_args_t *a, tg_gen_opts_t *o)
{
    if (a->npos != 1)
        return tg_err(-EINVAL, "generate: expected one output directory, got %d arguments",
                      a->npos);
    if (!tg_args_has(a, "nodes")) return tg_err(-EINVAL, "generate: --nodes is required");
    tg_gen_opts_default(o);
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
    if (!rc) rc = run_feat_dtype(tg_args_str(a, "feat-dtype", "f32"), &o->feat_dtype);
    if (rc) return rc;
    o->feat_dim = (uint32_t)dim;
    o->classes = (uint32_t)classes;
    o->threads = (int)threads;
    o->overwrite = tg_args_has(a, "overwrite");
    const char *noise = tg_args_str(a, "feat-noise", "auto");
    if (strcmp(noise, "auto") != 0) {
        if ((rc = tg_parse_double(noise, &o->feat_noise, "--feat-noise")) < 0) return rc;
        if (o->feat_noise < 0)
            return tg_err(-EINVAL, "--feat-noise must be 'auto' or at least 0, got %s", noise);
    }
    return 0;
}

/* generate(argv): `tiergnn generate OUT ...`. */
static PyObject *run_generate(PyObject *self, PyObject *list)
{
    (void)self;
    run_argv_t av;
    if (run_argv_from(list, &av) < 0) return NULL;
    run_globals_t g;
    int rc = run_globals_save(&g);
    tg_args_t a;
    tg_gen_opts_t o;
    if (!rc) rc = run_parse(&a, &av, RUN_GEN_SPEC);
    if (!rc) rc = run_gen_parse(&a, &o);
    if (!rc) {
        PyThreadState *ts = PyEval_SaveThread();
        rc = tg_generate(a.pos[0], &o);
        PyEval_RestoreThread(ts);
    }
    run_globals_restore(&g);
    run_argv_free(&av);
    if (rc < 0) return run_raise(rc);
    Py_RETURN_NONE;
}

#define RUN_IMPORT_SPEC                                                                            \
    "from=,split=,undirected,dedup,self-loops,feat-dtype=,mem=,overwrite,feat-dim=,classes=,"      \
    "seed=,feat-noise=,train-frac=,valid-frac=,test-frac=,help"

static int run_import_kind(const char *from, tg_import_kind_t *kind)
{
    static const char *const names[] = {"ogb", "npy", "edgelist", "npz"};
    static const tg_import_kind_t kinds[] = {TG_IMPORT_OGB, TG_IMPORT_NPY, TG_IMPORT_EDGELIST,
                                             TG_IMPORT_NPZ};
    for (int i = 0; i < 4; i++)
        if (!strcmp(from, names[i])) {
            *kind = kinds[i];
            return 0;
        }
    return tg_err(-EINVAL, "--from must be ogb, npy, npz or edgelist, got '%s'", from);
}

/* The edge-list options refused for other sources, as tg_cmd_import refuses them. */
static int run_import_gen_only(const tg_args_t *a, const char *from, tg_import_kind_t kind)
{
    static const char *const gen_only[] = {"feat-dim",   "classes",    "seed",     "feat-noise",
                                           "train-frac", "valid-frac", "test-frac"};
    for (size_t i = 0; i < sizeof gen_only / sizeof gen_only[0]; i++)
        if (kind != TG_IMPORT_EDGELIST && tg_args_has(a, gen_only[i]))
            return tg_err(-EINVAL,
                          "--%s applies to --from edgelist only (the %s source has its own data)",
                          gen_only[i], from);
    return 0;
}

/* The options of `tiergnn import OUT --from KIND SRC` (tg_cmd_import's rules) into o. */
static int run_import_parse(const tg_args_t *a, tg_import_opts_t *o)
{
    const char *from = tg_args_str(a, "from", NULL);
    if (a->npos != 2 || !from) return tg_err(-EINVAL, "import: expected OUT, --from KIND and SRC");
    tg_import_opts_default(o);
    int rc = run_import_kind(from, &o->kind);
    if (rc) return rc;
    o->src = a->pos[1];
    o->split = tg_args_str(a, "split", NULL);
    if (o->split && o->kind != TG_IMPORT_OGB)
        return tg_err(-EINVAL, "--split applies to --from ogb only");
    o->undirected = tg_args_has(a, "undirected");
    o->dedup = tg_args_has(a, "dedup");
    o->self_loops = tg_args_has(a, "self-loops");
    o->overwrite = tg_args_has(a, "overwrite");
    uint64_t dim, classes;
    rc = run_feat_dtype(tg_args_str(a, "feat-dtype", "f32"), &o->feat_dtype);
    if (!rc) rc = tg_args_size(a, "mem", 0, &o->mem_bytes);
    if (!rc) rc = tg_args_u64(a, "feat-dim", o->feat_dim, &dim);
    if (!rc) rc = tg_args_u64(a, "classes", o->classes, &classes);
    if (!rc) rc = tg_args_u64(a, "seed", o->seed, &o->seed);
    if (!rc) rc = tg_args_double(a, "feat-noise", o->feat_noise, &o->feat_noise);
    if (!rc) rc = tg_args_double(a, "train-frac", o->train_frac, &o->train_frac);
    if (!rc) rc = tg_args_double(a, "valid-frac", o->valid_frac, &o->valid_frac);
    if (!rc) rc = tg_args_double(a, "test-frac", o->test_frac, &o->test_frac);
    if (!rc) rc = run_import_gen_only(a, from, o->kind);
    if (rc) return rc;
    if (dim > (1u << 24) || classes > 65536)
        return tg_err(-EINVAL, "--feat-dim must be <= 16777216 and --classes <= 65536");
    o->feat_dim = (uint32_t)dim;
    o->classes = (uint32_t)classes;
    if (o->mem_bytes && o->mem_bytes < (16u << 20))
        return tg_err(-EINVAL, "--mem must be at least 16M");
    return 0;
}

/* import_(argv): `tiergnn import OUT --from KIND SRC ...`. */
static PyObject *run_import(PyObject *self, PyObject *list)
{
    (void)self;
    run_argv_t av;
    if (run_argv_from(list, &av) < 0) return NULL;
    run_globals_t g;
    int rc = run_globals_save(&g);
    tg_args_t a;
    tg_import_opts_t o;
    if (!rc) rc = run_parse(&a, &av, RUN_IMPORT_SPEC);
    if (!rc) rc = run_import_parse(&a, &o);
    if (!rc) {
        PyThreadState *ts = PyEval_SaveThread();
        rc = tg_import(a.pos[0], &o);
        PyEval_RestoreThread(ts);
    }
    run_globals_restore(&g);
    run_argv_free(&av);
    if (rc < 0) return run_raise(rc);
    Py_RETURN_NONE;
}

/* ---------------------------------------------------------------- datasets */

/* {NAME: {"size": bytes, "crc32": int}} of the seven array files. */
static PyObject *run_meta_files(const tg_meta_t *m)
{
    PyObject *files = PyDict_New();
    for (int i = 0; files && i < TG_FILE_COUNT; i++) {
        PyObject *f = PyDict_New();
        if (!f || run_set(f, "size", run_u64(m->files[i].size)) < 0 ||
            run_set(f, "crc32", run_u64(m->files[i].crc32)) < 0 ||
            run_set(files, tg_file_name((tg_file_id_t)i), Py_NewRef(f)) < 0)
            Py_CLEAR(files);
        Py_XDECREF(f);
    }
    return files;
}

/* meta.txt as the library read it. */
static PyObject *run_meta_dict(const tg_dataset_t *ds)
{
    const tg_meta_t *m = &ds->meta;
    const struct {
        const char *key;
        uint64_t v;
    } counts[] = {{"num_nodes", m->num_nodes}, {"num_edges", m->num_edges},
                  {"feat_dim", m->feat_dim},   {"num_classes", m->num_classes},
                  {"num_train", m->num_train}, {"num_valid", m->num_valid},
                  {"num_test", m->num_test}};
    PyObject *d = PyDict_New();
    int rc = d ? 0 : -1;
    for (size_t i = 0; !rc && i < sizeof counts / sizeof counts[0]; i++)
        rc = run_set(d, counts[i].key, run_u64(counts[i].v));
    if (!rc) rc = run_set(d, "dir", PyUnicode_DecodeFSDefault(ds->dir));
    if (!rc) rc = run_set(d, "format_version", PyLong_FromLong(m->format_version));
    if (!rc) rc = run_set(d, "feat_dtype", PyUnicode_FromString(tg_feat_dtype_name(m->feat_dtype)));
    if (!rc)
        rc = run_set(d, "index_dtype", PyUnicode_FromString(tg_index_dtype_name(m->index_dtype)));
    if (!rc) rc = run_set(d, "multi_label", PyBool_FromLong(m->multi_label));
    if (!rc)
        rc = run_set(d, "source",
                     PyUnicode_DecodeUTF8(m->source, (Py_ssize_t)strlen(m->source), "replace"));
    if (!rc) rc = run_set(d, "files", run_meta_files(m));
    if (rc) Py_CLEAR(d);
    return d;
}

/* dataset_open(path) -> dict: the metadata of a dataset opened by tg_dataset_open (sizes checked
 * against meta.txt), what dataset.py builds its arrays from. */
static PyObject *run_dataset_open(PyObject *self, PyObject *arg)
{
    (void)self;
    PyObject *path = tgpy_path(arg);
    if (!path) return NULL;
    tg_dataset_t *ds = NULL;
    PyThreadState *ts = PyEval_SaveThread();
    int rc = tg_dataset_open(&ds, PyBytes_AS_STRING(path), TG_OPEN_CHECK_SIZES);
    PyEval_RestoreThread(ts);
    Py_DECREF(path);
    if (rc < 0) return run_raise(rc);
    PyObject *d = run_meta_dict(ds);
    tg_dataset_close(ds);
    return d;
}

/* dataset_info(path) -> str: the report of `tiergnn info` (without the derived/ listing). */
static PyObject *run_dataset_info(PyObject *self, PyObject *arg)
{
    (void)self;
    PyObject *path = tgpy_path(arg);
    if (!path) return NULL;
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    if (!f) {
        Py_DECREF(path);
        return PyErr_NoMemory();
    }
    PyThreadState *ts = PyEval_SaveThread();
    int rc = tg_dataset_info(PyBytes_AS_STRING(path), f);
    PyEval_RestoreThread(ts);
    fclose(f);
    Py_DECREF(path);
    PyObject *s = rc < 0 ? run_raise(rc) : PyUnicode_DecodeUTF8(text, (Py_ssize_t)len, "replace");
    free(text);
    return s;
}

/* ---------------------------------------------------------------- module */

static PyMethodDef run_methods[] = {
    {"train_prepare", run_train_prepare, METH_VARARGS,
     "train_prepare(argv, progress=False): a TrainRun of `tiergnn train` options"},
    {"evaluate", run_evaluate, METH_O, "evaluate(argv): `tiergnn eval` options -> dict"},
    {"infer", run_infer, METH_O, "infer(argv): `tiergnn infer` options -> dict"},
    {"generate", run_generate, METH_O, "generate(argv): `tiergnn generate` options"},
    {"import_", run_import, METH_O, "import_(argv): `tiergnn import` options"},
    {"dataset_open", run_dataset_open, METH_O, "dataset_open(path): the dataset's metadata"},
    {"dataset_info", run_dataset_info, METH_O, "dataset_info(path): `tiergnn info`'s report"},
    {NULL, NULL, 0, NULL}};

static struct PyModuleDef run_module = {PyModuleDef_HEAD_INIT,
                                        "_run",
                                        "tiergnn's trainer, evaluation, inference, generator and "
                                        "importers, over the CLI's options",
                                        -1,
                                        run_methods,
                                        NULL,
                                        NULL,
                                        NULL,
                                        NULL};

PyMODINIT_FUNC PyInit__run(void)
{
    if (PyType_Ready(&run_train_type) < 0) return NULL;
    PyObject *m = PyModule_Create(&run_module);
    if (!m) return NULL;
    Py_INCREF(&run_train_type);
    if (PyModule_AddObject(m, "TrainRun", (PyObject *)&run_train_type) < 0) {
        Py_DECREF(&run_train_type);
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
