/* tiergnn/io.h - reading byte ranges of data files through io_uring + O_DIRECT.
 *
 * How to use:
 *   Open each data file once and share it between threads; give every thread that reads its own
 *   queue (like an io_uring ring, a tg_io_t is used by one thread at a time):
 *
 *       tg_io_file_t *feat;
 *       if (tg_io_file_open(&feat, "data/x/features.bin", 0) < 0) return -1;   // tg_errmsg()
 *       tg_io_opts_t o = {.depth = 64, .budget = &budget, .stats = &run_stats};
 *       tg_io_t *io;
 *       if (tg_io_create(&io, &o) < 0) ...
 *
 *   Synchronous (samplers reading index slices, anything that wants the bytes now):
 *
 *       tg_io_req_t r[n];        // r[i].file, .off, .len, .dst: any offset, length, alignment
 *       rc = tg_io_read_batch(io, r, n);  // 0, or the first failure (names file + offset)
 *
 *   Asynchronous (an extractor thread that submits a mini-batch of rows and consumes each row as
 *   soon as it lands, as in GNNDrive's asynchronous extraction):
 *
 *       tg_io_submit(io, rows, nrows);               // queues all, starts up to `depth` reads
 *       while (tg_io_inflight(io) > 0) {
 *           tg_io_req_t *done[64];
 *           int k = tg_io_reap(io, done, 64, 1);     // blocks until >= 1 request is complete
 *           if (k < 0) ...                           // the queue itself broke: destroy it
 *           for (int i = 0; i < k; i++)
 *               if (done[i]->res < 0) ... else use(done[i]->dst, done[i]->user);
 *       }
 *
 *   Requests submitted together are sorted by offset and those that touch the same or adjacent
 *   aligned blocks of a file are merged into one disk read of at most max_read_bytes (duplicates
 *   cost nothing extra). Each disk read lands in an aligned staging slot and the requested bytes
 *   are copied to each request's dst, so callers never align anything. (A request that alone
 *   fills an aligned read and whose dst is aligned too - rows of 512-byte multiples into an
 *   aligned buffer - is read straight into dst, saving the copy.)
 *
 * Fallbacks, each announced once per process with tg_log_warn:
 *   - io_uring unavailable (io_uring_queue_init fails, e.g. ENOSYS, EPERM, or
 *     kernel.io_uring_disabled): the queue reads with pread(2), same results, one read at a time.
 *     TG_IO_FORCE_PREAD selects this path on purpose.
 *   - O_DIRECT refused at open (EINVAL, e.g. older tmpfs) or statx reports no direct I/O support:
 *     the file is read through the page cache. TG_IO_FILE_BUFFERED selects this on purpose
 *     (without a warning).
 *
 * Errors: every function returns 0 (or a count) or a negative -errno and records a one-line
 *   message (tg_errmsg). A failed read - an I/O error, or a short read because the file ends
 *   before the requested range (e.g. truncated under a run) - fails the requests it served with
 *   res < 0 and a message naming the file and the offset; their dst bytes are then unspecified,
 *   never silently wrong data reported as success.
 *
 * Ownership and lifetimes:
 *   - tg_io_file_t: owned by the opener; thread-safe for reading; must outlive every request
 *     that names it. tg_io_file_path() is valid until tg_io_file_close().
 *   - tg_io_t: owned by its creator; one thread at a time (it may be handed between threads).
 *   - tg_io_req_t: owned by the caller. From tg_io_submit() until the request comes back from
 *     tg_io_reap() (or tg_io_wait() or tg_io_destroy() returns) the queue holds a pointer to it
 *     and the kernel may write its dst: the request, its dst buffer and its file must stay
 *     valid and untouched until then.
 *   - tg_io_stats_t: owned by the caller, shared by any number of queues and threads; must
 *     outlive the queues that count into it.
 *
 * Memory: a queue's staging buffers (depth x max_read_bytes) are reserved against opts.budget at
 *   tg_io_create and released at tg_io_destroy; the per-submit bookkeeping (88 bytes per
 *   request until the submit's last read completes, plus 32 while the submit call plans) is
 *   reserved and released likewise.
 *
 * Module: io/ knows nothing of graphs or features; it reads byte ranges.
 */
