/* Buffered array-file writer and the dataset writer (temp dir, fsync, rename). */
#include "tiergnn/data.h"

#include "crc-impl.h"

#include <fcntl.h>
#include <libgen.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

/* ---------------------------------------------------------------- tg_filew */

#define DIO_ALIGN 4096

/* State shared with the background thread. The thread owns job while busy; everything else is
 * the caller's. The thread never touches the tg_filew_t itself. */
struct tg_filew_bg {
    int fd;
    char *path;
    int direct; /* O_DIRECT still set on fd */
    char *bufs[2];
    int threaded; /* 0: flushes run on the caller's thread (thread creation failed) */
    pthread_t th;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    const char *job;
    size_t job_len;
    uint64_t job_off;
    int busy, stop;
    int err; /* first error of the thread, with its message */
    char msg[512];
};

static void drop_direct(struct tg_filew_bg *b)
{
    int fl = fcntl(b->fd, F_GETFL);
    if (fl >= 0) fcntl(b->fd, F_SETFL, fl & ~O_DIRECT);
    b->direct = 0;
}

/* Writes len bytes at off. Direct I/O needs aligned memory, length and offset; anything else
 * (the tail of a file, a short write that left the offset unaligned, a file system that says
 * EINVAL) switches the descriptor to ordinary writes for the rest of the file. */
static int write_at(struct tg_filew_bg *b, const char *p, size_t len, uint64_t off)
{
    while (len > 0) {
        if (b->direct && (len % DIO_ALIGN || off % DIO_ALIGN || (uintptr_t)p % DIO_ALIGN))
            drop_direct(b);
        ssize_t n = pwrite(b->fd, p, len, (off_t)off);
        if (n < 0) {
            if (errno == EINTR) continue;
            if (errno == EINVAL && b->direct) {
                drop_direct(b);
                continue;
            }
            int e = errno;
            return tg_err(-e, "%s: write at offset %llu failed: %s", b->path,
                          (unsigned long long)off, strerror(e));
        }
        if (n == 0)
            return tg_err(-EIO, "%s: write at offset %llu wrote nothing", b->path,
                          (unsigned long long)off);
        p += n;
        len -= (size_t)n;
        off += (uint64_t)n;
    }
    return 0;
}

static void *bg_main(void *arg)
{
    struct tg_filew_bg *b = arg;
    pthread_mutex_lock(&b->mu);
    for (;;) {
        while (!b->busy && !b->stop)
            pthread_cond_wait(&b->cv, &b->mu);
        if (!b->busy) break;
        const char *p = b->job;
        size_t len = b->job_len;
        uint64_t off = b->job_off;
        int failed = b->err != 0;
        pthread_mutex_unlock(&b->mu);
        /* After a failure the rest is dropped: the file is useless and will be discarded. */
        int rc = failed ? 0 : write_at(b, p, len, off);
        pthread_mutex_lock(&b->mu);
        if (rc && !b->err) {
            b->err = rc;
            snprintf(b->msg, sizeof b->msg, "%s", tg_errmsg());
        }
        b->busy = 0;
        pthread_cond_broadcast(&b->cv);
    }
    pthread_mutex_unlock(&b->mu);
    return NULL;
}

/* Waits for the background write in flight; returns its error, re-raised on this thread. */
static int bg_wait(struct tg_filew_bg *b)
{
    if (!b->threaded) return b->err ? tg_err(b->err, "%s", b->msg) : 0;
    pthread_mutex_lock(&b->mu);
    while (b->busy)
        pthread_cond_wait(&b->cv, &b->mu);
    int err = b->err;
    pthread_mutex_unlock(&b->mu);
    return err ? tg_err(err, "%s", b->msg) : 0;
}

static void bg_free(struct tg_filew_bg *b)
{
    if (!b) return;
    if (b->threaded) {
        pthread_mutex_lock(&b->mu);
        b->stop = 1;
        pthread_cond_broadcast(&b->cv);
        pthread_mutex_unlock(&b->mu);
        pthread_join(b->th, NULL);
        pthread_mutex_destroy(&b->mu);
        pthread_cond_destroy(&b->cv);
    }
    free(b->bufs[0]);
    free(b->bufs[1]);
    free(b->path);
    free(b);
}

