/* External edge sort: (src, dst) pairs in, CSC arrays (indptr, indices) out, in bounded memory.
 *
 * Edges are packed into sort keys whose order is (dst, src): while 2 * bits(N - 1) <= 64 a key
 * is one u64, dst << src_bits | src (10M nodes: 48 key bits); larger graphs use two words
 * {lo = src, hi = dst}. Keys collect in a run buffer; when it is full the run is sorted in
 * memory (a parallel MSD pass into cache-sized buckets, then an LSD radix sort per bucket; see
 * radix_sort), deduplicated if asked, and written to a run file in tmp_dir with O_DIRECT by a
 * thread of its own (from the radix scratch, while the run buffer fills again). One-word keys
 * are stored in run files with only the bytes they use (6 for 10M nodes) and unpacked by the
 * read thread: the final merge is bound by reading the runs back.
 * finish() keeps the last run in memory, reuses the radix scratch as read windows for the run
 * files (filled ahead by a read thread), and merges everything with a binary tree of branchless
 * 2-way merges straight into the indptr/indices writers, the tree and the CSC writing on two
 * threads. When there are more runs than read windows of a useful size, groups of runs are
 * first merged into longer runs (cascade), so any mem_bytes >= 64 KiB works, only more slowly.
 * Producers that can pack keys themselves write them straight into the run buffer
 * (tg_edgesort_reserve/commit); one that knows how many edges are coming says so
 * (expected_edges), and the runs that go to disk are then planned smaller so that the last run,
 * kept in memory, is full (plan_run). The final merge's two subtrees run on threads of their own.
 * The result never depends on the thread count, the budget or the order of the input. */
#include "extsort-impl.h"

#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define RADIX_MAX_BITS 11 /* widest LSD digit (2^11 counters per thread) */
#define MAX_DIGITS 16     /* LSD digits of the widest key: two words of up to 64 bits */
#define HIST_PER_THREAD ((size_t)MAX_DIGITS << RADIX_MAX_BITS) /* counters of one thread */
#define MSD_BITS 10                                            /* the one MSD pass: 1024 buckets */
#define MIN_MEM_BYTES (64u << 10)
#define RUN_ALIGN_KEYS 512 /* 4 KiB of one-word keys */
#define MAX_FANIN 128
#define OUT_BATCH (128u << 10)    /* indices per tg_filew_write call in the final merge */
#define MAX_PIECE_KEYS (2u << 20) /* keys per read of a run file in a merge (16 MiB) */

typedef struct run_file {
    char *path;
    uint64_t count;  /* keys */
    unsigned kbytes; /* bytes per key in the file: 8 x words, or fewer for packed one-word keys */
} run_file_t;

struct tg_edgesort {
    uint64_t num_nodes;
    int dedup, self_loops, remove_self_loops;
    char *tmp_dir, *progress;
    int words;         /* u64 words per key: 1 packed, 2 = {src, dst} */
    unsigned src_bits; /* bits of a node id: key = dst << src_bits | src when words == 1 */
    unsigned pack;     /* spilled runs store one-word keys in this many bytes (<= 8) */
    uint64_t *buf;     /* run buffer, cap keys */
    uint64_t *scratch; /* radix scratch, cap keys; merge read buffers in finish() */
    size_t cap, len;   /* keys */
    size_t run_limit;  /* keys the current run takes before it spills (plan_run) */
    uint64_t expected; /* tg_edgesort_opts_t.expected_edges */
    run_file_t *runs;
    size_t nruns, runs_cap;
    uint64_t seq; /* run file name counter */
    tg_pool_t *pool;
    uint64_t *hist;   /* nthreads x HIST_PER_THREAD counters */
    uint64_t *bstart; /* 2^MSD_BITS + 1 bucket offsets of the MSD pass */
    tg_edgesort_stats_t st;
    uint64_t seen;   /* edges offered to add(), for error messages */
    size_t reserved; /* keys handed out by tg_edgesort_reserve, not yet committed */
    int finished;
    /* A spilled run is written by a thread of its own from the scratch buffer while add()
     * fills the run buffer again; spill_wait() joins it before the scratch is needed. */
    pthread_t wr_thread;
    int wr_active, wr_fd, wr_direct, wr_rc;
    run_file_t wr_run;
    size_t wr_bytes;
    char wr_msg[512];
};

static uint64_t side_bytes(int words, int nth);

/* Sets how many keys the run being filled takes. Without an expected count, or when what is
 * still expected fits in one run, that is the whole buffer. Otherwise the r runs still needed
 * are planned so that the last, which stays in memory for the final merge, is full and the
 * r - 1 that go to disk share the rest equally. Planned again after every spill, so runs that
 * spilled early (a reservation that did not fit) or edges dropped as repeats shift the plan
 * instead of adding a run. */
static void plan_run(tg_edgesort_t *es)
{
    uint64_t added = es->st.edges_added, cap = es->cap;
    uint64_t left = es->expected > added ? es->expected - added : 0;
    es->run_limit = es->cap;
    if (left <= cap || cap < RUN_ALIGN_KEYS) return;
    /* The last run is planned 1/16 short of full: runs spill a little early (a reservation
     * that does not fit), and the shortfall must not add a run at the end. */
    uint64_t r = (left + cap - 1) / cap, last = cap - cap / 16;
    uint64_t per = (left - last + r - 2) / (r - 1);
    per = (per + RUN_ALIGN_KEYS - 1) / RUN_ALIGN_KEYS * RUN_ALIGN_KEYS;
    es->run_limit = (size_t)TG_MIN(per, cap);
}

static unsigned bits_for(uint64_t n)
{
    /* bits needed for ids 0..n-1 */
    unsigned b = 0;
    while (b < 64 && (n - 1) >> b)
        b++;
    return b;
}

int tg_edgesort_create(tg_edgesort_t **out, const tg_edgesort_opts_t *o)
{
    *out = NULL;
    if (!o->tmp_dir || !*o->tmp_dir)
        return tg_err(-EINVAL, "edge sort: a directory for temporary run files is required");
    if (o->num_nodes == 0) return tg_err(-EINVAL, "edge sort: num_nodes must be at least 1");
    uint64_t mem = o->mem_bytes ? o->mem_bytes : (256ull << 20);
    if (mem < MIN_MEM_BYTES) mem = MIN_MEM_BYTES;
    tg_edgesort_t *es = calloc(1, sizeof *es);
    if (!es) return tg_err(-ENOMEM, "edge sort: out of memory");
    es->num_nodes = o->num_nodes;
    es->dedup = o->dedup;
    es->self_loops = o->self_loops;
    es->remove_self_loops = o->remove_self_loops;
    es->src_bits = bits_for(o->num_nodes);
    /* Spilled runs of one-word keys keep only the bytes the keys use (6 for up to 2^24 nodes):
     * the final merge reads them back, and on a disk that reads slower than it writes the run
     * bytes set the merge's pace. */
    es->pack = TG_MAX(1u, (2 * es->src_bits + 7) / 8);
    es->words = 2 * es->src_bits <= 64 ? 1 : 2;
    es->tmp_dir = strdup(o->tmp_dir);
    es->progress = o->progress ? strdup(o->progress) : NULL;
    int nth = o->nthreads > 0 ? o->nthreads : (int)sysconf(_SC_NPROCESSORS_ONLN);
    nth = TG_MAX(1, TG_MIN(nth, 8));
    int rc = 0;
    if (!es->tmp_dir || (o->progress && !es->progress)) {
        rc = tg_err(-ENOMEM, "edge sort: out of memory");
        goto fail;
    }
    /* The sort's side buffers (final merge rings, histograms) come out of the budget too; the
     * run buffer and the scratch split the rest evenly. */
    uint64_t side = side_bytes(es->words, nth);
    if (mem >= 4 * side) mem -= side;
    /* Whole 4 KiB blocks per buffer, so full buffers can be written with O_DIRECT. */
    es->cap = (size_t)(mem / 2 / (8 * (uint64_t)es->words)) / RUN_ALIGN_KEYS * RUN_ALIGN_KEYS;
    es->buf = tg_aligned_alloc(4096, es->cap * 8 * (size_t)es->words);
    es->scratch = tg_aligned_alloc(4096, es->cap * 8 * (size_t)es->words);
    es->expected = o->expected_edges;
    plan_run(es);
    es->hist = calloc((size_t)nth * HIST_PER_THREAD, sizeof *es->hist);
    es->bstart = calloc(((size_t)1 << MSD_BITS) + 1, sizeof *es->bstart);
    if (!es->buf || !es->scratch || !es->hist || !es->bstart) {
        char b[32];
        rc = tg_err(-ENOMEM, "edge sort: cannot allocate %s of run buffers",
                    tg_fmt_bytes(mem, b, sizeof b));
        goto fail;
    }
    if ((rc = tg_pool_create(&es->pool, nth))) goto fail;
    es->st.key_words = es->words;
    *out = es;
    return 0;
fail:
    tg_edgesort_destroy(es);
    return rc;
}

