/* `tiergnn import OUT --from ogb SRC`: the OGB node-property raw layout.
 *
 *     SRC/raw/edge.csv[.gz]           "src,dst" per line (directed: dst's in-neighbours get src)
 *     SRC/raw/node-feat.csv[.gz]      N rows of D numbers
 *     SRC/raw/node-label.csv[.gz]     N rows: one class id (empty/NaN = unlabelled), or C 0/1
 *                                     columns (multi-label)
 *     SRC/raw/num-node-list.csv[.gz]  N
 *     SRC/raw/num-edge-list.csv[.gz]  E
 *     SRC/split/NAME/{train,valid,test}.csv[.gz]   one node id per line
 *
 * With SRC/raw/data.npz (OGB's binary raw layout, ogbn-papers100M) the graph, features and
 * labels come from data.npz and node-label.npz instead (import_npz.c); the split stays CSV.
 *
 * Every file is streamed once, in this order: counts, edges (into the external sort), features
 * (row by row into features.bin), labels, splits. Each count is cross-checked and a mismatch
 * names both files.
 *
 * node-feat.csv is most of the input (a 1M x 128 file is 0.8 GB of text) and parsing it is the
 * slow part (~220 MB/s on one core), so a large plain file is cut into chunks of a few MiB at
 * line ends, parsed on several threads and written in file order by the calling thread (see
 * "features on threads" below). A .gz file cannot be entered in the middle; it is read on one
 * thread (its handle already inflates on a thread of its own), as are small files.
 */
#include "import-impl.h"

#include <dirent.h>
#include <fcntl.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "crc-impl.h"

#define PATHLEN 4096

typedef struct {
    char nodes[PATHLEN], nedges[PATHLEN], edge[PATHLEN], feat[PATHLEN], label[PATHLEN];
    char split[3][PATHLEN];
    char split_name[256];
} ogb_paths_t;

static int is_dir(const char *p)
{
    struct stat st;
    return !stat(p, &st) && S_ISDIR(st.st_mode);
}

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Names of the directories under dir, sorted, into a malloc'd array of malloc'd strings. */
static int list_dirs(const char *dir, char ***names, size_t *n)
{
    *names = NULL;
    *n = 0;
    DIR *d = opendir(dir);
    if (!d) return tg_err(-errno, "%s: cannot list: %s", dir, strerror(errno));
    size_t cap = 0;
    int rc = 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        if (e->d_name[0] == '.') continue;
        char p[PATHLEN + 300];
        snprintf(p, sizeof p, "%s/%s", dir, e->d_name);
        if (!is_dir(p)) continue;
        if (*n == cap) {
            cap = cap ? cap * 2 : 8;
            char **nn = realloc(*names, cap * sizeof *nn);
            if (!nn) {
                rc = tg_err(-ENOMEM, "out of memory");
                break;
            }
            *names = nn;
        }
        if (!((*names)[*n] = strdup(e->d_name))) {
            rc = tg_err(-ENOMEM, "out of memory");
            break;
        }
        (*n)++;
    }
    closedir(d);
    if (*n) qsort(*names, *n, sizeof **names, cmp_str);
    return rc;
}

static void free_names(char **names, size_t n)
{
    for (size_t i = 0; i < n; i++)
        free(names[i]);
    free(names);
}

static void join_names(char **names, size_t n, char *buf, size_t len)
{
    size_t k = 0;
    buf[0] = 0;
    for (size_t i = 0; i < n && k < len; i++)
        k += (size_t)snprintf(buf + k, len - k, "%s%s", i ? ", " : "", names[i]);
}

/* Picks split/NAME: the one asked for, else the only one there is. */
static int find_split(const char *src, const char *want, ogb_paths_t *p)
{
    char sdir[PATHLEN];
    snprintf(sdir, sizeof sdir, "%s/split", src);
    if (!is_dir(sdir))
        return tg_err(-ENOENT, "%s: missing (the OGB layout keeps train/valid/test ids there)",
                      sdir);
    char **names;
    size_t n;
    int rc = list_dirs(sdir, &names, &n);
    if (rc) return rc;
    char list[1024];
    join_names(names, n, list, sizeof list);
    if (want) {
        size_t i = 0;
        while (i < n && strcmp(names[i], want))
            i++;
        if (i == n)
            rc = tg_err(-ENOENT, "%s/%s: no such split (available: %s)", sdir, want,
                        n ? list : "none");
    } else if (n == 0) {
        rc = tg_err(-ENOENT, "%s: no split directory inside", sdir);
    } else if (n > 1) {
        rc = tg_err(-EINVAL, "%s: %zu splits, pick one with --split NAME (available: %s)", sdir, n,
                    list);
    } else {
        want = names[0];
    }
    if (!rc && want) snprintf(p->split_name, sizeof p->split_name, "%s", want);
    free_names(names, n);
    if (rc) return rc;
    snprintf(sdir, sizeof sdir, "%s/split/%s", src, p->split_name);
    static const char *const base[3] = {"train", "valid", "test"};
    for (int k = 0; k < 3; k++)
        if (tg_imp_find_csv(sdir, base[k], p->split[k], PATHLEN))
            return tg_err(-ENOENT, "%s: missing", p->split[k]);
    return 0;
}

