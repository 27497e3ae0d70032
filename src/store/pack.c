/* store/pack: batched feature packing (see tiergnn/pack.h for the contract).
 *
 * One reader thread reads partitions' spans of features.bin through an io/ queue; the calling
 * thread fetches and checks each partition's targets one partition ahead (so the reader always
 * has the next span to read), then for the partition whose read is done orders its targets by
 * (out, off), copies the rows into the staging buffer in that order and writes the runs, both on
 * the pool's threads. Two slots (targets + read buffer) go round between the two threads through
 * two queues: to_read (caller -> reader) and was_read (reader -> caller), both FIFO, so
 * partitions come back in the order they were handed out.
 *
 * Sections: sizes and checks, targets (fetch, check, order), the reader, copying rows, writing
 * runs, the final sync, set-up and tear-down, the loop. */
#include "tiergnn/pack.h"

#include <fcntl.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tiergnn/rowcrc.h"

#define READ_DEPTH 8u              /* disk reads in flight: enough for sequential bandwidth */
#define READ_MAX ((size_t)1 << 20) /* one disk read */
#define READ_REQ ((size_t)8 << 20) /* one request; the abort flag is polled between them */
#define READ_ALIGN 4096u           /* read buffers: io/'s largest direct-I/O alignment */
#define IO_BOOK_PER_READ 128u      /* io/'s span + piece (88 bytes, io.h) with room */
#define IO_BOOK_PER_REQ 32u        /* io/'s per-request planning entry (io.h) */
#define IO_BOOK_FIXED 4096u

typedef struct job {    /* one pwrite (file output) or memcpy (RAM output) */
    uint64_t off;       /* in the output */
    uint64_t stage_off; /* in the staging buffer */
    uint32_t out;
    uint32_t len; /* <= TG_PACK_WRITE_MAX */
} job_t;

/* What the buffers must hold, from the partitions alone (tg_pack_bytes and tg_pack agree). */
typedef struct sizes {
    uint64_t max_span;    /* bytes of the widest partition (with targets) */
    uint64_t max_targets; /* targets of the partition with the most */
    uint32_t wide_part, many_part;
    uint64_t read_buf; /* one read buffer */
    uint64_t nreqs;    /* io requests of one read */
    uint64_t njobs;    /* writes of one partition, at most */
    uint64_t own;      /* reserved by tg_pack */
    uint64_t io;       /* reserved by its read queue */
} sizes_t;

typedef struct slot {
    uint32_t part;
    size_t n; /* targets */
    tg_pack_target_t *t;
    uint64_t rd_off, rd_len; /* bytes of features.bin in buf (rd_off aligned down) */
    char *buf;
    tg_io_req_t *reqs;
    int rc; /* the read's result */
} slot_t;

typedef struct pack {
    const tg_pack_opts_t *o;
    size_t rb;
    tg_io_file_t *feat, *own_feat;
    unsigned align;
    sizes_t sz;
    uint64_t reserved;
    slot_t slot[2];
    uint32_t *order;         /* staging position k holds target order[k] */
    uint64_t *count;         /* per output: targets, then next position (counting sort) */
    job_t *jobs, *prev_jobs; /* this partition's writes, the previous one's */
    size_t njobs, nprev;
    char *stage;
    tg_pool_t *pool;
    int nthreads;
    tg_errbox_t wbox; /* first failure of the copy / write / sync threads */
    /* the reader */
    tg_io_t *io;
    tg_queue_t *to_read, *was_read;
    pthread_t reader;
    int reader_started;
    atomic_int stop;
    tg_errbox_t rbox;
    double read_s;
    tg_pack_stats_t st;
} pack_t;

/* ---------------------------------------------------------------- sizes and checks */

static uint64_t round_up(uint64_t x, uint64_t a)
{
    return (x + a - 1) / a * a;
}

