/* Read queues: plan requests into aligned (merged) disk reads, run them through io_uring or
 * pread, copy each request's bytes out of the staging slot, hand completions back.
 *
 * Vocabulary: a *request* is what the caller asked for (any byte range); a *span* is one aligned
 * disk read of at most max_read bytes into one staging slot; a *piece* is the part of a request
 * that a span serves (a request larger than max_read has several pieces, a span that merged
 * several requests has several pieces). A *batch* is the plan of one tg_io_submit call; it lives
 * until its last span completes. */
#include "io-impl.h"

#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>

#define DEFAULT_DEPTH 64u
#define MAX_DEPTH 4096u
#define DEFAULT_MAX_READ ((size_t)128 << 10)
#define MAX_MAX_READ ((size_t)64 << 20)
/* EAGAIN/EINTR from the device are retried this many times per span before they count as the
 * read's failure (an injected EAGAIN fault would otherwise loop forever). */
#define MAX_RETRIES 16

typedef struct batch batch_t;

typedef struct span {
    tg_io_file_t *file;
    uint64_t off;             /* aligned file offset of the read */
    uint32_t len;             /* aligned length, <= max_read */
    uint32_t done;            /* bytes already in the slot (short reads are continued) */
    uint32_t need;            /* bytes of the slot that pieces use: a read may stop there */
    uint32_t piece0, npieces; /* its pieces: batch->pieces[piece0 .. piece0 + npieces) */
    int32_t slot;             /* staging slot while issued, -1 before */
    char *target;             /* where the read lands: the slot, or (no copy) the request's dst */
    int fault;                /* positive errno of an injected failure riding on a NOP */
    int fault_eof;            /* an injected short read of 0 bytes rides on a NOP */
    int retries;
    batch_t *batch;
} span_t;

typedef struct piece {
    tg_io_req_t *req;
    uint64_t dst_off;  /* where in req->dst the piece goes */
    uint32_t span_off; /* where in the span's slot it comes from */
    uint32_t len;
} piece_t;

struct batch {
    batch_t *prev, *next; /* the queue's list of unfinished batches, in submit order */
    span_t *spans;
    piece_t *pieces;
    size_t nspans;
    size_t next_issue; /* spans before it have been issued */
    size_t left;       /* spans not yet finished */
    uint64_t reserved; /* bytes reserved against the budget for this batch */
};

struct tg_io {
    struct io_uring ring;
    int uring; /* 1 = io_uring backend, 0 = pread */
    int fixed; /* staging registered with the ring: READ_FIXED */
    unsigned depth, flags;
    size_t max_read;
    char *staging; /* depth slots of max_read bytes, page aligned */
    size_t staging_bytes;
    int32_t *free_slots;
    unsigned nfree;
    unsigned in_kernel;   /* spans handed to the ring whose completion has not been seen */
    double depth_t;       /* when in_kernel last changed (tg_now), for the depth integral */
    batch_t *head, *tail; /* unfinished batches */
    batch_t *issue;       /* first batch that still has spans to issue */
    tg_io_req_t *done_head, *done_tail; /* completed, not yet reaped */
    size_t ndone;
    size_t outstanding; /* submitted and not yet returned to the caller */
    tg_budget_t *budget;
    uint64_t reserved; /* staging bytes reserved at create */
    tg_io_stats_t own, *stats;
    /* The first failure not yet reported, with the message that explains it. */
    tg_io_req_t *err_req;
    char err_msg[640];
    int broken; /* the ring failed: only destroy is safe */
};

static atomic_int warned_ring;

void tg_io_warn_ring_fallback(int err)
{
    if (atomic_exchange(&warned_ring, 1) == 0)
        tg_log_warn("io_uring is unavailable (%s); reading with pread, one request at a time",
                    strerror(-err));
    else
        tg_log_debug("io_uring is unavailable (%s); reading with pread", strerror(-err));
}

int tg_io_ring_init(struct io_uring *ring, unsigned entries)
{
    int fault = tg_io_fault_check_op(TG_IO_FAULT_RING, NULL);
    if (fault) return -fault;
    /* COOP_TASKRUN: completions are delivered when we enter the kernel anyway (we wait in
     * io_uring_submit_and_wait), so the kernel need not interrupt the thread for each one.
     * Kernels before 5.19 reject the flags: retry without. */
    struct io_uring_params p;
    memset(&p, 0, sizeof p);
    p.flags = IORING_SETUP_COOP_TASKRUN | IORING_SETUP_TASKRUN_FLAG;
    int rc = io_uring_queue_init_params(entries, ring, &p);
    if (rc == -EINVAL) {
        memset(&p, 0, sizeof p);
        rc = io_uring_queue_init_params(entries, ring, &p);
    }
    return rc;
}

