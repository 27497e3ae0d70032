/* tiergnn/rank.h - the nodes a node-wise sampler reaches most, ranked by weighted reverse PageRank
 * (Data Tiering, Min et al. KDD'22, as GIDS uses it to choose what its constant CPU buffer pins),
 * computed out of core over the CSC and kept as a derived/ file.
 *
 * How to use:
 *     int64_t fan[3] = {10, 10, 10};
 *     tg_rank_opts_t o;
 *     tg_rank_opts_default(&o);
 *     o.num_layers = 3; o.fanouts = fan;     // the run's sampler fanouts (fanouts[l]: block l)
 *     o.mem = 1ull << 30;                    // what the build may hold (tg_rank_mem_bytes)
 *     tg_rank_t *r;
 *     if (tg_rank_open(&r, ds, &o) < 0) die(tg_errmsg());    // builds once, then reuses
 *     uint64_t k = ..., *hot = malloc(k * 8);
 *     tg_rank_top(r, k, hot);                // the k hottest node ids, hottest first
 *     tg_rank_close(r);
 *
 * The formulation. Edges are reversed (a node passes its score to its in-neighbours: the
 * direction in which sampling walks from the seeds), each edge weighs the probability that the
 * sampler takes it, and the walk restarts from the training nodes:
 *
 *     t[v]      = 1 if v is a training node (a seed), else 0
 *     s(0)      = t
 *     s(k+1)[u] = s(k)[u] + a * sum over v with u in in(v) of  p_k(v) * s(k)[v]
 *     p_k(v)    = min(1, f_k / d_v)   (d_v = in-degree of v; f_k = -1: 1; f_k = 0: 0)
 *     f_k       = fanouts[L - 1 - (k mod L)]     k = 0 .. K-1, K = iterations (default L)
 *
 * where a is the damping (default 1) and an in-neighbour listed twice counts twice. Each
 * iteration keeps the score where it is (a node reached stays among the batch's nodes and
 * samples again in the next layer: the node-wise sampler's block l takes fanouts[l] neighbours
 * of every node reached so far) and pushes a * p(v) of it along each reversed edge; hop 1
 * uses the seeds' fanout (fanouts[L-1]), hop L the input layer's (fanouts[0]). With a = 1 and
 * K = L, s(K)[u] is exactly the expected number of times node u's row is among the input rows
 * of an epoch's batches, counted with multiplicity (the sampler keeps a node once per batch, so
 * this overcounts nodes reached along many paths of one batch, and ranks them first, which is
 * what a buffer of hot rows wants). K > L continues with the fanouts cycled, a < 1 weighs far
 * hops less (a^h for h hops). The count is fixed, not a convergence test: the edge weights are
 * not normalised (a node passes on min(f, d) times its score: the sampler's expected draws, the
 * point of the weighting), so every iteration multiplies the L1 norm by up to 1 + a x max f and
 * the scores never settle; K = L is the sampler's reach. Scores are f32, accumulated in
 * node-then-edge order (the CSC's), so the result is the same bytes for any read size.
 *
 * Out of core: the two score arrays (s(k), s(k+1): 2 x 4 bytes per node, e.g. 800 MB at 100 M
 * nodes) are in RAM; indptr.bin is streamed front to back each iteration, and indices.bin is
 * read only for the nodes that carry a score, through io/ (O_DIRECT, the ranges of a node chunk
 * in one batched call whose adjacent blocks merge into large reads), so an iteration near the
 * seeds reads a few MB, and one that reaches most of the graph reads it nearly sequentially.
 * The ranking sorts (score, id) keys in place in the same 8 bytes per node. Everything the build
 * holds is counted against opts.mem (tg_rank_mem_bytes): -ENOMEM naming both when it does not
 * fit. One progress bar per iteration (and one for the sort) with opts.progress.
 *
 * The derived file: kind "rank", params "fanouts=F0+F1+..,iters=K,damping=A,seeds=S"
 * (S = "train", or "list:<count>:<crc32>" for seeds the caller gives), payload (docs/FORMAT.md,
 * "rank"): a 4096-byte record, then the ids u32[N] by descending score (ties by ascending id),
 * zeros to a multiple of 4096, then the scores f32[N] in the same order. The derived header
 * ties it to the dataset's checksums, train_idx.bin's among them, so a changed split rebuilds.
 * Datasets above 2^32 nodes are refused (the sort keys hold 32-bit ids).
 *
 * Errors: 0 or -errno with tg_err(); read errors name the file and the offset; a corrupt
 * indptr or an in-neighbour >= N is -EINVAL naming the file and offset, and so is an id >= N
 * that tg_rank_read finds in the file (the derived header does not cover the payload's bytes).
 * Ownership: a tg_rank_t is the opener's until tg_rank_close; it reads through the validated
 * derived file (a rebuild elsewhere does not change what it reads). Not thread-safe.
 * Module: graph/. Knows data/ (dataset, derived files), io/ and util/. */
