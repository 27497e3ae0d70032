/* Weighted reverse PageRank over the CSC, out of core, and its ranking as a derived file
 * (tiergnn/rank.h has the formulation and the layout). */
#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "tiergnn/derived.h"
#include "tiergnn/graph.h"
#include "tiergnn/io.h"
#include "tiergnn/rank.h"

#define IO_DEPTH 8u                   /* reads in flight: enough for sequential bandwidth */
#define IO_MAX_READ ((size_t)1 << 20) /* one disk read at most (adjacent ranges merge up to it) */
#define MAX_REQS 16384u               /* node ranges per batched read */
#define REQ_BOOK 120u                 /* io/'s bookkeeping per request while a batch runs */
#define WRITE_BYTES ((size_t)4 << 20) /* the writer's two buffers and the chunk they take */
#define REC_BYTES 4096u               /* the payload's record, padded so the ids are aligned */
#define REC_MAGIC "TGRANK01"
#define SORT_SMALL 32 /* buckets this small are insertion-sorted */

struct tg_rank {
    tg_derived_file_t *file;
    tg_rank_info_t info;
    uint64_t ids_off, scores_off; /* payload offsets */
};

void tg_rank_opts_default(tg_rank_opts_t *o)
{
    memset(o, 0, sizeof *o);
    o->damping = TG_RANK_DAMPING;
}

/* ---------------------------------------------------------------- options and params */

/* The options with their defaults resolved and damping rounded as the params print it, so that
 * what is computed is what the params say. */
typedef struct {
    tg_rank_opts_t o;
    char params[512];
    uint64_t n, e;
    size_t esz;
    size_t read_bytes; /* indices buffer */
    size_t ip_nodes;   /* nodes per indptr read */
} plan_t;

static int plan_init(plan_t *p, const tg_dataset_t *ds, const tg_rank_opts_t *o)
{
    memset(p, 0, sizeof *p);
    p->o = *o;
    p->n = ds->meta.num_nodes;
    p->e = ds->meta.num_edges;
    p->esz = tg_index_dtype_size(ds->meta.index_dtype);
    int L = o->num_layers;
    if (L < 1 || L > TG_MAX_LAYERS || !o->fanouts)
        return tg_err(-EINVAL, "rank: %d layers%s, expected 1 .. %d with a fanout each", L,
                      o->fanouts ? "" : " and no fanouts", TG_MAX_LAYERS);
    for (int l = 0; l < L; l++)
        if (o->fanouts[l] < -1)
            return tg_err(-EINVAL, "rank: fanout of layer %d is %" PRId64 ", expected >= -1", l,
                          o->fanouts[l]);
    if (o->iterations > TG_RANK_MAX_ITERS)
        return tg_err(-EINVAL, "rank: %u iterations, expected at most %d", o->iterations,
                      TG_RANK_MAX_ITERS);
    p->o.iterations = o->iterations ? o->iterations : (uint32_t)L;
    if (p->n > ((uint64_t)1 << 32))
        return tg_err(-EFBIG,
                      "%s: rank: %" PRIu64 " nodes, at most 2^32 (the sort keys hold "
                      "32-bit ids)",
                      ds->dir, p->n);
    if (o->seeds == NULL && o->num_seeds)
        return tg_err(-EINVAL, "rank: %" PRIu64 " seeds but no seed list", o->num_seeds);
    if (o->read_bytes && o->read_bytes < 4096)
        return tg_err(-EINVAL, "rank: read_bytes %zu, expected at least 4096", o->read_bytes);

    /* the params: damping as %g, then parsed back so the build uses that value */
    char a[32];
    snprintf(a, sizeof a, "%g", o->damping);
    p->o.damping = strtod(a, NULL);
    if (!(p->o.damping > 0 && p->o.damping <= 1))
        return tg_err(-EINVAL, "rank: damping %s, expected 0 < damping <= 1", a);
    size_t len = 0;
    len += (size_t)snprintf(p->params, sizeof p->params, "fanouts=");
    for (int l = 0; l < L; l++)
        len += (size_t)snprintf(p->params + len, sizeof p->params - len, "%s%" PRId64, l ? "+" : "",
                                o->fanouts[l]);
    char seeds[64] = "train";
    if (o->seeds)
        snprintf(seeds, sizeof seeds, "list:%" PRIu64 ":%08x", o->num_seeds,
                 tg_crc32(0, o->seeds, (size_t)o->num_seeds * sizeof *o->seeds));
    snprintf(p->params + len, sizeof p->params - len, ",iters=%u,damping=%s,seeds=%s",
             p->o.iterations, a, seeds);

    /* buffers no larger than the files they read */
    size_t rb = o->read_bytes ? o->read_bytes : TG_RANK_READ_BYTES;
    uint64_t ix = (p->e * p->esz + 4095) / 4096 * 4096, ip = (p->n + 1) * 8;
    p->read_bytes = (size_t)TG_MAX(TG_MIN((uint64_t)rb, ix), (uint64_t)4096);
    p->ip_nodes = (size_t)TG_MAX(TG_MIN((uint64_t)rb, ip) / 8, 2) - 1;
    return 0;
}