/* ---------------------------------------------------------------- small helpers */

static inline void count(_Atomic uint64_t *c, uint64_t v)
{
    atomic_fetch_add_explicit(c, v, memory_order_relaxed);
}

static inline uint64_t ns_since(double t0)
{
    double d = tg_now() - t0;
    return d > 0 ? (uint64_t)(d * 1e9) : 0;
}

/* Called just before in_kernel changes: the time since the last change counts with the depth
 * it had (depth_ns_, busy_ns_ of tg_io_stats_t). One clock read per issue and per completion,
 * small beside a disk read. */
static void depth_tick(tg_io_t *io)
{
    double now = tg_now();
    if (io->in_kernel > 0 && now > io->depth_t) {
        uint64_t ns = (uint64_t)((now - io->depth_t) * 1e9);
        count(&io->stats->depth_ns_, ns * io->in_kernel);
        count(&io->stats->busy_ns_, ns);
    }
    io->depth_t = now;
}

static inline char *slot_buf(tg_io_t *io, int32_t slot)
{
    return io->staging + (size_t)slot * io->max_read;
}

static void push_done(tg_io_t *io, tg_io_req_t *r)
{
    r->next_ = NULL;
    if (io->done_tail)
        io->done_tail->next_ = r;
    else
        io->done_head = r;
    io->done_tail = r;
    io->ndone++;
}

static tg_io_req_t *pop_done(tg_io_t *io)
{
    tg_io_req_t *r = io->done_head;
    io->done_head = r->next_;
    if (!io->done_head) io->done_tail = NULL;
    r->next_ = NULL;
    io->ndone--;
    return r;
}

/* Marks r failed with code; the first failure of the queue keeps its detailed message until it
 * is reported. Later failures of the same request keep the first code. */
static void req_fail(tg_io_t *io, tg_io_req_t *r, int code, const char *fmt, ...) TG_PRINTF(4, 5);
static void req_fail(tg_io_t *io, tg_io_req_t *r, int code, const char *fmt, ...)
{
    if (r->res < 0) return;
    r->res = code;
    if (io->err_req) return;
    io->err_req = r;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(io->err_msg, sizeof io->err_msg, fmt, ap);
    va_end(ap);
}

/* Failures among the requests handed back by one reap or wait. */
typedef struct failures {
    tg_io_req_t *first; /* the first failed request handed back */
    int stored;         /* the request holding io->err_msg was among them */
} failures_t;

static void note(tg_io_t *io, failures_t *f, tg_io_req_t *r)
{
    if (r->res >= 0) return;
    if (!f->first) f->first = r;
    if (r == io->err_req) f->stored = 1;
}

/* Sets the thread's message for the noted failures and forgets the stored message if its
 * request was handed back (the caller may reuse the request structs). Returns the reported
 * code, or 0 when nothing failed. */
static int report(tg_io_t *io, const failures_t *f)
{
    if (f->stored) {
        int code = io->err_req->res;
        io->err_req = NULL;
        return tg_err(code, "%s", io->err_msg);
    }
    if (f->first)
        /* Its detailed message lost to an earlier failure; this one still names the file and
         * the offset. */
        return tg_err(f->first->res, "%s: read of %zu bytes at offset %llu failed: %s",
                      f->first->file->path, f->first->len, (unsigned long long)f->first->off,
                      strerror(-f->first->res));
    return 0;
}

/* ---------------------------------------------------------------- planning */

typedef struct ent {
    tg_io_file_t *file;
    uint64_t ab, ae; /* the request's range widened to aligned blocks */
    size_t idx;
} ent_t;

static int cmp_ent(const void *pa, const void *pb)
{
    const ent_t *a = pa, *b = pb;
    if (a->file != b->file) return (uintptr_t)a->file < (uintptr_t)b->file ? -1 : 1;
    if (a->ab != b->ab) return a->ab < b->ab ? -1 : 1;
    if (a->ae != b->ae) return a->ae < b->ae ? -1 : 1;
    return a->idx < b->idx ? -1 : a->idx > b->idx;
}

static inline uint64_t align_down(uint64_t x, unsigned a)
{
    return x & ~(uint64_t)(a - 1);
}

static inline uint64_t align_up(uint64_t x, unsigned a)
{
    return (x + a - 1) & ~(uint64_t)(a - 1);
}

