/* tiergnn/data.h - the dataset directory format, writers, readers, generator and importers.
 *
 * How to use (reading):
 *     tg_dataset_t *ds;
 *     if (tg_dataset_open(&ds, "data/cora", TG_OPEN_CHECK_SIZES) < 0) die(tg_errmsg());
 *     printf("%llu nodes\n", (unsigned long long)ds->meta.num_nodes);
 *     ... tg_dataset_load_indptr(ds, &indptr) ...
 *     tg_dataset_close(ds);
 *
 * How to use (writing): tg_dsw_begin() creates OUT.tmp-<pid>/ beside OUT; the producer writes each
 * array through a tg_filew_t (buffered, CRC-32 computed on the fly); tg_dsw_commit() writes the
 * metadata, fsyncs everything and renames the directory into place. tg_dsw_abort() removes the
 * temporary directory, so a failed import never leaves a half-written dataset behind.
 *
 * Layout (docs/FORMAT.md is the normative description):
 *     OUT/meta.txt        "key = value" lines, format_version = 1
 *     OUT/indptr.bin      u64[N+1]   CSC: in-neighbours of v are indices[indptr[v] .. indptr[v+1])
 *     OUT/indices.bin     u32[E] or u64[E] (index_dtype)
 *     OUT/features.bin    f32 or f16 [N][D], row-major, no padding
 *     OUT/labels.bin      i32[N] (-1 = unlabelled), or i32[N][C] of 0/1 when multi_label
 *     OUT/train_idx.bin, valid_idx.bin, test_idx.bin   index_dtype[count]
 *
 * Module: data/ owns the format, importers, generator and external sort. It knows nothing of
 * training.
 */
#ifndef TIERGNN_DATA_H
#define TIERGNN_DATA_H

#include <stdint.h>
#include <stdio.h>

#include "tiergnn/util.h"

