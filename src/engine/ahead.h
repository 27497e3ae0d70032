/* engine/ahead - produce item k + 1 on a worker thread while the caller consumes item k.
 *
 * A strategy that prepares ahead (Ginex's superbatches, DiskGNN's next epoch, HierBatching's
 * mega-batches) writes only what one item is (its produce function) and how it is consumed; the
 * thread, the waiting, the first error, stopping and draining are here, once.
 *
 *     static int plan(void *ctx, void *item, uint64_t k, tg_ahead_t *a);   // fills item k
 *     static void clear(void *ctx, void *item);                            // empties an item
 *
 *     void *items[2] = {&sb[0], &sb[1]};           // the caller's: item k goes to items[k % 2]
 *     tg_ahead_opts_t o = {.slots = 2, .items = items, .produce = plan, .drop = clear,
 *                          .ctx = s, .who = "ginex: the inspector"};
 *     tg_ahead_open(&a, &o);                        // no thread yet
 *     per pass:
 *       tg_ahead_start(a, n);                       // a thread produces items 0 .. n-1 in order
 *       while ((rc = tg_ahead_next(a, NULL, &it)) > 0) {
 *           ... consume it ...;
 *           tg_ahead_release(a, it);                // its slot may take item k + slots
 *       }
 *       tg_ahead_stop(a);                           // abort, join, drop what is left
 *     tg_ahead_close(a);
 *
 * Slots: `slots` items exist at once (2: the one consumed and the next). Each slot goes
 *
 *     FREE -(producer takes it for item k)-> FILLING -(produce returned 0)-> READY
 *          -(tg_ahead_next)-> TAKEN -(tg_ahead_release)-> FREE
 *
 * and the producer waits for slot k % slots to be FREE before it starts item k, so it is never
 * more than slots - 1 items ahead of the consumer's release.
 *
 * Ownership and lifetimes: the caller owns the items' memory and everything they hold; the
 * mechanism owns the thread and the slots' states. Between tg_ahead_start and the return of
 * tg_ahead_stop, an item in FREE or FILLING belongs to the producer thread (the consumer must not
 * touch it), one in TAKEN to the consumer (from tg_ahead_next until tg_ahead_release); the state
 * changes under the mechanism's lock, so what the producer wrote is visible to the consumer and
 * the other way round. Whatever else produce reads (the caller's per-pass settings) must be set
 * before tg_ahead_start and left alone until tg_ahead_stop returns; what produce alone writes
 * (its scratch, its counters) may be read by the caller after tg_ahead_stop.
 *
 * Errors: a produce that fails returns a negative code with its message (tg_err); the first one
 * goes into a tg_errbox_t and production stops. The consumer still gets every item before the
 * failed one, then tg_ahead_next returns the error with the producer's message, at the item it
 * was for. An error for an item the consumer never asks for (it stopped first) is dropped with
 * the run.
 *
 * Abort: tg_ahead_abort (any thread, e.g. a pipeline's on_error) wakes everyone: the producer
 * stops before its next item (produce may poll tg_ahead_aborted, or pass tg_ahead_abort_flag to
 * code that polls an atomic_int, to stop mid-item; it then returns -ECANCELED, which is not an
 * error) and tg_ahead_next returns -ECANCELED from then on.
 *
 * Stop and drain: tg_ahead_stop aborts, joins the thread, and calls drop (on the caller's thread)
 * for every slot that is not FREE: produced and never consumed, still held by the consumer, or
 * half filled by a produce that failed or was aborted (drop must accept a partly filled item).
 * Every slot is then FREE and the mechanism is ready for the next tg_ahead_start: nothing of a
 * pass leaks into the next. tg_ahead_close stops first, so closing mid-production or before the
 * first item is safe.
 *
 * Thread safety: tg_ahead_abort and tg_ahead_aborted from any thread; tg_ahead_start, next,
 * release, stop and close from one consumer thread at a time. */
#ifndef TG_ENGINE_AHEAD_H
#define TG_ENGINE_AHEAD_H

#include <stdatomic.h>
#include <stdint.h>

typedef struct tg_ahead tg_ahead_t;

#define TG_AHEAD_MAX_SLOTS 8

typedef struct tg_ahead_opts {
    int slots;    /* items that exist at once, 1..TG_AHEAD_MAX_SLOTS */
    void **items; /* (slots) the caller's items, distinct; copied: the array may go after open */
    /* Fills item k of the run (into items[k % slots]) on the worker thread: 0, or a negative
     * code with its message (-ECANCELED after an abort is not an error). */
    int (*produce)(void *ctx, void *item, uint64_t k, tg_ahead_t *a);
    /* Optional: empties an item left over at tg_ahead_stop (see above). */
    void (*drop)(void *ctx, void *item);
    void *ctx;
    const char *who; /* names the producer in messages ("ginex: the inspector") */
} tg_ahead_opts_t;

/* Creates the mechanism (no thread until tg_ahead_start). */
int tg_ahead_open(tg_ahead_t **out, const tg_ahead_opts_t *o);
/* Starts a run of n items (0 is fine: tg_ahead_next then returns 0 at once). Only while stopped
 * (after open or tg_ahead_stop). */
int tg_ahead_start(tg_ahead_t *a, uint64_t n);
/* Waits for the next item of the run, in order: 1 with *item (TAKEN: the caller's until
 * tg_ahead_release), 0 once all n were handed out, the producer's error at the item it failed,
 * or -ECANCELED after tg_ahead_abort or while *cancel (optional: a flag the caller's own machinery
 * sets, such as a pipeline's abort flag; polled every 20 ms while waiting) is non-zero. -EINVAL
 * when the slot of the next item is still held by the caller (a release is missing). */
int tg_ahead_next(tg_ahead_t *a, const atomic_int *cancel, void **item);
/* Gives a TAKEN item's slot back to the producer. -EINVAL when item is not held. */
int tg_ahead_release(tg_ahead_t *a, void *item);
/* Thread-safe: stops the run's production and wakes the producer and the consumer. */
void tg_ahead_abort(tg_ahead_t *a);
/* 1 once aborted (until the next tg_ahead_start). */
int tg_ahead_aborted(const tg_ahead_t *a);
/* The flag behind tg_ahead_aborted, for code that polls an atomic_int (store/pack, extract). */
atomic_int *tg_ahead_abort_flag(tg_ahead_t *a);
/* 1 between tg_ahead_start and tg_ahead_stop. */
int tg_ahead_running(const tg_ahead_t *a);
/* Aborts, joins the producer, drops every item not FREE; then ready for tg_ahead_start. A no-op
 * when no run is started. */
void tg_ahead_stop(tg_ahead_t *a);
/* Stops and frees. NULL is fine. */
void tg_ahead_close(tg_ahead_t *a);

#endif
