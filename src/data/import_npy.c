/* `tiergnn import OUT --from npy SRC`: a directory of NumPy arrays.
 *
 *     SRC/feat.npy                  (N, D) float16/32/64            -> features.bin (f32 or f16)
 *     SRC/labels.npy                (N,) int (or float, NaN = unlabelled), or (N, C) 0/1
 *     SRC/indptr.npy + indices.npy  CSC: in-neighbours of v are indices[indptr[v]:indptr[v+1]]
 *  or SRC/edge_index.npy            (2, E): row 0 = src, row 1 = dst (PyG convention)
 *     SRC/{train,valid,test}_idx.npy  (k,) int node ids
 *
 * N comes from feat.npy; every other count is checked against it. Arrays are read in chunks
 * through the .npy reader's bounce buffer, so memory does not grow with the input.
 *
 * The features are most of the bytes and need no more than a copy, a check and a CRC: they are
 * copied on a thread of their own while this one reads and sorts the edges, so the disk writes
 * features while the CPU sorts (one after the other, the import took the sum of both).
 */
#include "import-impl.h"

#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define PATHLEN 4096
#define CHUNK (1u << 16) /* elements per read */

static int exists(const char *p)
{
    struct stat st;
    return !stat(p, &st);
}

static int open_npy(tg_npy_t *f, const char *src, const char *name, char *path)
{
    snprintf(path, PATHLEN, "%s/%s", src, name);
    if (!exists(path)) return tg_err(-ENOENT, "%s: missing", path);
    return tg_npy_open(f, path);
}

static int expect_rank(const tg_npy_t *f, int ndim, const char *shape_text)
{
    if (f->ndim == ndim) return 0;
    char got[128];
    size_t k = (size_t)snprintf(got, sizeof got, "(");
    for (int i = 0; i < f->ndim && k < sizeof got; i++)
        k += (size_t)snprintf(got + k, sizeof got - k, "%s%llu", i ? ", " : "",
                              (unsigned long long)f->shape[i]);
    if (k < sizeof got) snprintf(got + k, sizeof got - k, "%s)", f->ndim == 1 ? "," : "");
    return tg_err(-EINVAL, "%s: expected shape %s, got %s", f->path, shape_text, got);
}

/* Checks one id read from element `i` of f. */
static int check_id(const tg_npy_t *f, uint64_t i, int64_t v, uint64_t n, const char *nsrc)
{
    if (v >= 0 && (uint64_t)v < n) return 0;
    return tg_err(-EINVAL,
                  "%s: offset %llu (element %llu): node id %lld out of range [0, %llu) (N from %s)",
                  f->path, (unsigned long long)(f->data_off + i * f->itemsize),
                  (unsigned long long)i, (long long)v, (unsigned long long)n, nsrc);
}

