/* engine/xpass.h - the kit of the strategies that read a disk adjacency and extract feature rows
 * through store/extract on pipeline workers (most out-of-core strategies, and the evaluation
 * passes of those that train otherwise): the disk adjacency their samplers read (indices through
 * io/ or in RAM, the neighbour cache), their shared options, the pipeline's work function over an
 * extraction, the extraction plan and least memory, and a pass's tier, cache and I/O figures from
 * its counters.
 *
 *     tg_xpass_adj_open(r, queues, &stats);          // in open: r->adj, indices through io/
 *     tg_xpass_begin(ex, &stats);                    // before tg_pipe_run: counters to zero
 *     po.work = tg_xpass_work; po.work_ctx = ex;     // workers call tg_extract_group
 *     rc = tg_pipe_run(&po, st);
 *     tg_xpass_end(ex, &stats, ram_tiers, st);       // st->tiers, io_*, cache = first tier
 */
#ifndef TG_ENGINE_XPASS_H
#define TG_ENGINE_XPASS_H

#include "engine-impl.h"
#include "pipeline.h"
#include "tiergnn/extract.h"

#include <stddef.h>

/* Index reads of the samplers: one io/ queue per sampler thread (at least 2), each read of a
 * node's neighbours at most 16 KiB, 64 in flight, 4096 ranges per call. */
unsigned tg_xpass_adj_queues(int sampler_threads);
/* indptr and the queues' staging (reserved at open). */
uint64_t tg_xpass_adj_bytes(const tg_dataset_t *ds, unsigned queues);
/* The same for a graph of num_nodes nodes (the cost model's). */
uint64_t tg_xpass_adj_bytes_n(uint64_t num_nodes, unsigned queues);
/* io/ bookkeeping while index reads run (not reserved: a plan's other_transient). */
uint64_t tg_xpass_adj_transient(unsigned queues);
/* Opens r->adj on disk, reserving against r->budget; reads count into stats. */
int tg_xpass_adj_open(tg_run_t *r, unsigned queues, tg_io_stats_t *stats);

/* Index reads through the same budget as the feature cache: when what is left of the budget
 * (less keep bytes the caller still needs; without a limit an eighth of the RAM) holds the whole
 * indices.bin, it is read into RAM (tg_adj_disk_load) and the samplers do no index I/O. Call it
 * after the feature caches are sized, between passes. Returns 1 loaded, 0 not (no room), < 0 an
 * error naming the file. disk: the raw disk adjacency (r->adj before the run wrapped it). */
int tg_xpass_adj_resident(tg_run_t *r, tg_adj_t *disk, uint64_t keep, const char *who);

/* Ginex's neighbour cache (tiergnn/ncache.h) as a tier of disk: bytes capped at what caches
 * every in-neighbour list (so that one derived file serves every larger size), the derived file
 * found valid or built (its reads count into stats), loaded against r->budget ("neighbour
 * cache") and attached; an adjacency that has one keeps it. Logs what it holds: nodes, bytes,
 * share of edges. Call it between passes, before the indices may go into RAM. */
int tg_xpass_ncache(tg_run_t *r, tg_adj_t *disk, uint64_t bytes, tg_io_stats_t *stats,
                    const char *who);
/* The attached neighbour cache's counters since the last take into st (have_ncache, lookups,
 * hits, its bytes), and zeroes them; st NULL: zeroes only. Nothing without a cache. */
void tg_xpass_ncache_take(tg_adj_t *disk, tg_pass_stats_t *st);

/* What strategies that sample ahead share: opens r->adj on disk (queues,
 * reads counting into stats), r->store from the file, and features.bin through io/ into *feat,
 * checking its size against meta.txt. On error *feat is closed and NULL. */
int tg_xpass_open_disk(tg_run_t *r, unsigned queues, tg_io_stats_t *stats, tg_io_file_t **feat);
/* Where runtime files (spill, map, packed files) go: the derived directory tg_derived_dir picks
 * (--derived-dir, the dataset's derived/ on the same disk, made if missing, or the per-user
 * fallback when the dataset cannot be written), else $TMPDIR or /tmp. */
void tg_xpass_runtime_dir(const tg_dataset_t *ds, char *dir, size_t len);
/* Grows a u32 array to hold n entries (by half again, at least 1024 more), reserving the growth
 * against budget first ("what" names it); *held counts the bytes reserved. */
int tg_xpass_grow_u32(tg_budget_t *budget, uint32_t **a, uint64_t *cap, uint64_t n, uint64_t *held,
                      const char *what);

/* The pipeline's work function: ctx is the tg_extract_t; worker i uses its worker i. */
int tg_xpass_work(void *ctx, tg_pipe_t *P, int worker, const tg_batch_t *const *b, float *const *X,
                  int n);
/* Zeroes the extraction's tier counters and the I/O sink (what came before is not the pass's). */
void tg_xpass_begin(tg_extract_t *ex, tg_io_stats_t *io);
/* st->tiers (every tier), io_requests / io_read_bytes / io_wait_s from the sink, and the cache
 * figures from the first tier: lookups = every row, hits = its hits (0 when ram_tiers == 0: the
 * first tier is then the feature buffer or the file, which the caller may override). */
void tg_xpass_end(tg_extract_t *ex, tg_io_stats_t *io, int ram_tiers, tg_pass_stats_t *st);

/* The options every extracting strategy shares: its config struct starts with a tg_xpass_cfg_t
 * (so these offsets hold in it too) and its option table with TG_XPASS_OPTS. */
typedef struct {
    int64_t extractors, queue_depth, io_depth, io_gap, chunk_rows, sweep_batches;
    int64_t resident_indices; /* -1 auto: when the budget has room; 0 never */
    int64_t neighbor_cache;   /* bytes of Ginex's neighbour cache; -1 auto (strategy's choice) */
} tg_xpass_cfg_t;

