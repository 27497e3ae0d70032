/* tiergnn/megabatch.h - mega-batches of a partitioned dataset (HierBatching, sections 3.1 and
 * 3.2): the subgraph induced by a set of parts T and the static cache's nodes that T reaches,
 * read from the partitioned files (tiergnn/partition.h) with large sequential reads, with its
 * rows, original ids and training nodes, all in RAM.
 *
 * How to use:
 *     tg_mb_opts_t o = {.ds = ds, .part = part, .params = params, .budget = &budget,
 *                       .row_bytes = row, .static_old = hot, .num_static = S,
 *                       .static_edges = sum_of_their_in_degrees, .train_old = train,
 *                       .num_train = ntrain, .who = "hier"};
 *     tg_mb_t *L;
 *     if (tg_mb_open(&L, &o) < 0) die(tg_errmsg());       // the static cache, read once
 *     tg_megabatch_t mb[2];
 *     if (tg_mb_alloc(L, mb, 2, nodes, edges, pairs) < 0) ... // buffers for the largest T
 *     uint32_t parts[] = {3, 7, 12};
 *     if (tg_mb_load(L, &mb[0], parts, 3) < 0) die(tg_errmsg()); // mb[0].adj: its subgraph
 *     ... sample from m->adj, rows m->feat (locals < nt) or tg_mb_static_row (locals >= nt) ...
 *     tg_mb_release(L);                                    // the buffers and their budget
 *     tg_mb_close(L);
 *
 * The static cache: num_static nodes (the caller's choice: HierBatching takes the highest
 * in-degree ones) whose rows stay in RAM, and whose in-neighbour lists are kept in two halves so
 * that a mega-batch touches only the edges it keeps: the neighbours that are static nodes too,
 * in RAM (static indices), and the others by the part they are in, in the derived file
 * partstat-<params>,static=S (per part the pairs (static index, offset in the part) of its
 * nodes' edges into static nodes, read with the part; built on the first open, rebuilt when
 * stale). A static node's index is its rank among the static nodes by new id (a bitmap and a
 * rank per 64 ids: a bit test and a popcount).
 *
 * A mega-batch of parts T: locals [0, nt) are T's nodes, part by part in part id order (a part's
 * nodes in new id order); locals [nt, nm) the static nodes outside T that some node of T has as
 * an in-neighbour (they join it), by static index. Edges: a node of T keeps its in-neighbours in
 * T and the static ones, in its list's order; a joined static node keeps its in-neighbours in T
 * (from the pairs) and then those static nodes that joined too. seeds: T's training nodes, part
 * by part in new id order. deg_full, deg_induced and deg_static count T's in-edges in the graph,
 * kept inside T and kept to static nodes.
 *
 * Errors: 0 or -errno with tg_err() set, messages prefixed with who: -EINVAL for a static or
 * training node that is not a node, or a static node given twice; -ENOMEM naming the budget
 * (--mem) or the allocation; -EINVAL naming the file and the entry for a damaged partadj
 * (tg_part_check_*) or partstat (a pair naming a static node or an offset out of range); -EIO
 * (or the fault's errno) with the file and offset for a failed read; -EOVERFLOW for a mega-batch
 * larger than tg_mb_alloc's room.
 *
 * Module: graph/. Not thread-safe: one thread loads at a time (the buffers being trained stay
 * valid while another is loaded). */
#ifndef TIERGNN_MEGABATCH_H
#define TIERGNN_MEGABATCH_H

#include <stdint.h>

