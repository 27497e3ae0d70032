/* _loader.c - tiergnn._loader: tiergnn.Loader over tiergnn/loader.h (docs/LOADER.md).
 *
 *     loader = Loader(dataset, seeds, fanouts, batch_size, shuffle=True, strategy="auto",
 *                     mem=None, seed=0, sampler="node", rank=0, world_size=1, drop_last=False,
 *                     **strategy_options)
 *     for epoch in range(E):
 *         loader.set_epoch(epoch)           # as DistributedSampler.set_epoch (optional)
 *         for batch in loader: ...          # one epoch per iter()
 *         print(loader.stats())
 *     loader.close()                        # or `with Loader(...) as loader:`
 *
 * The C loader is driven from the thread that iterates (one at a time, as the C API asks) and
 * through the fetch thread (_loader_fetch.c); batches may die on any thread. See _loader.h for
 * the lifetimes.
 */
#define TGPY_LOADER_MAIN
#include "_loader.h"

#include <errno.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* How often a caller waiting for a batch looks for a signal: a Ctrl-C acts within this. */
#define TGPY_POLL_S 0.02

static PyObject *torch_from_numpy; /* torch.from_numpy, or NULL: torch not importable */
static tgpy_loader_t *open_loaders;

/* ---------------------------------------------------------------- shared with the batches */

PyObject *tgpy_loader_out(tgpy_loader_t *loader, PyObject *arr)
{
    if (!arr || !loader->use_torch) return arr;
    PyObject *t = PyObject_CallOneArg(torch_from_numpy, arr);
    Py_DECREF(arr);
    return t;
}

PyObject *tgpy_named_tuple(const char *name)
{
    static PyObject *adj, *block; /* read once tiergnn/__init__.py has defined them */
    PyObject **slot = strcmp(name, "Adj") ? &block : &adj;
    if (!*slot) {
        PyObject *mod = PyImport_ImportModule("tiergnn");
        if (!mod) return NULL;
        *slot = PyObject_GetAttrString(mod, name);
        Py_DECREF(mod);
    }
    return *slot;
}

/* Frees the C loader: the fetch thread's unclaimed batch goes back, then every thread ends. */
static void loader_free_c(tgpy_loader_t *self)
{
    if (!self->L) return;
    if (self->prev_open)
        self->prev_open->next_open = self->next_open;
    else if (open_loaders == self)
        open_loaders = self->next_open;
    if (self->next_open) self->next_open->prev_open = self->prev_open;
    self->next_open = self->prev_open = NULL;
    tg_loader_t *L = self->L;
    self->L = NULL;
    if (self->pid != getpid()) return; /* a forked child's copy: its threads are not here */
    Py_BEGIN_ALLOW_THREADS;
    tgpy_fetch_pause(&self->fetch);
    const tg_loader_batch_t *b = tgpy_fetch_discard(&self->fetch);
    if (b) tg_loader_release(L, b);
    tgpy_fetch_stop(&self->fetch);
    tg_loader_close(L);
    Py_END_ALLOW_THREADS;
}

void tgpy_loader_batch_gone(tgpy_loader_t *loader, const tg_loader_batch_t *b)
{
    /* L is open while a batch lives: close waits for the last one. A forked child's copy of
     * the loader's lock may be held by a thread that is not there: it lets go of the batch. */
    if (loader->pid == getpid()) tg_loader_release(loader->L, b);
    if (--loader->live == 0 && loader->closed) loader_free_c(loader);
}

/* ---------------------------------------------------------------- options */

static int get_u64(PyObject *obj, const char *name, uint64_t *out)
{
    if (!obj) return 0;
    unsigned long long v = PyLong_AsUnsignedLongLong(obj);
    if (v == (unsigned long long)-1 && PyErr_Occurred()) {
        PyErr_Clear();
        PyErr_Format(PyExc_ValueError, "%s: expected an int >= 0", name);
        return -1;
    }
    *out = v;
    return 0;
}

