/* tiergnn info and tiergnn verify: read a dataset in bounded memory (a few 8 MiB windows, plus
 * two bits per node for the split overlap check and 8 MiB of degree counters) and report on it.
 *
 * verify reads every byte once: it recomputes each file's CRC-32 and checks, on the same pass,
 * what the format promises (docs/FORMAT.md): indptr starts at 0, never decreases and ends at
 * num_edges; every index is a node id, and sources within a node are ascending; features are
 * finite; labels are in range; split ids are node ids and no node is in two splits. The first
 * problem is returned as an error naming the file and the byte offset. */
#include "tiergnn/data.h"

#include "crc-impl.h"

#include <fcntl.h>
#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define WINDOW (8u << 20)
#define DEG_EXACT (1u << 20) /* degrees below this are counted exactly in a table */

/* ---------------------------------------------------------------- sequential reader */

/* Reads a file front to back through a window, feeding every byte to a CRC and a progress
 * bar. Elements never straddle windows: the window is a multiple of 8 bytes. */
typedef struct seqr {
    int fd;
    char path[4096];
    uint64_t size, off; /* file size; bytes consumed */
    char *buf;
    size_t cap;      /* window size: WINDOW, or the file rounded up to 8 bytes when smaller */
    size_t pos, len; /* window: bytes [pos, len) not consumed yet */
    uint32_t crc;
    tg_progress_t *pg;
    uint64_t *pg_done;
} seqr_t;

static int seqr_open(seqr_t *r, const tg_dataset_t *ds, tg_file_id_t id, tg_progress_t *pg,
                     uint64_t *pg_done)
{
    memset(r, 0, sizeof *r);
    tg_dataset_path(ds, id, r->path, sizeof r->path);
    r->size = ds->meta.files[id].size;
    r->pg = pg;
    r->pg_done = pg_done;
    r->fd = open(r->path, O_RDONLY | O_CLOEXEC);
    if (r->fd < 0) return tg_err(-errno, "%s: cannot open: %s", r->path, strerror(errno));
    posix_fadvise(r->fd, 0, 0, POSIX_FADV_SEQUENTIAL);
    r->cap = r->size < WINDOW ? (size_t)TG_MAX((r->size + 7) & ~(uint64_t)7, 8) : WINDOW;
    r->buf = malloc(r->cap);
    if (!r->buf) {
        close(r->fd);
        r->fd = -1;
        return tg_err(-ENOMEM, "out of memory");
    }
    return 0;
}

static void seqr_close(seqr_t *r)
{
    if (r->fd >= 0) close(r->fd);
    r->fd = -1;
    free(r->buf);
    r->buf = NULL;
}

/* Makes the next bytes of the file available at buf + pos (reading a new window when the
 * current one is used up). Returns the bytes available, 0 at the end, or an error. */
static int64_t seqr_fill(seqr_t *r)
{
    if (r->pos < r->len) return (int64_t)(r->len - r->pos);
    uint64_t at = r->off;
    if (at >= r->size) return 0;
    size_t n = (size_t)TG_MIN((uint64_t)r->cap, r->size - at);
    int rc = tg_pread_full(r->fd, r->buf, n, at, r->path);
    if (rc) return rc;
    r->crc = tg_data_crc32(r->crc, r->buf, n);
    r->pos = 0;
    r->len = n;
    r->off += n;
    if (r->pg) {
        *r->pg_done += n;
        tg_progress_update(r->pg, *r->pg_done, NULL);
    }
    return (int64_t)n;
}

/* Byte offset in the file of the byte at buf + pos. */
static uint64_t seqr_at(const seqr_t *r)
{
    return r->off - r->len + r->pos;
}

/* Next u64 / u32 of an array file (the caller knows the count). */
static int seqr_u64(seqr_t *r, uint64_t *v)
{
    int64_t n = seqr_fill(r);
    if (n < 0) return (int)n;
    if (n < 8)
        return tg_err(-EIO, "%s: offset %" PRIu64 ": unexpected end of file", r->path, seqr_at(r));
    memcpy(v, r->buf + r->pos, 8);
    r->pos += 8;
    return 0;
}