/* Input matrices the pipeline of such a strategy holds at once: extractors x sweep-batches +
 * queue-depth (pipeline.h). */
int tg_xpass_in_flight(const tg_xpass_cfg_t *x);
/* The extraction plan's options of a strategy whose extractors read features.bin (with RAM
 * tiers in front, or none): features.bin (its path into path), x's --extractors, --io-depth,
 * --io-gap and --chunk-rows, no feature buffer, and the samplers' index-read bookkeeping as other
 * transient memory. */
void tg_xpass_plan_opts(const tg_dataset_t *ds, const tg_xpass_cfg_t *x, int sampler_threads,
                        char *path, size_t path_len, tg_extract_plan_opts_t *po);
/* A strategy's least memory (its min_bytes) over such a plan (po, made minimal here): the disk
 * adjacency (indptr, read staging and its transient), `fixed` bytes of the strategy's own
 * (named by what; NULL: none) and the smallest plan; why gets the parts, or the plan's error
 * with UINT64_MAX. */
uint64_t tg_xpass_min_bytes(const tg_dataset_t *ds, tg_extract_plan_opts_t *po, int sampler_threads,
                            uint64_t fixed, const char *what, char *why, size_t why_len);
/* For the strategies that sample ahead and read on one executor thread, their extraction plan's
 * options: features.bin (its path into path), one executor, x's --io-depth, --io-gap and
 * --chunk-rows, no feature buffer, and the samplers' index-read
 * bookkeeping as other transient memory. */
void tg_xpass_ahead_plan_opts(const tg_dataset_t *ds, const tg_xpass_cfg_t *x, int sampler_threads,
                              char *path, size_t path_len, tg_extract_plan_opts_t *po);
/* Their least memory (a strategy's min_bytes): the disk adjacency (indptr, read staging and its
 * transient), `fixed` bytes of the strategy's own (named by what) and the smallest extraction
 * plan; why gets the parts, or the plan's error with UINT64_MAX. */
uint64_t tg_xpass_ahead_min_bytes(const tg_dataset_t *ds, const tg_xpass_cfg_t *x,
                                  int sampler_threads, uint64_t fixed, const char *what, char *why,
                                  size_t why_len);
/* The pipeline of such a pass: samplers over r->adj, the extraction's workers taking
 * sweep-batches batches at a time, queues of queue-depth, in order; the caller may change
 * in_order and add on_error. */
tg_pipe_opts_t tg_xpass_pipe_opts(tg_run_t *r, const tg_pass_t *p, const tg_xpass_cfg_t *x,
                                  tg_extract_t *ex);

#define TG_XPASS_OPT(n, k, d, lo, hi, a, f, m, h)                                                  \
    {                                                                                              \
        .name = n, .kind = k, .def = d, .min = lo, .max = hi, .auto_ok = a,                        \
        .offset = offsetof(tg_xpass_cfg_t, f), .meta = m, .help = h                                \
    }

/* The default extractors of TG_XPASS_OPTS (the cost model plans their depth). */
#define TG_XPASS_EXTRACTORS 2
#define TG_XPASS_OPTS TG_XPASS_OPTS_QD(2, "2")
/* The same with another default queue depth (qd, and its text for the help line). */
#define TG_XPASS_OPTS_QD(qd, qds) TG_XPASS_OPTS_EQ(2, "2", qd, qds, "the device probe's depth / E")
/* The same with other default extractors (e) and queue depth (qd), their texts for the help,
 * and what --io-depth 0 means (dh). */
#define TG_XPASS_OPTS_EQ(e, es, qd, qds, dh)                                                       \
    TG_XPASS_OPT("extractors", TG_SOPT_INT, e, 1, 64, 0, extractors, "E",                          \
                 "extractor threads (default " es ")"),                                            \
        TG_XPASS_OPT("queue-depth", TG_SOPT_INT, qd, 1, 1024, 0, queue_depth, "Q",                 \
                     "training/releasing queue capacity (default " qds ")"),                       \
        TG_XPASS_OPT("io-depth", TG_SOPT_INT, 0, 0, 4096, 0, io_depth, "D",                        \
                     "reads in flight per extractor (default 0: " dh ")"),                         \
        TG_XPASS_OPT("io-gap", TG_SOPT_SIZE, -1, 0, 1 << 20, 1, io_gap, "BYTES",                   \
                     "read through holes up to BYTES to merge rows (default auto: what the disk "  \
                     "reads in one request's time, from the device probe)"),                       \
        TG_XPASS_OPT("chunk-rows", TG_SOPT_INT, 0, 0, 1 << 24, 0, chunk_rows, "N",                 \
                     "rows an extractor handles at once (default 0: automatic)"),                  \
        TG_XPASS_OPT("sweep-batches", TG_SOPT_INT, 1, 1, 16, 0, sweep_batches, "S",                \
                     "batches an extractor reads in one sweep of the feature file (default 1)"),   \
        TG_XPASS_OPT("resident-indices", TG_SOPT_INT, -1, 0, 0, 1, resident_indices, "auto|0",     \
                     "auto: indices.bin read into RAM when the budget has room for it after the "  \
                     "feature cache; 0: always read from disk (default auto)"),                    \
        TG_XPASS_OPT("neighbor-cache", TG_SOPT_SIZE, -1, 0, INT64_MAX, 1, neighbor_cache, "BYTES", \
                     "in-neighbour lists of the highest out/in-degree nodes kept in RAM (Ginex); " \
                     "auto: the strategy decides (ginex from its split, others none)")

#endif
