/* NumPy .npz archives: `tiergnn import OUT --from npz FILE`, and OGB's binary raw layout that
 * `--from ogb SRC` reads when SRC/raw/data.npz exists.
 *
 *     --from npz FILE.npz     edge_index.npy  (2, E) integer: row 0 = src, row 1 = dst
 *                             node_feat.npy or x.npy        (N, D) float
 *                             node_label.npy or y.npy       (N,) or (N, 1), or (N, C) of 0/1
 *                             train_idx / valid_idx (or val_idx) / test_idx   (k,) node ids
 *                          or train_mask / valid_mask (or val_mask) / test_mask  (N,) bool
 *                             num_nodes_list, num_edges_list (optional; checked when present)
 *     --from ogb SRC          SRC/raw/data.npz (edge_index, node_feat, num_nodes_list,
 *                             num_edges_list; OGB's read_binary_graph_raw),
 *                             SRC/raw/node-label.npz (node_label),
 *                             SRC/split/NAME/{train,valid,test}.csv[.gz]
 *
 * Every member streams (zip.c): stored members are read with pread, deflated ones inflated
 * through a 256 KiB buffer, in the order the dataset files are written, so memory is the edge
 * sort's share of --mem plus a few MiB whatever the archive's size. Each member's CRC-32 is
 * checked when its last byte has been read; an error names the archive and the member.
 */
#include "import-impl.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#define PATHLEN 4096
#define CHUNK (1u << 16) /* elements per read */

/* Where the arrays come from. */
typedef struct {
    const tg_zip_t *g;    /* edge_index, features, counts, splits given as members */
    const char *feat;     /* member names */
    const tg_zip_t *lz;   /* the labels' archive (g, or OGB's node-label.npz) */
    const char *label;    /* NULL: none found (an error naming the names looked for) */
    int counts;           /* num_nodes_list / num_edges_list: 1 required, 0 if present */
    const char *split[3]; /* members (index arrays or masks), or NULL */
    int mask[3];          /* split[k] is an (N,) mask */
    const char *csv[3];   /* or CSV files (OGB) */
} npz_plan_t;

static void shape_text(const tg_npy_t *f, char *got, size_t len)
{
    size_t k = (size_t)snprintf(got, len, "(");
    for (int i = 0; i < f->ndim && k < len; i++)
        k += (size_t)snprintf(got + k, len - k, "%s%llu", i ? ", " : "",
                              (unsigned long long)f->shape[i]);
    if (k < len) snprintf(got + k, len - k, "%s)", f->ndim == 1 ? "," : "");
}

static int shape_err(const tg_npy_t *f, const char *want)
{
    char got[160];
    shape_text(f, got, sizeof got);
    return tg_err(-EINVAL, "%s: expected shape %s, got %s", f->path, want, got);
}

static int check_id(const tg_npy_t *f, uint64_t i, int64_t v, uint64_t n, const char *nsrc)
{
    if (v >= 0 && (uint64_t)v < n) return 0;
    return tg_err(-EINVAL,
                  "%s: member offset %llu (element %llu): node id %lld out of range [0, %llu) "
                  "(N from %s)",
                  f->path, (unsigned long long)(f->data_off + i * f->itemsize),
                  (unsigned long long)i, (long long)v, (unsigned long long)n, nsrc);
}

/* A count array (num_nodes_list, num_edges_list): shape (1,) for a single graph. */
static int read_count(const tg_zip_t *z, const char *name, int required, int *have, uint64_t *v)
{
    *have = 0;
    if (!required && !tg_zip_find(z, name)) return 0;
    tg_npz_arr_t a;
    int rc = tg_npz_arr_open(&a, z, name);
    if (rc) return rc;
    int64_t x = 0;
    if (!(rc = tg_npy_expect_dtype(&a.f, TG_NPY_KIND_INT, "a count"))) {
        if (a.f.ndim != 1 || a.f.shape[0] == 0)
            rc = shape_err(&a.f, "(1,)");
        else if (a.f.shape[0] > 1)
            rc = tg_err(-EINVAL,
                        "%s: %llu graphs (a multi-graph dataset); only single-graph "
                        "node-property datasets can be imported",
                        a.f.path, (unsigned long long)a.f.shape[0]);
        else
            rc = tg_npy_read_i64(&a.f, 0, 1, &x);
    }
    if (!rc && x < 0) rc = tg_err(-EINVAL, "%s: negative count %lld", a.f.path, (long long)x);
    tg_npz_arr_close(&a);
    if (rc) return rc;
    *have = 1;
    *v = (uint64_t)x;
    return 0;
}