static span_t *new_span(batch_t *b, size_t *npieces, tg_io_file_t *f, uint64_t off, uint64_t len)
{
    span_t *s = &b->spans[b->nspans++];
    memset(s, 0, sizeof *s);
    s->file = f;
    s->off = off;
    s->len = (uint32_t)len;
    s->piece0 = (uint32_t)*npieces;
    s->slot = -1;
    s->batch = b;
    return s;
}

/* Pieces of one span are contiguous because a span only ever receives pieces while it is the
 * most recently created one. */
static void add_piece(batch_t *b, size_t *npieces, span_t *s, tg_io_req_t *r, uint64_t lo,
                      uint64_t hi)
{
    piece_t *p = &b->pieces[(*npieces)++];
    p->req = r;
    p->dst_off = lo - r->off;
    p->span_off = (uint32_t)(lo - s->off);
    p->len = (uint32_t)(hi - lo);
    s->need = TG_MAX(s->need, p->span_off + p->len);
    s->npieces++;
    r->pending_++;
}

/* Turns the requests (in the order of ents) into spans. With merging, a request joins the
 * current span when it starts inside or right after it (same or adjacent aligned block) and the
 * span stays within max_read; otherwise it starts a new span. A request longer than max_read is
 * cut into max_read chunks, the last of which may absorb the requests that follow. */
static void plan(tg_io_t *io, batch_t *b, tg_io_req_t *reqs, const ent_t *ents, size_t n)
{
    int merge = !(io->flags & TG_IO_NO_MERGE);
    size_t npieces = 0;
    span_t *cur = NULL;
    for (size_t i = 0; i < n; i++) {
        const ent_t *e = &ents[i];
        tg_io_req_t *r = &reqs[e->idx];
        uint64_t end = r->off + r->len;
        if (merge && cur && cur->file == e->file && e->ab >= cur->off &&
            e->ab <= cur->off + cur->len && e->ae - cur->off <= io->max_read) {
            if (e->ae - cur->off > cur->len) cur->len = (uint32_t)(e->ae - cur->off);
            add_piece(b, &npieces, cur, r, r->off, end);
            continue;
        }
        for (uint64_t s = e->ab; s < e->ae; s += io->max_read) {
            uint64_t se = TG_MIN(s + io->max_read, e->ae);
            cur = new_span(b, &npieces, e->file, s, se - s);
            add_piece(b, &npieces, cur, r, TG_MAX(r->off, s), TG_MIN(end, se));
        }
    }
}

/* ---------------------------------------------------------------- completing spans */

static void batch_free(tg_io_t *io, batch_t *b)
{
    if (b->prev)
        b->prev->next = b->next;
    else
        io->head = b->next;
    if (b->next)
        b->next->prev = b->prev;
    else
        io->tail = b->prev;
    if (io->issue == b) io->issue = b->next;
    if (io->budget && b->reserved) tg_budget_release(io->budget, b->reserved);
    free(b);
}

/* Why a read stopped before `need` (the end of the request it serves), as text for a message:
 * the file is shorter now (truncated under the run), or it still holds the bytes and the read
 * came back short. */
static const char *short_why(const tg_io_file_t *f, uint64_t need, char *buf, size_t len)
{
    struct stat st;
    if (fstat(f->fd, &st))
        snprintf(buf, len, "the file's size is unknown (%llu bytes when opened)",
                 (unsigned long long)f->size);
    else if ((uint64_t)st.st_size >= need)
        snprintf(buf, len,
                 "the read returned fewer bytes though the file is %llu bytes long "
                 "(a short read)",
                 (unsigned long long)st.st_size);
    else
        snprintf(buf, len, "the file is %llu bytes long (%llu when opened: truncated?)",
                 (unsigned long long)st.st_size, (unsigned long long)f->size);
    return buf;
}

/* The span is over: err < 0 failed it, else its first s->done bytes are valid. Copies every
 * piece out (or fails its request), completes requests whose last piece this was, frees the
 * slot and, with the last span, the batch. */
