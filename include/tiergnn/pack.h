/* tiergnn/pack.h - batched feature packing (DiskGNN section 5.2): copy feature rows from
 * features.bin to wherever a layout wants them, reading the file once, sequentially.
 *
 * How to use:
 *   A planner (store/layout) decides where every needed row goes: to byte `off` of output `out`
 *   (a packed chunk file, a disk-cache file, the RAM cache). It splits the nodes into partitions
 *   of consecutive ids and, asked for partition p, lists p's targets sorted by (node, out, off):
 *
 *       tg_pack_part_t parts[P] = {{.lo = 0, .hi = 1 << 20, .ntargets = ...}, ...};
 *       tg_pack_out_t outs[K] = {{.mem = cache, .size = cache_bytes}, {.fd = chunk_fd}, ...};
 *       tg_pack_opts_t o = {.feat_path = "data/x/features.bin", .num_nodes = N,
 *                           .row_bytes = D * 4, .parts = parts, .nparts = P,
 *                           .targets = my_fill, .targets_ctx = plan, .outs = outs, .nouts = K,
 *                           .threads = 4, .budget = &budget, .abort = &stop,
 *                           .progress = "packing"};
 *       uint64_t need = tg_pack_bytes(parts, P, D * 4, K);    // what tg_pack will reserve
 *       tg_pack_stats_t st;
 *       if (tg_pack(&o, &st) < 0) { discard every output; die(tg_errmsg()); }
 *
 *   Per partition, tg_pack reads the byte range from its first to its last needed node with large
 *   O_DIRECT reads (io/), copies each target's row into a staging buffer laid out in (out, off)
 *   order (on `threads` threads), then writes each run of targets contiguous in one output with
 *   one pwrite (at most TG_PACK_WRITE_MAX bytes; runs are split across the threads) or, for a RAM
 *   output, one memcpy. A reader thread reads partition p+1 while p is copied and written. Rows
 *   are copied as raw bytes (dtype x dim as stored): no conversion.
 *
 * Outputs: a RAM output is caller memory (mem, size); a file output is a descriptor the caller
 *   opened for writing (in the strategy, O_TMPFILE files in the dataset's directory, so a killed
 *   run leaves nothing behind). File writes are buffered, not O_DIRECT, since runs start
 *   mid-page. After the last partition every file output is fdatasync'ed and dropped from the
 *   page cache (posix_fadvise DONTNEED) - the page cache counts against a memory cgroup. During
 *   packing, the pages a partition's runs cover whole hold their final bytes (targets do not
 *   overlap): they are handed to writeback right after the partition's writes and dropped after
 *   the next partition's, so the cache holds about two partitions' writes and the disk writes
 *   while the next partitions are read. Pages covered only in part (rows scattered one by one
 *   over a disk cache, a run's last row) are not dropped before the final sync (the kernel still
 *   writes back and reclaims them under pressure): dropped, they would be read back from disk
 *   before the next row could land in them. Scattered rows cost a pwrite each (a few us per
 *   row on the development VM), runs a few large writes. A later O_DIRECT read of those files
 *   (io/) sees the data: the data is on disk after fdatasync, and Linux also writes back any
 *   dirty page-cache range before it serves a direct read of it.
 *
 * Errors (0 or -errno with a tg_errmsg that names the place): a read error or short read of
 *   features.bin (io/'s message: path and offset); a write error (ENOSPC, EIO, EBADF ...) naming
 *   the output's index, its path (/proc/self/fd) and the offset; a failed fdatasync likewise;
 *   -EINVAL naming the partition and target index for a target whose node lies outside its
 *   partition, whose out is out of range, whose row would pass a RAM output's size (or a file
 *   output's size bound), targets not strictly sorted by (node, out, off), or two targets of one
 *   partition that overlap in an output; -ENOMEM when the budget cannot hold the buffers (naming
 *   the bytes and the largest partition); -ECANCELED soon after *abort becomes non-zero (polled
 *   between reads of at most 8 MiB, between partitions and between writes). After any error the
 *   outputs hold an unspecified mix of old and new bytes: the caller discards them (tg_pack
 *   does not truncate or remove anything).
 *
 * Memory (tg_pack_bytes): two read buffers for the largest partition's node range, the staging
 * rows and about 60 bytes of bookkeeping per target of the partition with the most targets
 * (targets of two partitions, their order, the write list), 9 bytes per output, and the read
 * queue (8 MiB of staging and its bookkeeping); all reserved against opts.budget before anything
 * is allocated, and released before tg_pack returns.
 *
 * Threads: tg_pack blocks its caller; targets() is called on the calling thread, in partition
 * order, one partition ahead of the one being written. Outputs must not be touched by anyone
 * else until tg_pack returns.
 *
 * The packed file that comes out (DiskGNN's, src/engine/strategies/diskgnn.c) is read back
 * batch by batch through store/extract: see "a packed file" below.
 *
 * Module: store/ (reads through io/, uses util/ only otherwise; the packed file's reader sits
 * on store/extract's public API).
 */
