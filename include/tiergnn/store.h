/* tiergnn/store.h - feature sources: where the feature rows of a batch come from.
 *
 * How to use:
 *     tg_store_opts_t so = {.normalize = 1, .budget = &budget};
 *     tg_store_t *st;
 *     if (tg_store_memory_open(&st, ds, &so) < 0) die(tg_errmsg());
 *     float *X = malloc(batch->num_nodes * st->dim * sizeof *X);
 *     tg_store_gather(st, batch->nodes, batch->num_nodes, X);   // row r = features of nodes[r]
 *     tg_store_release(st);
 *
 * A store is a small table of function pointers (tg_store_i), like ggml's backends. The in-memory
 * store reads the whole feature file once (f16 converted to f32); the out-of-core strategies
 * implement the same table over caches, packed chunks and the feature file. Every store returns
 * the same numbers for the same rows, so a strategy never changes what the model sees.
 *
 * Row normalisation (opts.normalize, `--normalize-features`): each row is divided by the sum of
 * its absolute values (L1), rows summing to 0 are left at 0, as in Kipf & Welling's preprocessing.
 * It is a property of the rows, applied by every store (tg_feat_normalize_rows), so it can be
 * done at load time (in-memory) or at gather time (out-of-core) with identical results.
 *
 * Threads: gather may be called from several threads at once (sampler threads gather ahead).
 *
 * Module: store/ knows nothing of models.
 */
#ifndef TIERGNN_STORE_H
#define TIERGNN_STORE_H

#include <stddef.h>
#include <stdint.h>

#include "tiergnn/data.h" /* tg_feat_dtype_t */
#include "tiergnn/util.h"

