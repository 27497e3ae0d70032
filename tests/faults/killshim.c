/* killshim.so: SIGKILL a process at the K-th write-side call on a matching file, for the fault
 * and kill matrix (tests/faults/run.sh). LD_PRELOAD it; it watches the calls that put bytes or
 * names on disk - write, pwrite, fsync, fdatasync, ftruncate, fallocate (by the path of their
 * file descriptor) and rename, renameat, renameat2 (by the old name) - and counts those whose
 * path contains TG_KILL_MATCH, over all threads.
 *
 *     TG_KILL_MATCH=SUBSTR  the path substring to watch ("/derived/tmp-", "checkpoint.bin.tmp")
 *     TG_KILL_AT=K          the K-th matching call (1-based) kills the process before it runs;
 *                           0 or unset: only count
 *     TG_KILL_COUNT=FILE    at exit, write to FILE the number of matching calls and the bytes
 *                           their writes asked for ("CALLS BYTES")
 *
 * The kill happens on entry, so the K-th call never runs: K = 1 is before the file's first byte,
 * the last K is just before its rename. Calls from inside libc (stdio's own writes) are not seen,
 * which leaves the log lines out of the count. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <fcntl.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <unistd.h>

static const char *match;
static long kill_at;
static const char *count_path;
static atomic_long seen, bytes;

static void report(void)
{
    if (!count_path) return;
    FILE *f = fopen(count_path, "w");
    if (!f) return;
    fprintf(f, "%ld %ld\n", atomic_load(&seen), atomic_load(&bytes));
    fclose(f);
}

__attribute__((constructor)) static void shim_init(void)
{
    match = getenv("TG_KILL_MATCH");
    if (match && !*match) match = NULL;
    const char *at = getenv("TG_KILL_AT");
    kill_at = at ? strtol(at, NULL, 10) : 0;
    count_path = getenv("TG_KILL_COUNT");
    if (count_path && !*count_path) count_path = NULL;
    if (match && count_path) atexit(report);
}

/* Counts one call on path (writing len bytes) and kills the process when it is the chosen one. */
static void hit(const char *path, size_t len)
{
    if (!match || !path || !strstr(path, match)) return;
    atomic_fetch_add(&bytes, (long)len);
    long n = atomic_fetch_add(&seen, 1) + 1;
    if (kill_at > 0 && n == kill_at) {
        report();
        kill(getpid(), SIGKILL);
    }
}

static void hit_fd(int fd, size_t len)
{
    if (!match) return;
    char link[64], path[4096];
    snprintf(link, sizeof link, "/proc/self/fd/%d", fd);
    ssize_t n = readlink(link, path, sizeof path - 1);
    if (n <= 0) return;
    path[n] = 0;
    hit(path, len);
}

#define REAL(name) ((__typeof__(&name))dlsym(RTLD_NEXT, #name))

ssize_t write(int fd, const void *buf, size_t len)
{
    hit_fd(fd, len);
    return REAL(write)(fd, buf, len);
}

ssize_t pwrite(int fd, const void *buf, size_t len, off_t off)
{
    hit_fd(fd, len);
    return REAL(pwrite)(fd, buf, len, off);
}

ssize_t pwrite64(int fd, const void *buf, size_t len, off64_t off)
{
    hit_fd(fd, len);
    return REAL(pwrite64)(fd, buf, len, off);
}

int fsync(int fd)
{
    hit_fd(fd, 0);
    return REAL(fsync)(fd);
}

int fdatasync(int fd)
{
    hit_fd(fd, 0);
    return REAL(fdatasync)(fd);
}

int ftruncate(int fd, off_t len)
{
    hit_fd(fd, 0);
    return REAL(ftruncate)(fd, len);
}

int ftruncate64(int fd, off64_t len)
{
    hit_fd(fd, 0);
    return REAL(ftruncate64)(fd, len);
}

int fallocate(int fd, int mode, off_t off, off_t len)
{
    hit_fd(fd, 0);
    return REAL(fallocate)(fd, mode, off, len);
}

int fallocate64(int fd, int mode, off64_t off, off64_t len)
{
    hit_fd(fd, 0);
    return REAL(fallocate64)(fd, mode, off, len);
}

int rename(const char *from, const char *to)
{
    hit(from, 0);
    return REAL(rename)(from, to);
}

int renameat(int dfrom, const char *from, int dto, const char *to)
{
    hit(from, 0);
    return REAL(renameat)(dfrom, from, dto, to);
}

int renameat2(int dfrom, const char *from, int dto, const char *to, unsigned flags)
{
    hit(from, 0);
    return REAL(renameat2)(dfrom, from, dto, to, flags);
}