static void span_finish(tg_io_t *io, span_t *s, int err)
{
    const char *buf = slot_buf(io, s->slot);
    int copy = s->target == buf; /* else the bytes already are in dst */
    char why[160];
    batch_t *b = s->batch;
    const char *path = s->file->path;
    for (uint32_t i = 0; i < s->npieces; i++) {
        piece_t *p = &b->pieces[s->piece0 + i];
        tg_io_req_t *r = p->req;
        if (err < 0)
            req_fail(io, r, err,
                     "%s: read error at offset %llu (%u-byte disk read serving the request for "
                     "%zu bytes at offset %llu): %s",
                     path, (unsigned long long)(s->off + s->done), s->len - s->done, r->len,
                     (unsigned long long)r->off, strerror(-err));
        else if ((uint64_t)p->span_off + p->len > s->done)
            req_fail(io, r, -EIO,
                     "%s: unexpected end of file at offset %llu: the request for %zu bytes at "
                     "offset %llu needs bytes up to offset %llu, but %s",
                     path, (unsigned long long)(s->off + s->done), r->len,
                     (unsigned long long)r->off, (unsigned long long)(r->off + r->len),
                     short_why(s->file, r->off + r->len, why, sizeof why));
        else if (r->res == 0 && copy)
            memcpy((char *)r->dst + p->dst_off, buf + p->span_off, p->len);
        if (--r->pending_ == 0) push_done(io, r);
    }
    io->free_slots[io->nfree++] = s->slot;
    s->slot = -1;
    if (--b->left == 0) batch_free(io, b);
}

/* Accounts one read result of span s. Returns 1 if the span needs another read (retry, or the
 * rest after a short read), 0 once it is finished. */
static int span_result(tg_io_t *io, span_t *s, int res)
{
    if ((res == -EAGAIN || res == -EINTR) && ++s->retries <= MAX_RETRIES) return 1;
    if (res < 0) {
        span_finish(io, s, res);
        return 0;
    }
    count(&io->stats->read_bytes_, (uint64_t)res);
    s->done += (uint32_t)res;
    /* A short read is either the end of the file or a partial transfer. With O_DIRECT a
     * partial transfer is always a whole number of blocks, so an unaligned count means EOF;
     * 0 means EOF for both. Otherwise read the rest - but only if a piece needs it: the last
     * block of a file whose size is not a multiple of the alignment comes back short, and
     * asking again just to hear "EOF" would cost a read. */
    if (s->done < s->need && res > 0 && (!s->file->direct || res % s->file->align == 0)) return 1;
    span_finish(io, s, 0);
    return 0;
}

/* The next queued span, with a free staging slot assigned; NULL if none is queued or every
 * slot is busy. */
static span_t *next_span(tg_io_t *io)
{
    batch_t *b = io->issue;
    if (!b || io->nfree == 0) return NULL;
    span_t *s = &b->spans[b->next_issue++];
    if (b->next_issue == b->nspans) io->issue = b->next;
    s->slot = io->free_slots[--io->nfree];
    s->target = slot_buf(io, s->slot);
    /* A span that serves one piece covering all of it, bound for a suitably aligned dst (rows
     * of a multiple of the alignment, e.g. 128 f32 = 512 bytes, into an aligned buffer), is read
     * straight into dst: one memory copy fewer. The slot stays reserved all the same, which
     * keeps the depth accounting in one place. */
    if (s->npieces == 1) {
        const piece_t *p = &b->pieces[s->piece0];
        char *d = (char *)p->req->dst + p->dst_off;
        if (p->span_off == 0 && p->len == s->len && ((uintptr_t)d & (s->file->align - 1)) == 0)
            s->target = d;
    }
    return s;
}

/* ---------------------------------------------------------------- io_uring backend */

/* The bytes the read of n at off may return under the fault rules (n without a fault; fewer
 * for a short-read fault, whole blocks under O_DIRECT as a real partial transfer would be) and
 * in *fault the positive errno of a failing one, else 0. */
static uint64_t fault_allowed(const span_t *s, uint64_t off, uint64_t n, int *fault)
{
    uint64_t allowed = n;
    *fault = tg_io_fault_check_read(s->file->path, off, &allowed);
    if (allowed < n && s->file->direct) allowed = align_down(allowed, s->file->align);
    return allowed;
}

static void uring_issue(tg_io_t *io, span_t *s)
{
    struct io_uring_sqe *sqe = io_uring_get_sqe(&io->ring);
    if (!sqe) {
        /* Cannot happen while the SQ has depth entries and at most depth spans are out; if it
         * does, push what is queued to make room. */
        io_uring_submit(&io->ring);
        sqe = io_uring_get_sqe(&io->ring);
    }
    char *buf = s->target + s->done;
    unsigned n = s->len - s->done;
    uint64_t off = s->off + s->done;
    count(&io->stats->requests_, 1);
    if (!sqe) {
        /* Still no room: fail this read rather than lose it. */
        span_finish(io, s, -EBUSY);
        return;
    }
    uint64_t allowed = fault_allowed(s, off, n, &s->fault);
    s->fault_eof = !s->fault && allowed == 0;
    if (s->fault || s->fault_eof)
        io_uring_prep_nop(sqe);
    else if (io->fixed && s->target == slot_buf(io, s->slot))
        io_uring_prep_read_fixed(sqe, s->file->fd, buf, (unsigned)allowed, off, 0);
    else
        io_uring_prep_read(sqe, s->file->fd, buf, (unsigned)allowed, off);
    io_uring_sqe_set_data(sqe, s);
    depth_tick(io);
    if (io->in_kernel++ == 0) tg_io_stats_edge(io->stats, 1);
}

