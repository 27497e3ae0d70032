/* tgpy_common.c - errors and argument conversions shared by the package's extension modules. */
#include "tgpy_common.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "tiergnn/util.h"

PyObject *tgpy_error_class(void)
{
    /* the class lives in tiergnn._errors, so every module raises the same one */
    PyObject *mod = PyImport_ImportModule("tiergnn._errors");
    if (!mod) return NULL;
    PyObject *cls = PyObject_GetAttrString(mod, "TierGNNError");
    Py_DECREF(mod);
    if (!cls) return NULL;
    Py_DECREF(cls); /* the module keeps it alive */
    return cls;
}

PyObject *tgpy_raise_msg(int rc, const char *msg)
{
    PyObject *mod = PyImport_ImportModule("tiergnn._errors");
    if (!mod) return NULL;
    PyObject *exc = PyObject_CallMethod(mod, "_make", "is", rc, msg && *msg ? msg : strerror(-rc));
    Py_DECREF(mod);
    if (!exc) return NULL;
    PyErr_SetObject((PyObject *)Py_TYPE(exc), exc);
    Py_DECREF(exc);
    return NULL;
}

PyObject *tgpy_raise(int rc, const char *context)
{
    if (!context) return tgpy_raise_msg(rc, tg_errmsg());
    PyObject *s = PyUnicode_FromFormat("%s: %s", context, tg_errmsg());
    if (!s) return NULL;
    PyObject *r = tgpy_raise_msg(rc, PyUnicode_AsUTF8(s));
    Py_DECREF(s);
    return r;
}

int tgpy_parse_size(PyObject *obj, uint64_t *out)
{
    *out = 0;
    if (!obj || obj == Py_None) return 0;
    if (PyLong_Check(obj)) {
        unsigned long long v = PyLong_AsUnsignedLongLong(obj);
        if (v == (unsigned long long)-1 && PyErr_Occurred()) {
            PyErr_SetString(PyExc_ValueError, "a size in bytes must be an int >= 0");
            return -1;
        }
        *out = v;
        return 0;
    }
    if (!PyUnicode_Check(obj)) {
        PyErr_Format(PyExc_TypeError, "a size must be an int or a string as '1200M', not %s",
                     Py_TYPE(obj)->tp_name);
        return -1;
    }
    const char *s = PyUnicode_AsUTF8(obj);
    if (!s) return -1;
    int rc = tg_parse_size(s, out);
    if (rc < 0) return tgpy_raise(rc, NULL), -1;
    return 0;
}

PyObject *tgpy_path(PyObject *obj)
{
    PyObject *p = NULL;
    if (!PyUnicode_Check(obj) && !PyBytes_Check(obj) && PyObject_HasAttrString(obj, "path")) {
        PyObject *attr = PyObject_GetAttrString(obj, "path");
        if (!attr) return NULL;
        int ok = PyUnicode_FSConverter(attr, &p);
        Py_DECREF(attr);
        return ok ? p : NULL;
    }
    return PyUnicode_FSConverter(obj, &p) ? p : NULL;
}

/* "disk_budget" -> b"disk-budget" */
static PyObject *option_name(PyObject *key)
{
    if (!PyUnicode_Check(key)) {
        PyErr_SetString(PyExc_TypeError, "option names must be strings");
        return NULL;
    }
    PyObject *dashed = PyObject_CallMethod(key, "replace", "ss", "_", "-");
    if (!dashed) return NULL;
    PyObject *b = PyUnicode_AsUTF8String(dashed);
    Py_DECREF(dashed);
    return b;
}

/* The value's bytes (NULL *out for a flag); 1 to leave the option out, 0, or -1. */
static int option_value(PyObject *v, PyObject **out)
{
    *out = NULL;
    if (v == Py_None || v == Py_False) return 1;
    if (v == Py_True) return 0;
    PyObject *s = PyObject_Str(v);
    if (!s) return -1;
    *out = PyUnicode_AsUTF8String(s);
    Py_DECREF(s);
    return *out ? 0 : -1;
}

static int args_add(tgpy_args_t *a, PyObject *key, PyObject *value)
{
    PyObject *name = option_name(key), *val = NULL;
    if (!name) return -1;
    int rc = option_value(value, &val);
    if (rc != 0 || PyList_Append(a->keep, name) < 0 || (val && PyList_Append(a->keep, val) < 0)) {
        Py_DECREF(name);
        Py_XDECREF(val);
        return rc > 0 ? 0 : -1;
    }
    a->args[a->n].name = PyBytes_AS_STRING(name);
    a->args[a->n].value = val ? PyBytes_AS_STRING(val) : NULL;
    a->n++;
    Py_DECREF(name); /* keep holds them */
    Py_XDECREF(val);
    return 0;
}

int tgpy_args_from_dict(tgpy_args_t *a, PyObject *kwargs)
{
    memset(a, 0, sizeof *a);
    Py_ssize_t n = kwargs ? PyDict_Size(kwargs) : 0;
    a->keep = PyList_New(0);
    a->args = calloc(n ? (size_t)n : 1, sizeof *a->args);
    if (!a->keep || !a->args) {
        tgpy_args_destroy(a);
        if (!PyErr_Occurred()) PyErr_NoMemory();
        return -1;
    }
    PyObject *key, *value;
    Py_ssize_t pos = 0;
    while (kwargs && PyDict_Next(kwargs, &pos, &key, &value)) {
        if (args_add(a, key, value) < 0) {
            tgpy_args_destroy(a);
            return -1;
        }
    }
    return 0;
}

void tgpy_args_destroy(tgpy_args_t *a)
{
    free(a->args);
    Py_XDECREF(a->keep);
    memset(a, 0, sizeof *a);
}

void tgpy_signals_block(sigset_t *old)
{
    sigset_t all;
    sigfillset(&all);
    pthread_sigmask(SIG_BLOCK, &all, old);
}

void tgpy_signals_restore(const sigset_t *old)
{
    pthread_sigmask(SIG_SETMASK, old, NULL);
}