/* edge_index (2, E): rows 0 and 1 read side by side, through two readers of the member. */
static int read_edges(tg_imp_t *im, const npz_plan_t *p, const char *feat_path, int have_e,
                      uint64_t want_e)
{
    tg_npz_arr_t a;
    int rc = tg_npz_arr_open(&a, p->g, "edge_index.npy");
    if (rc) return rc;
    tg_npy_t *f = &a.f;
    int64_t *s = malloc(CHUNK * sizeof *s), *d = malloc(CHUNK * sizeof *d);
    if (!s || !d) rc = tg_err(-ENOMEM, "out of memory");
    if (!rc) rc = tg_npy_expect_dtype(f, TG_NPY_KIND_INT, "node ids");
    if (!rc && (f->ndim != 2 || f->shape[0] != 2))
        rc = shape_err(f,
                       f->ndim == 2 && f->shape[1] == 2 ? "(2, E) (transpose it: ei.T)" : "(2, E)");
    uint64_t e = rc ? 0 : f->shape[1], n = im->num_nodes;
    if (!rc && have_e && e != want_e)
        rc = tg_err(-EINVAL, "%s has %llu edges but num_edges_list says %llu", f->path,
                    (unsigned long long)e, (unsigned long long)want_e);
    if (rc) goto out;
    tg_edgesort_expect(im->es, (im->o->undirected ? 2 : 1) * e);
    tg_imp_prog_t pr;
    tg_imp_prog_begin(&pr, "edges", 2 * e * f->itemsize);
    for (uint64_t first = 0; first < e && !rc; first += CHUNK) {
        size_t k = (size_t)TG_MIN((uint64_t)CHUNK, e - first);
        if ((rc = tg_npy_read_i64(f, first, k, s)) || (rc = tg_npy_read_i64(f, e + first, k, d)))
            break;
        for (size_t j = 0; j < k && !rc; j++) {
            if ((uint64_t)s[j] >= n || (uint64_t)d[j] >= n) {
                if ((rc = check_id(f, first + j, s[j], n, feat_path)) ||
                    (rc = check_id(f, e + first + j, d[j], n, feat_path)))
                    break;
            }
            rc = tg_imp_edge(im, (uint64_t)s[j], (uint64_t)d[j]);
        }
        tg_imp_prog_update(&pr, 2 * (first + k) * f->itemsize);
    }
    tg_imp_prog_end(&pr, rc == 0);
out:
    free(s);
    free(d);
    tg_npz_arr_close(&a);
    return rc;
}

static int read_features(tg_imp_t *im, tg_npz_arr_t *a)
{
    tg_npy_t *f = &a->f;
    uint64_t n = f->shape[0];
    uint32_t d = (uint32_t)f->shape[1];
    size_t rows_per = TG_MAX((size_t)1, (size_t)(1u << 18) / d);
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
    tg_imp_prog_t pr;
    tg_imp_prog_begin(&pr, "features", n * d * f->itemsize);
    for (uint64_t r = 0; r < n && !rc; r += rows_per) {
        size_t k = (size_t)TG_MIN((uint64_t)rows_per, n - r);
        if ((rc = tg_imp_put_feat_rows(im, &fw, f, r, k, d, buf, tmp, "member offset"))) break;
        tg_imp_prog_update(&pr, (r + k) * d * f->itemsize);
    }
    tg_imp_prog_end(&pr, rc == 0);
    free(buf);
    free(tmp);
    if (rc) {
        tg_filew_discard(&fw);
        return rc;
    }
    im->dsw.meta.feat_dim = d;
    return tg_dsw_close_file(&im->dsw, TG_FILE_FEATURES, &fw);
}

/* Labels: (N,) or (N, 1) class ids (float NaN or -1 = unlabelled, as OGB's float arrays), or
 * (N, C > 1) of 0/1 for multi-label. */
