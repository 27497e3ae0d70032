/* The partitioned dataset (include/tiergnn/partition.h): the assignment of tg_part_assign turned
 * into a permutation, and the features and the adjacency rewritten in that order as derived/
 * files.
 *
 * Both rewrites read the original file once, sequentially, in windows of old ids. The new order
 * is part by part and, inside a part, by old id, so the rows (or lists) of one window that belong
 * to part k are consecutive in the output: a window costs one read and at most one positional
 * write per part it touches (a counting sort of its records by part in between). */
#include "tiergnn/partition.h"

#include "crc-impl.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define REC_BYTES 64
#define REC_MAGIC "TGPART01"
#define WINDOW_MIN ((uint64_t)1 << 20)
#define WINDOW_MAX ((uint64_t)256 << 20)
#define FLUSH_EVERY ((uint64_t)512 << 20) /* written bytes between flushes of the page cache */

/* ---------------------------------------------------------------- small helpers */

static inline uint64_t id_get(const void *a, size_t w, uint64_t i)
{
    return w == 4 ? ((const uint32_t *)a)[i] : ((const uint64_t *)a)[i];
}

static inline void id_put(void *a, size_t w, uint64_t i, uint64_t v)
{
    if (w == 4)
        ((uint32_t *)a)[i] = (uint32_t)v;
    else
        ((uint64_t *)a)[i] = v;
}

static uint64_t align_up(uint64_t x, uint64_t a)
{
    return (x + a - 1) / a * a;
}

int tg_part_params(const tg_part_assign_opts_t *o, tg_part_method_t method, char *buf, size_t len)
{
    if (method == TG_PART_AUTO)
        return tg_err(-EINVAL, "partition params: the method must be resolved first");
    int n = snprintf(buf, len, "parts=%u,method=%s,seed=%llu,imbalance=%g", o->parts,
                     tg_part_method_name(method), (unsigned long long)o->seed, o->imbalance);
    if (n > 0 && (size_t)n < len && method == TG_PART_STREAM)
        n += snprintf(buf + n, len - (size_t)n, ",passes=%u", o->stream_passes);
    if (n < 0 || (size_t)n >= len) return tg_err(-ENAMETOOLONG, "partition params: too long");
    return 0;
}

tg_part_method_t tg_part_resolve(const tg_dataset_t *ds, const tg_part_assign_opts_t *o, char *why,
                                 size_t why_len)
{
    if (why_len) why[0] = 0;
    if (o->method != TG_PART_AUTO) return o->method;
    uint64_t mem = o->mem_bytes ? o->mem_bytes : tg_phys_mem_bytes() / 4;
    uint64_t need = tg_part_metis_bytes(ds, o->parts);
    char a[32], b[32];
#ifdef TG_HAVE_METIS
    if (need <= mem) {
        snprintf(why, why_len, "METIS: its estimated %s fit in %s", tg_fmt_bytes(need, a, sizeof a),
                 tg_fmt_bytes(mem, b, sizeof b));
        return TG_PART_METIS;
    }
    snprintf(why, why_len, "streaming: METIS would need about %s, more than %s",
             tg_fmt_bytes(need, a, sizeof a), tg_fmt_bytes(mem, b, sizeof b));
#else
    (void)need, (void)mem, (void)a, (void)b;
    snprintf(why, why_len, "streaming: this build has no METIS");
#endif
    return TG_PART_STREAM;
}

/* ---------------------------------------------------------------- the rewrite's state */

typedef struct build {
    const tg_dataset_t *ds;
    const tg_part_build_opts_t *o;
    tg_part_build_stats_t *st;
    uint64_t N, E;
    uint32_t P;
    size_t idw; /* bytes of an id in the maps */
    uint32_t *part;
    void *n2o; /* new_of_old */
    uint64_t *pp;
    uint64_t window; /* bytes of each of the two window buffers */
    char params[256];
    /* the scatter of one window */
    uint64_t *run_bytes; /* per part: bytes of its run in the window */
    uint64_t *run_pos;   /* per part: where its run starts in the output buffer */
    uint64_t *run_dst;   /* per part: its run's payload offset in the output file */
    uint32_t *touched;
    uint32_t ntouched;
    uint64_t since_flush;
} build_t;

static int open_ro(const char *path, int *fd)
{
    if ((*fd = open(path, O_RDONLY | O_CLOEXEC)) < 0)
        return tg_err(-errno, "%s: cannot open: %s", path, strerror(errno));
    (void)posix_fadvise(*fd, 0, 0, POSIX_FADV_SEQUENTIAL);
    return 0;
}

/* Adds a record of `len` bytes of part k whose output starts at payload offset dst (when it is
 * the first of its part in the window). */
static void run_add(build_t *b, uint32_t k, uint64_t len, uint64_t dst)
{
    if (!len) return; /* an empty list takes no bytes: the part's run starts at its next record */
    if (!b->run_bytes[k]) {
        b->touched[b->ntouched++] = k;
        b->run_dst[k] = dst;
    }
    b->run_bytes[k] += len;
}