/* Processes every completion already posted, without blocking. */
static void uring_drain(tg_io_t *io)
{
    struct io_uring_cqe *cqes[64];
    unsigned n;
    while ((n = io_uring_peek_batch_cqe(&io->ring, cqes, 64)) > 0) {
        for (unsigned i = 0; i < n; i++) {
            span_t *s = io_uring_cqe_get_data(cqes[i]);
            int res = cqes[i]->res;
            depth_tick(io);
            if (--io->in_kernel == 0) tg_io_stats_edge(io->stats, 0);
            if (s->fault) {
                res = -s->fault;
                s->fault = 0;
            } else if (s->fault_eof) {
                res = 0;
                s->fault_eof = 0;
            }
            if (span_result(io, s, res)) uring_issue(io, s);
        }
        io_uring_cq_advance(&io->ring, n);
    }
}

static int ring_failed(tg_io_t *io, int rc, const char *what)
{
    io->broken = 1;
    return tg_err(rc, "io_uring %s failed: %s (the read queue cannot continue)", what,
                  strerror(-rc));
}

/* Prepares SQEs for queued spans while slots are free (no syscall). */
static void uring_issue_queued(tg_io_t *io)
{
    span_t *s;
    while ((s = next_span(io)))
        uring_issue(io, s);
}

/* Hands prepared SQEs to the kernel. Only used where we return to the caller: before blocking,
 * io_uring_submit_and_wait submits and waits in one syscall. */
static int uring_submit(tg_io_t *io)
{
    if (io_uring_sq_ready(&io->ring) == 0) return 0;
    int rc = io_uring_submit(&io->ring);
    /* EAGAIN/EBUSY: the kernel is short of resources or completions; the SQEs stay queued and
     * the next io_uring_submit_and_wait submits them. */
    if (rc < 0 && rc != -EAGAIN && rc != -EBUSY && rc != -EINTR)
        return ring_failed(io, rc, "submit");
    return 0;
}

/* ---------------------------------------------------------------- pread backend */

static void pread_span(tg_io_t *io, span_t *s)
{
    for (;;) {
        char *buf = s->target + s->done;
        size_t n = s->len - s->done;
        uint64_t off = s->off + s->done;
        count(&io->stats->requests_, 1);
        int fault;
        uint64_t allowed = fault_allowed(s, off, n, &fault);
        int res = 0;
        double t0 = tg_now();
        tg_io_stats_edge(io->stats, 1);
        if (fault) {
            res = -fault;
        } else if (allowed > 0) {
            ssize_t got = pread(s->file->fd, buf, (size_t)allowed, (off_t)off);
            res = got < 0 ? -errno : (int)got;
        }
        uint64_t ns = ns_since(t0);
        count(&io->stats->wait_ns_, ns);
        count(&io->stats->depth_ns_, ns); /* one read in flight while pread runs */
        count(&io->stats->busy_ns_, ns);
        tg_io_stats_edge(io->stats, 0);
        if (!span_result(io, s, res)) return;
    }
}

/* ---------------------------------------------------------------- progress */

/* Runs reads until at least `want` requests sit on the completion list. */
static int progress(tg_io_t *io, size_t want)
{
    if (io->broken) return tg_err(-EIO, "io queue is broken by an earlier io_uring failure");
    for (;;) {
        if (io->uring) {
            uring_drain(io);
            uring_issue_queued(io);
        }
        if (io->ndone >= want) return io->uring ? uring_submit(io) : 0;
        if (!io->uring) {
            /* One slot: run the next span to its end. */
            span_t *s = next_span(io);
            if (!s)
                return tg_err(-EIO,
                              "io queue: %zu requests incomplete but no read left to run "
                              "(internal error)",
                              want - io->ndone);
            pread_span(io, s);
            continue;
        }
        if (io->in_kernel == 0)
            return tg_err(-EIO,
                          "io queue: %zu requests incomplete but no read in flight "
                          "(internal error)",
                          want - io->ndone);
        double t0 = tg_now();
        int rc = io_uring_submit_and_wait(&io->ring, 1);
        count(&io->stats->wait_ns_, ns_since(t0));
        if (rc < 0 && rc != -EINTR && rc != -EAGAIN && rc != -EBUSY)
            return ring_failed(io, rc, "wait");
    }
}

