/* tiergnn/graph.h - mini-batches as seen by the neural engine: seed nodes + per-layer blocks.
 *
 * A batch for an L-layer model holds L bipartite blocks. Block l maps the representations of its
 * num_src source nodes (layer l's input) to its num_dst destination nodes (layer l's output).
 * Destination nodes come first among the sources (dst i is src i), and block l+1's sources are
 * exactly block l's destinations, so one array of global ids describes every layer:
 *
 *     nodes[0 .. blocks[0].num_src)      every node whose input features the batch needs
 *     nodes[0 .. blocks[l].num_dst)      the nodes layer l computes
 *     nodes[0 .. num_seeds)              the seeds (= blocks[L-1].num_dst), whose loss is taken
 *
 * Edges are a local CSR over destinations: the in-neighbours (sources) of dst i in block l are
 * blocks[l].indices[blocks[l].indptr[i] .. blocks[l].indptr[i+1]), as local source positions.
 * A model with fanout 0 (MLP) gets blocks with no edges.
 *
 * The feature matrix of a batch is float X[blocks[0].num_src][D], row r = features of nodes[r];
 * where those rows come from (RAM, a cache, the disk) is the strategy's business, not the model's.
 *
 * Ownership: a tg_batch_t owns its arrays; tg_batch_free releases them.
 */
#ifndef TIERGNN_GRAPH_H
#define TIERGNN_GRAPH_H

#include <stddef.h>
#include <stdint.h>

#include "tiergnn/util.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct tg_block {
    uint32_t num_dst, num_src;
    uint64_t num_edges;
    uint64_t *indptr;  /* (num_dst + 1) */
    uint32_t *indices; /* (num_edges) local source positions, each < num_src */
} tg_block_t;

typedef struct tg_batch {
    int num_layers;
    tg_block_t *blocks; /* (num_layers): blocks[0] is the input layer */
    uint64_t *nodes;    /* (blocks[0].num_src) global node ids */
    uint32_t num_nodes; /* = blocks[0].num_src */
    uint32_t num_seeds; /* = blocks[num_layers-1].num_dst */
    uint64_t id;        /* batch number within the epoch (pipelines may finish out of order) */
} tg_batch_t;

void tg_batch_free(tg_batch_t *b);

/* ================================================================ adjacency access
 *
 * The sampler never touches the indices array directly: it asks a tg_adj_t for the neighbours at
 * given edge positions. indptr (N+1 u64) is always in RAM - it is small, and knowing degrees
 * without I/O lets the sampler choose positions first and fetch them in one batched call per
 * layer. The in-memory implementation below reads an array; a disk-resident one (later issue)
 * implements the same table over io/, coalescing the positions of a call into page reads.
 *
 *     tg_adj_t *adj;
 *     if (tg_adj_memory_open(&adj, ds) < 0) die(tg_errmsg());   // loads indptr + indices
 *     uint64_t v = 7, beg = adj->indptr[v], deg = adj->indptr[v + 1] - beg;
 *     ... tg_adj_read(adj, positions, n, neighbours) ...
 *     tg_adj_destroy(adj);
 */
typedef struct tg_adj tg_adj_t;

typedef struct tg_adj_i {
    const char *name;
    /* out[i] = indices[pos[i]] for i in [0, n). Callers pass the positions of many nodes at once,
     * grouped by node and ascending within a node. Must be safe to call from several threads at
     * once. Returns 0 or a negative error code with a message. */
    int (*read)(tg_adj_t *adj, const uint64_t *pos, size_t n, uint64_t *out);
    /* Frees the implementation and adj itself. */
    void (*destroy)(tg_adj_t *adj);
} tg_adj_i;

struct tg_adj {
    const tg_adj_i *iface;
    uint64_t num_nodes, num_edges;
    const uint64_t *indptr; /* (num_nodes + 1), in RAM; owned by the implementation */
    void *impl;
};

static inline uint64_t tg_adj_degree(const tg_adj_t *adj, uint64_t v)
{
    return adj->indptr[v + 1] - adj->indptr[v];
}
static inline int tg_adj_read(tg_adj_t *adj, const uint64_t *pos, size_t n, uint64_t *out)
{
    return adj->iface->read(adj, pos, n, out);
}
void tg_adj_destroy(tg_adj_t *adj);

/* In-memory adjacency over caller arrays. With own != 0 it takes ownership of indptr and indices
 * (freed by tg_adj_destroy, also on failure); otherwise they must outlive adj. Checks that indptr
 * is monotone and ends at num_edges; ids are checked lazily by the sampler. */
int tg_adj_memory_create(tg_adj_t **out, uint64_t num_nodes, uint64_t num_edges,
                         const uint64_t *indptr, const uint64_t *indices, int own);
/* Loads indptr and the indices (widened to u64) of a dataset into RAM. */
struct tg_dataset;
int tg_adj_memory_open(tg_adj_t **out, const struct tg_dataset *ds);