#ifndef TIERGNN_IO_H
#define TIERGNN_IO_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "tiergnn/util.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---------------------------------------------------------------- files */

typedef struct tg_io_file tg_io_file_t;

/* tg_io_file_open flags. */
#define TG_IO_FILE_BUFFERED 0x1u /* do not try O_DIRECT: read through the page cache */

/* Opens path read-only, with O_DIRECT unless flags say otherwise or it is refused (see the
 * fallbacks above). The alignment used for disk reads comes from statx STATX_DIOALIGN
 * (stx_dio_offset_align / stx_dio_mem_align) where the kernel and filesystem report it, else
 * 4096. Only regular files. */
int tg_io_file_open(tg_io_file_t **out, const char *path, unsigned flags);
/* Closes the file and frees it. NULL is fine. No request may still name it. */
void tg_io_file_close(tg_io_file_t *f);
const char *tg_io_file_path(const tg_io_file_t *f);
/* Size in bytes when opened (a later truncation shows up as short-read errors). */
uint64_t tg_io_file_size(const tg_io_file_t *f);
/* Offset (and length) alignment of disk reads for this file: a power of two. */
unsigned tg_io_file_align(const tg_io_file_t *f);
/* 1 if the file was opened with O_DIRECT, 0 if it is read through the page cache. */
int tg_io_file_direct(const tg_io_file_t *f);

/* ---------------------------------------------------------------- statistics */

/* Exact counters, summed over every queue that counts into the same sink. The fields are
 * private: read them with tg_io_stats_snapshot / tg_io_stats_take. */
typedef struct tg_io_stats {
    _Atomic uint64_t requests_;   /* disk reads issued (after merging; retries count) */
    _Atomic uint64_t read_bytes_; /* bytes the disk returned */
    _Atomic uint64_t need_bytes_; /* bytes callers asked for (sum of request lengths) */
    _Atomic uint64_t wait_ns_;    /* time callers spent blocked waiting for completions (in
                                   * io_uring_submit_and_wait, or inside pread) */
    /* Queue depth over time, so that a run can report the depth it achieved against the one it
     * planned: the integral of each queue's reads in flight (handed to the ring, completion not
     * yet seen; a pread counts 1 while it runs) over time, and the time each queue had at least
     * one read in flight, both summed over the queues. depth_ns_ / busy_ns_ = the mean depth of
     * a queue while it was reading; depth_ns_ / wall time = the mean reads in flight of all
     * queues together. */
    _Atomic uint64_t depth_ns_;
    _Atomic uint64_t busy_ns_;
    /* The time at least one queue of the sink had a read in flight (the union of the queues'
     * busy times): depth_ns_ / any_ns_ = the mean reads in flight of all queues together while
     * any of them was reading. any_active_ and any_since_ are guarded by any_lock_ (0 free),
     * taken only when a queue goes idle or busy. */
    _Atomic uint64_t any_ns_;
    _Atomic uint32_t any_lock_;
    uint32_t any_active_;
    double any_since_;
} tg_io_stats_t;

/* A plain copy of the counters. Read amplification = io_read_bytes / io_needed_bytes. */
typedef struct tg_io_counts {
    uint64_t io_requests;
    uint64_t io_read_bytes;
    uint64_t io_needed_bytes;
    double io_wait_s;
    double io_depth_s; /* reads in flight x seconds, summed over queues (see depth_ns_) */
    double io_busy_s;  /* seconds queues had a read in flight, summed over queues */
    double io_any_s;   /* seconds at least one queue had a read in flight */
} tg_io_counts_t;

