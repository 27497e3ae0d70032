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
 * Edge weights: a block may carry one weight per edge (weights[e] for the edge at position e of
 * indices), or none (NULL, the node-wise sampler's blocks: the model normalises by degrees
 * itself). A layer-wise sampler (LADIES) fills them with its importance-sampling estimate of the
 * normalised adjacency, self loops included as explicit edges; GCN then aggregates with them
 * instead of its own normalisation (tiergnn/nn.h), and other layer types refuse such blocks.
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

#include "tiergnn/io.h" /* tg_adj_disk_opts_t (out-of-core adjacency, below) */
#include "tiergnn/util.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct tg_block {
    uint32_t num_dst, num_src;
    uint64_t num_edges;
    uint64_t *indptr;  /* (num_dst + 1) */
    uint32_t *indices; /* (num_edges) local source positions, each < num_src */
    float *weights;    /* (num_edges) per-edge weights, or NULL (unweighted) */
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
/* The bytes a sampled batch's arrays hold: node ids (8 each), per block indptr ((num_dst + 1)
 * x 8), indices (4 per edge) and weights (4 per edge, when present); the structs and blocks
 * array not counted. For accounting batches held ahead against a budget. */
uint64_t tg_batch_bytes(const tg_batch_t *b);

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
/* The k highest in-degree nodes of adj (from its indptr; degrees of 2^20 and more count as
 * equal), ties to the lower id, into out (k ids: those above the k-th degree in id order, then
 * those at it in id order); *edges (NULL: not wanted) gets the sum of their degrees. A static
 * cache of the most sampled nodes (HierBatching's) picks its nodes this way. -EINVAL when k
 * passes the node count, -ENOMEM. Time: O(N + max degree), no sort. */
int tg_adj_top_degree(const tg_adj_t *adj, uint64_t k, uint64_t *out, uint64_t *edges);

/* In-memory adjacency over caller arrays. With own != 0 it takes ownership of indptr and indices
 * (freed by tg_adj_destroy, also on failure); otherwise they must outlive adj. Checks that indptr
 * is monotone and ends at num_edges; ids are checked lazily by the sampler. */
int tg_adj_memory_create(tg_adj_t **out, uint64_t num_nodes, uint64_t num_edges,
                         const uint64_t *indptr, const uint64_t *indices, int own);
/* In-memory adjacency over borrowed arrays with the entries as stored on disk: indices holds
 * num_edges entries of esz bytes (4: u32, 8: u64), read as they are (no widened copy), for
 * arrays the caller holds (a mega-batch's subgraph; tg_adj_disk_copy owns a copy of a disk
 * adjacency's indices instead). indptr and indices must outlive adj. */
int tg_adj_raw_create(tg_adj_t **out, uint64_t num_nodes, uint64_t num_edges,
                      const uint64_t *indptr, const void *indices, size_t esz);
/* Loads indptr and the indices (widened to u64) of a dataset into RAM. */
struct tg_dataset;
int tg_adj_memory_open(tg_adj_t **out, const struct tg_dataset *ds);

