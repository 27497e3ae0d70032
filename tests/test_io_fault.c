/* Fault injection and the error paths it reaches, on io_uring and pread: an injected EIO fails
 * exactly the requests it touches with a message naming the file and the request's offset (the
 * others still get their bytes); a short read is continued (one) or fails naming the file and
 * the offset where the bytes stopped (every one); after/count; retried EAGAIN; the
 * TIERGNN_IO_FAULT variable; forced O_DIRECT and io_uring failures fall back with one warning
 * each. */
#include "test_io_common.h"

static const char *dir;
static char *path, *env_path;
static const uint64_t fsize = 2u << 20;
static int have_uring;

static const unsigned backends[] = {0, TG_IO_NO_FIXED, TG_IO_FORCE_PREAD};
static const unsigned depths[] = {1, 8, 64};

TG_TEST(eio_sync)
{
    const uint64_t X = (1u << 20) + 777; /* the bad byte */
    tg_io_file_t *f = NULL;
    TG_CHECK_OK(tg_io_file_open(&f, path, 0));
    if (!f) return;
    for (size_t b = 0; b < 3; b++)
        for (size_t d = 0; d < 3; d++)
            for (int merge = 0; merge < 2; merge++) {
                if (!have_uring && !(backends[b] & TG_IO_FORCE_PREAD)) continue;
                tg_io_fault_clear();
                tg_io_fault_t rule = {
                    .op = TG_IO_FAULT_READ, .file = "data.bin", .lo = X, .hi = X + 1, .err = EIO};
                TG_CHECK_OK(tg_io_fault_add(&rule));
                tg_io_opts_t o = {.depth = depths[d],
                                  .flags = backends[b] | (merge ? 0 : TG_IO_NO_MERGE)};
                tg_io_t *io = NULL;
                TG_CHECK_OK(tg_io_create(&io, &o));
                if (!io) continue;
                uint8_t bufs[4][300];
                /* q[1] covers the bad byte; q[0] and q[2] are far away; q[3] is next to q[1]
                 * but in another block (with merging it shares q[1]'s failed read). */
                uint64_t offs[4] = {1000, X - 100, 300000, X + 5000};
                tg_io_req_t q[4];
                for (int i = 0; i < 4; i++)
                    q[i] = (tg_io_req_t){.file = f, .off = offs[i], .len = 300, .dst = bufs[i]};
                uint64_t hits0 = tg_io_fault_hits();
                char needle[64];
                snprintf(needle, sizeof needle, "offset %llu", (unsigned long long)(X - 100));
                TG_CHECK_ERR(tg_io_read_batch(io, q, 4), needle);
                TG_CHECK(strstr(tg_errmsg(), path) != NULL);
                TG_CHECK(strstr(tg_errmsg(), "Input/output error") != NULL);
                TG_CHECK(q[1].res == -EIO);
                TG_CHECK(tg_io_fault_hits() == hits0 + 1);
                for (int i = 0; i < 4; i++)
                    if (i != 1 && q[i].res == 0) TG_CHECK(tio_bytes_ok(bufs[i], offs[i], 300));
                TG_CHECK(q[0].res == 0 && q[2].res == 0);
                /* q[3] starts 5000 bytes later: with 4 KiB blocks its read is adjacent to q[1]'s
                 * and merged into the failed one only if merging is on */
                if (!merge) TG_CHECK(q[3].res == 0);
                /* the queue keeps working after an error */
                tg_io_fault_clear();
                q[1].res = 1;
                TG_CHECK_OK(tg_io_read_batch(io, q, 4));
                TG_CHECK(q[1].res == 0 && tio_bytes_ok(bufs[1], offs[1], 300));
                tg_io_destroy(io);
            }
    tg_io_file_close(f);
}