#ifdef __cplusplus
extern "C" {
#endif

struct tg_dataset;
typedef struct tg_store tg_store_t;

typedef struct tg_store_i {
    const char *name;
    /* out[i * dim .. (i+1) * dim) = features of nodes[i], for i < n, as f32. Ids must be
     * < num_nodes (-EINVAL naming the id otherwise). Thread-safe. */
    int (*gather)(tg_store_t *st, const uint64_t *nodes, size_t n, float *out);
    /* Frees everything, returns reserved bytes to the budget, frees st. */
    void (*release)(tg_store_t *st);
} tg_store_i;

struct tg_store {
    const tg_store_i *iface;
    uint64_t num_nodes;
    uint32_t dim;
    uint64_t mem_bytes; /* RAM the store holds (reserved against the budget) */
    void *impl;
};

typedef struct tg_store_opts {
    int normalize;       /* L1 row normalisation (see above) */
    tg_budget_t *budget; /* optional: the store's memory is reserved here */
    /* --verify-reads: every row read from features.bin is checked against its checksum
     * (tiergnn/rowcrc.h) before it is converted; a mismatch fails the open or the gather with
     * a message naming the file, offset and node. NULL = not checked. Borrowed: it must
     * outlive the store. */
    const struct tg_rowcrc *rowcrc;
} tg_store_opts_t;

static inline int tg_store_gather(tg_store_t *st, const uint64_t *nodes, size_t n, float *out)
{
    return st->iface->gather(st, nodes, n, out);
}
/* NULL is fine. */
void tg_store_release(tg_store_t *st);

/* The in-memory store: all N x D features as f32 in RAM (N * D * 4 bytes, reserved against
 * opts->budget). Reads the file in 64 MiB pieces. */
int tg_store_memory_open(tg_store_t **out, const struct tg_dataset *ds,
                         const tg_store_opts_t *opts);

/* The feature-file store: each gathered row is read from features.bin with pread (f16 widened,
 * normalised on the fly when asked). No RAM beyond the caller's output. One read per row through
 * the page cache: for a few rows, not for passes over most of the file (see row files below). */
int tg_store_file_open(tg_store_t **out, const struct tg_dataset *ds, const tg_store_opts_t *opts);

/* L1-normalises n rows of dim floats in place. */
void tg_feat_normalize_rows(float *x, size_t n, size_t dim);

/* The one conversion of feature rows (src/store/rows.c): dst[i * dim ..] = raw row i of src (dim
 * values of dtype at src + i * src_stride; src_stride 0 = packed rows) as f32, f16 widened, then
 * L1-normalised when normalize. Every store, the feature buffer and store/extract convert here,
 * so a row's numbers never depend on where it came from. src may equal dst (f32: converted in
 * place); for one f16 row src may also be the last dim * 2 bytes of dst's row (widened in place,
 * front to back). Other overlaps are not allowed. Time: O(n * dim). */
void tg_feat_rows_f32(float *dst, const void *src, size_t src_stride, size_t n, size_t dim,
                      tg_feat_dtype_t dtype, int normalize);

/* ================================================================ out-of-core stores
 *
 * Owner: the out-of-core storage work (src/store/mmap.c).
 *
 * The memory-mapped store (the "mmap" baseline, the papers' tuned PyG+): features.bin mapped
 * read-only with madvise(MADV_RANDOM), so a gathered row faults in only the pages it lies on and
 * the kernel reads nothing ahead. Nothing is reserved against opts->budget (mem_bytes = 0): the
 * rows live in the page cache, which only a cgroup limit bounds (tiergnn bench runs each
 * strategy under ../shared/tools/membudget for that). gather copies rows (f16 widened to f32,
 * L1-normalised when opts->normalize), under the SIGBUS guard of tg_mmap_file_guard
 * (tiergnn/graph.h): a feature file truncated under the run fails the gather with a message
 * naming features.bin and the offset, and the size is checked against meta.txt at open.
 * Thread-safe: gather keeps no state, so several threads may gather at once (see
 * tg_store_gather_parallel). */
int tg_store_mmap_open(tg_store_t **out, const struct tg_dataset *ds, const tg_store_opts_t *opts);

/* Gathers nodes[0..n) like tg_store_gather, with the rows split into contiguous ranges over the
 * threads of pool (tg_pool_for; NULL or one thread: inline). For thread-safe stores only (all of
 * this header's). Rows below 64 per thread are not worth a thread: small batches run inline.
 * The output does not depend on the thread count. On failure the first failing range's error
 * (lowest rows first) is returned with its message, on the calling thread. The pool must not be
 * running another tg_pool_for (the trainer's kernel pool usually is: give gathering its own). */
int tg_store_gather_parallel(tg_store_t *st, tg_pool_t *pool, const uint64_t *nodes, size_t n,
                             float *out);

/* ================================================================ row files read through io/
 *
 * A row file is num_rows packed rows of dim values of dtype from offset 0 of a file: features.bin,
 * or an intermediate matrix of a layer-wise pass (engine/layerwise.c). Passes that read most rows
 * of such a file in an order of their own (layer-wise evaluation and inference, which gather each
 * chunk's sources from all over the file) read it through here and never through the page cache:
 *   - open keeps the rows that fit in ram_bytes in RAM as f32, the most-read first (by weight),
 *     filled by one sequential pass over the file through io/ (O_DIRECT), so that a file that fits
 *     is read once;
 *   - gather copies resident rows and reads the others with one request per run of rows, sorted
 *     by offset and merged through holes of at most gap bytes (io/ merges adjacent blocks too).
 * Rows come out as every store's (tg_feat_rows_f32: f16 widened, L1-normalised when asked) and,
 * with a rowcrc, are checked before they are converted. Errors name the file and the offset.
 *
 *     tg_rowfile_opts_t o = {.path = p, .num_rows = n, .dim = d, .dtype = TG_F32,
 *                            .ram_bytes = 64 << 20, .budget = &budget};
 *     tg_rowfile_t *rf;
 *     if (tg_rowfile_open(&rf, &o) < 0) die(tg_errmsg());
 *     tg_rowfile_gather(rf, ids, k, X);          // X row i = row ids[i]
 *     tg_rowfile_close(rf);
 *
 * Memory: the resident rows (and, when not every row is resident, a 4-byte slot per row), the
 * io/ queue's staging and the gather's sort arrays are reserved against opts.budget.
 * Threads: one caller at a time per row file. */
struct tg_io_file;
struct tg_io_stats;
typedef struct tg_rowfile tg_rowfile_t;

typedef struct tg_rowfile_opts {
    const char *path;        /* the file, opened here (O_DIRECT where allowed) ... */
    struct tg_io_file *file; /* ... or an io/ file the caller opened: borrowed, must outlive */
    uint64_t num_rows;       /* the file must hold num_rows * dim values (checked at open) */
    uint32_t dim;
    tg_feat_dtype_t dtype;
    int normalize;                  /* L1 row normalisation (see above) */
    const struct tg_rowcrc *rowcrc; /* rows checked against their CRC-32 (NULL = not checked) */
    uint64_t ram_bytes;             /* RAM for resident rows and their slots; UINT64_MAX = all */
    const uint32_t *weight;         /* (num_rows) reads expected per row; NULL = the first rows */
    uint64_t gap;                   /* holes up to this many bytes are read through; 0 = 4096 */
    unsigned depth;                 /* reads in flight; 0 = 64 */
    tg_budget_t *budget;            /* optional */
    struct tg_io_stats *stats;      /* optional: io/ counts its reads here too */
} tg_rowfile_opts_t;

/* What a row file has done since open. */
typedef struct tg_rowfile_counts {
    uint64_t resident_rows; /* rows kept in RAM */
    uint64_t stream_bytes;  /* bytes the sequential pass at open asked for */
    uint64_t gather_rows;   /* rows gathered, resident or not */
    uint64_t miss_rows;     /* rows gathered from the file */
    uint64_t miss_requests; /* requests those took (runs of rows, before io/ merges blocks) */
    uint64_t miss_bytes;    /* bytes those requests asked for (rows and holes) */
} tg_rowfile_counts_t;

/* Opens the row file, chooses its resident rows (every row when num_rows * dim * 4 <= ram_bytes;
 * else the most weighted that fit beside the slots, ties to the lower id) and reads them with one
 * sequential pass. Time: O(num_rows) plus the pass. */
int tg_rowfile_open(tg_rowfile_t **out, const tg_rowfile_opts_t *o);
/* out[i * dim .. (i+1) * dim) = row ids[i] as f32, for i < n (ids in any order, repeats allowed,
 * each < num_rows: -EINVAL naming the id otherwise). On a failed read -EIO (or the read's code)
 * with the file and offset; out is then unspecified. Time: O(n) plus the reads. */
int tg_rowfile_gather(tg_rowfile_t *rf, const uint64_t *ids, size_t n, float *out);
void tg_rowfile_counts(const tg_rowfile_t *rf, tg_rowfile_counts_t *c);
/* Frees everything and returns the reservations. NULL is fine. */
void tg_rowfile_close(tg_rowfile_t *rf);

/* ---------------------------------------------------------------- the changeset tier
 *
 * A feature cache that follows precomputed changesets (tiergnn/changeset.h; Ginex, Park et al.,
 * section 3.3): direct addressing over every node (a u32 slot per node) and `entries` slots of
 * row_bytes. Its rows are whatever its owner writes there (Ginex keeps them as the batch input
 * holds them, f32 and normalised when asked, so a hit is one memcpy), so it is asked directly,
 * not through an extraction's tiers (whose rows are the file's raw rows). It changes only when
 * its owner moves it, from one thread between lookups; lookups take no lock.
 *
 *     tg_tier_t *t;  tg_tier_cs_create(&t, "ginex-cache", N, entries, row_bytes, budget);
 *     n = tg_tier_cs_retain(t, c0, n0, fill);    // a plan's initial state; read each fill[i]'s
 *         ... row (node fill[i] >> 32) into tg_tier_cs_row(t, (uint32_t)fill[i]) ...
 *     m = tg_tier_cs_gather(t, b->nodes, b->num_nodes, X, miss);  // hits into X, misses listed
 *         ... read the misses into X ...
 *     tg_tier_cs_apply(t, &cs, i, b->nodes, b->num_nodes, X);       // iteration i's changeset
 *     tg_tier_stats(t, &ts, 1);  tg_tier_destroy(t);                   // (tiergnn/extract.h)
 */
typedef struct tg_tier tg_tier_t;
struct tg_cs;

/* Bytes a changeset tier reserves: the address table (4 per node) and per entry its row, its
 * owner and its place on the free stack. */
uint64_t tg_tier_cs_bytes(uint64_t num_nodes, uint64_t entries, size_t row_bytes);
/* An empty tier (every slot free; name NULL = "changeset"), reserved against budget (NULL = not
 * accounted) first. -EINVAL unless row_bytes > 0, num_nodes < 2^32 - 1 and entries <=
 * num_nodes; -ENOMEM. tg_tier_destroy frees it and returns its bytes. */
int tg_tier_cs_create(tg_tier_t **out, const char *name, uint64_t num_nodes, uint64_t entries,
                      size_t row_bytes, tg_budget_t *budget);
/* Its slots (0 for a tier of another kind). */
uint64_t tg_tier_cs_entries(const tg_tier_t *t);
/* The nodes it holds, in slot order, into nodes (room for tg_tier_cs_entries; NULL: only
 * counted); returns how many. O(entries). */
uint64_t tg_tier_cs_held(const tg_tier_t *t, uint32_t *nodes);
/* The row of a slot (row_bytes), valid until the tier is destroyed. */
void *tg_tier_cs_row(tg_tier_t *t, uint32_t slot);
/* A batch's lookup: for r < n, the row of nodes[r] when held is copied to X + r x row_bytes;
 * the others go to miss (room for n) as nodes[r] << 32 | r, sorted by node (the reads' order).
 * Returns how many missed; counts n lookups and the hits. O(n + misses log misses). */
size_t tg_tier_cs_gather(tg_tier_t *t, const uint64_t *nodes, uint32_t n, void *X, uint64_t *miss);
/* Moves the tier to hold exactly state[0..n) (distinct ids, n <= entries): evicts the nodes not
 * in it and gives each node of it not held a free slot, listed in fill (room for n) as
 * node << 32 | slot, sorted by node; the caller writes those rows (tg_tier_cs_row) before the
 * next lookup. Returns how many. O(n + entries + fills log fills). */
size_t tg_tier_cs_retain(tg_tier_t *t, const uint32_t *state, uint64_t n, uint64_t *fill);
/* Applies iteration i of cs (nothing when i >= cs->iters) after its batch's lookup: evicts its
 * out_ids, then inserts its in_ids, each row copied from X at its position in nodes[0..n) (the
 * batch's input, rows of row_bytes). -EIO naming the node when the changeset does not fit the
 * tier's state (an evicted node not held, an inserted one held, at a wrong position, or no free
 * slot): the changeset was not computed from this state, an internal error. */
int tg_tier_cs_apply(tg_tier_t *t, const struct tg_cs *cs, uint32_t i, const uint64_t *nodes,
                     uint32_t n, const void *X);

#ifdef __cplusplus
}
#endif
#endif
