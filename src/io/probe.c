/* Device probe: what random 4 KiB reads and large sequential reads cost on the disk under a
 * file, measured with O_DIRECT so the page cache does not flatter it, cached per device. */
#include "io-impl.h"

#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <time.h>
#include <unistd.h>

#define PROBE_BS 4096u           /* random read size: one feature row of 1024 f32 */
#define SEQ_BS ((size_t)1 << 20) /* sequential read size */
#define SEQ_DEPTH 8u
#define DEFAULT_TIME_S 2.0
/* The random reads' share of the time budget (the rest: sequential), split over the depths in
 * these weights: depth 1 three shares, since it reads the fewest blocks in its time and this
 * disk's rate there drifts over tenths of a second (0.2 s windows back to back read 14.4-21.7 k/s,
 * 1 s windows 16.6-17.7 k/s), which an mmap run's faults at one or two in flight follow for a
 * whole epoch */
#define RAND_SHARE 0.7
#define CACHE_FORMAT 1

static const unsigned probe_depths[] = {1, 4, 16, 64, 128};
static const double probe_weights[] = {3, 1, 1, 1, 1};
#define NDEPTHS (sizeof probe_depths / sizeof probe_depths[0])
_Static_assert(sizeof probe_weights / sizeof probe_weights[0] == NDEPTHS,
               "a weight for each probed depth");
#define MAX_PROBE_DEPTH 128u

typedef struct probe {
    tg_io_file_t *f;
    struct io_uring ring;
    int uring;
    char *buf; /* MAX_PROBE_DEPTH x PROBE_BS for random reads, then SEQ_DEPTH x seq_bs */
    size_t buf_bytes;
    unsigned bs;      /* random read size: PROBE_BS or the file's alignment if larger */
    uint64_t nblocks; /* random reads pick one of these blocks */
    size_t seq_bs;
    tg_rng_t rng;
} probe_t;

/* One timed read in flight (or done, with pread). */
typedef struct slot {
    uint64_t off;
    unsigned len;
    double t_submit;
} slot_t;

static int read_failed(const probe_t *p, int res, const slot_t *s)
{
    if (res < 0)
        return tg_err(res, "%s: probe read of %u bytes at offset %llu failed: %s", p->f->path,
                      s->len, (unsigned long long)s->off, strerror(-res));
    return tg_err(-EIO, "%s: probe read at offset %llu returned %d of %u bytes (file truncated?)",
                  p->f->path, (unsigned long long)s->off, res, s->len);
}

/* Picks the next offset of a phase: random blocks, or the next sequential chunk. */
static uint64_t next_off(probe_t *p, int seq, uint64_t *cursor)
{
    if (!seq) return tg_rng_below(&p->rng, p->nblocks) * p->bs;
    uint64_t nchunks = p->f->size / p->seq_bs;
    uint64_t off = (*cursor % nchunks) * p->seq_bs;
    (*cursor)++;
    return off;
}

static void prep(probe_t *p, slot_t *s, unsigned i, uint64_t off, unsigned len)
{
    struct io_uring_sqe *sqe = io_uring_get_sqe(&p->ring);
    s->off = off;
    s->len = len;
    s->t_submit = tg_now();
    io_uring_prep_read(sqe, p->f->fd, p->buf + (size_t)i * len, len, off);
    io_uring_sqe_set_data64(sqe, i);
}

/* Keeps `depth` reads of `len` bytes in flight for `dur` seconds. Returns completed reads per
 * second, mean latency in microseconds and bytes per second. */