/* Lays the runs out in the output buffer (run_pos), in the order their parts were touched. */
static void runs_place(build_t *b)
{
    uint64_t at = 0;
    for (uint32_t i = 0; i < b->ntouched; i++) {
        uint32_t k = b->touched[i];
        b->run_pos[k] = at;
        at += b->run_bytes[k];
    }
}

/* Writes every run of the window, flushes now and then, and clears the runs. */
static int runs_write(build_t *b, tg_derived_writer_t *w, const char *out)
{
    int rc = 0;
    uint64_t total = 0;
    for (uint32_t i = 0; i < b->ntouched; i++) {
        uint32_t k = b->touched[i];
        uint64_t len = b->run_bytes[k];
        /* run_pos was advanced past the run while it was filled */
        if (!rc) rc = tg_derived_pwrite(w, out + b->run_pos[k] - len, len, b->run_dst[k]);
        total += len;
        b->run_bytes[k] = 0;
    }
    b->ntouched = 0;
    b->st->write_bytes += total;
    b->since_flush += total;
    if (!rc && b->since_flush >= FLUSH_EVERY) {
        rc = tg_derived_flush(w);
        b->since_flush = 0;
    }
    return rc;
}

/* ---------------------------------------------------------------- the map file */

static void rec_encode(unsigned char *r, const tg_part_summary_t *s)
{
    memset(r, 0, REC_BYTES);
    memcpy(r, REC_MAGIC, 8);
    uint32_t u[2] = {s->parts, (uint32_t)s->method};
    memcpy(r + 8, u, 8);
    uint64_t q[5] = {s->num_nodes, s->edges, s->cut_edges, s->min_part, s->max_part};
    memcpy(r + 16, q, 40);
    memcpy(r + 56, &s->assign_s, 8);
}

static int rec_decode(const unsigned char *r, tg_part_summary_t *s, const char *path)
{
    if (memcmp(r, REC_MAGIC, 8))
        return tg_err(-EINVAL, "%s: payload offset 0: not a partition record", path);
    uint32_t u[2];
    uint64_t q[5];
    memcpy(u, r + 8, 8);
    memcpy(q, r + 16, 40);
    memset(s, 0, sizeof *s);
    s->parts = u[0];
    s->method = (tg_part_method_t)u[1];
    s->num_nodes = q[0], s->edges = q[1], s->cut_edges = q[2];
    s->min_part = q[3], s->max_part = q[4];
    memcpy(&s->assign_s, r + 56, 8);
    s->balance = s->parts && s->num_nodes
                     ? (double)s->max_part / ((double)s->num_nodes / (double)s->parts)
                     : 0;
    return 0;
}

/* The permutation from the assignment: pp by counting, new_of_old by one ascending sweep (a
 * part's nodes in old-id order). */
static void permute(build_t *b)
{
    memset(b->pp, 0, (b->P + 1) * sizeof *b->pp);
    for (uint64_t v = 0; v < b->N; v++)
        b->pp[b->part[v] + 1]++;
    for (uint32_t k = 0; k < b->P; k++)
        b->pp[k + 1] += b->pp[k];
    /* run_pos as the per-part cursor */
    memcpy(b->run_pos, b->pp, b->P * sizeof *b->pp);
    for (uint64_t v = 0; v < b->N; v++)
        id_put(b->n2o, b->idw, v, b->run_pos[b->part[v]]++);
}

static int write_map(build_t *b)
{
    tg_derived_writer_t *w;
    int rc = tg_derived_create(&w, b->ds, NULL, "part", b->params, 0);
    if (rc < 0) return rc;
    unsigned char rec[REC_BYTES];
    rec_encode(rec, &b->st->sum);
    rc = tg_derived_append(w, rec, sizeof rec);
    if (!rc) rc = tg_derived_append(w, b->pp, (b->P + 1) * sizeof *b->pp);
    /* old_of_new, a window of new ids at a time (ascending old ids scattered into it) */
    uint64_t step = TG_MAX((uint64_t)1, b->window / b->idw);
    void *buf = rc ? NULL : malloc(step * b->idw);
    if (!rc && !buf) rc = tg_err(-ENOMEM, "partition: out of memory for a window");
    for (uint64_t lo = 0; !rc && lo < b->N; lo += step) {
        uint64_t hi = TG_MIN(b->N, lo + step);
        for (uint64_t v = 0; v < b->N; v++) {
            uint64_t n = id_get(b->n2o, b->idw, v);
            if (n >= lo && n < hi) id_put(buf, b->idw, n - lo, v);
        }
        rc = tg_derived_append(w, buf, (hi - lo) * b->idw);
    }
    free(buf);
    if (!rc) rc = tg_derived_append(w, b->n2o, b->N * b->idw);
    rc = rc ? (tg_derived_abort(w), rc) : tg_derived_commit(w);
    return rc;
}

/* splitmix64's finaliser: an old id's hash in map_check's per-part sums. */
static uint64_t mix64(uint64_t x)
{
    x ^= x >> 30;
    x *= 0xbf58476d1ce4e5b9ull;
    x ^= x >> 27;
    x *= 0x94d049bb133111ebull;
    return x ^ (x >> 31);
}