#ifndef TIERGNN_PACK_H
#define TIERGNN_PACK_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "tiergnn/extract.h"
#include "tiergnn/io.h"
#include "tiergnn/util.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Largest single pwrite; longer runs are cut (and the pieces spread over the threads). */
#define TG_PACK_WRITE_MAX ((size_t)4 << 20)

#ifndef TG_PACK_TARGET_DEFINED
#define TG_PACK_TARGET_DEFINED
/* One row to place: the row of `node` goes to bytes [off, off + row_bytes) of outs[out]. */
typedef struct tg_pack_target {
    uint32_t node;
    uint32_t out; /* index into the outputs array */
    uint64_t off; /* byte offset in that output */
} tg_pack_target_t;
#endif

/* A partition: nodes [lo, hi), and how many targets its targets() call may return at most
 * (sizes the buffers; 0 = the partition is skipped without a call). Partitions are ascending
 * and do not overlap; gaps between them are fine. */
typedef struct tg_pack_part {
    uint64_t lo, hi;
    uint64_t ntargets;
} tg_pack_part_t;

/* Fills dst[0 .. n) with partition p's targets, sorted by (node, out, off), n <= cap (cap is
 * parts[p].ntargets), and returns n; or returns a negative code after tg_err. dst is tg_pack's,
 * valid during the call only. */
typedef int64_t (*tg_pack_targets_fn)(void *ctx, uint32_t p, tg_pack_target_t *dst, size_t cap);

/* An output: RAM when mem is not NULL (size bytes of it), else the file descriptor fd. */
typedef struct tg_pack_out {
    void *mem;
    uint64_t size;    /* RAM: bytes at mem. File: largest offset + 1 a row may reach (0 = any) */
    int fd;           /* open for writing (O_WRONLY or O_RDWR), any position (pwrite) */
    const char *name; /* for messages; NULL = readlink /proc/self/fd/<fd> (files) or "RAM" */
    uint64_t written; /* out: bytes tg_pack wrote or copied here */
} tg_pack_out_t;

typedef struct tg_pack_opts {
    /* features.bin: an open io/ file, or (when feat is NULL) a path tg_pack opens itself. Its
     * size must be num_nodes * row_bytes. */
    tg_io_file_t *feat;
    const char *feat_path;
    uint64_t num_nodes;
    size_t row_bytes; /* bytes of one stored row (dim x dtype size) */
    const tg_pack_part_t *parts;
    uint32_t nparts;
    tg_pack_targets_fn targets;
    void *targets_ctx;
    tg_pack_out_t *outs;
    uint32_t nouts;
    int threads;             /* copy and write threads; < 1 = 1 */
    tg_budget_t *budget;     /* NULL = not accounted */
    atomic_int *abort;       /* NULL = never; polled: -ECANCELED soon after it turns non-zero */
    const char *progress;    /* label of a progress bar over the feature bytes, NULL = none */
    tg_io_stats_t *io_stats; /* the read queue counts here too (NULL = its own) */
    /* --verify-reads: every row dispatched is checked against its checksum (tiergnn/rowcrc.h)
     * on the reader thread once its partition is read; a mismatch fails the pack like a read
     * error. NULL = not checked. */
    const struct tg_rowcrc *rowcrc;
} tg_pack_opts_t;

typedef struct tg_pack_stats {
    uint64_t partitions; /* partitions read and written (those with targets) */
    uint64_t rows;       /* targets dispatched */
    uint64_t read_bytes; /* bytes of features.bin read (aligned spans) */
    uint64_t file_bytes; /* bytes written to file outputs */
    uint64_t ram_bytes;  /* bytes copied to RAM outputs */
    uint64_t writes;     /* pwrite calls (memcpy runs not counted) */
    double read_s;       /* reader thread: time in reads */
    double read_wait_s;  /* calling thread: time waiting for a partition's read (not hidden) */
    double dispatch_s;   /* ordering targets and copying rows into the staging buffer */
    double write_s;      /* writing runs (pwrite + memcpy) and handing pages to writeback */
    double sync_s;       /* the final fdatasync + DONTNEED of the file outputs */
    double total_s;
} tg_pack_stats_t;