/* fanouts in tiergnn's order (input layer first), or num_neighbors in PyG's (seeds' hop first) */
static int get_fanouts(tg_loader_opts_t *o, PyObject *fanouts, PyObject *num_neighbors)
{
    if ((fanouts && fanouts != Py_None) == (num_neighbors && num_neighbors != Py_None)) {
        PyErr_SetString(PyExc_TypeError, "Loader: give fanouts (input layer first) or "
                                         "num_neighbors (PyG's order, the seeds' hop first)");
        return -1;
    }
    int pyg = !fanouts || fanouts == Py_None;
    PyObject *seq = PySequence_Fast(pyg ? num_neighbors : fanouts, "fanouts: expected a list");
    if (!seq) return -1;
    Py_ssize_t n = PySequence_Fast_GET_SIZE(seq);
    if (n < 1 || n > TG_MAX_LAYERS) {
        Py_DECREF(seq);
        PyErr_Format(PyExc_ValueError, "fanouts: expected 1 to %d layers, got %zd", TG_MAX_LAYERS,
                     n);
        return -1;
    }
    o->num_layers = (int)n;
    for (Py_ssize_t i = 0; i < n; i++) {
        long long v = PyLong_AsLongLong(PySequence_Fast_GET_ITEM(seq, i));
        if (v == -1 && PyErr_Occurred()) {
            Py_DECREF(seq);
            return -1;
        }
        o->fanouts[pyg ? n - 1 - i : i] = v;
    }
    Py_DECREF(seq);
    return 0;
}

/* seeds: a split name, or node ids (any integer array-like); the ids go to *keep (uint64) */
static int get_seeds(tg_loader_opts_t *o, PyObject *seeds, PyObject **keep, PyObject **split)
{
    if (PyUnicode_Check(seeds)) {
        *split = PyUnicode_AsUTF8String(seeds);
        if (!*split) return -1;
        o->split = PyBytes_AS_STRING(*split);
        return 0;
    }
    PyArrayObject *a = (PyArrayObject *)PyArray_FROM_O(seeds);
    if (!a) return -1;
    if (!PyArray_ISINTEGER(a) || PyArray_NDIM(a) > 1) {
        Py_DECREF(a);
        PyErr_SetString(PyExc_TypeError, "seeds: expected a split name or a 1-d array of node ids");
        return -1;
    }
    if (PyArray_ISSIGNED(a)) {
        PyObject *min = PyArray_SIZE(a) ? PyArray_Min(a, NPY_MAXDIMS, NULL) : NULL;
        int neg = min && PyLong_AsLongLong(min) < 0;
        Py_XDECREF(min);
        if (neg) {
            Py_DECREF(a);
            PyErr_SetString(PyExc_ValueError, "seeds: node ids must be >= 0");
            return -1;
        }
    }
    *keep =
        PyArray_FROMANY((PyObject *)a, NPY_UINT64, 0, 1, NPY_ARRAY_CARRAY | NPY_ARRAY_FORCECAST);
    Py_DECREF(a);
    if (!*keep) return -1;
    o->seeds = PyArray_DATA((PyArrayObject *)*keep);
    o->num_seeds = (uint64_t)PyArray_SIZE((PyArrayObject *)*keep);
    return 0;
}

/* Loader's own keyword arguments; every other one is a strategy option */
static char *loader_kwlist[] = {
    "dataset",
    "seeds",
    "fanouts",
    "batch_size",
    "shuffle",
    "strategy",
    "mem",
    "seed",
    "sampler",
    "rank",
    "world_size",
    "drop_last",
    "num_neighbors",
    "max_held",
    "epoch",
    "num_epochs",
    "max_batches",
    "threads",
    "sampler_threads",
    "normalize",
    "verify",
    "verify_reads",
    "numpy",
    NULL,
};