int tg_filew_open(tg_filew_t *w, const char *path, size_t buf_bytes)
{
    memset(w, 0, sizeof *w);
    w->fd = -1;
    size_t cap = buf_bytes ? buf_bytes : (8u << 20);
    cap = (cap + DIO_ALIGN - 1) / DIO_ALIGN * DIO_ALIGN;
    struct tg_filew_bg *b = calloc(1, sizeof *b);
    w->path = strdup(path);
    if (b) {
        b->fd = -1;
        b->path = strdup(path);
        b->bufs[0] = tg_aligned_alloc(DIO_ALIGN, cap);
        b->bufs[1] = tg_aligned_alloc(DIO_ALIGN, cap);
    }
    if (!w->path || !b || !b->path || !b->bufs[0] || !b->bufs[1]) {
        bg_free(b);
        free(w->path);
        w->path = NULL;
        return tg_err(-ENOMEM, "%s: out of memory for write buffers", path);
    }
    w->bg = b;
    w->buf = b->bufs[0];
    w->buf_cap = cap;
    b->direct = 1;
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_DIRECT, 0644);
    if (fd < 0 && errno == EINVAL) { /* no direct I/O on this file system */
        b->direct = 0;
        fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    }
    if (fd < 0) {
        int e = errno;
        tg_filew_discard(w);
        return tg_err(-e, "%s: cannot create: %s", path, strerror(e));
    }
    w->fd = b->fd = fd;
    pthread_mutex_init(&b->mu, NULL);
    pthread_cond_init(&b->cv, NULL);
    b->threaded = pthread_create(&b->th, NULL, bg_main, b) == 0;
    if (!b->threaded) {
        pthread_mutex_destroy(&b->mu);
        pthread_cond_destroy(&b->cv);
    }
    return 0;
}

/* Hands the full buffer to the background thread and continues in the other one. */
static int flush(tg_filew_t *w)
{
    if (!w->buf_len) return 0;
    struct tg_filew_bg *b = w->bg;
    int rc = bg_wait(b);
    if (rc) return rc;
    if (!b->threaded) {
        rc = write_at(b, w->buf, w->buf_len, w->written);
        if (rc) {
            b->err = rc;
            snprintf(b->msg, sizeof b->msg, "%s", tg_errmsg());
            return rc;
        }
    } else {
        pthread_mutex_lock(&b->mu);
        b->job = w->buf;
        b->job_len = w->buf_len;
        b->job_off = w->written;
        b->busy = 1;
        pthread_cond_broadcast(&b->cv);
        pthread_mutex_unlock(&b->mu);
        w->buf = w->buf == b->bufs[0] ? b->bufs[1] : b->bufs[0];
    }
    w->written += w->buf_len;
    w->buf_len = 0;
    return 0;
}

