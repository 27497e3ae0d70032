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
 * Module: store/ (reads through io/, uses util/ only otherwise).
 */
#ifndef TIERGNN_PACK_H
#define TIERGNN_PACK_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

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

#ifdef __cplusplus
}
#endif
#endif
