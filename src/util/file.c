/* File helpers: atomic whole-file writes, full pread/pwrite loops, directory utilities. */
#include "tiergnn/util.h"

#include <dirent.h>
#include <fcntl.h>
#include <libgen.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

uint32_t tg_crc32(uint32_t crc, const void *buf, size_t len)
{
    const unsigned char *p = buf;
    uLong c = crc;
    while (len > 0) {
        uInt n = len > (1u << 30) ? (1u << 30) : (uInt)len;
        c = crc32(c, p, n);
        p += n;
        len -= n;
    }
    return (uint32_t)c;
}

int tg_pwrite_full(int fd, const void *buf, size_t len, uint64_t off, const char *path)
{
    const char *p = buf;
    while (len > 0) {
        ssize_t n = pwrite(fd, p, len, (off_t)off);
        if (n < 0) {
            if (errno == EINTR) continue;
            int e = errno;
            return tg_err(-e, "%s: write at offset %llu failed: %s", path, (unsigned long long)off,
                          strerror(e));
        }
        if (n == 0)
            return tg_err(-EIO, "%s: write at offset %llu wrote nothing", path,
                          (unsigned long long)off);
        p += n;
        len -= (size_t)n;
        off += (uint64_t)n;
    }
    return 0;
}

static _Atomic(tg_read_fault_fn) read_fault_hook;

void tg_pread_set_fault_hook(tg_read_fault_fn fn)
{
    atomic_store_explicit(&read_fault_hook, fn, memory_order_release);
}

/* The read returned nothing at off: the end of the file, or a short read if the file is longer
 * (the disk or a fault rule stopped it). */
static int read_ended(int fd, uint64_t off, size_t len, const char *path)
{
    struct stat st;
    if (fstat(fd, &st) == 0 && (uint64_t)st.st_size > off)
        return tg_err(-EIO,
                      "%s: unexpected end of file at offset %llu (%zu more bytes expected): the "
                      "read returned nothing though the file is %llu bytes long (a short read)",
                      path, (unsigned long long)off, len, (unsigned long long)st.st_size);
    return tg_err(-EIO, "%s: unexpected end of file at offset %llu (%zu more bytes expected)", path,
                  (unsigned long long)off, len);
}

int tg_pread_full(int fd, void *buf, size_t len, uint64_t off, const char *path)
{
    char *p = buf;
    tg_read_fault_fn hook = atomic_load_explicit(&read_fault_hook, memory_order_acquire);
    while (len > 0) {
        uint64_t want = len;
        int fault = hook ? hook(path, off, &want) : 0;
        if (fault) /* not retried, even as EINTR: the rule decides how many reads fail */
            return tg_err(-fault, "%s: read at offset %llu failed: %s", path,
                          (unsigned long long)off, strerror(fault));
        ssize_t n = want ? pread(fd, p, (size_t)want, (off_t)off) : 0;
        if (n < 0) {
            if (errno == EINTR) continue;
            int e = errno;
            return tg_err(-e, "%s: read at offset %llu failed: %s", path, (unsigned long long)off,
                          strerror(e));
        }
        if (n == 0) return read_ended(fd, off, len, path);
        p += n;
        len -= (size_t)n;
        off += (uint64_t)n;
    }
    return 0;
}

int tg_fsync_dir(const char *dir)
{
    int fd = open(dir, O_RDONLY | O_DIRECTORY);
    if (fd < 0) return tg_err(-errno, "%s: cannot open directory: %s", dir, strerror(errno));
    int rc = 0;
    if (fsync(fd) && errno != EINVAL)
        rc = tg_err(-errno, "%s: fsync failed: %s", dir, strerror(errno));
    close(fd);
    return rc;
}

int tg_write_file_atomic(const char *path, const void *data, size_t len)
{
    size_t pl = strlen(path);
    char *tmp = malloc(pl + 16);
    if (!tmp) return tg_err(-ENOMEM, "%s: out of memory", path);
    snprintf(tmp, pl + 16, "%s.tmp", path);
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0) {
        int e = errno;
        free(tmp);
        return tg_err(-e, "%s: cannot create: %s", path, strerror(e));
    }
    int rc = tg_pwrite_full(fd, data, len, 0, path);
    if (!rc && fsync(fd)) rc = tg_err(-errno, "%s: fsync failed: %s", path, strerror(errno));
    close(fd);
    if (!rc && rename(tmp, path))
        rc = tg_err(-errno, "%s: rename failed: %s", path, strerror(errno));
    if (rc) {
        unlink(tmp);
        free(tmp);
        return rc;
    }
    free(tmp);
    char *dcopy = strdup(path);
    if (dcopy) {
        rc = tg_fsync_dir(dirname(dcopy));
        free(dcopy);
    }
    return rc;
}