static void compute_sizes(const tg_pack_part_t *parts, uint32_t nparts, size_t rb, uint32_t nouts,
                          sizes_t *z)
{
    memset(z, 0, sizeof *z);
    for (uint32_t p = 0; p < nparts; p++) {
        if (parts[p].ntargets == 0) continue;
        uint64_t span = (parts[p].hi - parts[p].lo) * rb;
        if (span > z->max_span) z->max_span = span, z->wide_part = p;
        if (parts[p].ntargets > z->max_targets)
            z->max_targets = parts[p].ntargets, z->many_part = p;
    }
    if (!z->max_targets) return; /* nothing to read or write */
    z->read_buf = round_up(z->max_span + READ_ALIGN, READ_ALIGN);
    z->nreqs = z->read_buf / READ_REQ + 1;
    uint64_t stage = z->max_targets * rb;
    z->njobs = z->max_targets + stage / TG_PACK_WRITE_MAX + 1;
    z->own = 2 * (z->read_buf + z->nreqs * sizeof(tg_io_req_t) +
                  z->max_targets * sizeof(tg_pack_target_t)) +
             z->max_targets * sizeof(uint32_t) + 2 * z->njobs * sizeof(job_t) + stage +
             (uint64_t)(nouts + 1) * sizeof(uint64_t);
    z->io = (uint64_t)READ_DEPTH * READ_MAX +
            (z->read_buf / READ_MAX + z->nreqs + 1) * IO_BOOK_PER_READ +
            z->nreqs * IO_BOOK_PER_REQ + IO_BOOK_FIXED;
}

uint64_t tg_pack_bytes(const tg_pack_part_t *parts, uint32_t nparts, size_t row_bytes,
                       uint32_t nouts)
{
    sizes_t z;
    compute_sizes(parts, nparts, row_bytes, nouts, &z);
    return z.own + z.io;
}

/* A name for output i in messages: its name, else the file's path from /proc, else "fd N". */
static const char *out_name(const tg_pack_opts_t *o, uint32_t i, char *buf, size_t len)
{
    const tg_pack_out_t *out = &o->outs[i];
    if (out->name) return out->name;
    if (out->mem) return "RAM";
    char link[64];
    snprintf(link, sizeof link, "/proc/self/fd/%d", out->fd);
    ssize_t n = readlink(link, buf, len - 1);
    if (n <= 0)
        snprintf(buf, len, "fd %d", out->fd);
    else
        buf[n] = 0;
    return buf;
}

static int check_outputs(const tg_pack_opts_t *o)
{
    char name[512];
    for (uint32_t i = 0; i < o->nouts; i++) {
        const tg_pack_out_t *out = &o->outs[i];
        if (out->mem) continue;
        int fl = out->fd >= 0 ? fcntl(out->fd, F_GETFL) : -1;
        if (fl < 0 || (fl & O_ACCMODE) == O_RDONLY)
            return tg_err(-EBADF, "pack: output %u (%s): fd %d is not open for writing", i,
                          out_name(o, i, name, sizeof name), out->fd);
    }
    return 0;
}

static int check_opts(const tg_pack_opts_t *o)
{
    if (!o->row_bytes || o->num_nodes > UINT64_MAX / o->row_bytes || (!o->feat && !o->feat_path))
        return tg_err(-EINVAL, "pack: %llu rows of %zu bytes%s", (unsigned long long)o->num_nodes,
                      o->row_bytes, o->feat || o->feat_path ? "" : ", no feature file");
    if (o->nparts && (!o->parts || !o->targets))
        return tg_err(-EINVAL, "pack: %u partitions without %s", o->nparts,
                      o->parts ? "a targets callback" : "their array");
    if (o->nouts && !o->outs) return tg_err(-EINVAL, "pack: %u outputs, no array", o->nouts);
    uint64_t prev_hi = 0;
    for (uint32_t p = 0; p < o->nparts; p++) {
        const tg_pack_part_t *pa = &o->parts[p];
        if (pa->lo > pa->hi || pa->hi > o->num_nodes || pa->lo < prev_hi ||
            pa->ntargets > UINT32_MAX)
            return tg_err(-EINVAL,
                          "pack: partition %u: nodes [%llu, %llu) with %llu targets (expected "
                          "ascending ranges within %llu nodes, from %llu on, and at most %u "
                          "targets)",
                          p, (unsigned long long)pa->lo, (unsigned long long)pa->hi,
                          (unsigned long long)pa->ntargets, (unsigned long long)o->num_nodes,
                          (unsigned long long)prev_hi, UINT32_MAX);
        prev_hi = pa->hi;
    }
    return check_outputs(o);
}

/* ---------------------------------------------------------------- targets */