/* CSC input: walks indptr and indices in lockstep; dst = column, src = entry. */
static int read_csc(tg_imp_t *im, const char *src, const char *feat_path)
{
    char pp[PATHLEN], pi[PATHLEN];
    tg_npy_t ip, ix;
    int rc = open_npy(&ip, src, "indptr.npy", pp);
    if (rc) return rc;
    if ((rc = open_npy(&ix, src, "indices.npy", pi))) {
        tg_npy_close(&ip);
        return rc;
    }
    int64_t *a = malloc(CHUNK * sizeof *a), *b = malloc(CHUNK * sizeof *b);
    uint64_t n = im->num_nodes;
    if (!a || !b) {
        rc = tg_err(-ENOMEM, "out of memory");
        goto out;
    }
    if ((rc = tg_npy_expect_dtype(&ip, TG_NPY_KIND_INT, "indptr offsets")) ||
        (rc = tg_npy_expect_dtype(&ix, TG_NPY_KIND_INT, "node ids")) ||
        (rc = expect_rank(&ip, 1, "(N+1,)")) || (rc = expect_rank(&ix, 1, "(E,)")))
        goto out;
    if (ip.shape[0] != n + 1) {
        rc = tg_err(-EINVAL, "%s has %llu entries but %s has %llu rows (expected N+1 = %llu)", pp,
                    (unsigned long long)ip.shape[0], feat_path, (unsigned long long)n,
                    (unsigned long long)(n + 1));
        goto out;
    }
    uint64_t e = ix.shape[0];
    tg_edgesort_expect(im->es, (im->o->undirected ? 2 : 1) * e);
    tg_imp_prog_t pr;
    tg_imp_prog_begin(&pr, "edges", e * ix.itemsize);
    int64_t prev = 0;
    uint64_t v = 0, pos = 0, have = 0, boff = 0; /* b holds indices [boff, boff + have) */
    for (uint64_t first = 0; first < n + 1 && !rc; first += CHUNK) {
        size_t k = (size_t)TG_MIN((uint64_t)CHUNK, n + 1 - first);
        if ((rc = tg_npy_read_i64(&ip, first, k, a))) break;
        for (size_t j = 0; j < k && !rc; j++) {
            int64_t x = a[j];
            uint64_t at = ip.data_off + (first + j) * ip.itemsize;
            if (first + j == 0 && x != 0) {
                rc = tg_err(-EINVAL, "%s: offset %llu: indptr[0] = %lld, expected 0", pp,
                            (unsigned long long)at, (long long)x);
                break;
            }
            if (x < prev || (uint64_t)x > e) {
                rc = tg_err(-EINVAL,
                            "%s: offset %llu: indptr[%llu] = %lld, expected a value in [%lld, "
                            "%llu] (non-decreasing, at most the %llu entries of %s)",
                            pp, (unsigned long long)at, (unsigned long long)(first + j),
                            (long long)x, (long long)prev, (unsigned long long)e,
                            (unsigned long long)e, pi);
                break;
            }
            if (first + j > 0) {
                /* column v = first + j - 1 spans [prev, x) */
                for (; pos < (uint64_t)x && !rc; pos++) {
                    if (pos >= boff + have) {
                        boff = pos;
                        have = TG_MIN((uint64_t)CHUNK, e - pos);
                        if ((rc = tg_npy_read_i64(&ix, boff, (size_t)have, b))) break;
                        tg_imp_prog_update(&pr, pos * ix.itemsize);
                    }
                    int64_t s = b[pos - boff];
                    if ((rc = check_id(&ix, pos, s, n, feat_path))) break;
                    rc = tg_imp_edge(im, (uint64_t)s, v);
                }
                v++;
            }
            prev = x;
        }
    }
    tg_imp_prog_end(&pr, rc == 0);
    if (!rc && (uint64_t)prev != e)
        rc = tg_err(-EINVAL, "%s: indptr[N] = %lld but %s has %llu entries", pp, (long long)prev,
                    pi, (unsigned long long)e);
out:
    free(a);
    free(b);
    tg_npy_close(&ip);
    tg_npy_close(&ix);
    return rc;
}

/* edge_index (2, E): row 0 and row 1 are read side by side. */
/* Adds k range-checked edges s[i] -> d[i] as packed keys written straight into the edge sort's
 * run buffer (tg_edgesort_reserve): no per-edge call, no copy through tg_edgesort_add. The
 * keys are the ones tg_imp_edge would have added, so the dataset is the same. */
static int add_packed(tg_imp_t *im, const uint64_t *s, const uint64_t *d, size_t k)
{
    const unsigned kb = tg_edgesort_key_bits(im->es);
    const int both = im->o->undirected;
    uint64_t *keys;
    int rc = tg_imp_flush_edges(im); /* whatever went through tg_imp_edge first */
    if (!rc) rc = tg_edgesort_reserve(im->es, (both ? 2 : 1) * k, &keys);
    if (rc) return rc;
    size_t m = 0;
    for (size_t j = 0; j < k; j++) {
        keys[m++] = d[j] << kb | s[j];
        if (both && s[j] != d[j]) keys[m++] = s[j] << kb | d[j];
    }
    im->edges_in += k;
    return tg_edgesort_commit(im->es, m);
}

