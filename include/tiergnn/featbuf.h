/* tiergnn/featbuf.h - the GNNDrive feature buffer: a fixed set of row slots shared by concurrent
 * extractors, with reference counts, in-flight rows, a standby set ordered by a replacement policy
 * and admission control.
 *
 * How to use (one extractor thread; several may run the same loop at once):
 *
 *     tg_featbuf_opts_t o = {.num_nodes = N, .feat_dim = D, .dtype = TG_F32,
 *                            .max_batch_nodes = Mb, .max_batches = extractors + queue + 1};
 *     tg_featbuf_t *fb;     if (tg_featbuf_create(&fb, &o, budget) < 0) die(tg_errmsg());
 *     tg_featbuf_batch_t *h; tg_featbuf_batch_create(fb, &h);      // one per batch in flight
 *
 *     tg_featbuf_acquire(h, batch->nodes, batch->num_nodes, 0);   // maps every node to a slot
 *     size_t nl; const tg_featbuf_load_t *ld = tg_featbuf_batch_loads(h, &nl);
 *     for (k < nl) read row ld[k].node of the feature file into tg_featbuf_row(fb, ld[k].slot),
 *                  then tg_featbuf_complete(h, k, status);       // any order, any time
 *     if (tg_featbuf_wait(h) < 0) { tg_featbuf_release(h); ... }  // rows other batches load
 *     ... hand h to the trainer: tg_featbuf_gather_f32(h, X, pool) or tg_featbuf_batch_slots ...
 *     tg_featbuf_release(h);                                       // on the releaser thread
 *
 * With io/ (tests/test_featbuf_io.c is the worked example): one tg_io_req_t per load with
 * .off = node * row_bytes, .len = row_bytes, .dst = tg_featbuf_row(fb, slot), .user = (void *)k;
 * tg_io_submit them together, and for every request tg_io_reap returns call
 * tg_featbuf_complete(h, (size_t)req->user, req->res). Complete a load only when no read can
 * still write its slot: after its request was reaped, or, when the queue broke, after
 * tg_io_destroy (which waits for the kernel) - the slot is someone else's right after.
 *
 * Replacement policies (opts.policy) decide which standby row - valid, unreferenced, not pinned: a
 * candidate - a miss evicts when no slot is free; everything else above and below holds for all:
 *   TG_FEATBUF_LRU       the least recently released (GNNDrive). O(1) per operation, no memory.
 *   TG_FEATBUF_STATIC    LRU, but the rows of a pinned node set (PaGraph's hot nodes: opts.pinned
 *                        or tg_featbuf_pin) are never evicted once loaded; they stay mapped and
 *                        valid when unreferenced. tg_featbuf_preload hands out the pinned rows not
 *                        loaded yet as loads, in node order, so a strategy can fill the static
 *                        cache at start with large sequential reads:
 *                            while ((k = tg_featbuf_preload(h)) > 0) {
 *                                read and complete the k loads as after acquire;
 *                                tg_featbuf_wait(h); tg_featbuf_release(h); }
 *                        The pinned set may be at most num_slots - max_batch_nodes x max_batches
 *                        nodes (tg_featbuf_pin_capacity), so that admission works as below.
 *                        8 bytes per slot above that minimum, O(log pinned) per miss.
 *   TG_FEATBUF_NEXT_USE  Belady (Ginex): the row whose node's next announced use is farthest;
 *                        rows never announced again first; ties least recently released first.
 *   TG_FEATBUF_WINDOW    GIDS's window buffering: rows used by one of the next `window` announced
 *                        batches are protected; the least recently released unprotected row goes,
 *                        and only when every candidate is protected the least recently released
 *                        protected one (acquire never blocks for protection).
 *   NEXT_USE and WINDOW decide by the future trace the caller announces:
 *       tg_featbuf_future_add(fb, b, nodes, n)   as the sampler produces batch b (ids increasing)
 *       tg_featbuf_future_done(fb, b)            once batch b has acquired (or been trained)
 *   A batch leaves the trace when it and every earlier batch are done, so a node's next use is
 *   its earliest announced batch not yet retired, and WINDOW's window is the first `window`
 *   batches not retired. At most opts.future_positions node positions are held (announced, not
 *   retired); future_add fails with -ENOSPC beyond. Cost: candidates in an indexed heap,
 *   O(log slots) per release, revival and eviction and per node whose next use changes
 *   (announcing or retiring a batch of n nodes: O(n log slots)); memory 28 bytes per slot and
 *   48-64 bytes per future position (records + a node hash), all in tg_featbuf_bytes_for. With no
 *   batch announced they behave exactly as LRU. The other policies ignore future_add and
 *   future_done (they return 0), so a caller need not branch on the policy.
 *
 * Rows are kept as raw bytes exactly as they are on disk (feat_dim values of the file's dtype),
 * so a reader can land a row in its slot without conversion; gather converts f16 to f32.
 * Lookup is by node id: a direct u32[num_nodes] table or an open-addressing hash sized for the
 * slot count, whichever costs less memory (both are charged to the budget).
 *
 * Slot life cycle (GNNDrive, section 3: mapping table with slot, reference count, valid bit;
 * reverse map slot -> node; standby set of unreferenced slots):
 *     FREE --acquire miss--> LOADING --complete(0)--> VALID --last release--> standby
 *                               |                                   ^  acquire hit   |
 *                               +--complete(<0)--> FAILED           +----------------+
 *                                                  (unmapped; FREE when its last reference goes)
 *     A standby slot stays mapped and valid, so a recently released row is served again without
 *     I/O; it is evicted (re-mapped to another node) only when no free slot is left, in the
 *     policy's order; a pinned standby row (STATIC) is never evicted.
 *
 * Invariants (tg_featbuf_check verifies them):
 *   - A slot with references is never evicted; its row bytes never change while referenced.
 *   - A node is mapped to at most one slot; a LOADING slot has exactly one batch that must load it
 *     (the one that mapped it) and holds its reference until that batch completes the load.
 *   - Nobody sees bytes of a row that did not load: wait() and gather() fail unless every row of
 *     the batch completed with status 0; a failed row is unmapped at once, so the next acquire
 *     of that node loads it afresh into another slot.
 *   - No deadlock. (1) acquire is all-or-nothing: it waits, holding nothing new, until the
 *     unreferenced slots (free + unpinned standby) number at least the slots this batch would
 *     take (an unmapped node or an unpinned standby row takes one, a pinned one none), then
 *     takes them all under one lock; so extractors never hold part of a batch while waiting for
 *     the rest. (2) wait() refuses to run while the caller still has loads of its own outstanding,
 *     so every "waits for a row in flight" edge points at a batch that can finish its loads
 *     without waiting for anything in the buffer: there is no cycle. (3) num_slots >=
 *     max_batch_nodes * max_batches + pinned nodes: while at most max_batches batches hold
 *     references (those being extracted, queued for training, trained), at least one batch's
 *     worth of unpinned slots is unreferenced, so acquire never blocks (GNNDrive reserves N_e x M_b
 * slots for the same reason). If a pipeline holds more, acquire blocks until the releaser frees
 * slots - it never waits on an extractor. Admission is FIFO, so a large batch is not starved.
 *
 * Threads: every function except tg_featbuf_destroy is thread-safe on the buffer; one mutex
 * guards the table (the work under it is O(batch nodes) lookups; row bytes move outside it). A
 * tg_featbuf_batch_t is used by one thread at a time and may move between threads (an extractor
 * acquires, the trainer gathers, a releaser releases) through a queue or any other
 * synchronisation; the one exception is tg_featbuf_complete / _complete_all, which may be called
 * for a handle's loads from any thread (an I/O reaper) between its acquire and its wait. Batches
 * may be completed, waited for and released in any order.
 *
 * Ownership and lifetimes: the buffer owns the slot memory, the table and its budget share. A
 * batch handle owns its node->slot and load arrays. Pointers returned by tg_featbuf_row for a
 * slot of a handle are valid from acquire until that handle's release; a reader may write a load's
 * slot only between acquire and the tg_featbuf_complete of that load. The arrays returned by the
 * tg_featbuf_batch_* accessors are valid until the next acquire or release on that handle.
 * Destroy every handle (released) before the buffer.
 *
 * Module: store/. Knows the dataset dtypes and util/; nothing of I/O, samplers or models.
 */