int tg_pack_target_cmp(const void *a, const void *b)
{
    const tg_pack_target_t *x = a, *y = b;
    if (x->node != y->node) return x->node < y->node ? -1 : 1;
    if (x->out != y->out) return x->out < y->out ? -1 : 1;
    return x->off < y->off ? -1 : x->off > y->off;
}

/* Every target of partition p in range, in place and in strict (node, out, off) order. */
static int check_targets(const pack_t *pk, uint32_t p, const tg_pack_target_t *t, size_t n)
{
    const tg_pack_opts_t *o = pk->o;
    const tg_pack_part_t *pa = &o->parts[p];
    char name[512];
    for (size_t i = 0; i < n; i++) {
        if (t[i].node < pa->lo || t[i].node >= pa->hi)
            return tg_err(-EINVAL, "pack: partition %u, target %zu: node %u outside [%llu, %llu)",
                          p, i, t[i].node, (unsigned long long)pa->lo, (unsigned long long)pa->hi);
        if (t[i].out >= o->nouts)
            return tg_err(-EINVAL, "pack: partition %u, target %zu: output %u of %u", p, i,
                          t[i].out, o->nouts);
        const tg_pack_out_t *out = &o->outs[t[i].out];
        uint64_t lim = out->mem || out->size ? out->size : UINT64_MAX;
        if (t[i].off > lim || lim - t[i].off < pk->rb)
            return tg_err(-EINVAL,
                          "pack: partition %u, target %zu: a row of %zu bytes at offset %llu "
                          "passes the end of output %u (%s, %llu bytes)",
                          p, i, pk->rb, (unsigned long long)t[i].off, t[i].out,
                          out_name(o, t[i].out, name, sizeof name), (unsigned long long)lim);
        if (i && tg_pack_target_cmp(&t[i - 1], &t[i]) >= 0)
            return tg_err(-EINVAL,
                          "pack: partition %u, targets %zu and %zu out of (node, out, off) "
                          "order: (%u, %u, %llu) then (%u, %u, %llu)",
                          p, i - 1, i, t[i - 1].node, t[i - 1].out,
                          (unsigned long long)t[i - 1].off, t[i].node, t[i].out,
                          (unsigned long long)t[i].off);
    }
    return 0;
}

/* Asks for partition p's targets into slot s and works out the span to read. */
static int fetch_targets(pack_t *pk, uint32_t p, slot_t *s)
{
    const tg_pack_opts_t *o = pk->o;
    size_t cap = (size_t)o->parts[p].ntargets;
    int64_t n = o->targets(o->targets_ctx, p, s->t, cap);
    if (n < 0) return tg_err_prefix((int)n, "pack: targets of partition %u", p);
    if ((uint64_t)n > cap)
        return tg_err(-EINVAL, "pack: partition %u: %lld targets, more than the %zu announced", p,
                      (long long)n, cap);
    int rc = check_targets(pk, p, s->t, (size_t)n);
    if (rc < 0) return rc;
    s->part = p;
    s->n = (size_t)n;
    if (!n) return 0;
    uint64_t first = s->t[0].node, end = ((uint64_t)s->t[n - 1].node + 1) * pk->rb;
    s->rd_off = first * pk->rb / pk->align * pk->align;
    s->rd_len = end - s->rd_off;
    return 0;
}

typedef struct by_off {
    const tg_pack_target_t *t;
} by_off_t;

static int cmp_off(const void *a, const void *b, void *ctx)
{
    const tg_pack_target_t *t = ((const by_off_t *)ctx)->t;
    uint64_t x = t[*(const uint32_t *)a].off, y = t[*(const uint32_t *)b].off;
    return x < y ? -1 : x > y;
}

/* order[] = the slot's targets by (out, off): a stable counting sort by out keeps each output's
 * targets in node order, which is offset order whenever a planner appends rows by node (then no
 * sort is needed); other outputs' targets are sorted by offset. Two rows that overlap in an
 * output are refused. Time: O(n + nouts), O(n log n) for outputs filled out of node order. */