/* ================================================================ samplers
 *
 * A sampler turns a batch's seeds and its RNG into a tg_batch_t. Samplers are tables of
 * functions (tg_sampler_i), like adjacencies: the loader, the look-ahead source, the epoch
 * footprint and every strategy reach them through tg_sampler_open / tg_sampler_sample, and pick
 * one by name (tg_sampler_find: "node", "ladies"). tg_sampler_create opens the node-wise sampler
 * below.
 *
 *     tg_sampler_t *s;
 *     int64_t fan[2] = {25, 10};
 *     tg_sampler_create(&s, adj, 2, fan);          // = tg_sampler_open(&s, &tg_sampler_node, ...)
 *     tg_rng_t r; tg_sampler_batch_rng(&r, seed, epoch, batch_id);
 *     tg_batch_t b; tg_sampler_sample(s, seeds, n, &r, &b);  ... tg_batch_free(&b);
 *     tg_sampler_destroy(s);
 *
 * A tg_sampler_t holds scratch space and is used by one thread at a time; make one per thread.
 * Every implementation keeps the same promises: the batch depends only on the seeds and the RNG
 * state (never on timing or thread count), the seeds come first in the given order, and the
 * blocks obey the layout at the top of this header. fanouts[l] is "how much of layer l" in the
 * implementation's own sense (neighbours per node for "node").
 *
 * The node-wise sampler ("node", tg_sampler_node): uniform neighbour sampling without
 * replacement, one fanout per layer, as in GraphSAGE: starting from the seeds, block L-1 takes
 * up to fanouts[L-1] distinct in-neighbour edges of every seed, block L-2 up to fanouts[L-2] of
 * every node reached so far, and so on down to block 0. fanouts[l] belongs to block l (blocks[0]
 * is the input layer, as in DGL): "--fanouts 25,10" gives 10 neighbours per seed and 25 per 1-hop
 * node. A fanout of -1 takes every neighbour (full neighbourhood, for evaluation); 0 takes none
 * (blocks without edges, for an MLP). Node order: seeds first (in the given order), then each
 * newly reached node in order of first appearance; the edges of one destination are in
 * ascending edge position order (the order of the CSC file). Cost: O(sum over sampled nodes of
 * min(fanout, degree)) time plus one tg_adj_read per layer.
 *
 * The layer-wise sampler ("ladies", tg_sampler_ladies): LADIES (Zou et al., NeurIPS 2019,
 * "Layer-Dependent Importance Sampling for Training Deep and Large Graph Convolutional
 * Networks"), for GCN. fanouts[l] is the number of nodes sampled for block l (--layer-sizes),
 * not per node. P = D^-1 (A + I) is the row-normalised adjacency with self loops (explicit self
 * edges of the graph dropped, d_u = 1 + the other in-neighbours of u), as in the paper's
 * reference code. From the seeds outwards, with C the nodes so far (block l's destinations):
 *   1. read every in-neighbour list of C (one tg_adj_read per layer);
 *   2. p(v) = q(v) / sum q, q(v) = sum over u in C of P[u,v]^2, over the candidates v in the
 *      neighbourhoods of C and C itself (their self loops);
 *   3. draw min(fanouts[l], candidates) distinct candidates S with probabilities p, without
 *      replacement (successive sampling, as numpy.random.choice(replace=False, p=p) in the
 *      reference; done in one pass with Efraimidis-Spirakis keys ln(U)/q(v), one uniform U per
 *      candidate in candidate order);
 *   4. block l keeps the edges u <- v of C x S with P[u,v] != 0, plus the self loop u <- u of
 *      every u in C (the block layout needs each destination among the sources; the reference
 *      adds the batch's output nodes instead), each weighted P[u,v] / (s p(v)), and normalises
 *      every row to sum 1 (the reference's row_normalize; s, sum q and d_u cancel there).
 * Sources: C first, then the nodes of S not in C in order of first appearance among the edges;
 * a row lists its sampled neighbours in edge position order, then its self loop. A batch of n
 * seeds holds at most n + sum of fanouts nodes (tg_sampler_max_nodes). fanouts[l] = -1 takes
 * every candidate with the exact weights P[u,v] (no sampling: the full operator, for layer-wise
 * evaluation); 0 is refused. Candidates are counted once per edge (a repeated edge adds its
 * weight twice). Cost: O(sum of the in-degrees of C + candidates) per layer.
 */
#define TG_MAX_LAYERS 16
#define TG_FANOUT_ALL (-1)

typedef struct tg_sampler tg_sampler_t;

typedef struct tg_sampler_i {
    const char *name;    /* what tg_sampler_find matches ("node") */
    const char *summary; /* one line for help texts */
    /* Allocates the implementation's scratch into s->impl; s->adj, num_layers and fanouts are
     * set and checked (1..TG_MAX_LAYERS layers, each fanout >= -1). */
    int (*create)(tg_sampler_t *s);
    /* Samples seeds[0..n) into *out (zeroed first; out->id = 0). On failure *out holds nothing. */
    int (*sample)(tg_sampler_t *s, const uint64_t *seeds, size_t n, tg_rng_t *rng, tg_batch_t *out);
    /* Frees s->impl (not s). */
    void (*destroy)(tg_sampler_t *s);
    /* The most nodes a batch of num_seeds seeds can hold, when the sampler bounds it by
     * construction (ladies: seeds + the layer sizes), capped at num_nodes; NULL: no bound
     * tighter than the graph (node-wise neighbourhoods multiply). */
    uint64_t (*max_nodes)(uint64_t num_seeds, int num_layers, const int64_t *fanouts,
                          uint64_t num_nodes);
    /* What fanouts[l] is called in messages and options ("fanout", "layer size"). */
    const char *amount;
} tg_sampler_i;

struct tg_sampler {
    const tg_sampler_i *iface;
    tg_adj_t *adj; /* lent; must outlive the sampler */
    int num_layers;
    int64_t fanouts[TG_MAX_LAYERS];
    void *impl;
};

extern const tg_sampler_i tg_sampler_node;
extern const tg_sampler_i tg_sampler_ladies;
/* Every sampler, NULL-terminated; tg_samplers[0] is the default (node-wise). */
extern const tg_sampler_i *const tg_samplers[];

/* The sampler named name, or NULL with a message listing the known names. */
const tg_sampler_i *tg_sampler_find(const char *name);
/* Opens a sampler of the given kind (NULL = node-wise) over adj. Checks the layer count and
 * the fanouts; errors name the layer. */
int tg_sampler_open(tg_sampler_t **out, const tg_sampler_i *kind, tg_adj_t *adj, int num_layers,
                    const int64_t *fanouts);
