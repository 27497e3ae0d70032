/* External edge sort: (src, dst) pairs in, CSC arrays (indptr, indices) out, in bounded memory.
 *
 * Edges are packed into sort keys whose order is (dst, src): while 2 * bits(N - 1) <= 64 a key
 * is one u64, dst << src_bits | src, so 10M nodes need only 48 key bits and the radix sort does
 * five 10-bit passes instead of eight byte passes. Larger graphs use two words {lo = src,
 * hi = dst}. Keys collect in a run buffer; when it is full the run is sorted in memory with a
 * parallel LSD radix sort (per-thread histograms over fixed contiguous ranges, so the result
 * never depends on the thread count), deduplicated if asked, and written to a run file in
 * tmp_dir. finish() keeps the last run in memory, reuses the radix scratch as read buffers for
 * the run files, and merges them with a binary heap straight into the indptr/indices writers.
 * When there are more runs than read buffers of a useful size, groups of runs are first merged
 * into longer runs (cascade), so any mem_bytes >= 64 KiB works, only more slowly. */
#include "extsort-impl.h"

#include <fcntl.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define RADIX_MAX_BITS 11
#define MIN_MEM_BYTES (64u << 10)
#define MAX_FANIN 128
#define OUT_BATCH (128u << 10) /* indices per tg_filew_write call in the final merge */

typedef struct run_file {
    char *path;
    uint64_t count; /* keys */
} run_file_t;

struct tg_edgesort {
    uint64_t num_nodes;
    int dedup, self_loops, remove_self_loops;
    char *tmp_dir, *progress;
    int words;         /* u64 words per key: 1 packed, 2 = {src, dst} */
    unsigned src_bits; /* bits of a node id: key = dst << src_bits | src when words == 1 */
    uint64_t *buf;     /* run buffer, cap keys */
    uint64_t *scratch; /* radix scratch, cap keys; merge read buffers in finish() */
    size_t cap, len;   /* keys */
    run_file_t *runs;
    size_t nruns, runs_cap;
    uint64_t seq; /* run file name counter */
    tg_pool_t *pool;
    uint64_t *hist; /* nthreads x 2^RADIX_MAX_BITS counters */
    tg_edgesort_stats_t st;
    uint64_t seen; /* edges offered to add(), for error messages */
    int finished;
};

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
    /* The run buffer and the scratch split mem_bytes evenly. */
    es->cap = (size_t)(mem / 2 / (8 * (uint64_t)es->words));
    es->buf = malloc(es->cap * 8 * (size_t)es->words);
    es->scratch = malloc(es->cap * 8 * (size_t)es->words);
    es->hist = calloc((size_t)nth << RADIX_MAX_BITS, sizeof *es->hist);
    if (!es->buf || !es->scratch || !es->hist) {
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
    return 0;
}

void tg_edgesort_stats(const tg_edgesort_t *es, tg_edgesort_stats_t *st)
{
    *st = es->st;
}