/* kwargs split into the Loader's own (*mine) and the strategy's (*theirs) */
static int split_kwargs(PyObject *kwargs, PyObject **mine, PyObject **theirs)
{
    *mine = PyDict_New();
    *theirs = PyDict_New();
    if (!*mine || !*theirs) return -1;
    PyObject *key, *value;
    Py_ssize_t pos = 0;
    while (kwargs && PyDict_Next(kwargs, &pos, &key, &value)) {
        int own = 0;
        for (char **k = loader_kwlist; *k && !own; k++)
            own = PyUnicode_Check(key) && PyUnicode_CompareWithASCIIString(key, *k) == 0;
        if (PyDict_SetItem(own ? *mine : *theirs, key, value) < 0) return -1;
    }
    return 0;
}

typedef struct init_args {
    PyObject *dataset, *seeds, *fanouts, *batch_size, *mem, *seed, *num_neighbors, *epoch,
        *num_epochs, *max_batches;
    const char *strategy, *sampler;
    int shuffle, drop_last, numpy;
} init_args_t;

static int parse_args(PyObject *args, PyObject *mine, init_args_t *a, tg_loader_opts_t *o)
{
    memset(a, 0, sizeof *a);
    a->shuffle = 1;
    a->strategy = "auto";
    a->sampler = "node";
    o->max_held = 3; /* a for loop holds the previous batch while it takes the next */
    if (!PyArg_ParseTupleAndKeywords(
            args, mine, "OO|OOpzOOziipOiOOOiipppp:Loader", loader_kwlist, &a->dataset, &a->seeds,
            &a->fanouts, &a->batch_size, &a->shuffle, &a->strategy, &a->mem, &a->seed, &a->sampler,
            &o->rank, &o->world_size, &a->drop_last, &a->num_neighbors, &o->max_held, &a->epoch,
            &a->num_epochs, &a->max_batches, &o->threads, &o->sampler_threads, &o->normalize,
            &o->verify, &o->verify_reads, &a->numpy))
        return -1;
    o->shuffle = a->shuffle;
    o->drop_last = a->drop_last;
    o->strategy = a->strategy;
    o->sampler = a->sampler;
    if (a->batch_size == Py_None) a->batch_size = NULL;
    if (get_u64(a->batch_size, "batch_size", &o->batch_size) < 0 ||
        get_u64(a->seed, "seed", &o->seed) < 0 || get_u64(a->epoch, "epoch", &o->epoch) < 0 ||
        get_u64(a->num_epochs, "num_epochs", &o->num_epochs) < 0 ||
        get_u64(a->max_batches, "max_batches", &o->max_batches) < 0 ||
        tgpy_parse_size(a->mem, &o->mem_bytes) < 0 ||
        get_fanouts(o, a->fanouts, a->num_neighbors) < 0)
        return -1;
    return 0;
}

/* the C loader opened (without the GIL) and its fetch thread started */
static int loader_open_c(tgpy_loader_t *self, tg_loader_opts_t *o)
{
    int rc;
    tg_loader_t *L = NULL;
    sigset_t mask;
    Py_BEGIN_ALLOW_THREADS;
    tgpy_signals_block(&mask);
    rc = tg_loader_open(&L, o);
    if (rc == 0) tg_loader_info(L, &self->info);
    if (rc == 0 && (rc = tgpy_fetch_start(&self->fetch, L)) < 0) tg_loader_close(L);
    tgpy_signals_restore(&mask);
    Py_END_ALLOW_THREADS;
    if (rc < 0) return tgpy_raise(rc, NULL), -1;
    self->L = L;
    self->next_epoch = o->epoch;
    self->max_held = o->max_held;
    self->pid = getpid();
    self->next_open = open_loaders;
    if (open_loaders) open_loaders->prev_open = self;
    open_loaders = self;
    return 0;
}

/* 1: hand out torch tensors; 0: NumPy arrays (asked for, or torch not installed); -1: raised
 * (a KeyboardInterrupt while torch imports is not "no torch") */