/* The sampler's name; NULL is the node-wise sampler. */
static inline const char *tg_sampler_name(const tg_sampler_i *kind)
{
    return kind ? kind->name : "node";
}
/* An upper bound of the nodes of a batch of num_seeds seeds with these fanouts (kind NULL =
 * node-wise), capped at num_nodes: the sampler's own bound, else num_seeds x prod(1 + fanout),
 * a fanout of -1 counting as the whole graph. */
uint64_t tg_sampler_max_nodes(const tg_sampler_i *kind, uint64_t num_seeds, int num_layers,
                              const int64_t *fanouts, uint64_t num_nodes);
/* The node-wise sampler: tg_sampler_open(out, &tg_sampler_node, ...). */
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
/* Parses --layer-sizes "512,512" (ladies: nodes sampled per layer, layer 0 first): integers
 * >= 1, at most TG_MAX_LAYERS. Errors name the offending item. */
int tg_layer_sizes_parse(const char *s, int64_t *sizes, int *n);

/* ================================================================ epoch plan
 *
 * What batch b of an epoch is, written once for training, evaluation, the epoch footprint of
 * `tiergnn bench` and the loaders: its seeds are seeds[b * batch_size, ...) of the epoch's seed
 * order (the last batch may be smaller) and its RNG is tg_sampler_batch_rng(seed, epoch, b).
 *
 * The whole-graph rule: when every layer takes all neighbours (fanouts all -1) and the batch
 * size is 0 or covers the training split, a step runs on the whole graph: the seed order is every
 * node 0..N-1 in id order, in one batch, and the loss is taken on the training nodes only (the
 * caller's mask). Otherwise the seed order is the training split shuffled with
 * tg_sampler_shuffle_epoch(seed, epoch), in batches of batch_size (0 or more than the split: one
 * batch). An MLP reads no neighbours: its caller passes fanouts of 0, so it is never whole-graph.
 *
 *     tg_plan_opts_t po = {.num_nodes = N, .train = split, .num_train = n, .batch_size = 1024,
 *                          .num_layers = 2, .fanouts = fan, .seed = seed};
 *     tg_plan_t p;
 *     if (tg_plan_init(&p, &po) < 0) ...               // allocates the seed order (num_order)
 *     for (epoch ...) {
 *         tg_plan_epoch(&p, epoch);                       // builds the epoch's seed order
 *         for (b = first; b < p.num_batches; b++) {
 *             tg_rng_t r; const uint64_t *seeds;
 *             uint64_t n = tg_plan_batch(&p, b, &seeds, &r);
 *             ... tg_sampler_sample(s, seeds, n, &r, &batch) ...
 *         }
 *     }
 *     tg_plan_destroy(&p);
 *
 * A pass resumed at batch `first` gives exactly the batches the uninterrupted pass would: batch
 * b depends on (order, b) alone. tg_plan_view makes a plan over an order the caller already has
 * (the loader's options, an evaluation's node list) without allocating.
 */
typedef struct tg_plan_opts {
    uint64_t num_nodes;
    const uint64_t *train; /* (num_train) the training split; must outlive the plan */
    uint64_t num_train;    /* >= 1 */
    uint64_t batch_size;   /* seeds per batch; 0 = the whole split at once */
    int num_layers;
    const int64_t *fanouts; /* (num_layers) */
    uint64_t seed;
    uint64_t max_batches; /* batches per epoch at most (--batches-per-epoch); 0 = all */
} tg_plan_opts_t;

typedef struct tg_plan {
    int whole_graph;       /* the rule above */
    uint64_t seed, epoch;  /* the RNG streams of the current epoch */
    const uint64_t *seeds; /* the epoch's seed order (num_order ids) */
    uint64_t num_order;    /* N in whole-graph mode, else num_train */
    uint64_t batch_size;   /* seeds per batch (>= 1 unless the order is empty) */
    uint64_t all_batches;  /* ceil(num_order / batch_size) */
    uint64_t num_batches;  /* batches per epoch: all_batches capped by max_batches */
    uint64_t num_seeds;    /* seeds the epoch's batches take: min(num_order, num_batches * bs) */
    /* private */
    uint64_t *order; /* owned by tg_plan_init's plan, NULL in a view */
    const uint64_t *train;
} tg_plan_t;

/* The whole-graph rule alone (for sizing before a plan exists). */
int tg_plan_whole_graph(uint64_t batch_size, uint64_t num_train, int num_layers,
                        const int64_t *fanouts);
/* Sets the plan's geometry and allocates its seed order (num_order x 8 bytes; the caller
 * accounts them against its budget); seeds is valid after tg_plan_epoch. */
int tg_plan_init(tg_plan_t *p, const tg_plan_opts_t *o);
/* Builds the seed order of `epoch`: identity over all nodes (whole graph) or the training
 * split shuffled with tg_sampler_shuffle_epoch(seed, epoch). O(num_order). */
void tg_plan_epoch(tg_plan_t *p, uint64_t epoch);
/* Frees the order of a plan from tg_plan_init (a view owns nothing). */
void tg_plan_destroy(tg_plan_t *p);
/* A plan over a given seed order seeds[0..n): batches of batch_size (0 or >= n: one batch of
 * all n), RNG streams of (seed, epoch). Never whole-graph; allocates nothing. */