static int order_targets(pack_t *pk, const slot_t *s)
{
    const tg_pack_target_t *t = s->t;
    uint32_t nouts = pk->o->nouts, *ord = pk->order;
    uint64_t *c = pk->count;
    memset(c, 0, (nouts + 1) * sizeof *c);
    for (size_t i = 0; i < s->n; i++)
        c[t[i].out + 1]++;
    for (uint32_t j = 0; j < nouts; j++)
        c[j + 1] += c[j];
    for (size_t i = 0; i < s->n; i++)
        ord[c[t[i].out]++] = (uint32_t)i;
    /* c[j] is now the end of output j's targets (and the start of j + 1's) */
    by_off_t ctx = {t};
    for (uint32_t j = 0, k0 = 0; j < nouts; k0 = (uint32_t)c[j++]) {
        for (uint64_t k = k0 + 1; k < c[j]; k++)
            if (t[ord[k]].off < t[ord[k - 1]].off) {
                qsort_r(ord + k0, c[j] - k0, sizeof *ord, cmp_off, &ctx);
                break;
            }
    }
    for (size_t k = 1; k < s->n; k++) {
        const tg_pack_target_t *a = &t[ord[k - 1]], *b = &t[ord[k]];
        if (a->out == b->out && b->off - a->off < pk->rb)
            return tg_err(-EINVAL,
                          "pack: partition %u, targets %u and %u overlap in output %u (offsets "
                          "%llu and %llu, rows of %zu bytes)",
                          s->part, ord[k - 1], ord[k], a->out, (unsigned long long)a->off,
                          (unsigned long long)b->off, pk->rb);
    }
    return 0;
}

/* ---------------------------------------------------------------- the reader */

static int stopping(pack_t *pk)
{
    return atomic_load(&pk->stop) || (pk->o->abort && atomic_load(pk->o->abort));
}

/* Reads the slot's span in requests of READ_REQ bytes (io/ cuts them into READ_MAX disk reads,
 * READ_DEPTH in flight, straight into the aligned buffer), polling the abort flag between
 * completions. On failure the queue may still hold requests: the reader then stops and destroys
 * it, which waits for what the kernel owns. */
static int read_slot(pack_t *pk, slot_t *s)
{
    size_t nreq = 0;
    for (uint64_t o = 0; o < s->rd_len; o += READ_REQ)
        s->reqs[nreq++] = (tg_io_req_t){.file = pk->feat,
                                        .off = s->rd_off + o,
                                        .len = (size_t)TG_MIN(READ_REQ, s->rd_len - o),
                                        .dst = s->buf + o};
    int rc = tg_io_submit(pk->io, s->reqs, nreq);
    while (rc == 0 && tg_io_inflight(pk->io) > 0) {
        if (stopping(pk)) return -ECANCELED;
        tg_io_req_t *done[16];
        int k = tg_io_reap(pk->io, done, 16, 1);
        if (k < 0) return k;
        for (int i = 0; i < k; i++)
            if (done[i]->res < 0) return done[i]->res; /* tg_errmsg: file and offset */
    }
    /* --verify-reads: the rows this partition hands out are what was verified */
    for (size_t k = 0; rc == 0 && pk->o->rowcrc && k < s->n; k++) {
        uint64_t v = s->t[k].node, off = v * pk->rb;
        rc = tg_rowcrc_check(pk->o->rowcrc, v, s->buf + (off - s->rd_off),
                             tg_io_file_path(pk->feat), off);
    }
    return rc;
}

static void *reader_main(void *arg)
{
    pack_t *pk = arg;
    void *item;
    while (tg_queue_pop(pk->to_read, &item) == 0) {
        slot_t *s = item;
        double t0 = tg_now();
        s->rc = stopping(pk) ? -ECANCELED : read_slot(pk, s);
        pk->read_s += tg_now() - t0;
        if (s->rc < 0 && s->rc != -ECANCELED) tg_errbox_set(&pk->rbox, s->rc, NULL);
        tg_queue_push(pk->was_read, s);
        if (s->rc < 0) break;
    }
    tg_io_destroy(pk->io); /* the slots' buffers outlive this: tear-down joins first */
    pk->io = NULL;
    return NULL;
}

/* ---------------------------------------------------------------- copying rows */

typedef struct copy_ctx {
    pack_t *pk;
    const slot_t *s;
} copy_ctx_t;

static void copy_rows(void *ctx, size_t begin, size_t end, int tid)
{
    const copy_ctx_t *c = ctx;
    const pack_t *pk = c->pk;
    const slot_t *s = c->s;
    size_t rb = pk->rb;
    for (size_t k = begin; k < end; k++) {
        uint64_t src = (uint64_t)s->t[pk->order[k]].node * rb - s->rd_off;
        memcpy(pk->stage + k * rb, s->buf + src, rb);
    }
}