/* ---------------------------------------------------------------- public API */

int tg_io_create(tg_io_t **out, const tg_io_opts_t *opts)
{
    *out = NULL;
    tg_io_opts_t o = {0};
    if (opts) o = *opts;
    if (!o.depth) o.depth = DEFAULT_DEPTH;
    if (!o.max_read_bytes) o.max_read_bytes = DEFAULT_MAX_READ;
    if (o.depth > MAX_DEPTH)
        return tg_err(-EINVAL, "io queue: depth %u is above the maximum %u", o.depth, MAX_DEPTH);
    if (o.max_read_bytes % TG_IO_STAGING_ALIGN || o.max_read_bytes > MAX_MAX_READ)
        return tg_err(-EINVAL,
                      "io queue: max_read_bytes %zu must be a multiple of %u and at most %zu",
                      o.max_read_bytes, TG_IO_STAGING_ALIGN, MAX_MAX_READ);
    int rc = tg_io_fault_env_load();
    if (rc < 0) return rc;

    tg_io_t *io = calloc(1, sizeof *io);
    if (!io) return tg_err(-ENOMEM, "io queue: out of memory");
    io->flags = o.flags;
    io->max_read = o.max_read_bytes;
    io->budget = o.budget;
    tg_io_stats_init(&io->own);
    io->stats = o.stats ? o.stats : &io->own;

    if (!(o.flags & TG_IO_FORCE_PREAD)) {
        rc = tg_io_ring_init(&io->ring, o.depth);
        if (rc == 0)
            io->uring = 1;
        else
            tg_io_warn_ring_fallback(rc);
    }
    /* pread runs one read at a time: one slot is all it can use. */
    io->depth = io->uring ? o.depth : 1;
    io->staging_bytes = (size_t)io->depth * io->max_read;

    if (io->budget) {
        char what[96], b1[32];
        snprintf(what, sizeof what, "io staging buffers (%u x %s)", io->depth,
                 tg_fmt_bytes(io->max_read, b1, sizeof b1));
        if ((rc = tg_budget_reserve(io->budget, io->staging_bytes, what)) < 0) goto err;
        io->reserved = io->staging_bytes;
    }
    io->staging = tg_aligned_alloc(TG_IO_STAGING_ALIGN, io->staging_bytes);
    io->free_slots = malloc(io->depth * sizeof *io->free_slots);
    if (!io->staging || !io->free_slots) {
        rc = tg_err(-ENOMEM, "io queue: cannot allocate %zu bytes of staging buffers",
                    io->staging_bytes);
        goto err;
    }
    /* Slots are handed out from the top: slot 0 first, so small runs touch little memory. */
    for (unsigned i = 0; i < io->depth; i++)
        io->free_slots[i] = (int32_t)(io->depth - 1 - i);
    io->nfree = io->depth;

    if (io->uring && !(o.flags & TG_IO_NO_FIXED)) {
        /* Registered buffers spare the kernel pinning the pages on every read. Failing is fine
         * (RLIMIT_MEMLOCK on older kernels): plain reads work the same. */
        struct iovec iov = {.iov_base = io->staging, .iov_len = io->staging_bytes};
        int r = io_uring_register_buffers(&io->ring, &iov, 1);
        if (r == 0)
            io->fixed = 1;
        else
            tg_log_debug("io queue: cannot register staging buffers (%s); using plain reads",
                         strerror(-r));
    }
    *out = io;
    return 0;

err:
    tg_io_destroy(io);
    return rc;
}

void tg_io_destroy(tg_io_t *io)
{
    if (!io) return;
    int leak_staging = 0;
    if (io->uring) {
        /* The kernel may still be writing into staging slots: wait for those reads (results
         * are dropped, request buffers are not touched). */
        io_uring_submit(&io->ring);
        if (io->in_kernel > 0) tg_io_stats_edge(io->stats, 0); /* dropped reads: not counted */
        while (io->in_kernel > 0) {
            struct io_uring_cqe *cqe;
            int rc = io_uring_wait_cqe(&io->ring, &cqe);
            if (rc == -EINTR || rc == -EAGAIN) continue;
            if (rc < 0) {
                tg_log_warn("io queue: cannot wait for %u reads in flight (%s); leaking their "
                            "staging buffers",
                            io->in_kernel, strerror(-rc));
                leak_staging = 1;
                break;
            }
            io->in_kernel--;
            io_uring_cqe_seen(&io->ring, cqe);
        }
        io_uring_queue_exit(&io->ring);
    }
    while (io->head)
        batch_free(io, io->head);
    if (!leak_staging) free(io->staging);
    free(io->free_slots);
    if (io->budget && io->reserved) tg_budget_release(io->budget, io->reserved);
    free(io);
}