void tg_plan_view(tg_plan_t *p, const uint64_t *seeds, uint64_t n, uint64_t batch_size,
                  uint64_t seed, uint64_t epoch);
/* Batch b (< num_batches): sets *seeds to its first seed and *rng to its RNG, returns its seed
 * count. */
uint64_t tg_plan_batch(const tg_plan_t *p, uint64_t b, const uint64_t **seeds, tg_rng_t *rng);
/* Samples batches [first, first + k) of p (those that exist) over adj with the sampler `kind`
 * (NULL: node-wise) and keeps the one with the most input nodes (the first of equals) in
 * *largest, which the caller frees (tg_batch_free; zeroed when no batch was sampled). For sizing
 * memory before a pass runs those batches: the same seeds and RNG streams give the same batches.
 * Errors: the sampler's (largest then holds nothing). Time: k samplings. */
int tg_plan_largest_batch(const tg_plan_t *p, tg_adj_t *adj, const tg_sampler_i *kind,
                          int num_layers, const int64_t *fanouts, uint64_t first, uint64_t k,
                          tg_batch_t *largest);

/* Evaluation's streams, apart from every training epoch's: the plan of split s's sampled pass
 * over nodes[0..n), and the fixed random subset of a split (--eval-max-nodes): ids shuffled in
 * place, the same every time for a seed. */
void tg_plan_eval(tg_plan_t *p, const uint64_t *nodes, uint64_t n, uint64_t batch_size,
                  uint64_t seed, int split);
void tg_plan_eval_subset(uint64_t *ids, size_t n, uint64_t seed, int split);

/* ================================================================ concurrent sampling loader
 * (tg_sloader)
 *
 * Samples the batches of one epoch on worker threads, ahead of the consumer, and hands them out
 * strictly in batch-id order. Batch b is the epoch plan's (tg_plan_view over the options' seed
 * order, batch size, seed and epoch). Worker t samples batches t, t+T, t+2T, ... into its own
 * bounded queue, and the consumer pops batch b from queue b mod T, so order and content are the
 * same for any T and any timing; no reorder buffer is needed and a slow batch only delays its own
 * queue. An optional hook runs on the worker after sampling (a strategy gathers features there).
 *
 *     tg_sloader_opts_t o = {.adj = adj, .num_layers = 2, .fanouts = fan, .seeds = order,
 *                           .num_seeds = n, .batch_size = 1024, .seed = seed, .epoch = e,
 *                           .num_threads = 2, .prefetch = 2};
 *     tg_sloader_t *ld; tg_sloader_start(&ld, &o);
 *     tg_sloader_item_t *it;
 *     while ((rc = tg_sloader_next(ld, &it)) > 0) { ... use it->batch ...; tg_sloader_item_free(ld,
 * it); } tg_sloader_stop(ld);            // also fine mid-epoch: joins workers, frees queued items
 *
 * With num_threads == 0 batches are sampled inline in tg_sloader_next (no threads at all).
 */
typedef struct tg_sloader_item {
    tg_batch_t batch; /* batch.id = position in the epoch */
    void *payload;    /* what the hook produced (e.g. the gathered feature matrix) */
    double sample_s;  /* seconds spent sampling this batch */
    double hook_s;    /* seconds spent in the hook */
} tg_sloader_item_t;

typedef struct tg_sloader_opts {
    tg_adj_t *adj;
    int num_layers;
    const int64_t *fanouts;
    const uint64_t *seeds; /* the epoch's seed order; must outlive the loader */
    uint64_t num_seeds;
    uint64_t batch_size; /* seeds per batch (the last batch may be smaller); >= 1 */
    uint64_t seed, epoch;
    int num_threads; /* sampler threads; 0 = sample inline in tg_sloader_next */
    size_t prefetch; /* batches each worker may have ready (default 2 if 0) */
    /* Optional: runs after sampling on the same thread; fills it->payload. */
    int (*hook)(void *ctx, tg_sloader_item_t *it);
    /* Optional: frees a payload (items discarded by tg_sloader_stop or tg_sloader_item_free). */
    void (*hook_free)(void *ctx, void *payload);
    void *ctx;
    /* Optional: the first batch to hand out (0 = from the start). Batches before it are skipped,
     * not sampled: batch b still takes seeds [b * batch_size, ...) and the RNG of (seed, epoch,
     * b), so a pass resumed mid-epoch gives exactly the batches the uninterrupted pass would. */
    uint64_t first_batch;
    /* Optional: the sampler (NULL = node-wise, tg_sampler_node). */
    const tg_sampler_i *sampler;
} tg_sloader_opts_t;

typedef struct tg_sloader tg_sloader_t;