/* Runs of targets contiguous in one output (staging positions k..k2), cut at
 * TG_PACK_WRITE_MAX bytes. */
static void build_jobs(pack_t *pk, const slot_t *s)
{
    const tg_pack_target_t *t = s->t;
    const uint32_t *ord = pk->order;
    size_t rb = pk->rb, nj = 0;
    for (size_t k = 0, k2; k < s->n; k = k2) {
        uint32_t out = t[ord[k]].out;
        uint64_t off = t[ord[k]].off;
        for (k2 = k + 1;
             k2 < s->n && t[ord[k2]].out == out && t[ord[k2]].off == off + (k2 - k) * rb; k2++)
            ;
        uint64_t bytes = (k2 - k) * rb;
        for (uint64_t b = 0; b < bytes; b += TG_PACK_WRITE_MAX)
            pk->jobs[nj++] = (job_t){.off = off + b,
                                     .stage_off = k * rb + b,
                                     .out = out,
                                     .len = (uint32_t)TG_MIN(TG_PACK_WRITE_MAX, bytes - b)};
    }
    pk->njobs = nj;
}

/* ---------------------------------------------------------------- writing runs */

static int write_job(pack_t *pk, const job_t *j)
{
    const tg_pack_out_t *out = &pk->o->outs[j->out];
    const char *src = pk->stage + j->stage_off;
    if (out->mem) {
        memcpy((char *)out->mem + j->off, src, j->len);
        return 0;
    }
    for (size_t done = 0; done < j->len;) {
        ssize_t w = pwrite(out->fd, src + done, j->len - done, (off_t)(j->off + done));
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) {
            int err = w < 0 ? errno : EIO;
            char name[512];
            return tg_err(-err, "pack: output %u (%s): writing %u bytes at offset %llu: %s", j->out,
                          out_name(pk->o, j->out, name, sizeof name), j->len - (uint32_t)done,
                          (unsigned long long)(j->off + done),
                          w < 0 ? strerror(err) : "pwrite wrote nothing");
        }
        done += (size_t)w;
    }
    return 0;
}