int tg_edgesort_force_wide(tg_edgesort_t *es)
{
    if (es->len || es->nruns || es->finished)
        return tg_err(-EINVAL, "edge sort: key layout can change only before the first edge");
    /* Same memory, half as many keys. */
    es->cap /= 2;
    es->words = 2;
    es->st.key_words = 2;
    plan_run(es); /* the run limit was planned for the old capacity */
    return 0;
}

void tg_edgesort_stats(const tg_edgesort_t *es, tg_edgesort_stats_t *st)
{
    *st = es->st;
}

static int spill_wait(tg_edgesort_t *es);

void tg_edgesort_destroy(tg_edgesort_t *es)
{
    if (!es) return;
    spill_wait(es);
    for (size_t i = 0; i < es->nruns; i++) {
        unlink(es->runs[i].path);
        free(es->runs[i].path);
    }
    free(es->runs);
    tg_pool_destroy(es->pool);
    free(es->hist);
    free(es->bstart);
    free(es->buf);
    free(es->scratch);
    free(es->tmp_dir);
    free(es->progress);
    free(es);
}

/* ---------------------------------------------------------------- in-memory radix sort */

typedef struct radix_ctx {
    const uint64_t *in;
    uint64_t *out;
    int words;
    unsigned word, shift; /* the digit is (key word `word` >> shift) & mask */
    uint64_t mask;
    size_t nb; /* buckets */
    uint64_t *hist;
} radix_ctx_t;

static void radix_hist(void *arg, size_t b, size_t e, int tid)
{
    radix_ctx_t *c = arg;
    uint64_t *h = c->hist + (size_t)tid * c->nb;
    const uint64_t *p = c->in + c->word;
    size_t w = (size_t)c->words;
    for (size_t i = b; i < e; i++)
        h[(p[i * w] >> c->shift) & c->mask]++;
}

static void radix_scatter(void *arg, size_t b, size_t e, int tid)
{
    radix_ctx_t *c = arg;
    uint64_t *off = c->hist + (size_t)tid * c->nb; /* turned into write offsets */
    if (c->words == 1) {
        const uint64_t *in = c->in;
        uint64_t *out = c->out;
        for (size_t i = b; i < e; i++) {
            uint64_t k = in[i];
            out[off[(k >> c->shift) & c->mask]++] = k;
        }
    } else {
        const uint64_t *in = c->in;
        uint64_t *out = c->out;
        for (size_t i = b; i < e; i++) {
            uint64_t lo = in[2 * i], hi = in[2 * i + 1];
            uint64_t d = c->word ? hi : lo;
            uint64_t o = off[(d >> c->shift) & c->mask]++;
            out[2 * o] = lo;
            out[2 * o + 1] = hi;
        }
    }
}

/* A radix digit: bits [shift, shift + width) of key word `word`. */
typedef struct digit {
    unsigned word, shift, width;
} digit_t;

/* Appends the digits covering bits [lo, hi) of key word `word`, at most RADIX_MAX_BITS wide and
 * of nearly equal width (48 bits: five 10-bit digits, not four of 11 and a 4). */
static size_t split_digits(digit_t *d, size_t nd, unsigned word, unsigned lo, unsigned hi)
{
    if (hi <= lo) return nd;
    unsigned bits = hi - lo, passes = (bits + RADIX_MAX_BITS - 1) / RADIX_MAX_BITS;
    unsigned width = (bits + passes - 1) / passes;
    for (unsigned s = lo; s < hi; s += width)
        d[nd++] = (digit_t){word, s, TG_MIN(width, hi - s)};
    return nd;
}

/* Sequential LSD radix sort of n keys in a by digits d[0..nd), least significant first, with
 * tmp as the other buffer and hist (HIST_PER_THREAD counters) as scratch. Stable. Returns the
 * buffer that holds the result (a or tmp). The counts of every digit come from one read of the
 * keys before the first pass (they do not change between passes), not one read per pass. */
static uint64_t *lsd_sort(uint64_t *a, uint64_t *tmp, size_t n, int words, const digit_t *d,
                          size_t nd, uint64_t *hist)
{
    if (n < 2) return a;
    const size_t w = (size_t)words, stride = (size_t)1 << RADIX_MAX_BITS;
    for (size_t p = 0; p < nd; p++)
        memset(hist + p * stride, 0, ((size_t)1 << d[p].width) * sizeof *hist);
    unsigned sh[MAX_DIGITS];
    uint64_t m[MAX_DIGITS], *h[MAX_DIGITS];
    for (size_t p = 0; p < nd; p++) {
        sh[p] = d[p].shift;
        m[p] = ((uint64_t)1 << d[p].width) - 1;
        h[p] = hist + p * stride;
    }
    if (words == 1 && nd == 4) { /* 48-bit keys (up to 2^24 nodes) less the MSD digit */
        for (size_t i = 0; i < n; i++) {
            uint64_t k = a[i];
            h[0][(k >> sh[0]) & m[0]]++;
            h[1][(k >> sh[1]) & m[1]]++;
            h[2][(k >> sh[2]) & m[2]]++;
            h[3][(k >> sh[3]) & m[3]]++;
        }
    } else {
        for (size_t i = 0; i < n; i++)
            for (size_t p = 0; p < nd; p++)
                h[p][(a[i * w + d[p].word] >> sh[p]) & m[p]]++;
    }
    for (size_t p = 0; p < nd; p++) {
        size_t nb = (size_t)1 << d[p].width;
        uint64_t mask = nb - 1;
        unsigned sh = d[p].shift;
        uint64_t *h = hist + p * stride;
        if (h[(a[d[p].word] >> sh) & mask] == n) continue; /* one digit value: nothing to order */
        uint64_t sum = 0;
        for (size_t k = 0; k < nb; k++) {
            uint64_t x = h[k];
            h[k] = sum;
            sum += x;
        }
        if (words == 1) {
            for (size_t i = 0; i < n; i++) {
                uint64_t k = a[i];
                tmp[h[(k >> sh) & mask]++] = k;
            }
        } else {
            for (size_t i = 0; i < n; i++) {
                uint64_t lo = a[2 * i], hi = a[2 * i + 1];
                uint64_t o = h[((d[p].word ? hi : lo) >> sh) & mask]++;
                tmp[2 * o] = lo;
                tmp[2 * o + 1] = hi;
            }
        }
        uint64_t *t = a;
        a = tmp;
        tmp = t;
    }
    return a;
}

/* The local phase: each thread LSD-sorts whole MSD buckets, those that start in its share of
 * the keys (a split by key count, so a few fat buckets do not leave a thread idle). */
typedef struct local_ctx {
    tg_edgesort_t *es;
    const uint64_t *bstart; /* nb + 1 bucket offsets */
    size_t nb, n;
    const digit_t *d;
    size_t nd;
    int nth;
} local_ctx_t;

static void local_sorts(void *arg, size_t b, size_t e, int tid)
{
    local_ctx_t *c = arg;
    tg_edgesort_t *es = c->es;
    size_t w = (size_t)es->words;
    uint64_t *hist = es->hist + (size_t)tid * HIST_PER_THREAD;
    for (size_t task = b; task < e; task++) {
        uint64_t lo = c->n * task / (size_t)c->nth, hi = c->n * (task + 1) / (size_t)c->nth;
        for (size_t k = 0; k < c->nb; k++) {
            uint64_t off = c->bstart[k], m = c->bstart[k + 1] - off;
            if (off < lo || off >= hi || m < 2) continue;
            uint64_t *in = es->scratch + off * w, *tmp = es->buf + off * w;
            uint64_t *r = lsd_sort(in, tmp, (size_t)m, es->words, c->d, c->nd, hist);
            if (r != in) memcpy(in, r, (size_t)m * w * 8);
        }
    }
}

/* Sorts es->buf[0..len) ascending; the sorted keys end up in es->buf (buffers may swap).
 *
 * One parallel MSD pass on the top MSD_BITS of the key spreads the keys into buckets that fit
 * in cache (64M keys / 1024 = 512 KiB each); each bucket is then LSD-sorted on the remaining
 * bits where every pass hits the cache. Measured twice as fast as LSD over the whole array,
 * whose every pass streams the full buffer through memory. The MSD pass is stable and the
 * buckets are disjoint, so the result does not depend on the thread count. */