static int loader_use_torch(int numpy)
{
    if (numpy) return 0;
    if (!torch_from_numpy) {
        PyObject *torch = PyImport_ImportModule("torch");
        if (!torch) {
            if (!PyErr_ExceptionMatches(PyExc_ImportError)) return -1;
            PyErr_Clear(); /* torch is optional: NumPy arrays then */
            return 0;
        }
        torch_from_numpy = PyObject_GetAttrString(torch, "from_numpy");
        Py_DECREF(torch);
        if (!torch_from_numpy) return -1;
    }
    return 1;
}

static int loader_init(tgpy_loader_t *self, PyObject *args, PyObject *kwargs)
{
    if (self->L) {
        PyErr_SetString(PyExc_RuntimeError, "Loader: already open");
        return -1;
    }
    PyObject *mine = NULL, *theirs = NULL, *path = NULL, *seeds = NULL, *split = NULL;
    tgpy_args_t sargs = {0};
    init_args_t a;
    tg_loader_opts_t o;
    tg_loader_opts_default(&o);
    int rc = -1;
    if (split_kwargs(kwargs, &mine, &theirs) < 0 || parse_args(args, mine, &a, &o) < 0) goto out;
    if (!(path = tgpy_path(a.dataset)) || get_seeds(&o, a.seeds, &seeds, &split) < 0 ||
        tgpy_args_from_dict(&sargs, theirs) < 0)
        goto out;
    o.dataset = PyBytes_AS_STRING(path);
    o.strategy_args = sargs.args;
    o.num_strategy_args = sargs.n;
    if ((self->use_torch = loader_use_torch(a.numpy)) < 0) goto out;
    rc = loader_open_c(self, &o);
out:
    tgpy_args_destroy(&sargs);
    Py_XDECREF(mine);
    Py_XDECREF(theirs);
    Py_XDECREF(path);
    Py_XDECREF(seeds);
    Py_XDECREF(split);
    return rc;
}

/* ---------------------------------------------------------------- epochs */

static int loader_check_open(tgpy_loader_t *self)
{
    if (self->L && !self->closed && self->pid == getpid()) return 0;
    if (self->L && !self->closed) {
        char msg[256];
        snprintf(msg, sizeof msg,
                 "Loader: opened by process %d, used in its forked child %d, which has none of "
                 "its threads: open a Loader in each process",
                 (int)self->pid, (int)getpid());
        return tgpy_raise_msg(-ECHILD, msg), -1;
    }
    PyErr_SetString(PyExc_ValueError, "Loader: the loader is closed");
    return -1;
}

/* Starts epoch e on the C loader, handing back a batch the fetch thread took for the old one. */
static int loader_start_epoch(tgpy_loader_t *self, uint64_t e)
{
    int rc;
    char msg[1024];
    tg_loader_t *L = self->L;
    tg_loader_info_t info;
    sigset_t mask;
    self->gen++; /* first: a batch another thread's next takes meanwhile is not this epoch's */
    Py_BEGIN_ALLOW_THREADS;
    tgpy_fetch_pause(&self->fetch);
    const tg_loader_batch_t *b = tgpy_fetch_discard(&self->fetch);
    if (b) tg_loader_release(L, b);
    tgpy_signals_block(&mask); /* the epoch's pass thread is started here */
    rc = tg_loader_set_epoch(L, e);
    tgpy_signals_restore(&mask);
    if (rc < 0) snprintf(msg, sizeof msg, "%s", tg_errmsg());
    tg_loader_info(L, &info);
    tgpy_fetch_resume(&self->fetch);
    Py_END_ALLOW_THREADS;
    self->info = info;
    if (rc < 0) return tgpy_raise_msg(rc, msg), -1;
    return 0;
}

static PyObject *loader_set_epoch(tgpy_loader_t *self, PyObject *arg)
{
    uint64_t e = 0;
    if (loader_check_open(self) < 0 || get_u64(arg, "set_epoch", &e) < 0) return NULL;
    if (loader_start_epoch(self, e) < 0) return NULL;
    self->next_epoch = e;
    Py_RETURN_NONE;
}