/* qsort comparator of tg_pack_target_t by (node, out, off): the order targets() must give. */
int tg_pack_target_cmp(const void *a, const void *b);

/* Bytes tg_pack reserves against the budget (its own buffers and its read queue's) for these
 * partitions, row size and number of outputs: what to leave free for it. Time: O(nparts). */
uint64_t tg_pack_bytes(const tg_pack_part_t *parts, uint32_t nparts, size_t row_bytes,
                       uint32_t nouts);

/* Packs (see the top). stats may be NULL; it is filled on failure too (what was done). */
int tg_pack(const tg_pack_opts_t *o, tg_pack_stats_t *stats);

/* ================================================================ a packed file
 *
 * DiskGNN's packed file is one file of rows (row_bytes each, addressed by row number):
 *
 *     [hot rows: a hole][segment caches][chunks]
 *
 * Rows [0, hot) are the hot rows, held in RAM and never read from the file (the range is a
 * hole); a segment cache's rows are shared by several batches of its segment; a batch's chunk is
 * a run of consecutive rows only it reads. A batch's *map record* says where each of its input
 * rows (its X row, the position) lies:
 *
 *     tg_pack_rec_t  n_hot, n_cache, n_chunk, chunk_first
 *     u64 cache_row[n_cache]    the cache rows' row numbers, ascending (reads merge); first, so
 *                               that they are 8-byte aligned
 *     u32 hot_pos[n_hot], hot_slot[n_hot]   X row and hot row number (slot)
 *     u32 cache_pos[n_cache]    X row of each cache row
 *     u32 chunk_pos[n_chunk]    X row of chunk row k, which is row chunk_first + k
 *     (padded to 8 bytes)
 *
 * The records of a pass's batches go one after another into a map file (tg_pack_map_t: an
 * unnamed file, with each record's offset in RAM) and are read back with their batch. The
 * reader (tg_pack_reader_t) turns a record into the batch's row list and reads it with
 * store/extract: the hot rows through a tier over the RAM rows (tg_pack_hot_tier_create), the
 * rest from the packed file (sorted, rows within the plan's gap merged into one read, O_DIRECT
 * through io/), each row converted into X by tg_feat_rows_f32 like every other strategy's.
 *
 *     tg_pack_map_t m;  tg_pack_map_open(&m, dir, "diskgnn-map", batches, budget);
 *     for each batch j: tg_pack_rec_fill(rec, &loc, cache_row0, chunk_row0, row_bytes);
 *                       tg_pack_map_append(&m, rec);
 *     ...
 *     tg_pack_reader_opts_t ro = {.plan = &pl, .fd = pack_fd, .name = "diskgnn-pack",
 *                                 .map_name = m.name, .rows = total_rows, .hot = hot_tier,
 *                                 .hot_rows = H, .budget = budget, .stats = &io_stats};
 *     tg_pack_reader_t *rd;  tg_pack_reader_open(&rd, &ro);
 *     for each batch j: tg_pack_map_read(&m, j, rec, cap, &nb);
 *                       tg_pack_reader_read(rd, id, rec, nb, n, X, &hooks);
 *     tg_pack_reader_close(rd);  tg_pack_map_close(&m);
 *
 * Errors: 0 or -errno with a message naming the map file and the batch (a record that does not
 * match its batch's rows, a row out of range or out of order: -EIO), or the packed file, the
 * offset and the batch (a read error). */

struct tg_layout_loc;

typedef struct tg_pack_rec {
    uint32_t n_hot, n_cache, n_chunk, pad;
    uint64_t chunk_first; /* chunk row k is row chunk_first + k */
} tg_pack_rec_t;

/* The arrays of a record (pointers into it). */
typedef struct tg_pack_rec_view {
    const uint64_t *cache_row;
    const uint32_t *hot_pos, *hot_slot, *cache_pos, *chunk_pos;
} tg_pack_rec_view_t;

