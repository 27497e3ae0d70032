/* tiergnn/outdeg.h - how often each node appears in indices.bin (its out-degree: how many
 * neighbourhoods it belongs to, i.e. how often a sampler may pick it), and the nodes that appear
 * most. PaGraph caches the features of the top of this ranking.
 *
 * How to use:
 *     tg_outdeg_prepare(ds, NULL, 256 << 20);   // builds derived/outdeg-v=1.bin once
 *     tg_outdeg_t *od;
 *     tg_outdeg_open(&od, ds, NULL, budget);    // the derived file, or counts in RAM (budget)
 *     uint64_t *ids = malloc(k * 8), hot;
 *     tg_outdeg_top(od, k, ids, &hot);          // the k most frequent, by count desc, id asc
 *     tg_outdeg_close(od);
 *
 * The counts: u32 per node (saturating at 2^32 - 1), computed by streaming indices.bin through
 * io/ in large reads; when N x 4 bytes exceed the memory given, the id range is counted in
 * chunks, each chunk one more sweep of indices.bin. They are kept as a derived/ file (kind
 * "outdeg", payload: N x u32 counts in id order) and reused while the dataset's checksums match
 * (tiergnn/derived.h). When the derived directory cannot be written, tg_outdeg_open counts in
 * RAM instead (N x 4 bytes reserved against the budget while the handle lives) and says so in a
 * log line.
 *
 * The ranking: tg_outdeg_top selects the k highest counts without sorting all N nodes (three
 * streaming passes over the counts: a radix select on the high and low 16 bits of the count
 * finds the k-th count t, then every node above t and the lowest ids at t are taken) and sorts
 * only those k. Memory: a 512 KiB histogram, a 4 MiB read buffer and the caller's k ids.
 *
 * Errors: 0 or -errno with tg_err(); a read error of indices.bin names the file and offset.
 * Module: graph/. Knows data/ (derived files), io/ and util/. */
#ifndef TIERGNN_OUTDEG_H
#define TIERGNN_OUTDEG_H

#include <stdint.h>

#include "tiergnn/data.h"
#include "tiergnn/util.h"

#ifdef __cplusplus
extern "C" {
#endif

#define TG_OUTDEG_KIND "outdeg"
#define TG_OUTDEG_PARAMS "v=1"

/* Finds the derived counts of ds valid (returns 0) or builds them (returns 1), using at most
 * mem bytes of counts at a time (0: 256 MiB) plus about 10 MiB of read and write buffers. A
 * derived directory that cannot be written is not an error: returns 2 after a log line (open
 * will count in RAM). root as in tiergnn/derived.h (NULL: tg_derived_dir's choice). */
int tg_outdeg_prepare(const tg_dataset_t *ds, const char *root, uint64_t mem);

typedef struct tg_outdeg tg_outdeg_t;

/* Opens the derived counts (building them when missing or stale), or counts in RAM when the
 * directory cannot be written, reserving N x 4 bytes against budget (NULL: not accounted). */
int tg_outdeg_open(tg_outdeg_t **out, const tg_dataset_t *ds, const char *root,
                   tg_budget_t *budget);
void tg_outdeg_close(tg_outdeg_t *od);
/* 1 when the counts are in RAM (the derived directory was not writable). */
int tg_outdeg_in_ram(const tg_outdeg_t *od);
/* The counts of nodes [first, first + n) into out. */
int tg_outdeg_counts(tg_outdeg_t *od, uint64_t first, uint64_t n, uint32_t *out);
/* The min(k, N) nodes of highest count into ids, by decreasing count, ties by increasing id;
 * *hot (optional) = the sum of their counts. Time: O(N) reads of the counts + O(k log k). */
int tg_outdeg_top(tg_outdeg_t *od, uint64_t k, uint64_t *ids, uint64_t *hot);

#ifdef __cplusplus
}
#endif
#endif
