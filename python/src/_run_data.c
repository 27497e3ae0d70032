/* tiergnn._run's generate and import_ (`tiergnn generate` and `tiergnn import` from Python,
 * parsed by the commands' own tg_cli_generate_parse and tg_cli_import_parse), and a dataset's
 * metadata and `tiergnn info` report for tiergnn.Dataset. All run with the GIL released. */
#include "_run.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tiergnn/derived.h"
#include "tiergnn/util.h"

/* generate(argv): `tiergnn generate OUT ...`. */
PyObject *run_generate(PyObject *self, PyObject *list)
{
    (void)self;
    run_argv_t av;
    if (run_argv_from(list, &av) < 0) return NULL;
    run_globals_t g;
    tg_cli_generate_t p;
    int rc = run_globals_save(&g);
    if (!rc) rc = tg_cli_generate_parse(av.argc, av.argv, &p);
    if (!rc && p.help) rc = run_refuse_help();
    if (!rc) {
        PyThreadState *ts = PyEval_SaveThread();
        rc = tg_generate(p.out, &p.o);
        PyEval_RestoreThread(ts);
    }
    run_globals_restore(&g);
    run_argv_free(&av);
    if (rc < 0) return run_raise(rc);
    Py_RETURN_NONE;
}

/* import_(argv): `tiergnn import OUT --from KIND SRC ...`. */
PyObject *run_import(PyObject *self, PyObject *list)
{
    (void)self;
    run_argv_t av;
    if (run_argv_from(list, &av) < 0) return NULL;
    run_globals_t g;
    tg_cli_import_t p;
    int rc = run_globals_save(&g);
    if (!rc) rc = tg_cli_import_parse(av.argc, av.argv, &p);
    if (!rc && p.help) rc = run_refuse_help();
    if (!rc) {
        PyThreadState *ts = PyEval_SaveThread();
        rc = tg_import(p.out, &p.o);
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
