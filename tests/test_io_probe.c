/* Device probe: measures random 4 KiB O_DIRECT IOPS and latency at depths 1..128 and sequential
 * bandwidth within its time budget, picks the default depth, writes the per-device cache file
 * and reads it back; a damaged cache is measured again; refusals are errors with messages. */
#include "test_io_common.h"

#include <sys/stat.h>
#include <sys/sysmacros.h>

static const char *dir;
static char *path;
static int have_uring;

static void cache_file(const char *cdir, char *buf, size_t len)
{
    struct stat st;
    stat(path, &st);
    snprintf(buf, len, "%s/probe-%u-%u.txt", cdir, major(st.st_dev), minor(st.st_dev));
}

static void check_result(const tg_io_probe_t *r)
{
    static const unsigned want[] = {1, 4, 16, 64, 128};
    TG_CHECK_EQ_U64(r->ndepths, have_uring ? 5 : 1);
    double best = 0;
    for (unsigned d = 0; d < r->ndepths; d++) {
        TG_CHECK_EQ_U64(r->depth[d], want[d]);
        TG_CHECK(r->iops[d] > 0 && r->lat_us[d] > 0);
        best = TG_MAX(best, r->iops[d]);
    }
    int found = 0;
    for (unsigned d = 0; d < r->ndepths && !found; d++)
        if (r->depth[d] == r->best_depth) {
            found = 1;
            TG_CHECK(r->iops[d] >= 0.9 * best * 0.999); /* 0.999: rounding in the cache file */
            for (unsigned e = 0; e < d; e++)
                TG_CHECK(r->iops[e] < 0.9 * best * 1.001);
        }
    TG_CHECK(found);
    TG_CHECK(r->seq_bytes_per_s > 0);
}

TG_TEST(measure_and_cache)
{
    char cdir[4200], cpath[4400];
    snprintf(cdir, sizeof cdir, "%s/cache", dir);
    cache_file(cdir, cpath, sizeof cpath);
    tg_io_probe_opts_t o = {.time_s = 0.3, .cache_dir = cdir};
    tg_io_probe_t r, c;
    double t0 = tg_now();
    TG_CHECK_OK(tg_io_probe_run(path, &o, &r));
    double el = tg_now() - t0;
    TG_CHECK(el < 2.0); /* 0.3 s of measuring; the rest is set-up, draining, fsync */
    TG_CHECK(r.time_s > 0.25 && r.time_s < 1.5);
    TG_CHECK(r.from_cache == 0);
    TG_CHECK(!strcmp(r.cache_path, cpath));
    check_result(&r);
    fprintf(stderr, "  best depth %u, seq %.0f MB/s, depth-1 latency %.1f us\n", r.best_depth,
            r.seq_bytes_per_s / 1e6, r.lat_us[0]);
    for (unsigned d = 0; d < r.ndepths; d++)
        fprintf(stderr, "  depth %3u: %8.0f IOPS %8.1f us\n", r.depth[d], r.iops[d], r.lat_us[d]);

    char *text = NULL;
    TG_CHECK_OK(tg_read_file(cpath, &text, NULL));
    TG_CHECK(text && strstr(text, "best_depth ") && strstr(text, "seq_bytes_per_s "));
    free(text);
    char tmp[4500];
    snprintf(tmp, sizeof tmp, "%s.tmp", cpath);
    TG_CHECK(access(tmp, F_OK) != 0); /* written atomically: no temporary left */

    /* second call: from the cache, same figures */
    TG_CHECK_OK(tg_io_probe_run(path, &o, &c));
    TG_CHECK(c.from_cache == 1);
    TG_CHECK_EQ_U64(c.best_depth, r.best_depth);
    TG_CHECK_EQ_U64(c.ndepths, r.ndepths);
    TG_CHECK_EQ_U64(c.dev_major, r.dev_major);
    TG_CHECK_EQ_U64(c.dev_minor, r.dev_minor);
    for (unsigned d = 0; d < c.ndepths; d++)
        TG_CHECK_NEAR(c.iops[d], r.iops[d], 0.1);
    TG_CHECK_NEAR(c.seq_bytes_per_s, r.seq_bytes_per_s, 1.0);
    check_result(&c);

    /* refresh measures again */
    o.refresh = 1;
    TG_CHECK_OK(tg_io_probe_run(path, &o, &c));
    TG_CHECK(c.from_cache == 0);
    o.refresh = 0;

    /* a damaged cache costs a warning and a new measurement, which repairs it */
    tg_test_write_file(cpath, "format 1\ndevice 1:2\ngarbage\n");
    tio_capture_t cap;
    tio_stderr_begin(&cap, dir);
    int rc = tg_io_probe_run(path, &o, &c);
    char *err = tio_stderr_end(&cap);
    TG_CHECK(rc == 0 && c.from_cache == 0);
    TG_CHECK(strstr(err, "not a valid probe cache") != NULL);
    free(err);
    TG_CHECK_OK(tg_io_probe_run(path, &o, &c));
    TG_CHECK(c.from_cache == 1);
}

