/* util/: errors, parsing, RNG, thread pool, queue, JSON, budget, atomic file writes. */
#include "tg_test.h"

#include <string.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

TG_TEST(errors)
{
    TG_CHECK(tg_err(-EINVAL, "file %s line %d", "x.csv", 3) == -EINVAL);
    TG_CHECK(!strcmp(tg_errmsg(), "file x.csv line 3"));
    TG_CHECK(tg_err_prefix(-EINVAL, "import") == -EINVAL);
    TG_CHECK(!strcmp(tg_errmsg(), "import: file x.csv line 3"));
    tg_err_clear();
    TG_CHECK(tg_err_prefix(-ENOENT, "open") == -ENOENT);
    TG_CHECK(strstr(tg_errmsg(), "open: ") == tg_errmsg());
}

TG_TEST(parse)
{
    uint64_t v;
    TG_CHECK_OK(tg_parse_size("512M", &v));
    TG_CHECK_EQ_U64(v, 512ull << 20);
    TG_CHECK_OK(tg_parse_size("2G", &v));
    TG_CHECK_EQ_U64(v, 2ull << 30);
    TG_CHECK_OK(tg_parse_size("1.5KiB", &v));
    TG_CHECK_EQ_U64(v, 1536);
    TG_CHECK_OK(tg_parse_size("100", &v));
    TG_CHECK_EQ_U64(v, 100);
    TG_CHECK_ERR(tg_parse_size("12Q", &v), "bad size");
    TG_CHECK_ERR(tg_parse_size("", &v), "empty size");
    TG_CHECK_ERR(tg_parse_size("-5M", &v), "bad size");
    TG_CHECK_ERR(tg_parse_u64("12x", &v, "--nodes"), "--nodes");
    TG_CHECK_ERR(tg_parse_u64("-1", &v, "--nodes"), "non-negative");
    double d;
    TG_CHECK_OK(tg_parse_double("1e-3", &d, "--lr"));
    TG_CHECK_NEAR(d, 1e-3, 1e-15);
    TG_CHECK_ERR(tg_parse_double("nan", &d, "--lr"), "finite");
    int64_t i;
    TG_CHECK_OK(tg_parse_i64("-1", &i, "--fanout"));
    TG_CHECK(i == -1);
}

TG_TEST(rng)
{
    tg_rng_t a, b;
    tg_rng_seed(&a, 42);
    tg_rng_seed(&b, 42);
    for (int k = 0; k < 100; k++)
        TG_CHECK(tg_rng_u64(&a) == tg_rng_u64(&b));
    tg_rng_seed2(&a, 42, 1);
    tg_rng_seed2(&b, 42, 2);
    TG_CHECK(tg_rng_u64(&a) != tg_rng_u64(&b));
    /* below() is in range and roughly uniform */
    uint64_t hist[10] = {0};
    for (int k = 0; k < 100000; k++) {
        uint64_t x = tg_rng_below(&a, 10);
        TG_CHECK(x < 10);
        hist[x]++;
    }
    for (int k = 0; k < 10; k++)
        TG_CHECK(hist[k] > 9000 && hist[k] < 11000);
    double s = 0, s2 = 0;
    for (int k = 0; k < 100000; k++) {
        double x = tg_rng_normal(&a);
        s += x;
        s2 += x * x;
    }
    TG_CHECK_NEAR(s / 100000, 0.0, 0.02);
    TG_CHECK_NEAR(s2 / 100000, 1.0, 0.03);
    uint64_t perm[100];
    for (int k = 0; k < 100; k++)
        perm[k] = (uint64_t)k;
    tg_rng_shuffle_u64(&a, perm, 100);
    int seen[100] = {0};
    for (int k = 0; k < 100; k++)
        seen[perm[k]]++;
    for (int k = 0; k < 100; k++)
        TG_CHECK(seen[k] == 1);
}

typedef struct {
    int *out;
} fill_ctx_t;

static void fill(void *ctx, size_t b, size_t e, int tid)
{
    fill_ctx_t *c = ctx;
    for (size_t i = b; i < e; i++)
        c->out[i] += (int)i + 1;
}

TG_TEST(pool)
{
    for (int nt = 1; nt <= 4; nt++) {
        tg_pool_t *p;
        TG_CHECK_OK(tg_pool_create(&p, nt));
        TG_CHECK(tg_pool_nthreads(p) == nt);
        int out[1000] = {0};
        fill_ctx_t c = {out};
        for (int rep = 0; rep < 50; rep++)
            tg_pool_for(p, 1000, fill, &c);
        for (int i = 0; i < 1000; i++)
            TG_CHECK(out[i] == 50 * (i + 1));
        tg_pool_for(p, 0, fill, &c);
        tg_pool_destroy(p);
    }
    tg_pool_t *p;
    TG_CHECK_ERR(tg_pool_create(&p, 0), "out of range");
}