/* The failure comes back through tg_io_reap with its message, and only for that request. */
TG_TEST(eio_async)
{
    tg_io_file_t *f = NULL;
    TG_CHECK_OK(tg_io_file_open(&f, path, 0));
    for (size_t b = 0; f && b < 3; b++) {
        if (!have_uring && !(backends[b] & TG_IO_FORCE_PREAD)) continue;
        tg_io_fault_clear();
        tg_io_fault_t rule = {.op = TG_IO_FAULT_READ, .lo = 65536, .hi = 65537, .err = EIO};
        TG_CHECK_OK(tg_io_fault_add(&rule));
        tg_io_opts_t o = {.depth = 8, .flags = backends[b] | TG_IO_NO_MERGE};
        tg_io_t *io = NULL;
        TG_CHECK_OK(tg_io_create(&io, &o));
        if (!io) continue;
        enum { N = 32 };
        tg_io_req_t q[N];
        uint8_t buf[N][64];
        for (int i = 0; i < N; i++)
            q[i] =
                (tg_io_req_t){.file = f, .off = (uint64_t)i * 8192 + 10, .len = 64, .dst = buf[i]};
        TG_CHECK_OK(tg_io_submit(io, q, N));
        int failed = 0;
        while (tg_io_inflight(io)) {
            tg_io_req_t *done[4];
            tg_err_clear();
            int k = tg_io_reap(io, done, 4, 1);
            TG_CHECK(k > 0);
            if (k <= 0) break;
            for (int i = 0; i < k; i++) {
                if (done[i]->res == 0) {
                    TG_CHECK(tio_bytes_ok(done[i]->dst, done[i]->off, 64));
                    continue;
                }
                failed++;
                TG_CHECK(done[i] == &q[8]); /* 8 * 8192 + 10 = 65546: its block holds 65536 */
                TG_CHECK(strstr(tg_errmsg(), path) && strstr(tg_errmsg(), "offset 65546"));
            }
        }
        TG_CHECK(failed == 1);
        tg_io_destroy(io);
    }
    tg_io_fault_clear();
    tg_io_file_close(f);
}

/* A short read at byte `stop` under every backend, depth and merge setting: with count=1 the
 * queue reads the rest and the bytes arrive whole; with every read short the request fails with
 * "unexpected end of file at offset stop", the file's path and "a short read" (the file did not
 * shrink), and only that request. */
static void short_case(tg_io_file_t *f, uint64_t stop, unsigned flags, unsigned depth, int once)
{
    tg_io_fault_clear();
    tg_io_fault_t rule = {.op = TG_IO_FAULT_READ,
                          .file = "data.bin",
                          .lo = stop,
                          .hi = stop + 1,
                          .short_read = 1,
                          .count = once ? 1 : 0};
    TG_CHECK_OK(tg_io_fault_add(&rule));
    tg_io_opts_t o = {.depth = depth, .flags = flags};
    tg_io_t *io = NULL;
    TG_CHECK_OK(tg_io_create(&io, &o));
    if (!io) return;
    uint8_t bufs[3][3000];
    uint64_t offs[3] = {0, stop - 1000, stop + 200000}; /* q[1] covers the stop byte */
    tg_io_req_t q[3];
    for (int i = 0; i < 3; i++)
        q[i] = (tg_io_req_t){.file = f, .off = offs[i], .len = 3000, .dst = bufs[i]};
    uint64_t hits0 = tg_io_fault_hits();
    if (once) {
        TG_CHECK_OK(tg_io_read_batch(io, q, 3));
        for (int i = 0; i < 3; i++)
            TG_CHECK(q[i].res == 0 && tio_bytes_ok(bufs[i], offs[i], 3000));
        TG_CHECK_EQ_U64(tg_io_fault_hits(), hits0 + 1);
    } else {
        /* under O_DIRECT a partial transfer is whole blocks: the bytes stop at the block */
        uint64_t at = tg_io_file_direct(f) ? stop & ~(uint64_t)(tg_io_file_align(f) - 1) : stop;
        char needle[64];
        snprintf(needle, sizeof needle, "unexpected end of file at offset %llu",
                 (unsigned long long)at);
        TG_CHECK_ERR(tg_io_read_batch(io, q, 3), needle);
        TG_CHECK(strstr(tg_errmsg(), path) != NULL);
        TG_CHECK(strstr(tg_errmsg(), "a short read") != NULL);
        TG_CHECK(q[1].res == -EIO);
        TG_CHECK(q[0].res == 0 && tio_bytes_ok(bufs[0], offs[0], 3000));
        TG_CHECK(q[2].res == 0 && tio_bytes_ok(bufs[2], offs[2], 3000));
        TG_CHECK(tg_io_fault_hits() > hits0);
    }
    tg_io_destroy(io);
}

/* Runs after open_fallback, whose forced buffered open gives the second handle here without a
 * second warning. */