#ifndef TIERGNN_FEATBUF_H
#define TIERGNN_FEATBUF_H

#include <stddef.h>
#include <stdint.h>

#include "tiergnn/data.h"
#include "tiergnn/util.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct tg_featbuf tg_featbuf_t;
typedef struct tg_featbuf_batch tg_featbuf_batch_t;

/* How node ids are looked up. AUTO takes whichever costs fewer bytes. */
typedef enum {
    TG_FEATBUF_MAP_AUTO = 0,
    TG_FEATBUF_MAP_DIRECT = 1, /* u32[num_nodes]: 4 bytes per graph node, one memory access */
    TG_FEATBUF_MAP_HASH = 2    /* u32[2^k >= 2 * num_slots], linear probing: ~8-16 B per slot */
} tg_featbuf_map_t;

/* Replacement policy: which standby row a miss evicts (see the top of this file). */
typedef enum {
    TG_FEATBUF_LRU = 0,
    TG_FEATBUF_STATIC = 1,
    TG_FEATBUF_NEXT_USE = 2,
    TG_FEATBUF_WINDOW = 3
} tg_featbuf_policy_t;

typedef struct tg_featbuf_opts {
    uint64_t num_nodes;       /* node ids are < num_nodes */
    uint32_t feat_dim;        /* values per row */
    tg_feat_dtype_t dtype;    /* TG_F32 or TG_F16: a row is feat_dim * dtype size bytes */
    uint32_t max_batch_nodes; /* longest node list passed to acquire (M_b) */
    uint32_t max_batches;     /* batches that may hold references at once (extractors + training
                                 queue depth + trainer); the minimum slot count is their product */
    /* Size: num_slots if non-zero; else as many slots as fit in mem_bytes (table and policy
     * included) if non-zero; else the minimum, max_batch_nodes * max_batches, plus the pinned
     * nodes. */
    uint32_t num_slots;
    uint64_t mem_bytes;
    /* Distance between slots: the row size rounded up to slot_align (0 = packed). A power of two;
     * e.g. 512 or 4096 lets an O_DIRECT read of a sector-aligned row land in its slot directly.
     * The slot area itself always starts on a 4096-byte boundary. */
    uint32_t slot_align;
    tg_featbuf_map_t map;
    tg_featbuf_policy_t policy; /* 0 = LRU */
    uint32_t window;            /* WINDOW: batches whose rows are protected (>= 1) */
    /* NEXT_USE, WINDOW: the most node positions announced and not retired (>= 1), charged to
     * the budget: e.g. (look-ahead + extractors) batches x max_batch_nodes. */
    uint32_t future_positions;
    /* STATIC: the pinned node set (copied; duplicates ignored; NULL = none yet, see
     * tg_featbuf_pin). At most num_slots - max_batch_nodes * max_batches distinct nodes. */
    const uint64_t *pinned;
    uint64_t num_pinned;
} tg_featbuf_opts_t;

