/* Buffered array-file writer and the dataset writer (temp dir, fsync, rename). */
#include "tiergnn/data.h"

#include <fcntl.h>
#include <libgen.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

int tg_filew_open(tg_filew_t *w, const char *path, size_t buf_bytes)
{
    memset(w, 0, sizeof *w);
    w->fd = -1;
    w->path = strdup(path);
    w->buf_cap = buf_bytes ? buf_bytes : (8u << 20);
    w->buf = malloc(w->buf_cap);
    if (!w->path || !w->buf) {
        tg_filew_discard(w);
        return tg_err(-ENOMEM, "%s: out of memory for write buffer", path);
    }
    w->fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (w->fd < 0) {
        int e = errno;
        tg_filew_discard(w);
        return tg_err(-e, "%s: cannot create: %s", path, strerror(e));
    }
    return 0;
}

static int flush(tg_filew_t *w)
{
    if (!w->buf_len) return 0;
    int rc = tg_pwrite_full(w->fd, w->buf, w->buf_len, w->written, w->path);
    if (rc) return rc;
    w->crc = tg_crc32(w->crc, w->buf, w->buf_len);
    w->written += w->buf_len;
    w->buf_len = 0;
    return 0;
}

int tg_filew_write(tg_filew_t *w, const void *data, size_t len)
{
    const char *p = data;
    while (len > 0) {
        size_t n = TG_MIN(len, w->buf_cap - w->buf_len);
        memcpy(w->buf + w->buf_len, p, n);
        w->buf_len += n;
        p += n;
        len -= n;
        if (w->buf_len == w->buf_cap) {
            int rc = flush(w);
            if (rc) return rc;
        }
    }
    return 0;
}

int tg_filew_close(tg_filew_t *w, tg_file_info_t *info)
{
    if (w->fd < 0) return tg_err(-EBADF, "%s: writer already closed", w->path ? w->path : "?");
    int rc = flush(w);
    if (!rc && fsync(w->fd)) rc = tg_err(-errno, "%s: fsync failed: %s", w->path, strerror(errno));
    if (close(w->fd) && !rc) rc = tg_err(-errno, "%s: close failed: %s", w->path, strerror(errno));
    w->fd = -1;
    if (!rc && info) {
        info->size = w->written;
        info->crc32 = w->crc;
    }
    free(w->buf);
    free(w->path);
    w->buf = NULL;
    w->path = NULL;
    return rc;
}

void tg_filew_discard(tg_filew_t *w)
{
    if (w->fd >= 0) close(w->fd);
    w->fd = -1;
    free(w->buf);
    free(w->path);
    w->buf = NULL;
    w->path = NULL;
}

int tg_dsw_begin(tg_dsw_t *w, const char *out_dir, int overwrite)
{
    memset(w, 0, sizeof *w);
    struct stat st;
    if (!overwrite && stat(out_dir, &st) == 0)
        return tg_err(-EEXIST, "%s: already exists (remove it or pass --overwrite)", out_dir);
    size_t n = strlen(out_dir);
    while (n > 1 && out_dir[n - 1] == '/')
        n--;
    w->out_dir = strndup(out_dir, n);
    w->tmp_dir = malloc(n + 32);
    if (!w->out_dir || !w->tmp_dir) {
        tg_dsw_abort(w);
        return tg_err(-ENOMEM, "out of memory");
    }
    snprintf(w->tmp_dir, n + 32, "%s.tmp-%d", w->out_dir, (int)getpid());
    /* The parent must exist: create it (mkdir -p) so "data/x" works on a fresh checkout. */
    char *parent = strdup(w->out_dir);
    if (!parent) {
        tg_dsw_abort(w);
        return tg_err(-ENOMEM, "out of memory");
    }
    int rc = tg_mkdir_p(dirname(parent));
    free(parent);
    if (rc) {
        tg_dsw_abort(w);
        return rc;
    }
    tg_rmtree(w->tmp_dir); /* a leftover of a crashed run with our pid */
    if (mkdir(w->tmp_dir, 0755)) {
        int e = errno;
        rc = tg_err(-e, "%s: cannot create output directory: %s", w->tmp_dir, strerror(e));
        free(w->out_dir);
        free(w->tmp_dir);
        memset(w, 0, sizeof *w);
        return rc;
    }
    w->meta.format_version = TG_FORMAT_VERSION;
    return 0;
}