int tg_read_file(const char *path, char **data, size_t *len)
{
    *data = NULL;
    if (len) *len = 0;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return tg_err(-errno, "%s: cannot open: %s", path, strerror(errno));
    struct stat st;
    if (fstat(fd, &st)) {
        int e = errno;
        close(fd);
        return tg_err(-e, "%s: cannot stat: %s", path, strerror(e));
    }
    size_t n = (size_t)st.st_size;
    char *buf = malloc(n + 1);
    if (!buf) {
        close(fd);
        return tg_err(-ENOMEM, "%s: out of memory reading %zu bytes", path, n);
    }
    int rc = tg_pread_full(fd, buf, n, 0, path);
    close(fd);
    if (rc) {
        free(buf);
        return rc;
    }
    buf[n] = 0;
    *data = buf;
    if (len) *len = n;
    return 0;
}

int tg_rmtree(const char *path)
{
    struct stat st;
    if (lstat(path, &st)) return errno == ENOENT ? 0 : -errno;
    if (!S_ISDIR(st.st_mode)) return unlink(path) ? -errno : 0;
    DIR *d = opendir(path);
    if (!d) return -errno;
    struct dirent *de;
    int rc = 0;
    while ((de = readdir(d))) {
        if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, "..")) continue;
        size_t n = strlen(path) + strlen(de->d_name) + 2;
        char *sub = malloc(n);
        if (!sub) {
            rc = -ENOMEM;
            break;
        }
        snprintf(sub, n, "%s/%s", path, de->d_name);
        int r = tg_rmtree(sub);
        if (r && !rc) rc = r;
        free(sub);
    }
    closedir(d);
    if (rmdir(path) && !rc) rc = -errno;
    return rc;
}

int tg_tmpfile_open(const char *dir, const char *what, int named, char *name, size_t len)
{
    struct stat st;
    if (stat(dir, &st) < 0)
        return tg_err(-errno, "%s directory %s: %s", what, dir, strerror(errno));
    if (!S_ISDIR(st.st_mode))
        return tg_err(-ENOTDIR, "%s directory %s is not a directory", what, dir);
    if (!named) {
        int fd = open(dir, O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);
        if (fd >= 0) {
            snprintf(name, len, "%s/<unnamed %s file>", dir, what);
            return fd;
        }
        /* Only a file system without O_TMPFILE falls back to a name. */
        if (errno != EOPNOTSUPP && errno != EISDIR && errno != EINVAL)
            return tg_err(-errno, "cannot create a %s file in %s: %s", what, dir, strerror(errno));
    }
    char tmpl[4096];
    int n = snprintf(tmpl, sizeof tmpl, "%s/.tiergnn-%s-XXXXXX", dir, what);
    if (n < 0 || (size_t)n >= sizeof tmpl - 16)
        return tg_err(-ENAMETOOLONG, "%s directory name too long: %s", what, dir);
    int fd = mkostemp(tmpl, O_CLOEXEC);
    if (fd < 0)
        return tg_err(-errno, "cannot create a %s file in %s: %s", what, dir, strerror(errno));
    if (unlink(tmpl) < 0) {
        int e = errno;
        close(fd);
        unlink(tmpl);
        return tg_err(-e, "cannot unlink the %s file %s: %s", what, tmpl, strerror(e));
    }
    snprintf(name, len, "%s (unlinked)", tmpl);
    return fd;
}

int tg_mkdir_p(const char *path)
{
    char *p = strdup(path);
    if (!p) return tg_err(-ENOMEM, "out of memory");
    for (char *s = p + 1; *s; s++) {
        if (*s != '/') continue;
        *s = 0;
        if (mkdir(p, 0755) && errno != EEXIST) {
            int e = errno;
            int rc = tg_err(-e, "%s: cannot create directory: %s", p, strerror(e));
            free(p);
            return rc;
        }
        *s = '/';
    }
    int rc = 0;
    if (mkdir(p, 0755) && errno != EEXIST)
        rc = tg_err(-errno, "%s: cannot create directory: %s", p, strerror(errno));
    free(p);
    return rc;
}
