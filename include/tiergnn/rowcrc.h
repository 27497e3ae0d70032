/* tiergnn/rowcrc.h - a CRC-32 per feature row, so that every row read from a disk can be checked
 * (`--verify-reads`): a byte of features.bin changed between runs or under a run, or a derived
 * copy of a row (hier's partfeat, diskgnn's chunks and caches) changed, ends the run with an
 * error naming the file, the offset and the node, instead of training on a wrong number.
 *
 * How to use:
 *     tg_rowcrc_t *rc;
 *     if (tg_rowcrc_open(&rc, ds, NULL, budget) < 0) die(tg_errmsg());  // builds it when needed
 *     ... read row v of features.bin into raw ...
 *     if (tg_rowcrc_check(rc, v, raw, "features.bin path", off) < 0) fail(tg_errmsg());
 *     tg_rowcrc_close(rc);
 *
 * The sums: derived file kind "rowcrc" (tiergnn/derived.h), payload N x u32, the zlib CRC-32 of
 * each row's raw bytes (row_bytes = feat_dim x dtype size) in node order. They are built by one
 * sequential pass over features.bin (large O_DIRECT reads, a progress bar), which also combines
 * the row sums into the whole file's CRC-32 (zlib's crc32_combine) and refuses to write them when
 * that differs from the one meta.txt records: the sums are always those of the file the dataset
 * was made with, never of a file already changed. `tiergnn verify` builds them as a by-product
 * (it reads features.bin anyway). Like every derived file they stay valid while meta.txt's
 * checksums match, so a later change of features.bin alone is what the checks then see; the
 * derived file's payload CRC is checked at every open, so a changed sum is rebuilt, never
 * reported as a changed row.
 *
 * Memory: N x 4 bytes in RAM while the handle lives, reserved against the budget (400 MB for 100M
 * nodes: 0.8% of their features at 128 f32 per row). The build holds a 16 MiB read buffer and io/
 * staging besides.
 *
 * Cost: one CRC-32 of every row read from a disk (tg_data_crc32: 13 GB/s on 512-byte rows here), on
 * the thread that read it. Rows already checked and kept in RAM (caches, buffers) are not checked
 * again.
 *
 * Errors: 0 or -errno with tg_err(). A mismatch is -EIO: "FILE: offset OFF: the row of node V
 * does not match its checksum in derived/rowcrc (the file changed after it was verified; run
 * tiergnn verify)". Threads: check and the table are read-only, safe from any thread.
 *
 * Module: store/. Knows data/ (derived files), io/ and util/. */
#ifndef TIERGNN_ROWCRC_H
#define TIERGNN_ROWCRC_H

#include <stddef.h>
#include <stdint.h>

#include "tiergnn/data.h"
#include "tiergnn/util.h"

#ifdef __cplusplus
extern "C" {
#endif

#define TG_ROWCRC_KIND "rowcrc"
#define TG_ROWCRC_PARAMS "v=1"

typedef struct tg_rowcrc {
    uint64_t num_nodes;
    size_t row_bytes;
    const uint32_t *crc; /* row i's CRC-32, i < num_nodes (in the order of the file checked) */
    const uint64_t *map; /* permuted tables: the node of row i, for messages (borrowed) */
    /* private */
    uint32_t *own;
    tg_budget_t *budget;
    uint64_t reserved;
} tg_rowcrc_t;

/* Finds the derived sums of ds valid (returns 0) or builds them (returns 1, after a progress
 * bar on stderr). A derived directory that cannot be written is not an error when the sums can
 * be kept in RAM by tg_rowcrc_open: returns 2 after a log line. Refuses (-EIO naming
 * features.bin) when features.bin's CRC-32 is not meta.txt's. */
int tg_rowcrc_prepare(const tg_dataset_t *ds, const char *root);

/* The sums in RAM (N x 4 bytes reserved against budget, NULL: not accounted): read from the
 * derived file, built first when it is missing or stale, or computed in RAM when the derived
 * directory cannot be written. */
int tg_rowcrc_open(tg_rowcrc_t **out, const tg_dataset_t *ds, const char *root,
                   tg_budget_t *budget);

/* A table for a file whose row i is src's row map[i] (i < n), e.g. hier's partfeat in partition
 * order; reserved against budget like open. map is borrowed (messages name map[i] as the node)
 * and must outlive the table. */
int tg_rowcrc_permuted(tg_rowcrc_t **out, const tg_rowcrc_t *src, const uint64_t *map, uint64_t n,
                       tg_budget_t *budget);

void tg_rowcrc_close(tg_rowcrc_t *rc);

/* 0 when raw (row_bytes bytes) is row `row` as the sums record it; else -EIO naming path (the
 * file the row was read from), the byte offset off and the row (an id of the table's order).
 * rc NULL: 0 (nothing to check). */
int tg_rowcrc_check(const tg_rowcrc_t *rc, uint64_t row, const void *raw, const char *path,
                    uint64_t off);

/* Checks n consecutive rows first.. held packed at raw (n x row_bytes bytes) read from path at
 * byte off: the first mismatch, as tg_rowcrc_check. */
int tg_rowcrc_check_rows(const tg_rowcrc_t *rc, uint64_t first, uint64_t n, const void *raw,
                         const char *path, uint64_t off);

#ifdef __cplusplus
}
#endif
#endif
