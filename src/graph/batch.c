/* Batch lifetime and size (see tiergnn/graph.h). */
#include "tiergnn/graph.h"

#include <stdlib.h>

void tg_batch_free(tg_batch_t *b)
{
    if (!b) return;
    for (int l = 0; l < b->num_layers && b->blocks; l++) {
        free(b->blocks[l].indptr);
        free(b->blocks[l].indices);
        free(b->blocks[l].weights);
    }
    free(b->blocks);
    free(b->nodes);
    b->blocks = NULL;
    b->nodes = NULL;
    b->num_layers = 0;
}

uint64_t tg_batch_bytes(const tg_batch_t *b)
{
    uint64_t n = (uint64_t)b->num_nodes * sizeof *b->nodes;
    for (int l = 0; l < b->num_layers; l++) {
        const tg_block_t *k = &b->blocks[l];
        n += ((uint64_t)k->num_dst + 1) * sizeof *k->indptr +
             k->num_edges * (sizeof *k->indices + (k->weights ? sizeof *k->weights : 0));
    }
    return n;
}
