/* tiergnn/extract.h - moving the feature rows of batches into their input matrices X, through a
 * stack of tiers: RAM caches first, then the feature buffer, then the feature file on disk.
 *
 * How to use (a strategy with E extractor threads; src/engine/strategies/gnndrive.c is the
 * worked example, tests/test_extract.c the exhaustive one):
 *
 *     tg_extract_plan_opts_t po;  tg_extract_plan_opts_default(&po);
 *     po.num_nodes = N; po.feat_dim = D; po.dtype = TG_F32; po.extractors = E;
 *     po.probe_path = "DATASET/features.bin";           // the device probe sizes the reads
 *     po.avail = budget->limit ? budget->limit - budget->used : 0;
 *     tg_extract_plan_t pl;  tg_extract_plan(&pl, &po);  // reads in flight, merge gap, chunk
 *     if (tg_extract_plan_bytes(&pl) > po.avail) refuse(tg_extract_plan_describe(&pl, ...));
 *
 *     tg_tier_t *hot;  tg_tier_static_create(&hot, &so, hot_nodes, n_hot, budget);  // optional
 *     tg_extract_opts_t eo = {.plan = &pl, .feat = feat_file, .budget = budget,
 *                             .tiers = &hot, .ntiers = 1, .featbuf = 1, .normalize = 1};
 *     tg_extract_t *ex;  tg_extract_create(&ex, &eo);    // workers, feature buffer, handles
 *
 *     // on thread i < E:
 *     tg_extract_batch_t b[2] = {{.id = 7, .nodes = n7, .n = c7, .X = X7}, {.id = 8, ...}};
 *     tg_extract_hooks_t hk = {.fail = my_fail, .abort = &my_abort, .ctx = me};
 *     rc = tg_extract_group(tg_extract_worker(ex, i), b, 2, &hk);  // X7, X8 filled
 *
 *     tg_tier_stats_t ts[8]; int k = tg_extract_tier_stats(ex, ts, 8, 1);  // per epoch
 *     tg_extract_destroy(ex); tg_tier_destroy(hot);
 *
 * The plan: a pure function of the options, the device probe (tg_io_probe_run, run once per
 * process and cached on disk by io/) and the bytes available. It says how many reads each
 * extractor keeps in flight, the size of holes between rows worth reading through (so that
 * rows close together in the file become one read), the largest merged read, how many rows an
 * extractor handles at once (the chunk), and what all of that costs against --mem: io/ staging
 * and merge buffers, io/ bookkeeping while a chunk's reads run, and the feature buffer's
 * minimum (or the staging rows without one). Under a tight `avail` the automatic depth and
 * chunk are halved until the staging takes at most a quarter of it and the feature buffer's
 * minimum at most a quarter of what the buffer gets; the rest of the buffer is cache.
 *
 * A group: the rows of up to TG_EXTRACT_MAX_GROUP batches are moved in one sweep. Their
 * positions are sorted by node id (radix sort) and deduplicated, and the unique ids are handled
 * in chunks of consecutive ids, so a chunk covers a narrow range of the file, its rows merge
 * into few reads, and a row the batches share is fetched once. Sweeps alternate direction from
 * group to group ((first batch id / group size) odd: descending), so a sweep starts where the
 * previous one ended, among the rows the feature buffer's standby list still holds. For each
 * chunk: the RAM tiers are asked in order; the rest is acquired in the feature buffer (hits,
 * rows other extractors are loading); the misses are read with io/ (rows separated by holes
 * of at most plan.gap bytes as one read into a merge buffer); every row is converted once by
 * tg_feat_rows_f32 (f16 widened, normalised when asked) into its first position in X and
 * copied to the other positions it takes: the RAM tiers' rows while the chunk's reads are in
 * flight, each read row as its read completes, the rows other extractors loaded at the end, so
 * that the disk does not wait for the conversions. Without a feature buffer the misses are read
 * into the worker's staging rows, chunk by chunk. With plan.overlap (a feature buffer only) a
 * worker holds two chunks: once the current one has every read submitted and at most plan.depth
 * of them outstanding, the next one is looked up, acquired and its reads queued, so that the
 * disk does not idle while a chunk ends and the next begins; the feature buffer's minimum counts
 * two handles per worker, and a worker sleeps for rows other extractors load only when neither
 * of its chunks has reads of its own outstanding (tg_featbuf_try_wait).
 *
 * Tiers: a tier is a RAM source of rows (raw, in the file's dtype) with its own counters. The
 * static tier holds a fixed node set (e.g. PaGraph's highest out-degree nodes), filled at
 * creation with large sorted reads through io/ and never changed: its lookups take no lock.
 * The feature buffer and the feature file are the last two tiers of every extraction; their
 * counters are kept by the extraction (see tg_extract_tier_stats).
 *
 * Errors: functions return 0 or a negative -errno with a message (tg_errmsg). A read error or a
 * short read fails the group with "batch B: reading the features of node V: <io/'s message
 * naming the file and offset>". Through the hooks a failure is recorded (hooks->fail, with the
 * message) before the failed rows are completed in the feature buffer, so that another
 * extractor waiting for such a row reports its own consequence only after the cause is known.
 * A group stopped by hooks->abort returns -ECANCELED without calling fail. After any error the
 * rows of X are unspecified; the feature buffer stays consistent (tg_featbuf_check), and the
 * worker is usable again (a broken io/ queue is recreated at its next group).
 *
 * Threads: a worker is used by one thread at a time (it may move between threads). Workers of
 * one extraction run concurrently; tiers, counters and the feature buffer are shared safely.
 * tg_extract_tier_stats and tg_extract_shutdown may be called from any thread.
 *
 * Ownership: the caller owns the feature file (tg_io_file_t), the budget, the io/ stats sink
 * and the tiers passed in; all must outlive the extraction. The extraction owns its workers and
 * its feature buffer (reserved against opts.budget) and returns every byte at destroy. The
 * batches' node lists and matrices are borrowed for the duration of tg_extract_group.
 *
 * Module: store/. Knows io/, the dataset dtypes and util/; nothing of samplers, models or
 * pipelines.
 */