/* Sets every counter to zero (also a valid initializer: a zeroed tg_io_stats_t is ready). */
void tg_io_stats_init(tg_io_stats_t *s);
/* Current values. Each counter is read atomically; counters may be mid-update relative to one
 * another while reads are in flight (take snapshots between epochs for exact per-epoch sums). */
void tg_io_stats_snapshot(tg_io_stats_t *s, tg_io_counts_t *out);
/* Snapshot and reset in one step: every counter is exchanged with 0, so no update is lost or
 * counted twice between two takes (per-epoch reporting). */
void tg_io_stats_take(tg_io_stats_t *s, tg_io_counts_t *out);
void tg_io_stats_reset(tg_io_stats_t *s);

/* ---------------------------------------------------------------- queues and requests */

typedef struct tg_io tg_io_t;

/* tg_io_opts_t.flags */
#define TG_IO_NO_MERGE 0x1u    /* one disk read per request (baseline for benchmarks) */
#define TG_IO_FORCE_PREAD 0x2u /* do not use io_uring (tests, comparisons) */
#define TG_IO_NO_FIXED 0x4u    /* do not register the staging buffers with the ring */

typedef struct tg_io_opts {
    unsigned depth;        /* disk reads in flight at most; 0 = 64. 1..4096 */
    size_t max_read_bytes; /* largest single disk read = staging slot size; 0 = 128 KiB. A
                            * multiple of 4096, at most 64 MiB; longer requests are split */
    unsigned flags;        /* TG_IO_* above */
    tg_budget_t *budget;   /* staging + bookkeeping are reserved here; NULL = not accounted */
    tg_io_stats_t *stats;  /* counters go here; NULL = the queue's own (tg_io_stats()) */
} tg_io_opts_t;

/* One byte range to read. The caller fills the four inputs (and user); the queue fills res. */
typedef struct tg_io_req {
    tg_io_file_t *file; /* in */
    uint64_t off;       /* in: first byte, any value */
    size_t len;         /* in: bytes; 0 completes at once */
    void *dst;          /* in: len writable bytes, any alignment */
    void *user;         /* caller's tag, never touched */
    int res;            /* out: 0, or -errno once the request failed (see tg_errmsg rules below) */
    /* private */
    uint32_t pending_;
    struct tg_io_req *next_;
} tg_io_req_t;

/* Creates a queue: an io_uring of opts->depth entries (or the pread fallback) and depth staging
 * slots, reserved against opts->budget (-ENOMEM with the budget's message if it does not fit).
 * opts may be NULL for defaults. */
int tg_io_create(tg_io_t **out, const tg_io_opts_t *opts);
/* Waits for reads the kernel still owns (they may be writing into staging slots or request
 * buffers, which must not be freed under them), discards requests not yet reaped, frees
 * everything and releases the budget. NULL is fine. */
void tg_io_destroy(tg_io_t *io);

/* Queues n requests (merged among themselves) and starts as many disk reads as the depth allows;
 * the rest start as earlier ones complete during tg_io_reap / tg_io_wait (on the pread backend
 * every read runs there). Sets each request's res to 0. Returns 0; or a negative code for a bad
 * request or an exhausted budget, with nothing queued; or a ring failure, after which the queue
 * is broken (destroy it). Never blocks on the disk. Merging is limited to the requests of one
 * call: submit a mini-batch's rows together. Time: O(n log n) for the sort. */
int tg_io_submit(tg_io_t *io, tg_io_req_t *reqs, size_t n);
/* Stores up to max completed requests into done[] (completion order) and returns how many,
 * blocking until at least min(min_complete, tg_io_inflight()) are available. A returned request
 * with res < 0 failed; then tg_errmsg() describes the first failure among those returned (file,
 * offset, cause). A negative return means the queue itself failed (the ring broke): destroy it. */
int tg_io_reap(tg_io_t *io, tg_io_req_t **done, size_t max, size_t min_complete);
/* Blocks until every submitted request has completed and discards them from the reap list.
 * Returns 0, or the first failure among them (with its message); res tells which ones failed. */