int tg_ogb_split_paths(const char *src, const char *want, char (*paths)[4096], char *name,
                       size_t name_len)
{
    ogb_paths_t *p = calloc(1, sizeof *p);
    if (!p) return tg_err(-ENOMEM, "out of memory");
    int rc = find_split(src, want, p);
    if (!rc) {
        for (int k = 0; k < 3; k++)
            memcpy(paths[k], p->split[k], PATHLEN);
        snprintf(name, name_len, "%s", p->split_name);
    }
    free(p);
    return rc;
}

static int find_paths(const tg_import_opts_t *o, ogb_paths_t *p)
{
    if (!is_dir(o->src))
        return tg_err(-ENOENT, "%s: not a directory (expected the OGB layout: raw/, split/)",
                      o->src);
    char raw[PATHLEN];
    snprintf(raw, sizeof raw, "%s/raw", o->src);
    struct {
        const char *base;
        char *out;
    } want[] = {{"num-node-list", p->nodes},
                {"num-edge-list", p->nedges},
                {"edge", p->edge},
                {"node-feat", p->feat},
                {"node-label", p->label}};
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++)
        if (tg_imp_find_csv(raw, want[i].base, want[i].out, PATHLEN))
            return tg_err(-ENOENT, "%s: missing", want[i].out);
    return find_split(o->src, o->split, p);
}

/* num-node-list / num-edge-list: one row with one count (a single graph). */
static int read_count(const char *path, uint64_t *out)
{
    tg_csv_t c;
    int rc = tg_csv_open(&c, path, TG_CSV_SKIP_BLANK);
    if (rc) return rc;
    int64_t v = 0;
    if ((rc = tg_csv_next(&c)) < 0) goto out;
    if ((rc = tg_csv_expect_fields(&c, 1)) || (rc = tg_csv_get_i64(&c, 0, &v))) goto out;
    if (v < 0) {
        rc = tg_err(-EINVAL, "%s: line %llu: negative count %lld", path, (unsigned long long)c.line,
                    (long long)v);
        goto out;
    }
    if ((rc = tg_csv_next(&c)) < 0) goto out;
    if (rc > 0) {
        rc = tg_err(-EINVAL,
                    "%s: line %llu: more than one count (a multi-graph dataset); only "
                    "single-graph node-property datasets can be imported",
                    path, (unsigned long long)c.line);
        goto out;
    }
    *out = (uint64_t)v;
out:
    tg_csv_close(&c);
    return rc;
}

static int read_edges(tg_imp_t *im, const ogb_paths_t *p, uint64_t want_edges)
{
    tg_csv_t c;
    int rc = tg_csv_open(&c, p->edge, TG_CSV_SKIP_BLANK);
    if (rc) return rc;
    tg_imp_prog_t pr;
    tg_imp_prog_begin(&pr, "edges", tg_imp_file_size(p->edge));
    uint64_t n = im->num_nodes;
    tg_edgesort_expect(im->es, (im->o->undirected ? 2 : 1) * want_edges); /* num-edge-list */
    int64_t s, d;
    while ((rc = tg_csv_next_pair(&c, &s, &d)) > 0) {
        if (rc == 1 && ((rc = tg_csv_expect_fields(&c, 2)) || (rc = tg_csv_get_i64(&c, 0, &s)) ||
                        (rc = tg_csv_get_i64(&c, 1, &d))))
            break;
        if (s < 0 || (uint64_t)s >= n || d < 0 || (uint64_t)d >= n) {
            rc = tg_err(-EINVAL, "%s: line %llu: node id %lld out of range [0, %llu) (N from %s)",
                        p->edge, (unsigned long long)c.line,
                        (long long)(s < 0 || (uint64_t)s >= n ? s : d), (unsigned long long)n,
                        p->nodes);
            break;
        }
        if ((rc = tg_imp_edge(im, (uint64_t)s, (uint64_t)d))) break;
        if ((c.rows & 0xfffff) == 0) tg_imp_prog_update(&pr, tg_csv_offset(&c));
    }
    tg_imp_prog_end(&pr, rc == 0);
    tg_csv_close(&c);
    if (rc) return rc;
    if (im->edges_in != want_edges)
        return tg_err(-EINVAL, "%s has %llu edges but %s says %llu", p->edge,
                      (unsigned long long)im->edges_in, p->nedges, (unsigned long long)want_edges);
    tg_log_info("edges: %llu read, sorting into CSC", (unsigned long long)im->edges_in);
    return tg_imp_edges_finish(im);
}