static int read_labels(tg_imp_t *im, const npz_plan_t *p, const char *feat_path)
{
    tg_npz_arr_t a;
    int rc = tg_npz_arr_open(&a, p->lz, p->label);
    if (rc) return rc;
    tg_npy_t *f = &a.f;
    uint64_t n = im->num_nodes, c = 1;
    int multi = f->ndim == 2 && f->shape[1] != 1;
    double *buf = malloc(CHUNK * sizeof *buf);
    tg_filew_t fw;
    int fw_open = 0;
    if (!buf) rc = tg_err(-ENOMEM, "out of memory");
    if (!rc)
        rc = tg_npy_expect_dtype(f, TG_NPY_KIND_INT | TG_NPY_KIND_BOOL | TG_NPY_KIND_FLOAT,
                                 "labels");
    if (!rc && ((f->ndim != 1 && f->ndim != 2) || f->shape[0] != n)) {
        char want[96];
        snprintf(want, sizeof want, "(%llu,), (%llu, 1) or (%llu, C) (N from %s)",
                 (unsigned long long)n, (unsigned long long)n, (unsigned long long)n, feat_path);
        rc = shape_err(f, want);
    }
    if (!rc && multi) c = f->shape[1];
    if (!rc && (c < 1 || c > (1u << 24)))
        rc = tg_err(-EINVAL, "%s: %llu label columns, expected 1..16777216", f->path,
                    (unsigned long long)c);
    if (!rc && !(rc = tg_imp_open(im, TG_FILE_LABELS, &fw, 1u << 20))) fw_open = 1;
    int64_t maxc = -1;
    uint64_t total = n * c;
    for (uint64_t first = 0; first < total && !rc; first += CHUNK) {
        size_t k = (size_t)TG_MIN((uint64_t)CHUNK, total - first);
        if ((rc = tg_npy_read_f64(f, first, k, buf))) break;
        for (size_t j = 0; j < k; j++) {
            double v = buf[j];
            int32_t out;
            if (isnan(v) && !multi) {
                out = -1;
            } else if (multi ? (v != 0 && v != 1)
                             : (v != floor(v) || v < -1 || v >= (double)(1u << 24))) {
                rc = tg_err(-EINVAL, "%s: member offset %llu: label %g, expected %s", f->path,
                            (unsigned long long)(f->data_off + (first + j) * f->itemsize), v,
                            multi ? "0 or 1" : "a class id in 0..16777215, -1 or NaN");
                break;
            } else {
                out = (int32_t)v;
            }
            maxc = TG_MAX(maxc, (int64_t)out);
            if ((rc = tg_filew_write(&fw, &out, 4))) break;
        }
    }
    if (!rc && maxc < 0) rc = tg_err(-EINVAL, "%s: no node has a label (all -1 or NaN)", f->path);
    if (!rc) {
        im->dsw.meta.multi_label = multi;
        im->dsw.meta.num_classes = multi ? (uint32_t)c : (uint32_t)maxc + 1;
        rc = tg_dsw_close_file(&im->dsw, TG_FILE_LABELS, &fw);
        fw_open = 0;
    }
    if (fw_open) tg_filew_discard(&fw);
    free(buf);
    tg_npz_arr_close(&a);
    return rc;
}

/* One split from a member: node ids (k,), or a mask (N,) whose nonzero entries are the ids. A
 * missing valid or test member is an empty split (PyG archives often have no validation set). */
static int read_split(tg_imp_t *im, const npz_plan_t *p, int k, char *path)
{
    tg_file_id_t which = (tg_file_id_t)(TG_FILE_TRAIN + k);
    tg_filew_t fw;
    int rc;
    if (!p->split[k]) {
        snprintf(path, PATHLEN, "%s", p->g->path);
        if ((rc = tg_imp_open(im, which, &fw, 4096))) return rc;
        return tg_dsw_close_file(&im->dsw, which, &fw);
    }
    tg_npz_arr_t a;
    if ((rc = tg_npz_arr_open(&a, p->g, p->split[k]))) return rc;
    tg_npy_t *f = &a.f;
    snprintf(path, PATHLEN, "%s", f->path);
    int64_t *buf = malloc(CHUNK * sizeof *buf);
    if (!buf) rc = tg_err(-ENOMEM, "out of memory");
    if (!rc)
        rc = tg_npy_expect_dtype(f,
                                 p->mask[k] ? TG_NPY_KIND_BOOL | TG_NPY_KIND_INT : TG_NPY_KIND_INT,
                                 p->mask[k] ? "a mask" : "node ids");
    if (!rc && f->ndim != 1) rc = shape_err(f, p->mask[k] ? "(N,)" : "(k,)");
    if (!rc && p->mask[k] && f->shape[0] != im->num_nodes) {
        char want[64];
        snprintf(want, sizeof want, "(%llu,) (a mask of N)", (unsigned long long)im->num_nodes);
        rc = shape_err(f, want);
    }
    if (!rc) rc = tg_imp_open(im, which, &fw, 1u << 20);
    if (rc) {
        free(buf);
        tg_npz_arr_close(&a);
        return rc;
    }
    for (uint64_t first = 0; first < f->shape[0] && !rc; first += CHUNK) {
        size_t m = (size_t)TG_MIN((uint64_t)CHUNK, f->shape[0] - first);
        if ((rc = tg_npy_read_i64(f, first, m, buf))) break;
        for (size_t j = 0; j < m && !rc; j++) {
            uint64_t at = f->data_off + (first + j) * f->itemsize;
            if (p->mask[k] && buf[j] != 0 && buf[j] != 1)
                rc = tg_err(-EINVAL, "%s: member offset %llu: mask value %lld, expected 0 or 1",
                            path, (unsigned long long)at, (long long)buf[j]);
            else if (!p->mask[k] || buf[j])
                rc = tg_imp_split_add(im, &fw, which, p->mask[k] ? (int64_t)(first + j) : buf[j],
                                      path, "member offset", at);
        }
    }
    free(buf);
    tg_npz_arr_close(&a);
    if (!rc && which == TG_FILE_TRAIN && im->dsw.meta.num_train == 0)
        rc = tg_err(-EINVAL, "%s: no training nodes", path);
    if (rc) {
        tg_filew_discard(&fw);
        return rc;
    }
    return tg_dsw_close_file(&im->dsw, which, &fw);
}