static int seqr_finish_crc(seqr_t *r, const tg_dataset_t *ds, tg_file_id_t id)
{
    while (r->off < r->size) { /* whatever the checks did not consume */
        r->pos = r->len;
        int64_t n = seqr_fill(r);
        if (n < 0) return (int)n;
    }
    if (r->crc != ds->meta.files[id].crc32)
        return tg_err(-EINVAL,
                      "%s: checksum %08x does not match %08x recorded in %s (the file is corrupt "
                      "or was changed)",
                      r->path, r->crc, ds->meta.files[id].crc32, TG_META_NAME);
    return 0;
}

/* ---------------------------------------------------------------- verify */

static int check_indptr(const tg_dataset_t *ds, seqr_t *r)
{
    const tg_meta_t *m = &ds->meta;
    uint64_t prev = 0;
    for (uint64_t v = 0; v <= m->num_nodes; v++) {
        uint64_t x = 0;
        int rc = seqr_u64(r, &x);
        if (rc) return rc;
        if (v == 0 && x != 0)
            return tg_err(-EINVAL, "%s: offset 0: indptr[0] = %" PRIu64 ", expected 0", r->path, x);
        if (x < prev)
            return tg_err(-EINVAL,
                          "%s: offset %" PRIu64 ": indptr decreases at node %" PRIu64 " (%" PRIu64
                          " after %" PRIu64 ")",
                          r->path, v * 8, v, x, prev);
        if (x > m->num_edges)
            return tg_err(-EINVAL,
                          "%s: offset %" PRIu64 ": indptr[%" PRIu64 "] = %" PRIu64
                          " is beyond num_edges = %" PRIu64,
                          r->path, v * 8, v, x, m->num_edges);
        prev = x;
    }
    if (prev != m->num_edges)
        return tg_err(-EINVAL,
                      "%s: offset %" PRIu64 ": indptr[N] = %" PRIu64
                      ", expected num_edges = %" PRIu64,
                      r->path, m->num_nodes * 8, prev, m->num_edges);
    return 0;
}

/* Every index < N and ascending within each node's range; indptr (already checked) is read
 * again alongside to know where the ranges end. */
static int check_indices(const tg_dataset_t *ds, seqr_t *r, seqr_t *ip)
{
    const tg_meta_t *m = &ds->meta;
    size_t isz = tg_index_dtype_size(m->index_dtype);
    uint64_t v = 0, end = 0, prev = 0, e = 0;
    int rc = seqr_u64(ip, &end); /* indptr[0] */
    while (!rc && e < m->num_edges) {
        int64_t n = seqr_fill(r);
        if (n < 0) return (int)n;
        if (n == 0) return tg_err(-EIO, "%s: unexpected end of file", r->path);
        size_t cnt = (size_t)n / isz;
        const char *p = r->buf + r->pos;
        for (size_t i = 0; i < cnt && e < m->num_edges; i++, e++) {
            uint64_t x;
            if (isz == 8) {
                memcpy(&x, p + i * 8, 8);
            } else {
                uint32_t y;
                memcpy(&y, p + i * 4, 4);
                x = y;
            }
            if (x >= m->num_nodes)
                return tg_err(-EINVAL,
                              "%s: offset %" PRIu64 ": source id %" PRIu64
                              " out of range (num_nodes = %" PRIu64 ")",
                              r->path, e * isz, x, m->num_nodes);
            int first = 0;
            while (e >= end) { /* entering the range of the next node(s) */
                if ((rc = seqr_u64(ip, &end))) return rc;
                v++;
                first = 1;
            }
            if (!first && e > 0 && x < prev)
                return tg_err(-EINVAL,
                              "%s: offset %" PRIu64 ": in-neighbours of node %" PRIu64
                              " are not ascending (%" PRIu64 " after %" PRIu64 ")",
                              r->path, e * isz, v - 1, x, prev);
            prev = x;
        }
        r->pos += cnt * isz;
    }
    return rc;
}