static void radix_sort(tg_edgesort_t *es)
{
    size_t n = es->len;
    if (n < 2) return;
    int nth = tg_pool_nthreads(es->pool);
    /* Key bits, least significant first: one packed word of 2 * src_bits, or src_bits of the
     * src word then src_bits of the dst word. */
    unsigned sb = es->src_bits;
    unsigned top_word = es->words == 1 ? 0 : 1, top_bits = es->words == 1 ? 2 * sb : sb;
    digit_t d[MAX_DIGITS];
    size_t nd = 0;
    if (es->words == 2) nd = split_digits(d, nd, 0, 0, sb);
    if (n < (1u << 16) || top_bits <= MSD_BITS) { /* small: sequential LSD over everything */
        nd = split_digits(d, nd, top_word, 0, top_bits);
        uint64_t *r = lsd_sort(es->buf, es->scratch, n, es->words, d, nd, es->hist);
        if (r != es->buf) {
            es->scratch = es->buf;
            es->buf = r;
        }
        return;
    }
    nd = split_digits(d, nd, top_word, 0, top_bits - MSD_BITS);
    radix_ctx_t c = {.in = es->buf,
                     .out = es->scratch,
                     .words = es->words,
                     .word = top_word,
                     .shift = top_bits - MSD_BITS,
                     .mask = (1ull << MSD_BITS) - 1,
                     .nb = (size_t)1 << MSD_BITS,
                     .hist = es->hist};
    memset(es->hist, 0, (size_t)nth * c.nb * sizeof *es->hist);
    tg_pool_for(es->pool, n, radix_hist, &c);
    /* Offsets: bucket-major, thread-minor, so thread t's keys of a digit follow those of
     * threads < t, which keeps the pass stable. */
    uint64_t sum = 0;
    for (size_t k = 0; k < c.nb; k++) {
        es->bstart[k] = sum;
        for (int t = 0; t < nth; t++) {
            uint64_t *h = &es->hist[(size_t)t * c.nb + k];
            uint64_t x = *h;
            *h = sum;
            sum += x;
        }
    }
    es->bstart[c.nb] = sum;
    tg_pool_for(es->pool, n, radix_scatter, &c);
    local_ctx_t lc = {
        .es = es, .bstart = es->bstart, .nb = c.nb, .n = n, .d = d, .nd = nd, .nth = nth};
    tg_pool_for(es->pool, (size_t)nth, local_sorts, &lc);
    uint64_t *t = es->buf;
    es->buf = es->scratch;
    es->scratch = t;
}

/* Drops adjacent repeats from the sorted run buffer. */
static void dedup_sorted(tg_edgesort_t *es)
{
    if (es->len < 2) return;
    size_t j = 1;
    if (es->words == 1) {
        uint64_t *a = es->buf;
        for (size_t i = 1; i < es->len; i++)
            if (a[i] != a[j - 1]) a[j++] = a[i];
    } else {
        uint64_t *a = es->buf;
        for (size_t i = 1; i < es->len; i++)
            if (a[2 * i] != a[2 * (j - 1)] || a[2 * i + 1] != a[2 * (j - 1) + 1]) {
                a[2 * j] = a[2 * i];
                a[2 * j + 1] = a[2 * i + 1];
                j++;
            }
    }
    es->len = j;
}

/* ---------------------------------------------------------------- run files */

static int run_new(tg_edgesort_t *es, run_file_t *r)
{
    size_t n = strlen(es->tmp_dir) + 64;
    r->path = malloc(n);
    if (!r->path) return tg_err(-ENOMEM, "edge sort: out of memory");
    snprintf(r->path, n, "%s/edgesort-%d-%" PRIu64 ".run", es->tmp_dir, (int)getpid(), es->seq++);
    r->count = 0;
    r->kbytes = 8 * (unsigned)es->words;
    return 0;
}

static int run_push(tg_edgesort_t *es, run_file_t r)
{
    if (es->nruns == es->runs_cap) {
        size_t cap = es->runs_cap ? 2 * es->runs_cap : 16;
        run_file_t *p = realloc(es->runs, cap * sizeof *p);
        if (!p) {
            unlink(r.path);
            free(r.path);
            return tg_err(-ENOMEM, "edge sort: out of memory");
        }
        es->runs = p;
        es->runs_cap = cap;
    }
    es->runs[es->nruns++] = r;
    es->st.runs_spilled++;
    return 0;
}

/* Run files are written with O_DIRECT where the file system allows it: they are read once, and
 * page-cache writes cost more CPU than the sort itself on a VM. *direct says whether it is on. */
static int open_new_file(const char *path, int *fd, int *direct)
{
    *direct = 1;
    *fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_DIRECT, 0600);
    if (*fd < 0 && errno == EINVAL) {
        *direct = 0;
        *fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    }
    if (*fd < 0) {
        int e = errno;
        return tg_err(-e, "%s: cannot create edge-sort run file: %s", path, strerror(e));
    }
    return 0;
}

/* pwrite of a whole buffer; a piece direct I/O cannot take (an unaligned tail, EINVAL) turns
 * O_DIRECT off for the rest of the file. */
static int run_write(int fd, int *direct, const void *buf, size_t len, uint64_t off,
                     const char *path)
{
    if (*direct && (len % 4096 || off % 4096)) {
        size_t head = len / 4096 * 4096;
        if (head && off % 4096 == 0) {
            int rc = run_write(fd, direct, buf, head, off, path);
            if (rc) return rc;
            buf = (const char *)buf + head;
            len -= head;
            off += head;
        }
    }
    if (*direct && (len % 4096 || off % 4096)) {
        int fl = fcntl(fd, F_GETFL);
        if (fl >= 0) fcntl(fd, F_SETFL, fl & ~O_DIRECT);
        *direct = 0;
    }
    if (*direct) {
        ssize_t n = pwrite(fd, buf, len, (off_t)off);
        if (n == (ssize_t)len) return 0;
        if (n < 0 && errno != EINVAL) {
            int e = errno;
            return tg_err(-e, "%s: write at offset %llu failed: %s", path, (unsigned long long)off,
                          strerror(e));
        }
        /* EINVAL or a short write: finish without O_DIRECT */
        size_t done = n > 0 ? (size_t)n : 0;
        int fl = fcntl(fd, F_GETFL);
        if (fl >= 0) fcntl(fd, F_SETFL, fl & ~O_DIRECT);
        *direct = 0;
        return tg_pwrite_full(fd, (const char *)buf + done, len - done, off + done, path);
    }
    return tg_pwrite_full(fd, buf, len, off, path);
}

/* Packs n one-word keys in place to kb bytes each (little endian, low bytes first). Key i moves
 * down to byte i * kb; the 8-byte store there only touches keys already read. */
static void pack_keys(uint64_t *a, size_t n, unsigned kb)
{
    unsigned char *p = (unsigned char *)a;
    for (size_t i = 0; i < n; i++) {
        uint64_t k = a[i];
        memcpy(p + i * kb, &k, 8);
    }
}

/* Undoes pack_keys in place, last key first (an 8-byte load at i * kb stays inside the n x 8
 * bytes; the bytes past the key are masked off). */
static void unpack_keys(uint64_t *a, size_t n, unsigned kb)
{
    const unsigned char *p = (const unsigned char *)a;
    uint64_t mask = kb >= 8 ? ~0ull : (1ull << (8 * kb)) - 1;
    for (size_t i = n; i-- > 0;) {
        uint64_t k;
        memcpy(&k, p + i * kb, 8);
        a[i] = k & mask;
    }
}

static void *spill_writer(void *arg)
{
    tg_edgesort_t *es = arg;
    if (es->wr_run.kbytes < 8) pack_keys(es->scratch, es->wr_run.count, es->wr_run.kbytes);
    int rc = run_write(es->wr_fd, &es->wr_direct, es->scratch, es->wr_bytes, 0, es->wr_run.path);
    if (close(es->wr_fd) && !rc)
        rc = tg_err(-errno, "%s: close failed: %s", es->wr_run.path, strerror(errno));
    if (rc) snprintf(es->wr_msg, sizeof es->wr_msg, "%s", tg_errmsg());
    es->wr_rc = rc;
    return NULL;
}

/* Records the written run (or returns the write's error). */
static int spill_done(tg_edgesort_t *es)
{
    run_file_t r = es->wr_run;
    if (es->wr_rc) {
        unlink(r.path);
        free(r.path);
        return tg_err(es->wr_rc, "%s", es->wr_msg);
    }
    es->st.bytes_spilled += es->wr_bytes;
    return run_push(es, r);
}