#ifndef TIERGNN_EXTRACT_H
#define TIERGNN_EXTRACT_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "tiergnn/data.h"
#include "tiergnn/featbuf.h"
#include "tiergnn/io.h"
#include "tiergnn/util.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---------------------------------------------------------------- the read plan */

#define TG_EXTRACT_MAX_GROUP 16 /* batches in one tg_extract_group */
#define TG_EXTRACT_DEFAULT_CHUNK 8192u
/* the least chunk and depth a tight budget may lower the automatic ones to */
#define TG_EXTRACT_MIN_CHUNK 256u
#define TG_EXTRACT_MIN_DEPTH 4u
#define TG_EXTRACT_IO_BOOKKEEPING 120u /* io/ bytes per request while a read runs (io.h) */

typedef struct tg_extract_plan_opts {
    uint64_t num_nodes;    /* rows of the feature file */
    uint32_t feat_dim;     /* values per row */
    tg_feat_dtype_t dtype; /* of the file */
    int extractors;        /* workers (>= 1) */
    unsigned io_depth;     /* reads in flight per worker; 0 = from the device probe */
    /* With io_depth 0: the automatic depth per worker when non-zero, instead of the probe's
     * best depth shared by the workers and capped for merged reads (GIDS's accumulator asks
     * for its N_access); a tight avail still lowers it like the probe's. */
    unsigned depth_hint;
    int64_t io_gap; /* hole bytes read through to merge rows; < 0 = from the probe */
    /* With a feature buffer: 1 = each worker holds two chunks, acquiring the next one and queuing
     * its reads while the current one's last reads drain, so that the disk does not idle
     * between chunks (the buffer's minimum and the io/ bookkeeping double). */
    int overlap;
    uint32_t chunk_rows;    /* rows per chunk; 0 = automatic (default, halved under avail) */
    int featbuf;            /* 1 = a feature buffer in front of the disk */
    const char *probe_path; /* a file on the device to probe (features.bin); NULL = no probe */
    /* A probe already measured (the planner's): the depth and the merge gap come from it, as
     * from the process's own probe, and nothing is probed or read (probe_path is ignored). */
    const tg_io_probe_t *probe;
    /* Sizing. minimum = 1 plans the least the extraction can run with (the smallest automatic
     * chunk and depth: what a strategy's min_bytes reports); else the chunk starts at the
     * default (at most num_nodes) and, when avail != 0, is fitted to avail bytes, of which
     * other_transient are needed by the caller beside the plan while reads run. */
    int minimum;
    uint64_t avail;
    uint64_t other_transient;
} tg_extract_plan_opts_t;