int tg_sloader_start(tg_sloader_t **out, const tg_sloader_opts_t *o);
/* Number of batches in the epoch (those before first_batch included). */
uint64_t tg_sloader_num_batches(const tg_sloader_t *l);
/* Hands out the next batch in id order: returns 1 with *it set, 0 at the end of the epoch, or a
 * negative error code (a worker's error, with its message). The item is the caller's until
 * tg_sloader_item_free. */
int tg_sloader_next(tg_sloader_t *l, tg_sloader_item_t **it);
void tg_sloader_item_free(tg_sloader_t *l, tg_sloader_item_t *it);
/* Stops the workers (even mid-epoch), frees queued items and the loader. */
void tg_sloader_stop(tg_sloader_t *l);

/* ================================================================ look-ahead batch source
 *
 * A loader with a window: a strategy that plans over the next k batches (Ginex's superbatch,
 * GIDS's window of future accesses) sees batches next .. next+k before it takes batch next.
 * Peeking blocks until the batch is sampled; taking hands batches out in id order, like the
 * loader, with the same content for any thread count.
 *
 *     tg_source_t *src;
 *     tg_source_start(&src, &loader_opts, k);
 *     for (;;) {
 *         const tg_sloader_item_t *ahead;
 *         for (size_t i = 1; i <= k && tg_source_peek(src, i, &ahead) > 0; i++)
 *             ... look at ahead->batch (batch next+i) ...
 *         tg_sloader_item_t *it;
 *         if ((rc = tg_source_next(src, &it)) <= 0) break;  // 0: end of the epoch
 *         ... train it->batch ...; tg_source_item_free(src, it);
 *     }
 *     tg_source_stop(src);
 *
 * Memory: the window holds at most k + 1 sampled batches (next .. next+k), the loader's queues
 * at most its threads x (prefetch + 1) more (each worker may hold one batch it waits to queue),
 * plus the batches taken and not yet freed. Use from one thread. An error of the loader is
 * reported by the peek or take that reaches the failed batch (the batches before it are still
 * handed out), and by every later call.
 */
typedef struct tg_source tg_source_t;

/* Starts a loader with options o (see above; its hook runs on every batch as usual) and a
 * window of lookahead batches beyond the next one (0 = none, a plain loader). */
int tg_source_start(tg_source_t **out, const tg_sloader_opts_t *o, size_t lookahead);
/* The batch next+i (0 <= i <= lookahead), sampling up to it: returns 1 with *it (lent until the
 * batch is taken and freed), 0 if the epoch ends before it, or a negative error code. */
int tg_source_peek(tg_source_t *s, size_t i, const tg_sloader_item_t **it);
/* Takes batch next: 1 with *it (the caller's until tg_source_item_free), 0 at the end. */
int tg_source_next(tg_source_t *s, tg_sloader_item_t **it);
void tg_source_item_free(tg_source_t *s, tg_sloader_item_t *it);
/* The id of the batch tg_source_next hands out next; the epoch's batch count. */
uint64_t tg_source_next_id(const tg_source_t *s);
uint64_t tg_source_num_batches(const tg_source_t *s);
/* Stops the loader (even mid-epoch) and frees the window and the source. */
void tg_source_stop(tg_source_t *s);

/* ================================================================ spill files
 *
 * Sampled batches written to a file and read back in the order written, so that a strategy can
 * sample a superbatch or a whole epoch ahead without holding it in RAM. The directory is the
 * caller's choice (the dataset's derived/ directory or a --scratch DIR).
 *
 *     tg_spill_t *sp;
 *     tg_spill_open(&sp, dir, NULL);                  // an unnamed file in dir
 *     tg_spill_fill(sp, loader, 64, NULL);            // the next 64 batches of a loader, or:
 *     tg_spill_write(sp, &batch);                     // one batch at a time
 *     tg_spill_rewind(sp);                            // flush; read from the first record
 *     tg_batch_t b;
 *     while ((rc = tg_spill_read(sp, &b)) > 0) { ...; tg_batch_free(&b); }
 *     tg_spill_reset(sp);                             // empty: write the next superbatch
 *     tg_spill_close(sp);                             // the file is gone
 *
 * Never left behind: the file is opened with O_TMPFILE, so it has no name and the kernel frees
 * it when the descriptor closes - after an error, SIGINT or SIGKILL too. Where the file system
 * has no O_TMPFILE (or with TG_SPILL_NAMED) it is created under a unique name and unlinked at
 * once, which leaves a window of one system call.
 *
 * Format: one record per batch, in native byte order (the file never outlives the process):
 *     u32 magic "TGSP", u32 flags (1: node ids as u32, 2: indptr as u32, 4: edge weights),
 *     u64 id, u32 num_layers, u32 num_nodes, u32 num_seeds, u32 0, u64 payload bytes,
 *     per layer: u32 num_dst, u32 num_src, u64 num_edges,
 *     payload: nodes[num_nodes], then per layer indptr[num_dst + 1] and u32 indices[num_edges]
 *     (and with flag 4, f32 weights[num_edges]),
 *     u32 CRC-32 of everything before it in the record.
 * A batch's blocks carry weights all or none (a sampler's batches do); a mix is -EINVAL.
 * Ids and indptr take 4 bytes when every value fits, else 8. A batch read back equals the batch
 * written, field for field. Reads check the magic, the sizes against the file's end, and the
 * CRC; errors name the file, the record and its offset.
 *
 * I/O: writes go through a buffer of buf_bytes (default 4 MiB) and leave in large sequential
 * write() calls; reads refill the same buffer with read(). The buffer is reserved against the
 * budget when one is given ("spill buffer"). Not thread-safe: one thread at a time.
 */
