/* Dataset reader: opens a dataset directory, checks it against its metadata, loads arrays. */
#include "tiergnn/data.h"

#include "crc-impl.h"

#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

void tg_dataset_path(const tg_dataset_t *ds, tg_file_id_t id, char *buf, size_t len)
{
    snprintf(buf, len, "%s/%s", ds->dir, tg_file_name(id));
}

/* Streams a file through CRC-32 in 8 MiB pieces. */
static int file_crc(const char *path, uint64_t size, uint32_t *crc)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return tg_err(-errno, "%s: cannot open: %s", path, strerror(errno));
    posix_fadvise(fd, 0, 0, POSIX_FADV_SEQUENTIAL);
    size_t cap = (size_t)TG_MIN((uint64_t)8 << 20, size + 1);
    char *buf = malloc(cap);
    if (!buf) {
        close(fd);
        return tg_err(-ENOMEM, "out of memory");
    }
    uint32_t c = 0;
    int rc = 0;
    for (uint64_t off = 0; off < size;) {
        size_t n = (size_t)TG_MIN((uint64_t)cap, size - off);
        if ((rc = tg_pread_full(fd, buf, n, off, path))) break;
        c = tg_data_crc32(c, buf, n);
        off += n;
    }
    free(buf);
    close(fd);
    *crc = c;
    return rc;
}

int tg_dataset_open(tg_dataset_t **out, const char *dir, unsigned flags)
{
    *out = NULL;
    struct stat st;
    if (stat(dir, &st) || !S_ISDIR(st.st_mode))
        return tg_err(-ENOENT, "%s: not a dataset directory (%s)", dir,
                      errno ? strerror(errno) : "not a directory");
    tg_dataset_t *ds = calloc(1, sizeof *ds);
    if (!ds || !(ds->dir = strdup(dir))) {
        free(ds);
        return tg_err(-ENOMEM, "out of memory");
    }
    int rc = tg_meta_read(&ds->meta, dir);
    if (rc) goto fail;
    char path[4096];
    for (int i = 0; i < TG_FILE_COUNT && (flags & (TG_OPEN_CHECK_SIZES | TG_OPEN_CHECK_CHECKSUMS));
         i++) {
        tg_dataset_path(ds, (tg_file_id_t)i, path, sizeof path);
        if (stat(path, &st)) {
            rc = tg_err(-ENOENT, "%s: missing (%s)", path, strerror(errno));
            goto fail;
        }
        if ((uint64_t)st.st_size != ds->meta.files[i].size) {
            rc = tg_err(-EINVAL,
                        "%s: size is %llu bytes but %s records %llu (the file changed since "
                        "the dataset was written)",
                        path, (unsigned long long)st.st_size, TG_META_NAME,
                        (unsigned long long)ds->meta.files[i].size);
            goto fail;
        }
    }
    if (flags & TG_OPEN_CHECK_CHECKSUMS) {
        for (int i = 0; i < TG_FILE_COUNT; i++) {
            uint32_t crc = 0;
            tg_dataset_path(ds, (tg_file_id_t)i, path, sizeof path);
            if ((rc = file_crc(path, ds->meta.files[i].size, &crc))) goto fail;
            if (crc != ds->meta.files[i].crc32) {
                rc = tg_err(-EINVAL, "%s: checksum %08x does not match %08x recorded in %s", path,
                            crc, ds->meta.files[i].crc32, TG_META_NAME);
                goto fail;
            }
        }
    }
    ds->flags = flags;
    *out = ds;
    return 0;
fail:
    tg_dataset_close(ds);
    return rc;
}

void tg_dataset_close(tg_dataset_t *ds)
{
    if (!ds) return;
    free(ds->dir);
    free(ds);
}

/* Reads `bytes` bytes at `off` of file id into a fresh buffer. */
static int read_range(const tg_dataset_t *ds, tg_file_id_t id, uint64_t off, uint64_t bytes,
                      void **out)
{
    char path[4096];
    tg_dataset_path(ds, id, path, sizeof path);
    *out = NULL;
    void *buf = malloc(bytes ? bytes : 1);
    if (!buf) {
        char b[32];
        return tg_err(-ENOMEM, "%s: cannot allocate %s", path, tg_fmt_bytes(bytes, b, sizeof b));
    }
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        int e = errno;
        free(buf);
        return tg_err(-e, "%s: cannot open: %s", path, strerror(e));
    }
    int rc = tg_pread_full(fd, buf, bytes, off, path);
    close(fd);
    if (rc) {
        free(buf);
        return rc;
    }
    *out = buf;
    return 0;
}

int tg_dataset_load_indptr(const tg_dataset_t *ds, uint64_t **indptr)
{
    const tg_meta_t *m = &ds->meta;
    void *p;
    int rc = read_range(ds, TG_FILE_INDPTR, 0, (m->num_nodes + 1) * 8, &p);
    if (rc) return rc;
    uint64_t *a = p;
    char path[4096];
    tg_dataset_path(ds, TG_FILE_INDPTR, path, sizeof path);
    if (a[0] != 0) {
        rc = tg_err(-EINVAL, "%s: offset 0: indptr[0] = %llu, expected 0", path,
                    (unsigned long long)a[0]);
        free(a);
        return rc;
    }
    for (uint64_t v = 0; v < m->num_nodes; v++)
        if (a[v + 1] < a[v]) {
            rc = tg_err(-EINVAL, "%s: offset %llu: indptr decreases at node %llu (%llu < %llu)",
                        path, (unsigned long long)((v + 1) * 8), (unsigned long long)(v + 1),
                        (unsigned long long)a[v + 1], (unsigned long long)a[v]);
            free(a);
            return rc;
        }
    if (a[m->num_nodes] != m->num_edges) {
        rc = tg_err(-EINVAL, "%s: offset %llu: indptr[N] = %llu, expected num_edges = %llu", path,
                    (unsigned long long)(m->num_nodes * 8), (unsigned long long)a[m->num_nodes],
                    (unsigned long long)m->num_edges);
        free(a);
        return rc;
    }
    *indptr = a;
    return 0;
}