typedef struct tg_extract_plan {
    int extractors;
    unsigned depth;  /* reads in flight per worker */
    uint64_t gap;    /* hole bytes read through (0: one read per row, merged only if adjacent) */
    size_t span;     /* largest merged read, = one merge buffer */
    size_t max_read; /* the workers' io/ queues: a merged run is one disk read */
    uint32_t chunk;  /* rows per chunk */
    size_t row_bytes;
    uint32_t align; /* feature-buffer slot alignment: rows land in slots with O_DIRECT */
    int featbuf;
    int overlap; /* two chunks per worker in flight (opts.overlap with a feature buffer) */
    tg_feat_dtype_t dtype;
    uint64_t num_nodes;
    uint32_t feat_dim;
    /* bytes against the budget */
    uint64_t stage_bytes;     /* every worker's io/ staging and merge buffers (and staging rows
                                 without a feature buffer) */
    uint64_t transient_bytes; /* io/ bookkeeping while a chunk's reads run, every worker */
    uint64_t featbuf_min;     /* the feature buffer's minimum, handles included (0 without) */
    uint64_t rows_bytes;      /* without a feature buffer: every worker's chunk staging rows */
    uint64_t handle_bytes;    /* of featbuf_min: the workers' handles */
    int probed;               /* the device probe's figures were used */
} tg_extract_plan_t;

void tg_extract_plan_opts_default(tg_extract_plan_opts_t *o);
/* Computes the plan (runs the device probe first when depth or gap is automatic and probe_path
 * is set; a failed probe costs a warning and the defaults). Returns 0, or -EINVAL for bad
 * options (no rows, width 0, extractors < 1). */
int tg_extract_plan(tg_extract_plan_t *pl, const tg_extract_plan_opts_t *o);
/* Everything the plan costs: stage_bytes + transient_bytes + featbuf_min + rows_bytes. */
uint64_t tg_extract_plan_bytes(const tg_extract_plan_t *pl);
/* "feature-read staging of E extractor(s) X, feature buffer of at least E x C rows Y" into buf
 * (returns buf), for --mem refusals. */
const char *tg_extract_plan_describe(const tg_extract_plan_t *pl, char *buf, size_t len);
/* The feature-buffer options the plan implies (max_batch_nodes = chunk, max_batches = workers,
 * twice that with overlap; slot alignment); size fields left 0. */
void tg_extract_plan_featbuf_opts(const tg_extract_plan_t *pl, tg_featbuf_opts_t *fo);

/* ---------------------------------------------------------------- tiers */

typedef struct tg_tier tg_tier_t;

/* A tier's table. find returns the raw row of node (row_bytes bytes of the file's dtype), valid
 * until the tier is destroyed, or NULL when the tier does not hold it. Static tiers answer
 * without a lock. */
typedef struct tg_tier_i {
    const void *(*find)(const tg_tier_t *t, uint64_t node);
    void (*destroy)(tg_tier_t *t);
} tg_tier_i;

