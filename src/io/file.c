/* Opening data files for direct reads: O_DIRECT with the filesystem's alignment, or a buffered
 * fallback where direct I/O is refused. */
#include "io-impl.h"

#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* Without STATX_DIOALIGN (kernel < 6.1, or a filesystem that does not report it) we assume the
 * common 4096: it satisfies every block size up to a page, the case for NVMe/virtio/SATA. */
#define TG_IO_DEFAULT_ALIGN 4096u

static atomic_int warned_buffered;

static unsigned pow2_at_least(unsigned x)
{
    unsigned p = 1;
    while (p < x)
        p <<= 1;
    return p;
}

/* Asks statx for the direct-I/O alignment. Returns 1 and sets *align if the filesystem reported
 * it, 0 if it reported nothing (unknown: try O_DIRECT with the default), -1 if it reported that
 * this file cannot do direct I/O at all (both alignments 0). */
static int dio_alignment(int fd, unsigned *align)
{
#ifdef STATX_DIOALIGN
    struct statx sx;
    if (statx(fd, "", AT_EMPTY_PATH, STATX_DIOALIGN, &sx) == 0 && (sx.stx_mask & STATX_DIOALIGN)) {
        if (sx.stx_dio_offset_align == 0 || sx.stx_dio_mem_align == 0) return -1;
        /* One alignment for offsets, lengths and buffer addresses keeps the planner simple: a
         * continued short read at slot + done is then aligned too. */
        *align = pow2_at_least(TG_MAX(sx.stx_dio_offset_align, sx.stx_dio_mem_align));
        return 1;
    }
#else
    (void)fd;
    (void)align;
#endif
    return 0;
}

static void warn_buffered(const char *path, const char *why)
{
    if (atomic_exchange(&warned_buffered, 1) == 0)
        tg_log_warn("%s: %s; reading through the page cache instead (further files: same, no "
                    "more warnings)",
                    path, why);
    else
        tg_log_debug("%s: %s; reading through the page cache", path, why);
}

int tg_io_file_open(tg_io_file_t **out, const char *path, unsigned flags)
{
    *out = NULL;
    int rc = tg_io_fault_env_load();
    if (rc < 0) return rc;
    tg_io_file_t *f = calloc(1, sizeof *f);
    if (!f) return tg_err(-ENOMEM, "%s: out of memory", path);
    f->fd = -1;
    f->path = strdup(path);
    if (!f->path) {
        rc = tg_err(-ENOMEM, "%s: out of memory", path);
        goto err;
    }

    int want_direct = !(flags & TG_IO_FILE_BUFFERED);
    if (want_direct) {
        int fault = tg_io_fault_check_op(TG_IO_FAULT_OPEN, path);
        if (fault) {
            errno = fault;
        } else {
            f->fd = open(path, O_RDONLY | O_DIRECT | O_CLOEXEC);
            if (f->fd >= 0) f->direct = 1;
        }
        if (f->fd < 0 && errno != EINVAL) {
            rc = tg_err(-errno, "%s: cannot open: %s", path, strerror(errno));
            goto err;
        }
    }
    if (f->fd < 0) {
        f->fd = open(path, O_RDONLY | O_CLOEXEC);
        if (f->fd < 0) {
            rc = tg_err(-errno, "%s: cannot open: %s", path, strerror(errno));
            goto err;
        }
    }

    struct stat st;
    if (fstat(f->fd, &st)) {
        rc = tg_err(-errno, "%s: cannot stat: %s", path, strerror(errno));
        goto err;
    }
    if (!S_ISREG(st.st_mode)) {
        rc = tg_err(-EINVAL, "%s: not a regular file", path);
        goto err;
    }
    if (want_direct && !f->direct)
        warn_buffered(path, "O_DIRECT is not supported (open failed with EINVAL)");
    f->size = (uint64_t)st.st_size;
    f->dev = st.st_dev;
    f->align = TG_IO_DEFAULT_ALIGN;

    if (f->direct) {
        int got = dio_alignment(f->fd, &f->align);
        if (got < 0) {
            /* The filesystem says no direct I/O for this file even though open accepted the
             * flag: reopen buffered rather than fail on the first read. */
            int fd = open(path, O_RDONLY | O_CLOEXEC);
            if (fd < 0) {
                rc = tg_err(-errno, "%s: cannot open: %s", path, strerror(errno));
                goto err;
            }
            close(f->fd);
            f->fd = fd;
            f->direct = 0;
            f->align = TG_IO_DEFAULT_ALIGN;
            warn_buffered(path, "statx reports no direct I/O support");
        }
    }
    if (!f->direct) {
        /* Rows are read in random order: readahead would only waste page cache. */
        (void)posix_fadvise(f->fd, 0, 0, POSIX_FADV_RANDOM);
    }
    *out = f;
    return 0;

err:
    tg_io_file_close(f);
    return rc;
}

void tg_io_file_close(tg_io_file_t *f)
{
    if (!f) return;
    if (f->fd >= 0) close(f->fd);
    free(f->path);
    free(f);
}

const char *tg_io_file_path(const tg_io_file_t *f)
{
    return f->path;
}

uint64_t tg_io_file_size(const tg_io_file_t *f)
{
    return f->size;
}

unsigned tg_io_file_align(const tg_io_file_t *f)
{
    return f->align;
}

int tg_io_file_direct(const tg_io_file_t *f)
{
    return f->direct;
}
