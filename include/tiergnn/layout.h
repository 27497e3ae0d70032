/* tiergnn/layout.h - DiskGNN's feature layout planner (Liu et al., "DiskGNN", sections 4 and 5.1,
 * Algorithms 1 and 2): where every feature row of an epoch's sampled batches lives, decided ahead
 * from the trace of their input rows.
 *
 * The trace is B batches (tg_cs_trace_t: batch b = iteration b, its ids the rows of its input
 * matrix X in X order, distinct within a batch, ids < num_nodes). The layout puts each row in:
 *   - the hot tier (RAM): the hot_rows nodes used by the most batches (a node counts once per
 *     batch; ties: lower id first; only nodes used at least once), ascending by id; hot slot i
 *     holds hot[i]. (The paper's GPU and CPU caches are one RAM cache here: no GPU.)
 *   - a segmented disk cache: the batches are cut into segments of `segment` consecutive
 *     batches (the last may be shorter); a non-hot node used by >= 2 batches of segment k has one
 *     row in segment k's cache region;
 *   - packed chunks: a non-hot node used by exactly one batch of segment k is a row of that
 *     batch's chunk. A batch reads its chunk whole with one large read.
 *
 * Cache order (Algorithm 1, MinHash): for segment k, num_hashes random permutations perm_j of
 * its batches (drawn from tg_rng_seed2(seed, k)); a cache node's key is (h_1 .. h_nh, F, node)
 * with h_j = min of perm_j over the segment's batches using it, F a 64-bit fingerprint of that
 * exact set of batches (the XOR of one random word per batch). The h-values are packed in 64
 * bits, so only as many hashes as fit are used (all of them below 2^16 batches a segment). Sorting
 * by the key places rows wanted by similar sets of batches side by side, so a batch's cache rows
 * share pages. F is tiergnn's addition to the paper: rows with identical sets stay contiguous even
 * where the h-values of different sets collide. Packing reads the feature file in partitions
 * (below) and writes every cache row while its partition is in RAM, so segment k's region is cut
 * into one sub-region per partition, in partition order, each sorted by the key
 * ("partition-major"). With many small partitions the MinHash order only acts within each;
 * tg_layout_summary gives the read estimate with and without it.
 *
 * Files: the cache file is the segments' regions one after the other, slot s at byte s *
 * row_bytes (no padding between slots; the file's end padded to chunk_align); the chunk file is
 * the batches' chunks one after the other, each starting at a multiple of chunk_align (padded
 * to it) so O_DIRECT reads a chunk whole; a chunk's rows are its nodes in ascending order.
 *
 * Partitions: consecutive node ranges [lo, hi) covering [0, num_nodes), cut greedily so that a
 * partition's rows of the feature file plus every row it sends to an output (its hot rows, one
 * per segment whose cache holds the node, one per chunk holding it), all times row_bytes, take
 * at most pack_bytes. A node whose own rows exceed pack_bytes is a partition by itself (the
 * packer must hold it anyway). pack_bytes 0: one partition. Partition p sends one contiguous
 * slot range to each segment's cache region and one contiguous row range to each chunk (a
 * sub-region and a chunk are in node order across partitions), so its writes are large appends.
 *
 * Segment size (segment = 0, Algorithm 2's 1-D search): for s = 1, 2, ..., B the estimate
 * (distinct non-hot nodes of the first s batches) x B / s x row_bytes (rounded up) is computed
 * incrementally; the first s whose estimate <= disk_budget is taken (B if none). The exact disk
 * bytes of that s (cache file + chunk file with the chunks' padding) are then computed; while they
 * exceed the budget, s grows: by 1 when within 10% of the budget, else to s x (exact / budget)
 * (disk falls slower than 1/s, so this undershoots the s needed); after a jump of more than 1 that
 * fits, a bisection between the last s that did not fit and it finds the smallest fitting s (disk
 * is close to monotone in s; every s taken was measured and fits). If s = B does not fit: -ENOSPC
 * naming the bytes s = B needs (one copy of each non-hot row: the least any segment size needs
 * but for the chunks' padding, which only matters for chunks of a few pages). disk_budget 0 =
 * unbounded: s = 1, the paper's pure packing (no cache, every non-hot row in its batch's chunk). A
 * given segment > 0 is used as is (B if larger) and still checked against the budget. Every
 * estimate and exact measurement is kept as a step for the log.
 *
 *     tg_layout_cfg_t cfg = {.num_nodes = N, .row_bytes = F * 4, .hot_rows = H,
 *                            .disk_budget = D, .pack_bytes = P, .seed = seed};
 *     tg_layout_t *L;
 *     tg_layout_plan(&L, &trace, &cfg, budget);     // the trace may be freed afterwards
 *     tg_layout_summary_t sum; tg_layout_summary(L, &sum);
 *     packer:   for p < sum.num_partitions: tg_layout_partition(L, p, &lo, &hi, &n);
 *               tg_layout_targets(L, p, buf, n, &n)  // (node, out, off) sorted
 *     executor: tg_layout_loc_init(&loc, longest batch, budget);
 *               tg_layout_locate(L, b, ids_b, n_b, &loc);   // per tier: X rows and offsets
 *     tg_layout_loc_free(&loc); tg_layout_destroy(L);
 *
 * Memory kept by the layout (tg_layout_t, reserved against the budget until destroy): 4 bytes
 * per hot row, 4 per packed row (each batch's chunk nodes, sorted), 8 per cache row (each
 * segment's cache nodes sorted by node, and their slots), 24 per batch (chunk row and byte
 * offsets, the segments' first slots), 12 per partition, 16 x (2B + 2) for the search steps. A
 * cache row serves >= 2 accesses, so this is at most 4 bytes per non-hot access plus the hot
 * list and the per-batch and per-partition entries. Planning also holds 8 bytes per node (counts
 * and marks) and max(48 x the largest segment's cache rows + 24 per batch of a segment, 4 x
 * max(its cache rows, the longest chunk)) of temporaries; tg_layout_bytes bounds both before
 * planning, the summary reports both after.
 *
 * Time, for T accesses: O(num_nodes + T) for the check, the counts, the hot choice and the
 * partitions; O(T) per exact measurement of a segment size (the search takes a few) and for the
 * lists, the MinHash keys and the read estimates, with radix sorts (node lists; the cache keys
 * within each partition's run). bench/bench_layout.c, 40 batches x 300k ids over 4M nodes
 * (power law), 512-byte rows, 2-core dev machine: 1.5 s for a given segment size, 2.9 s with
 * the search (30 steps, 7 of them exact at about 0.2 s each); locate about 30-40 ns per id,
 * targets about 15 ns each.
 *
 * Module: store/. Pure computation over arrays: knows util/ and changeset.h's trace type only.
 */
