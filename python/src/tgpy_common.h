/* tgpy_common.h - what every extension module of the tiergnn package shares: tiergnn's errors
 * as Python exceptions, and the conversions of Python arguments to the C API's (sizes, paths,
 * strategy options).
 *
 * Every python/src/_NAME.c is the module tiergnn._NAME, linked with tgpy_common.c and
 * libtiergnn.so; python/src/_NAME_PART.c files are linked into tiergnn._NAME too. A module
 * includes Python.h through this header, so that PY_SSIZE_T_CLEAN comes first.
 *
 * Errors: a C call that failed with rc < 0 becomes
 *     if (rc < 0) return tgpy_raise(rc, NULL);           // tiergnn's message, tg_errmsg()
 * which raises tiergnn.TierGNNError (RuntimeError) with attribute errno = -rc, or its
 * subclasses that are also FileNotFoundError (-ENOENT) and MemoryError (-ENOMEM). tg_errmsg()
 * is the calling thread's: a call made on another thread passes its copied message to
 * tgpy_raise_msg. Both return NULL, so a function can return them directly.
 */
#ifndef TGPY_COMMON_H
#define TGPY_COMMON_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <signal.h>
#include <stdint.h>

#include "tiergnn/engine.h"

/* Raises the exception for rc (< 0) with tiergnn's message (this thread's tg_errmsg()),
 * prefixed by "context: " when context is not NULL. Returns NULL. */
PyObject *tgpy_raise(int rc, const char *context);
/* Raises the exception for rc with the message msg (copied from the thread that failed). */
PyObject *tgpy_raise_msg(int rc, const char *msg);
/* tiergnn.TierGNNError (a borrowed reference), or NULL with an ImportError set. */
PyObject *tgpy_error_class(void);

/* A byte size: None -> 0, an int >= 0, or a string as the CLI takes it ("1200M", "4G"). 0 or
 * -1 with an exception set (TierGNNError with tg_parse_size's message for a bad string). */
int tgpy_parse_size(PyObject *obj, uint64_t *out);
/* A path: str, bytes or os.PathLike, or an object with a .path attribute of those (a
 * tiergnn.Dataset). A new bytes object (the file system encoding), or NULL with an exception. */
PyObject *tgpy_path(PyObject *obj);

/* Signals go to the interpreter's thread, never to the library's: a C call that starts threads
 * (a loader's open or set_epoch, a run) runs between these two, so its threads inherit a mask
 * that blocks every signal, and a Ctrl-C wakes the thread whose Python handler must run. */
void tgpy_signals_block(sigset_t *old);
void tgpy_signals_restore(const sigset_t *old);

/* Strategy or command options given as keyword arguments: disk_budget="4G" is the CLI's
 * --disk-budget 4G, {"disk-budget", "4G"}; True is a flag (value NULL), False and None leave
 * the option out, numbers are written as str() writes them. The strings live in keep. */
typedef struct tgpy_args {
    tg_strategy_arg_t *args;
    int n;
    PyObject *keep; /* a list of the bytes objects args point into */
} tgpy_args_t;

/* Converts the items of kwargs (a dict, NULL for none). 0 or -1 with an exception set. */
int tgpy_args_from_dict(tgpy_args_t *a, PyObject *kwargs);
void tgpy_args_destroy(tgpy_args_t *a);

#endif
