/* The asynchronous use of a threaded pipeline: extractor threads with their own queues submit
 * mini-batches of unaligned feature rows and consume each row as it completes; several batches
 * in flight at once; a pool of queues shared by threads doing synchronous reads; destroying a
 * queue with reads in flight. */
#include "test_io_common.h"

static const char *dir;
static char *path;
static int have_uring;
static const size_t ROW = 516; /* 129 f32: rows straddle blocks */
static const uint64_t NROWS = 16000;

static int row_ok(const uint8_t *p, uint64_t row)
{
    return tio_bytes_ok(p, row * ROW, ROW);
}

typedef struct extractor {
    tg_io_file_t *f;
    unsigned flags, depth;
    uint64_t seed;
    int batches;
    int errors;
    uint64_t rows_done;
} extractor_t;

static void *extract(void *arg)
{
    extractor_t *x = arg;
    tg_io_t *io;
    tg_io_opts_t o = {.depth = x->depth, .flags = x->flags};
    if (tg_io_create(&io, &o) < 0) {
        x->errors++;
        return NULL;
    }
    enum { B = 512 };
    tg_io_req_t *q = calloc(2 * B, sizeof *q);
    uint8_t *out = malloc(2 * B * ROW);
    uint8_t *seen = calloc(2 * B, 1);
    tg_rng_t rng;
    tg_rng_seed(&rng, x->seed);
    /* Two mini-batches in flight: batch b goes into half b % 2 of q while batch b - 1 (the
     * other half) is still draining; b - 1 must be fully back before b + 1 reuses its half. */
    size_t remaining[2] = {0, 0};
    for (int b = 0; b < x->batches; b++) {
        int half = b & 1, last = b + 1 == x->batches;
        for (int i = 0; i < B; i++) {
            int k = half * B + i;
            uint64_t row = tg_rng_below(&rng, NROWS);
            q[k] = (tg_io_req_t){.file = x->f,
                                 .off = row * ROW,
                                 .len = ROW,
                                 .dst = out + (size_t)k * ROW,
                                 .user = (void *)(uintptr_t)row};
            seen[k] = 0;
        }
        if (tg_io_submit(io, q + half * B, B) < 0) {
            x->errors++;
            break;
        }
        remaining[half] = B;
        while (remaining[half ^ 1] > 0 || (last && remaining[half] > 0)) {
            tg_io_req_t *done[32];
            int n = tg_io_reap(io, done, 32, 1);
            if (n <= 0) {
                x->errors++;
                break;
            }
            for (int i = 0; i < n; i++) {
                int k = (int)(done[i] - q);
                if (done[i]->res != 0 || seen[k] ||
                    !row_ok(done[i]->dst, (uint64_t)(uintptr_t)done[i]->user))
                    x->errors++;
                seen[k] = 1;
                remaining[k / B]--;
                x->rows_done++;
            }
        }
    }
    if (tg_io_inflight(io) != 0) x->errors++;
    free(q);
    free(out);
    free(seen);
    tg_io_destroy(io);
    return NULL;
}

TG_TEST(extractors)
{
    tg_io_file_t *f = NULL;
    TG_CHECK_OK(tg_io_file_open(&f, path, 0));
    if (!f) return;
    static const unsigned backends[] = {0, TG_IO_FORCE_PREAD};
    static const unsigned depths[] = {1, 8, 64};
    for (size_t b = 0; b < 2; b++)
        for (size_t d = 0; d < 3; d++)
            for (int merge = 0; merge < 2; merge++) {
                if (!have_uring && !(backends[b] & TG_IO_FORCE_PREAD)) continue;
                if ((backends[b] & TG_IO_FORCE_PREAD) && d > 0) continue;
                extractor_t x[2];
                pthread_t th[2];
                for (int t = 0; t < 2; t++) {
                    x[t] = (extractor_t){.f = f,
                                         .flags = backends[b] | (merge ? 0 : TG_IO_NO_MERGE),
                                         .depth = depths[d],
                                         .seed = 31 * t + d,
                                         .batches = 6};
                    pthread_create(&th[t], NULL, extract, &x[t]);
                }
                for (int t = 0; t < 2; t++) {
                    pthread_join(th[t], NULL);
                    TG_CHECK(x[t].errors == 0);
                    TG_CHECK_EQ_U64(x[t].rows_done, 6 * 512);
                }
            }
    tg_io_file_close(f);
}