struct tg_tier {
    const tg_tier_i *iface;
    char name[32];
    size_t row_bytes;
    _Atomic uint64_t lookups, hits; /* nodes asked; nodes served (bytes = hits x row_bytes) */
    uint64_t mem_bytes;             /* RAM held, reserved against the creator's budget */
    void *impl;
};

/* Counters of one tier: lookups = rows looked up in it, hits = rows it served, bytes = raw row
 * bytes it served. For "featbuf": hits include rows other workers were loading. For "file":
 * lookups = rows read, hits = rows read without error, bytes = their raw bytes. */
typedef struct tg_tier_stats {
    const char *name; /* valid while the tier (or extraction) lives */
    uint64_t lookups, hits, bytes;
} tg_tier_stats_t;

typedef struct tg_tier_static_opts {
    const char *name;   /* e.g. "pagraph-cache"; NULL = "static" */
    tg_io_file_t *feat; /* the feature file (read during creation only) */
    uint64_t num_nodes; /* rows of the file: ids must be below */
    uint32_t feat_dim;
    tg_feat_dtype_t dtype;
    tg_io_stats_t *stats; /* the fill's reads count here; NULL = not counted */
    /* --verify-reads: every row read is checked against its checksum (tiergnn/rowcrc.h; ids
     * of the file's order); NULL = not checked */
    const struct tg_rowcrc *rowcrc;
} tg_tier_static_opts_t;

/* Bytes a static tier of n distinct nodes would reserve (rows + lookup table). */
uint64_t tg_tier_static_bytes(uint64_t num_nodes, uint32_t feat_dim, tg_feat_dtype_t dtype,
                              uint64_t n);
/* The most rows k (at most num_nodes) whose static tier, plus per_row bytes for each and fixed
 * bytes once (what filling it holds beside it: lists, staging), fits in room: a strategy sizing
 * its pinned hot rows from what the budget leaves. */
uint64_t tg_tier_static_fit(uint64_t num_nodes, uint32_t feat_dim, tg_feat_dtype_t dtype,
                            uint64_t room, uint64_t per_row, uint64_t fixed);
/* Its fill reads the sorted rows in merged runs: holes of at most TG_TIER_FILL_GAP bytes read
 * through, at most TG_TIER_FILL_SPAN bytes a read, TG_TIER_FILL_RUNS reads a submit (the
 * planner's cost model reads the same numbers). */
#define TG_TIER_FILL_GAP ((uint64_t)16 << 10)
#define TG_TIER_FILL_SPAN ((size_t)512 << 10)
#define TG_TIER_FILL_RUNS 8u
/* Creates a static tier holding the rows of nodes[0..n) (duplicates are held once), reserving
 * its bytes against budget (NULL = not accounted) first, and the fill's io/ staging while it
 * runs. The lookup is a direct u32[num_nodes] table or an open-addressing hash of 2^k >= 2n
 * entries, whichever costs less. -EINVAL (an id >= num_nodes, naming it), -ENOMEM (budget),
 * or the read error with io/'s message (file and offset). */
int tg_tier_static_create(tg_tier_t **out, const tg_tier_static_opts_t *o, const uint64_t *nodes,
                          uint64_t n, tg_budget_t *budget);
/* A static tier over rows its creator holds: row i (row_bytes raw bytes at rows + i x
 * row_bytes) is node nodes[i]; the nodes must be distinct and below num_nodes (-EINVAL naming
 * one that is not). Only the lookup table (as above) is the tier's, reserved against budget;
 * the rows must stay unchanged until the tier is destroyed. */
int tg_tier_borrow_create(tg_tier_t **out, const char *name, const void *rows, size_t row_bytes,
                          const uint64_t *nodes, uint64_t n, uint64_t num_nodes,
                          tg_budget_t *budget);