static int append(tg_filew_t *w, const char *p, size_t len)
{
    if (w->fd < 0 || !w->bg)
        return tg_err(-EBADF, "%s: write to a closed writer", w->path ? w->path : "?");
    struct tg_filew_bg *b = w->bg;
    /* Large aligned pieces go straight from the caller's memory (no copy), synchronously since
     * the caller may reuse it on return. The buffer must be empty to keep the order. */
    if (w->buf_len == 0 && len >= w->buf_cap && (uintptr_t)p % DIO_ALIGN == 0 &&
        w->written % DIO_ALIGN == 0) {
        size_t n = len / DIO_ALIGN * DIO_ALIGN;
        int rc = bg_wait(b);
        if (!rc) rc = write_at(b, p, n, w->written);
        if (rc) {
            b->err = rc;
            snprintf(b->msg, sizeof b->msg, "%s", tg_errmsg());
            return rc;
        }
        w->written += n;
        p += n;
        len -= n;
    }
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

int tg_filew_write(tg_filew_t *w, const void *data, size_t len)
{
    w->crc = tg_data_crc32(w->crc, data, len);
    return append(w, data, len);
}

int tg_filew_write_crc(tg_filew_t *w, const void *data, size_t len, uint32_t crc)
{
    w->crc = (uint32_t)crc32_combine64(w->crc, crc, (z_off64_t)len);
    return append(w, data, len);
}

int tg_filew_close(tg_filew_t *w, tg_file_info_t *info)
{
    if (w->fd < 0 || !w->bg)
        return tg_err(-EBADF, "%s: writer already closed", w->path ? w->path : "?");
    struct tg_filew_bg *b = w->bg;
    int rc = bg_wait(b);
    /* The tail is not a whole number of blocks: write_at finishes it without O_DIRECT. */
    if (!rc && w->buf_len) rc = write_at(b, w->buf, w->buf_len, w->written);
    if (!rc) {
        w->written += w->buf_len;
        w->buf_len = 0;
    }
    if (!rc && fsync(w->fd)) rc = tg_err(-errno, "%s: fsync failed: %s", w->path, strerror(errno));
    if (close(w->fd) && !rc) rc = tg_err(-errno, "%s: close failed: %s", w->path, strerror(errno));
    w->fd = -1;
    if (!rc && info) {
        info->size = w->written;
        info->crc32 = w->crc;
    }
    bg_free(b);
    w->bg = NULL;
    w->buf = NULL;
    free(w->path);
    w->path = NULL;
    return rc;
}

void tg_filew_discard(tg_filew_t *w)
{
    /* Joining waits for a write in flight: the descriptor must outlive it. */
    bg_free(w->bg);
    w->bg = NULL;
    if (w->fd >= 0) close(w->fd);
    w->fd = -1;
    w->buf = NULL;
    free(w->path);
    w->path = NULL;
}

/* ---------------------------------------------------------------- interrupted writers */

/* The temporary directories of writers between begin and commit/abort, so that a signal
 * handler thread can remove them (tg_dsw_cleanup_on_signals). */
#define MAX_ACTIVE 16
static pthread_mutex_t active_mu = PTHREAD_MUTEX_INITIALIZER;
static char *active[MAX_ACTIVE];

static void active_add(const char *dir)
{
    pthread_mutex_lock(&active_mu);
    for (int i = 0; i < MAX_ACTIVE; i++)
        if (!active[i]) {
            active[i] = strdup(dir); /* if this fails the directory is just not cleaned */
            break;
        }
    pthread_mutex_unlock(&active_mu);
}

static void active_remove(const char *dir)
{
    pthread_mutex_lock(&active_mu);
    for (int i = 0; i < MAX_ACTIVE; i++)
        if (active[i] && !strcmp(active[i], dir)) {
            free(active[i]);
            active[i] = NULL;
        }
    pthread_mutex_unlock(&active_mu);
}

/* The handler only writes the signal number to a pipe (async-signal-safe); a thread reads it
 * and does the cleanup, which needs malloc, locks and directory walks. A handler rather than
 * sigwait: libraries such as OpenBLAS start threads before main, which would not have the
 * signals blocked and would take the default action. */
static int signal_pipe[2] = {-1, -1};

static void on_signal(int sig)
{
    int e = errno;
    ssize_t n = write(signal_pipe[1], &sig, sizeof sig);
    (void)n;
    errno = e;
}

static void *signal_main(void *arg)
{
    (void)arg;
    int sig = 0;
    ssize_t n;
    do
        n = read(signal_pipe[0], &sig, sizeof sig);
    while (n < 0 && errno == EINTR);
    if (n != (ssize_t)sizeof sig) return NULL;
    /* Keep the lock: no writer finishes (or starts) from now on. Other threads may still be
     * writing into a directory while it is removed, hence the retries. */
    pthread_mutex_lock(&active_mu);
    for (int i = 0; i < MAX_ACTIVE; i++) {
        if (!active[i]) continue;
        for (int t = 0; t < 5 && tg_rmtree(active[i]) != 0; t++)
            usleep(20000);
        fprintf(stderr, "tiergnn: interrupted by signal %d; removed %s\n", sig, active[i]);
    }
    fflush(stderr);
    _exit(128 + sig);
}

int tg_dsw_cleanup_on_signals(void)
{
    static int installed;
    if (installed) return 0;
    if (pipe2(signal_pipe, O_CLOEXEC))
        return tg_err(-errno, "cannot create the signal pipe: %s", strerror(errno));
    pthread_t th;
    int rc = pthread_create(&th, NULL, signal_main, NULL);
    if (rc) return tg_err(-rc, "cannot start the signal thread: %s", strerror(rc));
    pthread_detach(th);
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = SA_RESTART;
    const int sigs[] = {SIGINT, SIGTERM, SIGHUP};
    for (int i = 0; i < 3; i++) {
        struct sigaction old;
        /* a signal ignored on entry (nohup, background jobs) stays ignored */
        if (sigaction(sigs[i], NULL, &old) == 0 && old.sa_handler == SIG_IGN) continue;
        if (sigaction(sigs[i], &sa, NULL))
            return tg_err(-errno, "cannot install a signal handler: %s", strerror(errno));
    }
    installed = 1;
    return 0;
}

/* ---------------------------------------------------------------- tg_dsw */

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
    active_add(w->tmp_dir);
    return 0;
}

void tg_dsw_path(const tg_dsw_t *w, tg_file_id_t id, char *buf, size_t len)
{
    snprintf(buf, len, "%s/%s", w->tmp_dir, tg_file_name(id));
}

int tg_dsw_open_file(tg_dsw_t *w, tg_file_id_t id, tg_filew_t *fw)
{
    return tg_dsw_open_file_buf(w, id, fw, 0);
}

int tg_dsw_open_file_buf(tg_dsw_t *w, tg_file_id_t id, tg_filew_t *fw, size_t buf_bytes)
{
    char path[4096];
    tg_dsw_path(w, id, path, sizeof path);
    return tg_filew_open(fw, path, buf_bytes);
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
    active_remove(w->tmp_dir);
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
    if (w->tmp_dir) {
        tg_rmtree(w->tmp_dir);
        active_remove(w->tmp_dir);
    }
    free(w->tmp_dir);
    free(w->out_dir);
    w->tmp_dir = NULL;
    w->out_dir = NULL;
}