int tg_rank_params(const tg_dataset_t *ds, const tg_rank_opts_t *o, char *buf, size_t len)
{
    plan_t p;
    int rc = plan_init(&p, ds, o);
    if (rc < 0) return rc;
    if (strlen(p.params) >= len) return tg_err(-ENAMETOOLONG, "rank: params buffer too small");
    memcpy(buf, p.params, strlen(p.params) + 1);
    return 0;
}

/* The buffers beside the scores, each held through the whole build (they are small). */
static uint64_t buffer_bytes(const plan_t *p)
{
    uint64_t reqs =
        (uint64_t)MAX_REQS * (sizeof(tg_io_req_t) + sizeof(uint64_t) + sizeof(float) + REQ_BOOK);
    return (p->ip_nodes + 1) * 8 + p->read_bytes + reqs + (uint64_t)IO_DEPTH * IO_MAX_READ +
           3 * (uint64_t)WRITE_BYTES;
}

static uint64_t plan_bytes(const plan_t *p)
{
    return 2 * p->n * sizeof(float) + buffer_bytes(p);
}

uint64_t tg_rank_mem_bytes(const tg_dataset_t *ds, const tg_rank_opts_t *o)
{
    plan_t p;
    if (plan_init(&p, ds, o) < 0) return 0;
    return plan_bytes(&p);
}

/* ---------------------------------------------------------------- the iterations */

typedef struct {
    const tg_dataset_t *ds;
    const plan_t *p;
    tg_io_file_t *fip, *fix;
    tg_io_t *io;
    uint64_t *ip; /* (ip_nodes + 1) a chunk of indptr */
    char *buf;    /* (read_bytes) the indices of the queued ranges */
    size_t fill;  /* bytes of buf queued */
    tg_io_req_t *reqs;
    uint64_t *req_node; /* the node of each range (for messages) */
    float *req_c;       /* what each of its entries receives */
    size_t nreq;
    uint64_t seeds; /* distinct seeds */
} iter_t;

static void iter_close(iter_t *it)
{
    tg_io_destroy(it->io);
    tg_io_file_close(it->fip);
    tg_io_file_close(it->fix);
    free(it->ip);
    free(it->buf);
    free(it->reqs);
    free(it->req_node);
    free(it->req_c);
    memset(it, 0, sizeof *it);
}