/* A damaged map: -ESTALE with the file, the entry and what was expected (rebuild it). */
static int map_bad(const char *path, const char *fmt, ...) TG_PRINTF(2, 3);
static int map_bad(const char *path, const char *fmt, ...)
{
    char m[400];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(m, sizeof m, fmt, ap);
    va_end(ap);
    return tg_err(-ESTALE, "%s: stale, %s; rebuild it", path, m);
}
#define MAP_BAD map_bad

/* The map file f checked whole and its record and part boundaries returned (*pp malloc'd).
 *
 * Callers index arrays with these ids (hier: bitmaps over new ids, labels by old id), and
 * tg_derived_open checks only the header, so the payload is checked once here, in one sequential
 * pass in windows of MAP_WINDOW bytes (bounded memory: the window and two u64 per part), rather
 * than per lookup, which could not see that the two arrays are not inverse permutations. The
 * pass reads every byte, so it also checks the payload's CRC-32 (CLMUL: a small cost beside the
 * read, about 0.8 GB for 10^8 nodes). Checked: the record (magic, nodes, parts in 1..N, the
 * payload's size); pp: 0 .. N, non-decreasing; old_of_new: ids < N, ascending inside each part;
 * new_of_old: each part's new ids handed out in order pp[k], pp[k] + 1, ... as the old ids go up
 * (a bijection that keeps the old order inside a part); both arrays hold the same old ids per
 * part (a sum of hashed ids per part; equal sums of different sets: ~2^-64), so they are
 * inverse. -ESTALE for a damaged file, other codes for I/O and memory. */
#define MAP_WINDOW ((size_t)1 << 20)
static int map_check(const tg_derived_file_t *f, uint64_t N, size_t idw, tg_part_summary_t *sum,
                     uint64_t **pp_out)
{
    *pp_out = NULL;
    unsigned char rec[REC_BYTES];
    int rc = tg_derived_read(f, rec, sizeof rec, 0);
    if (rc) return rc;
    if (memcmp(rec, REC_MAGIC, 8))
        return MAP_BAD(f->path, "payload offset 0: not a partition record");
    (void)rec_decode(rec, sum, f->path);
    uint32_t P = sum->parts;
    if (sum->num_nodes != N || !P || P > N ||
        f->payload_len != REC_BYTES + (P + 1) * 8ull + 2 * N * idw)
        return MAP_BAD(f->path,
                       "a partition record of %u parts and %llu nodes does not fit the dataset "
                       "(%llu nodes) or the file's %llu payload bytes",
                       P, (unsigned long long)sum->num_nodes, (unsigned long long)N,
                       (unsigned long long)f->payload_len);
    uint64_t *pp = malloc((P + 1) * sizeof *pp);
    uint64_t *cur = malloc((P + 1) * sizeof *cur), *hsum = calloc(P + 1, sizeof *hsum);
    unsigned char *win = malloc(MAP_WINDOW);
    if (!pp || !cur || !hsum || !win) rc = tg_err(-ENOMEM, "%s: out of memory", f->path);
    if (!rc) rc = tg_derived_read(f, pp, (P + 1) * 8, REC_BYTES);
    if (!rc && (pp[0] != 0 || pp[P] != N))
        rc = MAP_BAD(f->path, "payload offset %u: part boundaries %llu .. %llu, expected 0 .. %llu",
                     REC_BYTES, (unsigned long long)pp[0], (unsigned long long)pp[P],
                     (unsigned long long)N);
    for (uint32_t k = 0; !rc && k < P; k++)
        if (pp[k + 1] < pp[k])
            rc = MAP_BAD(f->path, "part %u ends (%llu) before it starts (%llu)", k,
                         (unsigned long long)pp[k + 1], (unsigned long long)pp[k]);
    uint32_t crc = tg_data_crc32(tg_data_crc32(0, rec, REC_BYTES), pp, rc ? 0 : (P + 1) * 8);
    uint64_t off0 = REC_BYTES + (P + 1) * 8ull, step = MAP_WINDOW / idw;
    /* old_of_new, new ids ascending: part k's ids in one run */
    uint32_t k = 0;
    uint64_t prev = 0;
    for (uint64_t lo = 0; !rc && lo < N; lo += step) {
        uint64_t n = TG_MIN(step, N - lo);
        if ((rc = tg_derived_read(f, win, n * idw, off0 + lo * idw))) break;
        crc = tg_data_crc32(crc, win, n * idw);
        for (uint64_t i = 0; i < n; i++) {
            uint64_t v = lo + i, o = id_get(win, idw, i);
            int first = 0;
            while (v >= pp[k + 1])
                k++, first = 1;
            first |= v == pp[k];
            if (o >= N || (!first && o <= prev)) {
                rc = MAP_BAD(f->path,
                             "old_of_new[%llu] (payload offset %llu) = %llu, expected an old id "
                             "< %llu above the one before it in part %u",
                             (unsigned long long)v, (unsigned long long)(off0 + v * idw),
                             (unsigned long long)o, (unsigned long long)N, k);
                break;
            }
            prev = o;
            hsum[k] += mix64(o);
        }
    }
    /* new_of_old, old ids ascending: each part's next new id, in order */
    if (!rc) memcpy(cur, pp, (P + 1) * sizeof *cur);
    uint64_t off1 = off0 + N * idw;
    for (uint64_t lo = 0; !rc && lo < N; lo += step) {
        uint64_t n = TG_MIN(step, N - lo);
        if ((rc = tg_derived_read(f, win, n * idw, off1 + lo * idw))) break;
        crc = tg_data_crc32(crc, win, n * idw);
        for (uint64_t i = 0; i < n; i++) {
            uint64_t v = lo + i, nv = id_get(win, idw, i);
            uint32_t q = 0, hi = P;
            while (hi - q > 1) {
                uint32_t mid = q + (hi - q) / 2;
                if (pp[mid] <= nv)
                    q = mid;
                else
                    hi = mid;
            }
            if (nv >= N || nv != cur[q]) {
                rc = MAP_BAD(f->path,
                             "new_of_old[%llu] (payload offset %llu) = %llu, expected %llu (the "
                             "next new id of part %u)",
                             (unsigned long long)v, (unsigned long long)(off1 + v * idw),
                             (unsigned long long)nv, (unsigned long long)cur[q], q);
                break;
            }
            cur[q]++;
            hsum[q] -= mix64(v);
        }
    }
    for (uint32_t q = 0; !rc && q < P; q++)
        if (hsum[q])
            rc =
                MAP_BAD(f->path, "part %u holds other old ids in old_of_new than in new_of_old", q);
    if (!rc && crc != f->payload_crc)
        rc = MAP_BAD(f->path, "bad CRC: payload CRC %08x does not match %08x in the header", crc,
                     f->payload_crc);
    free(cur);
    free(hsum);
    free(win);
    if (rc)
        free(pp);
    else
        *pp_out = pp;
    return rc;
}