static int check_req(const tg_io_t *io, const tg_io_req_t *r, size_t i)
{
    if (!r->file) return tg_err(-EINVAL, "io request %zu: no file", i);
    const tg_io_file_t *f = r->file;
    if (r->len && !r->dst)
        return tg_err(-EINVAL, "%s: io request %zu (offset %llu): no destination", f->path, i,
                      (unsigned long long)r->off);
    if (r->off > UINT64_MAX - r->len || r->off + r->len > UINT64_MAX - io->max_read)
        return tg_err(-EINVAL, "%s: io request %zu: offset %llu + %zu bytes overflows", f->path, i,
                      (unsigned long long)r->off, r->len);
    if (f->align > TG_IO_STAGING_ALIGN || io->max_read % f->align)
        return tg_err(-EINVAL,
                      "%s: direct I/O alignment %u does not divide the queue's max_read_bytes "
                      "%zu or exceeds the staging alignment %u",
                      f->path, f->align, io->max_read, TG_IO_STAGING_ALIGN);
    return 0;
}

int tg_io_submit(tg_io_t *io, tg_io_req_t *reqs, size_t n)
{
    if (io->broken) return tg_err(-EIO, "io queue is broken by an earlier io_uring failure");
    if (n == 0) return 0;
    size_t bound = 0; /* pieces (and at most as many spans) the plan can need */
    uint64_t need = 0;
    for (size_t i = 0; i < n; i++) {
        int rc = check_req(io, &reqs[i], i);
        if (rc < 0) return rc;
        if (reqs[i].len == 0) continue;
        unsigned a = reqs[i].file->align;
        uint64_t ab = align_down(reqs[i].off, a), ae = align_up(reqs[i].off + reqs[i].len, a);
        bound += (size_t)((ae - ab + io->max_read - 1) / io->max_read);
        need += reqs[i].len;
    }
    int merge = !(io->flags & TG_IO_NO_MERGE);
    size_t batch_bytes = sizeof(batch_t) + bound * (sizeof(span_t) + sizeof(piece_t));
    size_t ent_bytes = n * sizeof(ent_t);
    int rc;
    if (io->budget) {
        char what[96];
        snprintf(what, sizeof what, "io bookkeeping for %zu requests", n);
        if ((rc = tg_budget_reserve(io->budget, batch_bytes + ent_bytes, what)) < 0) return rc;
    }
    batch_t *b = bound ? malloc(batch_bytes) : NULL;
    ent_t *ents = malloc(ent_bytes);
    if ((bound && !b) || !ents) {
        free(b);
        free(ents);
        if (io->budget) tg_budget_release(io->budget, batch_bytes + ent_bytes);
        return tg_err(-ENOMEM, "io queue: out of memory planning %zu requests", n);
    }

    size_t nent = 0;
    for (size_t i = 0; i < n; i++) {
        tg_io_req_t *r = &reqs[i];
        r->res = 0;
        r->pending_ = 0;
        r->next_ = NULL;
        if (r->len == 0) continue;
        unsigned a = r->file->align;
        ents[nent++] = (ent_t){r->file, align_down(r->off, a), align_up(r->off + r->len, a), i};
    }
    /* Sorting brings same-file neighbours together so that merging finds them; without
     * merging the caller's order is kept (it is the baseline). */
    if (merge) qsort(ents, nent, sizeof *ents, cmp_ent);
    if (b) {
        memset(b, 0, sizeof *b);
        b->spans = (span_t *)(b + 1);
        b->pieces = (piece_t *)(b->spans + bound);
        plan(io, b, reqs, ents, nent);
        b->left = b->nspans;
        b->reserved = io->budget ? batch_bytes : 0;
        b->prev = io->tail;
        if (io->tail)
            io->tail->next = b;
        else
            io->head = b;
        io->tail = b;
        if (!io->issue) io->issue = b;
    } else if (io->budget) {
        tg_budget_release(io->budget, batch_bytes);
    }
    free(ents);
    if (io->budget) tg_budget_release(io->budget, ent_bytes);

    for (size_t i = 0; i < n; i++)
        if (reqs[i].len == 0) push_done(io, &reqs[i]);
    io->outstanding += n;
    count(&io->stats->need_bytes_, need);
    /* Start the disk now so it works while the caller does something else. pread has nothing
     * to overlap with: its reads run inside reap/wait. */
    if (!io->uring) return 0;
    uring_issue_queued(io);
    return uring_submit(io);
}