/* Widens an index array in place-ish to u64 and checks every id < limit. */
static int widen_ids(const tg_dataset_t *ds, tg_file_id_t id, uint64_t count, uint64_t limit,
                     uint64_t **out)
{
    size_t isz = tg_index_dtype_size(ds->meta.index_dtype);
    void *raw;
    int rc = read_range(ds, id, 0, count * isz, &raw);
    if (rc) return rc;
    uint64_t *w = isz == 8 ? raw : malloc((count ? count : 1) * 8);
    if (!w) {
        free(raw);
        return tg_err(-ENOMEM, "out of memory widening %s", tg_file_name(id));
    }
    char path[4096];
    tg_dataset_path(ds, id, path, sizeof path);
    for (uint64_t i = 0; i < count; i++) {
        uint64_t v = isz == 8 ? ((uint64_t *)raw)[i] : ((uint32_t *)raw)[i];
        if (v >= limit) {
            rc = tg_err(-EINVAL, "%s: offset %llu: id %llu out of range (num_nodes = %llu)", path,
                        (unsigned long long)(i * isz), (unsigned long long)v,
                        (unsigned long long)limit);
            if (w != raw) free(w);
            free(raw);
            return rc;
        }
        w[i] = v;
    }
    if (w != raw) free(raw);
    *out = w;
    return 0;
}

int tg_dataset_load_indices(const tg_dataset_t *ds, uint64_t **indices)
{
    return widen_ids(ds, TG_FILE_INDICES, ds->meta.num_edges, ds->meta.num_nodes, indices);
}

int tg_dataset_load_split(const tg_dataset_t *ds, tg_file_id_t which, uint64_t **ids, uint64_t *n)
{
    uint64_t count = which == TG_FILE_TRAIN   ? ds->meta.num_train
                     : which == TG_FILE_VALID ? ds->meta.num_valid
                     : which == TG_FILE_TEST  ? ds->meta.num_test
                                              : (uint64_t)-1;
    if (count == (uint64_t)-1)
        return tg_err(-EINVAL, "internal error: %s is not a split file", tg_file_name(which));
    *n = count;
    return widen_ids(ds, which, count, ds->meta.num_nodes, ids);
}

int tg_dataset_load_labels(const tg_dataset_t *ds, int32_t **labels)
{
    const tg_meta_t *m = &ds->meta;
    uint64_t count = m->num_nodes * (m->multi_label ? m->num_classes : 1);
    void *p;
    int rc = read_range(ds, TG_FILE_LABELS, 0, count * 4, &p);
    if (rc) return rc;
    int32_t *l = p;
    char path[4096];
    tg_dataset_path(ds, TG_FILE_LABELS, path, sizeof path);
    for (uint64_t i = 0; i < count; i++) {
        int32_t hi = m->multi_label ? 1 : (int32_t)m->num_classes - 1;
        if (l[i] < -1 || l[i] > hi) {
            rc = tg_err(-EINVAL, "%s: offset %llu: label %d out of range -1..%d", path,
                        (unsigned long long)(i * 4), l[i], hi);
            free(l);
            return rc;
        }
    }
    *labels = l;
    return 0;
}

int tg_dataset_read_features(const tg_dataset_t *ds, uint64_t first, uint64_t count, float *out)
{
    const tg_meta_t *m = &ds->meta;
    if (first > m->num_nodes || count > m->num_nodes - first)
        return tg_err(-EINVAL, "features: rows %llu..%llu out of range (num_nodes = %llu)",
                      (unsigned long long)first, (unsigned long long)(first + count),
                      (unsigned long long)m->num_nodes);
    char path[4096];
    tg_dataset_path(ds, TG_FILE_FEATURES, path, sizeof path);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return tg_err(-errno, "%s: cannot open: %s", path, strerror(errno));
    size_t esz = tg_feat_dtype_size(m->feat_dtype);
    uint64_t row = (uint64_t)m->feat_dim * esz;
    int rc;
    if (m->feat_dtype == TG_F32) {
        rc = tg_pread_full(fd, out, count * row, first * row, path);
    } else {
        /* f16: read in pieces into a scratch buffer and widen */
        uint64_t rows_per = TG_MAX(1, (4u << 20) / row);
        uint16_t *tmp = malloc(rows_per * row);
        rc = tmp ? 0 : tg_err(-ENOMEM, "out of memory");
        for (uint64_t r = 0; !rc && r < count; r += rows_per) {
            uint64_t n = TG_MIN(rows_per, count - r);
            rc = tg_pread_full(fd, tmp, n * row, (first + r) * row, path);
            for (uint64_t i = 0; !rc && i < n * m->feat_dim; i++)
                out[r * m->feat_dim + i] = tg_f16_to_f32(tmp[i]);
        }
        free(tmp);
    }
    close(fd);
    return rc;
}
