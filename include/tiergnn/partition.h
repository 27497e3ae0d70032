/* tiergnn/partition.h - min-edge-cut node partitions of a dataset's graph (HierBatching, section
 * 3.1), and the dataset rewritten so that every partition is contiguous on disk.
 *
 * How to use (assignment only):
 *     tg_part_assign_opts_t o;
 *     tg_part_assign_opts_default(&o);
 *     o.parts = 1024;                       // o.method = TG_PART_AUTO: METIS when it fits
 *     uint32_t *part = malloc(N * sizeof *part);
 *     tg_part_assign_stats_t st;
 *     if (tg_part_assign(ds, &o, part, &st) < 0) die(tg_errmsg());
 *     printf("%s: cut %.1f%%\n", tg_part_method_name(st.method),
 *            100.0 * st.cut_edges / st.edges);
 *
 * Methods:
 *   METIS   METIS_PartGraphKway (Debian's libmetis) on the graph made undirected (every CSC edge
 *           u -> v taken both ways, self loops and duplicates dropped). The whole structure is
 *           in RAM: tg_part_metis_bytes() estimates what it takes.
 *   STREAM  restreaming linear deterministic greedy (Stanton & Kliot's LDG; Nishimura & Ugander's
 *           restreaming): passes over indptr.bin and indices.bin, read sequentially in bounded
 *           buffers; each node goes to the part holding most of its in-neighbours, weighted by
 *           how much room that part has left. It holds 4 bytes per node (the assignment) and
 *           O(parts) beside, so it partitions graphs larger than RAM.
 *   AUTO    METIS when METIS was built in and tg_part_metis_bytes() fits mem_bytes, else STREAM.
 *
 * Edge cut: the CSC's edges u -> v (self loops excluded) whose ends lie in different parts, over
 * all of them; balance: the largest part's nodes over N / parts.
 *
 * Errors: 0 or -errno with tg_err() set, as everywhere: -EINVAL for parts of 0 or more than the
 * nodes, an unknown method, a neighbour id past the graph (naming the file and the offset);
 * -ENOTSUP for METIS asked for in a build without it; -ENOMEM naming the bytes METIS needs when
 * mem_bytes cannot hold them (method METIS asked for explicitly); -EIO with the file and offset
 * for short reads.
 *
 * Module: data/. */
#ifndef TIERGNN_PARTITION_H
#define TIERGNN_PARTITION_H

#include <stdint.h>

#include "tiergnn/data.h"
#include "tiergnn/derived.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum { TG_PART_AUTO = 0, TG_PART_METIS = 1, TG_PART_STREAM = 2 } tg_part_method_t;

/* "auto", "metis", "stream". */
const char *tg_part_method_name(tg_part_method_t m);
/* -EINVAL naming the accepted words for anything else. */
int tg_part_method_parse(const char *s, tg_part_method_t *m);

typedef struct tg_part_assign_opts {
    uint32_t parts;          /* 1 .. num_nodes */
    tg_part_method_t method; /* default AUTO */
    uint64_t mem_bytes;      /* what the partitioner may hold; 0 = a quarter of the RAM */
    uint64_t seed;           /* METIS's seed (the streaming method is deterministic: node order) */
    uint32_t stream_passes;  /* passes of the streaming partitioner (default 4; >= 1) */
    double imbalance;        /* allowed excess of the largest part over N / parts (0.03) */
    int progress;            /* progress bars on stderr */
} tg_part_assign_opts_t;

void tg_part_assign_opts_default(tg_part_assign_opts_t *o);

typedef struct tg_part_assign_stats {
    tg_part_method_t method;     /* the method that ran */
    uint64_t edges;              /* CSC edges, self loops excluded */
    uint64_t cut_edges;          /* of them, between different parts */
    uint64_t min_part, max_part; /* nodes of the smallest and the largest part */
    double balance;              /* max_part / (N / parts) */
    double seconds;              /* wall time of the assignment (not of the cut count) */
    uint64_t peak_bytes;         /* what the method held at most (its own count) */
} tg_part_assign_stats_t;

/* Bytes METIS is expected to hold for ds at that many parts (the undirected structure, METIS's
 * own work arrays): what AUTO compares with mem_bytes. */
uint64_t tg_part_metis_bytes(const tg_dataset_t *ds, uint32_t parts);

/* Assigns every node a part in [0, parts): part[v] for v < num_nodes (caller's array). Fills
 * st (may be NULL) with the method, the edge cut and the balance. */
int tg_part_assign(const tg_dataset_t *ds, const tg_part_assign_opts_t *o, uint32_t *part,
                   tg_part_assign_stats_t *st);

/* Counts the edge cut and balance of a given assignment (one sequential pass over indptr.bin and
 * indices.bin); -EINVAL naming the node whose part is >= parts. Leaves method, seconds and
 * peak_bytes of st alone. */
int tg_part_cut(const tg_dataset_t *ds, const uint32_t *part, uint32_t parts,
                tg_part_assign_stats_t *st);

/* ---------------------------------------------------------------- the partitioned dataset
 *
 * tg_part_build partitions ds and rewrites it in partition order in its derived directory
 * (DATASET/derived/ unless --derived-dir or a read-only dataset says otherwise: the kit's
 * derived files, data/derived.c; the original files are untouched):
 *
 *   part-<params>.bin      the assignment: a 64-byte record (parts, method, edge cut, balance,
 *                          seconds), pp u64[parts + 1] (part k holds the new ids [pp[k], pp[k+1])),
 *                          then old_of_new[N] and new_of_old[N] (u32, or u64 past 2^32 nodes)
 *   partfeat-<params>.bin  features.bin's rows in the new order (row new = row old_of_new[new])
 *   partadj-<params>.bin   indptr u64[N + 1] of the new order, zeros to a 4096-byte boundary,
 *                          then the in-neighbour lists in the new order, each entry the new id
 *                          of the neighbour (index_dtype), each list in its original order
 *
 * The new order: part by part, and inside a part by old id (so a window of old ids falls in each
 * part as one run: both rewrites read the original file once, sequentially, and write a run per
 * part). params: "parts=P,method=M,seed=S,imbalance=I" (+ ",passes=K" for the streaming
 * method), the method being the one that ran. A build that is killed leaves only temp files,
 * which nothing trusts and the next build removes; files still valid are kept. */