static int read_edge_index(tg_imp_t *im, const char *src, const char *feat_path)
{
    char pe[PATHLEN];
    tg_npy_t f;
    int rc = open_npy(&f, src, "edge_index.npy", pe);
    if (rc) return rc;
    int64_t *s = malloc(CHUNK * sizeof *s), *d = malloc(CHUNK * sizeof *d);
    if (!s || !d) {
        rc = tg_err(-ENOMEM, "out of memory");
        goto out;
    }
    if ((rc = tg_npy_expect_dtype(&f, TG_NPY_KIND_INT, "node ids")) ||
        (rc = expect_rank(&f, 2, "(2, E)")))
        goto out;
    if (f.shape[0] != 2) {
        rc = tg_err(-EINVAL, "%s: expected shape (2, E), got (%llu, %llu)%s", pe,
                    (unsigned long long)f.shape[0], (unsigned long long)f.shape[1],
                    f.shape[1] == 2 ? " (transpose it: np.save(p, ei.T.copy()))" : "");
        goto out;
    }
    uint64_t e = f.shape[1], n = im->num_nodes;
    tg_edgesort_expect(im->es, (im->o->undirected ? 2 : 1) * e);
    /* room for a whole chunk of packed keys (both directions with --undirected) */
    int packed = tg_edgesort_key_bits(im->es) &&
                 tg_edgesort_capacity(im->es) >= (im->o->undirected ? 2u : 1u) * CHUNK;
    tg_imp_prog_t pr;
    tg_imp_prog_begin(&pr, "edges", 2 * e * f.itemsize);
    for (uint64_t first = 0; first < e && !rc; first += CHUNK) {
        size_t k = (size_t)TG_MIN((uint64_t)CHUNK, e - first);
        if ((rc = tg_npy_read_i64(&f, first, k, s)) || (rc = tg_npy_read_i64(&f, e + first, k, d)))
            break;
        /* one branch-free pass finds whether any id is out of range (negative ids are huge
         * as unsigned); only then does the slow pass name the first */
        uint64_t bad = 0;
        for (size_t j = 0; j < k; j++)
            bad |= ((uint64_t)s[j] >= n) | ((uint64_t)d[j] >= n);
        if (!bad && packed && (rc = add_packed(im, (const uint64_t *)s, (const uint64_t *)d, k)))
            break;
        for (size_t j = 0; j < k && !rc && (bad || !packed); j++) {
            if (bad && ((rc = check_id(&f, first + j, s[j], n, feat_path)) ||
                        (rc = check_id(&f, e + first + j, d[j], n, feat_path))))
                break;
            rc = tg_imp_edge(im, (uint64_t)s[j], (uint64_t)d[j]);
        }
        tg_imp_prog_update(&pr, 2 * (first + k) * f.itemsize);
    }
    tg_imp_prog_end(&pr, rc == 0);
out:
    free(s);
    free(d);
    tg_npy_close(&f);
    return rc;
}

/* The feature copy's thread: its handle, the stop flag the edges raise when they fail, and
 * what it reports back (rows done for the progress bar; its error, copied out of its
 * thread-local message). */
typedef struct feat_job {
    tg_imp_t *im;
    tg_npy_t *f;
    pthread_t th;
    int threaded;
    atomic_int stop;
    atomic_int finished;
    atomic_uint_fast64_t rows_done;
    int rc;
    char msg[512];
} feat_job_t;

/* Memory the feature copy keeps beside the edge sort: its 8 MiB double-buffered writer, the
 * 1 MiB row buffer and the .npy reader's bounce buffer, rounded up. */
#define FEAT_JOB_BYTES (24ull << 20)