static int iter_open(iter_t *it, const tg_dataset_t *ds, const plan_t *p)
{
    memset(it, 0, sizeof *it);
    it->ds = ds;
    it->p = p;
    char path[4096];
    tg_io_opts_t io = {.depth = IO_DEPTH, .max_read_bytes = IO_MAX_READ};
    int rc;
    tg_dataset_path(ds, TG_FILE_INDPTR, path, sizeof path);
    if ((rc = tg_io_file_open(&it->fip, path, 0)) < 0) goto err;
    tg_dataset_path(ds, TG_FILE_INDICES, path, sizeof path);
    if ((rc = tg_io_file_open(&it->fix, path, 0)) < 0) goto err;
    if ((rc = tg_io_create(&it->io, &io)) < 0) goto err;
    it->ip = malloc((p->ip_nodes + 1) * sizeof *it->ip);
    it->buf = malloc(p->read_bytes);
    it->reqs = calloc(MAX_REQS, sizeof *it->reqs);
    it->req_node = malloc(MAX_REQS * sizeof *it->req_node);
    it->req_c = malloc(MAX_REQS * sizeof *it->req_c);
    if (!it->ip || !it->buf || !it->reqs || !it->req_node || !it->req_c) {
        rc = tg_err(-ENOMEM, "rank: out of memory for the read buffers (%" PRIu64 " bytes)",
                    buffer_bytes(p));
        goto err;
    }
    return 0;
err:
    iter_close(it);
    return rc;
}

/* Reads the queued ranges in one batched call and adds each entry's share to dst. */
static int flush(iter_t *it, float *dst)
{
    if (it->nreq == 0) return 0;
    int rc = tg_io_read_batch(it->io, it->reqs, it->nreq);
    if (rc < 0) return tg_err_prefix(rc, "rank");
    uint64_t n = it->p->n;
    for (size_t r = 0; r < it->nreq; r++) {
        const tg_io_req_t *q = &it->reqs[r];
        size_t m = q->len / it->p->esz;
        float c = it->req_c[r];
        for (size_t j = 0; j < m; j++) {
            uint64_t u;
            if (it->p->esz == 4) {
                uint32_t x;
                memcpy(&x, (const char *)q->dst + 4 * j, 4);
                u = x;
            } else {
                memcpy(&u, (const char *)q->dst + 8 * j, 8);
            }
            if (u >= n)
                return tg_err(-EINVAL,
                              "%s: offset %" PRIu64 ": in-neighbour %" PRIu64 " of node %" PRIu64
                              " is not a node id (num_nodes = %" PRIu64 ")",
                              tg_io_file_path(it->fix), q->off + j * it->p->esz, u, it->req_node[r],
                              n);
            dst[u] += c;
        }
    }
    it->nreq = 0;
    it->fill = 0;
    return 0;
}

/* Queues the entries [lo, hi) of node v, each to receive c, flushing when the buffer or the
 * request list is full (a long list goes in pieces). */
static int queue_node(iter_t *it, float *dst, uint64_t v, uint64_t lo, uint64_t hi, float c)
{
    size_t esz = it->p->esz;
    while (lo < hi) {
        uint64_t room = (it->p->read_bytes - it->fill) / esz;
        if (room == 0 || it->nreq == MAX_REQS) {
            int rc = flush(it, dst);
            if (rc < 0) return rc;
            continue;
        }
        uint64_t m = TG_MIN(room, hi - lo);
        tg_io_req_t *q = &it->reqs[it->nreq];
        memset(q, 0, sizeof *q);
        q->file = it->fix;
        q->off = lo * esz;
        q->len = (size_t)(m * esz);
        q->dst = it->buf + it->fill;
        it->req_node[it->nreq] = v;
        it->req_c[it->nreq] = c;
        it->nreq++;
        it->fill += (size_t)(m * esz);
        lo += m;
    }
    return 0;
}

/* indptr[v0 .. v0 + cnt] into it->ip, checked: starts at 0, never decreases (also across
 * chunks: prev is the value the last chunk ended with), ends at num_edges. */