/* First job whose staging offset is >= at (jobs are in staging order). */
static size_t job_at(const pack_t *pk, uint64_t at)
{
    size_t lo = 0, hi = pk->njobs;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (pk->jobs[mid].stage_off < at)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

/* Thread `w` of the pool writes the jobs that start in its share of the staging bytes: the
 * staging is in (out, off) order, so threads mostly write different files and do not queue on
 * one file's lock. */
static void write_share(void *ctx, size_t begin, size_t end, int tid)
{
    const copy_ctx_t *c = ctx;
    pack_t *pk = c->pk;
    uint64_t total = c->s->n * pk->rb, T = (uint64_t)pk->nthreads;
    for (size_t w = begin; w < end; w++) {
        size_t j0 = job_at(pk, total * w / T), j1 = job_at(pk, total * (w + 1) / T);
        for (size_t j = j0; j < j1; j++) {
            if (tg_errbox_failed(&pk->wbox) || stopping(pk)) return;
            int rc = write_job(pk, &pk->jobs[j]);
            if (rc < 0) {
                tg_errbox_set(&pk->wbox, rc, NULL);
                return;
            }
        }
    }
}

/* posix_fadvise(DONTNEED) over the whole pages inside the file-output runs of jobs[0 .. n)
 * (contiguous jobs of one output make one run). Advice only: failures are ignored. */
static void drop_pages(const pack_t *pk, const job_t *jobs, size_t n)
{
    const uint64_t page = 4096;
    const tg_pack_out_t *outs = pk->o->outs;
    for (size_t i = 0, k; i < n; i = k) {
        uint64_t end = jobs[i].off + jobs[i].len;
        for (k = i + 1; k < n && jobs[k].out == jobs[i].out && jobs[k].off == end; k++)
            end += jobs[k].len;
        uint64_t a = round_up(jobs[i].off, page), b = end / page * page;
        if (!outs[jobs[i].out].mem && a < b)
            (void)posix_fadvise(outs[jobs[i].out].fd, (off_t)a, (off_t)(b - a),
                                POSIX_FADV_DONTNEED);
    }
}

/* The page cache of the file outputs during packing (it counts against a memory cgroup). A page
 * that a partition's run covers whole holds its final bytes (targets do not overlap), so no
 * later partition writes it: DONTNEED right after the writes starts its writeback, and DONTNEED
 * again after the next partition's writes drops it, clean by then. The cache thus holds about
 * two partitions' writes and the disk writes while the next partitions are read. Pages a run
 * covers only in part (a row at a run's end, rows scattered one by one over a disk cache) are
 * left to the kernel until the final sync: dropped, they would be read back from disk before
 * the next row could land in them. */
static void drop_written(pack_t *pk)
{
    drop_pages(pk, pk->prev_jobs, pk->nprev);
    drop_pages(pk, pk->jobs, pk->njobs);
    job_t *t = pk->prev_jobs;
    pk->prev_jobs = pk->jobs, pk->nprev = pk->njobs;
    pk->jobs = t, pk->njobs = 0;
}

/* Counts the partition's writes, per output and in the stats, then drop_written. */
static void account_writes(pack_t *pk)
{
    tg_pack_out_t *outs = pk->o->outs;
    for (size_t i = 0; i < pk->njobs; i++) {
        const job_t *j = &pk->jobs[i];
        outs[j->out].written += j->len;
        if (outs[j->out].mem) {
            pk->st.ram_bytes += j->len;
        } else {
            pk->st.file_bytes += j->len;
            pk->st.writes++;
        }
    }
    drop_written(pk);
}

/* Copies and writes the rows of a slot whose read is done. */
static int write_slot(pack_t *pk, const slot_t *s)
{
    double t0 = tg_now();
    int rc = order_targets(pk, s);
    if (rc < 0) return rc;
    copy_ctx_t c = {pk, s};
    tg_pool_for(pk->pool, s->n, copy_rows, &c);
    build_jobs(pk, s);
    double t1 = tg_now();
    pk->st.dispatch_s += t1 - t0;
    tg_pool_for(pk->pool, (size_t)pk->nthreads, write_share, &c);
    if ((rc = tg_errbox_raise(&pk->wbox)) < 0) return rc;
    if (stopping(pk)) return tg_err(-ECANCELED, "pack: cancelled in partition %u", s->part);
    account_writes(pk);
    pk->st.rows += s->n;
    pk->st.partitions++;
    pk->st.write_s += tg_now() - t1;
    return 0;
}

/* ---------------------------------------------------------------- the final sync */

static void sync_outputs(void *ctx, size_t begin, size_t end, int tid)
{
    pack_t *pk = ctx;
    const tg_pack_out_t *outs = pk->o->outs;
    for (size_t i = begin; i < end; i++) {
        if (outs[i].mem || tg_errbox_failed(&pk->wbox)) continue;
        if (fdatasync(outs[i].fd) < 0) {
            char name[512];
            int err = errno;
            tg_err(-err, "pack: output %zu (%s): fdatasync after writing %llu bytes: %s", i,
                   out_name(pk->o, (uint32_t)i, name, sizeof name),
                   (unsigned long long)outs[i].written, strerror(err));
            tg_errbox_set(&pk->wbox, -err, NULL);
            continue;
        }
        (void)posix_fadvise(outs[i].fd, 0, 0, POSIX_FADV_DONTNEED);
    }
}

/* ---------------------------------------------------------------- set-up and tear-down */

static int open_feat(pack_t *pk)
{
    const tg_pack_opts_t *o = pk->o;
    pk->feat = o->feat;
    if (!pk->feat) {
        int rc = tg_io_file_open(&pk->own_feat, o->feat_path, 0);
        if (rc < 0) return rc;
        pk->feat = pk->own_feat;
    }
    uint64_t want = o->num_nodes * o->row_bytes, have = tg_io_file_size(pk->feat);
    if (have != want)
        return tg_err(-EINVAL, "%s: %llu bytes, expected %llu (%llu rows of %zu bytes)",
                      tg_io_file_path(pk->feat), (unsigned long long)have, (unsigned long long)want,
                      (unsigned long long)o->num_nodes, o->row_bytes);
    pk->align = tg_io_file_align(pk->feat);
    return 0;
}

static int reserve(pack_t *pk)
{
    const sizes_t *z = &pk->sz;
    tg_budget_t *b = pk->o->budget;
    if (!b) return 0;
    pthread_mutex_lock(&b->mu);
    uint64_t limit = b->limit, used = b->used;
    pthread_mutex_unlock(&b->mu);
    if (!limit || (used <= limit && limit - used >= z->own + z->io)) {
        if (tg_budget_reserve(b, z->own, "feature packing buffers") == 0) {
            pk->reserved = z->own;
            return 0;
        }
    }
    char a[32];
    return tg_err(-ENOMEM,
                  "pack: needs %s (%llu bytes: two read buffers for partition %u's %llu nodes, "
                  "staging for partition %u's %llu targets, and the read queue), the budget has "
                  "%llu bytes free of %llu",
                  tg_fmt_bytes(z->own + z->io, a, sizeof a), (unsigned long long)(z->own + z->io),
                  z->wide_part, (unsigned long long)(z->max_span / pk->rb), z->many_part,
                  (unsigned long long)z->max_targets,
                  (unsigned long long)(used <= limit ? limit - used : 0),
                  (unsigned long long)limit);
}

static int alloc_all(pack_t *pk)
{
    const sizes_t *z = &pk->sz;
    uint32_t nouts = pk->o->nouts;
    for (int i = 0; i < 2; i++) {
        slot_t *s = &pk->slot[i];
        s->buf = tg_aligned_alloc(READ_ALIGN, z->read_buf);
        s->reqs = malloc(z->nreqs * sizeof *s->reqs);
        s->t = malloc(z->max_targets * sizeof *s->t);
        if (!s->buf || !s->reqs || !s->t) goto oom;
    }
    pk->order = malloc(z->max_targets * sizeof *pk->order);
    pk->count = malloc((nouts + 1) * sizeof *pk->count);
    pk->jobs = malloc(z->njobs * sizeof *pk->jobs);
    pk->prev_jobs = malloc(z->njobs * sizeof *pk->prev_jobs);
    pk->stage = malloc(z->max_targets * pk->rb);
    if (!pk->order || !pk->count || !pk->jobs || !pk->prev_jobs || !pk->stage) goto oom;
    return 0;
oom:
    return tg_err(-ENOMEM, "pack: out of memory for %llu bytes of buffers",
                  (unsigned long long)z->own);
}

static int setup(pack_t *pk)
{
    const tg_pack_opts_t *o = pk->o;
    compute_sizes(o->parts, o->nparts, pk->rb, o->nouts, &pk->sz);
    if (!pk->sz.max_targets) return 0;
    int rc = reserve(pk);
    if (rc == 0) rc = alloc_all(pk);
    if (rc < 0) return rc;
    tg_io_opts_t io = {
        .depth = READ_DEPTH, .max_read_bytes = READ_MAX, .budget = o->budget, .stats = o->io_stats};
    if ((rc = tg_io_create(&pk->io, &io)) < 0) return tg_err_prefix(rc, "pack: read queue");
    pk->nthreads = o->threads < 1 ? 1 : o->threads;
    if (pk->nthreads > 1 && (rc = tg_pool_create(&pk->pool, pk->nthreads)) < 0) return rc;
    if ((rc = tg_queue_create(&pk->to_read, 2)) < 0 || (rc = tg_queue_create(&pk->was_read, 2)) < 0)
        return rc;
    if ((rc = pthread_create(&pk->reader, NULL, reader_main, pk)) != 0)
        return tg_err(-rc, "pack: cannot start the reader thread: %s", strerror(rc));
    pk->reader_started = 1;
    return 0;
}

static void teardown(pack_t *pk)
{
    atomic_store(&pk->stop, 1);
    if (pk->to_read) tg_queue_close(pk->to_read);
    if (pk->reader_started) pthread_join(pk->reader, NULL);
    tg_io_destroy(pk->io); /* when the reader never ran */
    tg_queue_destroy(pk->to_read);
    tg_queue_destroy(pk->was_read);
    tg_pool_destroy(pk->pool);
    for (int i = 0; i < 2; i++) {
        free(pk->slot[i].buf);
        free(pk->slot[i].reqs);
        free(pk->slot[i].t);
    }
    free(pk->order);
    free(pk->count);
    free(pk->jobs);
    free(pk->prev_jobs);
    free(pk->stage);
    if (pk->reserved) tg_budget_release(pk->o->budget, pk->reserved);
    tg_io_file_close(pk->own_feat);
}

/* ---------------------------------------------------------------- the loop */

/* Fetches the targets of the next partition from *p on that has any into s and hands s to the
 * reader; *p moves past it. Returns 1 when a slot went to the reader, 0 when none is left. */
static int hand_out(pack_t *pk, uint32_t *p, slot_t *s)
{
    const tg_pack_opts_t *o = pk->o;
    for (; *p < o->nparts; (*p)++) {
        if (o->parts[*p].ntargets == 0) continue;
        if (stopping(pk)) return tg_err(-ECANCELED, "pack: cancelled before partition %u", *p);
        int rc = fetch_targets(pk, *p, s);
        if (rc < 0) return rc;
        if (s->n == 0) continue;
        (*p)++;
        pk->st.read_bytes += s->rd_len;
        return tg_queue_push(pk->to_read, s) == 0 ? 1 : tg_err(-EPIPE, "pack: reader stopped");
    }
    return 0;
}

static int run_parts(pack_t *pk, tg_progress_t *bar)
{
    const tg_pack_opts_t *o = pk->o;
    uint32_t next = 0;
    int pending = hand_out(pk, &next, &pk->slot[0]), cur = 0;
    uint64_t done_bytes = 0;
    while (pending > 0) {
        slot_t *s = &pk->slot[cur];
        int more = hand_out(pk, &next, &pk->slot[cur ^ 1]);
        if (more < 0) return more;
        void *item;
        double t0 = tg_now();
        tg_queue_pop(pk->was_read, &item); /* s: the FIFO gives slots back in order */
        pk->st.read_wait_s += tg_now() - t0;
        if (s->rc == -ECANCELED)
            return tg_err(-ECANCELED, "pack: cancelled in partition %u", s->part);
        if (s->rc < 0)
            return tg_err_prefix(
                tg_errbox_raise(&pk->rbox), "pack: reading partition %u (nodes %llu..%llu)",
                s->part, (unsigned long long)s->t[0].node, (unsigned long long)s->t[s->n - 1].node);
        int rc = write_slot(pk, s);
        if (rc < 0) return rc;
        if (bar) {
            char suffix[64], b[32];
            done_bytes += (o->parts[s->part].hi - o->parts[s->part].lo) * pk->rb;
            snprintf(suffix, sizeof suffix, "%s written",
                     tg_fmt_bytes(pk->st.file_bytes + pk->st.ram_bytes, b, sizeof b));
            tg_progress_update(bar, done_bytes >> 20, suffix);
        }
        pending = more;
        cur ^= 1;
    }
    return pending;
}

int tg_pack(const tg_pack_opts_t *o, tg_pack_stats_t *stats)
{
    pack_t pk = {.o = o, .rb = o->row_bytes};
    tg_errbox_init(&pk.wbox);
    tg_errbox_init(&pk.rbox);
    double t0 = tg_now();
    for (uint32_t i = 0; i < o->nouts && o->outs; i++)
        o->outs[i].written = 0;
    int rc = check_opts(o);
    if (rc == 0) rc = open_feat(&pk);
    if (rc == 0) rc = setup(&pk);
    tg_progress_t bar, *barp = NULL;
    if (rc == 0 && o->progress) {
        uint64_t total = 0;
        for (uint32_t p = 0; p < o->nparts; p++)
            if (o->parts[p].ntargets) total += (o->parts[p].hi - o->parts[p].lo) * pk.rb;
        tg_progress_begin(&bar, o->progress, total >> 20, "MiB");
        barp = &bar;
    }
    if (rc == 0) rc = run_parts(&pk, barp);
    if (rc == 0 && pk.sz.max_targets) {
        double t1 = tg_now();
        tg_pool_for(pk.pool, o->nouts, sync_outputs, &pk);
        rc = tg_errbox_raise(&pk.wbox);
        pk.st.sync_s = tg_now() - t1;
    }
    if (barp) tg_progress_end(barp);
    teardown(&pk);
    tg_errbox_destroy(&pk.wbox);
    tg_errbox_destroy(&pk.rbox);
    pk.st.read_s = pk.read_s;
    pk.st.total_s = tg_now() - t0;
    if (stats) *stats = pk.st;
    return rc;
}