/* One thread, row by row: .gz files and small files. */
static int read_features_seq(tg_imp_t *im, const ogb_paths_t *p)
{
    tg_csv_t c;
    /* Blank lines can only be stray (a feature row has at least one number): skip them. Not in
     * node-label.csv, where an empty line is an unlabelled node. */
    int rc = tg_csv_open(&c, p->feat, TG_CSV_SKIP_BLANK);
    if (rc) return rc;
    tg_filew_t fw;
    if ((rc = tg_imp_open(im, TG_FILE_FEATURES, &fw, 0))) {
        tg_csv_close(&c);
        return rc;
    }
    tg_imp_prog_t pr;
    tg_imp_prog_begin(&pr, "features", tg_imp_file_size(p->feat));
    float *row = NULL;
    uint16_t *tmp = NULL;
    uint32_t d = 0;
    uint64_t rows = 0, n = im->num_nodes;
    while ((rc = tg_csv_next(&c)) > 0) {
        if (!row) {
            /* The first row fixes the feature dimension; later rows must match it. */
            size_t nf = tg_csv_nfields(&c);
            if (nf > (1u << 24)) {
                rc = tg_err(-EINVAL, "%s: line 1: %zu features, more than 16777216", p->feat, nf);
                break;
            }
            d = (uint32_t)nf;
            row = malloc((size_t)d * sizeof *row);
            tmp = malloc((size_t)d * sizeof *tmp);
            if (!row || !tmp) {
                rc = tg_err(-ENOMEM, "out of memory for a feature row");
                break;
            }
        }
        if (rows == n) {
            rc = tg_err(-EINVAL, "%s: line %llu: more feature rows than the %llu nodes of %s",
                        p->feat, (unsigned long long)c.line, (unsigned long long)n, p->nodes);
            break;
        }
        if ((rc = tg_csv_row_f32(&c, row, d))) break;
        if ((rc = tg_imp_put_feat_row(im, &fw, row, d, tmp))) {
            if (rc == -ERANGE)
                rc = tg_err_prefix(rc, "%s: line %llu", p->feat, (unsigned long long)c.line);
            break;
        }
        rows++;
        if ((rows & 0xffff) == 0) tg_imp_prog_update(&pr, tg_csv_offset(&c));
    }
    tg_imp_prog_end(&pr, rc == 0);
    free(row);
    free(tmp);
    tg_csv_close(&c);
    if (!rc && rows != n)
        rc = tg_err(-EINVAL, "%s has %llu rows but %s says %llu nodes", p->feat,
                    (unsigned long long)rows, p->nodes, (unsigned long long)n);
    if (rc) {
        tg_filew_discard(&fw);
        return rc;
    }
    im->dsw.meta.feat_dim = d;
    return tg_dsw_close_file(&im->dsw, TG_FILE_FEATURES, &fw);
}

/* ---------------------------------------------------------------- features on threads */

/* The file is cut into chunks of FEAT_CHUNK bytes, each ending at a line end. Threads take
 * chunks in file order and parse each into a slot: its rows converted to the feature dtype,
 * their CRC, the number of rows and lines. The calling thread writes the slots in chunk order,
 * so features.bin comes out byte for byte as from one thread (its CRC is combined from the
 * chunks' with crc32_combine), and frees each slot for the chunk nslot later. With two slots per
 * thread a thread can start its next chunk while its last one waits for an earlier one to be
 * written; memory is the slots plus each thread's read buffer, whatever the file size.
 *
 * Errors: a thread numbers lines from the start of its chunk, so its message would name the
 * wrong line. The writer, on reaching a chunk that failed (or that holds more rows than the
 * nodes left), knows the lines and rows before it and parses that chunk again, checking only,
 * to produce the message with the line of the whole file. Chunks are written in order, so the
 * first error in file order is the one reported. */

#define FEAT_CHUNK (4u << 20)       /* text bytes a thread parses at a time */
#define FEAT_MIN_BYTES (16u << 20)  /* a thread is added only for this much text */
#define FEAT_MAX_THREADS 8          /* as the edge-list importer's ranges */
#define FEAT_THREAD_MEM (4 + 2 * 8) /* MiB a thread takes: CSV buffer, two slots of <= 2 chunks */

enum { SLOT_FREE, SLOT_BUSY, SLOT_DONE };

typedef struct {
    int state;           /* SLOT_*, under feat_par_t.mu */
    uint64_t chunk;      /* the chunk it holds */
    uint64_t begin, end; /* that chunk's bytes of the file, when have_bounds */
    int have_bounds;
    char *out;            /* its rows in the feature dtype; a text row of D numbers has at least */
    size_t out_len, cap;  /* 2D bytes, so this is at most twice the chunk as f32 */
    uint32_t crc;         /* tg_crc32 of out[0, out_len) */
    uint64_t rows, lines; /* rows parsed, lines read */
    int rc;
    char msg[1024];
} feat_slot_t;

