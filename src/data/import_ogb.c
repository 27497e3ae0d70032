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
 * Every file is streamed once, in this order: counts, edges (into the external sort), features
 * (row by row into features.bin), labels, splits. Each count is cross-checked and a mismatch
 * names both files.
 */
#include "import-impl.h"

#include <dirent.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

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

static int read_features(tg_imp_t *im, const ogb_paths_t *p)
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

static int read_split(tg_imp_t *im, const char *path, tg_file_id_t which)
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

int tg_import_ogb(const char *out_dir, const tg_import_opts_t *o)
{
    ogb_paths_t *p = calloc(1, sizeof *p);
    if (!p) return tg_err(-ENOMEM, "out of memory");
    tg_imp_t im;
    memset(&im, 0, sizeof im);
    uint64_t n = 0, e = 0;
    int rc = find_paths(o, p);
    if (!rc) rc = read_count(p->nodes, &n);
    if (!rc && n == 0) rc = tg_err(-EINVAL, "%s: the graph has no nodes", p->nodes);
    if (!rc) rc = read_count(p->nedges, &e);
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
    if ((rc = read_features(&im, p))) goto out;
    if ((rc = read_labels(&im, p))) goto out;
    for (int k = 0; k < 3 && !rc; k++)
        rc = read_split(&im, p->split[k], (tg_file_id_t)(TG_FILE_TRAIN + k));
    if (rc) goto out;
    rc = tg_imp_commit(&im);
out:
    tg_imp_abort(&im);
    free(p);
    return rc;
}