/* Bytes of a record with h's counts. */
uint64_t tg_pack_rec_bytes(const tg_pack_rec_t *h);
/* The most a record of n rows takes (every row a cache row). */
uint64_t tg_pack_rec_bytes_max(uint64_t n);
/* The arrays of the record at rec (8-byte aligned). */
tg_pack_rec_view_t tg_pack_rec_view(const void *rec);
/* Writes the record of a batch located by store/layout (tiergnn/layout.h) into rec (at least
 * tg_pack_rec_bytes_max(rows) bytes): the cache offsets become rows cache_row0 + off / row_bytes,
 * the chunk starts at row chunk_row0 + chunk_off / row_bytes. Returns its bytes. */
uint64_t tg_pack_rec_fill(void *rec, const struct tg_layout_loc *loc, uint64_t cache_row0,
                          uint64_t chunk_row0, size_t row_bytes);
/* The record of a batch of n rows (nbytes read back) as its row list: rows[p] = the row of X row
 * p (a hot row's slot, a cache row, a chunk row). -EIO naming name and batch when the record
 * does not hold n rows in nbytes, a hot slot is not below hot_rows, a cache row is out of order
 * or not in [hot_rows, total_rows), the chunk passes total_rows, or an X row is out of range or
 * named twice. O(n). */
int tg_pack_rec_rows(const void *rec, uint64_t nbytes, uint32_t n, uint64_t hot_rows,
                     uint64_t total_rows, uint64_t *rows, const char *name, uint64_t batch);
/* For --verify-reads: row_node[row] = nodes[p] for every cache and chunk row of the record (the
 * node whose row lies there; nodes: the batch's ids in X order). */
void tg_pack_rec_nodes(const void *rec, const uint32_t *nodes, uint64_t *row_node);

/* The map file: records appended one after another, their offsets in RAM. */
typedef struct tg_pack_map {
    int fd;
    char name[4300];
    uint64_t *off; /* (count + 1): record j is [off[j], off[j + 1]) */
    uint64_t count, n;
    uint64_t rec_max; /* the longest record appended */
    tg_budget_t *budget;
    uint64_t reserved;
} tg_pack_map_t;

/* An unnamed map file in dir (tg_tmpfile_open; `what` names it) for count records, their
 * offsets reserved against budget (NULL: not accounted). */
int tg_pack_map_open(tg_pack_map_t *m, const char *dir, const char *what, uint64_t count,
                     tg_budget_t *budget);
/* Appends record n (tg_pack_rec_bytes of it). -ENOSPC past count; a write error names the file. */
int tg_pack_map_append(tg_pack_map_t *m, const void *rec);
/* Reads record j into buf (cap bytes) and its size into *nbytes; -EIO naming the file when it
 * is longer than cap, the read's error otherwise. */
int tg_pack_map_read(const tg_pack_map_t *m, uint64_t j, void *buf, uint64_t cap, uint64_t *nbytes);
/* Closes the file (it goes with its descriptor) and frees the offsets. A map tg_pack_map_open
 * left (even on failure), a closed one, or one whose fd is -1 is fine. */
void tg_pack_map_close(tg_pack_map_t *m);

/* ---------------------------------------------------------------- written from a layout */

struct tg_layout;

/* A packed file's parts from its layout (tiergnn/layout.h, planned with chunk_align 1, so that
 * every row starts at a multiple of row_bytes): rows [0, hot) the hot rows, then the segment
 * caches' rows, then the chunks'. */
typedef struct tg_pack_geom {
    uint64_t hot, cache_rows, chunk_rows, total_rows;
    size_t row_bytes;
} tg_pack_geom_t;

void tg_pack_geom(tg_pack_geom_t *g, const struct tg_layout *L, size_t row_bytes);

/* Writes the records of the layout's count batches into m (opened for them): batch j's ids in X
 * order are ids[off[j] .. off[j + 1]) (the trace the layout was planned over). row_node (NULL:
 * none; g->total_rows entries) gets the node of every cache and chunk row. The record and the
 * layout's locate arrays for the longest batch are reserved against budget while it runs. */
int tg_pack_map_write(tg_pack_map_t *m, const struct tg_layout *L, const tg_pack_geom_t *g,
                      const uint32_t *ids, const uint64_t *off, uint64_t count, uint64_t *row_node,
                      tg_budget_t *budget);

