/* tiergnn/util.h - errors, logging, progress, RNG, threads, queues, timers, JSON, memory budget.
 *
 * How to use:
 *   Every library function that can fail returns 0 on success or a negative error code
 *   (-errno style: -EINVAL for bad input, -EIO, -ENOMEM, -ENOSPC, -ENOENT ...). Before returning
 *   an error it records a one-line message for a person with tg_err():
 *
 *       if (n != expect)
 *           return tg_err(-EINVAL, "%s: line %zu: expected %zu fields, got %zu", path, line,
 * expect, n);
 *
 *   Callers that add context use tg_err_prefix(); the CLI prints tg_errmsg() and exits non-zero.
 *   The message is thread-local: read it on the thread that saw the error.
 *
 * Module: util/ knows nothing of the rest of tiergnn.
 */
#ifndef TIERGNN_UTIL_H
#define TIERGNN_UTIL_H

#include <errno.h>
#include <pthread.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(__GNUC__)
#define TG_PRINTF(a, b) __attribute__((format(printf, a, b)))
#define TG_UNUSED __attribute__((unused))
#else
#define TG_PRINTF(a, b)
#define TG_UNUSED
#endif

#define TG_MIN(a, b) ((a) < (b) ? (a) : (b))
#define TG_MAX(a, b) ((a) > (b) ? (a) : (b))

/* qsort's comparator of uint64_t values, ascending. */
int tg_cmp_u64(const void *a, const void *b);

/* ---------------------------------------------------------------- errors */

/* Records the message for this thread and returns code (expected negative). */
int tg_err(int code, const char *fmt, ...) TG_PRINTF(2, 3);
/* Prepends "context: " to the current message and returns code. */
int tg_err_prefix(int code, const char *fmt, ...) TG_PRINTF(2, 3);
/* The last message recorded on this thread ("" if none). Valid until the next tg_err*. */
const char *tg_errmsg(void);
void tg_err_clear(void);

/* Appends "; " (unless *len is 0) and the formatted text to buf (cap bytes, *len of them used),
 * cut at cap: the one-line lists of differences in refusals ("--seed 1 there vs 2 here; ..."). */
void tg_err_list_add(char *buf, size_t cap, size_t *len, const char *fmt, ...) TG_PRINTF(4, 5);

/* The first error of a group of threads (a pipeline's stages): every thread reports into one box,
 * the first report wins and keeps its message, later ones are dropped (they are usually
 * consequences of the first: a queue closed, a read cancelled). Thread-safe.
 *
 *     tg_errbox_t box; tg_errbox_init(&box);
 *     ... on any thread: if (rc < 0) tg_errbox_set(&box, rc, NULL);    // this thread's message
 *     ... on the owner, after joining: rc = tg_errbox_raise(&box);     // message now on this
 * thread tg_errbox_destroy(&box);
 */
typedef struct tg_errbox {
    pthread_mutex_t mu;
    int rc;
    volatile int failed; /* read without the lock as a hint; set under it */
    char msg[1024];
} tg_errbox_t;
void tg_errbox_init(tg_errbox_t *b);
void tg_errbox_destroy(tg_errbox_t *b);
/* Records rc (< 0) with msg (NULL or "": this thread's tg_errmsg()) unless an error is recorded
 * already. Returns 1 when this call recorded it, 0 otherwise. */
int tg_errbox_set(tg_errbox_t *b, int rc, const char *msg);
/* 1 once an error is recorded. */
int tg_errbox_failed(tg_errbox_t *b);
/* The recorded code (0 if none), its message made this thread's message (tg_err). */
int tg_errbox_raise(tg_errbox_t *b);

/* ---------------------------------------------------------------- logging */

enum { TG_LOG_QUIET = 0, TG_LOG_WARN = 1, TG_LOG_INFO = 2, TG_LOG_DEBUG = 3 };
void tg_log_set_level(int level);
int tg_log_level(void);
/* Text put before every log line (a data-parallel rank's "rank R/K: "); the string must outlive
 * the logging. Set it before threads start. NULL or "": none. */
void tg_log_set_prefix(const char *prefix);
void tg_log_info(const char *fmt, ...) TG_PRINTF(1, 2);
void tg_log_warn(const char *fmt, ...) TG_PRINTF(1, 2);
void tg_log_debug(const char *fmt, ...) TG_PRINTF(1, 2);

/* ---------------------------------------------------------------- timers */

/* Monotonic seconds. */
double tg_now(void);

/* ---------------------------------------------------------------- progress */