/* Reap bounds: max caps, min is clamped to what is in flight, max 0 returns at once. */
TG_TEST(reap_bounds)
{
    tg_io_file_t *f = NULL;
    tg_io_t *io = NULL;
    TG_CHECK_OK(tg_io_file_open(&f, path, 0));
    TG_CHECK_OK(tg_io_create(&io, &(tg_io_opts_t){.flags = have_uring ? 0 : TG_IO_FORCE_PREAD}));
    if (f && io) {
        tg_io_req_t q[5];
        uint8_t buf[5][ROW];
        for (int i = 0; i < 5; i++)
            q[i] = (tg_io_req_t){
                .file = f, .off = (uint64_t)i * 1000 * ROW, .len = ROW, .dst = buf[i]};
        tg_io_req_t *done[8];
        TG_CHECK(tg_io_reap(io, done, 8, 3) == 0); /* nothing in flight: no wait */
        TG_CHECK_OK(tg_io_submit(io, q, 5));
        TG_CHECK(tg_io_reap(io, done, 0, 5) == 0);
        int n = tg_io_reap(io, done, 2, 2);
        TG_CHECK(n == 2);
        int m = tg_io_reap(io, done, 8, 100); /* min above what is left: returns the rest */
        TG_CHECK(n + m == 5);
        TG_CHECK_EQ_U64(tg_io_inflight(io), 0);
        for (int i = 0; i < 5; i++)
            TG_CHECK(q[i].res == 0 && row_ok(buf[i], (uint64_t)i * 1000));
    }
    tg_io_destroy(io);
    tg_io_file_close(f);
}

typedef struct sampler {
    tg_io_pool_t *pool;
    tg_io_file_t *f;
    uint64_t seed;
    int errors;
} sampler_t;

static void *sample(void *arg)
{
    sampler_t *s = arg;
    tg_rng_t rng;
    tg_rng_seed(&rng, s->seed);
    enum { N = 40 };
    tg_io_req_t q[N];
    uint8_t buf[N][ROW];
    for (int it = 0; it < 25; it++) {
        uint64_t rows[N];
        for (int i = 0; i < N; i++) {
            rows[i] = tg_rng_below(&rng, NROWS);
            q[i] = (tg_io_req_t){.file = s->f, .off = rows[i] * ROW, .len = ROW, .dst = buf[i]};
        }
        if (tg_io_pool_read_batch(s->pool, q, N) < 0) s->errors++;
        for (int i = 0; i < N; i++)
            if (!row_ok(buf[i], rows[i])) s->errors++;
    }
    return NULL;
}

/* Four threads share a pool of two queues. */
TG_TEST(pool_shared)
{
    tg_io_file_t *f = NULL;
    tg_io_pool_t *p = NULL;
    TG_CHECK_OK(tg_io_file_open(&f, path, 0));
    tg_io_opts_t o = {.depth = 16, .flags = have_uring ? 0 : TG_IO_FORCE_PREAD};
    TG_CHECK_OK(tg_io_pool_create(&p, 2, &o));
    if (f && p) {
        sampler_t s[4];
        pthread_t th[4];
        for (int t = 0; t < 4; t++) {
            s[t] = (sampler_t){.pool = p, .f = f, .seed = 1000 + t};
            pthread_create(&th[t], NULL, sample, &s[t]);
        }
        for (int t = 0; t < 4; t++) {
            pthread_join(th[t], NULL);
            TG_CHECK(s[t].errors == 0);
        }
    }
    tg_io_pool_destroy(p);
    tg_io_file_close(f);
}

/* Destroying a queue with reads in flight waits for the kernel and frees everything (ASan
 * checks the frees; the requests' buffers are not touched afterwards). */
TG_TEST(destroy_in_flight)
{
    tg_io_file_t *f = NULL;
    TG_CHECK_OK(tg_io_file_open(&f, path, 0));
    for (int b = 0; f && b < 2; b++) {
        if (b == 0 && !have_uring) continue;
        tg_io_t *io = NULL;
        tg_budget_t bud;
        tg_budget_init(&bud, 0);
        tg_io_opts_t o = {.depth = 8, .budget = &bud, .flags = b ? TG_IO_FORCE_PREAD : 0};
        TG_CHECK_OK(tg_io_create(&io, &o));
        if (!io) continue;
        enum { N = 300 };
        tg_io_req_t *q = calloc(N, sizeof *q);
        uint8_t *buf = malloc(N * ROW);
        for (int i = 0; i < N; i++)
            q[i] = (tg_io_req_t){
                .file = f, .off = (uint64_t)i * 37 * ROW, .len = ROW, .dst = buf + (size_t)i * ROW};
        TG_CHECK_OK(tg_io_submit(io, q, N));
        tg_io_req_t *done[4];
        TG_CHECK(tg_io_reap(io, done, 4, 4) == 4);
        tg_io_destroy(io);
        TG_CHECK_EQ_U64(bud.used, 0);
        tg_budget_destroy(&bud);
        free(q);
        free(buf);
    }
    tg_io_file_close(f);
}

int main(void)
{
    dir = tio_begin("io_pipeline", &have_uring);
    path = tio_make_file(dir, "features.bin", NROWS * ROW);
    TG_RUN(extractors);
    TG_RUN(reap_bounds);
    TG_RUN(pool_shared);
    TG_RUN(destroy_in_flight);
    free(path);
    return tio_end(dir, have_uring);
}