/* The import itself: features' shape first (N), then edges, features, labels and splits. */
static int npz_run(const char *out_dir, const tg_import_opts_t *o, const npz_plan_t *p,
                   const char *source)
{
    int have_n = 0, have_e = 0;
    uint64_t cn = 0, ce = 0;
    int rc = read_count(p->g, "num_nodes_list.npy", p->counts, &have_n, &cn);
    if (!rc) rc = read_count(p->g, "num_edges_list.npy", p->counts, &have_e, &ce);
    if (rc) return rc;
    tg_npz_arr_t feat;
    if ((rc = tg_npz_arr_open(&feat, p->g, p->feat))) return rc;
    tg_npy_t *f = &feat.f;
    char *fpath = f->path;
    if ((rc = tg_npy_expect_dtype(f, TG_NPY_KIND_FLOAT, "features"))) goto out0;
    if (f->ndim != 2) {
        rc = shape_err(f, "(N, D)");
        goto out0;
    }
    uint64_t n = f->shape[0];
    if (n == 0 || f->shape[1] == 0 || f->shape[1] > (1u << 24)) {
        rc = tg_err(-EINVAL, "%s: shape (%llu, %llu): need N >= 1 and 1 <= D <= 16777216", fpath,
                    (unsigned long long)n, (unsigned long long)f->shape[1]);
        goto out0;
    }
    if (have_n && cn != n) {
        rc = tg_err(-EINVAL, "%s has %llu rows but num_nodes_list says %llu nodes", fpath,
                    (unsigned long long)n, (unsigned long long)cn);
        goto out0;
    }
    char(*split_paths)[PATHLEN] = malloc(3 * sizeof *split_paths);
    if (!split_paths) {
        rc = tg_err(-ENOMEM, "out of memory");
        goto out0;
    }
    tg_imp_t im;
    if ((rc = tg_imp_begin(&im, out_dir, o, source))) goto out1;
    tg_log_info("import %s: %llu nodes, %llu features (%s)", p->g->path, (unsigned long long)n,
                (unsigned long long)f->shape[1], f->descr);
    if ((rc = tg_imp_edges_begin(&im, n))) goto out;
    if ((rc = read_edges(&im, p, fpath, have_e, ce))) goto out;
    tg_log_info("edges: %llu read, sorting into CSC", (unsigned long long)im.edges_in);
    if ((rc = tg_imp_edges_finish(&im))) goto out;
    if ((rc = read_features(&im, &feat))) goto out;
    if ((rc = read_labels(&im, p, fpath))) goto out;
    for (int k = 0; k < 3 && !rc; k++) {
        if (p->csv[k]) {
            snprintf(split_paths[k], PATHLEN, "%s", p->csv[k]);
            rc = tg_ogb_read_split_csv(&im, p->csv[k], (tg_file_id_t)(TG_FILE_TRAIN + k));
        } else {
            rc = read_split(&im, p, k, split_paths[k]);
        }
    }
    if (!rc) rc = tg_imp_commit(&im);
out:
    tg_imp_abort(&im);
out1:
    free(split_paths);
out0:
    tg_npz_arr_close(&feat);
    return rc;
}