/* Reads new_of_old and pp back from a map file (the rewrites need them): checked whole first
 * (map_check), -ESTALE when it is damaged and must be rebuilt. */
static int read_map(build_t *b, const tg_derived_file_t *f)
{
    uint64_t *pp;
    int rc = map_check(f, b->N, b->idw, &b->st->sum, &pp);
    if (rc) return rc;
    if (b->st->sum.parts != b->P)
        rc = MAP_BAD(f->path, "made for %u parts, expected %u", b->st->sum.parts, b->P);
    else
        memcpy(b->pp, pp, (b->P + 1) * sizeof *pp);
    free(pp);
    uint64_t off = REC_BYTES + (b->P + 1) * 8ull + b->N * b->idw;
    if (!rc) rc = tg_derived_read(f, b->n2o, b->N * b->idw, off);
    /* part of each old id, from pp */
    for (uint64_t v = 0; !rc && v < b->N; v++) {
        uint64_t n = id_get(b->n2o, b->idw, v);
        uint32_t lo = 0, hi = b->P;
        while (hi - lo > 1) {
            uint32_t mid = lo + (hi - lo) / 2;
            if (b->pp[mid] <= n)
                lo = mid;
            else
                hi = mid;
        }
        b->part[v] = lo;
    }
    return rc;
}

/* ---------------------------------------------------------------- features */

static int rewrite_features(build_t *b)
{
    const tg_meta_t *m = &b->ds->meta;
    uint64_t row = (uint64_t)m->feat_dim * tg_feat_dtype_size(m->feat_dtype);
    char path[4096];
    tg_dataset_path(b->ds, TG_FILE_FEATURES, path, sizeof path);
    int fd = -1, rc = open_ro(path, &fd);
    if (rc) return rc;
    uint64_t rows = TG_MAX((uint64_t)1, b->window / TG_MAX(row, 1));
    char *in = malloc(rows * row + 1), *out = malloc(rows * row + 1);
    tg_derived_writer_t *w = NULL;
    if (!in || !out) rc = tg_err(-ENOMEM, "partition: out of memory for the feature windows");
    if (!rc) rc = tg_derived_create(&w, b->ds, NULL, "partfeat", b->params, 0);
    if (!rc) rc = tg_derived_set_size(w, b->N * row);
    tg_progress_t pg;
    if (b->o->progress) tg_progress_begin(&pg, "rewriting features", b->N * row, "bytes");
    for (uint64_t lo = 0; !rc && lo < b->N; lo += rows) {
        uint64_t hi = TG_MIN(b->N, lo + rows);
        rc = tg_pread_full(fd, in, (hi - lo) * row, lo * row, path);
        if (rc) break;
        b->st->read_bytes += (hi - lo) * row;
        for (uint64_t v = lo; v < hi; v++)
            run_add(b, b->part[v], row, id_get(b->n2o, b->idw, v) * row);
        runs_place(b);
        for (uint64_t v = lo; v < hi; v++) {
            uint32_t k = b->part[v];
            memcpy(out + b->run_pos[k], in + (v - lo) * row, row);
            b->run_pos[k] += row;
        }
        rc = runs_write(b, w, out);
        (void)posix_fadvise(fd, (off_t)(lo * row), (off_t)((hi - lo) * row), POSIX_FADV_DONTNEED);
        if (b->o->progress) tg_progress_update(&pg, hi * row, NULL);
    }
    if (b->o->progress) tg_progress_end(&pg);
    if (w) rc = rc ? (tg_derived_abort(w), rc) : tg_derived_commit(w);
    free(in);
    free(out);
    close(fd);
    return rc;
}

