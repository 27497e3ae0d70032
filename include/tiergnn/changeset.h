/* tiergnn/changeset.h - Ginex's changeset precomputation (Park et al., "Ginex", section 3.4): the
 * Belady-optimal states of a feature cache over a known access trace, as per-iteration changesets.
 *
 * The trace of a superbatch is S iterations (batches); iteration i accesses the node ids
 * ids[off[i] .. off[i+1]) (distinct within an iteration; any order: position k of iteration i is
 * the row k of that batch's input matrix). A cache of `entries` rows starts in a given state C_0
 * and, at every iteration i, first serves the rows of ids_i it holds (the others are misses, read
 * from disk), then moves to C_{i+1} = the `entries` nodes of C_i u ids_i whose next access after
 * iteration i is earliest (Belady's MIN with bypass: a missed row is inserted only if it is used
 * again sooner than what it would replace; nodes never accessed again count as infinitely far).
 * The changeset of iteration i is C_{i+1} \ C_i (in_ids, each with its position within ids_i, so
 * the executor copies the row from the batch's input matrix without reading it again) and
 * C_i \ C_{i+1} (out_ids). The last iteration has no update (C_S = C_{S-1}).
 *
 *     tg_cs_ws_t *ws;
 *     tg_cs_ws_create(&ws, N, budget);                 // per-node arrays, reused by every call
 *     tg_cs_trace_t t = {.iters = S, .off = off, .ids = ids};
 *     uint32_t *c0; uint64_t n0;
 *     tg_cs_init_state(ws, &t, entries, prev, n_prev, &c0, &n0);   // optional: the paper's init
 *     tg_cs_t cs;
 *     tg_cs_compute(ws, &t, entries, c0, n0, &cs, budget);
 *     for (i < S) { misses cs.misses[i]; in = cs.in_ids[cs.in_off[i] .. cs.in_off[i+1]) at
 *                   positions cs.in_pos[...]; out = cs.out_ids[cs.out_off[i] .. cs.out_off[i+1]) }
 *     ... cs.final (C_S) is the next superbatch's prev ...
 *     tg_cs_free(&cs); free(c0); tg_cs_ws_destroy(ws);
 *
 * Algorithm (the paper's three passes, O(T log entries) for a trace of T accesses): pass 1 counts
 * each node's accesses, whose exclusive prefix sum is ptr; pass 2 writes every node's access
 * iterations, ascending, into iters (CSR by node) with the MSB set on each node's first entry,
 * and appends a dummy entry (UINT32_MAX, "never"); pass 3 simulates: at iteration i each
 * accessed node's ptr moves one entry on, to the dummy when the entry it reaches starts another
 * node's list (MSB set), so iters[ptr[v]] is always v's next access; the cache is a bucket queue
 * by next access (keys are iterations: S + 1 buckets, O(1) moves instead of a heap's log), and
 * the new state keeps the `entries` smallest of C_i u ids_i (a miss whose next access ties the
 * largest cached one is not inserted). Memory: ptr and a cached mark of every node
 * (tg_cs_ws_bytes), while computing iters (4 (T + 1) bytes), the buckets (4 bytes per entry and
 * 1 KiB per iteration) and the longest iteration's misses (12 bytes per access), and the output
 * (at most 12 bytes per miss). Measured in bench/README.md ("Changeset precomputation cost
 * against S"): about 50 ns per access on the 2-core dev machine, bound by random accesses.
 *
 * The initial state (tg_cs_init_state, the paper's "prefetch the rows of the first iterations
 * until the cache is full"): the `entries` nodes with the earliest first access in the trace,
 * preferring, among nodes first accessed at the same iteration, those already in prev (the
 * previous superbatch's final state), so that carrying the cache over reads nothing twice.
 * Nodes of prev not accessed in the trace are dropped. The rows to prefetch are c0 \ prev.
 *
 * Module: store/. Pure computation over arrays: knows util/ (budget, errors) only.
 */
#ifndef TIERGNN_CHANGESET_H
#define TIERGNN_CHANGESET_H

#include <stddef.h>
#include <stdint.h>

#include "tiergnn/util.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct tg_cs_trace {
    uint32_t iters;       /* S >= 0 */
    const uint64_t *off;  /* (S + 1) offsets into ids, off[0] = 0, non-decreasing */
    const uint32_t *ids;  /* (off[S]) node ids < num_nodes, distinct within an iteration */
} tg_cs_trace_t;

typedef struct tg_cs {
    uint32_t iters;
    uint64_t entries;
    uint64_t *misses;               /* (S) rows of ids_i not in C_i */
    uint64_t total_misses;          /* sum of misses */
    uint64_t *in_off, *out_off;     /* (S + 1) */
    uint32_t *in_ids, *in_pos;      /* (in_off[S]) inserted at iteration i; position in ids_i */
    uint32_t *out_ids;              /* (out_off[S]) evicted at iteration i */
    uint32_t *final;                /* (num_final) C_S, any order */
    uint64_t num_final;
    uint64_t reserved;              /* bytes of the above reserved against the budget */
    tg_budget_t *budget;
} tg_cs_t;

typedef struct tg_cs_ws tg_cs_ws_t;

/* Bytes of the per-node workspace for num_nodes nodes (8 per node). A workspace serves one call
 * at a time (one per thread); every call leaves it ready for the next, on errors too. */
uint64_t tg_cs_ws_bytes(uint64_t num_nodes);
/* Creates the workspace (reserved against budget, NULL = not accounted). num_nodes < 2^32. */
int tg_cs_ws_create(tg_cs_ws_t **out, uint64_t num_nodes, tg_budget_t *budget);
void tg_cs_ws_destroy(tg_cs_ws_t *ws);

/* Checks the trace: off[0] = 0, offsets non-decreasing, fewer than 2^32 - 1 accesses and 2^31 - 1
 * iterations, ids < num_nodes, no id twice in one iteration (the message names the iteration and
 * both positions). tg_cs_compute checks the same itself; O(T). */
int tg_cs_trace_check(tg_cs_ws_t *ws, const tg_cs_trace_t *t);

/* The initial state for trace t (see above) into a malloc'd *c0 of *n0 <= entries ids (caller
 * frees). prev may be NULL (n_prev 0). Reads the trace only as far as it needs (checking the
 * ids it reads), O(n_prev + the accesses read). */
int tg_cs_init_state(tg_cs_ws_t *ws, const tg_cs_trace_t *t, uint64_t entries,
                     const uint32_t *prev, uint64_t n_prev, uint32_t **c0, uint64_t *n0);

/* Simulates the cache of `entries` rows over t from state init[0..n_init) (distinct ids,
 * n_init <= entries) and fills *out (tg_cs_free). Temporaries and the output are reserved against
 * budget (NULL = not accounted); -ENOMEM naming the bytes when it cannot hold them. Checks the
 * trace as tg_cs_trace_check does (-EINVAL, *out left zeroed). O(T + num_nodes + S^2). */
int tg_cs_compute(tg_cs_ws_t *ws, const tg_cs_trace_t *t, uint64_t entries, const uint32_t *init,
                  uint64_t n_init, tg_cs_t *out, tg_budget_t *budget);
/* Frees the output and returns its bytes to the budget. Zeroed or freed: fine. */
void tg_cs_free(tg_cs_t *cs);

#ifdef __cplusplus
}
#endif
#endif