/* Bytes the buffer would reserve with these options and num_slots slots (slot rows + per-slot
 * metadata + mapping table; handles are charged separately when created). 0 if opts are invalid. */
uint64_t tg_featbuf_bytes_for(const tg_featbuf_opts_t *o, uint32_t num_slots);
/* The smallest legal slot count: max_batch_nodes * max_batches (0 if that overflows u32). */
uint32_t tg_featbuf_min_slots(const tg_featbuf_opts_t *o);

/* Creates the buffer and reserves its bytes against budget (NULL = no accounting) as "feature
 * buffer". -EINVAL for bad options (a pinned set too large for the slots included); -ENOMEM when
 * the budget (or mem_bytes) cannot hold the minimum slot count, with a message giving the bytes
 * needed and how they were computed. */
int tg_featbuf_create(tg_featbuf_t **out, const tg_featbuf_opts_t *o, tg_budget_t *budget);
/* Frees everything and returns the bytes to the budget. All handles must be destroyed first. */
void tg_featbuf_destroy(tg_featbuf_t *fb);
/* Wakes every thread blocked in acquire or wait; from now on they return -ECANCELED, and so does
 * every later acquire. For stopping a pipeline mid-epoch. Loads in flight may still complete, and
 * handles must still be released (release keeps working). */