static int read_features(feat_job_t *job)
{
    tg_imp_t *im = job->im;
    tg_npy_t *f = job->f;
    uint64_t n = f->shape[0];
    uint32_t d = (uint32_t)f->shape[1];
    size_t rows_per = TG_MAX((size_t)1, (size_t)(1u << 20) / d);
    float *buf = malloc(rows_per * d * sizeof *buf);
    uint16_t *tmp = malloc((size_t)d * sizeof *tmp);
    tg_filew_t fw;
    int rc = (!buf || !tmp) ? tg_err(-ENOMEM, "out of memory for feature rows")
                            : tg_imp_open(im, TG_FILE_FEATURES, &fw, 0);
    if (rc) {
        free(buf);
        free(tmp);
        return rc;
    }
    for (uint64_t r = 0; r < n && !rc; r += rows_per) {
        if (atomic_load(&job->stop)) {
            rc = -ECANCELED; /* the edges failed; their error is the one reported */
            break;
        }
        size_t k = (size_t)TG_MIN((uint64_t)rows_per, n - r);
        if ((rc = tg_imp_put_feat_rows(im, &fw, f, r, k, d, buf, tmp, "offset"))) break;
        atomic_store(&job->rows_done, r + k);
    }
    free(buf);
    free(tmp);
    if (rc) {
        tg_filew_discard(&fw);
        return rc;
    }
    im->dsw.meta.feat_dim = d;
    return tg_dsw_close_file(&im->dsw, TG_FILE_FEATURES, &fw);
}

static void *feat_main(void *arg)
{
    feat_job_t *job = arg;
    job->rc = read_features(job);
    if (job->rc) snprintf(job->msg, sizeof job->msg, "%s", tg_errmsg());
    atomic_store(&job->finished, 1);
    return NULL;
}

static void feat_start(feat_job_t *job, tg_imp_t *im, tg_npy_t *f)
{
    memset(job, 0, sizeof *job);
    job->im = im;
    job->f = f;
    /* no thread: feat_finish copies the features on this one */
    job->threaded = pthread_create(&job->th, NULL, feat_main, job) == 0;
}

/* Waits for the feature copy (showing its progress once it is all that is left), or runs it
 * here when it has no thread; stops it first when the rest failed (rc). */
static int feat_finish(feat_job_t *job, int rc)
{
    if (!job->threaded) return rc ? rc : read_features(job);
    if (rc) {
        atomic_store(&job->stop, 1);
        pthread_join(job->th, NULL);
        return rc;
    }
    tg_imp_prog_t pr;
    uint64_t n = job->f->shape[0], row_bytes = job->f->shape[1] * job->f->itemsize;
    tg_imp_prog_begin(&pr, "features", n * row_bytes);
    while (!atomic_load(&job->finished)) {
        tg_imp_prog_update(&pr, atomic_load(&job->rows_done) * row_bytes);
        usleep(50000);
    }
    pthread_join(job->th, NULL);
    tg_imp_prog_end(&pr, job->rc == 0);
    return job->rc ? tg_err(job->rc, "%s", job->msg) : 0;
}