static int read_indptr(iter_t *it, uint64_t v0, size_t cnt, uint64_t prev)
{
    const char *path = tg_io_file_path(it->fip);
    int rc = tg_io_read(it->io, it->fip, v0 * 8, (cnt + 1) * 8, it->ip);
    if (rc < 0) return tg_err_prefix(rc, "rank");
    uint64_t n = it->p->n, e = it->p->e;
    if (v0 == 0 && it->ip[0] != 0)
        return tg_err(-EINVAL, "%s: offset 0: indptr[0] = %" PRIu64 ", expected 0", path,
                      it->ip[0]);
    for (size_t i = 0; i <= cnt; i++) {
        uint64_t v = v0 + i, x = it->ip[i];
        if (x < prev)
            return tg_err(-EINVAL,
                          "%s: offset %" PRIu64 ": indptr decreases at node %" PRIu64 " (%" PRIu64
                          " after %" PRIu64 ")",
                          path, v * 8, v, x, prev);
        if (x > e || (v == n && x != e))
            return tg_err(-EINVAL,
                          "%s: offset %" PRIu64 ": indptr[%" PRIu64 "] = %" PRIu64
                          ", expected %snum_edges = %" PRIu64,
                          path, v * 8, v, x, v == n ? "" : "at most ", e);
        prev = x;
    }
    return 0;
}

/* One iteration with fanout f: dst = src + a * (the reversed, weighted push of src). */
static int iterate(iter_t *it, const float *src, float *dst, int64_t f, double a, tg_progress_t *pg)
{
    const plan_t *p = it->p;
    memcpy(dst, src, (size_t)p->n * sizeof *dst);
    if (f == 0) return 0; /* no neighbour is sampled: nothing moves, nothing to read */
    uint64_t prev = 0;
    int rc;
    for (uint64_t v0 = 0; v0 < p->n; v0 += p->ip_nodes) {
        size_t cnt = (size_t)TG_MIN((uint64_t)p->ip_nodes, p->n - v0);
        if ((rc = read_indptr(it, v0, cnt, prev)) < 0) return rc;
        prev = it->ip[cnt];
        for (size_t i = 0; i < cnt; i++) {
            uint64_t v = v0 + i, lo = it->ip[i], hi = it->ip[i + 1], d = hi - lo;
            if (d == 0 || src[v] == 0) continue;
            double w = f < 0 || (uint64_t)f >= d ? 1.0 : (double)f / (double)d;
            float c = (float)(a * w * (double)src[v]);
            if (c == 0) continue; /* underflow: would add nothing */
            if ((rc = queue_node(it, dst, v, lo, hi, c)) < 0) return rc;
        }
        if (pg) tg_progress_update(pg, v0 + cnt, NULL);
    }
    return flush(it, dst);
}

/* s = t: 1 on every seed. Streams train_idx.bin (through it->buf) unless the caller gave them. */
static int set_seeds(iter_t *it, float *s)
{
    const plan_t *p = it->p;
    const tg_dataset_t *ds = it->ds;
    memset(s, 0, (size_t)p->n * sizeof *s);
    it->seeds = 0;
    if (p->o.seeds) {
        for (uint64_t i = 0; i < p->o.num_seeds; i++) {
            uint64_t v = p->o.seeds[i];
            if (v >= p->n)
                return tg_err(-EINVAL,
                              "rank: seed %" PRIu64 " (item %" PRIu64 ") is not a node id "
                              "(num_nodes = %" PRIu64 ")",
                              v, i, p->n);
            it->seeds += s[v] == 0;
            s[v] = 1;
        }
    } else {
        char path[4096];
        tg_dataset_path(ds, TG_FILE_TRAIN, path, sizeof path);
        tg_io_file_t *f;
        int rc = tg_io_file_open(&f, path, 0);
        if (rc < 0) return rc;
        uint64_t bytes = ds->meta.num_train * p->esz;
        size_t step = p->read_bytes / p->esz * p->esz;
        for (uint64_t off = 0; off < bytes && rc == 0; off += step) {
            size_t len = (size_t)TG_MIN((uint64_t)step, bytes - off);
            if ((rc = tg_io_read(it->io, f, off, len, it->buf)) < 0) break;
            for (size_t j = 0; j < len / p->esz; j++) {
                uint64_t v;
                if (p->esz == 4) {
                    uint32_t x;
                    memcpy(&x, it->buf + 4 * j, 4);
                    v = x;
                } else {
                    memcpy(&v, it->buf + 8 * j, 8);
                }
                if (v >= p->n) {
                    rc = tg_err(-EINVAL,
                                "%s: offset %" PRIu64 ": node id %" PRIu64 ", expected < %" PRIu64,
                                path, off + j * p->esz, v, p->n);
                    break;
                }
                it->seeds += s[v] == 0;
                s[v] = 1;
            }
        }
        tg_io_file_close(f);
        if (rc < 0) return rc;
    }
    if (it->seeds == 0)
        return tg_err(-EINVAL, "%s: rank: no seeds (%s is empty): nothing to rank from", ds->dir,
                      p->o.seeds ? "the seed list" : "the training split");
    return 0;
}

