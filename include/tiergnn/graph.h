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

#include <stdint.h>

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

#ifdef __cplusplus
}
#endif
#endif