#ifndef TIERGNN_RANK_H
#define TIERGNN_RANK_H

#include <stdint.h>

#include "tiergnn/data.h"
#include "tiergnn/util.h"

#ifdef __cplusplus
extern "C" {
#endif

#define TG_RANK_KIND "rank"
#define TG_RANK_DAMPING 1.0           /* a: the sampler's expected counts */
#define TG_RANK_READ_BYTES (8u << 20) /* default read_bytes */
#define TG_RANK_MAX_ITERS 64

typedef struct tg_rank_opts {
    int num_layers;         /* L: 1 .. TG_MAX_LAYERS */
    const int64_t *fanouts; /* (L) as the sampler's: fanouts[l] belongs to block l; -1 all */
    uint32_t iterations;    /* K: 0 = L; at most TG_RANK_MAX_ITERS */
    double damping;         /* a in (0, 1]; rounded to 6 significant digits (the params' %g) */
    /* The seeds: NULL = the dataset's training split (train_idx.bin, streamed). A caller list
     * (ids < N; repeats count once) is identified in the params by its count and CRC-32. */
    const uint64_t *seeds;
    uint64_t num_seeds;
    uint64_t mem;        /* bytes the build may hold; 0 = no limit */
    tg_budget_t *budget; /* optional: the build's bytes are reserved here while it runs */
    const char *root;    /* derived directory (NULL: tg_derived_dir's choice), as in derived.h */
    size_t read_bytes;   /* bytes of indptr and of indices per read (0: 8 MiB; >= 4096) */
    int progress;        /* progress bars on stderr */
} tg_rank_opts_t;

/* Sets the defaults: damping TG_RANK_DAMPING, K = L, train split, no limit; fanouts unset. */
void tg_rank_opts_default(tg_rank_opts_t *o);

/* The params string of the derived file for these options into buf; checks the options
 * (-EINVAL naming the bad one). */
int tg_rank_params(const tg_dataset_t *ds, const tg_rank_opts_t *o, char *buf, size_t len);

/* Bytes a build holds at its peak: 8 x N for the scores (and the sort), plus the read and write
 * buffers and the io/ queue. */
uint64_t tg_rank_mem_bytes(const tg_dataset_t *ds, const tg_rank_opts_t *o);

/* Runs the iterations and writes the final score of every node, by node id, into scores (N
 * floats, the caller's; not counted in mem). No derived file is read or written. For tests and
 * measurements. */
int tg_rank_compute(const tg_dataset_t *ds, const tg_rank_opts_t *o, float *scores);

typedef struct tg_rank_info {
    uint64_t num_nodes;
    uint64_t num_seeds;  /* distinct seeds (nodes with t = 1) */
    uint32_t iterations; /* K */
    double damping;
    double seconds;   /* what the build took: iterations and sort (not the write) */
    double score_sum; /* L1 norm of the final scores */
    int built;        /* 1: this open built the file; 0: it was reused */
} tg_rank_info_t;

typedef struct tg_rank tg_rank_t;

/* Opens the ranking of ds for o: the derived file when valid, else builds it (a stale or corrupt
 * one is replaced; the log says why) and opens that. Errors of the build as above; with root NULL
 * the directory is tg_derived_dir's (--derived-dir, DATASET/derived, or the per-user fallback
 * when the dataset cannot be written), and one that cannot be written is an error. */
int tg_rank_open(tg_rank_t **out, const tg_dataset_t *ds, const tg_rank_opts_t *o);
void tg_rank_close(tg_rank_t *r);
const tg_rank_info_t *tg_rank_info(const tg_rank_t *r);
/* The derived file's path (valid until tg_rank_close). */
const char *tg_rank_path(const tg_rank_t *r);
/* The min(k, N) hottest node ids, hottest first, into ids. Reads 4 bytes per id. */
int tg_rank_top(tg_rank_t *r, uint64_t k, uint64_t *ids);
/* Positions [first, first + n) of the ranking: their ids and scores (either may be NULL). */
int tg_rank_read(tg_rank_t *r, uint64_t first, uint64_t n, uint64_t *ids, float *scores);

#ifdef __cplusplus
}
#endif
#endif