typedef struct epoch_iter {
    PyObject ob_base; /* PyObject_HEAD */
    tgpy_loader_t *loader;
    uint64_t gen;
    uint64_t yielded; /* batches of this epoch handed out */
    int done;
} epoch_iter_t;

static PyTypeObject epoch_iter_type;

/* iter(loader): the next epoch (the one set_epoch named, else the one after the last) */
static PyObject *loader_iter(tgpy_loader_t *self)
{
    if (loader_check_open(self) < 0 || loader_start_epoch(self, self->next_epoch) < 0) return NULL;
    self->next_epoch++;
    epoch_iter_t *it = PyObject_New(epoch_iter_t, &epoch_iter_type);
    if (!it) return NULL;
    Py_INCREF(self);
    it->loader = self;
    it->gen = self->gen;
    it->yielded = 0;
    it->done = 0;
    return (PyObject *)it;
}

/* Another Python thread may release a batch; the only thread waiting for itself would not. */
static int other_threads(void)
{
    PyObject *threading = PyImport_ImportModule("threading");
    PyObject *n = threading ? PyObject_CallMethod(threading, "active_count", NULL) : NULL;
    long count = n ? PyLong_AsLong(n) : -1;
    Py_XDECREF(threading);
    Py_XDECREF(n);
    if (count < 0) return -1; /* a KeyboardInterrupt, say, that arrived meanwhile */
    return count > 1;
}

/* tg_loader_next said -EBUSY (max_held held). 0: try again; -1: raised. */
static int held_wait(tgpy_loader_t *self, int tries, const char *msg)
{
    if (tries == 0) { /* batches in reference cycles wait for the collector */
        PyObject *gc = PyImport_ImportModule("gc");
        PyObject *r = gc ? PyObject_CallMethod(gc, "collect", NULL) : NULL;
        Py_XDECREF(gc);
        Py_XDECREF(r);
        return r ? 0 : -1;
    }
    int others = other_threads();
    if (others < 0) return -1;
    if (!others) {
        PyObject *s = PyUnicode_FromFormat(
            "%s; in Python: every batch alive counts until its last reference (the batch, its x, "
            "n_id or blocks, a tensor made from them) dies: del them, or open the Loader with a "
            "larger max_held (now %d)",
            msg, self->max_held);
        if (s) tgpy_raise_msg(-EBUSY, PyUnicode_AsUTF8(s));
        Py_XDECREF(s);
        return -1;
    }
    Py_BEGIN_ALLOW_THREADS; /* another thread may drop one */
    struct timespec ts = {0, 2000000};
    nanosleep(&ts, NULL);
    Py_END_ALLOW_THREADS;
    return PyErr_CheckSignals();
}

static void loader_refresh_info(tgpy_loader_t *self);

/* One bounded wait for the fetch thread's answer, counted in waiters (see _loader.h) */
static int iter_collect(tgpy_loader_t *self, int *rc, const tg_loader_batch_t **b, char *msg,
                        size_t msg_size)
{
    int got;
    atomic_fetch_add(&self->fetch.waiters, 1);
    Py_BEGIN_ALLOW_THREADS;
    got = tgpy_fetch_collect(&self->fetch, TGPY_POLL_S, rc, b, msg, msg_size);
    atomic_fetch_sub(&self->fetch.waiters, 1);
    Py_END_ALLOW_THREADS;
    return got;
}

/* The iterator still current after a wait? Another thread may have closed the loader or
 * started another epoch meanwhile: a batch taken for this one goes back. */
static int iter_current(epoch_iter_t *it, int rc, const tg_loader_batch_t *b)
{
    tgpy_loader_t *self = it->loader;
    if (self->L && !self->closed && it->gen == self->gen) return 1;
    if (rc > 0 && self->L) tg_loader_release(self->L, b);
    return loader_check_open(self) < 0 ? -1 : 0;
}