static int phase(probe_t *p, unsigned depth, unsigned len, int seq, double dur, double *iops,
                 double *lat_us, double *bps)
{
    slot_t slots[MAX_PROBE_DEPTH];
    uint64_t cursor = 0, n = 0;
    double lat = 0, t0 = tg_now(), end = t0 + dur, t_last = t0;
    if (!p->uring) {
        /* pread: depth 1, synchronous. */
        do {
            slot_t s = {next_off(p, seq, &cursor), len, tg_now()};
            ssize_t got = pread(p->f->fd, p->buf, len, (off_t)s.off);
            int res = got < 0 ? -errno : (int)got;
            if (res == -EINTR) continue;
            if (res != (int)len) return read_failed(p, res, &s);
            t_last = tg_now();
            lat += t_last - s.t_submit;
            n++;
        } while (t_last < end);
    } else {
        for (unsigned i = 0; i < depth; i++)
            prep(p, &slots[i], i, next_off(p, seq, &cursor), len);
        unsigned inflight = depth;
        int rc = io_uring_submit(&p->ring);
        while (inflight > 0) {
            if (rc < 0 && rc != -EINTR && rc != -EAGAIN && rc != -EBUSY)
                return tg_err(rc, "%s: probe: io_uring failed: %s", p->f->path, strerror(-rc));
            struct io_uring_cqe *cqe;
            rc = io_uring_wait_cqe(&p->ring, &cqe);
            if (rc < 0) continue;
            unsigned head, seen = 0;
            int bad = 0, bad_res = 0;
            unsigned bad_i = 0;
            double now = tg_now();
            io_uring_for_each_cqe(&p->ring, head, cqe)
            {
                unsigned i = (unsigned)io_uring_cqe_get_data64(cqe);
                seen++;
                inflight--;
                if (cqe->res != (int)slots[i].len && !bad) {
                    bad = 1;
                    bad_res = cqe->res;
                    bad_i = i;
                    continue;
                }
                lat += now - slots[i].t_submit;
                n++;
                t_last = now;
                if (now < end && !bad) {
                    prep(p, &slots[i], i, next_off(p, seq, &cursor), len);
                    inflight++;
                }
            }
            io_uring_cq_advance(&p->ring, seen);
            if (bad) {
                /* Let the others land before the buffer can be freed (submitting the ones
                 * prepared in this round first, or they would never complete). */
                io_uring_submit(&p->ring);
                while (inflight > 0 && io_uring_wait_cqe(&p->ring, &cqe) >= 0) {
                    io_uring_cqe_seen(&p->ring, cqe);
                    inflight--;
                }
                return read_failed(p, bad_res, &slots[bad_i]);
            }
            rc = io_uring_submit(&p->ring);
        }
    }
    double el = t_last - t0;
    *iops = el > 0 ? (double)n / el : 0;
    *lat_us = n ? 1e6 * lat / (double)n : 0;
    *bps = el > 0 ? (double)n * len / el : 0;
    return 0;
}