/* ---------------------------------------------------------------- adjacency */

/* Reads indptr.bin[lo .. hi] (hi - lo + 1 entries) and checks it is monotone and within E. */
static int read_indptr(build_t *b, int fd, const char *path, uint64_t lo, uint64_t hi, uint64_t *ip)
{
    int rc = tg_pread_full(fd, ip, (hi - lo + 1) * 8, lo * 8, path);
    if (rc) return rc;
    b->st->read_bytes += (hi - lo + 1) * 8;
    for (uint64_t i = 0; i <= hi - lo; i++)
        if ((i && ip[i] < ip[i - 1]) || ip[i] > b->E)
            return tg_err(-EINVAL, "%s: offset %llu: indptr[%llu] = %llu is %s", path,
                          (unsigned long long)((lo + i) * 8), (unsigned long long)(lo + i),
                          (unsigned long long)ip[i],
                          ip[i] > b->E ? "past the edges" : "below the entry before it");
    return 0;
}

static int rewrite_adjacency(build_t *b)
{
    const tg_meta_t *m = &b->ds->meta;
    size_t esz = tg_index_dtype_size(m->index_dtype);
    char ppath[4096], ipath[4096];
    tg_dataset_path(b->ds, TG_FILE_INDPTR, ppath, sizeof ppath);
    tg_dataset_path(b->ds, TG_FILE_INDICES, ipath, sizeof ipath);
    int pfd = -1, ifd = -1;
    int rc = open_ro(ppath, &pfd);
    if (!rc) rc = open_ro(ipath, &ifd);
    /* the new indptr: degrees placed at their new ids, then summed */
    uint64_t *nip = rc ? NULL : calloc(b->N + 1, sizeof *nip);
    uint64_t ents = TG_MAX((uint64_t)1, b->window / esz);
    /* indptr windows of about twice the nodes whose lists fill an index window */
    uint64_t nodes_win = TG_MIN(TG_MAX((uint64_t)1, b->window / 8 - 1),
                                TG_MAX((uint64_t)1024, 2 * ents / TG_MAX(b->E / b->N, 1)));
    uint64_t *ip = rc ? NULL : malloc((nodes_win + 1) * sizeof *ip);
    char *in = rc ? NULL : malloc(ents * esz), *out = rc ? NULL : malloc(ents * esz);
    if (!rc && (!nip || !ip || !in || !out))
        rc = tg_err(-ENOMEM, "partition: out of memory for the adjacency rewrite");
    for (uint64_t lo = 0; !rc && lo < b->N; lo += nodes_win) {
        uint64_t hi = TG_MIN(b->N, lo + nodes_win);
        if ((rc = read_indptr(b, pfd, ppath, lo, hi, ip))) break;
        for (uint64_t v = lo; v < hi; v++)
            nip[id_get(b->n2o, b->idw, v) + 1] = ip[v - lo + 1] - ip[v - lo];
    }
    for (uint64_t v = 0; !rc && v < b->N; v++)
        nip[v + 1] += nip[v];
    if (!rc && nip[b->N] != b->E)
        rc = tg_err(-EINVAL, "%s: the lists hold %llu entries, meta.txt says %llu edges", ppath,
                    (unsigned long long)nip[b->N], (unsigned long long)b->E);
    tg_derived_writer_t *w = NULL;
    uint64_t base = align_up((b->N + 1) * 8, 4096);
    if (!rc) rc = tg_derived_create(&w, b->ds, NULL, "partadj", b->params, 0);
    if (!rc) rc = tg_derived_set_size(w, base + b->E * esz);
    if (!rc) rc = tg_derived_pwrite(w, nip, (b->N + 1) * 8, 0);
    tg_progress_t pg;
    int bar = !rc && b->o->progress;
    if (bar) tg_progress_begin(&pg, "rewriting indices", b->E * esz, "bytes");
    /* Windows of whole lists holding at most `ents` entries; a longer list is a window alone,
     * read and written in pieces (its run is contiguous in the output). */
    uint64_t v = 0, done = 0;
    while (!rc && v < b->N) {
        uint64_t hi = TG_MIN(b->N, v + nodes_win);
        if ((rc = read_indptr(b, pfd, ppath, v, hi, ip))) break;
        uint64_t e0 = ip[0], end = v;
        while (end < hi && ip[end - v + 1] - e0 <= ents)
            end++;
        int alone = end == v; /* v's list alone is longer than a window */
        if (alone) end = v + 1;
        uint64_t e1 = ip[end - v];
        for (uint64_t e = e0; !rc && e < e1; e += ents) {
            uint64_t n = TG_MIN(ents, e1 - e);
            if ((rc = tg_pread_full(ifd, in, n * esz, e * esz, ipath))) break;
            b->st->read_bytes += n * esz;
            /* relabel in place, checking every id */
            for (uint64_t i = 0; i < n; i++) {
                uint64_t u = esz == 4 ? ((uint32_t *)in)[i] : ((uint64_t *)in)[i];
                if (u >= b->N) {
                    rc = tg_err(-EINVAL, "%s: offset %llu: neighbour %llu of a graph of %llu nodes",
                                ipath, (unsigned long long)((e + i) * esz), (unsigned long long)u,
                                (unsigned long long)b->N);
                    break;
                }
                uint64_t nu = id_get(b->n2o, b->idw, u);
                if (esz == 4)
                    ((uint32_t *)in)[i] = (uint32_t)nu;
                else
                    ((uint64_t *)in)[i] = nu;
            }
            if (rc) break;
            if (alone) {
                uint64_t nv = id_get(b->n2o, b->idw, v);
                rc = tg_derived_pwrite(w, in, n * esz, base + (nip[nv] + (e - e0)) * esz);
                b->st->write_bytes += n * esz;
            } else {
                for (uint64_t x = v; x < end; x++) {
                    uint64_t nx = id_get(b->n2o, b->idw, x);
                    run_add(b, b->part[x], (ip[x - v + 1] - ip[x - v]) * esz, base + nip[nx] * esz);
                }
                runs_place(b);
                for (uint64_t x = v; x < end; x++) {
                    uint32_t k = b->part[x];
                    uint64_t len = (ip[x - v + 1] - ip[x - v]) * esz;
                    memcpy(out + b->run_pos[k], in + (ip[x - v] - e0) * esz, len);
                    b->run_pos[k] += len;
                }
                rc = runs_write(b, w, out);
            }
        }
        (void)posix_fadvise(ifd, (off_t)(e0 * esz), (off_t)((e1 - e0) * esz), POSIX_FADV_DONTNEED);
        done += e1 - e0;
        v = end;
        if (bar) tg_progress_update(&pg, done * esz, NULL);
    }
    if (bar) tg_progress_end(&pg);
    if (w) rc = rc ? (tg_derived_abort(w), rc) : tg_derived_commit(w);
    free(nip);
    free(ip);
    free(in);
    free(out);
    if (pfd >= 0) close(pfd);
    if (ifd >= 0) close(ifd);
    return rc;
}

