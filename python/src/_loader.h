/* _loader.h - the parts of tiergnn._loader: the Loader (_loader.c), its batches
 * (_loader_batch.c) and the thread that waits in tg_loader_next for it (_loader_fetch.c).
 *
 * Lifetimes: a Batch holds a reference to its Loader and lends its arrays (x, n_id, the blocks'
 * indptr and weights) as NumPy arrays whose base is the Batch, so the batch's slot stays held as
 * long as any of them lives; the last reference gives it back (tg_loader_release, which the C
 * API allows from any thread). Loader.close() stops the iteration at once but frees the C
 * loader (tg_loader_close) only when no batch is alive: until then the live batches' memory
 * stays valid and the loader's pass waits for free slots. Every object here is touched with the
 * GIL held; the fetch thread never touches Python.
 */
#ifndef TGPY_LOADER_H
#define TGPY_LOADER_H

#include "tgpy_common.h"

#include <pthread.h>
#include <stdatomic.h>
#include <sys/types.h>

/* One NumPy API table for the module's files: _loader.c imports it, the others use it. */
#define PY_ARRAY_UNIQUE_SYMBOL tgpy_loader_numpy_api
#ifndef TGPY_LOADER_MAIN
#define NO_IMPORT_ARRAY
#endif
#include <numpy/arrayobject.h>

#include "tiergnn/loader.h"

/* One thread per loader calls tg_loader_next, so that the caller's wait is a bounded wait on a
 * condition between which it checks for signals (KeyboardInterrupt): tg_loader_next itself
 * cannot be interrupted. Requests are one at a time; an answer not collected (the caller was
 * interrupted) is kept for the next collect. The C loader's other calls (set_epoch, info,
 * close) must not run beside tg_loader_next: the caller pauses the thread around them. */
typedef struct tgpy_fetch {
    pthread_t thr;
    int started;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    tg_loader_t *L;
    int want, have, quit; /* a request is out; its answer is ready; the thread is to end */
    int running;          /* in tg_loader_next now */
    int paused;           /* a caller paused it: no tg_loader_next starts, no other pause */
    atomic_int waiters;   /* callers in tgpy_fetch_collect: stop waits for them to leave */
    int rc;               /* the answer: tg_loader_next's return, b and the message */
    const tg_loader_batch_t *b;
    char msg[1024];
} tgpy_fetch_t;

int tgpy_fetch_start(tgpy_fetch_t *f, tg_loader_t *L);
/* Asks for the next batch unless a request is out, then waits up to timeout_s for the answer:
 * 1 with *rc, *b and msg, or 0 on timeout or once stopping (the request stays out). Without
 * the GIL; the caller counts itself in waiters while it still holds the GIL, and out after. */
int tgpy_fetch_collect(tgpy_fetch_t *f, double timeout_s, int *rc, const tg_loader_batch_t **b,
                       char *msg, size_t msg_size);
/* Waits until no tg_loader_next runs and starts none until tgpy_fetch_resume; an answer that
 * came stays for the next collect. Without the GIL. */
void tgpy_fetch_pause(tgpy_fetch_t *f);
void tgpy_fetch_resume(tgpy_fetch_t *f);
/* While paused: drops the request and its answer, returning the answer's batch (NULL: none)
 * for the caller to release. */
const tg_loader_batch_t *tgpy_fetch_discard(tgpy_fetch_t *f);
/* Ends the thread (paused or not; after tgpy_fetch_discard) and, once no caller waits in
 * tgpy_fetch_collect, frees the lock. Without the GIL. */
void tgpy_fetch_stop(tgpy_fetch_t *f);

typedef struct tgpy_loader {
    PyObject ob_base; /* PyObject_HEAD */
    tg_loader_t *L;   /* NULL once closed */
    tgpy_fetch_t fetch;
    tg_loader_info_t info;
    Py_ssize_t live;     /* Batch objects alive */
    int closed;          /* close() asked: no more batches; L closes when live is 0 */
    int use_torch;       /* arrays as torch tensors */
    uint64_t next_epoch; /* the epoch the next iter() starts */
    uint64_t gen;        /* bumped by iter() and set_epoch(): older iterators end */
    int max_held;
    pid_t pid; /* the process that opened it: a forked child has none of its threads */
    struct tgpy_loader *next_open, *prev_open; /* the open loaders, closed at exit */
    PyObject *weakrefs;
} tgpy_loader_t;

typedef struct tgpy_batch {
    PyObject ob_base;      /* PyObject_HEAD */
    tgpy_loader_t *loader; /* a strong reference */
    const tg_loader_batch_t *b;
    PyObject *y, *adjs; /* copies, made on first use (they do not refer to the batch) */
} tgpy_batch_t;

extern PyTypeObject tgpy_batch_type;
/* A new Batch over b, which the loader lent; on failure b is released. */
PyObject *tgpy_batch_new(tgpy_loader_t *loader, const tg_loader_batch_t *b);
/* The array as the loader hands arrays out: a torch.Tensor over it (no copy) when the loader
 * uses torch, else arr itself. Steals arr. */
PyObject *tgpy_loader_out(tgpy_loader_t *loader, PyObject *arr);
/* A batch died: its slot goes back; the last one closes a closed loader. */
void tgpy_loader_batch_gone(tgpy_loader_t *loader, const tg_loader_batch_t *b);
/* Adj and Block, the named tuples of tiergnn/__init__.py (borrowed), or NULL and an error. */
PyObject *tgpy_named_tuple(const char *name);

#endif
