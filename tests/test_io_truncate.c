/* A file truncated under a run (or shorter than the caller believes) gives short reads: the
 * requests that need the missing bytes fail with a message naming the file, the offset where it
 * ends and the request's offset; requests inside the file still get their bytes. Both the
 * unaligned end (one short read) and the aligned end (a partial read, then an empty one). */
#include "test_io_common.h"

static const char *dir;
static int have_uring;

static void check_truncated(uint64_t new_size, int buffered, unsigned qflags)
{
    char *path = tio_make_file(dir, "t.bin", (1u << 20) + 300);
    tg_io_file_t *f = NULL;
    tg_io_t *io = NULL;
    TG_CHECK_OK(tg_io_file_open(&f, path, buffered ? TG_IO_FILE_BUFFERED : 0));
    TG_CHECK_OK(tg_io_create(&io, &(tg_io_opts_t){.depth = 8, .flags = qflags}));
    if (!f || !io) goto out;
    TG_CHECK_EQ_U64(tg_io_file_size(f), (1u << 20) + 300);
    TG_CHECK(truncate(path, (off_t)new_size) == 0);

    enum { N = 4 };
    uint64_t offs[N] = {100, new_size - 1000, new_size - 500, 900000};
    size_t lens[N] = {1000, 1000, 1000, 100};
    int want_ok[N] = {1, 1, 0, 0};
    uint8_t bufs[N][1000];
    tg_io_req_t q[N];
    for (int i = 0; i < N; i++)
        q[i] = (tg_io_req_t){.file = f, .off = offs[i], .len = lens[i], .dst = bufs[i]};
    char needle[96];
    snprintf(needle, sizeof needle, "the file is %llu bytes long", (unsigned long long)new_size);
    tg_err_clear();
    int rc = tg_io_read_batch(io, q, N);
    TG_CHECK(rc == -EIO);
    const char *msg = tg_errmsg();
    TG_CHECK(strstr(msg, path) != NULL);
    TG_CHECK(strstr(msg, needle) != NULL);
    TG_CHECK(strstr(msg, "unexpected end of file") != NULL);
    /* the request named is one of the two that run past the end */
    char r2[64], r3[64];
    snprintf(r2, sizeof r2, "offset %llu", (unsigned long long)offs[2]);
    snprintf(r3, sizeof r3, "offset %llu", (unsigned long long)offs[3]);
    TG_CHECK(strstr(msg, r2) || strstr(msg, r3));
    for (int i = 0; i < N; i++) {
        if (want_ok[i]) {
            TG_CHECK(q[i].res == 0);
            TG_CHECK(tio_bytes_ok(bufs[i], offs[i], lens[i]));
        } else {
            TG_CHECK(q[i].res == -EIO);
        }
    }
    /* alone, the beyond-the-end request reports itself */
    TG_CHECK_ERR(tg_io_read(io, f, 900000, 100, bufs[0]), "offset 900000");
    TG_CHECK(strstr(tg_errmsg(), path) != NULL);
    TG_CHECK(strstr(tg_errmsg(), needle) != NULL);
    if (buffered && qflags == 0) fprintf(stderr, "  message: %s\n", tg_errmsg());
out:
    tg_io_destroy(io);
    tg_io_file_close(f);
    unlink(path);
    free(path);
}

TG_TEST(truncated_unaligned_end)
{
    static const unsigned qflags[] = {0, TG_IO_NO_MERGE, TG_IO_FORCE_PREAD,
                                      TG_IO_FORCE_PREAD | TG_IO_NO_MERGE};
    for (int buffered = 0; buffered < 2; buffered++)
        for (size_t i = 0; i < 4; i++)
            if (have_uring || (qflags[i] & TG_IO_FORCE_PREAD))
                check_truncated(600000 + 77, buffered, qflags[i]);
}

TG_TEST(truncated_aligned_end)
{
    static const unsigned qflags[] = {0, TG_IO_NO_MERGE, TG_IO_FORCE_PREAD};
    for (int buffered = 0; buffered < 2; buffered++)
        for (size_t i = 0; i < 3; i++)
            if (have_uring || (qflags[i] & TG_IO_FORCE_PREAD))
                check_truncated(512 * 1024, buffered, qflags[i]);
}

/* A request past the end of an untouched file fails the same way: never zeros as data. */
TG_TEST(past_end)
{
    char *path = tio_make_file(dir, "p.bin", 10000);
    tg_io_file_t *f = NULL;
    tg_io_t *io = NULL;
    TG_CHECK_OK(tg_io_file_open(&f, path, 0));
    TG_CHECK_OK(tg_io_create(&io, &(tg_io_opts_t){.flags = have_uring ? 0 : TG_IO_FORCE_PREAD}));
    if (f && io) {
        uint8_t buf[200];
        TG_CHECK_OK(tg_io_read(io, f, 9800, 200, buf)); /* ends exactly at EOF */
        TG_CHECK(tio_bytes_ok(buf, 9800, 200));
        TG_CHECK_ERR(tg_io_read(io, f, 9900, 200, buf), "unexpected end of file at offset 10000");
        TG_CHECK_ERR(tg_io_read(io, f, 50000, 10, buf), "offset 50000");
    }
    tg_io_destroy(io);
    tg_io_file_close(f);
    free(path);
}

int main(void)
{
    dir = tio_begin("io_truncate", &have_uring);
    TG_RUN(truncated_unaligned_end);
    TG_RUN(truncated_aligned_end);
    TG_RUN(past_end);
    return tio_end(dir, have_uring);
}