typedef struct tg_pack_file_opts {
    const struct tg_layout *L;
    const tg_pack_geom_t *geom;
    tg_io_file_t *feat; /* features.bin: num_nodes rows of geom->row_bytes */
    uint64_t num_nodes;
    int fd;           /* the packed file, open for writing; sized to geom's rows here */
    const char *name; /* for messages */
    void *hot;        /* RAM for the hot rows (geom->hot rows); NULL: not copied */
    int threads;
    tg_budget_t *budget;
    atomic_int *abort;
    const char *progress;
    tg_io_stats_t *io_stats;
    const struct tg_rowcrc *rowcrc;
} tg_pack_file_opts_t;

/* Packs the layout's rows (tg_pack, its three outputs: the hot rows to RAM, the segment caches
 * and the chunks to their places in the one packed file, whose hot range stays a hole). */
int tg_pack_file(const tg_pack_file_opts_t *o, tg_pack_stats_t *st);

/* A tier over the first n rows of a packed file, held in RAM (rows: n x row_bytes raw bytes,
 * the caller's, unchanged while the tier lives): row v < n is rows + v x row_bytes. No lookup
 * table. */
int tg_pack_hot_tier_create(tg_tier_t **out, const char *name, const void *rows, size_t row_bytes,
                            uint64_t n);
/* The hot rows read again from features.bin (feat, num rows of row_bytes) into rows (n x
 * row_bytes, the caller's) after they were released: row k is node nodes[k]'s (n < 2^32), read
 * in node order so that io/ merges neighbouring rows into one read, 4096 rows per submission.
 * The order (8 bytes a row) and io/'s staging are reserved against budget (NULL: not accounted)
 * while it runs; the reads count in stats (NULL: not counted). rowcrc (--verify-reads; NULL: not
 * checked): every row checked against its node's checksum. Errors: io/'s (the file and the
 * offset), the checksum's (the node), -ENOMEM, -EINVAL for n >= 2^32. */
int tg_pack_hot_read(tg_io_file_t *feat, const uint32_t *nodes, uint64_t n, size_t row_bytes,
                     void *rows, tg_budget_t *budget, tg_io_stats_t *stats,
                     const struct tg_rowcrc *rowcrc);

typedef struct tg_pack_reader tg_pack_reader_t;
typedef struct tg_pack_reader_opts tg_pack_reader_opts_t;

/* ---------------------------------------------------------------- a packed set
 *
 * What packing one layout leaves (DiskGNN's generation, less its batches): the packed file, the
 * map file of the batches' records and, under --verify-reads, the node of every packed row with
 * their checksums in that order. Written from the layout in one call (the map records, then
 * tg_pack_file) and read back through a reader over it:
 *
 *     tg_pack_set_t ps;  tg_pack_set_init(&ps);
 *     tg_pack_set_opts_t o = {.dir = d, .who = "diskgnn", .L = L, .ids = ids, .off = off,
 *                             .count = B, .hot_nodes = hot_nodes, .feat = feat, .num_nodes = N,
 *                             .row_bytes = R, .hot = hot_buf, .threads = T, .budget = bg};
 *     tg_pack_set_write(&ps, &o);
 *     tg_pack_reader_opts_t ro = {.plan = &pl, .hot = hot_tier, .budget = bg, .who = "diskgnn"};
 *     tg_pack_set_reader_open(&ps, &rd, &ro);      // the set's file, map, rows and checksums
 *     ...
 *     tg_pack_set_close(&ps);                      // the files go with their descriptors
 *
 * Files: "WHO-map" and "WHO-pack", unnamed (tg_tmpfile_open) in dir. Memory: the map's offsets,
 * and under --verify-reads the row nodes (8 bytes a row) and the permuted checksums, held
 * against the budget until close; tg_pack_map_write's and tg_pack_file's own while they run.
 * Errors: theirs, each naming its file; after an error the set holds what was made and is only
 * for tg_pack_set_close. */
typedef struct tg_pack_set_opts {
    const char *dir; /* where the unnamed files go */
    const char *who; /* names the files and the budget's items ("diskgnn") */
    const struct tg_layout *L;
    /* the layout's trace: batch j's ids in X order are ids[off[j] .. off[j + 1]), j < count */
    const uint32_t *ids;
    const uint64_t *off;
    uint64_t count;
    const uint32_t *hot_nodes; /* the layout's hot rows' nodes (for the row nodes) */
    tg_io_file_t *feat;        /* features.bin: num_nodes rows of row_bytes */
    uint64_t num_nodes;
    size_t row_bytes;
    void *hot; /* RAM for the hot rows (copied there too); NULL: not copied */
    int threads;
    tg_budget_t *budget;
    atomic_int *abort;
    const char *progress;
    tg_io_stats_t *io_stats;
    const struct tg_rowcrc *rowcrc; /* features.bin's checksums: --verify-reads; NULL: none */
} tg_pack_set_opts_t;

