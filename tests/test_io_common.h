/* Helpers shared by the tests/test_io_*.c programs: pattern files, a pread reference, and
 * capability checks that decide what to skip (exit 77) on this kernel and filesystem. */
#ifndef TEST_IO_COMMON_H
#define TEST_IO_COMMON_H

#include <fcntl.h>
#include <liburing.h>
#include <unistd.h>

#include "tg_test.h"
#include "tiergnn/io.h"

/* Byte i of every test file: position-dependent, so a range read from the wrong offset or a
 * piece copied to the wrong place never matches by chance. */
static inline uint8_t tio_pattern(uint64_t i)
{
    uint64_t x = i * 0x9e3779b97f4a7c15ull;
    return (uint8_t)((x >> 29) ^ (i >> 12) ^ i);
}

/* Creates dir/name with `size` pattern bytes and returns the path (malloc'd). */
static inline char *tio_make_file(const char *dir, const char *name, uint64_t size)
{
    size_t pl = strlen(dir) + strlen(name) + 2;
    char *path = malloc(pl);
    snprintf(path, pl, "%s/%s", dir, name);
    size_t chunk = 1 << 20;
    uint8_t *buf = malloc(chunk);
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd < 0 || !buf) {
        fprintf(stderr, "cannot create %s\n", path);
        exit(1);
    }
    for (uint64_t off = 0; off < size; off += chunk) {
        size_t n = (size_t)TG_MIN((uint64_t)chunk, size - off);
        for (size_t i = 0; i < n; i++)
            buf[i] = tio_pattern(off + i);
        if (tg_pwrite_full(fd, buf, n, off, path) < 0) {
            fprintf(stderr, "%s\n", tg_errmsg());
            exit(1);
        }
    }
    close(fd);
    free(buf);
    return path;
}

/* The reference: what a plain pread of [off, off+len) returns (fewer bytes at EOF). */
static inline size_t tio_pread(const char *path, uint64_t off, size_t len, void *dst)
{
    int fd = open(path, O_RDONLY);
    size_t got = 0;
    while (fd >= 0 && got < len) {
        ssize_t n = pread(fd, (char *)dst + got, len - got, (off_t)(off + got));
        if (n <= 0) break;
        got += (size_t)n;
    }
    if (fd >= 0) close(fd);
    return got;
}

/* 1 if p holds the pattern bytes of [off, off + len). */
static inline int tio_bytes_ok(const uint8_t *p, uint64_t off, size_t len)
{
    for (size_t i = 0; i < len; i++)
        if (p[i] != tio_pattern(off + i)) return 0;
    return 1;
}

/* 1 if files in dir can be opened with O_DIRECT (0: tests needing it skip). A raw open, not
 * through io/, so the io layer's one fallback warning stays for the tests that count it. */
static inline int tio_have_odirect(const char *dir)
{
    if (tg_test_io_absent("odirect")) return 0;
    char path[4200];
    snprintf(path, sizeof path, "%s/.odirect-check", dir);
    int fd = open(path, O_RDWR | O_CREAT | O_DIRECT, 0644);
    if (fd >= 0) close(fd);
    unlink(path);
    return fd >= 0;
}

/* 1 if this process may create an io_uring. */
static inline int tio_have_uring(void)
{
    if (tg_test_io_absent("uring")) return 0;
    struct io_uring ring;
    if (io_uring_queue_init(4, &ring, 0) < 0) return 0;
    io_uring_queue_exit(&ring);
    return 1;
}

/* Start of every test program: a fresh tmp dir named after the test; exits 77 (skip) where its
 * filesystem refuses O_DIRECT; *have_uring says whether io_uring variants can run. */
static inline const char *tio_begin(const char *name, int *have_uring)
{
    const char *dir = tg_test_tmpdir(name);
    if (!tio_have_odirect(dir)) {
        fprintf(stderr, "SKIP: %s does not support O_DIRECT%s\n", dir,
                tg_test_io_absent("odirect") ? " (TG_TEST_IO_ABSENT=odirect)" : "");
        exit(TG_SKIP);
    }
    *have_uring = tio_have_uring();
    return dir;
}

/* End of every test program: the failures, else 77 if the io_uring variants could not run
 * (the pread ones did), else 0; the tmp dir is removed when nothing failed. */
static inline int tio_end(const char *dir, int have_uring)
{
    int rc = tg_test_done();
    if (rc) return rc;
    tg_rmtree(dir);
    if (!have_uring) {
        fprintf(stderr, "SKIP: io_uring unavailable%s; only the pread backend was tested\n",
                tg_test_io_absent("uring") ? " (TG_TEST_IO_ABSENT=uring)" : "");
        return TG_SKIP;
    }
    return 0;
}

/* Redirects stderr into a file so that a test can count warnings; tio_stderr_end restores it
 * and returns what was written (malloc'd). */
typedef struct tio_capture {
    int saved_fd;
    char path[4200];
} tio_capture_t;

static inline void tio_stderr_begin(tio_capture_t *c, const char *dir)
{
    fflush(stderr);
    snprintf(c->path, sizeof c->path, "%s/stderr.txt", dir);
    c->saved_fd = dup(STDERR_FILENO);
    int fd = open(c->path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    dup2(fd, STDERR_FILENO);
    close(fd);
}

static inline char *tio_stderr_end(tio_capture_t *c)
{
    fflush(stderr);
    dup2(c->saved_fd, STDERR_FILENO);
    close(c->saved_fd);
    char *text = NULL;
    if (tg_read_file(c->path, &text, NULL) < 0) text = strdup("");
    return text;
}

/* Occurrences of needle in hay. */
static inline int tio_count(const char *hay, const char *needle)
{
    int n = 0;
    for (const char *p = hay; (p = strstr(p, needle)); p += strlen(needle))
        n++;
    return n;
}

#endif