void tg_edgesort_destroy(tg_edgesort_t *es)
{
    if (!es) return;
    for (size_t i = 0; i < es->nruns; i++) {
        unlink(es->runs[i].path);
        free(es->runs[i].path);
    }
    free(es->runs);
    tg_pool_destroy(es->pool);
    free(es->hist);
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

/* Sorts es->buf[0..len) ascending; the sorted keys end up in es->buf (buffers may swap). */
static void radix_sort(tg_edgesort_t *es)
{
    size_t n = es->len;
    if (n < 2) return;
    int nth = tg_pool_nthreads(es->pool);
    /* The digits cover src_bits of the src word, then src_bits of the dst (packed key: one
     * word of 2 * src_bits bits). Equal widths spread the bits over the fewest passes. */
    unsigned total = es->words == 1 ? 2 * es->src_bits : 0;
    unsigned spans[2] = {es->words == 1 ? total : es->src_bits, es->words == 1 ? 0 : es->src_bits};
    for (unsigned word = 0; word < 2; word++) {
        unsigned bits = spans[word];
        if (!bits) continue;
        unsigned passes = (bits + RADIX_MAX_BITS - 1) / RADIX_MAX_BITS;
        unsigned width = (bits + passes - 1) / passes;
        for (unsigned p = 0; p < passes; p++) {
            radix_ctx_t c = {.in = es->buf,
                             .out = es->scratch,
                             .words = es->words,
                             .word = word,
                             .shift = p * width,
                             .mask = (1ull << width) - 1,
                             .nb = (size_t)1 << width,
                             .hist = es->hist};
            memset(es->hist, 0, (size_t)nth * c.nb * sizeof *es->hist);
            tg_pool_for(es->pool, n, radix_hist, &c);
            /* A digit shared by every key orders nothing: skip the scatter. */
            int trivial = 0;
            for (size_t d = 0; d < c.nb && !trivial; d++) {
                uint64_t s = 0;
                for (int t = 0; t < nth; t++)
                    s += es->hist[(size_t)t * c.nb + d];
                if (s == n) trivial = 1;
                if (s) break;
            }
            if (trivial) continue;
            /* Offsets: bucket-major, thread-minor, so thread t's keys of digit d follow those
             * of threads < t, which keeps the pass stable. */
            uint64_t sum = 0;
            for (size_t d = 0; d < c.nb; d++)
                for (int t = 0; t < nth; t++) {
                    uint64_t *h = &es->hist[(size_t)t * c.nb + d];
                    uint64_t x = *h;
                    *h = sum;
                    sum += x;
                }
            tg_pool_for(es->pool, n, radix_scatter, &c);
            uint64_t *t = es->buf;
            es->buf = es->scratch;
            es->scratch = t;
        }
    }
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

static int open_new_file(const char *path, int *fd)
{
    *fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (*fd < 0) {
        int e = errno;
        return tg_err(-e, "%s: cannot create edge-sort run file: %s", path, strerror(e));
    }
    return 0;
}

/* Sorts the run buffer and writes it to a new run file. Run files are scratch data: no fsync. */
static int spill(tg_edgesort_t *es)
{
    radix_sort(es);
    if (es->dedup) dedup_sorted(es);
    run_file_t r;
    int rc = run_new(es, &r), fd = -1;
    if (rc) return rc;
    if ((rc = open_new_file(r.path, &fd))) {
        free(r.path);
        return rc;
    }
    size_t bytes = es->len * 8 * (size_t)es->words;
    rc = tg_pwrite_full(fd, es->buf, bytes, 0, r.path);
    if (close(fd) && !rc) rc = tg_err(-errno, "%s: close failed: %s", r.path, strerror(errno));
    if (rc) {
        unlink(r.path);
        free(r.path);
        return rc;
    }
    r.count = es->len;
    es->st.bytes_spilled += bytes;
    es->len = 0;
    return run_push(es, r);
}

int tg_edgesort_add(tg_edgesort_t *es, const uint64_t *src, const uint64_t *dst, size_t n)
{
    if (es->finished) return tg_err(-EINVAL, "edge sort: add after finish");
    const uint64_t N = es->num_nodes;
    const unsigned sb = es->src_bits;
    for (size_t i = 0; i < n; i++) {
        uint64_t s = src[i], d = dst[i];
        if (s >= N || d >= N) {
            uint64_t bad = s >= N ? s : d;
            return tg_err(-EINVAL,
                          "edge %" PRIu64 " (%" PRIu64 " -> %" PRIu64 "): node id %" PRIu64
                          " is out of range (num_nodes = %" PRIu64 ", ids are 0..%" PRIu64 ")",
                          es->seen + i, s, d, bad, N, N - 1);
        }
        if (s == d && es->remove_self_loops) continue;
        if (es->len == es->cap) {
            int rc = spill(es);
            if (rc) return rc;
        }
        if (es->words == 1) {
            es->buf[es->len++] = d << sb | s;
        } else {
            es->buf[2 * es->len] = s;
            es->buf[2 * es->len + 1] = d;
            es->len++;
        }
        es->st.edges_added++;
    }
    es->seen += n;
    return 0;
}

/* ---------------------------------------------------------------- merging */

/* A sorted input: a run file read through a window of the scratch buffer, or the in-memory
 * last run. */
typedef struct reader {
    int fd; /* -1 for the in-memory run */
    const char *path;
    uint64_t file_off, file_left; /* bytes / keys still on disk */
    uint64_t *buf;
    size_t cap, pos, n; /* keys */
} reader_t;

typedef struct hent {
    uint64_t hi, lo; /* key (hi = 0 for packed keys) */
    uint32_t r;      /* reader */
} hent_t;

static inline int hless(const hent_t *a, const hent_t *b)
{
    return a->hi < b->hi || (a->hi == b->hi && a->lo < b->lo);
}

static void sift_down(hent_t *h, size_t n, size_t i)
{
    hent_t x = h[i];
    for (;;) {
        size_t c = 2 * i + 1;
        if (c >= n) break;
        if (c + 1 < n && hless(&h[c + 1], &h[c])) c++;
        if (!hless(&h[c], &x)) break;
        h[i] = h[c];
        i = c;
    }
    h[i] = x;
}

/* Next key of r into e; returns 1, 0 at the end, or an error. */
static int reader_next(reader_t *r, int words, hent_t *e)
{
    if (r->pos == r->n) {
        if (r->fd < 0 || r->file_left == 0) return 0;
        size_t n = (size_t)TG_MIN((uint64_t)r->cap, r->file_left);
        int rc = tg_pread_full(r->fd, r->buf, n * 8 * (size_t)words, r->file_off, r->path);
        if (rc) return rc;
        r->file_off += n * 8 * (uint64_t)words;
        r->file_left -= n;
        r->pos = 0;
        r->n = n;
    }
    if (words == 1) {
        e->hi = 0;
        e->lo = r->buf[r->pos];
    } else {
        e->lo = r->buf[2 * r->pos];
        e->hi = r->buf[2 * r->pos + 1];
    }
    r->pos++;
    return 1;
}

/* Where merged keys go: a new run file (cascade) or the CSC writers (final). */
typedef struct sink {
    int (*put)(struct sink *s, uint64_t hi, uint64_t lo);
    /* run file sink */
    tg_edgesort_t *es;
    int fd;
    run_file_t run;
    size_t n;
    int have_last;
    uint64_t last_hi, last_lo;
    /* CSC sink */
    tg_filew_t *indptr_w, *indices_w;
    int idx64;
    uint64_t cur;     /* node whose in-neighbours are being written */
    uint64_t nout;    /* indices written so far */
    int self_done;    /* cur already has its (cur, cur) entry */
    uint64_t *pbatch; /* indptr values not yet handed to the writer */
    size_t plen;
    void *ibatch; /* indices not yet handed to the writer */
    size_t ilen;
} sink_t;

static int run_sink_put(sink_t *s, uint64_t hi, uint64_t lo)
{
    tg_edgesort_t *es = s->es;
    if (es->dedup && s->have_last && hi == s->last_hi && lo == s->last_lo) return 0;
    s->have_last = 1;
    s->last_hi = hi;
    s->last_lo = lo;
    if (es->words == 1) {
        es->buf[s->n++] = lo;
    } else {
        es->buf[2 * s->n] = lo;
        es->buf[2 * s->n + 1] = hi;
        s->n++;
    }
    if (s->n == es->cap) {
        size_t bytes = s->n * 8 * (size_t)es->words;
        int rc = tg_pwrite_full(s->fd, es->buf, bytes, s->run.count * 8 * (uint64_t)es->words,
                                s->run.path);
        if (rc) return rc;
        s->run.count += s->n;
        es->st.bytes_spilled += bytes;
        s->n = 0;
    }
    return 0;
}

static int csc_flush(sink_t *s)
{
    int rc = 0;
    if (s->plen) rc = tg_filew_write(s->indptr_w, s->pbatch, s->plen * 8);
    s->plen = 0;
    if (!rc && s->ilen) rc = tg_filew_write(s->indices_w, s->ibatch, s->ilen * (s->idx64 ? 8 : 4));
    s->ilen = 0;
    return rc;
}

static inline int csc_index(sink_t *s, uint64_t v)
{
    if (s->idx64)
        ((uint64_t *)s->ibatch)[s->ilen++] = v;
    else
        ((uint32_t *)s->ibatch)[s->ilen++] = (uint32_t)v;
    s->nout++;
    return s->ilen == OUT_BATCH ? csc_flush(s) : 0;
}

/* Closes the in-lists of every node before dst (adding missing self loops). */
static int csc_advance(sink_t *s, uint64_t dst)
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

static int csc_sink_put(sink_t *s, uint64_t hi, uint64_t lo)
{
    tg_edgesort_t *es = s->es;
    if (es->dedup && s->have_last && hi == s->last_hi && lo == s->last_lo) return 0;
    s->have_last = 1;
    s->last_hi = hi;
    s->last_lo = lo;
    uint64_t dst, src;
    if (es->words == 1) {
        dst = lo >> es->src_bits;
        src = lo & ((1ull << es->src_bits) - 1);
    } else {
        dst = hi;
        src = lo;
    }
    int rc;
    if (dst != s->cur && (rc = csc_advance(s, dst))) return rc;
    /* Sources arrive ascending: the self loop goes before the first source above dst. */
    if (es->self_loops && !s->self_done && src >= dst) {
        if (src > dst && (rc = csc_index(s, dst))) return rc;
        s->self_done = 1;
    }
    return csc_index(s, src);
}

/* Merges the readers into the sink. */
static int merge(tg_edgesort_t *es, reader_t *rd, size_t k, sink_t *s, tg_progress_t *pg,
                 uint64_t *pdone)
{
    hent_t *h = malloc((k ? k : 1) * sizeof *h);
    if (!h) return tg_err(-ENOMEM, "edge sort: out of memory");
    size_t n = 0;
    int rc = 0;
    for (size_t i = 0; i < k; i++) {
        h[n].r = (uint32_t)i;
        rc = reader_next(&rd[i], es->words, &h[n]);
        if (rc < 0) goto out;
        if (rc) n++;
    }
    rc = 0;
    for (size_t i = n / 2; i-- > 0;)
        sift_down(h, n, i);
    uint64_t count = 0;
    while (n > 0) {
        if ((rc = s->put(s, h[0].hi, h[0].lo))) goto out;
        uint32_t r = h[0].r;
        int got = reader_next(&rd[r], es->words, &h[0]);
        if (got < 0) {
            rc = got;
            goto out;
        }
        h[0].r = r;
        if (!got) h[0] = h[--n];
        if (n > 1) sift_down(h, n, 0);
        count++;
        if (pg && (count & 0xfffff) == 0) tg_progress_update(pg, *pdone + count, NULL);
    }
    if (pdone) *pdone += count;
out:
    free(h);
    return rc;
}

/* Opens run files [first, first + k) as readers over equal windows of es->scratch; the
 * in-memory run, when mem_run is set, is reader k. */
static int open_readers(tg_edgesort_t *es, size_t first, size_t k, int mem_run, reader_t *rd)
{
    size_t per = es->cap / TG_MAX(k, 1); /* keys per window */
    for (size_t i = 0; i < k; i++) {
        run_file_t *f = &es->runs[first + i];
        rd[i] = (reader_t){.fd = open(f->path, O_RDONLY | O_CLOEXEC),
                           .path = f->path,
                           .file_left = f->count,
                           .buf = es->scratch + i * per * (size_t)es->words,
                           .cap = per};
        if (rd[i].fd < 0) {
            int e = errno;
            for (size_t j = 0; j < i; j++)
                close(rd[j].fd);
            return tg_err(-e, "%s: cannot open edge-sort run file: %s", f->path, strerror(e));
        }
        posix_fadvise(rd[i].fd, 0, 0, POSIX_FADV_SEQUENTIAL);
    }
    if (mem_run) rd[k] = (reader_t){.fd = -1, .path = "memory", .buf = es->buf, .n = es->len};
    return 0;
}

static void close_readers(tg_edgesort_t *es, size_t first, size_t k, reader_t *rd)
{
    for (size_t i = 0; i < k; i++) {
        close(rd[i].fd);
        /* Each run is read once; dropping it early frees the disk for the next pass. */
        unlink(es->runs[first + i].path);
    }
}

/* Merges run files [first, first + k) into one new run file *out. The inputs are unlinked and
 * their paths freed whatever happens; on failure the output is removed too. */
static int merge_group(tg_edgesort_t *es, size_t first, size_t k, reader_t *rd, run_file_t *out)
{
    sink_t s = {.put = run_sink_put, .es = es, .fd = -1};
    int rc = run_new(es, &s.run);
    if (!rc && (rc = open_new_file(s.run.path, &s.fd))) {
        free(s.run.path);
        s.run.path = NULL;
    }
    if (!rc && !(rc = open_readers(es, first, k, 0, rd))) {
        rc = merge(es, rd, k, &s, NULL, NULL);
        if (!rc && s.n) {
            /* the tail of the output that did not fill the buffer */
            size_t bytes = s.n * 8 * (size_t)es->words;
            rc = tg_pwrite_full(s.fd, es->buf, bytes, s.run.count * 8 * (uint64_t)es->words,
                                s.run.path);
            s.run.count += s.n;
            es->st.bytes_spilled += bytes;
        }
        for (size_t i = 0; i < k; i++)
            close(rd[i].fd);
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
    reader_t *rd = malloc(fanin * sizeof *rd);
    if (!rd) return tg_err(-ENOMEM, "edge sort: out of memory");
    int rc = 0;
    while (es->nruns > fanin && !rc) {
        es->st.merge_passes++;
        run_file_t *next = malloc(es->nruns * sizeof *next);
        if (!next) {
            rc = tg_err(-ENOMEM, "edge sort: out of memory");
            break;
        }
        size_t nn = 0, i = 0;
        while (i < es->nruns) {
            size_t k = TG_MIN(fanin, es->nruns - i);
            if (k == 1 || rc) { /* a lone run moves on as it is; after an error, to cleanup */
                next[nn++] = es->runs[i++];
                continue;
            }
            run_file_t out;
            rc = merge_group(es, i, k, rd, &out);
            if (!rc) next[nn++] = out;
            i += k;
        }
        free(es->runs);
        es->runs_cap = es->nruns;
        es->runs = next;
        es->nruns = nn;
    }
    free(rd);
    return rc;
}

int tg_edgesort_finish(tg_edgesort_t *es, tg_filew_t *indptr, tg_filew_t *indices,
                       tg_index_dtype_t index_dtype, uint64_t *num_edges)
{
    if (es->finished) return tg_err(-EINVAL, "edge sort: finish called twice");
    es->finished = 1;
    if (index_dtype == TG_U32 && es->num_nodes > (1ull << 32))
        return tg_err(-EINVAL, "edge sort: u32 indices cannot address %" PRIu64 " nodes",
                      es->num_nodes);
    int rc = 0;
    tg_progress_t pg, *pgp = NULL;
    uint64_t total = es->st.edges_added, done = 0;
    if (es->progress) {
        tg_progress_begin(&pg, es->progress, total, "edges");
        pgp = &pg;
    }
    /* Read windows of at least 256 KiB keep the disk streaming; tiny budgets (tests) go down
     * to 4 KiB windows, and at worst pairwise merges. */
    size_t scratch_bytes = es->cap * 8 * (size_t)es->words;
    size_t fanin = scratch_bytes / (256u << 10);
    fanin = TG_MAX(fanin, TG_MIN((size_t)8, scratch_bytes / (4u << 10)));
    fanin = TG_MAX((size_t)2, TG_MIN(fanin, (size_t)MAX_FANIN));
    int mem_run = 1;
    if (es->nruns + 1 > fanin) {
        /* Too many inputs for one pass: the last run joins the others on disk. */
        if (es->len && (rc = spill(es))) goto out;
        mem_run = 0;
        if ((rc = reduce_runs(es, fanin))) goto out;
    } else {
        radix_sort(es);
        if (es->dedup) dedup_sorted(es);
    }

    sink_t s = {.put = csc_sink_put, .es = es, .indptr_w = indptr, .indices_w = indices};
    s.idx64 = index_dtype == TG_U64;
    s.pbatch = malloc(OUT_BATCH * 8);
    s.ibatch = malloc(OUT_BATCH * 8);
    reader_t *rd = malloc((es->nruns + 1) * sizeof *rd);
    if (!s.pbatch || !s.ibatch || !rd) {
        free(s.pbatch);
        free(s.ibatch);
        free(rd);
        rc = tg_err(-ENOMEM, "edge sort: out of memory");
        goto out;
    }
    s.pbatch[s.plen++] = 0; /* indptr[0] */
    size_t k = es->nruns;
    rc = open_readers(es, 0, k, mem_run, rd);
    if (!rc) {
        rc = merge(es, rd, k + (size_t)mem_run, &s, pgp, &done);
        close_readers(es, 0, k, rd);
    }
    if (!rc) rc = csc_advance(&s, es->num_nodes);
    if (!rc) rc = csc_flush(&s);
    free(s.pbatch);
    free(s.ibatch);
    free(rd);
    if (!rc) *num_edges = s.nout;
out:
    if (pgp) tg_progress_end(pgp);
    es->len = 0;
    return rc;
}