static int read_labels(tg_imp_t *im, const char *src, const char *feat_path)
{
    char pl[PATHLEN];
    tg_npy_t f;
    int rc = open_npy(&f, src, "labels.npy", pl);
    if (rc) return rc;
    uint64_t n = im->num_nodes, c = 1;
    int multi = f.ndim == 2;
    double *buf = malloc(CHUNK * sizeof *buf);
    tg_filew_t fw;
    int fw_open = 0;
    if (!buf) {
        rc = tg_err(-ENOMEM, "out of memory");
        goto out;
    }
    if ((rc = tg_npy_expect_dtype(&f, TG_NPY_KIND_INT | TG_NPY_KIND_BOOL | TG_NPY_KIND_FLOAT,
                                  "labels")))
        goto out;
    if (f.ndim != 1 && f.ndim != 2) {
        rc = expect_rank(&f, 1, "(N,) or (N, C)");
        goto out;
    }
    if (f.shape[0] != n) {
        rc = tg_err(-EINVAL, "%s has %llu rows but %s has %llu", pl, (unsigned long long)f.shape[0],
                    feat_path, (unsigned long long)n);
        goto out;
    }
    if (multi) c = f.shape[1];
    if (c < 1 || c > (1u << 24)) {
        rc = tg_err(-EINVAL, "%s: %llu label columns, expected 1..16777216", pl,
                    (unsigned long long)c);
        goto out;
    }
    if ((rc = tg_imp_open(im, TG_FILE_LABELS, &fw, 1u << 20))) goto out;
    fw_open = 1;
    int64_t maxc = -1;
    uint64_t total = n * c;
    for (uint64_t first = 0; first < total && !rc; first += CHUNK) {
        size_t k = (size_t)TG_MIN((uint64_t)CHUNK, total - first);
        if ((rc = tg_npy_read_f64(&f, first, k, buf))) break;
        for (size_t j = 0; j < k; j++) {
            double v = buf[j];
            int32_t out;
            if (isnan(v) && !multi) {
                out = -1; /* unlabelled, as in OGB's float label arrays */
            } else if (multi ? (v != 0 && v != 1)
                             : (v != floor(v) || v < -1 || v >= (double)(1u << 24))) {
                rc = tg_err(-EINVAL, "%s: offset %llu: label %g, expected %s", pl,
                            (unsigned long long)(f.data_off + (first + j) * f.itemsize), v,
                            multi ? "0 or 1" : "a class id in 0..16777215, -1 or NaN");
                break;
            } else {
                out = (int32_t)v;
            }
            maxc = TG_MAX(maxc, (int64_t)out);
            if ((rc = tg_filew_write(&fw, &out, 4))) break;
        }
    }
    if (!rc && maxc < 0) rc = tg_err(-EINVAL, "%s: no node has a label (all -1 or NaN)", pl);
    if (rc) goto out;
    im->dsw.meta.multi_label = multi;
    im->dsw.meta.num_classes = multi ? (uint32_t)c : (uint32_t)maxc + 1;
    rc = tg_dsw_close_file(&im->dsw, TG_FILE_LABELS, &fw);
    fw_open = 0;
out:
    if (fw_open) tg_filew_discard(&fw);
    free(buf);
    tg_npy_close(&f);
    return rc;
}

static int read_split(tg_imp_t *im, const char *src, const char *name, tg_file_id_t which,
                      char *path)
{
    tg_npy_t f;
    int rc = open_npy(&f, src, name, path);
    if (rc) return rc;
    int64_t *buf = malloc(CHUNK * sizeof *buf);
    tg_filew_t fw;
    if (!buf) rc = tg_err(-ENOMEM, "out of memory");
    if (!rc) rc = tg_npy_expect_dtype(&f, TG_NPY_KIND_INT, "node ids");
    if (!rc) rc = expect_rank(&f, 1, "(k,)");
    if (!rc && which == TG_FILE_TRAIN && f.shape[0] == 0)
        rc = tg_err(-EINVAL, "%s: no training nodes", path);
    if (!rc) rc = tg_imp_open(im, which, &fw, 1u << 20);
    if (rc) {
        free(buf);
        tg_npy_close(&f);
        return rc;
    }
    for (uint64_t first = 0; first < f.shape[0] && !rc; first += CHUNK) {
        size_t k = (size_t)TG_MIN((uint64_t)CHUNK, f.shape[0] - first);
        if ((rc = tg_npy_read_i64(&f, first, k, buf))) break;
        for (size_t j = 0; j < k && !rc; j++)
            rc = tg_imp_split_add(im, &fw, which, buf[j], path, "offset",
                                  f.data_off + (first + j) * f.itemsize);
    }
    free(buf);
    tg_npy_close(&f);
    if (rc) {
        tg_filew_discard(&fw);
        return rc;
    }
    return tg_dsw_close_file(&im->dsw, which, &fw);
}