#ifndef TIERGNN_LAYOUT_H
#define TIERGNN_LAYOUT_H

#include <stddef.h>
#include <stdint.h>

#include "tiergnn/changeset.h"
#include "tiergnn/util.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Outputs of packing (tg_pack_target_t.out) and tiers of a row. */
enum { TG_LAYOUT_HOT = 0, TG_LAYOUT_CACHE = 1, TG_LAYOUT_CHUNK = 2 };

#define TG_LAYOUT_MAX_HASHES 4
#define TG_LAYOUT_DEFAULT_ALIGN 4096u

/* One row written by packing: node's feature row goes to output `out` at byte `off`: RAM hot
 * buffer (off = slot x row_bytes), cache file or chunk file. */
#ifndef TG_PACK_TARGET_DEFINED
#define TG_PACK_TARGET_DEFINED /* tiergnn/pack.h defines the same record */
typedef struct tg_pack_target {
    uint32_t node;
    uint32_t out; /* TG_LAYOUT_HOT / CACHE / CHUNK */
    uint64_t off;
} tg_pack_target_t;
#endif

typedef struct tg_layout_cfg {
    uint64_t num_nodes;   /* ids < num_nodes <= 2^32 - 1 */
    uint64_t row_bytes;   /* one feature row on disk, 1 .. 2^30 */
    uint64_t hot_rows;    /* rows of the RAM cache */
    uint32_t segment;     /* batches per segment; 0 = Algorithm 2's search */
    uint32_t num_hashes;  /* MinHash permutations 1 .. TG_LAYOUT_MAX_HASHES; 0 = 2 */
    uint64_t seed;        /* the permutations and fingerprints */
    uint64_t disk_budget; /* bytes of cache file + chunk file; 0 = unbounded */
    uint64_t pack_bytes;  /* RAM of one packing partition; 0 = one partition */
    uint32_t chunk_align; /* power of two; 0 = 4096 */
    uint32_t page_bytes;  /* page of the read estimate; 0 = 4096 */
    /* A hot set chosen before (by an earlier layout, its rows kept in RAM): num_hot_given ids,
     * strictly ascending, < num_nodes. hot_rows is then ignored, the hot tier is exactly these
     * nodes (used by the batches or not), and packing gets no hot targets: their rows are held
     * already. (DiskGNN with fresh samples every epoch keeps the first epoch's hot rows.) */
    const uint32_t *hot_given;
    uint64_t num_hot_given;
} tg_layout_cfg_t;

/* One step of the segment search: kind 0 = Algorithm 2's estimate, 1 = the exact layout. */
typedef struct tg_layout_step {
    uint32_t segment;
    uint16_t exact;
    uint16_t fits;       /* disk_bytes <= disk_budget */
    uint64_t disk_bytes; /* estimated or exact */
} tg_layout_step_t;