void tg_featbuf_shutdown(tg_featbuf_t *fb);

uint32_t tg_featbuf_num_slots(const tg_featbuf_t *fb);
size_t tg_featbuf_row_bytes(const tg_featbuf_t *fb);   /* feat_dim * dtype size */
size_t tg_featbuf_slot_stride(const tg_featbuf_t *fb); /* bytes between consecutive slots */
uint64_t
tg_featbuf_reserved_bytes(const tg_featbuf_t *fb); /* charged to the budget, handles incl. */
int tg_featbuf_is_direct_map(const tg_featbuf_t *fb);
tg_featbuf_policy_t tg_featbuf_policy(const tg_featbuf_t *fb);
const char *tg_featbuf_policy_name(tg_featbuf_policy_t p); /* "lru", "static", ... */
/* The whole slot area [*base, *base + *len), e.g. for io_uring_register_buffers. */
void tg_featbuf_memory(const tg_featbuf_t *fb, void **base, size_t *len);
/* Row memory of a slot (slot < num_slots). See "Ownership" above for when it may be touched. */
void *tg_featbuf_row(const tg_featbuf_t *fb, uint32_t slot);

/* ---------------------------------------------------------------- batches */

/* One row the acquirer must read: the features of `node` go to tg_featbuf_row(fb, slot). pos is
 * the first position of node in the acquired node list. */
typedef struct tg_featbuf_load {
    uint64_t node;
    uint32_t slot;
    uint32_t pos;
} tg_featbuf_load_t;

/* A handle for one batch in flight, with room for max_batch_nodes nodes (its bytes are charged to
 * the buffer's budget). Reusable: acquire, ..., release, acquire again. */
int tg_featbuf_batch_create(tg_featbuf_t *fb, tg_featbuf_batch_t **out);
/* Destroys a released (or never acquired) handle; a handle still holding references is released
 * first if it has no loads outstanding, otherwise it is a programmer error and aborts. */
void tg_featbuf_batch_destroy(tg_featbuf_batch_t *h);

enum {
    TG_FEATBUF_NOWAIT = 1,    /* acquire: return -EAGAIN instead of blocking for slots */
    TG_FEATBUF_SORT_LOADS = 2 /* acquire: order the load list by node id (merges adjacent reads) */
};

/* Maps nodes[0..n) to slots and takes one reference per position. Per node: mapped and valid ->
 * a hit; mapped and being loaded by another batch -> a wait (tg_featbuf_wait covers it); not
 * mapped -> a free slot, else the least recently released standby slot (evicting its row), is
 * mapped LOADING and added to this handle's loads. Nodes should be distinct (as in a tg_batch_t);
 * a repeated node gets the same slot and one reference per position, but admission counts it as
 * if distinct. Blocks (FIFO) until enough unreferenced slots exist unless TG_FEATBUF_NOWAIT.
 * Returns the number of loads (>= 0); -EINVAL (node id out of range, n > max_batch_nodes, handle
 * already acquired), -EAGAIN (NOWAIT and no room now), -ECANCELED (shutdown). On error the
 * handle holds nothing. */
int tg_featbuf_acquire(tg_featbuf_batch_t *h, const uint64_t *nodes, size_t n, int flags);

/* Reports the outcome of load k (index into tg_featbuf_batch_loads): status 0 = the row bytes are
 * in the slot, now valid for everybody; status < 0 = the read failed: the node is unmapped and
 * every batch waiting for it gets the error. Each load is completed exactly once (-EINVAL
 * otherwise). */