/* ---------------------------------------------------------------- build */

/* 0 when kind's file of these params is valid; -ENOENT / -ESTALE (said at info level) when it
 * must be built; other errors as they are. */
static int still_valid(build_t *b, const char *kind, tg_derived_file_t **keep)
{
    tg_derived_file_t *f = NULL;
    int rc = tg_derived_open(&f, b->ds, NULL, kind, b->params, 0);
    if (rc == -ESTALE) tg_log_info("partition: rebuilding %s: %s", kind, tg_errmsg());
    if (rc == 0 && keep)
        *keep = f;
    else if (rc == 0)
        tg_derived_close(f);
    return rc;
}

int tg_part_build(const tg_dataset_t *ds, const tg_part_build_opts_t *o, tg_part_build_stats_t *st)
{
    tg_part_build_stats_t local;
    if (!st) st = &local;
    memset(st, 0, sizeof *st);
    double t0 = tg_now();
    build_t b = {.ds = ds, .o = o, .st = st};
    b.N = ds->meta.num_nodes;
    b.E = ds->meta.num_edges;
    b.P = o->assign.parts;
    if (b.P == 0 || b.P > b.N)
        return tg_err(-EINVAL, "partition: --parts %u: expected 1 .. %llu (the nodes)", b.P,
                      (unsigned long long)b.N);
    b.idw = tg_index_dtype_size(tg_index_dtype_for(b.N));
    char why[256];
    tg_part_method_t method = tg_part_resolve(ds, &o->assign, why, sizeof why);
    int rc = tg_part_params(&o->assign, method, b.params, sizeof b.params);
    if (rc) return rc;
    /* what the maps take: the assignment, new_of_old, pp, the scatter's per-part arrays, and the
     * adjacency rewrite's new indptr; the windows get the rest (two of them) */
    uint64_t mem = o->mem_bytes ? o->mem_bytes : tg_phys_mem_bytes() / 4;
    uint64_t maps = b.N * (4 + b.idw) + (uint64_t)(b.P + 1) * (8 * 4 + 4) + (b.N + 1) * 8;
    char x[32], y[32];
    if (maps + 2 * WINDOW_MIN > mem)
        return tg_err(-ENOMEM,
                      "partition: %llu nodes need %s of maps and windows to be rewritten, more "
                      "than the %s given (--mem)",
                      (unsigned long long)b.N, tg_fmt_bytes(maps + 2 * WINDOW_MIN, x, sizeof x),
                      tg_fmt_bytes(mem, y, sizeof y));
    b.window = o->window_bytes ? TG_MAX(o->window_bytes, (uint64_t)64)
                               : TG_MIN(WINDOW_MAX, TG_MAX(WINDOW_MIN, (mem - maps) / 2));
    b.part = malloc(b.N * sizeof *b.part + 1);
    b.n2o = malloc(b.N * b.idw + 1);
    b.pp = calloc(b.P + 1, sizeof *b.pp);
    b.run_bytes = calloc(b.P, sizeof *b.run_bytes);
    b.run_pos = calloc(b.P, sizeof *b.run_pos);
    b.run_dst = calloc(b.P, sizeof *b.run_dst);
    b.touched = calloc(b.P, sizeof *b.touched);
    if (!b.part || !b.n2o || !b.pp || !b.run_bytes || !b.run_pos || !b.run_dst || !b.touched) {
        rc = tg_err(-ENOMEM, "partition: out of memory for the maps of %llu nodes",
                    (unsigned long long)b.N);
        goto out;
    }
    double t1 = tg_now();
    tg_derived_file_t *map = NULL;
    rc = still_valid(&b, "part", &map);
    if (rc == 0) {
        rc = read_map(&b, map);
        tg_derived_close(map);
        if (rc == -ESTALE) tg_log_info("partition: rebuilding part: %s", tg_errmsg());
    }
    if (rc == 0) {
    } else if (rc == -ENOENT || rc == -ESTALE) {
        if (why[0]) tg_log_info("partition: %s", why);
        tg_part_assign_opts_t ao = o->assign;
        ao.method = method;
        ao.progress = o->progress;
        tg_part_assign_stats_t as;
        if ((rc = tg_part_assign(ds, &ao, b.part, &as)) < 0) goto out;
        st->sum = (tg_part_summary_t){.parts = b.P,
                                      .method = as.method,
                                      .num_nodes = b.N,
                                      .edges = as.edges,
                                      .cut_edges = as.cut_edges,
                                      .min_part = as.min_part,
                                      .max_part = as.max_part,
                                      .balance = as.balance,
                                      .assign_s = as.seconds};
        permute(&b);
        if ((rc = write_map(&b)) < 0) goto out;
        st->built_map = 1;
    } else {
        goto out;
    }
    st->map_s = tg_now() - t1;
    double t2 = tg_now();
    if ((rc = still_valid(&b, "partfeat", NULL)) == -ENOENT || rc == -ESTALE) {
        if ((rc = rewrite_features(&b)) < 0) goto out;
        st->built_feat = 1;
    } else if (rc < 0) {
        goto out;
    }
    st->feat_s = tg_now() - t2;
    double t3 = tg_now();
    if ((rc = still_valid(&b, "partadj", NULL)) == -ENOENT || rc == -ESTALE) {
        if ((rc = rewrite_adjacency(&b)) < 0) goto out;
        st->built_adj = 1;
    } else if (rc < 0) {
        goto out;
    }
    st->adj_s = tg_now() - t3;
out:
    st->total_s = tg_now() - t0;
    free(b.part);
    free(b.n2o);
    free(b.pp);
    free(b.run_bytes);
    free(b.run_pos);
    free(b.run_dst);
    free(b.touched);
    return rc;
}