typedef struct tg_pack_set {
    tg_pack_geom_t geom; /* [hot rows: a hole][segment caches][chunks] */
    tg_pack_map_t map;   /* per batch its record */
    int fd;              /* the packed file; -1: none */
    char name[4300];
    uint64_t *row_node;    /* --verify-reads: the node of each packed row (geom.total_rows) */
    struct tg_rowcrc *crc; /* --verify-reads: the checksums in the packed file's row order */
    tg_pack_stats_t pst;   /* the packing's */
    double map_s, pack_s;  /* writing the maps, packing */
    tg_budget_t *budget;
    uint64_t row_node_bytes;
} tg_pack_set_t;

/* An empty set (nothing to close but fine to close). */
void tg_pack_set_init(tg_pack_set_t *ps);
int tg_pack_set_write(tg_pack_set_t *ps, const tg_pack_set_opts_t *o);
/* A reader (tg_pack_reader_open) of the set: o's plan, hot tier, normalize, budget, stats and
 * who, the set's packed file, map file, rows, hot rows and checksums. */
int tg_pack_set_reader_open(const tg_pack_set_t *ps, tg_pack_reader_t **out,
                            const tg_pack_reader_opts_t *o);
/* Closes the files, frees and returns the budget. */
void tg_pack_set_close(tg_pack_set_t *ps);

struct tg_pack_reader_opts {
    /* Reads in flight, merge gap, chunk: a plan without a feature buffer made for the feature
     * file (tg_extract_plan; one extractor); the packed file's rows replace its row count. */
    const tg_extract_plan_t *plan;
    int fd;               /* the packed file, open; read through /proc/self/fd/fd with O_DIRECT */
    const char *name;     /* the packed file, for messages */
    const char *map_name; /* the map file, for messages about records */
    uint64_t rows;  /* rows of the packed file (< 2^32): its size is rows x the plan's row_bytes */
    tg_tier_t *hot; /* the hot rows' tier (tg_pack_hot_tier_create); NULL: none */
    uint64_t hot_rows;    /* rows [0, hot_rows) are the hot rows */
    int normalize;        /* L1 row normalisation (tiergnn/store.h) */
    tg_budget_t *budget;  /* the extraction's staging and the row list; NULL: not accounted */
    tg_io_stats_t *stats; /* the reads count here; NULL: not counted */
    /* --verify-reads: checksums in the packed file's row order (tg_rowcrc_permuted over the
     * node of each row); NULL: not checked */
    const struct tg_rowcrc *rowcrc;
    const char *who; /* prefix of messages (NULL: "pack") */
};

/* Bytes a reader of plan pl holds for batches of up to max_rows rows: the extraction's
 * (tg_extract_plan_bytes), the row list, and the extraction's sort scratch while it reads. */
uint64_t tg_pack_reader_bytes(const tg_extract_plan_t *pl, uint64_t max_rows);
int tg_pack_reader_open(tg_pack_reader_t **out, const tg_pack_reader_opts_t *o);
/* Reads the n rows of batch `batch` (id, named in messages) into X (n x feat_dim f32) by its
 * map record rec (nbytes; see tg_pack_rec_rows). hooks as tg_extract_group's; their fail is
 * called with the extraction's own message, before the reader names the packed file. Returns 0,
 * -ECANCELED, or the error: "WHO: batch B: reading the packed file NAME: ..." for a read, the
 * record's message for a record. One thread at a time. */
int tg_pack_reader_read(tg_pack_reader_t *rd, uint64_t batch, const void *rec, uint64_t nbytes,
                        uint32_t n, float *X, const tg_extract_hooks_t *hooks);
/* The counters of the hot tier (if any) and of the file, as tg_extract_tier_stats. */
int tg_pack_reader_tier_stats(tg_pack_reader_t *rd, tg_tier_stats_t *out, int max, int reset);
/* NULL is fine. Returns its bytes to the budget. */
void tg_pack_reader_close(tg_pack_reader_t *rd);

#ifdef __cplusplus
}
#endif
#endif