typedef struct {
    const char *path;
    int fd;
    uint64_t size, chunk_bytes, nchunks;
    uint64_t n; /* rows expected (N) */
    uint32_t d;
    int f16;
    const char *nodes_path; /* for the "more rows than nodes" message */
    pthread_mutex_t mu;
    pthread_cond_t cv;
    uint64_t next;    /* next chunk to hand out */
    uint64_t written; /* chunks the writer has taken */
    int stop;         /* the writer is done (error or end): take no more chunks */
    feat_slot_t *slot;
    int nslot;
    int nth;       /* threads */
    float *rowbuf; /* 2d floats (a row, then its f16 form) per thread, then the writer's */
} feat_par_t;

void (*tg_ogb_test_before_chunk)(uint64_t chunk);

/* Offset just after the first newline at or after off - 1 (so a line ending exactly before off
 * starts the chunk at off), or size when there is none. A file shorter than it was when the
 * chunks were planned is an error, not a silently shorter input. */
static int feat_line_start(const feat_par_t *p, uint64_t off, uint64_t *out)
{
    char buf[8192];
    off--;
    while (off < p->size) {
        ssize_t n =
            pread(p->fd, buf, (size_t)TG_MIN((uint64_t)sizeof buf, p->size - off), (off_t)off);
        if (n < 0 && errno == EINTR) continue;
        if (n < 0)
            return tg_err(-errno, "%s: read error at offset %llu: %s", p->path,
                          (unsigned long long)off, strerror(errno));
        if (n == 0)
            return tg_err(-EIO,
                          "%s: the file ends at offset %llu, before %llu (did it change while it "
                          "was read?)",
                          p->path, (unsigned long long)off, (unsigned long long)p->size);
        char *nl = memchr(buf, '\n', (size_t)n);
        if (nl) {
            *out = off + (uint64_t)(nl - buf) + 1;
            return 0;
        }
        off += (uint64_t)n;
    }
    *out = p->size;
    return 0;
}

/* Chunk k's bytes. Both ends are computed from k alone, so threads need not wait for each other:
 * chunk k ends where chunk k + 1 begins. A line longer than a chunk leaves empty chunks. */
static int feat_chunk_bounds(const feat_par_t *p, uint64_t k, uint64_t *begin, uint64_t *end)
{
    int rc = 0;
    *begin = 0;
    if (k > 0) rc = feat_line_start(p, k * p->chunk_bytes, begin);
    if (rc) return rc;
    if (k + 1 == p->nchunks) {
        *end = p->size;
        return 0;
    }
    return feat_line_start(p, (k + 1) * p->chunk_bytes, end);
}

/* The f16 overflow message of tg_imp_put_feat_row, with the line (rows are converted here into
 * the slot, not through a file writer). */
static int feat_to_f16(const tg_csv_t *c, const float *row, uint32_t d, uint16_t *out)
{
    for (uint32_t j = 0; j < d; j++) {
        out[j] = tg_f32_to_f16(row[j]);
        if ((out[j] & 0x7c00) == 0x7c00)
            return tg_err(-ERANGE,
                          "%s: line %llu: feature %u: %g does not fit in f16 (|x| > 65504); use "
                          "--feat-dtype f32",
                          c->path, (unsigned long long)c->line, j, (double)row[j]);
    }
    return 0;
}

/* Parses slot s's chunk. write: into s->out (a thread; lines numbered from the chunk's start,
 * rows not checked against N). Else only checks, numbering lines from first_line + 1 with
 * rows_before rows already written (the writer, to report an error at its line). */