static int measure(const char *path, double time_s, tg_budget_t *budget, tg_io_probe_t *out)
{
    probe_t p;
    memset(&p, 0, sizeof p);
    int rc = tg_io_file_open(&p.f, path, 0);
    if (rc < 0) return rc;
    uint64_t reserved = 0;
    if (!p.f->direct) {
        rc = tg_err(-EINVAL,
                    "%s: cannot probe the device: the filesystem refuses O_DIRECT, so "
                    "reads would measure the page cache",
                    path);
        goto out;
    }
    p.bs = TG_MAX(PROBE_BS, p.f->align);
    p.nblocks = p.f->size / p.bs;
    if (p.nblocks == 0) {
        rc = tg_err(-EINVAL, "%s: too small to probe (%llu bytes, need at least %u)", path,
                    (unsigned long long)p.f->size, p.bs);
        goto out;
    }
    p.seq_bs = (size_t)TG_MIN((uint64_t)SEQ_BS, p.nblocks * p.bs);
    p.buf_bytes = TG_MAX((size_t)MAX_PROBE_DEPTH * p.bs, (size_t)SEQ_DEPTH * p.seq_bs);
    if (budget) {
        if ((rc = tg_budget_reserve(budget, p.buf_bytes, "device probe buffers")) < 0) goto out;
        reserved = p.buf_bytes;
    }
    p.buf = tg_aligned_alloc(TG_IO_STAGING_ALIGN, p.buf_bytes);
    if (!p.buf) {
        rc = tg_err(-ENOMEM, "device probe: cannot allocate %zu bytes", p.buf_bytes);
        goto out;
    }
    rc = tg_io_ring_init(&p.ring, MAX_PROBE_DEPTH);
    if (rc == 0)
        p.uring = 1;
    else
        tg_io_warn_ring_fallback(rc);
    tg_rng_seed(&p.rng, 0x9e3779b97f4a7c15ull ^ (uint64_t)p.f->dev);

    memset(out, 0, sizeof *out);
    out->dev_major = major(p.f->dev);
    out->dev_minor = minor(p.f->dev);
    unsigned nd = p.uring ? (unsigned)NDEPTHS : 1;
    /* without io_uring, depth 1 alone (pread), in the random reads' whole share */
    double t_start = tg_now(), t_rand = time_s * RAND_SHARE, t_seq = time_s - t_rand;
    double best = 0, bps, lat, wsum = 0;
    for (unsigned d = 0; d < nd; d++)
        wsum += probe_weights[d];
    for (unsigned d = 0; d < nd; d++) {
        out->depth[d] = probe_depths[d];
        double t = t_rand * probe_weights[d] / wsum;
        rc = phase(&p, probe_depths[d], p.bs, 0, t, &out->iops[d], &out->lat_us[d], &bps);
        if (rc < 0) goto out;
        best = TG_MAX(best, out->iops[d]);
    }
    out->ndepths = nd;
    /* The default depth: the smallest that gets 90% of the best rate - deeper queues only add
     * latency and staging memory. */
    for (unsigned d = 0; d < nd; d++)
        if (out->iops[d] >= 0.9 * best) {
            out->best_depth = out->depth[d];
            break;
        }
    double iops;
    rc = phase(&p, p.uring ? SEQ_DEPTH : 1, (unsigned)p.seq_bs, 1, t_seq, &iops, &lat, &bps);
    if (rc < 0) goto out;
    out->seq_bytes_per_s = bps;
    out->time_s = tg_now() - t_start;

out:
    if (p.uring) io_uring_queue_exit(&p.ring);
    free(p.buf);
    if (reserved) tg_budget_release(budget, reserved);
    tg_io_file_close(p.f);
    return rc;
}

/* ---------------------------------------------------------------- the cache file */

static int cache_dir(const tg_io_probe_opts_t *o, char *buf, size_t len)
{
    const char *xdg = getenv("XDG_CACHE_HOME"), *home = getenv("HOME");
    int n;
    if (o->cache_dir && *o->cache_dir)
        n = snprintf(buf, len, "%s", o->cache_dir);
    else if (xdg && xdg[0] == '/') /* the XDG spec ignores relative values */
        n = snprintf(buf, len, "%s/tiergnn", xdg);
    else if (home && *home)
        n = snprintf(buf, len, "%s/.cache/tiergnn", home);
    else
        return -ENOENT;
    return n > 0 && (size_t)n < len ? 0 : -ENAMETOOLONG;
}

/* Reads a cache file; 0 and *out filled if it is complete and for this device. */
static int cache_read(const char *path, unsigned maj, unsigned min, tg_io_probe_t *out)
{
    char *text;
    size_t len;
    int rc = tg_read_file(path, &text, &len);
    if (rc < 0) return rc;
    tg_io_probe_t r;
    memset(&r, 0, sizeof r);
    int format = 0, have_dev = 0, have_best = 0, have_seq = 0;
    unsigned lineno = 0;
    rc = 0;
    for (char *save = NULL, *line = strtok_r(text, "\n", &save); line && rc == 0;
         line = strtok_r(NULL, "\n", &save)) {
        lineno++;
        unsigned a, b;
        double x, y;
        if (line[0] == '#' || line[0] == 0) continue;
        if (sscanf(line, "format %d", &format) == 1) continue;
        if (sscanf(line, "device %u:%u", &a, &b) == 2) {
            have_dev = a == maj && b == min;
            continue;
        }
        if (sscanf(line, "depth %u iops %lf lat_us %lf", &a, &x, &y) == 3) {
            if (r.ndepths == TG_IO_PROBE_MAX_DEPTHS || a == 0 || !(x > 0) || !(y > 0)) {
                rc = -EINVAL;
                break;
            }
            r.depth[r.ndepths] = a;
            r.iops[r.ndepths] = x;
            r.lat_us[r.ndepths++] = y;
            continue;
        }
        if (sscanf(line, "best_depth %u", &a) == 1) {
            r.best_depth = a;
            have_best = a > 0;
            continue;
        }
        if (sscanf(line, "seq_bytes_per_s %lf", &x) == 1) {
            r.seq_bytes_per_s = x;
            have_seq = x > 0;
            continue;
        }
        if (sscanf(line, "time_s %lf", &x) == 1) {
            r.time_s = x;
            continue;
        }
        if (!strncmp(line, "probed_file ", 12)) continue;
        rc = -EINVAL;
    }
    free(text);
    if (rc == 0 &&
        (format != CACHE_FORMAT || !have_dev || !have_best || !have_seq || r.ndepths == 0))
        rc = -EINVAL;
    if (rc < 0)
        return tg_err(rc, "%s: not a valid probe cache for device %u:%u (line %u)", path, maj, min,
                      lineno);
    r.dev_major = maj;
    r.dev_minor = min;
    *out = r;
    return 0;
}