/* Joins the run file write in flight, if any, and records the run. */
static int spill_wait(tg_edgesort_t *es)
{
    if (!es->wr_active) return 0;
    pthread_join(es->wr_thread, NULL);
    es->wr_active = 0;
    return spill_done(es);
}

/* Sorts the run buffer and starts writing it to a new run file from the scratch buffer (the
 * buffers swap), so add() can go on while the disk takes the run. Run files are scratch data:
 * no fsync. */
static int spill(tg_edgesort_t *es)
{
    int rc = spill_wait(es); /* the scratch is the radix sort's */
    if (rc) return rc;
    radix_sort(es);
    if (es->dedup) dedup_sorted(es);
    run_file_t r;
    int fd = -1, direct = 0;
    if ((rc = run_new(es, &r))) return rc;
    if ((rc = open_new_file(r.path, &fd, &direct))) {
        free(r.path);
        return rc;
    }
    r.count = es->len;
    r.kbytes = es->words == 1 ? es->pack : 16;
    uint64_t *t = es->buf;
    es->buf = es->scratch;
    es->scratch = t;
    es->wr_run = r;
    es->wr_fd = fd;
    es->wr_direct = direct;
    es->wr_bytes = es->len * (size_t)r.kbytes;
    es->wr_rc = 0;
    es->len = 0;
    plan_run(es);
    if (pthread_create(&es->wr_thread, NULL, spill_writer, es)) {
        spill_writer(es); /* no thread: write it here */
        return spill_done(es);
    }
    es->wr_active = 1;
    return 0;
}

static int range_error(const tg_edgesort_t *es, uint64_t at, uint64_t s, uint64_t d)
{
    uint64_t N = es->num_nodes, bad = s >= N ? s : d;
    return tg_err(-EINVAL,
                  "edge %" PRIu64 " (%" PRIu64 " -> %" PRIu64 "): node id %" PRIu64
                  " is out of range (num_nodes = %" PRIu64 ", ids are 0..%" PRIu64 ")",
                  at, s, d, bad, N, N - 1);
}

int tg_edgesort_add(tg_edgesort_t *es, const uint64_t *src, const uint64_t *dst, size_t n)
{
    if (es->finished) return tg_err(-EINVAL, "edge sort: add after finish");
    const uint64_t N = es->num_nodes;
    const unsigned sb = es->src_bits;
    const int drop_loops = es->remove_self_loops;
    size_t i = 0;
    while (i < n) {
        if (es->len >= es->run_limit) {
            int rc = spill(es);
            if (rc) return rc;
        }
        /* a stretch that fits in the run buffer, with the buffer state in locals */
        size_t m = TG_MIN(n - i, es->run_limit - es->len), o = 0;
        uint64_t *out = es->buf + es->len * (size_t)es->words;
        int rc = 0;
        for (size_t j = i; j < i + m; j++) {
            uint64_t s = src[j], d = dst[j];
            if (s >= N || d >= N) {
                rc = range_error(es, es->seen + j, s, d);
                break;
            }
            if (s == d && drop_loops) continue;
            if (es->words == 1) {
                out[o++] = d << sb | s;
            } else {
                out[2 * o] = s;
                out[2 * o + 1] = d;
                o++;
            }
        }
        es->len += o;
        es->st.edges_added += o;
        if (rc) return rc;
        i += m;
    }
    es->seen += n;
    return 0;
}

unsigned tg_edgesort_key_bits(const tg_edgesort_t *es)
{
    return es->words == 1 ? es->src_bits : 0;
}

void tg_edgesort_expect(tg_edgesort_t *es, uint64_t expected_edges)
{
    es->expected = expected_edges;
    plan_run(es);
}

size_t tg_edgesort_capacity(const tg_edgesort_t *es)
{
    return es->cap;
}

int tg_edgesort_reserve(tg_edgesort_t *es, size_t n, uint64_t **keys)
{
    *keys = NULL;
    if (es->finished) return tg_err(-EINVAL, "edge sort: reserve after finish");
    if (es->words != 1)
        return tg_err(-EINVAL, "edge sort: %" PRIu64 " nodes need two-word keys: use add",
                      es->num_nodes);
    if (n > es->cap)
        return tg_err(-EINVAL, "edge sort: cannot reserve %zu keys in a run buffer of %zu", n,
                      es->cap);
    if (es->len && es->run_limit - TG_MIN(es->run_limit, es->len) < n) {
        int rc = spill(es);
        if (rc) return rc;
    }
    es->reserved = n;
    *keys = es->buf + es->len;
    return 0;
}

int tg_edgesort_commit(tg_edgesort_t *es, size_t n)
{
    if (n > es->reserved)
        return tg_err(-EINVAL, "edge sort: commit of %zu keys, %zu reserved", n, es->reserved);
    es->reserved = 0;
    es->len += n;
    es->seen += n;
    es->st.edges_added += n;
    return 0;
}

/* ---------------------------------------------------------------- merging */

/* The k-way merge is a balanced binary tree of 2-way merges, each node filling a small block
 * from its two children. A binary heap does about 2 log2(k) data-dependent branches per key,
 * and on random runs half of them mispredict; the 2-way merge below picks with a conditional
 * move instead, so a key costs log2(k) cheap steps: measured 3x faster than a heap for k = 4.
 *
 * A stream serves sorted keys a block at a time: a run file read through a window of the
 * scratch buffer, the in-memory last run, or a merge node. */
struct prefetch;

typedef struct stream {
    uint64_t *buf;        /* current block: keys [pos, n), `words` u64 each */
    size_t pos, n, cap;   /* keys */
    struct stream *a, *b; /* children of a merge node; NULL for a leaf */
    /* run file leaf (fd >= 0): its window is two halves; the prefetch thread fills one while
     * the merge consumes the other */
    int fd; /* -1 for the in-memory run and for nodes */
    const char *path;
    unsigned kbytes;              /* bytes per key in the file (run_file_t) */
    uint64_t file_off, file_left; /* next read: byte offset; keys not yet scheduled */
    uint64_t *half[2];
    size_t half_cap, half_n[2]; /* keys */
    int state[2];               /* HALF_EMPTY, HALF_LOADING, HALF_READY */
    int cur, started;
    struct prefetch *pf;
    struct async_node *an; /* a proxy leaf whose blocks another thread merges (async_start) */
} stream_t;

enum { HALF_EMPTY = 0, HALF_LOADING = 1, HALF_READY = 2 };

/* One thread per merge tree reads run-file pieces ahead of the merge, so the disk and the
 * merge overlap. Reads use O_DIRECT where possible: the run files were written that way and
 * are not in the page cache, and copying from the page cache costs more CPU than the merge. */
typedef struct pf_req {
    stream_t *s;
    int h;
    uint64_t off;
    size_t n; /* keys */
} pf_req_t;

typedef struct prefetch {
    pthread_t th;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    pf_req_t *q;
    size_t qcap, qhead, qlen;
    int words, stop, err;
    char msg[512];
} prefetch_t;

/* Merges a[*i..na) and b[*j..nb) into out[*o..cap) until one of the three runs out. Equal keys
 * take a's first (any order of equal keys gives the same output: they are the same edge). */
static inline void merge2_1(const uint64_t *a, size_t *i, size_t na, const uint64_t *b, size_t *j,
                            size_t nb, uint64_t *out, size_t *o, size_t cap)
{
    size_t x = *i, y = *j, z = *o;
    /* each step advances exactly one input: min(...) steps cannot overrun any of them */
    size_t m = TG_MIN(TG_MIN(na - x, nb - y), cap - z);
    for (size_t r = 0; r < m; r++) {
        uint64_t ka = a[x], kb = b[y];
        size_t t = kb < ka;
        out[z++] = t ? kb : ka;
        x += 1 - t;
        y += t;
    }
    *i = x;
    *j = y;
    *o = z;
}

static inline void merge2_2(const uint64_t *a, size_t *i, size_t na, const uint64_t *b, size_t *j,
                            size_t nb, uint64_t *out, size_t *o, size_t cap)
{
    size_t x = *i, y = *j, z = *o;
    size_t m = TG_MIN(TG_MIN(na - x, nb - y), cap - z);
    for (size_t r = 0; r < m; r++) {
        uint64_t al = a[2 * x], ah = a[2 * x + 1], bl = b[2 * y], bh = b[2 * y + 1];
        size_t t = (bh < ah) | ((bh == ah) & (bl < al));
        out[2 * z] = t ? bl : al;
        out[2 * z + 1] = t ? bh : ah;
        z++;
        x += 1 - t;
        y += t;
    }
    *i = x;
    *j = y;
    *o = z;
}