TG_TEST(short_read)
{
    tg_io_file_t *files[2] = {NULL, NULL}; /* O_DIRECT where the file system has it; buffered */
    tg_io_fault_clear();
    TG_CHECK_OK(tg_io_file_open(&files[0], path, 0));
    TG_CHECK_OK(tg_io_fault_parse("EINVAL@0,op=open,file=data.bin"));
    TG_CHECK_OK(tg_io_file_open(&files[1], path, 0));
    if (files[1]) TG_CHECK(!tg_io_file_direct(files[1]));
    /* a stop inside a block and one on a block boundary */
    const uint64_t stops[2] = {(1u << 20) + 777, 1u << 20};
    for (int k = 0; k < 2; k++)
        for (size_t b = 0; files[k] && b < 3; b++)
            for (size_t d = 0; d < 3; d++)
                for (int st = 0; st < 2; st++)
                    for (int once = 0; once < 2; once++) {
                        if (!have_uring && !(backends[b] & TG_IO_FORCE_PREAD)) continue;
                        unsigned fl = backends[b];
                        short_case(files[k], stops[st], fl, depths[d], once);
                        short_case(files[k], stops[st], fl | TG_IO_NO_MERGE, depths[d], once);
                    }
    tg_io_fault_clear();
    tg_io_file_close(files[0]);
    tg_io_file_close(files[1]);
}

/* Read rules reach util's plain reads (tg_pread_full: the memory store, derived and spill files)
 * with the same words: an EIO names the file and offset; an unlimited short read fails where the
 * bytes stop, saying the file is longer (a short read); a single one is continued; the end of a
 * file is still told apart from a short read. */
TG_TEST(plain_reads)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    TG_CHECK(fd >= 0);
    if (fd < 0) return;
    uint8_t *buf = malloc(1 << 20);
    const uint64_t X = (1u << 20) + 777;
    tg_io_fault_clear();
    TG_CHECK_OK(tg_io_fault_parse("EIO@1050353,file=data.bin,count=1"));
    TG_CHECK_ERR(tg_pread_full(fd, buf, 1 << 20, 1u << 19, path),
                 "data.bin: read at offset 524288");
    TG_CHECK(strstr(tg_errmsg(), "Input/output error") != NULL);
    TG_CHECK_OK(tg_pread_full(fd, buf, 1 << 20, 1u << 19, path)); /* count = 1: used up */
    TG_CHECK(tio_bytes_ok(buf, 1u << 19, 1 << 20));
    TG_CHECK_OK(tg_pread_full(fd, buf, 4096, 0, "other.bin")); /* file= does not match */

    tg_io_fault_clear();
    tg_io_fault_t sh = {
        .op = TG_IO_FAULT_READ, .file = "data.bin", .lo = X, .hi = X + 1, .short_read = 1};
    TG_CHECK_OK(tg_io_fault_add(&sh));
    TG_CHECK_ERR(tg_pread_full(fd, buf, 8192, X - 100, path),
                 "unexpected end of file at offset 1049353");
    TG_CHECK(strstr(tg_errmsg(), "a short read") != NULL);
    TG_CHECK_OK(tg_pread_full(fd, buf, 8192, X + 1, path)); /* past the byte: whole */
    TG_CHECK(tio_bytes_ok(buf, X + 1, 8192));

    tg_io_fault_clear();
    sh.count = 1;
    TG_CHECK_OK(tg_io_fault_add(&sh));
    uint64_t h0 = tg_io_fault_hits();
    TG_CHECK_OK(tg_pread_full(fd, buf, 8192, X - 100, path)); /* continued after the stop */
    TG_CHECK(tio_bytes_ok(buf, X - 100, 8192));
    TG_CHECK(tg_io_fault_hits() == h0 + 1);

    tg_io_fault_clear();
    TG_CHECK_ERR(tg_pread_full(fd, buf, 100, fsize - 50, path),
                 "unexpected end of file at offset 2097152");
    TG_CHECK(strstr(tg_errmsg(), "short read") == NULL); /* a real end of file */
    free(buf);
    close(fd);
}

/* after = 2, count = 1: the third matching read fails, the others succeed. */
TG_TEST(after_and_count)
{
    tg_io_fault_clear();
    TG_CHECK_OK(tg_io_fault_parse("EIO@4096-8192,after=2,count=1"));
    tg_io_file_t *f = NULL;
    tg_io_t *io = NULL;
    TG_CHECK_OK(tg_io_file_open(&f, path, 0));
    tg_io_opts_t o = {.flags = have_uring ? 0 : TG_IO_FORCE_PREAD};
    TG_CHECK_OK(tg_io_create(&io, &o));
    if (f && io) {
        uint8_t buf[16];
        TG_CHECK_OK(tg_io_read(io, f, 5000, 16, buf));
        TG_CHECK_OK(tg_io_read(io, f, 5000, 16, buf));
        TG_CHECK_ERR(tg_io_read(io, f, 5000, 16, buf), "offset 5000");
        TG_CHECK_OK(tg_io_read(io, f, 5000, 16, buf));
        TG_CHECK(tio_bytes_ok(buf, 5000, 16));
    }
    tg_io_destroy(io);
    tg_io_file_close(f);
    tg_io_fault_clear();
}