int tg_featbuf_complete(tg_featbuf_batch_t *h, size_t k, int status);
/* Completes every load of h that is still outstanding with status (e.g. after an I/O error that
 * aborts the batch). */
int tg_featbuf_complete_all(tg_featbuf_batch_t *h, int status);
/* Number of this handle's loads not completed yet. */
size_t tg_featbuf_batch_pending(const tg_featbuf_batch_t *h);

/* Blocks until every row of the batch is valid. Returns 0 (the rows may now be read until
 * release), or the first error: that of a failed load, own or another batch's (message names the
 * node), -ECANCELED after shutdown, -EINVAL if the handle still has loads of its own outstanding
 * (waiting then could deadlock two extractors that wait for each other's rows) or is not
 * acquired. After an error the batch must be released; acquiring it again retries the rows. */
int tg_featbuf_wait(tg_featbuf_batch_t *h);
/* tg_featbuf_wait without sleeping: -EAGAIN (no message) while a row another batch loads is still
 * loading; otherwise what tg_featbuf_wait returns. For a reader holding two handles: it may
 * sleep in tg_featbuf_wait only once neither has loads of its own outstanding, or two readers
 * could each wait for a row the other has yet to read. */
int tg_featbuf_try_wait(tg_featbuf_batch_t *h);

/* Drops the batch's references: slots whose count reaches 0 go to the tail of the standby list,
 * still mapped and valid (failed ones become free). -EBUSY (nothing done) if loads of this handle
 * are outstanding - the reader may still be writing those slots; -EINVAL if not acquired. */
int tg_featbuf_release(tg_featbuf_batch_t *h);

/* The slot of every position of the acquired node list: row i of the batch's input matrix lives at
 * tg_featbuf_row(fb, slots[i]). *n receives the count. */
const uint32_t *tg_featbuf_batch_slots(const tg_featbuf_batch_t *h, size_t *n);
/* The rows this handle must read, in acquisition order or by node id (TG_FEATBUF_SORT_LOADS). */
const tg_featbuf_load_t *tg_featbuf_batch_loads(const tg_featbuf_batch_t *h, size_t *n);
/* Positions of the batch that were in flight for another batch when acquired. */
size_t tg_featbuf_batch_num_waits(const tg_featbuf_batch_t *h);
tg_featbuf_t *tg_featbuf_batch_owner(const tg_featbuf_batch_t *h);

/* X[i][0..feat_dim) = row of position i as f32 (f16 rows converted), for i < n; the batch must
 * have passed tg_featbuf_wait (-EINVAL otherwise). Rows are split across pool (NULL = inline). */
int tg_featbuf_gather_f32(const tg_featbuf_batch_t *h, float *X, tg_pool_t *pool);

/* ---------------------------------------------------------------- policies */

/* STATIC: replaces the pinned set by nodes[0..n) (duplicates ignored). Rows of newly pinned nodes
 * that are loaded stay from now on; rows no longer pinned become ordinary standby rows (LRU tail).
 * -EINVAL for another policy, a node out of range, or more distinct nodes than
 * tg_featbuf_pin_capacity (the message gives the numbers). Thread-safe. */
int tg_featbuf_pin(tg_featbuf_t *fb, const uint64_t *nodes, size_t n);
/* The most nodes STATIC may pin: num_slots - max_batch_nodes * max_batches (0 for others). */
uint64_t tg_featbuf_pin_capacity(const tg_featbuf_t *fb);
/* STATIC: maps up to max_batch_nodes pinned nodes that are not mapped yet to slots as loads of
 * h, in node order (one pass over the set from the last tg_featbuf_pin or create), exactly as an
 * acquire of them would (free slots first, then evictions of unpinned standby rows): read and
 * complete them, wait, release; the rows stay as pinned standby. Returns the number of loads; 0
 * when every pinned node has been handed out or is mapped (h stays unacquired); -EAGAIN when no
 * unreferenced slot is left or acquirers are queued (never blocks); -EINVAL (another policy, h
 * acquired), -ECANCELED (shutdown). A pinned row whose preload failed is read by the next
 * acquire that needs it. Loads count as preloads, not as lookups or misses. */