static int feat_parse(feat_par_t *p, feat_slot_t *s, float *row, int write, uint64_t first_line,
                      uint64_t rows_before)
{
    tg_csv_t c;
    /* ALLOW_EMPTY: a chunk may hold only blank lines, or nothing; an empty file was already
     * caught when the first row was read. */
    int rc = tg_csv_open_range(&c, p->fd, p->path, TG_CSV_SKIP_BLANK | TG_CSV_ALLOW_EMPTY, s->begin,
                               s->end, write ? 0 : first_line);
    if (rc) return rc;
    size_t rb = (size_t)p->d * (p->f16 ? 2 : 4);
    uint64_t rows = 0;
    if (write) s->out_len = 0;
    while ((rc = tg_csv_next(&c)) > 0) {
        if (!write && rows_before + rows == p->n) {
            rc = tg_err(-EINVAL, "%s: line %llu: more feature rows than the %llu nodes of %s",
                        p->path, (unsigned long long)c.line, (unsigned long long)p->n,
                        p->nodes_path);
            break;
        }
        if (write && s->out_len + rb > s->cap) {
            size_t ncap = TG_MAX(TG_MAX(s->cap * 2, s->out_len + rb), (size_t)1 << 16);
            char *nb = realloc(s->out, ncap);
            if (!nb) {
                rc = tg_err(-ENOMEM, "out of memory for %zu bytes of feature rows", ncap);
                break;
            }
            s->out = nb;
            s->cap = ncap;
        }
        /* f32 rows are parsed straight into the slot; f16 ones through row. */
        float *dst = write && !p->f16 ? (float *)(void *)(s->out + s->out_len) : row;
        if ((rc = tg_csv_row_f32(&c, dst, p->d))) break;
        if (p->f16) {
            uint16_t *h = write ? (uint16_t *)(void *)(s->out + s->out_len) : (uint16_t *)NULL;
            if (!h) h = (uint16_t *)(void *)(row + p->d); /* checking: scratch after the row */
            if ((rc = feat_to_f16(&c, row, p->d, h))) break;
        }
        if (write) s->out_len += rb;
        rows++;
    }
    if (write) {
        s->rows = rows;
        s->lines = c.line;
        s->crc = tg_data_crc32(0, s->out, s->out_len);
    }
    tg_csv_close(&c);
    return rc;
}

typedef struct {
    feat_par_t *p;
    float *row;
    pthread_t th;
    int started;
} feat_worker_t;

static void *feat_worker(void *arg)
{
    feat_worker_t *w = arg;
    feat_par_t *p = w->p;
    pthread_mutex_lock(&p->mu);
    while (!p->stop && p->next < p->nchunks) {
        uint64_t k = p->next++;
        feat_slot_t *s = &p->slot[k % (uint64_t)p->nslot];
        /* The slot is free once the writer has taken chunk k - nslot. (Waiting for the slot's
         * state instead would let the thread holding chunk k + nslot take it first, and the
         * writer would wait for chunk k forever.) */
        while (k >= p->written + (uint64_t)p->nslot && !p->stop)
            pthread_cond_wait(&p->cv, &p->mu);
        if (p->stop) break;
        s->state = SLOT_BUSY;
        s->chunk = k;
        pthread_mutex_unlock(&p->mu);
        if (tg_ogb_test_before_chunk) tg_ogb_test_before_chunk(k);
        int rc = feat_chunk_bounds(p, k, &s->begin, &s->end);
        s->have_bounds = !rc;
        if (!rc) rc = feat_parse(p, s, w->row, 1, 0, 0);
        s->rc = rc;
        if (rc) snprintf(s->msg, sizeof s->msg, "%s", tg_errmsg());
        pthread_mutex_lock(&p->mu);
        s->state = SLOT_DONE;
        pthread_cond_broadcast(&p->cv);
    }
    pthread_mutex_unlock(&p->mu);
    return NULL;
}

/* The first row's number of fields, read on its own: every thread must know D from the start.
 * The messages for an empty file or an overlong first row are those of read_features_seq. */
static int feat_first_row(feat_par_t *p)
{
    tg_csv_t c;
    int rc = tg_csv_open_range(&c, p->fd, p->path, TG_CSV_SKIP_BLANK, 0, p->size, 0);
    if (rc) return rc;
    if ((rc = tg_csv_next(&c)) > 0) {
        size_t nf = tg_csv_nfields(&c);
        if (nf > (1u << 24))
            rc = tg_err(-EINVAL, "%s: line 1: %zu features, more than 16777216", p->path, nf);
        else
            p->d = (uint32_t)nf;
    }
    tg_csv_close(&c);
    return rc < 0 ? rc : 0;
}

/* Writes the chunks in order as the threads finish them; returns the first error in file
 * order. The threads are stopped and joined by the caller. */
static int feat_write_all(feat_par_t *p, tg_filew_t *fw, uint64_t *rows_out)
{
    tg_imp_prog_t pr;
    tg_imp_prog_begin(&pr, "features", p->size);
    uint64_t rows = 0, lines = 0;
    int rc = 0;
    for (uint64_t k = 0; k < p->nchunks && !rc; k++) {
        feat_slot_t *s = &p->slot[k % (uint64_t)p->nslot];
        pthread_mutex_lock(&p->mu);
        while (s->state != SLOT_DONE || s->chunk != k)
            pthread_cond_wait(&p->cv, &p->mu);
        pthread_mutex_unlock(&p->mu);
        if (s->rc || s->rows > p->n - rows) {
            /* Parse it again knowing its first line; an error that does not happen again (out
             * of memory, a read error), or one before the chunk's bounds were known, is
             * reported as the thread saw it. */
            if (s->have_bounds)
                rc = feat_parse(p, s, p->rowbuf + (size_t)p->nth * 2 * p->d, 0, lines, rows);
            if (!rc && s->rc) rc = tg_err(s->rc, "%s", s->msg);
            if (!rc)
                rc = tg_err(-EIO,
                            "%s: the bytes from offset %llu parsed differently the second time "
                            "(did the file change while it was read?)",
                            p->path, (unsigned long long)s->begin);
            break;
        }
        rc = tg_filew_write_crc(fw, s->out, s->out_len, s->crc);
        rows += s->rows;
        lines += s->lines;
        pthread_mutex_lock(&p->mu);
        s->state = SLOT_FREE;
        p->written = k + 1;
        pthread_cond_broadcast(&p->cv);
        pthread_mutex_unlock(&p->mu);
        tg_imp_prog_update(&pr, s->end);
    }
    tg_imp_prog_end(&pr, rc == 0);
    *rows_out = rows;
    return rc;
}