/* NULL is fine. Returns its bytes to the budget it was created with. */
void tg_tier_destroy(tg_tier_t *t);
static inline const void *tg_tier_find(const tg_tier_t *t, uint64_t node)
{
    return t->iface->find(t, node);
}
/* Distinct nodes the static tier holds (0 for a tier of another kind). */
uint64_t tg_tier_static_count(const tg_tier_t *t);
/* Copies the tier's counters (reset != 0: and zeroes them, atomically per counter). */
void tg_tier_stats(tg_tier_t *t, tg_tier_stats_t *out, int reset);

/* ---------------------------------------------------------------- the extraction */

typedef struct tg_extract tg_extract_t;
typedef struct tg_extract_worker tg_extract_worker_t;

typedef struct tg_extract_opts {
    const tg_extract_plan_t *plan; /* copied */
    tg_io_file_t *feat;            /* features.bin: size must be num_nodes x row_bytes */
    int normalize;                 /* L1 row normalisation (tiergnn/store.h) */
    tg_budget_t *budget;           /* staging, merge buffers, feature buffer; NULL = none */
    tg_io_stats_t *stats;          /* the workers' reads count here; NULL = not shared */
    tg_tier_t *const *tiers;       /* RAM tiers asked in this order before the buffer */
    int ntiers;
    /* The feature buffer (when plan->featbuf): with a budget limit it takes everything left
     * after the workers' staging, less keep_bytes (bytes the caller needs later: io/
     * bookkeeping while reads run, its own); without a limit cache_bytes (0 = an eighth of
     * RAM), at most the whole file, at least the plan's minimum. */
    uint64_t keep_bytes;
    uint64_t cache_bytes;
    const char *who; /* prefix of messages, e.g. "gnndrive" (NULL = "extract") */
    /* The feature buffer's replacement policy (featbuf.h; 0 = LRU) and, for NEXT_USE and
     * WINDOW, its window and future_positions: the caller announces the future through
     * tg_featbuf_future_add / _done on tg_extract_featbuf(ex). The positions' bytes come out
     * of the buffer's share like its slots. */
    tg_featbuf_policy_t policy;
    uint32_t window;
    uint32_t future_positions;
    /* --verify-reads: every row read from feat is checked against its checksum
     * (tiergnn/rowcrc.h; ids of feat's order) as its read completes; a mismatch fails the
     * read like an I/O error (the message names the file, offset and node). NULL = none. */
    const struct tg_rowcrc *rowcrc;
} tg_extract_opts_t;

/* Creates plan->extractors workers (io/ queue over feat, request arrays, merge buffers) and,
 * when plan->featbuf, the feature buffer and one handle per worker. -ENOMEM naming what did not
 * fit (e.g. "--mem X cannot hold the feature buffer"), -EINVAL for a bad file size. */
int tg_extract_create(tg_extract_t **out, const tg_extract_opts_t *o);
/* NULL is fine. No group may be running. */
void tg_extract_destroy(tg_extract_t *ex);
int tg_extract_num_workers(const tg_extract_t *ex);
tg_extract_worker_t *tg_extract_worker(tg_extract_t *ex, int i);
/* The feature buffer (NULL without one), e.g. for its size and counters. */
tg_featbuf_t *tg_extract_featbuf(tg_extract_t *ex);
const tg_extract_plan_t *tg_extract_get_plan(const tg_extract_t *ex);
/* Wakes every worker blocked in the feature buffer; from now on groups fail with -ECANCELED.
 * For stopping a pipeline after an error. */
void tg_extract_shutdown(tg_extract_t *ex);

/* One batch of a group: X (n x feat_dim f32, row-major) receives row i = features of nodes[i]. */
typedef struct tg_extract_batch {
    uint64_t id; /* named in messages; the first batch's id picks the sweep direction */
    const uint64_t *nodes;
    uint32_t n;
    float *X;
} tg_extract_batch_t;