int tg_import_npy(const char *out_dir, const tg_import_opts_t *o)
{
    struct stat st;
    if (stat(o->src, &st) || !S_ISDIR(st.st_mode))
        return tg_err(-ENOENT,
                      "%s: not a directory (expected feat.npy, labels.npy, indptr.npy + "
                      "indices.npy or edge_index.npy, {train,valid,test}_idx.npy)",
                      o->src);
    char pf[PATHLEN], tmp[PATHLEN];
    snprintf(tmp, sizeof tmp, "%s/edge_index.npy", o->src);
    int have_ei = exists(tmp);
    snprintf(tmp, sizeof tmp, "%s/indptr.npy", o->src);
    int have_csc = exists(tmp);
    if (have_ei && have_csc)
        return tg_err(-EINVAL, "%s: both edge_index.npy and indptr.npy exist; keep one of them",
                      o->src);
    if (!have_ei && !have_csc)
        return tg_err(-ENOENT, "%s: missing the graph: indptr.npy + indices.npy or edge_index.npy",
                      o->src);
    tg_npy_t feat;
    int rc = open_npy(&feat, o->src, "feat.npy", pf);
    if (rc) return rc;
    if ((rc = tg_npy_expect_dtype(&feat, TG_NPY_KIND_FLOAT, "features")) ||
        (rc = expect_rank(&feat, 2, "(N, D)"))) {
        tg_npy_close(&feat);
        return rc;
    }
    uint64_t n = feat.shape[0];
    if (n == 0 || feat.shape[1] == 0 || feat.shape[1] > (1u << 24)) {
        rc = tg_err(-EINVAL, "%s: shape (%llu, %llu): need N >= 1 and 1 <= D <= 16777216", pf,
                    (unsigned long long)n, (unsigned long long)feat.shape[1]);
        tg_npy_close(&feat);
        return rc;
    }
    /* The split paths outlive each split: overlap messages name the earlier file. */
    char(*split_paths)[PATHLEN] = malloc(3 * sizeof *split_paths);
    if (!split_paths) {
        tg_npy_close(&feat);
        return tg_err(-ENOMEM, "out of memory");
    }
    /* The feature copy keeps FEAT_JOB_BYTES of --mem while the edges are sorted. */
    tg_import_opts_t so = *o;
    if (so.mem_bytes > 2 * FEAT_JOB_BYTES) so.mem_bytes -= FEAT_JOB_BYTES;
    tg_imp_t im;
    char source[512];
    snprintf(source, sizeof source, "import --from npy %s%s%s%s", o->src,
             o->undirected ? " --undirected" : "", o->dedup ? " --dedup" : "",
             o->self_loops ? " --self-loops" : "");
    if ((rc = tg_imp_begin(&im, out_dir, &so, source))) {
        tg_npy_close(&feat);
        free(split_paths);
        return rc;
    }
    tg_log_info("import npy %s: %llu nodes, %llu features (%s), graph from %s", o->src,
                (unsigned long long)n, (unsigned long long)feat.shape[1], feat.descr,
                have_ei ? "edge_index.npy" : "indptr.npy + indices.npy");
    feat_job_t fj;
    feat_start(&fj, &im, &feat);
    if (!(rc = tg_imp_edges_begin(&im, n)))
        rc = have_ei ? read_edge_index(&im, o->src, pf) : read_csc(&im, o->src, pf);
    if (!rc) {
        tg_log_info("edges: %llu read, sorting into CSC", (unsigned long long)im.edges_in);
        rc = tg_imp_edges_finish(&im);
    }
    if (!rc) rc = read_labels(&im, o->src, pf);
    static const char *const names[3] = {"train_idx.npy", "valid_idx.npy", "test_idx.npy"};
    for (int k = 0; k < 3 && !rc; k++)
        rc = read_split(&im, o->src, names[k], (tg_file_id_t)(TG_FILE_TRAIN + k), split_paths[k]);
    if ((rc = feat_finish(&fj, rc))) goto out;
    rc = tg_imp_commit(&im);
out:
    tg_imp_abort(&im);
    tg_npy_close(&feat);
    free(split_paths);
    return rc;
}