typedef struct tg_part_build_opts {
    tg_part_assign_opts_t assign; /* parts, method (AUTO resolved first), seed ... */
    uint64_t mem_bytes;           /* the rewrite's windows and maps (0: a quarter of the RAM) */
    uint64_t window_bytes;        /* each rewrite window's bytes (0: from mem_bytes; tests set a
                                     few KiB to cross many windows and split long lists) */
    int progress;                 /* progress bars on stderr */
} tg_part_build_opts_t;

typedef struct tg_part_summary {
    uint32_t parts;
    tg_part_method_t method;
    uint64_t num_nodes, edges, cut_edges, min_part, max_part;
    double balance, assign_s;
} tg_part_summary_t;

typedef struct tg_part_build_stats {
    tg_part_summary_t sum;
    int built_map, built_feat, built_adj; /* 0: the file was valid and kept */
    double map_s, feat_s, adj_s, total_s;
    uint64_t read_bytes, write_bytes;
} tg_part_build_stats_t;

/* The derived files' params for these options (method resolved: not AUTO). */
int tg_part_params(const tg_part_assign_opts_t *o, tg_part_method_t method, char *buf, size_t len);
/* The method AUTO resolves to for ds (METIS when built in and fitting mem_bytes); why says so. */
tg_part_method_t tg_part_resolve(const tg_dataset_t *ds, const tg_part_assign_opts_t *o, char *why,
                                 size_t why_len);
/* The params of the partition to use for o on ds, into buf: with method AUTO, one already built
 * and valid (METIS's first, then the streaming one's), else the method AUTO resolves to; that
 * method is left in o->method. Opens no more than the two candidates' files. */
int tg_part_find(const tg_dataset_t *ds, tg_part_assign_opts_t *o, char *buf, size_t len);
/* Builds what is missing or stale of the three files (see above). */
int tg_part_build(const tg_dataset_t *ds, const tg_part_build_opts_t *o, tg_part_build_stats_t *st);

/* An open partitioned dataset (the three files checked), for reading slices. */
typedef struct tg_part {
    tg_part_summary_t sum;
    uint64_t *pp;            /* parts + 1 entries, in RAM */
    size_t id_bytes;         /* 4 or 8: old_of_new / new_of_old entries */
    size_t index_bytes;      /* 4 or 8: partadj's neighbour entries */
    uint64_t old_of_new_off; /* payload offsets in map */
    uint64_t new_of_old_off;
    uint64_t indices_off; /* payload offset in adj of the first list entry */
    uint64_t num_edges;   /* the dataset's: partadj's list entries */
    tg_derived_file_t *map, *feat, *adj;
} tg_part_t;

/* Opens the files of params, -ENOENT / -ESTALE (tg_derived_open's) when one is missing or no
 * longer valid. The map (part-*) is checked whole here, in one sequential pass (its payload
 * CRC-32, and that old_of_new and new_of_old are inverse permutations of node ids that keep every
 * part contiguous and the old order inside it): -ESTALE naming the entry when it is damaged
 * (tg_part_build then rebuilds it). partfeat and partadj are too large for that: partadj's
 * entries are checked as they are read (tg_part_indptr, tg_part_indices, or the check functions
 * on bytes read otherwise); partfeat's rows are bytes, checked by their CRC under --verify. */
int tg_part_open(tg_part_t **out, const tg_dataset_t *ds, const char *params);
void tg_part_close(tg_part_t *p);
/* The part of new id v (binary search over pp). */
uint32_t tg_part_of(const tg_part_t *p, uint64_t v);
/* old_of_new[first .. first + n) as u64 into out; -EINVAL naming the entry for an id >= N (the
 * file changed under the handle). */
int tg_part_old_ids(const tg_part_t *p, uint64_t first, uint64_t n, uint64_t *out);
/* new_of_old[first .. first + n) as u64 into out, checked the same way. */
int tg_part_new_ids(const tg_part_t *p, uint64_t first, uint64_t n, uint64_t *out);
/* partadj's indptr[first .. first + n) (first + n <= N + 1) into out, checked: every entry at
 * most E and not below the one before it in the range, indptr[0] = 0, indptr[N] = E; -EINVAL
 * naming the file, the entry and its payload offset otherwise. */
int tg_part_indptr(const tg_part_t *p, uint64_t first, uint64_t n, uint64_t *out);
/* That check alone, on indptr[first .. first + n) read by the caller. */
int tg_part_check_indptr(const tg_part_t *p, uint64_t first, uint64_t n, const uint64_t *ip);
/* partadj's list entries [e, e + n) as stored (index_bytes each) into buf, each checked to name
 * a node (< N): -EINVAL naming the entry otherwise. */
int tg_part_indices(const tg_part_t *p, uint64_t e, uint64_t n, void *buf);
/* That check alone, on entries [e, e + n) read by the caller. */
int tg_part_check_indices(const tg_part_t *p, uint64_t e, uint64_t n, const void *raw);

#ifdef __cplusplus
}
#endif
#endif