static const char *first_member(const tg_zip_t *z, const char *const *names, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (tg_zip_find(z, names[i])) return names[i];
    return NULL;
}

static void opts_text(const tg_import_opts_t *o, char *buf, size_t len)
{
    snprintf(buf, len, "%s%s%s", o->undirected ? " --undirected" : "", o->dedup ? " --dedup" : "",
             o->self_loops ? " --self-loops" : "");
}

/* Picks the members of a PyG / OGB style archive: the first of each list of names that is
 * there; both an index array and a mask for one split is an error (which one is meant?). */
static int plan_npz(const tg_zip_t *z, npz_plan_t *p)
{
    static const char *const feats[] = {"node_feat.npy", "x.npy"};
    static const char *const labels[] = {"node_label.npy", "y.npy"};
    static const char *const idx[3][2] = {
        {"train_idx.npy", NULL}, {"valid_idx.npy", "val_idx.npy"}, {"test_idx.npy", NULL}};
    static const char *const masks[3][2] = {
        {"train_mask.npy", NULL}, {"valid_mask.npy", "val_mask.npy"}, {"test_mask.npy", NULL}};
    memset(p, 0, sizeof *p);
    p->g = p->lz = z;
    char list[1024];
    tg_zip_list(z, list, sizeof list);
    if (!tg_zip_find(z, "edge_index.npy"))
        return tg_err(-ENOENT, "%s: no member 'edge_index.npy' (members: %s)", z->path, list);
    if (!(p->feat = first_member(z, feats, 2)))
        return tg_err(-ENOENT, "%s: no member 'node_feat.npy' or 'x.npy' (members: %s)", z->path,
                      list);
    if (!(p->label = first_member(z, labels, 2)))
        return tg_err(-ENOENT, "%s: no member 'node_label.npy' or 'y.npy' (members: %s)", z->path,
                      list);
    for (int k = 0; k < 3; k++) {
        const char *i = first_member(z, idx[k], idx[k][1] ? 2 : 1);
        const char *m = first_member(z, masks[k], masks[k][1] ? 2 : 1);
        if (i && m)
            return tg_err(-EINVAL, "%s: both '%s' and '%s'; keep one of them", z->path, i, m);
        p->split[k] = i ? i : m;
        p->mask[k] = !i && m;
    }
    if (!p->split[0])
        return tg_err(-ENOENT, "%s: no member 'train_idx.npy' or 'train_mask.npy' (members: %s)",
                      z->path, list);
    return 0;
}

int tg_import_npz(const char *out_dir, const tg_import_opts_t *o)
{
    tg_zip_t z;
    int rc = tg_zip_open(&z, o->src);
    if (rc) return rc;
    npz_plan_t p;
    if (!(rc = plan_npz(&z, &p))) {
        char source[512], opt[64];
        opts_text(o, opt, sizeof opt);
        snprintf(source, sizeof source, "import --from npz %s%s", o->src, opt);
        rc = npz_run(out_dir, o, &p, source);
    }
    tg_zip_close(&z);
    return rc;
}

int tg_import_ogb_npz(const char *out_dir, const tg_import_opts_t *o)
{
    char dp[PATHLEN], lp[PATHLEN], name[256];
    char(*split)[PATHLEN] = malloc(3 * sizeof *split);
    if (!split) return tg_err(-ENOMEM, "out of memory");
    snprintf(dp, sizeof dp, "%s/raw/data.npz", o->src);
    snprintf(lp, sizeof lp, "%s/raw/node-label.npz", o->src);
    tg_zip_t dz, lz;
    int rc = tg_ogb_split_paths(o->src, o->split, split, name, sizeof name);
    if (rc) {
        free(split);
        return rc;
    }
    if ((rc = tg_zip_open(&dz, dp))) {
        free(split);
        return rc;
    }
    if ((rc = tg_zip_open(&lz, lp))) {
        tg_zip_close(&dz);
        free(split);
        return rc;
    }
    npz_plan_t p;
    memset(&p, 0, sizeof p);
    p.g = &dz;
    p.lz = &lz;
    p.feat = "node_feat.npy";
    p.label = "node_label.npy";
    p.counts = 1;
    for (int k = 0; k < 3; k++)
        p.csv[k] = split[k];
    char source[512], opt[64];
    opts_text(o, opt, sizeof opt);
    snprintf(source, sizeof source, "import --from ogb %s --split %s%s", o->src, name, opt);
    rc = npz_run(out_dir, o, &p, source);
    tg_zip_close(&lz);
    tg_zip_close(&dz);
    free(split);
    return rc;
}
