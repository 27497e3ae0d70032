/* What every importer shares: option checks and dispatch (tg_import), the dataset writer with
 * the edge sort behind it, and small writers for index and feature rows.
 *
 * An import writes into OUT.tmp-<pid>/ (tg_dsw_begin); the external sort keeps its run files in
 * OUT.tmp-<pid>/sort/ so that they sit on the same disk and vanish with the temp dir on abort.
 */
#include "import-impl.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#define EDGE_CHUNK (1u << 16) /* edges handed to tg_edgesort_add at once (1 MiB of ids) */

void tg_import_opts_default(tg_import_opts_t *o)
{
    memset(o, 0, sizeof *o);
    o->kind = TG_IMPORT_OGB;
    o->feat_dim = 64;
    o->classes = 8;
    o->train_frac = 0.6;
    o->valid_frac = 0.2;
    o->test_frac = 0.2;
    o->feat_noise = 1.0;
    o->seed = 1;
    o->feat_dtype = TG_F32;
    o->mem_bytes = 0; /* min(1 GiB, RAM/4) */
}

uint64_t tg_imp_file_size(const char *path)
{
    struct stat st;
    return stat(path, &st) ? 0 : (uint64_t)st.st_size;
}

int tg_imp_find_csv(const char *dir, const char *base, char *buf, size_t len)
{
    struct stat st;
    snprintf(buf, len, "%s/%s.csv.gz", dir, base);
    if (!stat(buf, &st) && S_ISREG(st.st_mode)) return 0;
    snprintf(buf, len, "%s/%s.csv", dir, base);
    if (!stat(buf, &st) && S_ISREG(st.st_mode)) return 0;
    snprintf(buf, len, "%s/%s.csv[.gz]", dir, base);
    return -ENOENT;
}

int tg_imp_begin(tg_imp_t *im, const char *out_dir, const tg_import_opts_t *o, const char *source)
{
    memset(im, 0, sizeof *im);
    im->o = o;
    int rc = tg_dsw_begin(&im->dsw, out_dir, o->overwrite);
    if (rc) return rc;
    im->begun = 1;
    tg_meta_t *m = &im->dsw.meta;
    m->feat_dtype = o->feat_dtype;
    /* meta.txt is line-based: keep the free text on one line. */
    snprintf(m->source, sizeof m->source, "%s", source);
    for (char *p = m->source; *p; p++)
        if (*p == '\n' || *p == '\r') *p = ' ';
    return 0;
}

int tg_imp_edges_begin(tg_imp_t *im, uint64_t num_nodes)
{
    im->num_nodes = num_nodes;
    im->dsw.meta.num_nodes = num_nodes;
    im->dsw.meta.index_dtype = tg_index_dtype_for(num_nodes);
    snprintf(im->sort_dir, sizeof im->sort_dir, "%s/sort", im->dsw.tmp_dir);
    int rc = tg_mkdir_p(im->sort_dir);
    if (rc) return rc;
    im->cap = EDGE_CHUNK;
    im->src = malloc(im->cap * sizeof *im->src);
    im->dst = malloc(im->cap * sizeof *im->dst);
    if (!im->src || !im->dst) return tg_err(-ENOMEM, "out of memory for the edge buffer");
    /* --mem bounds the whole import, so the sort gets what the importer's own buffers leave:
     * two double-buffered 8 MiB file writers, the 4 MiB CSV buffer, the edge chunk and zlib's
     * state. */
    uint64_t mem = im->o->mem_bytes;
    uint64_t sort_mem = mem > 2 * TG_IMP_FIXED_BYTES ? mem - TG_IMP_FIXED_BYTES : mem / 2;
    tg_edgesort_opts_t so = {
        .num_nodes = num_nodes,
        .mem_bytes = sort_mem,
        .tmp_dir = im->sort_dir,
        .dedup = im->o->dedup,
        .self_loops = im->o->self_loops,
        .remove_self_loops = 0,
    };
    return tg_edgesort_create(&im->es, &so);
}

int tg_imp_flush_edges(tg_imp_t *im)
{
    if (!im->n) return 0;
    int rc = tg_edgesort_add(im->es, im->src, im->dst, im->n);
    im->n = 0;
    return rc;
}

int tg_imp_open(tg_imp_t *im, tg_file_id_t id, tg_filew_t *fw, size_t buf_bytes)
{
    char path[4096];
    tg_dsw_path(&im->dsw, id, path, sizeof path);
    return tg_filew_open(fw, path, buf_bytes);
}