int tg_io_wait(tg_io_t *io);
/* Submit + wait for a queue with nothing else in flight (-EBUSY otherwise). */
int tg_io_read_batch(tg_io_t *io, tg_io_req_t *reqs, size_t n);
/* Reads [off, off + len) of f into dst (one request; same rules). */
int tg_io_read(tg_io_t *io, tg_io_file_t *f, uint64_t off, size_t len, void *dst);

/* Requests submitted and not yet returned by tg_io_reap (nor discarded by tg_io_wait). */
size_t tg_io_inflight(const tg_io_t *io);
/* "io_uring" or "pread". */
const char *tg_io_backend(const tg_io_t *io);
unsigned tg_io_depth(const tg_io_t *io);
size_t tg_io_max_read_bytes(const tg_io_t *io);
/* The sink this queue counts into (opts->stats or its own). */
tg_io_stats_t *tg_io_stats(tg_io_t *io);

/* ---------------------------------------------------------------- shared queues */

/* For code called from several threads that only needs synchronous batches (e.g. tg_adj_read):
 * a fixed set of queues; each call borrows a free one (blocking while all are busy). The pool
 * and its queues are thread-safe through these calls only. */
typedef struct tg_io_pool tg_io_pool_t;
int tg_io_pool_create(tg_io_pool_t **out, unsigned nqueues, const tg_io_opts_t *opts);
void tg_io_pool_destroy(tg_io_pool_t *p);
/* tg_io_read_batch on a borrowed queue. */
int tg_io_pool_read_batch(tg_io_pool_t *p, tg_io_req_t *reqs, size_t n);

/* ---------------------------------------------------------------- fault injection */

/* Make chosen reads fail, for tests of error paths on both backends. Rules are process-wide,
 * thread-safe, and apply to every queue and file opened afterwards (open rules) or read
 * afterwards (read rules). A matching read is not sent to the disk: on io_uring a NOP travels
 * the ring in its place and its completion carries -err; on pread the call is skipped. It still
 * counts as one io_request (0 bytes read). The device probe's reads are never faulted (ring
 * rules do apply to its ring).
 *
 * A short-read rule (short_read = 1, "SHORT" in the grammar) does not fail the read: the read
 * goes to the disk but stops at LO, returning only its bytes before LO (under O_DIRECT whole
 * blocks of them, as a real partial transfer; 0 bytes, as at the end of the file, when none are
 * left). After a partial transfer the queue asks for the rest, so a rule with count=1 on a read
 * that starts blocks before LO is absorbed (the bytes arrive whole), while an unlimited rule
 * makes the read at LO come back empty: the request fails with "unexpected end of file", the
 * file and the offset where the bytes stopped.
 *
 * Read rules also apply to util's tg_pread_full (tg_pread_set_fault_hook), the plain reads of the
 * memory store, derived files and spill files; the pages of a mapping are beyond any hook.
 *
 * The environment variable TIERGNN_IO_FAULT is parsed with tg_io_fault_parse() the first time a
 * file is opened or a queue created; when it set rules, the process prints at exit how many
 * operations they faulted and how many they looked at ("TIERGNN_IO_FAULT: N operations faulted,
 * M matched a rule"). Grammar, rules separated by ';':
 *     ERR@LO[-HI][,file=SUBSTR][,after=N][,count=N][,op=read|open|ring]
 * ERR is an errno name (EIO, EINVAL, ENOSPC, ENOSYS, EPERM, ENOMEM, EAGAIN, ENODATA, EACCES,
 * EBADF, EFAULT, EINTR), a number, or SHORT (a short read; op=read only); LO-HI is a byte range
 * [LO, HI) (HI defaults to LO+1); sizes accept K/M/G suffixes. Examples: "EIO@1M"
 * "EIO@0-4096,file=features.bin,after=2,count=1"  "EINVAL@0,op=open"
 * "SHORT@1M-2M,file=indices.bin,after=5" */
