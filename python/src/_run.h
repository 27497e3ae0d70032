/* _run.h - what the parts of tiergnn._run share (python/src/_run*.c).
 *
 *     _run.c        the module: its table, argv and the process-wide settings a call may change
 *     _run_train.c  TrainRun: tg_train on a thread, its JSON lines through a pipe
 *     _run_eval.c   evaluate and infer
 *     _run_data.c   generate, import, a dataset's metadata and `tiergnn info`
 *
 * Every entry point takes an argv of the CLI's options, which python/tiergnn/run.py makes from
 * keyword arguments (fanouts=[10, 10] -> "--fanouts=10,10"), and parses it with the CLI's own
 * parse step (tg_cli_train_parse, tg_cli_eval_parse, ... of src/cli/cli.h, linked from
 * tiergnn_cli_parse), so that tiergnn.train(ds, out, **opts) and `tiergnn train` with the same
 * options give the same run, checkpoint for checkpoint, and the same messages.
 */
#ifndef TGPY_RUN_H
#define TGPY_RUN_H

#include "tgpy_common.h" /* Python.h, first */

#include <stdint.h>

#include "cli/cli.h"
#include "tiergnn/config.h"
#include "tiergnn/data.h"
#include "tiergnn/engine.h"

/* A private copy of the Python list's strings: the parse step writes into them, and the parsed
 * options point into them for as long as the call (or the run) lasts. */
typedef struct run_argv {
    int argc;
    char **argv;
} run_argv_t;

int run_argv_from(PyObject *list, run_argv_t *av); /* -1 with an exception set */
void run_argv_free(run_argv_t *av);
/* The error of an argv with --help or --help-strategy: those are the CLI's, not a call's. */
int run_refuse_help(void);

/* The process-wide settings an argv may change (--quiet / --verbose, --derived-dir), saved
 * before a call and put back after it, so that one call's options do not outlive it. */
typedef struct run_globals {
    int log_level;
    char *derived_dir;
} run_globals_t;

int run_globals_save(run_globals_t *g);
void run_globals_restore(run_globals_t *g);

/* tiergnn's error rc with this thread's message, as a Python exception; NULL. */
PyObject *run_raise(int rc);
/* d[key] = v, a new reference given up here; -1 with an exception set (v NULL included). */
int run_set(PyObject *d, const char *key, PyObject *v);
PyObject *run_u64(uint64_t v);

/* The module's functions and the TrainRun type. */
extern PyTypeObject run_train_type;
PyObject *run_train_prepare(PyObject *self, PyObject *args);
PyObject *run_evaluate(PyObject *self, PyObject *list);
PyObject *run_infer(PyObject *self, PyObject *list);
PyObject *run_generate(PyObject *self, PyObject *list);
PyObject *run_import(PyObject *self, PyObject *list);
PyObject *run_dataset_open(PyObject *self, PyObject *arg);
PyObject *run_dataset_info(PyObject *self, PyObject *arg);
PyObject *run_dataset_derived(PyObject *self, PyObject *arg);

#endif
