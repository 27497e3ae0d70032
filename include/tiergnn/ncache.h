/* tiergnn/ncache.h - Ginex's static neighbour cache (Park et al., "Ginex", PVLDB 15(11), section
 * 3.2): the in-neighbour lists of the nodes with the highest out-degree / in-degree ratio, kept
 * in RAM so that the samplers read them without I/O. A tier of the disk adjacency: attach it
 * with tg_adj_disk_attach_ncache (tiergnn/graph.h) and every read serves the positions of
 * cached nodes from here and sends only the others to the disk.
 *
 * How to use:
 *     tg_ncache_t *nc;
 *     tg_ncache_open(&nc, ds, NULL, 256 << 20, budget, NULL);  // builds derived/ncache-... once
 *     tg_adj_disk_attach_ncache(adj, nc);                       // adj owns nc from here
 *     ... sample ...
 *     tg_ncache_stats_t st;
 *     tg_ncache_stats(nc, &st, 1);                              // lookups, hits, entries served
 *
 * Selection (the paper's metric, after AliGraph): nodes ranked by out-degree / in-degree
 * (out-degree = appearances in indices.bin, graph/outdeg's counts; in-degree = the indptr
 * difference), descending, compared exactly as fractions; ties (every ratio is 1 on an
 * undirected graph) by out-degree descending, then id ascending. Nodes with in-degree 0 are
 * never cached. Nodes are taken in that order while the cache's RAM (address table + array)
 * stays within the size asked for; a node that does not fit is skipped and the next ones are
 * still tried (greedy filling by benefit per byte: stopping at the first misfit would leave the
 * rest of the space empty, e.g. on an undirected graph, where the ties put the largest lists
 * first).
 *
 * Structure (the paper's Fig. 10): address_table, one u32 per node: the index of the node's
 * entry in cache_array, or TG_NCACHE_MISS; cache_array, u32: at the entry, the in-degree, then
 * the in-neighbour ids in CSC order, so edge position p of a cached node v is
 * cache_array[a + 1 + (p - indptr[v])]. Entries lie in node-id order (the build streams
 * indices.bin once). Sizes: address table N x 4 bytes, array (nodes + edges cached) x 4 bytes;
 * the array holds at most 2^32 - 1 entries (16 GiB) and ids are u32, so graphs of 2^32 nodes or
 * more are refused.
 *
 * The derived file (kind "ncache", params "bytes=B,v=1"; tiergnn/derived.h): payload = a 64-byte
 * header (magic "TGNCACHE", version, nodes, edges, bytes, cached nodes, cached edges, array
 * entries), the address table, the array. Built in bounded memory: indptr (8 N), the
 * out-degrees and the ranking (8 N), a selection bitmap and ~12 MiB of buffers, never the edges
 * (indices.bin is read once, sequentially, 4 MiB at a time, skipping pieces that hold no cached
 * list). Written through the derived writer (temp file, fsync, rename), reused while the
 * dataset's checksums and the params match, rebuilt when stale. Loading checks the payload's
 * CRC-32 against the header's and every address against the array's bounds, so a damaged file
 * is refused (-EINVAL naming it), never trusted; tg_adj_disk_attach_ncache also checks every
 * cached count against indptr. When the derived directory cannot be written, open builds the
 * cache in RAM instead (a log line says so).
 *
 * Ownership: tg_ncache_open's caller owns the cache until tg_ncache_close or until it hands it
 * to tg_adj_disk_attach_ncache. Lookups and counters are thread-safe; the cache never changes
 * after open.
 *
 * Errors: 0 or -errno with tg_err(): bytes below the address table or above the array's limit,
 * -ENOMEM naming the neighbour cache and its bytes when the budget cannot hold it, read errors
 * naming the file and offset.
 * Module: graph/. Knows data/ (derived files), io/, util/ and graph/outdeg. */
#ifndef TIERGNN_NCACHE_H
#define TIERGNN_NCACHE_H

#include <stdint.h>

#include "tiergnn/data.h"
#include "tiergnn/io.h"
#include "tiergnn/util.h"

#ifdef __cplusplus
extern "C" {
#endif

#define TG_NCACHE_KIND "ncache"
#define TG_NCACHE_VERSION 1
#define TG_NCACHE_MISS UINT32_MAX /* address_table entry of a node not cached */

typedef struct tg_ncache tg_ncache_t;

/* The smallest size accepted for ds: the address table (N x 4 bytes). */
uint64_t tg_ncache_min_bytes(const tg_dataset_t *ds);
/* The size that caches every in-neighbour list of the graph of indptr (num_nodes + 1 entries):
 * a larger size caches nothing more (callers cap at it, so that one derived file serves every
 * larger size). */
uint64_t tg_ncache_full_bytes(uint64_t num_nodes, const uint64_t *indptr);

/* Finds the derived cache of ds for bytes valid (returns 0) or builds it (returns 1); 2 when the
 * derived directory cannot be written (logged: open will build in RAM). The build's memory is
 * reserved against budget (NULL: not accounted); its reads of indices.bin count into stats
 * (NULL: not counted). root as in tiergnn/derived.h. */
int tg_ncache_prepare(const tg_dataset_t *ds, const char *root, uint64_t bytes, tg_budget_t *budget,
                      tg_io_stats_t *stats);

/* Opens (building when missing or stale, in RAM when the directory cannot be written) and loads
 * the cache of ds for bytes: address table and array reserved against budget as "neighbour
 * cache", read with large sequential reads (O_DIRECT where the file system allows). */
int tg_ncache_open(tg_ncache_t **out, const tg_dataset_t *ds, const char *root, uint64_t bytes,
                   tg_budget_t *budget, tg_io_stats_t *stats);
/* Frees the arrays and releases the budget. NULL is fine. */
void tg_ncache_close(tg_ncache_t *nc);

typedef struct tg_ncache_info {
    uint64_t num_nodes, num_edges; /* of the graph it was built for */
    uint64_t bytes;                /* the size asked for */
    uint64_t mem_bytes;            /* what it holds: address table + array */
    uint64_t nodes;                /* nodes cached */
    uint64_t edges;                /* in-neighbour entries cached */
    uint64_t array_len;            /* cache_array entries (nodes + edges) */
    int built;                     /* open built it (1) or found it valid (0) */
    int in_ram;                    /* built in RAM: the derived directory was not writable */
} tg_ncache_info_t;

void tg_ncache_info(const tg_ncache_t *nc, tg_ncache_info_t *out);

/* The cached in-neighbours of v (*deg of them), or NULL when v is not cached (or v >= N). */
const uint32_t *tg_ncache_find(const tg_ncache_t *nc, uint64_t v, uint64_t *deg);
/* The raw arrays (address table: N entries; array: array_len entries). */
const uint32_t *tg_ncache_address_table(const tg_ncache_t *nc);
const uint32_t *tg_ncache_array(const tg_ncache_t *nc);

/* Reads of a tier: nodes asked, nodes served, neighbour ids served. */
typedef struct tg_ncache_stats {
    uint64_t lookups, hits, entries;
} tg_ncache_stats_t;

/* Adds a read's figures (atomic: readers call it once per read). */
void tg_ncache_count(tg_ncache_t *nc, uint64_t lookups, uint64_t hits, uint64_t entries);
/* The counters since open or the last reset; reset: exchanged with 0 (per-pass figures). */
void tg_ncache_stats(tg_ncache_t *nc, tg_ncache_stats_t *st, int reset);

#ifdef __cplusplus
}
#endif
#endif