typedef enum {
    TG_IO_FAULT_READ = 0, /* a disk read whose range [off, off+len) intersects [lo, hi) fails */
    TG_IO_FAULT_OPEN = 1, /* the O_DIRECT open of a matching file fails with err */
    TG_IO_FAULT_RING = 2, /* io_uring_queue_init fails with err (file/range ignored) */
} tg_io_fault_op_t;

typedef struct tg_io_fault {
    tg_io_fault_op_t op;
    const char *file; /* substring of the path; NULL or "" = any file (copied) */
    uint64_t lo, hi;  /* byte range [lo, hi) for TG_IO_FAULT_READ */
    int err;          /* positive errno to report (0 for a short read) */
    int short_read;   /* TG_IO_FAULT_READ only: the read stops at lo instead of failing */
    uint64_t after;   /* let the first `after` matching operations succeed */
    uint64_t count;   /* then fail this many; 0 = every one after that */
} tg_io_fault_t;

/* Adds a rule (at most 16). -EINVAL for a bad rule, -ENOSPC when full. */
int tg_io_fault_add(const tg_io_fault_t *f);
/* Adds the rules of a spec string (grammar above); -EINVAL naming the bad part. */
int tg_io_fault_parse(const char *spec);
/* Removes every rule (the environment variable is not read again). */
void tg_io_fault_clear(void);
/* How many operations the rules have failed or cut short since the process started. */
uint64_t tg_io_fault_hits(void);
/* Reads TIERGNN_IO_FAULT now rather than at the first open or queue (the CLI calls it first
 * thing, so that reads made before any io/ file, e.g. the memory store's, meet the rules).
 * Returns 0, or the parse error naming the bad part. */
int tg_io_fault_env(void);

/* ---------------------------------------------------------------- device probe */

#define TG_IO_PROBE_MAX_DEPTHS 8

/* What the disk under a file can do: random 4 KiB O_DIRECT reads at several queue depths, and
 * sequential bandwidth with large reads. */
typedef struct tg_io_probe {
    unsigned dev_major, dev_minor; /* st_dev of the probed file */
    unsigned ndepths;
    unsigned depth[TG_IO_PROBE_MAX_DEPTHS];
    double iops[TG_IO_PROBE_MAX_DEPTHS];   /* completed 4 KiB reads per second */
    double lat_us[TG_IO_PROBE_MAX_DEPTHS]; /* mean submit-to-completion latency */
    unsigned best_depth;    /* smallest depth reaching 90% of the best IOPS: the default depth */
    double seq_bytes_per_s; /* sequential O_DIRECT read bandwidth (1 MiB reads, depth 8) */
    double time_s;          /* measuring time spent */
    int from_cache;         /* 1 if read from the cache file rather than measured now */
    char cache_path[1024];  /* the cache file used ("" if caching was not possible) */
} tg_io_probe_t;

typedef struct tg_io_probe_opts {
    double time_s;         /* total measuring time; 0 = 1.5 s (split over the phases) */
    const char *cache_dir; /* NULL = $XDG_CACHE_HOME/tiergnn, else $HOME/.cache/tiergnn */
    int refresh;           /* 1 = measure even if a cached result exists, then rewrite it */
    tg_budget_t *budget;   /* the probe's buffers (about 9 MiB) are reserved here while it runs */
} tg_io_probe_opts_t;

/* Returns the cached result for the device holding path, or measures it on path (which should
 * be large - a dataset's feature file - so reads are random over many blocks) and writes the
 * cache file <cache_dir>/probe-<major>-<minor>.txt atomically. Needs O_DIRECT (-EINVAL with a
 * message if the filesystem refuses it). Without io_uring only depth 1 is measured, with pread.
 * A cache file that cannot be written costs a warning, not a failure. opts may be NULL. */
int tg_io_probe_run(const char *path, const tg_io_probe_opts_t *opts, tg_io_probe_t *out);

#ifdef __cplusplus
}
#endif
#endif