/* Direct reads need whole blocks: the length is rounded up (the file may end sooner: a short
 * read at the end is fine as long as the keys asked for arrived). */
static int pf_read(stream_t *s, int words, uint64_t *buf, size_t n, uint64_t off)
{
    size_t want = n * (size_t)s->kbytes, len = want;
    (void)words;
    int fl = fcntl(s->fd, F_GETFL);
    if (fl >= 0 && (fl & O_DIRECT)) len = (want + 4095) / 4096 * 4096;
    size_t got = 0;
    while (got < want) {
        ssize_t r = pread(s->fd, (char *)buf + got, len - got, (off_t)(off + got));
        if (r < 0 && errno == EINTR) continue;
        if (r < 0 && errno == EINVAL && fl >= 0 && (fl & O_DIRECT)) { /* refused: go buffered */
            fcntl(s->fd, F_SETFL, fl & ~O_DIRECT);
            fl &= ~O_DIRECT;
            len = want;
            continue;
        }
        if (r < 0) {
            int e = errno;
            return tg_err(-e, "%s: read at offset %llu failed: %s", s->path,
                          (unsigned long long)(off + got), strerror(e));
        }
        if (r == 0)
            return tg_err(-EIO, "%s: unexpected end of file at offset %llu", s->path,
                          (unsigned long long)(off + got));
        got += (size_t)r;
        /* a short direct read that stopped on a block boundary can go on; one that did not
         * is at the end of the file (checked by the loop) */
        if (got % 4096) len = want;
    }
    if (s->kbytes < 8) unpack_keys(buf, n, s->kbytes);
    return 0;
}

static void *pf_main(void *arg)
{
    prefetch_t *pf = arg;
    pthread_mutex_lock(&pf->mu);
    for (;;) {
        while (!pf->stop && pf->qlen == 0)
            pthread_cond_wait(&pf->cv, &pf->mu);
        if (pf->stop) break;
        pf_req_t r = pf->q[pf->qhead];
        pf->qhead = (pf->qhead + 1) % pf->qcap;
        pf->qlen--;
        int failed = pf->err != 0;
        pthread_mutex_unlock(&pf->mu);
        int rc = failed ? 0 : pf_read(r.s, pf->words, r.s->half[r.h], r.n, r.off);
        pthread_mutex_lock(&pf->mu);
        if (rc && !pf->err) {
            pf->err = rc;
            snprintf(pf->msg, sizeof pf->msg, "%s", tg_errmsg());
        }
        r.s->half_n[r.h] = r.n;
        r.s->state[r.h] = HALF_READY;
        pthread_cond_broadcast(&pf->cv);
    }
    pthread_mutex_unlock(&pf->mu);
    return NULL;
}

/* Queues the next piece of the leaf's file into half h (or marks it empty at the end). The
 * caller holds pf->mu. */
static void pf_schedule(stream_t *s, int h)
{
    prefetch_t *pf = s->pf;
    size_t n = (size_t)TG_MIN((uint64_t)s->half_cap, s->file_left);
    if (n == 0) {
        s->state[h] = HALF_EMPTY;
        return;
    }
    pf->q[(pf->qhead + pf->qlen) % pf->qcap] =
        (pf_req_t){.s = s, .h = h, .off = s->file_off, .n = n};
    pf->qlen++;
    s->file_off += n * (uint64_t)s->kbytes;
    s->file_left -= n;
    s->state[h] = HALF_LOADING;
    pthread_cond_broadcast(&pf->cv);
}

/* The leaf's current half is used up: hand it back for the next piece, switch to the other. */
static int leaf_next(stream_t *s)
{
    prefetch_t *pf = s->pf;
    pthread_mutex_lock(&pf->mu);
    if (s->started) {
        pf_schedule(s, s->cur);
        s->cur ^= 1;
    }
    s->started = 1;
    while (s->state[s->cur] == HALF_LOADING && !pf->err)
        pthread_cond_wait(&pf->cv, &pf->mu);
    int rc = pf->err ? tg_err(pf->err, "%s", pf->msg) : 0, st = s->state[s->cur];
    pthread_mutex_unlock(&pf->mu);
    if (rc) return rc;
    if (st != HALF_READY) return 0;
    s->buf = s->half[s->cur];
    s->n = s->half_n[s->cur];
    s->pos = 0;
    return 1;
}

static int async_next(stream_t *s);

/* Makes keys available in s (pos < n); returns 1, 0 at the end of the stream, or an error. */
static int stream_fill(stream_t *s, int words)
{
    if (s->pos < s->n) return 1;
    if (!s->a) return s->fd >= 0 ? leaf_next(s) : s->an ? async_next(s) : 0;
    stream_t *a = s->a, *b = s->b;
    size_t o = 0;
    while (o < s->cap) {
        int ra = stream_fill(a, words), rb = stream_fill(b, words);
        if (ra < 0) return ra;
        if (rb < 0) return rb;
        if (!ra && !rb) break;
        if (!ra || !rb) { /* one side is done: copy the other */
            stream_t *c = ra ? a : b;
            size_t m = TG_MIN(c->n - c->pos, s->cap - o);
            memcpy(s->buf + o * (size_t)words, c->buf + c->pos * (size_t)words,
                   m * 8 * (size_t)words);
            c->pos += m;
            o += m;
            continue;
        }
        if (words == 1)
            merge2_1(a->buf, &a->pos, a->n, b->buf, &b->pos, b->n, s->buf, &o, s->cap);
        else
            merge2_2(a->buf, &a->pos, a->n, b->buf, &b->pos, b->n, s->buf, &o, s->cap);
    }
    s->pos = 0;
    s->n = o;
    return o > 0;
}

/* A subtree merged on a thread of its own. The final merge's tree pulls every key through
 * log2(k) levels on one thread, and with four runs that thread, not the disk or the CSC
 * writer, set the pace while the second core idled: the root's two subtrees now each run on
 * a thread, handing blocks to the root through a small ring, and the root's thread only does
 * the last 2-way merge. Blocks are whole merge outputs, so the keys are the same. */
#define ASYNC_SLOTS 3
#define ASYNC_KEYS (64u << 10)

typedef struct async_node {
    pthread_t th;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    stream_t *child; /* the merge node the thread drives */
    stream_t proxy;  /* what the parent reads instead of child */
    uint64_t *buf[ASYNC_SLOTS];
    size_t n[ASYNC_SLOTS];
    int full[ASYNC_SLOTS];
    size_t head, tail; /* next slot the parent takes / the thread fills */
    int words, done, stop, err, started;
    char msg[512];
} async_node_t;

static void *async_main(void *arg)
{
    async_node_t *an = arg;
    pthread_mutex_lock(&an->mu);
    while (!an->done && !an->err) {
        while (an->full[an->tail] && !an->stop)
            pthread_cond_wait(&an->cv, &an->mu);
        if (an->stop) break;
        size_t slot = an->tail;
        pthread_mutex_unlock(&an->mu);
        stream_t *c = an->child;
        c->buf = an->buf[slot];
        c->cap = ASYNC_KEYS;
        c->pos = c->n = 0;
        int r = stream_fill(c, an->words);
        pthread_mutex_lock(&an->mu);
        if (r < 0) {
            an->err = r;
            snprintf(an->msg, sizeof an->msg, "%s", tg_errmsg());
        } else if (r == 0) {
            an->done = 1;
        } else {
            an->n[slot] = c->n;
            an->full[slot] = 1;
            an->tail = (slot + 1) % ASYNC_SLOTS;
        }
        pthread_cond_broadcast(&an->cv);
    }
    pthread_mutex_unlock(&an->mu);
    return NULL;
}

/* The parent used up the proxy's block: give the slot back and wait for the next one. */
static int async_next(stream_t *s)
{
    async_node_t *an = s->an;
    pthread_mutex_lock(&an->mu);
    if (s->started) {
        an->full[an->head] = 0;
        an->head = (an->head + 1) % ASYNC_SLOTS;
        pthread_cond_broadcast(&an->cv);
    }
    s->started = 1;
    while (!an->full[an->head] && !an->done && !an->err)
        pthread_cond_wait(&an->cv, &an->mu);
    int rc = an->err, got = an->full[an->head];
    if (got) {
        s->buf = an->buf[an->head];
        s->n = an->n[an->head];
        s->pos = 0;
    }
    pthread_mutex_unlock(&an->mu);
    if (rc) return tg_err(rc, "%s", an->msg);
    return got;
}

