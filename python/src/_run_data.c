/* tiergnn._run's generate and import_ (`tiergnn generate` and `tiergnn import` from Python,
 * their options parsed by tg_cmd_generate's and tg_cmd_import's rules), and a dataset's
 * metadata and `tiergnn info` report for tiergnn.Dataset. All run with the GIL released. */
#include "_run.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tiergnn/derived.h"
#include "tiergnn/util.h"

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
PyObject *run_generate(PyObject *self, PyObject *list)
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
PyObject *run_import(PyObject *self, PyObject *list)
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
PyObject *run_dataset_open(PyObject *self, PyObject *arg)
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
PyObject *run_dataset_info(PyObject *self, PyObject *arg)
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

static const char *run_derived_state(tg_derived_state_t s)
{
    static const char *const names[] = {"valid", "stale", "temp (dead)", "temp (live)", "other"};
    return (unsigned)s < sizeof names / sizeof names[0] ? names[s] : "?";
}

/* {"dir": where, "entries": [{"name", "kind", "params", "bytes", "state", "why"}]}. */
static PyObject *run_derived_dir(const tg_dataset_t *ds, const char *where)
{
    tg_derived_entry_t *v = NULL;
    size_t n = 0;
    int rc = tg_derived_list(ds, where, &v, &n);
    if (rc < 0) return run_raise(rc);
    PyObject *list = PyList_New(0), *d = PyDict_New();
    for (size_t i = 0; list && i < n && !rc; i++) {
        PyObject *e = PyDict_New();
        rc = e ? 0 : -1;
        if (!rc) rc = run_set(e, "name", PyUnicode_DecodeFSDefault(v[i].name));
        if (!rc) rc = run_set(e, "kind", PyUnicode_FromString(v[i].kind));
        if (!rc) rc = run_set(e, "params", PyUnicode_FromString(v[i].params));
        if (!rc) rc = run_set(e, "bytes", run_u64(v[i].bytes));
        if (!rc) rc = run_set(e, "state", PyUnicode_FromString(run_derived_state(v[i].state)));
        if (!rc) rc = run_set(e, "why", PyUnicode_FromString(v[i].why));
        if (!rc) rc = PyList_Append(list, e);
        Py_XDECREF(e);
    }
    free(v);
    rc = rc || !list || !d ? -1 : run_set(d, "dir", PyUnicode_DecodeFSDefault(where));
    if (!rc) rc = run_set(d, "entries", Py_NewRef(list));
    Py_XDECREF(list);
    if (rc) Py_CLEAR(d);
    return d;
}

/* dataset_derived(path) -> [dict]: the derived/ listing of `tiergnn info`: the directory runs
 * write derived files to, then DATASET/derived when that is another (runs still read it). */
PyObject *run_dataset_derived(PyObject *self, PyObject *arg)
{
    (void)self;
    PyObject *path = tgpy_path(arg);
    if (!path) return NULL;
    tg_dataset_t *ds = NULL;
    int rc = tg_dataset_open(&ds, PyBytes_AS_STRING(path), 0);
    Py_DECREF(path);
    if (rc < 0) return run_raise(rc);
    char where[4096], own[4096];
    tg_derived_dir(ds, NULL, where, sizeof where);
    tg_derived_own_dir(ds, own, sizeof own);
    PyObject *list = PyList_New(0), *one = list ? run_derived_dir(ds, where) : NULL;
    rc = one ? PyList_Append(list, one) : -1;
    Py_XDECREF(one);
    if (!rc && strcmp(where, own)) {
        one = run_derived_dir(ds, own);
        rc = one ? PyList_Append(list, one) : -1;
        Py_XDECREF(one);
    }
    tg_dataset_close(ds);
    if (rc) Py_CLEAR(list);
    return list;
}