static int check_features(const tg_dataset_t *ds, seqr_t *r)
{
    const tg_meta_t *m = &ds->meta;
    size_t esz = tg_feat_dtype_size(m->feat_dtype);
    for (;;) {
        int64_t n = seqr_fill(r);
        if (n <= 0) return (int)n;
        size_t cnt = (size_t)n / esz;
        const char *p = r->buf + r->pos;
        for (size_t i = 0; i < cnt; i++) {
            int bad;
            if (esz == 4) {
                uint32_t bits;
                memcpy(&bits, p + 4 * i, 4);
                bad = (bits & 0x7f800000u) == 0x7f800000u;
            } else {
                uint16_t bits;
                memcpy(&bits, p + 2 * i, 2);
                bad = (bits & 0x7c00u) == 0x7c00u;
            }
            if (bad) {
                uint64_t at = seqr_at(r) + i * esz, el = at / esz;
                return tg_err(-EINVAL,
                              "%s: offset %" PRIu64 ": feature [%" PRIu64 "][%" PRIu64
                              "] is not finite (Inf or NaN)",
                              r->path, at, el / m->feat_dim, el % m->feat_dim);
            }
        }
        r->pos += cnt * esz;
    }
}

static int check_labels(const tg_dataset_t *ds, seqr_t *r)
{
    const tg_meta_t *m = &ds->meta;
    int32_t lo = m->multi_label ? 0 : -1, hi = m->multi_label ? 1 : (int32_t)m->num_classes - 1;
    for (;;) {
        int64_t n = seqr_fill(r);
        if (n <= 0) return (int)n;
        size_t cnt = (size_t)n / 4;
        const char *p = r->buf + r->pos;
        for (size_t i = 0; i < cnt; i++) {
            int32_t l;
            memcpy(&l, p + 4 * i, 4);
            if (l < lo || l > hi)
                return tg_err(-EINVAL, "%s: offset %" PRIu64 ": label %d out of range %d..%d",
                              r->path, seqr_at(r) + 4 * i, l, lo, hi);
        }
        r->pos += cnt * 4;
    }
}

static int check_split(const tg_dataset_t *ds, seqr_t *r, tg_file_id_t id, uint8_t *seen,
                       const char *const owner[])
{
    const tg_meta_t *m = &ds->meta;
    size_t isz = tg_index_dtype_size(m->index_dtype);
    for (;;) {
        int64_t n = seqr_fill(r);
        if (n <= 0) return (int)n;
        size_t cnt = (size_t)n / isz;
        const char *p = r->buf + r->pos;
        for (size_t i = 0; i < cnt; i++) {
            uint64_t x;
            if (isz == 8) {
                memcpy(&x, p + 8 * i, 8);
            } else {
                uint32_t y;
                memcpy(&y, p + 4 * i, 4);
                x = y;
            }
            uint64_t at = seqr_at(r) + i * isz;
            if (x >= m->num_nodes)
                return tg_err(-EINVAL,
                              "%s: offset %" PRIu64 ": node id %" PRIu64
                              " out of range (num_nodes = %" PRIu64 ")",
                              r->path, at, x, m->num_nodes);
            if (!seen) continue;
            /* two bits per node: 0 = in no split yet, else 1 + the split it is in */
            unsigned sh = (unsigned)(x % 4) * 2, cur = (seen[x / 4] >> sh) & 3;
            if (cur)
                return tg_err(-EINVAL, "%s: offset %" PRIu64 ": node %" PRIu64 " is already in %s",
                              r->path, at, x, owner[cur - 1]);
            seen[x / 4] |= (uint8_t)((unsigned)(id - TG_FILE_TRAIN + 1) << sh);
        }
        r->pos += cnt * isz;
    }
}