/* Stops and joins the thread (if it runs) and frees the ring; the child is the tree's. */
static void async_stop(async_node_t *an)
{
    if (an->started) {
        pthread_mutex_lock(&an->mu);
        an->stop = 1;
        pthread_cond_broadcast(&an->cv);
        pthread_mutex_unlock(&an->mu);
        pthread_join(an->th, NULL);
        pthread_mutex_destroy(&an->mu);
        pthread_cond_destroy(&an->cv);
        an->started = 0;
    }
    for (int i = 0; i < ASYNC_SLOTS; i++) {
        free(an->buf[i]);
        an->buf[i] = NULL;
    }
}

/* Moves the merge node *slot onto a thread: *slot becomes the proxy. Leaves stay as they are,
 * and so does everything when a thread cannot be had (the merge is then single-threaded). */
static void async_start(async_node_t *an, stream_t **slot, int words)
{
    memset(an, 0, sizeof *an);
    if (!(*slot)->a) return;
    for (int i = 0; i < ASYNC_SLOTS; i++)
        if (!(an->buf[i] = malloc(ASYNC_KEYS * 8 * (size_t)words))) {
            async_stop(an);
            return;
        }
    an->child = *slot;
    an->words = words;
    an->proxy = (stream_t){.fd = -1, .an = an};
    pthread_mutex_init(&an->mu, NULL);
    pthread_cond_init(&an->cv, NULL);
    if (pthread_create(&an->th, NULL, async_main, an)) {
        pthread_mutex_destroy(&an->mu);
        pthread_cond_destroy(&an->cv);
        async_stop(an);
        return;
    }
    an->started = 1;
    *slot = &an->proxy;
}

/* The merge tree over leaves [lo, hi); nodes come from *next. */
static stream_t *tree_build(stream_t *leaves, size_t lo, size_t hi, stream_t **next)
{
    if (hi - lo == 1) return &leaves[lo];
    size_t mid = lo + (hi - lo) / 2;
    stream_t *s = (*next)++;
    s->a = tree_build(leaves, lo, mid, next);
    s->b = tree_build(leaves, mid, hi, next);
    return s;
}

typedef struct merge_tree {
    stream_t *leaves, *nodes, *root;
    size_t k; /* leaves; the first nfiles are run files */
    size_t nfiles;
    prefetch_t pf;
    int pf_up; /* the prefetch thread runs */
} merge_tree_t;

static void tree_close(merge_tree_t *t)
{
    if (t->pf_up) { /* the thread finishes the read in flight, then leaves */
        pthread_mutex_lock(&t->pf.mu);
        t->pf.stop = 1;
        pthread_cond_broadcast(&t->pf.cv);
        pthread_mutex_unlock(&t->pf.mu);
        pthread_join(t->pf.th, NULL);
        pthread_mutex_destroy(&t->pf.mu);
        pthread_cond_destroy(&t->pf.cv);
    }
    for (size_t i = 0; i < t->nfiles; i++)
        if (t->leaves[i].fd >= 0) close(t->leaves[i].fd);
    free(t->pf.q);
    free(t->leaves);
    free(t->nodes);
    memset(t, 0, sizeof *t);
}

/* Opens run files [first, first + nfiles) (and the in-memory run as the last leaf when mem_run)
 * and carves their read windows and the node blocks out of es->scratch. */
static int tree_open(tg_edgesort_t *es, size_t first, size_t nfiles, int mem_run, merge_tree_t *t)
{
    memset(t, 0, sizeof *t);
    size_t k = nfiles + (size_t)(mem_run != 0);
    t->leaves = calloc(TG_MAX(k, 1), sizeof *t->leaves);
    t->nodes = calloc(TG_MAX(k, 1), sizeof *t->nodes);
    if (!t->leaves || !t->nodes) {
        tree_close(t);
        return tg_err(-ENOMEM, "edge sort: out of memory");
    }
    t->k = k;
    /* Node blocks stay cache-sized; the rest of the scratch reads big pieces of each file. */
    size_t w = (size_t)es->words;
    size_t nb = k > 1 ? TG_MAX((size_t)16, TG_MIN((size_t)16384, es->cap / (2 * k))) : 0;
    size_t win = nfiles ? (es->cap - (k - 1) * nb) / nfiles : 0;
    /* Halves of whole 4 KiB blocks (in a 4 KiB-aligned scratch) allow O_DIRECT reads; windows
     * too small for that (tiny budgets) read through the page cache. */
    /* Packed keys: pieces of a multiple of 4096 keys start and end on 4 KiB boundaries. */
    size_t align = RUN_ALIGN_KEYS * 8;
    size_t half = win / 2 / align * align;
    /* Pieces of at most MAX_PIECE_KEYS: the merge can start as soon as a small first piece of
     * every file is in (they were up to 80 MB each at 10M nodes), less of the scratch is
     * touched, and the read-ahead still keeps a piece ahead of the merge. */
    half = TG_MIN(half, (size_t)MAX_PIECE_KEYS / align * align);
    int direct = half > 0;
    if (!direct) half = TG_MAX(win / 2, (size_t)1);
    if (direct) win = 2 * half;
    t->pf.words = es->words;
    t->pf.qcap = 2 * TG_MAX(nfiles, (size_t)1);
    t->pf.q = calloc(t->pf.qcap, sizeof *t->pf.q);
    if (!t->pf.q) {
        tree_close(t);
        return tg_err(-ENOMEM, "edge sort: out of memory");
    }
    uint64_t *p = es->scratch;
    for (size_t i = 0; i < nfiles; i++) {
        run_file_t *f = &es->runs[first + i];
        int fd = open(f->path, O_RDONLY | O_CLOEXEC | (direct ? O_DIRECT : 0));
        if (fd < 0 && direct && errno == EINVAL) fd = open(f->path, O_RDONLY | O_CLOEXEC);
        t->leaves[i] = (stream_t){.fd = fd,
                                  .path = f->path,
                                  .kbytes = f->kbytes,
                                  .file_left = f->count,
                                  .half = {p, p + half * w},
                                  .half_cap = half,
                                  .pf = &t->pf};
        p += win * w;
        t->nfiles = i + 1;
        if (fd < 0) {
            int e = errno;
            tree_close(t);
            return tg_err(-e, "%s: cannot open edge-sort run file: %s", f->path, strerror(e));
        }
        if (!direct) posix_fadvise(fd, 0, 0, POSIX_FADV_SEQUENTIAL);
    }
    if (nfiles) {
        pthread_mutex_init(&t->pf.mu, NULL);
        pthread_cond_init(&t->pf.cv, NULL);
        if (pthread_create(&t->pf.th, NULL, pf_main, &t->pf)) {
            pthread_mutex_destroy(&t->pf.mu);
            pthread_cond_destroy(&t->pf.cv);
            tree_close(t);
            return tg_err(-EAGAIN, "edge sort: cannot start the read-ahead thread");
        }
        t->pf_up = 1;
        /* both halves of every leaf start loading now */
        pthread_mutex_lock(&t->pf.mu);
        for (size_t i = 0; i < nfiles; i++) {
            pf_schedule(&t->leaves[i], 0);
            pf_schedule(&t->leaves[i], 1);
        }
        pthread_mutex_unlock(&t->pf.mu);
    }
    if (mem_run)
        t->leaves[nfiles] = (stream_t){.fd = -1, .path = "memory", .buf = es->buf, .n = es->len};
    stream_t *next = t->nodes;
    t->root = k ? tree_build(t->leaves, 0, k, &next) : NULL;
    for (stream_t *s = t->nodes; s < next; s++) {
        s->buf = p;
        s->cap = nb;
        s->fd = -1;
        p += nb * w;
    }
    return 0;
}

/* ---------------------------------------------------------------- sinks */

/* Writes merged keys to a new run file (cascade), dropping repeats if dedup. The output
 * buffer is es->buf: during a cascade the run buffer holds no run. */
typedef struct run_sink {
    int fd, direct;
    run_file_t run;
    size_t n; /* keys in es->buf */
    int have_last;
    uint64_t last[2];
} run_sink_t;

static int run_sink_flush(tg_edgesort_t *es, run_sink_t *s)
{
    if (!s->n) return 0;
    size_t bytes = s->n * 8 * (size_t)es->words;
    int rc = run_write(s->fd, &s->direct, es->buf, bytes, s->run.count * 8 * (uint64_t)es->words,
                       s->run.path);
    if (rc) return rc;
    s->run.count += s->n;
    es->st.bytes_spilled += bytes;
    s->n = 0;
    return 0;
}