static int cache_write(const char *dir, const char *path, const char *probed,
                       const tg_io_probe_t *r)
{
    char text[4096];
    size_t n = 0;
    time_t now = time(NULL);
#define APPEND(...)                                                                                \
    do {                                                                                           \
        int k_ = snprintf(text + n, sizeof text - n, __VA_ARGS__);                                 \
        if (k_ < 0 || (size_t)k_ >= sizeof text - n)                                               \
            return tg_err(-ENAMETOOLONG, "%s: probe cache text too long", path);                   \
        n += (size_t)k_;                                                                           \
    } while (0)
    APPEND("# tiergnn device probe (random %u-byte O_DIRECT reads per queue depth; sequential "
           "1 MiB reads), measured at unix time %lld\n",
           PROBE_BS, (long long)now);
    APPEND("format %d\n", CACHE_FORMAT);
    APPEND("device %u:%u\n", r->dev_major, r->dev_minor);
    APPEND("probed_file %s\n", probed);
    APPEND("time_s %.3f\n", r->time_s);
    for (unsigned d = 0; d < r->ndepths; d++)
        APPEND("depth %u iops %.1f lat_us %.2f\n", r->depth[d], r->iops[d], r->lat_us[d]);
    APPEND("best_depth %u\n", r->best_depth);
    APPEND("seq_bytes_per_s %.0f\n", r->seq_bytes_per_s);
#undef APPEND
    int rc = tg_mkdir_p(dir);
    if (rc < 0) return rc;
    return tg_write_file_atomic(path, text, n);
}

int tg_io_probe_run(const char *path, const tg_io_probe_opts_t *opts, tg_io_probe_t *out)
{
    tg_io_probe_opts_t o = {0};
    if (opts) o = *opts;
    if (!(o.time_s > 0)) o.time_s = DEFAULT_TIME_S;

    struct stat st;
    if (stat(path, &st)) return tg_err(-errno, "%s: cannot stat: %s", path, strerror(errno));
    unsigned maj = major(st.st_dev), min = minor(st.st_dev);

    char dir[900], cpath[1024] = "";
    if (cache_dir(&o, dir, sizeof dir) == 0)
        snprintf(cpath, sizeof cpath, "%s/probe-%u-%u.txt", dir, maj, min);
    else
        tg_log_warn("device probe: no cache directory (set XDG_CACHE_HOME or HOME); the result "
                    "will not be kept");

    if (cpath[0] && !o.refresh && access(cpath, F_OK) == 0) {
        if (cache_read(cpath, maj, min, out) == 0) {
            out->from_cache = 1;
            snprintf(out->cache_path, sizeof out->cache_path, "%s", cpath);
            return 0;
        }
        tg_log_warn("%s; measuring again", tg_errmsg());
    }

    int rc = measure(path, o.time_s, o.budget, out);
    if (rc < 0) return rc;
    out->from_cache = 0;
    if (cpath[0]) {
        if (cache_write(dir, cpath, path, out) == 0)
            snprintf(out->cache_path, sizeof out->cache_path, "%s", cpath);
        else
            tg_log_warn("device probe: cannot cache the result: %s", tg_errmsg());
    }
    return 0;
}