int tg_dataset_verify(const char *dir)
{
    tg_dataset_t *ds;
    int rc = tg_dataset_open(&ds, dir, TG_OPEN_CHECK_SIZES);
    if (rc) return rc;
    const tg_meta_t *m = &ds->meta;
    uint64_t total = 0, done = 0;
    for (int i = 0; i < TG_FILE_COUNT; i++)
        total += m->files[i].size;
    tg_progress_t pg;
    tg_progress_begin(&pg, "verify", total, "bytes");
    /* A node in two splits is a leak between training and evaluation. The check needs two bits
     * per node; past 2^33 nodes (2 GiB of bits) it is skipped. */
    uint8_t *seen = NULL;
    if (m->num_nodes <= (1ull << 33)) {
        seen = calloc((size_t)(m->num_nodes / 4 + 1), 1);
        if (!seen) {
            tg_dataset_close(ds);
            return tg_err(-ENOMEM, "verify: out of memory for the split check");
        }
    }
    static const char *const owner[3] = {"train_idx.bin", "valid_idx.bin", "test_idx.bin"};
    for (int i = 0; i < TG_FILE_COUNT && !rc; i++) {
        tg_file_id_t id = (tg_file_id_t)i;
        seqr_t r, ip;
        if ((rc = seqr_open(&r, ds, id, &pg, &done))) break;
        switch (id) {
        case TG_FILE_INDPTR:
            rc = check_indptr(ds, &r);
            break;
        case TG_FILE_INDICES:
            /* indptr again, without CRC or progress: it was checked just before */
            if (!(rc = seqr_open(&ip, ds, TG_FILE_INDPTR, NULL, NULL))) {
                rc = check_indices(ds, &r, &ip);
                seqr_close(&ip);
            }
            break;
        case TG_FILE_FEATURES:
            rc = check_features(ds, &r);
            break;
        case TG_FILE_LABELS:
            rc = check_labels(ds, &r);
            break;
        default:
            rc = check_split(ds, &r, id, seen, owner);
            break;
        }
        if (!rc) rc = seqr_finish_crc(&r, ds, id);
        seqr_close(&r);
    }
    tg_progress_end(&pg);
    free(seen);
    tg_dataset_close(ds);
    return rc;
}

/* ---------------------------------------------------------------- info */

typedef struct deg_stats {
    uint64_t n, min, max, zero;
    double sum;
    uint64_t *exact; /* count of nodes per degree < DEG_EXACT */
    uint64_t *big;   /* degrees >= DEG_EXACT (at most E / DEG_EXACT of them) */
    size_t nbig, capbig;
} deg_stats_t;

/* The degree of rank q (0 = smallest) among the n degrees. */
static uint64_t deg_rank(const deg_stats_t *s, uint64_t q)
{
    uint64_t acc = 0;
    for (uint64_t d = 0; d < DEG_EXACT; d++) {
        acc += s->exact[d];
        if (acc > q) return d;
    }
    return s->big[q - acc];
}

static int degree_stats(const tg_dataset_t *ds, deg_stats_t *s)
{
    memset(s, 0, sizeof *s);
    s->exact = calloc(DEG_EXACT, sizeof *s->exact);
    if (!s->exact) return tg_err(-ENOMEM, "info: out of memory");
    seqr_t r;
    int rc = seqr_open(&r, ds, TG_FILE_INDPTR, NULL, NULL);
    if (rc) return rc;
    uint64_t prev = 0;
    s->min = UINT64_MAX;
    for (uint64_t v = 0; v <= ds->meta.num_nodes && !rc; v++) {
        uint64_t x = 0;
        if ((rc = seqr_u64(&r, &x))) break;
        if (v == 0) {
            prev = x;
            continue;
        }
        if (x < prev) {
            rc = tg_err(-EINVAL, "%s: offset %" PRIu64 ": indptr decreases (run tiergnn verify)",
                        r.path, v * 8);
            break;
        }
        uint64_t d = x - prev;
        prev = x;
        s->n++;
        s->sum += (double)d;
        s->min = TG_MIN(s->min, d);
        s->max = TG_MAX(s->max, d);
        s->zero += d == 0;
        if (d < DEG_EXACT) {
            s->exact[d]++;
        } else {
            if (s->nbig == s->capbig) {
                size_t cap = s->capbig ? 2 * s->capbig : 64;
                uint64_t *p = realloc(s->big, cap * sizeof *p);
                if (!p) {
                    rc = tg_err(-ENOMEM, "info: out of memory");
                    break;
                }
                s->big = p;
                s->capbig = cap;
            }
            s->big[s->nbig++] = d;
        }
    }
    seqr_close(&r);
    if (!rc && s->nbig) qsort(s->big, s->nbig, sizeof *s->big, tg_cmp_u64);
    if (s->n == 0) s->min = 0;
    return rc;
}