static int run_sink_block(tg_edgesort_t *es, run_sink_t *s, const uint64_t *k, size_t n)
{
    size_t w = (size_t)es->words;
    for (size_t i = 0; i < n; i++) {
        const uint64_t *key = k + i * w;
        if (es->dedup && s->have_last && key[0] == s->last[0] && (w == 1 || key[1] == s->last[1]))
            continue;
        s->have_last = 1;
        s->last[0] = key[0];
        s->last[1] = w == 2 ? key[1] : 0;
        memcpy(es->buf + s->n * w, key, 8 * w);
        if (++s->n == es->cap) {
            int rc = run_sink_flush(es, s);
            if (rc) return rc;
        }
    }
    return 0;
}

/* Writes indptr and indices. Keys arrive sorted by (dst, src). */
typedef struct csc_sink {
    tg_edgesort_t *es;
    tg_filew_t *indptr_w, *indices_w;
    int idx64;
    uint64_t cur;     /* node whose in-neighbours are being written */
    uint64_t nout;    /* indices written so far */
    int self_done;    /* cur already has its (cur, cur) entry */
    uint64_t *pbatch; /* indptr values not yet handed to the writer */
    size_t plen;
    void *ibatch; /* indices not yet handed to the writer */
    size_t ilen;
    int have_last;
    uint64_t last[2];
} csc_sink_t;

static int csc_flush(csc_sink_t *s)
{
    int rc = 0;
    if (s->plen) rc = tg_filew_write(s->indptr_w, s->pbatch, s->plen * 8);
    s->plen = 0;
    if (!rc && s->ilen) rc = tg_filew_write(s->indices_w, s->ibatch, s->ilen * (s->idx64 ? 8 : 4));
    s->ilen = 0;
    return rc;
}

static inline int csc_index(csc_sink_t *s, uint64_t v)
{
    if (s->idx64)
        ((uint64_t *)s->ibatch)[s->ilen++] = v;
    else
        ((uint32_t *)s->ibatch)[s->ilen++] = (uint32_t)v;
    s->nout++;
    return s->ilen == OUT_BATCH ? csc_flush(s) : 0;
}

/* Closes the in-lists of every node before dst (adding missing self loops). */
static int csc_advance(csc_sink_t *s, uint64_t dst)
{
    int rc;
    while (s->cur < dst) {
        if (s->es->self_loops && !s->self_done && (rc = csc_index(s, s->cur))) return rc;
        s->pbatch[s->plen++] = s->nout;
        if (s->plen == OUT_BATCH && (rc = csc_flush(s))) return rc;
        s->cur++;
        s->self_done = 0;
    }
    return 0;
}

/* The common case of csc_sink_block (one-word keys, u32 indices, no self loops to add) as a
 * tight loop with the sink's state in locals: the sink thread is the final merge's slower half,
 * and the general loop spends most of its time on per-key branches and calls. */
static int csc_sink_fast(csc_sink_t *s, const uint64_t *k, size_t n)
{
    const unsigned sb = s->es->src_bits;
    const uint64_t smask = (1ull << sb) - 1;
    const int dedup = s->es->dedup;
    uint32_t *ib = s->ibatch;
    uint64_t last = s->last[0], nout = s->nout;
    size_t ilen = s->ilen;
    int have_last = s->have_last, rc = 0;
    for (size_t i = 0; i < n; i++) {
        uint64_t key = k[i];
        if (dedup && have_last && key == last) continue;
        have_last = 1;
        last = key;
        uint64_t dst = key >> sb;
        if (dst != s->cur) { /* may flush both batches */
            s->ilen = ilen;
            s->nout = nout;
            if ((rc = csc_advance(s, dst))) break;
            ilen = s->ilen;
        }
        ib[ilen++] = (uint32_t)(key & smask);
        nout++;
        if (ilen == OUT_BATCH) {
            s->ilen = ilen;
            s->nout = nout;
            if ((rc = csc_flush(s))) break;
            ilen = 0;
        }
    }
    if (!rc) {
        s->ilen = ilen;
        s->nout = nout;
    }
    s->have_last = have_last;
    s->last[0] = last;
    return rc;
}

static int csc_sink_block(csc_sink_t *s, const uint64_t *k, size_t n)
{
    tg_edgesort_t *es = s->es;
    if (es->words == 1 && !s->idx64 && !es->self_loops && es->src_bits < 64)
        return csc_sink_fast(s, k, n);
    const size_t w = (size_t)es->words;
    const unsigned sb = es->src_bits;
    const uint64_t smask = sb >= 64 ? ~0ull : (1ull << sb) - 1;
    int rc;
    for (size_t i = 0; i < n; i++) {
        const uint64_t *key = k + i * w;
        if (es->dedup && s->have_last && key[0] == s->last[0] && (w == 1 || key[1] == s->last[1]))
            continue;
        s->have_last = 1;
        s->last[0] = key[0];
        s->last[1] = w == 2 ? key[1] : 0;
        uint64_t dst = w == 1 ? key[0] >> sb : key[1];
        uint64_t src = w == 1 ? key[0] & smask : key[0];
        if (dst != s->cur && (rc = csc_advance(s, dst))) return rc;
        /* Sources arrive ascending: the self loop goes before the first source above dst. */
        if (es->self_loops && !s->self_done && src >= dst) {
            if (src > dst && (rc = csc_index(s, dst))) return rc;
            s->self_done = 1;
        }
        if ((rc = csc_index(s, src))) return rc;
    }
    return 0;
}

/* ---------------------------------------------------------------- the final merge */

/* The final merge runs on two threads: this one pulls merged blocks out of the tree, a sink
 * thread turns them into indptr/indices (decode, dedup, write, CRC). Each half is about half
 * the work, and by the time of the merge the generator's other work is usually done, so the
 * second core would otherwise idle. Blocks go through a ring of HANDOFF_SLOTS buffers that
 * replace the root's own block. */
#define HANDOFF_SLOTS 3
#define HANDOFF_KEYS (256u << 10)

typedef struct handoff {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    uint64_t *buf[HANDOFF_SLOTS];
    size_t n[HANDOFF_SLOTS];
    int full[HANDOFF_SLOTS];
    size_t head; /* next slot the sink takes */
    int done, err;
    char msg[512];
    csc_sink_t *s;
    int words;
} handoff_t;

static void *sink_main(void *arg)
{
    handoff_t *h = arg;
    pthread_mutex_lock(&h->mu);
    for (;;) {
        while (!h->full[h->head] && !h->done && !h->err)
            pthread_cond_wait(&h->cv, &h->mu);
        if (h->err || !h->full[h->head]) break; /* failed, or done and drained */
        size_t slot = h->head;
        pthread_mutex_unlock(&h->mu);
        int rc = csc_sink_block(h->s, h->buf[slot], h->n[slot]);
        pthread_mutex_lock(&h->mu);
        if (rc && !h->err) {
            h->err = rc;
            snprintf(h->msg, sizeof h->msg, "%s", tg_errmsg());
        }
        h->full[slot] = 0;
        h->head = (slot + 1) % HANDOFF_SLOTS;
        pthread_cond_broadcast(&h->cv);
    }
    pthread_mutex_unlock(&h->mu);
    return NULL;
}

