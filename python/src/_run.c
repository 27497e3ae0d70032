/* tiergnn._run - the trainer, evaluation, inference, the generator and the importers for Python
 * (python/tiergnn/run.py and dataset.py are the API over it; _run.h lists the module's parts).
 *
 * This part: the module's table, and what every entry point shares: the argv copied from
 * Python, the process-wide settings saved and restored around a call, errors and dicts.
 * Errors raise through tgpy_raise with tiergnn's message.
 */
#include "_run.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "tiergnn/derived.h"
#include "tiergnn/util.h"

/* ---------------------------------------------------------------- argv */

void run_argv_free(run_argv_t *av)
{
    for (int i = 0; av->argv && i < av->argc; i++)
        free(av->argv[i]);
    free(av->argv);
    av->argv = NULL;
    av->argc = 0;
}

int run_argv_from(PyObject *list, run_argv_t *av)
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

int run_refuse_help(void)
{
    return tg_err(-EINVAL, "help and help_strategy are the CLI's (tiergnn COMMAND --help, "
                           "tiergnn strategies NAME)");
}

int run_globals_save(run_globals_t *g)
{
    g->log_level = tg_log_level();
    const char *d = tg_derived_get_dir();
    g->derived_dir = d ? strdup(d) : NULL;
    return d && !g->derived_dir ? -ENOMEM : 0;
}

void run_globals_restore(run_globals_t *g)
{
    tg_log_set_level(g->log_level);
    /* only when the call changed it: setting it races with derived files in use elsewhere */
    const char *now = tg_derived_get_dir(), *was = g->derived_dir;
    if (now != was && (!now || !was || strcmp(now, was))) tg_derived_set_dir(was, 0);
    free(g->derived_dir);
    g->derived_dir = NULL;
}

PyObject *run_raise(int rc)
{
    return tgpy_raise(rc, NULL);
}

int run_set(PyObject *d, const char *key, PyObject *v)
{
    int rc = v ? PyDict_SetItemString(d, key, v) : -1;
    Py_XDECREF(v);
    return rc;
}

PyObject *run_u64(uint64_t v)
{
    return PyLong_FromUnsignedLongLong((unsigned long long)v);
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
    {"dataset_derived", run_dataset_derived, METH_O,
     "dataset_derived(path): the derived/ files of the dataset"},
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