/* Sum of the k largest degrees. */
static double deg_top_sum(const deg_stats_t *s, uint64_t k)
{
    double sum = 0;
    for (size_t i = s->nbig; i-- > 0 && k > 0; k--)
        sum += (double)s->big[i];
    for (uint64_t d = DEG_EXACT; d-- > 0 && k > 0;) {
        uint64_t t = TG_MIN(k, s->exact[d]);
        sum += (double)t * (double)d;
        k -= t;
    }
    return sum;
}

static void print_degrees(FILE *f, const deg_stats_t *s)
{
    uint64_t n = s->n;
    fprintf(f,
            "in-degree:  min %" PRIu64 ", median %" PRIu64 ", mean %.2f, p99 %" PRIu64
            ", max %" PRIu64 "\n",
            s->min, n ? deg_rank(s, (n - 1) / 2) : 0, n ? s->sum / (double)n : 0.0,
            n ? deg_rank(s, (uint64_t)((double)(n - 1) * 0.99)) : 0, s->max);
    fprintf(f, "            %" PRIu64 " nodes (%.2f%%) have no in-neighbours\n", s->zero,
            n ? 100.0 * (double)s->zero / (double)n : 0.0);
    if (n && s->sum > 0) {
        uint64_t top = (n + 99) / 100;
        fprintf(f, "            the top 1%% of nodes (%" PRIu64 ") hold %.1f%% of the edges\n", top,
                100.0 * deg_top_sum(s, top) / s->sum);
    }
    /* power-of-4 buckets: 0, 1-3, 4-15, ... up to the maximum */
    fprintf(f, "histogram:  ");
    uint64_t lo = 0, hi = 0;
    int first = 1;
    while (lo <= s->max) {
        uint64_t cnt = 0;
        for (uint64_t d = lo; d <= hi && d < DEG_EXACT; d++)
            cnt += s->exact[d];
        for (size_t i = 0; i < s->nbig; i++)
            cnt += s->big[i] >= lo && s->big[i] <= hi;
        if (lo == hi)
            fprintf(f, "%s%" PRIu64 ": %" PRIu64, first ? "" : " | ", lo, cnt);
        else
            fprintf(f, "%s%" PRIu64 "-%" PRIu64 ": %" PRIu64, first ? "" : " | ", lo, hi, cnt);
        first = 0;
        lo = hi + 1;
        hi = lo == 1 ? 3 : lo * 4 - 1;
    }
    fputc('\n', f);
}