/* ---------------------------------------------------------------- reading */

int tg_part_open(tg_part_t **out, const tg_dataset_t *ds, const char *params)
{
    *out = NULL;
    tg_part_t *p = calloc(1, sizeof *p);
    if (!p) return tg_err(-ENOMEM, "out of memory");
    uint64_t N = ds->meta.num_nodes, E = ds->meta.num_edges;
    p->id_bytes = tg_index_dtype_size(tg_index_dtype_for(N));
    p->index_bytes = tg_index_dtype_size(ds->meta.index_dtype);
    p->num_edges = E;
    int rc = tg_derived_open(&p->map, ds, NULL, "part", params, 0);
    if (!rc) rc = map_check(p->map, N, p->id_bytes, &p->sum, &p->pp);
    p->old_of_new_off = REC_BYTES + (p->sum.parts + 1) * 8ull;
    p->new_of_old_off = p->old_of_new_off + N * p->id_bytes;
    if (!rc) rc = tg_derived_open(&p->feat, ds, NULL, "partfeat", params, 0);
    if (!rc) rc = tg_derived_open(&p->adj, ds, NULL, "partadj", params, 0);
    p->indices_off = align_up((N + 1) * 8, 4096);
    uint64_t row = (uint64_t)ds->meta.feat_dim * tg_feat_dtype_size(ds->meta.feat_dtype);
    if (!rc && p->feat->payload_len != N * row)
        rc = tg_err(-EINVAL, "%s: %llu payload bytes, expected %llu", p->feat->path,
                    (unsigned long long)p->feat->payload_len, (unsigned long long)(N * row));
    if (!rc && p->adj->payload_len != p->indices_off + E * p->index_bytes)
        rc = tg_err(-EINVAL, "%s: %llu payload bytes, expected %llu", p->adj->path,
                    (unsigned long long)p->adj->payload_len,
                    (unsigned long long)(p->indices_off + E * p->index_bytes));
    if (rc) {
        tg_part_close(p);
        return rc;
    }
    *out = p;
    return 0;
}

void tg_part_close(tg_part_t *p)
{
    if (!p) return;
    tg_derived_close(p->map);
    tg_derived_close(p->feat);
    tg_derived_close(p->adj);
    free(p->pp);
    free(p);
}