/* Reads the plain file open as fd on nth threads (chunk_bytes: 0 = FEAT_CHUNK). */
static int read_features_par(tg_imp_t *im, const ogb_paths_t *paths, int fd, uint64_t size, int nth,
                             uint64_t chunk_bytes)
{
    feat_par_t p;
    memset(&p, 0, sizeof p);
    p.path = paths->feat;
    p.nodes_path = paths->nodes;
    p.fd = fd;
    p.size = size;
    p.chunk_bytes = chunk_bytes ? chunk_bytes : FEAT_CHUNK;
    p.nchunks = (size + p.chunk_bytes - 1) / p.chunk_bytes;
    p.n = im->num_nodes;
    p.f16 = im->dsw.meta.feat_dtype == TG_F16;
    p.nth = nth;
    p.nslot = 2 * nth;
    int rc = feat_first_row(&p);
    if (rc) return rc;
    tg_filew_t fw;
    if ((rc = tg_imp_open(im, TG_FILE_FEATURES, &fw, 0))) return rc;
    feat_worker_t w[FEAT_MAX_THREADS];
    memset(w, 0, sizeof w);
    p.slot = calloc((size_t)p.nslot, sizeof *p.slot);
    p.rowbuf = malloc((size_t)(nth + 1) * 2 * p.d * sizeof *p.rowbuf);
    if (!p.slot || !p.rowbuf) {
        free(p.slot);
        free(p.rowbuf);
        tg_filew_discard(&fw);
        return tg_err(-ENOMEM, "out of memory for the feature parsing threads");
    }
    pthread_mutex_init(&p.mu, NULL);
    pthread_cond_init(&p.cv, NULL);
    int started = 0;
    for (int k = 0; k < nth; k++) {
        w[k].p = &p;
        w[k].row = p.rowbuf + (size_t)k * 2 * p.d;
        w[k].started = !pthread_create(&w[k].th, NULL, feat_worker, &w[k]);
        started += w[k].started;
    }
    uint64_t rows = 0;
    if (!started)
        rc = tg_err(-EAGAIN, "%s: cannot start a thread to parse it", p.path);
    else
        rc = feat_write_all(&p, &fw, &rows);
    pthread_mutex_lock(&p.mu);
    p.stop = 1;
    pthread_cond_broadcast(&p.cv);
    pthread_mutex_unlock(&p.mu);
    for (int k = 0; k < nth; k++)
        if (w[k].started) pthread_join(w[k].th, NULL);
    for (int k = 0; k < p.nslot; k++)
        free(p.slot[k].out);
    free(p.slot);
    free(p.rowbuf);
    pthread_mutex_destroy(&p.mu);
    pthread_cond_destroy(&p.cv);
    if (!rc && rows != p.n)
        rc = tg_err(-EINVAL, "%s has %llu rows but %s says %llu nodes", p.path,
                    (unsigned long long)rows, p.nodes_path, (unsigned long long)p.n);
    if (rc) {
        tg_filew_discard(&fw);
        return rc;
    }
    im->dsw.meta.feat_dim = p.d;
    return tg_dsw_close_file(&im->dsw, TG_FILE_FEATURES, &fw);
}

/* A plain regular file of at least 2 x FEAT_MIN_BYTES is parsed on threads: one per core, at
 * most FEAT_MAX_THREADS, each with FEAT_MIN_BYTES of text or more, as many as half of --mem
 * holds (the edge sort is finished, so --mem is free again). nthreads > 0 (tests) forces that
 * many threads on any plain file, and chunk_bytes the chunk size. */