#define TG_SPILL_NAMED 1u /* create under a name and unlink at once (no O_TMPFILE) */

typedef struct tg_spill_opts {
    size_t buf_bytes;    /* write/read buffer (0 = 4 MiB; at least 64 KiB) */
    tg_budget_t *budget; /* optional */
    unsigned flags;      /* TG_SPILL_NAMED */
} tg_spill_opts_t;

typedef struct tg_spill tg_spill_t;

/* Creates an empty spill file in dir (which must exist and be writable); opts may be NULL. */
int tg_spill_open(tg_spill_t **out, const char *dir, const tg_spill_opts_t *opts);
/* Appends one batch. Only while writing (after open or reset). */
int tg_spill_write(tg_spill_t *s, const tg_batch_t *b);
/* Takes up to max batches from a loader and writes them; *written (may be NULL) gets the count
 * (fewer than max: the loader reached the end of its epoch). Returns 0 or an error (the loader's
 * or a write's). Payloads are not written (the loader's hook still runs). */
int tg_spill_fill(tg_spill_t *s, tg_sloader_t *l, uint64_t max, uint64_t *written);
/* Flushes what is written and starts reading at the first record (again, if called while
 * reading). */
int tg_spill_rewind(tg_spill_t *s);
/* Reads the next record into *out (caller frees with tg_batch_free): 1, or 0 after the last
 * record, or a negative error code (*out then holds nothing). */
int tg_spill_read(tg_spill_t *s, tg_batch_t *out);
/* The next record as a loader's item for a pipeline source that hands spilled batches out in
 * order: it must be batch `id` holding `num_nodes` nodes (TG_SPILL_ANY_NODES: any count), else
 * -EIO naming the file, the batch it holds and the one expected; a file that ends first is -EIO
 * naming the batch. The item's sample_s is the caller's (the sampling time the spiller
 * recorded). 1 with *out set (free it with tg_spill_item_free), or a negative code (*out NULL);
 * no record is ever 0: the caller knows how many batches it spilled. */
#define TG_SPILL_ANY_NODES UINT64_MAX
int tg_spill_read_item(tg_spill_t *s, uint64_t id, uint64_t num_nodes, double sample_s,
                       tg_sloader_item_t **out);
/* Frees an item of tg_spill_read_item (its batch and itself); NULL is fine. */
void tg_spill_item_free(tg_sloader_item_t *it);
/* Empties the file and starts writing again. */
int tg_spill_reset(tg_spill_t *s);
/* Records and bytes written since open or the last reset. */
uint64_t tg_spill_count(const tg_spill_t *s);
uint64_t tg_spill_bytes(const tg_spill_t *s);
/* The file's name for messages ("DIR/<unnamed spill file>" under O_TMPFILE) and its
 * descriptor (valid until close; for tests that damage the file). */
const char *tg_spill_name(const tg_spill_t *s);
int tg_spill_fd(const tg_spill_t *s);
/* Closes (and so frees) the file, releases the buffer. NULL is fine. */
void tg_spill_close(tg_spill_t *s);