static void *producer(void *arg)
{
    tg_queue_t *q = arg;
    for (intptr_t i = 1; i <= 1000; i++)
        if (tg_queue_push(q, (void *)i))
            break;
    tg_queue_close(q);
    return NULL;
}

TG_TEST(queue)
{
    tg_queue_t *q;
    TG_CHECK_OK(tg_queue_create(&q, 4));
    pthread_t t;
    pthread_create(&t, NULL, producer, q);
    intptr_t expect = 1;
    void *item;
    while (tg_queue_pop(q, &item) == 0) {
        TG_CHECK((intptr_t)item == expect);
        expect++;
    }
    TG_CHECK(expect == 1001);
    pthread_join(t, NULL);
    TG_CHECK(tg_queue_push(q, (void *)1) == -EPIPE);
    tg_queue_destroy(q);
    TG_CHECK_ERR(tg_queue_create(&q, 0), "capacity");
}

TG_TEST(json)
{
    tg_json_t j;
    char *s;
    tg_json_begin(&j);
    tg_json_int(&j, "epoch", 3);
    tg_json_num(&j, "loss", 0.5);
    tg_json_num(&j, "bad", NAN);
    tg_json_str(&j, "name", "a\"b\n");
    tg_json_bool(&j, "ok", 1);
    tg_json_uint(&j, "bytes", 18446744073709551615ull);
    tg_json_end(&j, NULL, &s);
    TG_CHECK(!strcmp(s, "{\"epoch\":3,\"loss\":0.5,\"bad\":null,\"name\":\"a\\\"b\\u000a\","
                        "\"ok\":true,\"bytes\":18446744073709551615}"));
    free(s);
}

TG_TEST(budget)
{
    tg_budget_t b;
    tg_budget_init(&b, 1000);
    TG_CHECK_OK(tg_budget_reserve(&b, 600, "cache"));
    TG_CHECK_ERR(tg_budget_reserve(&b, 500, "staging buffers"), "staging buffers");
    TG_CHECK(strstr(tg_errmsg(), "need at least --mem 1.07 KiB") != NULL);
    tg_budget_release(&b, 600);
    TG_CHECK_OK(tg_budget_reserve(&b, 1000, "cache"));
    TG_CHECK_EQ_U64(b.peak, 1000);
    tg_budget_destroy(&b);
    TG_CHECK(tg_peak_rss_bytes() > 0);
    TG_CHECK(tg_rss_bytes() > 0);
    TG_CHECK(tg_phys_mem_bytes() > 0);
}

TG_TEST(files)
{
    const char *dir = tg_test_tmpdir("util_files");
    char path[4096];
    snprintf(path, sizeof path, "%s/a/b/c", dir);
    TG_CHECK_OK(tg_mkdir_p(path));
    snprintf(path, sizeof path, "%s/a/b/c/file.txt", dir);
    TG_CHECK_OK(tg_write_file_atomic(path, "hello", 5));
    char *data;
    size_t len;
    TG_CHECK_OK(tg_read_file(path, &data, &len));
    TG_CHECK(len == 5 && !strcmp(data, "hello"));
    free(data);
    char tmp[4200];
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    TG_CHECK(access(tmp, F_OK) != 0); /* no temp file left behind */
    TG_CHECK_ERR(tg_read_file("/nonexistent/x", &data, &len), "/nonexistent/x");
    TG_CHECK_ERR(tg_write_file_atomic("/nonexistent/dir/x", "a", 1), "/nonexistent/dir/x");
    /* short read names file and offset */
    int fd = open(path, O_RDONLY);
    char buf[16];
    TG_CHECK_ERR(tg_pread_full(fd, buf, 10, 2, path), "offset 5");
    close(fd);
    snprintf(path, sizeof path, "%s/a", dir);
    TG_CHECK_OK(tg_rmtree(path));
    TG_CHECK(access(path, F_OK) != 0);
    TG_CHECK(tg_crc32(0, "123456789", 9) == 0xcbf43926u);
    char b[32];
    TG_CHECK(!strcmp(tg_fmt_bytes(1536, b, sizeof b), "1.50 KiB"));
}

int main(void)
{
    TG_RUN(errors);
    TG_RUN(parse);
    TG_RUN(rng);
    TG_RUN(pool);
    TG_RUN(queue);
    TG_RUN(json);
    TG_RUN(budget);
    TG_RUN(files);
    return tg_test_done();
}