/* A progress bar on stderr. On a terminal it redraws one line at most 10 times a second
 * (done/total, rate, ETA and an optional suffix such as the loss); otherwise it prints a plain
 * log line every 10% or 10 s, whichever comes later. Quiet when the log level is TG_LOG_QUIET. */
typedef struct tg_progress {
    char label[48];
    char unit[16];
    uint64_t total, done;
    double t_start, t_last_draw;
    int tty, last_decile, active;
    char suffix[96];
} tg_progress_t;

void tg_progress_begin(tg_progress_t *p, const char *label, uint64_t total, const char *unit);
/* Sets done (absolute) and redraws if due. suffix may be NULL. Thread-compatible only. */
void tg_progress_update(tg_progress_t *p, uint64_t done, const char *suffix);
void tg_progress_end(tg_progress_t *p);

/* ---------------------------------------------------------------- RNG */

/* xoshiro256**, seeded by splitmix64. State is plain data: copy it to checkpoint it. */
typedef struct tg_rng {
    uint64_t s[4];
} tg_rng_t;

void tg_rng_seed(tg_rng_t *r, uint64_t seed);
/* An independent stream derived from (seed, stream) - for per-thread / per-batch RNGs. */
void tg_rng_seed2(tg_rng_t *r, uint64_t seed, uint64_t stream);
uint64_t tg_rng_u64(tg_rng_t *r);
/* Uniform in [0, n), unbiased (Lemire). n > 0. */
uint64_t tg_rng_below(tg_rng_t *r, uint64_t n);
/* Uniform in [0, 1). */
double tg_rng_uniform(tg_rng_t *r);
float tg_rng_uniformf(tg_rng_t *r);
/* Standard normal (Box-Muller; one value per call). */
double tg_rng_normal(tg_rng_t *r);
/* Fisher-Yates shuffle of n u64 / u32 values. */
void tg_rng_shuffle_u64(tg_rng_t *r, uint64_t *a, size_t n);
void tg_rng_shuffle_u32(tg_rng_t *r, uint32_t *a, size_t n);

/* ---------------------------------------------------------------- hashing */

/* CRC-32 (zlib polynomial). crc = 0 to start; pass the previous value to continue. */
uint32_t tg_crc32(uint32_t crc, const void *buf, size_t len);

/* ---------------------------------------------------------------- thread pool */

/* A fixed set of worker threads for data-parallel loops. tg_pool_for splits [0, n) into
 * nthreads contiguous ranges (the split depends only on n and nthreads, never on timing) and
 * runs fn on each; the calling thread takes range 0. Not reentrant: one tg_pool_for at a time
 * per pool. A NULL pool or nthreads == 1 runs inline. */
typedef struct tg_pool tg_pool_t;
typedef void (*tg_pool_fn)(void *ctx, size_t begin, size_t end, int tid);

int tg_pool_create(tg_pool_t **out, int nthreads);
void tg_pool_destroy(tg_pool_t *p);
int tg_pool_nthreads(const tg_pool_t *p);
void tg_pool_for(tg_pool_t *p, size_t n, tg_pool_fn fn, void *ctx);

/* ---------------------------------------------------------------- bounded queue */

/* A bounded blocking FIFO of pointers for pipelines. After tg_queue_close, push fails with
 * -EPIPE and pop drains what is left, then returns -EPIPE. */
typedef struct tg_queue tg_queue_t;
int tg_queue_create(tg_queue_t **out, size_t capacity);
void tg_queue_destroy(tg_queue_t *q);
int tg_queue_push(tg_queue_t *q, void *item);
int tg_queue_pop(tg_queue_t *q, void **item);
void tg_queue_close(tg_queue_t *q);
size_t tg_queue_len(tg_queue_t *q);

/* ---------------------------------------------------------------- JSON lines */

/* Builds one JSON object into a growing buffer; tg_json_end writes it plus '\n' and flushes. */
typedef struct tg_json {
    char *buf;
    size_t len, cap;
    int n;
} tg_json_t;

void tg_json_begin(tg_json_t *j);
void tg_json_int(tg_json_t *j, const char *key, int64_t v);
void tg_json_uint(tg_json_t *j, const char *key, uint64_t v);
void tg_json_num(tg_json_t *j, const char *key, double v); /* NaN/Inf written as null */
void tg_json_str(tg_json_t *j, const char *key, const char *v);
void tg_json_bool(tg_json_t *j, const char *key, int v);
/* A value written as given: raw must be valid JSON (an array or object built by the caller). */
void tg_json_raw(tg_json_t *j, const char *key, const char *raw);
/* Writes the object to f (if f) and frees the buffer. Returns the object as a string in
 * *text if text != NULL (caller frees); then the buffer is handed over instead of freed. */