/* Runs the iterations over block (2 N floats: s(k) and s(k+1) alternate between its halves);
 * *final is the half with the result. */
static int run(const tg_dataset_t *ds, const plan_t *p, float *block, float **final,
               uint32_t *iters, uint64_t *seeds)
{
    iter_t it;
    int rc = iter_open(&it, ds, p);
    if (rc < 0) return rc;
    float *cur = block, *nxt = block + p->n;
    if ((rc = set_seeds(&it, cur)) < 0) goto out;
    *seeds = it.seeds;
    int L = p->o.num_layers;
    uint32_t k;
    for (k = 0; k < p->o.iterations; k++) {
        int64_t f = p->o.fanouts[L - 1 - (int)(k % (uint32_t)L)];
        tg_progress_t pg;
        char label[48];
        snprintf(label, sizeof label, "rank iteration %u/%u", k + 1, p->o.iterations);
        if (p->o.progress) tg_progress_begin(&pg, label, p->n, "nodes");
        rc = iterate(&it, cur, nxt, f, p->o.damping, p->o.progress ? &pg : NULL);
        if (p->o.progress) tg_progress_end(&pg);
        if (rc < 0) goto out;
        float *t = cur;
        cur = nxt;
        nxt = t;
    }
    *final = cur;
    *iters = k;
out:
    iter_close(&it);
    return rc;
}

static int reserve(const plan_t *p, uint64_t bytes, const char *what)
{
    if (p->o.mem && bytes > p->o.mem) {
        char a[32], b[32];
        return tg_err(-ENOMEM,
                      "rank: needs %s (2 x 4 bytes per node for %" PRIu64
                      " nodes, and read and write buffers), mem is %s",
                      tg_fmt_bytes(bytes, a, sizeof a), p->n, tg_fmt_bytes(p->o.mem, b, sizeof b));
    }
    return p->o.budget ? tg_budget_reserve(p->o.budget, bytes, what) : 0;
}

static void release(const plan_t *p, uint64_t bytes)
{
    if (p->o.budget) tg_budget_release(p->o.budget, bytes);
}

int tg_rank_compute(const tg_dataset_t *ds, const tg_rank_opts_t *o, float *scores)
{
    plan_t p;
    int rc = plan_init(&p, ds, o);
    if (rc < 0) return rc;
    uint64_t need = plan_bytes(&p);
    if ((rc = reserve(&p, need, "rank scores")) < 0) return rc;
    float *block = malloc(TG_MAX((size_t)(2 * p.n) * sizeof(float), 1)), *final;
    uint32_t k = 0;
    uint64_t seeds;
    if (!block)
        rc = tg_err(-ENOMEM, "rank: out of memory for 2 x %" PRIu64 " scores", p.n);
    else if ((rc = run(ds, &p, block, &final, &k, &seeds)) == 0)
        memcpy(scores, final, (size_t)p.n * sizeof *scores);
    free(block);
    release(&p, need);
    return rc;
}