static int merge_pipelined(tg_edgesort_t *es, merge_tree_t *t, csc_sink_t *s, tg_progress_t *pg,
                           uint64_t *done)
{
    handoff_t h = {.s = s, .words = es->words};
    size_t w = (size_t)es->words;
    int rc = 0;
    for (int i = 0; i < HANDOFF_SLOTS && !rc; i++)
        if (!(h.buf[i] = malloc(HANDOFF_KEYS * 8 * w)))
            rc = tg_err(-ENOMEM, "edge sort: out of memory");
    pthread_t th;
    pthread_mutex_init(&h.mu, NULL);
    pthread_cond_init(&h.cv, NULL);
    int started = !rc && pthread_create(&th, NULL, sink_main, &h) == 0;
    if (!rc && !started) rc = tg_err(-EAGAIN, "edge sort: cannot start the merge sink thread");
    stream_t *root = t->root;
    async_node_t an[2];
    stream_t *kids[2] = {root->a, root->b};
    async_start(&an[0], &root->a, es->words);
    async_start(&an[1], &root->b, es->words);
    size_t tail = 0;
    while (!rc) {
        pthread_mutex_lock(&h.mu);
        while (h.full[tail] && !h.err)
            pthread_cond_wait(&h.cv, &h.mu);
        int failed = h.err;
        pthread_mutex_unlock(&h.mu);
        if (failed) break;
        root->buf = h.buf[tail]; /* the root merges straight into the free slot */
        root->cap = HANDOFF_KEYS;
        root->pos = root->n = 0;
        int got = stream_fill(root, es->words);
        if (got <= 0) {
            rc = got;
            break;
        }
        pthread_mutex_lock(&h.mu);
        h.n[tail] = root->n;
        h.full[tail] = 1;
        pthread_cond_broadcast(&h.cv);
        pthread_mutex_unlock(&h.mu);
        root->pos = root->n;
        tail = (tail + 1) % HANDOFF_SLOTS;
        *done += root->n;
        if (pg) tg_progress_update(pg, *done, NULL);
    }
    root->buf = NULL; /* it pointed into a slot */
    root->n = root->pos = 0;
    for (int i = 0; i < 2; i++) { /* before the tree (and its read-ahead) closes */
        async_stop(&an[i]);
        if (kids[i]->a) kids[i]->buf = NULL; /* it pointed into the ring */
    }
    root->a = kids[0];
    root->b = kids[1];
    if (started) {
        pthread_mutex_lock(&h.mu);
        h.done = 1;
        if (rc && !h.err) h.err = rc; /* a merge error: the sink stops without draining */
        pthread_cond_broadcast(&h.cv);
        pthread_mutex_unlock(&h.mu);
        pthread_join(th, NULL);
        if (!rc && h.err) rc = tg_err(h.err, "%s", h.msg);
    }
    pthread_mutex_destroy(&h.mu);
    pthread_cond_destroy(&h.cv);
    for (int i = 0; i < HANDOFF_SLOTS; i++)
        free(h.buf[i]);
    return rc;
}

/* Memory besides the run buffer and scratch: the final merge's handoff slots, the two
 * subtree rings, the CSC sink's batches and the radix histograms. */
static uint64_t side_bytes(int words, int nth)
{
    uint64_t key = 8 * (uint64_t)words;
    return HANDOFF_SLOTS * (uint64_t)HANDOFF_KEYS * key +
           2 * ASYNC_SLOTS * (uint64_t)ASYNC_KEYS * key + 2 * (uint64_t)OUT_BATCH * 8 +
           (uint64_t)nth * HIST_PER_THREAD * 8;
}

/* ---------------------------------------------------------------- driving the merges */

/* Merges run files [first, first + k) into one new run file *out. The inputs are unlinked and
 * their paths freed whatever happens; on failure the output is removed too. */
static int merge_group(tg_edgesort_t *es, size_t first, size_t k, run_file_t *out)
{
    run_sink_t s = {.fd = -1};
    merge_tree_t t;
    int rc = run_new(es, &s.run);
    if (!rc && (rc = open_new_file(s.run.path, &s.fd, &s.direct))) {
        free(s.run.path);
        s.run.path = NULL;
    }
    if (!rc && !(rc = tree_open(es, first, k, 0, &t))) {
        while ((rc = stream_fill(t.root, es->words)) > 0) {
            rc = run_sink_block(es, &s, t.root->buf + t.root->pos * (size_t)es->words,
                                t.root->n - t.root->pos);
            t.root->pos = t.root->n;
            if (rc) break;
        }
        if (!rc) rc = run_sink_flush(es, &s);
        tree_close(&t);
    }
    for (size_t i = 0; i < k; i++) {
        /* Each run is read once; dropping it now frees the disk for the next pass. */
        unlink(es->runs[first + i].path);
        free(es->runs[first + i].path);
        es->runs[first + i].path = NULL;
    }
    if (s.fd >= 0 && close(s.fd) && !rc)
        rc = tg_err(-errno, "%s: close failed: %s", s.run.path, strerror(errno));
    if (rc && s.run.path) {
        unlink(s.run.path);
        free(s.run.path);
        s.run.path = NULL;
    }
    if (!rc) es->st.runs_spilled++;
    *out = s.run;
    return rc;
}

/* Cascade: merges groups of `fanin` run files into longer runs until at most `fanin` remain. */
static int reduce_runs(tg_edgesort_t *es, size_t fanin)
{
    int rc = 0;
    while (es->nruns > fanin && !rc) {
        es->st.merge_passes++;
        run_file_t *next = malloc(es->nruns * sizeof *next);
        if (!next) return tg_err(-ENOMEM, "edge sort: out of memory");
        size_t nn = 0, i = 0;
        while (i < es->nruns) {
            size_t k = TG_MIN(fanin, es->nruns - i);
            if (k == 1 || rc) { /* a lone run moves on as it is; after an error, to cleanup */
                next[nn++] = es->runs[i++];
                continue;
            }
            run_file_t out;
            rc = merge_group(es, i, k, &out);
            if (!rc) next[nn++] = out;
            i += k;
        }
        free(es->runs);
        es->runs_cap = es->nruns;
        es->runs = next;
        es->nruns = nn;
    }
    return rc;
}

int tg_edgesort_finish(tg_edgesort_t *es, tg_filew_t *indptr, tg_filew_t *indices,
                       tg_index_dtype_t index_dtype, uint64_t *num_edges)
{
    if (es->finished) return tg_err(-EINVAL, "edge sort: finish called twice");
    es->finished = 1;
    int wrc = spill_wait(es);
    if (wrc) return wrc;
    if (index_dtype == TG_U32 && es->num_nodes > (1ull << 32))
        return tg_err(-EINVAL, "edge sort: u32 indices cannot address %" PRIu64 " nodes",
                      es->num_nodes);
    int rc = 0;
    tg_progress_t pg;
    uint64_t total = es->st.edges_added, done = 0;
    if (es->progress) tg_progress_begin(&pg, es->progress, total, "edges");
    /* Read windows of at least 256 KiB keep the disk streaming; tiny budgets (tests) go down
     * to 4 KiB windows, and at worst pairwise merges. */
    size_t scratch_bytes = es->cap * 8 * (size_t)es->words;
    size_t fanin = scratch_bytes / (512u << 10);
    fanin = TG_MAX(fanin, TG_MIN((size_t)8, scratch_bytes / (8u << 10)));
    fanin = TG_MAX((size_t)2, TG_MIN(fanin, (size_t)MAX_FANIN));
    int mem_run = 1;
    if (es->nruns + 1 > fanin) {
        /* Too many inputs for one pass: the last run joins the others on disk. */
        if (es->len && (rc = spill(es))) goto out;
        if ((rc = spill_wait(es))) goto out;
        mem_run = 0;
        if ((rc = reduce_runs(es, fanin))) goto out;
    } else {
        radix_sort(es);
        if (es->dedup) dedup_sorted(es);
    }
    double t_merge = tg_now();
    csc_sink_t s = {.es = es, .indptr_w = indptr, .indices_w = indices};
    s.idx64 = index_dtype == TG_U64;
    s.pbatch = malloc(OUT_BATCH * 8);
    s.ibatch = malloc(OUT_BATCH * 8);
    merge_tree_t t = {0};
    if (!s.pbatch || !s.ibatch) {
        rc = tg_err(-ENOMEM, "edge sort: out of memory");
    } else {
        s.pbatch[s.plen++] = 0; /* indptr[0] */
        rc = tree_open(es, 0, es->nruns, mem_run, &t);
    }
    if (!rc && t.root && t.root->a) {
        rc = merge_pipelined(es, &t, &s, es->progress ? &pg : NULL, &done);
    } else {
        /* one input: nothing to merge, the sink is all the work */
        while (!rc && t.root && (rc = stream_fill(t.root, es->words)) > 0) {
            size_t n = t.root->n - t.root->pos;
            rc = csc_sink_block(&s, t.root->buf + t.root->pos * (size_t)es->words, n);
            t.root->pos = t.root->n;
            done += n;
            if (es->progress) tg_progress_update(&pg, done, NULL);
        }
    }
    if (!rc) rc = csc_advance(&s, es->num_nodes);
    if (!rc) rc = csc_flush(&s);
    tree_close(&t);
    for (size_t i = 0; i < es->nruns; i++)
        unlink(es->runs[i].path);
    free(s.pbatch);
    free(s.ibatch);
    if (!rc) *num_edges = s.nout;
    tg_log_debug("edge sort: %zu-way merge of %" PRIu64 " keys in %.2f s",
                 es->nruns + (size_t)mem_run, total, tg_now() - t_merge);
out:
    if (es->progress) {
        /* repeats dropped inside runs never reach the merge: count them as done */
        if (!rc) tg_progress_update(&pg, total, NULL);
        tg_progress_end(&pg);
    }
    es->len = 0;
    return rc;
}
