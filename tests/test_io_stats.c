/* Statistics are exact: io_requests, io_read_bytes and io_needed_bytes equal what the requests
 * imply, also when several threads count into one shared sink; io_wait_s is positive and never
 * more than the time spent in the calls; take and reset start a new period. The depth figures
 * are bounded: a queue's mean depth while busy is at most its depth, the union of the queues'
 * busy times (io_any_s) at most their sum and at least one queue's share, and all of them lie
 * within the calls' time. */
#include "test_io_common.h"

static const char *dir;
static char *path;
static const uint64_t fsize = 4u << 20; /* a multiple of every alignment: no short reads */
static int have_uring;

typedef struct work {
    tg_io_file_t *f;
    tg_io_stats_t *sink;
    unsigned flags;
    uint64_t seed;
    int nbatches;
    /* results */
    uint64_t want_requests, want_read, want_need;
    double call_s;
    int failures;
} work_t;

/* Random rows read in batches without merging: each request is exactly one disk read of its
 * aligned span, so the counters are known in advance. */
static void *worker(void *arg)
{
    work_t *w = arg;
    tg_io_opts_t o = {.depth = 16, .flags = w->flags | TG_IO_NO_MERGE, .stats = w->sink};
    tg_io_t *io;
    if (tg_io_create(&io, &o) < 0) {
        w->failures++;
        return NULL;
    }
    unsigned A = tg_io_file_align(w->f);
    tg_rng_t rng;
    tg_rng_seed(&rng, w->seed);
    enum { N = 64 };
    tg_io_req_t q[N];
    uint8_t *buf = malloc(N * 9000);
    for (int b = 0; b < w->nbatches; b++) {
        for (int i = 0; i < N; i++) {
            size_t len = (size_t)tg_rng_below(&rng, 9000); /* some 0: they read nothing */
            uint64_t off = tg_rng_below(&rng, fsize - len + 1);
            q[i] = (tg_io_req_t){.file = w->f, .off = off, .len = len, .dst = buf + i * 9000};
            if (len) {
                w->want_requests++;
                w->want_read += ((off + len + A - 1) / A - off / A) * A;
                w->want_need += len;
            }
        }
        double t0 = tg_now();
        if (tg_io_read_batch(io, q, N) < 0) w->failures++;
        w->call_s += tg_now() - t0;
    }
    free(buf);
    tg_io_destroy(io);
    return NULL;
}

TG_TEST(exact_single_queue)
{
    static const unsigned backends[] = {0, TG_IO_FORCE_PREAD};
    for (int buffered = 0; buffered < 2; buffered++)
        for (size_t b = 0; b < 2; b++) {
            if (!have_uring && !(backends[b] & TG_IO_FORCE_PREAD)) continue;
            tg_io_file_t *f = NULL;
            TG_CHECK_OK(tg_io_file_open(&f, path, buffered ? TG_IO_FILE_BUFFERED : 0));
            if (!f) return;
            tg_io_stats_t sink;
            tg_io_stats_init(&sink);
            work_t w = {.f = f, .sink = &sink, .flags = backends[b], .seed = 7 + b, .nbatches = 20};
            worker(&w);
            TG_CHECK(w.failures == 0);
            tg_io_counts_t c;
            tg_io_stats_snapshot(&sink, &c);
            TG_CHECK_EQ_U64(c.io_requests, w.want_requests);
            TG_CHECK_EQ_U64(c.io_read_bytes, w.want_read);
            TG_CHECK_EQ_U64(c.io_needed_bytes, w.want_need);
            /* io_uring serves page-cached buffered reads inline at submit: nothing to wait for */
            if (!buffered || (backends[b] & TG_IO_FORCE_PREAD)) TG_CHECK(c.io_wait_s > 0);
            TG_CHECK(c.io_wait_s <= w.call_s);
            /* one queue: busy and any are the same intervals, clocked on the same edges up to
             * a clock read; depth 16 at most (1 with pread) */
            TG_CHECK(c.io_busy_s <= w.call_s && c.io_any_s <= w.call_s);
            TG_CHECK(c.io_any_s <= c.io_busy_s * 1.05 + 1e-3 &&
                     c.io_busy_s <= c.io_any_s * 1.05 + 1e-3);
            TG_CHECK(c.io_depth_s <=
                     c.io_busy_s * ((backends[b] & TG_IO_FORCE_PREAD) ? 1.0001 : 16.0001));
            /* take returns the same and leaves zeros */
            tg_io_counts_t t, z;
            tg_io_stats_take(&sink, &t);
            TG_CHECK_EQ_U64(t.io_requests, c.io_requests);
            TG_CHECK_EQ_U64(t.io_read_bytes, c.io_read_bytes);
            TG_CHECK(t.io_wait_s == c.io_wait_s);
            tg_io_stats_snapshot(&sink, &z);
            TG_CHECK(z.io_requests == 0 && z.io_read_bytes == 0 && z.io_needed_bytes == 0 &&
                     z.io_wait_s == 0 && z.io_depth_s == 0 && z.io_busy_s == 0 && z.io_any_s == 0);
            TG_CHECK(t.io_any_s == c.io_any_s);
            tg_io_file_close(f);
        }
}