int tg_io_reap(tg_io_t *io, tg_io_req_t **done, size_t max, size_t min_complete)
{
    size_t want = TG_MIN(TG_MIN(min_complete, max), io->outstanding);
    int rc = progress(io, want);
    if (rc < 0) return rc;
    size_t k = TG_MIN(TG_MIN(max, io->ndone), (size_t)INT32_MAX);
    failures_t f = {0};
    for (size_t i = 0; i < k; i++) {
        done[i] = pop_done(io);
        note(io, &f, done[i]);
    }
    io->outstanding -= k;
    report(io, &f);
    return (int)k;
}

int tg_io_wait(tg_io_t *io)
{
    int rc = progress(io, io->outstanding);
    if (rc < 0) return rc;
    failures_t f = {0};
    while (io->ndone)
        note(io, &f, pop_done(io));
    io->outstanding = 0;
    return report(io, &f);
}

int tg_io_read_batch(tg_io_t *io, tg_io_req_t *reqs, size_t n)
{
    if (io->outstanding)
        return tg_err(-EBUSY,
                      "io queue: tg_io_read_batch needs an idle queue, %zu requests "
                      "are still in flight",
                      io->outstanding);
    int rc = tg_io_submit(io, reqs, n);
    if (rc < 0) return rc;
    return tg_io_wait(io);
}

int tg_io_read(tg_io_t *io, tg_io_file_t *f, uint64_t off, size_t len, void *dst)
{
    tg_io_req_t r = {.file = f, .off = off, .len = len, .dst = dst};
    return tg_io_read_batch(io, &r, 1);
}

size_t tg_io_inflight(const tg_io_t *io)
{
    return io->outstanding;
}

const char *tg_io_backend(const tg_io_t *io)
{
    return io->uring ? "io_uring" : "pread";
}

unsigned tg_io_depth(const tg_io_t *io)
{
    return io->depth;
}

size_t tg_io_max_read_bytes(const tg_io_t *io)
{
    return io->max_read;
}

tg_io_stats_t *tg_io_stats(tg_io_t *io)
{
    return io->stats;
}

/* ---------------------------------------------------------------- pool of queues */

struct tg_io_pool {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    unsigned n, nfree;
    tg_io_t **q;      /* all queues */
    tg_io_t **free_q; /* the idle ones: free_q[0 .. nfree) */
};

int tg_io_pool_create(tg_io_pool_t **out, unsigned nqueues, const tg_io_opts_t *opts)
{
    *out = NULL;
    if (nqueues == 0) return tg_err(-EINVAL, "io pool: needs at least one queue");
    tg_io_pool_t *p = calloc(1, sizeof *p);
    if (!p) return tg_err(-ENOMEM, "io pool: out of memory");
    int rc;
    p->q = calloc(nqueues, sizeof *p->q);
    p->free_q = calloc(nqueues, sizeof *p->free_q);
    if (!p->q || !p->free_q) {
        rc = tg_err(-ENOMEM, "io pool: out of memory");
        goto err;
    }
    for (; p->n < nqueues; p->n++) {
        if ((rc = tg_io_create(&p->q[p->n], opts)) < 0) goto err;
        p->free_q[p->n] = p->q[p->n];
    }
    p->nfree = p->n;
    pthread_mutex_init(&p->mu, NULL);
    pthread_cond_init(&p->cv, NULL);
    *out = p;
    return 0;
err:
    for (unsigned i = 0; i < p->n; i++)
        tg_io_destroy(p->q[i]);
    free(p->q);
    free(p->free_q);
    free(p);
    return rc;
}

void tg_io_pool_destroy(tg_io_pool_t *p)
{
    if (!p) return;
    for (unsigned i = 0; i < p->n; i++)
        tg_io_destroy(p->q[i]);
    pthread_mutex_destroy(&p->mu);
    pthread_cond_destroy(&p->cv);
    free(p->q);
    free(p->free_q);
    free(p);
}

int tg_io_pool_read_batch(tg_io_pool_t *p, tg_io_req_t *reqs, size_t n)
{
    pthread_mutex_lock(&p->mu);
    while (p->nfree == 0)
        pthread_cond_wait(&p->cv, &p->mu);
    tg_io_t *io = p->free_q[--p->nfree];
    pthread_mutex_unlock(&p->mu);

    int rc = tg_io_read_batch(io, reqs, n);

    pthread_mutex_lock(&p->mu);
    p->free_q[p->nfree++] = io;
    pthread_cond_signal(&p->cv);
    pthread_mutex_unlock(&p->mu);
    return rc;
}