static PyObject *iter_next(epoch_iter_t *it)
{
    tgpy_loader_t *self = it->loader;
    char msg[1024];
    for (int busy = 0;;) {
        if (loader_check_open(self) < 0) return NULL;
        if (it->done || it->gen != self->gen) return NULL; /* StopIteration */
        int rc = 0, cur;
        const tg_loader_batch_t *b = NULL;
        if (!iter_collect(self, &rc, &b, msg, sizeof msg)) {
            if (PyErr_CheckSignals() < 0) return NULL; /* the request stays out for the next */
            continue;
        }
        if ((cur = iter_current(it, rc, b)) <= 0) return NULL;
        if (rc > 0) {
            it->yielded++;
            return tgpy_batch_new(self, b);
        }
        if (rc == 0) {
            it->done = 1;
            return NULL;
        }
        if (rc != -EBUSY) return tgpy_raise_msg(rc, msg);
        if (held_wait(self, busy++, msg) < 0) return NULL;
    }
}

static void iter_dealloc(epoch_iter_t *it)
{
    Py_DECREF(it->loader);
    PyObject_Free(it);
}

static PyTypeObject epoch_iter_type = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "tiergnn._loader.EpochIterator",
    .tp_basicsize = sizeof(epoch_iter_t),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "One epoch of a tiergnn.Loader; it ends early when the loader starts another.",
    .tp_dealloc = (destructor)iter_dealloc,
    .tp_iter = PyObject_SelfIter,
    .tp_iternext = (iternextfunc)iter_next,
};

/* ---------------------------------------------------------------- figures */

/* self->info again: the epoch's batch counts change with set_epoch */
static void loader_refresh_info(tgpy_loader_t *self)
{
    tg_loader_info_t info;
    Py_BEGIN_ALLOW_THREADS;
    tgpy_fetch_pause(&self->fetch); /* tg_loader_info must not run beside tg_loader_next */
    tg_loader_info(self->L, &info);
    tgpy_fetch_resume(&self->fetch);
    Py_END_ALLOW_THREADS;
    self->info = info;
}

static PyObject *json_loads(const char *s)
{
    PyObject *json = PyImport_ImportModule("json");
    PyObject *d = json ? PyObject_CallMethod(json, "loads", "s", s) : NULL;
    Py_XDECREF(json);
    return d;
}

/* stats(): the current epoch's figures, the keys of tiergnn train's JSON epoch line */
static PyObject *loader_stats(tgpy_loader_t *self, PyObject *unused)
{
    if (!self->L) return loader_check_open(self), NULL;
    tg_loader_stats_t *st = PyMem_Malloc(sizeof *st); /* several KiB */
    if (!st) return PyErr_NoMemory();
    char *js = NULL;
    tg_loader_stats(self->L, st);
    int rc = tg_loader_stats_json(st, &js);
    PyMem_Free(st);
    if (rc < 0) return tgpy_raise(rc, NULL);
    PyObject *d = json_loads(js);
    free(js);
    return d;
}

/* info(): what the loader is (tg_loader_info_t), the batch counts of the current epoch */
static PyObject *loader_info(tgpy_loader_t *self, PyObject *unused)
{
    if (!self->L) return loader_check_open(self), NULL;
    tg_loader_info_t *i = &self->info;
    loader_refresh_info(self);
    return Py_BuildValue(
        "{s:s,s:s,s:K,s:I,s:I,s:I,s:O,s:O,s:K,s:K,s:K,s:K,s:K,s:i,s:K,s:K}", "strategy",
        i->strategy, "sampler", i->sampler, "num_nodes", (unsigned long long)i->num_nodes,
        "feat_dim", i->dim, "label_width", i->label_width, "num_classes", i->num_classes,
        "multi_label", i->multi_label ? Py_True : Py_False, "whole_graph",
        i->whole_graph ? Py_True : Py_False, "num_seeds", (unsigned long long)i->num_seeds, "epoch",
        (unsigned long long)i->epoch, "epoch_batches", (unsigned long long)i->epoch_batches,
        "rank_batches", (unsigned long long)i->rank_batches, "first_batch",
        (unsigned long long)i->first_batch, "max_held", i->max_held, "slot_bytes",
        (unsigned long long)i->slot_bytes, "mem_bytes", (unsigned long long)i->mem_bytes);
}

