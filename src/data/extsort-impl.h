/* extsort-impl.h - private seams of the external edge sort (src/data/extsort.c), for tests.
 *
 * The wide key path (two u64 words per edge) is taken on its own only when num_nodes > 2^32,
 * which no test can afford (indptr alone would be 32 GiB); tests force it on small graphs so
 * both key layouts are checked against the same reference.
 */
#ifndef TG_DATA_EXTSORT_IMPL_H
#define TG_DATA_EXTSORT_IMPL_H

#include "tiergnn/data.h"

/* Switches an empty sorter (no edges added yet) to two-word keys. Returns -EINVAL otherwise. */
int tg_edgesort_force_wide(tg_edgesort_t *es);

/* Statistics of a sorter, for tests and logs. */
typedef struct tg_edgesort_stats {
    uint64_t edges_added;   /* accepted by tg_edgesort_add (after remove_self_loops) */
    uint64_t runs_spilled;  /* run files written, counting the ones of intermediate merges */
    uint64_t bytes_spilled; /* bytes written to run files */
    uint64_t merge_passes;  /* intermediate merge passes (0 when the final merge took all runs) */
    int key_words;          /* 1 or 2 */
} tg_edgesort_stats_t;

void tg_edgesort_stats(const tg_edgesort_t *es, tg_edgesort_stats_t *st);

#endif