int tg_imp_edges_finish(tg_imp_t *im)
{
    int rc = tg_imp_flush_edges(im);
    if (rc) return rc;
    /* Both writers are open while the sort merges into them, each with two buffers: 8 MiB
     * each (the default) for a --mem of 256 MiB or more, less below, so that a small --mem is
     * kept (their size changes how the bytes reach the disk, not the bytes). */
    size_t wbuf = (size_t)TG_MAX(TG_MIN(im->o->mem_bytes / 32, (uint64_t)8 << 20), 1ull << 20);
    tg_filew_t wp, wi;
    if ((rc = tg_imp_open(im, TG_FILE_INDPTR, &wp, wbuf))) return rc;
    if ((rc = tg_imp_open(im, TG_FILE_INDICES, &wi, wbuf))) {
        tg_filew_discard(&wp);
        return rc;
    }
    uint64_t ne = 0;
    rc = tg_edgesort_finish(im->es, &wp, &wi, im->dsw.meta.index_dtype, &ne);
    if (!rc)
        rc = tg_dsw_close_file(&im->dsw, TG_FILE_INDPTR, &wp);
    else
        tg_filew_discard(&wp);
    if (!rc)
        rc = tg_dsw_close_file(&im->dsw, TG_FILE_INDICES, &wi);
    else
        tg_filew_discard(&wi);
    if (rc) return rc;
    im->dsw.meta.num_edges = ne;
    tg_edgesort_destroy(im->es);
    im->es = NULL;
    free(im->src);
    free(im->dst);
    im->src = im->dst = NULL;
    tg_rmtree(im->sort_dir);
    return 0;
}

int tg_imp_put_index(tg_imp_t *im, tg_filew_t *fw, uint64_t id)
{
    if (im->dsw.meta.index_dtype == TG_U64) return tg_filew_write(fw, &id, 8);
    uint32_t v = (uint32_t)id;
    return tg_filew_write(fw, &v, 4);
}

int tg_imp_put_feat_row(tg_imp_t *im, tg_filew_t *fw, const float *row, uint32_t d, uint16_t *tmp)
{
    if (im->dsw.meta.feat_dtype == TG_F32) return tg_filew_write(fw, row, (size_t)d * 4);
    for (uint32_t j = 0; j < d; j++) {
        tmp[j] = tg_f32_to_f16(row[j]);
        /* a finite value that rounds to inf would poison training silently */
        if ((tmp[j] & 0x7c00) == 0x7c00)
            return tg_err(-ERANGE,
                          "feature %u: %g does not fit in f16 (|x| > 65504); use "
                          "--feat-dtype f32",
                          j, (double)row[j]);
    }
    return tg_filew_write(fw, tmp, (size_t)d * 2);
}

int tg_imp_put_feat_rows(tg_imp_t *im, tg_filew_t *fw, tg_npy_t *f, uint64_t r, size_t k,
                         uint32_t d, float *buf, uint16_t *tmp, const char *where)
{
    int rc = tg_npy_read_f32(f, r * d, k * d, buf);
    for (size_t i = 0; i < k && !rc; i++) {
        const float *row = buf + i * d;
        for (uint32_t j = 0; j < d; j++)
            if (!isfinite(row[j]))
                return tg_err(-EINVAL, "%s: %s %llu: feature [%llu, %u] is not finite", f->path,
                              where,
                              (unsigned long long)(f->data_off + ((r + i) * d + j) * f->itemsize),
                              (unsigned long long)(r + i), j);
        if ((rc = tg_imp_put_feat_row(im, fw, row, d, tmp)) == -ERANGE)
            rc = tg_err_prefix(rc, "%s: row %llu", f->path, (unsigned long long)(r + i));
    }
    return rc;
}

int tg_imp_commit(tg_imp_t *im)
{
    /* tg_dsw_commit removes the temp dir itself on failure; tg_dsw_abort after it only frees. */
    int rc = tg_dsw_commit(&im->dsw);
    tg_imp_abort(im);
    return rc;
}

void tg_imp_abort(tg_imp_t *im)
{
    if (im->es) tg_edgesort_destroy(im->es);
    im->es = NULL;
    free(im->src);
    free(im->dst);
    im->src = im->dst = NULL;
    free(im->split_owner);
    im->split_owner = NULL;
    if (im->begun) tg_dsw_abort(&im->dsw);
    im->begun = 0;
}

