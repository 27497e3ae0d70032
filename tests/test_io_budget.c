/* Memory accounting: a queue's staging buffers are reserved against the caller's budget at
 * create and released at destroy; a budget too small is refused with -ENOMEM and a message;
 * per-submit bookkeeping is reserved while the submit's reads are in flight and released when
 * they complete; a pool reserves for each of its queues. */
#include "test_io_common.h"

static const char *dir;
static char *path;
static int have_uring;

TG_TEST(staging_reserved_and_released)
{
    static const unsigned backends[] = {0, TG_IO_FORCE_PREAD};
    for (size_t b = 0; b < 2; b++) {
        if (!have_uring && !(backends[b] & TG_IO_FORCE_PREAD)) continue;
        const unsigned depth = 32;
        const size_t max_read = 64 << 10;
        /* pread runs one read at a time and allocates one slot */
        uint64_t staging = (backends[b] & TG_IO_FORCE_PREAD) ? max_read : depth * max_read;
        tg_io_opts_t o = {.depth = depth, .max_read_bytes = max_read, .flags = backends[b]};

        tg_budget_t small;
        tg_budget_init(&small, staging - 1);
        o.budget = &small;
        tg_io_t *io = (tg_io_t *)&small; /* must be reset to NULL on failure */
        TG_CHECK_ERR(tg_io_create(&io, &o), "io staging buffers");
        TG_CHECK(io == NULL);
        TG_CHECK(strstr(tg_errmsg(), "--mem") != NULL);
        TG_CHECK_EQ_U64(small.used, 0);
        tg_budget_destroy(&small);

        tg_budget_t exact;
        tg_budget_init(&exact, staging);
        o.budget = &exact;
        TG_CHECK_OK(tg_io_create(&io, &o));
        TG_CHECK_EQ_U64(exact.used, staging);
        /* no room left for bookkeeping: submit refuses, nothing is queued */
        tg_io_file_t *f = NULL;
        TG_CHECK_OK(tg_io_file_open(&f, path, 0));
        if (io && f) {
            char buf[10];
            tg_io_req_t q = {.file = f, .off = 0, .len = 10, .dst = buf};
            TG_CHECK_ERR(tg_io_submit(io, &q, 1), "io bookkeeping for 1 requests");
            TG_CHECK_EQ_U64(tg_io_inflight(io), 0);
            TG_CHECK_EQ_U64(exact.used, staging);
        }
        tg_io_destroy(io);
        TG_CHECK_EQ_U64(exact.used, 0);
        TG_CHECK_EQ_U64(exact.peak, staging);
        tg_budget_destroy(&exact);

        /* ample budget: bookkeeping is held while reads are in flight, then released */
        tg_budget_t ample;
        tg_budget_init(&ample, 1u << 30);
        o.budget = &ample;
        TG_CHECK_OK(tg_io_create(&io, &o));
        if (io && f) {
            enum { N = 1000 };
            tg_io_req_t *q = calloc(N, sizeof *q);
            uint8_t *buf = malloc(N * 100);
            for (int i = 0; i < N; i++)
                q[i] = (tg_io_req_t){
                    .file = f, .off = (uint64_t)i * 1000, .len = 100, .dst = buf + i * 100};
            TG_CHECK_OK(tg_io_submit(io, q, N));
            TG_CHECK(ample.used > staging);
            TG_CHECK_OK(tg_io_wait(io));
            TG_CHECK_EQ_U64(ample.used, staging);
            TG_CHECK(ample.peak > staging);
            free(q);
            free(buf);
        }
        tg_io_destroy(io);
        TG_CHECK_EQ_U64(ample.used, 0);
        tg_budget_destroy(&ample);
        tg_io_file_close(f);
    }
}

TG_TEST(pool)
{
    tg_io_opts_t o = {
        .depth = 4, .max_read_bytes = 16 << 10, .flags = have_uring ? 0 : TG_IO_FORCE_PREAD};
    uint64_t per = have_uring ? 4 * (16 << 10) : (16 << 10);
    tg_budget_t b;
    tg_budget_init(&b, 3 * per - 1); /* two queues fit, the third does not */
    o.budget = &b;
    tg_io_pool_t *p = NULL;
    TG_CHECK_ERR(tg_io_pool_create(&p, 3, &o), "io staging buffers");
    TG_CHECK(p == NULL);
    TG_CHECK_EQ_U64(b.used, 0);
    tg_budget_destroy(&b);
    tg_budget_init(&b, 3 * per);
    TG_CHECK_OK(tg_io_pool_create(&p, 3, &o));
    TG_CHECK_EQ_U64(b.used, 3 * per);
    tg_io_pool_destroy(p);
    TG_CHECK_EQ_U64(b.used, 0);
    tg_budget_destroy(&b);
}

int main(void)
{
    dir = tio_begin("io_budget", &have_uring);
    path = tio_make_file(dir, "data.bin", 1u << 20);
    TG_RUN(staging_reserved_and_released);
    TG_RUN(pool);
    free(path);
    return tio_end(dir, have_uring);
}
