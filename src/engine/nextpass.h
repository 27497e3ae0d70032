/* engine/nextpass - prepare the next training pass while this one trains.
 *
 * A strategy with TG_STRAT_NEXT_PASS gets, in each training pass, a description of the pass
 * that follows (tg_pass_t.next: DiskGNN samples, lays out and packs epoch e + 1 while epoch e
 * trains). This unit is the mechanism: one worker thread (engine/ahead with one item) prepares
 * what that pass needs; the next pass, whatever it is, waits for it; the item is kept for the
 * pass it was made for, keyed by what decides the batches (engine/passkey), and handed over only
 * to that pass:
 *
 *     static int prepare(void *ctx, const tg_pass_t *p, atomic_int *abort, void **item);
 *     static void drop(void *ctx, void *item);
 *     tg_nextpass_opts_t o = {.prepare = prepare, .drop = drop, .ctx = s,
 *                             .who = "diskgnn: the inspector"};
 *     tg_nextpass_open(&np, &o);
 *     in each pass p:
 *       tg_nextpass_wait(np);                       // the preparation started before, if any
 *       it = tg_nextpass_claim(np, p);              // what was prepared for p, or NULL
 *       if (!it) prepare it now;
 *       if (p->next) tg_nextpass_start(np, p->next);  // on the thread while p runs
 *       ... run p with it ...
 *     between passes (an evaluation's budget): tg_nextpass_wait(np) (the item stays held);
 *     tg_nextpass_cancel(np) (drain); tg_nextpass_close(np).
 *
 * Ownership: an item prepare made belongs to the mechanism until tg_nextpass_claim hands it to
 * the caller; one never claimed is dropped (drop, on the caller's thread) when the next
 * preparation starts, at cancel and at close. prepare runs on the worker thread with its own
 * copy of the pass (valid during the call); what else it reads of ctx must be left alone while
 * a preparation runs (from tg_nextpass_start to the return of wait or cancel).
 *
 * Errors: prepare returns 0 with *item set, or a negative code with its message (tg_err) and
 * *item NULL (it frees what it made); -ECANCELED after an abort is not an error. The error
 * reaches the caller at tg_nextpass_wait, with its message (engine/ahead's first-error box);
 * nothing is held then, so the pass prepares its item itself.
 *
 * Threads: the calls from one thread at a time (the strategy's); prepare on the worker.
 *
 * Module: engine/ (the strategy kit), on engine/ahead and engine/passkey. */
#ifndef TG_ENGINE_NEXTPASS_H
#define TG_ENGINE_NEXTPASS_H

#include <stdatomic.h>

#include "engine-impl.h"

typedef struct tg_nextpass tg_nextpass_t;

typedef struct tg_nextpass_opts {
    /* What pass p needs, into *item (see above); abort turns non-zero at cancel or close. */
    int (*prepare)(void *ctx, const tg_pass_t *p, atomic_int *abort, void **item);
    /* Frees an item prepared and never claimed (never called with NULL). */
    void (*drop)(void *ctx, void *item);
    void *ctx;
    const char *who; /* names the preparer in messages ("diskgnn: the inspector") */
} tg_nextpass_opts_t;

/* Creates the mechanism (no thread until tg_nextpass_start). */
int tg_nextpass_open(tg_nextpass_t **out, const tg_nextpass_opts_t *o);
/* Drops an item held from before, keeps a copy of next's description (next may go) and starts
 * preparing it on the worker thread. -EINVAL while a preparation runs (wait or cancel first);
 * -ENOMEM for the copy. */
int tg_nextpass_start(tg_nextpass_t *np, const tg_pass_t *next);
/* Waits for the running preparation, if any: its item is held for its pass. 0 (also when none
 * runs, or it was cancelled), or prepare's error with its message. */
int tg_nextpass_wait(tg_nextpass_t *np);
/* The held item when it was prepared for p (tg_pass_key_match: the same batches), now the
 * caller's; else NULL and the item stays held. Call after tg_nextpass_wait. */
void *tg_nextpass_claim(tg_nextpass_t *np, const tg_pass_t *p);
/* Stops a running preparation (abort, join) and drops what it made and what is held. */
void tg_nextpass_cancel(tg_nextpass_t *np);
/* Cancels and frees. NULL is fine. */
void tg_nextpass_close(tg_nextpass_t *np);

#endif