typedef struct tg_layout_summary {
    uint32_t batches, segment, num_segments, num_hashes;
    uint32_t search_segment; /* Algorithm 2's pick before the exact check (0: not searched) */
    uint64_t num_partitions;
    uint64_t hot_rows, cache_rows, packed_rows;
    uint64_t cache_file_bytes; /* cache rows x row_bytes, padded to chunk_align */
    uint64_t chunk_file_bytes; /* the chunks, each padded to chunk_align */
    uint64_t disk_bytes;       /* cache + chunk file */
    uint64_t accesses, hot_accesses;
    uint64_t needed_bytes;               /* non-hot accesses x row_bytes */
    uint64_t read_bytes;                 /* one pass: chunks (padded) + cache pages touched */
    uint64_t read_bytes_nominhash;       /* the same with cache rows in node order */
    double read_amp, read_amp_nominhash; /* read / needed (0 when nothing is needed) */
    uint32_t num_steps;
    const tg_layout_step_t *steps; /* valid until tg_layout_destroy */
    uint64_t reserved;             /* bytes the layout holds (reserved when budgeted) */
    uint64_t plan_peak_bytes;      /* most bytes tg_layout_plan held at once */
} tg_layout_summary_t;

typedef struct tg_layout tg_layout_t;

/* Upper bounds before planning, for B batches of T accesses in all: the bytes the layout keeps
 * (returned) and, into *plan_peak when not NULL, the most tg_layout_plan reserves at once
 * (kept + 8 per node + the temporaries). */
uint64_t tg_layout_bytes(const tg_layout_cfg_t *cfg, uint32_t B, uint64_t T, uint64_t *plan_peak);

/* Plans the layout of trace t (see above) into *out. Everything is reserved against budget
 * (NULL = not accounted) before it is allocated; -ENOMEM names what and how much. -EINVAL for a
 * bad configuration or trace (the message names the batch and position), -ENOSPC when the
 * batches do not fit disk_budget (the message gives the bytes they need). Nothing is left held
 * on error. The trace is not referenced afterwards. */
int tg_layout_plan(tg_layout_t **out, const tg_cs_trace_t *t, const tg_layout_cfg_t *cfg,
                   tg_budget_t *budget);
void tg_layout_destroy(tg_layout_t *L);

void tg_layout_summary(const tg_layout_t *L, tg_layout_summary_t *sum);

/* The hot nodes, ascending (slot i = hot[i]); valid until tg_layout_destroy. */
const uint32_t *tg_layout_hot(const tg_layout_t *L, uint64_t *n);

/* Partition p < num_partitions: nodes [*lo, *hi) and its number of targets. -EINVAL if p is out
 * of range. */
int tg_layout_partition(const tg_layout_t *L, uint64_t p, uint32_t *lo, uint32_t *hi,
                        uint64_t *ntargets);

/* Every (node, output, offset) of partition p into out[0 .. *n), sorted by (node, out, off): a
 * hot node's slot, one slot per segment caching the node, one row per chunk holding it. cap must
 * hold the partition's count (-EINVAL otherwise). Uses 4 bytes per node of the partition's range
 * of temporaries (reserved against the layout's budget). Thread-safe against other const calls.
 * O(range + targets + (B + segments) log). */
int tg_layout_targets(const tg_layout_t *L, uint64_t p, tg_pack_target_t *out, uint64_t cap,
                      uint64_t *n);

/* Where batch b's rows come from, for the executor assembling X. Arrays owned by the struct,
 * each with room for cap rows (tg_layout_loc_init). */
typedef struct tg_layout_loc {
    uint64_t cap;
    uint64_t n_hot, n_cache, n_chunk;
    uint32_t *hot_pos, *hot_slot; /* (n_hot) X row, hot slot; slots ascending */
    uint32_t *cache_pos;          /* (n_cache) X row ...                              */
    uint64_t *cache_off;          /* (n_cache) ... and its cache file offset, ascending */
    uint32_t *chunk_pos;          /* (n_chunk) X row of chunk row k (chunk order)     */
    uint64_t chunk_off;           /* the batch's chunk: byte offset in the chunk file */
    uint64_t chunk_bytes;         /* n_chunk x row_bytes */
    uint64_t chunk_read;          /* chunk_bytes padded to chunk_align (what to read) */
    uint64_t *tmp;                /* (cap) sort scratch */
    tg_budget_t *budget;
    uint64_t reserved;
} tg_layout_loc_t;

/* Bytes of a tg_layout_loc_t for cap rows (32 per row). */
uint64_t tg_layout_loc_bytes(uint64_t cap);
int tg_layout_loc_init(tg_layout_loc_t *loc, uint64_t cap, tg_budget_t *budget);
void tg_layout_loc_free(tg_layout_loc_t *loc);

/* Batch b's ids in X order (exactly the trace's batch b, any order) into loc: hot rows by slot,
 * cache rows sorted by offset (so reads merge), chunk rows in chunk order. -EINVAL when an id
 * repeats, is not one of the batch's rows (one that is hot, or cached in its segment, is not
 * caught), the chunk's rows are not all named, or n > loc->cap. O(n) for the radix sorts and a
 * galloping walk along the hot list, the chunk and the segment's cache list (sorted by node). */
int tg_layout_locate(const tg_layout_t *L, uint32_t b, const uint32_t *ids, uint64_t n,
                     tg_layout_loc_t *loc);

#ifdef __cplusplus
}
#endif
#endif