/* EAGAIN is retried: three injected ones cost three more reads; an endless one gives up. */
TG_TEST(eagain_retry)
{
    tg_io_file_t *f = NULL;
    TG_CHECK_OK(tg_io_file_open(&f, path, 0));
    for (size_t b = 0; f && b < 3; b += 2) {
        if (!have_uring && !(backends[b] & TG_IO_FORCE_PREAD)) continue;
        tg_io_fault_clear();
        TG_CHECK_OK(tg_io_fault_parse("EAGAIN@0-1,count=3;EAGAIN@1M"));
        tg_io_opts_t o = {.flags = backends[b]};
        tg_io_t *io = NULL;
        TG_CHECK_OK(tg_io_create(&io, &o));
        if (!io) continue;
        uint8_t buf[100];
        TG_CHECK_OK(tg_io_read(io, f, 0, 100, buf));
        TG_CHECK(tio_bytes_ok(buf, 0, 100));
        tg_io_counts_t c;
        tg_io_stats_take(tg_io_stats(io), &c);
        TG_CHECK_EQ_U64(c.io_requests, 4);
        TG_CHECK_ERR(tg_io_read(io, f, (1u << 20) - 50, 100, buf), "Resource temporarily");
        TG_CHECK(strstr(tg_errmsg(), "offset 1048526") != NULL);
        tg_io_destroy(io);
    }
    tg_io_fault_clear();
    tg_io_file_close(f);
}

TG_TEST(parse_errors)
{
    TG_CHECK_ERR(tg_io_fault_parse("BOGUS@1"), "unknown error 'BOGUS'");
    TG_CHECK_ERR(tg_io_fault_parse("EIO"), "expected ERR@OFFSET");
    TG_CHECK_ERR(tg_io_fault_parse("EIO@x"), "bad offset");
    TG_CHECK_ERR(tg_io_fault_parse("EIO@5-2"), "empty byte range");
    TG_CHECK_ERR(tg_io_fault_parse("EIO@1,foo=2"), "unknown key 'foo'");
    TG_CHECK_ERR(tg_io_fault_parse("EIO@1,op=write"), "op must be");
    TG_CHECK_ERR(tg_io_fault_parse("SHORT@1,op=open"), "reads only");
    TG_CHECK_ERR(tg_io_fault_parse("SHORT@5-5"), "empty byte range");
    tg_io_fault_t ring_short = {.op = TG_IO_FAULT_RING, .short_read = 1};
    TG_CHECK_ERR(tg_io_fault_add(&ring_short), "reads only");
    tg_io_fault_clear();
    /* SHORT parses as a rule with no errno */
    TG_CHECK_OK(tg_io_fault_parse("SHORT@4K-8K,file=x.bin,after=1,count=2"));
    tg_io_fault_t bad = {.op = TG_IO_FAULT_READ, .lo = 0, .hi = 1, .err = 0};
    TG_CHECK_ERR(tg_io_fault_add(&bad), "positive errno");
    tg_io_fault_clear();
}

/* main() set TIERGNN_IO_FAULT before the first call: reads of env.bin at 3 MiB fail. */
TG_TEST(environment)
{
    tg_io_file_t *f = NULL, *g = NULL;
    tg_io_t *io = NULL;
    /* the rule was loaded with the first open below; clear() later must not drop it first */
    TG_CHECK_OK(tg_io_file_open(&f, env_path, 0));
    TG_CHECK_OK(tg_io_file_open(&g, path, 0));
    tg_io_opts_t o = {.flags = have_uring ? 0 : TG_IO_FORCE_PREAD};
    TG_CHECK_OK(tg_io_create(&io, &o));
    if (f && g && io) {
        uint8_t buf[10];
        TG_CHECK_ERR(tg_io_read(io, f, (3u << 20) + 1, 10, buf), "env.bin");
        TG_CHECK(strstr(tg_errmsg(), "offset 3145729") != NULL);
        TG_CHECK_OK(tg_io_read(io, g, (1u << 20), 10, buf)); /* other file: fine */
        TG_CHECK_OK(tg_io_read(io, f, 0, 10, buf));          /* other range: fine */
    }
    tg_io_destroy(io);
    tg_io_file_close(f);
    tg_io_file_close(g);
    tg_io_fault_clear();
}

/* An O_DIRECT open refused with EINVAL (as tmpfs did before Linux 6.6) falls back to buffered
 * reads with one warning for the whole process; other open errors are errors. */
