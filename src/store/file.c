/* The feature-file store: every row read from features.bin with pread, nothing cached: the
 * reference the out-of-core stores are checked against. Passes that read most rows of the file
 * (layer-wise evaluation and inference) read through a row file instead (store/rowfile.c). */
#include "tiergnn/store.h"

#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tiergnn/data.h"
#include "tiergnn/rowcrc.h"

typedef struct {
    int fd;
    char path[4096];
    tg_feat_dtype_t dtype;
    int normalize;
    const tg_rowcrc_t *rowcrc;
} file_store_t;

static int file_gather(tg_store_t *st, const uint64_t *nodes, size_t n, float *out)
{
    const file_store_t *f = st->impl;
    size_t d = st->dim;
    size_t row_bytes = d * tg_feat_dtype_size(f->dtype);
    for (size_t i = 0; i < n; i++) {
        uint64_t v = nodes[i];
        if (v >= st->num_nodes)
            return tg_err(-EINVAL, "feature store: node %llu out of range (%llu nodes)",
                          (unsigned long long)v, (unsigned long long)st->num_nodes);
        float *row = out + i * d;
        /* The raw row lands at the end of its f32 place and is widened in place. */
        unsigned char *raw = (unsigned char *)(row + d) - row_bytes;
        int rc = tg_pread_full(f->fd, raw, row_bytes, v * row_bytes, f->path);
        if (rc == 0) rc = tg_rowcrc_check(f->rowcrc, v, raw, f->path, v * row_bytes);
        if (rc < 0) return rc;
        tg_feat_rows_f32(row, raw, 0, 1, d, f->dtype, f->normalize);
    }
    return 0;
}

static void file_release(tg_store_t *st)
{
    file_store_t *f = st->impl;
    if (f) {
        if (f->fd >= 0) close(f->fd);
        free(f);
    }
    free(st);
}

static const tg_store_i file_iface = {"file", file_gather, file_release};

int tg_store_file_open(tg_store_t **out, const struct tg_dataset *ds, const tg_store_opts_t *opts)
{
    *out = NULL;
    if (ds->meta.feat_dim == 0) return tg_err(-EINVAL, "%s: feature width is 0", ds->dir);
    tg_store_t *st = calloc(1, sizeof *st);
    file_store_t *f = calloc(1, sizeof *f);
    if (!st || !f) {
        free(st);
        free(f);
        return tg_err(-ENOMEM, "feature store: out of memory");
    }
    tg_dataset_path(ds, TG_FILE_FEATURES, f->path, sizeof f->path);
    f->fd = open(f->path, O_RDONLY | O_CLOEXEC);
    if (f->fd < 0) {
        int e = errno;
        free(st);
        free(f);
        char path[4096];
        tg_dataset_path(ds, TG_FILE_FEATURES, path, sizeof path);
        return tg_err(-e, "%s: cannot open: %s", path, strerror(e));
    }
    f->dtype = ds->meta.feat_dtype;
    f->normalize = opts && opts->normalize;
    f->rowcrc = opts ? opts->rowcrc : NULL;
    st->iface = &file_iface;
    st->num_nodes = ds->meta.num_nodes;
    st->dim = ds->meta.feat_dim;
    st->impl = f;
    *out = st;
    return 0;
}