uint32_t tg_part_of(const tg_part_t *p, uint64_t v)
{
    uint32_t lo = 0, hi = p->sum.parts;
    while (hi - lo > 1) {
        uint32_t mid = lo + (hi - lo) / 2;
        if (p->pp[mid] <= v)
            lo = mid;
        else
            hi = mid;
    }
    return lo;
}

/* The checks below are per read range (a compare per id, beside a read): map_check validated
 * the map at open, but a file changed in place under the handle must not hand out an id that is
 * not a node. */
static int ids_read(const tg_part_t *p, uint64_t base, const char *what, uint64_t first, uint64_t n,
                    uint64_t *out)
{
    uint64_t N = p->sum.num_nodes;
    if (first > N || n > N - first)
        return tg_err(-EINVAL, "%s: new ids [%llu, +%llu) past the %llu nodes", p->map->path,
                      (unsigned long long)first, (unsigned long long)n, (unsigned long long)N);
    int rc;
    if (p->id_bytes == 8) {
        rc = tg_derived_read(p->map, out, n * 8, base + first * 8);
    } else {
        /* u32 entries: read into the tail of out, widen from the front */
        uint32_t *tmp = (uint32_t *)(out + n) - n;
        rc = tg_derived_read(p->map, tmp, n * 4, base + first * 4);
        for (uint64_t i = 0; !rc && i < n; i++)
            out[i] = tmp[i];
    }
    for (uint64_t i = 0; !rc && i < n; i++)
        if (out[i] >= N)
            rc = tg_err(-EINVAL, "%s: %s[%llu] (payload offset %llu) = %llu, expected < %llu nodes",
                        p->map->path, what, (unsigned long long)(first + i),
                        (unsigned long long)(base + (first + i) * p->id_bytes),
                        (unsigned long long)out[i], (unsigned long long)N);
    return rc;
}

int tg_part_old_ids(const tg_part_t *p, uint64_t first, uint64_t n, uint64_t *out)
{
    return ids_read(p, p->old_of_new_off, "old_of_new", first, n, out);
}

int tg_part_new_ids(const tg_part_t *p, uint64_t first, uint64_t n, uint64_t *out)
{
    return ids_read(p, p->new_of_old_off, "new_of_old", first, n, out);
}

int tg_part_check_indptr(const tg_part_t *p, uint64_t first, uint64_t n, const uint64_t *ip)
{
    uint64_t N = p->sum.num_nodes, E = p->num_edges;
    for (uint64_t i = 0; i < n; i++) {
        uint64_t v = first + i;
        const char *want = NULL;
        if (ip[i] > E)
            want = "at most the edges";
        else if (i && ip[i] < ip[i - 1])
            want = "at least the entry before it";
        else if (v == 0 && ip[i] != 0)
            want = "0";
        else if (v == N && ip[i] != E)
            want = "the edges";
        if (want)
            return tg_err(-EINVAL,
                          "%s: indptr[%llu] (payload offset %llu) = %llu, expected %s (%llu)",
                          p->adj->path, (unsigned long long)v, (unsigned long long)(v * 8),
                          (unsigned long long)ip[i], want, (unsigned long long)E);
    }
    return 0;
}

int tg_part_indptr(const tg_part_t *p, uint64_t first, uint64_t n, uint64_t *out)
{
    if (first > p->sum.num_nodes + 1 || n > p->sum.num_nodes + 1 - first)
        return tg_err(-EINVAL, "%s: indptr [%llu, +%llu) past its %llu entries", p->adj->path,
                      (unsigned long long)first, (unsigned long long)n,
                      (unsigned long long)(p->sum.num_nodes + 1));
    int rc = tg_derived_read(p->adj, out, n * 8, first * 8);
    return rc ? rc : tg_part_check_indptr(p, first, n, out);
}

int tg_part_check_indices(const tg_part_t *p, uint64_t e, uint64_t n, const void *raw)
{
    uint64_t N = p->sum.num_nodes;
    for (uint64_t i = 0; i < n; i++) {
        uint64_t u = id_get(raw, p->index_bytes, i);
        if (u >= N)
            return tg_err(
                -EINVAL,
                "%s: list entry %llu (payload offset %llu) names node %llu, expected < %llu",
                p->adj->path, (unsigned long long)(e + i),
                (unsigned long long)(p->indices_off + (e + i) * p->index_bytes),
                (unsigned long long)u, (unsigned long long)N);
    }
    return 0;
}

int tg_part_indices(const tg_part_t *p, uint64_t e, uint64_t n, void *buf)
{
    if (e > p->num_edges || n > p->num_edges - e)
        return tg_err(-EINVAL, "%s: list entries [%llu, +%llu) past the %llu edges", p->adj->path,
                      (unsigned long long)e, (unsigned long long)n,
                      (unsigned long long)p->num_edges);
    int rc = tg_derived_read(p->adj, buf, n * p->index_bytes, p->indices_off + e * p->index_bytes);
    return rc ? rc : tg_part_check_indices(p, e, n, buf);
}
