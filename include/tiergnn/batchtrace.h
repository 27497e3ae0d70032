/* tiergnn/batchtrace.h - a run of sampled batches, spilled, with their access trace.
 *
 * The step every strategy that plans over the future takes first (Ginex's superbatch, DiskGNN's
 * epoch, a profile of the first batches): take the next batches of a loader, write each to a
 * spill file to read back when it trains, and keep only what the planner needs in RAM: the
 * batches' input node ids in X order, one after the other, where each batch starts, and what
 * its sampling took.
 *
 *     tg_btrace_t tr;
 *     tg_btrace_init(&tr, &run->budget, "ginex: superbatch trace");
 *     tg_btrace_clear(&tr);                                     // a new run of batches
 *     rc = tg_btrace_sample(&tr, loader, S, spill, &abort);     // S batches: spilled, traced
 *     ... plan over tr.ids[tr.off[j] .. tr.off[j + 1]) for batch j < tr.n ...
 *     tg_btrace_free(&tr);
 *
 * Memory: every array is reserved against the budget given at init (NULL: none) under the name
 * given there, grown by half again when it must grow (tg_btrace_reserve sizes it ahead from a
 * hint), and released when freed; tg_btrace_clear keeps the room for the next run. The caller
 * owns the struct; its arrays are valid until the next call that adds to it, clear excepted.
 * Node ids must fit 32 bits (the planners' trace type). Not thread-safe: one thread at a time.
 */
#ifndef TIERGNN_BATCHTRACE_H
#define TIERGNN_BATCHTRACE_H

#include <stdatomic.h>
#include <stdint.h>

#include "tiergnn/graph.h"
#include "tiergnn/util.h"

typedef struct tg_btrace {
    uint32_t *ids;    /* (off[n]) the batches' input node ids, batch after batch, in X order */
    uint64_t *off;    /* (n + 1) batch j's ids are ids[off[j] .. off[j + 1]); off[0] = 0 */
    double *sample_s; /* (n) seconds the sampler took for batch j */
    uint64_t n;       /* batches traced */
    /* private */
    uint64_t ids_cap, n_cap;   /* room: ids; batches (off holds one more) */
    uint64_t ids_held, n_held; /* budget reserved for ids; for off and sample_s */
    int ids_freed;             /* tg_btrace_free_ids was called */
    tg_budget_t *budget;
    const char *what;
} tg_btrace_t;

/* An empty trace; budget may be NULL; what names it in errors and in the budget (a literal:
 * kept, not copied). Allocates nothing. */
void tg_btrace_init(tg_btrace_t *t, tg_budget_t *budget, const char *what);
/* Room for `batches` batches and `ids` ids in all (a hint: adding more still grows). */
int tg_btrace_reserve(tg_btrace_t *t, uint64_t batches, uint64_t ids);
/* Appends batch b's node ids and its sampling time. -EOVERFLOW for an id of 2^32 or more. */
int tg_btrace_add(tg_btrace_t *t, const tg_batch_t *b, double sample_s);
/* The step: takes the next `count` batches of ld, writes each to sp (NULL: none) and appends it
 * to the trace; then rewinds sp for reading. -ECANCELED when *abort (optional) turns non-zero
 * between two batches; -EIO when the loader's epoch ends first; a loader's, a write's or the
 * budget's error otherwise (what is traced and spilled by then stays, for the caller to clear). */
int tg_btrace_sample(tg_btrace_t *t, tg_sloader_t *ld, uint64_t count, tg_spill_t *sp,
                     const atomic_int *abort);
/* Ids traced (off[n]). */
uint64_t tg_btrace_accesses(const tg_btrace_t *t);
/* No batches; the room stays (and stays reserved). */
void tg_btrace_clear(tg_btrace_t *t);
/* Frees the ids only (their budget goes back); off and sample_s stay: a planner done with the
 * ids keeps the batches' sizes and times. Adding batches after it is an error (-EINVAL). */
void tg_btrace_free_ids(tg_btrace_t *t);
/* Frees everything, releases the budget; the trace is empty (init's settings kept). */
void tg_btrace_free(tg_btrace_t *t);

#endif