static int print_labels(FILE *f, const tg_dataset_t *ds)
{
    const tg_meta_t *m = &ds->meta;
    uint64_t C = m->num_classes;
    uint64_t *cnt = calloc(C + 1, sizeof *cnt); /* cnt[C] = unlabelled / label-free nodes */
    if (!cnt) return tg_err(-ENOMEM, "info: out of memory");
    seqr_t r;
    int rc = seqr_open(&r, ds, TG_FILE_LABELS, NULL, NULL);
    uint64_t i = 0, positives = 0;
    while (!rc) {
        int64_t n = seqr_fill(&r);
        if (n <= 0) {
            rc = (int)n;
            break;
        }
        size_t k = (size_t)n / 4;
        for (size_t j = 0; j < k; j++, i++) {
            int32_t l;
            memcpy(&l, r.buf + r.pos + 4 * j, 4);
            if (m->multi_label) {
                if (l == 1) cnt[i % C]++, positives++;
            } else if (l >= 0 && (uint64_t)l < C) {
                cnt[l]++;
            } else {
                cnt[C]++;
            }
        }
        r.pos += k * 4;
    }
    seqr_close(&r);
    if (rc) {
        free(cnt);
        return rc;
    }
    uint64_t mn = UINT64_MAX, mx = 0, empty = 0;
    for (uint64_t c = 0; c < C; c++) {
        mn = TG_MIN(mn, cnt[c]);
        mx = TG_MAX(mx, cnt[c]);
        empty += cnt[c] == 0;
    }
    if (m->multi_label)
        fprintf(f,
                "labels:     multi-label, %" PRIu64 " classes, %.2f labels per node; per class "
                "min %" PRIu64 ", max %" PRIu64 " nodes\n",
                C, m->num_nodes ? (double)positives / (double)m->num_nodes : 0.0, mn, mx);
    else
        fprintf(f,
                "labels:     %" PRIu64 " classes; per class min %" PRIu64 ", max %" PRIu64
                " nodes (%" PRIu64 " classes empty); %" PRIu64 " unlabelled\n",
                C, mn, mx, empty, cnt[C]);
    if (C <= 16) {
        fprintf(f, "            ");
        for (uint64_t c = 0; c < C; c++)
            fprintf(f, "%s%" PRIu64 ": %" PRIu64, c ? " | " : "", c, cnt[c]);
        fputc('\n', f);
    }
    free(cnt);
    return 0;
}

int tg_dataset_info(const char *dir, FILE *f)
{
    tg_dataset_t *ds;
    int rc = tg_dataset_open(&ds, dir, TG_OPEN_CHECK_SIZES);
    if (rc) return rc;
    const tg_meta_t *m = &ds->meta;
    char b[32];
    uint64_t N = m->num_nodes;
    fprintf(f, "dataset:    %s (format version %d)\n", dir, m->format_version);
    if (m->source[0]) fprintf(f, "source:     %s\n", m->source);
    fprintf(f, "nodes:      %" PRIu64 "\n", N);
    fprintf(f, "edges:      %" PRIu64 " (CSC, %s indices)\n", m->num_edges,
            tg_index_dtype_name(m->index_dtype));
    fprintf(f, "features:   %" PRIu64 " x %u %s (%s)\n", N, m->feat_dim,
            tg_feat_dtype_name(m->feat_dtype),
            tg_fmt_bytes(m->files[TG_FILE_FEATURES].size, b, sizeof b));
    uint64_t assigned = m->num_train + m->num_valid + m->num_test;
    double pc = N ? 100.0 / (double)N : 0;
    fprintf(f,
            "splits:     train %" PRIu64 " (%.1f%%), valid %" PRIu64 " (%.1f%%), test %" PRIu64
            " (%.1f%%), in none %" PRIu64 "\n",
            m->num_train, pc * (double)m->num_train, m->num_valid, pc * (double)m->num_valid,
            m->num_test, pc * (double)m->num_test, assigned <= N ? N - assigned : 0);
    deg_stats_t s;
    rc = degree_stats(ds, &s);
    if (!rc) print_degrees(f, &s);
    free(s.exact);
    free(s.big);
    if (!rc) rc = print_labels(f, ds);
    if (!rc) {
        uint64_t total = 0;
        fprintf(f, "files:\n");
        for (int i = 0; i < TG_FILE_COUNT; i++) {
            total += m->files[i].size;
            fprintf(f, "  %-14s %14" PRIu64 " bytes  %10s  crc32 %08x\n",
                    tg_file_name((tg_file_id_t)i), m->files[i].size,
                    tg_fmt_bytes(m->files[i].size, b, sizeof b), m->files[i].crc32);
        }
        fprintf(f, "  %-14s %14" PRIu64 " bytes  %10s\n", "total", total,
                tg_fmt_bytes(total, b, sizeof b));
    }
    tg_dataset_close(ds);
    return rc;
}