/* ================================================================ out-of-core adjacency
 *
 * Owner: the out-of-core storage work (src/graph/adj_disk.c, src/graph/adj_mmap.c). Both
 * implement tg_adj_i with indptr in RAM (N+1 u64, reserved against the given budget as
 * "adjacency indptr") and the indices array left on disk, so the sampler above them is
 * unchanged and gives exactly the batches it gives over tg_adj_memory_open (tested byte for
 * byte, u32 and u64 index files).
 *
 * Disk-resident (the out-of-core strategies):
 *
 *     tg_adj_disk_opts_t ao;
 *     tg_adj_disk_opts_default(&ao);
 *     ao.io.stats = &epoch_stats;       // per-epoch io_requests / read / needed bytes / wait
 *     tg_adj_t *adj;
 *     if (tg_adj_disk_open(&adj, ds, &ao, &budget) < 0) die(tg_errmsg());
 *     ... tg_sampler_create(&s, adj, ...) on any number of threads ...
 *     tg_adj_destroy(adj);              // after every sampler using it is done
 *
 * Each tg_adj_read turns its positions (grouped by node, ascending within a node, as the sampler
 * passes them) into byte ranges of indices.bin - one range per run of consecutive positions, so
 * a node whose whole neighbourhood is taken costs one range - and reads them in one batched
 * call on a queue borrowed from a tg_io_pool_t (O_DIRECT io_uring where available; the io layer
 * sorts and merges ranges that touch the same or adjacent aligned blocks). u32 entries are
 * widened to u64 in place. Calls with more than opts.max_requests ranges are read in pieces of
 * that many ranges, which bounds the per-call bookkeeping. Thread-safe: sampler threads call
 * read concurrently; at most opts.queues calls read at once, the others wait for a queue.
 *
 * Counting: every disk read goes into opts.io.stats (the engine's per-epoch sink; NULL = the
 * adjacency's own, see tg_adj_disk_stats). io_needed_bytes counts exactly the index bytes the
 * sampler asked for (4 or 8 per position), io_read_bytes what the disk returned.
 *
 * Memory (against budget): indptr, plus the pool's staging buffers (queues x depth x
 * max_read_bytes; 2 x 64 x 16 KiB = 2 MiB by default) and the io layer's per-request bookkeeping
 * while a read runs (at most max_requests x 120 bytes per reading thread). The request array of
 * a call (max_requests x sizeof(tg_io_req_t) at most) is malloc'd per call and not accounted:
 * it is scratch of the calling sampler, like the sampler's own arrays.
 *
 * Errors: an I/O error or short read (file truncated under the run) fails the read with the io
 * layer's message, which names indices.bin and the byte offset, prefixed with the edge
 * positions involved; the sampler adds the block. A file whose size differs from meta.txt is
 * refused at open. Positions >= num_edges are -EINVAL.
 */
typedef struct tg_adj_disk_opts {
    /* Queue settings for the pool. depth 0 = 64 (where the device probe finds random reads
     * saturate on NVMe/virtio), max_read_bytes 0 = 16 KiB (a sampled node's positions mostly lie
     * in one or two aligned blocks: small slots keep staging small; long lists are split). flags:
     * TG_IO_FORCE_PREAD, TG_IO_NO_MERGE, TG_IO_NO_FIXED. stats: the sink counters go to (NULL = the
     * adjacency's own). The budget field is ignored: the budget argument of tg_adj_disk_open is
     * used. */
    tg_io_opts_t io;
    unsigned queues;     /* queues in the pool = reads at once (0 = 2) */
    unsigned file_flags; /* tg_io_file_open flags: TG_IO_FILE_BUFFERED */
    size_t max_requests; /* byte ranges per batched read (0 = 16384) */
} tg_adj_disk_opts_t;

/* Zeroes o (every field then means its default). */
void tg_adj_disk_opts_default(tg_adj_disk_opts_t *o);

/* Opens the adjacency of ds with indices on disk. opts may be NULL (defaults); budget may be
 * NULL (not accounted). Loads and checks indptr (monotone, ends at num_edges), checks the size of
 * indices.bin against meta.txt, opens the file and creates the pool. */
int tg_adj_disk_open(tg_adj_t **out, const struct tg_dataset *ds, const tg_adj_disk_opts_t *opts,
                     tg_budget_t *budget);

/* Indices in RAM: once the run knows its budget has room (strategies call it when their caches are
 * sized), the whole indices.bin is read into RAM as it is on disk (u32 or u64 entries, reserved
 * against the adjacency's budget as "indices in RAM") and every later read is served from there,
 * without I/O. Not thread-safe against concurrent reads: call it between passes. Errors name the
 * file and the offset; on error the adjacency keeps reading from disk. _bytes: what it costs
 * (0 for another adjacency, and once loaded). */
uint64_t tg_adj_disk_load_bytes(const tg_adj_t *adj);
int tg_adj_disk_load(tg_adj_t *adj);
/* indices.bin whole, as stored, into buf (tg_adj_disk_file_bytes: its size rounded up to 4 KiB,
 * 4 KiB-aligned), through the adjacency's io/ queues (thread-safe, the adjacency unchanged):
 * for a copy that lives apart (tg_adj_disk_copy). Errors name the file and offset. */
uint64_t tg_adj_disk_file_bytes(const tg_adj_t *adj);
int tg_adj_disk_read_all(tg_adj_t *adj, void *buf);
/* A copy of indices.bin in RAM that lives apart from the disk adjacency, for a phase that needs
 * the indices in RAM only for a while (DiskGNN samples an epoch ahead from it, then frees it for
 * its planning): tg_adj_disk_file_bytes reserved against budget (may be NULL) as `who`, the file
 * read whole (tg_adj_disk_read_all), and an adjacency over disk's indptr and the copy, entries
 * read as stored (no widened copy). Destroying it frees the copy and releases the budget; disk
 * must outlive it and is left unchanged. -ENOMEM when the budget refuses the bytes or memory
 * runs out (the caller may sample from disk instead), -EINVAL for another adjacency, a read
 * error naming the file and offset. */
int tg_adj_disk_copy(tg_adj_t **out, tg_adj_t *disk, tg_budget_t *budget, const char *who);