int tg_featbuf_preload(tg_featbuf_batch_t *h);

/* NEXT_USE, WINDOW: announces batch batch_id (larger than every id announced before; 2^64-1 is
 * reserved) with its nodes (repeats allowed). -EINVAL (id order, node out of range), -ENOSPC
 * when the positions would exceed future_positions (nothing recorded; retire batches with
 * future_done or raise the option). Other policies: returns 0 and records nothing. Thread-safe;
 * O(n) table work plus O(log slots) per standby row whose next use moves. */
int tg_featbuf_future_add(tg_featbuf_t *fb, uint64_t batch_id, const uint64_t *nodes, size_t n);
/* Marks batch batch_id used; batches leave the trace in id order once they and every earlier one
 * are done (until then the rows of a batch done early stay "used soon"). -EINVAL if never
 * announced or done twice; 0 for an empty batch. Other policies: returns 0. Thread-safe. */
int tg_featbuf_future_done(tg_featbuf_t *fb, uint64_t batch_id);

/* ---------------------------------------------------------------- counters and inspection */

/* Exact counters, updated under the buffer's lock. Per position acquired exactly one of hits,
 * waits, misses is counted, so lookups = hits + waits + misses. */
typedef struct tg_featbuf_stats {
    uint64_t acquires, releases;  /* batches (preloads count as acquires) */
    uint64_t lookups;             /* positions acquired */
    uint64_t hits;                /* row valid already (or a repeat of this batch's own load) */
    uint64_t standby_hits;        /* of hits: revived from the standby list without I/O */
    uint64_t waits;               /* row in flight for another batch: shared, not re-read */
    uint64_t misses;              /* rows the acquiring batch had to load */
    uint64_t evictions;           /* valid standby rows dropped to make room */
    uint64_t evictions_protected; /* of evictions: rows the policy meant to keep, taken because
                                     every candidate was (WINDOW: used within the window;
                                     NEXT_USE: announced again). Pinned rows are never evicted. */
    uint64_t preloads;            /* pinned rows handed out by tg_featbuf_preload */
    uint64_t load_errors;         /* loads completed with an error */
    uint64_t admission_waits;     /* acquires that blocked for slots */
    double admission_wait_s;      /* time spent blocked there */
    /* gauges at the time of the snapshot (not reset) */
    uint32_t num_slots, slots_free, slots_standby, slots_referenced;
    uint32_t slots_pinned;                     /* slots holding a pinned node (loading, valid) */
    uint64_t pinned_nodes;                     /* size of the pinned set */
    uint32_t future_batches, future_positions; /* held by the trace */
} tg_featbuf_stats_t;

/* Copies the counters; with reset != 0 zeroes them afterwards (per-epoch reporting). */
void tg_featbuf_stats(tg_featbuf_t *fb, tg_featbuf_stats_t *s, int reset);
/* Fraction of positions served without this batch's own I/O: (hits + waits) / lookups (0 if none).
 */
double tg_featbuf_hit_ratio(const tg_featbuf_stats_t *s);

enum { TG_FEATBUF_FREE = 0, TG_FEATBUF_LOADING = 1, TG_FEATBUF_VALID = 2, TG_FEATBUF_FAILED = 3 };

/* Diagnostics: the slot state of a node. Returns 1 and fills the outputs (any may be NULL) if node
 * is mapped, 0 if not. A snapshot: stale as soon as it returns if other threads are active. */
int tg_featbuf_lookup(tg_featbuf_t *fb, uint64_t node, uint32_t *slot, uint32_t *refs, int *state);
/* Diagnostics: the node (UINT64_MAX if none), references and state of a slot. */
void tg_featbuf_slot_info(tg_featbuf_t *fb, uint32_t slot, uint64_t *node, uint32_t *refs,
                          int *state);
/* Verifies every invariant of the table, lists and counts: O(num_slots + table size) under the
 * lock. Returns 0 or -EFAULT with a message naming the first violation. For tests. */
int tg_featbuf_check(tg_featbuf_t *fb);

#ifdef __cplusplus
}
#endif
#endif