void tg_dsw_path(const tg_dsw_t *w, tg_file_id_t id, char *buf, size_t len)
{
    snprintf(buf, len, "%s/%s", w->tmp_dir, tg_file_name(id));
}

int tg_dsw_open_file(tg_dsw_t *w, tg_file_id_t id, tg_filew_t *fw)
{
    char path[4096];
    tg_dsw_path(w, id, path, sizeof path);
    return tg_filew_open(fw, path, 0);
}

int tg_dsw_close_file(tg_dsw_t *w, tg_file_id_t id, tg_filew_t *fw)
{
    return tg_filew_close(fw, &w->meta.files[id]);
}

int tg_dsw_commit(tg_dsw_t *w)
{
    int rc = 0;
    char path[4096], *text = NULL;
    w->meta.format_version = TG_FORMAT_VERSION;
    for (int i = 0; i < TG_FILE_COUNT; i++) {
        uint64_t want = tg_meta_expected_size(&w->meta, (tg_file_id_t)i);
        tg_dsw_path(w, (tg_file_id_t)i, path, sizeof path);
        struct stat st;
        if (stat(path, &st)) {
            rc = tg_err(-ENOENT, "%s: internal error: file was not written", path);
            goto fail;
        }
        if ((uint64_t)st.st_size != want || w->meta.files[i].size != want) {
            rc = tg_err(-EIO, "%s: internal error: %llu bytes written, counts imply %llu", path,
                        (unsigned long long)st.st_size, (unsigned long long)want);
            goto fail;
        }
    }
    if ((rc = tg_meta_format(&w->meta, &text))) goto fail;
    snprintf(path, sizeof path, "%s/%s", w->tmp_dir, TG_META_NAME);
    if ((rc = tg_write_file_atomic(path, text, strlen(text)))) goto fail;
    if ((rc = tg_fsync_dir(w->tmp_dir))) goto fail;
    /* Replace an existing dataset only now that the new one is complete. */
    struct stat st;
    if (stat(w->out_dir, &st) == 0) {
        char old[4200];
        snprintf(old, sizeof old, "%s.old-%d", w->out_dir, (int)getpid());
        if (rename(w->out_dir, old)) {
            rc = tg_err(-errno, "%s: cannot move the old dataset aside: %s", w->out_dir,
                        strerror(errno));
            goto fail;
        }
        if (rename(w->tmp_dir, w->out_dir)) {
            rc = tg_err(-errno, "%s: cannot rename into place: %s", w->out_dir, strerror(errno));
            rename(old, w->out_dir);
            goto fail;
        }
        tg_rmtree(old);
    } else if (rename(w->tmp_dir, w->out_dir)) {
        rc = tg_err(-errno, "%s: cannot rename into place: %s", w->out_dir, strerror(errno));
        goto fail;
    }
    char *parent = strdup(w->out_dir);
    if (parent) {
        tg_fsync_dir(dirname(parent));
        free(parent);
    }
    free(text);
    free(w->tmp_dir);
    w->tmp_dir = NULL;
    return 0;
fail:
    free(text);
    tg_dsw_abort(w);
    return rc;
}

void tg_dsw_abort(tg_dsw_t *w)
{
    if (w->tmp_dir) tg_rmtree(w->tmp_dir);
    free(w->tmp_dir);
    free(w->out_dir);
    w->tmp_dir = NULL;
    w->out_dir = NULL;
}