/* ================================================================ node-wise sampler
 *
 * Uniform neighbour sampling without replacement, one fanout per layer, as in GraphSAGE:
 * starting from the seeds, block L-1 takes up to fanouts[L-1] distinct in-neighbour edges of every
 * seed, block L-2 up to fanouts[L-2] of every node reached so far, and so on down to block 0.
 * fanouts[l] belongs to block l (blocks[0] is the input layer, as in DGL): "--fanouts 25,10" gives
 * 10 neighbours per seed and 25 per 1-hop node. A fanout of -1 takes every neighbour (full
 * neighbourhood, for evaluation); 0 takes none (blocks without edges, for an MLP).
 *
 * Node order is deterministic: seeds first (in the given order), then each newly reached node in
 * order of first appearance. The edges of one destination are in ascending edge position order
 * (the order of the CSC file). Sampling depends only on the seeds and the RNG state, so the same
 * (seed, epoch, batch) always gives the same batch, whatever the thread count.
 *
 *     tg_sampler_t *s;
 *     int64_t fan[2] = {25, 10};
 *     tg_sampler_create(&s, adj, 2, fan);
 *     tg_rng_t r; tg_sampler_batch_rng(&r, seed, epoch, batch_id);
 *     tg_batch_t b; tg_sampler_sample(s, seeds, n, &r, &b);  ... tg_batch_free(&b);
 *     tg_sampler_destroy(s);
 *
 * A tg_sampler_t holds scratch space and is used by one thread at a time; make one per thread.
 * Cost: O(sum over sampled nodes of min(fanout, degree)) time plus one tg_adj_read per layer.
 */
#define TG_MAX_LAYERS 16
#define TG_FANOUT_ALL (-1)

typedef struct tg_sampler tg_sampler_t;

int tg_sampler_create(tg_sampler_t **out, tg_adj_t *adj, int num_layers, const int64_t *fanouts);
void tg_sampler_destroy(tg_sampler_t *s);
/* Samples the batch of seeds[0..n) (distinct node ids < num_nodes) into *out (caller frees with
 * tg_batch_free). out->id is set to 0; the caller numbers batches. */
int tg_sampler_sample(tg_sampler_t *s, const uint64_t *seeds, size_t n, tg_rng_t *rng,
                      tg_batch_t *out);

/* The RNG of batch `batch` of epoch `epoch` of a run seeded with `seed`. Every component that
 * samples (any strategy, any thread) derives it this way, so batches never depend on timing. */
void tg_sampler_batch_rng(tg_rng_t *r, uint64_t seed, uint64_t epoch, uint64_t batch);
/* Shuffles ids[0..n) in place with the RNG of (seed, epoch): the seed order of an epoch. */
void tg_sampler_shuffle_epoch(uint64_t *ids, size_t n, uint64_t seed, uint64_t epoch);

/* Parses "10,10,10" / "-1,-1" into fanouts; *n receives the count. Each value must be an integer
 * >= -1; at most TG_MAX_LAYERS values. Errors name the offending item. */
int tg_fanouts_parse(const char *s, int64_t *fanouts, int *n);

/* ================================================================ concurrent loader
 *
 * Samples the batches of one epoch on worker threads, ahead of the consumer, and hands them out
 * strictly in batch-id order. Worker t samples batches t, t+T, t+2T, ... into its own bounded
 * queue, and the consumer pops batch b from queue b mod T, so order and content are the same for
 * any T and any timing; no reorder buffer is needed and a slow batch only delays its own queue.
 * An optional hook runs on the worker after sampling (a strategy gathers features there).
 *
 *     tg_loader_opts_t o = {.adj = adj, .num_layers = 2, .fanouts = fan, .seeds = order,
 *                           .num_seeds = n, .batch_size = 1024, .seed = seed, .epoch = e,
 *                           .num_threads = 2, .prefetch = 2};
 *     tg_loader_t *ld; tg_loader_start(&ld, &o);
 *     tg_loader_item_t *it;
 *     while ((rc = tg_loader_next(ld, &it)) > 0) { ... use it->batch ...; tg_loader_item_free(ld,
 * it); } tg_loader_stop(ld);            // also fine mid-epoch: joins workers, frees queued items
 *
 * With num_threads == 0 batches are sampled inline in tg_loader_next (no threads at all).
 */
typedef struct tg_loader_item {
    tg_batch_t batch; /* batch.id = position in the epoch */
    void *payload;    /* what the hook produced (e.g. the gathered feature matrix) */
    double sample_s;  /* seconds spent sampling this batch */
    double hook_s;    /* seconds spent in the hook */
} tg_loader_item_t;

typedef struct tg_loader_opts {
    tg_adj_t *adj;
    int num_layers;
    const int64_t *fanouts;
    const uint64_t *seeds; /* the epoch's seed order; must outlive the loader */
    uint64_t num_seeds;
    uint64_t batch_size; /* seeds per batch (the last batch may be smaller); >= 1 */
    uint64_t seed, epoch;
    int num_threads; /* sampler threads; 0 = sample inline in tg_loader_next */
    size_t prefetch; /* batches each worker may have ready (default 2 if 0) */
    /* Optional: runs after sampling on the same thread; fills it->payload. */
    int (*hook)(void *ctx, tg_loader_item_t *it);
    /* Optional: frees a payload (items discarded by tg_loader_stop or tg_loader_item_free). */
    void (*hook_free)(void *ctx, void *payload);
    void *ctx;
} tg_loader_opts_t;

typedef struct tg_loader tg_loader_t;

int tg_loader_start(tg_loader_t **out, const tg_loader_opts_t *o);
/* Number of batches in the epoch. */
uint64_t tg_loader_num_batches(const tg_loader_t *l);
/* Hands out the next batch in id order: returns 1 with *it set, 0 at the end of the epoch, or a
 * negative error code (a worker's error, with its message). The item is the caller's until
 * tg_loader_item_free. */
int tg_loader_next(tg_loader_t *l, tg_loader_item_t **it);
void tg_loader_item_free(tg_loader_t *l, tg_loader_item_t *it);
/* Stops the workers (even mid-epoch), frees queued items and the loader. */
void tg_loader_stop(tg_loader_t *l);

#ifdef __cplusplus
}
#endif
#endif