/* ---------------------------------------------------------------- the ranking */

static void insertion_sort(uint64_t *a, size_t n)
{
    for (size_t i = 1; i < n; i++) {
        uint64_t x = a[i];
        size_t j = i;
        for (; j > 0 && a[j - 1] > x; j--)
            a[j] = a[j - 1];
        a[j] = x;
    }
}

/* In-place MSD radix sort (American flag sort) of a[0..n) on the byte at shift and those below:
 * no memory beside the keys, which already fill the 8 bytes per node the scores held. */
static void flag_sort(uint64_t *a, size_t n, int shift, tg_progress_t *pg, uint64_t *done)
{
    if (n <= SORT_SMALL) {
        insertion_sort(a, n);
        if (pg) *done += n;
        return;
    }
    size_t cnt[256] = {0}, next[256], end[256];
    for (size_t i = 0; i < n; i++)
        cnt[(a[i] >> shift) & 0xff]++;
    size_t s = 0;
    for (int b = 0; b < 256; b++) {
        next[b] = s;
        s += cnt[b];
        end[b] = s;
    }
    for (int b = 0; b < 256; b++) /* cycle each key to its bucket */
        while (next[b] < end[b]) {
            uint64_t x = a[next[b]];
            int d = (int)((x >> shift) & 0xff);
            while (d != b) {
                uint64_t y = a[next[d]];
                a[next[d]++] = x;
                x = y;
                d = (int)((x >> shift) & 0xff);
            }
            a[next[b]++] = x;
        }
    for (int b = 0; b < 256; b++) {
        size_t lo = end[b] - cnt[b];
        if (shift > 0 && cnt[b] > 1)
            flag_sort(a + lo, cnt[b], shift - 8, pg, done);
        else if (pg)
            *done += cnt[b];
        if (pg && shift == 56) tg_progress_update(pg, *done, NULL);
    }
}

/* Turns the scores (the first N floats of block) into keys (~score bits) << 32 | id in place
 * and sorts them: ascending keys = descending score, ties by ascending id. Scores are >= 0, so
 * their bit patterns order as the values do. Key i takes floats 2i and 2i+1; going down from
 * the last node, those hold scores already turned into keys (or score i itself, read first). */
static void sort_keys(float *block, uint64_t n, int progress)
{
    uint64_t *keys = (uint64_t *)(void *)block;
    for (uint64_t i = n; i-- > 0;) {
        uint32_t bits;
        memcpy(&bits, &block[i], 4);
        uint64_t key = (uint64_t)(~bits) << 32 | i;
        memcpy(&keys[i], &key, 8);
    }
    tg_progress_t pg;
    uint64_t done = 0;
    if (progress) tg_progress_begin(&pg, "rank sort", n, "nodes");
    flag_sort(keys, (size_t)n, 56, progress ? &pg : NULL, &done);
    if (progress) tg_progress_end(&pg);
}

typedef struct {
    char magic[8];
    uint32_t id_bytes, num_layers;
    uint64_t num_nodes, num_seeds;
    uint32_t iterations, zero;
    double damping, seconds, score_sum;
} record_t;
_Static_assert(sizeof(record_t) == 64, "the record is 64 bytes");

static uint64_t scores_offset(uint64_t n)
{
    return REC_BYTES + (n * 4 + 4095) / 4096 * 4096;
}

