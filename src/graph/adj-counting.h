/* graph/adj-counting.h - an adjacency that counts the index bytes its readers ask for: the run
 * wraps every strategy's adjacency in one (io_needed_bytes), and a strategy that samples ahead
 * counts the batches it samples early apart, to add them to the pass that trains them. */
#ifndef TG_GRAPH_ADJ_COUNTING_H
#define TG_GRAPH_ADJ_COUNTING_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "tiergnn/graph.h"

/* Wraps adj so that every read of n entries adds n * index_bytes to *counter; the wrapper owns
 * adj (destroying it destroys adj, and on error adj is destroyed). */
int tg_adj_counting_wrap(tg_adj_t **out, tg_adj_t *adj, size_t index_bytes,
                         _Atomic uint64_t *counter);
/* The same without owning adj (destroying the view leaves adj, which must outlive it). */
int tg_adj_counting_view(tg_adj_t **out, tg_adj_t *adj, size_t index_bytes,
                         _Atomic uint64_t *counter);

#endif