/* len(loader): the batches one epoch yields on this rank */
static Py_ssize_t loader_len(tgpy_loader_t *self)
{
    if (loader_check_open(self) < 0) return -1;
    loader_refresh_info(self);
    return (Py_ssize_t)self->info.rank_batches;
}

/* ---------------------------------------------------------------- closing */

static PyObject *loader_close(tgpy_loader_t *self, PyObject *unused)
{
    self->closed = 1;
    self->gen++;
    if (self->live == 0) loader_free_c(self); /* else the last batch to die frees it */
    Py_RETURN_NONE;
}

static PyObject *loader_enter(tgpy_loader_t *self, PyObject *unused)
{
    if (loader_check_open(self) < 0) return NULL;
    Py_INCREF(self);
    return (PyObject *)self;
}

static PyObject *loader_exit(tgpy_loader_t *self, PyObject *args)
{
    return loader_close(self, NULL);
}

static void loader_dealloc(tgpy_loader_t *self)
{
    if (self->weakrefs) PyObject_ClearWeakRefs((PyObject *)self);
    loader_free_c(self); /* no batch or iterator is left: they hold the loader */
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static PyObject *loader_get_closed(tgpy_loader_t *self, void *closure)
{
    return PyBool_FromLong(self->closed || !self->L);
}

static PyObject *loader_get_strategy(tgpy_loader_t *self, void *closure)
{
    return self->L ? PyUnicode_FromString(self->info.strategy) : Py_NewRef(Py_None);
}

static PyObject *loader_get_live(tgpy_loader_t *self, void *closure)
{
    return PyLong_FromSsize_t(self->live);
}

static PyMethodDef loader_methods[] = {
    {"set_epoch", (PyCFunction)loader_set_epoch, METH_O,
     "set_epoch(e): the next iter() yields epoch e (DistributedSampler.set_epoch)"},
    {"stats", (PyCFunction)loader_stats, METH_NOARGS,
     "stats() -> dict: the current epoch's figures (I/O, hit ratios, tiers, times)"},
    {"info", (PyCFunction)loader_info, METH_NOARGS, "info() -> dict: what the loader is"},
    {"close", (PyCFunction)loader_close, METH_NOARGS,
     "close(): no more batches; threads, files and memory go once no batch is alive"},
    {"__enter__", (PyCFunction)loader_enter, METH_NOARGS, NULL},
    {"__exit__", (PyCFunction)loader_exit, METH_VARARGS, NULL},
    {NULL, NULL, 0, NULL},
};

static PyGetSetDef loader_getset[] = {
    {"closed", (getter)loader_get_closed, NULL, "close() was called", NULL},
    {"strategy", (getter)loader_get_strategy, NULL, "the strategy that runs", NULL},
    {"live_batches", (getter)loader_get_live, NULL, "Batch objects alive", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PySequenceMethods loader_as_sequence = {.sq_length = (lenfunc)loader_len};

static PyTypeObject loader_type = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "tiergnn.Loader",
    .tp_basicsize = sizeof(tgpy_loader_t),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE,
    .tp_doc =
        "Loader(dataset, seeds, fanouts, batch_size=1024, shuffle=True, strategy='auto', "
        "mem=None, seed=0, sampler='node', rank=0, world_size=1, drop_last=False, "
        "**strategy_options)\n\n"
        "tiergnn's batches for a model of your own: a strategy of `tiergnn strategies` samples "
        "and gathers them under the `mem` budget (tiergnn/loader.h, docs/LOADER.md).\n\n"
        "dataset: a dataset directory, or an object with .path (tiergnn.Dataset).\n"
        "seeds: a split name ('train', 'valid', 'test') or an integer array of node ids.\n"
        "fanouts: per layer, input layer first (tiergnn's order; -1 = every neighbour); or "
        "num_neighbors= in PyG's order (the seeds' hop first).\n"
        "mem: bytes (int) or a size as '1200M': the whole process's budget, the interpreter and "
        "torch included, the model's tensors excepted.\n"
        "strategy_options: the strategy's options, dashes as underscores "
        "(disk_budget='4G' is --disk-budget 4G; True for a flag).\n"
        "Also: max_held=3 (batches alive at once), epoch=0 (the first epoch), num_epochs=0, "
        "max_batches=0 (per epoch, 0 = all), threads=1, sampler_threads=-1, normalize, verify, "
        "verify_reads, numpy=False (NumPy arrays even where torch is importable).\n\n"
        "Each iter() is one epoch: the epoch set_epoch(e) named, else the one after the last. "
        "stats() gives the epoch's figures, info() what the loader is, len() the batches of an "
        "epoch on this rank (rank r of world_size K yields batches [r*m, (r+1)*m), "
        "m = n // K).\n\n"
        "Lifetimes: a Batch's arrays (x, n_id, the blocks' indptr and weights) are the "
        "loader's memory, no copy; the batch goes back to the loader when the last reference "
        "to it or to any of them dies, on any thread. Taking a batch while max_held are alive "
        "waits for another thread to drop one, or raises TierGNNError when no other thread "
        "could. close() (or leaving a with block) ends the iteration at once; the threads, "
        "files and memory go when the last batch dies.",
    .tp_new = PyType_GenericNew,
    .tp_init = (initproc)loader_init,
    .tp_dealloc = (destructor)loader_dealloc,
    .tp_iter = (getiterfunc)loader_iter,
    .tp_methods = loader_methods,
    .tp_getset = loader_getset,
    .tp_as_sequence = &loader_as_sequence,
    .tp_weaklistoffset = offsetof(tgpy_loader_t, weakrefs),
};

/* atexit: the loaders still open end their threads before the interpreter goes; one with
 * batches alive stays (its batches' memory must stay valid) and the process's exit ends it */
static PyObject *close_all(PyObject *mod, PyObject *unused)
{
    tgpy_loader_t *next;
    for (tgpy_loader_t *l = open_loaders; l; l = next) {
        next = l->next_open;
        if (l->live == 0) loader_close(l, NULL);
    }
    Py_RETURN_NONE;
}

static PyMethodDef module_methods[] = {
    {"_close_all", close_all, METH_NOARGS, "closes every open loader without live batches"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef loader_module = {
    PyModuleDef_HEAD_INIT,
    .m_name = "tiergnn._loader",
    .m_doc = "tiergnn's pull-model batch loader (tiergnn/loader.h)",
    .m_size = -1,
    .m_methods = module_methods,
};

static int register_atexit(PyObject *mod)
{
    PyObject *atexit = PyImport_ImportModule("atexit");
    PyObject *fn = PyObject_GetAttrString(mod, "_close_all");
    PyObject *r = atexit && fn ? PyObject_CallMethod(atexit, "register", "O", fn) : NULL;
    Py_XDECREF(atexit);
    Py_XDECREF(fn);
    Py_XDECREF(r);
    return r ? 0 : -1;
}

PyMODINIT_FUNC PyInit__loader(void)
{
    import_array();
    if (PyType_Ready(&loader_type) < 0 || PyType_Ready(&tgpy_batch_type) < 0 ||
        PyType_Ready(&epoch_iter_type) < 0)
        return NULL;
    PyObject *mod = PyModule_Create(&loader_module);
    if (!mod) return NULL;
    if (PyModule_AddObjectRef(mod, "Loader", (PyObject *)&loader_type) < 0 ||
        PyModule_AddObjectRef(mod, "Batch", (PyObject *)&tgpy_batch_type) < 0 ||
        register_atexit(mod) < 0) {
        Py_DECREF(mod);
        return NULL;
    }
    return mod;
}