#ifdef __cplusplus
extern "C" {
#endif

#define TG_FORMAT_VERSION 1
#define TG_META_NAME "meta.txt"

typedef enum { TG_F32 = 0, TG_F16 = 1 } tg_feat_dtype_t;
typedef enum { TG_U32 = 0, TG_U64 = 1 } tg_index_dtype_t;

/* The array files of a dataset, in a fixed order. */
typedef enum {
    TG_FILE_INDPTR = 0,
    TG_FILE_INDICES,
    TG_FILE_FEATURES,
    TG_FILE_LABELS,
    TG_FILE_TRAIN,
    TG_FILE_VALID,
    TG_FILE_TEST,
    TG_FILE_COUNT
} tg_file_id_t;

/* File name of each array ("indptr.bin" ...). */
const char *tg_file_name(tg_file_id_t id);

typedef struct tg_file_info {
    uint64_t size;  /* bytes */
    uint32_t crc32; /* CRC-32 of the whole file */
} tg_file_info_t;

typedef struct tg_meta {
    int format_version;
    uint64_t num_nodes, num_edges;
    uint32_t feat_dim;
    tg_feat_dtype_t feat_dtype;
    tg_index_dtype_t index_dtype;
    uint32_t num_classes;
    int multi_label;
    uint64_t num_train, num_valid, num_test;
    char source[256]; /* free text: how the dataset was made (generator flags, import source) */
    tg_file_info_t files[TG_FILE_COUNT];
} tg_meta_t;

/* Bytes per element. */
static inline size_t tg_feat_dtype_size(tg_feat_dtype_t t)
{
    return t == TG_F16 ? 2 : 4;
}
static inline size_t tg_index_dtype_size(tg_index_dtype_t t)
{
    return t == TG_U64 ? 8 : 4;
}
const char *tg_feat_dtype_name(tg_feat_dtype_t t);
const char *tg_index_dtype_name(tg_index_dtype_t t);
/* u32 when every node id fits, else u64. */
tg_index_dtype_t tg_index_dtype_for(uint64_t num_nodes);
/* Expected byte size of each file from the counts in m. */
uint64_t tg_meta_expected_size(const tg_meta_t *m, tg_file_id_t id);

/* Metadata text <-> struct. Parse errors name `path` and the line. */
int tg_meta_parse(tg_meta_t *m, const char *text, const char *path);
/* Returns a malloc'd NUL-terminated text. */
int tg_meta_format(const tg_meta_t *m, char **text);
int tg_meta_read(tg_meta_t *m, const char *dir);

/* ---------------------------------------------------------------- f16 */

float tg_f16_to_f32(uint16_t h);
uint16_t tg_f32_to_f16(float f); /* round to nearest even */

/* ---------------------------------------------------------------- buffered file writer */

/* Sequential writer with a large buffer, computing size and CRC-32 as it goes. Errors (EIO,
 * ENOSPC) name the file and offset.
 *
 * Full buffers go to disk with O_DIRECT from a background thread while the caller fills the
 * other buffer (two buffers of buf_bytes, rounded up to 4 KiB; default 8 MiB): page-cache
 * writes cost more CPU than the generator's own work on a VM, and a dataset written once is
 * not read back soon. Where O_DIRECT is refused (tmpfs, some network file systems) it falls
 * back to ordinary writes. An error of the background write is reported by the next
 * tg_filew_write or tg_filew_close. A tg_filew_t must not be copied while open. */
typedef struct tg_filew {
    int fd;
    char *path;
    char *buf;
    size_t buf_len, buf_cap;
    uint64_t written; /* bytes handed to the kernel or to the background writer */
    uint32_t crc;
    struct tg_filew_bg *bg; /* background writer (writer.c) */
} tg_filew_t;

int tg_filew_open(tg_filew_t *w, const char *path, size_t buf_bytes);
int tg_filew_write(tg_filew_t *w, const void *data, size_t len);
/* As tg_filew_write, with crc = tg_crc32(0, data, len) already computed (e.g. by the worker
 * thread that produced data), so the CRC is not computed twice. */
int tg_filew_write_crc(tg_filew_t *w, const void *data, size_t len, uint32_t crc);
/* Flushes, fsyncs and closes; fills info. Safe to call once. */
int tg_filew_close(tg_filew_t *w, tg_file_info_t *info);
/* Closes without flushing (error path). */
void tg_filew_discard(tg_filew_t *w);
static inline uint64_t tg_filew_size(const tg_filew_t *w)
{
    return w->written + w->buf_len;
}

/* ---------------------------------------------------------------- dataset writer */

typedef struct tg_dsw {
    char *out_dir; /* final path */
    char *tmp_dir; /* OUT.tmp-<pid>, where files are written */
    tg_meta_t meta;
} tg_dsw_t;

/* Creates the temporary directory. Fails if out_dir exists, unless overwrite (then it is replaced
 * only at commit). Also fails early with a clear message if the parent is not writable. */
int tg_dsw_begin(tg_dsw_t *w, const char *out_dir, int overwrite);
/* Full path of file id inside the temporary directory (static per-writer buffer not used:
 * writes into buf). */
void tg_dsw_path(const tg_dsw_t *w, tg_file_id_t id, char *buf, size_t len);
/* Opens a writer for one array file of the dataset. */
int tg_dsw_open_file(tg_dsw_t *w, tg_file_id_t id, tg_filew_t *fw);
/* The same with a buffer size of its own (0: the default 8 MiB). */
int tg_dsw_open_file_buf(tg_dsw_t *w, tg_file_id_t id, tg_filew_t *fw, size_t buf_bytes);
/* Closes fw and records its size and CRC in w->meta.files[id]. */
int tg_dsw_close_file(tg_dsw_t *w, tg_file_id_t id, tg_filew_t *fw);
/* Checks each file's recorded size against the counts in w->meta, writes meta.txt, fsyncs,
 * renames into place. On failure the temporary directory is removed. */
int tg_dsw_commit(tg_dsw_t *w);
/* Removes the temporary directory; frees. Safe after commit (then it only frees), and needed
 * there too: commit leaves out_dir allocated. */
void tg_dsw_abort(tg_dsw_t *w);
/* For command-line tools: on SIGINT, SIGTERM or SIGHUP, remove the temporary directories of
 * unfinished writers and exit with status 128 + signal. Installs handlers for those signals
 * (and a thread that does the removal); call once. */
int tg_dsw_cleanup_on_signals(void);

/* ---------------------------------------------------------------- dataset reader */

enum {
    TG_OPEN_CHECK_SIZES = 1,     /* stat each file against meta (cheap; default for training) */
    TG_OPEN_CHECK_CHECKSUMS = 2, /* read every file and compare CRC-32 (slow; `verify`) */
};

typedef struct tg_dataset {
    char *dir;
    tg_meta_t meta;
    /* The TG_OPEN_* flags it was opened with. TG_OPEN_CHECK_CHECKSUMS (train --verify) also has
     * tg_derived_open check the payload CRC of every derived/ file opened for this dataset:
     * for hier the feature rows themselves live in one. */
    unsigned flags;
} tg_dataset_t;

int tg_dataset_open(tg_dataset_t **out, const char *dir, unsigned flags);
void tg_dataset_close(tg_dataset_t *ds);
/* zlib's CRC-32 (crc = 0 to start; pass the previous value to continue), with a PCLMULQDQ
 * folding kernel on x86-64 CPUs that have one (src/data/crc32.c): 13 GB/s on 512-byte rows here
 * against zlib's 2. The same values as tg_crc32. */
uint32_t tg_data_crc32(uint32_t crc, const void *buf, size_t len);
/* Full path of a file of the dataset into buf. */
void tg_dataset_path(const tg_dataset_t *ds, tg_file_id_t id, char *buf, size_t len);
/* Loads indptr (N+1 u64) into a malloc'd array; checks monotone and indptr[N] == E. */
int tg_dataset_load_indptr(const tg_dataset_t *ds, uint64_t **indptr);
/* Loads the whole indices array widened to u64 (in-memory strategy; E*8 bytes). */
int tg_dataset_load_indices(const tg_dataset_t *ds, uint64_t **indices);
/* Loads labels: N i32 (or N*C when multi_label). */
int tg_dataset_load_labels(const tg_dataset_t *ds, int32_t **labels);
/* Loads a split (TG_FILE_TRAIN/VALID/TEST) widened to u64; *n = count. */
int tg_dataset_load_split(const tg_dataset_t *ds, tg_file_id_t which, uint64_t **ids, uint64_t *n);
/* Reads rows [first, first+count) of the features, converted to f32, into out (count*D floats). */
int tg_dataset_read_features(const tg_dataset_t *ds, uint64_t first, uint64_t count, float *out);

/* Checks everything `tiergnn verify` promises: sizes, checksums, monotone indptr, index ranges,
 * label ranges, split ids in range. Prints progress; returns 0 if all good, else the first
 * problem as an error naming the file and offset. */
int tg_dataset_verify(const char *dir);
/* Prints `tiergnn info` (counts, degree statistics, sizes) to f. */
int tg_dataset_info(const char *dir, FILE *f);

/* ---------------------------------------------------------------- external edge sort */

/* Collects (src, dst) edges in bounded memory and produces the CSC arrays (indptr, indices
 * sorted by destination, then source). Runs that exceed mem_bytes spill to sorted run files in
 * tmp_dir and are merged at the end.
 *
 * Memory: mem_bytes bounds the sorter's own buffers (the run buffer and the radix-sort scratch
 * of the same size, later reused as merge read windows), plus O(threads x 2^11) histogram words
 * and about 8 MiB of output batches. Each edge takes 8 bytes while num_nodes <= 2^32 ((dst, src)
 * packed into one u64), else 16. The writers given to finish keep their own buffers. Run files
 * go to tmp_dir (up to 8 bytes per edge at a time) and are removed as they are merged.
 * Threads: nthreads for sorting runs; finish adds a read-ahead and a writer thread.
 * Time: O(E) per radix pass (one MSD pass + ceil((2 log2 N - 10) / 11) LSD passes per bucket),
 * O(E log k) for the k-way merge.
 * Output does not depend on nthreads, mem_bytes or the order edges were added in. */
typedef struct tg_edgesort tg_edgesort_t;

typedef struct tg_edgesort_opts {
    uint64_t num_nodes;
    uint64_t mem_bytes;    /* in-memory run buffer size (default 256 MiB if 0) */
    const char *tmp_dir;   /* where run files go (required) */
    int dedup;             /* drop repeated (src, dst) pairs */
    int self_loops;        /* add (v, v) for every node v that lacks one */
    int remove_self_loops; /* drop (v, v) edges from the input (before self_loops adds them) */
    int nthreads;          /* threads for the in-memory radix sort (0: online CPUs, at most 8) */
    const char *progress;  /* label of a progress bar for spills and the merge (NULL: none) */
    /* Edges the caller expects to add (0: unknown). When they will not fit in one run, the runs
     * that go to disk are made smaller and equal, so that the last run, which the final merge
     * keeps in memory, is a full one: fewer bytes written and read back. Only a hint: any
     * number of edges still works, and the output does not depend on it. */
    uint64_t expected_edges;
} tg_edgesort_opts_t;

int tg_edgesort_create(tg_edgesort_t **out, const tg_edgesort_opts_t *opts);
/* Adds n edges src[i] -> dst[i]. Ids must be < num_nodes (checked; error names the index). */
int tg_edgesort_add(tg_edgesort_t *es, const uint64_t *src, const uint64_t *dst, size_t n);
/* Zero-copy adding for producers that can pack keys themselves (the generator draws edges
 * straight into the run buffer on all its threads). Packed keys are dst << src_bits | src, one
 * u64 per edge, and exist while 2 * bits(N - 1) <= 64: tg_edgesort_key_bits gives src_bits, or
 * 0 when keys are wider (use tg_edgesort_add then). tg_edgesort_reserve makes room for n keys
 * (sorting and spilling the run first if needed) and points *keys at it; the caller writes up
 * to n keys there, each with ids < num_nodes, and passes the count to tg_edgesort_commit before
 * any other call. Neither check nor drop anything: self loops must be left out by the caller
 * when remove_self_loops is set. -EINVAL when n is more than the run buffer holds. */
unsigned tg_edgesort_key_bits(const tg_edgesort_t *es);
size_t tg_edgesort_capacity(const tg_edgesort_t *es); /* keys the run buffer holds */
int tg_edgesort_reserve(tg_edgesort_t *es, size_t n, uint64_t **keys);
int tg_edgesort_commit(tg_edgesort_t *es, size_t n);
/* Sets or changes expected_edges (see tg_edgesort_opts_t) once the count is known: edges added
 * so far count towards it, the run being filled is planned again. */
void tg_edgesort_expect(tg_edgesort_t *es, uint64_t expected_edges);
/* Merges and writes indptr (u64[N+1]) and indices (index_dtype) through the given writers
 * (which stay open: the caller closes them). *num_edges receives the final edge count. Call
 * once; afterwards only tg_edgesort_destroy. index_dtype u32 with num_nodes > 2^32 is -EINVAL. */
int tg_edgesort_finish(tg_edgesort_t *es, tg_filew_t *indptr, tg_filew_t *indices,
                       tg_index_dtype_t index_dtype, uint64_t *num_edges);
void tg_edgesort_destroy(tg_edgesort_t *es);

/* ---------------------------------------------------------------- generator */

/* tiergnn generate: a power-law graph with planted communities (docs/FORMAT.md, "Synthetic
 * datasets", describes the model). label = community; a fraction `homophily` of the edges stays
 * inside the community of its source; features are a class centroid plus Gaussian noise.
 * Edges are undirected (both directions stored), without self loops or repeats.
 * Deterministic for a seed: the same bytes for any thread count and any mem_bytes. Memory stays
 * within mem_bytes whatever the size: edges go through the external sort, features are
 * streamed block by block. Writes through tg_dsw_* (no half-written dataset on failure). */
typedef struct tg_gen_opts {
    uint64_t nodes;
    double avg_degree; /* directed edges per node before duplicates are removed (20) */
    uint32_t feat_dim;
    uint32_t classes;
    double train_frac, valid_frac, test_frac; /* defaults 0.6 / 0.2 / 0.2 */
    double homophily;                         /* fraction of edges inside a community (0.8) */
    double feat_noise; /* noise std per feature, centroids have norm 1; < 0: auto (default),
                          see tg_gen_auto_noise */
    uint64_t seed;
    tg_feat_dtype_t feat_dtype;
    uint64_t mem_bytes; /* memory the generator may use (default: min(1 GiB, RAM/4)) */
    int overwrite;
    int threads; /* worker threads (0: online CPUs) */
} tg_gen_opts_t;

void tg_gen_opts_default(tg_gen_opts_t *o);
int tg_generate(const char *out_dir, const tg_gen_opts_t *o);
/* The noise std that --feat-noise auto picks for `classes` classes: the best classifier that
 * sees only a node's own features (nearest centroid) is right halfway between chance and
 * always, i.e. with probability (1 + 1/C) / 2 (0.52 for 32 classes). */
double tg_gen_auto_noise(uint32_t classes);
/* Accuracy of the nearest-centroid classifier on one node's features for orthonormal
 * centroids and noise std `noise` (the integral behind tg_gen_auto_noise). */
double tg_gen_centroid_accuracy(uint32_t classes, double noise);
/* Smallest mem_bytes tg_generate accepts for these options. */
uint64_t tg_gen_min_mem(const tg_gen_opts_t *o);

/* ---------------------------------------------------------------- importers */

typedef enum { TG_IMPORT_OGB, TG_IMPORT_NPY, TG_IMPORT_EDGELIST, TG_IMPORT_NPZ } tg_import_kind_t;

typedef struct tg_import_opts {
    tg_import_kind_t kind;
    const char *src;   /* directory (ogb, npy) or file (edgelist, npz) */
    const char *split; /* ogb: split name (default: the only folder under split/; with several
                          and none named, the import stops and lists them) */
    int undirected, dedup, self_loops;
    /* edgelist only: generated features and labels (as in tg_generate) */
    uint32_t feat_dim, classes;
    double train_frac, valid_frac, test_frac, feat_noise;
    uint64_t seed;
    tg_feat_dtype_t feat_dtype;
    uint64_t mem_bytes;
    int overwrite;
} tg_import_opts_t;

void tg_import_opts_default(tg_import_opts_t *o);

/* A NumPy .npy header (format 1.0) for a C-order array of dtype descr ("<f4", "<i4", "<i8") and
 * shape[0..ndim): the magic, the dict and the padding, buf[0..return value), a multiple of 64
 * bytes; the data follow it. Returns 0 when len is too small (256 bytes always suffice for
 * ndim <= 4). Used for the edge-list id map (node_ids.npy) and infer --format npy. */
/* The id map an edge-list import writes beside the dataset files: int64[N] in .npy, the input's
 * id of each node (docs/FORMAT.md). */
#define TG_NODE_IDS_FILE "node_ids.npy"

size_t tg_npy_header(char *buf, size_t len, const char *descr, int ndim, const uint64_t *shape);
int tg_import(const char *out_dir, const tg_import_opts_t *o);

#ifdef __cplusplus
}
#endif
#endif