TG_TEST(xdg_cache_home)
{
    char xdg[4200], cpath[4400];
    snprintf(xdg, sizeof xdg, "%s/xdg", dir);
    setenv("XDG_CACHE_HOME", xdg, 1);
    snprintf(xdg + strlen(xdg), sizeof xdg - strlen(xdg), "/tiergnn");
    cache_file(xdg, cpath, sizeof cpath);
    tg_io_probe_opts_t o = {.time_s = 0.1};
    tg_io_probe_t r;
    TG_CHECK_OK(tg_io_probe_run(path, &o, &r));
    TG_CHECK(!strcmp(r.cache_path, cpath));
    TG_CHECK(access(cpath, F_OK) == 0);
    unsetenv("XDG_CACHE_HOME");
}

TG_TEST(refusals)
{
    char cdir[4200];
    snprintf(cdir, sizeof cdir, "%s/cache2", dir);
    tg_io_probe_opts_t o = {.time_s = 0.1, .cache_dir = cdir, .refresh = 1};
    tg_io_probe_t r;
    tg_budget_t b;
    tg_budget_init(&b, 1 << 20);
    o.budget = &b;
    TG_CHECK_ERR(tg_io_probe_run(path, &o, &r), "device probe buffers");
    TG_CHECK_EQ_U64(b.used, 0);
    tg_budget_destroy(&b);
    o.budget = NULL;

    char *tiny = tio_make_file(dir, "tiny.bin", 100);
    TG_CHECK_ERR(tg_io_probe_run(tiny, &o, &r), "too small to probe");
    free(tiny);

    TG_CHECK_OK(tg_io_fault_parse("EINVAL@0,op=open,file=probe.bin"));
    TG_CHECK_ERR(tg_io_probe_run(path, &o, &r), "refuses O_DIRECT");
    tg_io_fault_clear();

    char missing[4300];
    snprintf(missing, sizeof missing, "%s/missing.bin", dir);
    TG_CHECK_ERR(tg_io_probe_run(missing, &o, &r), "missing.bin");
}

/* A cache that cannot be written costs a warning, not the result. */
TG_TEST(uncacheable)
{
    tg_io_probe_opts_t o = {.time_s = 0.1, .cache_dir = path}; /* a regular file, not a dir */
    tg_io_probe_t r;
    tio_capture_t cap;
    tio_stderr_begin(&cap, dir);
    int rc = tg_io_probe_run(path, &o, &r);
    char *err = tio_stderr_end(&cap);
    TG_CHECK(rc == 0 && r.from_cache == 0 && r.cache_path[0] == 0);
    TG_CHECK(r.best_depth > 0 && r.seq_bytes_per_s > 0);
    TG_CHECK(strstr(err, "cannot cache the result") != NULL);
    free(err);
}

/* Without io_uring the probe measures depth 1 with pread. */
TG_TEST(without_uring)
{
    char cdir[4200];
    snprintf(cdir, sizeof cdir, "%s/cache3", dir);
    TG_CHECK_OK(tg_io_fault_parse("ENOSYS@0,op=ring,count=1"));
    tg_io_probe_opts_t o = {.time_s = 0.1, .cache_dir = cdir};
    tg_io_probe_t r;
    TG_CHECK_OK(tg_io_probe_run(path, &o, &r));
    TG_CHECK_EQ_U64(r.ndepths, 1);
    TG_CHECK_EQ_U64(r.depth[0], 1);
    TG_CHECK_EQ_U64(r.best_depth, 1);
    TG_CHECK(r.iops[0] > 0 && r.seq_bytes_per_s > 0);
    tg_io_fault_clear();
}

int main(void)
{
    dir = tio_begin("io_probe", &have_uring);
    path = tio_make_file(dir, "probe.bin", 16u << 20);
    TG_RUN(measure_and_cache);
    TG_RUN(xdg_cache_home);
    TG_RUN(refusals);
    TG_RUN(uncacheable);
    TG_RUN(without_uring);
    free(path);
    return tio_end(dir, have_uring);
}