TG_TEST(open_fallback)
{
    tg_io_fault_clear();
    TG_CHECK_OK(tg_io_fault_parse("EINVAL@0,op=open,file=data.bin"));
    tio_capture_t cap;
    tio_stderr_begin(&cap, dir);
    tg_io_file_t *f1 = NULL, *f2 = NULL;
    int rc1 = tg_io_file_open(&f1, path, 0);
    int rc2 = tg_io_file_open(&f2, path, 0);
    char *err = tio_stderr_end(&cap);
    TG_CHECK(rc1 == 0 && rc2 == 0);
    TG_CHECK_EQ_U64(tio_count(err, "O_DIRECT is not supported"), 1);
    TG_CHECK(strstr(err, "data.bin") != NULL);
    free(err);
    if (f1 && f2) {
        TG_CHECK(!tg_io_file_direct(f1) && !tg_io_file_direct(f2));
        tg_io_t *io = NULL;
        tg_io_opts_t o = {.flags = have_uring ? 0 : TG_IO_FORCE_PREAD};
        TG_CHECK_OK(tg_io_create(&io, &o));
        uint8_t buf[333];
        if (io) {
            TG_CHECK_OK(tg_io_read(io, f1, 12345, 333, buf));
            TG_CHECK(tio_bytes_ok(buf, 12345, 333));
        }
        tg_io_destroy(io);
    }
    tg_io_file_close(f1);
    tg_io_file_close(f2);
    tg_io_fault_clear();
    TG_CHECK_OK(tg_io_fault_parse("EACCES@0,op=open"));
    tg_io_file_t *f3 = NULL;
    TG_CHECK_ERR(tg_io_file_open(&f3, path, 0), "Permission denied");
    TG_CHECK(strstr(tg_errmsg(), path) != NULL);
    tg_io_fault_clear();
}

/* io_uring_queue_init failing (ENOSYS: old kernel; EPERM: io_uring_disabled or seccomp) falls
 * back to pread with one warning; the queue reads correctly. */
TG_TEST(ring_fallback)
{
    tg_io_fault_clear();
    TG_CHECK_OK(tg_io_fault_parse("ENOSYS@0,op=ring,count=1;EPERM@0,op=ring,count=1"));
    tio_capture_t cap;
    tio_stderr_begin(&cap, dir);
    tg_io_t *a = NULL, *b = NULL;
    int rca = tg_io_create(&a, NULL), rcb = tg_io_create(&b, NULL);
    char *err = tio_stderr_end(&cap);
    TG_CHECK(rca == 0 && rcb == 0);
    TG_CHECK_EQ_U64(tio_count(err, "io_uring is unavailable"), 1);
    TG_CHECK(strstr(err, "Function not implemented") != NULL);
    free(err);
    tg_io_file_t *f = NULL;
    TG_CHECK_OK(tg_io_file_open(&f, path, 0));
    if (a && b && f) {
        TG_CHECK(!strcmp(tg_io_backend(a), "pread") && !strcmp(tg_io_backend(b), "pread"));
        TG_CHECK(tg_io_depth(a) == 1);
        uint8_t buf[5000];
        TG_CHECK_OK(tg_io_read(a, f, 777777, 5000, buf));
        TG_CHECK(tio_bytes_ok(buf, 777777, 5000));
    }
    /* the rules are used up: the next queue gets io_uring again (where it exists) */
    tg_io_t *c = NULL;
    TG_CHECK_OK(tg_io_create(&c, NULL));
    if (c && have_uring) TG_CHECK(!strcmp(tg_io_backend(c), "io_uring"));
    tg_io_destroy(a);
    tg_io_destroy(b);
    tg_io_destroy(c);
    tg_io_file_close(f);
    tg_io_fault_clear();
}

int main(void)
{
    /* Before any tiergnn call: the variable is read once, at the first open or create. */
    setenv("TIERGNN_IO_FAULT", "EIO@3145728-3149824,file=env.bin", 1);
    dir = tio_begin("io_fault", &have_uring);
    path = tio_make_file(dir, "data.bin", fsize);
    env_path = tio_make_file(dir, "env.bin", 4u << 20);
    TG_RUN(environment);
    TG_RUN(parse_errors);
    TG_RUN(eio_sync);
    TG_RUN(eio_async);
    TG_RUN(after_and_count);
    TG_RUN(eagain_retry);
    TG_RUN(open_fallback);
    TG_RUN(ring_fallback);
    TG_RUN(short_read);
    TG_RUN(plain_reads);
    free(path);
    free(env_path);
    return tio_end(dir, have_uring);
}