void tg_json_end(tg_json_t *j, FILE *f, char **text);

/* ---------------------------------------------------------------- memory */

/* Memory budget accountant: every large allocation of graph/feature data, caches and buffers is
 * reserved here first. Thread-safe. limit 0 = unlimited. */
typedef struct tg_budget {
    pthread_mutex_t mu;
    uint64_t limit, used, peak;
} tg_budget_t;

void tg_budget_init(tg_budget_t *b, uint64_t limit);
void tg_budget_destroy(tg_budget_t *b);
/* Reserves bytes for `what`, or returns -ENOMEM with a message naming what, the amount, and
 * the limit. */
int tg_budget_reserve(tg_budget_t *b, uint64_t bytes, const char *what);
void tg_budget_release(tg_budget_t *b, uint64_t bytes);

/* Peak resident set size of this process in bytes (VmHWM), 0 if unknown. */
uint64_t tg_peak_rss_bytes(void);
/* Current resident set size (VmRSS), 0 if unknown. */
uint64_t tg_rss_bytes(void);
/* Its anonymous part (RssAnon: heap, stacks, library data), without mapped file pages, which are
 * page cache; VmRSS where the kernel does not report it. */
uint64_t tg_rss_anon_bytes(void);
/* Total physical RAM in bytes. */
uint64_t tg_phys_mem_bytes(void);
/* The memory limit of this process's cgroup (v2 memory.max, else v1 memory.limit_in_bytes, the
 * smallest along the path up to the root), or 0 when there is none. The limit counts the page
 * cache too (as ../shared/tools/membudget sets it). */
uint64_t tg_cgroup_mem_limit(void);

/* Aligned allocation (posix_memalign); free with free(). NULL on failure. */
void *tg_aligned_alloc(size_t align, size_t size);

/* ---------------------------------------------------------------- parsing helpers */

/* "512M", "2G", "1048576", "1.5G" (K/M/G/T = powers of 1024; optional trailing B/iB). */
int tg_parse_size(const char *s, uint64_t *out);
/* Strict integer / float parses: whole string must be consumed; name goes into the message. */
int tg_parse_u64(const char *s, uint64_t *out, const char *name);
int tg_parse_i64(const char *s, int64_t *out, const char *name);
int tg_parse_double(const char *s, double *out, const char *name);
/* Formats bytes as "1.23 GiB" into buf (returns buf). */
const char *tg_fmt_bytes(uint64_t bytes, char *buf, size_t len);

/* ---------------------------------------------------------------- files */

/* Whole-file write done safely: write path.tmp, fsync, rename, fsync the directory. */
int tg_write_file_atomic(const char *path, const void *data, size_t len);
/* Reads a whole (small) file into a NUL-terminated malloc'd buffer. */
int tg_read_file(const char *path, char **data, size_t *len);
/* fsync a directory by path. */
int tg_fsync_dir(const char *dir);
/* Recursively removes a directory tree (best effort, for cleanup of temp dirs). */
int tg_rmtree(const char *path);
/* mkdir -p */
int tg_mkdir_p(const char *path);
/* Opens an unnamed read-write file in dir (O_TMPFILE: the kernel frees it when the last
 * descriptor closes, so an error, SIGINT or SIGKILL leaves nothing behind). A file system
 * without O_TMPFILE (or named != 0) gets a unique "DIR/.tiergnn-<what>-XXXXXX", unlinked at once.
 * name (len bytes) receives a description for messages. Returns the descriptor or -errno. */
int tg_tmpfile_open(const char *dir, const char *what, int named, char *name, size_t len);
/* Full pwrite / pread loops. Short read at EOF returns -EIO with a message naming path+offset
 * (and "a short read" when the file is longer than the offset the bytes stopped at). */
int tg_pwrite_full(int fd, const void *buf, size_t len, uint64_t off, const char *path);
int tg_pread_full(int fd, void *buf, size_t len, uint64_t off, const char *path);
/* A fault hook for tg_pread_full's reads: returns a positive errno to fail the read of
 * [off, off + *len) of path, or 0 after lowering *len to the bytes the read may return (0: as
 * at the end of the file). io/ installs its fault rules here (tg_io_fault_add, TIERGNN_IO_FAULT),
 * so that the plain reads of the memory store, derived files and spill files meet the same
 * rules as io/'s queues. NULL removes it. */
typedef int (*tg_read_fault_fn)(const char *path, uint64_t off, uint64_t *len);
void tg_pread_set_fault_hook(tg_read_fault_fn fn);

#ifdef __cplusplus
}
#endif
#endif