static int read_features(tg_imp_t *im, const ogb_paths_t *p, int nthreads, uint64_t chunk_bytes)
{
    int fd = open(p->feat, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return read_features_seq(im, p); /* which reports why it cannot be read */
    struct stat st;
    unsigned char magic[2] = {0, 0};
    int n = 1;
    if (!fstat(fd, &st) && S_ISREG(st.st_mode) && pread(fd, magic, 2, 0) >= 0 &&
        !(magic[0] == 0x1f && magic[1] == 0x8b)) {
        uint64_t size = (uint64_t)st.st_size;
        if (nthreads > 0) {
            n = TG_MIN(nthreads, FEAT_MAX_THREADS);
        } else {
            long cpus = sysconf(_SC_NPROCESSORS_ONLN);
            uint64_t by_mem = im->o->mem_bytes / 2 / ((uint64_t)FEAT_THREAD_MEM << 20);
            uint64_t k = TG_MIN(TG_MIN((uint64_t)(cpus > 0 ? cpus : 1), (uint64_t)FEAT_MAX_THREADS),
                                TG_MIN(size / FEAT_MIN_BYTES, by_mem));
            n = (int)TG_MAX(k, (uint64_t)1);
        }
        if (n > 1 || nthreads > 0) {
            posix_fadvise(fd, 0, 0, POSIX_FADV_SEQUENTIAL);
            int rc = read_features_par(im, p, fd, size, n, chunk_bytes);
            close(fd);
            return rc;
        }
    }
    close(fd);
    return read_features_seq(im, p);
}

/* One label value: an integer class (pandas may write "3.0"), or empty/NaN = unlabelled. */
static int label_value(const tg_csv_t *c, size_t i, int multi, int32_t *out)
{
    if (tg_csv_is_missing(c, i)) {
        if (multi)
            return tg_err(-EINVAL, "%s: line %llu, field %zu: missing value in a multi-label row",
                          c->path, (unsigned long long)c->line, i + 1);
        *out = -1;
        return 0;
    }
    double v;
    int rc = tg_csv_get_f64(c, i, &v);
    if (rc) return rc;
    if (multi ? (v != 0 && v != 1) : (v != floor(v) || v < -1 || v >= (double)(1u << 24)))
        return tg_err(-EINVAL, "%s: line %llu, field %zu: expected %s, got '%s'", c->path,
                      (unsigned long long)c->line, i + 1,
                      multi ? "0 or 1" : "a class id in 0..16777215 (or empty/NaN)", c->field[i]);
    *out = (int32_t)v;
    return 0;
}

static int read_labels(tg_imp_t *im, const ogb_paths_t *p)
{
    tg_csv_t c;
    int rc = tg_csv_open(&c, p->label, 0);
    if (rc) return rc;
    tg_filew_t fw;
    if ((rc = tg_imp_open(im, TG_FILE_LABELS, &fw, 1u << 20))) {
        tg_csv_close(&c);
        return rc;
    }
    size_t ncol = 0;
    int32_t *row = NULL, maxc = -1;
    uint64_t rows = 0, labelled = 0, n = im->num_nodes;
    while ((rc = tg_csv_next(&c)) > 0) {
        if (!row) {
            ncol = tg_csv_nfields(&c);
            if (ncol > (1u << 24)) {
                rc = tg_err(-EINVAL, "%s: line 1: %zu label columns, more than 16777216", p->label,
                            ncol);
                break;
            }
            if (!(row = malloc(ncol * sizeof *row))) {
                rc = tg_err(-ENOMEM, "out of memory for a label row");
                break;
            }
        }
        if (rows == n) {
            rc = tg_err(-EINVAL, "%s: line %llu: more label rows than the %llu nodes of %s",
                        p->label, (unsigned long long)c.line, (unsigned long long)n, p->nodes);
            break;
        }
        if ((rc = tg_csv_expect_fields(&c, ncol))) break;
        for (size_t j = 0; j < ncol && !rc; j++)
            rc = label_value(&c, j, ncol > 1, &row[j]);
        if (rc) break;
        if (ncol == 1 && row[0] >= 0) labelled++;
        maxc = TG_MAX(maxc, row[0]);
        if ((rc = tg_filew_write(&fw, row, ncol * sizeof *row))) break;
        rows++;
    }
    free(row);
    tg_csv_close(&c);
    if (!rc && rows != n)
        rc = tg_err(-EINVAL, "%s has %llu rows but %s says %llu nodes", p->label,
                    (unsigned long long)rows, p->nodes, (unsigned long long)n);
    if (!rc && ncol == 1 && !labelled)
        rc = tg_err(-EINVAL, "%s: no node has a label (every value is empty or NaN)", p->label);
    if (rc) {
        tg_filew_discard(&fw);
        return rc;
    }
    im->dsw.meta.multi_label = ncol > 1;
    im->dsw.meta.num_classes = ncol > 1 ? (uint32_t)ncol : (uint32_t)maxc + 1;
    return tg_dsw_close_file(&im->dsw, TG_FILE_LABELS, &fw);
}

int tg_ogb_read_split_csv(tg_imp_t *im, const char *path, tg_file_id_t which)
{
    tg_csv_t c;
    int rc = tg_csv_open(&c, path, TG_CSV_ALLOW_EMPTY | TG_CSV_SKIP_BLANK);
    if (rc) return rc;
    tg_filew_t fw;
    if ((rc = tg_imp_open(im, which, &fw, 1u << 20))) {
        tg_csv_close(&c);
        return rc;
    }
    while ((rc = tg_csv_next(&c)) > 0) {
        int64_t id;
        if ((rc = tg_csv_expect_fields(&c, 1)) || (rc = tg_csv_get_i64(&c, 0, &id))) break;
        if ((rc = tg_imp_split_add(im, &fw, which, id, path, "line", c.line))) break;
    }
    tg_csv_close(&c);
    if (!rc && which == TG_FILE_TRAIN && im->dsw.meta.num_train == 0)
        rc = tg_err(-EINVAL, "%s: no training nodes", path);
    if (rc) {
        tg_filew_discard(&fw);
        return rc;
    }
    return tg_dsw_close_file(&im->dsw, which, &fw);
}

/* A plain CSV file of n rows, each at least min_row bytes with its newline (the last one's
 * optional), is at least n * min_row - 1 bytes. Checked before the edges, whose sort writes
 * indptr for n nodes: a num-node-list far above the rows (a typo) stops before gigabytes are
 * written. Below 2^20 nodes (8 MiB of indptr) the rows are left to be counted as they are read,
 * whose messages say more (an empty file, the line that is short). A .gz file's size says nothing
 * about its rows. */
static int check_rows_fit(const char *path, const char *nodes, uint64_t n, uint64_t min_row)
{
    size_t len = strlen(path);
    struct stat st;
    if (n < (1u << 20) || (len > 3 && !strcmp(path + len - 3, ".gz")) || stat(path, &st) ||
        !S_ISREG(st.st_mode))
        return 0;
    if ((uint64_t)st.st_size + 1 >= n * min_row) return 0;
    return tg_err(-EINVAL,
                  "%s has %llu bytes, too few for the %llu nodes %s says (at least %llu bytes "
                  "for rows of %llu bytes)",
                  path, (unsigned long long)st.st_size, (unsigned long long)n, nodes,
                  (unsigned long long)(n * min_row - 1), (unsigned long long)min_row);
}

int tg_import_ogb_threads(const char *out_dir, const tg_import_opts_t *o, int nthreads,
                          uint64_t chunk_bytes)
{
    /* OGB's binary raw layout (ogbn-papers100M): raw/data.npz instead of the CSV files. */
    char npz[PATHLEN];
    struct stat st;
    snprintf(npz, sizeof npz, "%s/raw/data.npz", o->src);
    if (!stat(npz, &st) && S_ISREG(st.st_mode)) return tg_import_ogb_npz(out_dir, o);
    ogb_paths_t *p = calloc(1, sizeof *p);
    if (!p) return tg_err(-ENOMEM, "out of memory");
    tg_imp_t im;
    memset(&im, 0, sizeof im);
    uint64_t n = 0, e = 0;
    int rc = find_paths(o, p);
    if (!rc) rc = read_count(p->nodes, &n);
    if (!rc && n == 0) rc = tg_err(-EINVAL, "%s: the graph has no nodes", p->nodes);
    if (!rc) rc = read_count(p->nedges, &e);
    /* a feature row is a number and a newline; a label row may be empty (unlabelled) */
    if (!rc) rc = check_rows_fit(p->feat, p->nodes, n, 2);
    if (!rc) rc = check_rows_fit(p->label, p->nodes, n, 1);
    if (rc) goto out;
    char source[512];
    snprintf(source, sizeof source, "import --from ogb %s --split %s%s%s%s", o->src, p->split_name,
             o->undirected ? " --undirected" : "", o->dedup ? " --dedup" : "",
             o->self_loops ? " --self-loops" : "");
    if ((rc = tg_imp_begin(&im, out_dir, o, source))) goto out;
    tg_log_info("import ogb %s: %llu nodes, %llu edges, split '%s'", o->src, (unsigned long long)n,
                (unsigned long long)e, p->split_name);
    if ((rc = tg_imp_edges_begin(&im, n))) goto out;
    if ((rc = read_edges(&im, p, e))) goto out;
    if ((rc = read_features(&im, p, nthreads, chunk_bytes))) goto out;
    if ((rc = read_labels(&im, p))) goto out;
    for (int k = 0; k < 3 && !rc; k++)
        rc = tg_ogb_read_split_csv(&im, p->split[k], (tg_file_id_t)(TG_FILE_TRAIN + k));
    if (rc) goto out;
    rc = tg_imp_commit(&im);
out:
    tg_imp_abort(&im);
    free(p);
    return rc;
}

int tg_import_ogb(const char *out_dir, const tg_import_opts_t *o)
{
    return tg_import_ogb_threads(out_dir, o, 0, 0);
}