/* Two threads, two queues, one sink: the sum is exact. */
TG_TEST(exact_shared_sink)
{
    tg_io_file_t *f = NULL;
    TG_CHECK_OK(tg_io_file_open(&f, path, 0));
    if (!f) return;
    tg_io_stats_t sink;
    tg_io_stats_init(&sink);
    unsigned flags = have_uring ? 0 : TG_IO_FORCE_PREAD;
    work_t w[2] = {{.f = f, .sink = &sink, .flags = flags, .seed = 100, .nbatches = 30},
                   {.f = f, .sink = &sink, .flags = flags, .seed = 200, .nbatches = 30}};
    pthread_t th[2];
    for (int i = 0; i < 2; i++)
        pthread_create(&th[i], NULL, worker, &w[i]);
    for (int i = 0; i < 2; i++)
        pthread_join(th[i], NULL);
    TG_CHECK(w[0].failures == 0 && w[1].failures == 0);
    tg_io_counts_t c;
    tg_io_stats_take(&sink, &c);
    TG_CHECK_EQ_U64(c.io_requests, w[0].want_requests + w[1].want_requests);
    TG_CHECK_EQ_U64(c.io_read_bytes, w[0].want_read + w[1].want_read);
    TG_CHECK_EQ_U64(c.io_needed_bytes, w[0].want_need + w[1].want_need);
    TG_CHECK(c.io_wait_s > 0 && c.io_wait_s <= w[0].call_s + w[1].call_s);
    /* the union of two queues' busy times: no more than their sum, no less than half of it;
     * all reads in flight over it at most both depths */
    TG_CHECK(c.io_any_s > 0 && c.io_any_s <= c.io_busy_s * 1.0001 + 1e-4);
    TG_CHECK(c.io_any_s >= c.io_busy_s / 2 * 0.95 - 1e-3);
    TG_CHECK(c.io_any_s <= w[0].call_s + w[1].call_s);
    TG_CHECK(c.io_depth_s <= c.io_any_s * (have_uring ? 32.0001 : 2.0001));
    tg_io_file_close(f);
}

/* Without opts.stats each queue counts on its own; reset zeroes. */
TG_TEST(own_sinks)
{
    tg_io_file_t *f = NULL;
    tg_io_t *a = NULL, *b = NULL;
    TG_CHECK_OK(tg_io_file_open(&f, path, 0));
    TG_CHECK_OK(tg_io_create(&a, NULL));
    TG_CHECK_OK(tg_io_create(&b, NULL));
    if (!f || !a || !b) goto out;
    char buf[100];
    unsigned A = tg_io_file_align(f);
    TG_CHECK_OK(tg_io_read(a, f, 10, 100, buf));
    TG_CHECK_OK(tg_io_read(a, f, 3 * A + 10, 100, buf));
    TG_CHECK_OK(tg_io_read(b, f, 5, 1, buf));
    tg_io_counts_t ca, cb;
    tg_io_stats_snapshot(tg_io_stats(a), &ca);
    tg_io_stats_snapshot(tg_io_stats(b), &cb);
    TG_CHECK_EQ_U64(ca.io_requests, 2);
    TG_CHECK_EQ_U64(ca.io_read_bytes, 2 * A);
    TG_CHECK_EQ_U64(ca.io_needed_bytes, 200);
    TG_CHECK_EQ_U64(cb.io_requests, 1);
    TG_CHECK_EQ_U64(cb.io_needed_bytes, 1);
    tg_io_stats_reset(tg_io_stats(a));
    tg_io_stats_snapshot(tg_io_stats(a), &ca);
    TG_CHECK(ca.io_requests == 0 && ca.io_read_bytes == 0 && ca.io_needed_bytes == 0);
out:
    tg_io_destroy(a);
    tg_io_destroy(b);
    tg_io_file_close(f);
}

int main(void)
{
    dir = tio_begin("io_stats", &have_uring);
    path = tio_make_file(dir, "data.bin", fsize);
    TG_RUN(exact_single_queue);
    TG_RUN(exact_shared_sink);
    TG_RUN(own_sinks);
    free(path);
    return tio_end(dir, have_uring);
}