/* Neighbour cache tier (tiergnn/ncache.h, Ginex): every later read serves the positions of the
 * nodes nc holds from it and sends only the others to RAM or the disk, still in one batched
 * call. The node of a run of positions is found by binary search in indptr (the previous node
 * and its successor first). Counts nodes asked, nodes served and entries served into nc
 * (tg_ncache_stats). The adjacency takes nc over (closed by tg_adj_destroy or by a later attach,
 * and on failure); nc NULL detaches. Checks nc's graph and every cached count against indptr
 * (-EINVAL naming the node). Not thread-safe against concurrent reads: call it between passes. */
struct tg_ncache;
int tg_adj_disk_attach_ncache(tg_adj_t *adj, struct tg_ncache *nc);
/* The attached cache, NULL without one (or for another adjacency). */
struct tg_ncache *tg_adj_disk_ncache(tg_adj_t *adj);

/* The sink a disk adjacency counts into (opts.io.stats or its own); NULL for other adjacencies.
 * Valid until tg_adj_destroy. */
tg_io_stats_t *tg_adj_disk_stats(tg_adj_t *adj);

/* Memory-mapped (the "mmap" baseline, the papers' tuned PyG+): indices.bin mapped read-only with
 * madvise(MADV_RANDOM), so each page fault reads one page and the kernel does no readahead; the
 * page cache holds what was touched, and only a cgroup limit (../shared/tools/membudget) bounds
 * it. Only indptr is reserved against budget. read() copies (and widens) entries under the
 * fault guard below, so a file truncated under the run gives an error naming indices.bin and
 * the offset instead of a crash. Thread-safe. */
int tg_adj_mmap_open(tg_adj_t **out, const struct tg_dataset *ds, tg_budget_t *budget);

/* ---------------------------------------------------------------- mapped files with a fault guard
 *
 * A read-only mapping of a whole data file (madvise MADV_RANDOM) whose reads run under a SIGBUS
 * guard. Touching a page of a mapping that lies wholly beyond the file's end - the file was
 * truncated after it was mapped - raises SIGBUS; tg_mmap_file_guard turns that into an error:
 *
 *     tg_mmap_file_t *f;
 *     if (tg_mmap_file_open(&f, path, expected_size) < 0) ...
 *     rc = tg_mmap_file_guard(f, copy_rows, &ctx);   // copy_rows reads tg_mmap_file_data(f)
 *     // rc < 0: "PATH: SIGBUS reading offset X of the mapped file, which is now Y bytes (Z when
 *     //          opened): truncated under the run?"
 *
 * How: the first open installs a process-wide SIGBUS handler (SA_SIGINFO | SA_NODEFER) that
 * keeps the previous handler. A guarded call registers itself in a thread-local list and runs fn
 * after sigsetjmp; a SIGBUS whose address lies in a mapping guarded on the faulting thread
 * jumps back and the guard returns -EIO. Any other SIGBUS goes to the previous handler (or, with
 * none, kills the process as before). After fn returns, the guard also compares the file's size
 * with the size at open (one fstat), because a truncation to a size that is not a multiple of the
 * page size leaves the last page mapped and reads of its tail return zeros, not SIGBUS; so a
 * truncation that happened before or while fn ran is always reported. (A file truncated and
 * extended again to its old size in between is not noticed: that is a limit of mmap, which the
 * io/ path with its per-read result does not have.)
 *
 * fn must only read the mapping and write caller memory: a jump out of it abandons whatever it
 * was doing, so it must not take locks, allocate, or call tiergnn functions that do (its own
 * argument checks may use tg_err before touching the mapping). Guards nest. A thread that blocks
 * SIGBUS (pthread_sigmask) gets no error: the kernel then ends the process on such a fault.
 *
 * Module note: this is file I/O and belongs in io/ by the module table; it lives here, beside its
 * first user, until io/ adopts it (src/store/mmap.c uses it too).
 */
typedef struct tg_mmap_file tg_mmap_file_t;

/* Opens and maps path read-only. expect_size: the size meta.txt promises (-EINVAL naming the
 * file and both sizes when the file differs). An empty file maps nothing (data NULL). */
int tg_mmap_file_open(tg_mmap_file_t **out, const char *path, uint64_t expect_size);
/* Unmaps and frees. NULL is fine. No guarded call may be running on it. */
void tg_mmap_file_close(tg_mmap_file_t *f);
/* The mapped bytes (size tg_mmap_file_size); valid until tg_mmap_file_close. */
const void *tg_mmap_file_data(const tg_mmap_file_t *f);
uint64_t tg_mmap_file_size(const tg_mmap_file_t *f);
const char *tg_mmap_file_path(const tg_mmap_file_t *f);
/* Runs fn(ctx) under the SIGBUS guard (see above); returns fn's result, or -EIO with a message
 * naming the file and the offset. */
int tg_mmap_file_guard(tg_mmap_file_t *f, int (*fn)(void *ctx), void *ctx);

#ifdef __cplusplus
}
#endif
#endif
