/* tiergnn._run's TrainRun: `tiergnn train` from Python.
 *
 * tg_train runs on a thread of its own with every signal blocked (so Ctrl-C reaches the
 * interpreter's threads), its JSON lines going into a pipe that readline() reads with the GIL
 * released, waking every RUN_POLL_MS to run the interpreter's signal handlers; stop() sets
 * tg_train_opts_t.stop, join() reads the pipe to its end and joins the thread. An object
 * dropped while its run goes on stops and joins it first: no thread outlives its TrainRun.
 * A run's error is recorded on its thread (tg_errmsg is per thread) and raised by join().
 */
#include "_run.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tiergnn/util.h"

typedef struct run_train {
    PyObject ob_base; /* PyObject_HEAD */
    run_argv_t av;
    tg_cli_train_t p; /* the parsed options, pointing into av and into p */
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

static void *run_train_main(void *arg)
{
    run_train_t *t = arg;
    t->rc = tg_train(&t->p.o, &t->res);
    if (t->rc < 0) snprintf(t->msg, sizeof t->msg, "%s", tg_errmsg());
    fclose(t->json); /* end of file for readline */
    t->json = NULL;
    return NULL;
}

/* train_prepare(argv, progress): parses the options of `tiergnn train` (DATASET and --out
 * included); the run starts with start(). */
PyObject *run_train_prepare(PyObject *self, PyObject *args)
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
    if (!rc) rc = tg_cli_train_parse(t->av.argc, t->av.argv, &t->p);
    if (!rc && t->p.help) rc = run_refuse_help();
    if (rc < 0) {
        run_raise(rc);
        Py_DECREF(t);
        return NULL;
    }
    t->p.o.progress = progress;
    t->p.o.json = NULL;
    t->p.o.stop = &t->stop;
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
    t->p.o.json = t->json;
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
    if (t->reading) {
        PyErr_SetString(PyExc_RuntimeError, "join() while another thread is in readline()");
        return -1;
    }
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
    if (t->rfd >= 0) close(t->rfd); /* a writer still at it gets EPIPE (SIGPIPE is blocked) */
    if (t->state == 1) {            /* reading failed: the thread still must be joined */
        run_join_thread(t->thread);
        t->state = 2;
    }
    if (t->have_globals) run_globals_restore(&t->globals);
    tg_cli_train_destroy(&t->p);
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

PyTypeObject run_train_type = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "tiergnn._run.TrainRun",
    .tp_basicsize = sizeof(run_train_t),
    .tp_dealloc = (destructor)run_train_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "a training run (tiergnn.train is the API over it)",
    .tp_methods = run_train_methods,
    .tp_getset = run_train_getset,
};