static int check_opts(const tg_import_opts_t *o)
{
    if (!o->src || !*o->src) return tg_err(-EINVAL, "import: no source given");
    if (o->feat_dtype != TG_F32 && o->feat_dtype != TG_F16)
        return tg_err(-EINVAL, "import: feature dtype must be f32 or f16");
    if (o->kind == TG_IMPORT_EDGELIST) {
        if (o->feat_dim < 1 || o->feat_dim > (1u << 24))
            return tg_err(-EINVAL, "import: --feat-dim must be in 1..16777216, got %u",
                          o->feat_dim);
        if (o->classes < 1 || o->classes > 65536)
            return tg_err(-EINVAL, "import: --classes must be in 1..65536, got %u", o->classes);
        double s = o->train_frac + o->valid_frac + o->test_frac;
        if (o->train_frac < 0 || o->valid_frac < 0 || o->test_frac < 0 || s > 1.0 + 1e-9 ||
            o->train_frac <= 0)
            return tg_err(-EINVAL,
                          "import: split fractions must be >= 0 with a positive train fraction "
                          "and a sum <= 1 (got %g/%g/%g)",
                          o->train_frac, o->valid_frac, o->test_frac);
        if (!(o->feat_noise >= 0)) return tg_err(-EINVAL, "import: --feat-noise must be >= 0");
    }
    return 0;
}

int tg_import(const char *out_dir, const tg_import_opts_t *opts)
{
    tg_import_opts_t o = *opts;
    int rc = check_opts(&o);
    if (rc) return rc;
    /* tg_dsw_begin checks this too, but only after an edge list's first pass: say it now. */
    struct stat st;
    if (!o.overwrite && !stat(out_dir, &st))
        return tg_err(-EEXIST, "%s: already exists (remove it or pass --overwrite)", out_dir);
    if (!o.mem_bytes) {
        uint64_t ram = tg_phys_mem_bytes();
        o.mem_bytes = ram ? TG_MIN(1ull << 30, ram / 4) : (256ull << 20);
    }
    switch (o.kind) {
    case TG_IMPORT_OGB:
        return tg_import_ogb(out_dir, &o);
    case TG_IMPORT_NPY:
        return tg_import_npy(out_dir, &o);
    case TG_IMPORT_EDGELIST:
        return tg_import_edgelist(out_dir, &o);
    case TG_IMPORT_NPZ:
        return tg_import_npz(out_dir, &o);
    default:
        return tg_err(-EINVAL, "import: unknown source kind %d", (int)o.kind);
    }
}

int tg_imp_split_add(tg_imp_t *im, tg_filew_t *fw, tg_file_id_t which, int64_t id, const char *src,
                     const char *unit, uint64_t where)
{
    uint64_t n = im->num_nodes;
    if (id < 0 || (uint64_t)id >= n)
        return tg_err(-EINVAL, "%s: %s %llu: node id %lld out of range [0, %llu)", src, unit,
                      (unsigned long long)where, (long long)id, (unsigned long long)n);
    if (!im->split_owner && !im->split_unchecked) {
        /* 2 bits per node (N/4 bytes) to catch a node listed twice or in two splits: a
         * train/test overlap silently inflates accuracy, so it is worth the memory, up to a
         * quarter of --mem (25 MiB for 100M nodes). */
        if (n / 4 + 1 <= im->o->mem_bytes / 4) im->split_owner = calloc(n / 4 + 1, 1);
        if (!im->split_owner) {
            im->split_unchecked = 1;
            tg_log_warn("%llu nodes: not enough --mem to check that the splits are disjoint",
                        (unsigned long long)n);
        }
    }
    uint64_t u = (uint64_t)id;
    if (im->split_owner) {
        int k = (int)(which - TG_FILE_TRAIN);
        unsigned shift = (unsigned)(u & 3) * 2;
        unsigned prev = (im->split_owner[u >> 2] >> shift) & 3;
        if (prev)
            return tg_err(-EINVAL, "%s: %s %llu: node %llu is already listed in %s", src, unit,
                          (unsigned long long)where, (unsigned long long)u,
                          im->split_src[prev - 1] ? im->split_src[prev - 1] : "an earlier split");
        im->split_owner[u >> 2] |= (uint8_t)((unsigned)(k + 1) << shift);
        im->split_src[k] = src;
    }
    tg_meta_t *m = &im->dsw.meta;
    uint64_t *cnt = which == TG_FILE_TRAIN   ? &m->num_train
                    : which == TG_FILE_VALID ? &m->num_valid
                                             : &m->num_test;
    (*cnt)++;
    return tg_imp_put_index(im, fw, u);
}