/* How a group reports to the pipeline that runs it (all optional). */
typedef struct tg_extract_hooks {
    /* Records a failure (rc and this thread's message) before the failed rows are completed. */
    void (*fail)(void *ctx, int rc, const char *msg);
    /* Scratch bytes the group holds (+ at start, - at the end), for peak reporting. */
    void (*scratch)(void *ctx, int64_t bytes);
    const atomic_int *abort; /* checked before every chunk: non-zero -> -ECANCELED */
    void *ctx;
} tg_extract_hooks_t;

/* Moves the rows of batches b[0..nb) into their X (see "A group" above). nb <= 16; node ids
 * must be < num_nodes and < 2^32. Returns 0, -ECANCELED (abort, shutdown) or the first error
 * (reported through hooks->fail unless it is -ECANCELED). */
int tg_extract_group(tg_extract_worker_t *w, const tg_extract_batch_t *b, int nb,
                     const tg_extract_hooks_t *hooks);

/* The counters of every tier in lookup order: the RAM tiers, "featbuf" (if any), "file".
 * Writes at most max entries and returns how many there are. reset != 0 zeroes them. */
int tg_extract_tier_stats(tg_extract_t *ex, tg_tier_stats_t *out, int max, int reset);

/* ---------------------------------------------------------------- rows to scattered places
 *
 * Rows whose places are not one X in node order: the slots of a strategy's own cache, or the
 * misses of a batch whose other rows another tier already copied (Ginex's executor fills its
 * changeset cache's slots and the rows its cache misses; store/extract_scatter.c):
 *
 *     tg_extract_scatter_t *sc;  tg_extract_scatter_create(&sc, pl.chunk, D, budget, "ginex");
 *     uint64_t *pairs = tg_extract_scatter_pairs(sc, n);     // node << 32 | place, n of them
 *     ... fill them, sorted by node, nodes distinct ...
 *     tg_extract_scatter_read(sc, w, batch_id, pairs, n, X, NULL, NULL, &hooks);     // X rows
 *     tg_extract_scatter_read(sc, w, batch_id, pairs, n, NULL, slot_of, cache, &hooks); // slots
 *     tg_extract_scatter_destroy(sc);
 *
 * A chunk of pairs at a time goes through the extraction (tg_extract_group with every tier,
 * merge and conversion as for a batch) into staging rows (chunk x dim f32), then row i to its
 * place: X + place x dim when X is given, else place_of(ctx, place) (dim f32). The cost beside
 * tg_extract_group: one memcpy of each row out of the staging. The staging (chunk x (dim x 4 +
 * 8) bytes, tg_extract_scatter_bytes) is reserved against the budget at create; the pairs
 * buffer grows on demand (by half again, 8 bytes a pair) and is not reserved: its caller bounds
 * n. Errors: tg_extract_group's; -ENOMEM naming who. One thread at a time. */
typedef struct tg_extract_scatter tg_extract_scatter_t;

uint64_t tg_extract_scatter_bytes(uint32_t chunk, uint32_t dim);
int tg_extract_scatter_create(tg_extract_scatter_t **out, uint32_t chunk, uint32_t dim,
                              tg_budget_t *budget, const char *who);
/* The pairs buffer, at least n pairs (n = 0 too; valid until the next call or destroy); NULL
 * after tg_err when memory runs out. */
uint64_t *tg_extract_scatter_pairs(tg_extract_scatter_t *sc, size_t n);
int tg_extract_scatter_read(tg_extract_scatter_t *sc, tg_extract_worker_t *w, uint64_t batch,
                            const uint64_t *pairs, size_t n, float *X,
                            void *(*place_of)(void *ctx, uint32_t place), void *place_ctx,
                            const tg_extract_hooks_t *hooks);
/* Returns the staging to the budget and frees. NULL is fine. */
void tg_extract_scatter_destroy(tg_extract_scatter_t *sc);

#ifdef __cplusplus
}
#endif
#endif