/* The payload: record, ids, zeros to 4096, scores, from the sorted keys, through a chunk. */
static int write_payload(tg_derived_writer_t *w, const uint64_t *keys, const record_t *rec,
                         void *chunk)
{
    memset(chunk, 0, REC_BYTES);
    memcpy(chunk, rec, sizeof *rec);
    int rc = tg_derived_append(w, chunk, REC_BYTES);
    uint64_t n = rec->num_nodes, step = WRITE_BYTES / 4;
    for (int part = 0; part < 2 && rc == 0; part++) {
        for (uint64_t i = 0; i < n && rc == 0; i += step) {
            size_t m = (size_t)TG_MIN(step, n - i);
            uint32_t *out = chunk;
            for (size_t j = 0; j < m; j++)
                out[j] = part == 0 ? (uint32_t)keys[i + j] : ~(uint32_t)(keys[i + j] >> 32);
            rc = tg_derived_append(w, chunk, m * 4);
        }
        size_t pad = (size_t)(scores_offset(n) - REC_BYTES - n * 4);
        if (part == 0 && pad && rc == 0) {
            memset(chunk, 0, pad);
            rc = tg_derived_append(w, chunk, pad);
        }
    }
    return rc;
}

static int build(const tg_dataset_t *ds, const plan_t *p)
{
    double t0 = tg_now();
    uint64_t need = plan_bytes(p);
    int rc = reserve(p, need, "rank build");
    if (rc < 0) return rc;
    float *block = malloc(TG_MAX((size_t)(2 * p->n) * sizeof(float), 1)), *final = NULL;
    void *chunk = tg_aligned_alloc(4096, WRITE_BYTES);
    tg_derived_writer_t *w = NULL;
    record_t rec = {.magic = REC_MAGIC,
                    .id_bytes = 4,
                    .num_layers = (uint32_t)p->o.num_layers,
                    .num_nodes = p->n,
                    .damping = p->o.damping};
    if (!block || !chunk) {
        rc = tg_err(-ENOMEM, "rank: out of memory for 2 x %" PRIu64 " scores", p->n);
        goto out;
    }
    if ((rc = run(ds, p, block, &final, &rec.iterations, &rec.num_seeds)) < 0) goto out;
    if (final != block) memcpy(block, final, (size_t)p->n * sizeof *block); /* halves apart */
    for (uint64_t v = 0; v < p->n; v++)
        rec.score_sum += block[v];
    sort_keys(block, p->n, p->o.progress);
    rec.seconds = tg_now() - t0; /* the write is left out: it is the disk's, not the ranking's */
    if ((rc = tg_derived_create(&w, ds, p->o.root, TG_RANK_KIND, p->params, WRITE_BYTES)) < 0)
        goto out;
    rc = write_payload(w, (const uint64_t *)(void *)block, &rec, chunk);
    rc = rc < 0 ? (tg_derived_abort(w), rc) : tg_derived_commit(w);
    if (rc == 0)
        tg_log_info("rank: %" PRIu64 " nodes from %" PRIu64 " seeds, %u iterations, %.1f s (%s)",
                    p->n, rec.num_seeds, rec.iterations, tg_now() - t0, p->params);
out:
    free(block);
    free(chunk);
    release(p, need);
    return rc;
}

/* ---------------------------------------------------------------- the file */

/* Checks the record against the dataset and the payload's length: -ESTALE naming what differs
 * (the file is then rebuilt; the derived header does not cover the payload's bytes). */
static int read_record(tg_rank_t *r, uint64_t n)
{
    record_t rec;
    const char *path = r->file->path;
    if (r->file->payload_len < sizeof rec)
        return tg_err(-ESTALE, "%s: payload of %" PRIu64 " bytes, shorter than its record", path,
                      r->file->payload_len);
    int rc = tg_derived_read(r->file, &rec, sizeof rec, 0);
    if (rc < 0) return rc;
    uint64_t want = scores_offset(n) + n * 4;
    if (memcmp(rec.magic, REC_MAGIC, 8) != 0)
        return tg_err(-ESTALE, "%s: payload offset 0: magic is not %s", path, REC_MAGIC);
    if (rec.id_bytes != 4 || rec.num_nodes != n || r->file->payload_len != want)
        return tg_err(-ESTALE,
                      "%s: payload offset 0: record says %u-byte ids of %" PRIu64
                      " nodes in %" PRIu64 " bytes, expected 4-byte ids of %" PRIu64
                      " nodes in %" PRIu64,
                      path, rec.id_bytes, rec.num_nodes, r->file->payload_len, n, want);
    r->info = (tg_rank_info_t){.num_nodes = n,
                               .num_seeds = rec.num_seeds,
                               .iterations = rec.iterations,
                               .damping = rec.damping,
                               .seconds = rec.seconds,
                               .score_sum = rec.score_sum};
    r->ids_off = REC_BYTES;
    r->scores_off = scores_offset(n);
    return 0;
}