#include "tiergnn/graph.h"
#include "tiergnn/partition.h"
#include "tiergnn/util.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Checks a row read from path at byte off against original node old_id's checksum: 0, or a
 * negative code with a message (tiergnn/rowcrc.h's tg_rowcrc_check fits). */
typedef int (*tg_mb_row_check_fn)(void *ctx, uint64_t old_id, const void *row, const char *path,
                                  uint64_t off);

typedef struct tg_mb_opts {
    const tg_dataset_t *ds;     /* partstat is one of its derived files */
    tg_part_t *part;            /* the open partition (borrowed: outlives the loader) */
    const char *params;         /* its params (tg_part_params): partstat's name */
    tg_budget_t *budget;        /* everything below is reserved against it */
    uint64_t row_bytes;         /* a stored feature row */
    const uint64_t *static_old; /* the static nodes, original ids (copied; any order) */
    uint64_t num_static;
    uint64_t static_edges;     /* their in-edges in the graph (their in-degrees' sum) */
    const uint64_t *train_old; /* the training nodes, original ids (copied) */
    uint64_t num_train;
    tg_mb_row_check_fn check_row; /* NULL: rows are not checked */
    void *check_ctx;
    const char *who; /* messages' and budget items' prefix ("hier") */
} tg_mb_opts_t;

/* One mega-batch in RAM (see above); valid until the next tg_mb_load into it or tg_mb_release. */
typedef struct tg_megabatch {
    uint64_t nt, nm, ne, nseeds;
    uint64_t e_cap;    /* edges indices holds (grows, against the budget) */
    char *feat;        /* nt rows (T); the static ones are the static cache's */
    uint64_t *old_ids; /* nm */
    uint64_t *indptr;  /* nm + 1 */
    uint32_t *indices; /* ne locals */
    uint32_t *sidx;    /* nm - nt: the static index of local nt + j */
    uint64_t *seeds;   /* nseeds locals */
    tg_adj_t *adj;     /* over indptr and indices */
    uint64_t deg_full, deg_induced, deg_static;
} tg_megabatch_t;

/* The loader: the partition's maps and the static cache, read-only for its users but for the
 * read counters. Fields are filled by tg_mb_open. */
typedef struct tg_mb {
    tg_part_t *part;
    const tg_dataset_t *ds;
    tg_budget_t *budget;
    const char *who;
    char params[256];
    uint32_t P;
    uint64_t N;
    uint64_t row;  /* bytes of a stored row */
    uint64_t held; /* budget reserved by open (the static cache and the maps) */
    tg_mb_row_check_fn check_row;
    void *check_ctx;
    /* per part: training nodes (new ids ascending; part k's are [tp[k], tp[k + 1])) */
    uint64_t *train_new, *tp;
    uint64_t ntrain;
    /* the parts' nodes, edges and static pairs, each sorted largest first (a mega-batch's room
     * comes from the largest parts) */
    uint64_t *psize, *pedge, *pspairs;
    /* the static cache: S nodes (new ids ascending), their original ids, rows */
    uint64_t S;
    uint64_t *s_new, *s_old;
    char *s_feat;
    uint64_t static_edges; /* in the static nodes' lists */
    uint64_t ss_edges;     /* of them, from static nodes (in RAM) */
    /* the rest is the loader's own */
    uint64_t *s_ip, ss_cap;
    uint32_t *s_lists;
    uint32_t *s_rank, *s_local, *s_jrank;
    uint64_t *s_cur, *s_join;
    tg_derived_file_t *pstat;
    uint64_t *ps_off;
    uint32_t *pairs;
    uint64_t pairs_cap;
    int32_t *slot;
    uint64_t *in_t, *is_static, *ipbuf;
    uint32_t *lbuf;
    uint64_t ipbuf_cap;
    /* the buffers of tg_mb_alloc (the caller's structs) */
    int nbuf;
    tg_megabatch_t *bufs;
    uint64_t t_cap, e_cap, seeds_cap;
    uint64_t buf_held; /* their budget, grown edges included */
    /* what the loader read: bytes, reads, and the time its loads took */
    uint64_t read_bytes, reads;
    double load_s;
} tg_mb_t;

/* Reads the static cache (rows, checked by check_row; lists: the static-to-static half in RAM,
 * partstat opened or built), maps the training nodes to parts, and sizes the parts. Time:
 * O(N / 64 + P log P + S log S + T log T) for T training nodes, beside one sequential pass over
 * new_of_old and the static nodes' lists. */
int tg_mb_open(tg_mb_t **out, const tg_mb_opts_t *o);
/* Frees everything, buffers included, and releases its budget. NULL is fine. */
void tg_mb_close(tg_mb_t *L);

/* Bytes tg_mb_open reserves for the static cache and the maps (L's P, N, S, row and ntrain; the
 * largest part of max_part nodes), its static-to-static lists apart (reserved as they are read). */
uint64_t tg_mb_fixed_bytes(const tg_mb_t *L, uint64_t max_part);
/* Bytes of nbuf buffers for mega-batches of at most `nodes` nodes in T whose parts hold `edges`
 * in-edges and `pairs` static pairs, and of the pair buffer. */
uint64_t tg_mb_bytes(const tg_mb_t *L, int nbuf, uint64_t nodes, uint64_t edges, uint64_t pairs);
/* Reserves and allocates them into the caller's bufs[0..nbuf) (which must stay where they are
 * until tg_mb_release; nothing is done when buffers exist), with room for every edge a
 * mega-batch can keep (T's edges, its parts' pairs, the static-to-static edges). On error the
 * caller calls tg_mb_release. */
int tg_mb_alloc(tg_mb_t *L, tg_megabatch_t *bufs, int nbuf, uint64_t nodes, uint64_t edges,
                uint64_t pairs);
/* Frees the buffers' arrays (the structs are zeroed) and releases their budget; the static
 * cache stays. */
void tg_mb_release(tg_mb_t *L);

/* Loads the mega-batch of parts[0..n) (any order, no repeats) into m, one of the buffers. On
 * error m holds no subgraph (m->adj NULL) and the loader is ready for the next load. Time: the
 * parts' nodes and in-edges, their static pairs, and the joined static nodes' lists, beside
 * O(S / 64) for the joined set; reads: partfeat and the map, one per run of consecutive parts;
 * partadj (its lists 4 MiB at a time) and partstat, per part. */
int tg_mb_load(tg_mb_t *L, tg_megabatch_t *m, const uint32_t *parts, uint64_t n);

/* The stored row of a mega-batch's local l (l < nm). */
static inline const char *tg_mb_row(const tg_mb_t *L, const tg_megabatch_t *m, uint64_t l)
{
    return l < m->nt ? m->feat + l * L->row : L->s_feat + (uint64_t)m->sidx[l - m->nt] * L->row;
}

#ifdef __cplusplus
}
#endif
#endif