/* Opens and checks the file: 0, or -ENOENT / -ESTALE (rebuild), or another error. */
static int try_open(tg_rank_t *r, const tg_dataset_t *ds, const plan_t *p)
{
    tg_derived_close(r->file);
    r->file = NULL;
    int rc = tg_derived_open(&r->file, ds, p->o.root, TG_RANK_KIND, p->params, 0);
    if (rc == 0) rc = read_record(r, p->n);
    return rc;
}

int tg_rank_open(tg_rank_t **out, const tg_dataset_t *ds, const tg_rank_opts_t *o)
{
    *out = NULL;
    plan_t p;
    int rc = plan_init(&p, ds, o);
    if (rc < 0) return rc;
    tg_rank_t *r = calloc(1, sizeof *r);
    if (!r) return tg_err(-ENOMEM, "rank: out of memory");
    rc = try_open(r, ds, &p);
    if (rc == -ENOENT || rc == -ESTALE) {
        if (rc == -ESTALE) tg_log_info("rank: rebuilding: %s", tg_errmsg());
        if ((rc = build(ds, &p)) == 0 && (rc = try_open(r, ds, &p)) == 0) r->info.built = 1;
    }
    if (rc < 0) {
        tg_rank_close(r);
        return rc;
    }
    *out = r;
    return 0;
}

void tg_rank_close(tg_rank_t *r)
{
    if (!r) return;
    tg_derived_close(r->file);
    free(r);
}

const tg_rank_info_t *tg_rank_info(const tg_rank_t *r)
{
    return &r->info;
}

const char *tg_rank_path(const tg_rank_t *r)
{
    return r->file->path;
}

int tg_rank_read(tg_rank_t *r, uint64_t first, uint64_t n, uint64_t *ids, float *scores)
{
    uint64_t N = r->info.num_nodes;
    if (first > N || n > N - first)
        return tg_err(-EINVAL, "%s: ranks %" PRIu64 "..+%" PRIu64 " past %" PRIu64 " nodes",
                      r->file->path, first, n, N);
    int rc = 0;
    if (ids && n) {
        /* the u32 ids land in the upper half of ids[] and widen forward in place: id i's 8
         * bytes overlap only u32 ids at or before i, already read */
        uint32_t *narrow = (uint32_t *)(void *)ids + n;
        if ((rc = tg_derived_read(r->file, narrow, (size_t)n * 4, r->ids_off + first * 4)) < 0)
            return rc;
        for (uint64_t i = 0; i < n; i++) {
            uint32_t x;
            memcpy(&x, &narrow[i], 4);
            /* the derived header does not cover the payload's bytes: a damaged id stops here,
             * not in a caller's arrays */
            if (x >= N)
                return tg_err(-EINVAL,
                              "%s: payload offset %" PRIu64 ": id %" PRIu32 " at rank %" PRIu64
                              " is not a node (N = %" PRIu64
                              "): the file is damaged (tiergnn clean removes it)",
                              r->file->path, r->ids_off + (first + i) * 4, x, first + i, N);
            ids[i] = x;
        }
    }
    if (scores && n)
        rc = tg_derived_read(r->file, scores, (size_t)n * 4, r->scores_off + first * 4);
    return rc;
}

int tg_rank_top(tg_rank_t *r, uint64_t k, uint64_t *ids)
{
    return tg_rank_read(r, 0, TG_MIN(k, r->info.num_nodes), ids, NULL);
}
